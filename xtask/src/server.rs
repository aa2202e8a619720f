//! The loopback HTTP server a fixture is served from (axum on 127.0.0.1:0).
//!
//! It records every request (method, path, query, headers, body) and answers
//! from the fixture's canned responses, cutting event-stream bodies into the
//! pieces of the current [`Chunking`].

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::fixture::{Canned, Responses};

/// How a streaming body is cut into writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Chunking {
    /// The body in one write.
    Whole,
    /// One byte per write, flushed each time.
    Bytewise,
    /// One write per SSE event (split after each blank line).
    Events,
}

impl Chunking {
    pub(crate) const ALL: [Chunking; 3] = [Chunking::Whole, Chunking::Bytewise, Chunking::Events];

    pub(crate) fn describe(self) -> &'static str {
        match self {
            Chunking::Whole => "the whole body in one write",
            Chunking::Bytewise => "one byte per write",
            Chunking::Events => "one write per event",
        }
    }
}

/// One request as received.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: Option<String>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Bytes,
}

#[derive(Debug)]
struct Shared {
    responses: Responses,
    chunking: Chunking,
    recorded: Mutex<Vec<Recorded>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// A running server; dropping it stops accepting connections.
#[derive(Debug)]
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Server {
    pub(crate) async fn start(responses: Responses, chunking: Chunking) -> std::io::Result<Server> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared { responses, chunking, recorded: Mutex::new(Vec::new()) });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            // Small writes must leave at once, not wait for Nagle's algorithm.
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Server { addr, shared, task })
    }

    /// The requests received so far, in order.
    pub(crate) fn recorded(&self) -> Vec<Recorded> {
        lock(&self.shared.recorded).clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 256 * 1024 * 1024).await.unwrap_or_default();
    let recorded = Recorded {
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned())
            })
            .collect(),
        body,
    };
    let index = {
        let mut list = lock(&shared.recorded);
        list.push(recorded);
        list.len() - 1
    };
    let canned = match &shared.responses {
        Responses::Always(c) => Some(c),
        Responses::Sequence(list) => list.get(index),
    };
    match canned {
        Some(canned) => respond(canned, shared.chunking),
        None => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("conformance runner: request #{} is beyond exchanges.json", index + 1),
        ),
    }
}

fn plain(status: StatusCode, text: String) -> Response {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response
}

fn respond(canned: &Canned, chunking: Chunking) -> Response {
    let Ok(status) = StatusCode::from_u16(canned.status) else {
        return plain(StatusCode::INTERNAL_SERVER_ERROR, format!("bad status {}", canned.status));
    };
    let body = if canned.is_sse() {
        chunked_body(&canned.body, chunking)
    } else {
        Body::from(canned.body.clone())
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    for (name, value) in &canned.headers {
        let (Ok(name), Ok(value)) =
            (HeaderName::try_from(name.as_str()), HeaderValue::try_from(value.as_str()))
        else {
            return plain(StatusCode::INTERNAL_SERVER_ERROR, format!("bad header {name:?}"));
        };
        response.headers_mut().append(name, value);
    }
    response
}

/// The body cut per `chunking`. Each piece is preceded by a yield so the server
/// flushes it as its own write.
fn chunked_body(body: &Bytes, chunking: Chunking) -> Body {
    let pieces = match chunking {
        Chunking::Whole => return Body::from(body.clone()),
        Chunking::Bytewise => (0..body.len()).map(|i| body.slice(i..i + 1)).collect(),
        Chunking::Events => split_events(body),
    };
    let stream = futures_util::stream::iter(pieces).then(|piece| async move {
        tokio::task::yield_now().await;
        Ok::<Bytes, std::io::Error>(piece)
    });
    Body::from_stream(stream)
}

/// Splits after every event boundary (`\n\n` or `\r\n\r\n`).
pub(crate) fn split_events(body: &Bytes) -> Vec<Bytes> {
    let bytes = body.as_ref();
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let rest = bytes.get(i..).unwrap_or_default();
        let boundary = if rest.starts_with(b"\r\n\r\n") {
            4
        } else if rest.starts_with(b"\n\n") {
            2
        } else {
            0
        };
        if boundary > 0 {
            i += boundary;
            pieces.push(body.slice(start..i));
            start = i;
        } else {
            i += 1;
        }
    }
    if start < bytes.len() {
        pieces.push(body.slice(start..));
    }
    pieces
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    /// The raw HTTP/1.1 response body (still chunk-encoded) to one GET, read with
    /// a blocking std socket.
    fn raw_body(chunking: Chunking, body: &'static [u8]) -> Vec<u8> {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        let canned = Canned {
            status: 200,
            headers: vec![("content-type".to_owned(), "text/event-stream".to_owned())],
            body: Bytes::from_static(body),
        };
        let server = runtime.block_on(Server::start(Responses::Always(canned), chunking)).unwrap();
        let mut socket = std::net::TcpStream::connect(server.addr).unwrap();
        socket
            .write_all(b"GET /x?alt=sse HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n")
            .unwrap();
        let mut raw = Vec::new();
        socket.read_to_end(&mut raw).unwrap();
        let recorded = server.recorded();
        assert_eq!(recorded.len(), 1);
        assert_eq!(
            recorded.first().map(|r| (r.method.as_str(), r.path.as_str())),
            Some(("GET", "/x"))
        );
        assert_eq!(recorded.first().and_then(|r| r.query.clone()).as_deref(), Some("alt=sse"));
        let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(raw.get(..head_end).unwrap()).to_ascii_lowercase();
        assert!(head.contains("transfer-encoding: chunked"), "{head}");
        raw.get(head_end..).unwrap().to_vec()
    }

    fn chunk_encoded(pieces: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in pieces {
            out.extend_from_slice(format!("{:X}\r\n", piece.len()).as_bytes());
            out.extend_from_slice(piece);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    }

    #[test]
    fn bytewise_sends_one_byte_per_chunk() {
        let body = "data: é\n\n".as_bytes();
        let pieces: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(raw_body(Chunking::Bytewise, "data: é\n\n".as_bytes()), chunk_encoded(&pieces));
    }

    #[test]
    fn events_sends_one_chunk_per_event() {
        let raw = raw_body(Chunking::Events, b"data: a\n\ndata: b\r\n\r\n");
        assert_eq!(raw, chunk_encoded(&[b"data: a\n\n", b"data: b\r\n\r\n"]));
    }

    #[test]
    fn splits_at_both_boundaries() {
        let body = Bytes::from_static(b"data: a\n\ndata: b\r\n\r\ndata: c");
        let expected = [&b"data: a\n\n"[..], &b"data: b\r\n\r\n"[..], &b"data: c"[..]];
        assert_eq!(split_events(&body), expected.map(Bytes::from_static).to_vec());
    }
}
