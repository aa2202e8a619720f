//! What the spans cost: one model request through the driver (in memory: the recorded
//! Anthropic turn, no network) and one agent run with 100 instant tool calls (scripted
//! provider), each with no subscriber ("off", as `claw` without `--otlp`) and with the
//! OTLP export layer installed ("on", exporting to a loopback sink on the SDK's threads).
//! The per-call figures printed at the end go to `docs/benchmarks.md`.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, reason = "benchmark")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Instant;

use agent_core::{Agent, AgentConfig, AgentContext, AgentTool, ToolInvocation, ToolOutput};
use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use futures_util::StreamExt;
use llm_core::raw::drive::HttpResponse;
use llm_core::{
    AssistantContent, AssistantMessage, Message, Model, StopReason, StreamOptions, TextContent,
    Tool, ToolCall,
    raw::{ScriptedProvider, ScriptedTurn},
};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

const CALLS: usize = 100;

/// A loopback OTLP/HTTP sink that answers 200 and drops what it gets.
fn sink() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0;
                    let mut first = true;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line.trim_end().is_empty() && !first {
                            break;
                        }
                        first = false;
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let _ = writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
                }
            });
        }
    });
    url
}

fn anthropic_model() -> Model {
    Model {
        id: "claude-sonnet-4-5".into(),
        api: "anthropic-messages".into(),
        provider: "anthropic".into(),
        base_url: "http://127.0.0.1:1".into(),
        ..Model::default()
    }
}

/// One request through the driver, the body in memory: the chat span and the metric events.
async fn request(model: &Model, body: &Bytes) {
    let body = body.clone();
    let mut stream = llm_core::raw::drive::drive(
        model,
        &StreamOptions::default(),
        "anthropic",
        move |_| {
            let body = body.clone();
            async move {
                let chunks = futures_util::stream::iter([Ok(body)]).boxed();
                Ok(HttpResponse { status: 200, body: chunks })
            }
        },
        llm_anthropic::Decoder::new,
    );
    while stream.next().await.is_some() {}
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

/// One run: two turns, `CALLS` instant tool calls (invoke_agent, turns, execute_tool spans).
async fn run_tools() {
    let model = Model {
        id: "bench".into(),
        api: "scripted".into(),
        provider: "scripted".into(),
        ..Model::default()
    };
    let provider = ScriptedProvider::new("scripted", script());
    let agent = Agent::new(AgentConfig::new(model, Arc::new(provider)));
    let tool = AgentTool::new(
        Tool {
            name: "t".into(),
            description: "bench".into(),
            parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        },
        |_inv: ToolInvocation| async move { Ok(ToolOutput::text("ok")) },
    );
    let context = AgentContext { system_prompt: None, messages: vec![], tools: vec![tool] };
    agent.run(context, vec![Message::user("go")]).finish().await;
}

fn bench(c: &mut Criterion) {
    // One thread: the subscriber set for a closure is the thread's, and the tools run here too.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let export_rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let export =
        clawcall_otel::OtlpExport::start(&sink(), "bench", export_rt.handle().clone()).unwrap();
    let on = Arc::new(tracing_subscriber::registry().with(export.layer()));
    let body = Bytes::from(
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/anthropic/agent-session/turn1.sse"
        ))
        .unwrap(),
    );
    let model = anthropic_model();

    let mut group = c.benchmark_group("spans");
    group.bench_function("request_off", |b| b.iter(|| rt.block_on(request(&model, &body))));
    group.bench_function("request_on", |b| {
        b.iter(|| {
            tracing::subscriber::with_default(Arc::clone(&on), || {
                rt.block_on(request(&model, &body))
            })
        })
    });
    group.sample_size(20);
    group.bench_function("run_100_tool_calls_off", |b| b.iter(|| rt.block_on(run_tools())));
    group.bench_function("run_100_tool_calls_on", |b| {
        b.iter(|| tracing::subscriber::with_default(Arc::clone(&on), || rt.block_on(run_tools())))
    });
    group.finish();

    // The figures for docs/benchmarks.md, measured the same way.
    let time = |runs: u32, f: &dyn Fn()| {
        let start = Instant::now();
        for _ in 0..runs {
            f();
        }
        start.elapsed() / runs
    };
    let off = time(2000, &|| rt.block_on(request(&model, &body)));
    let with = time(2000, &|| {
        tracing::subscriber::with_default(Arc::clone(&on), || rt.block_on(request(&model, &body)))
    });
    println!("spans: per request {off:?} off, {with:?} on (+{:?})", with.saturating_sub(off));
    let off = time(100, &|| rt.block_on(run_tools()));
    let with = time(100, &|| {
        tracing::subscriber::with_default(Arc::clone(&on), || rt.block_on(run_tools()))
    });
    println!(
        "spans: per run of {CALLS} tool calls {off:?} off, {with:?} on (+{:?} per call)",
        with.saturating_sub(off) / CALLS as u32
    );
    drop(on);
    export.shutdown().unwrap();
}

criterion_group!(benches, bench);
criterion_main!(benches);
