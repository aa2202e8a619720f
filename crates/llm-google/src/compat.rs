//! `Model::compat` for Google models, and the per-model rules derived from the id.

use serde::Deserialize;

use llm_core::{Error, Model};

use crate::PROVIDER;

/// Google-specific model flags, parsed from [`Model::compat`](llm_core::Model::compat).
///
/// Every field is optional; unknown fields are ignored. Keys are accepted in
/// `snake_case` or `camelCase` (`use_parameters` / `useParameters`).
///
/// ```
/// let compat: llm_google::GoogleCompat =
///     serde_json::from_value(serde_json::json!({"useParameters": true})).unwrap();
/// assert!(compat.use_parameters);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct GoogleCompat {
    /// Send tool schemas in the legacy `parameters` field (an OpenAPI-3.0 subset,
    /// sanitized) instead of `parametersJsonSchema`. Needed by gateways that
    /// translate `parameters` for other model families (Cloud Code Assist style).
    #[serde(alias = "useParameters")]
    pub use_parameters: bool,
    /// Send `functionCall.id` / `functionResponse.id`. Default: for model ids
    /// starting with `claude-` or `gpt-oss-`, and Gemini 3 and later.
    #[serde(alias = "sendToolCallIds")]
    pub send_tool_call_ids: Option<bool>,
    /// Put tool-result images inside `functionResponse.parts`. Default: yes, except
    /// for Gemini 1.x/2.x, which get them as a separate user turn after the results.
    #[serde(alias = "multimodalFunctionResponse")]
    pub multimodal_function_response: Option<bool>,
    /// Vertex AI project (else the `project` provider option, else `GOOGLE_CLOUD_PROJECT`).
    pub project: Option<String>,
    /// Vertex AI location (else the `location` provider option, else
    /// `GOOGLE_CLOUD_LOCATION`, else `us-central1`).
    pub location: Option<String>,
}

impl GoogleCompat {
    /// Parses `model.compat` (absent or `null` gives the defaults).
    pub fn from_model(model: &Model) -> Result<Self, Error> {
        model.typed_compat(PROVIDER)
    }
}

/// Provider options this crate reads from `StreamOptions::provider_options`; a value of the
/// wrong type is an `invalid_request` error, as in every provider.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct GoogleOptions {
    /// `functionCallingConfig.streamFunctionCallArguments` (Gemini 3 on Vertex AI).
    pub(crate) stream_function_call_arguments: Option<bool>,
    /// `thinkingConfig.thinkingBudget` (0 turns thinking off).
    pub(crate) thinking_budget: Option<i64>,
    /// `thinkingConfig.thinkingLevel`, over the budget.
    pub(crate) thinking_level: Option<String>,
    /// The Vertex AI project, over the compat's and the environment's.
    pub(crate) project: Option<String>,
    /// The Vertex AI location, over the compat's and the environment's.
    pub(crate) location: Option<String>,
}

impl GoogleOptions {
    /// Reads `options.provider_options`.
    pub(crate) fn read(options: &llm_core::StreamOptions) -> Result<Self, Error> {
        options.typed_provider_options(PROVIDER, "Google")
    }
}

/// The major version of a `gemini-<N>…` model id (`models/` prefix allowed).
pub(crate) fn gemini_major_version(model_id: &str) -> Option<u32> {
    let id = model_id.strip_prefix("models/").unwrap_or(model_id).to_ascii_lowercase();
    let rest = id.strip_prefix("gemini-live-").or_else(|| id.strip_prefix("gemini-"))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Whether ids are sent on `functionCall` / `functionResponse`.
pub(crate) fn sends_tool_call_ids(model: &Model, compat: &GoogleCompat) -> bool {
    if let Some(v) = compat.send_tool_call_ids {
        return v;
    }
    let id = model.id.strip_prefix("models/").unwrap_or(&model.id);
    id.starts_with("claude-")
        || id.starts_with("gpt-oss-")
        || gemini_major_version(id).is_some_and(|v| v >= 3)
}

/// Whether tool-result images go inside `functionResponse.parts`.
pub(crate) fn multimodal_function_response(model: &Model, compat: &GoogleCompat) -> bool {
    if let Some(v) = compat.multimodal_function_response {
        return v;
    }
    gemini_major_version(&model.id).is_none_or(|v| v >= 3)
}

/// Gemini 3 and later validate thought signatures on replayed function calls.
pub(crate) fn validates_signatures(model: &Model) -> bool {
    gemini_major_version(&model.id).is_some_and(|v| v >= 3)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests;
