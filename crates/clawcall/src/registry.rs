//! The provider crates this build carries (one cargo feature each), and models by
//! catalog id (`"anthropic/claude-sonnet-4-5"`).

use std::collections::BTreeMap;
use std::sync::Arc;

use agent_core::AgentConfig;
use llm_core::{ApiKey, DebugProvider, Model, Provider, ProviderInfo};

/// Makes a provider on `client` that reads `env` instead of the process environment
/// (a provider that reads no environment ignores it); it prints itself, so xtask's secret scan
/// checks the `Debug` of every registered provider.
pub type MakeWith = fn(reqwest::Client, BTreeMap<String, String>) -> Arc<dyn DebugProvider>;

/// One provider: what its crate declares, and how to make it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ProviderEntry {
    /// What the crate declares (name, API id, base URL, key variables, models).
    pub info: &'static ProviderInfo,
    /// A fresh provider on the shared HTTP client and the process environment.
    pub make: fn() -> Arc<dyn Provider>,
    /// A fresh provider on a given client and environment (tests, loopback replays).
    pub make_with: MakeWith,
    /// Other names it answers to (`openai` for `openai-completions`).
    pub aliases: &'static [&'static str],
    /// Whether the crate finds credentials itself when no key variable is set (Bedrock
    /// signs with SigV4 from the AWS environment or a profile).
    pub key_optional: bool,
    /// Secret variables the crate reads besides `info.key_env`: keep them out of tool
    /// output and child environments like the keys.
    pub other_secrets: &'static [&'static str],
    /// Whether this is the crate's own `INFO` (its `fixtures/<name>/` column); `false`
    /// for a second API the same crate serves (Azure OpenAI, by `openai-responses`).
    pub primary: bool,
}

impl ProviderEntry {
    /// The entry of a crate's `INFO`, its constructor and one on a client and environment.
    pub const fn new(
        info: &'static ProviderInfo,
        make: fn() -> Arc<dyn Provider>,
        make_with: MakeWith,
    ) -> Self {
        ProviderEntry {
            info,
            make,
            make_with,
            aliases: &[],
            key_optional: false,
            other_secrets: &[],
            primary: true,
        }
    }

    /// The same entry answering to `aliases` too.
    pub const fn aliases(self, aliases: &'static [&'static str]) -> Self {
        ProviderEntry { aliases, ..self }
    }

    /// The same entry, for a crate that finds credentials itself when no key is set.
    pub const fn key_optional(self, other_secrets: &'static [&'static str]) -> Self {
        ProviderEntry { key_optional: true, other_secrets, ..self }
    }

    /// The same entry, for a second API of a crate whose own `INFO` has an entry.
    pub const fn secondary(self) -> Self {
        ProviderEntry { primary: false, ..self }
    }

    /// The name it is registered under (`INFO.name`).
    pub fn name(&self) -> &'static str {
        self.info.name
    }

    /// Whether it answers to `name` (its `INFO.name` or an alias).
    pub fn answers_to(&self, name: &str) -> bool {
        self.info.name == name || self.aliases.contains(&name)
    }

    /// A fresh provider.
    pub fn provider(&self) -> Arc<dyn Provider> {
        (self.make)()
    }

    /// Every model id of its catalog, as `name/model`.
    pub fn ids(&self) -> impl Iterator<Item = String> + '_ {
        self.info.models.iter().map(|m| format!("{}/{}", self.info.name, m.id))
    }

    /// The key from the first of `info.key_env` that is set and not blank.
    pub fn key_from_env(&self) -> Option<ApiKey> {
        llm_http::Env::Process.api_key(self.info).map(ApiKey::new)
    }
}

/// Every provider this build carries, in a stable order (the first is the default).
#[rustfmt::skip]
pub const PROVIDERS: &[ProviderEntry] = &[
    #[cfg(feature = "anthropic")]
    ProviderEntry::new(&llm_anthropic::INFO, || Arc::new(llm_anthropic::AnthropicProvider::new()),
        |client, _env| Arc::new(llm_anthropic::AnthropicProvider::builder().http_client(client).build())),
    #[cfg(feature = "openai-completions")]
    ProviderEntry::new(&llm_openai_completions::INFO, || Arc::new(llm_openai_completions::OpenAiCompletionsProvider::new()),
        |client, _env| Arc::new(llm_openai_completions::OpenAiCompletionsProvider::builder().http_client(client).build()))
        .aliases(&["openai"]),
    // One provider serves both openai-responses and azure-openai-responses (by `model.api`).
    #[cfg(feature = "openai-responses")]
    ProviderEntry::new(&llm_openai_responses::INFO, || Arc::new(llm_openai_responses::OpenAiResponsesProvider::new()),
        |client, env| Arc::new(llm_openai_responses::OpenAiResponsesProvider::builder().http_client(client).env(env).build())),
    #[cfg(feature = "openai-responses")]
    ProviderEntry::new(&llm_openai_responses::AZURE_INFO, || Arc::new(llm_openai_responses::OpenAiResponsesProvider::builder().wire(llm_openai_responses::OpenAiResponses::Azure).build()),
        |client, env| Arc::new(llm_openai_responses::OpenAiResponsesProvider::builder().wire(llm_openai_responses::OpenAiResponses::Azure).http_client(client).env(env).build()))
        .secondary(),
    // One provider serves both google-generative-ai and google-vertex (by `model.api`).
    #[cfg(feature = "google")]
    ProviderEntry::new(&llm_google::INFO, || Arc::new(llm_google::GoogleProvider::new()),
        |client, _env| Arc::new(llm_google::GoogleProvider::builder().http_client(client).build())),
    #[cfg(feature = "mistral")]
    ProviderEntry::new(&llm_mistral::INFO, || Arc::new(llm_mistral::MistralProvider::new()),
        |client, _env| Arc::new(llm_mistral::MistralProvider::builder().http_client(client).build())),
    #[cfg(feature = "bedrock")]
    ProviderEntry::new(&llm_bedrock::INFO, || Arc::new(llm_bedrock::BedrockProvider::new()),
        |client, env| Arc::new(llm_bedrock::BedrockProvider::builder().http_client(client).env(env).build()))
        .key_optional(&["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"]),
    // new-provider: insert above
];

