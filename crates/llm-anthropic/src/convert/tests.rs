#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use llm_core::{
    ApiKey, AssistantMessage, CacheRetention, ImageContent, StopReason, TextContent,
    ThinkingContent, ToolCall, UserMessage,
};
use serde_json::json;

use super::model_version::Family;
use super::*;

/// A built request as the tests read it: the body as sent, parsed back (key order kept), and
/// the `Debug` of the whole call.
struct Sent {
    url: String,
    headers: HeaderMap,
    body: Value,
    tool_names: ToolNames,
    debug: String,
}

impl std::fmt::Debug for Sent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.debug)
    }
}

fn build_request(model: &Model, context: &Context, options: &StreamOptions) -> Result<Sent, Error> {
    let call = super::build_request(model, context, options)?;
    Ok(Sent {
        url: call.http.url.clone(),
        headers: call.http.headers.clone(),
        body: serde_json::from_slice(&call.http.body).unwrap(),
        debug: format!("{call:?}"),
        tool_names: call.state,
    })
}

fn model() -> Model {
    Model {
        id: "claude-sonnet-4-5".into(),
        api: crate::API.into(),
        provider: "anthropic".into(),
        max_tokens: 8192,
        ..Model::default()
    }
}

fn options(key: &str) -> StreamOptions {
    StreamOptions { api_key: Some(ApiKey::new(key)), ..StreamOptions::default() }
}

fn tool(name: &str, parameters: Value) -> Tool {
    Tool { name: name.into(), description: format!("The {name} tool"), parameters }
}

