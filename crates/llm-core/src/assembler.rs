//! Turns neutral [`Delta`]s into [`AssistantEvent`]s and the final message.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use crate::error::{Error, ErrorKind};
use crate::event::{AssistantEvent, BlockKey, Delta};
use crate::partial_json::PartialJson;
use crate::types::{
    AssistantContent, AssistantMessage, Model, StopReason, TextContent, ThinkingContent, ToolCall,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Text,
    Thinking,
    ToolCall,
}

#[derive(Debug)]
struct ToolState {
    args: PartialJson,
    initial: Option<Value>,
    fragments: usize,
}

#[derive(Debug)]
struct OpenBlock {
    index: usize,
    kind: BlockKind,
    tool: Option<ToolState>,
}

/// Builds an [`AssistantMessage`] from deltas and queues the matching events.
///
/// Tool-call arguments are parsed incrementally ([`PartialJson`]): the partial
/// message always holds a best-effort arguments object, and the work over a
/// whole call is linear in its length.
#[derive(Debug)]
pub struct MessageAssembler {
    message: AssistantMessage,
    prices: crate::types::ModelCost,
    open: HashMap<BlockKey, OpenBlock>,
    events: VecDeque<AssistantEvent>,
    started: bool,
    finished: bool,
    saw_stop: bool,
    /// Open tool calls whose arguments changed since the message was last synced.
    dirty: bool,
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
            prices: model.cost,
            open: HashMap::new(),
            events: VecDeque::new(),
            started: false,
            finished: false,
            saw_stop: false,
            dirty: false,
        }
    }

    /// The message as assembled so far, open tool calls with their best-effort
    /// partial arguments.
    ///
    /// Syncing the partial arguments costs their size, so it happens here, on
    /// demand, never per fragment (that would make streaming quadratic).
    pub fn partial(&mut self) -> &AssistantMessage {
        self.sync_partial_arguments();
        &self.message
    }

    /// The message without syncing partial tool arguments (metadata, text,
    /// thinking and finished calls are always current).
    pub fn message(&self) -> &AssistantMessage {
        &self.message
    }

    fn sync_partial_arguments(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        for block in self.open.values() {
            if let (Some(state), Some(AssistantContent::ToolCall(call))) =
                (&block.tool, self.message.content.get_mut(block.index))
                && state.fragments > 0
            {
                call.arguments = state.args.value().clone();
            }
        }
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
    /// The terminal event takes the message (moved, not copied: it may be
    /// large); afterwards [`MessageAssembler::partial`] keeps only its metadata.
    pub fn next_event(&mut self) -> Option<AssistantEvent> {
        let mut event = self.events.pop_front()?;
        if let AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. } =
            &mut event
        {
            let content = std::mem::take(&mut self.message.content);
            *message = self.message.clone();
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
                if self.open.contains_key(&key) {
                    self.close_block(key);
                }
                let index = self.open_block_with(key, BlockKind::ToolCall, id, name);
                if let Some(state) = self.open.get_mut(&key).and_then(|b| b.tool.as_mut()) {
                    state.initial = arguments.clone();
                }
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
                self.push_args(key, index, fragment);
            }
            Delta::ToolCallArgsDone { key, arguments } => {
                let index = self.open_block(key, BlockKind::ToolCall);
                let missing = self
                    .open
                    .get(&key)
                    .and_then(|b| b.tool.as_ref())
                    .and_then(|t| arguments.strip_prefix(t.args.raw()))
                    .map(str::to_owned);
                match missing {
                    Some(suffix) if !suffix.is_empty() => self.push_args(key, index, suffix),
                    Some(_) => {}
                    None => {
                        // The final text disagrees with what streamed: trust the final text.
                        if let Some(state) = self.open.get_mut(&key).and_then(|b| b.tool.as_mut()) {
                            state.args = PartialJson::new();
                            state.fragments = 0;
                        }
                        self.push_args(key, index, arguments);
                    }
                }
            }
            Delta::ProviderContent { key, content } => {
                self.ensure_started();
                if self.open.contains_key(&key) {
                    self.close_block(key);
                }
                let index = self.message.content.len();
                self.message.content.push(AssistantContent::ProviderContent(content.clone()));
                self.events
                    .push_back(AssistantEvent::ProviderContent { content_index: index, content });
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

    fn push_args(&mut self, key: BlockKey, index: usize, fragment: String) {
        if fragment.is_empty() {
            return;
        }
        if let Some(state) = self.open.get_mut(&key).and_then(|b| b.tool.as_mut()) {
            state.args.push(&fragment);
            state.fragments += 1;
            self.dirty = true;
        }
        self.events
            .push_back(AssistantEvent::ToolCallDelta { content_index: index, delta: fragment });
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
        if let Some(block) = self.open.get(&key) {
            if block.kind == kind {
                return block.index;
            }
            self.close_block(key);
        }
        let index = self.message.content.len();
        let (content, event, tool) = match kind {
            BlockKind::Text => (
                AssistantContent::Text(TextContent::default()),
                AssistantEvent::TextStart { content_index: index },
                None,
            ),
            BlockKind::Thinking => (
                AssistantContent::Thinking(ThinkingContent::default()),
                AssistantEvent::ThinkingStart { content_index: index },
                None,
            ),
            BlockKind::ToolCall => (
                AssistantContent::ToolCall(ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: Value::Object(Default::default()),
                    thought_signature: None,
                }),
                AssistantEvent::ToolCallStart { content_index: index, id, name },
                Some(ToolState { args: PartialJson::new(), initial: None, fragments: 0 }),
            ),
        };
        self.message.content.push(content);
        self.events.push_back(event);
        self.open.insert(key, OpenBlock { index, kind, tool });
        index
    }

    fn close_block(&mut self, key: BlockKey) {
        let Some(block) = self.open.remove(&key) else { return };
        let index = block.index;
        let event = match self.message.content.get_mut(index) {
            Some(AssistantContent::Text(t)) => {
                AssistantEvent::TextEnd { content_index: index, content: t.text.clone() }
            }
            Some(AssistantContent::Thinking(t)) => {
                AssistantEvent::ThinkingEnd { content_index: index, content: t.thinking.clone() }
            }
            Some(AssistantContent::ToolCall(call)) => {
                if let Some(state) = block.tool {
                    call.arguments = match (state.fragments, state.initial) {
                        (0, Some(initial)) if initial.is_object() => initial,
                        _ => state.args.finish(),
                    };
                }
                AssistantEvent::ToolCallEnd { content_index: index, tool_call: call.clone() }
            }
            // Opaque blocks are never open (they arrive whole).
            Some(AssistantContent::ProviderContent(_)) | None => return,
        };
        self.events.push_back(event);
    }

    fn close_all(&mut self) {
        let mut keys: Vec<(usize, BlockKey)> =
            self.open.iter().map(|(k, b)| (b.index, *k)).collect();
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
        self.events
            .push_back(AssistantEvent::Done { reason, message: AssistantMessage::default() });
    }

    fn finish_err(&mut self, error: Error) {
        self.sync_partial_arguments();
        self.finished = true;
        let reason =
            if error.kind == ErrorKind::Aborted { StopReason::Aborted } else { StopReason::Error };
        self.open.clear();
        self.message.stop_reason = reason;
        self.message.error_message = Some(error.message.clone());
        self.message.error_code = error.code.clone();
        self.message.error_type = Some(error.kind.as_str().to_owned());
        self.message.error_body = error.body.clone();
        // The message is moved in by `next_event`.
        self.events.push_back(AssistantEvent::Error {
            reason,
            message: AssistantMessage::default(),
            error,
        });
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
        assert!(a.partial().content.is_empty());
        assert_eq!(a.partial().model, "m");
    }

    #[test]
    fn args_done_appends_missing_suffix() {
        let mut a = MessageAssembler::new(&model(), 0);
        a.push(Delta::ToolCallStart { key: 0, id: "a".into(), name: "f".into(), arguments: None });
        a.push(Delta::ToolCallArgs { key: 0, fragment: "{\"a\":".into() });
        a.push(Delta::ToolCallArgsDone { key: 0, arguments: "{\"a\":12}".into() });
        a.push(Delta::BlockEnd { key: 0 });
        assert_eq!(a.partial().tool_calls().next().unwrap().arguments, json!({"a": 12}));
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
            AssistantEvent::ProviderContent { content_index: 1, content: content.clone() }
        );
        let Some(AssistantEvent::Done { message, .. }) = events.last() else { panic!() };
        assert_eq!(message.content[1], AssistantContent::ProviderContent(content));
        assert_eq!(message.text(), "hiafter");
        assert_eq!(message.tool_calls().count(), 0);
    }
}
