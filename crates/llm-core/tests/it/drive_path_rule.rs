//! The drive-path rule of the `partial_json` module docs, checked against a reference written
//! from that text alone (quadratic and simple, sharing no code with the library).
//!
//! Generated string literals mix everything the rule looks at: drive letters and colons, single
//! backslashes (invalid escapes and control escapes the rule keeps), correctly escaped `\\`,
//! the characters that end a segment (`/ * ? < > |`, raw CR and LF), code markers, other
//! escapes (`\"`, `\/`, `\uXXXX`, surrogate pairs, lone halves, `\u` without four digits), raw
//! control characters, astral characters (two UTF-16 units) and long runs that move the drive
//! letter in and out of the 160-unit window. The decoded string must equal the reference, through
//! [`parse_streaming_json`], through [`repair_json`] and `serde_json`, and through
//! [`PartialJson`] fed in random fragments.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use llm_core::raw::partial_json::{PartialJson, parse_streaming_json, repair_json};
use proptest::prelude::*;
use serde_json::Value;

/// One character of the rule's prefix.
#[derive(Clone, Copy, PartialEq)]
enum P {
    /// A raw character, or a backslash that stayed literal.
    Char(char),
    /// Any other escape sequence: one character that is part of no path.
    Escape,
}

impl P {
    fn units(self) -> usize {
        match self {
            P::Char(c) => c.len_utf16(),
            P::Escape => 1,
        }
    }
}

fn is_marker(p: P) -> bool {
    matches!(p, P::Char('(' | ')' | '=' | ';' | '{' | '}' | '\'' | ',' | '<' | '>' | '|'))
}

/// A character allowed inside a path segment.
fn in_segment(p: P) -> bool {
    match p {
        P::Char(c) => {
            !matches!(c, '\\' | '/' | '"' | ':' | '*' | '?' | '<' | '>' | '|' | '\r' | '\n')
        }
        P::Escape => false,
    }
}

/// Whether `prefix` ends in a drive path written with single backslashes (module docs).
fn ends_in_drive_path(prefix: &[P]) -> bool {
    // The segments: from the end, back over segment characters and separators.
    let mut j = prefix.len();
    while j > 0 && (in_segment(prefix[j - 1]) || prefix[j - 1] == P::Char('\\')) {
        j -= 1;
    }
    // Segments start with a separator.
    if j < prefix.len() && prefix[j] != P::Char('\\') {
        return false;
    }
    if j < 2 || prefix[j - 1] != P::Char(':') {
        return false;
    }
    let letter = j - 2;
    let P::Char(l) = prefix[letter] else { return false };
    if !l.is_ascii_alphabetic() {
        return false;
    }
    if letter > 0 && matches!(prefix[letter - 1], P::Char(c) if c.is_ascii_alphanumeric()) {
        return false;
    }
    // The last 160 UTF-16 units: the letter inside, no marker.
    let total: usize = prefix.iter().map(|p| p.units()).sum();
    let tail_start = total.saturating_sub(160);
    let mut at = 0usize;
    for (k, &p) in prefix.iter().enumerate() {
        if k == letter && at < tail_start {
            return false;
        }
        if at >= tail_start && is_marker(p) {
            return false;
        }
        at += p.units();
    }
    true
}

