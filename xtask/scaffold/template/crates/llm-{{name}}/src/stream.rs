//! Pure stream decoding: SSE events in, `llm_core::raw::Delta`s out.
//!
//! The scaffold's wire format (replace it with the provider's): one JSON object per event,
//! `{"type": "start", "id", "model"}`, `{"type": "text", "text"}`, `{"type": "tool_call",
//! "index", "id", "name"}`, `{"type": "tool_call_delta", "index", "arguments"}` (argument
//! fragments, several calls' fragments may interleave), `{"type": "usage", "input",
//! "output"}`, `{"type": "stop", "reason"}` (`stop`, `tool_use` or `length`), `{"type":
//! "error", "message"}`, then `[DONE]`. Unknown types and fields are ignored; malformed
//! JSON is a `decode` error; a body that ends before `stop` and `[DONE]` is truncated.
//!
//! Text and argument fragments are read as `WireText` and joined by one
//! `SurrogateJoiner`: a server that builds its stream from UTF-16 strings may split a
//! surrogate pair across two events, and a plain `String` field would fail the event.

use llm_core::raw::drive::WireDecoder;
use llm_core::raw::sse::SseEvent;
use llm_core::raw::{Channel, Delta, SurrogateJoiner, WireText};
use llm_core::{StopReason, Usage};
use serde::Deserialize;
use serde_json::Value;

use crate::error::stream_error;

/// One event of the scaffold format (every field optional, unknown fields ignored).
#[derive(Debug, Deserialize)]
struct WireEvent {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<WireText>,
    arguments: Option<WireText>,
    index: Option<u64>,
    id: Option<String>,
    name: Option<String>,
    model: Option<String>,
    input: Option<u64>,
    output: Option<u64>,
    reason: Option<String>,
}

/// The wire state machine (one per attempt).
#[derive(Debug, Default)]
pub struct Decoder {
    /// Whether a stop reason arrived (a `[DONE]` without one is a truncation).
    stopped: bool,
    /// Surrogate halves split across events.
    surrogates: SurrogateJoiner,
}

/// Block key of the text block; tool call `i` is block `i + 1`.
const TEXT: u64 = 0;

impl Decoder {
    /// A fresh decoder.
    pub fn new() -> Self {
        Self::default()
    }

    fn decode(&mut self, data: &str, out: &mut Vec<Delta>) {
        if data == "[DONE]" {
            if self.stopped {
                out.push(Delta::Done);
            }
            return;
        }
        let event: WireEvent = match serde_json::from_str(data) {
            Ok(event) => event,
            Err(e) => {
                out.push(Delta::Error(
                    llm_core::Error::new(
                        llm_core::ErrorKind::Decode,
                        crate::PROVIDER,
                        format!("Malformed event: {e}"),
                    )
                    .with_retryable(false),
                ));
                return;
            }
        };
        let key = event.index.unwrap_or(0).saturating_add(1);
        match event.kind.as_deref() {
            Some("start") => {
                out.push(Delta::Metadata { response_id: event.id, response_model: event.model });
            }
            Some("text") => {
                let text =
                    self.surrogates.join(TEXT, Channel::Text, event.text.unwrap_or_default());
                if !text.is_empty() {
                    out.push(Delta::Text { key: TEXT, text });
                }
            }
            Some("tool_call") => out.push(Delta::ToolCallStart {
                key,
                id: event.id.unwrap_or_default(),
                name: event.name.unwrap_or_default(),
                arguments: None,
            }),
            Some("tool_call_delta") => {
                let arguments = event.arguments.unwrap_or_default();
                let fragment = self.surrogates.join(key, Channel::ToolArgs, arguments);
                if !fragment.is_empty() {
                    out.push(Delta::ToolCallArgs { key, fragment });
                }
            }
            Some("usage") => out.push(Delta::Usage(Usage {
                input: event.input.unwrap_or(0),
                output: event.output.unwrap_or(0),
                ..Usage::default()
            })),
            Some("stop") => {
                self.stopped = true;
                out.push(Delta::Stop(match event.reason.as_deref() {
                    Some("tool_use") => StopReason::ToolUse,
                    Some("length") => StopReason::Length,
                    _ => StopReason::Stop,
                }));
            }
            Some("error") => {
                // Rare: the error body is read again as a whole value.
                let value: Value = serde_json::from_str(data).unwrap_or(Value::Null);
                out.push(Delta::Error(stream_error(&value)));
            }
            _ => {}
        }
    }
}

impl WireDecoder for Decoder {
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) {
        let from = out.len();
        self.decode(event.data.trim(), out);
        // A half still waiting when its block or the stream ends becomes U+FFFD there.
        self.surrogates.settle(out, from);
    }

    fn end(&mut self, _out: &mut Vec<Delta>) {
        // The body ended without `[DONE]`: emit nothing, the driver reports `truncated`.
    }
}

#[cfg(test)]
mod tests;
