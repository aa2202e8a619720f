//! Neutral request to Chat Completions request: tools, messages, body, headers.
//! Pure functions, as OpenClaw builds the payload, tools and messages
//! for Chat Completions.
//!
//! The body is built with `serde_json::Map` (insertion order), so the same input
//! always gives the same bytes.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use llm_core::raw::object;
use llm_core::transform::{IdRules, transform_messages};
use llm_core::{
    AssistantContent, AssistantMessage, CacheRetention, Context, Error, ErrorKind, Message, Model,
    ReasoningLevel, StreamOptions, Tool, ToolChoice, ToolResultMessage, UserContent,
    UserMessageContent,
};
use llm_http::{HeaderMap, HttpRequest, insert_header};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::compat::{MaxTokensField, ResolvedCompat, ThinkingFormat, is_native_openai};
use llm_core::raw::strict::{StrictPlan, resolve_tool_list};

/// Default base URL when the model has none.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Endpoint path below the base URL.
pub(crate) const ENDPOINT: &str = "/chat/completions";
/// Longest `prompt_cache_key` sent, in characters.
const PROMPT_CACHE_KEY_MAX: usize = 64;
/// Text of the bridge message for servers that need an assistant turn after tool results.
const BRIDGE_TEXT: &str = "I have processed the tool results.";
/// Text that introduces tool-result images re-sent as a user message.
const TOOL_IMAGES_TEXT: &str = "Attached image(s) from tool result:";
/// Tool-result content when the result has images and no text.
const SEE_IMAGE_TEXT: &str = "(see attached image)";
/// Tool-result content when the result has neither text nor images.
const NO_OUTPUT_TEXT: &str = "(no tool output)";

fn id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Tool-call ids Chat Completions accepts: `[A-Za-z0-9_-]`, 1 to 40 characters
/// (OpenAI rejects longer ids; OpenClaw truncates at 40).
pub(crate) const ID_RULES: IdRules = IdRules { max_len: 40, min_len: 1, allowed: id_char };

/// One request as sent, and what decoding its answer needs from the conversion.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The request (its `Debug` hides the key and prints only the body's size).
    pub(crate) http: HttpRequest,
    /// Per tool name: how to restore arguments of strict tools.
    pub(crate) strict_plans: BTreeMap<String, Arc<StrictPlan>>,
}

/// Provider options read from `StreamOptions::provider_options`; a value of the wrong type is
/// an `invalid_request` error, as in every provider.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct ProviderOptions {
    /// `parallelToolCalls`: sent as `parallel_tool_calls` when tools are present.
    pub(crate) parallel_tool_calls: Option<bool>,
    /// `strictTools`: overrides the compat's `strictTools`.
    pub(crate) strict_tools: Option<bool>,
    /// `extraBody`: top-level fields merged last into the body.
    pub(crate) extra_body: Option<Map<String, Value>>,
}

/// The chat-completions URL for a base URL (`https://api.openai.com/v1` when empty).
pub(crate) fn endpoint_url(base_url: &str) -> String {
    let base = base_url.trim().trim_end_matches('/');
    let base = if base.is_empty() { DEFAULT_BASE_URL } else { base };
    if base.ends_with(ENDPOINT) { base.to_owned() } else { format!("{base}{ENDPOINT}") }
}

