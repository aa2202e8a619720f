#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use super::*;
use serde_json::json;

fn feed_chars(text: &str) -> PartialJson {
    let mut p = PartialJson::new();
    for (i, c) in text.char_indices() {
        p.push(&text[i..i + c.len_utf8()]);
    }
    p
}

proptest::proptest! {
    #[test]
    fn win_path_run_feed_matches_bytewise(
        runs in proptest::collection::vec(
            proptest::collection::vec(proptest::sample::select(vec![
                b'C', b'd', b'1', b':', b'\\', b'/', b' ', b'(', b',', b'"', b'\n', b'|', b'x',
                0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80,
            ]), 0..12),
            0..30,
        ),
    ) {
        let mut run_fed = WinPath::default();
        let mut byte_fed = WinPath::default();
        for run in &runs {
            run_fed.feed(run);
            byte_fed.feed_bytewise(run);
            proptest::prop_assert_eq!(run_fed.looks_like_path(), byte_fed.looks_like_path());
            proptest::prop_assert_eq!(
                (run_fed.len, run_fed.marker_at, run_fed.drive, run_fed.p1, run_fed.p2),
                (byte_fed.len, byte_fed.marker_at, byte_fed.drive, byte_fed.p1, byte_fed.p2)
            );
            if byte_fed.drive != DRIVE_NONE {
                proptest::prop_assert_eq!(
                    (run_fed.letter_at, run_fed.letter_ok),
                    (byte_fed.letter_at, byte_fed.letter_ok)
                );
            }
            // An escape fed by its shortcut leaves the state the byte-wise feed leaves.
            let mut escaped = run_fed.clone();
            escaped.feed_valid_escape();
            let mut reference = byte_fed.clone();
            reference.feed_bytewise(&[VALID_ESCAPE]);
            proptest::prop_assert_eq!(
                (escaped.len, escaped.marker_at, escaped.drive, escaped.p1, escaped.p2),
                (reference.len, reference.marker_at, reference.drive, reference.p1, reference.p2)
            );
        }
    }
}

#[test]
fn utf16_len_counts_units() {
    let text = "a\u{e9}\u{2019}\u{1F600}bcdefghij\u{10FFFF}\u{4E2D}xyz\u{1F600}\u{1F600}";
    for start in 0..text.len() {
        for end in start..=text.len() {
            if let Some(s) = text.get(start..end) {
                assert_eq!(utf16_len(s.as_bytes()), s.encode_utf16().count() as u64);
            }
        }
    }
}

#[test]
fn win_path_window_is_160_units() {
    let mut p = WinPath::default();
    p.feed(b"C:");
    assert!(p.looks_like_path());
    p.feed(&[b'a'; 10]);
    assert!(!p.looks_like_path());
    let mut p = WinPath::default();
    p.feed(b"C:\\");
    p.feed(&[b'a'; 157]);
    assert!(p.looks_like_path());
    p.feed(b"a");
    assert!(!p.looks_like_path());
    // A drive letter after a letter or digit never counts, even at the window's start
    // (OpenClaw's `^` in the tail would accept it there).
    let mut p = WinPath::default();
    p.feed(b"xC:\\");
    assert!(!p.looks_like_path());
    p.feed(&[b'a'; 157]);
    assert!(!p.looks_like_path());
    let mut p = WinPath::default();
    p.feed(b" C:\\");
    assert!(p.looks_like_path());
}

#[test]
fn escaped_windows_path_keeps_its_newline() {
    // A correctly escaped path followed by `\n` and `\t` (valid JSON).
    let input = r#"{"content":"Path: C:\\Users\\ola\nNext line\tend"}"#;
    let expected = json!({"content": "Path: C:\\Users\\ola\nNext line\tend"});
    assert_eq!(serde_json::from_str::<Value>(input).unwrap(), expected);
    assert!(matches!(repair_json(input), Cow::Borrowed(_)));
    assert_eq!(parse_streaming_json(input), expected);
    assert_eq!(feed_chars(input).value(), &expected);
    // One `\\` anywhere in the path means it was escaped: no repair after it.
    let mixed = r#"{"p":"C:\Users\\ola\nx"}"#;
    assert_eq!(parse_streaming_json(mixed), json!({"p": "C:\\Users\\ola\nx"}));
    assert_eq!(feed_chars(mixed).value(), &json!({"p": "C:\\Users\\ola\nx"}));
    // Forward-slash paths and escaped slashes are never repaired either.
    for input in [r#"{"p":"C:/Users/ola\nx"}"#, r#"{"p":"C:\/Users\/ola\nx"}"#] {
        let strict: Value = serde_json::from_str(input).unwrap();
        assert_eq!(parse_streaming_json(input), strict, "{input}");
        assert_eq!(feed_chars(input).value(), &strict, "{input}");
    }
    // Escapes between the letter and colon are not a drive (`\u0043` is `C`).
    let input = r#"{"p":"\u0043:\nx","q":"x\n:\ty"}"#;
    let strict: Value = serde_json::from_str(input).unwrap();
    assert_eq!(parse_streaming_json(input), strict);
    assert_eq!(feed_chars(input).value(), &strict);
}

