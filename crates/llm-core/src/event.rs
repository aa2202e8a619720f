//! The assistant-message event protocol (OpenClaw's) and the neutral deltas
//! provider crates produce.

use std::sync::Arc;

use serde_json::Value;

use crate::error::Error;
use crate::types::{AssistantMessage, ProviderContent, StopReason, ToolCall, Usage};

/// One event of a streamed assistant message.
///
/// Events carry deltas, not copies of the partial message; read the partial
/// message from [`crate::AssistantStream::partial`]. The end events share the
/// block's content with the message (`Arc`): the terminal event moves it back into
/// the message, copying only what the consumer still holds. `content_index` is the
/// block's index in the message's `content`. Exactly one terminal event
/// ([`AssistantEvent::Done`] or [`AssistantEvent::Error`]) ends every stream.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AssistantEvent {
    /// The provider accepted the request.
    Start,
    /// A text block opened.
    TextStart {
        /// Block index.
        content_index: usize,
    },
    /// More text.
    TextDelta {
        /// Block index.
        content_index: usize,
        /// The new text.
        delta: String,
    },
    /// A text block closed.
    TextEnd {
        /// Block index.
        content_index: usize,
        /// The whole block's text, shared with the message (not a copy).
        content: Arc<String>,
    },
    /// A thinking block opened.
    ThinkingStart {
        /// Block index.
        content_index: usize,
    },
    /// More reasoning.
    ThinkingDelta {
        /// Block index.
        content_index: usize,
        /// The new text.
        delta: String,
    },
    /// A thinking block closed.
    ThinkingEnd {
        /// Block index.
        content_index: usize,
        /// The whole block's text, shared with the message (not a copy).
        content: Arc<String>,
    },
    /// A tool call opened.
    ToolCallStart {
        /// Block index.
        content_index: usize,
        /// Call id (may be empty until the provider sends it).
        id: String,
        /// Tool name (may be empty until the provider sends it).
        name: String,
    },
    /// A raw argument fragment.
    ToolCallDelta {
        /// Block index.
        content_index: usize,
        /// The fragment as received.
        delta: String,
        /// Where the fragment changed the call's partial arguments (what
        /// `AssistantStream::partial().tool_call(content_index)` shows), as a JSON Pointer
        /// (RFC 6901, for `Value::pointer`): the longest path that every change lies under,
        /// `""` for changes in several places, `None` when the shown arguments did not change.
        /// See [`PartialJson::changed`](crate::raw::partial_json::PartialJson::changed).
        changed: Option<Arc<str>>,
    },
    /// A tool call closed with its final arguments.
    ToolCallEnd {
        /// Block index.
        content_index: usize,
        /// The final call, shared with the message (not a copy).
        tool_call: Arc<ToolCall>,
    },
    /// An opaque provider block arrived whole (see [`ProviderContent`]); it is for
    /// display and replay, never executed.
    ProviderContent {
        /// Block index.
        content_index: usize,
        /// The block (boxed, as the message of `Done`).
        content: Box<ProviderContent>,
    },
    /// Terminal: success.
    Done {
        /// `stop`, `length` or `toolUse`; equals `message.stop_reason`.
        reason: StopReason,
        /// The final message (boxed: every event is moved through the stream's layers, and
        /// an inline message made each of them 464 bytes; now 56).
        message: Box<AssistantMessage>,
    },
    /// Terminal: failure or cancellation.
    Error {
        /// `error` or `aborted`; equals `message.stop_reason`.
        reason: StopReason,
        /// The partial message with `error_message` set (boxed, as in `Done`).
        message: Box<AssistantMessage>,
        /// The typed error (boxed, as the message).
        error: Box<Error>,
    },
}

impl AssistantEvent {
    /// Whether this event ends the stream.
    pub fn is_terminal(&self) -> bool {
        matches!(self, AssistantEvent::Done { .. } | AssistantEvent::Error { .. })
    }
}

