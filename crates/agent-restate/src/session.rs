//! The agent session as a Restate virtual object, its inbox and its approvals.

use std::collections::BTreeMap;
use std::sync::Arc;

use agent_core::{
    AgentConfig, AgentContext, AgentMachine, AgentTool, Approval, Input, MachineSettings,
};
use llm_core::validation::ValidatorCache;
use llm_core::{AssistantContent, Message, now_millis};
use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use tracing::Instrument;

use crate::cache::{CACHE_BUDGET, Cached, EMPTY_DIGEST, TranscriptCache, chain};
use crate::driver::{Driver, StepLimits};
use crate::live::LiveSink;

/// State key of a transcript stored by the previous version: the whole
/// transcript as one value. Still read; the next turn moves it to the
/// incremental layout.
pub const TRANSCRIPT_KEY: &str = "transcript";
/// State key of the transcript's envelope ([`TranscriptEnvelope`]); message
/// `i` is stored under `msg.<i>`.
pub const ENVELOPE_KEY: &str = "transcript.envelope";
/// The layout version of a stored transcript this build writes.
pub const TRANSCRIPT_VERSION: u32 = 2;

/// How a session's transcript is stored: the messages one state entry each
/// (a turn writes only its new messages), and this envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptEnvelope {
    /// The layout version ([`TRANSCRIPT_VERSION`]); a newer one is refused, not misread.
    pub version: u32,
    /// How many messages are stored.
    pub count: usize,
    /// Their total size in bytes (JSON).
    pub bytes: u64,
    /// A hash chained over the messages (FNV-1a over each one's JSON): what a
    /// worker read outside the journal is checked against it. `None` in an
    /// envelope written before it existed.
    #[serde(default)]
    pub digest: Option<u64>,
}

/// What an application supplies per session: the agent configuration (model,
/// provider, hooks, limits), the system prompt and the tools.
#[derive(Debug, Clone)]
pub struct SessionParts {
    /// The agent configuration: the model, provider, request options, hooks,
    /// tool execution mode, concurrency and turn limits.
    pub config: AgentConfig,
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// The session's tools. A tool a hook hands out (`prepare_next_turn`,
    /// `resolve_deferred_tool`) is journaled as its definition; after a restart
    /// its executor is found here by name.
    pub tools: Vec<AgentTool>,
    /// Step bounds and the model request's durable retry policy.
    pub limits: StepLimits,
    /// The most a session's stored transcript may hold (bytes of JSON); a
    /// `message` to a session over it fails at once with a clear error.
    pub transcript_budget: u64,
    /// Restate ingress URLs (any nodes) the worker reads a session's stored
    /// messages from when its own copy lacks them (after a restart, or turns
    /// served by other workers): then a turn's journal holds only the
    /// transcript's envelope, not its messages. Empty: every turn reads the
    /// whole transcript through the journal (one entry per message).
    pub ingress: Vec<String>,
}

/// The default [`SessionParts::transcript_budget`]: 64 MiB.
pub const DEFAULT_TRANSCRIPT_BUDGET: u64 = 64 << 20;

impl SessionParts {
    /// Parts with the default limits and budget.
    pub fn new(config: AgentConfig, system_prompt: Option<String>, tools: Vec<AgentTool>) -> Self {
        SessionParts {
            config,
            system_prompt,
            tools,
            limits: StepLimits::default(),
            transcript_budget: DEFAULT_TRANSCRIPT_BUDGET,
            ingress: Vec::new(),
        }
    }
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
    /// The structured answer of a run with an output format
    /// ([`AgentConfig::output`]): `{"status": "valid", "value": ...}`, or why
    /// there is none (`invalid` with its violations, `refused`, `failed`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
}

/// A person's answer to an approval request, by call id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The id of the call waiting.
    pub call_id: String,
    /// `Some`: deny, with this reason ("" for none); `None`: approve.
    #[serde(default)]
    pub deny: Option<String>,
}

