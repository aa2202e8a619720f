//! Events of an agent run (OpenClaw §5.1).

use llm_core::{AssistantEvent, AssistantMessage, Message, ToolResultMessage};
use serde_json::Value;

use crate::tool::ToolOutput;

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

/// One event of an agent run, in the order of OpenClaw §5 / §8 #47.
#[derive(Debug, Clone, PartialEq)]
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
