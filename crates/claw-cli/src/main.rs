//! `claw`: run an agent with tools in the terminal.
//!
//! With a prompt it talks to the chosen provider (a key, a loopback base URL or
//! `--no-key` required). With no arguments, or `--replay`, it replays a
//! recorded session through the real provider adapter and the real agent loop,
//! against a replay server on 127.0.0.1, executing the real tools.
//! `docs/claw.md` documents every command, flag and the safety model.
//!
//! SIGINT, SIGTERM and SIGHUP become a cancelled run that is still saved.
#![allow(clippy::disallowed_methods, reason = "a program reads its own process environment")]

mod approval;
mod calc;
mod config;
mod export;
mod markdown;
mod models;
mod offline;
mod plan;
mod providers;
mod render;
mod sanitize;
mod schema;
mod sessions;
mod tools;
mod workspace;

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::{Agent, AgentConfig, AgentContext, EndReason};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use clawcall_otel::OtlpExport;
use futures_util::StreamExt;
use llm_core::{ApiKey, Message, Model, StreamOptions};

use crate::models::ProviderKind;
use crate::sessions::Transcript;

/// Exit codes, documented in `--help`.
mod exit {
    pub(crate) const OK: u8 = 0;
    pub(crate) const PROVIDER_ERROR: u8 = 1;
    pub(crate) const USAGE: u8 = 2;
    pub(crate) const CONFIG_ERROR: u8 = 3;
    pub(crate) const NO_ANSWER: u8 = 4;
    pub(crate) const INTERRUPTED: u8 = 130;
    pub(crate) const HUNG_UP: u8 = 129;
    pub(crate) const TERMINATED: u8 = 143;
}

/// The most stdin input read as part of the prompt.
const MAX_STDIN: u64 = 8 * 1024 * 1024;

/// `--help`'s closing text; `{keys}` becomes each provider's key variables (from its `INFO`).
const AFTER_HELP: &str = "\
Keys are read from the environment, per provider (first set wins):
{keys}
A base URL on 127.0.0.1/localhost (Ollama, vLLM, LM Studio) or --no-key needs none.
`claw` with no arguments, or --replay, replays a recorded session offline.

Safety: read_file and list_dir see only the workspace (--workspace, default: the current
directory); tools with side effects (append_note) ask first, or run with --yes / the config's
`approve` list; with --json or without a terminal they are refused unless approved up front.
MCP tools (--mcp, [mcp.servers] in the config) ask the same way, unless their server is trusted
(--trust-mcp, `trusted = true`) and marks them read-only. MCP servers see only HOME, LOGNAME,
PATH, SHELL, TERM, USER and their config's `env` (`inherit_env = true` passes everything).
Control characters in model and tool text are shown, never acted on (ESC appears as ␛).
A base URL stored in a --resume file from elsewhere is used only when confirmed (--trust-base-url).

Defaults come from flags, then a resumed session, then CLAW_PROVIDER / CLAW_MODEL /
CLAW_WORKSPACE, then the config file (CLAW_CONFIG or ~/.config/claw/config.toml).

Exit codes:
  0    the run finished
  1    the provider failed (HTTP error, overloaded, bad stream, silent past --timeout, ...)
  2    invalid arguments, a prompt without an API key or provider settings, an unconfirmed
       --resume endpoint, an MCP server that does not start, an invalid --schema file or a
       model that cannot return structured output
  3    configuration error (unreadable file, bad config, unwritable --save, no recorded session)
  4    --schema: the run ended without an answer that matches the schema (invalid, cut off)
  129  the terminal closed (SIGHUP); the transcript is still saved
  130  interrupted with Ctrl-C (the transcript is still saved)
  143  stopped by SIGTERM (`kill`, `timeout`); the transcript is still saved

Logging: -v prints each request's status, retry count and duration to stderr, -vv adds debug
detail (or RUST_LOG=<filter>); retries are warned about without -v too.";

