//! llm-http against a loopback TCP server that writes HTTP/1.1 by hand.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]
#![allow(clippy::disallowed_methods, reason = "tests read their own process environment")]

mod pool;
mod proxy;
mod tls;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use llm_core::{Context, Error, ErrorKind, Provider, StreamOptions};
use llm_http::{
    ErrorResponse, HeaderMap, HttpProvider, HttpRequest, HttpTransport, MAX_ERROR_BODY_BYTES,
    ResponseHeaders, TransportConfig, header_map, insert_header, is_secret_header, send,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves `response` to one connection and returns the request head it read.
async fn serve_once(response: Vec<u8>) -> (String, tokio::task::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/x", listener.local_addr().unwrap());
    let handle = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        socket.write_all(&response).await.unwrap();
        socket.shutdown().await.ok();
        String::from_utf8_lossy(&head).into_owned()
    });
    (url, handle)
}

fn status(code: u16, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {code} X\r\ncontent-length: {}\r\nconnection: close\r\n{headers}\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

fn request(url: String) -> Arc<HttpRequest> {
    Arc::new(HttpRequest {
        method: reqwest::Method::POST,
        url,
        headers: header_map(
            "test",
            [("content-type", "application/json"), ("x-api-key", "sk-test-secret-value")],
        )
        .unwrap(),
        body: bytes::Bytes::from_static(b"{}"),
    })
}

type MapError = Arc<dyn Fn(ErrorResponse) -> Error + Send + Sync>;

/// Sends `request` as a provider does by default: with a new transport's own client.
async fn send_default(
    request: Arc<HttpRequest>,
    provider: Arc<str>,
    map_error: MapError,
) -> Result<llm_http::HttpResponse, Error> {
    let config = TransportConfig { connect_timeout: None };
    HttpTransport::new().send(config, request, provider, map_error).await
}

fn mapper() -> MapError {
    Arc::new(|r: ErrorResponse| {
        Error::new(ErrorKind::from_status(r.status), "test", format!("HTTP {}", r.status))
            .with_status(r.status)
            .with_retry_after(r.retry_after)
            .with_body(r.body)
    })
}

#[tokio::test]
async fn x_should_retry_overrides_the_status_table_for_every_provider() {
    for (header, expected) in [("x-should-retry: false\r\n", false), ("", true)] {
        let (url, server) = serve_once(status(503, header, b"{}")).await;
        let error = send_default(request(url), "test".into(), mapper()).await.unwrap_err();
        assert_eq!(error.status, Some(503));
        assert_eq!(error.retryable, expected, "{header:?}");
        let head = server.await.unwrap();
        assert!(head.contains("sk-test-secret-value"), "the key is sent");
    }
    let (url, _server) = serve_once(status(400, "x-should-retry: true\r\n", b"{}")).await;
    let error = send_default(request(url), "test".into(), mapper()).await.unwrap_err();
    assert!(error.retryable);
}

#[tokio::test]
async fn retry_after_headers_reach_the_mapper() {
    let (url, _server) = serve_once(status(429, "retry-after-ms: 1500\r\n", b"slow")).await;
    let error = send_default(request(url), "test".into(), mapper()).await.unwrap_err();
    assert_eq!(error.retry_after, Some(Duration::from_millis(1500)));
    assert_eq!(error.body.as_deref(), Some("slow"));
}

/// Sends one request to a server answering 429 with the `headers` given; the mapped error.
async fn error_with_headers(headers: &str) -> Error {
    let (url, _server) = serve_once(status(429, headers, b"{}")).await;
    send_default(request(url), "test".into(), mapper()).await.unwrap_err()
}

#[tokio::test]
async fn absurd_retry_after_values_never_panic() {
    // Too large for a `Duration`: the wait saturates (the driver's cap then refuses it).
    for header in [
        "retry-after: 1e30\r\n",
        "retry-after: 18446744073709551616\r\n",
        "retry-after: 99999999999999999999999999999999999999\r\n",
        "retry-after-ms: 1e300\r\n",
        "retry-after-ms: 18446744073709551615999\r\n",
    ] {
        let error = error_with_headers(header).await;
        assert_eq!(error.retry_after, Some(Duration::MAX), "{header:?}");
        assert_eq!(error.kind, ErrorKind::RateLimited);
    }
    // Not a wait at all: ignored.
    for header in [
        "retry-after: -5\r\n",
        "retry-after: NaN\r\n",
        "retry-after: inf\r\n",
        "retry-after: -1e30\r\n",
        "retry-after-ms: -0.5\r\n",
        "retry-after: 12 seconds\r\n",
        "retry-after: \r\n",
    ] {
        let error = error_with_headers(header).await;
        assert_eq!(error.retry_after, None, "{header:?}");
    }
}

#[tokio::test]
async fn response_headers_reach_the_mapper_without_secret_values() {
    let head = "x-amzn-ErrorType: ThrottlingException:http://x/\r\n\
                set-cookie: session=sk-cookie-secret\r\n\
                x-amz-security-token: sk-token-secret\r\n";
    let (url, _server) = serve_once(status(400, head, b"{}")).await;
    let seen = Arc::new(std::sync::Mutex::new(None));
    let seen_by_mapper = Arc::clone(&seen);
    let map: MapError = Arc::new(move |r: ErrorResponse| {
        *seen_by_mapper.lock().unwrap() = Some(r.headers.clone());
        Error::new(ErrorKind::from_status(r.status), "test", format!("{r:?}"))
    });
    let error = send_default(request(url), "test".into(), map).await.unwrap_err();
    let headers = seen.lock().unwrap().take().unwrap();
    assert_eq!(headers.get("X-AMZN-ERRORTYPE"), Some("ThrottlingException:http://x/"));
    assert_eq!(headers.get("set-cookie"), Some(ResponseHeaders::REDACTED));
    assert_eq!(headers.get("x-amz-security-token"), Some(ResponseHeaders::REDACTED));
    let everything =
        format!("{headers:?} {:?} {}", headers.iter().collect::<Vec<_>>(), error.message);
    assert!(everything.contains("ThrottlingException"), "{everything}");
    assert!(!everything.contains("sk-cookie-secret") && !everything.contains("sk-token-secret"));
}

#[tokio::test]
async fn the_error_body_is_read_under_a_limit() {
    let big = vec![b'a'; MAX_ERROR_BODY_BYTES + 4096];
    let (url, _server) = serve_once(status(500, "", &big)).await;
    let error = send_default(request(url), "test".into(), mapper()).await.unwrap_err();
    assert_eq!(error.body.map(|b| b.len()), Some(MAX_ERROR_BODY_BYTES));
}

#[tokio::test]
async fn an_unreadable_error_body_keeps_the_status() {
    // The head promises 100 bytes; the connection closes after 3.
    let mut response = b"HTTP/1.1 429 X\r\ncontent-length: 100\r\n\r\n".to_vec();
    response.extend_from_slice(b"abc");
    let (url, _server) = serve_once(response).await;
    let error = send_default(request(url), "test".into(), mapper()).await.unwrap_err();
    assert_eq!(error.status, Some(429));
    assert_eq!(error.kind, ErrorKind::RateLimited);
    assert!(error.retryable);
}

#[tokio::test]
async fn a_2xx_body_streams_and_transport_errors_hide_the_url() {
    let (url, _server) = serve_once(status(200, "", b"data: 1\n\n")).await;
    let response = send_default(request(url), "test".into(), mapper()).await.unwrap();
    let body: Vec<u8> =
        response.body.map(|c| c.unwrap().to_vec()).collect::<Vec<_>>().await.concat();
    assert_eq!(body, b"data: 1\n\n");

    // Nothing listens on the port of a dropped listener.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/secret-path?key=sk-in-url", listener.local_addr().unwrap());
    drop(listener);
    let error = send_default(request(url), "test".into(), mapper()).await.unwrap_err();
    assert_eq!(error.kind, ErrorKind::Transport);
    assert!(error.retryable);
    assert!(!error.message.contains("sk-in-url") && !error.message.contains("secret-path"));
}

#[tokio::test]
async fn a_url_that_is_not_absolute_with_a_host_fails_before_any_connection() {
    for url in ["/v1/messages?id=sk-rel", "not a url sk-junk", "mailto:sk-mail@example.com", ""] {
        let error =
            send_default(request(url.to_owned()), "test".into(), mapper()).await.unwrap_err();
        assert_eq!((error.kind, error.retryable), (ErrorKind::InvalidRequest, false), "{url}");
        assert!(!error.message.contains("sk-"), "{url}: {}", error.message);
    }
}

#[test]
fn an_invalid_header_fails_without_echoing_it() {
    let mut headers = HeaderMap::new();
    let error =
        insert_header(&mut headers, "test", "authorization", "Bearer sk-bad\nvalue").unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidRequest);
    assert!(!error.retryable);
    assert!(!error.message.contains("sk-bad"), "{}", error.message);
    let error = header_map("test", [("x-api-key sk-bad", "v")]).unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidRequest);
    assert!(!error.message.contains("sk-bad"), "{}", error.message);
    assert!(headers.is_empty());
}

