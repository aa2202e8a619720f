//! Anthropic SSE events -> llm-core's neutral [`Delta`]s. A pure state machine: no IO.
//!
//! Event kinds: `message_start` (whose `message.content` may already hold whole blocks),
//! `content_block_start` (`text`, `thinking`, `redacted_thinking`, `tool_use`; every other
//! block type, such as `server_tool_use`, `web_search_tool_result` or `compaction`, is kept
//! whole as opaque [`ProviderContent`]), `content_block_delta` (`text_delta`,
//! `thinking_delta`, `signature_delta`, `input_json_delta`, `citations_delta`,
//! `compaction_delta`), `content_block_stop`, `message_delta`, `message_stop`, `ping` and
//! `error`. Unknown event types and unknown fields are ignored; whitespace padding inside the
//! JSON is fine. Blocks are keyed by their wire `index`.
//!
//! A text block's citations are kept as its signature, `{"citations":[...]}`, so they go
//! back to the same model and are dropped for others.
//!
//! One body holds one message: a second `message_start` with another id (a retrying proxy
//! that spliced a retried response into the body) ends the stream with a `decode` error,
//! retryable while nothing was emitted; one with the same id is ignored.

use std::borrow::Cow;
use std::fmt;

use llm_core::raw::drive::WireDecoder;
use llm_core::raw::partial_json::PartialJson;
use llm_core::raw::sse::SseEvent;
use llm_core::{
    Error, ErrorKind, ProviderContent, StopReason, Usage,
    raw::{Channel, Delta, EventTemplates, HotMap, Step, SurrogateJoiner, WireText},
};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::PROVIDER;
use crate::convert::ToolNames;
use crate::error::stream_error;

