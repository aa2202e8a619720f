//! `cargo xtask bench --concurrent N[,N...]`: many small streams at once in one process.
//!
//! A paced loopback server (in this process, on its own thread and runtime) answers every
//! request with a model turn as agents see it: about 600 bytes of text, then one
//! `write_file` call of a few KiB, in 100-byte deltas written in groups (single events and
//! bursts of eight) a few milliseconds apart. Each stream's text and call name the stream
//! (`stream 00000042: ...`, `src/s00000042/gen_0.rs`), from a number in its request, so
//! bytes that reach the wrong stream are seen.
//!
//! Each measured case runs in a child process (`xtask bench-concurrent-case ...`), with one
//! shared client on a 2-thread tokio runtime, and starts all N requests at once:
//! - `transport`: the same HTTP client as the providers' (`llm_http::HttpTransport`) and the
//!   provider's framing, nothing parsed: the floor of that client;
//! - `transport-hyper`: the same request and framing over hyper's HTTP/1 connection API,
//!   one connection per stream, without reqwest or hyper-util's pool: what a client of its
//!   own could save;
//! - `stream`: the provider's `stream()`, every event read, the final message checked;
//! - `agent`: an `agent_core` run of two turns with a tool (the first answer calls
//!   `write_file`, the second is text), the outcome checked.
//!
//! A child reports the CPU time of the whole process over the N streams (the sum of its
//! threads' `/proc/<pid>/task/*/schedstat`), the events seen, the time from starting a
//! stream to its first delta (p50 and p99), the peak resident set above the resident set
//! before the streams (`VmHWM`), and the open file descriptors and tokio tasks before the
//! streams and after they ended. Peers (other Rust clients) are measured the same way by an
//! outside program given with `--peer PATH`, which takes `PEER FORMAT N ADDR CALL_BYTES` and
//! prints the same report line (`cpu_ns=... events=...`); it is not part of this repository.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::{Agent, AgentConfig, AgentContext, AgentTool, EndReason, ToolOutput};
use futures_util::StreamExt;
use llm_core::raw::framing::Framing as _;
use llm_core::{
    ApiKey, AssistantEvent, AssistantMessage, Context, Message, Model, Provider, StopReason,
    StreamOptions, Tool,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::content::{Source, wire_salted};
use super::{Scenario, TURN_TEXT};
use crate::providers::BENCHED as PROVIDERS;
use crate::{Error, Result};

/// Argument bytes of each stream's call.
const CALL_BYTES: usize = 4 * 1024;
/// Pause between two groups of events.
const GAP: Duration = Duration::from_millis(3);
/// Events per group, in turn: single deltas and bursts.
const GROUPS: [usize; 5] = [1, 1, 8, 1, 2];
/// The tool result the second request carries, which makes the server answer with text.
const TOOL_RESULT: &str = "bench-tool-result";
/// The most a request may take to arrive, and a case to finish.
const WAIT: Duration = Duration::from_secs(120);
/// Streams run before measuring (connection set-up code, lazy statics, the thread pool).
const WARM_UP: usize = 16;
/// Largest request head and body the server reads.
const MAX_REQUEST: usize = 1 << 20;

/// `cargo xtask bench --concurrent` options.
#[derive(Debug, Clone)]
pub struct Options {
    /// Streams in flight at once, one case per count.
    pub counts: Vec<usize>,
    /// Only this provider (fixture folder name).
    pub provider: Option<String>,
    /// Runs per case (the median CPU is kept).
    pub reps: usize,
    /// The peer program (see the module docs).
    pub peer: Option<PathBuf>,
    /// Only these modes (`transport`, `stream`, `agent`, `peer:NAME`).
    pub modes: Option<Vec<String>>,
    /// Where to draw the table as charts (`--svg DIR`).
    pub svg: Option<PathBuf>,
}

impl Options {
    /// Parses `--concurrent 100,1000 [--provider NAME] [--reps N] [--peer PATH]
    /// [--modes transport,stream,agent] [--svg DIR]`.
    pub fn parse(args: &[String]) -> Result<Self> {
        let mut options = Options {
            counts: Vec::new(),
            provider: None,
            reps: 3,
            peer: None,
            modes: None,
            svg: None,
        };
        let mut iter = args.iter();
        while let Some(flag) = iter.next() {
            let value =
                iter.next().ok_or_else(|| Error::Msg(format!("{flag} needs a value")))?.as_str();
            match flag.as_str() {
                "--concurrent" => {
                    options.counts = value
                        .split(',')
                        .map(|s| s.trim().replace('_', "").parse::<usize>())
                        .collect::<std::result::Result<_, _>>()
                        .map_err(|e| Error::Msg(format!("--concurrent: {e}")))?;
                }
                "--provider" => options.provider = Some(value.to_owned()),
                "--reps" => {
                    options.reps = value.parse().map_err(|e| Error::Msg(format!("--reps: {e}")))?;
                }
                "--peer" => options.peer = Some(PathBuf::from(value)),
                "--modes" => options.modes = Some(value.split(',').map(str::to_owned).collect()),
                "--svg" => options.svg = Some(PathBuf::from(value)),
                other => return Err(Error::Msg(format!("unknown bench argument `{other}`"))),
            }
        }
        if options.counts.is_empty() || options.counts.contains(&0) || options.reps == 0 {
            return Err(Error::Msg("--concurrent needs counts above zero and --reps 1+".into()));
        }
        Ok(options)
    }
}

// -------------------------------------------------------------------------------------------
// Limits and process figures
// -------------------------------------------------------------------------------------------

/// Raises the soft limit of open files to the hard limit: N streams need N sockets on each
/// side, more than the usual soft limit of 1,024.
pub fn raise_fd_limit() -> Result<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|e| Error::Msg(format!("getrlimit(RLIMIT_NOFILE): {e}")))?;
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
        .map_err(|e| Error::Msg(format!("setrlimit(RLIMIT_NOFILE, {hard}): {e}")))?;
    Ok(hard)
}

