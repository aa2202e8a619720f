//! One server connection: start, handshake, tool listing, calls, restarts,
//! shutdown.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use agent_core::{ProgressSink, ToolError, ToolInvocation, ToolOutput};
use llm_core::UserContent;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, CustomRequest, Implementation, ProgressNotificationParam,
    ProgressToken, RequestId, ServerResult, Tool as McpTool,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient, RunningService};
use rmcp::{ClientHandler, Peer, ServiceError};
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::config::{MAX_RESTART_BACKOFF, McpLimits, McpServerConfig, McpTransport, SAFE_ENV_VARS};
use crate::content::map_call_result_with_limits;
use crate::error::McpError;

/// How much of a stdio server's stderr is kept for error messages.
const STDERR_TAIL_BYTES: usize = 2048;
/// Longest stderr line kept or logged; the rest of the line is skipped.
const MAX_STDERR_LINE_BYTES: usize = 1024;
/// Stray stdout lines logged at `warn` per connection; later ones at `debug`.
const STRAY_LINES_WARNED: u32 = 10;

/// Whether a server can be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerStatus {
    /// Connected.
    Up,
    /// Not connected; `restartable` says whether the next call or
    /// [`crate::McpServers::refresh`] starts it again (at once or after its
    /// backoff); `false` while its restarts within the window are used up, and
    /// after shutdown.
    Down {
        /// Why it is down.
        reason: String,
        /// Whether restarts are left.
        restartable: bool,
    },
}

/// Where a call's progress goes, and when it last went there.
struct ProgressRoute {
    sink: ProgressSink,
    last_sent: Option<Instant>,
}

/// State the client handler shares with calls: progress routing and the
/// `tools/list_changed` flag.
pub(crate) struct Notifications {
    progress: Mutex<HashMap<ProgressToken, ProgressRoute>>,
    progress_interval: Duration,
    pub(crate) tools_changed: AtomicBool,
    pub(crate) changed: Arc<tokio::sync::Notify>,
}

/// The rmcp client handler: progress to the running call's sink (at most one
/// update per interval), list changes to a flag.
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
        let interval = self.notifications.progress_interval;
        let sink = self.notifications.progress.lock().ok().and_then(|mut m| {
            let route = m.get_mut(&params.progress_token)?;
            let now = Instant::now();
            // A server may send progress as fast as it can write: every update
            // is an event for the application to render.
            if route.last_sent.is_some_and(|t| now.duration_since(t) < interval) {
                return None;
            }
            route.last_sent = Some(now);
            Some(route.sink.clone())
        });
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

/// A stdio server's process and the tasks that read its pipes. Dropping it
/// kills the whole process group and stops the readers.
struct ChildProcess {
    child: tokio::process::Child,
    /// The process group the child leads (it was started in a new one).
    group: Option<i32>,
    readers: Vec<JoinHandle<()>>,
    stderr_tail: Arc<Mutex<String>>,
    /// Why the stdout reader gave up on the connection, when it did.
    stdout_end: Arc<Mutex<Option<String>>>,
}

impl ChildProcess {
    /// Why the process is gone: its exit status, what ended the stdout
    /// reader, and the end of its stderr.
    async fn reason(&mut self, default: &str) -> String {
        let mut reason =
            match tokio::time::timeout(Duration::from_millis(500), self.child.wait()).await {
                Ok(Ok(status)) => format!("the process exited ({status})"),
                _ => default.to_owned(),
            };
        if let Some(end) = self.stdout_end.lock().ok().and_then(|e| e.clone()) {
            reason.push_str(&format!("; {end}"));
        }
        let tail = self.stderr_tail.lock().map(|t| last_line(&t)).unwrap_or_default();
        if !tail.is_empty() {
            reason.push_str(&format!("; its last stderr line: {tail}"));
        }
        reason
    }

