//! The full path from response bytes to the final message for a 1 MiB tool-argument
//! stream in 100-byte fragments (Mistral's incremental tool-call format with `p`
//! padding), pushed in 16 KiB chunks through `llm_core::raw::sse::SseDecoder` -> the
//! Mistral decoder -> `llm_core::raw::MessageAssembler`. No network.
//!
//! Run with `cargo bench -p llm-mistral --bench stream`; figures are kept in
//! `docs/benchmarks.md`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "benchmark")]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use llm_core::raw::drive::WireDecoder;
use llm_core::raw::sse::SseDecoder;
use llm_core::{AssistantEvent, Model, raw::MessageAssembler};
use serde_json::json;

const MIB: usize = 1024 * 1024;
const FRAGMENT: usize = 100;
const CHUNK: usize = 16 * 1024;

/// `{"content":"<text>"}` of about `n` bytes, with escapes, like a streamed file write.
fn arguments(n: usize) -> String {
    const LINES: [&str; 4] = [
        "fn main() {\\n    println!(\\\"hello, world\\\");\\n}\\n",
        "\\tpath = \\\"src\\\\lib.rs\\\"; // a comment\\n",
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod.\\n",
        "    let x = [1, 2, 3].iter().map(|v| v * 2).collect::<Vec<_>>();\\n",
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

/// The SSE body: a role chunk, the call's first chunk, one chunk per fragment
/// (continuation fragments carry `"name":""`, some `"id":"null"`, and `p`
/// padding), the finish chunk with usage, and `[DONE]`.
fn body(args: &str) -> Vec<u8> {
    let id = "0example0000000000000000000009";
    let head = |choices: serde_json::Value, p: &str| json!({"id": id, "object": "chat.completion.chunk", "created": 1760000009, "model": "devstral-medium-latest", "choices": choices, "p": p});
    let mut out = String::new();
    let mut push = |v: serde_json::Value| {
        out.push_str("data: ");
        out.push_str(&v.to_string());
        out.push_str("\n\n");
    };
    push(head(
        json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
        "abc",
    ));
    push(head(
        json!([{"index": 0, "delta": {"tool_calls": [{"id": "Hk29LmQ7z", "function": {"name": "write_file", "arguments": ""}, "index": 0}]}, "finish_reason": null}]),
        "abcdefghij",
    ));
    let bytes = args.as_bytes();
    let mut start = 0;
    let mut n = 0usize;
    while start < bytes.len() {
        let end = (start + FRAGMENT).min(bytes.len());
        let fragment = std::str::from_utf8(&bytes[start..end]).unwrap();
        let call = if n.is_multiple_of(3) {
            json!({"id": "null", "function": {"name": "", "arguments": fragment}, "index": 0})
        } else {
            json!({"function": {"name": "", "arguments": fragment}, "index": 0})
        };
        push(head(
            json!([{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]),
            &"p".repeat(n % 17),
        ));
        start = end;
        n += 1;
    }
    push(
        json!({"id": id, "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 300, "total_tokens": 300_000, "completion_tokens": 299_700}}),
    );
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}

fn run(body: &[u8], model: &Model) -> usize {
    let mut sse = SseDecoder::new();
    let mut decoder = llm_mistral::__private::decoder();
    let mut assembler = MessageAssembler::new(model, 0);
    let mut events = Vec::new();
    let mut deltas = Vec::new();
    let mut count = 0usize;
    let mut feed = |events: &mut Vec<_>, deltas: &mut Vec<_>, assembler: &mut MessageAssembler| {
        for event in events.drain(..) {
            decoder.event(event, deltas);
        }
        for delta in deltas.drain(..) {
            assembler.push(delta);
        }
        while let Some(e) = assembler.next_event() {
            count += 1;
            black_box(&e);
        }
    };
    for chunk in body.chunks(CHUNK) {
        sse.push(chunk, &mut events).unwrap();
        feed(&mut events, &mut deltas, &mut assembler);
    }
    sse.finish(&mut events).unwrap();
    feed(&mut events, &mut deltas, &mut assembler);
    assert!(assembler.is_finished());
    count
}

fn bench(c: &mut Criterion) {
    let model = Model {
        id: "devstral-medium-latest".into(),
        api: llm_mistral::API.into(),
        provider: "mistral".into(),
        ..Model::default()
    };
    let args = arguments(MIB);
    let body = body(&args);
    // Sanity: the whole path yields the full arguments.
    {
        let mut sse = SseDecoder::new();
        let mut decoder = llm_mistral::__private::decoder();
        let mut assembler = MessageAssembler::new(&model, 0);
        let mut events = Vec::new();
        sse.push(&body, &mut events).unwrap();
        sse.finish(&mut events).unwrap();
        let mut deltas = Vec::new();
        for e in events {
            decoder.event(e, &mut deltas);
        }
        for d in deltas {
            assembler.push(d);
        }
        let mut last = None;
        while let Some(e) = assembler.next_event() {
            last = Some(e);
        }
        let Some(AssistantEvent::Done { message, .. }) = last else { panic!("no done") };
        let call = message.tool_calls().next().unwrap();
        assert_eq!(call.arguments, serde_json::from_str::<serde_json::Value>(&args).unwrap());
    }
    let mut group = c.benchmark_group("mistral_stream");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Bytes(args.len() as u64));
    group.bench_function("tool_args_1MiB_100B_fragments_16KiB_chunks", |b| {
        b.iter(|| run(black_box(&body), &model))
    });
    // Attribution: the same bytes through SSE + the Mistral decoder only.
    group.bench_function("decode_only_no_assembler", |b| {
        b.iter(|| {
            let mut sse = SseDecoder::new();
            let mut decoder = llm_mistral::__private::decoder();
            let mut events = Vec::new();
            let mut deltas = Vec::new();
            let mut n = 0usize;
            for chunk in body.chunks(CHUNK) {
                sse.push(chunk, &mut events).unwrap();
                for e in events.drain(..) {
                    decoder.event(e, &mut deltas);
                }
                n += deltas.len();
                deltas.clear();
            }
            black_box(n)
        })
    });
    group.finish();
    eprintln!(
        "mistral bench: {} argument bytes, {} wire bytes, {} fragments",
        args.len(),
        body.len(),
        args.len().div_ceil(FRAGMENT)
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
