//! The loop's guarantees under every failure (one test per defect),
//! and the per-turn hooks.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::*;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use llm_core::{
    ApiKey, AssistantContent, AssistantMessage, AssistantStream, Context, Message, Model, Provider,
    StopReason, StreamOptions, TextContent, Tool, ToolCall, ToolResultMessage,
    raw::{ScriptedProvider, ScriptedTurn},
};
use serde_json::json;

use crate::{
    RunQueues, agent, assert_invariant, collect, ctx, end, model, open_schema, results, sleepy,
    text_turn, tool_turn,
};

fn tool(
    name: &str,
    f: impl Fn(ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>>
    + Send
    + Sync
    + 'static,
) -> AgentTool {
    AgentTool::new(
        Tool { name: name.into(), description: "d".into(), parameters: open_schema() },
        move |inv: ToolInvocation| f(inv),
    )
}

fn ends_of(events: &[AgentEvent]) -> Vec<(String, bool, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionEnd { tool_call_id, is_error, execution_started, .. } => {
                Some((tool_call_id.clone(), *is_error, *execution_started))
            }
            _ => None,
        })
        .collect()
}

/// No update for a call after its end event; `AgentEnd` is last and the stream stays ended.
fn assert_nothing_after_end(events: &[AgentEvent]) {
    let mut ended = std::collections::HashSet::new();
    for e in events {
        match e {
            AgentEvent::ToolExecutionEnd { tool_call_id, .. } => {
                ended.insert(tool_call_id.clone());
            }
            AgentEvent::ToolExecutionUpdate { tool_call_id, .. } => {
                assert!(!ended.contains(tool_call_id), "update for {tool_call_id} after its end");
            }
            _ => {}
        }
    }
    end(events);
}

// ---- Defect 1: hooks that panic in their synchronous part ----

struct SyncPanics {
    before: bool,
    stop: bool,
    prepare_turn: bool,
}

impl AgentHooks for SyncPanics {
    fn before_tool_call<'a>(
        &'a self,
        _info: CallInfo<'a>,
        _args: &'a serde_json::Value,
    ) -> BoxFuture<'a, BeforeToolCall> {
        assert!(!self.before, "before hook exploded synchronously");
        Box::pin(async { BeforeToolCall::Allow })
    }
    fn should_stop_after_turn(&self, _m: &AssistantMessage, _r: &[ToolResultMessage]) -> bool {
        assert!(!self.stop, "stop hook exploded");
        false
    }
    fn prepare_next_turn<'a>(&'a self, _info: TurnInfo<'a>) -> BoxFuture<'a, Option<TurnUpdate>> {
        assert!(!self.prepare_turn, "prepare hook exploded");
        Box::pin(async { None })
    }
}

#[tokio::test]
async fn a_hook_panicking_before_returning_its_future_becomes_the_call_result() {
    let provider =
        ScriptedProvider::new("scripted", [tool_turn(&[("1", "t", json!({}))]), text_turn("ok")]);
    let hooks = SyncPanics { before: true, stop: false, prepare_turn: false };
    let a = agent(&provider, |c| c.hooks = Arc::new(hooks));
    let events = collect(a.run(ctx(vec![sleepy("t", 1, "x")]), vec![Message::user("go")])).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    let r = results(&messages);
    assert_eq!((r[0].text().as_str(), r[0].is_error), ("before hook exploded synchronously", true));
    assert_eq!(ends_of(&events), [("1".to_owned(), true, false)]);
    assert_invariant(&messages);
}

#[tokio::test]
async fn a_panicking_turn_hook_ends_the_run_with_a_typed_error() {
    for (stop, prepare_turn, hook) in
        [(true, false, "should_stop_after_turn"), (false, true, "prepare_next_turn")]
    {
        let provider = ScriptedProvider::new(
            "scripted",
            [tool_turn(&[("1", "t", json!({}))]), text_turn("never")],
        );
        let hooks = SyncPanics { before: false, stop, prepare_turn };
        let a = agent(&provider, |c| c.hooks = Arc::new(hooks));
        let mut run = a.run(ctx(vec![sleepy("t", 1, "x")]), vec![Message::user("go")]);
        let mut events = Vec::new();
        while let Some(e) = run.next().await {
            events.push(e);
        }
        let (messages, reason) = end(&events);
        assert_eq!(reason, EndReason::Failed, "{hook}");
        let outcome = run.outcome().unwrap();
        assert!(
            matches!(&outcome.error, Some(AgentError::HookPanicked { hook: h, .. }) if *h == hook),
            "{:?}",
            outcome.error
        );
        assert_invariant(&messages);
        // The transcript ends with an error message, not a dangling turn.
        assert!(
            matches!(messages.last(), Some(Message::Assistant(m)) if m.stop_reason == StopReason::Error)
        );
        assert!(run.next().await.is_none());
    }
}

