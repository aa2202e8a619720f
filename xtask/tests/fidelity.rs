//! Arguments and text arrive exactly as sent, through every provider's decoder: random text and random
//! `serde_json`-serialized tool arguments, cut into fragments at random UTF-16 positions (so a
//! surrogate pair may be split across two events, as a UTF-16 gateway does), wrapped in the
//! provider's wire events, and the SSE body split at random byte positions (and whole, and one
//! byte at a time, as the conformance replay does): the final message holds the text and the
//! arguments exactly.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

#[path = "../../fuzz/src/harness.rs"]
#[allow(dead_code, unreachable_pub, reason = "the fuzz harness; only part of it is used here")]
mod harness;

use harness::{Provider, stream_events};
use llm_core::{AssistantContent, AssistantEvent};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Text pieces: drive paths, escapes, astral and control characters, long runs.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("C:\\Users\\ola".to_owned()),
        Just("E:/tmp/x".to_owned()),
        Just("\n".to_owned()),
        Just("\t\r\u{8}\u{c}".to_owned()),
        Just("\"q\" \\ /".to_owned()),
        Just("\u{0}\u{1f}".to_owned()),
        Just("\u{1F600}\u{1F44B}\u{1F3FD}".to_owned()),
        Just("caf\u{e9} \u{4E2D}\u{6587} \u{10FFFF}".to_owned()),
        (1usize..50).prop_map(|n| "\u{1F600}".repeat(n)),
        (1usize..200).prop_map(|n| "a".repeat(n)),
        "[ -~]{0,8}",
    ];
    prop::collection::vec(piece, 1..8).prop_map(|parts| {
        // The one valid-JSON rewrite of the drive-path rule (a drive letter, `:`, a control
        // character; see the `partial_json` docs) is kept out of arguments.
        let s = parts.concat();
        s.replace(":\n", ": \n").replace(":\t", ": \t").replace(":\r", ": \r")
    })
}

fn arguments() -> impl Strategy<Value = Value> {
    prop::collection::vec(("[a-z]{1,6}", text()), 1..4).prop_map(|members| {
        let mut map: Map<String, Value> =
            members.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
        map.insert("n".into(), json!([1, 2.5, true, null, {"k": "v"}]));
        Value::Object(map)
    })
}

/// `units` cut at the given fractions (UTF-16 positions: a pair may be split).
fn cut_units(units: &[u16], cuts: &[f64]) -> Vec<Vec<u16>> {
    let mut points: Vec<usize> = cuts.iter().map(|f| ((units.len() as f64) * f) as usize).collect();
    points.push(0);
    points.push(units.len());
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|w| units[w[0]..w[1]].to_vec()).collect()
}

/// A JSON string literal for UTF-16 `units`, written the way a JavaScript server writes it: a
/// lone surrogate half as a `\uXXXX` escape, paired halves as the character (UTF-8).
fn js_string(units: &[u16]) -> String {
    let mut out = String::from("\"");
    for item in char::decode_utf16(units.iter().copied()) {
        match item {
            Ok('"') => out.push_str("\\\""),
            Ok('\\') => out.push_str("\\\\"),
            Ok('\n') => out.push_str("\\n"),
            Ok(c) if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            Ok(c) => out.push(c),
            Err(e) => out.push_str(&format!("\\u{:04x}", e.unpaired_surrogate())),
        }
    }
    out.push('"');
    out
}

fn sse(events: &[(Option<&str>, String)]) -> String {
    let mut out = String::new();
    for (name, data) in events {
        if let Some(name) = name {
            out.push_str(&format!("event: {name}\n"));
        }
        out.push_str(&format!("data: {data}\n\n"));
    }
    out
}

