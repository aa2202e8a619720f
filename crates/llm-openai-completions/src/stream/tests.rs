use super::*;
use llm_core::raw::sse::SseDecoder;
use llm_core::{AssistantContent, AssistantEvent, Model, raw::MessageAssembler};
use serde_json::json;

fn model() -> Model {
    Model {
        id: "gpt-4o".into(),
        api: "openai-completions".into(),
        provider: "openai".into(),
        ..Model::default()
    }
}

fn run_with(decoder: Decoder, body: &str) -> (Vec<AssistantEvent>, Vec<Delta>) {
    let mut decoder = decoder;
    let mut sse = SseDecoder::new();
    let mut events = Vec::new();
    sse.push(body.as_bytes(), &mut events).unwrap();
    sse.finish(&mut events).unwrap();
    let mut deltas = Vec::new();
    for e in events {
        decoder.event(e, &mut deltas);
    }
    decoder.end(&mut deltas);
    let mut a = MessageAssembler::new(&model(), 0);
    for d in deltas.clone() {
        a.push(d);
    }
    (std::iter::from_fn(|| a.next_event()).collect(), deltas)
}

fn run(body: &str) -> Vec<AssistantEvent> {
    run_with(Decoder::new(), body).0
}

fn sse(chunks: &[Value]) -> String {
    let mut s = String::new();
    for c in chunks {
        s.push_str("data: ");
        s.push_str(&c.to_string());
        s.push_str("\n\n");
    }
    s.push_str("data: [DONE]\n\n");
    s
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

fn tc(index: Option<u64>, id: Option<&str>, name: Option<&str>, args: &str) -> Value {
    let mut e = json!({"function": {"arguments": args}});
    if let Some(i) = index {
        e["index"] = json!(i);
    }
    if let Some(id) = id {
        e["id"] = json!(id);
        e["type"] = json!("function");
    }
    if let Some(n) = name {
        e["function"]["name"] = json!(n);
    }
    chunk(json!({"tool_calls": [e]}), None)
}

fn last(events: &[AssistantEvent]) -> (StopReason, llm_core::AssistantMessage, Option<Error>) {
    match events.last().unwrap() {
        AssistantEvent::Done { reason, message } => (*reason, *message.clone(), None),
        AssistantEvent::Error { reason, message, error } => {
            (*reason, *message.clone(), Some(*error.clone()))
        }
        other => panic!("not terminal: {other:?}"),
    }
}

#[test]
fn text_usage_and_metadata() {
    let body = sse(&[
        json!({"id":"chatcmpl-Ex1","model":"gpt-4.1-nano-2025-04-14","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}],"usage":null,"obfuscation":"Qz81"}),
        chunk(json!({"content": "Porto is"}), None),
        chunk(json!({}), Some("stop")),
        json!({"id":"chatcmpl-Ex1","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110,"prompt_tokens_details":{"cached_tokens":30,"cache_write_tokens":20}}}),
    ]);
    let events = run(&body);
    let (reason, message, _) = last(&events);
    assert_eq!(reason, StopReason::Stop);
    assert_eq!(message.text(), "Porto is");
    assert_eq!(message.response_id.as_deref(), Some("chatcmpl-Ex1"));
    assert_eq!(message.response_model.as_deref(), Some("gpt-4.1-nano-2025-04-14"));
    let u = message.usage;
    assert_eq!(
        (u.input, u.output, u.cache_read, u.cache_write, u.total_tokens),
        (50, 10, 30, 20, 110)
    );
}

#[test]
fn parallel_calls_interleaved_by_index() {
    let body = sse(&[
        chunk(json!({"role": "assistant", "content": null}), None),
        tc(Some(0), Some("call_A"), Some("get_weather"), ""),
        tc(Some(1), Some("call_B"), Some("get_time"), ""),
        tc(Some(0), None, None, "{\"city\":"),
        tc(Some(1), None, None, "{\"tz\":"),
        tc(Some(0), None, None, "\"Oslo\"}"),
        tc(Some(1), None, None, "\"UTC\"}"),
        chunk(json!({}), Some("tool_calls")),
    ]);
    let events = run(&body);
    let (reason, message, _) = last(&events);
    assert_eq!(reason, StopReason::ToolUse);
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].arguments.clone()),
        ("call_A", json!({"city": "Oslo"}))
    );
    assert_eq!(
        (calls[1].id.as_str(), calls[1].arguments.clone()),
        ("call_B", json!({"tz": "UTC"}))
    );
    // Both ends come at the end, in content order.
    let ends: Vec<usize> = events
        .iter()
        .filter_map(|e| match e {
            AssistantEvent::ToolCallEnd { content_index, .. } => Some(*content_index),
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec![0, 1]);
}

#[test]
fn delta_matched_by_id_without_index() {
    let body = sse(&[
        tc(None, Some("call_1"), Some("f"), "{\"a\":"),
        tc(None, Some("call_2"), Some("g"), "{}"),
        tc(None, Some("call_1"), None, "1}"),
        chunk(json!({}), Some("tool_calls")),
    ]);
    let (_, message, _) = last(&run(&body));
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].arguments, json!({"a": 1}));
    assert_eq!(calls[1].arguments, json!({}));
}

#[test]
fn reused_index_with_new_id_is_a_new_call() {
    let body = sse(&[
        tc(Some(0), Some("call_1"), Some("f"), "{\"a\":1}"),
        tc(Some(0), Some("call_2"), Some("f"), "{\"a\":2}"),
        chunk(json!({}), Some("tool_calls")),
    ]);
    let (_, message, _) = last(&run(&body));
    let ids: Vec<_> = message.tool_calls().map(|c| c.id.clone()).collect();
    assert_eq!(ids, vec!["call_1", "call_2"]);
}

#[test]
fn stop_with_calls_and_no_text_is_tool_use() {
    let body = sse(&[tc(Some(0), Some("call_1"), Some("f"), "{}"), chunk(json!({}), Some("stop"))]);
    let (reason, message, _) = last(&run(&body));
    assert_eq!(reason, StopReason::ToolUse);
    assert_eq!(message.tool_calls().count(), 1);
}

#[test]
fn stop_with_calls_after_text_drops_the_calls() {
    let body = sse(&[
        chunk(json!({"content": "Let me check."}), None),
        tc(Some(0), Some("call_1"), Some("f"), "{\"a\":1}"),
        chunk(json!({}), Some("stop")),
    ]);
    let events = run(&body);
    let (reason, message, _) = last(&events);
    assert_eq!(reason, StopReason::Stop);
    assert_eq!(message.tool_calls().count(), 0);
    assert_eq!(message.text(), "Let me check.");
    assert!(!events.iter().any(|e| matches!(e, AssistantEvent::ToolCallStart { .. })));
}

#[test]
fn held_text_after_dropped_calls_is_kept_in_order() {
    // Text, a call (held behind the text), text again (held too, not a call's), then `stop`:
    // the call's deltas go and the held text stays, after the first.
    let body = sse(&[
        chunk(json!({"content": "Let me check."}), None),
        tc(Some(0), Some("call_1"), Some("f"), "{\"a\":1}"),
        chunk(json!({"content": " Done."}), None),
        chunk(json!({}), Some("stop")),
    ]);
    let events = run(&body);
    let (reason, message, _) = last(&events);
    assert_eq!(reason, StopReason::Stop);
    assert_eq!(message.tool_calls().count(), 0);
    assert_eq!(message.text(), "Let me check. Done.");
    assert!(!events.iter().any(|e| matches!(e, AssistantEvent::ToolCallStart { .. })));
}

#[test]
fn held_fragments_of_one_run_arrive_as_one_delta_in_order() {
    // Calls after visible text are held until the finish reason. A run of fragments of one
    // call (or of one text block) reaches the consumer as one delta with the same text; runs
    // of different calls stay apart, in the order they came.
    let body = sse(&[
        chunk(json!({"content": "Let me check."}), None),
        tc(Some(0), Some("call_a"), Some("f"), "{\"a\":"),
        tc(Some(0), None, None, "\"x\\n"),
        tc(Some(0), None, None, "y\""),
        tc(Some(1), Some("call_b"), Some("g"), "{\"b\":"),
        tc(Some(0), None, None, "}"),
        tc(Some(1), None, None, "2}"),
        chunk(json!({"content": " One"}), None),
        chunk(json!({"content": " two."}), None),
        chunk(json!({}), Some("tool_calls")),
    ]);
    let events = run(&body);
    let calls: Vec<(usize, &str)> = events
        .iter()
        .filter_map(|e| match e {
            AssistantEvent::ToolCallDelta { content_index, delta, .. } => {
                Some((*content_index, delta.as_str()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(calls, [(1, "{\"a\":\"x\\ny\""), (2, "{\"b\":"), (1, "}"), (2, "2}")]);
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AssistantEvent::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Let me check.", " One two."]);
    let (reason, message, _) = last(&events);
    assert_eq!(reason, StopReason::ToolUse);
    let args: Vec<(&str, Value)> =
        message.tool_calls().map(|c| (c.name.as_str(), c.arguments.clone())).collect();
    assert_eq!(args, [("f", json!({"a": "x\ny"})), ("g", json!({"b": 2}))]);
    assert_eq!(message.text(), "Let me check. One two.");
}

#[test]
fn tool_calls_after_text_kept_for_tool_calls_finish() {
    let body = sse(&[
        chunk(json!({"content": "Let me check."}), None),
        tc(Some(0), Some("call_1"), Some("f"), "{\"a\":1}"),
        chunk(json!({}), Some("tool_calls")),
    ]);
    let (reason, message, _) = last(&run(&body));
    assert_eq!(reason, StopReason::ToolUse);
    assert_eq!(message.content.len(), 2);
}

#[test]
fn tool_calls_finish_without_calls_is_stop() {
    let body = sse(&[chunk(json!({"content": "hi"}), Some("tool_calls"))]);
    assert_eq!(last(&run(&body)).0, StopReason::Stop);
}

#[test]
fn no_finish_reason_is_an_error() {
    let body = sse(&[chunk(json!({"content": "hi"}), None)]);
    let (reason, message, error) = last(&run(&body));
    assert_eq!(reason, StopReason::Error);
    assert_eq!(message.error_message.as_deref(), Some(NO_FINISH_REASON));
    assert_eq!(message.text(), "hi");
    assert_eq!(error.unwrap().kind, ErrorKind::Truncated);
    // Also when the body just ends.
    let body = format!("data: {}\n\n", chunk(json!({"content": "hi"}), None));
    assert_eq!(last(&run(&body)).1.error_message.as_deref(), Some(NO_FINISH_REASON));
}

#[test]
fn finish_without_done_is_complete() {
    let body = format!("data: {}\n\n", chunk(json!({"content": "hi"}), Some("stop")));
    assert_eq!(last(&run(&body)).0, StopReason::Stop);
}

#[test]
fn content_filter_is_an_error() {
    let body =
        sse(&[chunk(json!({"content": "par"}), None), chunk(json!({}), Some("content_filter"))]);
    let (reason, message, error) = last(&run(&body));
    assert_eq!(reason, StopReason::Error);
    assert_eq!(message.error_message.as_deref(), Some("Provider finish_reason: content_filter"));
    assert_eq!(message.text(), "par");
    assert_eq!(error.unwrap().kind, ErrorKind::Refused);
}

#[test]
fn error_payload_mid_stream_keeps_text() {
    let body = "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Partial\"},\"finish_reason\":null}]}\n\n\
                    data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n\
                    data: [DONE]\n\n";
    let (reason, message, error) = last(&run(body));
    assert_eq!(reason, StopReason::Error);
    assert_eq!(message.text(), "Partial");
    assert_eq!(message.error_message.as_deref(), Some("The server had an error"));
    assert_eq!(error.unwrap().kind, ErrorKind::Overloaded);
}

#[test]
fn reasoning_becomes_thinking_with_field_signature() {
    let body = sse(&[
        chunk(json!({"reasoning_content": "Think"}), None),
        chunk(json!({"reasoning_content": "ing."}), None),
        chunk(json!({"content": "Answer"}), None),
        chunk(json!({}), Some("stop")),
    ]);
    let events = run(&body);
    let (_, message, _) = last(&events);
    match &message.content[0] {
        AssistantContent::Thinking(t) => {
            assert_eq!(t.thinking, "Thinking.");
            assert_eq!(t.thinking_signature.as_deref(), Some("reasoning_content"));
        }
        other => panic!("{other:?}"),
    }
    // The thinking block ends as soon as text starts.
    let pos_end =
        events.iter().position(|e| matches!(e, AssistantEvent::ThinkingEnd { .. })).unwrap();
    let pos_text =
        events.iter().position(|e| matches!(e, AssistantEvent::TextDelta { .. })).unwrap();
    assert!(pos_end < pos_text);
}

#[test]
fn concatenated_objects_are_split_into_calls() {
    let body = sse(&[
        tc(Some(0), Some("call_1"), Some("get_weather"), "{\"city\":\"Oslo\"}"),
        tc(Some(0), None, None, "{\"city\":"),
        tc(Some(0), None, None, "\"Rome\"} {\"city\":\"Lima\"}"),
        chunk(json!({}), Some("tool_calls")),
    ]);
    let (reason, message, _) = last(&run(&body));
    assert_eq!(reason, StopReason::ToolUse);
    let calls: Vec<_> =
        message.tool_calls().map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone())).collect();
    assert_eq!(
        calls,
        vec![
            ("call_1".into(), "get_weather".into(), json!({"city": "Oslo"})),
            ("call_1_1".into(), "get_weather".into(), json!({"city": "Rome"})),
            ("call_1_2".into(), "get_weather".into(), json!({"city": "Lima"})),
        ]
    );
}

#[test]
fn trailing_garbage_and_truncated_json_fail_loudly() {
    let body = sse(&[
        tc(Some(0), Some("call_1"), Some("f"), "{\"a\":1}]"),
        chunk(json!({}), Some("tool_calls")),
    ]);
    let (reason, message, _) = last(&run(&body));
    assert_eq!(reason, StopReason::Error);
    assert!(message.error_message.unwrap().starts_with(MALFORMED_CALL));

    let body = sse(&[
        tc(Some(0), Some("call_1"), Some("f"), "{\"a\":"),
        chunk(json!({}), Some("tool_calls")),
    ]);
    let (reason, message, _) = last(&run(&body));
    assert_eq!(reason, StopReason::Error);
    assert_eq!(message.tool_calls().count(), 1, "partial content kept");
}

#[test]
fn length_keeps_incomplete_calls() {
    let body = sse(&[
        tc(Some(0), Some("call_1"), Some("f"), "{\"a\":\"xy"),
        chunk(json!({}), Some("length")),
    ]);
    let (reason, message, _) = last(&run(&body));
    assert_eq!(reason, StopReason::Length);
    assert_eq!(message.tool_calls().count(), 1);
}

#[test]
fn missing_ids_are_generated_deterministically() {
    let body = sse(&[tc(Some(0), None, Some("f"), "{}"), chunk(json!({}), Some("tool_calls"))]);
    let a = last(&run(&body)).1.tool_calls().next().unwrap().id.clone();
    let b = last(&run(&body)).1.tool_calls().next().unwrap().id.clone();
    assert!(a.starts_with("call_") && a.len() == 21, "{a}");
    assert_eq!(a, b);
}

#[test]
fn strict_nulls_are_restored() {
    let strict = llm_core::raw::strict::to_strict(&json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a"]})).unwrap();
    let mut cfg = DecoderConfig::default();
    cfg.strict_plans.insert("f".into(), Arc::new(strict.plan));
    let body = sse(&[
        tc(Some(0), Some("call_1"), Some("f"), "{\"a\":\"x\",\"b\":null}"),
        chunk(json!({}), Some("tool_calls")),
    ]);
    let (events, _) = run_with(Decoder::with_config(Arc::new(cfg)), &body);
    let (_, message, _) = last(&events);
    assert_eq!(message.tool_calls().next().unwrap().arguments, json!({"a": "x"}));
}

#[test]
fn lenient_shapes() {
    // Leading Azure chunk, float index, string numbers, object arguments, unknown fields.
    let body = sse(&[
        json!({"id":"","created":0,"model":"","choices":[],"prompt_filter_results":[{"prompt_index":0}]}),
        json!({"id":"c1","model":"m","choices":[{"index":0.0,"delta":{"tool_calls":[{"index":0.0,"id":"call_1","function":{"name":"f","arguments":{"x":1}}}]},"finish_reason":null,"content_filter_results":{}}]}),
        json!({"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":"7","completion_tokens":3.0}}),
    ]);
    let (reason, message, _) = last(&run(&body));
    assert_eq!(reason, StopReason::ToolUse);
    assert_eq!(message.tool_calls().next().unwrap().arguments, json!({"x": 1}));
    assert_eq!(message.usage.input, 7);
    assert_eq!(message.usage.output, 3);
    assert_eq!(message.response_id.as_deref(), Some("c1"));
}

#[test]
fn malformed_chunk_is_a_decode_error() {
    let (_, message, error) = last(&run("data: {not json\n\n"));
    assert_eq!(error.unwrap().kind, ErrorKind::Decode);
    assert!(message.error_message.unwrap().starts_with("Malformed stream chunk"));
}

#[test]
fn legacy_function_call() {
    let body = sse(&[
        chunk(json!({"function_call": {"name": "f", "arguments": "{\"a\""}}), None),
        chunk(json!({"function_call": {"arguments": ":1}"}}), None),
        chunk(json!({}), Some("function_call")),
    ]);
    let (reason, message, _) = last(&run(&body));
    assert_eq!(reason, StopReason::ToolUse);
    let call = message.tool_calls().next().unwrap();
    assert_eq!((call.name.as_str(), call.arguments.clone()), ("f", json!({"a": 1})));
    assert!(call.id.starts_with("call_"));
}

#[test]
fn openrouter_reasoning_details_attach_to_call() {
    let body = sse(&[
        chunk(
            json!({"reasoning_details": [{"type": "reasoning.encrypted", "id": "call_1", "data": "ENC"}]}),
            None,
        ),
        tc(Some(0), Some("call_1"), Some("f"), "{}"),
        chunk(json!({}), Some("tool_calls")),
    ]);
    let (_, message, _) = last(&run(&body));
    let sig = message.tool_calls().next().unwrap().thought_signature.clone().unwrap();
    assert_eq!(serde_json::from_str::<Value>(&sig).unwrap()["data"], json!("ENC"));
}

#[test]
fn compat_reasoning_field_uses_the_lenient_path() {
    let cfg = DecoderConfig {
        reasoning_fields: vec!["thinking_text".into()],
        ..DecoderConfig::default()
    };
    let body = sse(&[
        chunk(json!({"thinking_text": "hm", "reasoning_content": "ignored"}), None),
        chunk(json!({"content": "ok"}), Some("stop")),
    ]);
    let (events, _) = run_with(Decoder::with_config(Arc::new(cfg)), &body);
    let (_, message, _) = last(&events);
    match &message.content[0] {
        AssistantContent::Thinking(t) => {
            assert_eq!(
                (t.thinking.as_str(), t.thinking_signature.as_deref()),
                ("hm", Some("thinking_text"))
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(message.content.len(), 2);
}

#[test]
fn non_streamed_completion_body() {
    let body = json!({"id": "chatcmpl-x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
                "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}})
        .to_string();
    let (reason, message, _) = last(&run(&body));
    assert_eq!(reason, StopReason::ToolUse);
    let calls: Vec<_> = message.tool_calls().map(|c| (c.id.clone(), c.arguments.clone())).collect();
    assert_eq!(
        calls,
        vec![("call_1".to_owned(), json!({"a": 1})), ("call_2".to_owned(), json!({}))]
    );
    assert_eq!(message.usage.output, 3);
}

#[test]
fn unexpected_structure_falls_back_to_lenient_reading() {
    let body = sse(&[
        json!({"id": 5, "choices": [null, "x", {"index": 0, "delta": {"content": "hi", "tool_calls": [null, {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "{}"}}]}}]}),
        json!({"choices": {"not": "a list"}}),
        json!({"choices": [{"index": 0, "delta": "weird", "finish_reason": "tool_calls"}]}),
    ]);
    let (reason, message, _) = last(&run(&body));
    assert_eq!(reason, StopReason::ToolUse);
    assert_eq!(message.text(), "hi");
    assert_eq!(message.tool_calls().count(), 1);
    assert_eq!(message.response_id, None);
}

#[test]
fn reasoning_tags_in_content_become_thinking_across_fragments() {
    let body = sse(&[
        chunk(json!({"content": "<thi"}), None),
        chunk(json!({"content": "nk>Let me"}), None),
        chunk(json!({"content": " see.</th"}), None),
        chunk(json!({"content": "ink>The answer is 4 < 5."}), None),
        chunk(json!({}), Some("stop")),
    ]);
    let (_, message, _) = last(&run(&body));
    match &message.content[..] {
        [AssistantContent::Thinking(t), AssistantContent::Text(x)] => {
            assert_eq!(t.thinking, "Let me see.");
            assert_eq!(t.thinking_signature, None);
            assert_eq!(x.text, "The answer is 4 < 5.");
        }
        other => panic!("{other:?}"),
    }
    // A `<` that starts no tag is not held back past the end.
    let body = sse(&[chunk(json!({"content": "a <"}), None), chunk(json!({}), Some("stop"))]);
    assert_eq!(last(&run(&body)).1.text(), "a <");
    // Switched off by the compat.
    let cfg = DecoderConfig { reasoning_tags: false, ..DecoderConfig::default() };
    let body = sse(&[chunk(json!({"content": "<think>x</think>y"}), Some("stop"))]);
    let (events, _) = run_with(Decoder::with_config(Arc::new(cfg)), &body);
    assert_eq!(last(&events).1.text(), "<think>x</think>y");
}

#[test]
fn tag_splitter_is_chunking_independent() {
    let text = "pre <thinking>deep <b>bold</b> thought</thinking> mid <mm:think>x</mm:think><antml:think>y</antml:think><think></think>end <thin";
    let whole = {
        let mut s = TagSplitter::default();
        let mut out = Vec::new();
        s.push(text, &mut out);
        s.finish(&mut out);
        merge(out)
    };
    for step in 1..text.len() {
        let mut s = TagSplitter::default();
        let mut out = Vec::new();
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(step) {
            s.push(&piece.iter().collect::<String>(), &mut out);
        }
        s.finish(&mut out);
        assert_eq!(merge(out), whole, "step {step}");
    }
    assert_eq!(
        whole,
        vec![
            (false, "pre ".to_owned()),
            (true, "deep <b>bold</b> thought".to_owned()),
            (false, " mid ".to_owned()),
            (true, "xy".to_owned()),
            (false, "end <thin".to_owned())
        ]
    );
}

fn merge(pieces: Vec<(bool, String)>) -> Vec<(bool, String)> {
    let mut out: Vec<(bool, String)> = Vec::new();
    for (r, t) in pieces {
        match out.last_mut() {
            Some((lr, lt)) if *lr == r => lt.push_str(&t),
            _ => out.push((r, t)),
        }
    }
    out
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

    /// Any sequence of data payloads ends in exactly one terminal delta, never a panic.
    #[test]
    fn arbitrary_payloads_end_in_one_terminal(payloads in proptest::collection::vec(
        proptest::prop_oneof![
            ".{0,40}",
            proptest::strategy::Just("[DONE]".to_owned()),
            "\\{\"choices\":\\[\\{\"index\":[0-2],\"delta\":\\{\"tool_calls\":\\[\\{\"index\":[0-2],\"id\":\"c[0-2]\",\"function\":\\{\"name\":\"f\",\"arguments\":\"[{}a:1\\\\\\\\\\\"]{0,6}\"\\}\\}\\]\\},\"finish_reason\":(null|\"stop\"|\"tool_calls\"|\"length\")\\}\\]\\}",
            "\\{\"choices\":\\[\\{\"delta\":\\{\"content\":\"[a-z ]{0,5}\",\"reasoning_content\":\"[a-z]{0,3}\"\\}\\}\\]\\}",
        ],
        0..12,
    )) {
        let mut d = Decoder::new();
        let mut out = Vec::new();
        for data in payloads {
            d.event(SseEvent { event: None, data, id: None }, &mut out);
        }
        d.end(&mut out);
        let terminals = out.iter().filter(|x| matches!(x, Delta::Done | Delta::Error(_))).count();
        proptest::prop_assert_eq!(terminals, 1);
        proptest::prop_assert!(matches!(out.last(), Some(Delta::Done | Delta::Error(_))));
    }
}

#[test]
fn a_refusal_is_text_without_a_format_and_a_refused_error_with_one() {
    let body = sse(&[
        chunk(json!({"role": "assistant", "refusal": "I can't"}), None),
        chunk(json!({"refusal": " help with that."}), Some("stop")),
    ]);
    let (_, message, error) = last(&run(&body));
    assert!(error.is_none());
    assert_eq!(message.text(), "I can't help with that.");

    let cfg = DecoderConfig { refusal_is_error: true, ..DecoderConfig::default() };
    let (events, _) = run_with(Decoder::with_config(Arc::new(cfg)), &body);
    let (_, message, error) = last(&events);
    let error = error.unwrap();
    assert_eq!(error.kind, ErrorKind::Refused);
    assert_eq!(error.code.as_deref(), Some("refusal"));
    assert_eq!(error.message, "OpenAI refusal: I can't help with that.");
    assert_eq!(message.text(), "");
}

/// Runs raw chunk texts through a decoder, with or without its templates.
fn decode_chunks(chunks: &[String], templates: bool) -> (Vec<Delta>, bool) {
    let mut decoder = Decoder::new();
    if !templates {
        decoder.templates = EventTemplates::off();
    }
    let mut out = Vec::new();
    for data in chunks {
        decoder.event(SseEvent { event: None, data: data.clone(), id: None }, &mut out);
    }
    decoder.end(&mut out);
    (out, decoder.templates.matched())
}

/// One chunk's text around a fragment already written as a JSON literal.
fn raw_chunk(id: &str, delta: &str, padding: Option<&str>) -> String {
    let padding = padding.map(|p| format!(r#","obfuscation":"{p}""#)).unwrap_or_default();
    format!(
        r#"{{"id":"{id}","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":null}}]{padding}}}"#
    )
}

#[test]
fn chunks_read_through_a_template_decode_as_the_full_parse() {
    let mut chunks = vec![raw_chunk("c1", r#"{"role":"assistant","content":""}"#, Some("x"))];
    for (i, text) in ["Hel", "lo \\\"w\\u00e9", "\\ud83d", "\\ude00 end"].iter().enumerate() {
        chunks.push(raw_chunk("c1", &format!(r#"{{"content":"{text}"}}"#), Some(&"p".repeat(i))));
    }
    chunks.push(raw_chunk(
        "c1",
        r#"{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}"#,
        None,
    ));
    for text in [r#"{\"a\""#, r#":1,\"b\":\"\\ud83d"#, r#"\\ude00\"}"#] {
        chunks.push(raw_chunk(
            "c1",
            &format!(r#"{{"tool_calls":[{{"index":0,"function":{{"arguments":"{text}"}}}}]}}"#),
            None,
        ));
    }
    chunks.push(
        r#"{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#.into(),
    );
    chunks.push("[DONE]".into());
    let (with, used) = decode_chunks(&chunks, true);
    let (without, unused) = decode_chunks(&chunks, false);
    assert!(used && !unused);
    assert_eq!(with, without);
    let args: String = with
        .iter()
        .filter_map(|d| match d {
            Delta::ToolCallArgs { fragment, .. } => Some(fragment.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(args, r#"{"a":1,"b":"\ud83d\ude00"}"#);
}

/// A fragment's literal, sometimes ending in a reasoning tag (split off from `content`).
fn literal() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::strategy::Strategy;
    (
        llm_testkit::strategies::json_string_literal(),
        proptest::sample::select(vec!["", "<think>", "</think>"]),
    )
        .prop_map(|(text, tag)| text + tag)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// The oracle is the decoder's own full parse of every chunk: templates change nothing
    /// a consumer sees, whatever the chunks are.
    #[test]
    fn templates_change_no_delta(steps in proptest::collection::vec(
        (0u8..8, 0u64..3, literal(), proptest::option::of("[a-z0-9]{0,6}"), proptest::bool::weighted(0.1)),
        0..40,
    )) {
        let mut chunks = Vec::new();
        for (kind, index, text, padding, other_id) in steps {
            let id = if other_id { "c2" } else { "c1" };
            let padding = padding.as_deref();
            chunks.push(match kind {
                0 | 1 => raw_chunk(id, &format!(r#"{{"content":"{text}"}}"#), padding),
                2 => raw_chunk(
                    id,
                    &format!(r#"{{"tool_calls":[{{"index":{index},"id":"call_{index}","type":"function","function":{{"name":"f{index}","arguments":"{text}"}}}}]}}"#),
                    padding,
                ),
                3 | 4 => raw_chunk(
                    id,
                    &format!(r#"{{"tool_calls":[{{"index":{index},"function":{{"arguments":"{text}"}}}}]}}"#),
                    padding,
                ),
                5 => raw_chunk(id, &format!(r#"{{"reasoning_content":"{text}"}}"#), padding),
                6 => raw_chunk(id, &format!(r#"{{"content":null,"refusal":"{text}"}}"#), padding),
                _ => format!(
                    r#"{{"id":"{id}","choices":[{{"index":0,"delta":{{}},"finish_reason":"{}"}}]}}"#,
                    if index == 0 { "stop" } else { "tool_calls" }
                ),
            });
        }
        chunks.push("[DONE]".into());
        proptest::prop_assert_eq!(decode_chunks(&chunks, true).0, decode_chunks(&chunks, false).0);
    }
}

/// The argument scanner's rule, one byte at a time: where a second top-level object starts
/// (`Some`), or the state after all of `text`.
fn scan_by_rule(text: &[u8]) -> (Option<usize>, super::tool_calls::Scan) {
    use super::tool_calls::Scan;
    let mut scan = Scan::Start;
    for (i, &b) in text.iter().enumerate() {
        scan = match scan {
            Scan::Start if b == b'{' => Scan::Object { depth: 1, in_string: false, escape: false },
            Scan::Start if b.is_ascii_whitespace() => Scan::Start,
            Scan::Start | Scan::NonObject => return (None, Scan::NonObject),
            Scan::Object { depth, in_string: true, escape } => Scan::Object {
                depth,
                in_string: escape || b != b'"',
                escape: !escape && b == b'\\',
            },
            Scan::Object { depth, .. } => match b {
                b'"' => Scan::Object { depth, in_string: true, escape: false },
                b'{' | b'[' => Scan::Object { depth: depth + 1, in_string: false, escape: false },
                b'}' | b']' if depth <= 1 => Scan::Closed,
                b'}' | b']' => Scan::Object { depth: depth - 1, in_string: false, escape: false },
                _ => scan,
            },
            Scan::Closed if b == b'{' => return (Some(i), scan),
            Scan::Closed if b.is_ascii_whitespace() => Scan::Closed,
            Scan::Closed | Scan::Trailing => return (None, Scan::Trailing),
        };
    }
    (None, scan)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// However the arguments are cut into fragments, the scanner finds the second object
    /// where the byte-by-byte rule does and ends in the same state.
    #[test]
    fn the_argument_scanner_follows_the_bytewise_rule(
        text in "[{}\\[\\]\"\\\\a ]{0,40}",
        cuts in proptest::collection::vec(0usize..41, 0..6),
    ) {
        let (split, end) = scan_by_rule(text.as_bytes());
        let mut cuts: Vec<usize> = cuts.into_iter().filter(|&c| c <= text.len()).collect();
        cuts.push(0);
        cuts.push(text.len());
        cuts.sort_unstable();
        cuts.dedup();
        let mut scan = super::tool_calls::Scan::Start;
        let mut found = None;
        for pair in cuts.windows(2) {
            let (from, to) = (pair[0], pair[1]);
            if let Some(at) = scan.feed(&text[from..to]) {
                found = Some(from + at);
                break;
            }
        }
        proptest::prop_assert_eq!(found, split);
        if split.is_none() {
            proptest::prop_assert_eq!(scan, end);
        }
    }
}