/// Run an LLM agent with tools in the terminal.
#[derive(Debug, Parser)]
#[command(name = "claw", version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    args: Args,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List every provider's known models with context window and prices (USD per million tokens).
    Models,
    /// List the saved sessions, newest first.
    Sessions,
    /// List the built-in tools, whether they have side effects, and what they need.
    Tools,
    /// Write a saved session as one self-contained HTML page (messages, tool
    /// calls with arguments and results, usage and cost per turn).
    Export {
        /// A session file, or a session ID from `claw sessions`.
        session: PathBuf,
        /// HTML (the one format so far).
        #[arg(long)]
        html: bool,
        /// Write the page to FILE instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
struct Args {
    /// The question or task. `-` reads it from stdin; piped stdin is appended to a prompt.
    prompt: Vec<String>,

    /// Which API to use (default: CLAW_PROVIDER, the config, or the first listed).
    #[arg(short, long, value_enum)]
    provider: Option<ProviderKind>,

    /// Model id (default: CLAW_MODEL, the config, or the provider's default). Any id is accepted.
    #[arg(short, long, value_parser = non_empty)]
    model: Option<String>,

    /// Base URL (http:// or https://) of an API-compatible server. A loopback URL needs no key.
    #[arg(long, value_parser = base_url)]
    base_url: Option<String>,

    /// Send no API key (for a local server that needs none).
    #[arg(long)]
    no_key: bool,

    /// Export spans and metrics (OpenTelemetry GenAI conventions) over OTLP/HTTP to this
    /// collector, such as http://127.0.0.1:4318 (config: `otlp`). Without it nothing is exported.
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,

    /// Comma-separated built-in tools to offer: read_file, list_dir, calculator,
    /// current_time, append_note. Default: all; `--tools ""` offers none.
    #[arg(long, value_delimiter = ',', num_args = 0..=1)]
    tools: Option<Vec<String>>,

    /// Start an MCP server from this command line and offer its tools (repeatable);
    /// its tools ask for approval like append_note (see --trust-mcp).
    #[arg(long = "mcp", value_name = "COMMAND")]
    mcp: Vec<String>,

    /// Trust the servers of --mcp: their tools marked read-only run without asking.
    #[arg(long)]
    trust_mcp: bool,

    /// Replay a recorded session (the provider's own, or the one in DIR) instead of calling the API.
    #[arg(long, value_name = "DIR", num_args = 0..=1)]
    replay: Option<Option<PathBuf>>,

    /// Print the run as JSON lines (schema in docs/claw.md) instead of text.
    #[arg(long)]
    json: bool,

    /// The final answer must match the JSON Schema in FILE: tools first, then one more
    /// request for the answer; the validated object is printed (with --json, a
    /// `structured_output` line).
    #[arg(long, value_name = "FILE", conflicts_with = "chat")]
    schema: Option<PathBuf>,

    /// Also write the transcript (JSON) to FILE, atomically, even when interrupted.
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,

    /// Continue the transcript saved in FILE (or the session ID from `claw sessions`), on its
    /// provider and model unless flags say otherwise.
    #[arg(long, value_name = "FILE|ID", conflicts_with = "continue_last")]
    resume: Option<PathBuf>,

    /// Use the base URL stored in a --resume file from outside claw's sessions
    /// directory without asking (the key and the conversation are sent there).
    #[arg(long)]
    trust_base_url: bool,

    /// Continue the most recent session.
    #[arg(short = 'c', long = "continue")]
    continue_last: bool,

    /// Interactive chat: a prompt per line, with line editing and history.
    #[arg(short = 'i', long)]
    chat: bool,

    /// Stop after this many assistant turns (at least 1).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..))]
    max_turns: u32,

    /// Output token limit per response (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_tokens: Option<u64>,

    /// Sampling temperature, 0 to 2.
    #[arg(long, value_parser = temperature)]
    temperature: Option<f64>,

    /// Seconds to wait for the provider's first byte, and between two pieces
    /// of its answer, before the attempt fails (default: the config's `timeout`, or 300).
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    timeout: Option<f64>,

    /// Retries after a failed attempt that sent nothing yet (default: the config's `retries`, or 2).
    #[arg(long, value_name = "N")]
    retries: Option<u32>,

    /// System prompt (replaces claw's).
    #[arg(long)]
    system: Option<String>,

    /// Root directory of the file tools (default: CLAW_WORKSPACE, the config, or the current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,

    /// Approve every tool with side effects without asking.
    #[arg(short = 'y', long)]
    yes: bool,

    /// File that the append_note tool writes to, relative to the workspace (default: claw-notes.md).
    #[arg(long, value_name = "FILE")]
    notes: Option<PathBuf>,

    /// Config file (default: CLAW_CONFIG or the user's config directory).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Print tool results whole, not only their first line.
    #[arg(short = 'x', long)]
    expand: bool,

    /// Never use colors (also: NO_COLOR=1).
    #[arg(long)]
    no_color: bool,

    /// More logging (-v info, -vv debug).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

/// A value that must not be empty (`-m ""`).
fn non_empty(value: &str) -> Result<String, String> {
    if value.trim().is_empty() {
        return Err("must not be empty".to_owned());
    }
    Ok(value.to_owned())
}

/// A temperature: a number from 0 to 2 (what the providers accept).
fn temperature(value: &str) -> Result<f64, String> {
    let t: f64 = value.parse().map_err(|_| format!("`{value}` is not a number"))?;
    if !(0.0..=2.0).contains(&t) {
        return Err(format!("{value} is outside 0 to 2"));
    }
    Ok(t)
}

/// A timeout in seconds: a positive number, at most a day.
fn seconds(value: &str) -> Result<f64, String> {
    let t: f64 = value.parse().map_err(|_| format!("`{value}` is not a number of seconds"))?;
    if !(t > 0.0 && t <= 86_400.0) {
        return Err(format!("{value} is not between 0 and 86400 seconds"));
    }
    Ok(t)
}

/// A base URL: `http://` or `https://`, a host, no spaces or control characters.
fn base_url(value: &str) -> Result<String, String> {
    let rest = value
        .strip_prefix("http://")
        .or_else(|| value.strip_prefix("https://"))
        .ok_or_else(|| format!("`{value}` is not an http:// or https:// URL"))?;
    if host_of(rest).is_empty() || host_of(rest).starts_with(':') {
        return Err(format!("`{value}` names no host"));
    }
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("`{value}` contains spaces or control characters"));
    }
    Ok(value.to_owned())
}

fn main() -> ExitCode {
    let help = AFTER_HELP.replace("{keys}", &models::key_help());
    let matches = Cli::command().after_help(help).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let no_color = cli.args.no_color || config::env("NO_COLOR").is_some();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("claw: cannot start the async runtime: {e}");
            return ExitCode::from(exit::CONFIG_ERROR);
        }
    };
    // A config that does not load is reported by the run; here it only names no endpoint.
    let otlp =
        cli.args.otlp.clone().or_else(|| config::load(cli.args.config.as_deref()).ok()?.otlp);
    let export = match otlp.map(|url| OtlpExport::start(&url, "claw", runtime.handle().clone())) {
        None => None,
        Some(Ok(export)) => Some(export),
        Some(Err(e)) => return ExitCode::from(fail(exit::USAGE, format_args!("--otlp: {e}"))),
    };
    init_tracing(cli.args.verbose, !no_color && std::io::stderr().is_terminal(), export.as_ref());
    if std::io::stdin().is_terminal() {
        save_terminal();
    }
    let code = match cli.command {
        Some(Command::Models) => print_out(&models::table()),
        Some(Command::Sessions) => sessions::print_list(),
        Some(Command::Tools) => print_out(&tools::table()),
        Some(Command::Export { session, html, output }) => {
            export_session(&session, html, output.as_deref())
        }
        None => runtime.block_on(run(cli.args)),
    };
    // Sent while the runtime that carries the requests still runs.
    if let Some(export) = export
        && let Err(e) = export.shutdown()
    {
        warn(e);
    }
    // A tool stuck in a blocking call must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(500));
    // A signal may have ended a question's line editing (raw mode) midway.
    if [exit::HUNG_UP, exit::INTERRUPTED, exit::TERMINATED].contains(&code) {
        restore_terminal();
    }
    ExitCode::from(code)
}

/// Writes a listing to stdout; a reader that closed the pipe early
/// (`claw sessions | head -1`) ends it quietly.
fn print_out(text: &str) -> u8 {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => exit::OK,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => exit::OK,
        Err(e) => fail(exit::CONFIG_ERROR, format_args!("cannot write to stdout: {e}")),
    }
}

/// `claw export`.
fn export_session(name: &std::path::Path, html: bool, output: Option<&std::path::Path>) -> u8 {
    if !html {
        return fail(exit::USAGE, "choose a format: --html");
    }
    let (path, transcript) = match sessions::find(name) {
        Ok(found) => found,
        Err(e) => return fail(exit::CONFIG_ERROR, e),
    };
    let title = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let page = export::html(&title, &transcript);
    match output {
        None => print_out(&page),
        Some(file) => match sessions::write_atomically(file, page.as_bytes()) {
            Ok(()) => exit::OK,
            Err(e) => {
                fail(exit::CONFIG_ERROR, format_args!("cannot write {}: {e}", file.display()))
            }
        },
    }
}

