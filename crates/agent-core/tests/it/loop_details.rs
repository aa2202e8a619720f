//! Details of the loop that cargo-mutants showed no test pinned down: the
//! synthetic closing message and the turn end that carries it, the
//! `max_turns` pending-work check, what happens to a running tool task when
//! its run goes away or it is abandoned, the text of unexecuted calls, the
//! stored response's capacity, and `Debug`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::*;
use futures_util::StreamExt;
use llm_core::{
    ApiKey, AssistantContent, Message, StopReason, TextContent, Tool, Usage, raw::ScriptedProvider,
};
use serde_json::json;

use crate::{
    agent, assert_invariant, collect, ctx, end, model, open_schema, results, text_turn, tool_turn,
};

fn last_assistant(messages: &[Message]) -> llm_core::AssistantMessage {
    match messages.last() {
        Some(Message::Assistant(m)) => (**m).clone(),
        other => panic!("the run did not end with an assistant message: {other:?}"),
    }
}

#[tokio::test]
async fn the_closing_message_of_an_aborted_run_names_the_model_and_the_reason() {
    let provider = ScriptedProvider::new("scripted", [text_turn("never")]);
    let a = agent(&provider, |_| {});
    let run = a.run(ctx(vec![]), vec![Message::user("go")]);
    run.abort();
    let events = collect(run).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Aborted);
    let closing = last_assistant(&messages);
    let m = model();
    assert_eq!(
        (closing.api.as_str(), closing.provider.as_str(), closing.model.as_str()),
        (m.api.as_str(), m.provider.as_str(), m.id.as_str())
    );
    assert_eq!(closing.content, vec![AssistantContent::Text(TextContent::default())]);
    assert_eq!(closing.usage, Usage::default());
    assert_eq!(closing.stop_reason, StopReason::Aborted);
    assert_eq!(closing.error_message.as_deref(), Some("Agent run aborted"));
    assert!(closing.timestamp > 0);
    assert_invariant(&messages);
}

/// Runs one text turn with `max_turns = 1` and the given messages queued
/// before the run starts (steering is delivered one at a time, so the first
/// steering message goes with the prompt and the second is left over).
async fn one_turn_with_queued(steering: &[&str], follow_up: &[&str]) -> (EndReason, usize) {
    let provider = ScriptedProvider::new("scripted", [text_turn("1"), text_turn("2")]);
    let a = agent(&provider, |c| c.max_turns = Some(1));
    let run = a.run(ctx(vec![]), vec![Message::user("go")]);
    for text in steering {
        run.steering().push(Message::user(*text));
    }
    for text in follow_up {
        run.follow_up().push(Message::user(*text));
    }
    let events = collect(run).await;
    let (messages, reason) = end(&events);
    assert_invariant(&messages);
    (reason, provider.requests().len())
}

#[tokio::test]
async fn max_turns_reports_the_cap_only_when_work_was_left() {
    assert_eq!(one_turn_with_queued(&[], &[]).await, (EndReason::Completed, 1), "nothing left");
    assert_eq!(
        one_turn_with_queued(&["a", "b"], &[]).await,
        (EndReason::MaxTurns, 1),
        "steering left"
    );
    assert_eq!(
        one_turn_with_queued(&["a"], &[]).await,
        (EndReason::Completed, 1),
        "the only steering message went with the first request"
    );
    assert_eq!(
        one_turn_with_queued(&[], &["later"]).await,
        (EndReason::MaxTurns, 1),
        "follow-up left"
    );
}

#[tokio::test]
async fn max_turns_reports_the_cap_when_tool_results_were_not_sent_back() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "t", json!({}))]), text_turn("never")],
    );
    let a = agent(&provider, |c| c.max_turns = Some(1));
    let events =
        collect(a.run(ctx(vec![crate::sleepy("t", 1, "x")]), vec![Message::user("go")])).await;
    let (messages, reason) = end(&events);
    assert_eq!((reason, provider.requests().len()), (EndReason::MaxTurns, 1));
    assert_eq!(results(&messages)[0].text(), "x");
}

/// Sets its flag when dropped: the tool future holding it was dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A tool that never returns by itself and records when its future is dropped.
fn endless(dropped: Arc<AtomicBool>) -> AgentTool {
    AgentTool::new(
        Tool { name: "endless".into(), description: "d".into(), parameters: open_schema() },
        move |_inv: ToolInvocation| {
            let guard = DropFlag(dropped.clone());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                Ok(ToolOutput::text("unreachable"))
            }
        },
    )
}

