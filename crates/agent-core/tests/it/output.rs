//! Runs whose final answer must match a schema: tools first, then the answer, on a final
//! turn or on every turn, as text or as the call named after the format; invalid answers
//! retried once with their violations; refusals, the turn limit and a run typed as a
//! Rust struct.

use std::sync::{Arc, Mutex};

use agent_core::*;
use llm_core::output::{OutputFormat, StructuredError, StructuredOutcome};
use llm_core::{
    AssistantContent, AssistantMessage, AssistantStream, Context, Message, Model, Provider,
    StopReason, StreamOptions, ToolCall, ToolChoice,
    raw::{ScriptedProvider, ScriptedTurn},
};
use serde_json::{Value, json};

use crate::{model, open_schema, text_turn, tool_turn};

/// What each request asked for: the format's name and the tool choice.
type Asked = Vec<(Option<String>, Option<ToolChoice>)>;

/// A provider that records each request's output format and tool choice.
#[derive(Clone)]
struct Recording {
    inner: ScriptedProvider,
    asked: Arc<Mutex<Asked>>,
}

impl Provider for Recording {
    fn api(&self) -> &str {
        self.inner.api()
    }

    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        let name = options.output.as_ref().map(|f| f.name.clone());
        self.asked.lock().unwrap().push((name, options.tool_choice.clone()));
        self.inner.stream(model, context, options)
    }
}

fn weather() -> OutputFormat {
    OutputFormat::new(
        "weather",
        json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
            "required": ["city", "celsius"],
            "additionalProperties": false
        }),
    )
}

fn lookup() -> AgentTool {
    AgentTool::new(
        llm_core::Tool {
            name: "lookup".into(),
            description: "looks up".into(),
            parameters: open_schema(),
        },
        |_inv: ToolInvocation| async { Ok(ToolOutput::text("12 degrees in Oslo")) },
    )
}

fn answer_call_turn(id: &str, name: &str, arguments: Value) -> ScriptedTurn {
    let message = AssistantMessage {
        content: vec![AssistantContent::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
            thought_signature: None,
            arguments_incomplete: false,
        })],
        stop_reason: StopReason::ToolUse,
        ..AssistantMessage::default()
    };
    ScriptedTurn::from_message(&message, 5)
}

fn recorded(turns: Vec<ScriptedTurn>, output: AgentOutput) -> (Agent, Recording) {
    let provider =
        Recording { inner: ScriptedProvider::new("scripted", turns), asked: Arc::default() };
    let mut config = AgentConfig::new(model(), Arc::new(provider.clone()));
    config.output = Some(output);
    (Agent::new(config), provider)
}

fn context() -> AgentContext {
    AgentContext { tools: vec![lookup()], ..AgentContext::default() }
}

fn asked(provider: &Recording) -> Asked {
    provider.asked.lock().unwrap().clone()
}

