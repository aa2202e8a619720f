//! The only HTTP code: one POST per attempt (reqwest with rustls).

use bytes::Bytes;
use futures_util::StreamExt;
use llm_core::drive::HttpResponse;
use llm_core::error::parse_retry_after;
use llm_core::{Error, ErrorKind};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::PROVIDER;
use crate::error::http_error;

/// A client with the given connect timeout (rustls, HTTP/1.1 and HTTP/2).
pub(crate) fn build_client(connect_timeout: Option<std::time::Duration>) -> reqwest::Client {
    let mut builder = reqwest::Client::builder();
    if let Some(timeout) = connect_timeout {
        builder = builder.connect_timeout(timeout);
    }
    match builder.build() {
        Ok(client) => client,
        Err(error) => {
            tracing::warn!(provider = PROVIDER, %error, "could not build the HTTP client; using the default one");
            reqwest::Client::new()
        }
    }
}

/// Header map from name/value pairs. Values never appear in errors; the
/// `authorization` value is marked sensitive.
fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, Error> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| invalid_header(&format!("Invalid header name {name:?}")))?;
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| invalid_header(&format!("Invalid value for header {name:?}")))?;
        if header == reqwest::header::AUTHORIZATION {
            value.set_sensitive(true);
        }
        map.insert(header, value);
    }
    Ok(map)
}

fn invalid_header(message: &str) -> Error {
    Error::new(ErrorKind::InvalidRequest, PROVIDER, message).with_retryable(false)
}

/// A reqwest failure as a transport error (URL stripped, source chain kept).
pub(crate) fn transport_error(error: reqwest::Error) -> Error {
    let error = error.without_url();
    let timeout = error.is_timeout();
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    let kind = if error.is_builder() { ErrorKind::InvalidRequest } else { ErrorKind::Transport };
    let error = Error::new(kind, PROVIDER, format!("Request failed: {message}"));
    if timeout { error.with_retryable(true) } else { error }
}

/// Sends one attempt. A non-2xx status becomes the mapped error (with `retry-after`,
/// `retry-after-ms` and `x-should-retry`); a 2xx returns the body stream.
pub(crate) async fn send(
    http: reqwest::Client,
    url: String,
    headers: Vec<(String, String)>,
    body: Bytes,
) -> Result<HttpResponse, Error> {
    let headers = header_map(&headers)?;
    let response =
        http.post(url).headers(headers).body(body).send().await.map_err(transport_error)?;
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
        let text = response.text().await.unwrap_or_default();
        let mut error = http_error(status, retry_after, text);
        match should_retry.as_deref().map(str::trim) {
            Some("true") => error.retryable = true,
            Some("false") => error.retryable = false,
            _ => {}
        }
        return Err(error);
    }
    let body = response.bytes_stream().map(|chunk| chunk.map_err(transport_error)).boxed();
    Ok(HttpResponse { status, body })
}
