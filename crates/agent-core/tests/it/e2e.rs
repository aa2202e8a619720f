//! End to end through a real provider crate (Anthropic) against the loopback
//! replay server: multi-turn, parallel calls, a deferred tool, abort mid-batch.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agent_core::*;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use llm_core::{ApiKey, Tool};
use serde_json::json;

use crate::{assert_invariant, end, results};

fn session_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/anthropic/agent-session")
}

fn tool(name: &str, answer: &'static str, sleep_ms: u64) -> AgentTool {
    AgentTool::new(
        Tool {
            name: name.into(),
            description: format!("test {name}"),
            parameters: json!({"type": "object"}),
        },
        move |inv: ToolInvocation| async move {
            if sleep_ms > 0 {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(sleep_ms)) => {}
                    _ = inv.cancel.cancelled() => return Err(ToolError::from("cancelled")),
                }
            }
            Ok(ToolOutput::text(answer))
        },
    )
}

async fn setup(
    tools: Vec<AgentTool>,
    hooks: Option<Arc<dyn AgentHooks>>,
) -> (Agent, AgentContext, llm_testkit::replay::ReplayServer, Vec<llm_core::Message>) {
    let session = llm_testkit::replay::Session::load(&session_dir()).unwrap();
    let server = session.serve().await.unwrap();
    let mut model = session.model.clone();
    model.base_url = server.base_url();
    let mut config = AgentConfig::new(model, Arc::new(llm_anthropic::AnthropicProvider::new()));
    config.options.api_key = Some(ApiKey::new("test-key"));
    if let Some(h) = hooks {
        config.hooks = h;
    }
    let ctx = AgentContext {
        system_prompt: session.context.system_prompt.clone(),
        messages: vec![],
        tools,
    };
    (Agent::new(config), ctx, server, session.context.messages.clone())
}

#[tokio::test]
async fn multi_turn_parallel_calls_through_anthropic() {
    let tools = vec![
        tool("list_dir", "a\nb/", 30),
        tool("calculator", "1068.4", 1),
        tool("current_time", "2026-11-30T00:00:00Z", 10),
        tool("read_file", "# readme", 0),
    ];
    let (agent, ctx, server, prompts) = setup(tools, None).await;
    let events: Vec<AgentEvent> = agent.run(ctx, prompts).collect().await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    assert_eq!(server.requests(), 3);
    let r = results(&messages);
    assert_eq!(
        r.iter().map(|r| (r.tool_name.as_str(), r.text())).collect::<Vec<_>>(),
        [
            ("list_dir", "a\nb/".to_owned()),
            ("calculator", "1068.4".to_owned()),
            ("current_time", "2026-11-30T00:00:00Z".to_owned()),
            ("read_file", "# readme".to_owned()),
        ]
    );
    assert_invariant(&messages);
}

struct DeferReadFile(AtomicUsize);
impl AgentHooks for DeferReadFile {
    fn resolve_deferred_tool<'a>(
        &'a self,
        info: CallInfo<'a>,
    ) -> BoxFuture<'a, Result<Option<AgentTool>, ToolError>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let name = info.call.name.clone();
        Box::pin(async move {
            Ok((name == "read_file").then(|| tool("read_file", "deferred readme", 0)))
        })
    }
}

#[tokio::test]
async fn deferred_tool_through_anthropic() {
    let tools =
        vec![tool("list_dir", "x", 0), tool("calculator", "1", 0), tool("current_time", "t", 0)];
    let hooks = Arc::new(DeferReadFile(AtomicUsize::new(0)));
    let (agent, ctx, _server, prompts) = setup(tools, Some(hooks.clone())).await;
    let outcome = agent.run(ctx, prompts).finish().await;
    assert_eq!(outcome.reason, EndReason::Completed);
    assert_eq!(hooks.0.load(Ordering::SeqCst), 1);
    assert!(outcome.context.tools.iter().any(|t| t.tool.name == "read_file"));
    let r = results(outcome.messages());
    assert_eq!(r.last().unwrap().text(), "deferred readme");
    assert_invariant(outcome.messages());
}

#[tokio::test]
async fn abort_in_the_middle_of_a_batch_through_anthropic() {
    let tools = vec![
        tool("list_dir", "x", 10_000),
        tool("calculator", "1068.4", 0),
        tool("current_time", "t", 10_000),
        tool("read_file", "r", 0),
    ];
    let (agent, ctx, server, prompts) = setup(tools, None).await;
    let mut run = agent.run(ctx, prompts);
    let token = run.cancel_token();
    let mut events = Vec::new();
    while let Some(e) = run.next().await {
        if matches!(&e, AgentEvent::ToolExecutionEnd { tool_name, .. } if tool_name == "calculator")
        {
            token.cancel();
        }
        events.push(e);
    }
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Aborted);
    assert_eq!(server.requests(), 1, "no request after the abort");
    let r = results(&messages);
    assert_eq!(r.len(), 3);
    // Both slow tools honour their token and return within the grace period:
    // what they return stands.
    assert_eq!((r[0].text().as_str(), r[0].is_error), ("cancelled", true));
    assert_eq!(r[1].text(), "1068.4");
    assert_eq!((r[2].text().as_str(), r[2].is_error), ("cancelled", true));
    assert_invariant(&messages);
}
