//! agent-core behaviour, driven through the scripted provider: OpenClaw's loop, with
//! one result per call, no cut-off call run, and `stop_after_batch`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]
#![allow(clippy::disallowed_methods, reason = "tests read their own process environment")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agent_core::*;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use llm_core::{
    AssistantContent, AssistantMessage, Message, Model, StopReason, TextContent, Tool, ToolCall,
    ToolResultMessage,
    raw::{ScriptedProvider, ScriptedTurn},
};
use serde_json::{Value, json};

mod e2e;
mod guarantees;
mod loop_details;
mod machine;
mod outcome;
mod output;
mod planned;
mod random;
mod stepping;

pub(crate) fn model() -> Model {
    Model {
        id: "scripted-1".into(),
        api: "scripted".into(),
        provider: "scripted".into(),
        ..Model::default()
    }
}

pub(crate) fn tool_turn(calls: &[(&str, &str, Value)]) -> ScriptedTurn {
    let message = AssistantMessage {
        content: calls
            .iter()
            .map(|(id, name, args)| {
                AssistantContent::ToolCall(ToolCall {
                    id: (*id).into(),
                    name: (*name).into(),
                    arguments: args.clone(),
                    thought_signature: None,
                    arguments_incomplete: false,
                })
            })
            .collect(),
        stop_reason: StopReason::ToolUse,
        ..AssistantMessage::default()
    };
    ScriptedTurn::from_message(&message, 7)
}

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

pub(crate) fn schema_path() -> Value {
    json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
}

pub(crate) fn open_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

/// A tool that sleeps `ms` then answers `text`.
pub(crate) fn sleepy(name: &str, ms: u64, text: &'static str) -> AgentTool {
    AgentTool::new(
        Tool { name: name.into(), description: "sleeps".into(), parameters: open_schema() },
        move |_inv: ToolInvocation| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(ToolOutput::text(text))
        },
    )
}

pub(crate) fn agent(
    provider: &ScriptedProvider,
    configure: impl FnOnce(&mut AgentConfig),
) -> Agent {
    let mut config = AgentConfig::new(model(), Arc::new(provider.clone()));
    configure(&mut config);
    Agent::new(config)
}

/// Every event of a run. A run that never ends fails the test after 30 s instead of
/// hanging the binary (a loop that stops advancing is a bug to report, not to wait out).
pub(crate) async fn collect(run: AgentRun) -> Vec<AgentEvent> {
    match tokio::time::timeout(std::time::Duration::from_secs(30), run.collect()).await {
        Ok(events) => events,
        Err(_) => panic!("the run did not end within 30 s"),
    }
}

fn kinds(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| {
            !matches!(e, AgentEvent::MessageUpdate { .. } | AgentEvent::ToolExecutionRunning { .. })
        })
        .map(|e| match e {
            AgentEvent::AgentStart => "agent_start".to_owned(),
            AgentEvent::AgentEnd { reason, .. } => format!("agent_end {reason:?}"),
            AgentEvent::TurnStart => "turn_start".to_owned(),
            AgentEvent::TurnEnd { .. } => "turn_end".to_owned(),
            AgentEvent::MessageStart { message } => format!("message_start {}", role(message)),
            AgentEvent::MessageEnd { message } => format!("message_end {}", role(message)),
            AgentEvent::ToolExecutionStart { tool_call_id, .. } => {
                format!("tool_start {tool_call_id}")
            }
            AgentEvent::ToolExecutionUpdate { tool_call_id, .. } => {
                format!("tool_update {tool_call_id}")
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, .. } => format!("tool_end {tool_call_id}"),
            _ => "other".to_owned(),
        })
        .collect()
}

fn role(m: &Message) -> &'static str {
    match m {
        Message::User(_) => "user",
        Message::Assistant(_) => "assistant",
        Message::ToolResult(_) => "toolResult",
    }
}

