//! Response bytes to final message for a 1 MiB tool-argument stream in 100-byte
//! fragments, in Chat Completions' wire format (`data: <chunk>` per fragment, then
//! the finish chunk, the usage chunk and `[DONE]`): `SseDecoder` → `Decoder` →
//! `MessageAssembler`, fed in 16 KiB chunks. No network. Throughput is counted in
//! argument bytes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "benchmark")]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use llm_core::raw::drive::WireDecoder;
use llm_core::raw::sse::SseDecoder;
use llm_core::{AssistantEvent, Model, StopReason, raw::MessageAssembler};
use llm_openai_completions::Decoder;

const ARGS_BYTES: usize = 1 << 20;
const FRAGMENT: usize = 100;
const CHUNK: usize = 16 * 1024;

const PREFIX: &str = r#"{"id":"chatcmpl-Bench0000000000000000000001","object":"chat.completion.chunk","created":1760000000,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_560af6e559","choices":[{"index":0,"delta":"#;

/// The arguments (1 MiB of code-like text with quotes, backslashes and newlines)
/// and the SSE body that streams them.
fn build() -> (usize, Vec<u8>) {
    let line = "    println!(\"value = {}\\n\", map[\"key\"]); // \\path\\to\\file\n";
    let mut content = String::with_capacity(ARGS_BYTES);
    while content.len() < ARGS_BYTES - 64 {
        content.push_str(line);
    }
    let args = serde_json::json!({"path": "src/generated.rs", "content": content}).to_string();
    let mut body = String::with_capacity(args.len() * 3);
    let mut push = |delta: &str, finish: &str| {
        body.push_str("data: ");
        body.push_str(PREFIX);
        body.push_str(delta);
        body.push_str(",\"logprobs\":null,\"finish_reason\":");
        body.push_str(finish);
        body.push_str("}],\"usage\":null,\"obfuscation\":\"x9\"}\n\n");
    };
    push(r#"{"role":"assistant","content":null,"refusal":null}"#, "null");
    push(
        r#"{"tool_calls":[{"index":0,"id":"call_Bench000000000000000001","type":"function","function":{"name":"write_file","arguments":""}}]}"#,
        "null",
    );
    let bytes = args.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        let mut end = (start + FRAGMENT).min(bytes.len());
        while !args.is_char_boundary(end) {
            end -= 1;
        }
        let fragment = serde_json::to_string(&args[start..end]).unwrap();
        push(
            &format!(r#"{{"tool_calls":[{{"index":0,"function":{{"arguments":{fragment}}}}}]}}"#),
            "null",
        );
        start = end;
    }
    push("{}", "\"tool_calls\"");
    body.push_str("data: {\"id\":\"chatcmpl-Bench0000000000000000000001\",\"object\":\"chat.completion.chunk\",\"created\":1760000000,\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":300000,\"total_tokens\":300120,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n");
    body.push_str("data: [DONE]\n\n");
    (args.len(), body.into_bytes())
}

fn run(body: &[u8], model: &Model) -> usize {
    let mut sse = SseDecoder::new();
    let mut decoder = Decoder::new();
    let mut assembler = MessageAssembler::new(model, 0);
    let mut events = Vec::new();
    let mut deltas = Vec::new();
    let mut args_len = 0;
    let mut drain = |deltas: &mut Vec<_>, assembler: &mut MessageAssembler| {
        for d in deltas.drain(..) {
            assembler.push(d);
        }
        while let Some(e) = assembler.next_event() {
            if let AssistantEvent::Done { message, reason } = e {
                assert_eq!(reason, StopReason::ToolUse);
                let call = message.tool_calls().next().unwrap();
                args_len = call.arguments["content"].as_str().unwrap().len();
                black_box(message);
            }
        }
    };
    for chunk in body.chunks(CHUNK) {
        sse.push(chunk, &mut events).unwrap();
        for e in events.drain(..) {
            decoder.event(e, &mut deltas);
        }
        drain(&mut deltas, &mut assembler);
    }
    sse.finish(&mut events).unwrap();
    for e in events.drain(..) {
        decoder.event(e, &mut deltas);
    }
    decoder.end(&mut deltas);
    drain(&mut deltas, &mut assembler);
    args_len
}

/// The same bytes through `SseDecoder` → `Decoder` only (deltas dropped): the
/// provider's own share of the work.
fn run_decoder_only(body: &[u8]) -> usize {
    let mut sse = SseDecoder::new();
    let mut decoder = Decoder::new();
    let mut events = Vec::new();
    let mut deltas = Vec::new();
    let mut n = 0;
    for chunk in body.chunks(CHUNK) {
        sse.push(chunk, &mut events).unwrap();
        for e in events.drain(..) {
            decoder.event(e, &mut deltas);
        }
        n += deltas.len();
        deltas.clear();
    }
    sse.finish(&mut events).unwrap();
    for e in events.drain(..) {
        decoder.event(e, &mut deltas);
    }
    decoder.end(&mut deltas);
    n + deltas.len()
}

fn bench(c: &mut Criterion) {
    let (args_len, body) = build();
    let model = Model {
        id: "gpt-4o-mini".into(),
        api: "openai-completions".into(),
        provider: "openai".into(),
        ..Model::default()
    };
    assert!(run(&body, &model) > ARGS_BYTES - 4096, "the stream must decode to the full arguments");
    let mut group = c.benchmark_group("openai_completions_stream");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    group.warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Bytes(args_len as u64));
    group.bench_function(format!("1MiB_args_100B_fragments_wire_{}KiB", body.len() / 1024), |b| {
        b.iter(|| black_box(run(black_box(&body), &model)))
    });
    group.bench_function("sse_only", |b| {
        b.iter(|| {
            let mut sse = SseDecoder::new();
            let mut events = Vec::new();
            let mut n = 0;
            for chunk in body.chunks(CHUNK) {
                sse.push(chunk, &mut events).unwrap();
                n += events.len();
                events.clear();
            }
            sse.finish(&mut events).unwrap();
            black_box(n)
        })
    });
    group.bench_function("sse_and_decoder_only", |b| {
        b.iter(|| black_box(run_decoder_only(black_box(&body))))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
