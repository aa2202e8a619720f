//! Turns neutral [`Delta`]s into [`AssistantEvent`]s and the final message.
//!
//! Nothing on the hot path copies a whole block: the partial message is a borrowed view
//! ([`PartialMessage`]) whose open tool calls show the incremental parser's value in place,
//! and a closed block's content is shared with its end event (`Arc`) and moved back into
//! the message when the terminal event takes it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;

use crate::error::{Error, ErrorKind};
use crate::event::{AssistantEvent, BlockKey, Delta};
use crate::raw::partial_json::PartialJson;
use crate::types::{
    AssistantContent, AssistantMessage, Model, ProviderContent, StopReason, TextContent,
    ThinkingContent, ToolCall, Usage,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Text,
    Thinking,
    ToolCall,
}

#[derive(Debug)]
struct ToolState {
    /// The call's arguments parser; it keeps no second copy of the streamed text, only a
    /// hash to compare complete arguments with (`Delta::ToolCallArgsDone`).
    args: PartialJson,
    fragments: usize,
}

#[derive(Debug, Clone, Copy)]
struct OpenBlock {
    index: usize,
    kind: BlockKind,
}

/// The open blocks by key: a map, with the block last looked up or opened kept aside, since
/// consecutive deltas nearly always continue the same block (its lookup hashed the key once
/// per delta).
#[derive(Debug, Default)]
struct OpenBlocks {
    last: Option<(BlockKey, OpenBlock)>,
    map: HashMap<BlockKey, OpenBlock>,
}

impl OpenBlocks {
    fn get(&mut self, key: BlockKey) -> Option<OpenBlock> {
        if self.last.is_none_or(|(k, _)| k != key) {
            self.last = Some((key, *self.map.get(&key)?));
        }
        self.last.map(|(_, block)| block)
    }

    fn contains_key(&mut self, key: BlockKey) -> bool {
        self.get(key).is_some()
    }

    fn insert(&mut self, key: BlockKey, block: OpenBlock) {
        self.map.insert(key, block);
        self.last = Some((key, block));
    }

    fn remove(&mut self, key: BlockKey) -> Option<OpenBlock> {
        if self.last.is_some_and(|(k, _)| k == key) {
            self.last = None;
        }
        self.map.remove(&key)
    }

    fn clear(&mut self) {
        self.last = None;
        self.map.clear();
    }
}

/// Where block `i`'s current content lives, besides `message.content[i]`.
#[derive(Debug)]
enum Slot {
    /// `message.content[i]` is current.
    InMessage,
    /// An open tool call: once a fragment arrived, its arguments are the parser's value
    /// (`message.content[i]` keeps `{}` or the input given at the start).
    Parsing(Box<ToolState>),
    /// A closed text block whose text is shared with its `text_end` event
    /// (`message.content[i]` keeps the signature).
    SharedText(Arc<String>),
    /// A closed thinking block whose text is shared with its `thinking_end` event.
    SharedThinking(Arc<String>),
    /// A closed tool call shared with its `toolcall_end` event.
    SharedToolCall(Arc<ToolCall>),
}

/// The value behind `shared`: moved out when nobody else holds it, else copied.
fn unshare<T: Clone>(shared: Arc<T>) -> T {
    Arc::try_unwrap(shared).unwrap_or_else(|shared| (*shared).clone())
}

/// Builds an [`AssistantMessage`] from deltas and queues the matching events.
///
/// Tool-call arguments are parsed incrementally ([`PartialJson`]): the work over a
/// whole call is linear in its length, and [`MessageAssembler::partial`] shows the
/// parser's best-effort value without copying it.
#[derive(Debug)]
pub struct MessageAssembler {
    message: AssistantMessage,
    /// One per block of `message.content`.
    slots: Vec<Slot>,
    prices: crate::types::ModelCost,
    open: OpenBlocks,
    events: VecDeque<AssistantEvent>,
    started: bool,
    finished: bool,
    saw_stop: bool,
}

impl MessageAssembler {
    /// An empty message for `model`, stamped with `timestamp` (ms).
    pub fn new(model: &Model, timestamp: u64) -> Self {
        MessageAssembler {
            message: AssistantMessage {
                api: model.api.clone(),
                provider: model.provider.clone(),
                model: model.id.clone(),
                timestamp,
                ..AssistantMessage::default()
            },
            slots: Vec::new(),
            prices: model.cost,
            open: OpenBlocks::default(),
            events: VecDeque::new(),
            started: false,
            finished: false,
            saw_stop: false,
        }
    }

