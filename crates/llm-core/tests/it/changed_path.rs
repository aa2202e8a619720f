//! What changed after each fragment: `PartialJson::changed` and the `changed` pointer of
//! `AssistantEvent::ToolCallDelta`, against an oracle written here from the
//! definition alone.
//!
//! The oracle compares the value shown before and after a fragment (plain `serde_json`
//! values, cloned) and walks down from the root while everything that differs sits in one
//! member or element; where it stops (several children differ, a child was added or removed,
//! or the node itself is a different scalar) is the expected pointer. Nothing differs: `None`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]

use llm_core::raw::partial_json::PartialJson;
use llm_core::{
    AssistantEvent, Model,
    raw::{Delta, MessageAssembler},
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// RFC 6901 escaping of one reference token.
fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The oracle: the deepest pointer under which `old` and `new` differ, `None` if equal.
fn expected_change(old: &Value, new: &Value) -> Option<String> {
    if old == new {
        return None;
    }
    let mut pointer = String::new();
    let (mut old, mut new) = (old, new);
    loop {
        let step = match (old, new) {
            (Value::Object(a), Value::Object(b)) => {
                let keys: Vec<&String> = a
                    .keys()
                    .chain(b.keys().filter(|k| !a.contains_key(*k)))
                    .filter(|k| a.get(*k) != b.get(*k))
                    .collect();
                match keys.as_slice() {
                    [key] => Some((token(key), a.get(*key), b.get(*key))),
                    _ => None,
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                let indices: Vec<usize> =
                    (0..a.len().max(b.len())).filter(|&i| a.get(i) != b.get(i)).collect();
                match indices.as_slice() {
                    [i] => Some((i.to_string(), a.get(*i), b.get(*i))),
                    _ => None,
                }
            }
            _ => None,
        };
        match step {
            Some((token, Some(a), Some(b))) => {
                pointer.push('/');
                pointer.push_str(&token);
                old = a;
                new = b;
            }
            // Added or removed: the pointer names it.
            Some((token, _, _)) => {
                pointer.push('/');
                pointer.push_str(&token);
                return Some(pointer);
            }
            None => return Some(pointer),
        }
    }
}

/// Whether every change the oracle found lies under `reported`.
fn covers(reported: &str, expected: &str) -> bool {
    expected == reported || expected.starts_with(&format!("{reported}/"))
}

/// Feeds `parts` and checks `changed()` after every one against the oracle: exactly, or
/// (`exact` false: a repeated key may replace, in the same fragment, a member that fragment
/// added, so the net change can be less than what was done) a pointer that covers it.
fn check_parts(parts: &[&str], exact: bool) -> Result<(), TestCaseError> {
    let mut parser = PartialJson::new();
    let mut before = parser.value().clone();
    for (n, part) in parts.iter().enumerate() {
        parser.push(part);
        let after = parser.value();
        let expected = expected_change(&before, after);
        let reported = parser.changed().map(|p| p.to_string());
        let context = format!("after part {n} {part:?} of {parts:?}: {before} -> {after}");
        if exact {
            prop_assert_eq!(&reported, &expected, "{}", context);
        } else {
            match (&reported, &expected) {
                (None, None) | (Some(_), None) => {}
                (Some(r), Some(e)) => prop_assert!(covers(r, e), "{} {:?}", context, reported),
                (None, Some(_)) => prop_assert!(false, "missed a change: {}", context),
            }
        }
        if let Some(pointer) = &expected {
            // The pointer resolves in the new value, or (a removal) in the old one.
            prop_assert!(after.pointer(pointer).is_some() || before.pointer(pointer).is_some());
        }
        before = after.clone();
    }
    Ok(())
}

/// `text` cut at the given points (on char boundaries).
fn fragments<'a>(text: &'a str, cuts: &[usize]) -> Vec<&'a str> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|c| c % (text.len() + 1))
        .map(|c| (0..=c).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0))
        .collect();
    points.push(0);
    points.push(text.len());
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|w| &text[w[0]..w[1]]).filter(|p| !p.is_empty()).collect()
}

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "content", "x/y", "t~1", "", "é", "a"])
        .prop_map(str::to_owned)
}

