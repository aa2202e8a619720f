//! Text fields of stream events, decoded so that a surrogate pair split across two events is
//! joined (UTF-16 servers split them; the text must arrive exactly as sent).
//!
//! Servers that build their streams from UTF-16 strings (JavaScript gateways and proxies) may
//! end one delta with the escape `\ud83d` and start the next with `\ude00`. Each event is legal
//! JSON, but a lone surrogate is not a Rust `char`: `serde_json` refuses to decode it into a
//! `String` ("unexpected end of hex escape"), and the whole stream would fail. A provider reads
//! the text, thinking and argument-fragment fields of its events as [`WireText`], which keeps a
//! lone half at either end of the string aside instead of failing, and passes every piece
//! through one [`SurrogateJoiner`] per stream. The joiner joins a trailing high half with the
//! leading low half of the next piece of the same block and channel; a half that is never
//! completed becomes U+FFFD, never an error.
//!
//! Decoding follows RFC 8259 exactly: a string without lone surrogates decodes to what
//! `serde_json` gives for a `String`. A lone surrogate inside a string (not at its start or end)
//! becomes U+FFFD, as JavaScript's `TextEncoder` would make it.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use serde_json::Value;
use serde_json::value::RawValue;

use crate::event::{BlockKey, Delta};

/// The replacement character, for a surrogate half that has no partner.
const REPLACEMENT: char = '\u{FFFD}';

/// A JSON string field of a stream event (text, thinking or an argument fragment).
///
/// Deserializes from any JSON string, including one whose first escape is a lone low surrogate
/// or whose last escape is a lone high surrogate (kept aside for [`SurrogateJoiner`]). Use
/// [`into_string`](Self::into_string) where no join is wanted.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct WireText {
    text: String,
    /// A lone low surrogate (`\uDC00`–`\uDFFF`) at the very start.
    lead: Option<u16>,
    /// A lone high surrogate (`\uD800`–`\uDBFF`) at the very end.
    trail: Option<u16>,
}

impl fmt::Debug for WireText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WireText")
            .field("text", &self.text)
            .field("lead", &self.lead.map(|u| format!("{u:#06x}")))
            .field("trail", &self.trail.map(|u| format!("{u:#06x}")))
            .finish()
    }
}

impl From<String> for WireText {
    fn from(text: String) -> Self {
        Self { text, lead: None, trail: None }
    }
}

impl From<&str> for WireText {
    fn from(text: &str) -> Self {
        Self::from(text.to_owned())
    }
}

impl WireText {
    /// The decoded text without the lone halves at its ends.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether there is neither text nor a lone half.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty() && self.lead.is_none() && self.trail.is_none()
    }

    /// The text alone, a lone half at either end becoming U+FFFD (for a field that is never
    /// continued by another event).
    pub fn into_string(self) -> String {
        if self.lead.is_none() && self.trail.is_none() {
            return self.text;
        }
        let mut out = String::with_capacity(self.text.len() + 6);
        if self.lead.is_some() {
            out.push(REPLACEMENT);
        }
        out.push_str(&self.text);
        if self.trail.is_some() {
            out.push(REPLACEMENT);
        }
        out
    }

    /// Decodes the bytes `serde_json` gives for a string literal when it does not insist on
    /// UTF-8: WTF-8, where a lone surrogate is the three bytes `ED A0..BF 80..BF`.
    fn from_wtf8(bytes: &[u8]) -> Self {
        if let Ok(text) = std::str::from_utf8(bytes) {
            return Self::from(text);
        }
        let mut out = Self::default();
        let mut text = String::with_capacity(bytes.len());
        let mut start = 0usize;
        let mut i = 0usize;
        while let Some(k) = bytes.get(i..).and_then(|rest| rest.iter().position(|&b| b == 0xED)) {
            let at = i + k;
            let unit = match (bytes.get(at + 1), bytes.get(at + 2)) {
                (Some(&b1), Some(&b2))
                    if b1 >= 0xA0 && (0x80..0xC0).contains(&b1) && (0x80..0xC0).contains(&b2) =>
                {
                    0xD000 | (u16::from(b1 & 0x3F) << 6) | u16::from(b2 & 0x3F)
                }
                _ => {
                    i = at + 1;
                    continue;
                }
            };
            text.push_str(&String::from_utf8_lossy(bytes.get(start..at).unwrap_or_default()));
            let low = (0xDC00..=0xDFFF).contains(&unit);
            if low && at == 0 {
                out.lead = Some(unit);
            } else if !low && at + 3 == bytes.len() {
                out.trail = Some(unit);
            } else {
                text.push(REPLACEMENT);
            }
            i = at + 3;
            start = i;
        }
        text.push_str(&String::from_utf8_lossy(bytes.get(start..).unwrap_or_default()));
        out.text = text;
        out
    }
}

