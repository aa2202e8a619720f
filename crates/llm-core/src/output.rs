//! Structured output: asking a model for an answer that matches a JSON Schema, and
//! reading that answer back as a validated value.
//!
//! The format travels on the request as [`StreamOptions::output`]: like `tool_choice`
//! it constrains one request, and it is not part of the transcript ([`Context`] is
//! what a conversation stores, and an agent asks for a format on its last turn only).
//!
//! How a provider carries a format is data in its [`ProviderInfo::output`], per model
//! family: [`OutputMode::Native`] (the API's own response format), [`OutputMode::Tool`]
//! (one forced tool whose arguments are the answer) or unsupported. A provider checks
//! the request with [`plan`] before sending anything: a format a model cannot honour is
//! an [`ErrorKind::Unsupported`] error, never a request without it.
//!
//! The answer streams through [`StructuredStream`]: text (native) or the forced call's
//! arguments (tool) feed one [`PartialJson`], so the partial value and the pointer of
//! what changed are read after every fragment at the same linear cost as tool
//! arguments. The end is a [`StructuredOutcome`]: valid, invalid (with the violations),
//! refused, cut off, or failed. [`generate`] and [`stream_typed`] do the same for a
//! Rust type `T: JsonSchema + DeserializeOwned`.
//!
//! ```
//! use llm_core::output::OutputFormat;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Person {
//!     name: String,
//!     age: Option<u32>,
//! }
//!
//! let format = OutputFormat::for_type::<Person>();
//! assert_eq!(format.name, "Person");
//! // `u32` has a `format` strict mode rejects: the type is sent loose.
//! assert!(!format.strict);
//! ```

use std::borrow::Cow;
use std::sync::Arc;

use futures_util::StreamExt;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, ErrorKind};
use crate::event::AssistantEvent;
use crate::options::{StreamOptions, ToolChoice};
use crate::provider::{Provider, ProviderInfo};
use crate::raw::partial_json::{PartialJson, parse_streaming_json};
use crate::raw::strict::{StrictPlan, to_strict};
use crate::stream::AssistantStream;
use crate::types::{AssistantContent, AssistantMessage, Context, Model, StopReason, Tool};
use crate::validation::Violation;

/// Longest format name the OpenAI-style APIs accept (`^[a-zA-Z0-9_-]{1,64}$`).
const MAX_NAME_LEN: usize = 64;

/// A requested answer shape: a JSON Schema with a name and a strictness choice.
///
/// Serializes as `{"name", "description"?, "schema", "strict"}` (`strict` defaults to
/// `true` when read), so a run's stored state can carry it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OutputFormat {
    /// The format's name (`[A-Za-z0-9_-]`, 1 to 64 characters): the `json_schema` name
    /// of the OpenAI-style APIs and the forced tool's name where a format is a tool.
    pub name: String,
    /// What the answer is, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema the answer must match. The root should be an object schema: most
    /// APIs accept nothing else.
    pub schema: Value,
    /// Ask for grammar-constrained output where the API has a switch for it
    /// (`strict: true`). The schema is then rewritten losslessly by
    /// [`crate::raw::strict::to_strict`]; one that cannot be strict is an
    /// `invalid_request` before any request, never sent loose.
    #[serde(default = "strict_default")]
    pub strict: bool,
}

fn strict_default() -> bool {
    true
}

impl OutputFormat {
    /// A strict format named `name` for `schema`.
    pub fn new(name: impl Into<String>, schema: Value) -> Self {
        OutputFormat { name: name.into(), description: None, schema, strict: true }
    }

    /// A format for `T`, named after the type (schemars' schema name, with characters
    /// outside `[A-Za-z0-9_-]` replaced by `_`), schema from `schemars` (the `$schema`
    /// key removed). It is strict when the schema can be strict; schemars describes
    /// unsigned integers with a `format` strict mode rejects (`uint32`), so a type with
    /// one is sent loose and its answer is still validated. Set
    /// [`OutputFormat::strict`] to override.
    pub fn for_type<T: JsonSchema>() -> Self {
        let name: String = T::schema_name()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
            .take(MAX_NAME_LEN)
            .collect();
        let mut schema = schemars::schema_for!(T).to_value();
        if let Some(root) = schema.as_object_mut() {
            root.remove("$schema");
        }
        let strict = to_strict(&schema).is_ok();
        OutputFormat { strict, ..OutputFormat::new(name, schema) }
    }

