#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used, reason = "tests")]

use llm_core::raw::printer::print_transcript;
use llm_core::raw::sse::SseDecoder;
use llm_core::{AssistantContent, AssistantEvent, AssistantMessage, Model, raw::MessageAssembler};
use serde_json::json;

use super::*;

fn model() -> Model {
    Model {
        id: "gemini-2.5-flash".into(),
        api: "google-generative-ai".into(),
        provider: "google".into(),
        cost: llm_core::ModelCost { input: 0.3, output: 2.5, cache_read: 0.075, cache_write: 0.0 },
        ..Model::default()
    }
}

/// Bytes -> SSE (split into `chunk`-byte pieces) -> decoder -> deltas.
fn deltas(body: &str, chunk: usize) -> Vec<Delta> {
    let mut sse = SseDecoder::new();
    let mut decoder = Decoder::new();
    let mut out = Vec::new();
    let mut events = Vec::new();
    for piece in body.as_bytes().chunks(chunk.max(1)) {
        sse.push(piece, &mut events).unwrap();
        for e in events.drain(..) {
            llm_core::raw::drive::decode_frame(&mut decoder, e, &mut out);
        }
    }
    sse.finish(&mut events).unwrap();
    for e in events.drain(..) {
        llm_core::raw::drive::decode_frame(&mut decoder, e, &mut out);
    }
    llm_core::raw::drive::decode_end(&mut decoder, &mut out);
    out
}

fn assemble(deltas: Vec<Delta>) -> (Vec<AssistantEvent>, AssistantMessage) {
    let mut a = MessageAssembler::new(&model(), 0);
    for d in deltas {
        a.push(d);
    }
    let events: Vec<AssistantEvent> = std::iter::from_fn(|| a.next_event()).collect();
    let message = match events.last() {
        Some(AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. }) => {
            message.clone()
        }
        other => panic!("no terminal event: {other:?}"),
    };
    (events, *message)
}

fn run(body: &str) -> (Vec<AssistantEvent>, AssistantMessage) {
    let whole = assemble(deltas(body, usize::MAX));
    // Every chunking gives the same transcript.
    for size in [1, 7, 64] {
        let other = assemble(deltas(body, size));
        assert_eq!(print_transcript(&whole.0), print_transcript(&other.0), "chunk size {size}");
    }
    whole
}

fn sse(chunks: &[serde_json::Value]) -> String {
    chunks.iter().map(|c| format!("data: {c}\r\n\r\n")).collect()
}

#[test]
fn text_with_crlf_framing_usage_from_last_chunk() {
    let body = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Lisbon is\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 169,\"totalTokenCount\": 169},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"ExAmPlE0001\"}\r\n\r\n\
data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \" mild today.\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 9,\"candidatesTokenCount\": 5,\"totalTokenCount\": 14},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"ExAmPlE0001\"}\r\n\r\n";
    let (events, message) = run(body);
    assert!(matches!(events.last(), Some(AssistantEvent::Done { reason: StopReason::Stop, .. })));
    assert_eq!(message.text(), "Lisbon is mild today.");
    assert_eq!(message.response_id.as_deref(), Some("ExAmPlE0001"));
    assert_eq!(message.response_model, None);
    assert_eq!(message.usage.input, 9);
    assert_eq!(message.usage.output, 5);
    assert_eq!(message.usage.total_tokens, 14);
}

