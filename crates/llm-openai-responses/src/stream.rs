//! Responses stream events to llm-core's neutral [`Delta`]s: a pure state machine.
//!
//! Blocks are keyed by the wire `output_index` (falling back to the `item_id`, then to the
//! current item), never by "the latest call", so parallel and interleaved function calls
//! keep their arguments apart. Tool-call ids are `call_id|item_id`.
//!
//! Output items other than messages, reasoning and function calls (`web_search_call`,
//! `apply_patch_call`, `mcp_approval_request`, ...) are kept whole as opaque
//! [`ProviderContent`]. One that waits for a client answer (it has a `call_id`, or is an
//! `mcp_approval_request`) ends the turn with an `unsupported` error naming its type, so a
//! request the model made is never silently dropped.
//!
//! Some servers (GitHub Copilot) give an item a new id on every event: an item of
//! `response.completed.output` whose id was never seen is matched by its position
//! (`output_index`), so its content is never added twice.
//!
//! A call's complete arguments, repeated in `function_call_arguments.done` and in the
//! finished item, are not decoded by serde (which would build them in its scratch buffer and
//! copy them out): the event is read borrowed, then the arguments' string literal is decoded
//! in place in the event's data, which becomes the `String` the assembler compares with what
//! streamed. A `.done` event of 16 MiB thus costs no buffer beyond its own data.
//!
//! Calls of strict tools go through llm-core's [`NullFilter`]: the `null`s the model
//! sends for omitted optional properties are removed from the streamed fragments, the
//! `.done` arguments and expanded wrapper calls alike, so the tool gets the arguments of
//! its original schema.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use llm_core::drive::WireDecoder;
use llm_core::sse::SseEvent;
use llm_core::strict::{NullFilter, StrictPlan};
use llm_core::{
    BlockKey, Channel, Delta, Error, ErrorKind, ProviderContent, StopReason, SurrogateJoiner,
    Usage, WireText,
};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::PROVIDER;
use crate::error::stream_error;

/// A message longer than this is never the base of a cumulative snapshot, so the
/// decoder's copy of a message's text stays bounded (snapshots are short messages).
const SNAPSHOT_BASE_LIMIT: usize = 256 * 1024;

/// Keys for items without an `output_index` start here.
const SYNTHETIC_KEYS: BlockKey = 1 << 40;
/// Keys of calls expanded from a `multi_tool_use.parallel` wrapper start here.
const WRAPPER_KEYS: BlockKey = 1 << 50;

/// One SSE event's data. Every field is optional and loosely typed; unknown fields
/// (`obfuscation`, `logprobs`, `sequence_number`, ...) are ignored.
///
/// Borrowed from the data: the type name without an allocation, and the fields that may be
/// large (`delta`, `arguments`, `item`, `response`) as raw JSON, decoded only where used (a
/// `.done` event repeats a whole value that usually streamed already).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    /// Text, reasoning or an argument fragment (see [`text_of`]).
    #[serde(borrow)]
    delta: Option<&'a RawValue>,
    item_id: Option<Value>,
    output_index: Option<Value>,
    summary_index: Option<Value>,
    /// A `.done` value, decoded in place in the event's data only after the event was read
    /// ([`Deferred`]).
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow)]
    item: Option<&'a RawValue>,
    #[serde(borrow)]
    response: Option<&'a RawValue>,
    error: Option<Value>,
    code: Option<Value>,
    message: Option<Value>,
}

/// The fields of a finished message or function call item that clawcall reads, without
/// decoding the rest (a message's text that already streamed is skipped, not parsed, and a
/// call's arguments are decoded in place in the event's data, see [`Deferred`]).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ItemHead<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    phase: Option<Value>,
    #[serde(borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

/// A call's complete arguments in a `.done` event, handled once the event's borrowed parse
/// is over: the JSON string literal is then decoded in place in the event's data (which
/// becomes the arguments' `String`), so a whole value repeated at the end of a stream costs
/// no second buffer.
#[derive(Debug)]
enum Deferred {
    /// `response.function_call_arguments.done`.
    ArgumentsDone { key: BlockKey, literal: Literal },
    /// `response.output_item.done` of a function call: the item without its arguments.
    CallDone { key: BlockKey, item: Value, literal: Literal },
}

/// Where a JSON string literal (quotes included) sits in an event's data.
#[derive(Debug, Clone, Copy)]
struct Literal {
    start: usize,
    end: usize,
}

impl Literal {
    /// `raw`'s place in `data`, when it is a string literal borrowed from `data`.
    fn of(raw: &RawValue, data: &str) -> Option<Literal> {
        let text = raw.get();
        if !text.starts_with('"') {
            return None;
        }
        // Pointer arithmetic on addresses only (no access): where serde borrowed `raw` from.
        let start = (text.as_ptr() as usize).checked_sub(data.as_ptr() as usize)?;
        let end = start.checked_add(text.len())?;
        let slice = data.get(start..end)?;
        std::ptr::eq(slice.as_ptr(), text.as_ptr()).then_some(Literal { start, end })
    }

    /// Whether the literal is `""`.
    fn is_empty(self) -> bool {
        self.end - self.start <= 2
    }
}

