//! `replace_lone_surrogates` against serde_json: the repaired text decodes to what a
//! JavaScript `JSON.parse` followed by a UTF-8 encoder gives (a lone half is U+FFFD), and
//! text without lone halves is not touched.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use std::borrow::Cow;

use llm_core::raw::replace_lone_surrogates;
use proptest::prelude::*;
use serde_json::{Value, json};

/// One piece of a generated JSON string.
#[derive(Debug, Clone)]
enum Piece {
    /// A character, written raw or as a `\u` escape (a pair for astral ones).
    Char(char, bool),
    /// A lone high or low half, as an escape.
    Lone(u16),
    /// Another escape.
    Escape(&'static str, char),
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        (any::<char>(), any::<bool>()).prop_map(|(c, escaped)| Piece::Char(c, escaped)),
        prop_oneof![0xD800u16..0xDC00, 0xDC00u16..0xE000].prop_map(Piece::Lone),
        prop::sample::select(vec![
            ("\\\\", '\\'),
            ("\\\"", '"'),
            ("\\n", '\n'),
            ("\\/", '/'),
            ("\\u0041", 'A')
        ])
        .prop_map(|(e, c)| Piece::Escape(e, c)),
    ]
}

/// The JSON string literal and what it decodes to, lone halves as U+FFFD.
fn literal(pieces: &[Piece]) -> (String, String) {
    let mut json = String::from("\"");
    let mut text = String::new();
    let mut last_lone_high = false;
    for piece in pieces {
        match piece {
            Piece::Char(c, escaped) => {
                if *escaped {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        json.push_str(&format!("\\u{unit:04x}"));
                    }
                } else {
                    let quoted = serde_json::to_string(&c.to_string()).unwrap();
                    json.push_str(&quoted[1..quoted.len() - 1]);
                }
                text.push(*c);
                last_lone_high = false;
            }
            Piece::Lone(unit) => {
                // A low half right after a lone high one would make a pair: keep them apart.
                if last_lone_high && (0xDC00..0xE000).contains(unit) {
                    json.push('-');
                    text.push('-');
                }
                json.push_str(&format!("\\u{unit:04X}"));
                text.push('\u{FFFD}');
                last_lone_high = (0xD800..0xDC00).contains(unit);
            }
            Piece::Escape(escape, c) => {
                json.push_str(escape);
                text.push(*c);
                last_lone_high = false;
            }
        }
    }
    json.push('"');
    (json, text)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn lone_halves_become_replacement_and_nothing_else_changes(
        pieces in prop::collection::vec(piece(), 0..24),
    ) {
        let (json, text) = literal(&pieces);
        let document = format!("{{\"k\":{json},\"n\":[1,{json}]}}");
        let repaired = replace_lone_surrogates(&document);
        let value: Value = serde_json::from_str(&repaired).unwrap();
        prop_assert_eq!(&value, &json!({"k": text, "n": [1, text]}));
        let lone = pieces.iter().any(|p| matches!(p, Piece::Lone(_)));
        prop_assert_eq!(matches!(repaired, Cow::Borrowed(_)), !lone);
        if !lone {
            prop_assert_eq!(serde_json::from_str::<Value>(&document).unwrap(), value);
        }
    }
}

#[test]
fn pairs_and_escaped_backslashes_are_left_alone() {
    for text in [r#""\ud83d\ude00""#, r#""\\ud800""#, r#""\\\ud83d\ude00x""#, r#""\u00e9""#] {
        assert!(matches!(replace_lone_surrogates(text), Cow::Borrowed(_)), "{text}");
    }
    assert_eq!(replace_lone_surrogates(r#""a\ud83d""#), r#""a\ufffd""#);
    assert_eq!(replace_lone_surrogates(r#""\ude00\ud83d\ude00""#), r#""\ufffd\ud83d\ude00""#);
    assert_eq!(replace_lone_surrogates(r#""\\\ud83d""#), r#""\\\ufffd""#);
}
