//! The neutral data model: models, messages, content blocks, tools, usage.
//!
//! Field names on the wire (serde) follow OpenClaw's JSON transcript format
//! (`toolCallId`, `stopReason`, ...) so transcripts interoperate.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An input modality a model accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputModality {
    /// Text input.
    Text,
    /// Image input.
    Image,
}

/// Prices in dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModelCost {
    /// Non-cached input tokens.
    pub input: f64,
    /// Output tokens (including reasoning).
    pub output: f64,
    /// Cache reads.
    pub cache_read: f64,
    /// Cache writes.
    pub cache_write: f64,
}

/// A model descriptor: which API serves it, where, and what it can do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Model {
    /// Model id sent to the provider (`claude-sonnet-4-5`, `gpt-5`, ...).
    pub id: String,
    /// Human-readable name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// API id (each provider crate exports its own as `API`); selects the provider implementation.
    pub api: String,
    /// Provider name (`anthropic`, `openai`, `openrouter`, ...).
    pub provider: String,
    /// Base URL of the API, without the endpoint path.
    pub base_url: String,
    /// Whether the model supports reasoning / thinking.
    pub reasoning: bool,
    /// Accepted input modalities.
    pub input: Vec<InputModality>,
    /// Prices per million tokens.
    pub cost: ModelCost,
    /// Context window in tokens.
    pub context_window: u64,
    /// Maximum output tokens.
    pub max_tokens: u64,
    /// Extra headers sent with every request for this model.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Provider-specific compatibility flags. Each provider crate documents and
    /// parses its own shape; llm-core knows nothing about them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compat: Option<Value>,
}

impl Model {
    /// [`Model::compat`] read into a provider's typed flags `T` (a `serde` struct). Absent or
    /// `null` gives `T::default()`; a value that does not fit `T` is an `invalid_request` error
    /// of `provider`, not retryable, the same for every provider: a mistyped flag quietly
    /// dropped would send a request the caller did not configure. The message names the
    /// first key that does not fit.
    pub fn typed_compat<T: serde::de::DeserializeOwned + Default>(
        &self,
        provider: &str,
    ) -> Result<T, crate::Error> {
        match &self.compat {
            None | Some(Value::Null) => Ok(T::default()),
            Some(value) => T::deserialize(value).map_err(|e| {
                // serde's error names no path: the first key that fails on its own does.
                let field = value.as_object().and_then(|map| {
                    map.iter()
                        .map(|(k, v)| {
                            (k, Value::Object([(k.clone(), v.clone())].into_iter().collect()))
                        })
                        .find(|(_, alone)| T::deserialize(alone).is_err())
                        .map(|(k, _)| format!("{k}: "))
                });
                let field = field.unwrap_or_default();
                crate::Error::new(
                    crate::ErrorKind::InvalidRequest,
                    provider,
                    format!("Invalid {provider} compat for model {}: {field}{e}", self.id),
                )
                .with_retryable(false)
            }),
        }
    }

    /// Whether the model accepts image input.
    pub fn supports_images(&self) -> bool {
        self.input.contains(&InputModality::Image)
    }
}

/// A tool the model may call: name, description and JSON Schema parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Unique tool name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// Everything a provider needs besides the model and options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Context {
    /// System prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The transcript.
    pub messages: Vec<Message>,
    /// Tools visible to the model, in request order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
}

/// Plain text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextContent {
    /// The text.
    pub text: String,
    /// Opaque provider metadata (Responses message id, Google thought signature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_signature: Option<String>,
}

/// Model reasoning.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingContent {
    /// The reasoning text (may be empty when redacted).
    pub thinking: String,
    /// Opaque replay data (Anthropic signature, Responses reasoning item, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_signature: Option<String>,
    /// The signature holds an encrypted payload and the text is not readable.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
}

/// A base64 image.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// Base64 data.
    pub data: String,
    /// MIME type (`image/png`, ...).
    pub mime_type: String,
}

/// A tool call made by the assistant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Provider-assigned (or generated) call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Parsed arguments; always a JSON object.
    pub arguments: Value,
    /// Google's per-part thought signature (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    /// The arguments did not form complete JSON by the end of the stream (cut
    /// off, then repaired into an object): the call must not run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub arguments_incomplete: bool,
}

/// A provider-specific block that clawcall keeps but does not interpret: Anthropic
/// server-side tool blocks (`server_tool_use`, `web_search_tool_result`, ...), `compaction`,
/// Responses output items such as `apply_patch_call`.
///
/// It is never a tool call: the agent loop never executes it. Like a thinking signature
/// (other models cannot read it), it is replayed unchanged to the model that produced it (same
/// provider, API and model id) and dropped for every other model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderContent {
    /// The block's type on the wire (`server_tool_use`, `apply_patch_call`, ...).
    pub wire_type: String,
    /// The whole block as the provider sent it (streamed parts merged in), sent back as is.
    pub data: Value,
}

/// A block of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum AssistantContent {
    /// Text.
    Text(TextContent),
    /// Reasoning.
    Thinking(ThinkingContent),
    /// A tool call.
    ToolCall(ToolCall),
    /// An opaque provider block (see [`ProviderContent`]).
    ProviderContent(ProviderContent),
}

/// A block of a user message or tool result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum UserContent {
    /// Text.
    Text(TextContent),
    /// An image.
    Image(ImageContent),
}

impl UserContent {
    /// A plain text block.
    pub fn text(text: impl Into<String>) -> Self {
        UserContent::Text(TextContent { text: text.into(), text_signature: None })
    }
}

