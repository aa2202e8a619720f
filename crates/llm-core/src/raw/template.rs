//! Events that repeat their envelope around one string: read the next one by its bytes.
//!
//! Chat Completions-style streams send every fragment of text or arguments inside the same
//! envelope (`id`, `object`, `created`, `model`, `choices[0].delta...`): about 300 bytes around
//! a 100-byte fragment, the same bytes in every event but the fragment and a padding string
//! (`obfuscation`, Mistral's `p`). A decoder that has parsed one such event in full learns it as
//! an [`EventTemplate`]; for the next events it compares bytes and scans the fragment's string,
//! instead of parsing the envelope again.
//!
//! Why it reads the same as a full parse: JSON parses left to right, so text that equals the
//! learned event byte for byte, except that other string literals stand where the learned one
//! had string literals (the fragment and padding, found by a structural walk of the learned
//! event) and another run of whitespace stands before the final closing brace (Anthropic's
//! padding), parses to the learned value with those strings replaced. A decoder learns only from
//! an event whose every other field it either does not read or reads with no effect the second
//! time, and treats a match as that event with the new fragment. Anything else (another shape,
//! a duplicate key, an escape in a key, a control character or a bad escape in a string) is no
//! match, and the event takes the full parse.

use std::ops::Range;

use super::WireText;
use super::wire_text::{decode_literal, find_string_end};

/// One step of the path from an event's top-level object to its fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// The value of this key of an object (present once, spelled without escapes).
    Key(&'a str),
    /// The element of an array that has exactly one.
    Only,
}

