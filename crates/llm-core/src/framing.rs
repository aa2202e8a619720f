//! Response-body framings: how a byte stream splits into frames before a provider's
//! decoder sees them.
//!
//! The request driver ([`crate::drive`]) is generic over [`Framing`], so an API with
//! another framing than SSE plugs into the same retries, timeouts and cancellation:
//! [`SseDecoder`] (SSE, every current provider), [`NdjsonFraming`] (newline-delimited
//! JSON, as Ollama's native API streams) and [`EventStreamFraming`] (the AWS
//! event-stream binary framing: length-prefixed messages with CRC32 checks, as
//! Bedrock's `ConverseStream` uses). All are pure, linear in their input, and never
//! panic on any bytes.

use std::fmt;

use bytes::Bytes;

use crate::sse::{SseDecoder, SseError, SseEvent};

/// Splits a response body into frames, incrementally.
///
/// `push` may be called with chunks split anywhere; frames completed by a chunk are
/// appended to `out` in order, even when the same chunk then fails (so content
/// before a framing error is kept). After an error the framing keeps failing.
pub trait Framing: Send + 'static {
    /// One frame (an SSE event, a line, a binary message).
    type Frame: Send + 'static;
    /// Why the bytes are not a valid stream in this framing.
    type Error: fmt::Display;

    /// Feeds one chunk of the body.
    fn push(&mut self, chunk: &[u8], out: &mut Vec<Self::Frame>) -> Result<(), Self::Error>;

    /// The body ended: flush what is complete, fail on a frame cut in half.
    fn finish(&mut self, out: &mut Vec<Self::Frame>) -> Result<(), Self::Error>;
}

impl Framing for SseDecoder {
    type Frame = SseEvent;
    type Error = SseError;

    fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        SseDecoder::push(self, chunk, out)
    }

    fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        SseDecoder::finish(self, out)
    }
}

/// Default maximum size of one frame for [`NdjsonFraming`] and [`EventStreamFraming`]: 16 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// Why a non-SSE body could not be framed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FramingError {
    /// A frame grew larger than the limit.
    #[error("frame larger than {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// A line is not valid UTF-8.
    #[error("invalid UTF-8 in line {line}")]
    InvalidUtf8 {
        /// The 1-based line number.
        line: u64,
    },
    /// A binary message is malformed (bad lengths, checksum, header).
    #[error("malformed message at byte offset {offset}: {reason}")]
    Malformed {
        /// Offset of the message's first byte from the start of the body.
        offset: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// The body ended inside a frame.
    #[error("the body ended inside a frame ({pending} bytes pending)")]
    Truncated {
        /// Bytes of the incomplete frame.
        pending: usize,
    },
}

/// Newline-delimited JSON (or any line protocol): one frame per non-blank line,
/// without its `\n` / `\r\n`. A last line without a newline is still a frame.
#[derive(Debug, Clone)]
pub struct NdjsonFraming {
    buffer: Vec<u8>,
    /// Bytes of `buffer` already searched for a newline (keeps the search linear).
    scanned: usize,
    line: u64,
    max: usize,
    failed: Option<FramingError>,
}

impl Default for NdjsonFraming {
    fn default() -> Self {
        Self::new()
    }
}

impl NdjsonFraming {
    /// A framing with the default line limit ([`DEFAULT_MAX_FRAME_BYTES`]).
    pub fn new() -> Self {
        Self::with_max_frame_bytes(DEFAULT_MAX_FRAME_BYTES)
    }

    /// A framing whose lines may be at most `max` bytes.
    pub fn with_max_frame_bytes(max: usize) -> Self {
        NdjsonFraming { buffer: Vec::new(), scanned: 0, line: 0, max, failed: None }
    }

    fn emit(&mut self, mut line: Vec<u8>, out: &mut Vec<String>) -> Result<(), FramingError> {
        self.line += 1;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        match String::from_utf8(line) {
            Ok(text) => {
                out.push(text);
                Ok(())
            }
            Err(_) => Err(FramingError::InvalidUtf8 { line: self.line }),
        }
    }

