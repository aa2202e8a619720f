#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use bytes::Bytes;
use llm_core::{AssistantEvent, Model, raw::MessageAssembler};
use serde_json::json;

use super::*;

fn event(name: &str, payload: Value) -> AwsFrame {
    AwsFrame::new(
        [(":event-type", name), (":content-type", "application/json"), (":message-type", "event")],
        Bytes::from(payload.to_string()),
    )
}

fn exception(kind: &str, payload: &str) -> AwsFrame {
    AwsFrame::new(
        [(":exception-type", kind), (":message-type", "exception")],
        Bytes::from(payload.to_owned()),
    )
}

fn text(index: u64, t: &str) -> AwsFrame {
    event("contentBlockDelta", json!({"contentBlockIndex": index, "delta": {"text": t}}))
}

fn stop(index: u64) -> AwsFrame {
    event("contentBlockStop", json!({"contentBlockIndex": index}))
}

fn message_stop(reason: &str) -> AwsFrame {
    event("messageStop", json!({"stopReason": reason}))
}

fn metadata(input: u64, output: u64) -> AwsFrame {
    event(
        "metadata",
        json!({"usage": {"inputTokens": input, "outputTokens": output, "totalTokens": input + output},
               "metrics": {"latencyMs": 10}}),
    )
}

fn run(frames: Vec<AwsFrame>) -> Vec<Delta> {
    let mut decoder = Decoder::new();
    let mut out = Vec::new();
    for frame in frames {
        llm_core::raw::drive::decode_frame(&mut decoder, frame, &mut out);
    }
    llm_core::raw::drive::decode_end(&mut decoder, &mut out);
    out
}

fn assemble(deltas: Vec<Delta>) -> llm_core::AssistantMessage {
    let mut assembler = MessageAssembler::new(&Model::default(), 0);
    for delta in deltas {
        assembler.push(delta);
    }
    let events: Vec<AssistantEvent> = std::iter::from_fn(|| assembler.next_event()).collect();
    match events.last() {
        Some(AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. }) => {
            *message.clone()
        }
        other => panic!("not terminal: {other:?}"),
    }
}

fn terminal_error(out: &[Delta]) -> &Error {
    match out.last() {
        Some(Delta::Error(e)) => e,
        other => panic!("expected an error at the end, got {other:?}"),
    }
}

#[test]
fn text_stream_ends_at_metadata_with_usage() {
    let out = run(vec![
        event("messageStart", json!({"role": "assistant"})),
        text(0, "Hel"),
        text(0, "lo"),
        stop(0),
        message_stop("end_turn"),
        metadata(10, 2),
    ]);
    assert_eq!(out[1], Delta::Text { key: 0, text: "Hel".into() });
    assert_eq!(out[2], Delta::Text { key: 0, text: "lo".into() });
    assert_eq!(out[3], Delta::BlockEnd { key: 0 });
    assert!(matches!(out[4], Delta::Usage(Usage { input: 10, output: 2, .. })));
    assert_eq!(out[5..], [Delta::Stop(StopReason::Stop), Delta::Done]);
    let message = assemble(out);
    assert_eq!(message.text(), "Hello");
}

#[test]
fn tool_use_streams_input_and_stops_for_tools() {
    let out = run(vec![
        event("messageStart", json!({"role": "assistant"})),
        event(
            "contentBlockStart",
            json!({"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "tooluse_Ex01", "name": "get_weather"}}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{\"city\":"}}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "\"Oslo\"}"}}}),
        ),
        stop(1),
        message_stop("tool_use"),
        metadata(5, 7),
    ]);
    let message = assemble(out);
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "tooluse_Ex01");
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(calls[0].arguments, json!({"city": "Oslo"}));
    assert_eq!(message.stop_reason, StopReason::ToolUse);
}

#[test]
fn tool_block_without_input_has_empty_arguments() {
    let out = run(vec![
        event(
            "contentBlockStart",
            json!({"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t1", "name": "now"}}}),
        ),
        stop(0),
        message_stop("tool_use"),
        metadata(1, 1),
    ]);
    let message = assemble(out);
    assert_eq!(message.tool_calls().next().unwrap().arguments, json!({}));
}

