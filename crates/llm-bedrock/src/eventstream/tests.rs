#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use proptest::prelude::*;

use super::*;

/// A message with string headers, encoded by hand from the AWS event-stream wire layout with
/// `crc32fast` for the checksums: independent of the decoder under test.
fn encode(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut header_bytes = Vec::new();
    for (name, value) in headers {
        header_bytes.push(u8::try_from(name.len()).unwrap());
        header_bytes.extend_from_slice(name.as_bytes());
        header_bytes.push(7);
        header_bytes.extend_from_slice(&u16::try_from(value.len()).unwrap().to_be_bytes());
        header_bytes.extend_from_slice(value.as_bytes());
    }
    encode_raw(&header_bytes, payload)
}

/// A message around already encoded header bytes.
fn encode_raw(header_bytes: &[u8], payload: &[u8]) -> Vec<u8> {
    let total = u32::try_from(OVERHEAD_BYTES + header_bytes.len() + payload.len()).unwrap();
    let mut out = Vec::new();
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&u32::try_from(header_bytes.len()).unwrap().to_be_bytes());
    let prelude_crc = crc32fast::hash(&out);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(header_bytes);
    out.extend_from_slice(payload);
    let message_crc = crc32fast::hash(&out);
    out.extend_from_slice(&message_crc.to_be_bytes());
    out
}

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

/// Feeds `body` in the given chunk sizes (cycled); returns the frames and the first error.
fn decode_in(
    mut framing: AwsEventStreamFraming,
    body: &[u8],
    sizes: &[usize],
) -> (Vec<AwsFrame>, Result<(), AwsFrameError>) {
    let mut out = Vec::new();
    let mut rest = body;
    let mut sizes = sizes.iter().copied().cycle();
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(rest.len()).clamp(1, rest.len());
        let (chunk, tail) = rest.split_at(n);
        if let Err(e) = framing.push(chunk, &mut out) {
            return (out, Err(e));
        }
        rest = tail;
    }
    let result = framing.finish(&mut out);
    (out, result)
}

fn decode(body: &[u8]) -> (Vec<AwsFrame>, Result<(), AwsFrameError>) {
    decode_in(AwsEventStreamFraming::new(), body, &[body.len().max(1)])
}

fn frame(headers: &[(&str, &str)], payload: &[u8]) -> AwsFrame {
    AwsFrame::new(headers.iter().copied(), Bytes::copy_from_slice(payload))
}

