//! Server-Sent Events decoding over raw byte chunks.
//!
//! [`SseDecoder`] follows the WHATWG event-stream rules: lines end in
//! `\n`, `\r\n` or `\r` (Gemini uses `\r\n`); a blank line dispatches the event; `data:` loses
//! one optional leading space and several `data` lines are joined with `\n`; `event:` names the
//! event; `id:` sets the last event id; comment lines (`:` …), `retry:` and unknown fields are
//! ignored; an event without any `data` line is not dispatched (a `data:` with an empty value
//! is). A leading UTF-8 byte-order mark is skipped.
//!
//! Bytes are reassembled into lines before they are decoded, so a chunk may end anywhere,
//! including inside a multi-byte UTF-8 character or between `\r` and `\n`. Invalid UTF-8 is an
//! error carrying its byte offset, never a lossy replacement. An event larger than the size
//! limit is an error too, so memory stays bounded by the limit.
//!
//! A value sent whole in one event is held once: a data line of 1 KiB or more assembled from
//! several chunks becomes the event's data without a copy, and a line past 1 MiB reserves room
//! up to the limit at once, so it is not copied while it grows.

use std::fmt;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if the event had a non-empty one.
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The last event id (`id:` field) seen so far in the stream, if any and non-empty. As in
    /// the WHATWG rules it carries over to later events.
    pub id: Option<String>,
}

/// Why decoding failed. After an error the decoder keeps returning it.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SseError {
    /// The stream is not valid UTF-8.
    #[error("invalid UTF-8 in event stream at byte offset {offset}")]
    InvalidUtf8 {
        /// Offset of the first invalid byte from the start of the stream.
        offset: u64,
    },
    /// An event (or a single line, or a bare JSON body) grew larger than the limit.
    #[error("event stream event larger than {limit} bytes")]
    EventTooLarge {
        /// The configured limit in bytes.
        limit: usize,
    },
}

/// Default maximum size of one event: 16 MiB.
const DEFAULT_MAX_EVENT_SIZE: usize = 16 * 1024 * 1024;
/// A line at least this long, assembled from several chunks, is handed over rather than
/// copied (see `SseDecoder::process_long_line`): from 1 KiB, where glibc's allocator leaves
/// its per-thread cache, a copy costs a slow allocation, and the buffer kept for the next
/// line would hold that room for the rest of the stream.
const LONG_LINE: usize = 1024;
/// Room past the data of a handed-over line that is given back (a line that reserved room
/// for the largest event); less stays with the data, which is soon freed.
const GIVE_BACK: usize = 64 * 1024;
/// A line that outgrows its buffer past this size reserves room for the largest event at once
/// (see `SseDecoder::reserve_long_line`).
const RESERVE_LINE: usize = 1024 * 1024;
/// A long line reserves room up to the event limit only when the limit is at most this.
const MAX_LINE_RESERVE: usize = 256 * 1024 * 1024;

/// Whether the body may still turn out to be a bare JSON document instead of an event stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bare {
    /// Only blank lines so far.
    Undecided,
    /// Every non-blank line so far is unknown to SSE, and the first starts with `{` or `[`.
    MaybeJson,
    /// An event stream (or neither).
    No,
}

/// Incremental Server-Sent Events decoder; see the [module docs](self).
pub struct SseDecoder {
    max: usize,
    /// The incomplete last line of the previous chunks.
    line: Vec<u8>,
    /// Stream offset of the first byte of `line`.
    line_start: u64,
    /// Bytes consumed so far.
    offset: u64,
    /// The previous chunk ended in `\r`: a `\n` starting the next chunk belongs to it.
    pending_cr: bool,
    /// No line has been processed yet (for the byte-order mark).
    first_line: bool,
    /// Data lines of the current event, each followed by `\n`.
    data: String,
    event: Option<String>,
    last_id: Option<String>,
    bare: Bare,
    /// The body so far while it may be a bare JSON document.
    bare_text: String,
    failed: Option<SseError>,
}

