//! The loop as a machine: approvals that park a call, runs stored and resumed,
//! and the calls a UI must be able to close (every call gets start and end events).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_core::*;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use llm_core::{
    Message, StopReason, Tool, UserContent,
    raw::{Delta, ScriptedProvider, ScriptedTurn},
};
use serde_json::{Value, json};

use crate::{
    agent, assert_invariant, collect, ctx, end, open_schema, results, sleepy, text_turn, tool_turn,
};

/// Asks a person before every call of the tool `danger`.
struct AskForDanger;

impl AgentHooks for AskForDanger {
    fn before_tool_call<'a>(
        &'a self,
        info: CallInfo<'a>,
        _args: &'a Value,
    ) -> BoxFuture<'a, BeforeToolCall> {
        let answer = if info.call.name == "danger" {
            BeforeToolCall::Ask { reason: "it deletes files".into() }
        } else {
            BeforeToolCall::Allow
        };
        Box::pin(async move { answer })
    }
}

fn counted(name: &str, counter: Arc<AtomicUsize>) -> AgentTool {
    AgentTool::new(
        Tool { name: name.into(), description: "d".into(), parameters: open_schema() },
        move |_inv: ToolInvocation| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(ToolOutput::text("ran"))
            }
        },
    )
}

fn text_of(content: &[UserContent]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            UserContent::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

fn result_text(messages: &[Message], id: &str) -> String {
    let found = results(messages).into_iter().find(|r| r.tool_call_id == id);
    found.map(|r| text_of(&r.content)).unwrap_or_default()
}

/// Runs until the first approval request, returning the events so far.
async fn until_approval(run: &mut AgentRun) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    while let Some(e) = run.next().await {
        let asked = matches!(e, AgentEvent::ApprovalRequested { .. });
        events.push(e);
        if asked {
            break;
        }
    }
    events
}

#[tokio::test]
async fn a_call_waiting_for_approval_parks_while_the_batch_goes_on_and_runs_once_approved() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "danger", json!({})), ("2", "safe", json!({}))]), text_turn("done")],
    );
    let (danger, safe) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let a = agent(&provider, |c| c.hooks = Arc::new(AskForDanger));
    let tools = vec![counted("danger", danger.clone()), counted("safe", safe.clone())];
    let mut run = a.run(ctx(tools), vec![Message::user("go")]);
    let mut events = until_approval(&mut run).await;
    let Some(AgentEvent::ApprovalRequested { tool_call_id, tool_name, reason, .. }) = events.last()
    else {
        panic!("no approval request: {events:?}");
    };
    assert_eq!((tool_call_id.as_str(), tool_name.as_str()), ("1", "danger"));
    assert_eq!(reason, "it deletes files");
    // The other call runs while the first waits.
    while safe.load(Ordering::SeqCst) == 0 {
        events.push(run.next().await.expect("the run goes on"));
    }
    assert_eq!(danger.load(Ordering::SeqCst), 0);
    run.approvals().approve("1");
    events.extend(collect(run).await);
    assert_eq!(danger.load(Ordering::SeqCst), 1);
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    assert_eq!(result_text(&messages, "1"), "ran");
    assert_invariant(&messages);
}

#[tokio::test]
async fn a_denied_call_gives_the_model_the_persons_reason() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "danger", json!({}))]), text_turn("ok")],
    );
    let danger = Arc::new(AtomicUsize::new(0));
    let a = agent(&provider, |c| c.hooks = Arc::new(AskForDanger));
    let mut run = a.run(ctx(vec![counted("danger", danger.clone())]), vec![Message::user("go")]);
    let mut events = until_approval(&mut run).await;
    run.approvals().deny("1", Some("not on my laptop".into()));
    events.extend(collect(run).await);
    assert_eq!(danger.load(Ordering::SeqCst), 0);
    let (messages, _) = end(&events);
    assert_eq!(result_text(&messages, "1"), format!("{DENIED_TEXT}: not on my laptop"));
    let second_request = provider.requests().pop().expect("a second request");
    assert!(second_request.messages.iter().any(|m| matches!(m,
        Message::ToolResult(r) if r.is_error && text_of(&r.content).contains("not on my laptop"))));
    assert_invariant(&messages);
}

