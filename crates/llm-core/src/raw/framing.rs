//! Response-body framings: how a byte stream splits into frames before a provider's
//! decoder sees them.
//!
//! The request driver ([`crate::raw::drive`]) is generic over [`Framing`], so an API with
//! another framing than SSE plugs into the same retries, timeouts and cancellation:
//! [`SseDecoder`] (SSE) and [`NdjsonFraming`] (newline-delimited JSON, as Ollama's native
//! API streams) are here; a framing that belongs to one provider lives in its crate (the
//! AWS event-stream framing of Bedrock is `llm_bedrock::AwsEventStreamFraming`, decoded by
//! AWS's own crate). All are pure, linear in their input, and never panic on any bytes.

use std::fmt;

use crate::raw::sse::{SseDecoder, SseError, SseEvent};

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
    /// Whether its frames are made of lines (SSE, NDJSON): the driver then hands it a read in
    /// pieces that end at line breaks, so a line inside one read is not assembled again from
    /// pieces. A binary framing takes pieces cut anywhere.
    const LINES: bool = true;

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

/// Default maximum size of one frame of a non-SSE framing ([`NdjsonFraming`], and the
/// provider crates' own): 16 MiB.
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
    fn ndjson_never_panics_on_arbitrary_bytes() {
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
            let _ = frames(NdjsonFraming::new(), &bytes, 3);
        }
    }
}
