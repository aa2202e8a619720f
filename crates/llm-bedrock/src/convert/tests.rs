#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use llm_core::{
    AssistantMessage, ImageContent, StopReason, TextContent, Tool, ToolCall, ToolResultMessage,
    UserMessage,
};

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

fn model(id: &str) -> Model {
    Model {
        id: id.into(),
        api: crate::API.into(),
        provider: crate::PROVIDER.into(),
        base_url: "https://bedrock-runtime.us-east-1.amazonaws.com".into(),
        max_tokens: 64_000,
        ..Model::default()
    }
}

const SONNET45: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";

fn build(model: &Model, context: &Context, options: &StreamOptions) -> Sent {
    build_request(model, context, options, &no_env, None).unwrap()
}

/// A built request as the tests read it: the body as sent, parsed back (key order kept).
#[derive(Debug)]
struct Sent {
    url: String,
    body: Value,
    region: String,
}

fn build_request(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    env: Env<'_>,
    profile_region: Option<String>,
) -> Result<Sent, Error> {
    let unsigned = super::build_request(model, context, options, env, profile_region)?;
    Ok(Sent {
        url: unsigned.http.url,
        body: serde_json::from_slice(&unsigned.http.body).unwrap(),
        region: unsigned.region,
    })
}

fn user(text: &str) -> Message {
    Message::user(text)
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

fn call(id: &str) -> AssistantContent {
    AssistantContent::ToolCall(ToolCall {
        id: id.into(),
        name: "get_weather".into(),
        arguments: json!({"city": "Oslo"}),
        thought_signature: None,
        arguments_incomplete: false,
    })
}

fn result(id: &str, content: Vec<UserContent>, is_error: bool) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: "get_weather".into(),
        content,
        details: None,
        is_error,
        timestamp: 0,
    })
}

fn weather_tool() -> Tool {
    Tool {
        name: "get_weather".into(),
        description: "Get weather".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }
}

const PNG: &str = "iVBORw0KGgo=";

#[test]
fn text_request_shape_and_path() {
    let m = model(SONNET45);
    let context = Context {
        system_prompt: Some("You are helpful.".into()),
        messages: vec![user("Hi")],
        tools: vec![weather_tool()],
    };
    let options = StreamOptions {
        temperature: Some(0.2),
        max_tokens: Some(100),
        stop: vec!["END".into()],
        cache_retention: CacheRetention::None,
        tool_choice: Some(ToolChoice::Auto),
        ..StreamOptions::default()
    };
    let request = build(&m, &context, &options);
    assert_eq!(
        request.url,
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    );
    assert_eq!(
        request.body,
        json!({
            "messages": [{"role": "user", "content": [{"text": "Hi"}]}],
            "system": [{"text": "You are helpful."}],
            "inferenceConfig": {"maxTokens": 100, "temperature": 0.2, "stopSequences": ["END"]},
            "toolConfig": {
                "tools": [{"toolSpec": {"name": "get_weather", "description": "Get weather",
                    "inputSchema": {"json": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}}],
                "toolChoice": {"auto": {}}
            }
        })
    );
    assert!(request.body.get("model").is_none(), "the model id is in the path");
    assert_eq!(request.region, "us-east-1");
}

#[test]
fn tool_choice_variants_and_none_drops_the_config() {
    let m = model(SONNET45);
    let context =
        Context { messages: vec![user("x")], tools: vec![weather_tool()], ..Context::default() };
    let with = |choice| {
        let options = StreamOptions { tool_choice: choice, ..StreamOptions::default() };
        build(&m, &context, &options).body.get("toolConfig").cloned()
    };
    assert_eq!(with(Some(ToolChoice::Required)).unwrap()["toolChoice"], json!({"any": {}}));
    assert_eq!(
        with(Some(ToolChoice::Tool("get_weather".into()))).unwrap()["toolChoice"],
        json!({"tool": {"name": "get_weather"}})
    );
    assert!(with(None).unwrap().get("toolChoice").is_none());
    assert!(with(Some(ToolChoice::None)).is_none());
}

#[test]
fn arn_model_ids_are_percent_encoded_in_the_path() {
    let arn = "arn:aws:bedrock:us-west-2:123456789012:application-inference-profile/a1b2c3";
    let request = build(&model(arn), &Context::default(), &StreamOptions::default());
    assert!(
        request.url.ends_with(
            "/model/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Aapplication-inference-profile%2Fa1b2c3/converse-stream"
        ),
        "{}",
        request.url
    );
}

#[test]
fn tool_results_merge_into_one_user_message_with_status_image_and_cache_point() {
    let m = Model {
        input: vec![llm_core::InputModality::Text, llm_core::InputModality::Image],
        ..model(SONNET45)
    };
    let image =
        UserContent::Image(ImageContent { data: PNG.into(), mime_type: "image/png".into() });
    let context = Context {
        messages: vec![
            user("Weather?"),
            assistant(&m, vec![call("t1"), call("t2"), call("t3")]),
            result("t1", vec![UserContent::text("4°C")], false),
            result("t2", vec![UserContent::text("boom")], true),
            result("t3", vec![image], false),
        ],
        tools: vec![weather_tool()],
        ..Context::default()
    };
    let request = build(&m, &context, &StreamOptions::default());
    let messages = request.body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"toolResult": {"toolUseId": "t1", "content": [{"text": "4°C"}], "status": "success"}},
            {"toolResult": {"toolUseId": "t2", "content": [{"text": "boom"}], "status": "error"}},
            {"toolResult": {"toolUseId": "t3", "content": [{"image": {"format": "png", "source": {"bytes": PNG}}}], "status": "success"}},
            {"cachePoint": {"type": "default"}}
        ]})
    );
    assert_eq!(request.body["system"], Value::Null, "no system prompt, no system field");
}

