//! A scripted in-memory provider for tests: canned turns streamed through the
//! same assembler as real providers.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::error::{Error, ErrorKind};
use crate::event::Delta;
use crate::options::StreamOptions;
use crate::provider::Provider;
use crate::stream::AssistantStream;
use crate::types::{AssistantContent, AssistantMessage, Context, Model};

/// One canned assistant response, as the deltas a provider would produce.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedTurn {
    /// The deltas, ending with [`Delta::Done`] or [`Delta::Error`].
    pub deltas: Vec<Delta>,
}

impl ScriptedTurn {
    /// A turn from raw deltas.
    pub fn deltas(deltas: Vec<Delta>) -> Self {
        ScriptedTurn { deltas }
    }

    /// A turn that replays `message`: text and thinking as one delta per block,
    /// tool-call arguments split into fragments of `fragment_len` bytes (at char
    /// boundaries), then usage, the stop reason and `done` (or `error` when the
    /// message's stop reason is `error`/`aborted`).
    pub fn from_message(message: &AssistantMessage, fragment_len: usize) -> Self {
        let mut deltas = Vec::new();
        for (i, block) in message.content.iter().enumerate() {
            let key = i as u64;
            match block {
                AssistantContent::Text(t) => {
                    deltas.push(Delta::Text { key, text: t.text.clone() });
                    if let Some(sig) = &t.text_signature {
                        deltas.push(Delta::TextSignature { key, signature: sig.clone() });
                    }
                }
                AssistantContent::Thinking(t) => {
                    if t.redacted {
                        deltas.push(Delta::RedactedThinking {
                            key,
                            data: t.thinking_signature.clone().unwrap_or_default(),
                        });
                    } else {
                        deltas.push(Delta::Thinking { key, text: t.thinking.clone() });
                        if let Some(sig) = &t.thinking_signature {
                            deltas.push(Delta::ThinkingSignature { key, signature: sig.clone() });
                        }
                    }
                }
                AssistantContent::ProviderContent(content) => {
                    deltas.push(Delta::ProviderContent { key, content: content.clone() });
                }
                AssistantContent::ToolCall(call) => {
                    deltas.push(Delta::ToolCallStart {
                        key,
                        id: call.id.clone(),
                        name: call.name.clone(),
                        arguments: None,
                    });
                    if call.thought_signature.is_some() {
                        deltas.push(Delta::ToolCallMeta {
                            key,
                            id: None,
                            name: None,
                            thought_signature: call.thought_signature.clone(),
                        });
                    }
                    let args = serde_json::to_string(&call.arguments).unwrap_or_default();
                    for fragment in split_at_chars(&args, fragment_len.max(1)) {
                        deltas.push(Delta::ToolCallArgs { key, fragment: fragment.to_owned() });
                    }
                }
            }
            deltas.push(Delta::BlockEnd { key });
        }
        deltas.push(Delta::Usage(message.usage));
        match message.stop_reason {
            crate::types::StopReason::Error | crate::types::StopReason::Aborted => {
                let kind = if message.stop_reason == crate::types::StopReason::Aborted {
                    ErrorKind::Aborted
                } else {
                    ErrorKind::Provider
                };
                let text = message.error_message.clone().unwrap_or_else(|| "scripted error".into());
                deltas.push(Delta::Error(Error::new(kind, message.provider.clone(), text)));
            }
            reason => {
                deltas.push(Delta::Stop(reason));
                deltas.push(Delta::Done);
            }
        }
        ScriptedTurn { deltas }
    }
}

fn split_at_chars(s: &str, len: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let mut cut = len.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (head, tail) = rest.split_at(cut);
        out.push(head);
        rest = tail;
    }
    out
}

#[derive(Debug, Default)]
struct State {
    turns: VecDeque<ScriptedTurn>,
    requests: Vec<Context>,
}

/// A [`Provider`] that answers each request with the next [`ScriptedTurn`] and
/// records every context it was sent. Clones share the script.
#[derive(Debug, Clone)]
pub struct ScriptedProvider {
    api: String,
    state: Arc<Mutex<State>>,
}

impl ScriptedProvider {
    /// A provider serving `api` with these turns, in order.
    pub fn new(api: impl Into<String>, turns: impl IntoIterator<Item = ScriptedTurn>) -> Self {
        ScriptedProvider {
            api: api.into(),
            state: Arc::new(Mutex::new(State {
                turns: turns.into_iter().collect(),
                requests: Vec::new(),
            })),
        }
    }

    /// Appends a turn to the script.
    pub fn push_turn(&self, turn: ScriptedTurn) {
        if let Ok(mut s) = self.state.lock() {
            s.turns.push_back(turn);
        }
    }

    /// The contexts received so far.
    pub fn requests(&self) -> Vec<Context> {
        self.state.lock().map(|s| s.requests.clone()).unwrap_or_default()
    }

    /// Turns not yet served.
    pub fn remaining(&self) -> usize {
        self.state.lock().map(|s| s.turns.len()).unwrap_or(0)
    }
}

impl Provider for ScriptedProvider {
    fn api(&self) -> &str {
        &self.api
    }

    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        let turn = match self.state.lock() {
            Ok(mut s) => {
                s.requests.push(context.clone());
                s.turns.pop_front()
            }
            Err(_) => None,
        };
        match turn {
            Some(turn) => AssistantStream::new(
                model,
                &options.cancel,
                futures_util::stream::iter(turn.deltas),
            ),
            None => AssistantStream::from_error(
                model,
                Error::new(
                    ErrorKind::InvalidRequest,
                    "scripted",
                    "Scripted provider has no more turns",
                ),
            ),
        }
    }
}
