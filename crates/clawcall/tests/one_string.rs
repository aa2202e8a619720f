//! The README's program on three providers, the model id the only change: each run
//! replays that provider's recorded session (`fixtures/<provider>/agent-session/`) over
//! loopback HTTP through the real provider crate and agent loop.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests")]

use std::path::Path;

use clawcall::{
    Agent, AgentConfig, AgentContext, AgentEvent, AgentTool, ApiKey, EndReason, Message,
    ToolInvocation, ToolOutput,
};
use futures_util::StreamExt;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Note {
    title: String,
    body: String,
}

/// What the program saw: the outcome, and every partial-arguments value it printed.
async fn program(config: AgentConfig) -> (clawcall::AgentOutcome, Vec<String>) {
    let add =
        AgentTool::typed("add", "Adds two integers", |args: Add, _: ToolInvocation| async move {
            Ok(ToolOutput::text((args.a + args.b).to_string()))
        });
    let note = AgentTool::typed(
        "write_note",
        "Saves a note",
        |args: Note, _: ToolInvocation| async move {
            Ok(ToolOutput::text(format!("saved {:?} ({} bytes)", args.title, args.body.len())))
        },
    );
    let context = AgentContext { system_prompt: None, messages: vec![], tools: vec![add, note] };
    let prompt = Message::user("What is 2 + 3? Save the answer as a note.");
    let mut run = Agent::new(config).run(context, vec![prompt]);
    let mut printed = Vec::new();
    while let Some(event) = run.next().await {
        if let Some(part) = run.changed_arguments(&event) {
            printed.push(part.to_string());
        }
        if let AgentEvent::AgentEnd { .. } = event {
            break;
        }
    }
    while run.next().await.is_some() {}
    (run.outcome().cloned().expect("ended"), printed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_string_switches_the_provider() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    for id in
        ["anthropic/claude-sonnet-4-5", "openai-completions/gpt-5-mini", "google/gemini-2.5-flash"]
    {
        let resolved = clawcall::resolve(id).unwrap();
        let session = llm_testkit::replay::Session::load(
            &fixtures.join(resolved.entry.name()).join("agent-session"),
        )
        .unwrap();
        let server = session.serve().await.unwrap();
        // The catalog's model and provider, pointed at the loopback replay.
        let mut config = AgentConfig::new(resolved.model.clone(), resolved.provider());
        config.model.base_url = server.base_url();
        config.options.api_key = Some(ApiKey::new("test-key"));

        let (outcome, printed) = program(config).await;
        assert_eq!(outcome.reason, EndReason::Completed, "{id}: {:?}", outcome.error);
        assert_eq!(outcome.error, None, "{id}");
        assert_eq!(server.requests(), 3, "{id}: the three recorded turns");
        assert!(!outcome.text().is_empty(), "{id}");
        let usage = outcome.usage();
        assert!(usage.input > 0 && usage.output > 0, "{id}: {usage:?}");
        // The cost is the catalog's prices times the tokens, summed over the turns.
        let prices = resolved.model.cost;
        let expected = (usage.input as f64 * prices.input
            + usage.output as f64 * prices.output
            + usage.cache_read as f64 * prices.cache_read
            + usage.cache_write as f64 * prices.cache_write)
            / 1e6;
        assert!(
            expected > 0.0 && (outcome.cost() - expected).abs() < 1e-9,
            "{id}: {}",
            outcome.cost()
        );
        // Every recorded session calls tools: their arguments were shown as they were parsed
        // (Gemini sends each call's arguments whole: one value per call).
        assert!(!printed.is_empty(), "{id}: no partial arguments shown");
    }
}