#[test]
fn cache_retention_per_model() {
    let context = Context {
        system_prompt: Some("S".into()),
        messages: vec![user("u")],
        ..Context::default()
    };
    let body = |id: &str, retention, env: Env<'_>| {
        let options = StreamOptions { cache_retention: retention, ..StreamOptions::default() };
        build_request(&model(id), &context, &options, env, None).unwrap().body
    };
    let long = body(SONNET45, CacheRetention::Long, &no_env);
    assert_eq!(long["system"][1], json!({"cachePoint": {"type": "default", "ttl": "1h"}}));
    assert_eq!(
        long["messages"][0]["content"][1],
        json!({"cachePoint": {"type": "default", "ttl": "1h"}})
    );
    let none = body(SONNET45, CacheRetention::None, &no_env);
    assert_eq!(none["system"].as_array().unwrap().len(), 1);
    let haiku3 = body("anthropic.claude-3-haiku-20240307-v1:0", CacheRetention::Short, &no_env);
    assert_eq!(haiku3["messages"][0]["content"].as_array().unwrap().len(), 1);
    let forced = |name: &str| (name == "AWS_BEDROCK_FORCE_CACHE").then(|| "1".to_owned());
    let nova = body("amazon.nova-pro-v1:0", CacheRetention::Short, &forced);
    assert_eq!(nova["system"][1], json!({"cachePoint": {"type": "default"}}));
    let nova = body("amazon.nova-pro-v1:0", CacheRetention::Short, &no_env);
    assert_eq!(nova["system"].as_array().unwrap().len(), 1);
}

#[test]
fn unknown_image_type_fails_before_sending() {
    let m = Model {
        input: vec![llm_core::InputModality::Text, llm_core::InputModality::Image],
        ..model(SONNET45)
    };
    let bmp = UserContent::Image(ImageContent { data: PNG.into(), mime_type: "image/bmp".into() });
    let context = Context {
        messages: vec![Message::User(UserMessage {
            content: UserMessageContent::Blocks(vec![bmp]),
            timestamp: 0,
        })],
        ..Context::default()
    };
    let error = build_request(&m, &context, &StreamOptions::default(), &no_env, None).unwrap_err();
    assert_eq!(error.message, "Unknown image type: image/bmp");
    assert_eq!(error.kind, ErrorKind::InvalidRequest);
    let bad = UserContent::Image(ImageContent {
        data: "@@not base64@@".into(),
        mime_type: "image/png".into(),
    });
    let context = Context {
        messages: vec![Message::User(UserMessage {
            content: UserMessageContent::Blocks(vec![bad]),
            timestamp: 0,
        })],
        ..Context::default()
    };
    assert!(build_request(&m, &context, &StreamOptions::default(), &no_env, None).is_err());
}

