//! Integration tests: request conversion, id mapping, error bodies, the decoder
//! through llm-core's SSE decoder and assembler, an end-to-end run against a
//! loopback HTTP server, and a live smoke test (only with `MISTRAL_API_KEY`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "tests"
)]
#![allow(clippy::disallowed_methods, reason = "tests read their own process environment")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use llm_core::raw::drive::WireDecoder;
use llm_core::raw::sse::SseDecoder;
use llm_core::{
    AssistantContent, AssistantEvent, AssistantMessage, Context, ErrorKind, ImageContent, Message,
    Model, ModelCost, Provider, ReasoningLevel, RecordingSleeper, RetryPolicy, StopReason,
    StreamOptions, TextContent, ThinkingContent, Tool, ToolCall, ToolChoice, ToolResultMessage,
    UserContent, UserMessage, UserMessageContent, raw::MessageAssembler,
};
use llm_mistral::{__private as private, API, MistralProvider, PROVIDER};
use llm_testkit::fixture::{Canned, Responses};
use llm_testkit::server::{Chunking, Server};
use proptest::prelude::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn model(id: &str) -> Model {
    Model {
        id: id.into(),
        api: API.into(),
        provider: "mistral".into(),
        base_url: "https://api.mistral.ai".into(),
        input: vec![llm_core::InputModality::Text],
        cost: ModelCost { input: 0.1, output: 0.3, cache_read: 0.01, cache_write: 0.0 },
        context_window: 128_000,
        max_tokens: 4096,
        ..Model::default()
    }
}

fn options() -> StreamOptions {
    StreamOptions { api_key: Some("test-key".into()), ..StreamOptions::default() }
}

fn weather_tool() -> Tool {
    Tool {
        name: "get_weather".into(),
        description: "Current weather for a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}),
    }
}

fn user(text: &str) -> Message {
    Message::user(text)
}

fn assistant_from(
    provider: &str,
    api: &str,
    model_id: &str,
    content: Vec<AssistantContent>,
) -> Message {
    Message::Assistant(Box::new(AssistantMessage {
        content,
        api: api.into(),
        provider: provider.into(),
        model: model_id.into(),
        stop_reason: StopReason::ToolUse,
        ..AssistantMessage::default()
    }))
}

fn call(id: &str, name: &str, args: Value) -> AssistantContent {
    AssistantContent::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args,
        thought_signature: None,
        arguments_incomplete: false,
    })
}

fn result(id: &str, name: &str, text: &str, is_error: bool) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: name.into(),
        content: if text.is_empty() { vec![] } else { vec![UserContent::text(text)] },
        details: None,
        is_error,
        timestamp: 0,
    })
}

fn body(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    serde_json::from_slice(&private::build_request(model, context, options).unwrap().body).unwrap()
}

fn messages(model: &Model, context: &Context) -> Vec<Value> {
    body(model, context, &options())["messages"].as_array().unwrap().clone()
}

/// Bytes -> SseDecoder -> Mistral decoder -> assembler -> events.
fn decode(bytes: &[u8], model: &Model) -> Vec<AssistantEvent> {
    let mut sse = SseDecoder::new();
    let mut events = Vec::new();
    sse.push(bytes, &mut events).unwrap();
    sse.finish(&mut events).unwrap();
    let mut decoder = private::decoder();
    let mut deltas = Vec::new();
    for event in events {
        decoder.event(event, &mut deltas);
    }
    decoder.end(&mut deltas);
    let mut assembler = MessageAssembler::new(model, 0);
    for delta in deltas {
        assembler.push(delta);
    }
    std::iter::from_fn(|| assembler.next_event()).collect()
}

// ---------------------------------------------------------------------------
// Request: tools, tool_choice, reasoning, headers, determinism
// ---------------------------------------------------------------------------

