//! The test kit of clawcall's provider crates.
//!
//! - [`fixture`]: the fixture format (`fixtures/README.md`), from disk or embedded;
//! - [`eventstream`]: AWS event-stream bodies (binary, with a readable source) for fixtures;
//! - [`server`]: the one loopback replay server (hand-written HTTP/1.1 on tokio TCP:
//!   no axum, no hyper server), recording requests and cutting streams into writes;
//! - [`replay`]: replaying a recorded multi-turn session (`claw`'s offline mode, the
//!   end-to-end tests);
//! - `strategies` (feature `strategies`): property-test strategies for decoder tests.
//!
//! `cargo xtask conformance`, `cargo xtask faults`, the provider crates' tests and
//! `claw` use it; it depends on llm-core only.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

use std::fmt;
use std::path::PathBuf;

pub mod eventstream;
pub mod fixture;
pub mod replay;
pub mod server;
#[cfg(feature = "strategies")]
pub mod strategies;

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

/// `url` pointed at the loopback server while keeping its host name: scheme `http`
/// and the server's port (`https://r.openai.azure.com/openai` ->
/// `http://r.openai.azure.com:PORT/openai`); the client must resolve the name to
/// 127.0.0.1. Text that is not an `http(s)://` URL with a host is returned unchanged.
pub fn loopback_keep_host(url: &str, addr: std::net::SocketAddr) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return url.to_owned();
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = match host.rsplit_once(':') {
        Some((name, port)) if !name.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    if host.is_empty() {
        return url.to_owned();
    }
    format!("http://{host}:{}{tail}", addr.port())
}

#[cfg(test)]
mod tests {
    use super::loopback_keep_host;

    #[test]
    fn keep_host_swaps_scheme_and_port_only() {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 4000));
        assert_eq!(
            loopback_keep_host("https://r.openai.azure.com/", addr),
            "http://r.openai.azure.com:4000/"
        );
        assert_eq!(
            loopback_keep_host("https://gw.example.com:8443/p/openai/v1?x=1", addr),
            "http://gw.example.com:4000/p/openai/v1?x=1"
        );
        assert_eq!(loopback_keep_host("https://h.example", addr), "http://h.example:4000");
        assert_eq!(loopback_keep_host("not a url", addr), "not a url");
        assert_eq!(loopback_keep_host("ftp://h/x", addr), "ftp://h/x");
        assert_eq!(loopback_keep_host("https:///x", addr), "https:///x");
    }
}
