//! Gemini `streamGenerateContent?alt=sse` chunks -> neutral deltas (pure state machine).
//!
//! Framing: `data: <GenerateContentResponse>\r\n\r\n`, no terminator; the stream
//! just ends after the chunk carrying `finishReason`. So [`Decoder::end`] decides:
//! a finish reason was seen -> `Done` (or an error for blocking reasons); none ->
//! a `truncated` error.
//!
//! - `text` parts are text, or thinking when `thought: true`; a change of kind
//!   closes the block. A part's `thoughtSignature` belongs to its block (the last
//!   non-empty one wins) and is emitted when the block closes; an empty text part
//!   that only carries a signature (Gemini 3's closing part) keeps it.
//! - `functionCall` parts arrive whole (`args` an object, maybe absent), several per
//!   chunk: each becomes start + the whole arguments + end. `args` is parsed once, and its
//!   text as received is the one `toolcall_delta` (cut out of the event's data in place
//!   when a chunk carries one call, so a large call is not held twice). A missing id, or one
//!   already used in this message, is replaced by an id unique within the message
//!   (derived from the response id, so also unique across turns; no global state).
//! - With `streamFunctionCallArguments` (Gemini 3 on Vertex), a call opens with its name
//!   and `willContinue`, its arguments follow as `partialArgs` (a JSON Path and a value; a
//!   string may come in pieces), and a part without `willContinue` (usually `{}`) ends it:
//!   the values become argument fragments like any provider's, and a finished response
//!   closes a call whose closing part never came.
//! - `usageMetadata` repeats on every chunk and is not monotonic: each change is
//!   passed on, so the last one with token counts wins (and an aborted or failed
//!   stream still reports what was seen).
//! - `{"error": ...}` inside the 200 stream, and `promptFeedback.blockReason` without
//!   candidates, end the stream with an error.

use std::borrow::Cow;
use std::collections::HashSet;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

use llm_core::raw::drive::WireDecoder;
use llm_core::raw::sse::SseEvent;
use llm_core::{
    Error, ErrorKind, StopReason, Usage,
    raw::{BlockKey, Channel, Delta, SurrogateJoiner, WireText, WireValue},
};

use crate::PROVIDER;
use crate::error::{chunk_error, stream_error};

mod partial_args;

/// A number of any JSON width (or a numeric string), as `u64`; anything else is absent.
fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(match v {
        Some(Value::Number(n)) => {
            n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
        }
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    })
}

/// A string, or a number/bool rendered as one; anything else is absent.
fn lenient_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(lenient_str(d)?.map(Cow::into_owned))
}

/// [`lenient_string`] borrowed from the event's data when it holds no escape (`responseId`
/// and `modelVersion` repeat on every chunk and are kept from the first one only). A value
/// that is no string, number or boolean is skipped without recursing, however deep.
fn lenient_str<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'de, str>>, D::Error> {
    struct Lenient;
    impl<'de> Visitor<'de> for Lenient {
        type Value = Option<Cow<'de, str>>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string")
        }

        fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Borrowed(v)))
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_owned())))
        }

        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v)))
        }

        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_string())))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_string())))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_string())))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            // Rendered as `lenient_string` renders it (serde_json's number, `1.0` not `1`).
            Ok(serde_json::Number::from_f64(v).map(|n| Cow::Owned(n.to_string())))
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<de::IgnoredAny>()?.is_some() {}
            Ok(None)
        }

        fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<de::IgnoredAny, de::IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    d.deserialize_any(Lenient)
}

/// A string (a lone surrogate half at either end kept for the next part), or a number/bool
/// rendered as one; anything else is absent.
fn lenient_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<WireText>, D::Error> {
    Ok(match Option::<WireValue>::deserialize(d)? {
        Some(WireValue::Text(text)) => Some(text),
        Some(WireValue::Other(other)) => match *other {
            Value::Number(n) => Some(WireText::from(n.to_string())),
            Value::Bool(b) => Some(WireText::from(b.to_string())),
            _ => None,
        },
        None => None,
    })
}

/// `true`, or the string `"true"`.
fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(matches!(v, Some(Value::Bool(true))) || matches!(v, Some(Value::String(s)) if s == "true"))
}

