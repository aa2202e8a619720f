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
//! - [x] Retries, timeouts, cancellation and tracing through [`llm_core::raw::drive`]
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
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

use llm_core::StreamOptions;
use llm_core::output::{OutputFamily, OutputMode};
use llm_core::{Capabilities, Capability, Error, ErrorKind, Model, ModelInfo, ProviderInfo};
use llm_http::{Converted, Env, ErrorResponse, HttpWire, Request};

mod compat;
mod convert;
mod error;
mod schema;
mod stream;

pub use compat::GoogleCompat;
pub use stream::Decoder;

/// API id of the Generative Language API (Gemini API / AI Studio).
pub const API: &str = "google-generative-ai";
/// API id of Vertex AI.
pub const VERTEX_API: &str = "google-vertex";
/// Provider name used in errors.
pub const PROVIDER: &str = "google";

/// Default Vertex location when neither the model, the options nor the environment name one.
pub const DEFAULT_VERTEX_LOCATION: &str = "us-central1";

/// The Gemini provider, for the Generative Language API (`GoogleProvider::new()`, API id
/// [`API`]) or Vertex AI (`GoogleProvider::builder().wire(Gemini::Vertex).build()`, API id
/// [`VERTEX_API`]).
///
/// The two differ only in the API id (the registry key). A request goes to the endpoint its
/// `model.api` names (`google-generative-ai` or `google-vertex`); a model with another API
/// id goes to the provider's own endpoint.
///
/// Vertex AI needs a project (`project` provider option, [`GoogleCompat::project`], or
/// `GOOGLE_CLOUD_PROJECT`) and takes the location the same way (default
/// [`DEFAULT_VERTEX_LOCATION`]); its API key option holds an OAuth access token.
pub type GoogleProvider = llm_http::HttpProvider<Gemini>;

/// The Gemini wire format, on one of its two APIs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Gemini {
    /// The Generative Language API (Gemini API / AI Studio).
    #[default]
    GenerativeLanguage,
    /// Vertex AI.
    Vertex,
}

/// The endpoint of a request for `model`.
fn endpoint(
    flavor: Gemini,
    model: &Model,
    options: &StreamOptions,
    env: &Env,
) -> Result<convert::Endpoint, Error> {
    // The model's API id picks the endpoint; the flavor only decides for other ids.
    let vertex = match model.api.as_str() {
        VERTEX_API => true,
        API => false,
        _ => flavor == Gemini::Vertex,
    };
    if !vertex {
        return Ok(convert::Endpoint::GenerativeLanguage);
    }
    let compat = GoogleCompat::from_model(model)?;
    let extra = compat::GoogleOptions::read(options)?;
    let pick = |option: Option<String>, from_compat: Option<String>, vars: &[&str]| {
        option
            .or(from_compat)
            .or_else(|| vars.iter().find_map(|var| env.get(var)))
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let project = pick(extra.project, compat.project, &["GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT"]).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidRequest,
            PROVIDER,
            "Vertex AI needs a project: set the `project` provider option, the model compat `project`, or GOOGLE_CLOUD_PROJECT",
        )
        .with_retryable(false)
    })?;
    let location = pick(extra.location, compat.location, &["GOOGLE_CLOUD_LOCATION"])
        .unwrap_or_else(|| DEFAULT_VERTEX_LOCATION.to_owned());
    let valid =
        |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
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

/// What this crate declares about itself: `claw`, the conformance grid and the docs
/// read it (capabilities decide which shared scenarios apply).
pub const INFO: ProviderInfo = ProviderInfo {
    name: "google",
    api: API,
    provider: PROVIDER,
    default_base_url: "https://generativelanguage.googleapis.com/v1beta",
    key_env: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
    capabilities: Capabilities::ALL
        .without(Capability::StreamingToolArguments)
        .without(Capability::StrictSchemas),
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
            "gemini-1.5",
            OutputMode::Native,
            "Gemini 1.5 (`responseSchema`, the OpenAPI subset)",
        )
        .variant(RESPONSE_SCHEMA),
        OutputFamily::new("gemini-1.", OutputMode::Unsupported, "Gemini 1.0 (no schema at all)"),
        OutputFamily::new(
            "gemini-2.0",
            OutputMode::Native,
            "Gemini 2.0 (`responseSchema`, the OpenAPI subset)",
        )
        .variant(RESPONSE_SCHEMA),
        OutputFamily::new(
            "",
            OutputMode::Native,
            "Gemini 2.5 and later (`responseMimeType` + `responseJsonSchema`)",
        ),
    ],
};

/// The [`OutputFamily::variant`] of models that take an output schema only as
/// `responseSchema` (Gemini's OpenAPI subset), not as `responseJsonSchema`.
pub const RESPONSE_SCHEMA: &str = "responseSchema";

impl HttpWire for Gemini {
    type Decoder = Decoder;
    type State = ();

    fn info(&self) -> &'static ProviderInfo {
        &INFO
    }

    fn api(&self) -> &str {
        match self {
            Gemini::GenerativeLanguage => API,
            Gemini::Vertex => VERTEX_API,
        }
    }

    fn convert(&self, request: Request<'_>) -> Result<Converted<()>, Error> {
        let Request { model, context, options, env } = request;
        let endpoint = endpoint(*self, model, options, env)?;
        Ok(Converted::new(convert::build_request(model, context, options, &endpoint)?, ()))
    }

    fn decoder(&self, (): &()) -> Decoder {
        Decoder::new()
    }

    fn error((): &(), r: ErrorResponse) -> Error {
        error::http_error(r.status, r.retry_after, r.body)
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
        use llm_core::Provider;
        assert_eq!(GoogleProvider::new().api(), "google-generative-ai");
        assert_eq!(GoogleProvider::builder().wire(Gemini::Vertex).build().api(), "google-vertex");
    }

    #[test]
    fn vertex_needs_a_project_and_takes_options() {
        let env = Env::vars([("GOOGLE_CLOUD_LOCATION", "asia-east1")]);
        let endpoint =
            |model: &Model, options: &StreamOptions| endpoint(Gemini::Vertex, model, options, &env);
        let model = Model { id: "gemini-2.5-flash".into(), ..Model::default() };
        let gl = Model { api: API.into(), ..model.clone() };
        assert_eq!(
            endpoint(&gl, &StreamOptions::default()).unwrap(),
            convert::Endpoint::GenerativeLanguage
        );
        assert!(endpoint(&model, &StreamOptions::default()).is_err(), "no project anywhere");
        let mut options = StreamOptions::default();
        options.provider_options.insert("project".into(), serde_json::json!("my-proj"));
        options.provider_options.insert("location".into(), serde_json::json!("europe-west4"));
        assert_eq!(
            endpoint(&model, &options).unwrap(),
            convert::Endpoint::Vertex {
                project: "my-proj".into(),
                location: "europe-west4".into()
            }
        );
        options.provider_options.remove("location");
        assert_eq!(
            endpoint(&model, &options).unwrap(),
            convert::Endpoint::Vertex { project: "my-proj".into(), location: "asia-east1".into() },
            "the location from the provider's environment"
        );
        options.provider_options.insert("project".into(), serde_json::json!("a/b"));
        assert!(endpoint(&model, &options).is_err());
    }
}