#[test]
fn budget_thinking_fits_under_max_tokens() {
    let m = Model { reasoning: true, ..model("anthropic.claude-3-7-sonnet-20250219-v1:0") };
    let context = Context { messages: vec![user("x")], ..Context::default() };
    let options =
        StreamOptions { reasoning: Some(ReasoningLevel::Medium), ..StreamOptions::default() };
    let body = build(&m, &context, &options).body;
    assert_eq!(body["inferenceConfig"], json!({"maxTokens": 64000}));
    assert_eq!(
        body["additionalModelRequestFields"],
        json!({"thinking": {"type": "enabled", "budget_tokens": 8192, "display": "summarized"},
               "anthropic_beta": ["interleaved-thinking-2025-05-14"]})
    );
    let capped = StreamOptions { max_tokens: Some(1000), ..options.clone() };
    assert_eq!(build(&m, &context, &capped).body["inferenceConfig"]["maxTokens"], json!(9192));
    let gov = StreamOptions {
        provider_options: [("region".to_owned(), json!("us-gov-west-1"))].into(),
        ..options
    };
    let body = build(&m, &context, &gov).body;
    assert!(body["additionalModelRequestFields"]["thinking"].get("display").is_none());
}

#[test]
fn adaptive_thinking_omits_temperature_and_maps_effort() {
    let context = Context { messages: vec![user("x")], ..Context::default() };
    let effort = |id: &str, level| {
        let options = StreamOptions {
            reasoning: Some(level),
            temperature: Some(0.5),
            ..StreamOptions::default()
        };
        let body = build(&model(id), &context, &options).body;
        assert!(body["inferenceConfig"].get("temperature").is_none(), "{id}");
        assert_eq!(body["additionalModelRequestFields"]["thinking"]["type"], json!("adaptive"));
        body["additionalModelRequestFields"]["output_config"]["effort"].as_str().unwrap().to_owned()
    };
    assert_eq!(effort("us.anthropic.claude-sonnet-4-6-v1:0", ReasoningLevel::Max), "high");
    assert_eq!(effort("us.anthropic.claude-opus-4-6-v1:0", ReasoningLevel::Xhigh), "high");
    assert_eq!(effort("anthropic.claude-opus-4.8-v1:0", ReasoningLevel::Max), "max");
    assert_eq!(effort("anthropic.claude-opus-4.8-v1:0", ReasoningLevel::Minimal), "low");
    // Mythos Preview thinks even when not asked.
    let body =
        build(&model("us.anthropic.claude-mythos-preview"), &context, &StreamOptions::default())
            .body;
    assert_eq!(body["additionalModelRequestFields"]["output_config"]["effort"], json!("high"));
    // Non-Claude models never get reasoning fields.
    let nova = Model { reasoning: true, ..model("amazon.nova-pro-v1:0") };
    let options =
        StreamOptions { reasoning: Some(ReasoningLevel::High), ..StreamOptions::default() };
    assert!(build(&nova, &context, &options).body.get("additionalModelRequestFields").is_none());
}

