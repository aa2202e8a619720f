use llm_core::ApiKey;

use super::*;

#[test]
fn tool_result_text_rules() {
    assert_eq!(tool_result_text("", false, false, true), "[tool error] (no tool output)");
    assert_eq!(tool_result_text("  \n", false, true, false), "(no tool output)");
    assert_eq!(tool_result_text(" boom ", false, true, true), "[tool error] boom");
    assert_eq!(tool_result_text("", true, true, false), "(see attached image)");
    assert_eq!(tool_result_text("", true, true, true), "[tool error] (see attached image)");
    assert_eq!(
        tool_result_text("", true, false, false),
        "(image omitted: model does not support images)"
    );
    assert_eq!(
        tool_result_text("shot", true, false, false),
        "shot\n[tool image omitted: model does not support images]"
    );
}

#[test]
fn request_debug_redacts_the_key() {
    let model = Model { id: "mistral-small-latest".into(), ..Model::default() };
    let options =
        StreamOptions { api_key: Some(ApiKey::new("sk-very-secret")), ..StreamOptions::default() };
    let request = build_request(&model, &Context::default(), &options).unwrap();
    let debug = format!("{request:?}");
    assert!(!debug.contains("sk-very-secret"), "{debug}");
    assert!(debug.contains("\"authorization\": Sensitive"), "{debug}");
}

#[test]
fn malformed_compat_is_an_invalid_request() {
    let mut model = Model { compat: Some(json!({"reasoningFormat": 3})), ..Model::default() };
    let e = MistralCompat::from_model(&model).unwrap_err();
    assert_eq!((e.kind, e.retryable), (llm_core::ErrorKind::InvalidRequest, false));
    assert!(e.message.starts_with("Invalid mistral compat for model"), "{}", e.message);
    model.compat = Some(json!({"reasoningFormat": "bogus"}));
    assert!(MistralCompat::from_model(&model).is_err(), "an unknown value is an error");
    model.compat = Some(json!(null));
    assert_eq!(MistralCompat::from_model(&model).unwrap(), MistralCompat::default());
    model.compat = Some(json!({"reasoningFormat": "promptMode", "unknown": true}));
    assert_eq!(
        MistralCompat::from_model(&model).unwrap().reasoning_format,
        Some(MistralReasoningFormat::PromptMode)
    );
}

#[test]
fn id_map_reuses_and_validates() {
    let mut ids = ToolCallIds::default();
    let a = ids.map("call_abc");
    assert!(is_mistral_id(&a));
    assert_eq!(ids.map("call_abc"), a);
    assert_eq!(ids.map("Ab3dE5fG7"), "Ab3dE5fG7");
    // A source that is itself the id another source already got is re-seeded.
    let mut ids = ToolCallIds::default();
    let first = ids.map("toolu_x");
    let second = ids.map(&first);
    assert_ne!(first, second);
    assert!(is_mistral_id(&second));
    assert!(!is_mistral_id("abc") && !is_mistral_id("Ab3dE5fG_") && !is_mistral_id("Ab3dE5fG78"));
}

#[test]
#[allow(clippy::indexing_slicing, reason = "tests")]
fn an_output_format_is_a_strict_json_schema_response_format() {
    let model = Model { id: "mistral-large-latest".into(), ..Model::default() };
    let format = llm_core::OutputFormat::new(
        "person",
        serde_json::json!({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}),
    )
    .with_description("The person named");
    let options = StreamOptions { output: Some(format.clone()), ..StreamOptions::default() };
    let body = build_body(&model, &Context::default(), &options).unwrap();
    assert_eq!(
        body["response_format"],
        serde_json::json!({"type": "json_schema", "json_schema": {
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
    let loose = StreamOptions {
        output: Some(format.clone().with_strict(false)),
        ..StreamOptions::default()
    };
    let body = build_body(&model, &Context::default(), &loose).unwrap();
    assert_eq!(body["response_format"]["json_schema"]["schema"], format.schema);
    assert!(
        build_body(&model, &Context::default(), &StreamOptions::default())
            .unwrap()
            .get("response_format")
            .is_none()
    );
}

#[test]
fn provider_options_are_typed_and_a_mistyped_one_is_an_invalid_request() {
    let model = Model { id: "mistral-large-latest".into(), ..Model::default() };
    let with = |key: &str, value: Value| StreamOptions {
        provider_options: [(key.to_owned(), value)].into(),
        ..StreamOptions::default()
    };
    let body = build_body(&model, &Context::default(), &with("parallelToolCalls", json!(false)));
    assert_eq!(body.unwrap().get("parallel_tool_calls"), Some(&json!(false)));
    let body = build_body(&model, &Context::default(), &with("promptMode", json!("reasoning")));
    assert_eq!(body.unwrap().get("prompt_mode"), Some(&json!("reasoning")));
    for (key, value) in [
        ("parallelToolCalls", json!("yes")),
        ("promptMode", json!(1)),
        ("reasoningEffort", json!(["high"])),
    ] {
        let e = build_body(&model, &Context::default(), &with(key, value)).unwrap_err();
        assert_eq!((e.kind, e.retryable), (llm_core::ErrorKind::InvalidRequest, false), "{key}");
        assert!(e.message.starts_with("Invalid Mistral provider option"), "{}", e.message);
    }
}
