//! Fault cases against the rmcp-based fault server: crash mid-call, hang,
//! malformed reply, slow progress, unknown tool, list changes, restarts.

use std::time::Duration;

use agent_core::{AgentEvent, EndReason, check_tool_results};
use agent_mcp::{McpServerConfig, McpServers, McpToolSet, ServerStatus, availability_key, names};
use futures_util::StreamExt;
use llm_core::Message;
use serde_json::json;
use tool_planner::{AvailabilityEnv, ExecutorRef, Owner, Reason, build_tool_plan};

use crate::*;

fn tool<'a>(set: &'a McpToolSet, name: &str) -> &'a agent_core::AgentTool {
    set.tool(name).unwrap_or_else(|| panic!("no tool {name} in {:?}", set.names))
}

fn env_of(servers: &McpServers) -> AvailabilityEnv {
    let mut env = AvailabilityEnv::default();
    servers.apply_availability(&mut env);
    env
}

#[tokio::test]
async fn tools_are_listed_across_pages_and_described_for_the_planner() {
    let (config, _) = fault_server("fault");
    let servers = McpServers::connect([config]).await.unwrap();
    assert_eq!(servers.statuses(), [("fault".to_owned(), ServerStatus::Up)]);
    let set = servers.tools();
    // Fourteen tools at three a page: five `tools/list` pages.
    let mut exposed: Vec<&str> = set.descriptors.iter().map(|d| d.name.as_str()).collect();
    exposed.sort_unstable();
    assert_eq!(
        exposed,
        [
            "fault__add_tool",
            "fault__big_text",
            "fault__crash",
            "fault__describe",
            "fault__echo",
            "fault__endless_stdout",
            "fault__env",
            "fault__fail",
            "fault__hang",
            "fault__image",
            "fault__malformed",
            "fault__slow_progress",
            "fault__stderr_flood",
            "fault__stray"
        ]
    );
    let echo = set.descriptors.iter().find(|d| d.name == "fault__echo").unwrap();
    assert_eq!(echo.owner, Owner::Mcp { server_id: "fault".into() });
    assert_eq!(
        echo.executor,
        Some(ExecutorRef::Mcp { server_id: "fault".into(), tool_name: "echo".into() })
    );
    assert_eq!(echo.input_schema["required"], json!(["text"]));
    for d in &set.descriptors {
        assert!(names::is_valid_tool_name(&d.name), "{}", d.name);
        let back = set.names.resolve(&d.name).unwrap();
        assert_eq!(back.server_id, "fault");
    }
    let planned = set.planned(&env_of(&servers)).unwrap();
    assert_eq!(planned.len(), 14);
    let out = invoke(tool(&set, "fault__echo"), json!({"text": "hello"})).await.unwrap();
    assert_eq!(text_of(&out.content), "hello");
    assert_eq!(out.details, Some(json!({"mcpServer": "fault", "mcpTool": "echo"})));
    // A durable run's idempotency key reaches the server in the call's `_meta`.
    let keyed = tool(&set, "fault__echo")
        .executor
        .execute(ToolInvocation {
            call_id: "call-1".into(),
            arguments: json!({"text": "hello"}),
            cancel: CancellationToken::new(),
            progress: ProgressSink::disconnected(),
            idempotency_key: Some("session/3/call-1".into()),
        })
        .await
        .unwrap();
    assert_eq!(text_of(&keyed.content), "hello [key session/3/call-1]");
    servers.shutdown().await;
}