async fn until_tool_started(run: &mut AgentRun) {
    while let Some(event) = run.next().await {
        if matches!(event, AgentEvent::ToolExecutionStart { .. }) {
            return;
        }
    }
    panic!("the run ended before the tool started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_run_stops_its_running_tool_tasks() {
    let provider = ScriptedProvider::new("scripted", [tool_turn(&[("1", "endless", json!({}))])]);
    let a = agent(&provider, |_| {});
    let dropped = Arc::new(AtomicBool::new(false));
    let mut run = a.run(ctx(vec![endless(dropped.clone())]), vec![Message::user("go")]);
    until_tool_started(&mut run).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!dropped.load(Ordering::SeqCst), "the tool is still running while its run lives");
    drop(run);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !dropped.load(Ordering::SeqCst) {
        assert!(tokio::time::Instant::now() < deadline, "the tool task outlived its run");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The runtime a tool task was spawned on shuts down (the task is cancelled
/// from outside the run): the call gets an error result, not a panic.
#[test]
fn a_tool_task_cancelled_from_outside_is_an_error_result() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "endless", json!({}))]), text_turn("done")],
    );
    let a = agent(&provider, |_| {});
    let dropped = Arc::new(AtomicBool::new(false));
    let mut run = a.run(ctx(vec![endless(dropped.clone())]), vec![Message::user("go")]);
    let first = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    first.block_on(async {
        until_tool_started(&mut run).await;
        // Lets the spawned tool task start, so it holds its drop flag.
        tokio::time::sleep(Duration::from_millis(20)).await;
    });
    assert!(!dropped.load(Ordering::SeqCst));
    drop(first);
    assert!(dropped.load(Ordering::SeqCst), "shutting the runtime down dropped the tool task");
    let second = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let events = second.block_on(collect(run));
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    let r = results(&messages);
    assert_eq!((r[0].text().as_str(), r[0].is_error), ("Tool task was cancelled", true));
    assert_invariant(&messages);
}

#[tokio::test]
async fn debug_output_names_the_settings_and_hides_the_key() {
    let provider = ScriptedProvider::new("scripted", [text_turn("ok")]);
    let a = agent(&provider, |c| {
        c.options.api_key = Some(ApiKey::new("sk-debug-secret"));
        c.max_turns = Some(7);
        c.max_concurrency = Some(3);
        c.abort_grace = Duration::from_millis(123);
    });
    let config = format!("{:?}", a.config());
    for needle in [
        "AgentConfig",
        "scripted-1",
        "tool_execution: Parallel",
        "max_concurrency: Some(3)",
        "max_turns: Some(7)",
        "abort_grace: 123ms",
    ] {
        assert!(config.contains(needle), "{needle} missing from {config}");
    }
    assert!(!config.contains("sk-debug-secret"), "{config}");

    let mut run = a.run(ctx(vec![]), vec![Message::user("go")]);
    let running = format!("{run:?}");
    assert!(running.starts_with("AgentRun") && running.contains("finished: false"), "{running}");
    while run.next().await.is_some() {}
    let finished = format!("{run:?}");
    assert!(finished.contains("finished: true"), "{finished}");
    assert!(!finished.contains("sk-debug-secret"));
}

#[tokio::test]
async fn the_stored_response_keeps_no_spare_capacity_and_its_arguments_as_sent() {
    // Three calls: the assembler grows the content one block at a time (to a
    // capacity of four); the keys are out of alphabetical order on purpose.
    let args = r#"{"b":1,"a":{"x":[1,2]},"c":"s"}"#;
    let value: serde_json::Value = serde_json::from_str(args).unwrap();
    let calls = [("c1", "t", value.clone()), ("c2", "t", value.clone()), ("c3", "t", value)];
    let provider = ScriptedProvider::new("scripted", [tool_turn(&calls), text_turn("done")]);
    let a = agent(&provider, |_| {});
    let tool = AgentTool::new(
        Tool { name: "t".into(), description: "t".into(), parameters: open_schema() },
        |_inv: ToolInvocation| async { Ok(ToolOutput::text("ok")) },
    );
    let outcome = a.run(ctx(vec![tool]), vec![Message::user("go")]).finish().await;
    assert_eq!(outcome.reason, EndReason::Completed);
    // The stored transcript, not the outcome's copy of the run's messages.
    let stored = outcome
        .context
        .messages
        .iter()
        .find_map(|m| match m {
            Message::Assistant(m) if m.stop_reason == StopReason::ToolUse => Some(m),
            _ => None,
        })
        .unwrap();
    assert_eq!(stored.content.len(), 3);
    assert_eq!(stored.content.capacity(), 3);
    for block in &stored.content {
        let AssistantContent::ToolCall(call) = block else { panic!("not a call: {block:?}") };
        assert_eq!(serde_json::to_string(&call.arguments).unwrap(), args);
    }
    assert_invariant(outcome.messages());
}