#[test]
fn thinking_replay_per_target() {
    let claude = model(SONNET45);
    let thinking = |sig: Option<&str>| {
        AssistantContent::Thinking(ThinkingContent {
            thinking: "t".into(),
            thinking_signature: sig.map(str::to_owned),
            redacted: false,
        })
    };
    let replay = |m: &Model, block: AssistantContent| {
        let context = Context {
            messages: vec![
                user("q"),
                assistant(
                    m,
                    vec![
                        block,
                        AssistantContent::Text(TextContent {
                            text: "a".into(),
                            text_signature: None,
                        }),
                    ],
                ),
                user("next"),
            ],
            ..Context::default()
        };
        let options =
            StreamOptions { cache_retention: CacheRetention::None, ..StreamOptions::default() };
        build(m, &context, &options).body["messages"][1]["content"][0].clone()
    };
    assert_eq!(
        replay(&claude, thinking(Some("sig"))),
        json!({"reasoningContent": {"reasoningText": {"text": "t", "signature": "sig"}}})
    );
    assert_eq!(replay(&claude, thinking(Some(""))), json!({"text": "t"}));
    assert_eq!(replay(&claude, thinking(Some("reasoning_content"))), json!({"text": "a"}));
    let redacted = AssistantContent::Thinking(ThinkingContent {
        thinking: String::new(),
        thinking_signature: Some("QUJD".into()),
        redacted: true,
    });
    assert_eq!(replay(&claude, redacted), json!({"reasoningContent": {"redactedContent": "QUJD"}}));
    let nova = model("amazon.nova-pro-v1:0");
    assert_eq!(replay(&nova, thinking(Some("sig"))), json!({"text": "t"}));
}

#[test]
fn empty_assistant_turns_are_skipped_and_blank_text_dropped() {
    let m = model(SONNET45);
    let blank = AssistantContent::Text(TextContent { text: "  ".into(), text_signature: None });
    let context = Context {
        messages: vec![user("a"), assistant(&m, vec![blank]), user("b")],
        ..Context::default()
    };
    let options =
        StreamOptions { cache_retention: CacheRetention::None, ..StreamOptions::default() };
    let messages = build(&m, &context, &options).body["messages"].clone();
    // The empty turn is gone, and the two user messages it separated become one.
    assert_eq!(messages, json!([{"role": "user", "content": [{"text": "a"}, {"text": "b"}]}]));
}

#[test]
fn other_models_tool_call_ids_are_normalized() {
    let m = model(SONNET45);
    let other = Model {
        id: "gpt-5".into(),
        api: "openai-responses".into(),
        provider: "openai".into(),
        ..Model::default()
    };
    let context = Context {
        messages: vec![
            user("q"),
            assistant(&other, vec![call("call_abc|fc_1")]),
            result("call_abc|fc_1", vec![UserContent::text("ok")], false),
        ],
        tools: vec![weather_tool()],
        ..Context::default()
    };
    let body = build(&m, &context, &StreamOptions::default()).body;
    // Injective normalization (llm-core adds a hash suffix, OpenClaw does not).
    let id = body["messages"][1]["content"][0]["toolUse"]["toolUseId"].as_str().unwrap();
    assert!(id.starts_with("call_abc_fc_1"), "{id}");
    assert!(IdRules::ALNUM_DASH_64.accepts(id), "{id}");
    assert_eq!(body["messages"][2]["content"][0]["toolResult"]["toolUseId"], json!(id));
}

#[test]
fn endpoint_and_region_table() {
    let resolve = |base: &str, region: Option<&str>, profile: bool| {
        Endpoint::resolve(&EndpointInputs {
            base_url: base,
            configured_region: region.map(str::to_owned),
            profile_region: profile.then(|| "eu-north-1".to_owned()),
            has_profile: profile,
            fips: false,
        })
    };
    let standard = "https://bedrock-runtime.us-west-2.amazonaws.com";
    let e = resolve(standard, None, false);
    assert_eq!((e.pinned, e.region.as_str(), e.base.as_str()), (true, "us-west-2", standard));
    let e = resolve(standard, Some("eu-west-1"), false);
    assert_eq!((e.pinned, e.region.as_str()), (false, "eu-west-1"));
    assert_eq!(e.base, "https://bedrock-runtime.eu-west-1.amazonaws.com");
    let e = resolve(standard, None, true);
    assert_eq!((e.pinned, e.region.as_str()), (false, "eu-north-1"));
    let vpce = "https://vpce-1.bedrock-runtime.vpce.amazonaws.com";
    let e = resolve(vpce, None, false);
    assert_eq!((e.pinned, e.region.as_str(), e.base.as_str()), (true, "us-east-1", vpce));
    let e = resolve("https://proxy.example/bedrock/", Some("ap-south-1"), false);
    assert_eq!(
        (e.pinned, e.region.as_str(), e.base.as_str()),
        (true, "ap-south-1", "https://proxy.example/bedrock")
    );
    let e = resolve("", Some("cn-north-1"), false);
    assert_eq!(e.base, "https://bedrock-runtime.cn-north-1.amazonaws.com.cn");
    let fips = Endpoint::resolve(&EndpointInputs {
        fips: true,
        configured_region: Some("us-east-2".into()),
        ..EndpointInputs::default()
    });
    assert_eq!(fips.base, "https://bedrock-runtime-fips.us-east-2.amazonaws.com");
}

