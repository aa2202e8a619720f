//! The fuzz targets' bodies, shared by the libFuzzer binaries (`fuzz/fuzz_targets/*.rs`) and
//! by the seed-corpus replay test that `cargo test --workspace` runs (`xtask/src/fuzz.rs`
//! includes this file with `#[path]`, so it must build with the workspace lints: no `unsafe`,
//! no indexing, no `unwrap`).
//!
//! Every target takes raw bytes. The first byte picks how the rest is split into chunks
//! ([`chunks`]): 0 = one chunk, 1 = one byte per chunk, otherwise pseudo-random sizes. The
//! `sse_decoder` target also uses the second byte for the decoder's event-size limit. A panic or
//! a failed `assert!` is a crash.
//!
//! Checks, beyond "no panic":
//!
//! * `sse_decoder`: splitting the body anywhere gives the same events and the same error as
//!   decoding it whole; the memory the decoder holds stays within a small multiple of its event
//!   size limit plus the chunk size (when the caller supplies [`Heap`] accounting).
//! * `partial_json`: `value()` is always an object; `raw()` is the input; the value after
//!   fragments equals the value after one push; `finish()` equals `parse_streaming_json(raw)`;
//!   peak memory is linear in the input.
//! * `partial_json_differential`: when the body is valid JSON for `serde_json` (an independent
//!   implementation), `PartialJson` fed in fragments is complete and `finish()` equals
//!   serde_json's value (`{}` for a non-object), for the body as written and for serde_json's
//!   compact re-serialization. The one documented exception (the drive-path rule: a drive
//!   letter, `:` and a control escape, `partial_json` module docs) is skipped.
//! * `aws_event_stream`: `llm_bedrock::AwsEventStreamFraming` (AWS event-stream frames). Byte 1
//!   picks the mode. Raw mode (even): the rest is the body; splitting it anywhere gives the same
//!   frames and the same error as decoding it whole, and after an error the framing keeps
//!   failing. Differential mode (odd): the rest describes frames (string headers and payloads),
//!   which an encoder written here from the wire layout (AWS event-stream, `crc32fast` for the CRCs,
//!   independent of `aws-smithy-eventstream`) turns into bytes, optionally with one byte
//!   corrupted or the body cut short; the decoder must return exactly the frames described, or,
//!   with a corruption, the frames before the corrupted one and an error (CRC-32 detects every
//!   one-byte error), or, when cut, the complete frames and a `Truncated` error.
//! * `<provider>_stream`: bytes -> `SseDecoder` -> the provider's `WireDecoder` ->
//!   `MessageAssembler`, as `llm_core::raw::drive` and `AssistantStream` do it. Exactly one terminal
//!   event, and it is the last; the terminal's reason matches its message; every
//!   `content_index` is in range; `*End` events agree with the final message; tool arguments
//!   are objects; the transcript does not depend on the chunking or on reading `partial()`;
//!   peak memory is linear in the input.

use llm_bedrock::{AwsEventStreamFraming, AwsFrame, AwsFrameError};
use llm_core::raw::drive::WireDecoder;
use llm_core::raw::framing::Framing;
use llm_core::raw::partial_json::{PartialJson, parse_streaming_json};
use llm_core::raw::sse::{SseDecoder, SseError, SseEvent};
use llm_core::{
    AssistantContent, AssistantEvent, AssistantMessage, Error, ErrorKind, Model, ModelCost,
    StopReason,
    raw::{Delta, MessageAssembler},
};

/// Heap accounting from the caller's counting global allocator (the fuzz binaries have one;
/// the replay test passes `None` and skips the memory checks).
#[derive(Debug, Clone, Copy)]
pub struct Heap {
    /// Bytes currently allocated.
    pub live: fn() -> usize,
    /// Highest `live` since the last `reset_peak`.
    pub peak: fn() -> usize,
    /// Sets the peak to the current `live`.
    pub reset_peak: fn(),
}

/// Every target, by the name of its libFuzzer binary and corpus folder.
pub const TARGETS: &[&str] = &[
    "sse_decoder",
    "partial_json",
    "partial_json_differential",
    "anthropic_stream",
    "openai_completions_stream",
    "openai_responses_stream",
    "google_stream",
    "mistral_stream",
    "aws_event_stream",
    "http_anthropic",
    "http_openai_completions",
    "http_openai_responses",
    "http_google",
    "http_mistral",
    "http_bedrock",
];

/// Runs target `name` on `data`; `false` if there is no such target.
pub fn run(name: &str, data: &[u8], heap: Option<&Heap>) -> bool {
    match name {
        "sse_decoder" => sse_decoder(data, heap),
        "partial_json" => partial_json(data, heap),
        "partial_json_differential" => partial_json_differential(data),
        "aws_event_stream" => aws_event_stream(data, heap),
        other => match (Provider::from_target(other), HttpProvider::from_target(other)) {
            (Some(provider), _) => provider_stream(provider, data, heap),
            (None, Some(provider)) => http_response(provider, data, heap),
            (None, None) => return false,
        },
    }
    true
}

/// A provider whose stream state machine is fuzzed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// `llm-anthropic`.
    Anthropic,
    /// `llm-openai-completions`.
    OpenAiCompletions,
    /// `llm-openai-responses`.
    OpenAiResponses,
    /// `llm-google`.
    Google,
    /// `llm-mistral`.
    Mistral,
}

impl Provider {
    /// All providers.
    pub const ALL: [Provider; 5] = [
        Provider::Anthropic,
        Provider::OpenAiCompletions,
        Provider::OpenAiResponses,
        Provider::Google,
        Provider::Mistral,
    ];