#[tokio::test]
async fn a_panicking_deferred_resolver_and_argument_shim_are_call_results() {
    struct ResolverPanics;
    impl AgentHooks for ResolverPanics {
        fn resolve_deferred_tool<'a>(
            &'a self,
            _info: CallInfo<'a>,
        ) -> BoxFuture<'a, Result<Option<AgentTool>, ToolError>> {
            panic!("resolver exploded")
        }
    }
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "missing", json!({})), ("2", "shim", json!({}))]), text_turn("ok")],
    );
    let shim = sleepy("shim", 1, "x").with_prepare_arguments(|_| panic!("shim exploded"));
    let a = agent(&provider, |c| c.hooks = Arc::new(ResolverPanics));
    let events = collect(a.run(ctx(vec![shim]), vec![Message::user("go")])).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    let r = results(&messages);
    assert_eq!(r[0].text(), "resolver exploded");
    assert_eq!(r[1].text(), "shim exploded");
    assert_invariant(&messages);
}

// ---- Defect 2: nothing after a call's end, nothing after AgentEnd ----

/// A tool that floods progress updates from its own thread until `stop`, and
/// either ignores cancellation (never returns) or returns after `return_after`.
fn flooding(name: &str, stop: Arc<AtomicBool>, return_after: Option<u64>) -> AgentTool {
    tool(name, move |inv| {
        let stop = stop.clone();
        let sink = inv.progress.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                sink.update(ToolOutput::text("tick"));
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        Box::pin(async move {
            match return_after {
                Some(ms) => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok(ToolOutput::text("done"))
                }
                None => std::future::pending().await,
            }
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_update_after_the_end_even_from_another_thread() {
    let stop = Arc::new(AtomicBool::new(false));
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "flood", json!({}))]), text_turn("ok")],
    );
    let a = agent(&provider, |_| {});
    let mut run =
        a.run(ctx(vec![flooding("flood", stop.clone(), Some(30))]), vec![Message::user("go")]);
    let mut events = Vec::new();
    while let Some(e) = run.next().await {
        events.push(e);
    }
    // Keep the thread sending for a while after the end: nothing may arrive.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(run.next().await.is_none());
    stop.store(true, Ordering::SeqCst);
    assert!(events.iter().any(|e| matches!(e, AgentEvent::ToolExecutionUpdate { .. })));
    assert_nothing_after_end(&events);
    assert_eq!(end(&events).1, EndReason::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_update_after_an_abort_cut_a_tool_off() {
    let stop = Arc::new(AtomicBool::new(false));
    let provider = ScriptedProvider::new("scripted", [tool_turn(&[("1", "flood", json!({}))])]);
    let a = agent(&provider, |c| c.abort_grace = Duration::from_millis(20));
    let mut run =
        a.run(ctx(vec![flooding("flood", stop.clone(), None)]), vec![Message::user("go")]);
    let token = run.cancel_token();
    let mut events = Vec::new();
    while let Some(e) = run.next().await {
        if matches!(e, AgentEvent::ToolExecutionUpdate { .. }) {
            token.cancel();
        }
        events.push(e);
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(run.next().await.is_none());
    stop.store(true, Ordering::SeqCst);
    assert_nothing_after_end(&events);
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Aborted);
    assert_eq!(results(&messages)[0].text(), ABORTED_TEXT);
    assert_eq!(ends_of(&events), [("1".to_owned(), true, true)]);
    assert_invariant(&messages);
}

// ---- Defect 3: a tool that honours its token keeps its result ----

#[derive(Default)]
struct SeenAfter(Mutex<Vec<String>>);

impl AgentHooks for SeenAfter {
    fn after_tool_call<'a>(
        &'a self,
        info: CallInfo<'a>,
        result: &'a ToolOutput,
        _is_error: bool,
    ) -> BoxFuture<'a, Option<AfterToolCall>> {
        let text = match result.content.first() {
            Some(llm_core::UserContent::Text(t)) => t.text.clone(),
            _ => String::new(),
        };
        self.0.lock().unwrap().push(format!("{}={text}", info.call.id));
        Box::pin(async { None })
    }
}

