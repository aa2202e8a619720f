//! The fixture format (`fixtures/<provider>/<scenario>/`, per `fixtures/README.md`):
//! loading a scenario folder from disk ([`load`]) or from files embedded in a
//! binary ([`load_files`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use llm_core::{CacheRetention, Context, Model, ReasoningLevel, ToolChoice};
use serde::Deserialize;
use serde_json::Value;

use crate::{Error, Result, eventstream};

/// What a scenario folder holds.
#[derive(Debug)]
pub enum Scenario {
    /// A declared skip with its reason.
    Skip(String),
    /// A full fixture.
    Fixture(Box<Fixture>),
}

/// A full fixture, every file read and parsed.
#[derive(Debug)]
pub struct Fixture {
    /// The scenario folder.
    pub dir: PathBuf,
    /// `input.json`'s `model`.
    pub model: Model,
    /// `input.json`'s `context`.
    pub context: Context,
    /// `input.json`'s `options`.
    pub options: InputOptions,
    /// Cancel the request after this many events (`input.json`'s `abortAfterEvents`).
    pub abort_after_events: Option<usize>,
    /// Environment variables the provider reads instead of the process's (`input.json`'s
    /// `env`; only providers that take an environment accept a non-empty one).
    pub env: BTreeMap<String, String>,
    /// Keep the host names of the URLs in `model.baseUrl`, `env` and the provider options
    /// (scheme `http`, the server's port), every host name resolving to 127.0.0.1:
    /// for providers whose behaviour depends on the host (`input.json`'s `keepHost`).
    pub keep_host: bool,
    /// What each request must be (`request.json`).
    pub requests: ExpectedRequests,
    /// What the server answers (`response.*` or `exchanges.json`).
    pub responses: Responses,
    /// The expected event transcript (`expected.txt`), when written.
    pub expected: Option<String>,
}

impl Fixture {
    /// Whether any response is an event stream (replayed three ways).
    pub fn is_streaming(&self) -> bool {
        match &self.responses {
            Responses::Always(r) => r.is_stream(),
            Responses::Sequence(list) => list.iter().any(Canned::is_stream),
        }
    }

    /// Where the expected transcript is (or is written).
    pub fn expected_path(&self) -> PathBuf {
        self.dir.join("expected.txt")
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InputFile {
    model: Model,
    #[serde(default)]
    context: Context,
    #[serde(default)]
    options: InputOptions,
    #[serde(default)]
    abort_after_events: Option<usize>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    keep_host: bool,
    /// Free text for the reader; ignored.
    #[serde(default, rename = "description")]
    _description: Option<Value>,
}

/// `input.json`'s `options`. Every field is optional.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct InputOptions {
    /// Absent: `test-key`; `null`: no key at all.
    pub api_key: Option<String>,
    /// Extra request headers.
    pub headers: BTreeMap<String, String>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Output token limit.
    pub max_tokens: Option<u64>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Reasoning level.
    pub reasoning: Option<ReasoningLevel>,
    /// Session id.
    pub session_id: Option<String>,
    /// Prompt cache key.
    pub prompt_cache_key: Option<String>,
    /// Prompt cache retention.
    pub cache_retention: Option<CacheRetention>,
    /// Tool choice.
    pub tool_choice: Option<ToolChoice>,
    /// Provider-specific options, as given.
    pub provider_options: BTreeMap<String, Value>,
    /// Retries after the first attempt.
    pub max_retries: Option<u32>,
    /// A structured output format: the runner also prints the answer's outcome.
    pub output: Option<OutputInput>,
}

/// `input.json`'s `options.output`: an [`llm_core::OutputFormat`].
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputInput {
    /// The format's name.
    pub name: String,
    /// What the answer is for.
    #[serde(default)]
    pub description: Option<String>,
    /// The JSON schema the answer follows.
    pub schema: Value,
    /// Absent: strict.
    #[serde(default)]
    pub strict: Option<bool>,
}

impl OutputInput {
    /// The format.
    pub fn format(&self) -> llm_core::OutputFormat {
        llm_core::OutputFormat {
            name: self.name.clone(),
            description: self.description.clone(),
            schema: self.schema.clone(),
            strict: self.strict.unwrap_or(true),
        }
    }
}

impl Default for InputOptions {
    fn default() -> Self {
        InputOptions {
            api_key: Some("test-key".to_owned()),
            headers: BTreeMap::new(),
            temperature: None,
            max_tokens: None,
            stop: Vec::new(),
            reasoning: None,
            session_id: None,
            prompt_cache_key: None,
            cache_retention: None,
            tool_choice: None,
            provider_options: BTreeMap::new(),
            max_retries: None,
            output: None,
        }
    }
}

/// One expected request (`request.json`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedRequest {
    /// The HTTP method (default `POST`).
    #[serde(default = "default_method")]
    pub method: String,
    /// The URL path.
    pub path: String,
    /// Query parameters that must be present, with their values.
    #[serde(default)]
    pub query: BTreeMap<String, String>,
    /// Headers that must be present, with their values.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The JSON body the request must equal.
    pub body: Value,
    /// Free text for the reader; ignored.
    #[serde(default, rename = "description")]
    _description: Option<Value>,
}

