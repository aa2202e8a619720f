//! The conformance suite on this crate's column of `fixtures/`: every shared scenario
//! its capabilities make apply, plus its own (`agent-session`). `cargo xtask conformance`
//! runs the same over every provider; `UPDATE_EXPECT=1` rewrites `expected.txt` to review.

use std::sync::Arc;

#[test]
fn conformance() {
    let entry = llm_conformance::ProviderEntry::new(&llm_{{snake}}::INFO, || {
        Arc::new(llm_{{snake}}::{{Camel}}Provider::new())
    });
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    match llm_conformance::check(&fixtures, entry) {
        Ok(report) => assert!(report.passed() > 0, "no fixture ran"),
        Err(e) => panic!("{e}"),
    }
}
