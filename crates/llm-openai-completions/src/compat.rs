//! The compat profile: what an OpenAI-compatible server accepts and where it puts
//! reasoning (OpenClaw's `detectCompat`).
//!
//! [`OpenAiCompletionsCompat`] is the plain struct read from `Model::compat`; every
//! field is optional. [`ResolvedCompat`] is what the crate uses: the explicit fields
//! win, and every field left out is filled from the defaults detected for the
//! model's provider name and base URL.

use llm_core::{Error, Model};
use serde::Deserialize;

/// Which request field carries the output token limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_completion_tokens` (OpenAI's current name; the default).
    MaxCompletionTokens,
    /// `max_tokens` (older servers: Chutes, Moonshot, Together, Cloudflare gateway, ...).
    MaxTokens,
}

/// How a server is asked for reasoning, and how it is switched off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThinkingFormat {
    /// `reasoning_effort: "<level>"` (OpenAI; the default).
    Openai,
    /// `reasoning: {effort: "<level>"}` (OpenRouter).
    Openrouter,
    /// `thinking: {type: "enabled" | "disabled"}` plus `reasoning_effort` where supported (DeepSeek).
    Deepseek,
    /// `thinking: {type: "enabled", clear_thinking: false}` or `{type: "disabled"}` (Z.ai GLM).
    Zai,
    /// `enable_thinking: bool` (Qwen / DashScope).
    Qwen,
    /// `chat_template_kwargs: {enable_thinking, preserve_thinking: true}` (vLLM / SGLang Qwen templates).
    QwenChatTemplate,
    /// Together: treated like `openai` (Together does not take `reasoning_effort` by default).
    Together,
}

/// Compatibility flags for an OpenAI-compatible server, read from `Model::compat`.
///
/// Every field is optional: a field left out takes the value detected from the
/// model's `provider` and `base_url` (OpenClaw's `detectCompat`), shown in brackets.
/// Field names are camelCase in JSON (`{"supportsStrictMode": false}`); unknown
/// fields are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OpenAiCompletionsCompat {
    /// Send `store: false` [true, except for the non-standard servers: cerebras, xai,
    /// together, chutes, deepseek, zai, moonshot, opencode, cloudflare].
    pub supports_store: Option<bool>,
    /// Send the system prompt with role `developer` to reasoning models [same as `supports_store`].
    pub supports_developer_role: Option<bool>,
    /// Send the reasoning effort [true, except xai, zai, moonshot, together, cloudflare-ai-gateway].
    pub supports_reasoning_effort: Option<bool>,
    /// Send `stream_options: {include_usage: true}` [true].
    pub supports_usage_in_streaming: Option<bool>,
    /// The token-limit field [`max_tokens` for chutes, moonshot, together,
    /// cloudflare-ai-gateway; else `max_completion_tokens`].
    pub max_tokens_field: Option<MaxTokensField>,
    /// The server accepts the `strict` key on function tools [true, except moonshot,
    /// together, cloudflare-ai-gateway]. When false the key is never sent.
    pub supports_strict_mode: Option<bool>,
    /// Ask for strict tools (`strict: true`) [false]. Honoured only when every tool's
    /// schema can be expressed strictly without loss; otherwise all
    /// tools are sent with `strict: false`. The `strictTools` provider option overrides it.
    pub strict_tools: Option<bool>,
    /// The server accepts `parallel_tool_calls` [true].
    pub supports_parallel_tool_calls: Option<bool>,
    /// Tool results carry the tool `name` [false].
    pub requires_tool_result_name: Option<bool>,
    /// A user message may not directly follow a tool result: a bridge assistant
    /// message `I have processed the tool results.` is inserted [false].
    pub requires_assistant_after_tool_result: Option<bool>,
    /// Replayed thinking is sent as a leading text part instead of a reasoning field [false].
    pub requires_thinking_as_text: Option<bool>,
    /// Assistant messages always carry `reasoning_content` (empty when there was none)
    /// [true for deepseek and xiaomi].
    pub requires_reasoning_content_on_assistant_messages: Option<bool>,
    /// How reasoning is requested [`deepseek`, `zai`, `together`, `openrouter` for those
    /// providers; else `openai`].
    pub thinking_format: Option<ThinkingFormat>,
    /// Delta fields that carry reasoning text, first non-empty wins
    /// [`reasoning_content`, `reasoning`, `reasoning_text`].
    pub reasoning_fields: Option<Vec<String>>,
    /// Text inside reasoning tags in `content` (`<think>…</think>`, `<thinking>`, `<thought>`,
    /// `<reasoning>` and their `antml:` / `mm:` forms) becomes thinking [true].
    pub reasoning_tags: Option<bool>,
    /// Send `prompt_cache_key` [true only for api.openai.com].
    pub supports_prompt_cache_key: Option<bool>,
    /// Send `prompt_cache_retention: "24h"` for long retention [true only for api.openai.com].
    pub supports_long_cache_retention: Option<bool>,
    /// Send `session_id`, `x-client-request-id` and `x-session-affinity` headers with the
    /// session id [false].
    pub send_session_affinity_headers: Option<bool>,
    /// Send `tool_stream: true` when tools are present (Z.ai) [false].
    pub zai_tool_stream: Option<bool>,
}

