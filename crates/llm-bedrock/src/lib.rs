//! The bedrock provider for clawcall (scaffolded by `cargo xtask new-provider`).
//!
//! What it supports is declared as data in [`INFO`] (`capabilities`): the conformance
//! grid runs the shared scenarios those capabilities make apply and skips the others,
//! `claw --provider bedrock` and the docs read the rest of [`INFO`].
//! Declare a capability once its fixtures exist (docs/adding-a-provider.md).
//!
//! The HTTP exchange, retries, timeouts, cancellation and tracing are `llm-http`'s;
//! this crate converts requests (`convert.rs`), decodes its stream (`stream.rs`)
//! and maps its error bodies (`error.rs`).
#![warn(missing_docs)]

pub mod auth;
mod convert;
mod error;
pub mod eventstream;
mod stream;

use llm_core::{
    AssistantStream, Capabilities, Context, Model, ModelInfo, Provider, ProviderInfo, StreamOptions,
};
use llm_http::HttpRequest;

pub use auth::{Auth, AwsCredentials};
pub use eventstream::{AwsEventStreamFraming, AwsFrame, AwsFrameError};
pub use stream::Decoder;

/// The API id this crate serves.
pub const API: &str = "bedrock-converse-stream";

/// The provider name used in errors.
pub const PROVIDER: &str = "amazon-bedrock";

/// What this crate declares about itself.
pub const INFO: ProviderInfo = ProviderInfo {
    name: "bedrock",
    api: API,
    provider: PROVIDER,
    default_base_url: "https://bedrock-runtime.us-east-1.amazonaws.com",
    key_env: &["AWS_BEARER_TOKEN_BEDROCK"],
    // Add `Capability::Streaming`, `Capability::Tools`, ... as the fixtures land.
    capabilities: Capabilities::NONE,
    // Known models with limits and prices; the first is `claw`'s default.
    models: &[
        ModelInfo::new(
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            200_000,
            64_000,
            [3.0, 15.0, 0.3, 3.75],
        )
        .reasoning()
        .images(),
        ModelInfo::new(
            "us.anthropic.claude-haiku-4-5-20251001-v1:0",
            200_000,
            64_000,
            [1.0, 5.0, 0.1, 1.25],
        )
        .reasoning()
        .images(),
        ModelInfo::new("us.amazon.nova-pro-v1:0", 300_000, 10_000, [0.8, 3.2, 0.2, 0.0]).images(),
    ],
};

llm_http::http_provider! {
    /// The bedrock provider.
    pub struct BedrockProvider;
}

impl Provider for BedrockProvider {
    fn api(&self) -> &str {
        API
    }

    fn capabilities(&self) -> Capabilities {
        INFO.capabilities
    }

    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        let request = match convert::build_request(model, context, options) {
            Ok(request) => request,
            Err(error) => return AssistantStream::from_error(model, error),
        };
        let http = HttpRequest::json(PROVIDER, request.url, request.headers, &request.body);
        self.http.stream_sse(
            model,
            options,
            PROVIDER,
            http,
            |r| error::http_error(r.status, r.retry_after, r.body),
            Decoder::new,
        )
    }
}