#[test]
fn spec_test_vector_without_headers() {
    let body = hex(
        "00 00 00 1e 00 00 00 00 ba f2 f6 8a 7b 22 66 6f 6f 22 3a 20 22 62 61 72 22 7d ae 72 58 e4",
    );
    assert_eq!(
        body,
        encode(&[], br#"{"foo": "bar"}"#),
        "the test encoder disagrees with AWS's published event-stream vector"
    );
    let (frames, result) = decode(&body);
    assert_eq!(result, Ok(()));
    assert_eq!(frames, vec![frame(&[], br#"{"foo": "bar"}"#)]);
}

#[test]
fn spec_test_vector_with_three_headers() {
    let body = hex("0000009400000057b4ab9aee0b3a6576656e742d74797065070011636f6e7465
         6e74426c6f636b44656c74610d3a636f6e74656e742d74797065070010617070
         6c69636174696f6e2f6a736f6e0d3a6d6573736167652d747970650700056576
         656e747b22636f6e74656e74426c6f636b496e646578223a302c2264656c7461
         223a7b2274657874223a224869227d7d1f944657");
    assert_eq!(body.len(), 148);
    let (frames, result) = decode(&body);
    assert_eq!(result, Ok(()));
    let expected = frame(
        &[
            (":event-type", "contentBlockDelta"),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        br#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#,
    );
    assert_eq!(frames, vec![expected.clone()]);
    assert_eq!(frames[0].header(":event-type"), Some("contentBlockDelta"));
    assert_eq!(frames[0].header(":exception-type"), None);
    let payload: serde_json::Value = serde_json::from_slice(frames[0].payload()).unwrap();
    assert_eq!(payload["delta"]["text"], "Hi");
}

fn three_messages() -> (Vec<u8>, Vec<AwsFrame>) {
    let messages = [
        (
            vec![(":message-type", "event"), (":event-type", "messageStart")],
            &br#"{"role":"assistant"}"#[..],
        ),
        (
            vec![(":message-type", "event"), (":event-type", "contentBlockDelta")],
            br#"{"contentBlockIndex":0,"delta":{"text":"h\u00e9"}}"#,
        ),
        (
            vec![(":message-type", "exception"), (":exception-type", "throttlingException")],
            br#"{"message":"slow down"}"#,
        ),
    ];
    let mut body = Vec::new();
    let mut frames = Vec::new();
    for (headers, payload) in &messages {
        body.extend(encode(headers, payload));
        frames.push(frame(headers, payload));
    }
    (body, frames)
}

#[test]
fn every_chunk_size_decodes_the_same() {
    let (body, expected) = three_messages();
    for step in 1..=body.len() {
        let (frames, result) = decode_in(AwsEventStreamFraming::new(), &body, &[step]);
        assert_eq!(result, Ok(()), "step {step}");
        assert_eq!(frames, expected, "step {step}");
    }
}

#[test]
fn a_read_completing_a_buffered_message_copies_only_that_message() {
    let one = encode(&[(":event-type", "contentBlockDelta")], &[b'x'; 100]);
    let mut body = Vec::new();
    for _ in 0..100 {
        body.extend_from_slice(&one);
    }
    let mut framing = AwsEventStreamFraming::new();
    let mut out = Vec::new();
    // Half a message, then the rest of the body in one read.
    let (head, rest) = body.split_at(one.len() / 2);
    framing.push(head, &mut out).unwrap();
    assert!(out.is_empty());
    framing.push(rest, &mut out).unwrap();
    framing.finish(&mut out).unwrap();
    assert_eq!(out.len(), 100);
    assert!(out.iter().all(|f| f.payload()[..] == [b'x'; 100]));
    // Only the cut message went through the buffer; the other 99 were decoded in the read.
    assert_eq!(framing.copied, one.len());
}

#[test]
fn every_flipped_bit_is_a_decode_error_after_the_intact_messages() {
    let (body, expected) = three_messages();
    for byte in 0..body.len() {
        for bit in 0..8 {
            let mut bad = body.clone();
            bad[byte] ^= 1 << bit;
            let (frames, result) = decode_in(AwsEventStreamFraming::new(), &bad, &[7]);
            assert!(result.is_err(), "byte {byte} bit {bit} accepted");
            // CRC-32 detects every one-bit error, so only the messages before the flipped
            // one come out, unchanged.
            assert!(frames.len() < expected.len(), "byte {byte} bit {bit}");
            assert_eq!(frames[..], expected[..frames.len()], "byte {byte} bit {bit}");
        }
    }
}

#[test]
fn a_bad_message_checksum_names_the_offset() {
    let mut body = encode(&[(":event-type", "messageStop")], b"{}");
    let first = body.len();
    let mut second = encode(&[(":event-type", "metadata")], b"{}");
    let last = second.len() - 1;
    second[last] ^= 0xff;
    body.extend(second);
    // Whole, and at every chunk size: decoded where the chunk is, or after buffering.
    for step in 1..=body.len() {
        let (frames, result) = decode_in(AwsEventStreamFraming::new(), &body, &[step]);
        assert_eq!(frames.len(), 1, "step {step}");
        let Err(AwsFrameError::Malformed { offset, reason }) = result else { panic!("{result:?}") };
        assert_eq!(offset, first as u64, "step {step}");
        assert!(reason.contains("checksum"), "step {step}: {reason}");
    }
}

#[test]
fn a_bad_prelude_fails_before_the_message_arrives() {
    let mut body = encode(&[(":event-type", "x")], &[b'a'; 1000]);
    body[9] ^= 0x10;
    let mut framing = AwsEventStreamFraming::new();
    let mut out = Vec::new();
    let error = framing.push(&body[..12], &mut out).unwrap_err();
    assert!(
        matches!(&error, AwsFrameError::Malformed { offset: 0, reason } if reason.contains("prelude checksum")),
        "{error}"
    );
    // After an error the framing keeps failing, whatever comes next.
    assert_eq!(framing.push(&encode(&[], b"{}"), &mut out), Err(error.clone()));
    assert_eq!(framing.finish(&mut out), Err(error));
    assert!(out.is_empty());
}

#[test]
fn contradictory_lengths_are_malformed() {
    // A total length too short for the prelude and the message CRC, with a valid prelude CRC.
    let mut prelude = Vec::new();
    prelude.extend_from_slice(&15u32.to_be_bytes());
    prelude.extend_from_slice(&0u32.to_be_bytes());
    prelude.extend_from_slice(&crc32fast::hash(&prelude).to_be_bytes());
    let (_, result) = decode(&prelude);
    assert!(matches!(result, Err(AwsFrameError::Malformed { .. })), "{result:?}");
    // Headers longer than the message.
    let mut prelude = Vec::new();
    prelude.extend_from_slice(&20u32.to_be_bytes());
    prelude.extend_from_slice(&5u32.to_be_bytes());
    prelude.extend_from_slice(&crc32fast::hash(&prelude).to_be_bytes());
    let (_, result) = decode(&prelude);
    assert!(matches!(result, Err(AwsFrameError::Malformed { .. })), "{result:?}");
}

#[test]
fn a_message_over_the_limit_fails_from_its_prelude() {
    let body = encode(&[(":event-type", "x")], &[b'a'; 100]);
    let mut framing = AwsEventStreamFraming::with_max_frame_bytes(64);
    let mut out = Vec::new();
    let error = framing.push(&body[..12], &mut out).unwrap_err();
    assert_eq!(error, AwsFrameError::TooLarge { offset: 0, length: body.len(), limit: 64 });
    assert_eq!(
        error.to_string(),
        format!(
            "message at byte offset 0 declares {} bytes, more than the limit of 64",
            body.len()
        )
    );
    // `with_limit` is the driver's constructor: `None` is the 16 MiB default.
    let (frames, result) = decode_in(AwsEventStreamFraming::with_limit(None), &body, &[5]);
    assert_eq!((frames.len(), result), (1, Ok(())));
    let (_, result) = decode_in(AwsEventStreamFraming::with_limit(Some(64)), &body, &[5]);
    assert!(matches!(result, Err(AwsFrameError::TooLarge { limit: 64, .. })));
}

#[test]
fn a_headers_section_over_128_kib_is_rejected() {
    let value = "v".repeat(30_000);
    let headers: Vec<(String, String)> = (0..5).map(|i| (format!("h{i}"), value.clone())).collect();
    let refs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let body = encode(&refs, b"{}");
    let (frames, result) = decode(&body);
    assert!(frames.is_empty());
    assert!(
        matches!(result, Err(AwsFrameError::TooLarge { limit: MAX_HEADERS_BYTES, .. })),
        "{result:?}"
    );
    // Just under the limit is fine.
    let refs = &refs[..4];
    let (frames, result) = decode(&encode(refs, b"{}"));
    assert_eq!((frames.len(), result), (1, Ok(())));
}

#[test]
fn a_body_cut_inside_a_message_is_truncated() {
    let (body, expected) = three_messages();
    let ends: Vec<usize> = expected
        .iter()
        .scan(0, |end, f| {
            *end += encoded_len(f);
            Some(*end)
        })
        .collect();
    assert_eq!(ends.last(), Some(&body.len()));
    // In 3-byte reads (mostly buffered) and in one read (decoded in place, the tail kept).
    for (cut, step) in (0..body.len()).flat_map(|cut| [(cut, 3), (cut, cut.max(1))]) {
        let (frames, result) = decode_in(AwsEventStreamFraming::new(), &body[..cut], &[step]);
        let whole = ends.iter().filter(|&&end| end <= cut).count();
        assert_eq!(frames[..], expected[..whole], "cut {cut} step {step}");
        let boundary = if whole == 0 { 0 } else { ends[whole - 1] };
        let expected_result = if cut == boundary {
            Ok(())
        } else {
            Err(AwsFrameError::Truncated { pending: cut - boundary })
        };
        assert_eq!(result, expected_result, "cut {cut} step {step}");
    }
}

/// The encoded size of a frame with string headers (AWS event-stream layout).
fn encoded_len(frame: &AwsFrame) -> usize {
    OVERHEAD_BYTES
        + frame.string_headers().map(|(n, v)| 1 + n.len() + 1 + 2 + v.len()).sum::<usize>()
        + frame.payload().len()
}

#[test]
fn non_string_headers_are_checked_and_kept_out_of_the_string_view() {
    // Encoded by aws-smithy-eventstream's writer: every header type of the format.
    let message = Message::new(&br#"{"ok":true}"#[..])
        .add_header(Header::new(":message-type", HeaderValue::String("event".into())))
        .add_header(Header::new("flag", HeaderValue::Bool(true)))
        .add_header(Header::new("off", HeaderValue::Bool(false)))
        .add_header(Header::new("byte", HeaderValue::Byte(-3)))
        .add_header(Header::new("short", HeaderValue::Int16(300)))
        .add_header(Header::new("int", HeaderValue::Int32(70_000)))
        .add_header(Header::new("long", HeaderValue::Int64(1 << 40)))
        .add_header(Header::new("bytes", HeaderValue::ByteArray(Bytes::from_static(b"\x00\xff"))))
        .add_header(Header::new(
            ":date",
            HeaderValue::Timestamp(aws_smithy_types::DateTime::from_secs(1_700_000_000)),
        ))
        .add_header(Header::new("id", HeaderValue::Uuid(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef)))
        .add_header(Header::new(":event-type", HeaderValue::String("metadata".into())));
    let mut body = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut body).unwrap();
    let (frames, result) = decode(&body);
    assert_eq!(result, Ok(()));
    assert_eq!(frames, vec![AwsFrame::from(message)]);
    let strings: Vec<_> = frames[0].string_headers().collect();
    assert_eq!(strings, [(":message-type", "event"), (":event-type", "metadata")]);
    assert_eq!(frames[0].header("flag"), None);
    assert_eq!(frames[0].header(":event-type"), Some("metadata"));
    assert_eq!(&frames[0].payload()[..], br#"{"ok":true}"#);
}

#[test]
fn an_undefined_header_type_is_malformed() {
    // name "x", type 10 (undefined), then one byte.
    let (frames, result) = decode(&encode_raw(&[1, b'x', 10, 0], b"{}"));
    assert!(frames.is_empty());
    assert!(
        matches!(&result, Err(AwsFrameError::Malformed { reason, .. }) if reason.contains("type")),
        "{result:?}"
    );
    // A header value that is not UTF-8.
    let (_, result) = decode(&encode_raw(&[1, b'x', 7, 0, 1, 0xff], b"{}"));
    assert!(matches!(result, Err(AwsFrameError::Malformed { .. })), "{result:?}");
}

#[test]
fn an_empty_body_is_no_frames() {
    assert_eq!(decode(b""), (vec![], Ok(())));
}

fn arb_frame() -> impl Strategy<Value = AwsFrame> {
    let header = ("[:a-z-]{1,20}", "\\PC{0,40}");
    (proptest::collection::vec(header, 0..5), proptest::collection::vec(any::<u8>(), 0..300))
        .prop_map(|(headers, payload)| AwsFrame::new(headers, payload))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Frames split at arbitrary byte positions decode to what was encoded.
    #[test]
    fn arbitrary_frames_at_arbitrary_splits(
        frames in proptest::collection::vec(arb_frame(), 0..6),
        sizes in proptest::collection::vec(1usize..64, 1..20),
    ) {
        let mut body = Vec::new();
        for f in &frames {
            let headers: Vec<(&str, &str)> = f.string_headers().collect();
            body.extend(encode(&headers, f.payload()));
        }
        let (decoded, result) = decode_in(AwsEventStreamFraming::new(), &body, &sizes);
        prop_assert_eq!(result, Ok(()));
        prop_assert_eq!(decoded, frames);
    }

    /// Arbitrary bytes never panic, and the outcome does not depend on the chunking.
    #[test]
    fn arbitrary_bytes_decode_the_same_at_any_chunking(
        body in proptest::collection::vec(any::<u8>(), 0..400),
        sizes in proptest::collection::vec(1usize..32, 1..10),
    ) {
        let whole = decode(&body);
        let split = decode_in(AwsEventStreamFraming::new(), &body, &sizes);
        prop_assert_eq!(split, whole);
    }
}
