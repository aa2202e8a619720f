//! Which Claude a Bedrock model id names: thinking style, effort levels,
//! prompt-cache support and the temperature rule all depend on it.
//!
//! Bedrock ids wrap the Claude name in a region prefix, a vendor prefix and a version
//! suffix (`us.anthropic.claude-opus-4-6-v1:0`), or hide it in an application inference
//! profile ARN; the model's display name (`Model::name`) is then the fallback.

use std::collections::BTreeMap;

use llm_core::{Error, Model};
use serde::Deserialize;

use crate::PROVIDER;

/// Per-model compatibility flags, parsed from `Model::compat` (camelCase keys; every field
/// optional; unknown keys ignored; a known key of the wrong type is an `invalid_request`
/// error naming it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BedrockCompat {
    /// The Claude model behind an alias or an application inference profile
    /// (`claude-fable-5`): the model is classified by this id instead of its own.
    pub canonical_model_id: Option<String>,
    /// Reasoning level (`minimal` … `max`) to the wire effort of adaptive thinking; `null`
    /// for `xhigh` or `max` means `high`. Levels not listed take the model's own efforts.
    pub thinking_level_map: BTreeMap<String, Option<String>>,
}

impl BedrockCompat {
    /// `model.compat`, typed.
    pub fn from_model(model: &Model) -> Result<Self, Error> {
        model.typed_compat(PROVIDER)
    }
}

/// What this crate needs to know about the target model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ClaudeTraits {
    /// A Claude model (signatures replayed, thinking fields sent).
    pub(crate) claude: bool,
    /// Claude Fable 5.
    pub(crate) fable: bool,
    /// Adaptive thinking (`thinking.type = adaptive` with an effort) instead of a budget.
    pub(crate) adaptive: bool,
    /// Adaptive thinking is mandatory (Mythos Preview): reasoning defaults to `high`.
    pub(crate) mandatory_adaptive: bool,
    /// Effort `xhigh` is native.
    pub(crate) native_xhigh: bool,
    /// Effort `max` is native (Bedrock's policy: Fable 5 and Opus 4.6-4.8).
    pub(crate) native_max: bool,
    /// Bedrock rejects `temperature` (Opus 4.7/4.8, Fable 5, Mythos Preview).
    pub(crate) rejects_temperature: bool,
    /// Prompt caching (cache points) is supported.
    pub(crate) caching: bool,
}

impl ClaudeTraits {
    /// Classifies `model` (`compat.canonical_model_id` names the real model behind an alias).
    pub(crate) fn of(model: &Model, compat: &BedrockCompat) -> Self {
        let identity = identity(compat.canonical_model_id.as_deref().unwrap_or(&model.id));
        let from_name = profile_name_id(&model.name);
        let candidates: Vec<&str> =
            std::iter::once(identity.as_str()).chain(from_name.as_deref()).collect();
        let any = |families: &[&str]| candidates.iter().any(|c| has_family(c, families));
        let fable = has_family(&identity, &["fable-5"]);
        let mythos = any(&["mythos-preview"]);
        let lower_id = model.id.to_ascii_lowercase();
        let lower_name = model.name.to_ascii_lowercase();
        let claude = fable
            || identity.starts_with("claude-")
            || ["anthropic.claude", "anthropic/claude"]
                .iter()
                .any(|m| lower_id.contains(m) || lower_name.contains(m))
            || lower_name.contains("claude");
        let opus_47_48 = any(&["opus-4-7", "opus-4-8"]);
        ClaudeTraits {
            claude,
            fable,
            adaptive: fable
                || mythos
                || any(&["fable-5", "opus-4-6", "opus-4-7", "opus-4-8", "sonnet-4-6"]),
            mandatory_adaptive: mythos,
            native_xhigh: any(&["fable-5", "opus-4-7", "opus-4-8"]),
            native_max: any(&["fable-5", "opus-4-6", "opus-4-7", "opus-4-8"]),
            rejects_temperature: fable || mythos || opus_47_48,
            caching: fable || supports_cache(model, &identity),
        }
    }
}

