//! The Windows drive-path rule (see the module docs of `partial_json`): which single
//! backslashes stay literal, and the byte classes the parsers scan with.

use super::*;

pub(super) const C_PLAIN: u8 = 0;
pub(super) const C_SEP: u8 = 1;
pub(super) const C_BREAK: u8 = 2;
pub(super) const C_COLON: u8 = 3;
pub(super) const C_MARK: u8 = 4;
pub(super) const C_MARK_BREAK: u8 = 5;

pub(super) const DRIVE_NONE: u8 = 0;
pub(super) const DRIVE_AFTER_COLON: u8 = 1;
pub(super) const DRIVE_IN_SEGMENT: u8 = 2;

/// Character class for the drive-path rule.
#[inline]
pub(super) const fn class(b: u8) -> u8 {
    match b {
        b'\\' => C_SEP,
        // A forward slash is not escaped in JSON, so a path written with `/` is not evidence of
        // a model that writes single backslashes: it ends the candidate.
        b'/' | b'"' | b'*' | b'?' | b'\r' | b'\n' => C_BREAK,
        b':' => C_COLON,
        b'(' | b')' | b'=' | b';' | b'{' | b'}' | b'\'' | b',' => C_MARK,
        b'<' | b'>' | b'|' => C_MARK_BREAK,
        _ => C_PLAIN,
    }
}

/// Tracks, one byte at a time, whether the "string value prefix" of OpenClaw's `repairJson`
/// currently matches its Windows-path test:
///
/// ```text
/// tail = prefix.slice(-160)
/// !/[()=;{}',<>|]/.test(tail) && /(?:^|[^A-Za-z0-9])[A-Za-z]:(?:[\\/][^"\\/:*?<>|\r\n]*)*$/.test(tail)
/// ```
///
/// The prefix is the one of the [module docs](super#the-drive-path-rule): raw text, with valid
/// escapes fed as one [`VALID_ESCAPE`] and kept backslashes as `\`. Because the expression can
/// only match with its drive letter at the last `:` of the tail, the state is a few integers
/// and the test is O(1).
#[derive(Debug, Clone, Default)]
pub(super) struct WinPath {
    /// UTF-16 length of the prefix.
    pub(super) len: u64,
    /// 1 + index of the last code marker, 0 if none.
    pub(super) marker_at: u64,
    pub(super) drive: u8,
    /// Index of the drive letter of the current candidate.
    pub(super) letter_at: u64,
    /// Whether the drive letter is preceded by a non-alphanumeric character or the start.
    pub(super) letter_ok: bool,
    /// Last two bytes of the prefix (0 = none).
    pub(super) p1: u8,
    pub(super) p2: u8,
}

