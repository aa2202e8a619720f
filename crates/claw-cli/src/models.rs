//! Providers and the small model catalog `claw` knows.

use std::path::PathBuf;
use std::sync::Arc;

use llm_core::{InputModality, Model, ModelCost, Provider, api};

/// The system prompt of live runs.
pub(crate) const SYSTEM_PROMPT: &str =
    "You are claw, a helpful assistant in a terminal. Use the tools when they help; be concise.";

/// The APIs `claw` can talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProviderKind {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Chat Completions (and compatible servers with --base-url).
    Openai,
    /// OpenAI Responses.
    OpenaiResponses,
    /// Google Gemini.
    Google,
    /// Mistral.
    Mistral,
}

impl ProviderKind {
    pub(crate) fn from_api(api_id: &str) -> Option<ProviderKind> {
        Some(match api_id {
            api::ANTHROPIC_MESSAGES => ProviderKind::Anthropic,
            api::OPENAI_COMPLETIONS => ProviderKind::Openai,
            api::OPENAI_RESPONSES => ProviderKind::OpenaiResponses,
            api::GOOGLE_GENERATIVE_AI => ProviderKind::Google,
            api::MISTRAL_CONVERSATIONS => ProviderKind::Mistral,
            _ => return None,
        })
    }

    fn folder(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Openai => "openai-completions",
            ProviderKind::OpenaiResponses => "openai-responses",
            ProviderKind::Google => "google",
            ProviderKind::Mistral => "mistral",
        }
    }
}

/// The provider implementation for `kind`.
pub(crate) fn provider(kind: ProviderKind) -> Arc<dyn Provider> {
    match kind {
        ProviderKind::Anthropic => Arc::new(llm_anthropic::AnthropicProvider::new()),
        ProviderKind::Openai => Arc::new(llm_openai_completions::OpenAiCompletionsProvider::new()),
        ProviderKind::OpenaiResponses => {
            Arc::new(llm_openai_responses::OpenAiResponsesProvider::new())
        }
        ProviderKind::Google => Arc::new(llm_google::GoogleProvider::new()),
        ProviderKind::Mistral => Arc::new(llm_mistral::MistralProvider::new()),
    }
}

/// The recorded session of `kind` replayed by `claw` with no arguments, if there is one.
pub(crate) fn default_session(kind: ProviderKind) -> Option<PathBuf> {
    let root = option_env!("CARGO_MANIFEST_DIR")
        .map(|d| PathBuf::from(d).join("../../fixtures"))
        .and_then(|p| p.canonicalize().ok())
        .unwrap_or_else(|| PathBuf::from("fixtures"));
    let dir = root.join(kind.folder()).join("agent-session");
    dir.join("input.json").is_file().then_some(dir)
}

struct Entry {
    kind: ProviderKind,
    id: &'static str,
    reasoning: bool,
    context_window: u64,
    max_tokens: u64,
    cost: [f64; 4],
}

