//! What clawcall's `tracing` spans and metric events say, following the OpenTelemetry
//! GenAI semantic conventions, so a tracing backend reads them without translation.
//!
//! Two versions of the conventions are emitted, as the conventions ask of an
//! instrumentation while they are experimental: [`SEMCONV_DEFAULT`] unless
//! `OTEL_SEMCONV_STABILITY_OPT_IN` lists `gen_ai_latest_experimental`, then
//! [`SEMCONV_LATEST`] ([`semconv`]). The latest names the provider `gen_ai.provider.name`
//! (the default `gen_ai.system`), and adds cache token counts, the time to the first chunk
//! and, on opt-in, content.
//!
//! Content (messages, tool arguments and results) is recorded only when
//! `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is `true` and the latest version is
//! on ([`capture_content`]): it may hold what users typed and what tools read. Keys, tokens and
//! secret headers are never recorded, whatever is set.
//!
//! Spans (all at `info` level, named through the `otel.name` field):
//! - `chat {model}` per model request, in the request driver;
//! - `invoke_agent` per agent run, `turn` per turn beneath it, `execute_tool {name}` per call;
//! - `mcp {method}` per MCP request, beneath the tool call that made it.
//!
//! Metrics are `tracing` events with target [`METRICS_TARGET`]: one field named
//! `histogram.<metric name>` holds the measurement, the other fields are its attributes.
//! A subscriber that does not look for them pays nothing more than for any disabled event.

use std::sync::atomic::{AtomicU8, Ordering};

use serde_json::{Value, json};

use crate::types::{
    AssistantContent, AssistantMessage, Message, Model, StopReason, UserContent, UserMessageContent,
};

/// The version of the GenAI conventions emitted by default (the last one before the
/// conventions' opt-in transition).
pub const SEMCONV_DEFAULT: &str = "1.36.0";

/// The version emitted when `OTEL_SEMCONV_STABILITY_OPT_IN` lists `gen_ai_latest_experimental`.
pub const SEMCONV_LATEST: &str = "1.41.0";

/// The target of metric events ([`record_chat_metrics`]).
pub const METRICS_TARGET: &str = "gen_ai.metrics";

/// Operation duration histogram, in seconds.
pub const METRIC_OPERATION_DURATION: &str = "gen_ai.client.operation.duration";

/// Token usage histogram, one measurement per token type.
pub const METRIC_TOKEN_USAGE: &str = "gen_ai.client.token.usage";

/// What one finished model request reports to the GenAI client metrics.
#[derive(Debug)]
pub struct ChatMetrics<'a> {
    /// The provider's conventional name ([`provider_name`]).
    pub provider: &'a str,
    /// The model asked for.
    pub request_model: &'a str,
    /// The model that answered, when the response said.
    pub response_model: Option<&'a str>,
    /// The error kind, when the request failed.
    pub error_type: Option<&'a str>,
    /// From the request's start to its end.
    pub duration: std::time::Duration,
    /// The tokens used, when the response said.
    pub usage: Option<&'a crate::types::Usage>,
}

/// Emits the metric events of one request ([`METRIC_OPERATION_DURATION`], and
/// [`METRIC_TOKEN_USAGE`] per token type when usage is known).
pub fn record_chat_metrics(m: &ChatMetrics<'_>) {
    if !tracing::enabled!(target: "gen_ai.metrics", tracing::Level::INFO) {
        return;
    }
    let seconds = m.duration.as_secs_f64();
    let tokens = m.usage.map(|u| [("input", input_tokens(u)), ("output", u.output)]);
    // A field name is fixed per call site, so each version has its own.
    match semconv() {
        Semconv::Default => {
            tracing::event!(
                target: "gen_ai.metrics",
                tracing::Level::INFO,
                histogram.gen_ai.client.operation.duration = seconds,
                gen_ai.operation.name = "chat",
                gen_ai.system = m.provider,
                gen_ai.request.model = m.request_model,
                gen_ai.response.model = m.response_model,
                "error.type" = m.error_type
            );
            for (kind, count) in tokens.into_iter().flatten() {
                tracing::event!(
                    target: "gen_ai.metrics",
                    tracing::Level::INFO,
                    histogram.gen_ai.client.token.usage = count,
                    gen_ai.operation.name = "chat",
                    gen_ai.system = m.provider,
                    gen_ai.request.model = m.request_model,
                    gen_ai.response.model = m.response_model,
                    "gen_ai.token.type" = kind
                );
            }
        }
        Semconv::Latest => {
            tracing::event!(
                target: "gen_ai.metrics",
                tracing::Level::INFO,
                histogram.gen_ai.client.operation.duration = seconds,
                gen_ai.operation.name = "chat",
                gen_ai.provider.name = m.provider,
                gen_ai.request.model = m.request_model,
                gen_ai.response.model = m.response_model,
                "error.type" = m.error_type
            );
            for (kind, count) in tokens.into_iter().flatten() {
                tracing::event!(
                    target: "gen_ai.metrics",
                    tracing::Level::INFO,
                    histogram.gen_ai.client.token.usage = count,
                    gen_ai.operation.name = "chat",
                    gen_ai.provider.name = m.provider,
                    gen_ai.request.model = m.request_model,
                    gen_ai.response.model = m.response_model,
                    "gen_ai.token.type" = kind
                );
            }
        }
    }
}

