use super::*;
use crate::compat::OpenAiCompletionsCompat;

/// A built request as the tests read it: the body as sent, parsed back (key order kept), and
/// the `Debug` of what was built.
struct Sent {
    url: String,
    headers: HeaderMap,
    body: Value,
    debug: String,
}

impl std::fmt::Debug for Sent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.debug)
    }
}

fn build_request(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    compat: &ResolvedCompat,
) -> Result<Sent, Error> {
    let prepared = super::build_request(model, context, options, compat)?;
    Ok(Sent {
        debug: format!("{prepared:?}"),
        url: prepared.http.url,
        headers: prepared.http.headers,
        body: serde_json::from_slice(&prepared.http.body).unwrap(),
    })
}
use llm_core::{
    ApiKey, ImageContent, InputModality, StopReason, TextContent, ThinkingContent, ToolCall,
    UserMessage,
};

fn model() -> Model {
    Model {
        id: "gpt-4o".into(),
        api: "openai-completions".into(),
        provider: "openai".into(),
        base_url: "https://api.openai.com/v1".into(),
        input: vec![InputModality::Text, InputModality::Image],
        max_tokens: 16384,
        ..Model::default()
    }
}

fn compat(m: &Model) -> ResolvedCompat {
    ResolvedCompat::resolve(m, &OpenAiCompletionsCompat::from_model(m).unwrap())
}

fn options() -> StreamOptions {
    StreamOptions { api_key: Some(ApiKey::new("test-key")), ..StreamOptions::default() }
}

fn tool(name: &str, parameters: Value) -> Tool {
    Tool { name: name.into(), description: format!("{name} tool"), parameters }
}

#[test]
fn debug_of_a_request_never_shows_the_key() {
    let m = model();
    let options = StreamOptions {
        api_key: Some(ApiKey::new("sk-live-do-not-print")),
        ..StreamOptions::default()
    };
    let request = build_request(&m, &Context::default(), &options, &compat(&m)).unwrap();
    assert_eq!(request.headers.get("authorization").unwrap(), "Bearer sk-live-do-not-print");
    let debug = format!("{request:?}");
    assert!(!debug.contains("sk-live-do-not-print"), "{debug}");
    assert!(debug.contains("Sensitive"), "{debug}");
}

fn assistant(model: &str, provider: &str, api: &str, content: Vec<AssistantContent>) -> Message {
    Message::Assistant(Box::new(AssistantMessage {
        content,
        api: api.into(),
        provider: provider.into(),
        model: model.into(),
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

fn result(id: &str, name: &str, content: Vec<UserContent>) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: name.into(),
        content,
        details: None,
        is_error: false,
        timestamp: 0,
    })
}

fn image() -> UserContent {
    UserContent::Image(ImageContent { data: "AAAA".into(), mime_type: "image/png".into() })
}

#[test]
fn request_shape_and_determinism() {
    let m = model();
    let context = Context {
        system_prompt: Some("Be brief.".into()),
        messages: vec![Message::user("Weather in Oslo?")],
        tools: vec![tool(
            "get_weather",
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        )],
    };
    let mut o = options();
    o.max_tokens = Some(1_000_000);
    o.temperature = Some(0.2);
    o.session_id = Some("s".repeat(100));
    o.tool_choice = Some(ToolChoice::Auto);
    o.provider_options.insert("parallelToolCalls".into(), json!(false));
    o.headers.insert("X-Extra".into(), "1".into());
    let a = build_request(&m, &context, &o, &compat(&m)).unwrap();
    let b = build_request(&m, &context, &o, &compat(&m)).unwrap();
    assert_eq!(serde_json::to_vec(&a.body).unwrap(), serde_json::to_vec(&b.body).unwrap());
    assert_eq!(a.url, "https://api.openai.com/v1/chat/completions");
    assert_eq!(
        a.body,
        json!({
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Oslo?"}
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "store": false,
            "max_completion_tokens": 16384,
            "temperature": 0.2,
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "get_weather tool",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                "strict": false}}],
            "tool_choice": "auto",
            "parallel_tool_calls": false,
            "prompt_cache_key": "s".repeat(64)
        })
    );
    let names: Vec<&str> = a.headers.keys().map(|n| n.as_str()).collect();
    assert_eq!(names, vec!["content-type", "accept", "authorization", "x-extra"]);
}

