//! Integration tests through the public API: a loopback HTTP server with canned
//! responses, and live smoke tests that run only with `OPENAI_API_KEY` (OpenAI) or the Azure variables.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]
#![allow(clippy::disallowed_methods, reason = "tests read their own process environment")]

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use llm_core::{
    ApiKey, AssistantEvent, AssistantMessage, Context, ErrorKind, Message, Model, Provider,
    RecordingSleeper, RetryPolicy, StopReason, StreamOptions, Tool, ToolResultMessage, UserContent,
};
use llm_openai_responses::{
    API, AZURE_API, AZURE_PROVIDER, OpenAiResponsesCompat, OpenAiResponsesProvider, PROVIDER,
};
use llm_testkit::fixture::{self as testkit, Responses};
use llm_testkit::server::{Chunking, Server, ServerOptions};
use serde_json::json;

/// One canned answer.
#[derive(Clone)]
struct Canned {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
}

fn sse_ok(body: &str) -> Canned {
    Canned {
        status: 200,
        headers: vec![("content-type", "text/event-stream".into())],
        body: body.to_owned(),
    }
}

/// Answer *i* goes to request *i*.
async fn serve(answers: Vec<Canned>) -> (String, Server) {
    serve_with(answers, ServerOptions::default()).await
}

/// [`serve`] with `options`.
async fn serve_with(answers: Vec<Canned>, options: ServerOptions) -> (String, Server) {
    let canned =
        answers.into_iter().map(|c| testkit::Canned::new(c.status, c.headers, c.body)).collect();
    let server =
        Server::start_with(Responses::Sequence(canned), Chunking::Events, options).await.unwrap();
    (format!("http://{}/v1", server.addr), server)
}

fn model(base_url: &str) -> Model {
    Model {
        id: "gpt-5.4-mini".into(),
        api: API.into(),
        provider: "openai".into(),
        base_url: base_url.into(),
        reasoning: false,
        cost: llm_core::ModelCost { input: 0.25, output: 2.0, cache_read: 0.025, cache_write: 0.0 },
        max_tokens: 4096,
        ..Model::default()
    }
}

fn weather_tool() -> Tool {
    Tool {
        name: "get_weather".into(),
        description: "Current weather for a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }
}

fn options(sleeper: Arc<RecordingSleeper>) -> StreamOptions {
    StreamOptions {
        api_key: Some(ApiKey::new("sk-test-secret-123")),
        session_id: Some("sess-1".into()),
        retry: RetryPolicy { max_retries: 2, jitter: false, ..RetryPolicy::default() },
        sleeper: Some(sleeper),
        ..StreamOptions::default()
    }
}

const TOOL_STREAM: &str = r#"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_Ex02","object":"response","status":"in_progress","model":"gpt-5.4-mini-2026-03-17","output":[]}}

event: response.output_item.added
data: {"type":"response.output_item.added","item":{"id":"fc_Ex02","type":"function_call","status":"in_progress","arguments":"","call_id":"call_Ex02","name":"get_weather"},"output_index":0,"sequence_number":2}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","delta":"{\"","item_id":"fc_Ex02","obfuscation":"q1w2e3","output_index":0,"sequence_number":3}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","delta":"city\":\"Bergen\"}","item_id":"fc_Ex02","obfuscation":"r4","output_index":0,"sequence_number":4}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","arguments":"{\"city\":\"Bergen\"}","item_id":"fc_Ex02","output_index":0,"sequence_number":5}

event: response.output_item.done
data: {"type":"response.output_item.done","item":{"id":"fc_Ex02","type":"function_call","status":"completed","arguments":"{\"city\":\"Bergen\"}","call_id":"call_Ex02","name":"get_weather"},"output_index":0,"sequence_number":6}