#[test]
fn tools_keep_input_order_and_send_strict_false() {
    let m = model("mistral-small-latest");
    let second = Tool {
        name: "alpha".into(),
        description: String::new(),
        parameters: json!({"type": "object", "properties": {}}),
    };
    let ctx = Context {
        messages: vec![user("hi")],
        tools: vec![weather_tool(), second],
        ..Context::default()
    };
    let b = body(&m, &ctx, &options());
    assert_eq!(
        b["tools"],
        json!([
            {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city", "parameters": weather_tool().parameters, "strict": false}},
            {"type": "function", "function": {"name": "alpha", "description": "", "parameters": {"type": "object", "properties": {}}, "strict": false}}
        ])
    );
    // Property order inside the schema is kept byte for byte.
    let text = serde_json::to_string(&b["tools"][0]["function"]["parameters"]).unwrap();
    assert!(text.starts_with(r#"{"type":"object","properties":{"city""#), "{text}");

    let mut no_strict = m.clone();
    no_strict.compat = Some(json!({"supportsStrict": false}));
    let b = body(&no_strict, &ctx, &options());
    assert!(b["tools"][0]["function"].get("strict").is_none());
}

#[test]
fn no_tools_no_tools_key() {
    let b = body(
        &model("mistral-small-latest"),
        &Context { messages: vec![user("hi")], ..Context::default() },
        &options(),
    );
    assert!(b.get("tools").is_none());
    assert!(b.get("tool_choice").is_none());
}

#[test]
fn tool_choice_mapping_and_errors() {
    let m = model("mistral-small-latest");
    let with_tools =
        Context { messages: vec![user("hi")], tools: vec![weather_tool()], ..Context::default() };
    let without = Context { messages: vec![user("hi")], ..Context::default() };
    let choice = |ctx: &Context, c: ToolChoice| {
        private::build_request(&m, ctx, &StreamOptions { tool_choice: Some(c), ..options() })
            .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap().get("tool_choice").cloned())
    };
    assert_eq!(choice(&with_tools, ToolChoice::Auto).unwrap(), Some(json!("auto")));
    assert_eq!(choice(&with_tools, ToolChoice::None).unwrap(), Some(json!("none")));
    assert_eq!(choice(&with_tools, ToolChoice::Required).unwrap(), Some(json!("any")));
    assert_eq!(
        choice(&with_tools, ToolChoice::Tool("get_weather".into())).unwrap(),
        Some(json!({"type": "function", "function": {"name": "get_weather"}}))
    );
    let e = choice(&with_tools, ToolChoice::Tool("nope".into())).unwrap_err();
    assert_eq!(
        e.message,
        "Mistral tool_choice requested unavailable tool \"nope\" after schema conversion"
    );
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
    assert_eq!(choice(&without, ToolChoice::Auto).unwrap(), None);
    assert_eq!(choice(&without, ToolChoice::None).unwrap(), Some(json!("none")));
    let e = choice(&without, ToolChoice::Required).unwrap_err();
    assert_eq!(
        e.message,
        "Mistral tool_choice requires a tool, but no tools survived schema conversion"
    );
}

#[test]
fn sampling_fields() {
    let m = model("mistral-small-latest");
    let ctx = Context { messages: vec![user("hi")], ..Context::default() };
    let o = StreamOptions {
        temperature: Some(0.2),
        max_tokens: Some(100_000),
        stop: vec!["END".into()],
        ..options()
    };
    let b = body(&m, &ctx, &o);
    assert_eq!(b["model"], "mistral-small-latest");
    assert_eq!(b["stream"], true);
    assert_eq!(b["temperature"], 0.2);
    assert_eq!(b["max_tokens"], 4096, "clamped to the model's limit");
    assert_eq!(b["stop"], json!(["END"]));
    assert!(b.get("stream_options").is_none(), "Mistral rejects stream_options with 422");
    let keys: Vec<&str> = b.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["model", "stream", "messages", "temperature", "max_tokens", "stop"]);
}

#[test]
fn reasoning_prompt_mode_and_effort() {
    let ctx = Context { messages: vec![user("hi")], ..Context::default() };
    let reasoning = StreamOptions { reasoning: Some(ReasoningLevel::Medium), ..options() };

    let mut magistral = model("magistral-medium-latest");
    magistral.reasoning = true;
    let b = body(&magistral, &ctx, &reasoning);
    assert_eq!(b["prompt_mode"], "reasoning");
    assert!(b.get("reasoning_effort").is_none());
    // No level requested: nothing.
    assert!(body(&magistral, &ctx, &options()).get("prompt_mode").is_none());

    let mut small = model("mistral-small-latest");
    small.reasoning = true;
    let b = body(&small, &ctx, &reasoning);
    assert_eq!(b["reasoning_effort"], "high");
    assert!(b.get("prompt_mode").is_none());

    small.compat = Some(json!({"reasoningEffortMap": {"medium": "none"}}));
    assert_eq!(body(&small, &ctx, &reasoning)["reasoning_effort"], "none");

    let mut custom = model("my-finetune");
    custom.reasoning = true;
    custom.compat = Some(json!({"reasoningFormat": "reasoningEffort"}));
    assert_eq!(body(&custom, &ctx, &reasoning)["reasoning_effort"], "high");
    custom.compat = Some(json!({"reasoningFormat": "none"}));
    let b = body(&custom, &ctx, &reasoning);
    assert!(b.get("reasoning_effort").is_none() && b.get("prompt_mode").is_none());

    // A non-reasoning model never gets reasoning parameters.
    assert!(body(&model("mistral-large-latest"), &ctx, &reasoning).get("prompt_mode").is_none());

    // Provider options override.
    let mut po = BTreeMap::new();
    po.insert("promptMode".to_owned(), json!("reasoning"));
    po.insert("parallelToolCalls".to_owned(), json!(false));
    let b = body(
        &model("mistral-large-latest"),
        &ctx,
        &StreamOptions { provider_options: po, ..options() },
    );
    assert_eq!(b["prompt_mode"], "reasoning");
    assert_eq!(b["parallel_tool_calls"], false);
}

#[test]
fn headers_url_and_affinity() {
    let mut m = model("mistral-small-latest");
    m.headers.insert("X-Model-Header".into(), "m".into());
    let ctx = Context { messages: vec![user("hi")], ..Context::default() };
    let o = StreamOptions { session_id: Some("sess-42".into()), ..options() };
    let llm_http::HttpRequest { url, headers, .. } = private::build_request(&m, &ctx, &o).unwrap();
    assert_eq!(url, "https://api.mistral.ai/v1/chat/completions");
    let get = |headers: &llm_http::HeaderMap, name: &str| {
        headers.get_all(name).iter().map(|v| v.to_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    assert_eq!(get(&headers, "authorization"), ["Bearer test-key"]);
    assert_eq!(get(&headers, "x-affinity"), ["sess-42"]);
    assert_eq!(get(&headers, "content-type"), ["application/json"]);
    assert_eq!(get(&headers, "x-model-header"), ["m"]);

    // User headers are merged last and win, case-insensitively.
    let mut user_headers = BTreeMap::new();
    user_headers.insert("X-Affinity".to_owned(), "mine".to_owned());
    user_headers.insert("Authorization".to_owned(), "Bearer other".to_owned());
    let o =
        StreamOptions { session_id: Some("sess-42".into()), headers: user_headers, ..options() };
    let headers = private::build_request(&m, &ctx, &o).unwrap().headers;
    assert_eq!(get(&headers, "x-affinity"), ["mine"]);
    assert_eq!(get(&headers, "authorization"), ["Bearer other"]);

    // No session: no affinity header.
    let headers = private::build_request(&m, &ctx, &options()).unwrap().headers;
    assert!(get(&headers, "x-affinity").is_empty());

    for (base, expected) in [
        ("", "https://api.mistral.ai/v1/chat/completions"),
        ("http://127.0.0.1:9/", "http://127.0.0.1:9/v1/chat/completions"),
        ("https://gw.example/mistral/v1", "https://gw.example/mistral/v1/chat/completions"),
    ] {
        m.base_url = base.into();
        assert_eq!(private::build_request(&m, &ctx, &options()).unwrap().url, expected);
    }
}

#[test]
fn missing_key_is_an_auth_error_event() {
    let m = model("mistral-small-latest");
    let ctx = Context { messages: vec![user("hi")], ..Context::default() };
    let e = private::build_request(&m, &ctx, &StreamOptions::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth);
    assert_eq!(e.message, "No API key for provider: mistral");
    let events: Vec<AssistantEvent> = tokio_test_block(
        MistralProvider::new().stream(&m, &ctx, &StreamOptions::default()).collect(),
    );
    assert_eq!(events.len(), 1);
    assert!(
        matches!(&events[0], AssistantEvent::Error { error, .. } if error.kind == ErrorKind::Auth)
    );
}

fn tokio_test_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

fn rich_context() -> Context {
    Context {
        system_prompt: Some("You are terse.".into()),
        messages: vec![
            user("Weather in Lyon and Paris?"),
            assistant_from(
                "anthropic",
                "anthropic-messages",
                "claude-sonnet-4-5",
                vec![
                    AssistantContent::Thinking(ThinkingContent {
                        thinking: "Two calls.".into(),
                        thinking_signature: Some("sig".into()),
                        redacted: false,
                    }),
                    AssistantContent::Text(TextContent {
                        text: "Checking.".into(),
                        text_signature: None,
                    }),
                    call(
                        "toolu_01A09q90qw90lq917835lq9",
                        "get_weather",
                        json!({"city": "Lyon", "unit": "c"}),
                    ),
                    call("toolu_01B", "get_weather", json!({"city": "Paris"})),
                ],
            ),
            result("toolu_01A09q90qw90lq917835lq9", "get_weather", "12°C", false),
            result("toolu_01B", "get_weather", "", true),
            user("Thanks"),
        ],
        tools: vec![weather_tool()],
    }
}

#[test]
fn body_is_byte_identical_for_identical_input() {
    let m = model("mistral-small-latest");
    let ctx = rich_context();
    let o = StreamOptions {
        temperature: Some(0.7),
        max_tokens: Some(512),
        session_id: Some("s".into()),
        tool_choice: Some(ToolChoice::Auto),
        ..options()
    };
    let a = serde_json::to_vec(&body(&m, &ctx, &o)).unwrap();
    let b = serde_json::to_vec(&body(&m, &ctx.clone(), &o.clone())).unwrap();
    assert_eq!(a, b);
    // And across a fresh parse of the same context (no map-order leaks).
    let ctx2: Context = serde_json::from_str(&serde_json::to_string(&ctx).unwrap()).unwrap();
    assert_eq!(a, serde_json::to_vec(&body(&m, &ctx2, &o)).unwrap());
}

// ---------------------------------------------------------------------------
// Messages and transcript replay
// ---------------------------------------------------------------------------

#[test]
fn cross_provider_transcript_replays_in_mistral_shape() {
    let m = model("mistral-small-latest");
    let msgs = messages(&m, &rich_context());
    assert_eq!(msgs[0], json!({"role": "system", "content": "You are terse."}));
    assert_eq!(msgs[1], json!({"role": "user", "content": "Weather in Lyon and Paris?"}));
    let assistant = &msgs[2];
    assert_eq!(assistant["role"], "assistant");
    // Thinking from another model becomes text; its signature is dropped.
    assert_eq!(
        assistant["content"],
        json!([{"type": "text", "text": "Two calls."}, {"type": "text", "text": "Checking."}])
    );
    let calls = assistant["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    let id0 = calls[0]["id"].as_str().unwrap();
    let id1 = calls[1]["id"].as_str().unwrap();
    for id in [id0, id1] {
        assert_eq!(id.len(), 9);
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric()), "{id}");
    }
    assert_ne!(id0, id1);
    assert_eq!(calls[0]["type"], "function");
    assert_eq!(
        calls[0]["function"],
        json!({"name": "get_weather", "arguments": "{\"city\":\"Lyon\",\"unit\":\"c\"}"})
    );
    // Each result carries its call's id; error results with empty text get a placeholder text.
    assert_eq!(
        msgs[3],
        json!({"role": "tool", "tool_call_id": id0, "name": "get_weather", "content": "12°C"})
    );
    assert_eq!(
        msgs[4],
        json!({"role": "tool", "tool_call_id": id1, "name": "get_weather", "content": "[tool error] (no tool output)"})
    );
    assert_eq!(msgs[5], json!({"role": "user", "content": "Thanks"}));
}

#[test]
fn openclaw_44_long_id_maps_to_nine_alnum_for_call_and_result() {
    let m = model("mistral-small-latest");
    let ctx = Context {
        messages: vec![
            user("go"),
            assistant_from(
                "openai",
                "openai-completions",
                "gpt-5",
                vec![call("call_1234567890abcdef", "get_weather", json!({"city": "Oslo"}))],
            ),
            result("call_1234567890abcdef", "get_weather", "3°C", false),
        ],
        ..Context::default()
    };
    let msgs = messages(&m, &ctx);
    let id = msgs[1]["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    assert!(id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()), "{id}");
    assert_eq!(msgs[2]["tool_call_id"], json!(id));
}

#[test]
fn same_model_replay_keeps_valid_ids_and_thinking_chunks() {
    let mut m = model("magistral-medium-latest");
    m.reasoning = true;
    let ctx = Context {
        messages: vec![
            user("go"),
            assistant_from(
                "mistral",
                API,
                "magistral-medium-latest",
                vec![
                    AssistantContent::Thinking(ThinkingContent {
                        thinking: "Need data".into(),
                        thinking_signature: None,
                        redacted: false,
                    }),
                    AssistantContent::Text(TextContent { text: "  ".into(), text_signature: None }),
                    call("Ab3dE5fG7", "get_weather", json!({})),
                ],
            ),
            result("Ab3dE5fG7", "get_weather", "  sunny \n", false),
        ],
        ..Context::default()
    };
    let msgs = messages(&m, &ctx);
    assert_eq!(
        msgs[1],
        json!({"role": "assistant", "content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Need data"}]}],
               "tool_calls": [{"id": "Ab3dE5fG7", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]})
    );
    assert_eq!(msgs[2]["tool_call_id"], "Ab3dE5fG7");
    assert_eq!(msgs[2]["content"], "sunny");
}