/// A fingerprint of what a replay depends on: the tools (names and schemas),
/// the model, the system prompt, the execution settings and the output format. Recorded as a run's first step; a retry on
/// a build with another setup fails with a clear error instead of a journal mismatch.
fn setup_fingerprint(parts: &SessionParts) -> String {
    let tools: Vec<(&str, &serde_json::Value)> =
        parts.tools.iter().map(|t| (t.tool.name.as_str(), &t.tool.parameters)).collect();
    let described = serde_json::json!({
        "tools": tools,
        "model": [&parts.config.model.api, &parts.config.model.provider, &parts.config.model.id],
        "system": &parts.system_prompt,
        "settings": [format!("{:?}", parts.config.tool_execution), format!("{:?}", parts.config.max_concurrency), format!("{:?}", parts.config.max_turns)],
        "output": serde_json::to_value(&parts.config.output).unwrap_or_default(),
        // Where the transcript is read from shapes the journal (gets or none).
        "reads": parts.ingress.is_empty(),
    });
    // FNV-1a, 64 bits: stable across builds and platforms (std's hasher is not).
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in described.to_string().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// An agent session as a Restate virtual object keyed by session id.
///
/// * `message` (exclusive): appends a user message and runs the agent loop:
///   every model request, hook answer and tool call is a journaled step (see
///   the driver); the transcript is the object's state, stored incrementally.
/// * `steer` (shared): queues a steering message; a running `message` delivers it
///   at the next turn, otherwise the next `message` does.
/// * `approve` / `deny` (shared): answer a call waiting for approval, by call id.
/// * `transcript` (shared): the stored transcript.
///
/// Cancelling a `message` invocation (Restate's cancel) aborts the run once the
/// step in flight ended (its result is kept): pending calls get aborted results,
/// the transcript is stored, and the invocation fails with code 409.
pub struct AgentSession {
    setup: Arc<dyn SessionSetup>,
    cache: Arc<TranscriptCache>,
    /// The process's forwarder of live events, started by the first run
    /// with ingress URLs (it needs the runtime).
    live: std::sync::OnceLock<Arc<LiveSink>>,
}

impl AgentSession {
    /// A session service whose agents come from `setup`.
    ///
    /// Also installs the verifier of Restate's request identity for the
    /// process, so a worker given identity keys can check signed requests.
    pub fn new(setup: impl SessionSetup) -> Self {
        crate::identity::install_identity_verifier();
        AgentSession {
            setup: Arc::new(setup),
            cache: Arc::new(TranscriptCache::new(CACHE_BUDGET)),
            live: std::sync::OnceLock::new(),
        }
    }
}

/// Reads a session's transcript envelope (`None`: none stored in this layout),
/// refusing a layout newer than this build's. A macro, not a generic function:
/// the handler futures must be `Send` for every context lifetime, which a
/// function generic over the context trait does not show the compiler.
macro_rules! load_envelope {
    ($ctx:expr) => {
        async {
            let Some(Json(envelope)) = $ctx.get::<Json<TranscriptEnvelope>>(ENVELOPE_KEY).await?
            else {
                return Ok::<Option<TranscriptEnvelope>, HandlerError>(None);
            };
            let envelope: TranscriptEnvelope = envelope;
            if envelope.version > TRANSCRIPT_VERSION {
                return Err(TerminalError::new(format!(
                    "the session's transcript was stored in layout {} by a newer build; this build reads up to {TRANSCRIPT_VERSION}",
                    envelope.version
                ))
                .into());
            }
            Ok(Some(envelope))
        }
    };
}

/// Reads stored messages `from..count` through the journal, one entry each.
macro_rules! load_messages {
    ($ctx:expr, $from:expr, $count:expr) => {
        async {
            let (from, count): (usize, usize) = ($from, $count);
            let mut messages = Vec::with_capacity(count.saturating_sub(from));
            for i in from..count {
                match $ctx.get::<Json<Message>>(message_key(i)).await? {
                    Some(Json(m)) => messages.push(m),
                    None => {
                        return Err::<Vec<Message>, HandlerError>(
                            TerminalError::new(format!(
                                "the session's transcript lacks message {i} of {count}"
                            ))
                            .into(),
                        );
                    }
                }
            }
            Ok(messages)
        }
    };
}

/// Reads a session's whole transcript through the journal: the incremental
/// layout, or a transcript stored whole by the previous version (`true`).
macro_rules! load_transcript {
    ($ctx:expr) => {
        async {
            if let Some(envelope) = load_envelope!($ctx).await? {
                let messages = load_messages!($ctx, 0, envelope.count).await?;
                return Ok::<(Vec<Message>, TranscriptEnvelope, bool), HandlerError>((
                    messages, envelope, false,
                ));
            }
            load_legacy!($ctx).await
        }
    };
}

/// Reads a session that has no envelope: a transcript stored whole by the
/// previous version (`true`), or none (a new session). One state read, the
/// only one a session's first turn has more than its later turns.
macro_rules! load_legacy {
    ($ctx:expr) => {
        async {
            let legacy: Vec<Message> = $ctx
                .get::<Json<Vec<Message>>>(TRANSCRIPT_KEY)
                .await?
                .map(|j| j.0)
                .unwrap_or_default();
            let envelope = TranscriptEnvelope {
                version: TRANSCRIPT_VERSION,
                count: 0,
                bytes: 0,
                digest: None,
            };
            let legacy_found = !legacy.is_empty();
            Ok::<(Vec<Message>, TranscriptEnvelope, bool), HandlerError>((
                legacy,
                envelope,
                legacy_found,
            ))
        }
    };
}

/// The state key of message `i`. Restate's `get` wants a key that lives as
/// long as the context, so keys are made once per process and kept: the table
/// grows to the longest transcript this process has read (a few bytes a message).
fn message_key(i: usize) -> &'static str {
    static KEYS: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut keys = KEYS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    while keys.len() <= i {
        let key = format!("msg.{}", keys.len());
        keys.push(Box::leak(key.into_boxed_str()));
    }
    keys.get(i).copied().unwrap_or_default()
}

