//! Neutral request to Responses wire request: tools, input items, body and headers.
//! Pure functions; the body is built from ordered maps so identical input gives
//! identical bytes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use llm_core::raw::object;
use llm_core::raw::strict::{StrictPlan, ToolListStrictness, resolve_tool_list};
use llm_core::transform::{IdRules, normalize_tool_call_id, transform_messages};
use llm_core::{
    AssistantContent, AssistantMessage, CacheRetention, Context, Error, ErrorKind, Message, Model,
    ReasoningLevel, StreamOptions, ThinkingContent, Tool, ToolChoice, ToolResultMessage,
    UserContent, UserMessage,
};
use llm_http::{HeaderMap, HttpRequest, insert_header};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::azure::Route;
use crate::{AZURE_PROVIDER, OpenAiResponsesCompat, PROVIDER};

/// Default base URL (the endpoint path is appended).
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Endpoint path under the base URL.
pub(crate) const PATH: &str = "/responses";

/// One request as sent, and what decoding its answer needs from the conversion.
#[derive(Debug)]
pub(crate) struct Converted {
    /// The request (its `Debug` hides the key and prints only the body's size).
    pub(crate) http: HttpRequest,
    /// Per tool name: how to drop the `null`s a strict tool's call sends for omitted
    /// optional properties (empty unless the tools are sent strict).
    pub(crate) strict_plans: BTreeMap<String, Arc<StrictPlan>>,
}

/// Parses `model.compat` (absent or `null` = all defaults).
pub(crate) fn parse_compat(model: &Model) -> Result<OpenAiResponsesCompat, Error> {
    model.typed_compat(PROVIDER)
}

/// Builds the whole request; `azure` is the resolved Azure route of an
/// `azure-openai-responses` request (its URL, auth headers and body differences).
pub(crate) fn build_request(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    azure: Option<(&Route, &llm_http::Env)>,
) -> Result<Converted, Error> {
    let compat = parse_compat(model)?;
    let headers = match azure {
        Some((route, env)) => crate::azure::headers(route, model, options, env)?,
        None => build_headers(model, options, &compat)?,
    };
    let (body, strict_plans) = build_body(model, context, options, &compat, azure.map(|a| a.0))?;
    let url = match azure {
        Some((route, _)) => route.url.clone(),
        None => {
            let base = if model.base_url.trim().is_empty() {
                DEFAULT_BASE_URL
            } else {
                model.base_url.trim()
            };
            format!("{}{PATH}", base.trim_end_matches('/'))
        }
    };
    let provider = if azure.is_some() { AZURE_PROVIDER } else { PROVIDER };
    let http = HttpRequest::json(provider, url, headers, &body)?;
    Ok(Converted { http, strict_plans })
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidRequest, PROVIDER, message).with_retryable(false)
}

/// Provider defaults, auth, `model.headers`, the session headers, then `options.headers`.
pub(crate) fn build_headers(
    model: &Model,
    options: &StreamOptions,
    compat: &OpenAiResponsesCompat,
) -> Result<HeaderMap, Error> {
    let mut headers = HeaderMap::new();
    insert_header(&mut headers, PROVIDER, "content-type", "application/json")?;
    insert_header(&mut headers, PROVIDER, "accept", "text/event-stream")?;
    let user_auth = model
        .headers
        .keys()
        .chain(options.headers.keys())
        .any(|k| k.eq_ignore_ascii_case("authorization"));
    match options.api_key.as_ref().filter(|k| !k.expose().is_empty()) {
        Some(key) => insert_header(
            &mut headers,
            PROVIDER,
            "authorization",
            &format!("Bearer {}", key.expose()),
        )?,
        None if user_auth => {}
        None => {
            return Err(Error::new(
                ErrorKind::Auth,
                PROVIDER,
                format!("No API key for provider: {PROVIDER}"),
            )
            .with_retryable(false));
        }
    }
    for (name, value) in &model.headers {
        insert_header(&mut headers, PROVIDER, name, value)?;
    }
    if options.cache_retention != CacheRetention::None
        && let Some(session) = options.session_id.as_deref().filter(|s| !s.is_empty())
    {
        if compat.send_session_id_header.unwrap_or(true) {
            insert_header(&mut headers, PROVIDER, "session_id", session)?;
        }
        insert_header(&mut headers, PROVIDER, "x-client-request-id", session)?;
    }
    for (name, value) in &options.headers {
        insert_header(&mut headers, PROVIDER, name, value)?;
    }
    Ok(headers)
}

