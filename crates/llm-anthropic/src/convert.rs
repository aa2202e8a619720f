//! Neutral request -> Anthropic Messages wire request. Pure: no IO, no clock, no randomness.
//!
//! The body is built from `serde_json::Map` in a fixed insertion order (the workspace enables
//! `preserve_order`), so identical input always serializes to identical bytes.

use std::collections::BTreeSet;
use std::fmt;

use llm_core::transform::{IdRules, transform_messages};
use llm_core::{
    AssistantContent, CacheRetention, Context, Error, ErrorKind, Message, Model, ReasoningLevel,
    StreamOptions, Tool, ToolChoice, ToolResultMessage, UserContent, UserMessageContent,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::PROVIDER;

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

/// Claude Code's canonical tool names; OAuth requests use this casing on the wire.
const CLAUDE_CODE_TOOLS: [&str; 17] = [
    "Read",
    "Write",
    "Edit",
    "Bash",
    "Grep",
    "Glob",
    "AskUserQuestion",
    "EnterPlanMode",
    "ExitPlanMode",
    "KillShell",
    "NotebookEdit",
    "Skill",
    "Task",
    "TaskOutput",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
];

/// Anthropic-specific model flags, parsed from [`Model::compat`].
///
/// Every field is optional; `None` means "use the default for this model's provider":
/// everything is supported except on `fireworks`, and session-affinity headers are sent for
/// `fireworks` and for `cloudflare-ai-gateway` routes whose base URL contains `anthropic`.
/// JSON field names are camelCase, as in OpenClaw's `AnthropicMessagesCompat`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AnthropicCompat {
    /// Send `eager_input_streaming: true` on every tool (otherwise the
    /// `fine-grained-tool-streaming-2025-05-14` beta header is sent when tools are present).
    pub supports_eager_tool_input_streaming: Option<bool>,
    /// Honour `CacheRetention::Long` with `ttl: "1h"` cache markers.
    pub supports_long_cache_retention: Option<bool>,
    /// Put a `cache_control` marker on the last tool.
    pub supports_cache_control_on_tools: Option<bool>,
    /// Send `x-session-affinity: <session id>` (API-key auth, caching on, session id given).
    pub send_session_affinity_headers: Option<bool>,
    /// The model uses adaptive thinking (`{type: "adaptive"}` + `output_config.effort`) instead
    /// of a token budget. Defaults from the model id (Claude Opus/Sonnet 4.6 and later).
    pub supports_adaptive_thinking: Option<bool>,
}

impl AnthropicCompat {
    /// Parses `model.compat`; a missing or malformed value gives the defaults.
    pub fn from_model(model: &Model) -> Self {
        match &model.compat {
            Some(value) => match serde_json::from_value(value.clone()) {
                Ok(compat) => compat,
                Err(e) => {
                    tracing::warn!(model = %model.id, error = %e, "ignoring malformed anthropic compat");
                    AnthropicCompat::default()
                }
            },
            None => AnthropicCompat::default(),
        }
    }
}

/// [`AnthropicCompat`] with the defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) eager_tool_input_streaming: bool,
    pub(crate) long_cache_retention: bool,
    pub(crate) cache_control_on_tools: bool,
    pub(crate) session_affinity_headers: bool,
    pub(crate) adaptive_thinking: bool,
}

impl Settings {
    pub(crate) fn resolve(model: &Model) -> Settings {
        let compat = AnthropicCompat::from_model(model);
        let fireworks = model.provider == "fireworks";
        let cf_anthropic =
            model.provider == "cloudflare-ai-gateway" && model.base_url.contains("anthropic");
        Settings {
            eager_tool_input_streaming: compat
                .supports_eager_tool_input_streaming
                .unwrap_or(!fireworks),
            long_cache_retention: compat.supports_long_cache_retention.unwrap_or(!fireworks),
            cache_control_on_tools: compat.supports_cache_control_on_tools.unwrap_or(!fireworks),
            session_affinity_headers: compat
                .send_session_affinity_headers
                .unwrap_or(fireworks || cf_anthropic),
            adaptive_thinking: compat
                .supports_adaptive_thinking
                .unwrap_or_else(|| claude_version(&model.id).is_some_and(|v| v.adaptive())),
        }
    }
}

