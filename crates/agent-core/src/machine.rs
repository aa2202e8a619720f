//! The agent loop as a sans-IO state machine.
//!
//! [`AgentMachine`] holds a run's whole state: the transcript, the turn count,
//! the steering and follow-up queues, the calls of the current batch and the
//! approvals waiting. It does no IO, reads no clock and owns no task: a driver
//! feeds it [`Input`]s (a model response, a hook's answer, a tool's result, an
//! approval, an abort, the time) and it answers each with [`Output`]s: events
//! to deliver and [`Command`]s to carry out (send a request, ask a hook, run a
//! call), until [`Output::Finished`].
//!
//! `AgentRun` is the in-process driver; a durable driver journals each command
//! and its answer instead, and the state serializes (versioned, [`STATE_VERSION`])
//! between any two inputs, so a run can stop in one process and go on in another.
//!
//! Invariants, whatever the inputs: every call of every response gets exactly
//! one result, in call order, before the next request; nothing is output after
//! [`Output::Finished`]; inputs that answer nothing outstanding (late, repeated
//! or unknown) change nothing.
//!
//! A batch goes through stages. First every call is resolved, prepared and
//! validated, before any runs; a call whose arguments were cut off mid-JSON
//! (`ToolCall::arguments_incomplete`) fails here. In parallel mode each call is
//! then announced and asked `before_tool_call` in order, and the allowed calls
//! run at most `max_concurrency` at once. In sequential mode one call at a time
//! goes through its whole life, and its result is written at once. A call whose
//! hook answers `Ask` parks while the rest of the batch goes on; an approval,
//! a denial or an abort resumes it. Repeated call ids in one response get fresh
//! ids, so each result names one call.

use std::collections::VecDeque;
use std::sync::Arc;

use llm_core::validation::ValidatorCache;
use llm_core::{
    AssistantContent, AssistantEvent, AssistantMessage, Message, Model, StopReason, TextContent,
    ToolCall, ToolResultMessage,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::{AgentContext, QueueMode, check_unique_names};
use crate::event::{AgentEvent, EndReason};
use crate::hooks::{AfterToolCall, BeforeToolCall};
use crate::run::{ABORTED_TEXT, AgentError, BLOCKED_TEXT};
use crate::tool::{AgentTool, ExecutionMode, ToolError, ToolOutput};

mod answer;

/// The version of the stored state; a state of another version is refused.
pub const STATE_VERSION: u32 = 1;

/// Text of the result of a call the person asked denied, without a reason.
pub const DENIED_TEXT: &str = "Tool execution was denied";

/// Text of the result of a call whose arguments were cut off mid-JSON.
pub const INCOMPLETE_TEXT: &str = "Tool call was not executed: its arguments were cut off before they formed complete JSON. Call the tool again with complete arguments.";

/// The loop's settings that a stored run keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineSettings {
    /// Parallel (default) or sequential for every batch.
    pub tool_execution: ExecutionMode,
    /// At most this many calls of a parallel batch run at once (`None`: all).
    pub max_concurrency: Option<usize>,
    /// At most this many requests per run (`None`: no limit).
    pub max_turns: Option<u32>,
    /// How many steering messages are injected at once.
    pub steering_mode: QueueMode,
    /// How many follow-up messages are injected at once.
    pub follow_up_mode: QueueMode,
}

impl Default for MachineSettings {
    fn default() -> Self {
        MachineSettings {
            tool_execution: ExecutionMode::Parallel,
            max_concurrency: None,
            max_turns: None,
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
        }
    }
}

/// One call of the current batch: the response at `message` in the transcript,
/// content position `content`, and its place `index` in the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallRef {
    /// Index of the assistant message in the transcript.
    pub message: usize,
    /// Content position of the call in that message.
    pub content: usize,
    /// Position of the call among the message's calls.
    pub index: usize,
}

/// How an untrusted callback (hook, tool) finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Answer<T> {
    /// It returned this.
    Done(T),
    /// It panicked, with this text.
    Panicked(String),
    /// The run was aborted and it did not return within the grace period.
    Abandoned,
}

/// What `prepare_next_turn` replaced that the machine keeps (request options
/// belong to the driver).
#[derive(Debug, Clone, Default)]
pub struct TurnChange {
    /// Replaces the model.
    pub model: Option<Model>,
    /// Replaces the system prompt (`Some(None)` removes it).
    pub system_prompt: Option<Option<String>>,
    /// Replaces the visible tools.
    pub tools: Option<Vec<AgentTool>>,
}

/// Why a request could not be made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RequestFailure {
    /// A request-level hook (`api_key`) returned an error.
    HookFailed {
        /// The hook.
        hook: String,
        /// Its error.
        message: String,
    },
    /// A request-level hook (`api_key`, `transform_context`) panicked.
    HookPanicked {
        /// The hook.
        hook: String,
        /// The panic text.
        message: String,
    },
    /// The run was aborted while a request-level hook ran past the grace period.
    Abandoned,
    /// The provider panicked when asked to stream.
    ProviderPanicked(String),
}

/// A person's answer to an approval request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Approval {
    /// Run the call.
    Approve,
    /// Do not run it; the reason is given to the model.
    Deny {
        /// Why, in the person's words.
        reason: Option<String>,
    },
}

/// An input to the machine.
#[derive(Debug)]
#[non_exhaustive]
pub enum Input {
    /// Start the run with these prompts (the first input; later ones are ignored).
    Start(Vec<Message>),
    /// A steering message: injected after the current turn, before the next request.
    Steer(Message),
    /// A follow-up message: injected only when the run would otherwise stop.
    FollowUp(Message),
    /// Abort the run.
    Abort,
    /// `prepare_next_turn` answered.
    TurnPrepared(Answer<Option<TurnChange>>),
    /// The request could not be made.
    RequestFailed(RequestFailure),
    /// The response started; its message as of the first event.
    ResponseStarted(AssistantMessage),
    /// A streamed event of the response (not the terminal one).
    ResponseEvent(AssistantEvent),
    /// The response ended with this message.
    ResponseEnded(AssistantMessage),
    /// `resolve_deferred_tool` answered.
    ToolResolved {
        /// The call.
        call: CallRef,
        /// Its answer.
        answer: Answer<Result<Option<AgentTool>, ToolError>>,
    },
    /// The tool's `prepare_arguments` answered.
    ArgumentsPrepared {
        /// The call.
        call: CallRef,
        /// Its answer.
        answer: Answer<Result<Value, ToolError>>,
    },
    /// `before_tool_call` answered.
    BeforeToolCall {
        /// The call.
        call: CallRef,
        /// Its answer.
        answer: Answer<BeforeToolCall>,
    },
    /// A person answered an approval request for the call with this id.
    Approval {
        /// The call id (unique within a response: the machine renames repeats).
        tool_call_id: String,
        /// The decision.
        decision: Approval,
    },
    /// A tool returned (or panicked, or was given up).
    ToolFinished {
        /// The call.
        call: CallRef,
        /// Its answer.
        answer: Answer<Result<ToolOutput, ToolError>>,
    },
    /// `after_tool_call` answered.
    AfterToolCall {
        /// The call.
        call: CallRef,
        /// Its answer.
        answer: Answer<Option<AfterToolCall>>,
    },
    /// `should_stop_after_turn` answered.
    StopAfterTurn(Answer<bool>),
}

