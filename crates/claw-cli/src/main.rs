//! `claw`: run an agent with tools in the terminal.
//!
//! With an API key it talks to the chosen provider; without one (or with
//! `--replay DIR`) it replays a recorded session from `fixtures/` through the
//! real provider adapter and the real agent loop, against a replay server on
//! 127.0.0.1, executing the real tools.

mod calc;
mod models;
mod offline;
mod providers;
mod render;
mod tools;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use agent_core::{Agent, AgentConfig, AgentContext, EndReason};
use clap::Parser;
use futures_util::StreamExt;
use llm_core::{ApiKey, Message, StreamOptions};

use crate::models::ProviderKind;

/// Exit codes, documented in `--help`.
mod exit {
    pub(crate) const OK: u8 = 0;
    pub(crate) const PROVIDER_ERROR: u8 = 1;
    pub(crate) const CONFIG_ERROR: u8 = 3;
    pub(crate) const INTERRUPTED: u8 = 130;
}

const AFTER_HELP: &str = "\
Keys are read from ANTHROPIC_API_KEY, OPENAI_API_KEY (openai, openai-responses), GEMINI_API_KEY
and MISTRAL_API_KEY. Without the key of the chosen provider, claw replays a recorded session
(fixtures/<provider>/agent-session) through the real adapter and agent loop on 127.0.0.1.

Exit codes:
  0    the run finished
  1    the provider failed (HTTP error, overloaded, bad stream, ...)
  2    invalid arguments
  3    configuration error (unknown model, unreadable file, no recorded session)
  130  interrupted with Ctrl-C (the transcript is still saved with --save)

Logging: -v (info), -vv (debug) or RUST_LOG=<filter> print requests, retries and timings to stderr.";

/// Run an LLM agent with tools in the terminal.
#[derive(Debug, Parser)]
#[command(name = "claw", version, about, after_help = AFTER_HELP)]
struct Args {
    /// The question or task. Omit it with --resume to continue the saved transcript.
    prompt: Vec<String>,

    /// Which API to use.
    #[arg(short, long, value_enum, default_value_t = ProviderKind::default())]
    provider: ProviderKind,

    /// Model id (default: the provider's default; see the list in the error for an unknown one).
    #[arg(short, long)]
    model: Option<String>,

    /// Base URL of an API-compatible server (any model id is accepted then).
    #[arg(long)]
    base_url: Option<String>,

    /// Comma-separated built-in tools to offer: read_file, list_dir, calculator,
    /// current_time, append_note (sequential). Default: all.
    #[arg(long, value_delimiter = ',')]
    tools: Vec<String>,

    /// Replay the recorded session in DIR instead of calling the API.
    #[arg(long, value_name = "DIR")]
    replay: Option<PathBuf>,

    /// Print the event stream as JSON lines (for scripts) instead of text.
    #[arg(long)]
    json: bool,

    /// Write the transcript (JSON) to FILE when the run ends, even when interrupted.
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,

    /// Continue the transcript saved in FILE.
    #[arg(long, value_name = "FILE")]
    resume: Option<PathBuf>,

    /// Stop after this many assistant turns.
    #[arg(long, default_value_t = 12)]
    max_turns: u32,

    /// File that the append_note tool writes to.
    #[arg(long, value_name = "FILE", default_value = "claw-notes.md")]
    notes: PathBuf,

    /// Never use colors (also: NO_COLOR=1).
    #[arg(long)]
    no_color: bool,

    /// More logging (-v info, -vv debug).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

/// A saved transcript.
#[derive(serde::Serialize, serde::Deserialize)]
struct Transcript {
    provider: String,
    model: String,
    #[serde(default)]
    system_prompt: Option<String>,
    messages: Vec<Message>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    init_tracing(args.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("claw: cannot start the async runtime: {e}");
            return ExitCode::from(exit::CONFIG_ERROR);
        }
    };
    ExitCode::from(runtime.block_on(run(args)))
}

fn init_tracing(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.is_empty() => EnvFilter::new(v),
        _ => EnvFilter::new(default),
    };
    let _ =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

fn fail(code: u8, message: impl std::fmt::Display) -> u8 {
    eprintln!("claw: {message}");
    code
}

