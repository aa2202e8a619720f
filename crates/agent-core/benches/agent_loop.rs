//! Loop overhead per tool call, and wall time of a parallel batch.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, reason = "benchmark")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::*;
use criterion::{Criterion, criterion_group, criterion_main};
use llm_core::{
    AssistantContent, AssistantMessage, Message, Model, StopReason, TextContent, Tool, ToolCall,
    raw::{ScriptedProvider, ScriptedTurn},
};
use serde_json::json;

fn model() -> Model {
    Model {
        id: "bench".into(),
        api: "scripted".into(),
        provider: "scripted".into(),
        ..Model::default()
    }
}

fn script(calls: usize, tool: &str) -> Vec<ScriptedTurn> {
    let call_turn = AssistantMessage {
        content: (0..calls)
            .map(|i| {
                AssistantContent::ToolCall(ToolCall {
                    id: format!("call_{i}"),
                    name: tool.into(),
                    arguments: json!({"n": i}),
                    thought_signature: None,
                    arguments_incomplete: false,
                })
            })
            .collect(),
        stop_reason: StopReason::ToolUse,
        ..AssistantMessage::default()
    };
    let done = AssistantMessage {
        content: vec![AssistantContent::Text(TextContent {
            text: "done".into(),
            text_signature: None,
        })],
        stop_reason: StopReason::Stop,
        ..AssistantMessage::default()
    };
    vec![ScriptedTurn::from_message(&call_turn, 64), ScriptedTurn::from_message(&done, 64)]
}

fn tool(name: &str, sleep: Option<Duration>) -> AgentTool {
    AgentTool::new(
        Tool {
            name: name.into(),
            description: "bench".into(),
            parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        },
        move |_inv: ToolInvocation| async move {
            if let Some(d) = sleep {
                tokio::time::sleep(d).await;
            }
            Ok(ToolOutput::text("ok"))
        },
    )
}

async fn run_once(calls: usize, sleep: Option<Duration>) -> AgentOutcome {
    let provider = ScriptedProvider::new("scripted", script(calls, "t"));
    let agent = Agent::new(AgentConfig::new(model(), Arc::new(provider)));
    let ctx = AgentContext { system_prompt: None, messages: vec![], tools: vec![tool("t", sleep)] };
    agent.run(ctx, vec![Message::user("go")]).finish().await
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let mut group = c.benchmark_group("agent_loop");
    group.sample_size(20);
    const CALLS: usize = 200;
    group.bench_function("overhead_200_instant_calls", |b| {
        b.iter(|| rt.block_on(run_once(CALLS, None)));
    });
    group.bench_function("eight_parallel_100ms_tools", |b| {
        b.iter(|| rt.block_on(run_once(8, Some(Duration::from_millis(100)))));
    });
    group.finish();

    // Print the per-call figure directly, for docs/benchmarks.md: it must not
    // grow with the batch size (linear loop).
    for calls in [1usize, 10, 100, 1000] {
        let runs = (2000 / calls).max(5) as u32;
        let start = Instant::now();
        for _ in 0..runs {
            rt.block_on(run_once(calls, None));
        }
        let per_call = start.elapsed() / (runs * calls as u32);
        println!(
            "agent_loop: {per_call:?} per instant tool call ({calls} calls per batch, scripted provider)"
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