/// CPU time of every thread of this process, in ns (threads that ended are not counted:
/// the runtime's workers live for the whole case).
fn process_cpu_ns() -> Result<u64> {
    std::thread::yield_now();
    let tasks = std::fs::read_dir("/proc/self/task")
        .map_err(|e| Error::Msg(format!("/proc/self/task: {e} (the bench needs Linux)")))?;
    let mut total = 0u64;
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        total += stat.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    Ok(total)
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

fn status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|l| {
                l.strip_prefix(field)?.trim().trim_end_matches("kB").trim().parse::<u64>().ok()
            })
        })
        .map_or(0, |kib| kib * 1024)
}

/// The value at quantile `q` of sorted `values` (nearest rank); the default when empty.
fn quantile<T: Copy + Default>(sorted: &[T], q: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted.get(rank - 1).copied().unwrap_or_default()
}

// -------------------------------------------------------------------------------------------
// The paced server
// -------------------------------------------------------------------------------------------

/// A loopback server answering every request in `provider`'s wire format, paced.
pub struct PacedServer {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PacedServer {
    /// Starts the server on its own thread and single-threaded runtime.
    pub fn start(provider: &'static str, call_bytes: usize) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Msg(format!("server runtime: {e}")))?;
        let socket = tokio::net::TcpSocket::new_v4().map_err(|e| Error::Msg(e.to_string()))?;
        let listener = runtime
            .block_on(async {
                socket.bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
                // The kernel caps the backlog at `net.core.somaxconn`.
                socket.listen(65_535)
            })
            .map_err(|e| Error::Msg(format!("cannot listen on loopback: {e}")))?;
        let addr = listener.local_addr().map_err(|e| Error::Msg(e.to_string()))?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                let accept = async {
                    loop {
                        let Ok((socket, _)) = listener.accept().await else { continue };
                        tokio::spawn(async move {
                            // A failed stream shows in the client's report.
                            let _ = tokio::time::timeout(
                                WAIT,
                                answer(socket, provider, addr, call_bytes),
                            )
                            .await;
                        });
                    }
                };
                tokio::select! {
                    () = accept => {}
                    _ = stopped => {}
                }
            });
        });
        Ok(PacedServer { addr, stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for PacedServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Runs the paced server for `provider` until standard input ends, after printing its
/// address (for running one case under a profiler).
pub fn serve_until_stdin_ends(provider: &str) -> Result<()> {
    let entry = PROVIDERS
        .iter()
        .find(|p| p.name == provider)
        .ok_or_else(|| Error::Msg(format!("unknown provider `{provider}`")))?;
    raise_fd_limit()?;
    let server = PacedServer::start(entry.name, CALL_BYTES)?;
    println!("{}", server.addr);
    let mut sink = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink)
        .map_err(|e| Error::Msg(format!("stdin: {e}")))?;
    drop(server);
    Ok(())
}

/// The stream number a request names (`stream 00000042`), if any.
fn salt_of(request: &[u8]) -> Option<u32> {
    request.windows(15).find_map(|w| {
        let digits = w.strip_prefix(b"stream ")?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(digits).ok()?.parse().ok()
    })
}

/// Reads one request and answers it: the turn for a first request, text for one that
/// carries the tool's result.
async fn answer(
    mut socket: tokio::net::TcpStream,
    provider: &'static str,
    addr: SocketAddr,
    call_bytes: usize,
) -> std::io::Result<()> {
    let mut request = Vec::with_capacity(4096);
    let mut buf = [0u8; 8192];
    loop {
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(request.get(..end).unwrap_or_default())
                .to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if request.len() >= end + 4 + length {
                break;
            }
        }
        let n = socket.read(&mut buf).await?;
        if n == 0 || request.len() > MAX_REQUEST {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "bad request"));
        }
        request.extend_from_slice(buf.get(..n).unwrap_or_default());
    }
    let salt = salt_of(&request);
    let second = request.windows(TOOL_RESULT.len()).any(|w| w == TOOL_RESULT.as_bytes());
    let (scenario, size) =
        if second { (Scenario::Text, TURN_TEXT) } else { (Scenario::Turn, call_bytes) };
    let (mut body, _) = wire_salted(provider, scenario, size, addr, salt)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    socket
        .write_all(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: {}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
                body.content_type
            )
            .as_bytes(),
        )
        .await?;
    let mut out = Vec::with_capacity(4096);
    let mut group = 0usize;
    let mut more = true;
    while more {
        tokio::time::sleep(GAP).await;
        let events = GROUPS.get(group % GROUPS.len()).copied().unwrap_or(1);
        group += 1;
        out.clear();
        for _ in 0..events {
            // One step of the body: an event, or a literal part.
            let min = out.len() + 1;
            more = body.fill(&mut out, min);
            if !more {
                break;
            }
        }
        if !out.is_empty() {
            let mut chunk = format!("{:X}\r\n", out.len()).into_bytes();
            chunk.extend_from_slice(&out);
            chunk.extend_from_slice(b"\r\n");
            socket.write_all(&chunk).await?;
        }
    }
    socket.write_all(b"0\r\n\r\n").await?;
    socket.shutdown().await
}

// -------------------------------------------------------------------------------------------
// The client side (a child process)
// -------------------------------------------------------------------------------------------

/// What one stream saw.
#[derive(Debug, Default)]
struct StreamSeen {
    /// From starting the stream to its first text or argument delta.
    first: Option<Duration>,
    events: usize,
    /// Why its content is not what its server sent, if it is not.
    wrong: Option<String>,
}

/// The text and the call's `content` of stream `salt`'s turn, as the server generates them.
#[derive(Debug, Clone)]
struct Expected {
    /// The text after the `stream NNNNNNNN: ` head.
    text_tail: String,
    content: String,
}