#[test]
fn two_calls_in_one_chunk_without_ids_get_unique_ids() {
    let body = sse(&[json!({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "get_weather", "args": {"city": "Lisbon"}}},
        {"functionCall": {"name": "get_weather", "args": {"city": "Porto"}}}
    ]}, "finishReason": "STOP"}], "responseId": "resp-1", "usageMetadata": {"promptTokenCount": 27, "candidatesTokenCount": 10, "totalTokenCount": 37, "trafficType": "ON_DEMAND"}})]);
    let (events, message) = run(&body);
    assert!(matches!(
        events.last(),
        Some(AssistantEvent::Done { reason: StopReason::ToolUse, .. })
    ));
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].id, "call_resp-1_0");
    assert_eq!(calls[1].id, "call_resp-1_1");
    assert_eq!(calls[0].arguments, json!({"city": "Lisbon"}));
    assert_eq!(calls[1].arguments, json!({"city": "Porto"}));
    // start, delta, end back to back for each call.
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            AssistantEvent::ToolCallStart { .. } => "s",
            AssistantEvent::ToolCallDelta { .. } => "d",
            AssistantEvent::ToolCallEnd { .. } => "e",
            _ => "-",
        })
        .collect();
    assert_eq!(kinds.join(""), "-sdesde-");
}

#[test]
fn duplicate_provided_id_gets_a_new_one_and_missing_args_are_empty() {
    let body = sse(&[
        json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "read_theme", "id": "a1b2c3d4"}}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "read_theme", "id": "a1b2c3d4", "args": {}}}]}, "finishReason": "STOP"}]}),
    ]);
    let (_, message) = run(&body);
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls[0].id, "a1b2c3d4");
    assert_eq!(calls[1].id, "call_1");
    assert_eq!(calls[0].arguments, json!({}));
    assert_eq!(calls[1].arguments, json!({}));
    assert_eq!(message.stop_reason, StopReason::ToolUse);
}

#[test]
fn generated_id_avoids_a_provided_id_of_the_same_shape() {
    let body = sse(&[json!({"candidates": [{"content": {"parts": [
        {"functionCall": {"name": "f", "id": "call_1"}},
        {"functionCall": {"name": "f"}},
        {"functionCall": {"name": "f", "args": {}}}
    ]}, "finishReason": "STOP"}]})]);
    let (_, message) = run(&body);
    let ids: Vec<_> = message.tool_calls().map(|c| c.id.clone()).collect();
    assert_eq!(ids, ["call_1", "call_1_1", "call_2"]);
}

#[test]
fn thinking_then_call_with_signature_gemini3_trailing_empty_text() {
    let body = sse(&[
        json!({"candidates": [{"content": {"parts": [{"text": "**Planning**", "thought": true}], "role": "model"}}], "responseId": "r3"}),
        json!({"candidates": [{"content": {"parts": [{"text": " the call", "thought": true, "thoughtSignature": "c2lnMQ=="}], "role": "model"}}]}),
        json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Lisbon"}, "id": "a1b2c3d4"}, "thoughtSignature": "CiQBExampleSig=="}], "role": "model"}}]}),
        json!({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 9, "totalTokenCount": 95, "thoughtsTokenCount": 56}}),
    ]);
    let (_, message) = run(&body);
    assert_eq!(message.content.len(), 2);
    let AssistantContent::Thinking(t) = &message.content[0] else { panic!() };
    assert_eq!(t.thinking, "**Planning** the call");
    assert_eq!(t.thinking_signature.as_deref(), Some("c2lnMQ=="));
    let AssistantContent::ToolCall(c) = &message.content[1] else { panic!() };
    assert_eq!(c.id, "a1b2c3d4");
    assert_eq!(c.thought_signature.as_deref(), Some("CiQBExampleSig=="));
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(message.usage.output, 65);
}

#[test]
fn thinking_signature_last_non_empty_wins() {
    let body = sse(&[
        json!({"candidates": [{"content": {"parts": [{"text": "a", "thought": true, "thoughtSignature": "AAAA"}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"text": "b", "thought": true, "thoughtSignature": "BBBB"}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"text": "c", "thought": true, "thoughtSignature": ""}]}, "finishReason": "STOP"}]}),
    ]);
    let (_, message) = run(&body);
    let AssistantContent::Thinking(t) = &message.content[0] else { panic!() };
    assert_eq!(t.thinking_signature.as_deref(), Some("BBBB"));
}