/// Family and version read from a Claude model id (`claude-opus-4-6`, `claude-sonnet-4.5-…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ClaudeVersion {
    family: Family,
    major: u32,
    minor: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Opus,
    Sonnet,
    Haiku,
    /// Fable / Mythos: always adaptive.
    Frontier,
}

impl ClaudeVersion {
    fn at_least(self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }

    fn adaptive(self) -> bool {
        match self.family {
            Family::Frontier => true,
            Family::Opus | Family::Sonnet => self.at_least(4, 6),
            Family::Haiku => self.at_least(5, 0),
        }
    }

    /// Models that reject a custom `temperature` (Opus 4.7 and later).
    fn rejects_temperature(self) -> bool {
        match self.family {
            Family::Frontier => true,
            Family::Opus => self.at_least(4, 7),
            Family::Sonnet | Family::Haiku => self.at_least(5, 0),
        }
    }

    fn native_xhigh(self) -> bool {
        matches!(self.family, Family::Frontier)
            || (self.family == Family::Opus && self.at_least(4, 7))
    }

    fn native_max(self) -> bool {
        matches!(self.family, Family::Frontier)
            || (self.family == Family::Opus && self.at_least(4, 6))
    }
}

fn claude_version(id: &str) -> Option<ClaudeVersion> {
    let id = id.to_ascii_lowercase().replace(['.', '_', ' '], "-");
    for (word, family) in [
        ("fable", Family::Frontier),
        ("mythos", Family::Frontier),
        ("opus", Family::Opus),
        ("sonnet", Family::Sonnet),
        ("haiku", Family::Haiku),
    ] {
        let Some(pos) = id.find(word) else { continue };
        if family == Family::Frontier {
            return Some(ClaudeVersion { family, major: 5, minor: 0 });
        }
        // `opus-4-6`, `opus-4`, or the old `3-5-sonnet` order.
        let after: Vec<&str> = id.get(pos + word.len()..).unwrap_or("").split('-').collect();
        let nums = |parts: &[&str]| -> Option<(u32, u32)> {
            let mut it = parts.iter().filter(|p| !p.is_empty());
            let major: u32 = it.next()?.parse().ok()?;
            // A date suffix (`20250514`) is not a minor version.
            let minor =
                it.next().and_then(|m| m.parse::<u32>().ok()).filter(|m| *m < 100).unwrap_or(0);
            (major < 100).then_some((major, minor))
        };
        if let Some((major, minor)) = nums(&after) {
            return Some(ClaudeVersion { family, major, minor });
        }
        let before: Vec<&str> =
            id.get(..pos).unwrap_or("").split('-').filter(|p| !p.is_empty()).collect();
        let tail: Vec<&str> = before.iter().rev().take(2).rev().copied().collect();
        let parsed: Vec<u32> = tail.iter().filter_map(|p| p.parse().ok()).collect();
        return match parsed.as_slice() {
            [major, minor] => Some(ClaudeVersion { family, major: *major, minor: *minor }),
            [major] => Some(ClaudeVersion { family, major: *major, minor: 0 }),
            _ => None,
        };
    }
    None
}

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
        let map: Map<String, Value> =
            options.provider_options.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        serde_json::from_value(Value::Object(map)).map_err(|e| {
            Error::new(
                ErrorKind::InvalidRequest,
                PROVIDER,
                format!("Invalid Anthropic provider option: {e}"),
            )
            .with_retryable(false)
        })
    }
}

/// Maps Claude Code wire names back to the caller's tool names (OAuth only). Built per request
/// from the request's own tool list: no process-wide cache.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ToolNames {
    wire_to_original: Vec<(String, String)>,
}

impl ToolNames {
    /// The wire -> original map of a projection.
    pub(crate) fn from_projection(projection: &Projection) -> Self {
        ToolNames {
            wire_to_original: projection
                .tools
                .iter()
                .map(|t| (t.wire_name.clone(), t.original_name.clone()))
                .collect(),
        }
    }

    /// The caller's name for a wire name; unknown names pass through.
    pub(crate) fn original(&self, wire: &str) -> String {
        self.wire_to_original
            .iter()
            .find(|(w, _)| w == wire)
            .map(|(_, o)| o.clone())
            .unwrap_or_else(|| wire.to_owned())
    }
}

