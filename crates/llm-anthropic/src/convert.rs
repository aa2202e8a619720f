//! Neutral request -> Anthropic Messages wire request. Pure: no IO, no clock, no randomness.
//!
//! The body is built from `serde_json::Map` in a fixed insertion order (the workspace enables
//! `preserve_order`), so identical input always serializes to identical bytes.
//!
//! Model flags are in `compat`, Claude version detection in `model_version`, OAuth's
//! key shape and tool-name casing in `oauth`, and prompt-cache markers in `cache`;
//! this module converts tools, messages and options.

use llm_core::output::OutputMode;
use std::collections::BTreeSet;

use llm_core::raw::object;
use llm_core::transform::{IdRules, transform_messages};
use llm_core::{
    AssistantContent, Context, Error, ErrorKind, Message, Model, ReasoningLevel, StreamOptions,
    Tool, ToolChoice, ToolResultMessage, UserContent, UserMessageContent,
};
use llm_http::{Converted, HeaderMap, HttpRequest, insert_header};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::PROVIDER;

mod cache;
mod compat;
mod model_version;
mod oauth;

use cache::{cache_control, count_markers, place_message_markers, system_blocks, with_cache};
pub use compat::AnthropicCompat;
pub(crate) use compat::Settings;
use model_version::claude_version;
pub use oauth::ToolNames;
pub(crate) use oauth::{is_oauth_key, to_claude_code_name};

/// Default API root when the model has no `base_url`.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The endpoint, appended to the base URL.
pub(crate) const ENDPOINT_PATH: &str = "/v1/messages";
/// The `anthropic-version` header value.
pub(crate) const ANTHROPIC_VERSION: &str = "2023-06-01";
/// Claude Code version mimicked by OAuth requests.
pub(crate) const CLAUDE_CODE_VERSION: &str = "2.1.75";
/// System block prepended to OAuth requests.
pub(crate) const CLAUDE_CODE_IDENTITY: &str =
    "You are Claude Code, Anthropic's official CLI for Claude.";
/// OpenClaw's marker between the cacheable prefix and the dynamic suffix of a system prompt.
pub(crate) const CACHE_BOUNDARY: &str = "\n<!-- OPENCLAW_CACHE_BOUNDARY -->\n";
/// Anthropic accepts at most four `cache_control` markers per request.
const CACHE_CONTROL_LIMIT: usize = 4;
/// Stands in for an assistant turn whose only content was omitted thinking.
const OMITTED_REASONING_TEXT: &str = "[assistant reasoning omitted]";
const FINE_GRAINED_TOOL_STREAMING_BETA: &str = "fine-grained-tool-streaming-2025-05-14";
const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";
const OAUTH_BETAS: [&str; 2] = ["claude-code-20250219", "oauth-2025-04-20"];
/// Fallback `max_tokens` when neither the options nor the model give one (the API requires it).
const FALLBACK_MAX_TOKENS: u64 = 4096;

/// Provider options this crate reads from [`StreamOptions::provider_options`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct AnthropicOptions {
    thinking_enabled: Option<bool>,
    thinking_budget_tokens: Option<u64>,
    effort: Option<String>,
    thinking_display: Option<String>,
    interleaved_thinking: Option<bool>,
    disable_parallel_tool_use: Option<bool>,
    metadata: Option<Value>,
    /// Anthropic server tools (`web_search_20250305`, ...), sent after the client tools.
    server_tools: Option<Vec<Map<String, Value>>>,
}

impl AnthropicOptions {
    fn from_options(options: &StreamOptions) -> Result<Self, Error> {
        options.typed_provider_options(PROVIDER, "Anthropic")
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidRequest, PROVIDER, message).with_retryable(false)
}

