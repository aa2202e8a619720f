//! Neutral request -> Bedrock `ConverseStream` wire request. Pure: the
//! environment comes in as a lookup function, there is no IO, clock or randomness.
//!
//! The body is built from `serde_json::Map` in a fixed order (the workspace enables
//! `preserve_order`), so identical input serializes to identical bytes. The model id goes
//! in the path, not the body. Model classification is in `claude`, the endpoint and path
//! in `endpoint`; this module converts messages, tools and options.

use llm_core::output::OutputMode;
use std::collections::BTreeMap;

use base64::Engine as _;
use llm_core::transform::{IdRules, transform_messages};
use llm_core::{
    AssistantContent, CacheRetention, Context, Error, ErrorKind, Message, Model, ReasoningLevel,
    StreamOptions, ThinkingContent, ToolChoice, UserContent, UserMessageContent,
};
use llm_http::HttpRequest;

use crate::attempt::Unsigned;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::{PROVIDER, auth};

mod claude;
mod endpoint;

pub use claude::BedrockCompat;
pub(crate) use claude::ClaudeTraits;
pub(crate) use endpoint::{
    Endpoint, EndpointInputs, control_plane_endpoint, inference_profile_path,
};

/// The thinking signature OpenAI-compatible providers use as a marker, not a signature.
const REASONING_CONTENT_MARKER: &str = "reasoning_content";
const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";
/// The service tiers Bedrock knows.
const SERVICE_TIERS: [&str; 4] = ["flex", "priority", "default", "reserved"];

/// Looks up an environment variable (a function, so conversion stays pure and testable).
pub(crate) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Provider options this crate reads from [`StreamOptions::provider_options`] (parsed here
/// so a mistyped option is an error).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct BedrockOptions {
    /// The AWS region (wins over `AWS_REGION` and `AWS_DEFAULT_REGION`; read by `auth`).
    region: Option<String>,
    /// The shared-config profile (wins over `AWS_PROFILE`; read by `auth`).
    profile: Option<String>,
    /// `summarized` (default) or `omitted`.
    thinking_display: Option<String>,
    /// Budget-thinking Claude models get the interleaved-thinking beta unless this is false.
    interleaved_thinking: Option<bool>,
    /// Thinking budget per reasoning level name (`low`, `high`, ...).
    thinking_budgets: BTreeMap<String, u64>,
    /// Sent as `requestMetadata`.
    request_metadata: Option<Map<String, Value>>,
    /// Sent as `guardrailConfig` (`guardrailIdentifier`, `guardrailVersion`, ...).
    guardrail_config: Option<Map<String, Value>>,
    /// `flex`, `priority`, `default` or `reserved`: sent as `serviceTier: {type}`.
    service_tier: Option<String>,
    /// Cache points for non-Claude models too (as `AWS_BEDROCK_FORCE_CACHE=1`).
    force_cache: Option<bool>,
    /// The control-plane base URL for `GetInferenceProfile` (a proxy, a VPC endpoint, a
    /// test server); default `https://bedrock.<region>.amazonaws.com`.
    pub(crate) control_plane_url: Option<String>,
}

impl BedrockOptions {
    pub(crate) fn from_options(options: &StreamOptions) -> Result<Self, Error> {
        options.typed_provider_options(PROVIDER, "Bedrock")
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidRequest, PROVIDER, message).with_retryable(false)
}

/// The endpoint inputs from the options and the environment; the region and
/// profile are read as `auth` reads them.
fn endpoint_inputs<'a>(
    model: &'a Model,
    options: &StreamOptions,
    env: Env<'_>,
) -> EndpointInputs<'a> {
    let fips = uses_fips(env);
    EndpointInputs {
        base_url: &model.base_url,
        configured_region: auth::configured_region(options, env),
        profile_region: None,
        has_profile: auth::selected_profile(options, env).is_some(),
        fips,
    }
}