impl<'de> Deserialize<'de> for WireText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = WireText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<WireText, E> {
                Ok(WireText::from(v))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<WireText, E> {
                Ok(WireText::from(v))
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<WireText, E> {
                Ok(WireText::from_wtf8(v))
            }
        }
        // serde_json decodes a string literal for `deserialize_bytes` without insisting on
        // paired surrogates (WTF-8); other deserializers hand over a `str`.
        d.deserialize_bytes(V)
    }
}

/// A JSON field that is usually a string (Chat Completions-style `content`, `arguments`):
/// a string as [`WireText`], tolerating lone halves at its ends, anything else as a `Value`.
///
/// Deserializes from `serde_json` text read in place (`from_str`, `from_slice`), the way every
/// stream event is read; a provider's lenient path that holds a `Value` converts with
/// [`From<Value>`].
#[derive(Debug, Clone, PartialEq)]
pub enum WireValue {
    /// A string.
    Text(WireText),
    /// Any other JSON value, boxed: the string is the common case, and a `Value` inline
    /// would make every field of this type (and every struct holding one) 72 bytes, moved
    /// whole at each step of a chunk's parse.
    Other(Box<Value>),
}

impl WireValue {
    /// The string, if it is one.
    pub fn into_text(self) -> Option<WireText> {
        match self {
            WireValue::Text(text) => Some(text),
            WireValue::Other(_) => None,
        }
    }
}

impl From<Value> for WireValue {
    fn from(value: Value) -> Self {
        match value {
            Value::String(text) => WireValue::Text(WireText::from(text)),
            other => WireValue::Other(Box::new(other)),
        }
    }
}

impl<'de> Deserialize<'de> for WireValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // serde_json cannot say "a string without insisting on paired surrogates, or any
        // other value" in one call: borrow the raw text (checked by serde_json's skipping
        // scan, not copied), then decode a string once, straight into its `String`.
        let raw = <&'de RawValue>::deserialize(d)?.get();
        match raw.strip_prefix('"') {
            Some(rest) => match decode_literal(rest, rest.len()) {
                Ok((text, end)) if end + 1 == rest.len() => Ok(WireValue::Text(text)),
                Ok(_) => Err(de::Error::custom("text after a string")),
                Err(e) => Err(de::Error::custom(e)),
            },
            None => serde_json::from_str(raw)
                .map(|v| WireValue::Other(Box::new(v)))
                .map_err(de::Error::custom),
        }
    }
}