/// Where a Chat Completions-style chunk (OpenAI's, and the servers that copy its shape) carries
/// one text fragment: `choices[0].delta.content` of its one choice.
pub const CHAT_CONTENT: &[Step<'static>] =
    &[Step::Key("choices"), Step::Only, Step::Key("delta"), Step::Key("content")];

/// Where a Chat Completions-style chunk carries one argument fragment:
/// `choices[0].delta.tool_calls[0].function.arguments` of its one choice and one call.
pub const CHAT_ARGUMENTS: &[Step<'static>] = &[
    Step::Key("choices"),
    Step::Only,
    Step::Key("delta"),
    Step::Key("tool_calls"),
    Step::Only,
    Step::Key("function"),
    Step::Key("arguments"),
];

/// The deepest nesting a learned event may have (serde_json's own limit is 128).
const MAX_DEPTH: u32 = 128;

/// An event's data learned around its fragment string and its padding strings; see the
/// [module docs](self).
#[derive(Debug, Clone)]
pub struct EventTemplate {
    /// The learned event's data.
    text: Box<str>,
    /// The string literals that may differ (quotes included), in order, and whether each is
    /// the fragment (exactly one is).
    holes: Box<[(Range<usize>, bool)]>,
    /// The learned text's length without the fragment's literal: what an event has besides
    /// its fragment, when its padding is as long as the learned one's.
    around: usize,
    /// Where the whitespace before the closing brace of the top-level object starts, if the
    /// text ends with one: that run may differ too (Anthropic pads events with a random run of
    /// spaces there).
    closing: Option<usize>,
}

impl EventTemplate {
    /// Learns `data` (one event's JSON text, already parsed in full by the caller) around the
    /// string at `fragment` and the string values of the top-level keys in `padding`. `None`
    /// when there is no string at `fragment`, a key on the path or a padding key appears twice
    /// or is written with an escape, or `data` is not JSON.
    pub fn learn(data: &str, fragment: &[Step<'_>], padding: &[&str]) -> Option<Self> {
        let mut walk = Walk { bytes: data.as_bytes(), at: 0, holes: Vec::new(), padding };
        walk.whitespace();
        walk.value(Some(fragment), 0, true)?;
        walk.whitespace();
        if walk.at != data.len() {
            return None;
        }
        let mut holes = walk.holes;
        if holes.iter().filter(|(_, is_fragment)| *is_fragment).count() != 1 {
            return None;
        }
        holes.sort_by_key(|(range, _)| range.start);
        let fragment_len = holes.iter().find(|(_, f)| *f).map_or(0, |(range, _)| range.len());
        let around = data.len() - fragment_len + 2;
        let closing = closing_whitespace(data.as_bytes());
        Some(EventTemplate { text: data.into(), holes: holes.into(), around, closing })
    }

    /// The fragment, decoded, when `data` is the learned event with other strings in the
    /// fragment's and the padding's places.
    pub fn read(&self, data: &str) -> Option<WireText> {
        let (text, bytes) = (self.text.as_bytes(), data.as_bytes());
        let mut learned_at = 0usize;
        let mut at = 0usize;
        let mut fragment = None;
        for (range, is_fragment) in self.holes.iter() {
            let literal = text.get(learned_at..range.start)?;
            if bytes.get(at..at + literal.len())? != literal {
                return None;
            }
            at += literal.len();
            if *is_fragment {
                if bytes.get(at) != Some(&b'"') {
                    return None;
                }
                // Decoded in the same pass that finds its end.
                let (decoded, quote) =
                    decode_literal(data.get(at + 1..)?, data.len().saturating_sub(self.around))
                        .ok()?;
                fragment = Some(decoded);
                at += quote + 2;
            } else {
                at = string_end(bytes, at)?;
            }
            learned_at = range.end;
        }
        let rest = bytes.get(at..)?;
        if let Some(closing) = self.closing.filter(|&c| c >= learned_at) {
            // Compared up to the closing whitespace, whose length may differ.
            let literal = text.get(learned_at..closing)?;
            let after = rest.strip_prefix(literal)?;
            if closing_whitespace(after) != Some(0) {
                return None;
            }
        } else if rest != text.get(learned_at..)? {
            return None;
        }
        fragment
    }
}

/// Where the run of JSON whitespace before a final `}` starts, if `text` ends with `}`.
fn closing_whitespace(text: &[u8]) -> Option<usize> {
    let body = text.strip_suffix(b"}")?;
    let spaces = body.iter().rev().take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    Some(body.len() - spaces.count())
}

/// Templates kept: a text and a call, or two calls streaming in turn.
const KEPT: usize = 2;
/// The longest event a set learns: a template keeps the event's text, and the events worth
/// reading by comparison are many small ones (a server that sends one large fragment gains
/// nothing from it, and must not double what it makes us hold).
const MAX_LEARNED_BYTES: usize = 8 * 1024;
/// Templates that may be learned and dropped unmatched before a set stops learning: a stream
/// whose events never repeat pays the learning a bounded number of times.
const UNMATCHED: u32 = 8;

/// The templates one decoder has learned, the last matched first, each with what its
/// fragment is to the decoder (`F`).
#[derive(Debug, Clone)]
pub struct EventTemplates<F> {
    kept: Vec<(EventTemplate, F, bool)>,
    unmatched: u32,
}

impl<F> Default for EventTemplates<F> {
    fn default() -> Self {
        Self { kept: Vec::new(), unmatched: 0 }
    }
}

impl<F: Copy> EventTemplates<F> {
    /// A set that never learns, so every event takes the full parse (for comparing a
    /// decoder against it).
    pub fn off() -> Self {
        Self { kept: Vec::new(), unmatched: UNMATCHED }
    }

    /// The decoded fragment of `data` and what it is, when `data` matches a learned event.
    pub fn read(&mut self, data: &str) -> Option<(F, WireText)> {
        let (position, text) = self
            .kept
            .iter()
            .enumerate()
            .find_map(|(i, (template, ..))| Some((i, template.read(data)?)))?;
        self.kept.swap(0, position);
        let (_, what, matched) = self.kept.first_mut()?;
        *matched = true;
        Some((*what, text))
    }

    /// Whether [`learn`](Self::learn) may still keep a template.
    pub fn learning(&self) -> bool {
        self.unmatched < UNMATCHED
    }

    /// Learns `data` (see [`EventTemplate::learn`]), whose parse read `text` at `fragment`;
    /// keeps it only if the walk found that very string there.
    pub fn learn(
        &mut self,
        data: &str,
        fragment: &[Step<'_>],
        padding: &[&str],
        what: F,
        text: &WireText,
    ) {
        if !self.learning() || data.len() > MAX_LEARNED_BYTES {
            return;
        }
        let Some(template) = EventTemplate::learn(data, fragment, padding) else { return };
        if template.read(data).as_ref() != Some(text) {
            return;
        }
        if self.kept.len() >= KEPT
            && let Some((.., matched)) = self.kept.pop()
            && !matched
        {
            self.unmatched += 1;
        }
        self.kept.insert(0, (template, what, false));
    }

    /// Whether a learned event was matched since the last was learned or dropped.
    pub fn matched(&self) -> bool {
        self.kept.iter().any(|(.., matched)| *matched)
    }
}

/// The index after the string literal that starts at `at`, if it is a valid JSON string:
/// no raw control character, every escape one of RFC 8259's.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    loop {
        i += find_string_end(bytes.get(i..)?)?;
        match bytes.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => {
                i += match bytes.get(i + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => 2,
                    b'u' if bytes.get(i + 2..i + 6)?.iter().all(u8::is_ascii_hexdigit) => 6,
                    _ => return None,
                };
            }
            _ => return None,
        }
    }
}