/// The JSON body, and the restore plans of the strict tools in it.
///
/// On an Azure route: `model` is the deployment name, and `store`,
/// `prompt_cache_retention` and `service_tier` are never sent.
pub(crate) fn build_body(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    compat: &OpenAiResponsesCompat,
    azure: Option<&Route>,
) -> Result<(Value, BTreeMap<String, Arc<StrictPlan>>), Error> {
    let provider_options: ResponsesOptions =
        options.typed_provider_options(PROVIDER, "Responses")?;
    // Checked before anything else is built: a format the model cannot carry is an error.
    let info = if azure.is_some() { &crate::AZURE_INFO } else { &crate::INFO };
    let output = llm_core::output::plan(info, PROVIDER, model, context, options, true)?;
    let mut body = Map::new();
    let wire_model = azure.map_or(model.id.as_str(), |route| route.deployment.as_str());
    body.insert("model".into(), Value::from(wire_model));
    // Azure flows are store-based: item ids are replayed unless the compat says otherwise.
    let replay_default = azure.is_some();
    body.insert(
        "input".into(),
        Value::Array(convert_messages(model, context, compat, replay_default)),
    );
    body.insert("stream".into(), Value::Bool(true));
    if options.cache_retention != CacheRetention::None {
        let key = options.cache_key();
        if let (Some(key), true) = (key, compat.supports_prompt_cache_key.unwrap_or(true)) {
            body.insert(
                "prompt_cache_key".into(),
                Value::from(key.chars().take(64).collect::<String>()),
            );
        }
        if options.cache_retention == CacheRetention::Long
            && azure.is_none()
            && compat.supports_long_cache_retention.unwrap_or(true)
        {
            body.insert("prompt_cache_retention".into(), Value::from("24h"));
        }
    }
    if azure.is_none() {
        body.insert("store".into(), Value::Bool(false));
    }
    let model_max = (model.max_tokens > 0).then_some(model.max_tokens);
    let max_tokens = match (options.max_tokens, model_max) {
        (Some(requested), Some(max)) => Some(requested.min(max)),
        (requested, max) => requested.or(max),
    };
    if let Some(max) = max_tokens {
        body.insert("max_output_tokens".into(), Value::from(max));
    }
    if let Some(temperature) = options.temperature {
        body.insert("temperature".into(), Value::from(temperature));
    }
    if let (Some(tier), None) = (&provider_options.service_tier, azure) {
        body.insert("service_tier".into(), Value::from(tier.as_str()));
    }

    let setting = provider_options.strict_tools.or(compat.strict_tools).or_else(|| match azure {
        // OpenClaw's rule: strict by default only on `*.openai.azure.com`.
        Some(route) => (native_route(model) && route.is_classic_openai_host()).then_some(true),
        None => native_route(model).then_some(true),
    });
    let ConvertedTools { wire: mut tools, strict_plans } = convert_tools(&context.tools, setting)?;
    // Built-in tools go after the sorted function tools, as given.
    if let Some(builtin) = provider_options.builtin_tools {
        tools.extend(builtin.into_iter().map(Value::Object));
    }
    let tool_choice = match &options.tool_choice {
        None => None,
        Some(ToolChoice::Auto) => (!tools.is_empty()).then(|| Value::from("auto")),
        Some(ToolChoice::None) => (!tools.is_empty()).then(|| Value::from("none")),
        Some(ToolChoice::Required) if tools.is_empty() => {
            return Err(invalid("tool_choice \"required\" needs at least one tool"));
        }
        Some(ToolChoice::Required) => Some(Value::from("required")),
        Some(ToolChoice::Tool(name)) => {
            if !tools.iter().any(|t| t.get("name").and_then(Value::as_str) == Some(name.as_str())) {
                return Err(invalid(format!("tool_choice requested unavailable tool \"{name}\"")));
            }
            Some(json!({"type": "function", "name": name}))
        }
    };
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = tool_choice {
            body.insert("tool_choice".into(), choice);
        }
        if let Some(parallel) = provider_options.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), Value::Bool(parallel));
        }
    }
    if model.reasoning
        && let Some(reasoning) = reasoning(options, compat, provider_options.reasoning_summary)
    {
        let wants_content = reasoning.get("summary").is_some() || options.reasoning.is_some();
        body.insert("reasoning".into(), reasoning);
        if wants_content {
            body.insert("include".into(), json!(["reasoning.encrypted_content"]));
        }
    }
    if let (Some(plan), Some(format)) = (output, options.output.as_ref()) {
        // `text.format`: the Responses API's flat `json_schema` format.
        let mut wire = Map::new();
        wire.insert("type".into(), Value::from("json_schema"));
        wire.insert("name".into(), Value::from(format.name.as_str()));
        if let Some(description) = &format.description {
            wire.insert("description".into(), Value::from(description.as_str()));
        }
        wire.insert("schema".into(), plan.schema);
        wire.insert("strict".into(), Value::Bool(plan.strict));
        body.insert("text".into(), object([("format", Value::Object(wire))]));
    }
    Ok((Value::Object(body), strict_plans))
}

