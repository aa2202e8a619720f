//! An example worker: serves the `AgentSession` and `SessionInbox` virtual
//! objects over HTTP/2 for a Restate server to call (register it with
//! `restate deployments register http://<addr>`).
//!
//! Configuration (environment):
//! * `CLAW_WORKER_ADDR`: listen address (default `127.0.0.1:9080`).
//! * `CLAW_PROVIDER_BASE_URL`: an OpenAI Chat Completions compatible endpoint
//!   (default `https://api.openai.com/v1`); `OPENAI_API_KEY` its key, if any.
//! * `CLAW_MODEL`: the model id (default `gpt-4o-mini`).
//! * `CLAW_WORKSPACE`: the directory the `append_line` tool writes in (default: the
//!   current directory); `CLAW_TOOL_DELAY_MS`: a pause after each write (default 0),
//!   which the crash test uses to hold a tool in flight.
//! * `CLAW_INACTIVITY_TIMEOUT_MS`, `CLAW_ABORT_TIMEOUT_MS`: Restate's timeouts for
//!   the session's handlers (defaults 15 min and 10 min): a step must end within
//!   their sum, or Restate aborts the attempt and the step runs again.
//! * `CLAW_STEP_TIMEOUT_MS`: the per-step ceiling (default 5 min), below those.
//! * `CLAW_MESSAGE_MAX_ATTEMPTS`: attempts of a `message` invocation before
//!   Restate gives up on it (default: the server's retry policy), and
//!   `CLAW_ON_MAX_ATTEMPTS`: `kill` (fail it with its last error) or `pause`
//!   (the default: keep it for an operator to resume or kill). A retry on a
//!   build with another setup fails every attempt, so this bounds it.
//! * `CLAW_MODEL_RETRY_MS`, `CLAW_MODEL_RETRY_ATTEMPTS`: the durable retry of a
//!   transiently failed model request (first delay, default 1000; attempts, default 30).
//! * `CLAW_IDENTITY_KEYS`: Restate request identity public keys (`publickeyv1_...`,
//!   comma-separated): when set, the worker answers only requests signed by
//!   that Restate server, not anyone who reaches its port.
//! * `CLAW_APPROVE`: tools whose calls wait for a person's approval when their
//!   `line` argument starts with `ask` (the approval path: `AgentSession/<id>/approve`).
//! * `CLAW_HOOK_LOG`: a file each `before_tool_call` answer appends a line to
//!   (the tests count how often the hook was asked).
//! * `CLAW_PANIC_WORD`: a user message of exactly this text makes the
//!   `prepare_next_turn` hook panic (the tests' failure inside the loop).
//! * `CLAW_SYSTEM_PROMPT`: the system prompt (part of the setup's fingerprint).
//! * `CLAW_LEDGER`: `host:port` of a ledger on loopback: `append_line` then also
//!   posts `{"key": <idempotency key>, "line": ...}` to `/apply` there (the chaos
//!   test's ledger applies each key once).
//! * `CLAW_WORKER_THREADS`: the async runtime's threads (default: one per core).
//! * `CLAW_PARALLEL`: `1` runs a response's calls as a parallel batch (default
//!   sequential, one call at a time).
//! * `CLAW_INGRESS_URL`: the Restate ingress (comma-separated for several
//!   nodes) a turn reads the stored messages it lacks from
//!   (`SessionParts::ingress`); set, the state of the session and of its events
//!   object is also read lazily.
//! * `CLAW_JOURNAL_RETENTION_S`: keep a finished invocation's journal (of a
//!   session or its events object) this long (the tests measure journals
//!   through the admin API).
//! * `CLAW_OUTPUT`: `weather` makes every run's final answer a `Weather`
//!   (`{"city": string, "celsius": number}`), asked on a final turn.
#![allow(clippy::disallowed_methods, reason = "a program reads its own process environment")]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agent_core::{
    AgentConfig, AgentHooks, AgentTool, BeforeToolCall, CallInfo, ExecutionMode, ToolError,
    ToolInvocation, ToolOutput,
};
use agent_restate::{
    AgentSession, SessionApprovals, SessionEvents, SessionInbox, SessionParts, StepLimits,
};
use futures_util::future::BoxFuture;
use llm_core::{ApiKey, Model};
use restate_sdk::endpoint::{HandlerOptions, ServiceOptions};
use restate_sdk::prelude::{Endpoint, HttpServer};
use restate_sdk::service::IntoServiceDefinition;
use tokio::io::AsyncWriteExt;

