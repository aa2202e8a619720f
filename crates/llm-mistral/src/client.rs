//! The only HTTP code: one attempt of a streamed chat-completions request.

use bytes::Bytes;
use futures_util::StreamExt;
use llm_core::drive::HttpResponse;
use llm_core::error::parse_retry_after;
use llm_core::{Error, ErrorKind};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::PROVIDER;
use crate::convert::is_secret_header;
use crate::error::http_error;

/// POSTs `body` to `url`. A non-2xx status becomes a mapped error (with
/// `retry-after` / `retry-after-ms` and the raw body); a 2xx response returns
/// its body as a byte stream. No header value or URL ever enters an error.
pub(crate) async fn send(
    http: reqwest::Client,
    url: String,
    headers: Vec<(String, String)>,
    body: Bytes,
) -> Result<HttpResponse, Error> {
    let header_map = header_map(&headers)?;
    let response = http
        .post(url.as_str())
        .headers(header_map)
        .body(body)
        .send()
        .await
        .map_err(transport_error)?;
    let status = response.status().as_u16();
    if !response.status().is_success() {
        let header = |name: &str| {
            response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
        };
        let retry_after = parse_retry_after(
            header("retry-after-ms").as_deref(),
            header("retry-after").as_deref(),
        );
        let text = response.text().await.unwrap_or_default();
        return Err(http_error(status, retry_after, text));
    }
    let body = response.bytes_stream().map(|chunk| chunk.map_err(transport_error)).boxed();
    Ok(HttpResponse { status, body })
}

fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, Error> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let invalid = || {
            Error::new(
                ErrorKind::InvalidRequest,
                PROVIDER,
                format!("Invalid HTTP header value for {name}"),
            )
            .with_retryable(false)
        };
        let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            Error::new(ErrorKind::InvalidRequest, PROVIDER, "Invalid HTTP header name")
                .with_retryable(false)
        })?;
        let mut header_value = HeaderValue::from_str(value).map_err(|_| invalid())?;
        if is_secret_header(name) {
            header_value.set_sensitive(true);
        }
        map.insert(header_name, header_value);
    }
    Ok(map)
}

/// A reqwest failure as a retryable transport error. The URL is stripped and
/// the source chain appended (reqwest's own message is terse).
fn transport_error(error: reqwest::Error) -> Error {
    let error = error.without_url();
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.is_empty() && !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    Error::new(ErrorKind::Transport, PROVIDER, message)
}
