//! The config file (TOML) and where `claw` keeps its files.
//!
//! Precedence, highest first: command-line flags, a resumed session's own
//! provider and model, the environment (`CLAW_PROVIDER`, `CLAW_MODEL`,
//! `CLAW_WORKSPACE`), the config file, built-in defaults.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// `config.toml` in the user's config directory (or `--config` / `CLAW_CONFIG`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Config {
    /// Default provider (a provider crate's `INFO.name` or an alias such as `openai`).
    pub(crate) provider: Option<String>,
    /// Default model id.
    pub(crate) model: Option<String>,
    /// Default workspace root for the file tools.
    pub(crate) workspace: Option<PathBuf>,
    /// Tools with side effects that run without asking.
    #[serde(default)]
    pub(crate) approve: Vec<String>,
    /// Base URL per provider name (e.g. `openai = "http://127.0.0.1:11434/v1"`).
    #[serde(default)]
    pub(crate) base_urls: BTreeMap<String, String>,
    /// Where `append_note` writes.
    pub(crate) notes: Option<PathBuf>,
    /// Seconds to wait for the provider's first byte and between two pieces (`--timeout`).
    pub(crate) timeout: Option<f64>,
    /// Retries of a failed attempt that sent nothing yet (`--retries`).
    pub(crate) retries: Option<u32>,
    /// MCP servers whose tools are offered with the built-in ones.
    #[serde(default)]
    pub(crate) mcp: McpSection,
    /// The OTLP/HTTP endpoint spans and metrics are exported to (`--otlp`).
    pub(crate) otlp: Option<String>,
}

/// `[mcp]`: MCP servers by id (`[mcp.servers.fs]`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpSection {
    /// Server id -> how to reach it.
    #[serde(default)]
    pub(crate) servers: BTreeMap<String, McpServerEntry>,
}

/// One MCP server: a `command` (stdio, with `args`, `env`, `cwd`) or a `url`
/// (streamable HTTP).
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpServerEntry {
    /// The program of a stdio server.
    pub(crate) command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub(crate) args: Vec<String>,
    /// Extra environment variables (values may be secrets: never printed).
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    /// Its working directory.
    pub(crate) cwd: Option<PathBuf>,
    /// The endpoint of a streamable HTTP server.
    pub(crate) url: Option<String>,
    /// Trust the server's tool annotations: its read-only tools run without asking.
    #[serde(default)]
    pub(crate) trusted: bool,
    /// Pass claw's whole environment (every key and token in it) to a stdio server.
    #[serde(default)]
    pub(crate) inherit_env: bool,
}

impl std::fmt::Debug for McpServerEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerEntry")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("url", &self.url)
            .field("trusted", &self.trusted)
            .field("inherit_env", &self.inherit_env)
            .finish()
    }
}

/// The project directories (`~/.config/claw`, `~/.local/share/claw` on Linux).
fn dirs() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("", "", "claw")
}

/// The config file in use: `explicit`, else `CLAW_CONFIG`, else the user's config directory.
pub(crate) fn path(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("CLAW_CONFIG").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    dirs().map(|d| d.config_dir().join("config.toml"))
}

/// Whether the config file was named (by `--config` or `CLAW_CONFIG`).
fn named(explicit: Option<&Path>) -> bool {
    explicit.is_some() || std::env::var_os("CLAW_CONFIG").is_some_and(|v| !v.is_empty())
}

/// Where `claw` keeps its data (sessions, chat history).
pub(crate) fn data_dir() -> Option<PathBuf> {
    dirs().map(|d| d.data_dir().to_path_buf())
}

/// Where saved sessions live.
pub(crate) fn sessions_dir() -> Option<PathBuf> {
    dirs().map(|d| d.data_dir().join("sessions"))
}

/// Loads the config; a missing default file is an empty config, a missing
/// named one (`--config`, `CLAW_CONFIG`) or a malformed one is an error.
pub(crate) fn load(explicit: Option<&Path>) -> Result<Config, String> {
    let Some(path) = path(explicit) else { return Ok(Config::default()) };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        // Only the default location may be missing: a named file (`--config`, `CLAW_CONFIG`) must exist.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !named(explicit) => {
            return Ok(Config::default());
        }
        Err(e) => return Err(format!("cannot read the config {}: {e}", path.display())),
    };
    let config: Config =
        toml::from_str(&text).map_err(|e| format!("config {}: {e}", path.display()))?;
    // Names are checked here so a typo is an error, not a silently ignored setting.
    for name in &config.approve {
        // `server__tool` names an MCP tool, known only once its server runs.
        if crate::tools::spec(name).is_none() && !name.contains("__") {
            return Err(format!(
                "config {}: `approve` names an unknown tool `{name}`",
                path.display()
            ));
        }
    }
    for name in config.base_urls.keys().chain(config.provider.iter()) {
        if crate::models::ProviderKind::from_name(name).is_none() {
            return Err(format!("config {}: unknown provider `{name}`", path.display()));
        }
    }
    if let Some(t) = config.timeout
        && !(t > 0.0 && t <= 86_400.0)
    {
        return Err(format!(
            "config {}: `timeout` = {t} is not between 0 and 86400 seconds",
            path.display()
        ));
    }
    // Server definitions are checked before anything starts.
    crate::plan::server_configs(&config.mcp.servers, &[], false)
        .map_err(|e| format!("config {}: {e}", path.display()))?;
    Ok(config)
}

/// A non-empty environment variable.
pub(crate) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}