fn user_texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::User(u) => match &u.content {
                llm_core::UserMessageContent::Text(t) => Some(t.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn final_turn_tools_first_then_one_request_with_the_format_and_no_tools() {
    let (agent, provider) = recorded(
        vec![
            tool_turn(&[("c1", "lookup", json!({}))]),
            text_turn("It is 12 degrees in Oslo."),
            text_turn(r#"{"city": "Oslo", "celsius": 12}"#),
        ],
        AgentOutput::new(weather()),
    );
    let outcome = agent.run(context(), vec![Message::user("weather?")]).finish().await;
    assert_eq!(outcome.reason, EndReason::Completed);
    assert_eq!(
        outcome.output,
        Some(StructuredOutcome::Valid(json!({"city": "Oslo", "celsius": 12})))
    );
    assert_eq!(
        asked(&provider),
        vec![(None, None), (None, None), (Some("weather".into()), Some(ToolChoice::None))]
    );
    assert_eq!(user_texts(outcome.messages()), vec!["weather?", FINAL_ANSWER_PROMPT]);
    assert_eq!(check_tool_results(&outcome.context.messages), Vec::new());
}

#[tokio::test]
async fn every_turn_carries_the_format_and_the_first_answer_without_calls_is_it() {
    let (agent, provider) = recorded(
        vec![
            tool_turn(&[("c1", "lookup", json!({}))]),
            text_turn(r#"{"city": "Oslo", "celsius": 12.5}"#),
        ],
        AgentOutput::new(weather()).every_turn(),
    );
    let outcome = agent.run(context(), vec![Message::user("weather?")]).finish().await;
    assert_eq!(
        outcome.output,
        Some(StructuredOutcome::Valid(json!({"city": "Oslo", "celsius": 12.5})))
    );
    // The tool choice is the caller's: the model may still call tools.
    assert_eq!(asked(&provider), vec![(Some("weather".into()), None); 2]);
    assert_eq!(provider.inner.remaining(), 0);
}

#[tokio::test]
async fn a_forced_tool_answer_is_the_answer_not_a_call_to_run_and_its_call_gets_a_result() {
    let (agent, _) = recorded(
        vec![
            text_turn("I know it."),
            answer_call_turn("a1", "weather", json!({"city": "Oslo", "celsius": 3})),
        ],
        AgentOutput::new(weather()),
    );
    let events: Vec<AgentEvent> =
        futures_util::StreamExt::collect(agent.run(context(), vec![Message::user("w?")])).await;
    let AgentEvent::AgentEnd { messages, reason } = events.last().unwrap() else { panic!() };
    assert_eq!(*reason, EndReason::Completed);
    assert_eq!(check_tool_results(messages), Vec::new());
    let result = messages
        .iter()
        .find_map(|m| match m {
            Message::ToolResult(r) => Some(r),
            _ => None,
        })
        .unwrap();
    assert_eq!((result.text().as_str(), result.is_error), (ANSWER_RECEIVED_TEXT, false));
    let ends: Vec<bool> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionEnd { execution_started, .. } => Some(*execution_started),
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec![false], "the answer's call is announced, never run");
}

#[tokio::test]
async fn an_invalid_answer_is_sent_back_once_with_its_violations_then_the_retry_counts() {
    let (agent, _) = recorded(
        vec![
            text_turn("done"),
            text_turn(r#"{"city": "Oslo"}"#),
            text_turn(r#"{"city": "Oslo", "celsius": 1}"#),
        ],
        AgentOutput::new(weather()),
    );
    let outcome = agent.run(context(), vec![Message::user("w?")]).finish().await;
    assert_eq!(
        outcome.output,
        Some(StructuredOutcome::Valid(json!({"city": "Oslo", "celsius": 1})))
    );
    let texts = user_texts(outcome.messages());
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert!(texts[2].contains("celsius"), "the violation is named: {}", texts[2]);

    // No retry left: the invalid answer is the outcome.
    let (agent, provider) = recorded(
        vec![text_turn("done"), text_turn(r#"{"city": 7}"#), text_turn("unused")],
        AgentOutput::new(weather()).with_retries(0),
    );
    let outcome = agent.run(context(), vec![Message::user("w?")]).finish().await;
    let Some(StructuredOutcome::Invalid { value, violations }) = outcome.output else {
        panic!("{:?}", outcome.output)
    };
    assert_eq!(value, Some(json!({"city": 7})));
    assert!(violations.len() >= 2, "{violations:?}");
    assert_eq!(provider.inner.remaining(), 1);
}

#[tokio::test]
async fn an_invalid_forced_tool_answer_gets_an_error_result_and_the_model_tries_again() {
    let (agent, _) = recorded(
        vec![
            answer_call_turn("a1", "weather", json!({"city": "Oslo"})),
            answer_call_turn("a2", "weather", json!({"city": "Oslo", "celsius": 2})),
        ],
        AgentOutput::new(weather()).every_turn(),
    );
    let outcome = agent.run(context(), vec![Message::user("w?")]).finish().await;
    assert_eq!(
        outcome.output,
        Some(StructuredOutcome::Valid(json!({"city": "Oslo", "celsius": 2})))
    );
    let results: Vec<(String, bool)> = outcome
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some((r.text(), r.is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2);
    assert!(results[0].1 && results[0].0.contains("celsius"), "{results:?}");
    assert_eq!(results[1], (ANSWER_RECEIVED_TEXT.to_owned(), false));
}

#[tokio::test]
async fn a_refusal_and_a_run_that_ends_before_its_answer_are_typed() {
    let refusal = llm_core::Error::new(llm_core::ErrorKind::Refused, "scripted", "I cannot");
    let (agent, _) = recorded(
        vec![text_turn("x"), ScriptedTurn::deltas(vec![llm_core::raw::Delta::Error(refusal)])],
        AgentOutput::new(weather()),
    );
    let outcome = agent.run(context(), vec![Message::user("w?")]).finish().await;
    assert_eq!(outcome.reason, EndReason::Error);
    let Some(StructuredOutcome::Refused(error)) = outcome.output else {
        panic!("{:?}", outcome.output)
    };
    assert_eq!(error.kind, llm_core::ErrorKind::Refused);

    // The turn limit comes before the answer turn: no answer, and the run says so.
    let provider = ScriptedProvider::new("scripted", vec![text_turn("x")]);
    let mut config = AgentConfig::new(model(), Arc::new(provider));
    config.output = Some(AgentOutput::new(weather()));
    config.max_turns = Some(1);
    let outcome = Agent::new(config).run(context(), vec![Message::user("w?")]).finish().await;
    assert_eq!(outcome.reason, EndReason::MaxTurns);
    let Some(StructuredOutcome::Invalid { value: None, violations }) = outcome.output else {
        panic!("{:?}", outcome.output)
    };
    assert!(violations[0].message.contains("max_turns"), "{violations:?}");
}

#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct Weather {
    city: String,
    celsius: f64,
}

#[tokio::test]
async fn run_typed_gives_the_struct_and_a_typed_failure() {
    let provider = ScriptedProvider::new(
        "scripted",
        vec![text_turn("x"), text_turn(r#"{"city": "Oslo", "celsius": -4.5}"#)],
    );
    let agent = Agent::new(AgentConfig::new(model(), Arc::new(provider.clone())));
    let done = agent.run_typed::<Weather>(context(), vec![Message::user("w?")]).finish().await;
    assert_eq!(done.value.unwrap(), Weather { city: "Oslo".into(), celsius: -4.5 });
    assert_eq!(done.outcome.reason, EndReason::Completed);

    provider.push_turn(text_turn("x"));
    provider.push_turn(text_turn("no JSON"));
    provider.push_turn(text_turn("still none"));
    let done = agent.run_typed::<Weather>(context(), vec![Message::user("w?")]).finish().await;
    assert!(
        matches!(done.value, Err(StructuredError::Invalid { value: None, .. })),
        "{:?}",
        done.value
    );
}

#[test]
fn a_stored_run_keeps_its_output_and_a_state_without_one_still_restores() {
    let machine = AgentMachine::new(
        MachineSettings::default(),
        AgentContext::default(),
        Arc::new(model()),
        Arc::default(),
    );
    let plain = machine.to_json().unwrap();
    let stored: Value = serde_json::from_str(&plain).unwrap();
    assert_eq!(stored.get("output"), None, "a run without a format stores nothing of it");
    let with = machine.with_output(AgentOutput::new(weather()).every_turn());
    let restored = AgentMachine::from_json(&with.to_json().unwrap()).unwrap();
    assert_eq!(restored.output(), Some(&AgentOutput::new(weather()).every_turn()));
    assert_eq!(AgentMachine::from_json(&plain).unwrap().output(), None);
}

#[tokio::test]
async fn a_forced_tool_answer_is_retried_as_often_as_allowed_then_the_invalid_one_is_the_outcome() {
    let (agent, provider) = recorded(
        vec![
            answer_call_turn("a1", "weather", json!({"city": "Oslo"})),
            answer_call_turn("a2", "weather", json!({"city": "Bergen"})),
            answer_call_turn("a3", "weather", json!({"city": "Oslo", "celsius": 2})),
        ],
        AgentOutput::new(weather()).every_turn().with_retries(1),
    );
    let outcome = agent.run(context(), vec![Message::user("w?")]).finish().await;
    let Some(StructuredOutcome::Invalid { value, .. }) = &outcome.output else {
        panic!("{:?}", outcome.output)
    };
    assert_eq!(value, &Some(json!({"city": "Bergen"})));
    assert_eq!(provider.inner.remaining(), 1, "one retry, then no more requests");
}

#[tokio::test]
async fn in_an_answer_turn_only_the_answers_call_is_the_answer_the_others_are_told_so() {
    let (agent, _) = recorded(
        vec![tool_turn(&[
            ("c1", "lookup", json!({})),
            ("a1", "weather", json!({"city": "Oslo", "celsius": 2})),
        ])],
        AgentOutput::new(weather()).every_turn(),
    );
    let outcome = agent.run(context(), vec![Message::user("w?")]).finish().await;
    assert_eq!(
        outcome.output,
        Some(StructuredOutcome::Valid(json!({"city": "Oslo", "celsius": 2})))
    );
    let results: Vec<(String, String, bool)> = outcome
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some((r.tool_call_id.clone(), r.text(), r.is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            ("c1".to_owned(), ANSWER_GIVEN_TEXT.to_owned(), true),
            ("a1".to_owned(), ANSWER_RECEIVED_TEXT.to_owned(), false),
        ]
    );
}
