//! Streaming benchmarks: incremental partial JSON, and SSE decoding + partial JSON together.
//!
//! Run with `cargo bench -p llm-core --bench streaming`; figures are kept in
//! `docs/benchmarks.md`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "benchmark")]

use std::borrow::Cow;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use llm_core::raw::partial_json::PartialJson;
use llm_core::raw::sse::{SseDecoder, SseEvent};
use serde::Deserialize;

const MIB: usize = 1024 * 1024;

/// `{"content":"<text>"}` whose string value is about `n` bytes of JSON text, with escapes
/// (`\n`, `\"`, `\\`, `\t`, `\u00e9`) and raw non-ASCII characters, like a streamed file write.
fn arguments(n: usize) -> String {
    const LINES: [&str; 6] = [
        "fn main() {\\n    println!(\\\"hello, world\\\");\\n}\\n",
        "Le caf\\u00e9 est pr\\u00eat \u{2014} it\u{2019}s ready \u{1F600}\\n",
        "\\tpath = \\\"src\\\\lib.rs\\\"; // a comment with \u{4E2D}\u{6587}\\n",
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod.\\n",
        "    let x = [1, 2, 3].iter().map(|v| v * 2).collect::<Vec<_>>();\\n",
        "<div class=\\\"note\\\">Tom & Jerry's \\u2603 snowman</div>\\n",
    ];
    let mut s = String::with_capacity(n + 64);
    s.push_str("{\"content\":\"");
    let mut i = 0;
    while s.len() < n {
        s.push_str(LINES[i % LINES.len()]);
        i += 1;
    }
    s.push_str("\"}");
    s
}

/// Splits `text` into fragments of about `size` bytes, on char boundaries.
fn fragments(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::with_capacity(text.len() / size + 1);
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

/// Feeds all fragments, reading `value()` every 64 KiB, then `finish()`.
fn run_partial(parts: &[&str]) -> usize {
    let mut p = PartialJson::new();
    let mut since = 0usize;
    let mut seen = 0usize;
    for part in parts {
        p.push(part);
        since += part.len();
        if since >= 64 * 1024 {
            since = 0;
            seen += p.value().as_object().map_or(0, |m| m.len());
        }
    }
    let done = p.finish();
    seen + done.as_object().map_or(0, |m| m.len())
}

fn bench_partial_json(c: &mut Criterion) {
    let mut group = c.benchmark_group("partial_json");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for (label, n) in [("1MiB", MIB), ("4MiB", 4 * MIB)] {
        let text = arguments(n);
        let parts = fragments(&text, 100);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(format!("push100_value64k_finish/{label}"), |b| {
            b.iter(|| black_box(run_partial(black_box(&parts))));
        });
    }
    group.finish();
}

/// An Anthropic-style SSE body streaming `arguments` as `input_json_delta` events of
/// `fragment` bytes each.
fn anthropic_stream(arguments: &str, fragment: usize) -> Vec<u8> {
    let mut body = String::new();
    body.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude\"}}\n\n");
    body.push_str("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"write\",\"input\":{}}}\n\n");
    for part in fragments(arguments, fragment) {
        let delta = serde_json::json!({
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": part},
        });
        body.push_str("event: content_block_delta\ndata: ");
        body.push_str(&delta.to_string());
        body.push_str("\n\n");
    }
    body.push_str(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    );
    body.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    body.into_bytes()
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    delta: Option<Delta<'a>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow)]
    partial_json: Option<Cow<'a, str>>,
}

fn run_sse(chunks: &[&[u8]]) -> usize {
    let mut decoder = SseDecoder::new();
    let mut events: Vec<SseEvent> = Vec::new();
    let mut args = PartialJson::new();
    let handle = |events: &mut Vec<SseEvent>, args: &mut PartialJson| {
        for event in events.drain(..) {
            if event.event.as_deref() == Some("content_block_delta") {
                let envelope: Envelope<'_> = serde_json::from_str(&event.data).unwrap();
                if let Some(fragment) = envelope.delta.and_then(|d| d.partial_json) {
                    args.push(&fragment);
                }
            }
        }
    };
    for chunk in chunks {
        decoder.push(chunk, &mut events).unwrap();
        handle(&mut events, &mut args);
    }
    decoder.finish(&mut events).unwrap();
    handle(&mut events, &mut args);
    let value = args.finish();
    value.as_object().map_or(0, |m| m.len())
}

fn bench_sse(c: &mut Criterion) {
    let mut group = c.benchmark_group("sse_partial_json");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let args = arguments(MIB);
    let body = anthropic_stream(&args, 100);
    let chunks: Vec<&[u8]> = body.chunks(16 * 1024).collect();
    assert_eq!(run_sse(&chunks), 1);
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("anthropic_input_json_delta_1MiB_args/16KiB_chunks", |b| {
        b.iter(|| black_box(run_sse(black_box(&chunks))));
    });

    // The decoder alone on the same body.
    group.bench_function("decoder_only/16KiB_chunks", |b| {
        b.iter(|| {
            let mut decoder = SseDecoder::new();
            let mut events = Vec::new();
            let mut n = 0usize;
            for chunk in &chunks {
                decoder.push(chunk, &mut events).unwrap();
                n += events.len();
                events.clear();
            }
            decoder.finish(&mut events).unwrap();
            black_box(n + events.len())
        });
    });
    group.finish();
}

/// A structured answer of about `n` bytes streamed as text in 100-byte deltas through a
/// `StructuredStream`, reading the partial value (at the changed pointer) after every
/// fragment: the cost must stay linear in the answer's length.
fn run_structured(runtime: &tokio::runtime::Runtime, parts: &[&str]) -> usize {
    use llm_core::output::{OutputFormat, StructuredEvent, StructuredStream};
    use llm_core::{
        Model, Provider, StopReason,
        raw::{Delta, ScriptedProvider, ScriptedTurn},
    };
    let mut deltas: Vec<Delta> =
        parts.iter().map(|p| Delta::Text { key: 0, text: (*p).to_owned() }).collect();
    deltas.push(Delta::Stop(StopReason::Stop));
    deltas.push(Delta::Done);
    let provider = ScriptedProvider::new("bench", [ScriptedTurn::deltas(deltas)]);
    let format = OutputFormat::new("answer", serde_json::json!({"type": "object"}));
    let model = Model { id: "bench".to_owned(), api: "bench".to_owned(), ..Model::default() };
    let stream = provider.stream(&model, &llm_core::Context::default(), &Default::default());
    runtime.block_on(async move {
        let mut answer = StructuredStream::new(stream, format);
        let mut seen = 0usize;
        while let Some(event) = answer.next().await {
            match event {
                StructuredEvent::Partial { changed } => {
                    seen += answer.partial().pointer(&changed).map_or(0, |_| 1);
                }
                StructuredEvent::Done { outcome, .. } => {
                    seen += usize::from(outcome.valid().is_some());
                }
            }
        }
        seen
    })
}

fn bench_structured(c: &mut Criterion) {
    let mut group = c.benchmark_group("structured_partial");
    group.sample_size(10).measurement_time(Duration::from_secs(5));
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    for (label, n) in [("1MiB", MIB), ("4MiB", 4 * MIB), ("16MiB", 16 * MIB)] {
        let text = arguments(n);
        let parts = fragments(&text, 100);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(format!("text100_read_every_fragment/{label}"), |b| {
            b.iter(|| black_box(run_structured(&runtime, &parts)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_partial_json, bench_sse, bench_structured);
criterion_main!(benches);
