#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use llm_core::raw::Delta;
use llm_core::raw::drive::WireDecoder;
use llm_core::raw::sse::SseEvent;
use llm_core::{ErrorKind, StopReason};

use super::Decoder;

fn decode(events: &[&str]) -> Vec<Delta> {
    let mut decoder = Decoder::new();
    let mut out = Vec::new();
    for data in events {
        decoder.event(SseEvent { event: None, data: (*data).to_owned(), id: None }, &mut out);
    }
    decoder.end(&mut out);
    out
}

#[test]
fn malformed_json_is_a_decode_error_not_a_silent_drop() {
    let out = decode(&[r#"{"type":"text","text":"a"}"#, r#"{"type":"text","#]);
    assert!(matches!(&out[1], Delta::Error(e) if e.kind == ErrorKind::Decode), "{out:?}");
}

#[test]
fn done_without_a_stop_reason_is_left_to_the_driver_as_truncated() {
    let out = decode(&[r#"{"type":"text","text":"a"}"#, "[DONE]"]);
    assert!(!out.iter().any(|d| matches!(d, Delta::Done)), "{out:?}");
    let out = decode(&[r#"{"type":"stop","reason":"tool_use"}"#, "[DONE]"]);
    assert!(matches!(out.as_slice(), [Delta::Stop(StopReason::ToolUse), Delta::Done]), "{out:?}");
}

#[test]
fn unknown_types_and_fields_are_ignored() {
    let out = decode(&[r#"{"type":"ping","extra":[1]}"#, r#"{"type":"text","text":"a","x":{}}"#]);
    assert!(matches!(out.as_slice(), [Delta::Text { text, .. }] if text == "a"), "{out:?}");
}
