//! How to reach an MCP server.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use llm_core::ApiKey;

use crate::error::McpError;

/// How to reach one server.
#[derive(Clone)]
pub enum McpTransport {
    /// A child process speaking JSON-RPC over its stdin and stdout.
    Stdio {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables (values may be secrets: never printed).
        env: BTreeMap<String, String>,
        /// Working directory (default: ours).
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP at `url`.
    Http {
        /// The endpoint, such as `http://127.0.0.1:3000/mcp`.
        url: String,
        /// Sent as `Authorization: Bearer <token>`.
        bearer_token: Option<ApiKey>,
        /// Extra headers (values may be secrets: never printed).
        headers: BTreeMap<String, String>,
    },
}

impl fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Environment values and header values are often credentials: names only.
        match self {
            McpTransport::Stdio { program, args, env, cwd } => f
                .debug_struct("Stdio")
                .field("program", program)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .field("cwd", cwd)
                .finish(),
            McpTransport::Http { url, bearer_token, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("bearer_token", bearer_token)
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

/// One server: its id, how to reach it, and its limits.
#[derive(Debug, Clone)]
pub struct McpServerConfig {
    /// Short id (`[A-Za-z][A-Za-z0-9_-]*`, at most 32 characters): the prefix
    /// of its tools' names and the key of its availability value.
    pub id: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// How long the `initialize` handshake and the first tool listing may take
    /// (`npx -y` may download the server first).
    pub connect_timeout: Duration,
    /// How long a call may go without an answer or a progress notification.
    pub call_timeout: Duration,
    /// How many times a server whose connection died is started again within
    /// [`McpServerConfig::restart_window`]; once they are used up its tools stay
    /// hidden until the oldest restart leaves the window.
    pub max_restarts: u32,
    /// The window over which restarts count: a restart older than this no
    /// longer counts against [`McpServerConfig::max_restarts`], so crashes days
    /// apart never disable a server for good.
    pub restart_window: Duration,
    /// The first restart after a crash is immediate; each further restart
    /// within the window waits twice as long as the one before, starting here
    /// (capped at [`MAX_RESTART_BACKOFF`]).
    pub restart_backoff: Duration,
    /// A stdio server inherits this process's whole environment (every key and
    /// token of the user) when `true`; by default it gets only
    /// [`SAFE_ENV_VARS`] and its own `env`.
    pub inherit_env: bool,
    /// Whether the server's tool annotations are believed: only a trusted
    /// server's `readOnlyHint` (and other reassuring hints) reach the tool
    /// descriptors, so an approval prompt asks before any tool of an untrusted
    /// server runs.
    pub trusted: bool,
    /// Bounds on what the server sends.
    pub limits: McpLimits,
    /// The time source of the restart bookkeeping (replaceable in tests).
    pub clock: Arc<dyn Clock>,
}

/// A time source (the restart window and backoff read it).
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now.
    fn now(&self) -> Instant;
}

/// The system's monotonic clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Bounds on what a server sends; every peer is untrusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpLimits {
    /// Text of one tool result, in bytes, over all its text blocks; the rest is
    /// cut and a marker says how much.
    pub max_result_text_bytes: usize,
    /// Decoded size of one image in a result; a larger one is described in
    /// text. The default is the smallest per-image limit of the providers,
    /// Amazon Bedrock's 3.75 MB (Anthropic's is 5 MB; as base64 the default
    /// is 5,000,000 bytes, under it however it is counted).
    pub max_image_bytes: usize,
    /// Tools kept from one server (the listing stops there).
    pub max_tools: usize,
    /// Serialized input schema of one tool, in bytes; a tool with a larger one
    /// is dropped with a warning.
    pub max_schema_bytes: usize,
    /// Characters of one tool description; the rest is cut.
    pub max_description_chars: usize,
    /// One JSON-RPC message: a stdio line, an HTTP JSON body or SSE event; a
    /// larger one ends the connection (stdio) or fails the request (HTTP).
    pub max_message_bytes: usize,
    /// How long one call may run in all, progress or not.
    pub max_call_duration: Duration,
    /// At most one progress update per interval reaches the agent loop.
    pub progress_interval: Duration,
    /// How long shutdown waits after closing stdin, and again after `SIGTERM`,
    /// before the next step.
    pub shutdown_grace: Duration,
}

/// Default [`McpLimits::max_image_bytes`]: Amazon Bedrock's 3.75 MB per image.
pub const DEFAULT_MAX_IMAGE_BYTES: usize = 3_750_000;

impl Default for McpLimits {
    fn default() -> Self {
        McpLimits {
            max_result_text_bytes: 100_000,
            max_image_bytes: DEFAULT_MAX_IMAGE_BYTES,
            // OpenAI takes at most 128 tools in one request.
            max_tools: 128,
            max_schema_bytes: 64 * 1024,
            max_description_chars: 2048,
            // rmcp's own default for HTTP bodies and SSE events.
            max_message_bytes: 16 * 1024 * 1024,
            max_call_duration: Duration::from_secs(30 * 60),
            progress_interval: Duration::from_millis(100),
            shutdown_grace: Duration::from_secs(2),
        }
    }
}

/// What a stdio server gets of this process's environment unless
/// [`McpServerConfig::inherit_env`] is set: the reference MCP SDKs' list.
#[cfg(not(windows))]
pub const SAFE_ENV_VARS: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];
/// What a stdio server gets of this process's environment unless
/// [`McpServerConfig::inherit_env`] is set: the reference MCP SDKs' list.
#[cfg(windows)]
pub const SAFE_ENV_VARS: &[&str] = &[
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PROCESSOR_ARCHITECTURE",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "USERNAME",
    "USERPROFILE",
];

