//! Neutral request -> Gemini wire request (pure functions).
//!
//! The body is built from `serde_json::Map`s in a fixed key order (the workspace
//! enables `preserve_order`), so identical input gives identical bytes.

use llm_http::{HeaderMap, HttpRequest, insert_header};
use serde_json::{Map, Value, json};

use llm_core::raw::object;
use llm_core::transform::{IdRules, transform_messages};
use llm_core::{
    AssistantContent, AssistantMessage, Context, Error, ErrorKind, Message, Model, ReasoningLevel,
    StreamOptions, Tool, ToolChoice, ToolResultMessage, UserContent,
};

use crate::compat::{self, GoogleCompat, GoogleOptions};
use crate::{PROVIDER, schema};

/// Default base URL of the Generative Language API.
pub(crate) const GENERATIVE_LANGUAGE_BASE_URL: &str =
    "https://generativelanguage.googleapis.com/v1beta";
/// The text Google documents for replaying a function call that has no signature.
pub(crate) const SKIP_SIGNATURE_SENTINEL: &str = "skip_thought_signature_validator";

/// Which Google API serves the request, with what it needs for the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `generativelanguage.googleapis.com`, key in `x-goog-api-key`.
    GenerativeLanguage,
    /// Vertex AI, OAuth bearer token.
    Vertex {
        /// Google Cloud project.
        project: String,
        /// Location (`us-central1`, `global`, ...).
        location: String,
    },
}

/// Builds the whole request (its `Debug` hides the key: it is marked sensitive).
pub(crate) fn build_request(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    endpoint: &Endpoint,
) -> Result<HttpRequest, Error> {
    let compat = GoogleCompat::from_model(model)?;
    // Checked before anything else is built: a format the model cannot carry is an error.
    // Gemini has no strict switch: the schema is sent as given.
    llm_core::output::plan(&crate::INFO, PROVIDER, model, context, options, false)?;
    if let Some(format) = &options.output
        && response_schema_only(model)
        && crate::schema::for_openapi(&format.schema).is_none()
    {
        return Err(Error::new(
            ErrorKind::InvalidRequest,
            PROVIDER,
            format!(
                "Model {} takes an output schema only as responseSchema, which needs an object with properties; output format \"{}\" has none",
                model.id, format.name
            ),
        )
        .with_retryable(false));
    }
    let key =
        options.api_key.as_ref().map(|k| k.expose()).filter(|k| !k.trim().is_empty()).ok_or_else(
            || {
                Error::new(
                    ErrorKind::Auth,
                    PROVIDER,
                    format!("No API key for provider: {}", model.provider),
                )
                .with_retryable(false)
            },
        )?;
    let url = endpoint_url(model, endpoint);
    let mut headers = HeaderMap::new();
    insert_header(&mut headers, PROVIDER, "content-type", "application/json")?;
    match endpoint {
        Endpoint::GenerativeLanguage => {
            insert_header(&mut headers, PROVIDER, "x-goog-api-key", key)?;
        }
        Endpoint::Vertex { .. } => {
            insert_header(&mut headers, PROVIDER, "authorization", &format!("Bearer {key}"))?;
        }
    }
    for (name, value) in model.headers.iter().chain(options.headers.iter()) {
        insert_header(&mut headers, PROVIDER, name, value)?;
    }
    let extra = GoogleOptions::read(options)?;
    let body = build_body(model, context, options, &compat, &extra);
    HttpRequest::json(PROVIDER, url, headers, &body)
}

