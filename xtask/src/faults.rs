//! `cargo xtask faults`: the fault matrix of `llm-conformance` over every provider of the
//! workspace, with [`cancel_sweep`](crate::cancel_sweep) (cancellation at every event index)
//! and [`secrets`](crate::secrets) (no key in any output); see `docs/reliability.md`.

use std::fmt::Write as _;
use std::path::PathBuf;

pub use llm_conformance::faults::*;

use crate::Result;

/// Every provider of the workspace's table, with the fixtures of `fixtures_root`.
pub fn options(fixtures_root: impl Into<PathBuf>) -> Options {
    Options::new(fixtures_root, crate::conformance::PROVIDERS.to_vec())
}

/// The three reliability checks of `cargo xtask faults`.
#[derive(Debug, Clone)]
pub struct Reliability {
    /// The fault matrix.
    pub matrix: FaultReport,
    /// Cancellation at every event index.
    pub sweep: crate::cancel_sweep::SweepReport,
    /// The secret scan.
    pub secrets: crate::secrets::SecretReport,
}

impl Reliability {
    /// Failed cells, sweeps and leaks together.
    pub fn failed(&self) -> usize {
        self.matrix.failed() + self.sweep.failed() + self.secrets.failed()
    }

    /// The three reports, then `faults: ok` or the failure count.
    pub fn render(&self) -> String {
        let mut out = self.matrix.render();
        out.push('\n');
        out.push_str(&self.sweep.render());
        out.push('\n');
        out.push_str(&self.secrets.render());
        if self.failed() == 0 {
            out.push_str("faults: ok\n");
        } else {
            let _ = writeln!(out, "faults: {} failures", self.failed());
        }
        out
    }
}

/// Runs the matrix, the cancellation sweep and the secret scan.
pub fn run_all(options: &Options) -> Result<Reliability> {
    Ok(Reliability {
        matrix: run(options)?,
        sweep: crate::cancel_sweep::run(options)?,
        secrets: crate::secrets::run(options)?,
    })
}
