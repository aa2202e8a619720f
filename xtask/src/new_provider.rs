//! `cargo xtask new-provider NAME`: scaffolds `crates/llm-NAME` with the files
//! every provider has (docs/adding-a-provider.md) and `fixtures/NAME/` with every
//! shared scenario as a declared skip.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The marker line above which `scaffold` registers a new crate in a file.
pub const MARKER: &str = "new-provider: insert above";

/// The files of a provider crate, relative to `crates/llm-NAME/` (the layout every
/// provider crate has; the HTTP exchange is `llm-http`'s).
pub const CRATE_FILES: &[&str] =
    &["Cargo.toml", "src/lib.rs", "src/convert.rs", "src/stream.rs", "src/error.rs", "tests/it.rs"];

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
        .zip([CARGO_TOML, LIB_RS, CONVERT_RS, STREAM_RS, ERROR_RS, IT_RS])
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

/// The registration lines for provider `name`: `(file under the workspace root, marker,
/// line)`, each inserted above the file's line ending in that marker ([`MARKER`], or
/// [`MARKER`] with a suffix where a file has several lists). These are the only edits
/// outside the new crate: the `clawcall` registry is what claw, xtask and the docs read.
pub fn registrations(name: &str) -> Vec<(&'static str, String, String)> {
    let snake = name.replace('-', "_");
    let camel = camel(name);
    let marker = |suffix: &str| format!("{MARKER}{suffix}");
    vec![
        ("Cargo.toml", marker(""), format!("llm-{name} = {{ path = \"crates/llm-{name}\" }}")),
        ("crates/clawcall/Cargo.toml", marker(" (default feature)"), format!("    \"{name}\",")),
        (
            "crates/clawcall/Cargo.toml",
            marker(" (feature)"),
            format!("{name} = [\"dep:llm-{name}\"]"),
        ),
        (
            "crates/clawcall/Cargo.toml",
            marker(""),
            format!("llm-{name} = {{ workspace = true, optional = true }}"),
        ),
        (
            "crates/clawcall/src/registry.rs",
            marker(""),
            format!(
                "    #[cfg(feature = \"{name}\")]\n    ProviderEntry::new(&llm_{snake}::INFO, || Arc::new(llm_{snake}::{camel}Provider::new()),\n        |client, _env| Arc::new(llm_{snake}::{camel}Provider::builder().http_client(client).build())),"
            ),
        ),
        (
            "crates/clawcall/src/lib.rs",
            marker(" (re-export)"),
            format!("#[cfg(feature = \"{name}\")]\npub use llm_{snake};"),
        ),
    ]
}

/// Inserts `line` above the line of `text` that ends with `marker` (keeping its
/// comment style), or `None` when there is no such line.
pub fn insert_above_marker(text: &str, marker: &str, line: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + line.len() + 1);
    let mut done = false;
    for l in text.split_inclusive('\n') {
        if !done && l.trim_end().ends_with(marker) {
            out.push_str(line);
            out.push('\n');
            done = true;
        }
        out.push_str(l);
    }
    done.then_some(out)
}

/// Writes `crates/llm-NAME/`, `examples/NAME/` and an empty `fixtures/NAME/` under
/// `root` (a workspace root with `fixtures/SCENARIOS.md`), and registers the crate
/// ([`registrations`]). Refuses to overwrite anything; checks every marker before
/// writing a file.
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
    // Several lines may go into one file: each edit applies to the text edited so far.
    let mut edits: Vec<(PathBuf, String)> = Vec::new();
    for (file, marker, line) in registrations(name) {
        let path = root.join(file);
        let text = match edits.iter().position(|(p, _)| *p == path) {
            Some(i) => edits.swap_remove(i).1,
            None => crate::read_to_string(&path)?,
        };
        let edited = insert_above_marker(&text, &marker, &line).ok_or_else(|| {
            Error::Msg(format!("{}: no `{marker}` line to register the crate at", path.display()))
        })?;
        edits.push((path, edited));
    }
    let mut files: Vec<(PathBuf, String)> =
        crate_files(name).into_iter().map(|(path, text)| (crate_dir.join(path), text)).collect();
    files
        .extend(example_files(name).into_iter().map(|(path, text)| (example_dir.join(path), text)));
    files.push((
        fixture_dir.join("README.md"),
        format!(
            "# {name} fixtures\n\nOne folder per scenario of `../SCENARIOS.md` whose `needs` `llm_{}::INFO` declares (format: `../README.md`).\n",
            name.replace('-', "_")
        ),
    ));
    files.extend(edits);
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
llm-http.workspace = true
reqwest.workspace = true
serde.workspace = true
serde_json.workspace = true