impl Expected {
    fn new(call_bytes: usize) -> Result<Self> {
        let read = |call: Option<usize>, target: usize| {
            let mut source = Source::new(call, target).salted(Some(0));
            let mut text = String::new();
            while let Some(piece) = source.next_piece(super::PIECE) {
                text.push_str(&piece);
            }
            text
        };
        let text = read(None, TURN_TEXT);
        let args: Value = serde_json::from_str(&read(Some(0), call_bytes))
            .map_err(|e| Error::Msg(format!("generated arguments: {e}")))?;
        Ok(Expected {
            text_tail: text.get(head(0).len()..).unwrap_or_default().to_owned(),
            content: args.get("content").and_then(Value::as_str).unwrap_or_default().to_owned(),
        })
    }

    fn check_text(&self, salt: u32, text: &str) -> Option<String> {
        let ok = text.strip_prefix(&head(salt)).is_some_and(|tail| tail == self.text_tail);
        (!ok).then(|| format!("stream {salt}: text {:?}...", text.get(..40).unwrap_or(text)))
    }

    fn check_turn(&self, salt: u32, message: &AssistantMessage) -> Option<String> {
        if let Some(error) = &message.error_message {
            return Some(format!("stream {salt}: failed: {error}"));
        }
        if message.stop_reason != StopReason::ToolUse {
            return Some(format!("stream {salt}: stop reason {:?}", message.stop_reason));
        }
        if let Some(wrong) = self.check_text(salt, &message.text()) {
            return Some(wrong);
        }
        let calls: Vec<_> = message.tool_calls().collect();
        let [call] = calls.as_slice() else {
            return Some(format!("stream {salt}: {} calls", calls.len()));
        };
        let path = call.arguments.get("path").and_then(Value::as_str);
        let content = call.arguments.get("content").and_then(Value::as_str);
        if call.name != "write_file"
            || path != Some(&path_of(salt))
            || content != Some(&self.content)
        {
            return Some(format!("stream {salt}: call {} path {path:?}", call.name));
        }
        None
    }
}

fn head(salt: u32) -> String {
    format!("stream {salt:08}: ")
}

fn path_of(salt: u32) -> String {
    format!("src/s{salt:08}/gen_0.rs")
}

fn context_for(salt: u32) -> Context {
    Context {
        system_prompt: None,
        messages: vec![Message::user(format!("Write the files of stream {salt:08}."))],
        tools: vec![write_file_tool()],
    }
}

fn write_file_tool() -> Tool {
    Tool {
        name: "write_file".into(),
        description: "Writes a file".into(),
        parameters: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"]
        }),
    }
}

fn options() -> StreamOptions {
    StreamOptions { api_key: Some(ApiKey::new("bench-key")), ..StreamOptions::default() }
}

/// One provider stream, every event read, the final message checked.
async fn one_stream(
    provider: Arc<dyn Provider>,
    model: Arc<Model>,
    expected: Arc<Expected>,
    salt: u32,
) -> StreamSeen {
    let start = Instant::now();
    // The request is dropped once the stream is made, as the peers' clients take theirs by
    // value: a context kept for the whole stream would count against clawcall's memory.
    let mut stream = provider.stream(&model, &context_for(salt), &options());
    let mut seen = StreamSeen::default();
    let mut last = None;
    while let Some(event) = stream.next().await {
        seen.events += 1;
        match event {
            AssistantEvent::TextDelta { .. } | AssistantEvent::ToolCallDelta { .. }
                if seen.first.is_none() =>
            {
                seen.first = Some(start.elapsed());
            }
            AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. } => {
                last = Some(message);
            }
            _ => {}
        }
    }
    seen.wrong = match last {
        Some(message) => expected.check_turn(salt, &message),
        None => Some(format!("stream {salt}: no terminal event")),
    };
    seen
}

/// One request through the same HTTP client and the provider's framing, nothing parsed.
async fn one_transport(
    transport: llm_http::HttpTransport,
    model: Arc<Model>,
    salt: u32,
) -> StreamSeen {
    let start = Instant::now();
    let result = async {
        let headers = llm_http::header_map("bench", [("content-type", "application/json")])
            .map_err(|e| e.to_string())?;
        let request = Arc::new(llm_http::HttpRequest {
            method: reqwest::Method::POST,
            url: format!("{}/bench", model.base_url),
            headers,
            body: transport_body(salt).into(),
        });
        let config = llm_http::TransportConfig::from_options(&options());
        let map_error: Arc<dyn Fn(llm_http::ErrorResponse) -> llm_core::Error + Send + Sync> =
            Arc::new(|r| llm_core::Error::new(llm_core::ErrorKind::Provider, "bench", r.body));
        let mut chunks = transport
            .send(config, request, "bench".into(), map_error)
            .await
            .map_err(|e| e.to_string())?
            .body;
        let mut framed = FramedCount::new(&model, start);
        while let Some(chunk) = chunks.next().await {
            framed.push(&chunk.map_err(|e| e.to_string())?)?;
        }
        Ok::<_, String>(framed.seen)
    }
    .await;
    transport_seen(result, salt)
}

/// [`one_transport`] over a connection of its own made with hyper's HTTP/1 API (the connection
/// task spawned as hyper-util's pool spawns it), without reqwest's layers or a pool.
async fn one_transport_hyper(model: Arc<Model>, salt: u32) -> StreamSeen {
    use http_body_util::BodyExt as _;
    let start = Instant::now();
    let result = async {
        let authority = model.base_url.trim_start_matches("http://").to_owned();
        let tcp = tokio::net::TcpStream::connect(&authority).await.map_err(|e| e.to_string())?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        let request = hyper::Request::post("/bench")
            .header(hyper::header::HOST, authority)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(http_body_util::Full::new(hyper::body::Bytes::from(transport_body(salt))))
            .map_err(|e| e.to_string())?;
        let mut body = sender.send_request(request).await.map_err(|e| e.to_string())?.into_body();
        let mut framed = FramedCount::new(&model, start);
        while let Some(frame) = body.frame().await {
            if let Ok(chunk) = frame.map_err(|e| e.to_string())?.into_data() {
                framed.push(&chunk)?;
            }
        }
        Ok::<_, String>(framed.seen)
    }
    .await;
    transport_seen(result, salt)
}