    /// The fixtures folder name (`fixtures/<name>/`).
    pub fn fixtures_name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAiCompletions => "openai-completions",
            Provider::OpenAiResponses => "openai-responses",
            Provider::Google => "google",
            Provider::Mistral => "mistral",
        }
    }

    /// The fuzz target's name.
    pub fn target(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic_stream",
            Provider::OpenAiCompletions => "openai_completions_stream",
            Provider::OpenAiResponses => "openai_responses_stream",
            Provider::Google => "google_stream",
            Provider::Mistral => "mistral_stream",
        }
    }

    fn from_target(name: &str) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| p.target() == name)
    }

    /// A fresh stream decoder with the provider's default settings.
    pub fn decoder(self) -> Box<dyn WireDecoder> {
        match self {
            Provider::Anthropic => Box::new(llm_anthropic::Decoder::new()),
            Provider::OpenAiCompletions => Box::new(llm_openai_completions::Decoder::new()),
            Provider::OpenAiResponses => Box::new(llm_openai_responses::bench_decoder()),
            Provider::Google => Box::new(llm_google::Decoder::new()),
            Provider::Mistral => Box::new(llm_mistral::__private::decoder()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Input splitting
// ---------------------------------------------------------------------------------------------

/// Chunk lengths for `len` bytes: `seed` 0 = one chunk, 1 = one byte each, otherwise
/// pseudo-random lengths between 1 and `2^(seed % 12 + 1)`.
pub fn chunk_lengths(len: usize, seed: u8) -> Vec<usize> {
    match seed {
        0 => return vec![len],
        1 => return vec![1; len],
        _ => {}
    }
    let max = 2u64 << (seed % 12);
    let mut state = u64::from(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::new();
    let mut left = len;
    while left > 0 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let n = usize::try_from(state % max).unwrap_or(0) + 1;
        let n = n.min(left);
        out.push(n);
        left -= n;
    }
    out
}

/// `bytes` split by [`chunk_lengths`].
pub fn chunks(bytes: &[u8], seed: u8) -> Vec<&[u8]> {
    let mut rest = bytes;
    let mut out = Vec::new();
    for n in chunk_lengths(bytes.len(), seed) {
        let (head, tail) = rest.split_at(n.min(rest.len()));
        out.push(head);
        rest = tail;
    }
    out
}

/// `text` split by [`chunk_lengths`], each cut moved forward to a character boundary.
pub fn str_chunks(text: &str, seed: u8) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut end = 0usize;
    for n in chunk_lengths(text.len(), seed) {
        end = (end + n).max(start);
        while end < text.len() && !text.is_char_boundary(end) {
            end += 1;
        }
        if end > start
            && let Some(piece) = text.get(start..end.min(text.len()))
        {
            out.push(piece);
            start = end;
        }
    }
    out
}

fn split_header(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((&seed, rest)) => (seed, rest),
        None => (0, &[]),
    }
}

// ---------------------------------------------------------------------------------------------
// sse_decoder
// ---------------------------------------------------------------------------------------------

/// Heap bytes owned by decoded events (exact: the counting allocator counts requested sizes).
fn events_heap(events: &Vec<SseEvent>) -> usize {
    events.capacity() * std::mem::size_of::<SseEvent>()
        + events
            .iter()
            .map(|e| {
                e.data.capacity()
                    + e.event.as_ref().map_or(0, String::capacity)
                    + e.id.as_ref().map_or(0, String::capacity)
            })
            .sum::<usize>()
}

/// Decodes `body` in chunks; returns the events and the first error.
fn decode_sse(
    body: &[u8],
    seed: u8,
    limit: Option<usize>,
    heap: Option<&Heap>,
) -> (Vec<SseEvent>, Option<SseError>) {
    let pieces = chunks(body, seed);
    let largest = pieces.iter().map(|c| c.len()).max().unwrap_or(0);
    let mut events = Vec::new();
    let base = heap.map(|h| (h.live)());
    let mut decoder = match limit {
        Some(limit) => SseDecoder::with_max_event_size(limit),
        None => SseDecoder::new(),
    };
    let bound = limit.unwrap_or(16 << 20).saturating_mul(12).saturating_add(2 * largest + 256);
    let mut error = None;
    for chunk in pieces {
        let result = decoder.push(chunk, &mut events);
        if let (Some(h), Some(base)) = (heap, base) {
            let held = ((h.live)()).saturating_sub(base).saturating_sub(events_heap(&events));
            assert!(
                held <= bound,
                "SseDecoder holds {held} bytes (limit {limit:?}, largest chunk {largest})"
            );
        }
        if let Err(e) = result {
            error = Some(e);
            break;
        }
    }
    if error.is_none()
        && let Err(e) = decoder.finish(&mut events)
    {
        error = Some(e);
    }
    // After an error the decoder keeps failing.
    if let Some(e) = &error {
        let mut more = Vec::new();
        assert_eq!(decoder.push(b"data: x\n\n", &mut more).as_ref(), Err(e));
        assert!(more.is_empty());
    }
    (events, error)
}

/// `data[0]`: chunking; `data[1]`: event size limit (255 = the default 16 MiB, else
/// `1 + 16 * n`); the rest: the body.
pub fn sse_decoder(data: &[u8], heap: Option<&Heap>) {
    let (seed, rest) = split_header(data);
    let (limit, body) = match rest.split_first() {
        Some((255, body)) => (None, body),
        Some((&n, body)) => (Some(1 + 16 * usize::from(n)), body),
        None => (None, rest),
    };
    let (events, error) = decode_sse(body, seed, limit, heap);
    let (whole_events, whole_error) = decode_sse(body, 0, limit, None);
    assert_eq!(error, whole_error, "the error depends on the chunking");
    assert_eq!(events, whole_events, "the events depend on the chunking");
    for event in &events {
        assert!(event.event.as_deref() != Some(""), "an empty event name is reported as None");
        assert!(event.id.as_deref() != Some(""), "an empty id is reported as None");
    }
}

// ---------------------------------------------------------------------------------------------
// partial_json
// ---------------------------------------------------------------------------------------------

/// `data[0]`: chunking; the rest (lossily decoded as UTF-8): the argument text.
pub fn partial_json(data: &[u8], heap: Option<&Heap>) {
    let (seed, rest) = split_header(data);
    let text = String::from_utf8_lossy(rest);
    let text: &str = &text;
    if let Some(h) = heap {
        (h.reset_peak)();
    }
    let base = heap.map(|h| (h.live)());
    let mut parser = PartialJson::new();
    for piece in str_chunks(text, seed) {
        parser.push(piece);
        assert!(parser.value().is_object(), "value() is not an object");
    }
    assert_eq!(parser.raw(), Some(text));
    let finished = parser.finish();
    assert!(finished.is_object(), "finish() is not an object");
    if let (Some(h), Some(base)) = (heap, base) {
        let peak = ((h.peak)()).saturating_sub(base);
        let bound = 512 * text.len() + (1 << 20);
        assert!(peak <= bound, "PartialJson peaked at {peak} bytes for {} input bytes", text.len());
    }
    let mut whole = PartialJson::new();
    whole.push(text);
    assert_eq!(whole.value(), parser.value(), "value() depends on the fragmentation");
    assert_eq!(
        whole.is_complete(),
        parser.is_complete(),
        "is_complete() depends on the fragmentation"
    );
    assert_eq!(
        finished,
        parse_streaming_json(text),
        "finish() differs from parse_streaming_json(raw)"
    );
}

/// The differential check against serde_json (see the module docs).
pub fn partial_json_differential(data: &[u8]) {
    let (seed, rest) = split_header(data);
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let Ok(strict) = serde_json::from_str::<serde_json::Value>(text) else { return };
    let expected =
        if strict.is_object() { strict } else { serde_json::Value::Object(Default::default()) };
    let compact = serde_json::to_string(&expected).unwrap_or_default();
    for (what, text) in [("as written", text), ("re-serialized", compact.as_str())] {
        if has_drive_control_escape(text) {
            continue;
        }
        let mut parser = PartialJson::new();
        for piece in str_chunks(text, seed) {
            parser.push(piece);
            assert!(parser.value().is_object(), "value() is not an object");
        }
        assert!(parser.is_complete(), "valid JSON ({what}) is not complete");
        assert_eq!(parser.finish(), expected, "PartialJson differs from serde_json ({what})");
    }
}

/// Whether `text` holds an ASCII letter, `:` and a control escape (`\b \f \n \r \t`): the only
/// valid JSON the drive-path rule rewrites (`"C:\new"`, see the `partial_json` module docs).
fn has_drive_control_escape(text: &str) -> bool {
    text.as_bytes().windows(4).any(|w| {
        matches!(w, [letter, b':', b'\\', b'b' | b'f' | b'n' | b'r' | b't'] if letter.is_ascii_alphabetic())
    })
}

// ---------------------------------------------------------------------------------------------
// aws_event_stream
// ---------------------------------------------------------------------------------------------

/// Heap bytes owned by decoded frames (their vector, headers, header strings and payloads).
fn frames_heap(frames: &Vec<AwsFrame>) -> usize {
    frames.capacity() * std::mem::size_of::<AwsFrame>()
        + frames
            .iter()
            .map(|f| {
                std::mem::size_of_val(f.message().headers())
                    + f.string_headers().map(|(n, v)| n.len() + v.len()).sum::<usize>()
                    + f.payload().len()
            })
            .sum::<usize>()
}

/// Decodes `body` in chunks; returns the frames and the first error. After an error the
/// framing must keep failing with it. The memory the framing holds (counted by the caller's
/// allocator, the frames excluded) stays within 8 x the body + 64 KiB.
fn decode_event_stream(
    body: &[u8],
    seed: u8,
    heap: Option<&Heap>,
) -> (Vec<AwsFrame>, Option<AwsFrameError>) {
    let pieces = chunks(body, seed);
    let mut framing = AwsEventStreamFraming::new();
    let mut frames = Vec::new();
    let base = heap.map(|h| (h.live)());
    let mut error = None;
    for chunk in pieces {
        let result = framing.push(chunk, &mut frames);
        if let (Some(h), Some(base)) = (heap, base) {
            let held = ((h.live)()).saturating_sub(base).saturating_sub(frames_heap(&frames));
            let bound = 8 * body.len() + (64 << 10);
            assert!(
                held <= bound,
                "AwsEventStreamFraming holds {held} bytes for {} body bytes",
                body.len()
            );
        }
        if let Err(e) = result {
            error = Some(e);
            break;
        }
    }
    if error.is_none()
        && let Err(e) = framing.finish(&mut frames)
    {
        error = Some(e);
    }
    if let Some(e) = &error {
        let mut more = Vec::new();
        assert_eq!(framing.push(&encode_event_stream(&[], b"{}"), &mut more).as_ref(), Err(e));
        assert!(more.is_empty(), "frames after an error");
    }
    (frames, error)
}

/// One message with string headers, encoded from the AWS event-stream wire layout:
/// `total | headers length | prelude CRC | headers (name length u8, name, 7, value length
/// u16, value) | payload | message CRC`, big-endian, CRC-32 by `crc32fast`.
pub fn encode_event_stream(headers: &[(String, String)], payload: &[u8]) -> Vec<u8> {
    let mut header_bytes = Vec::new();
    for (name, value) in headers {
        header_bytes.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
        header_bytes.extend_from_slice(name.as_bytes());
        header_bytes.push(7);
        header_bytes
            .extend_from_slice(&u16::try_from(value.len()).unwrap_or(u16::MAX).to_be_bytes());
        header_bytes.extend_from_slice(value.as_bytes());
    }
    let total = 16 + header_bytes.len() + payload.len();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&u32::try_from(total).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&u32::try_from(header_bytes.len()).unwrap_or(u32::MAX).to_be_bytes());
    let prelude_crc = crc32fast::hash(&out);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&header_bytes);
    out.extend_from_slice(payload);
    let message_crc = crc32fast::hash(&out);
    out.extend_from_slice(&message_crc.to_be_bytes());
    out
}