    /// The same format with a description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The same format with `strict` set.
    pub fn with_strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Checks the format before it is used: its name (as [`plan`] does) and its schema,
    /// which must compile as a JSON Schema (`jsonschema`, offline: a remote `$ref` is an
    /// error) and describe an object (most APIs take nothing else at the root). The error
    /// says what is wrong, for the person who wrote the schema.
    pub fn check(&self) -> Result<(), String> {
        if !valid_name(&self.name) {
            return Err(format!(
                "the name {:?} must be 1 to 64 characters of [A-Za-z0-9_-]",
                self.name
            ));
        }
        let Some(root) = self.schema.as_object() else {
            return Err("the schema must be a JSON object".to_owned());
        };
        match root.get("type") {
            Some(Value::String(t)) if t == "object" => {}
            _ => return Err("the schema's root must be `\"type\": \"object\"`".to_owned()),
        }
        jsonschema::options()
            .offline()
            .build(&self.schema)
            .map(drop)
            .map_err(|e| format!("the schema does not compile: {e}"))
    }

    /// The format as the tool a forced-tool provider sends (name, description, schema).
    pub fn as_tool(&self) -> Tool {
        Tool {
            name: self.name.clone(),
            description: self
                .description
                .clone()
                .unwrap_or_else(|| "Respond with the final answer.".to_owned()),
            parameters: self.schema.clone(),
        }
    }
}

/// Whether `name` is a format name every API accepts (`^[A-Za-z0-9_-]{1,64}$`).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// How a model carries an [`OutputFormat`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputMode {
    /// The API's own response format; the answer is the message's text.
    Native,
    /// One forced tool named after the format; the answer is that call's arguments.
    Tool,
    /// The model cannot honour a format: asking for one is an error.
    Unsupported,
}

impl OutputMode {
    /// `native`, `tool` or `unsupported`.
    pub const fn name(self) -> &'static str {
        match self {
            OutputMode::Native => "native",
            OutputMode::Tool => "tool",
            OutputMode::Unsupported => "unsupported",
        }
    }
}

/// One row of a provider's output-format table: the models whose id contains
/// `contains` carry a format this way. The first matching row wins; `""` matches every
/// model, so a last row with it is the default; a model no row matches is
/// [`OutputMode::Unsupported`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputFamily {
    /// A substring of the model id (`claude-3-`), or `""` for every model.
    pub contains: &'static str,
    /// How these models carry a format.
    pub mode: OutputMode,
    /// The family in words, for the docs table.
    pub family: &'static str,
    /// Which of the API's native forms these models take, for an API with more than one
    /// (Gemini's `responseSchema` where `responseJsonSchema` is not served); `""`: the
    /// API's default form.
    pub variant: &'static str,
}

impl OutputFamily {
    /// A row.
    pub const fn new(contains: &'static str, mode: OutputMode, family: &'static str) -> Self {
        OutputFamily { contains, mode, family, variant: "" }
    }

    /// The same row, carried in the API's native form named `variant`.
    pub const fn variant(mut self, variant: &'static str) -> Self {
        self.variant = variant;
        self
    }
}

impl ProviderInfo {
    /// How `model_id` carries an output format (see [`OutputFamily`]).
    pub fn output_mode(&self, model_id: &str) -> OutputMode {
        self.output_family(model_id).map_or(OutputMode::Unsupported, |row| row.mode)
    }

    /// The row of the output table that `model_id` falls under, if any.
    pub fn output_family(&self, model_id: &str) -> Option<&OutputFamily> {
        self.output.iter().find(|row| model_id.contains(row.contains))
    }
}

/// What a provider sends for a format: checked by [`plan`].
#[derive(Debug, Clone, PartialEq)]
pub struct OutputPlan {
    /// [`OutputMode::Native`] or [`OutputMode::Tool`].
    pub mode: OutputMode,
    /// The schema to send: strict-rewritten when the format is strict and the caller
    /// asked for the rewrite, else the format's own.
    pub schema: Value,
    /// Whether the schema was rewritten for strict mode (send `strict: true`).
    pub strict: bool,
    /// How to undo the strict rewrite's `null`s (trivial when not rewritten).
    pub restore: Arc<StrictPlan>,
}

