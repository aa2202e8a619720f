//! The one HTTP exchange of clawcall's provider crates, and what being a provider is.
//!
//! A provider crate implements [`HttpWire`]: it converts its request ([`HttpRequest`]:
//! URL, headers, body), decodes its stream (a [`llm_core::raw::drive::StreamDecoder`]) and maps
//! its error bodies (a function from [`ErrorResponse`] to [`llm_core::Error`]); a crate whose
//! attempts sign or look something up first implements [`WireFormat`] instead;
//! [`HttpProvider`] makes that an [`llm_core::Provider`], and everything between lives
//! here, once:
//!
//! - [`HttpTransport`]: one cached client per distinct transport configuration
//!   ([`TransportConfig`]: the connect timeout, fixed per client): clawcall's own (hyper-util's
//!   pool over rustls, without reqwest's per-request layers), or a `reqwest` client (rustls)
//!   when a proxy is configured in the environment, or the caller's own `reqwest` client;
//!   certificates are checked against the bundled roots and the platform's (`SSL_CERT_FILE` /
//!   `SSL_CERT_DIR` when set), plus any extra roots ([`HttpTransport::with_extra_roots`]);
//!   redirects are not followed;
//! - sending, with header values marked sensitive and never echoed in an error;
//! - transport errors mapped to [`ErrorKind::Transport`] without the URL;
//! - an error status read under [`MAX_ERROR_BODY_BYTES`], its body read leniently by
//!   [`ErrorBody`] whatever envelope it has, with `retry-after`,
//!   `retry-after-ms` and `x-should-retry` applied for every provider;
//! - the request driver ([`llm_core::raw::drive`]) in the decoder's framing, per attempt
//!   ([`WireFormat::attempt`]: a provider may sign or look something up first);
//! - the environment a provider reads ([`Env`]).
//!
//! llm-core stays free of IO and of an HTTP client; this crate is the only place in
//! the workspace that sends HTTP for a provider.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

use llm_core::error::parse_retry_after;
use llm_core::{Error, ErrorKind, StreamOptions};
use reqwest::header::{HeaderName, HeaderValue};

pub mod azure;
mod client;
mod env;
mod error_body;
mod provider;

pub use env::Env;
pub use error_body::{ErrorBody, MAX_EXCERPT_CHARS, MAX_MESSAGE_CHARS};
pub use futures_util::future::BoxFuture;
pub use llm_core::raw::drive::HttpResponse;
pub use provider::{
    Converted, Exchange, HttpProvider, HttpWire, ProviderBuilder, Request, WireFormat,
};
/// The HTTP client crate, for callers building their own client.
pub use reqwest;
/// The header map of a request ([`HttpRequest::headers`]).
pub use reqwest::header::HeaderMap;

/// At most this much of an error response's body is read (the rest is dropped).
pub const MAX_ERROR_BODY_BYTES: usize = 1024 * 1024;

/// How many transport configurations keep a cached client; the oldest goes first.
const MAX_CACHED_CLIENTS: usize = 8;

/// Whether a header carries a credential: its value is redacted in `Debug` and
/// marked sensitive on the wire (never logged by the HTTP stack).
///
/// One list for every provider: `authorization`, `proxy-authorization`, `cookie`,
/// `set-cookie`, and any name containing `key`, `token`, `secret`, `auth` or `signature`
/// (`x-api-key`, `api-key`, `x-goog-api-key`, `x-amz-security-token`, ...).
pub fn is_secret_header(name: &str) -> bool {
    // Asked for every header of every request and response: one pass, nothing allocated.
    let name = name.as_bytes();
    if name.eq_ignore_ascii_case(b"cookie") || name.eq_ignore_ascii_case(b"set-cookie") {
        return true;
    }
    let at = |i: usize, part: &[u8]| {
        name.get(i..i + part.len()).is_some_and(|window| window.eq_ignore_ascii_case(part))
    };
    (0..name.len()).any(|i| match name.get(i).map(u8::to_ascii_lowercase) {
        Some(b'k') => at(i, b"key"),
        Some(b't') => at(i, b"token"),
        Some(b's') => at(i, b"secret") || at(i, b"signature"),
        Some(b'a') => at(i, b"auth"),
        Some(b'c') => at(i, b"credential"),
        _ => false,
    })
}