/// The transport modes' request body: the salt the server answers for.
fn transport_body(salt: u32) -> String {
    format!(r#"{{"prompt":"stream {salt:08}"}}"#)
}

/// A transport mode's outcome as a stream's.
fn transport_seen(result: std::result::Result<StreamSeen, String>, salt: u32) -> StreamSeen {
    result.unwrap_or_else(|e| StreamSeen {
        wrong: Some(format!("stream {salt}: {e}")),
        ..StreamSeen::default()
    })
}

/// The provider's framing over a transport mode's body, counting frames.
struct FramedCount {
    start: Instant,
    binary: bool,
    sse: llm_core::raw::sse::SseDecoder,
    aws: llm_bedrock::AwsEventStreamFraming,
    sse_out: Vec<llm_core::raw::sse::SseEvent>,
    aws_out: Vec<<llm_bedrock::AwsEventStreamFraming as llm_core::raw::framing::Framing>::Frame>,
    seen: StreamSeen,
}

impl FramedCount {
    fn new(model: &Model, start: Instant) -> Self {
        FramedCount {
            start,
            binary: model.provider == "bedrock",
            sse: llm_core::raw::sse::SseDecoder::new(),
            aws: llm_bedrock::AwsEventStreamFraming::default(),
            sse_out: Vec::new(),
            aws_out: Vec::new(),
            seen: StreamSeen::default(),
        }
    }

    fn push(&mut self, chunk: &[u8]) -> std::result::Result<(), String> {
        let framed = if self.binary {
            self.aws.push(chunk, &mut self.aws_out).map_err(|e| e.to_string())?;
            std::mem::take(&mut self.aws_out).len()
        } else {
            self.sse.push(chunk, &mut self.sse_out).map_err(|e| e.to_string())?;
            std::mem::take(&mut self.sse_out).len()
        };
        if framed > 0 && self.seen.first.is_none() {
            self.seen.first = Some(self.start.elapsed());
        }
        self.seen.events += framed;
        Ok(())
    }
}

/// One agent run of two turns: the first answer calls `write_file`, the second is text.
async fn one_agent_run(agent: Arc<Agent>, expected: Arc<Expected>, salt: u32) -> StreamSeen {
    let start = Instant::now();
    let expected_path = path_of(salt);
    let tool = AgentTool::new(write_file_tool(), move |invocation: agent_core::ToolInvocation| {
        let right = invocation.arguments.get("path").and_then(Value::as_str)
            == Some(expected_path.as_str());
        async move {
            if right {
                Ok(ToolOutput::text(TOOL_RESULT))
            } else {
                Ok(ToolOutput::text("wrong path"))
            }
        }
    });
    let context = AgentContext { system_prompt: None, messages: Vec::new(), tools: vec![tool] };
    let mut run =
        agent.run(context, vec![Message::user(format!("Write the files of stream {salt:08}."))]);
    let mut seen = StreamSeen::default();
    while let Some(event) = run.next().await {
        if seen.first.is_none() && matches!(event, agent_core::AgentEvent::MessageUpdate { .. }) {
            seen.first = Some(start.elapsed());
        }
        seen.events += 1;
    }
    let outcome = run.finish().await;
    let answers: Vec<&AssistantMessage> = outcome
        .messages()
        .iter()
        .filter_map(|m| if let Message::Assistant(a) = m { Some(&**a) } else { None })
        .collect();
    let results = outcome.messages().iter().filter(|m| matches!(m, Message::ToolResult(_))).count();
    seen.wrong = if outcome.reason != EndReason::Completed {
        Some(format!("run {salt}: {:?} {:?}", outcome.reason, outcome.error))
    } else if let [first, second] = answers.as_slice() {
        let tool_ok = outcome.messages().iter().any(|m| {
            matches!(m, Message::ToolResult(r) if r.content.iter().any(|c| {
                matches!(c, llm_core::UserContent::Text(t) if t.text == TOOL_RESULT)
            }))
        });
        expected
            .check_turn(salt, first)
            .or_else(|| expected.check_text(salt, &second.text()))
            .or_else(|| (!tool_ok || results != 1).then(|| format!("run {salt}: tool result")))
    } else {
        Some(format!("run {salt}: {} answers", answers.len()))
    };
    seen
}

/// What a child reports: one line of `key=value` fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// CPU of the whole client process over the N streams, ns.
    pub cpu_ns: u64,
    /// Events seen over all streams.
    pub events: u64,
    /// Streams run.
    pub streams: u64,
    /// Time to the first delta, median and 99th percentile, µs.
    pub ttfe_p50_us: u64,
    /// See `ttfe_p50_us`.
    pub ttfe_p99_us: u64,
    /// Peak resident set above the resident set before the streams, bytes.
    pub peak_bytes: u64,
    /// Open file descriptors before the streams and after they ended.
    pub fds_before: u64,
    /// See `fds_before`.
    pub fds_after: u64,
    /// Tokio tasks alive before the streams and after they ended (0 when the client's
    /// runtime does not say).
    pub tasks_before: u64,
    /// See `tasks_before`.
    pub tasks_after: u64,
    /// Wall time of the N streams, µs.
    pub wall_us: u64,
}

impl Report {
    /// The report as one line.
    pub fn line(&self) -> String {
        format!(
            "cpu_ns={} events={} streams={} ttfe_p50_us={} ttfe_p99_us={} peak_bytes={} fds_before={} fds_after={} tasks_before={} tasks_after={} wall_us={}",
            self.cpu_ns,
            self.events,
            self.streams,
            self.ttfe_p50_us,
            self.ttfe_p99_us,
            self.peak_bytes,
            self.fds_before,
            self.fds_after,
            self.tasks_before,
            self.tasks_after,
            self.wall_us
        )
    }