/// Builds the whole request.
pub(crate) fn build_request(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    compat: &ResolvedCompat,
) -> Result<Prepared, Error> {
    let provider = crate::provider_name(model);
    let provider_options: ProviderOptions =
        options.typed_provider_options(&provider, "Chat Completions")?;
    let Some(key) = options.api_key.as_ref().filter(|k| !k.expose().is_empty()) else {
        return Err(Error::new(
            ErrorKind::Auth,
            provider.clone(),
            format!("No API key for provider: {provider}"),
        )
        .with_retryable(false));
    };

    // Checked before anything else is built: a format the model cannot carry is an error.
    let output = llm_core::output::plan(
        &crate::INFO,
        &provider,
        model,
        context,
        options,
        compat.supports_strict_mode,
    )?;

    let azure = crate::azure::route(model, options, &provider)?;

    // Headers: defaults, auth, the model's, session affinity, then the caller's.
    let mut headers = HeaderMap::new();
    insert_header(&mut headers, &provider, "content-type", "application/json")?;
    insert_header(&mut headers, &provider, "accept", "text/event-stream")?;
    match azure.as_ref().map(|route| route.auth) {
        Some(llm_http::azure::AzureAuth::ApiKey) => {
            insert_header(&mut headers, &provider, "api-key", key.expose())?
        }
        _ => insert_header(
            &mut headers,
            &provider,
            "authorization",
            &format!("Bearer {}", key.expose()),
        )?,
    }
    for (name, value) in &model.headers {
        insert_header(&mut headers, &provider, name, value)?;
    }
    if compat.send_session_affinity_headers
        && options.cache_retention != CacheRetention::None
        && let Some(session) = options.session_id.as_deref().filter(|s| !s.is_empty())
    {
        for name in ["session_id", "x-client-request-id", "x-session-affinity"] {
            insert_header(&mut headers, &provider, name, session)?;
        }
    }
    for (name, value) in &options.headers {
        insert_header(&mut headers, &provider, name, value)?;
    }

    let messages = convert_messages(model, context, compat);
    let strict_setting = provider_options.strict_tools.or(Some(compat.strict_tools).filter(|s| *s));
    let mut tools = convert_tools(&context.tools, compat, strict_setting);
    let has_tools = !tools.tools.is_empty();
    let has_tool_history = context.messages.iter().any(|m| match m {
        Message::Assistant(a) => a.tool_calls().next().is_some(),
        Message::ToolResult(_) => true,
        Message::User(_) => false,
    });

    let mut body = Map::new();
    body.insert("model".into(), Value::from(model.id.as_str()));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), Value::Bool(true));
    if compat.supports_usage_in_streaming {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if compat.supports_store {
        body.insert("store".into(), Value::Bool(false));
    }
    if let Some(max) = options.max_tokens {
        let max = if model.max_tokens > 0 { max.min(model.max_tokens) } else { max };
        let field = match compat.max_tokens_field {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
        };
        body.insert(field.into(), Value::from(max));
    }
    if let Some(t) = options.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if !options.stop.is_empty() {
        body.insert("stop".into(), json!(options.stop));
    }
    if has_tools {
        // Moved, not cloned: the converted tools are built for this body alone.
        body.insert("tools".into(), Value::Array(std::mem::take(&mut tools.tools)));
    } else if has_tool_history {
        // Proxies in front of Anthropic need the key once the transcript has tool turns.
        body.insert("tools".into(), Value::Array(Vec::new()));
    }
    if let Some(choice) = tool_choice(options.tool_choice.as_ref(), &tools.names, &provider)? {
        body.insert("tool_choice".into(), choice);
    }
    if let Some(parallel) = provider_options.parallel_tool_calls
        && has_tools
        && compat.supports_parallel_tool_calls
    {
        body.insert("parallel_tool_calls".into(), Value::Bool(parallel));
    }
    if compat.zai_tool_stream && has_tools {
        body.insert("tool_stream".into(), Value::Bool(true));
    }
    if options.cache_retention != CacheRetention::None {
        let key = options.cache_key();
        if let Some(key) = key
            && (compat.supports_prompt_cache_key || is_native_openai(model))
        {
            let clamped: String = key.chars().take(PROMPT_CACHE_KEY_MAX).collect();
            body.insert("prompt_cache_key".into(), Value::from(clamped));
        }
        if options.cache_retention == CacheRetention::Long && compat.supports_long_cache_retention {
            body.insert("prompt_cache_retention".into(), Value::from("24h"));
        }
    }
    reasoning_params(&mut body, model, options.reasoning, compat);
    if let (Some(plan), Some(format)) = (output, options.output.as_ref()) {
        body.insert("response_format".into(), response_format(format, plan, compat));
    }
    if let Some(extra) = provider_options.extra_body {
        for (k, v) in extra {
            body.insert(k, v);
        }
    }
    let url = azure.map_or_else(|| endpoint_url(&model.base_url), |route| route.url);
    let http = HttpRequest::json(&provider, url, headers, &body)?;
    tracing::debug!(
        provider = %provider,
        model = %model.id,
        tools = body.get("tools").and_then(|t| t.as_array()).map_or(0, Vec::len),
        bytes = http.body.len(),
        "openai-completions request"
    );
    Ok(Prepared { http, strict_plans: tools.strict_plans })
}

/// `{type:"json_schema", json_schema:{name, description?, schema, strict?}}`; `strict` is
/// left out where the server does not support it, as for tools.
fn response_format(
    format: &llm_core::output::OutputFormat,
    plan: llm_core::output::OutputPlan,
    compat: &ResolvedCompat,
) -> Value {
    let mut schema = Map::new();
    schema.insert("name".into(), Value::from(format.name.as_str()));
    if let Some(description) = &format.description {
        schema.insert("description".into(), Value::from(description.as_str()));
    }
    schema.insert("schema".into(), plan.schema);
    if compat.supports_strict_mode {
        schema.insert("strict".into(), Value::Bool(plan.strict));
    }
    object([("type", Value::from("json_schema")), ("json_schema", Value::Object(schema))])
}