#[tokio::test]
async fn an_abort_answers_a_call_that_waits_for_a_person() {
    let provider = ScriptedProvider::new("scripted", [tool_turn(&[("1", "danger", json!({}))])]);
    let a = agent(&provider, |c| c.hooks = Arc::new(AskForDanger));
    let danger = Arc::new(AtomicUsize::new(0));
    let mut run = a.run(ctx(vec![counted("danger", danger.clone())]), vec![Message::user("go")]);
    let mut events = until_approval(&mut run).await;
    let late = run.approvals();
    run.abort();
    // The abort alone ends the run: nobody answers the question.
    let rest = tokio::time::timeout(std::time::Duration::from_secs(5), collect(run)).await;
    events.extend(rest.expect("the run ends without a decision"));
    // A decision that arrives after the end changes nothing.
    late.approve("1");
    assert_eq!(danger.load(Ordering::SeqCst), 0);
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Aborted);
    assert_eq!(result_text(&messages, "1"), ABORTED_TEXT);
    assert_invariant(&messages);
}

#[tokio::test]
async fn a_run_waiting_for_approval_is_stored_and_resumed_by_another_agent() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "danger", json!({"path": "a"}))]), text_turn("done")],
    );
    let danger = Arc::new(AtomicUsize::new(0));
    let first = agent(&provider, |c| c.hooks = Arc::new(AskForDanger));
    let mut run =
        first.run(ctx(vec![counted("danger", danger.clone())]), vec![Message::user("go")]);
    let before = until_approval(&mut run).await;
    let stored = run.machine().expect("the run goes on").to_json().expect("stores");
    drop(run);

    // Another process: the same tools, bound again by name.
    let second = agent(&provider, |c| c.hooks = Arc::new(AskForDanger));
    let mut machine = AgentMachine::from_json(&stored).expect("restores");
    assert_eq!(machine.pending_approvals().len(), 1);
    machine.bind_tools(&[counted("danger", danger.clone())]);
    let run = second.resume(machine);
    run.approvals().approve("1");
    let after = collect(run).await;
    assert_eq!(danger.load(Ordering::SeqCst), 1);
    let (messages, reason) = end(&after);
    assert_eq!(reason, EndReason::Completed);
    assert!(matches!(before.first(), Some(AgentEvent::AgentStart)));
    // The resumed run's messages are the whole run's: prompt, call, result, answer.
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_invariant(&messages);
}

#[tokio::test]
async fn a_machine_stored_before_it_started_starts_when_resumed() {
    let provider = ScriptedProvider::new("scripted", [text_turn("hello again")]);
    let a = agent(&provider, |_| {});
    let context = AgentContext {
        system_prompt: None,
        messages: vec![Message::user("hi")],
        tools: Vec::new(),
    };
    let machine =
        AgentMachine::new(a.settings(), context, Arc::new(crate::model()), Arc::default());
    let stored = machine.to_json().expect("stores");
    let restored = AgentMachine::from_json(&stored).expect("restores");
    let run = a.resume(restored);
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(5), run.finish())
        .await
        .expect("a resumed machine that never started runs");
    assert_eq!(outcome.reason, EndReason::Completed);
    assert_eq!(outcome.messages().len(), 1, "{:?}", outcome.messages());
}

#[test]
fn a_state_of_another_version_is_refused() {
    let machine = AgentMachine::new(
        MachineSettings::default(),
        AgentContext::default(),
        Arc::new(crate::model()),
        Arc::default(),
    );
    let stored = machine.to_json().expect("stores");
    let other = stored.replacen(&format!("\"version\":{STATE_VERSION}"), "\"version\":999", 1);
    assert!(matches!(AgentMachine::from_json(&other), Err(RestoreError::Version { found: 999 })));
    assert!(matches!(AgentMachine::from_json("{}"), Err(RestoreError::Invalid(_))));
}