impl fmt::Debug for SseDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseDecoder")
            .field("max_event_size", &self.max)
            .field("offset", &self.offset)
            .field("buffered_line_len", &self.line.len())
            .field("buffered_data_len", &self.data.len())
            .field("event", &self.event)
            .field("last_id", &self.last_id)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with the default maximum event size of 16 MiB.
    pub fn new() -> Self {
        Self::with_max_event_size(DEFAULT_MAX_EVENT_SIZE)
    }

    /// A decoder whose events (data plus the line being read) may be at most `limit` bytes.
    pub fn with_max_event_size(limit: usize) -> Self {
        Self {
            max: limit,
            line: Vec::new(),
            line_start: 0,
            offset: 0,
            pending_cr: false,
            first_line: true,
            data: String::new(),
            event: None,
            last_id: None,
            bare: Bare::Undecided,
            bare_text: String::new(),
            failed: None,
        }
    }

    /// Feeds bytes as they arrive from the network, split anywhere (also inside a multi-byte
    /// UTF-8 character or between `\r` and `\n`). Completed events are appended to `out`.
    ///
    /// Events completed before an error in the same chunk are still appended.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        let result = self.push_inner(chunk, out);
        if let Err(err) = &result {
            self.failed = Some(err.clone());
        }
        result
    }

    /// End of the body: processes a last line without a line break and dispatches a final
    /// event that was not followed by a blank line.
    ///
    /// If the whole body was not an event stream but a bare JSON document (for example an
    /// error body `{"error":…}` sent without a `data:` prefix), it is emitted as one event
    /// whose data is that text (trimmed, lines joined with `\n`). The decoder is then reset
    /// and can decode a new stream.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        let result = self.finish_inner(out);
        match &result {
            Err(err) => self.failed = Some(err.clone()),
            Ok(()) => *self = Self::with_max_event_size(self.max),
        }
        result
    }

    fn finish_inner(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, self.line_start, out)?;
        }
        self.dispatch(out);
        if self.bare == Bare::MaybeJson {
            let text = self.bare_text.trim();
            if !text.is_empty() {
                out.push(SseEvent { event: None, data: text.to_owned(), id: None });
            }
        }
        Ok(())
    }

    fn push_inner(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let base = self.offset;
        self.offset += chunk.len() as u64;
        let mut pos = 0usize;
        if self.pending_cr && !chunk.is_empty() {
            self.pending_cr = false;
            if chunk.first() == Some(&b'\n') {
                pos = 1;
            }
        }
        while let Some(rest) = chunk.get(pos..) {
            if rest.is_empty() {
                break;
            }
            let Some(k) = find_either(rest, b'\n', b'\r') else {
                if self.line.is_empty() {
                    self.line_start = base + pos as u64;
                }
                if self.line.len() + rest.len() + self.data.len() > self.max {
                    return Err(SseError::EventTooLarge { limit: self.max });
                }
                self.reserve_long_line(rest.len());
                self.line.extend_from_slice(rest);
                break;
            };
            let text = rest.get(..k).unwrap_or_default();
            if self.line.is_empty() {
                self.process_line(text, base + pos as u64, out)?;
            } else {
                self.reserve_long_line(text.len());
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(text);
                if line.len() >= LONG_LINE {
                    // A whole value in one event: its buffer is not kept for the next line.
                    self.process_long_line(line, self.line_start, out)?;
                } else {
                    let result = self.process_line(&line, self.line_start, out);
                    line.clear();
                    self.line = line;
                    result?;
                }
            }
            let terminator = rest.get(k).copied();
            pos += k + 1;
            if terminator == Some(b'\r') {
                match chunk.get(pos) {
                    Some(b'\n') => pos += 1,
                    Some(_) => {}
                    None => self.pending_cr = true,
                }
            }
        }
        Ok(())
    }

    /// Once a line being assembled outgrows its buffer past [`RESERVE_LINE`], reserves room for
    /// the longest line the limit allows (plus the `\n` its data gets), so it never grows again.
    ///
    /// Doubling a buffer of many MiB copies it whenever the allocator cannot move it in place
    /// (glibc's `brk` heap, which it uses for blocks below its dynamic mmap threshold after a
    /// large block was freed), and the old and new copies are resident at once: a 16 MiB
    /// line peaked at about 1.5 times its size. Reserved but untouched pages are not resident,
    /// and [`process_long_line`](Self::process_long_line) gives the spare room back.
    fn reserve_long_line(&mut self, more: usize) {
        let len = self.line.len() + more;
        if len < RESERVE_LINE || len <= self.line.capacity() {
            return;
        }
        let room = self.max.saturating_sub(self.data.len()).saturating_add(1);
        // A limit set very high (or none), or a reservation refused, keeps the usual doubling.
        if room <= MAX_LINE_RESERVE && room > len {
            let _ = self.line.try_reserve_exact(room - self.line.len());
        }
    }

    /// [`process_line`](Self::process_line) for a line assembled from several chunks and
    /// at least [`LONG_LINE`] bytes long: the only data line of an event becomes the event's
    /// data in place instead of being copied (a 16 MiB value in one event is held once).
    fn process_long_line(
        &mut self,
        line: Vec<u8>,
        offset: u64,
        out: &mut Vec<SseEvent>,
    ) -> Result<(), SseError> {
        let plain_data = !self.first_line
            && self.bare == Bare::No
            && self.data.is_empty()
            && line.starts_with(b"data:");
        if !plain_data {
            return self.process_line(&line, offset, out);
        }
        if line.len() > self.max {
            return Err(SseError::EventTooLarge { limit: self.max });
        }
        let mut text = String::from_utf8(line).map_err(|e| SseError::InvalidUtf8 {
            offset: offset + e.utf8_error().valid_up_to() as u64,
        })?;
        let prefix = if text.as_bytes().get(5) == Some(&b' ') { 6 } else { 5 };
        text.drain(..prefix);
        text.push('\n');
        // Give back the room reserved for the longest line (no copy: the block shrinks in
        // place, or is remapped).
        if text.capacity() - text.len() > GIVE_BACK {
            text.shrink_to_fit();
        }
        self.data = text;
        Ok(())
    }

    fn process_line(
        &mut self,
        mut line: &[u8],
        mut offset: u64,
        out: &mut Vec<SseEvent>,
    ) -> Result<(), SseError> {
        // Checked before the byte-order mark is stripped, like a partial line in `push_inner`,
        // so whether a line is too large does not depend on where the chunks split.
        if line.len() + self.data.len() > self.max {
            return Err(SseError::EventTooLarge { limit: self.max });
        }
        if self.first_line {
            self.first_line = false;
            if let Some(rest) = line.strip_prefix(b"\xEF\xBB\xBF") {
                line = rest;
                offset += 3;
            }
        }
        let text = std::str::from_utf8(line)
            .map_err(|e| SseError::InvalidUtf8 { offset: offset + e.valid_up_to() as u64 })?;
        if text.is_empty() {
            self.dispatch(out);
            if self.bare == Bare::MaybeJson {
                // Blank lines count towards the limit too, or `{` and endless blank lines
                // would grow the buffer without bound.
                if self.bare_text.len() + 1 > self.max {
                    return Err(SseError::EventTooLarge { limit: self.max });
                }
                self.bare_text.push('\n');
            }
            return Ok(());
        }
        // The field name is short: a plain byte search finds its colon sooner than
        // `split_once`'s searcher is set up.
        let (name, value) = match text.bytes().position(|b| b == b':') {
            Some(colon) => {
                let value = text.get(colon + 1..).unwrap_or_default();
                (text.get(..colon).unwrap_or_default(), value.strip_prefix(' ').unwrap_or(value))
            }
            None => (text, ""),
        };
        let known = match name {
            "" => true, // comment
            "data" => {
                // One allocation for the usual single-line event.
                self.data.reserve(value.len() + 1);
                self.data.push_str(value);
                self.data.push('\n');
                true
            }
            "event" => {
                self.event = Some(value.to_owned());
                true
            }
            "id" => {
                if !value.contains('\0') {
                    self.last_id = Some(value.to_owned());
                }
                true
            }
            "retry" => true,
            _ => false,
        };
        match self.bare {
            Bare::No => {}
            _ if known => {
                self.bare = Bare::No;
                self.bare_text = String::new();
            }
            Bare::Undecided => {
                if text.trim_start().starts_with(['{', '[']) {
                    self.bare = Bare::MaybeJson;
                    self.bare_text.push_str(text);
                    self.bare_text.push('\n');
                } else {
                    self.bare = Bare::No;
                }
            }
            Bare::MaybeJson => {
                if self.bare_text.len() + text.len() > self.max {
                    return Err(SseError::EventTooLarge { limit: self.max });
                }
                self.bare_text.push_str(text);
                self.bare_text.push('\n');
            }
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take().filter(|e| !e.is_empty());
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the `\n` after the last data line
        out.push(SseEvent { event, data, id: self.last_id.clone().filter(|id| !id.is_empty()) });
    }
}