/// The wire name of a reasoning level (`max` is OpenAI's `xhigh`).
fn effort(level: ReasoningLevel) -> &'static str {
    match level {
        ReasoningLevel::Max => "xhigh",
        other => other.as_str(),
    }
}

/// Reasoning knobs per the compat's thinking format (reasoning models only).
fn reasoning_params(
    body: &mut Map<String, Value>,
    model: &Model,
    level: Option<ReasoningLevel>,
    compat: &ResolvedCompat,
) {
    if !model.reasoning {
        return;
    }
    let enabled = level.is_some();
    match compat.thinking_format {
        ThinkingFormat::Zai => {
            let thinking = if enabled {
                json!({"type": "enabled", "clear_thinking": false})
            } else {
                json!({"type": "disabled"})
            };
            body.insert("thinking".into(), thinking);
            if let (Some(level), true) = (level, compat.supports_reasoning_effort) {
                body.insert("reasoning_effort".into(), Value::from(effort(level)));
            }
        }
        ThinkingFormat::Deepseek => {
            body.insert(
                "thinking".into(),
                json!({"type": if enabled { "enabled" } else { "disabled" }}),
            );
            if let (Some(level), true) = (level, compat.supports_reasoning_effort) {
                body.insert("reasoning_effort".into(), Value::from(effort(level)));
            }
        }
        ThinkingFormat::Qwen => {
            body.insert("enable_thinking".into(), Value::Bool(enabled));
        }
        ThinkingFormat::QwenChatTemplate => {
            body.insert(
                "chat_template_kwargs".into(),
                json!({"enable_thinking": enabled, "preserve_thinking": true}),
            );
        }
        ThinkingFormat::Openrouter => {
            if let Some(level) = level {
                body.insert("reasoning".into(), json!({"effort": effort(level)}));
            }
        }
        ThinkingFormat::Openai | ThinkingFormat::Together => {
            if let (Some(level), true) = (level, compat.supports_reasoning_effort) {
                body.insert("reasoning_effort".into(), Value::from(effort(level)));
            }
        }
    }
}

/// Converted tools.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ConvertedTools {
    /// Wire tools, in input order.
    pub(crate) tools: Vec<Value>,
    /// Names of the tools that survived projection.
    pub(crate) names: Vec<String>,
    /// Restore plans when the tools are sent strict.
    pub(crate) strict_plans: BTreeMap<String, Arc<StrictPlan>>,
}

/// OpenClaw's `projectOpenAITools` plus the root fixes of its generic normalizer:
/// drops tools with an empty name or a parameters schema that is not an object
/// schema (`type` other than `"object"`, `$dynamicRef` / `$dynamicAnchor`), and
/// returns the usable schema of every other tool, input order kept.
pub(crate) fn project_tools(tools: &[Tool]) -> Vec<(&Tool, Value)> {
    let mut out = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        if tool.name.trim().is_empty() {
            tracing::warn!(tool_index = i, "dropping tool: tool[{i}].name is empty");
            continue;
        }
        let schema = match &tool.parameters {
            Value::Null => Map::new(),
            Value::Object(m) => m.clone(),
            _ => {
                tracing::warn!(tool = %tool.name, "dropping tool: parameters must be a JSON object schema");
                continue;
            }
        };
        if let Some(t) = schema.get("type")
            && t != "object"
        {
            tracing::warn!(tool = %tool.name, "dropping tool: parameters.type must be \"object\"");
            continue;
        }
        if has_dynamic_ref(&tool.parameters, 0) {
            tracing::warn!(tool = %tool.name, "dropping tool: parameters use $dynamicRef / $dynamicAnchor");
            continue;
        }
        let has_properties = schema.get("properties").is_some_and(Value::is_object);
        if has_properties && schema.contains_key("type") {
            // Nothing to add or drop: the copy is the schema sent.
            out.push((tool, Value::Object(schema)));
            continue;
        }
        let mut fixed = Map::new();
        if !schema.contains_key("type") {
            fixed.insert("type".into(), Value::from("object"));
        }
        for (k, v) in schema {
            if k == "properties" && !has_properties {
                continue;
            }
            fixed.insert(k, v);
        }
        if !has_properties {
            fixed.insert("properties".into(), Value::Object(Map::new()));
        }
        out.push((tool, Value::Object(fixed)));
    }
    out
}

