#![allow(clippy::unwrap_used, reason = "tests")]

use llm_core::{ErrorKind, StreamOptions};
use serde_json::json;

use super::*;

fn options(auth: serde_json::Value) -> StreamOptions {
    let mut options = StreamOptions::default();
    options.provider_options.insert("azureAuth".into(), auth);
    options
}

#[test]
fn the_auth_option_names_how_the_key_is_sent() {
    let auth = |value| AzureAuth::from_options(&options(value), "p");
    assert_eq!(AzureAuth::from_options(&StreamOptions::default(), "p").unwrap(), None);
    assert_eq!(auth(json!(null)).unwrap(), None);
    assert_eq!(auth(json!("  ")).unwrap(), None, "blank is unset");
    assert_eq!(auth(json!("api-key")).unwrap(), Some(AzureAuth::ApiKey));
    assert_eq!(auth(json!(" entra ")).unwrap(), Some(AzureAuth::Bearer));
    assert_eq!(auth(json!("bearer")).unwrap(), Some(AzureAuth::Bearer));
    for bad in [json!("oauth"), json!(1), json!({"type": "entra"})] {
        let e = auth(bad.clone()).unwrap_err();
        assert_eq!(
            (e.kind, e.retryable, e.provider.as_str()),
            (ErrorKind::InvalidRequest, false, "p")
        );
        assert!(e.message.contains("azureAuth"), "{bad}: {}", e.message);
    }
}

#[test]
fn resource_hosts_are_the_two_azure_openai_domains_in_any_case() {
    assert!(is_resource_host("r.openai.azure.com"));
    assert!(is_resource_host("R.CognitiveServices.Azure.com"));
    for other in ["openai.azure.com.evil.example", "r.services.ai.azure.com", "api.openai.com", ""]
    {
        assert!(!is_resource_host(other), "{other}");
    }
}
