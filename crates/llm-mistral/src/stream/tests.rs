use llm_core::raw::sse::SseDecoder;
use llm_core::{AssistantEvent, Model, raw::MessageAssembler};
use serde_json::json;

use super::*;

fn model() -> Model {
    Model {
        id: "mistral-small-latest".into(),
        api: crate::API.into(),
        provider: "mistral".into(),
        cost: llm_core::ModelCost { input: 0.1, output: 0.3, cache_read: 0.01, cache_write: 0.0 },
        ..Model::default()
    }
}

/// Bytes -> SSE -> decoder -> deltas (no terminal delta added).
fn deltas(sse: &str) -> Vec<Delta> {
    let mut events = Vec::new();
    let mut sse_decoder = SseDecoder::new();
    sse_decoder.push(sse.as_bytes(), &mut events).unwrap();
    sse_decoder.finish(&mut events).unwrap();
    let mut decoder = Decoder::new();
    let mut out = Vec::new();
    for event in events {
        decoder.event(event, &mut out);
    }
    decoder.end(&mut out);
    out
}

/// Bytes -> events through the assembler; a missing terminal is reported
/// as `None` at the end.
fn events(sse: &str) -> Vec<AssistantEvent> {
    let mut assembler = MessageAssembler::new(&model(), 0);
    for delta in deltas(sse) {
        assembler.push(delta);
    }
    std::iter::from_fn(|| assembler.next_event()).collect()
}

fn final_message(sse: &str) -> llm_core::AssistantMessage {
    match events(sse).pop() {
        Some(AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. }) => {
            *message
        }
        other => panic!("no terminal event: {other:?}"),
    }
}

fn sse(chunks: &[serde_json::Value]) -> String {
    let mut s = String::new();
    for c in chunks {
        s.push_str("data: ");
        s.push_str(&c.to_string());
        s.push_str("\n\n");
    }
    s.push_str("data: [DONE]\n\n");
    s
}

const RID: &str = "0example0000000000000000000002";

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> serde_json::Value {
    json!({"id": RID, "object": "chat.completion.chunk", "created": 1760000004, "model": "mistral-small-latest",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}]})
}

/// Every fixture chunk decodes on the typed fast path, and the lenient path
/// gives exactly the same deltas.
#[test]
fn fast_and_lenient_paths_agree_on_the_fixture_corpus() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/mistral");
    let Ok(dirs) = std::fs::read_dir(root) else { return };
    let mut checked = 0;
    for dir in dirs.flatten() {
        for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
            if file.path().extension().is_none_or(|e| e != "sse") {
                continue;
            }
            let text = std::fs::read_to_string(file.path()).unwrap();
            let mut events = Vec::new();
            let mut sse = SseDecoder::new();
            sse.push(text.as_bytes(), &mut events).unwrap();
            sse.finish(&mut events).unwrap();
            let (mut fast, mut slow) = (Decoder::new(), Decoder::new());
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for event in &events {
                let data = event.data.trim();
                if data != "[DONE]" && data.starts_with('{') {
                    assert!(
                        serde_json::from_str::<WireChunk<'_>>(data).is_ok(),
                        "{}: not on the fast path: {data}",
                        file.path().display()
                    );
                }
                fast.data(&event.data, &mut a);
                slow.data_lenient(&event.data, &mut b);
            }
            assert_eq!(a, b, "{}", file.path().display());
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} fixture streams found");
}

#[test]
fn plain_text_with_usage_on_finish_chunk() {
    let body = "data: {\"id\":\"0example0000000000000000000001\",\"object\":\"chat.completion.chunk\",\"created\":1760000003,\"model\":\"mistral-small-latest\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null,\"logprobs\":null}]}\n\n\
data: {\"id\":\"0example0000000000000000000001\",\"object\":\"chat.completion.chunk\",\"created\":1760000003,\"model\":\"mistral-small-latest\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Lyon is\"},\"finish_reason\":null,\"logprobs\":null}]}\n\n\
data: {\"id\":\"0example0000000000000000000001\",\"object\":\"chat.completion.chunk\",\"created\":1760000003,\"model\":\"mistral-small-latest\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"stop\",\"logprobs\":null}],\"usage\":{\"prompt_tokens\":9,\"total_tokens\":13,\"completion_tokens\":4}}\n\n\
data: [DONE]\n\n";
    let m = final_message(body);
    assert_eq!(m.stop_reason, StopReason::Stop);
    assert_eq!(m.text(), "Lyon is");
    assert_eq!(m.content.len(), 1);
    assert_eq!(m.response_id.as_deref(), Some("0example0000000000000000000001"));
    assert_eq!(m.response_model, None);
    assert_eq!((m.usage.input, m.usage.output, m.usage.total_tokens), (9, 4, 13));
}