pub(crate) fn end(events: &[AgentEvent]) -> (Vec<Message>, EndReason) {
    let ends: Vec<_> = events.iter().filter(|e| matches!(e, AgentEvent::AgentEnd { .. })).collect();
    assert_eq!(ends.len(), 1, "exactly one agent_end");
    assert!(matches!(events.last(), Some(AgentEvent::AgentEnd { .. })), "agent_end is last");
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

pub(crate) fn assert_invariant(messages: &[Message]) {
    let violations = check_tool_results(messages);
    assert!(violations.is_empty(), "transcript invariant violated: {violations:?}");
}

/// A run's queues, for tools created before the run.
#[derive(Clone, Default)]
pub(crate) struct RunQueues(Arc<std::sync::OnceLock<(MessageQueue, MessageQueue)>>);

impl RunQueues {
    pub(crate) fn attach(&self, run: &AgentRun) {
        let _ = self.0.set((run.steering(), run.follow_up()));
    }
    pub(crate) fn steering(&self) -> MessageQueue {
        self.0.get().unwrap().0.clone()
    }
    pub(crate) fn follow_up(&self) -> MessageQueue {
        self.0.get().unwrap().1.clone()
    }
}

pub(crate) fn ctx(tools: Vec<AgentTool>) -> AgentContext {
    AgentContext { system_prompt: Some("sys".into()), messages: vec![], tools }
}

#[tokio::test]
async fn parallel_batch_orders_events_and_results() {
    let provider = ScriptedProvider::new(
        "scripted",
        [
            tool_turn(&[
                ("A", "slow", json!({})),
                ("B", "fast", json!({})),
                ("C", "nope", json!({})),
            ]),
            text_turn("ok"),
        ],
    );
    let a = agent(&provider, |_| {});
    let events = collect(a.run(
        ctx(vec![sleepy("slow", 80, "a"), sleepy("fast", 5, "b")]),
        vec![Message::user("go")],
    ))
    .await;
    let k = kinds(&events);
    let tool_events: Vec<&String> = k.iter().filter(|s| s.starts_with("tool_")).collect();
    assert_eq!(
        tool_events,
        ["tool_start A", "tool_start B", "tool_start C", "tool_end C", "tool_end B", "tool_end A"]
    );
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    let r = results(&messages);
    assert_eq!(r.iter().map(|r| r.tool_call_id.as_str()).collect::<Vec<_>>(), ["A", "B", "C"]);
    assert_eq!(r[2].text(), "Tool nope not found");
    assert!(r[2].is_error);
    assert_eq!(r[0].text(), "a");
    assert_invariant(&messages);
    let not_started = events.iter().any(|e| {
        matches!(e, AgentEvent::ToolExecutionEnd { tool_call_id, execution_started: false, .. } if tool_call_id == "C")
    });
    assert!(not_started);
}

#[tokio::test]
async fn one_sequential_tool_downgrades_the_batch() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("A", "slow", json!({})), ("B", "seq", json!({}))]), text_turn("ok")],
    );
    let a = agent(&provider, |_| {});
    let seq = sleepy("seq", 1, "s").with_mode(ExecutionMode::Sequential);
    let events =
        collect(a.run(ctx(vec![sleepy("slow", 30, "a"), seq]), vec![Message::user("go")])).await;
    let k = kinds(&events);
    let pos = |s: &str| k.iter().position(|x| x == s).unwrap();
    assert!(pos("tool_end A") < pos("tool_start B"), "{k:?}");
    assert!(pos("message_end toolResult") < pos("tool_start B"), "results written per call: {k:?}");
    assert_invariant(&end(&events).0);
}

struct Blocker;
impl AgentHooks for Blocker {
    fn before_tool_call<'a>(
        &'a self,
        _info: CallInfo<'a>,
        _args: &'a Value,
    ) -> BoxFuture<'a, BeforeToolCall> {
        Box::pin(async { BeforeToolCall::Block(None) })
    }
}

