//! Tools from [Model Context Protocol](https://modelcontextprotocol.io) servers,
//! planned and run like any other agent tool.
//!
//! [`McpServers::connect`] starts stdio servers (child processes) and connects
//! to streamable HTTP servers through the official SDK (`rmcp`), and lists
//! their tools (every page). [`McpServers::tools`] gives, per tool, a
//! `tool-planner` descriptor (owner and executor `Mcp`, the server's JSON
//! Schema, a name valid for every provider: see [`names`]) and an
//! [`agent_core::AgentTool`] whose execution is a `tools/call`.
//!
//! Failures stay inside the agent loop: a crash, a hang (per-call timeout,
//! reset by progress, and an absolute deadline), an over-long message, an
//! unknown tool or a JSON-RPC error gives that call an error result that says
//! what happened; a stray stdout line that is not JSON-RPC fails no call. A server
//! whose connection died is started again on its next call or at
//! [`McpServers::refresh`], with exponential backoff, at most
//! [`McpServerConfig::max_restarts`] times within
//! [`McpServerConfig::restart_window`]; while it is down its tools are hidden
//! by the planner (their availability requires [`availability_key`] to be
//! [`SERVER_UP`]). What a server sends is bounded by [`McpLimits`]; a stdio
//! server gets only [`SAFE_ENV_VARS`] of this process's environment.
//!
//! See `docs/mcp.md`.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The `_meta` key under which a `tools/call` carries the call's idempotency
/// key (`ToolInvocation::idempotency_key`, set by a durable run): the same on
/// every retry of the call, so a server can apply its effect once.
pub const IDEMPOTENCY_KEY_META: &str = "io.clawcall/idempotencyKey";

mod config;
mod content;
mod error;
pub mod names;
mod server;
mod servers;

pub use config::{
    Clock, DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_IMAGE_BYTES,
    DEFAULT_MAX_RESTARTS, DEFAULT_RESTART_BACKOFF, DEFAULT_RESTART_WINDOW, MAX_RESTART_BACKOFF,
    MAX_SERVER_ID_LEN, McpLimits, McpServerConfig, McpTransport, SAFE_ENV_VARS, SystemClock,
};
pub use content::{EMPTY_RESULT_TEXT, map_call_result, map_call_result_with_limits};
pub use error::McpError;
pub use names::{McpToolRef, ToolNameMap};
pub use server::ServerStatus;
pub use servers::{McpServers, McpToolSet, SERVER_DOWN, SERVER_UP, availability_key};