/// A tool that ignores the abort is given up after `abort_grace`; before the
/// run ends, its task has been stopped (its future dropped) and its progress
/// sink closed, so nothing of the call outlives the run. On this
/// current-thread runtime an aborted task is only dropped when the loop waits
/// for it.
#[tokio::test]
async fn an_abandoned_tool_is_stopped_and_its_sink_closed_before_the_run_ends() {
    let provider = ScriptedProvider::new("scripted", [tool_turn(&[("1", "stubborn", json!({}))])]);
    let a = agent(&provider, |c| c.abort_grace = Duration::from_millis(20));
    let dropped = Arc::new(AtomicBool::new(false));
    let sink: Arc<Mutex<Option<ProgressSink>>> = Arc::default();
    let tool = {
        let (dropped, sink) = (dropped.clone(), sink.clone());
        AgentTool::new(
            Tool { name: "stubborn".into(), description: "d".into(), parameters: open_schema() },
            move |inv: ToolInvocation| {
                let guard = DropFlag(dropped.clone());
                *sink.lock().unwrap() = Some(inv.progress.clone());
                async move {
                    let _guard = guard;
                    // Ignores its cancellation token.
                    std::future::pending::<()>().await;
                    Ok(ToolOutput::text("unreachable"))
                }
            },
        )
    };
    let mut run = a.run(ctx(vec![tool]), vec![Message::user("go")]);
    until_tool_started(&mut run).await;
    // Lets the tool task start.
    tokio::time::sleep(Duration::from_millis(10)).await;
    run.abort();
    let mut events = Vec::new();
    while let Some(event) = run.next().await {
        events.push(event);
    }
    assert!(dropped.load(Ordering::SeqCst), "the abandoned tool's future outlived its run");
    let sink = sink.lock().unwrap().clone().expect("the tool ran");
    assert!(!sink.is_open(), "the abandoned tool can still send progress");
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Aborted);
    let r = results(&messages);
    assert_eq!((r[0].text().as_str(), r[0].is_error), (ABORTED_TEXT, true));
    assert_invariant(&messages);
}

/// The result text of a call left in a response that did not finish says why.
async fn result_of_a_call_in_a_response_that(stop: StopReason, error: Option<&str>) -> String {
    let message = llm_core::AssistantMessage {
        content: vec![AssistantContent::ToolCall(llm_core::ToolCall {
            id: "1".into(),
            name: "t".into(),
            arguments: json!({}),
            thought_signature: None,
            arguments_incomplete: false,
        })],
        stop_reason: stop,
        error_message: error.map(str::to_owned),
        ..llm_core::AssistantMessage::default()
    };
    let provider =
        ScriptedProvider::new("scripted", [llm_core::raw::ScriptedTurn::from_message(&message, 3)]);
    let a = agent(&provider, |_| {});
    let tool = AgentTool::new(
        Tool { name: "t".into(), description: "t".into(), parameters: open_schema() },
        |_inv: ToolInvocation| async { Ok(ToolOutput::text("ran")) },
    );
    let events = collect(a.run(ctx(vec![tool]), vec![Message::user("go")])).await;
    let (messages, reason) = end(&events);
    let expected = if stop == StopReason::Aborted { EndReason::Aborted } else { EndReason::Error };
    assert_eq!(reason, expected);
    assert_invariant(&messages);
    let r = results(&messages);
    assert!(r[0].is_error);
    r[0].text()
}

#[tokio::test]
async fn unexecuted_calls_say_whether_the_response_was_aborted_or_failed() {
    assert_eq!(
        result_of_a_call_in_a_response_that(StopReason::Aborted, None).await,
        "Tool call was not executed: the response was aborted"
    );
    assert_eq!(
        result_of_a_call_in_a_response_that(StopReason::Error, Some("overloaded")).await,
        "Tool call was not executed: the response failed: overloaded"
    );
}

fn last_turn_end(events: &[AgentEvent]) -> llm_core::AssistantMessage {
    events
        .iter()
        .rev()
        .find_map(|e| match e {
            AgentEvent::TurnEnd { message, .. } => Some(message.clone()),
            _ => None,
        })
        .expect("a turn end")
}

struct StopHookPanics;

impl AgentHooks for StopHookPanics {
    fn should_stop_after_turn(
        &self,
        _message: &llm_core::AssistantMessage,
        _results: &[llm_core::ToolResultMessage],
    ) -> bool {
        panic!("the stop hook broke")
    }
}

#[tokio::test]
async fn the_turn_end_of_an_aborted_or_failed_run_carries_its_closing_message() {
    let provider = ScriptedProvider::new("scripted", [text_turn("never")]);
    let a = agent(&provider, |_| {});
    let run = a.run(ctx(vec![]), vec![Message::user("go")]);
    run.abort();
    let events = collect(run).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Aborted);
    let closing = last_assistant(&messages);
    assert_eq!(closing.error_message.as_deref(), Some("Agent run aborted"));
    assert_eq!(last_turn_end(&events), closing);

    let provider = ScriptedProvider::new("scripted", [text_turn("hi")]);
    let a = agent(&provider, |c| c.hooks = Arc::new(StopHookPanics));
    let events = collect(a.run(ctx(vec![]), vec![Message::user("go")])).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Failed);
    let closing = last_assistant(&messages);
    assert_eq!(closing.stop_reason, StopReason::Error);
    assert_eq!(last_turn_end(&events), closing);
    assert_invariant(&messages);
}