/// What the driver must do.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Command {
    /// Ask `prepare_next_turn` ([`AgentMachine::turns`], [`AgentMachine::context`],
    /// [`AgentMachine::new_messages`], [`AgentMachine::model`]); answer with
    /// [`Input::TurnPrepared`].
    PrepareTurn,
    /// Make a request with the transcript and tools of [`AgentMachine::context`]
    /// and [`AgentMachine::model`] (resolving the key and `transform_context`
    /// first); answer with the response's events, or [`Input::RequestFailed`].
    Request,
    /// Ask `resolve_deferred_tool`; answer with [`Input::ToolResolved`].
    ResolveTool {
        /// The call.
        call: CallRef,
    },
    /// Run the tool's `prepare_arguments` on the call's arguments; answer with
    /// [`Input::ArgumentsPrepared`].
    PrepareArguments {
        /// The call.
        call: CallRef,
        /// Index of the tool in the context.
        tool: usize,
    },
    /// Ask `before_tool_call`; answer with [`Input::BeforeToolCall`].
    BeforeToolCall {
        /// The call.
        call: CallRef,
        /// The validated arguments.
        args: Arc<Value>,
    },
    /// Run the tool; answer with [`Input::ToolFinished`].
    Execute {
        /// The call.
        call: CallRef,
        /// Index of the tool in the context.
        tool: usize,
        /// The validated arguments.
        args: Value,
        /// How the batch runs (a sequential batch runs one call at a time).
        mode: ExecutionMode,
    },
    /// Ask `after_tool_call`; answer with [`Input::AfterToolCall`].
    AfterToolCall {
        /// The call.
        call: CallRef,
        /// The tool's output.
        output: Arc<ToolOutput>,
        /// Whether it is an error.
        is_error: bool,
    },
    /// Ask `should_stop_after_turn` with [`AgentMachine::turn_message`] and
    /// [`AgentMachine::turn_results`]; answer with [`Input::StopAfterTurn`].
    ShouldStopAfterTurn,
}

/// One output of the machine, in order.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "outputs are moved out of the buffer at once, never kept"
)]
#[non_exhaustive]
pub enum Output {
    /// Deliver this event.
    Event(AgentEvent),
    /// Carry out this command.
    Command(Command),
    /// The run ended (after its `AgentEnd` event); see [`AgentMachine::reason`].
    Finished,
}

/// The result of one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CallResult {
    output: ToolOutput,
    is_error: bool,
    started: bool,
    stop_after_batch: bool,
}

impl CallResult {
    fn error(text: impl Into<String>, started: bool) -> Self {
        CallResult {
            output: ToolOutput::text(text),
            is_error: true,
            started,
            stop_after_batch: false,
        }
    }
}