#[test]
fn errored_turns_are_dropped_and_orphans_get_results() {
    let m = model("mistral-small-latest");
    let mut errored = assistant_from(
        "mistral",
        API,
        "mistral-small-latest",
        vec![AssistantContent::Text(TextContent { text: "partial".into(), text_signature: None })],
    );
    if let Message::Assistant(a) = &mut errored {
        a.stop_reason = StopReason::Error;
    }
    let ctx = Context {
        messages: vec![
            user("a"),
            errored,
            user("b"),
            assistant_from(
                "mistral",
                API,
                "mistral-small-latest",
                vec![call("Ab3dE5fG7", "f", json!({})), call("Bc4eF6gH8", "f", json!({}))],
            ),
            result("Ab3dE5fG7", "f", "ok", false),
            user("c"),
        ],
        ..Context::default()
    };
    let msgs = messages(&m, &ctx);
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "user", "assistant", "tool", "tool", "user"]);
    assert_eq!(msgs[4]["tool_call_id"], "Bc4eF6gH8");
    assert_eq!(msgs[4]["content"], "[tool error] No result provided");
}

#[test]
fn images_for_vision_and_non_vision_models() {
    let image = UserContent::Image(ImageContent {
        data: "iVBORw0KGgo=".into(),
        mime_type: "image/png".into(),
    });
    let ctx = Context {
        messages: vec![
            Message::User(UserMessage {
                content: UserMessageContent::Blocks(vec![
                    UserContent::text("What is this?"),
                    image.clone(),
                ]),
                timestamp: 0,
            }),
            assistant_from(
                "mistral",
                API,
                "pixtral-large-latest",
                vec![call("Ab3dE5fG7", "screenshot", json!({}))],
            ),
            Message::ToolResult(ToolResultMessage {
                tool_call_id: "Ab3dE5fG7".into(),
                tool_name: "screenshot".into(),
                content: vec![image.clone()],
                details: None,
                is_error: false,
                timestamp: 0,
            }),
        ],
        ..Context::default()
    };
    let mut vision = model("pixtral-large-latest");
    vision.input = vec![llm_core::InputModality::Text, llm_core::InputModality::Image];
    let msgs = messages(&vision, &ctx);
    assert_eq!(
        msgs[0]["content"][1],
        json!({"type": "image_url", "image_url": "data:image/png;base64,iVBORw0KGgo="})
    );
    assert_eq!(msgs[2]["content"][0], json!({"type": "text", "text": "(see attached image)"}));
    assert_eq!(msgs[2]["content"][1]["type"], "image_url");

    let msgs = messages(&model("pixtral-large-latest"), &ctx);
    assert_eq!(
        msgs[0]["content"][1],
        json!({"type": "text", "text": "(image omitted: model does not support images)"})
    );
    assert!(msgs[2]["content"].as_str().unwrap().contains("image omitted"), "{}", msgs[2]);
}