/// Decodes the JSON string literal at `literal` of `data` in place: the decoded text is
/// written from the start of the same buffer (it is never longer than the literal), which is
/// then cut to it, so no second buffer is allocated. The literal was checked by serde_json
/// (its escapes are valid and it holds no control characters); a lone surrogate escape,
/// which is valid JSON but no Rust string, is an error, as serde_json's decode of a `String`
/// gives.
fn decode_in_place(data: String, literal: Literal) -> Result<String, &'static str> {
    let mut bytes = data.into_bytes();
    let mut read = literal.start + 1;
    let end = literal.end.saturating_sub(1);
    let mut write = 0;
    while read < end {
        let Some(&byte) = bytes.get(read) else { return Err("literal out of range") };
        if byte != b'\\' {
            // The decoded text never overtakes the literal: `write < read`.
            let run = bytes
                .get(read..end)
                .map_or(0, |rest| rest.iter().position(|&b| b == b'\\').unwrap_or(rest.len()));
            bytes.copy_within(read..read + run, write);
            read += run;
            write += run;
            continue;
        }
        let escape = bytes.get(read + 1).copied().ok_or("unfinished escape")?;
        read += 2;
        let simple = match escape {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0C,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            _ => 0,
        };
        if simple != 0 {
            // One byte for two (the common case in code): written directly.
            *bytes.get_mut(write).ok_or("literal out of range")? = simple;
            write += 1;
            continue;
        }
        let decoded = match escape {
            b'u' => {
                let first = hex4(&bytes, read).ok_or("invalid \\u escape")?;
                read += 4;
                match first {
                    0xD800..=0xDBFF => {
                        let low = match (bytes.get(read), bytes.get(read + 1)) {
                            (Some(b'\\'), Some(b'u')) => hex4(&bytes, read + 2),
                            _ => None,
                        }
                        .filter(|low| (0xDC00..=0xDFFF).contains(low))
                        .ok_or("lone leading surrogate in hex escape")?;
                        read += 6;
                        let code = 0x10000 + ((first - 0xD800) << 10) + (low - 0xDC00);
                        char::from_u32(code).ok_or("invalid surrogate pair")?
                    }
                    0xDC00..=0xDFFF => return Err("lone trailing surrogate in hex escape"),
                    _ => char::from_u32(first).ok_or("invalid \\u escape")?,
                }
            }
            _ => return Err("invalid escape"),
        };
        let mut utf8 = [0u8; 4];
        let encoded = decoded.encode_utf8(&mut utf8).as_bytes();
        // An escape is at least two bytes and its character at most as long (`\uXXXX` six
        // bytes for at most three, a pair twelve for four): still `write < read`.
        let target = bytes.get_mut(write..write + encoded.len()).ok_or("literal out of range")?;
        target.copy_from_slice(encoded);
        write += encoded.len();
    }
    bytes.truncate(write);
    String::from_utf8(bytes).map_err(|_| "invalid UTF-8")
}

/// The four hex digits at `at`.
fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = std::str::from_utf8(bytes.get(at..at + 4)?).ok()?;
    u32::from_str_radix(digits, 16).ok().filter(|_| digits.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A `response` object whose `output` items are kept raw: [`Decoder::reconcile_output`]
/// decodes only the items that did not finish already (a finished item repeats text or
/// arguments that may be many megabytes).
#[derive(Debug)]
struct ResponseParts<'a> {
    /// Every field but an `output` array; `Null` when the response is no object or does not
    /// decode.
    fields: Value,
    /// The `output` items, as received.
    output: Vec<&'a RawValue>,
    /// The whole response, as received.
    raw: &'a str,
}

impl<'a> ResponseParts<'a> {
    fn parse(raw: &'a str) -> Self {
        match serde_json::from_str::<SplitResponse<'a>>(raw) {
            Ok(SplitResponse { fields, output }) => {
                ResponseParts { fields: Value::Object(fields), output, raw }
            }
            Err(_) => ResponseParts { fields: Value::Null, output: Vec::new(), raw },
        }
    }
}

/// The map behind [`ResponseParts`]: `output` borrowed item by item, the rest decoded.
struct SplitResponse<'a> {
    fields: serde_json::Map<String, Value>,
    output: Vec<&'a RawValue>,
}

impl<'de> Deserialize<'de> for SplitResponse<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = SplitResponse<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a response object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<SplitResponse<'de>, A::Error> {
                let mut fields = serde_json::Map::new();
                let mut output = Vec::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key != "output" {
                        fields.insert(key.into_owned(), map.next_value()?);
                        continue;
                    }
                    let raw: &'de RawValue = map.next_value()?;
                    match serde_json::from_str::<Vec<&'de RawValue>>(raw.get()) {
                        Ok(items) => output = items,
                        // Not an array: kept as a field, as any other.
                        Err(_) => {
                            let value = serde_json::from_str(raw.get())
                                .map_err(serde::de::Error::custom)?;
                            fields.insert(key.into_owned(), value);
                        }
                    }
                }
                Ok(SplitResponse { fields, output })
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Message,
    Reasoning,
    FunctionCall,
    Other,
}

#[derive(Debug)]
struct Item {
    kind: Kind,
    item_id: Option<String>,
    /// A block was opened in the assembler for this item.
    opened: bool,
    /// Text (message) or thinking (reasoning) was streamed.
    streamed: bool,
    /// Last reasoning summary part seen.
    summary_index: Option<u64>,
    /// The item is finished (`output_item.done`).
    done: bool,
    /// The wire `type` of the finished item.
    done_type: Option<String>,
    /// A `multi_tool_use.parallel` wrapper call: arguments are buffered, not streamed.
    wrapper: Option<String>,
    /// Removes the `null`s of omitted optionals from a strict tool's streamed arguments.
    filter: Option<NullFilter>,
    /// The strict tool's restore plan (also for the `.done` arguments).
    plan: Option<Arc<StrictPlan>>,
    /// A message's text so far (to recognise a cumulative snapshot of it), `None` once
    /// longer than [`SNAPSHOT_BASE_LIMIT`].
    text: Option<String>,
}

impl Item {
    /// Keeps `piece` of a message's text, up to [`SNAPSHOT_BASE_LIMIT`].
    fn keep_text(&mut self, piece: &str) {
        if let Some(text) = &mut self.text {
            if text.len() + piece.len() > SNAPSHOT_BASE_LIMIT {
                self.text = None;
            } else {
                text.push_str(piece);
            }
        }
    }
}

impl Item {
    fn new(kind: Kind, item_id: Option<String>) -> Self {
        Item {
            kind,
            item_id,
            opened: false,
            streamed: false,
            summary_index: None,
            done: false,
            done_type: None,
            wrapper: None,
            filter: None,
            plan: None,
            text: Some(String::new()),
        }
    }
}

/// A finished message block whose end is held back while the next item may be a
/// cumulative snapshot of it (Azure; OpenClaw #91959).
#[derive(Debug)]
struct Held {
    key: BlockKey,
    /// The block's text, `None` once longer than [`SNAPSHOT_BASE_LIMIT`] (its end is
    /// then no longer held after the current snapshot).
    text: Option<String>,
    phase: Option<String>,
}

/// A message item that began right after a held one, in the same phase: its text is
/// kept back while it is a prefix of the held text, continues the held block once it
/// extends it, and opens its own block once it diverges.
#[derive(Debug)]
struct Snapshot {
    key: BlockKey,
    /// Its text while kept back (a prefix of the held text).
    text: String,
    /// It extends the held text: its pieces go to the held block.
    extending: bool,
}

