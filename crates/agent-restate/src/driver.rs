//! The durable driver: runs an [`AgentMachine`] inside a Restate handler.
//!
//! Every command of the machine is either a journaled step (`ctx.run`) or a
//! deterministic transition done inline (argument preparation). A step records
//! its answer and the time it finished, and the machine is fed that time, so a
//! replay feeds the machine exactly the inputs of the first attempt: the same
//! commands come out in the same order and meet their recorded answers; no hook
//! is asked again and no recorded tool runs again.
//!
//! The calls of a parallel batch that the machine lets run together form one
//! wave: their steps are journaled in call order and awaited together, and
//! their results are fed back in call order, so the wave takes as long as its
//! slowest call and the journal is the same whatever order they finish in.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_core::spans;
use agent_core::{
    AfterToolCall, AgentEvent, AgentHooks, AgentMachine, AgentTool, Answer, Approval,
    BeforeToolCall, CallInfo, CallRef, Command, ExecutionMode, Input, Output, ProgressSink,
    RequestFailure, ToolError, ToolInvocation, ToolOutput, TurnChange, TurnInfo,
};
use futures_util::{FutureExt, StreamExt};
use llm_core::{
    AssistantContent, AssistantEvent, AssistantMessage, CancellationToken, Context, Message,
    Provider, StopReason, StreamOptions, Tool, UserContent, now_millis, telemetry,
};
use restate_sdk::prelude::*;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Instrument;

use crate::live::{AttemptEvents, LiveSink};
use crate::session::{SessionApprovalsClient, SessionEventsClient, SessionInboxClient};

/// How a durable session bounds its steps.
#[derive(Debug, Clone, PartialEq)]
pub struct StepLimits {
    /// A tool call or hook that has not answered after this long gets an error
    /// answer (recorded like any other), so a hung callback cannot hold the session.
    /// Keep it below the worker's Restate `abort_timeout`: a step cut off by
    /// Restate counts as in flight and runs again.
    pub step_timeout: Duration,
    /// A model request that failed for a transient reason (rate limit, overload,
    /// transport, truncated stream, a timeout, a panic) after the HTTP retries is
    /// retried durably: first after `retry_initial`, ...
    pub retry_initial: Duration,
    /// ... doubling up to `retry_max_delay` between attempts, ...
    pub retry_max_delay: Duration,
    /// ... for at most `retry_max_attempts` attempts in all, after which the
    /// last failure is recorded as the response (ending the run with an error).
    pub retry_max_attempts: u32,
}

impl Default for StepLimits {
    fn default() -> Self {
        StepLimits {
            step_timeout: Duration::from_secs(300),
            retry_initial: Duration::from_secs(1),
            retry_max_delay: Duration::from_secs(60),
            retry_max_attempts: 30,
        }
    }
}

/// A step's answer and the time it was recorded (Unix milliseconds).
#[derive(Serialize, Deserialize)]
struct Stamped<T> {
    at: u64,
    value: T,
}

/// A tool as recorded when a hook hands it out: its definition; the executor
/// is bound again by name.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RecordedTool {
    tool: Tool,
    label: String,
    execution_mode: ExecutionMode,
    blocking: bool,
}

