//! The provider crates `claw` offers, one line each, built from the crate's exported
//! `INFO` (`cargo xtask new-provider` adds the line and the dependency).

use std::sync::Arc;

use llm_core::{Provider, ProviderInfo};

/// One provider crate: its metadata and a constructor.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Registered {
    /// What the crate declares (name, API id, base URL, key variables, models).
    pub(crate) info: &'static ProviderInfo,
    /// A fresh provider.
    pub(crate) make: fn() -> Arc<dyn Provider>,
}

/// Every provider `claw --provider` takes; the first is the default.
#[rustfmt::skip]
pub(crate) const PROVIDERS: &[Registered] = &[
    Registered { info: &llm_anthropic::INFO, make: || Arc::new(llm_anthropic::AnthropicProvider::new()) },
    Registered { info: &llm_openai_completions::INFO, make: || Arc::new(llm_openai_completions::OpenAiCompletionsProvider::new()) },
    Registered { info: &llm_openai_responses::INFO, make: || Arc::new(llm_openai_responses::OpenAiResponsesProvider::new()) },
    Registered { info: &llm_openai_responses::AZURE_INFO, make: || Arc::new(llm_openai_responses::OpenAiResponsesProvider::builder().wire(llm_openai_responses::OpenAiResponses::Azure).build()) },
    Registered { info: &llm_google::INFO, make: || Arc::new(llm_google::GoogleProvider::new()) },
    Registered { info: &llm_mistral::INFO, make: || Arc::new(llm_mistral::MistralProvider::new()) },
    Registered { info: &llm_bedrock::INFO, make: || Arc::new(llm_bedrock::BedrockProvider::new()) },
    // new-provider: insert above
];

/// Older `--provider` spellings still accepted: `(alias, crate name)`.
pub(crate) const ALIASES: &[(&str, &str)] = &[("openai", "openai-completions")];

/// Providers whose crate finds credentials itself when no key is given (`INFO.name`):
/// Bedrock signs with SigV4 from the AWS environment or a shared-config profile, so
/// `claw` sends no key rather than refusing to start.
pub(crate) const KEY_OPTIONAL: &[&str] = &["bedrock"];

/// Secret variables a provider crate reads besides its `INFO.key_env`: kept out of tool
/// output and MCP servers' environments like the keys (`(INFO.name, variables)`).
pub(crate) const OTHER_SECRETS: &[(&str, &[&str])] =
    &[("bedrock", &["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"])];

/// A provider's check of its environment (see [`PREFLIGHT`]).
pub(crate) type Preflight = fn(&llm_core::Model, &llm_core::StreamOptions) -> Result<(), String>;

/// Checks a provider crate can run with what the environment gives it, before
/// any request: `(INFO.name, check)`. A failure names the variables to set.
pub(crate) const PREFLIGHT: &[(&str, Preflight)] = &[
    ("bedrock", |_, options| {
        llm_bedrock::auth::resolve_auth(options, &|name| std::env::var(name).ok())
            .map(|_| ())
            .map_err(|e| e.message)
    }),
    ("azure-openai-responses", |model, _| {
        let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
        if model.base_url.trim().is_empty()
            && !set("AZURE_OPENAI_BASE_URL")
            && !set("AZURE_OPENAI_RESOURCE_NAME")
        {
            return Err(
                "Azure OpenAI needs its endpoint: set AZURE_OPENAI_BASE_URL (or AZURE_OPENAI_RESOURCE_NAME), or pass --base-url"
                    .to_owned(),
            );
        }
        Ok(())
    }),
];