/// Everything needed to send one request.
pub(crate) struct WireRequest {
    /// Full URL (base URL + endpoint).
    pub(crate) url: String,
    /// Headers in send order; later duplicates were already merged away.
    pub(crate) headers: Vec<(String, String)>,
    /// The JSON body.
    pub(crate) body: Value,
    /// Wire -> original tool names for the response (empty unless OAuth).
    pub(crate) tool_names: ToolNames,
}

impl fmt::Debug for WireRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WireRequest")
            .field("url", &self.url)
            .field("headers", &llm_http::RedactedHeaders(&self.headers))
            .field("body", &self.body)
            .finish_non_exhaustive()
    }
}

/// Whether a key is an Anthropic OAuth token (Claude subscription): Bearer auth + Claude Code identity.
pub(crate) fn is_oauth_key(key: &str) -> bool {
    key.contains("sk-ant-oat")
}

/// The Claude Code casing of a tool name (case-insensitive match), else the name unchanged.
pub(crate) fn to_claude_code_name(name: &str) -> String {
    CLAUDE_CODE_TOOLS
        .iter()
        .find(|cc| cc.eq_ignore_ascii_case(name))
        .map(|cc| (*cc).to_owned())
        .unwrap_or_else(|| name.to_owned())
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidRequest, PROVIDER, message).with_retryable(false)
}

/// Builds the request: URL, headers (defaults, auth, model headers, caller headers last) and body.
pub(crate) fn build_request(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<WireRequest, Error> {
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
    let settings = Settings::resolve(model);
    let extra = AnthropicOptions::from_options(options)?;
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
    let has_tools = !tools.is_empty();
    let server_tools = extra.server_tools.clone().unwrap_or_default();
    if has_tools || !server_tools.is_empty() {
        let all = tools.into_iter().chain(server_tools).map(Value::Object).collect();
        body.insert("tools".into(), Value::Array(all));
    }
    if let Some(choice) = tool_choice(options.tool_choice.as_ref(), &extra, &projection)? {
        body.insert("tool_choice".into(), choice);
    }
    if let Some(t) = thinking.param {
        body.insert("thinking".into(), t);
    }
    if let Some(effort) = thinking.effort {
        body.insert("output_config".into(), json!({ "effort": effort }));
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
    let mut headers = Headers::default();
    headers.set("content-type", "application/json");
    headers.set("accept", "text/event-stream");
    headers.set("anthropic-version", ANTHROPIC_VERSION);
    if !betas.is_empty() {
        headers.set("anthropic-beta", &betas.join(","));
    }
    if oauth {
        headers.set("authorization", &format!("Bearer {key}"));
        headers.set("anthropic-dangerous-direct-browser-access", "true");
        headers.set("user-agent", &format!("claude-cli/{CLAUDE_CODE_VERSION}"));
        headers.set("x-app", "cli");
    } else {
        headers.set("x-api-key", key);
        if settings.session_affinity_headers
            && cache.is_some()
            && let Some(session) = options.session_id.as_deref().filter(|s| !s.is_empty())
        {
            headers.set("x-session-affinity", session);
        }
    }
    for (k, v) in &model.headers {
        headers.set(k, v);
    }
    for (k, v) in &options.headers {
        headers.set(k, v);
    }

    let base =
        if model.base_url.trim().is_empty() { DEFAULT_BASE_URL } else { model.base_url.trim() };
    let url = format!("{}{ENDPOINT_PATH}", base.trim_end_matches('/'));
    let tool_names =
        if oauth { ToolNames::from_projection(&projection) } else { ToolNames::default() };
    Ok(WireRequest { url, headers: headers.0, body: Value::Object(body), tool_names })
}

/// Header list with case-insensitive replacement.
#[derive(Default)]
struct Headers(Vec<(String, String)>);

impl Headers {
    fn set(&mut self, name: &str, value: &str) {
        self.0.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
        self.0.push((name.to_owned(), value.to_owned()));
    }
}

/// The `cache_control` marker for this request, or `None` when caching is off.
fn cache_control(retention: CacheRetention, settings: Settings) -> Option<Value> {
    match retention {
        CacheRetention::None => None,
        CacheRetention::Short => Some(json!({ "type": "ephemeral" })),
        CacheRetention::Long if settings.long_cache_retention => {
            Some(json!({ "type": "ephemeral", "ttl": "1h" }))
        }
        CacheRetention::Long => Some(json!({ "type": "ephemeral" })),
    }
}

fn count_markers(blocks: &[Map<String, Value>]) -> usize {
    blocks.iter().filter(|b| b.contains_key("cache_control")).count()
}

fn text_block(text: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), Value::String("text".into()));
    m.insert("text".into(), Value::String(text.to_owned()));
    m
}

