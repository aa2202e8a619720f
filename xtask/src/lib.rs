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
//! - [`new_provider`]: scaffolds a provider crate and its fixture folder.
//! - [`bench`](mod@bench): every provider end to end on generated 1/4/16 MiB streams (CPU per MiB,
//!   peak memory, ratios; `docs/benchmarks.md`). Not part of `ci`.
//!
//! Every check is also a `#[test]` (`xtask/tests/it.rs`), so plain
//! `cargo test --workspace` enforces the same things as `cargo xtask ci`.

use std::path::{Path, PathBuf};

pub mod bench;
pub mod cancel_sweep;
pub mod ci;
pub mod conformance;
mod diff;
pub mod faults;
mod fixture;
pub mod fuzz;
pub mod new_provider;
pub mod providers;
mod rawserver;
pub mod replay;
pub mod secrets;
mod server;
pub mod tidy;

/// An xtask failure: the test kit's error type (what failed and where), one type for both.
pub use llm_testkit::Error;

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The workspace root (the parent of `xtask/`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_owned()
}

pub(crate) fn read_to_string(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

pub(crate) fn write(path: &Path, contents: &str) -> Result<()> {
    std::fs::write(path, contents).map_err(|e| Error::io(path, e))
}

/// Subdirectories of `dir`, sorted by name, skipping hidden ones.
pub(crate) fn subdirs(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        out.push((name, path));
    }
    out.sort();
    Ok(out)
}

/// The scenario names of `SCENARIOS.md`: the first column of its table, in order.
pub fn parse_scenarios(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in markdown.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix('|') else { continue };
        let Some(first) = rest.split('|').next() else { continue };
        let name = first.trim().trim_matches('`').trim();
        if name.is_empty()
            || name == "scenario"
            || name.chars().all(|c| matches!(c, '-' | ':' | ' '))
        {
            continue;
        }
        out.push(name.to_owned());
    }
    out
}

/// The `needs` column of the scenario table: per scenario, the capabilities a
/// provider must declare for the scenario to apply. An unknown name is an error.
pub fn parse_scenario_needs(
    markdown: &str,
) -> Result<std::collections::BTreeMap<String, Vec<llm_core::Capability>>> {
    let mut out = std::collections::BTreeMap::new();
    let mut needs_column = None;
    for line in markdown.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix('|') else { continue };
        let cells: Vec<&str> = rest.split('|').map(str::trim).collect();
        let Some(first) = cells.first() else { continue };
        if *first == "scenario" {
            needs_column = cells.iter().position(|c| *c == "needs");
            continue;
        }
        let name = first.trim_matches('`').trim();
        if name.is_empty() || name.chars().all(|c| matches!(c, '-' | ':' | ' ')) {
            continue;
        }
        let Some(column) = needs_column else { continue };
        let mut needs = Vec::new();
        for part in cells.get(column).copied().unwrap_or_default().split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let capability = llm_core::Capability::from_name(part).ok_or_else(|| {
                Error::Msg(format!("SCENARIOS.md: `{name}` needs unknown capability `{part}`"))
            })?;
            needs.push(capability);
        }
        out.insert(name.to_owned(), needs);
    }
    Ok(out)
}

/// The capabilities each shared scenario needs (`<fixtures_root>/SCENARIOS.md`).
pub fn scenario_needs(
    fixtures_root: &Path,
) -> Result<std::collections::BTreeMap<String, Vec<llm_core::Capability>>> {
    let path = fixtures_root.join("SCENARIOS.md");
    if !path.exists() {
        return Ok(Default::default());
    }
    parse_scenario_needs(&read_to_string(&path)?)
}

/// The shared scenario list of `<fixtures_root>/SCENARIOS.md` (empty if the file is absent).
pub fn shared_scenarios(fixtures_root: &Path) -> Result<Vec<String>> {
    let path = fixtures_root.join("SCENARIOS.md");
    if !path.exists() {
        return Ok(Vec::new());
    }
    Ok(parse_scenarios(&read_to_string(&path)?))
}
