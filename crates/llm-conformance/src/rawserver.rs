//! A raw TCP server for fault injection: it reads one HTTP/1.1 request per
//! connection and answers with hand-written bytes, so it can do what a real
//! HTTP server never does (reset the connection, stall, send invalid bytes).
//!
//! Connection *i* plays script *i*; a connection beyond the scripts gets a 500.
//! Every connection is watched until the client closes it, so a test can check
//! that nothing was left open (no task still reading a dropped stream).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How long the server waits for a client to close a connection before it
/// gives up and counts the connection as leaked.
const CLOSE_WAIT: Duration = Duration::from_secs(10);

/// One step of a connection's script.
#[derive(Debug, Clone)]
pub enum Step {
    /// Write these bytes (each `Write` is its own `write` call, no Nagle delay).
    Write(Bytes),
    /// Pause.
    Sleep(Duration),
    /// Close the connection with a TCP reset (`SO_LINGER` 0).
    Reset,
    /// Keep the connection open, sending nothing, until the client closes it.
    Hold,
    /// Write `prefix`, then `fill` bytes as HTTP chunks of 64 KiB for as long as the
    /// client reads, up to `max` bytes (an event that never ends).
    Endless {
        /// Written first.
        prefix: Bytes,
        /// The filler byte.
        fill: u8,
        /// Stop after this many filler bytes.
        max: usize,
    },
}

/// A scripted response.
pub type Script = Vec<Step>;

/// One received request.
#[derive(Debug, Clone)]
pub struct RawRequest {
    /// The request line (`POST /v1/messages?x=y HTTP/1.1`).
    pub line: String,
    /// The body.
    pub body: Bytes,
}

#[derive(Debug, Default)]
struct State {
    scripts: Vec<Script>,
    requests: Mutex<Vec<RawRequest>>,
    /// Connections accepted.
    accepted: AtomicUsize,
    /// Connections whose handler has finished (the client closed, or the server reset it).
    closed: AtomicUsize,
    /// Connections the client never closed within [`CLOSE_WAIT`].
    leaked: AtomicUsize,
    /// Filler bytes written by `Endless` steps.
    endless_written: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// A running server; dropping it stops it.
#[derive(Debug)]
pub struct RawServer {
    /// Where it listens (127.0.0.1).
    pub addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl RawServer {
    /// Listens on 127.0.0.1:0; connection *i* plays `scripts[i]`.
    pub async fn start(scripts: Vec<Script>) -> std::io::Result<RawServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State { scripts, ..State::default() });
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let index = shared.accepted.fetch_add(1, Ordering::SeqCst);
                let _ = socket.set_nodelay(true);
                tokio::spawn(serve(socket, index, shared.clone()));
            }
        });
        Ok(RawServer { addr, state, task })
    }

    /// Requests received so far, in order.
    pub fn requests(&self) -> Vec<RawRequest> {
        lock(&self.state.requests).clone()
    }

    /// Filler bytes written by `Endless` steps so far.
    pub fn endless_written(&self) -> u64 {
        self.state.endless_written.load(Ordering::SeqCst)
    }

    /// Waits up to `limit` until every accepted connection is closed; returns the
    /// number still open (or leaked).
    pub async fn wait_closed(&self, limit: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let accepted = self.state.accepted.load(Ordering::SeqCst);
            let closed = self.state.closed.load(Ordering::SeqCst);
            let leaked = self.state.leaked.load(Ordering::SeqCst);
            if closed >= accepted && leaked == 0 {
                return 0;
            }
            if tokio::time::Instant::now() >= deadline {
                return accepted.saturating_sub(closed) + leaked;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Counts the connection as closed when its handler ends, however it ends.
struct Closed(Arc<State>);

impl Drop for Closed {
    fn drop(&mut self) {
        self.0.closed.fetch_add(1, Ordering::SeqCst);
    }
}

async fn serve(mut socket: TcpStream, index: usize, state: Arc<State>) {
    let _closed = Closed(state.clone());
    let Some(request) = read_request(&mut socket).await else { return };
    lock(&state.requests).push(request);
    let fallback;
    let script = match state.scripts.get(index) {
        Some(s) => s,
        None => {
            fallback = vec![Step::Write(status_response(
                500,
                &[],
                "fault server: no script for this request",
            ))];
            &fallback
        }
    };
    for step in script {
        match step {
            Step::Write(bytes) => {
                if socket.write_all(bytes).await.is_err() {
                    return;
                }
            }
            Step::Sleep(pause) => tokio::time::sleep(*pause).await,
            Step::Reset => {
                let _ = socket.set_zero_linger();
                drop(socket);
                return;
            }
            Step::Hold => break,
            Step::Endless { prefix, fill, max } => {
                if socket.write_all(prefix).await.is_err() {
                    return;
                }
                let piece = vec![*fill; 64 * 1024];
                let framed = Bytes::from(chunk(&piece));
                let mut written = 0usize;
                while written < *max {
                    if socket.write_all(&framed).await.is_err() {
                        return;
                    }
                    written += piece.len();
                    state.endless_written.fetch_add(piece.len() as u64, Ordering::SeqCst);
                }
            }
        }
    }
    // Wait for the client to close its side (it sends nothing more).
    let mut buf = [0u8; 1024];
    let closed = tokio::time::timeout(CLOSE_WAIT, async {
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    if closed.is_err() {
        state.leaked.fetch_add(1, Ordering::SeqCst);
    }
}

/// Reads the request head and a `content-length` body; `None` if the client
/// closed first.
async fn read_request(socket: &mut TcpStream) -> Option<RawRequest> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(buf.get(..n)?);
    };
    let head = String::from_utf8_lossy(data.get(..head_end)?).into_owned();
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default().to_owned();
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while data.len() < head_end + length {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(buf.get(..n)?);
    }
    let body = Bytes::from(data.get(head_end..head_end + length)?.to_vec());
    Some(RawRequest { line, body })
}

/// The head of a chunked `text/event-stream` response.
pub fn sse_head() -> Bytes {
    Bytes::from_static(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
    )
}

/// The head of a chunked 200 response carrying `canned`'s streaming body: SSE or an
/// AWS event stream, by its content type.
pub fn stream_head(canned: &llm_testkit::fixture::Canned) -> Bytes {
    if !canned.is_eventstream() {
        return sse_head();
    }
    Bytes::from(format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        llm_testkit::eventstream::CONTENT_TYPE
    ))
}

/// One HTTP/1.1 chunk.
pub fn chunk(bytes: &[u8]) -> Vec<u8> {
    let mut out = format!("{:X}\r\n", bytes.len()).into_bytes();
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
    out
}

/// The last chunk.
pub fn end_chunks() -> Bytes {
    Bytes::from_static(b"0\r\n\r\n")
}

/// A whole non-streaming response with a JSON body.
pub fn status_response(status: u16, headers: &[(&str, &str)], body: &str) -> Bytes {
    let reason = match status {
        408 => "Request Timeout",
        409 => "Conflict",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(body);
    Bytes::from(out)
}

/// A 127.0.0.1 port where a connection is refused. The port stays bound (without
/// listening and without `SO_REUSEADDR`) while this value lives: a released port
/// is handed to the next listener that binds port 0, often another replay's
/// server, which then answers a run that expected a refusal. Keep it alive while
/// it is used.
pub struct ClosedPort {
    /// Where a connection attempt is refused.
    pub addr: SocketAddr,
    _socket: tokio::net::TcpSocket,
}

impl std::fmt::Debug for ClosedPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClosedPort").field("addr", &self.addr).finish_non_exhaustive()
    }
}

