//! The OpenAI Responses API (`POST /v1/responses`, streamed) for clawcall.
//!
//! Capabilities:
//! - [x] Streaming text, reasoning summaries and function calls (`event:` + `data:` SSE, no `[DONE]`).
//! - [x] Tools `{type:"function", name, description, parameters, strict}` **sorted by name**
//!   (then description) so the request bytes are stable for prompt caching.
//! - [x] Lossless strict mode (`llm_core::strict`): optional properties become required and
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
//!   mapped to kinds; retries before content via `llm_core::drive`.
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

mod convert;
mod error;
mod stream;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use llm_core::{AssistantStream, Context, Model, Provider, StreamOptions};
use llm_core::{Capabilities, Capability, ModelInfo, ProviderInfo};
use llm_http::HttpRequest;
use serde::Deserialize;

/// The API id this crate serves.
pub const API: &str = "openai-responses";

/// The provider name used in errors.
pub const PROVIDER: &str = "openai";

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
    /// same model (default `false`, as OpenClaw's `replayResponsesItemIds`).
    #[serde(alias = "replayResponsesItemIds")]
    pub replay_item_ids: Option<bool>,
    /// Use the `developer` role for the system prompt of reasoning models (default `true`).
    pub supports_developer_role: Option<bool>,
    /// Reasoning level (`minimal` … `max`, and `off`) to the wire effort; `null` marks a
    /// level unsupported (the next lower one is used; `off: null` omits `reasoning`).
    /// Defaults: the level's own name, `xhigh` / `max` only when listed, `off` → `"none"`.
    pub thinking_level_map: BTreeMap<String, Option<String>>,
}

llm_http::http_provider! {
    /// The OpenAI Responses provider.
    pub struct OpenAiResponsesProvider;
}

/// What this crate declares about itself: `claw`, the conformance grid and the docs
/// read it (capabilities decide which shared scenarios apply).
pub const INFO: ProviderInfo = ProviderInfo {
    name: "openai-responses",
    api: API,
    provider: PROVIDER,
    default_base_url: "https://api.openai.com/v1",
    key_env: &["OPENAI_API_KEY"],
    capabilities: Capabilities::of(&[
        Capability::Streaming,
        Capability::Tools,
        Capability::ParallelToolCalls,
        Capability::StreamingToolArguments,
        Capability::Thinking,
        Capability::ImagesInUserMessages,
        Capability::ImagesInToolResults,
        Capability::PromptCaching,
        Capability::StrictSchemas,
    ]),
    models: &[
        ModelInfo::new("gpt-5-mini", 400_000, 128_000, [0.25, 2.0, 0.025, 0.0])
            .reasoning()
            .images(),
        ModelInfo::new("gpt-5", 400_000, 128_000, [1.25, 10.0, 0.125, 0.0]).reasoning().images(),
    ],
};

impl Provider for OpenAiResponsesProvider {
    fn capabilities(&self) -> Capabilities {
        INFO.capabilities
    }

    fn api(&self) -> &str {
        API
    }

    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        let request = match convert::build_request(model, context, options) {
            Ok(request) => request,
            Err(error) => return AssistantStream::from_error(model, error),
        };
        let http = HttpRequest::json(PROVIDER, request.url, request.headers, &request.body);
        let tool_names: Arc<BTreeSet<String>> =
            Arc::new(context.tools.iter().map(|t| t.name.clone()).collect());
        let strict_plans = Arc::new(request.strict_plans);
        self.http.stream_sse(
            model,
            options,
            PROVIDER,
            http,
            |r| error::http_error(r.status, r.retry_after, r.body),
            move || stream::Decoder::new(tool_names.clone(), strict_plans.clone()),
        )
    }
}

/// The stream decoder, for this crate's benchmark (`benches/stream.rs`). Not a stable API.
#[doc(hidden)]
pub fn bench_decoder() -> impl llm_core::drive::WireDecoder {
    stream::Decoder::new(Arc::default(), Arc::default())
}