/// Lower-cased, `anthropic/` stripped, runs of `[._\s]` as `-`, cut to start at the first
/// `claude-` that begins the string or follows `-` or `/` (colons kept).
pub(crate) fn identity(id: &str) -> String {
    let lower = id.trim().to_ascii_lowercase();
    let lower = lower.strip_prefix("anthropic/").unwrap_or(&lower);
    let normalized = collapse(lower, |c| matches!(c, '.' | '_') || c.is_whitespace());
    let mut from = 0;
    while let Some(at) = normalized.get(from..).and_then(|s| s.find("claude-")).map(|i| i + from) {
        let before = normalized.get(..at).and_then(|s| s.chars().last());
        if matches!(before, None | Some('-' | '/')) {
            return normalized.get(at..).unwrap_or_default().to_owned();
        }
        from = at + 1;
    }
    normalized
}

/// Replaces each run of characters matching `sep` with one `-`.
fn collapse(text: &str, sep: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_run = false;
    for c in text.chars() {
        if sep(c) {
            if !in_run {
                out.push('-');
            }
            in_run = true;
        } else {
            out.push(c);
            in_run = false;
        }
    }
    out
}

/// For an opaque id: `claude-<family>` derived from a display name such as
/// `Claude Production Opus 4.8`.
fn profile_name_id(name: &str) -> Option<String> {
    let normalized =
        collapse(&name.to_ascii_lowercase(), |c| matches!(c, '.' | '_' | ':') || c.is_whitespace());
    if !normalized.contains("claude") {
        return None;
    }
    FAMILIES.iter().find_map(|family| {
        normalized.match_indices(family).find_map(|(at, _)| {
            let after = normalized.get(at + family.len()..).and_then(|s| s.chars().next());
            matches!(after, None | Some('-')).then(|| format!("claude-{family}"))
        })
    })
}

const FAMILIES: [&str; 5] = ["fable-5", "mythos-preview", "opus-4-6", "opus-4-7", "opus-4-8"];

/// Whether `identity` contains `claude-<family>` at a boundary for one of `families`.
fn has_family(identity: &str, families: &[&str]) -> bool {
    families.iter().any(|family| {
        let needle = format!("claude-{family}");
        identity.match_indices(&needle).any(|(at, _)| {
            let before = identity.get(..at).and_then(|s| s.chars().last());
            let after = identity.get(at + needle.len()..).and_then(|s| s.chars().next());
            matches!(before, None | Some('-' | '/'))
                && !after.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
    })
}

/// Which models cache: Claude 4.x, 3.7 Sonnet and 3.5 Haiku cache; other Claude and
/// non-Claude models do not, except an application-profile ARN whose profile name says
/// Claude.
fn supports_cache(model: &Model, identity: &str) -> bool {
    let normalize = |s: &str| {
        collapse(&s.to_ascii_lowercase(), |c| matches!(c, '.' | '_' | ':') || c.is_whitespace())
    };
    let candidates = [
        model.id.to_ascii_lowercase(),
        normalize(&model.id),
        identity.to_owned(),
        normalize(&model.name),
    ];
    if let Some(profile) = app_profile_name(&model.id)
        && profile.to_ascii_lowercase().contains("claude")
    {
        return true;
    }
    if !candidates.iter().any(|c| c.contains("claude")) {
        return false;
    }
    candidates.iter().any(|c| {
        ["-4-", "claude-fable-5", "claude-3-7-sonnet", "claude-3-5-haiku"]
            .iter()
            .any(|marker| c.contains(marker))
    })
}

/// The profile segment of `arn:aws…:bedrock:…:application-inference-profile/<name>`.
fn app_profile_name(id: &str) -> Option<&str> {
    if !id.starts_with("arn:aws") {
        return None;
    }
    id.split_once(":application-inference-profile/").map(|(_, name)| name)
}

#[cfg(test)]
mod tests;