/// Checks a request's output format against `info`'s table for `model`, before any
/// request: `Ok(None)` without a format, else what to send.
///
/// `rewrite_strict`: whether this API takes a strict switch whose schemas must be
/// rewritten ([`crate::raw::strict::to_strict`]; the OpenAI-style APIs). Errors, all before
/// any request and not retryable: the model cannot carry a format (`unsupported`); a bad
/// name, a strict schema that cannot be strict, a tool-mode format whose name is also a
/// tool of the request, or a tool choice that conflicts with a forced tool
/// (`invalid_request`).
pub fn plan(
    info: &ProviderInfo,
    provider: &str,
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    rewrite_strict: bool,
) -> Result<Option<OutputPlan>, Error> {
    let Some(format) = options.output.as_ref() else { return Ok(None) };
    let invalid = |message: String| {
        Error::new(ErrorKind::InvalidRequest, provider, message).with_retryable(false)
    };
    if !valid_name(&format.name) {
        return Err(invalid(format!(
            "Output format name {:?} must be 1 to 64 characters of [A-Za-z0-9_-]",
            format.name
        )));
    }
    let mode = info.output_mode(&model.id);
    match mode {
        OutputMode::Unsupported => {
            return Err(Error::new(
                ErrorKind::Unsupported,
                provider,
                format!(
                    "Model {} on {} cannot return a structured output format",
                    model.id, info.api
                ),
            )
            .with_code("output_format_unsupported")
            .with_retryable(false));
        }
        OutputMode::Tool => {
            if context.tools.iter().any(|t| t.name == format.name) {
                return Err(invalid(format!(
                    "Output format name \"{}\" is also the name of a tool",
                    format.name
                )));
            }
            match &options.tool_choice {
                // `none` (no other tool) is what the forced format tool does anyway.
                None | Some(ToolChoice::Auto | ToolChoice::Required | ToolChoice::None) => {}
                Some(ToolChoice::Tool(name)) if *name == format.name => {}
                Some(other) => {
                    return Err(invalid(format!(
                        "Tool choice {other:?} conflicts with the output format, which this model carries as a forced tool"
                    )));
                }
            }
        }
        OutputMode::Native => {}
    }
    if format.strict && rewrite_strict {
        let strict = to_strict(&format.schema).map_err(|reason| {
            invalid(format!(
                "Output format \"{}\" cannot be strict ({reason}); set strict to false to send it as is",
                format.name
            ))
        })?;
        return Ok(Some(OutputPlan {
            mode,
            schema: strict.schema,
            strict: true,
            restore: Arc::new(strict.plan),
        }));
    }
    Ok(Some(OutputPlan {
        mode,
        schema: format.schema.clone(),
        strict: false,
        restore: Arc::new(StrictPlan::default()),
    }))
}

/// How a structured answer ended.
#[derive(Debug, Clone, PartialEq)]
pub enum StructuredOutcome {
    /// The answer matches the schema.
    Valid(Value),
    /// The answer is not JSON, or does not match the schema.
    Invalid {
        /// The answer as parsed (`None` when it is not JSON, or there is no answer).
        value: Option<Value>,
        /// Every violation (path `root` for an answer that is not JSON or missing).
        violations: Vec<Violation>,
    },
    /// The model or a safety system refused (the `refused` error, or the API's refusal).
    Refused(Error),
    /// The answer was cut off (output token limit); the best-effort partial value.
    CutOff(Value),
    /// The request failed or was cancelled.
    Failed(Error),
}

