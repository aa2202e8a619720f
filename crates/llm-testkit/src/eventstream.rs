//! AWS event-stream bodies for fixtures (`application/vnd.amazon.eventstream`): a readable
//! source, `<name>.frames.json`, and its encoding, `<name>.eventstream`, committed side by
//! side so a reviewer reads the source and the replay serves the exact bytes.
//!
//! The encoder is written from the format's description (AWS event-stream encoding), with
//! the `crc32fast` crate for the CRCs, so it shares nothing with the decoders it tests.
//! [`check_body`] refuses bytes that differ from their source's encoding;
//! `UPDATE_EXPECT=1 cargo xtask conformance` rewrites them ([`regenerate`]).

use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::{Error, Result};

/// The content type of an event-stream body.
pub const CONTENT_TYPE: &str = "application/vnd.amazon.eventstream";
/// The extension of an encoded body.
pub const EXTENSION: &str = ".eventstream";
/// The extension of its readable source.
pub const SOURCE_EXTENSION: &str = ".frames.json";

/// One message of a `*.frames.json` source.
///
/// `event` or `exception` is shorthand for the headers Bedrock sends (`:event-type` or
/// `:exception-type`, then `:content-type: application/json`, then `:message-type`);
/// `headers` lists string headers explicitly, in order, instead. The payload is `payload`
/// as compact JSON, or `payloadText` verbatim.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FrameSource {
    /// `:event-type` of an `event` message.
    pub event: Option<String>,
    /// `:exception-type` of an `exception` message.
    pub exception: Option<String>,
    /// Explicit string headers, in order (replaces the shorthand).
    pub headers: Option<Map<String, Value>>,
    /// The payload as JSON.
    pub payload: Option<Value>,
    /// The payload as text (for payloads that are not JSON).
    pub payload_text: Option<String>,
    /// Flip the message CRC (a corrupted frame).
    pub corrupt_message_crc: bool,
    /// Free text for the reader; ignored.
    #[serde(rename = "description")]
    pub _description: Option<Value>,
}

impl FrameSource {
    /// An `event` message of type `event` with a JSON payload.
    pub fn event(event: &str, payload: Value) -> Self {
        FrameSource {
            event: Some(event.to_owned()),
            payload: Some(payload),
            ..FrameSource::default()
        }
    }
}

/// A whole Bedrock `ConverseStream` answer (status 200, event-stream body) whose text is
/// `text`, with usage, for tests that need a request to succeed.
pub fn converse_text(text: &str) -> Result<crate::fixture::Canned> {
    use serde_json::json;
    let body = encode(&[
        FrameSource::event("messageStart", json!({"role": "assistant"})),
        FrameSource::event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": text}}),
        ),
        FrameSource::event("contentBlockStop", json!({"contentBlockIndex": 0})),
        FrameSource::event("messageStop", json!({"stopReason": "end_turn"})),
        FrameSource::event("metadata", json!({"usage": {"inputTokens": 3, "outputTokens": 1}})),
    ])?;
    Ok(crate::fixture::Canned::new(200, [("content-type", CONTENT_TYPE)], body))
}

impl FrameSource {
    fn header_list(&self) -> Result<Vec<(String, String)>> {
        if let Some(headers) = &self.headers {
            return headers
                .iter()
                .map(|(name, value)| match value {
                    Value::String(v) => Ok((name.clone(), v.clone())),
                    other => Err(Error::Msg(format!("header {name}: {other} is not a string"))),
                })
                .collect();
        }
        let json = ("content-type".to_owned(), "application/json".to_owned());
        let (kind_header, name, message_type) = match (&self.event, &self.exception) {
            (Some(event), None) => (":event-type", event, "event"),
            (None, Some(exception)) => (":exception-type", exception, "exception"),
            _ => {
                return Err(Error::Msg(
                    "a frame needs exactly one of `event`, `exception` or `headers`".to_owned(),
                ));
            }
        };
        Ok(vec![
            (kind_header.to_owned(), name.clone()),
            (format!(":{}", json.0), json.1),
            (":message-type".to_owned(), message_type.to_owned()),
        ])
    }

    fn payload_bytes(&self) -> Result<Vec<u8>> {
        match (&self.payload, &self.payload_text) {
            (Some(value), None) => serde_json::to_vec(value)
                .map_err(|e| Error::Msg(format!("payload does not serialize: {e}"))),
            (None, Some(text)) => Ok(text.as_bytes().to_vec()),
            (None, None) => Ok(Vec::new()),
            (Some(_), Some(_)) => {
                Err(Error::Msg("a frame has `payload` or `payloadText`, not both".to_owned()))
            }
        }
    }
}

