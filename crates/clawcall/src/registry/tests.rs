#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests")]

use super::*;

#[test]
fn a_catalog_id_gives_the_model_with_its_catalog_price_and_limit() {
    let resolved = resolve("anthropic/claude-sonnet-4-5").expect("known");
    // Anthropic's published price of Claude Sonnet 4.5: $3 / $15 per million tokens, 64k output.
    assert_eq!(resolved.model.id, "claude-sonnet-4-5");
    assert_eq!(resolved.model.api, "anthropic-messages");
    assert_eq!(resolved.model.cost.input, 3.0);
    assert_eq!(resolved.model.cost.output, 15.0);
    assert_eq!(resolved.model.max_tokens, 64_000);
    assert_eq!(resolved.provider().api(), "anthropic-messages");
    let gemini = model(" google/gemini-2.5-flash ").expect("known, trimmed");
    assert_eq!(gemini.api, "google-generative-ai");
    assert!(gemini.cost.output > 0.0 && gemini.max_tokens > 4096);
}

#[test]
fn an_alias_names_its_provider() {
    let resolved = resolve("openai/gpt-5-mini").expect("openai is openai-completions");
    assert_eq!(resolved.entry.name(), "openai-completions");
    assert_eq!(resolved.model.api, "openai-completions");
}

#[test]
fn an_unknown_model_names_the_closest_known_ids() {
    let err = resolve("openai/gpt-4o-mini").expect_err("not in the catalog");
    let Error::UnknownModel { id, close } = &err else { panic!("{err:?}") };
    assert_eq!(id, "openai/gpt-4o-mini");
    assert_eq!(
        close.first().map(String::as_str),
        Some("openai-completions/gpt-5-mini"),
        "{close:?}"
    );
    let err = resolve("anthropic/claude-sonet-4-5").expect_err("typo");
    assert!(err.to_string().contains("anthropic/claude-sonnet-4-5"), "{err}");
    // Nothing close: nothing suggested, rather than a random id.
    let Error::UnknownModel { close, .. } =
        resolve("mistral/zzzzzzzzzzzzzzzzzzzzzz").expect_err("far")
    else {
        panic!("not an unknown model")
    };
    assert!(close.is_empty(), "{close:?}");
}

#[test]
fn an_id_without_a_provider_suggests_the_full_ids() {
    let err = resolve("claude-sonnet-4-5").expect_err("no provider part");
    let Error::NotAnId { close, .. } = &err else { panic!("{err:?}") };
    assert_eq!(close.first().map(String::as_str), Some("anthropic/claude-sonnet-4-5"));
}

#[test]
fn an_unknown_provider_lists_the_known_ones() {
    let err = resolve("no-such-provider/model-1").expect_err("no such provider");
    let Error::UnknownProvider { name, known } = &err else { panic!("{err:?}") };
    assert_eq!(name, "no-such-provider");
    assert!(known.contains(&"anthropic") && known.contains(&"bedrock"), "{known:?}");
}

static NO_KEY_INFO: ProviderInfo = ProviderInfo {
    name: "nokey",
    api: "anthropic-messages",
    provider: "nokey",
    default_base_url: "http://127.0.0.1:9",
    key_env: &["CLAWCALL_REGISTRY_TEST_KEY_NEVER_SET"],
    capabilities: llm_core::Capabilities::NONE,
    models: &[llm_core::ModelInfo::new("m", 1000, 100, [1.0, 2.0, 0.0, 0.0])],
    output: &[],
};

static NO_KEY: ProviderEntry = ProviderEntry::new(
    &NO_KEY_INFO,
    || Arc::new(llm_core::raw::scripted::ScriptedProvider::new("anthropic-messages", [])),
    |_, _| Arc::new(llm_core::raw::scripted::ScriptedProvider::new("anthropic-messages", [])),
);

#[test]
fn no_key_is_an_error_naming_the_variables_unless_the_provider_finds_its_own() {
    let model = NO_KEY_INFO.model("m").expect("listed");
    let err = Resolved { entry: &NO_KEY, model: model.clone() }.agent_config().expect_err("no key");
    assert_eq!(
        err,
        Error::MissingKey {
            provider: "nokey",
            variables: &["CLAWCALL_REGISTRY_TEST_KEY_NEVER_SET"]
        }
    );
    assert_eq!(err.to_string(), "no API key for nokey: set CLAWCALL_REGISTRY_TEST_KEY_NEVER_SET");
    static OPTIONAL: ProviderEntry = NO_KEY.key_optional(&[]);
    let config = Resolved { entry: &OPTIONAL, model }.agent_config().expect("finds its own");
    assert!(config.options.api_key.is_none());
    assert_eq!(config.model.max_tokens, 100);
}

#[test]
fn every_entry_makes_a_provider_of_its_api_both_ways() {
    for entry in PROVIDERS {
        assert_eq!(entry.provider().api(), entry.info.api, "{}", entry.name());
        let with = (entry.make_with)(reqwest::Client::new(), BTreeMap::new());
        assert_eq!(with.api(), entry.info.api, "{}", entry.name());
        assert!(entry.answers_to(entry.name()));
        assert_eq!(provider(entry.name()).map(ProviderEntry::name), Ok(entry.name()));
    }
    // A crate's second API is not a second fixtures column.
    let primary: Vec<&str> = PROVIDERS.iter().filter(|e| e.primary).map(|e| e.name()).collect();
    assert!(!primary.contains(&"azure-openai-responses"), "{primary:?}");
}

#[test]
fn the_crate_docs_list_every_catalog_id() {
    let docs = include_str!("../lib.rs");
    let listed: Vec<String> = docs
        .lines()
        .skip_while(|l| !l.contains("<!-- catalog ids -->"))
        .take_while(|l| !l.contains("<!-- end catalog ids -->"))
        .filter_map(|l| l.strip_prefix("//! - `")?.strip_suffix('`').map(str::to_owned))
        .collect();
    assert_eq!(listed, known_ids(), "update the catalog id list in lib.rs");
}

#[test]
fn distance_is_the_edit_distance() {
    for (a, b, d) in [
        ("", "", 0),
        ("abc", "", 3),
        ("", "ab", 2),
        ("kitten", "sitting", 3),
        ("gpt-4o", "gpt-5", 2),
    ] {
        assert_eq!(distance(a, b), d, "{a} {b}");
        assert_eq!(distance(b, a), d, "{b} {a}");
    }
}
