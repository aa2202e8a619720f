//! Google error bodies -> `llm_core::Error`.
//!
//! Envelope: `{"error": {"code": 400, "message": "...", "status": "INVALID_ARGUMENT",
//! "details": [...]}}`, sometimes wrapped in an array (the non-SSE framing) and
//! pretty-printed. Decoded leniently: every field optional, `code` a number or a
//! string, `message` a string or anything else.

use std::time::Duration;

use serde_json::Value;

use llm_core::error::{duration_from_secs, is_retryable_status};
use llm_core::{Error, ErrorKind};

use crate::PROVIDER;

/// The fields of a Google error object that matter here.
#[derive(Debug, Default, Clone, PartialEq)]
struct WireError {
    code: Option<u16>,
    message: Option<String>,
    status: Option<String>,
    /// `details[].reason` of `google.rpc.ErrorInfo` (`API_KEY_INVALID`, ...).
    reason: Option<String>,
    /// `details[].retryDelay` of `google.rpc.RetryInfo`.
    retry_delay: Option<Duration>,
}

/// Finds the error object in a body: `{"error": {...}}`, `[{"error": {...}}]` or a bare object.
fn find_error(body: &Value) -> Option<&Value> {
    match body {
        Value::Array(items) => items.iter().find_map(find_error),
        Value::Object(map) => match map.get("error") {
            Some(inner @ Value::Object(_)) => Some(inner),
            Some(_) => Some(body),
            None => None,
        },
        _ => None,
    }
}

fn parse_wire_error(error: &Value) -> WireError {
    let code = match error.get("code") {
        Some(Value::Number(n)) => n.as_u64().and_then(|c| u16::try_from(c).ok()),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    let message = match error.get("message") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Null) | None => None,
        Some(other) => Some(other.to_string()),
    };
    let status = error.get("status").and_then(Value::as_str).map(str::to_owned);
    let mut reason = None;
    let mut retry_delay = None;
    if let Some(Value::Array(details)) = error.get("details") {
        for d in details {
            if reason.is_none() {
                reason = d.get("reason").and_then(Value::as_str).map(str::to_owned);
            }
            if retry_delay.is_none() {
                retry_delay = d.get("retryDelay").and_then(Value::as_str).and_then(parse_duration);
            }
        }
    }
    WireError { code, message, status, reason, retry_delay }
}

/// A protobuf JSON duration: `"34s"`, `"1.5s"` (one too large saturates).
fn parse_duration(s: &str) -> Option<Duration> {
    let secs: f64 = s.trim().strip_suffix('s')?.parse().ok()?;
    if secs.is_infinite() {
        return None;
    }
    duration_from_secs(secs)
}

fn is_context_length(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("exceeds the maximum number of tokens")
        || m.contains("input token count")
        || m.contains("context window")
        || m.contains("too many tokens")
}

/// The kind for a Google error: status code first, refined by the gRPC status,
/// the `ErrorInfo` reason and the message.
fn kind_for(http_status: Option<u16>, wire: &WireError) -> ErrorKind {
    let message = wire.message.as_deref().unwrap_or("");
    if matches!(wire.reason.as_deref(), Some("API_KEY_INVALID" | "API_KEY_SERVICE_BLOCKED"))
        || message.contains("API key not valid")
    {
        return ErrorKind::Auth;
    }
    if is_context_length(message) {
        return ErrorKind::ContextLength;
    }
    match wire.status.as_deref() {
        Some("UNAUTHENTICATED" | "PERMISSION_DENIED") => return ErrorKind::Auth,
        Some("RESOURCE_EXHAUSTED") => return ErrorKind::RateLimited,
        Some("UNAVAILABLE" | "INTERNAL" | "DEADLINE_EXCEEDED") => return ErrorKind::Overloaded,
        Some("INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "NOT_FOUND" | "OUT_OF_RANGE") => {
            return ErrorKind::InvalidRequest;
        }
        _ => {}
    }
    match http_status.or(wire.code) {
        Some(code) => ErrorKind::from_status(code),
        None => ErrorKind::Provider,
    }
}

/// A non-2xx HTTP response.
pub(crate) fn http_error(status: u16, retry_after: Option<Duration>, body: String) -> Error {
    let parsed: Option<Value> = serde_json::from_str(&body).ok();
    let wire = parsed.as_ref().and_then(find_error).map(parse_wire_error).unwrap_or_default();
    let kind = kind_for(Some(status), &wire);
    let message = match &wire.message {
        Some(m) if !m.is_empty() => m.clone(),
        _ => format!("HTTP {status}"),
    };
    let mut error = Error::new(kind, PROVIDER, message).with_status(status);
    // A bad key is a 400 on Google: never worth retrying. Everything else follows the status.
    if kind == ErrorKind::Auth || kind == ErrorKind::ContextLength {
        error = error.with_retryable(false);
    } else {
        error = error.with_retryable(is_retryable_status(status));
    }
    if let Some(code) = wire.status.clone() {
        error = error.with_code(code);
    }
    error.with_retry_after(retry_after.or(wire.retry_delay)).with_body(body)
}

/// An `{"error": ...}` chunk inside a 200 stream. `raw` is the chunk's data.
pub(crate) fn stream_error(error: &Value, raw: &str) -> Error {
    let wire = parse_wire_error(error);
    let kind = kind_for(None, &wire);
    let message = match &wire.message {
        Some(m) if !m.is_empty() => m.clone(),
        _ => "Google stream error".to_owned(),
    };
    let retryable = match wire.code {
        Some(code) => {
            is_retryable_status(code) && kind != ErrorKind::Auth && kind != ErrorKind::ContextLength
        }
        None => kind.is_retryable(),
    };
    let mut e = Error::new(kind, PROVIDER, message).with_retryable(retryable).with_body(raw);
    if let Some(code) = wire.status {
        e = e.with_code(code);
    } else if let Some(code) = wire.code {
        e = e.with_code(code.to_string());
    }
    e.with_retry_after(wire.retry_delay)
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