impl WinPath {
    /// Feeds prefix bytes one at a time (the reference for [`Self::feed`]).
    #[cfg(test)]
    pub(super) fn feed_bytewise(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.len += u64::from((b & 0xC0) != 0x80) + u64::from(b >= 0xF0);
            match class(b) {
                C_PLAIN => {
                    if self.drive == DRIVE_AFTER_COLON {
                        self.drive = DRIVE_NONE;
                    }
                }
                C_SEP => {
                    if self.drive != DRIVE_NONE {
                        self.drive = DRIVE_IN_SEGMENT;
                    }
                }
                C_BREAK => self.drive = DRIVE_NONE,
                C_COLON => {
                    if self.p1.is_ascii_alphabetic() {
                        self.drive = DRIVE_AFTER_COLON;
                        self.letter_at = self.len.saturating_sub(2);
                        self.letter_ok = !self.p2.is_ascii_alphanumeric();
                    } else {
                        self.drive = DRIVE_NONE;
                    }
                }
                C_MARK => {
                    self.marker_at = self.len;
                    if self.drive == DRIVE_AFTER_COLON {
                        self.drive = DRIVE_NONE;
                    }
                }
                _ => {
                    self.marker_at = self.len;
                    self.drive = DRIVE_NONE;
                }
            }
            self.p2 = self.p1;
            self.p1 = b;
        }
    }

    /// Feeds a run of prefix bytes. Equivalent to feeding them one at a time, but only the
    /// last code marker and the last drive-resetting character of the run are looked at.
    #[inline]
    pub(super) fn feed(&mut self, run: &[u8]) {
        self.feed_hinted(run, true);
    }

    /// [`Self::feed`], told whether `run` may contain a `:`. Without one, no drive-path
    /// candidate can start, so when there is none already the drive state needs no scan.
    #[inline]
    pub(super) fn feed_hinted(&mut self, run: &[u8], may_have_colon: bool) {
        let Some((&last, head)) = run.split_last() else { return };
        self.len += utf16_len(run);
        // Positions are counted back from the end: the part after a position found by the
        // backward scan is short, the part before it is most of the run.
        let at = |k: usize| self.len - utf16_len(run.get(k..).unwrap_or_default());
        // One backward pass finds the last code marker and the last drive-resetting character.
        let (mut marker, mut reset) = (None, None);
        let mut want =
            if may_have_colon || self.drive != DRIVE_NONE { F_MARKER | F_RESET } else { F_MARKER };
        let mut end = run.len();
        while want != 0 {
            let Some(k) =
                run.get(..end).and_then(|r| r.iter().rposition(|&b| flags(b) & want != 0))
            else {
                break;
            };
            let f = flags(run.get(k).copied().unwrap_or(0)) & want;
            if f & F_MARKER != 0 {
                marker = Some(k);
            }
            if f & F_RESET != 0 {
                reset = Some(k);
            }
            want &= !f;
            end = k;
        }
        if let Some(m) = marker {
            self.marker_at = at(m + 1);
        }
        match reset {
            None => {
                if self.drive == DRIVE_AFTER_COLON {
                    let first = run.first().copied().unwrap_or(last);
                    self.drive = if class(first) == C_SEP { DRIVE_IN_SEGMENT } else { DRIVE_NONE };
                }
            }
            Some(k) => {
                self.drive = DRIVE_NONE;
                if run.get(k) == Some(&b':') {
                    let (p1, p2) = match k {
                        0 => (self.p1, self.p2),
                        1 => (run.first().copied().unwrap_or(0), self.p1),
                        _ => (
                            run.get(k - 1).copied().unwrap_or(0),
                            run.get(k - 2).copied().unwrap_or(0),
                        ),
                    };
                    if p1.is_ascii_alphabetic() {
                        self.drive = match run.get(k + 1) {
                            None => DRIVE_AFTER_COLON,
                            Some(&next) if class(next) == C_SEP => DRIVE_IN_SEGMENT,
                            Some(_) => DRIVE_NONE,
                        };
                        self.letter_at = at(k).saturating_sub(1);
                        self.letter_ok = !p2.is_ascii_alphanumeric();
                    }
                }
            }
        }
        self.p2 = head.last().copied().unwrap_or(self.p1);
        self.p1 = last;
    }

    /// [`Self::feed`] of [`VALID_ESCAPE`], the one character that ends any candidate and
    /// is no code marker: done per escape, so without the scans.
    #[inline]
    pub(super) fn feed_valid_escape(&mut self) {
        self.len += 1;
        self.drive = DRIVE_NONE;
        self.p2 = self.p1;
        self.p1 = VALID_ESCAPE;
    }

    #[inline]
    pub(super) fn looks_like_path(&self) -> bool {
        let tail_start = self.len.saturating_sub(WINDOWS_TAIL);
        self.marker_at <= tail_start
            && self.drive != DRIVE_NONE
            && self.letter_at >= tail_start
            && self.letter_ok
    }
}

/// UTF-16 length of UTF-8 bytes.
#[inline]
pub(super) fn utf16_len(bytes: &[u8]) -> u64 {
    const HI: u64 = 0x8080_8080_8080_8080;
    // Bytes minus continuation bytes (10xxxxxx) plus 4-byte leads (11110xxx), eight at a time.
    let mut units = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else { break };
        let w = u64::from_le_bytes(word);
        if w & HI == 0 {
            continue;
        }
        let continuation = w & !(w << 1) & HI;
        let four_byte_lead = w & (w << 1) & (w << 2) & (w << 3) & HI;
        units =
            units - u64::from(continuation.count_ones()) + u64::from(four_byte_lead.count_ones());
    }
    for &b in chunks.remainder() {
        units = units - u64::from((b & 0xC0) == 0x80) + u64::from(b >= 0xF0);
    }
    units
}

/// What a valid escape sequence that stays decoded (`\\ \" \/ \uXXXX`, or a control escape
/// the rule did not keep) counts as for the drive-path rule: one character that ends any
/// candidate. A path written with `\\` separators is correctly escaped JSON and never repaired.
pub(super) const VALID_ESCAPE: u8 = b'"';

/// Flag: a code marker (`( ) = ; { } ' , < > |`).
pub(super) const F_MARKER: u8 = 1;
/// Flag: ends any drive-path match (`" * ? \r \n : < > |`).
pub(super) const F_RESET: u8 = 2;

#[allow(
    clippy::indexing_slicing,
    reason = "evaluated at compile time only, and b < 256 is the table length"
)]
pub(super) const fn flag_table() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut b = 0usize;
    while b < 256 {
        let mut f = 0;
        let c = class(b as u8);
        if c == C_MARK || c == C_MARK_BREAK {
            f |= F_MARKER;
        }
        if c == C_BREAK || c == C_COLON || c == C_MARK_BREAK {
            f |= F_RESET;
        }
        table[b] = f;
        b += 1;
    }
    table
}

pub(super) static FLAGS: [u8; 256] = flag_table();

#[inline]
pub(super) fn flags(b: u8) -> u8 {
    FLAGS.get(usize::from(b)).copied().unwrap_or(0)
}

#[inline]
pub(super) fn is_control_escape(b: u8) -> bool {
    matches!(b, b'b' | b'f' | b'n' | b'r' | b't')
}

#[inline]
pub(super) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}