/// Decodes a transcript stored whole by the previous version (the value of
/// [`TRANSCRIPT_KEY`]).
pub fn decode_legacy_transcript(bytes: &[u8]) -> Result<Vec<Message>, serde_json::Error> {
    serde_json::from_slice(bytes)
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
        // The application's setup is a callback: a panic fails this attempt (Restate
        // retries it) instead of unwinding through the SDK.
        let parts = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.setup.parts(&session_id)
        }))
        .map_err(|_| HandlerError::from("the session setup panicked"))?;
        let fingerprint = setup_fingerprint(&parts);
        let current = fingerprint.clone();
        // One step records the setup's fingerprint and the run's clock: each
        // step is a round trip to the server, and a turn's cost is its steps.
        let Json((recorded, now)): Json<(String, u64)> = ctx
            .run(move || async move { Ok(Json((current, now_millis()))) })
            .name("setup fingerprint and clock")
            .await?;
        if recorded != fingerprint {
            // Not a terminal error from here: any entry this build writes now
            // (the invocation's end included) differs from the first build's
            // journal, and restate-sdk exposes no "fail without retry" for an
            // attempt. So every attempt fails with this message and the
            // deployment's retry bound ends the invocation with it
            // (`retry_policy_max_attempts` with kill on max attempts, or pause).
            return Err(HandlerError::from(format!(
                "this invocation started on a worker build with another setup (tools, model, system prompt, settings or output format: fingerprint {recorded}, this build {fingerprint}); it cannot be replayed here. Serve it with the build that started it (register each worker version as its own deployment), or kill the invocation"
            )));
        }
        // With ingress URLs, the messages are read outside the journal (this
        // worker's copy, and what it lacks from the ingress), checked against the
        // envelope's digest; without, or for an envelope without a digest,
        // through the journal.
        let (transcript, mut envelope, legacy) = match load_envelope!(&ctx).await? {
            Some(envelope) if !parts.ingress.is_empty() && envelope.digest.is_some() => {
                let digest = envelope.digest.unwrap_or(EMPTY_DIGEST);
                let loaded = self
                    .cache
                    .load(&parts.ingress, &session_id, envelope.count, digest)
                    .await
                    .map_err(HandlerError::from)?
                    .map_err(TerminalError::new)?;
                (loaded.messages, envelope, false)
            }
            Some(envelope) => (load_messages!(&ctx, 0, envelope.count).await?, envelope, false),
            // The envelope was just read: only the previous layout is left to look for.
            None => load_legacy!(&ctx).await?,
        };
        if envelope.bytes > parts.transcript_budget {
            return Err(TerminalError::new(format!(
                "the session's transcript holds {} bytes, over its budget of {}; start a new session",
                envelope.bytes, parts.transcript_budget
            ))
            .into());
        }

        let parts_ingress_empty = parts.ingress.is_empty();
        let parts_ingress = parts.ingress.clone();
        let SessionParts { config, system_prompt, tools, limits, transcript_budget: _, ingress: _ } =
            parts;
        let stored = if legacy { 0 } else { transcript.len() };
        let settings = MachineSettings {
            tool_execution: config.tool_execution,
            max_concurrency: config.max_concurrency,
            max_turns: config.max_turns,
            steering_mode: config.steering_mode,
            follow_up_mode: config.follow_up_mode,
        };
        let context = AgentContext { system_prompt, messages: transcript, tools: tools.clone() };
        let machine = AgentMachine::new(
            settings,
            context,
            Arc::new(config.model.clone()),
            Arc::new(ValidatorCache::new()),
        );
        // A run whose final answer must match a schema: the machine asks for it
        // and validates it (and asks again once with the violations).
        let machine = match config.output.clone() {
            Some(output) => machine.with_output(output),
            None => machine,
        };
        let mut driver = Driver::new(
            &ctx,
            machine,
            config.hooks.clone(),
            config.provider.clone(),
            config.options.clone(),
            limits,
            &tools,
            session_id.clone(),
            now,
        );
        if !parts_ingress_empty {
            let ingress = parts_ingress.clone();
            driver.live = Some(self.live.get_or_init(|| LiveSink::start(ingress)).clone());
        }
        // What the run does (its turns, requests and calls) nests beneath its span.
        let span = driver.span.clone();
        driver.take_steering().instrument(span.clone()).await?;
        span.in_scope(|| driver.feed(Input::Start(vec![Message::user(text.0)])));
        driver.run().instrument(span).await?;
        driver.end_spans();
        driver.flush_events();
        driver.withdraw_approvals();

        let cancelled = driver.cancelled;
        let steered = std::mem::take(&mut driver.steered);
        let mut machine = driver.machine;
        let added = machine.new_messages().len();
        let text = last_assistant_text(machine.new_messages());
        // Steering taken but not sent (the run ended first) stays in the inbox
        // for the next message: only what reached the transcript is acknowledged.
        let unsent = machine.take_queued().len();
        let sent = steered.len().saturating_sub(unsent);
        let reason = machine.reason();
        let output = machine.output_outcome().and_then(|o| serde_json::to_value(o).ok());
        let messages = &machine.context().messages;
        for (i, message) in messages.iter().enumerate().skip(stored) {
            let size = serde_json::to_vec(message).map(|b| b.len() as u64).unwrap_or_default();
            envelope.bytes += size;
            ctx.set(message_key(i), Json(message.clone()));
        }
        let digest = match envelope.digest {
            Some(digest) => chain(digest, messages.get(stored..).unwrap_or_default()),
            // No digest yet (an envelope of the previous build, or the old layout).
            None => chain(EMPTY_DIGEST, messages),
        };
        envelope.digest = Some(digest);
        envelope.count = messages.len();
        envelope.version = TRANSCRIPT_VERSION;
        ctx.set(ENVELOPE_KEY, Json(envelope));
        if legacy {
            ctx.clear(TRANSCRIPT_KEY);
        }
        if let Some(&upto) = steered.get(sent.wrapping_sub(1)).filter(|_| sent > 0) {
            ctx.object_client::<SessionInboxClient>(session_id.clone()).ack(Json(upto)).send();
        }
        if !parts_ingress_empty {
            // This worker's copy for the session's next turn.
            let messages = machine.into_context().messages;
            self.cache.put(&session_id, Cached { digest, bytes: envelope.bytes, messages });
        }
        if cancelled {
            return Err(TerminalError::new_with_code(409, "session run cancelled").into());
        }
        let reason = reason.map(|r| format!("{r:?}")).unwrap_or_else(|| "Failed".into());
        Ok(Json(TurnReply { reason, text, added, output }))
    }

    /// Queues a steering message for the session.
    #[handler]
    async fn steer(
        &self,
        ctx: SharedObjectContext<'_>,
        text: Json<String>,
    ) -> Result<(), HandlerError> {
        ctx.object_client::<SessionInboxClient>(ctx.key()).push(text).call().await?;
        Ok(())
    }

    /// Approves the call `call_id` waiting in the session's run; fails with
    /// [`NOT_WAITING`] when no call waits under that id.
    #[handler]
    async fn approve(
        &self,
        ctx: SharedObjectContext<'_>,
        call_id: Json<String>,
    ) -> Result<(), HandlerError> {
        decide(&ctx, Decision { call_id: call_id.0, deny: None }).await
    }

    /// Denies a waiting call: `{"callId": ..., "reason": ...}`; fails as `approve`.
    #[handler]
    async fn deny(
        &self,
        ctx: SharedObjectContext<'_>,
        request: Json<DenyRequest>,
    ) -> Result<(), HandlerError> {
        let DenyRequest { call_id, reason } = request.0;
        decide(&ctx, Decision { call_id, deny: Some(reason.unwrap_or_default()) }).await
    }

    /// The session's stored messages from index `from` on: what a worker
    /// lacks of a transcript it read before (see [`SessionParts::ingress`]).
    #[handler]
    async fn messages(
        &self,
        ctx: SharedObjectContext<'_>,
        from: Json<usize>,
    ) -> Result<Json<Vec<Message>>, HandlerError> {
        let count = load_envelope!(&ctx).await?.map_or(0, |e| e.count);
        Ok(Json(load_messages!(&ctx, from.0, count).await?))
    }

    /// The session's transcript.
    #[handler]
    async fn transcript(
        &self,
        ctx: SharedObjectContext<'_>,
    ) -> Result<Json<Vec<Message>>, HandlerError> {
        Ok(Json(load_transcript!(&ctx).await?.0))
    }
}

