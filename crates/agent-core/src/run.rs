//! The double loop (OpenClaw §5.3) with the spec README's decisions 1-3 and 10.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use futures_util::future::{BoxFuture, Either};
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, Stream, StreamExt};
use llm_core::validation::ValidatorCache;
use llm_core::{
    AssistantContent, AssistantEvent, AssistantMessage, AssistantStream, CancellationToken,
    Context, Message, Model, Provider, StopReason, StreamOptions, TextContent, ToolCall,
    ToolResultMessage, now_millis,
};
use serde_json::Value;

use crate::context::{AgentContext, MessageQueue, QueueMode, check_unique_names};
use crate::event::{AgentEvent, EndReason};
use crate::hooks::{AgentHooks, BeforeToolCall, CallInfo, NoHooks, TurnInfo};
use crate::queue::EventQueue;
use crate::tool::{AgentTool, ExecutionMode, ProgressSink, ToolError, ToolInvocation, ToolOutput};

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
        }
    }
}

/// Why a transcript cannot be continued (OpenClaw §5.2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContinueError {
    /// The transcript is empty.
    #[error("Cannot continue: no messages in context")]
    Empty,
    /// The last message is from the assistant.
    #[error("Cannot continue from message role: assistant")]
    EndsWithAssistant,
}

/// Why a run ended with [`EndReason::Failed`].
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
}

/// The result of a finished run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AgentOutcome {
    /// Messages this run added, in order.
    pub messages: Vec<Message>,
    /// The context at the end (transcript and tools, deferred tools included).
    pub context: AgentContext,
    /// Why it ended.
    pub reason: EndReason,
    /// What failed, when `reason` is [`EndReason::Failed`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<AgentError>,
}

/// An agent: configuration plus the validator cache shared by its runs.
/// Runs are independent: one `Agent` may run many at once.
#[derive(Debug, Clone)]
pub struct Agent {
    config: Arc<AgentConfig>,
    validators: Arc<ValidatorCache>,
}

impl Agent {
    /// A new agent.
    pub fn new(config: AgentConfig) -> Self {
        Agent { config: Arc::new(config), validators: Arc::new(ValidatorCache::new()) }
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// Starts a run that adds `prompts` to `context`. A context with duplicate
    /// tool names ends the run before any request ([`AgentError::DuplicateToolName`]).
    pub fn run(&self, context: AgentContext, prompts: Vec<Message>) -> AgentRun {
        self.start(context, prompts)
    }

    /// Continues a transcript whose last message is a user message or tool result.
    pub fn continue_run(&self, context: AgentContext) -> Result<AgentRun, ContinueError> {
        match context.messages.last() {
            None => Err(ContinueError::Empty),
            Some(Message::Assistant(_)) => Err(ContinueError::EndsWithAssistant),
            Some(_) => Ok(self.start(context, Vec::new())),
        }
    }

    fn start(&self, context: AgentContext, prompts: Vec<Message>) -> AgentRun {
        let events = EventQueue::default();
        let cancel = self.config.options.cancel.child();
        let steering = MessageQueue::new();
        let follow_up = MessageQueue::new();
        let runner = Runner {
            model: None,
            options: None,
            config: self.config.clone(),
            validators: self.validators.clone(),
            cancel: cancel.clone(),
            tx: events.clone(),
            start: context.messages.len(),
            context,
            steering: steering.clone(),
            follow_up: follow_up.clone(),
            turn_open: false,
            turns: 0,
            error: None,
        };
        AgentRun {
            events,
            driver: Some(Box::pin(runner.run(prompts))),
            outcome: None,
            cancel,
            steering,
            follow_up,
            ended: false,
            pending_end: None,
        }
    }
}

/// A running agent: a `Stream` of [`AgentEvent`]s that drives the run as it is
/// polled. Tools run on their own tokio tasks; dropping the run aborts them.
/// Exactly one `AgentEnd` arrives, last; nothing follows it.
pub struct AgentRun {
    events: EventQueue,
    driver: Option<BoxFuture<'static, AgentOutcome>>,
    /// Boxed, like `pending_end`: a run in flight keeps `AgentRun` inline in its
    /// consumer's future, and both are rare and large.
    outcome: Option<Box<AgentOutcome>>,
    cancel: CancellationToken,
    steering: MessageQueue,
    follow_up: MessageQueue,
    ended: bool,
    pending_end: Option<Box<AgentEvent>>,
}

impl std::fmt::Debug for AgentRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRun").field("finished", &self.driver.is_none()).finish_non_exhaustive()
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

    /// Drives the run to its end, discarding events.
    pub async fn finish(mut self) -> AgentOutcome {
        while self.next().await.is_some() {}
        match self.outcome.take() {
            Some(o) => *o,
            None => AgentOutcome {
                messages: Vec::new(),
                context: AgentContext::default(),
                reason: EndReason::Aborted,
                error: None,
            },
        }
    }

