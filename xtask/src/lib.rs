//! Project automation for clawcall, run as `cargo xtask <command>`.
//!
//! - [`conformance`]: replays every recorded fixture in `fixtures/` through its
//!   provider crate over real HTTP on 127.0.0.1 and prints the scenario grid.
//! - [`tidy`]: repository invariants (crate docs, dependency direction, secrets
//!   in fixtures, toolchain pin, fixture coverage).
//! - [`faults`]: the fault matrix over every provider, with [`cancel_sweep`]
//!   (cancellation at every event index) and [`secrets`] (no key in any output);
//!   see `docs/reliability.md`.
//! - [`ci`]: the whole gate (fmt, clippy, tests, conformance, faults, tidy).
//! - [`fuzz`]: the cargo-fuzz targets in `fuzz/` and their seed-corpus replay.
//! - [`new_provider`]: scaffolds a provider crate, its example and its fixtures.
//! - [`bench`](mod@bench): every provider end to end on generated 1/4/16 MiB streams (CPU per MiB,
//!   peak memory, ratios; `docs/benchmarks.md`). Not part of `ci`.
//!
//! Every check is also a `#[test]` (`xtask/tests/it.rs`), so plain
//! `cargo test --workspace` enforces the same things as `cargo xtask ci`.
#![allow(clippy::disallowed_methods, reason = "tooling reads its own process environment")]

use std::path::{Path, PathBuf};

pub mod bench;
pub mod cancel_sweep;
pub mod ci;
pub mod faults;
mod fixture;
pub mod fuzz;
pub mod providers;

pub mod replay;
pub mod secrets;
mod server;
pub mod structured_bench;
pub mod tidy;

/// `cargo xtask new-provider`: the scaffold, a crate of its own so that command builds
/// without the provider crates (`xtask/scaffold`).
pub use xtask_scaffold as new_provider;

/// The conformance suite (`llm-conformance`), with this workspace's provider table.
pub mod conformance {
    pub use llm_conformance::*;

    /// The provider table: the `clawcall` registry's crates (`xtask/src/providers.rs`).
    pub const PROVIDERS: &[ProviderEntry] = crate::providers::PROVIDERS;

    /// Every provider and scenario of `fixtures_root` ([`Options::from_env`]).
    pub fn options_from_env(fixtures_root: impl Into<std::path::PathBuf>) -> Options {
        Options { providers: PROVIDERS.to_vec(), ..Options::from_env(fixtures_root) }
    }
}

/// An xtask failure: the test kit's error type (what failed and where), one type for all.
pub use llm_conformance::{Error, Result};
pub use llm_conformance::{
    parse_scenario_needs, parse_scenarios, scenario_needs, shared_scenarios,
};
pub(crate) use llm_conformance::{read_to_string, subdirs, write};

/// The workspace root (the parent of `xtask/`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_owned()
}
