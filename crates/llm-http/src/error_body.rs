//! What an error body says, read leniently: one reader for every provider's envelopes.
//!
//! Providers, their gateways and the OpenAI-compatible servers answer an error with one of a
//! few envelopes, and every field in them varies:
//!
//! - `{"error": {"message", "type", "code", "param"}}` (OpenAI, Anthropic, most gateways), with
//!   `code` a string, a number or null, and `message` a string, an object or a list;
//! - `{"error": "text"}`, or the fields at the top level (`{"object": "error", "message",
//!   "type", "code": 400}` of vLLM and Mistral, `{"detail": "Unauthorized"}`, FastAPI's
//!   `{"detail": [{"loc": [..], "msg": ".."}]}`);
//! - a list of such envelopes (Google's non-SSE framing, Gemini's compatibility endpoint);
//! - Google's `{"error": {"code": 400, "message", "status", "details": [{"reason"},
//!   {"retryDelay": "34s"}]}}`, AWS's `{"__type": "ns#Name", "Message"}`;
//! - OpenRouter's upstream error in `error.metadata.raw`;
//! - no JSON at all: an HTML page of a proxy, plain text, nothing, or a body cut short.
//!
//! [`ErrorBody::parse`] reads any of them and never fails. Whatever it keeps is bounded: a
//! message longer than [`MAX_MESSAGE_CHARS`] is cut with a marker, the excerpt of a body that
//! is not JSON is at most [`MAX_EXCERPT_CHARS`], and nesting is bounded by `serde_json`'s
//! recursion limit (a deeper body is read as text). A provider's `error.rs` then only maps the
//! codes it knows to an [`llm_core::ErrorKind`].

use std::time::Duration;

use llm_core::raw::duration_from_secs;
use serde_json::{Map, Value};

/// The longest message kept; a longer one is cut and says how much was left out.
pub const MAX_MESSAGE_CHARS: usize = 4000;

/// The longest excerpt of a body that is not JSON quoted in a message.
pub const MAX_EXCERPT_CHARS: usize = 200;

/// What an error body (or an error event's data) says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ErrorBody {
    /// The human-readable message: `message`, else `detail`, else `msg` (a list of validation
    /// entries joined with `; `, each `loc.path: msg`), with OpenRouter's upstream
    /// `metadata.raw` on a line of its own.
    pub message: Option<String>,
    /// `code` (or AWS's `Code`) as text, when it is a non-empty string or a number.
    pub code: Option<String>,
    /// `code` when it is a number that is an HTTP status (100 to 999): some servers put the
    /// status there, some a status inside a 200 stream.
    pub numeric_code: Option<u16>,
    /// `type` (or AWS's `__type`), unless it is the envelope's own `"error"`.
    pub error_type: Option<String>,
    /// `status`, when it is text: Google's gRPC status (`INVALID_ARGUMENT`).
    pub status: Option<String>,
    /// The first `details[].reason` (Google's `ErrorInfo`: `API_KEY_INVALID`).
    pub reason: Option<String>,
    /// The first `details[].retryDelay` (Google's `RetryInfo`: `"34s"`).
    pub retry_delay: Option<Duration>,
    /// A body that is not JSON: its first [`MAX_EXCERPT_CHARS`] characters, trimmed; `None`
    /// for JSON and for an empty body.
    pub excerpt: Option<String>,
}

impl ErrorBody {
    /// Reads `body`, whatever it is.
    pub fn parse(body: &str) -> Self {
        match serde_json::from_str::<Value>(body) {
            Ok(value) => Self::from_value(&value),
            Err(_) => {
                let text = body.trim();
                let excerpt = (!text.is_empty()).then(|| text.chars().take(MAX_EXCERPT_CHARS));
                ErrorBody { excerpt: excerpt.map(Iterator::collect), ..ErrorBody::default() }
            }
        }
    }

    /// Reads an envelope already decoded (an error event of a stream).
    pub fn from_value(value: &Value) -> Self {
        let outer = match value {
            Value::Array(items) => {
                match items.iter().find(|item| item.get("error").is_some()).or(items.first()) {
                    Some(first) => first,
                    None => return ErrorBody::default(),
                }
            }
            other => other,
        };
        let Value::Object(outer) = outer else {
            return ErrorBody { message: text_of(outer).map(bounded), ..ErrorBody::default() };
        };
        let mut body = match outer.get("error") {
            Some(Value::Object(inner)) => Self::from_object(inner),
            Some(Value::String(text)) if !text.is_empty() => {
                ErrorBody { message: Some(bounded(text.clone())), ..ErrorBody::default() }
            }
            _ => ErrorBody::default(),
        };
        // What the inner object lacks, the outer one may say (Mistral's gateways nest only
        // part of it).
        let top = Self::from_object(outer);
        body.message = body.message.or(top.message);
        body.code = body.code.or(top.code);
        body.numeric_code = body.numeric_code.or(top.numeric_code);
        body.error_type = body.error_type.or(top.error_type);
        body.status = body.status.or(top.status);
        body.reason = body.reason.or(top.reason);
        body.retry_delay = body.retry_delay.or(top.retry_delay);
        body
    }