/// Logs to stderr, and exports through `export` when given (the only layer that wants spans
/// below `warn` by default: without it, spans cost nothing).
fn init_tracing(verbose: u8, ansi: bool, export: Option<&OtlpExport>) {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::layer::{Layer, SubscriberExt};
    use tracing_subscriber::util::SubscriberInitExt;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.is_empty() => EnvFilter::new(v),
        _ => EnvFilter::new(default),
    };
    let log = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .with_filter(filter);
    let _ = tracing_subscriber::registry().with(log).with(export.map(OtlpExport::layer)).try_init();
}

fn fail(code: u8, message: impl std::fmt::Display) -> u8 {
    note(&format!("claw: {}", sanitize::terminal(&message.to_string())));
    code
}

/// A warning on stderr (also with `--json`, whose stdout stays clean).
fn warn(message: impl std::fmt::Display) {
    note(&format!("claw: warning: {}", sanitize::terminal(&message.to_string())));
}

/// Everything a run needs that differs between live and replay mode.
struct Setup {
    model: Model,
    kind: ProviderKind,
    options: StreamOptions,
    system_prompt: Option<String>,
    prompts: Vec<Message>,
    /// Keeps the replay server alive for the run.
    _replay: Option<Box<dyn std::any::Any + Send>>,
}

/// Whether a base URL points at this machine (local servers need no key).
fn is_loopback(base_url: &str) -> bool {
    let rest = base_url.split_once("://").map_or(base_url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The prompt: the arguments, with stdin read for `-` or appended when piped
/// (or the whole prompt when there are no arguments and `stdin_alone` is set).
fn read_prompt(args: &[String], stdin_alone: bool) -> Result<(String, bool), String> {
    let wants_stdin = args.iter().any(|a| a == "-");
    let piped = (!args.is_empty() || stdin_alone) && !std::io::stdin().is_terminal();
    if !wants_stdin && !piped {
        return Ok((args.join(" "), false));
    }
    let mut input = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_STDIN + 1)
        .read_to_end(&mut input)
        .map_err(|e| format!("cannot read stdin: {e}"))?;
    if input.len() as u64 > MAX_STDIN {
        return Err(format!("stdin is larger than {} MiB", MAX_STDIN / 1024 / 1024));
    }
    let input = String::from_utf8_lossy(&input).trim_end().to_owned();
    let words: Vec<&str> = args.iter().map(String::as_str).filter(|a| *a != "-").collect();
    let prompt = match (words.is_empty(), input.is_empty()) {
        (true, _) => input,
        (false, true) => words.join(" "),
        (false, false) => format!("{}\n\n{input}", words.join(" ")),
    };
    Ok((prompt, true))
}

async fn run(args: Args) -> u8 {
    let mut interrupts = Interrupts::listen();
    let config = match config::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(exit::CONFIG_ERROR, e),
    };
    // The notes file stays in the workspace, whoever names it.
    let notes = match (&args.notes, &config.notes) {
        (Some(flag), _) => match workspace::notes_path(flag) {
            Ok(p) => p,
            Err(e) => return fail(exit::USAGE, format_args!("--notes: {e}")),
        },
        (None, Some(configured)) => match workspace::notes_path(configured) {
            Ok(p) => p,
            Err(e) => return fail(exit::CONFIG_ERROR, format_args!("config `notes`: {e}")),
        },
        (None, None) => PathBuf::from("claw-notes.md"),
    };
    let color = !args.json
        && !args.no_color
        && config::env("NO_COLOR").is_none()
        && std::io::stdout().is_terminal();

    let resumed: Option<(PathBuf, Transcript)> = if args.continue_last {
        match sessions::latest() {
            Ok(Some(found)) => Some(found),
            Ok(None) => return fail(exit::CONFIG_ERROR, "no saved session to continue"),
            Err(e) => return fail(exit::CONFIG_ERROR, e),
        }
    } else if let Some(path) = &args.resume {
        match sessions::find(path) {
            Ok(found) => Some(found),
            Err(e) => return fail(exit::CONFIG_ERROR, e),
        }
    } else {
        None
    };
    // `--base-url` or `--no-key` say the run is live: then piped stdin is the prompt.
    let live_flags = args.base_url.is_some() || args.no_key;
    let replay = args.replay.is_some()
        || (args.prompt.is_empty() && resumed.is_none() && !args.chat && !live_flags);
    if !replay
        && let Some((path, saved)) = &resumed
        && let Err((code, e)) = confirm_stored_endpoint(&args, path, saved, &mut interrupts).await
    {
        return fail(code, e);
    }
    if replay && !args.prompt.is_empty() {
        warn("--replay replays the recorded prompts; the prompt given is not sent");
    }
    if replay && args.schema.is_some() {
        return fail(exit::USAGE, "--schema needs a prompt (a replay sends its recorded requests)");
    }
    let output = match args.schema.as_deref().map(schema::load).transpose() {
        Ok(output) => output,
        Err(e) => return fail(exit::USAGE, e),
    };

    // Everything the user can get wrong is checked before any request.
    let setup = if replay {
        match replay_setup(&args, &config, color).await {
            Ok(s) => s,
            Err((code, e)) => return fail(code, e),
        }
    } else {
        match live_setup(&args, &config, resumed.as_ref().map(|(_, t)| t)) {
            Ok((s, warning)) => {
                if let Some(w) = warning {
                    warn(w);
                }
                s
            }
            Err((code, e)) => return fail(code, e),
        }
    };
    let mut save_to: Vec<sessions::AtomicFile> = Vec::new();
    // Held until the run ends: no second `claw -c` writes the same session.
    let mut session_lock = None;
    if let Some(path) = &args.save {
        match sessions::AtomicFile::prepare(path) {
            Ok(f) => save_to.push(f),
            Err(e) => return fail(exit::CONFIG_ERROR, e),
        }
    }
    if !replay {
        // Live runs are kept as sessions (`claw sessions`, `--continue`).
        let target = match &resumed {
            Some((path, _)) if args.continue_last => match sessions::lock(path) {
                Ok(Some(lock)) => {
                    session_lock = Some(lock);
                    Ok(path.clone())
                }
                Ok(None) => {
                    warn(format_args!(
                        "the session {} is in use by another claw; this conversation continues in a new session",
                        path.display()
                    ));
                    sessions::new_path()
                }
                Err(e) => Err(e),
            },
            _ => sessions::new_path(),
        };
        match target.and_then(|p| sessions::AtomicFile::prepare(&p)) {
            Ok(f) => save_to.push(f),
            Err(e) => warn(format_args!("the session will not be kept: {e}")),
        }
    }
    // Stdin is read only now, after the checks: a missing key never waits on it.
    let (user_prompt, stdin_used) = if replay {
        (String::new(), false)
    } else {
        match read_prompt(&args.prompt, !args.chat) {
            Ok(p) => p,
            Err(e) => return fail(exit::USAGE, e),
        }
    };
    let workspace_root = args
        .workspace
        .clone()
        .or_else(|| config::env("CLAW_WORKSPACE").map(PathBuf::from))
        .or_else(|| config.workspace.clone())
        .unwrap_or_else(|| PathBuf::from("."));
    let workspace = match workspace::Workspace::open(&workspace_root) {
        Ok(w) => Arc::new(w),
        Err(e) => return fail(exit::CONFIG_ERROR, e),
    };
    // Values given to MCP servers in the config are secrets as much as the API keys:
    // a server that echoes one must not put it in front of the model.
    let mut secrets = models::secrets_in_env();
    secrets.extend(config.mcp.servers.values().flat_map(|s| s.env.values().cloned()));
    let env = tools::ToolEnv { workspace, notes, secrets: Arc::new(secrets) };
    let mut toolbox = match plan::Toolbox::new(args.tools.as_deref(), &env) {
        Ok(t) => t,
        Err(e) => return fail(exit::CONFIG_ERROR, e),
    };
    if !setup.kind.declares_tools() {
        warn(format_args!("{} declares no tool support: running without tools", setup.kind));
        toolbox.set_provider_tools(false);
    }
    let mcp_configs = match plan::server_configs(&config.mcp.servers, &args.mcp, args.trust_mcp) {
        Ok(c) => c,
        Err(e) => return fail(exit::USAGE, e),
    };
    // A server that does not start is an error before any request.
    if let Err(e) = toolbox.connect_mcp(mcp_configs).await {
        return fail(exit::USAGE, e);
    }
    let code = run_with_tools(
        args,
        config,
        setup,
        resumed,
        save_to,
        user_prompt,
        stdin_used,
        &toolbox,
        interrupts,
        color,
        replay,
        output,
    )
    .await;
    toolbox.shutdown().await;
    drop(session_lock);
    code
}