    /// The message as assembled so far, open tool calls with their best-effort
    /// partial arguments: a borrowed view, so reading it costs nothing per byte
    /// streamed (see [`PartialMessage`]).
    ///
    /// Once the terminal event was taken, the view keeps only the metadata (the
    /// content moved into that event).
    pub fn partial(&self) -> PartialMessage<'_> {
        PartialMessage { message: &self.message, slots: &self.slots }
    }

    /// Whether a terminal event has been produced.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Whether a content event (text, thinking, tool call) has been produced.
    pub fn has_content(&self) -> bool {
        !self.message.content.is_empty()
    }

    /// Whether a `stop` delta was seen.
    pub fn saw_stop_reason(&self) -> bool {
        self.saw_stop
    }

    /// Takes the next queued event.
    ///
    /// The terminal event takes the message (moved, not copied: it may be large;
    /// a block's content shared with an end event the consumer still holds is the
    /// one thing copied); afterwards [`MessageAssembler::partial`] keeps only its
    /// metadata.
    pub fn next_event(&mut self) -> Option<AssistantEvent> {
        let mut event = self.events.pop_front()?;
        if let AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. } =
            &mut event
        {
            let mut content = std::mem::take(&mut self.message.content);
            for (block, slot) in content.iter_mut().zip(self.slots.drain(..)) {
                match (block, slot) {
                    (AssistantContent::Text(t), Slot::SharedText(text)) => t.text = unshare(text),
                    (AssistantContent::Thinking(t), Slot::SharedThinking(text)) => {
                        t.thinking = unshare(text)
                    }
                    (AssistantContent::ToolCall(call), Slot::SharedToolCall(shared)) => {
                        *call = unshare(shared)
                    }
                    _ => {}
                }
            }
            **message = self.message.clone();
            message.content = content;
        }
        Some(event)
    }

    /// Applies one delta. Deltas after the terminal one are ignored.
    pub fn push(&mut self, delta: Delta) {
        if self.finished {
            return;
        }
        match delta {
            Delta::Metadata { response_id, response_model } => {
                self.ensure_started();
                if response_id.is_some() {
                    self.message.response_id = response_id;
                }
                if let Some(m) = response_model.filter(|m| *m != self.message.model) {
                    self.message.response_model = Some(m);
                }
            }
            Delta::Text { key, text } => {
                let index = self.open_block(key, BlockKind::Text);
                if let Some(AssistantContent::Text(t)) = self.message.content.get_mut(index) {
                    t.text.push_str(&text);
                }
                self.events
                    .push_back(AssistantEvent::TextDelta { content_index: index, delta: text });
            }
            Delta::TextSignature { key, signature } => {
                let index = self.open_block(key, BlockKind::Text);
                if let Some(AssistantContent::Text(t)) = self.message.content.get_mut(index) {
                    t.text_signature = Some(signature);
                }
            }
            Delta::Thinking { key, text } => {
                let index = self.open_block(key, BlockKind::Thinking);
                if let Some(AssistantContent::Thinking(t)) = self.message.content.get_mut(index) {
                    t.thinking.push_str(&text);
                }
                self.events
                    .push_back(AssistantEvent::ThinkingDelta { content_index: index, delta: text });
            }
            Delta::ThinkingSignature { key, signature } => {
                let index = self.open_block(key, BlockKind::Thinking);
                if let Some(AssistantContent::Thinking(t)) = self.message.content.get_mut(index) {
                    t.thinking_signature.get_or_insert_with(String::new).push_str(&signature);
                }
            }
            Delta::RedactedThinking { key, data } => {
                let index = self.open_block(key, BlockKind::Thinking);
                if let Some(AssistantContent::Thinking(t)) = self.message.content.get_mut(index) {
                    t.redacted = true;
                    t.thinking_signature = Some(data);
                }
            }
            Delta::ToolCallStart { key, id, name, arguments } => {
                // A start for a key that is still open means a new call reused the key.
                if self.open.contains_key(key) {
                    self.close_block(key);
                }
                let index = self.open_block_with(key, BlockKind::ToolCall, id, name);
                // Input given whole at the start stands unless fragments follow.
                if let (Some(args), Some(AssistantContent::ToolCall(call))) =
                    (arguments, self.message.content.get_mut(index))
                    && args.is_object()
                {
                    call.arguments = args;
                }
            }
            Delta::ToolCallMeta { key, id, name, thought_signature } => {
                let index = self.open_block(key, BlockKind::ToolCall);
                if let Some(AssistantContent::ToolCall(call)) = self.message.content.get_mut(index)
                {
                    if let Some(id) = id.filter(|s| !s.is_empty()) {
                        call.id = id;
                    }
                    if let Some(name) = name.filter(|s| !s.is_empty()) {
                        call.name = name;
                    }
                    if thought_signature.is_some() {
                        call.thought_signature = thought_signature;
                    }
                }
            }
            Delta::ToolCallArgs { key, fragment } => {
                let index = self.open_block(key, BlockKind::ToolCall);
                self.push_args(index, fragment, false);
            }
            Delta::ToolCallArgsDone { key, arguments } => {
                let index = self.open_block(key, BlockKind::ToolCall);
                let missing = match self.slots.get(index) {
                    Some(Slot::Parsing(state)) => {
                        state.args.suffix_after_fed(&arguments).map(str::to_owned)
                    }
                    _ => None,
                };
                match missing {
                    Some(suffix) if !suffix.is_empty() => self.push_args(index, suffix, false),
                    Some(_) => {}
                    None => {
                        // The final text disagrees with what streamed: trust the final text.
                        if let Some(Slot::Parsing(state)) = self.slots.get_mut(index) {
                            state.args = PartialJson::without_raw();
                            state.fragments = 0;
                        }
                        self.push_args(index, arguments, true);
                    }
                }
            }
            Delta::ToolCallArgsWhole { key, text, arguments } => {
                let index = self.open_block(key, BlockKind::ToolCall);
                if let Some(Slot::Parsing(state)) = self.slots.get_mut(index) {
                    // Replaces what streamed: the parser's value is no longer shown.
                    state.args = PartialJson::without_raw();
                    state.fragments = 0;
                }
                if let Some(AssistantContent::ToolCall(call)) = self.message.content.get_mut(index)
                {
                    call.arguments = if arguments.is_object() {
                        arguments
                    } else {
                        Value::Object(Default::default())
                    };
                }
                if !text.is_empty() {
                    // The whole arguments were replaced.
                    self.events.push_back(AssistantEvent::ToolCallDelta {
                        content_index: index,
                        delta: text,
                        changed: Some(Arc::from("")),
                    });
                }
            }
            Delta::ProviderContent { key, content } => {
                self.ensure_started();
                if self.open.contains_key(key) {
                    self.close_block(key);
                }
                let index = self.message.content.len();
                self.message.content.push(AssistantContent::ProviderContent(content.clone()));
                self.slots.push(Slot::InMessage);
                self.events.push_back(AssistantEvent::ProviderContent {
                    content_index: index,
                    content: Box::new(content),
                });
            }
            Delta::BlockEnd { key } => self.close_block(key),
            Delta::Usage(mut usage) => {
                usage.recompute(&self.prices);
                self.message.usage = usage;
            }
            Delta::Stop(reason) => {
                self.saw_stop = true;
                self.message.stop_reason = reason;
            }
            Delta::Done => self.finish_ok(),
            Delta::Error(error) => self.finish_err(error),
        }
    }

    /// Ends the message with `error` now (the caller cancelled), even if a terminal
    /// event is already queued: that one is dropped, the content events queued before it
    /// stay (their content is in the message), and the error event follows them.
    pub fn abort(&mut self, error: Error) {
        self.events.retain(|e| !e.is_terminal());
        self.finished = false;
        self.finish_err(error);
    }

    fn ensure_started(&mut self) {
        if !self.started {
            self.started = true;
            self.events.push_back(AssistantEvent::Start);
        }
    }

    /// Feeds an argument fragment; `replaces` when it starts the arguments over (what was
    /// shown before may be gone, so the whole value counts as changed).
    fn push_args(&mut self, index: usize, fragment: String, replaces: bool) {
        if fragment.is_empty() {
            return;
        }
        let changed = match self.slots.get_mut(index) {
            Some(Slot::Parsing(state)) => {
                state.args.push(&fragment);
                state.fragments += 1;
                if replaces { Some(Arc::from("")) } else { state.args.changed().cloned() }
            }
            _ => None,
        };
        self.events.push_back(AssistantEvent::ToolCallDelta {
            content_index: index,
            delta: fragment,
            changed,
        });
    }

    fn open_block(&mut self, key: BlockKey, kind: BlockKind) -> usize {
        self.open_block_with(key, kind, String::new(), String::new())
    }

    fn open_block_with(
        &mut self,
        key: BlockKey,
        kind: BlockKind,
        id: String,
        name: String,
    ) -> usize {
        self.ensure_started();
        if let Some(block) = self.open.get(key) {
            if block.kind == kind {
                return block.index;
            }
            self.close_block(key);
        }
        let index = self.message.content.len();
        let (content, event, slot) = match kind {
            BlockKind::Text => (
                AssistantContent::Text(TextContent::default()),
                AssistantEvent::TextStart { content_index: index },
                Slot::InMessage,
            ),
            BlockKind::Thinking => (
                AssistantContent::Thinking(ThinkingContent::default()),
                AssistantEvent::ThinkingStart { content_index: index },
                Slot::InMessage,
            ),
            BlockKind::ToolCall => (
                AssistantContent::ToolCall(ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: Value::Object(Default::default()),
                    thought_signature: None,
                    arguments_incomplete: false,
                }),
                AssistantEvent::ToolCallStart { content_index: index, id, name },
                Slot::Parsing(Box::new(ToolState {
                    args: PartialJson::without_raw(),
                    fragments: 0,
                })),
            ),
        };
        self.message.content.push(content);
        self.slots.push(slot);
        self.events.push_back(event);
        self.open.insert(key, OpenBlock { index, kind });
        index
    }

    fn close_block(&mut self, key: BlockKey) {
        let Some(block) = self.open.remove(key) else { return };
        let index = block.index;
        let (Some(content), Some(slot)) =
            (self.message.content.get_mut(index), self.slots.get_mut(index))
        else {
            return;
        };
        let event = match content {
            AssistantContent::Text(t) => {
                let text = Arc::new(std::mem::take(&mut t.text));
                *slot = Slot::SharedText(text.clone());
                AssistantEvent::TextEnd { content_index: index, content: text }
            }
            AssistantContent::Thinking(t) => {
                let text = Arc::new(std::mem::take(&mut t.thinking));
                *slot = Slot::SharedThinking(text.clone());
                AssistantEvent::ThinkingEnd { content_index: index, content: text }
            }
            AssistantContent::ToolCall(call) => {
                if let Slot::Parsing(state) = std::mem::replace(slot, Slot::InMessage)
                    && state.fragments > 0
                {
                    // A call whose JSON was cut off is repaired for display, and marked so it never runs.
                    call.arguments_incomplete = !state.args.is_complete();
                    // Moved, not copied: the streamed value of complete arguments is final.
                    call.arguments = state.args.into_finished();
                }
                let placeholder = ToolCall {
                    id: String::new(),
                    name: String::new(),
                    arguments: Value::Null,
                    thought_signature: None,
                    arguments_incomplete: false,
                };
                let shared = Arc::new(std::mem::replace(call, placeholder));
                *slot = Slot::SharedToolCall(shared.clone());
                AssistantEvent::ToolCallEnd { content_index: index, tool_call: shared }
            }
            // Opaque blocks are never open (they arrive whole).
            AssistantContent::ProviderContent(_) => return,
        };
        self.events.push_back(event);
    }

    fn close_all(&mut self) {
        let mut keys: Vec<(usize, BlockKey)> =
            self.open.map.iter().map(|(k, b)| (b.index, *k)).collect();
        keys.sort_unstable();
        for (_, key) in keys {
            self.close_block(key);
        }
    }

    fn finish_ok(&mut self) {
        self.ensure_started();
        self.close_all();
        self.finished = true;
        let reason = self.message.stop_reason;
        if matches!(reason, StopReason::Error | StopReason::Aborted) {
            // A provider that maps a wire stop reason to an error must say why.
            let error = Error::new(
                ErrorKind::Provider,
                self.message.provider.clone(),
                "Provider reported an error stop reason",
            );
            self.finished = false;
            self.finish_err(error);
            return;
        }
        // The message is moved in by `next_event`.
        self.events.push_back(AssistantEvent::Done { reason, message: Box::default() });
    }

    fn finish_err(&mut self, error: Error) {
        // Open calls keep their best-effort partial arguments (copied once, at the end).
        for (block, slot) in self.message.content.iter_mut().zip(self.slots.iter_mut()) {
            if let (AssistantContent::ToolCall(call), Slot::Parsing(state)) = (block, &*slot) {
                if state.fragments > 0 {
                    call.arguments_incomplete = !state.args.is_complete();
                    call.arguments = state.args.value().clone();
                }
                *slot = Slot::InMessage;
            }
        }
        self.finished = true;
        let reason =
            if error.kind == ErrorKind::Aborted { StopReason::Aborted } else { StopReason::Error };
        self.open.clear();
        self.message.stop_reason = reason;
        self.message.error_message = Some(error.message.clone());
        self.message.error_code = error.code.clone();
        self.message.error_type = Some(error.kind.as_str().to_owned());
        self.message.error_body = error.body.clone();
        self.message.error_status = error.status;
        // The message is moved in by `next_event`.
        self.events.push_back(AssistantEvent::Error {
            reason,
            message: Box::default(),
            error: Box::new(error),
        });
    }
}

