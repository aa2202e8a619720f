//! A proxy named in the environment is followed: `HTTP_PROXY` is read when the client is
//! built, so this runs in a child process of this test binary with the variable set there
//! only; the parent plays the proxy.

use std::sync::Arc;

use llm_core::{Error, ErrorKind};
use llm_http::{ErrorResponse, HttpRequest, HttpTransport, TransportConfig};

use crate::{serve_once, status};

/// Where the child finds the proxy (set only for it).
const PROXY_ENV: &str = "LLM_HTTP_PROXY_TEST_PORT";

#[tokio::test]
async fn a_proxy_in_the_environment_carries_the_request() {
    let (proxy_url, proxy) = serve_once(status(200, "", b"data: via-proxy\n\n")).await;
    let proxy_addr = proxy_url.trim_end_matches("/v1/x").to_owned();
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap());
    child.args(["--exact", "proxy::proxy_child", "--ignored", "--nocapture"]);
    for name in ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"] {
        child.env_remove(name);
    }
    let output = child
        .env("HTTP_PROXY", &proxy_addr)
        .env_remove("http_proxy")
        .env(PROXY_ENV, "1")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("child: via proxy"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The proxy got the request for the origin, in absolute form.
    let head = proxy.await.unwrap();
    assert!(head.starts_with("POST http://origin.invalid/v1/x HTTP/1.1\r\n"), "{head}");
}

/// The child of `a_proxy_in_the_environment_carries_the_request` (nothing when run alone).
#[tokio::test]
#[ignore = "run by a_proxy_in_the_environment_carries_the_request in a process of its own"]
async fn proxy_child() {
    if std::env::var_os(PROXY_ENV).is_none() {
        return;
    }
    let transport = HttpTransport::new();
    assert!(format!("{transport:?}").contains("proxy_in_env: true"), "{transport:?}");
    // `.invalid` never resolves: only the proxy can answer.
    let request = Arc::new(HttpRequest {
        method: reqwest::Method::POST,
        url: "http://origin.invalid/v1/x".to_owned(),
        headers: llm_http::header_map("test", [("content-type", "application/json")]).unwrap(),
        body: bytes::Bytes::from_static(b"{}"),
    });
    let map: Arc<dyn Fn(ErrorResponse) -> Error + Send + Sync> =
        Arc::new(|r| Error::new(ErrorKind::from_status(r.status), "test", "status"));
    let config = TransportConfig { connect_timeout: None };
    let response = transport.send(config, request, "test".into(), map).await.unwrap();
    use futures_util::StreamExt;
    let body: Vec<u8> =
        response.body.map(|c| c.unwrap().to_vec()).collect::<Vec<_>>().await.concat();
    assert_eq!(body, b"data: via-proxy\n\n");
    println!("child: via proxy");
}