fn with_cache(mut block: Map<String, Value>, cache: Option<&Value>) -> Map<String, Value> {
    if let Some(c) = cache {
        block.insert("cache_control".into(), c.clone());
    }
    block
}

/// System blocks: the Claude Code identity (OAuth), then the prompt, split at OpenClaw's cache
/// boundary when caching (the stable prefix carries the marker, the dynamic suffix does not).
fn system_blocks(
    prompt: Option<&str>,
    oauth: bool,
    cache: Option<&Value>,
) -> Vec<Map<String, Value>> {
    let mut blocks = Vec::new();
    if oauth {
        blocks.push(with_cache(text_block(CLAUDE_CODE_IDENTITY), cache));
    }
    let Some(prompt) = prompt.filter(|p| !p.is_empty()) else { return blocks };
    if cache.is_none() {
        blocks.push(text_block(&prompt.replace(CACHE_BOUNDARY, "\n")));
        return blocks;
    }
    match prompt.find(CACHE_BOUNDARY) {
        None => blocks.push(with_cache(text_block(prompt), cache)),
        Some(at) => {
            let prefix = prompt.get(..at).unwrap_or("").trim_end();
            let suffix = prompt.get(at + CACHE_BOUNDARY.len()..).unwrap_or("").trim_start();
            let before = blocks.len();
            if !prefix.is_empty() {
                blocks.push(with_cache(text_block(prefix), cache));
            }
            if !suffix.is_empty() {
                blocks.push(text_block(suffix));
            }
            if blocks.len() == before {
                blocks.push(text_block(""));
            }
        }
    }
    blocks
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
    Some(json!({ "type": "object", "properties": properties, "required": required }))
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
            json!({ "role": m.role, "content": content })
        })
        .collect()
}

/// OpenClaw's message-level markers: the last user text/image block, plus the most recent
/// `tool_result` after it when the budget allows (only that one when the budget is 1).
fn place_message_markers(messages: &mut [WireMessage], cache: &Value, budget: usize) {
    if budget == 0 {
        return;
    }
    let mut fallback: Option<(usize, usize)> = None;
    let mut target: Option<(usize, usize)> = None;
    'outer: for mi in (0..messages.len()).rev() {
        let Some(message) = messages.get_mut(mi) else { continue };
        if message.role != "user" {
            continue;
        }
        match &mut message.content {
            WireContent::Blocks(blocks) => {
                for bi in (0..blocks.len()).rev() {
                    let kind = blocks.get(bi).and_then(|b| b.get("type")).and_then(Value::as_str);
                    match kind {
                        Some("text" | "image") => {
                            target = Some((mi, bi));
                            break 'outer;
                        }
                        Some("tool_result") if fallback.is_none() => fallback = Some((mi, bi)),
                        _ => {}
                    }
                }
            }
            WireContent::Text(text) => {
                if !(fallback.is_some() && budget == 1) {
                    let text = std::mem::take(text);
                    message.content = WireContent::Blocks(vec![text_block(&text)]);
                }
                target = Some((mi, 0));
                break 'outer;
            }
        }
    }
    let mut mark = |(mi, bi): (usize, usize)| {
        if let Some(WireContent::Blocks(blocks)) = messages.get_mut(mi).map(|m| &mut m.content)
            && let Some(block) = blocks.get_mut(bi)
        {
            block.insert("cache_control".into(), cache.clone());
        }
    };
    match (target, fallback) {
        (Some(_), Some(f)) if budget == 1 => mark(f),
        (Some(t), Some(f)) => {
            mark(t);
            mark(f);
        }
        (Some(t), None) => mark(t),
        (None, Some(f)) => mark(f),
        (None, None) => {}
    }
}

#[cfg(test)]
mod tests;
