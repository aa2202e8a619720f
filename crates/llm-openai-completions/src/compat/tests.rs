use super::*;
use llm_core::ErrorKind;
use serde_json::json;

fn model(provider: &str, url: &str, compat: Option<serde_json::Value>) -> Model {
    Model {
        id: "m".into(),
        provider: provider.into(),
        base_url: url.into(),
        compat,
        ..Model::default()
    }
}

#[test]
fn openai_defaults() {
    let m = model("openai", "https://api.openai.com/v1", None);
    let c = ResolvedCompat::resolve(&m, &OpenAiCompletionsCompat::from_model(&m).unwrap());
    assert!(c.supports_store && c.supports_developer_role && c.supports_strict_mode);
    assert!(c.supports_prompt_cache_key && c.supports_long_cache_retention);
    assert_eq!(c.max_tokens_field, MaxTokensField::MaxCompletionTokens);
    assert_eq!(c.thinking_format, ThinkingFormat::Openai);
    assert!(!c.strict_tools);
}

#[test]
fn detects_non_standard_servers_by_name_and_url() {
    let m = model("custom", "https://api.moonshot.ai/v1", None);
    let c = ResolvedCompat::resolve(&m, &OpenAiCompletionsCompat::default());
    assert!(!c.supports_store && !c.supports_strict_mode && !c.supports_reasoning_effort);
    assert_eq!(c.max_tokens_field, MaxTokensField::MaxTokens);
    assert!(!c.supports_prompt_cache_key);

    let m = model("deepseek", "", None);
    let c = ResolvedCompat::resolve(&m, &OpenAiCompletionsCompat::default());
    assert!(c.requires_reasoning_content);
    assert_eq!(c.thinking_format, ThinkingFormat::Deepseek);
}

#[test]
fn explicit_fields_override_detection() {
    let m = model(
        "together",
        "",
        Some(json!({"supportsStrictMode": true, "maxTokensField": "max_completion_tokens",
                        "thinkingFormat": "qwen-chat-template", "reasoningFields": ["reasoning"],
                        "somethingElse": 1})),
    );
    let c = ResolvedCompat::resolve(&m, &OpenAiCompletionsCompat::from_model(&m).unwrap());
    assert!(c.supports_strict_mode);
    assert_eq!(c.max_tokens_field, MaxTokensField::MaxCompletionTokens);
    assert_eq!(c.thinking_format, ThinkingFormat::QwenChatTemplate);
    assert_eq!(c.reasoning_fields, vec!["reasoning".to_owned()]);
}

#[test]
fn malformed_compat_is_an_invalid_request() {
    let m = model("openai", "", Some(json!({"supportsStore": "yes"})));
    let e = OpenAiCompletionsCompat::from_model(&m).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
    assert!(!e.retryable);
}