/// A JSON number of any width (or a numeric string), read as a saturating `u64`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Num(u64);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num(u64::try_from(v).unwrap_or(0)))
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> Result<Num, E> {
                Ok(Num(u64::try_from(v).unwrap_or(u64::MAX)))
            }
            fn visit_i128<E: de::Error>(self, v: i128) -> Result<Num, E> {
                Ok(Num(u64::try_from(v.max(0)).unwrap_or(u64::MAX)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                // `as` saturates and maps NaN to 0.
                Ok(Num(v.max(0.0) as u64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                let v = v.trim();
                v.parse::<u64>()
                    .map(Num)
                    .or_else(|_| v.parse::<f64>().map(|f| Num(f.max(0.0) as u64)))
                    .map_err(|_| E::custom("not a number"))
            }
        }
        d.deserialize_any(V)
    }
}

/// One event's data; the type names borrow from it (no allocation for the usual event).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    message: Option<WireMessage>,
    index: Option<Num>,
    /// Kept as raw JSON text: a known block is read from it with [`WireText`] fields (a lone
    /// surrogate half in its text is not an error), an opaque block is stored whole.
    content_block: Option<Box<RawValue>>,
    #[serde(borrow)]
    delta: Option<WireDelta<'a>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireMessage {
    id: Option<String>,
    model: Option<String>,
    usage: Option<WireUsage>,
    /// Blocks given whole at the start (programmatic tool calling), as raw JSON text like
    /// `content_block`.
    content: Option<Vec<Box<RawValue>>>,
    stop_reason: Option<String>,
    stop_details: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireUsage {
    input_tokens: Option<Num>,
    output_tokens: Option<Num>,
    cache_read_input_tokens: Option<Num>,
    cache_creation_input_tokens: Option<Num>,
    cache_creation: Option<WireCacheCreation>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireCacheCreation {
    ephemeral_5m_input_tokens: Option<Num>,
    ephemeral_1h_input_tokens: Option<Num>,
}

/// Only the `type` of a content block, to choose how the rest is read.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireBlockType {
    #[serde(rename = "type")]
    kind: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireBlock {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<WireText>,
    thinking: Option<WireText>,
    signature: Option<String>,
    data: Option<String>,
    id: Option<String>,
    name: Option<String>,
    input: Option<Value>,
    /// Loosely typed: only an array is kept.
    citations: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    text: Option<WireText>,
    thinking: Option<WireText>,
    signature: Option<String>,
    partial_json: Option<WireText>,
    citation: Option<Value>,
    content: Option<String>,
    encrypted_content: Option<String>,
    stop_reason: Option<String>,
    stop_details: Option<Value>,
}

/// What the one fragment of a `content_block_delta` read through a template is, and the
/// index of its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fragment {
    /// `delta.text` of a `text_delta`.
    Text(u64),
    /// `delta.thinking` of a `thinking_delta`.
    Thinking(u64),
    /// `delta.partial_json` of an `input_json_delta`.
    Json(u64),
}

impl Fragment {
    /// The block index and the delta the full parse gives for a `content_block_delta` of
    /// this fragment.
    fn delta(self, text: WireText) -> (u64, WireDelta<'static>) {
        let (index, kind, delta) = match self {
            Fragment::Text(index) => {
                (index, "text_delta", WireDelta { text: Some(text), ..WireDelta::default() })
            }
            Fragment::Thinking(index) => (
                index,
                "thinking_delta",
                WireDelta { thinking: Some(text), ..WireDelta::default() },
            ),
            Fragment::Json(index) => (
                index,
                "input_json_delta",
                WireDelta { partial_json: Some(text), ..WireDelta::default() },
            ),
        };
        (index, WireDelta { kind: Some(Cow::Borrowed(kind)), ..delta })
    }

    /// The fragment of `event`, when it is a `content_block_delta` of one text, thinking or
    /// argument fragment and nothing else, with its path.
    fn of<'e>(event: &'e WireEvent<'_>) -> Option<(Self, &'e WireText, [Step<'static>; 2])> {
        let WireEvent {
            kind: Some(kind),
            message: None,
            index: Some(Num(index)),
            content_block: None,
            delta: Some(delta),
            usage: None,
            error: None,
        } = event
        else {
            return None;
        };
        let WireDelta {
            kind: Some(delta_kind),
            signature: None,
            citation: None,
            content: None,
            encrypted_content: None,
            stop_reason: None,
            stop_details: None,
            ..
        } = delta
        else {
            return None;
        };
        if kind != "content_block_delta" {
            return None;
        }
        let (fragment, text, field) =
            match (delta_kind.as_ref(), &delta.text, &delta.thinking, &delta.partial_json) {
                ("text_delta", Some(text), None, None) => (Fragment::Text(*index), text, "text"),
                ("thinking_delta", None, Some(text), None) => {
                    (Fragment::Thinking(*index), text, "thinking")
                }
                ("input_json_delta", None, None, Some(text)) => {
                    (Fragment::Json(*index), text, "partial_json")
                }
                _ => return None,
            };
        Some((fragment, text, [Step::Key("delta"), Step::Key(field)]))
    }
}

/// Token counts as last reported; `message_delta` overwrites only the fields it carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tokens {
    input: u64,
    output: u64,
    cache_read: u64,
    /// `cache_creation_input_tokens` (all retentions), when given.
    cache_write: Option<u64>,
    cache_write_5m: u64,
    cache_write_1h: u64,
}

impl Tokens {
    fn update(&mut self, u: &WireUsage) {
        if let Some(Num(n)) = u.input_tokens {
            self.input = n;
        }
        if let Some(Num(n)) = u.output_tokens {
            self.output = n;
        }
        if let Some(Num(n)) = u.cache_read_input_tokens {
            self.cache_read = n;
        }
        if let Some(Num(n)) = u.cache_creation_input_tokens {
            self.cache_write = Some(n);
        }
        if let Some(c) = &u.cache_creation {
            if let Some(Num(n)) = c.ephemeral_5m_input_tokens {
                self.cache_write_5m = n;
            }
            if let Some(Num(n)) = c.ephemeral_1h_input_tokens {
                self.cache_write_1h = n;
            }
        }
    }

    /// Anthropic's `input_tokens` already excludes cache reads and writes.
    fn usage(&self) -> Usage {
        Usage {
            input: self.input,
            output: self.output,
            cache_read: self.cache_read,
            cache_write: self
                .cache_write
                .unwrap_or(self.cache_write_5m.saturating_add(self.cache_write_1h)),
            ..Usage::default()
        }
    }
}

#[derive(Debug)]
enum Block {
    /// A text block; `open` once a delta was emitted (empty blocks emit nothing).
    Text { open: bool, citations: Vec<Value> },
    /// A thinking block; `open` once text or a signature was emitted.
    Thinking { open: bool },
    /// A client tool call (always open: it was announced at start).
    Tool,
    /// Any other block type (server tools and their results, compaction, ...): buffered and
    /// emitted whole as opaque provider content when it stops.
    Opaque { block: serde_json::Map<String, Value>, input: Option<Box<PartialJson>> },
}

