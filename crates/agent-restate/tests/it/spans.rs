//! The durable driver's spans: a worker hosted in this test process, with a
//! subscriber layer that records every span it creates, on a real Restate
//! server. A run that waits for an approval is suspended and resumed by
//! replay; each attempt has its own `invoke_agent` span, and a step read back
//! from the journal emits no span again.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_core::{AgentConfig, AgentHooks, AgentTool, BeforeToolCall, CallInfo, ToolOutput};
use agent_restate::{AgentSession, SessionApprovals, SessionEvents, SessionInbox, SessionParts};
use futures_util::future::BoxFuture;
use llm_core::{ApiKey, Model};
use restate_sdk::endpoint::ServiceOptions;
use restate_sdk::prelude::{Endpoint, HttpServer};
use restate_sdk::service::IntoServiceDefinition;
use serde_json::{Value, json};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::durable::setup_one_worker;
use crate::harness::{RestateServer, TestResult, attach, send, wait_listening};
use crate::machine::decide_when_waiting;

/// The provider key the worker sends: it must appear in no span.
const SECRET: &str = "sk-span-test-secret-5f2c9e";

/// A span as created and recorded: its name, parent and fields.
#[derive(Debug, Clone, Default)]
struct SpanSeen {
    name: String,
    parent: Option<u64>,
    fields: HashMap<String, String>,
}

impl SpanSeen {
    /// `otel.name` when set (`chat <model>`, `execute_tool <name>`), else the name.
    fn otel_name(&self) -> &str {
        self.fields.get("otel.name").map_or(self.name.as_str(), String::as_str)
    }

    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// Every span created, by a number of its own: the registry reuses a closed span's id
/// for a later span, so its ids do not name spans over a whole test.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<HashMap<u64, SpanSeen>>>);

/// A span's number in the [`Recorder`], kept in the span's extensions.
struct Seq(u64);

/// The recorder of this test binary, installed as the global subscriber on first use:
/// a subscriber set for one thread only would miss spans whose callsites other tests'
/// threads registered without it.
fn recorder() -> Recorder {
    static RECORDER: std::sync::OnceLock<Recorder> = std::sync::OnceLock::new();
    RECORDER
        .get_or_init(|| {
            let recorder = Recorder::default();
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(recorder.clone()),
            )
            .expect("no other global subscriber in this test binary");
            recorder
        })
        .clone()
}

struct FieldText<'a>(&'a mut HashMap<String, String>);

impl Visit for FieldText<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span.parent().and_then(|p| p.extensions().get::<Seq>().map(|seq| seq.0));
        let mut seen =
            SpanSeen { name: attrs.metadata().name().to_owned(), parent, ..SpanSeen::default() };
        attrs.record(&mut FieldText(&mut seen.fields));
        let mut spans = self.0.lock().unwrap();
        let seq = spans.len() as u64 + 1;
        spans.insert(seq, seen);
        span.extensions_mut().insert(Seq(seq));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(seq) = ctx.span(id).and_then(|s| s.extensions().get::<Seq>().map(|seq| seq.0))
        else {
            return;
        };
        if let Some(seen) = self.0.lock().unwrap().get_mut(&seq) {
            values.record(&mut FieldText(&mut seen.fields));
        }
    }
}

/// Every call waits for a person.
struct AskEveryCall;

impl AgentHooks for AskEveryCall {
    fn before_tool_call<'a>(
        &'a self,
        _info: CallInfo<'a>,
        _args: &'a Value,
    ) -> BoxFuture<'a, BeforeToolCall> {
        Box::pin(async { BeforeToolCall::Ask { reason: "a person decides".into() } })
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Hold {
    /// Milliseconds.
    ms: u64,
}

/// Serves the session objects from this process on `addr`: the `hold` tool,
/// every call asking for approval, suspended after 1 s of waiting.
fn serve_in_process(addr: SocketAddr, provider_url: &str, ingress: &str) {
    let model = Model {
        id: "loopback-model".into(),
        api: llm_openai_completions::API.into(),
        provider: "openai".into(),
        base_url: provider_url.to_owned(),
        ..Model::default()
    };
    let ingress = ingress.to_owned();
    let setup = move |_session: &str| {
        let provider = Arc::new(llm_openai_completions::OpenAiCompletionsProvider::new());
        let mut config = AgentConfig::new(model.clone(), provider);
        config.options.api_key = Some(ApiKey::new(SECRET));
        config.hooks = Arc::new(AskEveryCall);
        let hold = AgentTool::typed("hold", "Waits a while", |args: Hold, _inv| async move {
            // What the tool does (an MCP call, say) nests beneath its call's span.
            let _inner = tracing::info_span!("tool_work").entered();
            std::thread::sleep(Duration::from_millis(args.ms.min(1000)));
            Ok(ToolOutput::text(format!("held {} ms", args.ms)))
        });
        let mut parts = SessionParts::new(config, Some("Be brief.".into()), vec![hold]);
        parts.ingress = vec![ingress.clone()];
        parts
    };
    let options = ServiceOptions::new()
        .inactivity_timeout(Duration::from_secs(1))
        .abort_timeout(Duration::from_secs(60));
    let endpoint = Endpoint::builder()
        .bind(AgentSession::new(setup).into_service_definition().options(options))
        .bind(SessionInbox)
        .bind(SessionApprovals)
        .bind(SessionEvents)
        .build();
    tokio::spawn(HttpServer::new(endpoint).listen_and_serve(addr));
}

