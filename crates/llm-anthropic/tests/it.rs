//! Integration tests through the public API: a loopback HTTP server, the public decoder, and a
//! live smoke test that runs only when `ANTHROPIC_API_KEY` is set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]
#![allow(clippy::disallowed_methods, reason = "tests read their own process environment")]

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use llm_anthropic::{API, AnthropicProvider, Decoder, PROVIDER};
use llm_core::raw::sse::SseDecoder;
use llm_core::{
    ApiKey, AssistantContent, AssistantEvent, AssistantMessage, Context, ErrorKind, Message, Model,
    ModelCost, Provider, RecordingSleeper, RetryPolicy, StopReason, StreamOptions, Tool,
    ToolChoice, ToolResultMessage, UserContent, raw::MessageAssembler,
};
use llm_testkit::fixture::{Canned, Responses};
use llm_testkit::server::{Chunking, Server};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    head: String,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }
}

/// A canned HTTP response.
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
}

fn sse_reply(body: &str) -> Reply {
    Reply {
        status: 200,
        headers: vec![("content-type", "text/event-stream".into())],
        body: body.into(),
    }
}

fn json_reply(status: u16, body: &str) -> Reply {
    Reply { status, headers: vec![("content-type", "application/json".into())], body: body.into() }
}

/// Serves `replies` in order from the llm-testkit loopback server, which records
/// the requests (dropping the server stops it).
async fn serve(replies: Vec<Reply>) -> (String, Server) {
    let canned = replies
        .into_iter()
        .map(|r| Canned {
            status: r.status,
            headers: r.headers.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            body: r.body.into(),
        })
        .collect();
    let server = Server::start(Responses::Sequence(canned), Chunking::Events).await.unwrap();
    (format!("http://{}", server.addr), server)
}

/// The requests `server` received: request line and header lines, and the JSON body.
fn seen(server: &Server) -> Vec<Seen> {
    server
        .recorded()
        .into_iter()
        .map(|r| Seen {
            head: std::iter::once(format!("{} {} HTTP/1.1\r\n", r.method, r.path))
                .chain(r.headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")))
                .collect(),
            body: serde_json::from_slice(&r.body).unwrap_or(Value::Null),
        })
        .collect()
}

fn model(base_url: &str) -> Model {
    Model {
        id: "claude-sonnet-4-5".into(),
        api: API.into(),
        provider: "anthropic".into(),
        base_url: base_url.into(),
        cost: ModelCost { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75 },
        max_tokens: 1024,
        ..Model::default()
    }
}

fn options(sleeper: &Arc<RecordingSleeper>) -> StreamOptions {
    StreamOptions {
        api_key: Some(ApiKey::new("test-key")),
        retry: RetryPolicy { jitter: false, ..RetryPolicy::default() },
        sleeper: Some(sleeper.clone()),
        ..StreamOptions::default()
    }
}

fn weather_tool() -> Tool {
    Tool {
        name: "get_weather".into(),
        description: "Current weather for a city".into(),
        parameters: json!({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}),
    }
}

fn sse(events: &[&str]) -> String {
    events
        .iter()
        .map(|data| {
            let v: Value = serde_json::from_str(data).unwrap();
            format!("event: {}\ndata: {data}\n\n", v["type"].as_str().unwrap())
        })
        .collect()
}

const START: &str = r#"{"type":"message_start","message":{"model":"claude-sonnet-4-5-20250929","id":"msg_01ExampleAAAAAAAAAAAAAAAA","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":18,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}"#;

fn tool_stream() -> String {
    sse(&[
        START,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Checking."}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01ExampleBBBBBBBBBBBBBBB","name":"get_weather","input":{}}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Lis"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"bon\"}"}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":58}}"#,
        r#"{"type":"message_stop"}"#,
    ])
}

async fn collect(
    provider: &AnthropicProvider,
    model: &Model,
    ctx: &Context,
    opts: &StreamOptions,
) -> Vec<AssistantEvent> {
    provider.stream(model, ctx, opts).collect().await
}

fn final_message(events: &[AssistantEvent]) -> &AssistantMessage {
    match events.last().unwrap() {
        AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. } => message,
        other => panic!("not terminal: {other:?}"),
    }
}