/// One chunk; `args` borrow from the event's data.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Chunk<'a> {
    /// The first candidate (the only one read).
    #[serde(borrow, deserialize_with = "first_candidate")]
    candidates: Option<Candidate<'a>>,
    usage_metadata: Option<UsageMetadata>,
    #[serde(borrow, deserialize_with = "lenient_str")]
    model_version: Option<Cow<'a, str>>,
    #[serde(borrow, deserialize_with = "lenient_str")]
    response_id: Option<Cow<'a, str>>,
    prompt_feedback: Option<PromptFeedback>,
}

/// `candidates`: the first, without collecting them into a vector.
fn first_candidate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Candidate<'de>>, D::Error> {
    llm_core::raw::first_element(d, |_| true)
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Candidate<'a> {
    #[serde(borrow)]
    content: Option<Content<'a>>,
    #[serde(deserialize_with = "lenient_string")]
    finish_reason: Option<String>,
    #[serde(deserialize_with = "lenient_string")]
    finish_message: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Content<'a> {
    #[serde(borrow)]
    parts: Option<Vec<Part<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Part<'a> {
    #[serde(deserialize_with = "lenient_text")]
    text: Option<WireText>,
    #[serde(deserialize_with = "lenient_bool")]
    thought: bool,
    #[serde(deserialize_with = "lenient_string")]
    thought_signature: Option<String>,
    #[serde(borrow)]
    function_call: Option<FunctionCall<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FunctionCall<'a> {
    #[serde(deserialize_with = "lenient_string")]
    name: Option<String>,
    /// Kept as text: parsed once into the call's arguments, and shown as received.
    #[serde(borrow)]
    args: Option<&'a RawValue>,
    #[serde(deserialize_with = "lenient_string")]
    id: Option<String>,
    /// Streamed arguments (`streamFunctionCallArguments`).
    #[serde(rename = "partialArgs")]
    partial_args: Option<Vec<partial_args::PartialArg>>,
    /// More parts of this call follow.
    #[serde(rename = "willContinue", deserialize_with = "lenient_bool")]
    will_continue: bool,
}

