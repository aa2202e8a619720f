//! Pure stream decoding: SSE events in, `llm_core::Delta`s out.
//!
//! Scaffold wire format (replace with the provider's): one JSON object per event,
//! `{"type": "text", "text"}`, `{"type": "tool_call", "index", "id", "name"}`,
//! `{"type": "tool_call_delta", "index", "arguments"}`, `{"type": "usage", "input",
//! "output"}`, `{"type": "stop", "reason"}`, `{"type": "error", "message"}`, then
//! `[DONE]`. Unknown types are ignored; malformed JSON is a `decode` error.

use llm_core::drive::WireDecoder;
use llm_core::sse::SseEvent;
use llm_core::{Delta, StopReason, Usage};
use serde_json::Value;

use crate::error::stream_error;

/// The wire state machine (one per attempt).
#[derive(Debug, Default)]
pub struct Decoder {
    /// Whether a stop reason arrived (a `[DONE]` without one is a truncation).
    stopped: bool,
}

/// Block key of the text block; tool call `i` is block `i + 1`.
const TEXT: u64 = 0;

impl Decoder {
    /// A fresh decoder.
    pub fn new() -> Self {
        Self::default()
    }
}

impl WireDecoder for Decoder {
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) {
        let data = event.data.trim();
        if data == "[DONE]" {
            if self.stopped {
                out.push(Delta::Done);
            }
            return;
        }
        let value: Value = match serde_json::from_str(data) {
            Ok(value) => value,
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
        let str_of = |k: &str| value.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        let key = || value.get("index").and_then(Value::as_u64).unwrap_or(0).saturating_add(1);
        match value.get("type").and_then(Value::as_str) {
            Some("text") => out.push(Delta::Text { key: TEXT, text: str_of("text") }),
            Some("tool_call") => out.push(Delta::ToolCallStart {
                key: key(),
                id: str_of("id"),
                name: str_of("name"),
                arguments: None,
            }),
            Some("tool_call_delta") => {
                out.push(Delta::ToolCallArgs { key: key(), fragment: str_of("arguments") })
            }
            Some("usage") => {
                let n = |k: &str| value.get(k).and_then(Value::as_u64).unwrap_or(0);
                out.push(Delta::Usage(Usage {
                    input: n("input"),
                    output: n("output"),
                    ..Usage::default()
                }));
            }
            Some("stop") => {
                self.stopped = true;
                out.push(Delta::Stop(match value.get("reason").and_then(Value::as_str) {
                    Some("tool_use") => StopReason::ToolUse,
                    Some("length") => StopReason::Length,
                    _ => StopReason::Stop,
                }));
            }
            Some("error") => out.push(Delta::Error(stream_error(&value))),
            _ => {}
        }
    }

    fn end(&mut self, _out: &mut Vec<Delta>) {
        // The body ended without `[DONE]`: emit nothing, the driver reports `truncated`.
    }
}