[dev-dependencies]
futures-util.workspace = true
tokio = { workspace = true, features = ["rt-multi-thread", "macros"] }

[lints]
workspace = true
"#;

const LIB_RS: &str = r#"//! The {{name}} provider for clawcall (scaffolded by `cargo xtask new-provider`).
//!
//! What it supports is declared as data in [`INFO`] (`capabilities`): the conformance
//! grid runs the shared scenarios those capabilities make apply and skips the others,
//! `claw --provider {{name}}` and the docs read the rest of [`INFO`].
//! Declare a capability once its fixtures exist (docs/adding-a-provider.md).
//!
//! The HTTP exchange, retries, timeouts, cancellation and tracing are `llm-http`'s;
//! this crate converts requests (`convert.rs`), decodes its stream (`stream.rs`)
//! and maps its error bodies (`error.rs`).
#![warn(missing_docs)]

mod convert;
mod error;
mod stream;

use std::sync::Arc;

use llm_core::{Capabilities, Error, ModelInfo, ProviderInfo};
use llm_http::{BoxFuture, Exchange, HttpRequest, HttpResponse, Request, WireFormat};

pub use stream::Decoder;

/// The API id this crate serves.
pub const API: &str = "{{name}}";

/// The provider name used in errors.
pub const PROVIDER: &str = "{{name}}";

/// What this crate declares about itself.
pub const INFO: ProviderInfo = ProviderInfo {
    name: "{{name}}",
    api: API,
    provider: PROVIDER,
    default_base_url: "https://api.{{name}}.invalid",
    key_env: &["{{UPPER}}_API_KEY"],
    // Add `Capability::Streaming`, `Capability::Tools`, ... as the fixtures land.
    capabilities: Capabilities::NONE,
    // Known models with limits and prices; the first is `claw`'s default.
    models: &[] as &[ModelInfo],
    // How each model family carries a structured output format (none yet).
    output: &[],
};

/// The {{name}} provider: `{{Camel}}Provider::new()`, or `{{Camel}}Provider::builder()`
/// for its own HTTP client or environment.
pub type {{Camel}}Provider = llm_http::HttpProvider<{{Camel}}>;

/// The {{name}} wire format.
#[derive(Debug, Clone, Copy, Default)]
pub struct {{Camel}};

impl WireFormat for {{Camel}} {
    type Decoder = Decoder;
    type Call = HttpRequest;

    fn info(&self) -> &'static ProviderInfo {
        &INFO
    }

    fn prepare(&self, request: Request<'_>) -> Result<HttpRequest, Error> {
        let wire = convert::build_request(request.model, request.context, request.options)?;
        HttpRequest::json(PROVIDER, wire.url, wire.headers, &wire.body)
    }

    fn attempt(
        &self,
        call: &Arc<HttpRequest>,
        exchange: Exchange,
    ) -> BoxFuture<'static, Result<HttpResponse, Error>> {
        exchange.send(Arc::clone(call), |r| error::http_error(r.status, r.retry_after, r.body))
    }

    fn decoder(&self, _call: &HttpRequest) -> Decoder {
        Decoder::new()
    }
}
"#;

const CONVERT_RS: &str = r#"//! Pure conversion: neutral model, context and options to the wire request.

use llm_core::transform::transform_messages;
use llm_core::{
    AssistantContent, Context, Error, ErrorKind, Message, Model, StreamOptions, UserContent,
};
use serde_json::{Map, Value, json};

use crate::{INFO, PROVIDER};

/// Everything `lib.rs` needs to send one request (its `Debug` redacts the key).
#[derive(Clone)]
pub(crate) struct WireRequest {
    /// The full URL (never with a key in it).
    pub(crate) url: String,
    /// Provider defaults, then auth, then the model's, then the caller's headers (the key
    /// marked sensitive).
    pub(crate) headers: llm_http::HeaderMap,
    /// The JSON body, built with `serde_json::Map` so its bytes are deterministic.
    pub(crate) body: Value,
}