#[test]
fn trailing_signature_on_empty_text_attaches_to_the_text_block() {
    let body = sse(&[
        json!({"candidates": [{"content": {"parts": [{"text": "Hello"}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"text": "", "thoughtSignature": "U2lnbmF0dXJl"}]}, "finishReason": "STOP"}]}),
    ]);
    let (_, message) = run(&body);
    assert_eq!(message.content.len(), 1);
    let AssistantContent::Text(t) = &message.content[0] else { panic!() };
    assert_eq!(t.text, "Hello");
    assert_eq!(t.text_signature.as_deref(), Some("U2lnbmF0dXJl"));
}

#[test]
fn signature_only_part_after_a_call_keeps_its_own_block() {
    let body = sse(&[json!({"candidates": [{"content": {"parts": [
        {"functionCall": {"name": "f", "args": {}}},
        {"text": "", "thoughtSignature": "U2ln"}
    ]}, "finishReason": "STOP"}]})]);
    let (_, message) = run(&body);
    assert_eq!(message.content.len(), 2);
    let AssistantContent::Text(t) = &message.content[1] else { panic!() };
    assert_eq!(t.text, "");
    assert_eq!(t.text_signature.as_deref(), Some("U2ln"));
}

#[test]
fn safety_with_a_call_is_an_error() {
    let body = sse(&[
        json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {"a": 1}}}]}, "finishReason": "SAFETY"}]}),
    ]);
    let (events, message) = run(&body);
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Refused);
    assert_eq!(error.code.as_deref(), Some("SAFETY"));
    assert_eq!(message.stop_reason, StopReason::Error);
    // Partial content kept.
    assert_eq!(message.tool_calls().count(), 1);
}

#[test]
fn recitation_and_other_are_errors() {
    for (reason, kind) in [
        ("RECITATION", ErrorKind::Refused),
        ("OTHER", ErrorKind::Provider),
        ("SOMETHING_NEW", ErrorKind::Provider),
    ] {
        let body = sse(&[
            json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": reason, "finishMessage": "why"}]}),
        ]);
        let (events, message) = run(&body);
        let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
        assert_eq!(error.kind, kind, "{reason}");
        assert!(error.message.ends_with(": why"), "{}", error.message);
        assert_eq!(message.text(), "x");
    }
}

#[test]
fn malformed_function_call_per_openclaw_38() {
    let body = sse(&[
        json!({"candidates": [{"content": {}, "finishReason": "MALFORMED_FUNCTION_CALL", "finishMessage": "Malformed function call: print(default_api.f(a=))"}]}),
    ]);
    let (events, _) = run(&body);
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
    assert_eq!(error.code.as_deref(), Some("MALFORMED_FUNCTION_CALL"));
    assert!(error.message.contains("print(default_api.f(a=))"));

    let body = sse(&[
        json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {"a": 1}}}]}}]}),
        json!({"candidates": [{"content": {}, "finishReason": "MALFORMED_FUNCTION_CALL"}]}),
    ]);
    let (events, _) = run(&body);
    assert!(matches!(
        events.last(),
        Some(AssistantEvent::Done { reason: StopReason::ToolUse, .. })
    ));
}

#[test]
fn max_tokens_is_length() {
    let body = sse(&[
        json!({"candidates": [{"content": {"parts": [{"text": "abc"}]}, "finishReason": "MAX_TOKENS"}]}),
    ]);
    let (events, _) = run(&body);
    assert!(matches!(events.last(), Some(AssistantEvent::Done { reason: StopReason::Length, .. })));
}

#[test]
fn no_finish_reason_is_truncated() {
    let body = sse(&[json!({"candidates": [{"content": {"parts": [{"text": "abc"}]}}]})]);
    let (events, message) = run(&body);
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Truncated);
    assert_eq!(message.text(), "abc");
    let (events, _) = run("");
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Truncated);
}

