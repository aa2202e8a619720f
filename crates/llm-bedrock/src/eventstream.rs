//! The AWS event-stream binary framing of Bedrock's `ConverseStream` body
//! (`application/vnd.amazon.eventstream`), as an [`llm_core::raw::framing::Framing`]
//! for the shared driver.
//!
//! Each message is `total length (u32 BE) | headers length (u32 BE) | prelude CRC-32 |
//! headers | payload | message CRC-32`. Messages are decoded by AWS's own
//! `aws-smithy-eventstream` (headers, payload and both checksums); this module only buffers
//! the body across reads and decides when a message is complete. Before a message's lengths
//! are trusted its prelude checksum is verified (with `crc32fast`, the CRC crate
//! `aws-smithy-eventstream` itself uses), so a corrupted length fails at once instead of
//! waiting for gigabytes that never come, and the length is held to a limit
//! ([`DEFAULT_MAX_FRAME_BYTES`] by default; headers to [`MAX_HEADERS_BYTES`]).
//!
//! Header values: Bedrock sends only strings (type 7). An [`AwsFrame`] is the decoded
//! [`Message`] itself, moved, not copied: its string headers are read in place
//! ([`AwsFrame::header`]); headers of the other defined types (booleans, integers, byte
//! arrays, timestamps, UUIDs) are checked by the decoder and kept but not shown as strings,
//! so a new non-string header on AWS's side does not break the stream; an undefined type is a
//! decode error.
//!
//! Buffering is linear in the body: complete messages are decoded where they are, in the
//! read itself; the buffer only holds the start of a message a read cut short, and takes from
//! the next reads just the bytes that complete it. Bytes are only rescanned to check a
//! prelude (12 bytes).

use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use bytes::{Bytes, BytesMut};
use llm_core::raw::framing::{DEFAULT_MAX_FRAME_BYTES, Framing};

/// Largest accepted headers section of one message: 128 KiB, the limit of AWS's reference
/// decoders.
pub const MAX_HEADERS_BYTES: usize = 128 * 1024;

/// The prelude: total length, headers length and the prelude CRC, 4 bytes each.
const PRELUDE_BYTES: usize = 12;
/// The prelude plus the trailing message CRC: the size of a message with no headers and no
/// payload.
const OVERHEAD_BYTES: usize = PRELUDE_BYTES + 4;

/// One event-stream message: the [`Message`] `aws-smithy-eventstream` decoded, kept whole
/// (its headers and payload are not copied again).
#[derive(Debug, Clone, PartialEq)]
pub struct AwsFrame {
    message: Message,
}

impl AwsFrame {
    /// A frame of string headers (in wire order) and a payload, as a test or a replay
    /// builds one.
    pub fn new<N, V>(headers: impl IntoIterator<Item = (N, V)>, payload: impl Into<Bytes>) -> Self
    where
        N: Into<String>,
        V: Into<String>,
    {
        let headers = headers
            .into_iter()
            .map(|(name, value)| Header::new(name.into(), HeaderValue::String(value.into().into())))
            .collect();
        AwsFrame { message: Message::new_from_parts(headers, payload) }
    }

    /// The value of the string header `name` (the first, if the sender repeated it).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.string_headers().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The string-valued headers (`:message-type`, `:event-type`, `:content-type`,
    /// `:exception-type`, `:error-code`, `:error-message`, ...) in wire order; headers of
    /// other value types are left out (module docs).
    pub fn string_headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.message.headers().iter().filter_map(|header| {
            header.value().as_string().ok().map(|value| (header.name().as_str(), value.as_str()))
        })
    }

    /// The payload (JSON for Bedrock).
    pub fn payload(&self) -> &Bytes {
        self.message.payload()
    }

    /// The whole decoded message, headers of every type included.
    pub fn message(&self) -> &Message {
        &self.message
    }
}

impl From<Message> for AwsFrame {
    fn from(message: Message) -> Self {
        AwsFrame { message }
    }
}

/// Why a body is not a valid event stream. After one, the framing keeps failing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AwsFrameError {
    /// A message is malformed: a checksum does not match, lengths contradict each other, a
    /// header is cut off, not UTF-8 or of an undefined type.
    #[error("malformed message at byte offset {offset}: {reason}")]
    Malformed {
        /// Offset of the message's first byte from the start of the body.
        offset: u64,
        /// What is wrong (from `aws-smithy-eventstream` where it decoded the message).
        reason: String,
    },
    /// A message (or its headers section) is larger than the limit.
    #[error(
        "message at byte offset {offset} declares {length} bytes, more than the limit of {limit}"
    )]
    TooLarge {
        /// Offset of the message's first byte from the start of the body.
        offset: u64,
        /// The declared length.
        length: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The body ended inside a message.
    #[error("the body ended inside a message ({pending} bytes pending)")]
    Truncated {
        /// Bytes of the incomplete message.
        pending: usize,
    },
}

/// The AWS event-stream framing: see the module docs.
#[derive(Debug)]
pub struct AwsEventStreamFraming {
    buffer: BytesMut,
    /// Body offset of `buffer[0]`, for error messages.
    offset: u64,
    max: usize,
    failed: Option<AwsFrameError>,
    /// Bytes copied into the buffer so far (tests check that decoded messages are not).
    #[cfg(test)]
    copied: usize,
}

impl Default for AwsEventStreamFraming {
    fn default() -> Self {
        Self::new()
    }
}

impl AwsEventStreamFraming {
    /// A framing with the default message limit ([`DEFAULT_MAX_FRAME_BYTES`], 16 MiB).
    pub fn new() -> Self {
        Self::with_max_frame_bytes(DEFAULT_MAX_FRAME_BYTES)
    }