/// The compat flags after detection: every field decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolvedCompat {
    pub(crate) supports_store: bool,
    pub(crate) supports_developer_role: bool,
    pub(crate) supports_reasoning_effort: bool,
    pub(crate) supports_usage_in_streaming: bool,
    pub(crate) max_tokens_field: MaxTokensField,
    pub(crate) supports_strict_mode: bool,
    pub(crate) strict_tools: bool,
    pub(crate) supports_parallel_tool_calls: bool,
    pub(crate) requires_tool_result_name: bool,
    pub(crate) requires_assistant_after_tool_result: bool,
    pub(crate) requires_thinking_as_text: bool,
    pub(crate) requires_reasoning_content: bool,
    pub(crate) thinking_format: ThinkingFormat,
    pub(crate) reasoning_fields: Vec<String>,
    pub(crate) reasoning_tags: bool,
    pub(crate) supports_prompt_cache_key: bool,
    pub(crate) supports_long_cache_retention: bool,
    pub(crate) send_session_affinity_headers: bool,
    pub(crate) zai_tool_stream: bool,
}

/// The reasoning delta fields read when the compat does not name others.
pub(crate) const DEFAULT_REASONING_FIELDS: [&str; 3] =
    ["reasoning_content", "reasoning", "reasoning_text"];

impl OpenAiCompletionsCompat {
    /// Parses `Model::compat` (absent or `null` gives the defaults).
    pub fn from_model(model: &Model) -> Result<Self, Error> {
        model.typed_compat(&crate::provider_name(model))
    }
}

/// Which known server family a model is served by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    OpenAi,
    Cerebras,
    Xai,
    Together,
    Chutes,
    DeepSeek,
    Zai,
    Moonshot,
    OpenCode,
    CloudflareWorkers,
    CloudflareGateway,
    OpenRouter,
    Xiaomi,
    Other,
}

fn family(model: &Model) -> Family {
    let provider = model.provider.to_ascii_lowercase();
    let url = model.base_url.to_ascii_lowercase();
    let by_name = match provider.as_str() {
        "openai" => Some(Family::OpenAi),
        "cerebras" => Some(Family::Cerebras),
        "xai" => Some(Family::Xai),
        "together" => Some(Family::Together),
        "chutes" => Some(Family::Chutes),
        "deepseek" => Some(Family::DeepSeek),
        "zai" => Some(Family::Zai),
        "moonshot" | "moonshotai" => Some(Family::Moonshot),
        "opencode" | "opencode-go" => Some(Family::OpenCode),
        "cloudflare-workers-ai" => Some(Family::CloudflareWorkers),
        "cloudflare-ai-gateway" => Some(Family::CloudflareGateway),
        "openrouter" => Some(Family::OpenRouter),
        "xiaomi" => Some(Family::Xiaomi),
        _ => None,
    };
    if let Some(f) = by_name {
        return f;
    }
    let by_url: [(&str, Family); 12] = [
        ("api.openai.com", Family::OpenAi),
        ("cerebras.ai", Family::Cerebras),
        ("api.x.ai", Family::Xai),
        ("together.xyz", Family::Together),
        ("chutes.ai", Family::Chutes),
        ("deepseek.com", Family::DeepSeek),
        ("api.z.ai", Family::Zai),
        ("moonshot", Family::Moonshot),
        ("opencode.ai", Family::OpenCode),
        ("gateway.ai.cloudflare.com", Family::CloudflareGateway),
        ("api.cloudflare.com", Family::CloudflareWorkers),
        ("openrouter.ai", Family::OpenRouter),
    ];
    by_url.iter().find(|(needle, _)| url.contains(needle)).map_or(Family::Other, |(_, f)| *f)
}