    /// The end of the MCP stdio shutdown sequence, once stdin is closed: wait
    /// for the process, `SIGTERM` its group (a wrapper such as `npx` or `uvx`
    /// may have left the real server behind), wait, `SIGKILL` the group.
    async fn terminate(mut self, grace: Duration) {
        let exited = tokio::time::timeout(grace, self.child.wait()).await.is_ok();
        if let Some(group) = self.group
            && signal_group(group, GroupSignal::Term)
        {
            let deadline = tokio::time::Instant::now() + grace;
            if !exited {
                let _ = tokio::time::timeout_at(deadline, self.child.wait()).await;
            }
            while group_alive(group) && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            signal_group(group, GroupSignal::Kill);
        }
        // Signalled for the last time: an empty group's id may be reused.
        self.group = None;
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(grace, self.child.wait()).await;
        // Readers end at EOF once every holder of the pipes is gone; a pipe
        // passed on to a process outside the group must not keep them alive.
        for mut reader in self.readers.drain(..) {
            if tokio::time::timeout(Duration::from_millis(200), &mut reader).await.is_err() {
                reader.abort();
            }
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if let Some(group) = self.group {
            signal_group(group, GroupSignal::Kill);
        }
        let _ = self.child.start_kill();
        for reader in &self.readers {
            reader.abort();
        }
    }
}

#[derive(Clone, Copy)]
enum GroupSignal {
    Term,
    Kill,
}

/// Sends a signal to a process group; whether the group existed.
#[cfg(unix)]
fn signal_group(group: i32, signal: GroupSignal) -> bool {
    use nix::sys::signal::{Signal, killpg};
    let signal = match signal {
        GroupSignal::Term => Signal::SIGTERM,
        GroupSignal::Kill => Signal::SIGKILL,
    };
    killpg(nix::unistd::Pid::from_raw(group), signal).is_ok()
}

#[cfg(not(unix))]
fn signal_group(_group: i32, _signal: GroupSignal) -> bool {
    false
}

/// Whether a process of the group still runs. A zombie does not count: an
/// orphan is reaped by init whenever init gets to it, and signalling a zombie
/// succeeds.
#[cfg(target_os = "linux")]
fn group_alive(group: i32) -> bool {
    if nix::sys::signal::killpg(nix::unistd::Pid::from_raw(group), None).is_err() {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else { return true };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { return false };
        // `pid (comm) state ppid pgrp ...`; `comm` may hold spaces and parentheses.
        let mut fields = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|p| p.parse::<i32>().ok());
        pgrp == Some(group) && state != Some("Z")
    })
}

#[cfg(all(unix, not(target_os = "linux")))]
fn group_alive(group: i32) -> bool {
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(group), None).is_ok()
}

#[cfg(not(unix))]
fn group_alive(_group: i32) -> bool {
    false
}

/// A live connection.
struct Connection {
    service: RunningService<RoleClient, Handler>,
    /// The last line a stdio server wrote that is not JSON-RPC (stdio only).
    stray: watch::Receiver<Option<String>>,
    process: Option<ChildProcess>,
}

impl Connection {
    fn is_alive(&self) -> bool {
        !self.service.peer().is_transport_closed()
    }

    /// Why the connection ended: the exit status and the end of stderr.
    async fn death_reason(&mut self) -> String {
        match &mut self.process {
            Some(process) => process.reason("the connection closed").await,
            None => "the connection closed".into(),
        }
    }

    /// Closes the connection: closes stdin (rmcp drops the transport), then
    /// ends the process and its group.
    async fn close(mut self, grace: Duration) {
        let _ = self.service.close_with_timeout(grace).await;
        if let Some(process) = self.process.take() {
            process.terminate(grace).await;
        }
    }
}

fn last_line(s: &str) -> String {
    s.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_owned()
}

/// Restarts within the window, and when the server went down.
#[derive(Default)]
struct RestartLog {
    times: VecDeque<Instant>,
    down_since: Option<Instant>,
}

/// Whether a down server may start again.
enum RestartPlan {
    Now,
    After(Duration),
    UsedUp(Duration),
    ShutDown,
}

/// A duration as whole seconds, rounded up.
fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

/// One configured server.
pub(crate) struct Server {
    pub(crate) config: McpServerConfig,
    connection: tokio::sync::Mutex<Option<Connection>>,
    status: RwLock<ServerStatus>,
    tools: RwLock<Vec<McpTool>>,
    restarts: Mutex<RestartLog>,
    shut_down: AtomicBool,
    pub(crate) notifications: Arc<Notifications>,
}

