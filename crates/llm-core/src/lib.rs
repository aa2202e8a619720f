//! Provider-neutral types, the assistant-message event protocol and the streaming
//! primitives (SSE decoding, incremental partial JSON, message assembly) that every
//! clawcall provider uses.
//!
//! `llm-core` does no IO by default. The `tokio` feature adds [`drive`], the
//! request driver (retries, timeouts, SSE) that HTTP provider crates plug into.
#![warn(missing_docs)]
#![warn(clippy::disallowed_methods)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub mod assembler;
pub mod cancel;
#[cfg(feature = "tokio")]
pub mod drive;
pub mod error;
pub mod event;
pub mod framing;
pub mod options;
pub mod output;
pub mod partial_json;
pub mod printer;
pub mod provider;
pub mod scripted;
pub mod sse;
pub mod stream;
pub mod strict;
pub mod telemetry;
pub mod transform;
pub mod typed;
pub mod types;
pub mod validation;
pub mod wire_text;

pub use assembler::{MessageAssembler, PartialContent, PartialMessage, PartialToolCall};
pub use cancel::CancellationToken;
pub use error::{Error, ErrorKind};
pub use event::{AssistantEvent, BlockKey, Delta};
pub use options::{
    ApiKey, CacheRetention, ReasoningLevel, RecordingSleeper, RetryPolicy, Sleeper, StreamOptions,
    Timeouts, ToolChoice,
};
pub use output::{OutputFamily, OutputFormat, OutputMode, StructuredOutcome};
pub use provider::{Capabilities, Capability, ModelInfo, Provider, ProviderInfo, ProviderRegistry};
pub use scripted::{ScriptedProvider, ScriptedTurn};
pub use stream::AssistantStream;
pub use types::*;
pub use wire_text::{Channel, SurrogateJoiner, WireText, WireValue, replace_lone_surrogates};