const CATALOG: &[Entry] = &[
    Entry {
        kind: ProviderKind::Anthropic,
        id: "claude-sonnet-4-5",
        reasoning: true,
        context_window: 200_000,
        max_tokens: 64_000,
        cost: [3.0, 15.0, 0.3, 3.75],
    },
    Entry {
        kind: ProviderKind::Anthropic,
        id: "claude-opus-4-1",
        reasoning: true,
        context_window: 200_000,
        max_tokens: 32_000,
        cost: [15.0, 75.0, 1.5, 18.75],
    },
    Entry {
        kind: ProviderKind::Anthropic,
        id: "claude-haiku-4-5",
        reasoning: true,
        context_window: 200_000,
        max_tokens: 64_000,
        cost: [1.0, 5.0, 0.1, 1.25],
    },
    Entry {
        kind: ProviderKind::Openai,
        id: "gpt-5-mini",
        reasoning: true,
        context_window: 400_000,
        max_tokens: 128_000,
        cost: [0.25, 2.0, 0.025, 0.0],
    },
    Entry {
        kind: ProviderKind::Openai,
        id: "gpt-5",
        reasoning: true,
        context_window: 400_000,
        max_tokens: 128_000,
        cost: [1.25, 10.0, 0.125, 0.0],
    },
    Entry {
        kind: ProviderKind::Openai,
        id: "gpt-4.1",
        reasoning: false,
        context_window: 1_047_576,
        max_tokens: 32_768,
        cost: [2.0, 8.0, 0.5, 0.0],
    },
    Entry {
        kind: ProviderKind::OpenaiResponses,
        id: "gpt-5-mini",
        reasoning: true,
        context_window: 400_000,
        max_tokens: 128_000,
        cost: [0.25, 2.0, 0.025, 0.0],
    },
    Entry {
        kind: ProviderKind::OpenaiResponses,
        id: "gpt-5",
        reasoning: true,
        context_window: 400_000,
        max_tokens: 128_000,
        cost: [1.25, 10.0, 0.125, 0.0],
    },
    Entry {
        kind: ProviderKind::Google,
        id: "gemini-2.5-flash",
        reasoning: true,
        context_window: 1_048_576,
        max_tokens: 65_536,
        cost: [0.3, 2.5, 0.075, 0.0],
    },
    Entry {
        kind: ProviderKind::Google,
        id: "gemini-2.5-pro",
        reasoning: true,
        context_window: 1_048_576,
        max_tokens: 65_536,
        cost: [1.25, 10.0, 0.31, 0.0],
    },
    Entry {
        kind: ProviderKind::Mistral,
        id: "mistral-large-latest",
        reasoning: false,
        context_window: 128_000,
        max_tokens: 32_768,
        cost: [2.0, 6.0, 0.0, 0.0],
    },
    Entry {
        kind: ProviderKind::Mistral,
        id: "mistral-medium-latest",
        reasoning: false,
        context_window: 128_000,
        max_tokens: 32_768,
        cost: [0.4, 2.0, 0.0, 0.0],
    },
    Entry {
        kind: ProviderKind::Mistral,
        id: "magistral-medium-latest",
        reasoning: true,
        context_window: 128_000,
        max_tokens: 32_768,
        cost: [2.0, 5.0, 0.0, 0.0],
    },
];

fn defaults(kind: ProviderKind) -> (&'static str, &'static str, &'static str, &'static str) {
    // (api, provider name, base url, default model)
    match kind {
        ProviderKind::Anthropic => {
            (api::ANTHROPIC_MESSAGES, "anthropic", "https://api.anthropic.com", "claude-sonnet-4-5")
        }
        ProviderKind::Openai => {
            (api::OPENAI_COMPLETIONS, "openai", "https://api.openai.com/v1", "gpt-5-mini")
        }
        ProviderKind::OpenaiResponses => {
            (api::OPENAI_RESPONSES, "openai", "https://api.openai.com/v1", "gpt-5-mini")
        }
        ProviderKind::Google => (
            api::GOOGLE_GENERATIVE_AI,
            "google",
            "https://generativelanguage.googleapis.com/v1beta",
            "gemini-2.5-flash",
        ),
        ProviderKind::Mistral => (
            api::MISTRAL_CONVERSATIONS,
            "mistral",
            "https://api.mistral.ai",
            "mistral-large-latest",
        ),
    }
}

/// The catalog entry for `id`: exact, or a dated snapshot of a known alias
/// (`claude-sonnet-4-5-20250929`, `gpt-5-2025-08-07`).
fn entry(kind: ProviderKind, id: &str) -> Option<&'static Entry> {
    let of_kind = || CATALOG.iter().filter(move |e| e.kind == kind);
    of_kind().find(|e| e.id == id).or_else(|| {
        of_kind().find(|e| {
            id.strip_prefix(e.id).and_then(|rest| rest.strip_prefix('-')).is_some_and(|date| {
                let digits: String = date.chars().filter(|c| *c != '-').collect();
                digits.len() == 8 && digits.chars().all(|c| c.is_ascii_digit())
            })
        })
    })
}

/// The model for `kind`/`id`, and a warning when the id is not in the
/// catalog (it is still used: providers add models faster than we do, and
/// compatible servers name theirs freely; prices are then unknown).
pub(crate) fn resolve(
    kind: ProviderKind,
    id: Option<&str>,
    base_url: Option<&str>,
) -> (Model, Option<String>) {
    let (api_id, provider, default_url, default_model) = defaults(kind);
    let id = id.unwrap_or(default_model);
    let entry = entry(kind, id);
    let warning = match entry {
        None if base_url.is_none() => Some(format!(
            "model `{id}` is not in claw's catalog for {}; using it anyway (context window and prices unknown; `claw models` lists the known ones)",
            kind.name()
        )),
        _ => None,
    };
    let mut model = Model {
        id: id.to_owned(),
        api: api_id.to_owned(),
        provider: provider.to_owned(),
        base_url: base_url.unwrap_or(default_url).to_owned(),
        input: vec![InputModality::Text, InputModality::Image],
        context_window: 128_000,
        max_tokens: 8192,
        ..Model::default()
    };
    if let Some(e) = entry {
        model.reasoning = e.reasoning;
        model.context_window = e.context_window;
        model.max_tokens = e.max_tokens.min(16_384);
        let [input, output, cache_read, cache_write] = e.cost;
        model.cost = ModelCost { input, output, cache_read, cache_write };
    }
    (model, warning)
}