    fn fail(&mut self, error: FramingError) -> Result<(), FramingError> {
        self.buffer = Vec::new();
        self.failed = Some(error.clone());
        Err(error)
    }
}

impl Framing for NdjsonFraming {
    type Frame = String;
    type Error = FramingError;

    fn push(&mut self, chunk: &[u8], out: &mut Vec<String>) -> Result<(), FramingError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.buffer.extend_from_slice(chunk);
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(pos) =
            self.buffer.get(from..).and_then(|b| b.iter().position(|&c| c == b'\n'))
        {
            let end = from + pos;
            let line = self.buffer.get(start..end).map(<[u8]>::to_vec).unwrap_or_default();
            if line.len() > self.max {
                return self.fail(FramingError::TooLarge { limit: self.max });
            }
            if let Err(e) = self.emit(line, out) {
                return self.fail(e);
            }
            start = end + 1;
            from = start;
        }
        self.buffer.drain(..start);
        self.scanned = self.buffer.len();
        if self.buffer.len() > self.max {
            return self.fail(FramingError::TooLarge { limit: self.max });
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<String>) -> Result<(), FramingError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let rest = std::mem::take(&mut self.buffer);
        self.scanned = 0;
        if rest.is_empty() {
            return Ok(());
        }
        match self.emit(rest, out) {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }
}

/// One message of the AWS event-stream framing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventStreamMessage {
    /// The headers whose value is a string (`:event-type`, `:message-type`,
    /// `:content-type`, `:exception-type`, ...), in wire order; headers of other
    /// value types are checked and skipped.
    pub headers: Vec<(String, String)>,
    /// The payload (JSON for Bedrock).
    pub payload: Bytes,
}

impl EventStreamMessage {
    /// The value of the string header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// The AWS event-stream binary framing: each message is
/// `total length (u32 BE) | headers length (u32 BE) | prelude CRC32 | headers | payload | message CRC32`.
/// Both checksums are verified.
#[derive(Debug, Clone)]
pub struct EventStreamFraming {
    buffer: Vec<u8>,
    /// Body offset of `buffer[0]`, for error messages.
    offset: u64,
    max: usize,
    failed: Option<FramingError>,
}

impl Default for EventStreamFraming {
    fn default() -> Self {
        Self::new()
    }
}

/// Prelude (12 bytes) plus the trailing message CRC (4 bytes).
const EVENT_STREAM_OVERHEAD: usize = 16;

impl EventStreamFraming {
    /// A framing with the default message limit ([`DEFAULT_MAX_FRAME_BYTES`]).
    pub fn new() -> Self {
        Self::with_max_frame_bytes(DEFAULT_MAX_FRAME_BYTES)
    }

    /// A framing whose messages may be at most `max` bytes.
    pub fn with_max_frame_bytes(max: usize) -> Self {
        EventStreamFraming { buffer: Vec::new(), offset: 0, max, failed: None }
    }

