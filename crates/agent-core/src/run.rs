//! The in-process driver of the agent loop: [`Agent`] and [`AgentRun`] over an [`AgentMachine`].
//!
//! [`AgentRun`] is a `Stream` of [`AgentEvent`]s that runs the machine as it is polled.
//! Hooks run on the polling task, contained: a panic, or a hang past `abort_grace` after an
//! abort, becomes an answer. Each tool call runs on its own tokio task (tools declared
//! blocking on the blocking pool), started when the run first polls the call. The run goes
//! on only while its consumer has no event to read, so it is never a turn ahead of it.
//! Steering and follow-up queues are handed to the machine before each decision.
//! A tool's progress goes straight to the event queue; its sink is closed before the call's
//! result reaches the machine, so no update follows a call's end. The stored transcript is
//! lent to each request, not copied, so a turn costs O(new messages).

use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::Duration;

use futures_util::future::{BoxFuture, Either};
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, Stream, StreamExt};
use llm_core::output::StructuredOutcome;
use llm_core::telemetry;
use llm_core::validation::ValidatorCache;
use llm_core::{
    ApiKey, AssistantContent, AssistantEvent, AssistantStream, CancellationToken, Context, Message,
    Model, PartialMessage, Provider, StopReason, StreamOptions, Usage, now_millis,
};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tracing::Instrument;

use crate::context::{AgentContext, MessageQueue, QueueMode};
use crate::event::{AgentEvent, EndReason};
use crate::hooks::{AgentHooks, BeforeToolCall, CallInfo, NoHooks, TurnInfo, TurnUpdate};
use crate::machine::{
    AgentMachine, Answer, Approval, CallRef, Command, Input, MachineSettings, Output,
    RequestFailure, TurnChange,
};
use crate::output::{AgentOutput, TypedRun};
use crate::queue::EventQueue;
use crate::spans::{
    execute_tool_span, invoke_agent_span, record_run_end, record_tool_answer, turn_span,
};
use crate::tool::{ExecutionMode, ProgressSink, ToolError, ToolInvocation, ToolOutput};

/// Text of the result for calls that never ran, or did not return, because the run was aborted.
pub const ABORTED_TEXT: &str = "Operation aborted";
/// Text of the result for a call blocked by `before_tool_call` without a reason.
pub const BLOCKED_TEXT: &str = "Tool execution was blocked";
/// How long running tools and hooks may take to return after an abort, by default.
pub const DEFAULT_ABORT_GRACE: Duration = Duration::from_millis(300);

/// Everything that configures an agent. Message queues are not here: each
/// run owns its own ([`AgentRun::steering`], [`AgentRun::follow_up`]).
#[derive(Clone)]
pub struct AgentConfig {
    /// The model to call.
    pub model: Model,
    /// The provider (or a `ProviderRegistry`) that serves it.
    pub provider: Arc<dyn Provider>,
    /// Request options; the cancellation token is replaced per run.
    pub options: StreamOptions,
    /// Parallel (default) or sequential for every batch.
    pub tool_execution: ExecutionMode,
    /// At most this many calls of a parallel batch run at once (`None`: all).
    pub max_concurrency: Option<usize>,
    /// At most this many requests per run (`None`: no limit). A hard cap:
    /// steering and follow-up messages do not get past it.
    pub max_turns: Option<u32>,
    /// Application hooks.
    pub hooks: Arc<dyn AgentHooks>,
    /// How many steering messages one poll injects (default: one at a time).
    pub steering_mode: QueueMode,
    /// How many follow-up messages one poll injects (default: one at a time).
    pub follow_up_mode: QueueMode,
    /// After an abort, how long running tools and hooks may take to return;
    /// what they return in time stands. Needs a tokio runtime with timers
    /// (without one the grace is zero).
    pub abort_grace: Duration,
    /// The schema every run's final answer must match (`None`: a free answer).
    pub output: Option<AgentOutput>,
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("model", &self.model.id)
            .field("tool_execution", &self.tool_execution)
            .field("max_concurrency", &self.max_concurrency)
            .field("max_turns", &self.max_turns)
            .field("abort_grace", &self.abort_grace)
            .finish_non_exhaustive()
    }
}

impl AgentConfig {
    /// A configuration with defaults: parallel tools, no limits, no hooks.
    pub fn new(model: Model, provider: Arc<dyn Provider>) -> Self {
        AgentConfig {
            model,
            provider,
            options: StreamOptions::default(),
            tool_execution: ExecutionMode::Parallel,
            max_concurrency: None,
            max_turns: None,
            hooks: Arc::new(NoHooks),
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            abort_grace: DEFAULT_ABORT_GRACE,
            output: None,
        }
    }
}

/// Why a transcript cannot be continued (OpenClaw's `continue` checks).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContinueError {
    /// The transcript is empty.
    #[error("Cannot continue: no messages in context")]
    Empty,
    /// The last message is from the assistant.
    #[error("Cannot continue from message role: assistant")]
    EndsWithAssistant,
}

/// Why a run ended with [`EndReason::Failed`] (or [`EndReason::Error`]: the provider's error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentError {
    /// Two tools in the context (or in a `prepare_next_turn` update) share a name.
    #[error("Duplicate tool name: {name}")]
    DuplicateToolName {
        /// The name.
        name: String,
    },
    /// A turn-level hook panicked.
    #[error("The {hook} hook panicked: {message}")]
    HookPanicked {
        /// The hook (`should_stop_after_turn`, `prepare_next_turn`, ...).
        hook: &'static str,
        /// The panic message.
        message: String,
    },
    /// A turn-level hook returned an error.
    #[error("The {hook} hook failed: {message}")]
    HookFailed {
        /// The hook.
        hook: &'static str,
        /// Its error.
        message: String,
    },
    /// The loop itself panicked (a bug in agent-core).
    #[error("The agent loop panicked: {message}")]
    Internal {
        /// The panic message.
        message: String,
    },
    /// The provider failed ([`EndReason::Error`]); the turn's assistant message keeps
    /// the rest (error type, body).
    #[error("The provider failed: {message}")]
    Provider {
        /// The provider's error message.
        message: String,
        /// The HTTP status, when the provider answered with one.
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        /// The provider's error code, when it sent one.
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
}