#[test]
fn debug_redacts_every_credential_header() {
    let req = HttpRequest {
        method: reqwest::Method::POST,
        url: "https://example.invalid/v1".into(),
        headers: header_map(
            "test",
            [
                ("Authorization", "Bearer sk-one"),
                ("x-goog-api-key", "sk-two"),
                ("api-key", "sk-three"),
                ("x-amz-security-token", "sk-four"),
                ("anthropic-version", "2023-06-01"),
            ],
        )
        .unwrap(),
        body: bytes::Bytes::from_static(b"{\"secret\":1}"),
    };
    let debug = format!("{req:?}");
    for secret in ["sk-one", "sk-two", "sk-three", "sk-four", "\"secret\""] {
        assert!(!debug.contains(secret), "{secret} in {debug}");
    }
    assert!(debug.contains("2023-06-01"));
    // Marked sensitive, so the HTTP stack (hyper, h2's HPACK) never logs or indexes them.
    let sensitive: Vec<&str> =
        req.headers.iter().filter(|(_, v)| v.is_sensitive()).map(|(k, _)| k.as_str()).collect();
    assert_eq!(sensitive, ["authorization", "x-goog-api-key", "api-key", "x-amz-security-token"]);
    assert!(is_secret_header("Proxy-Authorization") && !is_secret_header("content-type"));
}