#[test]
fn region_from_env_and_option_precedence() {
    let env = |name: &str| match name {
        "AWS_REGION" => Some("eu-west-1".to_owned()),
        "AWS_DEFAULT_REGION" => Some("ap-south-1".to_owned()),
        _ => None,
    };
    let m = model(SONNET45);
    let request =
        build_request(&m, &Context::default(), &StreamOptions::default(), &env, None).unwrap();
    assert_eq!(request.region, "eu-west-1");
    assert!(request.url.starts_with("https://bedrock-runtime.eu-west-1.amazonaws.com/"));
    let options = StreamOptions {
        provider_options: [("region".to_owned(), json!("us-west-2"))].into(),
        ..StreamOptions::default()
    };
    assert_eq!(
        build_request(&m, &Context::default(), &options, &env, None).unwrap().region,
        "us-west-2"
    );
}

#[test]
fn provider_options_pass_through_and_validate() {
    let options = StreamOptions {
        provider_options: [
            (
                "guardrailConfig".to_owned(),
                json!({"guardrailIdentifier": "abc", "guardrailVersion": "1"}),
            ),
            ("serviceTier".to_owned(), json!("Priority")),
            ("requestMetadata".to_owned(), json!({"team": "x"})),
        ]
        .into(),
        ..StreamOptions::default()
    };
    let body = build(&model(SONNET45), &Context::default(), &options).body;
    assert_eq!(
        body["guardrailConfig"],
        json!({"guardrailIdentifier": "abc", "guardrailVersion": "1"})
    );
    assert_eq!(body["serviceTier"], json!({"type": "priority"}));
    assert_eq!(body["requestMetadata"], json!({"team": "x"}));
    let bad = StreamOptions {
        provider_options: [("serviceTier".to_owned(), json!("fast"))].into(),
        ..StreamOptions::default()
    };
    assert!(build_request(&model(SONNET45), &Context::default(), &bad, &no_env, None).is_err());
    let wrong_type = StreamOptions {
        provider_options: [("region".to_owned(), json!(3))].into(),
        ..StreamOptions::default()
    };
    assert!(
        build_request(&model(SONNET45), &Context::default(), &wrong_type, &no_env, None).is_err()
    );
}

#[test]
fn opus_47_never_gets_temperature() {
    let options = StreamOptions { temperature: Some(0.2), ..StreamOptions::default() };
    let body = build(&model("us.anthropic.claude-opus-4-7"), &Context::default(), &options).body;
    assert_eq!(body["inferenceConfig"], json!({}));
}

#[test]
fn headers_merge_caller_last_and_debug_redacts() {
    let mut m = model(SONNET45);
    m.headers.insert("x-model".into(), "1".into());
    let options = StreamOptions {
        headers: [("Accept".to_owned(), "custom".to_owned())].into(),
        ..StreamOptions::default()
    };
    let mut request =
        super::build_request(&m, &Context::default(), &options, &no_env, None).unwrap().http;
    assert_eq!(request.headers.get_all("accept").iter().collect::<Vec<_>>(), ["custom"]);
    assert_eq!(request.headers.get("x-model").unwrap(), "1");
    llm_http::insert_header(
        &mut request.headers,
        "test",
        "authorization",
        "Bearer secret-token-value",
    )
    .unwrap();
    assert!(!format!("{request:?}").contains("secret-token-value"));
}