#[test]
fn whole_tool_call_in_one_chunk_without_index() {
    let body = sse(&[
        chunk(json!({"role": "assistant", "content": ""}), None),
        json!({"id": RID, "choices": [{"index": 0, "delta": {"content": null, "tool_calls": [{"id": "Ab3dE5fG7", "function": {"name": "get_weather", "arguments": "{\"city\": \"Lyon\"}"}}]}, "finish_reason": "tool_calls", "logprobs": null}], "usage": {"prompt_tokens": 120, "total_tokens": 141, "completion_tokens": 21}}),
    ]);
    let m = final_message(&body);
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    let calls: Vec<_> = m.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "Ab3dE5fG7");
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(calls[0].arguments, json!({"city": "Lyon"}));
    assert_eq!(m.usage.input, 120);
}

#[test]
fn incremental_call_with_null_id_and_padding_is_one_call() {
    let body = sse(&[
        chunk(json!({"role": "assistant", "content": ""}), None),
        json!({"id": RID, "choices": [{"index": 0, "delta": {"tool_calls": [{"id": "Hk29LmQ7z", "function": {"name": "read_file", "arguments": ""}, "index": 0}]}, "finish_reason": null}], "p": "abcdefghij"}),
        json!({"id": RID, "choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"name": "", "arguments": "{\"path\": "}, "index": 0}]}, "finish_reason": null}], "p": "abcdefghijklmnopqrstu"}),
        json!({"id": RID, "choices": [{"index": 0, "delta": {"tool_calls": [{"id": "null", "function": {"name": "", "arguments": "\"notes.txt\"}"}, "index": 0}]}, "finish_reason": null}], "p": "abcdefg"}),
        json!({"id": RID, "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 300, "total_tokens": 318, "completion_tokens": 18}, "p": "abcdefghijklmn"}),
    ]);
    let m = final_message(&body);
    let calls: Vec<_> = m.tool_calls().collect();
    assert_eq!(calls.len(), 1, "{m:?}");
    assert_eq!(calls[0].id, "Hk29LmQ7z");
    assert_eq!(calls[0].name, "read_file");
    assert_eq!(calls[0].arguments, json!({"path": "notes.txt"}));
    assert_eq!(m.stop_reason, StopReason::ToolUse);
}

#[test]
fn null_ids_get_a_stable_deterministic_id_per_index() {
    let body = sse(&[
        chunk(
            json!({"tool_calls": [{"id": "null", "index": 0, "function": {"name": "a", "arguments": "{\"x\":"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"id": "null", "index": 1, "function": {"name": "b", "arguments": "{}"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"id": "null", "index": 0, "function": {"name": "", "arguments": "1}"}}]}),
            Some("tool_calls"),
        ),
    ]);
    let m = final_message(&body);
    let calls: Vec<_> = m.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].arguments, json!({"x": 1}));
    assert_eq!(calls[0].id, derived_id(Some(RID), 0));
    assert_eq!(calls[1].id, derived_id(Some(RID), 1));
    assert_ne!(calls[0].id, calls[1].id);
    for call in &calls {
        assert!(crate::convert::is_mistral_id(&call.id), "{}", call.id);
    }
    // Deterministic: the same bytes give the same ids.
    assert_eq!(final_message(&body).content, m.content);
    // Distinct responses give distinct ids.
    assert_ne!(derived_id(Some("other"), 0), derived_id(Some(RID), 0));
}

#[test]
fn missing_id_then_real_id_adopts_the_real_id() {
    let body = sse(&[
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{\"a\""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"id": "Zz9Yy8Xx7", "index": 0, "function": {"arguments": ":2}"}}]}),
            Some("tool_calls"),
        ),
    ]);
    let m = final_message(&body);
    let calls: Vec<_> = m.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "Zz9Yy8Xx7");
    assert_eq!(calls[0].arguments, json!({"a": 2}));
}

