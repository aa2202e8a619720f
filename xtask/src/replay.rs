//! Replaying a recorded multi-turn session (a fixture folder whose
//! `exchanges.json` lists one response per request) for the `claw` command's
//! offline mode: the same fixture format and loopback server as conformance.

use std::path::Path;

use llm_core::{Context, Model};

use crate::fixture::{self, Scenario};
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
    responses: fixture::Responses,
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
    pub fn load(dir: &Path) -> Result<Session> {
        match fixture::load(dir)? {
            Scenario::Fixture(f) => {
                Ok(Session { model: f.model, context: f.context, responses: f.responses })
            }
            Scenario::Skip(reason) => {
                Err(Error::Msg(format!("{}: declared skip: {reason}", dir.display())))
            }
        }
    }

    /// Starts the loopback server (one write per SSE event, so output streams).
    pub async fn serve(&self) -> Result<ReplayServer> {
        let server = Server::start(self.responses.clone(), Chunking::Events)
            .await
            .map_err(|e| Error::Msg(format!("cannot bind 127.0.0.1: {e}")))?;
        let base_url = crate::conformance::loopback_base_url(&self.model.base_url, server.addr);
        Ok(ReplayServer { server, base_url })
    }
}