/// Reads frame descriptions from `data` until it runs out: per frame a header count (0-3),
/// per header a name (1-16 bytes) and a value (0-255 bytes), then a payload (0-1023 bytes);
/// names and values are made valid UTF-8 lossily.
fn describe_frames(mut data: &[u8]) -> Vec<AwsFrame> {
    let mut take = |n: usize| -> Vec<u8> {
        let (head, tail) = data.split_at(n.min(data.len()));
        data = tail;
        head.to_vec()
    };
    let mut frames = Vec::new();
    while let Some(&count) = take(1).first() {
        let mut headers = Vec::new();
        for _ in 0..count % 4 {
            let name_len = 1 + usize::from(take(1).first().copied().unwrap_or(0) % 16);
            let name = String::from_utf8_lossy(&take(name_len)).into_owned();
            let value_len = usize::from(take(1).first().copied().unwrap_or(0));
            let value = String::from_utf8_lossy(&take(value_len)).into_owned();
            if !name.is_empty() && name.len() <= 255 {
                headers.push((name, value));
            }
        }
        let len = take(2);
        let payload_len = usize::from(u16::from_be_bytes([
            len.first().copied().unwrap_or(0),
            len.get(1).copied().unwrap_or(0),
        ])) % 1024;
        let payload = take(payload_len);
        frames.push(AwsFrame::new(headers, payload));
    }
    frames
}

