//! The clawcall agent loop.
//!
//! An [`Agent`] streams an assistant response from any [`llm_core::Provider`],
//! resolves each tool call (including deferred tools), prepares and validates its
//! arguments, runs `before`/`after` hooks, executes the batch in parallel or
//! sequentially with streamed progress, writes the results back in call order
//! and requests again, until the model stops calling tools, a batch terminates,
//! a hook stops it, the turn limit is reached, or the run is aborted.
//!
//! Invariant: every tool call in the transcript gets exactly
//! one tool result, whatever happens: unknown tool, blocked, invalid arguments,
//! error, panic, abort, or a call cut off by the token limit.
//! [`check_tool_results`] checks it.
//!
//! Every callback is untrusted: hooks, argument shims,
//! deferred resolvers, tools and the provider may panic or hang; the loop
//! contains them where it calls them, and every run ends with exactly one
//! [`AgentEvent::AgentEnd`], after which nothing is delivered.
//!
//! Tools come from a plan: [`ToolCatalog`] builds the [`AgentContext`] from
//! `tool-planner` descriptors and an executor registry, and [`PlannedHooks`]
//! keeps every request's tools equal to the plan.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod catalog;
mod context;
mod event;
mod hooks;
mod machine;
mod output;
mod queue;
mod run;
pub mod spans;
mod tool;

pub use catalog::{CatalogError, PlannedHooks, PlannedTools, SharedEnv, ToolCatalog};
pub use context::{AgentContext, MessageQueue, QueueMode};
pub use event::{AgentEvent, EndReason};
pub use hooks::{
    AfterToolCall, AgentHooks, BeforeToolCall, CallInfo, NoHooks, TurnInfo, TurnUpdate,
};
pub use llm_core::transform::{TranscriptViolation, check_tool_results};
pub use machine::{
    AgentMachine, Answer, Approval, CallRef, Command, DENIED_TEXT, INCOMPLETE_TEXT, Input,
    MachineSettings, Output, RequestFailure, RestoreError, STATE_VERSION, TurnChange,
};
pub use output::{
    ANSWER_GIVEN_TEXT, ANSWER_RECEIVED_TEXT, AgentOutput, FINAL_ANSWER_PROMPT, OutputTurn,
    TypedOutcome, TypedRun,
};
pub use run::{
    ABORTED_TEXT, Agent, AgentConfig, AgentError, AgentOutcome, AgentRun, Approvals, BLOCKED_TEXT,
    ContinueError, DEFAULT_ABORT_GRACE,
};
pub use tool::{
    AgentTool, ExecutionMode, PrepareArguments, ProgressSink, ToolError, ToolExecutor,
    ToolInvocation, ToolOutput,
};
