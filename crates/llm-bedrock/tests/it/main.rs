//! Integration tests for llm-bedrock: the provider over loopback HTTP with a binary
//! event-stream body, and a live smoke test that runs only with credentials.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
#![allow(clippy::disallowed_methods, reason = "tests read their own process environment")]

mod app_profile;
#[cfg(feature = "aws-config")]
mod credentials;
mod signing;

use futures_util::StreamExt;
use llm_core::{AssistantEvent, Context, Message, Model, Provider, StopReason, StreamOptions};
use llm_testkit::eventstream::{FrameSource, encode};
use llm_testkit::fixture::{Canned, Responses};
use llm_testkit::server::{Chunking, Server};
use serde_json::json;

#[test]
fn serves_its_api_id() {
    assert_eq!(llm_bedrock::BedrockProvider::new().api(), llm_bedrock::API);
    assert_eq!(llm_bedrock::INFO.api, llm_bedrock::API);
}

/// The whole path (conversion, bearer auth, HTTP, framing, decoding, assembly) over a
/// loopback server, every chunking; the request's path and headers are Bedrock's.
#[tokio::test]
async fn streams_over_loopback_in_every_chunking() {
    let body = encode(&[
        FrameSource::event("messageStart", json!({"role": "assistant"})),
        FrameSource::event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": "Hé"}}),
        ),
        FrameSource::event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": "llo"}}),
        ),
        FrameSource::event("contentBlockStop", json!({"contentBlockIndex": 0})),
        FrameSource::event("messageStop", json!({"stopReason": "end_turn"})),
        FrameSource::event("metadata", json!({"usage": {"inputTokens": 3, "outputTokens": 2}})),
    ])
    .unwrap_or_default();
    for chunking in Chunking::ALL {
        let canned = Canned::new(
            200,
            [("content-type", llm_testkit::eventstream::CONTENT_TYPE)],
            body.clone(),
        );
        let server = Server::start(Responses::Always(canned), chunking).await.unwrap_or_else(|e| {
            panic!("cannot start the server: {e}");
        });
        let model = Model {
            id: "us.amazon.nova-pro-v1:0".into(),
            api: llm_bedrock::API.into(),
            provider: llm_bedrock::PROVIDER.into(),
            base_url: format!("http://{}", server.addr),
            ..Model::default()
        };
        let options = StreamOptions {
            api_key: Some(llm_core::ApiKey::new("test-key")),
            ..StreamOptions::default()
        };
        let context = Context { messages: vec![Message::user("Say hello.")], ..Context::default() };
        let provider = llm_bedrock::BedrockProvider::new();
        let events: Vec<AssistantEvent> =
            provider.stream(&model, &context, &options).collect().await;
        let Some(AssistantEvent::Done { message, .. }) = events.last() else {
            panic!("{chunking:?}: no done event: {events:?}");
        };
        assert_eq!(message.text(), "Héllo", "{chunking:?}");
        assert_eq!(message.stop_reason, StopReason::Stop);
        assert_eq!((message.usage.input, message.usage.output), (3, 2));
        let recorded = server.recorded();
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0].path, "/model/us.amazon.nova-pro-v1%3A0/converse-stream");
        assert_eq!(recorded[0].header("authorization"), Some("Bearer test-key"));
        assert_eq!(recorded[0].json()["messages"][0]["content"][0]["text"], json!("Say hello."));
    }
}

