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
    /// The server is down and will not be restarted (its restart bound is used up).
    #[error(
        "MCP server `{server}` is down and its {max_restarts} restarts are used up (last failure: {reason})"
    )]
    RestartsExhausted {
        /// Server id.
        server: String,
        /// The bound.
        max_restarts: u32,
        /// The last failure.
        reason: String,
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