/// A borrowed view of the message being assembled ([`MessageAssembler::partial`],
/// [`crate::AssistantStream::partial`]).
///
/// Reading it copies nothing: an open tool call's arguments are the incremental
/// parser's current value, borrowed in place, so a UI that reads the arguments after
/// every fragment still streams in linear time. [`PartialMessage::to_message`] makes
/// an owned copy when one is needed.
#[derive(Clone, Copy)]
pub struct PartialMessage<'a> {
    message: &'a AssistantMessage,
    slots: &'a [Slot],
}

/// One content block of a [`PartialMessage`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum PartialContent<'a> {
    /// Text.
    Text {
        /// The text so far.
        text: &'a str,
        /// Opaque provider metadata, if any.
        signature: Option<&'a str>,
    },
    /// Reasoning.
    Thinking {
        /// The reasoning text so far.
        thinking: &'a str,
        /// Opaque replay data, if any.
        signature: Option<&'a str>,
        /// The signature holds an encrypted payload and the text is not readable.
        redacted: bool,
    },
    /// A tool call.
    ToolCall(PartialToolCall<'a>),
    /// A provider's own block, kept whole (it arrives complete).
    ProviderContent(&'a ProviderContent),
}

/// A tool call of a [`PartialMessage`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartialToolCall<'a> {
    /// Call id (may be empty until the provider sends it).
    pub id: &'a str,
    /// Tool name (may be empty until the provider sends it).
    pub name: &'a str,
    /// Best-effort arguments so far; always a JSON object.
    pub arguments: &'a Value,
    /// Google's per-part thought signature.
    pub thought_signature: Option<&'a str>,
}

