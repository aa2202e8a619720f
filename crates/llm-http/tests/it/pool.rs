//! The own client's pool against a loopback server that keeps connections alive, closes them
//! while they sit idle, or is left halfway through a body.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use llm_http::{HttpTransport, TransportConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::{mapper, request};

/// What the server does after answering a request on a connection.
#[derive(Clone, Copy)]
enum After {
    /// Waits for the next request on it.
    KeepAlive,
    /// Closes it (without saying so in the response).
    Close,
}

/// A server answering every request with `200` and `data: <n>` (the request's number,
/// counted over all connections); returns the URL and the count of connections accepted.
/// With `half`, the first response promises more body than it sends and then stalls.
async fn server(after: After, half: bool) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/x", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let requests = Arc::clone(&requests);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    // One request: its head, then its `content-length` body.
                    let end = loop {
                        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break end + 4;
                        }
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    while buf.len() < end + length {
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..end + length);
                    let n = requests.fetch_add(1, Ordering::SeqCst) + 1;
                    let body = format!("data: {n}\n\n");
                    if half && n == 1 {
                        let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", 1000);
                        socket.write_all(head.as_bytes()).await.ok();
                        socket.write_all(body.as_bytes()).await.ok();
                        // Stalls until the client gives up on the connection.
                        let _ = socket.read(&mut chunk).await;
                        return;
                    }
                    let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                    socket.write_all(head.as_bytes()).await.ok();
                    socket.write_all(body.as_bytes()).await.ok();
                    if let After::Close = after {
                        socket.shutdown().await.ok();
                        return;
                    }
                }
            });
        }
    });
    (url, accepted)
}

/// Sends one request with `transport` and reads the whole body.
async fn fetch(transport: &HttpTransport, url: &str) -> String {
    let config = TransportConfig { connect_timeout: None };
    let response =
        transport.send(config, request(url.to_owned()), "test".into(), mapper()).await.unwrap();
    let chunks: Vec<_> = response.body.map(|c| c.unwrap().to_vec()).collect().await;
    String::from_utf8(chunks.concat()).unwrap()
}

#[tokio::test]
async fn a_connection_kept_alive_carries_the_next_requests() {
    let (url, accepted) = server(After::KeepAlive, false).await;
    let transport = HttpTransport::new();
    for n in 1..=3 {
        assert_eq!(fetch(&transport, &url).await, format!("data: {n}\n\n"));
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_connection_the_server_closed_while_idle_is_replaced() {
    let (url, accepted) = server(After::Close, false).await;
    let transport = HttpTransport::new();
    for n in 1..=3 {
        assert_eq!(fetch(&transport, &url).await, format!("data: {n}\n\n"));
        // Either before or after the client sees the close: both must work.
        if n == 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_body_dropped_halfway_does_not_give_its_connection_back() {
    let (url, accepted) = server(After::KeepAlive, true).await;
    let transport = HttpTransport::new();
    let config = TransportConfig { connect_timeout: None };
    let response =
        transport.send(config, request(url.clone()), "test".into(), mapper()).await.unwrap();
    let mut body = response.body;
    assert_eq!(body.next().await.unwrap().unwrap().as_ref(), b"data: 1\n\n");
    drop(body);
    // The next request cannot share the stalled connection: it gets one of its own.
    let next = tokio::time::timeout(Duration::from_secs(5), fetch(&transport, &url)).await;
    assert_eq!(next.unwrap(), "data: 2\n\n");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}