/// The rest of [`run`], once the tools are known.
#[allow(clippy::too_many_arguments)]
async fn run_with_tools(
    args: Args,
    config: config::Config,
    setup: Setup,
    resumed: Option<(PathBuf, Transcript)>,
    save_to: Vec<sessions::AtomicFile>,
    user_prompt: String,
    stdin_used: bool,
    toolbox: &plan::Toolbox,
    mut interrupts: Interrupts,
    color: bool,
    replay: bool,
    mut output: Option<agent_core::AgentOutput>,
) -> u8 {
    let planned = match toolbox.plan() {
        Ok(p) => p,
        Err(e) => return fail(exit::CONFIG_ERROR, e),
    };
    let tools = planned.tools;

    let Setup { model, kind, options, system_prompt, mut prompts, _replay } = setup;
    let mut context = AgentContext { system_prompt, messages: Vec::new(), tools };
    if let Some((_, saved)) = &resumed {
        context.messages = saved.messages.clone();
        if saved.system_prompt.is_some() && args.system.is_none() {
            context.system_prompt = saved.system_prompt.clone();
        }
    }
    if !user_prompt.trim().is_empty() && prompts.is_empty() {
        prompts.push(Message::user(user_prompt));
    }

    let can_ask = !args.json
        && !stdin_used
        && !args.chat
        && std::io::stdin().is_terminal()
        && std::io::stderr().is_terminal();
    // In chat mode stdin belongs to the line editor; approvals are asked there only on a terminal.
    let can_ask = can_ask || (args.chat && std::io::stdin().is_terminal());
    let targets = std::collections::BTreeMap::from([(
        "append_note".to_owned(),
        format!("appends to {}", toolbox.notes_target().display()),
    )]);
    let approvals =
        approval::Approvals::new(args.yes, &config.approve, can_ask, targets, interrupts.raised());
    approvals.set_mcp_tools(planned.mcp_approval);
    // A model that cannot return structured output is refused before any request.
    if let Some(output) = &mut output
        && let Err(e) = schema::prepare(output, kind, &model, &context.tools)
    {
        return fail(exit::USAGE, e);
    }
    let with_schema = output.is_some();
    let agent_options = options.clone();
    let mut agent_config = AgentConfig::new(model.clone(), models::provider(kind));
    agent_config.output = output;
    agent_config.options = options;
    agent_config.max_turns = Some(args.max_turns);
    agent_config.hooks = approvals.clone();
    let agent = Agent::new(agent_config);
    let session = SessionInfo {
        kind,
        provider: kind.name(),
        model: model.clone(),
        base_url: (!replay && model.base_url != kind.default_base_url())
            .then(|| model.base_url.clone()),
    };
    let view = View {
        color,
        json: args.json,
        expand: args.expand,
        patience: patience(&agent_options),
        schema: with_schema,
    };
    if args.chat {
        let tools = ChatTools { toolbox, approvals: &approvals };
        return chat(&agent, &mut interrupts, context, prompts, &session, view, save_to, tools)
            .await;
    }
    let run = if prompts.is_empty() {
        match agent.continue_run(context) {
            Ok(r) => r,
            Err(e) => {
                return fail(exit::USAGE, format_args!("nothing to do: {e} (give a prompt)"));
            }
        }
    } else {
        agent.run(context, prompts)
    };
    let (outcome, stopped) = drive(run, &mut interrupts, &approvals, &model, view, true).await;
    let Some(outcome) = outcome else {
        return fail(exit::PROVIDER_ERROR, "the run ended without an outcome");
    };
    if let Err(e) = save(&save_to, &session, &outcome.context) {
        return fail(exit::CONFIG_ERROR, e);
    }
    let answer =
        if with_schema { schema::print(outcome.output.as_ref(), args.json) } else { Ok(()) };
    let _ = std::io::stdout().flush();
    match (exit_code(&outcome, stopped, kind, &model), answer) {
        (exit::OK, Err(e)) => fail(exit::NO_ANSWER, e),
        (code, _) => code,
    }
}

/// How events are shown.
#[derive(Clone, Copy)]
struct View {
    color: bool,
    json: bool,
    expand: bool,
    /// How long the provider may stay silent before an attempt fails.
    patience: Option<Duration>,
    /// The run's answer must match `--schema`.
    schema: bool,
}

