//! The provider crates xtask runs: the primary entries of the `clawcall` registry
//! (each crate's own `INFO`; `cargo xtask new-provider` registers a new crate there).

pub use crate::bench::BenchFormat;
use crate::conformance::ProviderEntry;

/// Every registered provider crate.
pub const PROVIDERS: &[ProviderEntry] = &ALL;

/// The providers `cargo xtask bench` has a generated wire format for: the registry's crates
/// named in [`BENCH_FORMATS`].
pub const BENCHED: &[ProviderEntry] = &BENCHED_TABLE;

/// The wire format the bench generates for each provider. `cargo xtask new-provider` registers
/// a new crate here with the scaffold's format, so it is benched as written; a crate that
/// moves to its real wire format gets a generator of that format (`bench/content.rs`).
#[rustfmt::skip]
pub const BENCH_FORMATS: &[(&str, BenchFormat)] = &[
    ("anthropic", BenchFormat::Anthropic),
    ("openai-completions", BenchFormat::OpenAiCompletions),
    ("openai-responses", BenchFormat::OpenAiResponses),
    ("google", BenchFormat::Google),
    ("mistral", BenchFormat::Mistral),
    ("bedrock", BenchFormat::Bedrock),
    // new-provider: insert above (bench)
];

/// The bench's format for provider `name`, if it has one.
pub fn bench_format(name: &str) -> Option<BenchFormat> {
    BENCH_FORMATS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

const ALL: [ProviderEntry; count(false)] = table(false);
const BENCHED_TABLE: [ProviderEntry; count(true)] = table(true);

/// The suite's entry of a provider of the `clawcall` registry.
const fn from_registry(entry: &'static clawcall::ProviderEntry) -> ProviderEntry {
    ProviderEntry::new(entry.info, entry.make).with_env(entry.make_with)
}

/// Whether registry entry `i` is a crate's own `INFO` (a fixtures column), and when `bench`,
/// one of [`BENCH_FORMATS`].
#[allow(
    clippy::indexing_slicing,
    reason = "const evaluation: an index out of range fails the build"
)]
const fn selected(i: usize, bench: bool) -> bool {
    let entry = &clawcall::PROVIDERS[i];
    if !entry.primary {
        return false;
    }
    if !bench {
        return true;
    }
    let mut n = 0;
    while n < BENCH_FORMATS.len() {
        if same(BENCH_FORMATS[n].0, entry.info.name) {
            return true;
        }
        n += 1;
    }
    false
}

const fn count(bench: bool) -> usize {
    let mut i = 0;
    let mut n = 0;
    while i < clawcall::PROVIDERS.len() {
        if selected(i, bench) {
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
const fn table<const N: usize>(bench: bool) -> [ProviderEntry; N] {
    let registry = clawcall::PROVIDERS;
    let mut out = [from_registry(&registry[0]); N];
    let mut i = 0;
    let mut j = 0;
    while i < registry.len() {
        if selected(i, bench) {
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