impl Server {
    pub(crate) fn new(config: McpServerConfig, changed: Arc<tokio::sync::Notify>) -> Self {
        let progress_interval = config.limits.progress_interval;
        Server {
            config,
            connection: tokio::sync::Mutex::new(None),
            status: RwLock::new(ServerStatus::Down {
                reason: "not started".into(),
                restartable: true,
            }),
            tools: RwLock::new(Vec::new()),
            restarts: Mutex::new(RestartLog::default()),
            shut_down: AtomicBool::new(false),
            notifications: Arc::new(Notifications {
                progress: Mutex::default(),
                progress_interval,
                tools_changed: AtomicBool::new(false),
                changed,
            }),
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

    /// Whether, and when, a down server may start again: restarts older than
    /// the window no longer count; the first one is immediate, each further
    /// one waits twice as long after the failure as the one before.
    fn restart_plan(&self) -> RestartPlan {
        if self.shut_down.load(Ordering::SeqCst) {
            return RestartPlan::ShutDown;
        }
        let now = self.config.clock.now();
        let window = self.config.restart_window;
        let Ok(mut log) = self.restarts.lock() else { return RestartPlan::ShutDown };
        while log.times.front().is_some_and(|t| now.saturating_duration_since(*t) >= window) {
            log.times.pop_front();
        }
        let used = log.times.len();
        if used >= self.config.max_restarts as usize {
            let frees_in = log.times.front().map_or(Duration::ZERO, |t| {
                window.saturating_sub(now.saturating_duration_since(*t))
            });
            return RestartPlan::UsedUp(frees_in);
        }
        let delay = match used {
            0 => Duration::ZERO,
            n => {
                let factor = 1u32.checked_shl(u32::try_from(n - 1).unwrap_or(u32::MAX));
                factor
                    .and_then(|f| self.config.restart_backoff.checked_mul(f))
                    .unwrap_or(MAX_RESTART_BACKOFF)
                    .min(MAX_RESTART_BACKOFF)
            }
        };
        let down_for = log.down_since.map_or(delay, |d| now.saturating_duration_since(d));
        if down_for >= delay { RestartPlan::Now } else { RestartPlan::After(delay - down_for) }
    }

    fn record_restart(&self) {
        let now = self.config.clock.now();
        if let Ok(mut log) = self.restarts.lock() {
            log.times.push_back(now);
        }
    }

    fn mark_down_now(&self) {
        let now = self.config.clock.now();
        if let Ok(mut log) = self.restarts.lock() {
            log.down_since = Some(now);
        }
    }

    fn restartable(&self) -> bool {
        matches!(self.restart_plan(), RestartPlan::Now | RestartPlan::After(_))
    }

    /// The first start (does not count as a restart).
    pub(crate) async fn start(&self) -> Result<(), McpError> {
        let mut slot = self.connection.lock().await;
        self.connect_into(&mut slot).await
    }

    /// Connects, lists the tools and marks the server up; on failure marks it down.
    async fn connect_into(&self, slot: &mut Option<Connection>) -> Result<(), McpError> {
        if let Some(old) = slot.take() {
            old.close(self.config.limits.shutdown_grace).await;
        }
        let result = async {
            let connection = tokio::time::timeout(self.config.connect_timeout, self.connect())
                .await
                .map_err(|_| {
                    self.connect_error(format!(
                        "no answer to `initialize` within {:?}",
                        self.config.connect_timeout
                    ))
                })??;
            let tools = match self.list_tools(connection.service.peer()).await {
                Ok(tools) => tools,
                Err(e) => {
                    connection.close(self.config.limits.shutdown_grace).await;
                    return Err(e);
                }
            };
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
                self.mark_down_now();
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

    #[allow(
        clippy::disallowed_methods,
        reason = "a child server inherits the safe variables of this process's environment"
    )]
    async fn connect(&self) -> Result<Connection, McpError> {
        let handler = Handler { notifications: self.notifications.clone() };
        let limits = &self.config.limits;
        match &self.config.transport {
            McpTransport::Stdio { program, args, env, cwd } => {
                let mut cmd = tokio::process::Command::new(program);
                if !self.config.inherit_env {
                    // Only what the reference SDKs pass on: the user's keys and
                    // tokens stay with this process.
                    cmd.env_clear();
                    for key in SAFE_ENV_VARS {
                        if let Some(value) = std::env::var_os(key)
                            // An exported shell function, not a value.
                            && !value.to_string_lossy().starts_with("()")
                        {
                            cmd.env(key, value);
                        }
                    }
                }
                cmd.args(args)
                    .envs(env)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .kill_on_drop(true);
                // Its own process group, so shutdown reaches what a wrapper
                // (`npx`, `uvx`, a shell) started.
                #[cfg(unix)]
                cmd.process_group(0);
                if let Some(cwd) = cwd {
                    cmd.current_dir(cwd);
                }
                let mut child = cmd
                    .spawn()
                    .map_err(|e| self.connect_error(format!("cannot run `{program}`: {e}")))?;
                let group = child.id().and_then(|id| i32::try_from(id).ok());
                let (Some(stdin), Some(stdout), Some(stderr)) =
                    (child.stdin.take(), child.stdout.take(), child.stderr.take())
                else {
                    return Err(self.connect_error("the child's pipes are missing".into()));
                };
                let stderr_tail = Arc::new(Mutex::new(String::new()));
                let stdout_end = Arc::new(Mutex::new(None));
                let (stray_tx, stray) = watch::channel(None);
                let (reader, writer) = tokio::io::duplex(1024 * 1024);
                let readers = vec![
                    tokio::spawn(drain_stderr(
                        self.config.id.clone(),
                        BufReader::new(stderr),
                        stderr_tail.clone(),
                    )),
                    tokio::spawn(filter_stdout(
                        self.config.id.clone(),
                        BufReader::new(stdout),
                        writer,
                        stray_tx,
                        stdout_end.clone(),
                        limits.max_message_bytes,
                    )),
                ];
                let mut process = ChildProcess { child, group, readers, stderr_tail, stdout_end };
                match rmcp::serve_client(handler, (reader, stdin)).await {
                    Ok(service) => Ok(Connection { service, stray, process: Some(process) }),
                    Err(e) => {
                        let reason = process.reason("the process is still running").await;
                        Err(self.connect_error(format!("{e} ({reason})")))
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
                // The same bound as a stdio line.
                config.max_sse_event_size = limits.max_message_bytes;
                config.max_json_response_size = limits.max_message_bytes;
                // rmcp builds its HTTP client with `expect`: keep a failure there a
                // connect error, not a panic in the caller.
                let transport = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    rmcp::transport::StreamableHttpClientTransport::from_config(config)
                }))
                .map_err(|_| self.connect_error("the HTTP client could not be built".into()))?;
                let service = rmcp::serve_client(handler, transport)
                    .await
                    .map_err(|e| self.connect_error(e.to_string()))?;
                let (_tx, stray) = watch::channel(None);
                Ok(Connection { service, stray, process: None })
            }
        }
    }

    /// Every tool, following `nextCursor`, within the limits.
    async fn list_tools(&self, peer: &Peer<RoleClient>) -> Result<Vec<McpTool>, McpError> {
        let err = |reason: String| McpError::ListTools {
            server: self.config.id.clone(),
            reason: self.scrub(reason),
        };
        tokio::time::timeout(self.config.connect_timeout, self.list_pages(peer))
            .await
            .map_err(|_| err(format!("no answer within {:?}", self.config.connect_timeout)))?
            .map_err(err)
    }

    /// Lists page after page. Each tool is read on its own, so one bad tool
    /// (a schema whose root is not an object, one too large) is dropped with a
    /// warning instead of failing the whole list; a cursor seen before ends
    /// the listing, and so does the tool count bound.
    async fn list_pages(&self, peer: &Peer<RoleClient>) -> Result<Vec<McpTool>, String> {
        let server = self.config.id.as_str();
        let limits = &self.config.limits;
        let mut tools = Vec::new();
        let mut names = HashSet::new();
        let mut cursors = HashSet::new();
        let mut cursor: Option<String> = None;
        // Every page but the last should carry a tool: empty pages with fresh
        // cursors would otherwise go on until the connect timeout.
        let max_pages = limits.max_tools.saturating_add(1);
        for _ in 0..max_pages {
            let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
            // Sent untyped: rmcp's typed answer fails as a whole on one bad tool.
            let request = ClientRequest::CustomRequest(CustomRequest::new("tools/list", params));
            let answer = peer.send_request(request).await.map_err(|e| e.to_string())?;
            let page = match answer {
                ServerResult::CustomResult(custom) => custom.0,
                other => serde_json::to_value(&other).map_err(|e| e.to_string())?,
            };
            let Some(listed) = page.get("tools").and_then(Value::as_array) else {
                return Err("the answer to `tools/list` has no `tools` list".into());
            };
            for raw in listed {
                if tools.len() >= limits.max_tools {
                    tracing::warn!(
                        server,
                        "MCP server lists more than {} tools; the rest are left out",
                        limits.max_tools
                    );
                    return Ok(tools);
                }
                if let Some(tool) = accept_tool(server, raw, limits)
                    && names.insert(tool.name.to_string())
                {
                    tools.push(tool);
                }
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                None => return Ok(tools),
                Some(next) if !cursors.insert(next.to_owned()) => {
                    tracing::warn!(
                        server,
                        "MCP server repeated the `tools/list` cursor {next:?}; the listing ends there"
                    );
                    return Ok(tools);
                }
                Some(next) => cursor = Some(next.to_owned()),
            }
        }
        tracing::warn!(
            server,
            "MCP server's `tools/list` went on for {max_pages} pages; the listing ends there"
        );
        Ok(tools)
    }

    /// Re-lists the tools after `notifications/tools/list_changed`; starts a
    /// down server again when a restart is due. Returns whether the tool list
    /// or the status changed.
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
            if matches!(self.restart_plan(), RestartPlan::Now) {
                self.record_restart();
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
            self.mark_down_now();
            self.set_status(ServerStatus::Down { reason, restartable: self.restartable() });
            // Whatever the process left behind (a wrapper's child) ends too.
            dead.close(self.config.limits.shutdown_grace).await;
        }
    }