/// `{"status": "valid", "value"}`, `{"status": "invalid", "value", "violations": [{"path",
/// "message"}]}`, `{"status": "refused", "error"}`, `{"status": "cut_off", "value"}`,
/// `{"status": "failed", "error"}` (`error` is the error's text): one JSON line for logs
/// and `--json` streams.
impl serde::Serialize for StructuredOutcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        match self {
            StructuredOutcome::Valid(value) => {
                map.serialize_entry("status", "valid")?;
                map.serialize_entry("value", value)?;
            }
            StructuredOutcome::Invalid { value, violations } => {
                map.serialize_entry("status", "invalid")?;
                map.serialize_entry("value", value)?;
                let violations: Vec<Value> = violations
                    .iter()
                    .map(|v| serde_json::json!({"path": v.path, "message": v.message}))
                    .collect();
                map.serialize_entry("violations", &violations)?;
            }
            StructuredOutcome::Refused(error) => {
                map.serialize_entry("status", "refused")?;
                map.serialize_entry("error", &error.to_string())?;
            }
            StructuredOutcome::CutOff(value) => {
                map.serialize_entry("status", "cut_off")?;
                map.serialize_entry("value", value)?;
            }
            StructuredOutcome::Failed(error) => {
                map.serialize_entry("status", "failed")?;
                map.serialize_entry("error", &error.to_string())?;
            }
        }
        map.end()
    }
}

impl StructuredOutcome {
    /// The valid value, if any.
    pub fn valid(&self) -> Option<&Value> {
        match self {
            StructuredOutcome::Valid(v) => Some(v),
            _ => None,
        }
    }
}

/// The answer's raw text: the forced call's arguments (tool mode) or the text blocks.
enum Answer<'m> {
    Call(&'m Value, bool),
    Text(Cow<'m, str>),
}

fn answer<'m>(format: &OutputFormat, message: &'m AssistantMessage) -> Answer<'m> {
    if let Some(call) = message.tool_calls().find(|c| c.name == format.name) {
        return Answer::Call(&call.arguments, call.arguments_incomplete);
    }
    // One text block (the usual answer) is borrowed, not copied.
    let mut blocks = message.content.iter().filter_map(|block| match block {
        AssistantContent::Text(t) => Some(t.text.as_str()),
        _ => None,
    });
    let first = blocks.next().unwrap_or_default();
    match blocks.next() {
        None => Answer::Text(Cow::Borrowed(first)),
        Some(second) => {
            let mut text = String::from(first);
            text.push_str(second);
            blocks.for_each(|rest| text.push_str(rest));
            Answer::Text(Cow::Owned(text))
        }
    }
}

/// The outcome of a structured answer: `message` is the final message and `error` the
/// stream's terminal error, if it ended with one.
///
/// The answer is the call named after the format if there is one (tool mode), else the
/// message's text. A value that does not match the schema as is, and matches once the
/// `null`s a strict model sends for omitted optional properties are dropped, is
/// returned without them.
pub fn outcome(
    format: &OutputFormat,
    message: &AssistantMessage,
    error: Option<&Error>,
) -> StructuredOutcome {
    outcome_parsed(format, message, error, None)
}

/// [`outcome`], with the text answer already parsed (`parsed`: what `serde_json` would
/// give for it, see [`StructuredStream`]).
fn outcome_parsed(
    format: &OutputFormat,
    message: &AssistantMessage,
    error: Option<&Error>,
    parsed: Option<Value>,
) -> StructuredOutcome {
    if let Some(error) = error {
        return if error.kind == ErrorKind::Refused {
            StructuredOutcome::Refused(error.clone())
        } else {
            StructuredOutcome::Failed(error.clone())
        };
    }
    let answer = answer(format, message);
    let cut_off =
        message.stop_reason == StopReason::Length || matches!(answer, Answer::Call(_, true));
    if cut_off {
        return StructuredOutcome::CutOff(match answer {
            Answer::Call(v, _) => v.clone(),
            Answer::Text(t) => parse_streaming_json(&t),
        });
    }
    let value = match answer {
        Answer::Call(v, _) => v.clone(),
        Answer::Text(t) if t.trim().is_empty() => {
            return invalid_root(None, "the model sent no answer".to_owned());
        }
        Answer::Text(t) => match parsed {
            Some(v) => v,
            None => match serde_json::from_str::<Value>(&t) {
                Ok(v) => v,
                Err(e) => return invalid_root(None, format!("the answer is not JSON: {e}")),
            },
        },
    };
    validate(format, value)
}

