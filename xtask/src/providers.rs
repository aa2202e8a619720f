//! The provider crates xtask runs: the primary entries of the `clawcall` registry
//! (each crate's own `INFO`; `cargo xtask new-provider` registers a new crate there).

use crate::conformance::ProviderEntry;

/// Every registered provider crate.
pub const PROVIDERS: &[ProviderEntry] = &ALL;

/// The providers `cargo xtask bench` has a generated wire format for: a crate is
/// benched once its format is added to `bench.rs` and its name here.
pub const BENCHED: &[ProviderEntry] = &BENCHED_TABLE;

const BENCHED_NAMES: &[&str] =
    &["anthropic", "openai-completions", "openai-responses", "google", "mistral", "bedrock"];

const ALL: [ProviderEntry; count(None)] = table(None);
const BENCHED_TABLE: [ProviderEntry; count(Some(BENCHED_NAMES))] = table(Some(BENCHED_NAMES));

/// The suite's entry of a provider of the `clawcall` registry.
const fn from_registry(entry: &'static clawcall::ProviderEntry) -> ProviderEntry {
    ProviderEntry::new(entry.info, entry.make).with_env(entry.make_with)
}

/// Whether registry entry `i` is a crate's own `INFO` (a fixtures column) among `names`.
#[allow(
    clippy::indexing_slicing,
    reason = "const evaluation: an index out of range fails the build"
)]
const fn selected(i: usize, names: Option<&[&str]>) -> bool {
    let entry = &clawcall::PROVIDERS[i];
    if !entry.primary {
        return false;
    }
    let Some(names) = names else { return true };
    let mut n = 0;
    while n < names.len() {
        if same(names[n], entry.info.name) {
            return true;
        }
        n += 1;
    }
    false
}

const fn count(names: Option<&[&str]>) -> usize {
    let mut i = 0;
    let mut n = 0;
    while i < clawcall::PROVIDERS.len() {
        if selected(i, names) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The selected entries in registry order, built at compile time so the tables stay
/// `const` slices.
#[allow(
    clippy::indexing_slicing,
    reason = "const evaluation: an index out of range fails the build"
)]
const fn table<const N: usize>(names: Option<&[&str]>) -> [ProviderEntry; N] {
    let registry = clawcall::PROVIDERS;
    let mut out = [from_registry(&registry[0]); N];
    let mut i = 0;
    let mut j = 0;
    while i < registry.len() {
        if selected(i, names) {
            out[j] = from_registry(&registry[i]);
            j += 1;
        }
        i += 1;
    }
    out
}

#[allow(
    clippy::indexing_slicing,
    reason = "const evaluation: an index out of range fails the build"
)]
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