    fn down_reason(&self) -> String {
        match self.status() {
            ServerStatus::Down { reason, .. } => reason,
            ServerStatus::Up => "unknown".into(),
        }
    }

    /// A live peer, restarting a dead server when a restart is due.
    async fn peer(&self) -> Result<(Peer<RoleClient>, watch::Receiver<Option<String>>), McpError> {
        let mut slot = self.connection.lock().await;
        if let Some(c) = slot.as_ref()
            && c.is_alive()
        {
            return Ok((c.service.peer().clone(), c.stray.clone()));
        }
        self.note_death(&mut slot).await;
        let server = self.config.id.clone();
        match self.restart_plan() {
            RestartPlan::ShutDown => return Err(McpError::ShutDown { server }),
            RestartPlan::UsedUp(frees_in) => {
                let reason = self.down_reason();
                self.set_status(ServerStatus::Down { reason: reason.clone(), restartable: false });
                let max = self.config.max_restarts;
                let next = if max == 0 {
                    "it is never restarted".to_owned()
                } else {
                    format!(
                        "one is allowed again in {} ({max} per {})",
                        secs(frees_in),
                        secs(self.config.restart_window)
                    )
                };
                return Err(McpError::RestartsExhausted {
                    server,
                    max_restarts: max,
                    reason,
                    next,
                });
            }
            RestartPlan::After(wait) => {
                return Err(McpError::BackingOff {
                    server,
                    retry_in: secs(wait),
                    reason: self.down_reason(),
                });
            }
            RestartPlan::Now => {}
        }
        self.record_restart();
        tracing::info!(server = %self.config.id, "starting MCP server again");
        self.connect_into(&mut slot).await?;
        match slot.as_ref() {
            Some(c) => Ok((c.service.peer().clone(), c.stray.clone())),
            None => Err(self.connect_error("the connection vanished".into())),
        }
    }