/// Builds the request: URL, headers (defaults, auth, model headers, caller headers last) and body.
pub(crate) fn build_request(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<Converted<ToolNames>, Error> {
    let Some(key) = options.api_key.as_ref().map(|k| k.expose()).filter(|k| !k.trim().is_empty())
    else {
        let name = if model.provider.is_empty() { PROVIDER } else { model.provider.as_str() };
        return Err(Error::new(
            ErrorKind::Auth,
            PROVIDER,
            format!("No API key for provider: {name}"),
        )
        .with_retryable(false));
    };
    let oauth = is_oauth_key(key);
    let settings = Settings::resolve(model)?;
    let extra = AnthropicOptions::from_options(options)?;
    // Checked before anything else is built: a format the model cannot carry is an error.
    let output = llm_core::output::plan(&crate::INFO, PROVIDER, model, context, options, true)?;
    let cache = cache_control(options.cache_retention, settings);

    let (tools, projection) = convert_tools(&context.tools, oauth, settings, cache.as_ref())?;
    let thinking = resolve_thinking(model, options, &extra, settings);

    let system = system_blocks(context.system_prompt.as_deref(), oauth, cache.as_ref());
    let markers = count_markers(&system) + count_markers(&tools);
    let budget = CACHE_CONTROL_LIMIT.saturating_sub(markers);
    let messages =
        convert_messages(&context.messages, model, oauth, cache.as_ref(), budget, thinking.replay);

    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.id.clone()));
    body.insert("messages".into(), Value::Array(messages));
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system.into_iter().map(Value::Object).collect()));
    }
    body.insert("max_tokens".into(), json!(thinking.max_tokens));
    body.insert("stream".into(), Value::Bool(true));
    if let Some(t) = options.temperature {
        let rejects = claude_version(&model.id).is_some_and(|v| v.rejects_temperature());
        if !thinking.enabled && !rejects {
            body.insert("temperature".into(), json!(t));
        }
    }
    if !options.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(options.stop));
    }
    let mut tools = tools;
    let mut forced = None;
    let mut format_config = None;
    if let (Some(plan), Some(format)) = (output, options.output.as_ref()) {
        if plan.mode == OutputMode::Tool {
            if thinking.enabled {
                // The API rejects a forced tool choice while thinking is on.
                return Err(Error::new(
                    ErrorKind::InvalidRequest,
                    PROVIDER,
                    format!(
                        "Model {} carries an output format as a forced tool, which thinking does not allow; turn reasoning off",
                        model.id
                    ),
                )
                .with_retryable(false));
            }
            let mut tool = Map::new();
            tool.insert("name".into(), Value::String(format.name.clone()));
            tool.insert("description".into(), Value::String(format.as_tool().description));
            tool.insert("input_schema".into(), plan.schema);
            tools.push(tool);
            forced = Some(json!({"type": "tool", "name": format.name}));
        } else {
            format_config =
                Some(object([("type", Value::from("json_schema")), ("schema", plan.schema)]));
        }
    }
    let has_tools = !tools.is_empty();
    let server_tools = extra.server_tools.clone().unwrap_or_default();
    if has_tools || !server_tools.is_empty() {
        let all = tools.into_iter().chain(server_tools).map(Value::Object).collect();
        body.insert("tools".into(), Value::Array(all));
    }
    if let Some(choice) = forced {
        body.insert("tool_choice".into(), choice);
    } else if let Some(choice) = tool_choice(options.tool_choice.as_ref(), &extra, &projection)? {
        body.insert("tool_choice".into(), choice);
    }
    if let Some(t) = thinking.param {
        body.insert("thinking".into(), t);
    }
    let mut output_config = Map::new();
    if let Some(effort) = thinking.effort {
        output_config.insert("effort".into(), json!(effort));
    }
    if let Some(format) = format_config {
        output_config.insert("format".into(), format);
    }
    if !output_config.is_empty() {
        body.insert("output_config".into(), Value::Object(output_config));
    }
    if let Some(user_id) =
        extra.metadata.as_ref().and_then(|m| m.get("user_id")).and_then(Value::as_str)
    {
        body.insert("metadata".into(), json!({ "user_id": user_id }));
    }

    // Headers: defaults, auth, model headers, caller headers (later wins, case-insensitively).
    let mut betas: Vec<&str> = Vec::new();
    if oauth {
        betas.extend(OAUTH_BETAS);
    }
    if has_tools && !settings.eager_tool_input_streaming {
        betas.push(FINE_GRAINED_TOOL_STREAMING_BETA);
    }
    if thinking.enabled && !settings.adaptive_thinking && extra.interleaved_thinking.unwrap_or(true)
    {
        betas.push(INTERLEAVED_THINKING_BETA);
    }
    let mut headers = HeaderMap::new();
    let mut set = |name: &str, value: &str| insert_header(&mut headers, PROVIDER, name, value);
    set("content-type", "application/json")?;
    set("accept", "text/event-stream")?;
    set("anthropic-version", ANTHROPIC_VERSION)?;
    if !betas.is_empty() {
        set("anthropic-beta", &betas.join(","))?;
    }
    if oauth {
        set("authorization", &format!("Bearer {key}"))?;
        set("anthropic-dangerous-direct-browser-access", "true")?;
        set("user-agent", &format!("claude-cli/{CLAUDE_CODE_VERSION}"))?;
        set("x-app", "cli")?;
    } else {
        set("x-api-key", key)?;
        if settings.session_affinity_headers
            && cache.is_some()
            && let Some(session) = options.session_id.as_deref().filter(|s| !s.is_empty())
        {
            set("x-session-affinity", session)?;
        }
    }
    for (k, v) in &model.headers {
        set(k, v)?;
    }
    for (k, v) in &options.headers {
        set(k, v)?;
    }

    let base =
        if model.base_url.trim().is_empty() { DEFAULT_BASE_URL } else { model.base_url.trim() };
    let url = format!("{}{ENDPOINT_PATH}", base.trim_end_matches('/'));
    let tool_names =
        if oauth { ToolNames::from_projection(&projection) } else { ToolNames::default() };
    let http = HttpRequest::json(PROVIDER, url, headers, &body)?;
    Ok(Converted::new(http, tool_names))
}

