//! `cargo xtask new-provider NAME`: scaffolds `crates/llm-NAME` with the files
//! every provider has (docs/adding-a-provider.md) and `fixtures/NAME/` with every
//! shared scenario as a declared skip.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The reason written into every scaffolded `skip.txt`.
pub const SKIP_REASON: &str = "not yet implemented";

/// The files of a provider crate, relative to `crates/llm-NAME/`.
pub const CRATE_FILES: &[&str] = &[
    "Cargo.toml",
    "src/lib.rs",
    "src/convert.rs",
    "src/stream.rs",
    "src/client.rs",
    "src/error.rs",
    "tests/it.rs",
];

/// The files of its example, relative to `examples/NAME/`.
pub const EXAMPLE_FILES: &[&str] = &["Cargo.toml", "src/main.rs"];

/// Checks that `name` can be a provider name: lowercase ASCII letters, digits and
/// single dashes, starting with a letter, and not `core`.
pub fn validate_name(name: &str) -> Result<()> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && !name.contains("--")
        && name != "core";
    if ok {
        Ok(())
    } else {
        Err(Error::Msg(format!(
            "`{name}` is not a provider name: use lowercase letters, digits and dashes (the crate is llm-NAME)"
        )))
    }
}

/// `open-ai2` -> `OpenAi2`.
fn camel(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// The contents of each file of [`CRATE_FILES`] for provider `name`.
pub fn crate_files(name: &str) -> Vec<(&'static str, String)> {
    CRATE_FILES
        .iter()
        .zip([CARGO_TOML, LIB_RS, CONVERT_RS, STREAM_RS, CLIENT_RS, ERROR_RS, IT_RS])
        .map(|(path, template)| (*path, fill(template, name)))
        .collect()
}

/// The contents of each file of [`EXAMPLE_FILES`] for provider `name`.
pub fn example_files(name: &str) -> Vec<(&'static str, String)> {
    EXAMPLE_FILES
        .iter()
        .zip([EXAMPLE_CARGO_TOML, EXAMPLE_MAIN_RS])
        .map(|(p, t)| (*p, fill(t, name)))
        .collect()
}

fn fill(template: &str, name: &str) -> String {
    let snake = name.replace('-', "_");
    template
        .replace("{{name}}", name)
        .replace("{{snake}}", &snake)
        .replace("{{Camel}}", &camel(name))
        .replace("{{UPPER}}", &snake.to_ascii_uppercase())
}

/// Writes `crates/llm-NAME/`, `examples/NAME/` and `fixtures/NAME/<scenario>/skip.txt`
/// under `root` (a workspace root with `fixtures/SCENARIOS.md`). Refuses to
/// overwrite anything.
pub fn scaffold(root: &Path, name: &str) -> Result<Vec<PathBuf>> {
    validate_name(name)?;
    let crate_dir = root.join("crates").join(format!("llm-{name}"));
    let example_dir = root.join("examples").join(name);
    let fixture_dir = root.join("fixtures").join(name);
    for dir in [&crate_dir, &example_dir, &fixture_dir] {
        if dir.exists() {
            return Err(Error::Msg(format!("{} already exists", dir.display())));
        }
    }
    let scenarios = crate::shared_scenarios(&root.join("fixtures"))?;
    if scenarios.is_empty() {
        return Err(Error::Msg(format!(
            "{}: no scenarios found",
            root.join("fixtures/SCENARIOS.md").display()
        )));
    }
    let mut files: Vec<(PathBuf, String)> =
        crate_files(name).into_iter().map(|(path, text)| (crate_dir.join(path), text)).collect();
    files
        .extend(example_files(name).into_iter().map(|(path, text)| (example_dir.join(path), text)));
    for scenario in &scenarios {
        files.push((fixture_dir.join(scenario).join("skip.txt"), format!("{SKIP_REASON}\n")));
    }
    let mut written = Vec::new();
    for (path, text) in files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        crate::write(&path, &text)?;
        written.push(path);
    }
    Ok(written)
}

const CARGO_TOML: &str = r#"[package]
name = "llm-{{name}}"
description = "The {{name}} provider for clawcall."
version.workspace = true
edition.workspace = true
rust-version.workspace = true
license.workspace = true
publish.workspace = true