#[tokio::test]
async fn end_to_end_tool_call_over_loopback() {
    let (url, server) = serve(vec![sse_reply(&tool_stream())]).await;
    let sleeper = Arc::new(RecordingSleeper::new());
    let ctx = Context {
        system_prompt: Some("You are terse.".into()),
        messages: vec![Message::user("Weather in Lisbon?")],
        tools: vec![weather_tool()],
    };
    let events = collect(&AnthropicProvider::new(), &model(&url), &ctx, &options(&sleeper)).await;
    assert!(matches!(events.first(), Some(AssistantEvent::Start)));
    let m = final_message(&events);
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    assert_eq!(m.text(), "Checking.");
    let call = m.tool_calls().next().unwrap();
    assert_eq!(call.arguments, json!({"city": "Lisbon"}));
    assert_eq!((m.usage.input, m.usage.output), (18, 58));
    assert_eq!(m.api, API);

    let seen = seen(&server);
    assert_eq!(seen.len(), 1);
    let req = &seen[0];
    assert!(req.head.starts_with("POST /v1/messages "), "{}", req.head);
    assert_eq!(req.header("x-api-key").as_deref(), Some("test-key"));
    assert_eq!(req.header("anthropic-version").as_deref(), Some("2023-06-01"));
    assert_eq!(req.header("content-type").as_deref(), Some("application/json"));
    assert_eq!(req.body["stream"], json!(true));
    assert_eq!(req.body["tools"][0]["name"], "get_weather");
    assert_eq!(req.body["tools"][0]["cache_control"], json!({"type":"ephemeral"}));
    assert!(sleeper.delays().is_empty());
}

#[tokio::test]
async fn retries_429_with_retry_after_then_succeeds() {
    let mut limited = json_reply(
        429,
        r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"},"request_id":"req_011Example"}"#,
    );
    limited.headers.push(("retry-after", "2".into()));
    let (url, server) = serve(vec![limited, sse_reply(&tool_stream())]).await;
    let sleeper = Arc::new(RecordingSleeper::new());
    let ctx = Context {
        messages: vec![Message::user("x")],
        tools: vec![weather_tool()],
        ..Context::default()
    };
    let events = collect(&AnthropicProvider::new(), &model(&url), &ctx, &options(&sleeper)).await;
    assert_eq!(final_message(&events).stop_reason, StopReason::ToolUse);
    assert_eq!(events.iter().filter(|e| matches!(e, AssistantEvent::Start)).count(), 1);
    assert_eq!(sleeper.delays(), vec![Duration::from_secs(2)]);
    let seen = seen(&server);
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body, seen[1].body, "a retry sends the same body");
}

#[tokio::test]
async fn auth_error_is_not_retried_and_keeps_the_body() {
    let body = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_011Auth"}"#;
    let (url, server) = serve(vec![json_reply(401, body)]).await;
    let sleeper = Arc::new(RecordingSleeper::new());
    let ctx = Context { messages: vec![Message::user("x")], ..Context::default() };
    let events = collect(&AnthropicProvider::new(), &model(&url), &ctx, &options(&sleeper)).await;
    assert_eq!(events.len(), 1, "no start before an HTTP error: {events:?}");
    let AssistantEvent::Error { error, message, .. } = &events[0] else { panic!() };
    assert_eq!(error.kind, ErrorKind::Auth);
    assert_eq!(error.status, Some(401));
    assert_eq!(error.provider, PROVIDER);
    assert_eq!(error.body.as_deref(), Some(body));
    assert_eq!(message.error_type.as_deref(), Some("auth"));
    assert!(!format!("{error} {error:?} {message:?}").contains("test-key"));
    assert_eq!(seen(&server).len(), 1);
}

