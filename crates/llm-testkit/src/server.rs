//! The loopback replay server: HTTP/1.1 written by hand over tokio TCP on
//! 127.0.0.1:0 (no axum or hyper, so `claw` can ship it).
//!
//! It records every request (method, path, query, headers, body) and answers from
//! canned responses, cutting event-stream bodies into the writes of a [`Chunking`]
//! (each write one HTTP chunk, flushed on its own). Connections are kept alive, so
//! a pooled client reuses them as it would a real server's.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::fixture::{Canned, Responses};

/// A request head or body larger than this closes the connection.
const MAX_REQUEST_BYTES: usize = 256 * 1024 * 1024;

/// How a streaming body is cut into writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Chunking {
    /// The body in one write.
    Whole,
    /// One byte per write, flushed each time.
    Bytewise,
    /// One write per event (SSE: after each blank line; AWS event stream: after each message).
    Events,
}

impl Chunking {
    /// Every chunking, in replay order.
    pub const ALL: [Chunking; 3] = [Chunking::Whole, Chunking::Bytewise, Chunking::Events];

    /// For messages.
    pub fn describe(self) -> &'static str {
        match self {
            Chunking::Whole => "the whole body in one write",
            Chunking::Bytewise => "one byte per write",
            Chunking::Events => "one write per event",
        }
    }
}

/// How the server departs from a plain replay (see [`Server::start_with`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerOptions {
    /// A request beyond a [`Responses::Sequence`] gets the sequence's last entry
    /// again, instead of a 500 that says it is beyond the sequence.
    pub repeat_last: bool,
    /// Event-stream bodies stop after this many bytes: the connection stays open
    /// and silent until the client closes it (a server that stalls mid-stream).
    pub stall_after: Option<usize>,
}

/// One request as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// `POST`, `GET`, ...
    pub method: String,
    /// The path without the query.
    pub path: String,
    /// The raw query, if any.
    pub query: Option<String>,
    /// Header names (lowercase) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body (chunked request bodies decoded).
    pub body: Bytes,
}

impl Recorded {
    /// The value of header `name` (any case), if it was sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON, `Value::Null` when it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

#[derive(Debug)]
struct Shared {
    responses: Responses,
    chunking: Chunking,
    options: ServerOptions,
    recorded: Mutex<Vec<Recorded>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running server; dropping it stops it and every connection.
#[derive(Debug)]
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Server {
    /// Binds 127.0.0.1:0 and serves `responses` (request *i* gets entry *i* of a
    /// sequence; a request beyond it gets a 500 that says so).
    pub async fn start(responses: Responses, chunking: Chunking) -> std::io::Result<Server> {
        Server::start_with(responses, chunking, ServerOptions::default()).await
    }

    /// [`Server::start`] with `options` (repeat the last reply, stall mid-stream).
    pub async fn start_with(
        responses: Responses,
        chunking: Chunking,
        options: ServerOptions,
    ) -> std::io::Result<Server> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let recorded = Mutex::new(Vec::new());
        let shared = Arc::new(Shared { responses, chunking, options, recorded });
        let accept_shared = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((socket, _)) = listener.accept().await {
                // Small writes must leave at once, not wait for Nagle's algorithm.
                let _ = socket.set_nodelay(true);
                connections.spawn(serve_connection(socket, Arc::clone(&accept_shared)));
                while connections.try_join_next().is_some() {}
            }
        });
        Ok(Server { addr, shared, task })
    }

    /// The requests received so far, in order.
    pub fn recorded(&self) -> Vec<Recorded> {
        lock(&self.shared.recorded).clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Aborting the accept task drops its JoinSet, which aborts every connection.
        self.task.abort();
    }
}

async fn serve_connection(mut socket: TcpStream, shared: Arc<Shared>) {
    let mut buffer = Vec::new();
    loop {
        let Some(request) = read_request(&mut socket, &mut buffer).await else { return };
        let close = request
            .headers
            .iter()
            .any(|(k, v)| k == "connection" && v.eq_ignore_ascii_case("close"));
        let index = {
            let mut list = lock(&shared.recorded);
            list.push(request);
            list.len() - 1
        };
        let canned = match &shared.responses {
            Responses::Always(c) => Some(c),
            Responses::Sequence(list) => {
                list.get(index).or_else(|| list.last().filter(|_| shared.options.repeat_last))
            }
        };
        let written = match canned {
            Some(canned) => {
                respond(&mut socket, canned, shared.chunking, shared.options.stall_after).await
            }
            None => {
                let text =
                    format!("replay server: request #{} is beyond exchanges.json", index + 1);
                let canned = Canned {
                    status: 500,
                    headers: vec![("content-type".to_owned(), "text/plain".to_owned())],
                    body: Bytes::from(text),
                };
                respond(&mut socket, &canned, Chunking::Whole, None).await
            }
        };
        if written.is_err() || close {
            return;
        }
    }
}

