//! The double loop (OpenClaw §5.3) with the spec README's decisions 1-3.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context as TaskContext, Poll};

use futures_util::future::{BoxFuture, Either};
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, Stream, StreamExt};
use llm_core::validation::ValidatorCache;
use llm_core::{
    AssistantContent, AssistantEvent, AssistantMessage, CancellationToken, Message, Model,
    Provider, StopReason, StreamOptions, TextContent, ToolCall, ToolResultMessage, Usage,
    now_millis,
};
use serde_json::Value;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::context::{AgentContext, MessageQueue};
use crate::event::{AgentEvent, EndReason};
use crate::hooks::{AgentHooks, BeforeToolCall, CallInfo, NoHooks};
use crate::tool::{ExecutionMode, ProgressSink, ToolInvocation, ToolOutput};

/// Text of the result for calls that never ran because the run was aborted.
pub const ABORTED_TEXT: &str = "Operation aborted";
/// Text of the result for a call blocked by `before_tool_call` without a reason.
pub const BLOCKED_TEXT: &str = "Tool execution was blocked";

/// Everything that configures an agent.
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
    /// Stop after this many assistant turns (`None`: no limit).
    pub max_turns: Option<u32>,
    /// Application hooks.
    pub hooks: Arc<dyn AgentHooks>,
    /// Messages injected after a turn, before the next request.
    pub steering: MessageQueue,
    /// Messages injected only when the agent would otherwise stop.
    pub follow_up: MessageQueue,
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("model", &self.model.id)
            .field("tool_execution", &self.tool_execution)
            .field("max_concurrency", &self.max_concurrency)
            .field("max_turns", &self.max_turns)
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
            steering: MessageQueue::new(),
            follow_up: MessageQueue::new(),
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

/// The result of a finished run.
#[derive(Debug, Clone)]
pub struct AgentOutcome {
    /// Messages this run added, in order.
    pub messages: Vec<Message>,
    /// The context at the end (transcript and tools, deferred tools included).
    pub context: AgentContext,
    /// Why it ended.
    pub reason: EndReason,
}

/// An agent: configuration plus the validator cache shared by its runs.
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

    /// Starts a run that adds `prompts` to `context`.
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
        let (tx, rx) = unbounded_channel();
        let cancel = self.config.options.cancel.child();
        let runner = Runner {
            config: self.config.clone(),
            validators: self.validators.clone(),
            cancel: cancel.clone(),
            tx,
            context,
            new_messages: Vec::new(),
        };
        AgentRun { events: rx, driver: Some(Box::pin(runner.run(prompts))), outcome: None, cancel }
    }
}

/// A running agent: a `Stream` of [`AgentEvent`]s that drives the run as it is
/// polled. Dropping it stops the run (tools' futures are dropped with it).
pub struct AgentRun {
    events: UnboundedReceiver<AgentEvent>,
    driver: Option<BoxFuture<'static, AgentOutcome>>,
    outcome: Option<AgentOutcome>,
    cancel: CancellationToken,
}

impl std::fmt::Debug for AgentRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRun").field("finished", &self.driver.is_none()).finish_non_exhaustive()
    }
}

impl AgentRun {
    /// Aborts the run: streaming stops, running tools see their token cancelled,
    /// every pending call gets an aborted result.
    pub fn abort(&self) {
        self.cancel.cancel();
    }

    /// The run's cancellation token.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Drives the run to its end, discarding events.
    pub async fn finish(mut self) -> AgentOutcome {
        while self.next().await.is_some() {}
        match self.outcome.take() {
            Some(o) => o,
            None => AgentOutcome {
                messages: Vec::new(),
                context: AgentContext::default(),
                reason: EndReason::Aborted,
            },
        }
    }

    /// The outcome, once the stream has ended.
    pub fn outcome(&self) -> Option<&AgentOutcome> {
        self.outcome.as_ref()
    }
}

