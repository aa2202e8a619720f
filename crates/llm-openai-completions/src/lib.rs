//! OpenAI Chat Completions provider for clawcall, for OpenAI and OpenAI-compatible
//! servers (API id `openai-completions`).
//!
//! # Capabilities
//!
//! - [x] Streaming text, usage (`stream_options.include_usage`; `input` excludes cached tokens), cost
//! - [x] Tools `{type:"function", function:{name, description, parameters, strict?}}`, input order
//! - [x] Strict tools, lossless (`llm_core::raw::strict`: optional → required + nullable, nulls removed
//!   again from the streamed arguments); non-strict for the whole list when one schema cannot be
//!   strict; `strict` left out for servers that reject it
//! - [x] `tool_choice` (`auto`, `none`, `required`, a named function) reconciled with the tools that
//!   survived conversion; `parallel_tool_calls`
//! - [x] Streamed tool calls keyed by `index`, else by `id`; parallel calls in any interleaving;
//!   concatenated `{…}{…}` arguments split into separate calls
//! - [x] Reasoning deltas (`reasoning_content`, `reasoning`, `reasoning_text`) as thinking, replayed
//!   to the same model in the field they came from
//! - [x] Reasoning written into `content` between `<think>`-style tags split off as thinking
//!   (chunk boundaries anywhere); a non-streamed completion body read like one big delta
//! - [x] Finish reasons as OpenClaw maps them, `Stream ended without finish_reason`, mid-stream
//!   `{"error": …}` payloads, `[DONE]`
//! - [x] Replay: `tool_calls` with JSON-string arguments, `{role:"tool"}` results, tool-result images
//!   in one following user message, Responses ids `call_x|fc_y` cut to `call_x`
//! - [x] `prompt_cache_key` (at most 64 characters), `prompt_cache_retention`, session headers
//! - [x] Compat profile for OpenAI-compatible servers ([`OpenAiCompletionsCompat`])
//! - [x] Retries before the first event, timeouts, cancellation (via `llm_core::raw::drive`)
//! - [ ] Images in assistant output, audio, logprobs, `n > 1`; Anthropic-style `cache_control`
//!   markers for OpenRouter `anthropic/*` models; OpenRouter / Vercel routing fields (use the
//!   `extraBody` provider option)
//!
//! # Configuration
//!
//! The endpoint is `<model.base_url>/chat/completions` (`https://api.openai.com/v1` when the base
//! URL is empty); auth is `Authorization: Bearer <key>`; `model.headers` and then
//! `StreamOptions::headers` are merged last. `Model::compat` is parsed into
//! [`OpenAiCompletionsCompat`]. `StreamOptions::provider_options` understands:
//!
//! | key | type | effect |
//! |---|---|---|
//! | `parallelToolCalls` | bool | `parallel_tool_calls` (only sent with tools) |
//! | `strictTools` | bool | ask for strict tools (overrides the compat's `strictTools`) |
//! | `extraBody` | object | top-level body fields merged last (server-specific knobs) |
//!
//! | `azureApiVersion` | string | Azure: the `api-version` query (default `2024-10-21` on a deployment route, none on `/openai/v1`) |
//! | `azureAuth` | string | Azure: `"api-key"` (default) or `"bearer"` / `"entra"` for a Microsoft Entra ID token |
//!
//! Errors name the model's provider (`model.provider`, or [`PROVIDER`] when empty), so an
//! OpenRouter or DeepSeek failure says so.
//!
//! # Azure OpenAI
//!
//! A model whose base URL is on an Azure OpenAI host (`*.openai.azure.com`,
//! `*.cognitiveservices.azure.com`), or whose provider is `azure-openai` (a gateway),
//! takes Azure's Chat Completions routes: the key is sent as `api-key` (or as
//! `Authorization: Bearer` with `azureAuth: "entra"`, so Entra ID tokens from a per-turn key
//! resolver work, unlike OpenClaw), and a deployment route
//! (`https://<resource>.openai.azure.com/openai/deployments/<deployment>`) gets
//! `?api-version=`; on `.../openai/v1` the deployment is the model id. Azure's stream
//! extras (`prompt_filter_results` chunks without choices, `content_filter_results`) are
//! ignored, and `finish_reason: "content_filter"` is a `refused` error. The Responses API
//! on Azure (`llm-openai-responses`) also reads the `AZURE_OPENAI_*` environment.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod azure;
mod compat;
mod convert;
mod error;
mod stream;