/// The result of a finished run.
///
/// The transcript is held once, in `context`: [`AgentOutcome::messages`] is the
/// part of it this run added (a program keeping many outcomes keeps each
/// message once).
#[derive(Debug, Clone)]
pub struct AgentOutcome {
    /// The context at the end (transcript and tools, deferred tools included).
    pub context: AgentContext,
    /// Why it ended.
    pub reason: EndReason,
    /// What failed, when `reason` is [`EndReason::Failed`] or [`EndReason::Error`].
    pub error: Option<AgentError>,
    /// Steering and follow-up messages still queued when the run ended (by the
    /// turn limit, a stop hook, an abort, ...), in the order they would have
    /// been sent: hand them to the next run.
    pub queued: Vec<Message>,
    /// The structured answer, when the run asked for one ([`AgentConfig::output`]).
    pub output: Option<StructuredOutcome>,
    /// Where this run's messages start in `context.messages`.
    first_new: usize,
}

impl AgentOutcome {
    /// Messages this run added, in order: the end of `context.messages`.
    pub fn messages(&self) -> &[Message] {
        self.context.messages.get(self.first_new..).unwrap_or_default()
    }

    /// The run's token usage and cost: every response of this run summed.
    pub fn usage(&self) -> Usage {
        let mut total = Usage::default();
        for message in self.messages() {
            if let Message::Assistant(reply) = message {
                total += &reply.usage;
            }
        }
        total
    }

    /// The run's cost in dollars, from the model's prices ([`AgentOutcome::usage`]).
    pub fn cost(&self) -> f64 {
        self.usage().cost.total
    }

    /// The text of the run's last assistant message (empty when it has none).
    pub fn text(&self) -> String {
        self.messages()
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Assistant(reply) => Some(reply.text()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The outcome of a run that ended before the machine could say more
    /// (`first_new`: where this run's messages start in the context's).
    fn failed(
        context: AgentContext,
        first_new: usize,
        reason: EndReason,
        error: Option<AgentError>,
    ) -> Self {
        AgentOutcome { context, reason, error, queued: Vec::new(), output: None, first_new }
    }
}

/// Serialized as before the transcript was held once: `messages` (this run's)
/// beside `context`.
impl serde::Serialize for AgentOutcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let fields = 3
            + usize::from(self.error.is_some())
            + usize::from(!self.queued.is_empty())
            + usize::from(self.output.is_some());
        let mut st = s.serialize_struct("AgentOutcome", fields)?;
        st.serialize_field("messages", self.messages())?;
        st.serialize_field("context", &self.context)?;
        st.serialize_field("reason", &self.reason)?;
        if let Some(error) = &self.error {
            st.serialize_field("error", error)?;
        }
        if !self.queued.is_empty() {
            st.serialize_field("queued", &self.queued)?;
        }
        if let Some(output) = &self.output {
            st.serialize_field("output", output)?;
        }
        st.end()
    }
}

/// [`AgentError`] as stored: hook names are read back as the names the loop uses.
#[derive(serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum StoredAgentError {
    DuplicateToolName { name: String },
    HookPanicked { hook: String, message: String },
    HookFailed { hook: String, message: String },
    Internal { message: String },
    Provider { message: String, status: Option<u16>, code: Option<String> },
}

impl<'de> serde::Deserialize<'de> for AgentError {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        StoredAgentError::deserialize(d).map(AgentError::from)
    }
}

impl From<StoredAgentError> for AgentError {
    fn from(stored: StoredAgentError) -> Self {
        use crate::machine::hook_name;
        match stored {
            StoredAgentError::DuplicateToolName { name } => AgentError::DuplicateToolName { name },
            StoredAgentError::HookPanicked { hook, message } => {
                AgentError::HookPanicked { hook: hook_name(&hook), message }
            }
            StoredAgentError::HookFailed { hook, message } => {
                AgentError::HookFailed { hook: hook_name(&hook), message }
            }
            StoredAgentError::Internal { message } => AgentError::Internal { message },
            StoredAgentError::Provider { message, status, code } => {
                AgentError::Provider { message, status, code }
            }
        }
    }
}

/// An agent: configuration plus the validator cache shared by its runs.
/// Runs are independent: one `Agent` may run many at once.
#[derive(Debug, Clone)]
pub struct Agent {
    config: Arc<AgentConfig>,
    /// The configured model, shared by every run until `prepare_next_turn` replaces it.
    model: Arc<Model>,
    validators: Arc<ValidatorCache>,
}