    /// A framing whose messages may be at most `max` bytes.
    pub fn with_max_frame_bytes(max: usize) -> Self {
        AwsEventStreamFraming {
            buffer: BytesMut::new(),
            offset: 0,
            max,
            failed: None,
            #[cfg(test)]
            copied: 0,
        }
    }

    /// A framing with the limit a request's options set (`StreamOptions::max_event_bytes`),
    /// else the default: the shape `llm_core::raw::drive::StreamDecoder::framing` has.
    pub fn with_limit(max: Option<usize>) -> Self {
        Self::with_max_frame_bytes(max.unwrap_or(DEFAULT_MAX_FRAME_BYTES))
    }

    /// Moves bytes from the front of `chunk` into the buffer until it holds `len` bytes (or
    /// the chunk runs out); returns the rest of the chunk.
    fn take_into_buffer<'a>(&mut self, chunk: &'a [u8], len: usize) -> &'a [u8] {
        let wanted = len.saturating_sub(self.buffer.len()).min(chunk.len());
        let (head, rest) = chunk.split_at_checked(wanted).unwrap_or((chunk, &[]));
        self.keep(head);
        rest
    }

    /// Appends `bytes` to the buffer.
    fn keep(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
        #[cfg(test)]
        {
            self.copied += bytes.len();
        }
    }

    fn fail(&mut self, error: AwsFrameError) -> Result<(), AwsFrameError> {
        self.buffer = BytesMut::new();
        self.failed = Some(error.clone());
        Err(error)
    }
}

/// The length of the message at the front of `bytes` (the body from `offset` on) once its
/// prelude is checked; `None` while fewer than 12 bytes are there.
fn front_message_len(
    bytes: &[u8],
    offset: u64,
    max: usize,
) -> Result<Option<usize>, AwsFrameError> {
    let Some(prelude) = bytes.get(..PRELUDE_BYTES) else { return Ok(None) };
    let word = |at: usize| {
        prelude.get(at..at + 4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_be_bytes)
    };
    let (total, headers, crc) = (word(0) as usize, word(4) as usize, word(8));
    let malformed = |reason: String| AwsFrameError::Malformed { offset, reason };
    let computed = crc32fast::hash(prelude.get(..8).unwrap_or_default());
    if computed != crc {
        return Err(malformed(format!(
            "the prelude checksum {crc:#010x} does not match the computed CRC-32 {computed:#010x}"
        )));
    }
    if total < OVERHEAD_BYTES || headers > total - OVERHEAD_BYTES {
        return Err(malformed(format!(
            "the total length {total} cannot hold the prelude, {headers} header bytes and the message checksum"
        )));
    }
    if total > max {
        return Err(AwsFrameError::TooLarge { offset, length: total, limit: max });
    }
    if headers > MAX_HEADERS_BYTES {
        return Err(AwsFrameError::TooLarge { offset, length: headers, limit: MAX_HEADERS_BYTES });
    }
    Ok(Some(total))
}

/// Decodes the complete messages at the front of `bytes` (the body from `offset` on) into
/// `out`; returns how many bytes they took, and the error that stopped it, if any.
fn decode_messages(
    bytes: &[u8],
    offset: u64,
    max: usize,
    out: &mut Vec<AwsFrame>,
) -> (usize, Option<AwsFrameError>) {
    let mut used = 0usize;
    loop {
        let rest = bytes.get(used..).unwrap_or_default();
        let at = offset + used as u64;
        let total = match front_message_len(rest, at, max) {
            Ok(Some(total)) if total <= rest.len() => total,
            Ok(_) => return (used, None),
            Err(e) => return (used, Some(e)),
        };
        // The decoder copies what it keeps, so the bytes are only borrowed.
        match aws_smithy_eventstream::frame::read_message_from(
            rest.get(..total).unwrap_or_default(),
        ) {
            Ok(message) => out.push(AwsFrame { message }),
            Err(e) => {
                return (
                    used,
                    Some(AwsFrameError::Malformed { offset: at, reason: e.to_string() }),
                );
            }
        }
        used += total;
    }
}

impl Framing for AwsEventStreamFraming {
    // Binary messages: a line break means nothing here.
    const LINES: bool = false;
    type Frame = AwsFrame;
    type Error = AwsFrameError;

    fn push(&mut self, chunk: &[u8], out: &mut Vec<AwsFrame>) -> Result<(), AwsFrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        // The buffer holds at most the start of one message: it takes from the chunk only
        // what completes that message; the messages after it are decoded where they are, and
        // only one the chunk cuts short is copied.
        let mut chunk = chunk;
        if !self.buffer.is_empty() {
            if self.buffer.len() < PRELUDE_BYTES {
                chunk = self.take_into_buffer(chunk, PRELUDE_BYTES);
            }
            let total = match front_message_len(&self.buffer, self.offset, self.max) {
                Ok(Some(total)) => total,
                Ok(None) => return Ok(()),
                Err(e) => return self.fail(e),
            };
            chunk = self.take_into_buffer(chunk, total);
            if self.buffer.len() < total {
                return Ok(());
            }
            let (used, error) = decode_messages(&self.buffer, self.offset, self.max, out);
            if let Some(error) = error {
                return self.fail(error);
            }
            self.buffer.clear();
            self.offset += used as u64;
        }
        let (used, error) = decode_messages(chunk, self.offset, self.max, out);
        self.offset += used as u64;
        if let Some(error) = error {
            return self.fail(error);
        }
        self.keep(chunk.get(used..).unwrap_or_default());
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<AwsFrame>) -> Result<(), AwsFrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.buffer.is_empty() {
            return Ok(());
        }
        let pending = self.buffer.len();
        self.fail(AwsFrameError::Truncated { pending })
    }
}

#[cfg(test)]
mod tests;
