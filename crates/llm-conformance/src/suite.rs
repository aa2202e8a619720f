//! The suite: replays every fixture of a `fixtures/` folder through its provider
//! crate over real HTTP and prints the scenario grid (`cargo xtask conformance`).
//!
//! For each `fixtures/<provider>/<scenario>/` (format: `fixtures/README.md`) the
//! runner starts the llm-testkit server on 127.0.0.1:0 that records every request and
//! answers with the fixture's bytes, points the provider at it through
//! `Model::base_url`, collects the events, and checks:
//! - every received request against `request.json` (method, path, query, the
//!   listed headers, the body as canonical JSON);
//! - the printed transcript (plus `requests <n>` and `sleeps [..]`) against
//!   `expected.txt`, written when missing and rewritten with `UPDATE_EXPECT=1`;
//! - that the body whole, one byte per write and one event per write all print
//!   the same transcript;
//! - that every scenario of `fixtures/SCENARIOS.md` whose `needs` the provider
//!   declares (`INFO.capabilities`) is a fixture; the others are skipped, with
//!   the missing capability as the reason.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use llm_core::raw::printer::print_transcript;
use llm_core::{
    ApiKey, AssistantEvent, Capability, DebugProvider, Provider, ProviderInfo, RecordingSleeper,
    RetryPolicy, StreamOptions,
};
use serde_json::Value;

use crate::diff::line_diff;
use crate::{Error, Result, subdirs};
use llm_testkit::fixture::{
    self, ExpectedRequest, ExpectedRequests, Fixture, InputOptions, Responses, Scenario,
};
use llm_testkit::server::{Chunking, Recorded, Server};

/// One provider crate as the runner knows it.
#[derive(Debug, Clone, Copy)]
pub struct ProviderEntry {
    /// Its fixture folder: the crate name without `llm-` (`info.name`).
    pub name: &'static str,
    /// What the crate declares about itself (capabilities decide the skips).
    pub info: &'static ProviderInfo,
    /// A fresh provider (the runner makes one per request sequence).
    pub make: fn() -> Arc<dyn Provider>,
    /// A fresh provider on a given HTTP client and environment, for fixtures with
    /// `env` or `keepHost` (`None`: the provider takes neither, and such fixtures fail).
    pub make_with: Option<MakeWith>,
}

/// Makes a provider on `client` that reads `env` instead of the process environment (it
/// prints itself: a secret scan checks its `Debug`).
pub type MakeWith = fn(reqwest::Client, BTreeMap<String, String>) -> Arc<dyn DebugProvider>;

impl ProviderEntry {
    /// The entry of a crate's `INFO` and constructor.
    pub const fn new(info: &'static ProviderInfo, make: fn() -> Arc<dyn Provider>) -> Self {
        ProviderEntry { name: info.name, info, make, make_with: None }
    }

    /// The entry with a constructor for fixtures with `env` or `keepHost` (a provider
    /// that reads no environment ignores `env`).
    pub const fn with_env(mut self, make_with: MakeWith) -> Self {
        self.make_with = Some(make_with);
        self
    }

    /// The first capability of `needs` this provider does not declare.
    pub fn lacks(&self, needs: &[Capability]) -> Option<Capability> {
        needs.iter().copied().find(|c| !self.info.capabilities.contains(*c))
    }
}

/// How a failure for a scenario folder that does not exist starts.
const MISSING: &str = "missing:";

/// How long one replay may take before it fails as hung.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// Fixtures replayed at the same time.
const PARALLEL: usize = 8;

/// What to run and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The `fixtures/` folder.
    pub fixtures_root: PathBuf,
    /// Only this provider column.
    pub provider: Option<String>,
    /// Only scenarios matching this pattern (`*` wildcards, else a substring).
    pub scenario: Option<String>,
    /// Rewrite every `expected.txt` from the current output (`UPDATE_EXPECT=1`).
    pub update: bool,
    /// Write an `expected.txt` that does not exist yet (off under `CI`, where a
    /// missing file fails instead).
    pub write_missing: bool,
    /// The provider table.
    pub providers: Vec<ProviderEntry>,
}

