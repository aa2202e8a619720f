#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]

use std::collections::BTreeMap;

use llm_core::{
    ApiKey, AssistantContent, AssistantMessage, CacheRetention, Context, ErrorKind, ImageContent,
    Message, Model, ReasoningLevel, StopReason, StreamOptions, TextContent, ThinkingContent, Tool,
    ToolCall, ToolChoice, ToolResultMessage, UserContent, UserMessage, UserMessageContent,
};
use serde_json::{Value, json};

use super::*;

fn model() -> Model {
    Model {
        id: "gpt-5.4".into(),
        api: crate::API.into(),
        provider: "openai".into(),
        reasoning: true,
        max_tokens: 8192,
        ..Model::default()
    }
}

fn options() -> StreamOptions {
    StreamOptions { api_key: Some(ApiKey::new("test-key")), ..StreamOptions::default() }
}

fn tool(name: &str, description: &str, parameters: Value) -> Tool {
    Tool { name: name.into(), description: description.into(), parameters }
}

fn assistant(model: &Model, content: Vec<AssistantContent>) -> Message {
    Message::Assistant(Box::new(AssistantMessage {
        content,
        api: model.api.clone(),
        provider: model.provider.clone(),
        model: model.id.clone(),
        stop_reason: StopReason::ToolUse,
        ..AssistantMessage::default()
    }))
}

fn call(id: &str, name: &str, arguments: Value) -> AssistantContent {
    AssistantContent::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
        thought_signature: None,
        arguments_incomplete: false,
    })
}

fn result(id: &str, name: &str, text: &str) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: name.into(),
        content: vec![UserContent::text(text)],
        details: None,
        is_error: false,
        timestamp: 0,
    })
}

fn body(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    sent_body(&build_request(model, context, options, None).unwrap())
}

/// The body as sent, read back as JSON (key order kept).
fn sent_body(converted: &Converted) -> Value {
    serde_json::from_slice(&converted.http.body).unwrap()
}

#[test]
fn tools_are_sorted_by_name_then_description() {
    let params = json!({"type": "object", "properties": {}});
    let tools = vec![
        tool("b", "", params.clone()),
        tool("a", "second", params.clone()),
        tool("a", "first", params.clone()),
        tool("\u{1F600}", "", params.clone()),
        tool("\u{FF21}", "", params.clone()),
    ];
    let wire = convert_tools(&tools, None).unwrap().wire;
    let order: Vec<(&str, &str)> = wire
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t["description"].as_str().unwrap()))
        .collect();
    // UTF-16 code units: the surrogate pair of U+1F600 (0xD83D) sorts before U+FF21.
    assert_eq!(
        order,
        [("a", "first"), ("a", "second"), ("b", ""), ("\u{1F600}", ""), ("\u{FF21}", "")]
    );
    assert!(wire[0].get("strict").is_none(), "no strict setting, no field");
    assert_eq!(wire[0]["type"], json!("function"));
}

#[test]
fn strict_on_native_routes_with_the_whole_list_rule() {
    let compatible =
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]});
    let optional = json!({"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}, "required": ["q"]});
    let open = json!({"type": "object", "properties": {"q": {"oneOf": [{"type": "string"}, {"type": "number"}]}}});
    let mut context = Context {
        tools: vec![tool("b", "B", compatible.clone()), tool("a", "A", optional)],
        ..Context::default()
    };
    let tools = &body(&model(), &context, &options())["tools"];
    assert_eq!(tools[0]["strict"], json!(true));
    assert_eq!(
        tools[0]["parameters"],
        json!({"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": ["integer", "null"]}},
               "required": ["q", "n"], "additionalProperties": false})
    );
    assert_eq!(tools[1]["parameters"]["additionalProperties"], json!(false));

    // One tool that cannot be strict: every tool goes `strict: false`, schemas untouched.
    context.tools.push(tool("c", "C", open.clone()));
    let tools = &body(&model(), &context, &options())["tools"];
    assert!(tools.as_array().unwrap().iter().all(|t| t["strict"] == json!(false)));
    assert_eq!(tools[1]["parameters"], compatible);
    assert_eq!(tools[2]["parameters"], open);

    // A compatible server that is not a native route: no `strict` field unless configured.
    let mut other = model();
    other.provider = "openrouter".into();
    other.base_url = "https://openrouter.ai/api/v1".into();
    let tools = &body(&other, &context, &options())["tools"];
    assert!(tools[0].get("strict").is_none());
    other.compat = Some(json!({"strictTools": false}));
    assert_eq!(body(&other, &context, &options())["tools"][0]["strict"], json!(false));
    let mut forced = options();
    forced.provider_options.insert("strictTools".into(), json!(true));
    context.tools.pop();
    assert_eq!(body(&other, &context, &forced)["tools"][0]["strict"], json!(true));
}

