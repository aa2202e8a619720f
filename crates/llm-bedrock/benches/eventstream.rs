//! Frame decoding throughput of Bedrock's AWS event-stream framing: a 16 MiB body of
//! `contentBlockDelta` messages carrying 100-byte text deltas, pushed in 16 KiB reads.
//!
//! Run with `cargo bench -p llm-bedrock --bench eventstream`; figures are kept in
//! `docs/benchmarks.md`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "benchmark")]

use std::hint::black_box;
use std::time::Duration;

use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use llm_bedrock::{AwsEventStreamFraming, AwsFrame};
use llm_core::raw::framing::Framing;

const MIB: usize = 1024 * 1024;

/// At least `size` bytes of `contentBlockDelta` messages, each with a 100-byte text delta and
/// Bedrock's three string headers.
fn body(size: usize) -> Vec<u8> {
    let text = "The quick brown fox jumps over the lazy dog; \u{e9}t\u{e9} \u{2014} caf\u{e9}. 0123456789 abcdefghijklmnopqrstu";
    let text =
        &text[..text.char_indices().map(|(i, _)| i).take_while(|&i| i <= 100).last().unwrap()];
    let payload =
        serde_json::json!({"contentBlockIndex": 0, "delta": {"text": text}, "p": "abcdefgh"})
            .to_string();
    let message = Message::new(payload.into_bytes())
        .add_header(Header::new(":event-type", HeaderValue::String("contentBlockDelta".into())))
        .add_header(Header::new(":content-type", HeaderValue::String("application/json".into())))
        .add_header(Header::new(":message-type", HeaderValue::String("event".into())));
    let mut one = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut one).unwrap();
    let mut out = Vec::with_capacity(size + one.len());
    while out.len() < size {
        out.extend_from_slice(&one);
    }
    out
}

/// Frames the body read by read; returns the number of frames and payload bytes.
fn frame_all(body: &[u8], read: usize) -> (usize, usize) {
    let mut framing = AwsEventStreamFraming::new();
    let mut frames: Vec<AwsFrame> = Vec::new();
    let (mut count, mut bytes) = (0, 0);
    for chunk in body.chunks(read) {
        framing.push(chunk, &mut frames).unwrap();
        for frame in frames.drain(..) {
            count += 1;
            bytes += frame.payload().len();
        }
    }
    framing.finish(&mut frames).unwrap();
    (count, bytes)
}

#[derive(serde::Deserialize)]
struct Delta<'a> {
    #[serde(borrow)]
    delta: Text<'a>,
}

#[derive(serde::Deserialize)]
struct Text<'a> {
    #[serde(borrow)]
    text: std::borrow::Cow<'a, str>,
}

/// Frames the body and parses every payload's text delta, as a decoder would.
fn frame_and_parse(body: &[u8], read: usize) -> usize {
    let mut framing = AwsEventStreamFraming::new();
    let mut frames: Vec<AwsFrame> = Vec::new();
    let mut text = 0;
    for chunk in body.chunks(read) {
        framing.push(chunk, &mut frames).unwrap();
        for frame in frames.drain(..) {
            if frame.header(":event-type") == Some("contentBlockDelta") {
                let delta: Delta<'_> = serde_json::from_slice(frame.payload()).unwrap();
                text += delta.delta.text.len();
            }
        }
    }
    text
}

fn bench_framing(c: &mut Criterion) {
    let mut group = c.benchmark_group("aws_event_stream");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    let body = body(16 * MIB);
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("framing/16MiB", |b| {
        b.iter(|| black_box(frame_all(black_box(&body), 16 * 1024)));
    });
    group.bench_function("framing_100_byte_reads/16MiB", |b| {
        b.iter(|| black_box(frame_all(black_box(&body), 100)));
    });
    group.bench_function("framing_and_serde/16MiB", |b| {
        b.iter(|| black_box(frame_and_parse(black_box(&body), 16 * 1024)));
    });
    group.finish();
}

criterion_group!(benches, bench_framing);
criterion_main!(benches);