    /// Runs `tools/call` in its span (`tools/call {tool}`, as the MCP semantic conventions
    /// name it, beneath the agent's `execute_tool` span); every failure becomes a
    /// [`ToolError`] that says what happened.
    pub(crate) async fn call(
        &self,
        tool_name: &str,
        invocation: ToolInvocation,
    ) -> Result<ToolOutput, ToolError> {
        let span = self.call_span(tool_name);
        let result = self.call_in_span(tool_name, invocation).instrument(span.clone()).await;
        if result.is_err() && !span.is_disabled() {
            span.record("error.type", "tool_error");
            span.record("otel.status_code", "ERROR");
        }
        result
    }

    /// The span of one `tools/call`: the method, the tool, the server's id, and where it is
    /// (host and port only: never a header, a token or the URL's path).
    fn call_span(&self, tool_name: &str) -> tracing::Span {
        use tracing::field::Empty;
        let span = tracing::info_span!(
            "mcp",
            otel.name = Empty,
            otel.kind = "client",
            otel.status_code = Empty,
            mcp.method.name = "tools/call",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = tool_name,
            clawcall.mcp.server = %self.config.id,
            network.transport = Empty,
            jsonrpc.request.id = Empty,
            server.address = Empty,
            server.port = Empty,
            "error.type" = Empty,
        );
        if span.is_disabled() {
            return span;
        }
        span.record("otel.name", format!("tools/call {tool_name}"));
        match &self.config.transport {
            McpTransport::Stdio { .. } => {
                span.record("network.transport", "pipe");
            }
            McpTransport::Http { url, .. } => {
                span.record("network.transport", "tcp");
                if let Ok(uri) = url.parse::<http::Uri>() {
                    if let Some(host) = uri.host() {
                        span.record("server.address", host);
                    }
                    let default = if uri.scheme_str() == Some("https") { 443 } else { 80 };
                    span.record("server.port", i64::from(uri.port_u16().unwrap_or(default)));
                }
            }
        }
        span
    }

