#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use std::collections::BTreeMap;

use llm_core::{ApiKey, ErrorKind, Model, StreamOptions};
use serde_json::{Value, json};

use super::*;

fn env(pairs: &[(&str, &str)]) -> Env {
    Env::vars(pairs.iter().copied())
}

fn model(base_url: &str) -> Model {
    Model {
        id: "gpt-5".into(),
        api: crate::AZURE_API.into(),
        provider: "azure-openai-responses".into(),
        base_url: base_url.into(),
        ..Model::default()
    }
}

fn options(provider_options: Value) -> StreamOptions {
    let Value::Object(map) = provider_options else { panic!("object") };
    StreamOptions {
        api_key: Some(ApiKey::new("x")),
        provider_options: map.into_iter().collect(),
        ..StreamOptions::default()
    }
}

fn route(base_url: &str, provider_options: Value, env: &Env) -> Result<Route, llm_core::Error> {
    resolve(&model(base_url), &options(provider_options), env)
}

#[test]
fn resource_name_gives_the_classic_v1_route() {
    let r = route("", json!({"azureResourceName": "example", "azureApiVersion": "v1"}), &env(&[]))
        .unwrap();
    assert_eq!(r.base.as_str(), "https://example.openai.azure.com/openai/v1");
    assert_eq!(r.url, "https://example.openai.azure.com/openai/v1/responses?api-version=v1");
    assert_eq!((r.client, r.auth), (Client::Azure, AzureAuth::ApiKey));
    let from_env = route("", json!({}), &env(&[(ENV_RESOURCE_NAME, " myres ")])).unwrap();
    assert_eq!(from_env.url, "https://myres.openai.azure.com/openai/v1/responses?api-version=v1");
}

#[test]
fn classic_hosts_are_forced_to_openai_v1() {
    for (raw, base) in [
        (
            "https://example.cognitiveservices.azure.com/",
            "https://example.cognitiveservices.azure.com/openai/v1",
        ),
        ("https://example.openai.azure.com/openai", "https://example.openai.azure.com/openai/v1"),
        (
            "https://example.openai.azure.com/openai/?x=1",
            "https://example.openai.azure.com/openai/v1",
        ),
        // Any other path is kept.
        (
            "https://example.openai.azure.com/openai/deployments/d",
            "https://example.openai.azure.com/openai/deployments/d",
        ),
    ] {
        let r = route(raw, json!({}), &env(&[])).unwrap();
        assert_eq!(r.base.as_str(), base, "{raw}");
        assert_eq!(r.client, Client::Azure, "{raw}");
        assert_eq!(r.url, format!("{base}/responses?api-version=v1"), "{raw}");
    }
}

#[test]
fn foundry_v1_takes_the_openai_client_and_gateways_the_azure_one() {
    let foundry = route(
        "https://project.services.ai.azure.com/api/projects/demo/openai/v1",
        json!({}),
        &env(&[]),
    )
    .unwrap();
    assert_eq!((foundry.client, foundry.auth), (Client::OpenAiCompatible, AzureAuth::Bearer));
    assert_eq!(
        foundry.url,
        "https://project.services.ai.azure.com/api/projects/demo/openai/v1/responses"
    );
    let project =
        route("https://project.services.ai.azure.com/api/projects/demo", json!({}), &env(&[]))
            .unwrap();
    assert_eq!(project.client, Client::Azure);
    let gateway =
        route("https://gateway.example.com/proxy/openai/v1", json!({}), &env(&[])).unwrap();
    assert_eq!(gateway.client, Client::Azure);
    assert_eq!(gateway.url, "https://gateway.example.com/proxy/openai/v1/responses?api-version=v1");
    let cognitive =
        route("https://westeurope.api.cognitive.microsoft.com/openai/v1/", json!({}), &env(&[]))
            .unwrap();
    assert_eq!(cognitive.client, Client::OpenAiCompatible);
}

#[test]
fn a_gateway_query_is_kept_beside_api_version() {
    let r = route("https://gw.example.com/openai/v1?tenant=a%20b", json!({}), &env(&[])).unwrap();
    assert_eq!(r.url, "https://gw.example.com/openai/v1/responses?tenant=a%20b&api-version=v1");
}

#[test]
fn precedence_of_base_url_sources_and_api_version() {
    let both = env(&[
        (ENV_BASE_URL, "https://fromenv.openai.azure.com"),
        (ENV_RESOURCE_NAME, "fromname"),
        (ENV_API_VERSION, "2025-04-01-preview"),
    ]);
    let r = route("https://model.openai.azure.com", json!({}), &both).unwrap();
    assert_eq!(
        r.url,
        "https://fromenv.openai.azure.com/openai/v1/responses?api-version=2025-04-01-preview"
    );
    // Options win over the environment.
    let r = route(
        "",
        json!({"azureBaseUrl": "https://opt.openai.azure.com", "azureApiVersion": "v1"}),
        &both,
    )
    .unwrap();
    assert_eq!(r.url, "https://opt.openai.azure.com/openai/v1/responses?api-version=v1");
    // The resource name wins over model.baseUrl.
    let r = route("https://model.openai.azure.com", json!({}), &env(&[(ENV_RESOURCE_NAME, "n")]))
        .unwrap();
    assert_eq!(r.base.as_str(), "https://n.openai.azure.com/openai/v1");
}