impl Options {
    /// Every scenario of `fixtures_root`, no provider yet; `update` from
    /// `UPDATE_EXPECT=1`, `write_missing` unless `CI` is set.
    #[allow(clippy::disallowed_methods, reason = "the harness reads its own process's flags")]
    pub fn from_env(fixtures_root: impl Into<PathBuf>) -> Self {
        let update = std::env::var("UPDATE_EXPECT").is_ok_and(|v| v == "1");
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
        Options {
            fixtures_root: fixtures_root.into(),
            provider: None,
            scenario: None,
            update,
            write_missing: !ci,
            providers: Vec::new(),
        }
    }
}

/// The result of one grid cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every check passed.
    Pass,
    /// A check failed; the text says which and how.
    Fail(String),
    /// A declared skip, with its reason.
    Skip(String),
    /// A provider-specific scenario this provider does not have (`-`).
    Absent,
}

/// One grid cell.
#[derive(Debug, Clone)]
pub struct Cell {
    /// Provider folder name.
    pub provider: String,
    /// Scenario name.
    pub scenario: String,
    /// What happened.
    pub outcome: Outcome,
    /// Files written (`expected.txt` created or updated).
    pub notes: Vec<String>,
}

/// The whole run.
#[derive(Debug, Clone)]
pub struct Report {
    /// Columns.
    pub providers: Vec<String>,
    /// Rows.
    pub scenarios: Vec<String>,
    /// Every cell, row by row.
    pub cells: Vec<Cell>,
}

impl Report {
    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.cells.iter().filter(|c| f(&c.outcome)).count()
    }

    /// Cells that passed.
    pub fn passed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Pass))
    }

    /// Cells that failed.
    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Fail(_)))
    }

    /// Declared skips.
    pub fn skipped(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Skip(_)))
    }

    /// The outcome of one cell.
    pub fn outcome(&self, provider: &str, scenario: &str) -> Option<&Outcome> {
        self.cells
            .iter()
            .find(|c| c.provider == provider && c.scenario == scenario)
            .map(|c| &c.outcome)
    }

    /// The closing line: `N passed, M failed, K skipped`.
    pub fn summary(&self) -> String {
        format!("{} passed, {} failed, {} skipped", self.passed(), self.failed(), self.skipped())
    }

    /// The grid, then failures, skips and written files, then [`Report::summary`].
    pub fn render(&self) -> String {
        let mut out = String::new();
        let label =
            self.scenarios.iter().map(String::len).chain(["scenario".len()]).max().unwrap_or(8);
        let widths: Vec<usize> = self.providers.iter().map(|p| p.len().max(4)).collect();
        let _ = write!(out, "{:<label$}", "scenario");
        for (p, w) in self.providers.iter().zip(&widths) {
            let _ = write!(out, "  {p:<w$}");
        }
        out = out.trim_end().to_owned();
        out.push('\n');
        for scenario in &self.scenarios {
            let mut line = format!("{scenario:<label$}");
            for (p, w) in self.providers.iter().zip(&widths) {
                let cell = match self.outcome(p, scenario) {
                    Some(Outcome::Pass) => "pass",
                    Some(Outcome::Fail(_)) => "FAIL",
                    Some(Outcome::Skip(_)) => "skip",
                    Some(Outcome::Absent) | None => "-",
                };
                let _ = write!(line, "  {cell:<w$}");
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        let mut missing: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut failures = Vec::new();
        for cell in &self.cells {
            match &cell.outcome {
                Outcome::Fail(why) if why.starts_with(MISSING) => {
                    missing.entry(&cell.provider).or_default().push(&cell.scenario)
                }
                Outcome::Fail(why) => failures.push((cell, why)),
                _ => {}
            }
        }
        if !failures.is_empty() || !missing.is_empty() {
            out.push_str("\nfailures:\n");
            for (cell, why) in failures {
                let _ = writeln!(out, "FAIL {}/{}", cell.provider, cell.scenario);
                for line in why.lines() {
                    let _ = writeln!(out, "    {line}");
                }
            }
            for (provider, scenarios) in missing {
                let _ = writeln!(
                    out,
                    "FAIL {provider}: {} shared scenarios missing (add fixtures/{provider}/<scenario>/ with a fixture or skip.txt): {}",
                    scenarios.len(),
                    scenarios.join(", ")
                );
            }
        }
        let skips: Vec<&Cell> =
            self.cells.iter().filter(|c| matches!(c.outcome, Outcome::Skip(_))).collect();
        if !skips.is_empty() {
            out.push_str("\nskipped:\n");
            for cell in skips {
                if let Outcome::Skip(why) = &cell.outcome {
                    let _ = writeln!(out, "skip {}/{}: {why}", cell.provider, cell.scenario);
                }
            }
        }
        let notes: Vec<&String> = self.cells.iter().flat_map(|c| &c.notes).collect();
        if !notes.is_empty() {
            out.push('\n');
            for note in notes {
                let _ = writeln!(out, "{note}");
            }
        }
        out.push('\n');
        out.push_str(&self.summary());
        out.push('\n');
        out
    }
}

/// Whether `name` matches `pattern`: `*` matches any run of characters; a
/// pattern without `*` matches as a substring.
pub fn matches_pattern(pattern: &str, name: &str) -> bool {
    if !pattern.contains('*') {
        return name.contains(pattern);
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut rest = name;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else { return false };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            let Some(pos) = rest.find(part) else { return false };
            rest = rest.get(pos + part.len()..).unwrap_or_default();
        }
    }
    true
}