fn honours_cancel(name: &str) -> AgentTool {
    tool(name, |inv| {
        Box::pin(async move {
            inv.cancel.cancelled().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(ToolOutput::text("partial work saved"))
        })
    })
}

#[tokio::test]
async fn on_abort_running_tools_get_a_grace_period_and_their_results_stand() {
    for mode in [ExecutionMode::Parallel, ExecutionMode::Sequential] {
        let provider = ScriptedProvider::new(
            "scripted",
            [tool_turn(&[("1", "fast", json!({})), ("2", "careful", json!({}))])],
        );
        let seen = Arc::new(SeenAfter::default());
        let hooks = seen.clone();
        let a = agent(&provider, |c| {
            c.hooks = hooks;
            c.tool_execution = mode;
        });
        let mut run = a.run(
            ctx(vec![sleepy("fast", 1, "f"), honours_cancel("careful")]),
            vec![Message::user("go")],
        );
        let token = run.cancel_token();
        let mut events = Vec::new();
        while let Some(e) = run.next().await {
            if matches!(&e, AgentEvent::ToolExecutionEnd { tool_call_id, .. } if tool_call_id == "1")
            {
                token.cancel();
            }
            events.push(e);
        }
        let (messages, reason) = end(&events);
        assert_eq!(reason, EndReason::Aborted);
        let r = results(&messages);
        assert_eq!(
            (r[1].text().as_str(), r[1].is_error),
            ("partial work saved", false),
            "{mode:?}"
        );
        assert!(seen.0.lock().unwrap().contains(&"2=partial work saved".to_owned()), "{mode:?}");
        assert_invariant(&messages);
    }
}

// ---- Defect 4: an abort before the first request ----

#[tokio::test]
async fn abort_before_the_first_request_opens_one_turn() {
    let provider = ScriptedProvider::new("scripted", [text_turn("never")]);
    let a = agent(&provider, |_| {});
    let run = a.run(ctx(vec![]), vec![Message::user("go")]);
    run.abort();
    let events = collect(run).await;
    let turn_starts = events.iter().filter(|e| matches!(e, AgentEvent::TurnStart)).count();
    let turn_ends = events.iter().filter(|e| matches!(e, AgentEvent::TurnEnd { .. })).count();
    assert_eq!((turn_starts, turn_ends), (1, 1));
    assert_eq!(end(&events).1, EndReason::Aborted);
    assert!(provider.requests().is_empty());
}

// ---- Defect 5: `execution_started` only for calls that ran ----

#[tokio::test]
async fn calls_queued_behind_the_concurrency_limit_never_started() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "careful", json!({})), ("2", "fast", json!({}))])],
    );
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let counted = tool("fast", move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(ToolOutput::text("f")) })
    });
    let a = agent(&provider, |c| c.max_concurrency = Some(1));
    let mut run = a.run(ctx(vec![honours_cancel("careful"), counted]), vec![Message::user("go")]);
    let token = run.cancel_token();
    let mut events = Vec::new();
    while let Some(e) = run.next().await {
        if matches!(&e, AgentEvent::ToolExecutionStart { tool_call_id, .. } if tool_call_id == "2")
        {
            token.cancel();
        }
        events.push(e);
    }
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    let ends = ends_of(&events);
    assert!(ends.contains(&("2".to_owned(), true, false)), "{ends:?}");
    assert!(ends.contains(&("1".to_owned(), false, true)), "{ends:?}");
    assert_invariant(&end(&events).0);
}

struct CancelOnSecond(llm_core::CancellationToken);

impl AgentHooks for CancelOnSecond {
    fn before_tool_call<'a>(
        &'a self,
        info: CallInfo<'a>,
        _args: &'a serde_json::Value,
    ) -> BoxFuture<'a, BeforeToolCall> {
        if info.call.id == "2" {
            self.0.cancel();
        }
        Box::pin(async { BeforeToolCall::Allow })
    }
}

#[tokio::test]
async fn a_call_prepared_before_an_abort_in_preflight_never_started() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "t", json!({})), ("2", "t", json!({}))])],
    );
    let parent = llm_core::CancellationToken::new();
    let hooks = CancelOnSecond(parent.clone());
    let a = agent(&provider, |c| {
        c.hooks = Arc::new(hooks);
        c.options.cancel = parent.clone();
    });
    let events = collect(a.run(ctx(vec![sleepy("t", 1, "x")]), vec![Message::user("go")])).await;
    let ends = ends_of(&events);
    assert_eq!(ends, [("2".to_owned(), true, false), ("1".to_owned(), true, false)]);
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Aborted);
    assert_invariant(&messages);
}

