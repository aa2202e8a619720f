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
//! (`stream.rs`), maps Bedrock's exceptions (`error.rs`) and asks the control plane which
//! models an application inference profile routes to (`profile.rs`).
//!
//! # Configuration
//!
//! - Authentication ([`auth`]): a Bedrock API key as a bearer token, from
//!   [`StreamOptions::api_key`](llm_core::StreamOptions::api_key) or `AWS_BEARER_TOKEN_BEDROCK`; else SigV4 with the
//!   environment's keys or a shared-file profile (`AWS_BEDROCK_SKIP_AUTH=1`: dummy keys);
//!   with the `aws-config` feature (off by default: it adds AWS's STS and SSO clients to
//!   the build), then AWS's whole default credential chain (SSO, assume-role,
//!   `credential_process`, web identity, container, instance metadata), refreshed before
//!   the credentials expire. Every attempt is authenticated and signed when it is sent, so a retry never resends
//!   an expired signature; a signature rejected for its time (a stale signature or a local
//!   clock that is off) is signed again once with the server's clock (its `Date` header),
//!   and later requests keep that offset.
//! - Environment: the process's, or the variables given to the provider's builder
//!   ([`llm_http::ProviderBuilder::env`]).
//! - Region: the `region` provider option, else `AWS_REGION`, else `AWS_DEFAULT_REGION`,
//!   else the region of a standard `bedrock-runtime.<region>.amazonaws.com` base URL, else
//!   the selected profile's `region` (`profile` option or `AWS_PROFILE`), else `us-east-1`.
//!   A custom base URL (VPC endpoint, proxy) is always used as is; a standard one is
//!   replaced by the configured region's endpoint (so a catalogue default never overrides
//!   `AWS_REGION`).
//! - HTTP version: HTTP/2 where the server offers it (ALPN), HTTP/1.1 only with
//!   `AWS_BEDROCK_FORCE_HTTP1=1` (a client given to
//!   [`llm_http::ProviderBuilder::http_client`] is used as is). Unlike OpenClaw, a proxy from
//!   `HTTP(S)_PROXY` does not force HTTP/1.1: OpenClaw's Node HTTP/2 handler cannot use
//!   proxy agents, while reqwest tunnels HTTP/2 through the proxy.
//! - Claude Fable 5 (also behind an alias whose `compat.canonicalModelId` names it) may
//!   refuse after partial output: its events are held until `messageStop`, and a refusal
//!   or failure shows only the error.
//! - Provider options (`StreamOptions::provider_options`, camelCase): `region`, `profile`,
//!   `thinkingDisplay`, `interleavedThinking`, `thinkingBudgets`, `requestMetadata`,
//!   `guardrailConfig`, `serviceTier`, `forceCache`, `controlPlaneUrl`. A mistyped option is
//!   an `invalid_request` error before anything is sent.
//! - Application inference profiles: an
//!   `arn:aws(-cn|-us-gov)?:bedrock:<region>:<account>:application-inference-profile/<id>`
//!   model id gets cache points when its profile segment says `claude`. Otherwise, when
//!   cache points are wanted (retention not `none`, no forced cache), the first request for
//!   that ARN asks the control plane's `GetInferenceProfile` (`GET
//!   /inference-profiles/<arn>` at `https://bedrock.<ARN region>.amazonaws.com`, or the
//!   `controlPlaneUrl` option: a proxy, a VPC endpoint, a test server; authenticated like the
//!   runtime request, SigV4 for the ARN's region) and sends cache points only if every
//!   routed `modelArn` names a model that caches. The answer is kept per ARN for the
//!   provider's lifetime, shared by its clones; concurrent first requests for one ARN wait
//!   for one lookup. The lookup runs inside the request's
//!   connect step: it is bounded by [`DEFAULT_LOOKUP_TIMEOUT`]
//!   ([`Bedrock::with_profile_lookup_timeout`]) and by the request's first-byte
//!   timeout, and cancelling the request cancels it. A failed lookup is logged (`tracing`)
//!   and the request goes on with the name heuristic (no cache points for an opaque name);
//!   that ARN is not asked again before [`DEFAULT_LOOKUP_BACKOFF`] has passed
//!   ([`Bedrock::with_profile_lookup_backoff`], doubled per further failure), and at
//!   most [`MAX_PROFILES`] ARNs are remembered. As in OpenClaw, the same answer drops
//!   `temperature` when any routed model rejects it (Opus 4.7/4.8, Fable 5, Mythos
//!   Preview).
//! - `serviceTier` (`flex`, `priority`, `default`, `reserved`, any case) is sent as
//!   `serviceTier: {type}`. An unknown tier is an error: OpenClaw logs a warning and sends
//!   the request without a tier, which bills and schedules it on a tier the caller did not
//!   ask for without telling them. Claude Fable 5 serves only `default`, so another known
//!   tier is left out with a warning (`tracing`), as OpenClaw does: the
//!   request is still one Bedrock serves.
//! - HTTP errors name their exception by the `x-amzn-ErrorType` response header, else by
//!   the body's `__type`/`code`, else by the status.
//!
//! # OpenClaw bugs fixed here
//!
//! OpenClaw's Bedrock adapter has gaps this crate closes:
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
//!   like an HTTP error (nothing was shown yet); OpenClaw never retries in-stream exceptions.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod attempt;
pub mod auth;
mod convert;
#[cfg(feature = "aws-config")]
mod credentials;
mod error;
pub mod eventstream;
mod profile;
mod stream;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use llm_core::output::{OutputFamily, OutputMode};
use llm_core::{Capabilities, Capability, Error, Model, ModelInfo, ProviderInfo};
#[cfg(test)]
use llm_core::{Context, StreamOptions};
use llm_http::{BoxFuture, Exchange, HttpResponse, Request, WireFormat};