event: response.completed
data: {"type":"response.completed","response":{"id":"resp_Ex02","object":"response","status":"completed","error":null,"incomplete_details":null,"model":"gpt-5.4-mini-2026-03-17","usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":100},"output_tokens":18,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":138}},"sequence_number":7}

"#;

async fn collect(
    provider: &dyn Provider,
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Vec<AssistantEvent> {
    provider.stream(model, context, options).collect().await
}

fn terminal(events: &[AssistantEvent]) -> &AssistantMessage {
    match events.last() {
        Some(AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. }) => {
            message
        }
        other => panic!("no terminal event: {other:?}"),
    }
}

#[tokio::test]
async fn end_to_end_tool_call_over_loopback() {
    let (base, received) = serve(vec![sse_ok(TOOL_STREAM)]).await;
    let provider = OpenAiResponsesProvider::new();
    assert_eq!(provider.api(), "openai-responses");
    let context = Context {
        system_prompt: Some("You are terse.".into()),
        messages: vec![Message::user("Weather in Bergen?")],
        tools: vec![weather_tool()],
    };
    let events =
        collect(&provider, &model(&base), &context, &options(Arc::new(RecordingSleeper::new())))
            .await;
    assert!(matches!(events.first(), Some(AssistantEvent::Start)));
    let message = terminal(&events);
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    let call = message.tool_calls().next().unwrap();
    assert_eq!((call.id.as_str(), call.name.as_str()), ("call_Ex02|fc_Ex02", "get_weather"));
    assert_eq!(call.arguments, json!({"city": "Bergen"}));
    assert_eq!(
        (message.usage.input, message.usage.cache_read, message.usage.output),
        (20, 100, 18)
    );
    assert!(message.usage.cost.total > 0.0);

    let received = received.recorded();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert_eq!((request.method.as_str(), request.path.as_str()), ("POST", "/v1/responses"));
    assert_eq!(request.header("authorization"), Some("Bearer sk-test-secret-123"));
    assert_eq!(request.header("session_id"), Some("sess-1"));
    assert_eq!(request.header("x-client-request-id"), Some("sess-1"));
    assert_eq!(request.json()["model"], json!("gpt-5.4-mini"));
    assert_eq!(request.json()["stream"], json!(true));
    assert_eq!(request.json()["store"], json!(false));
    assert_eq!(request.json()["prompt_cache_key"], json!("sess-1"));
    assert_eq!(request.json()["tools"][0]["strict"], json!(true));
    assert_eq!(request.json()["tools"][0]["parameters"]["additionalProperties"], json!(false));
    assert_eq!(request.json()["input"][0]["role"], json!("system"));
}

#[tokio::test]
async fn retry_after_429_then_success() {
    let limited = Canned {
        status: 429,
        headers: vec![("content-type", "application/json".into()), ("retry-after", "2".into())],
        body: r#"{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#.into(),
    };
    let (base, received) = serve(vec![limited, sse_ok(TOOL_STREAM)]).await;
    let sleeper = Arc::new(RecordingSleeper::new());
    let context = Context {
        messages: vec![Message::user("Weather?")],
        tools: vec![weather_tool()],
        ..Context::default()
    };
    let events = collect(
        &OpenAiResponsesProvider::new(),
        &model(&base),
        &context,
        &options(sleeper.clone()),
    )
    .await;
    assert_eq!(terminal(&events).stop_reason, StopReason::ToolUse);
    assert_eq!(sleeper.delays(), vec![Duration::from_secs(2)]);
    let received = received.recorded();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].body, received[1].body, "a retry sends the same bytes");
}

#[tokio::test]
async fn http_401_is_auth_without_retry_and_without_the_key() {
    let denied = Canned {
        status: 401,
        headers: vec![("content-type", "application/json".into())],
        body: "{\n  \"error\": {\n    \"message\": \"Incorrect API key provided: sk-test-***123.\",\n    \"type\": \"invalid_request_error\",\n    \"param\": null,\n    \"code\": \"invalid_api_key\"\n  }\n}\n".into(),
    };
    let (base, received) = serve(vec![denied]).await;
    let sleeper = Arc::new(RecordingSleeper::new());
    let events = collect(
        &OpenAiResponsesProvider::new(),
        &model(&base),
        &Context::default(),
        &options(sleeper.clone()),
    )
    .await;
    let Some(AssistantEvent::Error { error, message, .. }) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(error.kind, ErrorKind::Auth);
    assert_eq!(error.status, Some(401));
    assert_eq!(error.code.as_deref(), Some("invalid_api_key"));
    assert_eq!(error.provider, PROVIDER);
    assert!(!error.retryable);
    assert!(message.error_body.as_deref().unwrap().contains("invalid_api_key"));
    let printed = format!("{error} {error:?} {message:?}");
    assert!(!printed.contains("sk-test-secret-123"));
    assert_eq!(received.recorded().len(), 1);
    assert!(sleeper.delays().is_empty());
}

#[tokio::test]
async fn missing_key_fails_without_a_request() {
    let (base, received) = serve(vec![]).await;
    let mut options = options(Arc::new(RecordingSleeper::new()));
    options.api_key = None;
    let events =
        collect(&OpenAiResponsesProvider::new(), &model(&base), &Context::default(), &options)
            .await;
    assert_eq!(events.len(), 1);
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
    assert_eq!(
        (error.kind, error.message.as_str()),
        (ErrorKind::Auth, "No API key for provider: openai")
    );
    assert!(received.recorded().is_empty());
}

