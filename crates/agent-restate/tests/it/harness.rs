//! A real Restate server on loopback, worker processes, a loopback
//! OpenAI-compatible provider and a TCP load balancer for the tests.

use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

pub(crate) type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The workspace root (two levels above this crate).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The installed server binary, `None` (with a message) when npm is absent; a
/// failure when npm is present but `.ci/setup-restate` was not run.
pub(crate) fn restate_binary() -> Option<PathBuf> {
    let npm =
        Command::new("npm").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !npm.is_ok_and(|s| s.success()) {
        eprintln!(
            "SKIPPED: npm is not installed, so the Restate server cannot be installed; these tests need it"
        );
        return None;
    }
    let scope = workspace_root().join(".restate/node_modules/@restatedev");
    let found = std::fs::read_dir(&scope).ok().and_then(|entries| {
        entries
            .filter_map(Result::ok)
            .map(|e| e.path().join("bin/restate-server"))
            .find(|p| p.is_file())
    });
    match found {
        Some(path) => Some(path),
        None => panic!(
            "the Restate server is not installed in {}: run .ci/setup-restate (npm is present)",
            scope.display()
        ),
    }
}

pub(crate) fn free_port() -> TestResult<u16> {
    Ok(StdListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A unique scratch directory, removed on drop.
pub(crate) struct Scratch(pub PathBuf);

impl Scratch {
    pub(crate) fn new(tag: &str) -> TestResult<Self> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "agent-restate-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process killed on drop.
pub(crate) struct Proc(pub Child);

impl Proc {
    /// SIGKILL, then reap.
    pub(crate) fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub(crate) struct RestateServer {
    pub(crate) ingress: String,
    pub(crate) admin: String,
    proc: Proc,
    binary: PathBuf,
    ports: (u16, u16, u16),
    env: Vec<(String, String)>,
    dir: Scratch,
}

impl RestateServer {
    pub(crate) async fn start(binary: &Path) -> TestResult<Self> {
        Self::start_with(binary, &[]).await
    }

    /// A server with more configuration (`RESTATE_*` variables).
    pub(crate) async fn start_with(binary: &Path, env: &[(&str, String)]) -> TestResult<Self> {
        let dir = Scratch::new("server")?;
        let ports = (free_port()?, free_port()?, free_port()?);
        let env: Vec<(String, String)> =
            env.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
        let child = Self::spawn(binary, &dir.0, ports, &env)?;
        let server = RestateServer {
            ingress: format!("http://127.0.0.1:{}", ports.0),
            admin: format!("http://127.0.0.1:{}", ports.1),
            proc: Proc(child),
            binary: binary.to_owned(),
            ports,
            env,
            dir,
        };
        server.wait_healthy().await?;
        Ok(server)
    }

    /// SIGKILLs the server and starts it again on the same data and ports.
    pub(crate) async fn restart(&mut self) -> TestResult {
        self.proc.kill();
        self.proc = Proc(Self::spawn(&self.binary, &self.dir.0, self.ports, &self.env)?);
        self.wait_healthy().await
    }

    fn spawn(
        binary: &Path,
        dir: &Path,
        (ingress, admin, fabric): (u16, u16, u16),
        env: &[(String, String)],
    ) -> TestResult<Child> {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(dir.join("server.log"))?;
        let child = Command::new(binary)
            .arg("--no-logo")
            .env("RESTATE_BASE_DIR", dir.join("data"))
            .env("RESTATE_NODE_NAME", "test-node")
            .env("RESTATE_LISTEN_MODE", "tcp")
            .env("RESTATE_BIND_ADDRESS", format!("127.0.0.1:{fabric}"))
            .env("RESTATE_ADVERTISED_ADDRESS", format!("http://127.0.0.1:{fabric}"))
            .env("RESTATE_ADMIN__BIND_ADDRESS", format!("127.0.0.1:{admin}"))
            .env("RESTATE_INGRESS__BIND_ADDRESS", format!("127.0.0.1:{ingress}"))
            .env("RESTATE_DISABLE_TELEMETRY", "true")
            .env("RESTATE_DEFAULT_NUM_PARTITIONS", "4")
            .env("RESTATE_ROCKSDB_TOTAL_MEMORY_SIZE", "256 MiB")
            // Retry a dead worker quickly (the default backs off to a minute).
            .env("RESTATE_DEFAULT_RETRY_POLICY__INITIAL_INTERVAL", "100ms")
            .env("RESTATE_DEFAULT_RETRY_POLICY__MAX_INTERVAL", "500ms")
            .env("RESTATE_DEFAULT_RETRY_POLICY__MAX_ATTEMPTS", "1000")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        Ok(child)
    }

    async fn wait_healthy(&self) -> TestResult {
        let server = self;
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let admin_ok = http
                .get(format!("{}/health", server.admin))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            let ingress_ok = http
                .get(format!("{}/restate/health", server.ingress))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if admin_ok && ingress_ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("the Restate server did not become healthy within 60 s".into());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Registers the worker deployment at `uri`.
    pub(crate) async fn register(&self, uri: &str) -> TestResult {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let response = http
                .post(format!("{}/deployments", self.admin))
                .json(&json!({ "uri": uri, "force": true }))
                .send()
                .await?;
            if response.status().is_success() {
                return Ok(());
            }
            let body = response.text().await.unwrap_or_default();
            if Instant::now() > deadline {
                return Err(format!("registering {uri} failed: {body}").into());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The rows of an admin SQL query (`sys_journal`, `sys_invocation`, `state`).
    pub(crate) async fn query(&self, http: &reqwest::Client, sql: &str) -> TestResult<Vec<Value>> {
        let response = http
            .post(format!("{}/query", self.admin))
            .header("accept", "application/json")
            .json(&json!({ "query": sql }))
            .send()
            .await?;
        let status = response.status();
        let text = response.text().await?;
        if !status.is_success() {
            return Err(format!("query {sql}: HTTP {status}: {text}").into());
        }
        let rows: Value = serde_json::from_str(&text)?;
        Ok(rows["rows"].as_array().cloned().unwrap_or_default())
    }

    /// Calls `AgentSession/<key>/<handler>` through the ingress and returns the JSON reply.
    pub(crate) async fn call(
        &self,
        http: &reqwest::Client,
        key: &str,
        handler: &str,
        body: &Value,
    ) -> TestResult<Value> {
        self.call_object(http, "AgentSession", key, handler, body).await
    }

    /// Calls `<object>/<key>/<handler>` through the ingress and returns the JSON reply.
    pub(crate) async fn call_object(
        &self,
        http: &reqwest::Client,
        object: &str,
        key: &str,
        handler: &str,
        body: &Value,
    ) -> TestResult<Value> {
        let request = http.post(format!("{}/{object}/{key}/{handler}", self.ingress));
        // A handler without input takes an empty body.
        let request = if body.is_null() { request } else { request.json(body) };
        let response = request.send().await?;
        let status = response.status();
        let text = response.text().await?;
        if !status.is_success() {
            return Err(format!("{handler} on {key}: HTTP {status}: {text}").into());
        }
        if text.is_empty() { Ok(Value::Null) } else { Ok(serde_json::from_str(&text)?) }
    }
}

/// A worker process serving on `addr`.
pub(crate) fn start_worker(
    addr: SocketAddr,
    provider: &str,
    workspace: &Path,
    tool_delay_ms: u64,
) -> TestResult<Proc> {
    start_worker_with(addr, provider, workspace, tool_delay_ms, &[])
}

/// A worker process with more configuration (`CLAW_*` variables).
pub(crate) fn start_worker_with(
    addr: SocketAddr,
    provider: &str,
    workspace: &Path,
    tool_delay_ms: u64,
    extra: &[(&str, String)],
) -> TestResult<Proc> {
    let child = Command::new(env!("CARGO_BIN_EXE_claw-restate-worker"))
        .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
        .env("CLAW_WORKER_ADDR", addr.to_string())
        .env("CLAW_PROVIDER_BASE_URL", provider)
        .env("CLAW_MODEL", "loopback-model")
        .env("CLAW_WORKSPACE", workspace)
        .env("CLAW_TOOL_DELAY_MS", tool_delay_ms.to_string())
        // The loopback provider ignores it; the adapter requires one.
        .env("OPENAI_API_KEY", "loopback-test-key")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    Ok(Proc(child))
}

/// A worker (as [`start_worker_with`]) listening on `addr` and registered with `server`.
pub(crate) async fn registered_worker(
    server: &RestateServer,
    addr: SocketAddr,
    provider: &str,
    workspace: &Path,
    tool_delay_ms: u64,
    extra: &[(&str, String)],
) -> TestResult<Proc> {
    let worker = start_worker_with(addr, provider, workspace, tool_delay_ms, extra)?;
    wait_listening(addr).await?;
    server.register(&format!("http://{addr}")).await?;
    Ok(worker)
}

/// Sends `text` to the session without waiting: the invocation id.
pub(crate) async fn send(
    http: &reqwest::Client,
    ingress: &str,
    session: &str,
    text: &str,
) -> TestResult<String> {
    let sent: Value = http
        .post(format!("{ingress}/AgentSession/{session}/message/send"))
        .json(&json!(text))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(sent["invocationId"].as_str().ok_or("no invocation id")?.to_owned())
}

/// Waits (at most 120 s) for the invocation's end: its HTTP status and body.
pub(crate) async fn attach(
    http: &reqwest::Client,
    ingress: &str,
    id: &str,
) -> TestResult<(reqwest::StatusCode, String)> {
    let attach = http.get(format!("{ingress}/restate/invocation/{id}/attach")).send();
    let finished = tokio::time::timeout(Duration::from_secs(120), attach).await??;
    let status = finished.status();
    Ok((status, finished.text().await?))
}

/// Waits until something accepts connections on `addr`.
pub(crate) async fn wait_listening(addr: SocketAddr) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(addr).await.is_err() {
        if Instant::now() > deadline {
            return Err(format!("nothing listens on {addr} after 30 s").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// A request the loopback provider received.
#[derive(Debug, Clone)]
pub(crate) struct Arrival {
    /// The role of the last message.
    pub(crate) last_role: String,
    /// Messages in the request (system prompt included).
    pub(crate) messages: usize,
}

/// An OpenAI Chat Completions compatible provider on loopback with a fixed policy:
/// * last message `user` with text `markers a,b,...`: call `append_line` for the
///   first marker without a tool result yet, one call per response;
/// * last message `tool` and markers left: the next call; none left: text `done`;
/// * `parallel a,b,...`: one response calling `append_line` for every marker;
///   after their results, text `done`;
/// * `reuse a,b,...`: as `markers`, but every call has the id `call_same`;
/// * `hold <ms>`: one call of the blocking `hold` tool; after its result, `done`;
/// * `slow <n> <ms>`: text `w0 w1 ... w<n-1>` streamed one word a chunk, `ms` apart;
/// * `flaky <n>`: HTTP 503 for the first `n` requests with this text, then the echo;
/// * a request with a `response_format`: the JSON `{"city": "Paris", "celsius": 21.5}`;
/// * any other user text: text `echo: <text>`.
///
/// Every response waits `delay_ms` first; `arrivals` reports each request.
pub(crate) struct LoopbackProvider {
    pub(crate) base_url: String,
    pub(crate) requests: Arc<AtomicU64>,
    pub(crate) delay_ms: Arc<AtomicU64>,
}

#[derive(Clone)]
struct ProviderState {
    requests: Arc<AtomicU64>,
    delay_ms: Arc<AtomicU64>,
    arrivals: mpsc::UnboundedSender<Arrival>,
    /// Requests seen per user text (the `flaky` policy counts them).
    seen: Arc<std::sync::Mutex<std::collections::HashMap<String, u64>>>,
}

impl LoopbackProvider {
    pub(crate) async fn start() -> TestResult<(Self, mpsc::UnboundedReceiver<Arrival>)> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = mpsc::unbounded_channel();
        let state = ProviderState {
            requests: Arc::new(AtomicU64::new(0)),
            delay_ms: Arc::new(AtomicU64::new(0)),
            arrivals: tx,
            seen: Arc::default(),
        };
        let provider = LoopbackProvider {
            base_url: format!("http://{addr}/v1"),
            requests: state.requests.clone(),
            delay_ms: state.delay_ms.clone(),
        };
        let app = Router::new().route("/v1/chat/completions", post(complete)).with_state(state);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok((provider, rx))
    }
}

fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

async fn complete(State(state): State<ProviderState>, body: String) -> axum::response::Response {
    state.requests.fetch_add(1, Ordering::SeqCst);
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last_role = messages.last().and_then(|m| m["role"].as_str()).unwrap_or("").to_owned();
    let _ = state.arrivals.send(Arrival { last_role, messages: messages.len() });
    let delay = state.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let last_user = messages.iter().rposition(|m| m["role"] == "user");
    let user_text = last_user.and_then(|i| messages.get(i)).map(text_of).unwrap_or_default();
    let answered = last_user
        .map_or(0, |i| messages.iter().skip(i + 1).filter(|m| m["role"] == "tool").count());
    let seen = {
        let mut seen = state.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = seen.entry(user_text.clone()).or_insert(0);
        *n += 1;
        *n
    };
    if let Some(n) = user_text.strip_prefix("flaky ").and_then(|n| n.parse::<u64>().ok())
        && seen <= n
    {
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            [("content-type", "application/json")],
            r#"{"error":{"message":"overloaded, try later","type":"server_error"}}"#.to_owned(),
        )
            .into_response();
    }
    if let Some((n, ms)) = user_text.strip_prefix("slow ").and_then(|rest| rest.split_once(' '))
        && let (Ok(n), Ok(ms)) = (n.trim().parse::<u64>(), ms.trim().parse::<u64>())
    {
        return slow_stream(n, ms);
    }
    let markers_of = |list: &str| -> Vec<String> {
        list.split(',').map(str::trim).filter(|m| !m.is_empty()).map(str::to_owned).collect()
    };
    let chunks = if request.get("response_format").is_some() {
        // A request that asks for the final answer in a format: a valid one.
        text_chunks(&json!({"city": "Paris", "celsius": 21.5}).to_string())
    } else if let Some(ms) = user_text.strip_prefix("hold ") {
        if answered == 0 {
            let arguments = json!({ "ms": ms.trim().parse::<u64>().unwrap_or(0) }).to_string();
            vec![
                json!({"id": "chatcmpl-loop", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": "call_hold", "type": "function", "function": {"name": "hold", "arguments": arguments}}]}, "finish_reason": null}]}),
                json!({"id": "chatcmpl-loop", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            ]
        } else {
            text_chunks("done")
        }
    } else if let Some(list) = user_text.strip_prefix("parallel ") {
        if answered == 0 {
            let markers = markers_of(list);
            parallel_call_chunks(messages.len(), &markers)
        } else {
            text_chunks("done")
        }
    } else if let Some(list) = user_text.strip_prefix("reuse ") {
        match markers_of(list).get(answered) {
            Some(marker) => tool_call_chunks("call_same", marker),
            None => text_chunks("done"),
        }
    } else {
        match user_text.strip_prefix("markers ") {
            Some(list) => {
                let markers: Vec<&str> =
                    list.split(',').map(str::trim).filter(|m| !m.is_empty()).collect();
                match markers.get(answered) {
                    Some(marker) => tool_call_chunks(&format!("call_{}", messages.len()), marker),
                    None => text_chunks("done"),
                }
            }
            None => text_chunks(&format!("echo: {user_text}")),
        }
    };
    let mut sse = String::new();
    for chunk in chunks {
        sse.push_str(&format!("data: {chunk}\n\n"));
    }
    sse.push_str("data: [DONE]\n\n");
    (axum::http::StatusCode::OK, [("content-type", "text/event-stream")], sse).into_response()
}

/// `slow <n> <ms>`: text `w0 w1 ... w<n-1>`, one word a chunk, `ms` apart.
fn slow_stream(n: u64, ms: u64) -> axum::response::Response {
    let chunks = futures_util::stream::unfold(0u64, move |i| async move {
        if i > n {
            return None;
        }
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        let data = if i == n {
            let end = json!({"id": "chatcmpl-loop", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
            format!("data: {end}\n\ndata: [DONE]\n\n")
        } else {
            let word = if i == 0 { "w0".to_owned() } else { format!(" w{i}") };
            let chunk = json!({"id": "chatcmpl-loop", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": word}, "finish_reason": null}]});
            format!("data: {chunk}\n\n")
        };
        Some((Ok::<_, std::convert::Infallible>(data), i + 1))
    });
    (
        axum::http::StatusCode::OK,
        [("content-type", "text/event-stream")],
        axum::body::Body::from_stream(chunks),
    )
        .into_response()
}

fn parallel_call_chunks(n: usize, markers: &[String]) -> Vec<Value> {
    let calls: Vec<Value> = markers
        .iter()
        .enumerate()
        .map(|(i, marker)| {
            let arguments = json!({ "file": format!("marker-{marker}"), "line": marker }).to_string();
            json!({"index": i, "id": format!("call_{n}_{i}"), "type": "function", "function": {"name": "append_line", "arguments": arguments}})
        })
        .collect();
    vec![
        json!({"id": "chatcmpl-loop", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "tool_calls": calls}, "finish_reason": null}]}),
        json!({"id": "chatcmpl-loop", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]
}

fn text_chunks(text: &str) -> Vec<Value> {
    vec![
        json!({"id": "chatcmpl-loop", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]}),
        json!({"id": "chatcmpl-loop", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]
}

fn tool_call_chunks(id: &str, marker: &str) -> Vec<Value> {
    let arguments = json!({ "file": format!("marker-{marker}"), "line": marker }).to_string();
    vec![
        json!({"id": "chatcmpl-loop", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": "append_line", "arguments": arguments}}]}, "finish_reason": null}]}),
        json!({"id": "chatcmpl-loop", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]
}

/// A round-robin TCP load balancer in front of `backends`: one deployment URI for
/// N workers, as in production. Counts connections per backend.
pub(crate) struct Balancer {
    pub(crate) addr: SocketAddr,
    pub(crate) connections: Arc<Vec<AtomicUsize>>,
}

impl Balancer {
    pub(crate) async fn start(backends: Vec<SocketAddr>) -> TestResult<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let connections: Arc<Vec<AtomicUsize>> =
            Arc::new(backends.iter().map(|_| AtomicUsize::new(0)).collect());
        let counts = connections.clone();
        tokio::spawn(async move {
            let mut next = 0usize;
            while let Ok((mut inbound, _)) = listener.accept().await {
                let i = next % backends.len();
                next += 1;
                let Some(&backend) = backends.get(i) else { continue };
                if let Some(c) = counts.get(i) {
                    c.fetch_add(1, Ordering::Relaxed);
                }
                tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(backend).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Ok(Balancer { addr, connections })
    }
}