/// A call whose arguments stream as `partialArgs`.
#[derive(Debug)]
struct StreamedCall {
    key: BlockKey,
    args: partial_args::StreamedArgs,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct UsageMetadata {
    #[serde(deserialize_with = "lenient_u64")]
    prompt_token_count: Option<u64>,
    #[serde(deserialize_with = "lenient_u64")]
    candidates_token_count: Option<u64>,
    #[serde(deserialize_with = "lenient_u64")]
    thoughts_token_count: Option<u64>,
    #[serde(deserialize_with = "lenient_u64")]
    cached_content_token_count: Option<u64>,
    #[serde(deserialize_with = "lenient_u64")]
    tool_use_prompt_token_count: Option<u64>,
    #[serde(deserialize_with = "lenient_u64")]
    total_token_count: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct PromptFeedback {
    #[serde(deserialize_with = "lenient_string")]
    block_reason: Option<String>,
    #[serde(deserialize_with = "lenient_string")]
    block_reason_message: Option<String>,
}

impl UsageMetadata {
    fn has_counts(&self) -> bool {
        self.prompt_token_count.is_some()
            || self.candidates_token_count.is_some()
            || self.thoughts_token_count.is_some()
            || self.total_token_count.is_some()
    }

    /// `input` excludes cached tokens; `output` includes thoughts.
    fn to_usage(&self) -> Usage {
        let cached = self.cached_content_token_count.unwrap_or(0);
        let prompt =
            self.prompt_token_count.unwrap_or(0) + self.tool_use_prompt_token_count.unwrap_or(0);
        Usage {
            input: prompt.saturating_sub(cached),
            output: self.candidates_token_count.unwrap_or(0)
                + self.thoughts_token_count.unwrap_or(0),
            cache_read: cached,
            cache_write: 0,
            ..Usage::default()
        }
    }
}

#[derive(Debug)]
struct OpenBlock {
    key: BlockKey,
    thinking: bool,
    /// The last non-empty signature seen for this block, emitted at close.
    signature: Option<String>,
}

/// The arguments of a call whose text is still to be cut out of the chunk's data: the index
/// of its [`Delta::ToolCallArgsWhole`] in `out` and the byte range of `args` in the data.
#[derive(Debug)]
struct PendingArgs {
    delta: usize,
    range: std::ops::Range<usize>,
}

/// The Gemini stream decoder: one per HTTP attempt.
#[derive(Debug, Default)]
pub struct Decoder {
    next_key: BlockKey,
    open: Option<OpenBlock>,
    used_ids: HashSet<String>,
    calls: usize,
    finish: Option<(String, Option<String>)>,
    /// The last usage emitted (usage repeats on every chunk).
    usage: Option<Usage>,
    response_id: Option<String>,
    metadata_sent: bool,
    finished: bool,
    /// Surrogate pairs split across text and thought parts.
    surrogates: SurrogateJoiner,
    /// The call whose `partialArgs` are streaming.
    streamed: Option<StreamedCall>,
}

impl Decoder {
    /// A fresh decoder.
    pub fn new() -> Self {
        Self::default()
    }

    fn close_block(&mut self, out: &mut Vec<Delta>) {
        if let Some(block) = self.open.take() {
            if let Some(signature) = block.signature {
                out.push(if block.thinking {
                    Delta::ThinkingSignature { key: block.key, signature }
                } else {
                    Delta::TextSignature { key: block.key, signature }
                });
            }
            out.push(Delta::BlockEnd { key: block.key });
        }
    }

    fn new_key(&mut self) -> BlockKey {
        let key = self.next_key;
        self.next_key += 1;
        key
    }

    /// Ends the stream with `error`. Open blocks are left open: the partial content is
    /// kept, but a block cut by an error gets no end event.
    fn fail(&mut self, error: Error, out: &mut Vec<Delta>) {
        out.push(Delta::Error(error));
        self.finished = true;
    }

    /// Turns one chunk (borrowing from `source`) into deltas; the text of each call's `args`
    /// is left for [`fill_args`](Self::fill_args), with its place in `pending`.
    fn chunk(
        &mut self,
        chunk: Chunk<'_>,
        source: &str,
        pending: &mut Vec<PendingArgs>,
        out: &mut Vec<Delta>,
    ) {
        if self.response_id.is_none() && chunk.response_id.is_some() {
            self.response_id = chunk.response_id.as_deref().map(str::to_owned);
        }
        if !self.metadata_sent && (chunk.response_id.is_some() || chunk.model_version.is_some()) {
            self.metadata_sent = true;
            out.push(Delta::Metadata {
                response_id: chunk.response_id.map(Cow::into_owned),
                response_model: chunk.model_version.map(Cow::into_owned),
            });
        }
        if let Some(usage) = chunk.usage_metadata.filter(UsageMetadata::has_counts) {
            let usage = usage.to_usage();
            if self.usage != Some(usage) {
                self.usage = Some(usage);
                out.push(Delta::Usage(usage));
            }
        }
        // The chunk with `finishReason` is the last with content: a chunk after it (the
        // final chunk repeated by a proxy, say) adds nothing but its usage.
        if self.finish.is_some() {
            return;
        }
        let Some(candidate) = chunk.candidates else {
            if let Some(reason) = chunk
                .prompt_feedback
                .and_then(|f| f.block_reason.map(|r| (r, f.block_reason_message)))
            {
                let (reason, message) = reason;
                let mut text = format!("Prompt blocked by Gemini (blockReason {reason})");
                if let Some(m) = message.filter(|m| !m.is_empty()) {
                    text.push_str(": ");
                    text.push_str(&m);
                }
                self.fail(
                    Error::new(ErrorKind::Refused, PROVIDER, text)
                        .with_code(reason)
                        .with_retryable(false),
                    out,
                );
            }
            return;
        };
        for part in candidate.content.and_then(|c| c.parts).unwrap_or_default() {
            if self.finished {
                return;
            }
            self.part(part, source, pending, out);
        }
        if let Some(reason) = candidate.finish_reason.filter(|r| !r.is_empty()) {
            self.finish = Some((reason, candidate.finish_message));
        }
    }

    fn part(
        &mut self,
        part: Part<'_>,
        source: &str,
        pending: &mut Vec<PendingArgs>,
        out: &mut Vec<Delta>,
    ) {
        let signature = part.thought_signature.filter(|s| !s.is_empty());
        if let Some(call) = part.function_call {
            let starts = call.name.as_deref().is_some_and(|n| !n.is_empty()) || call.args.is_some();
            if !starts && self.streamed.is_some() {
                self.continue_streamed(call, out);
                return;
            }
            self.finish_streamed(out);
            if starts && call.will_continue && call.args.is_none() {
                self.start_streamed(call, signature, out);
            } else if call.partial_args.as_ref().is_some_and(|a| !a.is_empty()) && !starts {
                self.fail(
                    Error::new(
                        ErrorKind::Decode,
                        PROVIDER,
                        "Gemini sent partialArgs outside a function call",
                    )
                    .with_retryable(false),
                    out,
                );
            } else {
                self.function_call(call, signature, source, pending, out);
            }
            return;
        }
        self.finish_streamed(out);
        let Some(piece) = part.text else { return };
        if piece.is_empty() && signature.is_none() {
            return;
        }
        let thinking = part.thought;
        let same_kind = self.open.as_ref().is_some_and(|b| b.thinking == thinking);
        if !same_kind {
            self.close_block(out);
            let key = self.new_key();
            self.open = Some(OpenBlock { key, thinking, signature: None });
        }
        let Some(block) = self.open.as_mut() else { return };
        if signature.is_some() {
            block.signature = signature;
        }
        let key = block.key;
        let channel = if thinking { Channel::Thinking } else { Channel::Text };
        let text = self.surrogates.join(key, channel, piece);
        if !text.is_empty() {
            out.push(if thinking {
                Delta::Thinking { key, text }
            } else {
                Delta::Text { key, text }
            });
        }
    }

    fn function_call(
        &mut self,
        call: FunctionCall<'_>,
        signature: Option<String>,
        source: &str,
        pending: &mut Vec<PendingArgs>,
        out: &mut Vec<Delta>,
    ) {
        let args = call.args.map(RawValue::get).filter(|raw| *raw != "null");
        if call.name.is_none() && args.is_none() && call.id.is_none() {
            // An empty marker part (streamed-arguments mode ends a call with `{}`): nothing to add.
            return;
        }
        self.close_block(out);
        let key = self.new_key();
        let name = call.name.unwrap_or_default();
        let index = self.calls;
        self.calls += 1;
        let id = match call.id.filter(|id| !id.is_empty() && !self.used_ids.contains(id)) {
            Some(id) => id,
            None => self.generate_id(index),
        };
        self.used_ids.insert(id.clone());
        let parsed = match args.map(serde_json::from_str::<Value>) {
            None => None,
            Some(Ok(v @ Value::Object(_))) => Some((v, args)),
            // A string holding a JSON object (never seen from Gemini, cheap to accept).
            Some(Ok(Value::String(s))) => match serde_json::from_str::<Value>(&s) {
                Ok(v @ Value::Object(_)) => Some((v, None)),
                _ => None,
            },
            Some(Ok(_)) => None,
            Some(Err(e)) => {
                // Valid JSON that is no Rust string (a lone surrogate escape).
                self.decode_error(&e, source.trim(), out);
                return;
            }
        };
        out.push(Delta::ToolCallStart { key, id, name, arguments: None });
        let (arguments, raw) = parsed.unwrap_or_else(|| (Value::Object(Default::default()), None));
        let text = match raw {
            Some(raw) => match offset_in(source, raw) {
                Some(start) => {
                    pending.push(PendingArgs { delta: out.len(), range: start..start + raw.len() });
                    String::new()
                }
                None => raw.to_owned(),
            },
            None => arguments.to_string(),
        };
        out.push(Delta::ToolCallArgsWhole { key, text, arguments });
        if signature.is_some() {
            out.push(Delta::ToolCallMeta {
                key,
                id: None,
                name: None,
                thought_signature: signature,
            });
        }
        out.push(Delta::BlockEnd { key });
    }

    /// Opens a call whose arguments follow as `partialArgs`.
    fn start_streamed(
        &mut self,
        call: FunctionCall<'_>,
        signature: Option<String>,
        out: &mut Vec<Delta>,
    ) {
        self.close_block(out);
        let key = self.new_key();
        let index = self.calls;
        self.calls += 1;
        let id = match call.id.clone().filter(|id| !id.is_empty() && !self.used_ids.contains(id)) {
            Some(id) => id,
            None => self.generate_id(index),
        };
        self.used_ids.insert(id.clone());
        let name = call.name.clone().unwrap_or_default();
        out.push(Delta::ToolCallStart { key, id, name, arguments: None });
        if signature.is_some() {
            out.push(Delta::ToolCallMeta {
                key,
                id: None,
                name: None,
                thought_signature: signature,
            });
        }
        self.streamed = Some(StreamedCall { key, args: partial_args::StreamedArgs::default() });
        self.continue_streamed(call, out);
    }

    /// Applies a part's `partialArgs` to the open call; a part without `willContinue` ends it.
    fn continue_streamed(&mut self, call: FunctionCall<'_>, out: &mut Vec<Delta>) {
        let Some(streamed) = self.streamed.as_mut() else { return };
        let key = streamed.key;
        for arg in call.partial_args.unwrap_or_default() {
            match streamed.args.apply(arg) {
                Ok(fragment) if fragment.is_empty() => {}
                Ok(fragment) => out.push(Delta::ToolCallArgs { key, fragment }),
                Err(reason) => {
                    self.streamed = None;
                    let error = Error::new(
                        ErrorKind::Decode,
                        PROVIDER,
                        format!("Invalid Gemini streamed arguments: {reason}"),
                    )
                    .with_retryable(false);
                    self.fail(error, out);
                    return;
                }
            }
        }
        if !call.will_continue {
            self.finish_streamed(out);
        }
    }

    /// Closes the streamed call, if one is open: its closing text, or its whole arguments
    /// where the paths could not be written as a continuation.
    fn finish_streamed(&mut self, out: &mut Vec<Delta>) {
        let Some(StreamedCall { key, args }) = self.streamed.take() else { return };
        let (fragment, whole) = args.finish();
        if !fragment.is_empty() {
            out.push(Delta::ToolCallArgs { key, fragment });
        }
        if let Some(arguments) = whole {
            out.push(Delta::ToolCallArgsWhole { key, text: arguments.to_string(), arguments });
        }
        out.push(Delta::BlockEnd { key });
    }

    /// `call_<response id>_<n>`, unique within the message; the response id makes it
    /// unique across turns too.
    fn generate_id(&self, index: usize) -> String {
        let prefix = match &self.response_id {
            Some(rid) => {
                let cleaned: String = rid
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                    .take(40)
                    .collect();
                if cleaned.is_empty() { "call".to_owned() } else { format!("call_{cleaned}") }
            }
            None => "call".to_owned(),
        };
        let mut id = format!("{prefix}_{index}");
        let mut n = 1;
        while self.used_ids.contains(&id) {
            id = format!("{prefix}_{index}_{n}");
            n += 1;
        }
        id
    }

    fn data(&mut self, data: String, out: &mut Vec<Delta>) {
        let trimmed = data.trim();
        if trimmed.is_empty() || trimmed == "[DONE]" {
            return;
        }
        // The non-SSE framing (a JSON array of chunks) can reach us as one bare body.
        if trimmed.starts_with('[') {
            match serde_json::from_str::<Vec<Value>>(trimmed) {
                Ok(items) => {
                    for item in items {
                        if self.finished {
                            return;
                        }
                        self.value(item, trimmed, out);
                    }
                }
                Err(e) => self.decode_error(&e, trimmed, out),
            }
            return;
        }
        // A chunk that may hold an error is checked for one first.
        let checked = trimmed.contains("\"error\"");
        if checked && self.stream_error(trimmed, out) {
            return;
        }
        let mut pending = Vec::new();
        match serde_json::from_str::<Chunk<'_>>(trimmed) {
            Ok(chunk) => self.chunk(chunk, &data, &mut pending, out),
            Err(e) => {
                if checked || !self.stream_error(trimmed, out) {
                    self.decode_error(&e, trimmed, out);
                }
                return;
            }
        }
        Self::fill_args(data, pending, out);
    }

    /// Ends the stream if `data` is an error chunk (or no JSON at all); says whether it did.
    fn stream_error(&mut self, data: &str, out: &mut Vec<Delta>) -> bool {
        match serde_json::from_str::<Value>(data) {
            Ok(value) => match chunk_error(&value) {
                Some(error) => {
                    let error = stream_error(error, data);
                    self.fail(error, out);
                    true
                }
                None => false,
            },
            Err(e) => {
                self.decode_error(&e, data, out);
                true
            }
        }
    }

    /// A chunk read from a `Value` (the lenient path: an error check first, or an item of
    /// a JSON array body).
    fn value(&mut self, value: Value, raw: &str, out: &mut Vec<Delta>) {
        if let Some(error) = chunk_error(&value) {
            let error = stream_error(error, raw);
            self.fail(error, out);
            return;
        }
        // `args` borrow from text, so the chunk is read from its own text again (rare).
        let text = value.to_string();
        drop(value);
        let mut pending = Vec::new();
        match serde_json::from_str::<Chunk<'_>>(&text) {
            Ok(chunk) => {
                self.chunk(chunk, &text, &mut pending, out);
                Self::fill_args(text, pending, out);
            }
            Err(e) => self.decode_error(&e, raw, out),
        }
    }