/// One request, ready to send. Its `Debug` prints secret header values as `Sensitive`
/// (they are marked so when inserted, [`insert_header`]) and only the body's size.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// The method: `POST` for every model request.
    pub method: reqwest::Method,
    /// The full URL. Never put a key in it (use a header).
    pub url: String,
    /// The headers; credential values are marked sensitive ([`insert_header`]).
    pub headers: HeaderMap,
    /// The body bytes.
    pub body: Bytes,
}

impl fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &self.headers)
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

impl HttpRequest {
    /// A request whose body is `body` serialized as JSON (the bytes are deterministic
    /// for a `serde_json::Value` built with the workspace's `preserve_order`).
    pub fn json<T: serde::Serialize + ?Sized>(
        provider: &str,
        url: String,
        headers: HeaderMap,
        body: &T,
    ) -> Result<Self, Error> {
        let body = serde_json::to_vec(body).map_err(|e| {
            Error::new(
                ErrorKind::InvalidRequest,
                provider,
                format!("Could not serialize the request: {e}"),
            )
            .with_retryable(false)
        })?;
        Ok(HttpRequest { method: reqwest::Method::POST, url, headers, body: Bytes::from(body) })
    }

    /// A `GET` of `url` with `headers` and no body.
    pub fn get(url: String, headers: HeaderMap) -> Self {
        HttpRequest { method: reqwest::Method::GET, url, headers, body: Bytes::new() }
    }
}

/// A non-2xx response, for the provider's error mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorResponse {
    /// HTTP status.
    pub status: u16,
    /// The response headers (error codes some APIs send only here, such as AWS's
    /// `x-amzn-ErrorType`); secret values are never kept.
    pub headers: ResponseHeaders,
    /// The delay asked for by `retry-after-ms` or `retry-after`.
    pub retry_after: Option<Duration>,
    /// The body as text (lossy UTF-8), at most [`MAX_ERROR_BODY_BYTES`]; empty when it
    /// could not be read.
    pub body: String,
}

/// The headers of a response, in arrival order, with lower-case names.
///
/// The value of a secret header ([`is_secret_header`], e.g. `set-cookie`) is never
/// stored, only `[REDACTED]` in its place, so no error, log or transcript built from
/// these headers can show it. Values that are not visible ASCII are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseHeaders(Vec<(String, String)>);

impl ResponseHeaders {
    /// What secret header values are replaced with.
    pub const REDACTED: &'static str = "[REDACTED]";

    /// Name/value pairs as received (secret values are redacted here).
    pub fn new<N: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (N, V)>) -> Self {
        ResponseHeaders(
            pairs
                .into_iter()
                .map(|(name, value)| {
                    let name = name.into().to_ascii_lowercase();
                    let value = if is_secret_header(&name) {
                        Self::REDACTED.to_owned()
                    } else {
                        value.into()
                    };
                    (name, value)
                })
                .collect(),
        )
    }

    fn from_map(map: &HeaderMap) -> Self {
        Self::new(
            map.iter()
                .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?.trim()))),
        )
    }

    /// The first value of header `name` (any case), trimmed.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim())
    }

    /// Every name/value pair, in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }
}

/// What decides a transport: requests with equal configurations share one client
/// (one connection pool and TLS setup).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TransportConfig {
    /// The TCP/TLS connect limit (fixed per client).
    pub connect_timeout: Option<Duration>,
}

impl TransportConfig {
    /// The configuration a request's options ask for.
    pub fn from_options(options: &StreamOptions) -> Self {
        TransportConfig { connect_timeout: options.timeouts.connect }
    }
}