    async fn call_in_span(
        &self,
        tool_name: &str,
        invocation: ToolInvocation,
    ) -> Result<ToolOutput, ToolError> {
        let id = self.config.id.as_str();
        let limits = &self.config.limits;
        let deadline = tokio::time::Instant::now() + limits.max_call_duration;
        let (peer, mut stray) = self.peer().await.map_err(|e| ToolError(e.to_string()))?;
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
        if let Some(key) = &invocation.idempotency_key {
            // A durable run's key, the same on every retry of the call's step:
            // a server applies a call's effect once per key.
            let mut meta = serde_json::Map::new();
            meta.insert(crate::IDEMPOTENCY_KEY_META.to_owned(), Value::String(key.clone()));
            params.meta = Some(rmcp::model::RequestMetaObject::from(meta));
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // The timeout restarts at every progress notification: a slow tool that
        // reports progress is not a hung one (the deadline below still holds).
        let options =
            PeerRequestOptions::with_timeout(self.config.call_timeout).reset_timeout_on_progress();
        // Stray lines seen before this call belong to earlier traffic.
        stray.borrow_and_update();
        let handle = match peer.send_request_with_option(request, options).await {
            Ok(h) => h,
            Err(e) => return Err(self.call_failed(tool_name, e, &mut stray).await),
        };
        tracing::Span::current().record("jsonrpc.request.id", handle.id.to_string());
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
            r = &mut response => r,
            () = tokio::time::sleep_until(deadline) => {
                // `in_flight` sends `notifications/cancelled` when dropped.
                return Err(ToolError(format!(
                    "MCP server `{id}` did not finish `{tool_name}` within {:?}, the limit for one \
                     call whatever its progress; the call was cancelled",
                    limits.max_call_duration
                )));
            }
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
            Ok(ServerResult::CallToolResult(result)) => {
                map_call_result_with_limits(id, tool_name, result, limits)
            }
            Ok(ServerResult::EmptyResult(_)) => map_call_result_with_limits(
                id,
                tool_name,
                rmcp::model::CallToolResult::success(Vec::new()),
                limits,
            ),
            Ok(_) => Err(ToolError(format!(
                "MCP server `{id}` answered `{tool_name}` with something other than a tool result \
                 (input requests and tasks are not supported)"
            ))),
            Err(e) => Err(self.call_failed(tool_name, e, &mut stray).await),
        }
    }

    async fn call_failed(
        &self,
        tool_name: &str,
        e: ServiceError,
        stray: &mut watch::Receiver<Option<String>>,
    ) -> ToolError {
        let id = &self.config.id;
        let text = match e {
            ServiceError::Timeout { timeout } => {
                let mut text = format!(
                    "MCP server `{id}` did not answer `{tool_name}` within {timeout:?} \
                     (no result and no progress); the call was cancelled"
                );
                if stray.has_changed().unwrap_or(false)
                    && let Some(line) = stray.borrow_and_update().clone()
                {
                    text.push_str(&format!(
                        "; meanwhile it wrote a line that is not JSON-RPC: {line}"
                    ));
                }
                text
            }
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
                drop(slot);
                let reason = match self.status() {
                    ServerStatus::Down { reason, .. } => reason,
                    ServerStatus::Up => "the connection closed".into(),
                };
                let next = match self.restart_plan() {
                    RestartPlan::Now => "it will be started again on the next call".to_owned(),
                    RestartPlan::After(wait) => {
                        format!("it will be started again in {}", secs(wait))
                    }
                    RestartPlan::UsedUp(_) => "its restarts are used up".to_owned(),
                    RestartPlan::ShutDown => "it was shut down".to_owned(),
                };
                format!("MCP server `{id}` stopped during `{tool_name}` ({reason}); {next}")
            }
            other => format!("MCP server `{id}` failed `{tool_name}`: {other}"),
        };
        ToolError(self.scrub(text))
    }

    /// Closes the connection and ends a stdio server's process group.
    pub(crate) async fn shutdown(&self) {
        // A shut-down server is not started again by a late call or refresh.
        self.shut_down.store(true, Ordering::SeqCst);
        let mut slot = self.connection.lock().await;
        if let Some(c) = slot.take() {
            c.close(self.config.limits.shutdown_grace).await;
        }
        self.set_status(ServerStatus::Down { reason: "shut down".into(), restartable: false });
    }
}