enum Planned {
    Done(Outcome),
    Run(ProviderEntry, Box<Fixture>),
}

/// Runs the suite and returns the grid. `Err` only for an unusable setup (no
/// fixtures folder, unknown `--provider`); every fixture problem is a `FAIL` cell.
pub fn run(options: &Options) -> Result<Report> {
    let root = &options.fixtures_root;
    if !root.is_dir() {
        return Err(Error::Msg(format!("{}: no fixtures folder", root.display())));
    }
    if options.update {
        // Binary bodies follow their readable sources before anything is replayed.
        for path in llm_testkit::eventstream::regenerate(root)? {
            println!("encoded {}", display_path(root, &path));
        }
    }
    let shared = crate::shared_scenarios(root)?;
    let needs = crate::scenario_needs(root)?;
    let folders = subdirs(root)?;

    let mut providers: BTreeSet<String> = folders.iter().map(|(n, _)| n.clone()).collect();
    providers.extend(options.providers.iter().map(|p| p.name.to_owned()));
    if let Some(only) = &options.provider {
        if !providers.contains(only) {
            let known: Vec<&str> = providers.iter().map(String::as_str).collect();
            return Err(Error::Msg(format!(
                "unknown provider `{only}` (known: {})",
                known.join(", ")
            )));
        }
        providers.retain(|p| p == only);
    }

    let mut extra = BTreeSet::new();
    for provider in &providers {
        let dir = root.join(provider);
        if dir.is_dir() {
            for (name, _) in subdirs(&dir)? {
                if !shared.contains(&name) {
                    extra.insert(name);
                }
            }
        }
    }
    let scenarios: Vec<String> = shared
        .iter()
        .cloned()
        .chain(extra)
        .filter(|s| options.scenario.as_deref().is_none_or(|p| matches_pattern(p, s)))
        .collect();

    let mut planned = Vec::new();
    for scenario in &scenarios {
        for provider in &providers {
            let dir = root.join(provider).join(scenario);
            let entry = options.providers.iter().find(|p| p.name == provider.as_str()).copied();
            let plan = if dir.is_dir() {
                match fixture::load(&dir) {
                    Ok(Scenario::Skip(reason)) => Planned::Done(Outcome::Skip(reason)),
                    Ok(Scenario::Fixture(f)) => match entry {
                        Some(entry) => Planned::Run(entry, f),
                        None => Planned::Done(Outcome::Fail(format!(
                            "no provider `{provider}` in the table of xtask/src/conformance.rs"
                        ))),
                    },
                    Err(e) => Planned::Done(Outcome::Fail(format!("bad fixture: {e}"))),
                }
            } else if shared.contains(scenario) {
                let lacking = entry.and_then(|e| {
                    e.lacks(needs.get(scenario).map(Vec::as_slice).unwrap_or_default())
                });
                match lacking {
                    Some(capability) => Planned::Done(Outcome::Skip(format!(
                        "needs `{capability}`, which llm-{provider} does not declare"
                    ))),
                    None => Planned::Done(Outcome::Fail(format!(
                        "{MISSING} add fixtures/{provider}/{scenario}/ (its capabilities say it applies)"
                    ))),
                }
            } else {
                Planned::Done(Outcome::Absent)
            };
            planned.push((provider.clone(), scenario.clone(), plan));
        }
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Msg(format!("cannot start the tokio runtime: {e}")))?;
    let update = options.update;
    let write_missing = options.write_missing;
    let mut cells: Vec<Cell> = Vec::new();
    let mut jobs = Vec::new();
    for (index, (provider, scenario, plan)) in planned.into_iter().enumerate() {
        match plan {
            Planned::Done(outcome) => {
                cells.push(Cell { provider, scenario, outcome, notes: Vec::new() })
            }
            Planned::Run(entry, fixture) => {
                cells.push(Cell { provider, scenario, outcome: Outcome::Pass, notes: Vec::new() });
                jobs.push((index, entry, fixture));
            }
        }
    }
    let results = runtime.block_on(async {
        futures_util::stream::iter(jobs.into_iter().map(|(index, entry, fixture)| {
            let handle =
                tokio::spawn(run_fixture(entry, fixture, update, write_missing, root.clone()));
            async move { (index, handle.await) }
        }))
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await
    });
    for (index, result) in results {
        let Some(cell) = cells.get_mut(index) else { continue };
        match result {
            Ok((outcome, notes)) => {
                cell.outcome = outcome;
                cell.notes = notes;
            }
            Err(e) => cell.outcome = Outcome::Fail(format!("the replay panicked: {e}")),
        }
    }
    Ok(Report { providers: providers.into_iter().collect(), scenarios, cells })
}