#[test]
fn identical_input_gives_identical_bytes() {
    let context = Context {
        system_prompt: Some("s".into()),
        messages: vec![user("x")],
        tools: vec![weather_tool()],
    };
    let a = serde_json::to_vec(&build(&model(SONNET45), &context, &StreamOptions::default()).body)
        .unwrap();
    let b = serde_json::to_vec(&build(&model(SONNET45), &context, &StreamOptions::default()).body)
        .unwrap();
    assert_eq!(a, b);
}

#[test]
fn fable_alias_request_shape() {
    let m = Model {
        id: "production-fable".into(),
        compat: Some(json!({"canonicalModelId": "claude-fable-5"})),
        reasoning: false,
        ..model("production-fable")
    };
    let context = Context {
        messages: vec![user("Reply briefly.")],
        tools: vec![weather_tool()],
        ..Context::default()
    };
    let options = StreamOptions {
        reasoning: Some(ReasoningLevel::High),
        temperature: Some(0.2),
        tool_choice: Some(ToolChoice::Required),
        max_tokens: None,
        ..StreamOptions::default()
    };
    let body = build(&m, &context, &options).body;
    assert_eq!(body["inferenceConfig"], json!({}));
    assert_eq!(
        body["messages"][0]["content"],
        json!([{"text": "Reply briefly."}, {"cachePoint": {"type": "default"}}])
    );
    assert_eq!(body["toolConfig"]["toolChoice"], json!({"auto": {}}));
    assert_eq!(
        body["additionalModelRequestFields"],
        json!({"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "high"}})
    );
    assert_eq!(body["additionalModelResponseFieldPaths"], json!(["/stop_details"]));
    let none = StreamOptions { tool_choice: Some(ToolChoice::None), ..options };
    assert!(build(&m, &context, &none).body.get("toolConfig").is_none());
    // Without a reasoning level Fable still thinks, at high.
    let body = build(&m, &context, &StreamOptions::default()).body;
    assert_eq!(body["additionalModelRequestFields"]["output_config"]["effort"], json!("high"));
}

#[test]
fn the_models_thinking_level_map_wins() {
    let context = Context { messages: vec![user("x")], ..Context::default() };
    let effort = |map: Value, level| {
        let m = Model {
            compat: Some(json!({"thinkingLevelMap": map})),
            ..model("anthropic.claude-opus-4.8-v1:0")
        };
        let options = StreamOptions { reasoning: Some(level), ..StreamOptions::default() };
        build(&m, &context, &options).body["additionalModelRequestFields"]["output_config"]["effort"].clone()
    };
    assert_eq!(effort(json!({"xhigh": null, "max": null}), ReasoningLevel::Max), json!("high"));
    assert_eq!(effort(json!({"low": "medium"}), ReasoningLevel::Low), json!("medium"));
    assert_eq!(
        effort(json!({"low": "medium"}), ReasoningLevel::Max),
        json!("max"),
        "unmapped levels keep the default"
    );
}

#[test]
fn a_compat_field_of_the_wrong_type_is_an_invalid_request_naming_it() {
    let context = Context { messages: vec![user("x")], ..Context::default() };
    let options =
        StreamOptions { reasoning: Some(ReasoningLevel::Low), ..StreamOptions::default() };
    for (compat, field) in [
        (json!({"canonicalModelId": 5}), "canonicalModelId"),
        (
            json!({"canonicalModelId": "claude-fable-5", "thinkingLevelMap": {"low": 1}}),
            "thinkingLevelMap",
        ),
        (json!({"thinkingLevelMap": ["low"]}), "thinkingLevelMap"),
    ] {
        let m = Model { compat: Some(compat), ..model("anthropic.claude-opus-4.8-v1:0") };
        let e = build_request(&m, &context, &options, &no_env, None).unwrap_err();
        assert_eq!((e.kind, e.retryable), (ErrorKind::InvalidRequest, false));
        let prefix = format!("Invalid {} compat for model {}: {field}: ", crate::PROVIDER, m.id);
        assert!(e.message.starts_with(&prefix), "{}", e.message);
    }
    // Unknown keys are not errors.
    let m = Model { compat: Some(json!({"someOtherFlag": 1})), ..model(SONNET45) };
    assert!(build_request(&m, &context, &options, &no_env, None).is_ok());
}

#[test]
fn roles_alternate_on_the_wire() {
    let m = model(SONNET45);
    let context = Context {
        messages: vec![
            user("first"),
            user("second"),
            assistant(&m, vec![call("t1")]),
            result("t1", vec![UserContent::text("ok")], false),
            user("and then?"),
        ],
        tools: vec![weather_tool()],
        ..Context::default()
    };
    let options =
        StreamOptions { cache_retention: CacheRetention::None, ..StreamOptions::default() };
    let messages = build(&m, &context, &options).body["messages"].clone();
    assert_eq!(
        messages,
        json!([
            {"role": "user", "content": [{"text": "first"}, {"text": "second"}]},
            {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {"city": "Oslo"}}}]},
            {"role": "user", "content": [
                {"toolResult": {"toolUseId": "t1", "content": [{"text": "ok"}], "status": "success"}},
                {"text": "and then?"}
            ]}
        ])
    );
}

