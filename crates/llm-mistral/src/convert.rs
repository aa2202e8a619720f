//! Neutral request -> Mistral wire request (pure functions).
//!
//! The body is built from `serde_json::Map`s (insertion order; the workspace
//! enables `preserve_order`), so identical input gives identical bytes.

use std::collections::{BTreeMap, HashMap, HashSet};

use llm_core::raw::object;
use llm_core::transform::{IdRules, normalize_tool_call_id, transform_messages};
use llm_core::{
    AssistantContent, Context, Error, ErrorKind, Message, Model, ReasoningLevel, StreamOptions,
    Tool, ToolChoice, UserContent, UserMessageContent,
};
use llm_http::{HeaderMap, HttpRequest, insert_header};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::PROVIDER;

/// Default base URL when the model gives none.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.mistral.ai";
/// The chat completions endpoint, relative to the base URL.
pub(crate) const ENDPOINT_PATH: &str = "/v1/chat/completions";

/// Placeholder for an image sent to a model without image input.
const IMAGE_OMITTED: &str = "(image omitted: model does not support images)";
/// Suffix for a tool result whose images were dropped for a non-vision model.
const TOOL_IMAGE_OMITTED_SUFFIX: &str = "\n[tool image omitted: model does not support images]";
/// Prefix of error tool results (OpenClaw `buildToolResultText`).
const TOOL_ERROR_PREFIX: &str = "[tool error] ";
/// Text of a tool result without text or images.
const NO_TOOL_OUTPUT: &str = "(no tool output)";
/// Text of a tool result with only images.
const SEE_ATTACHED_IMAGE: &str = "(see attached image)";

/// Model ids that take `reasoning_effort` instead of `prompt_mode: "reasoning"`
/// (OpenClaw `usesReasoningEffort`).
const REASONING_EFFORT_MODELS: &[&str] =
    &["mistral-small-2603", "mistral-small-latest", "mistral-medium-3.5"];

/// Mistral-specific model flags, parsed from [`Model::compat`] (camelCase keys;
/// every field optional). Unknown keys are ignored.
///
/// ```json
/// { "reasoningFormat": "reasoningEffort", "reasoningEffortMap": { "low": "none" }, "supportsStrict": false }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MistralCompat {
    /// How a reasoning request is expressed. Default: `reasoningEffort` for the
    /// models OpenClaw lists (`mistral-small-2603`, `mistral-small-latest`,
    /// `mistral-medium-3.5`), `promptMode` for every other reasoning model.
    pub reasoning_format: Option<MistralReasoningFormat>,
    /// `reasoning_effort` value per level name (`minimal` … `max`), like
    /// OpenClaw's `thinkingLevelMap`. Levels not listed send `"high"`.
    pub reasoning_effort_map: BTreeMap<String, String>,
    /// Whether to send `strict: false` on every function (OpenClaw does).
    /// Default `true`; set `false` for gateways that reject the key.
    pub supports_strict: Option<bool>,
}

/// How a Mistral model is asked to reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MistralReasoningFormat {
    /// `"prompt_mode": "reasoning"` (Magistral).
    PromptMode,
    /// `"reasoning_effort": "<value>"` (Mistral Small 4, Medium 3.5).
    ReasoningEffort,
    /// The model takes no reasoning parameter.
    None,
}

impl MistralCompat {
    /// Parses `model.compat` (absent or `null` gives the defaults; a malformed one is an
    /// `invalid_request` error, as for every provider).
    pub fn from_model(model: &Model) -> Result<Self, Error> {
        model.typed_compat(PROVIDER)
    }
}

