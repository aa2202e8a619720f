//! One server connection: start, handshake, tool listing, calls, restarts.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use agent_core::{ProgressSink, ToolError, ToolInvocation, ToolOutput};
use llm_core::UserContent;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, Implementation, ProgressNotificationParam, ProgressToken,
    RequestId, ServerResult, Tool as McpTool,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient, RunningService};
use rmcp::{ClientHandler, Peer, ServiceError};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::watch;

use crate::config::{McpServerConfig, McpTransport};
use crate::content::map_call_result;
use crate::error::McpError;

/// Longest line accepted from a stdio server (a longer one ends the connection).
pub const MAX_LINE_BYTES: u64 = 64 * 1024 * 1024;
/// How much of a stdio server's stderr is kept for error messages.
const STDERR_TAIL_BYTES: usize = 2048;

/// Whether a server can be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerStatus {
    /// Connected.
    Up,
    /// Not connected; `restartable` says whether the next call or
    /// [`crate::McpServers::refresh`] starts it again.
    Down {
        /// Why it is down.
        reason: String,
        /// Whether restarts are left.
        restartable: bool,
    },
}

/// State the client handler shares with calls: progress routing and the
/// `tools/list_changed` flag.
#[derive(Default)]
pub(crate) struct Notifications {
    progress: Mutex<HashMap<ProgressToken, ProgressSink>>,
    pub(crate) tools_changed: AtomicBool,
    pub(crate) changed: Arc<tokio::sync::Notify>,
}

