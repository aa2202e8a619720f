//! Cost of the step interface in process: the same run (one batch of 200 instant
//! tool calls, then text) with the plain provider and tools, and with both
//! wrapped in the pass-through journal (records nothing, so the wrappers call
//! straight through), and wrapped in an in-memory journal that records every
//! step as JSON (the cost a durable journal adds before any IO).
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, reason = "benchmark")]

use std::sync::Arc;

use agent_core::*;
use std::sync::Mutex;

use agent_restate::{Effect, Journal, JournaledProvider, PassThrough, StepError, journaled_tool};
use criterion::{Criterion, criterion_group, criterion_main};
use futures_util::future::BoxFuture;
use llm_core::raw::scripted::{ScriptedProvider, ScriptedTurn};
use llm_core::{
    AssistantContent, AssistantMessage, Message, Model, StopReason, TextContent, Tool, ToolCall,
};
use serde_json::Value;
use serde_json::json;

const CALLS: usize = 200;

/// Records every step's JSON result in memory.
#[derive(Default)]
struct Recording(Arc<Mutex<Vec<Value>>>);

impl Journal for Recording {
    fn step(&self, name: String, effect: Effect) -> BoxFuture<'static, Result<Value, StepError>> {
        let this = self.0.clone();
        Box::pin(async move {
            let value =
                effect().await.map_err(|message| StepError::Failed { step: name, message })?;
            if let Ok(mut entries) = this.lock() {
                entries.push(value.clone());
            }
            Ok(value)
        })
    }
}

fn model() -> Model {
    Model {
        id: "bench".into(),
        api: "scripted".into(),
        provider: "scripted".into(),
        ..Model::default()
    }
}

fn script() -> Vec<ScriptedTurn> {
    let calls = AssistantMessage {
        content: (0..CALLS)
            .map(|i| {
                AssistantContent::ToolCall(ToolCall {
                    id: format!("call_{i}"),
                    name: "t".into(),
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
    vec![ScriptedTurn::from_message(&calls, 64), ScriptedTurn::from_message(&done, 64)]
}

fn tool() -> AgentTool {
    AgentTool::new(
        Tool {
            name: "t".into(),
            description: "bench".into(),
            parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        },
        |_inv: ToolInvocation| async move { Ok(ToolOutput::text("ok")) },
    )
}

async fn run_once(journal: Option<Arc<dyn Journal>>) -> AgentOutcome {
    let provider: Arc<dyn llm_core::Provider> =
        Arc::new(ScriptedProvider::new("scripted", script()));
    let (provider, tool) = match journal {
        Some(j) => (
            Arc::new(JournaledProvider::new(provider, j.clone())) as Arc<dyn llm_core::Provider>,
            journaled_tool(tool(), j, "bench"),
        ),
        None => (provider, tool()),
    };
    let agent = Agent::new(AgentConfig::new(model(), provider));
    let ctx = AgentContext { system_prompt: None, messages: vec![], tools: vec![tool] };
    agent.run(ctx, vec![Message::user("go")]).finish().await
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let mut group = c.benchmark_group("journal_overhead");
    group.sample_size(20);
    group.bench_function("plain_200_instant_calls", |b| b.iter(|| rt.block_on(run_once(None))));
    group.bench_function("pass_through_200_instant_calls", |b| {
        b.iter(|| rt.block_on(run_once(Some(Arc::new(PassThrough)))))
    });
    group.bench_function("recording_200_instant_calls", |b| {
        b.iter(|| rt.block_on(run_once(Some(Arc::new(Recording::default())))))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