#[tokio::test]
async fn overloaded_error_event_before_content_is_retried() {
    let overloaded = sse(&[
        r#"{"type":"error","error":{"details":null,"type":"overloaded_error","message":"Overloaded"}}"#,
    ]);
    let (url, server) = serve(vec![sse_reply(&overloaded), sse_reply(&tool_stream())]).await;
    let sleeper = Arc::new(RecordingSleeper::new());
    let ctx = Context {
        messages: vec![Message::user("x")],
        tools: vec![weather_tool()],
        ..Context::default()
    };
    let events = collect(&AnthropicProvider::new(), &model(&url), &ctx, &options(&sleeper)).await;
    assert_eq!(final_message(&events).stop_reason, StopReason::ToolUse);
    assert_eq!(seen(&server).len(), 2);
    assert_eq!(sleeper.delays(), vec![Duration::from_millis(500)]);
}

#[tokio::test]
async fn overloaded_error_after_text_is_not_retried() {
    let body = sse(&[
        START,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Partial ans"}}"#,
        r#"{"type":"error","error":{"details":null,"type":"overloaded_error","message":"Overloaded"}}"#,
    ]);
    let (url, server) = serve(vec![sse_reply(&body), sse_reply(&tool_stream())]).await;
    let sleeper = Arc::new(RecordingSleeper::new());
    let ctx = Context { messages: vec![Message::user("x")], ..Context::default() };
    let events = collect(&AnthropicProvider::new(), &model(&url), &ctx, &options(&sleeper)).await;
    let AssistantEvent::Error { error, message, .. } = events.last().unwrap() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Overloaded);
    assert_eq!(message.text(), "Partial ans");
    assert_eq!(seen(&server).len(), 1);
}