/// The HTTP side of a provider: its clients and the send function.
///
/// Requests go through clawcall's own client (hyper-util's pool over rustls), except with a
/// caller's client ([`HttpTransport::with_client`]) or a proxy configured in the environment
/// (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, any case, when the client is built), which
/// reqwest's client then handles. Cheap to clone; clones share the cached clients.
#[derive(Clone, Default)]
pub struct HttpTransport {
    /// A caller-supplied client, used for every request as is.
    given: Option<reqwest::Client>,
    /// Clients built here speak only HTTP/1.1 ([`HttpTransport::http1_only`]).
    http1_only: bool,
    /// Roots trusted besides the bundled and the platform's ([`HttpTransport::with_extra_roots`]).
    extra_roots: Arc<[CertificateDer<'static>]>,
    /// reqwest clients built here, by configuration and HTTP/1.1 flag (most recently built last).
    cache: Arc<Mutex<Vec<(ClientKey, reqwest::Client)>>>,
    /// What sends this transport's requests, by configuration and HTTP/1.1 flag: its own
    /// client, or reqwest's where the environment named a proxy when it was decided.
    senders: Arc<Mutex<Vec<(ClientKey, Sender)>>>,
}

/// What sends a request: clawcall's own client or a reqwest one.
#[derive(Clone)]
enum Sender {
    Own(client::OwnClient),
    Reqwest(reqwest::Client),
}

/// The response head and body of either client.
pub(crate) struct Received {
    status: u16,
    headers: HeaderMap,
    body: BoxStream<'static, Result<Bytes, Error>>,
}

/// Whether the process's environment names a proxy, which reqwest's client follows (it reads
/// the process's variables itself) and clawcall's own does not.
fn proxy_in_env() -> bool {
    ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
        .iter()
        .any(|name| Env::Process.get(name).is_some_and(|v| !v.trim().is_empty()))
}

/// Keeps `client` under `key` in `cache`, the oldest going first past [`MAX_CACHED_CLIENTS`].
fn keep<C>(cache: &mut Vec<(ClientKey, C)>, key: ClientKey, client: C) {
    if cache.len() >= MAX_CACHED_CLIENTS {
        cache.remove(0);
    }
    cache.push((key, client));
}

/// What a cached client was built for: the configuration and whether it is HTTP/1.1 only.
type ClientKey = (TransportConfig, bool);

impl fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTransport")
            .field("caller_client", &self.given.is_some())
            .field("http1_only", &self.http1_only)
            .field("extra_roots", &self.extra_roots.len())
            .field("cached_clients", &self.cached_clients())
            .field("proxy_in_env", &proxy_in_env())
            .finish()
    }
}

impl HttpTransport {
    /// A transport that builds (and caches) its own rustls clients.
    pub fn new() -> Self {
        Self::default()
    }

    /// A transport that sends every request with `client` (proxies, custom TLS, pools);
    /// that client's own connect timeout applies.
    pub fn with_client(client: reqwest::Client) -> Self {
        HttpTransport { given: Some(client), ..Self::default() }
    }

