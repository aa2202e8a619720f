//! Bedrock errors to `llm_core::Error` (spec A.11): HTTP error responses before the
//! stream, and `exception` / `error` frames inside it.
//!
//! Both name an AWS exception (`ThrottlingException`, `throttlingException`); its message
//! keeps OpenClaw's human prefixes (`Throttling error: ...`) so string matching downstream
//! still works, and the kind, status and code make it typed.

use llm_core::{Error, ErrorKind};
use llm_http::ErrorResponse;
use serde_json::Value;

use crate::PROVIDER;

/// The response header naming the exception (`ThrottlingException:http://...`).
const ERROR_TYPE_HEADER: &str = "x-amzn-ErrorType";

/// An HTTP error response (spec A.11.3). The exception name comes from the
/// `x-amzn-ErrorType` header (text before the first `:`), else from the `__type` or `code`
/// field of the body (text after `#`), else from the status; the message from
/// `message`/`Message`.
pub(crate) fn http_error(response: ErrorResponse) -> Error {
    let ErrorResponse { status, headers, retry_after, body } = response;
    let parsed = serde_json::from_str::<Value>(&body).ok();
    let field = |names: &[&str]| {
        names.iter().find_map(|n| {
            parsed.as_ref().and_then(|v| v.get(*n)).and_then(Value::as_str).map(str::to_owned)
        })
    };
    let name = headers
        .get(ERROR_TYPE_HEADER)
        .map(exception_name)
        .filter(|t| !t.is_empty())
        .or_else(|| field(&["__type", "code", "Code"]).map(|t| exception_name(&t)))
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| status_exception(status).to_owned());
    let message = field(&["message", "Message"]).unwrap_or_else(|| format!("HTTP {status}"));
    exception(&name, &message, status).with_retry_after(retry_after).with_body(body)
}

/// `ns#ThrottlingException:http://...` -> `ThrottlingException`.
fn exception_name(raw: &str) -> String {
    let after_hash = raw.rsplit_once('#').map_or(raw, |(_, name)| name);
    after_hash.split(':').next().unwrap_or_default().trim().to_owned()
}

/// ConverseStream's documented status for each exception (spec A.11.3).
fn status_exception(status: u16) -> &'static str {
    match status {
        400 => "ValidationException",
        401 | 403 => "AccessDeniedException",
        404 => "ResourceNotFoundException",
        408 => "ModelTimeoutException",
        424 => "ModelErrorException",
        429 => "ThrottlingException",
        503 => "ServiceUnavailableException",
        500..=599 => "InternalServerException",
        _ => "UnknownError",
    }
}

/// The HTTP status an in-stream exception stands for.
fn exception_status(name: &str) -> Option<u16> {
    match name {
        "InternalServerException" => Some(500),
        "ModelStreamErrorException" => Some(424),
        "ValidationException" => Some(400),
        "ThrottlingException" => Some(429),
        "ServiceUnavailableException" => Some(503),
        _ => None,
    }
}

/// Input longer than the model takes, in the texts Bedrock and its models use.
fn is_context_overflow(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "input is too long",
        "too many input tokens",
        "max input token",
        "input token count exceeds",
        "exceeds the maximum number of input tokens",
        "model_context_window_exceeded",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// An AWS exception `name` (either casing) with `message`, from an HTTP response with
/// `status` (for stream exceptions pass the status it stands for, or 0 to look it up).
fn exception(name: &str, message: &str, status: u16) -> Error {
    let mut chars = name.chars();
    let name: String = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    };
    let prefix = match name.as_str() {
        "InternalServerException" => "Internal server error",
        "ModelStreamErrorException" => "Model stream error",
        "ValidationException" => "Validation error",
        "ThrottlingException" => "Throttling error",
        "ServiceUnavailableException" => "Service unavailable",
        other => other,
    };
    let kind = match name.as_str() {
        "ThrottlingException" | "ServiceQuotaExceededException" => ErrorKind::RateLimited,
        "ServiceUnavailableException" | "InternalServerException" | "ModelNotReadyException" => {
            ErrorKind::Overloaded
        }
        "ModelTimeoutException" => ErrorKind::Transport,
        "AccessDeniedException"
        | "UnrecognizedClientException"
        | "ExpiredTokenException"
        | "InvalidSignatureException" => ErrorKind::Auth,
        "ValidationException" | "ModelStreamErrorException" if is_context_overflow(message) => {
            ErrorKind::ContextLength
        }
        "ValidationException" | "ResourceNotFoundException" => ErrorKind::InvalidRequest,
        _ if status > 0 => ErrorKind::from_status(status),
        _ => ErrorKind::Provider,
    };
    let status = if status > 0 { Some(status) } else { exception_status(&name) };
    let mut error =
        Error::new(kind, PROVIDER, format!("{prefix}: {message}")).with_code(name.clone());
    if let Some(status) = status {
        error = error.with_status(status);
    }
    // A quota is not lifted by retrying; a model that is not ready yet may be.
    match name.as_str() {
        "ServiceQuotaExceededException" => error.with_retryable(false),
        "ModelNotReadyException" => error.with_retryable(true),
        _ => error,
    }
}

/// An `exception` frame: `:exception-type` and a `{"message"}` payload (an unknown type keeps
/// the raw payload as its message).
pub(crate) fn stream_exception(exception_type: &str, payload: &str) -> Error {
    let parsed = serde_json::from_str::<Value>(payload).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.get("message").or_else(|| v.get("Message")))
        .and_then(Value::as_str)
        .map_or_else(|| payload.to_owned(), str::to_owned);
    exception(exception_type, &message, 0).with_body(payload.to_owned())
}

/// An unmodelled `error` frame: `:error-code` and `:error-message` (no prefix, spec A.7).
pub(crate) fn stream_error(code: Option<&str>, message: Option<&str>) -> Error {
    let message = message.filter(|m| !m.is_empty()).unwrap_or("UnknownError");
    let mut error = Error::new(ErrorKind::Provider, PROVIDER, message).with_retryable(false);
    if let Some(code) = code.filter(|c| !c.is_empty()) {
        error = error.with_code(code);
    }
    error
}

#[cfg(test)]
mod tests;