#[test]
fn tool_input_for_an_unstarted_block_is_dropped() {
    let out = run(vec![
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 3, "delta": {"toolUse": {"input": "{}"}}}),
        ),
        text(0, "ok"),
        stop(0),
        message_stop("end_turn"),
        metadata(1, 1),
    ]);
    assert!(
        !out.iter().any(|d| matches!(d, Delta::ToolCallArgs { .. } | Delta::ToolCallStart { .. }))
    );
    assert_eq!(assemble(out).content.len(), 1);
}

#[test]
fn reasoning_text_and_signature_pieces_join() {
    let reasoning = |r: Value| {
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"reasoningContent": r}}),
        )
    };
    let out = run(vec![
        reasoning(json!({"text": "a"})),
        reasoning(json!({"text": "b"})),
        reasoning(json!({"signature": "s1"})),
        reasoning(json!({"signature": "s2"})),
        stop(0),
        message_stop("end_turn"),
        metadata(1, 1),
    ]);
    let message = assemble(out);
    match &message.content[0] {
        llm_core::AssistantContent::Thinking(t) => {
            assert_eq!(t.thinking, "ab");
            assert_eq!(t.thinking_signature.as_deref(), Some("s1s2"));
            assert!(!t.redacted);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn redacted_reasoning_is_kept_not_dropped() {
    let out = run(vec![
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"redactedContent": "QUJD"}}}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"redactedContent": "REVG"}}}),
        ),
        stop(0),
        text(1, "done"),
        stop(1),
        message_stop("end_turn"),
        metadata(1, 1),
    ]);
    assert!(out.contains(&Delta::RedactedThinking { key: 0, data: "QUJDREVG".into() }));
    let message = assemble(out);
    match &message.content[0] {
        llm_core::AssistantContent::Thinking(t) => {
            assert!(t.redacted);
            assert_eq!(t.thinking_signature.as_deref(), Some("QUJDREVG"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn stop_reasons_map_and_guardrail_is_a_typed_refusal() {
    for (reason, expected) in [
        ("end_turn", StopReason::Stop),
        ("stop_sequence", StopReason::Stop),
        ("max_tokens", StopReason::Length),
        ("model_context_window_exceeded", StopReason::Length),
        ("tool_use", StopReason::ToolUse),
    ] {
        let out = run(vec![text(0, "x"), stop(0), message_stop(reason), metadata(1, 1)]);
        assert_eq!(out[out.len() - 2..], [Delta::Stop(expected), Delta::Done], "{reason}");
    }
    for (reason, kind) in [
        ("guardrail_intervened", ErrorKind::Refused),
        ("content_filtered", ErrorKind::Refused),
        ("malformed_tool_use", ErrorKind::Provider),
        ("malformed_model_output", ErrorKind::Provider),
        ("something_new", ErrorKind::Provider),
    ] {
        let out = run(vec![text(0, "partial"), stop(0), message_stop(reason), metadata(3, 4)]);
        // Usage still arrives before the error.
        assert!(out.iter().any(|d| matches!(d, Delta::Usage(Usage { input: 3, .. }))));
        let error = terminal_error(&out);
        assert_eq!(error.kind, kind, "{reason}");
        assert_eq!(error.code.as_deref(), Some(reason));
        assert!(error.message.contains(reason), "{}", error.message);
        assert!(!error.retryable);
        assert_eq!(assemble(out).text(), "partial", "partial content is kept");
    }
}

#[test]
fn refusal_names_category_and_explanation() {
    let out = run(vec![
        text(0, "a"),
        event(
            "messageStop",
            json!({"stopReason": "refusal", "additionalModelResponseFields": {"stop_details": {"category": "cyber", "explanation": " This request is not allowed. "}}}),
        ),
    ]);
    assert_eq!(
        terminal_error(&out).message,
        "Anthropic refusal (category: cyber): This request is not allowed."
    );
    let out = run(vec![message_stop("refusal")]);
    assert_eq!(terminal_error(&out).message, "Anthropic refusal.");
}

#[test]
fn exceptions_are_typed_with_openclaw_prefixes() {
    let cases = [
        ("throttlingException", "Throttling error", ErrorKind::RateLimited, true),
        ("modelStreamErrorException", "Model stream error", ErrorKind::Provider, false),
        ("validationException", "Validation error", ErrorKind::InvalidRequest, false),
        ("internalServerException", "Internal server error", ErrorKind::Overloaded, true),
        ("serviceUnavailableException", "Service unavailable", ErrorKind::Overloaded, true),
    ];
    for (kind, prefix, error_kind, retryable) in cases {
        let out = run(vec![
            text(0, "Hi"),
            exception(kind, r#"{"message":"Too many requests, please wait before trying again."}"#),
        ]);
        let error = terminal_error(&out);
        assert_eq!(
            error.message,
            format!("{prefix}: Too many requests, please wait before trying again.")
        );
        assert_eq!(error.kind, error_kind, "{kind}");
        assert_eq!(error.retryable, retryable, "{kind}");
        assert_eq!(assemble(out).text(), "Hi");
    }
    let out = run(vec![exception(
        "validationException",
        r#"{"message":"Input is too long for requested model."}"#,
    )]);
    assert_eq!(terminal_error(&out).kind, ErrorKind::ContextLength);
    let out = run(vec![exception("weirdException", "not json")]);
    assert_eq!(terminal_error(&out).message, "WeirdException: not json");
}

#[test]
fn unmodelled_error_message_has_no_prefix() {
    let frame = AwsFrame::new(
        [(":message-type", "error"), (":error-code", "Foo"), (":error-message", "bar")],
        Bytes::new(),
    );
    let out = run(vec![frame]);
    let error = terminal_error(&out);
    assert_eq!(error.message, "bar");
    assert_eq!(error.code.as_deref(), Some("Foo"));
}

#[test]
fn unknown_events_and_fields_are_ignored() {
    let out = run(vec![
        event("messageStart", json!({"role": "assistant", "p": "abcdefgh"})),
        event("citationsDelta", json!({"anything": [1, 2]})),
        AwsFrame::new(
            [(":message-type", "event"), (":event-type", "future")],
            Bytes::from_static(b"not json at all"),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": "ok"}, "p": "xy"}),
        ),
        stop(0),
        message_stop("end_turn"),
        metadata(1, 1),
    ]);
    assert_eq!(out.last(), Some(&Delta::Done));
}

#[test]
fn a_block_event_without_a_whole_unsigned_index_fails_the_stream() {
    for name in ["contentBlockDelta", "contentBlockStop", "contentBlockStart"] {
        for index in [json!(null), json!(-1), json!(1.5), json!("0"), json!({"n": 0})] {
            let payload = json!({"contentBlockIndex": index, "delta": {"text": "x"}});
            let out = run(vec![event(name, payload)]);
            let error = terminal_error(&out);
            assert_eq!(error.kind, ErrorKind::Decode, "{name} {index}");
            assert_eq!(error.message, format!("Bedrock {name} without a contentBlockIndex"));
            assert_eq!(out.len(), 1, "{name} {index}: {out:?}");
        }
    }
    // The text of a delta whose envelope carries unknown fields of every kind around it.
    let padded = json!({"p": "abc", "x": {"y": [1, {"z": null}]}, "contentBlockIndex": 2,
                        "delta": {"q": [true], "text": "t\u{e9}\n\"q\""}, "w": 1e3});
    let out = run(vec![event("contentBlockDelta", padded)]);
    assert_eq!(out, vec![Delta::Text { key: 2, text: "t\u{e9}\n\"q\"".into() }]);
}

#[test]
fn malformed_json_and_bad_messages_are_decode_errors() {
    let broken = AwsFrame::new(
        [(":message-type", "event"), (":event-type", "contentBlockDelta")],
        Bytes::from_static(b"{\"contentBlockIndex\":0,"),
    );
    let out = run(vec![broken]);
    assert_eq!(terminal_error(&out).kind, ErrorKind::Decode);

    let out = run(vec![event("contentBlockDelta", json!({"delta": {"text": "x"}}))]);
    assert_eq!(terminal_error(&out).kind, ErrorKind::Decode, "missing contentBlockIndex");

    let out = run(vec![event("messageStart", json!({"role": "user"}))]);
    assert_eq!(
        terminal_error(&out).message,
        "Unexpected assistant message start but got user message start instead"
    );

    let unknown = AwsFrame::new([(":message-type", "mystery")], Bytes::new());
    assert!(terminal_error(&run(vec![unknown])).message.starts_with("Unrecognizable event type"));
}

#[test]
fn body_ending_before_message_stop_emits_nothing_terminal() {
    let out = run(vec![text(0, "cut")]);
    assert!(!out.iter().any(|d| matches!(d, Delta::Done | Delta::Error(_))));
}

#[test]
fn message_stop_without_metadata_completes_at_the_end() {
    let out = run(vec![text(0, "x"), stop(0), message_stop("end_turn")]);
    assert_eq!(out[out.len() - 2..], [Delta::Stop(StopReason::Stop), Delta::Done]);
}

#[test]
fn nothing_follows_a_terminal_delta() {
    let out = run(vec![
        text(0, "x"),
        message_stop("end_turn"),
        metadata(1, 1),
        text(0, "late"),
        metadata(9, 9),
    ]);
    assert_eq!(out.iter().filter(|d| matches!(d, Delta::Done)).count(), 1);
    assert_eq!(out.last(), Some(&Delta::Done));
}

#[test]
fn surrogate_pair_split_across_deltas_is_joined() {
    let raw = |index: u64, fragment: &str| {
        AwsFrame::new(
            [(":message-type", "event"), (":event-type", "contentBlockDelta")],
            Bytes::from(format!(
                r#"{{"contentBlockIndex":{index},"delta":{{"text":"{fragment}"}}}}"#
            )),
        )
    };
    let out = run(vec![
        raw(0, "a\\ud83d"),
        raw(0, "\\ude00b"),
        stop(0),
        message_stop("end_turn"),
        metadata(1, 1),
    ]);
    assert_eq!(assemble(out).text(), "a\u{1F600}b");
}

#[test]
fn usage_reads_cache_tokens_and_odd_numbers() {
    let out = run(vec![
        message_stop("end_turn"),
        event(
            "metadata",
            json!({"usage": {"inputTokens": 12.0, "outputTokens": 3, "cacheReadInputTokens": 100, "cacheWriteInputTokens": 50, "totalTokens": 165}}),
        ),
    ]);
    assert!(out.contains(&Delta::Usage(Usage {
        input: 12,
        output: 3,
        cache_read: 100,
        cache_write: 50,
        ..Usage::default()
    })));
}

fn fable() -> Model {
    Model {
        id: "production-fable".into(),
        compat: Some(json!({"canonicalModelId": "claude-fable-5"})),
        ..Model::default()
    }
}

fn run_with(mut decoder: Decoder, frames: Vec<AwsFrame>) -> Vec<Delta> {
    let mut out = Vec::new();
    for frame in frames {
        llm_core::raw::drive::decode_frame(&mut decoder, frame, &mut out);
    }
    llm_core::raw::drive::decode_end(&mut decoder, &mut out);
    out
}

#[test]
fn fable_refusal_shows_only_the_error() {
    let out = run_with(
        Decoder::for_model(&fable()),
        vec![
            event("messageStart", json!({"role": "assistant"})),
            text(0, "Sure, here is"),
            event(
                "messageStop",
                json!({"stopReason": "refusal", "additionalModelResponseFields": {"stop_details": {"category": "cyber", "explanation": "This request is not allowed."}}}),
            ),
            metadata(5, 5),
        ],
    );
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(
        terminal_error(&out).message,
        "Anthropic refusal (category: cyber): This request is not allowed."
    );
}

#[test]
fn fable_success_releases_everything_in_order() {
    let frames = vec![
        event("messageStart", json!({"role": "assistant"})),
        text(0, "Hel"),
        text(0, "lo"),
        stop(0),
        message_stop("end_turn"),
        metadata(10, 2),
    ];
    let held = run_with(Decoder::for_model(&fable()), frames.clone());
    assert_eq!(held, run(frames), "the same deltas, only later");
}

#[test]
fn fable_stream_cut_before_message_stop_shows_no_content() {
    let out = run_with(Decoder::for_model(&fable()), vec![text(0, "partial")]);
    assert_eq!(out.len(), 1, "{out:?}");
    let error = terminal_error(&out);
    assert_eq!(
        (error.kind, error.message.as_str()),
        (ErrorKind::Truncated, "Bedrock stream ended before messageStop")
    );
    // Other models keep what arrived (and emit no terminal: the driver reports truncated).
    let other = run_with(Decoder::for_model(&Model::default()), vec![text(0, "partial")]);
    assert_eq!(other, vec![Delta::Text { key: 0, text: "partial".into() }]);
}

#[test]
fn fable_exception_after_text_shows_only_the_error() {
    let out = run_with(
        Decoder::for_model(&fable()),
        vec![text(0, "Hi"), exception("throttlingException", r#"{"message":"slow down"}"#)],
    );
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(terminal_error(&out).kind, ErrorKind::RateLimited);
}
