//! The machine's side of a run whose final answer must match a schema
//! ([`crate::AgentOutput`]): which requests carry the format, which response is the
//! answer, the extra turn that asks for it, and the retry after an invalid one.

use llm_core::output::{StructuredOutcome, message_outcome};
use llm_core::{Message, StreamOptions, ToolChoice, ToolResultMessage};
use serde::{Deserialize, Serialize};

use super::{AgentMachine, CallResult, Output, Phase, end_event, start_event};
use crate::event::EndReason;
use crate::output::{
    ANSWER_GIVEN_TEXT, ANSWER_RECEIVED_TEXT, AgentOutput, FINAL_ANSWER_PROMPT, OutputTurn,
    no_answer,
};
use crate::tool::ToolOutput;

/// What the machine keeps of a run's output: stored with its state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct OutputState {
    output: AgentOutput,
    /// The final answer turn was asked ([`OutputTurn::Final`]): every later request
    /// carries the format too.
    final_asked: bool,
    /// The transcript index of the last response to a request that carried the format.
    answer_at: Option<usize>,
    /// Retries used after invalid answers.
    retried: u32,
}

impl AgentMachine {
    /// The same machine, with a run whose final answer must match `output`.
    pub fn with_output(mut self, output: AgentOutput) -> Self {
        self.output =
            Some(Box::new(OutputState { output, final_asked: false, answer_at: None, retried: 0 }));
        self
    }

    /// What the run's final answer must be, if anything.
    pub fn output(&self) -> Option<&AgentOutput> {
        self.output.as_ref().map(|o| &o.output)
    }

    /// Whether the request being made ([`super::Command::Request`]) carries the format.
    pub fn request_carries_output(&self) -> bool {
        matches!(self.phase, Phase::Requesting { .. }) && self.format_turn()
    }

    fn format_turn(&self) -> bool {
        self.output.as_ref().is_some_and(|o| o.output.turn == OutputTurn::Every || o.final_asked)
    }

    /// Sets the request options of [`super::Command::Request`]: the format where this
    /// request carries it, and `tool_choice: none` on the answer turn of
    /// [`OutputTurn::Final`] (when there are tools: the model has finished with them).
    pub fn output_options(&self, options: &mut StreamOptions) {
        let Some(state) = self.output.as_ref().filter(|_| self.request_carries_output()) else {
            return;
        };
        options.output = Some(state.output.format.clone());
        if state.output.turn == OutputTurn::Final && !self.context.tools.is_empty() {
            options.tool_choice = Some(ToolChoice::None);
        }
    }

    /// How the run's answer stands: `None` without an output format. Before the run
    /// ends, or when it ended without one (the turn limit, an error before the answer,
    /// a stop hook), an answer that is missing is `Invalid` at `root`; an aborted run
    /// keeps the aborted response's outcome.
    pub fn output_outcome(&self) -> Option<StructuredOutcome> {
        let state = self.output.as_ref()?;
        let last = self.last_response();
        let Some(at) = state.answer_at.filter(|at| Some(*at) == last) else {
            let why = match self.reason() {
                Some(reason) => format!(
                    "the run ended ({}) before the model gave a final answer",
                    reason_name(reason)
                ),
                None => "the model has not given a final answer yet".to_owned(),
            };
            return Some(no_answer(why));
        };
        let message = self.assistant(at)?;
        Some(message_outcome(&state.output.format, message))
    }

    /// The transcript index of this run's last assistant message.
    fn last_response(&self) -> Option<usize> {
        let messages = &self.context.messages;
        (self.start..messages.len())
            .rev()
            .find(|i| matches!(messages.get(*i), Some(Message::Assistant(_))))
    }

    /// Notes the response at `at` as the answer when its request carried the format.
    pub(super) fn note_answer(&mut self, at: usize) {
        if self.request_carries_output()
            && let Some(state) = self.output.as_mut()
        {
            state.answer_at = Some(at);
        }
    }

    /// A response to a format request that calls the tool named after the format is
    /// the answer: that call gets its result (received, or its violations as an error
    /// for another try), the other calls are not run, and the turn ends. `false` when
    /// the response is not such an answer.
    pub(super) fn answer_call(&mut self, at: usize, out: &mut Vec<Output>) -> bool {
        let Some(state) = self.output.as_ref() else { return false };
        if state.answer_at != Some(at) {
            return false;
        }
        let name = state.output.format.name.clone();
        let Some(message) = self.assistant(at) else { return false };
        // A tool of the run with the format's name is that tool, not the answer.
        if self.context.tools.iter().any(|t| t.tool.name == name)
            || !message.tool_calls().any(|c| c.name == name)
        {
            return false;
        }
        let calls: Vec<_> = message.tool_calls().cloned().collect();
        let invalid = match self.output_outcome() {
            Some(StructuredOutcome::Invalid { violations, .. }) => {
                Some(violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))
            }
            _ => None,
        };
        let retry = invalid.is_some() && self.retry_left();
        let mut answered = false;
        let mut results: Vec<ToolResultMessage> = Vec::with_capacity(calls.len());
        for call in &calls {
            let result = if call.name == name && !answered {
                answered = true;
                match &invalid {
                    Some(why) => CallResult::error(invalid_text(why), false),
                    None => CallResult {
                        output: ToolOutput::text(ANSWER_RECEIVED_TEXT),
                        is_error: false,
                        started: false,
                        stop_after_batch: false,
                    },
                }
            } else {
                CallResult::error(ANSWER_GIVEN_TEXT, false)
            };
            out.push(Output::Event(start_event(call)));
            out.push(Output::Event(end_event(call, &result)));
            results.push(self.tool_result(call, &result));
        }
        for r in &results {
            self.add_message(Message::ToolResult(r.clone()), out);
        }
        self.last_reason = EndReason::Completed;
        self.more_tools = retry;
        if retry && let Some(state) = self.output.as_mut() {
            state.retried += 1;
        }
        self.ask_stop(at, results, false, out);
        true
    }

    fn retry_left(&self) -> bool {
        self.output.as_ref().is_some_and(|o| o.retried < o.output.retries)
    }

    /// Whether the run, about to end as completed, still owes a request for its answer:
    /// the answer turn of [`OutputTurn::Final`], or a retry after an invalid answer.
    pub(super) fn answer_owed(&self) -> bool {
        let Some(state) = self.output.as_ref() else { return false };
        if self.last_reason != EndReason::Completed {
            return false;
        }
        if !self.format_turn() {
            return true;
        }
        matches!(self.output_outcome(), Some(StructuredOutcome::Invalid { .. }))
            && self.retry_left()
            && state.answer_at.is_some()
    }

    /// Queues the message that asks for the answer when one is owed ([`Self::answer_owed`]).
    pub(super) fn ask_answer(&mut self) -> bool {
        if !self.answer_owed() {
            return false;
        }
        let text = if self.format_turn() {
            let why = match self.output_outcome() {
                Some(StructuredOutcome::Invalid { violations, .. }) => {
                    violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
                }
                _ => String::new(),
            };
            invalid_text(&why)
        } else {
            FINAL_ANSWER_PROMPT.to_owned()
        };
        if let Some(state) = self.output.as_mut() {
            if state.final_asked || state.output.turn == OutputTurn::Every {
                state.retried += 1;
            }
            state.final_asked = true;
        }
        self.pending.push(Message::User(llm_core::UserMessage {
            content: llm_core::UserMessageContent::Text(text),
            timestamp: self.now,
        }));
        true
    }
}

fn invalid_text(why: &str) -> String {
    format!("The answer does not match the requested format: {why}. Answer again in the format.")
}

fn reason_name(reason: EndReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