fn has_dynamic_ref(value: &Value, depth: usize) -> bool {
    if depth > 128 {
        return false;
    }
    match value {
        Value::Object(m) => m.iter().any(|(k, v)| {
            k == "$dynamicRef" || k == "$dynamicAnchor" || has_dynamic_ref(v, depth + 1)
        }),
        Value::Array(items) => items.iter().any(|v| has_dynamic_ref(v, depth + 1)),
        _ => false,
    }
}

/// `{type:"function", function:{name, description, parameters, strict?}}` per tool.
///
/// `strict` (the setting): `Some(true)` sends `strict: true` with losslessly
/// normalized schemas when *every* tool can be expressed strictly, else every
/// tool non-strict (never silently narrowed); `Some(false)` and `None` send
/// `strict: false`. The key is left out when the server does not support it.
pub(crate) fn convert_tools(
    tools: &[Tool],
    compat: &ResolvedCompat,
    strict: Option<bool>,
) -> ConvertedTools {
    let projected = project_tools(tools);
    let setting = compat.supports_strict_mode.then_some(strict == Some(true));
    let (kept, named): (Vec<&Tool>, Vec<(&str, Value)>) =
        projected.into_iter().map(|(tool, schema)| (tool, (tool.name.as_str(), schema))).unzip();
    let resolved = resolve_tool_list(named, setting);
    if let Some((index, reason)) = &resolved.downgraded {
        let name = kept.get(*index).map(|tool| tool.name.as_str()).unwrap_or_default();
        tracing::info!(tool = %name, %reason, "sending tools non-strict: a schema cannot be strict");
    }
    let mut out = ConvertedTools { strict_plans: resolved.plans, ..ConvertedTools::default() };
    for (tool, parameters) in kept.into_iter().zip(resolved.parameters) {
        out.tools.push(function_tool(tool, parameters, resolved.strict));
        out.names.push(tool.name.clone());
    }
    out
}

/// `{type:"function", function:{name, description, parameters, strict?}}`.
fn function_tool(tool: &Tool, parameters: Value, strict: Option<bool>) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), Value::from(tool.name.as_str()));
    function.insert("description".into(), Value::from(tool.description.as_str()));
    function.insert("parameters".into(), parameters);
    if let Some(strict) = strict {
        function.insert("strict".into(), Value::Bool(strict));
    }
    let mut wire = Map::new();
    wire.insert("type".into(), Value::from("function"));
    wire.insert("function".into(), Value::Object(function));
    Value::Object(wire)
}

/// `tool_choice` (OpenClaw's reconciliation against the surviving tools).
pub(crate) fn tool_choice(
    choice: Option<&ToolChoice>,
    names: &[String],
    provider: &str,
) -> Result<Option<Value>, Error> {
    let invalid = |message: String| {
        Error::new(ErrorKind::InvalidRequest, provider, message).with_retryable(false)
    };
    Ok(match choice {
        None => None,
        // Without tools `auto` and `none` mean the same thing, and OpenAI rejects
        // `tool_choice` without `tools`.
        Some(ToolChoice::Auto | ToolChoice::None) if names.is_empty() => None,
        Some(ToolChoice::Auto) => Some(Value::from("auto")),
        Some(ToolChoice::None) => Some(Value::from("none")),
        Some(ToolChoice::Required) if names.is_empty() => {
            return Err(invalid(
                "OpenAI Chat Completions tool_choice \"required\" needs a tool, but no tools survived schema conversion"
                    .to_owned(),
            ));
        }
        Some(ToolChoice::Required) => Some(Value::from("required")),
        Some(ToolChoice::Tool(name)) => {
            if !names.iter().any(|n| n == name) {
                return Err(invalid(format!(
                    "OpenAI Chat Completions tool_choice requested unavailable tool \"{name}\" after schema conversion"
                )));
            }
            Some(json!({"type": "function", "function": {"name": name}}))
        }
    })
}

fn is_same_model(message: &AssistantMessage, target: &Model) -> bool {
    message.provider == target.provider && message.api == target.api && message.model == target.id
}