/// Provider options this crate reads from `StreamOptions::provider_options` (the Azure route's
/// are read by [`crate::azure`]); a value of the wrong type is an `invalid_request` error, as in
/// every provider.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ResponsesOptions {
    /// `service_tier` (not on Azure).
    service_tier: Option<String>,
    /// Strict function tools, over the compat's `strictTools`.
    strict_tools: Option<bool>,
    /// Built-in tools (`{"type": "web_search"}`, ...), sent after the function tools as given.
    builtin_tools: Option<Vec<Map<String, Value>>>,
    /// `parallel_tool_calls`, when tools are sent.
    parallel_tool_calls: Option<bool>,
    /// `reasoning.summary`: a string, or `null` to send none (absent: `auto`).
    #[serde(deserialize_with = "present")]
    reasoning_summary: Option<Option<String>>,
}

/// A field that is present, `null` included (`Some(None)`), as against absent (`None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// Native OpenAI / Azure OpenAI routes (by provider name; a base URL override, such as a
/// proxy or a test server, keeps the route) default to strict tools.
fn native_route(model: &Model) -> bool {
    matches!(model.provider.as_str(), "openai" | "azure-openai" | "azure-openai-responses")
}

/// `reasoning: {effort, summary}` for reasoning models, or `None` to omit it.
fn reasoning(
    options: &StreamOptions,
    compat: &OpenAiResponsesCompat,
    summary: Option<Option<String>>,
) -> Option<Value> {
    let effort = match (options.reasoning, &summary) {
        (Some(level), _) => map_effort(level, &compat.thinking_level_map)?,
        (None, Some(_)) => map_effort(ReasoningLevel::Medium, &compat.thinking_level_map)?,
        (None, None) => {
            return match compat.thinking_level_map.get("off") {
                Some(None) => None,
                Some(Some(off)) => Some(json!({"effort": off})),
                None => Some(json!({"effort": "none"})),
            };
        }
    };
    let mut reasoning = Map::new();
    reasoning.insert("effort".into(), Value::from(effort));
    match summary {
        Some(None) => {}
        Some(Some(s)) => {
            reasoning.insert("summary".into(), Value::from(s));
        }
        None => {
            reasoning.insert("summary".into(), Value::from("auto"));
        }
    }
    Some(Value::Object(reasoning))
}

/// The wire effort for `level`: the compat map's value, else the level's own name
/// (`xhigh` / `max` only when the map defines them); a `null` entry or an undefined
/// level falls back to the next lower level.
fn map_effort(level: ReasoningLevel, map: &BTreeMap<String, Option<String>>) -> Option<String> {
    use ReasoningLevel::*;
    let order = [Minimal, Low, Medium, High, Xhigh, Max];
    let start = order.iter().position(|l| *l == level)?;
    for candidate in order.iter().take(start + 1).rev() {
        match map.get(candidate.as_str()) {
            Some(Some(value)) => return Some(value.clone()),
            Some(None) => continue,
            None if matches!(candidate, Xhigh | Max) => continue,
            None => return Some(candidate.as_str().to_owned()),
        }
    }
    None
}

/// Converted tools.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ConvertedTools {
    /// Wire tools, sorted.
    pub(crate) wire: Vec<Value>,
    /// Per tool name: the restore plan of a strict tool (see [`Converted::strict_plans`]).
    pub(crate) strict_plans: BTreeMap<String, Arc<StrictPlan>>,
}

