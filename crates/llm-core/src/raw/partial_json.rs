//! Incremental partial-JSON parsing for streamed tool-call arguments.
//!
//! Providers stream tool arguments as raw JSON text fragments. OpenClaw re-parses the whole
//! accumulated buffer after every fragment (`parseStreamingJson`), which is quadratic over a
//! stream. [`PartialJson`] keeps its parse state across
//! fragments instead: every byte is looked at once, and the current best-effort value is kept
//! up to date in place, so reading [`PartialJson::value`] after every fragment costs nothing
//! extra and the work over a whole stream is linear in its length.
//!
//! # What the partial value shows
//!
//! [`PartialJson::value`] is always a JSON object (`{}` until a top-level object has started,
//! and `{}` for ever if the top-level value is not an object). For an unfinished buffer:
//!
//! * every completed member is shown with its final value;
//! * an open object or array is shown with the members it has so far (`{"a":[` shows
//!   `{"a":[]}`);
//! * a string being streamed shows its decoded prefix (an opened string shows `""`). An
//!   escape sequence that is not finished yet (`\`, `\u12`, or the first half of a surrogate
//!   pair) is not shown until it is complete, so a value never shows garbage or a transient
//!   U+FFFD;
//! * a number being streamed shows the longest prefix of its text that is a valid JSON number
//!   (`-` shows nothing, `1.` and `1e` and `1e-` show `1`, `-12.5e` shows `-12.5`); a
//!   number longer than 256 characters is shown only once complete;
//! * a literal shows nothing until it is complete (`tr` → absent, `true` → `true`). This is
//!   stricter than npm `partial-json`, which would show `true` for `t`;
//! * an object key shows nothing until its value starts.
//!
//! As a result a completed member never disappears or changes while more valid input arrives.
//!
//! # Leniency (OpenClaw's `repairJson`, never rewriting valid JSON)
//!
//! Valid JSON is decoded per RFC 8259, with one documented exception (the drive-path rule
//! below). Invalid JSON inside string literals is repaired as [`repair_json`] does, so the
//! streamed value agrees with the final parse: raw control characters are taken literally,
//! an invalid escape such as `\d` is kept as a literal backslash followed by the character,
//! and `\u` not followed by four hex digits is such an invalid escape. Where Rust strings
//! cannot follow JavaScript, a lone surrogate escape decodes to U+FFFD, and a number outside
//! the `f64` range becomes `null` (what `JSON.stringify(JSON.parse(..))` gives in JavaScript).
//!
//! ## The drive-path rule
//!
//! Some models write Windows paths with single backslashes (`"C:\new\file"`), which JSON
//! would decode as a newline and a form feed. OpenClaw keeps such backslashes literal, and so
//! do we, under this exact rule:
//!
//! A valid control escape (`\b \f \n \r \t`) inside a string keeps its backslash as a literal
//! character (its letter then being ordinary text) exactly when the string's *prefix* before it
//! ends in a drive path written with single backslashes. The prefix is the string's text so
//! far in which raw characters count as themselves, a single backslash that stays literal (an
//! invalid escape, or a control escape this rule kept) counts as a separator `\`, and every
//! other escape sequence (`\\`, `\"`, `\/`, `\uXXXX`, a control escape the rule did not keep)
//! counts as one character that is not part of any path. The prefix ends in a drive path when
//!
//! * it ends with an ASCII letter, a `:` and zero or more segments, each segment a separator
//!   followed by characters other than `\ / " : * ? < > |`, CR and LF;
//! * the letter is at the start of the string or follows a character that is not an ASCII
//!   letter or digit;
//! * the letter is within the prefix's last 160 UTF-16 code units, and those 160 code units
//!   hold none of `( ) = ; { } ' , < > |` (code, not a path).
//!
//! So the rule never fires on a path whose separators were written `\\` (`"C:\\Users\\ola\nNext"`
//! decodes to a real newline: a `\\` ends the candidate), nor on a path written with `/`, nor on
//! text without a drive letter and colon. The one valid-JSON input it changes is a drive letter
//! and colon followed directly by such a control escape, or by single-backslash segments and
//! then one (`"A:\nB"` reads as `A:\nB`, not as a line break): that is exactly the ambiguous
//! text `"C:\new\file"` is made of. OpenClaw differs in two ways: it counts `\\` (and `/`) as a
//! separator, which rewrites correctly escaped paths (a bug: valid JSON must arrive as sent), and it accepts
//! a drive letter right at the start of the 160-unit window whatever precedes it.
//!
//! OpenClaw's partial step first parses the *unrepaired* prefix, so a streamed `"C:\new`
//! briefly shows a newline there and then flips to a backslash once the buffer is complete;
//! here the repair rules apply while streaming too, so the shown value never flips.
//!
//! # What is kept of the input
//!
//! [`PartialJson::new`] keeps the raw text fed to it ([`PartialJson::raw`]).
//! [`PartialJson::without_raw`] keeps only its length and a keyed hash, which is all that
//! comparing it with complete arguments that arrive later needs
//! ([`PartialJson::suffix_after_fed`]); the message assembler uses it, so a streamed call's
//! arguments are held once, as the shown value, instead of twice.
//!
//! # Malformed input
//!
//! On a syntax error the parser stops and keeps the value it had built (like npm
//! `partial-json`, which returns the object parsed so far): [`PartialJson::is_complete`] is
//! then `false`. Text after a complete top-level value is ignored (and also makes
//! `is_complete` false; see [`split_concatenated_objects`] for `{…}{…}`).