impl Agent {
    /// A new agent.
    pub fn new(config: AgentConfig) -> Self {
        let model = Arc::new(config.model.clone());
        Agent { config: Arc::new(config), model, validators: Arc::new(ValidatorCache::new()) }
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// Starts a run that adds `prompts` to `context`. A context with duplicate
    /// tool names ends the run before any request ([`AgentError::DuplicateToolName`]).
    pub fn run(&self, context: AgentContext, prompts: Vec<Message>) -> AgentRun {
        self.run_with_output(context, prompts, self.config.output.clone())
    }

    /// Starts a run whose final answer must match `output` (in place of
    /// [`AgentConfig::output`]); the answer is [`AgentOutcome::output`].
    pub fn run_with_output(
        &self,
        context: AgentContext,
        prompts: Vec<Message>,
        output: Option<AgentOutput>,
    ) -> AgentRun {
        let mut machine = AgentMachine::new(
            self.settings(),
            context,
            self.model.clone(),
            self.validators.clone(),
        );
        if let Some(output) = output {
            machine = machine.with_output(output);
        }
        self.drive(machine, Some(prompts))
    }

    /// Starts a run whose final answer is a `T` ([`AgentOutput::for_type`], asked on a
    /// final turn, or on every turn when [`AgentConfig::output`] says so).
    pub fn run_typed<T: JsonSchema + DeserializeOwned>(
        &self,
        context: AgentContext,
        prompts: Vec<Message>,
    ) -> TypedRun<T> {
        let mut output = AgentOutput::for_type::<T>();
        if let Some(configured) = &self.config.output {
            output.turn = configured.turn;
            output.retries = configured.retries;
        }
        TypedRun::new(self.run_with_output(context, prompts, Some(output)))
    }

    /// Continues a transcript whose last message is a user message or tool result.
    pub fn continue_run(&self, context: AgentContext) -> Result<AgentRun, ContinueError> {
        match context.messages.last() {
            None => Err(ContinueError::Empty),
            Some(Message::Assistant(_)) => Err(ContinueError::EndsWithAssistant),
            Some(_) => Ok(self.run(context, Vec::new())),
        }
    }

    /// Drives a machine restored from a stored state (its tools bound again with
    /// [`AgentMachine::bind_tools`]) on from where it was stored: the commands it
    /// had outstanding are carried out again (a tool that was running runs again).
    /// A machine stored before it started starts with no new prompts, as
    /// [`Agent::continue_run`] does.
    pub fn resume(&self, machine: AgentMachine) -> AgentRun {
        // Nothing would ever come of a machine that never started.
        let prompts = machine.is_idle().then(Vec::new);
        let mut run = self.drive(machine, prompts);
        let outstanding = run.machine.as_ref().map(|m| m.outstanding()).unwrap_or_default();
        let mut inputs = VecDeque::new();
        for command in outstanding {
            if let Some(input) = run.dispatch(command) {
                inputs.push_back(input);
            }
        }
        for input in inputs {
            run.step(input);
        }
        run
    }

    /// The loop settings of this agent's runs.
    pub fn settings(&self) -> MachineSettings {
        MachineSettings {
            tool_execution: self.config.tool_execution,
            max_concurrency: self.config.max_concurrency,
            max_turns: self.config.max_turns,
            steering_mode: self.config.steering_mode,
            follow_up_mode: self.config.follow_up_mode,
        }
    }

    fn drive(&self, machine: AgentMachine, prompts: Option<Vec<Message>>) -> AgentRun {
        let cancel = self.config.options.cancel.child();
        AgentRun {
            config: self.config.clone(),
            machine: Some(Box::new(machine)),
            prompts,
            events: EventQueue::default(),
            out: Vec::new(),
            tasks: FuturesUnordered::new(),
            fresh_tasks: false,
            response: None,
            options: None,
            cancelled: None,
            told_abort: false,
            outcome: None,
            cancel,
            steering: MessageQueue::new(),
            follow_up: MessageQueue::new(),
            approvals: Approvals::default(),
            ended: false,
            span: invoke_agent_span(&self.config.model),
            turn: tracing::Span::none(),
        }
    }
}

/// Decisions on approval requests, sent to a run from anywhere ([`AgentRun::approvals`]).
/// Clones share the run's inbox.
#[derive(Debug, Clone, Default)]
pub struct Approvals {
    inner: Arc<Mutex<ApprovalInbox>>,
}

#[derive(Debug, Default)]
struct ApprovalInbox {
    decisions: VecDeque<(String, Approval)>,
    reader: Option<Waker>,
}

impl Approvals {
    fn send(&self, tool_call_id: &str, decision: Approval) {
        let reader = {
            let mut inbox = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            inbox.decisions.push_back((tool_call_id.to_owned(), decision));
            inbox.reader.take()
        };
        if let Some(reader) = reader {
            reader.wake();
        }
    }

    /// Runs the call with this id, which waits for approval
    /// ([`AgentEvent::ApprovalRequested`]). A decision for a call that is not
    /// waiting is ignored.
    pub fn approve(&self, tool_call_id: &str) {
        self.send(tool_call_id, Approval::Approve);
    }

    /// Does not run the call with this id; `reason` is given to the model.
    pub fn deny(&self, tool_call_id: &str, reason: Option<String>) {
        self.send(tool_call_id, Approval::Deny { reason });
    }

    fn take(&self, waker: &Waker) -> VecDeque<(String, Approval)> {
        let mut inbox = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inbox.decisions.is_empty() {
            inbox.reader = Some(waker.clone());
        }
        std::mem::take(&mut inbox.decisions)
    }
}

/// What an in-flight effect of the driver finished with.
#[allow(
    clippy::large_enum_variant,
    reason = "made once per effect and moved straight into the machine"
)]
enum Completion {
    /// An input for the machine.
    Input(Input),
    /// `prepare_next_turn` answered (its request options stay with the driver).
    TurnPrepared(Answer<Option<TurnUpdate>>),
    /// The key and the transcript to send are ready.
    RequestReady { key: Option<ApiKey>, transformed: Option<Vec<Message>> },
}

/// The response being streamed.
struct Response {
    stream: Box<AssistantStream>,
    /// Resolves once the run was aborted and the grace period passed.
    expired: BoxFuture<'static, ()>,
}

