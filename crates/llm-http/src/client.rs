//! clawcall's own HTTP client: hyper's HTTP/1.1 and HTTP/2 connections over tokio and rustls,
//! with a pool of its own.
//!
//! It is set up as reqwest sets up the client it wraps: TCP no-delay, keep-alive probes every
//! 15 s, rustls with ring and the same roots, HTTP/2 when the server offers it over ALPN
//! (unless HTTP/1.1 only), no redirects, `accept: */*`, idle connections kept 90 s. What it
//! leaves out is the cost per request of reqwest's layers and of hyper-util's pool and
//! connector (their futures, wake-ups, address lookups and per-connection bookkeeping): about
//! a fifth of the transport's CPU per short stream, as much as the provider's own decoding.
//! A caller's reqwest client, and a proxy configured in the environment, still go through
//! reqwest ([`crate::HttpTransport`]).
//!
//! Pool rules: an HTTP/1.1 connection goes back to the pool when its response body has been
//! read to the end (a body dropped halfway closes it); an HTTP/2 connection is shared by every
//! request to its origin while it is open. A request that a reused connection could not send
//! (the server closed it while idle) is sent once more on a new connection: it never reached
//! the server.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body_util::{BodyDataStream, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use llm_core::{Error, ErrorKind};
use reqwest::header::{ACCEPT, HOST, HeaderValue};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

use crate::{HttpRequest, Received, TransportConfig};

/// How long an idle connection is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// At most this many idle HTTP/1.1 connections are kept per origin.
const MAX_IDLE_PER_ORIGIN: usize = 64;
/// TCP keep-alive: first probe after this idle time, then one per interval, so many times.
const KEEPALIVE: Duration = Duration::from_secs(15);
const KEEPALIVE_RETRIES: u32 = 3;

/// A pooled HTTP/1.1 and HTTP/2 client with rustls; a clone shares the pool.
#[derive(Clone)]
pub(crate) struct OwnClient(Arc<Inner>);

struct Inner {
    tls: tokio_rustls::TlsConnector,
    connect_timeout: Option<Duration>,
    pool: Mutex<Pool>,
}

/// Where a connection goes: scheme, host (as in the URL, in ASCII), port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Origin {
    https: bool,
    host: String,
    port: u16,
}

#[derive(Default)]
struct Pool {
    /// Idle HTTP/1.1 connections, the most recently used last.
    idle: HashMap<Origin, Vec<(H1, Instant)>>,
    /// The shared HTTP/2 connection of each origin that has one.
    shared: HashMap<Origin, H2>,
}

/// One end of an HTTP/1.1 connection: what sends a request on it.
type H1 = http1::SendRequest<Full<Bytes>>;
/// One end of an HTTP/2 connection (shared: a clone sends on the same connection).
type H2 = http2::SendRequest<Full<Bytes>>;

/// A connection to send one request on.
enum Conn {
    H1(H1),
    H2(H2),
}

impl OwnClient {
    /// A client trusting the bundled roots and `roots`, for `config`.
    pub(crate) fn new<'a>(
        config: TransportConfig,
        http1_only: bool,
        roots: impl IntoIterator<Item = &'a CertificateDer<'static>>,
    ) -> Result<Self, String> {
        let mut store = rustls::RootCertStore::empty();
        store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for root in roots {
            store.add(root.clone()).map_err(|e| format!("a root certificate is unusable: {e}"))?;
        }
        let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(store)
        .with_no_client_auth();
        tls.alpn_protocols = if http1_only {
            vec![b"http/1.1".to_vec()]
        } else {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        };
        Ok(OwnClient(Arc::new(Inner {
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
            connect_timeout: config.connect_timeout,
            pool: Mutex::default(),
        })))
    }

    /// Sends `request`; its response head, and the body as a stream of chunks whose read
    /// errors are transport errors. Errors never show the URL.
    pub(crate) async fn send(
        &self,
        request: &HttpRequest,
        provider: &Arc<str>,
    ) -> Result<Received, Error> {
        let url = request_url(&request.url, provider)?;
        let origin = Origin {
            https: url.scheme() == "https",
            host: url.host_str().unwrap_or_default().to_owned(),
            port: url.port_or_known_default().unwrap_or(80),
        };
        let uri: hyper::Uri = url.as_str().parse().map_err(|_| invalid_url(provider))?;
        let mut reused = self.0.checkout(&origin).await;
        loop {
            let was_reused = reused.is_some();
            let conn = match reused.take() {
                Some(conn) => conn,
                None => self
                    .0
                    .connect(&origin)
                    .await
                    .map_err(|e| own_error(provider, "Request failed", true, e.as_ref()))?,
            };
            let outgoing = build_request(request, &uri, &origin, matches!(conn, Conn::H1(_)));
            let sent = match conn {
                Conn::H1(mut sender) => {
                    sender.send_request(outgoing).await.map(|r| (r, Some(sender)))
                }
                Conn::H2(mut sender) => sender.send_request(outgoing).await.map(|r| (r, None)),
            };
            match sent {
                Ok((response, sender)) => {
                    let (head, body) = response.into_parts();
                    let body = PooledBody {
                        body: BodyDataStream::new(body),
                        give_back: sender.map(|s| (Arc::clone(&self.0), origin, s)),
                        provider: Arc::clone(provider),
                    };
                    return Ok(Received {
                        status: head.status.as_u16(),
                        headers: head.headers,
                        body: body.boxed(),
                    });
                }
                // A connection the server closed while it sat idle: the request was not sent.
                Err(e) if was_reused && e.is_canceled() => continue,
                Err(e) => return Err(own_error(provider, "Request failed", false, &e)),
            }
        }
    }
}

