//! Integration tests through the public API: a loopback HTTP server, the decoder
//! driven by raw bytes, and a live smoke test when `OPENAI_API_KEY` is set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]
#![allow(clippy::disallowed_methods, reason = "tests read their own process environment")]

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use llm_core::raw::drive::WireDecoder;
use llm_core::raw::sse::SseDecoder;
use llm_core::{
    ApiKey, AssistantContent, AssistantEvent, CancellationToken, Context, ErrorKind, InputModality,
    Message, Model, Provider, RecordingSleeper, RetryPolicy, StopReason, StreamOptions, Tool,
    ToolResultMessage, UserContent, raw::MessageAssembler,
};
use llm_openai_completions::{
    API, Decoder, OpenAiCompletionsCompat, OpenAiCompletionsProvider, PROVIDER,
};
use llm_testkit::fixture::{self as testkit, Responses};
use llm_testkit::server::{Chunking, Server, ServerOptions};
use serde_json::{Value, json};

/// One canned HTTP response.
#[derive(Clone)]
struct Canned {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
}

impl Canned {
    fn sse(body: &str) -> Self {
        Canned {
            status: 200,
            headers: vec![("content-type", "text/event-stream".into())],
            body: body.into(),
        }
    }

    fn json(status: u16, body: Value) -> Self {
        Canned {
            status,
            headers: vec![("content-type", "application/json".into())],
            body: body.to_string(),
        }
    }
}

/// Answers request *i* with `responses[i]` (the last one repeats).
async fn serve(responses: Vec<Canned>) -> (String, Server) {
    serve_with(responses, ServerOptions::default()).await
}

/// [`serve`] with `options` (the last reply always repeats).
async fn serve_with(responses: Vec<Canned>, options: ServerOptions) -> (String, Server) {
    let canned =
        responses.into_iter().map(|c| testkit::Canned::new(c.status, c.headers, c.body)).collect();
    let options = ServerOptions { repeat_last: true, ..options };
    let server =
        Server::start_with(Responses::Sequence(canned), Chunking::Events, options).await.unwrap();
    (format!("http://{}/v1", server.addr), server)
}

fn model(base_url: &str) -> Model {
    Model {
        id: "gpt-4o-mini".into(),
        name: "GPT-4o mini".into(),
        api: API.into(),
        provider: "openai".into(),
        base_url: base_url.into(),
        reasoning: false,
        input: vec![InputModality::Text, InputModality::Image],
        cost: llm_core::ModelCost { input: 0.15, output: 0.6, cache_read: 0.075, cache_write: 0.0 },
        context_window: 128_000,
        max_tokens: 16_384,
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

fn options() -> StreamOptions {
    StreamOptions {
        api_key: Some(ApiKey::new("test-key")),
        sleeper: Some(Arc::new(RecordingSleeper::new())),
        ..StreamOptions::default()
    }
}

fn sse(chunks: &[Value]) -> String {
    let mut s = String::new();
    for c in chunks {
        s.push_str("data: ");
        s.push_str(&c.to_string());
        s.push_str("\n\n");
    }
    s.push_str("data: [DONE]\n\n");
    s
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-T1", "object": "chat.completion.chunk", "created": 1_760_000_000u64,
           "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_x", "obfuscation": "ab",
           "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}], "usage": null})
}

fn tool_call_body() -> String {
    sse(&[
        chunk(json!({"role": "assistant", "content": null}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_T1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}),
            None,
        ),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"ci"}}]}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "ty\": \"Oslo\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        json!({"id": "chatcmpl-T1", "object": "chat.completion.chunk", "choices": [],
               "usage": {"prompt_tokens": 120, "completion_tokens": 20, "total_tokens": 140,
                         "prompt_tokens_details": {"cached_tokens": 100}}}),
    ])
}

async fn collect(stream: llm_core::AssistantStream) -> Vec<AssistantEvent> {
    stream.collect().await
}

fn terminal(events: &[AssistantEvent]) -> (StopReason, llm_core::AssistantMessage) {
    match events.last().unwrap() {
        AssistantEvent::Done { reason, message } => (*reason, *message.clone()),
        AssistantEvent::Error { reason, message, .. } => (*reason, *message.clone()),
        other => panic!("not terminal: {other:?}"),
    }
}