#[tokio::test]
async fn before_hook_blocks() {
    let ran = Arc::new(AtomicUsize::new(0));
    let ran2 = ran.clone();
    let tool = AgentTool::new(
        Tool { name: "t".into(), description: "d".into(), parameters: open_schema() },
        move |_i: ToolInvocation| {
            ran2.fetch_add(1, Ordering::SeqCst);
            async { Ok(ToolOutput::text("ran")) }
        },
    );
    let provider =
        ScriptedProvider::new("scripted", [tool_turn(&[("1", "t", json!({}))]), text_turn("ok")]);
    let a = agent(&provider, |c| c.hooks = Arc::new(Blocker));
    let events = collect(a.run(ctx(vec![tool]), vec![Message::user("go")])).await;
    let (messages, _) = end(&events);
    let r = results(&messages);
    assert_eq!(r[0].text(), BLOCKED_TEXT);
    assert!(r[0].is_error);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn validation_failure_is_sent_back_and_model_gets_another_turn() {
    let tool = AgentTool::new(
        Tool { name: "read".into(), description: "d".into(), parameters: schema_path() },
        |_i: ToolInvocation| async { Ok(ToolOutput::text("content")) },
    );
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "read", json!({"nope": 1}))]), text_turn("sorry")],
    );
    let a = agent(&provider, |_| {});
    let events = collect(a.run(ctx(vec![tool]), vec![Message::user("go")])).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    let r = results(&messages);
    assert!(r[0].text().starts_with("Validation failed for tool \"read\":"), "{}", r[0].text());
    assert!(r[0].text().contains("Received arguments:"));
    assert_eq!(provider.requests().len(), 2);
}

#[tokio::test]
async fn prepare_arguments_feeds_validation_but_events_show_raw_args() {
    let seen = Arc::new(std::sync::Mutex::new(Value::Null));
    let seen2 = seen.clone();
    let tool = AgentTool::new(
        Tool { name: "read".into(), description: "d".into(), parameters: schema_path() },
        move |i: ToolInvocation| {
            *seen2.lock().unwrap() = i.arguments.clone();
            async { Ok(ToolOutput::text("ok")) }
        },
    )
    .with_prepare_arguments(|mut v: Value| {
        if let Some(f) = v.as_object_mut().and_then(|o| o.remove("file")) {
            v["path"] = f;
        }
        Ok(v)
    });
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "read", json!({"file": "a.txt"}))]), text_turn("ok")],
    );
    let a = agent(&provider, |_| {});
    let events = collect(a.run(ctx(vec![tool]), vec![Message::user("go")])).await;
    assert_eq!(*seen.lock().unwrap(), json!({"path": "a.txt"}));
    let start_args = events.iter().find_map(|e| match e {
        AgentEvent::ToolExecutionStart { args, .. } => Some(args.clone()),
        _ => None,
    });
    assert_eq!(start_args, Some(json!({"file": "a.txt"})));
}

struct Deferred {
    calls: AtomicUsize,
    return_name: &'static str,
    fail: bool,
}
impl AgentHooks for Deferred {
    fn resolve_deferred_tool<'a>(
        &'a self,
        info: CallInfo<'a>,
    ) -> BoxFuture<'a, Result<Option<AgentTool>, ToolError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let _ = info.call;
        let name = self.return_name;
        let fail = self.fail;
        Box::pin(async move {
            if fail {
                return Err(ToolError::from("registry offline"));
            }
            Ok(Some(sleepy(name, 1, "deferred ran")))
        })
    }
}

