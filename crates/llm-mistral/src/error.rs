//! Mistral error bodies to [`llm_core::Error`].
//!
//! Mistral's error bodies vary by era and gateway layer (wire-formats §5.e):
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
/// retryable per the status (spec decision 7), raw body kept.
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
mod tests {
    use super::*;

    #[test]
    fn message_string_code_string() {
        let body = r#"{"object":"error","message":"Tool call id was toolu_01 but must be a-z, A-Z, 0-9, with a length of 9.","type":"invalid_function_call","param":null,"code":"3280","raw_status_code":400}"#;
        let e = http_error(400, None, body.into());
        assert_eq!(e.kind, ErrorKind::InvalidRequest);
        assert!(e.message.starts_with("Tool call id was toolu_01"));
        assert_eq!(e.code.as_deref(), Some("invalid_function_call"));
        assert_eq!(e.status, Some(400));
        assert!(!e.retryable);
        assert_eq!(e.body.as_deref(), Some(body));
    }

    #[test]
    fn message_object_code_null() {
        let body = r#"{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","max_completion_tokens"],"msg":"Extra inputs are not permitted","input":32000}]},"type":"invalid_request_error","param":null,"code":null}"#;
        let e = http_error(422, None, body.into());
        assert_eq!(e.kind, ErrorKind::InvalidRequest);
        assert_eq!(e.message, "body.max_completion_tokens: Extra inputs are not permitted");
        assert_eq!(e.code.as_deref(), Some("invalid_request_error"));
    }

    #[test]
    fn message_array_code_number() {
        let body = r#"{"object":"Error","detail":[{"loc":["body","x"],"msg":"bad"}],"message":[{"loc":["body","x"],"msg":"bad"},{"loc":["body",0],"msg":"worse"}],"code":3001}"#;
        let e = http_error(422, None, body.into());
        assert_eq!(e.message, "body.x: bad; body.0: worse");
        assert_eq!(e.code.as_deref(), Some("3001"));
    }

    #[test]
    fn detail_only_and_bare_message() {
        let e = http_error(401, None, r#"{"detail":"Unauthorized"}"#.into());
        assert_eq!((e.kind, e.message.as_str(), e.code), (ErrorKind::Auth, "Unauthorized", None));
        let e = http_error(401, None, r#"{"message":"Unauthorized","request_id":"abc"}"#.into());
        assert_eq!(e.message, "Unauthorized");
        let e = http_error(422, None, r#"{"detail":[{"loc":["body","stream_options"],"msg":"Extra inputs are not permitted"}]}"#.into());
        assert_eq!(e.message, "body.stream_options: Extra inputs are not permitted");
    }

    #[test]
    fn rate_limit_is_retryable_with_delay() {
        let body = r#"{"object":"error","message":"Rate limit exceeded","type":"rate_limited","param":null,"code":"1300","raw_status_code":429}"#;
        let e = http_error(429, Some(Duration::from_secs(2)), body.into());
        assert_eq!(e.kind, ErrorKind::RateLimited);
        assert!(e.retryable);
        assert_eq!(e.retry_after, Some(Duration::from_secs(2)));
        assert_eq!(e.code.as_deref(), Some("rate_limited"));
    }

    #[test]
    fn non_json_and_empty_bodies() {
        let e = http_error(503, None, "upstream connect error".into());
        assert_eq!(
            (e.kind, e.message.as_str(), e.retryable),
            (ErrorKind::Overloaded, "upstream connect error", true)
        );
        let e = http_error(500, None, String::new());
        assert_eq!(e.message, "HTTP 500");
        let long = "x".repeat(5000);
        let e = http_error(502, None, long);
        assert!(e.message.ends_with("... [truncated 1000 chars]"));
    }

    #[test]
    fn context_length_message() {
        let body = r#"{"object":"error","message":"Prompt contains 140000 tokens and 0 draft tokens, too large for model with 131072 maximum context length","type":"invalid_request_error","param":null,"code":null}"#;
        assert_eq!(http_error(400, None, body.into()).kind, ErrorKind::ContextLength);
    }

    #[test]
    fn odd_shapes_never_fail() {
        for body in [
            "[]",
            "null",
            "3",
            r#"{"message":null,"code":null}"#,
            r#"{"message":{"a":1}}"#,
            r#"{"message":[1,2]}"#,
            r#"{"error":{"message":"x","code":7}}"#,
        ] {
            let e = http_error(400, None, body.into());
            assert!(!e.message.is_empty(), "{body}");
        }
        assert_eq!(decode_body(r#"{"message":{"a":1}}"#).message.as_deref(), Some(r#"{"a":1}"#));
        assert_eq!(
            decode_body(r#"{"error":{"message":"x","code":7}}"#),
            DecodedError { message: Some("x".into()), code: Some("7".into()) }
        );
    }

    #[test]
    fn in_stream_error_object() {
        let raw = r#"{"object":"error","message":"Service tier capacity exceeded for this model.","type":"service_tier_capacity_exceeded","code":"3505"}"#;
        let e = stream_error(&serde_json::from_str(raw).unwrap(), raw);
        assert_eq!(e.kind, ErrorKind::Overloaded);
        assert!(e.retryable);
    }
}
