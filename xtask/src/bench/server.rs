//! The loopback servers: one request and one generated body for `bench-case`, or every
//! request of a run at the size it names for `bench-serve` and the peer program.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::content::{Body, wire};
use super::{CHUNK, IO_TIMEOUT, MIB, Scenario};
use crate::{Error, Result};

/// The largest request head and body the servers read.
const MAX_REQUEST: usize = MIB;
/// The largest stream a request may name (the bench's sizes go to 16 MiB).
pub(super) const MAX_SERVED_BYTES: usize = 256 * MIB;
/// Connections a [`BodyServer`] serves at once (a thread each); more are refused with `503`.
const MAX_CONNECTIONS: usize = 64;

/// Reads one request (head and `content-length` body) and answers with `body`, generated
/// while it is written, chunked, with the body's content type.
pub(super) fn serve(listener: TcpListener, body: Body) -> std::io::Result<()> {
    // Bounded waits: a client that fails before connecting or stops reading must not hang
    // the bench.
    listener.set_nonblocking(true)?;
    let deadline = std::time::Instant::now() + IO_TIMEOUT;
    let mut socket = loop {
        match listener.accept() {
            Ok((socket, _)) => break socket,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() > deadline {
                    return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no client"));
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(e) => return Err(e),
        }
    };
    socket.set_nonblocking(false)?;
    socket.set_read_timeout(Some(IO_TIMEOUT))?;
    socket.set_write_timeout(Some(IO_TIMEOUT))?;
    read_request(&mut socket)?;
    write_body(&mut socket, body)
}

/// Writes `body` as a chunked `200` response, generating it as it goes.
fn write_body(socket: &mut TcpStream, mut body: Body) -> std::io::Result<()> {
    socket.write_all(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
            body.content_type
        )
        .as_bytes(),
    )?;
    let mut buf = Vec::with_capacity(2 * CHUNK);
    loop {
        let more = body.fill(&mut buf, CHUNK);
        if !buf.is_empty() {
            socket.write_all(format!("{:X}\r\n", buf.len()).as_bytes())?;
            socket.write_all(&buf)?;
            socket.write_all(b"\r\n")?;
            buf.clear();
        }
        if !more {
            break;
        }
    }
    socket.write_all(b"0\r\n\r\n")?;
    socket.flush()
}

/// Reads one request, head and `content-length` body, at most [`MAX_REQUEST`] bytes;
/// returns the request line.
fn read_request(socket: &mut TcpStream) -> std::io::Result<String> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(data.get(..end).unwrap_or_default()).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if data.len() >= end.saturating_add(4).saturating_add(length) {
                let head = String::from_utf8_lossy(data.get(..end).unwrap_or_default());
                return Ok(head.lines().next().unwrap_or_default().to_owned());
            }
        }
        if data.len() > MAX_REQUEST {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "request too large"));
        }
        let n = socket.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "request cut short",
            ));
        }
        data.extend_from_slice(buf.get(..n).unwrap_or_default());
    }
}

/// The path prefix that names a stream size to a [`BodyServer`], for clients that append
/// their own path to a base URL and send no query of ours (`bytes/1048576`).
pub(super) fn sized_path(size: usize) -> String {
    format!("bytes/{size}")
}

/// The stream size a request line names: its `bytes` query parameter
/// (`POST /chat/completions?bytes=1048576 HTTP/1.1`) or a `/bytes/N/` path prefix.
fn requested_bytes(request_line: &str) -> std::result::Result<usize, String> {
    let target = request_line.split(' ').nth(1).unwrap_or_default();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let value = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("bytes="))
        .or_else(|| path.strip_prefix("/bytes/").map(|rest| rest.split('/').next().unwrap_or("")))
        .ok_or_else(|| format!("no `bytes` query parameter or path prefix in `{request_line}`"))?;
    let bytes: usize = value.parse().map_err(|e| format!("bytes `{value}`: {e}"))?;
    if bytes == 0 || bytes > MAX_SERVED_BYTES {
        return Err(format!("bytes {bytes}: from 1 to {MAX_SERVED_BYTES}"));
    }
    Ok(bytes)
}