    /// Reads a report line (fields in any order; missing ones are zero).
    pub fn parse(line: &str) -> Result<Self> {
        let fields: BTreeMap<&str, u64> = line
            .split_whitespace()
            .filter_map(|f| {
                let (k, v) = f.split_once('=')?;
                Some((k, v.parse().ok()?))
            })
            .collect();
        let get = |k: &str| fields.get(k).copied().unwrap_or(0);
        if get("streams") == 0 {
            return Err(Error::Msg(format!("not a report line: `{line}`")));
        }
        Ok(Report {
            cpu_ns: get("cpu_ns"),
            events: get("events"),
            streams: get("streams"),
            ttfe_p50_us: get("ttfe_p50_us"),
            ttfe_p99_us: get("ttfe_p99_us"),
            peak_bytes: get("peak_bytes"),
            fds_before: get("fds_before"),
            fds_after: get("fds_after"),
            tasks_before: get("tasks_before"),
            tasks_after: get("tasks_after"),
            wall_us: get("wall_us"),
        })
    }
}

/// How a case's streams are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// HTTP and framing only.
    Transport,
    /// HTTP and framing only, over hyper's connection API (no reqwest, no pool).
    TransportHyper,
    /// The provider's stream.
    Stream,
    /// Whole agent runs of two turns.
    Agent,
}

impl Mode {
    const ALL: [Mode; 4] = [Mode::Transport, Mode::TransportHyper, Mode::Stream, Mode::Agent];

    fn name(self) -> &'static str {
        match self {
            Mode::Transport => "transport",
            Mode::TransportHyper => "transport-hyper",
            Mode::Stream => "stream",
            Mode::Agent => "agent",
        }
    }

    fn parse(name: &str) -> Result<Self> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| Error::Msg(format!("unknown concurrent mode `{name}`")))
    }
}

/// Runs `n` streams of `provider` at once against `addr` on `runtime`, salts from
/// `first_salt` on; returns what each saw.
/// What a case's streams share, made once before its warm-up (as a program keeps one
/// client): the provider, the plain HTTP client of the transport mode, the agent.
struct Shared {
    provider: Arc<dyn Provider>,
    transport: llm_http::HttpTransport,
    model: Arc<Model>,
    expected: Arc<Expected>,
    agent: Arc<Agent>,
}

impl Shared {
    fn new(name: &str, addr: SocketAddr, call_bytes: usize) -> Result<Self> {
        let entry = PROVIDERS
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| Error::Msg(format!("unknown provider `{name}`")))?;
        let (_, mut model) = wire_salted(name, Scenario::Turn, call_bytes, addr, None)?;
        model.base_url = format!("http://{addr}");
        let model = Arc::new(model);
        let provider = (entry.make)();
        let agent = Arc::new(Agent::new({
            let mut config = AgentConfig::new((*model).clone(), provider.clone());
            config.options = options();
            // A server that answered wrongly must not keep the run calling tools.
            config.max_turns = Some(2);
            config
        }));
        Ok(Shared {
            provider,
            transport: llm_http::HttpTransport::new(),
            model,
            expected: Arc::new(Expected::new(call_bytes)?),
            agent,
        })
    }
}

fn run_streams(
    runtime: &tokio::runtime::Runtime,
    shared: &Shared,
    mode: Mode,
    n: usize,
    first_salt: u32,
) -> Result<Vec<StreamSeen>> {
    let Shared { provider, transport, model, expected, agent } = shared;
    runtime.block_on(async {
        let mut handles = Vec::with_capacity(n);
        for k in 0..n {
            let salt = first_salt + u32::try_from(k).unwrap_or(u32::MAX - first_salt);
            handles.push(match mode {
                Mode::Transport => {
                    tokio::spawn(one_transport(transport.clone(), model.clone(), salt))
                }
                Mode::TransportHyper => tokio::spawn(one_transport_hyper(model.clone(), salt)),
                Mode::Stream => tokio::spawn(one_stream(
                    provider.clone(),
                    model.clone(),
                    expected.clone(),
                    salt,
                )),
                Mode::Agent => tokio::spawn(one_agent_run(agent.clone(), expected.clone(), salt)),
            });
        }
        let mut seen = Vec::with_capacity(n);
        for handle in handles {
            seen.push(
                tokio::time::timeout(WAIT, handle)
                    .await
                    .map_err(|_| Error::Msg("a stream took too long".into()))?
                    .map_err(|e| Error::Msg(format!("a stream's task failed: {e}")))?,
            );
        }
        Ok(seen)
    })
}

/// Folds what the streams saw into a report; fails on any stream whose content is wrong.
fn summarize(seen: &[StreamSeen], mode: Mode) -> Result<(u64, Vec<Duration>)> {
    if let Some(wrong) = seen.iter().find_map(|s| s.wrong.clone()) {
        let count = seen.iter().filter(|s| s.wrong.is_some()).count();
        return Err(Error::Msg(format!("{count} of {} streams wrong, first: {wrong}", seen.len())));
    }
    let mut firsts: Vec<Duration> = seen.iter().filter_map(|s| s.first).collect();
    if firsts.len() != seen.len() && mode != Mode::Agent {
        return Err(Error::Msg("a stream saw no delta".into()));
    }
    firsts.sort_unstable();
    Ok((seen.iter().map(|s| s.events as u64).sum(), firsts))
}

