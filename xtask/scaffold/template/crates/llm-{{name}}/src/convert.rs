//! Pure conversion: neutral model, context and options to the wire request.
//!
//! The scaffold's request (replace it with the provider's): `POST {base}/v1/chat` with
//! `{"model", "messages", "tools"?, "max_tokens", "temperature"?, "response_format"?,
//! "stream": true}`; messages are `{"role": "system" | "user", "content"}`,
//! `{"role": "assistant", "content", "tool_calls": [{"id", "name", "arguments"}]}` and
//! `{"role": "tool", "tool_call_id", "content", "is_error"}`.

use llm_core::transform::transform_messages;
use llm_core::{
    AssistantContent, Context, Error, ErrorKind, Message, Model, StreamOptions, UserContent,
};
use llm_http::HttpRequest;
use serde_json::{Map, Value, json};

use crate::{INFO, PROVIDER};

/// Builds the request: provider defaults, then auth, then the model's, then the caller's
/// headers (the key marked sensitive); the body built with `serde_json::Map`, so its bytes
/// are deterministic. Fails, before anything is sent, on a missing key, an output format
/// the model cannot carry, or an input the API cannot express.
pub(crate) fn build_request(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<HttpRequest, Error> {
    let Some(key) = &options.api_key else {
        return Err(Error::new(ErrorKind::Auth, PROVIDER, "No API key for provider: {{name}}")
            .with_retryable(false));
    };
    // A format this model cannot carry is an error, never a request without it.
    let output = llm_core::output::plan(&INFO, PROVIDER, model, context, options, false)?;
    let bearer = format!("Bearer {}", key.expose());
    let defaults = [
        ("content-type", "application/json"),
        ("accept", "text/event-stream"),
        ("authorization", bearer.as_str()),
    ];
    let configured = model.headers.iter().chain(&options.headers);
    let headers = llm_http::header_map(
        PROVIDER,
        defaults.into_iter().chain(configured.map(|(k, v)| (k.as_str(), v.as_str()))),
    )?;

    let mut body = Map::new();
    body.insert("model".to_owned(), json!(model.id));
    body.insert("messages".to_owned(), Value::Array(convert_messages(model, context)));
    if !context.tools.is_empty() {
        let tools: Vec<Value> = context
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
            .collect();
        body.insert("tools".to_owned(), Value::Array(tools));
    }
    body.insert("max_tokens".to_owned(), json!(options.max_tokens.unwrap_or(model.max_tokens)));
    if let Some(t) = options.temperature {
        body.insert("temperature".to_owned(), json!(t));
    }
    if let (Some(plan), Some(format)) = (output, &options.output) {
        let mut response_format = Map::new();
        response_format.insert("name".to_owned(), json!(format.name));
        if let Some(description) = &format.description {
            response_format.insert("description".to_owned(), json!(description));
        }
        response_format.insert("schema".to_owned(), plan.schema);
        response_format.insert("strict".to_owned(), Value::Bool(format.strict));
        body.insert("response_format".to_owned(), Value::Object(response_format));
    }
    body.insert("stream".to_owned(), Value::Bool(true));
    let base = if model.base_url.is_empty() { INFO.default_base_url } else { &model.base_url };
    let url = format!("{}/v1/chat", base.trim_end_matches('/'));
    HttpRequest::json(PROVIDER, url, headers, &Value::Object(body))
}

/// The transcript in the provider's shape: user text, assistant text and tool calls, tool
/// results (after `transform_messages`: another model's thinking is text, calls without a
/// result get one). Add images and thinking as the API allows.
fn convert_messages(model: &Model, context: &Context) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(system) = &context.system_prompt {
        out.push(json!({"role": "system", "content": system}));
    }
    for message in transform_messages(&context.messages, model, None) {
        match message {
            Message::User(user) => {
                let text: Vec<String> = user
                    .content
                    .blocks()
                    .into_iter()
                    .filter_map(|block| match block {
                        UserContent::Text(t) => Some(t.text),
                        _ => None,
                    })
                    .collect();
                out.push(json!({"role": "user", "content": text.join("\n")}));
            }
            Message::Assistant(assistant) => {
                let mut text: Vec<&str> = Vec::new();
                let mut calls = Vec::new();
                for block in &assistant.content {
                    match block {
                        AssistantContent::Text(t) => text.push(&t.text),
                        AssistantContent::ToolCall(c) => calls.push(json!({
                            "id": c.id, "name": c.name, "arguments": c.arguments,
                        })),
                        _ => {}
                    }
                }
                // Text blocks (another model's thinking among them) as paragraphs.
                out.push(
                    json!({"role": "assistant", "content": text.join("\n\n"), "tool_calls": calls}),
                );
            }
            Message::ToolResult(result) => out.push(json!({
                "role": "tool",
                "tool_call_id": result.tool_call_id,
                "content": result.text(),
                "is_error": result.is_error,
            })),
        }
    }
    out
}

#[cfg(test)]
mod tests;
