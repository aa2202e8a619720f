//! The provider crates xtask runs: one line per crate, built from the crate's
//! exported `INFO` (`cargo xtask new-provider` adds the line and the dependency).

use std::sync::Arc;

use crate::conformance::ProviderEntry;

/// Every registered provider crate.
#[rustfmt::skip]
pub const PROVIDERS: &[ProviderEntry] = &[
    ProviderEntry::new(&llm_anthropic::INFO, || Arc::new(llm_anthropic::AnthropicProvider::new())),
    // Reads no environment: `env` is ignored; `keepHost` serves its Azure fixtures.
    ProviderEntry::new(&llm_openai_completions::INFO, || Arc::new(llm_openai_completions::OpenAiCompletionsProvider::new()))
        .with_env(|client, _env| Arc::new(llm_openai_completions::OpenAiCompletionsProvider::builder().http_client(client).build())),
    // One provider serves both openai-responses and azure-openai-responses (by `model.api`).
    ProviderEntry::new(&llm_openai_responses::INFO, || Arc::new(llm_openai_responses::OpenAiResponsesProvider::new()))
        .with_env(|client, env| Arc::new(llm_openai_responses::OpenAiResponsesProvider::builder().http_client(client).env(env).build())),
    // One provider serves both google-generative-ai and google-vertex (by `model.api`).
    ProviderEntry::new(&llm_google::INFO, || Arc::new(llm_google::GoogleProvider::new())),
    ProviderEntry::new(&llm_mistral::INFO, || Arc::new(llm_mistral::MistralProvider::new())),
    // `keepHost` serves its application-profile fixture (the control-plane host is a
    // provider option); a fixture's `env` replaces the process environment (SigV4 keys).
    ProviderEntry::new(&llm_bedrock::INFO, || Arc::new(llm_bedrock::BedrockProvider::new()))
        .with_env(|client, env| Arc::new(llm_bedrock::BedrockProvider::builder().http_client(client).env(env).build())),
    // new-provider: insert above
];
