//! The OpenAI Responses API (`POST /v1/responses`, streamed) for clawcall.
//!
//! Capabilities:
//! - [x] Streaming text, reasoning summaries and function calls (`event:` + `data:` SSE, no `[DONE]`).
//! - [x] Tools `{type:"function", name, description, parameters, strict}` **sorted by name**
//!   (then description) so the request bytes are stable for prompt caching.
//! - [x] Lossless strict mode (`llm_core::raw::strict`): optional properties become required and
//!   nullable, objects are closed, and the `null`s the model sends for omitted optional
//!   properties are removed again; a schema that cannot be expressed strictly sends the
//!   whole list with `strict: false` (never narrowed).
//! - [x] Parallel and interleaved function calls, keyed by `output_index` / `item_id`;
//!   tool-call ids are `call_id|item_id`; a `function_call` whose `output_item.added` never
//!   came still lands in the message; `.done` arguments longer than the streamed ones add
//!   the missing suffix; the `multi_tool_use.parallel` wrapper is expanded into its calls.
//! - [x] Transcript replay: `function_call` / `function_call_output` items, images, reasoning
//!   items with `encrypted_content` for the same model (never without their following item),
//!   text-signature message ids and `phase`; cross-provider replay through llm-core's transform.
//! - [x] Stop reasons: `completed` → `stop` (`toolUse` with calls), `incomplete` → `length`
//!   (`content_filter` → refused error), `failed` / `cancelled` / `error` → error event.
//! - [x] Usage: `input` excludes cached tokens, reasoning tokens are part of `output`; cost from the model.
//! - [x] Prompt caching: `prompt_cache_key` (`promptCacheKey` or the session id, ≤ 64 chars),
//!   `prompt_cache_retention: "24h"` for long retention, `session_id` and `x-client-request-id` headers.
//! - [x] Errors: HTTP bodies and in-stream `error` (nested and flat) / `response.failed`
//!   mapped to kinds; retries before content via `llm_core::raw::drive`.
//! - [ ] Stateful mode (`previous_response_id`, `store: true`): every request is stateless (`store: false`).
//! - [ ] Built-in tools (web search, file search, computer use): their items are ignored.
//! - [ ] Service-tier price multipliers (flex, priority): cost uses the model's base prices.
//! - [ ] Stop sequences: the Responses API has none; `StreamOptions::stop` is ignored.
//!
//! # Strict schemas and `null`
//!
//! With strict tools an omitted optional argument arrives as `null`. Such a `null` (for a
//! property that was optional and whose original schema does not accept `null`) is removed
//! as the arguments stream, with llm-core's `NullFilter`, from the `toolcall_delta`
//! fragments and the final arguments alike (also from the `.done` text and from calls
//! expanded out of a `multi_tool_use.parallel` wrapper): the tool gets arguments of its
//! original schema, and validation never coerces such a `null` into `""`, `0` or `false`.
//! A call whose `output_item.added` never came is filtered once its name is known (its
//! `.done` item), so its streamed fragments may still show the `null`s.
//!
//! # `provider_options`
//!
//! | key | type | effect |
//! |---|---|---|
//! | `serviceTier` | string | `service_tier` |
//! | `reasoningSummary` | string or `null` | `reasoning.summary` (default `"auto"`; `null` omits it) |
//! | `parallelToolCalls` | bool | `parallel_tool_calls` |
//! | `strictTools` | bool | overrides [`OpenAiResponsesCompat::strict_tools`] |
//! | `builtinTools` | array of objects | built-in tools (`{"type":"web_search"}`, ...) sent as given after the function tools |
//!
//! # Output items
//!
//! Items other than messages, reasoning and function calls are kept whole as opaque
//! [`llm_core::ProviderContent`] and replayed unchanged to the same model only. One that
//! waits for a client answer (`apply_patch_call`, `custom_tool_call`, `shell_call`,
//! `mcp_approval_request`, ...) ends the turn with an `unsupported` error naming its type.
//!
//! # Azure OpenAI
//!
//! [`OpenAiResponses::Azure`] (API id [`AZURE_API`], provider [`AZURE_PROVIDER`]) sends the
//! same requests to Azure OpenAI. Each setting is read from the request's provider options,
//! then from the environment (the variables given to the provider's builder,
//! [`llm_http::ProviderBuilder::env`], replace the process's):
//!
//! | provider option | environment | effect |
//! |---|---|---|
//! | `azureBaseUrl` | `AZURE_OPENAI_BASE_URL` | the base URL (first of these, then the resource name, then `model.base_url`) |
//! | `azureResourceName` | `AZURE_OPENAI_RESOURCE_NAME` | base URL `https://<name>.openai.azure.com/openai/v1` |
//! | `azureApiVersion` | `AZURE_OPENAI_API_VERSION` | `api-version` query (default `v1`) |
//! | `azureDeploymentName` | `AZURE_OPENAI_DEPLOYMENT_NAME_MAP` (`modelId=deployment,...`) | the body's `model` (default: the model id) |
//! | `azureAuth` | | `"api-key"` (default on Azure hosts) or `"bearer"` / `"entra"` |
//! | (the API key option) | `AZURE_OPENAI_API_KEY` | the key |
//!
//! - Routes: a classic host (`*.openai.azure.com`, `*.cognitiveservices.azure.com`) with
//!   an empty or `/openai` path goes to `/openai/v1`; a request is
//!   `POST <base>/responses?api-version=<v>` with an `api-key` header, except on Azure AI
//!   Foundry's OpenAI-compatible endpoints (`*.services.ai.azure.com` or
//!   `*.api.cognitive.microsoft.com` with a path ending `/openai/v1`), which take
//!   `Authorization: Bearer <key>` and no `api-version`. The deployment is only in the body.
//! - Body: `model` is the deployment; `store`, `prompt_cache_retention` and
//!   `service_tier` are never sent; tools default to strict only on `*.openai.azure.com`
//!   (for providers `azure-openai` / `azure-openai-responses`); item ids are replayed for
//!   the same model (`replayItemIds` defaults to `true`); no `session_id` headers.
//! - Stream: Azure's `response.text.delta` and `text` content parts are read as
//!   `output_text`. Cumulative snapshot message items (a message item right after
//!   another in the same phase whose text strictly extends it, OpenClaw #91959) continue
//!   the earlier text block: its text grows by the new part only and takes the later
//!   item's signature; an item that diverges opens its own block once the divergence is
//!   seen. So a message block's `text_end` waits for the next event (for any route).
//!   Each piece is compared once (linear), and only messages up to 256 KiB are kept for
//!   the comparison (a longer one is never collapsed), so the decoder's copy is bounded. Errors name the provider `azure-openai-responses`; HTTP 429 honours
//!   `retry-after-ms` / `retry-after`; a content-filter error body (`code:
//!   "content_filter"`) is a `refused` error, never retried.
//!
//! OpenClaw bugs fixed here:
//! - **Entra ID tokens were unusable**: OpenClaw always sent the key as `api-key`, which
//!   Azure rejects for a Microsoft Entra token. With `azureAuth: "entra"` (or
//!   `"bearer"`) the key goes as `Authorization: Bearer <token>` and no `api-key` is sent;
//!   agent-core's per-turn key hook (`AgentHooks::api_key`) can hand a fresh token to
//!   every request. A configured `Authorization` or `api-key` header without a key is
//!   also accepted (OpenClaw failed with "API key is required").
//! - `AZURE_OPENAI_API_KEY` serves every provider id on the Azure API (OpenClaw's
//!   `streamSimple` rejected a custom provider id that had only that variable).
//! - A gateway base URL with a query string: OpenClaw's SDK appended the path after the
//!   query; here the path is appended to the path and `api-version` joins the query.
//! - A response `incomplete` because of the content filter is a `refused` error, not a
//!   silent `length` stop.
//! - HTTP errors keep status and code as fields instead of repeating the status in the
//!   text, and `DeploymentNotFound` names the deployment that was asked for.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod azure;
mod convert;
mod error;
mod stream;