/// Cuts OpenAI Responses composite ids (`call_x|fc_y`) from other models down to
/// their call id, as OpenClaw does, and rewrites the matching results. A cut that
/// would collide with another id in the transcript is skipped (the id normalizer
/// then hashes the full id, keeping ids distinct).
fn split_composite_ids<'m>(messages: &'m [Message], target: &Model) -> Cow<'m, [Message]> {
    let composite = |m: &Message| match m {
        Message::Assistant(a) => {
            !is_same_model(a, target) && a.tool_calls().any(|c| c.id.contains('|'))
        }
        _ => false,
    };
    if !messages.iter().any(composite) {
        return Cow::Borrowed(messages);
    }
    let mut used: HashSet<String> = HashSet::new();
    for m in messages {
        if let Message::Assistant(a) = m {
            used.extend(a.tool_calls().filter(|c| !c.id.contains('|')).map(|c| c.id.clone()));
        }
    }
    let mut map: HashMap<String, String> = HashMap::new();
    let mut out = messages.to_vec();
    for m in &mut out {
        match m {
            Message::Assistant(a) if !is_same_model(a, target) => {
                for block in &mut a.content {
                    let AssistantContent::ToolCall(call) = block else { continue };
                    let Some((head, _)) = call.id.split_once('|') else { continue };
                    if let Some(mapped) = map.get(&call.id) {
                        call.id = mapped.clone();
                        continue;
                    }
                    let cut: String =
                        head.chars().map(|c| if id_char(c) { c } else { '_' }).collect();
                    if cut.is_empty() || used.contains(&cut) {
                        continue;
                    }
                    used.insert(cut.clone());
                    map.insert(call.id.clone(), cut.clone());
                    call.id = cut;
                }
            }
            Message::ToolResult(r) => {
                if let Some(mapped) = map.get(&r.tool_call_id) {
                    r.tool_call_id = mapped.clone();
                }
            }
            _ => {}
        }
    }
    Cow::Owned(out)
}

/// The transcript as Chat Completions messages (system prompt first).
pub(crate) fn convert_messages(
    model: &Model,
    context: &Context,
    compat: &ResolvedCompat,
) -> Vec<Value> {
    let pre = split_composite_ids(&context.messages, model);
    let messages = transform_messages(&pre, model, Some(&ID_RULES));
    let mut out = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = context.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        let role =
            if model.reasoning && compat.supports_developer_role { "developer" } else { "system" };
        out.push(json!({"role": role, "content": system}));
    }
    let mut after_tool_result = false;
    let mut i = 0;
    while let Some(message) = messages.get(i) {
        match message {
            Message::User(user) => {
                i += 1;
                if compat.requires_assistant_after_tool_result && after_tool_result {
                    out.push(json!({"role": "assistant", "content": BRIDGE_TEXT}));
                }
                let content = match &user.content {
                    UserMessageContent::Text(text) if text.is_empty() => continue,
                    UserMessageContent::Text(text) => Value::from(text.as_str()),
                    UserMessageContent::Blocks(blocks) => {
                        let parts = user_parts(blocks, model.supports_images());
                        if parts.is_empty() {
                            continue;
                        }
                        Value::Array(parts)
                    }
                };
                out.push(object([("role", Value::from("user")), ("content", content)]));
                after_tool_result = false;
            }
            Message::Assistant(assistant) => {
                i += 1;
                if let Some(wire) = assistant_message(assistant, compat) {
                    out.push(wire);
                    after_tool_result = false;
                }
            }
            Message::ToolResult(_) => {
                let mut images = Vec::new();
                while let Some(Message::ToolResult(result)) = messages.get(i) {
                    out.push(tool_message(result, compat));
                    if model.supports_images() {
                        images.extend(result.content.iter().filter_map(image_part));
                    }
                    i += 1;
                }
                if images.is_empty() {
                    after_tool_result = true;
                } else {
                    if compat.requires_assistant_after_tool_result {
                        out.push(json!({"role": "assistant", "content": BRIDGE_TEXT}));
                    }
                    let mut parts = vec![json!({"type": "text", "text": TOOL_IMAGES_TEXT})];
                    parts.extend(images);
                    out.push(object([
                        ("role", Value::from("user")),
                        ("content", Value::Array(parts)),
                    ]));
                    after_tool_result = false;
                }
            }
        }
    }
    out
}

fn image_part(block: &UserContent) -> Option<Value> {
    match block {
        UserContent::Image(img) => Some(json!({
            "type": "image_url",
            "image_url": {"url": format!("data:{};base64,{}", img.mime_type, img.data)}
        })),
        UserContent::Text(_) => None,
    }
}