impl RecordedTool {
    fn of(tool: &AgentTool) -> Self {
        RecordedTool {
            tool: tool.tool.as_ref().clone(),
            label: tool.label.clone(),
            execution_mode: tool.execution_mode,
            blocking: tool.blocking,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct RecordedTurn {
    model: Option<llm_core::Model>,
    system_prompt: Option<Option<String>>,
    tools: Option<Vec<RecordedTool>>,
}

#[derive(Debug, Serialize, Deserialize)]
enum RecordedBefore {
    Allow,
    Block(Option<String>),
    Ask(String),
}

#[derive(Debug, Serialize, Deserialize)]
struct RecordedAfter {
    content: Option<Vec<UserContent>>,
    details: Option<Value>,
    is_error: Option<bool>,
    terminate: Option<bool>,
    stop_after_batch: bool,
}

#[derive(Debug, Serialize, Deserialize)]
enum RecordedResponse {
    Message(Box<AssistantMessage>),
    Failed(RequestFailure),
}

type Awaited<'ctx> =
    Pin<Box<dyn Future<Output = Result<Json<Approval>, TerminalError>> + Send + 'ctx>>;

/// One wave's call: where, which tool, which arguments.
struct WaveCall {
    call: CallRef,
    tool: usize,
    args: Value,
}

/// Drives one run of a session's machine with a Restate context.
pub(crate) struct Driver<'a, 'ctx> {
    pub(crate) ctx: &'a ObjectContext<'ctx>,
    pub(crate) machine: AgentMachine,
    pub(crate) hooks: Arc<dyn AgentHooks>,
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) options: StreamOptions,
    pub(crate) limits: StepLimits,
    /// Executors by tool name: the session's tools, and any tool a hook handed
    /// out in this attempt.
    pub(crate) executors: HashMap<String, AgentTool>,
    /// The session id (the idempotency keys' prefix).
    pub(crate) session: String,
    /// The time of the last recorded step.
    pub(crate) now: u64,
    pub(crate) cancel: CancellationToken,
    pub(crate) cancelled: bool,
    /// Restate's cancel surfaced in the work at hand; the run aborts once that
    /// work's answers are fed (so a step that finished keeps its result).
    cancel_pending: bool,
    /// Events of the run, in order.
    pub(crate) events: Vec<AgentEvent>,
    /// Inbox sequence numbers of the steering messages handed to the machine, in order.
    pub(crate) steered: Vec<u64>,
    out: Vec<Output>,
    commands: VecDeque<Command>,
    wave: Vec<WaveCall>,
    approvals: Vec<(String, Awaited<'ctx>)>,
    /// Calls that asked for approval and have no decision yet.
    parked: Vec<String>,
    /// Where the model request's token deltas go live (outside the journal).
    pub(crate) live: Option<Arc<LiveSink>>,
    /// This attempt's `invoke_agent` span, and the current turn's.
    pub(crate) span: tracing::Span,
    turn: TurnSpan,
}

/// A turn's span and its journaled steps that ran in this attempt and that
/// were read back, recorded when the turn ends or the attempt stops (a
/// suspension or a failure drops the driver mid-turn).
#[derive(Default)]
struct TurnSpan {
    span: Option<tracing::Span>,
    run: u32,
    replayed: u32,
}

impl Drop for TurnSpan {
    fn drop(&mut self) {
        if let Some(span) = self.span.take() {
            span.record("clawcall.steps_run", i64::from(self.run));
            span.record("clawcall.steps_replayed", i64::from(self.replayed));
        }
    }
}

impl<'a, 'ctx> Driver<'a, 'ctx> {
    #[allow(clippy::too_many_arguments, reason = "built once, by the session handler")]
    pub(crate) fn new(
        ctx: &'a ObjectContext<'ctx>,
        machine: AgentMachine,
        hooks: Arc<dyn AgentHooks>,
        provider: Arc<dyn Provider>,
        options: StreamOptions,
        limits: StepLimits,
        tools: &[AgentTool],
        session: String,
        now: u64,
    ) -> Self {
        let mut options = options;
        let cancel = CancellationToken::new();
        options.cancel = cancel.clone();
        let span = spans::invoke_agent_span(machine.model());
        span.record("clawcall.invocation_id", ctx.invocation_id());
        Driver {
            ctx,
            machine,
            hooks,
            provider,
            options,
            limits,
            executors: tools.iter().map(|t| (t.tool.name.clone(), t.clone())).collect(),
            session,
            now,
            cancel,
            cancelled: false,
            cancel_pending: false,
            events: Vec::new(),
            steered: Vec::new(),
            out: Vec::new(),
            commands: VecDeque::new(),
            wave: Vec::new(),
            approvals: Vec::new(),
            parked: Vec::new(),
            live: None,
            span,
            turn: TurnSpan::default(),
        }
    }

    /// Opens turn `turn`'s span beneath the run's (the previous turn's ends).
    fn begin_turn(&mut self, turn: u32) {
        let span = Some(spans::turn_span(&self.span, turn));
        self.turn = TurnSpan { span, ..TurnSpan::default() };
    }

    /// The current turn's span (none before the first turn).
    fn turn_span(&self) -> tracing::Span {
        self.turn.span.clone().unwrap_or_else(tracing::Span::none)
    }

    /// Counts a journaled step of the turn: its effect ran in this attempt
    /// (it left its answer in `kept`), or its answer was read back.
    fn count_step(&mut self, kept: &Mutex<Option<Stamped<Value>>>) {
        if kept.lock().unwrap_or_else(PoisonError::into_inner).is_some() {
            self.turn.run += 1;
        } else {
            self.turn.replayed += 1;
        }
    }

    /// Records how the run ended on its spans and closes them.
    pub(crate) fn end_spans(&mut self) {
        self.turn = TurnSpan::default();
        if let Some(reason) = self.machine.reason() {
            spans::record_run_end(&self.span, reason, self.machine.turns());
        }
        self.span = tracing::Span::none();
    }

    /// Hands an input to the machine and sorts what it answers.
    pub(crate) fn feed(&mut self, input: Input) {
        self.machine.handle(input, self.now, &mut self.out);
        for output in std::mem::take(&mut self.out) {
            match output {
                Output::Event(event) => self.events.push(event),
                Output::Command(Command::Execute { call, tool, args, .. }) => {
                    self.wave.push(WaveCall { call, tool, args });
                }
                Output::Command(command) => self.commands.push_back(command),
                // The machine's reason tells the loop below.
                Output::Finished | _ => {}
            }
        }
    }

    /// Drives the machine until it finished.
    pub(crate) async fn run(&mut self) -> Result<(), HandlerError> {
        // Events are sent before each wait on the outside (a model request, a
        // wave of tools, an approval) and at the end, not after every step:
        // each send is an invocation of the events object.
        loop {
            if let Some(command) = self.commands.pop_front() {
                if matches!(command, Command::Request) {
                    self.flush_events();
                }
                self.dispatch(command).await?;
            } else if !self.wave.is_empty() {
                self.flush_events();
                self.run_wave().await?;
            } else if self.machine.reason().is_some() {
                return Ok(());
            } else if let Some(call_id) =
                self.machine.pending_approvals().first().map(|c| c.id.clone())
            {
                self.flush_events();
                self.await_approval(&call_id).await?;
            } else {
                // The machine waits for nothing this driver could give it.
                return Err(TerminalError::new(
                    "the agent machine is stuck: no command outstanding",
                )
                .into());
            }
            if std::mem::take(&mut self.cancel_pending) {
                self.cancelled();
            }
        }
    }

    /// Sends the events gathered since the last flush to the session's events
    /// object: one one-way call, journaled, so a replay does not send it again
    /// (the events are made again, identically, and dropped here).
    pub(crate) fn flush_events(&mut self) {
        if self.events.is_empty() {
            return;
        }
        let events: Vec<Value> =
            self.events.drain(..).filter_map(|event| serde_json::to_value(event).ok()).collect();
        self.ctx
            .object_client::<SessionEventsClient>(self.session.clone())
            .append(Json(events))
            .send();
    }

    /// Restate's cancel surfaced: the run aborts (once).
    fn cancelled(&mut self) {
        if !self.cancelled {
            self.cancelled = true;
            self.cancel.cancel();
            self.feed(Input::Abort);
        }
    }

    /// Runs `effect` as the journaled step `name`. `Ok(None)`: the run was
    /// cancelled and the step has no answer.
    async fn step<T, F, Fut>(&mut self, name: String, effect: F) -> Result<Option<T>, HandlerError>
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, String>> + Send + 'static,
    {
        let ctx = self.ctx;
        let kept = Arc::new(Mutex::new(None));
        let result = ctx.run(recording(effect, kept.clone())).name(name.clone()).await;
        self.count_step(&kept);
        self.settle(name, result, &kept).await
    }

    /// The answer of a step that ended with `result`; a cancel keeps what the
    /// effect returned before it surfaced.
    async fn settle<T: DeserializeOwned>(
        &mut self,
        name: String,
        result: Result<Json<Stamped<Value>>, TerminalError>,
        kept: &Arc<Mutex<Option<Stamped<Value>>>>,
    ) -> Result<Option<T>, HandlerError> {
        let stamped = match result {
            Ok(Json(stamped)) => Some(stamped),
            Err(e) if e.code() == 409 => {
                self.cancel_pending = true;
                self.cancelled_keeping(name.clone(), kept).await?
            }
            Err(e) => return Err(e.into()),
        };
        let Some(stamped) = stamped else { return Ok(None) };
        self.now = self.now.max(stamped.at);
        serde_json::from_value(stamped.value).map(Some).map_err(|e| {
            TerminalError::new(format!(
                "step {name}: the recorded answer does not decode ({e}): was it recorded by another build?"
            ))
            .into()
        })
    }

    /// The cancel surfaced at step `name`: the effect may have finished before
    /// it did, so its answer is kept, journaled again as a step of its own (a
    /// replay reads it from there). Then the run aborts.
    async fn cancelled_keeping(
        &mut self,
        name: String,
        kept: &Arc<Mutex<Option<Stamped<Value>>>>,
    ) -> Result<Option<Stamped<Value>>, HandlerError> {
        let value = kept.lock().unwrap_or_else(PoisonError::into_inner).take();
        let again = self
            .ctx
            .run(move || async move { Ok(Json(value)) })
            .name(format!("{name} (kept at cancel)"))
            .await;
        let kept = match again {
            Ok(Json(v)) => v,
            Err(e) if e.code() == 409 => None,
            Err(e) => return Err(e.into()),
        };
        Ok(kept)
    }

    fn call_key(&self, call: CallRef, call_id: &str) -> String {
        call_key(&self.session, call.message, call_id)
    }

    async fn dispatch(&mut self, command: Command) -> Result<(), HandlerError> {
        let hooks = self.hooks.clone();
        let context = self.machine.context().clone();
        let timeout = self.limits.step_timeout;
        match command {
            Command::PrepareTurn => {
                let model = self.machine.model().clone();
                let turn = self.machine.turns();
                self.begin_turn(turn);
                let start = context.messages.len() - self.machine.new_messages().len();
                let name = format!("prepare_next_turn {turn}");
                let (tx, rx) = std::sync::mpsc::channel();
                let answer: Option<Answer<Option<RecordedTurn>>> = self
                    .step(name, move || async move {
                        let info = TurnInfo {
                            turn,
                            context: &context,
                            new_messages: context.messages.get(start..).unwrap_or_default(),
                            model: &model,
                        };
                        let answer = contained(timeout, || hooks.prepare_next_turn(info)).await;
                        Ok(match answer {
                            Answer::Done(Some(update)) => {
                                let recorded = RecordedTurn {
                                    model: update.model,
                                    system_prompt: update.system_prompt,
                                    tools: update
                                        .tools
                                        .as_ref()
                                        .map(|t| t.iter().map(RecordedTool::of).collect()),
                                };
                                // The live executors, for this attempt.
                                let _ = tx.send(update.tools.unwrap_or_default());
                                Answer::Done(Some(recorded))
                            }
                            Answer::Done(None) => Answer::Done(None),
                            Answer::Panicked(p) => Answer::Panicked(p),
                            Answer::Abandoned => Answer::Abandoned,
                        })
                    })
                    .await?;
                for tool in rx.try_iter().flatten() {
                    self.executors.insert(tool.tool.name.clone(), tool);
                }
                let answer = match answer {
                    Some(Answer::Done(Some(turn))) => Answer::Done(Some(TurnChange {
                        model: turn.model,
                        system_prompt: turn.system_prompt,
                        tools: turn
                            .tools
                            .map(|tools| tools.into_iter().map(|t| self.bind(t)).collect()),
                    })),
                    Some(Answer::Done(None)) => Answer::Done(None),
                    Some(Answer::Panicked(p)) => Answer::Panicked(p),
                    Some(Answer::Abandoned) | None => Answer::Abandoned,
                };
                self.feed(Input::TurnPrepared(answer));
            }
            Command::Request => self.request().await?,
            Command::ResolveTool { call } => {
                let id = self.machine.call(call).map(|c| c.id.clone()).unwrap_or_default();
                let name = format!("resolve_deferred_tool {}", self.call_key(call, &id));
                let (tx, rx) = std::sync::mpsc::channel();
                let answer: Option<Answer<Result<Option<RecordedTool>, String>>> = self
                    .step(name, move || async move {
                        let Some(info) = call_info(&context, call) else {
                            return Ok(Answer::Done(Ok(None)));
                        };
                        Ok(match contained(timeout, || hooks.resolve_deferred_tool(info)).await {
                            Answer::Done(Ok(Some(tool))) => {
                                let recorded = RecordedTool::of(&tool);
                                let _ = tx.send(tool);
                                Answer::Done(Ok(Some(recorded)))
                            }
                            Answer::Done(Ok(None)) => Answer::Done(Ok(None)),
                            Answer::Done(Err(e)) => Answer::Done(Err(e.0)),
                            Answer::Panicked(p) => Answer::Panicked(p),
                            Answer::Abandoned => Answer::Abandoned,
                        })
                    })
                    .await?;
                for tool in rx.try_iter() {
                    self.executors.insert(tool.tool.name.clone(), tool);
                }
                let answer = match answer {
                    Some(Answer::Done(Ok(tool))) => Answer::Done(Ok(tool.map(|t| self.bind(t)))),
                    Some(Answer::Done(Err(e))) => Answer::Done(Err(ToolError(e))),
                    Some(Answer::Panicked(p)) => Answer::Panicked(p),
                    Some(Answer::Abandoned) | None => Answer::Abandoned,
                };
                self.feed(Input::ToolResolved { call, answer });
            }
            Command::PrepareArguments { call, tool } => {
                // The tool's own argument shim: a pure function of the arguments,
                // so it runs again on replay instead of being journaled.
                let prepare = context.tools.get(tool).and_then(|t| t.prepare_arguments.clone());
                let args = self.machine.call(call).map(|c| c.arguments.clone()).unwrap_or_default();
                let answer = match prepare {
                    Some(prepare) => {
                        match std::panic::catch_unwind(AssertUnwindSafe(|| prepare(args))) {
                            Ok(result) => Answer::Done(result),
                            Err(panic) => Answer::Panicked(panic_text(panic.as_ref())),
                        }
                    }
                    None => Answer::Done(Ok(args)),
                };
                self.feed(Input::ArgumentsPrepared { call, answer });
            }
            Command::BeforeToolCall { call, args } => {
                let id = self.machine.call(call).map(|c| c.id.clone()).unwrap_or_default();
                let name = format!("before_tool_call {}", self.call_key(call, &id));
                let answer: Option<Answer<RecordedBefore>> = self
                    .step(name, move || async move {
                        let Some(info) = call_info(&context, call) else {
                            return Ok(Answer::Done(RecordedBefore::Allow));
                        };
                        Ok(match contained(timeout, || hooks.before_tool_call(info, &args)).await {
                            Answer::Done(BeforeToolCall::Allow) => {
                                Answer::Done(RecordedBefore::Allow)
                            }
                            Answer::Done(BeforeToolCall::Block(why)) => {
                                Answer::Done(RecordedBefore::Block(why))
                            }
                            Answer::Done(BeforeToolCall::Ask { reason }) => {
                                Answer::Done(RecordedBefore::Ask(reason))
                            }
                            Answer::Panicked(p) => Answer::Panicked(p),
                            Answer::Abandoned => Answer::Abandoned,
                        })
                    })
                    .await?;
                let answer = match answer {
                    Some(Answer::Done(RecordedBefore::Allow)) => {
                        Answer::Done(BeforeToolCall::Allow)
                    }
                    Some(Answer::Done(RecordedBefore::Block(why))) => {
                        Answer::Done(BeforeToolCall::Block(why))
                    }
                    Some(Answer::Done(RecordedBefore::Ask(reason))) => {
                        self.ask(&id);
                        Answer::Done(BeforeToolCall::Ask { reason })
                    }
                    Some(Answer::Panicked(p)) => Answer::Panicked(p),
                    Some(Answer::Abandoned) | None => Answer::Abandoned,
                };
                self.feed(Input::BeforeToolCall { call, answer });
            }
            Command::AfterToolCall { call, output, is_error } => {
                let id = self.machine.call(call).map(|c| c.id.clone()).unwrap_or_default();
                let name = format!("after_tool_call {}", self.call_key(call, &id));
                let answer: Option<Answer<Option<RecordedAfter>>> = self
                    .step(name, move || async move {
                        let Some(info) = call_info(&context, call) else {
                            return Ok(Answer::Done(None));
                        };
                        Ok(
                            match contained(timeout, || {
                                hooks.after_tool_call(info, &output, is_error)
                            })
                            .await
                            {
                                Answer::Done(over) => Answer::Done(over.map(|a| RecordedAfter {
                                    content: a.content,
                                    details: a.details,
                                    is_error: a.is_error,
                                    terminate: a.terminate,
                                    stop_after_batch: a.stop_after_batch,
                                })),
                                Answer::Panicked(p) => Answer::Panicked(p),
                                Answer::Abandoned => Answer::Abandoned,
                            },
                        )
                    })
                    .await?;
                let answer = match answer {
                    Some(Answer::Done(over)) => Answer::Done(over.map(|a| AfterToolCall {
                        content: a.content,
                        details: a.details,
                        is_error: a.is_error,
                        terminate: a.terminate,
                        stop_after_batch: a.stop_after_batch,
                    })),
                    Some(Answer::Panicked(p)) => Answer::Panicked(p),
                    Some(Answer::Abandoned) | None => Answer::Abandoned,
                };
                self.feed(Input::AfterToolCall { call, answer });
            }
            Command::ShouldStopAfterTurn => {
                let message = self.machine.turn_message().cloned();
                let results = self.machine.turn_results().to_vec();
                let name = format!("should_stop_after_turn {}", self.machine.turns());
                let answer: Option<Answer<bool>> = self
                    .step(name, move || async move {
                        let Some(message) = message else { return Ok(Answer::Done(false)) };
                        Ok(
                            match std::panic::catch_unwind(AssertUnwindSafe(|| {
                                hooks.should_stop_after_turn(&message, &results)
                            })) {
                                Ok(stop) => Answer::Done(stop),
                                Err(panic) => Answer::Panicked(panic_text(panic.as_ref())),
                            },
                        )
                    })
                    .await?;
                self.take_steering().await?;
                self.feed(Input::StopAfterTurn(answer.unwrap_or(Answer::Abandoned)));
            }
            // Execute commands are gathered into waves by `feed`; a new kind of
            // command is not one this driver can answer.
            _ => {
                return Err(
                    TerminalError::new("the agent machine asked for an unknown command").into()
                );
            }
        }
        Ok(())
    }

    /// A recorded tool with an executor: the one handed out in this attempt or
    /// the session's, by name (else it answers that it is not bound here).
    fn bind(&self, recorded: RecordedTool) -> AgentTool {
        let name = recorded.tool.name.clone();
        let executor = match self.executors.get(&name) {
            Some(bound) => return AgentTool { tool: Arc::new(recorded.tool), ..bound.clone() },
            None => {
                let name = name.clone();
                move |_: ToolInvocation| {
                    let name = name.clone();
                    async move {
                        Err::<ToolOutput, _>(ToolError(format!(
                            "Tool {name} is not bound in this worker (add it to the session's tools)"
                        )))
                    }
                }
            }
        };
        let mut tool = AgentTool::new(recorded.tool, executor);
        tool.label = recorded.label;
        tool.execution_mode = recorded.execution_mode;
        tool.blocking = recorded.blocking;
        tool
    }

    /// The model request: one step (the key and `transform_context` are asked
    /// inside it, so neither the key nor a rewritten transcript is journaled),
    /// retried durably while it fails for a transient reason.
    async fn request(&mut self) -> Result<(), HandlerError> {
        if self.turn.span.is_none() {
            self.begin_turn(self.machine.turns());
        }
        let turn = self.turn_span();
        let hooks = self.hooks.clone();
        let provider = self.provider.clone();
        let model = self.machine.model().clone();
        let context = self.machine.context().clone();
        let mut options = self.options.clone();
        // A run whose final answer must match a schema: the requests that may answer carry it.
        self.machine.output_options(&mut options);
        let timeout = self.limits.step_timeout;
        let name = format!("model-request {}", self.machine.turns());
        let limits = self.limits.clone();
        let policy = RunRetryPolicy::new()
            .initial_delay(limits.retry_initial)
            .exponentiation_factor(2.0)
            .max_delay(limits.retry_max_delay)
            .max_attempts(limits.retry_max_attempts.max(1));
        let kept = Arc::new(Mutex::new(None));
        let live = self.live.clone().map(|sink| (sink, self.session.clone(), name.clone()));
        let effect = move || async move {
            // Dropped when the attempt returns: its `attempt_end`.
            let mut attempt =
                live.map(|(sink, session, step)| AttemptEvents::open(sink, session, step));
            let mut options = options;
            let key = match contained(timeout, || hooks.api_key(&model.provider)).await {
                Answer::Done(Ok(key)) => key,
                Answer::Done(Err(e)) => {
                    return Ok(RecordedResponse::Failed(RequestFailure::HookFailed {
                        hook: "api_key".into(),
                        message: e.0,
                    }));
                }
                Answer::Panicked(message) => {
                    return Ok(RecordedResponse::Failed(RequestFailure::HookPanicked {
                        hook: "api_key".into(),
                        message,
                    }));
                }
                Answer::Abandoned => return Err("the api_key hook did not answer in time".into()),
            };
            if let Some(key) = key {
                options.api_key = Some(key);
            }
            let transformed =
                match contained(timeout, || hooks.transform_context(&context.messages)).await {
                    Answer::Done(t) => t,
                    Answer::Panicked(message) => {
                        return Ok(RecordedResponse::Failed(RequestFailure::HookPanicked {
                            hook: "transform_context".into(),
                            message,
                        }));
                    }
                    Answer::Abandoned => {
                        return Err("the transform_context hook did not answer in time".into());
                    }
                };
            let request = Context {
                system_prompt: context.system_prompt.clone(),
                messages: transformed.unwrap_or_else(|| context.messages.clone()),
                tools: context.tools.iter().map(|t| t.tool.as_ref().clone()).collect(),
            };
            let started = std::panic::catch_unwind(AssertUnwindSafe(|| {
                // The request's `chat` span nests beneath the turn's.
                let mut stream = turn.in_scope(|| provider.stream(&model, &request, &options));
                telemetry::record_input(stream.span(), &request);
                async move {
                    let mut last = None;
                    while let Some(event) = stream.next().await {
                        match event {
                            AssistantEvent::TextDelta { content_index, delta } => {
                                if let Some(attempt) = attempt.as_mut() {
                                    attempt.send(
                                        "text_delta",
                                        serde_json::json!({"index": content_index, "delta": delta}),
                                    );
                                }
                            }
                            AssistantEvent::ThinkingDelta { content_index, delta } => {
                                if let Some(attempt) = attempt.as_mut() {
                                    attempt.send(
                                        "thinking_delta",
                                        serde_json::json!({"index": content_index, "delta": delta}),
                                    );
                                }
                            }
                            AssistantEvent::Done { message, .. }
                            | AssistantEvent::Error { message, .. } => {
                                telemetry::record_output(stream.span(), &message);
                                last = Some(message);
                            }
                            _ => {}
                        }
                    }
                    drop(attempt);
                    last.unwrap_or_else(|| Box::new(stream.partial().to_message()))
                }
            }));
            let message = match started {
                Ok(fut) => {
                    match tokio::time::timeout(timeout, AssertUnwindSafe(fut).catch_unwind()).await
                    {
                        Ok(Ok(message)) => message,
                        Ok(Err(panic)) => {
                            return Err(format!(
                                "the provider panicked: {}",
                                panic_text(panic.as_ref())
                            ));
                        }
                        Err(_) => {
                            return Err(format!(
                                "the model request did not end within {} s",
                                timeout.as_secs()
                            ));
                        }
                    }
                }
                Err(panic) => {
                    return Err(format!("the provider panicked: {}", panic_text(panic.as_ref())));
                }
            };
            if is_transient(&message) {
                return Err(format!(
                    "transient model failure: {}",
                    message.error_message.as_deref().unwrap_or("unknown")
                ));
            }
            Ok(RecordedResponse::Message(message))
        };
        let result = self
            .ctx
            .run(recording(effect, kept.clone()))
            .retry_policy(policy)
            .name(name.clone())
            .await;
        self.count_step(&kept);
        let answer: Option<RecordedResponse> = match result {
            // Retries exhausted: the last failure is the turn's answer.
            Err(e) if e.code() != 409 => {
                let mut message = self.error_message(StopReason::Error);
                message.error_message = Some(format!(
                    "The model request failed after {} attempts: {}",
                    self.limits.retry_max_attempts,
                    e.message()
                ));
                Some(RecordedResponse::Message(Box::new(message)))
            }
            result => self.settle(name, result, &kept).await?,
        };
        match answer {
            Some(RecordedResponse::Message(message)) => {
                self.feed(Input::ResponseEnded(*message));
            }
            Some(RecordedResponse::Failed(failure)) => self.feed(Input::RequestFailed(failure)),
            None => {
                let message = self.error_message(StopReason::Aborted);
                self.feed(Input::ResponseEnded(message));
            }
        }
        Ok(())
    }

    fn error_message(&self, stop_reason: StopReason) -> AssistantMessage {
        let model = self.machine.model();
        AssistantMessage {
            content: Vec::new(),
            api: model.api.clone(),
            provider: model.provider.clone(),
            model: model.id.clone(),
            stop_reason,
            error_message: Some(match stop_reason {
                StopReason::Aborted => "Request was aborted".to_owned(),
                _ => "The model request failed".to_owned(),
            }),
            timestamp: self.now,
            ..AssistantMessage::default()
        }
    }

    /// Runs the wave's calls: their steps journaled in call order, the calls
    /// themselves running together, results fed in call order.
    ///
    /// The steps are awaited one after another (the SDK journals a step when it
    /// is first polled, and steps awaited together do not all complete), but
    /// the first step that really runs starts its call and every later call of
    /// the wave at once, and each later step then waits for its own call. A
    /// step's entry exists only once the step before it completed, so the
    /// journaled steps are always a prefix of the wave: on replay those are
    /// read back, and the calls after them (all in flight at a crash) run again.
    async fn run_wave(&mut self) -> Result<(), HandlerError> {
        let wave = std::mem::take(&mut self.wave);
        let context = self.machine.context().clone();
        let mut names = Vec::with_capacity(wave.len());
        let mut slots = Vec::with_capacity(wave.len());
        for WaveCall { call, tool, args } in &wave {
            let call_id = self.machine.call(*call).map(|c| c.id.clone()).unwrap_or_default();
            let key = self.call_key(*call, &call_id);
            let agent_tool = context.tools.get(*tool).cloned();
            let tool_name = agent_tool.as_ref().map(|t| t.tool.name.clone()).unwrap_or_default();
            let invocation = ToolInvocation {
                call_id,
                arguments: args.clone(),
                cancel: self.cancel.child(),
                progress: ProgressSink::disconnected(),
                idempotency_key: Some(key.clone()),
            };
            let name = format!("tool {tool_name} {key}");
            let live = self.live.clone().map(|sink| (sink, self.session.clone(), name.clone()));
            // The call's span is opened when the call starts running, so a
            // replayed call (its answer read back) emits none.
            let traced = self.machine.call(*call).cloned().map(|c| (self.turn_span(), c));
            names.push(name);
            slots.push(WaveSlot::Waiting(Box::new(Waiting {
                tool: agent_tool,
                invocation,
                live,
                traced,
            })));
        }
        let count = slots.len();
        let tasks = Arc::new(Mutex::new(slots));
        let timeout = self.limits.step_timeout;
        for (i, (name, WaveCall { call, .. })) in names.into_iter().zip(wave).enumerate() {
            let kept = Arc::new(Mutex::new(None));
            let wave_tasks = tasks.clone();
            let effect = move || async move {
                let tasks = wave_tasks;
                let handle = start_from(&tasks, i, timeout);
                Ok(match handle {
                    Some(mut running) => match (&mut running.0).await {
                        Ok(result) => result,
                        Err(e) if e.is_panic() => {
                            RecordedToolResult::panicked(panic_text(e.into_panic().as_ref()))
                        }
                        Err(_) => RecordedToolResult::error("Tool task was cancelled".into()),
                    },
                    None => RecordedToolResult::error("Tool call was lost".into()),
                })
            };
            let result = self.ctx.run(recording(effect, kept.clone())).name(name.clone()).await;
            self.count_step(&kept);
            let recorded: Option<RecordedToolResult> = self.settle(name, result, &kept).await?;
            if i + 1 == count {
                self.take_steering().await?;
            }
            let answer = match recorded {
                Some(r) => Answer::Done(r.into_result()),
                None => Answer::Abandoned,
            };
            self.feed(Input::ToolFinished { call, answer });
        }
        Ok(())
    }

    /// The call `call_id` waits for a person: an awakeable, registered with the
    /// session's approvals object so `approve` / `deny` resolve it from anywhere.
    fn ask(&mut self, call_id: &str) {
        let (awakeable, decision) = self.ctx.awakeable::<Json<Approval>>();
        self.ctx
            .object_client::<SessionApprovalsClient>(self.session.clone())
            .register(Json((call_id.to_owned(), awakeable)))
            .send();
        self.approvals.push((call_id.to_owned(), Box::pin(decision)));
        self.parked.push(call_id.to_owned());
    }

    /// Calls parked for approval that the run ended without (an abort, a
    /// failure) are withdrawn from the approvals object (one-way, journaled),
    /// so no stale entry stays behind and a late decision is refused.
    pub(crate) fn withdraw_approvals(&mut self) {
        if self.parked.is_empty() {
            return;
        }
        let call_ids = std::mem::take(&mut self.parked);
        self.ctx
            .object_client::<SessionApprovalsClient>(self.session.clone())
            .withdraw(Json(call_ids))
            .send();
    }

    async fn await_approval(&mut self, call_id: &str) -> Result<(), HandlerError> {
        let Some(at) = self.approvals.iter().position(|(id, _)| id == call_id) else {
            return Err(TerminalError::new(format!(
                "call {call_id} waits for approval without an awakeable"
            ))
            .into());
        };
        let (tool_call_id, decision) = self.approvals.remove(at);
        let decided = decision.await;
        if !matches!(&decided, Err(e) if e.code() == 409) {
            self.parked.retain(|id| *id != tool_call_id);
        }
        match decided {
            Ok(Json(decision)) => self.feed(Input::Approval { tool_call_id, decision }),
            Err(e) if e.code() == 409 => self.cancel_pending = true,
            Err(e) => {
                let decision = Approval::Deny { reason: Some(e.message().to_owned()) };
                self.feed(Input::Approval { tool_call_id, decision });
            }
        }
        Ok(())
    }

    /// Steering messages queued in the session's inbox since the last take,
    /// handed to the machine (which sends them after the current turn). The
    /// inbox keeps them until the session acknowledges them with its transcript.
    pub(crate) async fn take_steering(&mut self) -> Result<(), HandlerError> {
        if self.cancelled || self.cancel_pending {
            return Ok(());
        }
        let after = self.steered.last().copied().unwrap_or(0);
        let taken = self
            .ctx
            .object_client::<SessionInboxClient>(self.session.clone())
            .since(Json(after))
            .call()
            .await;
        match taken {
            Ok(Json(queued)) => {
                for (seq, text) in queued {
                    if seq > after {
                        self.steered.push(seq);
                        self.feed(Input::Steer(Message::user(text)));
                    }
                }
            }
            Err(e) if e.code() == 409 => self.cancel_pending = true,
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }
}

/// At most this many of a call's own progress updates are forwarded live (a
/// chatty tool does not fill the process's queue of live events).
const PROGRESS_PER_CALL: usize = 256;

/// Where a step's live events go: the sink, the session and the step's name.
type LiveStep = (Arc<LiveSink>, String, String);

/// A call of a wave not started yet: its tool, invocation, where its live
/// events go, and the turn's span with the call (for its `execute_tool` span).
struct Waiting {
    tool: Option<AgentTool>,
    invocation: ToolInvocation,
    live: Option<LiveStep>,
    traced: Option<(tracing::Span, llm_core::ToolCall)>,
}

/// A call of a wave: not started yet, or running.
enum WaveSlot {
    Waiting(Box<Waiting>),
    Running(AbortOnDrop),
    Taken,
}

/// Closes a call's progress sink when dropped.
struct CloseOnDrop(ProgressSink);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// A running call's task, aborted if the wave is dropped unfinished.
struct AbortOnDrop(tokio::task::JoinHandle<RecordedToolResult>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts call `i` and every later call of the wave not started yet, and hands
/// over call `i`'s task.
fn start_from(tasks: &Mutex<Vec<WaveSlot>>, i: usize, timeout: Duration) -> Option<AbortOnDrop> {
    let mut slots = tasks.lock().unwrap_or_else(PoisonError::into_inner);
    for slot in slots.iter_mut().skip(i) {
        if matches!(slot, WaveSlot::Waiting(..)) {
            let WaveSlot::Waiting(waiting) = std::mem::replace(slot, WaveSlot::Taken) else {
                continue;
            };
            let Waiting { tool, mut invocation, live, traced } = *waiting;
            let span = match &traced {
                Some((turn, call)) => spans::execute_tool_span(turn, call, &invocation.arguments),
                None => tracing::Span::none(),
            };
            // The call's attempt opens when it starts running (its live
            // `attempt_start`) and ends with its answer; the tool's own
            // progress updates go to it in between.
            let attempt = live.map(|(sink, session, step)| {
                Arc::new(Mutex::new(AttemptEvents::open(sink, session, step)))
            });
            if let Some(attempt) = &attempt {
                let attempt = attempt.clone();
                invocation.progress =
                    ProgressSink::from_callback(PROGRESS_PER_CALL, move |partial: ToolOutput| {
                        let fields = serde_json::to_value(partial).unwrap_or_default();
                        attempt
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .send("tool_progress", fields);
                    });
            }
            // Closed when the call ends or its task is aborted: no update follows
            // the result, even from a thread the tool left running, and the
            // attempt's `attempt_end` is not held back by the tool's copy.
            let progress = CloseOnDrop(invocation.progress.clone());
            let tool_span = span.clone();
            let running = async move {
                let result = run_tool(tool, invocation, timeout).await;
                drop(progress);
                spans::record_tool_answer(&tool_span, &result.answer());
                if let Some(attempt) = attempt {
                    attempt.lock().unwrap_or_else(PoisonError::into_inner).send(
                        "tool_result",
                        serde_json::json!({"isError": result.error.is_some()}),
                    );
                }
                result
            };
            *slot = WaveSlot::Running(AbortOnDrop(tokio::spawn(running.instrument(span))));
        }
    }
    match slots.get_mut(i).map(|slot| std::mem::replace(slot, WaveSlot::Taken)) {
        Some(WaveSlot::Running(task)) => Some(task),
        _ => None,
    }
}

/// A step's effect that stamps its answer with the time and keeps a copy for
/// a cancel that surfaces after it finished.
#[allow(clippy::type_complexity, reason = "the closure type of ctx.run")]
fn recording<T, F, Fut>(
    effect: F,
    kept: Arc<Mutex<Option<Stamped<Value>>>>,
) -> impl FnOnce() -> Pin<Box<dyn Future<Output = Result<Json<Stamped<Value>>, HandlerError>> + Send>>
+ Send
+ 'static
where
    T: Serialize + Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, String>> + Send + 'static,
{
    move || {
        Box::pin(async move {
            // A retryable failure: Restate runs the step again (with its retry policy).
            let value = effect().await.map_err(HandlerError::from)?;
            let value = serde_json::to_value(value).map_err(|e| {
                TerminalError::new(format!("a step's answer does not serialize: {e}"))
            })?;
            let stamped = Stamped { at: now_millis(), value };
            *kept.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(Stamped { at: stamped.at, value: stamped.value.clone() });
            Ok(Json(stamped))
        })
    }
}

/// The idempotency key of a call: the session, the position of the response in
/// the transcript (a provider may reuse call ids across turns) and the call id.
pub fn call_key(session: &str, response: usize, call_id: &str) -> String {
    format!("{session}/{response}/{call_id}")
}

/// Whether a response failed for a reason that waiting may cure.
fn is_transient(message: &AssistantMessage) -> bool {
    if message.stop_reason != StopReason::Error {
        return false;
    }
    let by_kind = matches!(
        message.error_type.as_deref(),
        Some("rate_limited" | "overloaded" | "transport" | "truncated")
    );
    let by_status = message.error_status.is_some_and(|s| s == 408 || s == 429 || s >= 500);
    // A response that streamed content before it failed is kept as it is: its
    // calls are not run and the model sees what it said.
    let empty = message.content.iter().all(|c| match c {
        AssistantContent::Text(t) => t.text.is_empty(),
        _ => false,
    });
    (by_kind || by_status) && empty
}

/// A tool execution's recorded answer: the output, or the tool's error text.
#[derive(Debug, Serialize, Deserialize)]
struct RecordedToolResult {
    content: Vec<UserContent>,
    details: Option<Value>,
    terminate: bool,
    /// `Some`: the tool failed (or panicked, or timed out) with this text.
    error: Option<String>,
    /// The tool panicked (for its span in this attempt; not recorded).
    #[serde(skip)]
    panicked: bool,
}

impl RecordedToolResult {
    fn error(text: String) -> Self {
        RecordedToolResult {
            content: Vec::new(),
            details: None,
            terminate: false,
            error: Some(text),
            panicked: false,
        }
    }

    fn panicked(text: String) -> Self {
        RecordedToolResult { panicked: true, ..Self::error(format!("Tool panicked: {text}")) }
    }

    /// The answer as the loop sees it, for the call's span.
    fn answer(&self) -> Answer<Result<ToolOutput, ToolError>> {
        match &self.error {
            Some(text) if self.panicked => Answer::Panicked(text.clone()),
            Some(text) => Answer::Done(Err(ToolError(text.clone()))),
            None => Answer::Done(Ok(ToolOutput {
                content: self.content.clone(),
                details: self.details.clone(),
                terminate: self.terminate,
            })),
        }
    }

    fn into_result(self) -> Result<ToolOutput, ToolError> {
        match self.error {
            Some(e) => Err(ToolError(e)),
            None => Ok(ToolOutput {
                content: self.content,
                details: self.details,
                terminate: self.terminate,
            }),
        }
    }
}

/// Runs one tool call on a task of its own (a blocking tool on the blocking
/// pool), so it never stalls the handler or other sessions, bounded by `timeout`.
async fn run_tool(
    tool: Option<AgentTool>,
    invocation: ToolInvocation,
    timeout: Duration,
) -> RecordedToolResult {
    let Some(tool) = tool else { return RecordedToolResult::error("Tool not found".into()) };
    let executor = tool.executor.clone();
    // What the tool does (an MCP call) nests beneath its `execute_tool` span.
    let span = tracing::Span::current();
    let task = if tool.blocking {
        let handle = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            handle.block_on(executor.execute(invocation).instrument(span))
        })
    } else {
        tokio::spawn(Instrument::instrument(
            async move {
                match std::panic::catch_unwind(AssertUnwindSafe(|| executor.execute(invocation))) {
                    Ok(fut) => fut.await,
                    Err(panic) => {
                        Err(ToolError(format!("Tool panicked: {}", panic_text(panic.as_ref()))))
                    }
                }
            },
            span,
        ))
    };
    let abort = task.abort_handle();
    match tokio::time::timeout(timeout, task).await {
        Ok(Ok(Ok(out))) => RecordedToolResult {
            content: out.content,
            details: out.details,
            terminate: out.terminate,
            error: None,
            panicked: false,
        },
        Ok(Ok(Err(e))) => RecordedToolResult::error(e.0),
        Ok(Err(joined)) if joined.is_panic() => {
            RecordedToolResult::panicked(panic_text(joined.into_panic().as_ref()))
        }
        Ok(Err(_)) => RecordedToolResult::error("Tool task was cancelled".into()),
        Err(_) => {
            abort.abort();
            RecordedToolResult::error(format!("Tool did not finish within {} s", timeout.as_secs()))
        }
    }
}

fn call_info(context: &agent_core::AgentContext, call: CallRef) -> Option<CallInfo<'_>> {
    let Some(Message::Assistant(assistant)) = context.messages.get(call.message) else {
        return None;
    };
    let Some(AssistantContent::ToolCall(tool_call)) = assistant.content.get(call.content) else {
        return None;
    };
    Some(CallInfo { assistant, call: tool_call, context })
}

/// Calls an untrusted callback: a panic or a hang past `timeout` is an answer.
async fn contained<'a, T>(
    timeout: Duration,
    f: impl FnOnce() -> futures_util::future::BoxFuture<'a, T>,
) -> Answer<T> {
    let fut = match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(fut) => fut,
        Err(panic) => return Answer::Panicked(panic_text(panic.as_ref())),
    };
    match tokio::time::timeout(timeout, AssertUnwindSafe(fut).catch_unwind()).await {
        Ok(Ok(v)) => Answer::Done(v),
        Ok(Err(panic)) => Answer::Panicked(panic_text(panic.as_ref())),
        Err(_) => Answer::Panicked(format!("did not answer within {} s", timeout.as_secs())),
    }
}

pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}