/// A running agent: a `Stream` of [`AgentEvent`]s that drives the run as it is
/// polled. It is the in-process driver of an [`AgentMachine`]: hooks run on the
/// polling task, tools on their own tokio tasks; dropping the run aborts them.
/// Exactly one `AgentEnd` arrives, last; nothing follows it.
pub struct AgentRun {
    config: Arc<AgentConfig>,
    /// `None` once the run ended.
    machine: Option<Box<AgentMachine>>,
    /// The prompts, until the first poll starts the run.
    prompts: Option<Vec<Message>>,
    events: EventQueue,
    /// What the machine answered the input being handled.
    out: Vec<Output>,
    tasks: FuturesUnordered<BoxFuture<'static, Completion>>,
    /// Effects pushed since `tasks` was last polled: they start (a tool's task
    /// is spawned) before the consumer reads the events that announce them.
    fresh_tasks: bool,
    response: Option<Box<Response>>,
    /// Request options from `prepare_next_turn`; until then the config's.
    options: Option<Box<StreamOptions>>,
    /// Wakes the run when it is aborted while it waits.
    cancelled: Option<BoxFuture<'static, ()>>,
    told_abort: bool,
    /// Boxed: a run in flight keeps `AgentRun` inline in its consumer's future.
    outcome: Option<Box<AgentOutcome>>,
    cancel: CancellationToken,
    steering: MessageQueue,
    follow_up: MessageQueue,
    approvals: Approvals,
    ended: bool,
    /// `invoke_agent`, entered while the run is polled; none once the run ended.
    span: tracing::Span,
    /// The current turn's span, beneath `span`.
    turn: tracing::Span,
}

impl std::fmt::Debug for AgentRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRun")
            .field("finished", &self.machine.is_none())
            .finish_non_exhaustive()
    }
}

impl AgentRun {
    /// Aborts the run: streaming stops, running tools see their token cancelled
    /// and get `abort_grace` to return, every pending call gets a result.
    pub fn abort(&self) {
        self.cancel.cancel();
    }

    /// The run's cancellation token.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// This run's steering queue: messages injected after the current turn,
    /// before the next request. Clones share it.
    pub fn steering(&self) -> MessageQueue {
        self.steering.clone()
    }

    /// This run's follow-up queue: messages injected only when the run would
    /// otherwise stop. Clones share it.
    pub fn follow_up(&self) -> MessageQueue {
        self.follow_up.clone()
    }

    /// Where decisions on this run's approval requests go. Clones share it.
    pub fn approvals(&self) -> Approvals {
        self.approvals.clone()
    }

    /// The run's state machine, while the run goes on (to store it, say, when
    /// no effect is in flight).
    pub fn machine(&self) -> Option<&AgentMachine> {
        self.machine.as_deref()
    }

    /// Drives the run to its end, discarding events.
    pub async fn finish(mut self) -> AgentOutcome {
        while self.next().await.is_some() {}
        match self.outcome.take() {
            Some(o) => *o,
            None => AgentOutcome::failed(AgentContext::default(), 0, EndReason::Aborted, None),
        }
    }

