//! The providers `claw` offers and their models, read from each crate's `INFO`.

use std::sync::Arc;

use llm_core::{InputModality, Model, Provider, ProviderInfo};

use crate::providers::{ALIASES, PROVIDERS, Registered};

/// The system prompt of live runs.
pub(crate) const SYSTEM_PROMPT: &str =
    "You are claw, a helpful assistant in a terminal. Use the tools when they help; be concise.";

/// A provider `claw` can talk to: an entry of [`PROVIDERS`], whose names, key
/// variables and models come from each crate's exported `INFO`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProviderKind(&'static Registered);

impl PartialEq for ProviderKind {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for ProviderKind {}

/// One kind per registered provider, for clap.
#[allow(clippy::indexing_slicing, reason = "i < PROVIDERS.len(); a const block cannot iterate")]
const KINDS: [ProviderKind; PROVIDERS.len()] = {
    let mut kinds = [ProviderKind(&PROVIDERS[0]); PROVIDERS.len()];
    let mut i = 0;
    while i < PROVIDERS.len() {
        kinds[i] = ProviderKind(&PROVIDERS[i]);
        i += 1;
    }
    kinds
};

/// The first registered provider (a compile error if there is none).
#[allow(clippy::indexing_slicing, reason = "checked at compile time")]
const FIRST: ProviderKind = KINDS[0];

impl Default for ProviderKind {
    /// The first registered provider.
    fn default() -> Self {
        FIRST
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl clap::ValueEnum for ProviderKind {
    fn value_variants<'a>() -> &'a [Self] {
        &KINDS
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let name = self.name();
        let aliases = ALIASES.iter().filter(|(_, target)| *target == name).map(|(alias, _)| *alias);
        Some(clap::builder::PossibleValue::new(name).aliases(aliases))
    }
}

impl ProviderKind {
    fn registered(self) -> &'static Registered {
        self.0
    }

    fn info(self) -> &'static ProviderInfo {
        self.registered().info
    }

    /// The provider serving `api_id`.
    pub(crate) fn from_api(api_id: &str) -> Option<ProviderKind> {
        KINDS.iter().copied().find(|k| k.info().api == api_id)
    }

    /// Its name (`--provider`, the fixture folder).
    pub(crate) fn name(self) -> &'static str {
        self.info().name
    }

    /// The environment variable that holds its key (the first the crate lists).
    pub(crate) fn key_var(self) -> &'static str {
        self.info().key_env.first().copied().unwrap_or("API_KEY")
    }
}

/// The provider implementation for `kind`.
pub(crate) fn provider(kind: ProviderKind) -> Arc<dyn Provider> {
    (kind.registered().make)()
}

/// The model for `kind`/`id` from the crate's model list. An unknown id is an
/// error unless a base URL is given (compatible servers name their models freely).
pub(crate) fn resolve(
    kind: ProviderKind,
    id: Option<&str>,
    base_url: Option<&str>,
) -> Result<Model, String> {
    let info = kind.info();
    let known = || info.models.iter().map(|m| m.id).collect::<Vec<_>>().join(", ");
    let Some(id) = id.or_else(|| info.models.first().map(|m| m.id)) else {
        return Err(format!("provider {} lists no model; pass --model", info.name));
    };
    let mut model = match info.model(id) {
        Some(mut model) => {
            model.max_tokens = model.max_tokens.min(16_384);
            model
        }
        None if base_url.is_some() => Model {
            id: id.to_owned(),
            api: info.api.to_owned(),
            provider: info.provider.to_owned(),
            input: vec![InputModality::Text, InputModality::Image],
            context_window: 128_000,
            max_tokens: 8192,
            ..Model::default()
        },
        None => {
            return Err(format!(
                "unknown model `{id}` for provider {}; known models: {} (or pass --base-url for a compatible server)",
                info.name,
                known()
            ));
        }
    };
    model.base_url = base_url.unwrap_or(info.default_base_url).to_owned();
    Ok(model)
}
