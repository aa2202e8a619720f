//! The test kit of clawcall's provider crates (`publish = false`).
//!
//! - [`fixture`]: the fixture format (`fixtures/README.md`), from disk or embedded;
//! - [`eventstream`]: AWS event-stream bodies (binary, with a readable source) for fixtures;
//! - [`server`]: the one loopback replay server (hand-written HTTP/1.1 on tokio TCP:
//!   no axum, no hyper server), recording requests and cutting streams into writes;
//! - [`replay`]: replaying a recorded multi-turn session (`claw`'s offline mode, the
//!   end-to-end tests);
//! - [`streams`]: SSE stream generators for benchmarks.
//!
//! `cargo xtask conformance`, `cargo xtask faults`, the provider crates' tests and
//! `claw` use it; it depends on llm-core only.

use std::fmt;
use std::path::PathBuf;

pub mod eventstream;
pub mod fixture;
pub mod replay;
pub mod server;
pub mod streams;

/// A test-kit failure: what failed and where.
#[derive(Debug)]
pub enum Error {
    /// Reading a file failed.
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A JSON file did not parse or did not match its schema.
    Json {
        /// The file.
        path: PathBuf,
        /// The parse error.
        source: serde_json::Error,
    },
    /// Anything else, described for a human.
    Msg(String),
}

impl Error {
    /// A failed file operation on `path`.
    pub fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        Error::Io { path: path.to_owned(), source }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Json { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Msg(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Json { source, .. } => Some(source),
            Error::Msg(_) => None,
        }
    }
}

/// The test kit's result.
pub type Result<T> = std::result::Result<T, Error>;

/// `recorded` with its scheme and host replaced by the loopback server's, keeping
/// any path prefix (`https://api.openai.com/v1` -> `http://127.0.0.1:PORT/v1`).
/// A recorded URL without a scheme has no path to keep.
pub fn loopback_base_url(recorded: &str, addr: std::net::SocketAddr) -> String {
    let path = match recorded.split_once("://") {
        Some((_, rest)) => rest.find('/').and_then(|i| rest.get(i..)).unwrap_or(""),
        None => "",
    };
    format!("http://{addr}{}", path.trim_end_matches('/'))
}