/// Hands a decision to the session's approvals object, which resolves the
/// waiting call or refuses with [`NOT_WAITING`].
async fn decide(ctx: &SharedObjectContext<'_>, decision: Decision) -> Result<(), HandlerError> {
    ctx.object_client::<SessionApprovalsClient>(ctx.key()).decide(Json(decision)).call().await?;
    Ok(())
}

/// The body of `deny`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DenyRequest {
    /// The id of the call waiting.
    pub call_id: String,
    /// Why, for the model.
    #[serde(default)]
    pub reason: Option<String>,
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

/// State key of a session inbox's queued steering messages.
const INBOX_KEY: &str = "queued";
/// State key of the inbox's last sequence number.
const INBOX_SEQ_KEY: &str = "seq";
/// At most this many steering messages wait in an inbox; `steer` fails beyond.
pub const INBOX_LIMIT: usize = 256;
/// The error code of a `steer` refused because the inbox holds [`INBOX_LIMIT`]
/// messages (HTTP 429 at the ingress): a client may retry once the run took them.
pub const INBOX_FULL: u16 = 429;

/// A session's steering inbox: a separate virtual object with the same key, so
/// that queuing does not wait behind the session's running `message`.
/// Messages are numbered; a run reads those after the last it saw (`since`)
/// and the inbox drops them only when the session acknowledges them with its
/// stored transcript (`ack`), so a run that ends or crashes after taking them
/// loses none. Only `push` is reachable from the ingress (through `steer`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionInbox;