#[test]
fn strict_requests_carry_the_restore_plans() {
    let optional = json!({"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}, "required": ["q"]});
    let required =
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]});
    let open = json!({"type": "object", "properties": {"m": {"type": "object"}}});
    let mut context = Context {
        tools: vec![tool("opt", "", optional), tool("req", "", required)],
        ..Context::default()
    };
    let request = build_request(&model(), &context, &options(), None).unwrap();
    // Only a tool with something to restore gets a plan.
    assert_eq!(request.strict_plans.keys().collect::<Vec<_>>(), ["opt"]);
    let mut args = json!({"q": "x", "n": null});
    assert!(request.strict_plans["opt"].restore(&mut args));
    assert_eq!(args, json!({"q": "x"}));
    // Downgraded to non-strict: the model's nulls are its own, nothing is restored.
    context.tools.push(tool("open", "", open));
    assert!(build_request(&model(), &context, &options(), None).unwrap().strict_plans.is_empty());
}

#[test]
fn parameters_get_openclaws_root_normalization() {
    let wire = convert_tools(
        &[
            tool("a", "", Value::Null),
            tool("b", "", json!({"properties": {"x": {"type": "string"}}})),
            tool("c", "", json!({"type": "object"})),
        ],
        None,
    )
    .unwrap()
    .wire;
    assert_eq!(wire[0]["parameters"], json!({"type": "object", "properties": {}}));
    assert_eq!(
        wire[1]["parameters"],
        json!({"type": "object", "properties": {"x": {"type": "string"}}})
    );
    assert_eq!(wire[2]["parameters"], json!({"type": "object", "properties": {}}));
    let error = convert_tools(&[tool("s", "", json!({"type": "string"}))], None).unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidRequest);
}

#[test]
fn request_body_shape_and_determinism() {
    let mut options = options();
    options.session_id = Some("session-1".into());
    options.temperature = Some(0.2);
    options.max_tokens = Some(100_000);
    options.reasoning = Some(ReasoningLevel::High);
    options.cache_retention = CacheRetention::Long;
    options.provider_options.insert("serviceTier".into(), json!("flex"));
    options.provider_options.insert("parallelToolCalls".into(), json!(true));
    let context = Context {
        system_prompt: Some("Be brief.".into()),
        messages: vec![Message::user("Weather in Lisbon?")],
        tools: vec![tool(
            "get_weather",
            "Weather",
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        )],
    };
    let request = build_request(&model(), &context, &options, None).unwrap();
    assert_eq!(request.http.url, "https://api.openai.com/v1/responses");
    let expected = json!({
        "model": "gpt-5.4",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Lisbon?"}]}
        ],
        "stream": true,
        "prompt_cache_key": "session-1",
        "prompt_cache_retention": "24h",
        "store": false,
        "max_output_tokens": 8192,
        "temperature": 0.2,
        "service_tier": "flex",
        "tools": [{"type": "function", "name": "get_weather", "description": "Weather",
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false},
                   "strict": true}],
        "parallel_tool_calls": true,
        "reasoning": {"effort": "high", "summary": "auto"},
        "include": ["reasoning.encrypted_content"]
    });
    assert_eq!(sent_body(&request), expected);
    let first = request.http.body.to_vec();
    let second = build_request(&model(), &context, &options, None).unwrap().http.body;
    assert_eq!(first, second);
    // Key order is the insertion order, not alphabetical.
    let text = String::from_utf8(first).unwrap();
    assert!(text.find("\"model\"").unwrap() < text.find("\"input\"").unwrap());
    assert!(text.find("\"input\"").unwrap() < text.find("\"stream\"").unwrap());
}

