//! Google error bodies -> `llm_core::Error`: gRPC statuses and `ErrorInfo` reasons to kinds.
//!
//! Envelope: `{"error": {"code": 400, "message": "...", "status": "INVALID_ARGUMENT",
//! "details": [...]}}`, sometimes wrapped in an array (the non-SSE framing) and
//! pretty-printed; it is read by [`llm_http::ErrorBody`], whatever its shape.

use std::time::Duration;

use serde_json::Value;

use llm_core::raw::is_retryable_status;
use llm_core::{Error, ErrorKind};
use llm_http::ErrorBody;

use crate::PROVIDER;

/// The kind for a Google error: the `ErrorInfo` reason and the message first, then the gRPC
/// status, then the HTTP status (or the body's own `code`).
fn kind_for(http_status: Option<u16>, body: &ErrorBody) -> ErrorKind {
    if matches!(body.reason.as_deref(), Some("API_KEY_INVALID" | "API_KEY_SERVICE_BLOCKED"))
        || body.says(&["api key not valid"])
    {
        return ErrorKind::Auth;
    }
    if body.says(&[
        "exceeds the maximum number of tokens",
        "input token count",
        "context window",
        "too many tokens",
    ]) {
        return ErrorKind::ContextLength;
    }
    match body.status.as_deref() {
        Some("UNAUTHENTICATED" | "PERMISSION_DENIED") => ErrorKind::Auth,
        Some("RESOURCE_EXHAUSTED") => ErrorKind::RateLimited,
        Some("UNAVAILABLE" | "INTERNAL" | "DEADLINE_EXCEEDED") => ErrorKind::Overloaded,
        Some("INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "NOT_FOUND" | "OUT_OF_RANGE") => {
            ErrorKind::InvalidRequest
        }
        _ => http_status.or(body.numeric_code).map_or(ErrorKind::Provider, ErrorKind::from_status),
    }
}

/// A non-2xx HTTP response.
pub(crate) fn http_error(status: u16, retry_after: Option<Duration>, body: String) -> Error {
    let read = ErrorBody::parse(&body);
    let kind = kind_for(Some(status), &read);
    // A bad key is a 400 on Google: never worth retrying. Everything else follows the status.
    let retryable =
        !matches!(kind, ErrorKind::Auth | ErrorKind::ContextLength) && is_retryable_status(status);
    let mut error = Error::new(kind, PROVIDER, read.message_or_status(status))
        .with_status(status)
        .with_retryable(retryable);
    if let Some(code) = read.status {
        error = error.with_code(code);
    }
    error.with_retry_after(retry_after.or(read.retry_delay)).with_body(body)
}

/// An `{"error": ...}` chunk inside a 200 stream. `raw` is the chunk's data.
pub(crate) fn stream_error(error: &Value, raw: &str) -> Error {
    let read = ErrorBody::from_value(error);
    let kind = kind_for(None, &read);
    let retryable = match read.numeric_code {
        Some(code) => {
            is_retryable_status(code) && !matches!(kind, ErrorKind::Auth | ErrorKind::ContextLength)
        }
        None => kind.is_retryable(),
    };
    let message = read.message_or("Google stream error");
    let mut e = Error::new(kind, PROVIDER, message).with_retryable(retryable).with_body(raw);
    if let Some(code) = read.status.or(read.code) {
        e = e.with_code(code);
    }
    e.with_retry_after(read.retry_delay)
}

/// Finds an `{"error": ...}` in a stream chunk.
pub(crate) fn chunk_error(chunk: &Value) -> Option<&Value> {
    match chunk.get("error") {
        Some(e @ Value::Object(_)) => Some(e),
        Some(Value::String(_)) => Some(chunk),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests;