#[test]
fn missing_key_is_an_auth_error() {
    let m = model();
    let e =
        build_request(&m, &Context::default(), &StreamOptions::default(), &compat(&m)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth);
    assert_eq!(e.message, "No API key for provider: openai");
}

#[test]
fn user_headers_override_case_insensitively() {
    let mut m = model();
    m.headers.insert("Authorization".into(), "Bearer model".into());
    let mut o = options();
    o.headers.insert("AUTHORIZATION".into(), "Bearer user".into());
    let r = build_request(&m, &Context::default(), &o, &compat(&m)).unwrap();
    let auth: Vec<_> = r.headers.get_all("authorization").iter().collect();
    assert_eq!(auth, ["Bearer user"]);
}

#[test]
fn tools_projection_and_empty_tools_for_history() {
    let m = model();
    let c = compat(&m);
    let converted = convert_tools(
        &[
            tool("ok", json!({"properties": {"a": {"type": "string"}}})),
            tool("", json!({})),
            tool("str", json!({"type": "string"})),
            tool("dyn", json!({"type": "object", "properties": {"a": {"$dynamicRef": "#x"}}})),
            tool("none", Value::Null),
        ],
        &c,
        None,
    );
    assert_eq!(converted.names, vec!["ok", "none"]);
    assert_eq!(
        converted.tools[0]["function"]["parameters"],
        json!({"type": "object", "properties": {"a": {"type": "string"}}})
    );
    assert_eq!(
        converted.tools[1]["function"]["parameters"],
        json!({"type": "object", "properties": {}})
    );

    // No tools, but tool history.
    let context = Context {
        messages: vec![
            Message::user("hi"),
            assistant(
                "gpt-4o",
                "openai",
                "openai-completions",
                vec![call("call_1", "f", json!({}))],
            ),
            result("call_1", "f", vec![UserContent::text("ok")]),
        ],
        ..Context::default()
    };
    let r = build_request(&m, &context, &options(), &c).unwrap();
    assert_eq!(r.body["tools"], json!([]));
}

#[test]
fn strict_key_omitted_when_unsupported_and_strict_when_possible() {
    let mut m = model();
    m.compat = Some(json!({"supportsStrictMode": false}));
    let t = [tool("f", json!({"type": "object", "properties": {}}))];
    let converted = convert_tools(&t, &compat(&m), Some(true));
    assert!(converted.tools[0]["function"].get("strict").is_none());

    let m = model();
    let t = [
        tool("f", json!({"type": "object", "properties": {"a": {"type": "string"}}})),
        tool("g", json!({"type": "object", "properties": {}})),
    ];
    let converted = convert_tools(&t, &compat(&m), Some(true));
    assert_eq!(converted.tools[0]["function"]["strict"], json!(true));
    assert_eq!(
        converted.tools[0]["function"]["parameters"],
        json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}, "required": ["a"], "additionalProperties": false})
    );
    assert!(converted.strict_plans.contains_key("f"));

    // One tool that cannot be strict downgrades the whole list, unchanged.
    let t = [
        tool("f", json!({"type": "object", "properties": {"a": {"type": "string"}}})),
        tool(
            "g",
            json!({"type": "object", "properties": {"b": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}),
        ),
    ];
    let converted = convert_tools(&t, &compat(&m), Some(true));
    assert_eq!(converted.tools[0]["function"]["strict"], json!(false));
    assert_eq!(converted.tools[0]["function"]["parameters"], t[0].parameters);
    assert!(converted.strict_plans.is_empty());
}

#[test]
fn tool_choice_reconciliation() {
    let names = vec!["a".to_owned()];
    assert_eq!(tool_choice(Some(&ToolChoice::Auto), &[], "openai").unwrap(), None);
    assert_eq!(tool_choice(Some(&ToolChoice::None), &[], "openai").unwrap(), None);
    assert_eq!(
        tool_choice(Some(&ToolChoice::None), &names, "openai").unwrap(),
        Some(json!("none"))
    );
    assert!(tool_choice(Some(&ToolChoice::Required), &[], "openai").is_err());
    assert_eq!(
        tool_choice(Some(&ToolChoice::Tool("a".into())), &names, "openai").unwrap(),
        Some(json!({"type": "function", "function": {"name": "a"}}))
    );
    let e = tool_choice(Some(&ToolChoice::Tool("str".into())), &names, "openai").unwrap_err();
    assert_eq!(
        e.message,
        "OpenAI Chat Completions tool_choice requested unavailable tool \"str\" after schema conversion"
    );
}