/// The Responses [`WireDecoder`].
#[derive(Debug)]
pub struct Decoder {
    items: HashMap<BlockKey, Item>,
    by_item_id: HashMap<String, BlockKey>,
    current: Option<BlockKey>,
    next_synthetic: BlockKey,
    next_wrapper: BlockKey,
    tool_calls: usize,
    /// Types of the output items that wait for an answer clawcall cannot give.
    unanswerable: Vec<String>,
    finished: bool,
    /// User tool names, so a real tool called `parallel` is never expanded.
    tool_names: Arc<BTreeSet<String>>,
    /// Per tool name: the restore plan of a strict tool.
    strict_plans: Arc<BTreeMap<String, Arc<StrictPlan>>>,
    /// Surrogate pairs split across text, reasoning and argument deltas.
    surrogates: SurrogateJoiner,
    /// The last finished message block, not yet ended.
    held: Option<Held>,
    /// The item that may be a cumulative snapshot of `held`.
    snapshot: Option<Snapshot>,
    /// The request asked for an output format: a refusal then ends the stream with a
    /// `refused` error instead of completing as the answer.
    refusal_is_error: bool,
    /// The refusal text streamed so far.
    refusal: String,
}

impl Decoder {
    /// A decoder for one response; `tool_names` are the request's tools, `strict_plans`
    /// the restore plans of the tools sent strict.
    pub(crate) fn new(
        tool_names: Arc<BTreeSet<String>>,
        strict_plans: Arc<BTreeMap<String, Arc<StrictPlan>>>,
    ) -> Self {
        Decoder {
            items: HashMap::new(),
            by_item_id: HashMap::new(),
            current: None,
            next_synthetic: SYNTHETIC_KEYS,
            next_wrapper: WRAPPER_KEYS,
            tool_calls: 0,
            unanswerable: Vec::new(),
            finished: false,
            tool_names,
            strict_plans,
            surrogates: SurrogateJoiner::new(),
            held: None,
            snapshot: None,
            refusal_is_error: false,
            refusal: String::new(),
        }
    }

    /// The same decoder, with a refusal ending the stream as a `refused` error (a request
    /// with an output format, whose answer a refusal is not).
    pub(crate) fn refusing(mut self, refusal_is_error: bool) -> Self {
        self.refusal_is_error = refusal_is_error;
        self
    }

    /// Ends the held message block; a snapshot still kept back becomes its own block.
    fn flush_held(&mut self, out: &mut Vec<Delta>) {
        let Some(held) = self.held.take() else { return };
        out.push(Delta::BlockEnd { key: held.key });
        if let Some(snapshot) = self.snapshot.take()
            && !snapshot.extending
            && !snapshot.text.is_empty()
        {
            if let Some(item) = self.items.get_mut(&snapshot.key) {
                item.text = Some(String::new());
                item.keep_text(&snapshot.text);
            }
            out.push(Delta::Text { key: snapshot.key, text: snapshot.text });
        }
    }

    /// Text for the snapshot candidate: kept back while a prefix of the held text, added
    /// to the held block once it extends it, its own block once it diverges. Each piece
    /// is compared once, so the work is linear in the text.
    fn snapshot_text(&mut self, piece: &str, out: &mut Vec<Delta>) {
        let (Some(held), Some(snapshot)) = (&mut self.held, &mut self.snapshot) else { return };
        if snapshot.extending {
            if let Some(text) = &mut held.text {
                if text.len() + piece.len() > SNAPSHOT_BASE_LIMIT {
                    held.text = None;
                } else {
                    text.push_str(piece);
                }
            }
            out.push(Delta::Text { key: held.key, text: piece.to_owned() });
            return;
        }
        let base = held.text.as_deref().unwrap_or_default();
        let rest = base.as_bytes().get(snapshot.text.len()..).unwrap_or_default();
        let common = piece.len().min(rest.len());
        let agrees = piece.as_bytes().get(..common) == rest.get(..common);
        snapshot.text.push_str(piece);
        if !agrees {
            self.flush_held(out);
        } else if snapshot.text.len() > base.len() {
            // `base` is a prefix ending on a character boundary of the snapshot's text.
            let suffix = snapshot.text.split_off(base.len());
            snapshot.extending = true;
            snapshot.text = String::new();
            if let Some(text) = &mut held.text {
                text.push_str(&suffix);
            }
            out.push(Delta::Text { key: held.key, text: suffix });
        }
    }

    fn handle(&mut self, name: Option<&str>, data: String, out: &mut Vec<Delta>) {
        let Some(deferred) = self.read_event(name, &data, out) else { return };
        let (key, item, literal) = match deferred {
            Deferred::ArgumentsDone { key, literal } => (key, None, literal),
            Deferred::CallDone { key, item, literal } => (key, Some(item), literal),
        };
        // Kept for an error's body: the event without its (possibly huge) arguments.
        let elided = |data: &str| {
            let head = data.get(..literal.start).unwrap_or_default();
            let tail = data.get(literal.end..).unwrap_or_default();
            format!("{head}\"\u{2026}\"{tail}")
        };
        let body = elided(&data);
        let arguments = match decode_in_place(data, literal) {
            Ok(arguments) => arguments,
            Err(why) => {
                let error =
                    Error::new(ErrorKind::Decode, PROVIDER, format!("Invalid event JSON: {why}"))
                        .with_body(body);
                self.fail(out, error);
                return;
            }
        };
        match item {
            None => self.call_arguments_done(key, arguments, out),
            Some(mut item) => {
                if let Some(fields) = item.as_object_mut() {
                    fields.insert("arguments".to_owned(), Value::String(arguments));
                }
                self.item_done(key, &mut item, out);
            }
        }
    }