#[test]
fn reasoning_effort_mapping() {
    let map = |pairs: &[(&str, Option<&str>)]| -> BTreeMap<String, Option<String>> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned))).collect()
    };
    assert_eq!(map_effort(ReasoningLevel::Low, &map(&[])).as_deref(), Some("low"));
    assert_eq!(map_effort(ReasoningLevel::Max, &map(&[])).as_deref(), Some("high"));
    assert_eq!(
        map_effort(ReasoningLevel::Xhigh, &map(&[("xhigh", Some("xhigh"))])).as_deref(),
        Some("xhigh")
    );
    assert_eq!(map_effort(ReasoningLevel::Minimal, &map(&[("minimal", None)])), None);
    assert_eq!(map_effort(ReasoningLevel::Low, &map(&[("low", None)])).as_deref(), Some("minimal"));

    let context = Context { messages: vec![Message::user("hi")], ..Context::default() };
    // Reasoning model without a requested level: effort "none" (OpenClaw), no include.
    let b = body(&model(), &context, &options());
    assert_eq!(b["reasoning"], json!({"effort": "none"}));
    assert!(b.get("include").is_none());
    let mut m = model();
    m.compat = Some(json!({"thinkingLevelMap": {"off": null}}));
    assert!(body(&m, &context, &options()).get("reasoning").is_none());
    // Only a summary requested: medium.
    let mut o = options();
    o.provider_options.insert("reasoningSummary".into(), json!("detailed"));
    assert_eq!(
        body(&model(), &context, &o)["reasoning"],
        json!({"effort": "medium", "summary": "detailed"})
    );
    // Non-reasoning model: nothing; system role.
    let mut plain = model();
    plain.reasoning = false;
    let ctx = Context { system_prompt: Some("S".into()), ..context };
    let b = body(&plain, &ctx, &o);
    assert!(b.get("reasoning").is_none());
    assert_eq!(b["input"][0]["role"], json!("system"));
}

#[test]
fn headers_auth_session_and_user_headers_last() {
    let mut m = model();
    m.headers.insert("X-Model".into(), "m".into());
    m.headers.insert("accept".into(), "application/json".into());
    let mut o = options();
    o.session_id = Some("sess".into());
    o.headers.insert("X-Model".into(), "user".into());
    let headers = build_headers(&m, &o, &OpenAiResponsesCompat::default()).unwrap();
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    assert_eq!(get("authorization"), Some("Bearer test-key"));
    assert_eq!(get("content-type"), Some("application/json"));
    assert_eq!(get("accept"), Some("application/json"));
    assert_eq!(get("session_id"), Some("sess"));
    assert_eq!(get("x-client-request-id"), Some("sess"));
    assert_eq!(get("x-model"), Some("user"));
    assert_eq!(headers.get_all("x-model").iter().count(), 1);

    o.cache_retention = CacheRetention::None;
    let headers = build_headers(&m, &o, &OpenAiResponsesCompat::default()).unwrap();
    assert!(!headers.contains_key("session_id") && !headers.contains_key("x-client-request-id"));
    o.cache_retention = CacheRetention::Short;
    let compat =
        OpenAiResponsesCompat { send_session_id_header: Some(false), ..Default::default() };
    let headers = build_headers(&m, &o, &compat).unwrap();
    assert!(!headers.contains_key("session_id"));
    assert!(headers.contains_key("x-client-request-id"));

    let error = build_headers(&m, &StreamOptions::default(), &compat).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Auth);
    assert_eq!(error.message, "No API key for provider: openai");
    // A caller-supplied authorization header is enough.
    let mut custom = StreamOptions::default();
    custom.headers.insert("Authorization".into(), "Bearer other".into());
    assert!(build_headers(&m, &custom, &compat).is_ok());
    // The key never shows in Debug output.
    let request = build_request(&m, &Context::default(), &options(), None).unwrap();
    assert!(!format!("{request:?}").contains("test-key"));
}

#[test]
fn prompt_cache_key_is_clamped_and_retention_none_disables_it() {
    let context = Context::default();
    let mut o = options();
    o.prompt_cache_key = Some("k".repeat(70) + "é");
    o.session_id = Some("s".into());
    let b = body(&model(), &context, &o);
    assert_eq!(b["prompt_cache_key"].as_str().unwrap().chars().count(), 64);
    assert!(b.get("prompt_cache_retention").is_none());
    o.cache_retention = CacheRetention::None;
    let b = body(&model(), &context, &o);
    assert!(b.get("prompt_cache_key").is_none());
}