/// The outcome of a message already collected, its error read from the message itself
/// (`stop_reason` `error` or `aborted`, with `error_type`, `error_message`,
/// `error_code` and `error_status`): an agent's final answer, or a stored transcript's.
pub fn message_outcome(format: &OutputFormat, message: &AssistantMessage) -> StructuredOutcome {
    let error = match message.stop_reason {
        StopReason::Aborted => Some(ErrorKind::Aborted),
        StopReason::Error => {
            Some(message.error_type.as_deref().and_then(kind_named).unwrap_or(ErrorKind::Provider))
        }
        _ => None,
    }
    .map(|kind| {
        let mut error = Error::new(
            kind,
            message.provider.clone(),
            message.error_message.clone().unwrap_or_default(),
        )
        .with_retryable(false);
        error.status = message.error_status;
        error.code = message.error_code.clone();
        error
    });
    outcome(format, message, error.as_ref())
}

/// The kind whose [`ErrorKind::as_str`] is `name`.
fn kind_named(name: &str) -> Option<ErrorKind> {
    const KINDS: [ErrorKind; 12] = [
        ErrorKind::Auth,
        ErrorKind::RateLimited,
        ErrorKind::Overloaded,
        ErrorKind::InvalidRequest,
        ErrorKind::ContextLength,
        ErrorKind::Transport,
        ErrorKind::Decode,
        ErrorKind::Aborted,
        ErrorKind::Truncated,
        ErrorKind::Refused,
        ErrorKind::Unsupported,
        ErrorKind::Provider,
    ];
    KINDS.into_iter().find(|k| k.as_str() == name)
}

fn invalid_root(value: Option<Value>, message: String) -> StructuredOutcome {
    StructuredOutcome::Invalid {
        value,
        violations: vec![Violation { path: "root".to_owned(), message }],
    }
}

/// Validates `value` against the format's schema (see [`outcome`]).
pub fn validate(format: &OutputFormat, value: Value) -> StructuredOutcome {
    let validator = match jsonschema::options().offline().build(&format.schema) {
        Ok(v) => v,
        Err(e) => return invalid_root(Some(value), format!("the schema does not compile: {e}")),
    };
    if validator.is_valid(&value) {
        return StructuredOutcome::Valid(value);
    }
    if format.strict
        && let Ok(strict) = to_strict(&format.schema)
    {
        let mut restored = value.clone();
        if strict.plan.restore(&mut restored) && validator.is_valid(&restored) {
            return StructuredOutcome::Valid(restored);
        }
    }
    let violations = validator
        .iter_errors(&value)
        .map(|e| Violation { path: crate::validation::error_path(&e), message: e.to_string() })
        .collect();
    StructuredOutcome::Invalid { value: Some(value), violations }
}

/// One step of a [`StructuredStream`].
#[derive(Debug, Clone, PartialEq)]
pub enum StructuredEvent {
    /// The partial value changed ([`StructuredStream::partial`]); `changed` is the JSON
    /// Pointer under which every change lies (`""`: several places), as for tool calls.
    Partial {
        /// Where the value changed.
        changed: Arc<str>,
    },
    /// The end: the outcome and the final message (usage, stop reason, ...).
    Done {
        /// How the answer ended.
        outcome: StructuredOutcome,
        /// The final message.
        message: Box<AssistantMessage>,
    },
}

/// A response read as a structured answer: partial values while it streams, a
/// [`StructuredOutcome`] at the end.
///
/// Text blocks (native) and the arguments of the call named after the format (tool
/// mode) feed one [`PartialJson`]; reading [`StructuredStream::partial`] after every
/// event is a borrow, so a whole answer costs time linear in its length. At the end a text
/// answer is not parsed a second time: the streamed value is the answer when it is exactly
/// what `serde_json` would parse from the text (a complete, [exact](PartialJson::is_exact)
/// object whose text a strict syntax check accepts); anything else is parsed again, so the
/// outcome is the same either way.
#[derive(Debug)]
pub struct StructuredStream {
    inner: AssistantStream,
    format: OutputFormat,
    parser: PartialJson,
    /// The content index of the format's call, once it opened.
    call: Option<usize>,
    /// Whether the parser was fed by the format's call (else by text, or not yet).
    fed_by_call: bool,
    done: bool,
}