/// The rmcp client handler: progress to the running call's sink, list changes to a flag.
#[derive(Clone)]
struct Handler {
    notifications: Arc<Notifications>,
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let sink = self
            .notifications
            .progress
            .lock()
            .ok()
            .and_then(|m| m.get(&params.progress_token).cloned());
        if let Some(sink) = sink {
            sink.update(progress_output(&params));
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notifications.tools_changed.store(true, Ordering::SeqCst);
        self.notifications.changed.notify_one();
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("clawcall", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A progress notification as a tool progress update.
fn progress_output(p: &ProgressNotificationParam) -> ToolOutput {
    let mut text = match p.total {
        Some(total) => format!("{}/{}", p.progress, total),
        None => p.progress.to_string(),
    };
    if let Some(m) = &p.message {
        text.push_str(": ");
        text.push_str(m);
    }
    ToolOutput {
        content: vec![UserContent::text(text)],
        details: Some(json!({ "progress": p.progress, "total": p.total, "message": p.message })),
        terminate: false,
    }
}

/// A live connection.
struct Connection {
    service: RunningService<RoleClient, Handler>,
    /// The last malformed line a stdio server sent (stdio only).
    malformed: watch::Receiver<Option<String>>,
    child: Option<tokio::process::Child>,
    stderr_tail: Arc<Mutex<String>>,
}

impl Connection {
    fn is_alive(&self) -> bool {
        !self.service.peer().is_transport_closed()
    }

    /// Why the connection ended: the exit status and the end of stderr.
    async fn death_reason(&mut self) -> String {
        let mut reason = String::from("the connection closed");
        if let Some(child) = &mut self.child
            && let Ok(Ok(status)) =
                tokio::time::timeout(Duration::from_millis(500), child.wait()).await
        {
            reason = format!("the process exited ({status})");
        }
        let tail = self.stderr_tail.lock().map(|t| last_line(&t)).unwrap_or_default();
        if !tail.is_empty() {
            reason.push_str(&format!("; its last stderr line: {tail}"));
        }
        reason
    }
}

fn last_line(s: &str) -> String {
    s.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_owned()
}

/// One configured server.
pub(crate) struct Server {
    pub(crate) config: McpServerConfig,
    connection: tokio::sync::Mutex<Option<Connection>>,
    status: RwLock<ServerStatus>,
    tools: RwLock<Vec<McpTool>>,
    restarts: AtomicU32,
    pub(crate) notifications: Arc<Notifications>,
}

impl Server {
    pub(crate) fn new(config: McpServerConfig, changed: Arc<tokio::sync::Notify>) -> Self {
        Server {
            config,
            connection: tokio::sync::Mutex::new(None),
            status: RwLock::new(ServerStatus::Down {
                reason: "not started".into(),
                restartable: true,
            }),
            tools: RwLock::new(Vec::new()),
            restarts: AtomicU32::new(0),
            notifications: Arc::new(Notifications { changed, ..Notifications::default() }),
        }
    }

    pub(crate) fn status(&self) -> ServerStatus {
        self.status.read().map(|s| s.clone()).unwrap_or(ServerStatus::Down {
            reason: "status unavailable".into(),
            restartable: false,
        })
    }

    fn set_status(&self, status: ServerStatus) {
        if let Ok(mut s) = self.status.write()
            && *s != status
        {
            *s = status;
            self.notifications.changed.notify_one();
        }
    }

    pub(crate) fn tools(&self) -> Vec<McpTool> {
        self.tools.read().map(|t| t.clone()).unwrap_or_default()
    }

    fn restartable(&self) -> bool {
        self.restarts.load(Ordering::SeqCst) < self.config.max_restarts
    }

    /// The first start (does not count as a restart).
    pub(crate) async fn start(&self) -> Result<(), McpError> {
        let mut slot = self.connection.lock().await;
        self.connect_into(&mut slot).await
    }

    /// Connects, lists the tools and marks the server up; on failure marks it down.
    async fn connect_into(&self, slot: &mut Option<Connection>) -> Result<(), McpError> {
        *slot = None;
        let result = async {
            let connection = tokio::time::timeout(self.config.connect_timeout, self.connect())
                .await
                .map_err(|_| {
                    self.connect_error(format!(
                        "no answer to `initialize` within {:?}",
                        self.config.connect_timeout
                    ))
                })??;
            let tools = self.list_tools(connection.service.peer()).await?;
            Ok::<_, McpError>((connection, tools))
        }
        .await;
        match result {
            Ok((connection, tools)) => {
                let changed = self.tools.read().map(|t| *t != tools).unwrap_or(true);
                if let Ok(mut t) = self.tools.write() {
                    *t = tools;
                }
                *slot = Some(connection);
                self.set_status(ServerStatus::Up);
                if changed {
                    self.notifications.changed.notify_one();
                }
                Ok(())
            }
            Err(e) => {
                self.set_status(ServerStatus::Down {
                    reason: e.to_string(),
                    restartable: self.restartable(),
                });
                Err(e)
            }
        }
    }

    fn connect_error(&self, reason: String) -> McpError {
        McpError::Connect { server: self.config.id.clone(), reason: self.scrub(reason) }
    }

    /// Removes what may be a credential from a message: an HTTP server's URL
    /// query (rmcp's HTTP errors quote the URL), its token and header values.
    fn scrub(&self, mut text: String) -> String {
        if let McpTransport::Http { url, bearer_token, headers } = &self.config.transport {
            if let Some((_, query)) = url.split_once('?')
                && !query.is_empty()
            {
                text = text.replace(query, "[REDACTED]");
            }
            let secrets =
                bearer_token.iter().map(|t| t.expose()).chain(headers.values().map(String::as_str));
            for secret in secrets.filter(|s| !s.is_empty()) {
                text = text.replace(secret, "[REDACTED]");
            }
        }
        text
    }

    async fn connect(&self) -> Result<Connection, McpError> {
        let handler = Handler { notifications: self.notifications.clone() };
        match &self.config.transport {
            McpTransport::Stdio { program, args, env, cwd } => {
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(args)
                    .envs(env)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .kill_on_drop(true);
                if let Some(cwd) = cwd {
                    cmd.current_dir(cwd);
                }
                let mut child = cmd
                    .spawn()
                    .map_err(|e| self.connect_error(format!("cannot run `{program}`: {e}")))?;
                let (Some(stdin), Some(stdout), Some(stderr)) =
                    (child.stdin.take(), child.stdout.take(), child.stderr.take())
                else {
                    return Err(self.connect_error("the child's pipes are missing".into()));
                };
                let stderr_tail = Arc::new(Mutex::new(String::new()));
                tokio::spawn(keep_stderr_tail(self.config.id.clone(), stderr, stderr_tail.clone()));
                let (malformed_tx, malformed) = watch::channel(None);
                let (reader, writer) = tokio::io::duplex(1024 * 1024);
                tokio::spawn(filter_stdout(self.config.id.clone(), stdout, writer, malformed_tx));
                let service = rmcp::serve_client(handler, (reader, stdin)).await;
                match service {
                    Ok(service) => {
                        Ok(Connection { service, malformed, child: Some(child), stderr_tail })
                    }
                    Err(e) => {
                        let mut dead = DeadChild { child, stderr_tail };
                        Err(self.connect_error(format!("{e} ({})", dead.reason().await)))
                    }
                }
            }
            McpTransport::Http { url, bearer_token, headers } => {
                install_crypto_provider();
                let mut config =
                    rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                        url.as_str(),
                    );
                if let Some(token) = bearer_token {
                    config = config.auth_header(token.expose());
                }
                config = config
                    .custom_headers(http_headers(headers).map_err(|e| self.connect_error(e))?);
                // rmcp builds its HTTP client with `expect`: keep a failure there a
                // connect error, not a panic in the caller.
                let transport = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    rmcp::transport::StreamableHttpClientTransport::from_config(config)
                }))
                .map_err(|_| self.connect_error("the HTTP client could not be built".into()))?;
                let service = rmcp::serve_client(handler, transport)
                    .await
                    .map_err(|e| self.connect_error(e.to_string()))?;
                let (_tx, malformed) = watch::channel(None);
                Ok(Connection {
                    service,
                    malformed,
                    child: None,
                    stderr_tail: Arc::new(Mutex::new(String::new())),
                })
            }
        }
    }

    /// Every tool, following `nextCursor`.
    async fn list_tools(&self, peer: &Peer<RoleClient>) -> Result<Vec<McpTool>, McpError> {
        let err = |reason: String| McpError::ListTools {
            server: self.config.id.clone(),
            reason: self.scrub(reason),
        };
        tokio::time::timeout(self.config.connect_timeout, peer.list_all_tools())
            .await
            .map_err(|_| err(format!("no answer within {:?}", self.config.connect_timeout)))?
            .map_err(|e| err(e.to_string()))
    }

    /// Re-lists the tools after `notifications/tools/list_changed`; starts a
    /// down server again when restarts are left. Returns whether the tool
    /// list or the status changed.
    pub(crate) async fn refresh(&self) -> bool {
        let before = (self.status(), self.tools());
        let mut slot = self.connection.lock().await;
        let alive = slot.as_ref().is_some_and(Connection::is_alive);
        if alive {
            if self.notifications.tools_changed.swap(false, Ordering::SeqCst) {
                let listed = match slot.as_ref() {
                    Some(c) => Some(self.list_tools(c.service.peer()).await),
                    None => None,
                };
                match listed {
                    Some(Ok(tools)) => {
                        if let Ok(mut t) = self.tools.write() {
                            *t = tools;
                        }
                    }
                    Some(Err(e)) => tracing::warn!(server = %self.config.id, "{e}"),
                    None => {}
                }
            }
        } else {
            self.note_death(&mut slot).await;
            if self.restartable() {
                self.restarts.fetch_add(1, Ordering::SeqCst);
                if let Err(e) = self.connect_into(&mut slot).await {
                    tracing::warn!(server = %self.config.id, "restart failed: {e}");
                }
            }
        }
        drop(slot);
        before != (self.status(), self.tools())
    }

    /// Marks a dead connection down with its reason (no-op without one).
    async fn note_death(&self, slot: &mut Option<Connection>) {
        if let Some(mut dead) = slot.take() {
            let reason = dead.death_reason().await;
            tracing::warn!(server = %self.config.id, "MCP server stopped: {reason}");
            self.set_status(ServerStatus::Down { reason, restartable: self.restartable() });
        }
    }

    /// A live peer, restarting a dead server when restarts are left.
    async fn peer(&self) -> Result<(Peer<RoleClient>, watch::Receiver<Option<String>>), McpError> {
        let mut slot = self.connection.lock().await;
        if let Some(c) = slot.as_ref()
            && c.is_alive()
        {
            return Ok((c.service.peer().clone(), c.malformed.clone()));
        }
        self.note_death(&mut slot).await;
        if !self.restartable() {
            let reason = match self.status() {
                ServerStatus::Down { reason, .. } => reason,
                ServerStatus::Up => "unknown".into(),
            };
            self.set_status(ServerStatus::Down { reason: reason.clone(), restartable: false });
            return Err(McpError::RestartsExhausted {
                server: self.config.id.clone(),
                max_restarts: self.config.max_restarts,
                reason,
            });
        }
        self.restarts.fetch_add(1, Ordering::SeqCst);
        tracing::info!(server = %self.config.id, "starting MCP server again");
        self.connect_into(&mut slot).await?;
        match slot.as_ref() {
            Some(c) => Ok((c.service.peer().clone(), c.malformed.clone())),
            None => Err(self.connect_error("the connection vanished".into())),
        }
    }

    /// Runs `tools/call`; every failure becomes a [`ToolError`] that says what happened.
    pub(crate) async fn call(
        &self,
        tool_name: &str,
        invocation: ToolInvocation,
    ) -> Result<ToolOutput, ToolError> {
        let id = self.config.id.as_str();
        let (peer, mut malformed) = self.peer().await.map_err(|e| ToolError(e.to_string()))?;
        let arguments = match invocation.arguments {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                return Err(ToolError(format!(
                    "MCP tool `{tool_name}` takes an object of arguments, not {other}"
                )));
            }
        };
        let mut params = CallToolRequestParams::new(tool_name.to_owned());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // The timeout restarts at every progress notification: a slow tool that
        // reports progress is not a hung one.
        let options =
            PeerRequestOptions::with_timeout(self.config.call_timeout).reset_timeout_on_progress();
        // Malformed lines seen before this call belong to earlier traffic.
        malformed.borrow_and_update();
        let handle = match peer.send_request_with_option(request, options).await {
            Ok(h) => h,
            Err(e) => return Err(self.call_failed(tool_name, e).await),
        };
        let mut in_flight = InFlight::new(
            &self.notifications,
            peer.clone(),
            handle.id.clone(),
            handle.progress_token.clone(),
            invocation.progress.clone(),
        );
        let response = handle.await_response();
        tokio::pin!(response);
        let outcome = tokio::select! {
            biased;
            () = invocation.cancel.cancelled() => {
                // `in_flight` sends `notifications/cancelled` when dropped.
                return Err(ToolError(format!("MCP call to `{tool_name}` on `{id}` was cancelled")));
            }
            Ok(()) = malformed.changed() => {
                let line = malformed.borrow().clone().unwrap_or_default();
                return Err(ToolError(format!(
                    "MCP server `{id}` sent a malformed JSON-RPC message while `{tool_name}` was running \
                     (the call was cancelled): {line}"
                )));
            }
            r = &mut response => r,
        };
        // rmcp runs each notification's handler on a task of its own, while the answer goes
        // straight to this call: a progress notification the server sent just before its
        // answer may still be queued. Let queued tasks run before the call (and its progress
        // route) ends, so that update is not lost behind the result.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        in_flight.answered();
        match outcome {
            Ok(ServerResult::CallToolResult(result)) => map_call_result(id, tool_name, result),
            Ok(ServerResult::EmptyResult(_)) => {
                map_call_result(id, tool_name, rmcp::model::CallToolResult::success(Vec::new()))
            }
            Ok(_) => Err(ToolError(format!(
                "MCP server `{id}` answered `{tool_name}` with something other than a tool result \
                 (input requests and tasks are not supported)"
            ))),
            Err(e) => Err(self.call_failed(tool_name, e).await),
        }
    }

    async fn call_failed(&self, tool_name: &str, e: ServiceError) -> ToolError {
        let id = &self.config.id;
        let text = match e {
            ServiceError::Timeout { timeout } => format!(
                "MCP server `{id}` did not answer `{tool_name}` within {timeout:?} \
                 (no result and no progress); the call was cancelled"
            ),
            ServiceError::McpError(data) => format!(
                "MCP server `{id}` rejected `{tool_name}`: {} (JSON-RPC error {})",
                data.message, data.code.0
            ),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                // The reply channel can close a moment before rmcp's loop lets
                // go of the transport: wait briefly to see the process end.
                for _ in 0..50 {
                    let alive =
                        self.connection.lock().await.as_ref().is_some_and(Connection::is_alive);
                    if !alive {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let mut slot = self.connection.lock().await;
                let dead = slot.as_ref().is_some_and(|c| !c.is_alive());
                if dead {
                    self.note_death(&mut slot).await;
                }
                let reason = match self.status() {
                    ServerStatus::Down { reason, .. } => reason,
                    ServerStatus::Up => "the connection closed".into(),
                };
                let next = if self.restartable() {
                    "it will be started again on the next call"
                } else {
                    "its restarts are used up"
                };
                format!("MCP server `{id}` stopped during `{tool_name}` ({reason}); {next}")
            }
            other => format!("MCP server `{id}` failed `{tool_name}`: {other}"),
        };
        ToolError(self.scrub(text))
    }

    /// Closes the connection (ends a stdio server's process).
    pub(crate) async fn shutdown(&self) {
        let mut slot = self.connection.lock().await;
        // A shut-down server is not started again by a late call or refresh.
        self.restarts.fetch_max(self.config.max_restarts, Ordering::SeqCst);
        if let Some(mut c) = slot.take() {
            let _ = c.service.close_with_timeout(Duration::from_secs(2)).await;
            if let Some(child) = &mut c.child {
                let _ = child.start_kill();
            }
        }
        self.set_status(ServerStatus::Down { reason: "shut down".into(), restartable: false });
    }
}