/// The example's approval policy: a call whose `line` starts with `ask` waits
/// for a person; every answer is logged to `log`, if set.
struct ExampleHooks {
    ask: bool,
    log: Option<PathBuf>,
    panic_word: Option<String>,
}

impl AgentHooks for ExampleHooks {
    fn prepare_next_turn<'a>(
        &'a self,
        info: agent_core::TurnInfo<'a>,
    ) -> BoxFuture<'a, Option<agent_core::TurnUpdate>> {
        let last_user = info.context.messages.iter().rev().find_map(|m| match m {
            llm_core::Message::User(u) => match &u.content {
                llm_core::UserMessageContent::Text(t) => Some(t.as_str()),
                _ => None,
            },
            _ => None,
        });
        if self.panic_word.as_deref().is_some_and(|w| last_user == Some(w)) {
            panic!("prepare_next_turn was told to panic");
        }
        Box::pin(std::future::ready(None))
    }

    fn before_tool_call<'a>(
        &'a self,
        info: CallInfo<'a>,
        args: &'a serde_json::Value,
    ) -> BoxFuture<'a, BeforeToolCall> {
        Box::pin(async move {
            let asks = self.ask && args["line"].as_str().is_some_and(|l| l.starts_with("ask"));
            if let Some(log) = &self.log {
                let line = format!("{}\n", info.call.id);
                if let Ok(mut file) =
                    tokio::fs::OpenOptions::new().create(true).append(true).open(log).await
                {
                    let _ = file.write_all(line.as_bytes()).await;
                }
            }
            if asks {
                BeforeToolCall::Ask { reason: format!("{} wants approval", info.call.name) }
            } else {
                BeforeToolCall::Allow
            }
        })
    }
}

fn env_ms(name: &str, default: u64) -> Result<Duration, String> {
    env_or(name, &default.to_string())
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|e| format!("{name}: {e}"))
}

/// Arguments of the `append_line` tool.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AppendLine {
    /// File name inside the workspace (no directories).
    file: String,
    /// The line to append.
    line: String,
}

/// Posts one effect to the ledger at `addr` (plain HTTP/1.1 on loopback).
async fn post_to_ledger(addr: &str, key: &str, line: &str) -> Result<(), ToolError> {
    use tokio::io::AsyncReadExt;
    let body = serde_json::json!({ "key": key, "line": line }).to_string();
    let request = format!(
        "POST /apply HTTP/1.1\r\nHost: ledger\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await?;
        Ok::<_, std::io::Error>(head)
    };
    match tokio::time::timeout(Duration::from_secs(10), exchange).await {
        Ok(Ok(head)) if head.starts_with(b"HTTP/1.1 200") => Ok(()),
        Ok(Ok(head)) => {
            Err(ToolError(format!("ledger answered {}", String::from_utf8_lossy(&head))))
        }
        Ok(Err(e)) => Err(ToolError(format!("ledger: {e}"))),
        Err(_) => Err(ToolError("ledger: no answer within 10 s".into())),
    }
}

/// The final answer of a run with `CLAW_OUTPUT=weather`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code, reason = "only its schema is used")]
struct Weather {
    /// The city.
    city: String,
    /// The temperature there.
    celsius: f64,
}

/// Arguments of the `hold` tool.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Hold {
    /// How long to hold the thread, in milliseconds (at most a minute).
    ms: u64,
}

/// A blocking tool: holds its thread (as a synchronous library call would),
/// declared `blocking` so it runs on the blocking pool; reports its progress
/// every 500 ms.
fn hold_tool() -> AgentTool {
    AgentTool::typed("hold", "Holds its thread for a while", |args: Hold, inv: ToolInvocation| {
        let total = args.ms.min(60_000);
        let mut held = 0;
        while held < total {
            let pause = (total - held).min(500);
            std::thread::sleep(Duration::from_millis(pause));
            held += pause;
            inv.progress.update(ToolOutput::text(format!("held {held} of {total} ms")));
        }
        std::future::ready(Ok(ToolOutput::text(format!("held {} ms", args.ms))))
    })
    .blocking()
}