/// The streaming URL for `model` on `endpoint` (with `?alt=sse`).
pub(crate) fn endpoint_url(model: &Model, endpoint: &Endpoint) -> String {
    let id = model.id.strip_prefix("models/").unwrap_or(&model.id);
    let base = model.base_url.trim_end_matches('/');
    match endpoint {
        Endpoint::GenerativeLanguage => {
            let base = if base.is_empty() { GENERATIVE_LANGUAGE_BASE_URL } else { base };
            format!("{base}/models/{id}:streamGenerateContent?alt=sse")
        }
        Endpoint::Vertex { project, location } => {
            let default_base;
            let base = if base.is_empty() {
                default_base = if location == "global" {
                    "https://aiplatform.googleapis.com".to_owned()
                } else {
                    format!("https://{location}-aiplatform.googleapis.com")
                };
                default_base.as_str()
            } else {
                base
            };
            format!(
                "{base}/v1/projects/{project}/locations/{location}/publishers/google/models/{id}:streamGenerateContent?alt=sse"
            )
        }
    }
}

/// The `generateContent` body: contents, systemInstruction, tools, toolConfig, generationConfig.
pub(crate) fn build_body(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    compat: &GoogleCompat,
    extra: &GoogleOptions,
) -> Value {
    let mut body = Map::new();
    body.insert("contents".to_owned(), Value::Array(convert_messages(model, context, compat)));
    if let Some(system) = context.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        body.insert("systemInstruction".to_owned(), json!({"parts": [{"text": system}]}));
    }
    if let Some(tools) = convert_tools(&context.tools, compat.use_parameters) {
        body.insert("tools".to_owned(), tools);
        let mut config = options.tool_choice.as_ref().map(tool_config);
        if extra.stream_function_call_arguments == Some(true) {
            // Gemini 3 on Vertex then streams each call's arguments as `partialArgs`.
            let config = config.get_or_insert_with(|| json!({"functionCallingConfig": {}}));
            if let Some(calling) =
                config.get_mut("functionCallingConfig").and_then(Value::as_object_mut)
            {
                calling.insert("streamFunctionCallArguments".to_owned(), Value::Bool(true));
            }
        }
        if let Some(config) = config {
            body.insert("toolConfig".to_owned(), config);
        }
    }
    let mut generation = generation_config(model, options, extra);
    if let Some(format) = &options.output {
        generation.insert("responseMimeType".to_owned(), Value::from("application/json"));
        match crate::schema::for_openapi(&format.schema).filter(|_| response_schema_only(model)) {
            // The OpenAPI subset drops what it cannot say (patterns, bounds, ...): the model
            // is held to less, and the answer is still validated against the whole schema.
            Some(subset) => generation.insert("responseSchema".to_owned(), subset),
            // JSON Schema as is, wherever the model takes it.
            None => generation.insert("responseJsonSchema".to_owned(), format.schema.clone()),
        };
    }
    if !generation.is_empty() {
        body.insert("generationConfig".to_owned(), Value::Object(generation));
    }
    Value::Object(body)
}

/// Whether `model` takes an output schema only as `responseSchema` (its row of
/// `INFO.output`).
fn response_schema_only(model: &Model) -> bool {
    crate::INFO.output_family(&model.id).is_some_and(|row| row.variant == crate::RESPONSE_SCHEMA)
}

/// `[{functionDeclarations: [...]}]` in input order, or `None` without tools.
pub(crate) fn convert_tools(tools: &[Tool], use_parameters: bool) -> Option<Value> {
    if tools.is_empty() {
        return None;
    }
    let declarations: Vec<Value> = tools
        .iter()
        .map(|tool| {
            let mut d = Map::new();
            d.insert("name".to_owned(), Value::String(tool.name.clone()));
            d.insert("description".to_owned(), Value::String(tool.description.clone()));
            if use_parameters {
                if let Some(parameters) = schema::for_openapi(&tool.parameters) {
                    d.insert("parameters".to_owned(), parameters);
                }
            } else {
                d.insert(
                    "parametersJsonSchema".to_owned(),
                    schema::for_json_schema(&tool.parameters),
                );
            }
            Value::Object(d)
        })
        .collect();
    Some(Value::Array(vec![object([("functionDeclarations", Value::Array(declarations))])]))
}

fn tool_config(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!({"functionCallingConfig": {"mode": "AUTO"}}),
        ToolChoice::None => json!({"functionCallingConfig": {"mode": "NONE"}}),
        ToolChoice::Required => json!({"functionCallingConfig": {"mode": "ANY"}}),
        ToolChoice::Tool(name) => {
            json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}})
        }
    }
}