#[restate_sdk::object]
impl SessionInbox {
    /// Queues a message.
    #[handler(ingress_private)]
    async fn push(&self, ctx: ObjectContext<'_>, text: Json<String>) -> Result<(), HandlerError> {
        let mut queued: Vec<(u64, String)> =
            ctx.get::<Json<Vec<(u64, String)>>>(INBOX_KEY).await?.map(|j| j.0).unwrap_or_default();
        if queued.len() >= INBOX_LIMIT {
            return Err(TerminalError::new_with_code(
                INBOX_FULL,
                format!("the session's inbox holds {INBOX_LIMIT} steering messages already"),
            )
            .into());
        }
        let seq = ctx.get::<u64>(INBOX_SEQ_KEY).await?.unwrap_or(0) + 1;
        ctx.set(INBOX_SEQ_KEY, seq);
        queued.push((seq, text.0));
        ctx.set(INBOX_KEY, Json(queued));
        Ok(())
    }

    /// The queued messages numbered above `after`.
    #[handler(ingress_private)]
    async fn since(
        &self,
        ctx: SharedObjectContext<'_>,
        after: Json<u64>,
    ) -> Result<Json<Vec<(u64, String)>>, HandlerError> {
        let queued: Vec<(u64, String)> =
            ctx.get::<Json<Vec<(u64, String)>>>(INBOX_KEY).await?.map(|j| j.0).unwrap_or_default();
        Ok(Json(queued.into_iter().filter(|(seq, _)| *seq > after.0).collect()))
    }

    /// Drops the messages numbered up to `upto` (they are in the transcript).
    #[handler(ingress_private)]
    async fn ack(&self, ctx: ObjectContext<'_>, upto: Json<u64>) -> Result<(), HandlerError> {
        let mut queued: Vec<(u64, String)> =
            ctx.get::<Json<Vec<(u64, String)>>>(INBOX_KEY).await?.map(|j| j.0).unwrap_or_default();
        queued.retain(|(seq, _)| *seq > upto.0);
        ctx.set(INBOX_KEY, Json(queued));
        Ok(())
    }
}

/// State key of the awakeables of calls waiting for approval, by call id.
const WAITING_KEY: &str = "waiting";

/// The error code of a decision for a call that does not wait for one (HTTP 404
/// at the ingress): never asked, already decided, or its run ended.
pub const NOT_WAITING: u16 = 404;

/// A session's approvals: which awakeable each waiting call sleeps on. A
/// separate object with the session's key, so `approve` / `deny` never wait
/// behind the running `message`; its handlers are reachable only from the
/// session (the ingress goes through `AgentSession/approve` and `deny`).
///
/// An entry lives from the call's request for approval until its decision, or
/// until its run ends without one (an abort withdraws it), so a decision for a
/// call id that is not waiting is refused with [`NOT_WAITING`] instead of
/// being kept for a call that may never ask.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionApprovals;

#[restate_sdk::object]
impl SessionApprovals {
    /// A call waits on `awakeable`: `(call id, awakeable id)`.
    #[handler(ingress_private)]
    async fn register(
        &self,
        ctx: ObjectContext<'_>,
        waiting: Json<(String, String)>,
    ) -> Result<(), HandlerError> {
        let (call_id, awakeable) = waiting.0;
        let mut table: BTreeMap<String, String> =
            ctx.get::<Json<_>>(WAITING_KEY).await?.map(|j: Json<_>| j.0).unwrap_or_default();
        table.insert(call_id, awakeable);
        ctx.set(WAITING_KEY, Json(table));
        Ok(())
    }