/// How long the provider may stay silent before an attempt fails: the longer
/// of the first-byte and idle limits.
fn patience(options: &StreamOptions) -> Option<Duration> {
    match (options.timeouts.first_byte, options.timeouts.idle) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// What a saved transcript records besides the conversation.
#[derive(Clone)]
struct SessionInfo {
    kind: ProviderKind,
    provider: &'static str,
    model: Model,
    base_url: Option<String>,
}

/// Writes the transcript to every target, atomically.
fn save(
    targets: &[sessions::AtomicFile],
    session: &SessionInfo,
    context: &AgentContext,
) -> Result<(), String> {
    let transcript = Transcript {
        provider: session.provider.to_owned(),
        model: session.model.id.clone(),
        base_url: session.base_url.clone(),
        system_prompt: context.system_prompt.clone(),
        messages: context.messages.clone(),
    };
    for target in targets {
        target
            .commit(&transcript)
            .map_err(|e| format!("cannot save {}: {e}", target.path().display()))?;
    }
    Ok(())
}

/// The process exit code for a finished run.
fn exit_code(
    outcome: &agent_core::AgentOutcome,
    stopped: Option<Stop>,
    kind: ProviderKind,
    model: &Model,
) -> u8 {
    match outcome.reason {
        _ if stopped.is_some() => stopped.map_or(exit::INTERRUPTED, Stop::code),
        EndReason::Error => {
            let failed = outcome.messages().iter().rev().find_map(|m| match m {
                Message::Assistant(a) if a.error_message.is_some() => Some(&**a),
                _ => None,
            });
            fail(exit::PROVIDER_ERROR, provider_failure(failed, kind, model))
        }
        EndReason::Aborted => exit::INTERRUPTED,
        // The loop refused to go on (an invalid tool set, a failing turn hook).
        EndReason::Failed => fail(
            exit::CONFIG_ERROR,
            format_args!(
                "the agent run failed: {}",
                outcome.error.as_ref().map(ToString::to_string).unwrap_or_default()
            ),
        ),
        _ => exit::OK,
    }
}

/// A provider failure as one line: who, what kind of failure, the provider's
/// own message, and what to check.
fn provider_failure(
    failed: Option<&llm_core::AssistantMessage>,
    kind: ProviderKind,
    model: &Model,
) -> String {
    let message = failed.and_then(|a| a.error_message.as_deref()).unwrap_or("no details");
    let error_type = failed.and_then(|a| a.error_type.as_deref()).unwrap_or("");
    // The exact status when the provider's error came with one, else the statuses of the kind.
    let status = |range: &str| match failed.and_then(|a| a.error_status) {
        Some(code) => format!("HTTP {code}"),
        None => format!("HTTP {range}"),
    };
    let keys = if kind.key_vars().is_empty() {
        "the credentials".to_owned()
    } else {
        kind.key_vars().join(" or ")
    };
    let (what, hint) = match error_type {
        "auth" => {
            (format!("refused the credentials ({})", status("401/403")), format!("check {keys}"))
        }
        "rate_limited" => (
            format!("is rate limiting ({})", status("429")),
            "wait and try again (--retries sets how often claw retries)".to_owned(),
        ),
        "overloaded" => (
            format!("is overloaded or failing ({})", status("5xx")),
            "try again later (--retries sets how often claw retries)".to_owned(),
        ),
        "invalid_request" => (
            format!("rejected the request ({})", status("400/404/422")),
            "check the model id (`claw models` lists known ones) and the base URL".to_owned(),
        ),
        "context_length" => (
            "cannot fit the conversation".to_owned(),
            "start a new session, or use a model with a larger context window".to_owned(),
        ),
        "transport" => (
            "could not be reached".to_owned(),
            "check that the server is running and the base URL (--base-url)".to_owned(),
        ),
        "decode" | "truncated" => (
            "sent an answer claw could not read".to_owned(),
            "try again; -vv shows the exchange".to_owned(),
        ),
        _ => ("failed".to_owned(), String::new()),
    };
    let place = if model.base_url.trim().is_empty() {
        kind.name().to_owned()
    } else {
        format!("{} at {}", kind.name(), host_of(&model.base_url))
    };
    let hint = if hint.is_empty() { String::new() } else { format!(" ({hint})") };
    format!("{place} {what}: {message}{hint}")
}

/// The terminal's settings when claw started (stdin a terminal).
#[cfg(unix)]
static TERMINAL: std::sync::Mutex<Option<nix::sys::termios::Termios>> = std::sync::Mutex::new(None);

/// Remembers the terminal's settings, to put back if a signal ends claw
/// while line editing has the terminal in raw mode.
fn save_terminal() {
    #[cfg(unix)]
    if let (Ok(settings), Ok(mut saved)) =
        (nix::sys::termios::tcgetattr(std::io::stdin()), TERMINAL.lock())
    {
        *saved = Some(settings);
    }
}

/// Puts the terminal's settings back as they were when claw started.
fn restore_terminal() {
    #[cfg(unix)]
    if let Ok(saved) = TERMINAL.lock()
        && let Some(settings) = saved.as_ref()
    {
        let _ = nix::sys::termios::tcsetattr(
            std::io::stdin(),
            nix::sys::termios::SetArg::TCSANOW,
            settings,
        );
    }
}

/// Why a run is being stopped from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Ctrl-C (SIGINT).
    Interrupt,
    /// SIGTERM (`kill`, `timeout`).
    Terminate,
    /// SIGHUP (the terminal closed).
    HangUp,
}

impl Stop {
    /// The exit code: 128 + the signal number, as a shell reports it.
    fn code(self) -> u8 {
        match self {
            Stop::Interrupt => exit::INTERRUPTED,
            Stop::Terminate => exit::TERMINATED,
            Stop::HangUp => exit::HUNG_UP,
        }
    }
}

/// Ctrl-C, SIGTERM and SIGHUP, listened for from the start of the run: a
/// listener only sees the signals that arrive after it is registered, and
/// before that each of them kills the process without saving.
struct Interrupts {
    #[cfg(unix)]
    signals: [(Stop, Option<tokio::signal::unix::Signal>); 3],
    /// A Ctrl-C read as a key (at a question, where the terminal is raw).
    raised: Arc<tokio::sync::Notify>,
}

impl Interrupts {
    /// Registers the listeners (inside the runtime).
    fn listen() -> Interrupts {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Interrupts {
                signals: [
                    (Stop::Interrupt, signal(SignalKind::interrupt()).ok()),
                    (Stop::Terminate, signal(SignalKind::terminate()).ok()),
                    (Stop::HangUp, signal(SignalKind::hangup()).ok()),
                ],
                raised: Arc::default(),
            }
        }
        #[cfg(not(unix))]
        {
            Interrupts { raised: Arc::default() }
        }
    }

    /// What a question raises when Ctrl-C is typed at it.
    fn raised(&self) -> Arc<tokio::sync::Notify> {
        self.raised.clone()
    }

    /// The next stop signal (cancel-safe).
    async fn next(&mut self) -> Stop {
        let raised = self.raised.clone();
        tokio::select! {
            stop = self.signal() => stop,
            () = raised.notified() => Stop::Interrupt,
        }
    }

    async fn signal(&mut self) -> Stop {
        #[cfg(unix)]
        {
            let waits = self.signals.iter_mut().filter_map(|(stop, signal)| {
                let signal = signal.as_mut()?;
                let stop = *stop;
                Some(Box::pin(async move {
                    signal.recv().await;
                    stop
                }))
            });
            let waits: Vec<_> = waits.collect();
            if waits.is_empty() {
                return std::future::pending().await;
            }
            futures_util::future::select_all(waits).await.0
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Stop::Interrupt
        }
    }
}