    /// The response streaming now, as assembled so far: open tool calls show their
    /// arguments as parsed so far (a borrowed view, no second parse). The run reads
    /// the response no further while an event waits for its consumer, so the view is
    /// the state after the event just handed out.
    pub fn partial(&self) -> Option<PartialMessage<'_>> {
        self.response.as_ref().map(|r| r.stream.partial())
    }

    /// The parsed partial arguments a `toolcall_delta` event just changed: the value at
    /// its `changed` pointer in the call's arguments so far (`None` for any other event,
    /// or when nothing shown changed). Read it right after the event, before the next.
    ///
    /// ```no_run
    /// # use agent_core::{AgentEvent, AgentRun};
    /// # use futures_util::StreamExt;
    /// # async fn show(mut run: AgentRun) {
    /// while let Some(event) = run.next().await {
    ///     if let Some(part) = run.changed_arguments(&event) {
    ///         println!("arguments now: {part}");
    ///     }
    /// }
    /// # }
    /// ```
    pub fn changed_arguments(&self, event: &AgentEvent) -> Option<&Value> {
        let AgentEvent::MessageUpdate {
            event: AssistantEvent::ToolCallDelta { content_index, changed: Some(pointer), .. },
        } = event
        else {
            return None;
        };
        let call = self.partial()?.tool_call(*content_index)?;
        call.arguments.pointer(pointer)
    }

    /// The outcome, once the stream has ended.
    pub fn outcome(&self) -> Option<&AgentOutcome> {
        self.outcome.as_deref()
    }

    /// Hands one input to the machine, and carries out what it answers (the
    /// answers of synchronous callbacks are handed in at once).
    fn step(&mut self, input: Input) {
        let mut inputs = VecDeque::from([input]);
        while let Some(mut input) = inputs.pop_front() {
            // The token is read before every decision, as a loop that awaits would read it.
            if !self.told_abort && self.cancel.is_cancelled() && !matches!(input, Input::Abort) {
                self.told_abort = true;
                self.cancelled = None;
                inputs.push_front(input);
                input = Input::Abort;
            }
            let Some(machine) = self.machine.as_mut() else { return };
            if !matches!(input, Input::ResponseEvent(_) | Input::ResponseStarted(_)) {
                // Steering is read where the loop decides, so it is handed in before each decision.
                for m in self.steering.drain() {
                    machine.handle(Input::Steer(m), 0, &mut self.out);
                }
                for m in self.follow_up.drain() {
                    machine.handle(Input::FollowUp(m), 0, &mut self.out);
                }
            }
            machine.handle(input, now_millis(), &mut self.out);
            let mut out = std::mem::take(&mut self.out);
            for output in out.drain(..) {
                match output {
                    Output::Event(event) => self.events.send(event),
                    Output::Command(command) => {
                        if let Some(input) = self.dispatch(command) {
                            inputs.push_back(input);
                        }
                    }
                    Output::Finished => self.end(),
                }
            }
            // Outputs are large (an event is ~460 bytes): a burst's room is not kept for the
            // run's life, and a small buffer only until the run waits (`poll_next`).
            if out.capacity() <= 4 {
                self.out = out;
            }
        }
    }

    fn end(&mut self) {
        let Some(mut machine) = self.machine.take() else { return };
        let mut queued = machine.take_queued();
        queued.extend(self.steering.drain());
        queued.extend(self.follow_up.drain());
        let first_new = first_new(&machine);
        let reason = machine.reason().unwrap_or(EndReason::Failed);
        let error = machine.error().cloned();
        let output = machine.output_outcome();
        self.close_spans(reason, machine.turns());
        let mut context = machine.into_context();
        // The outcome may be kept long after the run (until it is joined): not with the room it grew into.
        context.messages.shrink_to_fit();
        self.outcome =
            Some(Box::new(AgentOutcome { context, reason, error, queued, output, first_new }));
        self.response = None;
        self.tasks = FuturesUnordered::new();
    }

    /// Records how the run ended on its span and closes it and the turn's (a span ends
    /// when its last handle goes, so the run's spans end with the run, not when it is dropped).
    fn close_spans(&mut self, reason: EndReason, turns: u32) {
        let span = std::mem::replace(&mut self.span, tracing::Span::none());
        self.turn = tracing::Span::none();
        record_run_end(&span, reason, turns);
    }

    /// Carries out a command: starts its effect, or answers a synchronous one at once.
    fn dispatch(&mut self, command: Command) -> Option<Input> {
        let machine = self.machine.as_deref()?;
        let hooks = self.config.hooks.clone();
        let cancel = self.cancel.clone();
        let grace = self.config.abort_grace;
        let context = machine.context().clone();
        match command {
            Command::PrepareTurn => {
                let model = machine.model().clone();
                let turn = machine.turns();
                self.turn = turn_span(&self.span, turn);
                let start = first_new(machine);
                return self.spawn_answer(async move {
                    let info = TurnInfo {
                        turn,
                        context: &context,
                        new_messages: context.messages.get(start..).unwrap_or_default(),
                        model: &model,
                    };
                    Completion::TurnPrepared(
                        contained(&cancel, grace, || hooks.prepare_next_turn(info)).await,
                    )
                });
            }
            Command::Request => {
                if self.turn.is_none() {
                    // A restored machine may start at its request.
                    let turn = machine.turns();
                    self.turn = turn_span(&self.span, turn);
                }
                let provider = machine.model().provider.clone();
                self.spawn(async move {
                    let key = match contained(&cancel, grace, || hooks.api_key(&provider)).await {
                        Answer::Done(Ok(key)) => key,
                        Answer::Done(Err(e)) => {
                            return Completion::Input(Input::RequestFailed(
                                RequestFailure::HookFailed { hook: "api_key".into(), message: e.0 },
                            ));
                        }
                        Answer::Panicked(message) => {
                            return Completion::Input(Input::RequestFailed(
                                RequestFailure::HookPanicked { hook: "api_key".into(), message },
                            ));
                        }
                        Answer::Abandoned => {
                            return Completion::Input(Input::RequestFailed(
                                RequestFailure::Abandoned,
                            ));
                        }
                    };
                    let transformed = match contained(&cancel, grace, || {
                        hooks.transform_context(&context.messages)
                    })
                    .await
                    {
                        Answer::Done(t) => t,
                        Answer::Panicked(message) => {
                            return Completion::Input(Input::RequestFailed(
                                RequestFailure::HookPanicked {
                                    hook: "transform_context".into(),
                                    message,
                                },
                            ));
                        }
                        Answer::Abandoned => {
                            return Completion::Input(Input::RequestFailed(
                                RequestFailure::Abandoned,
                            ));
                        }
                    };
                    Completion::RequestReady { key, transformed }
                });
            }
            Command::ResolveTool { call } => {
                return self.spawn_answer(async move {
                    let answer = match call_info(&context, call) {
                        Some(info) => {
                            contained(&cancel, grace, || hooks.resolve_deferred_tool(info)).await
                        }
                        None => Answer::Done(Ok(None)),
                    };
                    Completion::Input(Input::ToolResolved { call, answer })
                });
            }
            Command::PrepareArguments { call, tool } => {
                let prepare = context.tools.get(tool).and_then(|t| t.prepare_arguments.clone());
                let args = machine.call(call).map(|c| c.arguments.clone()).unwrap_or(Value::Null);
                let answer = match prepare {
                    Some(prepare) => {
                        match std::panic::catch_unwind(AssertUnwindSafe(|| prepare(args))) {
                            Ok(result) => Answer::Done(result),
                            Err(panic) => Answer::Panicked(panic_text(panic)),
                        }
                    }
                    None => Answer::Done(Ok(args)),
                };
                return Some(Input::ArgumentsPrepared { call, answer });
            }
            Command::BeforeToolCall { call, args } => {
                return self.spawn_answer(async move {
                    let answer = match call_info(&context, call) {
                        Some(info) => {
                            contained(&cancel, grace, || hooks.before_tool_call(info, &args)).await
                        }
                        None => Answer::Done(BeforeToolCall::Allow),
                    };
                    drop(args);
                    Completion::Input(Input::BeforeToolCall { call, answer })
                });
            }
            Command::Execute { call, tool, args, .. } => {
                let (Some(agent_tool), Some(tool_call)) =
                    (context.tools.get(tool), machine.call(call))
                else {
                    let answer = Answer::Done(Err(ToolError("Tool not found".into())));
                    return Some(Input::ToolFinished { call, answer });
                };
                let sink = CloseOnDrop(ProgressSink::connected(
                    &tool_call.id,
                    &tool_call.name,
                    self.events.clone(),
                ));
                let invocation = ToolInvocation {
                    call_id: tool_call.id.clone(),
                    arguments: args,
                    cancel: cancel.child(),
                    progress: sink.0.clone(),
                    idempotency_key: None,
                };
                let (executor, blocking) = (agent_tool.executor.clone(), agent_tool.blocking);
                let span = execute_tool_span(&self.turn, tool_call, &invocation.arguments);
                drop(context);
                let tool_span = span.clone();
                self.spawn(Instrument::instrument(
                    async move {
                        // Started when the run first polls the call, as a loop that awaits it would.
                        let task = ToolTask::start(executor, blocking, invocation);
                        let expired = grace_expired(cancel, grace);
                        futures_util::pin_mut!(expired);
                        let answer = match futures_util::future::select(task, expired).await {
                            Either::Left((outcome, _)) => {
                                // No update may follow the result, even from a thread the tool left running.
                                sink.0.close();
                                match outcome {
                                    Ok(result) => Answer::Done(result),
                                    Err(panic) => Answer::Panicked(panic),
                                }
                            }
                            Either::Right((_, task)) => {
                                // Nothing of the call may outlive the run: wait (bounded) for the
                                // aborted task to be dropped rather than leaving it to the runtime.
                                Box::pin(task.cancel_and_settle(grace)).await;
                                Answer::Abandoned
                            }
                        };
                        drop(sink);
                        record_tool_answer(&tool_span, &answer);
                        Completion::Input(Input::ToolFinished { call, answer })
                    },
                    span,
                ));
            }
            Command::AfterToolCall { call, output, is_error } => {
                return self.spawn_answer(async move {
                    let answer = match call_info(&context, call) {
                        Some(info) => {
                            contained(&cancel, grace, || {
                                hooks.after_tool_call(info, &output, is_error)
                            })
                            .await
                        }
                        None => Answer::Done(None),
                    };
                    drop(output);
                    Completion::Input(Input::AfterToolCall { call, answer })
                });
            }
            Command::ShouldStopAfterTurn => {
                let message = machine.turn_message()?;
                let results = machine.turn_results();
                let answer = match std::panic::catch_unwind(AssertUnwindSafe(|| {
                    hooks.should_stop_after_turn(message, results)
                })) {
                    Ok(stop) => Answer::Done(stop),
                    Err(panic) => Answer::Panicked(panic_text(panic)),
                };
                return Some(Input::StopAfterTurn(answer));
            }
        }
        None
    }

    fn spawn(&mut self, effect: impl Future<Output = Completion> + Send + 'static) {
        self.tasks.push(Box::pin(effect));
        self.fresh_tasks = true;
    }

    /// A hook's effect: most hooks answer at once, so it is polled once here and
    /// its answer handed in without a round through the effect set.
    fn spawn_answer(
        &mut self,
        effect: impl Future<Output = Completion> + Send + 'static,
    ) -> Option<Input> {
        let mut effect: BoxFuture<'static, Completion> = Box::pin(effect);
        let mut cx = TaskContext::from_waker(futures_util::task::noop_waker_ref());
        match effect.as_mut().poll(&mut cx) {
            // The effect set polls it again with the run's waker.
            Poll::Pending => {
                self.tasks.push(effect);
                self.fresh_tasks = true;
                None
            }
            Poll::Ready(Completion::Input(input)) => Some(input),
            Poll::Ready(Completion::TurnPrepared(answer)) => Some(self.turn_prepared(answer)),
            Poll::Ready(other) => {
                self.tasks.push(Box::pin(std::future::ready(other)));
                self.fresh_tasks = true;
                None
            }
        }
    }

    /// `prepare_next_turn`'s answer: the request options stay with the driver.
    fn turn_prepared(&mut self, answer: Answer<Option<TurnUpdate>>) -> Input {
        let answer = match answer {
            Answer::Done(Some(update)) => {
                if let Some(options) = update.options {
                    self.options = Some(Box::new(options));
                }
                Answer::Done(Some(TurnChange {
                    model: update.model,
                    system_prompt: update.system_prompt,
                    tools: update.tools,
                }))
            }
            Answer::Done(None) => Answer::Done(None),
            Answer::Panicked(text) => Answer::Panicked(text),
            Answer::Abandoned => Answer::Abandoned,
        };
        Input::TurnPrepared(answer)
    }

    fn completed(&mut self, completion: Completion) {
        match completion {
            Completion::Input(input) => self.step(input),
            Completion::TurnPrepared(answer) => {
                let input = self.turn_prepared(answer);
                self.step(input);
            }
            Completion::RequestReady { key, transformed } => self.request(key, transformed),
        }
    }

    /// Starts the response stream.
    fn request(&mut self, key: Option<ApiKey>, transformed: Option<Vec<Message>>) {
        let Some(machine) = self.machine.as_deref_mut() else { return };
        let mut options = self.options.as_deref().unwrap_or(&self.config.options).clone();
        // The run's own token, not a child: a child per request would stay
        // allocated in the run token's list of children until it is pruned.
        options.cancel = self.cancel.clone();
        if let Some(key) = key {
            options.api_key = Some(key);
        }
        machine.output_options(&mut options);
        // The stored transcript is lent to the request and taken back, so a turn
        // costs no copy of it (unless `transform_context` rewrote it).
        let lent = transformed.is_none();
        let mut llm_context = Context {
            system_prompt: machine.context().system_prompt.clone(),
            messages: match transformed {
                Some(messages) => messages,
                None => machine.lend_messages(),
            },
            tools: machine.context().tools.iter().map(|t| t.tool.as_ref().clone()).collect(),
        };
        let model = machine.model().clone();
        let provider = self.config.provider.clone();
        let turn = self.turn.clone();
        let started = std::panic::catch_unwind(AssertUnwindSafe(|| {
            turn.in_scope(|| provider.stream(&model, &llm_context, &options))
        }));
        if let Ok(stream) = &started {
            telemetry::record_input(stream.span(), &llm_context);
        }
        if lent {
            machine.return_messages(std::mem::take(&mut llm_context.messages));
        }
        drop(llm_context);
        match started {
            Ok(stream) => {
                self.response = Some(Box::new(Response {
                    stream: Box::new(stream),
                    expired: Box::pin(grace_expired(self.cancel.clone(), self.config.abort_grace)),
                }));
            }
            Err(panic) => {
                self.step(Input::RequestFailed(RequestFailure::ProviderPanicked(panic_text(panic))))
            }
        }
    }

    /// Reads the response's next event, if one is ready.
    fn poll_response(&mut self, cx: &mut TaskContext<'_>) -> Option<Input> {
        let response = self.response.as_mut()?;
        let polled =
            std::panic::catch_unwind(AssertUnwindSafe(|| response.stream.poll_next_unpin(cx)));
        let input = match polled {
            Ok(Poll::Ready(Some(AssistantEvent::Start))) => {
                return Some(Input::ResponseStarted(response.stream.partial().to_message()));
            }
            Ok(Poll::Ready(Some(
                AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. },
            ))) => {
                telemetry::record_output(response.stream.span(), &message);
                Input::ResponseEnded(*message)
            }
            Ok(Poll::Ready(Some(event))) => return Some(Input::ResponseEvent(event)),
            Ok(Poll::Ready(None)) => Input::ResponseEnded(response.stream.partial().to_message()),
            Err(panic) => {
                let mut message = response.stream.partial().to_message();
                message.stop_reason = StopReason::Error;
                message.error_message =
                    Some(format!("The provider panicked: {}", panic_text(panic)));
                Input::ResponseEnded(message)
            }
            Ok(Poll::Pending) => {
                if response.expired.as_mut().poll(cx).is_pending() {
                    return None;
                }
                // The provider ignored the cancellation.
                let mut message = response.stream.partial().to_message();
                message.stop_reason = StopReason::Aborted;
                message.error_message = Some("Request was aborted".to_owned());
                Input::ResponseEnded(message)
            }
        };
        self.response = None;
        Some(input)
    }

    /// Hands the machine one input that is ready; `false` when none is.
    fn drive(&mut self, cx: &mut TaskContext<'_>) -> bool {
        if let Some(prompts) = self.prompts.take() {
            self.step(Input::Start(prompts));
            return true;
        }
        if self.machine.is_none() {
            return false;
        }
        if !self.told_abort && self.cancel.is_cancelled() {
            self.told_abort = true;
            self.cancelled = None;
            self.step(Input::Abort);
            return true;
        }
        let decisions = self.approvals.take(cx.waker());
        if !decisions.is_empty() {
            for (tool_call_id, decision) in decisions {
                self.step(Input::Approval { tool_call_id, decision });
            }
            return true;
        }
        if let Some(input) = self.poll_response(cx) {
            self.step(input);
            return true;
        }
        if self.poll_tasks(cx) {
            return true;
        }
        if !self.told_abort {
            let cancel = self.cancel.clone();
            let watch = self
                .cancelled
                .get_or_insert_with(|| Box::pin(async move { cancel.cancelled().await }));
            if watch.as_mut().poll(cx).is_ready() {
                self.told_abort = true;
                self.cancelled = None;
                self.step(Input::Abort);
                return true;
            }
        }
        false
    }

    /// Polls the effects in flight; `true` when one finished (and went to the machine).
    fn poll_tasks(&mut self, cx: &mut TaskContext<'_>) -> bool {
        self.fresh_tasks = false;
        if let Poll::Ready(Some(completion)) = self.tasks.poll_next_unpin(cx) {
            self.completed(completion);
            // Effects it did not reach in this poll have not started yet.
            self.fresh_tasks = true;
            return true;
        }
        false
    }

    /// The run's end after a bug in the driver or the machine.
    fn internal_error(&mut self, panic: Box<dyn std::any::Any + Send>) {
        let error = AgentError::Internal { message: panic_text(panic) };
        tracing::error!(%error, "agent loop panicked");
        self.close_spans(EndReason::Failed, 0);
        // The transcript so far stays the caller's: a bug in the loop must not lose stored turns.
        let (context, first_new) = match self.machine.take() {
            Some(machine) => {
                let first_new = first_new(&machine);
                (machine.into_context(), first_new)
            }
            None => (AgentContext::default(), 0),
        };
        self.response = None;
        self.tasks = FuturesUnordered::new();
        self.events.send(AgentEvent::AgentEnd { messages: Vec::new(), reason: EndReason::Failed });
        self.outcome = Some(Box::new(AgentOutcome::failed(
            context,
            first_new,
            EndReason::Failed,
            Some(error),
        )));
    }
}