/// Index of the first byte in `hay` equal to `a` or `b`, scanning eight bytes at a time.
pub(crate) fn find_either(hay: &[u8], a: u8, b: u8) -> Option<usize> {
    find_any(hay, [a, b])
}

/// Index of the first byte in `hay` equal to one of `needles`, scanning eight bytes at a time
/// (for a decoder that skips the plain run of a JSON string up to its quote or backslash).
#[inline]
pub fn find_any<const N: usize>(hay: &[u8], needles: [u8; N]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let patterns = needles.map(|n| LO * u64::from(n));
    let mut chunks = hay.chunks_exact(8);
    let mut offset = 0usize;
    for chunk in &mut chunks {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else { break };
        let word = u64::from_le_bytes(word);
        // The lowest flagged byte is exactly the first matching byte (borrows only go upward).
        let found = patterns.iter().fold(0u64, |acc, &p| {
            let x = word ^ p;
            acc | (x.wrapping_sub(LO) & !x & HI)
        });
        if found != 0 {
            return Some(offset + (found.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    chunks.remainder().iter().position(|c| needles.contains(c)).map(|p| offset + p)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

    use super::*;

    /// The capacity of the line buffer after each piece (of the given sizes) of one long
    /// line.
    fn line_capacities(limit: usize, pieces: &[usize]) -> Vec<usize> {
        let mut d = SseDecoder::with_max_event_size(limit);
        let mut out = Vec::new();
        d.push(b"data: a\n\n", &mut out).unwrap();
        pieces
            .iter()
            .map(|&n| {
                d.push(&vec![b'v'; n], &mut out).unwrap();
                d.line.capacity()
            })
            .collect()
    }

    /// A line reserves room up to the limit exactly when it outgrows its buffer at 1 MiB or
    /// later, once, and only where the limit is reasonable.
    #[test]
    fn a_long_line_reserves_room_for_the_limit_once_past_one_mib() {
        const MIB: usize = 1024 * 1024;
        let limit = 16 * MIB;
        let caps = line_capacities(limit, &[64 * 1024; 20]);
        // The sixteenth piece fills the 1 MiB buffer the line grew to; the next outgrows it.
        assert!(caps[..16].iter().all(|&c| c <= MIB), "{caps:?}");
        assert!(caps[16..].iter().all(|&c| c == limit + 1), "{caps:?}");
        // Exactly at 1 MiB, outgrowing the buffer: reserved; one byte less: not.
        assert_eq!(line_capacities(limit, &[MIB]), [limit + 1]);
        assert!(line_capacities(limit, &[MIB - 1])[0] < 2 * MIB);
        // Above `MAX_LINE_RESERVE`, and with no limit, the buffer grows as usual.
        for limit in [1024 * MIB, usize::MAX] {
            let caps = line_capacities(limit, &[64 * 1024; 20]);
            assert!(caps.iter().all(|&c| c <= 2 * MIB), "{limit}: {caps:?}");
        }
    }

    #[test]
    fn find_either_matches_naive() {
        let hay: Vec<u8> = (0..300u32).map(|i| (i * 37 % 251) as u8).collect();
        for start in 0..40 {
            for (a, b) in [(b'\n', b'\r'), (0, 255), (7, 7), (200, 13)] {
                let h = &hay[start..];
                assert_eq!(
                    find_either(h, a, b),
                    h.iter().position(|&c| c == a || c == b),
                    "{start} {a} {b}"
                );
            }
        }
        assert_eq!(find_either(b"", b'a', b'b'), None);
        assert_eq!(find_either(b"\x80\x80\x80\x80\x80\x80\x80\x80\x01\n", b'\n', b'\r'), Some(9));
        assert_eq!(find_either(b"\x01\x00\x0a\x0d", 0x0a, 0x0d), Some(2));
        for start in 0..40 {
            let h = &hay[start..];
            let needles = [b'"', 7, 200];
            assert_eq!(find_any(h, needles), h.iter().position(|c| needles.contains(c)));
        }
    }

    #[test]
    fn basic_event() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        d.push(b"event: ping\ndata: {\"a\":1}\nid: 7\n\n", &mut out).unwrap();
        assert_eq!(
            out,
            vec![SseEvent {
                event: Some("ping".into()),
                data: "{\"a\":1}".into(),
                id: Some("7".into())
            }]
        );
    }
}