/// A structural walk of one JSON text that records where the fragment and the padding are.
struct Walk<'a, 'p> {
    bytes: &'a [u8],
    at: usize,
    holes: Vec<(Range<usize>, bool)>,
    padding: &'p [&'p str],
}

impl Walk<'_, '_> {
    fn whitespace(&mut self) {
        while matches!(self.bytes.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.whitespace();
        (self.bytes.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    /// One value. `path` is what is left of the fragment's path when this value is on it;
    /// `top` is the event's top-level value (where the padding keys are).
    fn value(&mut self, path: Option<&[Step<'_>]>, depth: u32, top: bool) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.whitespace();
        match *self.bytes.get(self.at)? {
            b'"' => {
                let start = self.at;
                self.at = string_end(self.bytes, start)?;
                if path.is_some_and(<[Step<'_>]>::is_empty) {
                    self.holes.push((start..self.at, true));
                }
                Some(())
            }
            b'{' => self.object(path, depth, top),
            b'[' => self.array(path, depth),
            _ => {
                // A number or a literal: its bytes are compared, never a hole.
                let start = self.at;
                while self
                    .bytes
                    .get(self.at)
                    .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.'))
                {
                    self.at += 1;
                }
                (self.at > start).then_some(())
            }
        }
    }

    fn object(&mut self, path: Option<&[Step<'_>]>, depth: u32, top: bool) -> Option<()> {
        self.at += 1;
        let wanted = match path {
            Some([Step::Key(key), rest @ ..]) => Some((*key, rest)),
            _ => None,
        };
        let mut seen_wanted = false;
        let mut seen_padding = Vec::new();
        self.whitespace();
        if self.bytes.get(self.at) == Some(&b'}') {
            self.at += 1;
            return Some(());
        }
        loop {
            self.whitespace();
            let start = self.at;
            self.at = string_end(self.bytes, start)?;
            let key = self.bytes.get(start + 1..self.at - 1)?;
            let on_path = wanted.is_some_and(|(k, _)| k.as_bytes() == key);
            let is_padding = top && self.padding.iter().any(|p| p.as_bytes() == key);
            if on_path {
                if seen_wanted {
                    return None;
                }
                seen_wanted = true;
            }
            if is_padding {
                if seen_padding.contains(&key) {
                    return None;
                }
                seen_padding.push(key);
            }
            // A key spelled with an escape might be one of ours once decoded: refuse.
            if key.contains(&b'\\') && (wanted.is_some() || top) {
                return None;
            }
            self.eat(b':')?;
            self.whitespace();
            if is_padding && self.bytes.get(self.at) == Some(&b'"') {
                let value_start = self.at;
                self.at = string_end(self.bytes, value_start)?;
                self.holes.push((value_start..self.at, false));
            } else {
                let child = if on_path { wanted.map(|(_, rest)| rest) } else { None };
                self.value(child, depth + 1, false)?;
            }
            self.whitespace();
            match self.bytes.get(self.at)? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self, path: Option<&[Step<'_>]>, depth: u32) -> Option<()> {
        self.at += 1;
        let only = match path {
            Some([Step::Only, rest @ ..]) => Some(rest),
            Some(_) => return None,
            None => None,
        };
        self.whitespace();
        if self.bytes.get(self.at) == Some(&b']') {
            self.at += 1;
            return only.is_none().then_some(());
        }
        let mut count = 0usize;
        loop {
            count += 1;
            // Only the first element can be the one element; a second one fails below.
            let child = if count == 1 { only } else { None };
            self.value(child, depth + 1, false)?;
            self.whitespace();
            match self.bytes.get(self.at)? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return (only.is_none() || count == 1).then_some(());
                }
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests;