#[test]
fn replay_shapes_and_tool_result_images() {
    let m = model();
    let context = Context {
        messages: vec![
            Message::user("look"),
            assistant(
                "gpt-4o",
                "openai",
                "openai-completions",
                vec![
                    AssistantContent::Text(TextContent {
                        text: "Sure".into(),
                        text_signature: None,
                    }),
                    call("call_1", "shot", json!({"x": 1, "a": "b"})),
                    call("call_2", "shot", json!({})),
                ],
            ),
            result("call_1", "shot", vec![image()]),
            result("call_2", "shot", vec![UserContent::text("done"), image()]),
            Message::user("thanks"),
        ],
        ..Context::default()
    };
    let msgs = convert_messages(&m, &context, &compat(&m));
    assert_eq!(
        Value::Array(msgs),
        json!([
            {"role": "user", "content": "look"},
            {"role": "assistant", "content": "Sure", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "shot", "arguments": "{\"x\":1,\"a\":\"b\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "shot", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "(see attached image)"},
            {"role": "tool", "tool_call_id": "call_2", "content": "done"},
            {"role": "user", "content": [
                {"type": "text", "text": "Attached image(s) from tool result:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
            ]},
            {"role": "user", "content": "thanks"}
        ])
    );
}

#[test]
fn responses_ids_are_cut_to_the_call_id() {
    let m = model();
    let context = Context {
        messages: vec![
            Message::user("go"),
            assistant(
                "gpt-5",
                "openai",
                "openai-responses",
                vec![call("call_abc|fc_very+long/xyz", "f", json!({}))],
            ),
            result("call_abc|fc_very+long/xyz", "f", vec![UserContent::text("ok")]),
        ],
        ..Context::default()
    };
    let msgs = convert_messages(&m, &context, &compat(&m));
    assert_eq!(msgs[1]["tool_calls"][0]["id"], json!("call_abc"));
    assert_eq!(msgs[2]["tool_call_id"], json!("call_abc"));
}

#[test]
fn composite_ids_that_would_collide_stay_distinct() {
    let m = model();
    let context = Context {
        messages: vec![
            Message::user("go"),
            assistant(
                "gpt-5",
                "openai",
                "openai-responses",
                vec![call("call_a|fc_1", "f", json!({})), call("call_a|fc_2", "f", json!({}))],
            ),
            result("call_a|fc_1", "f", vec![UserContent::text("1")]),
            result("call_a|fc_2", "f", vec![UserContent::text("2")]),
        ],
        ..Context::default()
    };
    let msgs = convert_messages(&m, &context, &compat(&m));
    let a = msgs[1]["tool_calls"][0]["id"].as_str().unwrap();
    let b = msgs[1]["tool_calls"][1]["id"].as_str().unwrap();
    assert_eq!(a, "call_a");
    assert_ne!(a, b);
    assert!(ID_RULES.accepts(b), "{b}");
    assert_eq!(msgs[2]["tool_call_id"], json!(a));
    assert_eq!(msgs[3]["tool_call_id"], json!(b));
}

#[test]
fn same_model_thinking_goes_back_in_its_field() {
    let mut m = model();
    m.provider = "deepseek".into();
    m.id = "deepseek-reasoner".into();
    m.base_url = "https://api.deepseek.com".into();
    m.reasoning = true;
    let context = Context {
        messages: vec![
            Message::user("q"),
            assistant(
                "deepseek-reasoner",
                "deepseek",
                "openai-completions",
                vec![
                    AssistantContent::Thinking(ThinkingContent {
                        thinking: "hmm".into(),
                        thinking_signature: Some("reasoning_content".into()),
                        redacted: false,
                    }),
                    call("call_1", "f", json!({})),
                ],
            ),
            result("call_1", "f", vec![]),
        ],
        ..Context::default()
    };
    let msgs = convert_messages(&m, &context, &compat(&m));
    assert_eq!(msgs[1]["reasoning_content"], json!("hmm"));
    assert_eq!(msgs[1]["content"], Value::Null);
    assert_eq!(msgs[2]["content"], json!("(no tool output)"));
}

#[test]
fn bridge_message_and_tool_result_name() {
    let mut m = model();
    m.compat =
        Some(json!({"requiresAssistantAfterToolResult": true, "requiresToolResultName": true}));
    let context = Context {
        messages: vec![
            Message::user("q"),
            assistant(
                "gpt-4o",
                "openai",
                "openai-completions",
                vec![call("call_1", "f", json!({}))],
            ),
            result("call_1", "f", vec![UserContent::text("r")]),
            Message::User(UserMessage {
                content: UserMessageContent::Text("next".into()),
                timestamp: 0,
            }),
        ],
        ..Context::default()
    };
    let msgs = convert_messages(&m, &context, &compat(&m));
    assert_eq!(msgs[1]["content"], json!(""));
    assert_eq!(
        msgs[2],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "r", "name": "f"})
    );
    assert_eq!(
        msgs[3],
        json!({"role": "assistant", "content": "I have processed the tool results."})
    );
    assert_eq!(msgs[4]["content"], json!("next"));
}