fn generation_config(
    model: &Model,
    options: &StreamOptions,
    extra: &GoogleOptions,
) -> Map<String, Value> {
    let mut g = Map::new();
    if let Some(t) = options.temperature {
        g.insert("temperature".to_owned(), json!(t));
    }
    let max_tokens = options.max_tokens.or((model.max_tokens > 0).then_some(model.max_tokens));
    if let Some(max) = max_tokens {
        g.insert("maxOutputTokens".to_owned(), json!(max));
    }
    if !options.stop.is_empty() {
        g.insert("stopSequences".to_owned(), json!(options.stop));
    }
    if let Some(thinking) = thinking_config(model, options, extra) {
        g.insert("thinkingConfig".to_owned(), thinking);
    }
    g
}

fn is_gemini3_pro(id: &str) -> bool {
    let id = id.to_ascii_lowercase();
    compat::gemini_major_version(&id) == Some(3) && id.contains("-pro")
}

fn is_gemma4(id: &str) -> bool {
    id.to_ascii_lowercase().contains("gemma-4")
}

/// Whether the model takes `thinkingLevel` (Gemini 3+, Gemma 4) rather than `thinkingBudget`.
fn uses_thinking_level(id: &str) -> bool {
    compat::gemini_major_version(id).is_some_and(|v| v >= 3) || is_gemma4(id)
}

/// `thinkingConfig` for a reasoning model: the `thinkingBudget` / `thinkingLevel`
/// provider options win; else the requested level; else thinking is turned off
/// (or down to the lowest level where it cannot be turned off).
fn thinking_config(model: &Model, options: &StreamOptions, extra: &GoogleOptions) -> Option<Value> {
    if !model.reasoning {
        return None;
    }
    let id = model.id.as_str();
    let budget_option = extra.thinking_budget;
    if let Some(level) = &extra.thinking_level {
        return Some(json!({"includeThoughts": true, "thinkingLevel": level.to_ascii_uppercase()}));
    }
    if let Some(budget) = budget_option {
        if budget == 0 {
            return Some(json!({"thinkingBudget": 0}));
        }
        return Some(json!({"includeThoughts": true, "thinkingBudget": budget}));
    }
    match options.reasoning {
        Some(level) if uses_thinking_level(id) => {
            Some(json!({"includeThoughts": true, "thinkingLevel": thinking_level(id, level)}))
        }
        Some(level) => {
            Some(json!({"includeThoughts": true, "thinkingBudget": thinking_budget(id, level)}))
        }
        None => {
            if uses_thinking_level(id) {
                // Gemini 3 cannot turn thinking off: use the lowest level and hide it.
                let level = if is_gemini3_pro(id) { "LOW" } else { "MINIMAL" };
                Some(json!({"thinkingLevel": level}))
            } else if id.contains("2.5-pro") {
                // 2.5 Pro rejects a zero budget ("only works in thinking mode").
                None
            } else {
                Some(json!({"thinkingBudget": 0}))
            }
        }
    }
}

fn thinking_level(id: &str, level: ReasoningLevel) -> &'static str {
    // Gemini 3 Pro knows LOW and HIGH only; Gemma 4 MINIMAL and HIGH.
    let pro = is_gemini3_pro(id);
    let gemma = is_gemma4(id);
    match level {
        ReasoningLevel::Minimal if pro => "LOW",
        ReasoningLevel::Minimal => "MINIMAL",
        ReasoningLevel::Low if gemma => "MINIMAL",
        ReasoningLevel::Low => "LOW",
        ReasoningLevel::Medium if pro || gemma => "HIGH",
        ReasoningLevel::Medium => "MEDIUM",
        ReasoningLevel::High | ReasoningLevel::Xhigh | ReasoningLevel::Max => "HIGH",
    }
}

