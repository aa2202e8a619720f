//! Agent tools: a [`Tool`] definition plus the code that runs it.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::future::BoxFuture;
use llm_core::{CancellationToken, Tool, UserContent};
use serde_json::Value;

use crate::event::AgentEvent;
use crate::queue::EventQueue;

/// How a tool's calls run within a batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionMode {
    /// Concurrently with the other calls of the batch.
    #[default]
    Parallel,
    /// One at a time; one sequential tool makes the whole batch sequential.
    Sequential,
}

/// What a tool returns.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolOutput {
    /// Text and images sent back to the model.
    pub content: Vec<UserContent>,
    /// Details for the application; never sent to the model.
    pub details: Option<Value>,
    /// Ask the loop to stop after this batch (only if every call of the batch asks).
    pub terminate: bool,
}

impl ToolOutput {
    /// A text result.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput { content: vec![UserContent::text(text)], details: None, terminate: false }
    }

    /// Sets `details`.
    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// Sets `terminate`.
    #[must_use]
    pub fn terminating(mut self) -> Self {
        self.terminate = true;
        self
    }
}

/// A tool failure; its message becomes the error result's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl From<String> for ToolError {
    fn from(s: String) -> Self {
        ToolError(s)
    }
}

impl From<&str> for ToolError {
    fn from(s: &str) -> Self {
        ToolError(s.to_owned())
    }
}

/// Sends progress updates for one running call (`tool_execution_update` events).
///
/// The loop closes the sink before it emits the call's `ToolExecutionEnd`, also
/// when the call is aborted or its future dropped; updates sent after that are
/// ignored, so no update ever follows the call's end event. Sending and closing
/// take the same lock, so an update from another thread cannot slip in between.
#[derive(Clone)]
pub struct ProgressSink {
    pub(crate) call_id: Arc<str>,
    pub(crate) tool_name: Arc<str>,
    pub(crate) slot: Arc<Mutex<Option<Delivery>>>,
}

/// Where a sink's updates go: the run's event queue, or another driver's callback.
pub(crate) enum Delivery {
    Queue(EventQueue),
    Callback { deliver: Arc<ProgressCallback>, left: usize },
}

/// What [`ProgressSink::from_callback`] calls with each update.
type ProgressCallback = dyn Fn(ToolOutput) + Send + Sync;

impl fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProgressSink").field("call_id", &self.call_id).finish_non_exhaustive()
    }
}

impl ProgressSink {
    /// A sink that drops every update (for calling a tool outside the loop).
    pub fn disconnected() -> Self {
        ProgressSink { call_id: Arc::from(""), tool_name: Arc::from(""), slot: Arc::default() }
    }

    pub(crate) fn connected(call_id: &str, tool_name: &str, tx: EventQueue) -> Self {
        ProgressSink {
            call_id: Arc::from(call_id),
            tool_name: Arc::from(tool_name),
            slot: Arc::new(Mutex::new(Some(Delivery::Queue(tx)))),
        }
    }

    /// A sink that hands each update to `deliver`, for a driver other than this
    /// crate's loop (a durable one forwards them to its followers).
    ///
    /// `deliver` runs on the tool's thread while the sink is locked, so it must
    /// not block (queue the update and return). It is called at most
    /// `max_updates` times (later updates are ignored, so a chatty tool cannot
    /// flood the driver), never after [`close`](Self::close), and a panic in it
    /// closes the sink instead of reaching the tool.
    pub fn from_callback(
        max_updates: usize,
        deliver: impl Fn(ToolOutput) + Send + Sync + 'static,
    ) -> Self {
        ProgressSink {
            call_id: Arc::from(""),
            tool_name: Arc::from(""),
            slot: Arc::new(Mutex::new(Some(Delivery::Callback {
                deliver: Arc::new(deliver),
                left: max_updates,
            }))),
        }
    }

    /// Reports partial progress; ignored once the call has ended.
    pub fn update(&self, partial: ToolOutput) {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.as_mut() {
            Some(Delivery::Queue(tx)) => tx.send(AgentEvent::ToolExecutionUpdate {
                tool_call_id: self.call_id.to_string(),
                tool_name: self.tool_name.to_string(),
                partial,
            }),
            Some(Delivery::Callback { deliver, left }) if *left > 0 => {
                *left -= 1;
                let deliver = deliver.clone();
                let call = std::panic::AssertUnwindSafe(move || deliver(partial));
                if std::panic::catch_unwind(call).is_err() {
                    slot.take();
                }
            }
            Some(Delivery::Callback { .. }) | None => {}
        }
    }

    /// Whether updates are still delivered.
    pub fn is_open(&self) -> bool {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner).is_some()
    }

    /// Stops delivery for good (every clone shares the state). The loop closes
    /// a call's sink before its end event; a driver with a
    /// [`from_callback`](Self::from_callback) sink closes it when the call ends,
    /// so no update follows the result (an update in flight on another thread
    /// finishes first: the two take the same lock).
    pub fn close(&self) {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner).take();
    }
}