#[test]
fn error_inside_200_stream_keeps_partial_text() {
    let body = format!(
        "{}data: {{\"error\": {{\"code\": 503,\"message\": \"This model is currently experiencing high demand.\",\"status\": \"UNAVAILABLE\"}}}}\r\n\r\n",
        sse(&[json!({"candidates": [{"content": {"parts": [{"text": "Partial"}]}}]})])
    );
    let (events, message) = run(&body);
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Overloaded);
    assert_eq!(error.code.as_deref(), Some("UNAVAILABLE"));
    assert_eq!(message.text(), "Partial");
}

#[test]
fn bare_json_error_body_and_array_framing() {
    let (events, _) = run(
        "{\n  \"error\": {\n    \"code\": 429,\n    \"message\": \"quota\",\n    \"status\": \"RESOURCE_EXHAUSTED\"\n  }\n}\n",
    );
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::RateLimited);
    let (events, message) = run(
        "[{\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"hi\"}]}}]},\n{\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"!\"}]}, \"finishReason\": \"STOP\"}]}]",
    );
    assert!(matches!(events.last(), Some(AssistantEvent::Done { .. })));
    assert_eq!(message.text(), "hi!");
}

#[test]
fn prompt_feedback_block_is_refused() {
    let body = sse(&[
        json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7}}),
    ]);
    let (events, message) = run(&body);
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Refused);
    assert_eq!(error.code.as_deref(), Some("PROHIBITED_CONTENT"));
    assert_eq!(message.usage.input, 7);
}

#[test]
fn unknown_fields_and_parts_ignored_lenient_numbers() {
    let body = sse(&[
        json!({"candidates": [{"content": {"parts": [{"executableCode": {"code": "print(1)"}}, {"text": "ok", "future": [1]}]}, "safetyRatings": [], "index": 0}], "usageMetadata": {"trafficType": "ON_DEMAND"}, "createTime": "2026-01-01T00:00:00Z", "somethingNew": {"a": 1}}),
        json!({"candidates": [{"content": {"parts": []}, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 12.0, "candidatesTokenCount": "3", "cachedContentTokenCount": 4, "totalTokenCount": 15}}),
    ]);
    let (events, message) = run(&body);
    assert!(matches!(events.last(), Some(AssistantEvent::Done { reason: StopReason::Stop, .. })));
    assert_eq!(message.text(), "ok");
    assert_eq!(message.usage.input, 8);
    assert_eq!(message.usage.cache_read, 4);
    assert_eq!(message.usage.output, 3);
}

#[test]
fn invalid_json_is_a_decode_error() {
    let (events, _) = run("data: {\"candidates\": [\r\n\r\n");
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Decode);
    assert!(!error.retryable);
}

#[test]
fn unicode_split_anywhere() {
    let body = sse(&[
        json!({"candidates": [{"content": {"parts": [{"text": "Olá, 世界 "}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"text": "🦀✨"}]}, "finishReason": "STOP"}]}),
    ]);
    let (_, message) = run(&body);
    assert_eq!(message.text(), "Olá, 世界 🦀✨");
}

#[test]
fn text_then_thinking_then_text_switches_blocks() {
    let body = sse(&[json!({"candidates": [{"content": {"parts": [
        {"text": "a"}, {"text": "b", "thought": true}, {"text": "c"}
    ]}, "finishReason": "STOP"}]})]);
    let (_, message) = run(&body);
    assert_eq!(message.content.len(), 3);
    assert!(matches!(message.content[1], AssistantContent::Thinking(_)));
}