[dependencies]
llm-core = { workspace = true, features = ["tokio"] }
reqwest.workspace = true
serde.workspace = true
serde_json.workspace = true
futures-util.workspace = true
bytes.workspace = true
tracing.workspace = true
tokio = { workspace = true }

[dev-dependencies]
tokio = { workspace = true, features = ["rt-multi-thread", "macros", "net", "io-util", "time"] }

[lints]
workspace = true
"#;

const LIB_RS: &str = r#"//! The {{name}} provider for clawcall (scaffolded by `cargo xtask new-provider`).
//!
//! Capabilities:
//!
//! - [ ] streamed text
//! - [ ] tool calls with streamed arguments
//! - [ ] thinking / reasoning
//! - [ ] usage with cache read / write tokens
//! - [ ] error bodies mapped to `llm_core::ErrorKind`
//! - [x] retries, timeouts, cancellation and tracing through [`llm_core::drive`]
//!
//! Fill in each module as docs/adding-a-provider.md describes, then replace each
//! `fixtures/{{name}}/*/skip.txt` with a fixture.

use bytes::Bytes;
use llm_core::drive::drive_sse;
use llm_core::{AssistantStream, Context, Error, ErrorKind, Model, Provider, StreamOptions};

mod client;
mod convert;
mod error;
mod stream;

/// The API id this crate serves.
pub const API: &str = "{{name}}";

/// The provider name used in errors.
pub const PROVIDER: &str = "{{name}}";

/// The {{name}} provider. Cheap to clone; clones share the HTTP client.
#[derive(Debug, Clone, Default)]
pub struct {{Camel}}Provider {
    http: reqwest::Client,
}

impl {{Camel}}Provider {
    /// A provider with its own HTTP client (rustls).
    pub fn new() -> Self {
        Self::default()
    }

    /// A provider that sends every request with `http`.
    pub fn with_http_client(http: reqwest::Client) -> Self {
        {{Camel}}Provider { http }
    }
}

impl Provider for {{Camel}}Provider {
    fn api(&self) -> &str {
        API
    }

    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> AssistantStream {
        let request = match convert::build_request(model, context, options) {
            Ok(request) => request,
            Err(error) => return AssistantStream::from_error(model, error),
        };
        let body = match serde_json::to_vec(&request.body) {
            Ok(bytes) => Bytes::from(bytes),
            Err(e) => {
                let error = Error::new(
                    ErrorKind::InvalidRequest,
                    PROVIDER,
                    format!("Could not encode the request: {e}"),
                );
                return AssistantStream::from_error(model, error);
            }
        };
        let url = format!("{}{}", model.base_url.trim_end_matches('/'), request.url_path);
        let convert::WireRequest { query, headers, .. } = request;
        let http = self.http.clone();
        drive_sse(
            model,
            options,
            PROVIDER,
            move |_attempt| {
                client::send(
                    http.clone(),
                    url.clone(),
                    query.clone(),
                    headers.clone(),
                    body.clone(),
                )
            },
            stream::Decoder::new,
        )
    }
}
"#;

const CONVERT_RS: &str = r#"//! Pure conversion: neutral model, context and options to the wire request.

use llm_core::transform::transform_messages;
use llm_core::{Context, Error, ErrorKind, Message, Model, StreamOptions, UserContent};
use serde_json::{Map, Value, json};

use crate::PROVIDER;

/// Everything `client.rs` needs to send one request.
#[derive(Debug, Clone)]
pub(crate) struct WireRequest {
    /// Appended to `Model::base_url`.
    pub(crate) url_path: String,
    /// Query parameters (never an API key).
    pub(crate) query: Vec<(String, String)>,
    /// Provider defaults, then auth, then the model's, then the caller's headers.
    pub(crate) headers: Vec<(String, String)>,
    /// The JSON body, built with `serde_json::Map` so its bytes are deterministic.
    pub(crate) body: Value,
}