#[test]
fn tool_round_trip_replay_splits_composite_ids() {
    let m = model();
    let context = Context {
        messages: vec![
            Message::user("Weather?"),
            assistant(&m, vec![call("call_x|fc_y", "get_weather", json!({"city": "Lisbon"}))]),
            result("call_x|fc_y", "get_weather", "17°C"),
        ],
        ..Context::default()
    };
    let input = &body(&m, &context, &options())["input"];
    assert_eq!(
        input[1],
        json!({"type": "function_call", "call_id": "call_x", "name": "get_weather", "arguments": "{\"city\":\"Lisbon\"}"})
    );
    assert_eq!(
        input[2],
        json!({"type": "function_call_output", "call_id": "call_x", "output": "17°C"})
    );
    // With item ids replayed, the same model gets `id: fc_y`.
    let mut replay = m.clone();
    replay.compat = Some(json!({"replayResponsesItemIds": true}));
    let context = Context {
        messages: context
            .messages
            .iter()
            .map(|msg| match msg {
                Message::Assistant(a) => assistant(&replay, a.content.clone()),
                other => other.clone(),
            })
            .collect(),
        ..Context::default()
    };
    let input = &body(&replay, &context, &options())["input"];
    assert_eq!(input[1]["id"], json!("fc_y"));
    assert_eq!(input[1]["call_id"], json!("call_x"));
}

#[test]
fn reasoning_items_replay_for_the_same_model_only_with_a_following_item() {
    let m = model();
    let reasoning = r#"{"id":"rs_1","type":"reasoning","encrypted_content":"gAAAA-B","summary":[{"type":"summary_text","text":"Think."}]}"#;
    let thinking = |sig: &str| {
        AssistantContent::Thinking(ThinkingContent {
            thinking: "Think.".into(),
            thinking_signature: Some(sig.into()),
            redacted: false,
        })
    };
    let text = |t: &str, sig: Option<&str>| {
        AssistantContent::Text(TextContent {
            text: t.into(),
            text_signature: sig.map(str::to_owned),
        })
    };
    let context = Context {
        messages: vec![
            Message::user("Q1"),
            // Reasoning alone: never sent without its following item.
            assistant(&m, vec![thinking(reasoning)]),
            Message::user("Q2"),
            assistant(
                &m,
                vec![
                    thinking(reasoning),
                    text("Answer", Some(r#"{"v":1,"id":"msg_real","phase":"final_answer"}"#)),
                    call("call_1|fc_1", "f", json!({})),
                ],
            ),
            result("call_1|fc_1", "f", "ok"),
        ],
        ..Context::default()
    };
    let input = body(&m, &context, &options())["input"].as_array().unwrap().clone();
    let types: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["message", "message", "reasoning", "message", "function_call", "function_call_output"]
    );
    assert_eq!(
        input[2],
        json!({"type": "reasoning", "encrypted_content": "gAAAA-B", "summary": [{"type": "summary_text", "text": "Think."}]})
    );
    assert_eq!(
        input[3],
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Answer", "annotations": []}],
               "status": "completed", "id": "msg_real", "phase": "final_answer"})
    );

    // Without a preceding reasoning item the real id is not replayed (fallback id).
    let context = Context {
        messages: vec![Message::user("Q"), assistant(&m, vec![text("A", Some("msg_legacy"))])],
        ..Context::default()
    };
    assert_eq!(body(&m, &context, &options())["input"][1]["id"], json!("msg_1"));

    // Another model: thinking becomes text (llm-core's transform), no reasoning item.
    let mut other = m.clone();
    other.id = "gpt-4.1".into();
    let context = Context {
        messages: vec![
            Message::user("Q"),
            assistant(&other, vec![thinking(reasoning), text("A", Some("msg_z"))]),
        ],
        ..Context::default()
    };
    let input = body(&m, &context, &options())["input"].as_array().unwrap().clone();
    assert!(input.iter().all(|i| i["type"] != json!("reasoning")));
    assert_eq!(input[1]["content"][0]["text"], json!("Think."));
}

