//! The per-turn Entra token reaches the wire: one run, two requests, two tokens.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use clawcall::EndReason;
use llm_testkit::fixture::{Canned, Responses};
use llm_testkit::server::{Chunking, Server};

use super::*;

const CALL: &str = r#"event: response.output_item.added
data: {"type":"response.output_item.added","output_index":0,"item":{"id":"fc_e1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_e1","name":"unix_time"}}

event: response.output_item.done
data: {"type":"response.output_item.done","output_index":0,"item":{"id":"fc_e1","type":"function_call","status":"completed","arguments":"{}","call_id":"call_e1","name":"unix_time"}}

event: response.completed
data: {"type":"response.completed","response":{"id":"resp_e1","object":"response","status":"completed","model":"gpt-5-mini"}}

"#;

const ANSWER: &str = r#"event: response.output_item.added
data: {"type":"response.output_item.added","output_index":0,"item":{"id":"msg_e2","type":"message","status":"in_progress","role":"assistant","content":[]}}

event: response.text.delta
data: {"type":"response.text.delta","output_index":0,"item_id":"msg_e2","content_index":0,"delta":"It is late."}

event: response.output_item.done
data: {"type":"response.output_item.done","output_index":0,"item":{"id":"msg_e2","type":"message","status":"completed","role":"assistant","content":[{"type":"text","text":"It is late."}]}}

event: response.completed
data: {"type":"response.completed","response":{"id":"resp_e2","object":"response","status":"completed","model":"gpt-5-mini"}}

"#;

#[tokio::test]
async fn an_entra_token_resolved_per_turn_is_the_bearer_of_that_turn() {
    let sse =
        |body: &str| Canned::new(200, [("content-type", "text/event-stream")], body.to_owned());
    let server = Server::start(Responses::Sequence(vec![sse(CALL), sse(ANSWER)]), Chunking::Whole)
        .await
        .unwrap();
    let fetched = Arc::new(AtomicUsize::new(0));
    let counter = fetched.clone();
    let source: TokenSource = Arc::new(move || {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(format!("entra-token-{n}"))
    });
    // A fixed, empty environment: nothing from the machine running the test.
    let provider = OpenAiResponsesProvider::builder()
        .wire(OpenAiResponses::Azure)
        .env(BTreeMap::<String, String>::new())
        .build();
    let base = format!("http://{}/openai/v1", server.addr);
    let config = config(provider, "gpt-5-mini", &base, None, Some(source));
    let context =
        AgentContext { system_prompt: None, messages: Vec::new(), tools: vec![clock_tool()] };

    let outcome =
        Agent::new(config).run(context, vec![Message::user("What time is it?")]).finish().await;

    assert_eq!(outcome.reason, EndReason::Completed, "{:?}", outcome.messages());
    let requests = server.recorded();
    assert_eq!(requests.len(), 2);
    assert_eq!(fetched.load(Ordering::SeqCst), 2);
    for (n, request) in requests.iter().enumerate() {
        assert_eq!(request.path, "/openai/v1/responses");
        assert_eq!(request.query.as_deref(), Some("api-version=v1"));
        let bearer = format!("Bearer entra-token-{}", n + 1);
        assert_eq!(request.header("authorization"), Some(bearer.as_str()));
        // OpenClaw sent the token as `api-key`, which Azure rejects for Entra tokens.
        assert_eq!(request.header("api-key"), None);
        assert_eq!(request.json()["model"], "gpt-5-mini");
    }
}

#[tokio::test]
async fn a_failing_token_source_ends_the_run_before_any_request() {
    let server = Server::start(Responses::Sequence(vec![]), Chunking::Whole).await.unwrap();
    let source: TokenSource = Arc::new(|| Err("az is not logged in".to_owned()));
    let provider = OpenAiResponsesProvider::builder()
        .wire(OpenAiResponses::Azure)
        .env(BTreeMap::<String, String>::new())
        .build();
    let base = format!("http://{}/openai/v1", server.addr);
    let config = config(provider, "gpt-5-mini", &base, None, Some(source));
    let context = AgentContext { system_prompt: None, messages: Vec::new(), tools: Vec::new() };
    let outcome = Agent::new(config).run(context, vec![Message::user("hi")]).finish().await;
    assert!(matches!(outcome.reason, EndReason::Failed), "{:?}", outcome.reason);
    assert!(server.recorded().is_empty());
}