/// Which version of the conventions this process emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Semconv {
    /// [`SEMCONV_DEFAULT`].
    Default,
    /// [`SEMCONV_LATEST`].
    Latest,
}

impl Semconv {
    /// The version chosen by an `OTEL_SEMCONV_STABILITY_OPT_IN` value (a comma-separated list).
    pub fn from_opt_in(value: Option<&str>) -> Semconv {
        let latest = value
            .unwrap_or_default()
            .split(',')
            .any(|item| item.trim().eq_ignore_ascii_case("gen_ai_latest_experimental"));
        if latest { Semconv::Latest } else { Semconv::Default }
    }

    /// The version's number.
    pub fn version(self) -> &'static str {
        match self {
            Semconv::Default => SEMCONV_DEFAULT,
            Semconv::Latest => SEMCONV_LATEST,
        }
    }
}

/// The version chosen by [`set_semconv`] or read from the environment (0: not yet read).
static SEMCONV: AtomicU8 = AtomicU8::new(0);
/// Whether content is captured, as chosen by [`set_capture_content`] or read (0: not yet read).
static CAPTURE: AtomicU8 = AtomicU8::new(0);

/// The version of the conventions this process emits: the one [`set_semconv`] chose, else
/// the one `OTEL_SEMCONV_STABILITY_OPT_IN` asks for (read once).
#[allow(
    clippy::disallowed_methods,
    reason = "OpenTelemetry's switches are the process's by definition, read once; an application sets its own with set_semconv"
)]
pub fn semconv() -> Semconv {
    match SEMCONV.load(Ordering::Relaxed) {
        1 => Semconv::Default,
        2 => Semconv::Latest,
        _ => {
            let read = Semconv::from_opt_in(
                std::env::var("OTEL_SEMCONV_STABILITY_OPT_IN").ok().as_deref(),
            );
            set_semconv(read);
            read
        }
    }
}

/// Chooses the version of the conventions for the whole process (an application's setting
/// over the environment's).
pub fn set_semconv(version: Semconv) {
    SEMCONV.store(if version == Semconv::Latest { 2 } else { 1 }, Ordering::Relaxed);
}

/// Whether spans carry content: as [`set_capture_content`] chose, else
/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (read once); and only with the
/// latest conventions (the default version has no content attributes).
#[allow(
    clippy::disallowed_methods,
    reason = "OpenTelemetry's switches are the process's by definition, read once; an application sets its own with set_capture_content"
)]
pub fn capture_content() -> bool {
    let on = match CAPTURE.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let read = std::env::var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
                .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
            set_capture_content(read);
            read
        }
    };
    on && semconv() == Semconv::Latest
}

/// Chooses whether spans carry content, for the whole process.
pub fn set_capture_content(on: bool) {
    CAPTURE.store(if on { 2 } else { 1 }, Ordering::Relaxed);
}

/// Records a request's input on its `chat` span ([`crate::AssistantStream::span`]) when
/// content is captured.
pub fn record_input(span: &tracing::Span, context: &crate::types::Context) {
    if !capture_content() || span.is_disabled() {
        return;
    }
    span.record("gen_ai.input.messages", input_messages_json(&context.messages));
    if let Some(system) = &context.system_prompt {
        span.record("gen_ai.system_instructions", system_instructions_json(system));
    }
}

/// Records a request's answer on its `chat` span when content is captured.
pub fn record_output(span: &tracing::Span, message: &AssistantMessage) {
    if capture_content() && !span.is_disabled() {
        span.record("gen_ai.output.messages", output_messages_json(message));
    }
}

/// The conventions' well-known provider name for `model` (by its API; a Chat Completions
/// server other than OpenAI's keeps its own provider name).
pub fn provider_name(model: &Model) -> &str {
    match model.api.as_str() {
        "anthropic-messages" => "anthropic",
        "openai-responses" => "openai",
        "openai-completions" if model.provider.starts_with("openai") => "openai",
        "azure-openai-responses" => "azure.ai.openai",
        "google-generative-ai" => "gcp.gemini",
        "google-vertex" => "gcp.vertex_ai",
        "mistral-conversations" => "mistral_ai",
        "bedrock-converse-stream" => "aws.bedrock",
        _ => model.provider.as_str(),
    }
}

/// The finish reason of a response, as the conventions name them.
pub fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Stop => "stop",
        StopReason::Length => "length",
        StopReason::ToolUse => "tool_call",
        StopReason::Error => "error",
        StopReason::Aborted => "aborted",
    }
}