/// OpenClaw's session-level retry matching on the error text, as the typed
/// error a session reads instead: each exception arrives after text (so the driver does
/// not retry what was already shown), and the error says whether a new turn may retry it
/// (`retryable`) and whether the prompt is too long (`context_length`, compact first).
#[tokio::test]
async fn exceptions_after_content_say_whether_a_session_may_retry() {
    use llm_core::ErrorKind;
    let cases = [
        ("internalServerException", "x", "Internal server error: x", true, false),
        ("modelStreamErrorException", "x", "Model stream error: x", false, false),
        (
            "validationException",
            "Input is too long for requested model",
            "Validation error: Input is too long for requested model",
            false,
            true,
        ),
        (
            "throttlingException",
            "Too many tokens, please wait",
            "Throttling error: Too many tokens, please wait",
            true,
            false,
        ),
    ];
    for (exception, text, expected, retryable, overflow) in cases {
        let body = encode(&[
            FrameSource::event("messageStart", json!({"role": "assistant"})),
            FrameSource::event(
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"text": "Hi"}}),
            ),
            FrameSource {
                exception: Some(exception.to_owned()),
                payload: Some(json!({"message": text})),
                ..FrameSource::default()
            },
        ])
        .unwrap_or_default();
        let canned =
            Canned::new(200, [("content-type", llm_testkit::eventstream::CONTENT_TYPE)], body);
        let server =
            Server::start(Responses::Always(canned), Chunking::Whole).await.unwrap_or_else(|e| {
                panic!("cannot start the server: {e}");
            });
        let model = Model {
            id: "us.amazon.nova-pro-v1:0".into(),
            api: llm_bedrock::API.into(),
            provider: llm_bedrock::PROVIDER.into(),
            base_url: format!("http://{}", server.addr),
            ..Model::default()
        };
        let options = StreamOptions {
            api_key: Some(llm_core::ApiKey::new("test-key")),
            ..StreamOptions::default()
        };
        let context = Context { messages: vec![Message::user("Say hello.")], ..Context::default() };
        let events: Vec<AssistantEvent> =
            llm_bedrock::BedrockProvider::new().stream(&model, &context, &options).collect().await;
        let Some(AssistantEvent::Error { error, message, .. }) = events.last() else {
            panic!("{exception}: no error event: {events:?}");
        };
        assert_eq!(error.message, expected);
        assert_eq!(message.error_message.as_deref(), Some(expected));
        assert_eq!(message.text(), "Hi", "{exception}: partial content is kept");
        assert_eq!(error.retryable, retryable, "{exception}");
        assert_eq!(
            error.kind == ErrorKind::ContextLength,
            overflow,
            "{exception}: {:?}",
            error.kind
        );
        assert_eq!(server.recorded().len(), 1, "{exception}: not retried after content");
    }
}

/// One live round trip with a tool; runs only when `CLAWCALL_LIVE_BEDROCK_MODEL` names a
/// model and `AWS_BEARER_TOKEN_BEDROCK` or `AWS_ACCESS_KEY_ID` plus `AWS_SECRET_ACCESS_KEY`
/// are set (the region comes from `AWS_REGION`, else `us-east-1`).
#[tokio::test]
async fn live_smoke() {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let Ok(model_id) = std::env::var("CLAWCALL_LIVE_BEDROCK_MODEL") else {
        println!("skipped: CLAWCALL_LIVE_BEDROCK_MODEL not set");
        return;
    };
    let aws_keys = set("AWS_ACCESS_KEY_ID") && set("AWS_SECRET_ACCESS_KEY");
    if !(set("AWS_BEARER_TOKEN_BEDROCK") || aws_keys) {
        println!("skipped: neither AWS_BEARER_TOKEN_BEDROCK nor AWS access keys are set");
        return;
    }
    let model = llm_bedrock::INFO.model(&model_id).unwrap_or_else(|| Model {
        id: model_id.clone(),
        api: llm_bedrock::API.into(),
        provider: llm_bedrock::PROVIDER.into(),
        max_tokens: 1024,
        ..Model::default()
    });
    // No key in the options: the crate finds the bearer token or signs with SigV4.
    let options = StreamOptions { max_tokens: Some(256), ..StreamOptions::default() };
    let context = Context {
        messages: vec![Message::user(
            "Call the tool `add` with a=2 and b=3. Do not answer in text.",
        )],
        tools: vec![llm_core::Tool {
            name: "add".into(),
            description: "Adds two integers.".into(),
            parameters: json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
        }],
        ..Context::default()
    };
    let message = llm_bedrock::BedrockProvider::new().complete(&model, &context, &options).await;
    assert!(message.error_message.is_none(), "{:?}", message.error_message);
    let call = message.tool_calls().next().map(|c| c.arguments.clone());
    assert_eq!(call, Some(json!({"a": 2, "b": 3})), "{message:?}");
}
