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
    Registered { info: &llm_openai_responses::AZURE_INFO, make: || Arc::new(llm_openai_responses::OpenAiResponsesProvider::azure()) },
    Registered { info: &llm_google::INFO, make: || Arc::new(llm_google::GoogleProvider::new()) },
    Registered { info: &llm_mistral::INFO, make: || Arc::new(llm_mistral::MistralProvider::new()) },
    // new-provider: insert above
];

/// Older `--provider` spellings still accepted: `(alias, crate name)`.
pub(crate) const ALIASES: &[(&str, &str)] = &[("openai", "openai-completions")];