/// `AWS_USE_FIPS_ENDPOINT=true`: the FIPS endpoints.
pub(crate) fn uses_fips(env: Env<'_>) -> bool {
    env("AWS_USE_FIPS_ENDPOINT").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Whether cache points go to any model (`forceCache` or `AWS_BEDROCK_FORCE_CACHE=1`).
pub(crate) fn forces_cache(extra: &BedrockOptions, env: Env<'_>) -> bool {
    extra.force_cache.unwrap_or(false)
        || env("AWS_BEDROCK_FORCE_CACHE").is_some_and(|v| v.trim() == "1")
}

/// The endpoint of the runtime request, as [`build_request_with`] resolves it.
pub(crate) fn resolve_endpoint(
    model: &Model,
    options: &StreamOptions,
    env: Env<'_>,
    profile_region: Option<String>,
) -> Endpoint {
    let mut inputs = endpoint_inputs(model, options, env);
    inputs.profile_region = profile_region;
    Endpoint::resolve(&inputs)
}

/// [`build_request_with`] for no known profile.
#[cfg(test)]
pub(crate) fn build_request(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    env: Env<'_>,
    profile_region: Option<String>,
) -> Result<Unsigned, Error> {
    build_request_with(model, context, options, env, profile_region, None)
}

/// Builds the request, unsigned. Fails on an input Bedrock cannot express (an unknown image
/// type, invalid base64, a bad provider option). `profile`, when known, says what the models
/// behind an application inference profile have in common: whether all cache, and whether one
/// rejects `temperature`.
pub(crate) fn build_request_with(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    env: Env<'_>,
    profile_region: Option<String>,
    profile: Option<crate::profile::ProfileTraits>,
) -> Result<Unsigned, Error> {
    let extra = BedrockOptions::from_options(options)?;
    // Checked before anything else is built: a format the model cannot carry is an error.
    let output = llm_core::output::plan(&crate::INFO, PROVIDER, model, context, options, true)?;
    let compat = BedrockCompat::from_model(model)?;
    let mut traits = ClaudeTraits::of(model, &compat);
    if let Some(profile) = profile {
        traits.caching = profile.caching;
        traits.rejects_temperature |= profile.rejects_temperature;
    }
    let endpoint = resolve_endpoint(model, options, env, profile_region);

    let force_cache = forces_cache(&extra, env);
    let cache_point = match options.cache_retention {
        CacheRetention::None => None,
        _ if !(traits.caching || force_cache) => None,
        CacheRetention::Short => Some(json!({"cachePoint": {"type": "default"}})),
        CacheRetention::Long => Some(json!({"cachePoint": {"type": "default", "ttl": "1h"}})),
    };
    let thinking = resolve_thinking(model, &compat, options, &extra, traits, &endpoint.region);

    let mut body = Map::new();
    let messages = convert_messages(&context.messages, model, traits, cache_point.as_ref())?;
    body.insert("messages".into(), Value::Array(messages));
    if let Some(prompt) = context.system_prompt.as_deref().filter(|p| !p.is_empty()) {
        let mut system = vec![json!({"text": prompt})];
        system.extend(cache_point.clone());
        body.insert("system".into(), Value::Array(system));
    }
    let mut inference = Map::new();
    if let Some(max) = thinking.max_tokens {
        inference.insert("maxTokens".into(), json!(max));
    }
    if let Some(t) = options.temperature
        && !thinking.adaptive
        && !traits.rejects_temperature
    {
        inference.insert("temperature".into(), json!(t));
    }
    // OpenClaw drops stop sequences; Bedrock takes them here.
    if !options.stop.is_empty() {
        inference.insert("stopSequences".into(), json!(options.stop));
    }
    body.insert("inferenceConfig".into(), Value::Object(inference));
    // Fable 5 may refuse after partial output, so a forced tool choice is downgraded and
    // the refusal details are asked for.
    let choice = match options.tool_choice.clone() {
        Some(ToolChoice::Required | ToolChoice::Tool(_)) if traits.fable => Some(ToolChoice::Auto),
        other => other,
    };
    let mut with_format = None;
    let mut choice = choice;
    if let (Some(plan), Some(format)) = (output, options.output.as_ref()) {
        if plan.mode == OutputMode::Tool {
            // A forced tool is the format itself: a model that would not be forced (Fable
            // 5's downgrade, or Claude thinking, which rejects a forced choice) cannot
            // carry it.
            let thinks = thinking.fields.as_ref().is_some_and(|f| f.contains_key("thinking"));
            if traits.fable || thinks {
                return Err(invalid(format!(
                    "Model {} carries an output format as a forced tool, which {} does not allow",
                    model.id,
                    if traits.fable { "this model" } else { "thinking" }
                )));
            }
            let mut tools = context.tools.clone();
            tools.push(llm_core::Tool { parameters: plan.schema, ..format.as_tool() });
            with_format = Some(Context { tools, ..Context::default() });
            choice = Some(ToolChoice::Tool(format.name.clone()));
        } else {
            let mut json_schema = Map::new();
            // Bedrock takes the schema as a JSON string.
            json_schema.insert("schema".into(), Value::String(plan.schema.to_string()));
            json_schema.insert("name".into(), json!(format.name));
            if let Some(description) = &format.description {
                json_schema.insert("description".into(), json!(description));
            }
            body.insert(
                "outputConfig".into(),
                json!({"textFormat": {"type": "json_schema", "structure": {"jsonSchema": json_schema}}}),
            );
        }
    }
    if let Some(tools) = tool_config(with_format.as_ref().unwrap_or(context), choice.as_ref()) {
        body.insert("toolConfig".into(), tools);
    }
    if let Some(fields) = thinking.fields {
        body.insert("additionalModelRequestFields".into(), Value::Object(fields));
    }
    if traits.fable {
        body.insert("additionalModelResponseFieldPaths".into(), json!(["/stop_details"]));
    }
    if let Some(metadata) = extra.request_metadata.clone() {
        body.insert("requestMetadata".into(), Value::Object(metadata));
    }
    if let Some(guardrail) = extra.guardrail_config.clone() {
        body.insert("guardrailConfig".into(), Value::Object(guardrail));
    }
    if let Some(tier) = &extra.service_tier {
        let tier = tier.trim().to_ascii_lowercase();
        // A tier Bedrock does not know is the caller's typo: an error, not a silent
        // default (OpenClaw only warns; see the crate docs).
        if !SERVICE_TIERS.contains(&tier.as_str()) {
            return Err(invalid(format!(
                "Invalid Bedrock serviceTier \"{tier}\": expected one of flex, priority, default, reserved"
            )));
        }
        // Fable 5 serves only the default tier: another one is left out, as OpenClaw
        // does, rather than failing a request Bedrock would otherwise serve.
        if traits.fable && tier != "default" {
            tracing::warn!(tier, "ignoring unsupported Fable 5 Bedrock service tier");
        } else {
            body.insert("serviceTier".into(), json!({"type": tier}));
        }
    }

    // Provider defaults, then the model's, then the caller's headers; auth is added on each
    // attempt, because SigV4 signs the headers.
    let headers = llm_http::header_map(
        PROVIDER,
        [("content-type", "application/json"), ("accept", "application/vnd.amazon.eventstream")]
            .into_iter()
            .chain(
                model.headers.iter().chain(&options.headers).map(|(k, v)| (k.as_str(), v.as_str())),
            ),
    )?;
    let http = HttpRequest::json(PROVIDER, endpoint.url(&model.id), headers, &body)?;
    Ok(Unsigned { http, region: endpoint.region })
}

/// `toolConfig`: every tool in input order as `{toolSpec: {name, description,
/// inputSchema: {json}}}`, and the tool choice; none without tools or with choice `none`.
fn tool_config(context: &Context, choice: Option<&ToolChoice>) -> Option<Value> {
    if context.tools.is_empty() || matches!(choice, Some(ToolChoice::None)) {
        return None;
    }
    let tools: Vec<Value> = context
        .tools
        .iter()
        .map(|tool| {
            let mut spec = Map::new();
            spec.insert("name".into(), json!(tool.name));
            // Bedrock rejects an empty description (length >= 1 when present).
            if !tool.description.is_empty() {
                spec.insert("description".into(), json!(tool.description));
            }
            let schema = match &tool.parameters {
                Value::Null => json!({"type": "object", "properties": {}}),
                other => other.clone(),
            };
            spec.insert("inputSchema".into(), json!({ "json": schema }));
            json!({ "toolSpec": spec })
        })
        .collect();
    let mut config = Map::new();
    config.insert("tools".into(), Value::Array(tools));
    let choice = match choice {
        Some(ToolChoice::Auto) => Some(json!({"auto": {}})),
        Some(ToolChoice::Required) => Some(json!({"any": {}})),
        Some(ToolChoice::Tool(name)) => Some(json!({"tool": {"name": name}})),
        Some(ToolChoice::None) | None => None,
    };
    if let Some(choice) = choice {
        config.insert("toolChoice".into(), choice);
    }
    Some(Value::Object(config))
}

/// How thinking shapes the request.
#[derive(Debug, Clone, Default, PartialEq)]
struct Thinking {
    /// `additionalModelRequestFields`, if thinking is sent.
    fields: Option<Map<String, Value>>,
    /// `inferenceConfig.maxTokens`.
    max_tokens: Option<u64>,
    /// Adaptive thinking is sent (temperature is then omitted).
    adaptive: bool,
}

/// Adaptive Claude models get a type and an effort, other
/// reasoning Claude models a token budget that fits under `maxTokens`; non-Claude models
/// get no reasoning fields.
fn resolve_thinking(
    model: &Model,
    compat: &BedrockCompat,
    options: &StreamOptions,
    extra: &BedrockOptions,
    traits: ClaudeTraits,
    region: &str,
) -> Thinking {
    let caller_max = options.max_tokens.filter(|m| *m > 0);
    let default_level = (traits.mandatory_adaptive || traits.fable).then_some(ReasoningLevel::High);
    let level = options.reasoning.or(default_level);
    let capable = model.reasoning || traits.adaptive;
    let Some(level) = level.filter(|_| capable && traits.claude) else {
        return Thinking { max_tokens: caller_max, ..Thinking::default() };
    };
    let lower_id = model.id.to_ascii_lowercase();
    let gov_cloud = region.starts_with("us-gov-")
        || lower_id.starts_with("us-gov.")
        || lower_id.starts_with("arn:aws-us-gov:");
    let display = (!gov_cloud)
        .then(|| extra.thinking_display.clone().unwrap_or_else(|| "summarized".to_owned()));
    let mut thinking = Map::new();
    let mut fields = Map::new();
    if traits.adaptive {
        thinking.insert("type".into(), json!("adaptive"));
        if let Some(display) = display {
            thinking.insert("display".into(), json!(display));
        }
        fields.insert("thinking".into(), Value::Object(thinking));
        fields.insert("output_config".into(), json!({"effort": effort(compat, level, traits)}));
        return Thinking { fields: Some(fields), max_tokens: caller_max, adaptive: true };
    }
    let level_name = match level {
        ReasoningLevel::Xhigh => ReasoningLevel::High,
        other => other,
    };
    let mut budget = extra
        .thinking_budgets
        .get(level_name.as_str())
        .copied()
        .unwrap_or_else(|| level.default_budget());
    let model_max = model.max_tokens;
    let max_tokens = match caller_max {
        None if model_max > 0 => Some(model_max),
        None => None,
        Some(m) if model_max > 0 => Some(m.saturating_add(budget).min(model_max)),
        Some(m) => Some(m.saturating_add(budget)),
    };
    if let Some(max) = max_tokens
        && max <= budget
    {
        budget = max.saturating_sub(1024);
    }
    thinking.insert("type".into(), json!("enabled"));
    thinking.insert("budget_tokens".into(), json!(budget));
    if let Some(display) = display {
        thinking.insert("display".into(), json!(display));
    }
    fields.insert("thinking".into(), Value::Object(thinking));
    if extra.interleaved_thinking != Some(false) {
        fields.insert("anthropic_beta".into(), json!([INTERLEAVED_THINKING_BETA]));
    }
    Thinking { fields: Some(fields), max_tokens, adaptive: false }
}

/// The effort level: the model's own `compat.thinkingLevelMap` entry when it is a string (`null`
/// for `xhigh`/`max` means `high`); else `xhigh` and `max` only where the model has them
/// natively, else `high`.
fn effort(compat: &BedrockCompat, level: ReasoningLevel, traits: ClaudeTraits) -> String {
    match compat.thinking_level_map.get(level.as_str()) {
        Some(Some(effort)) => return effort.clone(),
        Some(None) if matches!(level, ReasoningLevel::Xhigh | ReasoningLevel::Max) => {
            return "high".to_owned();
        }
        _ => {}
    }
    match level {
        ReasoningLevel::Minimal | ReasoningLevel::Low => "low",
        ReasoningLevel::Medium => "medium",
        ReasoningLevel::High => "high",
        ReasoningLevel::Xhigh if traits.native_xhigh => "xhigh",
        ReasoningLevel::Max if traits.native_max => "max",
        ReasoningLevel::Xhigh | ReasoningLevel::Max => "high",
    }
    .to_owned()
}

/// `{image: {format, source: {bytes}}}`; an unknown MIME type or invalid base64 is an error.
fn image_block(data: &str, mime_type: &str) -> Result<Value, Error> {
    let format = match mime_type.trim().to_ascii_lowercase().as_str() {
        "image/jpeg" | "image/jpg" => "jpeg",
        "image/png" => "png",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => return Err(invalid(format!("Unknown image type: {mime_type}"))),
    };
    if base64::engine::general_purpose::STANDARD.decode(data.trim()).is_err() {
        return Err(invalid(format!("Invalid base64 image data ({mime_type})")));
    }
    Ok(json!({"image": {"format": format, "source": {"bytes": data.trim()}}}))
}

fn user_block(content: &UserContent) -> Result<Value, Error> {
    match content {
        UserContent::Text(t) => Ok(json!({"text": t.text})),
        UserContent::Image(image) => image_block(&image.data, &image.mime_type),
    }
}

/// A replayed thinking block: for Claude, with its signature, as text without
/// one, dropped for the `reasoning_content` marker; redacted reasoning goes back as
/// `redactedContent` (OpenClaw drops it). Other models get the text only.
fn thinking_block(thinking: &ThinkingContent, claude: bool) -> Option<Value> {
    let signature = thinking.thinking_signature.as_deref().unwrap_or_default();
    if thinking.redacted {
        return (claude && !signature.is_empty())
            .then(|| json!({"reasoningContent": {"redactedContent": signature}}));
    }
    let has_text = !thinking.thinking.trim().is_empty();
    if !claude {
        return has_text.then(|| json!({"text": thinking.thinking}));
    }
    let trimmed = signature.trim();
    if trimmed == REASONING_CONTENT_MARKER {
        return None;
    }
    if trimmed.is_empty() {
        return has_text.then(|| json!({"text": thinking.thinking}));
    }
    Some(json!({"reasoningContent": {"reasoningText": {
        "text": thinking.thinking,
        "signature": signature,
    }}}))
}

/// The transcript (after llm-core's cross-provider transform) as Bedrock messages, roles
/// alternating: consecutive messages of one role (a run of tool results, a user message
/// after them, two assistant turns around a dropped one) are one message, since Bedrock
/// rejects two in a row ("A conversation must alternate between user and assistant
/// roles"; OpenClaw merges only the tool results). The cache point ends the last message
/// when it is a user message.
fn convert_messages(
    messages: &[Message],
    model: &Model,
    traits: ClaudeTraits,
    cache_point: Option<&Value>,
) -> Result<Vec<Value>, Error> {
    let messages = transform_messages(messages, model, Some(&IdRules::ALNUM_DASH_64));
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, blocks: Vec<Value>| match out.last_mut() {
        Some((last, existing)) if *last == role => existing.extend(blocks),
        _ => out.push((role, blocks)),
    };
    for message in &messages {
        match message {
            Message::User(user) => {
                let blocks = match &user.content {
                    UserMessageContent::Text(t) => vec![json!({"text": t})],
                    UserMessageContent::Blocks(items) => {
                        items.iter().map(user_block).collect::<Result<Vec<_>, _>>()?
                    }
                };
                if !blocks.is_empty() {
                    push("user", blocks);
                }
            }
            Message::Assistant(assistant) => {
                let mut blocks = Vec::new();
                for block in &assistant.content {
                    match block {
                        AssistantContent::Text(t) if !t.text.trim().is_empty() => {
                            blocks.push(json!({"text": t.text}));
                        }
                        AssistantContent::Text(_) | AssistantContent::ProviderContent(_) => {}
                        AssistantContent::ToolCall(call) => blocks.push(json!({"toolUse": {
                            "toolUseId": call.id,
                            "name": call.name,
                            "input": call.arguments,
                        }})),
                        AssistantContent::Thinking(t) => {
                            blocks.extend(thinking_block(t, traits.claude));
                        }
                    }
                }
                // Bedrock rejects an assistant message with no content.
                if !blocks.is_empty() {
                    push("assistant", blocks);
                }
            }
            Message::ToolResult(result) => {
                let content =
                    result.content.iter().map(user_block).collect::<Result<Vec<_>, _>>()?;
                let status = if result.is_error { "error" } else { "success" };
                let block = json!({"toolResult": {
                    "toolUseId": result.tool_call_id,
                    "content": content,
                    "status": status,
                }});
                push("user", vec![block]);
            }
        }
    }
    if let (Some(point), Some(("user", blocks))) = (cache_point, out.last_mut()) {
        blocks.push(point.clone());
    }
    Ok(out.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect())
}

#[cfg(test)]
mod tests;