/// Tools as `{type:"function", name, description, parameters, strict?}`, sorted by name
/// then description (UTF-16 code-unit order, as OpenClaw) for prompt-cache byte
/// stability; strict per [`llm_core::raw::strict::resolve_tool_list`] (OpenClaw's whole-list
/// rule).
pub(crate) fn convert_tools(
    tools: &[Tool],
    strict_setting: Option<bool>,
) -> Result<ConvertedTools, Error> {
    let mut sorted: Vec<&Tool> = tools.iter().collect();
    sorted.sort_by(|a, b| {
        a.name
            .encode_utf16()
            .cmp(b.name.encode_utf16())
            .then_with(|| a.description.encode_utf16().cmp(b.description.encode_utf16()))
    });
    let mut parameters = Vec::with_capacity(sorted.len());
    for tool in &sorted {
        if tool.name.is_empty() {
            return Err(invalid("A tool has an empty name"));
        }
        parameters.push(normalize_parameters(tool)?);
    }
    let named: Vec<(&str, Value)> =
        sorted.iter().zip(parameters).map(|(tool, schema)| (tool.name.as_str(), schema)).collect();
    let ToolListStrictness { strict, parameters, plans, downgraded } =
        resolve_tool_list(named, strict_setting);
    if let Some((index, reason)) = downgraded {
        let name = sorted.get(index).map(|t| t.name.as_str()).unwrap_or_default();
        tracing::debug!(provider = PROVIDER, tool = name, %reason, "tool schema cannot be strict; sending all tools non-strict");
    }
    let wire = sorted
        .iter()
        .zip(parameters)
        .map(|(tool, parameters)| {
            let mut wire = Map::new();
            wire.insert("type".into(), Value::from("function"));
            wire.insert("name".into(), Value::from(tool.name.as_str()));
            wire.insert("description".into(), Value::from(tool.description.as_str()));
            wire.insert("parameters".into(), parameters);
            if let Some(strict) = strict {
                wire.insert("strict".into(), Value::Bool(strict));
            }
            Value::Object(wire)
        })
        .collect();
    Ok(ConvertedTools { wire, strict_plans: plans })
}

/// OpenClaw's generic root normalization: `null` / `{}` becomes an empty object schema,
/// a root with `properties` but no `type` gets `type: "object"`, an object without
/// `properties` gets `properties: {}`. A non-object root is an error.
fn normalize_parameters(tool: &Tool) -> Result<Value, Error> {
    let mut map = match &tool.parameters {
        Value::Null => Map::new(),
        Value::Object(map) => map.clone(),
        _ => {
            return Err(invalid(format!(
                "Tool \"{}\": parameters must be a JSON object schema",
                tool.name
            )));
        }
    };
    match map.get("type") {
        None if map.contains_key("anyOf")
            || map.contains_key("oneOf")
            || map.contains_key("allOf") => {}
        None => {
            let mut with_type = Map::new();
            with_type.insert("type".into(), Value::from("object"));
            with_type.extend(map);
            map = with_type;
        }
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Err(invalid(format!(
                "Tool \"{}\": parameters must have type \"object\", not {other}",
                tool.name
            )));
        }
    }
    if map.get("type").is_some() && !map.get("properties").is_some_and(Value::is_object) {
        map.insert("properties".into(), Value::Object(Map::new()));
    }
    Ok(Value::Object(map))
}

/// Tool-call ids on the wire: `call_id|item_id` is split and the `call_id` part sanitized
/// (`[A-Za-z0-9_-]`, at most 64). The map is built over the whole transcript so that two
/// different source ids never share a wire id (injective) and results follow their calls.
struct CallIds {
    map: HashMap<String, String>,
}

fn wire_call_id(original: &str) -> String {
    let call = original.split_once('|').map_or(original, |(call, _)| call);
    normalize_tool_call_id(call, &IdRules::ALNUM_DASH_64)
}

impl CallIds {
    fn build(messages: &[Message]) -> Self {
        let mut map = HashMap::new();
        let mut used = HashSet::new();
        for message in messages {
            let Message::Assistant(assistant) = message else { continue };
            for call in assistant.tool_calls() {
                if map.contains_key(&call.id) {
                    continue;
                }
                let mut wire = wire_call_id(&call.id);
                if used.contains(&wire) {
                    wire = normalize_tool_call_id(&call.id, &IdRules::ALNUM_DASH_64);
                    let mut n = 1usize;
                    while used.contains(&wire) {
                        let suffix = format!("_{n}");
                        let base: String =
                            wire_call_id(&call.id).chars().take(64 - suffix.len()).collect();
                        wire = format!("{base}{suffix}");
                        n += 1;
                    }
                }
                used.insert(wire.clone());
                map.insert(call.id.clone(), wire);
            }
        }
        CallIds { map }
    }