/// Waits (at most 60 s) until Restate reports the invocation suspended.
async fn wait_until_suspended(
    server: &RestateServer,
    http: &reqwest::Client,
    id: &str,
) -> TestResult {
    let sql = format!("SELECT status FROM sys_invocation WHERE id = '{id}'");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = server.query(http, &sql).await?;
        if rows.first().is_some_and(|row| row["status"] == "suspended") {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("the invocation was never suspended: {rows:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn durable_steps_emit_the_genai_spans_once_beneath_their_run_and_turn() -> TestResult {
    let recorder = recorder();
    let Some((server, provider, _arrivals, _workspace, addr)) = setup_one_worker().await? else {
        return Ok(());
    };
    serve_in_process(addr, &provider.base_url, &server.ingress);
    wait_listening(addr).await?;
    server.register(&format!("http://{addr}")).await?;
    let http = reqwest::Client::new();
    let id = send(&http, &server.ingress, "traced", "hold 200").await?;
    // The call asks; the run waits past the inactivity timeout (suspended),
    // and the approval resumes it by replay.
    wait_until_suspended(&server, &http, &id).await?;
    decide_when_waiting(&server, &http, "traced", "approve", &json!("call_hold")).await?;
    let (status, reply) = attach(&http, &server.ingress, &id).await?;
    assert!(status.is_success(), "HTTP {status}: {reply}");
    assert_eq!(serde_json::from_str::<Value>(&reply)?["text"], "done");

    // Kept for the rest of the test (the closures below hand out references into it).
    let spans: &'static HashMap<u64, SpanSeen> =
        Box::leak(Box::new(recorder.0.lock().unwrap().clone()));
    let parent = |s: &SpanSeen| s.parent.and_then(|p| spans.get(&p));
    // The recorder sees every test of this binary: only spans beneath a run of this
    // invocation count (a span that lost its parent does not).
    let of_this_invocation = |mut seen: &SpanSeen| loop {
        if seen.otel_name() == "invoke_agent" {
            break seen.field("clawcall.invocation_id") == Some(id.as_str());
        }
        match parent(seen) {
            Some(up) => seen = up,
            None => break false,
        }
    };
    let named = |name: &str| -> Vec<(u64, &SpanSeen)> {
        let mut found: Vec<(u64, &SpanSeen)> = spans
            .iter()
            .filter(|(_, s)| s.otel_name() == name && of_this_invocation(s))
            .map(|(id, s)| (*id, s))
            .collect();
        found.sort_by_key(|(id, _)| *id);
        found
    };
    let runs = named("invoke_agent");
    // One run per attempt of the invocation: it was suspended and resumed.
    assert!(runs.len() >= 2, "the run was not resumed by replay: {spans:#?}");
    for (_, run) in &runs {
        assert_eq!(run.field("clawcall.invocation_id"), Some(id.as_str()));
        assert_eq!(run.field("gen_ai.operation.name"), Some("invoke_agent"));
        assert_eq!(run.field("gen_ai.request.model"), Some("loopback-model"));
    }
    let last = runs.last().map(|(_, s)| *s).ok_or("no run")?;
    assert_eq!(last.field("clawcall.end_reason"), Some("completed"), "{last:?}");
    assert_eq!(last.field("clawcall.turns"), Some("2"));

    // Two model requests, each emitted once (the first is read back on the
    // resume), beneath a turn beneath a run of this invocation.
    let chats = named("chat loopback-model");
    assert_eq!(chats.len(), 2, "{chats:#?}");
    for (_, chat) in &chats {
        assert_eq!(chat.field("gen_ai.operation.name"), Some("chat"));
        assert_eq!(chat.field("gen_ai.request.model"), Some("loopback-model"));
        assert_eq!(chat.field("server.address"), Some("127.0.0.1"));
        assert!(chat.field("gen_ai.response.finish_reasons").is_some(), "{chat:?}");
        let turn = parent(chat).ok_or("a chat span without a parent")?;
        assert_eq!(turn.name, "turn", "{chat:?}");
        assert_eq!(parent(turn).map(SpanSeen::otel_name), Some("invoke_agent"));
    }
    // One tool call, emitted once, by the attempt that ran it.
    let tools = named("execute_tool hold");
    assert_eq!(tools.len(), 1, "{tools:#?}");
    let tool = tools[0].1;
    assert_eq!(tool.field("gen_ai.tool.name"), Some("hold"));
    assert_eq!(tool.field("gen_ai.tool.call.id"), Some("call_hold"));
    assert_eq!(tool.field("gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(tool.field("error.type"), None);
    let work: Vec<(u64, &SpanSeen)> = named("tool_work");
    assert_eq!(work.len(), 1);
    assert!(work[0].1.parent == Some(tools[0].0), "the tool's work nests beneath its call");
    let tool_turn = parent(tool).ok_or("a tool span without a parent")?;
    assert_eq!(tool_turn.field("clawcall.turn"), Some("0"));
    let tool_run = parent(tool_turn).ok_or("a turn without a run")?;
    assert!(std::ptr::eq(tool_run, last), "the call ran in the last attempt");
    // That turn read back from the journal what ran before the suspension
    // (`prepare_next_turn`, the request, `before_tool_call`) and ran the rest
    // (the call, `after_tool_call`, `should_stop_after_turn`).
    assert_eq!(tool_turn.field("clawcall.steps_replayed"), Some("3"), "{tool_turn:?}");
    assert_eq!(tool_turn.field("clawcall.steps_run"), Some("3"), "{tool_turn:?}");
    let first_turn = parent(chats[0].1).ok_or("no turn")?;
    assert_eq!(first_turn.field("clawcall.steps_replayed"), Some("0"), "{first_turn:?}");

    // No secret in any attribute.
    for seen in spans.values() {
        for (field, value) in &seen.fields {
            assert!(!value.contains(SECRET), "{} {field} holds the key", seen.otel_name());
        }
    }
    Ok(())
}