pub use stream::Decoder;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use llm_core::output::{OutputFamily, OutputMode};
use llm_core::{Capabilities, Error, Model, ModelInfo, ProviderInfo};
use llm_http::{Converted, ErrorResponse, HttpWire, Request};
use serde::Deserialize;

/// The API id this crate serves.
pub const API: &str = "openai-responses";

/// The API id of Azure OpenAI's Responses routes (served by the same provider).
pub const AZURE_API: &str = "azure-openai-responses";

/// The provider name used in errors.
pub const PROVIDER: &str = "openai";

/// The provider name used in errors of Azure routes (also OpenClaw's provider id).
pub const AZURE_PROVIDER: &str = "azure-openai-responses";

/// Per-model compatibility flags, parsed from `Model::compat` (camelCase keys; every field
/// optional; unknown keys ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OpenAiResponsesCompat {
    /// Send `strict` on tools. `true`: strict when every tool can be expressed strictly,
    /// else `strict: false` for all; `false`: `strict: false`; unset: `true` for native
    /// OpenAI / Azure OpenAI routes (`Model::provider` is `openai`, `azure-openai` or
    /// `azure-openai-responses`), else the field is omitted.
    pub strict_tools: Option<bool>,
    /// Send the `session_id` header with the session id (default `true`).
    pub send_session_id_header: Option<bool>,
    /// Send `prompt_cache_key` (default `true`).
    pub supports_prompt_cache_key: Option<bool>,
    /// Send `prompt_cache_retention: "24h"` for long retention (default `true`).
    pub supports_long_cache_retention: Option<bool>,
    /// Replay item ids (`fc_…` on function calls, `rs_…` on reasoning items) for the
    /// same model (default `false`, as OpenClaw's `replayResponsesItemIds`; `true` on
    /// Azure routes, whose flows are store-based).
    #[serde(alias = "replayResponsesItemIds")]
    pub replay_item_ids: Option<bool>,
    /// Use the `developer` role for the system prompt of reasoning models (default `true`).
    pub supports_developer_role: Option<bool>,
    /// Reasoning level (`minimal` … `max`, and `off`) to the wire effort; `null` marks a
    /// level unsupported (the next lower one is used; `off: null` omits `reasoning`).
    /// Defaults: the level's own name, `xhigh` / `max` only when listed, `off` → `"none"`.
    pub thinking_level_map: BTreeMap<String, Option<String>>,
}

