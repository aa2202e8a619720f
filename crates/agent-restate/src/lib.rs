//! Durable clawcall agent sessions on [Restate](https://restate.dev).
//!
//! The step interface ([`Journal`]) records each effect of an agent run, a model
//! request or a tool execution, as a named step; a replayed run gets the recorded
//! results instead of repeating them. [`JournaledProvider`] and [`journaled_tool`]
//! route agent-core's effects through a journal without changing the loop;
//! [`PassThrough`] is the in-process journal.
//!
//! [`AgentSession`] is the durable session: a Restate virtual object keyed by
//! session id whose `message` handler drives agent-core's `AgentMachine`,
//! every command a journaled `ctx.run` step (model request, hook answer, tool
//! call) or a deterministic transition. See `docs/scaling.md`.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod cache;
mod driver;
mod identity;
mod journal;
mod live;
mod session;
mod wrap;

pub use driver::{StepLimits, call_key};
pub use journal::{
    Effect, Journal, PassThrough, StepError, current_idempotency_key, idempotency_key, step,
};
pub use live::{LIVE_QUEUE, LiveSink};
pub use session::{
    AgentSession, DEFAULT_TRANSCRIPT_BUDGET, Decision, DenyRequest, ENVELOPE_KEY, EVENT_CHUNK,
    EVENTS_KEPT, EventPage, INBOX_FULL, INBOX_LIMIT, LIVE_KEPT, NOT_WAITING, SessionApprovals,
    SessionEvents, SessionInbox, SessionParts, SessionSetup, TRANSCRIPT_KEY, TRANSCRIPT_VERSION,
    TranscriptEnvelope, TurnReply, decode_legacy_transcript,
};
pub use wrap::{JournaledProvider, journaled_tool};