struct RunOutput {
    text: String,
    requests: Vec<Recorded>,
    problems: Vec<String>,
}

async fn run_fixture(
    entry: ProviderEntry,
    fixture: Box<Fixture>,
    update: bool,
    write_missing: bool,
    fixtures_root: PathBuf,
) -> (Outcome, Vec<String>) {
    let modes: &[Chunking] =
        if fixture.is_streaming() { &Chunking::ALL } else { &[Chunking::Whole] };
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let mut whole: Option<String> = None;
    for &mode in modes {
        let run = match tokio::time::timeout(RUN_TIMEOUT, run_once(entry, &fixture, mode)).await {
            Ok(Ok(run)) => run,
            Ok(Err(e)) => {
                problems.push(format!("{} ({})", e, mode.describe()));
                break;
            }
            Err(_) => {
                problems.push(format!(
                    "no terminal event after {} s ({}): the stream hangs",
                    RUN_TIMEOUT.as_secs(),
                    mode.describe()
                ));
                break;
            }
        };
        match &whole {
            None => {
                problems.extend(check_requests(&fixture, &run.requests));
                problems.extend(run.problems);
                whole = Some(run.text);
            }
            Some(first) => {
                if *first != run.text {
                    problems.push(format!(
                        "replaying {} prints something else than {}:\n{}",
                        mode.describe(),
                        Chunking::Whole.describe(),
                        line_diff(first, &run.text)
                    ));
                }
            }
        }
    }
    if let Some(actual) = whole {
        let path = fixture.expected_path();
        let shown = display_path(&fixtures_root, &path);
        match &fixture.expected {
            Some(expected) if *expected == actual => {}
            Some(expected) if !update => problems.push(format!(
                "expected.txt differs (rerun with UPDATE_EXPECT=1 and review the diff if the change is right):\n{}",
                line_diff(expected, &actual)
            )),
            None if !update && !write_missing => problems.push(format!(
                "{shown} is missing: run `UPDATE_EXPECT=1 cargo xtask conformance` locally, review and commit it"
            )),
            existing => match crate::write(&path, &actual) {
                Ok(()) => notes.push(format!(
                    "{} {shown}",
                    if existing.is_some() { "updated" } else { "wrote" }
                )),
                Err(e) => problems.push(e.to_string()),
            },
        }
    }
    if problems.is_empty() {
        (Outcome::Pass, notes)
    } else {
        (Outcome::Fail(problems.join("\n")), notes)
    }
}