/// The OpenAI Responses provider, for OpenAI (`OpenAiResponsesProvider::new()`, API id
/// [`API`]) or Azure OpenAI (`OpenAiResponsesProvider::builder().wire(OpenAiResponses::Azure)`,
/// API id [`AZURE_API`]; its settings from the provider options and the builder's
/// environment, see "Azure OpenAI" in the crate docs).
///
/// The two differ only in the API id (the registry key): a request takes the Azure route
/// when its `model.api` is [`AZURE_API`], or when it has another API id and the provider
/// speaks [`OpenAiResponses::Azure`].
pub type OpenAiResponsesProvider = llm_http::HttpProvider<OpenAiResponses>;

/// The OpenAI Responses wire format, on OpenAI's or Azure's routes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OpenAiResponses {
    /// OpenAI's routes.
    #[default]
    OpenAi,
    /// Azure OpenAI's routes.
    Azure,
}

impl OpenAiResponses {
    fn is_azure(self, model: &Model) -> bool {
        match model.api.as_str() {
            AZURE_API => true,
            API => false,
            _ => self == OpenAiResponses::Azure,
        }
    }
}

/// What the Azure OpenAI routes declare (`claw --provider azure-openai-responses`): the
/// same capabilities; no default base URL (it comes from `AZURE_OPENAI_BASE_URL` or
/// `AZURE_OPENAI_RESOURCE_NAME`), and model ids are deployment names.
pub const AZURE_INFO: ProviderInfo = ProviderInfo {
    name: "azure-openai-responses",
    api: AZURE_API,
    provider: AZURE_PROVIDER,
    default_base_url: "",
    key_env: &["AZURE_OPENAI_API_KEY"],
    capabilities: INFO.capabilities,
    models: INFO.models,
    output: INFO.output,
};

/// What this crate declares about itself: `claw`, the conformance grid and the docs
/// read it (capabilities decide which shared scenarios apply).
pub const INFO: ProviderInfo = ProviderInfo {
    name: "openai-responses",
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
            "GPT-4o, GPT-4.1, GPT-5, o-series (`text.format` `json_schema`)",
        ),
    ],
};

/// What the answer of one request is decoded with, and the Azure deployment its errors name.
#[derive(Debug)]
pub struct Answer {
    tool_names: Arc<BTreeSet<String>>,
    strict_plans: Arc<BTreeMap<String, Arc<llm_core::raw::strict::StrictPlan>>>,
    refusing: bool,
    deployment: Option<String>,
}

impl HttpWire for OpenAiResponses {
    type Decoder = Decoder;
    type State = Answer;

    fn info(&self) -> &'static ProviderInfo {
        match self {
            OpenAiResponses::OpenAi => &INFO,
            OpenAiResponses::Azure => &AZURE_INFO,
        }
    }

    fn provider_name(&self, model: &Model) -> String {
        if self.is_azure(model) { AZURE_PROVIDER } else { PROVIDER }.to_owned()
    }

    fn convert(&self, request: Request<'_>) -> Result<Converted<Answer>, Error> {
        let Request { model, context, options, env } = request;
        let azure = self.is_azure(model);
        let route = azure.then(|| azure::resolve(model, options, env)).transpose()?;
        let converted =
            convert::build_request(model, context, options, route.as_ref().map(|r| (r, env)))?;
        let answer = Answer {
            tool_names: Arc::new(context.tools.iter().map(|t| t.name.clone()).collect()),
            strict_plans: Arc::new(converted.strict_plans),
            refusing: options.output.is_some(),
            deployment: route.map(|route| route.deployment),
        };
        Ok(Converted::new(converted.http, answer))
    }

    fn decoder(&self, answer: &Answer) -> Decoder {
        Decoder::new(Arc::clone(&answer.tool_names), Arc::clone(&answer.strict_plans))
            .refusing(answer.refusing)
    }

    fn error(answer: &Answer, r: ErrorResponse) -> Error {
        match &answer.deployment {
            Some(deployment) => {
                error::azure_http_error(r.status, r.retry_after, r.body, deployment)
            }
            None => error::http_error(r.status, r.retry_after, r.body),
        }
    }
}

/// The stream decoder, for this crate's benchmark (`benches/stream.rs`). Not a stable API.
#[doc(hidden)]
pub fn bench_decoder() -> impl llm_core::raw::drive::WireDecoder {
    stream::Decoder::new(Arc::default(), Arc::default())
}
