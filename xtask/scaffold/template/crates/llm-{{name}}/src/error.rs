//! Wire error bodies to `llm_core::Error`: the codes this API names, to kinds.
//!
//! `llm_http::ErrorBody` reads a body whatever its envelope (JSON of any known shape, HTML,
//! text, empty, cut short, huge); what is here is the table.

use std::time::Duration;

use llm_core::{Error, ErrorKind};
use llm_http::ErrorBody;
use serde_json::Value;

use crate::PROVIDER;

/// The kind the body's code names, else the status's (replace with the API's codes).
fn kind_for(body: &ErrorBody, status: Option<u16>) -> ErrorKind {
    match body.label() {
        Some("invalid_api_key") => ErrorKind::Auth,
        Some("rate_limit_exceeded") => ErrorKind::RateLimited,
        _ if body.says_context_length() => ErrorKind::ContextLength,
        _ => status.map_or(ErrorKind::Provider, ErrorKind::from_status),
    }
}

/// An HTTP error response: the kind from the body's code or the status, the message from
/// the body, the raw body kept.
pub(crate) fn http_error(status: u16, retry_after: Option<Duration>, body: String) -> Error {
    let read = ErrorBody::parse(&body);
    let kind = kind_for(&read, Some(status));
    let mut error = Error::new(kind, PROVIDER, read.message_or_status(status))
        .with_status(status)
        .with_retry_after(retry_after);
    if let Some(code) = read.label() {
        error = error.with_code(code);
    }
    error.with_body(body)
}

/// An `{"type": "error", "message"}` event after HTTP 200 (the driver retries it only
/// while nothing has been shown).
pub(crate) fn stream_error(event: &Value) -> Error {
    let read = ErrorBody::from_value(event);
    Error::new(kind_for(&read, None), PROVIDER, read.message_or("stream error"))
        .with_body(event.to_string())
}