/// Makes a [`ClosedPort`].
pub fn closed_port() -> std::io::Result<ClosedPort> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(([127, 0, 0, 1], 0).into())?;
    let addr = socket.local_addr()?;
    Ok(ClosedPort { addr, _socket: socket })
}

/// A listener whose accept queue is full, so a new connection attempt hangs in
/// the TCP handshake (the kernel drops its SYN): a stand-in for an unreachable
/// host, to exercise the connect timeout without leaving 127.0.0.1. Keep the
/// returned value alive while it is used.
pub struct Blackhole {
    /// Where a connection attempt hangs.
    pub addr: SocketAddr,
    _listener: TcpListener,
    _fillers: Vec<TcpStream>,
}

impl std::fmt::Debug for Blackhole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blackhole").field("addr", &self.addr).finish_non_exhaustive()
    }
}

/// Makes a [`Blackhole`]; `None` when the platform accepts anyway (then the
/// connect-timeout check cannot run here).
pub async fn blackhole() -> std::io::Result<Option<Blackhole>> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(([127, 0, 0, 1], 0).into())?;
    let listener = socket.listen(0)?;
    let addr = listener.local_addr()?;
    let mut fillers = Vec::new();
    for _ in 0..16 {
        match tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => fillers.push(stream),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Ok(Some(Blackhole { addr, _listener: listener, _fillers: fillers })),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[tokio::test]
    async fn a_closed_port_refuses_and_stays_taken_while_it_lives() {
        let closed = closed_port().unwrap();
        let refused = TcpStream::connect(closed.addr).await.unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        // Servers bind port 0 with SO_REUSEADDR; not even that may take this one.
        let other = tokio::net::TcpSocket::new_v4().unwrap();
        other.set_reuseaddr(true).unwrap();
        assert!(other.bind(closed.addr).is_err(), "another listener took the closed port");
        assert!(TcpListener::bind(closed.addr).await.is_err());
    }
}