    /// Encodes one message with string headers (for tests, fixtures and benchmarks).
    pub fn encode(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
        let mut header_bytes = Vec::new();
        for (name, value) in headers {
            header_bytes.push(name.len().min(255) as u8);
            header_bytes
                .extend_from_slice(name.as_bytes().get(..name.len().min(255)).unwrap_or_default());
            header_bytes.push(7);
            let len = value.len().min(u16::MAX as usize);
            header_bytes.extend_from_slice(&(len as u16).to_be_bytes());
            header_bytes.extend_from_slice(value.as_bytes().get(..len).unwrap_or_default());
        }
        let total = (EVENT_STREAM_OVERHEAD + header_bytes.len() + payload.len()) as u32;
        let mut out = Vec::with_capacity(total as usize);
        out.extend_from_slice(&total.to_be_bytes());
        out.extend_from_slice(&(header_bytes.len() as u32).to_be_bytes());
        let prelude_crc = crc32(&out);
        out.extend_from_slice(&prelude_crc.to_be_bytes());
        out.extend_from_slice(&header_bytes);
        out.extend_from_slice(payload);
        let crc = crc32(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    fn malformed(&mut self, reason: &'static str) -> Result<(), FramingError> {
        let error = FramingError::Malformed { offset: self.offset, reason };
        self.buffer = Vec::new();
        self.failed = Some(error.clone());
        Err(error)
    }

    /// Parses one complete message `bytes` (lengths already checked).
    fn parse(bytes: &[u8], headers_len: usize) -> Result<EventStreamMessage, &'static str> {
        let body_end = bytes.len().saturating_sub(4);
        let (crc_bytes, rest) = (bytes.get(body_end..), bytes.get(..body_end));
        let (Some(crc_bytes), Some(rest)) = (crc_bytes, rest) else {
            return Err("length out of range");
        };
        if crc32(rest).to_be_bytes() != crc_bytes {
            return Err("message checksum mismatch");
        }
        let headers_raw = bytes.get(12..12 + headers_len).ok_or("headers length out of range")?;
        let payload = bytes.get(12 + headers_len..body_end).ok_or("headers length out of range")?;
        let mut headers = Vec::new();
        let mut h = headers_raw;
        while let Some((&name_len, rest)) = h.split_first() {
            let name = rest.get(..name_len as usize).ok_or("header name cut off")?;
            let name = std::str::from_utf8(name).map_err(|_| "header name is not UTF-8")?;
            let rest = rest.get(name_len as usize..).ok_or("header name cut off")?;
            let (&kind, rest) = rest.split_first().ok_or("header type missing")?;
            let fixed = match kind {
                0 | 1 => Some(0),
                2 => Some(1),
                3 => Some(2),
                4 => Some(4),
                5 | 8 => Some(8),
                9 => Some(16),
                6 | 7 => None,
                _ => return Err("unknown header value type"),
            };
            h = match fixed {
                Some(n) => rest.get(n..).ok_or("header value cut off")?,
                None => {
                    let len: [u8; 2] = rest
                        .get(..2)
                        .and_then(|b| b.try_into().ok())
                        .ok_or("header value length cut off")?;
                    let len = u16::from_be_bytes(len) as usize;
                    let value = rest.get(2..2 + len).ok_or("header value cut off")?;
                    if kind == 7 {
                        let value =
                            std::str::from_utf8(value).map_err(|_| "header value is not UTF-8")?;
                        headers.push((name.to_owned(), value.to_owned()));
                    }
                    rest.get(2 + len..).ok_or("header value cut off")?
                }
            };
        }
        Ok(EventStreamMessage { headers, payload: Bytes::copy_from_slice(payload) })
    }
}

impl Framing for EventStreamFraming {
    type Frame = EventStreamMessage;
    type Error = FramingError;

    fn push(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<EventStreamMessage>,
    ) -> Result<(), FramingError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.buffer.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(prelude) = self.buffer.get(start..start + 12) {
            let word = |i: usize| {
                prelude.get(i..i + 4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_be_bytes)
            };
            let (total, headers_len, prelude_crc) = (word(0) as usize, word(4) as usize, word(8));
            if crc32(prelude.get(..8).unwrap_or_default()) != prelude_crc {
                self.buffer.drain(..start);
                return self.malformed("prelude checksum mismatch");
            }
            if total < EVENT_STREAM_OVERHEAD || headers_len > total - EVENT_STREAM_OVERHEAD {
                self.buffer.drain(..start);
                return self.malformed("inconsistent lengths");
            }
            if total > self.max {
                let limit = self.max;
                self.buffer = Vec::new();
                self.failed = Some(FramingError::TooLarge { limit });
                return Err(FramingError::TooLarge { limit });
            }
            let Some(bytes) = self.buffer.get(start..start + total) else { break };
            match Self::parse(bytes, headers_len) {
                Ok(message) => out.push(message),
                Err(reason) => {
                    self.buffer.drain(..start);
                    return self.malformed(reason);
                }
            }
            start += total;
            self.offset += total as u64;
        }
        self.buffer.drain(..start);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<EventStreamMessage>) -> Result<(), FramingError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.buffer.is_empty() {
            Ok(())
        } else {
            let error = FramingError::Truncated { pending: self.buffer.len() };
            self.failed = Some(error.clone());
            Err(error)
        }
    }
}