/// Where a call of the batch stands.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum CallState {
    /// Not checked yet.
    New,
    /// `resolve_deferred_tool` asked.
    Resolving,
    /// `prepare_arguments` asked.
    Preparing { tool: usize },
    /// Checked: the tool and its validated arguments, or why it cannot run.
    Checked(Result<(usize, Value), String>),
    /// `before_tool_call` asked.
    Asking { tool: usize, args: Arc<Value> },
    /// Waiting for a person.
    Parked { tool: usize, args: Value },
    /// Allowed; waiting for a slot.
    Ready { tool: usize, args: Value },
    /// Running. The arguments are kept so a restored run can run it again:
    /// `None` when they are the call's own in the transcript (the usual case;
    /// a run in flight then holds them once there and once in the tool's hands).
    Running { tool: usize, args: Option<Value> },
    /// Between two states while one input is handled.
    Moving,
    /// `after_tool_call` asked.
    After { output: Arc<ToolOutput>, is_error: bool },
    /// Has its result.
    Done(CallResult),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct BatchCall {
    content: usize,
    /// The tool resolved so far (`None`: not yet).
    resolution: Option<Result<Option<usize>, String>>,
    state: CallState,
    /// Whether its start event was emitted.
    announced: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Stage {
    /// Every call is resolved, prepared and validated before any runs.
    Check,
    /// Parallel: each call is announced and asked `before_tool_call`, in order.
    Preflight,
    /// Parallel: the allowed calls run, at most `max_concurrency` at once.
    Running,
    /// Sequential: the call at `current` goes through its whole life.
    Sequential,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Batch {
    at: usize,
    calls: Vec<BatchCall>,
    sequential: bool,
    stage: Stage,
    /// The next call the stage works on.
    next: usize,
    /// Allowed calls waiting for a slot, in the order they were allowed.
    queue: VecDeque<usize>,
    running: usize,
    /// Results written as the sequential batch goes.
    written: Vec<ToolResultMessage>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Phase {
    /// Waiting for [`Input::Start`].
    Idle,
    /// `prepare_next_turn` asked.
    PreparingTurn,
    /// A request is out; `started` once its first event arrived.
    Requesting { started: bool },
    /// The calls of the response at `batch.at` are handled.
    Batch(Box<Batch>),
    /// `should_stop_after_turn` asked.
    StopCheck { at: usize, results: Vec<ToolResultMessage>, stop_after_batch: bool },
    /// The run ended.
    Finished(EndReason),
}

/// The agent loop's state and transitions; see the module docs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentMachine {
    version: u32,
    settings: MachineSettings,
    #[serde(with = "stored_context")]
    context: Arc<AgentContext>,
    model: Arc<Model>,
    start: usize,
    turns: u32,
    turn_open: bool,
    more_tools: bool,
    last_reason: EndReason,
    cancelled: bool,
    error: Option<AgentError>,
    pending: Vec<Message>,
    steering: VecDeque<Message>,
    follow_up: VecDeque<Message>,
    phase: Phase,
    /// The time of the input being handled (Unix milliseconds): the machine reads no clock.
    now: u64,
    /// The schema the final answer must match, and how far the answer is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    output: Option<Box<answer::OutputState>>,
    #[serde(skip)]
    validators: Arc<ValidatorCache>,
}

/// Why a stored state cannot be restored.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The state was stored by another version of the machine.
    #[error("stored agent state has version {found}, this build reads version {STATE_VERSION}")]
    Version {
        /// The stored version.
        found: u32,
    },
    /// The state is not valid JSON of the machine's shape.
    #[error("stored agent state is not readable: {0}")]
    Invalid(#[from] serde_json::Error),
}

impl AgentMachine {
    /// A machine for a run over `context` with `model`. Validators are shared
    /// between the runs of one agent.
    pub fn new(
        settings: MachineSettings,
        context: AgentContext,
        model: Arc<Model>,
        validators: Arc<ValidatorCache>,
    ) -> Self {
        AgentMachine {
            version: STATE_VERSION,
            settings,
            start: context.messages.len(),
            context: Arc::new(context),
            model,
            turns: 0,
            turn_open: false,
            more_tools: true,
            last_reason: EndReason::Completed,
            cancelled: false,
            error: None,
            pending: Vec::new(),
            steering: VecDeque::new(),
            follow_up: VecDeque::new(),
            phase: Phase::Idle,
            now: 0,
            output: None,
            validators,
        }
    }

    /// Stores the state as JSON (tools as their definitions; executors and
    /// argument shims are bound again with [`AgentMachine::bind_tools`]).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    /// Restores a state stored by [`AgentMachine::to_json`].
    pub fn from_json(json: &str) -> Result<Self, RestoreError> {
        #[derive(Deserialize)]
        struct Version {
            version: u32,
        }
        let Version { version } = serde_json::from_str(json)?;
        if version != STATE_VERSION {
            return Err(RestoreError::Version { found: version });
        }
        Ok(serde_json::from_str(json)?)
    }

    /// Gives the restored tools their executors again, by name (a tool not
    /// among `tools` keeps answering that it is not bound in this process).
    pub fn bind_tools(&mut self, tools: &[AgentTool]) {
        let context = Arc::make_mut(&mut self.context);
        for slot in &mut context.tools {
            if let Some(bound) = tools.iter().find(|t| t.tool.name == slot.tool.name) {
                *slot = bound.clone();
            }
        }
    }

    /// The transcript and tools as they stand.
    pub fn context(&self) -> &Arc<AgentContext> {
        &self.context
    }

    /// The model of the next request.
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// Requests made so far.
    pub fn turns(&self) -> u32 {
        self.turns
    }

    /// Messages this run added so far.
    pub fn new_messages(&self) -> &[Message] {
        self.context.messages.get(self.start..).unwrap_or_default()
    }

    /// Whether the run has not started yet ([`Input::Start`] not handled).
    pub fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Idle)
    }

    /// Why the run ended, once it has.
    pub fn reason(&self) -> Option<EndReason> {
        match self.phase {
            Phase::Finished(reason) => Some(reason),
            _ => None,
        }
    }

    /// What failed, when the run ended with [`EndReason::Failed`].
    pub fn error(&self) -> Option<&AgentError> {
        self.error.as_ref()
    }

    /// Whether the run was aborted.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }

    /// The call a [`CallRef`] names.
    pub fn call(&self, call: CallRef) -> Option<&ToolCall> {
        match self.context.messages.get(call.message) {
            Some(Message::Assistant(m)) => match m.content.get(call.content) {
                Some(AssistantContent::ToolCall(c)) => Some(c),
                _ => None,
            },
            _ => None,
        }
    }

    /// The response of the turn being finished ([`Command::ShouldStopAfterTurn`]).
    pub fn turn_message(&self) -> Option<&AssistantMessage> {
        match &self.phase {
            Phase::StopCheck { at, .. } => self.assistant(*at),
            _ => None,
        }
    }

    /// The results of the turn being finished ([`Command::ShouldStopAfterTurn`]).
    pub fn turn_results(&self) -> &[ToolResultMessage] {
        match &self.phase {
            Phase::StopCheck { results, .. } => results,
            _ => &[],
        }
    }

    /// The calls waiting for a person's approval.
    pub fn pending_approvals(&self) -> Vec<&ToolCall> {
        let Phase::Batch(batch) = &self.phase else { return Vec::new() };
        batch
            .calls
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c.state, CallState::Parked { .. }))
            .filter_map(|(i, c)| {
                self.call(CallRef { message: batch.at, content: c.content, index: i })
            })
            .collect()
    }

    /// Steering and follow-up messages still queued (handed back when a run
    /// ends before it could send them).
    pub fn take_queued(&mut self) -> Vec<Message> {
        let mut queued: Vec<Message> = self.pending.drain(..).collect();
        queued.extend(self.steering.drain(..));
        queued.extend(self.follow_up.drain(..));
        queued
    }

    /// Takes the transcript for a request; give it back with [`AgentMachine::return_messages`].
    pub fn lend_messages(&mut self) -> Vec<Message> {
        std::mem::take(&mut Arc::make_mut(&mut self.context).messages)
    }

    /// Gives back the transcript taken by [`AgentMachine::lend_messages`].
    pub fn return_messages(&mut self, messages: Vec<Message>) {
        Arc::make_mut(&mut self.context).messages = messages;
    }

    /// Ends the machine's life, handing over the transcript and tools.
    pub fn into_context(self) -> AgentContext {
        Arc::try_unwrap(self.context).unwrap_or_else(|shared| (*shared).clone())
    }

    /// The commands outstanding: what a driver that restored this state must
    /// carry out (again) for the run to go on. Approvals are not commands: see
    /// [`AgentMachine::pending_approvals`].
    pub fn outstanding(&self) -> Vec<Command> {
        match &self.phase {
            Phase::Idle | Phase::Finished(_) => Vec::new(),
            Phase::PreparingTurn => vec![Command::PrepareTurn],
            Phase::Requesting { .. } => vec![Command::Request],
            Phase::StopCheck { .. } => vec![Command::ShouldStopAfterTurn],
            Phase::Batch(batch) => batch
                .calls
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    let call = CallRef { message: batch.at, content: c.content, index: i };
                    match &c.state {
                        CallState::Resolving => Some(Command::ResolveTool { call }),
                        CallState::Preparing { tool } => {
                            Some(Command::PrepareArguments { call, tool: *tool })
                        }
                        CallState::Asking { args, .. } => {
                            Some(Command::BeforeToolCall { call, args: args.clone() })
                        }
                        CallState::After { output, is_error } => Some(Command::AfterToolCall {
                            call,
                            output: output.clone(),
                            is_error: *is_error,
                        }),
                        // A call that was running when the state was stored runs again.
                        CallState::Running { tool, args } => Some(Command::Execute {
                            call,
                            tool: *tool,
                            args: match args {
                                Some(args) => args.clone(),
                                None => self.call(call).map(|c| c.arguments.clone())?,
                            },
                            mode: if batch.sequential {
                                ExecutionMode::Sequential
                            } else {
                                ExecutionMode::Parallel
                            },
                        }),
                        _ => None,
                    }
                })
                .collect(),
        }
    }

    /// Handles one input at time `now` (Unix milliseconds; used for the
    /// timestamps of the messages the machine writes), appending what to do to `out`.
    pub fn handle(&mut self, input: Input, now: u64, out: &mut Vec<Output>) {
        if matches!(self.phase, Phase::Finished(_)) {
            return;
        }
        self.now = now;
        match input {
            Input::Start(prompts) => {
                if matches!(self.phase, Phase::Idle) {
                    self.begin(prompts, out);
                }
            }
            Input::Steer(m) => self.steering.push_back(m),
            Input::FollowUp(m) => self.follow_up.push_back(m),
            Input::Abort => self.abort(out),
            Input::TurnPrepared(answer) => {
                if matches!(self.phase, Phase::PreparingTurn) {
                    self.turn_prepared(answer, out);
                }
            }
            Input::RequestFailed(failure) => {
                if let Phase::Requesting { started: false } = self.phase {
                    self.request_failed(failure, out);
                }
            }
            Input::ResponseStarted(message) => {
                if let Phase::Requesting { started } = &mut self.phase
                    && !*started
                {
                    *started = true;
                    out.push(Output::Event(AgentEvent::MessageStart {
                        message: Message::Assistant(Box::new(message)),
                    }));
                }
            }
            Input::ResponseEvent(event) => {
                if let Phase::Requesting { started: true } = self.phase {
                    out.push(Output::Event(AgentEvent::MessageUpdate { event }));
                }
            }
            Input::ResponseEnded(message) => {
                if let Phase::Requesting { started } = self.phase {
                    self.response_ended(started, message, out);
                }
            }
            Input::StopAfterTurn(answer) => {
                if matches!(self.phase, Phase::StopCheck { .. }) {
                    self.stop_answered(answer, out);
                }
            }
            Input::ToolResolved { call, answer } => {
                if self.expects(call, |s| matches!(s, CallState::Resolving)) {
                    self.tool_resolved(call, answer, out);
                }
            }
            Input::ArgumentsPrepared { call, answer } => {
                if self.expects(call, |s| matches!(s, CallState::Preparing { .. })) {
                    self.arguments_prepared(call, answer, out);
                }
            }
            Input::BeforeToolCall { call, answer } => {
                if self.expects(call, |s| matches!(s, CallState::Asking { .. })) {
                    self.before_answered(call, answer, out);
                }
            }
            Input::Approval { tool_call_id, decision } => {
                self.approval(&tool_call_id, decision, out)
            }
            Input::ToolFinished { call, answer } => {
                if self.expects(call, |s| matches!(s, CallState::Running { .. })) {
                    self.tool_finished(call, answer, out);
                }
            }
            Input::AfterToolCall { call, answer } => {
                if self.expects(call, |s| matches!(s, CallState::After { .. })) {
                    self.after_answered(call, answer, out);
                }
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // The transcript
    // ---------------------------------------------------------------------------------------

    fn assistant(&self, at: usize) -> Option<&AssistantMessage> {
        match self.context.messages.get(at) {
            Some(Message::Assistant(m)) => Some(m),
            _ => None,
        }
    }

    fn push(&mut self, message: Message) {
        Arc::make_mut(&mut self.context).messages.push(message);
    }

    fn add_message(&mut self, message: Message, out: &mut Vec<Output>) {
        out.push(Output::Event(AgentEvent::MessageStart { message: message.clone() }));
        out.push(Output::Event(AgentEvent::MessageEnd { message: message.clone() }));
        self.push(message);
    }

    fn turn_start(&mut self, out: &mut Vec<Output>) {
        if !self.turn_open {
            out.push(Output::Event(AgentEvent::TurnStart));
            self.turn_open = true;
        }
    }

    fn turn_end(&mut self, at: usize, tool_results: Vec<ToolResultMessage>, out: &mut Vec<Output>) {
        let message = self.assistant(at).cloned().unwrap_or_default();
        out.push(Output::Event(AgentEvent::TurnEnd { message, tool_results }));
        self.turn_open = false;
    }

    fn tool_result(&self, call: &ToolCall, r: &CallResult) -> ToolResultMessage {
        ToolResultMessage {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: r.output.content.clone(),
            details: r.output.details.clone(),
            is_error: r.is_error,
            timestamp: self.now,
        }
    }

    /// A synthetic assistant message that closes the transcript; its usage is zero.
    fn closing_message(&self, stop_reason: StopReason, error: String) -> AssistantMessage {
        AssistantMessage {
            content: vec![AssistantContent::Text(TextContent::default())],
            api: self.model.api.clone(),
            provider: self.model.provider.clone(),
            model: self.model.id.clone(),
            stop_reason,
            error_message: Some(error),
            timestamp: self.now,
            ..AssistantMessage::default()
        }
    }

    // ---------------------------------------------------------------------------------------
    // The run
    // ---------------------------------------------------------------------------------------

    fn finish(&mut self, reason: EndReason, out: &mut Vec<Output>) {
        let messages = self.new_messages().to_vec();
        out.push(Output::Event(AgentEvent::AgentEnd { messages, reason }));
        out.push(Output::Finished);
        self.phase = Phase::Finished(reason);
    }

    /// Leaves an aborted assistant message instead of a dangling turn, and ends.
    fn abort_exit(&mut self, out: &mut Vec<Output>) {
        self.turn_start(out);
        let message = self.closing_message(StopReason::Aborted, "Agent run aborted".to_owned());
        self.add_message(Message::Assistant(Box::new(message)), out);
        self.turn_end(self.context.messages.len() - 1, Vec::new(), out);
        self.finish(EndReason::Aborted, out);
    }

    /// A turn-level callback failed: close the turn with an error message and end.
    fn fail_exit(&mut self, error: AgentError, out: &mut Vec<Output>) {
        self.turn_start(out);
        let message = self.closing_message(StopReason::Error, error.to_string());
        self.add_message(Message::Assistant(Box::new(message)), out);
        self.turn_end(self.context.messages.len() - 1, Vec::new(), out);
        self.error = Some(error);
        self.finish(EndReason::Failed, out);
    }

    fn take(queue: &mut VecDeque<Message>, mode: QueueMode) -> Vec<Message> {
        match mode {
            QueueMode::OneAtATime => queue.pop_front().into_iter().collect(),
            QueueMode::All => queue.drain(..).collect(),
        }
    }

    fn max_turns_reached(&self) -> bool {
        self.settings.max_turns.is_some_and(|max| self.turns >= max)
    }

    fn begin(&mut self, prompts: Vec<Message>, out: &mut Vec<Output>) {
        out.push(Output::Event(AgentEvent::AgentStart));
        if let Err(error) = self.context.check_tools() {
            self.error = Some(error);
            return self.finish(EndReason::Failed, out);
        }
        self.turn_start(out);
        for p in prompts {
            self.add_message(p, out);
        }
        self.pending = Self::take(&mut self.steering, self.settings.steering_mode);
        self.next_turn(out);
    }

    /// The top of the loop: inject what is pending and ask for the next turn,
    /// or end when nothing is left to do.
    fn next_turn(&mut self, out: &mut Vec<Output>) {
        loop {
            if self.more_tools || !self.pending.is_empty() {
                if self.cancelled {
                    return self.abort_exit(out);
                }
                self.turn_start(out);
                for m in std::mem::take(&mut self.pending) {
                    self.add_message(m, out);
                }
                if self.max_turns_reached() {
                    // Only `max_turns = 0` gets here; later turns stop after their turn.
                    return self.finish(EndReason::MaxTurns, out);
                }
                self.phase = Phase::PreparingTurn;
                out.push(Output::Command(Command::PrepareTurn));
                return;
            }
            let follow = Self::take(&mut self.follow_up, self.settings.follow_up_mode);
            if follow.is_empty() {
                if self.ask_answer() {
                    continue;
                }
                return self.finish(self.last_reason, out);
            }
            self.pending = follow;
        }
    }

    fn turn_prepared(&mut self, answer: Answer<Option<TurnChange>>, out: &mut Vec<Output>) {
        match answer {
            Answer::Done(Some(change)) => {
                if let Some(tools) = change.tools {
                    if let Err(error) = check_unique_names(&tools) {
                        return self.fail_exit(error, out);
                    }
                    Arc::make_mut(&mut self.context).tools = tools;
                }
                if let Some(model) = change.model {
                    self.model = Arc::new(model);
                }
                if let Some(prompt) = change.system_prompt {
                    Arc::make_mut(&mut self.context).system_prompt = prompt;
                }
            }
            Answer::Done(None) => {}
            Answer::Panicked(message) => {
                let hook = "prepare_next_turn";
                return self.fail_exit(AgentError::HookPanicked { hook, message }, out);
            }
            Answer::Abandoned => return self.abort_exit(out),
        }
        if self.cancelled {
            return self.abort_exit(out);
        }
        self.phase = Phase::Requesting { started: false };
        out.push(Output::Command(Command::Request));
    }

    fn request_failed(&mut self, failure: RequestFailure, out: &mut Vec<Output>) {
        match failure {
            RequestFailure::HookFailed { hook, message } => {
                let hook = hook_name(&hook);
                self.fail_exit(AgentError::HookFailed { hook, message }, out);
            }
            RequestFailure::HookPanicked { hook, message } => {
                let hook = hook_name(&hook);
                self.fail_exit(AgentError::HookPanicked { hook, message }, out);
            }
            RequestFailure::Abandoned => self.abort_exit(out),
            RequestFailure::ProviderPanicked(text) => {
                let message = self
                    .closing_message(StopReason::Error, format!("The provider panicked: {text}"));
                self.response_ended(false, message, out);
            }
        }
    }

    fn response_ended(
        &mut self,
        started: bool,
        mut message: AssistantMessage,
        out: &mut Vec<Output>,
    ) {
        if !started {
            out.push(Output::Event(AgentEvent::MessageStart {
                message: Message::Assistant(Box::new(message.clone())),
            }));
        }
        compact(&mut message);
        unique_call_ids(&mut message);
        out.push(Output::Event(AgentEvent::MessageEnd {
            message: Message::Assistant(Box::new(message.clone())),
        }));
        self.push(Message::Assistant(Box::new(message)));
        let at = self.context.messages.len() - 1;
        self.turns += 1;
        self.response_stored(at, out);
    }

    fn response_stored(&mut self, at: usize, out: &mut Vec<Output>) {
        self.note_answer(at);
        let Some(message) = self.assistant(at) else { return };
        let stop_reason = message.stop_reason;
        let has_calls = message.tool_calls().next().is_some();
        match stop_reason {
            StopReason::Error | StopReason::Aborted => {
                let failure = (stop_reason == StopReason::Error).then(|| provider_error(message));
                let why = if stop_reason == StopReason::Aborted {
                    "Tool call was not executed: the response was aborted".to_owned()
                } else {
                    format!(
                        "Tool call was not executed: the response failed: {}",
                        message.error_message.as_deref().unwrap_or("unknown error")
                    )
                };
                let results = self.write_unexecuted(at, &why, out);
                self.turn_end(at, results, out);
                let reason = if stop_reason == StopReason::Aborted {
                    EndReason::Aborted
                } else {
                    self.error = failure;
                    EndReason::Error
                };
                return self.finish(reason, out);
            }
            StopReason::Length => {
                // A call cut off by the token limit never runs.
                let results = self.write_unexecuted(
                    at,
                    "Tool call was cut off by the output token limit (stop reason: length) and was not executed",
                    out,
                );
                self.turn_end(at, results, out);
                return self.finish(EndReason::Length, out);
            }
            StopReason::Stop | StopReason::ToolUse => {}
        }
        if self.answer_call(at, out) {
            return;
        }
        self.more_tools = false;
        self.last_reason = EndReason::Completed;
        if has_calls && stop_reason != StopReason::ToolUse {
            // Tools run only when the assistant stopped for tool use.
            let results = self.write_unexecuted(
                at,
                "Tool call was not executed: the assistant did not stop for tool use",
                out,
            );
            self.ask_stop(at, results, false, out);
        } else if has_calls {
            self.start_batch(at, out);
        } else {
            self.ask_stop(at, Vec::new(), false, out);
        }
    }

    /// Error results (with start and end events) for every call of a message whose calls will not run.
    fn write_unexecuted(
        &mut self,
        at: usize,
        why: &str,
        out: &mut Vec<Output>,
    ) -> Vec<ToolResultMessage> {
        let Some(message) = self.assistant(at) else { return Vec::new() };
        let result = CallResult::error(why, false);
        let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
        let mut results = Vec::with_capacity(calls.len());
        for call in &calls {
            out.push(Output::Event(start_event(call)));
            out.push(Output::Event(end_event(call, &result)));
            results.push(self.tool_result(call, &result));
        }
        for r in &results {
            self.add_message(Message::ToolResult(r.clone()), out);
        }
        results
    }

    fn ask_stop(
        &mut self,
        at: usize,
        results: Vec<ToolResultMessage>,
        stop_after_batch: bool,
        out: &mut Vec<Output>,
    ) {
        self.phase = Phase::StopCheck { at, results, stop_after_batch };
        out.push(Output::Command(Command::ShouldStopAfterTurn));
    }

    fn stop_answered(&mut self, answer: Answer<bool>, out: &mut Vec<Output>) {
        let Phase::StopCheck { at, results, stop_after_batch } =
            std::mem::replace(&mut self.phase, Phase::Idle)
        else {
            return;
        };
        self.turn_end(at, results, out);
        if stop_after_batch {
            return self.finish(EndReason::StopAfterBatch, out);
        }
        if self.cancelled {
            return self.abort_exit(out);
        }
        match answer {
            Answer::Done(true) => return self.finish(EndReason::StopHook, out),
            Answer::Done(false) | Answer::Abandoned => {}
            Answer::Panicked(message) => {
                let hook = "should_stop_after_turn";
                return self.fail_exit(AgentError::HookPanicked { hook, message }, out);
            }
        }
        if self.max_turns_reached() {
            let more = self.more_tools
                || !self.steering.is_empty()
                || !self.follow_up.is_empty()
                || self.answer_owed();
            let reason = if more { EndReason::MaxTurns } else { self.last_reason };
            return self.finish(reason, out);
        }
        self.pending = Self::take(&mut self.steering, self.settings.steering_mode);
        self.next_turn(out);
    }

    fn abort(&mut self, out: &mut Vec<Output>) {
        if self.cancelled {
            return;
        }
        self.cancelled = true;
        // Calls waiting for a person will not get an answer now.
        if let Phase::Batch(batch) = &mut self.phase {
            let parked: Vec<usize> = batch
                .calls
                .iter()
                .enumerate()
                .filter(|(_, c)| matches!(c.state, CallState::Parked { .. }))
                .map(|(i, _)| i)
                .collect();
            if parked.is_empty() {
                return;
            }
            for i in parked {
                self.complete(i, CallResult::error(ABORTED_TEXT, false), out);
            }
            self.advance(out);
        }
    }

    // ---------------------------------------------------------------------------------------
    // The batch
    // ---------------------------------------------------------------------------------------

    fn batch(&self) -> Option<&Batch> {
        match &self.phase {
            Phase::Batch(b) => Some(b),
            _ => None,
        }
    }

    fn batch_mut(&mut self) -> Option<&mut Batch> {
        match &mut self.phase {
            Phase::Batch(b) => Some(b),
            _ => None,
        }
    }

    fn call_ref(&self, index: usize) -> CallRef {
        let (message, content) = match self.batch() {
            Some(b) => (b.at, b.calls.get(index).map_or(usize::MAX, |c| c.content)),
            None => (usize::MAX, usize::MAX),
        };
        CallRef { message, content, index }
    }

    fn state(&self, index: usize) -> Option<&CallState> {
        self.batch().and_then(|b| b.calls.get(index)).map(|c| &c.state)
    }

    /// Takes a call's state when `want` says it is the one expected, leaving
    /// `Moving` (no copy of the arguments it holds).
    fn take_state(&mut self, index: usize, want: impl Fn(&CallState) -> bool) -> Option<CallState> {
        let c = self.batch_mut().and_then(|b| b.calls.get_mut(index))?;
        want(&c.state).then(|| std::mem::replace(&mut c.state, CallState::Moving))
    }

    fn set_state(&mut self, index: usize, state: CallState) {
        if let Some(c) = self.batch_mut().and_then(|b| b.calls.get_mut(index)) {
            c.state = state;
        }
    }

    /// Whether `call` names a call of the current batch in the state `want`.
    fn expects(&self, call: CallRef, want: impl Fn(&CallState) -> bool) -> bool {
        self.batch().is_some_and(|b| {
            b.at == call.message
                && b.calls
                    .get(call.index)
                    .is_some_and(|c| c.content == call.content && want(&c.state))
        })
    }

    fn start_batch(&mut self, at: usize, out: &mut Vec<Output>) {
        let Some(message) = self.assistant(at) else { return };
        let calls = message
            .content
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c, AssistantContent::ToolCall(_)))
            .map(|(content, _)| BatchCall {
                content,
                resolution: None,
                state: CallState::New,
                announced: false,
            })
            .collect();
        self.phase = Phase::Batch(Box::new(Batch {
            at,
            calls,
            sequential: self.settings.tool_execution == ExecutionMode::Sequential,
            stage: Stage::Check,
            next: 0,
            queue: VecDeque::new(),
            running: 0,
            written: Vec::new(),
        }));
        self.advance(out);
    }

    /// Moves the batch on as far as it goes without an answer.
    fn advance(&mut self, out: &mut Vec<Output>) {
        loop {
            let Some(batch) = self.batch() else { return };
            let (stage, next, count) = (batch.stage, batch.next, batch.calls.len());
            let progressed = match stage {
                Stage::Check => self.advance_check(next, count, out),
                Stage::Preflight => self.advance_preflight(next, count, out),
                Stage::Running => return self.advance_running(out),
                Stage::Sequential => self.advance_sequential(next, count, out),
            };
            if !progressed {
                return;
            }
        }
    }

    /// Check stage: resolve, prepare and validate every call before any runs.
    /// `false` when waiting for an answer.
    fn advance_check(&mut self, next: usize, count: usize, out: &mut Vec<Output>) -> bool {
        if next >= count || self.cancelled {
            let sequential = self.batch().is_some_and(|b| {
                b.sequential
                    || b.calls.iter().any(|c| {
                        matches!(c.resolution, Some(Ok(Some(t)))
                            if self.context.tools.get(t).is_some_and(|t| t.execution_mode == ExecutionMode::Sequential))
                    })
            });
            if let Some(b) = self.batch_mut() {
                b.sequential = sequential;
                b.stage = if sequential { Stage::Sequential } else { Stage::Preflight };
                b.next = 0;
            }
            return true;
        }
        match self.state(next) {
            Some(CallState::New) => {}
            Some(CallState::Checked(_)) => {
                if let Some(b) = self.batch_mut() {
                    b.next += 1;
                }
                return true;
            }
            _ => return false,
        }
        let call = self.call_ref(next);
        let Some(tool_call) = self.call(call) else { return false };
        if tool_call_incomplete(tool_call) {
            self.set_state(next, CallState::Checked(Err(INCOMPLETE_TEXT.to_owned())));
            return true;
        }
        let resolution =
            self.batch().and_then(|b| b.calls.get(next)).and_then(|c| c.resolution.clone());
        let resolution = match resolution {
            Some(r) => r,
            None => match self.context.tools.iter().position(|t| t.tool.name == tool_call.name) {
                Some(found) => {
                    self.set_resolution(next, Ok(Some(found)));
                    Ok(Some(found))
                }
                None => {
                    self.set_state(next, CallState::Resolving);
                    out.push(Output::Command(Command::ResolveTool { call }));
                    return false;
                }
            },
        };
        self.check_resolved(next, resolution, out);
        true
    }

    fn set_resolution(&mut self, index: usize, resolution: Result<Option<usize>, String>) {
        if let Some(c) = self.batch_mut().and_then(|b| b.calls.get_mut(index)) {
            c.resolution = Some(resolution);
        }
    }

    fn tool_resolved(
        &mut self,
        call: CallRef,
        answer: Answer<Result<Option<AgentTool>, ToolError>>,
        out: &mut Vec<Output>,
    ) {
        let name = self.call(call).map(|c| c.name.clone()).unwrap_or_default();
        let resolution = match answer {
            Answer::Done(Ok(Some(tool))) if tool.tool.name != name => Err(format!(
                "Deferred tool resolver returned \"{}\" for requested \"{name}\"",
                tool.tool.name
            )),
            Answer::Done(Ok(Some(tool))) => {
                let context = Arc::make_mut(&mut self.context);
                context.tools.push(tool);
                Ok(Some(context.tools.len() - 1))
            }
            Answer::Done(Ok(None)) => Ok(None),
            Answer::Done(Err(e)) => Err(e.0),
            Answer::Panicked(text) => Err(text),
            Answer::Abandoned => Err(ABORTED_TEXT.to_owned()),
        };
        self.set_resolution(call.index, resolution.clone());
        self.check_resolved(call.index, resolution, out);
        self.advance(out);
    }

    /// A resolved call: its arguments are prepared and validated.
    fn check_resolved(
        &mut self,
        index: usize,
        resolution: Result<Option<usize>, String>,
        out: &mut Vec<Output>,
    ) {
        let call = self.call_ref(index);
        let name = self.call(call).map(|c| c.name.clone()).unwrap_or_default();
        let tool = match resolution {
            Err(e) => return self.set_state(index, CallState::Checked(Err(e))),
            Ok(None) => {
                return self
                    .set_state(index, CallState::Checked(Err(format!("Tool {name} not found"))));
            }
            Ok(Some(tool)) => tool,
        };
        let Some(agent_tool) = self.context.tools.get(tool) else {
            return self
                .set_state(index, CallState::Checked(Err(format!("Tool {name} not found"))));
        };
        if agent_tool.prepare_arguments.is_some() {
            self.set_state(index, CallState::Preparing { tool });
            out.push(Output::Command(Command::PrepareArguments { call, tool }));
            return;
        }
        let args = self.call(call).map(|c| c.arguments.clone()).unwrap_or(Value::Null);
        self.validate(index, tool, args);
    }

    fn arguments_prepared(
        &mut self,
        call: CallRef,
        answer: Answer<Result<Value, ToolError>>,
        out: &mut Vec<Output>,
    ) {
        let Some(CallState::Preparing { tool }) = self.state(call.index).cloned() else { return };
        match answer {
            Answer::Done(Ok(args)) => self.validate(call.index, tool, args),
            Answer::Done(Err(e)) => self.set_state(call.index, CallState::Checked(Err(e.0))),
            Answer::Panicked(text) => self.set_state(call.index, CallState::Checked(Err(text))),
            Answer::Abandoned => {
                self.set_state(call.index, CallState::Checked(Err(ABORTED_TEXT.to_owned())));
            }
        }
        self.advance(out);
    }

    fn validate(&mut self, index: usize, tool: usize, args: Value) {
        let checked = match self.context.tools.get(tool) {
            Some(t) => match self.validators.validate(&t.tool, &args) {
                Ok(args) => Ok((tool, args)),
                Err(e) => Err(e.to_string()),
            },
            None => Err("Tool not found".to_owned()),
        };
        self.set_state(index, CallState::Checked(checked));
    }

    /// Announces a call (its start event) once.
    fn announce(&mut self, index: usize, out: &mut Vec<Output>) {
        let call = self.call_ref(index);
        let announced = self.batch().and_then(|b| b.calls.get(index)).is_none_or(|c| c.announced);
        if announced {
            return;
        }
        if let Some(tool_call) = self.call(call) {
            out.push(Output::Event(start_event(tool_call)));
        }
        if let Some(c) = self.batch_mut().and_then(|b| b.calls.get_mut(index)) {
            c.announced = true;
        }
    }

    /// After its start event, a checked call is asked about (or gets its result).
    /// `false` when waiting for an answer.
    fn ask_before(&mut self, index: usize, out: &mut Vec<Output>) -> bool {
        self.announce(index, out);
        let checked = match self.state(index).cloned() {
            Some(CallState::Checked(checked)) => checked,
            // Not checked because the run was aborted during the checks.
            Some(CallState::New) => Err(ABORTED_TEXT.to_owned()),
            Some(CallState::Asking { .. }) | None => return false,
            Some(_) => return true,
        };
        if self.cancelled {
            self.complete(index, CallResult::error(ABORTED_TEXT, false), out);
            return true;
        }
        match checked {
            Err(text) => {
                self.complete(index, CallResult::error(text, false), out);
                true
            }
            Ok((tool, args)) => {
                let args = Arc::new(args);
                self.set_state(index, CallState::Asking { tool, args: args.clone() });
                let call = self.call_ref(index);
                out.push(Output::Command(Command::BeforeToolCall { call, args }));
                false
            }
        }
    }

    fn before_answered(
        &mut self,
        call: CallRef,
        answer: Answer<BeforeToolCall>,
        out: &mut Vec<Output>,
    ) {
        let Some(CallState::Asking { tool, args }) = self.state(call.index).cloned() else {
            return;
        };
        // The hook's copy is gone by now; a copy is made only if the driver kept one.
        self.set_state(call.index, CallState::Moving);
        let args = Arc::try_unwrap(args).unwrap_or_else(|shared| (*shared).clone());
        let index = call.index;
        match answer {
            Answer::Done(BeforeToolCall::Allow) if self.cancelled => {
                self.complete(index, CallResult::error(ABORTED_TEXT, false), out);
            }
            Answer::Done(BeforeToolCall::Allow) => self.allowed(index, tool, args, out),
            Answer::Done(BeforeToolCall::Block(reason)) => {
                let text = if self.cancelled {
                    ABORTED_TEXT.to_owned()
                } else {
                    reason.unwrap_or_else(|| BLOCKED_TEXT.to_owned())
                };
                self.complete(index, CallResult::error(text, false), out);
            }
            Answer::Done(BeforeToolCall::Ask { .. }) if self.cancelled => {
                self.complete(index, CallResult::error(ABORTED_TEXT, false), out);
            }
            Answer::Done(BeforeToolCall::Ask { reason }) => {
                if let Some(tool_call) = self.call(call) {
                    out.push(Output::Event(AgentEvent::ApprovalRequested {
                        tool_call_id: tool_call.id.clone(),
                        tool_name: tool_call.name.clone(),
                        args: args.clone(),
                        reason,
                    }));
                }
                self.set_state(index, CallState::Parked { tool, args });
            }
            Answer::Panicked(text) => self.complete(index, CallResult::error(text, false), out),
            Answer::Abandoned => self.complete(index, CallResult::error(ABORTED_TEXT, false), out),
        }
        self.advance(out);
    }

    fn approval(&mut self, tool_call_id: &str, decision: Approval, out: &mut Vec<Output>) {
        let Some(batch) = self.batch() else { return };
        let found = batch.calls.iter().enumerate().find(|(i, c)| {
            matches!(c.state, CallState::Parked { .. })
                && self.call(self.call_ref(*i)).is_some_and(|call| call.id == tool_call_id)
        });
        let Some((index, _)) = found else { return };
        let Some(CallState::Parked { tool, args }) =
            self.take_state(index, |s| matches!(s, CallState::Parked { .. }))
        else {
            return;
        };
        match decision {
            Approval::Approve => self.allowed(index, tool, args, out),
            Approval::Deny { reason } => {
                let text = match reason {
                    Some(reason) => format!("{DENIED_TEXT}: {reason}"),
                    None => DENIED_TEXT.to_owned(),
                };
                self.complete(index, CallResult::error(text, false), out);
            }
        }
        self.advance(out);
    }

    /// An allowed call: it runs now (sequential) or when a slot is free (parallel).
    fn allowed(&mut self, index: usize, tool: usize, args: Value, out: &mut Vec<Output>) {
        self.set_state(index, CallState::Ready { tool, args });
        if let Some(b) = self.batch_mut() {
            b.queue.push_back(index);
        }
        let sequential = self.batch().is_some_and(|b| b.sequential);
        if sequential {
            self.start_ready(out);
        }
    }

    /// Starts queued calls while slots are free (all of them in a sequential
    /// batch, which queues one at a time).
    fn start_ready(&mut self, out: &mut Vec<Output>) {
        let limit = self.settings.max_concurrency.unwrap_or(usize::MAX).max(1);
        loop {
            let Some(b) = self.batch_mut() else { return };
            if !b.sequential && b.running >= limit {
                return;
            }
            let Some(index) = b.queue.pop_front() else { return };
            let mode =
                if b.sequential { ExecutionMode::Sequential } else { ExecutionMode::Parallel };
            let Some(CallState::Ready { tool, args }) =
                self.take_state(index, |s| matches!(s, CallState::Ready { .. }))
            else {
                continue;
            };
            if self.cancelled {
                self.complete(index, CallResult::error(ABORTED_TEXT, false), out);
                continue;
            }
            let call = self.call_ref(index);
            if let Some(tool_call) = self.call(call) {
                out.push(Output::Event(AgentEvent::ToolExecutionRunning {
                    tool_call_id: tool_call.id.clone(),
                    tool_name: tool_call.name.clone(),
                }));
            }
            let own = self.call(call).is_some_and(|c| c.arguments == args);
            let kept = if own { None } else { Some(args.clone()) };
            self.set_state(index, CallState::Running { tool, args: kept });
            if let Some(b) = self.batch_mut() {
                b.running += 1;
            }
            out.push(Output::Command(Command::Execute { call, tool, args, mode }));
        }
    }

    fn tool_finished(
        &mut self,
        call: CallRef,
        answer: Answer<Result<ToolOutput, ToolError>>,
        out: &mut Vec<Output>,
    ) {
        let (output, is_error) = match answer {
            Answer::Done(Ok(output)) => (output, false),
            Answer::Done(Err(e)) => (ToolOutput::text(e.0), true),
            Answer::Panicked(text) => (ToolOutput::text(text), true),
            Answer::Abandoned => {
                self.release(call.index);
                self.complete(call.index, CallResult::error(ABORTED_TEXT, true), out);
                return self.advance(out);
            }
        };
        let output = Arc::new(output);
        self.set_state(call.index, CallState::After { output: output.clone(), is_error });
        out.push(Output::Command(Command::AfterToolCall { call, output, is_error }));
    }

    fn after_answered(
        &mut self,
        call: CallRef,
        answer: Answer<Option<AfterToolCall>>,
        out: &mut Vec<Output>,
    ) {
        let Some(CallState::After { output, is_error }) = self.state(call.index).cloned() else {
            return;
        };
        self.set_state(call.index, CallState::Moving);
        let mut output = Arc::try_unwrap(output).unwrap_or_else(|shared| (*shared).clone());
        let mut is_error = is_error;
        let mut stop_after_batch = false;
        match answer {
            Answer::Done(Some(over)) => {
                if let Some(content) = over.content {
                    output.content = content;
                }
                if let Some(details) = over.details {
                    output.details = Some(details);
                }
                if let Some(terminate) = over.terminate {
                    output.terminate = terminate;
                }
                if let Some(e) = over.is_error {
                    is_error = e;
                }
                stop_after_batch = over.stop_after_batch;
            }
            Answer::Done(None) | Answer::Abandoned => {}
            Answer::Panicked(text) => {
                output = ToolOutput::text(text);
                is_error = true;
            }
        }
        self.release(call.index);
        self.complete(
            call.index,
            CallResult { output, is_error, started: true, stop_after_batch },
            out,
        );
        self.advance(out);
    }

    fn release(&mut self, _index: usize) {
        if let Some(b) = self.batch_mut() {
            b.running = b.running.saturating_sub(1);
        }
    }

    /// A call has its result: its end event now, its result message when the
    /// batch writes (a sequential batch writes each at once).
    fn complete(&mut self, index: usize, result: CallResult, out: &mut Vec<Output>) {
        let call = self.call_ref(index);
        self.announce(index, out);
        let Some(tool_call) = self.call(call).cloned() else { return };
        out.push(Output::Event(end_event(&tool_call, &result)));
        let sequential = self.batch().is_some_and(|b| b.sequential);
        if sequential {
            let message = self.tool_result(&tool_call, &result);
            self.add_message(Message::ToolResult(message.clone()), out);
            if let Some(b) = self.batch_mut() {
                b.written.push(message);
            }
        }
        self.set_state(index, CallState::Done(result));
    }

    /// Parallel preflight: each call announced and asked, in order.
    fn advance_preflight(&mut self, next: usize, count: usize, out: &mut Vec<Output>) -> bool {
        if next >= count {
            if let Some(b) = self.batch_mut() {
                b.stage = Stage::Running;
            }
            return true;
        }
        if !self.ask_before(next, out) {
            return false;
        }
        if let Some(b) = self.batch_mut() {
            b.next += 1;
        }
        true
    }

    fn advance_running(&mut self, out: &mut Vec<Output>) {
        self.start_ready(out);
        let done = self
            .batch()
            .is_some_and(|b| b.calls.iter().all(|c| matches!(c.state, CallState::Done(_))));
        if done {
            self.end_batch(out);
        }
    }

    /// Sequential: one call at a time through its whole life.
    fn advance_sequential(&mut self, next: usize, count: usize, out: &mut Vec<Output>) -> bool {
        if next >= count {
            self.end_batch(out);
            return false;
        }
        match self.state(next) {
            Some(CallState::Done(_)) => {
                if let Some(b) = self.batch_mut() {
                    b.next += 1;
                }
                true
            }
            Some(CallState::Checked(_) | CallState::New) => {
                self.ask_before(next, out);
                true
            }
            _ => false,
        }
    }

    fn end_batch(&mut self, out: &mut Vec<Output>) {
        let Phase::Batch(batch) = std::mem::replace(&mut self.phase, Phase::Idle) else { return };
        let Batch { at, calls, sequential, written, .. } = *batch;
        let mut results = Vec::with_capacity(calls.len());
        let mut terminate = !calls.is_empty();
        let mut stop_after_batch = false;
        for (index, c) in calls.into_iter().enumerate() {
            let r = match c.state {
                CallState::Done(r) => r,
                _ => CallResult::error(ABORTED_TEXT, false),
            };
            terminate &= r.output.terminate;
            stop_after_batch |= r.stop_after_batch;
            if !sequential {
                let call = CallRef { message: at, content: c.content, index };
                if let Some(tool_call) = self.call(call) {
                    let message = self.tool_result(tool_call, &r);
                    self.add_message(Message::ToolResult(message.clone()), out);
                    results.push(message);
                }
            }
        }
        if sequential {
            results = written;
        }
        if self.cancelled {
            self.turn_end(at, results, out);
            return self.abort_exit(out);
        }
        if terminate {
            self.last_reason = EndReason::Terminated;
        }
        self.more_tools = !terminate;
        self.ask_stop(at, results, stop_after_batch, out);
    }
}