/// Where the machine's run started in its transcript.
fn first_new(machine: &AgentMachine) -> usize {
    machine.context().messages.len().saturating_sub(machine.new_messages().len())
}

/// What a hook is told about a call of the transcript.
fn call_info(context: &AgentContext, call: CallRef) -> Option<CallInfo<'_>> {
    let Some(Message::Assistant(assistant)) = context.messages.get(call.message) else {
        return None;
    };
    let Some(AssistantContent::ToolCall(tool_call)) = assistant.content.get(call.content) else {
        return None;
    };
    Some(CallInfo { assistant, call: tool_call, context })
}

impl Stream for AgentRun {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<AgentEvent>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        // What the run starts while polled (hooks, requests, tools) nests beneath it.
        let span = this.span.clone();
        let _entered = span.enter();
        // The run goes on only while its consumer has nothing to read: a turn's
        // events (each end event with a copy of its message) are not produced
        // ahead of a consumer that is behind, which is most of them when many
        // runs share a few threads.
        while this.machine.is_some() || this.prompts.is_some() {
            let behind = this.events.len() != 0;
            if behind && !this.fresh_tasks {
                break;
            }
            // Every callback is contained where it is called; this is the last
            // line of defence against a bug in the loop itself.
            let step =
                AssertUnwindSafe(|| if behind { this.poll_tasks(cx) } else { this.drive(cx) });
            match std::panic::catch_unwind(step) {
                Ok(true) => {}
                Ok(false) => break,
                Err(panic) => this.internal_error(panic),
            }
        }
        let next = match this.events.poll_recv(cx) {
            Poll::Ready(event) => Some(event),
            Poll::Pending if this.machine.is_none() && this.prompts.is_none() => None,
            Poll::Pending => {
                // A run waits for most of its life: not with room for a burst of outputs.
                this.out = Vec::new();
                return Poll::Pending;
            }
        };
        if next.as_ref().is_none_or(|e| matches!(e, AgentEvent::AgentEnd { .. })) {
            this.ended = true;
            this.events.close();
        }
        Poll::Ready(next)
    }
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panicked".to_owned()
    }
}

