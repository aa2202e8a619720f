//! Integration tests through the public API: the provider against a tiny loopback
//! HTTP server (requests recorded, canned responses), the public decoder, and a live
//! smoke test that runs only with `GEMINI_API_KEY`.
#![allow(clippy::disallowed_methods, reason = "tests read their own process environment")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use llm_core::{
    ApiKey, AssistantContent, AssistantEvent, Context, ErrorKind, Message, Model, Provider,
    RecordingSleeper, RetryPolicy, StopReason, StreamOptions, Tool, ToolResultMessage, UserContent,
};
use llm_google::{GoogleProvider, PROVIDER};
use llm_testkit::fixture::{Canned, Responses};
use llm_testkit::server::{Chunking, Server};
use serde_json::{Value, json};

/// A request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// Serves `responses` in order from the llm-testkit loopback server, which records
/// the requests (dropping the server stops it).
async fn serve(responses: Vec<(u16, &'static str, String)>) -> (String, Server) {
    let canned = responses
        .into_iter()
        .map(|(status, content_type, body)| Canned {
            status,
            headers: vec![("content-type".to_owned(), content_type.to_owned())],
            body: body.into(),
        })
        .collect();
    let server = Server::start(Responses::Sequence(canned), Chunking::Events).await.unwrap();
    (format!("http://{}/v1beta", server.addr), server)
}

/// The requests `server` received, in order.
fn seen(server: &Server) -> Vec<Seen> {
    server
        .recorded()
        .into_iter()
        .map(|r| Seen {
            method: r.method,
            target: match r.query {
                Some(q) => format!("{}?{q}", r.path),
                None => r.path,
            },
            headers: r.headers,
            body: r.body.to_vec(),
        })
        .collect()
}

fn model(base_url: &str) -> Model {
    Model {
        id: "gemini-2.5-flash".into(),
        api: "google-generative-ai".into(),
        provider: "google".into(),
        base_url: base_url.into(),
        max_tokens: 8192,
        ..Model::default()
    }
}

fn options() -> StreamOptions {
    StreamOptions {
        api_key: Some(ApiKey::new("test-key-123")),
        retry: RetryPolicy { jitter: false, ..RetryPolicy::default() },
        sleeper: Some(Arc::new(RecordingSleeper::new())),
        ..StreamOptions::default()
    }
}

fn weather_context() -> Context {
    Context {
        system_prompt: Some("Be brief.".into()),
        messages: vec![Message::user("Weather in Lisbon and Porto?")],
        tools: vec![Tool {
            name: "get_weather".into(),
            description: "Current weather".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        }],
    }
}

const TWO_CALLS: &str = "data: {\"candidates\": [{\"content\": {\"role\": \"model\",\"parts\": [{\"functionCall\": {\"name\": \"get_weather\",\"args\": {\"city\": \"Lisbon\"}}},{\"functionCall\": {\"name\": \"get_weather\",\"args\": {\"city\": \"Porto\"}}}]},\"finishReason\": \"STOP\"}],\"usageMetadata\": {\"promptTokenCount\": 27,\"candidatesTokenCount\": 10,\"totalTokenCount\": 37},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"ExAmPlE0003\"}\r\n\r\n";

async fn collect(
    provider: &GoogleProvider,
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Vec<AssistantEvent> {
    provider.stream(model, context, options).collect().await
}

#[tokio::test]
async fn end_to_end_two_parallel_calls_and_request_shape() {
    let (base, server) = serve(vec![(200, "text/event-stream", TWO_CALLS.to_owned())]).await;
    let events =
        collect(&GoogleProvider::new(), &model(&base), &weather_context(), &options()).await;
    let Some(AssistantEvent::Done { reason, message }) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(*reason, StopReason::ToolUse);
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].arguments, json!({"city": "Porto"}));
    assert_ne!(calls[0].id, calls[1].id);
    assert_eq!(message.usage.input, 27);

    let seen = seen(&server);
    assert_eq!(seen.len(), 1);
    let r = &seen[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.target, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
    assert_eq!(r.header("x-goog-api-key"), Some("test-key-123"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(!r.target.contains("key"));
    let body = r.json();
    assert_eq!(body["tools"][0]["functionDeclarations"][0]["name"], "get_weather");
    assert_eq!(body["systemInstruction"], json!({"parts": [{"text": "Be brief."}]}));
    assert_eq!(body["generationConfig"], json!({"maxOutputTokens": 8192}));
}

#[tokio::test]
async fn identical_input_gives_identical_request_bytes() {
    let response = (200, "text/event-stream", TWO_CALLS.to_owned());
    let (base, server) = serve(vec![response.clone(), response]).await;
    let provider = GoogleProvider::new();
    let mut context = weather_context();
    context.messages.push(Message::ToolResult(ToolResultMessage {
        tool_call_id: "x".into(),
        tool_name: "get_weather".into(),
        content: vec![UserContent::text("17C")],
        details: None,
        is_error: false,
        timestamp: 0,
    }));
    for _ in 0..2 {
        collect(&provider, &model(&base), &context, &options()).await;
    }
    let seen = seen(&server);
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body, seen[1].body);
}

#[tokio::test]
async fn vertex_url_and_bearer_token() {
    let (base, server) = serve(vec![(200, "text/event-stream", TWO_CALLS.to_owned())]).await;
    let root = base.trim_end_matches("/v1beta").to_owned();
    let mut m = model(&root);
    m.api = "google-vertex".into();
    let mut o = options();
    o.provider_options.insert("project".into(), json!("demo-project"));
    o.provider_options.insert("location".into(), json!("europe-west4"));
    let events = collect(
        &GoogleProvider::builder().wire(llm_google::Gemini::Vertex).build(),
        &m,
        &weather_context(),
        &o,
    )
    .await;
    assert!(matches!(events.last(), Some(AssistantEvent::Done { .. })));
    let seen = seen(&server);
    assert_eq!(
        seen[0].target,
        "/v1/projects/demo-project/locations/europe-west4/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(seen[0].header("authorization"), Some("Bearer test-key-123"));
    assert_eq!(seen[0].header("x-goog-api-key"), None);
}

#[tokio::test]
async fn http_400_invalid_key_is_auth_and_not_retried() {
    let body = "{\n  \"error\": {\n    \"code\": 400,\n    \"message\": \"API key not valid. Please pass a valid API key.\",\n    \"status\": \"INVALID_ARGUMENT\",\n    \"details\": [{\"@type\": \"type.googleapis.com/google.rpc.ErrorInfo\", \"reason\": \"API_KEY_INVALID\"}]\n  }\n}\n";
    let (base, server) = serve(vec![(400, "application/json", body.to_owned())]).await;
    let events =
        collect(&GoogleProvider::new(), &model(&base), &weather_context(), &options()).await;
    assert_eq!(events.len(), 1, "no start before an HTTP error: {events:?}");
    let Some(AssistantEvent::Error { error, message, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Auth);
    assert_eq!(error.status, Some(400));
    assert_eq!(error.provider, PROVIDER);
    assert_eq!(message.error_body.as_deref(), Some(body));
    assert!(!format!("{error:?}{error}").contains("test-key-123"));
    assert_eq!(seen(&server).len(), 1);
}

#[tokio::test]
async fn http_503_then_success_is_retried() {
    let overloaded = "{\"error\": {\"code\": 503, \"message\": \"The model is overloaded.\", \"status\": \"UNAVAILABLE\"}}";
    let (base, server) = serve(vec![
        (503, "application/json", overloaded.to_owned()),
        (200, "text/event-stream", TWO_CALLS.to_owned()),
    ])
    .await;
    let o = options();
    let events = collect(&GoogleProvider::new(), &model(&base), &weather_context(), &o).await;
    assert!(matches!(events.last(), Some(AssistantEvent::Done { .. })), "{events:?}");
    assert_eq!(seen(&server).len(), 2);
}

#[tokio::test]
async fn error_mid_stream_keeps_text_and_is_not_retried() {
    let body = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Lisbon is\"}],\"role\": \"model\"},\"index\": 0}],\"responseId\": \"r\"}\r\n\r\ndata: {\"error\": {\"code\": 503,\"message\": \"This model is currently experiencing high demand.\",\"status\": \"UNAVAILABLE\"}}\r\n\r\n";
    let (base, server) = serve(vec![(200, "text/event-stream", body.to_owned())]).await;
    let events =
        collect(&GoogleProvider::new(), &model(&base), &weather_context(), &options()).await;
    let Some(AssistantEvent::Error { error, message, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Overloaded);
    assert_eq!(message.text(), "Lisbon is");
    assert_eq!(seen(&server).len(), 1);
}

#[tokio::test]
async fn stream_without_finish_reason_is_truncated() {
    let body = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Lisbon is\"}],\"role\": \"model\"}}]}\r\n\r\n";
    let (base, _server) = serve(vec![(200, "text/event-stream", body.to_owned())]).await;
    let events =
        collect(&GoogleProvider::new(), &model(&base), &weather_context(), &options()).await;
    let Some(AssistantEvent::Error { error, message, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Truncated);
    assert_eq!(message.text(), "Lisbon is");
}

#[tokio::test]
async fn missing_key_fails_without_a_request() {
    let (base, server) = serve(vec![]).await;
    let mut o = options();
    o.api_key = None;
    let events = collect(&GoogleProvider::new(), &model(&base), &weather_context(), &o).await;
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Auth);
    assert!(seen(&server).is_empty());
}

#[tokio::test]
async fn connection_refused_is_transport_without_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut o = options();
    o.retry = RetryPolicy::none();
    let events = collect(
        &GoogleProvider::new(),
        &model(&format!("http://{addr}/v1beta")),
        &weather_context(),
        &o,
    )
    .await;
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Transport);
    assert!(!error.message.contains(&addr.to_string()), "{}", error.message);
}

#[test]
fn public_decoder_with_assembler() {
    use llm_core::raw::sse::SseDecoder;
    let mut sse = SseDecoder::new();
    let mut decoder = llm_google::Decoder::new();
    let mut assembler = llm_core::raw::MessageAssembler::new(&model(""), 0);
    let mut events = Vec::new();
    let mut deltas = Vec::new();
    sse.push(TWO_CALLS.as_bytes(), &mut events).unwrap();
    sse.finish(&mut events).unwrap();
    for e in events {
        llm_core::raw::drive::decode_frame(&mut decoder, e, &mut deltas);
    }
    llm_core::raw::drive::decode_end(&mut decoder, &mut deltas);
    for d in deltas {
        assembler.push(d);
    }
    assert_eq!(assembler.partial().tool_calls().count(), 2);
    assert!(assembler.is_finished());
}

/// One tool round trip against the real API; skipped without `GEMINI_API_KEY`.
#[tokio::test]
async fn live_smoke_tool_round_trip() {
    let Ok(key) = std::env::var("GEMINI_API_KEY") else {
        println!("skipped: GEMINI_API_KEY not set");
        return;
    };
    let model = Model {
        id: std::env::var("GEMINI_MODEL").unwrap_or_else(|_| "gemini-2.5-flash".into()),
        api: "google-generative-ai".into(),
        provider: "google".into(),
        max_tokens: 1024,
        reasoning: true,
        ..Model::default()
    };
    let mut options = StreamOptions { api_key: Some(ApiKey::new(key)), ..StreamOptions::default() };
    options.timeouts.total = Some(Duration::from_secs(120));
    let provider = GoogleProvider::new();
    let mut context = weather_context();
    context.messages = vec![Message::user("What is the weather in Lisbon? Use the tool.")];
    let first = provider.complete(&model, &context, &options).await;
    assert_eq!(first.stop_reason, StopReason::ToolUse, "{first:?}");
    let call = first.tool_calls().next().expect("a tool call").clone();
    assert_eq!(call.name, "get_weather");
    context.messages.push(Message::Assistant(Box::new(first.clone())));
    context.messages.push(Message::ToolResult(ToolResultMessage {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        content: vec![UserContent::text("17C and sunny")],
        details: None,
        is_error: false,
        timestamp: 0,
    }));
    let second = provider.complete(&model, &context, &options).await;
    assert_eq!(second.stop_reason, StopReason::Stop, "{second:?}");
    assert!(
        second.content.iter().any(|c| matches!(c, AssistantContent::Text(t) if !t.text.is_empty()))
    );
}

/// A `RetryInfo.retryDelay` too large for a `Duration` ends the stream with a typed
/// rate-limit error that keeps the (saturated) wait, without sleeping: it is over the cap.
#[tokio::test]
async fn an_absurd_retry_delay_in_the_body_is_a_typed_error_not_a_panic() {
    let body = r#"{"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED",
          "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1e30s"}]}}"#;
    let (base, server) = serve(vec![(429, "application/json", body.to_owned())]).await;
    let sleeper = Arc::new(RecordingSleeper::new());
    let options = StreamOptions { sleeper: Some(sleeper.clone()), ..options() };
    let events = collect(&GoogleProvider::new(), &model(&base), &weather_context(), &options).await;
    let Some(AssistantEvent::Error { error, .. }) = events.last() else {
        panic!("no error event: {events:?}")
    };
    assert_eq!(error.kind, ErrorKind::RateLimited);
    assert_eq!(error.retry_after, Some(Duration::MAX));
    assert_eq!(seen(&server).len(), 1);
    assert!(sleeper.delays().is_empty(), "{:?}", sleeper.delays());
}