impl StructuredStream {
    /// Reads `stream` (a response to a request with `format` in
    /// [`StreamOptions::output`]).
    pub fn new(stream: AssistantStream, format: OutputFormat) -> Self {
        StructuredStream {
            inner: stream,
            format,
            parser: PartialJson::without_raw(),
            call: None,
            fed_by_call: false,
            done: false,
        }
    }

    /// The format being read.
    pub fn format(&self) -> &OutputFormat {
        &self.format
    }

    /// The answer so far (an empty object before the first fragment).
    pub fn partial(&self) -> &Value {
        self.parser.value()
    }

    /// The next step, `None` after [`StructuredEvent::Done`].
    pub async fn next(&mut self) -> Option<StructuredEvent> {
        if self.done {
            return None;
        }
        while let Some(event) = self.inner.next().await {
            if let AssistantEvent::ToolCallDelta { content_index, .. } = &event
                && self.call.is_none()
                && self
                    .inner
                    .partial()
                    .tool_call(*content_index)
                    .is_some_and(|c| c.name == self.format.name)
            {
                // The name may arrive after the call opened (Chat Completions).
                self.call = Some(*content_index);
            }
            let fragment = match event {
                AssistantEvent::ToolCallDelta { content_index, delta, .. }
                    if Some(content_index) == self.call =>
                {
                    delta
                }
                AssistantEvent::TextDelta { delta, .. } if self.call.is_none() => delta,
                AssistantEvent::Done { message, .. } => {
                    self.done = true;
                    let parsed = self.streamed_answer(&message);
                    let outcome = outcome_parsed(&self.format, &message, None, parsed);
                    return Some(StructuredEvent::Done { outcome, message });
                }
                AssistantEvent::Error { message, error, .. } => {
                    self.done = true;
                    let outcome = outcome(&self.format, &message, Some(&error));
                    return Some(StructuredEvent::Done { outcome, message });
                }
                _ => continue,
            };
            if self.call.is_some() && !self.fed_by_call {
                // Text before the format's call is a preamble, not the answer.
                self.parser = PartialJson::without_raw();
                self.fed_by_call = true;
            }
            self.parser.push(&fragment);
            if let Some(changed) = self.parser.changed() {
                return Some(StructuredEvent::Partial { changed: Arc::clone(changed) });
            }
        }
        self.done = true;
        None
    }

    /// The streamed text answer when it is what parsing `message`'s text would give: the
    /// text fed the parser (no call is the answer), the parser read one complete object and
    /// kept it [exact](PartialJson::is_exact), and the text passes `serde_json`'s strict
    /// syntax check, which allocates nothing. The value moves out of the parser.
    fn streamed_answer(&mut self, message: &AssistantMessage) -> Option<Value> {
        if self.call.is_some() || !self.parser.is_complete() || !self.parser.is_exact() {
            return None;
        }
        let Answer::Text(text) = answer(&self.format, message) else { return None };
        // The parser shows `{}` for any other top-level value.
        if !text.trim_start().starts_with('{') {
            return None;
        }
        serde_json::from_str::<serde::de::IgnoredAny>(&text).ok()?;
        Some(std::mem::take(&mut self.parser).into_finished())
    }

    /// Reads to the end and returns the outcome and the final message.
    pub async fn finish(mut self) -> (StructuredOutcome, AssistantMessage) {
        let mut last = None;
        while let Some(event) = self.next().await {
            if let StructuredEvent::Done { outcome, message } = event {
                last = Some((outcome, *message));
            }
        }
        last.unwrap_or_else(|| {
            let error = Error::new(ErrorKind::Truncated, "", "The stream ended without a result");
            (StructuredOutcome::Failed(error), AssistantMessage::default())
        })
    }
}

/// A structured answer that is not a `T`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StructuredError {
    /// The answer is not JSON or does not match the schema.
    #[error("the answer does not match the schema: {}", join(violations))]
    Invalid {
        /// The answer as parsed, if it is JSON.
        value: Option<Value>,
        /// The violations.
        violations: Vec<Violation>,
    },
    /// The model refused.
    #[error("the model refused: {0}")]
    Refused(Error),
    /// The answer was cut off (output token limit).
    #[error("the answer was cut off")]
    CutOff(Value),
    /// The request failed or was cancelled.
    #[error("the request failed: {0}")]
    Failed(Error),
    /// The answer matches the schema but does not deserialize into the type (a schema
    /// narrower than the type's `Deserialize`).
    #[error("the answer does not deserialize: {message}")]
    Deserialize {
        /// The answer.
        value: Value,
        /// serde's message.
        message: String,
    },
}