#[tokio::test]
async fn deferred_tool_is_resolved_once_appended_and_listed_next_request() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "late", json!({}))]), text_turn("ok")],
    );
    let hooks = Arc::new(Deferred { calls: AtomicUsize::new(0), return_name: "late", fail: false });
    let a = agent(&provider, |c| c.hooks = hooks.clone());
    let events = collect(a.run(ctx(vec![]), vec![Message::user("go")])).await;
    let (messages, _) = end(&events);
    assert_eq!(results(&messages)[0].text(), "deferred ran");
    assert_eq!(hooks.calls.load(Ordering::SeqCst), 1);
    let reqs = provider.requests();
    assert!(reqs[0].tools.is_empty());
    assert_eq!(reqs[1].tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["late"]);
}

#[tokio::test]
async fn deferred_tool_wrong_name_or_failure_is_an_error_result() {
    for (return_name, fail, expected) in [
        ("other", false, "Deferred tool resolver returned \"other\" for requested \"late\""),
        ("late", true, "registry offline"),
    ] {
        let provider = ScriptedProvider::new(
            "scripted",
            [tool_turn(&[("1", "late", json!({}))]), text_turn("ok")],
        );
        let hooks = Arc::new(Deferred { calls: AtomicUsize::new(0), return_name, fail });
        let a = agent(&provider, |c| c.hooks = hooks.clone());
        let events = collect(a.run(ctx(vec![]), vec![Message::user("go")])).await;
        let r = results(&end(&events).0);
        assert_eq!(r[0].text(), expected);
        assert!(r[0].is_error);
        assert_eq!(hooks.calls.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn tool_error_and_panic_become_error_results_and_the_loop_continues() {
    // A panicking tool, too, gets an error result.
    let boom = AgentTool::new(
        Tool { name: "boom".into(), description: "d".into(), parameters: open_schema() },
        |_i: ToolInvocation| async { Err::<ToolOutput, _>(ToolError::from("boom")) },
    );
    let panics = AgentTool::new(
        Tool { name: "panics".into(), description: "d".into(), parameters: open_schema() },
        |_i: ToolInvocation| async {
            if true {
                panic!("tool exploded");
            }
            Ok(ToolOutput::default())
        },
    );
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "boom", json!({})), ("2", "panics", json!({}))]), text_turn("ok")],
    );
    let a = agent(&provider, |_| {});
    let events = collect(a.run(ctx(vec![boom, panics]), vec![Message::user("go")])).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    let r = results(&messages);
    assert_eq!((r[0].text().as_str(), r[0].is_error), ("boom", true));
    assert_eq!((r[1].text().as_str(), r[1].is_error), ("tool exploded", true));
    assert_invariant(&messages);
}

struct After {
    terminate_only: Option<&'static str>,
    stop_after_batch: bool,
    panic: bool,
}
impl AgentHooks for After {
    fn after_tool_call<'a>(
        &'a self,
        info: CallInfo<'a>,
        _result: &'a ToolOutput,
        _is_error: bool,
    ) -> BoxFuture<'a, Option<AfterToolCall>> {
        let id = info.call.id.clone();
        Box::pin(async move {
            if self.panic {
                panic!("hook exploded");
            }
            let terminate = self.terminate_only.map(|only| id == only);
            Some(AfterToolCall {
                content: Some(vec![llm_core::UserContent::text("overridden")]),
                is_error: Some(true),
                terminate,
                stop_after_batch: self.stop_after_batch,
                ..AfterToolCall::default()
            })
        })
    }
}

#[tokio::test]
async fn after_hook_overrides_and_terminate_stops_the_loop() {
    let tool = sleepy("t", 1, "orig").with_label("T");
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "t", json!({}))]), text_turn("never")],
    );
    let a = agent(&provider, |c| {
        c.hooks =
            Arc::new(After { terminate_only: Some("1"), stop_after_batch: false, panic: false })
    });
    let events = collect(a.run(ctx(vec![tool]), vec![Message::user("go")])).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Terminated);
    let r = results(&messages);
    assert_eq!((r[0].text().as_str(), r[0].is_error), ("overridden", true));
    assert_eq!(provider.requests().len(), 1);
}

