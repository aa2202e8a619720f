//! TLS against a loopback server whose certificate a private CA (made here with rcgen) signed:
//! accepted when the CA is an extra root or in `SSL_CERT_FILE`, rejected otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::sync::Arc;

use llm_core::{Error, ErrorKind};
use llm_http::{ErrorResponse, HttpRequest, HttpTransport, TransportConfig, send};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Where the child process finds the server (set only for it).
const PORT_ENV: &str = "LLM_HTTP_TLS_TEST_PORT";

/// A private CA (its PEM) and a server certificate it signed for `127.0.0.1` and `localhost`.
struct Pki {
    ca_pem: String,
    server_cert: CertificateDer<'static>,
    server_key: PrivateKeyDer<'static>,
}

fn new_pki() -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "clawcall test private CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&server_key, &issuer)
        .unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        server_cert: server.der().clone(),
        server_key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der())),
    }
}

/// A TLS acceptor with `pki`'s server certificate, offering only `alpn`.
fn acceptor(pki: &Pki, alpn: &[u8]) -> TlsAcceptor {
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![pki.server_cert.clone()], pki.server_key.clone_key())
        .unwrap();
    config.alpn_protocols = vec![alpn.to_vec()];
    TlsAcceptor::from(Arc::new(config))
}

/// A request to `https://127.0.0.1:port` with a key, and a mapper of error statuses.
fn https_request(
    port: u16,
) -> (Arc<HttpRequest>, Arc<dyn Fn(ErrorResponse) -> Error + Send + Sync>) {
    let request = Arc::new(HttpRequest {
        method: reqwest::Method::POST,
        url: format!("https://127.0.0.1:{port}/v1/x"),
        headers: llm_http::header_map("test", [("x-api-key", "sk-tls-test")]).unwrap(),
        body: bytes::Bytes::from_static(b"{}"),
    });
    (request, Arc::new(|r| Error::new(ErrorKind::from_status(r.status), "test", "status")))
}

/// An HTTPS server on loopback answering every request with `200` and `data: ok`; returns
/// its port. Handshake failures (the client rejecting the certificate) are ignored.
async fn https_server(pki: &Pki) -> u16 {
    let acceptor = acceptor(pki, b"http/1.1");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else { return };
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(buf.get(..n).unwrap_or_default()),
                    }
                }
                let body = b"data: ok\n\n";
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.write_all(body).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    port
}

/// Sends one request to `https://127.0.0.1:port` with `transport`'s own client, then the same
/// with its reqwest client; both must come to the same outcome, which is returned.
async fn send_to(transport: &HttpTransport, port: u16) -> Result<Vec<u8>, Error> {
    let config = TransportConfig { connect_timeout: None };
    let (request, map) = https_request(port);
    let read = |response: Result<llm_http::HttpResponse, Error>| async move {
        use futures_util::StreamExt;
        let chunks: Vec<_> = response?.body.collect().await;
        Ok::<_, Error>(chunks.into_iter().map(|c| c.unwrap().to_vec()).collect::<Vec<_>>().concat())
    };
    let own = read(transport.send(config, request.clone(), "test".into(), map.clone()).await).await;
    let client = transport.client(config, "test")?;
    let with_reqwest = read(send(client, request, "test".into(), map).await).await;
    match (&own, &with_reqwest) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(a), Err(b)) => assert_eq!(a.kind, b.kind, "{a} / {b}"),
        _ => panic!("own client: {own:?}; reqwest: {with_reqwest:?}"),
    }
    own
}

#[tokio::test]
async fn a_private_ca_is_trusted_only_when_configured() {
    let pki = new_pki();
    let port = https_server(&pki).await;

    let trusting = HttpTransport::new().with_extra_roots(pki.ca_pem.as_bytes()).unwrap();
    assert_eq!(send_to(&trusting, port).await.unwrap(), b"data: ok\n\n");

    // Neither the bundled roots nor the platform's know this CA.
    let error = send_to(&HttpTransport::new(), port).await.unwrap_err();
    assert_eq!(error.kind, ErrorKind::Transport, "{error}");
    assert!(error.message.to_lowercase().contains("certificate"), "{}", error.message);
    assert!(!error.message.contains("sk-tls-test"));

    // Another private CA does not help.
    let other = HttpTransport::new().with_extra_roots(new_pki().ca_pem.as_bytes()).unwrap();
    assert_eq!(send_to(&other, port).await.unwrap_err().kind, ErrorKind::Transport);
}