/// A line on stderr that never panics (the terminal may be gone after SIGHUP,
/// and `eprintln!` would panic on the failed write before the transcript is saved).
fn note(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Shows a run's events until it ends; Ctrl-C, SIGTERM or SIGHUP abort it (a
/// second one quits at once). Returns the outcome and what stopped it, if anything.
async fn drive(
    mut run: agent_core::AgentRun,
    interrupts: &mut Interrupts,
    approvals: &approval::Approvals,
    model: &Model,
    view: View,
    echo_user: bool,
) -> (Option<agent_core::AgentOutcome>, Option<Stop>) {
    let started = Instant::now();
    let mut renderer =
        render::Renderer::new(view.color, view.json, view.expand, echo_user, model.clone())
            .with_patience(view.patience);
    let token = run.cancel_token();
    let mut stopped = None;
    loop {
        tokio::select! {
            event = run.next() => match event {
                Some(agent_core::AgentEvent::ApprovalRequested { tool_call_id, tool_name, args, .. }) => {
                    // One question at a time: the run's other events wait until it is answered.
                    let decisions = run.approvals();
                    match approvals.ask_person(&tool_name, &args).await {
                        approval::Verdict::Allow => decisions.approve(&tool_call_id),
                        approval::Verdict::Deny(reason) => decisions.deny(&tool_call_id, Some(reason)),
                    }
                }
                Some(event) => renderer.event(&event),
                None => break,
            },
            stop = interrupts.next() => {
                if stopped.is_some() {
                    // A second signal quits without waiting for the run to wind down.
                    restore_terminal();
                    std::process::exit(i32::from(stop.code()));
                }
                stopped = Some(stop);
                token.cancel();
                if !view.json && stop == Stop::Interrupt {
                    note(&format!("\n{}", render::dim("interrupted: aborting the run (every pending tool call gets a result; Ctrl-C again quits at once)", view.color)));
                }
            }
        }
    }
    if view.json && view.schema {
        schema::print_json(run.outcome().and_then(|o| o.output.as_ref()));
    }
    renderer.finish(started.elapsed());
    (run.outcome().cloned(), stopped)
}

/// What a chat re-plans between turns.
struct ChatTools<'a> {
    toolbox: &'a plan::Toolbox,
    approvals: &'a approval::Approvals,
}

/// `--chat`: one conversation, a prompt per line (line editing and history
/// by rustyline), kept as a session after every exchange. `/expand` shows the
/// last exchange's tool results whole; Ctrl-D, `/exit` or Ctrl-C at the
/// prompt end it.
#[allow(clippy::too_many_arguments)]
async fn chat(
    agent: &Agent,
    interrupts: &mut Interrupts,
    mut context: AgentContext,
    first: Vec<Message>,
    session: &SessionInfo,
    view: View,
    mut save_to: Vec<sessions::AtomicFile>,
    tools: ChatTools<'_>,
) -> u8 {
    let mut agent = agent.clone();
    let mut session = session.clone();
    let history = config::data_dir().map(|d| d.join("history.txt"));
    let mut editor = match rustyline::DefaultEditor::new() {
        Ok(e) => e,
        Err(e) => {
            return fail(exit::CONFIG_ERROR, format_args!("cannot start the line editor: {e}"));
        }
    };
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    if !view.json {
        note(&render::dim(
            &format!(
                "chat with {} ({}); /help lists the commands; /exit or Ctrl-D quits",
                session.model.id, session.provider
            ),
            view.color,
        ));
    }
    let mut pending = first;
    let mut code = exit::OK;
    // The tool results of the last exchange, for `/expand`.
    let mut last_results: Vec<llm_core::ToolResultMessage> = Vec::new();
    loop {
        if pending.is_empty() {
            let reading = tokio::task::spawn_blocking(move || {
                let line = editor.readline("you › ");
                (editor, line)
            });
            // Every exchange is saved already: a SIGTERM or SIGHUP here only ends the chat,
            // and the line editor's raw mode is undone (its thread stays blocked in a read).
            let read = tokio::select! {
                read = reading => read,
                stop = interrupts.next() => {
                    restore_terminal();
                    note("");
                    return stop.code();
                }
            };
            let (returned, line) = match read {
                Ok(r) => r,
                Err(e) => {
                    return fail(exit::CONFIG_ERROR, format_args!("the line editor failed: {e}"));
                }
            };
            editor = returned;
            let line = match line {
                Ok(l) => l,
                Err(
                    rustyline::error::ReadlineError::Eof
                    | rustyline::error::ReadlineError::Interrupted,
                ) => break,
                Err(e) => return fail(exit::CONFIG_ERROR, format_args!("cannot read input: {e}")),
            };
            let text = line.trim();
            if text.is_empty() {
                continue;
            }
            let _ = editor.add_history_entry(text);
            // `//text` sends `/text`; any other line starting with `/` is a command.
            let text = match text.strip_prefix('/') {
                Some(rest) if rest.starts_with('/') => rest,
                Some(command) => {
                    let mut chat = ChatState {
                        agent: &mut agent,
                        session: &mut session,
                        context: &mut context,
                        save_to: &mut save_to,
                        last_results: &last_results,
                        approvals: tools.approvals,
                    };
                    match chat_command(command, &mut chat) {
                        ChatCommand::Quit => break,
                        ChatCommand::Done(shown) => {
                            print_out(&shown);
                            continue;
                        }
                    }
                }
                None => text,
            };
            pending.push(Message::user(text.to_owned()));
        }
        // MCP servers re-list changed tools and restart between turns.
        if tools.toolbox.refresh().await {
            match tools.toolbox.plan() {
                Ok(planned) => {
                    context.tools = planned.tools;
                    tools.approvals.set_mcp_tools(planned.mcp_approval);
                }
                Err(e) => warn(format_args!("the tools were not updated: {e}")),
            }
        }
        let run = agent.run(context.clone(), std::mem::take(&mut pending));
        let (outcome, stopped) =
            drive(run, interrupts, tools.approvals, &session.model, view, false).await;
        let Some(outcome) = outcome else {
            return fail(exit::PROVIDER_ERROR, "the run ended without an outcome");
        };
        // The conversation goes on after an interrupted or failed exchange;
        // the exit code tells whether the last one failed.
        code = match outcome.reason {
            EndReason::Error | EndReason::Failed => {
                exit_code(&outcome, None, session.kind, &session.model)
            }
            _ => exit::OK,
        };
        last_results = outcome
            .messages()
            .iter()
            .filter_map(|m| match m {
                Message::ToolResult(r) => Some(r.clone()),
                _ => None,
            })
            .collect();
        context = outcome.context;
        if let Err(e) = save(&save_to, &session, &context) {
            return fail(exit::CONFIG_ERROR, e);
        }
        // Ctrl-C ends the exchange; SIGTERM and SIGHUP end the chat (after the save).
        if let Some(stop @ (Stop::Terminate | Stop::HangUp)) = stopped {
            return stop.code();
        }
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    code
}

/// What a chat command may change.
struct ChatState<'a> {
    agent: &'a mut Agent,
    session: &'a mut SessionInfo,
    context: &'a mut AgentContext,
    save_to: &'a mut Vec<sessions::AtomicFile>,
    last_results: &'a [llm_core::ToolResultMessage],
    approvals: &'a approval::Approvals,
}