    /// Resolves the call's awakeable with the decision; fails with
    /// [`NOT_WAITING`] when no call waits under that id.
    #[handler(ingress_private)]
    async fn decide(
        &self,
        ctx: ObjectContext<'_>,
        decision: Json<Decision>,
    ) -> Result<(), HandlerError> {
        let Decision { call_id, deny } = decision.0;
        let approval = match deny {
            None => Approval::Approve,
            Some(reason) => Approval::Deny { reason: Some(reason).filter(|r| !r.is_empty()) },
        };
        let mut table: BTreeMap<String, String> =
            ctx.get::<Json<_>>(WAITING_KEY).await?.map(|j: Json<_>| j.0).unwrap_or_default();
        let Some(awakeable) = table.remove(&call_id) else {
            return Err(TerminalError::new_with_code(
                NOT_WAITING,
                format!(
                    "no call {call_id:?} waits for approval in this session (never asked, already decided, or its run ended)"
                ),
            )
            .into());
        };
        if table.is_empty() {
            ctx.clear(WAITING_KEY);
        } else {
            ctx.set(WAITING_KEY, Json(table));
        }
        ctx.resolve_awakeable(&awakeable, Json(approval));
        Ok(())
    }

    /// The run that parked these calls ended without their decisions (an
    /// abort, a failure): they no longer wait.
    #[handler(ingress_private)]
    async fn withdraw(
        &self,
        ctx: ObjectContext<'_>,
        call_ids: Json<Vec<String>>,
    ) -> Result<(), HandlerError> {
        let mut table: BTreeMap<String, String> =
            ctx.get::<Json<_>>(WAITING_KEY).await?.map(|j: Json<_>| j.0).unwrap_or_default();
        for call_id in &call_ids.0 {
            table.remove(call_id);
        }
        if table.is_empty() {
            ctx.clear(WAITING_KEY);
        } else {
            ctx.set(WAITING_KEY, Json(table));
        }
        Ok(())
    }
}

/// At most this many recent events are kept per session (the oldest go
/// first, a chunk of [`EVENT_CHUNK`] at a time).
pub const EVENTS_KEPT: usize = 4096;
/// At most this many recent live events are kept per session (likewise).
pub const LIVE_KEPT: usize = 2048;
/// Events are stored in chunks of this many, one state entry each: a call
/// rewrites the chunk it appends to, never the whole kept list.
pub const EVENT_CHUNK: u64 = 64;
/// State keys of a session's live steps: each step's attempt that has not
/// ended, and attempts marked cut off.
const LIVE_OPEN_KEY: &str = "live.open";
const LIVE_CUT_KEY: &str = "live.cut";
/// At most this many cut-off attempts (and open steps) are remembered.
const LIVE_CUT_KEPT: usize = 64;

/// Where a numbered list of events lives in an object's state: its last
/// number, and a ring of chunks (chunk `i` holds numbers `i * EVENT_CHUNK + 1`
/// on, in slot `i % slots`, so a new chunk overwrites the oldest).
struct EventRing {
    /// State key of the last number.
    last_key: &'static str,
    /// The slots' state key prefix.
    prefix: &'static str,
    /// How many chunks are kept.
    slots: u64,
    /// The previous layout: one state value with every kept `(number, event)`
    /// (and, for live events, the last number under its own key); read once
    /// and moved into the ring.
    legacy_list: &'static str,
    legacy_last: Option<&'static str>,
}

const EVENTS_RING: EventRing = EventRing {
    last_key: "events.last",
    prefix: "events.chunk",
    slots: EVENTS_KEPT as u64 / EVENT_CHUNK,
    legacy_list: "events",
    legacy_last: None,
};

const LIVE_RING: EventRing = EventRing {
    last_key: "live.last",
    prefix: "live.chunk",
    slots: LIVE_KEPT as u64 / EVENT_CHUNK,
    legacy_list: "live",
    legacy_last: Some("live.seq"),
};

type Chunk = Vec<(u64, serde_json::Value)>;