impl Inner {
    /// An open connection to `origin` from the pool, if there is one (expired and closed
    /// ones are dropped on the way).
    async fn checkout(&self, origin: &Origin) -> Option<Conn> {
        let conn = self.pooled(origin)?;
        // Ready at once unless the connection is still finishing its last response; one that
        // failed meanwhile is not used.
        match conn {
            Conn::H1(mut sender) => sender.ready().await.ok().map(|()| Conn::H1(sender)),
            Conn::H2(mut sender) => sender.ready().await.ok().map(|()| Conn::H2(sender)),
        }
    }

    /// The connection [`checkout`](Self::checkout) takes: the origin's HTTP/2 connection, or
    /// its most recently used idle HTTP/1.1 one.
    fn pooled(&self, origin: &Origin) -> Option<Conn> {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = pool.shared.get(origin) {
            if !sender.is_closed() {
                return Some(Conn::H2(sender.clone()));
            }
            pool.shared.remove(origin);
            return None;
        }
        let idle = pool.idle.get_mut(origin)?;
        let now = Instant::now();
        let mut found = None;
        while let Some((sender, since)) = idle.pop() {
            if !sender.is_closed() && now.duration_since(since) < IDLE_TIMEOUT {
                found = Some(Conn::H1(sender));
                break;
            }
        }
        if idle.is_empty() {
            pool.idle.remove(origin);
        }
        found
    }

    /// Keeps an HTTP/1.1 connection whose response was read to the end.
    fn give_back(&self, origin: Origin, sender: H1) {
        if sender.is_closed() {
            return;
        }
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        let idle = pool.idle.entry(origin).or_default();
        let now = Instant::now();
        idle.retain(|(s, since)| !s.is_closed() && now.duration_since(*since) < IDLE_TIMEOUT);
        if idle.len() >= MAX_IDLE_PER_ORIGIN {
            idle.remove(0);
        }
        idle.push((sender, now));
    }

    /// A new connection to `origin` within the connect timeout (a server that accepts and
    /// then stalls the TLS or HTTP/2 handshake counts against it too).
    async fn connect(&self, origin: &Origin) -> Result<Conn, Box<dyn StdError + Send + Sync>> {
        match self.connect_timeout {
            Some(limit) => {
                tokio::time::timeout(limit, self.connect_now(origin)).await.map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out")
                })?
            }
            None => self.connect_now(origin).await,
        }
    }

    /// TCP (each address in turn), then TLS for `https`, then HTTP/2 if the server chose it
    /// over ALPN, else HTTP/1.1.
    async fn connect_now(&self, origin: &Origin) -> Result<Conn, Box<dyn StdError + Send + Sync>> {
        let tcp = tcp_connect(origin).await?;
        if !origin.https {
            return Ok(Conn::H1(handshake_h1(TokioIo::new(tcp)).await?));
        }
        let name = ServerName::try_from(origin.host.trim_matches(['[', ']']).to_owned())?;
        let tls = self.tls.connect(name, tcp).await?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = TokioIo::new(tls);
        if h2 {
            let (sender, connection) = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .handshake(io)
                .await?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "HTTP/2 connection ended");
                }
            });
            self.pool
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .shared
                .insert(origin.clone(), sender.clone());
            return Ok(Conn::H2(sender));
        }
        Ok(Conn::H1(handshake_h1(io).await?))
    }
}

/// An HTTP/1.1 connection over `io`, its task spawned.
async fn handshake_h1<T>(io: T) -> Result<H1, hyper::Error>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, connection) = http1::handshake(io).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "HTTP/1.1 connection ended");
        }
    });
    Ok(sender)
}