#[tokio::test]
async fn a_call_cut_off_mid_json_never_runs_and_the_model_is_told() {
    // The stream says "tool use" but the first call's arguments stop mid-string.
    let turn = ScriptedTurn::deltas(vec![
        Delta::ToolCallStart { key: 0, id: "cut".into(), name: "shell".into(), arguments: None },
        Delta::ToolCallArgs { key: 0, fragment: r#"{"cmd": "rm -rf /srv/scratch/tm"#.into() },
        Delta::BlockEnd { key: 0 },
        Delta::ToolCallStart { key: 1, id: "whole".into(), name: "shell".into(), arguments: None },
        Delta::ToolCallArgs { key: 1, fragment: r#"{"cmd": "ls"}"#.into() },
        Delta::BlockEnd { key: 1 },
        Delta::Stop(StopReason::ToolUse),
        Delta::Done,
    ]);
    let provider = ScriptedProvider::new("scripted", [turn, text_turn("ok")]);
    let ran = Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let seen = ran.clone();
    let shell = AgentTool::new(
        Tool { name: "shell".into(), description: "d".into(), parameters: open_schema() },
        move |inv: ToolInvocation| {
            seen.lock().unwrap().push(inv.arguments.clone());
            async { Ok(ToolOutput::text("done")) }
        },
    );
    let a = agent(&provider, |_| {});
    let events = collect(a.run(ctx(vec![shell]), vec![Message::user("go")])).await;
    assert_eq!(*ran.lock().unwrap(), vec![json!({"cmd": "ls"})]);
    let (messages, _) = end(&events);
    assert_eq!(result_text(&messages, "cut"), INCOMPLETE_TEXT);
    assert_eq!(result_text(&messages, "whole"), "done");
    assert_invariant(&messages);
}

#[tokio::test]
async fn repeated_call_ids_each_get_one_result_and_the_next_request_has_unique_ids() {
    let provider = ScriptedProvider::new(
        "scripted",
        [
            tool_turn(&[
                ("dup", "echo", json!({"n": 1})),
                ("dup", "echo", json!({"n": 2})),
                ("dup-2", "echo", json!({"n": 3})),
            ]),
            text_turn("ok"),
        ],
    );
    let echo = AgentTool::new(
        Tool { name: "echo".into(), description: "d".into(), parameters: open_schema() },
        |inv: ToolInvocation| async move { Ok(ToolOutput::text(inv.arguments["n"].to_string())) },
    );
    let a = agent(&provider, |_| {});
    let events = collect(a.run(ctx(vec![echo]), vec![Message::user("go")])).await;
    let (messages, _) = end(&events);
    assert_invariant(&messages);
    let request = provider.requests().pop().expect("a second request");
    let call_ids: Vec<String> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => Some(a.tool_calls().map(|c| c.id.clone()).collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    let result_ids: Vec<String> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some(r.tool_call_id.clone()),
            _ => None,
        })
        .collect();
    let unique: std::collections::HashSet<&String> = call_ids.iter().collect();
    assert_eq!(unique.len(), 3, "{call_ids:?}");
    assert_eq!(call_ids, result_ids);
    // Each result is its own call's.
    let texts: Vec<String> = call_ids.iter().map(|id| result_text(&messages, id)).collect();
    assert_eq!(texts, ["1", "2", "3"]);
}

#[tokio::test]
async fn calls_that_never_run_get_start_and_end_events() {
    let mut cut = llm_core::AssistantMessage {
        content: vec![llm_core::AssistantContent::ToolCall(llm_core::ToolCall {
            id: "1".into(),
            name: "t".into(),
            arguments: json!({}),
            thought_signature: None,
            arguments_incomplete: false,
        })],
        stop_reason: StopReason::Length,
        ..Default::default()
    };
    for stop in [StopReason::Length, StopReason::Stop, StopReason::Error] {
        cut.stop_reason = stop;
        let provider = ScriptedProvider::new(
            "scripted",
            [ScriptedTurn::from_message(&cut, 4), text_turn("x")],
        );
        let a = agent(&provider, |_| {});
        let events =
            collect(a.run(ctx(vec![sleepy("t", 1, "x")]), vec![Message::user("go")])).await;
        let starts = events
            .iter()
            .filter(|e| matches!(e, AgentEvent::ToolExecutionStart { tool_call_id, .. } if tool_call_id == "1"))
            .count();
        let ends: Vec<bool> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolExecutionEnd { execution_started, .. } => Some(*execution_started),
                _ => None,
            })
            .collect();
        assert_eq!((starts, ends), (1, vec![false]), "{stop:?}");
    }
}

