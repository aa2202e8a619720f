//! Tests for the SSE decoder: every split point of recorded-style streams decodes like the
//! whole stream; framing rules; errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]

use llm_core::raw::sse::{SseDecoder, SseError, SseEvent};
use proptest::prelude::*;

fn ev(event: Option<&str>, data: &str, id: Option<&str>) -> SseEvent {
    SseEvent { event: event.map(Into::into), data: data.into(), id: id.map(Into::into) }
}

fn decode_parts(parts: &[&[u8]]) -> Result<Vec<SseEvent>, SseError> {
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    for part in parts {
        d.push(part, &mut out)?;
    }
    d.finish(&mut out)?;
    Ok(out)
}

fn decode(body: &[u8]) -> Result<Vec<SseEvent>, SseError> {
    decode_parts(&[body])
}

const ANTHROPIC: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"content\":[]}}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read\",\"input\":{}}}\n\n",
    "event: ping\n",
    "data: {\"type\": \"ping\"}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"caf\u{e9} \u{2019}\u{1F600}\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":0     }\n\n",
    "event: message_stop\n",
    "data: {\"type\":\"message_stop\"}\n\n",
);

const OPENAI: &str = concat!(
    ": keep-alive comment\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"It\u{2019}s\"}}],\"obfuscation\":\"x\"}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\\\":\"}}]}}]}\n\n",
    "retry: 1000\n",
    "data: [DONE]\n\n",
);

const GEMINI: &str = concat!(
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\u{4E2D}\u{6587}\"}]}}]}\r\n\r\n",
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": \"f\",\"args\": {}}}]},\"finishReason\": \"STOP\"}]}\r\n\r\n",
);

const MULTI: &str = concat!(
    "\u{FEFF}id: 1\r",
    "event: multi\r",
    "data: line one\r",
    "data:line two\r",
    "data:\r",
    "unknown: field\r",
    "data\r",
    "\r",
    "event: no-data-so-never-dispatched\n\n",
    "data:  two spaces\n",
    "id\n",
    "\n",
    "data: final without blank line",
);

fn expected(name: &str) -> Vec<SseEvent> {
    match name {
        "anthropic" => vec![
            ev(
                Some("message_start"),
                "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"content\":[]}}",
                None,
            ),
            ev(
                Some("content_block_start"),
                "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read\",\"input\":{}}}",
                None,
            ),
            ev(Some("ping"), "{\"type\": \"ping\"}", None),
            ev(
                Some("content_block_delta"),
                "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"caf\u{e9} \u{2019}\u{1F600}\"}}",
                None,
            ),
            ev(
                Some("content_block_stop"),
                "{\"type\":\"content_block_stop\",\"index\":0     }",
                None,
            ),
            ev(Some("message_stop"), "{\"type\":\"message_stop\"}", None),
        ],
        "openai" => vec![
            ev(
                None,
                "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"It\u{2019}s\"}}],\"obfuscation\":\"x\"}",
                None,
            ),
            ev(
                None,
                "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\\\":\"}}]}}]}",
                None,
            ),
            ev(None, "[DONE]", None),
        ],
        "gemini" => vec![
            ev(
                None,
                "{\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\u{4E2D}\u{6587}\"}]}}]}",
                None,
            ),
            ev(
                None,
                "{\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": \"f\",\"args\": {}}}]},\"finishReason\": \"STOP\"}]}",
                None,
            ),
        ],
        "multi" => vec![
            ev(Some("multi"), "line one\nline two\n\n", Some("1")),
            ev(None, " two spaces", None),
            ev(None, "final without blank line", None),
        ],
        _ => unreachable!(),
    }
}

const STREAMS: [(&str, &str); 4] =
    [("anthropic", ANTHROPIC), ("openai", OPENAI), ("gemini", GEMINI), ("multi", MULTI)];

#[test]
fn whole_streams_decode_as_expected() {
    for (name, body) in STREAMS {
        assert_eq!(decode(body.as_bytes()).unwrap(), expected(name), "{name}");
    }
}

#[test]
fn every_split_point_matches_whole() {
    for (name, body) in STREAMS {
        let bytes = body.as_bytes();
        let whole = expected(name);
        for k in 1..bytes.len() {
            let got = decode_parts(&[&bytes[..k], &bytes[k..]]).unwrap();
            assert_eq!(got, whole, "{name} split at {k}");
        }
        for k in 1..bytes.len().saturating_sub(3) {
            let got = decode_parts(&[&bytes[..k], &bytes[k..k + 2], &[], &bytes[k + 2..]]).unwrap();
            assert_eq!(got, whole, "{name} three-way split at {k}");
        }
    }
}