/// An HTTPS server speaking only HTTP/2 (ALPN `h2`), answering each request with
/// `data: <its HTTP version>`; returns its port and the count of connections accepted.
async fn h2_server(pki: &Pki) -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    let acceptor = acceptor(pki, b"h2");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(socket).await else { return };
                let service = hyper::service::service_fn(|request: hyper::Request<_>| async move {
                    let body = format!("data: {:?}\n\n", request.version());
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(
                        http_body_util::Full::new(bytes::Bytes::from(body)),
                    ))
                });
                let _ =
                    hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
            });
        }
    });
    (port, accepted)
}

#[tokio::test]
async fn http2_is_spoken_when_offered_and_one_connection_carries_every_request() {
    let pki = new_pki();
    let (port, accepted) = h2_server(&pki).await;
    let transport = HttpTransport::new().with_extra_roots(pki.ca_pem.as_bytes()).unwrap();
    let send_one = || async {
        let (request, map) = https_request(port);
        let config = TransportConfig { connect_timeout: None };
        let response = transport.send(config, request, "test".into(), map).await.unwrap();
        use futures_util::StreamExt;
        let chunks: Vec<_> = response.body.map(|c| c.unwrap().to_vec()).collect().await;
        String::from_utf8(chunks.concat()).unwrap()
    };
    assert_eq!(send_one().await, "data: HTTP/2.0\n\n");
    let more = futures_util::future::join_all((0..4).map(|_| send_one())).await;
    assert!(more.iter().all(|body| body == "data: HTTP/2.0\n\n"), "{more:?}");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_server_that_stalls_the_tls_handshake_fails_within_the_connect_timeout() {
    // Accepts, then never says a word.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let (request, map) = https_request(port);
    let config = TransportConfig { connect_timeout: Some(std::time::Duration::from_millis(300)) };
    let started = std::time::Instant::now();
    let error = HttpTransport::new().send(config, request, "test".into(), map).await.unwrap_err();
    assert_eq!(error.kind, ErrorKind::Transport, "{error}");
    assert!(error.message.contains("timed out"), "{}", error.message);
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
}

#[test]
fn a_root_bundle_without_certificates_is_an_invalid_request() {
    for pem in [&b""[..], b"not a certificate", b"-----BEGIN CERTIFICATE-----\nAAAA\n"] {
        let error = HttpTransport::new().with_extra_roots(pem).unwrap_err();
        assert_eq!((error.kind, error.retryable), (ErrorKind::InvalidRequest, false), "{pem:?}");
    }
}

/// `SSL_CERT_FILE` is read by the client (through the platform roots), so it is tested in a
/// child process of this test binary with the variable set there only: the parent runs the
/// server, the child (`ssl_cert_file_child`) sends with a default transport.
#[tokio::test]
async fn ssl_cert_file_adds_a_private_ca() {
    let pki = new_pki();
    let port = https_server(&pki).await;
    let dir = std::env::temp_dir().join(format!("llm-http-tls-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &pki.ca_pem).unwrap();
    let other_file = dir.join("other.pem");
    std::fs::write(&other_file, new_pki().ca_pem).unwrap();
    for (file, expected) in [(&ca_file, "accepted"), (&other_file, "rejected")] {
        let output = tokio::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "tls::ssl_cert_file_child", "--ignored", "--nocapture"])
            .env("SSL_CERT_FILE", file)
            .env_remove("SSL_CERT_DIR")
            .env(PORT_ENV, port.to_string())
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains(&format!("child: {expected}")),
            "{expected}: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The child of `ssl_cert_file_adds_a_private_ca` (it does nothing when run on its own).
#[tokio::test]
#[ignore = "run by ssl_cert_file_adds_a_private_ca in a process of its own"]
async fn ssl_cert_file_child() {
    let Some(port) = std::env::var(PORT_ENV).ok().and_then(|p| p.parse::<u16>().ok()) else {
        return;
    };
    match send_to(&HttpTransport::new(), port).await {
        Ok(body) if body == b"data: ok\n\n" => println!("child: accepted"),
        Ok(body) => panic!("unexpected body {body:?}"),
        Err(e) if e.kind == ErrorKind::Transport => println!("child: rejected ({e})"),
        Err(e) => panic!("unexpected error {e}"),
    }
}