#[tokio::test]
async fn messages_still_queued_at_the_end_come_back_in_the_outcome() {
    let provider = ScriptedProvider::new("scripted", [tool_turn(&[("1", "t", json!({}))])]);
    let a = agent(&provider, |c| c.max_turns = Some(1));
    let run = a.run(ctx(vec![sleepy("t", 1, "x")]), vec![Message::user("go")]);
    // One steering message goes with the first request; the turn limit stops the rest.
    run.steering().push(Message::user("steer-a"));
    run.steering().push(Message::user("steer-b"));
    run.follow_up().push(Message::user("follow"));
    let outcome = run.finish().await;
    assert_eq!(outcome.reason, EndReason::MaxTurns);
    let texts: Vec<String> = outcome
        .queued
        .iter()
        .filter_map(|m| match m {
            Message::User(u) => Some(text_of(&u.content.blocks())),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["steer-b", "follow"]);
}

#[tokio::test]
async fn a_call_waiting_for_a_slot_says_when_it_really_starts() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "t", json!({})), ("2", "t", json!({}))]), text_turn("x")],
    );
    let a = agent(&provider, |c| c.max_concurrency = Some(1));
    let events = collect(a.run(ctx(vec![sleepy("t", 5, "x")]), vec![Message::user("go")])).await;
    let order: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionStart { tool_call_id, .. } => {
                Some(format!("start {tool_call_id}"))
            }
            AgentEvent::ToolExecutionRunning { tool_call_id, .. } => {
                Some(format!("running {tool_call_id}"))
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, .. } => {
                Some(format!("end {tool_call_id}"))
            }
            _ => None,
        })
        .collect();
    assert_eq!(order, ["start 1", "start 2", "running 1", "end 1", "running 2", "end 2"]);
}

#[tokio::test]
async fn the_outcome_holds_the_transcript_once_and_serializes_this_runs_messages() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("c1", "t", json!({}))]), text_turn("done")],
    );
    let a = agent(&provider, |_| {});
    let mut context = ctx(vec![sleepy("t", 1, "x")]);
    context.messages = vec![Message::user("earlier"), Message::user("turns")];
    let outcome = a.run(context, vec![Message::user("go")]).finish().await;
    assert_eq!(outcome.reason, EndReason::Completed);
    // Prompt, tool call, result, answer: the end of the whole transcript.
    let all = &outcome.context.messages;
    assert_eq!(all.len(), 6);
    assert_eq!(outcome.messages(), &all[2..]);
    let stored = serde_json::to_value(&outcome).expect("serializes");
    assert_eq!(stored["messages"], serde_json::to_value(&all[2..]).expect("serializes"));
    assert_eq!(stored["context"]["messages"].as_array().map(Vec::len), Some(6));
    assert_eq!(stored["reason"], json!("completed"));
    assert!(stored.get("error").is_none() && stored.get("queued").is_none(), "{stored}");
}

#[tokio::test]
async fn an_approval_reaches_the_call_it_names_when_several_wait() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "danger", json!({})), ("2", "danger", json!({}))]), text_turn("done")],
    );
    let danger = Arc::new(AtomicUsize::new(0));
    let a = agent(&provider, |c| c.hooks = Arc::new(AskForDanger));
    let mut run = a.run(ctx(vec![counted("danger", danger.clone())]), vec![Message::user("go")]);
    let mut events = until_approval(&mut run).await;
    events.extend(until_approval(&mut run).await);
    let asked: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ApprovalRequested { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(asked, ["1", "2"]);
    // The second is approved, the first denied: each decision reaches the call it names.
    run.approvals().approve("2");
    run.approvals().deny("1", Some("not that one".into()));
    let rest = tokio::time::timeout(std::time::Duration::from_secs(10), collect(run))
        .await
        .expect("both decisions are taken");
    events.extend(rest);
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    assert_eq!(danger.load(Ordering::SeqCst), 1);
    assert_eq!(result_text(&messages, "2"), "ran");
    assert!(result_text(&messages, "1").contains("not that one"), "{messages:?}");
    assert_invariant(&messages);
}

#[tokio::test]
async fn a_run_stored_while_a_hook_resolves_a_tool_asks_for_it_again() {
    struct Resolving;
    impl AgentHooks for Resolving {
        fn resolve_deferred_tool<'a>(
            &'a self,
            _info: CallInfo<'a>,
        ) -> BoxFuture<'a, Result<Option<AgentTool>, ToolError>> {
            // The resolver is slow: the run is stored while it works.
            Box::pin(std::future::pending())
        }
    }
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "later", json!({}))]), text_turn("ok")],
    );
    let a = agent(&provider, |c| c.hooks = Arc::new(Resolving));
    let mut run = a.run(ctx(vec![]), vec![Message::user("go")]);
    while let Ok(Some(_)) =
        tokio::time::timeout(std::time::Duration::from_millis(200), run.next()).await
    {}
    let machine = run.machine().expect("the run waits for the resolver");
    let restored = AgentMachine::from_json(&machine.to_json().expect("stores")).expect("restores");
    for m in [machine, &restored] {
        let asks: Vec<String> = m
            .outstanding()
            .iter()
            .filter(|c| matches!(c, Command::ResolveTool { .. }))
            .map(|c| format!("{c:?}"))
            .collect();
        assert_eq!(asks.len(), 1, "{:?}", m.outstanding());
    }
}