// ---- Defect 6: a `stop` response with tool calls is an ordinary last turn ----

#[derive(Default)]
struct CountStops(AtomicUsize);

impl AgentHooks for CountStops {
    fn should_stop_after_turn(&self, _m: &AssistantMessage, _r: &[ToolResultMessage]) -> bool {
        self.0.fetch_add(1, Ordering::SeqCst);
        false
    }
}

fn stop_with_call() -> ScriptedTurn {
    let message = AssistantMessage {
        content: vec![AssistantContent::ToolCall(ToolCall {
            id: "1".into(),
            name: "t".into(),
            arguments: json!({}),
            thought_signature: None,
            arguments_incomplete: false,
        })],
        stop_reason: StopReason::Stop,
        ..AssistantMessage::default()
    };
    ScriptedTurn::from_message(&message, 7)
}

#[tokio::test]
async fn a_stop_response_with_calls_polls_follow_ups_and_asks_the_stop_hook() {
    let provider = ScriptedProvider::new("scripted", [stop_with_call(), text_turn("ok")]);
    let hooks = Arc::new(CountStops::default());
    let h = hooks.clone();
    let a = agent(&provider, |c| c.hooks = h);
    let run = a.run(ctx(vec![sleepy("t", 1, "x")]), vec![Message::user("go")]);
    run.follow_up().push(Message::user("and then?"));
    let events = collect(run).await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    assert_eq!(provider.requests().len(), 2, "the follow-up was sent");
    assert_eq!(hooks.0.load(Ordering::SeqCst), 2);
    let r = results(&messages);
    assert!(r[0].is_error && r[0].text().contains("did not stop for tool use"));
    assert_invariant(&messages);
}

// ---- Defect 7: `max_turns` is a hard cap ----

#[tokio::test]
async fn max_turns_caps_requests_even_with_steering() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "steer", json!({}))]), text_turn("2"), text_turn("3"), text_turn("4")],
    );
    let queues = RunQueues::default();
    let q = queues.clone();
    let steer = tool("steer", move |_| {
        q.steering().push(Message::user("more"));
        q.follow_up().push(Message::user("even more"));
        Box::pin(async { Ok(ToolOutput::text("t").terminating()) })
    });
    let a = agent(&provider, |c| c.max_turns = Some(1));
    let run = a.run(ctx(vec![steer]), vec![Message::user("go")]);
    queues.attach(&run);
    let events = collect(run).await;
    assert_eq!(provider.requests().len(), 1);
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::MaxTurns);
    assert_invariant(&messages);
}

// ---- Defect 8: queues belong to a run; one message at a time by default ----

/// Answers every request with one text message, whatever the context.
struct Generating;

impl Provider for Generating {
    fn api(&self) -> &str {
        "scripted"
    }
    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        ScriptedProvider::new("scripted", [text_turn("ok")]).stream(model, context, options)
    }
}