/// User message content: a plain string or blocks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserMessageContent {
    /// A plain string.
    Text(String),
    /// Text and image blocks.
    Blocks(Vec<UserContent>),
}

impl UserMessageContent {
    /// The content as blocks (a plain string becomes one text block).
    pub fn blocks(&self) -> Vec<UserContent> {
        match self {
            UserMessageContent::Text(t) => vec![UserContent::text(t.clone())],
            UserMessageContent::Blocks(b) => b.clone(),
        }
    }
}

/// A user turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserMessage {
    /// Content.
    pub content: UserMessageContent,
    /// Unix time in milliseconds.
    #[serde(default)]
    pub timestamp: u64,
}

/// Why the assistant stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// Natural end of turn.
    #[default]
    Stop,
    /// Output token limit reached.
    Length,
    /// Stopped to let tools run.
    ToolUse,
    /// The provider or transport failed.
    Error,
    /// Cancelled by the caller.
    Aborted,
}

impl StopReason {
    /// The OpenClaw name (`stop`, `length`, `toolUse`, `error`, `aborted`).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Stop => "stop",
            StopReason::Length => "length",
            StopReason::ToolUse => "toolUse",
            StopReason::Error => "error",
            StopReason::Aborted => "aborted",
        }
    }
}

/// Dollar cost of a response, per component.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Cost {
    /// Input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Cache reads.
    pub cache_read: f64,
    /// Cache writes.
    pub cache_write: f64,
    /// Sum of the four.
    pub total: f64,
}

/// Token usage. `input` never includes cached tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Usage {
    /// Non-cached input tokens.
    pub input: u64,
    /// Output tokens (reasoning included).
    pub output: u64,
    /// Tokens read from the prompt cache.
    pub cache_read: u64,
    /// Tokens written to the prompt cache (all retentions).
    pub cache_write: u64,
    /// Sum of the four.
    pub total_tokens: u64,
    /// Cost computed from the model's prices.
    pub cost: Cost,
}

/// Sums two responses' usage (a run's total): counts saturate, costs add.
impl std::ops::AddAssign<&Usage> for Usage {
    fn add_assign(&mut self, other: &Usage) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
        self.cost.input += other.cost.input;
        self.cost.output += other.cost.output;
        self.cost.cache_read += other.cost.cache_read;
        self.cost.cache_write += other.cost.cache_write;
        self.cost.total += other.cost.total;
    }
}

impl Usage {
    /// Recomputes `total_tokens` and `cost` from the token counts and the model's prices.
    pub fn recompute(&mut self, prices: &ModelCost) {
        // Saturating: the counts come from the wire, and a huge one must not panic.
        self.total_tokens = self
            .input
            .saturating_add(self.output)
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write);
        let per = |price: f64, tokens: u64| price / 1e6 * tokens as f64;
        self.cost.input = per(prices.input, self.input);
        self.cost.output = per(prices.output, self.output);
        self.cost.cache_read = per(prices.cache_read, self.cache_read);
        self.cost.cache_write = per(prices.cache_write, self.cache_write);
        self.cost.total =
            self.cost.input + self.cost.output + self.cost.cache_read + self.cost.cache_write;
    }
}

/// An assistant turn with its metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// Content blocks in order.
    pub content: Vec<AssistantContent>,
    /// API id that produced it.
    pub api: String,
    /// Provider name.
    pub provider: String,
    /// Requested model id.
    pub model: String,
    /// Served model id when the provider reports a different one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_model: Option<String>,
    /// Provider response id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// Token usage and cost.
    #[serde(default)]
    pub usage: Usage,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Error text when `stop_reason` is `error` or `aborted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Provider error code or type, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// Error kind (see [`crate::ErrorKind`]) in its snake_case name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// Raw provider error body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_body: Option<String>,
    /// The HTTP status of a provider error, when the error came with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_status: Option<u16>,
    /// Unix time in milliseconds.
    #[serde(default)]
    pub timestamp: u64,
}

impl AssistantMessage {
    /// The tool calls, in content order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|c| match c {
            AssistantContent::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// All text blocks joined.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for c in &self.content {
            if let AssistantContent::Text(t) = c {
                out.push_str(&t.text);
            }
        }
        out
    }
}

/// The result of one tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    /// The call this answers.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// Text and images.
    pub content: Vec<UserContent>,
    /// Arbitrary details for the application; never sent to providers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// Whether the call failed.
    #[serde(default)]
    pub is_error: bool,
    /// Unix time in milliseconds.
    #[serde(default)]
    pub timestamp: u64,
}

impl ToolResultMessage {
    /// All text blocks joined with newlines.
    pub fn text(&self) -> String {
        let mut parts = Vec::new();
        for c in &self.content {
            if let UserContent::Text(t) = c {
                parts.push(t.text.as_str());
            }
        }
        parts.join("\n")
    }
}

/// One message of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum Message {
    /// From the user.
    User(UserMessage),
    /// From the model. Boxed: an assistant message is twice the size of the others,
    /// and a transcript's every slot is as large as its largest variant.
    Assistant(Box<AssistantMessage>),
    /// A tool's result.
    ToolResult(ToolResultMessage),
}

impl From<AssistantMessage> for Message {
    fn from(message: AssistantMessage) -> Self {
        Message::Assistant(Box::new(message))
    }
}

impl Message {
    /// A user message with plain text.
    pub fn user(text: impl Into<String>) -> Self {
        Message::User(UserMessage { content: UserMessageContent::Text(text.into()), timestamp: 0 })
    }
}

/// Milliseconds since the Unix epoch, 0 if the clock is before it.
pub fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