#[test]
fn public_surface() {
    assert_eq!(API, "openai-completions");
    assert_eq!(PROVIDER, "openai");
    assert_eq!(OpenAiCompletionsProvider::default().api(), API);
    let compat: OpenAiCompletionsCompat =
        serde_json::from_value(json!({"supportsStrictMode": false})).unwrap();
    assert_eq!(compat.supports_strict_mode, Some(false));
}

#[tokio::test]
async fn tool_call_round_trip_over_http() {
    let (url, received) = serve(vec![Canned::sse(&tool_call_body())]).await;
    let provider = OpenAiCompletionsProvider::new();
    let m = model(&url);
    let context = Context {
        system_prompt: Some("You are terse.".into()),
        messages: vec![Message::user("Weather in Oslo?")],
        tools: vec![weather_tool()],
    };
    let events = collect(provider.stream(&m, &context, &options())).await;
    let (reason, message) = terminal(&events);
    assert_eq!(reason, StopReason::ToolUse);
    assert!(matches!(events[0], AssistantEvent::Start));
    let call = message.tool_calls().next().unwrap();
    assert_eq!((call.id.as_str(), call.name.as_str()), ("call_T1", "get_weather"));
    assert_eq!(call.arguments, json!({"city": "Oslo"}));
    assert_eq!(message.usage.input, 20);
    assert_eq!(message.usage.cache_read, 100);
    assert_eq!(message.response_id.as_deref(), Some("chatcmpl-T1"));
    assert_eq!(message.response_model.as_deref(), Some("gpt-4o-mini-2024-07-18"));
    assert!(message.usage.cost.total > 0.0);

    let requests = received.recorded();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/v1/chat/completions"));
    assert_eq!(r.header("authorization"), Some("Bearer test-key"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json()["model"], json!("gpt-4o-mini"));
    assert_eq!(r.json()["stream"], json!(true));
    assert_eq!(r.json()["tools"][0]["function"]["name"], json!("get_weather"));
    assert_eq!(r.json()["messages"][0], json!({"role": "system", "content": "You are terse."}));

    // Second turn: the call and its result go back in Chat Completions' shape.
    let mut messages = context.messages.clone();
    messages.push(Message::Assistant(Box::new(message)));
    messages.push(Message::ToolResult(ToolResultMessage {
        tool_call_id: "call_T1".into(),
        tool_name: "get_weather".into(),
        content: vec![UserContent::text("17°C")],
        details: None,
        is_error: false,
        timestamp: 0,
    }));
    let (url2, received2) = serve(vec![Canned::sse(&sse(&[
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "It is 17°C."}), None),
        chunk(json!({}), Some("stop")),
    ]))])
    .await;
    let events =
        collect(provider.stream(&model(&url2), &Context { messages, ..context }, &options())).await;
    let (reason, message) = terminal(&events);
    assert_eq!(reason, StopReason::Stop);
    assert_eq!(message.text(), "It is 17°C.");
    let body = received2.recorded()[0].json();
    assert_eq!(
        body["messages"][2],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_T1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]})
    );
    assert_eq!(
        body["messages"][3],
        json!({"role": "tool", "tool_call_id": "call_T1", "content": "17°C"})
    );
}