use std::borrow::Cow;
use std::hash::Hasher;
use std::sync::Arc;

use serde_json::{Map, Number, Value};
use siphasher::sip128::{Hasher128, SipHasher13};

/// Nesting deeper than this is treated as a syntax error (serde_json stops at 128, so every
/// document that serde_json accepts is accepted here too).
const MAX_DEPTH: usize = 256;
/// OpenClaw looks at the last 160 UTF-16 code units of a string for the drive-path rule.
const WINDOWS_TAIL: u64 = 160;
/// A streamed number whose text is longer than this is not shown until it completes (it would
/// have to be re-parsed after every fragment), so a pathological huge number cannot make the
/// total work quadratic.
const MAX_PARTIAL_NUMBER: usize = 256;

mod changes;
mod drive_path;
mod repair;

use changes::*;
use drive_path::*;
use repair::*;
pub use repair::{parse_streaming_json, repair_json, split_concatenated_objects};

/// An open object or array.
#[derive(Debug, Clone)]
struct Frame {
    /// Where this container sits in its parent.
    slot: Slot,
    array: bool,
    /// Whether this container already exists in the shown tree. Containers opened since the
    /// last flush are built off-tree and attached at the next flush.
    attached: bool,
    /// Arrays: number of completed elements.
    next_index: usize,
    /// Objects: key of the member being parsed.
    key: Option<String>,
    /// Changes not yet applied to this container.
    ops: Vec<Op>,
}

impl Frame {
    fn container(&self) -> Value {
        if self.array { Value::Array(Vec::new()) } else { empty_object() }
    }

    /// Slot of the member currently being parsed (kept for later).
    fn current_slot(&self) -> Slot {
        if self.array {
            Slot::Index(self.next_index)
        } else {
            Slot::Key(self.key.clone().unwrap_or_default())
        }
    }

