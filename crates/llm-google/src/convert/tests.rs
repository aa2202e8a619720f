#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use llm_core::{
    ApiKey, AssistantContent, AssistantMessage, ImageContent, InputModality, StopReason,
    TextContent, ThinkingContent, ToolCall, ToolResultMessage, UserMessage, UserMessageContent,
};
use serde_json::json;

use super::*;

fn model(id: &str) -> Model {
    Model {
        id: id.into(),
        api: "google-generative-ai".into(),
        provider: "google".into(),
        input: vec![InputModality::Text, InputModality::Image],
        reasoning: true,
        max_tokens: 8192,
        ..Model::default()
    }
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

fn call(id: &str, name: &str, args: Value, sig: Option<&str>) -> AssistantContent {
    AssistantContent::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args,
        thought_signature: sig.map(str::to_owned),
        arguments_incomplete: false,
    })
}

fn result(id: &str, name: &str, content: Vec<UserContent>, is_error: bool) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: name.into(),
        content,
        details: None,
        is_error,
        timestamp: 0,
    })
}

fn image(data: &str) -> UserContent {
    UserContent::Image(ImageContent { data: data.into(), mime_type: "image/png".into() })
}

fn body(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    let compat = GoogleCompat::from_model(model).unwrap();
    let extra = GoogleOptions::read(options).unwrap();
    build_body(model, context, options, &compat, &extra)
}

fn weather_tool() -> Tool {
    Tool {
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }
}