#[tokio::test]
async fn stream_cut_before_terminal_is_truncated_and_abort_is_single() {
    let cut = TOOL_STREAM.split("event: response.completed").next().unwrap().to_owned();
    let (base, _server) = serve(vec![sse_ok(&cut)]).await;
    let events = collect(
        &OpenAiResponsesProvider::new(),
        &model(&base),
        &Context::default(),
        &options(Arc::new(RecordingSleeper::new())),
    )
    .await;
    let Some(AssistantEvent::Error { error, message, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Truncated);
    assert_eq!(message.tool_calls().count(), 1, "partial content is kept");

    // The server sends some text and then stalls; the caller cancels.
    let stall = Canned {
        status: 200,
        headers: vec![("content-type", "text/event-stream".into())],
        body: "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hel\",\"item_id\":\"msg_1\",\"output_index\":0}\n\n".into(),
    };
    let stalls = ServerOptions { stall_after: Some(stall.body.len()), ..ServerOptions::default() };
    let (base, _server) = serve_with(vec![stall], stalls).await;
    let options = options(Arc::new(RecordingSleeper::new()));
    let mut stream =
        OpenAiResponsesProvider::new().stream(&model(&base), &Context::default(), &options);
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        if matches!(event, AssistantEvent::TextDelta { .. }) {
            options.cancel.cancel();
        }
        events.push(event);
    }
    assert_eq!(events.iter().filter(|e| e.is_terminal()).count(), 1);
    let Some(AssistantEvent::Error { reason, message, .. }) = events.last() else { panic!() };
    assert_eq!(*reason, StopReason::Aborted);
    assert_eq!(message.text(), "Hel");
}

#[test]
fn compat_is_a_plain_documented_struct() {
    let compat: OpenAiResponsesCompat =
        serde_json::from_value(json!({"strictTools": false, "replayResponsesItemIds": true, "thinkingLevelMap": {"off": null}}))
            .unwrap();
    assert_eq!(compat.strict_tools, Some(false));
    assert_eq!(compat.replay_item_ids, Some(true));
    assert_eq!(compat.thinking_level_map.get("off"), Some(&None));
    let _ = OpenAiResponsesProvider::default();
    let _ = OpenAiResponsesProvider::builder().http_client(reqwest::Client::new()).build();
}

/// One real tool round trip; runs only when `OPENAI_API_KEY` is set.
#[tokio::test]
async fn live_smoke_tool_round_trip() {
    let Some(key) = std::env::var("OPENAI_API_KEY").ok().filter(|k| !k.is_empty()) else {
        println!("skipped: OPENAI_API_KEY not set");
        return;
    };
    let provider = OpenAiResponsesProvider::new();
    let model = Model {
        id: std::env::var("OPENAI_RESPONSES_MODEL").unwrap_or_else(|_| "gpt-4.1-mini".into()),
        ..model("https://api.openai.com/v1")
    };
    let options = StreamOptions {
        api_key: Some(ApiKey::new(key)),
        max_tokens: Some(512),
        ..StreamOptions::default()
    };
    live_tool_round_trip(&provider, &model, &options).await;
}

/// A tool call, its result, and the answer, against a real endpoint.
async fn live_tool_round_trip(
    provider: &OpenAiResponsesProvider,
    model: &Model,
    options: &StreamOptions,
) {
    let mut context = Context {
        system_prompt: Some("Use the tool to answer.".into()),
        messages: vec![Message::user("What is the weather in Bergen? Use get_weather.")],
        tools: vec![weather_tool()],
    };
    let first = provider.stream(model, &context, options).result().await;
    assert_eq!(first.stop_reason, StopReason::ToolUse, "{:?}", first.error_message);
    let call = first.tool_calls().next().cloned().unwrap();
    assert_eq!(call.name, "get_weather");
    context.messages.push(Message::Assistant(Box::new(first.clone())));
    context.messages.push(Message::ToolResult(ToolResultMessage {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        content: vec![UserContent::text("Rain, 9°C")],
        details: None,
        is_error: false,
        timestamp: 0,
    }));
    let second = provider.stream(model, &context, options).result().await;
    assert_eq!(second.stop_reason, StopReason::Stop, "{:?}", second.error_message);
    assert!(!second.text().is_empty());
}

/// One real tool round trip on Azure OpenAI; runs only when `AZURE_OPENAI_API_KEY`,
/// `AZURE_OPENAI_BASE_URL` (or `AZURE_OPENAI_RESOURCE_NAME`) and
/// `CLAWCALL_LIVE_AZURE_DEPLOYMENT` are set. The provider reads the first two itself.
#[tokio::test]
async fn live_azure_smoke_tool_round_trip() {
    let set = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let located = set("AZURE_OPENAI_BASE_URL").or_else(|| set("AZURE_OPENAI_RESOURCE_NAME"));
    let (Some(_), Some(_), Some(deployment)) =
        (set("AZURE_OPENAI_API_KEY"), located, set("CLAWCALL_LIVE_AZURE_DEPLOYMENT"))
    else {
        println!(
            "skipped: AZURE_OPENAI_API_KEY, AZURE_OPENAI_BASE_URL (or AZURE_OPENAI_RESOURCE_NAME) \
             and CLAWCALL_LIVE_AZURE_DEPLOYMENT not all set"
        );
        return;
    };
    let provider = OpenAiResponsesProvider::builder()
        .wire(llm_openai_responses::OpenAiResponses::Azure)
        .build();
    let model = Model {
        id: deployment,
        api: AZURE_API.into(),
        provider: AZURE_PROVIDER.into(),
        ..model("")
    };
    let options = StreamOptions { max_tokens: Some(512), ..StreamOptions::default() };
    // Item ids are replayed (Azure's default), so the second turn replays them live.
    live_tool_round_trip(&provider, &model, &options).await;
}
