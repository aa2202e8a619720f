//! Runs whose final answer must match a JSON Schema: tools first, then the structured
//! answer (Pydantic AI's output types, the OpenAI Agents SDK's `output_type`).
//!
//! A run with an [`AgentOutput`] asks for the format on the requests that may answer
//! ([`OutputTurn`]), takes the response to such a request that calls no other tool as
//! the answer (its text, or the call named after the format where the model carries a
//! format as a forced tool), validates it, and asks again once more when it does not
//! match ([`AgentOutput::retries`]). The run's [`crate::AgentOutcome::output`] is the
//! [`StructuredOutcome`]; [`crate::Agent::run_typed`] gives a Rust type.
//!
//! ```
//! use agent_core::{AgentOutput, OutputTurn};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Weather {
//!     city: String,
//!     celsius: f64,
//! }
//!
//! let output = AgentOutput::for_type::<Weather>();
//! assert_eq!(output.format.name, "Weather");
//! assert_eq!(output.turn, OutputTurn::Final);
//! ```

use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use futures_util::Stream;
use llm_core::output::{OutputFormat, StructuredError, StructuredOutcome, typed};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::event::AgentEvent;
use crate::run::{AgentOutcome, AgentRun};

/// The user message that asks for the final answer on the extra turn of
/// [`OutputTurn::Final`].
pub const FINAL_ANSWER_PROMPT: &str = "Give your final answer now, in the requested format.";

/// The result of the call that carried a valid final answer (forced-tool formats): the
/// call gets a result like every call, so the transcript can go on.
pub const ANSWER_RECEIVED_TEXT: &str = "Final answer received.";

/// The result of another call of the response that gave the final answer: it is not run.
pub const ANSWER_GIVEN_TEXT: &str =
    "Tool call was not executed: the final answer was given in the same response";

/// Which requests of a run carry the output format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputTurn {
    /// Every request carries the format beside the tools: the model calls tools or
    /// answers in the format, with no extra request. For models that carry a format
    /// natively beside tools (`native` in the provider's output table); a model that
    /// carries it as a forced tool could call no other tool.
    Every,
    /// Requests carry the tools only; when the model answers without calling a tool,
    /// one more request, after [`FINAL_ANSWER_PROMPT`], carries the format with
    /// `tool_choice: none`. One request more, and it works on every model that carries
    /// a format at all, forced tool included.
    #[default]
    Final,
}

/// What a run's final answer must be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentOutput {
    /// The answer's format (name, schema, strictness).
    pub format: OutputFormat,
    /// Which requests carry it.
    #[serde(default)]
    pub turn: OutputTurn,
    /// How many times an answer that does not match the schema is sent back with its
    /// violations for another try (default 1).
    #[serde(default = "default_retries")]
    pub retries: u32,
}

fn default_retries() -> u32 {
    1
}

impl AgentOutput {
    /// An answer of `format`, asked on a final turn, retried once.
    pub fn new(format: OutputFormat) -> Self {
        AgentOutput { format, turn: OutputTurn::Final, retries: default_retries() }
    }

    /// An answer of type `T` ([`OutputFormat::for_type`]).
    pub fn for_type<T: JsonSchema>() -> Self {
        AgentOutput::new(OutputFormat::for_type::<T>())
    }

    /// The same output with its format on every request ([`OutputTurn::Every`]).
    pub fn every_turn(mut self) -> Self {
        self.turn = OutputTurn::Every;
        self
    }

    /// The same output with `retries` tries after an invalid answer.
    pub fn with_retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }
}

/// A finished run with a typed answer ([`crate::Agent::run_typed`]).
#[derive(Debug)]
pub struct TypedOutcome<T> {
    /// The answer, or why there is none.
    pub value: Result<T, StructuredError>,
    /// The run's outcome (transcript, reason, the untyped [`AgentOutcome::output`]).
    pub outcome: AgentOutcome,
}

/// A run whose answer is a `T`: the run's events, then [`TypedRun::finish`].
#[derive(Debug)]
pub struct TypedRun<T> {
    run: AgentRun,
    _type: std::marker::PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> TypedRun<T> {
    pub(crate) fn new(run: AgentRun) -> Self {
        TypedRun { run, _type: std::marker::PhantomData }
    }

    /// The run underneath (abort, steering, approvals).
    pub fn run(&self) -> &AgentRun {
        &self.run
    }

    /// Drives the run to its end and returns the typed answer with the outcome.
    pub async fn finish(self) -> TypedOutcome<T> {
        let outcome = self.run.finish().await;
        let answer = outcome
            .output
            .clone()
            .unwrap_or_else(|| no_answer("the run asked for no output format".to_owned()));
        TypedOutcome { value: typed(answer), outcome }
    }
}

impl<T> Stream for TypedRun<T> {
    type Item = AgentEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<AgentEvent>> {
        Pin::new(&mut self.get_mut().run).poll_next(cx)
    }
}

/// The outcome when the run ended without an answer to check.
pub(crate) fn no_answer(why: String) -> StructuredOutcome {
    StructuredOutcome::Invalid {
        value: None,
        violations: vec![llm_core::validation::Violation { path: "root".to_owned(), message: why }],
    }
}