/// Whether a call's arguments did not form complete JSON by the end of the stream.
fn tool_call_incomplete(call: &ToolCall) -> bool {
    call.arguments_incomplete
}

fn start_event(call: &ToolCall) -> AgentEvent {
    AgentEvent::ToolExecutionStart {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        args: call.arguments.clone(),
    }
}

fn end_event(call: &ToolCall, r: &CallResult) -> AgentEvent {
    AgentEvent::ToolExecutionEnd {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        result: r.output.clone(),
        is_error: r.is_error,
        execution_started: r.started,
    }
}

/// The turn-level hooks an error can name (stored as text, read back as these).
/// The outcome's error of a response that failed: what its message says.
fn provider_error(message: &AssistantMessage) -> AgentError {
    AgentError::Provider {
        message: message.error_message.clone().unwrap_or_else(|| "unknown error".to_owned()),
        status: message.error_status,
        code: message.error_code.clone(),
    }
}

pub(crate) fn hook_name(name: &str) -> &'static str {
    const HOOKS: [&str; 4] =
        ["prepare_next_turn", "api_key", "transform_context", "should_stop_after_turn"];
    HOOKS.into_iter().find(|h| *h == name).unwrap_or("unknown")
}

/// Drops the spare capacity that assembling a response left (blocks grown one
/// by one; argument maps, which reserve room for three entries at least): the
/// transcript keeps the response for the whole run.
fn compact(message: &mut AssistantMessage) {
    message.content.shrink_to_fit();
    for block in &mut message.content {
        if let AssistantContent::ToolCall(call) = block
            && let Value::Object(map) = &mut call.arguments
        {
            // `with_capacity` and `insert` reserve exactly; collecting would not.
            let entries = std::mem::take(map);
            let mut exact = serde_json::Map::with_capacity(entries.len());
            for (key, value) in entries {
                exact.insert(key, value);
            }
            *map = exact;
        }
    }
}