/// Decodes the inside of a string literal (no unescaped `"`) by the module docs; also says
/// whether it held a lone surrogate escape (which serde_json refuses).
fn reference_decode_lone(content: &str) -> (String, bool) {
    let chars: Vec<char> = content.chars().collect();
    let mut out = String::new();
    let mut prefix: Vec<P> = Vec::new();
    let mut high: Option<u32> = None;
    let mut lone = false;
    let mut i = 0;
    // A pending high surrogate not followed by a low one is U+FFFD.
    let settle = |high: &mut Option<u32>, out: &mut String, lone: &mut bool| {
        if high.take().is_some() {
            out.push('\u{FFFD}');
            *lone = true;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' {
            settle(&mut high, &mut out, &mut lone);
            out.push(c);
            prefix.push(P::Char(c));
            i += 1;
            continue;
        }
        let next = chars.get(i + 1).copied();
        let hex: Option<u32> = (next == Some('u'))
            .then(|| chars.get(i + 2..i + 6))
            .flatten()
            .filter(|h| h.iter().all(char::is_ascii_hexdigit))
            .map(|h| u32::from_str_radix(&h.iter().collect::<String>(), 16).unwrap());
        if let Some(unit) = hex {
            prefix.push(P::Escape);
            i += 6;
            match (high.take(), unit) {
                (Some(h), 0xDC00..=0xDFFF) => {
                    out.push(
                        char::from_u32(0x10000 + ((h - 0xD800) << 10) + (unit - 0xDC00)).unwrap(),
                    );
                }
                (h, _) => {
                    if h.is_some() {
                        out.push('\u{FFFD}');
                        lone = true;
                    }
                    match unit {
                        0xD800..=0xDBFF => high = Some(unit),
                        0xDC00..=0xDFFF => {
                            out.push('\u{FFFD}');
                            lone = true;
                        }
                        _ => out.push(char::from_u32(unit).unwrap()),
                    }
                }
            }
            continue;
        }
        settle(&mut high, &mut out, &mut lone);
        let control = match next {
            Some('b') => Some('\u{8}'),
            Some('f') => Some('\u{c}'),
            Some('n') => Some('\n'),
            Some('r') => Some('\r'),
            Some('t') => Some('\t'),
            _ => None,
        };
        match (next, control) {
            (_, Some(decoded)) if !ends_in_drive_path(&prefix) => {
                out.push(decoded);
                prefix.push(P::Escape);
                i += 2;
            }
            (Some(e @ ('"' | '\\' | '/')), _) => {
                out.push(e);
                prefix.push(P::Escape);
                i += 2;
            }
            // A kept control escape, an invalid escape, `\u` without four digits: a literal
            // backslash, and what follows is ordinary text.
            _ => {
                out.push('\\');
                prefix.push(P::Char('\\'));
                i += 1;
            }
        }
    }
    settle(&mut high, &mut out, &mut lone);
    (out, lone)
}

fn reference_decode(content: &str) -> String {
    reference_decode_lone(content).0
}

/// Pieces of string-literal content (as written inside the quotes).
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        // Drive letters, colons, letters and digits around them.
        4 => prop::sample::select(vec!["C:", "d:", "Z:", "x", "Q", "9", "_", " ", ":", "ab", "é"])
            .prop_map(str::to_owned),
        // Single backslashes: kept control escapes or invalid escapes.
        4 => prop::sample::select(vec![r"\n", r"\t", r"\b", r"\f", r"\r", r"\d", r"\U", r"\ ", r"\x"])
            .prop_map(str::to_owned),
        // Correctly escaped backslashes and other valid escapes.
        2 => prop::sample::select(vec![r"\\", r"\/", r#"\""#, r"\u0041", r"\u005c", r"\u003a"])
            .prop_map(str::to_owned),
        1 => prop::sample::select(vec![r"\ud83d\ude00", r"\ud83d", r"\ude00", r"\u12", r"\uzz"])
            .prop_map(str::to_owned),
        // Characters that end a segment (raw CR and LF too), and code markers.
        2 => prop::sample::select(vec!["/", "*", "?", "<", ">", "|", "\r", "\n"]).prop_map(str::to_owned),
        1 => prop::sample::select(vec!["(", ")", "=", ";", "{", "}", "'", ","]).prop_map(str::to_owned),
        // Other raw control characters, astral characters.
        1 => prop::sample::select(vec!["\t", "\u{1}", "\u{1F600}", "\u{10FFFF}"]).prop_map(str::to_owned),
        // Long runs: the 160-unit window.
        1 => (1usize..200).prop_map(|n| "a".repeat(n)),
        1 => (1usize..100).prop_map(|n| "\u{1F600}".repeat(n)),
    ]
}

fn content() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..24).prop_map(|parts| parts.concat())
}