    /// The outcome, once the stream has ended.
    pub fn outcome(&self) -> Option<&AgentOutcome> {
        self.outcome.as_deref()
    }
}

impl Stream for AgentRun {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<AgentEvent>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        if let Some(driver) = this.driver.as_mut() {
            // Every callback is contained inside the loop; this is the last line
            // of defence against a bug in the loop itself.
            match std::panic::catch_unwind(AssertUnwindSafe(|| driver.as_mut().poll(cx))) {
                Ok(Poll::Ready(outcome)) => {
                    this.outcome = Some(Box::new(outcome));
                    this.driver = None;
                }
                Ok(Poll::Pending) => {}
                Err(panic) => {
                    let error = AgentError::Internal { message: panic_text(panic) };
                    tracing::error!(%error, "agent loop panicked");
                    this.driver = None;
                    this.pending_end = Some(Box::new(AgentEvent::AgentEnd {
                        messages: Vec::new(),
                        reason: EndReason::Failed,
                    }));
                    this.outcome = Some(Box::new(AgentOutcome {
                        messages: Vec::new(),
                        context: AgentContext::default(),
                        reason: EndReason::Failed,
                        error: Some(error),
                    }));
                }
            }
        }
        let next = if this.driver.is_none() {
            // Every event is queued once the driver is done.
            this.events.try_recv().or_else(|| this.pending_end.take().map(|e| *e))
        } else {
            match this.events.poll_recv(cx) {
                Poll::Ready(e) => Some(e),
                Poll::Pending => return Poll::Pending,
            }
        };
        if next.as_ref().is_none_or(|e| matches!(e, AgentEvent::AgentEnd { .. })) {
            this.ended = true;
            this.events.close();
        }
        Poll::Ready(next)
    }
}

/// How a contained callback finished.
enum Contained<T> {
    Done(T),
    Panicked(String),
    /// The run was aborted and the callback did not return within the grace period.
    Abandoned,
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

/// What [`Runner::assistant`] returns for an index that is not an assistant
/// message, which the loop never asks for.
fn fallback_message() -> &'static AssistantMessage {
    static EMPTY: std::sync::OnceLock<AssistantMessage> = std::sync::OnceLock::new();
    EMPTY.get_or_init(AssistantMessage::default)
}

