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
//! reset by progress), a malformed JSON-RPC line, an unknown tool or a JSON-RPC
//! error gives that call an error result that says what happened. A server
//! whose connection died is started again on its next call or at
//! [`McpServers::refresh`], at most [`McpServerConfig::max_restarts`] times;
//! while it is down its tools are hidden by the planner (their availability
//! requires [`availability_key`] to be [`SERVER_UP`]).
//!
//! See `docs/mcp.md`.
#![warn(missing_docs)]

mod config;
mod content;
mod error;
pub mod names;
mod server;
mod servers;

pub use config::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_RESTARTS, MAX_SERVER_ID_LEN,
    McpServerConfig, McpTransport,
};
pub use content::{EMPTY_RESULT_TEXT, map_call_result};
pub use error::McpError;
pub use names::{McpToolRef, ToolNameMap};
pub use server::{MAX_LINE_BYTES, ServerStatus};
pub use servers::{McpServers, McpToolSet, SERVER_DOWN, SERVER_UP, availability_key};