#[tokio::test]
async fn a_crash_mid_call_is_an_error_result_the_tools_hide_and_the_next_call_restarts() {
    let (config, _) = fault_server("fault");
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();

    let err = invoke(tool(&set, "fault__crash"), json!({})).await.unwrap_err();
    assert!(err.0.contains("MCP server `fault` stopped during `crash`"), "{err}");
    assert!(err.0.contains("exit status: 3"), "{err}");
    assert!(err.0.contains("crashing on purpose"), "stderr tail: {err}");
    assert!(err.0.contains("started again on the next call"), "{err}");

    // While it is down the planner hides its tools, saying why.
    assert!(matches!(servers.statuses()[0].1, ServerStatus::Down { restartable: true, .. }));
    let env = env_of(&servers);
    assert_eq!(env.values[&availability_key("fault")], json!("down"));
    let plan = build_tool_plan(&set.descriptors, &env).unwrap();
    assert!(plan.visible.is_empty());
    assert_eq!(plan.hidden.len(), 14);
    assert!(plan.hidden.iter().all(|h| h.diagnostics[0].reason == Reason::ContextMismatch));
    assert!(set.planned(&env).unwrap().is_empty());

    // The next call starts it again.
    let out = invoke(tool(&set, "fault__echo"), json!({"text": "back"})).await.unwrap();
    assert_eq!(text_of(&out.content), "back");
    assert_eq!(servers.statuses()[0].1, ServerStatus::Up);
    assert_eq!(set.planned(&env_of(&servers)).unwrap().len(), 14);
    servers.shutdown().await;
}

#[tokio::test]
async fn restarts_are_bounded() {
    let (config, _) = fault_server("fault");
    let servers = McpServers::connect([config.with_max_restarts(1)]).await.unwrap();
    let set = servers.tools();
    invoke(tool(&set, "fault__crash"), json!({})).await.unwrap_err();
    invoke(tool(&set, "fault__echo"), json!({"text": "1"})).await.unwrap();
    let err = invoke(tool(&set, "fault__crash"), json!({})).await.unwrap_err();
    assert!(err.0.contains("its restarts are used up"), "{err}");
    let err = invoke(tool(&set, "fault__echo"), json!({"text": "2"})).await.unwrap_err();
    assert!(err.0.contains("is down and its 1 restarts are used up"), "{err}");
    assert!(matches!(servers.statuses()[0].1, ServerStatus::Down { restartable: false, .. }));
    // `refresh` does not start it either, and the tools stay hidden.
    assert!(!servers.refresh().await);
    assert!(set.planned(&env_of(&servers)).unwrap().is_empty());
}

#[tokio::test]
async fn a_hung_call_times_out_and_is_cancelled_on_the_server() {
    let (config, log) = fault_server("fault");
    let config = config.with_call_timeout(Duration::from_millis(400));
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let err = invoke(tool(&set, "fault__hang"), json!({})).await.unwrap_err();
    assert!(err.0.contains("did not answer `hang` within 400ms"), "{err}");
    wait_for_file(&log, "cancelled hang").await;
    // The connection is still good.
    let out = invoke(tool(&set, "fault__echo"), json!({"text": "still here"})).await.unwrap();
    assert_eq!(text_of(&out.content), "still here");
    servers.shutdown().await;
    // After shutdown nothing starts it again.
    let err = invoke(tool(&set, "fault__echo"), json!({"text": "late"})).await.unwrap_err();
    assert!(err.0.contains("is down"), "{err}");
    assert!(!servers.refresh().await);
}

#[tokio::test]
async fn a_stray_line_then_silence_times_out_quoting_the_line() {
    let (config, log) = fault_server("fault");
    let config = config.with_call_timeout(Duration::from_millis(500));
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let err = invoke(tool(&set, "fault__malformed"), json!({})).await.unwrap_err();
    assert!(err.0.contains("did not answer `malformed` within 500ms"), "{err}");
    assert!(
        err.0.contains("meanwhile it wrote a line that is not JSON-RPC: this is not JSON-RPC"),
        "{err}"
    );
    wait_for_file(&log, "cancelled malformed").await;
    let out = invoke(tool(&set, "fault__echo"), json!({"text": "ok"})).await.unwrap();
    assert_eq!(text_of(&out.content), "ok");
    servers.shutdown().await;
}

