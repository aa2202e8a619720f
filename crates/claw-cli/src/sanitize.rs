//! Neutralising untrusted text before it reaches the terminal, and keeping
//! secrets out of tool output.
//!
//! Model text, file contents and tool results may carry escape sequences (OSC
//! 52 clipboard writes, title changes, screen clears) or bidi overrides. The
//! mapping is per character, so a sequence split across stream deltas is
//! neutralised just the same.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal raw.
fn is_unsafe(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        // C0, DEL, C1 (8-bit CSI/OSC in some terminals).
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        // Bidi embeddings, overrides and isolates (text that reads differently than it runs).
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

/// `text` with every control character made visible: C0 as its control
/// picture (ESC becomes `␛`), DEL as `␡`, C1 and bidi controls as U+FFFD.
/// Carriage returns are dropped (they would let text overwrite a line).
pub(crate) fn terminal(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\r' => {}
            c if !is_unsafe(c) => out.push(c),
            '\u{7f}' => out.push('\u{2421}'),
            c @ '\u{0}'..='\u{1f}' => {
                out.push(char::from_u32(0x2400 + u32::from(c)).unwrap_or('\u{fffd}'));
            }
            _ => out.push('\u{fffd}'),
        }
    }
    Cow::Owned(out)
}

/// A serialised JSON line with the characters serde_json leaves raw but a
/// terminal may act on (DEL, C1, bidi controls) written as `\uXXXX` escapes.
/// They can only occur inside JSON strings, so the line stays the same JSON.
pub(crate) fn json_line(line: String) -> String {
    if !line.chars().any(|c| c > '\u{7e}' && is_unsafe(c)) {
        return line;
    }
    let mut out = String::with_capacity(line.len() + 16);
    for c in line.chars() {
        if c > '\u{7e}' && is_unsafe(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// One line of note text: control characters (newlines included) become spaces.
pub(crate) fn one_line(text: &str) -> String {
    text.chars().map(|c| if is_unsafe(c) || c == '\n' || c == '\t' { ' ' } else { c }).collect()
}

/// Values shorter than this are not treated as secrets (too likely to match
/// ordinary text).
const MIN_SECRET: usize = 8;

/// Replaces every occurrence of a secret (API key values of the environment)
/// with `[redacted]`.
pub(crate) fn redact(text: String, secrets: &[String]) -> String {
    let mut text = text;
    for secret in secrets.iter().filter(|s| s.len() >= MIN_SECRET) {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), "[redacted]");
        }
    }
    text
}

/// The first `limit` bytes of `bytes` as text, with every secret that starts
/// before the limit replaced by `[redacted]` whole, even when it runs past the
/// limit (`bytes` holds enough beyond it): a cut never leaves a secret's first
/// bytes behind.
pub(crate) fn redact_cut(bytes: &[u8], limit: usize, secrets: &[String]) -> String {
    let secrets: Vec<&[u8]> =
        secrets.iter().filter(|s| s.len() >= MIN_SECRET).map(String::as_bytes).collect();
    let end = limit.min(bytes.len());
    let mut out = Vec::with_capacity(end);
    let mut i = 0;
    while i < end {
        let rest = bytes.get(i..).unwrap_or_default();
        if let Some(secret) = secrets.iter().find(|s| rest.starts_with(s)) {
            out.extend_from_slice(b"[redacted]");
            i += secret.len();
        } else {
            out.extend_from_slice(rest.get(..1).unwrap_or_default());
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_controls_become_visible() {
        assert_eq!(terminal("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(terminal("\x1b]52;c;aGk=\x07"), "\u{241b}]52;c;aGk=\u{2407}");
        assert_eq!(terminal("a\r\nb"), "a\nb");
        assert_eq!(terminal("\u{9b}2J\u{202e}x"), "\u{fffd}2J\u{fffd}x");
    }

    #[test]
    fn json_lines_escape_c1_and_stay_valid_json() {
        let line = serde_json::json!({"t": "\u{9b}31m\u{7f}\u{2066}"}).to_string();
        let safe = json_line(line);
        assert!(!safe.chars().any(is_unsafe), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap_or_default();
        assert_eq!(back.get("t").and_then(|t| t.as_str()), Some("\u{9b}31m\u{7f}\u{2066}"));
    }

    #[test]
    fn notes_are_one_line_and_secrets_are_redacted() {
        assert_eq!(one_line("a\r\nb\x1b[2Jc"), "a  b [2Jc");
        let secrets = vec!["sk-secret-123456".to_owned(), "short".to_owned()];
        assert_eq!(redact("key=sk-secret-123456 short".into(), &secrets), "key=[redacted] short");
        // Cut inside the key: redacted whole, none of its bytes left.
        assert_eq!(redact_cut(b"ab sk-secret-123456 cd", 6, &secrets), "ab [redacted]");
        assert_eq!(redact_cut(b"ab sk-secret-123456 cd", 2, &secrets), "ab");
    }
}