/// `data[0]`: chunking; `data[1]`: mode (see the module docs); the rest: the body, or (in
/// differential mode) 3 bytes of corruption control and the frame descriptions.
pub fn aws_event_stream(data: &[u8], heap: Option<&Heap>) {
    let (seed, rest) = split_header(data);
    let (mode, rest) = split_header(rest);
    if mode % 2 == 0 {
        let (frames, error) = decode_event_stream(rest, seed, heap);
        let whole = decode_event_stream(rest, 0, None);
        assert_eq!((frames, error), whole, "the outcome depends on the chunking");
        return;
    }
    let (control, description) = rest.split_at(rest.len().min(3));
    let described = describe_frames(description);
    let mut body = Vec::new();
    let mut ends = Vec::new();
    for frame in &described {
        let headers: Vec<(String, String)> =
            frame.string_headers().map(|(n, v)| (n.to_owned(), v.to_owned())).collect();
        body.extend(encode_event_stream(&headers, frame.payload()));
        ends.push(body.len());
    }
    let at = usize::from(u16::from_be_bytes([
        control.first().copied().unwrap_or(0),
        control.get(1).copied().unwrap_or(0),
    ]));
    let flip = control.get(2).copied().unwrap_or(0);
    // Mode 1: intact; 3: one byte corrupted; 5: cut short; others: intact.
    let (frames, error) = match mode % 8 {
        3 if !body.is_empty() && flip != 0 => {
            let at = at % body.len();
            if let Some(b) = body.get_mut(at) {
                *b ^= flip;
            }
            let (frames, error) = decode_event_stream(&body, seed, heap);
            let intact = ends.iter().filter(|&&end| end <= at).count();
            assert!(error.is_some(), "a corrupted byte at {at} was accepted");
            assert_eq!(frames.len(), intact, "frames after the corrupted byte at {at}");
            (frames, None)
        }
        5 if !body.is_empty() => {
            let cut = at % body.len();
            body.truncate(cut);
            let (frames, error) = decode_event_stream(&body, seed, heap);
            let complete = ends.iter().filter(|&&end| end <= cut).count();
            let boundary = ends.get(complete.wrapping_sub(1)).copied().unwrap_or(0);
            let expected =
                (cut != boundary).then_some(AwsFrameError::Truncated { pending: cut - boundary });
            assert_eq!(error, expected, "cut at {cut}");
            assert_eq!(frames.len(), complete, "cut at {cut}");
            (frames, None)
        }
        _ => {
            let (frames, error) = decode_event_stream(&body, seed, heap);
            assert_eq!(frames.len(), described.len(), "frames missing ({error:?})");
            (frames, error)
        }
    };
    assert_eq!(error, None, "valid frames were rejected");
    let prefix = described.get(..frames.len()).unwrap_or_default();
    assert_eq!(frames, prefix, "the frames differ from the encoded ones");
}

// ---------------------------------------------------------------------------------------------
// Provider streams
// ---------------------------------------------------------------------------------------------

fn model() -> Model {
    Model {
        id: "fuzz-model".into(),
        api: "fuzz".into(),
        provider: "fuzz".into(),
        cost: ModelCost { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75 },
        ..Model::default()
    }
}

fn is_terminal(delta: &Delta) -> bool {
    matches!(delta, Delta::Done | Delta::Error(_))
}