/// Whether the model is served by OpenAI itself.
pub(crate) fn is_native_openai(model: &Model) -> bool {
    let url = model.base_url.to_ascii_lowercase();
    (url.is_empty() && model.provider.eq_ignore_ascii_case("openai"))
        || url.contains("api.openai.com")
}

impl ResolvedCompat {
    /// Explicit fields of `compat` over the defaults detected for `model`.
    pub(crate) fn resolve(model: &Model, compat: &OpenAiCompletionsCompat) -> Self {
        let f = family(model);
        let non_standard = matches!(
            f,
            Family::Cerebras
                | Family::Xai
                | Family::Together
                | Family::Chutes
                | Family::DeepSeek
                | Family::Zai
                | Family::Moonshot
                | Family::OpenCode
                | Family::CloudflareWorkers
                | Family::CloudflareGateway
        );
        let max_tokens_field = if matches!(
            f,
            Family::Chutes | Family::Moonshot | Family::CloudflareGateway | Family::Together
        ) {
            MaxTokensField::MaxTokens
        } else {
            MaxTokensField::MaxCompletionTokens
        };
        let reasoning_effort = !matches!(
            f,
            Family::Xai
                | Family::Zai
                | Family::Moonshot
                | Family::Together
                | Family::CloudflareGateway
        );
        let thinking_format = match f {
            Family::DeepSeek => ThinkingFormat::Deepseek,
            Family::Zai => ThinkingFormat::Zai,
            Family::Together => ThinkingFormat::Together,
            Family::OpenRouter => ThinkingFormat::Openrouter,
            _ => ThinkingFormat::Openai,
        };
        let strict = !matches!(f, Family::Moonshot | Family::Together | Family::CloudflareGateway);
        let native = is_native_openai(model);
        ResolvedCompat {
            supports_store: compat.supports_store.unwrap_or(!non_standard),
            supports_developer_role: compat.supports_developer_role.unwrap_or(!non_standard),
            supports_reasoning_effort: compat.supports_reasoning_effort.unwrap_or(reasoning_effort),
            supports_usage_in_streaming: compat.supports_usage_in_streaming.unwrap_or(true),
            max_tokens_field: compat.max_tokens_field.unwrap_or(max_tokens_field),
            supports_strict_mode: compat.supports_strict_mode.unwrap_or(strict),
            strict_tools: compat.strict_tools.unwrap_or(false),
            supports_parallel_tool_calls: compat.supports_parallel_tool_calls.unwrap_or(true),
            requires_tool_result_name: compat.requires_tool_result_name.unwrap_or(false),
            requires_assistant_after_tool_result: compat
                .requires_assistant_after_tool_result
                .unwrap_or(false),
            requires_thinking_as_text: compat.requires_thinking_as_text.unwrap_or(false),
            requires_reasoning_content: compat
                .requires_reasoning_content_on_assistant_messages
                .unwrap_or(matches!(f, Family::DeepSeek | Family::Xiaomi)),
            thinking_format: compat.thinking_format.unwrap_or(thinking_format),
            reasoning_fields: compat.reasoning_fields.clone().unwrap_or_else(|| {
                DEFAULT_REASONING_FIELDS.iter().map(|s| (*s).to_owned()).collect()
            }),
            reasoning_tags: compat.reasoning_tags.unwrap_or(true),
            supports_prompt_cache_key: compat.supports_prompt_cache_key.unwrap_or(native),
            supports_long_cache_retention: compat.supports_long_cache_retention.unwrap_or(native),
            send_session_affinity_headers: compat.send_session_affinity_headers.unwrap_or(false),
            zai_tool_stream: compat.zai_tool_stream.unwrap_or(false),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests;