impl Block {
    /// Whether the assembler has a block open for it.
    fn is_open(&self) -> bool {
        matches!(
            self,
            Block::Text { open: true, .. } | Block::Thinking { open: true } | Block::Tool
        )
    }
}

/// The Anthropic stream decoder: one per HTTP attempt.
///
/// Feed it decoded SSE events ([`WireDecoder::event`]) and call [`WireDecoder::end`] at the end
/// of the body; it appends the matching [`Delta`]s. It never panics on any input: malformed
/// data becomes a `decode` error delta, an `event: error` an error delta of the matching kind.
pub struct Decoder {
    tool_names: ToolNames,
    blocks: HotMap<Block>,
    tokens: Tokens,
    /// The id of the message this body carries, once `message_start` came.
    message_id: Option<Option<String>>,
    /// A content delta (anything the driver would show) was emitted.
    emitted_content: bool,
    saw_stop: bool,
    tool_calls: usize,
    finished: bool,
    /// Surrogate pairs split across text, thinking and argument deltas.
    surrogates: SurrogateJoiner,
    /// `content_block_delta` events of one fragment learned: the next one that differs only
    /// in its fragment (and its closing padding) is read by its bytes.
    templates: EventTemplates<Fragment>,
}

impl fmt::Debug for Decoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoder")
            .field("open_blocks", &self.blocks.len())
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder that reports tool names exactly as they appear on the wire.
    pub fn new() -> Self {
        Decoder::with_tool_names(ToolNames::default())
    }

    /// A decoder that maps Claude Code wire names back to the request's tool names.
    pub(crate) fn with_tool_names(tool_names: ToolNames) -> Self {
        Decoder {
            tool_names,
            blocks: HotMap::new(),
            tokens: Tokens::default(),
            message_id: None,
            emitted_content: false,
            saw_stop: false,
            tool_calls: 0,
            finished: false,
            surrogates: SurrogateJoiner::new(),
            templates: EventTemplates::default(),
        }
    }

    fn fail(&mut self, error: Error, out: &mut Vec<Delta>) {
        self.finished = true;
        out.push(Delta::Error(error));
    }

    fn handle(&mut self, kind: &str, event: WireEvent<'_>, out: &mut Vec<Delta>) {
        match kind {
            "message_start" => self.message_start(event.message.unwrap_or_default(), out),
            "content_block_start" => {
                let (Some(Num(index)), Some(block)) = (event.index, event.content_block) else {
                    return;
                };
                self.start_block(index, &block, out);
            }
            "content_block_delta" => {
                let (Some(Num(index)), Some(delta)) = (event.index, event.delta) else { return };
                self.block_delta(index, delta, out);
            }
            "content_block_stop" => {
                let Some(Num(index)) = event.index else { return };
                self.stop_block(index, out);
            }
            "message_delta" => {
                if let Some(u) = &event.usage {
                    self.tokens.update(u);
                    out.push(Delta::Usage(self.tokens.usage()));
                }
                let Some(delta) = event.delta else { return };
                self.stop_reason(delta.stop_reason, delta.stop_details.as_ref(), out);
            }
            "message_stop" => {
                // Opaque blocks still buffered are whole by now; emit them in wire order.
                let mut pending: Vec<u64> = self
                    .blocks
                    .iter()
                    .filter(|(_, b)| matches!(b, Block::Opaque { .. }))
                    .map(|(k, _)| k)
                    .collect();
                pending.sort_unstable();
                for key in pending {
                    self.stop_block(key, out);
                }
                if !self.saw_stop && self.tool_calls > 0 {
                    // Calls given whole in `message_start` come without a `message_delta`.
                    out.push(Delta::Stop(StopReason::ToolUse));
                }
                self.finished = true;
                out.push(Delta::Done);
            }
            // `ping` and event types added after this was written.
            _ => {}
        }
    }

    fn message_start(&mut self, message: WireMessage, out: &mut Vec<Delta>) {
        let id = message.id.filter(|s| !s.is_empty());
        if let Some(first) = &self.message_id {
            if *first == id {
                // The same message announced again: nothing new.
                return;
            }
            let error = Error::new(
                ErrorKind::Decode,
                PROVIDER,
                format!(
                    "A second message ({}) started inside message {}: the body splices two responses",
                    id.as_deref().unwrap_or("without id"),
                    first.as_deref().unwrap_or("without id"),
                ),
            )
            .with_code("spliced_message")
            // Before anything was shown, a fresh request is safe.
            .with_retryable(!self.emitted_content);
            self.fail(error, out);
            return;
        }
        self.message_id = Some(id.clone());
        out.push(Delta::Metadata {
            response_id: id,
            response_model: message.model.filter(|s| !s.is_empty()),
        });
        if let Some(u) = &message.usage {
            self.tokens.update(u);
        }
        out.push(Delta::Usage(self.tokens.usage()));
        for (index, block) in message.content.unwrap_or_default().into_iter().enumerate() {
            let index = index as u64;
            self.start_block(index, &block, out);
            if self.finished {
                return;
            }
            self.stop_block(index, out);
        }
        self.stop_reason(message.stop_reason, message.stop_details.as_ref(), out);
    }

    fn start_block(&mut self, key: u64, raw: &RawValue, out: &mut Vec<Delta>) {
        // A start for a key that is still open closes the old block first.
        if self.blocks.contains_key(key) {
            self.stop_block(key, out);
        }
        let raw = raw.get();
        if !raw.starts_with('{') {
            // A block that is not an object is no block at all.
            return;
        }
        // serde_json skips the other fields without decoding their escapes: a lone surrogate
        // half there does not fail this.
        let kind = serde_json::from_str::<WireBlockType>(raw).ok().and_then(|t| t.kind);
        let parsed = if matches!(
            kind.as_deref(),
            Some("text" | "thinking" | "redacted_thinking" | "tool_use")
        ) {
            // Read from the text, not from a `Value`, so that `text` and `thinking` go through
            // `WireText` like the deltas do and a pair split between the start and the first
            // delta is joined.
            serde_json::from_str::<WireBlock>(raw).map(Some)
        } else {
            // Any other block is kept whole, whatever its fields; a lone surrogate half in one
            // becomes U+FFFD rather than failing the stream.
            let raw = llm_core::raw::replace_lone_surrogates(raw);
            serde_json::from_str::<serde_json::Map<String, Value>>(&raw).map(|block| {
                self.blocks.insert(key, Block::Opaque { block, input: None });
                None
            })
        };
        let block = match parsed {
            Ok(Some(block)) => block,
            Ok(None) => return,
            Err(e) => {
                let error = Error::new(
                    ErrorKind::Decode,
                    PROVIDER,
                    format!("Could not parse Anthropic content block: {e}"),
                )
                .with_body(raw.to_owned())
                .with_retryable(false);
                self.fail(error, out);
                return;
            }
        };
        let state = match block.kind.as_deref() {
            Some("text") => {
                let text = block
                    .text
                    .map(|t| self.surrogates.join(key, Channel::Text, t))
                    .unwrap_or_default();
                let open = !text.is_empty();
                if open {
                    out.push(Delta::Text { key, text });
                }
                let citations = match block.citations {
                    Some(Value::Array(list)) => list,
                    _ => Vec::new(),
                };
                Block::Text { open, citations }
            }
            Some("thinking") => {
                let mut open = false;
                if let Some(text) = block
                    .thinking
                    .map(|t| self.surrogates.join(key, Channel::Thinking, t))
                    .filter(|t| !t.is_empty())
                {
                    out.push(Delta::Thinking { key, text });
                    open = true;
                }
                if let Some(signature) = block.signature.filter(|s| !s.is_empty()) {
                    out.push(Delta::ThinkingSignature { key, signature });
                    open = true;
                }
                Block::Thinking { open }
            }
            Some("redacted_thinking") => {
                out.push(Delta::RedactedThinking { key, data: block.data.unwrap_or_default() });
                Block::Thinking { open: true }
            }
            Some("tool_use") => {
                let wire_name = block.name.unwrap_or_default();
                self.tool_calls += 1;
                out.push(Delta::ToolCallStart {
                    key,
                    id: block.id.unwrap_or_default(),
                    name: self.tool_names.original(&wire_name),
                    // Input given whole at the start is kept when no delta follows.
                    arguments: block.input.filter(Value::is_object),
                });
                Block::Tool
            }
            _ => return,
        };
        self.blocks.insert(key, state);
    }

    fn block_delta(&mut self, key: u64, delta: WireDelta<'_>, out: &mut Vec<Delta>) {
        let Some(block) = self.blocks.get_mut(key) else { return };
        let surrogates = &mut self.surrogates;
        match (delta.kind.as_deref(), block) {
            (Some("text_delta"), Block::Text { open, .. }) => {
                if let Some(text) = delta
                    .text
                    .map(|t| surrogates.join(key, Channel::Text, t))
                    .filter(|t| !t.is_empty())
                {
                    *open = true;
                    out.push(Delta::Text { key, text });
                }
            }
            (Some("citations_delta"), Block::Text { citations, .. }) => {
                if let Some(citation) = delta.citation {
                    citations.push(citation);
                }
            }
            (Some("thinking_delta"), Block::Thinking { open }) => {
                if let Some(text) = delta
                    .thinking
                    .map(|t| surrogates.join(key, Channel::Thinking, t))
                    .filter(|t| !t.is_empty())
                {
                    *open = true;
                    out.push(Delta::Thinking { key, text });
                }
            }
            (Some("signature_delta"), Block::Thinking { open }) => {
                if let Some(signature) = delta.signature.filter(|s| !s.is_empty()) {
                    *open = true;
                    out.push(Delta::ThinkingSignature { key, signature });
                }
            }
            (Some("input_json_delta"), Block::Tool) => {
                if let Some(fragment) = delta
                    .partial_json
                    .map(|f| surrogates.join(key, Channel::ToolArgs, f))
                    .filter(|f| !f.is_empty())
                {
                    out.push(Delta::ToolCallArgs { key, fragment });
                }
            }
            (Some("input_json_delta"), Block::Opaque { input, .. }) => {
                if let Some(fragment) = delta
                    .partial_json
                    .map(|f| surrogates.join(key, Channel::ToolArgs, f))
                    .filter(|f| !f.is_empty())
                {
                    input.get_or_insert_with(Box::default).push(&fragment);
                }
            }
            (Some("citations_delta"), Block::Opaque { block, .. }) => {
                if let Some(citation) = delta.citation {
                    match block.get_mut("citations") {
                        Some(Value::Array(list)) => list.push(citation),
                        _ => {
                            block.insert("citations".into(), Value::Array(vec![citation]));
                        }
                    }
                }
            }
            (Some("compaction_delta"), Block::Opaque { block, .. }) => {
                if let Some(content) = delta.content {
                    match block.get_mut("content") {
                        Some(Value::String(text)) => text.push_str(&content),
                        _ => {
                            block.insert("content".into(), Value::String(content));
                        }
                    }
                }
                if let Some(encrypted) = delta.encrypted_content {
                    block.insert("encrypted_content".into(), Value::String(encrypted));
                }
            }
            // Mismatched or unknown delta kinds are skipped.
            _ => {}
        }
    }

    fn stop_block(&mut self, key: u64, out: &mut Vec<Delta>) {
        let Some(block) = self.blocks.remove(key) else { return };
        match block {
            Block::Text { open: true, citations } if !citations.is_empty() => {
                let mut signature = serde_json::Map::new();
                signature.insert("citations".into(), Value::Array(citations));
                out.push(Delta::TextSignature {
                    key,
                    signature: Value::Object(signature).to_string(),
                });
                out.push(Delta::BlockEnd { key });
            }
            Block::Opaque { mut block, input } => {
                if let Some(input) = input {
                    block.insert("input".into(), input.finish());
                }
                let wire_type = block.get("type").and_then(Value::as_str).unwrap_or("").to_owned();
                out.push(Delta::ProviderContent {
                    key,
                    content: ProviderContent { wire_type, data: Value::Object(block) },
                });
            }
            other if other.is_open() => out.push(Delta::BlockEnd { key }),
            _ => {}
        }
    }

    fn stop_reason(
        &mut self,
        reason: Option<String>,
        details: Option<&Value>,
        out: &mut Vec<Delta>,
    ) {
        let Some(reason) = reason.filter(|r| !r.is_empty()) else { return };
        match map_stop_reason(&reason) {
            Some(stop) => {
                self.saw_stop = true;
                out.push(Delta::Stop(stop));
            }
            None if reason == "refusal" || reason == "sensitive" => {
                let error = refusal_error(details);
                self.fail(error, out);
            }
            None => {
                let error = Error::new(
                    ErrorKind::Provider,
                    PROVIDER,
                    format!("Unhandled stop reason: {reason}"),
                )
                .with_code(reason)
                .with_retryable(false);
                self.fail(error, out);
            }
        }
    }
}

