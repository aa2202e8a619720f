//! Where the provider reads its environment variables: the process, or variables given to
//! [`crate::BedrockProvider::with_env`].

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// The environment a provider reads (credentials, region, profile, flags).
#[derive(Clone, Default)]
pub(crate) enum Environment {
    /// The process environment, read when needed.
    #[default]
    Process,
    /// Variables given by the caller; nothing is read from the process.
    Vars(Arc<HashMap<String, String>>),
}

impl Environment {
    /// Variable `name`, `None` when unset (or not valid Unicode in the process).
    pub(crate) fn get(&self, name: &str) -> Option<String> {
        match self {
            Environment::Process => std::env::var(name).ok(),
            Environment::Vars(vars) => vars.get(name).cloned(),
        }
    }

    /// Every variable, for code that cannot ask by name (`aws-config`'s providers).
    #[cfg(feature = "aws-config")]
    pub(crate) fn vars(&self) -> HashMap<String, String> {
        match self {
            Environment::Process => std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
            Environment::Vars(vars) => (**vars).clone(),
        }
    }
}

/// Names only: values may be secrets.
impl fmt::Debug for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Environment::Process => f.write_str("Process"),
            Environment::Vars(vars) => {
                let mut names: Vec<&str> = vars.keys().map(String::as_str).collect();
                names.sort_unstable();
                f.debug_tuple("Vars").field(&names).finish()
            }
        }
    }
}