/// A count as a span attribute: a signed integer, as OTLP carries integers (an exporter
/// may turn an unsigned one into a string).
pub fn int(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// Input tokens as the conventions count them: cached ones included.
pub fn input_tokens(usage: &crate::types::Usage) -> u64 {
    usage.input.saturating_add(usage.cache_read).saturating_add(usage.cache_write)
}

/// `gen_ai.input.messages`: the transcript as the conventions' JSON (roles and parts).
pub fn input_messages_json(messages: &[Message]) -> String {
    Value::Array(messages.iter().map(message_json).collect()).to_string()
}

/// `gen_ai.system_instructions`: the system prompt as the conventions' JSON.
pub fn system_instructions_json(system_prompt: &str) -> String {
    json!([{ "type": "text", "content": system_prompt }]).to_string()
}

/// `gen_ai.output.messages`: the answer as the conventions' JSON.
pub fn output_messages_json(message: &AssistantMessage) -> String {
    let mut out = assistant_json(message);
    if let Value::Object(map) = &mut out {
        map.insert("finish_reason".into(), finish_reason(message.stop_reason).into());
    }
    Value::Array(vec![out]).to_string()
}

/// A tool result's content as text (`gen_ai.tool.call.result`); images are named, not copied.
pub fn user_content_text(content: &[UserContent]) -> String {
    let mut text = String::new();
    for part in content {
        match part {
            UserContent::Text(t) => text.push_str(&t.text),
            UserContent::Image(i) => {
                text.push_str("[image ");
                text.push_str(&i.mime_type);
                text.push(']');
            }
        }
    }
    text
}

fn message_json(message: &Message) -> Value {
    match message {
        Message::User(user) => {
            let parts: Vec<Value> = match &user.content {
                UserMessageContent::Text(text) => vec![json!({ "type": "text", "content": text })],
                UserMessageContent::Blocks(blocks) => blocks.iter().map(user_part).collect(),
            };
            json!({ "role": "user", "parts": parts })
        }
        Message::Assistant(assistant) => assistant_json(assistant),
        Message::ToolResult(result) => json!({
            "role": "tool",
            "parts": [{
                "type": "tool_call_response",
                "id": result.tool_call_id,
                "result": user_content_text(&result.content),
            }],
        }),
    }
}

fn user_part(content: &UserContent) -> Value {
    match content {
        UserContent::Text(t) => json!({ "type": "text", "content": t.text }),
        // The image itself is not copied into a span: only its kind.
        UserContent::Image(i) => json!({ "type": "blob", "mime_type": i.mime_type }),
    }
}

fn assistant_json(message: &AssistantMessage) -> Value {
    let parts: Vec<Value> = message
        .content
        .iter()
        .filter_map(|block| match block {
            AssistantContent::Text(t) => Some(json!({ "type": "text", "content": t.text })),
            // A redacted block holds an encrypted payload, not text.
            AssistantContent::Thinking(t) if t.redacted => None,
            AssistantContent::Thinking(t) => {
                Some(json!({ "type": "reasoning", "content": t.thinking }))
            }
            AssistantContent::ToolCall(call) => Some(json!({
                "type": "tool_call",
                "id": call.id,
                "name": call.name,
                "arguments": call.arguments,
            })),
            AssistantContent::ProviderContent(_) => None,
        })
        .collect();
    json!({ "role": "assistant", "parts": parts })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opt_in_is_a_list_item() {
        assert_eq!(Semconv::from_opt_in(None), Semconv::Default);
        assert_eq!(Semconv::from_opt_in(Some("http")), Semconv::Default);
        assert_eq!(Semconv::from_opt_in(Some("gen_ai_latest_experimental_x")), Semconv::Default);
        assert_eq!(Semconv::from_opt_in(Some("http, gen_ai_latest_experimental")), Semconv::Latest);
    }

    #[test]
    fn provider_names_are_the_well_known_values() {
        let model = |api: &str, provider: &str| Model {
            api: api.into(),
            provider: provider.into(),
            ..Model::default()
        };
        assert_eq!(provider_name(&model("anthropic-messages", "anthropic")), "anthropic");
        assert_eq!(provider_name(&model("openai-completions", "openai")), "openai");
        assert_eq!(provider_name(&model("openai-completions", "groq")), "groq");
        assert_eq!(provider_name(&model("bedrock-converse-stream", "bedrock")), "aws.bedrock");
        assert_eq!(provider_name(&model("google-vertex", "google")), "gcp.vertex_ai");
    }

    #[test]
    fn messages_follow_the_parts_schema() {
        let text: Value =
            serde_json::from_str(&input_messages_json(&[Message::user("hi")])).unwrap_or_default();
        assert_eq!(
            text,
            json!([{ "role": "user", "parts": [{ "type": "text", "content": "hi" }] }])
        );
    }
}