fn default_method() -> String {
    "POST".to_owned()
}

/// `request.json`: one object every request must match, or a list (request *i*
/// matches entry *i*).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ExpectedRequests {
    /// Every request matches this one.
    Every(Box<ExpectedRequest>),
    /// Request *i* matches entry *i*.
    Each(Vec<ExpectedRequest>),
}

impl ExpectedRequests {
    /// What request `index` (0-based) must match; `None` past a list's end.
    pub fn for_request(&self, index: usize) -> Option<&ExpectedRequest> {
        match self {
            ExpectedRequests::Every(r) => Some(r),
            ExpectedRequests::Each(list) => list.get(index),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExchangeEntry {
    status: u16,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: Option<String>,
}

/// One canned HTTP response.
#[derive(Debug, Clone)]
pub struct Canned {
    /// The HTTP status.
    pub status: u16,
    /// Headers including `content-type`.
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Bytes,
}

impl Canned {
    /// A response with `status`, `headers` (name, value) and `body`.
    pub fn new<N: Into<String>, V: Into<String>>(
        status: u16,
        headers: impl IntoIterator<Item = (N, V)>,
        body: impl Into<Bytes>,
    ) -> Canned {
        let headers = headers.into_iter().map(|(n, v)| (n.into(), v.into())).collect();
        Canned { status, headers, body: body.into() }
    }

    /// Whether the body is Server-Sent Events (`content-type: text/event-stream`).
    pub fn is_sse(&self) -> bool {
        self.content_type_is("text/event-stream")
    }

    /// An AWS event-stream body (binary frames, `application/vnd.amazon.eventstream`).
    pub fn is_eventstream(&self) -> bool {
        self.content_type_is(crate::eventstream::CONTENT_TYPE)
    }

    /// A streaming body of either kind (cut into writes by the replay server).
    pub fn is_stream(&self) -> bool {
        self.is_sse() || self.is_eventstream()
    }

    fn content_type_is(&self, prefix: &str) -> bool {
        self.headers.iter().any(|(k, v)| {
            k.eq_ignore_ascii_case("content-type") && v.to_ascii_lowercase().starts_with(prefix)
        })
    }
}

/// The server's answers.
#[derive(Debug, Clone)]
pub enum Responses {
    /// No `exchanges.json`: every request gets `response.sse` (or `response.eventstream`).
    Always(Canned),
    /// `exchanges.json`: request *i* gets entry *i*.
    Sequence(Vec<Canned>),
}

/// Where a scenario's files come from.
pub trait FixtureFiles {
    /// The file `name` of the scenario folder, `None` when it does not exist.
    fn read(&self, name: &str) -> Result<Option<Bytes>>;
    /// The folder, for messages.
    fn describe(&self) -> String;
}

/// A scenario folder on disk.
#[derive(Debug, Clone)]
pub struct Dir(pub PathBuf);

impl FixtureFiles for Dir {
    fn read(&self, name: &str) -> Result<Option<Bytes>> {
        let path = self.0.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(Bytes::from(bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::Io { path, source: e }),
        }
    }

    fn describe(&self) -> String {
        self.0.display().to_string()
    }
}

/// A scenario folder embedded in a binary (`include_bytes!` per file).
#[derive(Debug, Clone, Copy)]
pub struct Embedded {
    /// What to call it in messages (`fixtures/anthropic/agent-session`).
    pub name: &'static str,
    /// `(file name, contents)`.
    pub files: &'static [(&'static str, &'static [u8])],
}

impl FixtureFiles for Embedded {
    fn read(&self, name: &str) -> Result<Option<Bytes>> {
        Ok(self.files.iter().find(|(n, _)| *n == name).map(|(_, b)| Bytes::from_static(b)))
    }

    fn describe(&self) -> String {
        self.name.to_owned()
    }
}

fn text(files: &dyn FixtureFiles, name: &str) -> Result<Option<String>> {
    match files.read(name)? {
        None => Ok(None),
        Some(bytes) => String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|_| Error::Msg(format!("{}/{name}: not UTF-8", files.describe()))),
    }
}

fn json<T: for<'de> Deserialize<'de>>(files: &dyn FixtureFiles, name: &str) -> Result<T> {
    let Some(text) = text(files, name)? else {
        return Err(Error::Msg(format!("{}/{name}: missing", files.describe())));
    };
    serde_json::from_str(&text).map_err(|e| Error::Json {
        path: PathBuf::from(format!("{}/{name}", files.describe())),
        source: e,
    })
}

/// Reads the scenario folder `dir`.
pub fn load(dir: &Path) -> Result<Scenario> {
    let mut scenario = load_files(&Dir(dir.to_owned()))?;
    if let Scenario::Fixture(f) = &mut scenario {
        f.dir = dir.to_owned();
    }
    Ok(scenario)
}

/// Reads a scenario from `files`.
pub fn load_files(files: &dyn FixtureFiles) -> Result<Scenario> {
    let where_ = files.describe();
    let skip = text(files, "skip.txt")?;
    let input = text(files, "input.json")?;
    if let Some(reason) = skip {
        if input.is_some() {
            return Err(Error::Msg(format!(
                "{where_}: has both skip.txt and input.json; keep one"
            )));
        }
        let reason = reason.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("").to_owned();
        if reason.is_empty() {
            return Err(Error::Msg(format!("{where_}/skip.txt: must give the reason")));
        }
        return Ok(Scenario::Skip(reason));
    }
    if input.is_none() {
        return Err(Error::Msg(format!(
            "{where_}: neither input.json nor skip.txt (see fixtures/README.md)"
        )));
    }
    let input_file: InputFile = json(files, "input.json")?;
    let requests: ExpectedRequests = json(files, "request.json")?;
    let responses = if files.read("exchanges.json")?.is_some() {
        let entries: Vec<ExchangeEntry> = json(files, "exchanges.json")?;
        if entries.is_empty() {
            return Err(Error::Msg(format!("{where_}/exchanges.json: empty list")));
        }
        let mut list = Vec::new();
        for entry in entries {
            let body = match &entry.body {
                Some(file) => {
                    if file.contains('/') || file.contains('\\') || file.starts_with('.') {
                        return Err(Error::Msg(format!(
                            "{where_}/exchanges.json: body {file:?} must name a file in the scenario folder"
                        )));
                    }
                    let body = files.read(file)?.ok_or_else(|| {
                        Error::Msg(format!("{where_}/{file}: missing (named in exchanges.json)"))
                    })?;
                    check_eventstream(files, file, &body)?;
                    (body, file.ends_with(eventstream::EXTENSION))
                }
                None => (Bytes::new(), false),
            };
            list.push(canned(entry.status, entry.headers, body.0, body.1));
        }
        Responses::Sequence(list)
    } else {
        let sse = files.read("response.sse")?;
        let binary = files.read("response.eventstream")?;
        match (sse, binary) {
            (Some(sse), None) => Responses::Always(canned(200, BTreeMap::new(), sse, false)),
            (None, Some(body)) => {
                check_eventstream(files, "response.eventstream", &body)?;
                Responses::Always(canned(200, BTreeMap::new(), body, true))
            }
            (Some(_), Some(_)) => {
                return Err(Error::Msg(format!(
                    "{where_}: has both response.sse and response.eventstream; keep one"
                )));
            }
            (None, None) => {
                return Err(Error::Msg(format!(
                    "{where_}: needs response.sse, response.eventstream or exchanges.json"
                )));
            }
        }
    };
    let expected = text(files, "expected.txt")?;
    Ok(Scenario::Fixture(Box::new(Fixture {
        dir: PathBuf::from(where_),
        model: input_file.model,
        context: input_file.context,
        options: input_file.options,
        abort_after_events: input_file.abort_after_events,
        env: input_file.env,
        keep_host: input_file.keep_host,
        requests,
        responses,
        expected,
    })))
}

/// A `*.eventstream` body must be the encoding of its `*.frames.json` source.
fn check_eventstream(files: &dyn FixtureFiles, name: &str, body: &[u8]) -> Result<()> {
    let Some(source_name) = eventstream::source_name(name) else { return Ok(()) };
    let where_ = files.describe();
    let source = files.read(&source_name)?.ok_or_else(|| {
        Error::Msg(format!("{where_}/{name}: its readable source {source_name} is missing"))
    })?;
    eventstream::check_body(body, &source, &PathBuf::from(format!("{where_}/{source_name}")))
}

fn canned(
    status: u16,
    headers: BTreeMap<String, String>,
    body: Bytes,
    eventstream_body: bool,
) -> Canned {
    let mut list: Vec<(String, String)> = headers.into_iter().collect();
    if !list.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type")) {
        let default = match (status, eventstream_body) {
            (200, true) => eventstream::CONTENT_TYPE,
            (200, false) => "text/event-stream",
            _ => "application/json",
        };
        list.push(("content-type".to_owned(), default.to_owned()));
    }
    Canned { status, headers: list, body }
}
