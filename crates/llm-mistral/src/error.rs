//! Mistral error bodies to [`llm_core::Error`].
//!
//! Mistral's error bodies vary by era and gateway layer:
//!
//! - `{"object":"error","message":"…","type":"invalid_request_error","param":null,"code":"3280"}`
//! - `{"message":"Unauthorized","request_id":"…"}`, `{"detail":"Unauthorized"}`
//! - `{"object":"error","message":{"detail":[{"loc":[…],"msg":"…"}]},"type":…,"code":null}`
//! - `{"detail":[…],"message":[…],"type":"invalid_request_error","code":3001}` (numeric code)
//!
//! [`llm_http::ErrorBody`] reads every one of them; what is here is which label Mistral's
//! errors go by (its `type`, else its `code`) and the words that name a kind.

use std::time::Duration;

use llm_core::{Error, ErrorKind};
use llm_http::ErrorBody;
use serde_json::Value;

use crate::PROVIDER;

/// Maps a non-2xx response to an error: kind from the status and the body,
/// retryable per the status (408, 409, 429, 5xx, 529), raw body kept.
pub(crate) fn http_error(status: u16, retry_after: Option<Duration>, body: String) -> Error {
    let read = ErrorBody::parse(&body);
    let mut kind = ErrorKind::from_status(status);
    if matches!(kind, ErrorKind::InvalidRequest | ErrorKind::Provider) && is_context_length(&read) {
        kind = ErrorKind::ContextLength;
    }
    let mut error = Error::new(kind, PROVIDER, read.message_or_status(status))
        .with_status(status)
        .with_body(body)
        .with_retry_after(retry_after);
    if let Some(code) = label(&read) {
        error = error.with_code(code);
    }
    error
}

/// Maps an error object that arrived inside a 200 stream (a gateway-style
/// `{"error":{…}}` or `{"object":"error",…}` payload).
pub(crate) fn stream_error(payload: &Value, raw: &str) -> Error {
    let object = payload.get("error").filter(|e| e.is_object()).unwrap_or(payload);
    let read = ErrorBody::from_value(payload);
    let status = object
        .get("raw_status_code")
        .or_else(|| object.get("status"))
        .and_then(as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .filter(|s| (400..600).contains(s));
    let type_name = label(&read).unwrap_or_default().to_ascii_lowercase();
    let kind = if is_context_length(&read) {
        ErrorKind::ContextLength
    } else if type_name.contains("rate") {
        ErrorKind::RateLimited
    } else if type_name.contains("overload") || type_name.contains("capacity") {
        ErrorKind::Overloaded
    } else if let Some(status) = status {
        ErrorKind::from_status(status)
    } else {
        ErrorKind::Provider
    };
    let excerpt: String = raw.trim().chars().take(llm_http::MAX_EXCERPT_CHARS).collect();
    let message = read.message_or(&excerpt);
    let mut error = Error::new(kind, PROVIDER, message).with_body(raw.to_owned());
    if let Some(status) = status {
        error = error.with_status(status);
    }
    if let Some(code) = label(&read) {
        error = error.with_code(code);
    }
    error
}

/// The error for `finish_reason: "error"`: the server failed mid-generation.
/// Retryable, so the driver retries it when nothing was shown yet.
pub(crate) fn finish_reason_error() -> Error {
    Error::new(ErrorKind::Provider, PROVIDER, "Mistral finish_reason: error").with_retryable(true)
}

/// Mistral names an error by its `type`, else its `code` (a string or a number).
pub(crate) fn label(body: &ErrorBody) -> Option<&str> {
    body.error_type.as_deref().or(body.code.as_deref())
}

fn as_u64(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => {
            n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
        }
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn is_context_length(body: &ErrorBody) -> bool {
    body.says_context_length() || body.says(&["too large for model"])
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests;