/// Index of the first byte of `hay` that ends a plain run of a JSON string: a quote, a
/// backslash or a control character; eight bytes at a time.
#[inline]
pub(crate) fn find_string_end(hay: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const QUOTE: u64 = LO * b'"' as u64;
    const BACKSLASH: u64 = LO * b'\\' as u64;
    const SPACE: u64 = LO * 0x20;
    let mut chunks = hay.chunks_exact(8);
    let mut offset = 0usize;
    for chunk in &mut chunks {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else { break };
        let word = u64::from_le_bytes(word);
        let (quote, backslash) = (word ^ QUOTE, word ^ BACKSLASH);
        // Each term flags its matches exactly up to its first one (borrows only go upward),
        // so the lowest flag of the three is the first byte that ends the run.
        let found = ((quote.wrapping_sub(LO) & !quote)
            | (backslash.wrapping_sub(LO) & !backslash)
            | (word.wrapping_sub(SPACE) & !word))
            & HI;
        if found != 0 {
            return Some(offset + (found.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    chunks.remainder().iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).map(|p| offset + p)
}

/// Decodes a JSON string literal from just after its opening quote, as `serde_json` decodes it
/// for [`WireText`]: escapes per RFC 8259, a surrogate pair joined, a lone low half at the very
/// start and a lone high half at the very end kept aside, any other lone half U+FFFD. Returns
/// the text and the index of the closing quote in `text`; fails on a control character, an
/// escape that is not one of RFC 8259's, or no closing quote. One pass and one allocation when
/// `capacity` (the literal's length, as far as the caller knows it) is at least the text's.
pub(crate) fn decode_literal(
    text: &str,
    capacity: usize,
) -> Result<(WireText, usize), &'static str> {
    let bytes = text.as_bytes();
    let mut i = find_string_end(bytes).ok_or("unfinished string")?;
    if bytes.get(i) == Some(&b'"') {
        return Ok((WireText::from(text.get(..i).unwrap_or_default()), i));
    }
    // The decoded text is never longer than its literal. Not the whole of `text`: a larger
    // block than the text needs is freed under the allocator's lock of the thread that made
    // it, where many small ones are not.
    let capacity = capacity.min(text.len());
    let mut out = WireText { text: String::with_capacity(capacity), lead: None, trail: None };
    // A high half read and not yet paired: it is pushed as U+FFFD (or kept as the trail)
    // once what follows it is known.
    let mut high: Option<u16> = None;
    // The start of the text not copied yet; `i` is at the byte that ended the plain run.
    let mut run = 0usize;
    loop {
        if run < i {
            if let Some(h) = high.take() {
                out.push_lone(h, false);
            }
            out.text.push_str(text.get(run..i).unwrap_or_default());
        }
        match bytes.get(i) {
            Some(b'"') => break,
            Some(b'\\') => {}
            _ => return Err("control character in string"),
        }
        let escape = *bytes.get(i + 1).ok_or("unfinished escape")?;
        i += 2;
        let c = match escape {
            b'"' => Some('"'),
            b'\\' => Some('\\'),
            b'/' => Some('/'),
            b'b' => Some('\u{8}'),
            b'f' => Some('\u{c}'),
            b'n' => Some('\n'),
            b'r' => Some('\r'),
            b't' => Some('\t'),
            b'u' => {
                let unit = bytes.get(i..i + 4).and_then(hex4).ok_or("invalid \\u escape")?;
                i += 4;
                match (high.take(), unit) {
                    (Some(h), 0xDC00..=0xDFFF) => {
                        let c =
                            0x1_0000 + ((u32::from(h) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                        Some(char::from_u32(c).unwrap_or(REPLACEMENT))
                    }
                    (pending, _) => {
                        if let Some(h) = pending {
                            out.push_lone(h, false);
                        }
                        match unit {
                            0xD800..=0xDBFF => {
                                high = Some(unit);
                                None
                            }
                            0xDC00..=0xDFFF => {
                                out.push_lone(unit, false);
                                None
                            }
                            _ => Some(char::from_u32(u32::from(unit)).unwrap_or(REPLACEMENT)),
                        }
                    }
                }
            }
            _ => return Err("invalid escape"),
        };
        if let Some(c) = c {
            if let Some(h) = high.take() {
                out.push_lone(h, false);
            }
            out.text.push(c);
        }
        run = i;
        i += find_string_end(bytes.get(i..).unwrap_or_default()).ok_or("unfinished string")?;
    }
    if let Some(h) = high {
        out.push_lone(h, true);
    }
    Ok((out, i))
}

/// The value of four hex digits.
fn hex4(digits: &[u8]) -> Option<u16> {
    digits
        .iter()
        .try_fold(0u16, |acc, &d| Some(acc << 4 | u16::try_from(char::from(d).to_digit(16)?).ok()?))
}

impl WireText {
    /// A lone surrogate half met while decoding: a low half before anything else is the
    /// lead, a high half at the very end (`last`) the trail, any other U+FFFD.
    fn push_lone(&mut self, unit: u16, last: bool) {
        let low = (0xDC00..=0xDFFF).contains(&unit);
        if low && self.text.is_empty() && self.lead.is_none() {
            self.lead = Some(unit);
        } else if !low && last {
            self.trail = Some(unit);
        } else {
            self.text.push(REPLACEMENT);
        }
    }
}

/// Which stream of a block a piece of text belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// [`Delta::Text`].
    Text,
    /// [`Delta::Thinking`].
    Thinking,
    /// [`Delta::ToolCallArgs`].
    ToolArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pending {
    key: BlockKey,
    channel: Channel,
    /// The high surrogate waiting for its low half.
    high: u16,
}

/// Joins surrogate pairs split across the events of one stream (see the [module docs](self)).
///
/// Call [`join`](Self::join) for every text, thinking or argument piece, and
/// [`settle`](Self::settle) on the deltas a provider emitted for each event (and at the end of
/// the stream): a high half still waiting when its block ends, or when the stream ends, becomes
/// a U+FFFD delta just before that end.
#[derive(Debug, Clone, Default)]
pub struct SurrogateJoiner {
    /// High halves waiting for the next piece of their block and channel (few: at most one per
    /// open block).
    pending: Vec<Pending>,
}

impl SurrogateJoiner {
    /// A joiner with nothing pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// The text of `piece` for block `key` and `channel`, joined with a high half the previous
    /// piece of the same block and channel ended with. A high half at the end of `piece` is
    /// held back until the next piece (or [`settle`](Self::settle)); a low half at its start
    /// with no high half waiting, or a waiting high half not followed by a low one, becomes
    /// U+FFFD.
    pub fn join(&mut self, key: BlockKey, channel: Channel, piece: WireText) -> String {
        let held = self
            .pending
            .iter()
            .position(|p| p.key == key && p.channel == channel)
            .map(|at| self.pending.swap_remove(at).high);
        let WireText { text, lead, trail } = piece;
        if let Some(high) = trail {
            self.pending.push(Pending { key, channel, high });
        }
        let first = match (held, lead) {
            (None, None) => return text,
            (Some(high), Some(low)) => {
                let scalar =
                    0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
                char::from_u32(scalar).unwrap_or(REPLACEMENT)
            }
            // A high half then no low one is two characters: U+FFFD for the half, then the
            // rest (whose own lone low half is U+FFFD too).
            (Some(_), None) => REPLACEMENT,
            (None, Some(_)) => REPLACEMENT,
        };
        let mut out = String::with_capacity(text.len() + 8);
        out.push(first);
        out.push_str(&text);
        out
    }

    /// Drops every waiting high half and returns where each was (block key and channel), for
    /// a provider that ends its blocks itself: each becomes U+FFFD there.
    pub fn drain_unfinished(&mut self) -> Vec<(BlockKey, Channel)> {
        self.pending.drain(..).map(|p| (p.key, p.channel)).collect()
    }

    /// Whether no high half is waiting.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Turns the high halves whose block or stream ends in `out[from..]` (the deltas of one
    /// event) into U+FFFD, inserted just before that end ([`Delta::BlockEnd`] for the block,
    /// [`Delta::Done`] or [`Delta::Error`]). A half waiting in a tool call whose complete
    /// arguments arrive ([`Delta::ToolCallArgsDone`], [`Delta::ToolCallArgsWhole`]) is dropped: the complete text carries the
    /// whole character.
    pub fn settle(&mut self, out: &mut Vec<Delta>, from: usize) {
        if self.pending.is_empty() {
            return;
        }
        let mut k = 0;
        while let Some(&Pending { key, channel, .. }) = self.pending.get(k) {
            let tail = out.get(from..).unwrap_or_default();
            let end = tail.iter().position(|d| match d {
                Delta::BlockEnd { key: k } => *k == key,
                Delta::ToolCallArgsDone { key: k, .. }
                | Delta::ToolCallArgsWhole { key: k, .. } => {
                    *k == key && channel == Channel::ToolArgs
                }
                Delta::Done | Delta::Error(_) => true,
                _ => false,
            });
            let Some(at) = end.map(|at| from + at) else {
                k += 1;
                continue;
            };
            self.pending.swap_remove(k);
            if matches!(
                out.get(at),
                Some(Delta::ToolCallArgsDone { .. } | Delta::ToolCallArgsWhole { .. })
            ) {
                continue;
            }
            let text = REPLACEMENT.to_string();
            let delta = match channel {
                Channel::Text => Delta::Text { key, text },
                Channel::Thinking => Delta::Thinking { key, text },
                Channel::ToolArgs => Delta::ToolCallArgs { key, fragment: text },
            };
            out.insert(at, delta);
        }
    }
}

/// `json` with every lone surrogate escape (`\uD800`-`\uDFFF` not part of a high-low pair)
/// replaced by `\uFFFD`, so that `serde_json` can parse it into a `Value`; borrowed when
/// there is none.
///
/// For event fields kept whole as JSON values (opaque blocks, citations), where a lone half
/// would otherwise fail the whole event. Fields read as [`WireText`] keep their halves for
/// [`SurrogateJoiner`] instead. A backslash can only appear inside a string in valid JSON,
/// so escapes are found without tracking strings; invalid JSON stays invalid.
pub fn replace_lone_surrogates(json: &str) -> std::borrow::Cow<'_, str> {
    fn unit_at(bytes: &[u8], at: usize) -> Option<u16> {
        let digits = bytes.get(at..at + 6)?;
        if digits.first() != Some(&b'\\') || digits.get(1) != Some(&b'u') {
            return None;
        }
        let hex = std::str::from_utf8(digits.get(2..)?).ok()?;
        u16::from_str_radix(hex, 16).ok()
    }
    let bytes = json.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while let Some(k) = bytes.get(i..).and_then(|rest| rest.iter().position(|&b| b == b'\\')) {
        let at = i + k;
        let Some(unit) = unit_at(bytes, at) else {
            // Any other escape: two bytes (`\\` included, so its second backslash is skipped).
            i = at + 2;
            continue;
        };
        let paired = (0xD800..0xDC00).contains(&unit)
            && unit_at(bytes, at + 6).is_some_and(|low| (0xDC00..0xE000).contains(&low));
        if paired {
            i = at + 12;
        } else if (0xD800..0xE000).contains(&unit) {
            let buf = out.get_or_insert_with(|| String::with_capacity(json.len()));
            buf.push_str(json.get(copied..at).unwrap_or_default());
            buf.push_str("\\ufffd");
            copied = at + 6;
            i = at + 6;
        } else {
            i = at + 6;
        }
    }
    match out {
        Some(mut buf) => {
            buf.push_str(json.get(copied..).unwrap_or_default());
            std::borrow::Cow::Owned(buf)
        }
        None => std::borrow::Cow::Borrowed(json),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

    use super::*;

    fn parse(json: &str) -> WireText {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn plain_strings_decode_as_serde_json_does() {
        for json in [
            r#""""#,
            r#""abc""#,
            r#""a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00 ok""#,
            "\"caf\u{e9} \u{1F600}\"",
        ] {
            let expected: String = serde_json::from_str(json).unwrap();
            let text = parse(json);
            assert_eq!(text.as_str(), expected, "{json}");
            assert_eq!(text.into_string(), expected, "{json}");
        }
        assert!(serde_json::from_str::<WireText>("12").is_err());
        assert!(serde_json::from_str::<WireText>(r#""\x""#).is_err());
        assert_eq!(serde_json::from_str::<Option<WireText>>("null").unwrap(), None);
        // Through a `Value` too (other deserializers hand over a `str`).
        let via_value: WireText = serde_json::from_value(serde_json::json!("x\u{e9}")).unwrap();
        assert_eq!(via_value.as_str(), "x\u{e9}");
    }

    #[test]
    fn lone_halves_at_the_ends_are_kept_aside() {
        // serde_json itself fails on these.
        assert!(serde_json::from_str::<String>(r#""ab\ud83d""#).is_err());
        assert!(serde_json::from_str::<String>(r#""\ude00cd""#).is_err());
        let text = parse(r#""ab\ud83d""#);
        assert_eq!((text.as_str(), text.lead, text.trail), ("ab", None, Some(0xD83D)));
        let text = parse(r#""\ude00cd""#);
        assert_eq!((text.as_str(), text.lead, text.trail), ("cd", Some(0xDE00), None));
        let text = parse(r#""\uDE00\uD83D""#);
        assert_eq!((text.as_str(), text.lead, text.trail), ("", Some(0xDE00), Some(0xD83D)));
        assert!(!text.is_empty());
        assert_eq!(text.into_string(), "\u{FFFD}\u{FFFD}");
        // Inside the string a lone half is U+FFFD at once.
        let text = parse(r#""a\ud83db\ude00c\ud83d\ud83d""#);
        assert_eq!(text.as_str(), "a\u{FFFD}b\u{FFFD}c\u{FFFD}");
        assert_eq!(text.trail, Some(0xD83D));
    }

    /// Pieces a string literal is built of: plain text, every escape, pairs and lone halves.
    const PIECES: &[&str] = &[
        "a",
        "xyz",
        "\u{e9}",
        "\u{1F600}",
        "\\n",
        "\\\"",
        "\\\\",
        "\\/",
        "\\b",
        "\\f",
        "\\r",
        "\\t",
        "\\u00e9",
        "\\u0041",
        "\\ud83d",
        "\\ude00",
        "\\uD83D",
        "\\uDE00",
        "\\udbff",
        "\\udc00",
        "\\u0000",
        "\\uFFFF",
        "\\u001f",
    ];

    proptest::proptest! {
        /// The word-at-a-time search finds what a byte-by-byte search finds.
        #[test]
        fn find_string_end_is_the_first_quote_backslash_or_control(
            hay in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
        ) {
            let expected = hay.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20);
            proptest::prop_assert_eq!(find_string_end(&hay), expected);
        }

        /// The one-pass decoder of `WireValue` gives what serde_json's own string decode
        /// (surrogates unchecked) gives for `WireText`, whatever the escapes and halves.
        #[test]
        fn wire_value_decodes_as_serde_json_does(picks in proptest::collection::vec(0..PIECES.len(), 0..12)) {
            let body: String = picks.iter().map(|&k| PIECES[k]).collect();
            let json = format!("\"{body}\"");
            let expected: WireText = serde_json::from_str(&json).unwrap();
            let value: WireValue = serde_json::from_str(&json).unwrap();
            proptest::prop_assert_eq!(value, WireValue::Text(expected), "{}", json);
            // Inside an object too, as the decoders read it.
            let field: std::collections::HashMap<String, WireValue> =
                serde_json::from_str(&format!("{{\"k\": {json} }}")).unwrap();
            proptest::prop_assert!(matches!(field.get("k"), Some(WireValue::Text(_))));
        }
    }

    #[test]
    fn wire_value_takes_strings_with_lone_halves_and_arrays() {
        let value: WireValue = serde_json::from_str(r#""a\ud83d""#).unwrap();
        let WireValue::Text(text) = value else { panic!("{value:?}") };
        assert_eq!((text.as_str(), text.trail), ("a", Some(0xD83D)));
        let value: WireValue = serde_json::from_str(r#"[{"type":"text","text":"x"}]"#).unwrap();
        assert_eq!(
            value,
            WireValue::Other(Box::new(serde_json::json!([{"type": "text", "text": "x"}])))
        );
        assert_eq!(
            serde_json::from_str::<WireValue>(r#"{"a":1}"#).unwrap(),
            WireValue::Other(Box::new(serde_json::json!({"a": 1})))
        );
        assert_eq!(
            serde_json::from_str::<WireValue>(" 12 ").unwrap(),
            WireValue::Other(Box::new(serde_json::json!(12)))
        );
        assert!(serde_json::from_str::<WireValue>(r#""\x""#).is_err());
        assert_eq!(
            serde_json::from_str::<WireValue>(r#""plain \u00e9""#).unwrap(),
            WireValue::Text(WireText::from("plain \u{e9}"))
        );
        // Read in place only: a lenient path holding a `Value` converts with `From`.
        assert!(serde_json::from_value::<WireValue>(serde_json::json!("v")).is_err());
        assert_eq!(WireValue::from(serde_json::json!("s")), WireValue::Text(WireText::from("s")));
        assert_eq!(
            WireValue::from(serde_json::json!(1)),
            WireValue::Other(Box::new(serde_json::json!(1)))
        );
        assert_eq!(WireValue::from(serde_json::json!(1)).into_text(), None);
        assert_eq!(WireValue::from(serde_json::json!("t")).into_text(), Some(WireText::from("t")));
        let mut joiner = SurrogateJoiner::new();
        let _ = joiner.join(7, Channel::Text, text);
        assert_eq!(joiner.drain_unfinished(), vec![(7, Channel::Text)]);
        assert!(joiner.is_empty());
    }

    #[test]
    fn joiner_joins_split_pairs_per_block_and_channel() {
        let mut joiner = SurrogateJoiner::new();
        assert_eq!(joiner.join(0, Channel::Text, parse(r#""hi \ud83d""#)), "hi ");
        // Another block and another channel do not take the half.
        assert_eq!(joiner.join(1, Channel::Text, parse(r#""x""#)), "x");
        assert_eq!(joiner.join(0, Channel::Thinking, parse(r#""\ude00t""#)), "\u{FFFD}t");
        assert_eq!(joiner.join(0, Channel::Text, parse(r#""\ude00!""#)), "\u{1F600}!");
        assert!(joiner.is_empty());
        // A half not followed by its partner.
        assert_eq!(joiner.join(2, Channel::ToolArgs, parse(r#""{\"a\":\"\ud83d""#)), "{\"a\":\"");
        assert_eq!(joiner.join(2, Channel::ToolArgs, parse(r#""x\"}""#)), "\u{FFFD}x\"}");
        assert!(joiner.is_empty());
    }

    #[test]
    fn settle_turns_unfinished_halves_into_replacement_before_the_end() {
        let mut joiner = SurrogateJoiner::new();
        let mut out = Vec::new();
        let text = joiner.join(0, Channel::Text, parse(r#""a\ud83d""#));
        out.push(Delta::Text { key: 0, text });
        let thinking = joiner.join(1, Channel::Thinking, parse(r#""\ud83d""#));
        assert!(thinking.is_empty());
        joiner.settle(&mut out, 0);
        assert_eq!(out.len(), 1, "nothing ended yet");
        out.push(Delta::BlockEnd { key: 0 });
        joiner.settle(&mut out, 0);
        assert!(matches!(&out[1], Delta::Text { key: 0, text } if text == "\u{FFFD}"));
        assert!(matches!(out[2], Delta::BlockEnd { key: 0 }));
        assert!(!joiner.is_empty());
        let mut out = vec![Delta::Stop(crate::StopReason::Stop), Delta::Done];
        joiner.settle(&mut out, 0);
        assert!(matches!(&out[1], Delta::Thinking { key: 1, text } if text == "\u{FFFD}"));
        assert!(matches!(out[2], Delta::Done));
        assert!(joiner.is_empty());
        // Complete arguments replace the fragments: the half is dropped, not replaced.
        let _ = joiner.join(3, Channel::ToolArgs, parse(r#""{\"a\":\"\ud83d""#));
        let mut out = vec![
            Delta::ToolCallArgsDone { key: 3, arguments: "{\"a\":\"\u{1F600}\"}".into() },
            Delta::BlockEnd { key: 3 },
        ];
        joiner.settle(&mut out, 0);
        assert_eq!(out.len(), 2);
        assert!(joiner.is_empty());
    }
}