/// The documented rule, written plainly: the name in lower case is `cookie` or `set-cookie`,
/// or contains one of the parts.
fn secret_by_rule(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name == "cookie"
        || name == "set-cookie"
        || ["key", "token", "secret", "auth", "signature", "credential"]
            .iter()
            .any(|part| name.contains(part))
}

#[test]
fn secret_headers_follow_the_documented_rule() {
    let named = [
        "authorization",
        "Proxy-Authorization",
        "cookie",
        "Set-Cookie",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "x-amz-security-token",
        "X-Amz-Signature",
        "aws-credential",
        "x-client-secret",
        "KEY",
        "monkey",
        "tokens",
        "oauth2",
        "content-type",
        "accept",
        "cookies",
        "set-cookie2",
        "x-request-id",
        "user-agent",
        "k",
        "ke",
        "",
        "secre",
        "x-sig",
        "credentia",
        "ÄUTH",
        "x-äpi-key",
        "authé",
    ];
    for name in named {
        assert_eq!(is_secret_header(name), secret_by_rule(name), "{name:?}");
    }
    // Every short name over an alphabet of the parts' letters, in both cases, and others.
    let alphabet = ['k', 'E', 'y', 't', 'o', 'a', 'U', 'h', 's', 'c', '-', 'é'];
    let mut names = vec![String::new()];
    for _ in 0..4 {
        let longer: Vec<String> =
            names.iter().flat_map(|n| alphabet.iter().map(move |c| format!("{n}{c}"))).collect();
        for name in &longer {
            assert_eq!(is_secret_header(name), secret_by_rule(name), "{name:?}");
        }
        names = longer;
    }
}

