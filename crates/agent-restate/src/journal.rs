//! The step interface: every effect of an agent run (a model request, a tool
//! execution) is a named step whose result a [`Journal`] records, so that a
//! replayed run gets the recorded result instead of repeating the effect.

use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The effect of one step: runs at most once per journal entry.
///
/// `Ok` is the result to record.
/// `Err` is a transient failure: a durable journal retries the step (it records nothing),
/// the in-process journal hands the failure back to the caller.
pub type Effect = Box<dyn FnOnce() -> BoxFuture<'static, Result<Value, String>> + Send>;

/// Why a step has no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// The run was cancelled (Restate's cancel) before or while the step ran.
    #[error("step {step}: cancelled")]
    Cancelled {
        /// The step's name.
        step: String,
    },
    /// The effect failed and the journal gave up on it.
    #[error("step {step} failed: {message}")]
    Failed {
        /// The step's name.
        step: String,
        /// What went wrong.
        message: String,
    },
    /// The recorded result does not decode as the step's type (the code changed
    /// between recording and replay).
    #[error("step {step}: recorded result does not decode: {message}")]
    Decode {
        /// The step's name.
        step: String,
        /// The serde error.
        message: String,
    },
}

/// Runs named effects once and returns their recorded results on replay.
///
/// Steps of one run must be issued in a deterministic order: a replaying journal
/// matches results to steps by position.
pub trait Journal: Send + Sync {
    /// Runs `effect` as the step `name`, or returns its recorded result.
    fn step(&self, name: String, effect: Effect) -> BoxFuture<'static, Result<Value, StepError>>;

    /// Whether results are recorded; the wrappers call a journal that records
    /// nothing directly, without turning results into JSON and back.
    fn is_recording(&self) -> bool {
        true
    }
}

/// The in-process journal: runs every effect directly and records nothing (a
/// process crash loses the run, as without a journal).
#[derive(Debug, Clone, Copy, Default)]
pub struct PassThrough;

impl Journal for PassThrough {
    fn step(&self, name: String, effect: Effect) -> BoxFuture<'static, Result<Value, StepError>> {
        Box::pin(async move {
            effect().await.map_err(|message| StepError::Failed { step: name, message })
        })
    }

    fn is_recording(&self) -> bool {
        false
    }
}

/// Runs a typed step: `effect`'s value is recorded as JSON and decoded again,
/// on the first run as on replay (so both paths see the same value).
pub async fn step<T, F, Fut>(
    journal: &Arc<dyn Journal>,
    name: String,
    effect: F,
) -> Result<T, StepError>
where
    T: Serialize + DeserializeOwned + Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, String>> + Send + 'static,
{
    let erased: Effect = Box::new(move || {
        Box::pin(async move {
            let value = effect().await?;
            serde_json::to_value(value).map_err(|e| format!("result does not serialize: {e}"))
        })
    });
    let recorded = journal.step(name.clone(), erased).await?;
    serde_json::from_value(recorded)
        .map_err(|e| StepError::Decode { step: name, message: e.to_string() })
}

tokio::task_local! {
    static IDEMPOTENCY_KEY: String;
}

/// The idempotency key of the tool call whose effect is running, if any: the
/// session id and the tool call id, stable across replays and retries of the
/// step. Tools that talk to outside systems send it along (e.g. as an
/// `Idempotency-Key` header) so a retried step does not repeat the outside effect.
/// [`crate::journaled_tool`] also puts the key in `ToolInvocation::idempotency_key`,
/// where the durable session puts its keys too; a tool should read it there.
pub fn current_idempotency_key() -> Option<String> {
    IDEMPOTENCY_KEY.try_with(Clone::clone).ok()
}

/// The idempotency key for `call_id` in `session_id`.
pub fn idempotency_key(session_id: &str, call_id: &str) -> String {
    format!("{session_id}/{call_id}")
}

/// Runs `fut` with `key` as the [`current_idempotency_key`].
pub(crate) async fn with_idempotency_key<F: Future>(key: String, fut: F) -> F::Output {
    IDEMPOTENCY_KEY.scope(key, fut).await
}