fn text_block(text: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), Value::String("text".into()));
    m.insert("text".into(), Value::String(text.to_owned()));
    m
}

/// A tool after schema projection.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProjectedTool {
    pub(crate) original_name: String,
    pub(crate) wire_name: String,
    description: String,
    input_schema: Value,
}

/// The projected tool list (OpenClaw `projectAnthropicTools`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Projection {
    input_count: usize,
    unavailable: BTreeSet<String>,
    pub(crate) tools: Vec<ProjectedTool>,
}

/// Projects tools to Anthropic's shape: the schema is rebuilt as exactly
/// `{type:"object", properties, required}`; tools whose schema cannot be expressed are dropped
/// (and logged); two tools that map to one wire name are an error.
pub(crate) fn project_tools(tools: &[Tool], oauth: bool) -> Result<Projection, Error> {
    let mut out = Projection { input_count: tools.len(), ..Projection::default() };
    for tool in tools {
        if tool.name.is_empty() {
            continue;
        }
        let Some(schema) = project_schema(&tool.parameters) else {
            tracing::warn!(tool = %tool.name, "dropping tool: its parameters are not an object schema");
            out.unavailable.insert(tool.name.clone());
            continue;
        };
        let wire_name = if oauth { to_claude_code_name(&tool.name) } else { tool.name.clone() };
        if let Some(other) =
            out.tools.iter().find(|t| t.wire_name == wire_name && t.original_name != tool.name)
        {
            return Err(invalid(format!(
                "Anthropic tool names \"{}\" and \"{}\" both map to \"{}\"",
                other.original_name, tool.name, wire_name
            )));
        }
        out.tools.push(ProjectedTool {
            original_name: tool.name.clone(),
            wire_name,
            description: tool.description.clone(),
            input_schema: schema,
        });
    }
    Ok(out)
}

fn project_schema(parameters: &Value) -> Option<Value> {
    let empty = Map::new();
    let schema = match parameters {
        Value::Object(m) => m,
        Value::Null => &empty,
        _ => return None,
    };
    if let Some(t) = schema.get("type")
        && t.as_str() != Some("object")
    {
        return None;
    }
    let properties = match schema.get("properties") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => return None,
    };
    let required = match schema.get("required") {
        None | Some(Value::Null) => Value::Array(Vec::new()),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            Value::Array(items.clone())
        }
        Some(_) => return None,
    };
    Some(object([
        ("type", Value::from("object")),
        ("properties", properties),
        ("required", required),
    ]))
}

/// Wire tools: `{name, description, input_schema}`, `eager_input_streaming` when supported,
/// `cache_control` on the last one.
fn convert_tools(
    tools: &[Tool],
    oauth: bool,
    settings: Settings,
    cache: Option<&Value>,
) -> Result<(Vec<Map<String, Value>>, Projection), Error> {
    let projection = project_tools(tools, oauth)?;
    let last = projection.tools.len().saturating_sub(1);
    let mut out = Vec::with_capacity(projection.tools.len());
    for (i, tool) in projection.tools.iter().enumerate() {
        let mut m = Map::new();
        m.insert("name".into(), Value::String(tool.wire_name.clone()));
        if !tool.description.is_empty() {
            m.insert("description".into(), Value::String(tool.description.clone()));
        }
        m.insert("input_schema".into(), tool.input_schema.clone());
        if settings.eager_tool_input_streaming {
            m.insert("eager_input_streaming".into(), Value::Bool(true));
        }
        if i == last && settings.cache_control_on_tools {
            m = with_cache(m, cache);
        }
        out.push(m);
    }
    Ok((out, projection))
}