fn user_texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::User(u) => Some(format!("{:?}", u.content)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn concurrent_runs_of_one_agent_keep_their_own_queues() {
    let a = Agent::new(AgentConfig::new(model(), Arc::new(Generating)));
    let first = a.run(ctx(vec![]), vec![Message::user("first")]);
    let second = a.run(ctx(vec![]), vec![Message::user("second")]);
    first.steering().push(Message::user("steer-first"));
    second.follow_up().push(Message::user("follow-second"));
    let (one, two) = tokio::join!(first.finish(), second.finish());
    let one = user_texts(one.messages()).join(" ");
    let two = user_texts(two.messages()).join(" ");
    assert!(one.contains("steer-first") && !one.contains("follow-second"), "{one}");
    assert!(two.contains("follow-second") && !two.contains("steer-first"), "{two}");
}

#[tokio::test]
async fn steering_is_delivered_one_at_a_time_unless_configured_all() {
    for (mode, requests) in [(QueueMode::OneAtATime, 3), (QueueMode::All, 2)] {
        let provider =
            ScriptedProvider::new("scripted", [text_turn("1"), text_turn("2"), text_turn("3")]);
        let a = agent(&provider, |c| c.steering_mode = mode);
        let run = a.run(ctx(vec![]), vec![Message::user("go")]);
        run.follow_up().push(Message::user("a"));
        run.follow_up().push(Message::user("b"));
        let _ = run.finish().await;
        // Follow-ups use their own mode (one at a time): 1 + 2 requests.
        assert_eq!(provider.requests().len(), 3, "{mode:?}");
        let provider =
            ScriptedProvider::new("scripted", [text_turn("1"), text_turn("2"), text_turn("3")]);
        let a = agent(&provider, |c| c.steering_mode = mode);
        let run = a.run(ctx(vec![]), vec![Message::user("go")]);
        run.steering().push(Message::user("a"));
        run.steering().push(Message::user("b"));
        let _ = run.finish().await;
        assert_eq!(provider.requests().len(), requests - 1, "{mode:?}");
    }
}

// ---- Defect 9: tools run on their own tasks ----

/// Two tools that each block their thread until the other has started: they
/// finish only if they run at the same time on different threads.
fn rendezvous(name: &str, mine: Arc<std::sync::Barrier>) -> AgentTool {
    tool(name, move |_| {
        let mine = mine.clone();
        Box::pin(async move {
            // A blocking wait: a tool that runs on the loop's task would stall the other.
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                mine.wait();
                let _ = tx.send(());
            });
            match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(()) => Ok(ToolOutput::text("met")),
                Err(_) => Err(ToolError::from("the other tool never ran")),
            }
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_parallel_tools_do_not_stall_each_other() {
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "a", json!({})), ("2", "b", json!({}))]), text_turn("ok")],
    );
    let a = agent(&provider, |_| {});
    let tools = vec![rendezvous("a", barrier.clone()), rendezvous("b", barrier)];
    let outcome = a.run(ctx(tools), vec![Message::user("go")]).finish().await;
    let r = results(outcome.messages());
    assert_eq!((r[0].text().as_str(), r[1].text().as_str()), ("met", "met"));
}

#[tokio::test(flavor = "current_thread")]
async fn tools_declared_blocking_run_on_the_blocking_pool() {
    // One runtime thread: only the blocking pool lets both tools run at once.
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "a", json!({})), ("2", "b", json!({}))]), text_turn("ok")],
    );
    let a = agent(&provider, |_| {});
    let tools =
        vec![rendezvous("a", barrier.clone()).blocking(), rendezvous("b", barrier).blocking()];
    let outcome = a.run(ctx(tools), vec![Message::user("go")]).finish().await;
    let r = results(outcome.messages());
    assert_eq!((r[0].text().as_str(), r[1].text().as_str()), ("met", "met"));
}

// ---- Defect 10: duplicate tool names ----

#[tokio::test]
async fn duplicate_tool_names_are_rejected_before_any_request() {
    let provider = ScriptedProvider::new("scripted", [text_turn("never")]);
    let a = agent(&provider, |_| {});
    let tools = vec![sleepy("t", 1, "a"), sleepy("t", 1, "b")];
    let mut run = a.run(ctx(tools), vec![Message::user("go")]);
    let mut events = Vec::new();
    while let Some(e) = run.next().await {
        events.push(e);
    }
    assert_eq!(end(&events).1, EndReason::Failed);
    assert_eq!(
        run.outcome().unwrap().error,
        Some(AgentError::DuplicateToolName { name: "t".into() })
    );
    assert!(provider.requests().is_empty());
    assert_eq!(
        run.outcome().unwrap().error.as_ref().unwrap().to_string(),
        "Duplicate tool name: t"
    );
}

// ---- prepare_next_turn, transform_context, api_key ----

/// Model id, API key, message count, tool names and system prompt of one request.
type Seen = (String, Option<String>, usize, Vec<String>, Option<String>);

/// Records what every request carried.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
    inner: Mutex<Option<ScriptedProvider>>,
}

impl Provider for Recorder {
    fn api(&self) -> &str {
        "scripted"
    }
    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        self.seen.lock().unwrap().push((
            model.id.clone(),
            options.api_key.as_ref().map(|k| k.expose().to_owned()),
            context.messages.len(),
            context.tools.iter().map(|t| t.name.clone()).collect(),
            context.system_prompt.clone(),
        ));
        let inner = self.inner.lock().unwrap().clone().unwrap();
        inner.stream(model, context, options)
    }
}

struct PerTurn {
    keys: AtomicUsize,
}