#[test]
fn one_client_per_distinct_transport_configuration() {
    let transport = HttpTransport::new();
    let clone = transport.clone();
    let a = TransportConfig { connect_timeout: Some(Duration::from_secs(30)) };
    let b = TransportConfig { connect_timeout: Some(Duration::from_millis(300)) };
    for _ in 0..5 {
        transport.client(a, "test").unwrap();
        clone.client(b, "test").unwrap();
    }
    assert_eq!(transport.cached_clients(), 2);
    let mut options = StreamOptions::default();
    options.timeouts.connect = Some(Duration::from_millis(300));
    assert_eq!(TransportConfig::from_options(&options), b);
    let given = HttpTransport::with_client(reqwest::Client::new());
    given.client(a, "test").unwrap();
    assert_eq!(given.cached_clients(), 0);
}

#[tokio::test]
async fn an_http1_only_transport_shares_the_cache_with_its_own_clients() {
    let transport = HttpTransport::new();
    let http1 = transport.http1_only();
    let config = TransportConfig { connect_timeout: None };
    transport.client(config, "test").unwrap();
    http1.client(config, "test").unwrap();
    http1.http1_only().client(config, "test").unwrap();
    // One client per (configuration, HTTP/1.1) pair, in the one shared cache.
    assert_eq!((transport.cached_clients(), http1.cached_clients()), (2, 2));
    assert!(format!("{http1:?}").contains("http1_only: true"));
    // Its clients send HTTP/1.1 requests.
    let (url, server) = serve_once(status(200, "", b"")).await;
    let client = http1.client(config, "test").unwrap();
    send(client, request(url), "test".into(), mapper()).await.unwrap();
    assert!(server.await.unwrap().starts_with("POST /v1/x HTTP/1.1\r\n"));
}

/// Serves `responses` to successive connections (one each); returns the base URL and the
/// number of connections accepted.
async fn serve_each(responses: Vec<Vec<u8>>) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/x", listener.local_addr().unwrap());
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        for response in responses {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            socket.write_all(&response).await.ok();
            socket.shutdown().await.ok();
        }
    });
    (url, accepted)
}

/// Each `data:` line is text; `[DONE]` ends the stream.
struct TextDecoder;

impl llm_core::raw::drive::WireDecoder for TextDecoder {
    fn event(&mut self, event: llm_core::raw::sse::SseEvent, out: &mut Vec<llm_core::raw::Delta>) {
        if event.data == "[DONE]" {
            out.push(llm_core::raw::Delta::Done);
        } else {
            out.push(llm_core::raw::Delta::Text { key: 0, text: event.data.to_string() });
        }
    }

    fn end(&mut self, _out: &mut Vec<llm_core::raw::Delta>) {}
}

/// A wire format of one test request to the model's base URL, answered in [`TextDecoder`]'s
/// stream.
#[derive(Debug, Default)]
struct TextWire;

static TEXT_INFO: llm_core::ProviderInfo = llm_core::ProviderInfo {
    name: "test",
    api: "test",
    provider: "test",
    default_base_url: "",
    key_env: &[],
    capabilities: llm_core::Capabilities::NONE,
    models: &[],
    output: &[],
};

impl llm_http::HttpWire for TextWire {
    type Decoder = TextDecoder;
    type State = ();

    fn info(&self) -> &'static llm_core::ProviderInfo {
        &TEXT_INFO
    }

    fn convert(&self, request: llm_http::Request<'_>) -> Result<llm_http::Converted<()>, Error> {
        let http = (*self::request(request.model.base_url.clone())).clone();
        Ok(llm_http::Converted::new(http, ()))
    }

    fn decoder(&self, (): &()) -> TextDecoder {
        TextDecoder
    }

    fn error((): &(), response: ErrorResponse) -> Error {
        (mapper())(response)
    }
}

