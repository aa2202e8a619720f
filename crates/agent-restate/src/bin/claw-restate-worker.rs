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

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agent_core::{AgentConfig, AgentTool, ToolError, ToolInvocation, ToolOutput};
use agent_restate::{AgentSession, SessionInbox, SessionParts};
use llm_core::{ApiKey, Model};
use restate_sdk::prelude::{Endpoint, HttpServer};
use tokio::io::AsyncWriteExt;

/// Arguments of the `append_line` tool.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AppendLine {
    /// File name inside the workspace (no directories).
    file: String,
    /// The line to append.
    line: String,
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
                let key = agent_restate::current_idempotency_key().unwrap_or_default();
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
    let setup = move |_session: &str| {
        let mut config = AgentConfig::new(model.clone(), provider.clone());
        config.options.api_key = api_key.clone();
        config.max_turns = Some(32);
        SessionParts {
            config,
            system_prompt: Some("You are a careful assistant.".into()),
            tools: vec![append_line_tool(workspace.clone(), delay)],
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("claw-restate-worker: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async move {
        let endpoint =
            Endpoint::builder().bind(AgentSession::new(setup)).bind(SessionInbox).build();
        eprintln!("claw-restate-worker: listening on {addr}");
        HttpServer::new(endpoint).listen_and_serve(addr).await;
    });
    ExitCode::SUCCESS
}
