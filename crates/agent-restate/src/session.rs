//! The agent session as a Restate virtual object, and the Restate journal.

use std::sync::Arc;

use agent_core::{
    AfterToolCall, Agent, AgentConfig, AgentContext, AgentHooks, AgentTool, BeforeToolCall,
    CallInfo, ExecutionMode, MessageQueue, ToolError, ToolOutput,
};
use futures_util::future::{BoxFuture, Either};
use llm_core::{AssistantContent, CancellationToken, Message, ToolResultMessage};
use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::journal::{Effect, Journal, StepError};
use crate::wrap::{JournaledProvider, journaled_tool};

/// State key of a session's transcript.
pub const TRANSCRIPT_KEY: &str = "transcript";
/// State key of a session inbox's queued steering messages.
const INBOX_KEY: &str = "queued";

/// What an application supplies per session: the agent configuration (model,
/// provider, hooks, limits), the system prompt and the tools.
/// The session wraps the provider and the tools so that their effects are journaled.
#[derive(Debug, Clone)]
pub struct SessionParts {
    /// The agent configuration; `tool_execution` is forced to sequential (see [`AgentSession`]).
    pub config: AgentConfig,
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// The tools.
    pub tools: Vec<AgentTool>,
}

/// Builds the [`SessionParts`] for a session id (called once per handler invocation).
pub trait SessionSetup: Send + Sync + 'static {
    /// The parts for `session_id`.
    fn parts(&self, session_id: &str) -> SessionParts;
}

impl<F> SessionSetup for F
where
    F: Fn(&str) -> SessionParts + Send + Sync + 'static,
{
    fn parts(&self, session_id: &str) -> SessionParts {
        self(session_id)
    }
}

/// What one `message` invocation returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnReply {
    /// Why the run ended (`Completed`, `Aborted`, ...).
    pub reason: String,
    /// The text of the last assistant message.
    pub text: String,
    /// How many messages the run added to the transcript.
    pub added: usize,
}

/// A request from the agent run to the handler that owns the Restate context.
enum Request {
    Step { name: String, effect: Effect, reply: oneshot::Sender<Result<Value, StepError>> },
    TakeSteering { reply: oneshot::Sender<Vec<String>> },
}

/// The [`Journal`] of a run inside a Restate handler: each step becomes a
/// `ctx.run` performed by the handler (the only owner of the context), one at a time.
#[derive(Clone)]
pub struct RestateJournal {
    tx: mpsc::UnboundedSender<Request>,
}

impl std::fmt::Debug for RestateJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestateJournal").finish_non_exhaustive()
    }
}

impl Journal for RestateJournal {
    fn step(&self, name: String, effect: Effect) -> BoxFuture<'static, Result<Value, StepError>> {
        let (reply, rx) = oneshot::channel();
        let sent = self.tx.send(Request::Step { name: name.clone(), effect, reply });
        Box::pin(async move {
            if sent.is_err() {
                return Err(StepError::Failed {
                    step: name,
                    message: "the handler has ended".into(),
                });
            }
            rx.await.unwrap_or_else(|_| {
                Err(StepError::Failed { step: name, message: "the handler has ended".into() })
            })
        })
    }
}

impl RestateJournal {
    /// Steering messages sent to the session since the last call (a journaled call to
    /// its [`SessionInbox`]).
    async fn take_steering(&self) -> Vec<String> {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Request::TakeSteering { reply }).is_err() {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }
}

/// Runs `run` to its end while serving its journal requests with `ctx`, one at a time
/// in the order they arrive (the run issues them in a deterministic order).
/// Returns the run's output and whether Restate cancelled the invocation; on cancel,
/// `cancel` is cancelled and every later step answers [`StepError::Cancelled`].
async fn serve_run<T>(
    ctx: &ObjectContext<'_>,
    run: impl Future<Output = T>,
    mut requests: mpsc::UnboundedReceiver<Request>,
    cancel: &CancellationToken,
) -> Result<(T, bool), TerminalError> {
    let mut run = std::pin::pin!(run);
    let mut cancelled = false;
    loop {
        let next = std::pin::pin!(requests.recv());
        let request = match futures_util::future::select(run.as_mut(), next).await {
            Either::Left((output, _)) => return Ok((output, cancelled)),
            Either::Right((Some(request), _)) => request,
            Either::Right((None, _)) => return Ok((run.await, cancelled)),
        };
        match request {
            Request::Step { name, effect, reply } => {
                if cancelled {
                    let _ = reply.send(Err(StepError::Cancelled { step: name }));
                    continue;
                }
                let result = ctx
                    .run(
                        move || async move { effect().await.map(Json).map_err(HandlerError::from) },
                    )
                    .name(name.clone())
                    .await;
                let answer = match result {
                    Ok(Json(value)) => Ok(value),
                    Err(e) if e.code() == 409 => {
                        cancelled = true;
                        cancel.cancel();
                        Err(StepError::Cancelled { step: name })
                    }
                    Err(e) => {
                        Err(StepError::Failed { step: name, message: e.message().to_owned() })
                    }
                };
                let _ = reply.send(answer);
            }
            Request::TakeSteering { reply } => {
                let taken = if cancelled { Vec::new() } else { take_inbox(ctx).await? };
                let _ = reply.send(taken);
            }
        }
    }
}