/// What a chat command did.
enum ChatCommand {
    /// End the chat.
    Quit,
    /// Show this text and read the next line.
    Done(String),
}

/// The chat commands, for `/help`.
const CHAT_HELP: &str = "\
/help          this list
/model [ID]    show the model, or switch to model ID (same provider and endpoint)
/tools         the tools offered, and which ones ask first
/save FILE     write the conversation to FILE now (a transcript, like --save)
/clear         start a new conversation (the current one stays in its session file)
/expand        the last exchange's tool results, whole
/exit, /quit   end the chat (also Ctrl-D)
//text         send a line that starts with `/`
";

/// Runs the chat command `line` (without its leading `/`).
fn chat_command(line: &str, chat: &mut ChatState<'_>) -> ChatCommand {
    let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    let done =
        |text: String| ChatCommand::Done(format!("{}\n", sanitize::terminal(text.trim_end())));
    match name {
        "exit" | "quit" => ChatCommand::Quit,
        "help" => done(CHAT_HELP.to_owned()),
        "expand" => ChatCommand::Done(render::tool_results_in_full(chat.last_results)),
        "model" if rest.is_empty() => done(format!(
            "model {} ({}) at {}",
            chat.session.model.id, chat.session.provider, chat.session.model.base_url
        )),
        "model" => {
            let kind = chat.session.kind;
            let base_url = chat.session.model.base_url.clone();
            let (mut model, warning) = models::resolve(kind, Some(rest), Some(&base_url));
            model.base_url = base_url;
            let mut config = chat.agent.config().clone();
            config.model = model.clone();
            *chat.agent = Agent::new(config);
            chat.session.model = model;
            let warning = warning.map(|w| format!(" ({w})")).unwrap_or_default();
            done(format!("now using {rest}{warning}"))
        }
        "tools" => {
            let mut out = String::new();
            for tool in &chat.context.tools {
                let asks = chat.approvals.asks(&tool.tool.name);
                let first = tool.tool.description.lines().next().unwrap_or("");
                out.push_str(&format!(
                    "{}{}  {first}\n",
                    tool.tool.name,
                    if asks { " (asks first)" } else { "" }
                ));
            }
            if out.is_empty() {
                out.push_str("no tools are offered\n");
            }
            done(out)
        }
        "save" if rest.is_empty() => done("usage: /save FILE".to_owned()),
        "save" => {
            let saved = sessions::AtomicFile::prepare(std::path::Path::new(rest))
                .and_then(|target| save(&[target], chat.session, chat.context));
            match saved {
                Ok(()) => done(format!("saved to {rest}")),
                Err(e) => done(format!("not saved: {e}")),
            }
        }
        "clear" => {
            // The conversation so far stays where it was saved; a new session takes over.
            let kept: Vec<String> =
                chat.save_to.iter().map(|t| t.path().display().to_string()).collect();
            match sessions::new_path().and_then(|p| sessions::AtomicFile::prepare(&p)) {
                Ok(fresh) => {
                    *chat.save_to = vec![fresh];
                    chat.context.messages.clear();
                    done(format!(
                        "new conversation; the last one stays in {}",
                        if kept.is_empty() { "no file".to_owned() } else { kept.join(", ") }
                    ))
                }
                Err(e) => done(format!("not cleared: {e}")),
            }
        }
        _ => done(format!("unknown command `/{name}`; /help lists the commands")),
    }
}

type SetupError = (u8, String);

/// The host (and port) of a URL, for questions and messages.
fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority.rsplit_once('@').map_or(authority, |(_, h)| h)
}

/// A transcript from a file claw did not write (outside its private sessions
/// directory) may name any endpoint: its base URL is used only when the user
/// says so (`--trust-base-url`, or yes at the question), after seeing the host.
async fn confirm_stored_endpoint(
    args: &Args,
    path: &std::path::Path,
    saved: &Transcript,
    interrupts: &mut Interrupts,
) -> Result<(), SetupError> {
    let Some(url) = &saved.base_url else { return Ok(()) };
    let saved_kind = ProviderKind::from_name(&saved.provider);
    let applies = args.base_url.is_none()
        && args.provider.is_none_or(|p| Some(p) == saved_kind)
        && saved_kind.is_some_and(|k| k.default_base_url() != url);
    if !applies || args.trust_base_url || sessions::is_own(path) {
        return Ok(());
    }
    let host = sanitize::terminal(host_of(url)).into_owned();
    let explain = format!(
        "{} sends its requests to {host} ({}), not to the provider's own endpoint",
        path.display(),
        sanitize::terminal(url)
    );
    let can_ask = !args.json && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !can_ask {
        return Err((
            exit::USAGE,
            format!(
                "{explain}: pass --trust-base-url to send your key and the conversation there, or --base-url to choose"
            ),
        ));
    }
    note(&format!("claw: {explain}."));
    let question = format!("claw: send your key and the conversation to {host}? [y/N] ");
    // Rustyline reads Ctrl-C as a key; a SIGINT that still arrives answers too.
    let answer = tokio::select! {
        answer = approval::ask(question) => answer,
        _ = interrupts.next() => approval::Answer::Interrupted,
    };
    match answer {
        approval::Answer::Line(l) if matches!(l.trim(), "y" | "Y" | "yes") => Ok(()),
        approval::Answer::Interrupted => Err((exit::INTERRUPTED, "interrupted".to_owned())),
        _ => Err((exit::USAGE, format!("not using {host}; pass --base-url to choose an endpoint"))),
    }
}

/// The base URL the config gives `kind`, under any of its names.
fn config_base_url(config: &config::Config, kind: ProviderKind) -> Option<String> {
    config.base_urls.get(kind.name()).cloned().or_else(|| {
        config
            .base_urls
            .iter()
            .find(|(name, _)| ProviderKind::from_name(name) == Some(kind))
            .map(|(_, url)| url.clone())
    })
}

