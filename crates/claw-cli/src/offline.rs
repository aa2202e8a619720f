//! Offline replay: a recorded session played through the real provider adapter
//! and the real agent loop against the loopback server of `llm-testkit`.
//!
//! Every `sessions/<provider>/` of this crate is embedded in the binary (`build.rs`),
//! so an installed `claw` replays from any directory; `--replay DIR` reads a session
//! folder from disk instead.

use std::path::PathBuf;

use llm_testkit::replay::Session;

include!(concat!(env!("OUT_DIR"), "/sessions.rs"));

/// Where the session comes from.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// A session folder on disk (`--replay DIR`).
    Dir(PathBuf),
    /// The recording embedded for this provider (its `INFO.name`).
    Embedded(&'static str),
}

impl Source {
    /// For messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Source::Dir(dir) => dir.display().to_string(),
            Source::Embedded(provider) => format!("the recorded {provider} session (built in)"),
        }
    }
}

/// The session of `source`; a provider without an embedded recording says so.
pub(crate) fn load(source: &Source) -> Result<Session, String> {
    match source {
        Source::Dir(dir) => Session::load(dir).map_err(|e| e.to_string()),
        Source::Embedded(provider) => {
            let Some((_, files)) = SESSIONS.iter().find(|(name, _)| name == provider) else {
                let recorded: Vec<&str> = SESSIONS.iter().map(|(name, _)| *name).collect();
                return Err(format!(
                    "no recording for this provider ({provider}); recorded: {}",
                    recorded.join(", ")
                ));
            };
            Session::load_files(files).map_err(|e| e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_session_loads_and_a_missing_one_is_named() {
        assert!(!SESSIONS.is_empty(), "sessions/anthropic is embedded");
        for (name, _) in SESSIONS {
            let session = load(&Source::Embedded(name));
            assert!(session.is_ok(), "{name}: {:?}", session.err());
        }
        let missing = load(&Source::Embedded("no-such-provider")).err().unwrap_or_default();
        assert!(
            missing.starts_with("no recording for this provider (no-such-provider)"),
            "{missing}"
        );
    }

    /// The conformance suite replays the sessions through `fixtures/<provider>/agent-session`,
    /// a link to `sessions/<provider>`: one copy, so the suite checks what `claw` ships. Only
    /// in the workspace (a package has no `fixtures/`).
    #[test]
    fn the_conformance_fixture_of_each_session_is_a_link_to_it() {
        let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let fixtures = crate_dir.join("../../fixtures");
        if !fixtures.join("SCENARIOS.md").is_file() {
            return;
        }
        for (name, _) in SESSIONS {
            let link = fixtures.join(name).join("agent-session");
            let target = std::fs::read_link(&link);
            assert!(target.is_ok(), "{} is not a symbolic link", link.display());
            let same = link.canonicalize().ok()
                == crate_dir.join("sessions").join(name).canonicalize().ok();
            assert!(same, "{} points elsewhere: {target:?}", link.display());
        }
    }
}