    /// Slot of the member that just completed (moves on to the next member).
    fn take_slot(&mut self) -> Slot {
        if self.array {
            let index = self.next_index;
            self.next_index += 1;
            Slot::Index(index)
        } else {
            Slot::Key(self.key.take().unwrap_or_default())
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Expecting a value (top level, after `:` or after `,` in an array).
    Value,
    /// After `[`: a value or `]`.
    ValueOrEnd,
    /// After `{`: a key or `}`.
    KeyOrEnd,
    /// After `,` in an object: a key.
    Key,
    /// After a key.
    Colon,
    /// After a member: `,` or the closing bracket.
    CommaOrEnd,
    /// Inside a string literal.
    Str,
    /// Inside a number.
    Num,
    /// Inside `true` / `false` / `null`.
    Lit,
    /// The top-level value is complete; only whitespace may follow.
    Done,
    /// Non-whitespace followed the complete top-level value; ignored.
    Trailing,
    /// Syntax error; the rest of the input is ignored.
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Esc {
    None,
    /// After a backslash.
    Backslash,
    /// After `\u` and `n` hex digits.
    Unicode {
        n: usize,
        digits: [u8; 4],
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumState {
    Start,
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

impl NumState {
    fn is_complete(self) -> bool {
        matches!(self, Self::Zero | Self::Int | Self::Frac | Self::ExpDigits)
    }
}

const LITERALS: [(&[u8], Value); 3] =
    [(b"true", Value::Bool(true)), (b"false", Value::Bool(false)), (b"null", Value::Null)];

fn parse_number(text: &str) -> Option<Number> {
    text.parse::<Number>().ok()
}

/// What a [`PartialJson`] keeps of the text fed to it.
#[derive(Debug, Clone)]
enum Fed {
    /// The text itself ([`PartialJson::new`]).
    Raw(String),
    /// Its length and hash ([`PartialJson::without_raw`]).
    Digest(FedDigest),
}

/// The length and a keyed 128-bit SipHash-1-3 of the text fed to a
/// [`PartialJson::without_raw`] parser: enough to tell whether a later complete text starts
/// with it, without holding a second copy of arguments that may be many megabytes.
///
/// Why a collision cannot silently change a result in practice: the lengths are compared
/// exactly, so only two different texts of the same length can be confused, and only if their
/// hashes agree. The key is 128 random bits drawn per parser from the standard library's
/// randomly seeded hasher state and never leaves the process (it is not shown by `Debug`), so
/// the text a model or a server sends cannot depend on it: SipHash is a pseudorandom function
/// under a secret key, and the chance that two given different texts collide is about 2^-128
/// per comparison, far below that of a memory error. Two different texts of the same length
/// that agree in their hash are the only way to get the streamed value instead of the complete
/// text's; every other difference is found exactly.
#[derive(Clone)]
struct FedDigest {
    len: usize,
    key: [u8; 16],
    hasher: SipHasher13,
}

impl std::fmt::Debug for FedDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key and state stay out of logs.
        f.debug_struct("FedDigest").field("len", &self.len).finish_non_exhaustive()
    }
}

impl FedDigest {
    fn new() -> Self {
        let key = random_key();
        Self { len: 0, key, hasher: SipHasher13::new_with_key(&key) }
    }

    fn push(&mut self, text: &str) {
        self.len += text.len();
        self.hasher.write(text.as_bytes());
    }

    /// Whether `text` (of [`len`](Self::len) bytes) hashes as the text fed so far.
    fn matches(&self, text: &str) -> bool {
        if text.len() != self.len {
            return false;
        }
        let mut other = SipHasher13::new_with_key(&self.key);
        other.write(text.as_bytes());
        other.finish128() == self.hasher.finish128()
    }
}

/// 128 bits from the standard library's randomly seeded hasher state (seeded once per thread
/// from the operating system, then stepped per `RandomState`): unpredictable outside the
/// process, with no dependency or `unsafe` for it.
fn random_key() -> [u8; 16] {
    use std::hash::BuildHasher;
    let mut key = [0u8; 16];
    for half in key.chunks_mut(8) {
        let word = std::collections::hash_map::RandomState::new().hash_one(half.len());
        half.copy_from_slice(&word.to_le_bytes());
    }
    key
}

/// Incremental partial-JSON parser for streamed tool arguments.
///
/// Feed fragments with [`push`](Self::push) and read the best-effort current value with
/// [`value`](Self::value) at any time; see the [module docs](self) for what a partial value
/// shows. Each byte is processed once and the shown value is updated in place (strings are
/// appended to, containers are addressed by their path), so a whole stream costs time linear
/// in its length however often `value()` is read.
#[derive(Debug, Clone)]
pub struct PartialJson {
    /// What is kept of the text fed so far.
    fed: Fed,
    /// The shown value (always an object).
    root: Value,
    /// Whether the top-level value is an object (otherwise nothing is shown).
    materialize: bool,
    stack: Vec<Frame>,
    mode: Mode,

    // String state.
    str_is_key: bool,
    /// Whether the current string value is already shown in the tree.
    str_shown: bool,
    /// Decoded text not yet shown (whole key for keys).
    sbuf: String,
    esc: Esc,
    /// A decoded high surrogate waiting for its low half.
    high: Option<u16>,
    path: WinPath,

    // Number state.
    num: String,
    num_state: NumState,
    /// Length of the longest prefix of `num` that is a valid number.
    num_valid: usize,
    /// Length of the prefix currently shown (0 = none).
    num_shown: usize,

    // Literal state.
    lit: usize,
    lit_pos: usize,

    // What the last push changed (see `changed`).
    /// Common path of the changes made so far by the current push.
    change: Option<Vec<Slot>>,
    /// The last push's common path, as a JSON Pointer.
    changed: Option<Arc<str>>,
    /// Bumped whenever a container opens or closes or the member being parsed moves on, so
    /// an unchanged `shape` means the same member.
    shape: u64,
    /// `shape` when the last push did nothing but append to the string being parsed.
    append_shape: Option<u64>,
    /// Cleared when the value stops being what a strict parse of valid JSON text gives
    /// ([`is_exact`](PartialJson::is_exact)).
    exact: bool,
}

impl Default for PartialJson {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialJson {
    /// An empty parser; [`value`](Self::value) is `{}`.
    pub fn new() -> Self {
        Self::keeping(Fed::Raw(String::new()))
    }

    /// An empty parser that does not keep the text fed to it, only its length and a keyed
    /// 128-bit hash of it: a streamed call's arguments are then held once
    /// (as the shown value), not twice. [`raw`](Self::raw) is `None`;
    /// [`suffix_after_fed`](Self::suffix_after_fed) compares by the hash; every other method
    /// gives what it gives for [`new`](Self::new).
    pub fn without_raw() -> Self {
        Self::keeping(Fed::Digest(FedDigest::new()))
    }

    fn keeping(fed: Fed) -> Self {
        Self {
            fed,
            root: empty_object(),
            materialize: true,
            stack: Vec::new(),
            mode: Mode::Value,
            str_is_key: false,
            str_shown: false,
            sbuf: String::new(),
            esc: Esc::None,
            high: None,
            path: WinPath::default(),
            num: String::new(),
            num_state: NumState::Start,
            num_valid: 0,
            num_shown: 0,
            lit: 0,
            lit_pos: 0,
            change: None,
            changed: None,
            shape: 0,
            append_shape: None,
            exact: true,
        }
    }

    /// Feeds the next raw argument fragment.
    ///
    /// Fragments may be split anywhere: inside escapes, `\uXXXX`, surrogate pairs, numbers and
    /// literals (multi-byte characters are never split since the input is `&str`).
    pub fn push(&mut self, fragment: &str) {
        match &mut self.fed {
            Fed::Raw(raw) => raw.push_str(fragment),
            Fed::Digest(digest) => digest.push(fragment),
        }
        self.change = None;
        self.process(fragment);
        match self.flush() {
            // The common streaming case: more text for the same string, same pointer.
            Flushed::SameAppend => {}
            flushed => {
                self.changed = self.change.take().map(|path| {
                    let pointer = json_pointer(&path);
                    match self.changed.take() {
                        Some(last) if *last == *pointer => last,
                        _ => Arc::from(pointer),
                    }
                });
                self.append_shape = (flushed == Flushed::Append).then_some(self.shape);
            }
        }
    }

    /// Where the last [`push`](Self::push) changed [`value`](Self::value), as a JSON Pointer
    /// (RFC 6901, for [`Value::pointer`]): the longest path that every change it made lies
    /// under. `Some("/content")` when it appended to that string or put that member in place,
    /// `Some("")` when it changed members in several places, `None` when the shown value did
    /// not change (whitespace, an escape not finished yet, a key still being read).
    ///
    /// A UI that shows the arguments while they stream re-renders that part only, without
    /// diffing. O(1) for a push that appends to the same string as the last one; otherwise
    /// O(depth).
    pub fn changed(&self) -> Option<&Arc<str>> {
        self.changed.as_ref()
    }

    /// The best-effort current value of everything fed so far, as OpenClaw's
    /// `parseStreamingJson` would give for the buffer (see the [module docs](self)).
    ///
    /// Always a JSON object: `{}` while nothing (or a non-object) was fed. O(1).
    pub fn value(&self) -> &Value {
        &self.root
    }

    /// The raw text fed so far; `None` for a parser made by [`without_raw`](Self::without_raw).
    pub fn raw(&self) -> Option<&str> {
        match &self.fed {
            Fed::Raw(raw) => Some(raw),
            Fed::Digest(_) => None,
        }
    }

    /// The length in bytes of the text fed so far.
    pub fn fed_len(&self) -> usize {
        match &self.fed {
            Fed::Raw(raw) => raw.len(),
            Fed::Digest(digest) => digest.len,
        }
    }

    /// When the text fed so far is a prefix of `text`, the rest of `text` (empty when they
    /// are equal); otherwise `None`. This is how a complete arguments text that arrives at the
    /// end of a call (`Delta::ToolCallArgsDone`) is compared with what streamed.
    ///
    /// A parser that keeps the raw text compares the bytes. One made by
    /// [`without_raw`](Self::without_raw) compares the length exactly and then a keyed 128-bit
    /// SipHash-1-3 of `text`'s first [`fed_len`](Self::fed_len) bytes with the hash of what was
    /// fed (one pass over that prefix, nothing allocated). Only two different texts of the
    /// same length whose hashes agree are confused; the key is random per parser and never
    /// leaves the process, so that has a chance of about 2^-128 per comparison.
    pub fn suffix_after_fed<'t>(&self, text: &'t str) -> Option<&'t str> {
        match &self.fed {
            Fed::Raw(raw) => text.strip_prefix(raw.as_str()),
            Fed::Digest(digest) => {
                let (head, rest) = (text.get(..digest.len)?, text.get(digest.len..)?);
                digest.matches(head).then_some(rest)
            }
        }
    }

    /// Final parse of the complete buffer, with exactly the semantics of
    /// [`parse_streaming_json`] applied to the text fed so far: repair then strict parse, else
    /// the partial value; a non-object becomes `{}`.
    ///
    /// When the buffer [is complete](Self::is_complete) this is a clone of
    /// [`value`](Self::value): the streamed value of a complete buffer is by construction the
    /// strict parse of the repaired text (or the partial value where that strict parse fails,
    /// e.g. on a lone surrogate), so the buffer is not parsed again. When it is not complete,
    /// the repaired text never parses strictly (the property test
    /// `edited_json_is_complete_exactly_when_serde_json_accepts_it` checks that), so the result
    /// is the partial value too; a parser that keeps the raw text still tries the parse, one
    /// made by [`without_raw`](Self::without_raw) (which cannot) gives the partial value, and
    /// `without_raw_gives_what_new_gives` checks that both agree.
    pub fn finish(&self) -> Value {
        if self.is_complete() {
            return self.root.clone();
        }
        let Fed::Raw(raw) = &self.fed else {
            return self.root.clone();
        };
        if raw.trim().is_empty() {
            return empty_object();
        }
        match parse_with_repair(raw) {
            Some(value) => object_or_empty(value),
            None => self.root.clone(),
        }
    }

    /// [`finish`](Self::finish) by value: the same result, without copying the streamed
    /// value when the buffer is complete (the message assembler's end of a call).
    pub fn into_finished(self) -> Value {
        if self.is_complete() {
            return self.root;
        }
        self.finish()
    }

    /// Whether [`value`](Self::value) is what a strict JSON parse (`serde_json`) of the text fed
    /// so far gives, provided that text is valid JSON: `false` once the drive-path rule kept the
    /// backslash of a valid escape, a lone surrogate escape became U+FFFD, or a number outside
    /// the `f64` range became `null` (inputs a strict parse reads differently or rejects).
    /// With a complete buffer whose text a strict syntax check accepts, `true` means the value
    /// need not be parsed again. O(1).
    pub fn is_exact(&self) -> bool {
        self.exact
    }

    /// Whether the buffer is a syntactically complete JSON value (with the string repairs of
    /// [`repair_json`]) followed by nothing but whitespace.
    ///
    /// Use it to tell truncated arguments from complete ones: it is `false` for a prefix, for
    /// malformed input and for trailing text such as a second concatenated object. O(1).
    pub fn is_complete(&self) -> bool {
        match self.mode {
            Mode::Done => true,
            // A top-level number is complete at the end of the input.
            Mode::Num => self.stack.is_empty() && self.num_state.is_complete(),
            _ => false,
        }
    }

    // -----------------------------------------------------------------------------------------
    // Tokenizer
    // -----------------------------------------------------------------------------------------

    fn process(&mut self, fragment: &str) {
        let bytes = fragment.as_bytes();
        let mut i = 0usize;
        while let Some(&b) = bytes.get(i) {
            match self.mode {
                Mode::Str => i = self.string_step(fragment, i),
                Mode::Num => i = self.number_step(bytes, i),
                Mode::Error | Mode::Trailing => return,
                Mode::Done => {
                    if is_ws(b) {
                        i += 1;
                    } else {
                        self.mode = Mode::Trailing;
                        return;
                    }
                }
                _ => {
                    if self.structural(b) {
                        i += 1;
                    }
                }
            }
        }
    }

    /// Handles one byte outside strings and numbers. Returns whether it was consumed.
    fn structural(&mut self, b: u8) -> bool {
        if self.mode == Mode::Lit {
            let Some((word, value)) = LITERALS.get(self.lit) else {
                self.fail();
                return true;
            };
            if word.get(self.lit_pos) == Some(&b) {
                self.lit_pos += 1;
                if self.lit_pos == word.len() {
                    let value = value.clone();
                    self.complete(Some(value));
                }
            } else {
                self.fail();
            }
            return true;
        }
        if is_ws(b) {
            return true;
        }
        match self.mode {
            Mode::Value | Mode::ValueOrEnd => {
                if self.mode == Mode::ValueOrEnd && b == b']' {
                    self.close_container();
                    return true;
                }
                self.begin_value(b)
            }
            Mode::KeyOrEnd | Mode::Key => {
                if b == b'"' {
                    self.begin_string(true);
                } else if b == b'}' && self.mode == Mode::KeyOrEnd {
                    self.close_container();
                } else {
                    self.fail();
                }
                true
            }
            Mode::Colon => {
                if b == b':' {
                    self.mode = Mode::Value;
                } else {
                    self.fail();
                }
                true
            }
            Mode::CommaOrEnd => {
                let array = self.stack.last().is_some_and(|f| f.array);
                match b {
                    b',' => self.mode = if array { Mode::Value } else { Mode::Key },
                    b']' if array => self.close_container(),
                    b'}' if !array => self.close_container(),
                    _ => self.fail(),
                }
                true
            }
            _ => true,
        }
    }

    /// Starts a value at byte `b`. Returns whether `b` was consumed.
    fn begin_value(&mut self, b: u8) -> bool {
        if self.stack.is_empty() {
            self.materialize = b == b'{';
        }
        match b {
            b'{' | b'[' => {
                if self.stack.len() >= MAX_DEPTH {
                    self.fail();
                    return true;
                }
                let (slot, attached) = match self.stack.last() {
                    // The root object already exists (it is shown as `{}` from the start).
                    None => (Slot::Root, true),
                    Some(parent) => (parent.current_slot(), false),
                };
                let array = b == b'[';
                self.shape += 1;
                self.stack.push(Frame {
                    slot,
                    array,
                    attached,
                    next_index: 0,
                    key: None,
                    ops: Vec::new(),
                });
                self.mode = if array { Mode::ValueOrEnd } else { Mode::KeyOrEnd };
                true
            }
            b'"' => {
                self.begin_string(false);
                true
            }
            b'-' | b'0'..=b'9' => {
                self.mode = Mode::Num;
                self.num.clear();
                self.num_state = NumState::Start;
                self.num_valid = 0;
                self.num_shown = 0;
                false
            }
            b't' | b'f' | b'n' => {
                self.mode = Mode::Lit;
                self.lit = match b {
                    b't' => 0,
                    b'f' => 1,
                    _ => 2,
                };
                self.lit_pos = 1;
                true
            }
            _ => {
                self.fail();
                true
            }
        }
    }

    /// A value completed. `value` is `None` when it is already in the tree (or nothing is
    /// shown).
    fn complete(&mut self, value: Option<Value>) {
        self.shape += 1;
        let materialize = self.materialize;
        match self.stack.last_mut() {
            Some(top) => {
                let slot = top.take_slot();
                if let (Some(value), true) = (value, materialize) {
                    top.ops.push(Op::Put(slot, value));
                }
                self.mode = Mode::CommaOrEnd;
            }
            None => self.mode = Mode::Done,
        }
    }

    fn close_container(&mut self) {
        let Some(frame) = self.stack.pop() else {
            self.fail();
            return;
        };
        self.shape += 1;
        if !self.materialize {
            self.complete(None);
            return;
        }
        if frame.attached {
            if !frame.ops.is_empty() {
                // The frame's parent has had no changes since the frame was opened, so the
                // frame's own changes can be applied now without reordering anything.
                let node = match frame.slot {
                    Slot::Root => Some(&mut self.root),
                    _ => navigate(&mut self.root, self.stack.get(1..).unwrap_or_default())
                        .and_then(|parent| child_mut(parent, &frame.slot)),
                };
                if let Some(node) = node {
                    let parents = self.stack.get(1..).unwrap_or_default();
                    for op in frame.ops {
                        if op_changes(node, &op) {
                            match &frame.slot {
                                Slot::Root => note_op(&mut self.change, node, parents, &op),
                                slot => {
                                    // The frame's own slot leads from its parent to `node`.
                                    let mut below = vec![slot.clone()];
                                    let mut inner = None;
                                    note_op(&mut inner, node, &[], &op);
                                    below.extend(inner.unwrap_or_default());
                                    note_change(
                                        &mut self.change,
                                        parents,
                                        &below.iter().collect::<Vec<_>>(),
                                    );
                                }
                            }
                            apply_op(node, op);
                        }
                    }
                }
            }
            self.complete(None);
        } else {
            let mut value = frame.container();
            for op in frame.ops {
                apply_op(&mut value, op);
            }
            self.complete(Some(value));
        }
    }

    fn fail(&mut self) {
        if self.mode == Mode::Num {
            // Keep the valid prefix of the number (what was or would have been shown).
            self.put_partial_number();
        }
        self.mode = Mode::Error;
    }

    // -----------------------------------------------------------------------------------------
    // Strings
    // -----------------------------------------------------------------------------------------

    fn begin_string(&mut self, key: bool) {
        self.mode = Mode::Str;
        self.str_is_key = key;
        self.str_shown = false;
        self.sbuf.clear();
        self.esc = Esc::None;
        self.high = None;
        self.path = WinPath::default();
    }

    fn end_string(&mut self) {
        let text = std::mem::take(&mut self.sbuf);
        if self.str_is_key {
            if let Some(top) = self.stack.last_mut() {
                top.key = Some(text);
            }
            self.shape += 1;
            self.mode = Mode::Colon;
            return;
        }
        if !self.materialize {
            self.complete(None);
            return;
        }
        if self.str_shown {
            if let Some(top) = self.stack.last_mut() {
                let slot = top.take_slot();
                if !text.is_empty() {
                    top.ops.push(Op::Append(slot, text));
                }
            }
            self.mode = Mode::CommaOrEnd;
        } else {
            self.complete(Some(Value::String(text)));
        }
    }

    /// A surrogate escape without its other half: U+FFFD, which a strict parse rejects.
    fn lone_surrogate(&mut self) {
        self.exact = false;
        self.sbuf.push('\u{FFFD}');
    }

    fn code_unit(&mut self, unit: u16) {
        if let Some(high) = self.high.take() {
            if (0xDC00..=0xDFFF).contains(&unit) {
                let c = 0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                self.sbuf.push(char::from_u32(c).unwrap_or('\u{FFFD}'));
                return;
            }
            self.lone_surrogate();
        }
        if (0xD800..=0xDBFF).contains(&unit) {
            self.high = Some(unit);
        } else if let Some(c) = char::from_u32(u32::from(unit)) {
            self.sbuf.push(c);
        } else {
            // A lone low surrogate has no char.
            self.lone_surrogate();
        }
    }

    /// Processes string content from `start`; returns the index after what was consumed.
    ///
    /// The drive-path tracker is fed lazily: its prefix (see the [module docs](self)) equals
    /// the raw string text except for escape sequences, so raw bytes are handed to the tracker
    /// in batches (`from..`), flushed before every escape (a valid escape is fed as one
    /// [`VALID_ESCAPE`], a kept or invalid one as its backslash followed by ordinary content)
    /// and at the end of the fragment. Escape bytes left over from an earlier fragment are fed
    /// explicitly.
    fn string_step(&mut self, fragment: &str, start: usize) -> usize {
        let bytes = fragment.as_bytes();
        let mut i = start;
        // Start of the raw bytes not yet fed to the tracker.
        let mut from = start;
        // Whether the pending backslash (Backslash state) is in this fragment, at `i - 1`.
        let mut local = false;
        // Whether `from..i` may contain a `:` (only then can a drive-path candidate start).
        let mut colon = false;
        while let Some(&b) = bytes.get(i) {
            match self.esc {
                Esc::None => {
                    if self.high.is_some() {
                        if b == b'\\' {
                            self.esc = Esc::Backslash;
                            local = true;
                            i += 1;
                            continue;
                        }
                        self.high = None;
                        self.lone_surrogate();
                    }
                    let rest = bytes.get(i..).unwrap_or_default();
                    let n =
                        crate::raw::sse::find_any(rest, [b'"', b'\\', b':']).unwrap_or(rest.len());
                    if n > 0 || b == b':' {
                        let n = if rest.get(n) == Some(&b':') {
                            colon = true;
                            n + 1
                        } else {
                            n
                        };
                        self.sbuf.push_str(fragment.get(i..i + n).unwrap_or_default());
                        i += n;
                        continue;
                    }
                    i += 1;
                    if b == b'"' {
                        self.end_string();
                        return i;
                    }
                    self.esc = Esc::Backslash;
                    local = true;
                }
                Esc::Backslash => {
                    if self.high.is_some() && b != b'u' {
                        self.high = None;
                        self.lone_surrogate();
                    }
                    // The backslash, when it is in this fragment, sits at `i - 1`.
                    let backslash = i.saturating_sub(1);
                    let carried = !local;
                    local = false;
                    if carried {
                        self.feed_raw(bytes, from, i, &mut colon);
                        from = i;
                    }
                    match b {
                        b'u' => match bytes.get(i + 1..i + 5) {
                            // Fast path: all four digits are in this fragment.
                            Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => {
                                if !carried {
                                    self.feed_raw(bytes, from, backslash, &mut colon);
                                }
                                self.path.feed_valid_escape();
                                from = i + 5;
                                self.esc = Esc::None;
                                let unit = hex
                                    .iter()
                                    .fold(0u16, |acc, &d| (acc << 4) | u16::from(hex_value(d)));
                                self.code_unit(unit);
                                i += 5;
                            }
                            _ => {
                                // Digits straddle fragments: fed explicitly once resolved.
                                if !carried {
                                    self.feed_raw(bytes, from, backslash, &mut colon);
                                }
                                self.esc = Esc::Unicode { n: 0, digits: [0; 4] };
                                i += 1;
                            }
                        },
                        b'b' | b'f' | b'n' | b'r' | b't' => {
                            let path = if carried {
                                self.path.looks_like_path()
                            } else {
                                self.feed_raw(bytes, from, backslash, &mut colon);
                                from = backslash;
                                self.path.looks_like_path()
                            };
                            self.esc = Esc::None;
                            if path {
                                // Literal backslash (a separator); the letter is then ordinary
                                // content.
                                self.exact = false;
                                if carried {
                                    self.path.feed(b"\\");
                                }
                                self.sbuf.push('\\');
                            } else {
                                self.path.feed_valid_escape();
                                from = i + 1;
                                self.sbuf.push(match b {
                                    b'b' => '\u{8}',
                                    b'f' => '\u{c}',
                                    b'n' => '\n',
                                    b'r' => '\r',
                                    _ => '\t',
                                });
                                i += 1;
                            }
                        }
                        b'\\' | b'"' | b'/' => {
                            if !carried {
                                self.feed_raw(bytes, from, backslash, &mut colon);
                            }
                            self.path.feed_valid_escape();
                            from = i + 1;
                            self.sbuf.push(char::from(b));
                            self.esc = Esc::None;
                            i += 1;
                        }
                        _ => {
                            // Invalid escape: a literal backslash; reprocess the character.
                            if carried {
                                self.path.feed(b"\\");
                            }
                            self.sbuf.push('\\');
                            self.esc = Esc::None;
                        }
                    }
                }
                Esc::Unicode { n, mut digits } => {
                    if b.is_ascii_hexdigit() {
                        if let Some(d) = digits.get_mut(n) {
                            *d = b;
                        }
                        i += 1;
                        if n + 1 < 4 {
                            self.esc = Esc::Unicode { n: n + 1, digits };
                            continue;
                        }
                        self.esc = Esc::None;
                        self.path.feed_valid_escape();
                        from = i;
                        let unit = digits
                            .iter()
                            .fold(0u16, |acc, &d| (acc << 4) | u16::from(hex_value(d)));
                        self.code_unit(unit);
                    } else {
                        // `\u` without four hex digits: a literal backslash, then `u` and the
                        // digits as ordinary content; reprocess `b`.
                        if self.high.take().is_some() {
                            self.lone_surrogate();
                        }
                        self.sbuf.push_str("\\u");
                        self.path.feed(b"\\u");
                        let seen = digits.get(..n).unwrap_or_default();
                        for &d in seen {
                            self.sbuf.push(char::from(d));
                        }
                        self.path.feed(seen);
                        from = i;
                        self.esc = Esc::None;
                    }
                }
            }
        }
        // End of the fragment inside the string: feed what is resolved.
        match self.esc {
            Esc::None => self.feed_raw(bytes, from, bytes.len(), &mut colon),
            // A backslash in this fragment is its last byte; it is fed once resolved.
            Esc::Backslash if local => {
                self.feed_raw(bytes, from, bytes.len().saturating_sub(1), &mut colon);
            }
            Esc::Backslash => self.feed_raw(bytes, from, bytes.len(), &mut colon),
            // The bytes before the escape were fed when it started.
            Esc::Unicode { .. } => {}
        }
        i
    }

    /// Feeds `bytes[from..to]` to the drive-path tracker; `colon` says whether they may hold a
    /// `:` and is cleared.
    fn feed_raw(&mut self, bytes: &[u8], from: usize, to: usize, colon: &mut bool) {
        if from < to {
            self.path.feed_hinted(bytes.get(from..to).unwrap_or_default(), *colon);
        }
        *colon = false;
    }

    // -----------------------------------------------------------------------------------------
    // Numbers
    // -----------------------------------------------------------------------------------------

    /// Processes number characters from `i`; returns the index after what was consumed.
    fn number_step(&mut self, bytes: &[u8], mut i: usize) -> usize {
        while let Some(&b) = bytes.get(i) {
            use NumState::*;
            let next = match (self.num_state, b) {
                (Start, b'-') => Some(Minus),
                (Start | Minus, b'0') => Some(Zero),
                (Start | Minus, b'1'..=b'9') => Some(Int),
                (Int, b'0'..=b'9') => Some(Int),
                (Zero | Int, b'.') => Some(Dot),
                (Dot | Frac, b'0'..=b'9') => Some(Frac),
                (Zero | Int | Frac, b'e' | b'E') => Some(Exp),
                (Exp, b'+' | b'-') => Some(ExpSign),
                (Exp | ExpSign | ExpDigits, b'0'..=b'9') => Some(ExpDigits),
                _ => None,
            };
            match next {
                Some(state) => {
                    self.num.push(char::from(b));
                    self.num_state = state;
                    if state.is_complete() {
                        self.num_valid = self.num.len();
                    }
                    i += 1;
                }
                None => {
                    if self.num_state.is_complete() {
                        let value = parse_number(&self.num).map_or_else(
                            || {
                                self.exact = false;
                                Value::Null
                            },
                            Value::Number,
                        );
                        self.complete(Some(value));
                    } else {
                        self.fail();
                    }
                    // `b` is handled by the next mode (or ignored after an error).
                    return i;
                }
            }
        }
        i
    }

    /// Shows the valid prefix of the number being parsed (if any and if it changed).
    fn put_partial_number(&mut self) {
        if !self.materialize || self.num_valid == 0 || self.num_valid == self.num_shown {
            return;
        }
        let Some(top) = self.stack.last_mut() else { return };
        // A valid prefix that does not parse is outside the f64 range: `null`, as it will be
        // once complete (not the stale shorter prefix, which would depend on the fragmentation).
        let value = self
            .num
            .get(..self.num_valid)
            .and_then(parse_number)
            .map_or(Value::Null, Value::Number);
        top.ops.push(Op::Put(top.current_slot(), value));
        self.num_shown = self.num_valid;
    }

    // -----------------------------------------------------------------------------------------
    // Flush: bring the shown tree up to date
    // -----------------------------------------------------------------------------------------

    /// Brings the shown tree up to date, noting what changed in `change`.
    fn flush(&mut self) -> Flushed {
        if !self.materialize {
            return Flushed::Other;
        }
        // The scalar being parsed, if it has something to show.
        let mut append_current = false;
        match self.mode {
            Mode::Str if !self.str_is_key => {
                if let Some(top) = self.stack.last_mut() {
                    if !self.str_shown {
                        let text = std::mem::take(&mut self.sbuf);
                        top.ops.push(Op::Put(top.current_slot(), Value::String(text)));
                        self.str_shown = true;
                    } else if !self.sbuf.is_empty() {
                        // The string is already shown, so its container is attached and has
                        // no pending changes: append in place below.
                        append_current = true;
                    }
                }
            }
            // Too long to re-parse after every fragment: shown only once complete.
            Mode::Num if self.num_valid > MAX_PARTIAL_NUMBER && self.num_shown > 0 => {
                if let Some(top) = self.stack.last_mut() {
                    top.ops.push(Op::Remove(top.current_slot()));
                }
                self.num_shown = 0;
            }
            Mode::Num if self.num_valid > MAX_PARTIAL_NUMBER => {}
            Mode::Num => self.put_partial_number(),
            _ => {}
        }

        // Attached frames form a prefix of the stack; build the others off-tree, innermost
        // first, and attach the chain under the deepest attached frame.
        let Some(deepest) = self.stack.iter().rposition(|f| f.attached) else {
            return Flushed::Other;
        };
        let mut carry: Option<(Slot, Value)> = None;
        for frame in self.stack.iter_mut().skip(deepest + 1).rev() {
            let mut value = frame.container();
            for op in frame.ops.drain(..) {
                apply_op(&mut value, op);
            }
            if let Some((slot, child)) = carry.take() {
                apply_op(&mut value, Op::Put(slot, child));
            }
            carry = Some((frame.slot.clone(), value));
            frame.attached = true;
        }
        let has_ops = self.stack.get(deepest).is_some_and(|f| !f.ops.is_empty());
        if !has_ops && carry.is_none() && !append_current {
            return Flushed::Other;
        }
        // Appending to a string shown by an earlier push means this push stayed inside it,
        // so it changed nothing else (no ops, no new containers, nothing closed).
        let append_only = append_current;
        // Only more text for that string, as in the last push: same place.
        let same_append = append_only && self.append_shape == Some(self.shape);
        let path = self.stack.get(1..=deepest).unwrap_or_default();
        let Some(node) = navigate(&mut self.root, path) else {
            return Flushed::Other;
        };
        let mut ops =
            self.stack.get_mut(deepest).map(|f| std::mem::take(&mut f.ops)).unwrap_or_default();
        let path = self.stack.get(1..=deepest).unwrap_or_default();
        for op in ops.drain(..) {
            if op_changes(node, &op) {
                note_op(&mut self.change, node, path, &op);
                apply_op(node, op);
            }
        }
        if let Some((slot, child)) = carry {
            let op = Op::Put(slot, child);
            if op_changes(node, &op) {
                note_op(&mut self.change, node, path, &op);
                apply_op(node, op);
            }
        }
        if append_current {
            let frame = self.stack.get(deepest);
            let member = match (node, frame) {
                (Value::Object(map), Some(frame)) => frame.key.as_deref().and_then(|k| {
                    // The string streaming is nearly always the member put last: reached
                    // without hashing its key per fragment (a repeated key sits earlier).
                    if map.keys().next_back().is_some_and(|last| last == k) {
                        map.values_mut().next_back()
                    } else {
                        map.get_mut(k)
                    }
                }),
                (Value::Array(items), Some(frame)) => items.get_mut(frame.next_index),
                _ => None,
            };
            if let Some(Value::String(shown)) = member {
                shown.push_str(&self.sbuf);
                if !same_append && let Some(frame) = frame {
                    note_change(&mut self.change, path, &[&frame.current_slot()]);
                }
            }
            self.sbuf.clear();
        }
        // Give the (now empty) list its allocation back.
        if let Some(frame) = self.stack.get_mut(deepest) {
            frame.ops = ops;
        }
        match (same_append, append_only) {
            (true, _) => Flushed::SameAppend,
            (false, true) => Flushed::Append,
            _ => Flushed::Other,
        }
    }
}

/// What [`PartialJson::flush`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flushed {
    /// Appended to the string being parsed, which the last push also did (and only that).
    SameAppend,
    /// Appended to the string being parsed and nothing else.
    Append,
    /// Anything else (noted in `change`, or nothing).
    Other,
}

fn hex_value(d: u8) -> u8 {
    match d {
        b'0'..=b'9' => d - b'0',
        b'a'..=b'f' => d - b'a' + 10,
        b'A'..=b'F' => d - b'A' + 10,
        _ => 0,
    }
}

#[cfg(test)]
mod tests;
