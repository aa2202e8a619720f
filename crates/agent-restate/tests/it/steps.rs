//! The step interface in process: a recording journal replays a run without
//! repeating its effects.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agent_core::{
    Agent, AgentConfig, AgentContext, AgentTool, EndReason, ToolError, ToolOutput,
    check_tool_results,
};
use agent_restate::{
    Effect, Journal, JournaledProvider, PassThrough, StepError, current_idempotency_key,
    journaled_tool,
};
use futures_util::future::BoxFuture;
use llm_core::raw::scripted::{ScriptedProvider, ScriptedTurn};
use llm_core::{
    AssistantContent, AssistantMessage, Message, Model, StopReason, TextContent, ToolCall,
};
use serde_json::{Value, json};

/// Records every step's result; a second run over the same records replays them
/// by position and fails on a name mismatch.
#[derive(Default)]
struct MemoryJournal {
    entries: Mutex<Vec<(String, Value)>>,
    cursor: AtomicUsize,
}

impl MemoryJournal {
    fn rewind(&self) {
        self.cursor.store(0, Ordering::SeqCst);
    }
    fn names(&self) -> Vec<String> {
        self.entries.lock().map(|e| e.iter().map(|(n, _)| n.clone()).collect()).unwrap_or_default()
    }
}

/// A journal handle sharing one [`MemoryJournal`].
struct Shared(Arc<MemoryJournal>);

impl Journal for Shared {
    fn step(&self, name: String, effect: Effect) -> BoxFuture<'static, Result<Value, StepError>> {
        let this = self.0.clone();
        Box::pin(async move {
            let position = this.cursor.fetch_add(1, Ordering::SeqCst);
            let recorded = this.entries.lock().ok().and_then(|e| e.get(position).cloned());
            if let Some((recorded_name, value)) = recorded {
                if recorded_name != name {
                    return Err(StepError::Failed {
                        step: name,
                        message: format!("journal has {recorded_name}"),
                    });
                }
                return Ok(value);
            }
            let value = effect()
                .await
                .map_err(|message| StepError::Failed { step: name.clone(), message })?;
            if let Ok(mut e) = this.entries.lock() {
                e.push((name, value.clone()));
            }
            Ok(value)
        })
    }
}

fn model() -> Model {
    Model {
        id: "m".into(),
        api: "scripted".into(),
        provider: "scripted".into(),
        ..Model::default()
    }
}

fn assistant(content: Vec<AssistantContent>, stop: StopReason) -> AssistantMessage {
    AssistantMessage {
        content,
        api: "scripted".into(),
        provider: "scripted".into(),
        model: "m".into(),
        stop_reason: stop,
        ..AssistantMessage::default()
    }
}

fn call_turn(id: &str) -> ScriptedTurn {
    let call = ToolCall {
        id: id.into(),
        name: "count".into(),
        arguments: json!({}),
        thought_signature: None,
        arguments_incomplete: false,
    };
    ScriptedTurn::from_message(
        &assistant(vec![AssistantContent::ToolCall(call)], StopReason::ToolUse),
        3,
    )
}

fn text_turn(text: &str) -> ScriptedTurn {
    ScriptedTurn::from_message(
        &assistant(
            vec![AssistantContent::Text(TextContent {
                text: text.into(),
                ..TextContent::default()
            })],
            StopReason::Stop,
        ),
        3,
    )
}

fn counting_tool(runs: Arc<AtomicUsize>, keys: Arc<Mutex<Vec<String>>>) -> AgentTool {
    let tool = llm_core::Tool {
        name: "count".into(),
        description: "counts".into(),
        parameters: json!({"type": "object"}),
    };
    AgentTool::new(tool, move |_inv| {
        let runs = runs.clone();
        let keys = keys.clone();
        async move {
            let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
            if let Ok(mut k) = keys.lock() {
                k.push(current_idempotency_key().unwrap_or_default());
            }
            Ok::<_, ToolError>(ToolOutput::text(format!("run {n}")))
        }
    })
}

async fn run_once(
    journal: Arc<dyn Journal>,
    provider: ScriptedProvider,
    tool: AgentTool,
) -> agent_core::AgentOutcome {
    let config = AgentConfig::new(
        model(),
        Arc::new(JournaledProvider::new(Arc::new(provider), journal.clone())),
    );
    let context = AgentContext {
        system_prompt: None,
        messages: vec![],
        tools: vec![journaled_tool(tool, journal, "s-1")],
    };
    Agent::new(config).run(context, vec![Message::user("go")]).finish().await
}

