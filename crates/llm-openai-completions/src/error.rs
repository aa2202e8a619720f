//! Chat Completions error bodies to [`llm_core::Error`] (`wire-formats.md` §2.e).
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
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_400_invalid_schema() {
        let body = r#"{
  "error": {
    "message": "Invalid schema for function 'get_weather': In context=(), object schema missing properties.",
    "type": "invalid_request_error",
    "param": "tools[0].function.parameters",
    "code": "invalid_function_parameters"
  }
}"#;
        let e = http_error("openai", 400, None, body.to_owned());
        assert_eq!(e.kind, ErrorKind::InvalidRequest);
        assert!(!e.retryable);
        assert_eq!(e.status, Some(400));
        assert_eq!(e.code.as_deref(), Some("invalid_function_parameters"));
        assert!(e.message.starts_with("Invalid schema for function 'get_weather'"));
        assert_eq!(e.body.as_deref(), Some(body));
    }

    #[test]
    fn auth_quota_rate_limit_context_length() {
        let e = http_error(
            "openai",
            401,
            None,
            json!({"error": {"message": "Incorrect API key provided: sk-te**********", "type": "invalid_request_error", "code": "invalid_api_key"}}).to_string(),
        );
        assert_eq!((e.kind, e.retryable), (ErrorKind::Auth, false));

        let e = http_error(
            "openai",
            429,
            Some(Duration::from_secs(2)),
            json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}).to_string(),
        );
        assert_eq!(
            (e.kind, e.retryable, e.retry_after),
            (ErrorKind::RateLimited, true, Some(Duration::from_secs(2)))
        );

        let e = http_error(
            "openai",
            429,
            None,
            json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}).to_string(),
        );
        assert_eq!((e.kind, e.retryable), (ErrorKind::RateLimited, false));

        let e = http_error(
            "openai",
            400,
            None,
            json!({"error": {"message": "This model's maximum context length is 128000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}).to_string(),
        );
        assert_eq!(e.kind, ErrorKind::ContextLength);
    }

    #[test]
    fn lenient_shapes() {
        // Gemini compatibility endpoint: a list of envelopes.
        let e = http_error(
            "google",
            400,
            None,
            r#"[{"error":{"code":400,"message":"Bad thing","status":"INVALID_ARGUMENT"}}]"#.into(),
        );
        assert_eq!(e.message, "Bad thing");
        assert_eq!(e.code.as_deref(), Some("400"));
        // vLLM: top-level fields.
        let e = http_error(
            "vllm",
            400,
            None,
            r#"{"object":"error","message":"bad","type":"BadRequestError","code":400}"#.into(),
        );
        assert_eq!(e.message, "bad");
        // Plain text from a gateway.
        let e = http_error("x", 502, None, "<html>502 Bad Gateway</html>".into());
        assert_eq!(e.message, "HTTP 502: <html>502 Bad Gateway</html>");
        assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));
        // Empty body, string error, object message.
        assert_eq!(http_error("x", 503, None, String::new()).message, "HTTP 503");
        assert_eq!(http_error("x", 500, None, r#"{"error":"boom"}"#.into()).message, "boom");
        assert_eq!(
            http_error("x", 500, None, r#"{"error":{"message":{"a":1}}}"#.into()).message,
            r#"{"a":1}"#
        );
    }

    #[test]
    fn stream_errors() {
        let raw = r#"{"error":{"message":"The server had an error processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}"#;
        let e = stream_error("openai", &serde_json::from_str(raw).unwrap(), raw);
        assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));
        assert_eq!(e.status, None);
        assert_eq!(e.body.as_deref(), Some(raw));

        let raw = r#"{"error":{"code":502,"message":"Upstream failed","metadata":{"raw":"{\"detail\":\"x\"}","provider_name":"P"}}}"#;
        let e = stream_error("openrouter", &serde_json::from_str(raw).unwrap(), raw);
        assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));
        assert_eq!(e.message, "Upstream failed\n{\"detail\":\"x\"}");

        let raw = r#"{"error":{"message":"nope","type":"invalid_request_error"}}"#;
        let e = stream_error("openai", &serde_json::from_str(raw).unwrap(), raw);
        assert_eq!((e.kind, e.retryable), (ErrorKind::InvalidRequest, false));
    }
}