    /// A transport whose clients also trust the PEM certificates in `pem` (a private CA, a
    /// corporate proxy's root) besides the bundled roots and the platform's (which
    /// `SSL_CERT_FILE` / `SSL_CERT_DIR` replace when set). Its clients are its own (no cache
    /// shared with `self`). A bundle with no certificate, or one that does not parse, is an
    /// `invalid_request` error.
    pub fn with_extra_roots(&self, pem: &[u8]) -> Result<Self, Error> {
        let invalid = |why: String| {
            Error::new(ErrorKind::InvalidRequest, "clawcall", why).with_retryable(false)
        };
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("Invalid root certificate bundle: {e}")))?;
        if certs.is_empty() {
            return Err(invalid("The root certificate bundle holds no certificate".to_owned()));
        }
        let extra_roots = self.extra_roots.iter().cloned().chain(certs).collect();
        Ok(HttpTransport {
            extra_roots,
            cache: Arc::default(),
            senders: Arc::default(),
            ..self.clone()
        })
    }

    /// This transport, sharing its cached clients, but building clients that speak only
    /// HTTP/1.1 (no HTTP/2 over ALPN), for endpoints that need it (proxies, some custom
    /// endpoints). A caller-supplied client is still used as is.
    pub fn http1_only(&self) -> Self {
        HttpTransport { http1_only: true, ..self.clone() }
    }

    /// How many clients this transport has built and kept (its own and reqwest's).
    pub fn cached_clients(&self) -> usize {
        let own = self.senders.lock().unwrap_or_else(PoisonError::into_inner);
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).len()
            + own.iter().filter(|(_, s)| matches!(s, Sender::Own(_))).count()
    }

    /// Whether a request for `config` finds what sends it ready: the caller's client or one
    /// decided before (a reqwest client built on its own means the roots are loaded already).
    pub(crate) fn has_client(&self, config: TransportConfig) -> bool {
        let key = (config, self.http1_only);
        self.given.is_some()
            || self
                .senders
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .any(|(k, _)| *k == key)
    }

    /// What sends a request for `config`: the caller's client; else what was decided for
    /// `config` the first time (kept): a reqwest client when the environment named a proxy
    /// (reqwest reads it when it builds a client, as this decides once), else clawcall's own.
    fn sender(&self, config: TransportConfig, provider: &str) -> Result<Sender, Error> {
        if let Some(client) = &self.given {
            return Ok(Sender::Reqwest(client.clone()));
        }
        let key = (config, self.http1_only);
        if let Some((_, sender)) = self
            .senders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(k, _)| *k == key)
        {
            return Ok(sender.clone());
        }
        let sender = if proxy_in_env() {
            Sender::Reqwest(self.client(config, provider).map_err(|e| e.with_retryable(false))?)
        } else {
            let roots = platform_roots().iter().chain(self.extra_roots.iter());
            let client = client::OwnClient::new(config, self.http1_only, roots).map_err(|why| {
                Error::new(
                    ErrorKind::Transport,
                    provider,
                    format!("Could not build the HTTP client: {why}"),
                )
                .with_retryable(false)
            })?;
            Sender::Own(client)
        };
        let mut senders = self.senders.lock().unwrap_or_else(PoisonError::into_inner);
        // Another request may have decided meanwhile: the first decision stays.
        if let Some((_, kept)) = senders.iter().find(|(k, _)| *k == key) {
            return Ok(kept.clone());
        }
        keep(&mut senders, key, sender.clone());
        Ok(sender)
    }

    /// Sends one attempt with this transport's client for `config` (see [`HttpTransport`]);
    /// the response as [`send`] gives it.
    pub async fn send(
        &self,
        config: TransportConfig,
        request: Arc<HttpRequest>,
        provider: Arc<str>,
        map_error: Arc<dyn Fn(ErrorResponse) -> Error + Send + Sync>,
    ) -> Result<HttpResponse, Error> {
        match self.sender(config, &provider)? {
            Sender::Reqwest(client) => send(client, request, provider, map_error).await,
            Sender::Own(client) => {
                record_server(&tracing::Span::current(), &request.url);
                let received = client.send(&request, &provider).await?;
                respond(received, &provider, &*map_error).await
            }
        }
    }

    /// The client for `config`: the caller's, a cached one, or a new one (then cached).
    pub fn client(
        &self,
        config: TransportConfig,
        provider: &str,
    ) -> Result<reqwest::Client, Error> {
        if let Some(client) = &self.given {
            return Ok(client.clone());
        }
        let key = (config, self.http1_only);
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, client)) = cache.iter().find(|(k, _)| *k == key) {
            return Ok(client.clone());
        }
        let mut builder = client_builder(config);
        for root in self.extra_roots.iter() {
            let root = reqwest::Certificate::from_der(root).map_err(|e| {
                Error::new(
                    ErrorKind::Transport,
                    provider,
                    format!("Could not build the HTTP client: {}", e.without_url()),
                )
            })?;
            builder = builder.add_root_certificate(root);
        }
        if self.http1_only {
            builder = builder.http1_only();
        }
        let client = builder.build().map_err(|e| {
            Error::new(
                ErrorKind::Transport,
                provider,
                format!("Could not build the HTTP client: {}", e.without_url()),
            )
        })?;
        keep(&mut cache, key, client.clone());
        Ok(client)
    }
}

/// A client builder with the settings every provider's client has, for `config`: its connect
/// timeout, server certificates checked against the bundled (webpki) roots and the platform's
/// (or, when set, those of `SSL_CERT_FILE` / `SSL_CERT_DIR`), and no redirects (a redirect would resend the body and the credential headers
/// reqwest does not know as such, `x-api-key` and the like, to the host it names; the 3xx goes
/// to the provider's error mapping instead). Callers building their own client
/// ([`HttpTransport::with_client`]) can start from it.
pub fn client_builder(config: TransportConfig) -> reqwest::ClientBuilder {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .tls_built_in_native_certs(false);
    for root in platform_roots() {
        if let Ok(root) = reqwest::Certificate::from_der(root) {
            builder = builder.add_root_certificate(root);
        }
    }
    if let Some(timeout) = config.connect_timeout {
        builder = builder.connect_timeout(timeout);
    }
    builder
}

