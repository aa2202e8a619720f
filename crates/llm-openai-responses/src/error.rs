//! OpenAI error bodies (HTTP and in-stream) to [`llm_core::Error`].
//!
//! The envelope is `{"error":{"message","type","param","code"}}` for HTTP errors; in a
//! 200 stream the `error` event is either nested (`{"type":"error","error":{...}}`, seen
//! live) or flat (`{"type":"error","code","message","param"}`, documented), and
//! `response.failed` carries `response.error: {code, message}`. Every field is optional:
//! `message` may be a string, an object or an array; `code` a string, a number or null: all of
//! it is read by [`llm_http::ErrorBody`]. What is here is the codes and types to kinds.

use std::time::Duration;

use llm_core::{Error, ErrorKind};
use llm_http::ErrorBody;
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
    let read = ErrorBody::parse(&body);
    let mut kind = ErrorKind::from_status(status);
    let mut retryable = None;
    if let Some((hint, retry)) = classify(&read) {
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
    let mut error = Error::new(kind, provider, read.message_or_status(status)).with_status(status);
    if let Some(code) = read.label() {
        error = error.with_code(code);
    }
    if let Some(retry) = retryable {
        error = error.with_retryable(retry);
    }
    error.with_retry_after(retry_after).with_body(body)
}

/// Maps an in-stream error object (the `error` event's nested or flat body, or
/// `response.error` of `response.failed`) to an error. `raw` is the event's data.
pub(crate) fn stream_error(object: &Value, raw: &str) -> Error {
    let read = ErrorBody::from_value(object);
    let (kind, retryable) = match classify(&read) {
        Some((kind, retry)) => (kind, retry.unwrap_or(kind.is_retryable())),
        None => (ErrorKind::Provider, false),
    };
    let message = match (read.label(), &read.message) {
        (Some(label), Some(message)) => format!("{label}: {message}"),
        (None, Some(message)) => message.clone(),
        (Some(label), None) => label.to_owned(),
        (None, None) => "Unknown error (no error details in response)".to_owned(),
    };
    let mut error = Error::new(kind, PROVIDER, message).with_retryable(retryable).with_body(raw);
    if let Some(label) = read.label() {
        error = error.with_code(label);
    }
    error
}

/// The kind (and a retry override) the provider's code, type or message implies.
fn classify(body: &ErrorBody) -> Option<(ErrorKind, Option<bool>)> {
    if body.says(&["context length", "context window", "maximum context", "too many tokens"]) {
        return Some((ErrorKind::ContextLength, Some(false)));
    }
    for label in [body.code.as_deref(), body.error_type.as_deref()].into_iter().flatten() {
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
