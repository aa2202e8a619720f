//! Durable clawcall agent sessions on [Restate](https://restate.dev).
//!
//! The step interface ([`Journal`]) records each effect of an agent run, a model
//! request or a tool execution, as a named step; a replayed run gets the recorded
//! results instead of repeating them. [`JournaledProvider`] and [`journaled_tool`]
//! route agent-core's effects through a journal without changing the loop;
//! [`PassThrough`] is the in-process journal and [`AgentSession`] the Restate one:
//! a virtual object keyed by session id whose handler journals every step with
//! `ctx.run`. See `docs/scaling.md`.
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod journal;
mod session;
mod wrap;

pub use journal::{
    Effect, Journal, PassThrough, StepError, current_idempotency_key, idempotency_key, step,
};
pub use session::{
    AgentSession, RestateJournal, SessionInbox, SessionParts, SessionSetup, TRANSCRIPT_KEY,
    TurnReply,
};
pub use wrap::{JournaledProvider, journaled_tool};