#[test]
fn unescaped_windows_paths_are_still_repaired() {
    for (input, expected) in [
        (r#"{"p":"C:\new\file"}"#, json!({"p": "C:\\new\\file"})),
        (r#"{"p":"see D:\temp\bin\readme"}"#, json!({"p": "see D:\\temp\\bin\\readme"})),
        (r#"{"p":"C:\Users\ola\new"}"#, json!({"p": "C:\\Users\\ola\\new"})),
    ] {
        assert_eq!(parse_streaming_json(input), expected, "{input}");
        assert_eq!(feed_chars(input).value(), &expected, "{input}");
        let mut whole = PartialJson::new();
        whole.push(input);
        assert_eq!(whole.finish(), expected, "{input}");
    }
}

#[test]
fn repair_windows_path() {
    let input = r#"{"path":"C:\new\file"}"#;
    assert_eq!(repair_json(input), r#"{"path":"C:\\new\\file"}"#);
    assert_eq!(parse_streaming_json(input), json!({"path": "C:\\new\\file"}));
    assert_eq!(feed_chars(input).value(), &json!({"path": "C:\\new\\file"}));
}

#[test]
fn repair_code_is_not_a_path() {
    // `if x:` followed by `\n` is code, not a drive path (OpenClaw fixed this upstream too).
    let input = r#"{"code":"def f(x):\n  return x"}"#;
    assert_eq!(repair_json(input), input);
    assert_eq!(parse_streaming_json(input), json!({"code": "def f(x):\n  return x"}));
}

#[test]
fn repair_raw_control_characters() {
    let input = "{\"a\":\"line1\nline2\ttab\u{1}\"}";
    assert_eq!(repair_json(input), "{\"a\":\"line1\\nline2\\ttab\\u0001\"}");
    assert_eq!(parse_streaming_json(input), json!({"a": "line1\nline2\ttab\u{1}"}));
    assert_eq!(feed_chars(input).value(), &json!({"a": "line1\nline2\ttab\u{1}"}));
}

#[test]
fn repair_invalid_escapes() {
    let input = r#"{"re":"\d+\s\u12zz"}"#;
    assert_eq!(repair_json(input), r#"{"re":"\\d+\\s\\u12zz"}"#);
    assert_eq!(parse_streaming_json(input), json!({"re": "\\d+\\s\\u12zz"}));
    assert_eq!(feed_chars(input).value(), &json!({"re": "\\d+\\s\\u12zz"}));
}

#[test]
fn repair_trailing_backslash() {
    assert_eq!(repair_json(r#"{"a":"x\"#), r#"{"a":"x\\"#);
    // The unfinished escape is not shown.
    assert_eq!(parse_streaming_json(r#"{"a":"x\"#), json!({"a": "x"}));
}

#[test]
fn repair_leaves_valid_json_alone() {
    let input = r#"{"a":"q\"\\\/\b\f\n\r\t\u00e9","b":[1,2]}"#;
    assert!(matches!(repair_json(input), Cow::Borrowed(_)));
}

#[test]
fn non_objects_become_empty() {
    for input in ["null", "[1,2]", "3", "\"s\"", "true", "", "   ", "[{\"a\":1}", "nul"] {
        assert_eq!(parse_streaming_json(input), json!({}), "{input}");
        assert_eq!(feed_chars(input).value(), &json!({}), "{input}");
    }
    let mut p = PartialJson::new();
    p.push("[1,2]");
    assert!(p.is_complete());
    assert_eq!(p.finish(), json!({}));
}

#[test]
fn partial_shapes() {
    let cases = [
        (r#"{"a"#, json!({})),
        (r#"{"a":"#, json!({})),
        (r#"{"a":""#, json!({"a": ""})),
        (r#"{"a":"x\u00"#, json!({"a": "x"})),
        (r#"{"a":"\ud83d"#, json!({"a": ""})),
        (r#"{"a":"\ud83d\ude00"#, json!({"a": "😀"})),
        (r#"{"a":-"#, json!({})),
        (r#"{"a":1."#, json!({"a": 1})),
        (r#"{"a":1e"#, json!({"a": 1})),
        (r#"{"a":-2.5E+"#, json!({"a": -2.5})),
        (r#"{"a":tr"#, json!({})),
        (r#"{"a":true"#, json!({"a": true})),
        (r#"{"a":[1,{"b":[null,"#, json!({"a": [1, {"b": [null]}]})),
        (r#"  {"a":{}}  "#, json!({"a": {}})),
    ];
    for (input, expected) in cases {
        assert_eq!(parse_streaming_json(input), expected, "{input}");
        assert_eq!(feed_chars(input).value(), &expected, "{input}");
        let mut p = PartialJson::new();
        p.push(input);
        assert_eq!(p.value(), &expected, "{input}");
    }
}

#[test]
fn lone_surrogates_become_replacement() {
    let input = r#"{"a":"\ud83dx\udc00\ud83d\n"}"#;
    let expected = json!({"a": "\u{FFFD}x\u{FFFD}\u{FFFD}\n"});
    assert_eq!(parse_streaming_json(input), expected);
    assert_eq!(feed_chars(input).value(), &expected);
}

#[test]
fn completeness() {
    let mut p = PartialJson::new();
    assert!(!p.is_complete());
    p.push(r#"{"a":1"#);
    assert!(!p.is_complete());
    p.push("}");
    assert!(p.is_complete());
    p.push(" \n");
    assert!(p.is_complete());
    p.push("{");
    assert!(!p.is_complete());
    assert_eq!(p.value(), &json!({"a": 1}));

    let mut p = PartialJson::new();
    p.push(r#"{"a":1,]"#);
    assert!(!p.is_complete());
    assert_eq!(p.value(), &json!({"a": 1}));
    assert_eq!(p.finish(), json!({"a": 1}));
}

#[test]
fn duplicate_keys_keep_first_position_last_value() {
    let input = r#"{"a":1,"b":2,"a":"x"}"#;
    let strict: Value = serde_json::from_str(input).unwrap();
    assert_eq!(feed_chars(input).value(), &strict);
    assert_eq!(strict, json!({"a": "x", "b": 2}));
    // A repeated key's string streams into the member's first position, not into the member
    // put last.
    let input = r#"{"a":"first","b":"second","a":"third and longer"}"#;
    let mut p = PartialJson::new();
    for (i, c) in input.char_indices() {
        p.push(&c.to_string());
        if input.get(..=i) == Some(r#"{"a":"first","b":"second","a":"third an"#) {
            assert_eq!(p.value(), &json!({"a": "third an", "b": "second"}));
        }
    }
    assert_eq!(p.value(), &serde_json::from_str::<Value>(input).unwrap());
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let input = "{\"a\":".to_string() + &"[".repeat(100_000);
    let mut p = PartialJson::new();
    p.push(&input);
    assert!(!p.is_complete());
    let _ = p.finish();
}

#[test]
fn split_concatenated() {
    assert_eq!(
        split_concatenated_objects(r#"{"a":1}{"b":"}{"} {"c":[{}]}"#),
        Some(vec![r#"{"a":1}"#, r#"{"b":"}{"}"#, r#"{"c":[{}]}"#])
    );
    assert_eq!(
        split_concatenated_objects("{\"a\":1}\n{\"b\":2}\n"),
        Some(vec!["{\"a\":1}", "{\"b\":2}"])
    );
    assert_eq!(split_concatenated_objects(r#"{"a":1}"#), None);
    assert_eq!(split_concatenated_objects(r#"{"a":1}{"b":"#), None);
    assert_eq!(split_concatenated_objects(r#"{"a":1},{"b":2}"#), None);
    assert_eq!(split_concatenated_objects(r#"{"a":1}[2]"#), None);
    assert_eq!(split_concatenated_objects(r#"{"a":1]{"b":2}"#), None);
    assert_eq!(split_concatenated_objects(""), None);
}
