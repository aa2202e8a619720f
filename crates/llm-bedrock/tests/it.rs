//! Integration tests for llm-bedrock.

use llm_core::Provider;

#[test]
fn serves_its_api_id() {
    assert_eq!(llm_bedrock::BedrockProvider::new().api(), llm_bedrock::API);
    assert_eq!(llm_bedrock::INFO.api, llm_bedrock::API);
}

/// One live round trip; runs only when `AWS_BEARER_TOKEN_BEDROCK` is set.
#[tokio::test]
async fn live_smoke() {
    let Some(key) = llm_bedrock::INFO.key_from_env() else {
        println!("skipped: AWS_BEARER_TOKEN_BEDROCK not set");
        return;
    };
    let Some(model) = llm_bedrock::INFO.default_model() else {
        println!("skipped: INFO lists no model yet");
        return;
    };
    let options = llm_core::StreamOptions {
        api_key: Some(llm_core::ApiKey::new(key)),
        ..llm_core::StreamOptions::default()
    };
    let context = llm_core::Context {
        messages: vec![llm_core::Message::user("Say hi.")],
        ..llm_core::Context::default()
    };
    let message = llm_bedrock::BedrockProvider::new().complete(&model, &context, &options).await;
    assert!(message.error_message.is_none(), "{:?}", message.error_message);
}
