//! Events of an agent run (OpenClaw's, in its order).

use llm_core::{AssistantEvent, AssistantMessage, Message, ToolResultMessage};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tool::ToolOutput;

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The assistant answered without tool calls.
    Completed,
    /// Every result of the last batch asked to terminate.
    Terminated,
    /// An `after_tool_call` hook asked to stop after the batch.
    StopAfterBatch,
    /// `should_stop_after_turn` returned true.
    StopHook,
    /// The assistant stopped at the output token limit (its calls were not executed).
    Length,
    /// The configured maximum number of turns was reached.
    MaxTurns,
    /// The provider failed.
    Error,
    /// The run was cancelled.
    Aborted,
    /// The run could not go on: an invalid context (duplicate tool names) or a
    /// failing turn-level hook; `AgentOutcome::error` says which.
    Failed,
}

/// One event of an agent run, in OpenClaw's order.
///
/// Serializes as one JSON object per event, tagged by `type`
/// (`agent_start`, `message_update`, ...), for UIs and JSON-lines logs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// The run started.
    AgentStart,
    /// The run ended; exactly one per run, always last.
    AgentEnd {
        /// Messages added by this run.
        messages: Vec<Message>,
        /// Why it ended.
        reason: EndReason,
    },
    /// A turn (injected messages + one response + its tools) started.
    TurnStart,
    /// A turn ended.
    TurnEnd {
        /// The assistant message of the turn.
        message: AssistantMessage,
        /// Its tool results, in call order.
        tool_results: Vec<ToolResultMessage>,
    },
    /// A message entered the transcript (assistant: streaming started).
    MessageStart {
        /// The message (for the assistant: as of its first event).
        message: Message,
    },
    /// A streamed assistant event (a delta: read text by accumulating).
    MessageUpdate {
        /// The provider event.
        #[serde(serialize_with = "serialize_assistant_event")]
        event: AssistantEvent,
    },
    /// A message is complete.
    MessageEnd {
        /// The final message.
        message: Message,
    },
    /// A tool call is being prepared.
    ToolExecutionStart {
        /// Call id.
        tool_call_id: String,
        /// Tool name.
        tool_name: String,
        /// The raw arguments from the model.
        args: Value,
    },
    /// A call that `before_tool_call` asked a person about waits for a decision
    /// ([`crate::AgentRun::approvals`]); the rest of the batch goes on.
    ApprovalRequested {
        /// Call id.
        tool_call_id: String,
        /// Tool name.
        tool_name: String,
        /// The validated arguments the call would run with.
        args: Value,
        /// Why the hook asks, for the person.
        reason: String,
    },
    /// A call's tool really starts (a parallel batch announces every call with
    /// `ToolExecutionStart` first; calls beyond the concurrency limit start later).
    ToolExecutionRunning {
        /// Call id.
        tool_call_id: String,
        /// Tool name.
        tool_name: String,
    },
    /// Partial progress from a running tool.
    ToolExecutionUpdate {
        /// Call id.
        tool_call_id: String,
        /// Tool name.
        tool_name: String,
        /// The partial result.
        partial: ToolOutput,
    },
    /// A call finished (in completion order for parallel batches).
    ToolExecutionEnd {
        /// Call id.
        tool_call_id: String,
        /// Tool name.
        tool_name: String,
        /// The result.
        result: ToolOutput,
        /// Whether it is an error result.
        is_error: bool,
        /// Whether the tool's code actually ran.
        execution_started: bool,
    },
}

/// `{"type": "text_delta", "content_index": 0, "delta": "..."}`: the streamed
/// event without the final message (terminal events never reach `MessageUpdate`;
/// the message arrives in `MessageEnd`).
fn serialize_assistant_event<S: Serializer>(
    event: &AssistantEvent,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut map = serializer.serialize_map(None)?;
    match event {
        AssistantEvent::Start => map.serialize_entry("type", "start")?,
        AssistantEvent::TextStart { content_index } => {
            map.serialize_entry("type", "text_start")?;
            map.serialize_entry("content_index", content_index)?;
        }
        AssistantEvent::TextDelta { content_index, delta } => {
            map.serialize_entry("type", "text_delta")?;
            map.serialize_entry("content_index", content_index)?;
            map.serialize_entry("delta", delta)?;
        }
        AssistantEvent::TextEnd { content_index, .. } => {
            map.serialize_entry("type", "text_end")?;
            map.serialize_entry("content_index", content_index)?;
        }
        AssistantEvent::ThinkingStart { content_index } => {
            map.serialize_entry("type", "thinking_start")?;
            map.serialize_entry("content_index", content_index)?;
        }
        AssistantEvent::ThinkingDelta { content_index, delta } => {
            map.serialize_entry("type", "thinking_delta")?;
            map.serialize_entry("content_index", content_index)?;
            map.serialize_entry("delta", delta)?;
        }
        AssistantEvent::ThinkingEnd { content_index, .. } => {
            map.serialize_entry("type", "thinking_end")?;
            map.serialize_entry("content_index", content_index)?;
        }
        AssistantEvent::ToolCallStart { content_index, id, name } => {
            map.serialize_entry("type", "toolcall_start")?;
            map.serialize_entry("content_index", content_index)?;
            map.serialize_entry("id", id)?;
            map.serialize_entry("name", name)?;
        }
        AssistantEvent::ToolCallDelta { content_index, delta, changed } => {
            map.serialize_entry("type", "toolcall_delta")?;
            map.serialize_entry("content_index", content_index)?;
            map.serialize_entry("delta", delta)?;
            if let Some(pointer) = changed {
                map.serialize_entry("changed", &**pointer)?;
            }
        }
        AssistantEvent::ToolCallEnd { content_index, tool_call } => {
            map.serialize_entry("type", "toolcall_end")?;
            map.serialize_entry("content_index", content_index)?;
            map.serialize_entry("tool_call", tool_call.as_ref())?;
        }
        AssistantEvent::ProviderContent { content_index, content } => {
            map.serialize_entry("type", "provider_content")?;
            map.serialize_entry("content_index", content_index)?;
            map.serialize_entry("content", content)?;
        }
        AssistantEvent::Done { reason, .. } => {
            map.serialize_entry("type", "done")?;
            map.serialize_entry("reason", reason)?;
        }
        AssistantEvent::Error { reason, error, .. } => {
            map.serialize_entry("type", "error")?;
            map.serialize_entry("reason", reason)?;
            map.serialize_entry("error", &error.to_string())?;
        }
        _ => map.serialize_entry("type", "other")?,
    }
    map.end()
}