    fn get(&self, original: &str) -> String {
        self.map.get(original).cloned().unwrap_or_else(|| wire_call_id(original))
    }
}

/// The `input` items: system prompt, then the transformed transcript; item ids are
/// replayed per `compat.replay_item_ids`, else per `replay_default`.
fn convert_messages(
    model: &Model,
    context: &Context,
    compat: &OpenAiResponsesCompat,
    replay_default: bool,
) -> Vec<Value> {
    let messages = transform_messages(&context.messages, model, None);
    let ids = CallIds::build(&messages);
    let replay_ids = compat.replay_item_ids.unwrap_or(replay_default);
    let mut input = Vec::new();
    if let Some(system) = context.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        let role = if model.reasoning && compat.supports_developer_role.unwrap_or(true) {
            "developer"
        } else {
            "system"
        };
        input.push(json!({"type": "message", "role": role, "content": [{"type": "input_text", "text": system}]}));
    }
    let mut emitted_calls: HashSet<String> = HashSet::new();
    for (index, message) in messages.iter().enumerate() {
        match message {
            Message::User(user) => {
                if let Some(item) = user_item(user) {
                    input.push(item);
                }
            }
            Message::Assistant(assistant) => {
                for item in assistant_items(assistant, model, &ids, replay_ids, index) {
                    if let Some(call_id) = item.get("call_id").and_then(Value::as_str) {
                        emitted_calls.insert(call_id.to_owned());
                    }
                    input.push(item);
                }
            }
            Message::ToolResult(result) => {
                let call_id = ids.get(&result.tool_call_id);
                if emitted_calls.contains(&call_id) {
                    input.push(tool_result_item(result, call_id, model));
                } else {
                    // Its call is not in the request (e.g. an aborted turn that is not
                    // replayed): the API rejects an output without its call.
                    tracing::debug!(
                        provider = PROVIDER,
                        "dropping a tool result whose call is not replayed"
                    );
                }
            }
        }
    }
    input
}

fn image_part(data: &str, mime_type: &str) -> Value {
    json!({"type": "input_image", "detail": "auto", "image_url": format!("data:{mime_type};base64,{data}")})
}

fn user_item(user: &UserMessage) -> Option<Value> {
    let content: Vec<Value> = user
        .content
        .blocks()
        .iter()
        .filter_map(|block| match block {
            UserContent::Text(t) if t.text.is_empty() => None,
            UserContent::Text(t) => Some(json!({"type": "input_text", "text": t.text})),
            UserContent::Image(image) => Some(image_part(&image.data, &image.mime_type)),
        })
        .collect();
    (!content.is_empty()).then(|| {
        object([
            ("type", Value::from("message")),
            ("role", Value::from("user")),
            ("content", Value::Array(content)),
        ])
    })
}

fn tool_result_item(result: &ToolResultMessage, call_id: String, model: &Model) -> Value {
    let text = result.text();
    let images: Vec<Value> = result
        .content
        .iter()
        .filter_map(|c| match c {
            UserContent::Image(image) => Some(image_part(&image.data, &image.mime_type)),
            UserContent::Text(_) => None,
        })
        .collect();
    let output = if !images.is_empty() && model.supports_images() {
        let mut parts = Vec::with_capacity(images.len() + 1);
        if !text.is_empty() {
            parts
                .push(object([("type", Value::from("input_text")), ("text", Value::String(text))]));
        }
        parts.extend(images);
        Value::Array(parts)
    } else if text.is_empty() && !images.is_empty() {
        Value::from("(see attached image)")
    } else {
        Value::from(text)
    };
    object([
        ("type", Value::from("function_call_output")),
        ("call_id", Value::String(call_id)),
        ("output", output),
    ])
}

