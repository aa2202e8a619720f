//! Chat Completions error bodies to [`llm_core::Error`].
//!
//! The envelope is `{"error": {"message", "type", "param", "code"}}`, but
//! OpenAI-compatible servers vary: `error` may be a bare string, the body may be
//! a list of such envelopes (Gemini's compatibility endpoint), the fields may sit
//! at the top level (vLLM: `{"object": "error", "message", "type", "code": 400}`),
//! `code` may be a number, and a gateway may answer with plain text or HTML.
//! [`llm_http::ErrorBody`] reads all of them; what is here is the codes and types to kinds.
//! The raw body is always kept.

use std::time::Duration;

use llm_core::raw::is_retryable_status;
use llm_core::{Error, ErrorKind};
use llm_http::ErrorBody;
use serde_json::Value;

fn is_context_length(wire: &ErrorBody) -> bool {
    matches!(wire.code.as_deref(), Some("context_length_exceeded" | "string_above_max_length"))
        || wire.says_context_length()
}

fn is_quota(wire: &ErrorBody) -> bool {
    wire.code.as_deref() == Some("insufficient_quota")
        || wire.error_type.as_deref() == Some("insufficient_quota")
}

fn is_auth(wire: &ErrorBody) -> bool {
    matches!(wire.code.as_deref(), Some("invalid_api_key"))
        || matches!(wire.error_type.as_deref(), Some("authentication_error"))
}

/// An error for a non-2xx HTTP response.
pub(crate) fn http_error(
    provider: &str,
    status: u16,
    retry_after: Option<Duration>,
    body: String,
) -> Error {
    let wire = ErrorBody::parse(&body);
    let mut kind = ErrorKind::from_status(status);
    let mut retryable = is_retryable_status(status);
    if matches!(kind, ErrorKind::InvalidRequest | ErrorKind::Provider) && is_context_length(&wire) {
        kind = ErrorKind::ContextLength;
    }
    if is_quota(&wire) {
        // Out of credit: a retry cannot help.
        kind = ErrorKind::RateLimited;
        retryable = false;
    }
    if is_auth(&wire) {
        kind = ErrorKind::Auth;
        retryable = false;
    }
    let mut error = Error::new(kind, provider, wire.message_or_status(status))
        .with_status(status)
        .with_retryable(retryable)
        .with_retry_after(retry_after)
        .with_body(body);
    if let Some(code) = wire.label() {
        error = error.with_code(code);
    }
    error
}

/// An error for a `{"error": …}` payload inside a 200 stream. `raw` is the event data.
pub(crate) fn stream_error(provider: &str, payload: &Value, raw: &str) -> Error {
    let wire = ErrorBody::from_value(payload);
    let label = wire.label().unwrap_or_default();
    let (kind, retryable) =
        if let Some(status) = wire.numeric_code.filter(|s| (400..600).contains(s)) {
            (ErrorKind::from_status(status), is_retryable_status(status))
        } else if is_quota(&wire) {
            (ErrorKind::RateLimited, false)
        } else if is_auth(&wire) {
            (ErrorKind::Auth, false)
        } else if is_context_length(&wire) {
            (ErrorKind::ContextLength, false)
        } else {
            let kind_name = wire.error_type.as_deref().unwrap_or_default();
            match (label, kind_name) {
                (_, "server_error" | "internal_error" | "api_error")
                | ("server_error" | "internal_error", _) => (ErrorKind::Overloaded, true),
                (_, "overloaded_error" | "overloaded") | ("overloaded", _) => {
                    (ErrorKind::Overloaded, true)
                }
                ("rate_limit_exceeded", _) | (_, "rate_limit_error" | "tokens" | "requests") => {
                    (ErrorKind::RateLimited, true)
                }
                (_, "invalid_request_error") => (ErrorKind::InvalidRequest, false),
                _ => (ErrorKind::Provider, false),
            }
        };
    let kind = if kind == ErrorKind::InvalidRequest && is_context_length(&wire) {
        ErrorKind::ContextLength
    } else {
        kind
    };
    let message = wire.message_or("Provider returned an error");
    let mut error = Error::new(kind, provider, message).with_retryable(retryable).with_body(raw);
    if let Some(code) = wire.label() {
        error = error.with_code(code);
    }
    error
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests;
