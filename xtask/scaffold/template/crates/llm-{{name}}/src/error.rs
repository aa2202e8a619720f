//! Wire error bodies to `llm_core::Error`.

use std::time::Duration;

use llm_core::{Error, ErrorKind};
use serde_json::Value;

use crate::PROVIDER;

/// An HTTP error response: the kind from the status, the message from the body
/// (`{"error": {"message": ..}}` when present), the raw body kept.
pub(crate) fn http_error(status: u16, retry_after: Option<Duration>, body: String) -> Error {
    let parsed = serde_json::from_str::<Value>(&body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/message"))
        .and_then(Value::as_str)
        .map_or_else(|| format!("HTTP {status}"), str::to_owned);
    Error::new(ErrorKind::from_status(status), PROVIDER, message)
        .with_status(status)
        .with_retry_after(retry_after)
        .with_body(body)
}

/// An `{"type": "error", "message"}` event after HTTP 200: never retried once
/// content may have been shown.
pub(crate) fn stream_error(event: &Value) -> Error {
    let message = event.get("message").and_then(Value::as_str).unwrap_or("stream error");
    Error::new(ErrorKind::Provider, PROVIDER, message).with_body(event.to_string())
}
