//! What a user reads from a run: the parsed partial arguments of a streaming call,
//! and the run's totals on the outcome (usage, cost, final text, the provider's error).

use llm_core::{AssistantEvent, Error, ErrorKind, ModelCost, Usage, raw::Delta};

use super::*;

/// A tool call whose arguments stream in `fragment_len`-byte pieces, then a stop.
fn streamed_call(arguments: &str, fragment_len: usize) -> ScriptedTurn {
    let mut deltas = vec![Delta::ToolCallStart {
        key: 0,
        id: "call-1".into(),
        name: "write".into(),
        arguments: None,
    }];
    let bytes = arguments.as_bytes();
    for piece in bytes.chunks(fragment_len) {
        deltas.push(Delta::ToolCallArgs {
            key: 0,
            fragment: String::from_utf8(piece.to_vec()).expect("ASCII arguments"),
        });
    }
    deltas.extend([Delta::Stop(StopReason::ToolUse), Delta::Done]);
    ScriptedTurn::deltas(deltas)
}

#[tokio::test(flavor = "current_thread")]
async fn each_argument_delta_reads_the_parsed_value_it_changed_in_step_with_the_event() {
    let content = "line one of a file that streams in small pieces, ".repeat(8);
    let arguments = json!({"path": "notes.txt", "content": content}).to_string();
    let provider =
        ScriptedProvider::new("scripted", [streamed_call(&arguments, 5), text_turn("done")]);
    let write = AgentTool::new(
        Tool { name: "write".into(), description: "writes".into(), parameters: open_schema() },
        |_inv: ToolInvocation| async { Ok(ToolOutput::text("ok")) },
    );
    let context = AgentContext { tools: vec![write], ..AgentContext::default() };
    let mut run = agent(&provider, |_| {}).run(context, vec![Message::user("write it")]);
    let mut received = String::new();
    let mut checked = 0;
    while let Some(event) = run.next().await {
        let AgentEvent::MessageUpdate {
            event: AssistantEvent::ToolCallDelta { delta, changed, .. },
        } = &event
        else {
            continue;
        };
        received.push_str(delta);
        // Oracle: serde_json on the fragments so far, closed where they stop inside the
        // content string (no escapes in it, so every prefix closes this way).
        let Some(open) = received.find("\"content\":\"") else { continue };
        let inside = &received[open + "\"content\":\"".len()..];
        if inside.is_empty() || inside.contains('"') {
            continue;
        }
        let closed = format!("{received}\"}}");
        let expected: Value = serde_json::from_str(&closed).expect("closes as JSON");
        assert_eq!(changed.as_deref(), Some("/content"), "after {received:?}");
        assert_eq!(run.changed_arguments(&event), Some(&expected["content"]), "after {received:?}");
        let whole = run.partial().and_then(|p| p.tool_call(0).map(|c| c.arguments.clone()));
        assert_eq!(whole, Some(expected));
        checked += 1;
    }
    assert!(checked > 50, "only {checked} deltas inside the content string");
    assert_eq!(received, arguments);
    assert!(run.partial().is_none(), "no response streams after the run");
    let outcome = run.outcome().expect("ended");
    assert_eq!(outcome.reason, EndReason::Completed);
}

#[tokio::test(flavor = "current_thread")]
async fn other_events_have_no_changed_arguments() {
    let provider = ScriptedProvider::new("scripted", [text_turn("hello")]);
    let mut run = agent(&provider, |_| {}).run(AgentContext::default(), vec![Message::user("hi")]);
    while let Some(event) = run.next().await {
        assert_eq!(run.changed_arguments(&event), None, "{event:?}");
    }
}

fn with_usage(mut turn: ScriptedTurn, input: u64, output: u64, cache_read: u64) -> ScriptedTurn {
    let usage = Usage { input, output, cache_read, ..Usage::default() };
    let at = turn.deltas.len().saturating_sub(2);
    turn.deltas.insert(at, Delta::Usage(usage));
    turn
}

#[tokio::test(flavor = "current_thread")]
async fn the_outcome_sums_usage_and_cost_over_turns_and_gives_the_final_text() {
    let provider = ScriptedProvider::new(
        "scripted",
        [
            with_usage(tool_turn(&[("1", "t", json!({}))]), 1_000, 200, 0),
            with_usage(text_turn("the answer is 5"), 1_500, 50, 1_000),
        ],
    );
    let t = AgentTool::new(
        Tool { name: "t".into(), description: "t".into(), parameters: open_schema() },
        |_inv: ToolInvocation| async { Ok(ToolOutput::text("5")) },
    );
    let agent = agent(&provider, |c| {
        c.model.cost = ModelCost { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75 };
    });
    let context = AgentContext { tools: vec![t], ..AgentContext::default() };
    let outcome = agent.run(context, vec![Message::user("2 + 3?")]).finish().await;
    assert_eq!(outcome.reason, EndReason::Completed);
    let usage = outcome.usage();
    assert_eq!((usage.input, usage.output, usage.cache_read), (2_500, 250, 1_000));
    assert_eq!(usage.total_tokens, 3_750);
    // $3 / $15 / $0.30 per million input / output / cache-read tokens.
    let expected = (2_500.0 * 3.0 + 250.0 * 15.0 + 1_000.0 * 0.3) / 1e6;
    assert!((outcome.cost() - expected).abs() < 1e-12, "{} vs {expected}", outcome.cost());
    assert!((usage.cost.total - expected).abs() < 1e-12);
    assert_eq!(outcome.text(), "the answer is 5");
    assert_eq!(outcome.error, None);
}

#[tokio::test(flavor = "current_thread")]
async fn a_provider_error_is_the_outcomes_error() {
    let mut failure = Error::new(ErrorKind::RateLimited, "scripted", "slow down");
    failure.status = Some(429);
    failure.code = Some("rate_limit_error".into());
    let turn = ScriptedTurn::deltas(vec![
        Delta::Text { key: 0, text: "partial".into() },
        Delta::Error(failure),
    ]);
    let provider = ScriptedProvider::new("scripted", [turn]);
    let outcome = agent(&provider, |_| {})
        .run(AgentContext::default(), vec![Message::user("hi")])
        .finish()
        .await;
    assert_eq!(outcome.reason, EndReason::Error);
    let Some(AgentError::Provider { message, status, code }) = &outcome.error else {
        panic!("{:?}", outcome.error)
    };
    assert!(message.contains("slow down"), "{message}");
    assert_eq!(*status, Some(429));
    assert_eq!(code.as_deref(), Some("rate_limit_error"));
    assert!(outcome.error.as_ref().is_some_and(|e| e.to_string().contains("slow down")));
    // Stored and read back, the error is the same.
    let json = serde_json::to_value(&outcome).unwrap();
    assert_eq!(json["error"]["kind"], "provider");
    assert_eq!(json["error"]["status"], 429);
}