async fn take_inbox(ctx: &ObjectContext<'_>) -> Result<Vec<String>, TerminalError> {
    let Json(taken) = ctx.object_client::<SessionInboxClient>(ctx.key()).take().call().await?;
    Ok(taken)
}

/// Hooks that deliver steering messages at the next turn: after each tool call
/// they fetch the session's inbox into the run's steering queue (agent-core takes
/// that queue after the batch, before the next request). Other hooks delegate.
struct SteeringHooks {
    inner: Arc<dyn AgentHooks>,
    journal: RestateJournal,
    /// The run's own steering queue (agent-core gives each run its own), set once the
    /// run exists; the hooks are built before it.
    steering: Arc<std::sync::OnceLock<MessageQueue>>,
}

impl AgentHooks for SteeringHooks {
    fn resolve_deferred_tool<'a>(
        &'a self,
        info: CallInfo<'a>,
    ) -> BoxFuture<'a, Result<Option<AgentTool>, ToolError>> {
        self.inner.resolve_deferred_tool(info)
    }

    fn before_tool_call<'a>(
        &'a self,
        info: CallInfo<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, BeforeToolCall> {
        self.inner.before_tool_call(info, args)
    }

    fn after_tool_call<'a>(
        &'a self,
        info: CallInfo<'a>,
        result: &'a ToolOutput,
        is_error: bool,
    ) -> BoxFuture<'a, Option<AfterToolCall>> {
        Box::pin(async move {
            let over = self.inner.after_tool_call(info, result, is_error).await;
            let taken = self.journal.take_steering().await;
            if let Some(steering) = self.steering.get() {
                for text in taken {
                    steering.push(Message::user(text));
                }
            }
            over
        })
    }

    fn should_stop_after_turn(
        &self,
        message: &llm_core::AssistantMessage,
        results: &[ToolResultMessage],
    ) -> bool {
        self.inner.should_stop_after_turn(message, results)
    }

    fn prepare_next_turn<'a>(
        &'a self,
        info: agent_core::TurnInfo<'a>,
    ) -> BoxFuture<'a, Option<agent_core::TurnUpdate>> {
        self.inner.prepare_next_turn(info)
    }

    fn transform_context<'a>(
        &'a self,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Option<Vec<Message>>> {
        self.inner.transform_context(messages)
    }

    fn api_key<'a>(
        &'a self,
        provider: &'a str,
    ) -> BoxFuture<'a, Result<Option<llm_core::ApiKey>, ToolError>> {
        self.inner.api_key(provider)
    }
}

/// An agent session as a Restate virtual object keyed by session id.
///
/// * `message` (exclusive): appends a user message and runs the agent loop; every
///   model request and tool execution is a journaled `ctx.run` step, the transcript
///   is the object's state. Tool calls run sequentially, because Restate replays
///   steps by position and concurrent steps would journal in a nondeterministic order.
/// * `steer` (shared): queues a steering message; a running `message` delivers it
///   at the next turn, otherwise the next `message` does.
/// * `transcript` (shared): the stored transcript.
///
/// Cancelling a `message` invocation (Restate's cancel) aborts the run at the next
/// step: pending calls get aborted results, the transcript is stored, and the
/// invocation fails with code 409.
pub struct AgentSession {
    setup: Arc<dyn SessionSetup>,
}

impl AgentSession {
    /// A session service whose agents come from `setup`.
    pub fn new(setup: impl SessionSetup) -> Self {
        AgentSession { setup: Arc::new(setup) }
    }
}