impl EventRing {
    /// The state key of the slot holding chunk `index`. Restate's `get` wants a
    /// key that lives as long as the context: the keys are made once per
    /// process (a slot count per ring) and kept.
    fn slot_key(&self, index: u64) -> &'static str {
        static KEYS: std::sync::Mutex<Vec<(&'static str, u64, &'static str)>> =
            std::sync::Mutex::new(Vec::new());
        let slot = index % self.slots;
        let mut keys = KEYS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, _, key)) = keys.iter().find(|(p, s, _)| *p == self.prefix && *s == slot) {
            return key;
        }
        let key: &'static str = Box::leak(format!("{}.{slot}", self.prefix).into_boxed_str());
        keys.push((self.prefix, slot, key));
        key
    }

    /// The events numbered above `after` that are kept, and the last number.
    async fn read(
        &self,
        ctx: &SharedObjectContext<'_>,
        after: u64,
    ) -> Result<EventPage, HandlerError> {
        let Some(last) = ctx.get::<u64>(self.last_key).await? else {
            // Not moved into the ring yet: the previous layout's list.
            let kept: Chunk = ctx
                .get::<Json<_>>(self.legacy_list)
                .await?
                .map(|j: Json<_>| j.0)
                .unwrap_or_default();
            let mut last = kept.last().map_or(0, |(seq, _)| *seq);
            if let Some(key) = self.legacy_last {
                last = last.max(ctx.get::<u64>(key).await?.unwrap_or(0));
            }
            let events = kept.into_iter().filter(|(seq, _)| *seq > after).collect();
            return Ok(EventPage { events, last });
        };
        let oldest = (last + 1).saturating_sub(self.slots * EVENT_CHUNK).max(1);
        let first = (after + 1).max(oldest);
        let mut events = Vec::new();
        if first <= last {
            for index in (first - 1) / EVENT_CHUNK..=(last - 1) / EVENT_CHUNK {
                let chunk: Chunk = ctx
                    .get::<Json<_>>(self.slot_key(index))
                    .await?
                    .map(|j: Json<_>| j.0)
                    .unwrap_or_default();
                // A slot may hold a newer chunk than the one asked for: its events are not these.
                events.extend(chunk.into_iter().filter(|(seq, _)| {
                    *seq >= first && *seq <= last && (*seq - 1) / EVENT_CHUNK == index
                }));
            }
        }
        Ok(EventPage { events, last })
    }
}

/// Appends to an [`EventRing`]: reads its last number and the chunk it
/// appends to (none when a call starts a chunk), writes the chunks it touched
/// and the last number, whatever the kept list's length.
struct RingWriter {
    ring: &'static EventRing,
    last: u64,
    chunk: Option<(u64, Chunk)>,
}

impl RingWriter {
    async fn open(ctx: &ObjectContext<'_>, ring: &'static EventRing) -> Result<Self, HandlerError> {
        let mut writer = RingWriter { ring, last: 0, chunk: None };
        if let Some(last) = ctx.get::<u64>(ring.last_key).await? {
            writer.last = last;
            return Ok(writer);
        }
        // The previous layout, moved into the ring once (at most the kept events).
        let kept: Chunk =
            ctx.get::<Json<_>>(ring.legacy_list).await?.map(|j: Json<_>| j.0).unwrap_or_default();
        let mut last = kept.last().map_or(0, |(seq, _)| *seq);
        if let Some(key) = ring.legacy_last {
            last = last.max(ctx.get::<u64>(key).await?.unwrap_or(0));
            ctx.clear(key);
        }
        ctx.clear(ring.legacy_list);
        for (seq, event) in kept {
            writer.last = seq.saturating_sub(1);
            writer.push(ctx, event).await?;
        }
        writer.last = last;
        Ok(writer)
    }

    /// Appends `event` as the next number.
    async fn push(
        &mut self,
        ctx: &ObjectContext<'_>,
        event: serde_json::Value,
    ) -> Result<(), HandlerError> {
        let seq = self.last + 1;
        let index = (seq - 1) / EVENT_CHUNK;
        if self.chunk.as_ref().is_none_or(|(open, _)| *open != index) {
            self.flush(ctx);
            let events = if (seq - 1).is_multiple_of(EVENT_CHUNK) {
                Vec::new()
            } else {
                let chunk: Chunk = ctx
                    .get::<Json<_>>(self.ring.slot_key(index))
                    .await?
                    .map(|j: Json<_>| j.0)
                    .unwrap_or_default();
                chunk
                    .into_iter()
                    .filter(|(s, _)| *s > 0 && (*s - 1) / EVENT_CHUNK == index)
                    .collect()
            };
            self.chunk = Some((index, events));
        }
        if let Some((_, events)) = self.chunk.as_mut() {
            events.push((seq, event));
        }
        self.last = seq;
        Ok(())
    }

    fn flush(&mut self, ctx: &ObjectContext<'_>) {
        if let Some((index, events)) = self.chunk.take() {
            ctx.set(self.ring.slot_key(index), Json(events));
        }
    }