#[test]
fn cross_provider_ids_are_normalized_injectively() {
    let m = model();
    let foreign = Model {
        id: "claude-x".into(),
        api: "anthropic-messages".into(),
        provider: "anthropic".into(),
        ..Model::default()
    };
    let long = format!("call_abc|fc_very+long/{}", "x".repeat(80));
    let context = Context {
        messages: vec![
            Message::user("Q"),
            assistant(
                &foreign,
                vec![
                    call("toolu_01$weird id", "a", json!({})),
                    call(&long, "b", json!({})),
                    call("call_abc|fc_other", "c", json!({})),
                ],
            ),
            result("toolu_01$weird id", "a", "1"),
            result(&long, "b", "2"),
            result("call_abc|fc_other", "c", "3"),
        ],
        ..Context::default()
    };
    let input = body(&m, &context, &options())["input"].as_array().unwrap().clone();
    let calls: Vec<&str> = input
        .iter()
        .filter(|i| i["type"] == json!("function_call"))
        .map(|i| i["call_id"].as_str().unwrap())
        .collect();
    let outputs: Vec<&str> = input
        .iter()
        .filter(|i| i["type"] == json!("function_call_output"))
        .map(|i| i["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(calls, outputs);
    assert_eq!(calls[1], "call_abc");
    assert_ne!(calls[1], calls[2], "two source ids never share a wire id");
    for id in &calls {
        assert!(
            id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "{id}"
        );
    }
}

#[test]
fn images_tool_results_and_orphans() {
    let mut m = model();
    m.input = vec![llm_core::InputModality::Text, llm_core::InputModality::Image];
    let image = ImageContent { data: "iVBORw0KGgo=".into(), mime_type: "image/png".into() };
    let context = Context {
        messages: vec![
            Message::User(UserMessage {
                content: UserMessageContent::Blocks(vec![
                    UserContent::text("Look"),
                    UserContent::Image(image.clone()),
                ]),
                timestamp: 0,
            }),
            assistant(&m, vec![call("call_1", "shot", json!({}))]),
            Message::ToolResult(ToolResultMessage {
                tool_call_id: "call_1".into(),
                tool_name: "shot".into(),
                content: vec![UserContent::text("done"), UserContent::Image(image)],
                details: None,
                is_error: false,
                timestamp: 0,
            }),
            // A result whose call is not in the transcript.
            result("call_missing", "x", "orphan"),
        ],
        ..Context::default()
    };
    let input = body(&m, &context, &options())["input"].as_array().unwrap().clone();
    assert_eq!(
        input[0]["content"][1],
        json!({"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,iVBORw0KGgo="})
    );
    assert_eq!(input[2]["output"][0], json!({"type": "input_text", "text": "done"}));
    assert_eq!(input[2]["output"][1]["type"], json!("input_image"));
    assert_eq!(input.len(), 3, "the orphan result is dropped");
}

#[test]
fn tool_choice() {
    let context = Context {
        tools: vec![tool("a", "", json!({"type": "object", "properties": {}}))],
        ..Context::default()
    };
    let with = |choice: ToolChoice, ctx: &Context| {
        let mut o = options();
        o.tool_choice = Some(choice);
        build_request(&model(), ctx, &o, None).map(|r| sent_body(&r))
    };
    assert_eq!(with(ToolChoice::Auto, &context).unwrap()["tool_choice"], json!("auto"));
    assert_eq!(with(ToolChoice::Required, &context).unwrap()["tool_choice"], json!("required"));
    assert_eq!(
        with(ToolChoice::Tool("a".into()), &context).unwrap()["tool_choice"],
        json!({"type": "function", "name": "a"})
    );
    assert_eq!(
        with(ToolChoice::Tool("zz".into()), &context).unwrap_err().kind,
        ErrorKind::InvalidRequest
    );
    let empty = Context::default();
    assert!(with(ToolChoice::Auto, &empty).unwrap().get("tool_choice").is_none());
    assert!(with(ToolChoice::Required, &empty).is_err());
}

#[test]
fn compat_parsing() {
    let mut m = model();
    m.compat = Some(json!({"strictTools": true, "sendSessionIdHeader": false, "unknownKey": 1}));
    let compat = parse_compat(&m).unwrap();
    assert_eq!(compat.strict_tools, Some(true));
    assert_eq!(compat.send_session_id_header, Some(false));
    m.compat = Some(json!({"strictTools": "yes"}));
    assert_eq!(parse_compat(&m).unwrap_err().kind, ErrorKind::InvalidRequest);
}

#[test]
fn opaque_items_round_trip_to_the_same_model_and_are_dropped_for_others() {
    use llm_core::ProviderContent;
    let m = model();
    let wire = json!([
        {"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":"oslo"}},
        {"id":"apc_1","type":"apply_patch_call","call_id":"call_P","status":"completed","operation":{"type":"update_file","path":"a.txt","diff":"@@\n-a\n+b\n"}}
    ]);
    let content: Vec<AssistantContent> = wire
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            AssistantContent::ProviderContent(ProviderContent {
                wire_type: item["type"].as_str().unwrap().to_owned(),
                data: item.clone(),
            })
        })
        .collect();
    let context = |producer: &Model| Context {
        messages: vec![
            Message::user("q"),
            Message::Assistant(Box::new(AssistantMessage {
                stop_reason: StopReason::Stop,
                ..match assistant(producer, content.clone()) {
                    Message::Assistant(a) => *a,
                    _ => unreachable!(),
                }
            })),
            Message::user("next"),
        ],
        ..Context::default()
    };
    let input = body(&m, &context(&m), &options())["input"].clone();
    assert_eq!(input[1], wire[0]);
    assert_eq!(input[2], wire[1]);
    assert_eq!(input[1].to_string(), wire[0].to_string(), "byte for byte");
    assert_eq!(input.as_array().unwrap().len(), 4);

    let mut other = m.clone();
    other.id = "gpt-4.1".into();
    let input = body(&m, &context(&other), &options())["input"].clone();
    assert_eq!(input.as_array().unwrap().len(), 2, "{input}");
    assert!(!input.to_string().contains("apply_patch_call"));
}