mod props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The decoder never panics, and always ends with exactly one terminal delta.
        #[test]
        fn arbitrary_bytes_end_in_one_terminal(body in proptest::collection::vec(any::<u8>(), 0..400), split in 1usize..50) {
            let mut sse = SseDecoder::new();
            let mut decoder = Decoder::new();
            let mut out = Vec::new();
            let mut events = Vec::new();
            let mut failed = false;
            for piece in body.chunks(split) {
                if sse.push(piece, &mut events).is_err() { failed = true; break; }
                for e in events.drain(..) { llm_core::raw::drive::decode_frame(&mut decoder, e, &mut out); }
            }
            if !failed && sse.finish(&mut events).is_ok() {
                for e in events.drain(..) { llm_core::raw::drive::decode_frame(&mut decoder, e, &mut out); }
            }
            llm_core::raw::drive::decode_end(&mut decoder, &mut out);
            let terminals = out.iter().filter(|d| matches!(d, Delta::Done | Delta::Error(_))).count();
            prop_assert_eq!(terminals, 1);
        }

        /// Any chunk sequence of text and calls assembles without panicking, with unique call ids.
        #[test]
        fn ids_unique_within_message(ids in proptest::collection::vec(proptest::option::of("[a-c_0-9]{0,3}"), 1..8)) {
            let parts: Vec<serde_json::Value> = ids.iter().map(|id| match id {
                Some(id) => json!({"functionCall": {"name": "f", "id": id}}),
                None => json!({"functionCall": {"name": "f"}}),
            }).collect();
            let body = sse(&[json!({"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}], "responseId": "r"})]);
            let (_, message) = assemble(deltas(&body, 13));
            let got: Vec<String> = message.tool_calls().map(|c| c.id.clone()).collect();
            let unique: std::collections::HashSet<&String> = got.iter().collect();
            prop_assert_eq!(got.len(), ids.len());
            prop_assert_eq!(unique.len(), got.len());
            prop_assert!(got.iter().all(|id| !id.is_empty()));
        }
    }
}

/// The `toolcall_delta` texts of a transcript, in order.
fn call_deltas(events: &[AssistantEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            AssistantEvent::ToolCallDelta { delta, .. } => Some(delta.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn call_args_are_parsed_once_and_shown_as_received() {
    // Large (more than the SSE decoder's long-line threshold, so the event's data is handed
    // over and cut down in place), pretty-printed, with escapes and non-ASCII text.
    let content: String =
        (0..4000).map(|i| format!("line {i}: \"q\" \\ caf\u{e9}\t\u{1F600}\n")).collect();
    let args = format!(
        "{{ \"path\" : \"a.txt\",\t  \"content\": {}, \"n\": [1, 2.5e3, null] }}",
        serde_json::to_string(&content).unwrap()
    );
    assert!(args.len() > 100 * 1024);
    let body = format!(
        "data: {{\"candidates\": [{{\"content\": {{\"parts\": [{{\"functionCall\": {{\"name\": \"write\", \"args\": {args}}}}}]}}, \"finishReason\": \"STOP\"}}], \"responseId\": \"r\"}}\r\n\r\n"
    );
    let (events, message) = run(&body);
    assert_eq!(call_deltas(&events), [args.as_str()]);
    let expected: serde_json::Value = serde_json::from_str(&args).unwrap();
    assert_eq!(message.tool_calls().next().unwrap().arguments, expected);
    assert!(matches!(
        events.last(),
        Some(AssistantEvent::Done { reason: StopReason::ToolUse, .. })
    ));

    // Several calls in one chunk get copies; a call whose args hold an `"error"` key takes the
    // lenient path and gives the same texts.
    let first = r#"{"error": "none", "city": "Lisbon"}"#;
    let second = r#"{"a":[{"b":"\u00e9\"x\""}]}"#;
    let body = format!(
        "data: {{\"candidates\": [{{\"content\": {{\"parts\": [{{\"functionCall\": {{\"name\": \"f\", \"args\": {first}}}}}, {{\"functionCall\": {{\"name\": \"g\", \"args\": {second}}}}}]}}, \"finishReason\": \"STOP\"}}]}}\r\n\r\n"
    );
    let (events, message) = run(&body);
    assert_eq!(call_deltas(&events), [first, second]);
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls[0].arguments, serde_json::from_str::<serde_json::Value>(first).unwrap());
    assert_eq!(calls[1].arguments, serde_json::from_str::<serde_json::Value>(second).unwrap());
}

#[test]
fn call_args_of_other_shapes() {
    // A string holding an object is that object (shown re-serialized); anything else is `{}`
    // (no delta); `null` is absent.
    let body = sse(&[json!({"candidates": [{"content": {"parts": [
        {"functionCall": {"name": "f", "args": "{\"a\": 1}"}},
        {"functionCall": {"name": "g", "args": [1, 2]}},
        {"functionCall": {"name": "h", "args": null}}
    ]}, "finishReason": "STOP"}]})]);
    let (events, message) = run(&body);
    assert_eq!(call_deltas(&events), [r#"{"a":1}"#, "{}", "{}"]);
    let args: Vec<_> = message.tool_calls().map(|c| c.arguments.clone()).collect();
    assert_eq!(args, [json!({"a": 1}), json!({}), json!({})]);
    // A lone surrogate escape in `args` is valid JSON but no Rust string: a decode error.
    let body = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": \"f\", \"args\": {\"a\": \"\\ud83d\"}}}]}, \"finishReason\": \"STOP\"}]}\r\n\r\n";
    let (events, _) = run(body);
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!("{events:?}") };
    assert_eq!(error.kind, ErrorKind::Decode);
}

fn parts_chunk(parts: serde_json::Value) -> serde_json::Value {
    json!({"candidates": [{"content": {"role": "model", "parts": parts}}]})
}

fn finish_chunk() -> serde_json::Value {
    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}]})
}

fn calls(message: &AssistantMessage) -> Vec<(String, serde_json::Value, bool)> {
    message
        .tool_calls()
        .map(|c| (c.name.clone(), c.arguments.clone(), c.arguments_incomplete))
        .collect()
}

fn arg_deltas(events: &[AssistantEvent]) -> Vec<(String, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            AssistantEvent::ToolCallDelta { delta, changed, .. } => {
                Some((delta.clone(), changed.as_deref().map(str::to_owned)))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn partial_args_stream_as_argument_fragments_with_strings_split_across_parts() {
    let body = sse(&[
        parts_chunk(
            json!([{"functionCall": {"name": "get_weather", "willContinue": true}, "thoughtSignature": "c2ln"}]),
        ),
        parts_chunk(
            json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.city", "stringValue": "Lis", "willContinue": true}], "willContinue": true}}]),
        ),
        parts_chunk(
            json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.city", "stringValue": "bon \"old\""}], "willContinue": true}}]),
        ),
        parts_chunk(
            json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.days", "numberValue": 3}, {"jsonPath": "$.metric", "boolValue": true}], "willContinue": true}}]),
        ),
        parts_chunk(json!([{"functionCall": {}}])),
        finish_chunk(),
    ]);
    let (events, message) = run(&body);
    assert_eq!(
        calls(&message),
        vec![(
            "get_weather".to_owned(),
            json!({"city": "Lisbon \"old\"", "days": 3, "metric": true}),
            false
        )]
    );
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    let deltas = arg_deltas(&events);
    assert_eq!(
        deltas,
        vec![
            ("{\"city\":\"Lis".to_owned(), Some("/city".to_owned())),
            ("bon \\\"old\\\"\"".to_owned(), Some("/city".to_owned())),
            (",\"days\":3".to_owned(), Some("/days".to_owned())),
            (",\"metric\":true".to_owned(), Some("/metric".to_owned())),
            ("}".to_owned(), None),
        ]
    );
    let AssistantContent::ToolCall(call) = &message.content[0] else { panic!("not a call") };
    assert_eq!(call.thought_signature.as_deref(), Some("c2ln"));
}