/// What [`Runner::call`] returns for a position that is not a call, which the
/// loop never asks for.
fn fallback_call() -> &'static ToolCall {
    static EMPTY: std::sync::OnceLock<ToolCall> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| ToolCall {
        id: String::new(),
        name: String::new(),
        arguments: Value::Object(serde_json::Map::new()),
        thought_signature: None,
    })
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
) -> Contained<T> {
    let fut = match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(fut) => fut,
        Err(panic) => return Contained::Panicked(panic_text(panic)),
    };
    let expired = grace_expired(cancel.clone(), grace);
    futures_util::pin_mut!(expired);
    match futures_util::future::select(AssertUnwindSafe(fut).catch_unwind(), expired).await {
        Either::Left((Ok(v), _)) => Contained::Done(v),
        Either::Left((Err(panic), _)) => Contained::Panicked(panic_text(panic)),
        Either::Right(_) => Contained::Abandoned,
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
    fn start(tool: &AgentTool, invocation: ToolInvocation) -> ToolTask {
        let executor = tool.executor.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) if tool.blocking => {
                let inner = handle.clone();
                ToolTask::Spawned(
                    handle.spawn_blocking(move || {
                        Box::new(inner.block_on(executor.execute(invocation)))
                    }),
                )
            }
            Ok(handle) => {
                // Boxed until the task starts (and freed then, by `unbox`), so the
                // task's future is a few words beside the tool's own; the synchronous
                // part of `execute` runs on the task too, where it cannot stall the run.
                let invocation = Box::new(invocation);
                ToolTask::Spawned(
                    handle
                        .spawn(async move { Box::new(executor.execute(unbox(invocation)).await) }),
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

struct Runner {
    config: Arc<AgentConfig>,
    validators: Arc<ValidatorCache>,
    cancel: CancellationToken,
    tx: EventQueue,
    /// The stored transcript; the run's messages are `context.messages[start..]`
    /// (the transcript only grows, so they are never copied twice).
    context: AgentContext,
    start: usize,
    /// The model and options of the next request when `prepare_next_turn`
    /// replaced the configured ones; until then every run shares the config's.
    model: Option<Box<Model>>,
    options: Option<Box<StreamOptions>>,
    steering: MessageQueue,
    follow_up: MessageQueue,
    turn_open: bool,
    turns: u32,
    error: Option<AgentError>,
}

/// The outcome of one tool call.
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

struct BatchOutcome {
    results: Vec<ToolResultMessage>,
    terminate: bool,
    stop_after_batch: bool,
    aborted: bool,
}

enum Prepared {
    /// Index into `context.tools`, and the validated arguments.
    Ready {
        tool: usize,
        /// Boxed: it waits in the batch's queue, and its call's future keeps
        /// its parameters for as long as the tool runs.
        args: Box<Value>,
    },
    Immediate(CallResult),
}

/// The resolved tool as an index into `context.tools` (cloning tools per call
/// would cost their schemas).
type Resolution = Result<Option<usize>, String>;

impl Runner {
    fn emit(&self, event: AgentEvent) {
        self.tx.send(event);
    }

    /// The turn's response, which the transcript holds at `at`. The loop keeps
    /// no copy of it: the transcript only grows during a run, so `at` stays valid.
    fn assistant(&self, at: usize) -> &AssistantMessage {
        match self.context.messages.get(at) {
            Some(Message::Assistant(m)) => m,
            _ => fallback_message(),
        }
    }

    /// The call at content position `pos` of the response at `at`.
    fn call(&self, at: usize, pos: usize) -> &ToolCall {
        match self.assistant(at).content.get(pos) {
            Some(AssistantContent::ToolCall(c)) => c,
            _ => fallback_call(),
        }
    }

    /// The model of the next request.
    fn model(&self) -> &Model {
        self.model.as_deref().unwrap_or(&self.config.model)
    }

    fn new_messages(&self) -> &[Message] {
        self.context.messages.get(self.start..).unwrap_or_default()
    }

    fn add_message(&mut self, message: Message) {
        self.emit(AgentEvent::MessageStart { message: message.clone() });
        self.emit(AgentEvent::MessageEnd { message: message.clone() });
        self.context.messages.push(message);
    }

    fn turn_start(&mut self) {
        if !self.turn_open {
            self.emit(AgentEvent::TurnStart);
            self.turn_open = true;
        }
    }

    /// Ends the turn whose response the transcript holds at `at`.
    fn turn_end(&mut self, at: usize, tool_results: Vec<ToolResultMessage>) {
        let message = self.assistant(at).clone();
        self.emit(AgentEvent::TurnEnd { message, tool_results });
        self.turn_open = false;
    }

    async fn contained<'a, T>(&self, f: impl FnOnce() -> BoxFuture<'a, T>) -> Contained<T> {
        contained(&self.cancel, self.config.abort_grace, f).await
    }

    /// The whole run. Not an `async fn`: one of those keeps its parameters twice
    /// (as passed and as moved into the body), and this future is kept, with the
    /// runner inside it, for the whole run.
    fn run(self, prompts: Vec<Message>) -> impl Future<Output = AgentOutcome> + Send + 'static {
        let mut runner = self;
        async move {
            let reason = match runner.begin(prompts) {
                Some(reason) => reason,
                None => runner.run_loop().await,
            };
            let messages = runner.new_messages().to_vec();
            runner.emit(AgentEvent::AgentEnd { messages: messages.clone(), reason });
            AgentOutcome { messages, context: runner.context, reason, error: runner.error }
        }
    }

    /// The start of a run, up to the first turn's prompts; `Some` if the run
    /// cannot start. Not inline in `run`, whose future is kept for the whole run.
    fn begin(&mut self, prompts: Vec<Message>) -> Option<EndReason> {
        self.emit(AgentEvent::AgentStart);
        if let Err(error) = self.context.check_tools() {
            self.error = Some(error);
            return Some(EndReason::Failed);
        }
        self.turn_start();
        for p in prompts {
            self.add_message(p);
        }
        None
    }

    fn max_turns_reached(&self) -> bool {
        self.config.max_turns.is_some_and(|max| self.turns >= max)
    }

    async fn run_loop(&mut self) -> EndReason {
        let mut pending = self.steering.take(self.config.steering_mode);
        let mut last_reason = EndReason::Completed;
        loop {
            let mut more_tools = true;
            while more_tools || !pending.is_empty() {
                if self.cancel.is_cancelled() {
                    return self.abort_exit();
                }
                self.turn_start();
                for m in pending.drain(..) {
                    self.add_message(m);
                }
                if self.max_turns_reached() {
                    // Only `max_turns = 0` gets here; later turns stop below, before polling queues.
                    return EndReason::MaxTurns;
                }
                if let Err(reason) = Box::pin(self.prepare_turn()).await {
                    return reason;
                }
                if self.cancel.is_cancelled() {
                    return self.abort_exit();
                }
                // Boxed: the run's own future stays small while it waits for tools.
                // The response stays in the transcript only, at `at`.
                let at = match Box::pin(self.stream_assistant()).await {
                    Ok(at) => at,
                    Err(reason) => return reason,
                };
                self.turns += 1;
                let stop_reason = self.assistant(at).stop_reason;
                match stop_reason {
                    StopReason::Error | StopReason::Aborted => {
                        let why = if stop_reason == StopReason::Aborted {
                            "Tool call was not executed: the response was aborted".to_owned()
                        } else {
                            format!(
                                "Tool call was not executed: the response failed: {}",
                                self.assistant(at)
                                    .error_message
                                    .as_deref()
                                    .unwrap_or("unknown error")
                            )
                        };
                        let results = self.write_unexecuted(at, &why);
                        let reason = if stop_reason == StopReason::Aborted {
                            EndReason::Aborted
                        } else {
                            EndReason::Error
                        };
                        self.turn_end(at, results);
                        return reason;
                    }
                    StopReason::Length => {
                        // Decision 2: a call cut off by the token limit never runs.
                        let results = self.write_unexecuted(
                            at,
                            "Tool call was cut off by the output token limit (stop reason: length) and was not executed",
                        );
                        self.turn_end(at, results);
                        return EndReason::Length;
                    }
                    StopReason::Stop | StopReason::ToolUse => {}
                }
                more_tools = false;
                let mut results = Vec::new();
                let mut stop_after_batch = false;
                last_reason = EndReason::Completed;
                let has_calls = self.assistant(at).tool_calls().next().is_some();
                if has_calls && stop_reason != StopReason::ToolUse {
                    // Decision 2: the calls get results, then the turn ends like any other.
                    results = self.write_unexecuted(
                        at,
                        "Tool call was not executed: the assistant did not stop for tool use",
                    );
                } else if has_calls {
                    let batch = Box::pin(self.execute_batch(at)).await;
                    results = batch.results;
                    stop_after_batch = batch.stop_after_batch;
                    if batch.terminate {
                        last_reason = EndReason::Terminated;
                    }
                    more_tools = !batch.terminate;
                    if batch.aborted {
                        self.turn_end(at, results);
                        return self.abort_exit();
                    }
                }
                let stop = {
                    let hooks = &self.config.hooks;
                    let message = self.assistant(at);
                    std::panic::catch_unwind(AssertUnwindSafe(|| {
                        hooks.should_stop_after_turn(message, &results)
                    }))
                };
                self.turn_end(at, results);
                if stop_after_batch {
                    return EndReason::StopAfterBatch;
                }
                if self.cancel.is_cancelled() {
                    return self.abort_exit();
                }
                match stop {
                    Ok(true) => return EndReason::StopHook,
                    Ok(false) => {}
                    Err(panic) => {
                        return self.fail_exit(AgentError::HookPanicked {
                            hook: "should_stop_after_turn",
                            message: panic_text(panic),
                        });
                    }
                }
                if self.max_turns_reached() {
                    let more =
                        more_tools || !self.steering.is_empty() || !self.follow_up.is_empty();
                    return if more { EndReason::MaxTurns } else { last_reason };
                }
                pending = self.steering.take(self.config.steering_mode);
            }
            let follow = self.follow_up.take(self.config.follow_up_mode);
            if follow.is_empty() {
                return last_reason;
            }
            pending = follow;
        }
    }

    /// A synthetic assistant message that closes the transcript (OpenClaw §5.8);
    /// its usage is zero (the default).
    fn closing_message(&self, stop_reason: StopReason, error: String) -> AssistantMessage {
        AssistantMessage {
            content: vec![AssistantContent::Text(TextContent::default())],
            api: self.model().api.clone(),
            provider: self.model().provider.clone(),
            model: self.model().id.clone(),
            stop_reason,
            error_message: Some(error),
            timestamp: now_millis(),
            ..AssistantMessage::default()
        }
    }

    /// OpenClaw §5.8: leave an aborted assistant message instead of a dangling turn.
    fn abort_exit(&mut self) -> EndReason {
        self.turn_start();
        let message = self.closing_message(StopReason::Aborted, "Agent run aborted".to_owned());
        self.add_message(Message::Assistant(message));
        self.turn_end(self.context.messages.len() - 1, Vec::new());
        EndReason::Aborted
    }

    /// A turn-level callback failed: close the turn with an error message (like
    /// OpenClaw's loop-failure sequence, §5.2) and end the run.
    fn fail_exit(&mut self, error: AgentError) -> EndReason {
        self.turn_start();
        let message = self.closing_message(StopReason::Error, error.to_string());
        self.add_message(Message::Assistant(message));
        self.turn_end(self.context.messages.len() - 1, Vec::new());
        self.error = Some(error);
        EndReason::Failed
    }

    /// The end of a turn-level callback that did not return a value.
    fn callback_exit(&mut self, hook: &'static str, outcome: Contained<()>) -> EndReason {
        match outcome {
            Contained::Panicked(message) => {
                self.fail_exit(AgentError::HookPanicked { hook, message })
            }
            Contained::Abandoned | Contained::Done(()) => self.abort_exit(),
        }
    }

    /// `prepare_next_turn`: the hook may replace model, prompt, options and tools.
    async fn prepare_turn(&mut self) -> Result<(), EndReason> {
        let hooks = self.config.hooks.clone();
        let info = TurnInfo {
            turn: self.turns,
            context: &self.context,
            new_messages: self.new_messages(),
            model: self.model(),
        };
        let update = match self.contained(|| hooks.prepare_next_turn(info)).await {
            Contained::Done(Some(update)) => update,
            Contained::Done(None) => return Ok(()),
            Contained::Panicked(message) => {
                return Err(self.callback_exit("prepare_next_turn", Contained::Panicked(message)));
            }
            Contained::Abandoned => return Err(self.abort_exit()),
        };
        if let Some(tools) = update.tools {
            if let Err(error) = check_unique_names(&tools) {
                return Err(self.fail_exit(error));
            }
            self.context.tools = tools;
        }
        if let Some(model) = update.model {
            self.model = Some(Box::new(model));
        }
        if let Some(prompt) = update.system_prompt {
            self.context.system_prompt = prompt;
        }
        if let Some(options) = update.options {
            self.options = Some(Box::new(options));
        }
        Ok(())
    }

    /// Error results for every call of a message whose calls will not run.
    fn write_unexecuted(&mut self, at: usize, why: &str) -> Vec<ToolResultMessage> {
        let results: Vec<ToolResultMessage> = self
            .assistant(at)
            .tool_calls()
            .map(|call| tool_result(call, &CallResult::error(why, false)))
            .collect();
        for result in &results {
            self.add_message(Message::ToolResult(result.clone()));
        }
        results
    }

    /// One request; the response goes into the transcript, and its index is returned.
    async fn stream_assistant(&mut self) -> Result<usize, EndReason> {
        // Boxed, both: the request's set-up (options, hook futures) is not kept
        // while the response streams, and the stream is kept once, in `consume`.
        let started = Box::pin(self.request()).await?;
        let mut message = match started {
            Ok(stream) => Box::pin(self.consume(stream)).await,
            Err(text) => {
                self.emit(AgentEvent::MessageStart {
                    message: Message::Assistant(
                        self.closing_message(StopReason::Error, text.clone()),
                    ),
                });
                self.closing_message(StopReason::Error, text)
            }
        };
        compact(&mut message);
        self.emit(AgentEvent::MessageEnd { message: Message::Assistant(message.clone()) });
        self.context.messages.push(Message::Assistant(message));
        Ok(self.context.messages.len() - 1)
    }

    /// A request's set-up: the key, the transcript sent, and the provider's
    /// stream (or the text of its panic); `Err` when a turn-level hook ended the run.
    async fn request(&mut self) -> Result<Result<Box<AssistantStream>, String>, EndReason> {
        let hooks = self.config.hooks.clone();
        let mut options = self.options.as_deref().unwrap_or(&self.config.options).clone();
        // The run's own token, not a child: a child per request would stay
        // allocated in the run token's list of children until it is pruned.
        options.cancel = self.cancel.clone();
        let provider_name = self.model().provider.clone();
        match self.contained(|| hooks.api_key(&provider_name)).await {
            Contained::Done(Ok(Some(key))) => options.api_key = Some(key),
            Contained::Done(Ok(None)) => {}
            Contained::Done(Err(e)) => {
                return Err(
                    self.fail_exit(AgentError::HookFailed { hook: "api_key", message: e.0 })
                );
            }
            Contained::Panicked(message) => {
                return Err(self.callback_exit("api_key", Contained::Panicked(message)));
            }
            Contained::Abandoned => return Err(self.abort_exit()),
        }
        let transformed = match self
            .contained(|| hooks.transform_context(&self.context.messages))
            .await
        {
            Contained::Done(t) => t,
            Contained::Panicked(message) => {
                return Err(self.callback_exit("transform_context", Contained::Panicked(message)));
            }
            Contained::Abandoned => return Err(self.abort_exit()),
        };
        // The stored transcript is lent to the request and taken back, so a turn
        // costs no copy of it (unless `transform_context` rewrote it).
        let lent = transformed.is_none();
        let mut llm_context = Context {
            system_prompt: self.context.system_prompt.clone(),
            messages: match transformed {
                Some(messages) => messages,
                None => std::mem::take(&mut self.context.messages),
            },
            tools: self.context.tools.iter().map(|t| t.tool.as_ref().clone()).collect(),
        };
        let provider = self.config.provider.clone();
        let started = std::panic::catch_unwind(AssertUnwindSafe(|| {
            provider.stream(self.model(), &llm_context, &options)
        }));
        if lent {
            self.context.messages = std::mem::take(&mut llm_context.messages);
        }
        drop(llm_context);
        Ok(started
            .map(Box::new)
            .map_err(|panic| format!("The provider panicked: {}", panic_text(panic))))
    }

    /// Forwards a response's events; the final message (MessageStart already emitted).
    async fn consume(&mut self, mut stream: Box<AssistantStream>) -> AssistantMessage {
        let mut started = false;
        let expired = grace_expired(self.cancel.clone(), self.config.abort_grace);
        futures_util::pin_mut!(expired);
        loop {
            let next = AssertUnwindSafe(stream.next()).catch_unwind();
            let event = match futures_util::future::select(next, expired.as_mut()).await {
                Either::Left((Ok(event), _)) => event,
                Either::Left((Err(panic), _)) => {
                    let mut message = stream.partial().to_message();
                    message.stop_reason = StopReason::Error;
                    message.error_message =
                        Some(format!("The provider panicked: {}", panic_text(panic)));
                    return self.finish_message(started, message);
                }
                Either::Right(_) => {
                    // The provider ignored the cancellation.
                    let mut message = stream.partial().to_message();
                    message.stop_reason = StopReason::Aborted;
                    message.error_message = Some("Request was aborted".to_owned());
                    return self.finish_message(started, message);
                }
            };
            match event {
                None => {
                    let message = stream.partial().to_message();
                    return self.finish_message(started, message);
                }
                Some(AssistantEvent::Start) => {
                    started = true;
                    self.emit(AgentEvent::MessageStart {
                        message: Message::Assistant(stream.partial().to_message()),
                    });
                }
                Some(
                    AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. },
                ) => {
                    return self.finish_message(started, message);
                }
                Some(other) => self.emit(AgentEvent::MessageUpdate { event: other }),
            }
        }
    }

    fn finish_message(&self, started: bool, message: AssistantMessage) -> AssistantMessage {
        if !started {
            self.emit(AgentEvent::MessageStart { message: Message::Assistant(message.clone()) });
        }
        message
    }

    async fn resolve(
        &mut self,
        at: usize,
        pos: usize,
        memo: &mut [Option<Resolution>],
        index: usize,
    ) -> Resolution {
        if let Some(Some(r)) = memo.get(index) {
            return r.clone();
        }
        let call = self.call(at, pos);
        let resolution =
            if let Some(found) = self.context.tools.iter().position(|t| t.tool.name == call.name) {
                Ok(Some(found))
            } else {
                let hooks = self.config.hooks.clone();
                let info = CallInfo { assistant: self.assistant(at), call, context: &self.context };
                match self.contained(|| hooks.resolve_deferred_tool(info)).await {
                    Contained::Done(Ok(Some(tool))) if tool.tool.name != call.name => Err(format!(
                        "Deferred tool resolver returned \"{}\" for requested \"{}\"",
                        tool.tool.name, call.name
                    )),
                    Contained::Done(Ok(Some(tool))) => {
                        self.context.tools.push(tool);
                        Ok(Some(self.context.tools.len() - 1))
                    }
                    Contained::Done(Ok(None)) => Ok(None),
                    Contained::Done(Err(e)) => Err(e.0),
                    Contained::Panicked(text) => Err(text),
                    Contained::Abandoned => Err(ABORTED_TEXT.to_owned()),
                }
            };
        if let Some(slot) = memo.get_mut(index) {
            *slot = Some(resolution.clone());
        }
        resolution
    }

    async fn prepare(&self, at: usize, pos: usize, resolution: Resolution) -> Prepared {
        let (message, call) = (self.assistant(at), self.call(at, pos));
        let tool_index = match resolution {
            Err(e) => {
                let text = if self.cancel.is_cancelled() { ABORTED_TEXT.to_owned() } else { e };
                return Prepared::Immediate(CallResult::error(text, false));
            }
            Ok(None) => {
                return Prepared::Immediate(CallResult::error(
                    format!("Tool {} not found", call.name),
                    false,
                ));
            }
            Ok(Some(index)) => index,
        };
        let Some(tool) = self.context.tools.get(tool_index) else {
            return Prepared::Immediate(CallResult::error(
                format!("Tool {} not found", call.name),
                false,
            ));
        };
        let mut args = call.arguments.clone();
        if let Some(prepare) = &tool.prepare_arguments {
            match std::panic::catch_unwind(AssertUnwindSafe(|| prepare(args.clone()))) {
                Ok(Ok(a)) => args = a,
                Ok(Err(e)) => return Prepared::Immediate(CallResult::error(e.0, false)),
                Err(panic) => {
                    return Prepared::Immediate(CallResult::error(panic_text(panic), false));
                }
            }
        }
        let args = match self.validators.validate(&tool.tool, &args) {
            Ok(a) => a,
            Err(e) => return Prepared::Immediate(CallResult::error(e.to_string(), false)),
        };
        let info = CallInfo { assistant: message, call, context: &self.context };
        let hooks = &self.config.hooks;
        match self.contained(|| hooks.before_tool_call(info, &args)).await {
            Contained::Done(BeforeToolCall::Allow) => {}
            Contained::Done(BeforeToolCall::Block(reason)) => {
                let text = if self.cancel.is_cancelled() {
                    ABORTED_TEXT.to_owned()
                } else {
                    reason.unwrap_or_else(|| BLOCKED_TEXT.to_owned())
                };
                return Prepared::Immediate(CallResult::error(text, false));
            }
            Contained::Panicked(text) => {
                return Prepared::Immediate(CallResult::error(text, false));
            }
            Contained::Abandoned => {
                return Prepared::Immediate(CallResult::error(ABORTED_TEXT, false));
            }
        }
        if self.cancel.is_cancelled() {
            return Prepared::Immediate(CallResult::error(ABORTED_TEXT, false));
        }
        Prepared::Ready { tool: tool_index, args: Box::new(args) }
    }

    /// Runs one prepared call on its own task, then its `after_tool_call` hook.
    /// After an abort the tool gets `abort_grace` to return; what it returns stands.
    async fn execute(&self, at: usize, pos: usize, tool: usize, args: Box<Value>) -> CallResult {
        let (message, call) = (self.assistant(at), self.call(at, pos));
        let Some(agent_tool) = self.context.tools.get(tool) else {
            return CallResult::error(format!("Tool {} not found", call.name), false);
        };
        if self.cancel.is_cancelled() {
            return CallResult::error(ABORTED_TEXT, false);
        }
        let sink = CloseOnDrop(ProgressSink::connected(&call.id, &call.name, self.tx.clone()));
        // The invocation is built in place (no local): a local moved away before
        // an await still takes room in this future, kept per call in flight.
        let task = ToolTask::start(
            agent_tool,
            ToolInvocation {
                call_id: call.id.clone(),
                arguments: unbox(args),
                cancel: self.cancel.child(),
                progress: sink.0.clone(),
            },
        );
        let expired = grace_expired(self.cancel.clone(), self.config.abort_grace);
        futures_util::pin_mut!(expired);
        // No await inside this match: what it matches would stay in this future.
        let finished = match futures_util::future::select(task, expired).await {
            Either::Left((outcome, _)) => {
                // No update may follow the result, even from a thread the tool left running.
                sink.0.close();
                // Boxed: the hook's future is only alive after the tool returned,
                // so it does not add to the future that waits for the tool.
                Ok(Box::pin(self.after_call(message, call, outcome)))
            }
            Either::Right((_, task)) => Err(task),
        };
        match finished {
            Ok(after) => after.await,
            Err(task) => {
                // Nothing of the call may outlive the run: wait (bounded) for the
                // aborted task to be dropped rather than leaving it to the runtime.
                Box::pin(task.cancel_and_settle(self.config.abort_grace)).await;
                CallResult::error(ABORTED_TEXT, true)
            }
        }
    }

    /// `after_tool_call` on a call that ran: the hook may override its result.
    async fn after_call(
        &self,
        message: &AssistantMessage,
        call: &ToolCall,
        outcome: Result<Result<ToolOutput, ToolError>, String>,
    ) -> CallResult {
        let (mut output, mut is_error) = match outcome {
            Ok(Ok(output)) => (output, false),
            Ok(Err(e)) => (ToolOutput::text(e.0), true),
            Err(panic) => (ToolOutput::text(panic), true),
        };
        let info = CallInfo { assistant: message, call, context: &self.context };
        let hooks = &self.config.hooks;
        let mut stop_after_batch = false;
        match self.contained(|| hooks.after_tool_call(info, &output, is_error)).await {
            Contained::Done(Some(over)) => {
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
            Contained::Done(None) | Contained::Abandoned => {}
            Contained::Panicked(text) => {
                output = ToolOutput::text(text);
                is_error = true;
            }
        }
        CallResult { output, is_error, started: true, stop_after_batch }
    }

    fn emit_end(&self, call: &ToolCall, result: &CallResult) {
        self.emit(AgentEvent::ToolExecutionEnd {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            result: result.output.clone(),
            is_error: result.is_error,
            execution_started: result.started,
        });
    }

    fn emit_start(&self, call: &ToolCall) {
        self.emit(AgentEvent::ToolExecutionStart {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            args: call.arguments.clone(),
        });
    }

    /// Runs the calls of the response at `at`. Calls are content positions in
    /// it: the batch borrows nothing from the transcript across its own writes.
    async fn execute_batch(&mut self, at: usize) -> BatchOutcome {
        let calls: Vec<usize> = self
            .assistant(at)
            .content
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c, AssistantContent::ToolCall(_)))
            .map(|(pos, _)| pos)
            .collect();
        let mut memo: Vec<Option<Resolution>> = vec![None; calls.len()];
        let mut sequential = self.config.tool_execution == ExecutionMode::Sequential;
        if !sequential {
            for (i, &pos) in calls.iter().enumerate() {
                if self.cancel.is_cancelled() {
                    break;
                }
                if let Ok(Some(tool)) = Box::pin(self.resolve(at, pos, &mut memo, i)).await
                    && self
                        .context
                        .tools
                        .get(tool)
                        .is_some_and(|t| t.execution_mode == ExecutionMode::Sequential)
                {
                    sequential = true;
                    break;
                }
            }
        }
        tracing::debug!(calls = calls.len(), sequential, "executing tool batch");
        let mut slots: Vec<Option<CallResult>> = calls.iter().map(|_| None).collect();
        if sequential {
            // Boxed: this future is kept for the whole batch.
            return Box::pin(self.execute_sequential(at, &calls, memo, slots)).await;
        }

        // Parallel: sequential preflight, then every prepared call on its own task.
        let mut ready: Vec<(usize, usize, usize, Box<Value>)> = Vec::new();
        for (i, &pos) in calls.iter().enumerate() {
            self.emit_start(self.call(at, pos));
            let prepared = if self.cancel.is_cancelled() {
                Prepared::Immediate(CallResult::error(ABORTED_TEXT, false))
            } else {
                let resolution = Box::pin(self.resolve(at, pos, &mut memo, i)).await;
                Box::pin(self.prepare(at, pos, resolution)).await
            };
            match prepared {
                Prepared::Immediate(r) => {
                    self.emit_end(self.call(at, pos), &r);
                    if let Some(slot) = slots.get_mut(i) {
                        *slot = Some(r);
                    }
                }
                Prepared::Ready { tool, args } => ready.push((i, pos, tool, args)),
            }
        }
        // Not needed while the calls run.
        drop(memo);
        let limit = self.config.max_concurrency.unwrap_or(usize::MAX).max(1);
        let this = &*self;
        let mut queue = ready.into_iter();
        let mut running = FuturesUnordered::new();
        let start = |(i, pos, tool, args): (usize, usize, usize, Box<Value>)| async move {
            (i, pos, this.execute(at, pos, tool, args).await)
        };
        // Boxed: `FuturesUnordered` keeps a stub task as large as its future type.
        for item in queue.by_ref().take(limit) {
            running.push(Box::pin(start(item)));
        }
        while let Some((i, pos, r)) = running.next().await {
            this.emit_end(this.call(at, pos), &r);
            if let Some(slot) = slots.get_mut(i) {
                *slot = Some(r);
            }
            // After an abort, queued calls are not started (`execute` checks).
            if let Some(item) = queue.next() {
                running.push(Box::pin(start(item)));
            }
        }
        drop(running);
        let aborted = self.cancel.is_cancelled();
        self.batch_outcome(at, &calls, slots, aborted, None)
    }

    /// A batch one call at a time, each result written before the next call.
    async fn execute_sequential(
        &mut self,
        at: usize,
        calls: &[usize],
        mut memo: Vec<Option<Resolution>>,
        mut slots: Vec<Option<CallResult>>,
    ) -> BatchOutcome {
        let mut written = Vec::new();
        for (i, &pos) in calls.iter().enumerate() {
            self.emit_start(self.call(at, pos));
            let result = if self.cancel.is_cancelled() {
                CallResult::error(ABORTED_TEXT, false)
            } else {
                let resolution = Box::pin(self.resolve(at, pos, &mut memo, i)).await;
                match Box::pin(self.prepare(at, pos, resolution)).await {
                    Prepared::Immediate(r) => r,
                    Prepared::Ready { tool, args } => {
                        Box::pin(self.execute(at, pos, tool, args)).await
                    }
                }
            };
            self.emit_end(self.call(at, pos), &result);
            let msg = tool_result(self.call(at, pos), &result);
            self.add_message(Message::ToolResult(msg.clone()));
            written.push(msg);
            if let Some(slot) = slots.get_mut(i) {
                *slot = Some(result);
            }
        }
        let aborted = self.cancel.is_cancelled();
        self.batch_outcome(at, calls, slots, aborted, Some(written))
    }

    fn batch_outcome(
        &mut self,
        at: usize,
        calls: &[usize],
        slots: Vec<Option<CallResult>>,
        aborted: bool,
        written: Option<Vec<ToolResultMessage>>,
    ) -> BatchOutcome {
        let mut results = Vec::new();
        let mut terminate = !calls.is_empty();
        let mut stop_after_batch = false;
        for (&pos, slot) in calls.iter().zip(slots) {
            let r = slot.unwrap_or_else(|| CallResult::error(ABORTED_TEXT, false));
            terminate &= r.output.terminate;
            stop_after_batch |= r.stop_after_batch;
            if written.is_none() {
                let msg = tool_result(self.call(at, pos), &r);
                self.add_message(Message::ToolResult(msg.clone()));
                results.push(msg);
            }
        }
        if let Some(written) = written {
            results = written;
        }
        BatchOutcome { results, terminate, stop_after_batch, aborted }
    }
}

fn tool_result(call: &ToolCall, r: &CallResult) -> ToolResultMessage {
    ToolResultMessage {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        content: r.output.content.clone(),
        details: r.output.details.clone(),
        is_error: r.is_error,
        timestamp: now_millis(),
    }
}