#[tokio::test]
async fn unknown_tools_and_is_error_results_are_error_results() {
    let (config, _) = fault_server("fault");
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let err = invoke(tool(&set, "fault__fail"), json!({})).await.unwrap_err();
    assert_eq!(err.0, "the tool failed on purpose");

    // `add_tool` announces `extra_tool`; a refresh lists it.
    invoke(tool(&set, "fault__add_tool"), json!({})).await.unwrap();
    let mut refreshed = false;
    for _ in 0..50 {
        if servers.refresh().await {
            refreshed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(refreshed, "tools/list_changed was not followed");
    let set = servers.tools();
    let extra = tool(&set, "fault__extra_tool").clone();
    assert_eq!(text_of(&invoke(&extra, json!({})).await.unwrap().content), "extra");

    // A restarted server no longer has it: the server's own error is the result.
    invoke(tool(&set, "fault__crash"), json!({})).await.unwrap_err();
    let err = invoke(&extra, json!({})).await.unwrap_err();
    assert!(
        err.0.contains("rejected `extra_tool`: unknown tool: extra_tool (JSON-RPC error -32602)"),
        "{err}"
    );
    servers.shutdown().await;
}

#[tokio::test]
async fn slow_progress_reaches_the_loop_and_keeps_the_call_alive() {
    let (config, _) = fault_server("fault");
    // Each step takes 200 ms, the whole call 1 s: longer than the timeout,
    // which every progress notification restarts.
    let config = config.with_call_timeout(Duration::from_millis(600));
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let agent = scripted_agent(vec![
        tool_turn("c1", "fault__slow_progress", json!({"steps": 5, "delay_ms": 200})),
        text_turn("done"),
    ]);
    let events: Vec<AgentEvent> =
        agent.run(context(set.tools.clone()), vec![Message::user("go")]).collect().await;
    let updates: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionUpdate { partial, .. } => Some(text_of(&partial.content)),
            _ => None,
        })
        .collect();
    assert_eq!(
        updates,
        ["1/5: step 1", "2/5: step 2", "3/5: step 3", "4/5: step 4", "5/5: step 5"]
    );
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    let r = results(&messages);
    assert!(!r[0].is_error, "{:?}", r[0]);
    assert_eq!(text_of(&r[0].content), "done after 5 steps");
    servers.shutdown().await;
}

#[tokio::test]
async fn aborting_the_run_sends_notifications_cancelled() {
    let (config, log) = fault_server("fault");
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let agent = scripted_agent(vec![tool_turn("c1", "fault__hang", json!({})), text_turn("never")]);
    let mut run = agent.run(context(set.tools.clone()), vec![Message::user("go")]);
    let mut events = Vec::new();
    while let Some(e) = run.next().await {
        if matches!(e, AgentEvent::ToolExecutionStart { .. }) {
            // Give the request time to reach the server, then abort.
            tokio::time::sleep(Duration::from_millis(300)).await;
            run.abort();
        }
        events.push(e);
    }
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Aborted);
    assert_eq!(check_tool_results(&messages), vec![]);
    assert!(results(&messages)[0].is_error);
    wait_for_file(&log, "cancelled hang").await;
    servers.shutdown().await;
}

#[tokio::test]
async fn a_server_that_cannot_start_is_down_not_fatal() {
    let (good, _) = fault_server("good");
    let bad =
        McpServerConfig::stdio("bad", "/nonexistent/mcp-server", ["--x"]).with_max_restarts(0);
    let servers = McpServers::connect([good, bad]).await.unwrap();
    let statuses = servers.statuses();
    assert_eq!(statuses[0].1, ServerStatus::Up);
    let ServerStatus::Down { reason, restartable } = &statuses[1].1 else { panic!("{statuses:?}") };
    assert!(reason.contains("cannot run `/nonexistent/mcp-server`"), "{reason}");
    assert!(!restartable);
    assert_eq!(servers.tools().descriptors.len(), 14);

    assert!(McpServers::connect([fault_server("a").0, fault_server("a").0]).await.is_err());
    assert!(McpServers::connect([fault_server("9").0]).await.is_err());
}

#[tokio::test]
async fn a_server_that_never_answers_initialize_times_out() {
    // Prints a line that is not JSON-RPC, then says nothing.
    let silent = McpServerConfig::stdio("silent", "sh", ["-c", "echo starting up; exec sleep 30"])
        .with_connect_timeout(Duration::from_millis(500))
        .with_max_restarts(0);
    let servers = McpServers::connect([silent]).await.unwrap();
    let ServerStatus::Down { reason, .. } = &servers.statuses()[0].1 else { panic!() };
    assert!(reason.contains("no answer to `initialize` within 500ms"), "{reason}");
    assert!(servers.tools().descriptors.is_empty());
}
