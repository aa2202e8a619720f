//! Google Gemini for clawcall: the Generative Language API (`google-generative-ai`)
//! and Vertex AI (`google-vertex`), both over `streamGenerateContent?alt=sse`.
//!
//! Capabilities:
//! - [x] Streaming text, with `data: …\r\n\r\n` (CRLF) framing and no terminator
//! - [x] Tool calls: `functionCall` parts arrive whole (args an object, maybe absent),
//!   several per chunk; missing or duplicate ids get ids unique within the message
//! - [x] Tool schemas as `parametersJsonSchema` (inlined `$ref`s, no `$ref` with
//!   siblings), or the legacy OpenAPI-3.0 `parameters` with
//!   [`GoogleCompat::use_parameters`]
//! - [x] Tool choice (`AUTO` / `NONE` / `ANY`, one named function via `allowedFunctionNames`)
//! - [x] Thinking: `thought: true` parts; `thinkingBudget` (Gemini 2.x) or
//!   `thinkingLevel` (Gemini 3, Gemma 4)
//! - [x] Thought signatures on text, thinking and call parts, replayed byte for byte to
//!   the same model (invalid base64 dropped); Gemini 3 gets Google's skip sentinel on
//!   a replayed first call that has no signature
//! - [x] Images in user messages and tool results (nested in `functionResponse.parts`
//!   on Gemini 3+, a separate user turn after the results on older models)
//! - [x] Usage from the last `usageMetadata` (input excludes cached tokens)
//! - [x] Errors: HTTP bodies (`{"error":{code,message,status,details}}`, an invalid key
//!   is a 400 mapped to `auth`), `{"error": …}` inside a 200 stream, blocked prompts,
//!   and blocking finish reasons (`SAFETY`, `RECITATION`, …) as errors even with calls
//! - [x] Retries, timeouts, cancellation and tracing through [`llm_core::drive`]
//! - [ ] Vertex streamed function-call arguments (`streamFunctionCallArguments`), not requested
//! - [ ] Application Default Credentials: pass an OAuth access token as the API key
//!
//! The key goes in the `x-goog-api-key` header (never in the URL); Vertex sends it as
//! `Authorization: Bearer <token>`.
//!
//! Provider options ([`StreamOptions::provider_options`]): `thinkingBudget` (integer,
//! overrides the level's budget; `0` turns thinking off), `thinkingLevel` (string,
//! `LOW`/`HIGH`/…), `streamFunctionCallArguments` (boolean: Gemini 3 on Vertex streams
//! each call's arguments as `partialArgs`, decoded into live argument fragments), and for
//! Vertex `project` and `location`.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

use llm_core::output::{OutputFamily, OutputMode};
use llm_core::{AssistantStream, Context, Error, ErrorKind, Model, Provider, StreamOptions};
use llm_core::{Capabilities, Capability, ModelInfo, ProviderInfo};
use llm_http::{HttpRequest, HttpTransport};

mod compat;
mod convert;
mod error;
mod schema;
mod stream;

pub use compat::GoogleCompat;
pub use stream::Decoder;

/// API id of the Generative Language API (Gemini API / AI Studio).
pub const API: &str = llm_core::api::GOOGLE_GENERATIVE_AI;
/// API id of Vertex AI.
pub const VERTEX_API: &str = llm_core::api::GOOGLE_VERTEX;
/// Provider name used in errors.
pub const PROVIDER: &str = "google";

/// Default Vertex location when neither the model, the options nor the environment name one.
pub const DEFAULT_VERTEX_LOCATION: &str = "us-central1";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    GenerativeLanguage,
    Vertex,
}

/// The Gemini provider, for either the Generative Language API ([`GoogleProvider::new`],
/// API id [`API`]) or Vertex AI ([`GoogleProvider::vertex`], API id [`VERTEX_API`]).
///
/// The two differ only in [`Provider::api`] (the registry key). A request goes to the
/// endpoint its `model.api` names (`google-generative-ai` or `google-vertex`); a model
/// with another API id goes to the provider's own endpoint.
#[derive(Debug, Clone)]
pub struct GoogleProvider {
    http: HttpTransport,
    flavor: Flavor,
}

impl Default for GoogleProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl GoogleProvider {
    /// The Generative Language API provider with its own HTTP clients.
    pub fn new() -> Self {
        GoogleProvider { http: HttpTransport::new(), flavor: Flavor::GenerativeLanguage }
    }

    /// The Generative Language API provider on `http`.
    pub fn with_http_client(http: reqwest::Client) -> Self {
        GoogleProvider {
            http: HttpTransport::with_client(http),
            flavor: Flavor::GenerativeLanguage,
        }
    }

    /// The Vertex AI provider with its own HTTP clients.
    ///
    /// Needs a project (`project` provider option, [`GoogleCompat::project`], or
    /// `GOOGLE_CLOUD_PROJECT`) and takes the location the same way (default
    /// [`DEFAULT_VERTEX_LOCATION`]). The API key option holds an OAuth access token.
    pub fn vertex() -> Self {
        GoogleProvider { http: HttpTransport::new(), flavor: Flavor::Vertex }
    }

