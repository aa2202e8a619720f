//! Tool arguments arrive exactly as the model sent them.
//!
//! Random JSON objects whose strings mix Windows drive paths (separators written `\\` after
//! serialization, and `/`), every escape, astral characters, control characters and long runs
//! are serialized by `serde_json` (the oracle, independent of the parser), cut into random
//! fragments and fed to [`PartialJson`]: the final value equals the original, and every
//! intermediate value is a prefix-consistent view of it.
//!
//! The only valid JSON the drive-path rule rewrites is a drive letter and `:` followed directly
//! by a control escape (`"A:\nB"` reads as the path `A:\nB`, see the `partial_json` module
//! docs); generated strings avoid exactly that by putting a space after such a colon, and
//! `documented_exception_is_the_only_rewrite` pins the exception itself.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use llm_core::raw::partial_json::{PartialJson, parse_streaming_json};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Pieces strings are built from.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        // Drive paths: real backslashes (serialized as `\\`) and forward slashes.
        Just("C:\\Users\\ola".to_owned()),
        Just("Path: D:\\new\\file.txt".to_owned()),
        Just("c:\\temp\\bin\\readme".to_owned()),
        Just("E:/tmp/x y/z".to_owned()),
        Just("\\\\server\\share\\".to_owned()),
        Just("x:\\".to_owned()),
        // Every escape serde_json writes, and the characters that need one.
        Just("\n".to_owned()),
        Just("\t".to_owned()),
        Just("\r\n".to_owned()),
        Just("\u{8}\u{c}".to_owned()),
        Just("\"quoted\"".to_owned()),
        Just("\\".to_owned()),
        Just("/".to_owned()),
        Just("\u{0}\u{1}\u{1f}\u{7f}".to_owned()),
        // Astral and other multi-byte characters.
        Just("\u{1F600}\u{1F44B}\u{1F3FD}".to_owned()),
        Just("caf\u{e9} \u{4E2D}\u{6587} \u{10FFFF}".to_owned()),
        Just("\u{2028}\u{2029}\u{FEFF}\u{FFFD}".to_owned()),
        // Code-like text (markers), and `:` followed by escapes after a non-path.
        Just("def f(x):\n  return x".to_owned()),
        Just("key: value".to_owned()),
        // Long runs.
        (1usize..400).prop_map(|n| "a".repeat(n)),
        (1usize..300).prop_map(|n| "\\".repeat(n)),
        (1usize..200).prop_map(|n| "\u{1F600}".repeat(n)),
        "[ -~]{0,12}",
        any::<char>().prop_map(String::from),
    ]
}

/// Puts a space between a drive letter's `:` and a following control character (the one
/// documented rewrite, tested separately).
fn avoid_documented_exception(s: String) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        out.push(c);
        if c == ':'
            && i > 0
            && chars[i - 1].is_ascii_alphabetic()
            && chars.get(i + 1).is_some_and(|n| matches!(n, '\u{8}' | '\u{c}' | '\n' | '\r' | '\t'))
        {
            out.push(' ');
        }
    }
    out
}

fn string() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..8)
        .prop_map(|parts| avoid_documented_exception(parts.concat()))
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => string().prop_map(Value::String),
        1 => any::<i64>().prop_map(Value::from),
        1 => (-1e6f64..1e6).prop_map(|f| json!(f)),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(Value::Null),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((string(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn object() -> impl Strategy<Value = Value> {
    prop::collection::vec((string(), value()), 0..6)
        .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>()))
}

/// Cuts `text` at the given fractions, moved forward to character boundaries.
fn fragments<'a>(text: &'a str, cuts: &[f64]) -> Vec<&'a str> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|f| {
            let mut at = ((text.len() as f64) * f) as usize;
            while at < text.len() && !text.is_char_boundary(at) {
                at += 1;
            }
            at.min(text.len())
        })
        .collect();
    points.push(0);
    points.push(text.len());
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|w| &text[w[0]..w[1]]).collect()
}

/// Whether `partial` is a view of a prefix of `full`: every member it shows is in `full`,
/// strings are prefixes, arrays no longer, numbers where `full` has a number, the rest equal.
fn prefix_consistent(partial: &Value, full: &Value) -> bool {
    match (partial, full) {
        (Value::Object(p), Value::Object(f)) => {
            p.iter().all(|(k, v)| f.get(k).is_some_and(|fv| prefix_consistent(v, fv)))
        }
        (Value::Array(p), Value::Array(f)) => {
            p.len() <= f.len() && p.iter().zip(f).all(|(a, b)| prefix_consistent(a, b))
        }
        (Value::String(p), Value::String(f)) => f.starts_with(p.as_str()),
        (Value::Number(_), Value::Number(_)) => true,
        (p, f) => p == f,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn serialized_objects_decode_exactly_at_any_fragmentation(
        original in object(),
        cuts in prop::collection::vec(0.0f64..1.0, 0..24),
        pretty in any::<bool>(),
    ) {
        let text = if pretty {
            serde_json::to_string_pretty(&original).unwrap()
        } else {
            serde_json::to_string(&original).unwrap()
        };
        let mut parser = PartialJson::new();
        for fragment in fragments(&text, &cuts) {
            parser.push(fragment);
            prop_assert!(
                prefix_consistent(parser.value(), &original),
                "after {:?}: {} is not a prefix view of {}", parser.raw(), parser.value(), original
            );
        }
        prop_assert!(parser.is_complete());
        prop_assert_eq!(parser.value(), &original);
        prop_assert_eq!(parser.finish(), original.clone());
        prop_assert_eq!(parse_streaming_json(&text), original);
    }
}

#[test]
fn issue_example_keeps_its_newline() {
    let original = json!({"content": "Path: C:\\Users\\ola\nNext line"});
    let text = serde_json::to_string(&original).unwrap();
    assert_eq!(text, r#"{"content":"Path: C:\\Users\\ola\nNext line"}"#);
    for split in 0..=text.len() {
        let mut parser = PartialJson::new();
        parser.push(&text[..split]);
        parser.push(&text[split..]);
        assert_eq!(parser.finish(), original, "split at {split}");
    }
}

#[test]
fn documented_exception_is_the_only_rewrite() {
    // A drive letter and `:` directly followed by a control escape is read as a path written
    // with single backslashes (OpenClaw's tests require `"C:\new\file"` to stay a path).
    let text = r#"{"a":"C:\new\file","b":"A:\tB"}"#;
    let expected = json!({"a": "C:\\new\\file", "b": "A:\\tB"});
    assert_eq!(parse_streaming_json(text), expected);
    let mut parser = PartialJson::new();
    parser.push(text);
    assert_eq!(parser.finish(), expected);
    // After a letter or digit, or with a space after the colon, it is not a drive.
    let text = r#"{"a":"steps:\nnext","b":"A: \tB","c":"9:\n"}"#;
    assert_eq!(parse_streaming_json(text), serde_json::from_str::<Value>(text).unwrap());
}