#[test]
fn several_streamed_calls_with_nested_paths_and_arrays() {
    let body = sse(&[
        parts_chunk(json!([{"functionCall": {"name": "plan", "id": "p1", "willContinue": true}}])),
        parts_chunk(json!([{"functionCall": {"partialArgs": [
            {"jsonPath": "$.trip.from", "stringValue": "Porto"},
            {"jsonPath": "$.trip.stops[0].name", "stringValue": "Coimbra"},
            {"jsonPath": "$.trip.stops[1].name", "stringValue": "Lei", "willContinue": true}
        ], "willContinue": true}}])),
        parts_chunk(json!([{"functionCall": {"partialArgs": [
            {"jsonPath": "$.trip.stops[1].name", "stringValue": "ria"},
            {"jsonPath": "$.trip['to']", "stringValue": "Lisbon"},
            {"jsonPath": "$.note", "nullValue": "NULL_VALUE"}
        ], "willContinue": true}}])),
        parts_chunk(
            json!([{"functionCall": {}}, {"functionCall": {"name": "get_time", "willContinue": true}}]),
        ),
        parts_chunk(
            json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.zone", "stringValue": "UTC"}]}}]),
        ),
        finish_chunk(),
    ]);
    let (events, message) = run(&body);
    assert_eq!(
        calls(&message),
        vec![
            (
                "plan".to_owned(),
                json!({"trip": {"from": "Porto", "stops": [{"name": "Coimbra"}, {"name": "Leiria"}], "to": "Lisbon"}, "note": null}),
                false
            ),
            ("get_time".to_owned(), json!({"zone": "UTC"}), false),
        ]
    );
    let ids: Vec<&str> = message.tool_calls().map(|c| c.id.as_str()).collect();
    assert_eq!(ids[0], "p1");
    assert!(!ids[1].is_empty() && ids[1] != "p1");
    // The text streamed is the arguments, fragment by fragment.
    let text: String = arg_deltas(&events).into_iter().map(|(d, _)| d).collect();
    assert_eq!(
        text,
        r#"{"trip":{"from":"Porto","stops":[{"name":"Coimbra"},{"name":"Leiria"}],"to":"Lisbon"},"note":null}{"zone":"UTC"}"#
    );
}

