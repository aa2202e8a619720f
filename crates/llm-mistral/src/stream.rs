//! Mistral's streamed chunks -> llm-core's neutral [`Delta`]s (a pure state machine).
//!
//! Framing: `data: <json>\n\n` … `data: [DONE]\n\n`, no `event:` lines. Each chunk
//! is decoded leniently from a `serde_json::Value`: snake_case and camelCase field
//! names (`tool_calls` / `toolCalls`, `finish_reason` / `finishReason`), unknown
//! fields (the random `p` padding) ignored, numbers of any width.
//!
//! Tool calls come either whole in one chunk (no `index`, often with the finish
//! reason and usage) or as fragments keyed by `index`. A call is matched by its
//! real id first, then by its slot (`index`, else its position in the chunk's
//! array). The id string `"null"` (or no id) is not an id: a call that never
//! gets one is given a deterministic 9-character id derived from the response id
//! and the slot, and a real id followed by `"null"` stays one call.

use std::borrow::Cow;
use std::collections::HashMap;

use llm_core::raw::drive::WireDecoder;
use llm_core::raw::sse::SseEvent;
use llm_core::transform::{IdRules, normalize_tool_call_id};
use llm_core::{
    Error, ErrorKind, StopReason, Usage,
    raw::{
        BlockKey, CHAT_ARGUMENTS, CHAT_CONTENT, Channel, Delta, EventTemplates, SurrogateJoiner,
        WireValue,
    },
};
use serde::Deserialize;
use serde_json::Value;

use crate::PROVIDER;
use crate::error::{finish_reason_error, stream_error};

/// Which kind of content block is open for text-like content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextKind {
    Text,
    Thinking,
}

/// The random padding Mistral adds at the top level of chunks; nothing reads it.
const PADDING: &[&str] = &["p"];

/// What the one fragment of a chunk read through a template is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fragment {
    /// `delta.content`.
    Content,
    /// `delta.tool_calls[0].function.arguments`, of the call at this `index` (if the chunk
    /// had one).
    Arguments(Option<u64>),
}

/// One tool call seen so far.
#[derive(Debug)]
struct CallState {
    key: BlockKey,
    /// The wire id, if the provider sent a real one.
    real_id: Option<String>,
    has_name: bool,
}

/// The Mistral [`WireDecoder`].
#[derive(Debug, Default)]
pub struct Decoder {
    next_key: BlockKey,
    /// The open text or thinking block.
    current: Option<(TextKind, BlockKey)>,
    calls: Vec<CallState>,
    /// Slot (wire index, else array position) -> position in `calls`.
    slots: HashMap<u64, usize>,
    response_id: Option<String>,
    saw_metadata: bool,
    finish: Option<StopReason>,
    finished: bool,
    /// Surrogate pairs split across chunks: `content` at key 0, arguments at the call's key.
    surrogates: SurrogateJoiner,
    /// Chunks of one fragment learned: the next chunk that differs only in its fragment and
    /// padding is read by its bytes.
    templates: EventTemplates<Fragment>,
}