/// The provider's own API base URL.
pub(crate) fn default_base_url(kind: ProviderKind) -> &'static str {
    defaults(kind).2
}

/// Every known model as a table (`claw models`).
pub(crate) fn table() -> String {
    let mut out = format!(
        "{:<17} {:<25} {:>9} {:>10} {:>8} {:>8} {:>10} {:>11}\n",
        "PROVIDER",
        "MODEL",
        "CONTEXT",
        "MAX OUT",
        "IN $/M",
        "OUT $/M",
        "CACHE R $/M",
        "CACHE W $/M"
    );
    for kind in ProviderKind::ALL {
        for e in CATALOG.iter().filter(|e| e.kind == kind) {
            let [input, output, cache_read, cache_write] = e.cost;
            let default = if defaults(kind).3 == e.id { " (default)" } else { "" };
            out.push_str(&format!(
                "{:<17} {:<25} {:>9} {:>10} {:>8.3} {:>8.3} {:>10.3} {:>11.3}\n",
                kind.name(),
                format!("{}{default}", e.id),
                e.context_window,
                e.max_tokens,
                input,
                output,
                cache_read,
                cache_write
            ));
        }
    }
    out
}

impl ProviderKind {
    /// Every provider, in `--help` order.
    pub(crate) const ALL: [ProviderKind; 5] = [
        ProviderKind::Anthropic,
        ProviderKind::Openai,
        ProviderKind::OpenaiResponses,
        ProviderKind::Google,
        ProviderKind::Mistral,
    ];

    /// The environment variables holding this provider's key, in the order they are read.
    pub(crate) fn key_vars(self) -> &'static [&'static str] {
        match self {
            ProviderKind::Anthropic => &["ANTHROPIC_API_KEY"],
            ProviderKind::Openai | ProviderKind::OpenaiResponses => &["OPENAI_API_KEY"],
            ProviderKind::Google => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
            ProviderKind::Mistral => &["MISTRAL_API_KEY"],
        }
    }

    /// The name used on the command line and in transcripts.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Openai => "openai",
            ProviderKind::OpenaiResponses => "openai-responses",
            ProviderKind::Google => "google",
            ProviderKind::Mistral => "mistral",
        }
    }

    /// The provider named `name` (as `--provider` spells it).
    pub(crate) fn from_name(name: &str) -> Option<ProviderKind> {
        ProviderKind::ALL.into_iter().find(|k| k.name() == name.trim())
    }
}

/// Every API key value in the environment (to keep them out of tool output).
pub(crate) fn secrets_in_env() -> Vec<String> {
    let mut out: Vec<String> = ProviderKind::ALL
        .iter()
        .flat_map(|k| k.key_vars())
        .filter_map(|v| crate::config::env(v))
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dated_ids_take_their_alias_prices_and_unknown_ids_warn() {
        let (m, warning) =
            resolve(ProviderKind::Anthropic, Some("claude-sonnet-4-5-20250929"), None);
        assert_eq!((m.cost.input, m.context_window, warning), (3.0, 200_000, None));
        let (m, warning) = resolve(ProviderKind::Openai, Some("gpt-5-mini-2025-08-07"), None);
        assert_eq!((m.cost.output, warning), (2.0, None));
        let (m, warning) = resolve(ProviderKind::Openai, Some("gpt-7-preview"), None);
        assert_eq!((m.id.as_str(), m.cost.input), ("gpt-7-preview", 0.0));
        assert!(warning.is_some_and(|w| w.contains("gpt-7-preview") && w.contains("claw models")));
        // Not a date: not the alias.
        assert!(resolve(ProviderKind::Openai, Some("gpt-5-mini-fast"), None).1.is_some());
        // Compatible servers name models freely: no warning.
        assert!(
            resolve(ProviderKind::Openai, Some("llama3"), Some("http://127.0.0.1:1/v1"))
                .1
                .is_none()
        );
    }
}