/// `tool_choice`, reconciled with the projection (OpenClaw `reconcileAnthropicToolChoice`).
fn tool_choice(
    choice: Option<&ToolChoice>,
    extra: &AnthropicOptions,
    projection: &Projection,
) -> Result<Option<Value>, Error> {
    let disable_parallel = extra.disable_parallel_tool_use.filter(|d| *d);
    let choice = match (choice, disable_parallel) {
        (Some(c), _) => c.clone(),
        (None, Some(_)) => ToolChoice::Auto,
        (None, None) => return Ok(None),
    };
    let mut m = Map::new();
    match &choice {
        ToolChoice::Auto => {
            m.insert("type".into(), json!("auto"));
        }
        ToolChoice::None => {
            m.insert("type".into(), json!("none"));
        }
        ToolChoice::Required => {
            m.insert("type".into(), json!("any"));
        }
        ToolChoice::Tool(name) => {
            m.insert("type".into(), json!("tool"));
            let wire = if projection.input_count == 0 {
                name.clone()
            } else if let Some(t) = projection.tools.iter().find(|t| &t.original_name == name) {
                t.wire_name.clone()
            } else if projection.unavailable.contains(name)
                || !projection.tools.iter().any(|t| &t.wire_name == name)
            {
                return Err(invalid(format!(
                    "Anthropic tool_choice requested unavailable tool \"{name}\" after schema conversion"
                )));
            } else {
                name.clone()
            };
            m.insert("name".into(), Value::String(wire));
        }
    }
    if projection.input_count > 0 && projection.tools.is_empty() {
        match choice {
            ToolChoice::Auto => return Ok(None),
            ToolChoice::Required => {
                return Err(invalid(
                    "Anthropic tool_choice requires a tool, but no tools survived schema conversion",
                ));
            }
            _ => {}
        }
    }
    if disable_parallel.is_some() && !matches!(choice, ToolChoice::None) {
        m.insert("disable_parallel_tool_use".into(), Value::Bool(true));
    }
    Ok(Some(Value::Object(m)))
}

/// How thinking is configured for this request.
#[derive(Debug, Clone, PartialEq)]
struct Thinking {
    /// Thinking is on for this request.
    enabled: bool,
    /// Replay earlier thinking blocks (otherwise only the active tool turn's).
    replay: bool,
    /// The `thinking` parameter, if any.
    param: Option<Value>,
    /// `output_config.effort` for adaptive models.
    effort: Option<String>,
    /// `max_tokens` after fitting the thinking budget.
    max_tokens: u64,
}

fn resolve_thinking(
    model: &Model,
    options: &StreamOptions,
    extra: &AnthropicOptions,
    settings: Settings,
) -> Thinking {
    let model_max = model.max_tokens;
    let base_max = options.max_tokens.filter(|m| *m > 0).or((model_max > 0).then_some(model_max));
    let mut max_tokens = base_max.unwrap_or(FALLBACK_MAX_TOKENS);
    let thinking_model = model.reasoning || settings.adaptive_thinking;
    let wanted = extra.thinking_enabled.unwrap_or(options.reasoning.is_some());
    let enabled = wanted && thinking_model;
    let mut param = None;
    let mut effort = None;
    if enabled {
        if settings.adaptive_thinking {
            let display = extra.thinking_display.clone().unwrap_or_else(|| "summarized".into());
            param = Some(json!({ "type": "adaptive", "display": display }));
            effort =
                extra.effort.clone().or_else(|| options.reasoning.map(|l| map_effort(model, l)));
        } else {
            let mut budget = extra
                .thinking_budget_tokens
                .or_else(|| options.reasoning.map(ReasoningLevel::default_budget))
                .unwrap_or(1024);
            if options.reasoning.is_some() {
                max_tokens = match options.max_tokens.filter(|m| *m > 0) {
                    None => base_max.unwrap_or(FALLBACK_MAX_TOKENS),
                    Some(m) if model_max > 0 => m.saturating_add(budget).min(model_max),
                    Some(m) => m.saturating_add(budget),
                };
                if max_tokens <= budget {
                    budget = max_tokens.saturating_sub(1024);
                }
            }
            let mut t = Map::new();
            t.insert("type".into(), json!("enabled"));
            t.insert("budget_tokens".into(), json!(budget));
            if let Some(display) = &extra.thinking_display {
                t.insert("display".into(), json!(display));
            }
            param = Some(Value::Object(t));
        }
    } else if thinking_model {
        param = Some(json!({ "type": "disabled" }));
    }
    Thinking { enabled, replay: enabled, param, effort, max_tokens }
}

