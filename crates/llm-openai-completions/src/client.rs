//! The only HTTP code: one POST per attempt (reqwest with rustls).

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use llm_core::drive::HttpResponse;
use llm_core::error::parse_retry_after;
use llm_core::{Error, ErrorKind};

use crate::error::http_error;

/// Sends one attempt. A non-2xx status is read whole and mapped by
/// [`crate::error::http_error`]; a 2xx body is returned as a byte stream.
///
/// Errors never contain the URL or a header value (reqwest errors are stripped
/// of their URL).
pub(crate) async fn send(
    http: reqwest::Client,
    provider: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Bytes,
) -> Result<HttpResponse, Error> {
    let mut request = http.post(&url);
    for (name, value) in &headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request.body(body).send().await.map_err(|e| transport(&provider, e))?;
    let status = response.status().as_u16();
    if !response.status().is_success() {
        let header = |name: &str| {
            response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
        };
        let retry_after = parse_retry_after(
            header("retry-after-ms").as_deref(),
            header("retry-after").as_deref(),
        );
        let body = match response.bytes().await {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => {
                tracing::debug!(error = %e.without_url(), "could not read the error body");
                String::new()
            }
        };
        return Err(http_error(&provider, status, retry_after, body));
    }
    let body = response.bytes_stream().map(move |chunk| chunk.map_err(|e| transport(&provider, e)));
    Ok(HttpResponse { status, body: body.boxed() })
}

fn transport(provider: &str, error: reqwest::Error) -> Error {
    let error = error.without_url();
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "connection failed"
    } else if error.is_body() || error.is_decode() {
        "reading the response failed"
    } else {
        "request failed"
    };
    // The source chain says why (reset, TLS, DNS) without the URL.
    let mut message = format!("HTTP {what}: {error}");
    let mut source = std::error::Error::source(&error);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    Error::new(ErrorKind::Transport, provider, message)
}

/// Builds the default HTTP client (rustls, connect timeout).
pub(crate) fn default_client(connect_timeout: Option<Duration>) -> reqwest::Client {
    let mut builder = reqwest::Client::builder();
    if let Some(t) = connect_timeout {
        builder = builder.connect_timeout(t);
    }
    match builder.build() {
        Ok(client) => client,
        Err(e) => {
            tracing::warn!(error = %e, "could not build the HTTP client; using reqwest's defaults");
            reqwest::Client::new()
        }
    }
}
