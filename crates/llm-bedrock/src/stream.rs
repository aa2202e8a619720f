//! Bedrock event-stream messages -> llm-core's neutral [`Delta`]s. A pure
//! state machine: the framing (prelude, headers, CRCs) is done before it is called.
//!
//! `:message-type` `event` messages carry one `ConverseStream` event named by
//! `:event-type` with its JSON payload (no wrapper key): `messageStart`,
//! `contentBlockStart` (tool use only), `contentBlockDelta` (text, tool-use input,
//! reasoning text, signature or redacted content), `contentBlockStop`, `messageStop`
//! and `metadata` (usage, last). Unknown event types and unknown fields (the random `p`
//! padding) are ignored. `exception` messages become typed errors, `error` messages
//! provider errors. Blocks are keyed by their wire `contentBlockIndex`.
//!
//! The response is complete at `metadata` after `messageStop`, or at the end of the body
//! after `messageStop`; a body that ends before `messageStop` is a truncation (OpenClaw
//! reports it as a success).
//!
//! Where OpenClaw loses information we keep it: redacted reasoning becomes a redacted
//! thinking block (replayed as `redactedContent`), and the `guardrail_intervened` and
//! `content_filtered` stop reasons are `refused` errors that name the reason instead of
//! "An unknown error occurred".

use llm_core::raw::drive::StreamDecoder;
use llm_core::{
    Error, ErrorKind, StopReason, Usage,
    raw::{Channel, Delta, HotMap, SurrogateJoiner, WireText},
};
use serde::Deserialize;
use serde_json::Value;

use crate::PROVIDER;
use crate::error::{stream_error, stream_exception};
use crate::eventstream::AwsFrame;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct WireEvent {
    role: Option<String>,
    content_block_index: Option<Value>,
    start: Option<WireStart>,
    stop_reason: Option<String>,
    additional_model_response_fields: Option<Value>,
    usage: Option<WireUsage>,
}