/// `path` relative to the folder holding `fixtures_root` (the workspace or crate root).
fn display_path(fixtures_root: &Path, path: &Path) -> String {
    let root = fixtures_root.parent().unwrap_or(fixtures_root);
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

/// The fixture's base URL with its scheme and host replaced by the loopback
/// server's (the path is kept: `https://api.openai.com/v1` becomes
/// `http://127.0.0.1:<port>/v1`).
pub fn loopback_base_url(original: &str, addr: SocketAddr) -> String {
    llm_testkit::loopback_base_url(original, addr)
}

/// The request options a fixture's input asks for, sleeping on `sleeper` (which
/// records the retry waits instead of waiting).
pub fn stream_options(input: &InputOptions, sleeper: Arc<RecordingSleeper>) -> StreamOptions {
    StreamOptions {
        api_key: input.api_key.clone().map(ApiKey::new),
        headers: input.headers.clone(),
        temperature: input.temperature,
        max_tokens: input.max_tokens,
        stop: input.stop.clone(),
        reasoning: input.reasoning,
        session_id: input.session_id.clone(),
        prompt_cache_key: input.prompt_cache_key.clone(),
        cache_retention: input.cache_retention.unwrap_or_default(),
        tool_choice: input.tool_choice.clone(),
        provider_options: input.provider_options.clone(),
        retry: RetryPolicy {
            max_retries: input.max_retries.unwrap_or(2),
            jitter: false,
            ..RetryPolicy::default()
        },
        sleeper: Some(sleeper),
        output: input.output.as_ref().map(llm_testkit::fixture::OutputInput::format),
        ..StreamOptions::default()
    }
}

/// The `structured` line of a fixture with an output format: the answer's outcome.
fn structured_line(format: &llm_core::OutputFormat, events: &[AssistantEvent]) -> String {
    use llm_core::output::{StructuredOutcome, outcome};
    let result = match events.last() {
        Some(AssistantEvent::Done { message, .. }) => outcome(format, message, None),
        Some(AssistantEvent::Error { message, error, .. }) => outcome(format, message, Some(error)),
        _ => return "structured none".to_owned(),
    };
    match result {
        StructuredOutcome::Valid(value) => format!("structured valid {value}"),
        StructuredOutcome::Invalid { value, violations } => {
            let shown: Vec<String> = violations.iter().map(ToString::to_string).collect();
            let value = value.map_or_else(|| "-".to_owned(), |v| v.to_string());
            format!("structured invalid {value} {shown:?}")
        }
        StructuredOutcome::Refused(e) => format!("structured refused {}", e.message),
        StructuredOutcome::CutOff(value) => format!("structured cut_off {value}"),
        StructuredOutcome::Failed(e) => {
            format!("structured failed {} {}", e.kind.as_str(), e.message)
        }
    }
}

async fn run_once(entry: ProviderEntry, fixture: &Fixture, mode: Chunking) -> Result<RunOutput> {
    let server = Server::start(fixture.responses.clone(), mode)
        .await
        .map_err(|e| Error::Msg(format!("cannot start the loopback server: {e}")))?;
    let sleeper = Arc::new(RecordingSleeper::new());
    let mut options = stream_options(&fixture.options, sleeper.clone());
    let (model, provider) = fixture_provider(entry, fixture, server.addr, &mut options)?;
    let mut stream = provider.stream(&model, &fixture.context, &options);
    let mut events: Vec<AssistantEvent> = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
        if fixture.abort_after_events == Some(events.len()) {
            options.cancel.cancel();
        }
    }
    drop(stream);
    drop(provider);
    let requests = server.recorded();

    let mut problems = Vec::new();
    let terminals = events.iter().filter(|e| e.is_terminal()).count();
    if terminals != 1 || !events.last().is_some_and(AssistantEvent::is_terminal) {
        problems.push(format!(
            "the stream must end with exactly one terminal event (it had {terminals})"
        ));
    }
    if let Some(n) = fixture.abort_after_events
        && events.len() < n
    {
        problems.push(format!(
            "abortAfterEvents is {n} but the stream had only {} events: nothing was aborted",
            events.len()
        ));
    }
    if let Responses::Sequence(list) = &fixture.responses
        && requests.len() > list.len()
    {
        problems.push(format!(
            "{} requests, but exchanges.json answers only {}",
            requests.len(),
            list.len()
        ));
    }

    let mut text = print_transcript(&events);
    if let Some(format) = &options.output {
        let _ = writeln!(text, "{}", structured_line(format, &events));
    }
    let _ = writeln!(text, "requests {}", requests.len());
    let sleeps: Vec<String> = sleeper.delays().iter().map(|d| d.as_millis().to_string()).collect();
    let _ = writeln!(text, "sleeps [{}]", sleeps.join(", "));
    // A URL in an error message would carry the random port.
    let text = text.replace(&server.addr.to_string(), "127.0.0.1:<port>");
    Ok(RunOutput { text, requests, problems })
}