impl Stream for AgentRun {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<AgentEvent>> {
        let this = &mut *self;
        if let Some(driver) = this.driver.as_mut()
            && let Poll::Ready(outcome) = driver.as_mut().poll(cx)
        {
            this.outcome = Some(outcome);
            this.driver = None;
        }
        if this.driver.is_none() {
            // Every event is queued once the driver is done; `try_recv` also ignores
            // a progress sender a tool may still hold, and tokio's co-op budget.
            return Poll::Ready(this.events.try_recv().ok());
        }
        this.events.poll_recv(cx)
    }
}

struct Runner {
    config: Arc<AgentConfig>,
    validators: Arc<ValidatorCache>,
    cancel: CancellationToken,
    tx: UnboundedSender<AgentEvent>,
    context: AgentContext,
    new_messages: Vec<Message>,
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
        args: Value,
    },
    Immediate(CallResult),
}

/// The resolved tool as an index into `context.tools` (cloning tools per call
/// would cost their schemas).
type Resolution = Result<Option<usize>, String>;

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "Tool panicked".to_owned()
    }
}

impl Runner {
    fn emit(&self, event: AgentEvent) {
        let _ = self.tx.send(event);
    }

    fn add_message(&mut self, message: Message) {
        self.emit(AgentEvent::MessageStart { message: message.clone() });
        self.emit(AgentEvent::MessageEnd { message: message.clone() });
        self.context.messages.push(message.clone());
        self.new_messages.push(message);
    }

    async fn run(mut self, prompts: Vec<Message>) -> AgentOutcome {
        self.emit(AgentEvent::AgentStart);
        self.emit(AgentEvent::TurnStart);
        for p in prompts {
            self.add_message(p);
        }
        let reason = self.run_loop().await;
        self.emit(AgentEvent::AgentEnd { messages: self.new_messages.clone(), reason });
        AgentOutcome { messages: self.new_messages, context: self.context, reason }
    }

    async fn run_loop(&mut self) -> EndReason {
        let mut pending = self.config.steering.drain();
        let mut first_turn = true;
        let mut turns: u32 = 0;
        let mut last_reason = EndReason::Completed;
        loop {
            let mut more_tools = true;
            while more_tools || !pending.is_empty() {
                if self.cancel.is_cancelled() {
                    return self.abort_exit(!first_turn);
                }
                if !first_turn {
                    self.emit(AgentEvent::TurnStart);
                }
                first_turn = false;
                for m in pending.drain(..) {
                    self.add_message(m);
                }
                if self.cancel.is_cancelled() {
                    return self.abort_exit(true);
                }
                let message = self.stream_assistant().await;
                turns += 1;
                match message.stop_reason {
                    StopReason::Error | StopReason::Aborted => {
                        let why = if message.stop_reason == StopReason::Aborted {
                            "Tool call was not executed: the response was aborted".to_owned()
                        } else {
                            format!(
                                "Tool call was not executed: the response failed: {}",
                                message.error_message.as_deref().unwrap_or("unknown error")
                            )
                        };
                        let results = self.write_unexecuted(&message, &why);
                        self.emit(AgentEvent::TurnEnd {
                            message: message.clone(),
                            tool_results: results,
                        });
                        return if message.stop_reason == StopReason::Aborted {
                            EndReason::Aborted
                        } else {
                            EndReason::Error
                        };
                    }
                    StopReason::Length => {
                        // Decision 2: a call cut off by the token limit never runs.
                        let results = self.write_unexecuted(
                            &message,
                            "Tool call was cut off by the output token limit (stop reason: length) and was not executed",
                        );
                        self.emit(AgentEvent::TurnEnd { message, tool_results: results });
                        return EndReason::Length;
                    }
                    StopReason::Stop | StopReason::ToolUse => {}
                }
                more_tools = false;
                let mut results = Vec::new();
                let has_calls = message.tool_calls().next().is_some();
                if has_calls && message.stop_reason != StopReason::ToolUse {
                    results = self.write_unexecuted(
                        &message,
                        "Tool call was not executed: the assistant did not stop for tool use",
                    );
                    self.emit(AgentEvent::TurnEnd { message, tool_results: results });
                    return EndReason::Completed;
                }
                let mut stop_after_batch = false;
                if has_calls {
                    let batch = self.execute_batch(&message).await;
                    results = batch.results;
                    stop_after_batch = batch.stop_after_batch;
                    last_reason =
                        if batch.terminate { EndReason::Terminated } else { EndReason::Completed };
                    more_tools = !batch.terminate;
                    if batch.aborted {
                        self.emit(AgentEvent::TurnEnd { message, tool_results: results });
                        return self.abort_exit(false);
                    }
                } else {
                    last_reason = EndReason::Completed;
                }
                self.emit(AgentEvent::TurnEnd {
                    message: message.clone(),
                    tool_results: results.clone(),
                });
                if stop_after_batch {
                    return EndReason::StopAfterBatch;
                }
                if self.cancel.is_cancelled() {
                    return self.abort_exit(false);
                }
                if self.config.hooks.should_stop_after_turn(&message, &results) {
                    return EndReason::StopHook;
                }
                if more_tools && self.config.max_turns.is_some_and(|max| turns >= max) {
                    return EndReason::MaxTurns;
                }
                pending = self.config.steering.drain();
            }
            let follow = self.config.follow_up.drain();
            if follow.is_empty() {
                return last_reason;
            }
            pending = follow;
        }
    }

