//! Chat Completions stream chunks to neutral deltas: the [`Decoder`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use llm_core::drive::WireDecoder;
use llm_core::sse::SseEvent;
use llm_core::{
    BlockKey, Channel, Delta, Error, ErrorKind, StopReason, SurrogateJoiner, Usage, WireValue,
};
use serde::Deserialize;
use serde_json::Value;

use crate::compat::DEFAULT_REASONING_FIELDS;
use llm_core::strict::{NullFilter, StrictPlan};

/// What the decoder needs to know about the request.
#[derive(Debug, Clone)]
pub(crate) struct DecoderConfig {
    /// Provider name for errors.
    pub(crate) provider: String,
    /// Delta fields that carry reasoning text, in priority order.
    pub(crate) reasoning_fields: Vec<String>,
    /// Per tool name: how to undo the strict-mode nullable rewrite.
    pub(crate) strict_plans: BTreeMap<String, Arc<StrictPlan>>,
    /// Split `<think>…</think>` (and the other reasoning tags) out of `content`.
    pub(crate) reasoning_tags: bool,
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
        }
    }
}

/// The wire index used for legacy `delta.function_call` deltas.
const LEGACY_FUNCTION_INDEX: u64 = u64::MAX;

/// The message of the error for a stream without a finish reason.
pub(crate) const NO_FINISH_REASON: &str = "Stream ended without finish_reason";
/// The message of the error for an unusable call under a tool-use stop.
pub(crate) const MALFORMED_CALL: &str = "Provider returned an incomplete or malformed tool call";

/// Where a call's arguments stand, scanned byte by byte (JSON structure is ASCII).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// Only whitespace so far.
    Start,
    /// Inside the top-level object.
    Object { depth: u32, in_string: bool, escape: bool },
    /// The top-level value is not an object (it becomes `{}`); not scanned further.
    NonObject,
    /// The top-level object is complete; only whitespace since.
    Closed,
    /// Something other than whitespace or a new object followed a complete object.
    Trailing,
}

impl Scan {
    /// Feeds `text`; returns the byte offset of a second top-level object's `{`.
    fn feed(&mut self, text: &str) -> Option<usize> {
        let bytes = text.as_bytes();
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            match self {
                Scan::Start => {
                    if b == b'{' {
                        *self = Scan::Object { depth: 1, in_string: false, escape: false };
                    } else if !b.is_ascii_whitespace() {
                        *self = Scan::NonObject;
                        return None;
                    }
                }
                Scan::Object { depth, in_string, escape } => {
                    if *in_string {
                        if *escape {
                            *escape = false;
                        } else {
                            // Skip the plain run of the string in one go.
                            let rest = bytes.get(i..).unwrap_or_default();
                            match rest.iter().position(|&c| c == b'"' || c == b'\\') {
                                Some(p) => {
                                    i += p;
                                    if bytes.get(i) == Some(&b'\\') {
                                        *escape = true;
                                    } else {
                                        *in_string = false;
                                    }
                                }
                                None => return None,
                            }
                        }
                    } else {
                        match b {
                            b'"' => *in_string = true,
                            b'{' | b'[' => *depth += 1,
                            b'}' | b']' => {
                                *depth = depth.saturating_sub(1);
                                if *depth == 0 {
                                    *self = Scan::Closed;
                                }
                            }
                            _ => {}
                        }
                    }
                }
                Scan::Closed => {
                    if b == b'{' {
                        return Some(i);
                    }
                    if !b.is_ascii_whitespace() {
                        *self = Scan::Trailing;
                        return None;
                    }
                }
                Scan::NonObject | Scan::Trailing => return None,
            }
            i += 1;
        }
        None
    }

    /// Whether the arguments can be used as they are (empty counts: `{}`).
    fn usable(&self) -> bool {
        matches!(self, Scan::Start | Scan::Closed | Scan::NonObject)
    }
}