#[tokio::test]
async fn terminate_needs_every_call() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "t", json!({})), ("2", "t", json!({}))]), text_turn("again")],
    );
    let a = agent(&provider, |c| {
        c.hooks =
            Arc::new(After { terminate_only: Some("1"), stop_after_batch: false, panic: false })
    });
    let events = collect(a.run(ctx(vec![sleepy("t", 1, "x")]), vec![Message::user("go")])).await;
    assert_eq!(end(&events).1, EndReason::Completed);
    assert_eq!(provider.requests().len(), 2);
}

#[tokio::test]
async fn stop_after_batch_writes_results_then_stops() {
    // The batch's results are written before the run stops.
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "t", json!({}))]), text_turn("never")],
    );
    let a = agent(&provider, |c| {
        c.hooks = Arc::new(After { terminate_only: None, stop_after_batch: true, panic: false })
    });
    let events = collect(a.run(ctx(vec![sleepy("t", 1, "x")]), vec![Message::user("go")])).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::StopAfterBatch);
    assert_eq!(results(&messages).len(), 1);
    assert_eq!(provider.requests().len(), 1);
}

#[tokio::test]
async fn hook_panic_becomes_an_error_result() {
    let provider =
        ScriptedProvider::new("scripted", [tool_turn(&[("1", "t", json!({}))]), text_turn("ok")]);
    let a = agent(&provider, |c| {
        c.hooks = Arc::new(After { terminate_only: None, stop_after_batch: false, panic: true })
    });
    let events = collect(a.run(ctx(vec![sleepy("t", 1, "x")]), vec![Message::user("go")])).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    let r = results(&messages);
    assert_eq!((r[0].text().as_str(), r[0].is_error), ("hook exploded", true));
}

#[tokio::test]
async fn steering_is_injected_after_turn_and_follow_up_only_at_the_end() {
    let provider = ScriptedProvider::new(
        "scripted",
        [
            tool_turn(&[("1", "steerer", json!({}))]),
            text_turn("after steering"),
            text_turn("after follow-up"),
        ],
    );
    let queues = RunQueues::default();
    let q = queues.clone();
    let steerer = AgentTool::new(
        Tool { name: "steerer".into(), description: "d".into(), parameters: open_schema() },
        move |_i: ToolInvocation| {
            q.steering().push(Message::user("steer!"));
            q.follow_up().push(Message::user("follow!"));
            async { Ok(ToolOutput::text("queued")) }
        },
    );
    let a = agent(&provider, |_| {});
    let run = a.run(ctx(vec![steerer]), vec![Message::user("go")]);
    queues.attach(&run);
    let events = collect(run).await;
    let (messages, _) = end(&events);
    let reqs = provider.requests();
    assert_eq!(reqs.len(), 3);
    let last_user = |c: &llm_core::Context| match c.messages.last() {
        Some(Message::User(u)) => format!("{:?}", u.content),
        other => format!("{other:?}"),
    };
    assert!(last_user(&reqs[1]).contains("steer!"), "{}", last_user(&reqs[1]));
    assert!(last_user(&reqs[2]).contains("follow!"));
    // The steering message comes after the first turn's end.
    let k = kinds(&events);
    let first_turn_end = k.iter().position(|s| s == "turn_end").unwrap();
    let steer_start =
        k.iter().enumerate().position(|(i, s)| i > first_turn_end && s == "message_start user");
    assert!(steer_start.is_some());
    assert_invariant(&messages);
}

struct StopNow;
impl AgentHooks for StopNow {
    fn should_stop_after_turn(&self, _m: &AssistantMessage, _r: &[ToolResultMessage]) -> bool {
        true
    }
}

#[tokio::test]
async fn should_stop_after_turn_ends_the_run() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "t", json!({}))]), text_turn("never")],
    );
    let a = agent(&provider, |c| c.hooks = Arc::new(StopNow));
    let events = collect(a.run(ctx(vec![sleepy("t", 1, "x")]), vec![Message::user("go")])).await;
    assert_eq!(end(&events).1, EndReason::StopHook);
    assert_eq!(provider.requests().len(), 1);
}