pub use attempt::Call;
pub use auth::{Auth, AwsCredentials, BEARER_TOKEN_ENV};
pub use convert::BedrockCompat;
#[cfg(feature = "aws-config")]
pub use credentials::DEFAULT_CREDENTIALS_TIMEOUT;
pub use eventstream::{AwsEventStreamFraming, AwsFrame, AwsFrameError};
pub use profile::{DEFAULT_LOOKUP_BACKOFF, DEFAULT_LOOKUP_TIMEOUT, MAX_PROFILES};
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
    capabilities: Capabilities::ALL.without(Capability::StrictSchemas),
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
    output: &[
        OutputFamily::new(
            "claude-haiku-4-5",
            OutputMode::Native,
            "Claude Haiku 4.5 (`outputConfig.textFormat`)",
        ),
        OutputFamily::new(
            "claude-sonnet-4-5",
            OutputMode::Native,
            "Claude Sonnet 4.5 (`outputConfig.textFormat`)",
        ),
        OutputFamily::new(
            "claude-opus-4-5",
            OutputMode::Native,
            "Claude Opus 4.5 (`outputConfig.textFormat`)",
        ),
        OutputFamily::new(
            "claude-opus-4-6",
            OutputMode::Native,
            "Claude Opus 4.6 (`outputConfig.textFormat`)",
        ),
        // Converse has no tool use on these (AWS's table of Converse model features), so a
        // forced tool would be refused by the API: a typed error before any request instead.
        OutputFamily::new("amazon.titan", OutputMode::Unsupported, "Amazon Titan Text"),
        OutputFamily::new("claude-v2", OutputMode::Unsupported, "Claude 2.x"),
        OutputFamily::new("claude-instant", OutputMode::Unsupported, "Claude Instant"),
        OutputFamily::new("ai21.j2", OutputMode::Unsupported, "AI21 Jurassic-2"),
        OutputFamily::new("ai21.jamba-instruct", OutputMode::Unsupported, "AI21 Jamba-Instruct"),
        OutputFamily::new("cohere.command-text", OutputMode::Unsupported, "Cohere Command"),
        OutputFamily::new("cohere.command-light", OutputMode::Unsupported, "Cohere Command Light"),
        OutputFamily::new("meta.llama2", OutputMode::Unsupported, "Llama 2"),
        OutputFamily::new(
            "meta.llama3-8b",
            OutputMode::Unsupported,
            "Llama 3 8B (3.1 and later: tool)",
        ),
        OutputFamily::new(
            "meta.llama3-70b",
            OutputMode::Unsupported,
            "Llama 3 70B (3.1 and later: tool)",
        ),
        OutputFamily::new("mistral.mistral-7b", OutputMode::Unsupported, "Mistral 7B Instruct"),
        OutputFamily::new("mistral.mixtral-8x7b", OutputMode::Unsupported, "Mixtral 8x7B Instruct"),
        OutputFamily::new("deepseek.r1", OutputMode::Unsupported, "DeepSeek-R1"),
        OutputFamily::new(
            "",
            OutputMode::Tool,
            "every other model with tool use: older Claude, Nova, Llama 3.1+, ... (forced tool)",
        ),
    ],
};

/// The Amazon Bedrock `ConverseStream` provider: `BedrockProvider::new()`, or
/// `BedrockProvider::builder()` for its own HTTP client (the `GetInferenceProfile` lookups
/// use it too), an environment of its own (keys, region, profile, flags, shared-file paths:
/// for several differently configured providers in one process, and for tests that must not
/// change the process environment) or [`Bedrock`]'s settings.
pub type BedrockProvider = llm_http::HttpProvider<Bedrock>;