/// Reads one request; `None` when the peer closed or sent something unusable.
async fn read_request(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Recorded> {
    let head_end = loop {
        if let Some(pos) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        if buffer.len() > MAX_REQUEST_BYTES || !read_more(socket, buffer).await {
            return None;
        }
    };
    let head = String::from_utf8_lossy(buffer.get(..head_end)?).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let target = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    buffer.drain(..head_end);
    let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        read_chunked(socket, buffer).await?
    } else {
        let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        if length > MAX_REQUEST_BYTES {
            return None;
        }
        while buffer.len() < length {
            if !read_more(socket, buffer).await {
                return None;
            }
        }
        Bytes::from(buffer.drain(..length).collect::<Vec<u8>>())
    };
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
        None => (target, None),
    };
    Some(Recorded { method, path, query, headers, body })
}

async fn read_chunked(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Bytes> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(pos) = buffer.windows(2).position(|w| w == b"\r\n") {
                break pos;
            }
            if !read_more(socket, buffer).await {
                return None;
            }
        };
        let size_text = String::from_utf8_lossy(buffer.get(..line_end)?).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        if body.len().saturating_add(size) > MAX_REQUEST_BYTES {
            return None;
        }
        while buffer.len() < line_end + 2 + size + 2 {
            if !read_more(socket, buffer).await {
                return None;
            }
        }
        body.extend_from_slice(buffer.get(line_end + 2..line_end + 2 + size)?);
        buffer.drain(..line_end + 2 + size + 2);
        if size == 0 {
            return Some(Bytes::from(body));
        }
    }
}

async fn read_more(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 16 * 1024];
    match socket.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buffer.extend_from_slice(chunk.get(..n).unwrap_or_default());
            true
        }
    }
}