fn sse_failure(e: &SseError) -> Delta {
    Delta::Error(
        Error::new(ErrorKind::Decode, "fuzz", format!("Malformed event stream: {e}"))
            .with_retryable(false),
    )
}

fn drain(
    assembler: &mut MessageAssembler,
    deltas: &mut Vec<Delta>,
    events: &mut Vec<AssistantEvent>,
) {
    for delta in deltas.drain(..) {
        assembler.push(delta);
    }
    events.extend(std::iter::from_fn(|| assembler.next_event()));
}

/// Bytes in, events out, as `drive_sse` + `AssistantStream` do it: decoding stops at the
/// first chunk that yields a terminal delta; a body that ends without one is `truncated`.
/// Between chunks the partial message is read when `read_partial` is set.
pub fn stream_events(
    provider: Provider,
    body: &[u8],
    seed: u8,
    read_partial: bool,
) -> Vec<AssistantEvent> {
    let mut sse = SseDecoder::new();
    let mut decoder = provider.decoder();
    let mut assembler = MessageAssembler::new(&model(), 0);
    let mut sse_events = Vec::new();
    let mut deltas = Vec::new();
    let mut events = Vec::new();
    for chunk in chunks(body, seed) {
        let result = sse.push(chunk, &mut sse_events);
        // Events completed before an SSE error in the same chunk come first.
        for event in sse_events.drain(..) {
            llm_core::raw::drive::decode_event(&mut *decoder, event, &mut deltas);
        }
        if let Err(e) = &result {
            deltas.push(sse_failure(e));
        }
        let terminal = deltas.iter().any(is_terminal);
        drain(&mut assembler, &mut deltas, &mut events);
        if terminal {
            return events;
        }
        if read_partial {
            let partial = assembler.partial();
            for call in partial.tool_calls() {
                assert!(call.arguments.is_object(), "partial tool arguments are not an object");
            }
        }
    }
    let result = sse.finish(&mut sse_events);
    for event in sse_events.drain(..) {
        llm_core::raw::drive::decode_event(&mut *decoder, event, &mut deltas);
    }
    match &result {
        Err(e) => deltas.push(sse_failure(e)),
        Ok(()) => llm_core::raw::drive::decode_sse_end(&mut *decoder, &mut deltas),
    }
    drain(&mut assembler, &mut deltas, &mut events);
    if !assembler.is_finished() {
        assembler.push(Delta::Error(Error::new(
            ErrorKind::Truncated,
            "fuzz",
            "Stream ended without a terminal event",
        )));
        events.extend(std::iter::from_fn(|| assembler.next_event()));
    }
    events
}

fn content_index(event: &AssistantEvent) -> Option<usize> {
    match event {
        AssistantEvent::TextStart { content_index }
        | AssistantEvent::TextDelta { content_index, .. }
        | AssistantEvent::TextEnd { content_index, .. }
        | AssistantEvent::ThinkingStart { content_index }
        | AssistantEvent::ThinkingDelta { content_index, .. }
        | AssistantEvent::ThinkingEnd { content_index, .. }
        | AssistantEvent::ToolCallStart { content_index, .. }
        | AssistantEvent::ToolCallDelta { content_index, .. }
        | AssistantEvent::ToolCallEnd { content_index, .. }
        | AssistantEvent::ProviderContent { content_index, .. } => Some(*content_index),
        _ => None,
    }
}

/// The stream invariants of `docs/ARCHITECTURE.md` on one transcript.
pub fn check_transcript(events: &[AssistantEvent]) {
    let terminals = events.iter().filter(|e| e.is_terminal()).count();
    assert_eq!(terminals, 1, "{terminals} terminal events");
    let Some((last, body)) = events.split_last() else { unreachable!("one terminal event exists") };
    let (message, ok): (&AssistantMessage, bool) = match last {
        AssistantEvent::Done { reason, message } => {
            assert_eq!(*reason, message.stop_reason);
            assert!(
                matches!(reason, StopReason::Stop | StopReason::Length | StopReason::ToolUse),
                "done with reason {reason:?}"
            );
            (message, true)
        }
        AssistantEvent::Error { reason, message, .. } => {
            assert_eq!(*reason, message.stop_reason);
            assert!(
                matches!(reason, StopReason::Error | StopReason::Aborted),
                "error with reason {reason:?}"
            );
            assert!(message.error_message.is_some(), "an error message without error_message");
            (message, false)
        }
        other => panic!("the last event is not terminal: {other:?}"),
    };
    if let Some(position) = body.iter().position(|e| matches!(e, AssistantEvent::Start)) {
        assert_eq!(position, 0, "start is not the first event");
    }
    for event in body {
        if let Some(index) = content_index(event) {
            assert!(index < message.content.len(), "content_index {index} out of range");
        }
        let block = content_index(event).and_then(|i| message.content.get(i));
        match (event, block) {
            (AssistantEvent::TextEnd { content, .. }, Some(AssistantContent::Text(t))) => {
                assert_eq!(**content, t.text, "text_end differs from the message");
            }
            (AssistantEvent::ThinkingEnd { content, .. }, Some(AssistantContent::Thinking(t))) => {
                assert_eq!(**content, t.thinking, "thinking_end differs from the message");
            }
            (
                AssistantEvent::ToolCallEnd { tool_call, .. },
                Some(AssistantContent::ToolCall(call)),
            ) => {
                assert!(tool_call.arguments.is_object(), "tool arguments are not an object");
                if ok {
                    assert_eq!(**tool_call, *call, "toolcall_end differs from the message");
                }
            }
            (AssistantEvent::ProviderContent { content, .. }, Some(b)) => assert!(
                matches!(b, AssistantContent::ProviderContent(p) if *p == **content),
                "provider_content differs from the message"
            ),
            (
                AssistantEvent::TextStart { .. }
                | AssistantEvent::TextDelta { .. }
                | AssistantEvent::TextEnd { .. },
                Some(b),
            ) => assert!(matches!(b, AssistantContent::Text(_)), "a text event for another block"),
            (
                AssistantEvent::ThinkingStart { .. }
                | AssistantEvent::ThinkingDelta { .. }
                | AssistantEvent::ThinkingEnd { .. },
                Some(b),
            ) => assert!(
                matches!(b, AssistantContent::Thinking(_)),
                "a thinking event for another block"
            ),
            (
                AssistantEvent::ToolCallStart { .. }
                | AssistantEvent::ToolCallDelta { .. }
                | AssistantEvent::ToolCallEnd { .. },
                Some(b),
            ) => assert!(
                matches!(b, AssistantContent::ToolCall(_)),
                "a tool call event for another block"
            ),
            _ => {}
        }
    }
    for call in message.tool_calls() {
        assert!(call.arguments.is_object(), "final tool arguments are not an object");
    }
}