/// The platform's roots, once loaded ([`platform_roots`]).
static PLATFORM_ROOTS: std::sync::OnceLock<Vec<CertificateDer<'static>>> =
    std::sync::OnceLock::new();

/// The platform's root certificates (those of `SSL_CERT_FILE` / `SSL_CERT_DIR` instead when
/// either is set), read once per process: reading and parsing the store takes tens of
/// milliseconds, too long to repeat for every client. Certificates that are not usable trust
/// anchors are left out (a store may hold some), and load errors are logged once.
fn platform_roots() -> &'static [CertificateDer<'static>] {
    PLATFORM_ROOTS.get_or_init(|| {
        let loaded = rustls_native_certs::load_native_certs();
        for error in &loaded.errors {
            tracing::warn!(%error, "could not load some of the platform's root certificates");
        }
        loaded
            .certs
            .into_iter()
            .filter(|der| rustls::RootCertStore::empty().add(der.clone()).is_ok())
            .collect()
    })
}

/// Loads the platform's roots on a blocking thread the first time it is awaited, and returns
/// at once after that: the store is files on disk (hundreds of opens and reads with
/// `SSL_CERT_DIR`, each waiting on a busy disk), and read on an async worker they would stall
/// every other stream of that runtime. Concurrent first requests wait for the same load.
pub(crate) async fn load_platform_roots() {
    static LOADING: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    if PLATFORM_ROOTS.get().is_some() {
        return;
    }
    LOADING
        .get_or_init(|| async {
            // A load that panicked is tried again, synchronously, where the roots are needed.
            let _ = tokio::task::spawn_blocking(|| platform_roots().len()).await;
        })
        .await;
}

/// Whether the platform's roots are loaded.
pub(crate) fn platform_roots_loaded() -> bool {
    PLATFORM_ROOTS.get().is_some()
}

/// Sends one attempt. A 2xx returns the body stream (read errors become transport
/// errors), except an HTML page (`text/html`), which is a `decode` error keeping the page;
/// any other status is read under [`MAX_ERROR_BODY_BYTES`] and mapped by
/// `map_error`, then `x-should-retry: true|false` overrides its retry flag.
pub async fn send(
    client: reqwest::Client,
    request: Arc<HttpRequest>,
    provider: Arc<str>,
    map_error: Arc<dyn Fn(ErrorResponse) -> Error + Send + Sync>,
) -> Result<HttpResponse, Error> {
    record_server(&tracing::Span::current(), &request.url);
    // Built whole rather than through reqwest's builder, which would merge the headers into
    // an empty map one by one.
    let url = client::request_url(&request.url, &provider)?;
    let mut http_request = reqwest::Request::new(request.method.clone(), url);
    *http_request.headers_mut() = request.headers.clone();
    if !request.body.is_empty() || request.method != reqwest::Method::GET {
        *http_request.body_mut() = Some(request.body.clone().into());
    }
    let response = client
        .execute(http_request)
        .await
        .map_err(|e| transport_error(&provider, "Request failed", e))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let for_body = Arc::clone(&provider);
    let body = response
        .bytes_stream()
        .map(move |chunk| {
            chunk.map_err(|e| transport_error(&for_body, "Reading the response failed", e))
        })
        .boxed();
    respond(Received { status, headers, body }, &provider, &*map_error).await
}