fn person() -> llm_core::OutputFormat {
    llm_core::OutputFormat::new(
        "person",
        json!({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}),
    )
}

#[test]
fn an_output_format_is_a_strict_text_format() {
    let strict = StreamOptions { output: Some(person()), ..options() };
    let body = sent_body(&build_request(&model(), &Context::default(), &strict, None).unwrap());
    assert_eq!(
        body["text"],
        json!({"format": {
            "type": "json_schema",
            "name": "person",
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
    let body = sent_body(&build_request(&model(), &Context::default(), &loose, None).unwrap());
    assert_eq!(body["text"]["format"]["schema"], person().schema);
    assert_eq!(body["text"]["format"]["strict"], json!(false));
}

#[test]
fn a_model_without_structured_output_fails_before_any_request() {
    let m = Model { id: "gpt-4-turbo".into(), ..model() };
    let strict = StreamOptions { output: Some(person()), ..options() };
    let error = build_request(&m, &Context::default(), &strict, None).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Unsupported);
}

#[test]
fn provider_options_are_typed_and_a_mistyped_one_is_an_invalid_request_naming_it() {
    let mut m = model();
    m.reasoning = true;
    let context = Context {
        tools: vec![tool("read", "Read", json!({"type": "object", "properties": {}}))],
        ..Context::default()
    };
    let mut o = options();
    o.provider_options.insert("builtinTools".into(), json!([{"type": "web_search"}]));
    o.provider_options.insert("reasoningSummary".into(), Value::Null);
    o.provider_options.insert("serviceTier".into(), json!("flex"));
    let b = body(&m, &context, &o);
    assert_eq!(b.get("service_tier"), Some(&json!("flex")));
    let tools = b.get("tools").and_then(Value::as_array).unwrap();
    assert_eq!(tools.last(), Some(&json!({"type": "web_search"})));
    let reasoning = b.get("reasoning").unwrap();
    assert!(reasoning.get("summary").is_none(), "null asks for no summary: {reasoning}");
    for (key, value) in [
        ("builtinTools", json!(["web_search"])),
        ("parallelToolCalls", json!("yes")),
        ("reasoningSummary", json!(1)),
        ("strictTools", json!({})),
    ] {
        let mut o = options();
        o.provider_options.insert(key.into(), value);
        let e = build_request(&m, &context, &o, None).unwrap_err();
        assert_eq!((e.kind, e.retryable), (ErrorKind::InvalidRequest, false), "{key}");
        let prefix = format!("Invalid Responses provider option: {key}: ");
        assert!(e.message.starts_with(&prefix), "{}", e.message);
    }
}