/// Encodes one message: prelude (total length, headers length, prelude CRC), string
/// headers (type 7), payload, message CRC; all integers big-endian.
pub fn encode_message(headers: &[(String, String)], payload: &[u8]) -> Result<Vec<u8>> {
    let mut header_bytes = Vec::new();
    for (name, value) in headers {
        let name_len = u8::try_from(name.len())
            .map_err(|_| Error::Msg(format!("header name {name:?} is longer than 255 bytes")))?;
        let value_len = u16::try_from(value.len())
            .map_err(|_| Error::Msg(format!("header {name} value is longer than 65535 bytes")))?;
        header_bytes.push(name_len);
        header_bytes.extend_from_slice(name.as_bytes());
        header_bytes.push(7);
        header_bytes.extend_from_slice(&value_len.to_be_bytes());
        header_bytes.extend_from_slice(value.as_bytes());
    }
    let total = 16 + header_bytes.len() + payload.len();
    let total = u32::try_from(total).map_err(|_| Error::Msg("message over 4 GiB".to_owned()))?;
    let headers_len = u32::try_from(header_bytes.len())
        .map_err(|_| Error::Msg("headers over 4 GiB".to_owned()))?;
    let mut out = Vec::with_capacity(total as usize);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&headers_len.to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
    out.extend_from_slice(&header_bytes);
    out.extend_from_slice(payload);
    out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
    Ok(out)
}

/// A prelude alone: `total` and `headers_len` with a valid prelude CRC (for a message
/// that announces more bytes than it will ever send).
pub fn prelude(total: u32, headers_len: u32) -> [u8; 12] {
    let mut out = [0u8; 12];
    let (lengths, crc) = out.split_at_mut(8);
    let (t, h) = lengths.split_at_mut(4);
    t.copy_from_slice(&total.to_be_bytes());
    h.copy_from_slice(&headers_len.to_be_bytes());
    crc.copy_from_slice(&crc32fast::hash(lengths).to_be_bytes());
    out
}

/// A message's string headers (name, value) in order, and its payload.
pub type Message = (Vec<(String, String)>, Vec<u8>);

/// The string headers and payload of one encoded message (CRCs not checked); `None` when
/// the bytes are not one well-formed message with string headers only.
pub fn parse_message(bytes: &[u8]) -> Option<Message> {
    let word = |at: usize| bytes.get(at..at + 4)?.try_into().ok().map(u32::from_be_bytes);
    let total = word(0)? as usize;
    let headers_len = word(4)? as usize;
    if total != bytes.len() || total < 16 || headers_len > total - 16 {
        return None;
    }
    let mut rest = bytes.get(12..12 + headers_len)?;
    let mut headers = Vec::new();
    while let Some((&name_len, tail)) = rest.split_first() {
        let name = std::str::from_utf8(tail.get(..name_len as usize)?).ok()?;
        let tail = tail.get(name_len as usize..)?;
        if tail.first() != Some(&7) {
            return None;
        }
        let len = u16::from_be_bytes(tail.get(1..3)?.try_into().ok()?) as usize;
        let value = std::str::from_utf8(tail.get(3..3 + len)?).ok()?;
        headers.push((name.to_owned(), value.to_owned()));
        rest = tail.get(3 + len..)?;
    }
    let payload = bytes.get(12 + headers_len..total - 4)?.to_vec();
    Some((headers, payload))
}

/// Encodes a whole source (the bytes of a `*.eventstream` file).
pub fn encode(frames: &[FrameSource]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for (i, frame) in frames.iter().enumerate() {
        let context = |e: Error| Error::Msg(format!("frame {}: {e}", i + 1));
        let mut bytes = encode_message(
            &frame.header_list().map_err(context)?,
            &frame.payload_bytes().map_err(context)?,
        )
        .map_err(context)?;
        if frame.corrupt_message_crc
            && let Some(last) = bytes.last_mut()
        {
            *last ^= 0xFF;
        }
        out.extend(bytes);
    }
    Ok(out)
}

/// Parses a `*.frames.json` source.
pub fn parse_source(text: &[u8], path: &Path) -> Result<Vec<FrameSource>> {
    serde_json::from_slice(text).map_err(|e| Error::Json { path: path.to_owned(), source: e })
}

/// The source file name for an encoded body name (`response.eventstream` ->
/// `response.frames.json`), `None` for other names.
pub fn source_name(body_name: &str) -> Option<String> {
    body_name.strip_suffix(EXTENSION).map(|stem| format!("{stem}{SOURCE_EXTENSION}"))
}

/// Checks an encoded body against its source: the bytes must equal the encoding.
pub fn check_body(body: &[u8], source: &[u8], source_path: &Path) -> Result<()> {
    let frames = parse_source(source, source_path)?;
    let encoded =
        encode(&frames).map_err(|e| Error::Msg(format!("{}: {e}", source_path.display())))?;
    if encoded != body {
        return Err(Error::Msg(format!(
            "{}: the committed .eventstream bytes are not the encoding of this source; \
             regenerate with `UPDATE_EXPECT=1 cargo xtask conformance` and review",
            source_path.display()
        )));
    }
    Ok(())
}