/// Why a model id or provider name was not found, or a key is missing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The id has no `provider/` part.
    #[error("`{id}` is not a catalog id: write provider/model, such as {}", examples(.close))]
    NotAnId {
        /// The id as given.
        id: String,
        /// Known ids whose model part is closest.
        close: Vec<String>,
    },
    /// No provider of this build answers to the name.
    #[error("no provider `{name}` in this build (known: {}); a provider crate is a cargo feature of clawcall", .known.join(", "))]
    UnknownProvider {
        /// The name as given.
        name: String,
        /// Every provider name of this build.
        known: Vec<&'static str>,
    },
    /// The provider's catalog has no such model.
    #[error("unknown model `{id}`: known ids close to it are {}", examples(.close))]
    UnknownModel {
        /// The id as given.
        id: String,
        /// Known ids closest to it, closest first.
        close: Vec<String>,
    },
    /// No key variable of the provider is set.
    #[error("no API key for {provider}: set {}", .variables.join(" or "))]
    MissingKey {
        /// The provider (`INFO.name`).
        provider: &'static str,
        /// The variables read, in order.
        variables: &'static [&'static str],
    },
}

fn examples(ids: &[String]) -> String {
    if ids.is_empty() { "none".to_owned() } else { ids.join(", ") }
}

/// The entry answering to `name` (an `INFO.name` or an alias).
pub fn provider(name: &str) -> Result<&'static ProviderEntry, Error> {
    PROVIDERS.iter().find(|e| e.answers_to(name)).ok_or_else(|| Error::UnknownProvider {
        name: name.to_owned(),
        known: PROVIDERS.iter().map(ProviderEntry::name).collect(),
    })
}

/// The entry serving API id `api` (its primary entry when a crate serves several).
pub fn provider_for_api(api: &str) -> Option<&'static ProviderEntry> {
    PROVIDERS.iter().find(|e| e.info.api == api)
}

/// Every catalog id of this build (`provider/model`), in registry order.
pub fn known_ids() -> Vec<String> {
    PROVIDERS.iter().flat_map(ProviderEntry::ids).collect()
}

/// A catalog model with the provider that serves it.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The provider's entry.
    pub entry: &'static ProviderEntry,
    /// The model with its catalog prices and limits, on the default base URL.
    pub model: Model,
}

impl Resolved {
    /// A fresh provider for the model.
    pub fn provider(&self) -> Arc<dyn Provider> {
        self.entry.provider()
    }

    /// An agent configuration with the key from the environment ([`ProviderEntry::key_from_env`]);
    /// no key is an error unless the provider finds credentials itself.
    pub fn agent_config(&self) -> Result<AgentConfig, Error> {
        let mut config = AgentConfig::new(self.model.clone(), self.provider());
        config.options.api_key = self.entry.key_from_env();
        if config.options.api_key.is_none() && !self.entry.key_optional {
            return Err(Error::MissingKey {
                provider: self.entry.info.name,
                variables: self.entry.info.key_env,
            });
        }
        Ok(config)
    }
}

/// The model `id` (`provider/model`, as [`known_ids`] lists) and its provider.
pub fn resolve(id: &str) -> Result<Resolved, Error> {
    let id = id.trim();
    let Some((name, model_id)) = id.split_once('/') else {
        return Err(Error::NotAnId { id: id.to_owned(), close: close_ids(id) });
    };
    let entry = provider(name)?;
    match entry.info.model(model_id) {
        Some(model) => Ok(Resolved { entry, model }),
        None => {
            let wanted = format!("{}/{model_id}", entry.info.name);
            Err(Error::UnknownModel { id: id.to_owned(), close: close_ids(&wanted) })
        }
    }
}

/// The model `id` with its catalog prices and limits ([`resolve`]).
pub fn model(id: &str) -> Result<Model, Error> {
    resolve(id).map(|r| r.model)
}

/// An agent configuration for model `id`: its provider, and the key from the environment.
pub fn agent_config(id: &str) -> Result<AgentConfig, Error> {
    resolve(id)?.agent_config()
}

/// Up to three known ids closest to `wanted` (edit distance to the whole id or to its
/// model part), closest first; a far one is not suggested.
fn close_ids(wanted: &str) -> Vec<String> {
    let mut scored: Vec<(usize, String)> = known_ids()
        .into_iter()
        .map(|known| {
            let model_part = known.split_once('/').map_or(known.as_str(), |(_, m)| m);
            let d = distance(wanted, &known).min(distance(wanted, model_part));
            (d, known)
        })
        .filter(|(d, _)| *d <= wanted.chars().count().div_ceil(2).max(3))
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, id)| id).collect()
}

/// Levenshtein distance over chars.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = i;
        let mut left = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let up = row.get(j + 1).copied().unwrap_or(usize::MAX);
            let next = if ca == *cb { diagonal } else { 1 + diagonal.min(up).min(left) };
            diagonal = up;
            if let Some(cell) = row.get_mut(j + 1) {
                *cell = next;
            }
            left = next;
        }
        if let Some(first) = row.first_mut() {
            *first = i + 1;
        }
    }
    row.last().copied().unwrap_or(0)
}

#[cfg(test)]
mod tests;