/// Builds the whole request: URL, headers (defaults, auth, model, caller), body.
pub(crate) fn build_request(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<HttpRequest, Error> {
    let Some(key) = options.api_key.as_ref().filter(|k| !k.expose().is_empty()) else {
        return Err(Error::new(
            ErrorKind::Auth,
            PROVIDER,
            format!("No API key for provider: {}", provider_name(model)),
        ));
    };
    let body = build_body(model, context, options)?;
    let mut headers = HeaderMap::new();
    insert_header(&mut headers, PROVIDER, "content-type", "application/json")?;
    insert_header(&mut headers, PROVIDER, "accept", "text/event-stream")?;
    // Mistral routes requests of one session to the same KV cache.
    if let Some(session) = options.session_id.as_deref().filter(|s| !s.is_empty()) {
        insert_header(&mut headers, PROVIDER, "x-affinity", session)?;
    }
    insert_header(&mut headers, PROVIDER, "authorization", &format!("Bearer {}", key.expose()))?;
    for (k, v) in &model.headers {
        insert_header(&mut headers, PROVIDER, k, v)?;
    }
    for (k, v) in &options.headers {
        insert_header(&mut headers, PROVIDER, k, v)?;
    }
    HttpRequest::json(PROVIDER, endpoint_url(&model.base_url), headers, &body)
}

fn provider_name(model: &Model) -> &str {
    if model.provider.is_empty() { PROVIDER } else { &model.provider }
}

/// `<base>/v1/chat/completions`; a base that already ends in `/v1` is not doubled.
pub(crate) fn endpoint_url(base_url: &str) -> String {
    let base = base_url.trim().trim_end_matches('/');
    let base = if base.is_empty() { DEFAULT_BASE_URL } else { base };
    match base.strip_suffix("/v1") {
        Some(root) => format!("{root}{ENDPOINT_PATH}"),
        None => format!("{base}{ENDPOINT_PATH}"),
    }
}

/// Provider options this crate reads from [`StreamOptions::provider_options`]; a value of the
/// wrong type is an `invalid_request` error, as in every provider.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct MistralOptions {
    /// Sent as `parallel_tool_calls`.
    parallel_tool_calls: Option<bool>,
    /// Sent as `prompt_mode`, over what the compat's reasoning format gives.
    prompt_mode: Option<String>,
    /// Sent as `reasoning_effort`, over what the compat's reasoning format gives.
    reasoning_effort: Option<String>,
}

/// The JSON body (OpenClaw `buildChatPayload`, wire names in snake_case).
pub(crate) fn build_body(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<Value, Error> {
    let compat = MistralCompat::from_model(model)?;
    let extra: MistralOptions = options.typed_provider_options(PROVIDER, "Mistral")?;
    // Checked before anything else is built: a format the model cannot carry is an error.
    let output = llm_core::output::plan(&crate::INFO, PROVIDER, model, context, options, true)?;
    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.id.clone()));
    body.insert("stream".into(), Value::Bool(true));
    body.insert("messages".into(), Value::Array(convert_messages(model, context)));
    let tools = convert_tools(&context.tools, &compat);
    let tool_names: Vec<&str> = context.tools.iter().map(|t| t.name.as_str()).collect();
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = options.tool_choice.as_ref()
        && let Some(choice) = convert_tool_choice(choice, &tool_names)?
    {
        body.insert("tool_choice".into(), choice);
    }
    if let Some(t) = options.temperature.and_then(serde_json::Number::from_f64) {
        body.insert("temperature".into(), Value::Number(t));
    }
    if let Some(max) = options.max_tokens {
        let max = if model.max_tokens > 0 { max.min(model.max_tokens) } else { max };
        body.insert("max_tokens".into(), Value::from(max));
    }
    if !options.stop.is_empty() {
        body.insert("stop".into(), Value::from(options.stop.clone()));
    }
    let (prompt_mode, effort) = reasoning_params(model, options, &compat, &extra);
    if let Some(mode) = prompt_mode {
        body.insert("prompt_mode".into(), Value::String(mode));
    }
    if let Some(effort) = effort {
        body.insert("reasoning_effort".into(), Value::String(effort));
    }
    if let Some(parallel) = extra.parallel_tool_calls {
        body.insert("parallel_tool_calls".into(), Value::Bool(parallel));
    }
    if let (Some(plan), Some(format)) = (output, options.output.as_ref()) {
        // `response_format`: `{type:"json_schema", json_schema:{name, description?, schema, strict}}`.
        let mut schema = Map::new();
        schema.insert("name".into(), Value::from(format.name.as_str()));
        if let Some(description) = &format.description {
            schema.insert("description".into(), Value::from(description.as_str()));
        }
        schema.insert("schema".into(), plan.schema);
        schema.insert("strict".into(), Value::Bool(plan.strict));
        body.insert(
            "response_format".into(),
            object([("type", Value::from("json_schema")), ("json_schema", Value::Object(schema))]),
        );
    }
    Ok(Value::Object(body))
}

