//! Amazon Bedrock's `ConverseStream` API for clawcall (api `bedrock-converse-stream`,
//! provider `amazon-bedrock`).
//!
//! What it supports is declared as data in [`INFO`] (`capabilities`): the conformance
//! grid runs the shared scenarios those capabilities make apply and skips the others,
//! `claw --provider bedrock` and the docs read the rest of [`INFO`].
//!
//! The HTTP exchange, retries, timeouts, cancellation and tracing are `llm-http`'s;
//! this crate converts requests (`convert.rs`: body, endpoint and region, model-id path
//! encoding), authenticates them (`auth.rs`: bearer key or SigV4), frames the AWS event
//! stream (`eventstream.rs`, binary messages with CRCs instead of SSE), decodes its events
//! (`stream.rs`) and maps Bedrock's exceptions (`error.rs`).
//!
//! # Configuration
//!
//! - Authentication ([`auth`]): a Bedrock API key as a bearer token, from
//!   [`StreamOptions::api_key`] or `AWS_BEARER_TOKEN_BEDROCK`; else SigV4 with the
//!   environment's keys or a shared-file profile (`AWS_BEDROCK_SKIP_AUTH=1`: dummy keys).
//! - Region: the `region` provider option, else `AWS_REGION`, else `AWS_DEFAULT_REGION`,
//!   else the region of a standard `bedrock-runtime.<region>.amazonaws.com` base URL, else
//!   the selected profile's `region` (`profile` option or `AWS_PROFILE`), else `us-east-1`.
//!   A custom base URL (VPC endpoint, proxy) is always used as is; a standard one is
//!   replaced by the configured region's endpoint (so a catalogue default never overrides
//!   `AWS_REGION`).
//! - HTTP version: HTTP/2 where the server offers it (ALPN), HTTP/1.1 only with
//!   `AWS_BEDROCK_FORCE_HTTP1=1` (spec A.2; a client given to
//!   [`BedrockProvider::with_http_client`] is used as is). Unlike OpenClaw, a proxy from
//!   `HTTP(S)_PROXY` does not force HTTP/1.1: OpenClaw's Node HTTP/2 handler cannot use
//!   proxy agents, while reqwest tunnels HTTP/2 through the proxy.
//! - Claude Fable 5 (also behind an alias whose `compat.canonicalModelId` names it) may
//!   refuse after partial output: its events are held until `messageStop`, and a refusal
//!   or failure shows only the error.
//! - Provider options (`StreamOptions::provider_options`, camelCase): `region`, `profile`,
//!   `thinkingDisplay`, `interleavedThinking`, `thinkingBudgets`, `requestMetadata`,
//!   `guardrailConfig`, `serviceTier`, `forceCache`. A mistyped option is an
//!   `invalid_request` error before anything is sent.
//! - `serviceTier` (`flex`, `priority`, `default`, `reserved`, any case) is sent as
//!   `serviceTier: {type}`. An unknown tier is an error: OpenClaw logs a warning and sends
//!   the request without a tier, which bills and schedules it on a tier the caller did not
//!   ask for without telling them. Claude Fable 5 serves only `default`, so another known
//!   tier is left out with a warning (`tracing`), as OpenClaw does (spec A.12.3): the
//!   request is still one Bedrock serves.
//! - HTTP errors name their exception by the `x-amzn-ErrorType` response header, else by
//!   the body's `__type`/`code`, else by the status (spec A.11.3).
//!
//! # OpenClaw bugs fixed here
//!
//! OpenClaw's Bedrock adapter (spec `bedrock-azure.md` A.14) has gaps this crate closes:
//! - stop sequences (`StreamOptions::stop`) are sent as `inferenceConfig.stopSequences`;
//!   OpenClaw never sends them;
//! - redacted reasoning (`reasoningContent.redactedContent`) is kept as a redacted thinking
//!   block and replayed to the same model; OpenClaw drops it;
//! - the `guardrail_intervened` and `content_filtered` stop reasons end the stream with a
//!   `refused` error that names the reason; OpenClaw reports "An unknown error occurred";
//! - consecutive messages of one role are sent as one (a user message after tool results,
//!   say): Bedrock rejects a conversation whose roles do not alternate, and OpenClaw merges
//!   only runs of tool results;
//! - a stream that ends before `messageStop` is a `truncated` error, not a success;
//! - an `exception` message before any content (a throttling exception, say) is retried
//!   like an HTTP error (spec decision 7); OpenClaw never retries in-stream exceptions.
#![warn(missing_docs)]

pub mod auth;
mod convert;
mod error;
pub mod eventstream;
mod stream;

use std::time::SystemTime;

use llm_core::{
    AssistantStream, Capabilities, Capability, Context, Error, Model, ModelInfo, Provider,
    ProviderInfo, StreamOptions,
};
use llm_http::HttpRequest;

pub use auth::{Auth, AwsCredentials, BEARER_TOKEN_ENV};
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
    key_env: &[BEARER_TOKEN_ENV],
    capabilities: Capabilities::of(&[
        Capability::Streaming,
        Capability::Tools,
        Capability::ParallelToolCalls,
        Capability::StreamingToolArguments,
        Capability::Thinking,
        Capability::ImagesInUserMessages,
        Capability::ImagesInToolResults,
        Capability::PromptCaching,
    ]),
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
    /// The Amazon Bedrock `ConverseStream` provider.
    pub struct BedrockProvider;
}

/// The process environment.
fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The environment variable that makes requests use HTTP/1.1 only (spec A.2).
pub const FORCE_HTTP1_ENV: &str = "AWS_BEDROCK_FORCE_HTTP1";

/// Whether [`FORCE_HTTP1_ENV`] is `1`: "some custom endpoints require HTTP/1.1".
fn force_http1(env: &dyn Fn(&str) -> Option<String>) -> bool {
    env(FORCE_HTTP1_ENV).is_some_and(|v| v.trim() == "1")
}

/// The request as sent: converted, serialized and authenticated (a bearer key, or signed
/// with SigV4 for the endpoint's region).
fn prepare(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<HttpRequest, Error> {
    // A profile's own region is read from the shared config only when a profile is selected.
    let profile_region =
        auth::selected_profile(options, env).map(|_| auth::resolve_region(options, env));
    let request = convert::build_request(model, context, options, env, profile_region)?;
    let mut auth = auth::resolve_auth(options, env)?;
    if let Auth::SigV4 { region, .. } = &mut auth {
        // A pinned standard endpoint signs for its own region (spec A.2).
        region.clone_from(&request.region);
    }
    let mut http = HttpRequest::json(PROVIDER, request.url, request.headers, &request.body)?;
    auth::apply(&auth, &mut http, SystemTime::now())?;
    Ok(http)
}

impl Provider for BedrockProvider {
    fn api(&self) -> &str {
        API
    }

    fn capabilities(&self) -> Capabilities {
        INFO.capabilities
    }

    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        let http = prepare(model, context, options, &process_env);
        let for_decoder = model.clone();
        let transport =
            if force_http1(&process_env) { self.http.http1_only() } else { self.http.clone() };
        transport.stream(
            model,
            options,
            PROVIDER,
            http,
            error::http_error,
            AwsEventStreamFraming::with_limit,
            move || Decoder::for_model(&for_decoder),
        )
    }
}

#[cfg(test)]
mod tests;