#[test]
fn one_byte_at_a_time() {
    for (name, body) in STREAMS {
        let parts: Vec<&[u8]> = body.as_bytes().chunks(1).collect();
        assert_eq!(decode_parts(&parts).unwrap(), expected(name), "{name}");
    }
}

#[test]
fn events_are_emitted_as_soon_as_complete() {
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    d.push(b"data: a\n", &mut out).unwrap();
    assert!(out.is_empty());
    d.push(b"\ndata: b\r", &mut out).unwrap();
    assert_eq!(out, vec![ev(None, "a", None)]);
    d.push(b"\r", &mut out).unwrap();
    assert_eq!(out.len(), 2);
}

#[test]
fn crlf_split_between_cr_and_lf_is_one_line_break() {
    let got = decode_parts(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]).unwrap();
    assert_eq!(got, vec![ev(None, "a\nb", None)]);
}

#[test]
fn id_carries_over_and_empty_id_clears() {
    let got =
        decode(b"id: 5\ndata: a\n\ndata: b\n\nid:\ndata: c\n\nid: x\0y\ndata: d\n\n").unwrap();
    assert_eq!(
        got,
        vec![
            ev(None, "a", Some("5")),
            ev(None, "b", Some("5")),
            ev(None, "c", None),
            ev(None, "d", None)
        ]
    );
}

#[test]
fn invalid_utf8_reports_offset() {
    let body = b"data: ok\n\ndata: bad \xFF here\n\n";
    let err = decode(body).unwrap_err();
    assert_eq!(err, SseError::InvalidUtf8 { offset: 20 });
    // Same offset when the bad line is split across chunks.
    for k in 1..body.len() {
        assert_eq!(
            decode_parts(&[&body[..k], &body[k..]]).unwrap_err(),
            SseError::InvalidUtf8 { offset: 20 }
        );
    }
    // A truncated multi-byte character at the very end.
    assert_eq!(decode(b"data: \xE2\x80").unwrap_err(), SseError::InvalidUtf8 { offset: 6 });
    // The error sticks.
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    assert!(d.push(b"data: \xC3\x28\n", &mut out).is_err());
    assert!(d.push(b"data: fine\n\n", &mut out).is_err());
    assert!(d.finish(&mut out).is_err());
}

#[test]
fn oversize_event_is_an_error() {
    let mut d = SseDecoder::with_max_event_size(64);
    let mut out = Vec::new();
    d.push(b"data: small\n\n", &mut out).unwrap();
    assert_eq!(out.len(), 1);
    let big = vec![b'x'; 40];
    d.push(b"data: ", &mut out).unwrap();
    d.push(&big, &mut out).unwrap();
    assert_eq!(d.push(&big, &mut out), Err(SseError::EventTooLarge { limit: 64 }));

    // Many small data lines add up.
    let mut d = SseDecoder::with_max_event_size(64);
    let mut out = Vec::new();
    let err = d.push(&b"data: 0123456789\n".repeat(10), &mut out).unwrap_err();
    assert_eq!(err, SseError::EventTooLarge { limit: 64 });

    // A line without a break never grows past the limit.
    let mut d = SseDecoder::with_max_event_size(1000);
    let mut out = Vec::new();
    let mut result = Ok(());
    for _ in 0..1000 {
        result = d.push(&[b'y'; 100], &mut out);
        if result.is_err() {
            break;
        }
    }
    assert_eq!(result, Err(SseError::EventTooLarge { limit: 1000 }));
}

#[test]
fn bare_json_body_becomes_one_event() {
    let body = b"{\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}";
    assert_eq!(decode(body).unwrap(), vec![ev(None, std::str::from_utf8(body).unwrap(), None)]);
    let pretty =
        "\n{\n  \"error\": {\n    \"code\": 429,\n    \"message\": \"quota \u{2019}\"\n  }\n}\n";
    let expected = vec![ev(None, pretty.trim(), None)];
    for k in 1..pretty.len() {
        let b = pretty.as_bytes();
        assert_eq!(decode_parts(&[&b[..k], &b[k..]]).unwrap(), expected, "split at {k}");
    }
    // Not JSON-looking, or a real stream: no bare event.
    assert_eq!(decode(b"Internal Server Error").unwrap(), vec![]);
    assert_eq!(decode(b"{\"a\":1}\ndata: x\n\n").unwrap(), vec![ev(None, "x", None)]);
    assert_eq!(decode(b"").unwrap(), vec![]);
}