/// `(prompt_mode, reasoning_effort)` for this request.
///
/// A reasoning level on a reasoning model asks for reasoning in the model's
/// format (see [`MistralCompat::reasoning_format`]). The provider options
/// `promptMode` and `reasoningEffort` (strings) override the computed values.
fn reasoning_params(
    model: &Model,
    options: &StreamOptions,
    compat: &MistralCompat,
    extra: &MistralOptions,
) -> (Option<String>, Option<String>) {
    let mut prompt_mode = None;
    let mut effort = None;
    if let (true, Some(level)) = (model.reasoning, options.reasoning) {
        let format = compat.reasoning_format.unwrap_or_else(|| {
            if REASONING_EFFORT_MODELS.contains(&model.id.as_str()) {
                MistralReasoningFormat::ReasoningEffort
            } else {
                MistralReasoningFormat::PromptMode
            }
        });
        match format {
            MistralReasoningFormat::PromptMode => prompt_mode = Some("reasoning".to_owned()),
            MistralReasoningFormat::ReasoningEffort => effort = Some(effort_value(compat, level)),
            MistralReasoningFormat::None => {}
        }
    }
    if let Some(mode) = &extra.prompt_mode {
        prompt_mode = Some(mode.clone());
    }
    if let Some(value) = &extra.reasoning_effort {
        effort = Some(value.clone());
    }
    (prompt_mode, effort)
}

fn effort_value(compat: &MistralCompat, level: ReasoningLevel) -> String {
    compat.reasoning_effort_map.get(level.as_str()).cloned().unwrap_or_else(|| "high".to_owned())
}

/// Tools in input order: `{type:"function", function:{name, description, parameters, strict:false}}`.
pub(crate) fn convert_tools(tools: &[Tool], compat: &MistralCompat) -> Vec<Value> {
    let strict = compat.supports_strict.unwrap_or(true);
    tools
        .iter()
        .map(|tool| {
            let mut function = Map::new();
            function.insert("name".into(), Value::String(tool.name.clone()));
            function.insert("description".into(), Value::String(tool.description.clone()));
            let parameters = match &tool.parameters {
                Value::Null => json!({"type": "object", "properties": {}}),
                other => other.clone(),
            };
            function.insert("parameters".into(), parameters);
            if strict {
                function.insert("strict".into(), Value::Bool(false));
            }
            let mut wire = Map::new();
            wire.insert("type".into(), Value::String("function".into()));
            wire.insert("function".into(), Value::Object(function));
            Value::Object(wire)
        })
        .collect()
}

/// `tool_choice` (OpenClaw `mapToolChoice` plus its no-tools rules).
///
/// `Required` becomes Mistral's `"any"` (the model must call some tool).
/// Without tools, `auto` is omitted, `none` is sent, and a forced choice fails.
pub(crate) fn convert_tool_choice(
    choice: &ToolChoice,
    tool_names: &[&str],
) -> Result<Option<Value>, Error> {
    let no_tools = || {
        Error::new(
            ErrorKind::InvalidRequest,
            PROVIDER,
            "Mistral tool_choice requires a tool, but no tools survived schema conversion",
        )
        .with_retryable(false)
    };
    Ok(match choice {
        ToolChoice::Auto if tool_names.is_empty() => None,
        ToolChoice::Auto => Some(Value::String("auto".into())),
        ToolChoice::None => Some(Value::String("none".into())),
        ToolChoice::Required if tool_names.is_empty() => return Err(no_tools()),
        ToolChoice::Required => Some(Value::String("any".into())),
        ToolChoice::Tool(_) if tool_names.is_empty() => return Err(no_tools()),
        ToolChoice::Tool(name) => {
            if !tool_names.contains(&name.as_str()) {
                return Err(Error::new(
                    ErrorKind::InvalidRequest,
                    PROVIDER,
                    format!("Mistral tool_choice requested unavailable tool \"{name}\" after schema conversion"),
                )
                .with_retryable(false));
            }
            Some(json!({"type": "function", "function": {"name": name}}))
        }
    })
}

