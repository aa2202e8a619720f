//! Peak memory of streaming a 100 MiB text response (the target: "streaming a 100 MiB text
//! response keeps peak memory within the final message's size plus a small constant").
//!
//! Run with `cargo bench -p llm-core --bench memory` (Linux: it reads `/proc/self/status`);
//! figures are kept in `docs/benchmarks.md` under "Memory". Set `MEMORY_BENCH_MIB` for another
//! size.
//!
//! An Anthropic-style event stream (`message_start`, one text block of `text_delta` events of
//! 200 to 300 bytes, `message_delta`, `message_stop`) is generated on the fly and pushed in
//! 64 KiB chunks through `SseDecoder`, a provider-neutral wire decoder (serde parse of each
//! event, as the provider crates do) and `MessageAssembler`; the consumer drops every event as
//! it reads it, as a UI would, and keeps the `done` event's message.
//!
//! Memory is the process's peak resident set (`VmHWM`, reset through `/proc/self/clear_refs`
//! before the stream starts) minus the resident set at that point: what the stream really
//! costs, allocator slack included. A counting `#[global_allocator]` would measure live heap
//! bytes exactly, but it needs `unsafe impl GlobalAlloc`, which the workspace's
//! `unsafe_code = "forbid"` rules out (and a dependency just for this bench is not worth it).
//!
//! Two phases are reported: streaming (every chunk until the last text delta was consumed:
//! this is where a quadratic or leaking decoder would show) and finishing (the terminal
//! event). `text_end` shares the text with the message (`Arc`) and `done` moves the message
//! out, so with a consumer that drops events as it reads them finishing adds no copy of the
//! text (see `docs/benchmarks.md`).
#![allow(clippy::disallowed_methods, reason = "a benchmark reads its own process environment")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "benchmark")]

use std::time::Instant;

use llm_core::raw::sse::{SseDecoder, SseEvent};
use llm_core::{
    AssistantEvent, AssistantMessage, Model, StopReason,
    raw::{Delta, MessageAssembler},
};
use serde::Deserialize;

const MIB: u64 = 1024 * 1024;
const CHUNK: usize = 64 * 1024;

/// `VmRSS` and `VmHWM` of this process, in bytes.
fn rss() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?;
            rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok().map(|k| k * 1024)
        })
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Resets `VmHWM` to the current resident set.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The wire bytes, generated as they are read.
struct Wire {
    target: u64,
    text_sent: u64,
    state: u8,
    seq: u64,
    buf: Vec<u8>,
    /// Decoded (JSON-unescaped) length of each piece.
    decoded: [u64; PIECES.len()],
}

const PIECES: [&str; 4] = [
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. ",
    "Le caf\\u00e9 est pr\u{ea}t \u{2014} it\u{2019}s ready \u{1F600}.\\n",
    "fn main() {\\n    println!(\\\"hello\\\");\\n}\\n",
    "\\tpath = \\\"src\\\\\\\\lib.rs\\\"; // \u{4E2D}\u{6587}\\n",
];

impl Wire {
    fn new(target: u64) -> Wire {
        let decoded = PIECES
            .map(|p| serde_json::from_str::<String>(&format!("\"{p}\"")).unwrap().len() as u64);
        Wire { target, text_sent: 0, state: 0, seq: 0, buf: Vec::with_capacity(2 * CHUNK), decoded }
    }