/// `end_turn`/`stop_sequence`/`pause_turn` -> stop, `max_tokens` and
/// `model_context_window_exceeded` -> length, `tool_use` -> toolUse; anything else is an error.
fn map_stop_reason(reason: &str) -> Option<StopReason> {
    match reason {
        "end_turn" | "stop_sequence" | "pause_turn" | "compaction" => Some(StopReason::Stop),
        "max_tokens" | "model_context_window_exceeded" => Some(StopReason::Length),
        "tool_use" => Some(StopReason::ToolUse),
        _ => None,
    }
}

/// A Claude refusal (`stop_reason` `refusal`), in Anthropic's words, from `stop_details`.
pub(crate) fn refusal_error(details: Option<&Value>) -> Error {
    Error::refusal(PROVIDER, "Anthropic", details)
}

impl WireDecoder for Decoder {
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) {
        self.decode_event(event, out);
    }

    fn end(&mut self, out: &mut Vec<Delta>) {
        self.decode_end(out);
    }

    fn surrogates(&mut self) -> Option<&mut SurrogateJoiner> {
        Some(&mut self.surrogates)
    }
}

impl Decoder {
    fn decode_event(&mut self, event: SseEvent, out: &mut Vec<Delta>) {
        if self.finished {
            return;
        }
        let name = event.event.as_deref().unwrap_or("");
        if name == "error" {
            let error = stream_error(&event.data);
            self.fail(error, out);
            return;
        }
        // Fastest path: the event repeats a learned one around a new fragment, and goes
        // straight to its block (no whole event is built and moved).
        if let Some((fragment, text)) = self.templates.read(&event.data) {
            let (index, delta) = fragment.delta(text);
            let before = out.len();
            self.block_delta(index, delta, out);
            self.note_content(out.get(before..).unwrap_or_default());
            return;
        }
        let parsed = serde_json::from_str::<WireEvent<'_>>(&event.data).inspect(|wire| {
            if let Some((fragment, text, path)) = Fragment::of(wire) {
                self.templates.learn(&event.data, &path, &[], fragment, text);
            }
        });
        let mut wire = match parsed {
            Ok(w) => w,
            Err(e) => {
                if KNOWN_EVENTS.contains(&name) {
                    let error = Error::new(
                        ErrorKind::Decode,
                        PROVIDER,
                        format!("Could not parse Anthropic SSE event {name}: {e}"),
                    )
                    .with_body(event.data.as_str())
                    .with_retryable(false);
                    self.fail(error, out);
                }
                // Data of an unknown event type that is not our JSON: not ours to judge.
                return;
            }
        };
        let kind = wire.kind.take().unwrap_or(Cow::Borrowed(name));
        if kind == "error" {
            let error = stream_error(&event.data);
            self.fail(error, out);
            return;
        }
        let before = out.len();
        self.handle(&kind, wire, out);
        self.note_content(out.get(before..).unwrap_or_default());
    }

    /// Notes whether `added` holds a content delta (anything the driver would show).
    fn note_content(&mut self, added: &[Delta]) {
        if !self.emitted_content {
            self.emitted_content = added.iter().any(|d| {
                !matches!(
                    d,
                    Delta::Metadata { .. }
                        | Delta::Usage(_)
                        | Delta::Stop(_)
                        | Delta::BlockEnd { .. }
                        | Delta::Error(_)
                )
            });
        }
    }

    fn decode_end(&mut self, out: &mut Vec<Delta>) {
        if !self.finished {
            self.finished = true;
            out.push(Delta::Error(Error::new(
                ErrorKind::Truncated,
                PROVIDER,
                "Anthropic stream ended before message_stop",
            )));
        }
    }
}

const KNOWN_EVENTS: [&str; 7] = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
];

#[cfg(test)]
mod tests;