/// Per-request tool-call id map: every source id gets a 9-character
/// `[a-zA-Z0-9]` id, and two different source ids never get the same one.
///
/// Ids come from [`normalize_tool_call_id`] with [`IdRules::MISTRAL_9`]; on the
/// (astronomically rare) clash with an id already given out, the source id is
/// re-seeded (`<id>:1`, `<id>:2`, ...). Ids are assigned in transcript order, so
/// the mapping is deterministic, and a call and its result share it.
#[derive(Debug, Default)]
pub(crate) struct ToolCallIds {
    forward: HashMap<String, String>,
    taken: HashSet<String>,
}

impl ToolCallIds {
    /// The outgoing id for `source`.
    pub(crate) fn map(&mut self, source: &str) -> String {
        if let Some(id) = self.forward.get(source) {
            return id.clone();
        }
        let mut candidate = normalize_tool_call_id(source, &IdRules::MISTRAL_9);
        let mut attempt = 0u32;
        while self.taken.contains(&candidate) || !is_mistral_id(&candidate) {
            attempt += 1;
            candidate = normalize_tool_call_id(&format!("{source}:{attempt}"), &IdRules::MISTRAL_9);
            if attempt > 64 {
                // Defensive: never loop forever on a misbehaving normalizer.
                candidate = fallback_id(source, attempt, &self.taken);
                break;
            }
        }
        self.taken.insert(candidate.clone());
        self.forward.insert(source.to_owned(), candidate.clone());
        candidate
    }
}

