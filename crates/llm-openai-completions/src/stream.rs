//! Chat Completions stream chunks to neutral deltas: the [`Decoder`].
//!
//! The wire chunk and its lenient parsing are in `wire`, tool-call assembly (the
//! argument scanner, split and legacy calls, generated ids) in `tool_calls`, and the
//! reasoning-tag splitter for `content` in `reasoning_tags`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use llm_core::raw::drive::WireDecoder;
use llm_core::raw::sse::SseEvent;
use llm_core::{
    Error, ErrorKind, StopReason,
    raw::{
        BlockKey, CHAT_ARGUMENTS, CHAT_CONTENT, Channel, Delta, EventTemplates, SurrogateJoiner,
        WireValue,
    },
};
use serde_json::Value;

use crate::compat::DEFAULT_REASONING_FIELDS;
use llm_core::raw::strict::StrictPlan;

mod reasoning_tags;
mod tool_calls;
mod wire;

use reasoning_tags::TagSplitter;
use tool_calls::{ByIndex, Call, Scan};
pub(crate) use wire::parse_usage;
use wire::{WireChunk, WireDelta, WireFunction, WireToolCall};

/// What the decoder needs to know about the request (and its errors, their provider name).
#[derive(Debug, Clone)]
pub struct DecoderConfig {
    /// Provider name for errors.
    pub(crate) provider: String,
    /// Delta fields that carry reasoning text, in priority order.
    pub(crate) reasoning_fields: Vec<String>,
    /// Per tool name: how to undo the strict-mode nullable rewrite.
    pub(crate) strict_plans: BTreeMap<String, Arc<StrictPlan>>,
    /// Split `<think>…</think>` (and the other reasoning tags) out of `content`.
    pub(crate) reasoning_tags: bool,
    /// The request asked for an output format: `delta.refusal` is then not the answer but a
    /// `refused` error at the end.
    pub(crate) refusal_is_error: bool,
}

impl DecoderConfig {
    /// Whether reasoning comes from the default fields only (the typed fast path).
    fn default_reasoning_fields(&self) -> bool {
        self.reasoning_fields.iter().all(|f| DEFAULT_REASONING_FIELDS.contains(&f.as_str()))
    }
}

impl Default for DecoderConfig {
    fn default() -> Self {
        DecoderConfig {
            provider: crate::PROVIDER.to_owned(),
            reasoning_fields: DEFAULT_REASONING_FIELDS.iter().map(|s| (*s).to_owned()).collect(),
            strict_plans: BTreeMap::new(),
            reasoning_tags: true,
            refusal_is_error: false,
        }
    }
}

/// The wire index used for legacy `delta.function_call` deltas.
const LEGACY_FUNCTION_INDEX: u64 = u64::MAX;

/// The message of the error for a stream without a finish reason.
pub(crate) const NO_FINISH_REASON: &str = "Stream ended without finish_reason";
/// The message of the error for an unusable call under a tool-use stop.
pub(crate) const MALFORMED_CALL: &str = "Provider returned an incomplete or malformed tool call";

/// A random string OpenAI adds at the top level of every chunk; nothing reads it.
const PADDING: &[&str] = &["obfuscation"];
/// What the one fragment of a chunk read through a template is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fragment {
    /// `delta.content`.
    Content,
    /// `delta.tool_calls[0].function.arguments` of the call at this wire index.
    Arguments(u64),
}

/// Which block text or reasoning currently goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Current {
    None,
    Text(BlockKey),
    Thinking(BlockKey),
    Tool,
}