#[tokio::test]
async fn auth_error_is_not_retried() {
    let (url, received) = serve(vec![Canned::json(
        401,
        json!({"error": {"message": "Incorrect API key provided: test-key.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}),
    )])
    .await;
    let events = collect(OpenAiCompletionsProvider::new().stream(
        &model(&url),
        &Context::default(),
        &options(),
    ))
    .await;
    assert_eq!(events.len(), 1, "no start event before an HTTP error");
    let AssistantEvent::Error { error, message, .. } = &events[0] else { panic!() };
    assert_eq!(error.kind, ErrorKind::Auth);
    assert_eq!(error.status, Some(401));
    assert_eq!(message.error_type.as_deref(), Some("auth"));
    assert_eq!(received.recorded().len(), 1);
}

#[tokio::test]
async fn rate_limit_is_retried_with_retry_after() {
    let rate_limited = Canned {
        headers: vec![("content-type", "application/json".into()), ("retry-after", "2".into())],
        ..Canned::json(
            429,
            json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}),
        )
    };
    let (url, received) = serve(vec![rate_limited, Canned::sse(&tool_call_body())]).await;
    let sleeper = Arc::new(RecordingSleeper::new());
    let mut o = options();
    o.sleeper = Some(sleeper.clone());
    o.retry = RetryPolicy { jitter: false, ..RetryPolicy::default() };
    let events =
        collect(OpenAiCompletionsProvider::new().stream(&model(&url), &Context::default(), &o))
            .await;
    assert_eq!(terminal(&events).0, StopReason::ToolUse);
    assert_eq!(received.recorded().len(), 2);
    assert_eq!(sleeper.delays(), vec![Duration::from_secs(2)]);
    // The retry is invisible: exactly one start.
    assert_eq!(events.iter().filter(|e| matches!(e, AssistantEvent::Start)).count(), 1);
}

#[tokio::test]
async fn error_payload_after_text_keeps_text_and_is_not_retried() {
    let body = format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(json!({"content": "Partial"}), None),
        json!({"error": {"message": "The server had an error processing your request.", "type": "server_error", "param": null, "code": null}})
    );
    let (url, received) = serve(vec![Canned::sse(&body)]).await;
    let events = collect(OpenAiCompletionsProvider::new().stream(
        &model(&url),
        &Context::default(),
        &options(),
    ))
    .await;
    let (reason, message) = terminal(&events);
    assert_eq!(reason, StopReason::Error);
    assert_eq!(message.text(), "Partial");
    assert_eq!(
        message.error_message.as_deref(),
        Some("The server had an error processing your request.")
    );
    assert_eq!(received.recorded().len(), 1);
}

#[tokio::test]
async fn error_payload_before_content_is_retried() {
    let failing = format!(
        "data: {}\n\n",
        json!({"error": {"message": "Overloaded", "type": "server_error"}})
    );
    let (url, received) = serve(vec![Canned::sse(&failing), Canned::sse(&tool_call_body())]).await;
    let events = collect(OpenAiCompletionsProvider::new().stream(
        &model(&url),
        &Context::default(),
        &options(),
    ))
    .await;
    assert_eq!(terminal(&events).0, StopReason::ToolUse);
    assert_eq!(received.recorded().len(), 2);
}

#[tokio::test]
async fn cut_stream_is_an_error_with_partial_text() {
    let body = format!(
        "data: {}\n\ndata: {}\n\n",
        chunk(json!({"role": "assistant"}), None),
        chunk(json!({"content": "Hal"}), None)
    );
    let (url, _server) = serve(vec![Canned::sse(&body)]).await;
    let events = collect(OpenAiCompletionsProvider::new().stream(
        &model(&url),
        &Context::default(),
        &options(),
    ))
    .await;
    let (reason, message) = terminal(&events);
    assert_eq!(reason, StopReason::Error);
    assert_eq!(message.text(), "Hal");
    assert_eq!(message.error_message.as_deref(), Some("Stream ended without finish_reason"));
    assert_eq!(message.error_type.as_deref(), Some("truncated"));
}

#[tokio::test]
async fn abort_mid_stream_keeps_partial_content() {
    let body = tool_call_body();
    let cut = body.find("ty\\\"").unwrap();
    let stall = ServerOptions { stall_after: Some(cut), ..ServerOptions::default() };
    let (url, _server) = serve_with(vec![Canned::sse(&body)], stall).await;
    let cancel = CancellationToken::new();
    let mut o = options();
    o.cancel = cancel.clone();
    let mut stream = OpenAiCompletionsProvider::new().stream(&model(&url), &Context::default(), &o);
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        if matches!(event, AssistantEvent::ToolCallDelta { .. }) {
            cancel.cancel();
        }
        events.push(event);
    }
    let (reason, message) = terminal(&events);
    assert_eq!(reason, StopReason::Aborted);
    assert_eq!(message.tool_calls().count(), 1);
    assert_eq!(events.iter().filter(|e| e.is_terminal()).count(), 1);
}