    /// OpenClaw §5.8: leave an aborted assistant message instead of a dangling turn.
    fn abort_exit(&mut self, turn_open: bool) -> EndReason {
        if !turn_open {
            self.emit(AgentEvent::TurnStart);
        }
        let message = AssistantMessage {
            content: vec![AssistantContent::Text(TextContent::default())],
            api: self.config.model.api.clone(),
            provider: self.config.model.provider.clone(),
            model: self.config.model.id.clone(),
            usage: Usage::default(),
            stop_reason: StopReason::Aborted,
            error_message: Some("Agent run aborted".to_owned()),
            timestamp: now_millis(),
            ..AssistantMessage::default()
        };
        self.add_message(Message::Assistant(message.clone()));
        self.emit(AgentEvent::TurnEnd { message, tool_results: Vec::new() });
        EndReason::Aborted
    }

    /// Error results for every call of a message whose calls will not run.
    fn write_unexecuted(
        &mut self,
        message: &AssistantMessage,
        why: &str,
    ) -> Vec<ToolResultMessage> {
        let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
        let mut results = Vec::new();
        for call in calls {
            let result = tool_result(&call, &CallResult::error(why, false));
            self.add_message(Message::ToolResult(result.clone()));
            results.push(result);
        }
        results
    }

    async fn stream_assistant(&mut self) -> AssistantMessage {
        let llm_context = self.context.to_llm_context();
        let mut options = self.config.options.clone();
        options.cancel = self.cancel.child();
        let mut stream = self.config.provider.stream(&self.config.model, &llm_context, &options);
        let mut started = false;
        let mut final_message = None;
        while let Some(event) = stream.next().await {
            match event {
                AssistantEvent::Start => {
                    started = true;
                    self.emit(AgentEvent::MessageStart {
                        message: Message::Assistant(stream.partial().to_message()),
                    });
                }
                AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. } => {
                    final_message = Some(message);
                }
                other => self.emit(AgentEvent::MessageUpdate { event: other }),
            }
        }
        let message = final_message.unwrap_or_else(|| stream.partial().to_message());
        if !started {
            self.emit(AgentEvent::MessageStart { message: Message::Assistant(message.clone()) });
        }
        self.emit(AgentEvent::MessageEnd { message: Message::Assistant(message.clone()) });
        self.context.messages.push(Message::Assistant(message.clone()));
        self.new_messages.push(Message::Assistant(message.clone()));
        message
    }

    async fn resolve(
        &mut self,
        message: &AssistantMessage,
        call: &ToolCall,
        memo: &mut HashMap<usize, Resolution>,
        index: usize,
    ) -> Resolution {
        if let Some(r) = memo.get(&index) {
            return r.clone();
        }
        let resolution =
            if let Some(index) = self.context.tools.iter().position(|t| t.tool.name == call.name) {
                Ok(Some(index))
            } else {
                let info = CallInfo { assistant: message, call, context: &self.context };
                let fut = self.config.hooks.resolve_deferred_tool(info);
                match AssertUnwindSafe(fut).catch_unwind().await {
                    Ok(Ok(Some(tool))) if tool.tool.name != call.name => Err(format!(
                        "Deferred tool resolver returned \"{}\" for requested \"{}\"",
                        tool.tool.name, call.name
                    )),
                    Ok(Ok(Some(tool))) => {
                        self.context.tools.push(tool);
                        Ok(Some(self.context.tools.len() - 1))
                    }
                    Ok(Ok(None)) => Ok(None),
                    Ok(Err(e)) => Err(e.0),
                    Err(panic) => Err(panic_text(panic)),
                }
            };
        memo.insert(index, resolution.clone());
        resolution
    }

    async fn prepare(
        &self,
        message: &AssistantMessage,
        call: &ToolCall,
        resolution: Resolution,
    ) -> Prepared {
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
        match AssertUnwindSafe(self.config.hooks.before_tool_call(info, &args)).catch_unwind().await
        {
            Ok(BeforeToolCall::Allow) => {}
            Ok(BeforeToolCall::Block(reason)) => {
                let text = if self.cancel.is_cancelled() {
                    ABORTED_TEXT.to_owned()
                } else {
                    reason.unwrap_or_else(|| BLOCKED_TEXT.to_owned())
                };
                return Prepared::Immediate(CallResult::error(text, false));
            }
            Err(panic) => return Prepared::Immediate(CallResult::error(panic_text(panic), false)),
        }
        if self.cancel.is_cancelled() {
            return Prepared::Immediate(CallResult::error(ABORTED_TEXT, false));
        }
        Prepared::Ready { tool: tool_index, args }
    }

    /// Runs one prepared call and its `after_tool_call` hook.
    async fn execute(
        &self,
        message: &AssistantMessage,
        call: &ToolCall,
        tool: usize,
        args: Value,
    ) -> CallResult {
        let Some(executor) = self.context.tools.get(tool).map(|t| t.executor.clone()) else {
            return CallResult::error(format!("Tool {} not found", call.name), false);
        };
        let closed = Arc::new(AtomicBool::new(false));
        let invocation = ToolInvocation {
            call_id: call.id.clone(),
            arguments: args,
            cancel: self.cancel.child(),
            progress: ProgressSink {
                call_id: call.id.clone(),
                tool_name: call.name.clone(),
                tx: Some(self.tx.clone()),
                closed: closed.clone(),
            },
        };
        let outcome =
            match std::panic::catch_unwind(AssertUnwindSafe(|| executor.execute(invocation))) {
                Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await,
                Err(panic) => Err(panic),
            };
        closed.store(true, Ordering::SeqCst);
        let (mut output, mut is_error) = match outcome {
            Ok(Ok(output)) => (output, false),
            Ok(Err(e)) => (ToolOutput::text(e.0), true),
            Err(panic) => (ToolOutput::text(panic_text(panic)), true),
        };
        let info = CallInfo { assistant: message, call, context: &self.context };
        let mut stop_after_batch = false;
        match AssertUnwindSafe(self.config.hooks.after_tool_call(info, &output, is_error))
            .catch_unwind()
            .await
        {
            Ok(Some(over)) => {
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
            Ok(None) => {}
            Err(panic) => {
                output = ToolOutput::text(panic_text(panic));
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

    async fn execute_batch(&mut self, message: &AssistantMessage) -> BatchOutcome {
        let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
        let mut memo = HashMap::new();
        let mut sequential = self.config.tool_execution == ExecutionMode::Sequential;
        if !sequential {
            for (i, call) in calls.iter().enumerate() {
                if self.cancel.is_cancelled() {
                    break;
                }
                if let Ok(Some(tool)) = self.resolve(message, call, &mut memo, i).await
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
        let mut aborted = false;
        if sequential {
            let mut written = Vec::new();
            for (i, call) in calls.iter().enumerate() {
                self.emit_start(call);
                let result = if self.cancel.is_cancelled() {
                    aborted = true;
                    CallResult::error(ABORTED_TEXT, false)
                } else {
                    let resolution = self.resolve(message, call, &mut memo, i).await;
                    match self.prepare(message, call, resolution).await {
                        Prepared::Immediate(r) => r,
                        Prepared::Ready { tool, args } => {
                            let cancelled = self.cancel.cancelled();
                            let run = self.execute(message, call, tool, args);
                            futures_util::pin_mut!(run);
                            match futures_util::future::select(run, cancelled).await {
                                Either::Left((r, _)) => r,
                                Either::Right(_) => {
                                    aborted = true;
                                    CallResult::error(ABORTED_TEXT, true)
                                }
                            }
                        }
                    }
                };
                self.emit_end(call, &result);
                let msg = tool_result(call, &result);
                self.add_message(Message::ToolResult(msg.clone()));
                written.push(msg);
                if let Some(slot) = slots.get_mut(i) {
                    *slot = Some(result);
                }
            }
            if self.cancel.is_cancelled() {
                aborted = true;
            }
            return self.batch_outcome(&calls, slots, aborted, Some(written));
        }

        // Parallel: sequential preflight, then every prepared call at once.
        let mut ready: Vec<(usize, usize, Value)> = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            self.emit_start(call);
            if self.cancel.is_cancelled() {
                let r = CallResult::error(ABORTED_TEXT, false);
                self.emit_end(call, &r);
                if let Some(slot) = slots.get_mut(i) {
                    *slot = Some(r);
                }
                continue;
            }
            let resolution = self.resolve(message, call, &mut memo, i).await;
            match self.prepare(message, call, resolution).await {
                Prepared::Immediate(r) => {
                    self.emit_end(call, &r);
                    if let Some(slot) = slots.get_mut(i) {
                        *slot = Some(r);
                    }
                }
                Prepared::Ready { tool, args } => ready.push((i, tool, args)),
            }
        }
        let limit = self.config.max_concurrency.unwrap_or(usize::MAX).max(1);
        let this = &*self;
        let mut queue = ready.into_iter();
        let mut running = FuturesUnordered::new();
        let start = |(i, tool, args): (usize, usize, Value)| {
            let call = calls.get(i).cloned();
            async move {
                match call {
                    Some(call) => (i, this.execute(message, &call, tool, args).await),
                    None => (i, CallResult::error("internal: call index out of range", false)),
                }
            }
        };
        for item in queue.by_ref().take(limit) {
            running.push(start(item));
        }
        let cancelled = this.cancel.cancelled();
        futures_util::pin_mut!(cancelled);
        let mut aborted_running = false;
        while !running.is_empty() {
            match futures_util::future::select(cancelled.as_mut(), running.next()).await {
                Either::Left(_) => {
                    aborted_running = true;
                    break;
                }
                Either::Right((Some((i, r)), _)) => {
                    if let Some(call) = calls.get(i) {
                        this.emit_end(call, &r);
                    }
                    if let Some(slot) = slots.get_mut(i) {
                        *slot = Some(r);
                    }
                    if let Some(item) = queue.next() {
                        running.push(start(item));
                    }
                }
                Either::Right((None, _)) => break,
            }
        }
        drop(running);
        if aborted_running || this.cancel.is_cancelled() {
            aborted = true;
            for (i, call) in calls.iter().enumerate() {
                if let Some(slot) = slots.get_mut(i)
                    && slot.is_none()
                {
                    let r = CallResult::error(ABORTED_TEXT, true);
                    this.emit_end(call, &r);
                    *slot = Some(r);
                }
            }
        }
        self.batch_outcome(&calls, slots, aborted, None)
    }

    fn batch_outcome(
        &mut self,
        calls: &[ToolCall],
        slots: Vec<Option<CallResult>>,
        aborted: bool,
        written: Option<Vec<ToolResultMessage>>,
    ) -> BatchOutcome {
        let mut results = Vec::new();
        let mut terminate = !calls.is_empty();
        let mut stop_after_batch = false;
        for (call, slot) in calls.iter().zip(slots) {
            let r = slot.unwrap_or_else(|| CallResult::error(ABORTED_TEXT, false));
            terminate &= r.output.terminate;
            stop_after_batch |= r.stop_after_batch;
            if written.is_none() {
                let msg = tool_result(call, &r);
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