/// Default [`McpServerConfig::connect_timeout`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default [`McpServerConfig::call_timeout`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default [`McpServerConfig::max_restarts`].
pub const DEFAULT_MAX_RESTARTS: u32 = 3;
/// Default [`McpServerConfig::restart_window`].
pub const DEFAULT_RESTART_WINDOW: Duration = Duration::from_secs(60 * 60);
/// Default [`McpServerConfig::restart_backoff`].
pub const DEFAULT_RESTART_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between restarts.
pub const MAX_RESTART_BACKOFF: Duration = Duration::from_secs(5 * 60);

/// Longest accepted server id.
pub const MAX_SERVER_ID_LEN: usize = 32;

impl McpServerConfig {
    /// A server with the default limits.
    pub fn new(id: impl Into<String>, transport: McpTransport) -> Self {
        McpServerConfig {
            id: id.into(),
            transport,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            max_restarts: DEFAULT_MAX_RESTARTS,
            restart_window: DEFAULT_RESTART_WINDOW,
            restart_backoff: DEFAULT_RESTART_BACKOFF,
            inherit_env: false,
            trusted: false,
            limits: McpLimits::default(),
            clock: Arc::new(SystemClock),
        }
    }

    /// A stdio server started as `program args...`.
    pub fn stdio(
        id: impl Into<String>,
        program: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        McpServerConfig::new(
            id,
            McpTransport::Stdio {
                program: program.into(),
                args: args.into_iter().map(Into::into).collect(),
                env: BTreeMap::new(),
                cwd: None,
            },
        )
    }

    /// A streamable HTTP server.
    pub fn http(id: impl Into<String>, url: impl Into<String>) -> Self {
        McpServerConfig::new(
            id,
            McpTransport::Http { url: url.into(), bearer_token: None, headers: BTreeMap::new() },
        )
    }

    /// A stdio server from a command line such as
    /// `npx -y @modelcontextprotocol/server-filesystem .` (what `claw --mcp`
    /// takes): split on whitespace, with single or double quotes grouping
    /// words; the id is derived from the package or program name
    /// (`server-filesystem` gives `filesystem`).
    pub fn from_command_line(line: &str) -> Result<Self, McpError> {
        let words = split_command_line(line)?;
        let Some((program, args)) = words.split_first() else {
            return Err(McpError::Config("empty MCP server command".into()));
        };
        let id = derive_id(program, args);
        Ok(McpServerConfig::stdio(id, program.clone(), args.iter().cloned()))
    }

    /// Sets the call timeout.
    #[must_use]
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Sets the connect timeout.
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the restart bound.
    #[must_use]
    pub fn with_max_restarts(mut self, max_restarts: u32) -> Self {
        self.max_restarts = max_restarts;
        self
    }

    /// Marks the server trusted (its tool annotations are believed) or not.
    #[must_use]
    pub fn with_trusted(mut self, trusted: bool) -> Self {
        self.trusted = trusted;
        self
    }

    /// Lets a stdio server inherit this process's whole environment.
    #[must_use]
    pub fn with_inherited_env(mut self, inherit: bool) -> Self {
        self.inherit_env = inherit;
        self
    }

    /// Sets the limits.
    #[must_use]
    pub fn with_limits(mut self, limits: McpLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Checks the id.
    pub fn validate(&self) -> Result<(), McpError> {
        let mut chars = self.id.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
        let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !first_ok || !rest_ok || self.id.len() > MAX_SERVER_ID_LEN {
            return Err(McpError::Config(format!(
                "MCP server id `{}` must be a letter followed by letters, digits, `_` or `-`, \
                 at most {MAX_SERVER_ID_LEN} characters",
                self.id
            )));
        }
        Ok(())
    }
}

/// Splits a command line into words (whitespace-separated; quotes group).
fn split_command_line(line: &str) -> Result<Vec<String>, McpError> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => current.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            None => {
                current.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err(McpError::Config(format!("unterminated quote in MCP server command `{line}`")));
    }
    if in_word {
        words.push(current);
    }
    Ok(words)
}