/// Builds the request. Fails on a missing key or an input the API cannot express.
pub(crate) fn build_request(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<WireRequest, Error> {
    let Some(key) = &options.api_key else {
        return Err(Error::new(ErrorKind::Auth, PROVIDER, "No API key for provider: {{name}}"));
    };
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("authorization".to_owned(), format!("Bearer {}", key.expose())),
    ];
    headers.extend(model.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
    headers.extend(options.headers.iter().map(|(k, v)| (k.clone(), v.clone())));

    let mut body = Map::new();
    body.insert("model".to_owned(), json!(model.id));
    body.insert("messages".to_owned(), Value::Array(convert_messages(model, context)));
    body.insert("max_tokens".to_owned(), json!(options.max_tokens.unwrap_or(model.max_tokens)));
    if let Some(t) = options.temperature {
        body.insert("temperature".to_owned(), json!(t));
    }
    body.insert("stream".to_owned(), Value::Bool(true));
    Ok(WireRequest {
        url_path: "/v1/chat".to_owned(),
        query: Vec::new(),
        headers,
        body: Value::Object(body),
    })
}

/// The transcript in the provider's shape. Scaffold: user text only; add
/// assistant turns, tool calls, tool results and images.
fn convert_messages(model: &Model, context: &Context) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(system) = &context.system_prompt {
        out.push(json!({"role": "system", "content": system}));
    }
    for message in transform_messages(&context.messages, model, None) {
        if let Message::User(user) = message {
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
    }
    out
}
"#;

const STREAM_RS: &str = r#"//! Pure stream decoding: SSE events in, `llm_core::Delta`s out.

use llm_core::drive::WireDecoder;
use llm_core::sse::SseEvent;
use llm_core::{Delta, StopReason};
use serde_json::Value;

/// The wire state machine. Scaffold: `{"text": ".."}` events and a `[DONE]`
/// terminator; replace with the provider's events.
#[derive(Debug, Default)]
pub(crate) struct Decoder {}

impl Decoder {
    /// A fresh decoder (one per attempt).
    pub(crate) fn new() -> Self {
        Self::default()
    }
}

impl WireDecoder for Decoder {
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) {
        if event.data.trim() == "[DONE]" {
            out.push(Delta::Stop(StopReason::Stop));
            out.push(Delta::Done);
            return;
        }
        let Ok(value) = serde_json::from_str::<Value>(&event.data) else { return };
        if let Some(text) = value.get("text").and_then(Value::as_str) {
            out.push(Delta::Text { key: 0, text: text.to_owned() });
        }
    }

    fn end(&mut self, _out: &mut Vec<Delta>) {
        // The body ended without `[DONE]`: emit nothing, llm-core reports `truncated`.
    }
}
"#;

const CLIENT_RS: &str = r#"//! The only HTTP code: one attempt, status and body mapping.

use bytes::Bytes;
use futures_util::StreamExt;
use llm_core::drive::HttpResponse;
use llm_core::error::parse_retry_after;
use llm_core::{Error, ErrorKind};

use crate::PROVIDER;

/// Sends one attempt. Non-2xx responses are read whole and mapped by `error.rs`.
pub(crate) async fn send(
    http: reqwest::Client,
    url: String,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    body: Bytes,
) -> Result<HttpResponse, Error> {
    let mut request = http.post(&url).query(&query).body(body);
    for (name, value) in &headers {
        request = request.header(name, value);
    }
    let response = request.send().await.map_err(|e| transport(&e.without_url()))?;
    let status = response.status().as_u16();
    if !response.status().is_success() {
        let header = |name: &str| {
            response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
        };
        let retry_after = parse_retry_after(
            header("retry-after-ms").as_deref(),
            header("retry-after").as_deref(),
        );
        let text = response.text().await.unwrap_or_default();
        return Err(crate::error::http_error(status, retry_after, text));
    }
    let body = response.bytes_stream().map(|chunk| chunk.map_err(|e| transport(&e.without_url())));
    Ok(HttpResponse { status, body: body.boxed() })
}

fn transport(e: &reqwest::Error) -> Error {
    Error::new(ErrorKind::Transport, PROVIDER, format!("Request failed: {e}"))
}
"#;

const ERROR_RS: &str = r#"//! Wire error bodies to `llm_core::Error`.

use std::time::Duration;

use llm_core::{Error, ErrorKind};
use serde_json::Value;

use crate::PROVIDER;

