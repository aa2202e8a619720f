#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use llm_core::raw::sse::SseDecoder;
use llm_core::{AssistantContent, AssistantEvent, ModelCost, raw::MessageAssembler};
use serde_json::json;

use super::*;
use crate::convert::project_tools;

fn model() -> llm_core::Model {
    llm_core::Model {
        id: "claude-sonnet-4-5".into(),
        api: crate::API.into(),
        provider: "anthropic".into(),
        cost: ModelCost { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75 },
        ..llm_core::Model::default()
    }
}

/// Wire bytes -> SSE -> decoder -> deltas, in chunks of `chunk` bytes.
fn deltas_chunked(decoder: &mut Decoder, sse: &str, chunk: usize) -> Vec<Delta> {
    let mut sse_decoder = SseDecoder::new();
    let mut events = Vec::new();
    let mut out = Vec::new();
    for piece in sse.as_bytes().chunks(chunk.max(1)) {
        sse_decoder.push(piece, &mut events).unwrap();
        for e in events.drain(..) {
            llm_core::raw::drive::decode_frame(decoder, e, &mut out);
        }
    }
    sse_decoder.finish(&mut events).unwrap();
    for e in events.drain(..) {
        llm_core::raw::drive::decode_frame(decoder, e, &mut out);
    }
    llm_core::raw::drive::decode_end(decoder, &mut out);
    out
}

fn deltas(sse: &str) -> Vec<Delta> {
    deltas_chunked(&mut Decoder::new(), sse, usize::MAX)
}

fn assemble(deltas: Vec<Delta>) -> Vec<AssistantEvent> {
    let mut a = MessageAssembler::new(&model(), 0);
    for d in deltas {
        a.push(d);
    }
    std::iter::from_fn(|| a.next_event()).collect()
}

fn transcript(sse: &str) -> String {
    llm_core::raw::printer::print_transcript(&assemble(deltas(sse)))
}

fn final_message(events: &[AssistantEvent]) -> &llm_core::AssistantMessage {
    match events.last().unwrap() {
        AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. } => message,
        other => panic!("not terminal: {other:?}"),
    }
}

fn sse(events: &[(&str, &str)]) -> String {
    events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect()
}

const START: &str = r#"{"type":"message_start","message":{"model":"claude-sonnet-4-5-20250929","id":"msg_01ExampleAAAAAAAAAAAAAAAA","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":18,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}}}"#;