fn user_parts(blocks: &[UserContent], images: bool) -> Vec<Value> {
    blocks
        .iter()
        .filter_map(|b| match b {
            UserContent::Text(t) => Some(json!({"type": "text", "text": t.text})),
            UserContent::Image(_) if images => image_part(b),
            UserContent::Image(_) => None,
        })
        .collect()
}

/// Whether a thinking signature can name the assistant-message field its text goes in.
fn is_reasoning_field(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(
            name,
            "role" | "content" | "tool_calls" | "name" | "reasoning_details" | "tool_call_id"
        )
}

fn assistant_message(message: &AssistantMessage, compat: &ResolvedCompat) -> Option<Value> {
    let text: String = message
        .content
        .iter()
        .filter_map(|c| match c {
            AssistantContent::Text(t) if !t.text.trim().is_empty() => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    let thinking: Vec<_> = message
        .content
        .iter()
        .filter_map(|c| match c {
            AssistantContent::Thinking(t) if !t.thinking.trim().is_empty() => Some(t),
            _ => None,
        })
        .collect();
    let calls: Vec<_> = message.tool_calls().collect();

    let mut content = if text.is_empty() {
        if compat.requires_assistant_after_tool_result { Value::from("") } else { Value::Null }
    } else {
        Value::from(text.as_str())
    };
    let mut reasoning_field: Option<(String, String)> = None;
    let serialize_thinking = !thinking.is_empty()
        && (compat.thinking_format != ThinkingFormat::Deepseek || !calls.is_empty());
    if serialize_thinking {
        if compat.requires_thinking_as_text {
            let joined =
                thinking.iter().map(|t| t.thinking.as_str()).collect::<Vec<_>>().join("\n\n");
            let mut parts = vec![json!({"type": "text", "text": joined})];
            if !text.is_empty() {
                parts.push(json!({"type": "text", "text": text}));
            }
            content = Value::Array(parts);
        } else {
            let joined =
                thinking.iter().map(|t| t.thinking.as_str()).collect::<Vec<_>>().join("\n");
            let field = thinking
                .first()
                .and_then(|t| t.thinking_signature.as_deref())
                .filter(|s| is_reasoning_field(s))
                .map(str::to_owned)
                .or_else(|| {
                    compat.requires_reasoning_content.then(|| "reasoning_content".to_owned())
                });
            if let Some(field) = field {
                reasoning_field = Some((field, joined));
            }
        }
    }
    if compat.requires_reasoning_content && reasoning_field.is_none() {
        reasoning_field = Some(("reasoning_content".to_owned(), String::new()));
    }

    let has_content = match &content {
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    };
    if !has_content && calls.is_empty() {
        return None;
    }
    let mut wire = Map::new();
    wire.insert("role".into(), Value::from("assistant"));
    wire.insert("content".into(), content);
    if let Some((field, text)) = reasoning_field {
        wire.insert(field, Value::from(text));
    }
    if !calls.is_empty() {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|c| {
                let arguments =
                    serde_json::to_string(&c.arguments).unwrap_or_else(|_| "{}".to_owned());
                object([
                    ("id", Value::from(c.id.as_str())),
                    ("type", Value::from("function")),
                    (
                        "function",
                        object([
                            ("name", Value::from(c.name.as_str())),
                            ("arguments", Value::String(arguments)),
                        ]),
                    ),
                ])
            })
            .collect();
        wire.insert("tool_calls".into(), Value::Array(tool_calls));
        let details: Vec<Value> = calls
            .iter()
            .filter_map(|c| c.thought_signature.as_deref())
            .filter_map(|s| serde_json::from_str::<Value>(s).ok())
            .filter(|v| !v.is_null())
            .collect();
        if !details.is_empty() {
            wire.insert("reasoning_details".into(), Value::Array(details));
        }
    }
    Some(Value::Object(wire))
}

fn tool_message(result: &ToolResultMessage, compat: &ResolvedCompat) -> Value {
    let text = result.text();
    let content = if !text.is_empty() {
        text
    } else if result.content.iter().any(|c| matches!(c, UserContent::Image(_))) {
        SEE_IMAGE_TEXT.to_owned()
    } else {
        NO_OUTPUT_TEXT.to_owned()
    };
    let mut wire = Map::new();
    wire.insert("role".into(), Value::from("tool"));
    wire.insert("tool_call_id".into(), Value::from(result.tool_call_id.as_str()));
    wire.insert("content".into(), Value::from(content));
    if compat.requires_tool_result_name && !result.tool_name.is_empty() {
        wire.insert("name".into(), Value::from(result.tool_name.as_str()));
    }
    Value::Object(wire)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests;
