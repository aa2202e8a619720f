//! Hooks: points where the application steers the loop.

use futures_util::future::BoxFuture;
use llm_core::{AssistantMessage, ToolCall, ToolResultMessage};
use serde_json::Value;

use crate::context::AgentContext;
use crate::tool::{AgentTool, ToolError, ToolOutput};

/// What `before_tool_call` decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum BeforeToolCall {
    /// Run the tool.
    #[default]
    Allow,
    /// Do not run it; the reason (or `Tool execution was blocked`) becomes the error result.
    Block(Option<String>),
}

/// Field-by-field overrides returned by `after_tool_call` (no deep merge).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AfterToolCall {
    /// Replaces the content.
    pub content: Option<Vec<llm_core::UserContent>>,
    /// Replaces the details.
    pub details: Option<Value>,
    /// Replaces the error flag.
    pub is_error: Option<bool>,
    /// Replaces `terminate`.
    pub terminate: Option<bool>,
    /// Stop the run after this batch (results are still written).
    pub stop_after_batch: bool,
}

/// The call a hook is asked about.
#[derive(Debug, Clone, Copy)]
pub struct CallInfo<'a> {
    /// The assistant message that made the call.
    pub assistant: &'a AssistantMessage,
    /// The call as the model made it.
    pub call: &'a ToolCall,
    /// The transcript and tools as of this batch.
    pub context: &'a AgentContext,
}

/// Application hooks. Every method has a default that does nothing, so
/// implement only what you need. A hook that panics becomes an error result for
/// that call; it never takes the loop down.
pub trait AgentHooks: Send + Sync {
    /// Supplies a tool that is not in the context (deferred loading). Called at
    /// most once per call. `Ok(None)` = not found.
    fn resolve_deferred_tool<'a>(
        &'a self,
        _info: CallInfo<'a>,
    ) -> BoxFuture<'a, Result<Option<AgentTool>, ToolError>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// Runs after validation, before execution; may block the call.
    fn before_tool_call<'a>(
        &'a self,
        _info: CallInfo<'a>,
        _args: &'a Value,
    ) -> BoxFuture<'a, BeforeToolCall> {
        Box::pin(std::future::ready(BeforeToolCall::Allow))
    }

    /// Runs after execution; may override the result or stop the run.
    fn after_tool_call<'a>(
        &'a self,
        _info: CallInfo<'a>,
        _result: &'a ToolOutput,
        _is_error: bool,
    ) -> BoxFuture<'a, Option<AfterToolCall>> {
        Box::pin(std::future::ready(None))
    }

    /// Asked after each turn: stop the run now?
    fn should_stop_after_turn(
        &self,
        _message: &AssistantMessage,
        _results: &[ToolResultMessage],
    ) -> bool {
        false
    }
}

/// Hooks that do nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl AgentHooks for NoHooks {}
