//! The fixture format, from `llm-testkit` (one definition for xtask, the provider
//! tests and `claw`).

pub(crate) use llm_testkit::fixture::{Canned, Fixture, Responses, Scenario};

/// Reads the scenario folder `dir`.
pub(crate) fn load(dir: &std::path::Path) -> crate::Result<Scenario> {
    llm_testkit::fixture::load(dir)
}