/// Sleeps on tokio's timer, or returns at once where there is none.
fn sleep(duration: Duration) -> BoxFuture<'static, ()> {
    if duration.is_zero() || tokio::runtime::Handle::try_current().is_err() {
        return Box::pin(std::future::ready(()));
    }
    // A runtime built without timers panics here; no grace is then the only option.
    match std::panic::catch_unwind(|| tokio::time::sleep(duration)) {
        Ok(s) => Box::pin(s),
        Err(_) => Box::pin(std::future::ready(())),
    }
}

/// Moves a value out of its box and frees the box now (a box moved out of
/// inside an async block is only freed when the block ends).
#[allow(clippy::boxed_local, reason = "the box is the point: it is freed on return")]
fn unbox<T>(boxed: Box<T>) -> T {
    *boxed
}

/// Resolves once `cancel` fired and `grace` has passed since.
async fn grace_expired(cancel: CancellationToken, grace: Duration) {
    cancel.cancelled().await;
    sleep(grace).await;
}

/// Runs an untrusted callback that returns a future: panics in its synchronous
/// part or in the future are caught, and after an abort it gets `grace` to return.
async fn contained<'a, T>(
    cancel: &CancellationToken,
    grace: Duration,
    f: impl FnOnce() -> BoxFuture<'a, T>,
) -> Answer<T> {
    let fut = match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(fut) => fut,
        Err(panic) => return Answer::Panicked(panic_text(panic)),
    };
    let expired = grace_expired(cancel.clone(), grace);
    futures_util::pin_mut!(expired);
    match futures_util::future::select(AssertUnwindSafe(fut).catch_unwind(), expired).await {
        Either::Left((Ok(v), _)) => Answer::Done(v),
        Either::Left((Err(panic), _)) => Answer::Panicked(panic_text(panic)),
        Either::Right(_) => Answer::Abandoned,
    }
}

