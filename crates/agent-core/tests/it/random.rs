//! Randomized runs: tools that succeed, fail, panic, sleep, block their thread,
//! honour cancellation late or abort the run; hooks that panic (in their
//! synchronous part or their future); several runs of one `Agent` at once.
//! For every seed and run: exactly one `AgentEnd`, last; no progress after a
//! call's end; the transcript invariant holds.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agent_core::*;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use llm_core::{
    AssistantMessage, AssistantStream, Context, Message, Model, Provider, StreamOptions, Tool,
    ToolResultMessage, UserMessageContent, raw::ScriptedTurn,
};
use serde_json::json;

use crate::{assert_invariant, end, model, text_turn, tool_turn};

/// xorshift64: the same runs from the same seed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const KINDS: u64 = 8;

fn behaviour_tool(name: &str, kind: u64, ms: u64) -> AgentTool {
    let tool = AgentTool::new(
        Tool { name: name.into(), description: "random".into(), parameters: json!({"type": "object"}) },
        move |inv: ToolInvocation| {
            if kind == 7 {
                panic!("panic before the future");
            }
            async move {
                inv.progress.update(ToolOutput::text("started"));
                match kind {
                    0 => Ok(ToolOutput::text("ok")),
                    1 => Err(ToolError::from("failed")),
                    2 => panic!("random panic"),
                    // Blocks its thread.
                    5 => {
                        std::thread::sleep(Duration::from_millis(ms));
                        Ok(ToolOutput::text("blocked"))
                    }
                    // Honours cancellation, late (sometimes later than the grace period).
                    6 => {
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_millis(ms * 5)) => Ok(ToolOutput::text("slept")),
                            _ = inv.cancel.cancelled() => {
                                tokio::time::sleep(Duration::from_millis(ms * 4)).await;
                                Ok(ToolOutput::text("late but here"))
                            }
                        }
                    }
                    _ => {
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_millis(ms)) => Ok(ToolOutput::text("slept")),
                            _ = inv.cancel.cancelled() => Err(ToolError::from("cancelled")),
                        }
                    }
                }
            }
        },
    )
    .with_mode(if kind == 4 { ExecutionMode::Sequential } else { ExecutionMode::Parallel });
    if kind == 5 && ms.is_multiple_of(2) { tool.blocking() } else { tool }
}

/// Hooks that panic for calls whose id says so (`bs`: before, synchronously;
/// `ba`: before, in the future; `ap`: after), and in `should_stop_after_turn`
/// when asked to.
struct PanickyHooks {
    stop_panics: bool,
}

impl AgentHooks for PanickyHooks {
    fn before_tool_call<'a>(
        &'a self,
        info: CallInfo<'a>,
        _args: &'a serde_json::Value,
    ) -> BoxFuture<'a, BeforeToolCall> {
        assert!(!info.call.id.ends_with("bs"), "before hook panicked");
        let in_future = info.call.id.ends_with("ba");
        Box::pin(async move {
            assert!(!in_future, "before hook future panicked");
            BeforeToolCall::Allow
        })
    }
    fn after_tool_call<'a>(
        &'a self,
        info: CallInfo<'a>,
        _result: &'a ToolOutput,
        _is_error: bool,
    ) -> BoxFuture<'a, Option<AfterToolCall>> {
        let panics = info.call.id.ends_with("ap");
        Box::pin(async move {
            assert!(!panics, "after hook panicked");
            None
        })
    }
    fn should_stop_after_turn(&self, _m: &AssistantMessage, _r: &[ToolResultMessage]) -> bool {
        assert!(!self.stop_panics, "stop hook panicked");
        false
    }
}

/// Serves each run its own script, keyed by the run's first user message.
struct PerRunScripts(HashMap<String, Vec<ScriptedTurn>>);