#[test]
fn decoder_is_reusable_after_finish() {
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    d.push(b"data: a", &mut out).unwrap();
    d.finish(&mut out).unwrap();
    d.push(b"data: b\n\n", &mut out).unwrap();
    assert_eq!(out, vec![ev(None, "a", None), ev(None, "b", None)]);
}

proptest! {
    #[test]
    fn random_chunking_matches_whole(
        which in 0usize..4,
        cuts in prop::collection::vec(any::<usize>(), 0..30),
    ) {
        let (name, body) = STREAMS[which];
        let bytes = body.as_bytes();
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        points.push(0);
        points.push(bytes.len());
        points.sort_unstable();
        let parts: Vec<&[u8]> = points.windows(2).map(|w| &bytes[w[0]..w[1]]).collect();
        prop_assert_eq!(decode_parts(&parts).unwrap(), expected(name));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_chunking_does_not_matter(
        body in prop::collection::vec(prop::sample::select(vec![
            b'd', b'a', b't', b':', b' ', b'\n', b'\r', b'{', b'x', 0xE2, 0x80, 0x99, 0xFF, b'e', b'i',
        ]), 0..80),
        cut in any::<usize>(),
    ) {
        let k = cut % (body.len() + 1);
        prop_assert_eq!(decode(&body), decode_parts(&[&body[..k], &body[k..]]));
    }
}

/// Decodes `body` in one push with event size limit `limit`.
fn decode_limited(body: &[u8], limit: usize) -> Result<Vec<SseEvent>, SseError> {
    let mut d = SseDecoder::with_max_event_size(limit);
    let mut out = Vec::new();
    d.push(body, &mut out)?;
    d.finish(&mut out)?;
    Ok(out)
}

#[test]
fn size_limit_boundaries_are_inclusive() {
    let too_large = |limit| Err(SseError::EventTooLarge { limit });
    // A complete line of exactly the limit is fine, one byte more is not.
    let body = b"data: 12345\n\n";
    assert_eq!(decode_limited(body, 11).unwrap(), vec![ev(None, "12345", None)]);
    assert_eq!(decode_limited(body, 10), too_large(10));
    // The data already held counts: `a\n` (2 bytes) plus the 7-byte line.
    let body = b"data: a\ndata: b\n\n";
    assert_eq!(decode_limited(body, 9).unwrap(), vec![ev(None, "a\nb", None)]);
    assert_eq!(decode_limited(body, 8), too_large(8));
    // A partial line waiting for its break: exactly the limit is fine.
    let mut d = SseDecoder::with_max_event_size(7);
    let mut out = Vec::new();
    assert_eq!(d.push(b"data: 1", &mut out), Ok(()));
    let mut d = SseDecoder::with_max_event_size(6);
    assert_eq!(d.push(b"data: 1", &mut out), Err(SseError::EventTooLarge { limit: 6 }));
    // A partial line with data held: 2 + 7 bytes.
    let mut d = SseDecoder::with_max_event_size(9);
    assert_eq!(d.push(b"data: a\ndata: b", &mut out), Ok(()));
    let mut d = SseDecoder::with_max_event_size(8);
    assert_eq!(d.push(b"data: a\ndata: b", &mut out), Err(SseError::EventTooLarge { limit: 8 }));
    // A bare JSON body: its lines and blank lines count.
    assert_eq!(decode_limited(b"{\n}\n", 4).unwrap(), vec![ev(None, "{\n}", None)]);
    assert_eq!(decode_limited(b"{\n}\n", 3).unwrap(), vec![ev(None, "{\n}", None)]);
    assert_eq!(decode_limited(b"{\n}\n", 2), too_large(2));
    assert_eq!(decode_limited(b"{\n\n", 3).unwrap(), vec![ev(None, "{", None)]);
    assert_eq!(decode_limited(b"{\n\n", 2), too_large(2));
}

#[test]
fn error_offsets_count_the_byte_order_mark_and_buffered_lines() {
    assert_eq!(decode(b"\xEF\xBB\xBFdata: \xFF\n"), Err(SseError::InvalidUtf8 { offset: 9 }));
    assert_eq!(
        decode(b"\xEF\xBB\xBFdata: a\n\n").unwrap(),
        vec![ev(None, "a", None)],
        "the mark is skipped"
    );
    // Only a leading mark is skipped.
    assert_eq!(decode(b"data: a\n\n\xEF\xBB\xBFdata: b\n\n").unwrap(), vec![ev(None, "a", None)]);
    // The invalid byte is in a line that started in an earlier chunk.
    assert_eq!(
        decode_parts(&[b"data: x\n\n", b"data: ab", b"c\xFF\n"]),
        Err(SseError::InvalidUtf8 { offset: 18 })
    );
    assert_eq!(
        decode_parts(&[b"data: x\n\ndata: ab", b"c", b"\xFF\n"]),
        Err(SseError::InvalidUtf8 { offset: 18 })
    );
}

#[test]
fn field_details() {
    // An `id` with NUL is ignored; an empty event name is no name.
    assert_eq!(
        decode(b"id: 1\n\nid: a\0b\nevent:\ndata: x\n\n").unwrap(),
        vec![ev(None, "x", Some("1"))]
    );
    // `\r` at the end of a chunk, then a chunk that does not start with `\n`.
    assert_eq!(
        decode_parts(&[b"data: a\r", b"data: b\r", b"\r"]).unwrap(),
        vec![ev(None, "a\nb", None)]
    );
    assert_eq!(decode_parts(&[b"data: a\r", b"", b"\n\n"]).unwrap(), vec![ev(None, "a", None)]);
    // Errors stick.
    let mut d = SseDecoder::with_max_event_size(4);
    let mut out = Vec::new();
    assert!(d.push(b"data: 12345", &mut out).is_err());
    assert_eq!(d.push(b"\n\n", &mut out), Err(SseError::EventTooLarge { limit: 4 }));
    assert_eq!(d.finish(&mut out), Err(SseError::EventTooLarge { limit: 4 }));
    assert!(out.is_empty());
    let debug = format!("{:?}", SseDecoder::with_max_event_size(77));
    assert!(debug.contains("max_event_size: 77"), "{debug}");
    assert_eq!(format!("{:?}", SseDecoder::default()), format!("{:?}", SseDecoder::new()));
}

#[test]
fn default_limit_is_16_mib_inclusive() {
    const LIMIT: usize = 16 * 1024 * 1024;
    let mut line = b"data: ".to_vec();
    line.resize(LIMIT, b'x');
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    // Exactly the limit as a partial line, then as a complete line.
    assert_eq!(d.push(&line, &mut out), Ok(()));
    assert_eq!(d.push(b"\n\n", &mut out), Ok(()));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].data.len(), LIMIT - 6);
    line.push(b'x');
    let mut d = SseDecoder::new();
    assert_eq!(d.push(&line, &mut out), Err(SseError::EventTooLarge { limit: LIMIT }));
}