#[restate_sdk::object]
impl AgentSession {
    /// Runs the agent on a new user message.
    #[handler]
    async fn message(
        &self,
        ctx: ObjectContext<'_>,
        text: Json<String>,
    ) -> Result<Json<TurnReply>, HandlerError> {
        let session_id = ctx.key().to_owned();
        let transcript: Vec<Message> =
            ctx.get::<Json<Vec<Message>>>(TRANSCRIPT_KEY).await?.map(|j| j.0).unwrap_or_default();
        let queued = take_inbox(&ctx).await?;

        let (tx, rx) = mpsc::unbounded_channel();
        let journal = RestateJournal { tx };
        let shared: Arc<dyn Journal> = Arc::new(journal.clone());
        // The application's setup is a callback: a panic fails this attempt (Restate
        // retries it) instead of unwinding through the SDK.
        let parts = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.setup.parts(&session_id)
        }))
        .map_err(|_| HandlerError::from("the session setup panicked"))?;
        let SessionParts { mut config, system_prompt, tools } = parts;
        config.provider = Arc::new(JournaledProvider::new(config.provider.clone(), shared.clone()));
        config.tool_execution = ExecutionMode::Sequential;
        let steering = Arc::new(std::sync::OnceLock::new());
        config.hooks = Arc::new(SteeringHooks {
            inner: config.hooks.clone(),
            journal,
            steering: steering.clone(),
        });
        let tools =
            tools.into_iter().map(|t| journaled_tool(t, shared.clone(), &session_id)).collect();
        let context = AgentContext { system_prompt, messages: transcript, tools };

        let run = Agent::new(config).run(context, vec![Message::user(text.0)]);
        let queue = run.steering();
        for text in queued {
            queue.push(Message::user(text));
        }
        let _ = steering.set(queue);
        let cancel = run.cancel_token();
        let (outcome, cancelled) = serve_run(&ctx, run.finish(), rx, &cancel).await?;

        let added = outcome.messages().len();
        let text = last_assistant_text(outcome.messages());
        ctx.set(TRANSCRIPT_KEY, Json(outcome.context.messages));
        if cancelled {
            return Err(TerminalError::new_with_code(409, "session run cancelled").into());
        }
        Ok(Json(TurnReply { reason: format!("{:?}", outcome.reason), text, added }))
    }

    /// Queues a steering message for the session.
    #[handler]
    async fn steer(
        &self,
        ctx: SharedObjectContext<'_>,
        text: Json<String>,
    ) -> Result<(), HandlerError> {
        ctx.object_client::<SessionInboxClient>(ctx.key()).push(text).send();
        Ok(())
    }

    /// The session's transcript.
    #[handler]
    async fn transcript(
        &self,
        ctx: SharedObjectContext<'_>,
    ) -> Result<Json<Vec<Message>>, HandlerError> {
        Ok(Json(
            ctx.get::<Json<Vec<Message>>>(TRANSCRIPT_KEY).await?.map(|j| j.0).unwrap_or_default(),
        ))
    }
}

fn last_assistant_text(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Assistant(a) => Some(
                a.content
                    .iter()
                    .filter_map(|c| match c {
                        AssistantContent::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect::<String>(),
            ),
            _ => None,
        })
        .unwrap_or_default()
}

/// A session's steering inbox: a separate virtual object with the same key, so
/// that queuing does not wait behind the session's running `message` invocation.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionInbox;

#[restate_sdk::object]
impl SessionInbox {
    /// Queues a message.
    #[handler]
    async fn push(&self, ctx: ObjectContext<'_>, text: Json<String>) -> Result<(), HandlerError> {
        let mut queued: Vec<String> =
            ctx.get::<Json<Vec<String>>>(INBOX_KEY).await?.map(|j| j.0).unwrap_or_default();
        queued.push(text.0);
        ctx.set(INBOX_KEY, Json(queued));
        Ok(())
    }

    /// Takes every queued message.
    #[handler]
    async fn take(&self, ctx: ObjectContext<'_>) -> Result<Json<Vec<String>>, HandlerError> {
        let queued: Vec<String> =
            ctx.get::<Json<Vec<String>>>(INBOX_KEY).await?.map(|j| j.0).unwrap_or_default();
        ctx.clear(INBOX_KEY);
        Ok(Json(queued))
    }
}