fn append_line_tool(workspace: PathBuf, delay: Duration) -> AgentTool {
    AgentTool::typed(
        "append_line",
        "Appends a line to a file in the workspace",
        move |args: AppendLine, inv: ToolInvocation| {
            let workspace = workspace.clone();
            async move {
                if args.file.is_empty()
                    || args.file.contains(['/', '\\'])
                    || args.file.starts_with('.')
                {
                    return Err(ToolError(format!("invalid file name {:?}", args.file)));
                }
                let path = workspace.join(&args.file);
                let mut file = tokio::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .await
                    .map_err(|e| ToolError(format!("cannot open {}: {e}", args.file)))?;
                let key = inv.idempotency_key.clone().unwrap_or_default();
                if let Ok(ledger) = std::env::var("CLAW_LEDGER") {
                    post_to_ledger(&ledger, &key, &args.line).await?;
                }
                file.write_all(format!("{} {key}\n", args.line).as_bytes())
                    .await
                    .map_err(|e| ToolError(format!("cannot write {}: {e}", args.file)))?;
                file.sync_all()
                    .await
                    .map_err(|e| ToolError(format!("cannot sync {}: {e}", args.file)))?;
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = inv.cancel.cancelled() => return Err(ToolError("cancelled".into())),
                }
                Ok(ToolOutput::text(format!("appended to {}", args.file)))
            }
        },
    )
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| default.to_owned())
}

