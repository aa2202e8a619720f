//! clawcall's front door: the agent loop, the neutral types, and every provider crate
//! of this build behind one registry, with models from the providers' catalogs.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use clawcall::{Agent, AgentContext, Message};
//!
//! // The model's prices and limits come from its provider's catalog, the key from
//! // the provider's variable (`ANTHROPIC_API_KEY`); another provider is another string.
//! let config = clawcall::agent_config("anthropic/claude-sonnet-4-5")?;
//! let context = AgentContext { system_prompt: None, messages: vec![], tools: vec![] };
//! let outcome = Agent::new(config).run(context, vec![Message::user("Hello")]).finish().await;
//! println!("{} ({} tokens, ${:.4})", outcome.text(), outcome.usage().total_tokens, outcome.cost());
//! # Ok(()) }
//! ```
//!
//! Each provider crate is a cargo feature (all on by default): a program that talks to
//! one provider builds only it, `clawcall = { default-features = false, features =
//! ["anthropic"] }`. [`PROVIDERS`] lists what this build carries; [`resolve`] finds a
//! catalog id, and an unknown one is an [`Error`] naming the known ids closest to it.
//! A model outside the catalog (a new snapshot, a self-hosted deployment) is a
//! [`Model`] written out in full: its prices and `max_tokens` are yours to state.
//!
//! # Catalog ids
//!
//! With every feature on (a test checks this list against the catalogs):
//!
//! <!-- catalog ids -->
//! - `anthropic/claude-sonnet-4-5`
//! - `anthropic/claude-opus-4-1`
//! - `anthropic/claude-haiku-4-5`
//! - `openai-completions/gpt-5-mini`
//! - `openai-completions/gpt-5`
//! - `openai-completions/gpt-4.1`
//! - `openai-responses/gpt-5-mini`
//! - `openai-responses/gpt-5`
//! - `azure-openai-responses/gpt-5-mini`
//! - `azure-openai-responses/gpt-5`
//! - `google/gemini-2.5-flash`
//! - `google/gemini-2.5-pro`
//! - `mistral/mistral-large-latest`
//! - `mistral/mistral-medium-latest`
//! - `mistral/magistral-medium-latest`
//! - `bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0`
//! - `bedrock/us.anthropic.claude-haiku-4-5-20251001-v1:0`
//! - `bedrock/us.amazon.nova-pro-v1:0`
//! <!-- end catalog ids -->
//!
//! `openai/...` is `openai-completions/...`. Azure OpenAI also needs its endpoint
//! (`AZURE_OPENAI_BASE_URL` or `AZURE_OPENAI_RESOURCE_NAME`; see `llm_openai_responses`).
//!
//! # A fake provider for your tests
//!
//! [`llm_core::raw::scripted::ScriptedProvider`] plays canned turns through the same
//! assembler as the real providers, so an application's agent runs in a test with no
//! network: put it in [`AgentConfig::new`] in place of the registry's provider.
//!
//! ```
//! # async fn run() {
//! use std::sync::Arc;
//! use clawcall::llm_core::raw::scripted::{ScriptedProvider, ScriptedTurn};
//! use clawcall::llm_core::raw::Delta;
//! use clawcall::{Agent, AgentConfig, AgentContext, Message, StopReason};
//!
//! let model = clawcall::model("anthropic/claude-haiku-4-5").expect("in the catalog");
//! let reply = ScriptedTurn::deltas(vec![
//!     Delta::Text { key: 0, text: "hi".into() },
//!     Delta::Stop(StopReason::Stop),
//!     Delta::Done,
//! ]);
//! let fake = ScriptedProvider::new(model.api.clone(), [reply]);
//! let agent = Agent::new(AgentConfig::new(model, Arc::new(fake)));
//! let outcome = agent.run(AgentContext::default(), vec![Message::user("hello")]).finish().await;
//! assert_eq!(outcome.text(), "hi");
//! # }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

mod registry;

pub use registry::{
    Error, MakeWith, PROVIDERS, ProviderEntry, Resolved, agent_config, known_ids, model, provider,
    provider_for_api, resolve,
};

/// The agent loop (everything of `agent-core`).
pub use agent_core;
/// The neutral types, the event protocol and the streaming primitives (`llm-core`).
pub use llm_core;
/// Which tools the model sees, in what order (`tool-planner`).
pub use tool_planner;

pub use agent_core::{
    Agent, AgentConfig, AgentContext, AgentError, AgentEvent, AgentOutcome, AgentRun, AgentTool,
    EndReason, ToolError, ToolInvocation, ToolOutput,
};
pub use llm_core::{
    ApiKey, AssistantContent, AssistantEvent, AssistantMessage, Message, Model, Provider,
    ProviderInfo, StopReason, StreamOptions, Usage,
};

#[cfg(feature = "anthropic")]
pub use llm_anthropic;
#[cfg(feature = "bedrock")]
pub use llm_bedrock;
#[cfg(feature = "google")]
pub use llm_google;
#[cfg(feature = "mistral")]
pub use llm_mistral;
#[cfg(feature = "openai-completions")]
pub use llm_openai_completions;
#[cfg(feature = "openai-responses")]
pub use llm_openai_responses;
// new-provider: insert above (re-export)

/// The workspace README's example, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctest;

/// This crate's README example, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
