//! `Delta::ToolCallArgsDone` through `MessageAssembler`: complete arguments that arrive after
//! the fragments are compared with what streamed (the assembler's parser keeps a hash of it,
//! not the text) and add nothing, add the missing suffix, or replace what streamed.
//! The oracle for a call's final arguments is serde_json's parse of the text that counts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]

use llm_core::{
    AssistantEvent, Model,
    raw::{Delta, MessageAssembler},
};
use proptest::prelude::*;
use serde_json::Value;

/// Call 0 opened, then `deltas`, then the end of the stream: the call's `toolcall_delta`s and
/// its final arguments.
fn assemble(deltas: Vec<Delta>) -> (Vec<String>, Value) {
    let mut assembler = MessageAssembler::new(&Model::default(), 0);
    let start = Delta::ToolCallStart { key: 0, id: "c".into(), name: "f".into(), arguments: None };
    for delta in std::iter::once(start).chain(deltas) {
        assembler.push(delta);
    }
    assembler.push(Delta::Done);
    let events: Vec<_> = std::iter::from_fn(|| assembler.next_event()).collect();
    let shown = events
        .iter()
        .filter_map(|e| match e {
            AssistantEvent::ToolCallDelta { delta, .. } => Some(delta.clone()),
            _ => None,
        })
        .collect();
    let Some(AssistantEvent::Done { message, .. }) = events.last() else { panic!("{events:?}") };
    (shown, message.tool_calls().next().unwrap().arguments.clone())
}

/// Streams `fragments` of one call, then `done` (if any).
fn call(fragments: &[&str], done: Option<&str>) -> (Vec<String>, Value) {
    let mut deltas: Vec<Delta> = fragments
        .iter()
        .map(|f| Delta::ToolCallArgs { key: 0, fragment: (*f).to_owned() })
        .collect();
    deltas.extend(done.map(|d| Delta::ToolCallArgsDone { key: 0, arguments: d.to_owned() }));
    deltas.push(Delta::BlockEnd { key: 0 });
    assemble(deltas)
}

fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn done_equal_to_what_streamed_adds_nothing() {
    let text = r#"{"path":"a.rs","content":"fn main() {\n\t\"é😀\"\n}"}"#;
    let (deltas, arguments) = call(&[&text[..10], &text[10..]], Some(text));
    assert_eq!(deltas, [&text[..10], &text[10..]]);
    assert_eq!(arguments, parsed(text));
}

#[test]
fn done_extending_what_streamed_adds_the_suffix() {
    let text = r#"{"path":"a.rs","content":"x"}"#;
    let (deltas, arguments) = call(&[&text[..12]], Some(text));
    assert_eq!(deltas, [&text[..12], &text[12..]]);
    assert_eq!(arguments, parsed(text));
}

#[test]
fn done_differing_from_what_streamed_replaces_it() {
    // Same length, one byte different: only the hash can tell, and it does.
    let streamed = r#"{"path":"a.rs","content":"x"}"#;
    let done = r#"{"path":"b.rs","content":"x"}"#;
    assert_eq!(streamed.len(), done.len());
    let (deltas, arguments) = call(&[&streamed[..7], &streamed[7..]], Some(done));
    assert_eq!(deltas, [&streamed[..7], &streamed[7..], done]);
    assert_eq!(arguments, parsed(done));

    // Shorter than what streamed: replaces it too.
    let (deltas, arguments) = call(&[streamed], Some("{}"));
    assert_eq!(deltas, [streamed, "{}"]);
    assert_eq!(arguments, parsed("{}"));

    // The same arguments spelled differently (an escape for `A`) are a different text, as
    // when the parser kept the streamed text: the complete text counts.
    let (deltas, arguments) = call(&[r#"{"a":"A"}"#], Some(r#"{"a":"\u0041"}"#));
    assert_eq!(deltas, [r#"{"a":"A"}"#, r#"{"a":"\u0041"}"#]);
    assert_eq!(arguments, parsed(r#"{"a":"A"}"#));
}

#[test]
fn a_second_done_is_compared_with_what_the_first_left() {
    // Responses sends the complete arguments twice (`function_call_arguments.done`, then the
    // finished item): the second compares with the streamed text plus the first's suffix.
    let (deltas, arguments) = assemble(vec![
        Delta::ToolCallArgs { key: 0, fragment: r#"{"a":"#.into() },
        Delta::ToolCallArgsDone { key: 0, arguments: r#"{"a":1}"#.into() },
        Delta::ToolCallArgsDone { key: 0, arguments: r#"{"a":1}"#.into() },
        Delta::ToolCallArgsDone { key: 0, arguments: r#"{"a":1, "b":2}"#.into() },
    ]);
    assert_eq!(deltas, [r#"{"a":"#, "1}", r#"{"a":1, "b":2}"#]);
    assert_eq!(arguments, parsed(r#"{"a":1, "b":2}"#));
}

fn json_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<i32>().prop_map(Value::from),
        "[a-z\"\\\\\n\té😀]{0,12}".prop_map(Value::from),
        Just(Value::Null),
    ];
    let value = leaf.prop_recursive(3, 24, 4, |inner| {
        prop::collection::btree_map("[a-z]{1,4}", inner, 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    });
    prop::collection::btree_map("[a-z]{1,4}", value, 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()).to_string())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Whatever streamed (a prefix of the text, or another text) and however it was cut, the
    /// call ends with serde_json's parse of the complete text, and the deltas are exactly
    /// what the byte comparison of the two texts implies.
    #[test]
    fn done_text_always_wins(
        text in json_text(),
        other in json_text(),
        keep in 0usize..=100,
        use_other in any::<bool>(),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let source = if use_other { &other } else { &text };
        let mut end = source.len() * keep / 100;
        while !source.is_char_boundary(end) {
            end -= 1;
        }
        let streamed = &source[..end];
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (streamed.len() + 1)).collect();
        points.extend([0, streamed.len()]);
        points.retain(|&p| streamed.is_char_boundary(p));
        points.sort_unstable();
        points.dedup();
        let fragments: Vec<&str> = points.windows(2).map(|w| &streamed[w[0]..w[1]]).collect();
        let (deltas, arguments) = call(&fragments, Some(&text));
        prop_assert_eq!(&arguments, &parsed(&text));
        let mut expected: Vec<String> = fragments.iter().map(|f| (*f).to_owned()).collect();
        match text.strip_prefix(streamed) {
            Some("") => {}
            Some(suffix) => expected.push(suffix.to_owned()),
            None => expected.push(text.clone()),
        }
        prop_assert_eq!(deltas, expected);
    }
}
