//! The exporter's HTTP client: llm-http's reqwest client, run on the application's tokio
//! runtime.
//!
//! The SDK exports from threads of its own, outside any runtime, where reqwest cannot run;
//! each request is spawned on the runtime and awaited from there. Using the workspace's
//! client keeps one reqwest (and one TLS setup) in the tree instead of the exporter's own.

use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};

use crate::{EXPORT_TIMEOUT, OtlpError};

/// At most this much of a collector's answer is read (it is a small protobuf message).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Sends the exporter's requests on a tokio runtime.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl RuntimeClient {
    pub(crate) fn new(runtime: tokio::runtime::Handle) -> Result<Self, OtlpError> {
        let config = llm_http::TransportConfig { connect_timeout: Some(EXPORT_TIMEOUT) };
        let client = llm_http::client_builder(config)
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| OtlpError::Build(e.without_url().to_string()))?;
        Ok(RuntimeClient { client, runtime })
    }
}

#[async_trait::async_trait]
impl HttpClient for RuntimeClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let (parts, body) = request.into_parts();
            let mut response = client
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await
                .map_err(|e| e.without_url())?;
            let status = response.status();
            let mut answer = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| e.without_url())? {
                let room = MAX_ANSWER_BYTES.saturating_sub(answer.len());
                answer.extend_from_slice(chunk.get(..chunk.len().min(room)).unwrap_or_default());
                if answer.len() >= MAX_ANSWER_BYTES {
                    break;
                }
            }
            Ok::<_, reqwest::Error>((status, answer))
        });
        // The client's timeout bounds the request; a runtime shutting down ends the task, and
        // the export fails instead of waiting. (No tokio timer here: this runs on the SDK's
        // own thread, outside the runtime.)
        let (status, answer) =
            sent.await.map_err(|e| format!("the OTLP export task ended: {e}"))??;
        Ok(Response::builder().status(status).body(Bytes::from(answer))?)
    }
}
