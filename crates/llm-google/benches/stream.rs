//! Response bytes -> final message, no network: `SseDecoder` (16 KiB reads) ->
//! `llm_google::Decoder` -> `MessageAssembler`.
//!
//! Gemini never fragments call arguments: a call arrives whole in one part. So the
//! 1 MiB tool-argument case is one `functionCall` whose arguments are 1 MiB (built from
//! 100-byte pieces), and a second case streams 1 MiB of text in 100-byte parts, one
//! chunk each (the fragmented path of this wire format).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, reason = "benchmark")]

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use llm_core::raw::sse::SseDecoder;
use llm_core::{AssistantEvent, Model, raw::MessageAssembler};
use serde_json::json;

const MIB: usize = 1024 * 1024;
const READ: usize = 16 * 1024;

fn piece(i: usize) -> String {
    // 100 bytes of JSON-string content, with an escape now and then.
    let mut s = format!("line {i:06} \\\"quoted\\\" ");
    while s.len() < 99 {
        s.push('x');
    }
    s.push('\n');
    s
}

fn tool_call_body() -> String {
    let mut content = String::with_capacity(MIB + 100);
    let mut i = 0;
    while content.len() < MIB {
        content.push_str(&piece(i));
        i += 1;
    }
    let chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "write_file", "args": {"path": "big.txt", "content": content}}, "thoughtSignature": "CiQBExampleSig=="}
        ]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 300000, "totalTokenCount": 300030},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "bench"
    });
    format!("data: {chunk}\r\n\r\n")
}

fn text_body() -> String {
    let mut body = String::with_capacity(2 * MIB);
    let mut total = 0;
    let mut i = 0;
    while total < MIB {
        let text = piece(i);
        total += text.len();
        i += 1;
        let chunk = json!({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}], "responseId": "bench"});
        body.push_str(&format!("data: {chunk}\r\n\r\n"));
    }
    let last = json!({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 300000, "totalTokenCount": 300030}});
    body.push_str(&format!("data: {last}\r\n\r\n"));
    body
}

fn model() -> Model {
    Model {
        id: "gemini-2.5-flash".into(),
        api: "google-generative-ai".into(),
        provider: "google".into(),
        ..Model::default()
    }
}

fn run(body: &[u8], model: &Model) -> usize {
    let mut sse = SseDecoder::new();
    let mut decoder = llm_google::Decoder::new();
    let mut assembler = MessageAssembler::new(model, 0);
    let mut events = Vec::new();
    let mut deltas = Vec::new();
    let mut count = 0;
    let mut feed =
        |events: &mut Vec<_>, deltas: &mut Vec<_>, assembler: &mut MessageAssembler, end: bool| {
            for e in events.drain(..) {
                llm_core::raw::drive::decode_frame(&mut decoder, e, deltas);
            }
            if end {
                llm_core::raw::drive::decode_end(&mut decoder, deltas);
            }
            for d in deltas.drain(..) {
                assembler.push(d);
            }
            while let Some(event) = assembler.next_event() {
                count += 1;
                if let AssistantEvent::Done { message, .. } = event {
                    std::hint::black_box(message);
                }
            }
        };
    for read in body.chunks(READ) {
        sse.push(read, &mut events).unwrap();
        feed(&mut events, &mut deltas, &mut assembler, false);
    }
    sse.finish(&mut events).unwrap();
    feed(&mut events, &mut deltas, &mut assembler, true);
    assert!(assembler.is_finished());
    count
}

fn bench(c: &mut Criterion) {
    let model = model();
    let mut group = c.benchmark_group("google");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));

    let calls = tool_call_body();
    group.throughput(Throughput::Bytes(calls.len() as u64));
    group.bench_function("tool_args_1mib_whole_call", |b| b.iter(|| run(calls.as_bytes(), &model)));

    let text = text_body();
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("text_1mib_100b_parts", |b| b.iter(|| run(text.as_bytes(), &model)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
