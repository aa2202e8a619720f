//! The loopback server: one request, one generated body.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use super::content::Body;
use super::{CHUNK, IO_TIMEOUT};

/// Reads one request (head and `content-length` body) and answers with `body`, generated
/// while it is written, chunked, with the body's content type.
pub(super) fn serve(listener: TcpListener, mut body: Body) -> std::io::Result<()> {
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

fn read_request(socket: &mut TcpStream) -> std::io::Result<()> {
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
            if data.len() >= end + 4 + length {
                return Ok(());
            }
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