fn weather() -> Tool {
    tool(
        "get_weather",
        json!({"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false,"$defs":{"x":{}}}),
    )
}

fn assistant(content: Vec<AssistantContent>, model: &Model) -> Message {
    Message::Assistant(Box::new(AssistantMessage {
        content,
        api: model.api.clone(),
        provider: model.provider.clone(),
        model: model.id.clone(),
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
        content: vec![UserContent::text(text)],
        details: None,
        is_error,
        timestamp: 0,
    })
}

fn thinking(text: &str, sig: Option<&str>) -> AssistantContent {
    AssistantContent::Thinking(ThinkingContent {
        thinking: text.into(),
        thinking_signature: sig.map(str::to_owned),
        redacted: false,
    })
}

fn header<'a>(r: &'a Sent, name: &str) -> Option<&'a str> {
    r.headers.get(name).and_then(|v| v.to_str().ok())
}

fn count_cache_markers(v: &Value) -> usize {
    match v {
        Value::Object(m) => {
            usize::from(m.contains_key("cache_control"))
                + m.values().map(count_cache_markers).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_cache_markers).sum(),
        _ => 0,
    }
}

#[test]
fn text_request_shape_and_headers() {
    let ctx = Context {
        system_prompt: Some("Be brief.".into()),
        messages: vec![Message::user("Hi")],
        tools: vec![],
    };
    let mut opts = options("test-key");
    opts.temperature = Some(0.2);
    opts.cache_retention = CacheRetention::None;
    opts.headers.insert("X-Trace".into(), "t1".into());
    let r = build_request(&model(), &ctx, &opts).unwrap();
    assert_eq!(r.url, "https://api.anthropic.com/v1/messages");
    assert_eq!(
        r.body,
        json!({
            "model": "claude-sonnet-4-5",
            "messages": [{"role": "user", "content": "Hi"}],
            "system": [{"type": "text", "text": "Be brief."}],
            "max_tokens": 8192,
            "stream": true,
            "temperature": 0.2
        })
    );
    assert_eq!(header(&r, "x-api-key"), Some("test-key"));
    assert_eq!(header(&r, "anthropic-version"), Some("2023-06-01"));
    assert_eq!(header(&r, "content-type"), Some("application/json"));
    assert_eq!(header(&r, "authorization"), None);
    assert_eq!(header(&r, "anthropic-beta"), None);
    assert_eq!(header(&r, "x-trace"), Some("t1"));
    // The key never shows in Debug output.
    assert!(!r.debug.contains("test-key"), "{}", r.debug);
}

#[test]
fn base_url_override_and_header_precedence() {
    let mut m = model();
    m.base_url = "http://127.0.0.1:9999/".into();
    m.headers.insert("anthropic-version".into(), "2099-01-01".into());
    m.headers.insert("x-model".into(), "m".into());
    let mut opts = options("k");
    opts.headers.insert("X-Model".into(), "caller".into());
    let r = build_request(
        &m,
        &Context { messages: vec![Message::user("x")], ..Context::default() },
        &opts,
    )
    .unwrap();
    assert_eq!(r.url, "http://127.0.0.1:9999/v1/messages");
    assert_eq!(header(&r, "anthropic-version"), Some("2099-01-01"));
    assert_eq!(header(&r, "x-model"), Some("caller"));
    assert_eq!(r.headers.get_all("x-model").iter().count(), 1);
}

#[test]
fn missing_key_is_an_auth_error() {
    let e = build_request(&model(), &Context::default(), &StreamOptions::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth);
    assert_eq!(e.message, "No API key for provider: anthropic");
}

#[test]
fn tools_are_projected_with_eager_streaming_and_one_cache_marker() {
    let ctx = Context {
        system_prompt: None,
        messages: vec![Message::user("weather?")],
        tools: vec![
            weather(),
            tool("no_params", Value::Null),
            tool("bad", json!({"type":"string"})),
            tool("bad_required", json!({"type":"object","required":"x"})),
            Tool {
                name: "quiet".into(),
                description: String::new(),
                parameters: json!({"properties":{}}),
            },
        ],
    };
    let r = build_request(&model(), &ctx, &options("k")).unwrap();
    assert_eq!(
        r.body["tools"],
        json!([
            {"name":"get_weather","description":"The get_weather tool","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"eager_input_streaming":true},
            {"name":"no_params","description":"The no_params tool","input_schema":{"type":"object","properties":{},"required":[]},"eager_input_streaming":true},
            {"name":"quiet","input_schema":{"type":"object","properties":{},"required":[]},"eager_input_streaming":true,"cache_control":{"type":"ephemeral"}}
        ])
    );
    assert_eq!(header(&r, "anthropic-beta"), None);
}

#[test]
fn fireworks_compat_uses_the_beta_header_and_no_tool_marker() {
    let mut m = model();
    m.provider = "fireworks".into();
    let ctx = Context {
        messages: vec![Message::user("x")],
        tools: vec![weather()],
        ..Context::default()
    };
    let r = build_request(&m, &ctx, &options("k")).unwrap();
    assert!(r.body["tools"][0].get("eager_input_streaming").is_none());
    assert!(r.body["tools"][0].get("cache_control").is_none());
    assert_eq!(header(&r, "anthropic-beta"), Some("fine-grained-tool-streaming-2025-05-14"));

    // An explicit compat flag wins over the provider default.
    let mut m = model();
    m.compat = Some(json!({"supportsEagerToolInputStreaming": false, "unknownFlag": 1}));
    let r = build_request(&m, &ctx, &options("k")).unwrap();
    assert!(r.body["tools"][0].get("eager_input_streaming").is_none());
    assert_eq!(
        AnthropicCompat::from_model(&m).unwrap().supports_eager_tool_input_streaming,
        Some(false)
    );
    // A flag of the wrong type is an invalid request, not a silent default.
    m.compat = Some(json!({"supportsEagerToolInputStreaming": "no"}));
    let e = build_request(&m, &ctx, &options("k")).unwrap_err();
    assert_eq!((e.kind, e.retryable), (ErrorKind::InvalidRequest, false));
    assert!(e.message.starts_with("Invalid anthropic compat for model"), "{}", e.message);
}

#[test]
fn oauth_uses_bearer_claude_code_headers_and_names() {
    let ctx = Context {
        system_prompt: Some("Project rules.".into()),
        messages: vec![
            Message::user("read it"),
            assistant(vec![call("toolu_01A", "read", json!({"path":"a"}))], &model()),
            result("toolu_01A", "read", "contents", false),
        ],
        tools: vec![
            tool("read", json!({"type":"object","properties":{"path":{"type":"string"}}})),
            weather(),
        ],
    };
    let r = build_request(&model(), &ctx, &options("sk-ant-oat01-test")).unwrap();
    assert_eq!(header(&r, "authorization"), Some("Bearer sk-ant-oat01-test"));
    assert_eq!(header(&r, "x-api-key"), None);
    assert_eq!(header(&r, "anthropic-beta"), Some("claude-code-20250219,oauth-2025-04-20"));
    assert_eq!(header(&r, "user-agent"), Some("claude-cli/2.1.75"));
    assert_eq!(header(&r, "x-app"), Some("cli"));
    assert_eq!(r.body["tools"][0]["name"], "Read");
    assert_eq!(r.body["tools"][1]["name"], "get_weather");
    assert_eq!(r.body["messages"][1]["content"][0]["name"], "Read");
    assert_eq!(r.body["system"][0]["text"], CLAUDE_CODE_IDENTITY);
    assert_eq!(r.body["system"][1]["text"], "Project rules.");
    assert_eq!(r.tool_names.original("Read"), "read");
    assert_eq!(r.tool_names.original("Other"), "Other");
    assert!(!r.debug.contains("sk-ant-oat01-test"), "{}", r.debug);
}

#[test]
fn oauth_name_collision_fails_before_any_request() {
    let ctx = Context {
        messages: vec![Message::user("x")],
        tools: vec![tool("read", json!({})), tool("Read", json!({}))],
        ..Context::default()
    };
    let e = build_request(&model(), &ctx, &options("sk-ant-oat01-x")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
    assert!(!e.retryable);
    assert_eq!(e.message, r#"Anthropic tool names "read" and "Read" both map to "Read""#);
    // Without OAuth the names are distinct on the wire.
    assert!(build_request(&model(), &ctx, &options("k")).is_ok());
}

#[test]
fn cache_markers_never_exceed_four() {
    let m = model();
    let ctx = Context {
        system_prompt: Some(format!("Stable rules.{CACHE_BOUNDARY}Today is Monday.")),
        messages: vec![
            Message::user("first"),
            assistant(vec![call("toolu_1", "get_weather", json!({"city":"Oslo"}))], &m),
            result("toolu_1", "get_weather", "cold", false),
        ],
        tools: vec![weather(), tool("b", json!({})), tool("c", json!({}))],
    };
    // OAuth: identity + stable prefix + last tool = 3, so one left for the messages. The most
    // recent tool_result wins that last slot over the earlier user text.
    let r = build_request(&m, &ctx, &options("sk-ant-oat01-x")).unwrap();
    assert_eq!(count_cache_markers(&r.body), 4);
    assert_eq!(
        r.body["system"][1],
        json!({"type":"text","text":"Stable rules.","cache_control":{"type":"ephemeral"}})
    );
    assert_eq!(r.body["system"][2], json!({"type":"text","text":"Today is Monday."}));
    assert!(r.body["tools"][0].get("cache_control").is_none());
    assert!(r.body["tools"][2].get("cache_control").is_some());
    assert!(r.body["messages"][2]["content"][0].get("cache_control").is_some());
    assert_eq!(r.body["messages"][0]["content"], "first");

    // API key: prefix + tool = 2, so the user text and the tool_result are both marked.
    let mut opts = options("k");
    opts.cache_retention = CacheRetention::Long;
    let r = build_request(&m, &ctx, &opts).unwrap();
    assert_eq!(count_cache_markers(&r.body), 4);
    let ttl = json!({"type":"ephemeral","ttl":"1h"});
    assert_eq!(
        r.body["messages"][0]["content"],
        json!([{"type":"text","text":"first","cache_control":ttl}])
    );
    assert_eq!(r.body["messages"][2]["content"][0]["cache_control"], ttl);

    // No caching: no markers, the boundary becomes a newline.
    opts.cache_retention = CacheRetention::None;
    let r = build_request(&m, &ctx, &opts).unwrap();
    assert_eq!(count_cache_markers(&r.body), 0);
    assert_eq!(r.body["system"], json!([{"type":"text","text":"Stable rules.\nToday is Monday."}]));
}

#[test]
fn consecutive_tool_results_merge_into_one_user_message() {
    let m = model();
    let ctx = Context {
        messages: vec![
            Message::user("go"),
            assistant(
                vec![
                    call("toolu_1", "a", json!({})),
                    call("toolu_2", "b", json!({"x":1})),
                    call("toolu_3", "c", json!({})),
                ],
                &m,
            ),
            result("toolu_1", "a", "one", false),
            result("toolu_2", "b", "boom", true),
            Message::ToolResult(ToolResultMessage {
                tool_call_id: "toolu_3".into(),
                tool_name: "c".into(),
                content: vec![UserContent::Image(ImageContent {
                    data: "iVBORw0KGgo=".into(),
                    mime_type: "image/png".into(),
                })],
                details: Some(json!({"never":"sent"})),
                is_error: false,
                timestamp: 0,
            }),
        ],
        ..Context::default()
    };
    let mut m2 = m.clone();
    m2.input = vec![llm_core::InputModality::Text, llm_core::InputModality::Image];
    let mut opts = options("k");
    opts.cache_retention = CacheRetention::None;
    let r = build_request(&m2, &ctx, &opts).unwrap();
    let messages = r.body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(
        messages[2],
        json!({"role":"user","content":[
            {"type":"tool_result","tool_use_id":"toolu_1","content":"one","is_error":false},
            {"type":"tool_result","tool_use_id":"toolu_2","content":"boom","is_error":true},
            {"type":"tool_result","tool_use_id":"toolu_3","content":[
                {"type":"text","text":"(see attached image)"},
                {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}
            ],"is_error":false}
        ]})
    );
    assert!(!r.body.to_string().contains("never"));
}

#[test]
fn signed_thinking_is_replayed_byte_for_byte_for_the_same_model() {
    let mut m = model();
    m.reasoning = true;
    let sig = " EqQBCkYIBRgCKkB+/=sig ";
    let ctx = Context {
        messages: vec![
            Message::user("q"),
            assistant(vec![thinking("reasoning…", Some(sig)), call("toolu_9", "f", json!({}))], &m),
            result("toolu_9", "f", "ok", false),
        ],
        ..Context::default()
    };
    let mut opts = options("k");
    opts.reasoning = Some(ReasoningLevel::Low);
    opts.cache_retention = CacheRetention::None;
    let r = build_request(&m, &ctx, &opts).unwrap();
    assert_eq!(
        r.body["messages"][1]["content"][0],
        json!({"type":"thinking","thinking":"reasoning…","signature":sig})
    );
    assert_eq!(r.body["thinking"], json!({"type":"enabled","budget_tokens":2048}));
    assert_eq!(r.body["max_tokens"], 8192);
    assert_eq!(header(&r, "anthropic-beta"), Some("interleaved-thinking-2025-05-14"));
    assert!(r.body.get("temperature").is_none());

    // Another model's thinking becomes plain text; its signature is dropped.
    let mut other = m.clone();
    other.id = "claude-opus-4-1".into();
    let ctx2 = Context {
        messages: vec![
            Message::user("q"),
            assistant(
                vec![thinking("reasoning…", Some(sig)), call("toolu_9", "f", json!({}))],
                &other,
            ),
            result("toolu_9", "f", "ok", false),
        ],
        ..Context::default()
    };
    let r = build_request(&m, &ctx2, &opts).unwrap();
    assert_eq!(r.body["messages"][1]["content"][0], json!({"type":"text","text":"reasoning…"}));
    assert!(!r.body.to_string().contains("EqQB"));
}

#[test]
fn thinking_off_keeps_only_the_active_tool_turn() {
    let mut m = model();
    m.reasoning = true;
    let ctx = Context {
        messages: vec![
            Message::user("q1"),
            Message::Assistant(Box::new(AssistantMessage {
                content: vec![thinking("old", Some("sigOld"))],
                api: m.api.clone(),
                provider: m.provider.clone(),
                model: m.id.clone(),
                stop_reason: StopReason::Stop,
                ..AssistantMessage::default()
            })),
            Message::user("q2"),
            assistant(
                vec![thinking("active", Some("sigActive")), call("toolu_5", "f", json!({}))],
                &m,
            ),
            result("toolu_5", "f", "ok", false),
        ],
        ..Context::default()
    };
    let mut opts = options("k");
    opts.cache_retention = CacheRetention::None;
    let r = build_request(&m, &ctx, &opts).unwrap();
    assert_eq!(r.body["thinking"], json!({"type":"disabled"}));
    assert_eq!(
        r.body["messages"][1]["content"],
        json!([{"type":"text","text":"[assistant reasoning omitted]"}])
    );
    assert_eq!(r.body["messages"][3]["content"][0]["signature"], "sigActive");
}

#[test]
fn unsigned_and_redacted_thinking() {
    let m = model();
    let ctx = Context {
        messages: vec![
            Message::user("q"),
            assistant(
                vec![
                    thinking("unsigned", None),
                    thinking("   ", None),
                    thinking("openai", Some("reasoning_content")),
                    AssistantContent::Thinking(ThinkingContent {
                        thinking: String::new(),
                        thinking_signature: Some("ENCRYPTED".into()),
                        redacted: true,
                    }),
                    AssistantContent::Text(TextContent { text: " ".into(), text_signature: None }),
                    call("toolu_1", "f", json!(null)),
                ],
                &m,
            ),
            result("toolu_1", "f", "ok", false),
        ],
        ..Context::default()
    };
    let mut opts = options("k");
    opts.cache_retention = CacheRetention::None;
    opts.provider_options.insert("thinkingEnabled".into(), json!(true));
    let mut m2 = m.clone();
    m2.reasoning = true;
    let r = build_request(&m2, &ctx, &opts).unwrap();
    assert_eq!(
        r.body["messages"][1]["content"],
        json!([
            {"type":"text","text":"unsigned"},
            {"type":"redacted_thinking","data":"ENCRYPTED"},
            {"type":"tool_use","id":"toolu_1","name":"f","input":{}}
        ])
    );
    assert_eq!(r.body["thinking"], json!({"type":"enabled","budget_tokens":1024}));
}

#[test]
fn adaptive_models_use_effort() {
    let mut m = model();
    m.id = "claude-opus-4-6".into();
    m.reasoning = true;
    let mut opts = options("k");
    opts.reasoning = Some(ReasoningLevel::Max);
    opts.temperature = Some(1.0);
    let ctx = Context { messages: vec![Message::user("q")], ..Context::default() };
    let r = build_request(&m, &ctx, &opts).unwrap();
    assert_eq!(r.body["thinking"], json!({"type":"adaptive","display":"summarized"}));
    assert_eq!(r.body["output_config"], json!({"effort":"max"}));
    assert_eq!(header(&r, "anthropic-beta"), None);
    assert!(r.body.get("temperature").is_none());
}

#[test]
fn budget_is_fitted_to_max_tokens() {
    let mut m = model();
    m.reasoning = true;
    m.max_tokens = 10000;
    let mut opts = options("k");
    opts.reasoning = Some(ReasoningLevel::High);
    opts.max_tokens = Some(1000);
    let ctx = Context { messages: vec![Message::user("q")], ..Context::default() };
    let r = build_request(&m, &ctx, &opts).unwrap();
    // min(1000 + 16384, 10000) = 10000 <= 16384, so the budget shrinks to 10000 - 1024.
    assert_eq!(r.body["max_tokens"], 10000);
    assert_eq!(r.body["thinking"]["budget_tokens"], 8976);
}

#[test]
fn tool_choice_is_reconciled_with_the_projection() {
    let ctx = Context {
        messages: vec![Message::user("x")],
        tools: vec![tool("read", json!({})), tool("bad", json!({"type":"array"}))],
        ..Context::default()
    };
    let mut opts = options("sk-ant-oat01-x");
    opts.tool_choice = Some(ToolChoice::Tool("read".into()));
    let r = build_request(&model(), &ctx, &opts).unwrap();
    assert_eq!(r.body["tool_choice"], json!({"type":"tool","name":"Read"}));
    opts.tool_choice = Some(ToolChoice::Tool("bad".into()));
    let e = build_request(&model(), &ctx, &opts).unwrap_err();
    assert_eq!(
        e.message,
        r#"Anthropic tool_choice requested unavailable tool "bad" after schema conversion"#
    );
    opts.tool_choice = Some(ToolChoice::Required);
    opts.provider_options.insert("disableParallelToolUse".into(), json!(true));
    let r = build_request(&model(), &ctx, &opts).unwrap();
    assert_eq!(r.body["tool_choice"], json!({"type":"any","disable_parallel_tool_use":true}));

    let only_bad = Context {
        messages: vec![Message::user("x")],
        tools: vec![tool("bad", json!({"type":"array"}))],
        ..Context::default()
    };
    let mut opts = options("k");
    opts.tool_choice = Some(ToolChoice::Auto);
    let r = build_request(&model(), &only_bad, &opts).unwrap();
    assert!(r.body.get("tool_choice").is_none());
    assert!(r.body.get("tools").is_none());
    opts.tool_choice = Some(ToolChoice::Required);
    let e = build_request(&model(), &only_bad, &opts).unwrap_err();
    assert_eq!(
        e.message,
        "Anthropic tool_choice requires a tool, but no tools survived schema conversion"
    );
}

#[test]
fn cross_provider_ids_are_normalized() {
    let other = Model {
        id: "gpt-5".into(),
        api: "openai-responses".into(),
        provider: "openai".into(),
        ..Model::default()
    };
    let ctx = Context {
        messages: vec![
            Message::user("x"),
            assistant(vec![call("call_abc|fc_very+long/id", "f", json!({}))], &other),
            result("call_abc|fc_very+long/id", "f", "ok", false),
        ],
        ..Context::default()
    };
    let mut opts = options("k");
    opts.cache_retention = CacheRetention::None;
    let r = build_request(&model(), &ctx, &opts).unwrap();
    let id = r.body["messages"][1]["content"][0]["id"].as_str().unwrap().to_owned();
    assert!(IdRules::ALNUM_DASH_64.accepts(&id), "{id}");
    assert_eq!(r.body["messages"][2]["content"][0]["tool_use_id"], id.as_str());
}

#[test]
fn errored_turns_are_dropped_and_empty_users_skipped() {
    let m = model();
    let ctx = Context {
        messages: vec![
            Message::user("   "),
            Message::User(UserMessage {
                content: UserMessageContent::Blocks(vec![UserContent::text(" ")]),
                timestamp: 0,
            }),
            Message::user("real"),
            Message::Assistant(Box::new(AssistantMessage {
                content: vec![AssistantContent::Text(TextContent {
                    text: "partial".into(),
                    text_signature: None,
                })],
                api: m.api.clone(),
                provider: m.provider.clone(),
                model: m.id.clone(),
                stop_reason: StopReason::Error,
                ..AssistantMessage::default()
            })),
        ],
        ..Context::default()
    };
    let mut opts = options("k");
    opts.cache_retention = CacheRetention::None;
    let r = build_request(&m, &ctx, &opts).unwrap();
    assert_eq!(r.body["messages"], json!([{"role":"user","content":"real"}]));
}

#[test]
fn body_bytes_are_deterministic() {
    let m = model();
    let ctx = Context {
        system_prompt: Some("sys".into()),
        messages: vec![
            Message::user("go"),
            assistant(
                vec![call("toolu_1", "get_weather", json!({"z":1,"a":2,"m":{"y":1,"b":2}}))],
                &m,
            ),
            result("toolu_1", "get_weather", "ok", false),
        ],
        tools: vec![weather(), tool("t2", json!({"type":"object","properties":{"z":{},"a":{}}}))],
    };
    let mut opts = options("k");
    opts.session_id = Some("s".into());
    opts.stop = vec!["END".into()];
    let a = serde_json::to_vec(&build_request(&m, &ctx, &opts).unwrap().body).unwrap();
    for _ in 0..10 {
        let b = serde_json::to_vec(&build_request(&m, &ctx, &opts).unwrap().body).unwrap();
        assert_eq!(a, b);
    }
    let text = String::from_utf8(a).unwrap();
    // Argument key order is the caller's, not sorted and not random.
    assert!(text.contains(r#"{"z":1,"a":2,"m":{"y":1,"b":2}}"#), "{text}");
}

#[test]
fn session_affinity_only_when_enabled() {
    let mut m = model();
    m.compat = Some(json!({"sendSessionAffinityHeaders": true}));
    let mut opts = options("k");
    opts.session_id = Some("sess-1".into());
    let ctx = Context { messages: vec![Message::user("x")], ..Context::default() };
    let r = build_request(&m, &ctx, &opts).unwrap();
    assert_eq!(header(&r, "x-session-affinity"), Some("sess-1"));
    opts.cache_retention = CacheRetention::None;
    let r = build_request(&m, &ctx, &opts).unwrap();
    assert_eq!(header(&r, "x-session-affinity"), None);
    let r = build_request(&model(), &ctx, &options("k")).unwrap();
    assert_eq!(header(&r, "x-session-affinity"), None);
}

#[test]
fn claude_versions() {
    let v = |id: &str| claude_version(id).map(|v| (v.family, v.major, v.minor));
    assert_eq!(v("claude-opus-4-6"), Some((Family::Opus, 4, 6)));
    assert_eq!(v("claude-sonnet-4-5-20250929"), Some((Family::Sonnet, 4, 5)));
    assert_eq!(v("claude-sonnet-4-20250514"), Some((Family::Sonnet, 4, 0)));
    assert_eq!(v("claude-3-5-haiku-latest"), Some((Family::Haiku, 3, 5)));
    assert_eq!(v("anthropic/claude-opus-4.7"), Some((Family::Opus, 4, 7)));
    assert_eq!(v("gpt-5"), None);
    let s = |id: &str| {
        Settings::resolve(&Model { id: id.into(), ..Model::default() }).unwrap().adaptive_thinking
    };
    assert!(s("claude-opus-4-6"));
    assert!(s("claude-sonnet-4-6"));
    assert!(!s("claude-sonnet-4-5"));
    assert!(!s("claude-3-7-sonnet-latest"));
}

/// The wire blocks of a response with server tools, as one JSON array (the oracle).
const SERVER_BLOCKS: &str = r#"[
 {"type":"server_tool_use","id":"srvtoolu_01W","name":"web_search","input":{"query":"Oslo weather"}},
 {"type":"web_search_tool_result","tool_use_id":"srvtoolu_01W","content":[{"type":"web_search_result","url":"https://example.com/oslo","title":"Oslo","encrypted_content":"EnC0ded==","page_age":null}]},
 {"type":"text","text":"It is 4 C in Oslo.","citations":[{"type":"web_search_result_location","url":"https://example.com/oslo","title":"Oslo","encrypted_index":"Eo8=","cited_text":"4 C"}]}
]"#;

/// Streams `SERVER_BLOCKS` (the server tool's input in two fragments, the citation as a
/// `citations_delta`) and returns the decoded message.
fn decode_server_blocks() -> AssistantMessage {
    use llm_core::raw::drive::WireDecoder;
    let blocks: Vec<Value> = serde_json::from_str(SERVER_BLOCKS).unwrap();
    let ev = |data: Value| llm_core::raw::sse::SseEvent {
        event: data["type"].as_str().map(str::to_owned),
        data: data.to_string(),
        id: None,
    };
    let mut tool = blocks[0].clone();
    tool["input"] = json!({});
    let mut text = blocks[2].clone();
    text["text"] = json!("");
    text["citations"] = json!([]);
    let wire = [
        json!({"type":"message_start","message":{"id":"msg_S","model":"claude-sonnet-4-5","usage":{"input_tokens":9,"output_tokens":1}}}),
        json!({"type":"content_block_start","index":0,"content_block":tool}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"Oslo"}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":" weather\"}"}}),
        json!({"type":"content_block_stop","index":0}),
        json!({"type":"content_block_start","index":1,"content_block":blocks[1]}),
        json!({"type":"content_block_stop","index":1}),
        json!({"type":"content_block_start","index":2,"content_block":text}),
        json!({"type":"content_block_delta","index":2,"delta":{"type":"citations_delta","citation":blocks[2]["citations"][0]}}),
        json!({"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"It is 4 C in Oslo."}}),
        json!({"type":"content_block_stop","index":2}),
        json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":20}}),
        json!({"type":"message_stop"}),
    ];
    let mut decoder = crate::stream::Decoder::new();
    let mut deltas = Vec::new();
    for data in wire {
        decoder.event(ev(data), &mut deltas);
    }
    let mut assembler = llm_core::raw::MessageAssembler::new(&model(), 0);
    for d in deltas {
        assembler.push(d);
    }
    let events: Vec<_> = std::iter::from_fn(|| assembler.next_event()).collect();
    match events.last() {
        Some(llm_core::AssistantEvent::Done { message, .. }) => *message.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn server_tool_blocks_round_trip_to_the_same_model_and_are_dropped_for_others() {
    let m = model();
    let message = decode_server_blocks();
    assert_eq!(message.tool_calls().count(), 0);
    let ctx = Context {
        messages: vec![
            Message::user("q"),
            Message::Assistant(Box::new(message.clone())),
            Message::user("more"),
        ],
        ..Context::default()
    };
    let mut opts = options("k");
    opts.cache_retention = CacheRetention::None;
    let r = build_request(&m, &ctx, &opts).unwrap();
    let oracle: Value = serde_json::from_str(SERVER_BLOCKS).unwrap();
    assert_eq!(r.body["messages"][1]["content"], oracle);
    // Byte for byte: each block serializes to the bytes it was sent as.
    for (sent, wire) in
        r.body["messages"][1]["content"].as_array().unwrap().iter().zip(oracle.as_array().unwrap())
    {
        assert_eq!(sent.to_string(), wire.to_string());
    }

    // Another model: only the text goes, without the citations or the server blocks.
    let mut other = message;
    other.model = "claude-opus-4-1".into();
    let ctx = Context {
        messages: vec![
            Message::user("q"),
            Message::Assistant(Box::new(other)),
            Message::user("more"),
        ],
        ..Context::default()
    };
    let r = build_request(&m, &ctx, &opts).unwrap();
    assert_eq!(
        r.body["messages"][1]["content"],
        json!([{"type":"text","text":"It is 4 C in Oslo."}])
    );
}

fn person() -> llm_core::OutputFormat {
    llm_core::OutputFormat::new(
        "person",
        json!({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}),
    )
}

fn strict_person_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": ["integer", "null"]}},
        "required": ["name", "age"],
        "additionalProperties": false
    })
}

#[test]
fn an_output_format_is_output_config_format_on_a_model_that_supports_it() {
    let o = StreamOptions { output: Some(person()), ..options("sk-ant-api03-k") };
    let r = build_request(&model(), &Context::default(), &o).unwrap();
    assert_eq!(
        r.body["output_config"],
        json!({"format": {"type": "json_schema", "schema": strict_person_schema()}})
    );
    assert!(r.body.get("tools").is_none());
    assert!(r.body.get("tool_choice").is_none());
}

#[test]
fn an_older_model_gets_the_format_as_a_forced_tool_and_thinking_is_refused() {
    let m = Model { id: "claude-3-5-haiku-20241022".into(), ..model() };
    let o = StreamOptions { output: Some(person()), ..options("sk-ant-api03-k") };
    let context = Context { tools: vec![weather()], ..Context::default() };
    let r = build_request(&m, &context, &o).unwrap();
    assert!(r.body.get("output_config").is_none());
    let tools = r.body["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[1]["name"], json!("person"));
    assert_eq!(tools[1]["input_schema"], strict_person_schema());
    assert_eq!(r.body["tool_choice"], json!({"type": "tool", "name": "person"}));

    let thinking = Model { reasoning: true, ..m };
    let o = StreamOptions { reasoning: Some(llm_core::ReasoningLevel::High), ..o };
    let e = build_request(&thinking, &Context::default(), &o).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
}