#[test]
fn missing_or_invalid_base_url_is_a_typed_error() {
    let e = route("", json!({}), &env(&[])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
    assert_eq!(
        e.message,
        "Azure OpenAI base URL is required. Set AZURE_OPENAI_BASE_URL or \
         AZURE_OPENAI_RESOURCE_NAME, or pass azureBaseUrl, azureResourceName, or model.baseUrl."
    );
    let e = route("not a url", json!({}), &env(&[])).unwrap_err();
    assert_eq!(e.message, "Invalid Azure OpenAI base URL: not a url");
    assert!(!e.retryable);
}

#[test]
fn deployment_map_follows_openclaw_parsing() {
    let map = parse_deployment_map("gpt-5=deployment=blue, ignored, gpt-4 = prod = east ");
    assert_eq!(map.get("gpt-5").map(String::as_str), Some("deployment=blue"));
    assert_eq!(map.get("gpt-4").map(String::as_str), Some("prod = east"));
    assert_eq!(map.len(), 2);
    let map = parse_deployment_map("other=deployment,missing-value=,=x,a=1,a=2");
    assert_eq!(
        map,
        BTreeMap::from([("other".into(), "deployment".into()), ("a".into(), "2".into())])
    );
    let e = env(&[(ENV_DEPLOYMENT_MAP, "gpt-5=deployment=blue")]);
    let base = "https://r.openai.azure.com";
    assert_eq!(route(base, json!({}), &e).unwrap().deployment, "deployment=blue");
    assert_eq!(route(base, json!({"azureDeploymentName": "d1"}), &e).unwrap().deployment, "d1");
    let no_entry = env(&[(ENV_DEPLOYMENT_MAP, "other=deployment,missing-value=")]);
    assert_eq!(route(base, json!({}), &no_entry).unwrap().deployment, "gpt-5");
}

fn header<'a>(headers: &'a llm_http::HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

#[test]
fn header_merge_per_client() {
    let mut m = model("https://r.openai.azure.com");
    m.headers = BTreeMap::from([
        ("api-key".into(), "other".into()),
        ("Authorization".into(), "Bearer t".into()),
    ]);
    let o = options(json!({}));
    let classic = resolve(&m, &o, &env(&[])).unwrap();
    let h = headers(&classic, &m, &o, &env(&[])).unwrap();
    assert_eq!(header(&h, "api-key"), Some("x"));
    assert_eq!(header(&h, "authorization"), Some("Bearer t"));

    m.base_url = "https://p.services.ai.azure.com/api/projects/demo/openai/v1".into();
    let foundry = resolve(&m, &o, &env(&[])).unwrap();
    let h = headers(&foundry, &m, &o, &env(&[])).unwrap();
    assert_eq!(header(&h, "authorization"), Some("Bearer t"));
    assert_eq!(header(&h, "api-key"), Some("other"));
}

#[test]
fn entra_tokens_go_as_bearer_never_as_api_key() {
    let m = model("https://r.openai.azure.com");
    let mut o = options(json!({"azureAuth": "entra"}));
    o.api_key = Some(ApiKey::new("eyJ0eXAi.token"));
    let r = resolve(&m, &o, &env(&[])).unwrap();
    assert_eq!((r.client, r.auth), (Client::Azure, AzureAuth::Bearer));
    assert!(r.url.ends_with("?api-version=v1"));
    let h = headers(&r, &m, &o, &env(&[])).unwrap();
    assert_eq!(header(&h, "authorization"), Some("Bearer eyJ0eXAi.token"));
    assert_eq!(header(&h, "api-key"), None);
    let bad = resolve(&m, &options(json!({"azureAuth": "oauth"})), &env(&[])).unwrap_err();
    assert_eq!(bad.kind, ErrorKind::InvalidRequest);
}

#[test]
fn key_from_the_environment_and_missing_key() {
    let m = model("https://r.openai.azure.com");
    let mut o = options(json!({}));
    o.api_key = None;
    let r = resolve(&m, &o, &env(&[])).unwrap();
    let h = headers(&r, &m, &o, &env(&[(ENV_API_KEY, "from-env")])).unwrap();
    assert_eq!(header(&h, "api-key"), Some("from-env"));
    let e = headers(&r, &m, &o, &env(&[])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth);
    assert_eq!(
        e.message,
        "Azure OpenAI API key is required. Set AZURE_OPENAI_API_KEY environment variable or \
         pass it as an argument."
    );
    // A configured auth header is enough.
    o.headers = BTreeMap::from([("Authorization".into(), "Bearer static".into())]);
    let h = headers(&r, &m, &o, &env(&[])).unwrap();
    assert_eq!(header(&h, "authorization"), Some("Bearer static"));
}

#[test]
fn debug_of_a_fixed_env_shows_names_only() {
    let e = env(&[(ENV_API_KEY, "secret-value")]);
    let text = format!("{e:?}");
    assert!(text.contains(ENV_API_KEY) && !text.contains("secret-value"), "{text}");
}

#[test]
fn an_option_that_is_not_a_string_is_an_invalid_request_and_blank_is_absent() {
    for key in ["azureBaseUrl", "azureResourceName", "azureApiVersion", "azureAuth"] {
        let e = route("https://x.openai.azure.com", json!({ key: 7 }), &env(&[])).unwrap_err();
        assert_eq!((e.kind, e.retryable), (llm_core::ErrorKind::InvalidRequest, false), "{key}");
        let prefix = format!("Invalid Azure OpenAI provider option: {key}: ");
        assert!(e.message.starts_with(&prefix), "{}", e.message);
    }
    let blank = route("", json!({"azureResourceName": "  "}), &env(&[(ENV_RESOURCE_NAME, "r")]));
    assert_eq!(blank.unwrap().url, "https://r.openai.azure.com/openai/v1/responses?api-version=v1");
}
