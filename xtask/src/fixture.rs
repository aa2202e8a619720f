//! Loading one fixture folder (`fixtures/<provider>/<scenario>/`), per `fixtures/README.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use llm_core::{CacheRetention, Context, Model, ReasoningLevel, ToolChoice};
use serde::Deserialize;
use serde_json::Value;

use crate::{Error, Result, read_to_string};

/// What a scenario folder holds.
#[derive(Debug)]
pub(crate) enum Scenario {
    /// A declared skip with its reason.
    Skip(String),
    /// A full fixture.
    Fixture(Box<Fixture>),
}

/// A full fixture, every file read and parsed.
#[derive(Debug)]
pub(crate) struct Fixture {
    pub(crate) dir: PathBuf,
    pub(crate) model: Model,
    pub(crate) context: Context,
    pub(crate) options: InputOptions,
    pub(crate) abort_after_events: Option<usize>,
    pub(crate) requests: ExpectedRequests,
    pub(crate) responses: Responses,
    pub(crate) expected: Option<String>,
}

impl Fixture {
    /// Whether any response is an event stream (replayed three ways).
    pub(crate) fn is_streaming(&self) -> bool {
        match &self.responses {
            Responses::Always(r) => r.is_sse(),
            Responses::Sequence(list) => list.iter().any(Canned::is_sse),
        }
    }

    pub(crate) fn expected_path(&self) -> PathBuf {
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
    /// Free text for the reader; ignored.
    #[serde(default, rename = "description")]
    _description: Option<Value>,
}

/// `input.json`'s `options`. Every field is optional.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub(crate) struct InputOptions {
    /// Absent: `test-key`; `null`: no key at all.
    pub(crate) api_key: Option<String>,
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) temperature: Option<f64>,
    pub(crate) max_tokens: Option<u64>,
    pub(crate) stop: Vec<String>,
    pub(crate) reasoning: Option<ReasoningLevel>,
    pub(crate) session_id: Option<String>,
    pub(crate) prompt_cache_key: Option<String>,
    pub(crate) cache_retention: Option<CacheRetention>,
    pub(crate) tool_choice: Option<ToolChoice>,
    pub(crate) provider_options: BTreeMap<String, Value>,
    pub(crate) max_retries: Option<u32>,
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
        }
    }
}

/// One expected request (`request.json`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExpectedRequest {
    #[serde(default = "default_method")]
    pub(crate) method: String,
    pub(crate) path: String,
    #[serde(default)]
    pub(crate) query: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Value,
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
pub(crate) enum ExpectedRequests {
    Every(Box<ExpectedRequest>),
    Each(Vec<ExpectedRequest>),
}

impl ExpectedRequests {
    pub(crate) fn for_request(&self, index: usize) -> Option<&ExpectedRequest> {
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
pub(crate) struct Canned {
    pub(crate) status: u16,
    /// Headers including `content-type`.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Bytes,
}

impl Canned {
    pub(crate) fn is_sse(&self) -> bool {
        self.headers.iter().any(|(k, v)| {
            k.eq_ignore_ascii_case("content-type")
                && v.to_ascii_lowercase().starts_with("text/event-stream")
        })
    }
}

/// The server's answers.
#[derive(Debug, Clone)]
pub(crate) enum Responses {
    /// No `exchanges.json`: every request gets `response.sse`.
    Always(Canned),
    /// `exchanges.json`: request *i* gets entry *i*.
    Sequence(Vec<Canned>),
}

fn read_bytes(path: &Path) -> Result<Bytes> {
    std::fs::read(path).map(Bytes::from).map_err(|e| Error::io(path, e))
}

fn parse_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = read_to_string(path)?;
    serde_json::from_str(&text).map_err(|e| Error::json(path, e))
}

/// Reads the scenario folder `dir`.
pub(crate) fn load(dir: &Path) -> Result<Scenario> {
    let skip = dir.join("skip.txt");
    let input = dir.join("input.json");
    if skip.exists() {
        if input.exists() {
            return Err(Error::Msg(format!(
                "{}: has both skip.txt and input.json; keep one",
                dir.display()
            )));
        }
        let reason = read_to_string(&skip)?;
        let reason = reason.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("").to_owned();
        if reason.is_empty() {
            return Err(Error::Msg(format!("{}: skip.txt must give the reason", skip.display())));
        }
        return Ok(Scenario::Skip(reason));
    }
    if !input.exists() {
        return Err(Error::Msg(format!(
            "{}: neither input.json nor skip.txt (see fixtures/README.md)",
            dir.display()
        )));
    }
    let input_file: InputFile = parse_json(&input)?;
    let requests: ExpectedRequests = parse_json(&dir.join("request.json"))?;
    let exchanges = dir.join("exchanges.json");
    let responses = if exchanges.exists() {
        let entries: Vec<ExchangeEntry> = parse_json(&exchanges)?;
        if entries.is_empty() {
            return Err(Error::Msg(format!("{}: empty list", exchanges.display())));
        }
        let mut list = Vec::new();
        for entry in entries {
            let body = match &entry.body {
                Some(file) => {
                    if file.contains('/') || file.contains('\\') || file.starts_with('.') {
                        return Err(Error::Msg(format!(
                            "{}: body {file:?} must name a file in the scenario folder",
                            exchanges.display()
                        )));
                    }
                    read_bytes(&dir.join(file))?
                }
                None => Bytes::new(),
            };
            list.push(canned(entry.status, entry.headers, body));
        }
        Responses::Sequence(list)
    } else {
        let sse = dir.join("response.sse");
        if !sse.exists() {
            return Err(Error::Msg(format!(
                "{}: needs response.sse or exchanges.json",
                dir.display()
            )));
        }
        Responses::Always(canned(200, BTreeMap::new(), read_bytes(&sse)?))
    };
    let expected_path = dir.join("expected.txt");
    let expected =
        if expected_path.exists() { Some(read_to_string(&expected_path)?) } else { None };
    Ok(Scenario::Fixture(Box::new(Fixture {
        dir: dir.to_owned(),
        model: input_file.model,
        context: input_file.context,
        options: input_file.options,
        abort_after_events: input_file.abort_after_events,
        requests,
        responses,
        expected,
    })))
}

fn canned(status: u16, headers: BTreeMap<String, String>, body: Bytes) -> Canned {
    let mut list: Vec<(String, String)> = headers.into_iter().collect();
    if !list.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type")) {
        let default = if status == 200 { "text/event-stream" } else { "application/json" };
        list.push(("content-type".to_owned(), default.to_owned()));
    }
    Canned { status, headers: list, body }
}