    /// Appends the next event; `false` at the end.
    fn next_event(&mut self) -> bool {
        let b = &mut self.buf;
        match self.state {
            0 => {
                b.extend_from_slice(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n");
                b.extend_from_slice(b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
                self.state = 1;
            }
            1 if self.text_sent < self.target => {
                b.extend_from_slice(b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"");
                let mut decoded = 0u64;
                let mut i = self.seq as usize;
                while decoded < 200 {
                    let k = i % PIECES.len();
                    b.extend_from_slice(PIECES[k].as_bytes());
                    decoded += self.decoded[k];
                    i += 1;
                }
                self.text_sent += decoded;
                self.seq += 1;
                b.extend_from_slice(b"\"}}\n\n");
            }
            1 => {
                b.extend_from_slice(b"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n");
                b.extend_from_slice(b"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":26000000}}\n\n");
                b.extend_from_slice(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
                self.state = 2;
            }
            _ => return false,
        }
        true
    }

    /// The next chunk of at most 64 KiB into `out`; `false` at the end.
    fn chunk(&mut self, out: &mut Vec<u8>) -> bool {
        while self.buf.len() < CHUNK && self.next_event() {}
        if self.buf.is_empty() {
            return false;
        }
        let n = self.buf.len().min(CHUNK);
        out.clear();
        out.extend(self.buf.drain(..n));
        true
    }
}

#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: &'a str,
    #[serde(default)]
    index: u64,
    #[serde(default)]
    delta: Option<WireDelta>,
}

#[derive(Deserialize)]
struct WireDelta {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
}

/// A provider-neutral wire decoder for the stream above (what a provider's `WireDecoder`
/// does, minus usage and tool calls). With `block_end` false it ignores `content_block_stop`,
/// like a wire format without block ends: the assembler then closes the block at `done`.
fn decode(event: &SseEvent, block_end: bool, out: &mut Vec<Delta>) {
    let wire: WireEvent<'_> = serde_json::from_str(&event.data).expect("valid event");
    match wire.kind {
        "message_start" => {
            out.push(Delta::Metadata { response_id: Some("msg_1".into()), response_model: None })
        }
        "content_block_delta" => {
            if let Some(text) = wire.delta.and_then(|d| d.text) {
                out.push(Delta::Text { key: wire.index, text });
            }
        }
        "content_block_stop" if block_end => out.push(Delta::BlockEnd { key: wire.index }),
        "message_delta" if wire.delta.and_then(|d| d.stop_reason).is_some() => {
            out.push(Delta::Stop(StopReason::Stop))
        }
        "message_stop" => out.push(Delta::Done),
        _ => {}
    }
}

fn text_bytes(message: &AssistantMessage) -> (u64, u64) {
    message
        .content
        .iter()
        .map(|c| match c {
            llm_core::AssistantContent::Text(t) => (t.text.len() as u64, t.text.capacity() as u64),
            _ => (0, 0),
        })
        .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

/// One run's figures, in bytes.
struct Figures {
    final_size: u64,
    stream_overhead: u64,
    peak: u64,
    overhead: u64,
}

/// Streams `target` bytes of text and reports the figures; `None` where `/proc` is missing.
fn scenario(name: &str, target: u64, block_end: bool) -> Option<Figures> {
    let model = Model {
        id: "m".into(),
        api: "anthropic-messages".into(),
        provider: "anthropic".into(),
        ..Model::default()
    };
    let mut wire = Wire::new(target);
    let mut chunk = Vec::with_capacity(CHUNK);
    let mut sse = SseDecoder::new();
    let mut sse_events = Vec::new();
    let mut deltas = Vec::new();
    let mut assembler = MessageAssembler::new(&model, 0);
    let mut final_message = None;
    let mut wire_bytes = 0u64;
    let mut streamed = 0u64;
    let mut events = 0u64;

    if !reset_peak() {
        println!("memory bench: /proc/self/clear_refs is not writable here; skipped");
        return None;
    }
    let (base, _) = rss()?;
    let started = Instant::now();
    let mut stream_peak = 0u64;
    while wire.chunk(&mut chunk) {
        wire_bytes += chunk.len() as u64;
        sse.push(&chunk, &mut sse_events).expect("valid stream");
        for event in sse_events.drain(..) {
            decode(&event, block_end, &mut deltas);
        }
        // As `AssistantStream` does: one delta, then the events it produced.
        for delta in deltas.drain(..) {
            if stream_peak == 0 && !matches!(delta, Delta::Text { .. } | Delta::Metadata { .. }) {
                // Streaming phase: everything until the text block ends.
                stream_peak = rss().map_or(0, |(_, hwm)| hwm);
            }
            assembler.push(delta);
            while let Some(event) = assembler.next_event() {
                events += 1;
                match event {
                    AssistantEvent::TextDelta { delta, .. } => streamed += delta.len() as u64,
                    AssistantEvent::Done { message, .. } => final_message = Some(message),
                    AssistantEvent::Error { error, .. } => panic!("stream failed: {error}"),
                    _ => {}
                }
            }
        }
    }
    let elapsed = started.elapsed();
    let (_, peak) = rss()?;
    let message = final_message.expect("a done event");
    let (text_len, text_capacity) = text_bytes(&message);
    assert_eq!(text_len, streamed, "the final text is what streamed");
    assert!(text_len >= target, "{text_len} < {target}");

    let final_size = text_len;
    let stream_overhead = stream_peak.saturating_sub(base).saturating_sub(final_size);
    let peak = peak.saturating_sub(base);
    let overhead = peak.saturating_sub(final_size);
    println!("memory: {name}");
    println!(
        "  wire bytes            {} ({events} events, {:.2} s, {:.0} MiB/s of wire bytes)",
        mib(wire_bytes),
        elapsed.as_secs_f64(),
        wire_bytes as f64 / MIB as f64 / elapsed.as_secs_f64()
    );
    println!(
        "  final message text    {} (String capacity {})",
        mib(final_size),
        mib(text_capacity)
    );
    println!("  resident at start     {}", mib(base));
    println!(
        "  peak while streaming  {} above start: overhead {} over the text",
        mib(stream_peak.saturating_sub(base)),
        mib(stream_overhead)
    );
    println!(
        "  peak overall          {} above start: overhead {} = {:.2} x final",
        mib(peak),
        mib(overhead),
        overhead as f64 / final_size as f64
    );
    drop(message);
    drop(assembler);
    Some(Figures { final_size, stream_overhead, peak, overhead })
}

fn main() {
    // `cargo test --benches` / `cargo bench -- --list` pass flags: run only on a plain bench run.
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let size_mib: u64 =
        std::env::var("MEMORY_BENCH_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let target = size_mib * MIB;
    let runs = [
        (
            format!(
                "{size_mib} MiB text, Anthropic-style SSE in 64 KiB chunks, block closed by content_block_stop"
            ),
            true,
        ),
        (
            format!(
                "{size_mib} MiB text, same stream, block left open until done (as a wire format without block ends)"
            ),
            false,
        ),
    ];
    for (name, block_end) in runs {
        let Some(f) = scenario(&name, target, block_end) else { return };
        // Streaming holds the text once (the String's doubling slack is address space, resident
        // only once written) plus a constant amount of buffers.
        assert!(
            f.stream_overhead < 8 * MIB,
            "streaming overhead {} is not a small constant",
            mib(f.stream_overhead)
        );
        // Finishing adds no copy: `text_end` shares the text and `done` moves the message.
        assert!(
            f.overhead < 8 * MIB,
            "overhead {} over the final text of {} is not a small constant (peak {})",
            mib(f.overhead),
            mib(f.final_size),
            mib(f.peak)
        );
    }
}