// ---------------------------------------------------------------------------
// Tool-call id mapping: 9 alphanumerics, injective, identical for call and result
// ---------------------------------------------------------------------------

fn is_mistral_id(id: &str) -> bool {
    id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

#[test]
fn id_mapping_corpus_from_every_provider() {
    let ids: Vec<String> = [
        "toolu_01A09q90qw90lq917835lq9",
        "call_Ex0000000000000000000001",
        "call_abc|fc_very+long/item",
        "call_abc|fc_other",
        "get_weather_1760000000000_0",
        "ns.bash:0",
        "",
        " ",
        "Ab3dE5fG7",
        "Ab3dE5fG7_",
        "Ab3-dE5fG7",
        "null",
        "日本語のid",
        "a",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let out = private::map_tool_call_ids(&ids);
    let unique: std::collections::HashSet<&String> = out.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{out:?}");
    assert!(out.iter().all(|id| is_mistral_id(id)), "{out:?}");
    assert_eq!(out[8], "Ab3dE5fG7", "a valid id is kept");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// No two source ids collide, every id is 9 alphanumerics, and each result
    /// carries exactly its call's id: through the whole request conversion.
    #[test]
    fn outgoing_ids_are_injective_and_shared_by_call_and_result(
        raw in proptest::collection::btree_set("[a-zA-Z0-9_|:.+/ -]{0,40}", 1..24),
        from_other_model in any::<bool>(),
    ) {
        let ids: Vec<String> = raw.into_iter().collect();
        let (provider, api, model_id) = if from_other_model {
            ("openai", "openai-responses", "gpt-5")
        } else {
            ("mistral", API, "mistral-small-latest")
        };
        let mut msgs = vec![user("go")];
        msgs.push(assistant_from(provider, api, model_id, ids.iter().map(|id| call(id, "f", json!({}))).collect()));
        for id in &ids {
            msgs.push(result(id, "f", "ok", false));
        }
        let out = messages(&model("mistral-small-latest"), &Context { messages: msgs, ..Context::default() });
        let calls: Vec<String> = out[1]["tool_calls"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect();
        let results: Vec<String> = out[2..].iter().map(|r| r["tool_call_id"].as_str().unwrap().to_owned()).collect();
        prop_assert_eq!(calls.len(), ids.len());
        prop_assert_eq!(&calls, &results);
        let unique: std::collections::HashSet<&String> = calls.iter().collect();
        prop_assert_eq!(unique.len(), calls.len());
        for id in &calls {
            prop_assert!(is_mistral_id(id), "{}", id);
        }
    }

    /// The per-request map alone, at scale: distinct inputs, distinct outputs.
    #[test]
    fn id_map_never_collides(raw in proptest::collection::btree_set(".{0,24}", 1..400)) {
        let ids: Vec<String> = raw.into_iter().collect();
        let out = private::map_tool_call_ids(&ids);
        let unique: std::collections::HashSet<&String> = out.iter().collect();
        prop_assert_eq!(unique.len(), ids.len());
        prop_assert!(out.iter().all(|id| is_mistral_id(id)));
        // Deterministic.
        prop_assert_eq!(out, private::map_tool_call_ids(&ids));
    }

    /// The decoder never panics, and always ends with at most one terminal event.
    #[test]
    fn decoder_survives_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut sse = SseDecoder::new();
        let mut events = Vec::new();
        let _ = sse.push(&bytes, &mut events);
        let _ = sse.finish(&mut events);
        let mut decoder = private::decoder();
        let mut deltas = Vec::new();
        for event in events {
            decoder.event(event, &mut deltas);
        }
        decoder.end(&mut deltas);
        let terminals = deltas.iter().filter(|d| matches!(d, llm_core::raw::Delta::Done | llm_core::raw::Delta::Error(_))).count();
        prop_assert!(terminals <= 1);
    }
}

// ---------------------------------------------------------------------------
// Error bodies
// ---------------------------------------------------------------------------

#[test]
fn error_body_variants_decode() {
    let cases = [
        (
            400,
            r#"{"object":"error","message":"Tool call id was call_x but must be a-z, A-Z, 0-9, with a length of 9.","type":"invalid_function_call","param":null,"code":"3280","raw_status_code":400}"#,
            ErrorKind::InvalidRequest,
            "Tool call id was call_x but must be a-z, A-Z, 0-9, with a length of 9.",
            Some("invalid_function_call"),
        ),
        (
            400,
            r#"{"object":"error","message":"Tool call id has to be defined in serving mode.","type":"invalid_request_error","param":null,"code":null}"#,
            ErrorKind::InvalidRequest,
            "Tool call id has to be defined in serving mode.",
            Some("invalid_request_error"),
        ),
        (
            401,
            r#"{"message":"Unauthorized","request_id":"5f0c"}"#,
            ErrorKind::Auth,
            "Unauthorized",
            None,
        ),
        (401, r#"{"detail":"Unauthorized"}"#, ErrorKind::Auth, "Unauthorized", None),
        (
            422,
            r#"{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","max_completion_tokens"],"msg":"Extra inputs are not permitted","input":32000}]},"type":"invalid_request_error","param":null,"code":null}"#,
            ErrorKind::InvalidRequest,
            "body.max_completion_tokens: Extra inputs are not permitted",
            Some("invalid_request_error"),
        ),
        (
            422,
            r#"{"detail":[{"type":"missing","loc":["body","model"],"msg":"Field required"}]}"#,
            ErrorKind::InvalidRequest,
            "body.model: Field required",
            None,
        ),
        (
            422,
            r#"{"object":"Error","detail":[],"message":[{"loc":["body"],"msg":"bad"}],"type":"invalid_request_error","code":3001}"#,
            ErrorKind::InvalidRequest,
            "body: bad",
            Some("invalid_request_error"),
        ),
        (
            422,
            r#"{"message":["a","b"],"code":3001}"#,
            ErrorKind::InvalidRequest,
            "a; b",
            Some("3001"),
        ),
        (
            429,
            r#"{"message":"Requests rate limit exceeded"}"#,
            ErrorKind::RateLimited,
            "Requests rate limit exceeded",
            None,
        ),
        (
            429,
            r#"{"object":"error","message":"Rate limit exceeded","type":"rate_limited","param":null,"code":"1300","raw_status_code":429}"#,
            ErrorKind::RateLimited,
            "Rate limit exceeded",
            Some("rate_limited"),
        ),
        (
            503,
            r#"{"object":"error","message":"Service tier capacity exceeded for this model.","type":"invalid_request_error","param":null,"code":"3505"}"#,
            ErrorKind::Overloaded,
            "Service tier capacity exceeded for this model.",
            Some("invalid_request_error"),
        ),
        (
            502,
            "<html>Bad Gateway</html>",
            ErrorKind::Overloaded,
            "HTTP 502: <html>Bad Gateway</html>",
            None,
        ),
    ];
    for (status, body, kind, message, code) in cases {
        let e = private::http_error(status, body);
        assert_eq!(e.kind, kind, "{body}");
        assert_eq!(e.message, message, "{body}");
        assert_eq!(e.code.as_deref(), code, "{body}");
        assert_eq!(e.status, Some(status));
        assert_eq!(e.body.as_deref(), Some(body));
        assert_eq!(e.provider, PROVIDER);
        assert_eq!(e.retryable, matches!(status, 429 | 500..=599), "{body}");
    }
    assert_eq!(
        private::decode_error_body(r#"{"message":{"x":[1]},"code":7}"#),
        (Some(r#"{"x":[1]}"#.into()), Some("7".into()))
    );
}

// ---------------------------------------------------------------------------
// Decoder through the public pieces
// ---------------------------------------------------------------------------

#[test]
fn decoder_e2_whole_call_and_e4_thinking() {
    let m = model("magistral-medium-latest");
    let body = concat!(
        "data: {\"id\":\"a1b2c3d4e5f60718293a4b5c6d7e8f90\",\"object\":\"chat.completion.chunk\",\"created\":1760000006,\"model\":\"magistral-medium-2509\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":[{\"type\":\"text\",\"text\":\"Need the forecast\"}]}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"a1b2c3d4e5f60718293a4b5c6d7e8f90\",\"choices\":[{\"index\":0,\"delta\":{\"content\":[{\"type\":\"text\",\"text\":\"Checking now.\"}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"a1b2c3d4e5f60718293a4b5c6d7e8f90\",\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"tool_calls\":[{\"id\":\"Ab3dE5fG7\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Lyon\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":120,\"total_tokens\":161,\"completion_tokens\":41}}\n\n",
        "data: [DONE]\n\n",
    );
    let events = decode(body.as_bytes(), &m);
    let Some(AssistantEvent::Done { reason, message }) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(*reason, StopReason::ToolUse);
    assert_eq!(message.response_model.as_deref(), Some("magistral-medium-2509"));
    assert!(
        matches!(&message.content[0], AssistantContent::Thinking(t) if t.thinking == "Need the forecast")
    );
    assert_eq!(message.text(), "Checking now.");
    let call = message.tool_calls().next().unwrap();
    assert_eq!((call.id.as_str(), call.name.as_str()), ("Ab3dE5fG7", "get_weather"));
    assert_eq!(call.arguments, json!({"city": "Lyon"}));
    assert_eq!(message.usage.output, 41);
}

// ---------------------------------------------------------------------------
// End to end over loopback HTTP
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Received {
    head: String,
    body: Vec<u8>,
}

/// One scripted response: status, extra headers, body.
type Scripted = (u16, Vec<(&'static str, String)>, Vec<u8>);

/// Answers request i with `responses[i]` from the llm-testkit loopback server
/// (an event stream one event per write), which records the requests.
async fn serve(responses: Vec<Scripted>) -> (String, Server) {
    let canned = responses
        .into_iter()
        .map(|(status, extra, body)| {
            let content_type =
                if status == 200 { "text/event-stream; charset=utf-8" } else { "application/json" };
            let mut headers = vec![("content-type".to_owned(), content_type.to_owned())];
            headers.extend(extra.into_iter().map(|(k, v)| (k.to_owned(), v)));
            Canned { status, headers, body: body.into() }
        })
        .collect();
    let server = Server::start(Responses::Sequence(canned), Chunking::Events).await.unwrap();
    (format!("http://{}", server.addr), server)
}

/// The requests `server` received: the head as `name: value` lines, and the body.
fn received(server: &Server) -> Vec<Received> {
    server
        .recorded()
        .into_iter()
        .map(|r| {
            let mut head = format!("{} {} HTTP/1.1\r\n", r.method, r.path);
            for (k, v) in &r.headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            Received { head, body: r.body.to_vec() }
        })
        .collect()
}

const TOOL_STREAM: &str = concat!(
    "data: {\"id\":\"0example0000000000000000000003\",\"object\":\"chat.completion.chunk\",\"created\":1760000005,\"model\":\"devstral-medium-latest\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"0example0000000000000000000003\",\"object\":\"chat.completion.chunk\",\"created\":1760000005,\"model\":\"devstral-medium-latest\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"Hk29LmQ7z\",\"function\":{\"name\":\"read_file\",\"arguments\":\"\"},\"index\":0}]},\"finish_reason\":null}],\"p\":\"abcdefghij\"}\n\n",
    "data: {\"id\":\"0example0000000000000000000003\",\"object\":\"chat.completion.chunk\",\"created\":1760000005,\"model\":\"devstral-medium-latest\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"name\":\"\",\"arguments\":\"{\\\"path\\\": \"},\"index\":0}]},\"finish_reason\":null}],\"p\":\"abcdefghijklmnopqrstu\"}\n\n",
    "data: {\"id\":\"0example0000000000000000000003\",\"object\":\"chat.completion.chunk\",\"created\":1760000005,\"model\":\"devstral-medium-latest\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"null\",\"function\":{\"name\":\"\",\"arguments\":\"\\\"notes.txt\\\"}\"},\"index\":0}]},\"finish_reason\":null}],\"p\":\"abcdefg\"}\n\n",
    "data: {\"id\":\"0example0000000000000000000003\",\"object\":\"chat.completion.chunk\",\"created\":1760000005,\"model\":\"devstral-medium-latest\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":300,\"total_tokens\":318,\"completion_tokens\":18},\"p\":\"abcdefghijklmn\"}\n\n",
    "data: [DONE]\n\n",
);

fn read_file_tool() -> Tool {
    Tool {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    }
}

#[tokio::test]
async fn end_to_end_tool_call_over_loopback() {
    let (base, server) = serve(vec![(200, vec![], TOOL_STREAM.as_bytes().to_vec())]).await;
    let mut m = model("devstral-medium-latest");
    m.base_url = base;
    let ctx = Context {
        messages: vec![user("Read notes.txt")],
        tools: vec![read_file_tool()],
        ..Context::default()
    };
    let o = StreamOptions { session_id: Some("sess-1".into()), ..options() };
    let events: Vec<AssistantEvent> = MistralProvider::new().stream(&m, &ctx, &o).collect().await;
    let printed = llm_core::raw::printer::print_transcript(&events);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines[0], "start");
    assert_eq!(lines[1], "toolcall_start 0 id=\"Hk29LmQ7z\" name=\"read_file\"");
    assert_eq!(lines[2], "toolcall_delta 0 \"{\\\"path\\\": \"");
    assert_eq!(lines[3], "toolcall_delta 0 \"\\\"notes.txt\\\"}\" at=\"/path\"");
    assert!(
        lines[4]
            == "toolcall_end 0 {\"id\":\"Hk29LmQ7z\",\"name\":\"read_file\",\"arguments\":{\"path\":\"notes.txt\"}}",
        "{printed}"
    );
    assert_eq!(lines[5], "done toolUse");
    let Some(AssistantEvent::Done { message, .. }) = events.last() else { panic!("{printed}") };
    assert_eq!(message.tool_calls().next().unwrap().arguments, json!({"path": "notes.txt"}));
    assert_eq!(message.usage.input, 300);
    assert_eq!(message.response_id.as_deref(), Some("0example0000000000000000000003"));

    let requests = received(&server);
    assert_eq!(requests.len(), 1);
    let head = requests[0].head.to_ascii_lowercase();
    assert!(head.starts_with("post /v1/chat/completions http/1.1"), "{head}");
    assert!(head.contains("authorization: bearer test-key"));
    assert!(head.contains("x-affinity: sess-1"));
    assert!(head.contains("content-type: application/json"));
    let sent: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(sent, body(&m, &ctx, &o));
}

#[tokio::test]
async fn retry_after_429_then_success_and_401_not_retried() {
    let text = "data: {\"id\":\"r1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\ndata: [DONE]\n\n";
    let (base, server) = serve(vec![
        (
            429,
            vec![("retry-after", "2".to_owned())],
            br#"{"message":"Requests rate limit exceeded"}"#.to_vec(),
        ),
        (200, vec![], text.as_bytes().to_vec()),
    ])
    .await;
    let mut m = model("mistral-small-latest");
    m.base_url = base;
    let ctx = Context { messages: vec![user("hi")], ..Context::default() };
    let sleeper = Arc::new(RecordingSleeper::new());
    let o = StreamOptions {
        sleeper: Some(sleeper.clone()),
        retry: RetryPolicy { jitter: false, ..RetryPolicy::default() },
        ..options()
    };
    let message = MistralProvider::new().stream(&m, &ctx, &o).result().await;
    assert_eq!(message.stop_reason, StopReason::Stop, "{message:?}");
    assert_eq!(message.text(), "Hi");
    assert_eq!(sleeper.delays(), vec![Duration::from_secs(2)]);
    assert_eq!(received(&server).len(), 2);

    let (base, server) = serve(vec![(401, vec![], br#"{"detail":"Unauthorized"}"#.to_vec())]).await;
    m.base_url = base;
    let events: Vec<AssistantEvent> = MistralProvider::new().stream(&m, &ctx, &o).collect().await;
    assert_eq!(events.len(), 1, "no start before an HTTP error");
    let AssistantEvent::Error { error, message, .. } = &events[0] else { panic!() };
    assert_eq!(
        (error.kind, error.status, error.message.as_str()),
        (ErrorKind::Auth, Some(401), "Unauthorized")
    );
    assert_eq!(message.error_body.as_deref(), Some(r#"{"detail":"Unauthorized"}"#));
    assert!(!format!("{error:?} {message:?}").contains("test-key"), "the key never leaks");
    assert_eq!(received(&server).len(), 1);
}

#[tokio::test]
async fn cut_stream_is_truncated_and_keeps_partial_text() {
    let body = "data: {\"id\":\"r2\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Half a sen\"},\"finish_reason\":null}]}\n\n";
    let (base, _server) = serve(vec![(200, vec![], body.as_bytes().to_vec())]).await;
    let mut m = model("mistral-small-latest");
    m.base_url = base;
    let ctx = Context { messages: vec![user("hi")], ..Context::default() };
    let message = MistralProvider::new().stream(&m, &ctx, &options()).result().await;
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.error_type.as_deref(), Some("truncated"));
    assert_eq!(message.text(), "Half a sen");
}

#[test]
fn provider_debug_has_no_secrets() {
    let p = MistralProvider::new();
    assert_eq!(p.api(), "mistral-conversations");
    let debug = format!("{p:?}");
    assert!(!debug.contains("test-key"));
}

// ---------------------------------------------------------------------------
// Live smoke test (one tool round trip), only with MISTRAL_API_KEY
// ---------------------------------------------------------------------------

#[tokio::test]
async fn live_smoke_tool_round_trip() {
    let Ok(key) = std::env::var("MISTRAL_API_KEY") else {
        println!("skipped: MISTRAL_API_KEY not set");
        return;
    };
    let m = model("mistral-small-latest");
    let o = StreamOptions {
        api_key: Some(key.into()),
        tool_choice: Some(ToolChoice::Required),
        max_tokens: Some(256),
        ..StreamOptions::default()
    };
    let mut ctx = Context {
        system_prompt: Some("Use the tool to answer.".into()),
        messages: vec![user("What is the weather in Lyon? Use get_weather.")],
        tools: vec![weather_tool()],
    };
    let first = MistralProvider::new().stream(&m, &ctx, &o).result().await;
    assert_eq!(first.stop_reason, StopReason::ToolUse, "{first:?}");
    let call = first.tool_calls().next().expect("a tool call").clone();
    assert_eq!(call.name, "get_weather");
    assert!(call.arguments.get("city").is_some(), "{:?}", call.arguments);
    ctx.messages.push(Message::Assistant(Box::new(first)));
    ctx.messages.push(result(&call.id, "get_weather", "12°C and sunny", false));
    let o = StreamOptions { tool_choice: Some(ToolChoice::Auto), ..o };
    let second = MistralProvider::new().stream(&m, &ctx, &o).result().await;
    assert_eq!(second.stop_reason, StopReason::Stop, "{second:?}");
    assert!(!second.text().is_empty());
}