/// One listed tool, if it is usable: it parses, its input schema is an object
/// whose `type` (when given) is `object` and within the size bound; its
/// description is cut to the bound.
fn accept_tool(server: &str, raw: &Value, limits: &McpLimits) -> Option<McpTool> {
    let name = raw.get("name").and_then(Value::as_str).unwrap_or("(no name)");
    let skip = |why: String| {
        tracing::warn!(server, tool = name, "MCP tool left out: {why}");
        None
    };
    let schema = raw.get("inputSchema");
    match schema {
        Some(Value::Object(s)) => {
            if let Some(t) = s.get("type")
                && t != "object"
            {
                return skip(format!("its input schema's root has type {t}, not \"object\""));
            }
        }
        Some(other) => {
            return skip(format!("its input schema's root is not an object: {}", json_kind(other)));
        }
        None => return skip("it has no input schema".into()),
    }
    let schema_bytes = schema.map_or(0, |s| s.to_string().len());
    if schema_bytes > limits.max_schema_bytes {
        return skip(format!(
            "its input schema has {schema_bytes} bytes, over the limit of {}",
            limits.max_schema_bytes
        ));
    }
    let mut tool: McpTool = match serde_json::from_value(raw.clone()) {
        Ok(t) => t,
        Err(e) => return skip(format!("it does not parse: {e}")),
    };
    if let Some(d) = &tool.description
        && d.chars().count() > limits.max_description_chars
    {
        let mut cut: String = d.chars().take(limits.max_description_chars).collect();
        cut.push_str(" [description cut]");
        tool.description = Some(cut.into());
    }
    if let Some(t) = &tool.title
        && t.chars().count() > limits.max_description_chars
    {
        tool.title = Some(t.chars().take(limits.max_description_chars).collect());
    }
    Some(tool)
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A `tools/call` in flight: routes its progress, and tells the server when
/// the caller stops waiting (cancelled run, dropped future, deadline).
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
            m.insert(token.clone(), ProgressRoute { sink, last_sent: None });
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

/// Reads one line of at most `max` bytes (without its newline) into `line`.
/// Returns `None` at EOF with nothing read, else whether the line was longer
/// than `max`; the rest of such a line is skipped, not kept, unless
/// `stop_when_over` returns at once (a line that never ends must not hold
/// the caller).
async fn read_bounded_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    max: usize,
    stop_when_over: bool,
) -> Option<bool> {
    line.clear();
    let mut over = false;
    let mut any = false;
    loop {
        let buf = match reader.fill_buf().await {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return any.then_some(over),
        };
        if buf.is_empty() {
            return any.then_some(over);
        }
        any = true;
        let (chunk, newline) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (buf.split_at(i).0, true),
            None => (buf, false),
        };
        let room = max.saturating_sub(line.len());
        if chunk.len() > room {
            over = true;
        }
        line.extend_from_slice(chunk.split_at(chunk.len().min(room)).0);
        let used = chunk.len() + usize::from(newline);
        reader.consume(used);
        if newline || (over && stop_when_over) {
            return Some(over);
        }
    }
}

