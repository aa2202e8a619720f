//! Response bytes to final message for a 1 MiB tool-argument stream in 100-byte
//! fragments: 16 KiB chunks through `SseDecoder` -> the Responses decoder ->
//! `MessageAssembler` (no network).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "benchmark")]

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use llm_core::raw::sse::SseDecoder;
use llm_core::{AssistantEvent, Model, raw::MessageAssembler};
use serde_json::json;

const ARGUMENT_BYTES: usize = 1 << 20;
const FRAGMENT: usize = 100;
const CHUNK: usize = 16 * 1024;

/// The wire bytes and the length of the arguments text.
fn wire() -> (Vec<u8>, usize) {
    let words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor ";
    let mut content = String::new();
    while content.len() < ARGUMENT_BYTES {
        content.push_str(words);
    }
    content.truncate(ARGUMENT_BYTES - 40);
    let arguments = format!("{{\"path\":\"/tmp/notes.txt\",\"content\":\"{content}\"}}");
    let mut out = String::new();
    let mut event = |kind: &str, data: serde_json::Value| {
        out.push_str(&format!("event: {kind}\ndata: {data}\n\n"));
    };
    event(
        "response.created",
        json!({"type":"response.created","sequence_number":0,"response":{"id":"resp_bench","object":"response","status":"in_progress","model":"gpt-5.4"}}),
    );
    event(
        "response.output_item.added",
        json!({"type":"response.output_item.added","output_index":0,"sequence_number":1,
        "item":{"id":"fc_bench","type":"function_call","status":"in_progress","arguments":"","call_id":"call_bench","name":"write_file"}}),
    );
    let bytes = arguments.as_bytes();
    for (n, piece) in bytes.chunks(FRAGMENT).enumerate() {
        let delta = std::str::from_utf8(piece).unwrap();
        event(
            "response.function_call_arguments.delta",
            json!({"type":"response.function_call_arguments.delta",
            "delta":delta,"item_id":"fc_bench","obfuscation":"x7Qa","output_index":0,"sequence_number":n + 2}),
        );
    }
    event(
        "response.function_call_arguments.done",
        json!({"type":"response.function_call_arguments.done",
        "arguments":arguments,"item_id":"fc_bench","output_index":0}),
    );
    event(
        "response.output_item.done",
        json!({"type":"response.output_item.done","output_index":0,
        "item":{"id":"fc_bench","type":"function_call","status":"completed","arguments":arguments,"call_id":"call_bench","name":"write_file"}}),
    );
    event(
        "response.completed",
        json!({"type":"response.completed","response":{"id":"resp_bench","status":"completed",
        "usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":300000,"total_tokens":300010}}}),
    );
    (out.into_bytes(), arguments.len())
}

fn run(bytes: &[u8], model: &Model) -> usize {
    let mut sse = SseDecoder::new();
    let mut decoder = llm_openai_responses::bench_decoder();
    let mut assembler = MessageAssembler::new(model, 0);
    let mut events = Vec::new();
    let mut deltas = Vec::new();
    let mut count = 0;
    let mut feed = |events: &mut Vec<_>, deltas: &mut Vec<_>, assembler: &mut MessageAssembler| {
        for event in events.drain(..) {
            llm_core::raw::drive::decode_frame(&mut decoder, event, deltas);
        }
        for delta in deltas.drain(..) {
            assembler.push(delta);
        }
        while let Some(event) = assembler.next_event() {
            if let AssistantEvent::Done { message, .. } = event {
                count = message.content.len();
            }
        }
    };
    for chunk in bytes.chunks(CHUNK) {
        sse.push(chunk, &mut events).unwrap();
        feed(&mut events, &mut deltas, &mut assembler);
    }
    sse.finish(&mut events).unwrap();
    feed(&mut events, &mut deltas, &mut assembler);
    count
}

/// SSE decoding and the Responses decoder only (no assembler): the provider's own share.
fn decode_only(bytes: &[u8]) -> usize {
    let mut sse = SseDecoder::new();
    let mut decoder = llm_openai_responses::bench_decoder();
    let mut events = Vec::new();
    let mut deltas = Vec::new();
    let mut count = 0;
    for chunk in bytes.chunks(CHUNK) {
        sse.push(chunk, &mut events).unwrap();
        for event in events.drain(..) {
            llm_core::raw::drive::decode_frame(&mut decoder, event, &mut deltas);
        }
        count += deltas.len();
        deltas.clear();
    }
    count
}

fn bench(c: &mut Criterion) {
    let (bytes, argument_len) = wire();
    let model = Model {
        id: "gpt-5.4".into(),
        api: "openai-responses".into(),
        provider: "openai".into(),
        ..Model::default()
    };
    assert_eq!(run(&bytes, &model), 1);
    let mut group = c.benchmark_group("openai_responses_stream");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Bytes(argument_len as u64));
    group.bench_function("tool_args_1MiB_100B_fragments", |b| b.iter(|| run(&bytes, &model)));
    group.bench_function("decoder_only_no_assembler", |b| b.iter(|| decode_only(&bytes)));
    group.finish();
    eprintln!("wire bytes per run: {} (arguments: {argument_len})", bytes.len());
}

criterion_group!(benches, bench);
criterion_main!(benches);