use std::sync::Arc;

use llm_core::output::{OutputFamily, OutputMode};
use llm_core::{Capabilities, Error, Model, ModelInfo, ProviderInfo};
use llm_http::{Converted, ErrorResponse, HttpWire, Request};

pub use compat::{MaxTokensField, OpenAiCompletionsCompat, ThinkingFormat};
pub use stream::{Decoder, DecoderConfig};

/// The API id this crate serves.
pub const API: &str = "openai-completions";

/// The provider name used in errors when the model names none.
pub const PROVIDER: &str = "openai";

/// The provider name for errors: the model's, else [`PROVIDER`].
pub(crate) fn provider_name(model: &Model) -> String {
    if model.provider.is_empty() { PROVIDER.to_owned() } else { model.provider.clone() }
}

/// OpenAI Chat Completions (and compatible servers) as an [`llm_core::Provider`]:
/// `OpenAiCompletionsProvider::new()`, or `OpenAiCompletionsProvider::builder()` for its own
/// HTTP client or environment.
pub type OpenAiCompletionsProvider = llm_http::HttpProvider<OpenAiCompletions>;

/// The OpenAI Chat Completions wire format.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiCompletions;

/// What this crate declares about itself: `claw`, the conformance grid and the docs
/// read it (capabilities decide which shared scenarios apply).
pub const INFO: ProviderInfo = ProviderInfo {
    name: "openai-completions",
    api: API,
    provider: PROVIDER,
    default_base_url: "https://api.openai.com/v1",
    key_env: &["OPENAI_API_KEY"],
    capabilities: Capabilities::ALL,
    models: &[
        ModelInfo::new("gpt-5-mini", 400_000, 128_000, [0.25, 2.0, 0.025, 0.0])
            .reasoning()
            .images(),
        ModelInfo::new("gpt-5", 400_000, 128_000, [1.25, 10.0, 0.125, 0.0]).reasoning().images(),
        ModelInfo::new("gpt-4.1", 1_047_576, 32_768, [2.0, 8.0, 0.5, 0.0]).images(),
    ],
    output: &[
        OutputFamily::new("gpt-3.5", OutputMode::Unsupported, "GPT-3.5 (JSON mode only)"),
        OutputFamily::new(
            "gpt-4-",
            OutputMode::Unsupported,
            "GPT-4 and GPT-4 Turbo (JSON mode only)",
        ),
        OutputFamily::new(
            "",
            OutputMode::Native,
            "GPT-4o, GPT-4.1, GPT-5, o-series and compatible servers (`response_format` `json_schema`)",
        ),
    ],
};

impl HttpWire for OpenAiCompletions {
    type Decoder = Decoder;
    type State = Arc<DecoderConfig>;

    fn info(&self) -> &'static ProviderInfo {
        &INFO
    }

    fn provider_name(&self, model: &Model) -> String {
        provider_name(model)
    }

    fn convert(&self, request: Request<'_>) -> Result<Converted<Arc<DecoderConfig>>, Error> {
        let Request { model, context, options, .. } = request;
        let provider = provider_name(model);
        let compat =
            compat::ResolvedCompat::resolve(model, &OpenAiCompletionsCompat::from_model(model)?);
        let prepared = convert::build_request(model, context, options, &compat)?;
        let decoder = Arc::new(DecoderConfig {
            provider,
            reasoning_fields: compat.reasoning_fields.clone(),
            strict_plans: prepared.strict_plans,
            reasoning_tags: compat.reasoning_tags,
            refusal_is_error: options.output.is_some(),
        });
        Ok(Converted::new(prepared.http, decoder))
    }

    fn decoder(&self, config: &Arc<DecoderConfig>) -> Decoder {
        Decoder::with_config(Arc::clone(config))
    }

    fn error(config: &Arc<DecoderConfig>, r: ErrorResponse) -> Error {
        error::http_error(&config.provider, r.status, r.retry_after, r.body)
    }
}

#[cfg(test)]
mod assert_impls {
    fn send_sync<T: Send + Sync>() {}

    #[test]
    fn provider_and_decoder_are_send_sync() {
        send_sync::<super::OpenAiCompletionsProvider>();
        send_sync::<super::Decoder>();
        send_sync::<super::OpenAiCompletionsCompat>();
    }
}
