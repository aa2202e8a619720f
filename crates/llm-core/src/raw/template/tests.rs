use proptest::prelude::*;
use serde_json::{Value, json};

use super::{EventTemplate, Step};

const CONTENT: &[Step<'static>] = super::CHAT_CONTENT;
const ARGUMENTS: &[Step<'static>] = super::CHAT_ARGUMENTS;

/// The fragment read, as a string.
fn read(template: &EventTemplate, data: &str) -> Option<String> {
    template.read(data).map(crate::raw::WireText::into_string)
}

fn chunk(arguments: &str, obfuscation: &str) -> String {
    format!(
        r#"{{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1760000000,"model":"gpt-x","choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":{}}}}}]}},"logprobs":null,"finish_reason":null}}],"usage":null,"obfuscation":{}}}"#,
        serde_json::to_string(arguments).unwrap(),
        serde_json::to_string(obfuscation).unwrap()
    )
}

#[test]
fn the_next_fragment_is_read_whatever_its_padding() {
    let template =
        EventTemplate::learn(&chunk("{\"pa", "x9"), ARGUMENTS, &["obfuscation"]).unwrap();
    let next = chunk("th\": \"a\\\"b\" \n", "Qz81abc");
    assert_eq!(read(&template, &next).as_deref(), Some("th\": \"a\\\"b\" \n"));
    assert_eq!(read(&template, &chunk("", "")).as_deref(), Some(""));
}

#[test]
fn any_other_difference_is_no_match() {
    let template = EventTemplate::learn(&chunk("{", "x9"), ARGUMENTS, &["obfuscation"]).unwrap();
    let same = chunk("a", "b");
    for other in [
        same.replace("chatcmpl-1", "chatcmpl-2"),
        same.replace(r#""index":0,"f"#, r#""index":1,"f"#),
        same.replace(r#""finish_reason":null"#, r#""finish_reason":"stop""#),
        format!("{same} "),
        same.replacen('{', "{ ", 1),
        same[..same.len() - 1].to_owned(),
        chunk("a\u{1}b", "b").replace("\\u0001", "\u{1}"),
        chunk("a", "b").replace(r#""a""#, r#""a\x""#),
        chunk("a", "b").replace(r#""a""#, r#""a\u12G4""#),
        chunk("a", "b").replace(r#""a""#, r#""a\"#),
    ] {
        assert_eq!(read(&template, &other), None, "{other}");
    }
    // Without padding keys, the padding string is compared like the rest.
    let strict = EventTemplate::learn(&chunk("{", "x9"), ARGUMENTS, &[]).unwrap();
    assert_eq!(read(&strict, &chunk("a", "x9")), Some("a".into()));
    assert_eq!(read(&strict, &chunk("a", "x8")), None);
}

#[test]
fn what_cannot_be_learned() {
    for (data, path) in [
        // The fragment is not a string.
        (r#"{"choices":[{"delta":{"content":null}}]}"#, CONTENT),
        (r#"{"choices":[{"delta":{"content":["a"]}}]}"#, CONTENT),
        // Two choices, or none.
        (r#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#, CONTENT),
        (r#"{"choices":[]}"#, CONTENT),
        // A key on the path twice (a parser keeps the last one, or refuses).
        (r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#, CONTENT),
        (r#"{"choices":[{"delta":{"content":"a"}}],"choices":[]}"#, CONTENT),
        // A key written with an escape, which could be one of ours.
        (r#"{"choices":[{"delta":{"c\u006fntent":"a","content":"b"}}]}"#, CONTENT),
        // Not JSON, or more than one value.
        (r#"{"choices":[{"delta":{"content":"a"}}]"#, CONTENT),
        (r#"{"choices":[{"delta":{"content":"a"}}]} {}"#, CONTENT),
    ] {
        assert!(EventTemplate::learn(data, path, &["p"]).is_none(), "{data}");
    }
    // A padding key twice.
    let twice = r#"{"choices":[{"delta":{"content":"a"}}],"p":"x","p":"y"}"#;
    assert!(EventTemplate::learn(twice, CONTENT, &["p"]).is_none());
    // Padding that is not a string is compared as it is.
    let number = r#"{"choices":[{"delta":{"content":"a"}}],"p":1}"#;
    let template = EventTemplate::learn(number, CONTENT, &["p"]).unwrap();
    assert_eq!(read(&template, &number.replace("\"a\"", "\"b\"")), Some("b".into()));
    assert_eq!(read(&template, &number.replace(":1}", ":2}")), None);
}

/// A JSON string of printable ASCII, escapes and non-ASCII text.
fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just('"'),
            Just('\\'),
            Just('\n'),
            Just('\u{1}'),
            Just('é'),
            Just('😀'),
            proptest::char::range(' ', '~')
        ],
        0..24,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

/// An envelope around the fragment with random extra fields, in a random key order.
fn envelope() -> impl Strategy<Value = (Vec<(String, Value)>, bool)> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[a-z]{0,6}".prop_map(Value::String),
    ];
    let value = leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z]{1,3}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    (proptest::collection::vec(("[a-z]{1,4}", value), 0..4), any::<bool>())
}

fn build(extra: &[(String, Value)], padding_first: bool, fragment: &str, padding: &str) -> String {
    let mut top = serde_json::Map::new();
    if padding_first {
        top.insert("p".into(), json!(padding));
    }
    for (k, v) in extra {
        if k != "p" && k != "choices" {
            top.insert(k.clone(), v.clone());
        }
    }
    top.insert("choices".into(), json!([{"index": 0, "delta": {"content": fragment}}]));
    if !padding_first {
        top.insert("p".into(), json!(padding));
    }
    serde_json::to_string(&Value::Object(top)).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The oracle is serde_json: whenever the template matches some text (a new chunk, or a
    /// new chunk with one byte changed), that text parses to the learned value with the
    /// fragment and the padding replaced, and the fragment read is serde_json's string.
    #[test]
    fn a_match_parses_as_the_learned_value_with_new_strings(
        (extra, padding_first) in envelope(),
        learned in text(),
        next in text(),
        padding in text(),
        flip in any::<(usize, u8)>(),
    ) {
        let data = build(&extra, padding_first, &learned, "ab");
        let template = EventTemplate::learn(&data, CONTENT, &["p"]).unwrap();
        let next_data = build(&extra, padding_first, &next, &padding);
        let decoded = read(&template, &next_data);
        prop_assert_eq!(decoded.as_ref(), Some(&next), "{}\n{}", data, next_data);

        let mut bytes = next_data.clone().into_bytes();
        let at = flip.0 % bytes.len();
        bytes[at] = flip.1 & 0x7f;
        let Ok(mutated) = String::from_utf8(bytes) else { return Ok(()) };
        if let Some(decoded) = read(&template, &mutated) {
            let parsed: Value = serde_json::from_str(&mutated).unwrap();
            let mut expected: Value = serde_json::from_str(&data).unwrap();
            expected["choices"][0]["delta"]["content"] = json!(decoded);
            expected["p"] = parsed["p"].clone();
            prop_assert_eq!(parsed, expected, "{}", mutated);
        }
    }
}

#[test]
fn whitespace_before_the_closing_brace_may_differ() {
    let padded = |text: &str, spaces: usize| {
        format!(
            r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"input_json_delta","partial_json":{}}}{}}}"#,
            serde_json::to_string(text).unwrap(),
            " ".repeat(spaces)
        )
    };
    let path = [Step::Key("delta"), Step::Key("partial_json")];
    for learned_spaces in [0, 3] {
        let template = EventTemplate::learn(&padded("{\"a", learned_spaces), &path, &[]).unwrap();
        for spaces in [0, 1, 17] {
            assert_eq!(read(&template, &padded("\":1}", spaces)).as_deref(), Some("\":1}"));
        }
        let next = padded("x", 2);
        assert_eq!(read(&template, &next.replace("  }", " x}")), None);
        assert_eq!(read(&template, &next.replace("  }", "\n\t}")).as_deref(), Some("x"));
        assert_eq!(read(&template, &format!("{next} ")), None);
        // Whitespace elsewhere is compared like the rest (a parse reads it the same; the
        // template does not need to).
        assert_eq!(read(&template, &next.replace(r#""x"}"#, r#""x" }"#)), None);
    }
}

#[test]
fn a_set_learns_small_events_only_and_stops_after_unmatched_ones() {
    let text = |t: &str| crate::raw::WireText::from(t);
    // A large event is not kept: the set would hold its text.
    let mut set = super::EventTemplates::<u8>::default();
    let big = chunk(&"x".repeat(super::MAX_LEARNED_BYTES), "");
    set.learn(&big, ARGUMENTS, &["obfuscation"], 1, &text(&"x".repeat(super::MAX_LEARNED_BYTES)));
    assert!(set.read(&big).is_none());
    // A small one is, and is read back with what it is.
    set.learn(&chunk("ab", ""), ARGUMENTS, &["obfuscation"], 2, &text("ab"));
    assert_eq!(
        set.read(&chunk("cd", "p")).map(|(what, t)| (what, t.into_string())),
        Some((2, "cd".into()))
    );
    // A template whose fragment is not the text the parse read is not kept.
    set.learn(&chunk("ef", "").replace("chatcmpl-1", "chatcmpl-9"), ARGUMENTS, &[], 3, &text("zz"));
    assert!(set.read(&chunk("gh", "").replace("chatcmpl-1", "chatcmpl-9")).is_none());
    // Learning stops once enough templates were dropped without a match.
    let mut set = super::EventTemplates::<u8>::default();
    for i in 0..64 {
        let id = format!("chatcmpl-{i}");
        set.learn(&chunk("a", "").replace("chatcmpl-1", &id), ARGUMENTS, &[], 0, &text("a"));
    }
    assert!(!set.learning());
    assert!(super::EventTemplates::<u8>::off().read(&chunk("a", "")).is_none());
}