#[test]
fn comment_and_retry_lines_make_it_an_event_stream() {
    // A body that starts like JSON but has SSE lines is not a bare JSON document.
    assert_eq!(decode(b"{\n: keep-alive\n").unwrap(), vec![]);
    assert_eq!(decode(b"{\nretry: 5\n").unwrap(), vec![]);
    assert_eq!(decode(b"{\nnot sse\n").unwrap(), vec![ev(None, "{\nnot sse", None)]);
}

#[test]
fn crlf_inside_one_event_is_one_line_break() {
    assert_eq!(decode(b"data: a\r\ndata: b\r\n\r\n").unwrap(), vec![ev(None, "a\nb", None)]);
}

/// Long lines (a whole value in one event, from 1 KiB) arrive in many chunks and are handed
/// over rather than copied: every way of framing them decodes exactly as the body pushed
/// whole (where no line is assembled from chunks), for values around the 1 KiB threshold and
/// far above it.
#[test]
fn long_lines_split_into_chunks_decode_like_the_whole_body() {
    let large: String = (0..9000).map(|i| format!("{i}:caf\u{e9}\u{1F600} ")).collect();
    assert!(large.len() > 100 * 1024);
    let around_threshold = (1010..1030).map(|n| "v".repeat(n));
    for value in around_threshold.chain(["\u{1F600}".repeat(500), large]) {
        long_lines_decode_like_the_whole_body(&value);
    }
}

