//! Bedrock errors to `llm_core::Error`: HTTP error responses before the
//! stream, and `exception` / `error` frames inside it.
//!
//! Both name an AWS exception (`ThrottlingException`, `throttlingException`); its message
//! keeps OpenClaw's human prefixes (`Throttling error: ...`) so string matching downstream
//! still works, and the kind, status and code make it typed.

use std::time::{Duration, SystemTime};

use aws_smithy_types::DateTime;
use aws_smithy_types::date_time::Format;
use llm_core::{Error, ErrorKind};
use llm_http::{ErrorBody, ErrorResponse};

use crate::PROVIDER;

/// The response header naming the exception (`ThrottlingException:http://...`).
const ERROR_TYPE_HEADER: &str = "x-amzn-ErrorType";

/// An HTTP error response. The exception name comes from the
/// `x-amzn-ErrorType` header (text before the first `:`), else from the `__type` or `code`
/// field of the body (text after `#`), else from the status; the message from the body
/// ([`ErrorBody`]).
pub(crate) fn http_error(response: ErrorResponse) -> Error {
    let (name, message) = name_and_message(&response);
    let ErrorResponse { status, retry_after, body, .. } = response;
    exception(&name, &message, status).with_retry_after(retry_after).with_body(body)
}

/// The exception name and message of an HTTP error response (see [`http_error`]).
fn name_and_message(response: &ErrorResponse) -> (String, String) {
    let read = ErrorBody::parse(&response.body);
    let name = response
        .headers
        .get(ERROR_TYPE_HEADER)
        .map(exception_name)
        .filter(|t| !t.is_empty())
        .or_else(|| read.error_type.as_deref().or(read.code.as_deref()).map(exception_name))
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| status_exception(response.status).to_owned());
    (name, read.message_or_status(response.status))
}

/// The codes AWS rejects a signature with when its time is off (the AWS SDKs' clock-skew
/// codes).
const CLOCK_SKEW_CODES: [&str; 6] = [
    "AuthFailure",
    "InvalidSignatureException",
    "RequestExpired",
    "RequestInTheFuture",
    "RequestTimeTooSkewed",
    "SignatureDoesNotMatch",
];

/// The server dates believed, in Unix seconds: 2000-01-01 to 2200-01-01.
const CREDIBLE_DATES: (i64, i64) = (946_684_800, 7_258_118_400);

/// How far a signature's time may be from the server's before AWS rejects it.
const ALLOWED_SKEW: Duration = Duration::from_secs(5 * 60);

/// The server's time, when `response` rejects a signature for its time: a 4xx with a
/// clock-skew code whose message says the signature expired, is not yet current or is too
/// skewed (a stale signature, or a local clock that is off), or whose `Date` header is more
/// than the allowed five minutes from `local_now`; the time is the `Date` header's. `None`
/// for every other response, and when the `Date` header is missing or not an HTTP date.
pub(crate) fn skew_rejection(
    response: &ErrorResponse,
    local_now: SystemTime,
) -> Option<SystemTime> {
    if !(400..500).contains(&response.status) {
        return None;
    }
    let (name, message) = name_and_message(response);
    if !CLOCK_SKEW_CODES.iter().any(|code| name.eq_ignore_ascii_case(code)) {
        return None;
    }
    let date = response.headers.get("date")?;
    let server = DateTime::from_str(date, Format::HttpDate).ok()?;
    // A server date outside these years is not believed: signing at it would fail anyway,
    // and a hostile peer must not move the clock anywhere it likes.
    if !(CREDIBLE_DATES.0..CREDIBLE_DATES.1).contains(&server.secs()) {
        return None;
    }
    let server = SystemTime::try_from(server).ok()?;
    let message = message.to_ascii_lowercase();
    let says_time = ["signature expired", "not yet current", "too skewed", "request has expired"]
        .iter()
        .any(|m| message.contains(m));
    let skew = server.duration_since(local_now).or_else(|e| Ok::<_, ()>(e.duration())).ok()?;
    (says_time || skew > ALLOWED_SKEW).then_some(server)
}

/// `ns#ThrottlingException:http://...` -> `ThrottlingException`.
fn exception_name(raw: &str) -> String {
    let after_hash = raw.rsplit_once('#').map_or(raw, |(_, name)| name);
    after_hash.split(':').next().unwrap_or_default().trim().to_owned()
}

/// ConverseStream's documented status for each exception.
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
    // A quota is not lifted by retrying; a throttled, failing or not yet ready model may
    // recover, whatever status carried the exception (AWS's retry classifiers go by the
    // code too): the status table alone would leave a `ThrottlingException` sent with a 400
    // unretried although its kind says it is retryable.
    match name.as_str() {
        "ServiceQuotaExceededException" => error.with_retryable(false),
        _ if kind.is_retryable() => error.with_retryable(true),
        _ => error,
    }
}

/// An `exception` frame: `:exception-type` and a `{"message"}` payload (an unknown type keeps
/// the raw payload as its message).
pub(crate) fn stream_exception(exception_type: &str, payload: &str) -> Error {
    let message = ErrorBody::parse(payload).message_or(payload.trim());
    exception(exception_type, &message, 0).with_body(payload.to_owned())
}

/// An unmodelled `error` frame: `:error-code` and `:error-message` (no prefix).
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