#[tokio::test]
async fn missing_key_and_bad_tool_choice_fail_without_a_request() {
    let (url, received) = serve(vec![Canned::sse(&tool_call_body())]).await;
    let provider = OpenAiCompletionsProvider::new();
    let mut o = options();
    o.api_key = None;
    let events = collect(provider.stream(&model(&url), &Context::default(), &o)).await;
    let (_, message) = terminal(&events);
    assert_eq!(message.error_message.as_deref(), Some("No API key for provider: openai"));

    let mut o = options();
    o.tool_choice = Some(llm_core::ToolChoice::Tool("str_tool".into()));
    let context = Context {
        messages: vec![Message::user("x")],
        tools: vec![Tool {
            name: "str_tool".into(),
            description: String::new(),
            parameters: json!({"type": "string"}),
        }],
        ..Context::default()
    };
    let events = collect(provider.stream(&model(&url), &context, &o)).await;
    let (_, message) = terminal(&events);
    assert_eq!(
        message.error_message.as_deref(),
        Some(
            "OpenAI Chat Completions tool_choice requested unavailable tool \"str_tool\" after schema conversion"
        )
    );
    assert!(received.recorded().is_empty());
}

#[tokio::test]
async fn secrets_never_appear_in_output() {
    let secret = "sk-SECRET-never-print-1234567890";
    let (url, _server) = serve(vec![Canned::json(
        500,
        json!({"error": {"message": "boom", "type": "server_error"}}),
    )])
    .await;
    let mut o = options();
    o.api_key = Some(ApiKey::new(secret));
    o.retry = RetryPolicy::none();
    let stream = OpenAiCompletionsProvider::new().stream(&model(&url), &Context::default(), &o);
    let debug = format!("{stream:?} {o:?}");
    let events = collect(stream).await;
    let printed =
        format!("{debug} {events:?} {}", llm_core::raw::printer::print_transcript(&events));
    assert!(!printed.contains(secret), "{printed}");
    // An unreachable server: the transport error names neither key nor URL.
    let o2 = StreamOptions { retry: RetryPolicy::none(), ..o };
    let events = collect(OpenAiCompletionsProvider::new().stream(
        &model("http://127.0.0.1:1/v1"),
        &Context::default(),
        &o2,
    ))
    .await;
    let AssistantEvent::Error { error, .. } = events.last().unwrap() else { panic!() };
    assert_eq!(error.kind, ErrorKind::Transport);
    let printed = format!("{error} {error:?}");
    assert!(!printed.contains(secret) && !printed.contains("127.0.0.1:1"), "{printed}");
}

/// Bytes through `SseDecoder` → `Decoder` → `MessageAssembler`, at every chunking.
fn decode(bytes: &[u8], step: usize) -> Vec<AssistantEvent> {
    let mut sse = SseDecoder::new();
    let mut decoder = Decoder::new();
    let mut assembler = MessageAssembler::new(&model(""), 0);
    let mut events = Vec::new();
    let mut deltas = Vec::new();
    for piece in bytes.chunks(step.max(1)) {
        sse.push(piece, &mut events).unwrap();
        for e in events.drain(..) {
            decoder.event(e, &mut deltas);
        }
    }
    sse.finish(&mut events).unwrap();
    for e in events.drain(..) {
        decoder.event(e, &mut deltas);
    }
    decoder.end(&mut deltas);
    for d in deltas {
        assembler.push(d);
    }
    std::iter::from_fn(|| assembler.next_event()).collect()
}

