//! Chat Completions error bodies to [`llm_core::Error`].
//!
//! The envelope is `{"error": {"message", "type", "param", "code"}}`, but
//! OpenAI-compatible servers vary: `error` may be a bare string, the body may be
//! a list of such envelopes (Gemini's compatibility endpoint), the fields may sit
//! at the top level (vLLM: `{"object": "error", "message", "type", "code": 400}`),
//! `code` may be a number, and a gateway may answer with plain text or HTML.
//! Everything is read leniently; the raw body is always kept.

use std::time::Duration;

use llm_core::error::is_retryable_status;
use llm_core::{Error, ErrorKind};
use serde_json::Value;

/// The interesting parts of an error object.
#[derive(Debug, Default, PartialEq)]
struct WireError {
    message: Option<String>,
    kind: Option<String>,
    code: Option<String>,
    numeric_code: Option<u16>,
}

fn as_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()).filter(|s| !s.is_empty()),
        other => Some(other.to_string()),
    }
}

/// Finds the error object inside a decoded body.
fn decode(value: &Value) -> WireError {
    let value = match value {
        Value::Array(items) => match items.first() {
            Some(first) => first,
            None => return WireError::default(),
        },
        other => other,
    };
    let inner = match value.get("error") {
        Some(Value::String(s)) => {
            return WireError { message: Some(s.clone()), ..WireError::default() };
        }
        Some(obj @ Value::Object(_)) => obj,
        _ => value,
    };
    let mut message =
        inner.get("message").and_then(as_text).or_else(|| inner.get("detail").and_then(as_text));
    // OpenRouter wraps the upstream provider's error in `metadata.raw`.
    if let Some(raw) = inner.get("metadata").and_then(|m| m.get("raw")).and_then(as_text) {
        message = Some(match message {
            Some(m) => format!("{m}\n{raw}"),
            None => raw,
        });
    }
    let (code, numeric_code) = match inner.get("code") {
        Some(Value::Number(n)) => {
            (Some(n.to_string()), n.as_u64().and_then(|n| u16::try_from(n).ok()))
        }
        Some(v) => (as_text(v), None),
        None => (None, None),
    };
    let kind = inner.get("type").and_then(as_text);
    WireError { message, kind, code, numeric_code }
}

fn is_context_length(wire: &WireError) -> bool {
    let code = wire.code.as_deref().unwrap_or_default();
    if code == "context_length_exceeded" || code == "string_above_max_length" {
        return true;
    }
    let message = wire.message.as_deref().unwrap_or_default().to_ascii_lowercase();
    [
        "maximum context length",
        "context length",
        "context_length_exceeded",
        "context window",
        "prompt is too long",
        "too many tokens",
        "reduce the length",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

fn is_quota(wire: &WireError) -> bool {
    wire.code.as_deref() == Some("insufficient_quota")
        || wire.kind.as_deref() == Some("insufficient_quota")
}

fn is_auth(wire: &WireError) -> bool {
    matches!(wire.code.as_deref(), Some("invalid_api_key"))
        || matches!(wire.kind.as_deref(), Some("authentication_error"))
}

/// An error for a non-2xx HTTP response.
pub(crate) fn http_error(
    provider: &str,
    status: u16,
    retry_after: Option<Duration>,
    body: String,
) -> Error {
    let parsed: Option<Value> = serde_json::from_str(&body).ok();
    let wire = parsed.as_ref().map(decode).unwrap_or_default();
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
    let message = wire.message.clone().unwrap_or_else(|| {
        let text = body.trim();
        if text.is_empty() || parsed.is_some() {
            format!("HTTP {status}")
        } else {
            let short: String = text.chars().take(200).collect();
            format!("HTTP {status}: {short}")
        }
    });
    let mut error = Error::new(kind, provider, message)
        .with_status(status)
        .with_retryable(retryable)
        .with_retry_after(retry_after)
        .with_body(body);
    if let Some(code) = wire.code.or(wire.kind) {
        error = error.with_code(code);
    }
    error
}

/// An error for a `{"error": …}` payload inside a 200 stream. `raw` is the event data.
pub(crate) fn stream_error(provider: &str, payload: &Value, raw: &str) -> Error {
    let wire = decode(payload);
    let label = wire.code.as_deref().or(wire.kind.as_deref()).unwrap_or_default();
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
            let kind_name = wire.kind.as_deref().unwrap_or_default();
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
    let message = wire.message.clone().unwrap_or_else(|| "Provider returned an error".to_owned());
    let mut error = Error::new(kind, provider, message).with_retryable(retryable).with_body(raw);
    if let Some(code) = wire.code.or(wire.kind) {
        error = error.with_code(code);
    }
    error
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests;
