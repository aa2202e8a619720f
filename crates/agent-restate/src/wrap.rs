//! Wrappers that route an agent's effects through a [`Journal`]: a provider
//! whose model requests are steps, and tools whose executions are steps.
//! They sit on agent-core's public surface (`Provider`, `AgentTool`), so the
//! loop itself is unchanged.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_core::{AgentTool, ToolError, ToolInvocation, ToolOutput};
use futures_util::FutureExt;
use llm_core::raw::scripted::ScriptedTurn;
use llm_core::{
    AssistantMessage, AssistantStream, Context, Error, ErrorKind, Model, Provider, StreamOptions,
    UserContent, raw::Delta,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::journal::{Journal, StepError, idempotency_key, step, with_idempotency_key};

/// A [`Provider`] whose every request is one journaled step (`model-request-<n>`)
/// recording the final [`AssistantMessage`].
///
/// On replay the recorded message is streamed back without a request.
/// Streaming is coarse: the message's events come when the step is done, not
/// token by token.
/// Create one per run: `<n>` counts the requests of that run.
pub struct JournaledProvider {
    inner: Arc<dyn Provider>,
    journal: Arc<dyn Journal>,
    requests: AtomicU64,
}

impl std::fmt::Debug for JournaledProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournaledProvider")
            .field("api", &self.inner.api())
            .field("requests", &self.requests.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl JournaledProvider {
    /// Wraps `inner`; its requests go through `journal`.
    pub fn new(inner: Arc<dyn Provider>, journal: Arc<dyn Journal>) -> Self {
        JournaledProvider { inner, journal, requests: AtomicU64::new(0) }
    }
}

impl Provider for JournaledProvider {
    fn api(&self) -> &str {
        self.inner.api()
    }

    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        if !self.journal.is_recording() {
            return self.inner.stream(model, context, options);
        }
        let name = format!("model-request-{n}");
        let inner = self.inner.clone();
        let journal = self.journal.clone();
        let (step_model, step_context, step_options) =
            (model.clone(), context.clone(), options.clone());
        let provider = model.provider.clone();
        let recorded = async move {
            let result = step(&journal, name, move || async move {
                // A panicking provider is a failed attempt (a durable journal retries it).
                let request = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    inner.stream(&step_model, &step_context, &step_options).result()
                }));
                match request {
                    Ok(fut) => AssertUnwindSafe(fut)
                        .catch_unwind()
                        .await
                        .map_err(|panic| provider_panic(panic.as_ref())),
                    Err(panic) => Err(provider_panic(panic.as_ref())),
                }
            })
            .await;
            message_deltas(result, &provider)
        };
        AssistantStream::new(
            model,
            &options.cancel,
            futures_util::stream::once(recorded).flat_map(futures_util::stream::iter),
        )
    }
}

use futures_util::StreamExt;

/// The deltas that rebuild a recorded message (or the step's failure).
fn message_deltas(result: Result<AssistantMessage, StepError>, provider: &str) -> Vec<Delta> {
    match result {
        Ok(message) => {
            let mut deltas = vec![Delta::Metadata {
                response_id: message.response_id.clone(),
                response_model: message.response_model.clone(),
            }];
            // One fragment per tool call: the arguments are already whole.
            deltas.extend(ScriptedTurn::from_message(&message, usize::MAX).deltas);
            deltas
        }
        Err(StepError::Cancelled { .. }) => vec![Delta::Error(Error::aborted(provider))],
        Err(e) => vec![Delta::Error(Error::new(ErrorKind::Provider, provider, e.to_string()))],
    }
}

/// A tool execution's recorded result: the output, or the tool's error text.
#[derive(Debug, Serialize, Deserialize)]
struct RecordedToolResult {
    content: Vec<UserContent>,
    details: Option<Value>,
    terminate: bool,
    /// `Some`: the tool failed (or panicked) with this text.
    error: Option<String>,
}

/// `tool` with every execution as one journaled step (`tool <name> <call id>`).
///
/// The execution runs with [`crate::current_idempotency_key`] set to
/// `<session_id>/<call id>`.
/// A tool error or panic is a result like any other: recorded, never retried.
pub fn journaled_tool(tool: AgentTool, journal: Arc<dyn Journal>, session_id: &str) -> AgentTool {
    let inner = tool.executor.clone();
    let tool_name = tool.tool.name.clone();
    let session_id = session_id.to_owned();
    let executor = move |mut invocation: ToolInvocation| {
        let inner = inner.clone();
        let journal = journal.clone();
        let name = format!("tool {tool_name} {}", invocation.call_id);
        let key = idempotency_key(&session_id, &invocation.call_id);
        let recording = journal.is_recording();
        invocation.idempotency_key = Some(key.clone());
        async move {
            if !recording {
                // Nothing to record: the loop contains panics of a direct call itself.
                return with_idempotency_key(key, inner.execute(invocation)).await;
            }
            let recorded: Result<RecordedToolResult, StepError> =
                step(&journal, name, move || async move {
                    let run =
                        std::panic::catch_unwind(AssertUnwindSafe(|| inner.execute(invocation)));
                    let outcome = match run {
                        Ok(fut) => {
                            with_idempotency_key(key, AssertUnwindSafe(fut).catch_unwind()).await
                        }
                        Err(panic) => Err(panic),
                    };
                    Ok(match outcome {
                        Ok(Ok(out)) => RecordedToolResult {
                            content: out.content,
                            details: out.details,
                            terminate: out.terminate,
                            error: None,
                        },
                        Ok(Err(e)) => RecordedToolResult::error(e.0),
                        Err(panic) => RecordedToolResult::error(panic_text(panic.as_ref())),
                    })
                })
                .await;
            match recorded {
                Ok(RecordedToolResult { error: Some(e), .. }) => Err(ToolError(e)),
                Ok(r) => Ok(ToolOutput {
                    content: r.content,
                    details: r.details,
                    terminate: r.terminate,
                }),
                Err(e) => Err(ToolError(e.to_string())),
            }
        }
    };
    AgentTool { executor: Arc::new(executor), ..tool }
}

impl RecordedToolResult {
    fn error(text: String) -> Self {
        RecordedToolResult {
            content: Vec::new(),
            details: None,
            terminate: false,
            error: Some(text),
        }
    }
}

fn provider_panic(payload: &(dyn std::any::Any + Send)) -> String {
    format!("Provider panicked: {}", payload_text(payload))
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    format!("Tool panicked: {}", payload_text(payload))
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}