/// Gives a call whose id repeats an earlier call's of the same response a new
/// id (`<id>-2`, ...), so each result names one call and no provider sees two
/// results under one id.
fn unique_call_ids(message: &mut AssistantMessage) {
    let ids: Vec<&str> = message.tool_calls().map(|c| c.id.as_str()).collect();
    let repeats = ids
        .iter()
        .enumerate()
        .any(|(i, id)| ids.get(..i).is_some_and(|before| before.contains(id)));
    if !repeats {
        return;
    }
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let all: std::collections::HashSet<String> = ids.iter().map(|s| (*s).to_owned()).collect();
    for block in &mut message.content {
        let AssistantContent::ToolCall(call) = block else { continue };
        if seen.insert(call.id.clone()) {
            continue;
        }
        let mut n = 2u64;
        let fresh = loop {
            let candidate = format!("{}-{n}", call.id);
            if !all.contains(&candidate) && !seen.contains(&candidate) {
                break candidate;
            }
            n += 1;
        };
        seen.insert(fresh.clone());
        call.id = fresh;
    }
}

/// The context as stored: tools as their definitions and settings; their
/// executors are bound again after a restore.
mod stored_context {
    use std::sync::Arc;

    use llm_core::{Message, Tool};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::context::AgentContext;
    use crate::tool::{AgentTool, ExecutionMode, ToolError, ToolInvocation};