impl std::fmt::Debug for WireRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireRequest")
            .field("url", &self.url)
            .field("headers", &self.headers)
            .field("body", &self.body)
            .finish()
    }
}

/// Builds the request. Fails on a missing key or an input the API cannot express.
pub(crate) fn build_request(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<WireRequest, Error> {
    let Some(key) = &options.api_key else {
        return Err(Error::new(ErrorKind::Auth, PROVIDER, "No API key for provider: {{name}}")
            .with_retryable(false));
    };
    let bearer = format!("Bearer {}", key.expose());
    let defaults = [("content-type", "application/json"), ("authorization", bearer.as_str())];
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
    body.insert("stream".to_owned(), Value::Bool(true));
    let base = if model.base_url.is_empty() { INFO.default_base_url } else { &model.base_url };
    Ok(WireRequest {
        url: format!("{}/v1/chat", base.trim_end_matches('/')),
        headers,
        body: Value::Object(body),
    })
}

/// The transcript in the provider's shape: user text, assistant text and tool
/// calls, tool results. Add images and thinking as the API allows.
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
                let mut text = String::new();
                let mut calls = Vec::new();
                for block in &assistant.content {
                    match block {
                        AssistantContent::Text(t) => text.push_str(&t.text),
                        AssistantContent::ToolCall(c) => calls.push(json!({
                            "id": c.id, "name": c.name, "arguments": c.arguments,
                        })),
                        _ => {}
                    }
                }
                out.push(json!({"role": "assistant", "content": text, "tool_calls": calls}));
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
"#;

const STREAM_RS: &str = r#"//! Pure stream decoding: SSE events in, `llm_core::raw::Delta`s out.
//!
//! Scaffold wire format (replace with the provider's): one JSON object per event,
//! `{"type": "text", "text"}`, `{"type": "tool_call", "index", "id", "name"}`,
//! `{"type": "tool_call_delta", "index", "arguments"}`, `{"type": "usage", "input",
//! "output"}`, `{"type": "stop", "reason"}`, `{"type": "error", "message"}`, then
//! `[DONE]`. Unknown types are ignored; malformed JSON is a `decode` error.
//!
//! Text and argument fragments are read as `WireText` and joined by one
//! `SurrogateJoiner`: a server that builds its stream from UTF-16 strings may split a
//! surrogate pair across two events, and a plain `String` field would fail the event.

use llm_core::raw::drive::WireDecoder;
use llm_core::raw::sse::SseEvent;
use llm_core::raw::{Channel, Delta, SurrogateJoiner, WireText};
use llm_core::{StopReason, Usage};
use serde::Deserialize;
use serde_json::Value;

use crate::error::stream_error;

/// One event of the scaffold format (every field optional, unknown fields ignored).
#[derive(Debug, Deserialize)]
struct WireEvent {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<WireText>,
    arguments: Option<WireText>,
    index: Option<u64>,
    id: Option<String>,
    name: Option<String>,
    input: Option<u64>,
    output: Option<u64>,
    reason: Option<String>,
}

/// The wire state machine (one per attempt).
#[derive(Debug, Default)]
pub struct Decoder {
    /// Whether a stop reason arrived (a `[DONE]` without one is a truncation).
    stopped: bool,
    /// Surrogate halves split across events.
    surrogates: SurrogateJoiner,
}

/// Block key of the text block; tool call `i` is block `i + 1`.
const TEXT: u64 = 0;

impl Decoder {
    /// A fresh decoder.
    pub fn new() -> Self {
        Self::default()
    }

    fn decode(&mut self, data: &str, out: &mut Vec<Delta>) {
        if data == "[DONE]" {
            if self.stopped {
                out.push(Delta::Done);
            }
            return;
        }
        let event: WireEvent = match serde_json::from_str(data) {
            Ok(event) => event,
            Err(e) => {
                out.push(Delta::Error(
                    llm_core::Error::new(
                        llm_core::ErrorKind::Decode,
                        crate::PROVIDER,
                        format!("Malformed event: {e}"),
                    )
                    .with_retryable(false),
                ));
                return;
            }
        };
        let key = event.index.unwrap_or(0).saturating_add(1);
        match event.kind.as_deref() {
            Some("text") => {
                let text = self.surrogates.join(TEXT, Channel::Text, event.text.unwrap_or_default());
                if !text.is_empty() {
                    out.push(Delta::Text { key: TEXT, text });
                }
            }
            Some("tool_call") => out.push(Delta::ToolCallStart {
                key,
                id: event.id.unwrap_or_default(),
                name: event.name.unwrap_or_default(),
                arguments: None,
            }),
            Some("tool_call_delta") => {
                let arguments = event.arguments.unwrap_or_default();
                let fragment = self.surrogates.join(key, Channel::ToolArgs, arguments);
                if !fragment.is_empty() {
                    out.push(Delta::ToolCallArgs { key, fragment });
                }
            }
            Some("usage") => out.push(Delta::Usage(Usage {
                input: event.input.unwrap_or(0),
                output: event.output.unwrap_or(0),
                ..Usage::default()
            })),
            Some("stop") => {
                self.stopped = true;
                out.push(Delta::Stop(match event.reason.as_deref() {
                    Some("tool_use") => StopReason::ToolUse,
                    Some("length") => StopReason::Length,
                    _ => StopReason::Stop,
                }));
            }
            Some("error") => {
                // Rare: the error body is read again as a whole value.
                let value: Value = serde_json::from_str(data).unwrap_or(Value::Null);
                out.push(Delta::Error(stream_error(&value)));
            }
            _ => {}
        }
    }
}

impl WireDecoder for Decoder {
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) {
        let from = out.len();
        self.decode(event.data.trim(), out);
        // A half still waiting when its block or the stream ends becomes U+FFFD there.
        self.surrogates.settle(out, from);
    }

    fn end(&mut self, _out: &mut Vec<Delta>) {
        // The body ended without `[DONE]`: emit nothing, the driver reports `truncated`.
    }
}
"#;

