//! OpenAI error bodies (HTTP and in-stream) to [`llm_core::Error`].
//!
//! The envelope is `{"error":{"message","type","param","code"}}` for HTTP errors; in a
//! 200 stream the `error` event is either nested (`{"type":"error","error":{...}}`, seen
//! live) or flat (`{"type":"error","code","message","param"}`, documented), and
//! `response.failed` carries `response.error: {code, message}`. Every field is optional:
//! `message` may be a string, an object or an array; `code` a string, a number or null.

use std::time::Duration;

use llm_core::{Error, ErrorKind};
use serde_json::Value;

use crate::{AZURE_PROVIDER, PROVIDER};

/// Maps a non-2xx response (status, `retry-after`, raw body) to an error.
pub(crate) fn http_error(status: u16, retry_after: Option<Duration>, body: String) -> Error {
    http_error_of(PROVIDER, status, retry_after, body)
}

/// [`http_error`] for an Azure route: the provider is [`AZURE_PROVIDER`], and a missing
/// deployment names the deployment the request asked for (Azure's text does not).
pub(crate) fn azure_http_error(
    status: u16,
    retry_after: Option<Duration>,
    body: String,
    deployment: &str,
) -> Error {
    let mut error = http_error_of(AZURE_PROVIDER, status, retry_after, body);
    if error.code.as_deref() == Some("DeploymentNotFound") {
        error.message = format!("{} (deployment \"{deployment}\")", error.message);
    }
    error
}

fn http_error_of(
    provider: &str,
    status: u16,
    retry_after: Option<Duration>,
    body: String,
) -> Error {
    let parsed: Option<Value> = serde_json::from_str(&body).ok();
    let object = parsed.as_ref().map(|v| v.get("error").unwrap_or(v));
    let (message, code, kind_hint) = match object {
        Some(o) => describe(o),
        None => (None, None, None),
    };
    let mut kind = ErrorKind::from_status(status);
    let mut retryable = None;
    if let Some((hint, retry)) = classify(code.as_deref(), kind_hint.as_deref(), message.as_deref())
    {
        // The status decides, except where the body is more precise.
        match hint {
            ErrorKind::ContextLength if matches!(status, 400 | 413 | 422) => kind = hint,
            ErrorKind::RateLimited if status == 429 => retryable = retry,
            ErrorKind::Overloaded if kind == ErrorKind::Provider => kind = hint,
            // Azure's content filter rejects a prompt with 400 `code: "content_filter"`.
            ErrorKind::Refused if status == 400 => kind = hint,
            _ => {}
        }
    }
    let message = message.unwrap_or_else(|| match body.trim() {
        "" => format!("HTTP {status}"),
        text if text.len() <= 200 && parsed.is_none() => format!("HTTP {status}: {text}"),
        _ => format!("HTTP {status}"),
    });
    let mut error = Error::new(kind, provider, message).with_status(status).with_body(body);
    if let Some(code) = code.or(kind_hint) {
        error = error.with_code(code);
    }
    if let Some(retry) = retryable {
        error = error.with_retryable(retry);
    }
    error.with_retry_after(retry_after)
}

/// Maps an in-stream error object (the `error` event's nested or flat body, or
/// `response.error` of `response.failed`) to an error. `raw` is the event's data.
pub(crate) fn stream_error(object: &Value, raw: &str) -> Error {
    let (message, code, type_) = describe(object);
    let label = code.clone().or_else(|| type_.clone());
    let (kind, retryable) = match classify(code.as_deref(), type_.as_deref(), message.as_deref()) {
        Some((kind, retry)) => (kind, retry.unwrap_or(kind.is_retryable())),
        None => (ErrorKind::Provider, false),
    };
    let message = match (&label, message) {
        (Some(label), Some(message)) => format!("{label}: {message}"),
        (None, Some(message)) => message,
        (Some(label), None) => label.clone(),
        (None, None) => "Unknown error (no error details in response)".to_owned(),
    };
    let mut error = Error::new(kind, PROVIDER, message).with_retryable(retryable).with_body(raw);
    if let Some(label) = label {
        error = error.with_code(label);
    }
    error
}

/// `(message, code, type)` of an error object, each leniently read.
fn describe(object: &Value) -> (Option<String>, Option<String>, Option<String>) {
    let message = object.get("message").and_then(text_of).filter(|m| !m.is_empty());
    let code = object.get("code").and_then(scalar).filter(|c| !c.is_empty());
    let type_ = object.get("type").and_then(scalar).filter(|t| !t.is_empty() && t != "error");
    (message, code, type_)
}

fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let parts: Vec<String> = parts.iter().filter_map(text_of).collect();
            (!parts.is_empty()).then(|| parts.join("; "))
        }
        Value::Object(map) => match map.get("message") {
            Some(m) => text_of(m),
            None => Some(value.to_string()),
        },
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// The kind (and a retry override) the provider's code, type or message implies.
fn classify(
    code: Option<&str>,
    type_: Option<&str>,
    message: Option<&str>,
) -> Option<(ErrorKind, Option<bool>)> {
    let lower = message.map(str::to_ascii_lowercase).unwrap_or_default();
    if lower.contains("context length")
        || lower.contains("context window")
        || lower.contains("maximum context")
        || lower.contains("too many tokens")
    {
        return Some((ErrorKind::ContextLength, Some(false)));
    }
    for label in [code, type_].into_iter().flatten() {
        let found = match label {
            "context_length_exceeded" | "string_above_max_length" => {
                (ErrorKind::ContextLength, Some(false))
            }
            "insufficient_quota" | "billing_hard_limit_reached" => {
                (ErrorKind::RateLimited, Some(false))
            }
            "rate_limit_exceeded" | "rate_limit_error" | "tokens" | "requests" => {
                (ErrorKind::RateLimited, None)
            }
            "server_error"
            | "server_is_overloaded"
            | "overloaded"
            | "overloaded_error"
            | "service_unavailable"
            | "internal_error" => (ErrorKind::Overloaded, None),
            "invalid_api_key" | "authentication_error" | "unauthorized" | "permission_error" => {
                (ErrorKind::Auth, Some(false))
            }
            "content_filter" | "content_policy_violation" => (ErrorKind::Refused, Some(false)),
            "invalid_request_error"
            | "invalid_prompt"
            | "invalid_function_parameters"
            | "unsupported_parameter"
            | "unsupported_value"
            | "invalid_value"
            | "model_not_found" => (ErrorKind::InvalidRequest, Some(false)),
            _ => continue,
        };
        return Some(found);
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests;