/// Whether `id` is a valid Mistral tool-call id: exactly 9 of `[a-zA-Z0-9]`.
pub(crate) fn is_mistral_id(id: &str) -> bool {
    id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// A base-62 id from an FNV-1a hash; only used if the normalizer misbehaves.
fn fallback_id(source: &str, attempt: u32, taken: &HashSet<String>) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut salt = u64::from(attempt);
    loop {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ salt;
        for b in source.bytes() {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        let mut out = String::with_capacity(9);
        for _ in 0..9 {
            let digit = (hash % 62) as usize;
            out.push(ALPHABET.get(digit).map_or('0', |b| char::from(*b)));
            hash /= 62;
            hash = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(salt);
        }
        if !taken.contains(&out) {
            return out;
        }
        salt = salt.wrapping_add(1);
    }
}

/// The transcript in Mistral's shape (OpenClaw `toChatMessages`), after the
/// cross-provider transform, with the system prompt first.
pub(crate) fn convert_messages(model: &Model, context: &Context) -> Vec<Value> {
    let supports_images = model.supports_images();
    let messages = transform_messages(&context.messages, model, Some(&IdRules::MISTRAL_9));
    let mut ids = ToolCallIds::default();
    let mut out = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = context.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        out.push(json!({"role": "system", "content": system}));
    }
    for message in &messages {
        match message {
            Message::User(user) => {
                if let Some(m) = user_message(&user.content, supports_images) {
                    out.push(m);
                }
            }
            Message::Assistant(assistant) => {
                let mut parts = Vec::new();
                let mut calls = Vec::new();
                for block in &assistant.content {
                    match block {
                        AssistantContent::Text(t) if !t.text.trim().is_empty() => {
                            parts.push(json!({"type": "text", "text": t.text}));
                        }
                        AssistantContent::Thinking(t) if !t.thinking.trim().is_empty() => {
                            parts.push(json!({"type": "thinking", "thinking": [{"type": "text", "text": t.thinking}]}));
                        }
                        AssistantContent::ToolCall(call) => {
                            let arguments = match &call.arguments {
                                Value::Object(_) => call.arguments.to_string(),
                                _ => "{}".to_owned(),
                            };
                            calls.push(object([
                                ("id", Value::String(ids.map(&call.id))),
                                ("type", Value::from("function")),
                                (
                                    "function",
                                    object([
                                        ("name", Value::from(call.name.as_str())),
                                        ("arguments", Value::String(arguments)),
                                    ]),
                                ),
                            ]));
                        }
                        _ => {}
                    }
                }
                if parts.is_empty() && calls.is_empty() {
                    continue;
                }
                let mut m = Map::new();
                m.insert("role".into(), Value::String("assistant".into()));
                if !parts.is_empty() {
                    m.insert("content".into(), Value::Array(parts));
                }
                if !calls.is_empty() {
                    m.insert("tool_calls".into(), Value::Array(calls));
                }
                out.push(Value::Object(m));
            }
            Message::ToolResult(result) => {
                let text = result
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        UserContent::Text(t) => Some(t.text.as_str()),
                        UserContent::Image(_) => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                let images: Vec<Value> = result
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        UserContent::Image(i) => Some(image_chunk(&i.mime_type, &i.data)),
                        UserContent::Text(_) => None,
                    })
                    .collect();
                let text =
                    tool_result_text(&text, !images.is_empty(), supports_images, result.is_error);
                let content = if images.is_empty() || !supports_images {
                    Value::String(text)
                } else {
                    let mut chunks = vec![object([
                        ("type", Value::from("text")),
                        ("text", Value::String(text)),
                    ])];
                    chunks.extend(images);
                    Value::Array(chunks)
                };
                out.push(object([
                    ("role", Value::from("tool")),
                    ("tool_call_id", Value::String(ids.map(&result.tool_call_id))),
                    ("name", Value::from(result.tool_name.as_str())),
                    ("content", content),
                ]));
            }
        }
    }
    out
}

fn user_message(content: &UserMessageContent, supports_images: bool) -> Option<Value> {
    match content {
        UserMessageContent::Text(text) => Some(json!({"role": "user", "content": text})),
        UserMessageContent::Blocks(blocks) => {
            let had_images = blocks.iter().any(|b| matches!(b, UserContent::Image(_)));
            let parts: Vec<Value> = blocks
                .iter()
                .filter_map(|b| match b {
                    UserContent::Text(t) => Some(json!({"type": "text", "text": t.text})),
                    UserContent::Image(i) if supports_images => {
                        Some(image_chunk(&i.mime_type, &i.data))
                    }
                    UserContent::Image(_) => None,
                })
                .collect();
            if !parts.is_empty() {
                Some(object([("role", Value::from("user")), ("content", Value::Array(parts))]))
            } else if had_images && !supports_images {
                Some(json!({"role": "user", "content": IMAGE_OMITTED}))
            } else {
                None
            }
        }
    }
}

fn image_chunk(mime_type: &str, data: &str) -> Value {
    json!({"type": "image_url", "image_url": format!("data:{mime_type};base64,{data}")})
}

/// OpenClaw `buildToolResultText`: trimmed text, `[tool error] ` prefix for
/// errors, placeholders for empty and image-only results.
pub(crate) fn tool_result_text(
    text: &str,
    has_images: bool,
    supports_images: bool,
    is_error: bool,
) -> String {
    let prefix = if is_error { TOOL_ERROR_PREFIX } else { "" };
    let trimmed = text.trim();
    if !trimmed.is_empty() {
        let suffix = if has_images && !supports_images { TOOL_IMAGE_OMITTED_SUFFIX } else { "" };
        return format!("{prefix}{trimmed}{suffix}");
    }
    if has_images {
        return if supports_images {
            format!("{prefix}{SEE_ATTACHED_IMAGE}")
        } else {
            format!("{prefix}{IMAGE_OMITTED}")
        };
    }
    format!("{prefix}{NO_TOOL_OUTPUT}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests;