/// A TCP connection to `origin`: its addresses tried in turn (an IP address is not looked up),
/// with no-delay and keep-alive probes.
async fn tcp_connect(origin: &Origin) -> std::io::Result<TcpStream> {
    let host = origin.host.trim_matches(['[', ']']);
    let addresses: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, origin.port)],
        Err(_) => tokio::net::lookup_host((host, origin.port)).await?.collect(),
    };
    let mut last = None;
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(tcp) => {
                tcp.set_nodelay(true)?;
                let keepalive = socket2::TcpKeepalive::new()
                    .with_time(KEEPALIVE)
                    .with_interval(KEEPALIVE)
                    .with_retries(KEEPALIVE_RETRIES);
                socket2::SockRef::from(&tcp).set_tcp_keepalive(&keepalive)?;
                return Ok(tcp);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "the host has no address")
    }))
}

/// The request as hyper sends it: HTTP/1.1 takes the path and a `host` header, HTTP/2 the
/// whole URI (its `:authority`).
fn build_request(
    request: &HttpRequest,
    uri: &hyper::Uri,
    origin: &Origin,
    http1: bool,
) -> hyper::Request<Full<Bytes>> {
    let mut outgoing = hyper::Request::new(Full::new(request.body.clone()));
    *outgoing.method_mut() = request.method.clone();
    *outgoing.headers_mut() = request.headers.clone();
    let headers = outgoing.headers_mut();
    headers.entry(ACCEPT).or_insert(HeaderValue::from_static("*/*"));
    if http1 {
        let default_port = if origin.https { 443 } else { 80 };
        let host = if origin.port == default_port {
            HeaderValue::from_str(&origin.host)
        } else {
            HeaderValue::from_str(&format!("{}:{}", origin.host, origin.port))
        };
        if let Ok(host) = host {
            headers.entry(HOST).or_insert(host);
        }
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        *outgoing.uri_mut() = path.parse().unwrap_or_default();
    } else {
        *outgoing.uri_mut() = uri.clone();
        *outgoing.version_mut() = hyper::Version::HTTP_2;
    }
    outgoing
}

/// A response body's chunks; at its end an HTTP/1.1 connection goes back to the pool.
struct PooledBody {
    body: BodyDataStream<Incoming>,
    give_back: Option<(Arc<Inner>, Origin, H1)>,
    provider: Arc<str>,
}

impl Stream for PooledBody {
    type Item = Result<Bytes, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        Poll::Ready(match std::task::ready!(this.body.poll_next_unpin(cx)) {
            Some(Ok(chunk)) => Some(Ok(chunk)),
            Some(Err(e)) => {
                this.give_back = None;
                Some(Err(own_error(&this.provider, "Reading the response failed", false, &e)))
            }
            None => {
                if let Some((inner, origin, sender)) = this.give_back.take() {
                    inner.give_back(origin, sender);
                }
                None
            }
        })
    }
}

/// The request's URL: absolute, `http` or `https`, with a host, parsed as reqwest parses it
/// (so an internationalized host is sent in its ASCII form). The error names no part of the
/// URL (its path may hold an id).
pub(crate) fn request_url(url: &str, provider: &str) -> Result<reqwest::Url, Error> {
    reqwest::Url::parse(url)
        .ok()
        .filter(|url| url.has_host() && matches!(url.scheme(), "http" | "https"))
        .ok_or_else(|| invalid_url(provider))
}

fn invalid_url(provider: &str) -> Error {
    Error::new(
        ErrorKind::InvalidRequest,
        provider,
        "Request failed: the URL is not an absolute http or https URL with a host",
    )
}

/// A failure of the client as a transport error: what failed, then every cause in turn
/// (each once), which name the address at most, never the URL.
fn own_error(provider: &str, what: &str, connect: bool, error: &(dyn StdError + 'static)) -> Error {
    let mut causes: Vec<String> = Vec::new();
    let mut timed_out = false;
    let mut next = Some(error);
    while let Some(cause) = next {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            timed_out |= io.kind() == std::io::ErrorKind::TimedOut;
        }
        let text = cause.to_string();
        if !text.is_empty() && !causes.iter().any(|c| c.contains(&text)) {
            causes.push(text);
        }
        next = cause.source();
    }
    let mut message = format!("{what}: ");
    if timed_out {
        message.push_str("timed out: ");
    } else if connect {
        message.push_str("connection failed: ");
    }
    message.push_str(&causes.join(": "));
    Error::new(ErrorKind::Transport, provider, message)
}