    /// Gives each call's [`Delta::ToolCallArgsWhole`] its text out of `source`: one call
    /// takes `source`'s buffer, cut down in place (no second copy of a large value), several
    /// get copies.
    fn fill_args(mut source: String, pending: Vec<PendingArgs>, out: &mut [Delta]) {
        if let [PendingArgs { delta, range }] = pending.as_slice()
            && source.get(range.clone()).is_some()
            && let Some(Delta::ToolCallArgsWhole { text, .. }) = out.get_mut(*delta)
        {
            source.truncate(range.end);
            source.drain(..range.start);
            *text = source;
            return;
        }
        for PendingArgs { delta, range } in pending {
            if let (Some(Delta::ToolCallArgsWhole { text, .. }), Some(slice)) =
                (out.get_mut(delta), source.get(range))
            {
                *text = slice.to_owned();
            }
        }
    }

    fn decode_error(&mut self, e: &serde_json::Error, raw: &str, out: &mut Vec<Delta>) {
        let error =
            Error::new(ErrorKind::Decode, PROVIDER, format!("Invalid Gemini stream chunk: {e}"))
                .with_body(raw)
                .with_retryable(false);
        self.fail(error, out);
    }
}

/// Where `part` (a slice of `whole`) starts in `whole`, if it is one.
fn offset_in(whole: &str, part: &str) -> Option<usize> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    let slice = whole.get(start..end)?;
    std::ptr::eq(slice.as_ptr(), part.as_ptr()).then_some(start)
}