/// The fixture's model pointed at the loopback server at `addr`, and a fresh provider:
/// with `env` or `keepHost`, one made by the entry's `make_with` on the fixture's
/// environment (URL-valued provider options in `options` keep their host too).
pub fn fixture_provider(
    entry: ProviderEntry,
    fixture: &Fixture,
    addr: SocketAddr,
    options: &mut StreamOptions,
) -> Result<(llm_core::Model, Arc<dyn Provider>)> {
    let mut model = fixture.model.clone();
    if !fixture.keep_host && fixture.env.is_empty() {
        model.base_url = loopback_base_url(&fixture.model.base_url, addr);
        return Ok((model, (entry.make)()));
    }
    let Some(make_with) = entry.make_with else {
        return Err(Error::Msg(format!(
            "provider {} takes no env or keepHost (ProviderEntry::with_env)",
            entry.name
        )));
    };
    let mut env = fixture.env.clone();
    if fixture.keep_host {
        let keep = |url: &str| llm_testkit::loopback_keep_host(url, addr);
        model.base_url = keep(&fixture.model.base_url);
        env.values_mut().for_each(|v| *v = keep(v));
        for value in options.provider_options.values_mut() {
            if let Value::String(text) = value {
                *text = keep(text);
            }
        }
    } else {
        model.base_url = loopback_base_url(&fixture.model.base_url, addr);
    }
    let provider: Arc<dyn Provider> = make_with(loopback_client(fixture.keep_host)?, env);
    Ok((model, provider))
}

/// Resolves every host name to 127.0.0.1 (the port comes from the URL), so a
/// `keepHost` fixture never reaches the network whatever host its provider picks.
struct LoopbackResolver;

impl reqwest::dns::Resolve for LoopbackResolver {
    fn resolve(&self, _name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let addrs: reqwest::dns::Addrs =
            Box::new(std::iter::once(SocketAddr::from(([127, 0, 0, 1], 0))));
        Box::pin(std::future::ready(Ok(addrs)))
    }
}