/// Streams one request through the driver; the final event and the recorded waits.
async fn drive_once(
    url: String,
    retry: llm_core::RetryPolicy,
) -> (llm_core::AssistantEvent, Vec<Duration>) {
    let sleeper = Arc::new(llm_core::RecordingSleeper::new());
    let options =
        StreamOptions { retry, sleeper: Some(sleeper.clone()), ..StreamOptions::default() };
    let model = llm_core::Model { base_url: url, ..llm_core::Model::default() };
    let stream = HttpProvider::<TextWire>::new().stream(&model, &Context::default(), &options);
    let events: Vec<_> = stream.collect().await;
    (events.last().cloned().unwrap(), sleeper.delays())
}

fn ok_stream() -> Vec<u8> {
    status(200, "content-type: text/event-stream\r\n", b"data: hi\n\ndata: [DONE]\n\n")
}

#[tokio::test]
async fn a_retry_after_date_is_read_against_the_servers_date_header() {
    // The server's clock is in 1994: only the difference between its two dates counts.
    let head =
        "date: Sun, 06 Nov 1994 08:49:37 GMT\r\nretry-after: Sun, 06 Nov 1994 08:49:39 GMT\r\n";
    let (url, accepted) = serve_each(vec![status(503, head, b"{}"), ok_stream()]).await;
    let retry = llm_core::RetryPolicy { jitter: false, ..llm_core::RetryPolicy::default() };
    let (last, waits) = drive_once(url, retry).await;
    assert!(matches!(last, llm_core::AssistantEvent::Done { .. }), "{last:?}");
    assert_eq!(waits, [Duration::from_secs(2)]);
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_wait_over_the_cap_fails_at_once_with_the_asked_wait() {
    for head in [
        "retry-after: 3600\r\n",
        "retry-after: 1e30\r\n",
        "date: Sun, 06 Nov 1994 08:49:37 GMT\r\nretry-after: Sun, 06 Nov 1994 09:49:37 GMT\r\n",
    ] {
        let (url, accepted) = serve_each(vec![status(429, head, b"{}"), ok_stream()]).await;
        let (last, waits) = drive_once(url, llm_core::RetryPolicy::default()).await;
        let llm_core::AssistantEvent::Error { error, .. } = last else { panic!("{last:?}") };
        assert_eq!(error.kind, ErrorKind::RateLimited, "{head:?}");
        assert!(error.retry_after.unwrap() >= Duration::from_secs(3600), "{head:?}");
        assert!(error.message.contains("more than the 60 s allowed"), "{}", error.message);
        assert!(waits.is_empty(), "{head:?}: {waits:?}");
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1, "{head:?}");
    }
    // A larger cap waits for it.
    let (url, _) = serve_each(vec![status(429, "retry-after: 3600\r\n", b"{}"), ok_stream()]).await;
    let retry = llm_core::RetryPolicy {
        max_retry_after: Duration::from_secs(7200),
        ..llm_core::RetryPolicy::default()
    };
    let (last, waits) = drive_once(url, retry).await;
    assert!(matches!(last, llm_core::AssistantEvent::Done { .. }), "{last:?}");
    assert_eq!(waits, [Duration::from_secs(3600)]);
}

/// A redirect is not followed: reqwest would resend the body and every header that is not
/// `authorization`/`cookie` (so `x-api-key`, `x-goog-api-key`) to whatever host `location`
/// names. The 3xx is the provider's error instead.
#[tokio::test]
async fn a_redirect_is_an_error_and_the_key_never_reaches_its_target() {
    for code in [301, 302, 303, 307, 308] {
        let (target, target_server) = serve_once(status(200, "", b"data: 1\n\n")).await;
        let (url, _server) =
            serve_once(status(code, &format!("location: {target}\r\n"), b"")).await;
        let error = send(
            llm_http::client_builder(TransportConfig { connect_timeout: None }).build().unwrap(),
            request(url),
            "test".into(),
            mapper(),
        )
        .await
        .unwrap_err();
        assert_eq!(error.status, Some(code));
        assert!(!error.retryable);
        // The target was never contacted (its one accept is still pending).
        assert!(!target_server.is_finished());
        target_server.abort();
    }
    // The transport's own clients are built the same way.
    let (target, target_server) = serve_once(status(200, "", b"data: 1\n\n")).await;
    let (url, _server) = serve_once(status(307, &format!("location: {target}\r\n"), b"")).await;
    let client =
        HttpTransport::new().client(TransportConfig { connect_timeout: None }, "test").unwrap();
    let error = send(client, request(url), "test".into(), mapper()).await.unwrap_err();
    assert_eq!(error.status, Some(307));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!target_server.is_finished());
}

