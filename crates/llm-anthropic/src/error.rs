//! Anthropic error bodies -> [`llm_core::Error`]: the error types Anthropic names, to kinds.
//!
//! The envelope is `{"type":"error","error":{"type":"<error_type>","message":"…"},"request_id":"req_…"}`
//! (HTTP errors) or the same without `request_id` (an `event: error` after HTTP 200); it is read
//! by [`llm_http::ErrorBody`], whatever its shape. The raw body is always kept.

use std::time::Duration;

use llm_core::{Error, ErrorKind};
use llm_http::ErrorBody;

use crate::PROVIDER;

/// The error kind for an Anthropic error type, falling back to the HTTP status.
fn kind_for(body: &ErrorBody, status: Option<u16>) -> ErrorKind {
    let kind = match label(body) {
        Some("authentication_error" | "permission_error") => ErrorKind::Auth,
        Some("rate_limit_error") => ErrorKind::RateLimited,
        Some("overloaded_error" | "api_error" | "timeout_error") => ErrorKind::Overloaded,
        Some("invalid_request_error" | "not_found_error" | "request_too_large") => {
            ErrorKind::InvalidRequest
        }
        Some("billing_error") => ErrorKind::Provider,
        _ => status.map_or(ErrorKind::Provider, ErrorKind::from_status),
    };
    if matches!(kind, ErrorKind::InvalidRequest | ErrorKind::Provider) && body.says_context_length()
    {
        ErrorKind::ContextLength
    } else {
        kind
    }
}

/// Anthropic names an error by its `type`; `code` only where a gateway sends one instead.
fn label(body: &ErrorBody) -> Option<&str> {
    body.error_type.as_deref().or(body.code.as_deref())
}

/// A non-2xx response. Retryable per the status (408, 409, 429, 5xx, 529).
pub(crate) fn http_error(status: u16, retry_after: Option<Duration>, body: String) -> Error {
    let read = ErrorBody::parse(&body);
    let mut error =
        Error::new(kind_for(&read, Some(status)), PROVIDER, read.message_or_status(status))
            .with_status(status)
            .with_retry_after(retry_after);
    if let Some(label) = label(&read) {
        error = error.with_code(label);
    }
    if !body.is_empty() {
        error = error.with_body(body);
    }
    error
}

/// An `event: error` received after HTTP 200 (e.g. `overloaded_error`). Retryable per its kind,
/// which the driver honours only while nothing has been shown.
pub(crate) fn stream_error(data: &str) -> Error {
    let read = ErrorBody::parse(data);
    let mut error =
        Error::new(kind_for(&read, None), PROVIDER, read.message_or("Anthropic stream error"));
    if let Some(label) = label(&read) {
        error = error.with_code(label);
    }
    error.with_body(data)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests;