fn aborter(name: &str, token: llm_core::CancellationToken) -> AgentTool {
    AgentTool::new(
        Tool { name: name.into(), description: "d".into(), parameters: open_schema() },
        move |_i: ToolInvocation| {
            token.cancel();
            async { Ok(ToolOutput::text("aborted the run")) }
        },
    )
}

#[tokio::test]
async fn abort_from_inside_a_tool_gives_the_openclaw_sequence() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "abort", json!({}))]), text_turn("never")],
    );
    let token = llm_core::CancellationToken::new();
    let a = agent(&provider, |c| c.options.cancel = token.clone());
    let events =
        collect(a.run(ctx(vec![aborter("abort", token.clone())]), vec![Message::user("go")])).await;
    assert_eq!(
        kinds(&events),
        [
            "agent_start",
            "turn_start",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "message_end assistant",
            "tool_start 1",
            "tool_end 1",
            "message_start toolResult",
            "message_end toolResult",
            "turn_end",
            "turn_start",
            "message_start assistant",
            "message_end assistant",
            "turn_end",
            "agent_end Aborted",
        ]
    );
    assert_eq!(provider.requests().len(), 1);
    assert_invariant(&end(&events).0);
}

#[tokio::test]
async fn abort_during_sequential_batch_gives_every_call_a_result() {
    // Remaining calls still get results (every call gets exactly one).
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[
            ("1", "slow", json!({})),
            ("2", "slow", json!({})),
            ("3", "slow", json!({})),
        ])],
    );
    let a = agent(&provider, |c| {
        c.tool_execution = ExecutionMode::Sequential;
        // No grace: a running call that ignores the token is cut off at once.
        c.abort_grace = Duration::ZERO;
    });
    let mut run = a.run(ctx(vec![sleepy("slow", 50, "done")]), vec![Message::user("go")]);
    let token = run.cancel_token();
    let mut events = Vec::new();
    while let Some(e) = run.next().await {
        if matches!(&e, AgentEvent::ToolExecutionStart { tool_call_id, .. } if tool_call_id == "2")
        {
            token.cancel();
        }
        events.push(e);
    }
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Aborted);
    let r = results(&messages);
    assert_eq!(r.len(), 3);
    assert_eq!(r[0].text(), "done");
    assert_eq!(r[1].text(), ABORTED_TEXT);
    assert_eq!(r[2].text(), ABORTED_TEXT);
    assert_invariant(&messages);
}

#[tokio::test]
async fn abort_during_parallel_batch_aborts_running_tools() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "fast", json!({})), ("2", "slow", json!({}))])],
    );
    let a = agent(&provider, |_| {});
    let mut run = a.run(
        ctx(vec![sleepy("fast", 1, "f"), sleepy("slow", 10_000, "s")]),
        vec![Message::user("go")],
    );
    let token = run.cancel_token();
    let mut events = Vec::new();
    while let Some(e) = run.next().await {
        if matches!(&e, AgentEvent::ToolExecutionEnd { tool_call_id, .. } if tool_call_id == "1") {
            token.cancel();
        }
        events.push(e);
    }
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Aborted);
    let r = results(&messages);
    assert_eq!(r[0].text(), "f");
    assert_eq!(r[1].text(), ABORTED_TEXT);
    assert_invariant(&messages);
}