/// A `contentBlockDelta` event, the one sent per delta: only its two fields, so the struct
/// serde fills and moves per event is small (the random `p` padding is skipped unread).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct WireBlockDelta {
    content_block_index: Option<Value>,
    delta: Option<WireDelta>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct WireStart {
    tool_use: Option<WireToolStart>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct WireToolStart {
    tool_use_id: Option<String>,
    name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct WireDelta {
    text: Option<WireText>,
    tool_use: Option<WireToolDelta>,
    reasoning_content: Option<WireReasoning>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireToolDelta {
    input: Option<WireText>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct WireReasoning {
    text: Option<WireText>,
    signature: Option<String>,
    redacted_content: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct WireUsage {
    input_tokens: Option<Value>,
    output_tokens: Option<Value>,
    cache_read_input_tokens: Option<Value>,
    cache_write_input_tokens: Option<Value>,
}

/// A count of any JSON number width; anything else is 0.
fn count(value: Option<&Value>) -> u64 {
    match value {
        Some(Value::Number(n)) => {
            n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)).unwrap_or(0)
        }
        _ => 0,
    }
}

/// What an open wire block is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Block {
    Text,
    Thinking,
    /// Redacted reasoning, its base64 pieces gathered until the block stops.
    Redacted(String),
    Tool,
}

/// The wire state machine (one per attempt).
#[derive(Debug, Default)]
pub struct Decoder {
    blocks: HotMap<Block>,
    surrogates: SurrogateJoiner,
    /// The outcome `messageStop` announced, emitted at `metadata` or the end of the body.
    stop: Option<Result<StopReason, Error>>,
    /// A terminal delta was emitted; everything after it is ignored.
    finished: bool,
    /// Claude Fable 5: every delta is held until the response is known not to be refused;
    /// on failure only the error goes out, with no content.
    held: Option<Vec<Delta>>,
}

impl Decoder {
    /// A fresh decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder for `model`: Claude Fable 5 (which may refuse after partial output) holds
    /// every delta until the stream ends well, and shows nothing but the error otherwise.
    pub fn for_model(model: &llm_core::Model) -> Self {
        // A compat that does not parse fails the request before anything is sent.
        let compat = crate::BedrockCompat::from_model(model).unwrap_or_default();
        let fable = crate::convert::ClaudeTraits::of(model, &compat).fable;
        Decoder { held: fable.then(Vec::new), ..Self::default() }
    }

    fn fail(&mut self, error: Error, out: &mut Vec<Delta>) {
        if !self.finished {
            self.finished = true;
            // Held content is discarded: a refused Fable response shows nothing.
            self.held = None;
            out.push(Delta::Error(error));
        }
    }

    fn finish(&mut self, out: &mut Vec<Delta>) {
        match self.stop.take() {
            Some(Ok(reason)) => {
                self.finished = true;
                out.push(Delta::Stop(reason));
                out.push(Delta::Done);
            }
            Some(Err(error)) => self.fail(error, out),
            None => {}
        }
    }

    /// Decodes one message into `out`, or into the held deltas while holding.
    fn decode_held(&mut self, message: &AwsFrame, out: &mut Vec<Delta>) {
        let Some(mut held) = self.held.take() else {
            self.decode(message, out);
            return;
        };
        let mut fresh = Vec::new();
        self.decode(message, &mut fresh);
        // A terminal delta ends holding: `finish` or `fail` already flushed or dropped.
        if fresh.iter().any(|d| matches!(d, Delta::Done | Delta::Error(_))) {
            if matches!(fresh.last(), Some(Delta::Done)) {
                held.extend(fresh);
                out.extend(held);
            } else {
                out.extend(fresh.into_iter().filter(|d| matches!(d, Delta::Error(_))));
            }
            return;
        }
        held.extend(fresh);
        self.held = Some(held);
    }

    fn decode(&mut self, message: &AwsFrame, out: &mut Vec<Delta>) {
        if self.finished {
            return;
        }
        let payload = || payload_text(message);
        match message.header(":message-type") {
            Some("event") => {}
            Some("exception") => {
                let kind = message.header(":exception-type").unwrap_or("UnknownException");
                self.fail(stream_exception(kind, &payload()), out);
                return;
            }
            Some("error") => {
                let error =
                    stream_error(message.header(":error-code"), message.header(":error-message"));
                self.fail(error, out);
                return;
            }
            other => {
                let error = decode_error(format!(
                    "Unrecognizable event type: {} (message type {})",
                    message.header(":event-type").unwrap_or("none"),
                    other.unwrap_or("none"),
                ));
                self.fail(error, out);
                return;
            }
        }
        let name = message.header(":event-type").unwrap_or_default();
        if !KNOWN_EVENTS.contains(&name) {
            return;
        }
        if name == "contentBlockDelta" {
            let Some(event) = self.parse::<WireBlockDelta>(name, message, out) else { return };
            if let Some(key) = self.block_key(name, event.content_block_index.as_ref(), out) {
                self.block_delta(key, event.delta, out);
            }
            return;
        }
        if let Some(event) = self.parse::<WireEvent>(name, message, out) {
            self.event(name, event, out);
        }
    }

    /// The payload of event `name` as `T`, or `None` once a parse failure failed the stream.
    fn parse<T: for<'de> Deserialize<'de>>(
        &mut self,
        name: &str,
        message: &AwsFrame,
        out: &mut Vec<Delta>,
    ) -> Option<T> {
        match serde_json::from_slice(message.payload()) {
            Ok(event) => Some(event),
            Err(e) => {
                let error = decode_error(format!("Could not parse Bedrock event {name}: {e}"))
                    .with_body(payload_text(message));
                self.fail(error, out);
                None
            }
        }
    }

    /// A block event's `contentBlockIndex`, or `None` once its absence failed the stream.
    fn block_key(
        &mut self,
        name: &str,
        index: Option<&Value>,
        out: &mut Vec<Delta>,
    ) -> Option<u64> {
        let key = index.and_then(Value::as_u64);
        if key.is_none() {
            self.fail(decode_error(format!("Bedrock {name} without a contentBlockIndex")), out);
        }
        key
    }

    fn event(&mut self, name: &str, event: WireEvent, out: &mut Vec<Delta>) {
        match name {
            "messageStart" => match event.role.as_deref() {
                None | Some("assistant") => {
                    out.push(Delta::Metadata { response_id: None, response_model: None })
                }
                Some(role) => self.fail(
                    decode_error(format!(
                        "Unexpected assistant message start but got {role} message start instead"
                    )),
                    out,
                ),
            },
            // `contentBlockDelta` is parsed as a `WireBlockDelta` (`decode`).
            "contentBlockStart" | "contentBlockStop" => {
                let Some(key) = self.block_key(name, event.content_block_index.as_ref(), out)
                else {
                    return;
                };
                if name == "contentBlockStart" {
                    self.block_start(key, event.start, out);
                } else {
                    self.block_stop(key, out);
                }
            }
            "messageStop" => {
                self.stop = Some(stop_outcome(
                    event.stop_reason.as_deref(),
                    event.additional_model_response_fields.as_ref(),
                ));
            }
            "metadata" => {
                if let Some(usage) = event.usage {
                    out.push(Delta::Usage(Usage {
                        input: count(usage.input_tokens.as_ref()),
                        output: count(usage.output_tokens.as_ref()),
                        cache_read: count(usage.cache_read_input_tokens.as_ref()),
                        cache_write: count(usage.cache_write_input_tokens.as_ref()),
                        ..Usage::default()
                    }));
                }
                self.finish(out);
            }
            _ => {}
        }
    }

    fn block_start(&mut self, key: u64, start: Option<WireStart>, out: &mut Vec<Delta>) {
        // Text and reasoning blocks open with their first delta; only tool use starts.
        let Some(tool) = start.and_then(|s| s.tool_use) else { return };
        self.blocks.insert(key, Block::Tool);
        out.push(Delta::ToolCallStart {
            key,
            id: tool.tool_use_id.unwrap_or_default(),
            name: tool.name.unwrap_or_default(),
            arguments: None,
        });
    }

    fn block_delta(&mut self, key: u64, delta: Option<WireDelta>, out: &mut Vec<Delta>) {
        let Some(delta) = delta else { return };
        let surrogates = &mut self.surrogates;
        if let Some(text) = delta.text {
            let block = self.blocks.get_or_insert(key, Block::Text);
            if *block == Block::Text {
                let text = surrogates.join(key, Channel::Text, text);
                if !text.is_empty() {
                    out.push(Delta::Text { key, text });
                }
            }
        } else if let Some(input) = delta.tool_use.map(|t| t.input.unwrap_or_default()) {
            // Input for a block that never started is dropped (no call without an id).
            if self.blocks.get_mut(key).is_some_and(|b| *b == Block::Tool) {
                let fragment = surrogates.join(key, Channel::ToolArgs, input);
                if !fragment.is_empty() {
                    out.push(Delta::ToolCallArgs { key, fragment });
                }
            }
        } else if let Some(reasoning) = delta.reasoning_content {
            let redacted = reasoning.redacted_content.filter(|r| !r.is_empty());
            let fresh =
                if redacted.is_some() { Block::Redacted(String::new()) } else { Block::Thinking };
            match self.blocks.get_or_insert(key, fresh) {
                Block::Thinking => {
                    if let Some(text) = reasoning
                        .text
                        .map(|t| surrogates.join(key, Channel::Thinking, t))
                        .filter(|t| !t.is_empty())
                    {
                        out.push(Delta::Thinking { key, text });
                    }
                    if let Some(signature) = reasoning.signature.filter(|s| !s.is_empty()) {
                        out.push(Delta::ThinkingSignature { key, signature });
                    }
                }
                Block::Redacted(data) => {
                    if let Some(piece) = redacted {
                        data.push_str(&piece);
                    }
                }
                Block::Text | Block::Tool => {}
            }
        }
    }

    fn block_stop(&mut self, key: u64, out: &mut Vec<Delta>) {
        match self.blocks.remove(key) {
            Some(Block::Redacted(data)) => {
                out.push(Delta::RedactedThinking { key, data });
                out.push(Delta::BlockEnd { key });
            }
            Some(_) => out.push(Delta::BlockEnd { key }),
            None => {}
        }
    }
}

const KNOWN_EVENTS: [&str; 6] = [
    "messageStart",
    "contentBlockStart",
    "contentBlockDelta",
    "contentBlockStop",
    "messageStop",
    "metadata",
];

/// A message's payload as text, made only where an error keeps it (events are parsed as
/// bytes).
fn payload_text(message: &AwsFrame) -> String {
    String::from_utf8_lossy(message.payload()).into_owned()
}

fn decode_error(message: String) -> Error {
    Error::new(ErrorKind::Decode, PROVIDER, message).with_retryable(false)
}

/// The stop reason, or the error a stop reason stands for.
fn stop_outcome(reason: Option<&str>, fields: Option<&Value>) -> Result<StopReason, Error> {
    let refused = |code: &str, message: &str| {
        Err(Error::new(ErrorKind::Refused, PROVIDER, message).with_code(code).with_retryable(false))
    };
    match reason.unwrap_or("end_turn") {
        "end_turn" | "stop_sequence" => Ok(StopReason::Stop),
        "max_tokens" | "model_context_window_exceeded" => Ok(StopReason::Length),
        "tool_use" => Ok(StopReason::ToolUse),
        "guardrail_intervened" => refused(
            "guardrail_intervened",
            "Bedrock guardrail intervened (stopReason guardrail_intervened)",
        ),
        "content_filtered" => refused(
            "content_filtered",
            "Bedrock content filter blocked the response (stopReason content_filtered)",
        ),
        "refusal" => Err(refusal_error(fields)),
        other => Err(Error::new(
            ErrorKind::Provider,
            PROVIDER,
            format!("Bedrock stopped with stopReason {other}"),
        )
        .with_code(other)
        .with_retryable(false)),
    }
}

/// A Claude refusal, in Anthropic's words, from `additionalModelResponseFields.stop_details`
/// (or `stopDetails`).
fn refusal_error(fields: Option<&Value>) -> Error {
    let details = fields.and_then(|f| f.get("stop_details").or_else(|| f.get("stopDetails")));
    Error::refusal(PROVIDER, "Anthropic", details)
}

impl StreamDecoder for Decoder {
    type Framing = crate::AwsEventStreamFraming;

    fn framing(max_event_bytes: Option<usize>) -> Self::Framing {
        crate::AwsEventStreamFraming::with_limit(max_event_bytes)
    }

    fn frame(&mut self, frame: AwsFrame, out: &mut Vec<Delta>) {
        self.decode_held(&frame, out);
    }

    fn end(&mut self, out: &mut Vec<Delta>) {
        if !self.finished {
            // After `messageStop` a missing `metadata` only loses usage; before it the
            // body is cut short: nothing is emitted (the driver reports `truncated`), and
            // held Fable content is dropped.
            let mut fresh = Vec::new();
            self.finish(&mut fresh);
            match self.held.take() {
                Some(mut held) if matches!(fresh.last(), Some(Delta::Done)) => {
                    held.extend(fresh);
                    out.extend(held);
                }
                Some(_) => {
                    out.extend(fresh.into_iter().filter(|d| matches!(d, Delta::Error(_))));
                    if !self.finished {
                        // Cut short with content held: the truncation shows no content.
                        self.fail(
                            Error::new(
                                ErrorKind::Truncated,
                                PROVIDER,
                                "Bedrock stream ended before messageStop",
                            ),
                            out,
                        );
                    }
                }
                None => out.extend(fresh),
            }
        }
    }

    fn surrogates(&mut self) -> Option<&mut SurrogateJoiner> {
        Some(&mut self.surrogates)
    }
}

#[cfg(test)]
mod tests;