const ERROR_RS: &str = r#"//! Wire error bodies to `llm_core::Error`: the codes this API names, to kinds.
//!
//! `llm_http::ErrorBody` reads a body whatever its envelope (JSON of any known shape, HTML,
//! text, empty, cut short, huge); what is here is the table.

use std::time::Duration;

use llm_core::{Error, ErrorKind};
use llm_http::ErrorBody;
use serde_json::Value;

use crate::PROVIDER;

/// The kind the body's code names, else the status's (replace with the API's codes).
fn kind_for(body: &ErrorBody, status: Option<u16>) -> ErrorKind {
    match body.label() {
        Some("invalid_api_key") => ErrorKind::Auth,
        Some("rate_limit_exceeded") => ErrorKind::RateLimited,
        _ if body.says_context_length() => ErrorKind::ContextLength,
        _ => status.map_or(ErrorKind::Provider, ErrorKind::from_status),
    }
}

/// An HTTP error response: the kind from the body's code or the status, the message from
/// the body, the raw body kept.
pub(crate) fn http_error(status: u16, retry_after: Option<Duration>, body: String) -> Error {
    let read = ErrorBody::parse(&body);
    let kind = kind_for(&read, Some(status));
    let mut error = Error::new(kind, PROVIDER, read.message_or_status(status))
        .with_status(status)
        .with_retry_after(retry_after);
    if let Some(code) = read.label() {
        error = error.with_code(code);
    }
    error.with_body(body)
}

/// An `{"type": "error", "message"}` event after HTTP 200 (the driver retries it only
/// while nothing has been shown).
pub(crate) fn stream_error(event: &Value) -> Error {
    let read = ErrorBody::from_value(event);
    Error::new(kind_for(&read, None), PROVIDER, read.message_or("stream error"))
        .with_body(event.to_string())
}
"#;

const IT_RS: &str = r##"//! Integration tests for llm-{{name}}.

use llm_core::Provider;

#[test]
fn serves_its_api_id() {
    assert_eq!(llm_{{snake}}::{{Camel}}Provider::new().api(), llm_{{snake}}::API);
    assert_eq!(llm_{{snake}}::INFO.api, llm_{{snake}}::API);
}