#[test]
fn a_stored_hook_error_reads_back_with_the_hooks_name() {
    for hook in ["prepare_next_turn", "api_key", "transform_context", "should_stop_after_turn"] {
        let stored = json!({"kind": "hook_failed", "hook": hook, "message": "m"});
        let error: AgentError = serde_json::from_value(stored).expect("reads");
        assert!(matches!(error, AgentError::HookFailed { hook: h, .. } if h == hook), "{error:?}");
    }
    let stored = json!({"kind": "hook_panicked", "hook": "not_a_hook", "message": "m"});
    let error: AgentError = serde_json::from_value(stored).expect("reads");
    assert!(matches!(error, AgentError::HookPanicked { hook: "unknown", .. }), "{error:?}");
}

/// Records what `should_stop_after_turn` is shown, and stops once a result says "stop".
#[derive(Default)]
struct StopWhenToldTo {
    seen: std::sync::Mutex<Vec<(Vec<String>, Vec<String>)>>,
}

impl AgentHooks for StopWhenToldTo {
    fn should_stop_after_turn(
        &self,
        message: &llm_core::AssistantMessage,
        results: &[llm_core::ToolResultMessage],
    ) -> bool {
        let calls = message.tool_calls().map(|c| c.id.clone()).collect();
        let texts: Vec<String> = results.iter().map(|r| r.text()).collect();
        let stop = texts.iter().any(|t| t == "stop");
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((calls, texts));
        stop
    }
}

#[tokio::test]
async fn the_stop_hook_is_shown_each_turns_response_and_results() {
    let provider = ScriptedProvider::new(
        "scripted",
        [
            tool_turn(&[("1", "go", json!({}))]),
            tool_turn(&[("2", "halt", json!({})), ("3", "go", json!({}))]),
            text_turn("never"),
        ],
    );
    let hook = Arc::new(StopWhenToldTo::default());
    let a = agent(&provider, |c| c.hooks = hook.clone());
    let tools = vec![crate::sleepy("go", 1, "go on"), crate::sleepy("halt", 1, "stop")];
    let events = collect(a.run(ctx(tools), vec![Message::user("go")])).await;
    assert_eq!(end(&events).1, EndReason::StopHook);
    assert_eq!(provider.requests().len(), 2);
    let seen = hook.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        seen,
        [(owned(&["1"]), owned(&["go on"])), (owned(&["2", "3"]), owned(&["stop", "go on"])),]
    );
}

#[test]
fn a_machine_is_idle_only_until_it_starts() {
    let mut machine = AgentMachine::new(
        MachineSettings::default(),
        ctx(Vec::new()),
        Arc::new(crate::model()),
        Arc::default(),
    );
    assert!(machine.is_idle());
    let mut out = Vec::new();
    machine.handle(Input::Start(vec![Message::user("go")]), 1, &mut out);
    assert!(!machine.is_idle());
    assert!(!out.is_empty());
}

#[tokio::test]
async fn a_repeated_call_id_gets_the_first_free_numbered_suffix() {
    // `a-2` is taken by another call of the same response: the second `a` becomes `a-3`.
    let provider = ScriptedProvider::new(
        "scripted",
        [
            tool_turn(&[("a", "t", json!({})), ("a-2", "t", json!({})), ("a", "t", json!({}))]),
            text_turn("done"),
        ],
    );
    let a = agent(&provider, |_| {});
    let events =
        collect(a.run(ctx(vec![crate::sleepy("t", 1, "x")]), vec![Message::user("go")])).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    let ids: Vec<String> = results(&messages).iter().map(|r| r.tool_call_id.clone()).collect();
    assert_eq!(ids, ["a", "a-2", "a-3"]);
    assert_invariant(&messages);
}