/// Cuts `text` at the given byte positions (moved forward to character boundaries).
fn fragments(text: &str, cuts: &[usize]) -> Vec<String> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|&c| {
            let mut at = c % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at += 1;
            }
            at
        })
        .collect();
    points.push(0);
    points.push(text.len());
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|w| text[w[0]..w[1]].to_owned()).collect()
}

/// The arguments object a string literal is tested in.
fn wrap(content: &str) -> String {
    format!(r#"{{"k":"{content}","after":1}}"#)
}

fn check(content: &str, cuts: &[usize]) -> Result<(), TestCaseError> {
    let text = wrap(content);
    let (expected, lone) = reference_decode_lone(content);
    let shown = |v: &Value| v.get("k").and_then(Value::as_str).map(str::to_owned);

    prop_assert_eq!(shown(&parse_streaming_json(&text)), Some(expected.clone()), "{}", text);
    let repaired = repair_json(&text);
    // The repaired text is valid JSON, which serde_json reads as the reference, unless it
    // holds a lone surrogate escape (which serde_json refuses).
    match serde_json::from_str::<Value>(&repaired) {
        Ok(value) => {
            prop_assert_eq!(shown(&value), Some(expected.clone()), "repaired {}", repaired)
        }
        Err(e) => prop_assert!(lone, "repaired {} does not parse: {}", repaired, e),
    }
    let mut parser = PartialJson::new();
    for fragment in fragments(&text, cuts) {
        parser.push(&fragment);
        if let Some(partial) = shown(parser.value()) {
            prop_assert!(
                expected.starts_with(&partial),
                "{:?} shown for {:?}",
                partial,
                parser.raw()
            );
        }
    }
    prop_assert!(parser.is_complete(), "{}", text);
    prop_assert_eq!(shown(&parser.finish()), Some(expected), "{}", text);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn decoded_strings_follow_the_documented_rule(
        content in content(),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        check(&content, &cuts)?;
    }
}

#[test]
fn reference_agrees_with_the_documented_examples() {
    assert_eq!(reference_decode(r"C:\new\file"), r"C:\new\file");
    assert_eq!(reference_decode(r"Path: C:\\Users\\ola\nNext"), "Path: C:\\Users\\ola\nNext");
    assert_eq!(reference_decode(r"A:\nB"), r"A:\nB");
    assert_eq!(reference_decode(r"steps:\nnext"), "steps:\nnext");
    assert_eq!(reference_decode(r"E:/tmp\n"), "E:/tmp\n");
    assert_eq!(reference_decode(r"f(C:\new)"), "f(C:\new)");
    assert_eq!(reference_decode(r"\ud83d\ude00\ud83d"), "\u{1F600}\u{FFFD}");
}

/// Every split of a few inputs built around the rule's edges.
#[test]
fn edge_inputs_at_every_split() {
    let long = "a".repeat(157);
    let cases = [
        // A segment ended by `*`, `?` or a raw LF (no colon in the run), then a control escape.
        r"C:\new*x\n".to_owned(),
        r"C:\dir?x\t".to_owned(),
        "C:\\dir\nx\\n".to_owned(),
        // A kept escape then a colon inside the same run.
        r"C:\nx:\n".to_owned(),
        r"a C:\tb:\n".to_owned(),
        // A code marker in the raw text just before a `\uXXXX` escape.
        r"x(\u0041 C:\n".to_owned(),
        // Escapes after a code marker that the 160-unit window leaves exactly inside: each
        // escape is one unit.
        format!(r"(\\{}\/ C:\n", "a".repeat(154)),
        format!(r#"(\"{} C:\n"#, "a".repeat(155)),
        // The drive letter at the edges of the 160-unit window, and a marker just outside it.
        format!(r"C:{long}\n"),
        format!(r"x C:\{long}\n"),
        format!(r"(C:\{long}ab\n"),
        format!(r"({long}C:\n"),
        format!("\u{1F600}{long}C:\\n"),
    ];
    for content in cases {
        let text = wrap(&content);
        for split in 0..=text.len() {
            if text.is_char_boundary(split) {
                check(&content, &[split]).unwrap();
            }
        }
    }
}
