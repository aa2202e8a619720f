//! The {{name}} provider for clawcall (scaffolded by `cargo xtask new-provider`).
//!
//! What it supports is declared as data in [`INFO`] (`capabilities`): the conformance
//! grid runs the shared scenarios those capabilities make apply (each has a fixture in
//! `fixtures/{{name}}/`) and skips the others; `claw --provider {{name}}` and the docs
//! read the rest of [`INFO`].
//!
//! The wire format is the scaffold's own (`POST /v1/chat`, one JSON object per SSE event,
//! described in `stream.rs`): replace it with the provider's, then its fixtures.
//!
//! The HTTP exchange, retries, timeouts, cancellation and tracing are `llm-http`'s;
//! this crate converts requests (`convert.rs`), decodes its stream (`stream.rs`)
//! and maps its error bodies (`error.rs`).
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod convert;
mod error;
mod stream;

use llm_core::output::{OutputFamily, OutputMode};
use llm_core::{Capabilities, Capability, Error, ModelInfo, ProviderInfo};
use llm_http::{Converted, ErrorResponse, HttpWire, Request};

pub use stream::Decoder;

/// The API id this crate serves.
pub const API: &str = "{{name}}";

/// The provider name used in errors.
pub const PROVIDER: &str = "{{name}}";

/// What this crate declares about itself.
pub const INFO: ProviderInfo = ProviderInfo {
    name: "{{name}}",
    api: API,
    provider: PROVIDER,
    default_base_url: "https://api.{{name}}.invalid",
    key_env: &["{{UPPER}}_API_KEY"],
    // Each one makes shared scenarios apply (fixtures/SCENARIOS.md), and each of those
    // has a fixture: declare more as their fixtures land.
    capabilities: Capabilities::of(&[
        Capability::Streaming,
        Capability::Tools,
        Capability::ParallelToolCalls,
        Capability::StreamingToolArguments,
    ]),
    // Known models with limits and prices; the first is `claw`'s default.
    models: &[] as &[ModelInfo],
    // Every model carries a format as `response_format` (convert.rs).
    output: &[OutputFamily::new("", OutputMode::Native, "every model (`response_format`)")],
};

/// The {{name}} provider: `{{Camel}}Provider::new()`, or `{{Camel}}Provider::builder()`
/// for its own HTTP client or environment.
pub type {{Camel}}Provider = llm_http::HttpProvider<{{Camel}}>;

/// The {{name}} wire format.
#[derive(Debug, Clone, Copy, Default)]
pub struct {{Camel}};

impl HttpWire for {{Camel}} {
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
