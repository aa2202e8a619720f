//! Errors.

/// Why connecting to or using an MCP server failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// A configuration mistake (bad id, duplicate id, bad command line, bad header).
    #[error("MCP configuration: {0}")]
    Config(String),
    /// The server could not be started or the handshake failed.
    #[error("MCP server `{server}` could not be started: {reason}")]
    Connect {
        /// Server id.
        server: String,
        /// Why.
        reason: String,
    },
    /// The server is down and its restarts within the window are used up.
    #[error(
        "MCP server `{server}` is down and its {max_restarts} restarts are used up \
         (last failure: {reason}); {next}"
    )]
    RestartsExhausted {
        /// Server id.
        server: String,
        /// The bound.
        max_restarts: u32,
        /// The last failure.
        reason: String,
        /// When a restart is allowed again, such as `one is allowed again in
        /// 42s (3 per 3600s)`, or that none ever is.
        next: String,
    },
    /// The server is down and its next restart waits (exponential backoff).
    #[error(
        "MCP server `{server}` is down (last failure: {reason}); it will be started again in {retry_in}"
    )]
    BackingOff {
        /// Server id.
        server: String,
        /// How long until the next restart, such as `2s`.
        retry_in: String,
        /// The last failure.
        reason: String,
    },
    /// The server was shut down.
    #[error("MCP server `{server}` is down: it was shut down")]
    ShutDown {
        /// Server id.
        server: String,
    },
    /// Listing the server's tools failed.
    #[error("MCP server `{server}` could not list its tools: {reason}")]
    ListTools {
        /// Server id.
        server: String,
        /// Why.
        reason: String,
    },
}