/// The id for a command: the package a runner (`npx`, `uvx`, ...) starts, else
/// the program's file name; scope, version and a `server-` / `mcp-server-`
/// prefix dropped; sanitized to the id alphabet.
fn derive_id(program: &str, args: &[String]) -> String {
    let base = |s: &str| s.rsplit(['/', '\\']).next().unwrap_or(s).to_owned();
    let program_name = base(program);
    let runner = matches!(program_name.as_str(), "npx" | "uvx" | "bunx" | "pnpx" | "pipx" | "uv");
    let interpreter = matches!(
        program_name.as_str(),
        "node" | "python" | "python3" | "deno" | "bun" | "sh" | "bash"
    );
    let name = if interpreter {
        // `node .../server-filesystem/dist/index.js` -> `server-filesystem`.
        args.iter()
            .find(|a| !a.starts_with('-') && !matches!(a.as_str(), "run" | "-m"))
            .and_then(|script| {
                script
                    .rsplit(['/', '\\'])
                    .map(|c| c.split('.').next().unwrap_or(c))
                    .find(|c| {
                        !c.is_empty()
                            && !matches!(
                                *c,
                                "index" | "main" | "dist" | "build" | "src" | "lib" | "bin" | "cli"
                            )
                    })
                    .map(str::to_owned)
            })
            .unwrap_or(program_name)
    } else if runner {
        args.iter()
            .find(|a| !a.starts_with('-') && !matches!(a.as_str(), "run" | "dlx" | "tool"))
            .map(|package| {
                // `@scope/name@1.2.3` -> `name`.
                let unscoped = package.rsplit('/').next().unwrap_or(package);
                unscoped.split('@').next().unwrap_or(unscoped).to_owned()
            })
            .unwrap_or(program_name)
    } else {
        program_name
    };
    let name = name.strip_suffix(".js").or_else(|| name.strip_suffix(".py")).unwrap_or(&name);
    let name = ["mcp-server-", "server-", "mcp-"]
        .iter()
        .find_map(|p| name.strip_prefix(p).filter(|rest| !rest.is_empty()))
        .unwrap_or(name);
    let mut id: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .take(MAX_SERVER_ID_LEN)
        .collect();
    if !id.starts_with(|c: char| c.is_ascii_alphabetic()) {
        id.insert(0, 's');
        id.truncate(MAX_SERVER_ID_LEN);
    }
    id
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn command_lines_split_and_name_themselves() {
        let c = McpServerConfig::from_command_line(
            "npx -y @modelcontextprotocol/server-filesystem@2026.8.31 '/tmp/my dir'",
        )
        .unwrap();
        assert_eq!(c.id, "filesystem");
        let McpTransport::Stdio { program, args, .. } = &c.transport else { panic!() };
        assert_eq!(program, "npx");
        assert_eq!(
            args,
            &["-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "/tmp/my dir"]
        );
        assert!(c.validate().is_ok());

        assert_eq!(
            McpServerConfig::from_command_line("/usr/bin/mcp-server-git").unwrap().id,
            "git"
        );
        assert_eq!(McpServerConfig::from_command_line("uvx mcp-server-fetch").unwrap().id, "fetch");
        assert_eq!(McpServerConfig::from_command_line("./9lives.py").unwrap().id, "s9lives");
        let node =
            "node /x/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio";
        assert_eq!(McpServerConfig::from_command_line(node).unwrap().id, "everything");
        assert_eq!(
            McpServerConfig::from_command_line("python3 -u tools/git_mcp.py").unwrap().id,
            "git_mcp"
        );
        assert!(McpServerConfig::from_command_line("  ").is_err());
        assert!(McpServerConfig::from_command_line("npx 'open").is_err());
    }

    #[test]
    fn ids_are_checked() {
        for bad in ["", "1abc", "a b", "a.b", &"a".repeat(33)] {
            assert!(McpServerConfig::stdio(bad, "x", [""; 0]).validate().is_err(), "{bad}");
        }
        assert!(McpServerConfig::stdio("git_2-x", "x", [""; 0]).validate().is_ok());
    }

    #[test]
    fn debug_hides_secrets() {
        let mut c = McpServerConfig::http("api", "http://127.0.0.1:1/mcp");
        if let McpTransport::Http { bearer_token, headers, .. } = &mut c.transport {
            *bearer_token = Some(ApiKey::new("sk-secret-token"));
            headers.insert("X-Api-Key".into(), "hdr-secret".into());
        }
        let text = format!("{c:?}");
        assert!(!text.contains("sk-secret-token") && !text.contains("hdr-secret"), "{text}");
        assert!(text.contains("X-Api-Key"));
    }
}