/// A child whose handshake failed, kept to explain why.
struct DeadChild {
    child: tokio::process::Child,
    stderr_tail: Arc<Mutex<String>>,
}

impl DeadChild {
    async fn reason(&mut self) -> String {
        let status = match tokio::time::timeout(Duration::from_millis(500), self.child.wait()).await
        {
            Ok(Ok(status)) => format!("the process exited ({status})"),
            _ => {
                let _ = self.child.start_kill();
                "the process is still running".into()
            }
        };
        let tail = self.stderr_tail.lock().map(|t| last_line(&t)).unwrap_or_default();
        if tail.is_empty() { status } else { format!("{status}; its last stderr line: {tail}") }
    }
}

/// A `tools/call` in flight: routes its progress, and tells the server when
/// the caller stops waiting (cancelled run, dropped future).
struct InFlight<'a> {
    notifications: &'a Notifications,
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
    token: ProgressToken,
}

impl<'a> InFlight<'a> {
    fn new(
        notifications: &'a Notifications,
        peer: Peer<RoleClient>,
        id: RequestId,
        token: ProgressToken,
        sink: ProgressSink,
    ) -> Self {
        if let Ok(mut m) = notifications.progress.lock() {
            m.insert(token.clone(), sink);
        }
        InFlight { notifications, peer, id: Some(id), token }
    }

