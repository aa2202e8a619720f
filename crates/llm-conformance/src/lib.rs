//! The conformance suite of clawcall's provider crates, as a library: the fixture
//! format (`llm_testkit::fixture`), the loopback replay of each fixture through a
//! provider over real HTTP, the transcript and request checks, and the scenario grid.
//!
//! A provider crate, in this workspace or outside it, runs the suite on its own
//! fixtures with one dev-dependency and one test:
//!
//! ```no_run
//! use std::sync::Arc;
//! # mod llm_acme { pub const INFO: llm_core::ProviderInfo = llm_core::ProviderInfo {
//! #   name: "acme", api: "acme", provider: "acme", default_base_url: "", key_env: &[],
//! #   capabilities: llm_core::Capabilities::NONE, models: &[], output: &[] };
//! #   pub struct AcmeProvider; impl AcmeProvider { pub fn new() -> llm_core::raw::ScriptedProvider {
//! #   llm_core::raw::ScriptedProvider::new("acme", []) } } }
//!
//! #[test]
//! fn conformance() {
//!     let entry = llm_conformance::ProviderEntry::new(&llm_acme::INFO, || {
//!         Arc::new(llm_acme::AcmeProvider::new())
//!     });
//!     // fixtures/acme/<scenario>/ under the crate; UPDATE_EXPECT=1 rewrites expected.txt.
//!     let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
//!     llm_conformance::check(&fixtures, entry).unwrap();
//! }
//! ```
//!
//! The same test runs the fault rows ([`faults`]: error statuses, hostile headers, resets,
//! stalls, truncated, oversized and endless bodies) on the crate's `text-only` and
//! `tool-call-single` recordings:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # mod llm_acme { pub const INFO: llm_core::ProviderInfo = llm_core::ProviderInfo {
//! #   name: "acme", api: "acme", provider: "acme", default_base_url: "", key_env: &[],
//! #   capabilities: llm_core::Capabilities::NONE, models: &[], output: &[] };
//! #   pub struct AcmeProvider; impl AcmeProvider { pub fn new() -> llm_core::raw::ScriptedProvider {
//! #   llm_core::raw::ScriptedProvider::new("acme", []) } } }
//! #[test]
//! fn faults() {
//!     let entry = llm_conformance::ProviderEntry::new(&llm_acme::INFO, || {
//!         Arc::new(llm_acme::AcmeProvider::new())
//!     });
//!     let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
//!     llm_conformance::check_faults(&fixtures, entry).unwrap();
//! }
//! ```
//!
//! `cargo xtask conformance` and `cargo xtask faults` run the same over every provider of
//! the workspace.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

use std::path::{Path, PathBuf};

mod diff;
pub mod faults;
pub mod rawserver;
mod suite;

pub use suite::*;

/// A suite failure: the test kit's error type (what failed and where).
pub use llm_testkit::Error;

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Runs every fixture of `entry`'s folder (`<fixtures_root>/<entry.name>/`, plus the
/// shared scenarios of `<fixtures_root>/SCENARIOS.md` when the file exists) and
/// prints the grid; `Err` with the grid when a cell fails. `UPDATE_EXPECT=1`
/// rewrites every `expected.txt`; a missing one is written, except under `CI`.
pub fn check(fixtures_root: &Path, entry: ProviderEntry) -> Result<Report> {
    let mut options = Options::from_env(fixtures_root);
    options.provider = Some(entry.name.to_owned());
    options.providers = vec![entry];
    let report = run(&options)?;
    let grid = report.render();
    println!("{grid}");
    if report.failed() > 0 {
        return Err(Error::Msg(grid));
    }
    Ok(report)
}

/// Runs every fault row on `entry`'s recorded streams (`<fixtures_root>/<entry.name>/`
/// `text-only`, and `tool-call-single` when it exists) and prints the matrix; `Err` with
/// the matrix when a cell fails. It runs its own tokio runtime: call it from a plain `#[test]`.
pub fn check_faults(fixtures_root: &Path, entry: ProviderEntry) -> Result<faults::FaultReport> {
    let report = faults::run(&faults::Options::new(fixtures_root, vec![entry]))?;
    let matrix = report.render();
    println!("{matrix}");
    if report.failed() > 0 {
        return Err(Error::Msg(matrix));
    }
    Ok(report)
}

/// The file at `path` as text (an error names the path).
pub fn read_to_string(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

/// Writes `contents` to `path` (an error names the path).
pub fn write(path: &Path, contents: &str) -> Result<()> {
    std::fs::write(path, contents).map_err(|e| Error::io(path, e))
}

/// Subdirectories of `dir`, sorted by name, skipping hidden ones.
pub fn subdirs(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
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