/// A server that builds its stream from UTF-16 strings may split a surrogate pair across
/// two events: the decoder joins it into one character instead of failing either event.
#[test]
fn a_surrogate_pair_split_across_events_is_one_character() {
    use llm_core::raw::drive::WireDecoder;
    let mut decoder = llm_{{snake}}::Decoder::new();
    let mut out = Vec::new();
    for data in [r#"{"type":"text","text":"a\ud83d"}"#, r#"{"type":"text","text":"\ude00b"}"#] {
        let event =
            llm_core::raw::sse::SseEvent { event: None, data: data.to_owned(), id: None };
        decoder.event(event, &mut out);
    }
    let text: String = out
        .iter()
        .map(|d| match d {
            llm_core::raw::Delta::Text { text, .. } => text.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(text, "a\u{1F600}b");
}

/// One live round trip; runs only when `{{UPPER}}_API_KEY` is set.
#[tokio::test]
async fn live_smoke() {
    let Some(key) = llm_http::Env::Process.api_key(&llm_{{snake}}::INFO) else {
        println!("skipped: {{UPPER}}_API_KEY not set");
        return;
    };
    let Some(model) = llm_{{snake}}::INFO.default_model() else {
        println!("skipped: INFO lists no model yet");
        return;
    };
    let options = llm_core::StreamOptions {
        api_key: Some(llm_core::ApiKey::new(key)),
        ..llm_core::StreamOptions::default()
    };
    let context = llm_core::Context {
        messages: vec![llm_core::Message::user("Say hi.")],
        ..llm_core::Context::default()
    };
    let message = llm_{{snake}}::{{Camel}}Provider::new().complete(&model, &context, &options).await;
    assert!(message.error_message.is_none(), "{:?}", message.error_message);
}
"##;

const EXAMPLE_CARGO_TOML: &str = r#"[package]
name = "example-{{name}}"
description = "A one-tool clawcall agent on the {{name}} API."
version.workspace = true
edition.workspace = true
rust-version.workspace = true
license.workspace = true
publish = false

# The front door with exactly one provider crate (`cargo xtask tidy` checks it).
[dependencies]
clawcall = { workspace = true, default-features = false, features = ["{{name}}"] }
serde_json.workspace = true
tokio = { workspace = true, features = ["rt", "macros"] }

[lints]
workspace = true
"#;

const EXAMPLE_MAIN_RS: &str = r#"//! A one-tool agent on the {{name}} API, through the front door (`clawcall`).
//!
//! ```text
//! {{UPPER}}_API_KEY=... cargo run -p example-{{name}} -- "What time is it in UTC?"
//! ```
//!
//! Without `{{UPPER}}_API_KEY`, or while `llm_{{snake}}::INFO` lists no model, it says so
//! and exits successfully, sending nothing.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clawcall::{Agent, AgentContext, AgentTool, Message, ToolError, ToolInvocation, ToolOutput};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // The catalog's first model (`{{name}}/<model id>` once INFO lists one).
    let Some(model) = clawcall::llm_{{snake}}::INFO.models.first() else {
        println!("skipped: llm_{{snake}}::INFO lists no model yet");
        return ExitCode::SUCCESS;
    };
    let mut config = match clawcall::agent_config(&format!("{{name}}/{}", model.id)) {
        Ok(config) => config,
        Err(e) => {
            println!("skipped: {e}");
            return ExitCode::SUCCESS;
        }
    };
    let prompt = std::env::args().nth(1).unwrap_or_else(|| "What time is it in UTC?".to_owned());
    config.max_turns = Some(4);

    let clock = AgentTool::new(
        clawcall::llm_core::Tool {
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
    for message in outcome.messages() {
        match message {
            Message::Assistant(reply) => {
                for call in reply.tool_calls() {
                    println!("-> {}({})", call.name, call.arguments);
                }
            }
            Message::ToolResult(result) => println!("<- {}", result.text()),
            Message::User(_) => {}
        }
    }
    if let Some(error) = &outcome.error {
        println!("error: {error}");
    }
    println!("{}", outcome.text());
    println!("({:?}, {} tokens, ${:.4})", outcome.reason, outcome.usage().total_tokens, outcome.cost());
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
    fn crate_files_have_the_layout_tidy_checks() {
        for file in crate::tidy::PROVIDER_SRC_FILES {
            let path = format!("src/{file}");
            assert!(CRATE_FILES.contains(&path.as_str()), "{path} not scaffolded");
        }
        for file in CRATE_FILES {
            assert!(!file.ends_with("_tests.rs"), "{file}: tests go in src/<module>/tests.rs");
        }
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