#[test]
fn whole_calls_in_separate_chunks_with_default_index_are_separate() {
    let body = sse(&[
        chunk(
            json!({"tool_calls": [{"id": "AAAAAAAA1", "index": 0, "function": {"name": "f", "arguments": "{\"n\":1}"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"id": "BBBBBBBB2", "index": 0, "function": {"name": "g", "arguments": "{\"n\":2}"}}]}),
            Some("tool_calls"),
        ),
    ]);
    let m = final_message(&body);
    let calls: Vec<_> =
        m.tool_calls().map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone())).collect();
    assert_eq!(
        calls,
        vec![
            ("AAAAAAAA1".into(), "f".into(), json!({"n": 1})),
            ("BBBBBBBB2".into(), "g".into(), json!({"n": 2}))
        ]
    );
}

#[test]
fn parallel_whole_calls_in_one_chunk_without_index() {
    let body = sse(&[chunk(
        json!({"tool_calls": [
            {"id": "Ab3dE5fG7", "function": {"name": "get_weather", "arguments": "{\"city\":\"Lyon\"}"}},
            {"id": "Cd4eF6gH8", "function": {"name": "get_time", "arguments": "{\"tz\":\"Europe/Paris\"}"}}
        ]}),
        Some("tool_calls"),
    )]);
    let m = final_message(&body);
    let calls: Vec<_> = m.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].arguments, json!({"tz": "Europe/Paris"}));
}

#[test]
fn camel_case_fields_and_object_arguments() {
    let body = sse(&[
        json!({"id": RID, "choices": [{"index": 0, "delta": {"toolCalls": [{"id": "Qw3Er5Ty7", "index": 0, "function": {"name": "get_weather", "arguments": {"city": "Nice", "days": 2}}}]}, "finishReason": null}]}),
        json!({"id": RID, "choices": [{"index": 0, "delta": {}, "finishReason": "tool_calls"}], "usage": {"promptTokens": 50, "completionTokens": 7, "totalTokens": 57}}),
    ]);
    let evs = events(&body);
    let printed = llm_core::raw::printer::print_transcript(&evs);
    assert!(
        printed.contains("toolcall_delta 0 \"{\\\"city\\\":\\\"Nice\\\",\\\"days\\\":2}\""),
        "{printed}"
    );
    let m = final_message(&body);
    let call = m.tool_calls().next().unwrap();
    assert_eq!(call.arguments, json!({"city": "Nice", "days": 2}));
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    assert_eq!((m.usage.input, m.usage.output), (50, 7));
}

#[test]
fn repeated_object_arguments_do_not_concatenate() {
    let body = sse(&[
        chunk(
            json!({"tool_calls": [{"id": "Qw3Er5Ty7", "function": {"name": "f", "arguments": {"a": 1}}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"id": "Qw3Er5Ty7", "function": {"name": "f", "arguments": {"a": 1}}}]}),
            Some("tool_calls"),
        ),
    ]);
    let m = final_message(&body);
    assert_eq!(m.tool_calls().count(), 1);
    assert_eq!(m.tool_calls().next().unwrap().arguments, json!({"a": 1}));
}

#[test]
fn magistral_thinking_arrays_then_text_strings() {
    let body = sse(&[
        chunk(
            json!({"role": "assistant", "content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Need the "}]}]}),
            None,
        ),
        chunk(
            json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "forecast"}]}]}),
            None,
        ),
        chunk(json!({"content": [{"type": "text", "text": "Checking"}]}), None),
        chunk(json!({"content": " now."}), None),
        chunk(
            json!({"tool_calls": [{"id": "Ab3dE5fG7", "function": {"name": "get_weather", "arguments": "{}"}}]}),
            Some("tool_calls"),
        ),
    ]);
    let m = final_message(&body);
    assert_eq!(m.content.len(), 3);
    assert!(
        matches!(&m.content[0], llm_core::AssistantContent::Thinking(t) if t.thinking == "Need the forecast")
    );
    assert!(
        matches!(&m.content[1], llm_core::AssistantContent::Text(t) if t.text == "Checking now.")
    );
    assert!(
        matches!(&m.content[2], llm_core::AssistantContent::ToolCall(c) if c.arguments == json!({}))
    );
    let printed = llm_core::raw::printer::print_transcript(&events(&body));
    // Thinking closes when text starts; text closes when the call starts.
    let order: Vec<&str> = printed.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(
        order,
        [
            "start",
            "thinking_start",
            "thinking_delta",
            "thinking_delta",
            "thinking_end",
            "text_start",
            "text_delta",
            "text_delta",
            "text_end",
            "toolcall_start",
            "toolcall_delta",
            "toolcall_end",
            "done",
            "message"
        ]
    );
}

