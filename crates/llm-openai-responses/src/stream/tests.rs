#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use llm_core::raw::printer::print_transcript;
use llm_core::raw::sse::SseDecoder;
use llm_core::raw::strict::{StrictPlan, to_strict};
use llm_core::{
    AssistantContent, AssistantEvent, AssistantMessage, ErrorKind, Model, StopReason,
    raw::MessageAssembler,
};
use serde_json::{Value, json};

use super::Decoder;

fn model() -> Model {
    Model {
        id: "gpt-5.4-mini".into(),
        api: crate::API.into(),
        provider: "openai".into(),
        cost: llm_core::ModelCost { input: 1.0, output: 4.0, cache_read: 0.1, cache_write: 0.0 },
        ..Model::default()
    }
}

/// `event: <type>\ndata: <json>\n\n` for each payload.
fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {}\n\n", e["type"].as_str().unwrap_or("x"), e))
        .collect()
}

type Plans = Arc<BTreeMap<String, Arc<StrictPlan>>>;

fn run_chunks(chunks: &[&[u8]], tools: &[&str], plans: &Plans) -> Vec<AssistantEvent> {
    let mut sse = SseDecoder::new();
    let mut raw = Vec::new();
    let names: BTreeSet<String> = tools.iter().map(|s| (*s).to_owned()).collect();
    let mut decoder = Decoder::new(Arc::new(names), Arc::clone(plans));
    let mut deltas = Vec::new();
    for chunk in chunks {
        sse.push(chunk, &mut raw).unwrap();
        for event in raw.drain(..) {
            llm_core::raw::drive::decode_frame(&mut decoder, event, &mut deltas);
        }
    }
    sse.finish(&mut raw).unwrap();
    for event in raw.drain(..) {
        llm_core::raw::drive::decode_frame(&mut decoder, event, &mut deltas);
    }
    llm_core::raw::drive::decode_end(&mut decoder, &mut deltas);
    let mut assembler = MessageAssembler::new(&model(), 0);
    for delta in deltas {
        assembler.push(delta);
    }
    std::iter::from_fn(|| assembler.next_event()).collect()
}

/// Runs the text whole and one byte at a time; both must agree.
fn run_with(text: &str, tools: &[&str]) -> Vec<AssistantEvent> {
    run_strict(text, tools, &Plans::default())
}

/// [`run_with`] for a request whose strict tools have `plans`.
fn run_strict(text: &str, tools: &[&str], plans: &Plans) -> Vec<AssistantEvent> {
    let whole = run_chunks(&[text.as_bytes()], tools, plans);
    let bytes: Vec<&[u8]> = text.as_bytes().chunks(1).collect();
    let split = run_chunks(&bytes, tools, plans);
    assert_eq!(print_transcript(&whole), print_transcript(&split));
    whole
}

fn run(text: &str) -> Vec<AssistantEvent> {
    run_with(text, &[])
}

fn final_message(events: &[AssistantEvent]) -> &AssistantMessage {
    match events.last() {
        Some(AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. }) => {
            message
        }
        other => panic!("no terminal event: {other:?}"),
    }
}

fn created() -> Value {
    json!({"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-5.4-mini-2026-03-17","output":[]}})
}

fn completed(status: &str) -> Value {
    json!({"type":"response.completed","sequence_number":99,"response":{"id":"resp_1","status":status,
        "usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":40},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":105}}})
}

fn call_added(index: u64, call: &str, item: &str, name: &str) -> Value {
    json!({"type":"response.output_item.added","output_index":index,"item":{"id":item,"type":"function_call","status":"in_progress","arguments":"","call_id":call,"name":name}})
}

fn args_delta(index: u64, item: &str, delta: &str) -> Value {
    json!({"type":"response.function_call_arguments.delta","delta":delta,"item_id":item,"obfuscation":"q1","output_index":index})
}

fn args_done(index: u64, item: &str, arguments: &str) -> Value {
    json!({"type":"response.function_call_arguments.done","arguments":arguments,"item_id":item,"output_index":index})
}

fn call_done(index: u64, call: &str, item: &str, name: &str, arguments: &str) -> Value {
    json!({"type":"response.output_item.done","output_index":index,"item":{"id":item,"type":"function_call","status":"completed","arguments":arguments,"call_id":call,"name":name}})
}

#[test]
fn single_call_ids_usage_and_tool_use() {
    let events = run(&sse(&[
        created(),
        call_added(0, "call_Ex02", "fc_Ex02", "get_weather"),
        args_delta(0, "fc_Ex02", "{\""),
        args_delta(0, "fc_Ex02", "city\":\"Bergen\"}"),
        args_done(0, "fc_Ex02", "{\"city\":\"Bergen\"}"),
        call_done(0, "call_Ex02", "fc_Ex02", "get_weather", "{\"city\":\"Bergen\"}"),
        completed("completed"),
    ]));
    let message = final_message(&events);
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    let call = message.tool_calls().next().unwrap();
    assert_eq!(call.id, "call_Ex02|fc_Ex02");
    assert_eq!(call.name, "get_weather");
    assert_eq!(call.arguments, json!({"city": "Bergen"}));
    assert_eq!(message.response_id.as_deref(), Some("resp_1"));
    assert_eq!(message.response_model.as_deref(), Some("gpt-5.4-mini-2026-03-17"));
    // Input excludes cached tokens; total as reported.
    assert_eq!((message.usage.input, message.usage.cache_read, message.usage.output), (60, 40, 5));
    assert_eq!(message.usage.total_tokens, 105);
    assert!((message.usage.cost.input - 60.0 / 1e6).abs() < 1e-12);
    let deltas =
        events.iter().filter(|e| matches!(e, AssistantEvent::ToolCallDelta { .. })).count();
    assert_eq!(deltas, 2);
}

#[test]
fn done_arguments_longer_than_streamed_add_the_suffix() {
    let events = run(&sse(&[
        created(),
        call_added(0, "call_1", "fc_1", "f"),
        args_delta(0, "fc_1", "{\"a\":"),
        args_done(0, "fc_1", "{\"a\":12}"),
        call_done(0, "call_1", "fc_1", "f", "{\"a\":12}"),
        completed("completed"),
    ]));
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AssistantEvent::ToolCallDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["{\"a\":", "12}"]);
    assert_eq!(final_message(&events).tool_calls().next().unwrap().arguments, json!({"a": 12}));
}

#[test]
fn function_call_without_added_still_lands() {
    // Arguments streamed without `added`, then `done`.
    let events = run(&sse(&[
        created(),
        args_delta(0, "fc_1", "{\"q\":"),
        args_delta(0, "fc_1", "\"x\"}"),
        call_done(0, "call_1", "fc_1", "search", "{\"q\":\"x\"}"),
        // Only `output_item.done`: no `added`, no deltas.
        call_done(1, "call_2", "fc_2", "lookup", "{\"id\":7}"),
        completed("completed"),
    ]));
    let message = final_message(&events);
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!((calls[0].id.as_str(), calls[0].name.as_str()), ("call_1|fc_1", "search"));
    assert_eq!(calls[0].arguments, json!({"q": "x"}));
    assert_eq!((calls[1].id.as_str(), calls[1].name.as_str()), ("call_2|fc_2", "lookup"));
    assert_eq!(calls[1].arguments, json!({"id": 7}));
    assert_eq!(message.stop_reason, StopReason::ToolUse);
}

/// The plans a strict request for `get_weather` (optional `unit`, optional nullable `note`)
/// hands the decoder.
fn weather_plans() -> Plans {
    let schema = json!({"type": "object", "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["c", "f"]},
        "note": {"type": ["string", "null"]}
    }, "required": ["city"]});
    let plan = to_strict(&schema).unwrap().plan;
    Arc::new(BTreeMap::from([("get_weather".to_owned(), Arc::new(plan))]))
}