/// What [`send`] makes of a response, from either client.
async fn respond(
    received: Received,
    provider: &Arc<str>,
    map_error: &(dyn Fn(ErrorResponse) -> Error + Send + Sync),
) -> Result<HttpResponse, Error> {
    let Received { status, headers, body } = received;
    let success = (200..300).contains(&status);
    if success && is_html(&headers) {
        // No provider streams HTML: this is a portal, a proxy's page or a wrong base URL.
        let body = read_error_body(body, provider).await;
        return Err(Error::new(
            ErrorKind::Decode,
            &**provider,
            format!("Expected a stream, but the server sent a text/html page (HTTP {status})"),
        )
        .with_status(status)
        .with_retryable(false)
        .with_body(body));
    }
    if success {
        return Ok(HttpResponse { status, body });
    }
    let headers = ResponseHeaders::from_map(&headers);
    let retry_after = parse_retry_after(
        headers.get("retry-after-ms"),
        headers.get("retry-after"),
        headers.get("date"),
        SystemTime::now(),
    );
    let should_retry = headers.get("x-should-retry").map(str::to_owned);
    let body = read_error_body(body, provider).await;
    let mut error = map_error(ErrorResponse { status, headers, retry_after, body });
    // The server's explicit retry hint wins over the status table.
    match should_retry.as_deref() {
        Some("true") => error.retryable = true,
        Some("false") => error.retryable = false,
        _ => {}
    }
    Err(error)
}

/// Names the server on the request's `chat` span (`server.address`, `server.port`): from the
/// URL actually sent, which a provider may have resolved past its base URL (a region, a
/// deployment). Only the host and port: a URL's path or query may carry an identifier.
fn record_server(span: &tracing::Span, url: &str) {
    if span.is_disabled() {
        return;
    }
    if let Ok(url) = reqwest::Url::parse(url) {
        if let Some(host) = url.host_str() {
            span.record("server.address", host);
        }
        if let Some(port) = url.port_or_known_default() {
            span.record("server.port", i64::from(port));
        }
    }
}

/// Whether the response says it is an HTML page.
fn is_html(headers: &HeaderMap) -> bool {
    headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("text/html"))
}

/// The error body as text, at most [`MAX_ERROR_BODY_BYTES`]. A read failure keeps
/// what arrived (the status alone still decides the error kind).
async fn read_error_body(
    mut body: BoxStream<'static, Result<Bytes, Error>>,
    provider: &str,
) -> String {
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(chunk) => {
                let room = MAX_ERROR_BODY_BYTES - bytes.len();
                bytes.extend_from_slice(chunk.get(..chunk.len().min(room)).unwrap_or_default());
                if bytes.len() >= MAX_ERROR_BODY_BYTES {
                    break;
                }
            }
            Err(e) => {
                tracing::debug!(provider, error = %e.message, "could not read the whole error body");
                break;
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Sets header `name` to `value` in `headers`, replacing any earlier value of that name
/// (any case); a credential ([`is_secret_header`]) is marked sensitive, so `Debug` and the
/// HTTP stack never show it. An invalid name or value is an `invalid_request` error that
/// does not echo the value.
pub fn insert_header(
    headers: &mut HeaderMap,
    provider: &str,
    name: &str,
    value: &str,
) -> Result<(), Error> {
    let invalid = |what: &str| {
        Error::new(ErrorKind::InvalidRequest, provider, format!("Invalid HTTP header {what}"))
            .with_retryable(false)
    };
    let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid("name"))?;
    let mut value =
        HeaderValue::from_str(value).map_err(|_| invalid(&format!("value for {header}")))?;
    if is_secret_header(name) {
        value.set_sensitive(true);
    }
    headers.insert(header, value);
    Ok(())
}

/// Name/value pairs as a header map ([`insert_header`] for each: a later name replaces an
/// earlier one).
pub fn header_map<N: AsRef<str>, V: AsRef<str>>(
    provider: &str,
    pairs: impl IntoIterator<Item = (N, V)>,
) -> Result<HeaderMap, Error> {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        insert_header(&mut map, provider, name.as_ref(), value.as_ref())?;
    }
    Ok(map)
}

/// A reqwest failure as a transport error: the URL stripped, the source chain
/// appended (it says why: reset, TLS, DNS), repeated causes once.
pub fn transport_error(provider: &str, what: &str, error: reqwest::Error) -> Error {
    let error = error.without_url();
    let mut message = format!("{what}: ");
    if error.is_timeout() {
        message.push_str("timed out: ");
    } else if error.is_connect() {
        message.push_str("connection failed: ");
    }
    message.push_str(&error.to_string());
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.is_empty() && !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    let kind = if error.is_builder() { ErrorKind::InvalidRequest } else { ErrorKind::Transport };
    Error::new(kind, provider, message)
}