#[test]
fn a_finished_stream_closes_a_call_that_never_got_its_closing_part() {
    let body = sse(&[
        parts_chunk(json!([{"functionCall": {"name": "f", "willContinue": true}}])),
        parts_chunk(
            json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.a", "stringValue": "x", "willContinue": true}], "willContinue": true}}]),
        ),
        finish_chunk(),
    ]);
    let (_, message) = run(&body);
    assert_eq!(calls(&message), vec![("f".to_owned(), json!({"a": "x"}), false)]);
    assert_eq!(message.stop_reason, StopReason::ToolUse);

    // Cut before the finish: a truncated error, the call's arguments marked incomplete.
    let body = sse(&[
        parts_chunk(json!([{"functionCall": {"name": "f", "willContinue": true}}])),
        parts_chunk(
            json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.a", "stringValue": "x", "willContinue": true}], "willContinue": true}}]),
        ),
    ]);
    let (events, message) = run(&body);
    assert!(
        matches!(events.last(), Some(AssistantEvent::Error { error, .. }) if error.kind == ErrorKind::Truncated)
    );
    assert_eq!(calls(&message), vec![("f".to_owned(), json!({"a": "x"}), true)]);
}

#[test]
fn paths_out_of_document_order_end_the_call_with_its_whole_arguments() {
    let body = sse(&[
        parts_chunk(json!([{"functionCall": {"name": "f", "willContinue": true}}])),
        parts_chunk(json!([{"functionCall": {"partialArgs": [
            {"jsonPath": "$.a.x", "numberValue": 1},
            {"jsonPath": "$.b", "numberValue": 2},
            {"jsonPath": "$.a.y", "numberValue": 1.5}
        ], "willContinue": true}}])),
        parts_chunk(json!([{"functionCall": {}}])),
        finish_chunk(),
    ]);
    let (_, message) = run(&body);
    assert_eq!(
        calls(&message),
        vec![("f".to_owned(), json!({"a": {"x": 1, "y": 1.5}, "b": 2}), false)]
    );
}