    fn from_object(object: &Map<String, Value>) -> Self {
        let field = |names: &[&str]| names.iter().find_map(|name| object.get(*name));
        let mut message = field(&["message", "Message"])
            .and_then(text_of)
            .or_else(|| field(&["detail", "msg"]).and_then(text_of));
        if let Some(raw) = object.get("metadata").and_then(|m| m.get("raw")).and_then(text_of) {
            message = Some(match message {
                Some(message) => format!("{message}\n{raw}"),
                None => raw,
            });
        }
        let code = field(&["code", "Code"]);
        let numeric_code = code
            .and_then(Value::as_u64)
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| (100..1000).contains(n));
        let mut reason = None;
        let mut retry_delay = None;
        for detail in object.get("details").and_then(Value::as_array).into_iter().flatten() {
            reason = reason.or_else(|| detail.get("reason").and_then(scalar));
            retry_delay = retry_delay
                .or_else(|| detail.get("retryDelay").and_then(Value::as_str).and_then(seconds));
        }
        ErrorBody {
            message: message.map(bounded),
            code: code.and_then(scalar),
            numeric_code,
            error_type: field(&["type", "__type"]).and_then(scalar).filter(|t| t != "error"),
            status: object.get("status").and_then(Value::as_str).map(str::to_owned),
            reason,
            retry_delay,
            excerpt: None,
        }
    }

    /// The message, else what the body shows of itself with the status (`HTTP 502: <html>…`),
    /// else the status alone (`HTTP 502`).
    pub fn message_or_status(&self, status: u16) -> String {
        match (&self.message, &self.excerpt) {
            (Some(message), _) => message.clone(),
            (None, Some(excerpt)) => format!("HTTP {status}: {excerpt}"),
            (None, None) => format!("HTTP {status}"),
        }
    }

    /// The message, else the excerpt of a body that is not JSON, else `fallback` (an error
    /// event of a stream, which has no status).
    pub fn message_or(&self, fallback: &str) -> String {
        self.message.clone().or_else(|| self.excerpt.clone()).unwrap_or_else(|| fallback.to_owned())
    }

    /// `code`, else `type`: the label an error carries as its code.
    pub fn label(&self) -> Option<&str> {
        self.code.as_deref().or(self.error_type.as_deref())
    }

    /// Whether the message contains any of `needles` (lower-case), ignoring case.
    pub fn says(&self, needles: &[&str]) -> bool {
        let message = self.message.as_deref().unwrap_or_default().to_ascii_lowercase();
        needles.iter().any(|needle| message.contains(needle))
    }

    /// Whether the message says the input was longer than the model takes, in the words the
    /// providers use.
    pub fn says_context_length(&self) -> bool {
        self.says(&[
            "context length",
            "context window",
            "context limit",
            "maximum context",
            "context_length_exceeded",
            "prompt is too long",
            "too many tokens",
            "reduce the length",
        ])
    }
}

/// A string or a number, as text (an empty string is nothing).
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A message field as text: a string; a list of messages or validation entries, joined with
/// `; `; an object's own `message` / `detail` / `msg`, else the object as compact JSON.
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()).filter(|s| !s.is_empty()),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().filter_map(text_of).collect();
            (!parts.is_empty()).then(|| parts.join("; "))
        }
        Value::Object(map) => {
            let text = ["message", "detail", "msg"].iter().find_map(|k| map.get(*k)?.as_str());
            let loc: Vec<String> = map
                .get("loc")
                .and_then(Value::as_array)
                .map(|parts| parts.iter().filter_map(scalar).collect())
                .unwrap_or_default();
            match text {
                Some(text) if !loc.is_empty() => Some(format!("{}: {text}", loc.join("."))),
                Some(text) => Some(text.to_owned()),
                None => ["message", "detail"]
                    .iter()
                    .find_map(|k| map.get(*k).and_then(text_of))
                    .or_else(|| Some(value.to_string())),
            }
        }
        other => Some(other.to_string()),
    }
}

/// A protobuf JSON duration: `"34s"`, `"1.5s"` (one too large saturates).
fn seconds(text: &str) -> Option<Duration> {
    let secs: f64 = text.trim().strip_suffix('s')?.parse().ok()?;
    if secs.is_infinite() {
        return None;
    }
    duration_from_secs(secs)
}

/// At most [`MAX_MESSAGE_CHARS`] characters, with a marker saying how many were cut.
fn bounded(text: String) -> String {
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        None => text,
        Some((cut, _)) => {
            let (head, tail) = text.split_at(cut);
            format!("{head}... [truncated {} chars]", tail.chars().count())
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests;