/// `xtask bench-concurrent-case PROVIDER MODE N ADDR CALL_BYTES`: one measured case in this
/// process; prints its report line.
pub fn run_case(args: &[String]) -> Result<()> {
    let [name, mode, n, addr, call_bytes] = args else {
        return Err(Error::Msg(
            "bench-concurrent-case PROVIDER transport|stream|agent N ADDR CALL_BYTES".into(),
        ));
    };
    let mode = Mode::parse(mode)?;
    let n: usize = n.parse().map_err(|e| Error::Msg(format!("N: {e}")))?;
    let addr: SocketAddr = addr.parse().map_err(|e| Error::Msg(format!("ADDR: {e}")))?;
    let call_bytes: usize =
        call_bytes.parse().map_err(|e| Error::Msg(format!("CALL_BYTES: {e}")))?;
    raise_fd_limit()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::Msg(format!("tokio runtime: {e}")))?;
    let report = measure_case(&runtime, name, mode, n, addr, call_bytes)?;
    println!("{}", report.line());
    Ok(())
}

fn measure_case(
    runtime: &tokio::runtime::Runtime,
    name: &str,
    mode: Mode,
    n: usize,
    addr: SocketAddr,
    call_bytes: usize,
) -> Result<Report> {
    // Each case makes its own clients, once, before its warm-up (as a program keeps one
    // client; a client holds no socket before its first request): building them is not
    // streaming, and a new client reads the platform's root certificates.
    let tasks = || runtime.metrics().num_alive_tasks() as u64;
    let shared = Shared::new(name, addr, call_bytes)?;
    let fds_before = open_fds() as u64;
    let tasks_before = tasks();
    let warm = run_streams(runtime, &shared, mode, WARM_UP, 90_000_000)?;
    summarize(&warm, mode)?;
    drop(warm);
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let base = status_bytes("VmRSS:");
    let cpu_start = process_cpu_ns()?;
    let start = Instant::now();
    let seen = run_streams(runtime, &shared, mode, n, 0)?;
    let wall = start.elapsed();
    let cpu_ns = process_cpu_ns()?.saturating_sub(cpu_start);
    let peak_bytes = status_bytes("VmHWM:").saturating_sub(base);
    let (events, firsts) = summarize(&seen, mode)?;
    drop(seen);
    // Sockets close and tasks end shortly after their streams: wait for them, bounded.
    let settle = Instant::now() + Duration::from_secs(5);
    while (open_fds() as u64 > fds_before || tasks() > tasks_before) && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(Report {
        cpu_ns,
        events,
        streams: n as u64,
        ttfe_p50_us: quantile(&firsts, 0.5).as_micros() as u64,
        ttfe_p99_us: quantile(&firsts, 0.99).as_micros() as u64,
        peak_bytes,
        fds_before,
        fds_after: open_fds() as u64,
        tasks_before,
        tasks_after: tasks(),
        wall_us: wall.as_micros() as u64,
    })
}

// -------------------------------------------------------------------------------------------
// The table
// -------------------------------------------------------------------------------------------

/// The peer formats: our provider name and the peer program's format name.
const PEER_FORMATS: &[(&str, &str)] =
    &[("openai-completions", "chat"), ("anthropic", "anthropic"), ("google", "gemini")];

fn run_child(program: &std::path::Path, args: &[String]) -> Result<Report> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| Error::Msg(format!("cannot run {}: {e}", program.display())))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(Error::Msg(format!(
            "{} {}: {}",
            program.display(),
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Report::parse(stdout.lines().last().unwrap_or_default())
}

/// The median report by CPU of `reps` runs.
fn median(mut reports: Vec<Report>) -> Option<Report> {
    reports.sort_by_key(|r| r.cpu_ns);
    let mid = reports.len() / 2;
    reports.into_iter().nth(mid)
}

/// One row of the table.
#[derive(Debug)]
struct Row {
    n: usize,
    provider: &'static str,
    client: String,
    report: Result<Report>,
    /// The CPU of each run, in the order of the rounds (empty if a run failed).
    rounds: Vec<u64>,
}

fn render(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Concurrent streams: CPU of the whole client process per stream and per event (median of the reps), time to the first delta, peak RSS per stream in flight, fds and tokio tasks before -> after."
    );
    let _ = writeln!(
        out,
        "| N | provider | client | CPU per stream | CPU per event | events per stream | first delta p50 / p99 | peak RSS per stream | fds | tasks | wall |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        match &row.report {
            Ok(r) => {
                let streams = r.streams.max(1) as f64;
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {:.2} ms | {:.1} µs | {:.0} | {:.1} / {:.1} ms | {:.1} KiB | {} -> {} | {} -> {} | {:.2} s |",
                    row.n,
                    row.provider,
                    row.client,
                    r.cpu_ns as f64 / 1e6 / streams,
                    r.cpu_ns as f64 / 1e3 / r.events.max(1) as f64,
                    r.events as f64 / streams,
                    r.ttfe_p50_us as f64 / 1e3,
                    r.ttfe_p99_us as f64 / 1e3,
                    r.peak_bytes as f64 / 1024.0 / streams,
                    r.fds_before,
                    r.fds_after,
                    r.tasks_before,
                    r.tasks_after,
                    r.wall_us as f64 / 1e6,
                );
            }
            Err(e) => {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | failed: {e} |",
                    row.n, row.provider, row.client
                );
            }
        }
    }
    for line in peer_ratios(rows) {
        let _ = writeln!(out, "{line}");
    }
    out
}

