//! The agent's working context and message queues.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use llm_core::Message;

use crate::run::AgentError;
use crate::tool::AgentTool;

/// The transcript and tools an agent works with. Serializes the tools as
/// their definitions (name, description, parameters).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct AgentContext {
    /// System prompt.
    pub system_prompt: Option<String>,
    /// The transcript.
    pub messages: Vec<Message>,
    /// Tools, in the order they are offered to the model; build them from a
    /// plan with [`crate::ToolCatalog`]. Names must be unique.
    #[serde(serialize_with = "serialize_tools")]
    pub tools: Vec<AgentTool>,
}

fn serialize_tools<S: serde::Serializer>(tools: &[AgentTool], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(tools.iter().map(|t| t.tool.as_ref()))
}

impl AgentContext {
    /// The provider-facing context (a copy of the transcript and tool definitions).
    pub fn to_llm_context(&self) -> llm_core::Context {
        llm_core::Context {
            system_prompt: self.system_prompt.clone(),
            messages: self.messages.clone(),
            tools: self.tools.iter().map(|t| t.tool.as_ref().clone()).collect(),
        }
    }

    /// The tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&AgentTool> {
        self.tools.iter().find(|t| t.tool.name == name)
    }

    /// Checks that tool names are unique (the planner's rule, as OpenClaw's):
    /// two tools with one name would both be sent and calls would be ambiguous.
    pub fn check_tools(&self) -> Result<(), AgentError> {
        check_unique_names(&self.tools)
    }
}

pub(crate) fn check_unique_names(tools: &[AgentTool]) -> Result<(), AgentError> {
    let mut seen = HashSet::with_capacity(tools.len());
    match tools.iter().find(|t| !seen.insert(t.tool.name.as_str())) {
        Some(dup) => Err(AgentError::DuplicateToolName { name: dup.tool.name.clone() }),
        None => Ok(()),
    }
}

/// How many queued messages one poll delivers (OpenClaw's queue modes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueMode {
    /// The oldest message only (OpenClaw's default for both queues).
    #[default]
    OneAtATime,
    /// Every queued message.
    All,
}

/// A queue of messages to inject into one running agent (steering or
/// follow-up). Every run owns its own queues ([`crate::AgentRun::steering`]);
/// clones share the queue, so a tool or another task can push into it.
#[derive(Debug, Clone, Default)]
pub struct MessageQueue {
    inner: Arc<Mutex<VecDeque<Message>>>,
}

impl MessageQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Message>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a message.
    pub fn push(&self, message: Message) {
        self.lock().push_back(message);
    }

    /// Takes the messages one poll delivers under `mode`.
    pub fn take(&self, mode: QueueMode) -> Vec<Message> {
        let mut q = self.lock();
        match mode {
            QueueMode::OneAtATime => q.pop_front().into_iter().collect(),
            QueueMode::All => q.drain(..).collect(),
        }
    }

    /// Takes every queued message.
    pub fn drain(&self) -> Vec<Message> {
        self.take(QueueMode::All)
    }

    /// Number of queued messages.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