/// The Chat Completions [`WireDecoder`]: SSE events of a streamed chat completion
/// in, neutral [`Delta`]s out.
///
/// It follows OpenClaw's Chat Completions stream parser.
///
/// A pure state machine over decoded SSE events: `data: <chunk JSON>` …
/// `data: [DONE]`. Chunks are read leniently (every field optional, unknown
/// fields ignored, numbers of any width); only `choices[0]` is read.
///
/// * Text (`delta.content`, also `delta.refusal`, unless the request asked for an output
///   format: then a refusal ends the stream with a `refused` error) and reasoning (the first
///   non-empty of the compat's reasoning fields, by default `reasoning_content`,
///   `reasoning`, `reasoning_text`) become text and thinking blocks; the field
///   name is the thinking signature, so a same-model replay puts the text back
///   in that field. A thinking block ends as soon as text or a tool call starts.
/// * `delta.tool_calls[]` entries are matched to calls by `index`, else by `id`
///   (an entry with an id and no index), else continue the latest call. An
///   entry whose index is taken by a call with a *different* id starts a new
///   call (servers that reset the index per chunk). Parallel calls may
///   interleave freely.
/// * Arguments that hold several concatenated objects `{…}{…}` (seen from some
///   compatible servers) are split, as they stream, into separate calls with the
///   same name and ids `<id>_1`, `<id>_2`, …; anything else after a complete
///   object makes the response fail with a clear error instead of being dropped.
/// * Reasoning written into `content` between tags (`<think>…</think>` and the
///   other forms OpenClaw recognizes, cut anywhere by fragment boundaries) becomes
///   an unsigned thinking block, unless the compat switches `reasoningTags` off.
/// * A non-streamed completion body (`choices[0].message`), sent by servers that
///   ignore `stream: true`, is read like one big delta.
/// * Usage comes from `usage` (a final chunk with `choices: []`) or
///   `choices[0].usage`; `input` excludes cached tokens.
/// * A `{"error": …}` payload ends the stream with an error that keeps the
///   partial content.
/// * The finish reason is applied at `[DONE]` (or at the end of the body when
///   `[DONE]` never comes): `stop`/`end` → stop, `length` → length,
///   `tool_calls`/`function_call` → toolUse, anything else → an error
///   `Provider finish_reason: <r>`; no finish reason at all → the error
///   `Stream ended without finish_reason`. Then, as OpenClaw does: toolUse
///   without calls → stop; stop with calls → toolUse, unless visible text came
///   before the calls, in which case the calls are dropped and the reason stays
///   stop (to make that possible, calls that start after visible text are held
///   back until the finish reason is known; the held fragments of one call, or of one
///   text block, that come one after another are handed on as one delta with the same
///   text). Calls cut off by `length` are kept
///   (the agent answers them with an error result and never runs them).
/// * A response that stops for tool use with an unnamed call or with
///   arguments that are not complete JSON fails with
///   `Provider returned an incomplete or malformed tool call` instead of
///   running a truncated call.
///
/// Public so benchmarks and custom drivers can run it without HTTP; the provider
/// builds one per attempt with the request's settings.
#[derive(Debug)]
pub struct Decoder {
    cfg: Arc<DecoderConfig>,
    finished: bool,
    next_key: BlockKey,
    current: Current,
    visible_text: bool,
    text_before_calls: bool,
    calls: Vec<Call>,
    by_index: ByIndex,
    by_id: HashMap<String, usize>,
    pending_signatures: HashMap<String, String>,
    tags: TagSplitter,
    holding: bool,
    held: Vec<Delta>,
    /// Whether each held delta belongs to a call (dropped if the calls are).
    held_tool: Vec<bool>,
    id_sent: bool,
    model_sent: bool,
    response_id: String,
    finish_reason: Option<String>,
    /// `delta.refusal` text held for the error, when a refusal is an error.
    refusal: String,
    /// Surrogate pairs split across chunks, per wire field: `content` and reasoning at key 0,
    /// arguments at the call's wire index.
    surrogates: SurrogateJoiner,
    /// Chunks of one fragment learned: the next chunk that differs only in its fragment and
    /// padding is read by its bytes.
    templates: EventTemplates<Fragment>,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

/// Deltas held at once when holding starts (see [`Decoder`]): a call's start and its
/// arguments, with room for a second call, before the vector grows.
const HELD_FIRST: usize = 4;

impl Decoder {
    /// A decoder with the default settings (provider `openai`, the default
    /// reasoning fields, no strict tools).
    pub fn new() -> Self {
        Self::with_config(Arc::new(DecoderConfig::default()))
    }

    pub(crate) fn with_config(cfg: Arc<DecoderConfig>) -> Self {
        Decoder {
            cfg,
            finished: false,
            next_key: 0,
            current: Current::None,
            visible_text: false,
            text_before_calls: false,
            calls: Vec::new(),
            by_index: ByIndex::default(),
            by_id: HashMap::new(),
            pending_signatures: HashMap::new(),
            tags: TagSplitter::default(),
            holding: false,
            held: Vec::new(),
            held_tool: Vec::new(),
            id_sent: false,
            model_sent: false,
            response_id: String::new(),
            finish_reason: None,
            refusal: String::new(),
            surrogates: SurrogateJoiner::new(),
            templates: EventTemplates::default(),
        }
    }