/// The HTTP client of a fixture with `env` or `keepHost` (no proxy from the environment).
fn loopback_client(keep_host: bool) -> Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder().no_proxy();
    if keep_host {
        builder = builder.dns_resolver(Arc::new(LoopbackResolver));
    }
    builder.build().map_err(|e| Error::Msg(format!("cannot build the loopback client: {e}")))
}

/// Header names whose values are never printed.
fn is_secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    matches!(
        name.as_str(),
        "authorization" | "x-api-key" | "api-key" | "x-goog-api-key" | "proxy-authorization"
    )
}

fn check_requests(fixture: &Fixture, recorded: &[Recorded]) -> Vec<String> {
    let mut problems = Vec::new();
    match &fixture.requests {
        ExpectedRequests::Every(_) if recorded.is_empty() => {
            problems.push("no request reached the server".to_owned());
        }
        ExpectedRequests::Each(list) if list.len() != recorded.len() => problems.push(format!(
            "request.json lists {} requests but the server received {}",
            list.len(),
            recorded.len()
        )),
        _ => {}
    }
    // Retries usually repeat one mismatch: report each distinct one once.
    let mut distinct: Vec<(Vec<usize>, Vec<String>)> = Vec::new();
    for (i, request) in recorded.iter().enumerate() {
        let Some(expected) = fixture.requests.for_request(i) else { continue };
        let found = check_request(expected, request);
        if found.is_empty() {
            continue;
        }
        match distinct.iter_mut().find(|(_, f)| *f == found) {
            Some((numbers, _)) => numbers.push(i + 1),
            None => distinct.push((vec![i + 1], found)),
        }
    }
    for (numbers, found) in distinct {
        let numbers: Vec<String> = numbers.iter().map(|n| format!("#{n}")).collect();
        let (noun, verb) =
            if numbers.len() == 1 { ("request", "does") } else { ("requests", "do") };
        let mut text = format!("{noun} {} {verb} not match request.json:", numbers.join(", "));
        for p in found {
            text.push_str("\n  ");
            text.push_str(&p.replace('\n', "\n  "));
        }
        problems.push(text);
    }
    problems
}

fn check_request(expected: &ExpectedRequest, got: &Recorded) -> Vec<String> {
    let mut problems = Vec::new();
    if !expected.method.eq_ignore_ascii_case(&got.method) {
        problems.push(format!("method: expected {}, got {}", expected.method, got.method));
    }
    if expected.path != got.path {
        problems.push(format!("path: expected {}, got {}", expected.path, got.path));
    }
    let query = parse_query(got.query.as_deref().unwrap_or(""));
    if query != expected.query {
        let show = |q: &BTreeMap<String, String>| serde_json::to_string(q).unwrap_or_default();
        let mut shown = query.clone();
        for (k, v) in shown.iter_mut() {
            if k.eq_ignore_ascii_case("key") {
                *v = "<redacted>".to_owned();
            }
        }
        problems.push(format!("query: expected {}, got {}", show(&expected.query), show(&shown)));
    }
    for (name, want) in &expected.headers {
        let values: Vec<&str> = got
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect();
        match want.as_str() {
            "<present>" if values.is_empty() => problems.push(format!("header {name}: missing")),
            "<present>" => {}
            "<absent>" if !values.is_empty() => {
                problems.push(format!("header {name}: must not be sent"))
            }
            "<absent>" => {}
            _ if values.is_empty() => {
                problems.push(format!("header {name}: missing (expected {want:?})"))
            }
            _ if values.contains(&want.as_str()) => {}
            _ => {
                let shown = if is_secret_header(name) {
                    "<redacted>".to_owned()
                } else {
                    values.join(", ")
                };
                problems.push(format!("header {name}: expected {want:?}, got {shown:?}"));
            }
        }
    }
    // An empty body (a GET) is expected as `"body": null`.
    let received = if got.body.is_empty() {
        Ok(Value::Null)
    } else {
        serde_json::from_slice::<Value>(&got.body)
    };
    match received {
        Err(e) => problems.push(format!(
            "body is not JSON ({e}): {}",
            truncate(&String::from_utf8_lossy(&got.body), 300)
        )),
        Ok(body) => {
            let mut diffs = Vec::new();
            json_diff(&expected.body, &body, "body", &mut diffs);
            if !diffs.is_empty() {
                problems.extend(diffs);
                problems.push(format!(
                    "the body received (canonical): {}",
                    truncate(&serde_json::to_string(&canonical(&body)).unwrap_or_default(), 4000)
                ));
            }
        }
    }
    problems
}

