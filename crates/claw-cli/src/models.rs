//! The providers `claw` offers and their models, read from each crate's `INFO`
//! (registered in [`PROVIDERS`]), with claw's own behaviour on top: older
//! spellings (the entries' aliases), dated model ids priced as their alias, unknown ids
//! used with a warning.

use std::sync::{Arc, LazyLock};

use llm_core::{InputModality, Model, ModelInfo, Provider, ProviderInfo};

use crate::providers::{PROVIDERS, Registered};

/// The system prompt of live runs.
pub(crate) const SYSTEM_PROMPT: &str =
    "You are claw, a helpful assistant in a terminal. Use the tools when they help; be concise.";

/// A provider `claw` can talk to: an entry of [`PROVIDERS`] (names, key
/// variables and models come from the crate's exported `INFO`), under the
/// name it was chosen by (its `INFO.name` or an alias of its entry).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProviderKind {
    registered: &'static Registered,
    name: &'static str,
}

/// Two spellings of one provider are the same provider.
impl PartialEq for ProviderKind {
    fn eq(&self, other: &Self) -> bool {
        self.info().name == other.info().name
    }
}

impl Eq for ProviderKind {}

/// Every registered provider under its `INFO.name`, then every alias.
static KINDS: LazyLock<Vec<ProviderKind>> = LazyLock::new(|| {
    let mut kinds: Vec<ProviderKind> =
        PROVIDERS.iter().map(|r| ProviderKind { registered: r, name: r.info.name }).collect();
    for r in PROVIDERS {
        kinds.extend(r.aliases.iter().map(|alias| ProviderKind { registered: r, name: alias }));
    }
    kinds
});

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
        // Aliases are accepted but `--help` lists the crate names.
        let alias = self.name != self.info().name;
        Some(clap::builder::PossibleValue::new(self.name).hide(alias))
    }
}

impl ProviderKind {
    /// Every registered provider (under its `INFO.name`), in `--help` order.
    pub(crate) fn all() -> impl Iterator<Item = ProviderKind> {
        KINDS.iter().copied().filter(|k| k.name == k.info().name)
    }

    /// The default: the first registered provider.
    pub(crate) fn first() -> ProviderKind {
        // PROVIDERS is never empty (claw registers at least one provider crate).
        Self::all().next().unwrap_or_else(|| unreachable!("no provider is registered"))
    }

    fn info(self) -> &'static ProviderInfo {
        self.registered.info
    }

    /// The provider named `name` (an `INFO.name` or an alias, as `--provider` spells it).
    pub(crate) fn from_name(name: &str) -> Option<ProviderKind> {
        KINDS.iter().copied().find(|k| k.name == name.trim())
    }

    /// The provider serving `api_id` (under its `INFO.name`).
    pub(crate) fn from_api(api_id: &str) -> Option<ProviderKind> {
        Self::all().find(|k| k.info().api == api_id)
    }

    /// The name it was chosen by: used on the command line, in messages and transcripts.
    pub(crate) fn name(self) -> &'static str {
        self.name
    }

    /// The crate's own name (`INFO.name`): the `sessions/<name>/` folder of its recording.
    pub(crate) fn crate_name(self) -> &'static str {
        self.info().name
    }

    /// Every name this provider answers to (its `INFO.name` and aliases).
    pub(crate) fn names(self) -> impl Iterator<Item = &'static str> {
        KINDS.iter().filter(move |k| **k == self).map(|k| k.name)
    }

    /// The environment variables holding this provider's key, in the order they are read.
    pub(crate) fn key_vars(self) -> &'static [&'static str] {
        self.info().key_env
    }

    /// The key variables and the other secret variables the crate reads
    /// ([`clawcall::ProviderEntry::other_secrets`]).
    pub(crate) fn secret_vars(self) -> impl Iterator<Item = &'static str> {
        self.key_vars().iter().chain(self.registered.other_secrets).copied()
    }

    /// Whether the crate authenticates without a key ([`clawcall::ProviderEntry::key_optional`]).
    pub(crate) fn key_optional(self) -> bool {
        self.registered.key_optional
    }

    /// Whether the provider can run with what the environment gives it
    /// ([`crate::providers::PREFLIGHT`]); the error names what to set.
    pub(crate) fn preflight(
        self,
        model: &Model,
        options: &llm_core::StreamOptions,
    ) -> Result<(), String> {
        let name = self.info().name;
        match crate::providers::PREFLIGHT.iter().find(|(n, _)| *n == name) {
            Some((_, check)) => check(model, options),
            None => Ok(()),
        }
    }

    /// Whether the crate declares tool support (a provider that does not is sent no tools).
    pub(crate) fn declares_tools(self) -> bool {
        self.info().capabilities.contains(llm_core::Capability::Tools)
    }

    /// How `model_id` carries a structured output format (its crate's `INFO.output`).
    pub(crate) fn output_mode(self, model_id: &str) -> llm_core::output::OutputMode {
        self.info().output_mode(model_id)
    }

    /// The provider's own API base URL.
    pub(crate) fn default_base_url(self) -> &'static str {
        self.info().default_base_url
    }
}

