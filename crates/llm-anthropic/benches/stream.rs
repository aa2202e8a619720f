//! Response bytes -> final message for a 1 MiB tool-argument stream in 100-byte fragments:
//! `SseDecoder` -> `llm_anthropic::Decoder` -> `MessageAssembler`, fed in 16 KiB chunks. No
//! network. Throughput is counted in argument bytes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "benchmark")]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use llm_anthropic::Decoder;
use llm_core::raw::sse::SseDecoder;
use llm_core::{AssistantEvent, Model, raw::MessageAssembler};

const ARGS_BYTES: usize = 1 << 20;
const FRAGMENT: usize = 100;
const CHUNK: usize = 16 * 1024;

/// The tool arguments (valid JSON, ASCII) and the SSE body that streams them.
fn build() -> (String, Vec<u8>) {
    let filler = "lorem ipsum \\\"quoted\\\" dolor sit amet, ";
    let mut content = String::with_capacity(ARGS_BYTES);
    while content.len() < ARGS_BYTES - 32 {
        content.push_str(filler);
    }
    let args = format!("{{\"path\":\"/tmp/out.txt\",\"content\":\"{content}\"}}");
    let mut body = String::new();
    body.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5-20250929\",\"id\":\"msg_01Bench\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":18,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":1}}}\n\n");
    body.push_str("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01Bench\",\"name\":\"write\",\"input\":{}}}\n\n");
    let bytes = args.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        let end = (start + FRAGMENT).min(bytes.len());
        let fragment = std::str::from_utf8(&bytes[start..end]).unwrap();
        let quoted = serde_json::to_string(fragment).unwrap();
        body.push_str(&format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":{quoted}}}}}\n\n"));
        start = end;
    }
    body.push_str(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    );
    body.push_str("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":300000}}\n\n");
    body.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    (args, body.into_bytes())
}

fn run(body: &[u8], model: &Model) -> usize {
    let mut sse = SseDecoder::new();
    let mut decoder = Decoder::new();
    let mut assembler = MessageAssembler::new(model, 0);
    let mut events = Vec::new();
    let mut deltas = Vec::new();
    let mut count = 0;
    let mut feed = |deltas: &mut Vec<_>, assembler: &mut MessageAssembler| {
        for d in deltas.drain(..) {
            assembler.push(d);
        }
        while let Some(e) = assembler.next_event() {
            count += 1;
            if let AssistantEvent::Done { message, .. } = e {
                black_box(message);
            }
        }
    };
    for chunk in body.chunks(CHUNK) {
        sse.push(chunk, &mut events).unwrap();
        for e in events.drain(..) {
            llm_core::raw::drive::decode_frame(&mut decoder, e, &mut deltas);
        }
        feed(&mut deltas, &mut assembler);
    }
    sse.finish(&mut events).unwrap();
    for e in events.drain(..) {
        llm_core::raw::drive::decode_frame(&mut decoder, e, &mut deltas);
    }
    llm_core::raw::drive::decode_end(&mut decoder, &mut deltas);
    feed(&mut deltas, &mut assembler);
    count
}

/// The same path without the assembler: SSE framing and this crate's decoder only.
fn run_decoder_only(body: &[u8]) -> usize {
    let mut sse = SseDecoder::new();
    let mut decoder = Decoder::new();
    let mut events = Vec::new();
    let mut deltas = Vec::new();
    let mut count = 0;
    for chunk in body.chunks(CHUNK) {
        sse.push(chunk, &mut events).unwrap();
        for e in events.drain(..) {
            llm_core::raw::drive::decode_frame(&mut decoder, e, &mut deltas);
        }
        count += deltas.len();
        black_box(&deltas);
        deltas.clear();
    }
    sse.finish(&mut events).unwrap();
    for e in events.drain(..) {
        llm_core::raw::drive::decode_frame(&mut decoder, e, &mut deltas);
    }
    llm_core::raw::drive::decode_end(&mut decoder, &mut deltas);
    count + deltas.len()
}

fn bench(c: &mut Criterion) {
    let (args, body) = build();
    let model = Model { id: "claude-sonnet-4-5".into(), ..Model::default() };
    // Sanity: the final arguments are the streamed JSON.
    let mut check = MessageAssembler::new(&model, 0);
    {
        let mut sse = SseDecoder::new();
        let mut decoder = Decoder::new();
        let mut events = Vec::new();
        let mut deltas = Vec::new();
        sse.push(&body, &mut events).unwrap();
        sse.finish(&mut events).unwrap();
        for e in events {
            llm_core::raw::drive::decode_frame(&mut decoder, e, &mut deltas);
        }
        for d in deltas {
            check.push(d);
        }
        let expected: serde_json::Value = serde_json::from_str(&args).unwrap();
        assert_eq!(*check.partial().tool_calls().next().unwrap().arguments, expected);
    }
    let mut group = c.benchmark_group("anthropic_stream");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    group.warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Bytes(args.len() as u64));
    group.bench_function("tool_args_1MiB_100B_fragments", |b| {
        b.iter(|| run(black_box(&body), &model))
    });
    group.bench_function("sse_and_decoder_only", |b| b.iter(|| run_decoder_only(black_box(&body))));
    group.finish();
    eprintln!("wire body: {} bytes for {} argument bytes", body.len(), args.len());
}

criterion_group!(benches, bench);
criterion_main!(benches);