    /// Reads `data` through a learned template: `false` when none matches, and the chunk
    /// takes the full parse.
    fn read_repeated(&mut self, data: &str, out: &mut Vec<Delta>) -> bool {
        let Some((fragment, text)) = self.templates.read(data) else { return false };
        // What the full parse gives for this chunk: every other field is as in the learned
        // chunk, and reading those again changes nothing.
        match fragment {
            Fragment::Content => self.delta(
                WireDelta { content: Some(WireValue::Text(text)), ..WireDelta::default() },
                out,
            ),
            Fragment::Arguments(index) => self.tool_call_delta(
                WireToolCall {
                    index: Some(index),
                    id: None,
                    function: Some(WireFunction {
                        name: None,
                        arguments: Some(WireValue::Text(text)),
                    }),
                },
                out,
            ),
        }
        true
    }

    /// Learns `data` when its chunk is one text or argument fragment and nothing else that
    /// reading it a second time would act on (an id or model already seen is ignored then).
    fn learn(&mut self, chunk: &WireChunk<'_>, data: &str) {
        if !self.templates.learning() || chunk.error.is_some() || chunk.usage.is_some() {
            return;
        }
        let Some(choice) = &chunk.choices else { return };
        if choice.usage.is_some() || choice.message.is_some() || choice.finish_reason.is_some() {
            return;
        }
        let Some(delta) = &choice.delta else { return };
        if delta.refusal.is_some()
            || delta.reasoning_content.is_some()
            || delta.reasoning.is_some()
            || delta.reasoning_text.is_some()
            || delta.function_call.is_some()
            || delta.reasoning_details.is_some()
            || !delta.other_reasoning.is_empty()
        {
            return;
        }
        let (fragment, text, path) = match (&delta.content, delta.tool_calls.as_deref()) {
            (Some(WireValue::Text(text)), None) => (Fragment::Content, text, CHAT_CONTENT),
            (
                None,
                Some(
                    [
                        WireToolCall {
                            index: Some(index),
                            id: None,
                            function:
                                Some(WireFunction {
                                    name: None,
                                    arguments: Some(WireValue::Text(text)),
                                }),
                        },
                    ],
                ),
            ) => (Fragment::Arguments(*index), text, CHAT_ARGUMENTS),
            _ => return,
        };
        self.templates.learn(data, path, PADDING, fragment, text);
    }

    fn key(&mut self) -> BlockKey {
        let k = self.next_key;
        self.next_key += 1;
        k
    }

    /// Queues a content delta (held back while calls after visible text are pending).
    ///
    /// A held fragment that continues the held fragment before it (the same call's
    /// arguments, the same block's text) is appended to it: held deltas reach the consumer
    /// together at the finish reason, so one delta per run carries the same text, with one
    /// allocation held instead of one per fragment.
    fn emit(&mut self, delta: Delta, tool: bool, out: &mut Vec<Delta>) {
        if self.holding {
            match (self.held.last_mut(), delta) {
                (
                    Some(Delta::ToolCallArgs { key: last, fragment: held }),
                    Delta::ToolCallArgs { key, fragment },
                )
                | (
                    Some(Delta::Text { key: last, text: held }),
                    Delta::Text { key, text: fragment },
                ) if *last == key => {
                    held.push_str(&fragment);
                }
                (_, delta) => {
                    if self.held.capacity() == 0 {
                        self.held.reserve(HELD_FIRST);
                    }
                    self.held.push(delta);
                    self.held_tool.push(tool);
                }
            }
        } else {
            out.push(delta);
        }
    }

    fn flush_held(&mut self, drop_tools: bool, out: &mut Vec<Delta>) {
        self.holding = false;
        if drop_tools {
            let mut tool = self.held_tool.iter();
            self.held.retain(|_| !tool.next().copied().unwrap_or(false));
        }
        self.held_tool.clear();
        if out.is_empty() {
            // The usual case (flushed at the finish reason): the held vector becomes the
            // batch, with no copy into another.
            std::mem::swap(out, &mut self.held);
        } else {
            out.append(&mut self.held);
        }
    }

    fn fail(&mut self, error: Error, out: &mut Vec<Delta>) {
        self.flush_tags(out);
        self.flush_held(false, out);
        out.push(Delta::Error(error));
        self.finished = true;
    }