#[test]
fn reasoning_params_per_format() {
    let mut m = model();
    m.reasoning = true;
    let mut o = options();
    o.reasoning = Some(ReasoningLevel::Max);
    let r = build_request(&m, &Context::default(), &o, &compat(&m)).unwrap();
    assert_eq!(r.body["reasoning_effort"], json!("xhigh"));
    m.compat = Some(json!({"thinkingFormat": "zai"}));
    let r = build_request(&m, &Context::default(), &o, &compat(&m)).unwrap();
    assert_eq!(r.body["thinking"], json!({"type": "enabled", "clear_thinking": false}));
    m.compat = Some(json!({"thinkingFormat": "qwen"}));
    o.reasoning = None;
    let r = build_request(&m, &Context::default(), &o, &compat(&m)).unwrap();
    assert_eq!(r.body["enable_thinking"], json!(false));
}

#[test]
fn extra_body_and_bad_provider_options() {
    let m = model();
    let mut o = options();
    o.provider_options.insert("extraBody".into(), json!({"top_k": 5, "store": true}));
    let r = build_request(&m, &Context::default(), &o, &compat(&m)).unwrap();
    assert_eq!(r.body["top_k"], json!(5));
    assert_eq!(r.body["store"], json!(true));
    o.provider_options.insert("parallelToolCalls".into(), json!("yes"));
    let e = build_request(&m, &Context::default(), &o, &compat(&m)).unwrap_err();
    assert_eq!((e.kind, e.retryable), (ErrorKind::InvalidRequest, false));
    assert!(
        e.message.starts_with("Invalid Chat Completions provider option: parallelToolCalls: "),
        "{}",
        e.message
    );
    o.provider_options.remove("parallelToolCalls");
    o.provider_options.insert("extraBody".into(), json!([1]));
    let e = build_request(&m, &Context::default(), &o, &compat(&m)).unwrap_err();
    assert!(e.message.contains("extraBody: "), "{}", e.message);
}

#[test]
fn endpoint_urls() {
    assert_eq!(endpoint_url(""), "https://api.openai.com/v1/chat/completions");
    assert_eq!(
        endpoint_url("http://127.0.0.1:8080/v1/"),
        "http://127.0.0.1:8080/v1/chat/completions"
    );
    assert_eq!(endpoint_url("https://x/v1/chat/completions"), "https://x/v1/chat/completions");
}

fn person() -> llm_core::OutputFormat {
    llm_core::OutputFormat::new(
        "person",
        json!({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}),
    )
    .with_description("The person named")
}

#[test]
fn an_output_format_is_a_strict_json_schema_response_format() {
    let m = model();
    let strict = StreamOptions { output: Some(person()), ..options() };
    let body = build_request(&m, &Context::default(), &strict, &compat(&m)).unwrap().body;
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {
            "name": "person",
            "description": "The person named",
            "schema": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": ["integer", "null"]}},
                "required": ["name", "age"],
                "additionalProperties": false
            },
            "strict": true
        }})
    );
    let loose = StreamOptions { output: Some(person().with_strict(false)), ..options() };
    let body = build_request(&m, &Context::default(), &loose, &compat(&m)).unwrap().body;
    assert_eq!(body["response_format"]["json_schema"]["schema"], person().schema);
    assert_eq!(body["response_format"]["json_schema"]["strict"], json!(false));
}

#[test]
fn a_model_without_structured_output_fails_before_any_request() {
    let m = Model { id: "gpt-3.5-turbo".into(), ..model() };
    let options = StreamOptions { output: Some(person()), ..options() };
    let error = build_request(&m, &Context::default(), &options, &compat(&m)).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Unsupported);
    assert_eq!(error.code.as_deref(), Some("output_format_unsupported"));
}
