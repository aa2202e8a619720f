//! How `prepare` puts conversion and authentication together.
#![allow(clippy::unwrap_used, reason = "tests")]

use llm_core::{ApiKey, Message};
use llm_http::HttpRequest;

use super::*;

fn model(id: &str, base_url: &str) -> Model {
    Model {
        id: id.into(),
        api: API.into(),
        provider: PROVIDER.into(),
        base_url: base_url.into(),
        ..Model::default()
    }
}

fn context() -> Context {
    Context { messages: vec![Message::user("hi")], ..Context::default() }
}

fn header<'a>(request: &'a HttpRequest, name: &str) -> Option<&'a str> {
    request.headers.get(name).and_then(|v| v.to_str().ok())
}

const ARN: &str = "arn:aws:bedrock:us-west-2:123456789012:application-inference-profile/a1b2c3";

#[test]
fn bearer_token_from_the_environment_and_no_sigv4_headers() {
    let env = |name: &str| (name == "AWS_BEARER_TOKEN_BEDROCK").then(|| "tok".to_owned());
    let request = prepare(&model(ARN, ""), &context(), &StreamOptions::default(), &env).unwrap();
    assert_eq!(header(&request, "authorization"), Some("Bearer tok"));
    assert_eq!(header(&request, "x-amz-date"), None);
    assert!(request.url.contains("/model/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Aapplication-inference-profile%2Fa1b2c3/"));
}

#[test]
fn skip_auth_signs_with_dummy_keys_for_the_endpoint_region() {
    let env = |name: &str| match name {
        "AWS_BEARER_TOKEN_BEDROCK" => Some("tok".to_owned()),
        "AWS_BEDROCK_SKIP_AUTH" => Some("1".to_owned()),
        _ => None,
    };
    // A pinned standard endpoint with nothing configured signs for its own region.
    let m = model(ARN, "https://bedrock-runtime.us-west-2.amazonaws.com");
    let request = prepare(&m, &context(), &StreamOptions::default(), &env).unwrap();
    let authorization = header(&request, "authorization").unwrap();
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=dummy-access-key/"),
        "{authorization}"
    );
    assert!(authorization.contains("/us-west-2/bedrock/aws4_request"), "{authorization}");
    assert!(header(&request, "x-amz-date").is_some());
    assert!(
        request.url.starts_with("https://bedrock-runtime.us-west-2.amazonaws.com/model/arn%3A")
    );
}

#[test]
fn a_configured_region_moves_a_standard_endpoint_and_signs_for_it() {
    let env = |name: &str| match name {
        "AWS_ACCESS_KEY_ID" => Some("AKIDEXAMPLE".to_owned()),
        "AWS_SECRET_ACCESS_KEY" => Some("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".to_owned()),
        "AWS_REGION" => Some("eu-west-1".to_owned()),
        _ => None,
    };
    let m = model("anthropic.claude-3-haiku-20240307-v1:0", INFO.default_base_url);
    let request = prepare(&m, &context(), &StreamOptions::default(), &env).unwrap();
    assert!(request.url.starts_with("https://bedrock-runtime.eu-west-1.amazonaws.com/"));
    let authorization = header(&request, "authorization").unwrap();
    assert!(authorization.contains("AKIDEXAMPLE/"), "{authorization}");
    assert!(authorization.contains("/eu-west-1/bedrock/aws4_request"), "{authorization}");
    assert!(!format!("{request:?}").contains("wJalrXUtnFEMI"), "the secret never prints");
}

#[test]
fn the_options_key_wins_and_no_credentials_is_an_auth_error() {
    let options =
        StreamOptions { api_key: Some(ApiKey::new("opt-key")), ..StreamOptions::default() };
    let env = |name: &str| (name == "AWS_BEARER_TOKEN_BEDROCK").then(|| "env-key".to_owned());
    let request = prepare(&model("amazon.nova-pro-v1:0", ""), &context(), &options, &env).unwrap();
    assert_eq!(header(&request, "authorization"), Some("Bearer opt-key"));

    let nothing = |name: &str| match name {
        // Shared files that do not exist, so the test never reads the real home folder.
        "AWS_CONFIG_FILE" | "AWS_SHARED_CREDENTIALS_FILE" => {
            Some("/nonexistent/clawcall-bedrock-test".to_owned())
        }
        _ => None,
    };
    let error = prepare(
        &model("amazon.nova-pro-v1:0", ""),
        &context(),
        &StreamOptions::default(),
        &nothing,
    )
    .unwrap_err();
    assert_eq!(error.kind, llm_core::ErrorKind::Auth);
    assert!(!error.retryable);
}

#[test]
fn http1_is_forced_only_by_the_switch_set_to_1() {
    let with =
        |value: &'static str| move |name: &str| (name == FORCE_HTTP1_ENV).then(|| value.to_owned());
    assert!(force_http1(&with("1")));
    assert!(force_http1(&with(" 1 ")));
    for off in ["0", "", "true", "yes"] {
        assert!(!force_http1(&with(off)), "{off:?}");
    }
    assert!(!force_http1(&|_: &str| None));
}

/// Models Converse gives no tool use (AWS's table of Converse model features) cannot carry a
/// format as a forced tool: unsupported, while their tool-using successors keep the tool.
#[test]
fn models_without_tool_use_cannot_carry_a_format() {
    for id in [
        "amazon.titan-text-premier-v1:0",
        "amazon.titan-text-express-v1",
        "anthropic.claude-v2:1",
        "anthropic.claude-instant-v1",
        "ai21.jamba-instruct-v1:0",
        "cohere.command-text-v14",
        "meta.llama2-70b-chat-v1",
        "meta.llama3-8b-instruct-v1:0",
        "us.meta.llama3-70b-instruct-v1:0",
        "mistral.mixtral-8x7b-instruct-v0:1",
        "us.deepseek.r1-v1:0",
    ] {
        assert_eq!(INFO.output_mode(id), OutputMode::Unsupported, "{id}");
    }
    for id in [
        "us.meta.llama3-1-70b-instruct-v1:0",
        "ai21.jamba-1-5-large-v1:0",
        "cohere.command-r-plus-v1:0",
        "mistral.mistral-large-2407-v1:0",
        "us.amazon.nova-pro-v1:0",
        "anthropic.claude-3-haiku-20240307-v1:0",
    ] {
        assert_eq!(INFO.output_mode(id), OutputMode::Tool, "{id}");
    }
    assert_eq!(
        INFO.output_mode("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
        OutputMode::Native
    );
}