/// The Bedrock `ConverseStream` wire format, with what it keeps between requests.
///
/// Cheap to clone; clones share what `GetInferenceProfile` said about application inference
/// profiles, the clock offset learned from a signature rejected for its time, and the
/// default chain's credentials.
#[derive(Debug, Clone, Default)]
pub struct Bedrock {
    profiles: profile::ProfileCache,
    clock: attempt::Clock,
    #[cfg(feature = "aws-config")]
    credentials: credentials::CredentialCache,
}

impl Bedrock {
    /// This wire format with `timeout` as the bound on one `GetInferenceProfile` lookup
    /// (default [`DEFAULT_LOOKUP_TIMEOUT`]); when it passes, the request goes on with the
    /// name heuristic.
    #[must_use]
    pub fn with_profile_lookup_timeout(mut self, timeout: Duration) -> Self {
        self.profiles.timeout = timeout;
        self
    }

    /// This wire format with `timeout` as the bound on one resolution of AWS's default
    /// credential chain (default [`DEFAULT_CREDENTIALS_TIMEOUT`]).
    #[cfg(feature = "aws-config")]
    #[must_use]
    pub fn with_credentials_timeout(mut self, timeout: Duration) -> Self {
        self.credentials.timeout = timeout;
        self
    }

    /// This wire format with `backoff` as the wait after a failed `GetInferenceProfile`
    /// lookup before that profile is asked again (default [`DEFAULT_LOOKUP_BACKOFF`]; doubled
    /// per further failure, up to sixteen times); requests meanwhile use the name heuristic.
    #[must_use]
    pub fn with_profile_lookup_backoff(mut self, backoff: Duration) -> Self {
        self.profiles.backoff = backoff;
        self
    }
}

/// The environment variable that makes requests use HTTP/1.1 only.
pub const FORCE_HTTP1_ENV: &str = "AWS_BEDROCK_FORCE_HTTP1";

/// Whether [`FORCE_HTTP1_ENV`] is `1`: "some custom endpoints require HTTP/1.1".
fn force_http1(env: &dyn Fn(&str) -> Option<String>) -> bool {
    env(FORCE_HTTP1_ENV).is_some_and(|v| v.trim() == "1")
}

/// The request as sent: converted, serialized and authenticated (a bearer key, or signed
/// now with SigV4 for the endpoint's region).
#[cfg(test)]
fn prepare(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<llm_http::HttpRequest, llm_core::Error> {
    let unsigned = attempt::build(model, context, options, env, None)?;
    attempt::sign(&unsigned, auth::resolve_auth(options, env)?, std::time::SystemTime::now())
}

impl WireFormat for Bedrock {
    type Decoder = Decoder;
    type Call = Call;

    fn info(&self) -> &'static ProviderInfo {
        &INFO
    }

    fn api(&self) -> &str {
        API
    }

    fn provider_name(&self, _: &Model) -> String {
        PROVIDER.to_owned()
    }

    fn prepare(&self, request: Request<'_>) -> Result<Call, Error> {
        let Request { model, context, options, env } = request;
        let env = |name: &str| env.get(name);
        // An application profile whose caching is not known yet is looked up on the first
        // attempt (inside the driver's connect step: cancelling the request or its
        // first-byte timeout stops the lookup), and the request is converted after it.
        let target = profile::lookup_target(model, options, &env);
        let known = target.and_then(|arn| self.profiles.get(arn));
        let lookup = target.filter(|_| known.is_none()).map(str::to_owned);
        let unsigned = match lookup {
            Some(_) => None,
            None => Some(Arc::new(attempt::build(model, context, options, &env, known)?)),
        };
        Ok(Call {
            model: model.clone(),
            context: context.clone(),
            options: options.clone(),
            lookup,
            unsigned: Mutex::new(unsigned),
            skew_corrected: AtomicBool::new(false),
        })
    }

    fn attempt(
        &self,
        call: &Arc<Call>,
        exchange: Exchange,
    ) -> BoxFuture<'static, Result<HttpResponse, Error>> {
        let exchange = if force_http1(&|name| exchange.env().get(name)) {
            exchange.http1_only()
        } else {
            exchange
        };
        let (wire, call) = (self.clone(), Arc::clone(call));
        Box::pin(async move { call.attempt(&wire, &exchange).await })
    }

    fn decoder(&self, call: &Call) -> Decoder {
        Decoder::for_model(&call.model)
    }
}

#[cfg(test)]
mod tests;
