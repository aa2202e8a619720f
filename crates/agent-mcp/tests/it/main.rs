//! agent-mcp integration tests: the fault server (`mcp-fault-server`, rmcp's
//! server side), the npm reference servers, streamable HTTP, and the agent
//! loop end to end through every provider on loopback.
#![allow(clippy::disallowed_methods, reason = "tests read their own process environment")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]

mod e2e;
mod faults;
mod hostile;
mod http;
mod reference;
mod spans;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agent_core::{
    Agent, AgentConfig, AgentContext, AgentEvent, AgentTool, EndReason, ProgressSink, ToolError,
    ToolInvocation, ToolOutput,
};
use agent_mcp::{McpServerConfig, McpTransport};
use llm_core::{
    AssistantContent, AssistantMessage, CancellationToken, Message, Model, StopReason, TextContent,
    ToolCall, ToolResultMessage, UserContent,
    raw::{ScriptedProvider, ScriptedTurn},
};
use serde_json::Value;

/// A fresh, empty folder under the system temp dir.
pub(crate) fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "agent-mcp-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The fault server, logging the cancellations it honours to the returned file.
pub(crate) fn fault_server(id: &str) -> (McpServerConfig, PathBuf) {
    let log = temp_dir("log").join("cancelled.log");
    let mut config =
        McpServerConfig::stdio(id, env!("CARGO_BIN_EXE_mcp-fault-server"), Vec::<String>::new())
            .with_connect_timeout(Duration::from_secs(20));
    if let McpTransport::Stdio { env, .. } = &mut config.transport {
        env.insert("FAULT_SERVER_LOG".into(), log.display().to_string());
    }
    (config, log)
}

/// Waits up to 5 s for `path` to contain `needle`.
pub(crate) async fn wait_for_file(path: &PathBuf, needle: &str) -> String {
    for _ in 0..100 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} never contained {needle:?}", path.display());
}

/// Runs a tool outside the loop.
pub(crate) async fn invoke(tool: &AgentTool, arguments: Value) -> Result<ToolOutput, ToolError> {
    tool.executor
        .execute(ToolInvocation {
            call_id: "call-1".into(),
            arguments,
            cancel: CancellationToken::new(),
            progress: ProgressSink::disconnected(),
            idempotency_key: None,
        })
        .await
}

/// The text blocks of some content, joined by newlines.
pub(crate) fn text_of(content: &[UserContent]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            UserContent::Text(t) => Some(t.text.as_str()),
            UserContent::Image(_) => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn scripted_model() -> Model {
    Model {
        id: "scripted-1".into(),
        api: "scripted".into(),
        provider: "scripted".into(),
        ..Model::default()
    }
}

/// An assistant turn calling `name` with `args`.
pub(crate) fn tool_turn(id: &str, name: &str, args: Value) -> ScriptedTurn {
    let message = AssistantMessage {
        content: vec![AssistantContent::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args,
            thought_signature: None,
            arguments_incomplete: false,
        })],
        stop_reason: StopReason::ToolUse,
        ..AssistantMessage::default()
    };
    ScriptedTurn::from_message(&message, 5)
}

/// An assistant turn answering `text`.
pub(crate) fn text_turn(text: &str) -> ScriptedTurn {
    let message = AssistantMessage {
        content: vec![AssistantContent::Text(TextContent {
            text: text.into(),
            text_signature: None,
        })],
        stop_reason: StopReason::Stop,
        ..AssistantMessage::default()
    };
    ScriptedTurn::from_message(&message, 7)
}

/// An agent on a scripted provider.
pub(crate) fn scripted_agent(turns: Vec<ScriptedTurn>) -> Agent {
    let provider = ScriptedProvider::new("scripted", turns);
    Agent::new(AgentConfig::new(scripted_model(), Arc::new(provider)))
}

/// The end event's messages and reason (asserting there is exactly one, last).
pub(crate) fn end(events: &[AgentEvent]) -> (Vec<Message>, EndReason) {
    let ends: Vec<_> = events.iter().filter(|e| matches!(e, AgentEvent::AgentEnd { .. })).collect();
    assert_eq!(ends.len(), 1, "exactly one agent_end");
    match ends[0] {
        AgentEvent::AgentEnd { messages, reason } => (messages.clone(), *reason),
        _ => unreachable!(),
    }
}

pub(crate) fn results(messages: &[Message]) -> Vec<ToolResultMessage> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

pub(crate) fn context(tools: Vec<AgentTool>) -> AgentContext {
    AgentContext { system_prompt: None, messages: vec![], tools }
}