#[test]
fn byte_at_a_time_equals_whole_body() {
    let body = sse(&[
        chunk(json!({"content": "Crème brûlée 🍮 — 東京"}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_u", "type": "function", "function": {"name": "note", "arguments": "{\"t\":\"\\ud83c"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "\\udf6e é\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
    ]);
    let whole = decode(body.as_bytes(), body.len());
    let bytewise = decode(body.as_bytes(), 1);
    assert_eq!(
        llm_core::raw::printer::print_transcript(&whole),
        llm_core::raw::printer::print_transcript(&bytewise)
    );
    let (reason, message) = terminal(&whole);
    assert_eq!(reason, StopReason::ToolUse);
    assert_eq!(message.tool_calls().next().unwrap().arguments, json!({"t": "🍮 é"}));
    assert!(
        matches!(&message.content[0], AssistantContent::Text(t) if t.text == "Crème brûlée 🍮 — 東京")
    );
}

#[test]
fn three_interleaved_calls() {
    let mut chunks = Vec::new();
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        chunks.push(chunk(
            json!({"tool_calls": [{"index": i, "id": format!("call_{name}"), "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        ));
    }
    for part in ["{\"n\":", "1", "}"] {
        for i in 0..3 {
            chunks.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": part}}]}),
                None,
            ));
        }
    }
    chunks.push(chunk(json!({}), Some("tool_calls")));
    let body = sse(&chunks);
    let (reason, message) = terminal(&decode(body.as_bytes(), 7));
    assert_eq!(reason, StopReason::ToolUse);
    let calls: Vec<_> =
        message.tool_calls().map(|c| (c.name.clone(), c.arguments.clone())).collect();
    assert_eq!(
        calls,
        vec![
            ("a".to_owned(), json!({"n": 1})),
            ("b".to_owned(), json!({"n": 1})),
            ("c".to_owned(), json!({"n": 1}))
        ]
    );
}

/// One live tool round trip; skipped without `OPENAI_API_KEY`.
#[tokio::test]
async fn live_smoke_tool_round_trip() {
    let Ok(key) = std::env::var("OPENAI_API_KEY") else {
        println!("skipped: OPENAI_API_KEY not set");
        return;
    };
    let provider = OpenAiCompletionsProvider::new();
    let m = model("https://api.openai.com/v1");
    let mut o = StreamOptions { api_key: Some(ApiKey::new(key)), ..StreamOptions::default() };
    o.tool_choice = Some(llm_core::ToolChoice::Required);
    let mut context = Context {
        system_prompt: Some("Use the tool to answer.".into()),
        messages: vec![Message::user("What is the weather in Oslo?")],
        tools: vec![weather_tool()],
    };
    let first = provider.complete(&m, &context, &o).await;
    assert_eq!(first.stop_reason, StopReason::ToolUse, "{:?}", first.error_message);
    let call = first.tool_calls().next().unwrap().clone();
    assert_eq!(call.name, "get_weather");
    context.messages.push(Message::Assistant(Box::new(first)));
    context.messages.push(Message::ToolResult(ToolResultMessage {
        tool_call_id: call.id,
        tool_name: call.name,
        content: vec![UserContent::text("12°C and clear")],
        details: None,
        is_error: false,
        timestamp: 0,
    }));
    o.tool_choice = None;
    let second = provider.complete(&m, &context, &o).await;
    assert_eq!(second.stop_reason, StopReason::Stop, "{:?}", second.error_message);
    assert!(second.text().contains("12"), "{}", second.text());
}

/// The structured-output format of these tests.
fn city_format() -> llm_core::OutputFormat {
    llm_core::OutputFormat::new(
        "city",
        json!({"type": "object", "properties": {"name": {"type": "string"}, "population": {"type": "integer"}}, "required": ["name"]}),
    )
}

fn with_format(model_options: StreamOptions) -> StreamOptions {
    StreamOptions { output: Some(city_format()), ..model_options }
}

async fn structured(
    responses: Vec<Canned>,
    model_id: &str,
    context: &Context,
) -> (Vec<Value>, llm_core::StructuredOutcome, Server) {
    use llm_core::output::{StructuredEvent, StructuredStream};
    let (base, server) = serve(responses).await;
    let model = Model { id: model_id.into(), ..model(&base) };
    let stream = OpenAiCompletionsProvider::new().stream(&model, context, &with_format(options()));
    let mut answer = StructuredStream::new(stream, city_format());
    let mut partials = Vec::new();
    let mut outcome = None;
    while let Some(event) = answer.next().await {
        match event {
            StructuredEvent::Partial { .. } => partials.push(answer.partial().clone()),
            StructuredEvent::Done { outcome: o, .. } => outcome = Some(o),
        }
    }
    (partials, outcome.unwrap(), server)
}

#[tokio::test]
async fn a_structured_answer_streams_in_small_fragments_and_ends_valid() {
    let pieces =
        ["{\"na", "me\":\"Po", "rto\",\"popu", "lation\":23", "1800,\"population_note\":null}"];
    let mut chunks: Vec<Value> =
        pieces.iter().map(|p| chunk(json!({"content": p}), None)).collect();
    chunks.push(chunk(json!({}), Some("stop")));
    let context = Context { messages: vec![Message::user("Describe Porto")], ..Context::default() };
    let (partials, outcome, server) =
        structured(vec![Canned::sse(&sse(&chunks))], "gpt-4o-mini", &context).await;
    let sent = server.recorded()[0].json();
    assert_eq!(sent["response_format"]["type"], json!("json_schema"));
    assert_eq!(sent["response_format"]["json_schema"]["strict"], json!(true));
    assert_eq!(partials.first(), Some(&json!({"name": "Po"})));
    assert!(partials.contains(&json!({"name": "Porto", "population": 23})), "{partials:?}");
    // An extra property is allowed by the schema: the answer is valid as sent.
    assert_eq!(
        outcome,
        llm_core::StructuredOutcome::Valid(
            json!({"name": "Porto", "population": 231_800, "population_note": null})
        )
    );
}

#[tokio::test]
async fn a_refusal_a_cut_off_answer_and_an_unsupported_model() {
    let context = Context { messages: vec![Message::user("Describe Porto")], ..Context::default() };
    let refusal = sse(&[
        chunk(
            json!({"role": "assistant", "content": null, "refusal": "I can't help with that."}),
            None,
        ),
        chunk(json!({}), Some("stop")),
    ]);
    let (_, outcome, _server) =
        structured(vec![Canned::sse(&refusal)], "gpt-4o-mini", &context).await;
    let llm_core::StructuredOutcome::Refused(error) = outcome else { panic!("{outcome:?}") };
    assert_eq!(error.message, "OpenAI refusal: I can't help with that.");

    let cut = sse(&[
        chunk(json!({"content": "{\"name\":\"Por"}), None),
        chunk(json!({}), Some("length")),
    ]);
    let (_, outcome, _server) = structured(vec![Canned::sse(&cut)], "gpt-4o-mini", &context).await;
    assert_eq!(outcome, llm_core::StructuredOutcome::CutOff(json!({"name": "Por"})));

    let (_, outcome, server) = structured(vec![Canned::sse(&cut)], "gpt-3.5-turbo", &context).await;
    let llm_core::StructuredOutcome::Failed(error) = outcome else { panic!("{outcome:?}") };
    assert_eq!(error.kind, ErrorKind::Unsupported);
    assert!(server.recorded().is_empty(), "nothing may be sent");
}

#[tokio::test]
async fn a_structured_answer_after_a_tool_turn() {
    let context = Context {
        messages: vec![
            Message::user("How big is Porto?"),
            Message::Assistant(Box::new(llm_core::AssistantMessage {
                content: vec![llm_core::AssistantContent::ToolCall(llm_core::ToolCall {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    arguments: json!({"city": "Porto"}),
                    thought_signature: None,
                    arguments_incomplete: false,
                })],
                api: API.into(),
                provider: "openai".into(),
                model: "gpt-4o-mini".into(),
                stop_reason: StopReason::ToolUse,
                ..llm_core::AssistantMessage::default()
            })),
            Message::ToolResult(llm_core::ToolResultMessage {
                tool_call_id: "call_1".into(),
                tool_name: "get_weather".into(),
                content: vec![llm_core::UserContent::Text(llm_core::TextContent {
                    text: "Sunny, 231800 people".into(),
                    text_signature: None,
                })],
                is_error: false,
                timestamp: 0,
                details: None,
            }),
        ],
        tools: vec![weather_tool()],
        ..Context::default()
    };
    let body = sse(&[chunk(
        json!({"content": "{\"name\":\"Porto\",\"population\":231800}"}),
        Some("stop"),
    )]);
    let (_, outcome, server) = structured(vec![Canned::sse(&body)], "gpt-4o-mini", &context).await;
    assert_eq!(
        outcome,
        llm_core::StructuredOutcome::Valid(json!({"name": "Porto", "population": 231_800}))
    );
    let sent = server.recorded()[0].json();
    assert_eq!(sent["messages"].as_array().unwrap().len(), 3);
    assert_eq!(sent["tools"][0]["function"]["name"], json!("get_weather"));
    assert_eq!(sent["response_format"]["json_schema"]["name"], json!("city"));
}
