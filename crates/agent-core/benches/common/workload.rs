//! The scale workload, shared by the `scale` bench (RSS and CPU) and the
//! `scale_heap` bench (heap bytes by allocation site).
//!
//! A generating provider answers each run with `SCALE_TOOL_TURNS` (default 2)
//! turns of two parallel tool calls, then text; each tool sleeps 50 ms.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agent_core::{
    Agent, AgentConfig, AgentContext, AgentEvent, AgentOutcome, AgentRun, AgentTool, EndReason,
    ToolInvocation, ToolOutput, check_tool_results,
};
use futures_util::StreamExt;
use llm_core::{
    AssistantContent, AssistantMessage, AssistantStream, Context, Message, Model, Provider,
    StopReason, StreamOptions, TextContent, Tool, ToolCall, raw::ScriptedTurn,
};
use serde_json::json;

/// Tool turns per run in the concurrent workload: `SCALE_TOOL_TURNS`, default 2.
pub(crate) fn tool_turns() -> usize {
    static TURNS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *TURNS.get_or_init(|| {
        std::env::var("SCALE_TOOL_TURNS").ok().and_then(|v| v.parse().ok()).unwrap_or(2)
    })
}
/// Parallel calls per tool turn.
pub(crate) const CALLS_PER_TURN: usize = 2;

/// Answers with `tool_turns` tool turns (`calls` calls each), then text; reads
/// only the last few messages, so it costs the same every turn.
pub(crate) struct Generating {
    tool_turns: usize,
    tools: ScriptedTurn,
    text: ScriptedTurn,
}

impl Generating {
    pub(crate) fn new(tool_turns: usize, calls: usize) -> Self {
        let tools = AssistantMessage {
            content: (0..calls)
                .map(|i| {
                    AssistantContent::ToolCall(ToolCall {
                        id: format!("call_{i}"),
                        name: "work".into(),
                        arguments: json!({"n": i}),
                        thought_signature: None,
                        arguments_incomplete: false,
                    })
                })
                .collect(),
            stop_reason: StopReason::ToolUse,
            ..AssistantMessage::default()
        };
        let text = AssistantMessage {
            content: vec![AssistantContent::Text(TextContent {
                text: "All done.".into(),
                text_signature: None,
            })],
            stop_reason: StopReason::Stop,
            ..AssistantMessage::default()
        };
        Generating {
            tool_turns,
            tools: ScriptedTurn::from_message(&tools, 64),
            text: ScriptedTurn::from_message(&text, 64),
        }
    }
}

impl Provider for Generating {
    fn api(&self) -> &str {
        "scripted"
    }
    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        // Count from the end: O(1) per request however long the transcript.
        let turn = context
            .messages
            .iter()
            .rev()
            .take(4)
            .find_map(|m| match m {
                Message::ToolResult(r) => r.tool_call_id.split('#').nth(1)?.parse::<usize>().ok(),
                _ => None,
            })
            .map_or(0, |t| t + 1);
        let turn_deltas = if turn < self.tool_turns { &self.tools } else { &self.text };
        let mut deltas = turn_deltas.deltas.clone();
        // Make call ids unique per turn (`call_0#3`), as a real provider does.
        for d in &mut deltas {
            if let llm_core::raw::Delta::ToolCallStart { id, .. } = d {
                *id = format!("{id}#{turn}");
            }
        }
        AssistantStream::new(model, &options.cancel, futures_util::stream::iter(deltas))
    }
}

pub(crate) fn model() -> Model {
    Model {
        id: "gen".into(),
        api: "scripted".into(),
        provider: "scripted".into(),
        ..Model::default()
    }
}

pub(crate) fn work_tool(sleep: Duration) -> AgentTool {
    AgentTool::new(
        Tool {
            name: "work".into(),
            description: "works".into(),
            parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        },
        move |_inv: ToolInvocation| async move {
            if !sleep.is_zero() {
                tokio::time::sleep(sleep).await;
            }
            Ok(ToolOutput::text("done"))
        },
    )
}

/// The agent of the concurrent workload.
pub(crate) fn agent() -> Agent {
    Agent::new(AgentConfig::new(model(), Arc::new(Generating::new(tool_turns(), CALLS_PER_TURN))))
}

/// Starts run `i` of the concurrent workload.
pub(crate) fn start_run(agent: &Agent, tools: &[AgentTool], i: usize) -> AgentRun {
    let context = AgentContext { system_prompt: None, messages: Vec::new(), tools: tools.to_vec() };
    agent.run(context, vec![Message::user(format!("job {i}"))])
}

/// Reads a run's events to the end and counts it in `ok` if its invariants
/// hold: exactly one `AgentEnd`, last; completed; every call answered.
pub(crate) async fn check_run(mut run: AgentRun, ok: Arc<AtomicUsize>) -> Option<AgentOutcome> {
    let mut ends = 0;
    let mut last_was_end = false;
    while let Some(event) = run.next().await {
        last_was_end = matches!(event, AgentEvent::AgentEnd { .. });
        ends += usize::from(last_was_end);
    }
    let outcome = run.finish().await;
    let fine = ends == 1
        && last_was_end
        && outcome.reason == EndReason::Completed
        && outcome.messages().len() == 1 + tool_turns() * (1 + CALLS_PER_TURN) + 1
        && check_tool_results(outcome.messages()).is_empty();
    if fine {
        ok.fetch_add(1, Ordering::Relaxed);
    }
    // Kept until the run is joined, as a program that collects its runs' outcomes does.
    Some(outcome)
}