#[test]
fn interleaved_thinking_and_text_switch_blocks() {
    let body = sse(&[
        chunk(
            json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "a"}]}, {"type": "text", "text": "b"}, {"type": "thinking", "thinking": "c"}]}),
            None,
        ),
        chunk(json!({"content": [{"type": "reference", "reference_ids": [1]}, "d"]}), Some("stop")),
    ]);
    let m = final_message(&body);
    assert_eq!(m.content.len(), 4);
    assert_eq!(m.text(), "bd");
}

#[test]
fn finish_reasons() {
    for (wire, reason) in [
        ("stop", StopReason::Stop),
        ("length", StopReason::Length),
        ("model_length", StopReason::Length),
        ("tool_calls", StopReason::ToolUse),
        ("content_filter", StopReason::Stop),
        ("something_new", StopReason::Stop),
    ] {
        let body = sse(&[chunk(json!({"content": "x"}), Some(wire))]);
        assert_eq!(final_message(&body).stop_reason, reason, "{wire}");
    }
}

#[test]
fn finish_reason_error_keeps_partial_text() {
    let body = sse(&[
        chunk(json!({"content": "Partial"}), None),
        chunk(json!({"content": ""}), Some("error")),
    ]);
    let evs = events(&body);
    let Some(AssistantEvent::Error { message, error, reason }) = evs.last() else {
        panic!("{evs:?}")
    };
    assert_eq!(*reason, StopReason::Error);
    assert_eq!(message.text(), "Partial");
    assert_eq!(error.message, "Mistral finish_reason: error");
    assert_eq!(evs.iter().filter(|e| e.is_terminal()).count(), 1);
}