fn join(violations: &[Violation]) -> String {
    violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// A typed answer and the message it came in (usage, response id, ...).
#[derive(Debug, Clone)]
pub struct Generated<T> {
    /// The answer.
    pub value: T,
    /// The final message.
    pub message: AssistantMessage,
}

/// The outcome as a `T`: the valid value deserialized, or the failure as a
/// [`StructuredError`].
pub fn typed<T: DeserializeOwned>(outcome: StructuredOutcome) -> Result<T, StructuredError> {
    match outcome {
        StructuredOutcome::Valid(value) => T::deserialize(&value)
            .map_err(|e| StructuredError::Deserialize { message: e.to_string(), value }),
        StructuredOutcome::Invalid { value, violations } => {
            Err(StructuredError::Invalid { value, violations })
        }
        StructuredOutcome::Refused(e) => Err(StructuredError::Refused(e)),
        StructuredOutcome::CutOff(v) => Err(StructuredError::CutOff(v)),
        StructuredOutcome::Failed(e) => Err(StructuredError::Failed(e)),
    }
}

/// `options` with `T`'s format as the output format.
fn with_format(options: &StreamOptions, format: &OutputFormat) -> StreamOptions {
    StreamOptions { output: Some(format.clone()), ..options.clone() }
}

/// Asks `provider` for one answer of type `T` (its schema from `schemars`, strict, named
/// after the type: [`OutputFormat::for_type`]) and returns it validated and
/// deserialized. `options.output` is replaced by `T`'s format.
pub async fn generate<T: JsonSchema + DeserializeOwned>(
    provider: &dyn Provider,
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<Generated<T>, StructuredError> {
    let format = OutputFormat::for_type::<T>();
    let stream = provider.stream(model, context, &with_format(options, &format));
    let (outcome, message) = StructuredStream::new(stream, format).finish().await;
    typed(outcome).map(|value| Generated { value, message })
}

/// One step of a [`TypedStream`].
#[derive(Debug, Clone)]
pub enum TypedEvent<T> {
    /// The partial answer deserializes into `T` (a type whose fields are all optional,
    /// or have defaults, deserializes early and often).
    Partial(T),
    /// The end (boxed: a result is much larger than a partial value).
    Done(Box<Result<Generated<T>, StructuredError>>),
}

/// Partial `T` values of a streamed answer ([`stream_typed`]).
#[derive(Debug)]
pub struct TypedStream<T> {
    inner: StructuredStream,
    _type: std::marker::PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> TypedStream<T> {
    /// The next step: a partial `T` each time the partial value changed and
    /// deserializes, then the result. Deserializing reads the whole partial value, so
    /// this costs the value's size per change; [`TypedStream::structured`] is the
    /// linear view.
    pub async fn next(&mut self) -> Option<TypedEvent<T>> {
        loop {
            match self.inner.next().await? {
                StructuredEvent::Partial { .. } => {
                    if let Ok(value) = T::deserialize(self.inner.partial()) {
                        return Some(TypedEvent::Partial(value));
                    }
                }
                StructuredEvent::Done { outcome, message } => {
                    let message = *message;
                    return Some(TypedEvent::Done(Box::new(
                        typed(outcome).map(|value| Generated { value, message }),
                    )));
                }
            }
        }
    }

    /// The untyped stream underneath (the partial value and the changed pointers).
    pub fn structured(&mut self) -> &mut StructuredStream {
        &mut self.inner
    }
}

/// Streams one answer of type `T` (see [`generate`]) as partial `T` values.
pub fn stream_typed<T: JsonSchema + DeserializeOwned>(
    provider: &dyn Provider,
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> TypedStream<T> {
    let format = OutputFormat::for_type::<T>();
    let stream = provider.stream(model, context, &with_format(options, &format));
    TypedStream { inner: StructuredStream::new(stream, format), _type: std::marker::PhantomData }
}

#[cfg(test)]
mod tests;
