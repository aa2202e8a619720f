//! The environment a provider reads: the process's, or variables its builder was given.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use llm_core::ProviderInfo;

/// Where a provider reads its environment variables (keys, regions, routes, flags).
///
/// The one place a provider crate reads the process environment: everything else asks an
/// `Env`, so a program can run differently configured providers side by side and a test
/// never changes the process's variables. Its `Debug` prints names only (values may be
/// secrets).
#[derive(Clone, Default)]
pub enum Env {
    /// The process environment, read when asked.
    #[default]
    Process,
    /// Variables given by the caller; nothing is read from the process.
    Vars(Arc<BTreeMap<String, String>>),
}

impl Env {
    /// An environment of exactly `vars`.
    pub fn vars<K: Into<String>, V: Into<String>>(vars: impl IntoIterator<Item = (K, V)>) -> Self {
        Env::Vars(Arc::new(vars.into_iter().map(|(k, v)| (k.into(), v.into())).collect()))
    }

    /// Variable `name`; `None` when unset (or, in the process, not valid Unicode).
    pub fn get(&self, name: &str) -> Option<String> {
        match self {
            #[allow(
                clippy::disallowed_methods,
                reason = "the one reader of the process environment"
            )]
            Env::Process => std::env::var(name).ok(),
            Env::Vars(vars) => vars.get(name).cloned(),
        }
    }

    /// The first of `names` that is set and not blank, trimmed.
    pub fn first(&self, names: &[&str]) -> Option<String> {
        names
            .iter()
            .filter_map(|name| self.get(name))
            .map(|value| value.trim().to_owned())
            .find(|value| !value.is_empty())
    }

    /// The API key of `info`: the first of its [`key_env`](ProviderInfo::key_env) variables
    /// that is set and not blank.
    pub fn api_key(&self, info: &ProviderInfo) -> Option<String> {
        self.first(info.key_env)
    }

    /// Every variable, for code that cannot ask by name (AWS's credential chain).
    pub fn all(&self) -> BTreeMap<String, String> {
        match self {
            #[allow(
                clippy::disallowed_methods,
                reason = "the one reader of the process environment"
            )]
            Env::Process => std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
            Env::Vars(vars) => (**vars).clone(),
        }
    }
}

impl fmt::Debug for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Env::Process => f.write_str("Process"),
            Env::Vars(vars) => {
                f.debug_tuple("Vars").field(&vars.keys().collect::<Vec<_>>()).finish()
            }
        }
    }
}