#[test]
fn usage_only_end_chunk_with_cached_tokens() {
    let body = sse(&[
        chunk(json!({"content": "hi"}), Some("stop")),
        json!({"id": RID, "choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010, "prompt_tokens_details": {"cached_tokens": 800}}}),
    ]);
    let m = final_message(&body);
    assert_eq!(
        (m.usage.input, m.usage.cache_read, m.usage.output, m.usage.total_tokens),
        (200, 800, 10, 1010)
    );
    let expected = 0.1 / 1e6 * 200.0 + 0.3 / 1e6 * 10.0 + 0.01 / 1e6 * 800.0;
    assert!((m.usage.cost.total - expected).abs() < 1e-12);
}

#[test]
fn no_done_means_no_terminal_delta() {
    let body = "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n";
    let out = deltas(body);
    assert!(!out.iter().any(|d| matches!(d, Delta::Done | Delta::Error(_))), "{out:?}");
}

#[test]
fn done_without_finish_reason_is_an_error() {
    let body = sse(&[chunk(json!({"content": "hi"}), None)]);
    let out = deltas(&body);
    assert!(matches!(out.last(), Some(Delta::Error(e)) if e.kind == ErrorKind::Truncated));
}

#[test]
fn malformed_chunk_is_a_decode_error() {
    let out = deltas("data: {\"id\":\"x\",\"choices\":[\n\n");
    assert!(matches!(out.last(), Some(Delta::Error(e)) if e.kind == ErrorKind::Decode));
}

#[test]
fn error_object_in_stream() {
    let out = deltas(
        "data: {\"error\":{\"message\":\"Internal error\",\"type\":\"internal_error\",\"code\":null}}\n\ndata: [DONE]\n\n",
    );
    assert!(matches!(out.last(), Some(Delta::Error(e)) if e.message == "Internal error"));
    assert_eq!(out.iter().filter(|d| matches!(d, Delta::Done | Delta::Error(_))).count(), 1);
}

#[test]
fn nothing_after_done() {
    let mut body = sse(&[chunk(json!({"content": "a"}), Some("stop"))]);
    body.push_str(
        "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"late\"}}]}\n\n",
    );
    let out = deltas(&body);
    assert!(matches!(out.last(), Some(Delta::Done)));
}

#[test]
fn odd_values_do_not_break_decoding() {
    let body = sse(&[
        json!({"id": 5, "choices": "x"}),
        json!({"id": RID, "choices": [{"index": "0", "delta": {"content": 7, "tool_calls": [null, 3, {"index": 1.0, "id": null, "function": {"name": null, "arguments": null}}]}, "finish_reason": null}], "usage": {"prompt_tokens": 1.0e2, "completion_tokens": "3"}}),
        json!({"id": RID, "choices": [{"index": 1, "delta": {"content": "other choice"}, "finish_reason": "stop"}]}),
        chunk(json!({"content": "ok"}), Some("stop")),
    ]);
    let m = final_message(&body);
    assert_eq!(m.text(), "ok");
    assert_eq!(m.tool_calls().count(), 1);
    assert_eq!((m.usage.input, m.usage.output), (100, 3));
}

/// Runs raw chunk texts through a decoder, with or without its templates.
fn decode_chunks(chunks: &[String], templates: bool) -> (Vec<Delta>, bool) {
    let mut decoder = Decoder::new();
    if !templates {
        decoder.templates = EventTemplates::off();
    }
    let mut out = Vec::new();
    for data in chunks {
        decoder.data(data, &mut out);
    }
    decoder.end(&mut out);
    (out, decoder.templates.matched())
}

/// One chunk's text around a delta already written as JSON.
fn raw_chunk(id: &str, delta: &str, padding: Option<&str>) -> String {
    let padding = padding.map(|p| format!(r#","p":"{p}""#)).unwrap_or_default();
    format!(
        r#"{{"id":"{id}","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{delta},"finish_reason":null}}]{padding}}}"#
    )
}

#[test]
fn chunks_read_through_a_template_decode_as_the_full_parse() {
    let mut chunks = vec![raw_chunk("r1", r#"{"role":"assistant","content":""}"#, Some("x"))];
    for (i, text) in ["Hel", "lo \\\"w\\u00e9", "\\ud83d", "\\ude00 end"].iter().enumerate() {
        chunks.push(raw_chunk("r1", &format!(r#"{{"content":"{text}"}}"#), Some(&"p".repeat(i))));
    }
    chunks.push(raw_chunk(
        "r1",
        r#"{"tool_calls":[{"id":"abcdefghi","function":{"name":"f","arguments":""},"index":0}]}"#,
        None,
    ));
    for text in [r#"{\"a\""#, r#":1}"#] {
        chunks.push(raw_chunk(
            "r1",
            &format!(r#"{{"tool_calls":[{{"id":"null","function":{{"name":"","arguments":"{text}"}},"index":0}}]}}"#),
            Some("zz"),
        ));
    }
    chunks.push(r#"{"id":"r1","choices":[{"index":0,"delta":{"content":""},"finish_reason":"tool_calls"}]}"#.into());
    chunks.push("[DONE]".into());
    let (with, used) = decode_chunks(&chunks, true);
    let (without, unused) = decode_chunks(&chunks, false);
    assert!(used && !unused);
    assert_eq!(with, without);
    assert!(with.contains(&Delta::ToolCallArgs { key: 1, fragment: ":1}".into() }), "{with:?}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// The oracle is the decoder's own full parse of every chunk: templates change nothing
    /// a consumer sees, whatever the chunks are.
    #[test]
    fn templates_change_no_delta(steps in proptest::collection::vec(
        (0u8..8, 0u64..3, llm_testkit::strategies::json_string_literal(), proptest::option::of("[a-z0-9]{0,6}"), proptest::bool::weighted(0.1)),
        0..40,
    )) {
        let mut chunks = Vec::new();
        for (kind, index, text, padding, other_id) in steps {
            let id = if other_id { "r2" } else { "r1" };
            let padding = padding.as_deref();
            chunks.push(match kind {
                0 | 1 => raw_chunk(id, &format!(r#"{{"content":"{text}"}}"#), padding),
                2 => raw_chunk(
                    id,
                    &format!(r#"{{"tool_calls":[{{"id":"call{index}abcd","function":{{"name":"f{index}","arguments":"{text}"}},"index":{index}}}]}}"#),
                    padding,
                ),
                3 => raw_chunk(
                    id,
                    &format!(r#"{{"tool_calls":[{{"function":{{"name":"","arguments":"{text}"}},"index":{index}}}]}}"#),
                    padding,
                ),
                4 => raw_chunk(
                    id,
                    &format!(r#"{{"tool_calls":[{{"id":"null","function":{{"arguments":"{text}"}}}}]}}"#),
                    padding,
                ),
                5 => raw_chunk(id, &format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#), padding),
                6 => raw_chunk(id, &format!(r#"{{"toolCalls":[{{"function":{{"arguments":"{text}"}},"index":{index}}}]}}"#), padding),
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