    fn error(&self, kind: ErrorKind, message: impl Into<String>) -> Error {
        Error::new(kind, self.cfg.provider.clone(), message)
    }

    fn close_thinking(&mut self, out: &mut Vec<Delta>) {
        if let Current::Thinking(key) = self.current {
            self.emit(Delta::BlockEnd { key }, false, out);
            self.current = Current::None;
        }
    }

    /// Visible `content` text: reasoning tags are split off when the compat allows.
    fn content(&mut self, text: String, out: &mut Vec<Delta>) {
        if !self.cfg.reasoning_tags {
            self.text(text, out);
            return;
        }
        let mut pieces = Vec::new();
        self.tags.push(&text, &mut pieces);
        self.dispatch_pieces(pieces, out);
    }

    fn dispatch_pieces(&mut self, pieces: Vec<(bool, String)>, out: &mut Vec<Delta>) {
        for (thinking, piece) in pieces {
            if thinking {
                self.thinking(piece, None, out);
            } else {
                self.text(piece, out);
            }
        }
    }

    fn flush_tags(&mut self, out: &mut Vec<Delta>) {
        let mut pieces = Vec::new();
        self.tags.finish(&mut pieces);
        self.dispatch_pieces(pieces, out);
    }

    fn text(&mut self, text: String, out: &mut Vec<Delta>) {
        if text.is_empty() {
            return;
        }
        if !self.visible_text && !text.trim().is_empty() {
            self.visible_text = true;
        }
        let key = match self.current {
            Current::Text(key) => key,
            _ => {
                self.close_thinking(out);
                let key = self.key();
                self.current = Current::Text(key);
                key
            }
        };
        self.emit(Delta::Text { key, text }, false, out);
    }

    /// Reasoning text; `field` (the delta field it came from) becomes the signature.
    fn thinking(&mut self, text: String, field: Option<&str>, out: &mut Vec<Delta>) {
        if text.is_empty() {
            return;
        }
        match self.current {
            Current::Thinking(key) => self.emit(Delta::Thinking { key, text }, false, out),
            _ => {
                let key = self.key();
                self.current = Current::Thinking(key);
                self.emit(Delta::Thinking { key, text }, false, out);
                if let Some(field) = field {
                    self.emit(
                        Delta::ThinkingSignature { key, signature: field.to_owned() },
                        false,
                        out,
                    );
                }
            }
        }
    }

    /// OpenRouter's encrypted reasoning for a call (`reasoning_details`).
    fn reasoning_details(&mut self, details: &Value, out: &mut Vec<Delta>) {
        let Some(items) = details.as_array() else { return };
        for item in items {
            if item.get("type").and_then(Value::as_str) != Some("reasoning.encrypted") {
                continue;
            }
            let (Some(id), Some(_)) = (item.get("id").and_then(Value::as_str), item.get("data"))
            else {
                continue;
            };
            let signature = item.to_string();
            match self.by_id.get(id).and_then(|&p| self.calls.get(p)).map(|c| c.key) {
                Some(key) => self.emit(
                    Delta::ToolCallMeta {
                        key,
                        id: None,
                        name: None,
                        thought_signature: Some(signature),
                    },
                    true,
                    out,
                ),
                None => {
                    self.pending_signatures.insert(id.to_owned(), signature);
                }
            }
        }
    }

    fn metadata(&mut self, id: Option<&str>, model: Option<&str>, out: &mut Vec<Delta>) {
        let id = id.filter(|s| !s.is_empty() && !self.id_sent);
        let model = model.filter(|s| !s.is_empty() && !self.model_sent);
        if id.is_none() && model.is_none() {
            return;
        }
        if let Some(id) = id {
            self.id_sent = true;
            self.response_id = id.to_owned();
        }
        if model.is_some() {
            self.model_sent = true;
        }
        out.push(Delta::Metadata {
            response_id: id.map(str::to_owned),
            response_model: model.map(str::to_owned),
        });
    }