/// Per N and provider, the clawcall stream's CPU per stream over the best peer's: the ratio
/// of the medians, and, with several rounds, the median and quartiles of the rounds' own
/// ratios (the two clients of a round ran one after the other, so a drift of the machine
/// weighs on both; the steadier figure).
fn peer_ratios(rows: &[Row]) -> Vec<String> {
    let per_stream =
        |r: &Row| r.report.as_ref().ok().map(|r| r.cpu_ns as f64 / r.streams.max(1) as f64);
    let mut lines = Vec::new();
    for row in rows.iter().filter(|r| r.client == "clawcall stream") {
        let Some(ours) = per_stream(row) else { continue };
        let best = rows
            .iter()
            .filter(|r| {
                r.n == row.n && r.provider == row.provider && !r.client.starts_with("clawcall")
            })
            .filter_map(|r| Some((per_stream(r)?, r)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((theirs, peer)) = best {
            let mut line = format!(
                "N = {}, {}: clawcall stream / best peer ({}) = {:.2}",
                row.n,
                row.provider,
                peer.client,
                ours / theirs
            );
            if row.rounds.len() > 1 && row.rounds.len() == peer.rounds.len() {
                let mut ratios: Vec<f64> = row
                    .rounds
                    .iter()
                    .zip(&peer.rounds)
                    .map(|(&a, &b)| a as f64 / b.max(1) as f64)
                    .collect();
                ratios.sort_by(f64::total_cmp);
                line.push_str(&format!(
                    "; per round {:.2} (quartiles {:.2}-{:.2} of {})",
                    quantile(&ratios, 0.5),
                    quantile(&ratios, 0.25),
                    quantile(&ratios, 0.75),
                    ratios.len()
                ));
            }
            lines.push(line);
        }
    }
    lines
}

/// `cargo xtask bench --concurrent ...`: prints the table (see the module docs).
pub fn run(options: &Options) -> Result<String> {
    raise_fd_limit()?;
    let exe = std::env::current_exe().map_err(|e| Error::Msg(format!("current_exe: {e}")))?;
    let wanted = |mode: &str| options.modes.as_ref().is_none_or(|m| m.iter().any(|x| x == mode));
    let mut rows = Vec::new();
    for &n in &options.counts {
        for entry in PROVIDERS {
            if options.provider.as_deref().is_some_and(|p| p != entry.name) {
                continue;
            }
            let server = PacedServer::start(entry.name, CALL_BYTES)?;
            let addr = server.addr.to_string();
            let mut clients: Vec<(String, PathBuf, Vec<String>)> = Vec::new();
            for mode in Mode::ALL {
                if wanted(mode.name()) {
                    let args = [
                        "bench-concurrent-case",
                        entry.name,
                        mode.name(),
                        &n.to_string(),
                        &addr,
                        &CALL_BYTES.to_string(),
                    ];
                    clients.push((
                        format!("clawcall {}", mode.name()),
                        exe.clone(),
                        args.iter().map(|s| (*s).to_owned()).collect(),
                    ));
                }
            }
            if let (Some(peer), Some((_, format))) =
                (&options.peer, PEER_FORMATS.iter().find(|(p, _)| *p == entry.name))
            {
                for peer_name in ["async-openai", "genai", "rig"] {
                    if !wanted(&format!("peer:{peer_name}")) && options.modes.is_some() {
                        continue;
                    }
                    if peer_name == "async-openai" && *format != "chat" {
                        continue;
                    }
                    let args = [peer_name, format, &n.to_string(), &addr, &CALL_BYTES.to_string()];
                    clients.push((
                        peer_name.to_owned(),
                        peer.clone(),
                        args.iter().map(|s| (*s).to_owned()).collect(),
                    ));
                }
            }
            // Reps go round the clients (one run of each, then the next round), so a drift of
            // the machine during a cell weighs on every client alike.
            let mut runs: Vec<Result<Vec<Report>>> =
                clients.iter().map(|_| Ok(Vec::new())).collect();
            for _ in 0..options.reps {
                for ((_, program, args), reports) in clients.iter().zip(runs.iter_mut()) {
                    if let Ok(done) = reports {
                        match run_child(program, args) {
                            Ok(report) => done.push(report),
                            Err(e) => *reports = Err(e),
                        }
                    }
                }
            }
            for ((client, _, _), reports) in clients.into_iter().zip(runs) {
                let rounds = reports
                    .as_ref()
                    .map(|r| r.iter().map(|r| r.cpu_ns).collect())
                    .unwrap_or_default();
                let report =
                    reports.and_then(|r| median(r).ok_or_else(|| Error::Msg("no run".into())));
                match &report {
                    Ok(r) => eprintln!(
                        "{n} {} {client}: {:.2} ms CPU per stream, first delta p50 {:.1} ms p99 {:.1} ms, {:.1} KiB per stream",
                        entry.name,
                        r.cpu_ns as f64 / 1e6 / r.streams.max(1) as f64,
                        r.ttfe_p50_us as f64 / 1e3,
                        r.ttfe_p99_us as f64 / 1e3,
                        r.peak_bytes as f64 / 1024.0 / r.streams.max(1) as f64
                    ),
                    Err(e) => eprintln!("{n} {} {client}: {e}", entry.name),
                }
                rows.push(Row { n, provider: entry.name, client, report, rounds });
            }
            drop(server);
        }
    }
    if let Some(dir) = &options.svg {
        for path in super::charts::write_all(dir, &charts(&rows))? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(render(&rows))
}

/// The table as charts: CPU and peak RSS per stream against the streams at once, one series
/// per provider and client.
fn charts(rows: &[Row]) -> Vec<(&'static str, super::charts::Chart)> {
    let mut cpu: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut rss: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for row in rows {
        let Ok(r) = &row.report else { continue };
        let name = format!("{} {}", row.provider, row.client);
        let streams = r.streams.max(1) as f64;
        for (series, y) in [
            (&mut cpu, r.cpu_ns as f64 / 1e6 / streams),
            (&mut rss, r.peak_bytes as f64 / 1024.0 / streams),
        ] {
            match series.iter_mut().find(|(n, _)| *n == name) {
                Some((_, points)) => points.push((row.n as f64, y)),
                None => series.push((name.clone(), vec![(row.n as f64, y)])),
            }
        }
    }
    let chart = |title: &str, y_label: &str, series| super::charts::Chart {
        title: title.to_owned(),
        x_label: "streams at once".to_owned(),
        y_label: y_label.to_owned(),
        x_log: true,
        series,
    };
    vec![
        ("cpu-per-stream.svg", chart("CPU of the whole process per stream", "ms", cpu)),
        ("rss-per-stream.svg", chart("Peak RSS per stream in flight", "KiB", rss)),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn a_request_names_its_stream() {
        assert_eq!(salt_of(br#"{"content":"Write the files of stream 00000042."}"#), Some(42));
        assert_eq!(salt_of(b"no number here"), None);
        assert_eq!(salt_of(b"stream 12"), None);
        assert_eq!(salt_of(b"POST /converse-stream HTTP/1.1\r\n\r\nstream 00000007"), Some(7));
    }

    #[test]
    fn a_report_reads_back_what_it_wrote() {
        let report = Report {
            cpu_ns: 1,
            events: 2,
            streams: 3,
            ttfe_p50_us: 4,
            ttfe_p99_us: 5,
            peak_bytes: 6,
            fds_before: 7,
            fds_after: 8,
            tasks_before: 9,
            tasks_after: 10,
            wall_us: 11,
        };
        assert_eq!(Report::parse(&report.line()).unwrap(), report);
        assert!(Report::parse("garbage").is_err());
    }

    #[test]
    fn the_ratio_is_to_the_cheapest_peer_at_the_same_n() {
        let row = |n, client: &str, cpu_ns| Row {
            rounds: Vec::new(),
            n,
            provider: "openai-completions",
            client: client.to_owned(),
            report: Ok(Report {
                cpu_ns,
                events: 1,
                streams: 10,
                ttfe_p50_us: 0,
                ttfe_p99_us: 0,
                peak_bytes: 0,
                fds_before: 0,
                fds_after: 0,
                tasks_before: 0,
                tasks_after: 0,
                wall_us: 0,
            }),
        };
        let rows = [
            row(100, "clawcall transport", 10),
            row(100, "clawcall stream", 40),
            row(100, "async-openai", 50),
            row(100, "genai", 80),
            row(1000, "clawcall stream", 90),
            row(1000, "genai", 60),
            Row {
                n: 1000,
                provider: "openai-completions",
                client: "async-openai".into(),
                report: Err(Error::Msg("failed".into())),
                rounds: Vec::new(),
            },
        ];
        assert_eq!(
            peer_ratios(&rows),
            [
                "N = 100, openai-completions: clawcall stream / best peer (async-openai) = 0.80",
                "N = 1000, openai-completions: clawcall stream / best peer (genai) = 1.50",
            ]
        );
        // With rounds: the rounds' own ratios, round by round (here 0.5, 1.0, 0.9, 0.8 and
        // 2.0, whose median is 0.9 while the medians' ratio is 40 / 50).
        let with_rounds = |client: &str, cpu_ns, rounds: &[u64]| Row {
            rounds: rounds.to_vec(),
            ..row(100, client, cpu_ns)
        };
        let rows = [
            with_rounds("clawcall stream", 40, &[10, 40, 45, 40, 200]),
            with_rounds("async-openai", 50, &[20, 40, 50, 50, 100]),
        ];
        assert_eq!(
            peer_ratios(&rows),
            [
                "N = 100, openai-completions: clawcall stream / best peer (async-openai) = 0.80; per round 0.90 (quartiles 0.80-1.00 of 5)"
            ]
        );
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let values: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(quantile(&values, 0.5), Duration::from_millis(50));
        assert_eq!(quantile(&values, 0.99), Duration::from_millis(99));
        assert_eq!(quantile::<Duration>(&[], 0.5), Duration::ZERO);
    }

    /// Many streams at once through every provider and an agent run each: every stream's
    /// text and call are exactly the ones its server generated for it (its number in the
    /// text and path, the whole content compared), and sockets and tasks go back to where
    /// they were.
    #[test]
    fn many_concurrent_streams_each_get_their_own_content() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        // Other tests of this process open sockets at the same time, so the process's fd
        // count says nothing here: the kernel's table of the server's connections does.
        for entry in PROVIDERS {
            let server = PacedServer::start(entry.name, CALL_BYTES).unwrap();
            // The table is read right: an open connection shows in it.
            let probe = std::net::TcpStream::connect(server.addr).unwrap();
            assert!(open_connections(server.addr.port()) >= 1);
            drop(probe);
            for (mode, n) in [
                (Mode::Stream, 200),
                (Mode::Agent, 50),
                (Mode::Transport, 50),
                (Mode::TransportHyper, 50),
            ] {
                let report = measure_case(&runtime, entry.name, mode, n, server.addr, CALL_BYTES)
                    .unwrap_or_else(|e| panic!("{} {}: {e}", entry.name, mode.name()));
                assert_eq!(report.streams, n as u64);
                assert!(report.events >= 3 * n as u64, "{} {}", entry.name, mode.name());
                assert_eq!(report.tasks_after, report.tasks_before, "{}", entry.name);
                let settle = Instant::now() + Duration::from_secs(5);
                while open_connections(server.addr.port()) > 0 && Instant::now() < settle {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let open = open_connections(server.addr.port());
                assert_eq!(open, 0, "{} {}: connections left open", entry.name, mode.name());
            }
        }
    }

    /// Connections from or to loopback `port` that are still open on either side (TIME_WAIT
    /// holds no socket of either process; the listener is not a connection).
    fn open_connections(port: u16) -> usize {
        let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
        let port = format!(":{port:04X}");
        table
            .lines()
            .skip(1)
            .filter(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let ends_here = fields[1].ends_with(&port) || fields[2].ends_with(&port);
                ends_here && fields[3] != "06" && fields[3] != "0A"
            })
            .count()
    }

    /// The check itself: a stream that got another stream's text, or a call with another
    /// stream's path, is caught.
    #[test]
    fn the_check_catches_mixed_streams() {
        let expected = Expected::new(CALL_BYTES).unwrap();
        let tail = expected.text_tail.clone();
        assert!(expected.check_text(7, &format!("{}{tail}", head(7))).is_none());
        assert!(expected.check_text(7, &format!("{}{tail}", head(8))).is_some());
        assert!(expected.check_text(7, &format!("{}{tail}x", head(7))).is_some());
    }
}
