//! Randomized batches: tools that succeed, fail, panic, sleep or abort the run
//! at random points. The transcript invariant holds and exactly one
//! `agent_end` arrives, for every seed.

use std::time::Duration;

use agent_core::*;
use futures_util::StreamExt;
use llm_core::{Message, ScriptedProvider, Tool};
use serde_json::json;

use crate::{assert_invariant, end, model, text_turn, tool_turn};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn behaviour_tool(name: &str, kind: u64, sleep_ms: u64) -> AgentTool {
    AgentTool::new(
        Tool { name: name.into(), description: "random".into(), parameters: json!({"type": "object"}) },
        move |inv: ToolInvocation| async move {
            match kind {
                0 => Ok(ToolOutput::text("ok")),
                1 => Err(ToolError::from("failed")),
                2 => panic!("random panic"),
                _ => {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(sleep_ms)) => Ok(ToolOutput::text("slept")),
                        _ = inv.cancel.cancelled() => Err(ToolError::from("cancelled")),
                    }
                }
            }
        },
    )
    .with_mode(if kind == 4 { ExecutionMode::Sequential } else { ExecutionMode::Parallel })
}

#[tokio::test]
async fn random_batches_keep_the_invariant() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for seed in 0..150u64 {
        let turns = 1 + rng.below(3);
        let mut script = Vec::new();
        let mut tools = Vec::new();
        let mut call_no = 0;
        for t in 0..turns {
            let calls = 1 + rng.below(5);
            let mut spec = Vec::new();
            for _ in 0..calls {
                let kind = rng.below(5);
                let name = format!("t{call_no}");
                // Some calls name a tool that does not exist.
                if rng.below(8) != 0 {
                    tools.push(behaviour_tool(&name, kind, rng.below(4)));
                }
                spec.push((format!("c{seed}_{t}_{call_no}"), name));
                call_no += 1;
            }
            let refs: Vec<(&str, &str, serde_json::Value)> =
                spec.iter().map(|(id, n)| (id.as_str(), n.as_str(), json!({}))).collect();
            script.push(tool_turn(&refs));
        }
        script.push(text_turn("done"));
        let provider = ScriptedProvider::new("scripted", script);
        let mut config = AgentConfig::new(model(), std::sync::Arc::new(provider.clone()));
        if rng.below(3) == 0 {
            config.tool_execution = ExecutionMode::Sequential;
        }
        if rng.below(2) == 0 {
            config.max_concurrency = Some(1 + rng.below(3) as usize);
        }
        let agent = Agent::new(config);
        let ctx = AgentContext { system_prompt: None, messages: vec![], tools };
        let mut run = agent.run(ctx, vec![Message::user("go")]);
        let abort_at = if rng.below(2) == 0 { Some(rng.below(30) as usize) } else { None };
        let token = run.cancel_token();
        let mut events = Vec::new();
        while let Some(e) = run.next().await {
            if abort_at == Some(events.len()) {
                token.cancel();
            }
            events.push(e);
        }
        let (messages, reason) = end(&events);
        assert_invariant(&messages);
        if abort_at.is_none() {
            assert_ne!(reason, EndReason::Aborted, "seed {seed}");
        }
    }
}