#[tokio::test]
async fn a_replayed_run_repeats_no_model_request_and_no_tool() {
    let journal = Arc::new(MemoryJournal::default());
    let runs = Arc::new(AtomicUsize::new(0));
    let keys = Arc::new(Mutex::new(Vec::new()));
    let provider = ScriptedProvider::new(
        "scripted",
        [call_turn("c1"), call_turn("c2"), text_turn("finished")],
    );
    let first = run_once(
        Arc::new(Shared(journal.clone())),
        provider.clone(),
        counting_tool(runs.clone(), keys.clone()),
    )
    .await;
    assert_eq!(first.reason, EndReason::Completed);
    assert_eq!(provider.requests().len(), 3);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(
        journal.names(),
        ["model-request-0", "tool count c1", "model-request-1", "tool count c2", "model-request-2"]
    );
    assert_eq!(keys.lock().map(|k| k.clone()).unwrap_or_default(), ["s-1/c1", "s-1/c2"]);

    // Replay: a provider with no turns left and the same tool; nothing runs again.
    journal.rewind();
    let empty = ScriptedProvider::new("scripted", []);
    let replay = run_once(
        Arc::new(Shared(journal.clone())),
        empty.clone(),
        counting_tool(runs.clone(), keys.clone()),
    )
    .await;
    assert_eq!(replay.reason, EndReason::Completed);
    assert_eq!(empty.requests().len(), 0);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let strip = |ms: &[Message]| -> Vec<Value> {
        ms.iter()
            .map(|m| {
                let mut v = serde_json::to_value(m).unwrap_or(Value::Null);
                if let Some(o) = v.as_object_mut() {
                    o.remove("timestamp");
                }
                v
            })
            .collect()
    };
    assert_eq!(strip(replay.messages()), strip(first.messages()));
    assert!(check_tool_results(&replay.context.messages).is_empty());
}

#[tokio::test]
async fn tool_errors_and_panics_are_recorded_results() {
    let journal = Arc::new(MemoryJournal::default());
    let attempts = Arc::new(AtomicUsize::new(0));
    let counter = attempts.clone();
    let tool = llm_core::Tool {
        name: "count".into(),
        description: "fails".into(),
        parameters: json!({"type": "object"}),
    };
    let failing = AgentTool::new(tool, move |_inv| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move { if n == 0 { Err(ToolError("disk full".into())) } else { panic!("tool exploded") } }
    });
    let provider =
        ScriptedProvider::new("scripted", [call_turn("c1"), call_turn("c2"), text_turn("ok")]);
    let outcome = run_once(Arc::new(Shared(journal.clone())), provider, failing.clone()).await;
    let results: Vec<(bool, String)> = outcome
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some((
                r.is_error,
                r.content
                    .iter()
                    .filter_map(|c| match c {
                        llm_core::UserContent::Text(t) => Some(t.text.clone()),
                        _ => None,
                    })
                    .collect::<String>(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [(true, "disk full".to_owned()), (true, "Tool panicked: tool exploded".to_owned())]
    );
    journal.rewind();
    let replay =
        run_once(Arc::new(Shared(journal.clone())), ScriptedProvider::new("scripted", []), failing)
            .await;
    assert_eq!(attempts.load(Ordering::SeqCst), 2, "recorded failures are not retried on replay");
    assert_eq!(replay.reason, EndReason::Completed);
}

#[tokio::test]
async fn pass_through_runs_each_effect_and_reports_failures() {
    let journal: Arc<dyn Journal> = Arc::new(PassThrough);
    let runs = Arc::new(AtomicUsize::new(0));
    let provider = ScriptedProvider::new("scripted", [call_turn("c1"), text_turn("done")]);
    let keys = Arc::new(Mutex::new(Vec::new()));
    let outcome =
        run_once(journal.clone(), provider, counting_tool(runs.clone(), keys.clone())).await;
    assert_eq!(outcome.reason, EndReason::Completed);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(keys.lock().map(|k| k.clone()).unwrap_or_default(), ["s-1/c1"]);
    let failed: Result<u32, StepError> =
        agent_restate::step(&journal, "s".into(), || async { Err("boom".to_owned()) }).await;
    assert_eq!(failed, Err(StepError::Failed { step: "s".into(), message: "boom".into() }));
}

/// A provider that panics when asked for a stream.
struct PanickingProvider;

impl llm_core::Provider for PanickingProvider {
    fn api(&self) -> &str {
        "scripted"
    }
    fn stream(
        &self,
        _: &Model,
        _: &llm_core::Context,
        _: &llm_core::StreamOptions,
    ) -> llm_core::AssistantStream {
        panic!("provider exploded")
    }
}

#[tokio::test]
async fn a_panicking_provider_is_a_failed_step_not_a_crash() {
    let journal: Arc<dyn Journal> = Arc::new(Shared(Arc::default()));
    let config = AgentConfig::new(
        model(),
        Arc::new(JournaledProvider::new(Arc::new(PanickingProvider), journal)),
    );
    let outcome =
        Agent::new(config).run(AgentContext::default(), vec![Message::user("go")]).finish().await;
    assert_eq!(outcome.reason, EndReason::Error);
    let error = outcome.messages().iter().find_map(|m| match m {
        Message::Assistant(a) => a.error_message.clone(),
        _ => None,
    });
    assert!(error.is_some_and(|e| e.contains("Provider panicked: provider exploded")));
}