/// A provider-chosen key that identifies one content block on the wire
/// (Anthropic's block index, a Chat Completions `tool_calls[].index`, a Responses
/// `output_index`, ...). The assembler maps keys to content indexes.
pub type BlockKey = u64;

/// A provider-neutral streaming delta. Provider crates translate wire events into
/// these; [`crate::raw::MessageAssembler`] turns them into [`AssistantEvent`]s and the
/// final message.
///
/// A content delta for a key with no open block opens one; a block stays open
/// until [`Delta::BlockEnd`] for its key or the end of the stream.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Delta {
    /// Response metadata (id, served model). Emits `start` if not yet emitted.
    Metadata {
        /// Provider response id.
        response_id: Option<String>,
        /// Served model id.
        response_model: Option<String>,
    },
    /// Text for block `key`.
    Text {
        /// Block key.
        key: BlockKey,
        /// The text.
        text: String,
    },
    /// Opaque signature for text block `key` (replaces any earlier one).
    TextSignature {
        /// Block key.
        key: BlockKey,
        /// The signature.
        signature: String,
    },
    /// Reasoning text for block `key`.
    Thinking {
        /// Block key.
        key: BlockKey,
        /// The text.
        text: String,
    },
    /// Signature for thinking block `key`; appended to what came before.
    ThinkingSignature {
        /// Block key.
        key: BlockKey,
        /// The signature fragment.
        signature: String,
    },
    /// A redacted thinking block (encrypted payload, no readable text).
    RedactedThinking {
        /// Block key.
        key: BlockKey,
        /// The encrypted payload.
        data: String,
    },
    /// A tool call opens. `arguments` is input the provider sent whole at the start;
    /// it is kept if no fragment follows.
    ToolCallStart {
        /// Block key.
        key: BlockKey,
        /// Call id (may be empty and filled later by [`Delta::ToolCallMeta`]).
        id: String,
        /// Tool name (may be empty and filled later).
        name: String,
        /// Arguments given whole at the start, if any.
        arguments: Option<Value>,
    },
    /// Late call metadata (Chat Completions sends id and name in any chunk).
    ToolCallMeta {
        /// Block key.
        key: BlockKey,
        /// Call id, if this chunk carries one.
        id: Option<String>,
        /// Tool name, if this chunk carries one.
        name: Option<String>,
        /// Google thought signature, if this chunk carries one.
        thought_signature: Option<String>,
    },
    /// A raw argument fragment for tool call `key`.
    ToolCallArgs {
        /// Block key.
        key: BlockKey,
        /// The fragment.
        fragment: String,
    },
    /// Complete arguments text for call `key`: replaces the fragments when it is
    /// longer, appending only the missing suffix (Responses `.done`).
    ToolCallArgsDone {
        /// Block key.
        key: BlockKey,
        /// The complete arguments text.
        arguments: String,
    },
    /// The whole arguments of call `key`, sent at once and already parsed (Gemini sends
    /// `args` as an object): they replace any fragments, `text` (the arguments as received)
    /// becomes one `toolcall_delta`, and nothing is parsed again. A non-object is `{}`.
    ToolCallArgsWhole {
        /// Block key.
        key: BlockKey,
        /// The arguments' JSON text as received.
        text: String,
        /// The parsed arguments.
        arguments: Value,
    },
    /// A whole opaque provider block at `key` (closes any block open there).
    ProviderContent {
        /// Block key.
        key: BlockKey,
        /// The block.
        content: ProviderContent,
    },
    /// Block `key` is complete.
    BlockEnd {
        /// Block key.
        key: BlockKey,
    },
    /// Usage so far (replaces the previous figures; cost is computed by the assembler).
    Usage(Usage),
    /// The stop reason (the last one wins).
    Stop(StopReason),
    /// Terminal: the stream ended normally. Open blocks are closed in index order.
    Done,
    /// Terminal: the stream failed. Partial content is kept.
    Error(Error),
}