/// A replayed assistant turn: reasoning items (same model, from the stored item JSON),
/// output messages and function calls, in content order. A reasoning item is only sent
/// when a non-reasoning item of the same turn follows it.
fn assistant_items(
    assistant: &AssistantMessage,
    target: &Model,
    ids: &CallIds,
    replay_ids: bool,
    index: usize,
) -> Vec<Value> {
    let same_model = assistant.provider == target.provider
        && assistant.api == target.api
        && assistant.model == target.id;
    let mut items: Vec<(bool, Value)> = Vec::new();
    let mut texts = 0usize;
    for block in &assistant.content {
        match block {
            AssistantContent::Thinking(thinking) => {
                if let Some(item) = reasoning_item(thinking, replay_ids) {
                    items.push((true, item));
                }
            }
            AssistantContent::Text(text) => {
                if text.text.is_empty() {
                    continue;
                }
                let after_reasoning = matches!(items.last(), Some((true, _)));
                let (signed_id, phase) = parse_text_signature(text.text_signature.as_deref());
                let id = match signed_id {
                    Some(id) if after_reasoning && id.len() <= 64 => id,
                    Some(id) if after_reasoning => format!("msg_{}", short_hash(&id)),
                    _ if texts == 0 => format!("msg_{index}"),
                    _ => format!("msg_{index}_{texts}"),
                };
                texts += 1;
                let mut item = Map::new();
                item.insert("type".into(), Value::from("message"));
                item.insert("role".into(), Value::from("assistant"));
                item.insert(
                    "content".into(),
                    json!([{"type": "output_text", "text": text.text, "annotations": []}]),
                );
                item.insert("status".into(), Value::from("completed"));
                item.insert("id".into(), Value::from(id));
                if let Some(phase) = phase {
                    item.insert("phase".into(), Value::from(phase));
                }
                items.push((false, Value::Object(item)));
            }
            AssistantContent::ToolCall(call) => {
                let mut item = Map::new();
                item.insert("type".into(), Value::from("function_call"));
                if replay_ids
                    && same_model
                    && let Some((_, item_id)) = call.id.split_once('|')
                    && item_id.starts_with("fc_")
                    && item_id.len() <= 64
                {
                    item.insert("id".into(), Value::from(item_id));
                }
                item.insert("call_id".into(), Value::from(ids.get(&call.id)));
                item.insert("name".into(), Value::from(call.name.as_str()));
                let arguments = if call.arguments.is_object() {
                    call.arguments.to_string()
                } else {
                    "{}".to_owned()
                };
                item.insert("arguments".into(), Value::from(arguments));
                items.push((false, Value::Object(item)));
            }
            AssistantContent::ProviderContent(p) => {
                // Only this model's items survive the transform; they go back unchanged.
                if p.data.is_object() {
                    items.push((false, p.data.clone()));
                }
            }
        }
    }
    // Drop reasoning items that no non-reasoning item of this turn follows.
    let mut keep = vec![false; items.len()];
    let mut followed = false;
    for (i, (is_reasoning, _)) in items.iter().enumerate().rev() {
        if !is_reasoning {
            followed = true;
        }
        if let Some(k) = keep.get_mut(i) {
            *k = !is_reasoning || followed;
        }
    }
    items.into_iter().zip(keep).filter(|(_, keep)| *keep).map(|((_, item), _)| item).collect()
}

/// The stored reasoning item, ready to replay: the signature is the item's JSON as
/// streamed. Its `id` is removed unless ids are replayed, in which case an item without
/// `encrypted_content` is useless (`store: false`) and dropped.
fn reasoning_item(thinking: &ThinkingContent, replay_ids: bool) -> Option<Value> {
    let signature = thinking.thinking_signature.as_deref()?;
    let Ok(Value::Object(mut item)) = serde_json::from_str::<Value>(signature) else { return None };
    if item.get("type").and_then(Value::as_str) != Some("reasoning") {
        return None;
    }
    if !replay_ids {
        item.shift_remove("id");
        let encrypted =
            item.get("encrypted_content").and_then(Value::as_str).is_some_and(|s| !s.is_empty());
        if !encrypted {
            return None;
        }
    }
    if !item.get("summary").is_some_and(Value::is_array) {
        item.insert("summary".into(), Value::Array(Vec::new()));
    }
    Some(Value::Object(item))
}

/// `(id, phase)` from a text signature: `{"v":1,"id":..,"phase":..}` or a legacy plain id.
fn parse_text_signature(signature: Option<&str>) -> (Option<String>, Option<String>) {
    let Some(signature) = signature.filter(|s| !s.is_empty()) else { return (None, None) };
    if signature.starts_with('{') {
        let Ok(value) = serde_json::from_str::<Value>(signature) else { return (None, None) };
        let text = |k: &str| {
            value.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
        };
        return (text("id"), text("phase"));
    }
    (Some(signature.to_owned()), None)
}

/// A deterministic short hash (FNV-1a 64, base 36) for shortening ids.
fn short_hash(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(digits.get((hash % 36) as usize).copied().unwrap_or(b'0'));
        hash /= 36;
        if hash == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests;