fn text() -> impl Strategy<Value = String> {
    "[a-c \"\\\\/:~\n\t\u{e9}\u{1F600}C]{0,12}"
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(Value::from),
        (-1000.0f64..1000.0).prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            // Duplicate keys are possible in the text (see `write_object`).
            prop::collection::vec((key(), inner), 0..5).prop_map(|members| {
                Value::Array(vec![Value::String("\u{0}object".into()), members_value(members)])
            }),
        ]
    })
}

/// Members kept in order, duplicates included, until written as text.
fn members_value(members: Vec<(String, Value)>) -> Value {
    Value::Array(members.into_iter().map(|(k, v)| json!([k, v])).collect())
}

/// Whether an object of `value` (see [`write`]) repeats a key.
fn repeats_a_key(value: &Value) -> bool {
    match value {
        Value::Array(items)
            if items.len() == 2 && items[0] == Value::String("\u{0}object".into()) =>
        {
            let members = items[1].as_array().unwrap();
            let keys: std::collections::HashSet<&Value> = members.iter().map(|m| &m[0]).collect();
            keys.len() < members.len() || members.iter().any(|m| repeats_a_key(&m[1]))
        }
        Value::Array(items) => items.iter().any(repeats_a_key),
        _ => false,
    }
}

/// Writes `value` as JSON text; the object marker becomes an object whose members (possibly
/// with repeated keys) are written in order; `pretty` adds whitespace between tokens.
fn write(value: &Value, pretty: bool, out: &mut String) {
    let space = if pretty { "\n  " } else { "" };
    match value {
        Value::Array(items)
            if items.len() == 2 && items[0] == Value::String("\u{0}object".into()) =>
        {
            out.push('{');
            for (n, member) in items[1].as_array().unwrap().iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                out.push_str(space);
                out.push_str(&serde_json::to_string(&member[0]).unwrap());
                out.push(':');
                out.push_str(space);
                write(&member[1], pretty, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                out.push_str(space);
                write(item, pretty, out);
            }
            out.push(']');
        }
        other => out.push_str(&serde_json::to_string(other).unwrap()),
    }
}