    fn chunk(&mut self, chunk: WireChunk<'_>, raw: &str, out: &mut Vec<Delta>) {
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            let mut payload = serde_json::Map::new();
            payload.insert("error".into(), *error);
            let error =
                crate::error::stream_error(&self.cfg.provider, &Value::Object(payload), raw);
            self.fail(error, out);
            return;
        }
        self.metadata(chunk.id.as_deref(), chunk.model.as_deref(), out);
        let top_usage = chunk.usage.filter(|u| u.is_object());
        if let Some(usage) = &top_usage {
            out.push(Delta::Usage(parse_usage(usage)));
        }
        // Only the first choice (`index` 0) is read.
        let Some(choice) = chunk.choices else {
            return;
        };
        if top_usage.is_none()
            && let Some(usage) = choice.usage.as_ref().filter(|u| u.is_object())
        {
            // Moonshot puts usage on the choice.
            out.push(Delta::Usage(parse_usage(usage)));
        }
        // A non-streamed completion (`message`) is read like one big delta.
        if let Some(delta) = choice.delta.or(choice.message.map(|m| *m)) {
            self.delta(delta, out);
        }
        if let Some(reason) = choice.finish_reason
            && !reason.is_empty()
        {
            self.finish_reason = Some(reason);
        }
    }

    fn delta(&mut self, mut delta: WireDelta, out: &mut Vec<Delta>) {
        // Reasoning first: servers that send both put the reasoning before the text.
        let cfg = Arc::clone(&self.cfg);
        for field in &cfg.reasoning_fields {
            let value = match field.as_str() {
                "reasoning_content" => delta.reasoning_content.take().map(|v| *v),
                "reasoning" => delta.reasoning.take().map(|v| *v),
                "reasoning_text" => delta.reasoning_text.take().map(|v| *v),
                other => delta
                    .other_reasoning
                    .iter_mut()
                    .find(|(n, _)| n == other)
                    .map(|(_, v)| std::mem::replace(v, WireValue::Other(Box::new(Value::Null)))),
            };
            if let Some(WireValue::Text(text)) = value
                && !text.is_empty()
            {
                let text = self.surrogates.join(0, Channel::Thinking, text);
                self.thinking(text, Some(field), out);
                break;
            }
        }
        match delta.content {
            Some(WireValue::Text(text)) => {
                let text = self.surrogates.join(0, Channel::Text, text);
                self.content(text, out);
            }
            Some(WireValue::Other(other)) => {
                if let Value::Array(parts) = *other {
                    self.content_parts(parts, out);
                }
            }
            None => {}
        }
        if let Some(refusal) = delta.refusal {
            if self.cfg.refusal_is_error {
                self.refusal.push_str(&refusal);
            } else {
                self.text(refusal, out);
            }
        }
        for entry in delta.tool_calls.unwrap_or_default() {
            self.tool_call_delta(entry, out);
        }
        if let Some(function) = delta.function_call {
            let (name, arguments) = function.split();
            let arguments = self.join_arguments(Some(LEGACY_FUNCTION_INDEX), arguments);
            self.apply_call(Some(LEGACY_FUNCTION_INDEX), None, name, arguments, out);
        }
        if let Some(details) = &delta.reasoning_details {
            self.reasoning_details(details, out);
        }
    }

    /// Array content (some compatible servers): text and thinking parts.
    fn content_parts(&mut self, parts: Vec<Value>, out: &mut Vec<Delta>) {
        for mut part in parts {
            match part.get("type").and_then(Value::as_str) {
                Some("text") => {
                    if let Some(Value::String(text)) = part.get_mut("text").map(Value::take) {
                        self.text(text, out);
                    }
                }
                Some("thinking") => match part.get_mut("thinking").map(Value::take) {
                    Some(Value::String(text)) => {
                        self.thinking(text, Some("reasoning_content"), out)
                    }
                    Some(Value::Array(inner)) => {
                        for mut p in inner {
                            if let Some(Value::String(text)) = p.get_mut("text").map(Value::take) {
                                self.thinking(text, Some("reasoning_content"), out);
                            }
                        }
                    }
                    _ => {}
                },
                _ => {}
            }
        }
    }