    /// Handles one event's data, read borrowed; a call's complete arguments are left to
    /// [`handle`](Self::handle), which may then take the data.
    fn read_event(
        &mut self,
        name: Option<&str>,
        data: &str,
        out: &mut Vec<Delta>,
    ) -> Option<Deferred> {
        let event: WireEvent<'_> = match serde_json::from_str(data) {
            Ok(e) => e,
            Err(e) => {
                self.fail(
                    out,
                    Error::new(ErrorKind::Decode, PROVIDER, format!("Invalid event JSON: {e}"))
                        .with_body(data),
                );
                return None;
            }
        };
        let mut delta = event.delta.and_then(text_of);
        // The data's `type` names the event; the SSE `event:` line is the fallback.
        let kind = event.kind.as_deref().or(name).unwrap_or_default();
        let continues_messages = matches!(
            kind,
            "response.output_item.added"
                | "response.output_item.done"
                | "response.output_text.delta"
                | "response.text.delta"
                | "response.refusal.delta"
                | "response.content_part.added"
                | "response.content_part.done"
                | "response.output_text.done"
                | "response.text.done"
                | "response.completed"
                | "response.incomplete"
        );
        if !continues_messages {
            self.flush_held(out);
        }
        match kind {
            "response.created" | "response.in_progress" | "response.queued" => {
                if let Some(response) = value_of(event.response) {
                    out.push(metadata(&response));
                }
            }
            "response.output_item.added" => self.item_added(&event, out),
            "response.output_item.done" => {
                if let Some(raw) = event.item {
                    return self.output_item_done(&event, raw, data, out);
                }
            }
            "response.output_text.delta" | "response.text.delta" | "response.refusal.delta" => {
                if let Some(piece) = delta.take()
                    && !piece.is_empty()
                {
                    let key = self.resolve(&event, Kind::Message);
                    let text = self.surrogates.join(key, Channel::Text, piece);
                    if kind == "response.refusal.delta" && self.refusal_is_error {
                        self.refusal.push_str(&text);
                    }
                    // Streamed even if only a surrogate half came: the `.done` text must not
                    // be added again.
                    self.mark_streamed(key);
                    if self.snapshot.as_ref().is_some_and(|s| s.key == key) {
                        self.snapshot_text(&text, out);
                    } else if !text.is_empty() {
                        self.flush_held(out);
                        if let Some(item) = self.items.get_mut(&key) {
                            item.keep_text(&text);
                        }
                        out.push(Delta::Text { key, text });
                    }
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(piece) = delta.take()
                    && !piece.is_empty()
                {
                    let key = self.resolve(&event, Kind::Reasoning);
                    let text = self.surrogates.join(key, Channel::Thinking, piece);
                    if kind == "response.reasoning_summary_text.delta" {
                        // Summary parts are separated by a blank line (as the final text
                        // OpenClaw builds from the `.done` item), added lazily so an empty
                        // part adds nothing.
                        self.summary_separator(key, num(event.summary_index.as_ref()), out);
                    }
                    self.mark_streamed(key);
                    if !text.is_empty() {
                        out.push(Delta::Thinking { key, text });
                    }
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(piece) = delta.take()
                    && !piece.is_empty()
                {
                    let key = self.resolve(&event, Kind::FunctionCall);
                    let fragment = self.surrogates.join(key, Channel::ToolArgs, piece);
                    if !fragment.is_empty() {
                        self.call_fragment(key, fragment, out);
                    }
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(literal) = event
                    .arguments
                    .and_then(|raw| Literal::of(raw, data))
                    .filter(|literal| !literal.is_empty())
                {
                    let key = self.resolve(&event, Kind::FunctionCall);
                    return Some(Deferred::ArgumentsDone { key, literal });
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = ResponseParts::parse(event.response.map_or("null", RawValue::get));
                self.complete(kind, &response, out);
            }
            "response.failed" | "response.cancelled" => {
                let response = ResponseParts::parse(event.response.map_or("null", RawValue::get));
                if self.reconcile_output(&response.output, out) {
                    let error = failure(&response.fields, data);
                    self.fail(out, error);
                }
            }
            "error" => {
                let object = match &event.error {
                    Some(nested) if nested.is_object() => nested.clone(),
                    _ => {
                        let mut flat = serde_json::Map::new();
                        if let Some(code) = event.code {
                            flat.insert("code".to_owned(), code);
                        }
                        if let Some(message) = event.message {
                            flat.insert("message".to_owned(), message);
                        }
                        Value::Object(flat)
                    }
                };
                self.fail(out, stream_error(&object, data));
            }
            // A bare JSON body in a 200 response: an error envelope, or a whole
            // non-streamed response object.
            "" if event.error.as_ref().is_some_and(Value::is_object) => {
                let object = event.error.unwrap_or_default();
                self.fail(out, stream_error(&object, data));
            }
            "" => {
                let response = ResponseParts::parse(data);
                if str_of(response.fields.get("object")) == Some("response") {
                    self.complete("response.completed", &response, out);
                }
            }
            _ => {}
        }
        None
    }

    fn fail(&mut self, out: &mut Vec<Delta>, error: Error) {
        self.flush_held(out);
        self.finished = true;
        out.push(Delta::Error(error));
    }

    /// The block key an event addresses: its `output_index`, else its `item_id`, else the
    /// current item. Registers an item of `kind` if the key is new (an event whose
    /// `output_item.added` never came).
    fn resolve(&mut self, event: &WireEvent<'_>, kind: Kind) -> BlockKey {
        let item_id = str_of(event.item_id.as_ref());
        let key = match num(event.output_index.as_ref()) {
            Some(index) => index,
            None => match item_id.and_then(|id| self.by_item_id.get(id)) {
                Some(key) => *key,
                None => match self.current {
                    Some(key) if item_id.is_none() => key,
                    _ => self.synthetic_key(),
                },
            },
        };
        self.items.entry(key).or_insert_with(|| Item::new(kind, item_id.map(str::to_owned)));
        if let Some(id) = item_id {
            // Looked up first: most events name an item already known (no key allocated).
            if !self.by_item_id.contains_key(id) {
                self.by_item_id.insert(id.to_owned(), key);
            }
        }
        self.current = Some(key);
        key
    }

    fn synthetic_key(&mut self) -> BlockKey {
        let key = self.next_synthetic;
        self.next_synthetic += 1;
        key
    }

    fn key_for_item(&mut self, event: &WireEvent<'_>, item_id: Option<&str>) -> BlockKey {
        match num(event.output_index.as_ref()) {
            Some(index) => index,
            None => match item_id.and_then(|id| self.by_item_id.get(id)) {
                Some(key) => *key,
                None => self.synthetic_key(),
            },
        }
    }

    fn mark_streamed(&mut self, key: BlockKey) {
        if let Some(item) = self.items.get_mut(&key) {
            item.streamed = true;
            item.opened = true;
        }
    }

    fn summary_separator(&mut self, key: BlockKey, index: Option<u64>, out: &mut Vec<Delta>) {
        let Some(item) = self.items.get_mut(&key) else { return };
        let Some(index) = index else { return };
        match item.summary_index {
            Some(previous) if previous == index => {}
            Some(_) => {
                item.summary_index = Some(index);
                if item.streamed {
                    out.push(Delta::Thinking { key, text: "\n\n".to_owned() });
                }
            }
            None => item.summary_index = Some(index),
        }
    }

    fn item_added(&mut self, event: &WireEvent<'_>, out: &mut Vec<Delta>) {
        let Some(item) = value_of(event.item) else { return };
        let item = &item;
        let key = self.key_for_item(event, str_of(item.get("id")));
        let item_id = str_of(item.get("id")).map(str::to_owned);
        let kind = match str_of(item.get("type")) {
            Some("message") => Kind::Message,
            Some("reasoning") => Kind::Reasoning,
            Some("function_call") => Kind::FunctionCall,
            _ => Kind::Other,
        };
        if let Some(previous) = self.items.get(&key)
            && previous.opened
            && !previous.done
            && previous.item_id != item_id
        {
            // The wire reused an active output index: close the earlier block.
            out.push(Delta::BlockEnd { key });
        }
        let phase = str_of(item.get("phase")).map(str::to_owned);
        match &self.held {
            Some(held)
                if kind == Kind::Message
                    && self.snapshot.is_none()
                    && held.text.is_some()
                    && held.phase == phase =>
            {
                self.snapshot = Some(Snapshot { key, text: String::new(), extending: false });
            }
            _ => self.flush_held(out),
        }
        let mut state = Item::new(kind, item_id.clone());
        if kind == Kind::FunctionCall {
            let name = str_of(item.get("name")).unwrap_or_default();
            if self.is_wrapper(name) {
                state.wrapper = Some(str_of(item.get("arguments")).unwrap_or_default().to_owned());
            } else {
                state.opened = true;
                state.plan = self.strict_plans.get(name).cloned();
                state.filter = state.plan.clone().map(NullFilter::new);
                self.tool_calls += 1;
                out.push(Delta::ToolCallStart {
                    key,
                    id: call_id(item),
                    name: name.to_owned(),
                    arguments: None,
                });
                if let Some(arguments) = str_of(item.get("arguments")).filter(|a| !a.is_empty()) {
                    let fragment = match state.filter.as_mut() {
                        Some(filter) => filter.push(arguments),
                        None => arguments.to_owned(),
                    };
                    if !fragment.is_empty() {
                        out.push(Delta::ToolCallArgs { key, fragment });
                    }
                }
            }
        }
        self.items.insert(key, state);
        if let Some(id) = item_id {
            self.by_item_id.insert(id, key);
        }
        self.current = Some(key);
    }

    fn is_wrapper(&self, name: &str) -> bool {
        matches!(name, "parallel" | "multi_tool_use.parallel") && !self.tool_names.contains(name)
    }

    fn call_fragment(&mut self, key: BlockKey, fragment: String, out: &mut Vec<Delta>) {
        let Some(item) = self.items.get_mut(&key) else { return };
        if let Some(buffer) = item.wrapper.as_mut() {
            buffer.push_str(&fragment);
            return;
        }
        if !item.opened {
            // Arguments for a call whose `added` never came: open it; id and name
            // arrive with `output_item.done`.
            item.opened = true;
            item.kind = Kind::FunctionCall;
            self.tool_calls += 1;
        }
        let fragment = match item.filter.as_mut() {
            Some(filter) => filter.push(&fragment),
            None => fragment,
        };
        if !fragment.is_empty() {
            out.push(Delta::ToolCallArgs { key, fragment });
        }
    }

    fn call_arguments_done(&mut self, key: BlockKey, arguments: String, out: &mut Vec<Delta>) {
        let Some(item) = self.items.get_mut(&key) else { return };
        if let Some(buffer) = item.wrapper.as_mut() {
            if arguments.len() > buffer.len() || !arguments.starts_with(buffer.as_str()) {
                *buffer = arguments;
            }
            return;
        }
        if !item.opened {
            item.opened = true;
            item.kind = Kind::FunctionCall;
            self.tool_calls += 1;
        }
        // Filtered whole, the text extends what the filter let through so far.
        let arguments = match &item.plan {
            Some(plan) => NullFilter::new(Arc::clone(plan)).push(&arguments),
            None => arguments,
        };
        out.push(Delta::ToolCallArgsDone { key, arguments });
    }

    /// `response.output_item.done`: a message whose text streamed is finished from its id, type
    /// and phase alone (the repeated text is skipped, never decoded), a function call from its
    /// id, call id and name, its arguments left to [`handle`](Self::handle) to decode in place
    /// ([`Deferred::CallDone`]); any other item is decoded whole.
    fn output_item_done(
        &mut self,
        event: &WireEvent<'_>,
        raw: &RawValue,
        data: &str,
        out: &mut Vec<Delta>,
    ) -> Option<Deferred> {
        let Ok(head) = serde_json::from_str::<ItemHead<'_>>(raw.get()) else {
            // Loosely typed head fields: decoded whole.
            let mut item = self.whole_item(raw, out)?;
            let key = self.key_for_item(event, str_of(item.get("id")));
            self.item_done(key, &mut item, out);
            return None;
        };
        let key = self.key_for_item(event, head.id.as_deref());
        let streamed_message = head.kind.as_deref() == Some("message")
            && self.items.get(&key).is_some_and(|state| state.streamed && !state.done);
        let mut item = if streamed_message {
            let mut item = serde_json::Map::new();
            item.insert("type".to_owned(), Value::from("message"));
            if let Some(id) = head.id {
                item.insert("id".to_owned(), Value::from(id.into_owned()));
            }
            if let Some(phase) = head.phase {
                item.insert("phase".to_owned(), phase);
            }
            Value::Object(item)
        } else if head.kind.as_deref() == Some("function_call") {
            let mut item = serde_json::Map::new();
            item.insert("type".to_owned(), Value::from("function_call"));
            let fields = [("id", head.id), ("call_id", head.call_id), ("name", head.name)];
            for (field, value) in fields {
                if let Some(value) = value {
                    item.insert(field.to_owned(), Value::from(value.into_owned()));
                }
            }
            let item = Value::Object(item);
            if let Some(literal) = head.arguments.and_then(|raw| Literal::of(raw, data)) {
                return Some(Deferred::CallDone { key, item, literal });
            }
            item
        } else {
            self.whole_item(raw, out)?
        };
        self.item_done(key, &mut item, out);
        None
    }

    /// A finished item decoded whole; one that is valid JSON but no `Value` (a lone surrogate
    /// escape) ends the stream with a decode error, as when the whole event was parsed at once.
    fn whole_item(&mut self, raw: &RawValue, out: &mut Vec<Delta>) -> Option<Value> {
        match serde_json::from_str(raw.get()) {
            Ok(item) => Some(item),
            Err(e) => {
                let error =
                    Error::new(ErrorKind::Decode, PROVIDER, format!("Invalid event JSON: {e}"))
                        .with_body(raw.get());
                self.fail(out, error);
                None
            }
        }
    }

    /// Finishes the item at `key`; a call's arguments are taken out of `item` (not copied).
    fn item_done(&mut self, key: BlockKey, item: &mut Value, out: &mut Vec<Delta>) {
        let item_id = str_of(item.get("id")).map(str::to_owned);
        let state =
            self.items.entry(key).or_insert_with(|| Item::new(Kind::Other, item_id.clone()));
        if state.done && state.item_id == item_id {
            return;
        }
        if state.opened && state.done {
            // A finished block at this index belonged to another item; start afresh.
            *state = Item::new(Kind::Other, item_id.clone());
        }
        if let Some(id) = &item_id {
            self.by_item_id.entry(id.clone()).or_insert(key);
        }
        if str_of(item.get("type")) != Some("message") {
            self.flush_held(out);
        }
        match str_of(item.get("type")) {
            Some("message") => self.message_done(key, item, out),
            Some("reasoning") => self.reasoning_done(key, item, out),
            Some("function_call") => {
                let arguments = match item.get_mut("arguments").map(Value::take) {
                    Some(Value::String(arguments)) => arguments,
                    _ => String::new(),
                };
                self.call_done(key, item, arguments, out)
            }
            _ => self.opaque_done(key, item, out),
        }
        if let Some(state) = self.items.get_mut(&key) {
            state.done = true;
            state.done_type = str_of(item.get("type")).map(str::to_owned);
            state.item_id = item_id;
        }
    }

    /// Any other item: kept whole, for display and same-model replay, never executed.
    fn opaque_done(&mut self, key: BlockKey, item: &Value, out: &mut Vec<Delta>) {
        if !item.is_object() {
            return;
        }
        let wire_type = str_of(item.get("type")).unwrap_or_default().to_owned();
        let waits_for_client = str_of(item.get("call_id")).is_some_and(|id| !id.is_empty())
            || wire_type == "mcp_approval_request";
        if waits_for_client {
            self.unanswerable.push(wire_type.clone());
        }
        out.push(Delta::ProviderContent {
            key,
            content: ProviderContent { wire_type, data: item.clone() },
        });
    }

    fn message_done(&mut self, key: BlockKey, item: &Value, out: &mut Vec<Delta>) {
        let phase = str_of(item.get("phase")).map(str::to_owned);
        if let Some(snapshot) = self.snapshot.take_if(|s| s.key == key) {
            self.snapshot_done(snapshot, item, phase, out);
            return;
        }
        let Some(state) = self.items.get_mut(&key) else { return };
        if !state.streamed {
            let text = message_text(item);
            if !text.is_empty() {
                if let Some(held) = self.held.take() {
                    out.push(Delta::BlockEnd { key: held.key });
                }
                state.keep_text(&text);
                out.push(Delta::Text { key, text });
                state.streamed = true;
                state.opened = true;
            }
        }
        if !state.opened {
            return;
        }
        text_signature(key, item, out);
        let text = state.text.take();
        self.flush_held(out);
        match text {
            // Its end waits: the next item may be a cumulative snapshot of it.
            Some(text) => self.held = Some(Held { key, text: Some(text), phase }),
            None => out.push(Delta::BlockEnd { key }),
        }
    }

    /// The snapshot candidate finished: a strict extension of the held text continues
    /// that block (its text grown, the signature this item's); anything else is its own block.
    fn snapshot_done(
        &mut self,
        snapshot: Snapshot,
        item: &Value,
        phase: Option<String>,
        out: &mut Vec<Delta>,
    ) {
        let Some(held) = self.held.as_mut() else { return };
        let base = held.text.as_deref().unwrap_or_default();
        let mut extends = snapshot.extending;
        if !extends && snapshot.text.is_empty() {
            // Nothing streamed: the `.done` text decides.
            let text = message_text(item);
            if text.len() > base.len() && text.starts_with(base) {
                let suffix = text.get(base.len()..).unwrap_or_default().to_owned();
                out.push(Delta::Text { key: held.key, text: suffix });
                held.text = (text.len() <= SNAPSHOT_BASE_LIMIT).then_some(text);
                extends = true;
            } else {
                self.snapshot = Some(Snapshot { text, ..snapshot });
                return self.snapshot_diverged(item, phase, out);
            }
        }
        if extends {
            let key = held.key;
            text_signature(key, item, out);
            held.phase = phase;
            if held.text.is_none() {
                self.held = None;
                out.push(Delta::BlockEnd { key });
            }
            return;
        }
        self.snapshot = Some(snapshot);
        self.snapshot_diverged(item, phase, out);
    }

    /// The finished snapshot candidate (in `self.snapshot`) is no strict extension: the
    /// held block ends and the candidate is a block of its own (held in turn).
    fn snapshot_diverged(&mut self, item: &Value, phase: Option<String>, out: &mut Vec<Delta>) {
        let Some(key) = self.snapshot.as_ref().map(|s| s.key) else { return };
        let opened = self.snapshot.as_ref().is_some_and(|s| !s.text.is_empty());
        // Ends the held block and writes the kept-back text as the candidate's own block.
        self.flush_held(out);
        let Some(state) = self.items.get_mut(&key) else { return };
        if !opened {
            return;
        }
        state.opened = true;
        state.streamed = true;
        text_signature(key, item, out);
        match state.text.take() {
            Some(text) => self.held = Some(Held { key, text: Some(text), phase }),
            None => out.push(Delta::BlockEnd { key }),
        }
    }

    fn reasoning_done(&mut self, key: BlockKey, item: &Value, out: &mut Vec<Delta>) {
        let Some(state) = self.items.get_mut(&key) else { return };
        if !state.streamed {
            let text = reasoning_text(item);
            if !text.is_empty() {
                out.push(Delta::Thinking { key, text });
                state.streamed = true;
            }
        }
        state.opened = true;
        // The whole item (with the `.done` encrypted_content) is the replay signature.
        out.push(Delta::ThinkingSignature { key, signature: item.to_string() });
        out.push(Delta::BlockEnd { key });
    }

    fn call_done(&mut self, key: BlockKey, item: &Value, arguments: String, out: &mut Vec<Delta>) {
        let name = str_of(item.get("name")).unwrap_or_default().to_owned();
        let wrapper_name = self.is_wrapper(&name);
        // The name is known here even for a call whose `added` never came.
        let plan = self.strict_plans.get(&name).cloned();
        let Some(state) = self.items.get_mut(&key) else { return };
        if state.wrapper.is_some() || (!state.opened && wrapper_name) {
            let buffer = state.wrapper.take().unwrap_or_default();
            let text = if arguments.len() >= buffer.len() { arguments } else { buffer };
            state.opened = true;
            self.expand_wrapper(key, item, &name, &text, out);
            return;
        }
        if state.opened {
            out.push(Delta::ToolCallMeta {
                key,
                id: Some(call_id(item)),
                name: Some(name),
                thought_signature: None,
            });
        } else {
            // `output_item.done` without `added` (OpenClaw drops this call; we keep it).
            state.opened = true;
            state.kind = Kind::FunctionCall;
            self.tool_calls += 1;
            out.push(Delta::ToolCallStart { key, id: call_id(item), name, arguments: None });
        }
        if !arguments.is_empty() {
            let arguments = match plan {
                Some(plan) => NullFilter::new(plan).push(&arguments),
                None => arguments,
            };
            out.push(Delta::ToolCallArgsDone { key, arguments });
        }
        out.push(Delta::BlockEnd { key });
    }

    /// Expands `multi_tool_use.parallel` (`{"tool_uses":[{"recipient_name":"functions.x",
    /// "parameters":{...}}]}`) into one call per entry; anything else stays one call.
    fn expand_wrapper(
        &mut self,
        key: BlockKey,
        item: &Value,
        name: &str,
        arguments: &str,
        out: &mut Vec<Delta>,
    ) {
        let base = call_id(item);
        let base = base.split('|').next().unwrap_or_default().to_owned();
        let uses = serde_json::from_str::<Value>(arguments)
            .ok()
            .and_then(|v| v.get("tool_uses").and_then(Value::as_array).cloned())
            .filter(|uses| {
                !uses.is_empty()
                    && uses
                        .iter()
                        .all(|u| str_of(u.get("recipient_name")).is_some_and(|n| !n.is_empty()))
            });
        let Some(uses) = uses else {
            self.tool_calls += 1;
            out.push(Delta::ToolCallStart {
                key,
                id: call_id(item),
                name: name.to_owned(),
                arguments: None,
            });
            out.push(Delta::ToolCallArgs { key, fragment: arguments.to_owned() });
            out.push(Delta::BlockEnd { key });
            return;
        };
        for (n, entry) in uses.iter().enumerate() {
            let recipient = str_of(entry.get("recipient_name")).unwrap_or_default();
            let tool = recipient.strip_prefix("functions.").unwrap_or(recipient);
            let mut parameters = entry.get("parameters").filter(|p| p.is_object()).cloned();
            if let (Some(plan), Some(parameters)) = (self.strict_plans.get(tool), &mut parameters) {
                plan.restore(parameters);
            }
            let wrapper_key = self.next_wrapper;
            self.next_wrapper += 1;
            self.tool_calls += 1;
            out.push(Delta::ToolCallStart {
                key: wrapper_key,
                id: format!("{base}_{n}"),
                name: tool.to_owned(),
                arguments: Some(parameters.unwrap_or_else(|| Value::Object(Default::default()))),
            });
            out.push(Delta::BlockEnd { key: wrapper_key });
        }
    }

    /// Processes items of `response.output` that never came as `output_item.done`.
    ///
    /// An item is found by its id, else by its position (its `output_index`): servers
    /// that rotate item ids send ids here that no event carried.
    ///
    /// An item is decoded only when it is not finished already: one that finished (with
    /// `output_item.done`) is recognised from its head fields and skipped, so its text or
    /// arguments are not decoded a third time. Returns `false` when an item that must be
    /// read does not decode (the stream then ended with that error).
    fn reconcile_output(&mut self, output: &[&RawValue], out: &mut Vec<Delta>) -> bool {
        for (index, raw) in output.iter().enumerate() {
            let head = serde_json::from_str::<ItemHead<'_>>(raw.get());
            let decoded = match head {
                Ok(_) => None,
                // Loosely typed head fields: decoded whole.
                Err(_) => match self.whole_item(raw, out) {
                    Some(item) => Some(item),
                    None => return false,
                },
            };
            let (id, wire_type) = match (&head, &decoded) {
                (Ok(head), _) => (head.id.as_deref(), head.kind.as_deref()),
                (Err(_), item) => {
                    let item = item.as_ref();
                    (
                        str_of(item.and_then(|i| i.get("id"))),
                        str_of(item.and_then(|i| i.get("type"))),
                    )
                }
            };
            let key = match id.and_then(|id| self.by_item_id.get(id)) {
                Some(key) => *key,
                None => match self.items.get(&(index as BlockKey)) {
                    // The same position finished as another kind of item: a different one.
                    Some(state) if state.done && state.done_type.as_deref() != wire_type => {
                        self.synthetic_key()
                    }
                    _ => index as BlockKey,
                },
            };
            if self.items.get(&key).is_some_and(|s| s.done) {
                continue;
            }
            let item = match decoded {
                Some(item) => Some(item),
                None => self.whole_item(raw, out),
            };
            let Some(mut item) = item else { return false };
            self.item_done(key, &mut item, out);
        }
        true
    }

    fn complete(&mut self, kind: &str, parts: &ResponseParts<'_>, out: &mut Vec<Delta>) {
        if !self.reconcile_output(&parts.output, out) {
            return;
        }
        self.flush_held(out);
        let response = &parts.fields;
        out.push(metadata(response));
        if let Some(usage) = response.get("usage").and_then(usage) {
            out.push(Delta::Usage(usage));
        }
        if !self.refusal.is_empty() {
            let message = format!("OpenAI refusal: {}", self.refusal);
            let error = Error::new(ErrorKind::Refused, PROVIDER, message)
                .with_code("refusal")
                .with_retryable(false);
            self.fail(out, error);
            return;
        }
        let status = str_of(response.get("status")).unwrap_or(match kind {
            "response.incomplete" => "incomplete",
            _ => "completed",
        });
        let reason = match status {
            "incomplete" => {
                let why = str_of(response.get("incomplete_details").and_then(|d| d.get("reason")));
                if why == Some("content_filter") {
                    self.fail(
                        out,
                        Error::new(ErrorKind::Refused, PROVIDER, "incomplete: content_filter")
                            .with_code("content_filter")
                            .with_retryable(false),
                    );
                    return;
                }
                StopReason::Length
            }
            "failed" | "cancelled" => {
                // The body is the whole response, output included (decoded on this rare path).
                let body = serde_json::from_str::<Value>(parts.raw)
                    .map_or_else(|_| parts.raw.to_owned(), |whole| whole.to_string());
                let error = failure(response, &body);
                self.fail(out, error);
                return;
            }
            _ if self.tool_calls > 0 => StopReason::ToolUse,
            _ => StopReason::Stop,
        };
        if let Some(first) = self.unanswerable.first() {
            let error = Error::new(
                ErrorKind::Unsupported,
                PROVIDER,
                format!(
                    "The model requested an item of type {first}, which clawcall cannot \
                     answer (only function tools are supported)"
                ),
            )
            .with_code(first.clone())
            .with_retryable(false);
            self.fail(out, error);
            return;
        }
        self.finished = true;
        out.push(Delta::Stop(reason));
        out.push(Delta::Done);
    }
}

impl WireDecoder for Decoder {
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) {
        if self.finished || event.data.trim().is_empty() {
            return;
        }
        let from = out.len();
        self.handle(event.event.as_deref(), event.data, out);
        self.surrogates.settle(out, from);
    }

    fn end(&mut self, _out: &mut Vec<Delta>) {
        // No terminator came: llm-core reports the truncation.
    }
}

/// `response.failed` (or a failed status) as an error: `<code>: <message>`,
/// `incomplete: <reason>`, or a generic message.
fn failure(response: &Value, raw: &str) -> Error {
    if let Some(error) = response.get("error").filter(|e| e.is_object()) {
        return stream_error(error, raw);
    }
    if let Some(reason) = str_of(response.get("incomplete_details").and_then(|d| d.get("reason"))) {
        return Error::new(ErrorKind::Provider, PROVIDER, format!("incomplete: {reason}"))
            .with_code(reason)
            .with_retryable(false)
            .with_body(raw);
    }
    let status = str_of(response.get("status")).unwrap_or("failed");
    let kind = if status == "cancelled" { ErrorKind::Aborted } else { ErrorKind::Provider };
    Error::new(
        kind,
        PROVIDER,
        format!("Response {status}: unknown error (no error details in response)"),
    )
    .with_retryable(false)
    .with_body(raw)
}

/// `{"v":1,"id":<item id>,"phase"?}`: the message item's replay signature (none
/// without an id).
fn text_signature(key: BlockKey, item: &Value, out: &mut Vec<Delta>) {
    let Some(id) = str_of(item.get("id")) else { return };
    let mut signature = serde_json::Map::new();
    signature.insert("v".to_owned(), Value::from(1));
    signature.insert("id".to_owned(), Value::from(id));
    if let Some(phase) = str_of(item.get("phase")) {
        signature.insert("phase".to_owned(), Value::from(phase));
    }
    out.push(Delta::TextSignature { key, signature: Value::Object(signature).to_string() });
}

fn metadata(response: &Value) -> Delta {
    Delta::Metadata {
        response_id: str_of(response.get("id")).map(str::to_owned),
        response_model: str_of(response.get("model")).map(str::to_owned),
    }
}

/// Usage: `input` excludes cached tokens; reasoning tokens are part of `output_tokens`.
fn usage(usage: &Value) -> Option<Usage> {
    if !usage.is_object() {
        return None;
    }
    let input = num(usage.get("input_tokens")).unwrap_or(0);
    let cached =
        num(usage.get("input_tokens_details").and_then(|d| d.get("cached_tokens"))).unwrap_or(0);
    let output = num(usage.get("output_tokens")).unwrap_or(0);
    Some(Usage {
        input: input.saturating_sub(cached),
        output,
        cache_read: cached,
        cache_write: 0,
        total_tokens: num(usage.get("total_tokens")).unwrap_or(input + output),
        cost: Default::default(),
    })
}

fn call_id(item: &Value) -> String {
    let call = str_of(item.get("call_id")).filter(|s| !s.is_empty());
    let id = str_of(item.get("id")).filter(|s| !s.is_empty());
    match (call, id) {
        (Some(call), Some(id)) => format!("{call}|{id}"),
        (Some(one), None) | (None, Some(one)) => one.to_owned(),
        (None, None) => String::new(),
    }
}

fn message_text(item: &Value) -> String {
    let mut text = String::new();
    for part in item.get("content").and_then(Value::as_array).into_iter().flatten() {
        match str_of(part.get("type")) {
            // `text` is Azure's spelling of `output_text`.
            Some("output_text" | "text") => {
                text.push_str(str_of(part.get("text")).unwrap_or_default())
            }
            Some("refusal") => text.push_str(str_of(part.get("refusal")).unwrap_or_default()),
            _ => {}
        }
    }
    text
}

fn reasoning_text(item: &Value) -> String {
    let collect = |field: &str| -> Vec<&str> {
        item.get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| str_of(p.get("text")))
            .filter(|t| !t.is_empty())
            .collect()
    };
    let summary = collect("summary");
    if summary.is_empty() { collect("content").join("\n\n") } else { summary.join("\n\n") }
}

/// A field that may hold a large value, decoded where it is used.
fn value_of(raw: Option<&RawValue>) -> Option<Value> {
    serde_json::from_str(raw?.get()).ok()
}

/// A string field as [`WireText`] (a lone surrogate half at either end kept for the next
/// delta); any other JSON value is absent.
fn text_of(raw: &RawValue) -> Option<WireText> {
    let raw = raw.get();
    if !raw.starts_with('"') {
        return None;
    }
    serde_json::from_str(raw).ok()
}

fn str_of(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str)
}

/// A non-negative integer of any JSON width or spelling (`3`, `3.0`, `"3"`).
fn num(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64().filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0).map(|f| f as u64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
