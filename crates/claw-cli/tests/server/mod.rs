//! A loopback OpenAI-compatible Chat Completions server for the live-mode
//! tests: it answers each request with the next scripted SSE body (or a
//! scripted error) and records every request's headers and JSON body.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// One recorded request.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// Lower-cased header lines (`name: value`).
    pub(crate) headers: Vec<String>,
    /// The JSON body (`Null` when not JSON).
    pub(crate) body: Value,
}

/// A scripted response.
pub(crate) enum Reply {
    /// 200 with this SSE body.
    Sse(String),
    /// This status with this JSON body.
    Error(u16, String),
}

/// The running server; it stops accepting after the last scripted reply.
pub(crate) struct Server {
    addr: std::net::SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    /// Serves `replies` in order, one per connection.
    pub(crate) fn start(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for reply in replies {
                let Ok((sock, _)) = listener.accept() else { return };
                let mut reader = BufReader::new(sock);
                let mut headers = Vec::new();
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    let line = line.trim_end().to_ascii_lowercase();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    headers.push(line);
                }
                let mut body = vec![0u8; length];
                let _ = reader.read_exact(&mut body);
                let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                seen.lock().unwrap().push(Request { headers, body });
                let (status, kind, text) = match reply {
                    Reply::Sse(text) => (200, "text/event-stream", text),
                    Reply::Error(status, text) => (status, "application/json", text),
                };
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    text.len()
                );
                let mut sock = reader.into_inner();
                let _ = sock.write_all(head.as_bytes());
                let _ = sock.write_all(text.as_bytes());
                let _ = sock.flush();
            }
        });
        Server { addr, requests }
    }

    /// `http://127.0.0.1:<port>/v1`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The requests so far.
    pub(crate) fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let c = json!({
        "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1_760_000_000,
        "model": "local-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {c}\n\n")
}

fn usage_and_done() -> String {
    let u = json!({
        "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1_760_000_000,
        "model": "local-model", "choices": [],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    });
    format!("data: {u}\n\ndata: [DONE]\n\n")
}

/// A response that streams `text` (in two pieces) and stops.
pub(crate) fn text_sse(text: &str) -> Reply {
    let cut = text.char_indices().nth(text.chars().count() / 2).map_or(0, |(i, _)| i);
    let (a, b) = text.split_at(cut);
    let mut out = chunk(json!({"role": "assistant", "content": a}), None);
    out.push_str(&chunk(json!({"content": b}), None));
    out.push_str(&chunk(json!({}), Some("stop")));
    out.push_str(&usage_and_done());
    Reply::Sse(out)
}

/// A response that calls `calls` (name, arguments) in parallel.
pub(crate) fn tool_sse(calls: &[(&str, Value)]) -> Reply {
    let mut out = chunk(json!({"role": "assistant", "content": null}), None);
    for (i, (name, args)) in calls.iter().enumerate() {
        out.push_str(&chunk(
            json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function",
                    "function": {"name": name, "arguments": args.to_string()}}]}),
            None,
        ));
    }
    out.push_str(&chunk(json!({}), Some("tool_calls")));
    out.push_str(&usage_and_done());
    Reply::Sse(out)
}
