//! Mistral error bodies to [`llm_core::Error`].
//!
//! Mistral's error bodies vary by era and gateway layer:
//!
//! - `{"object":"error","message":"…","type":"invalid_request_error","param":null,"code":"3280"}`
//! - `{"message":"Unauthorized","request_id":"…"}`, `{"detail":"Unauthorized"}`
//! - `{"object":"error","message":{"detail":[{"loc":[…],"msg":"…"}]},"type":…,"code":null}`
//! - `{"detail":[…],"message":[…],"type":"invalid_request_error","code":3001}` (numeric code)
//!
//! So `message` may be a string, object or array, `code` null, a string or a
//! number, and some bodies carry only `detail`. Everything decodes; anything
//! unrecognised falls back to the (truncated) raw body.

use std::time::Duration;

use llm_core::{Error, ErrorKind};
use serde_json::Value;

use crate::PROVIDER;

/// Longest body text used as an error message (OpenClaw's limit).
const MAX_BODY_CHARS: usize = 4000;

/// Maps a non-2xx response to an error: kind from the status and the body,
/// retryable per the status (408, 409, 429, 5xx, 529), raw body kept.
pub(crate) fn http_error(status: u16, retry_after: Option<Duration>, body: String) -> Error {
    let decoded = decode_body(&body);
    let message = decoded
        .message
        .clone()
        .filter(|m| !m.trim().is_empty())
        .or_else(|| (!body.trim().is_empty()).then(|| truncate(body.trim(), MAX_BODY_CHARS)))
        .unwrap_or_else(|| format!("HTTP {status}"));
    let mut kind = ErrorKind::from_status(status);
    if matches!(kind, ErrorKind::InvalidRequest | ErrorKind::Provider)
        && is_context_length(&message)
    {
        kind = ErrorKind::ContextLength;
    }
    let mut error = Error::new(kind, PROVIDER, message)
        .with_status(status)
        .with_body(body)
        .with_retry_after(retry_after);
    if let Some(code) = decoded.code {
        error = error.with_code(code);
    }
    error
}

/// Maps an error object that arrived inside a 200 stream (a gateway-style
/// `{"error":{…}}` or `{"object":"error",…}` payload).
pub(crate) fn stream_error(payload: &Value, raw: &str) -> Error {
    let object = payload.get("error").filter(|e| e.is_object()).unwrap_or(payload);
    let decoded = decode_value(object);
    let message = decoded
        .message
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| truncate(raw.trim(), MAX_BODY_CHARS));
    let status = object
        .get("raw_status_code")
        .or_else(|| object.get("status"))
        .and_then(as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .filter(|s| (400..600).contains(s));
    let type_name = decoded.code.as_deref().unwrap_or_default().to_ascii_lowercase();
    let kind = if is_context_length(&message) {
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
    let mut error = Error::new(kind, PROVIDER, message).with_body(raw.to_owned());
    if let Some(status) = status {
        error = error.with_status(status);
    }
    if let Some(code) = decoded.code {
        error = error.with_code(code);
    }
    error
}

/// The error for `finish_reason: "error"`: the server failed mid-generation.
/// Retryable, so the driver retries it when nothing was shown yet.
pub(crate) fn finish_reason_error() -> Error {
    Error::new(ErrorKind::Provider, PROVIDER, "Mistral finish_reason: error").with_retryable(true)
}

/// What an error body says, as far as it can be understood.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct DecodedError {
    /// Human-readable message.
    pub(crate) message: Option<String>,
    /// The error `type`, else the `code` (string or number).
    pub(crate) code: Option<String>,
}

/// Decodes an error body leniently; never fails.
pub(crate) fn decode_body(body: &str) -> DecodedError {
    match serde_json::from_str::<Value>(body) {
        Ok(value) => decode_value(&value),
        Err(_) => DecodedError::default(),
    }
}

fn decode_value(value: &Value) -> DecodedError {
    let Some(object) = value.as_object() else {
        return DecodedError { message: message_text(value), code: None };
    };
    // Some gateways nest everything under `error`.
    if let Some(inner) = object.get("error").filter(|e| e.is_object()) {
        let nested = decode_value(inner);
        if nested.message.is_some() {
            return nested;
        }
    }
    let message = object
        .get("message")
        .and_then(message_text)
        .or_else(|| object.get("detail").and_then(message_text))
        .or_else(|| object.get("msg").and_then(message_text));
    let code = object
        .get("type")
        .and_then(scalar_text)
        .or_else(|| object.get("code").and_then(scalar_text));
    DecodedError { message, code }
}

/// Text of a `message` / `detail` field: a string, a validation `detail` list,
/// an object holding one of those, or (last resort) compact JSON.
fn message_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().filter_map(detail_item).collect();
            if parts.is_empty() {
                (!items.is_empty()).then(|| value.to_string())
            } else {
                Some(parts.join("; "))
            }
        }
        Value::Object(map) => map
            .get("detail")
            .and_then(message_text)
            .or_else(|| map.get("message").and_then(message_text))
            .or_else(|| detail_item(value))
            .or_else(|| Some(value.to_string())),
        other => Some(other.to_string()),
    }
}

/// One validation entry: `loc.joined: msg`, or a plain string.
fn detail_item(item: &Value) -> Option<String> {
    match item {
        Value::String(s) => Some(s.clone()),
        Value::Object(map) => {
            let msg = map.get("msg").or_else(|| map.get("message")).and_then(Value::as_str)?;
            let loc: Vec<String> = map
                .get("loc")
                .and_then(Value::as_array)
                .map(|parts| parts.iter().filter_map(scalar_text).collect())
                .unwrap_or_default();
            if loc.is_empty() {
                Some(msg.to_owned())
            } else {
                Some(format!("{}: {msg}", loc.join(".")))
            }
        }
        _ => None,
    }
}

fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
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

fn is_context_length(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("context length")
        || m.contains("context window")
        || m.contains("too large for model")
        || m.contains("maximum context")
        || m.contains("prompt is too long")
}

/// At most `max` characters, with OpenClaw's truncation marker.
fn truncate(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head}... [truncated {} chars]", total - max)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests;