fn tool_deltas(events: &[AssistantEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            AssistantEvent::ToolCallDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn strict_nulls_for_omitted_optionals_are_dropped() {
    let plans = weather_plans();
    let full = r#"{"city":"Oslo","unit":null,"note":null}"#;
    // Streamed fragments, then `.done` with the same text, then the item.
    let events = run_strict(
        &sse(&[
            created(),
            call_added(0, "call_1", "fc_1", "get_weather"),
            args_delta(0, "fc_1", r#"{"city":"Oslo","un"#),
            args_delta(0, "fc_1", r#"it":null,"note":null}"#),
            args_done(0, "fc_1", full),
            call_done(0, "call_1", "fc_1", "get_weather", full),
            completed("completed"),
        ]),
        &[],
        &plans,
    );
    // `unit` did not accept null: its null meant "omitted". `note` did: its null stays.
    assert_eq!(tool_deltas(&events), [r#"{"city":"Oslo""#, r#","note":null}"#]);
    let call = final_message(&events).tool_calls().next().unwrap().clone();
    assert_eq!(call.arguments, json!({"city": "Oslo", "note": null}));

    // `.done` longer than what streamed: the filtered suffix is added.
    let events = run_strict(
        &sse(&[
            created(),
            call_added(0, "call_1", "fc_1", "get_weather"),
            args_delta(0, "fc_1", r#"{"city":"Oslo","#),
            args_done(0, "fc_1", full),
            call_done(0, "call_1", "fc_1", "get_weather", full),
            completed("completed"),
        ]),
        &[],
        &plans,
    );
    assert_eq!(tool_deltas(&events), [r#"{"city":"Oslo""#, r#","note":null}"#]);

    // No `added` (the name comes with the item) and only `output_item.done`: the final
    // arguments are filtered all the same.
    let events = run_strict(
        &sse(&[
            created(),
            args_delta(0, "fc_1", full),
            call_done(0, "call_1", "fc_1", "get_weather", full),
            call_done(1, "call_2", "fc_2", "get_weather", r#"{"unit":null,"city":"Bergen"}"#),
            completed("completed"),
        ]),
        &[],
        &plans,
    );
    let calls: Vec<_> = final_message(&events).tool_calls().cloned().collect();
    assert_eq!(calls[0].arguments, json!({"city": "Oslo", "note": null}));
    assert_eq!(calls[1].arguments, json!({"city": "Bergen"}));

    // Calls expanded from a `multi_tool_use.parallel` wrapper.
    let wrapped = r#"{"tool_uses":[{"recipient_name":"functions.get_weather","parameters":{"city":"Oslo","unit":null}}]}"#;
    let events = run_strict(
        &sse(&[
            created(),
            call_added(0, "call_p", "fc_p", "multi_tool_use.parallel"),
            call_done(0, "call_p", "fc_p", "multi_tool_use.parallel", wrapped),
            completed("completed"),
        ]),
        &[],
        &plans,
    );
    let call = final_message(&events).tool_calls().next().unwrap().clone();
    assert_eq!(call.arguments, json!({"city": "Oslo"}));

    // A tool without a plan (not strict) keeps its nulls.
    let events = run(&sse(&[
        created(),
        call_added(0, "call_1", "fc_1", "get_weather"),
        args_delta(0, "fc_1", full),
        call_done(0, "call_1", "fc_1", "get_weather", full),
        completed("completed"),
    ]));
    let call = final_message(&events).tool_calls().next().unwrap().clone();
    assert_eq!(call.arguments, json!({"city": "Oslo", "unit": null, "note": null}));
}

#[test]
fn interleaved_parallel_calls_keep_their_arguments() {
    let events = run(&sse(&[
        created(),
        call_added(0, "call_a", "fc_a", "a"),
        call_added(1, "call_b", "fc_b", "b"),
        call_added(2, "call_c", "fc_c", "c"),
        args_delta(0, "fc_a", "{\"x\":"),
        args_delta(2, "fc_c", "{\"z\":"),
        args_delta(1, "fc_b", "{\"y\":"),
        args_delta(2, "fc_c", "3}"),
        args_delta(0, "fc_a", "1}"),
        // No output_index: routed by item_id.
        json!({"type":"response.function_call_arguments.delta","delta":"2}","item_id":"fc_b"}),
        call_done(2, "call_c", "fc_c", "c", "{\"z\":3}"),
        call_done(0, "call_a", "fc_a", "a", "{\"x\":1}"),
        call_done(1, "call_b", "fc_b", "b", "{\"y\":2}"),
        completed("completed"),
    ]));
    let message = final_message(&events);
    let calls: Vec<(String, Value)> =
        message.tool_calls().map(|c| (c.id.clone(), c.arguments.clone())).collect();
    assert_eq!(
        calls,
        vec![
            ("call_a|fc_a".into(), json!({"x": 1})),
            ("call_b|fc_b".into(), json!({"y": 2})),
            ("call_c|fc_c".into(), json!({"z": 3})),
        ]
    );
}

#[test]
fn status_mapping() {
    // completed without calls -> stop; completed without `output` is fine.
    let text = |status: &str, kind: &str, details: Value| {
        sse(&[
            created(),
            json!({"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}),
            json!({"type":"response.output_text.delta","content_index":0,"delta":"Hi","item_id":"msg_1","output_index":0}),
            json!({"type":kind,"response":{"id":"resp_1","status":status,"incomplete_details":details,"usage":null}}),
        ])
    };
    let events = run(&text("completed", "response.completed", Value::Null));
    assert_eq!(final_message(&events).stop_reason, StopReason::Stop);
    let events =
        run(&text("incomplete", "response.incomplete", json!({"reason": "max_output_tokens"})));
    assert!(matches!(events.last(), Some(AssistantEvent::Done { reason: StopReason::Length, .. })));
    let events =
        run(&text("incomplete", "response.incomplete", json!({"reason": "content_filter"})));
    let Some(AssistantEvent::Error { error, message, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Refused);
    assert_eq!(message.text(), "Hi");
    // An incomplete response with a call is `length`, not `toolUse`.
    let events = run(&sse(&[
        created(),
        call_added(0, "call_1", "fc_1", "f"),
        args_delta(0, "fc_1", "{\"a\":\"tru"),
        json!({"type":"response.incomplete","response":{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}),
    ]));
    assert_eq!(final_message(&events).stop_reason, StopReason::Length);
}

#[test]
fn failed_response_is_an_error_with_code_and_message() {
    let events = run(&sse(&[
        created(),
        json!({"type":"response.failed","response":{"id":"resp_1","status":"failed","error":{"code":"x","message":"y"},"output":[],"usage":null}}),
    ]));
    let Some(AssistantEvent::Error { error, message, reason }) = events.last() else { panic!() };
    assert_eq!(*reason, StopReason::Error);
    assert_eq!(message.error_message.as_deref(), Some("x: y"));
    assert_eq!(error.code.as_deref(), Some("x"));
    let events = run(&sse(&[json!({"type":"response.failed","response":{"status":"failed"}})]));
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
    assert!(error.message.contains("no error details"));
}

#[test]
fn error_events_nested_and_flat_keep_partial_text() {
    for error in [
        json!({"type":"error","sequence_number":3,"error":{"type":"server_error","code":null,"message":"Sorry, something went wrong.","param":null}}),
        json!({"type":"error","sequence_number":3,"code":"server_error","message":"Sorry, something went wrong.","param":null}),
    ] {
        let events = run(&sse(&[
            created(),
            json!({"type":"response.output_text.delta","delta":"par","item_id":"msg_1","output_index":0}),
            error,
            json!({"type":"response.failed","response":{"status":"failed","error":{"code":"other","message":"ignored"}}}),
        ]));
        assert_eq!(events.iter().filter(|e| e.is_terminal()).count(), 1);
        let Some(AssistantEvent::Error { error, message, .. }) = events.last() else { panic!() };
        assert_eq!(error.kind, ErrorKind::Overloaded);
        assert_eq!(error.message, "server_error: Sorry, something went wrong.");
        assert_eq!(message.text(), "par");
    }
}

#[test]
fn reasoning_summaries_and_signature() {
    let events = run(&sse(&[
        created(),
        json!({"type":"response.output_item.added","output_index":0,"item":{"id":"rs_1","type":"reasoning","encrypted_content":"gAAAA-A","summary":[]}}),
        json!({"type":"response.reasoning_summary_part.added","item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}),
        json!({"type":"response.reasoning_summary_text.delta","delta":"First.","item_id":"rs_1","output_index":0,"summary_index":0,"obfuscation":"x"}),
        json!({"type":"response.reasoning_summary_part.done","item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":"First."}}),
        json!({"type":"response.reasoning_summary_part.added","item_id":"rs_1","output_index":0,"summary_index":1,"part":{"type":"summary_text","text":""}}),
        json!({"type":"response.reasoning_summary_text.delta","delta":"Second.","item_id":"rs_1","output_index":0,"summary_index":1}),
        json!({"type":"response.output_item.done","output_index":0,"item":{"id":"rs_1","type":"reasoning","encrypted_content":"gAAAA-B","summary":[{"type":"summary_text","text":"First."},{"type":"summary_text","text":"Second."}]}}),
        json!({"type":"response.output_item.added","output_index":1,"item":{"id":"rs_2","type":"reasoning","summary":[]}}),
        json!({"type":"response.output_item.done","output_index":1,"item":{"id":"rs_2","type":"reasoning","encrypted_content":"gAAAA-C","summary":[]}}),
        call_added(2, "call_1", "fc_1", "f"),
        call_done(2, "call_1", "fc_1", "f", "{}"),
        completed("completed"),
    ]));
    let message = final_message(&events);
    let AssistantContent::Thinking(first) = &message.content[0] else { panic!() };
    assert_eq!(first.thinking, "First.\n\nSecond.");
    let signature: Value =
        serde_json::from_str(first.thinking_signature.as_deref().unwrap()).unwrap();
    assert_eq!(signature["encrypted_content"], json!("gAAAA-B"));
    assert_eq!(signature["id"], json!("rs_1"));
    let AssistantContent::Thinking(second) = &message.content[1] else { panic!() };
    assert_eq!(second.thinking, "");
    assert!(second.thinking_signature.as_deref().unwrap().contains("gAAAA-C"));
    assert_eq!(message.stop_reason, StopReason::ToolUse);
}

#[test]
fn message_signature_carries_id_and_phase() {
    let events = run(&sse(&[
        created(),
        json!({"type":"response.output_item.added","item":{"id":"msg_Ex01","type":"message","status":"in_progress","content":[],"phase":"final_answer","role":"assistant"},"output_index":1}),
        json!({"type":"response.output_text.delta","content_index":0,"delta":"Bergen is wet","item_id":"msg_Ex01","logprobs":[],"obfuscation":"Zt3","output_index":1}),
        json!({"type":"response.output_item.done","item":{"id":"msg_Ex01","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Bergen is wet"}],"phase":"final_answer","role":"assistant"},"output_index":1}),
        completed("completed"),
    ]));
    let message = final_message(&events);
    let AssistantContent::Text(text) = &message.content[0] else { panic!() };
    assert_eq!(text.text, "Bergen is wet");
    assert_eq!(
        text.text_signature.as_deref(),
        Some(r#"{"v":1,"id":"msg_Ex01","phase":"final_answer"}"#)
    );
}

#[test]
fn text_only_in_done_and_output_only_in_completed() {
    let events = run(&sse(&[
        created(),
        json!({"type":"response.output_item.done","output_index":0,"item":{"id":"msg_1","type":"message","content":[{"type":"output_text","text":"whole"}],"role":"assistant"}}),
        json!({"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[
            {"id":"msg_1","type":"message","content":[{"type":"output_text","text":"whole"}]},
            {"id":"fc_9","type":"function_call","call_id":"call_9","name":"late","arguments":"{\"k\":1}"}
        ]}}),
    ]));
    let message = final_message(&events);
    assert_eq!(message.text(), "whole");
    let call = message.tool_calls().next().unwrap();
    assert_eq!((call.id.as_str(), &call.arguments), ("call_9|fc_9", &json!({"k": 1})));
}

#[test]
fn parallel_wrapper_is_expanded_unless_a_real_tool() {
    let args = r#"{"tool_uses":[{"recipient_name":"functions.get_weather","parameters":{"city":"Oslo"}},{"recipient_name":"functions.get_time","parameters":{"tz":"CET"}}]}"#;
    let text = sse(&[
        created(),
        call_added(0, "call_p", "fc_p", "multi_tool_use.parallel"),
        args_delta(0, "fc_p", &args[..20]),
        args_delta(0, "fc_p", &args[20..]),
        call_done(0, "call_p", "fc_p", "multi_tool_use.parallel", args),
        completed("completed"),
    ]);
    let events = run(&text);
    let calls: Vec<_> = final_message(&events).tool_calls().cloned().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!((calls[0].id.as_str(), calls[0].name.as_str()), ("call_p_0", "get_weather"));
    assert_eq!(calls[0].arguments, json!({"city": "Oslo"}));
    assert_eq!((calls[1].id.as_str(), calls[1].name.as_str()), ("call_p_1", "get_time"));
    let events = run_with(&text, &["multi_tool_use.parallel"]);
    let calls: Vec<_> = final_message(&events).tool_calls().cloned().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "multi_tool_use.parallel");
}

#[test]
fn unknown_events_fields_and_missing_sequence_numbers_are_ignored() {
    let events = run(&sse(&[
        json!({"type":"response.created","response":{"id":"resp_1","future":{"x":1}}}),
        json!({"type":"response.brand_new_event","payload":[1,2,3]}),
        json!({"type":"response.output_item.added","output_index":0,"item":{"id":"ws_1","type":"web_search_call"}}),
        json!({"type":"response.output_item.done","output_index":0,"item":{"id":"ws_1","type":"web_search_call"}}),
        json!({"type":"response.output_text.delta","delta":"ok","item_id":"msg_1","output_index":1,"extra":true}),
        json!({"type":"response.output_text.annotation.added","item_id":"msg_1","output_index":1}),
        json!({"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{"input_tokens":1.0,"output_tokens":"2","total_tokens":3}}}),
    ]));
    let message = final_message(&events);
    assert_eq!(message.text(), "ok");
    assert_eq!((message.usage.input, message.usage.output), (1, 2));
}

#[test]
fn invalid_json_and_cut_streams_never_succeed() {
    let events = run("event: response.created\ndata: {not json\n\n");
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Decode);
    // Without a terminal event the decoder emits no terminal delta (llm-core reports truncation).
    let events = run(&sse(&[
        created(),
        json!({"type":"response.output_text.delta","delta":"a","output_index":0}),
    ]));
    assert!(!events.iter().any(AssistantEvent::is_terminal));
}

#[test]
fn bare_json_bodies() {
    let events = run(r#"{"error":{"message":"bad","type":"invalid_request_error","code":null}}"#);
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::InvalidRequest);
    let events = run(
        r#"{"id":"resp_1","object":"response","status":"completed","output":[{"id":"msg_1","type":"message","content":[{"type":"output_text","text":"hi"}]}]}"#,
    );
    assert_eq!(final_message(&events).text(), "hi");
}

#[test]
fn empty_summary_parts_add_no_separator_and_raw_reasoning_text_streams() {
    let rs = "rs_9";
    let events = run(&sse(&[
        created(),
        json!({"type":"response.output_item.added","output_index":0,"item":{"id":rs,"type":"reasoning","summary":[]}}),
        json!({"type":"response.reasoning_summary_part.added","item_id":rs,"output_index":0,"summary_index":0}),
        json!({"type":"response.reasoning_summary_text.delta","delta":"Only part.","item_id":rs,"output_index":0,"summary_index":0}),
        json!({"type":"response.reasoning_summary_part.added","item_id":rs,"output_index":0,"summary_index":1}),
        json!({"type":"response.reasoning_summary_part.done","item_id":rs,"output_index":0,"summary_index":1}),
        json!({"type":"response.output_item.done","output_index":0,"item":{"id":rs,"type":"reasoning","summary":[{"type":"summary_text","text":"Only part."}]}}),
        json!({"type":"response.reasoning_text.delta","delta":"raw thoughts","item_id":"rs_10","output_index":1}),
        json!({"type":"response.output_item.done","output_index":1,"item":{"id":"rs_10","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"raw thoughts"}]}}),
        completed("completed"),
    ]));
    let message = final_message(&events);
    let thinking: Vec<&str> = message
        .content
        .iter()
        .filter_map(|c| match c {
            AssistantContent::Thinking(t) => Some(t.thinking.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thinking, ["Only part.", "raw thoughts"]);
}

/// GitHub Copilot style: every event gives the item a new id.
#[test]
fn rotating_item_ids_never_duplicate_content() {
    let events = run(&sse(&[
        created(),
        json!({"type":"response.output_item.added","output_index":0,"item":{"id":"rs_A1","type":"reasoning","summary":[]}}),
        json!({"type":"response.reasoning_summary_text.delta","output_index":0,"item_id":"rs_A2","summary_index":0,"delta":"Think"}),
        json!({"type":"response.output_item.done","output_index":0,"item":{"id":"rs_A3","type":"reasoning","summary":[{"type":"summary_text","text":"Think"}]}}),
        json!({"type":"response.output_item.added","output_index":1,"item":{"id":"msg_B1","type":"message","role":"assistant","content":[]}}),
        json!({"type":"response.output_text.delta","output_index":1,"item_id":"msg_B2","content_index":0,"delta":"Hel"}),
        json!({"type":"response.output_text.delta","output_index":1,"item_id":"msg_B3","content_index":0,"delta":"lo"}),
        json!({"type":"response.output_item.done","output_index":1,"item":{"id":"msg_B4","type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello"}]}}),
        json!({"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[
            {"id":"rs_A5","type":"reasoning","summary":[{"type":"summary_text","text":"Think"}]},
            {"id":"msg_B5","type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello"}]}
        ]}}),
    ]));
    let message = final_message(&events);
    assert_eq!(message.content.len(), 2, "{message:?}");
    assert!(matches!(&message.content[0], AssistantContent::Thinking(t) if t.thinking == "Think"));
    assert_eq!(message.text(), "Hello");
    assert_eq!(message.stop_reason, StopReason::Stop);

    // Items that only `response.completed` lists still land (once), even with new ids.
    let events = run(&sse(&[
        created(),
        json!({"type":"response.output_item.added","output_index":0,"item":{"id":"msg_C1","type":"message","content":[]}}),
        json!({"type":"response.output_text.delta","output_index":0,"item_id":"msg_C2","delta":"Hi"}),
        json!({"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[
            {"id":"msg_C3","type":"message","content":[{"type":"output_text","text":"Hi"}]},
            {"id":"fc_C4","type":"function_call","call_id":"call_C","name":"f","arguments":"{}"}
        ]}}),
    ]));
    let message = final_message(&events);
    assert_eq!(message.text(), "Hi");
    assert_eq!(message.tool_calls().count(), 1);
    assert_eq!(message.stop_reason, StopReason::ToolUse);
}

#[test]
fn unknown_output_items_are_kept_and_client_requests_end_unsupported() {
    let search = json!({"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":"oslo"}});
    let patch = json!({"id":"apc_1","type":"apply_patch_call","call_id":"call_P","status":"completed","operation":{"type":"update_file","path":"a.txt","diff":"@@\n-a\n+b\n"}});
    let text = json!({"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]});
    let body = |items: &[&Value]| {
        let mut events = vec![created()];
        for (i, item) in items.iter().enumerate() {
            events.push(json!({"type":"response.output_item.done","output_index":i,"item":item}));
        }
        events.push(json!({"type":"response.completed","response":{"id":"resp_1","status":"completed","output":items}}));
        sse(&events)
    };

    // A server-side item: kept whole, shown, never a tool call; the turn ends normally.
    let events = run(&body(&[&search, &text]));
    let message = final_message(&events);
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!(message.content.len(), 2, "items listed again by completed are not added twice");
    assert_eq!(message.tool_calls().count(), 0);
    let AssistantContent::ProviderContent(p) = &message.content[0] else { panic!("{message:?}") };
    assert_eq!((p.wire_type.as_str(), &p.data), ("web_search_call", &search));
    assert!(events.iter().any(|e| matches!(e, AssistantEvent::ProviderContent { .. })));

    // An item that waits for a client answer: a typed error naming it, content kept.
    for item in [
        &patch,
        &json!({"id":"ctc_1","type":"custom_tool_call","call_id":"call_X","name":"grammar","input":"x"}),
        &json!({"id":"mcpr_1","type":"mcp_approval_request","server_label":"s","name":"n","arguments":"{}"}),
    ] {
        let events = run(&body(&[item, &text]));
        let Some(AssistantEvent::Error { error, message, .. }) = events.last() else {
            panic!("{events:?}")
        };
        let wire_type = item["type"].as_str().unwrap();
        assert_eq!(error.kind, ErrorKind::Unsupported);
        assert_eq!(error.code.as_deref(), Some(wire_type));
        assert!(error.message.contains(wire_type));
        assert!(
            matches!(&message.content[0], AssistantContent::ProviderContent(p) if &p.data == item)
        );
        assert_eq!(message.text(), "Done.");
    }
}

fn message_item(id: &str, index: u64, phase: &str, text: Option<&str>) -> Value {
    let content = text.map_or(json!([]), |t| json!([{"type": "output_text", "text": t}]));
    json!({"type": "response.output_item.done", "output_index": index,
           "item": {"id": id, "type": "message", "role": "assistant", "phase": phase, "content": content}})
}

fn added(id: &str, index: u64, phase: &str) -> Value {
    json!({"type": "response.output_item.added", "output_index": index,
           "item": {"id": id, "type": "message", "role": "assistant", "phase": phase, "content": []}})
}

fn text_delta(index: u64, delta: &str) -> Value {
    json!({"type": "response.output_text.delta", "output_index": index, "delta": delta})
}

fn texts(message: &AssistantMessage) -> Vec<String> {
    message
        .content
        .iter()
        .filter_map(|c| match c {
            AssistantContent::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_kept_back_snapshot_interrupted_by_a_call_keeps_its_text() {
    let events = run(&sse(&[
        added("m1", 0, "final_answer"),
        text_delta(0, "Hello there"),
        message_item("m1", 0, "final_answer", Some("Hello there")),
        added("m2", 1, "final_answer"),
        text_delta(1, "Hello"),
        json!({"type": "response.output_item.added", "output_index": 2,
               "item": {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f", "arguments": ""}}),
        json!({"type": "response.output_item.done", "output_index": 2,
               "item": {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}}),
        message_item("m2", 1, "final_answer", Some("Hello")),
        json!({"type": "response.completed", "response": {"status": "completed"}}),
    ]));
    let message = final_message(&events);
    assert_eq!(texts(message), ["Hello there", "Hello"]);
    assert_eq!(message.stop_reason, StopReason::ToolUse);
}

#[test]
fn snapshots_chain_and_a_new_phase_is_never_collapsed() {
    let events = run(&sse(&[
        added("m1", 0, "final_answer"),
        text_delta(0, "A"),
        message_item("m1", 0, "final_answer", Some("A")),
        added("m2", 1, "final_answer"),
        text_delta(1, "AB"),
        message_item("m2", 1, "final_answer", Some("AB")),
        // Not streamed: the `.done` text alone is the snapshot.
        added("m3", 2, "final_answer"),
        message_item("m3", 2, "final_answer", Some("ABC")),
        added("m4", 3, "commentary"),
        text_delta(3, "ABCD"),
        message_item("m4", 3, "commentary", Some("ABCD")),
        json!({"type": "response.completed", "response": {"status": "completed"}}),
    ]));
    let message = final_message(&events);
    assert_eq!(texts(message), ["ABC", "ABCD"]);
    let AssistantContent::Text(first) = &message.content[0] else { panic!("text") };
    assert_eq!(
        first.text_signature.as_deref(),
        Some(r#"{"v":1,"id":"m3","phase":"final_answer"}"#)
    );
    let ends = events.iter().filter(|e| matches!(e, AssistantEvent::TextEnd { .. })).count();
    assert_eq!(ends, 2);
}

#[test]
fn a_snapshot_streamed_a_character_at_a_time_continues_the_block() {
    let first = "Grüße aus Bergen";
    let second = "Grüße aus Bergen, wo es regnet.";
    let mut events = vec![
        added("m1", 0, "final_answer"),
        text_delta(0, first),
        message_item("m1", 0, "final_answer", Some(first)),
        added("m2", 1, "final_answer"),
    ];
    events.extend(second.chars().map(|c| text_delta(1, &c.to_string())));
    events.push(message_item("m2", 1, "final_answer", Some(second)));
    events.push(json!({"type": "response.completed", "response": {"status": "completed"}}));
    let out = run(&sse(&events));
    assert_eq!(texts(final_message(&out)), [second]);
    let streamed: String = out
        .iter()
        .filter_map(|e| match e {
            AssistantEvent::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    // The kept-back prefix is never sent twice.
    assert_eq!(streamed, second);
}

#[test]
fn a_message_over_the_snapshot_limit_is_never_collapsed() {
    let long = "x".repeat(super::SNAPSHOT_BASE_LIMIT + 1);
    let longer = format!("{long}y");
    let out = run(&sse(&[
        added("m1", 0, "final_answer"),
        text_delta(0, &long),
        message_item("m1", 0, "final_answer", Some(&long)),
        added("m2", 1, "final_answer"),
        text_delta(1, &longer),
        message_item("m2", 1, "final_answer", Some(&longer)),
        json!({"type": "response.completed", "response": {"status": "completed"}}),
    ]));
    assert_eq!(texts(final_message(&out)), [long, longer]);
}

#[test]
fn done_events_of_streamed_values_are_compared_or_skipped() {
    // A message whose text streamed: its `.done` item is finished from id, type and phase;
    // the repeated text is never decoded (here it is no valid Rust string: a lone surrogate
    // escape inside it would fail a `Value` parse).
    let events = run(&(sse(&[
        created(),
        json!({"type":"response.output_item.added","item":{"id":"msg_1","type":"message","content":[],"phase":"final_answer"},"output_index":0}),
        json!({"type":"response.output_text.delta","delta":"Hi \u{1F600}","item_id":"msg_1","output_index":0}),
    ]) + "event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"text\":\"Hi \\ud83dx\",\"item_id\":\"msg_1\",\"output_index\":0}\n\n"
        + "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hi \\ud83dx\"}],\"phase\":\"final_answer\"}}\n\n"
        + &sse(&[completed("completed")])));
    let message = final_message(&events);
    assert_eq!(message.stop_reason, StopReason::Stop);
    let AssistantContent::Text(text) = &message.content[0] else { panic!() };
    assert_eq!(text.text, "Hi \u{1F600}");
    assert_eq!(
        text.text_signature.as_deref(),
        Some(r#"{"v":1,"id":"msg_1","phase":"final_answer"}"#)
    );

    // Arguments: a `.done` text equal to what streamed adds nothing; one that disagrees
    // replaces it (and is shown whole).
    let events = run(&sse(&[
        created(),
        call_added(0, "call_1", "fc_1", "f"),
        args_delta(0, "fc_1", "{\"a\":"),
        args_delta(0, "fc_1", "\"caf\u{e9} \\\"q\\\"\"}"),
        args_done(0, "fc_1", "{\"a\":\"caf\u{e9} \\\"q\\\"\"}"),
        call_done(0, "call_1", "fc_1", "f", "{\"a\":\"caf\u{e9} \\\"q\\\"\"}"),
        call_added(1, "call_2", "fc_2", "g"),
        args_delta(1, "fc_2", "{\"b\":1}"),
        args_done(1, "fc_2", "{\"b\":1}"),
        call_done(1, "call_2", "fc_2", "g", "{\"b\":2}"),
        completed("completed"),
    ]));
    assert_eq!(
        tool_deltas(&events),
        ["{\"a\":", "\"caf\u{e9} \\\"q\\\"\"}", "{\"b\":1}", "{\"b\":2}"]
    );
    let calls: Vec<_> = final_message(&events).tool_calls().map(|c| c.arguments.clone()).collect();
    assert_eq!(calls, [json!({"a": "caf\u{e9} \"q\""}), json!({"b": 2})]);
}

#[test]
fn a_finished_call_item_that_is_no_rust_string_still_fails_the_stream() {
    // Valid JSON, but the lone surrogate escape is no Rust string: never dropped silently.
    let body = sse(&[created(), call_added(0, "call_1", "fc_1", "f"), args_delta(0, "fc_1", "{}")])
        + "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"f\",\"arguments\":\"{\\\"a\\\":\\\"\\ud83d\\\"}\"}}\n\n"
        + &sse(&[completed("completed")]);
    let events = run(&body);
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!("{events:?}") };
    assert_eq!(error.kind, ErrorKind::Decode);
}

// ---------------------------------------------------------------------------------------------
// Complete arguments in `.done` events, decoded in place
// ---------------------------------------------------------------------------------------------

/// `event: <type>\ndata: <data>\n\n` for data written by hand (escapes spelled as given).
fn sse_raw(kind: &str, data: &str) -> String {
    format!("event: {kind}\ndata: {data}\n\n")
}

/// A streamed call whose `.done` events carry `done_literal` (a JSON string literal as
/// written on the wire) in both `function_call_arguments.done` and `output_item.done`.
fn call_with_done_literal(fragments: &[&str], done_literal: &str) -> String {
    let mut body = sse(&[created(), call_added(0, "call_1", "fc_1", "f")]);
    body += &sse(&fragments.iter().map(|f| args_delta(0, "fc_1", f)).collect::<Vec<_>>());
    body += &sse_raw(
        "response.function_call_arguments.done",
        &format!(
            r#"{{"type":"response.function_call_arguments.done","arguments":{done_literal},"item_id":"fc_1","output_index":0}}"#
        ),
    );
    body += &sse_raw(
        "response.output_item.done",
        &format!(
            r#"{{"type":"response.output_item.done","output_index":0,"item":{{"id":"fc_1","type":"function_call","status":"completed","arguments":{done_literal},"call_id":"call_1","name":"f"}}}}"#
        ),
    );
    body + &sse(&[completed("completed")])
}

#[test]
fn done_arguments_spelled_with_other_escapes_are_the_same_text() {
    // The `.done` literal spells `A`, `/`, `é` and `😀` as escapes where the deltas sent them
    // raw: its decoded text equals what streamed, so nothing is added or replaced.
    let streamed = "{\"p\":\"A/é😀\\n\"}";
    let literal = r#""{\"p\":\"\u0041\/\u00e9\ud83d\ude00\\n\"}""#;
    assert_eq!(serde_json::from_str::<String>(literal).unwrap(), streamed);
    let events = run(&call_with_done_literal(&[&streamed[..6], &streamed[6..]], literal));
    assert_eq!(tool_deltas(&events), [&streamed[..6], &streamed[6..]]);
    let call = final_message(&events).tool_calls().next().unwrap();
    assert_eq!(call.arguments, serde_json::from_str::<Value>(streamed).unwrap());
    assert_eq!(call.id, "call_1|fc_1");

    // The same literal extending what streamed adds the decoded suffix once (the second
    // `.done` then equals what the first left).
    let events = run(&call_with_done_literal(&[&streamed[..6]], literal));
    assert_eq!(tool_deltas(&events), [&streamed[..6], &streamed[6..]]);

    // One that differs replaces it, whole and decoded.
    let events = run(&call_with_done_literal(&["{\"p\":\"B\"}"], literal));
    assert_eq!(tool_deltas(&events), ["{\"p\":\"B\"}", streamed]);
    let call = final_message(&events).tool_calls().next().unwrap();
    assert_eq!(call.arguments, serde_json::from_str::<Value>(streamed).unwrap());
}

#[test]
fn a_lone_surrogate_in_done_arguments_fails_the_stream() {
    // Valid JSON, no Rust string: a decode error, as when serde_json decoded the event.
    for literal in [r#""{\"a\":\"\ud83d\"}""#, r#""\ude00""#, r#""x\ud83d\u0041""#] {
        let events = run(&call_with_done_literal(&["{}"], literal));
        let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!("{events:?}") };
        assert_eq!(error.kind, ErrorKind::Decode, "{literal}");
        assert!(error.message.contains("surrogate"), "{}", error.message);
    }
}

#[test]
fn long_done_events_over_many_chunks_compare_as_text() {
    // Arguments of about 300 KiB: each `.done` event is a line longer than the SSE decoder's
    // 64 KiB threshold, assembled from many 4 KiB chunks and handed over as the event's data,
    // which is then decoded in place.
    let content: String = (0..12_000).map(|i| format!("line {i}: \"q\"\t\\ é😀\n")).collect();
    let text = serde_json::to_string(&json!({"path": "a.rs", "content": content})).unwrap();
    let pieces: Vec<&str> = {
        let mut pieces = Vec::new();
        let mut rest = text.as_str();
        while !rest.is_empty() {
            let mut at = rest.len().min(100);
            while !rest.is_char_boundary(at) {
                at -= 1;
            }
            pieces.push(&rest[..at]);
            rest = &rest[at..];
        }
        pieces
    };
    let literal = serde_json::to_string(&text).unwrap();
    let expected: Value = serde_json::from_str(&text).unwrap();
    let half = pieces.len() / 2;
    let changed = text.replacen("a.rs", "b.rs", 1);
    let cases: [(&[&str], String, usize); 3] = [
        // Equal: only the streamed pieces.
        (&pieces, literal.clone(), pieces.len()),
        // Extends: the second half comes as one suffix.
        (&pieces[..half], literal.clone(), half + 1),
        // Differs (same length): the whole `.done` text replaces it.
        (&pieces, serde_json::to_string(&changed).unwrap(), pieces.len() + 1),
    ];
    for (n, (fragments, done, deltas)) in cases.into_iter().enumerate() {
        let body = call_with_done_literal(fragments, &done);
        assert!(body.len() > 3 * 64 * 1024);
        let chunks: Vec<&[u8]> = body.as_bytes().chunks(4096).collect();
        let events = run_chunks(&chunks, &[], &Plans::default());
        let shown = tool_deltas(&events);
        assert_eq!(shown.len(), deltas, "case {n}");
        let call = final_message(&events).tool_calls().next().unwrap();
        let want = if n == 2 {
            serde_json::from_str::<Value>(&changed).unwrap()
        } else {
            expected.clone()
        };
        assert_eq!(call.arguments, want, "case {n}");
        if n == 1 {
            assert_eq!(shown[half], &text[pieces[..half].concat().len()..]);
        }
        if n == 2 {
            assert_eq!(shown[pieces.len()], changed);
        }
    }
}

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// `decode_in_place` agrees with serde_json's decode of the same literal (text or error),
    /// whatever escapes spell it and wherever it sits in the event's data.
    #[test]
    fn decode_in_place_is_serde_jsons_decode(
        pieces in prop::collection::vec(prop_oneof![
            "[a-z \"\\\\/\n\t\u{1}é😀]{1,3}".prop_map(|s| {
                let quoted = serde_json::to_string(&s).unwrap();
                quoted[1..quoted.len() - 1].to_owned()
            }),
            prop::sample::select(vec![
                r"\/", r"\b", r"\f", r"\u0041", r"\u00e9", r"\uFFFF", r"\u0000", r"\ud83d\ude00",
                r"\uD83D\uDE00", r"\ud83d", r"\ude00", r"\ud83d\u0041", r"\ud83d\ud83d",
            ]).prop_map(str::to_owned),
        ], 0..12),
        head in "[ a-z]{0,3}",
    ) {
        let literal = format!("\"{}\"", pieces.concat());
        let data = format!(r#"{{"type":"x",{head:?}:1,"arguments":{literal},"z":[1]}}"#);
        #[derive(serde::Deserialize)]
        struct Probe<'a> {
            #[serde(borrow)]
            arguments: &'a serde_json::value::RawValue,
        }
        let probe: Probe<'_> = serde_json::from_str(&data).unwrap();
        let at = super::Literal::of(probe.arguments, &data).unwrap();
        prop_assert_eq!(&data[at.start..at.end], literal.as_str());
        let expected = serde_json::from_str::<String>(&literal).ok();
        let decoded = super::decode_in_place(data.clone(), at).ok();
        prop_assert_eq!(decoded, expected, "{}", literal);
    }
}

#[test]
fn completed_output_skips_finished_items_without_decoding_them() {
    // The finished call comes again in `response.completed.output` with arguments that are no
    // Rust string (a lone surrogate escape): it is recognised from its head and skipped, so
    // the stream ends normally with what streamed. An item seen only there is still decoded.
    let completed_with_output = r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"a\":\"\ud83d\"}","call_id":"call_1","name":"f"},{"id":"fc_2","type":"function_call","status":"completed","arguments":"{\"b\":2}","call_id":"call_2","name":"g"}],"usage":{"input_tokens":3,"output_tokens":2,"total_tokens":5}}}"#;
    let body = sse(&[
        created(),
        call_added(0, "call_1", "fc_1", "f"),
        args_delta(0, "fc_1", "{\"a\":1}"),
        args_done(0, "fc_1", "{\"a\":1}"),
        call_done(0, "call_1", "fc_1", "f", "{\"a\":1}"),
    ]) + &sse_raw("response.completed", completed_with_output);
    let events = run(&body);
    let message = final_message(&events);
    assert_eq!(message.stop_reason, StopReason::ToolUse, "{events:?}");
    let calls: Vec<_> =
        message.tool_calls().map(|c| (c.name.clone(), c.arguments.clone())).collect();
    assert_eq!(calls, [("f".to_owned(), json!({"a": 1})), ("g".to_owned(), json!({"b": 2}))]);
    assert_eq!(message.usage.output, 2);

    // An unfinished item that does not decode fails the stream, as `output_item.done` does.
    let body = sse(&[created()])
        + &sse_raw("response.completed", &completed_with_output.replace("fc_1", "fc_9"));
    let events = run(&body);
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!("{events:?}") };
    assert_eq!(error.kind, ErrorKind::Decode);
}

#[test]
fn a_refusal_is_text_without_a_format_and_a_refused_error_with_one() {
    let events = [
        json!({"type": "response.created", "response": {"id": "resp_r", "status": "in_progress"}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "msg_r", "role": "assistant", "content": []}}),
        json!({"type": "response.refusal.delta", "output_index": 0, "item_id": "msg_r", "content_index": 0, "delta": "I can't"}),
        json!({"type": "response.refusal.delta", "output_index": 0, "item_id": "msg_r", "content_index": 0, "delta": " help."}),
        json!({"type": "response.completed", "response": {"id": "resp_r", "status": "completed"}}),
    ];
    let body = sse(&events);
    let plain = run_with(&body, &[]);
    assert!(
        matches!(plain.last(), Some(AssistantEvent::Done { message, .. }) if message.text() == "I can't help.")
    );

    let mut sse_decoder = SseDecoder::new();
    let mut raw = Vec::new();
    sse_decoder.push(body.as_bytes(), &mut raw).unwrap();
    sse_decoder.finish(&mut raw).unwrap();
    let mut decoder = Decoder::new(Arc::default(), Arc::default()).refusing(true);
    let mut deltas = Vec::new();
    for event in raw.drain(..) {
        llm_core::raw::drive::decode_frame(&mut decoder, event, &mut deltas);
    }
    llm_core::raw::drive::decode_end(&mut decoder, &mut deltas);
    let error = deltas.iter().find_map(|d| match d {
        llm_core::raw::Delta::Error(e) => Some(e.clone()),
        _ => None,
    });
    let error = error.unwrap();
    assert_eq!((error.kind, error.code.as_deref()), (ErrorKind::Refused, Some("refusal")));
    assert_eq!(error.message, "OpenAI refusal: I can't help.");
}
