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
//! - [x] retries, timeouts, cancellation and tracing through [`llm_core::drive`]
//! - [ ] non-streaming requests, FIM, agents/conversations endpoints
//!
//! Provider options ([`StreamOptions::provider_options`]): `promptMode` (string),
//! `reasoningEffort` (string) override the computed reasoning parameters;
//! `parallelToolCalls` (bool) sets `parallel_tool_calls`. Model flags:
//! [`MistralCompat`].

#![warn(missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use llm_core::drive::drive_sse;
use llm_core::{AssistantStream, Context, Error, ErrorKind, Model, Provider, StreamOptions};

mod client;
mod convert;
mod error;
mod stream;

pub use convert::{MistralCompat, MistralReasoningFormat};

/// The API id this crate serves.
pub const API: &str = llm_core::api::MISTRAL_CONVERSATIONS;

/// The provider name used in errors.
pub const PROVIDER: &str = "mistral";

/// The provider's own client and the connect timeout it was built with.
type OwnClient = (Option<Duration>, reqwest::Client);

/// The Mistral provider. Cheap to clone; clones share the HTTP client.
#[derive(Debug, Clone, Default)]
pub struct MistralProvider {
    /// A caller-supplied client, used as is.
    http: Option<reqwest::Client>,
    /// The provider's own client, built on first use with the request's connect
    /// timeout (and rebuilt only if a later request asks for another one).
    own: Arc<Mutex<Option<OwnClient>>>,
}

impl MistralProvider {
    /// A provider that builds its own HTTP client (rustls).
    pub fn new() -> Self {
        Self::default()
    }

    /// A provider that sends every request with `http`.
    pub fn with_http_client(http: reqwest::Client) -> Self {
        MistralProvider { http: Some(http), own: Arc::default() }
    }

    fn client(&self, connect_timeout: Option<Duration>) -> Result<reqwest::Client, Error> {
        if let Some(http) = &self.http {
            return Ok(http.clone());
        }
        let mut own = self.own.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((timeout, client)) = own.as_ref()
            && *timeout == connect_timeout
        {
            return Ok(client.clone());
        }
        let mut builder = reqwest::Client::builder();
        if let Some(timeout) = connect_timeout {
            builder = builder.connect_timeout(timeout);
        }
        let client = builder.build().map_err(|e| {
            Error::new(
                ErrorKind::Transport,
                PROVIDER,
                format!("Could not build the HTTP client: {}", e.without_url()),
            )
        })?;
        *own = Some((connect_timeout, client.clone()));
        Ok(client)
    }
}

impl Provider for MistralProvider {
    fn api(&self) -> &str {
        API
    }

    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        let request = match convert::build_request(model, context, options) {
            Ok(request) => request,
            Err(error) => return AssistantStream::from_error(model, error),
        };
        let http = match self.client(options.timeouts.connect) {
            Ok(http) => http,
            Err(error) => return AssistantStream::from_error(model, error),
        };
        let body = match serde_json::to_vec(&request.body) {
            Ok(bytes) => Bytes::from(bytes),
            Err(e) => {
                return AssistantStream::from_error(
                    model,
                    Error::new(
                        ErrorKind::InvalidRequest,
                        PROVIDER,
                        format!("Could not encode the request: {e}"),
                    ),
                );
            }
        };
        let convert::WireRequest { url, headers, .. } = request;
        drive_sse(
            model,
            options,
            PROVIDER,
            move |_attempt| client::send(http.clone(), url.clone(), headers.clone(), body.clone()),
            stream::Decoder::new,
        )
    }
}

/// Test-only access to the pure parts (request building, decoding), for the
/// integration tests and the benchmark. Not part of the supported API.
#[doc(hidden)]
pub mod __private {
    use llm_core::{Context, Error, Model, StreamOptions};
    use serde_json::Value;

    /// `(url, headers, body)`.
    pub type Request = (String, Vec<(String, String)>, Value);

    /// The request body and headers (auth value included: never print them).
    pub fn build_request(
        model: &Model,
        context: &Context,
        options: &StreamOptions,
    ) -> Result<Request, Error> {
        crate::convert::build_request(model, context, options).map(|r| (r.url, r.headers, r.body))
    }

    /// A fresh stream decoder.
    pub fn decoder() -> impl llm_core::drive::WireDecoder {
        crate::stream::Decoder::new()
    }

    /// The outgoing id the request uses for each source tool-call id, in order.
    pub fn map_tool_call_ids(ids: &[String]) -> Vec<String> {
        let mut map = crate::convert::ToolCallIds::default();
        ids.iter().map(|id| map.map(id)).collect()
    }

    /// Decodes a Mistral error body into `(message, code)`.
    pub fn decode_error_body(body: &str) -> (Option<String>, Option<String>) {
        let d = crate::error::decode_body(body);
        (d.message, d.code)
    }

    /// Maps an HTTP error response.
    pub fn http_error(status: u16, body: &str) -> Error {
        crate::error::http_error(status, None, body.to_owned())
    }
}