/// A tool call running on its own task (or the blocking pool), aborted when dropped.
enum ToolTask {
    /// The result is boxed: a task keeps room for its output beside its future
    /// while it runs, and the result is larger than the future.
    Spawned(tokio::task::JoinHandle<Box<Result<ToolOutput, ToolError>>>),
    /// No tokio runtime: the call runs inside the run's own future.
    Local(BoxFuture<'static, Result<Result<ToolOutput, ToolError>, String>>),
}

impl ToolTask {
    fn start(
        executor: Arc<dyn crate::tool::ToolExecutor>,
        blocking: bool,
        invocation: ToolInvocation,
    ) -> ToolTask {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) if blocking => {
                let inner = handle.clone();
                // The call's span goes with it, so what the tool does nests beneath the call.
                let span = tracing::Span::current();
                ToolTask::Spawned(handle.spawn_blocking(move || {
                    Box::new(inner.block_on(executor.execute(invocation).instrument(span)))
                }))
            }
            Ok(handle) => {
                // Boxed until the task starts (and freed then, by `unbox`), so the
                // task's future is a few words beside the tool's own; the synchronous
                // part of `execute` runs on the task too, where it cannot stall the run.
                let invocation = Box::new(invocation);
                let span = tracing::Span::current();
                ToolTask::Spawned(
                    handle.spawn(
                        async move { Box::new(executor.execute(unbox(invocation)).await) }
                            .instrument(span),
                    ),
                )
            }
            Err(_) => ToolTask::Local(Box::pin(async move {
                match std::panic::catch_unwind(AssertUnwindSafe(|| executor.execute(invocation))) {
                    Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await.map_err(panic_text),
                    Err(panic) => Err(panic_text(panic)),
                }
            })),
        }
    }
}

impl ToolTask {
    /// Aborts a spawned task and waits until the runtime has dropped its future, for
    /// at most `bound` (a task on the blocking pool, or one that never yields,
    /// cannot be stopped from outside; it is left to finish on its own).
    async fn cancel_and_settle(self, bound: Duration) {
        let ToolTask::Spawned(handle) = &self else { return };
        handle.abort();
        let settled = std::pin::pin!(self);
        let limit = std::pin::pin!(sleep(bound));
        let _ = futures_util::future::select(settled, limit).await;
    }
}

impl Future for ToolTask {
    /// The tool's own result, or the text of its panic.
    type Output = Result<Result<ToolOutput, ToolError>, String>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            ToolTask::Spawned(handle) => handle.poll_unpin(cx).map(|joined| match joined {
                Ok(result) => Ok(*result),
                Err(e) if e.is_panic() => Err(panic_text(e.into_panic())),
                Err(_) => Err("Tool task was cancelled".to_owned()),
            }),
            ToolTask::Local(fut) => fut.as_mut().poll(cx),
        }
    }
}

impl Drop for ToolTask {
    fn drop(&mut self) {
        if let ToolTask::Spawned(handle) = self {
            handle.abort();
        }
    }
}

/// Closes a progress sink when the call's future ends or is dropped.
struct CloseOnDrop(ProgressSink);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}
