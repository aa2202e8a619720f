//! Anthropic-specific model flags ([`Model::compat`]) and their per-provider defaults.

use llm_core::{Error, Model};

use crate::PROVIDER;
use serde::Deserialize;

use super::model_version::claude_version;

/// Anthropic-specific model flags, parsed from [`Model::compat`].
///
/// Every field is optional; `None` means "use the default for this model's provider":
/// everything is supported except on `fireworks`, and session-affinity headers are sent for
/// `fireworks` and for `cloudflare-ai-gateway` routes whose base URL contains `anthropic`.
/// JSON field names are camelCase, as in OpenClaw's `AnthropicMessagesCompat`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AnthropicCompat {
    /// Send `eager_input_streaming: true` on every tool (otherwise the
    /// `fine-grained-tool-streaming-2025-05-14` beta header is sent when tools are present).
    pub supports_eager_tool_input_streaming: Option<bool>,
    /// Honour `CacheRetention::Long` with `ttl: "1h"` cache markers.
    pub supports_long_cache_retention: Option<bool>,
    /// Put a `cache_control` marker on the last tool.
    pub supports_cache_control_on_tools: Option<bool>,
    /// Send `x-session-affinity: <session id>` (API-key auth, caching on, session id given).
    pub send_session_affinity_headers: Option<bool>,
    /// The model uses adaptive thinking (`{type: "adaptive"}` + `output_config.effort`) instead
    /// of a token budget. Defaults from the model id (Claude Opus/Sonnet 4.6 and later).
    pub supports_adaptive_thinking: Option<bool>,
}

impl AnthropicCompat {
    /// Parses `model.compat` (absent or `null` gives the defaults; a malformed one is an
    /// `invalid_request` error, as for every provider).
    pub fn from_model(model: &Model) -> Result<Self, Error> {
        model.typed_compat(PROVIDER)
    }
}

/// [`AnthropicCompat`] with the defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) eager_tool_input_streaming: bool,
    pub(crate) long_cache_retention: bool,
    pub(crate) cache_control_on_tools: bool,
    pub(crate) session_affinity_headers: bool,
    pub(crate) adaptive_thinking: bool,
}

impl Settings {
    pub(crate) fn resolve(model: &Model) -> Result<Settings, Error> {
        let compat = AnthropicCompat::from_model(model)?;
        let fireworks = model.provider == "fireworks";
        let cf_anthropic =
            model.provider == "cloudflare-ai-gateway" && model.base_url.contains("anthropic");
        Ok(Settings {
            eager_tool_input_streaming: compat
                .supports_eager_tool_input_streaming
                .unwrap_or(!fireworks),
            long_cache_retention: compat.supports_long_cache_retention.unwrap_or(!fireworks),
            cache_control_on_tools: compat.supports_cache_control_on_tools.unwrap_or(!fireworks),
            session_affinity_headers: compat
                .send_session_affinity_headers
                .unwrap_or(fireworks || cf_anthropic),
            adaptive_thinking: compat
                .supports_adaptive_thinking
                .unwrap_or_else(|| claude_version(&model.id).is_some_and(|v| v.adaptive())),
        })
    }
}