    /// The request was answered (or timed out, which rmcp already cancelled).
    fn answered(&mut self) {
        self.id = None;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Ok(mut m) = self.notifications.progress.lock() {
            m.remove(&self.token);
        }
        let Some(id) = self.id.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            let param = CancelledNotificationParam::new(
                Some(id),
                Some("cancelled by the agent".to_owned()),
            );
            let _ = peer.notify_cancelled(param).await;
        });
    }
}

/// Forwards a stdio server's well-formed JSON-RPC lines to rmcp and reports the
/// others (rmcp would skip them silently, leaving the call to time out).
async fn filter_stdout(
    server: String,
    stdout: tokio::process::ChildStdout,
    mut to_rmcp: tokio::io::DuplexStream,
    malformed: watch::Sender<Option<String>>,
) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader).take(MAX_LINE_BYTES + 1).read_until(b'\n', &mut line).await;
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.len() as u64 > MAX_LINE_BYTES {
            malformed.send_replace(Some(format!("a line longer than {MAX_LINE_BYTES} bytes")));
            break;
        }
        let text = String::from_utf8_lossy(&line);
        let trimmed = text.trim();
        if trimmed.is_empty() {
            continue;
        }
        if is_json_rpc(trimmed) {
            if to_rmcp.write_all(trimmed.as_bytes()).await.is_err()
                || to_rmcp.write_all(b"\n").await.is_err()
            {
                break;
            }
        } else {
            let snippet: String = trimmed.chars().take(200).collect();
            tracing::warn!(server = %server, "malformed JSON-RPC line from MCP server: {snippet}");
            malformed.send_replace(Some(snippet));
        }
    }
    // Dropping `to_rmcp` ends the transport: rmcp fails the pending requests.
}

