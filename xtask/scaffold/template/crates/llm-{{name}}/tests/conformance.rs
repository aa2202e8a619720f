//! The conformance suite on this crate's column of `fixtures/`: every shared scenario
//! its capabilities make apply, plus its own (`agent-session`), and the fault rows
//! (error statuses, hostile headers, resets, stalls, cut and oversized bodies) on its
//! recorded streams. `cargo xtask conformance` and `cargo xtask faults` run the same over
//! every provider; `UPDATE_EXPECT=1` rewrites `expected.txt` to review.

use std::path::PathBuf;
use std::sync::Arc;

fn entry() -> llm_conformance::ProviderEntry {
    llm_conformance::ProviderEntry::new(&llm_{{snake}}::INFO, || {
        Arc::new(llm_{{snake}}::{{Camel}}Provider::new())
    })
}

fn fixtures() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

#[test]
fn conformance() {
    match llm_conformance::check(&fixtures(), entry()) {
        Ok(report) => assert!(report.passed() > 0, "no fixture ran"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn faults() {
    match llm_conformance::check_faults(&fixtures(), entry()) {
        Ok(report) => assert!(!report.cells.is_empty(), "no fault row ran"),
        Err(e) => panic!("{e}"),
    }
}