#[tokio::test]
async fn progress_updates_arrive_before_the_end_event() {
    let tool = AgentTool::new(
        Tool { name: "p".into(), description: "d".into(), parameters: open_schema() },
        |i: ToolInvocation| async move {
            i.progress.update(ToolOutput::text("25%"));
            i.progress.update(ToolOutput::text("75%"));
            Ok(ToolOutput::text("100%"))
        },
    );
    let provider =
        ScriptedProvider::new("scripted", [tool_turn(&[("1", "p", json!({}))]), text_turn("ok")]);
    let a = agent(&provider, |_| {});
    let events = collect(a.run(ctx(vec![tool]), vec![Message::user("go")])).await;
    let k: Vec<String> = kinds(&events).into_iter().filter(|s| s.starts_with("tool_")).collect();
    assert_eq!(k, ["tool_start 1", "tool_update 1", "tool_update 1", "tool_end 1"]);
}

#[tokio::test]
async fn continue_checks_the_transcript() {
    let provider = ScriptedProvider::new("scripted", [text_turn("continued")]);
    let a = agent(&provider, |_| {});
    assert_eq!(a.continue_run(ctx(vec![])).unwrap_err(), ContinueError::Empty);
    let mut c = ctx(vec![]);
    c.messages.push(Message::Assistant(Box::default()));
    assert_eq!(
        a.continue_run(c).unwrap_err().to_string(),
        "Cannot continue from message role: assistant"
    );
    let mut c = ctx(vec![]);
    c.messages.push(Message::user("hi"));
    let events = collect(a.continue_run(c).unwrap()).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    assert_eq!(messages.len(), 1, "pre-existing messages are not re-emitted");
}

#[tokio::test]
async fn length_stop_never_executes_the_cut_off_call() {
    // A call cut off by `length` is never run; it gets an error result.
    let ran = Arc::new(AtomicUsize::new(0));
    let ran2 = ran.clone();
    let tool = AgentTool::new(
        Tool { name: "write".into(), description: "d".into(), parameters: open_schema() },
        move |_i: ToolInvocation| {
            ran2.fetch_add(1, Ordering::SeqCst);
            async { Ok(ToolOutput::text("written")) }
        },
    );
    let mut message = AssistantMessage {
        content: vec![AssistantContent::ToolCall(ToolCall {
            id: "1".into(),
            name: "write".into(),
            arguments: json!({"content": "trunc"}),
            thought_signature: None,
            arguments_incomplete: false,
        })],
        stop_reason: StopReason::Length,
        ..AssistantMessage::default()
    };
    let provider = ScriptedProvider::new("scripted", [ScriptedTurn::from_message(&message, 3)]);
    let a = agent(&provider, |_| {});
    let events = collect(a.run(ctx(vec![tool]), vec![Message::user("go")])).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Length);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    let r = results(&messages);
    assert!(r[0].is_error && r[0].text().contains("cut off"), "{}", r[0].text());
    assert_invariant(&messages);
    message.stop_reason = StopReason::Stop;
}

#[tokio::test]
async fn provider_error_ends_the_run_with_error_results_for_partial_calls() {
    let message = AssistantMessage {
        content: vec![AssistantContent::ToolCall(ToolCall {
            id: "1".into(),
            name: "t".into(),
            arguments: json!({}),
            thought_signature: None,
            arguments_incomplete: false,
        })],
        stop_reason: StopReason::Error,
        error_message: Some("overloaded".into()),
        ..AssistantMessage::default()
    };
    let provider = ScriptedProvider::new("scripted", [ScriptedTurn::from_message(&message, 3)]);
    let a = agent(&provider, |_| {});
    let events = collect(a.run(ctx(vec![sleepy("t", 1, "x")]), vec![Message::user("go")])).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Error);
    assert_invariant(&messages);
}

#[tokio::test]
async fn max_turns_is_reported() {
    let provider = ScriptedProvider::new(
        "scripted",
        [
            tool_turn(&[("1", "t", json!({}))]),
            tool_turn(&[("2", "t", json!({}))]),
            text_turn("never"),
        ],
    );
    let a = agent(&provider, |c| c.max_turns = Some(2));
    let events = collect(a.run(ctx(vec![sleepy("t", 1, "x")]), vec![Message::user("go")])).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::MaxTurns);
    assert_eq!(provider.requests().len(), 2);
    assert_invariant(&messages);
}