async fn respond(
    socket: &mut TcpStream,
    canned: &Canned,
    chunking: Chunking,
    stall_after: Option<usize>,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {} {}\r\n", canned.status, reason(canned.status));
    for (name, value) in &canned.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !canned.is_stream() {
        head.push_str(&format!("content-length: {}\r\n\r\n", canned.body.len()));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&canned.body);
        socket.write_all(&bytes).await?;
        return socket.flush().await;
    }
    head.push_str("transfer-encoding: chunked\r\n\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.flush().await?;
    let body = match stall_after {
        Some(n) => canned.body.slice(..n.min(canned.body.len())),
        None => canned.body.clone(),
    };
    let pieces = match chunking {
        Chunking::Whole => vec![body.clone()],
        Chunking::Bytewise => (0..body.len()).map(|i| body.slice(i..i + 1)).collect(),
        Chunking::Events => split_stream(canned, &body),
    };
    for piece in pieces.iter().filter(|p| !p.is_empty()) {
        let mut chunk = format!("{:X}\r\n", piece.len()).into_bytes();
        chunk.extend_from_slice(piece);
        chunk.extend_from_slice(b"\r\n");
        // A yield between writes lets each leave as its own segment.
        tokio::task::yield_now().await;
        socket.write_all(&chunk).await?;
        socket.flush().await?;
    }
    if stall_after.is_some() {
        // Silent until the client gives up; then the connection ends (an error, so
        // it is not reused).
        let mut sink = [0u8; 1024];
        while socket.read(&mut sink).await.is_ok_and(|n| n > 0) {}
        return Err(std::io::Error::other("stalled mid-stream"));
    }
    socket.write_all(b"0\r\n\r\n").await?;
    socket.flush().await
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// Splits a streaming body of `canned` after every event: SSE at blank lines, AWS event
/// streams after each message.
pub fn split_stream(canned: &Canned, body: &Bytes) -> Vec<Bytes> {
    if canned.is_eventstream() {
        crate::eventstream::split_messages(body)
    } else {
        split_events(body)
    }
}

/// Splits after every event boundary (`\n\n` or `\r\n\r\n`).
pub fn split_events(body: &Bytes) -> Vec<Bytes> {
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
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    /// The raw HTTP/1.1 response body (still chunk-encoded) to one GET, read with
    /// a blocking std socket (an oracle independent of the server's code).
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
            .write_all(b"POST /x?alt=sse HTTP/1.1\r\nhost: test\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}")
            .unwrap();
        let mut raw = Vec::new();
        socket.read_to_end(&mut raw).unwrap();
        let recorded = server.recorded();
        assert_eq!(recorded.len(), 1);
        assert_eq!((recorded[0].method.as_str(), recorded[0].path.as_str()), ("POST", "/x"));
        assert_eq!(recorded[0].query.as_deref(), Some("alt=sse"));
        assert_eq!(&recorded[0].body[..], b"{}");
        assert_eq!(recorded[0].header("Connection"), Some("close"));
        assert_eq!(recorded[0].header("x-absent"), None);
        assert_eq!(recorded[0].json(), serde_json::json!({}));
        let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
        assert!(head.contains("transfer-encoding: chunked"), "{head}");
        raw[head_end..].to_vec()
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

    #[test]
    fn a_sequence_answers_in_order_on_one_kept_alive_connection() {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        let canned = |status: u16, body: &'static [u8]| Canned {
            status,
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: Bytes::from_static(body),
        };
        let responses = Responses::Sequence(vec![canned(429, b"{\"a\":1}"), canned(200, b"ok")]);
        let server = runtime.block_on(Server::start(responses, Chunking::Whole)).unwrap();
        let mut socket = std::net::TcpStream::connect(server.addr).unwrap();
        let request = b"POST /v1 HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
        let mut raw = Vec::new();
        for _ in 0..3 {
            socket.write_all(request).unwrap();
        }
        socket.shutdown(std::net::Shutdown::Write).unwrap();
        socket.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw);
        let statuses: Vec<&str> =
            text.match_indices("HTTP/1.1 ").map(|(i, _)| &text[i + 9..i + 12]).collect();
        assert_eq!(statuses, ["429", "200", "500"], "{text}");
        assert!(text.contains("beyond exchanges.json"));
        assert_eq!(server.recorded().len(), 3);
        assert!(server.recorded().iter().all(|r| &r.body[..] == b"{}"));
    }

    #[test]
    fn repeat_last_answers_beyond_the_sequence_with_its_last_entry() {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        let canned = |status: u16| Canned {
            status,
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: Bytes::from_static(b"{}"),
        };
        let responses = Responses::Sequence(vec![canned(429), canned(503)]);
        let options = ServerOptions { repeat_last: true, ..ServerOptions::default() };
        let server =
            runtime.block_on(Server::start_with(responses, Chunking::Whole, options)).unwrap();
        let mut socket = std::net::TcpStream::connect(server.addr).unwrap();
        for _ in 0..4 {
            socket.write_all(b"GET / HTTP/1.1\r\nhost: t\r\n\r\n").unwrap();
        }
        socket.shutdown(std::net::Shutdown::Write).unwrap();
        let mut raw = Vec::new();
        socket.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw);
        let statuses: Vec<&str> =
            text.match_indices("HTTP/1.1 ").map(|(i, _)| &text[i + 9..i + 12]).collect();
        assert_eq!(statuses, ["429", "503", "503", "503"], "{text}");
    }

    #[test]
    fn stall_after_sends_a_prefix_then_holds_the_connection_open() {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        let canned = Canned {
            status: 200,
            headers: vec![("content-type".to_owned(), "text/event-stream".to_owned())],
            body: Bytes::from_static(b"data: one\n\ndata: two\n\n"),
        };
        let options = ServerOptions { stall_after: Some(13), ..ServerOptions::default() };
        let server = runtime
            .block_on(Server::start_with(Responses::Always(canned), Chunking::Events, options))
            .unwrap();
        let mut socket = std::net::TcpStream::connect(server.addr).unwrap();
        socket.write_all(b"POST / HTTP/1.1\r\nhost: t\r\ncontent-length: 0\r\n\r\n").unwrap();
        socket.set_read_timeout(Some(std::time::Duration::from_millis(300))).unwrap();
        let mut raw = Vec::new();
        let mut buf = [0u8; 1024];
        let stalled = loop {
            match socket.read(&mut buf) {
                Ok(0) => break false,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                Err(e) => {
                    assert!(
                        matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ),
                        "{e}"
                    );
                    break true;
                }
            }
        };
        assert!(stalled, "the server closed instead of stalling");
        let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        // The first 13 bytes, cut into events, and no terminating chunk.
        let sent = chunk_encoded(&[b"data: one\n\n", b"da"]);
        assert_eq!(raw[head_end..], sent[..sent.len() - b"0\r\n\r\n".len()]);
        // Once the client leaves, the server lets go of the connection too.
        drop(socket);
    }
}
