//! The only HTTP code: one POST per attempt, status and body mapped.

use bytes::Bytes;
use futures_util::StreamExt;

use llm_core::drive::{ByteStream, HttpResponse};
use llm_core::error::parse_retry_after;
use llm_core::{Error, ErrorKind, Timeouts};

use crate::PROVIDER;
use crate::error::http_error;

/// A transport failure, without the URL (it may name the project; never a key,
/// which travels in a header, but URLs stay out of errors on principle).
fn transport(e: reqwest::Error, what: &str) -> Error {
    let e = e.without_url();
    let mut message = format!("{what}: {e}");
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    Error::new(ErrorKind::Transport, PROVIDER, message)
}

/// Sends one attempt. A non-2xx status becomes a mapped error with the raw body.
///
/// Timeouts are enforced by the driver (`drive_sse`); the connect timeout is set on
/// the client the provider builds.
pub(crate) async fn send(
    http: reqwest::Client,
    url: String,
    headers: Vec<(String, String)>,
    body: Bytes,
    _timeouts: Timeouts,
) -> Result<HttpResponse, Error> {
    let mut request = http.post(url).body(body);
    for (name, value) in &headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request.send().await.map_err(|e| transport(e, "Request failed"))?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
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
                return Err(transport(e, &format!("HTTP {status}, reading the error body failed"))
                    .with_status(status));
            }
        };
        return Err(http_error(status, retry_after, body));
    }
    let stream: ByteStream = response
        .bytes_stream()
        .map(|r| r.map_err(|e| transport(e, "Reading the stream failed")))
        .boxed();
    Ok(HttpResponse { status, body: stream })
}