impl AgentHooks for PerTurn {
    fn prepare_next_turn<'a>(&'a self, info: TurnInfo<'a>) -> BoxFuture<'a, Option<TurnUpdate>> {
        let update = (info.turn == 1).then(|| TurnUpdate {
            model: Some(Model { id: "m2".into(), ..info.model.clone() }),
            system_prompt: Some(Some("second prompt".into())),
            tools: Some(vec![]),
            options: None,
        });
        Box::pin(async move { update })
    }
    fn transform_context<'a>(
        &'a self,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Option<Vec<Message>>> {
        // Send only the last message.
        Box::pin(async move { messages.last().cloned().map(|m| vec![m]) })
    }
    fn api_key<'a>(
        &'a self,
        _provider: &'a str,
    ) -> BoxFuture<'a, Result<Option<ApiKey>, ToolError>> {
        let n = self.keys.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { Ok(Some(ApiKey::new(format!("token-{n}")))) })
    }
}

#[tokio::test]
async fn prepare_next_turn_transform_context_and_api_key_apply_per_request() {
    let provider = Arc::new(Recorder::default());
    *provider.inner.lock().unwrap() = Some(ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "t", json!({}))]), text_turn("ok")],
    ));
    let mut config = AgentConfig::new(model(), provider.clone());
    config.hooks = Arc::new(PerTurn { keys: AtomicUsize::new(0) });
    let a = Agent::new(config);
    let outcome = a.run(ctx(vec![sleepy("t", 1, "x")]), vec![Message::user("go")]).finish().await;
    let seen = provider.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0],
        ("scripted-1".into(), Some("token-0".into()), 1, vec!["t".into()], Some("sys".into()))
    );
    assert_eq!(
        seen[1],
        ("m2".into(), Some("token-1".into()), 1, vec![], Some("second prompt".into()))
    );
    // The stored transcript is whole.
    assert_eq!(outcome.messages().len(), 4);
    assert_eq!(outcome.reason, EndReason::Completed);
}

#[tokio::test]
async fn a_failing_key_resolver_ends_the_run_and_keys_never_leak() {
    struct NoKey;
    impl AgentHooks for NoKey {
        fn api_key<'a>(&'a self, _p: &'a str) -> BoxFuture<'a, Result<Option<ApiKey>, ToolError>> {
            Box::pin(async { Err(ToolError::from("token refresh failed")) })
        }
    }
    let provider = ScriptedProvider::new("scripted", [text_turn("never")]);
    let a = agent(&provider, |c| {
        c.hooks = Arc::new(NoKey);
        c.options.api_key = Some(ApiKey::new("sk-secret-value"));
    });
    let mut run = a.run(ctx(vec![]), vec![Message::user("go")]);
    let mut events = Vec::new();
    while let Some(e) = run.next().await {
        events.push(e);
    }
    assert_eq!(end(&events).1, EndReason::Failed);
    assert!(provider.requests().is_empty());
    let json = serde_json::to_string(&events).unwrap()
        + &serde_json::to_string(run.outcome().unwrap()).unwrap()
        + &format!("{:?}", a.config());
    assert!(!json.contains("sk-secret-value"));
    assert!(json.contains("token refresh failed"));
}

// ---- Events and outcomes serialize as JSON lines ----

#[tokio::test]
async fn events_and_outcome_serialize_to_json() {
    let provider = ScriptedProvider::new(
        "scripted",
        [tool_turn(&[("1", "t", json!({"a": 1}))]), text_turn("ok")],
    );
    let a = agent(&provider, |_| {});
    let mut run = a.run(ctx(vec![sleepy("t", 1, "x")]), vec![Message::user("go")]);
    let mut lines = Vec::new();
    while let Some(e) = run.next().await {
        lines.push(serde_json::to_string(&e).unwrap());
    }
    let parsed: Vec<serde_json::Value> =
        lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(parsed.first().unwrap()["type"], "agent_start");
    assert_eq!(parsed.last().unwrap()["type"], "agent_end");
    assert_eq!(parsed.last().unwrap()["reason"], "completed");
    let update = parsed.iter().find(|v| v["type"] == "message_update").unwrap();
    assert!(update["event"]["type"].is_string());
    let end_event = parsed.iter().find(|v| v["type"] == "tool_execution_end").unwrap();
    assert_eq!(end_event["tool_call_id"], "1");
    assert_eq!(end_event["execution_started"], true);
    let outcome = serde_json::to_value(run.outcome().unwrap()).unwrap();
    assert_eq!(outcome["reason"], "completed");
    assert_eq!(outcome["context"]["tools"][0]["name"], "t");
    let _ = TextContent::default();
}