/// `data[0]`: chunking; the rest: the response body.
pub fn provider_stream(provider: Provider, data: &[u8], heap: Option<&Heap>) {
    let (seed, body) = split_header(data);
    if let Some(h) = heap {
        (h.reset_peak)();
    }
    let base = heap.map(|h| (h.live)());
    let events = stream_events(provider, body, seed, true);
    if let (Some(h), Some(base)) = (heap, base) {
        let peak = ((h.peak)()).saturating_sub(base);
        let bound = 512 * body.len() + (1 << 20);
        assert!(
            peak <= bound,
            "{provider:?} stream peaked at {peak} bytes for {} input bytes",
            body.len()
        );
    }
    check_transcript(&events);
    let whole = stream_events(provider, body, 0, false);
    assert_eq!(events, whole, "the transcript depends on the chunking or on reading partial()");
}

// ---------------------------------------------------------------------------------------------
// http_<provider>: whole HTTP responses through the real client
// ---------------------------------------------------------------------------------------------

/// A provider whose whole HTTP exchange is fuzzed (`http_<name>` targets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpProvider {
    /// `llm-anthropic`.
    Anthropic,
    /// `llm-openai-completions`.
    OpenAiCompletions,
    /// `llm-openai-responses`.
    OpenAiResponses,
    /// `llm-google`.
    Google,
    /// `llm-mistral`.
    Mistral,
    /// `llm-bedrock`.
    Bedrock,
}

/// The statuses a structured input picks from (low 5 bits of its mode byte).
pub const HTTP_STATUSES: [u16; 32] = [
    200, 200, 200, 201, 204, 206, 100, 101, 103, 199, 299, 301, 302, 304, 307, 400, 401, 403, 404,
    408, 409, 413, 422, 429, 500, 502, 503, 504, 529, 599, 600, 999,
];

/// The content types a structured input picks from (its third byte).
pub const HTTP_CONTENT_TYPES: [&str; 9] = [
    "text/event-stream",
    "text/event-stream; charset=utf-8",
    "application/json",
    "application/vnd.amazon.eventstream",
    "application/x-ndjson",
    "text/html; charset=iso-8859-1",
    "text/plain",
    "application/octet-stream",
    "",
];

/// The key the fuzzed requests carry: it must never show in an event.
const HTTP_FUZZ_KEY: &str = "sk-fuzz-key-never-shown-0123456789";

/// A stream that has not ended after this long hangs.
const HTTP_DEADLINE: std::time::Duration = std::time::Duration::from_secs(8);

impl HttpProvider {
    /// All of them.
    pub const ALL: [HttpProvider; 6] = [
        HttpProvider::Anthropic,
        HttpProvider::OpenAiCompletions,
        HttpProvider::OpenAiResponses,
        HttpProvider::Google,
        HttpProvider::Mistral,
        HttpProvider::Bedrock,
    ];

    /// The fuzz target's name.
    pub fn target(self) -> &'static str {
        match self {
            HttpProvider::Anthropic => "http_anthropic",
            HttpProvider::OpenAiCompletions => "http_openai_completions",
            HttpProvider::OpenAiResponses => "http_openai_responses",
            HttpProvider::Google => "http_google",
            HttpProvider::Mistral => "http_mistral",
            HttpProvider::Bedrock => "http_bedrock",
        }
    }

    fn from_target(name: &str) -> Option<HttpProvider> {
        HttpProvider::ALL.into_iter().find(|p| p.target() == name)
    }

    fn info(self) -> &'static llm_core::ProviderInfo {
        match self {
            HttpProvider::Anthropic => &llm_anthropic::INFO,
            HttpProvider::OpenAiCompletions => &llm_openai_completions::INFO,
            HttpProvider::OpenAiResponses => &llm_openai_responses::INFO,
            HttpProvider::Google => &llm_google::INFO,
            HttpProvider::Mistral => &llm_mistral::INFO,
            HttpProvider::Bedrock => &llm_bedrock::INFO,
        }
    }

    /// The fixtures folder name (`fixtures/<name>/`).
    pub fn fixtures_name(self) -> &'static str {
        self.info().name
    }

    /// The content type of the provider's stream.
    pub fn stream_content_type(self) -> &'static str {
        match self {
            HttpProvider::Bedrock => "application/vnd.amazon.eventstream",
            _ => "text/event-stream",
        }
    }

    fn provider(self, client: llm_http::reqwest::Client) -> Box<dyn llm_core::Provider> {
        match self {
            HttpProvider::Anthropic => {
                Box::new(llm_anthropic::AnthropicProvider::builder().http_client(client).build())
            }
            HttpProvider::OpenAiCompletions => Box::new(
                llm_openai_completions::OpenAiCompletionsProvider::builder()
                    .http_client(client)
                    .build(),
            ),
            HttpProvider::OpenAiResponses => Box::new(
                llm_openai_responses::OpenAiResponsesProvider::builder()
                    .http_client(client)
                    .build(),
            ),
            HttpProvider::Google => {
                Box::new(llm_google::GoogleProvider::builder().http_client(client).build())
            }
            HttpProvider::Mistral => {
                Box::new(llm_mistral::MistralProvider::builder().http_client(client).build())
            }
            HttpProvider::Bedrock => {
                Box::new(llm_bedrock::BedrockProvider::builder().http_client(client).build())
            }
        }
    }

    /// The provider's default model, its base URL moved to `addr` (path kept).
    fn model(self, addr: std::net::SocketAddr) -> Model {
        let info = self.info();
        let mut model = info.default_model().unwrap_or_default();
        let path = info
            .default_base_url
            .split_once("://")
            .and_then(|(_, rest)| rest.find('/').and_then(|i| rest.get(i..)))
            .unwrap_or("");
        model.base_url = format!("http://{addr}{}", path.trim_end_matches('/'));
        model
    }
}