fn map_effort(model: &Model, level: ReasoningLevel) -> String {
    let v = claude_version(&model.id);
    match level {
        ReasoningLevel::Minimal | ReasoningLevel::Low => "low",
        ReasoningLevel::Medium => "medium",
        ReasoningLevel::High => "high",
        ReasoningLevel::Xhigh if v.is_some_and(|v| v.native_xhigh()) => "xhigh",
        ReasoningLevel::Max if v.is_some_and(|v| v.native_max()) => "max",
        ReasoningLevel::Xhigh | ReasoningLevel::Max => "high",
    }
    .to_owned()
}

/// A wire message under construction.
#[derive(Debug, Clone, PartialEq)]
struct WireMessage {
    role: &'static str,
    content: WireContent,
}

#[derive(Debug, Clone, PartialEq)]
enum WireContent {
    Text(String),
    Blocks(Vec<Map<String, Value>>),
}

fn image_block(data: &str, mime_type: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), json!("image"));
    m.insert("source".into(), json!({ "type": "base64", "media_type": mime_type, "data": data }));
    m
}

/// The index of the assistant whose tool calls the trailing run of tool results answers
/// (its thinking is replayed even when thinking is off for this request).
fn active_tool_turn(messages: &[Message]) -> Option<usize> {
    let mut ids = BTreeSet::new();
    let mut i = messages.len();
    while i > 0 {
        match messages.get(i - 1) {
            Some(Message::ToolResult(r)) => {
                ids.insert(r.tool_call_id.as_str());
                i -= 1;
            }
            _ => break,
        }
    }
    if ids.is_empty() || i == 0 {
        return None;
    }
    let Some(Message::Assistant(a)) = messages.get(i - 1) else { return None };
    let calls: BTreeSet<&str> = a.tool_calls().map(|c| c.id.as_str()).collect();
    ids.iter().all(|id| calls.contains(id)).then_some(i - 1)
}

/// `tool_result.content`: the joined text, or text/image blocks when there are images.
fn tool_result_content(result: &ToolResultMessage) -> Value {
    let has_images = result.content.iter().any(|c| matches!(c, UserContent::Image(_)));
    if !has_images {
        return Value::String(result.text());
    }
    let mut blocks = Vec::new();
    let mut has_text = false;
    for c in &result.content {
        match c {
            UserContent::Text(t) if !t.text.is_empty() => {
                blocks.push(Value::Object(text_block(&t.text)));
                has_text = true;
            }
            UserContent::Text(_) => {}
            UserContent::Image(img) => {
                blocks.push(Value::Object(image_block(&img.data, &img.mime_type)))
            }
        }
    }
    if !has_text {
        blocks.insert(0, Value::Object(text_block("(see attached image)")));
    }
    Value::Array(blocks)
}

/// The citations kept in a text block's signature (`{"citations":[...]}`, see `stream.rs`).
fn text_citations(signature: Option<&str>) -> Option<Value> {
    let value: Value = serde_json::from_str(signature?).ok()?;
    value.get("citations").filter(|c| c.as_array().is_some_and(|a| !a.is_empty())).cloned()
}

