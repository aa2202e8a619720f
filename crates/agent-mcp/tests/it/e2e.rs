//! End to end: each provider crate, on a loopback server speaking its wire
//! format, calls an MCP tool; the MCP result must reach the next request in
//! that provider's own tool-result shape.
//!
//! The streamed answers are the repository's `tool-call-single` and
//! `text-only` fixtures of each provider, with the tool name replaced by the
//! MCP tool's exposed name.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_core::{Agent, AgentConfig, AgentEvent, EndReason, check_tool_results};
use agent_mcp::McpServers;
use futures_util::StreamExt;
use llm_core::{ApiKey, Message, Model, Provider};
use serde_json::Value;

use crate::*;

const TOOL: &str = "fault__describe";

struct Loopback {
    base: String,
    requests: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers the n-th POST with `bodies[n]` as an SSE stream and records every request body.
async fn loopback(bodies: Vec<String>) -> Loopback {
    let requests: Arc<Mutex<Vec<Value>>> = Arc::default();
    let recorded = requests.clone();
    let bodies = Arc::new(bodies);
    let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
        let recorded = recorded.clone();
        let bodies = bodies.clone();
        async move {
            let n = {
                let mut r = recorded.lock().unwrap();
                r.push(serde_json::from_slice(&body).unwrap_or(Value::Null));
                r.len() - 1
            };
            let body = bodies.get(n).cloned().unwrap_or_default();
            ([("content-type", "text/event-stream")], body)
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Loopback { base: format!("http://{addr}"), requests, task }
}

fn fixture(provider: &str, scenario: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures").join(provider).join(scenario)
}

/// The fixture's model, with its base URL pointed at `base` (keeping the path).
fn model_of(dir: &Path, base: &str) -> (Model, String) {
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("input.json")).unwrap()).unwrap();
    let mut model: Model = serde_json::from_value(input["model"].clone()).unwrap();
    let path = model
        .base_url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.find('/').map(|i| rest[i..].to_owned()))
        .unwrap_or_default();
    model.base_url = format!("{base}{path}");
    let tool_name = input["context"]["tools"][0]["name"].as_str().unwrap().to_owned();
    (model, tool_name)
}

/// Every object anywhere in `v`.
fn objects(v: &Value, out: &mut Vec<serde_json::Map<String, Value>>) {
    match v {
        Value::Object(m) => {
            out.push(m.clone());
            m.values().for_each(|c| objects(c, out));
        }
        Value::Array(a) => a.iter().for_each(|c| objects(c, out)),
        _ => {}
    }
}

/// The tool-result object of each wire format, found in the second request.
fn tool_result_in(provider: &str, body: &Value) -> Option<serde_json::Map<String, Value>> {
    let mut all = Vec::new();
    objects(body, &mut all);
    all.into_iter().find(|o| match provider {
        "anthropic" => o.get("type") == Some(&Value::from("tool_result")),
        "openai-completions" | "mistral" => o.get("role") == Some(&Value::from("tool")),
        "openai-responses" => o.get("type") == Some(&Value::from("function_call_output")),
        "google" => o.contains_key("functionResponse"),
        _ => false,
    })
}

async fn round_trip(provider_name: &str, provider: Arc<dyn Provider>) {
    let call_dir = fixture(provider_name, "tool-call-single");
    let (_, fixture_tool) = model_of(&call_dir, "http://unused");
    let call_sse = std::fs::read_to_string(call_dir.join("response.sse"))
        .unwrap()
        .replace(&format!("\"{fixture_tool}\""), &format!("\"{TOOL}\""));
    let text_sse =
        std::fs::read_to_string(fixture(provider_name, "text-only").join("response.sse")).unwrap();
    let server = loopback(vec![call_sse, text_sse]).await;
    let (model, _) = model_of(&call_dir, &server.base);

    let (config, _) = fault_server("fault");
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let mut agent_config = AgentConfig::new(model, provider);
    agent_config.options.api_key = Some(ApiKey::new("test-key"));
    let events: Vec<AgentEvent> = Agent::new(agent_config)
        .run(context(set.tools.clone()), vec![Message::user("What is the weather?")])
        .collect()
        .await;
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed, "{provider_name}: {messages:?}");
    assert_eq!(check_tool_results(&messages), vec![]);
    let r = results(&messages);
    assert_eq!(r.len(), 1, "{provider_name}");
    assert!(!r[0].is_error, "{provider_name}: {:?}", r[0]);
    let result_text = text_of(&r[0].content);
    assert!(result_text.starts_with("arguments: {"), "{provider_name}: {result_text}");
    assert!(r[0].details.as_ref().unwrap()["structuredContent"]["arguments"].is_object());

    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "{provider_name}");
    let wire = tool_result_in(provider_name, &requests[1])
        .unwrap_or_else(|| panic!("{provider_name}: no tool result in {}", requests[1]));
    let wire_text = Value::Object(wire).to_string();
    // The result text, JSON-escaped as it travels.
    let escaped = serde_json::to_string(&result_text).unwrap();
    let escaped = escaped.trim_matches('"');
    assert!(wire_text.contains(escaped), "{provider_name}: {wire_text} lacks {escaped}");
    assert!(tool_result_in(provider_name, &requests[0]).is_none());
    // The first request offered the MCP tool under its exposed name.
    assert!(requests[0].to_string().contains(TOOL), "{provider_name}");
    servers.shutdown().await;
}

#[tokio::test]
async fn anthropic() {
    round_trip("anthropic", Arc::new(llm_anthropic::AnthropicProvider::new())).await;
}

#[tokio::test]
async fn openai_completions() {
    round_trip(
        "openai-completions",
        Arc::new(llm_openai_completions::OpenAiCompletionsProvider::new()),
    )
    .await;
}

#[tokio::test]
async fn openai_responses() {
    round_trip("openai-responses", Arc::new(llm_openai_responses::OpenAiResponsesProvider::new()))
        .await;
}

#[tokio::test]
async fn google() {
    round_trip("google", Arc::new(llm_google::GoogleProvider::new())).await;
}

#[tokio::test]
async fn mistral() {
    round_trip("mistral", Arc::new(llm_mistral::MistralProvider::new())).await;
}