impl<'a> PartialToolCall<'a> {
    fn of(call: &'a ToolCall) -> Self {
        PartialToolCall {
            id: &call.id,
            name: &call.name,
            arguments: &call.arguments,
            thought_signature: call.thought_signature.as_deref(),
        }
    }

    /// An owned copy (costs the size of the arguments).
    pub fn to_tool_call(&self) -> ToolCall {
        ToolCall {
            id: self.id.to_owned(),
            name: self.name.to_owned(),
            arguments: self.arguments.clone(),
            thought_signature: self.thought_signature.map(str::to_owned),
            arguments_incomplete: false,
        }
    }
}

impl<'a> PartialMessage<'a> {
    /// The number of content blocks.
    pub fn content_len(&self) -> usize {
        self.message.content.len()
    }

    /// Block `content_index` (the index events carry), if it exists.
    pub fn content_at(&self, content_index: usize) -> Option<PartialContent<'a>> {
        let block = self.message.content.get(content_index)?;
        let slot = self.slots.get(content_index);
        Some(match (block, slot) {
            (AssistantContent::Text(t), Some(Slot::SharedText(text))) => {
                PartialContent::Text { text: text.as_str(), signature: t.text_signature.as_deref() }
            }
            (AssistantContent::Text(t), _) => {
                PartialContent::Text { text: &t.text, signature: t.text_signature.as_deref() }
            }
            (AssistantContent::Thinking(t), Some(Slot::SharedThinking(text))) => {
                PartialContent::Thinking {
                    thinking: text.as_str(),
                    signature: t.thinking_signature.as_deref(),
                    redacted: t.redacted,
                }
            }
            (AssistantContent::Thinking(t), _) => PartialContent::Thinking {
                thinking: &t.thinking,
                signature: t.thinking_signature.as_deref(),
                redacted: t.redacted,
            },
            (AssistantContent::ToolCall(_), Some(Slot::SharedToolCall(call))) => {
                PartialContent::ToolCall(PartialToolCall::of(call))
            }
            (AssistantContent::ToolCall(call), Some(Slot::Parsing(state)))
                if state.fragments > 0 =>
            {
                PartialContent::ToolCall(PartialToolCall {
                    arguments: state.args.value(),
                    ..PartialToolCall::of(call)
                })
            }
            (AssistantContent::ToolCall(call), _) => {
                PartialContent::ToolCall(PartialToolCall::of(call))
            }
            (AssistantContent::ProviderContent(content), _) => {
                PartialContent::ProviderContent(content)
            }
        })
    }

    /// The blocks in order.
    pub fn content(&self) -> impl Iterator<Item = PartialContent<'a>> + 'a {
        let view = *self;
        (0..self.content_len()).filter_map(move |i| view.content_at(i))
    }

    /// The tool call at `content_index`, if that block is one: what a UI reads after
    /// each `toolcall_delta` (O(1), nothing copied).
    pub fn tool_call(&self, content_index: usize) -> Option<PartialToolCall<'a>> {
        match self.content_at(content_index)? {
            PartialContent::ToolCall(call) => Some(call),
            _ => None,
        }
    }

    /// The tool calls, in content order.
    pub fn tool_calls(&self) -> impl Iterator<Item = PartialToolCall<'a>> + 'a {
        self.content().filter_map(|c| match c {
            PartialContent::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// All text blocks joined.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in self.content() {
            if let PartialContent::Text { text, .. } = block {
                out.push_str(text);
            }
        }
        out
    }

    /// Provider name.
    pub fn provider(&self) -> &'a str {
        &self.message.provider
    }

    /// Requested model id.
    pub fn model(&self) -> &'a str {
        &self.message.model
    }

    /// Provider response id, once known.
    pub fn response_id(&self) -> Option<&'a str> {
        self.message.response_id.as_deref()
    }

    /// Usage so far.
    pub fn usage(&self) -> &'a Usage {
        &self.message.usage
    }

    /// The stop reason so far.
    pub fn stop_reason(&self) -> StopReason {
        self.message.stop_reason
    }

    /// An owned copy of the message as it is now (costs its size).
    pub fn to_message(&self) -> AssistantMessage {
        let mut message = self.message.clone();
        for (block, slot) in message.content.iter_mut().zip(self.slots) {
            match (block, slot) {
                (AssistantContent::Text(t), Slot::SharedText(text)) => t.text = (**text).clone(),
                (AssistantContent::Thinking(t), Slot::SharedThinking(text)) => {
                    t.thinking = (**text).clone()
                }
                (AssistantContent::ToolCall(call), Slot::SharedToolCall(shared)) => {
                    *call = (**shared).clone()
                }
                (AssistantContent::ToolCall(call), Slot::Parsing(state)) if state.fragments > 0 => {
                    call.arguments_incomplete = !state.args.is_complete();
                    call.arguments = state.args.value().clone()
                }
                _ => {}
            }
        }
        message
    }
}