#[test]
fn a_bad_json_path_or_a_skipped_index_is_a_decode_error() {
    for arg in [
        json!({"jsonPath": "a.b", "stringValue": "x"}),
        json!({"jsonPath": "$.items[5]", "stringValue": "x"}),
    ] {
        let body = sse(&[
            parts_chunk(json!([{"functionCall": {"name": "f", "willContinue": true}}])),
            parts_chunk(json!([{"functionCall": {"partialArgs": [arg], "willContinue": true}}])),
            finish_chunk(),
        ]);
        let (events, _) = run(&body);
        assert!(
            matches!(events.last(), Some(AssistantEvent::Error { error, .. }) if error.kind == ErrorKind::Decode),
            "{arg}"
        );
    }
}

#[test]
fn response_id_and_model_read_leniently_escaped_or_not_and_the_first_candidate_only() {
    let metadata = |chunk: serde_json::Value| {
        deltas(&sse(&[chunk]), usize::MAX).into_iter().find_map(|d| match d {
            Delta::Metadata { response_id, response_model } => Some((response_id, response_model)),
            _ => None,
        })
    };
    let text = |id: Option<&str>, model: Option<&str>| {
        Some((id.map(str::to_owned), model.map(str::to_owned)))
    };
    // Plain strings are borrowed, escaped ones decoded, numbers and booleans rendered as text.
    assert_eq!(
        metadata(json!({"responseId": "r-1", "modelVersion": "gemini"})),
        text(Some("r-1"), Some("gemini"))
    );
    let escaped =
        "data: {\"responseId\": \"r\\u002d\\\"2\\\"\", \"modelVersion\": \"g\\u00e9mini\"}\r\n\r\n";
    let found = deltas(escaped, usize::MAX).into_iter().find_map(|d| match d {
        Delta::Metadata { response_id, response_model } => Some((response_id, response_model)),
        _ => None,
    });
    assert_eq!(found, text(Some("r-\"2\""), Some("gémini")));
    assert_eq!(
        metadata(json!({"responseId": 12, "modelVersion": true})),
        text(Some("12"), Some("true"))
    );
    assert_eq!(
        metadata(json!({"responseId": 1.5, "modelVersion": "m"})),
        text(Some("1.5"), Some("m"))
    );
    assert_eq!(
        metadata(json!({"responseId": {"a": [1]}, "modelVersion": "m"})),
        text(None, Some("m"))
    );
    assert_eq!(metadata(json!({"responseId": null, "modelVersion": ["x"]})), None);

    // The first candidate is the one read; the others are parsed and dropped.
    let body = sse(&[json!({"candidates": [
        {"content": {"parts": [{"text": "first"}]}, "finishReason": "STOP"},
        {"content": {"parts": [{"text": "second"}]}, "finishReason": "STOP"}
    ]})]);
    let (_, message) = run(&body);
    assert_eq!(message.text(), "first");
    let (events, _) =
        run("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a\"}]}}, 7]}\r\n\r\n");
    // A candidate of another shape fails the chunk, as it did read into a vector.
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!("{events:?}") };
    assert_eq!(error.kind, ErrorKind::Decode);
}

#[test]
fn a_hostile_response_id_is_skipped_without_recursion_and_the_chunk_still_read() {
    // Ten thousand nested arrays (past serde_json's recursion limit for values) or nested
    // objects: any non-text `responseId` is absent, skipped without recursing, and the rest
    // of the chunk is read.
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let objects = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    for hostile in [deep, objects] {
        let body = format!(
            "data: {{\"responseId\": {hostile}, \"candidates\": [{{\"content\": {{\"parts\": [{{\"text\": \"ok\"}}]}}, \"finishReason\": \"STOP\"}}]}}\r\n\r\n"
        );
        let (events, message) = run(&body);
        assert!(matches!(events.last(), Some(AssistantEvent::Done { .. })), "{events:?}");
        assert_eq!(message.text(), "ok");
        assert_eq!(message.response_id, None);
    }
}