#[test]
fn fable_takes_only_the_default_service_tier_and_ignores_others() {
    let fable = model("us.anthropic.claude-fable-5");
    let tier = |value: &str| StreamOptions {
        provider_options: [("serviceTier".to_owned(), json!(value))].into(),
        ..StreamOptions::default()
    };
    for ignored in ["flex", " Priority ", "reserved"] {
        let body = build(&fable, &Context::default(), &tier(ignored)).body;
        assert!(body.get("serviceTier").is_none(), "{ignored}: {body}");
    }
    let body = build(&fable, &Context::default(), &tier("Default")).body;
    assert_eq!(body["serviceTier"], json!({"type": "default"}));
    // Another model gets the tier; an unknown tier is an error for every model.
    let body = build(&model(SONNET45), &Context::default(), &tier("flex")).body;
    assert_eq!(body["serviceTier"], json!({"type": "flex"}));
    let error =
        build_request(&fable, &Context::default(), &tier("fast"), &no_env, None).unwrap_err();
    assert!(error.message.contains("\"fast\""), "{}", error.message);
}

fn person() -> llm_core::OutputFormat {
    llm_core::OutputFormat::new(
        "person",
        json!({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}),
    )
    .with_description("The person named")
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
fn an_output_format_is_output_config_text_format_with_the_schema_as_a_string() {
    let options = StreamOptions { output: Some(person()), ..StreamOptions::default() };
    let r = build(&model(SONNET45), &Context::default(), &options);
    let text_format = &r.body["outputConfig"]["textFormat"];
    assert_eq!(text_format["type"], json!("json_schema"));
    let json_schema = &text_format["structure"]["jsonSchema"];
    assert_eq!(json_schema["name"], json!("person"));
    assert_eq!(json_schema["description"], json!("The person named"));
    let sent: Value = serde_json::from_str(json_schema["schema"].as_str().unwrap()).unwrap();
    assert_eq!(sent, strict_person_schema());
    assert!(r.body.get("toolConfig").is_none());
}

#[test]
fn another_model_gets_the_format_as_a_forced_tool_after_the_request_s_tools() {
    let options = StreamOptions { output: Some(person()), ..StreamOptions::default() };
    let context = Context { tools: vec![weather_tool()], ..Context::default() };
    let r = build(&model("us.amazon.nova-pro-v1:0"), &context, &options);
    assert!(r.body.get("outputConfig").is_none());
    let tools = r.body["toolConfig"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[1]["toolSpec"]["name"], json!("person"));
    assert_eq!(tools[1]["toolSpec"]["inputSchema"]["json"], strict_person_schema());
    assert_eq!(r.body["toolConfig"]["toolChoice"], json!({"tool": {"name": "person"}}));
}

#[test]
fn a_forced_format_tool_that_would_not_be_forced_is_an_error() {
    let options = StreamOptions { output: Some(person()), ..StreamOptions::default() };
    let fable = model("us.anthropic.claude-fable-5-v1:0");
    let error = build_request(&fable, &Context::default(), &options, &no_env, None).unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidRequest);
    assert!(error.message.contains("forced tool"), "{}", error.message);
}