impl std::fmt::Debug for PartialMessage<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartialMessage")
            .field("provider", &self.provider())
            .field("model", &self.model())
            .field("content", &self.content().collect::<Vec<_>>())
            .field("stop_reason", &self.stop_reason())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;
    use serde_json::json;

    fn model() -> Model {
        Model { id: "m".into(), api: "test".into(), provider: "p".into(), ..Model::default() }
    }

    fn drain(a: &mut MessageAssembler) -> Vec<AssistantEvent> {
        std::iter::from_fn(|| a.next_event()).collect()
    }

    #[test]
    fn tool_call_with_initial_input_and_no_deltas_keeps_input() {
        let mut a = MessageAssembler::new(&model(), 0);
        a.push(Delta::ToolCallStart {
            key: 0,
            id: "t1".into(),
            name: "f".into(),
            arguments: Some(json!({"x": 1})),
        });
        a.push(Delta::BlockEnd { key: 0 });
        a.push(Delta::Stop(StopReason::ToolUse));
        a.push(Delta::Done);
        let events = drain(&mut a);
        let Some(AssistantEvent::Done { message, reason }) = events.last() else { panic!() };
        assert_eq!(*reason, StopReason::ToolUse);
        assert_eq!(message.tool_calls().next().unwrap().arguments, json!({"x": 1}));
    }

    /// The open block kept beside the map: deltas that alternate between blocks, and a key
    /// that comes back after its block closed, each land in the right block.
    #[test]
    fn interleaved_blocks_and_a_reused_key_land_in_their_own_blocks() {
        let mut a = MessageAssembler::new(&model(), 0);
        a.push(Delta::ToolCallStart { key: 0, id: "a".into(), name: "f".into(), arguments: None });
        a.push(Delta::ToolCallStart { key: 1, id: "b".into(), name: "g".into(), arguments: None });
        for (key, fragment) in [(0, "{\"x\":"), (1, "{\"y\":"), (1, "2}"), (0, "1}")] {
            a.push(Delta::ToolCallArgs { key, fragment: fragment.into() });
        }
        a.push(Delta::BlockEnd { key: 0 });
        // Key 0 again after its block closed: a new block, not the closed call.
        a.push(Delta::Text { key: 0, text: "after".into() });
        a.push(Delta::Text { key: 0, text: "!".into() });
        // The same for a call's key: its next fragment opens a new call.
        a.push(Delta::ToolCallMeta { key: 1, id: None, name: None, thought_signature: None });
        a.push(Delta::BlockEnd { key: 1 });
        a.push(Delta::ToolCallArgs { key: 1, fragment: "{\"z\":3}".into() });
        a.push(Delta::Done);
        let events = drain(&mut a);
        let deltas: Vec<(usize, String)> = events
            .iter()
            .filter_map(|e| match e {
                AssistantEvent::ToolCallDelta { content_index, delta, .. }
                | AssistantEvent::TextDelta { content_index, delta } => {
                    Some((*content_index, delta.clone()))
                }
                _ => None,
            })
            .collect();
        let expected = [
            (0, "{\"x\":"),
            (1, "{\"y\":"),
            (1, "2}"),
            (0, "1}"),
            (2, "after"),
            (2, "!"),
            (3, "{\"z\":3}"),
        ];
        assert_eq!(deltas, expected.map(|(i, d)| (i, d.to_owned())));
        let Some(AssistantEvent::Done { message, .. }) = events.last() else { panic!() };
        let calls: Vec<(&str, &Value)> =
            message.tool_calls().map(|c| (c.id.as_str(), &c.arguments)).collect();
        assert_eq!(
            calls,
            [("a", &json!({"x": 1})), ("b", &json!({"y": 2})), ("", &json!({"z": 3}))]
        );
        assert_eq!(message.content.len(), 4);
        assert!(matches!(&message.content[2], AssistantContent::Text(t) if t.text == "after!"));
    }

    #[test]
    fn empty_fragments_give_empty_object_and_blocks_close_in_order() {
        let mut a = MessageAssembler::new(&model(), 0);
        a.push(Delta::Text { key: 9, text: "hi".into() });
        a.push(Delta::ToolCallStart { key: 1, id: "a".into(), name: "f".into(), arguments: None });
        a.push(Delta::ToolCallArgs { key: 1, fragment: String::new() });
        a.push(Delta::Done);
        let events = drain(&mut a);
        let kinds: Vec<String> = events.iter().map(|e| format!("{e:?}")).collect();
        assert!(kinds[0].starts_with("Start"));
        assert!(kinds[4].starts_with("TextEnd"), "{kinds:?}");
        assert!(kinds[5].starts_with("ToolCallEnd"), "{kinds:?}");
        let Some(AssistantEvent::Done { message, .. }) = events.last() else { panic!() };
        assert_eq!(message.tool_calls().next().unwrap().arguments, json!({}));
        assert_eq!(message.text(), "hi");
        // The message moved into `done`; the assembler keeps the metadata.
        assert_eq!(a.partial().content_len(), 0);
        assert_eq!(a.partial().model(), "m");
    }

    #[test]
    fn args_done_appends_missing_suffix() {
        let mut a = MessageAssembler::new(&model(), 0);
        a.push(Delta::ToolCallStart { key: 0, id: "a".into(), name: "f".into(), arguments: None });
        a.push(Delta::ToolCallArgs { key: 0, fragment: "{\"a\":".into() });
        a.push(Delta::ToolCallArgsDone { key: 0, arguments: "{\"a\":12}".into() });
        a.push(Delta::BlockEnd { key: 0 });
        assert_eq!(*a.partial().tool_calls().next().unwrap().arguments, json!({"a": 12}));
    }

    #[test]
    fn whole_arguments_replace_fragments_and_become_one_delta() {
        let mut a = MessageAssembler::new(&model(), 0);
        a.push(Delta::ToolCallStart { key: 0, id: "a".into(), name: "f".into(), arguments: None });
        a.push(Delta::ToolCallArgs { key: 0, fragment: "{\"stale\":".into() });
        let text = r#"{"path": "C:\\new", "n": [1, 2]}"#;
        a.push(Delta::ToolCallArgsWhole {
            key: 0,
            text: text.into(),
            arguments: serde_json::from_str(text).unwrap(),
        });
        // The view shows the whole value at once, not the stale parser's.
        assert_eq!(
            *a.partial().tool_call(0).unwrap().arguments,
            json!({"path": "C:\\new", "n": [1, 2]})
        );
        a.push(Delta::ToolCallStart { key: 1, id: "b".into(), name: "g".into(), arguments: None });
        a.push(Delta::ToolCallArgsWhole { key: 1, text: "[1]".into(), arguments: json!([1]) });
        a.push(Delta::Stop(StopReason::ToolUse));
        a.push(Delta::Done);
        let events = drain(&mut a);
        let deltas: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                AssistantEvent::ToolCallDelta { delta, .. } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(deltas, ["{\"stale\":", text, "[1]"]);
        let Some(AssistantEvent::Done { message, .. }) = events.last() else { panic!() };
        let calls: Vec<&ToolCall> = message.tool_calls().collect();
        assert_eq!(calls[0].arguments, serde_json::from_str::<Value>(text).unwrap());
        // A non-object is `{}`, as for streamed arguments.
        assert_eq!(calls[1].arguments, json!({}));
    }

    #[test]
    fn error_keeps_partial_content_and_is_single_terminal() {
        let mut a = MessageAssembler::new(&model(), 0);
        a.push(Delta::Text { key: 0, text: "par".into() });
        a.push(Delta::Error(Error::new(ErrorKind::Overloaded, "p", "Overloaded")));
        a.push(Delta::Done);
        let events = drain(&mut a);
        assert_eq!(events.iter().filter(|e| e.is_terminal()).count(), 1);
        let Some(AssistantEvent::Error { message, reason, .. }) = events.last() else { panic!() };
        assert_eq!(*reason, StopReason::Error);
        assert_eq!(message.text(), "par");
        assert_eq!(message.error_message.as_deref(), Some("Overloaded"));
    }

    #[test]
    fn provider_content_lands_whole_with_its_event_and_closes_the_key() {
        let mut a = MessageAssembler::new(&model(), 0);
        a.push(Delta::Text { key: 0, text: "hi".into() });
        let content = crate::types::ProviderContent {
            wire_type: "web_search_call".into(),
            data: json!({"type": "web_search_call", "id": "ws_1"}),
        };
        a.push(Delta::ProviderContent { key: 0, content: content.clone() });
        a.push(Delta::Text { key: 1, text: "after".into() });
        a.push(Delta::Done);
        let events = drain(&mut a);
        assert!(matches!(&events[3], AssistantEvent::TextEnd { content_index: 0, .. }));
        assert_eq!(
            events[4],
            AssistantEvent::ProviderContent {
                content_index: 1,
                content: Box::new(content.clone())
            }
        );
        let Some(AssistantEvent::Done { message, .. }) = events.last() else { panic!() };
        assert_eq!(message.content[1], AssistantContent::ProviderContent(content));
        assert_eq!(message.text(), "hiafter");
        assert_eq!(message.tool_calls().count(), 0);
    }

    fn str_ptr(value: &Value, key: &str) -> usize {
        value[key].as_str().unwrap().as_ptr() as usize
    }

    #[test]
    fn partial_view_borrows_the_parser_value_and_the_end_moves_it() {
        let mut a = MessageAssembler::new(&model(), 0);
        a.push(Delta::ToolCallStart { key: 0, id: "t".into(), name: "w".into(), arguments: None });
        let args = r#"{"path":"a.txt","content":"line one\nline \"two\"\n"}"#;
        let fragments: Vec<String> =
            args.as_bytes().chunks(5).map(|c| String::from_utf8(c.to_vec()).unwrap()).collect();
        let mut last_content = String::new();
        for fragment in &fragments {
            a.push(Delta::ToolCallArgs { key: 0, fragment: fragment.clone() });
            let call = a.partial().tool_call(0).unwrap();
            assert!(call.arguments.is_object());
            if let Some(content) = call.arguments.get("content").and_then(Value::as_str) {
                // The streamed string only grows.
                assert!(content.starts_with(&last_content), "{content:?} / {last_content:?}");
                last_content = content.to_owned();
            }
        }
        let expected: Value = serde_json::from_str(args).unwrap();
        assert_eq!(*a.partial().tool_call(0).unwrap().arguments, expected);
        let streamed = str_ptr(a.partial().tool_call(0).unwrap().arguments, "content");
        a.push(Delta::BlockEnd { key: 0 });
        a.push(Delta::Stop(StopReason::ToolUse));
        a.push(Delta::Done);
        let mut end_ptr = None;
        let mut done = None;
        while let Some(event) = a.next_event() {
            match event {
                AssistantEvent::ToolCallEnd { tool_call, .. } => {
                    assert_eq!(tool_call.arguments, expected);
                    // The complete value is moved out of the parser, not copied.
                    end_ptr = Some(str_ptr(&tool_call.arguments, "content"));
                    // The closed call is still in the view, shared with the event.
                    assert_eq!(*a.partial().tool_call(0).unwrap().arguments, expected);
                }
                AssistantEvent::Done { message, .. } => done = Some(message),
                _ => {}
            }
        }
        assert_eq!(end_ptr, Some(streamed));
        let message = done.unwrap();
        let call = message.tool_calls().next().unwrap();
        assert_eq!((call.id.as_str(), call.name.as_str()), ("t", "w"));
        assert_eq!(call.arguments, expected);
        // The end event was dropped before `done`: the message took the call back unshared.
        assert_eq!(str_ptr(&call.arguments, "content"), streamed);
    }

    #[test]
    fn text_end_shares_the_text_and_done_moves_it_back_or_copies_if_held() {
        for hold in [false, true] {
            let mut a = MessageAssembler::new(&model(), 0);
            a.push(Delta::Thinking { key: 0, text: "hm".into() });
            a.push(Delta::ThinkingSignature { key: 0, signature: "sig".into() });
            a.push(Delta::BlockEnd { key: 0 });
            a.push(Delta::Text { key: 1, text: "hello ".into() });
            a.push(Delta::Text { key: 1, text: "world".into() });
            a.push(Delta::BlockEnd { key: 1 });
            a.push(Delta::Done);
            let mut held = Vec::new();
            let mut text_ptr = 0;
            let mut done = None;
            while let Some(event) = a.next_event() {
                if let AssistantEvent::TextEnd { content, content_index } = &event {
                    assert_eq!((content.as_str(), *content_index), ("hello world", 1));
                    text_ptr = content.as_ptr() as usize;
                    let view = a.partial();
                    assert_eq!(view.text(), "hello world");
                    assert_eq!(
                        view.content_at(0),
                        Some(PartialContent::Thinking {
                            thinking: "hm",
                            signature: Some("sig"),
                            redacted: false
                        })
                    );
                }
                match event {
                    AssistantEvent::Done { message, .. } => done = Some(message),
                    other if hold => held.push(other),
                    _ => {}
                }
            }
            let message = done.unwrap();
            assert_eq!(message.text(), "hello world");
            let Some(AssistantContent::Thinking(t)) = message.content.first() else { panic!() };
            assert_eq!((t.thinking.as_str(), t.thinking_signature.as_deref()), ("hm", Some("sig")));
            let Some(AssistantContent::Text(t)) = message.content.get(1) else { panic!() };
            // Moved back when the event was dropped, copied when the consumer kept it.
            let done_ptr = t.text.as_ptr() as usize;
            assert_eq!(done_ptr == text_ptr, !hold, "hold = {hold}");
        }
    }

    #[test]
    fn to_message_matches_the_final_message_at_every_step() {
        let deltas = vec![
            Delta::Metadata { response_id: Some("r".into()), response_model: None },
            Delta::Text { key: 0, text: "Let me ".into() },
            Delta::Text { key: 0, text: "write.".into() },
            Delta::BlockEnd { key: 0 },
            Delta::ToolCallStart { key: 1, id: "a".into(), name: "f".into(), arguments: None },
            Delta::ToolCallStart {
                key: 2,
                id: "b".into(),
                name: "g".into(),
                arguments: Some(json!({"given": true})),
            },
            Delta::ToolCallArgs { key: 1, fragment: "{\"x\":[1,".into() },
            Delta::ToolCallArgs { key: 1, fragment: "2]}".into() },
            Delta::BlockEnd { key: 1 },
            Delta::Stop(StopReason::ToolUse),
            Delta::Done,
        ];
        let mut a = MessageAssembler::new(&model(), 7);
        let mut snapshots = Vec::new();
        for delta in deltas {
            a.push(delta);
            snapshots.push(a.partial().to_message());
        }
        let events = drain(&mut a);
        let Some(AssistantEvent::Done { message, .. }) = events.last() else { panic!() };
        // The last snapshot, taken before `done` was read, is the final message.
        assert_eq!(snapshots.last(), Some(&**message));
        let calls: Vec<&ToolCall> = message.tool_calls().collect();
        assert_eq!(calls[0].arguments, json!({"x": [1, 2]}));
        assert_eq!(calls[1].arguments, json!({"given": true}));
        assert_eq!(message.response_id.as_deref(), Some("r"));
        // Mid-stream: the first call's partial arguments, the second's initial input.
        let mid = &snapshots[6];
        let mid_calls: Vec<&ToolCall> = mid.tool_calls().collect();
        assert_eq!(mid_calls[0].arguments, json!({"x": [1]}));
        assert_eq!(mid_calls[1].arguments, json!({"given": true}));
        assert_eq!(mid.text(), "Let me write.");
    }

    #[test]
    fn error_keeps_open_partial_arguments() {
        let mut a = MessageAssembler::new(&model(), 0);
        a.push(Delta::ToolCallArgs { key: 3, fragment: "{\"path\":\"a\",\"content\":\"ab".into() });
        a.push(Delta::Error(Error::new(ErrorKind::Transport, "p", "reset")));
        let events = drain(&mut a);
        assert!(!events.iter().any(|e| matches!(e, AssistantEvent::ToolCallEnd { .. })));
        let Some(AssistantEvent::Error { message, .. }) = events.last() else { panic!() };
        assert_eq!(
            message.tool_calls().next().unwrap().arguments,
            json!({"path": "a", "content": "ab"})
        );
    }
}