/// Gemini 2.x budgets (tokens); `-1` lets the model decide.
fn thinking_budget(id: &str, level: ReasoningLevel) -> i64 {
    let pro = id.contains("2.5-pro");
    let flash_lite = id.contains("2.5-flash-lite");
    let flash = id.contains("2.5-flash");
    if !(pro || flash) {
        return -1;
    }
    match level {
        ReasoningLevel::Minimal if flash_lite => 512,
        ReasoningLevel::Minimal => 128,
        ReasoningLevel::Low => 2048,
        ReasoningLevel::Medium => 8192,
        ReasoningLevel::High => 16384,
        ReasoningLevel::Xhigh | ReasoningLevel::Max => {
            if pro {
                32768
            } else {
                24576
            }
        }
    }
}

/// Whether a signature is base64 (Google's `bytes` fields reject anything else).
pub(crate) fn is_valid_signature(signature: &str) -> bool {
    if signature.is_empty() || !signature.len().is_multiple_of(4) {
        return false;
    }
    let body = signature.trim_end_matches('=');
    signature.len() - body.len() <= 2
        && body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// The transcript as Gemini `contents`.
pub(crate) fn convert_messages(
    model: &Model,
    context: &Context,
    compat: &GoogleCompat,
) -> Vec<Value> {
    let send_ids = compat::sends_tool_call_ids(model, compat);
    let rules = send_ids.then_some(&IdRules::ALNUM_DASH_64);
    let messages = transform_messages(&context.messages, model, rules);
    let multimodal = compat::multimodal_function_response(model, compat);
    let mut contents: Vec<Value> = Vec::new();
    // Image turns of Gemini < 3 tool results wait until the run of results ends.
    let mut held_images: Vec<Value> = Vec::new();
    for message in &messages {
        if !matches!(message, Message::ToolResult(_)) {
            contents.append(&mut held_images);
        }
        match message {
            Message::User(user) => {
                let parts: Vec<Value> =
                    user.content.blocks().iter().filter_map(user_part).collect();
                if !parts.is_empty() {
                    contents.push(object([
                        ("role", Value::from("user")),
                        ("parts", Value::Array(parts)),
                    ]));
                }
            }
            Message::Assistant(assistant) => {
                if let Some(content) = assistant_content(assistant, model, send_ids) {
                    contents.push(content);
                }
            }
            Message::ToolResult(result) => {
                let (part, images) = function_response(result, model, send_ids, multimodal);
                let merged = contents.last_mut().and_then(|last| {
                    let is_results_turn = last.get("role").and_then(Value::as_str) == Some("user")
                        && last
                            .get("parts")
                            .and_then(Value::as_array)
                            .is_some_and(|p| p.iter().any(|p| p.get("functionResponse").is_some()));
                    if is_results_turn {
                        last.get_mut("parts").and_then(Value::as_array_mut)
                    } else {
                        None
                    }
                });
                match merged {
                    Some(parts) => parts.push(part),
                    None => contents.push(object([
                        ("role", Value::from("user")),
                        ("parts", Value::Array(vec![part])),
                    ])),
                }
                if let Some(images) = images {
                    held_images.push(images);
                }
            }
        }
    }
    contents.append(&mut held_images);
    contents
}

fn inline_data(mime_type: &str, data: &str) -> Value {
    json!({"inlineData": {"mimeType": mime_type, "data": data}})
}

fn user_part(block: &UserContent) -> Option<Value> {
    match block {
        UserContent::Text(t) if t.text.is_empty() => None,
        UserContent::Text(t) => Some(json!({"text": t.text})),
        UserContent::Image(i) => Some(inline_data(&i.mime_type, &i.data)),
    }
}

fn with_signature(mut part: Map<String, Value>, signature: Option<&str>) -> Value {
    if let Some(sig) = signature {
        part.insert("thoughtSignature".to_owned(), Value::String(sig.to_owned()));
    }
    Value::Object(part)
}

/// One assistant turn as a `model` content, or `None` when nothing is left.
fn assistant_content(message: &AssistantMessage, model: &Model, send_ids: bool) -> Option<Value> {
    // Signatures are only valid for the model that made them (the API id may differ:
    // Generative Language and Vertex share signatures).
    let same_model = message.provider == model.provider && message.model == model.id;
    let keep = |sig: Option<&String>| -> Option<String> {
        sig.filter(|s| same_model && is_valid_signature(s)).cloned()
    };
    let sentinel = compat::validates_signatures(model);
    let mut parts = Vec::new();
    let mut first_call = true;
    for block in &message.content {
        match block {
            AssistantContent::Text(t) => {
                let sig = keep(t.text_signature.as_ref());
                if t.text.trim().is_empty() && sig.is_none() {
                    continue;
                }
                let mut p = Map::new();
                p.insert("text".to_owned(), Value::String(t.text.clone()));
                parts.push(with_signature(p, sig.as_deref()));
            }
            AssistantContent::Thinking(t) => {
                let sig = keep(t.thinking_signature.as_ref());
                if same_model && !t.redacted {
                    if t.thinking.trim().is_empty() && sig.is_none() {
                        continue;
                    }
                    let mut p = Map::new();
                    p.insert("thought".to_owned(), Value::Bool(true));
                    p.insert("text".to_owned(), Value::String(t.thinking.clone()));
                    parts.push(with_signature(p, sig.as_deref()));
                } else if !t.redacted && !t.thinking.trim().is_empty() {
                    parts.push(json!({"text": t.thinking}));
                }
            }
            AssistantContent::ToolCall(call) => {
                let mut sig = keep(call.thought_signature.as_ref());
                if sig.is_none() && first_call && sentinel {
                    sig = Some(SKIP_SIGNATURE_SENTINEL.to_owned());
                }
                first_call = false;
                let mut fc = Map::new();
                fc.insert("name".to_owned(), Value::String(call.name.clone()));
                let args =
                    if call.arguments.is_object() { call.arguments.clone() } else { json!({}) };
                fc.insert("args".to_owned(), args);
                if send_ids {
                    fc.insert("id".to_owned(), Value::String(call.id.clone()));
                }
                let mut p = Map::new();
                p.insert("functionCall".to_owned(), Value::Object(fc));
                parts.push(with_signature(p, sig.as_deref()));
            }
            // Another API's opaque block (the transform already drops it for this model).
            AssistantContent::ProviderContent(_) => {}
        }
    }
    (!parts.is_empty())
        .then(|| object([("role", Value::from("model")), ("parts", Value::Array(parts))]))
}

/// A tool result as a `functionResponse` part, plus the separate image turn for
/// models without multimodal function responses.
fn function_response(
    result: &ToolResultMessage,
    model: &Model,
    send_ids: bool,
    multimodal: bool,
) -> (Value, Option<Value>) {
    let text = result.text();
    let images: Vec<Value> = if model.supports_images() {
        result
            .content
            .iter()
            .filter_map(|c| match c {
                UserContent::Image(i) => Some(inline_data(&i.mime_type, &i.data)),
                UserContent::Text(_) => None,
            })
            .collect()
    } else {
        Vec::new()
    };
    let value = if !text.is_empty() {
        text
    } else if !images.is_empty() {
        "(see attached image)".to_owned()
    } else {
        String::new()
    };
    let mut fr = Map::new();
    fr.insert("name".to_owned(), Value::String(result.tool_name.clone()));
    let response =
        object([(if result.is_error { "error" } else { "output" }, Value::String(value))]);
    fr.insert("response".to_owned(), response);
    let mut held = None;
    if !images.is_empty() {
        if multimodal {
            fr.insert("parts".to_owned(), Value::Array(images));
        } else {
            let mut parts = vec![json!({"text": "Tool result image:"})];
            parts.extend(images);
            held = Some(object([("role", Value::from("user")), ("parts", Value::Array(parts))]));
        }
    }
    if send_ids {
        fr.insert("id".to_owned(), Value::String(result.tool_call_id.clone()));
    }
    (object([("functionResponse", Value::Object(fr))]), held)
}

#[cfg(test)]
mod tests;