#[test]
fn plain_text_with_padding_and_ping() {
    let body = sse(&[
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        ("ping", r#"{"type": "ping"}"#),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Tromsø is"}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" cold in March."}       }"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0    }"#),
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":18,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":7}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let m = final_message(&events);
    assert_eq!(m.text(), "Tromsø is cold in March.");
    assert_eq!(m.stop_reason, StopReason::Stop);
    assert_eq!(m.response_id.as_deref(), Some("msg_01ExampleAAAAAAAAAAAAAAAA"));
    assert_eq!(m.response_model.as_deref(), Some("claude-sonnet-4-5-20250929"));
    assert_eq!((m.usage.input, m.usage.output, m.usage.total_tokens), (18, 7, 25));
    // Every byte split gives the same transcript.
    let whole = transcript(&body);
    for chunk in [1, 2, 3, 7, 64] {
        let t = llm_core::raw::printer::print_transcript(&assemble(deltas_chunked(
            &mut Decoder::new(),
            &body,
            chunk,
        )));
        assert_eq!(t, whole, "chunk {chunk}");
    }
}

#[test]
fn tool_call_fragments_and_empty_first_delta() {
    let body = sse(&[
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01ExampleBBBBBBBBBBBBBBB","name":"get_weather","caller":{"type":"direct"},"input":{}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"ci"}}"#,
        ),
        ("ping", r#"{"type": "ping"}"#),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"ty\": \"Lis"}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"bon\"}"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":58}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let deltas_seen =
        events.iter().filter(|e| matches!(e, AssistantEvent::ToolCallDelta { .. })).count();
    assert_eq!(deltas_seen, 3, "the empty first fragment emits nothing");
    let m = final_message(&events);
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    let call = m.tool_calls().next().unwrap();
    assert_eq!(call.id, "toolu_01ExampleBBBBBBBBBBBBBBB");
    assert_eq!(call.name, "get_weather");
    assert_eq!(call.arguments, json!({"city": "Lisbon"}));
    // Usage: input from message_start kept, output from message_delta.
    assert_eq!((m.usage.input, m.usage.output), (18, 58));
}

#[test]
fn no_argument_tool_ends_with_empty_object() {
    let body = sse(&[
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01X","name":"list_files","input":{}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    assert_eq!(final_message(&events).tool_calls().next().unwrap().arguments, json!({}));
}

#[test]
fn input_at_start_without_deltas_is_kept() {
    // OpenClaw overwrites this with `{}`; we keep it.
    let body = sse(&[
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01Y","name":"read","input":{"path":"/etc/hosts"}}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let m = final_message(&events);
    assert_eq!(m.tool_calls().next().unwrap().arguments, json!({"path": "/etc/hosts"}));
    let end = events.iter().find_map(|e| match e {
        AssistantEvent::ToolCallEnd { tool_call, .. } => Some(tool_call.clone()),
        _ => None,
    });
    assert_eq!(end.unwrap().arguments, json!({"path": "/etc/hosts"}));
}

#[test]
fn thinking_signature_and_redacted_blocks() {
    let body = sse(&[
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}             }"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"User wants Lisbon weather;"}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkYIBRgCKkBexampleSigAAAA=="}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3vaPayload"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01C","name":"get_weather","input":{}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\":\"Lisbon\"}"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":2}"#),
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":90}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let m = final_message(&events);
    assert_eq!(m.content.len(), 3);
    let AssistantContent::Thinking(t) = &m.content[0] else { panic!() };
    assert_eq!(t.thinking, "User wants Lisbon weather;");
    assert_eq!(t.thinking_signature.as_deref(), Some("EqQBCkYIBRgCKkBexampleSigAAAA=="));
    assert!(!t.redacted);
    let AssistantContent::Thinking(r) = &m.content[1] else { panic!() };
    assert!(r.redacted);
    assert_eq!(r.thinking_signature.as_deref(), Some("EmwKAhgBEgy3vaPayload"));
    assert_eq!(m.tool_calls().count(), 1);
    // The empty thinking delta produced no event.
    let thinking_deltas =
        events.iter().filter(|e| matches!(e, AssistantEvent::ThinkingDelta { .. })).count();
    assert_eq!(thinking_deltas, 1);
}

#[test]
fn stop_reason_mapping() {
    for (wire, reason) in [
        ("end_turn", StopReason::Stop),
        ("stop_sequence", StopReason::Stop),
        ("pause_turn", StopReason::Stop),
        ("max_tokens", StopReason::Length),
        ("model_context_window_exceeded", StopReason::Length),
        ("tool_use", StopReason::ToolUse),
    ] {
        let data = format!(r#"{{"type":"message_delta","delta":{{"stop_reason":"{wire}"}}}}"#);
        let body = sse(&[
            ("message_start", START),
            ("message_delta", &data),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ]);
        let events = assemble(deltas(&body));
        assert!(
            matches!(events.last(), Some(AssistantEvent::Done { reason: r, .. }) if *r == reason),
            "{wire}"
        );
    }
}

#[test]
fn refusal_messages_name_the_category_and_explanation() {
    let cases = [
        (None, "Anthropic refusal."),
        (
            Some(json!({"category": " cyber ", "explanation": "  "})),
            "Anthropic refusal (category: cyber).",
        ),
        (Some(json!({"explanation": "Not allowed."})), "Anthropic refusal: Not allowed."),
        (
            Some(json!({"category": "bio", "explanation": "No."})),
            "Anthropic refusal (category: bio): No.",
        ),
        (Some(json!({"category": 3})), "Anthropic refusal."),
        (Some(json!("cyber")), "Anthropic refusal."),
    ];
    for (details, expected) in cases {
        let e = refusal_error(details.as_ref());
        assert_eq!(e.message, expected);
        assert_eq!(
            (e.kind, e.retryable, e.code.as_deref()),
            (ErrorKind::Refused, false, Some("provider_refusal"))
        );
        assert_eq!(e.provider, crate::PROVIDER);
    }
}

#[test]
fn refusal_is_an_error_with_the_openclaw_text() {
    let body = sse(&[
        ("message_start", START),
        ("ping", r#"{"type": "ping"}"#),
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null,"stop_details":{"type":"refusal","category":"cyber","explanation":"This request asks for malware."}},"usage":{"output_tokens":3}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let AssistantEvent::Error { reason, error, message } = events.last().unwrap() else { panic!() };
    assert_eq!(*reason, StopReason::Error);
    assert_eq!(error.kind, ErrorKind::Refused);
    assert_eq!(
        error.message,
        "Anthropic refusal (category: cyber): This request asks for malware."
    );
    assert_eq!(message.error_code.as_deref(), Some("provider_refusal"));
    assert_eq!(message.usage.output, 3);

    let bare = sse(&[
        ("message_start", START),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"refusal"}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&bare));
    let AssistantEvent::Error { error, .. } = events.last().unwrap() else { panic!() };
    assert_eq!(error.message, "Anthropic refusal.");
}

#[test]
fn unknown_stop_reason_is_an_error() {
    let body = sse(&[
        ("message_start", START),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"brand_new_reason"}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let AssistantEvent::Error { error, .. } = events.last().unwrap() else { panic!() };
    assert_eq!(error.message, "Unhandled stop reason: brand_new_reason");
}

#[test]
fn error_event_after_text_keeps_partial() {
    let body = sse(&[
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Partial ans"}}"#,
        ),
        (
            "error",
            r#"{"type":"error","error":{"details":null,"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
    ]);
    let events = assemble(deltas(&body));
    assert_eq!(events.iter().filter(|e| e.is_terminal()).count(), 1);
    let AssistantEvent::Error { error, message, .. } = events.last().unwrap() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Overloaded);
    assert_eq!(message.text(), "Partial ans");
}

#[test]
fn stream_cut_before_message_stop_is_truncated() {
    let body = sse(&[
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#,
        ),
    ]);
    let events = assemble(deltas(&body));
    let AssistantEvent::Error { error, message, .. } = events.last().unwrap() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Truncated);
    assert_eq!(error.message, "Anthropic stream ended before message_stop");
    assert_eq!(message.text(), "Hello");
    // An empty body is never a silent success either.
    let events = assemble(deltas(""));
    assert!(matches!(events.last(), Some(AssistantEvent::Error { .. })));
}

#[test]
fn unknown_events_blocks_and_fields_are_ignored() {
    let body = sse(&[
        ("message_start", START),
        ("future_event", r#"{"type":"future_event","whatever":[1,2,3]}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_01","name":"web_search","input":{}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"x\"}"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"","citations":null,"new_field":{"a":1}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"type":"web"}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"ok","extra":true}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":7,"delta":{"type":"text_delta","text":"orphan"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4.0},"context_management":{"applied_edits":[]}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let m = final_message(&events);
    // The server tool block is kept whole (opaque), the text with its citation.
    assert_eq!(m.content.len(), 2);
    let AssistantContent::ProviderContent(p) = &m.content[0] else { panic!("{m:?}") };
    assert_eq!(p.wire_type, "server_tool_use");
    assert_eq!(
        p.data,
        json!({"type":"server_tool_use","id":"srvtoolu_01","name":"web_search","input":{"query":"x"}})
    );
    assert_eq!(m.tool_calls().count(), 0, "a server tool is never a client tool call");
    let AssistantContent::Text(t) = &m.content[1] else { panic!("{m:?}") };
    assert_eq!(t.text, "ok");
    assert_eq!(t.text_signature.as_deref(), Some(r#"{"citations":[{"type":"web"}]}"#));
    assert_eq!(m.usage.output, 4);
    assert_eq!(m.stop_reason, StopReason::Stop);
}

#[test]
fn a_known_block_with_mistyped_fields_is_a_decode_error_not_opaque_content() {
    let body = sse(&[
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":5}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let AssistantEvent::Error { error, message, .. } = events.last().unwrap() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Decode);
    assert!(message.content.is_empty());
}

#[test]
fn malformed_json_is_a_decode_error() {
    let body = sse(&[("message_start", START), ("content_block_delta", "{not json")]);
    let events = assemble(deltas(&body));
    let AssistantEvent::Error { error, .. } = events.last().unwrap() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Decode);
    assert!(error.message.starts_with("Could not parse Anthropic SSE event content_block_delta"));
}

#[test]
fn usage_with_cache_tokens() {
    let start = r#"{"type":"message_start","message":{"id":"msg_01C","model":"claude-sonnet-4-5","usage":{"input_tokens":12,"cache_creation_input_tokens":2000,"cache_read_input_tokens":30000,"cache_creation":{"ephemeral_5m_input_tokens":500,"ephemeral_1h_input_tokens":1500},"output_tokens":1}}}"#;
    let body = sse(&[
        ("message_start", start),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":40}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let u = final_message(&events).usage;
    assert_eq!((u.input, u.output, u.cache_read, u.cache_write), (12, 40, 30000, 2000));
    assert_eq!(u.total_tokens, 32052);
    let expected = 12.0 * 3.0 / 1e6 + 40.0 * 15.0 / 1e6 + 30000.0 * 0.3 / 1e6 + 2000.0 * 3.75 / 1e6;
    assert!((u.cost.total - expected).abs() < 1e-12);

    // Only the split (no total): 5m + 1h.
    let mut t = Tokens::default();
    t.update(
        &serde_json::from_str(
            r#"{"cache_creation":{"ephemeral_5m_input_tokens":5,"ephemeral_1h_input_tokens":7}}"#,
        )
        .unwrap(),
    );
    assert_eq!(t.usage().cache_write, 12);
}

#[test]
fn oauth_names_are_mapped_back() {
    let tools = vec![llm_core::Tool {
        name: "read".into(),
        description: "Read a file".into(),
        parameters: json!({"type":"object","properties":{"path":{"type":"string"}}}),
    }];
    let projection = project_tools(&tools, true).unwrap();
    let names = ToolNames::from_projection(&projection);
    let body = sse(&[
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01R","name":"Read","input":{}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"a\"}"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01S","name":"Bash","input":{}}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas_chunked(&mut Decoder::with_tool_names(names), &body, 5));
    let names: Vec<String> = final_message(&events).tool_calls().map(|c| c.name.clone()).collect();
    assert_eq!(names, ["read", "Bash"], "unknown wire names pass through");
}

/// A `message_start` repeated with the same id (a proxy echo) changes nothing; later
/// blocks at a reused index are still new blocks.
#[test]
fn repeated_message_start_with_the_same_id_is_ignored() {
    let body = sse(&[
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"one"}}"#,
        ),
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"two"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let message = final_message(&events);
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!(message.content.len(), 2);
    assert_eq!(message.text(), "onetwo");
    assert_eq!(events.iter().filter(|e| matches!(e, AssistantEvent::Start)).count(), 1);
}

#[test]
fn never_panics_on_garbage() {
    let inputs = [
        "data: {}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\"}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":-1,\"delta\":null}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":1e30}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":18446744073709551615,\"content_block\":{\"type\":\"tool_use\",\"input\":\"str\"}}\n\n",
        "event: error\ndata: \n\n",
        "data: [DONE]\n\n",
    ];
    for input in inputs {
        let events = assemble(deltas(input));
        assert_eq!(events.iter().filter(|e| e.is_terminal()).count(), 1, "{input}");
    }
}

const START_B: &str = r#"{"type":"message_start","message":{"id":"msg_B","model":"claude-sonnet-4-5","usage":{"input_tokens":3,"output_tokens":1}}}"#;

#[test]
fn second_message_start_with_another_id_is_an_error_retryable_only_before_content() {
    let text_block =
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
    let text_delta =
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"one"}}"#;
    // After content: not retryable, the partial text is kept, nothing of message B lands.
    let body = sse(&[
        ("message_start", START),
        ("content_block_start", text_block),
        ("content_block_delta", text_delta),
        ("message_start", START_B),
        ("content_block_start", text_block),
        ("content_block_delta", text_delta),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let AssistantEvent::Error { error, message, .. } = events.last().unwrap() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Decode);
    assert_eq!(error.code.as_deref(), Some("spliced_message"));
    assert!(!error.retryable);
    assert!(error.message.contains("msg_B"), "{}", error.message);
    assert_eq!(message.text(), "one");
    assert_eq!(events.iter().filter(|e| e.is_terminal()).count(), 1);

    // Before content: retryable, so the driver sends the request again.
    let body = sse(&[("message_start", START), ("message_start", START_B)]);
    let out = deltas(&body);
    let Some(Delta::Error(error)) = out.last() else { panic!("{out:?}") };
    assert!(error.retryable);
}

#[test]
fn message_start_content_blocks_are_decoded_and_a_call_stops_for_tool_use() {
    let start = r#"{"type":"message_start","message":{"id":"msg_P","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_P1","name":"get_weather","input":{"city":"Oslo"},"caller":{"type":"code_execution_20250825","tool_id":"srvtoolu_P0"}}],"stop_reason":null,"usage":{"input_tokens":5,"output_tokens":9}}}"#;
    let body = sse(&[("message_start", start), ("message_stop", r#"{"type":"message_stop"}"#)]);
    for chunk in [1, 7, usize::MAX] {
        let events = assemble(deltas_chunked(&mut Decoder::new(), &body, chunk));
        let m = final_message(&events);
        assert_eq!(m.stop_reason, StopReason::ToolUse);
        let call = m.tool_calls().next().unwrap();
        assert_eq!((call.id.as_str(), call.name.as_str()), ("toolu_P1", "get_weather"));
        assert_eq!(call.arguments, json!({"city": "Oslo"}));
    }
}

#[test]
fn compaction_and_result_blocks_are_kept_whole() {
    let body = sse(&[
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"compaction","content":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"compaction_delta","content":"Summary: ","encrypted_content":"enc1"}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"compaction_delta","content":"asked about Oslo."}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"web_fetch_tool_result","tool_use_id":"srvtoolu_2","content":{"type":"web_fetch_result","url":"https://example.com"}}}"#,
        ),
        // No stop for block 1: it is still emitted at message_stop.
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let m = final_message(&events);
    let kept: Vec<serde_json::Value> = m
        .content
        .iter()
        .map(|c| match c {
            AssistantContent::ProviderContent(p) => p.data.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kept,
        [
            json!({"type":"compaction","content":"Summary: asked about Oslo.","encrypted_content":"enc1"}),
            json!({"type":"web_fetch_tool_result","tool_use_id":"srvtoolu_2","content":{"type":"web_fetch_result","url":"https://example.com"}}),
        ]
    );
    let shown = events.iter().filter(|e| matches!(e, AssistantEvent::ProviderContent { .. }));
    assert_eq!(shown.count(), 2, "a UI sees both blocks");
}

#[test]
fn lone_surrogate_halves_in_block_start_text_are_joined_or_replaced_not_an_error() {
    // The start's own text ends with a high half that the first delta completes; the thinking
    // start holds halves that nothing completes (one at each end, one inside).
    let body = sse(&[
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"\udc00think \ud83d here\ud83d","signature":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"Smile \ud83d"}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"\ude00 done"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    for chunk in [1, 5, usize::MAX] {
        let events = assemble(deltas_chunked(&mut Decoder::new(), &body, chunk));
        let AssistantEvent::Done { message, .. } = events.last().unwrap() else {
            panic!("{events:?}")
        };
        let AssistantContent::Thinking(thinking) = &message.content[0] else { panic!() };
        assert_eq!(thinking.thinking, "\u{FFFD}think \u{FFFD} here\u{FFFD}");
        assert_eq!(thinking.thinking_signature.as_deref(), Some("sig"));
        assert_eq!(message.text(), "Smile \u{1F600} done");
    }
}

#[test]
fn lone_surrogate_half_in_a_block_given_whole_at_message_start_is_replaced() {
    let start = r#"{"type":"message_start","message":{"id":"msg_S","model":"claude-sonnet-4-5","content":[{"type":"text","text":"cut \ud83d"}],"usage":{"input_tokens":5,"output_tokens":2}}}"#;
    let body = sse(&[
        ("message_start", start),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let AssistantEvent::Done { message, .. } = events.last().unwrap() else { panic!("{events:?}") };
    assert_eq!(message.text(), "cut \u{FFFD}");
}

#[test]
fn lone_surrogate_half_in_an_opaque_block_is_replaced_not_an_error() {
    let body = sse(&[
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"web_fetch_tool_result","tool_use_id":"srvtoolu_1","content":{"title":"cut \ud83d","pair":"\ud83d\ude00","escaped":"\\ud800"}}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let AssistantEvent::Done { message, .. } = events.last().unwrap() else { panic!("{events:?}") };
    let AssistantContent::ProviderContent(block) = &message.content[0] else { panic!() };
    assert_eq!(
        block.data["content"],
        json!({"title": "cut \u{FFFD}", "pair": "\u{1F600}", "escaped": "\\ud800"})
    );
}

#[test]
fn a_block_start_that_is_not_an_object_is_ignored() {
    // A list with the fields in order would read as a text block if it were not checked.
    let body = sse(&[
        ("message_start", START),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":["text","shown?"]}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}"#,
        ),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = assemble(deltas(&body));
    let AssistantEvent::Done { message, .. } = events.last().unwrap() else { panic!("{events:?}") };
    assert!(message.content.is_empty(), "{message:?}");
}

/// Runs raw events (name, data) through a decoder, with or without its templates.
fn decode_events(events: &[(&str, String)], templates: bool) -> (Vec<Delta>, bool) {
    let mut decoder = Decoder::new();
    if !templates {
        decoder.templates = EventTemplates::off();
    }
    let mut out = Vec::new();
    for (name, data) in events {
        let event = SseEvent { event: Some((*name).to_owned()), data: data.clone(), id: None };
        decoder.event(event, &mut out);
    }
    decoder.end(&mut out);
    (out, decoder.templates.matched())
}

/// `content_block_delta` data around a fragment already written as a JSON literal.
fn raw_delta(index: u64, kind: &str, field: &str, text: &str, padding: usize) -> String {
    format!(
        r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"{kind}","{field}":"{text}"}}{}}}"#,
        " ".repeat(padding)
    )
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// The oracle is the decoder's own full parse of every event: templates change nothing
    /// a consumer sees, whatever the events are.
    #[test]
    fn templates_change_no_delta(steps in proptest::collection::vec(
        (0u8..9, 0u64..3, llm_testkit::strategies::json_string_literal(), 0usize..4),
        0..40,
    )) {
        let mut events = vec![(
            "message_start",
            r#"{"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":1}}}"#.to_owned(),
        )];
        for (kind, index, text, padding) in steps {
            events.push(match kind {
                0 => ("content_block_start", format!(r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"text","text":""}}}}"#)),
                1 => ("content_block_start", format!(r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"tool_use","id":"t{index}","name":"f","input":{{}}}}}}"#)),
                2 => ("content_block_start", format!(r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"thinking","thinking":""}}}}"#)),
                3 => ("content_block_delta", raw_delta(index, "text_delta", "text", &text, padding)),
                4 => ("content_block_delta", raw_delta(index, "input_json_delta", "partial_json", &text, padding)),
                5 => ("content_block_delta", raw_delta(index, "thinking_delta", "thinking", &text, padding)),
                6 => ("content_block_delta", raw_delta(index, "text_delta", "thinking", &text, padding)),
                7 => ("content_block_stop", format!(r#"{{"type":"content_block_stop","index":{index}}}"#)),
                _ => ("error", raw_delta(index, "text_delta", "text", &text, padding)),
            });
        }
        events.push(("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#.to_owned()));
        events.push(("message_stop", r#"{"type":"message_stop"}"#.to_owned()));
        proptest::prop_assert_eq!(decode_events(&events, true).0, decode_events(&events, false).0);
    }
}

#[test]
fn deltas_read_through_a_template_decode_as_the_full_parse() {
    let mut events = vec![
        ("message_start", r#"{"type":"message_start","message":{"id":"msg_1","model":"claude"}}"#.to_owned()),
        ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#.to_owned()),
    ];
    for (i, text) in [r#"{\"a\""#, r#":\"\\ud83d"#, r#"\\ude00\"}"#].iter().enumerate() {
        events.push((
            "content_block_delta",
            raw_delta(0, "input_json_delta", "partial_json", text, i * 3),
        ));
    }
    events.push(("content_block_stop", r#"{"type":"content_block_stop","index":0}"#.to_owned()));
    events.push((
        "message_delta",
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"}}"#.to_owned(),
    ));
    events.push(("message_stop", r#"{"type":"message_stop"}"#.to_owned()));
    let (with, used) = decode_events(&events, true);
    let (without, unused) = decode_events(&events, false);
    assert!(used && !unused);
    assert_eq!(with, without);
}