/// What one input says the server writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpInput {
    /// Splits the body's writes ([`chunks`]).
    pub seed: u8,
    /// The whole response, as written to every connection.
    pub response: Vec<u8>,
    /// The body as the client should read it (`None`: raw mode, unknown).
    pub body: Option<Vec<u8>>,
}

/// How a structured input frames its body (bits 5-6 of the mode byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// `content-length` equal to the body.
    Length,
    /// `transfer-encoding: chunked`, chunk sizes from the seed.
    Chunked,
    /// No length: the body ends when the connection closes.
    Close,
    /// `content-length` larger than the body (the connection closes early).
    ShortBody,
}

/// The bytes of a structured input: `[seed, mode, content type, headers.., 0, body..]`, where
/// mode's low 5 bits pick a status from [`HTTP_STATUSES`] and bits 5-6 the [`BodyFraming`].
pub fn http_structured(
    seed: u8,
    status_index: u8,
    framing: BodyFraming,
    content_type: u8,
    headers: &[u8],
    body: &[u8],
) -> Vec<u8> {
    let framing = match framing {
        BodyFraming::Length => 0u8,
        BodyFraming::Chunked => 1,
        BodyFraming::Close => 2,
        BodyFraming::ShortBody => 3,
    };
    let mut out = vec![seed, (status_index & 0x1f) | (framing << 5), content_type];
    out.extend_from_slice(headers);
    out.push(0);
    out.extend_from_slice(body);
    out
}

/// The bytes of a raw input: the response written verbatim (mode byte with bit 7 set).
pub fn http_raw(seed: u8, response: &[u8]) -> Vec<u8> {
    let mut out = vec![seed, 0x80];
    out.extend_from_slice(response);
    out
}

/// Reads an input (see [`http_structured`] and [`http_raw`]).
pub fn http_input(data: &[u8]) -> HttpInput {
    let (seed, rest) = split_header(data);
    let (mode, rest) = split_header(rest);
    if mode & 0x80 != 0 {
        return HttpInput { seed, response: rest.to_vec(), body: None };
    }
    let status = HTTP_STATUSES.get(usize::from(mode & 0x1f)).copied().unwrap_or(200);
    let (content_type, rest) = split_header(rest);
    let content_type =
        HTTP_CONTENT_TYPES.get(usize::from(content_type) % HTTP_CONTENT_TYPES.len()).copied();
    let (headers, body) = match rest.iter().position(|&b| b == 0) {
        Some(at) => (rest.get(..at).unwrap_or_default(), rest.get(at + 1..).unwrap_or_default()),
        None => (&[][..], rest),
    };
    let mut out = format!("HTTP/1.1 {status} Fuzz\r\n").into_bytes();
    if let Some(ct) = content_type.filter(|ct| !ct.is_empty()) {
        out.extend_from_slice(format!("content-type: {ct}\r\n").as_bytes());
    }
    for line in headers.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !line.is_empty() {
            out.extend_from_slice(line);
            out.extend_from_slice(b"\r\n");
        }
    }
    match (mode >> 5) & 3 {
        0 => out.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes()),
        1 => out.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n"),
        2 => out.extend_from_slice(b"connection: close\r\n\r\n"),
        _ => out.extend_from_slice(
            format!("content-length: {}\r\n\r\n", body.len() + 1 + usize::from(seed % 16))
                .as_bytes(),
        ),
    }
    if (mode >> 5) & 3 == 1 {
        for piece in chunks(body, seed) {
            if piece.is_empty() {
                continue;
            }
            out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            out.extend_from_slice(piece);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n\r\n");
    } else {
        out.extend_from_slice(body);
    }
    HttpInput { seed, response: out, body: Some(body.to_vec()) }
}

/// Reads one request (head, then `content-length` bytes of body) so that closing the socket
/// afterwards sends a FIN, not a reset.
async fn read_request(socket: &mut tokio::net::TcpStream) {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut piece = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(buf.get(..end).unwrap_or_default()).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return;
            }
        }
        match socket.read(&mut piece).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(piece.get(..n).unwrap_or_default()),
        }
    }
}