impl Decoder {
    /// A decoder for one response.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn alloc_key(&mut self) -> BlockKey {
        let key = self.next_key;
        self.next_key += 1;
        key
    }

    /// Processes one `data:` payload.
    pub(crate) fn data(&mut self, data: &str, out: &mut Vec<Delta>) {
        if self.finished {
            return;
        }
        let trimmed = data.trim();
        if trimmed.is_empty() {
            return;
        }
        if trimmed == "[DONE]" {
            // A surrogate half never completed is U+FFFD where it was.
            for (key, channel) in self.surrogates.drain_unfinished() {
                let replacement = '\u{FFFD}'.to_string();
                match channel {
                    Channel::ToolArgs => {
                        out.push(Delta::ToolCallArgs { key, fragment: replacement });
                    }
                    Channel::Text | Channel::Thinking => {
                        self.text(TextKind::Text, replacement, out);
                    }
                }
            }
            self.finished = true;
            match self.finish {
                Some(_) => out.push(Delta::Done),
                None => out.push(Delta::Error(Error::new(
                    ErrorKind::Truncated,
                    PROVIDER,
                    "Stream ended without finish_reason",
                ))),
            }
            return;
        }
        // Fastest path: the chunk repeats a learned one around a new fragment.
        if let Some((fragment, text)) = self.templates.read(trimmed) {
            // What the full parse gives for this chunk: every other field is as in the
            // learned chunk, and reading those again changes nothing.
            let arguments = Some(WireValue::Text(text));
            match fragment {
                Fragment::Content => {
                    self.delta(WireDelta { content: arguments, tool_calls: None }, out);
                }
                Fragment::Arguments(index) => {
                    let function = Some(WireFunction { name: None, arguments });
                    self.tool_call(WireToolCall { id: None, index, function }, 0, out);
                }
            }
            return;
        }
        // Fast path: typed, borrowing, unknown fields skipped without allocating.
        // A chunk the typed decoder rejects (odd types, both spellings of a
        // field) is decoded again leniently through `Value`.
        match serde_json::from_str::<WireChunk<'_>>(trimmed) {
            Ok(chunk) => {
                self.learn(&chunk, trimmed);
                self.chunk(chunk, trimmed, out);
            }
            Err(_) => match serde_json::from_str::<Value>(trimmed) {
                Ok(value) => {
                    let chunk = WireChunk::from_value(&value);
                    self.chunk(chunk, trimmed, out);
                }
                Err(e) => {
                    self.finished = true;
                    out.push(Delta::Error(
                        Error::new(
                            ErrorKind::Decode,
                            PROVIDER,
                            format!("Malformed stream chunk: {e}"),
                        )
                        .with_body(trimmed.to_owned())
                        .with_retryable(false),
                    ));
                }
            },
        }
    }

    /// Test hook: the lenient `Value` path only.
    #[cfg(test)]
    fn data_lenient(&mut self, data: &str, out: &mut Vec<Delta>) {
        let trimmed = data.trim();
        match serde_json::from_str::<Value>(trimmed) {
            Ok(value) => self.chunk(WireChunk::from_value(&value), trimmed, out),
            Err(_) => self.data(data, out),
        }
    }

    /// Learns `data` when its chunk is one text or argument fragment and nothing else that
    /// reading it a second time would act on (an id already seen is ignored then; a call's
    /// name and id must be absent or not real, as in fragments after a call's first).
    fn learn(&mut self, chunk: &WireChunk<'_>, data: &str) {
        if !self.templates.learning() || chunk.is_error() || chunk.usage.is_some() {
            return;
        }
        let Some(WireChoice { delta: Some(delta), finish_reason: None, .. }) = &chunk.choices
        else {
            return;
        };
        let (fragment, text, path) = match (&delta.content, delta.tool_calls.as_deref()) {
            (Some(WireValue::Text(text)), None) => (Fragment::Content, text, CHAT_CONTENT),
            (
                None,
                Some(
                    [
                        Some(WireToolCall {
                            id,
                            index,
                            function:
                                Some(WireFunction { name, arguments: Some(WireValue::Text(text)) }),
                        }),
                    ],
                ),
            ) if id.as_deref().is_none_or(|id| !is_real_id(id))
                && name.as_deref().is_none_or(str::is_empty) =>
            {
                (Fragment::Arguments(*index), text, CHAT_ARGUMENTS)
            }
            _ => return,
        };
        self.templates.learn(data, path, PADDING, fragment, text);
    }

    fn chunk(&mut self, chunk: WireChunk<'_>, raw: &str, out: &mut Vec<Delta>) {
        if chunk.is_error() {
            // Errors inside a 200 stream (gateways): `{"error":{…}}` or `{"object":"error",…}`.
            self.finished = true;
            let value = serde_json::from_str::<Value>(raw).unwrap_or(Value::Null);
            out.push(Delta::Error(stream_error(&value, raw)));
            return;
        }
        if !self.saw_metadata
            && let Some(id) = chunk.id.as_deref().filter(|s| !s.is_empty())
        {
            self.saw_metadata = true;
            self.response_id = Some(id.to_owned());
            out.push(Delta::Metadata {
                response_id: Some(id.to_owned()),
                response_model: chunk.model.as_deref().filter(|s| !s.is_empty()).map(str::to_owned),
            });
        }
        let mut choice = chunk.choices;
        if let Some(delta) = choice.as_mut().and_then(|c| c.delta.take()) {
            self.delta(delta, out);
        }
        // Usage rides on the finish chunk or on a separate `choices: []` chunk.
        if let Some(usage) = chunk.usage {
            out.push(Delta::Usage(usage.to_usage()));
        }
        if let Some(reason) = choice.as_ref().and_then(|c| c.finish_reason.as_deref()) {
            match map_finish_reason(reason) {
                Some(reason) => {
                    self.finish = Some(reason);
                    out.push(Delta::Stop(reason));
                }
                None => {
                    self.finished = true;
                    out.push(Delta::Error(finish_reason_error().with_body(raw.to_owned())));
                }
            }
        }
    }

    fn delta(&mut self, delta: WireDelta<'_>, out: &mut Vec<Delta>) {
        match delta.content {
            Some(WireValue::Text(s)) => {
                let s = self.surrogates.join(0, Channel::Text, s);
                self.text(TextKind::Text, s, out);
            }
            Some(WireValue::Other(other)) => {
                if let Value::Array(items) = *other {
                    for item in items {
                        self.content_item(item, out);
                    }
                }
            }
            None => {}
        }
        for (position, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
            if let Some(call) = call {
                self.tool_call(call, position as u64, out);
            }
        }
    }

    /// One typed content chunk (Magistral): `text`, `thinking` (nested parts), or
    /// a bare string. Other types (references, images) are ignored.
    fn content_item(&mut self, item: Value, out: &mut Vec<Delta>) {
        match item {
            Value::String(s) => self.text(TextKind::Text, s, out),
            Value::Object(mut map) => match map.get("type").and_then(Value::as_str) {
                Some("text") | None => {
                    if let Some(Value::String(text)) = map.remove("text") {
                        self.text(TextKind::Text, text, out);
                    }
                }
                Some("thinking") => {
                    let mut text = String::new();
                    collect_text(map.get("thinking"), &mut text);
                    self.text(TextKind::Thinking, text, out);
                }
                Some(_) => {}
            },
            _ => {}
        }
    }

    fn text(&mut self, kind: TextKind, text: String, out: &mut Vec<Delta>) {
        if text.is_empty() {
            return;
        }
        let key = match self.current {
            Some((k, key)) if k == kind => key,
            other => {
                if let Some((_, key)) = other {
                    out.push(Delta::BlockEnd { key });
                }
                let key = self.alloc_key();
                self.current = Some((kind, key));
                key
            }
        };
        out.push(match kind {
            TextKind::Text => Delta::Text { key, text },
            TextKind::Thinking => Delta::Thinking { key, text },
        });
    }

    fn tool_call(&mut self, call: WireToolCall<'_>, position: u64, out: &mut Vec<Delta>) {
        // A tool call ends the open text or thinking block.
        if let Some((_, key)) = self.current.take() {
            out.push(Delta::BlockEnd { key });
        }
        let real_id = call.id.as_deref().filter(|id| is_real_id(id));
        let slot = call.index.unwrap_or(position);
        let (name, arguments) = match call.function {
            Some(f) => (f.name, f.arguments),
            None => (None, None),
        };
        let name = name.as_deref().filter(|n| !n.is_empty());

        let existing = match real_id {
            Some(id) => {
                self.calls.iter().position(|c| c.real_id.as_deref() == Some(id)).or_else(|| {
                    // A real id at a slot whose call has a different real id is a new call.
                    self.slots
                        .get(&slot)
                        .copied()
                        .filter(|&i| self.calls.get(i).is_some_and(|c| c.real_id.is_none()))
                })
            }
            None => self.slots.get(&slot).copied(),
        };
        let index = match existing {
            Some(i) => {
                if let Some(state) = self.calls.get_mut(i) {
                    let new_id = match (real_id, &state.real_id) {
                        (Some(id), None) => {
                            state.real_id = Some(id.to_owned());
                            Some(id.to_owned())
                        }
                        _ => None,
                    };
                    let new_name = match name {
                        Some(n) if !state.has_name => {
                            state.has_name = true;
                            Some(n.to_owned())
                        }
                        _ => None,
                    };
                    if new_id.is_some() || new_name.is_some() {
                        out.push(Delta::ToolCallMeta {
                            key: state.key,
                            id: new_id,
                            name: new_name,
                            thought_signature: None,
                        });
                    }
                }
                i
            }
            None => {
                let key = self.alloc_key();
                let id = match real_id {
                    Some(id) => id.to_owned(),
                    None => derived_id(self.response_id.as_deref(), slot),
                };
                out.push(Delta::ToolCallStart {
                    key,
                    id,
                    name: name.unwrap_or_default().to_owned(),
                    arguments: None,
                });
                self.calls.push(CallState {
                    key,
                    real_id: real_id.map(str::to_owned),
                    has_name: name.is_some(),
                });
                self.calls.len() - 1
            }
        };
        self.slots.insert(slot, index);
        let Some(key) = self.calls.get(index).map(|c| c.key) else { return };
        match arguments {
            Some(WireValue::Text(fragment)) => {
                let fragment = self.surrogates.join(key, Channel::ToolArgs, fragment);
                if !fragment.is_empty() {
                    out.push(Delta::ToolCallArgs { key, fragment });
                }
            }
            // Already-parsed arguments are the whole arguments object.
            Some(WireValue::Other(args)) if matches!(*args, Value::Object(_) | Value::Array(_)) => {
                out.push(Delta::ToolCallArgsDone { key, arguments: args.to_string() });
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------
// Wire shapes
// ---------------------------------------------------------------------------

/// One chunk. Decoded directly by serde on the fast path (strings borrowed,
/// unknown fields such as the `p` padding skipped without allocating), or built
/// leniently from a `Value` by [`WireChunk::from_value`] when the typed decoder
/// rejects the chunk. Every field is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireChunk<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow)]
    object: Option<Cow<'a, str>>,
    error: Option<Value>,
    /// The first choice of `index` 0 (only that one is read); every choice is still read, so
    /// one of an unexpected shape sends the chunk to the lenient read.
    #[serde(borrow, deserialize_with = "first_choice")]
    choices: Option<WireChoice<'a>>,
    usage: Option<WireUsage>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireChoice<'a> {
    index: Option<u64>,
    #[serde(borrow)]
    delta: Option<WireDelta<'a>>,
    #[serde(borrow, alias = "finishReason")]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireDelta<'a> {
    /// A string, null, or an array of typed chunks.
    content: Option<WireValue>,
    #[serde(borrow, alias = "toolCalls")]
    tool_calls: Option<Vec<Option<WireToolCall<'a>>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireToolCall<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    index: Option<u64>,
    #[serde(borrow)]
    function: Option<WireFunction<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireFunction<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    /// A string fragment, or the whole arguments already as an object.
    arguments: Option<WireValue>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireUsage {
    #[serde(alias = "promptTokens")]
    prompt_tokens: Option<u64>,
    #[serde(alias = "completionTokens")]
    completion_tokens: Option<u64>,
    #[serde(alias = "promptTokensDetails")]
    prompt_tokens_details: Option<WireUsageDetails>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireUsageDetails {
    #[serde(alias = "cachedTokens")]
    cached_tokens: Option<u64>,
}

impl WireChunk<'_> {
    /// A gateway-style error payload instead of a chunk.
    fn is_error(&self) -> bool {
        self.object.as_deref().is_some_and(|o| o.eq_ignore_ascii_case("error"))
            || self.error.as_ref().is_some_and(|e| !e.is_null())
    }
}

/// Whether `choice` is the one read: `index` 0 or none.
fn is_first(choice: &WireChoice<'_>) -> bool {
    choice.index.is_none_or(|i| i == 0)
}

/// `choices`: the first of `index` 0, without collecting them into a vector.
fn first_choice<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<WireChoice<'de>>, D::Error> {
    llm_core::raw::first_element(d, is_first)
}

impl<'a> WireChunk<'a> {
    /// The lenient path: any JSON value, snake_case before camelCase, numbers of
    /// any width or numeric strings, wrongly typed fields ignored.
    fn from_value(value: &'a Value) -> Self {
        let text = |v: &'a Value, key: &str| v.get(key).and_then(Value::as_str).map(Cow::Borrowed);
        WireChunk {
            id: text(value, "id"),
            model: text(value, "model"),
            object: text(value, "object"),
            error: value.get("error").filter(|e| !e.is_null()).cloned(),
            choices: value.get("choices").and_then(Value::as_array).and_then(|choices| {
                choices
                    .iter()
                    .filter(|c| c.is_object())
                    .map(|c| WireChoice {
                        index: field(c, "index", "index").and_then(as_u64),
                        delta: c.get("delta").filter(|d| d.is_object()).map(|d| WireDelta {
                            content: d
                                .get("content")
                                .filter(|c| !c.is_null())
                                .cloned()
                                .map(WireValue::from),
                            tool_calls: field(d, "tool_calls", "toolCalls")
                                .and_then(Value::as_array)
                                .map(|calls| {
                                    calls
                                        .iter()
                                        .map(|call| {
                                            call.is_object().then(|| WireToolCall {
                                                id: text(call, "id"),
                                                index: field(call, "index", "index")
                                                    .and_then(as_u64),
                                                function: call
                                                    .get("function")
                                                    .filter(|f| f.is_object())
                                                    .map(|f| WireFunction {
                                                        name: text(f, "name"),
                                                        arguments: f
                                                            .get("arguments")
                                                            .filter(|a| !a.is_null())
                                                            .cloned()
                                                            .map(WireValue::from),
                                                    }),
                                            })
                                        })
                                        .collect()
                                }),
                        }),
                        finish_reason: field(c, "finish_reason", "finishReason")
                            .and_then(Value::as_str)
                            .map(Cow::Borrowed),
                    })
                    .find(is_first)
            }),
            usage: value.get("usage").filter(|u| u.is_object()).map(|u| {
                let num = |snake: &str, camel: &str| field(u, snake, camel).and_then(as_u64);
                WireUsage {
                    prompt_tokens: num("prompt_tokens", "promptTokens"),
                    completion_tokens: num("completion_tokens", "completionTokens"),
                    prompt_tokens_details: field(u, "prompt_tokens_details", "promptTokensDetails")
                        .map(|d| WireUsageDetails {
                            cached_tokens: field(d, "cached_tokens", "cachedTokens")
                                .and_then(as_u64),
                        }),
                }
            }),
        }
    }
}

impl WireUsage {
    /// `input` excludes cached prompt tokens (`prompt_tokens_details.cached_tokens`);
    /// Mistral reports no cache writes; cost is computed by the assembler.
    fn to_usage(&self) -> Usage {
        let prompt = self.prompt_tokens.unwrap_or(0);
        let cached = self.prompt_tokens_details.as_ref().and_then(|d| d.cached_tokens).unwrap_or(0);
        Usage {
            input: prompt.saturating_sub(cached),
            output: self.completion_tokens.unwrap_or(0),
            cache_read: cached,
            cache_write: 0,
            ..Usage::default()
        }
    }
}

impl WireDecoder for Decoder {
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) {
        self.data(&event.data, out);
    }

    fn end(&mut self, _out: &mut Vec<Delta>) {
        // No `[DONE]`: emit nothing; llm-core reports the stream as truncated.
    }
}

/// `"null"`, empty and missing ids are not ids (Mistral sends `"null"` after a real id).
fn is_real_id(id: &str) -> bool {
    let id = id.trim();
    !id.is_empty() && id != "null" && id != "None" && id != "undefined"
}

/// The id of a call the provider never named: 9 alphanumerics, a pure function
/// of the response id and the call's slot, so it is stable across chunks and
/// distinct across responses.
pub(crate) fn derived_id(response_id: Option<&str>, slot: u64) -> String {
    let seed = match response_id {
        Some(rid) => format!("{rid}:toolcall:{slot}"),
        None => format!("toolcall:{slot}"),
    };
    normalize_tool_call_id(&seed, &IdRules::MISTRAL_9)
}

/// `finish_reason` -> stop reason; `None` for `error` (OpenClaw `mapChatStopReason`:
/// unknown values are `stop`).
pub(crate) fn map_finish_reason(reason: &str) -> Option<StopReason> {
    match reason {
        "error" => None,
        "length" | "model_length" => Some(StopReason::Length),
        "tool_calls" => Some(StopReason::ToolUse),
        _ => Some(StopReason::Stop),
    }
}

/// `value[snake]`, else `value[camel]`, skipping nulls.
fn field<'a>(value: &'a Value, snake: &str, camel: &str) -> Option<&'a Value> {
    value.get(snake).filter(|v| !v.is_null()).or_else(|| value.get(camel).filter(|v| !v.is_null()))
}

/// A non-negative integer from a number of any width or a numeric string.
fn as_u64(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| f.is_finite() && *f >= 0.0).map(|f| f as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Concatenates the text of a thinking payload: a string, or nested parts.
fn collect_text(value: Option<&Value>, out: &mut String) {
    match value {
        Some(Value::String(s)) => out.push_str(s),
        Some(Value::Array(parts)) => {
            for part in parts {
                match part {
                    Value::String(s) => out.push_str(s),
                    Value::Object(map) => {
                        if let Some(t) = map.get("text").and_then(Value::as_str) {
                            out.push_str(t);
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic, reason = "tests")]
mod tests;