fn top() -> impl Strategy<Value = Value> {
    prop::collection::vec((key(), json_value()), 0..6).prop_map(|members| {
        Value::Array(vec![Value::String("\u{0}object".into()), members_value(members)])
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Valid JSON (with repeated keys, escapes, whitespace), cut anywhere.
    #[test]
    fn changed_is_the_deepest_pointer_that_holds_every_change(
        value in top(),
        pretty in any::<bool>(),
        cuts in prop::collection::vec(any::<usize>(), 0..40),
    ) {
        let mut text = String::new();
        write(&value, pretty, &mut text);
        serde_json::from_str::<Value>(&text).unwrap();
        check_parts(&fragments(&text, &cuts), !repeats_a_key(&value))?;
    }

    /// One character at a time: every escape, number and literal is split.
    #[test]
    fn changed_char_by_char(value in top()) {
        let mut text = String::new();
        write(&value, false, &mut text);
        let parts: Vec<&str> =
            text.char_indices().map(|(i, c)| &text[i..i + c.len_utf8()]).collect();
        // One character cannot both add a member and replace it.
        check_parts(&parts, true)?;
    }

    /// Malformed input: repairs, errors, trailing text, long numbers.
    #[test]
    fn changed_on_arbitrary_input(
        chars in prop::collection::vec(prop::sample::select(vec![
            '{', '}', '[', ']', '"', '"', '"', '\\', ':', ':', ',', 'C', 'x', 'u', 'n', 't',
            'd', '0', '1', '1', '-', '.', 'e', ' ', '\n', '\u{1}', '/', 'é', '😀',
        ]), 0..80),
        prefix in prop::sample::select(vec!["", "{\"k\":\"", "{\"k\":[", "{\"p\":\"C:", "{\"n\":1"]),
        cuts in prop::collection::vec(any::<usize>(), 0..30),
    ) {
        let text: String = prefix.chars().chain(chars).collect();
        check_parts(&fragments(&text, &cuts), false)?;
        let parts: Vec<&str> =
            text.char_indices().map(|(i, c)| &text[i..i + c.len_utf8()]).collect();
        check_parts(&parts, true)?;
    }
}

#[test]
fn streaming_one_string_reports_it_and_reuses_the_pointer() {
    let mut parser = PartialJson::new();
    parser.push("{\"path\":\"a.rs\",\"content\":\"fn");
    assert_eq!(parser.changed().map(|p| &**p), Some(""), "two members changed");
    parser.push(" main");
    let first = parser.changed().cloned().unwrap();
    assert_eq!(&*first, "/content");
    parser.push("() {}");
    let second = parser.changed().cloned().unwrap();
    assert!(std::sync::Arc::ptr_eq(&first, &second), "the same pointer is shared, not rebuilt");
    parser.push("\\");
    assert_eq!(parser.changed(), None, "an unfinished escape shows nothing new");
    parser.push("n\"");
    assert_eq!(parser.changed().map(|p| &**p), Some("/content"));
    parser.push(",\"x/y~\":[1");
    assert_eq!(parser.changed().map(|p| &**p), Some("/x~1y~0"));
    parser.push(".5");
    assert_eq!(parser.changed().map(|p| &**p), Some("/x~1y~0/0"));
    parser.push("  ");
    assert_eq!(parser.changed(), None);
    parser.push("]}");
    assert_eq!(parser.changed(), None, "closing what is shown changes nothing");
    assert_eq!(parser.value()["x/y~"], json!([1.5]));
}

#[test]
fn a_recomputed_pointer_that_did_not_change_is_shared() {
    let mut parser = PartialJson::new();
    parser.push("{\"content\":\"a");
    let put = parser.changed().cloned().unwrap();
    assert_eq!(&*put, "/content");
    // Not the same kind of change (the first showed the member, this one appends to it), so
    // the pointer is worked out again, and found equal.
    parser.push("b");
    assert!(std::sync::Arc::ptr_eq(&put, parser.changed().unwrap()));
}

#[test]
fn a_repeated_key_is_followed_down_to_where_the_values_differ() {
    let mut parser = PartialJson::new();
    parser.push("{\"a\":{\"b\":{\"c\":1,\"d\":2}}");
    // The second `a` replaces the first; what differs is `b`'s `d`, now absent.
    parser.push(",\"a\":{\"b\":{\"c\":1");
    assert_eq!(parser.changed().map(|p| &**p), Some("/a/b/d"));
    assert_eq!(parser.value(), &json!({"a": {"b": {"c": 1}}}));
}

#[test]
fn tool_call_delta_events_carry_the_pointer_into_the_partial_arguments() {
    let mut assembler = MessageAssembler::new(&Model::default(), 0);
    assembler.push(Delta::ToolCallStart {
        key: 0,
        id: "call_1".into(),
        name: "write_file".into(),
        arguments: None,
    });
    let mut shown = Value::Object(Map::new());
    let mut seen = Vec::new();
    for fragment in ["{\"path\":\"a", ".rs\",", "\"content\":\"x", "yz", "\"}"] {
        assembler.push(Delta::ToolCallArgs { key: 0, fragment: fragment.into() });
        while let Some(event) = assembler.next_event() {
            if let AssistantEvent::ToolCallDelta { content_index, changed, .. } = event {
                let now = assembler.partial().tool_call(content_index).unwrap().arguments.clone();
                assert_eq!(changed.as_deref().map(str::to_owned), expected_change(&shown, &now));
                seen.push(changed.map(|p| p.to_string()));
                shown = now;
            }
        }
    }
    let seen: Vec<Option<&str>> = seen.iter().map(Option::as_deref).collect();
    assert_eq!(seen, [Some("/path"), Some("/path"), Some("/content"), Some("/content"), None]);

    // Arguments that disagree with what streamed replace it: the whole value changed.
    assembler.push(Delta::ToolCallArgsDone { key: 0, arguments: "{\"other\":1}".into() });
    let changed = std::iter::from_fn(|| assembler.next_event()).find_map(|e| match e {
        AssistantEvent::ToolCallDelta { changed, .. } => Some(changed),
        _ => None,
    });
    assert_eq!(changed.flatten().as_deref(), Some(""));
}