async fn run(args: Args) -> u8 {
    let color = !args.json
        && !args.no_color
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let tools = match tools::builtin(&args.tools, args.notes.clone()) {
        Ok(t) => t,
        Err(e) => return fail(exit::CONFIG_ERROR, e),
    };

    let key = std::env::var(args.provider.key_var()).ok().filter(|k| !k.trim().is_empty());
    let replay_source = match (&args.replay, &key) {
        (Some(dir), _) => Some(offline::Source::Dir(dir.clone())),
        (None, None) if args.base_url.is_none() => {
            Some(offline::Source::Embedded(args.provider.name()))
        }
        _ => None,
    };

    // The replay server must outlive the run.
    let mut _replay_guard = None;
    let mut options = StreamOptions::default();
    let mut system_prompt = Some(models::SYSTEM_PROMPT.to_owned());
    let mut prompts: Vec<Message> = Vec::new();
    let model;
    let provider_kind;
    if let Some(source) = replay_source {
        let session = match offline::load(&source) {
            Ok(s) => s,
            Err(e) => {
                return fail(
                    exit::CONFIG_ERROR,
                    format_args!(
                        "no {} set and no recorded session to replay ({e}); set the key or pass --replay DIR",
                        args.provider.key_var()
                    ),
                );
            }
        };
        let server = match session.serve().await {
            Ok(s) => s,
            Err(e) => {
                return fail(
                    exit::CONFIG_ERROR,
                    format_args!("cannot start the replay server: {e}"),
                );
            }
        };
        provider_kind = match ProviderKind::from_api(&session.model.api) {
            Some(p) => p,
            None => {
                return fail(
                    exit::CONFIG_ERROR,
                    format_args!("recorded session uses unknown api {}", session.model.api),
                );
            }
        };
        let mut m = session.model.clone();
        m.base_url = server.base_url();
        model = m;
        options.api_key = Some(ApiKey::new("replay-no-key"));
        system_prompt = session.context.system_prompt.clone();
        prompts = session.context.messages.clone();
        if !args.json {
            eprintln!(
                "{}",
                render::dim(
                    &format!(
                        "replay: no live API call. Replaying the recorded session {} through the real {} adapter on {} (real tools run).",
                        source.describe(),
                        provider_kind.name(),
                        server.base_url()
                    ),
                    color
                )
            );
        }
        _replay_guard = Some(server);
    } else {
        provider_kind = args.provider;
        model =
            match models::resolve(args.provider, args.model.as_deref(), args.base_url.as_deref()) {
                Ok(m) => m,
                Err(e) => return fail(exit::CONFIG_ERROR, e),
            };
        options.api_key = key.map(ApiKey::new);
    }

    let mut context = AgentContext { system_prompt, messages: Vec::new(), tools };
    let user_prompt = args.prompt.join(" ");
    if let Some(path) = &args.resume {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                return fail(
                    exit::CONFIG_ERROR,
                    format_args!("cannot read {}: {e}", path.display()),
                );
            }
        };
        let saved: Transcript = match serde_json::from_str(&text) {
            Ok(t) => t,
            Err(e) => {
                return fail(
                    exit::CONFIG_ERROR,
                    format_args!("{} is not a claw transcript: {e}", path.display()),
                );
            }
        };
        context.messages = saved.messages;
        if saved.system_prompt.is_some() {
            context.system_prompt = saved.system_prompt;
        }
    }
    if !user_prompt.trim().is_empty() && prompts.is_empty() {
        prompts.push(Message::user(user_prompt));
    }

    let mut config = AgentConfig::new(model.clone(), models::provider(provider_kind));
    config.options = options;
    config.max_turns = Some(args.max_turns);
    let agent = Agent::new(config);
    let run = if prompts.is_empty() {
        match agent.continue_run(context) {
            Ok(r) => r,
            Err(e) => {
                return fail(
                    exit::CONFIG_ERROR,
                    format_args!("nothing to do: {e} (give a prompt)"),
                );
            }
        }
    } else {
        agent.run(context, prompts)
    };

    let started = Instant::now();
    let mut renderer = render::Renderer::new(color, args.json, model.clone());
    let token = run.cancel_token();
    let mut run = run;
    let mut interrupted = false;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut ticker = tokio::time::interval(std::time::Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = ticker.tick() => renderer.tick(),
            event = run.next() => match event {
                Some(event) => renderer.event(&event),
                None => break,
            },
            _ = &mut ctrl_c, if !interrupted => {
                interrupted = true;
                token.cancel();
                if !args.json {
                    eprintln!("\n{}", render::dim("interrupted: aborting the run (every pending tool call gets a result)", color));
                }
            }
        }
    }
    renderer.finish(started.elapsed());
    let Some(outcome) = run.outcome().cloned() else {
        return fail(exit::PROVIDER_ERROR, "the run ended without an outcome");
    };
    if let Some(path) = &args.save {
        let transcript = Transcript {
            provider: provider_kind.name().to_owned(),
            model: model.id.clone(),
            system_prompt: outcome.context.system_prompt.clone(),
            messages: outcome.context.messages.clone(),
        };
        let written = serde_json::to_string_pretty(&transcript)
            .map_err(|e| e.to_string())
            .and_then(|text| std::fs::write(path, text).map_err(|e| e.to_string()));
        if let Err(e) = written {
            return fail(exit::CONFIG_ERROR, format_args!("cannot save {}: {e}", path.display()));
        }
    }
    let _ = std::io::stdout().flush();
    match outcome.reason {
        _ if interrupted => exit::INTERRUPTED,
        EndReason::Error => {
            let message = outcome.messages.iter().rev().find_map(|m| match m {
                Message::Assistant(a) => a.error_message.clone(),
                _ => None,
            });
            fail(
                exit::PROVIDER_ERROR,
                format_args!("the provider failed: {}", message.unwrap_or_default()),
            )
        }
        EndReason::Aborted => exit::INTERRUPTED,
        _ => exit::OK,
    }
}