#[tokio::test]
async fn collision_fails_before_any_request() {
    let (url, server) = serve(vec![sse_reply(&tool_stream())]).await;
    let sleeper = Arc::new(RecordingSleeper::new());
    let mut opts = options(&sleeper);
    opts.api_key = Some(ApiKey::new("sk-ant-oat01-not-a-real-token"));
    let mut read = weather_tool();
    read.name = "read".into();
    let mut read2 = weather_tool();
    read2.name = "READ".into();
    let ctx = Context {
        messages: vec![Message::user("x")],
        tools: vec![read, read2],
        ..Context::default()
    };
    let events = collect(&AnthropicProvider::new(), &model(&url), &ctx, &opts).await;
    let AssistantEvent::Error { error, .. } = events.last().unwrap() else { panic!() };
    assert_eq!(error.message, r#"Anthropic tool names "read" and "READ" both map to "Read""#);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(seen(&server).is_empty());
    assert!(!format!("{error:?}").contains("sk-ant-oat01"));
}

#[tokio::test]
async fn oauth_round_trip_maps_names_back() {
    let body = sse(&[
        START,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01R","name":"Read","input":{}}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"README.md\"}"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
        r#"{"type":"message_stop"}"#,
    ]);
    let (url, server) = serve(vec![sse_reply(&body)]).await;
    let sleeper = Arc::new(RecordingSleeper::new());
    let mut opts = options(&sleeper);
    opts.api_key = Some(ApiKey::new("sk-ant-oat01-not-a-real-token"));
    let read = Tool {
        name: "read".into(),
        description: "Read a file".into(),
        parameters: json!({"type":"object","properties":{"path":{"type":"string"}}}),
    };
    let ctx =
        Context { messages: vec![Message::user("x")], tools: vec![read], ..Context::default() };
    let events = collect(&AnthropicProvider::new(), &model(&url), &ctx, &opts).await;
    assert_eq!(final_message(&events).tool_calls().next().unwrap().name, "read");
    let names: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AssistantEvent::ToolCallStart { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(names, ["read"]);
    let seen = seen(&server);
    assert_eq!(seen[0].body["tools"][0]["name"], "Read");
    assert_eq!(
        seen[0].header("authorization").as_deref(),
        Some("Bearer sk-ant-oat01-not-a-real-token")
    );
    assert_eq!(seen[0].header("x-app").as_deref(), Some("cli"));
    assert!(seen[0].header("x-api-key").is_none());
}

#[tokio::test]
async fn cancellation_ends_with_one_aborted_event() {
    let body = sse(&[
        START,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#,
    ]);
    // The server never finishes: it writes a partial stream and keeps the socket open.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 65536];
        let _ = socket.read(&mut buf).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let chunk = format!("{:x}\r\n{body}\r\n", body.len());
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(chunk.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    let sleeper = Arc::new(RecordingSleeper::new());
    let opts = options(&sleeper);
    let ctx = Context { messages: vec![Message::user("x")], ..Context::default() };
    let mut stream =
        AnthropicProvider::new().stream(&model(&format!("http://{addr}")), &ctx, &opts);
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        let is_delta = matches!(e, AssistantEvent::TextDelta { .. });
        events.push(e);
        if is_delta {
            opts.cancel.cancel();
        }
    }
    let AssistantEvent::Error { reason, message, .. } = events.last().unwrap() else { panic!() };
    assert_eq!(*reason, StopReason::Aborted);
    assert_eq!(message.text(), "Hello");
    assert_eq!(events.iter().filter(|e| e.is_terminal()).count(), 1);
}

#[test]
fn public_decoder_bytes_to_message() {
    let body = tool_stream();
    let mut sse = SseDecoder::new();
    let mut decoder = Decoder::new();
    let mut assembler = MessageAssembler::new(&model("http://unused"), 0);
    let mut events = Vec::new();
    let mut deltas = Vec::new();
    for byte in body.as_bytes().chunks(1) {
        sse.push(byte, &mut events).unwrap();
        for e in events.drain(..) {
            llm_core::raw::drive::decode_frame(&mut decoder, e, &mut deltas);
        }
    }
    sse.finish(&mut events).unwrap();
    for e in events.drain(..) {
        llm_core::raw::drive::decode_frame(&mut decoder, e, &mut deltas);
    }
    llm_core::raw::drive::decode_end(&mut decoder, &mut deltas);
    for d in deltas {
        assembler.push(d);
    }
    let out: Vec<AssistantEvent> = std::iter::from_fn(|| assembler.next_event()).collect();
    let m = final_message(&out);
    assert_eq!(m.tool_calls().next().unwrap().arguments, json!({"city":"Lisbon"}));
}

/// One real tool round trip; runs only with `ANTHROPIC_API_KEY` (model: `ANTHROPIC_MODEL` or
/// `claude-haiku-4-5`).
#[tokio::test]
async fn live_smoke_tool_round_trip() {
    let Ok(key) = std::env::var("ANTHROPIC_API_KEY") else {
        println!("skipped: ANTHROPIC_API_KEY not set");
        return;
    };
    let model = Model {
        id: std::env::var("ANTHROPIC_MODEL").unwrap_or_else(|_| "claude-haiku-4-5".into()),
        api: API.into(),
        provider: "anthropic".into(),
        max_tokens: 512,
        ..Model::default()
    };
    let provider = AnthropicProvider::new();
    let opts = StreamOptions {
        api_key: Some(ApiKey::new(key)),
        tool_choice: Some(ToolChoice::Tool("get_weather".into())),
        ..StreamOptions::default()
    };
    let mut ctx = Context {
        system_prompt: Some("Use the tools you are given.".into()),
        messages: vec![Message::user("What is the weather in Lisbon right now?")],
        tools: vec![weather_tool()],
    };
    let first = provider.complete(&model, &ctx, &opts).await;
    assert_eq!(first.stop_reason, StopReason::ToolUse, "{:?}", first.error_message);
    let call = first.tool_calls().next().expect("a tool call").clone();
    assert_eq!(call.name, "get_weather");
    assert!(call.arguments.get("city").is_some(), "{}", call.arguments);
    ctx.messages.push(Message::Assistant(Box::new(first)));
    ctx.messages.push(Message::ToolResult(ToolResultMessage {
        tool_call_id: call.id,
        tool_name: call.name,
        content: vec![UserContent::text("17°C, windy")],
        details: None,
        is_error: false,
        timestamp: 0,
    }));
    let opts = StreamOptions { tool_choice: None, ..opts };
    let second = provider.complete(&model, &ctx, &opts).await;
    assert_eq!(second.stop_reason, StopReason::Stop, "{:?}", second.error_message);
    assert!(second.content.iter().any(|c| matches!(c, AssistantContent::Text(_))));
    println!("live: {}", second.text());
}