    /// Writes what was appended.
    fn finish(mut self, ctx: &ObjectContext<'_>) {
        self.flush(ctx);
        ctx.set(self.ring.last_key, self.last);
    }
}

/// Events read from a session: those numbered above the reader's `after`, and
/// the number to pass next time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventPage {
    /// `(sequence number, event)`, in order.
    pub events: Vec<(u64, serde_json::Value)>,
    /// The highest sequence number so far (pass it as `after` next time).
    pub last: u64,
}

/// A session's followable events: the running `message` appends each batch of
/// its run's events with a one-way call, which is a journal entry of the run,
/// so a replay does not send it again and a follower never sees an event twice.
/// Followers poll `read` with the last number they saw.
///
/// Events are kept in chunks of [`EVENT_CHUNK`], one state entry each, so a
/// call touches one or two chunks whatever the number kept; bind the object
/// with lazy state (`ServiceOptions::enable_lazy_state`), or Restate sends
/// every kept chunk with every call.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionEvents;

#[restate_sdk::object]
impl SessionEvents {
    /// Appends events (from the session's run only).
    #[handler(ingress_private)]
    async fn append(
        &self,
        ctx: ObjectContext<'_>,
        events: Json<Vec<serde_json::Value>>,
    ) -> Result<(), HandlerError> {
        let mut ring = RingWriter::open(&ctx, &EVENTS_RING).await?;
        for event in events.0 {
            ring.push(&ctx, event).await?;
        }
        ring.finish(&ctx);
        Ok(())
    }

    /// Appends live events of a running step (token deltas, tool progress), sent by the
    /// worker through the ingress outside the journal. Events of an attempt
    /// marked cut off are dropped; an `attempt_start` for a step whose last
    /// attempt never ended marks that attempt first: `attempt_cut`.
    #[handler]
    async fn push_live(
        &self,
        ctx: ObjectContext<'_>,
        events: Json<Vec<serde_json::Value>>,
    ) -> Result<(), HandlerError> {
        let mut ring = RingWriter::open(&ctx, &LIVE_RING).await?;
        let mut open: BTreeMap<String, String> =
            ctx.get::<Json<_>>(LIVE_OPEN_KEY).await?.map(|j: Json<_>| j.0).unwrap_or_default();
        let mut cut: Vec<String> =
            ctx.get::<Json<_>>(LIVE_CUT_KEY).await?.map(|j: Json<_>| j.0).unwrap_or_default();
        for event in events.0.into_iter().take(LIVE_KEPT) {
            let text = |key: &str| event.get(key).and_then(|v| v.as_str()).map(str::to_owned);
            let (step, attempt) = (text("step"), text("attempt"));
            if attempt.as_ref().is_some_and(|a| cut.contains(a)) {
                continue;
            }
            match (text("type").as_deref(), step, attempt) {
                (Some("attempt_start"), Some(step), Some(attempt)) => {
                    if let Some(previous) = open.insert(step.clone(), attempt)
                        && !cut.contains(&previous)
                    {
                        let mark = serde_json::json!({"type": "attempt_cut", "step": step, "attempt": previous});
                        ring.push(&ctx, mark).await?;
                        cut.push(previous);
                    }
                }
                (Some("attempt_end"), Some(step), Some(attempt))
                    if open.get(&step) == Some(&attempt) =>
                {
                    open.remove(&step);
                }
                _ => {}
            }
            ring.push(&ctx, event).await?;
        }
        let over = cut.len().saturating_sub(LIVE_CUT_KEPT);
        cut.drain(..over);
        // Bounded: past it, steps are forgotten in name order (a forgotten
        // step's cut-off attempt is then not marked; the journaled events still end it).
        while open.len() > LIVE_CUT_KEPT {
            open.pop_first();
        }
        ring.finish(&ctx);
        ctx.set(LIVE_OPEN_KEY, Json(open));
        ctx.set(LIVE_CUT_KEY, Json(cut));
        Ok(())
    }

    /// The live events numbered above `after` (the oldest may have been
    /// dropped: numbers are per session, so a gap shows it).
    #[handler]
    async fn read_live(
        &self,
        ctx: SharedObjectContext<'_>,
        after: Json<u64>,
    ) -> Result<Json<EventPage>, HandlerError> {
        Ok(Json(LIVE_RING.read(&ctx, after.0).await?))
    }

    /// The events numbered above `after` (the oldest may have been dropped).
    #[handler]
    async fn read(
        &self,
        ctx: SharedObjectContext<'_>,
        after: Json<u64>,
    ) -> Result<Json<EventPage>, HandlerError> {
        Ok(Json(EVENTS_RING.read(&ctx, after.0).await?))
    }
}