/// The provider's wire body for text pieces then one call with argument fragments (each
/// already a JSON string literal).
fn body(provider: Provider, text: &[String], args: &[String], whole_args: &Value) -> String {
    match provider {
        Provider::Anthropic => {
            let mut ev = vec![
                (Some("message_start"), r#"{"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":1,"output_tokens":1}}}"#.to_owned()),
                (Some("content_block_start"), r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#.to_owned()),
            ];
            for t in text {
                ev.push((Some("content_block_delta"), format!(r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":{t}}}}}"#)));
            }
            ev.push((
                Some("content_block_stop"),
                r#"{"type":"content_block_stop","index":0}"#.to_owned(),
            ));
            ev.push((Some("content_block_start"), r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"t","input":{}}}"#.to_owned()));
            for a in args {
                ev.push((Some("content_block_delta"), format!(r#"{{"type":"content_block_delta","index":1,"delta":{{"type":"input_json_delta","partial_json":{a}}}}}"#)));
            }
            ev.push((
                Some("content_block_stop"),
                r#"{"type":"content_block_stop","index":1}"#.to_owned(),
            ));
            ev.push((Some("message_delta"), r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}"#.to_owned()));
            ev.push((Some("message_stop"), r#"{"type":"message_stop"}"#.to_owned()));
            sse(&ev)
        }
        Provider::OpenAiCompletions | Provider::Mistral => {
            let chunk = |delta: String, finish: &str| {
                (
                    None,
                    format!(
                        r#"{{"id":"c1","model":"m","choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}"#
                    ),
                )
            };
            let mut ev = vec![chunk(r#"{"role":"assistant","content":""}"#.to_owned(), "null")];
            for t in text {
                ev.push(chunk(format!(r#"{{"content":{t}}}"#), "null"));
            }
            ev.push(chunk(r#"{"tool_calls":[{"index":0,"id":"call1abcd","type":"function","function":{"name":"t","arguments":""}}]}"#.to_owned(), "null"));
            for a in args {
                ev.push(chunk(
                    format!(r#"{{"tool_calls":[{{"index":0,"function":{{"arguments":{a}}}}}]}}"#),
                    "null",
                ));
            }
            ev.push(chunk("{}".to_owned(), r#""tool_calls""#));
            ev.push((None, "[DONE]".to_owned()));
            sse(&ev)
        }
        Provider::OpenAiResponses => {
            let mut ev = vec![
                (Some("response.created"), r#"{"type":"response.created","response":{"id":"resp_1","model":"m","status":"in_progress","output":[]}}"#.to_owned()),
                (Some("response.output_item.added"), r#"{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","role":"assistant","content":[]}}"#.to_owned()),
            ];
            for t in text {
                ev.push((Some("response.output_text.delta"), format!(r#"{{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":{t}}}"#)));
            }
            ev.push((Some("response.output_item.added"), r#"{"type":"response.output_item.added","output_index":1,"item":{"id":"fc_1","type":"function_call","arguments":"","call_id":"call_1","name":"t"}}"#.to_owned()));
            for a in args {
                ev.push((Some("response.function_call_arguments.delta"), format!(r#"{{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":1,"delta":{a}}}"#)));
            }
            ev.push((Some("response.completed"), r#"{"type":"response.completed","response":{"id":"resp_1","model":"m","status":"completed","output":[],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}}"#.to_owned()));
            sse(&ev)
        }
        Provider::Google => {
            let chunk = |parts: String, finish: &str| {
                (
                    None,
                    format!(
                        r#"{{"candidates":[{{"content":{{"parts":{parts},"role":"model"}},"index":0{finish}}}],"responseId":"r1","modelVersion":"m"}}"#
                    ),
                )
            };
            let mut ev: Vec<_> =
                text.iter().map(|t| chunk(format!(r#"[{{"text":{t}}}]"#), "")).collect();
            // Gemini sends arguments whole (an object), never as fragments.
            let call = json!([{"functionCall": {"name": "t", "args": whole_args}}]);
            ev.push(chunk(call.to_string(), ""));
            ev.push(chunk(r#"[{"text":""}]"#.to_owned(), r#","finishReason":"STOP""#));
            sse(&ev)
        }
    }
}

fn final_message(events: &[AssistantEvent]) -> &llm_core::AssistantMessage {
    match events.last() {
        Some(AssistantEvent::Done { message, .. }) => message,
        other => panic!("the stream did not end with done: {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_provider_delivers_text_and_arguments_exactly(
        original_text in text(),
        original_args in arguments(),
        text_cuts in prop::collection::vec(0.0f64..1.0, 0..12),
        arg_cuts in prop::collection::vec(0.0f64..1.0, 0..16),
        seed in 2u8..=255,
    ) {
        let text_units: Vec<u16> = original_text.encode_utf16().collect();
        let text_pieces: Vec<String> =
            cut_units(&text_units, &text_cuts).iter().map(|u| js_string(u)).collect();
        let args_text = serde_json::to_string(&original_args).unwrap();
        let arg_units: Vec<u16> = args_text.encode_utf16().collect();
        let arg_pieces: Vec<String> =
            cut_units(&arg_units, &arg_cuts).iter().map(|u| js_string(u)).collect();
        for provider in Provider::ALL {
            let body = body(provider, &text_pieces, &arg_pieces, &original_args);
            // The conformance replay's chunkings: whole, one byte at a time, and random sizes.
            for chunking in [0, 1, seed] {
                let events = stream_events(provider, body.as_bytes(), chunking, true);
                let message = final_message(&events);
                let texts: String = message
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        AssistantContent::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                prop_assert_eq!(&texts, &original_text, "{:?} chunking {}", provider, chunking);
                let calls: Vec<_> = message.tool_calls().collect();
                prop_assert_eq!(calls.len(), 1, "{:?}", provider);
                prop_assert_eq!(&calls[0].arguments, &original_args, "{:?} chunking {}", provider, chunking);
            }
        }
    }
}

#[test]
fn cuts_split_surrogate_pairs_like_a_utf16_server() {
    let units: Vec<u16> = "a\u{1F600}\"".encode_utf16().collect();
    let pieces: Vec<String> = cut_units(&units, &[0.5]).iter().map(|u| js_string(u)).collect();
    assert_eq!(pieces, [r#""a\ud83d""#, r#""\ude00\"""#]);
    // serde_json alone rejects both halves: the join is what the property exercises.
    assert!(serde_json::from_str::<String>(&pieces[0]).is_err());
    assert!(serde_json::from_str::<String>(&pieces[1]).is_err());
}

#[test]
fn a_half_never_completed_becomes_replacement_in_every_provider() {
    // A high half followed by text without its low half, and a high half at the very end.
    let text = [r#""a\ud83d""#.to_owned(), r#""b\ud83d""#.to_owned()];
    let args = [r#""{\"k\":\"x\ud83d""#.to_owned(), r#""\"}""#.to_owned()];
    for provider in Provider::ALL {
        let whole = json!({"k": "x\u{FFFD}"});
        let body = body(provider, &text, &args, &whole);
        for chunking in [0, 1, 7] {
            let events = stream_events(provider, body.as_bytes(), chunking, true);
            let message = final_message(&events);
            let texts: String = message
                .content
                .iter()
                .filter_map(|c| match c {
                    AssistantContent::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(texts, "a\u{FFFD}b\u{FFFD}", "{provider:?} chunking {chunking}");
            let calls: Vec<_> = message.tool_calls().collect();
            assert_eq!(calls[0].arguments, whole, "{provider:?} chunking {chunking}");
        }
    }
}
