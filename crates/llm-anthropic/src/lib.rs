//! Anthropic Messages API (`anthropic-messages`) provider for clawcall.
//!
//! # Capabilities
//!
//! - [x] Streaming over SSE (`POST {base_url}/v1/messages`, `stream: true`)
//! - [x] Tools `{name, description, input_schema}`; the schema is projected to exactly
//!   `{type: "object", properties, required}`; tools that cannot be expressed are dropped
//! - [x] `eager_input_streaming: true` per tool (or the fine-grained streaming beta when the
//!   model's compat says it is unsupported)
//! - [x] Tool choice `auto` / `none` / `any` (required) / a named tool, reconciled with the
//!   projected names
//! - [x] Prompt caching: `cache_control` on the system prompt's stable prefix, the last tool and
//!   the last user text/image (plus the latest `tool_result`), at most four markers, `ttl: "1h"`
//!   for [`CacheRetention::Long`](llm_core::CacheRetention)
//! - [x] OAuth keys (`sk-ant-oat…`): Bearer auth, Claude Code headers and system identity, tool
//!   names projected to Claude Code casing (`read` -> `Read`) and mapped back on the response;
//!   two tools that project to one wire name fail before any request
//! - [x] Thinking: budget-based (`{type: "enabled", budget_tokens}`) or adaptive
//!   (`{type: "adaptive"}` + `output_config.effort`), `thinking_delta`, `signature_delta`,
//!   `redacted_thinking`; signed thinking replayed byte for byte to the same model
//! - [x] Images in user messages and tool results (base64)
//! - [x] Replay: consecutive tool results merged into one user message of `tool_result` blocks
//!   (`is_error` kept); cross-provider transcripts through `llm_core::transform`
//! - [x] Usage: input (non-cached), output, cache read, cache write (5m + 1h) from
//!   `message_start` and `message_delta`; cost from the model's prices
//! - [x] Stop reasons: `end_turn` / `stop_sequence` / `pause_turn` -> stop, `max_tokens` /
//!   `model_context_window_exceeded` -> length, `tool_use` -> toolUse, `refusal` -> a `refused`
//!   error (`Anthropic refusal (category: C): E`), anything else -> `Unhandled stop reason: <r>`
//! - [x] Errors: HTTP bodies and `event: error` after HTTP 200 mapped to error kinds; retries
//!   before the first event (`retry-after`, `retry-after-ms`, `x-should-retry`); a body that ends
//!   before `message_stop` is a `truncated` error
//! - [x] A `tool_use` whose `input` arrives whole at the start with no deltas keeps that input
//! - [x] Server tools (`server_tool_use`, web search, web fetch and code execution results) and
//!   `compaction` blocks: kept whole as opaque [`llm_core::ProviderContent`], shown as
//!   `provider_content` events, never executed, replayed unchanged to the same model only
//! - [x] Citations (`citations_delta`): kept as the text block's signature, replayed to the same
//!   model only
//! - [x] Tool calls given whole inside `message_start` (programmatic tool calling): decoded,
//!   stop reason `toolUse`
//! - [x] A second `message_start` with another id (a proxy splicing a retried response into
//!   the body): a `decode` error with code `spliced_message`, retryable before any content
//!
//! # Model compat
//!
//! `model.compat` is parsed into [`AnthropicCompat`] (camelCase keys, all optional).
//!
//! # Provider options
//!
//! Read from [`StreamOptions::provider_options`](llm_core::StreamOptions):
//!
//! | key | type | effect |
//! |---|---|---|
//! | `thinkingEnabled` | bool | force thinking on or off (default: on when `reasoning` is set and the model reasons) |
//! | `thinkingBudgetTokens` | integer | budget for budget-based thinking (default: the reasoning level's budget) |
//! | `effort` | string | `output_config.effort` for adaptive models (default: from the reasoning level) |
//! | `thinkingDisplay` | string | `summarized` (default for adaptive models) or `omitted` |
//! | `interleavedThinking` | bool | send the `interleaved-thinking-2025-05-14` beta with budget thinking (default true) |
//! | `disableParallelToolUse` | bool | `tool_choice.disable_parallel_tool_use` |
//! | `metadata` | object | `{ "user_id": "…" }` is sent as `metadata.user_id` |
//! | `serverTools` | array of objects | server tools (`{"type":"web_search_20250305","name":"web_search"}`, ...) sent as given after the client tools |
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod convert;
mod error;
mod stream;

use llm_core::output::{OutputFamily, OutputMode};
use llm_core::{Capabilities, Capability, Error, ModelInfo, ProviderInfo};
use llm_http::{Converted, ErrorResponse, HttpWire, Request};

pub use convert::{AnthropicCompat, ToolNames};
pub use stream::Decoder;

/// The API id this crate serves.
pub const API: &str = "anthropic-messages";

/// The provider name used in errors.
pub const PROVIDER: &str = "anthropic";

/// The Anthropic Messages API provider: `AnthropicProvider::new()`, or
/// `AnthropicProvider::builder()` for its own HTTP client or environment.
pub type AnthropicProvider = llm_http::HttpProvider<Anthropic>;

/// The Anthropic Messages wire format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Anthropic;

/// What this crate declares about itself: `claw`, the conformance grid and the docs
/// read it (capabilities decide which shared scenarios apply).
pub const INFO: ProviderInfo = ProviderInfo {
    name: "anthropic",
    api: API,
    provider: "anthropic",
    default_base_url: "https://api.anthropic.com",
    key_env: &["ANTHROPIC_API_KEY"],
    capabilities: Capabilities::ALL.without(Capability::StrictSchemas),
    models: &[
        ModelInfo::new("claude-sonnet-4-5", 200_000, 64_000, [3.0, 15.0, 0.3, 3.75])
            .reasoning()
            .images(),
        ModelInfo::new("claude-opus-4-1", 200_000, 32_000, [15.0, 75.0, 1.5, 18.75])
            .reasoning()
            .images(),
        ModelInfo::new("claude-haiku-4-5", 200_000, 64_000, [1.0, 5.0, 0.1, 1.25])
            .reasoning()
            .images(),
    ],
    output: &[
        OutputFamily::new("claude-3", OutputMode::Tool, "Claude 3.x (forced tool)"),
        OutputFamily::new("claude-sonnet-4-0", OutputMode::Tool, "Claude Sonnet 4 (forced tool)"),
        OutputFamily::new(
            "claude-sonnet-4-2025",
            OutputMode::Tool,
            "Claude Sonnet 4 (forced tool)",
        ),
        OutputFamily::new("claude-opus-4-0", OutputMode::Tool, "Claude Opus 4 (forced tool)"),
        OutputFamily::new("claude-opus-4-2025", OutputMode::Tool, "Claude Opus 4 (forced tool)"),
        OutputFamily::new(
            "",
            OutputMode::Native,
            "Claude Opus 4.1, Sonnet 4.5, Haiku 4.5 and later (`output_config.format`)",
        ),
    ],
};

impl HttpWire for Anthropic {
    type Decoder = Decoder;
    /// Wire -> original tool names for the response (empty unless OAuth).
    type State = ToolNames;

    fn info(&self) -> &'static ProviderInfo {
        &INFO
    }

    fn convert(&self, request: Request<'_>) -> Result<Converted<ToolNames>, Error> {
        convert::build_request(request.model, request.context, request.options)
    }

    fn decoder(&self, tool_names: &ToolNames) -> Decoder {
        Decoder::with_tool_names(tool_names.clone())
    }

    fn error(_: &ToolNames, r: ErrorResponse) -> Error {
        error::http_error(r.status, r.retry_after, r.body)
    }
}
