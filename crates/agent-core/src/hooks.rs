//! Hooks: points where the application steers the loop.
//!
//! Every hook is untrusted: a hook that panics, in its
//! synchronous part or in the future it returns, is contained where it is
//! called. A tool-call hook's panic becomes that call's error result; a
//! turn-level hook's panic ends the run with [`crate::AgentError`], and the run
//! still ends with exactly one `AgentEnd`.

use futures_util::future::BoxFuture;
use llm_core::{
    ApiKey, AssistantMessage, Message, Model, StreamOptions, ToolCall, ToolResultMessage,
};
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
    /// Ask a person: the call waits (the rest of the batch goes on) until an
    /// approve or deny decision arrives ([`crate::AgentRun::approvals`]); a
    /// denial's reason becomes the error result.
    Ask {
        /// Shown to the person.
        reason: String,
    },
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

/// What `prepare_next_turn` sees: the run as it stands before a request.
#[derive(Debug, Clone, Copy)]
pub struct TurnInfo<'a> {
    /// Requests made so far in this run (0 before the first).
    pub turn: u32,
    /// The stored transcript and the tools that the next request would offer.
    pub context: &'a AgentContext,
    /// Messages this run added so far.
    pub new_messages: &'a [Message],
    /// The model the next request would use.
    pub model: &'a Model,
}

/// Replacements for the next request, returned by `prepare_next_turn`.
/// Each replacement stays in force for later turns until replaced again
/// (OpenClaw's `prepareNextTurn` swaps the context the same way).
#[derive(Debug, Clone, Default)]
pub struct TurnUpdate {
    /// Replaces the model.
    pub model: Option<Model>,
    /// Replaces the system prompt (`Some(None)` removes it).
    pub system_prompt: Option<Option<String>>,
    /// Replaces the request options (the run's cancellation token is kept).
    pub options: Option<StreamOptions>,
    /// Replaces the visible tools, in request order. Names must be unique.
    pub tools: Option<Vec<AgentTool>>,
}

/// Application hooks. Every method has a default that does nothing, so
/// implement only what you need.
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

    /// Runs after a tool actually executed (never for calls that did not run);
    /// may override the result or stop the run.
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

    /// Called before every request (OpenClaw's `prepareNextTurn`): may
    /// replace the model, the system prompt, the options and the visible tools.
    fn prepare_next_turn<'a>(&'a self, _info: TurnInfo<'a>) -> BoxFuture<'a, Option<TurnUpdate>> {
        Box::pin(std::future::ready(None))
    }

    /// Rewrites the transcript sent with the next request (pruning,
    /// summarizing); the stored transcript is never changed. `None` sends it as
    /// stored.
    fn transform_context<'a>(
        &'a self,
        _messages: &'a [Message],
    ) -> BoxFuture<'a, Option<Vec<Message>>> {
        Box::pin(std::future::ready(None))
    }

    /// The API key for the next request to `provider`, resolved per request so
    /// expiring tokens can refresh (OpenClaw's `getApiKey`). `Ok(None)` uses
    /// the configured key; an error ends the run.
    fn api_key<'a>(
        &'a self,
        _provider: &'a str,
    ) -> BoxFuture<'a, Result<Option<ApiKey>, ToolError>> {
        Box::pin(std::future::ready(Ok(None)))
    }
}

/// Hooks that do nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl AgentHooks for NoHooks {}