impl Provider for PerRunScripts {
    fn api(&self) -> &str {
        "scripted"
    }
    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        let key = context.messages.iter().find_map(|m| match m {
            Message::User(u) => match &u.content {
                UserMessageContent::Text(t) => Some(t.clone()),
                _ => None,
            },
            _ => None,
        });
        let turn = context.messages.iter().filter(|m| matches!(m, Message::Assistant(_))).count();
        let script = key.and_then(|k| self.0.get(&k)).and_then(|s| s.get(turn)).cloned();
        llm_core::raw::ScriptedProvider::new("scripted", script).stream(model, context, options)
    }
}

fn check_run(events: &[AgentEvent], aborted: bool, stop_panics: bool, label: &str) {
    let (messages, reason) = end(events);
    assert_invariant(&messages);
    let mut ended = std::collections::HashSet::new();
    for e in events {
        match e {
            AgentEvent::ToolExecutionEnd { tool_call_id, .. } => {
                assert!(ended.insert(tool_call_id.clone()), "{label}: two ends for {tool_call_id}");
            }
            AgentEvent::ToolExecutionUpdate { tool_call_id, .. } => {
                assert!(!ended.contains(tool_call_id), "{label}: update after end");
            }
            _ => {}
        }
    }
    if !aborted {
        assert_ne!(reason, EndReason::Aborted, "{label}");
    }
    if stop_panics && reason == EndReason::Failed {
        assert!(matches!(messages.last(), Some(Message::Assistant(_))), "{label}");
    } else if !stop_panics {
        assert_ne!(reason, EndReason::Failed, "{label}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_runs_keep_the_invariant() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for seed in 0..120u64 {
        let runs = 1 + rng.below(3) as usize;
        let mut scripts = HashMap::new();
        let mut tools = Vec::new();
        let mut call_no = 0;
        for run in 0..runs {
            let turns = 1 + rng.below(3);
            let mut script = Vec::new();
            for t in 0..turns {
                let calls = 1 + rng.below(5);
                let mut spec = Vec::new();
                for _ in 0..calls {
                    let kind = rng.below(KINDS);
                    let name = format!("t{call_no}");
                    // Some calls name a tool that does not exist.
                    if rng.below(8) != 0 {
                        tools.push(behaviour_tool(&name, kind, 1 + rng.below(4)));
                    }
                    let hook = ["", "", "", "", "", "bs", "ba", "ap"][rng.below(8) as usize];
                    spec.push((format!("c{seed}_{run}_{t}_{call_no}{hook}"), name));
                    call_no += 1;
                }
                let refs: Vec<(&str, &str, serde_json::Value)> =
                    spec.iter().map(|(id, n)| (id.as_str(), n.as_str(), json!({}))).collect();
                script.push(tool_turn(&refs));
            }
            script.push(text_turn("done"));
            scripts.insert(format!("seed {seed} run {run}"), script);
        }
        let stop_panics = rng.below(10) == 0;
        let mut config = AgentConfig::new(model(), Arc::new(PerRunScripts(scripts)));
        config.hooks = Arc::new(PanickyHooks { stop_panics });
        config.abort_grace = Duration::from_millis(rng.below(10));
        if rng.below(3) == 0 {
            config.tool_execution = ExecutionMode::Sequential;
        }
        if rng.below(2) == 0 {
            config.max_concurrency = Some(1 + rng.below(3) as usize);
        }
        let agent = Agent::new(config);
        let mut handles = Vec::new();
        for run in 0..runs {
            let ctx = AgentContext { system_prompt: None, messages: vec![], tools: tools.clone() };
            let mut agent_run =
                agent.run(ctx, vec![Message::user(format!("seed {seed} run {run}"))]);
            let abort_at = if rng.below(2) == 0 { Some(rng.below(30) as usize) } else { None };
            handles.push(async move {
                let token = agent_run.cancel_token();
                let mut events = Vec::new();
                while let Some(e) = agent_run.next().await {
                    if abort_at == Some(events.len()) {
                        token.cancel();
                    }
                    events.push(e);
                }
                assert!(agent_run.next().await.is_none());
                (events, abort_at.is_some())
            });
        }
        for (run, (events, aborted)) in
            futures_util::future::join_all(handles).await.into_iter().enumerate()
        {
            check_run(&events, aborted, stop_panics, &format!("seed {seed} run {run}"));
        }
    }
}