#[test]
fn request_shape_and_determinism() {
    let m = model("gemini-2.5-flash");
    let context = Context {
        system_prompt: Some("Be brief.".into()),
        messages: vec![Message::user("Weather in Lisbon?")],
        tools: vec![weather_tool()],
    };
    let options = StreamOptions {
        temperature: Some(0.2),
        max_tokens: Some(1024),
        stop: vec!["END".into()],
        tool_choice: Some(ToolChoice::Auto),
        reasoning: Some(ReasoningLevel::Low),
        ..StreamOptions::default()
    };
    let b = body(&m, &context, &options);
    assert_eq!(
        b,
        json!({
            "contents": [{"role": "user", "parts": [{"text": "Weather in Lisbon?"}]}],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "tools": [{"functionDeclarations": [{"name": "get_weather", "description": "Weather for a city",
                "parametersJsonSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
            "generationConfig": {"temperature": 0.2, "maxOutputTokens": 1024, "stopSequences": ["END"],
                "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 2048}}
        })
    );
    // Identical input, identical bytes, key order included.
    let a = serde_json::to_string(&body(&m, &context, &options)).unwrap();
    let b = serde_json::to_string(&body(&m, &context, &options)).unwrap();
    assert_eq!(a, b);
    assert!(a.starts_with("{\"contents\":"));
}

#[test]
fn tool_choice_only_with_tools_and_named_tool() {
    let m = model("gemini-2.5-flash");
    let mut context = Context { messages: vec![Message::user("hi")], ..Context::default() };
    let options = StreamOptions {
        tool_choice: Some(ToolChoice::Tool("get_weather".into())),
        ..StreamOptions::default()
    };
    assert!(body(&m, &context, &options).get("toolConfig").is_none());
    context.tools.push(weather_tool());
    assert_eq!(
        body(&m, &context, &options)["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}})
    );
}

#[test]
fn use_parameters_sends_sanitized_openapi_schema() {
    let mut m = model("gemini-2.5-flash");
    m.compat = Some(json!({"useParameters": true}));
    let tool = Tool {
        name: "t".into(),
        description: "d".into(),
        parameters: json!({"$schema": "x", "type": "object", "properties": {"a": {"type": ["string", "null"]}}, "additionalProperties": false}),
    };
    let none = Tool {
        name: "n".into(),
        description: "d".into(),
        parameters: json!({"type": "object", "properties": {}}),
    };
    let context = Context {
        messages: vec![Message::user("hi")],
        tools: vec![tool, none],
        ..Context::default()
    };
    let b = body(&m, &context, &StreamOptions::default());
    assert_eq!(
        b["tools"],
        json!([{"functionDeclarations": [
            {"name": "t", "description": "d", "parameters": {"type": "object", "properties": {"a": {"type": "string", "nullable": true}}}},
            {"name": "n", "description": "d"}
        ]}])
    );
}

#[test]
fn same_model_replay_keeps_signatures_byte_for_byte() {
    let m = model("gemini-2.5-flash");
    let context = Context {
        messages: vec![
            Message::user("Weather?"),
            assistant(
                &m,
                vec![
                    AssistantContent::Thinking(ThinkingContent {
                        thinking: "plan".into(),
                        thinking_signature: Some("VGhpbms=".into()),
                        redacted: false,
                    }),
                    AssistantContent::Text(TextContent {
                        text: "Checking.".into(),
                        text_signature: Some("VGV4dA==".into()),
                    }),
                    call("c1", "get_weather", json!({"city": "Lisbon"}), Some("CiQBExampleSig==")),
                    AssistantContent::Text(TextContent {
                        text: String::new(),
                        text_signature: Some("RW5k".into()),
                    }),
                ],
            ),
            result("c1", "get_weather", vec![UserContent::text("17C")], false),
        ],
        ..Context::default()
    };
    let b = body(&m, &context, &StreamOptions::default());
    assert_eq!(
        b["contents"][1],
        json!({"role": "model", "parts": [
            {"thought": true, "text": "plan", "thoughtSignature": "VGhpbms="},
            {"text": "Checking.", "thoughtSignature": "VGV4dA=="},
            {"functionCall": {"name": "get_weather", "args": {"city": "Lisbon"}}, "thoughtSignature": "CiQBExampleSig=="},
            {"text": "", "thoughtSignature": "RW5k"}
        ]})
    );
    assert_eq!(
        b["contents"][2],
        json!({"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "17C"}}}]})
    );
}

#[test]
fn invalid_signature_dropped_openclaw_40() {
    let m = model("gemini-2.5-flash");
    let context = Context {
        messages: vec![
            Message::user("x"),
            assistant(&m, vec![call("c1", "f", json!({}), Some("not base64!"))]),
            result("c1", "f", vec![UserContent::text("ok")], false),
        ],
        ..Context::default()
    };
    let b = body(&m, &context, &StreamOptions::default());
    assert_eq!(b["contents"][1]["parts"][0], json!({"functionCall": {"name": "f", "args": {}}}));
}

#[test]
fn error_result_shape_openclaw_41() {
    let m = model("gemini-2.5-flash");
    let context = Context {
        messages: vec![
            Message::user("x"),
            assistant(&m, vec![call("c1", "f", json!({}), None), call("c2", "g", json!({}), None)]),
            result("c1", "f", vec![UserContent::text("boom"), UserContent::text("twice")], true),
            result("c2", "g", vec![], false),
        ],
        ..Context::default()
    };
    let b = body(&m, &context, &StreamOptions::default());
    assert_eq!(
        b["contents"][2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "f", "response": {"error": "boom\ntwice"}}},
            {"functionResponse": {"name": "g", "response": {"output": ""}}}
        ]})
    );
}

fn three_results_with_images(m: &Model) -> Context {
    Context {
        messages: vec![
            Message::user("shots"),
            assistant(
                m,
                vec![
                    call("c1", "shot", json!({}), None),
                    call("c2", "shot", json!({}), None),
                    call("c3", "shot", json!({}), None),
                ],
            ),
            result("c1", "shot", vec![image("AAAA")], false),
            result("c2", "shot", vec![UserContent::text("no image")], false),
            result(
                "c3",
                "shot",
                vec![UserContent::text("two"), image("BBBB"), image("CCCC")],
                false,
            ),
            Message::user("thanks"),
        ],
        ..Context::default()
    }
}

#[test]
fn images_held_back_for_gemini_2_openclaw_39() {
    let m = model("gemini-2.5-pro");
    let b = body(&m, &three_results_with_images(&m), &StreamOptions::default());
    let contents = b["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 6, "{contents:#?}");
    assert_eq!(
        contents[2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "shot", "response": {"output": "(see attached image)"}}},
            {"functionResponse": {"name": "shot", "response": {"output": "no image"}}},
            {"functionResponse": {"name": "shot", "response": {"output": "two"}}}
        ]})
    );
    assert_eq!(
        contents[3],
        json!({"role": "user", "parts": [{"text": "Tool result image:"}, {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]})
    );
    assert_eq!(
        contents[4],
        json!({"role": "user", "parts": [{"text": "Tool result image:"},
            {"inlineData": {"mimeType": "image/png", "data": "BBBB"}}, {"inlineData": {"mimeType": "image/png", "data": "CCCC"}}]})
    );
    assert_eq!(contents[5], json!({"role": "user", "parts": [{"text": "thanks"}]}));
}

#[test]
fn images_nested_for_gemini_3_with_ids_openclaw_39() {
    let m = model("gemini-3-pro-preview");
    let b = body(&m, &three_results_with_images(&m), &StreamOptions::default());
    let contents = b["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 4);
    assert_eq!(
        contents[2]["parts"][0],
        json!({"functionResponse": {"name": "shot", "response": {"output": "(see attached image)"},
            "parts": [{"inlineData": {"mimeType": "image/png", "data": "AAAA"}}], "id": "c1"}})
    );
    // Same model, no signature on the first call: Gemini 3 gets the documented sentinel.
    assert_eq!(contents[1]["parts"][0]["thoughtSignature"], SKIP_SIGNATURE_SENTINEL);
    assert!(contents[1]["parts"][1].get("thoughtSignature").is_none());
    assert_eq!(contents[1]["parts"][0]["functionCall"]["id"], "c1");
}

#[test]
fn cross_provider_replay_thinking_to_text_signatures_dropped_ids_normalized() {
    let m = model("gemini-3-pro-preview");
    let foreign = AssistantMessage {
        content: vec![
            AssistantContent::Thinking(ThinkingContent {
                thinking: "I should call it".into(),
                thinking_signature: Some("EqQBCkYIBxgCKkA=".into()),
                redacted: false,
            }),
            AssistantContent::Thinking(ThinkingContent {
                thinking: String::new(),
                thinking_signature: Some("opaque".into()),
                redacted: true,
            }),
            call("call_abc|fc_very+long/x", "f", json!({"a": 1}), Some("c2ln")),
        ],
        api: "openai-responses".into(),
        provider: "openai".into(),
        model: "gpt-5".into(),
        stop_reason: StopReason::ToolUse,
        ..AssistantMessage::default()
    };
    let context = Context {
        messages: vec![
            Message::user("go"),
            Message::Assistant(Box::new(foreign)),
            result("call_abc|fc_very+long/x", "f", vec![UserContent::text("done")], false),
        ],
        ..Context::default()
    };
    let b = body(&m, &context, &StreamOptions::default());
    let parts = &b["contents"][1]["parts"];
    assert_eq!(parts[0], json!({"text": "I should call it"}));
    let fc = &parts[1];
    assert_eq!(fc["thoughtSignature"], SKIP_SIGNATURE_SENTINEL);
    let id = fc["functionCall"]["id"].as_str().unwrap();
    assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'), "{id}");
    assert_eq!(b["contents"][2]["parts"][0]["functionResponse"]["id"], id);
    assert_eq!(parts.as_array().unwrap().len(), 2);
}

#[test]
fn errored_turns_not_replayed_and_orphans_get_results() {
    let m = model("gemini-2.5-flash");
    let mut errored = AssistantMessage {
        content: vec![AssistantContent::Text(TextContent {
            text: "partial".into(),
            text_signature: None,
        })],
        api: m.api.clone(),
        provider: m.provider.clone(),
        model: m.id.clone(),
        ..AssistantMessage::default()
    };
    errored.stop_reason = StopReason::Error;
    let context = Context {
        messages: vec![
            Message::user("a"),
            Message::Assistant(Box::new(errored)),
            Message::user("b"),
            assistant(&m, vec![call("c1", "f", json!({}), None)]),
            Message::user("c"),
        ],
        ..Context::default()
    };
    let b = body(&m, &context, &StreamOptions::default());
    let contents = b["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 5);
    assert_eq!(
        contents[3]["parts"][0]["functionResponse"],
        json!({"name": "f", "response": {"error": "No result provided"}})
    );
}

#[test]
fn non_vision_model_gets_placeholders_and_empty_user_skipped() {
    let mut m = model("gemini-2.5-flash");
    m.input = vec![InputModality::Text];
    let context = Context {
        messages: vec![
            Message::User(UserMessage {
                content: UserMessageContent::Blocks(vec![image("AAAA")]),
                timestamp: 0,
            }),
            Message::User(UserMessage {
                content: UserMessageContent::Text(String::new()),
                timestamp: 0,
            }),
        ],
        ..Context::default()
    };
    let b = body(&m, &context, &StreamOptions::default());
    assert_eq!(
        b["contents"],
        json!([{"role": "user", "parts": [{"text": "(image omitted: model does not support images)"}]}])
    );
}

#[test]
fn headers_auth_and_user_override() {
    let mut m = model("gemini-2.5-flash");
    m.headers.insert("X-Model".into(), "m".into());
    let mut options =
        StreamOptions { api_key: Some(ApiKey::new("k-123")), ..StreamOptions::default() };
    options.headers.insert("X-Goog-Api-Key".into(), "override".into());
    options.headers.insert("x-extra".into(), "1".into());
    let context = Context { messages: vec![Message::user("hi")], ..Context::default() };
    let r = build_request(&m, &context, &options, &Endpoint::GenerativeLanguage).unwrap();
    let pairs: Vec<(&str, &str)> =
        r.headers.iter().map(|(k, v)| (k.as_str(), v.to_str().unwrap())).collect();
    assert_eq!(
        pairs,
        [
            ("content-type", "application/json"),
            ("x-goog-api-key", "override"),
            ("x-model", "m"),
            ("x-extra", "1"),
        ]
    );
    assert!(!r.url.contains("key="));
    assert!(!format!("{r:?}").contains("override"));
    let vertex = Endpoint::Vertex { project: "p".into(), location: "global".into() };
    options.headers.clear();
    let r = build_request(&m, &context, &options, &vertex).unwrap();
    assert_eq!(r.headers.get("authorization").unwrap(), "Bearer k-123");
    options.api_key = None;
    let e = build_request(&m, &context, &options, &Endpoint::GenerativeLanguage).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth);
}

#[test]
fn signature_validation() {
    assert!(is_valid_signature("CiQBExampleSig=="));
    assert!(is_valid_signature("abcd"));
    assert!(!is_valid_signature("abc"));
    assert!(!is_valid_signature("ab-_"));
    assert!(!is_valid_signature("a==="));
    assert!(!is_valid_signature(""));
    assert!(!is_valid_signature("ab=c"));
}

#[test]
fn urls() {
    let mut model = Model { id: "gemini-2.5-flash".into(), ..Model::default() };
    assert_eq!(
        endpoint_url(&model, &Endpoint::GenerativeLanguage),
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    let vertex = Endpoint::Vertex { project: "p1".into(), location: "us-central1".into() };
    assert_eq!(
        endpoint_url(&model, &vertex),
        "https://us-central1-aiplatform.googleapis.com/v1/projects/p1/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    let global = Endpoint::Vertex { project: "p1".into(), location: "global".into() };
    assert!(
        endpoint_url(&model, &global)
            .starts_with("https://aiplatform.googleapis.com/v1/projects/p1/locations/global/")
    );
    model.base_url = "http://127.0.0.1:9/".into();
    assert_eq!(
        endpoint_url(&model, &Endpoint::GenerativeLanguage),
        "http://127.0.0.1:9/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
}

#[test]
fn thinking_configs() {
    let mut options = StreamOptions::default();
    let model = |id: &str| Model { id: id.into(), reasoning: true, ..Model::default() };
    assert_eq!(
        thinking_config(
            &model("gemini-2.5-flash"),
            &options,
            &GoogleOptions::read(&options).unwrap()
        ),
        Some(json!({"thinkingBudget": 0}))
    );
    assert_eq!(
        thinking_config(
            &model("gemini-2.5-pro"),
            &options,
            &GoogleOptions::read(&options).unwrap()
        ),
        None
    );
    assert_eq!(
        thinking_config(
            &model("gemini-3-pro-preview"),
            &options,
            &GoogleOptions::read(&options).unwrap()
        ),
        Some(json!({"thinkingLevel": "LOW"}))
    );
    assert_eq!(
        thinking_config(
            &model("gemini-3-flash"),
            &options,
            &GoogleOptions::read(&options).unwrap()
        ),
        Some(json!({"thinkingLevel": "MINIMAL"}))
    );
    options.reasoning = Some(ReasoningLevel::Medium);
    assert_eq!(
        thinking_config(
            &model("gemini-2.5-flash"),
            &options,
            &GoogleOptions::read(&options).unwrap()
        ),
        Some(json!({"includeThoughts": true, "thinkingBudget": 8192}))
    );
    assert_eq!(
        thinking_config(
            &model("gemini-3-pro-preview"),
            &options,
            &GoogleOptions::read(&options).unwrap()
        ),
        Some(json!({"includeThoughts": true, "thinkingLevel": "HIGH"}))
    );
    assert_eq!(
        thinking_config(
            &model("gemini-3-flash"),
            &options,
            &GoogleOptions::read(&options).unwrap()
        ),
        Some(json!({"includeThoughts": true, "thinkingLevel": "MEDIUM"}))
    );
    options.provider_options.insert("thinkingBudget".into(), json!(-1));
    assert_eq!(
        thinking_config(
            &model("gemini-2.5-flash"),
            &options,
            &GoogleOptions::read(&options).unwrap()
        ),
        Some(json!({"includeThoughts": true, "thinkingBudget": -1}))
    );
    let plain = Model { id: "gemini-2.0-flash".into(), ..Model::default() };
    assert_eq!(thinking_config(&plain, &options, &GoogleOptions::read(&options).unwrap()), None);
}

fn person() -> llm_core::OutputFormat {
    llm_core::OutputFormat::new(
        "person",
        json!({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}),
    )
}

#[test]
fn an_output_format_is_a_json_mime_type_and_the_schema_as_given() {
    let options = StreamOptions { output: Some(person()), ..StreamOptions::default() };
    let b = body(&model("gemini-2.5-flash"), &Context::default(), &options);
    assert_eq!(b["generationConfig"]["responseMimeType"], json!("application/json"));
    assert_eq!(b["generationConfig"]["responseJsonSchema"], person().schema);
    assert!(b["generationConfig"].get("responseSchema").is_none());
}

#[test]
fn gemini_1_5_and_2_0_take_the_schema_as_response_schema_and_need_properties() {
    let options = StreamOptions {
        api_key: Some(llm_core::ApiKey::new("k")),
        output: Some(person()),
        ..StreamOptions::default()
    };
    for id in ["gemini-1.5-pro", "gemini-2.0-flash"] {
        let b = body(&model(id), &Context::default(), &options);
        let generation = &b["generationConfig"];
        assert_eq!(generation["responseMimeType"], json!("application/json"), "{id}");
        assert_eq!(generation["responseSchema"]["properties"]["age"], json!({"type": "integer"}));
        assert!(generation.get("responseJsonSchema").is_none(), "{id}");
    }
    // `responseSchema` cannot say "an object of anything": refused, not sent loose.
    let open = StreamOptions {
        output: Some(llm_core::OutputFormat::new("any", json!({"type": "object"}))),
        ..options
    };
    let e = build_request(
        &model("gemini-2.0-flash"),
        &Context::default(),
        &open,
        &Endpoint::GenerativeLanguage,
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
    assert!(e.message.contains("responseSchema"), "{}", e.message);
}

#[test]
fn a_model_without_structured_output_fails_before_any_request() {
    let options = StreamOptions {
        api_key: Some(llm_core::ApiKey::new("k")),
        output: Some(person()),
        ..StreamOptions::default()
    };
    let e = build_request(
        &model("gemini-1.0-pro"),
        &Context::default(),
        &options,
        &Endpoint::GenerativeLanguage,
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unsupported);
    assert!(
        build_request(
            &model("gemini-2.5-pro"),
            &Context::default(),
            &options,
            &Endpoint::GenerativeLanguage
        )
        .is_ok()
    );
}

#[test]
fn stream_function_call_arguments_is_asked_for_in_the_tool_config() {
    let context = Context { tools: vec![weather_tool()], ..Context::default() };
    let with = |value: Value, choice: Option<ToolChoice>| StreamOptions {
        provider_options: [("streamFunctionCallArguments".to_owned(), value)].into(),
        tool_choice: choice,
        ..StreamOptions::default()
    };
    let b = body(&model("gemini-3-pro-preview"), &context, &with(json!(true), None));
    assert_eq!(
        b["toolConfig"],
        json!({"functionCallingConfig": {"streamFunctionCallArguments": true}})
    );
    let b = body(
        &model("gemini-3-pro-preview"),
        &context,
        &with(json!(true), Some(ToolChoice::Required)),
    );
    assert_eq!(
        b["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "streamFunctionCallArguments": true}})
    );
    let b = body(&model("gemini-3-pro-preview"), &context, &with(json!(false), None));
    assert!(b.get("toolConfig").is_none());
    let options =
        StreamOptions { api_key: Some(llm_core::ApiKey::new("k")), ..with(json!("yes"), None) };
    let e = build_request(
        &model("gemini-3-pro-preview"),
        &context,
        &options,
        &Endpoint::GenerativeLanguage,
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
}

#[test]
fn a_mistyped_provider_option_is_an_invalid_request_naming_it() {
    for (key, value) in [
        ("streamFunctionCallArguments", json!("yes")),
        ("thinkingBudget", json!("high")),
        ("thinkingLevel", json!(2)),
        ("project", json!(["p"])),
    ] {
        let options = StreamOptions {
            api_key: Some(llm_core::ApiKey::new("k")),
            provider_options: [(key.to_owned(), value)].into(),
            ..StreamOptions::default()
        };
        let e = build_request(
            &model("gemini-2.5-flash"),
            &Context::default(),
            &options,
            &Endpoint::GenerativeLanguage,
        )
        .unwrap_err();
        assert_eq!((e.kind, e.retryable), (ErrorKind::InvalidRequest, false), "{key}");
        let prefix = format!("Invalid Google provider option: {key}: ");
        assert!(e.message.starts_with(&prefix), "{}", e.message);
    }
}