/// An HTTP error response: the kind from the status, the message from the body
/// (`{"error": {"message": ..}}` when present), the raw body kept.
pub(crate) fn http_error(status: u16, retry_after: Option<Duration>, body: String) -> Error {
    let parsed = serde_json::from_str::<Value>(&body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/message"))
        .and_then(Value::as_str)
        .map_or_else(|| format!("HTTP {status}"), str::to_owned);
    Error::new(ErrorKind::from_status(status), PROVIDER, message)
        .with_status(status)
        .with_retry_after(retry_after)
        .with_body(body)
}
"#;

const IT_RS: &str = r#"//! Integration tests for llm-{{name}}.

use llm_core::Provider;

#[test]
fn serves_its_api_id() {
    assert_eq!(llm_{{snake}}::{{Camel}}Provider::new().api(), llm_{{snake}}::API);
}

/// One live tool round trip; runs only when `{{UPPER}}_API_KEY` is set.
#[test]
fn live_smoke() {
    let Ok(_key) = std::env::var("{{UPPER}}_API_KEY") else {
        println!("skipped: {{UPPER}}_API_KEY not set");
        return;
    };
    // Scaffold: call the real API with one tool and check the round trip.
}
"#;

const EXAMPLE_CARGO_TOML: &str = r#"[package]
name = "example-{{name}}"
description = "A one-tool clawcall agent on the {{name}} API."
version.workspace = true
edition.workspace = true
rust-version.workspace = true
license.workspace = true
publish = false

# llm-core, agent-core and exactly one provider crate (`cargo xtask tidy` checks it).
[dependencies]
agent-core.workspace = true
llm-core.workspace = true
llm-{{name}} = { path = "../../crates/llm-{{name}}" }
serde_json.workspace = true
tokio = { workspace = true, features = ["rt", "macros"] }

[lints]
workspace = true
"#;

const EXAMPLE_MAIN_RS: &str = r#"//! A one-tool agent on the {{name}} API.
//!
//! ```text
//! {{UPPER}}_API_KEY=... cargo run -p example-{{name}} -- "What time is it in UTC?"
//! ```
//!
//! Without `{{UPPER}}_API_KEY` it says so and exits successfully, sending nothing.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use agent_core::{
    Agent, AgentConfig, AgentContext, AgentTool, ToolError, ToolInvocation, ToolOutput,
};
use llm_core::{ApiKey, Message, Model, Tool};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Ok(key) = std::env::var("{{UPPER}}_API_KEY") else {
        println!("skipped: set {{UPPER}}_API_KEY to run this example");
        return ExitCode::SUCCESS;
    };
    let prompt = std::env::args().nth(1).unwrap_or_else(|| "What time is it in UTC?".to_owned());

    // An empty base URL means the provider's public endpoint.
    let model = Model {
        id: "{{name}}-model".to_owned(),
        api: llm_{{snake}}::API.to_owned(),
        provider: "{{name}}".to_owned(),
        max_tokens: 1024,
        ..Model::default()
    };
    let mut config = AgentConfig::new(model, Arc::new(llm_{{snake}}::{{Camel}}Provider::new()));
    config.options.api_key = Some(ApiKey::new(key));
    config.max_turns = Some(4);

    let clock = AgentTool::new(
        Tool {
            name: "unix_time".to_owned(),
            description: "The current time as seconds since 1970-01-01T00:00:00Z.".to_owned(),
            parameters: serde_json::json!({"type": "object", "properties": {}}),
        },
        |_call: ToolInvocation| async {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_err(|e| ToolError(e.to_string()))?;
            Ok(ToolOutput::text(now.as_secs().to_string()))
        },
    );
    let context = AgentContext {
        system_prompt: Some("Answer briefly. Use the tool for the time.".to_owned()),
        messages: Vec::new(),
        tools: vec![clock],
    };

    let outcome = Agent::new(config).run(context, vec![Message::user(prompt)]).finish().await;
    for message in &outcome.messages {
        match message {
            Message::Assistant(reply) => {
                for call in reply.tool_calls() {
                    println!("-> {}({})", call.name, call.arguments);
                }
                if let Some(error) = &reply.error_message {
                    println!("error: {error}");
                }
                let text = reply.text();
                if !text.is_empty() {
                    println!("{text}");
                }
            }
            Message::ToolResult(result) => println!("<- {}", result.text()),
            Message::User(_) => {}
        }
    }
    println!("({:?})", outcome.reason);
    ExitCode::SUCCESS
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name("open-router").is_ok());
        for bad in ["", "Core", "core", "a_b", "-a", "a-", "a--b", "1a"] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        assert_eq!(camel("open-router2"), "OpenRouter2");
    }

    #[test]
    fn templates_are_filled() {
        for (path, text) in
            crate_files("open-router").into_iter().chain(example_files("open-router"))
        {
            assert!(!text.contains("{{"), "{path} still has a placeholder");
        }
    }
}