/// The provider implementation for `kind`.
pub(crate) fn provider(kind: ProviderKind) -> Arc<dyn Provider> {
    kind.registered.provider()
}

/// Whether `id` is `alias` followed by a date (`-20250929`, `-2025-08-07`).
fn is_dated(id: &str, alias: &str) -> bool {
    id.strip_prefix(alias).and_then(|rest| rest.strip_prefix('-')).is_some_and(|date| {
        let digits: String = date.chars().filter(|c| *c != '-').collect();
        digits.len() == 8 && digits.chars().all(|c| c.is_ascii_digit())
    })
}

/// The crate's model entry for `id`: exact, or a dated snapshot of a known alias
/// (`claude-sonnet-4-5-20250929`, `gpt-5-2025-08-07`).
fn entry(info: &'static ProviderInfo, id: &str) -> Option<&'static ModelInfo> {
    info.models
        .iter()
        .find(|m| m.id == id)
        .or_else(|| info.models.iter().find(|m| is_dated(id, m.id)))
}

/// The model for `kind`/`id` (default: the crate's first model), and a warning
/// when the id is not in the crate's model list (it is still used: providers add
/// models faster than we do, and compatible servers name theirs freely; prices
/// are then unknown).
pub(crate) fn resolve(
    kind: ProviderKind,
    id: Option<&str>,
    base_url: Option<&str>,
) -> (Model, Option<String>) {
    let info = kind.info();
    let id = id.or_else(|| info.models.first().map(|m| m.id)).unwrap_or_default();
    let known = entry(info, id);
    let warning = match known {
        None if base_url.is_none() => Some(format!(
            "model `{id}` is not in claw's catalog for {}; using it anyway (context window and prices unknown; `claw models` lists the known ones)",
            kind.name()
        )),
        _ => None,
    };
    let mut model = match known.and_then(|m| info.model(m.id)) {
        Some(mut model) => {
            model.max_tokens = model.max_tokens.min(16_384);
            model
        }
        None => Model {
            api: info.api.to_owned(),
            provider: info.provider.to_owned(),
            input: vec![InputModality::Text, InputModality::Image],
            context_window: 128_000,
            max_tokens: 8192,
            ..Model::default()
        },
    };
    id.clone_into(&mut model.id);
    model.base_url = base_url.unwrap_or(info.default_base_url).to_owned();
    (model, warning)
}

/// Every known model as a table (`claw models`).
pub(crate) fn table() -> String {
    let mut out = format!(
        "{:<23} {:<25} {:>9} {:>10} {:>8} {:>8} {:>10} {:>11}\n",
        "PROVIDER",
        "MODEL",
        "CONTEXT",
        "MAX OUT",
        "IN $/M",
        "OUT $/M",
        "CACHE R $/M",
        "CACHE W $/M"
    );
    for kind in ProviderKind::all() {
        for (i, m) in kind.info().models.iter().enumerate() {
            let default = if i == 0 { " (default)" } else { "" };
            out.push_str(&format!(
                "{:<23} {:<25} {:>9} {:>10} {:>8.3} {:>8.3} {:>10.3} {:>11.3}\n",
                kind.name(),
                format!("{}{default}", m.id),
                m.context_window,
                m.max_tokens,
                m.cost.input,
                m.cost.output,
                m.cost.cache_read,
                m.cost.cache_write
            ));
        }
    }
    out
}

/// Where each provider's key is read from, for `--help`: one line per provider,
/// with every name `--provider` takes for it.
pub(crate) fn key_help() -> String {
    let lines: Vec<String> = ProviderKind::all()
        .map(|kind| {
            let names: Vec<&str> = kind.names().collect();
            format!("  {:<28} {}", names.join(", "), kind.key_vars().join(" or "))
        })
        .collect();
    lines.join("\n")
}

/// Every API key value in the environment (to keep them out of tool output).
pub(crate) fn secrets_in_env() -> Vec<String> {
    let mut out: Vec<String> = ProviderKind::all()
        .flat_map(ProviderKind::secret_vars)
        .filter_map(crate::config::env)
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(name: &str) -> ProviderKind {
        ProviderKind::from_name(name).unwrap_or_else(|| panic!("{name} is registered"))
    }

    #[test]
    fn dated_ids_take_their_alias_prices_and_unknown_ids_warn() {
        let (m, warning) = resolve(kind("anthropic"), Some("claude-sonnet-4-5-20250929"), None);
        assert_eq!((m.cost.input, m.context_window, warning), (3.0, 200_000, None));
        assert_eq!(m.id, "claude-sonnet-4-5-20250929");
        let (m, warning) = resolve(kind("openai"), Some("gpt-5-mini-2025-08-07"), None);
        assert_eq!((m.cost.output, warning), (2.0, None));
        let (m, warning) = resolve(kind("openai"), Some("gpt-7-preview"), None);
        assert_eq!((m.id.as_str(), m.cost.input), ("gpt-7-preview", 0.0));
        assert!(warning.is_some_and(|w| w.contains("gpt-7-preview") && w.contains("claw models")));
        // Not a date: not the alias.
        assert!(resolve(kind("openai"), Some("gpt-5-mini-fast"), None).1.is_some());
        // Compatible servers name models freely: no warning.
        assert!(resolve(kind("openai"), Some("llama3"), Some("http://127.0.0.1:1/v1")).1.is_none());
    }

    #[test]
    fn names_come_from_info_and_aliases_keep_their_spelling() {
        let names: Vec<&str> = ProviderKind::all().map(ProviderKind::name).collect();
        let infos: Vec<&str> = PROVIDERS.iter().map(|r| r.info.name).collect();
        assert_eq!(names, infos);
        assert_eq!(Some(ProviderKind::first().name()), infos.first().copied());
        let openai = kind("openai");
        assert_eq!(openai.name(), "openai");
        assert_eq!(openai.crate_name(), "openai-completions");
        assert_eq!(openai, kind("openai-completions"));
        assert_eq!(kind("google").key_vars(), &["GEMINI_API_KEY", "GOOGLE_API_KEY"]);
        assert!(ProviderKind::from_name("openia").is_none());
        let (m, _) = resolve(kind("mistral"), None, None);
        assert_eq!(
            (m.id.as_str(), m.base_url.as_str()),
            ("mistral-large-latest", "https://api.mistral.ai")
        );
    }

    #[test]
    fn bedrock_runs_without_a_key_and_its_aws_secrets_are_secrets() {
        let bedrock = kind("bedrock");
        assert!(bedrock.key_optional());
        assert!(!kind("anthropic").key_optional());
        let vars: Vec<&str> = bedrock.secret_vars().collect();
        assert_eq!(
            vars,
            ["AWS_BEARER_TOKEN_BEDROCK", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"]
        );
        assert_eq!(kind("google").secret_vars().collect::<Vec<_>>(), kind("google").key_vars());
        let (m, _) = resolve(bedrock, None, None);
        assert_eq!(m.api, llm_bedrock::API);
        assert_eq!(m.id, "us.anthropic.claude-sonnet-4-5-20250929-v1:0");
    }
}
