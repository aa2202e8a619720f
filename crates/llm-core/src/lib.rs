//! Provider-neutral types and the assistant-message event protocol of clawcall: the model, the
//! conversation, options, errors, the [`Provider`] trait and the [`AssistantStream`] every
//! provider returns.
//!
//! The root is the API an application uses. The toolkit a provider crate is built from (SSE
//! and other framings, surrogate-safe wire text, incremental JSON, the neutral deltas and
//! their assembler, the request driver) is under [`raw`], for provider authors.
//!
//! `llm-core` does no IO by default. The `tokio` feature adds [`raw::drive`], the request
//! driver (retries, timeouts, framing) that HTTP provider crates plug into.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod assembler;
pub mod cancel;
pub mod error;
mod event;
pub mod options;
pub mod output;
pub mod provider;
pub mod raw;
pub mod stream;
pub mod telemetry;
pub mod transform;
pub mod typed;
pub mod types;
pub mod validation;

pub use assembler::{PartialContent, PartialMessage, PartialToolCall};
pub use cancel::CancellationToken;
pub use error::{Error, ErrorKind};
pub use event::AssistantEvent;
pub use options::{
    ApiKey, CacheRetention, ReasoningLevel, RecordingSleeper, RetryPolicy, Sleeper, StreamOptions,
    Timeouts, ToolChoice,
};
pub use output::{OutputFamily, OutputFormat, OutputMode, StructuredOutcome};
pub use provider::{
    Capabilities, Capability, DebugProvider, ModelInfo, Provider, ProviderInfo, ProviderRegistry,
};
pub use stream::AssistantStream;
pub use types::*;