/// CRC-32 (IEEE 802.3, as AWS event streams use), table-driven.
#[allow(clippy::indexing_slicing, reason = "every index is below 256 by construction")]
fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
                k += 1;
            }
            table[i] = c;
            i += 1;
        }
        table
    };
    let mut crc = !0u32;
    for &b in bytes {
        crc = TABLE[((crc ^ b as u32) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;

    fn frames<F: Framing>(
        mut f: F,
        body: &[u8],
        step: usize,
    ) -> (Vec<F::Frame>, Result<(), String>) {
        let mut out = Vec::new();
        for chunk in body.chunks(step.max(1)) {
            if let Err(e) = f.push(chunk, &mut out) {
                return (out, Err(e.to_string()));
            }
        }
        let r = f.finish(&mut out).map_err(|e| e.to_string());
        (out, r)
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        // The CRC-32/ISO-HDLC check value of "123456789".
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn ndjson_lines_at_any_chunking() {
        let body = b"{\"a\":1}\r\n\n  \n{\"b\":\"\xc3\xa9\"}\n{\"c\":3}";
        for step in 1..=body.len() {
            let (out, r) = frames(NdjsonFraming::new(), body, step);
            assert_eq!(r, Ok(()));
            assert_eq!(out, vec!["{\"a\":1}", "{\"b\":\"é\"}", "{\"c\":3}"], "step {step}");
            for line in &out {
                serde_json::from_str::<serde_json::Value>(line).unwrap();
            }
        }
    }

    #[test]
    fn ndjson_limits_and_bad_utf8_fail() {
        let (out, r) = frames(NdjsonFraming::with_max_frame_bytes(4), b"{}\n{\"long\":1}\n", 3);
        assert_eq!(out, vec!["{}"]);
        assert_eq!(r, Err("frame larger than 4 bytes".to_owned()));
        let (_, r) = frames(NdjsonFraming::new(), b"{}\n\xff\n", 64);
        assert_eq!(r, Err("invalid UTF-8 in line 2".to_owned()));
    }

    #[test]
    fn event_stream_round_trip_at_any_chunking() {
        let mut body = EventStreamFraming::encode(
            &[(":event-type", "contentBlockDelta"), (":message-type", "event")],
            br#"{"delta":{"text":"hi"}}"#,
        );
        body.extend(EventStreamFraming::encode(&[(":event-type", "messageStop")], b"{}"));
        for step in 1..=body.len() {
            let (out, r) = frames(EventStreamFraming::new(), &body, step);
            assert_eq!(r, Ok(()), "step {step}");
            assert_eq!(out.len(), 2);
            assert_eq!(out[0].header(":event-type"), Some("contentBlockDelta"));
            assert_eq!(out[0].header(":message-type"), Some("event"));
            assert_eq!(&out[0].payload[..], br#"{"delta":{"text":"hi"}}"#);
            assert_eq!(out[1].header(":event-type"), Some("messageStop"));
        }
    }

    #[test]
    fn event_stream_rejects_corruption_and_truncation() {
        let good = EventStreamFraming::encode(&[(":event-type", "x")], b"{}");
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x01;
            let (out, r) = frames(EventStreamFraming::new(), &bad, 7);
            assert!(out.is_empty() && r.is_err(), "flipped byte {i} accepted");
        }
        let (out, r) = frames(EventStreamFraming::new(), &good[..good.len() - 1], 5);
        assert!(out.is_empty());
        let pending = good.len() - 1;
        assert_eq!(r, Err(format!("the body ended inside a frame ({pending} bytes pending)")));
        let (_, r) = frames(EventStreamFraming::with_max_frame_bytes(8), &good, 64);
        assert_eq!(r, Err("frame larger than 8 bytes".to_owned()));
    }

    #[test]
    fn event_stream_never_panics_on_arbitrary_bytes() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for len in 0..300 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            let _ = frames(EventStreamFraming::new(), &bytes, 3);
            let _ = frames(NdjsonFraming::new(), &bytes, 3);
        }
    }
}