/// A 2xx HTML page (a captive portal, a proxy's login page, a wrong base URL) is never a
/// stream: a typed, non-retryable decode error that keeps the page, not a silent `truncated`.
#[tokio::test]
async fn an_html_page_instead_of_a_stream_is_a_decode_error() {
    for content_type in ["text/html", "Text/HTML; charset=iso-8859-1"] {
        let page = b"<html><body>Sign in to the guest network</body></html>";
        let head = format!("content-type: {content_type}\r\n");
        let (url, _server) = serve_once(status(200, &head, page)).await;
        let error = send_default(request(url), "test".into(), mapper()).await.unwrap_err();
        assert_eq!(
            (error.kind, error.status, error.retryable),
            (ErrorKind::Decode, Some(200), false),
            "{content_type}"
        );
        assert!(error.message.contains("text/html"), "{}", error.message);
        assert_eq!(error.body.as_deref().map(str::as_bytes), Some(&page[..]));
    }
    // Other content types stream as before (a server may label its stream oddly).
    let (url, _server) =
        serve_once(status(200, "content-type: text/plain\r\n", b"data: 1\n\n")).await;
    assert!(send_default(request(url), "test".into(), mapper()).await.is_ok());
}

/// Where the child of `a_slow_root_store_does_not_stall_the_runtime` finds its server.
const ROOTS_CHILD_URL: &str = "LLM_HTTP_ROOTS_TEST_URL";

/// The platform's root store is files on disk; on a busy disk the first request's read of it
/// takes hundreds of milliseconds. Here `SSL_CERT_FILE` is a FIFO whose writer shows up only
/// after 300 ms: the child's first request waits for it, but the other tasks of its
/// single-threaded runtime keep running meanwhile (a read on the async thread would stop
/// them all), and the request then succeeds.
#[tokio::test]
async fn a_slow_root_store_does_not_stall_the_runtime() {
    let dir = std::env::temp_dir().join(format!("llm-http-roots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("roots.pem");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let (url, _) = serve_each(vec![ok_stream()]).await;
    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "slow_root_store_child", "--ignored", "--nocapture"])
        .env("SSL_CERT_FILE", &fifo)
        .env_remove("SSL_CERT_DIR")
        .env(ROOTS_CHILD_URL, url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The writer arrives late and writes no certificate (a store of none is allowed).
    let writer = tokio::task::spawn_blocking(move || std::fs::write(&fifo, b""));
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    writer.await.unwrap().unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("child: done"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The child of `a_slow_root_store_does_not_stall_the_runtime` (nothing on its own).
#[tokio::test]
#[ignore = "run by a_slow_root_store_does_not_stall_the_runtime in a process of its own"]
async fn slow_root_store_child() {
    let Ok(url) = std::env::var(ROOTS_CHILD_URL) else { return };
    let ticks = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let ticker = tokio::spawn({
        let ticks = Arc::clone(&ticks);
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                ticks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    let start = std::time::Instant::now();
    let (last, _) = drive_once(url, llm_core::RetryPolicy::default()).await;
    let waited = start.elapsed();
    ticker.abort();
    assert!(matches!(last, llm_core::AssistantEvent::Done { .. }), "{last:?}");
    // The request really waited for the store, and the runtime ran all the while.
    assert!(waited >= Duration::from_millis(250), "{waited:?}");
    let ticks = ticks.load(std::sync::atomic::Ordering::SeqCst);
    assert!(ticks >= 20, "only {ticks} ticks of 5 ms in {waited:?}");
    println!("child: done ({ticks} ticks in {waited:?})");
}