/// Forwards a stdio server's JSON-RPC lines to rmcp. Other lines (a log line
/// on the wrong stream) are logged and skipped, as the reference SDKs do:
/// they fail no call; the last one is quoted if a call then times out. A
/// line over the message bound ends the connection.
async fn filter_stdout<R: AsyncBufRead + Unpin>(
    server: String,
    mut stdout: R,
    mut to_rmcp: tokio::io::DuplexStream,
    stray: watch::Sender<Option<String>>,
    end: Arc<Mutex<Option<String>>>,
    max_message_bytes: usize,
) {
    let mut line = Vec::new();
    let mut strays = 0u32;
    while let Some(over) = read_bounded_line(&mut stdout, &mut line, max_message_bytes, true).await
    {
        if over {
            let why = format!("it wrote a stdout line longer than {max_message_bytes} bytes");
            tracing::warn!(server = %server, "MCP server connection ended: {why}");
            if let Ok(mut e) = end.lock() {
                *e = Some(why);
            }
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
            strays = strays.saturating_add(1);
            if strays <= STRAY_LINES_WARNED {
                tracing::warn!(server = %server, "MCP server wrote a line that is not JSON-RPC: {snippet}");
            } else {
                tracing::debug!(server = %server, "MCP server wrote a line that is not JSON-RPC: {snippet}");
            }
            stray.send_replace(Some(snippet));
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

/// Reads a stdio server's stderr to EOF: bytes that are not UTF-8 are
/// replaced, a line is cut at [`MAX_STDERR_LINE_BYTES`] (its rest skipped),
/// each line goes to `tracing` at debug level and the last ones are kept for
/// error messages.
async fn drain_stderr<R: AsyncBufRead + Unpin>(
    server: String,
    mut stderr: R,
    tail: Arc<Mutex<String>>,
) {
    let mut line = Vec::new();
    while let Some(over) =
        read_bounded_line(&mut stderr, &mut line, MAX_STDERR_LINE_BYTES, false).await
    {
        let mut text = String::from_utf8_lossy(&line).into_owned();
        if over {
            text.push_str(" [line cut]");
        }
        tracing::debug!(server = %server, "stderr: {text}");
        if let Ok(mut t) = tail.lock() {
            t.push_str(&text);
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

    proptest::proptest! {
        /// Against `split` on the newline byte: every line, bounded to `max`
        /// and flagged when longer, in any read-buffer size.
        #[test]
        fn bounded_lines_match_split(
            input in proptest::collection::vec(
                proptest::prop_oneof![proptest::prelude::Just(b'\n'), proptest::prelude::any::<u8>()],
                0..200,
            ),
            max in 0usize..40,
            capacity in 1usize..16,
        ) {
            let mut expected: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
            // A trailing newline ends the last line; it does not start another.
            if input.last().is_none_or(|&b| b == b'\n') {
                expected.pop();
            }
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let got = runtime.block_on(async {
                let mut reader = BufReader::with_capacity(capacity, input.as_slice());
                let mut line = Vec::new();
                let mut got = Vec::new();
                while let Some(over) = read_bounded_line(&mut reader, &mut line, max, false).await {
                    got.push((line.clone(), over));
                }
                got
            });
            let expected: Vec<(Vec<u8>, bool)> = expected
                .iter()
                .map(|l| (l[..l.len().min(max)].to_vec(), l.len() > max))
                .collect();
            proptest::prop_assert_eq!(got, expected);
        }
    }

    #[tokio::test]
    async fn lines_are_read_within_their_bound() {
        let input: &[u8] = b"short\n0123456789abcdef\nno newline at the end";
        let mut reader = BufReader::with_capacity(4, input);
        let mut line = Vec::new();
        assert_eq!(read_bounded_line(&mut reader, &mut line, 8, false).await, Some(false));
        assert_eq!(line, b"short");
        // Over the bound: kept to it, the rest skipped up to the newline.
        assert_eq!(read_bounded_line(&mut reader, &mut line, 8, false).await, Some(true));
        assert_eq!(line, b"01234567");
        assert_eq!(read_bounded_line(&mut reader, &mut line, 64, false).await, Some(false));
        assert_eq!(line, b"no newline at the end");
        assert_eq!(read_bounded_line(&mut reader, &mut line, 64, false).await, None);

        // `stop_when_over` returns without looking for the line's end.
        let mut endless = BufReader::with_capacity(4, tokio::io::repeat(b'z'));
        assert_eq!(read_bounded_line(&mut endless, &mut line, 10, true).await, Some(true));
        assert_eq!(line, b"zzzzzzzzzz");
    }

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