#[derive(Debug)]
struct Call {
    key: BlockKey,
    id: String,
    name: String,
    scan: Scan,
    /// Removes the `null`s of omitted optionals for strict tools.
    filter: Option<NullFilter>,
    /// How many calls were split off this one's concatenated arguments.
    splits: u32,
    /// The wire index, for generated ids.
    index: u64,
    /// The call whose arguments this one was split off (itself if none).
    origin: usize,
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
/// (`wire-formats.md` §2.a, `openclaw-behavior.md` §3.2 "Streaming parse").
///
/// A pure state machine over decoded SSE events: `data: <chunk JSON>` …
/// `data: [DONE]`. Chunks are read leniently (every field optional, unknown
/// fields ignored, numbers of any width); only `choices[0]` is read.
///
/// * Text (`delta.content`, also `delta.refusal`) and reasoning (the first
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
///   back until the finish reason is known). Calls cut off by `length` are kept
///   (spec decision 2: the agent answers them with an error result).
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
    by_index: HashMap<u64, usize>,
    by_id: HashMap<String, usize>,
    pending_signatures: HashMap<String, String>,
    tags: TagSplitter,
    holding: bool,
    held: Vec<(Delta, bool)>,
    id_sent: bool,
    model_sent: bool,
    response_id: String,
    finish_reason: Option<String>,
    /// Surrogate pairs split across chunks, per wire field: `content` and reasoning at key 0,
    /// arguments at the call's wire index.
    surrogates: SurrogateJoiner,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

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
            by_index: HashMap::new(),
            by_id: HashMap::new(),
            pending_signatures: HashMap::new(),
            tags: TagSplitter::default(),
            holding: false,
            held: Vec::new(),
            id_sent: false,
            model_sent: false,
            response_id: String::new(),
            finish_reason: None,
            surrogates: SurrogateJoiner::new(),
        }
    }

    fn key(&mut self) -> BlockKey {
        let k = self.next_key;
        self.next_key += 1;
        k
    }

    /// Queues a content delta (held back while calls after visible text are pending).
    fn emit(&mut self, delta: Delta, tool: bool, out: &mut Vec<Delta>) {
        if self.holding {
            self.held.push((delta, tool));
        } else {
            out.push(delta);
        }
    }

    fn flush_held(&mut self, drop_tools: bool, out: &mut Vec<Delta>) {
        self.holding = false;
        for (delta, tool) in self.held.drain(..) {
            if !(drop_tools && tool) {
                out.push(delta);
            }
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

    /// Opens a new call and returns its position in `calls`.
    fn open_call(&mut self, index: u64, id: String, name: String, out: &mut Vec<Delta>) -> usize {
        self.close_thinking(out);
        self.current = Current::Tool;
        if self.calls.is_empty() {
            self.text_before_calls = self.visible_text;
            self.holding = self.text_before_calls;
        }
        let key = self.key();
        let filter = self.cfg.strict_plans.get(&name).map(|p| NullFilter::new(Arc::clone(p)));
        let pos = self.calls.len();
        self.calls.push(Call {
            key,
            id: id.clone(),
            name: name.clone(),
            scan: Scan::Start,
            filter,
            splits: 0,
            index,
            origin: pos,
        });
        self.by_index.insert(index, pos);
        if !id.is_empty() {
            self.by_id.insert(id.clone(), pos);
        }
        let signature = self.pending_signatures.remove(&id);
        self.emit(Delta::ToolCallStart { key, id: id.clone(), name, arguments: None }, true, out);
        if let Some(signature) = signature {
            self.emit(
                Delta::ToolCallMeta {
                    key,
                    id: None,
                    name: None,
                    thought_signature: Some(signature),
                },
                true,
                out,
            );
        }
        pos
    }

    /// Appends an argument fragment to call `pos`, splitting concatenated objects.
    fn push_args(&mut self, mut pos: usize, fragment: String, out: &mut Vec<Delta>) {
        // The common case: no filter and no second object, the fragment moves on as is.
        if let Some(call) = self.calls.get_mut(pos)
            && call.filter.is_none()
        {
            let mut probe = call.scan;
            if probe.feed(&fragment).is_none() {
                call.scan = probe;
                let key = call.key;
                if !fragment.is_empty() {
                    self.emit(Delta::ToolCallArgs { key, fragment }, true, out);
                }
                return;
            }
        }
        let mut rest = fragment.as_str();
        loop {
            let Some(call) = self.calls.get_mut(pos) else { return };
            let split = call.scan.feed(rest);
            let (head, tail) = match split.and_then(|at| Some((rest.get(..at)?, rest.get(at..)?))) {
                Some((head, tail)) => (head, Some(tail)),
                None => (rest, None),
            };
            let key = call.key;
            let fragment = match call.filter.as_mut() {
                Some(filter) => filter.push(head),
                None => head.to_owned(),
            };
            if !fragment.is_empty() {
                self.emit(Delta::ToolCallArgs { key, fragment }, true, out);
            }
            let Some(tail) = tail else { return };
            // A second object: it is the next call's arguments. Ids count up from
            // the call the server named: `<id>_1`, `<id>_2`, ...
            let origin = self.calls.get(pos).map_or(pos, |c| c.origin);
            let (index, name) =
                self.calls.get(pos).map(|c| (c.index, c.name.clone())).unwrap_or_default();
            let (id, original_id) = {
                let Some(root) = self.calls.get_mut(origin) else { return };
                root.splits += 1;
                let id = if root.id.is_empty() {
                    String::new()
                } else {
                    format!("{}_{}", root.id, root.splits)
                };
                (id, root.id.clone())
            };
            tracing::debug!(tool = %name, "splitting concatenated tool-call arguments into a new call");
            let new_pos = self.open_call(index, id, name, out);
            if let Some(call) = self.calls.get_mut(new_pos) {
                call.origin = origin;
            }
            // Later fragments for this index or id continue the newest call.
            if !original_id.is_empty() {
                self.by_id.insert(original_id, new_pos);
            }
            pos = new_pos;
            rest = tail;
        }
    }

    fn tool_call_delta(&mut self, entry: WireToolCall, out: &mut Vec<Delta>) {
        let index = entry.index.as_ref().and_then(number);
        let id = match entry.id {
            Some(Value::String(id)) if !id.is_empty() && id != "null" => Some(id),
            _ => None,
        };
        let (name, arguments) = entry.function.map(WireFunction::split).unwrap_or_default();
        let arguments = self.join_arguments(index, arguments);
        self.apply_call(index, id, name, arguments, out);
    }

    /// Argument text joined with a surrogate half the previous fragment of the same wire
    /// index ended with.
    fn join_arguments(
        &mut self,
        index: Option<u64>,
        arguments: Option<WireValue>,
    ) -> Option<Value> {
        match arguments? {
            WireValue::Text(text) => Some(Value::String(self.surrogates.join(
                index.unwrap_or(u64::MAX),
                Channel::ToolArgs,
                text,
            ))),
            WireValue::Other(other) => Some(other),
        }
    }

    fn apply_call(
        &mut self,
        index: Option<u64>,
        id: Option<String>,
        name: Option<String>,
        arguments: Option<Value>,
        out: &mut Vec<Delta>,
    ) {
        let mut found = None;
        if let Some(index) = index
            && let Some(&pos) = self.by_index.get(&index)
        {
            let other_id = self.calls.get(pos).is_some_and(|c| {
                !c.id.is_empty()
                    && id.as_deref().is_some_and(|id| {
                        id != c.id && !is_split_of(id, &c.id) && !is_split_of(&c.id, id)
                    })
            });
            if !other_id {
                found = Some(pos);
            }
        }
        if found.is_none()
            && let Some(id) = &id
        {
            found = self.by_id.get(id).copied();
        }
        if found.is_none() && index.is_none() && id.is_none() {
            // No key at all: a continuation of the latest call, unless it names a new tool.
            let last = self.calls.len().checked_sub(1);
            let names_new = name.is_some()
                && last.and_then(|p| self.calls.get(p)).is_some_and(|c| !c.name.is_empty());
            if !names_new {
                found = last;
            }
        }
        let pos = match found {
            Some(pos) => {
                if let Some(index) = index {
                    self.by_index.insert(index, pos);
                }
                let Some(call) = self.calls.get_mut(pos) else { return };
                let new_id = id.filter(|_| call.id.is_empty());
                let new_name = name.filter(|_| call.name.is_empty());
                if new_id.is_some() || new_name.is_some() {
                    if let Some(id) = &new_id {
                        call.id = id.clone();
                    }
                    if let Some(name) = &new_name {
                        call.name = name.clone();
                        if call.scan == Scan::Start {
                            call.filter = self
                                .cfg
                                .strict_plans
                                .get(name)
                                .map(|p| NullFilter::new(Arc::clone(p)));
                        }
                    }
                    let key = call.key;
                    if let Some(id) = &new_id {
                        self.by_id.insert(id.clone(), pos);
                    }
                    let signature =
                        new_id.as_ref().and_then(|id| self.pending_signatures.remove(id));
                    self.emit(
                        Delta::ToolCallMeta {
                            key,
                            id: new_id,
                            name: new_name,
                            thought_signature: signature,
                        },
                        true,
                        out,
                    );
                }
                pos
            }
            None => {
                let index = index.unwrap_or(self.calls.len() as u64);
                self.open_call(index, id.unwrap_or_default(), name.unwrap_or_default(), out)
            }
        };
        match arguments {
            Some(Value::String(s)) => self.push_args(pos, s, out),
            Some(Value::Null) | None => {}
            // Some servers send the arguments as an object.
            Some(other) => self.push_args(pos, other.to_string(), out),
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

    fn metadata(&mut self, id: Option<&Value>, model: Option<&Value>, out: &mut Vec<Delta>) {
        let id = id.and_then(Value::as_str).filter(|s| !s.is_empty() && !self.id_sent);
        let model = model.and_then(Value::as_str).filter(|s| !s.is_empty() && !self.model_sent);
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

    fn chunk(&mut self, chunk: WireChunk, raw: &str, out: &mut Vec<Delta>) {
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            let mut payload = serde_json::Map::new();
            payload.insert("error".into(), error);
            let error =
                crate::error::stream_error(&self.cfg.provider, &Value::Object(payload), raw);
            self.fail(error, out);
            return;
        }
        self.metadata(chunk.id.as_ref(), chunk.model.as_ref(), out);
        let top_usage = chunk.usage.filter(Value::is_object);
        if let Some(usage) = &top_usage {
            out.push(Delta::Usage(parse_usage(usage)));
        }
        // Only the first choice (`index` 0) is read.
        let Some(choice) = chunk.choices.and_then(|choices| {
            choices.into_iter().find(|c| c.index.as_ref().and_then(number).unwrap_or(0) == 0)
        }) else {
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
        if let Some(Value::String(reason)) = choice.finish_reason
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
                "reasoning_content" => delta.reasoning_content.take(),
                "reasoning" => delta.reasoning.take(),
                "reasoning_text" => delta.reasoning_text.take(),
                other => delta
                    .other_reasoning
                    .iter_mut()
                    .find(|(n, _)| n == other)
                    .map(|(_, v)| std::mem::replace(v, WireValue::Other(Value::Null))),
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
            Some(WireValue::Other(Value::Array(parts))) => self.content_parts(parts, out),
            _ => {}
        }
        if let Some(Value::String(refusal)) = delta.refusal {
            self.text(refusal, out);
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

    /// Gives calls the server sent without an id a deterministic one.
    fn finish_calls(&mut self, out: &mut Vec<Delta>) {
        let late: Vec<Delta> = self
            .calls
            .iter()
            .filter(|c| c.id.is_empty())
            .map(|c| Delta::ToolCallMeta {
                key: c.key,
                id: Some(generated_id(&self.response_id, c.index, c.key)),
                name: None,
                thought_signature: None,
            })
            .collect();
        for delta in late {
            self.emit(delta, true, out);
        }
    }
}

/// Reasoning tags some models write into `content` (OpenClaw's reasoning-tag
/// partitioner): `<think>`, `<thinking>`, `<thought>`, `<reasoning>` and their
/// `antml:` / `mm:` forms.
const REASONING_TAGS: [(&str, &str); 12] = [
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<thought>", "</thought>"),
    ("<reasoning>", "</reasoning>"),
    ("<antml:think>", "</antml:think>"),
    ("<antml:thinking>", "</antml:thinking>"),
    ("<antml:thought>", "</antml:thought>"),
    ("<antml:reasoning>", "</antml:reasoning>"),
    ("<mm:think>", "</mm:think>"),
    ("<mm:thinking>", "</mm:thinking>"),
    ("<mm:thought>", "</mm:thought>"),
    ("<mm:reasoning>", "</mm:reasoning>"),
];

/// Splits streamed text into visible and reasoning pieces at reasoning tags,
/// which may be cut anywhere by fragment boundaries (a possible tag start at the
/// end of a fragment is held back until the next one).
#[derive(Debug, Default)]
struct TagSplitter {
    /// The closing tag while inside a reasoning span.
    inside: Option<&'static str>,
    /// Text held back because it may start a tag.
    pending: String,
}

impl TagSplitter {
    /// Appends `(is_reasoning, text)` pieces for `text` to `out`.
    fn push(&mut self, text: &str, out: &mut Vec<(bool, String)>) {
        if self.pending.is_empty() && self.inside.is_none() && !text.contains('<') {
            out.push((false, text.to_owned()));
            return;
        }
        let mut buf = std::mem::take(&mut self.pending);
        buf.push_str(text);
        let mut rest = buf.as_str();
        loop {
            match self.inside {
                Some(close) => match rest.find(close) {
                    Some(at) => {
                        push_piece(out, true, rest.get(..at).unwrap_or_default());
                        rest = rest.get(at + close.len()..).unwrap_or_default();
                        self.inside = None;
                    }
                    None => {
                        let keep = partial_tag_suffix(rest, &[close]);
                        let cut = rest.len() - keep;
                        push_piece(out, true, rest.get(..cut).unwrap_or_default());
                        self.pending = rest.get(cut..).unwrap_or_default().to_owned();
                        return;
                    }
                },
                None => {
                    let found = REASONING_TAGS
                        .iter()
                        .filter_map(|(open, close)| rest.find(open).map(|at| (at, *open, *close)))
                        .min_by_key(|(at, open, _)| (*at, std::cmp::Reverse(open.len())));
                    match found {
                        Some((at, open, close)) => {
                            push_piece(out, false, rest.get(..at).unwrap_or_default());
                            rest = rest.get(at + open.len()..).unwrap_or_default();
                            self.inside = Some(close);
                        }
                        None => {
                            let opens: Vec<&str> = REASONING_TAGS.iter().map(|(o, _)| *o).collect();
                            let keep = partial_tag_suffix(rest, &opens);
                            let cut = rest.len() - keep;
                            push_piece(out, false, rest.get(..cut).unwrap_or_default());
                            self.pending = rest.get(cut..).unwrap_or_default().to_owned();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// The end of the text: whatever was held back goes to its lane.
    fn finish(&mut self, out: &mut Vec<(bool, String)>) {
        let pending = std::mem::take(&mut self.pending);
        push_piece(out, self.inside.is_some(), &pending);
    }
}

fn push_piece(out: &mut Vec<(bool, String)>, reasoning: bool, text: &str) {
    if !text.is_empty() {
        out.push((reasoning, text.to_owned()));
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of one of `tags`.
fn partial_tag_suffix(text: &str, tags: &[&str]) -> usize {
    let Some(lt) = text.rfind('<') else { return 0 };
    let tail = text.get(lt..).unwrap_or_default();
    if tags.iter().any(|t| t.len() > tail.len() && t.starts_with(tail)) { tail.len() } else { 0 }
}

/// A stream chunk, as far as the decoder reads it. Leaves are `Value`s, so any
/// JSON type is accepted there; unknown fields are skipped.
#[derive(Debug, Default, Deserialize)]
struct WireChunk {
    id: Option<Value>,
    model: Option<Value>,
    choices: Option<Vec<WireChoice>>,
    usage: Option<Value>,
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct WireChoice {
    index: Option<Value>,
    delta: Option<WireDelta>,
    message: Option<Box<WireDelta>>,
    finish_reason: Option<Value>,
    usage: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct WireDelta {
    content: Option<WireValue>,
    refusal: Option<Value>,
    reasoning_content: Option<WireValue>,
    reasoning: Option<WireValue>,
    reasoning_text: Option<WireValue>,
    tool_calls: Option<Vec<WireToolCall>>,
    function_call: Option<WireFunction>,
    reasoning_details: Option<Value>,
    /// Reasoning fields a compat names besides the three above.
    #[serde(skip)]
    other_reasoning: Vec<(String, WireValue)>,
}

#[derive(Debug, Default, Deserialize)]
struct WireToolCall {
    index: Option<Value>,
    id: Option<Value>,
    function: Option<WireFunction>,
}

#[derive(Debug, Default, Deserialize)]
struct WireFunction {
    name: Option<Value>,
    arguments: Option<WireValue>,
}

impl WireFunction {
    /// The non-empty name and the arguments.
    fn split(self) -> (Option<String>, Option<WireValue>) {
        let name = match self.name {
            Some(Value::String(n)) if !n.is_empty() => Some(n),
            _ => None,
        };
        (name, self.arguments)
    }

    fn lenient(value: Value) -> Option<Self> {
        let Value::Object(mut m) = value else { return None };
        Some(WireFunction {
            name: m.remove("name"),
            arguments: m.remove("arguments").map(WireValue::from),
        })
    }
}

impl WireChunk {
    /// Picks a chunk apart by hand: parts of an unexpected shape are skipped.
    fn lenient(value: Value, reasoning_fields: &[String]) -> Self {
        let Value::Object(mut m) = value else { return WireChunk::default() };
        let choices = match m.remove("choices") {
            Some(Value::Array(items)) => Some(
                items
                    .into_iter()
                    .filter_map(|c| WireChoice::lenient(c, reasoning_fields))
                    .collect(),
            ),
            _ => None,
        };
        WireChunk {
            id: m.remove("id"),
            model: m.remove("model"),
            choices,
            usage: m.remove("usage"),
            error: m.remove("error"),
        }
    }
}

impl WireChoice {
    fn lenient(value: Value, reasoning_fields: &[String]) -> Option<Self> {
        let Value::Object(mut m) = value else { return None };
        Some(WireChoice {
            index: m.remove("index"),
            delta: m.remove("delta").and_then(|d| WireDelta::lenient(d, reasoning_fields)),
            message: m
                .remove("message")
                .and_then(|d| WireDelta::lenient(d, reasoning_fields))
                .map(Box::new),
            finish_reason: m.remove("finish_reason"),
            usage: m.remove("usage"),
        })
    }
}

impl WireDelta {
    fn lenient(value: Value, reasoning_fields: &[String]) -> Option<Self> {
        let Value::Object(mut m) = value else { return None };
        let tool_calls = match m.remove("tool_calls") {
            Some(Value::Array(items)) => Some(
                items
                    .into_iter()
                    .filter_map(|item| {
                        let Value::Object(mut t) = item else { return None };
                        Some(WireToolCall {
                            index: t.remove("index"),
                            id: t.remove("id"),
                            function: t.remove("function").and_then(WireFunction::lenient),
                        })
                    })
                    .collect(),
            ),
            _ => None,
        };
        let other_reasoning = reasoning_fields
            .iter()
            .filter(|f| !DEFAULT_REASONING_FIELDS.contains(&f.as_str()))
            .filter_map(|f| m.remove(f.as_str()).map(|v| (f.clone(), WireValue::from(v))))
            .collect();
        Some(WireDelta {
            content: m.remove("content").map(WireValue::from),
            refusal: m.remove("refusal"),
            reasoning_content: m.remove("reasoning_content").map(WireValue::from),
            reasoning: m.remove("reasoning").map(WireValue::from),
            reasoning_text: m.remove("reasoning_text").map(WireValue::from),
            tool_calls,
            function_call: m.remove("function_call").and_then(WireFunction::lenient),
            reasoning_details: m.remove("reasoning_details"),
            other_reasoning,
        })
    }
}

/// Whether `id` is one of the ids given to calls split off `base`.
fn is_split_of(id: &str, base: &str) -> bool {
    id.strip_prefix(base)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
}

/// A deterministic id for a call the server sent without one.
fn generated_id(response_id: &str, index: u64, key: BlockKey) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in response_id.bytes().chain(index.to_le_bytes()).chain(key.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("call_{h:016x}")
}

/// A non-negative integer from a JSON number of any width (or a numeric string).
fn number(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64().filter(|f| f.is_finite() && *f >= 0.0).map(|f| f.round() as u64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// OpenClaw's `parseChunkUsage`: `input` excludes cache reads and writes.
pub(crate) fn parse_usage(usage: &Value) -> Usage {
    let get = |v: &Value, k: &str| v.get(k).and_then(number);
    let prompt = get(usage, "prompt_tokens").unwrap_or(0);
    let output = get(usage, "completion_tokens").unwrap_or(0);
    let details = usage.get("prompt_tokens_details").filter(|d| d.is_object());
    let cache_read = details
        .and_then(|d| get(d, "cached_tokens"))
        .or_else(|| get(usage, "prompt_cache_hit_tokens"))
        .unwrap_or(0);
    let cache_write = details.and_then(|d| get(d, "cache_write_tokens")).unwrap_or(0);
    let input = prompt.saturating_sub(cache_read.saturating_add(cache_write));
    Usage {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens: input + output + cache_read + cache_write,
        ..Usage::default()
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
        // Fast path: typed, borrowing nothing, skipping unknown fields without
        // allocating. When the chunk's structure is unexpected (or the compat reads
        // reasoning from other fields), the chunk is read as a `Value` and picked
        // apart leniently.
        let typed = if self.cfg.default_reasoning_fields() && !is_error_event {
            serde_json::from_str::<WireChunk>(data).ok()
        } else {
            None
        };
        let chunk = match typed {
            Some(chunk) => chunk,
            None => match serde_json::from_str::<Value>(data) {
                Ok(value) if is_error_event && value.get("error").is_none() => {
                    // `event: error` with the error object as the whole payload.
                    WireChunk { error: Some(value), ..WireChunk::default() }
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
