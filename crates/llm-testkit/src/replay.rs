//! Replaying a recorded multi-turn session (a fixture whose `exchanges.json` lists
//! one response per request) through a real provider over loopback HTTP.

use llm_core::{Context, Model};

use crate::fixture::{self, FixtureFiles, Responses, Scenario};
use crate::server::{Chunking, Server};
use crate::{Error, Result};

/// A recorded session: the model and opening context of `input.json`, and the
/// provider's responses in request order.
#[derive(Debug)]
pub struct Session {
    /// The recorded model (its `base_url` is replaced by the server's).
    pub model: Model,
    /// System prompt and the opening messages.
    pub context: Context,
    responses: Responses,
}

/// A running replay server; dropping it stops it.
#[derive(Debug)]
pub struct ReplayServer {
    server: Server,
    base_url: String,
}

impl ReplayServer {
    /// The base URL to give the provider (the recorded one, with scheme and host
    /// pointing at the loopback server).
    pub fn base_url(&self) -> String {
        self.base_url.clone()
    }

    /// Requests served so far.
    pub fn requests(&self) -> usize {
        self.server.recorded().len()
    }
}

impl Session {
    /// Reads the session folder `dir` (fixture format, `fixtures/README.md`).
    pub fn load(dir: &std::path::Path) -> Result<Session> {
        Self::from_scenario(fixture::load(dir)?, &dir.display().to_string())
    }

    /// Reads a session from `files` (a folder on disk or embedded in a binary).
    pub fn load_files(files: &dyn FixtureFiles) -> Result<Session> {
        Self::from_scenario(fixture::load_files(files)?, &files.describe())
    }

    fn from_scenario(scenario: Scenario, name: &str) -> Result<Session> {
        match scenario {
            Scenario::Fixture(f) => {
                Ok(Session { model: f.model, context: f.context, responses: f.responses })
            }
            Scenario::Skip(reason) => Err(Error::Msg(format!("{name}: declared skip: {reason}"))),
        }
    }

    /// Starts the loopback server (one write per SSE event, so output streams).
    pub async fn serve(&self) -> Result<ReplayServer> {
        let server = Server::start(self.responses.clone(), Chunking::Events)
            .await
            .map_err(|e| Error::Msg(format!("cannot bind 127.0.0.1: {e}")))?;
        let base_url = crate::loopback_base_url(&self.model.base_url, server.addr);
        Ok(ReplayServer { server, base_url })
    }
}
