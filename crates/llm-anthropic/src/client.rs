//! The only HTTP code: one POST attempt with reqwest (rustls). Retries, timeouts after the
//! connection and SSE decoding belong to `llm_core::drive`.

use bytes::Bytes;
use futures_util::StreamExt;
use llm_core::drive::HttpResponse;
use llm_core::error::parse_retry_after;
use llm_core::{Error, ErrorKind, Timeouts};

use crate::PROVIDER;
use crate::error::http_error;

/// A client with rustls and the given connect timeout (reqwest sets it per client).
pub(crate) fn build_client(connect: Option<std::time::Duration>) -> reqwest::Client {
    let mut builder = reqwest::Client::builder();
    if let Some(connect) = connect {
        builder = builder.connect_timeout(connect);
    }
    builder.build().unwrap_or_default()
}

/// A transport error without the URL or any header in it.
fn transport(what: &str, e: reqwest::Error) -> Error {
    let e = e.without_url();
    let detail = if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        format!("connection failed: {e}")
    } else {
        e.to_string()
    };
    Error::new(ErrorKind::Transport, PROVIDER, format!("{what}: {detail}"))
}

/// Sends one attempt. A non-2xx status is read whole and mapped by `error.rs`; a 2xx body is
/// returned as a byte stream whose read errors become `transport` errors.
pub(crate) async fn send(
    http: reqwest::Client,
    url: String,
    headers: Vec<(String, String)>,
    body: Bytes,
    // The driver enforces the first-byte, idle and total limits; the connect limit is set on the
    // client (see `build_client`).
    _timeouts: Timeouts,
) -> Result<HttpResponse, Error> {
    let mut request = http.post(url.as_str()).body(body);
    for (name, value) in &headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request.send().await.map_err(|e| transport("Request failed", e))?;
    let status = response.status().as_u16();
    if !response.status().is_success() {
        let header = |name: &str| {
            response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
        };
        let retry_after = parse_retry_after(
            header("retry-after-ms").as_deref(),
            header("retry-after").as_deref(),
        );
        let should_retry = header("x-should-retry");
        let body = response.text().await.unwrap_or_default();
        let mut error = http_error(status, retry_after, body);
        // Anthropic's explicit retry hint wins over the status table.
        match should_retry.as_deref().map(str::trim) {
            Some("true") => error.retryable = true,
            Some("false") => error.retryable = false,
            _ => {}
        }
        return Err(error);
    }
    let body = response
        .bytes_stream()
        .map(|chunk| chunk.map_err(|e| transport("Reading the response failed", e)));
    Ok(HttpResponse { status, body: body.boxed() })
}
