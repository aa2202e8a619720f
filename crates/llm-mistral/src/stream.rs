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

use llm_core::drive::WireDecoder;
use llm_core::sse::SseEvent;
use llm_core::transform::{IdRules, normalize_tool_call_id};
use llm_core::{
    BlockKey, Channel, Delta, Error, ErrorKind, StopReason, SurrogateJoiner, Usage, WireValue,
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
pub(crate) struct Decoder {
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
        // Fast path: typed, borrowing, unknown fields skipped without allocating.
        // A chunk the typed decoder rejects (odd types, both spellings of a
        // field) is decoded again leniently through `Value`.
        match serde_json::from_str::<WireChunk<'_>>(trimmed) {
            Ok(chunk) => self.chunk(chunk, trimmed, out),
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
        let mut choice =
            chunk.choices.unwrap_or_default().into_iter().find(|c| c.index.is_none_or(|i| i == 0));
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
            Some(WireValue::Other(Value::Array(items))) => {
                for item in items {
                    self.content_item(item, out);
                }
            }
            _ => {}
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
            Some(WireValue::Other(args @ (Value::Object(_) | Value::Array(_)))) => {
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
    #[serde(borrow)]
    choices: Option<Vec<WireChoice<'a>>>,
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
            choices: value.get("choices").and_then(Value::as_array).map(|choices| {
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
                    .collect()
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

/// `"null"`, empty and missing ids are not ids (wire-formats §5.c #2).
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
mod tests {
    use llm_core::sse::SseDecoder;
    use llm_core::{AssistantEvent, MessageAssembler, Model};
    use serde_json::json;

    use super::*;

    fn model() -> Model {
        Model {
            id: "mistral-small-latest".into(),
            api: crate::API.into(),
            provider: "mistral".into(),
            cost: llm_core::ModelCost {
                input: 0.1,
                output: 0.3,
                cache_read: 0.01,
                cache_write: 0.0,
            },
            ..Model::default()
        }
    }

    /// Bytes -> SSE -> decoder -> deltas (no terminal delta added).
    fn deltas(sse: &str) -> Vec<Delta> {
        let mut events = Vec::new();
        let mut sse_decoder = SseDecoder::new();
        sse_decoder.push(sse.as_bytes(), &mut events).unwrap();
        sse_decoder.finish(&mut events).unwrap();
        let mut decoder = Decoder::new();
        let mut out = Vec::new();
        for event in events {
            decoder.event(event, &mut out);
        }
        decoder.end(&mut out);
        out
    }

    /// Bytes -> events through the assembler; a missing terminal is reported
    /// as `None` at the end.
    fn events(sse: &str) -> Vec<AssistantEvent> {
        let mut assembler = MessageAssembler::new(&model(), 0);
        for delta in deltas(sse) {
            assembler.push(delta);
        }
        std::iter::from_fn(|| assembler.next_event()).collect()
    }

    fn final_message(sse: &str) -> llm_core::AssistantMessage {
        match events(sse).pop() {
            Some(AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. }) => {
                message
            }
            other => panic!("no terminal event: {other:?}"),
        }
    }

    fn sse(chunks: &[serde_json::Value]) -> String {
        let mut s = String::new();
        for c in chunks {
            s.push_str("data: ");
            s.push_str(&c.to_string());
            s.push_str("\n\n");
        }
        s.push_str("data: [DONE]\n\n");
        s
    }

    const RID: &str = "0example0000000000000000000002";

    fn chunk(delta: serde_json::Value, finish: Option<&str>) -> serde_json::Value {
        json!({"id": RID, "object": "chat.completion.chunk", "created": 1760000004, "model": "mistral-small-latest",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}]})
    }

    /// Every fixture chunk decodes on the typed fast path, and the lenient path
    /// gives exactly the same deltas.
    #[test]
    fn fast_and_lenient_paths_agree_on_the_fixture_corpus() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/mistral");
        let Ok(dirs) = std::fs::read_dir(root) else { return };
        let mut checked = 0;
        for dir in dirs.flatten() {
            for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
                if file.path().extension().is_none_or(|e| e != "sse") {
                    continue;
                }
                let text = std::fs::read_to_string(file.path()).unwrap();
                let mut events = Vec::new();
                let mut sse = SseDecoder::new();
                sse.push(text.as_bytes(), &mut events).unwrap();
                sse.finish(&mut events).unwrap();
                let (mut fast, mut slow) = (Decoder::new(), Decoder::new());
                let (mut a, mut b) = (Vec::new(), Vec::new());
                for event in &events {
                    let data = event.data.trim();
                    if data != "[DONE]" && data.starts_with('{') {
                        assert!(
                            serde_json::from_str::<WireChunk<'_>>(data).is_ok(),
                            "{}: not on the fast path: {data}",
                            file.path().display()
                        );
                    }
                    fast.data(&event.data, &mut a);
                    slow.data_lenient(&event.data, &mut b);
                }
                assert_eq!(a, b, "{}", file.path().display());
                checked += 1;
            }
        }
        assert!(checked >= 20, "only {checked} fixture streams found");
    }

    #[test]
    fn plain_text_with_usage_on_finish_chunk() {
        let body = "data: {\"id\":\"0example0000000000000000000001\",\"object\":\"chat.completion.chunk\",\"created\":1760000003,\"model\":\"mistral-small-latest\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null,\"logprobs\":null}]}\n\n\
data: {\"id\":\"0example0000000000000000000001\",\"object\":\"chat.completion.chunk\",\"created\":1760000003,\"model\":\"mistral-small-latest\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Lyon is\"},\"finish_reason\":null,\"logprobs\":null}]}\n\n\
data: {\"id\":\"0example0000000000000000000001\",\"object\":\"chat.completion.chunk\",\"created\":1760000003,\"model\":\"mistral-small-latest\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"stop\",\"logprobs\":null}],\"usage\":{\"prompt_tokens\":9,\"total_tokens\":13,\"completion_tokens\":4}}\n\n\
data: [DONE]\n\n";
        let m = final_message(body);
        assert_eq!(m.stop_reason, StopReason::Stop);
        assert_eq!(m.text(), "Lyon is");
        assert_eq!(m.content.len(), 1);
        assert_eq!(m.response_id.as_deref(), Some("0example0000000000000000000001"));
        assert_eq!(m.response_model, None);
        assert_eq!((m.usage.input, m.usage.output, m.usage.total_tokens), (9, 4, 13));
    }

    #[test]
    fn whole_tool_call_in_one_chunk_without_index() {
        let body = sse(&[
            chunk(json!({"role": "assistant", "content": ""}), None),
            json!({"id": RID, "choices": [{"index": 0, "delta": {"content": null, "tool_calls": [{"id": "Ab3dE5fG7", "function": {"name": "get_weather", "arguments": "{\"city\": \"Lyon\"}"}}]}, "finish_reason": "tool_calls", "logprobs": null}], "usage": {"prompt_tokens": 120, "total_tokens": 141, "completion_tokens": 21}}),
        ]);
        let m = final_message(&body);
        assert_eq!(m.stop_reason, StopReason::ToolUse);
        let calls: Vec<_> = m.tool_calls().collect();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].id, "Ab3dE5fG7");
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(calls[0].arguments, json!({"city": "Lyon"}));
        assert_eq!(m.usage.input, 120);
    }

    #[test]
    fn incremental_call_with_null_id_and_padding_is_one_call() {
        let body = sse(&[
            chunk(json!({"role": "assistant", "content": ""}), None),
            json!({"id": RID, "choices": [{"index": 0, "delta": {"tool_calls": [{"id": "Hk29LmQ7z", "function": {"name": "read_file", "arguments": ""}, "index": 0}]}, "finish_reason": null}], "p": "abcdefghij"}),
            json!({"id": RID, "choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"name": "", "arguments": "{\"path\": "}, "index": 0}]}, "finish_reason": null}], "p": "abcdefghijklmnopqrstu"}),
            json!({"id": RID, "choices": [{"index": 0, "delta": {"tool_calls": [{"id": "null", "function": {"name": "", "arguments": "\"notes.txt\"}"}, "index": 0}]}, "finish_reason": null}], "p": "abcdefg"}),
            json!({"id": RID, "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 300, "total_tokens": 318, "completion_tokens": 18}, "p": "abcdefghijklmn"}),
        ]);
        let m = final_message(&body);
        let calls: Vec<_> = m.tool_calls().collect();
        assert_eq!(calls.len(), 1, "{m:?}");
        assert_eq!(calls[0].id, "Hk29LmQ7z");
        assert_eq!(calls[0].name, "read_file");
        assert_eq!(calls[0].arguments, json!({"path": "notes.txt"}));
        assert_eq!(m.stop_reason, StopReason::ToolUse);
    }

    #[test]
    fn null_ids_get_a_stable_deterministic_id_per_index() {
        let body = sse(&[
            chunk(
                json!({"tool_calls": [{"id": "null", "index": 0, "function": {"name": "a", "arguments": "{\"x\":"}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"id": "null", "index": 1, "function": {"name": "b", "arguments": "{}"}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"id": "null", "index": 0, "function": {"name": "", "arguments": "1}"}}]}),
                Some("tool_calls"),
            ),
        ]);
        let m = final_message(&body);
        let calls: Vec<_> = m.tool_calls().collect();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].arguments, json!({"x": 1}));
        assert_eq!(calls[0].id, derived_id(Some(RID), 0));
        assert_eq!(calls[1].id, derived_id(Some(RID), 1));
        assert_ne!(calls[0].id, calls[1].id);
        for call in &calls {
            assert!(crate::convert::is_mistral_id(&call.id), "{}", call.id);
        }
        // Deterministic: the same bytes give the same ids.
        assert_eq!(final_message(&body).content, m.content);
        // Distinct responses give distinct ids.
        assert_ne!(derived_id(Some("other"), 0), derived_id(Some(RID), 0));
    }

    #[test]
    fn missing_id_then_real_id_adopts_the_real_id() {
        let body = sse(&[
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{\"a\""}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"id": "Zz9Yy8Xx7", "index": 0, "function": {"arguments": ":2}"}}]}),
                Some("tool_calls"),
            ),
        ]);
        let m = final_message(&body);
        let calls: Vec<_> = m.tool_calls().collect();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].id, "Zz9Yy8Xx7");
        assert_eq!(calls[0].arguments, json!({"a": 2}));
    }

    #[test]
    fn whole_calls_in_separate_chunks_with_default_index_are_separate() {
        let body = sse(&[
            chunk(
                json!({"tool_calls": [{"id": "AAAAAAAA1", "index": 0, "function": {"name": "f", "arguments": "{\"n\":1}"}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"id": "BBBBBBBB2", "index": 0, "function": {"name": "g", "arguments": "{\"n\":2}"}}]}),
                Some("tool_calls"),
            ),
        ]);
        let m = final_message(&body);
        let calls: Vec<_> =
            m.tool_calls().map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone())).collect();
        assert_eq!(
            calls,
            vec![
                ("AAAAAAAA1".into(), "f".into(), json!({"n": 1})),
                ("BBBBBBBB2".into(), "g".into(), json!({"n": 2}))
            ]
        );
    }

    #[test]
    fn parallel_whole_calls_in_one_chunk_without_index() {
        let body = sse(&[chunk(
            json!({"tool_calls": [
                {"id": "Ab3dE5fG7", "function": {"name": "get_weather", "arguments": "{\"city\":\"Lyon\"}"}},
                {"id": "Cd4eF6gH8", "function": {"name": "get_time", "arguments": "{\"tz\":\"Europe/Paris\"}"}}
            ]}),
            Some("tool_calls"),
        )]);
        let m = final_message(&body);
        let calls: Vec<_> = m.tool_calls().collect();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].arguments, json!({"tz": "Europe/Paris"}));
    }

    #[test]
    fn camel_case_fields_and_object_arguments() {
        let body = sse(&[
            json!({"id": RID, "choices": [{"index": 0, "delta": {"toolCalls": [{"id": "Qw3Er5Ty7", "index": 0, "function": {"name": "get_weather", "arguments": {"city": "Nice", "days": 2}}}]}, "finishReason": null}]}),
            json!({"id": RID, "choices": [{"index": 0, "delta": {}, "finishReason": "tool_calls"}], "usage": {"promptTokens": 50, "completionTokens": 7, "totalTokens": 57}}),
        ]);
        let evs = events(&body);
        let printed = llm_core::printer::print_transcript(&evs);
        assert!(
            printed.contains("toolcall_delta 0 \"{\\\"city\\\":\\\"Nice\\\",\\\"days\\\":2}\""),
            "{printed}"
        );
        let m = final_message(&body);
        let call = m.tool_calls().next().unwrap();
        assert_eq!(call.arguments, json!({"city": "Nice", "days": 2}));
        assert_eq!(m.stop_reason, StopReason::ToolUse);
        assert_eq!((m.usage.input, m.usage.output), (50, 7));
    }

    #[test]
    fn repeated_object_arguments_do_not_concatenate() {
        let body = sse(&[
            chunk(
                json!({"tool_calls": [{"id": "Qw3Er5Ty7", "function": {"name": "f", "arguments": {"a": 1}}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"id": "Qw3Er5Ty7", "function": {"name": "f", "arguments": {"a": 1}}}]}),
                Some("tool_calls"),
            ),
        ]);
        let m = final_message(&body);
        assert_eq!(m.tool_calls().count(), 1);
        assert_eq!(m.tool_calls().next().unwrap().arguments, json!({"a": 1}));
    }

    #[test]
    fn magistral_thinking_arrays_then_text_strings() {
        let body = sse(&[
            chunk(
                json!({"role": "assistant", "content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Need the "}]}]}),
                None,
            ),
            chunk(
                json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "forecast"}]}]}),
                None,
            ),
            chunk(json!({"content": [{"type": "text", "text": "Checking"}]}), None),
            chunk(json!({"content": " now."}), None),
            chunk(
                json!({"tool_calls": [{"id": "Ab3dE5fG7", "function": {"name": "get_weather", "arguments": "{}"}}]}),
                Some("tool_calls"),
            ),
        ]);
        let m = final_message(&body);
        assert_eq!(m.content.len(), 3);
        assert!(
            matches!(&m.content[0], llm_core::AssistantContent::Thinking(t) if t.thinking == "Need the forecast")
        );
        assert!(
            matches!(&m.content[1], llm_core::AssistantContent::Text(t) if t.text == "Checking now.")
        );
        assert!(
            matches!(&m.content[2], llm_core::AssistantContent::ToolCall(c) if c.arguments == json!({}))
        );
        let printed = llm_core::printer::print_transcript(&events(&body));
        // Thinking closes when text starts; text closes when the call starts.
        let order: Vec<&str> = printed.lines().map(|l| l.split(' ').next().unwrap()).collect();
        assert_eq!(
            order,
            [
                "start",
                "thinking_start",
                "thinking_delta",
                "thinking_delta",
                "thinking_end",
                "text_start",
                "text_delta",
                "text_delta",
                "text_end",
                "toolcall_start",
                "toolcall_delta",
                "toolcall_end",
                "done",
                "message"
            ]
        );
    }

    #[test]
    fn interleaved_thinking_and_text_switch_blocks() {
        let body = sse(&[
            chunk(
                json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "a"}]}, {"type": "text", "text": "b"}, {"type": "thinking", "thinking": "c"}]}),
                None,
            ),
            chunk(
                json!({"content": [{"type": "reference", "reference_ids": [1]}, "d"]}),
                Some("stop"),
            ),
        ]);
        let m = final_message(&body);
        assert_eq!(m.content.len(), 4);
        assert_eq!(m.text(), "bd");
    }

    #[test]
    fn finish_reasons() {
        for (wire, reason) in [
            ("stop", StopReason::Stop),
            ("length", StopReason::Length),
            ("model_length", StopReason::Length),
            ("tool_calls", StopReason::ToolUse),
            ("content_filter", StopReason::Stop),
            ("something_new", StopReason::Stop),
        ] {
            let body = sse(&[chunk(json!({"content": "x"}), Some(wire))]);
            assert_eq!(final_message(&body).stop_reason, reason, "{wire}");
        }
    }

    #[test]
    fn finish_reason_error_keeps_partial_text() {
        let body = sse(&[
            chunk(json!({"content": "Partial"}), None),
            chunk(json!({"content": ""}), Some("error")),
        ]);
        let evs = events(&body);
        let Some(AssistantEvent::Error { message, error, reason }) = evs.last() else {
            panic!("{evs:?}")
        };
        assert_eq!(*reason, StopReason::Error);
        assert_eq!(message.text(), "Partial");
        assert_eq!(error.message, "Mistral finish_reason: error");
        assert_eq!(evs.iter().filter(|e| e.is_terminal()).count(), 1);
    }

    #[test]
    fn usage_only_end_chunk_with_cached_tokens() {
        let body = sse(&[
            chunk(json!({"content": "hi"}), Some("stop")),
            json!({"id": RID, "choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010, "prompt_tokens_details": {"cached_tokens": 800}}}),
        ]);
        let m = final_message(&body);
        assert_eq!(
            (m.usage.input, m.usage.cache_read, m.usage.output, m.usage.total_tokens),
            (200, 800, 10, 1010)
        );
        let expected = 0.1 / 1e6 * 200.0 + 0.3 / 1e6 * 10.0 + 0.01 / 1e6 * 800.0;
        assert!((m.usage.cost.total - expected).abs() < 1e-12);
    }

    #[test]
    fn no_done_means_no_terminal_delta() {
        let body = "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n";
        let out = deltas(body);
        assert!(!out.iter().any(|d| matches!(d, Delta::Done | Delta::Error(_))), "{out:?}");
    }

    #[test]
    fn done_without_finish_reason_is_an_error() {
        let body = sse(&[chunk(json!({"content": "hi"}), None)]);
        let out = deltas(&body);
        assert!(matches!(out.last(), Some(Delta::Error(e)) if e.kind == ErrorKind::Truncated));
    }

    #[test]
    fn malformed_chunk_is_a_decode_error() {
        let out = deltas("data: {\"id\":\"x\",\"choices\":[\n\n");
        assert!(matches!(out.last(), Some(Delta::Error(e)) if e.kind == ErrorKind::Decode));
    }

    #[test]
    fn error_object_in_stream() {
        let out = deltas(
            "data: {\"error\":{\"message\":\"Internal error\",\"type\":\"internal_error\",\"code\":null}}\n\ndata: [DONE]\n\n",
        );
        assert!(matches!(out.last(), Some(Delta::Error(e)) if e.message == "Internal error"));
        assert_eq!(out.iter().filter(|d| matches!(d, Delta::Done | Delta::Error(_))).count(), 1);
    }

    #[test]
    fn nothing_after_done() {
        let mut body = sse(&[chunk(json!({"content": "a"}), Some("stop"))]);
        body.push_str(
            "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"late\"}}]}\n\n",
        );
        let out = deltas(&body);
        assert!(matches!(out.last(), Some(Delta::Done)));
    }

    #[test]
    fn odd_values_do_not_break_decoding() {
        let body = sse(&[
            json!({"id": 5, "choices": "x"}),
            json!({"id": RID, "choices": [{"index": "0", "delta": {"content": 7, "tool_calls": [null, 3, {"index": 1.0, "id": null, "function": {"name": null, "arguments": null}}]}, "finish_reason": null}], "usage": {"prompt_tokens": 1.0e2, "completion_tokens": "3"}}),
            json!({"id": RID, "choices": [{"index": 1, "delta": {"content": "other choice"}, "finish_reason": "stop"}]}),
            chunk(json!({"content": "ok"}), Some("stop")),
        ]);
        let m = final_message(&body);
        assert_eq!(m.text(), "ok");
        assert_eq!(m.tool_calls().count(), 1);
        assert_eq!((m.usage.input, m.usage.output), (100, 3));
    }
}
