//! The agent's working context and message queues.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use llm_core::{Context, Message};

use crate::tool::AgentTool;

/// The transcript and tools an agent works with.
#[derive(Debug, Clone, Default)]
pub struct AgentContext {
    /// System prompt.
    pub system_prompt: Option<String>,
    /// The transcript.
    pub messages: Vec<Message>,
    /// Tools, in the order they are offered to the model (plan them with `tool-planner`).
    pub tools: Vec<AgentTool>,
}

impl AgentContext {
    /// The provider-facing context (tool definitions only).
    pub fn to_llm_context(&self) -> Context {
        Context {
            system_prompt: self.system_prompt.clone(),
            messages: self.messages.clone(),
            tools: self.tools.iter().map(|t| t.tool.clone()).collect(),
        }
    }

    /// The tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&AgentTool> {
        self.tools.iter().find(|t| t.tool.name == name)
    }
}

/// A shared queue of messages to inject into a running agent (steering or
/// follow-up). Clones share the queue.
#[derive(Debug, Clone, Default)]
pub struct MessageQueue {
    inner: Arc<Mutex<VecDeque<Message>>>,
}

impl MessageQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues a message.
    pub fn push(&self, message: Message) {
        if let Ok(mut q) = self.inner.lock() {
            q.push_back(message);
        }
    }

    /// Takes every queued message.
    pub fn drain(&self) -> Vec<Message> {
        self.inner.lock().map(|mut q| q.drain(..).collect()).unwrap_or_default()
    }

    /// Number of queued messages.
    pub fn len(&self) -> usize {
        self.inner.lock().map(|q| q.len()).unwrap_or(0)
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