#[tokio::test]
async fn concurrency_limit_is_respected() {
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r2, p2) = (running.clone(), peak.clone());
    let tool = AgentTool::new(
        Tool { name: "t".into(), description: "d".into(), parameters: open_schema() },
        move |_i: ToolInvocation| {
            let (r, p) = (r2.clone(), p2.clone());
            async move {
                let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                r.fetch_sub(1, Ordering::SeqCst);
                Ok(ToolOutput::text("ok"))
            }
        },
    );
    let calls: Vec<(String, Value)> = (0..6).map(|i| (i.to_string(), json!({}))).collect();
    let call_refs: Vec<(&str, &str, Value)> =
        calls.iter().map(|(id, a)| (id.as_str(), "t", a.clone())).collect();
    let provider = ScriptedProvider::new("scripted", [tool_turn(&call_refs), text_turn("ok")]);
    let a = agent(&provider, |c| c.max_concurrency = Some(2));
    let events = collect(a.run(ctx(vec![tool]), vec![Message::user("go")])).await;
    assert_eq!(peak.load(Ordering::SeqCst), 2);
    let r = results(&end(&events).0);
    assert_eq!(
        r.iter().map(|r| r.tool_call_id.clone()).collect::<Vec<_>>(),
        ["0", "1", "2", "3", "4", "5"]
    );
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

#[tokio::test]
async fn typed_tools_receive_validated_coerced_arguments() {
    let add = AgentTool::typed(
        "add",
        "Adds two integers",
        |args: AddArgs, _inv: ToolInvocation| async move {
            Ok(ToolOutput::text((args.a + args.b).to_string()))
        },
    );
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "add", json!({"a": "2", "b": 3}))]), text_turn("5")],
    );
    let a = agent(&provider, |_| {});
    let events = collect(a.run(ctx(vec![add]), vec![Message::user("add")])).await;
    let r = results(&end(&events).0);
    assert_eq!((r[0].text().as_str(), r[0].is_error), ("5", false));
}

#[tokio::test]
async fn opaque_provider_content_is_kept_and_never_executed() {
    let ran = Arc::new(AtomicUsize::new(0));
    let ran2 = Arc::clone(&ran);
    let tool = AgentTool::new(
        Tool { name: "web_search".into(), description: "d".into(), parameters: open_schema() },
        move |_i: ToolInvocation| {
            ran2.fetch_add(1, Ordering::SeqCst);
            async { Ok(ToolOutput::text("searched")) }
        },
    );
    // A server-side tool block that names a registered tool, next to one real call.
    let server = AssistantContent::ProviderContent(llm_core::ProviderContent {
        wire_type: "server_tool_use".into(),
        data: json!({"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}),
    });
    let message = AssistantMessage {
        content: vec![
            server.clone(),
            AssistantContent::ToolCall(ToolCall {
                id: "1".into(),
                name: "web_search".into(),
                arguments: json!({}),
                thought_signature: None,
                arguments_incomplete: false,
            }),
        ],
        stop_reason: StopReason::ToolUse,
        ..AssistantMessage::default()
    };
    let provider = ScriptedProvider::new(
        "scripted",
        [ScriptedTurn::from_message(&message, 3), text_turn("done")],
    );
    let a = agent(&provider, |_| {});
    let events = collect(a.run(ctx(vec![tool]), vec![Message::user("go")])).await;
    let (messages, _) = end(&events);
    assert_eq!(ran.load(Ordering::SeqCst), 1, "only the real call runs");
    let r = results(&messages);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].tool_call_id, "1");
    let Some(Message::Assistant(first)) =
        messages.iter().find(|m| matches!(m, Message::Assistant(_)))
    else {
        panic!("no assistant message")
    };
    assert_eq!(first.content[0], server);
    assert_invariant(&messages);
}