    #[derive(Serialize, Deserialize)]
    struct StoredTool {
        tool: Tool,
        label: String,
        execution_mode: ExecutionMode,
        blocking: bool,
    }

    #[derive(Serialize, Deserialize)]
    struct Stored {
        system_prompt: Option<String>,
        messages: Vec<Message>,
        tools: Vec<StoredTool>,
    }

    pub(super) fn serialize<S: Serializer>(
        context: &Arc<AgentContext>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Borrowed<'a> {
            system_prompt: &'a Option<String>,
            messages: &'a [Message],
            tools: Vec<StoredTool>,
        }
        Borrowed {
            system_prompt: &context.system_prompt,
            messages: &context.messages,
            tools: context
                .tools
                .iter()
                .map(|t| StoredTool {
                    tool: t.tool.as_ref().clone(),
                    label: t.label.clone(),
                    execution_mode: t.execution_mode,
                    blocking: t.blocking,
                })
                .collect(),
        }
        .serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Arc<AgentContext>, D::Error> {
        let stored = Stored::deserialize(d)?;
        let tools = stored
            .tools
            .into_iter()
            .map(|t| {
                let name = t.tool.name.clone();
                let mut tool = AgentTool::new(t.tool, move |_inv: ToolInvocation| {
                    let text = format!("Tool {name} has no executor in this process");
                    async move { Err::<crate::tool::ToolOutput, _>(ToolError(text)) }
                });
                tool.label = t.label;
                tool.execution_mode = t.execution_mode;
                tool.blocking = t.blocking;
                tool
            })
            .collect();
        Ok(Arc::new(AgentContext {
            system_prompt: stored.system_prompt,
            messages: stored.messages,
            tools,
        }))
    }
}