/// Answers one connection of a [`BodyServer`]: the body of the size the request names, or
/// `400` with the reason.
fn answer(
    mut socket: TcpStream,
    provider: &str,
    scenario: Scenario,
    addr: SocketAddr,
) -> std::io::Result<()> {
    socket.set_read_timeout(Some(IO_TIMEOUT))?;
    socket.set_write_timeout(Some(IO_TIMEOUT))?;
    let line = read_request(&mut socket)?;
    let body = requested_bytes(&line)
        .and_then(|size| wire(provider, scenario, size, addr).map_err(|e| e.to_string()));
    match body {
        Ok((body, _)) => write_body(&mut socket, body),
        Err(reason) => {
            socket.write_all(
                format!(
                    "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reason}",
                    reason.len()
                )
                .as_bytes(),
            )?;
            socket.flush()
        }
    }
}

/// The `bench` body server for a provider and scenario: every request on loopback gets
/// the body `bench-case` streams, at the size in its `bytes` query parameter, each
/// connection on its own thread. Stops when dropped.
pub(super) struct BodyServer {
    /// Where it listens.
    pub(super) addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BodyServer {
    /// Binds `127.0.0.1:0` and starts accepting.
    pub(super) fn start(provider: &str, scenario: Scenario) -> Result<Self> {
        // The provider's wire format is checked here, not at the first request.
        wire(provider, scenario, 1, SocketAddr::from(([127, 0, 0, 1], 9)))?;
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| Error::Msg(format!("cannot bind the loopback server: {e}")))?;
        let addr = listener.local_addr().map_err(|e| Error::Msg(e.to_string()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let provider = provider.to_owned();
        let stopping = Arc::clone(&stop);
        let live = Arc::new(AtomicUsize::new(0));
        let thread = std::thread::spawn(move || {
            for socket in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut socket) = socket else { continue };
                if live.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    live.fetch_sub(1, Ordering::SeqCst);
                    let _ = socket.set_write_timeout(Some(IO_TIMEOUT));
                    let _ = socket.write_all(
                        b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    );
                    continue;
                }
                let provider = provider.clone();
                let live = Arc::clone(&live);
                std::thread::spawn(move || {
                    if let Err(e) = answer(socket, &provider, scenario, addr) {
                        eprintln!("bench-serve: {e}");
                    }
                    live.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Ok(BodyServer { addr, stop, thread: Some(thread) })
    }
}

impl Drop for BodyServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the blocking accept; connections in flight finish on their own threads.
        let _ = TcpStream::connect_timeout(&self.addr, IO_TIMEOUT);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `xtask bench-serve PROVIDER SCENARIO`: runs the body server (every request gets the
/// stream `bench-case` streams, at the size it names in a `bytes` query parameter or a
/// `/bytes/N/` path prefix) after printing its address, until standard input ends (for the
/// peer program and for profiling by hand).
pub fn serve_until_stdin_ends(args: &[String]) -> Result<()> {
    let [provider, scenario] = args else {
        return Err(Error::Msg("bench-serve PROVIDER SCENARIO".into()));
    };
    let server = BodyServer::start(provider, Scenario::parse(scenario)?)?;
    println!("{}", server.addr);
    let mut sink = Vec::new();
    std::io::stdin().read_to_end(&mut sink).map_err(|e| Error::Msg(format!("stdin: {e}")))?;
    drop(server);
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;

    use crate::providers::BENCHED as PROVIDERS;

    /// Sends `request_line` and returns the status line and the de-chunked body.
    fn fetch(addr: SocketAddr, target: &str) -> (String, Vec<u8>) {
        let mut socket = TcpStream::connect(addr).unwrap();
        socket.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut raw = Vec::new();
        // A refused connection may be reset (the server closes it with the request unread):
        // what was read before the reset is kept.
        let sent = socket.write_all(
            format!("POST {target} HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{{}}")
                .as_bytes(),
        );
        let read = socket.read_to_end(&mut raw);
        let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
            return (format!("no response: {sent:?} {read:?}"), raw);
        };
        let head = String::from_utf8(raw[..end].to_vec()).unwrap();
        let mut rest = &raw[end + 4..];
        if !head.to_lowercase().contains("transfer-encoding: chunked") {
            return (head.lines().next().unwrap().to_owned(), rest.to_vec());
        }
        let mut body = Vec::new();
        loop {
            let line_end = rest.windows(2).position(|w| w == b"\r\n").unwrap();
            let size =
                usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap(), 16).unwrap();
            rest = &rest[line_end + 2..];
            if size == 0 {
                break;
            }
            body.extend_from_slice(&rest[..size]);
            assert_eq!(&rest[size..size + 2], b"\r\n");
            rest = &rest[size + 2..];
        }
        (head.lines().next().unwrap().to_owned(), body)
    }

    /// What `bench-case`'s one-request server writes for the case, read the same way.
    fn bench_case_bytes(provider: &str, scenario: Scenario, size: usize) -> Vec<u8> {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (body, _) = wire(provider, scenario, size, addr).unwrap();
        let server = std::thread::spawn(move || serve(listener, body));
        let (status, bytes) = fetch(addr, "/bench");
        server.join().unwrap().unwrap();
        assert_eq!(status, "HTTP/1.1 200 OK");
        bytes
    }

    #[test]
    fn bench_serve_streams_the_bytes_bench_case_streams_at_the_size_asked() {
        for entry in PROVIDERS {
            for scenario in Scenario::ALL {
                let server = BodyServer::start(entry.name, scenario).unwrap();
                // Two sizes from one server, as the peer's warm-up and measured stream.
                for (size, target) in [
                    (16 * 1024, "/chat/completions?stream=1&bytes=16384".to_owned()),
                    (200_000, format!("/{}/chat/completions", sized_path(200_000))),
                ] {
                    let (status, served) = fetch(server.addr, &target);
                    assert_eq!(status, "HTTP/1.1 200 OK", "{} {}", entry.name, scenario.name());
                    let expected = bench_case_bytes(entry.name, scenario, size);
                    assert!(
                        served == expected,
                        "{} {} {size}: {} bytes served, {} streamed by bench-case",
                        entry.name,
                        scenario.name(),
                        served.len(),
                        expected.len()
                    );
                }
            }
        }
    }

    #[test]
    fn bench_serve_refuses_a_missing_or_huge_size_and_keeps_serving() {
        let server = BodyServer::start("openai-completions", Scenario::OneCall).unwrap();
        for target in [
            "/chat/completions".to_owned(),
            "/chat/completions?bytes=".to_owned(),
            "/chat/completions?bytes=-1".to_owned(),
            "/chat/completions?bytes=0".to_owned(),
            "/bytes//chat/completions".to_owned(),
            "/bytes/x/chat/completions".to_owned(),
            format!("/chat/completions?bytes={}", MAX_SERVED_BYTES + 1),
            "/chat/completions?bytes=99999999999999999999999".to_owned(),
        ] {
            let (status, reason) = fetch(server.addr, &target);
            assert_eq!(status, "HTTP/1.1 400 Bad Request", "{target}");
            assert!(!reason.is_empty(), "{target}");
        }
        // A client that connects and sends nothing holds only its own thread.
        let silent = TcpStream::connect(server.addr).unwrap();
        let (status, body) = fetch(server.addr, "/x?bytes=1000");
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(body.len() > 1000);
        drop(silent);
    }

    #[test]
    fn bench_serve_refuses_connections_past_its_limit_until_they_close() {
        let server = BodyServer::start("openai-completions", Scenario::Text).unwrap();
        let silent: Vec<_> =
            (0..MAX_CONNECTIONS).map(|_| TcpStream::connect(server.addr).unwrap()).collect();
        // The acceptor counts them in order; a refused request is answered at once.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let (status, _) = fetch(server.addr, "/x?bytes=1000");
            if status == "HTTP/1.1 503 Service Unavailable" || status.starts_with("no response") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "never refused: {status}");
        }
        drop(silent);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let (status, _) = fetch(server.addr, "/x?bytes=1000");
            if status == "HTTP/1.1 200 OK" {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "not served again: {status}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn a_dropped_bench_serve_stops_listening() {
        let server = BodyServer::start("mistral", Scenario::Text).unwrap();
        let addr = server.addr;
        drop(server);
        assert!(TcpStream::connect(addr).is_err());
    }

    #[test]
    fn bench_serve_refuses_an_unknown_provider_or_scenario() {
        assert!(BodyServer::start("no-such-provider", Scenario::Text).is_err());
        assert!(serve_until_stdin_ends(&["mistral".into(), "no-such".into()]).is_err());
    }
}