    /// `[DONE]` or the end of the body after a finish reason: the terminal deltas.
    fn finalize(&mut self, out: &mut Vec<Delta>) {
        self.finished = true;
        // A surrogate half never completed is U+FFFD where it was.
        for (key, channel) in self.surrogates.drain_unfinished() {
            let replacement = '\u{FFFD}'.to_string();
            match channel {
                Channel::Text => self.content(replacement, out),
                Channel::Thinking => self.thinking(replacement, None, out),
                Channel::ToolArgs => {
                    let pos = self.by_index.get(&key).copied().or(self.calls.len().checked_sub(1));
                    if let Some(pos) = pos {
                        self.push_args(pos, replacement, out);
                    }
                }
            }
        }
        self.flush_tags(out);
        if !self.refusal.is_empty() {
            let message = format!("OpenAI refusal: {}", self.refusal);
            let error =
                self.error(ErrorKind::Refused, message).with_code("refusal").with_retryable(false);
            self.flush_held(false, out);
            out.push(Delta::Error(error));
            return;
        }
        let Some(reason) = self.finish_reason.clone() else {
            let error = self.error(ErrorKind::Truncated, NO_FINISH_REASON);
            self.flush_held(false, out);
            out.push(Delta::Error(error));
            return;
        };
        let mapped = match reason.as_str() {
            "stop" | "end" => StopReason::Stop,
            "length" => StopReason::Length,
            "tool_calls" | "function_call" => StopReason::ToolUse,
            other => {
                let kind = match other {
                    "content_filter" => ErrorKind::Refused,
                    "network_error" => ErrorKind::Transport,
                    _ => ErrorKind::Provider,
                };
                let error = self
                    .error(kind, format!("Provider finish_reason: {other}"))
                    .with_code(other)
                    .with_retryable(false);
                self.flush_held(false, out);
                out.push(Delta::Error(error));
                return;
            }
        };
        let has_calls = !self.calls.is_empty();
        let mut drop_calls = false;
        let stop = match mapped {
            StopReason::Stop if has_calls => {
                if self.text_before_calls {
                    drop_calls = true;
                    StopReason::Stop
                } else {
                    StopReason::ToolUse
                }
            }
            StopReason::ToolUse if !has_calls => StopReason::Stop,
            other => other,
        };
        if stop == StopReason::ToolUse
            && let Some(bad) = self.calls.iter().find(|c| c.name.is_empty() || !c.scan.usable())
        {
            let what = if bad.name.is_empty() {
                "a tool call without a name".to_owned()
            } else if bad.scan == Scan::Trailing {
                format!("arguments of \"{}\" have text after the JSON object", bad.name)
            } else {
                format!("arguments of \"{}\" are not complete JSON", bad.name)
            };
            let error = self
                .error(ErrorKind::Decode, format!("{MALFORMED_CALL}: {what}"))
                .with_retryable(false);
            self.flush_held(false, out);
            out.push(Delta::Error(error));
            return;
        }
        if !drop_calls {
            self.finish_calls(out);
        }
        self.flush_held(drop_calls, out);
        out.push(Delta::Stop(stop));
        out.push(Delta::Done);
    }
}

impl WireDecoder for Decoder {
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) {
        if self.finished {
            return;
        }
        let data = event.data.trim();
        if data.is_empty() {
            return;
        }
        if data == "[DONE]" {
            self.finalize(out);
            return;
        }
        let is_error_event = event.event.as_deref() == Some("error");
        let fast = self.cfg.default_reasoning_fields() && !is_error_event;
        // Fastest path: the chunk repeats a learned one around a new fragment.
        if fast && self.read_repeated(data, out) {
            return;
        }
        // Fast path: typed, borrowing nothing, skipping unknown fields without
        // allocating. When the chunk's structure is unexpected (or the compat reads
        // reasoning from other fields), the chunk is read as a `Value` and picked
        // apart leniently.
        let typed = if fast { serde_json::from_str::<WireChunk>(data).ok() } else { None };
        if let Some(chunk) = &typed {
            self.learn(chunk, data);
        }
        let chunk = match typed {
            Some(chunk) => chunk,
            None => match serde_json::from_str::<Value>(data) {
                Ok(value) if is_error_event && value.get("error").is_none() => {
                    // `event: error` with the error object as the whole payload.
                    WireChunk { error: Some(Box::new(value)), ..WireChunk::default() }
                }
                Ok(value) => WireChunk::lenient(value, &self.cfg.reasoning_fields),
                Err(e) => {
                    let error = self
                        .error(ErrorKind::Decode, format!("Malformed stream chunk: {e}"))
                        .with_body(data)
                        .with_retryable(false);
                    self.fail(error, out);
                    return;
                }
            },
        };
        self.chunk(chunk, data, out);
    }

    fn end(&mut self, out: &mut Vec<Delta>) {
        if self.finished {
            return;
        }
        // `[DONE]` may be missing; a finish reason is what makes a response complete.
        self.finalize(out);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests;
