#![allow(clippy::unwrap_used, reason = "tests")]

use llm_core::{ErrorKind, Model, StreamOptions};
use serde_json::{Value, json};

use super::*;

fn model(base_url: &str, provider: &str) -> Model {
    Model {
        id: "gpt-4.1".into(),
        provider: provider.into(),
        base_url: base_url.into(),
        ..Model::default()
    }
}

fn options(value: Value) -> StreamOptions {
    let Value::Object(map) = value else { panic!("object") };
    StreamOptions { provider_options: map.into_iter().collect(), ..StreamOptions::default() }
}

#[test]
fn deployment_routes_get_api_version_and_api_key() {
    let m = model("https://r.openai.azure.com/openai/deployments/my-dep/", "openai");
    let r = route(&m, &options(json!({})), "openai").unwrap().unwrap();
    assert_eq!(
        r.url,
        "https://r.openai.azure.com/openai/deployments/my-dep/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(r.auth, AzureAuth::ApiKey);
    let r = route(&m, &options(json!({"azureApiVersion": "2025-04-01-preview"})), "openai")
        .unwrap()
        .unwrap();
    assert!(r.url.ends_with("?api-version=2025-04-01-preview"), "{}", r.url);
}

#[test]
fn v1_routes_need_no_api_version_and_keep_a_given_one() {
    let m = model("https://r.cognitiveservices.azure.com/openai/v1", "openai");
    let r = route(&m, &options(json!({})), "openai").unwrap().unwrap();
    assert_eq!(r.url, "https://r.cognitiveservices.azure.com/openai/v1/chat/completions");
    let m = model("https://r.openai.azure.com/openai/deployments/d?api-version=2024-06-01", "x");
    let r = route(&m, &options(json!({})), "x").unwrap().unwrap();
    assert_eq!(
        r.url,
        "https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-06-01"
    );
}

#[test]
fn other_hosts_are_not_azure_unless_the_provider_says_so() {
    assert_eq!(
        route(&model("https://api.openai.com/v1", "openai"), &options(json!({})), "o").unwrap(),
        None
    );
    assert_eq!(route(&model("", "azure-openai"), &options(json!({})), "o").unwrap(), None);
    let gateway = model("https://gw.example.com/openai/deployments/d", "azure-openai");
    let r = route(&gateway, &options(json!({"azureAuth": "entra"})), "o").unwrap().unwrap();
    assert_eq!(r.auth, AzureAuth::Bearer);
    assert!(r.url.starts_with("https://gw.example.com/openai/deployments/d/chat/completions?"));
    let bad = route(&gateway, &options(json!({"azureAuth": 1})), "o").unwrap_err();
    assert_eq!(bad.kind, ErrorKind::InvalidRequest);
    assert!(bad.message.starts_with("Invalid Azure OpenAI provider option: azureAuth: "));
    // Blank is absent, as in every provider.
    let blank = route(&gateway, &options(json!({"azureAuth": "  "})), "o").unwrap().unwrap();
    assert_eq!(blank.auth, AzureAuth::ApiKey);
}

#[test]
fn an_azure_host_spelled_in_escapes_or_other_scripts_is_still_one() {
    // The oracle is the URL parser: each of these parses to an Azure resource host.
    for base in [
        "https://R.OpenAI.Azure.COM/openai/v1",
        "https://r.openai.azure%2Ecom/openai/v1",
        "https://r.openai.\u{FF41}zure.com/openai/v1",
    ] {
        let host = Url::parse(base).unwrap().host_str().unwrap().to_owned();
        assert!(llm_http::azure::is_resource_host(&host), "{base} -> {host}");
        let r = route(&model(base, "openai"), &options(json!({})), "openai").unwrap();
        assert_eq!(r.map(|r| r.auth), Some(AzureAuth::ApiKey), "{base}");
    }
    assert_eq!(
        route(&model("https://api.openai.com/v1", "openai"), &options(json!({})), "openai")
            .unwrap(),
        None
    );
}
