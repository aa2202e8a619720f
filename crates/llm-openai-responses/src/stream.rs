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

use llm_core::raw::drive::WireDecoder;
use llm_core::raw::sse::SseEvent;
use llm_core::raw::strict::{NullFilter, StrictPlan};
use llm_core::{
    Error, ErrorKind, ProviderContent, StopReason, Usage,
    raw::{BlockKey, Channel, Delta, SurrogateJoiner, WireText},
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
mod items;
mod values;
mod wire;

use values::*;
use wire::*;

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
}

impl WireDecoder for Decoder {
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) {
        if self.finished || event.data.trim().is_empty() {
            return;
        }
        self.handle(event.event.as_deref(), event.data, out);
    }

    fn end(&mut self, _out: &mut Vec<Delta>) {
        // No terminator came: llm-core reports the truncation.
    }

    fn surrogates(&mut self) -> Option<&mut SurrogateJoiner> {
        Some(&mut self.surrogates)
    }
}

#[cfg(test)]
mod tests;