/// Converts the transcript (after llm-core's cross-provider transform) to wire messages and
/// places the message-level cache markers.
fn convert_messages(
    messages: &[Message],
    model: &Model,
    oauth: bool,
    cache: Option<&Value>,
    budget: usize,
    replay_thinking: bool,
) -> Vec<Value> {
    let messages = transform_messages(messages, model, Some(&IdRules::ALNUM_DASH_64));
    let active = if replay_thinking { None } else { active_tool_turn(&messages) };
    let mut out: Vec<WireMessage> = Vec::new();
    let mut i = 0;
    while let Some(msg) = messages.get(i) {
        match msg {
            Message::User(u) => match &u.content {
                UserMessageContent::Text(t) => {
                    if !t.trim().is_empty() {
                        out.push(WireMessage {
                            role: "user",
                            content: WireContent::Text(t.clone()),
                        });
                    }
                }
                UserMessageContent::Blocks(items) => {
                    let blocks: Vec<Map<String, Value>> = items
                        .iter()
                        .filter_map(|c| match c {
                            UserContent::Text(t) if t.text.trim().is_empty() => None,
                            UserContent::Text(t) => Some(text_block(&t.text)),
                            UserContent::Image(img) => Some(image_block(&img.data, &img.mime_type)),
                        })
                        .collect();
                    if !blocks.is_empty() {
                        out.push(WireMessage {
                            role: "user",
                            content: WireContent::Blocks(blocks),
                        });
                    }
                }
            },
            Message::Assistant(a) => {
                let mut blocks = Vec::new();
                let mut omitted = false;
                for block in &a.content {
                    match block {
                        AssistantContent::Text(t) => {
                            if !t.text.trim().is_empty() {
                                let mut block = text_block(&t.text);
                                // Citations were kept as the signature (same model only).
                                if let Some(citations) = text_citations(t.text_signature.as_deref())
                                {
                                    block.insert("citations".into(), citations);
                                }
                                blocks.push(block);
                            }
                        }
                        AssistantContent::ProviderContent(p) => {
                            // Server-tool blocks, compaction, ...: only this model's survive
                            // the transform, and they go back unchanged.
                            if let Value::Object(block) = &p.data {
                                blocks.push(block.clone());
                            }
                        }
                        AssistantContent::Thinking(t) => {
                            if !replay_thinking && active != Some(i) {
                                omitted = true;
                                continue;
                            }
                            let signature = t.thinking_signature.as_deref().unwrap_or("");
                            if t.redacted {
                                let mut m = Map::new();
                                m.insert("type".into(), json!("redacted_thinking"));
                                m.insert("data".into(), json!(signature));
                                blocks.push(m);
                                continue;
                            }
                            if signature.trim() == "reasoning_content" {
                                // An OpenAI-compatible field-name marker, not a signature.
                                continue;
                            }
                            if signature.trim().is_empty() {
                                // Unsigned (e.g. an aborted stream): plain text, no tags.
                                if !t.thinking.trim().is_empty() {
                                    blocks.push(text_block(&t.thinking));
                                }
                                continue;
                            }
                            // Same model: the signed block goes back byte for byte.
                            let mut m = Map::new();
                            m.insert("type".into(), json!("thinking"));
                            m.insert("thinking".into(), json!(t.thinking));
                            m.insert("signature".into(), json!(signature));
                            blocks.push(m);
                        }
                        AssistantContent::ToolCall(call) => {
                            let name = if oauth {
                                to_claude_code_name(&call.name)
                            } else {
                                call.name.clone()
                            };
                            let input = if call.arguments.is_object() {
                                call.arguments.clone()
                            } else {
                                Value::Object(Map::new())
                            };
                            let mut m = Map::new();
                            m.insert("type".into(), json!("tool_use"));
                            m.insert("id".into(), json!(call.id));
                            m.insert("name".into(), json!(name));
                            m.insert("input".into(), input);
                            blocks.push(m);
                        }
                    }
                }
                if blocks.is_empty() && omitted {
                    blocks.push(text_block(OMITTED_REASONING_TEXT));
                }
                if !blocks.is_empty() {
                    out.push(WireMessage {
                        role: "assistant",
                        content: WireContent::Blocks(blocks),
                    });
                }
            }
            Message::ToolResult(_) => {
                // A run of consecutive tool results becomes one user message.
                let mut blocks = Vec::new();
                while let Some(Message::ToolResult(r)) = messages.get(i) {
                    let mut m = Map::new();
                    m.insert("type".into(), json!("tool_result"));
                    m.insert("tool_use_id".into(), json!(r.tool_call_id));
                    m.insert("content".into(), tool_result_content(r));
                    m.insert("is_error".into(), Value::Bool(r.is_error));
                    blocks.push(m);
                    i += 1;
                }
                out.push(WireMessage { role: "user", content: WireContent::Blocks(blocks) });
                continue;
            }
        }
        i += 1;
    }
    if let Some(cache) = cache {
        place_message_markers(&mut out, cache, budget);
    }
    out.into_iter()
        .map(|m| {
            let content = match m.content {
                WireContent::Text(t) => Value::String(t),
                WireContent::Blocks(b) => Value::Array(b.into_iter().map(Value::Object).collect()),
            };
            object([("role", Value::from(m.role)), ("content", content)])
        })
        .collect()
}

#[cfg(test)]
mod tests;