/// `value` with every object's keys sorted.
pub fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for k in keys {
                if let Some(v) = map.get(k) {
                    out.insert(k.clone(), canonical(v));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

const MAX_JSON_DIFFS: usize = 12;

fn short(value: &Value) -> String {
    truncate(&serde_json::to_string(&canonical(value)).unwrap_or_default(), 300)
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}... ({} bytes)", s.get(..cut).unwrap_or_default(), s.len())
}

/// Differences between two JSON values as `path: ...` lines.
fn json_diff(expected: &Value, got: &Value, path: &str, out: &mut Vec<String>) {
    if out.len() >= MAX_JSON_DIFFS || expected == got {
        return;
    }
    match (expected, got) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: BTreeSet<&String> = a.keys().collect();
            keys.extend(b.keys());
            for key in keys {
                let sub = format!("{path}.{key}");
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => json_diff(x, y, &sub, out),
                    (Some(x), None) => out.push(format!("{sub}: missing (expected {})", short(x))),
                    (None, Some(y)) => out.push(format!("{sub}: not expected, got {}", short(y))),
                    (None, None) => {}
                }
                if out.len() >= MAX_JSON_DIFFS {
                    out.push("... more differences".to_owned());
                    return;
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                out.push(format!("{path}: expected {} items, got {}", a.len(), b.len()));
            }
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                json_diff(x, y, &format!("{path}[{i}]"), out);
            }
        }
        _ => out.push(format!("{path}: expected {}, got {}", short(expected), short(got))),
    }
}

fn parse_query(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(matches_pattern("tool", "tool-call-single"));
        assert!(matches_pattern("http-*", "http-401-auth"));
        assert!(matches_pattern("*-success", "http-500-then-success"));
        assert!(matches_pattern("http-*-success", "http-429-retry-after-then-success"));
        assert!(!matches_pattern("http-*-success", "http-401-auth"));
        assert!(matches_pattern("text-only", "text-only"));
    }

    #[test]
    fn base_url_keeps_the_path() {
        let addr: SocketAddr = ([127, 0, 0, 1], 4000).into();
        assert_eq!(
            loopback_base_url("https://api.openai.com/v1", addr),
            "http://127.0.0.1:4000/v1"
        );
        assert_eq!(loopback_base_url("https://api.anthropic.com", addr), "http://127.0.0.1:4000");
        assert_eq!(
            loopback_base_url("https://x.googleapis.com/v1beta/", addr),
            "http://127.0.0.1:4000/v1beta"
        );
        assert_eq!(loopback_base_url("", addr), "http://127.0.0.1:4000");
    }

    #[test]
    fn query_decoding() {
        let q = parse_query("alt=sse&x=a%20b+c");
        assert_eq!(q.get("alt").map(String::as_str), Some("sse"));
        assert_eq!(q.get("x").map(String::as_str), Some("a b c"));
    }

    #[test]
    fn json_diff_paths() {
        let a = serde_json::json!({"a": [1, {"b": "x"}], "c": 1});
        let b = serde_json::json!({"a": [1, {"b": "y"}], "d": 2});
        let mut out = Vec::new();
        json_diff(&a, &b, "body", &mut out);
        assert_eq!(
            out,
            vec![
                "body.a[1].b: expected \"x\", got \"y\"".to_owned(),
                "body.c: missing (expected 1)".to_owned(),
                "body.d: not expected, got 2".to_owned(),
            ]
        );
    }
}