/// A live run: provider, model, base URL and key from flags, the resumed
/// session, the environment and the config, in that order.
fn live_setup(
    args: &Args,
    config: &config::Config,
    resumed: Option<&Transcript>,
) -> Result<(Setup, Option<String>), SetupError> {
    let from_config = |name: &str, source: &str| {
        ProviderKind::from_name(name)
            .ok_or_else(|| (exit::CONFIG_ERROR, format!("unknown provider `{name}` in {source}")))
    };
    let saved_kind = match resumed {
        Some(t) => Some(from_config(&t.provider, "the saved session")?),
        None => None,
    };
    let kind = match (args.provider, saved_kind) {
        (Some(k), _) | (None, Some(k)) => k,
        (None, None) => match (config::env("CLAW_PROVIDER"), &config.provider) {
            (Some(name), _) => from_config(&name, "CLAW_PROVIDER")?,
            (None, Some(name)) => from_config(name, "the config")?,
            (None, None) => ProviderKind::first(),
        },
    };
    // The saved model only applies to the provider it was made with.
    let saved = resumed.filter(|_| saved_kind == Some(kind));
    let model_id = args
        .model
        .clone()
        .or_else(|| saved.map(|t| t.model.clone()))
        .or_else(|| config::env("CLAW_MODEL"))
        .or_else(|| config.model.clone());
    let base_url = args
        .base_url
        .clone()
        .or_else(|| saved.and_then(|t| t.base_url.clone()))
        .or_else(|| config_base_url(config, kind));
    let key = kind.key_vars().iter().find_map(|v| config::env(v));
    let keyless = args.no_key || base_url.as_deref().is_some_and(is_loopback);
    let key = match key {
        Some(k) => Some(k),
        // Bedrock without a key signs with the AWS environment's credentials.
        None if kind.key_optional() && !args.no_key => None,
        // Local servers ignore the key, but every adapter requires one to be set.
        None if keyless => Some("no-key".to_owned()),
        None => {
            return Err((
                exit::USAGE,
                format!(
                    "no API key for {}: set {} (or run `claw` with no arguments for the offline replay, or pass --no-key for a local server)",
                    kind.name(),
                    kind.key_vars().join(" or ")
                ),
            ));
        }
    };
    let (model, warning) = models::resolve(kind, model_id.as_deref(), base_url.as_deref());
    let mut options = StreamOptions {
        api_key: key.map(ApiKey::new),
        max_tokens: args.max_tokens,
        temperature: args.temperature,
        ..StreamOptions::default()
    };
    if let Some(secs) = args.timeout.or(config.timeout) {
        let limit = Duration::from_secs_f64(secs);
        options.timeouts.first_byte = Some(limit);
        options.timeouts.idle = Some(limit);
        options.timeouts.connect = options.timeouts.connect.map(|c| c.min(limit));
    }
    if let Some(retries) = args.retries.or(config.retries) {
        options.retry.max_retries = retries;
    }
    // Missing credentials or endpoint settings fail here, before anything runs.
    kind.preflight(&model, &options).map_err(|e| (exit::USAGE, format!("{}: {e}", kind.name())))?;
    let system_prompt =
        Some(args.system.clone().unwrap_or_else(|| models::SYSTEM_PROMPT.to_owned()));
    Ok((Setup { model, kind, options, system_prompt, prompts: Vec::new(), _replay: None }, warning))
}

/// The offline replay: a recorded session (`--replay DIR`, or the one built in
/// for the provider) served on 127.0.0.1.
async fn replay_setup(
    args: &Args,
    config: &config::Config,
    color: bool,
) -> Result<Setup, SetupError> {
    let kind = match args.provider {
        Some(k) => k,
        None => config::env("CLAW_PROVIDER")
            .or_else(|| config.provider.clone())
            .and_then(|name| ProviderKind::from_name(&name))
            .unwrap_or_else(ProviderKind::first),
    };
    let source = match args.replay.clone().flatten() {
        Some(dir) => offline::Source::Dir(dir),
        None => offline::Source::Embedded(kind.crate_name()),
    };
    let replay = start_replay(&source).await.map_err(|e| {
        let message = match &source {
            offline::Source::Dir(_) => e,
            offline::Source::Embedded(_) => format!(
                "no recording for provider {}: replay the {} one (`claw --replay`), pass --replay DIR, or set {} and give a prompt ({e})",
                kind.name(),
                ProviderKind::first().name(),
                kind.key_vars().join(" or ")
            ),
        };
        (exit::CONFIG_ERROR, message)
    })?;
    // Named as chosen (`openai` stays `openai`) when the recording is that provider's.
    let kind = if replay.kind == kind { kind } else { replay.kind };
    if !args.json {
        note(&render::dim(
            &format!(
                "replay: no live API call. Replaying the recorded session {} through the real {} adapter on {} (real tools run).",
                source.describe(),
                kind.name(),
                replay.model.base_url
            ),
            color,
        ));
    }
    let options =
        StreamOptions { api_key: Some(ApiKey::new("replay-no-key")), ..StreamOptions::default() };
    Ok(Setup {
        model: replay.model,
        kind,
        options,
        system_prompt: replay.system_prompt,
        prompts: replay.prompts,
        _replay: Some(replay.guard),
    })
}

/// A started replay.
struct Replay {
    model: Model,
    kind: ProviderKind,
    system_prompt: Option<String>,
    prompts: Vec<Message>,
    guard: Box<dyn std::any::Any + Send>,
}

/// Loads the recorded session of `source` and serves it on 127.0.0.1: the one
/// call into the replay machinery ([`offline`], on `llm-testkit`).
async fn start_replay(source: &offline::Source) -> Result<Replay, String> {
    let session = offline::load(source).map_err(|e| match source {
        offline::Source::Dir(dir) => {
            format!("cannot load the recorded session {} ({e}); pass --replay DIR", dir.display())
        }
        offline::Source::Embedded(_) => e,
    })?;
    let server =
        session.serve().await.map_err(|e| format!("cannot start the replay server: {e}"))?;
    let kind = ProviderKind::from_api(&session.model.api)
        .ok_or_else(|| format!("recorded session uses unknown api {}", session.model.api))?;
    let mut model = session.model.clone();
    model.base_url = server.base_url();
    Ok(Replay {
        model,
        kind,
        system_prompt: session.context.system_prompt.clone(),
        prompts: session.context.messages.clone(),
        guard: Box::new(server),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_detection() {
        for url in [
            "http://127.0.0.1:11434/v1",
            "http://localhost:8000",
            "http://[::1]:1234/v1",
            "http://user@127.0.0.2",
            "LOCALHOST",
        ] {
            assert!(super::is_loopback(url), "{url}");
        }
        for url in ["https://api.openai.com/v1", "http://10.0.0.1", "http://localhost.evil.com"] {
            assert!(!super::is_loopback(url), "{url}");
        }
    }
}
