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
//!   `guardrailConfig`, `serviceTier`, `forceCache`, `controlPlaneUrl`. A mistyped option is
//!   an `invalid_request` error before anything is sent.
//! - Application inference profiles (spec A.12.6): an
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
//!   ([`BedrockProvider::with_profile_lookup_timeout`]) and by the request's first-byte
//!   timeout, and cancelling the request cancels it. A failed lookup is logged (`tracing`),
//!   not cached, and the request goes on with the name heuristic (no cache points for an
//!   opaque name); the next request asks again. As in OpenClaw, the same answer drops
//!   `temperature` when any routed model rejects it (Opus 4.7/4.8, Fable 5, Mythos
//!   Preview).
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
mod profile;
mod stream;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use llm_core::{
    AssistantStream, Capabilities, Capability, Context, Error, Model, ModelInfo, Provider,
    ProviderInfo, StreamOptions,
};
use llm_http::{ErrorResponse, HttpRequest, HttpTransport, TransportConfig};

pub use auth::{Auth, AwsCredentials, BEARER_TOKEN_ENV};
pub use eventstream::{AwsEventStreamFraming, AwsFrame, AwsFrameError};
pub use profile::DEFAULT_LOOKUP_TIMEOUT;
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

/// The Amazon Bedrock `ConverseStream` provider.
///
/// Cheap to clone; clones share the HTTP clients and what `GetInferenceProfile` said about
/// application inference profiles.
#[derive(Debug, Clone, Default)]
pub struct BedrockProvider {
    http: HttpTransport,
    profiles: profile::ProfileCache,
}

impl BedrockProvider {
    /// A provider with its own HTTP clients (rustls; one per connect timeout).
    pub fn new() -> Self {
        Self::default()
    }

    /// A provider that sends every request with `http` (proxies, custom TLS, pools; that
    /// client's own connect timeout applies), the `GetInferenceProfile` lookups included.
    pub fn with_http_client(http: reqwest::Client) -> Self {
        BedrockProvider { http: HttpTransport::with_client(http), ..Self::default() }
    }

    /// This provider with `timeout` as the bound on one `GetInferenceProfile` lookup
    /// (default [`DEFAULT_LOOKUP_TIMEOUT`]); when it passes, the request goes on with the
    /// name heuristic.
    #[must_use]
    pub fn with_profile_lookup_timeout(mut self, timeout: Duration) -> Self {
        self.profiles.timeout = timeout;
        self
    }
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
#[cfg(test)]
fn prepare(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<HttpRequest, Error> {
    prepare_with(model, context, options, env, None)
}

/// [`prepare`] with what `GetInferenceProfile` said about the model's profile, when known.
fn prepare_with(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    env: &dyn Fn(&str) -> Option<String>,
    profile: Option<profile::ProfileTraits>,
) -> Result<HttpRequest, Error> {
    // A profile's own region is read from the shared config only when a profile is selected.
    let profile_region =
        auth::selected_profile(options, env).map(|_| auth::resolve_region(options, env));
    let request =
        convert::build_request_with(model, context, options, env, profile_region, profile)?;
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
        let transport =
            if force_http1(&process_env) { self.http.http1_only() } else { self.http.clone() };
        let profile = match profile::lookup_target(model, options, &process_env) {
            None => None,
            Some(arn) => match self.profiles.get(arn) {
                Some(known) => Some(known),
                None => return self.stream_after_lookup(&transport, model, context, options),
            },
        };
        let http = prepare_with(model, context, options, &process_env, profile);
        let for_decoder = model.clone();
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

impl BedrockProvider {
    /// The request of an application-profile model whose caching is not known yet: the
    /// first attempt asks `GetInferenceProfile` (bounded by the lookup timeout, and inside
    /// the driver's connect step, so cancelling the request or its first-byte timeout stops
    /// it), builds and signs the request with the answer (or the heuristic when the lookup
    /// failed), and later attempts resend that request. Only a successful answer is cached.
    fn stream_after_lookup(
        &self,
        transport: &HttpTransport,
        model: &Model,
        context: &Context,
        options: &StreamOptions,
    ) -> AssistantStream {
        let client = match transport.client(TransportConfig::from_options(options), PROVIDER) {
            Ok(client) => client,
            Err(error) => return AssistantStream::from_error(model, error),
        };
        let lookup = Arc::new(profile::lookup_request(model, options, &process_env));
        let inputs = Arc::new((model.clone(), context.clone(), options.clone()));
        let profiles = self.profiles.clone();
        let prepared: Arc<Mutex<Option<Arc<HttpRequest>>>> = Arc::default();
        let map_error: Arc<dyn Fn(ErrorResponse) -> Error + Send + Sync> =
            Arc::new(error::http_error);
        let name: Arc<str> = PROVIDER.into();
        let connect = move |_attempt: u32| {
            let (client, lookup, inputs, profiles, prepared, map_error, name) = (
                client.clone(),
                Arc::clone(&lookup),
                Arc::clone(&inputs),
                profiles.clone(),
                Arc::clone(&prepared),
                Arc::clone(&map_error),
                Arc::clone(&name),
            );
            async move {
                let ready = prepared.lock().unwrap_or_else(PoisonError::into_inner).clone();
                let request = match ready {
                    Some(request) => request,
                    None => {
                        let (model, context, options) = &*inputs;
                        let profile = ask_profile(&client, &lookup, &profiles, &model.id).await;
                        let request =
                            Arc::new(prepare_with(model, context, options, &process_env, profile)?);
                        *prepared.lock().unwrap_or_else(PoisonError::into_inner) =
                            Some(Arc::clone(&request));
                        request
                    }
                };
                llm_http::send(client, request, name, map_error).await
            }
        };
        let for_decoder = model.clone();
        llm_core::drive::drive(
            model,
            options,
            PROVIDER,
            connect,
            AwsEventStreamFraming::with_limit,
            move || Decoder::for_model(&for_decoder),
        )
    }
}

/// What `GetInferenceProfile` says about `arn` (cached on success; a concurrent request for
/// the same ARN waits for this lookup instead of sending its own), `None` when the lookup
/// failed (logged; the heuristic decides and the next request asks again).
async fn ask_profile(
    client: &reqwest::Client,
    lookup: &Result<HttpRequest, Error>,
    profiles: &profile::ProfileCache,
    arn: &str,
) -> Option<profile::ProfileTraits> {
    let cell = profiles.cell(arn);
    let answer = cell
        .get_or_try_init(|| async {
            match lookup {
                Ok(request) => profile::lookup(client.clone(), request, profiles.timeout).await,
                Err(error) => Err(error.clone()),
            }
        })
        .await;
    match answer {
        Ok(traits) => Some(*traits),
        Err(error) => {
            tracing::warn!(
                provider = PROVIDER,
                error = %error.message,
                "GetInferenceProfile failed; deciding cache points from the profile name"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests;