/// A JSON-RPC 2.0 message or a non-empty batch of them.
fn is_json_rpc(line: &str) -> bool {
    fn message(v: &Value) -> bool {
        v.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
    }
    match serde_json::from_str::<Value>(line) {
        Ok(Value::Array(items)) => !items.is_empty() && items.iter().all(message),
        Ok(v) => message(&v),
        Err(_) => false,
    }
}

async fn keep_stderr_tail(
    server: String,
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<String>>,
) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(server = %server, "stderr: {line}");
        if let Ok(mut t) = tail.lock() {
            t.push_str(&line);
            t.push('\n');
            if t.len() > STDERR_TAIL_BYTES {
                let mut cut = t.len() - STDERR_TAIL_BYTES;
                while !t.is_char_boundary(cut) {
                    cut += 1;
                }
                t.drain(..cut);
            }
        }
    }
}

fn http_headers(
    headers: &BTreeMap<String, String>,
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, String> {
    headers
        .iter()
        .map(|(k, v)| {
            let name = http::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("invalid header name `{k}`"))?;
            let mut value = http::HeaderValue::from_str(v)
                .map_err(|_| format!("invalid value for header `{k}`"))?;
            value.set_sensitive(true);
            Ok((name, value))
        })
        .collect()
}

/// rmcp's reqwest is built without a TLS crypto provider; install ring (the
/// workspace's) once, unless the application installed one.
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn json_rpc_lines_are_recognized() {
        assert!(is_json_rpc(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        assert!(is_json_rpc(r#"[{"jsonrpc":"2.0","method":"x"}]"#));
        for bad in ["not json", "{}", r#"{"jsonrpc":"1.0"}"#, "[]", "[1]", r#"{"jsonrpc":"2.0""#] {
            assert!(!is_json_rpc(bad), "{bad}");
        }
    }

    #[test]
    fn progress_becomes_an_update() {
        let p: ProgressNotificationParam = serde_json::from_value(
            json!({"progressToken": 1, "progress": 2, "total": 5, "message": "copying"}),
        )
        .unwrap();
        let out = progress_output(&p);
        assert_eq!(out.content, vec![UserContent::text("2/5: copying")]);
        assert_eq!(out.details, Some(json!({"progress": 2.0, "total": 5.0, "message": "copying"})));
    }
}