/// Serves `input` to every connection; counts them.
async fn http_serve(
    listener: tokio::net::TcpListener,
    input: std::sync::Arc<HttpInput>,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use tokio::io::AsyncWriteExt;
    let mut connections = tokio::task::JoinSet::new();
    while let Ok((mut socket, _)) = listener.accept().await {
        accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let input = input.clone();
        connections.spawn(async move {
            let _ = socket.set_nodelay(true);
            read_request(&mut socket).await;
            for piece in chunks(&input.response, input.seed) {
                if socket.write_all(piece).await.is_err() {
                    return;
                }
            }
            let _ = socket.shutdown().await;
            // Wait for the client to close (bounded by the caller dropping this task).
            let mut sink = [0u8; 1024];
            while let Ok(n) = tokio::io::AsyncReadExt::read(&mut socket, &mut sink).await {
                if n == 0 {
                    break;
                }
            }
        });
    }
}

thread_local! {
    /// One runtime per thread, reused by every input (a runtime per input would dominate).
    static HTTP_RUNTIME: Option<tokio::runtime::Runtime> =
        tokio::runtime::Builder::new_current_thread().enable_all().build().ok();
    /// One client per thread (loading the root stores per input would dominate), with the
    /// providers' settings and no pooled connections, so each attempt gets the response from
    /// the start on a connection of its own.
    static HTTP_CLIENT: Option<llm_http::reqwest::Client> =
        llm_http::client_builder(llm_http::TransportConfig {
            connect_timeout: Some(std::time::Duration::from_secs(2)),
        })
        .pool_max_idle_per_host(0)
        .build()
        .ok();
}

/// `data`: see [`http_input`]. The response is served on loopback to every connection and
/// streamed through the provider's real client (`llm-http`: status, headers, error mapping,
/// the driver, the provider's decoder), with one retry allowed and a recording clock (no
/// sleeping). Checks: it ends within [`HTTP_DEADLINE`] with exactly one terminal event (the
/// transcript invariants of [`check_transcript`]); no more connections than attempts; an error
/// names the provider, its kind agrees with the message's `error_type`, a server wait over
/// the cap was not retried and its wait is kept; the key never shows; peak memory stays within
/// the configured limits.
pub fn http_response(provider: HttpProvider, data: &[u8], heap: Option<&Heap>) {
    http_exchange(provider, data, heap);
}

/// [`http_response`], returning the events and the number of connections the server saw
/// (`None` when the loopback could not be set up).
pub fn http_exchange(
    provider: HttpProvider,
    data: &[u8],
    heap: Option<&Heap>,
) -> Option<(Vec<llm_core::AssistantEvent>, usize)> {
    use futures_util::StreamExt;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let input = Arc::new(http_input(data));
    HTTP_RUNTIME.with(|runtime| {
        let runtime = runtime.as_ref()?;
        runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.ok()?;
            let addr = listener.local_addr().ok()?;
            let accepted = Arc::new(AtomicUsize::new(0));
            let server = tokio::spawn(http_serve(listener, input.clone(), accepted.clone()));
            let client = HTTP_CLIENT.with(Clone::clone)?;
            let sleeper = Arc::new(llm_core::RecordingSleeper::new());
            let options = llm_core::StreamOptions {
                api_key: Some(llm_core::ApiKey::new(HTTP_FUZZ_KEY)),
                retry: llm_core::RetryPolicy {
                    max_retries: 1,
                    jitter: false,
                    ..llm_core::RetryPolicy::default()
                },
                sleeper: Some(sleeper.clone()),
                max_event_bytes: Some(1 << 20),
                provider_options: [("region".to_owned(), serde_json::json!("us-east-1"))]
                    .into_iter()
                    .filter(|_| provider == HttpProvider::Bedrock)
                    .collect(),
                ..llm_core::StreamOptions::default()
            };
            let model = provider.model(addr);
            let context = llm_core::Context {
                system_prompt: Some("Be brief.".into()),
                messages: vec![llm_core::Message::user("hi")],
                tools: Vec::new(),
            };
            let client_provider = provider.provider(client);
            if let Some(h) = heap {
                (h.reset_peak)();
            }
            let base = heap.map(|h| (h.live)());
            let stream = client_provider.stream(&model, &context, &options);
            let collected = tokio::time::timeout(HTTP_DEADLINE, stream.collect::<Vec<_>>()).await;
            let events = match collected {
                Ok(events) => events,
                Err(_) => panic!(
                    "{provider:?}: no terminal event after {} s: hangs",
                    HTTP_DEADLINE.as_secs()
                ),
            };
            if let (Some(h), Some(base)) = (heap, base) {
                // The error body (1 MiB), one event (1 MiB) and the client's buffers.
                let peak = ((h.peak)()).saturating_sub(base);
                let bound = 16 * (1 << 20) + 64 * data.len();
                assert!(
                    peak <= bound,
                    "{provider:?} peaked at {peak} bytes for {} input bytes",
                    data.len()
                );
            }
            server.abort();
            check_transcript(&events);
            let attempts = accepted.load(Ordering::SeqCst);
            assert!(attempts <= 2, "{attempts} connections for at most 2 attempts");
            let shown = format!("{events:?}");
            assert!(!shown.contains(HTTP_FUZZ_KEY), "the key shows in an event");
            if let Some(llm_core::AssistantEvent::Error { error, message, .. }) = events.last() {
                assert_eq!(
                    error.provider,
                    provider.info().provider,
                    "the error names another provider"
                );
                assert_eq!(message.error_type.as_deref(), Some(error.kind.as_str()));
                let delays = sleeper.delays();
                if options.retry.refuses_wait(error.retry_after) {
                    assert!(delays.is_empty() && attempts <= 1, "a wait over the cap was retried");
                }
                assert!(
                    delays.iter().all(|d| *d <= options.retry.max_retry_after),
                    "slept {delays:?}, over the cap"
                );
            }
            Some((events, attempts))
        })
    })
}