fn main() -> ExitCode {
    let addr: SocketAddr = match env_or("CLAW_WORKER_ADDR", "127.0.0.1:9080").parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("claw-restate-worker: CLAW_WORKER_ADDR: {e}");
            return ExitCode::from(2);
        }
    };
    let delay = match env_or("CLAW_TOOL_DELAY_MS", "0").parse::<u64>() {
        Ok(ms) => Duration::from_millis(ms),
        Err(e) => {
            eprintln!("claw-restate-worker: CLAW_TOOL_DELAY_MS: {e}");
            return ExitCode::from(2);
        }
    };
    let workspace = PathBuf::from(env_or("CLAW_WORKSPACE", "."));
    let model = Model {
        id: env_or("CLAW_MODEL", "gpt-4o-mini"),
        api: llm_openai_completions::API.into(),
        provider: "openai".into(),
        base_url: env_or("CLAW_PROVIDER_BASE_URL", "https://api.openai.com/v1"),
        ..Model::default()
    };
    let api_key = std::env::var("OPENAI_API_KEY").ok().map(ApiKey::new);
    let provider: Arc<dyn llm_core::Provider> =
        Arc::new(llm_openai_completions::OpenAiCompletionsProvider::new());
    let durations = (|| {
        Ok::<_, String>((
            env_ms("CLAW_INACTIVITY_TIMEOUT_MS", 15 * 60_000)?,
            env_ms("CLAW_ABORT_TIMEOUT_MS", 10 * 60_000)?,
            env_ms("CLAW_STEP_TIMEOUT_MS", 5 * 60_000)?,
            env_ms("CLAW_MODEL_RETRY_MS", 1000)?,
            env_or("CLAW_MODEL_RETRY_ATTEMPTS", "30")
                .parse::<u32>()
                .map_err(|e| format!("CLAW_MODEL_RETRY_ATTEMPTS: {e}"))?,
        ))
    })();
    let (inactivity, abort, step_timeout, retry_initial, retry_attempts) = match durations {
        Ok(d) => d,
        Err(e) => {
            eprintln!("claw-restate-worker: {e}");
            return ExitCode::from(2);
        }
    };
    let hooks = Arc::new(ExampleHooks {
        ask: env_or("CLAW_APPROVE", "") == "1",
        log: std::env::var_os("CLAW_HOOK_LOG").map(PathBuf::from),
        panic_word: std::env::var("CLAW_PANIC_WORD").ok().filter(|w| !w.is_empty()),
    });
    let system_prompt = env_or("CLAW_SYSTEM_PROMPT", "You are a careful assistant.");
    let parallel = env_or("CLAW_PARALLEL", "0") == "1";
    let output = match env_or("CLAW_OUTPUT", "").as_str() {
        "" => None,
        "weather" => Some(agent_core::AgentOutput::for_type::<Weather>()),
        other => {
            eprintln!(
                "claw-restate-worker: CLAW_OUTPUT: unknown format {other:?} (known: weather)"
            );
            return ExitCode::from(2);
        }
    };
    let ingress: Vec<String> = env_or("CLAW_INGRESS_URL", "")
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .collect();
    let lazy_state = !ingress.is_empty();
    let journal_retention = match env_or("CLAW_JOURNAL_RETENTION_S", "").parse::<u64>() {
        Ok(s) => Some(Duration::from_secs(s)),
        Err(_) => None,
    };
    let setup = move |_session: &str| {
        let mut config = AgentConfig::new(model.clone(), provider.clone());
        config.options.api_key = api_key.clone();
        config.max_turns = Some(32);
        config.hooks = hooks.clone();
        config.output = output.clone();
        config.tool_execution =
            if parallel { ExecutionMode::Parallel } else { ExecutionMode::Sequential };
        let mut parts = SessionParts::new(
            config,
            Some(system_prompt.clone()),
            vec![append_line_tool(workspace.clone(), delay), hold_tool()],
        );
        parts.limits = StepLimits {
            step_timeout,
            retry_initial,
            retry_max_delay: retry_initial * 8,
            retry_max_attempts: retry_attempts,
        };
        parts.ingress = ingress.clone();
        parts
    };
    let mut message_options =
        HandlerOptions::new().inactivity_timeout(inactivity).abort_timeout(abort);
    match env_or("CLAW_MESSAGE_MAX_ATTEMPTS", "").parse::<u64>() {
        Ok(attempts) => {
            message_options = message_options.retry_policy_max_attempts(attempts.max(1));
            message_options = match env_or("CLAW_ON_MAX_ATTEMPTS", "pause").as_str() {
                "kill" => message_options.retry_policy_kill_on_max_attempts(),
                "pause" => message_options.retry_policy_pause_on_max_attempts(),
                other => {
                    eprintln!(
                        "claw-restate-worker: CLAW_ON_MAX_ATTEMPTS: {other:?} is not kill or pause"
                    );
                    return ExitCode::from(2);
                }
            };
        }
        Err(_) if env_or("CLAW_MESSAGE_MAX_ATTEMPTS", "").is_empty() => {}
        Err(e) => {
            eprintln!("claw-restate-worker: CLAW_MESSAGE_MAX_ATTEMPTS: {e}");
            return ExitCode::from(2);
        }
    }
    let mut session_options = ServiceOptions::new()
        .inactivity_timeout(inactivity)
        .abort_timeout(abort)
        .enable_lazy_state(lazy_state)
        .handler("message", message_options);
    if let Some(retention) = journal_retention {
        session_options = session_options.journal_retention(retention);
    }
    // The events object's handlers read a few entries of its state each:
    // lazy state, so Restate does not send every kept event with every call.
    let mut events_options = ServiceOptions::new().enable_lazy_state(lazy_state);
    if let Some(retention) = journal_retention {
        events_options = events_options.journal_retention(retention);
    }
    let mut builder = Endpoint::builder()
        .bind(AgentSession::new(setup).into_service_definition().options(session_options))
        .bind(SessionInbox)
        .bind(SessionApprovals)
        .bind(SessionEvents.into_service_definition().options(events_options));
    for key in env_or("CLAW_IDENTITY_KEYS", "").split(',').map(str::trim).filter(|k| !k.is_empty())
    {
        builder = match builder.identity_key(key) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("claw-restate-worker: CLAW_IDENTITY_KEYS: {e}");
                return ExitCode::from(2);
            }
        };
    }
    let endpoint = builder.build();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Ok(threads) = env_or("CLAW_WORKER_THREADS", "").parse::<usize>() {
        runtime.worker_threads(threads.max(1));
    }
    let runtime = match runtime.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("claw-restate-worker: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async move {
        eprintln!("claw-restate-worker: listening on {addr}");
        HttpServer::new(endpoint).listen_and_serve(addr).await;
    });
    ExitCode::SUCCESS
}