    /// The Vertex AI provider on `http`.
    pub fn vertex_with_http_client(http: reqwest::Client) -> Self {
        GoogleProvider { http: HttpTransport::with_client(http), flavor: Flavor::Vertex }
    }

    fn endpoint(&self, model: &Model, options: &StreamOptions) -> Result<convert::Endpoint, Error> {
        // The model's API id picks the endpoint; the flavor only decides for other ids.
        let vertex = match model.api.as_str() {
            VERTEX_API => true,
            API => false,
            _ => self.flavor == Flavor::Vertex,
        };
        if !vertex {
            return Ok(convert::Endpoint::GenerativeLanguage);
        }
        let compat = GoogleCompat::from_model(model)?;
        let pick = |option: &str, from_compat: Option<String>, env: &[&str]| -> Option<String> {
            options
                .provider_options
                .get(option)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
                .or(from_compat)
                .or_else(|| env.iter().find_map(|var| std::env::var(var).ok()))
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        };
        let project = pick("project", compat.project, &["GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT"]).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidRequest,
                PROVIDER,
                "Vertex AI needs a project: set the `project` provider option, the model compat `project`, or GOOGLE_CLOUD_PROJECT",
            )
            .with_retryable(false)
        })?;
        let location = pick("location", compat.location, &["GOOGLE_CLOUD_LOCATION"])
            .unwrap_or_else(|| DEFAULT_VERTEX_LOCATION.to_owned());
        let valid = |s: &str| {
            s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        };
        if !valid(&project) || !valid(&location) {
            return Err(Error::new(
                ErrorKind::InvalidRequest,
                PROVIDER,
                "Invalid Vertex AI project or location",
            )
            .with_retryable(false));
        }
        Ok(convert::Endpoint::Vertex { project, location })
    }
}

/// What this crate declares about itself: `claw`, the conformance grid and the docs
/// read it (capabilities decide which shared scenarios apply).
pub const INFO: ProviderInfo = ProviderInfo {
    name: "google",
    api: API,
    provider: PROVIDER,
    default_base_url: "https://generativelanguage.googleapis.com/v1beta",
    key_env: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
    capabilities: Capabilities::of(&[
        Capability::Streaming,
        Capability::Tools,
        Capability::ParallelToolCalls,
        Capability::Thinking,
        Capability::ImagesInUserMessages,
        Capability::ImagesInToolResults,
        Capability::PromptCaching,
    ]),
    models: &[
        ModelInfo::new("gemini-2.5-flash", 1_048_576, 65_536, [0.3, 2.5, 0.075, 0.0])
            .reasoning()
            .images(),
        ModelInfo::new("gemini-2.5-pro", 1_048_576, 65_536, [1.25, 10.0, 0.31, 0.0])
            .reasoning()
            .images(),
    ],
    output: &[
        OutputFamily::new(
            "gemini-1.",
            OutputMode::Unsupported,
            "Gemini 1.x (no `responseJsonSchema`)",
        ),
        OutputFamily::new(
            "gemini-2.0",
            OutputMode::Unsupported,
            "Gemini 2.0 (no `responseJsonSchema`)",
        ),
        OutputFamily::new(
            "",
            OutputMode::Native,
            "Gemini 2.5 and later (`responseMimeType` + `responseJsonSchema`)",
        ),
    ],
};

impl Provider for GoogleProvider {
    fn capabilities(&self) -> Capabilities {
        INFO.capabilities
    }

    fn api(&self) -> &str {
        match self.flavor {
            Flavor::GenerativeLanguage => API,
            Flavor::Vertex => VERTEX_API,
        }
    }

    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        let request = self
            .endpoint(model, options)
            .and_then(|endpoint| convert::build_request(model, context, options, &endpoint));
        let request = match request {
            Ok(r) => r,
            Err(e) => return AssistantStream::from_error(model, e),
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

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    fn _assert_impls() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<GoogleProvider>();
        send_sync::<Decoder>();
    }

    #[test]
    fn api_ids() {
        assert_eq!(GoogleProvider::new().api(), "google-generative-ai");
        assert_eq!(GoogleProvider::vertex().api(), "google-vertex");
    }

    #[test]
    fn vertex_needs_a_project_and_takes_options() {
        let p = GoogleProvider::vertex();
        let model = Model { id: "gemini-2.5-flash".into(), ..Model::default() };
        let gl = Model { api: API.into(), ..model.clone() };
        assert_eq!(
            p.endpoint(&gl, &StreamOptions::default()).unwrap(),
            convert::Endpoint::GenerativeLanguage
        );
        let mut options = StreamOptions::default();
        options.provider_options.insert("project".into(), serde_json::json!("my-proj"));
        options.provider_options.insert("location".into(), serde_json::json!("europe-west4"));
        assert_eq!(
            p.endpoint(&model, &options).unwrap(),
            convert::Endpoint::Vertex {
                project: "my-proj".into(),
                location: "europe-west4".into()
            }
        );
        options.provider_options.insert("project".into(), serde_json::json!("a/b"));
        assert!(p.endpoint(&model, &options).is_err());
    }
}
