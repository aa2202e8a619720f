//! Anthropic error bodies -> [`llm_core::Error`].
//!
//! The envelope is `{"type":"error","error":{"type":"<error_type>","message":"…"},"request_id":"req_…"}`
//! (HTTP errors) or the same without `request_id` (an `event: error` after HTTP 200). Decoding is
//! lenient: the message may be a string, an object or an array, the type may be missing, and a
//! body that is not JSON at all is kept as the message. The raw body is always kept.

use std::time::Duration;

use llm_core::{Error, ErrorKind};
use serde_json::Value;

use crate::PROVIDER;

/// Longest non-JSON body quoted in an error message.
const MAX_QUOTED_BODY: usize = 500;

/// `(error type, message)` from an error body, when it has them.
fn parse_body(body: &str) -> (Option<String>, Option<String>) {
    let Ok(value) = serde_json::from_str::<Value>(body) else {
        let text = body.trim();
        if text.is_empty() {
            return (None, None);
        }
        let mut cut = text.len().min(MAX_QUOTED_BODY);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        return (None, text.get(..cut).map(str::to_owned));
    };
    let error = match value.get("error") {
        Some(e @ Value::Object(_)) => e,
        Some(Value::String(s)) => return (None, Some(s.clone())),
        _ => &value,
    };
    let kind = error
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| *t != "error")
        .or_else(|| error.get("code").and_then(Value::as_str))
        .map(str::to_owned);
    (kind, error.get("message").and_then(message_text))
}

fn message_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().filter_map(message_text).collect();
            (!parts.is_empty()).then(|| parts.join("; "))
        }
        Value::Object(m) => {
            m.get("message").and_then(message_text).or_else(|| Some(value.to_string()))
        }
        other => Some(other.to_string()),
    }
}

fn is_context_length(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "prompt is too long",
        "context window",
        "context length",
        "context limit",
        "maximum context",
        "too many tokens",
    ]
    .iter()
    .any(|needle| m.contains(needle))
}

/// The error kind for an Anthropic error type, falling back to the HTTP status.
fn kind_for(error_type: Option<&str>, message: &str, status: Option<u16>) -> ErrorKind {
    let kind = match error_type {
        Some("authentication_error" | "permission_error") => ErrorKind::Auth,
        Some("rate_limit_error") => ErrorKind::RateLimited,
        Some("overloaded_error" | "api_error" | "timeout_error") => ErrorKind::Overloaded,
        Some("invalid_request_error" | "not_found_error" | "request_too_large") => {
            ErrorKind::InvalidRequest
        }
        Some("billing_error") => ErrorKind::Provider,
        _ => match status {
            Some(s) => ErrorKind::from_status(s),
            None => ErrorKind::Provider,
        },
    };
    if matches!(kind, ErrorKind::InvalidRequest | ErrorKind::Provider) && is_context_length(message)
    {
        ErrorKind::ContextLength
    } else {
        kind
    }
}

/// A non-2xx response. Retryable per the status (408, 409, 429, 5xx, 529).
pub(crate) fn http_error(status: u16, retry_after: Option<Duration>, body: String) -> Error {
    let (error_type, message) = parse_body(&body);
    let message = message.unwrap_or_else(|| format!("Anthropic API returned HTTP {status}"));
    let kind = kind_for(error_type.as_deref(), &message, Some(status));
    let mut error =
        Error::new(kind, PROVIDER, message).with_status(status).with_retry_after(retry_after);
    if let Some(t) = error_type {
        error = error.with_code(t);
    }
    if !body.is_empty() {
        error = error.with_body(body);
    }
    error
}

/// An `event: error` received after HTTP 200 (e.g. `overloaded_error`). Retryable per its kind,
/// which the driver honours only while nothing has been shown.
pub(crate) fn stream_error(data: &str) -> Error {
    let (error_type, message) = parse_body(data);
    let message = message.unwrap_or_else(|| "Anthropic stream error".to_owned());
    let kind = kind_for(error_type.as_deref(), &message, None);
    let mut error = Error::new(kind, PROVIDER, message);
    if let Some(t) = error_type {
        error = error.with_code(t);
    }
    error.with_body(data)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests;