/// Finish reasons that mean the output was blocked.
fn is_blocking(reason: &str) -> bool {
    matches!(
        reason,
        "SAFETY"
            | "RECITATION"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT"
            | "IMAGE_RECITATION"
            | "LANGUAGE"
    )
}

impl WireDecoder for Decoder {
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) {
        if self.finished {
            return;
        }
        self.data(event.data, out);
    }

    fn end(&mut self, out: &mut Vec<Delta>) {
        self.decode_end(out);
    }

    fn surrogates(&mut self) -> Option<&mut SurrogateJoiner> {
        Some(&mut self.surrogates)
    }
}

impl Decoder {
    fn decode_end(&mut self, out: &mut Vec<Delta>) {
        if self.finished {
            return;
        }
        self.finished = true;
        let has_calls = self.calls > 0;
        if self.finish.is_some() {
            // A finished response whose last call never got its closing part.
            self.finish_streamed(out);
        }
        let Some((reason, message)) = self.finish.take() else {
            out.push(Delta::Error(Error::new(
                ErrorKind::Truncated,
                PROVIDER,
                "Gemini stream ended without a finishReason",
            )));
            return;
        };
        let detail = |text: String| match message.as_deref().filter(|m| !m.is_empty()) {
            Some(m) => format!("{text}: {m}"),
            None => text,
        };
        let stop = match reason.as_str() {
            "STOP" if has_calls => StopReason::ToolUse,
            "STOP" => StopReason::Stop,
            "MAX_TOKENS" => StopReason::Length,
            // As in OpenClaw, the call(s) that did parse are usable.
            "MALFORMED_FUNCTION_CALL" if has_calls => StopReason::ToolUse,
            "MALFORMED_FUNCTION_CALL" => {
                let error = Error::new(
                    ErrorKind::Provider,
                    PROVIDER,
                    detail("Gemini produced a malformed function call (finishReason MALFORMED_FUNCTION_CALL)".to_owned()),
                );
                out.push(Delta::Error(error.with_code(reason).with_retryable(false)));
                return;
            }
            r if is_blocking(r) => {
                let error = Error::new(
                    ErrorKind::Refused,
                    PROVIDER,
                    detail(format!("Response blocked by Gemini (finishReason {r})")),
                );
                out.push(Delta::Error(error.with_code(reason).with_retryable(false)));
                return;
            }
            r => {
                let error = Error::new(
                    ErrorKind::Provider,
                    PROVIDER,
                    detail(format!("Gemini stopped with finishReason {r}")),
                );
                out.push(Delta::Error(error.with_code(reason).with_retryable(false)));
                return;
            }
        };
        self.close_block(out);
        out.push(Delta::Stop(stop));
        out.push(Delta::Done);
    }
}

#[cfg(test)]
mod tests;