/// One tool invocation as the executor sees it.
#[derive(Debug, Clone)]
pub struct ToolInvocation {
    /// The call id.
    pub call_id: String,
    /// Validated (and coerced) arguments.
    pub arguments: Value,
    /// Cancelled when the run is aborted; long-running tools should watch it.
    pub cancel: CancellationToken,
    /// Progress updates.
    pub progress: ProgressSink,
    /// Set by a durable driver: the same for every retry of this call's step and
    /// unique to this request of the session (a provider may reuse call ids across
    /// turns), so a tool sends it to outside systems to apply its effect once.
    /// `None` in process, where a call runs once.
    pub idempotency_key: Option<String>,
}

/// Runs a tool.
pub trait ToolExecutor: Send + Sync {
    /// Executes one call.
    fn execute(
        &self,
        invocation: ToolInvocation,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>>;
}

impl<F, Fut> ToolExecutor for F
where
    F: Fn(ToolInvocation) -> Fut + Send + Sync,
    Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
{
    fn execute(
        &self,
        invocation: ToolInvocation,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        Box::pin(self(invocation))
    }
}

/// Maps raw arguments before validation (compatibility shims such as renamed fields).
pub type PrepareArguments = Arc<dyn Fn(Value) -> Result<Value, ToolError> + Send + Sync>;

/// A tool the agent can run.
#[derive(Clone)]
pub struct AgentTool {
    /// Name, description and JSON Schema parameters; shared, so cloning a tool
    /// (once per run, for each run's context) never copies its schema.
    pub tool: Arc<Tool>,
    /// Label for user interfaces.
    pub label: String,
    /// Parallel (default) or sequential.
    pub execution_mode: ExecutionMode,
    /// Optional argument shim run before validation.
    pub prepare_arguments: Option<PrepareArguments>,
    /// The tool blocks its thread (CPU work, blocking IO): it runs on tokio's
    /// blocking pool instead of a task, so it cannot stall the other tools.
    pub blocking: bool,
    /// The code.
    pub executor: Arc<dyn ToolExecutor>,
}

impl fmt::Debug for AgentTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentTool")
            .field("name", &self.tool.name)
            .field("execution_mode", &self.execution_mode)
            .field("blocking", &self.blocking)
            .finish_non_exhaustive()
    }
}

impl AgentTool {
    /// A parallel tool from a definition and an async function.
    pub fn new(tool: Tool, executor: impl ToolExecutor + 'static) -> Self {
        AgentTool {
            label: tool.name.clone(),
            tool: Arc::new(tool),
            execution_mode: ExecutionMode::Parallel,
            prepare_arguments: None,
            blocking: false,
            executor: Arc::new(executor),
        }
    }

    /// A tool whose parameters come from `T`'s JSON Schema; the function receives
    /// the validated arguments deserialized into `T`.
    pub fn typed<T, F, Fut>(name: &str, description: &str, f: F) -> Self
    where
        T: schemars::JsonSchema + serde::de::DeserializeOwned + Send + 'static,
        F: Fn(T, ToolInvocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        let tool = llm_core::typed::tool_for::<T>(name, description);
        let tool_name = name.to_owned();
        let f = Arc::new(f);
        AgentTool::new(tool, move |inv: ToolInvocation| {
            let parsed = llm_core::typed::parse_arguments::<T>(&tool_name, &inv.arguments);
            let f = f.clone();
            async move {
                match parsed {
                    Ok(args) => f(args, inv).await,
                    Err(e) => Err(ToolError(e.to_string())),
                }
            }
        })
    }

    /// Sets the execution mode.
    #[must_use]
    pub fn with_mode(mut self, mode: ExecutionMode) -> Self {
        self.execution_mode = mode;
        self
    }

    /// Declares the tool blocking: it runs on the blocking pool.
    #[must_use]
    pub fn blocking(mut self) -> Self {
        self.blocking = true;
        self
    }

    /// Sets the label.
    #[must_use]
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Sets the argument shim.
    #[must_use]
    pub fn with_prepare_arguments(
        mut self,
        f: impl Fn(Value) -> Result<Value, ToolError> + Send + Sync + 'static,
    ) -> Self {
        self.prepare_arguments = Some(Arc::new(f));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counting() -> (ProgressSink, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        let sink = ProgressSink::from_callback(3, move |partial: ToolOutput| {
            let text: String = partial
                .content
                .iter()
                .filter_map(|c| match c {
                    UserContent::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect();
            if text == "boom" {
                panic!("the callback broke");
            }
            into.lock().unwrap_or_else(PoisonError::into_inner).push(text);
        });
        (sink, seen)
    }

    fn seen(seen: &Mutex<Vec<String>>) -> Vec<String> {
        seen.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    #[test]
    fn a_callback_sink_delivers_at_most_its_bound_and_nothing_after_close() {
        let (sink, got) = counting();
        for i in 0..5 {
            sink.update(ToolOutput::text(format!("step {i}")));
        }
        assert_eq!(seen(&got), ["step 0", "step 1", "step 2"]);
        let (sink, got) = counting();
        sink.update(ToolOutput::text("before"));
        sink.clone().close();
        sink.update(ToolOutput::text("after"));
        assert_eq!(seen(&got), ["before"]);
        assert!(!sink.is_open());
    }

    #[test]
    fn a_panicking_callback_closes_the_sink_and_spares_the_tool() {
        let (sink, got) = counting();
        sink.update(ToolOutput::text("first"));
        sink.update(ToolOutput::text("boom"));
        sink.update(ToolOutput::text("later"));
        assert_eq!(seen(&got), ["first"]);
        assert!(!sink.is_open());
    }
}