/// Splits a body after every message (by the lengths in each prelude; the rest, if a
/// prelude is cut or inconsistent, is one last piece).
pub fn split_messages(body: &Bytes) -> Vec<Bytes> {
    let mut pieces = Vec::new();
    let mut start = 0usize;
    while let Some(prelude) = body.get(start..start + 4) {
        let total = prelude.try_into().map(u32::from_be_bytes).unwrap_or(0) as usize;
        if total < 16 || start + total > body.len() {
            break;
        }
        pieces.push(body.slice(start..start + total));
        start += total;
    }
    if start < body.len() {
        pieces.push(body.slice(start..));
    }
    pieces
}

/// Rewrites every `*.eventstream` under `root` whose bytes differ from its
/// `*.frames.json` source (and writes missing ones); returns the files written.
pub fn regenerate(root: &Path) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let Some(stem) = name.strip_suffix(SOURCE_EXTENSION) else { continue };
            let source = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            let encoded = encode(&parse_source(&source, &path)?)
                .map_err(|e| Error::Msg(format!("{}: {e}", path.display())))?;
            let target = path.with_file_name(format!("{stem}{EXTENSION}"));
            if std::fs::read(&target).ok().as_deref() != Some(encoded.as_slice()) {
                std::fs::write(&target, &encoded).map_err(|e| Error::io(&target, e))?;
                written.push(target);
            }
        }
    }
    Ok(written)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Test vectors, computed with zlib's CRC-32; the first is also published
    /// by a third party.
    #[test]
    fn matches_the_published_vectors() {
        let empty = encode_message(&[], br#"{"foo": "bar"}"#).unwrap();
        assert_eq!(hex(&empty), "0000001e00000000baf2f68a7b22666f6f223a2022626172227dae7258e4");
        let frame = FrameSource {
            event: Some("contentBlockDelta".into()),
            payload: Some(serde_json::json!({"contentBlockIndex": 0, "delta": {"text": "Hi"}})),
            ..FrameSource::default()
        };
        let expected = concat!(
            "0000009400000057b4ab9aee0b3a6576656e742d74797065070011636f6e7465",
            "6e74426c6f636b44656c74610d3a636f6e74656e742d74797065070010617070",
            "6c69636174696f6e2f6a736f6e0d3a6d6573736167652d747970650700056576",
            "656e747b22636f6e74656e74426c6f636b496e646578223a302c2264656c7461",
            "223a7b2274657874223a224869227d7d1f944657",
        );
        assert_eq!(hex(&encode(&[frame]).unwrap()), expected);
    }

    #[test]
    fn parse_message_inverts_encode_message() {
        let headers =
            vec![(":event-type".to_owned(), "x".to_owned()), ("k".to_owned(), "vé".to_owned())];
        let bytes = encode_message(&headers, b"{\"a\":1}").unwrap();
        assert_eq!(parse_message(&bytes), Some((headers, b"{\"a\":1}".to_vec())));
        assert_eq!(parse_message(&bytes[..bytes.len() - 1]), None);
        let p = prelude(100, 0);
        assert_eq!(&p[..8], &[0, 0, 0, 100, 0, 0, 0, 0]);
        assert_eq!(p[8..], crc32fast::hash(&p[..8]).to_be_bytes());
    }

    #[test]
    fn corrupt_flag_changes_only_the_message_crc() {
        let frame = FrameSource { event: Some("x".into()), ..FrameSource::default() };
        let good = encode(std::slice::from_ref(&frame)).unwrap();
        let bad = encode(&[FrameSource { corrupt_message_crc: true, ..frame }]).unwrap();
        assert_eq!(good.len(), bad.len());
        assert_eq!(good[..good.len() - 4], bad[..bad.len() - 4]);
        assert_ne!(good[good.len() - 4..], bad[bad.len() - 4..]);
    }

    #[test]
    fn splits_after_each_message() {
        let a = encode_message(&[], b"a").unwrap();
        let b = encode_message(&[("k".into(), "v".into())], b"bb").unwrap();
        let mut body = a.clone();
        body.extend(&b);
        body.extend_from_slice(b"\x00\x00");
        let pieces = split_messages(&Bytes::from(body));
        assert_eq!(pieces, vec![Bytes::from(a), Bytes::from(b), Bytes::from_static(b"\x00\x00")]);
    }

    #[test]
    fn bytes_that_differ_from_the_source_are_refused() {
        let source = br#"[{"event": "messageStart", "payload": {"role": "assistant"}}]"#;
        let frames = parse_source(source, Path::new("s")).unwrap();
        let good = encode(&frames).unwrap();
        assert!(check_body(&good, source, Path::new("s")).is_ok());
        let mut stale = good.clone();
        stale.push(0);
        assert!(check_body(&stale, source, Path::new("s")).is_err());
        assert!(
            parse_source(br#"[{"event": "a", "exception": "b"}]"#, Path::new("s"))
                .and_then(|f| encode(&f))
                .is_err()
        );
        assert!(parse_source(br#"[{"evnt": "a"}]"#, Path::new("s")).is_err());
    }
}