fn long_lines_decode_like_the_whole_body(value: &str) {
    let bodies = [
        // The first line of the stream (byte-order mark handling), no space after `data:`.
        format!("\u{FEFF}data:{value}\n\n"),
        format!(
            "event: e\ndata: {value}\nid: 1\n\n: comment\ndata: {value}\r\ndata: {value}\r\n\r\n"
        ),
        // A long line that is not a data line, and a long data line after a short one.
        format!("data: x\n\nevent: {value}\ndata: y\n\ndata: short\ndata: {value}\n\n"),
        // A bare JSON body whose one long line is not an event stream.
        format!("{{\"error\": \"{value}\"}}\n"),
        format!("data: {value}"),
        // A long data line while the body may still be bare JSON or is still undecided:
        // SSE's own line handling decides, as for the line pushed whole.
        format!("\n\ndata: {value}\n\n"),
        format!("{{\ndata: {value}\n\n"),
        format!("[1,\n\ndata: {value}\n\n"),
    ];
    for body in &bodies {
        let whole = decode(body.as_bytes()).unwrap();
        assert!(!whole.is_empty());
        for size in [300, 1000, 4096, 16 * 1024 + 7] {
            let parts: Vec<&[u8]> = body.as_bytes().chunks(size).collect();
            assert_eq!(decode_parts(&parts).unwrap(), whole, "chunks of {size}");
        }
    }
    // The limit and invalid UTF-8 are reported as for a line pushed whole.
    let body = format!("data: ok\n\ndata: {value}\u{e9}\n\n").into_bytes();
    let bad_at = body.len() - 4;
    let mut bad = body.clone();
    bad[bad_at] = 0xFF;
    let whole = decode(&bad).unwrap_err();
    assert_eq!(whole, SseError::InvalidUtf8 { offset: bad_at as u64 });
    let parts: Vec<&[u8]> = bad.chunks(4096).collect();
    assert_eq!(decode_parts(&parts).unwrap_err(), whole);
    let limit = body.len() - 13;
    let parts: Vec<&[u8]> = body.chunks(4096).collect();
    let mut d = SseDecoder::with_max_event_size(limit);
    let mut out = Vec::new();
    let err = parts.iter().try_for_each(|p| d.push(p, &mut out)).unwrap_err();
    assert_eq!(err, SseError::EventTooLarge { limit });
}

/// A long data line of exactly the limit is accepted, one byte more is not, whether it
/// arrives whole or assembled from chunks.
#[test]
fn long_line_at_the_limit_is_accepted_in_any_framing() {
    let line = format!("data: {}", "v".repeat(70 * 1024));
    for (limit, ok) in [(line.len(), true), (line.len() - 1, false)] {
        let body = format!("data: a\n\n{line}\n\n");
        for size in [body.len(), 4096, 1000] {
            let mut d = SseDecoder::with_max_event_size(limit);
            let mut out = Vec::new();
            let result = body.as_bytes().chunks(size).try_for_each(|p| d.push(p, &mut out));
            if ok {
                result.unwrap();
                assert_eq!(out.len(), 2, "chunks of {size}");
                assert_eq!(out[1].data.len(), line.len() - "data: ".len());
            } else {
                assert_eq!(
                    result.unwrap_err(),
                    SseError::EventTooLarge { limit },
                    "chunks of {size}"
                );
            }
        }
    }
}

/// A long line assembled from chunks reserves room up to the limit while it grows (so it is
/// never copied by a reallocation), and the event's data gives the spare room back; a limit
/// too high to reserve keeps the usual growth.
#[test]
fn long_line_data_keeps_no_spare_room_whatever_the_limit() {
    let value = "v".repeat(1300 * 1024);
    let body = format!("data: a\n\ndata: {value}\n\n");
    for limit in [16 * 1024 * 1024, 1024 * 1024 * 1024, usize::MAX] {
        let mut d = SseDecoder::with_max_event_size(limit);
        let mut out = Vec::new();
        for chunk in body.as_bytes().chunks(16 * 1024) {
            d.push(chunk, &mut out).unwrap();
        }
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].data, value);
        assert!(
            out[1].data.capacity() <= value.len() + 1,
            "limit {limit}: capacity {} for {} bytes",
            out[1].data.capacity(),
            value.len()
        );
    }
}
