//! Mistral chat completions (`POST /v1/chat/completions`, streamed) for clawcall.
//!
//! Capabilities:
//!
//! - [x] streamed text, with `content` as a string or an array of typed chunks
//! - [x] tool calls: whole in one chunk (no `index`) or in `index`-keyed fragments;
//!   `arguments` as a string or an already-parsed object
//! - [x] the id string `"null"` (or no id): a deterministic 9-character id from
//!   the response id and the call's index, stable across chunks; a real id
//!   followed by `"null"` stays one call
//! - [x] Magistral thinking (`{"type":"thinking","thinking":[{"type":"text",…}]}`),
//!   interleaved with text
//! - [x] snake_case and camelCase field names; unknown fields (`p` padding) ignored
//! - [x] finish reasons `stop`, `tool_calls`, `length`, `model_length`, `error`
//!   (an error event), unknown (→ `stop`); usage with cached prompt tokens
//! - [x] request: tools (input order, `strict: false`), `tool_choice`, `temperature`,
//!   `max_tokens`, `stop`, `prompt_mode` / `reasoning_effort`, `x-affinity` from
//!   the session id, user headers merged last, `base_url` override
//! - [x] replay: outgoing tool-call ids are 9 characters `[a-zA-Z0-9]`, mapped
//!   injectively and identically for a call and its result; same-model thinking
//!   replayed as thinking chunks; error tool results prefixed `[tool error] `
//! - [x] error bodies with `message` as a string, object or array and `code` as
//!   null, a string or a number
//! - [x] retries, timeouts, cancellation and tracing through [`llm_core::raw::drive`]
//! - [ ] non-streaming requests, FIM, agents/conversations endpoints
//!
//! Provider options ([`StreamOptions::provider_options`](llm_core::StreamOptions::provider_options)): `promptMode` (string),
//! `reasoningEffort` (string) override the computed reasoning parameters;
//! `parallelToolCalls` (bool) sets `parallel_tool_calls`. Model flags:
//! [`MistralCompat`].
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

use llm_core::output::{OutputFamily, OutputMode};
use llm_core::{Capabilities, Capability, Error, ModelInfo, ProviderInfo};
use llm_http::{Converted, ErrorResponse, HttpWire, Request};

mod convert;
mod error;
mod stream;

pub use convert::{MistralCompat, MistralReasoningFormat};
pub use stream::Decoder;

/// The API id this crate serves.
pub const API: &str = "mistral-conversations";

/// The provider name used in errors.
pub const PROVIDER: &str = "mistral";

/// The Mistral provider: `MistralProvider::new()`, or `MistralProvider::builder()` for its
/// own HTTP client or environment.
pub type MistralProvider = llm_http::HttpProvider<Mistral>;

/// The Mistral chat-completions wire format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mistral;

/// What this crate declares about itself: `claw`, the conformance grid and the docs
/// read it (capabilities decide which shared scenarios apply).
pub const INFO: ProviderInfo = ProviderInfo {
    name: "mistral",
    api: API,
    provider: PROVIDER,
    default_base_url: "https://api.mistral.ai",
    key_env: &["MISTRAL_API_KEY"],
    capabilities: Capabilities::ALL
        .without(Capability::ImagesInToolResults)
        .without(Capability::PromptCaching)
        .without(Capability::StrictSchemas),
    models: &[
        ModelInfo::new("mistral-large-latest", 128_000, 32_768, [2.0, 6.0, 0.0, 0.0]).images(),
        ModelInfo::new("mistral-medium-latest", 128_000, 32_768, [0.4, 2.0, 0.0, 0.0]).images(),
        ModelInfo::new("magistral-medium-latest", 128_000, 32_768, [2.0, 5.0, 0.0, 0.0])
            .reasoning(),
    ],
    output: &[OutputFamily::new(
        "",
        OutputMode::Native,
        "every model (`response_format` `json_schema`)",
    )],
};

impl HttpWire for Mistral {
    type Decoder = Decoder;
    type State = ();

    fn info(&self) -> &'static ProviderInfo {
        &INFO
    }

    fn convert(&self, request: Request<'_>) -> Result<Converted<()>, Error> {
        let http = convert::build_request(request.model, request.context, request.options)?;
        Ok(Converted::new(http, ()))
    }

    fn decoder(&self, (): &()) -> Decoder {
        Decoder::new()
    }

    fn error((): &(), r: ErrorResponse) -> Error {
        error::http_error(r.status, r.retry_after, r.body)
    }
}

/// Test-only access to the pure parts (request building, decoding), for the
/// integration tests and the benchmark. Not part of the supported API.
#[doc(hidden)]
pub mod __private {
    use llm_core::{Context, Error, Model, StreamOptions};

    /// The request as sent (the auth value is marked sensitive).
    pub fn build_request(
        model: &Model,
        context: &Context,
        options: &StreamOptions,
    ) -> Result<llm_http::HttpRequest, Error> {
        crate::convert::build_request(model, context, options)
    }

    /// A fresh stream decoder.
    pub fn decoder() -> impl llm_core::raw::drive::WireDecoder {
        crate::stream::Decoder::new()
    }

    /// The outgoing id the request uses for each source tool-call id, in order.
    pub fn map_tool_call_ids(ids: &[String]) -> Vec<String> {
        let mut map = crate::convert::ToolCallIds::default();
        ids.iter().map(|id| map.map(id)).collect()
    }

    /// Decodes a Mistral error body into `(message, code)`.
    pub fn decode_error_body(body: &str) -> (Option<String>, Option<String>) {
        let read = llm_http::ErrorBody::parse(body);
        (read.message.clone(), crate::error::label(&read).map(str::to_owned))
    }

    /// Maps an HTTP error response.
    pub fn http_error(status: u16, body: &str) -> Error {
        crate::error::http_error(status, None, body.to_owned())
    }
}
