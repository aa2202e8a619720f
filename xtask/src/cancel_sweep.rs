//! Cancellation at every event index (`docs/reliability.md`).
//!
//! For each provider's multi-tool fixtures (`parallel-tools-two`,
//! `parallel-tools-three-interleaved`) the stream is replayed once to count its
//! events, then once per index *k*: `StreamOptions::cancel` fires after *k*
//! events. Each run must end with exactly one terminal event, `aborted` (the
//! cancel always lands before the terminal event), with the events before it
//! unchanged and a final message that holds what arrived (its text is what the
//! deltas streamed, its content a prefix of the full response). The server
//! holds the connection open after the last event, so the run also shows that
//! the cancelled stream closes its connection.
//!
//! The same is done through `agent_core::Agent` with the real provider: a run
//! whose first response is the multi-tool stream and whose second is the
//! provider's `text-only` stream is aborted after each of its events. Each run
//! must end with exactly one `AgentEnd`, last; the transcript must satisfy
//! `check_tool_results`; no tool future may be alive and no connection open
//! afterwards.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agent_core::{Agent, AgentConfig, AgentContext, AgentEvent, AgentTool, EndReason, ToolOutput};
use bytes::Bytes;
use futures_util::StreamExt;
use llm_core::{AssistantEvent, AssistantMessage, ErrorKind, RecordingSleeper};

use crate::conformance::{ProviderEntry, loopback_base_url, stream_options};
use crate::faults::{Options, events_agree, is_prefix};
use crate::fixture::{self, Canned, Fixture, Responses, Scenario};
use crate::server::split_stream;
use crate::{Error, Result};
use llm_conformance::rawserver::{RawServer, Script, Step, chunk, end_chunks, stream_head};

/// The multi-tool fixtures swept, where a provider has them.
const SCENARIOS: &[&str] = &["parallel-tools-two", "parallel-tools-three-interleaved"];
/// A run that takes longer hangs.
const RUN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the client may take to close its connections.
const CLOSE_GRACE: Duration = Duration::from_secs(3);
/// Runs at the same time.
const PARALLEL: usize = 16;

/// One swept fixture.
#[derive(Debug, Clone)]
pub struct SweepLine {
    /// Provider folder name.
    pub provider: String,
    /// `stream <scenario>` or `agent <scenario>`.
    pub what: String,
    /// Indexes tried (the events of the uncancelled run).
    pub indexes: usize,
    /// How the runs ended (`aborted` 12, ...).
    pub endings: BTreeMap<String, usize>,
    /// Stream sweeps: how many runs delivered *n* queued events after the cancel.
    pub queued: BTreeMap<usize, usize>,
    /// What failed.
    pub problems: Vec<String>,
}

/// The sweep over every provider.
#[derive(Debug, Clone)]
pub struct SweepReport {
    /// One line per provider and fixture.
    pub lines: Vec<SweepLine>,
}

impl SweepReport {
    /// Lines with problems.
    pub fn failed(&self) -> usize {
        self.lines.iter().filter(|l| !l.problems.is_empty()).count()
    }

    /// A table, then the problems.
    pub fn render(&self) -> String {
        let mut out = String::from("cancellation at every event index\n");
        let w1 = self.lines.iter().map(|l| l.provider.len()).max().unwrap_or(8);
        let w2 = self.lines.iter().map(|l| l.what.len()).max().unwrap_or(8);
        for line in &self.lines {
            let endings: Vec<String> =
                line.endings.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let queued = if line.queued.is_empty() {
                String::new()
            } else {
                let counts: Vec<String> =
                    line.queued.iter().map(|(q, n)| format!("{q}: {n}")).collect();
                format!("; queued events after the cancel {}", counts.join(", "))
            };
            let status = if line.problems.is_empty() { "pass" } else { "FAIL" };
            let _ = writeln!(
                out,
                "  {status}  {:<w1$}  {:<w2$}  {:>3} indexes: {}{queued}",
                line.provider,
                line.what,
                line.indexes,
                endings.join(", ")
            );
        }
        for line in self.lines.iter().filter(|l| !l.problems.is_empty()) {
            let _ = writeln!(out, "FAIL {} / {}", line.provider, line.what);
            for p in line.problems.iter().take(12) {
                for l in p.lines() {
                    let _ = writeln!(out, "    {l}");
                }
            }
            if line.problems.len() > 12 {
                let _ = writeln!(out, "    ... {} more", line.problems.len() - 12);
            }
        }
        let _ = writeln!(
            out,
            "cancellation sweep: {} fixtures, {} failed",
            self.lines.len(),
            self.failed()
        );
        out
    }
}

fn load(provider: &str, scenario: &str, root: &std::path::Path) -> Result<Option<Box<Fixture>>> {
    let dir = root.join(provider).join(scenario);
    if !dir.is_dir() {
        return Ok(None);
    }
    match fixture::load(&dir)? {
        Scenario::Skip(_) => Ok(None),
        Scenario::Fixture(f) => Ok(Some(f)),
    }
}

fn body_of(fixture: &Fixture) -> Result<Canned> {
    match &fixture.responses {
        Responses::Always(canned) if canned.status == 200 && canned.is_stream() => {
            Ok(canned.clone())
        }
        _ => Err(Error::Msg(format!(
            "{}: needs a plain 200 streaming response (response.sse or response.eventstream)",
            fixture.dir.display()
        ))),
    }
}

/// The whole stream as one write or one write per event; `hold` keeps the
/// connection open after the last event instead of ending the body.
fn stream_script(response: &Canned, per_event: bool, hold: bool) -> Script {
    let mut steps = vec![Step::Write(stream_head(response))];
    if per_event {
        for e in split_stream(response, &response.body) {
            steps.push(Step::Write(Bytes::from(chunk(&e))));
        }
    } else {
        steps.push(Step::Write(Bytes::from(chunk(&response.body))));
    }
    steps.push(if hold { Step::Hold } else { Step::Write(end_chunks()) });
    steps
}

struct StreamRun {
    events: Vec<AssistantEvent>,
    hung: bool,
    open: usize,
}

/// One replay; cancels after `cancel_after` events (`Some(0)`: before the first poll).
async fn stream_once(
    entry: ProviderEntry,
    fixture: &Fixture,
    script: Script,
    cancel_after: Option<usize>,
) -> Result<StreamRun> {
    let server = RawServer::start(vec![script])
        .await
        .map_err(|e| Error::Msg(format!("cannot start the server: {e}")))?;
    let mut model = fixture.model.clone();
    model.base_url = loopback_base_url(&fixture.model.base_url, server.addr);
    let options = stream_options(&fixture.options, Arc::new(RecordingSleeper::new()));
    let provider = (entry.make)();
    let mut stream = provider.stream(&model, &fixture.context, &options);
    let mut events = Vec::new();
    if cancel_after == Some(0) {
        options.cancel.cancel();
    }
    let collect = async {
        while let Some(event) = stream.next().await {
            events.push(event);
            if cancel_after == Some(events.len()) {
                options.cancel.cancel();
            }
        }
    };
    let hung = tokio::time::timeout(RUN_TIMEOUT, collect).await.is_err();
    drop(stream);
    drop(provider);
    let open = server.wait_closed(CLOSE_GRACE).await;
    Ok(StreamRun { events, hung, open })
}

fn final_message(events: &[AssistantEvent]) -> Option<&AssistantMessage> {
    match events.last() {
        Some(AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. }) => {
            Some(message)
        }
        _ => None,
    }
}

fn ending(events: &[AssistantEvent]) -> String {
    match events.last() {
        Some(AssistantEvent::Done { .. }) => "done".to_owned(),
        Some(AssistantEvent::Error { error, .. }) => error.kind.as_str().to_owned(),
        _ => "no terminal".to_owned(),
    }
}

/// Sweeps one fixture's stream, both as one write and one write per event.
async fn sweep_stream(entry: ProviderEntry, fixture: Arc<Fixture>) -> SweepLine {
    let mut line = SweepLine {
        provider: entry.name.to_owned(),
        what: format!("stream {}", fixture.dir.file_name().and_then(|n| n.to_str()).unwrap_or("")),
        indexes: 0,
        endings: BTreeMap::new(),
        queued: BTreeMap::new(),
        problems: Vec::new(),
    };
    let body = match body_of(&fixture) {
        Ok(b) => b,
        Err(e) => {
            line.problems.push(e.to_string());
            return line;
        }
    };
    let baseline =
        match stream_once(entry, &fixture, stream_script(&body, false, false), None).await {
            Ok(run) => run.events,
            Err(e) => {
                line.problems.push(e.to_string());
                return line;
            }
        };
    let Some(AssistantEvent::Done { message: full, .. }) = baseline.last() else {
        line.problems.push(format!("the uncancelled replay ends with {}", ending(&baseline)));
        return line;
    };
    let full = full.clone();
    let n = baseline.len();
    line.indexes = n;
    let burst = full.content.len() + 2;
    let mut runs = Vec::new();
    for per_event in [false, true] {
        for k in 0..n {
            let script = stream_script(&body, per_event, true);
            let fixture = fixture.clone();
            runs.push(async move {
                (per_event, k, stream_once(entry, &fixture, script, Some(k)).await)
            });
        }
    }
    let results: Vec<_> =
        futures_util::stream::iter(runs).buffer_unordered(PARALLEL).collect().await;
    for (per_event, k, result) in results {
        let how = if per_event { "one write per event" } else { "one write" };
        let at = format!("cancel after {k} events ({how})");
        let run = match result {
            Ok(run) => run,
            Err(e) => {
                line.problems.push(format!("{at}: {e}"));
                continue;
            }
        };
        if !per_event {
            *line.endings.entry(ending(&run.events)).or_default() += 1;
        }
        let mut problems = Vec::new();
        if run.hung {
            problems.push("hangs".to_owned());
        }
        let terminals = run.events.iter().filter(|e| e.is_terminal()).count();
        if terminals != 1 || !run.events.last().is_some_and(AssistantEvent::is_terminal) {
            problems.push(format!("{terminals} terminal events (must be exactly one, last)"));
        }
        match run.events.last() {
            Some(AssistantEvent::Error { error, .. }) if error.kind == ErrorKind::Aborted => {}
            _ => problems.push(format!("ends with {}, not aborted", ending(&run.events))),
        }
        // After the cancel only the events already queued from the last delta may come:
        // at most one per content block plus `start`, and the same as without a cancel.
        let delivered = run.events.len().saturating_sub(1);
        if delivered < k.min(n - 1) || delivered > k + burst {
            problems.push(format!(
                "{delivered} events before the terminal one: a cancel after {k} allows {k} to {}",
                k + burst
            ));
        }
        if run.events.get(..delivered) != baseline.get(..delivered) {
            problems
                .push("the events before the terminal differ from the uncancelled run".to_owned());
        }
        if !per_event {
            *line.queued.entry(delivered.saturating_sub(k)).or_default() += 1;
        }
        if let Some(message) = final_message(&run.events) {
            problems.extend(events_agree(&run.events, message));
            if !message.content.is_empty()
                && let Err(why) = is_prefix(message, &full)
            {
                problems
                    .push(format!("the aborted message is not a prefix of the full one: {why}"));
            }
            if message.error_type.as_deref() != Some("aborted") {
                problems.push(format!("message.errorType is {:?}", message.error_type));
            }
        }
        if run.open > 0 {
            problems.push(format!("{} connections still open after the stream ended", run.open));
        }
        for p in problems {
            line.problems.push(format!("{at}: {p}"));
        }
    }
    line.problems.sort();
    line
}

/// Counts live tool futures.
struct Live(Arc<AtomicUsize>);

impl Live {
    fn new(count: &Arc<AtomicUsize>) -> Live {
        count.fetch_add(1, Ordering::SeqCst);
        Live(count.clone())
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

struct AgentRunResult {
    events: Vec<AgentEvent>,
    outcome: Option<agent_core::AgentOutcome>,
    hung: bool,
    open: usize,
    live_tools: usize,
    /// The run had already finished (its events were queued) when it was aborted.
    finished_before_abort: bool,
}

async fn agent_once(
    entry: ProviderEntry,
    tools_fixture: &Fixture,
    scripts: Vec<Script>,
    abort_after: Option<usize>,
) -> Result<AgentRunResult> {
    let server = RawServer::start(scripts)
        .await
        .map_err(|e| Error::Msg(format!("cannot start the server: {e}")))?;
    let mut model = tools_fixture.model.clone();
    model.base_url = loopback_base_url(&tools_fixture.model.base_url, server.addr);
    let live = Arc::new(AtomicUsize::new(0));
    let tools: Vec<AgentTool> = tools_fixture
        .context
        .tools
        .iter()
        .map(|tool| {
            let live = live.clone();
            let name = tool.name.clone();
            AgentTool::new(tool.clone(), move |_inv: agent_core::ToolInvocation| {
                let guard = Live::new(&live);
                let name = name.clone();
                async move {
                    let _guard = guard;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    Ok(ToolOutput::text(format!("{name}: ok")))
                }
            })
        })
        .collect();
    let mut config = AgentConfig::new(model, (entry.make)());
    config.options = stream_options(&tools_fixture.options, Arc::new(RecordingSleeper::new()));
    let agent = Agent::new(config);
    let context = AgentContext {
        system_prompt: tools_fixture.context.system_prompt.clone(),
        messages: tools_fixture.context.messages.clone(),
        tools,
    };
    let mut run = agent
        .continue_run(context)
        .map_err(|e| Error::Msg(format!("the fixture's transcript cannot be continued: {e}")))?;
    let mut events = Vec::new();
    let mut finished_before_abort = false;
    if abort_after == Some(0) {
        run.abort();
    }
    let collect = async {
        while let Some(event) = run.next().await {
            events.push(event);
            if abort_after == Some(events.len()) {
                finished_before_abort = run.outcome().is_some();
                run.abort();
            }
        }
    };
    let hung = tokio::time::timeout(RUN_TIMEOUT, collect).await.is_err();
    let outcome = run.outcome().cloned();
    drop(run);
    drop(agent);
    let open = server.wait_closed(CLOSE_GRACE).await;
    let live_tools = live.load(Ordering::SeqCst);
    Ok(AgentRunResult { events, outcome, hung, open, live_tools, finished_before_abort })
}

fn reason_name(reason: EndReason) -> String {
    format!("{reason:?}").to_ascii_lowercase()
}

/// Sweeps an agent run whose first response is `tools_fixture`'s stream.
async fn sweep_agent(entry: ProviderEntry, tools_fixture: Arc<Fixture>, text: Canned) -> SweepLine {
    let mut line = SweepLine {
        provider: entry.name.to_owned(),
        what: format!(
            "agent {}",
            tools_fixture.dir.file_name().and_then(|n| n.to_str()).unwrap_or("")
        ),
        indexes: 0,
        endings: BTreeMap::new(),
        queued: BTreeMap::new(),
        problems: Vec::new(),
    };
    let body = match body_of(&tools_fixture) {
        Ok(b) => b,
        Err(e) => {
            line.problems.push(e.to_string());
            return line;
        }
    };
    let scripts = || {
        vec![
            stream_script(&body, true, false),
            stream_script(&text, true, false),
            stream_script(&text, true, false),
        ]
    };
    let baseline = match agent_once(entry, &tools_fixture, scripts(), None).await {
        Ok(run) => run,
        Err(e) => {
            line.problems.push(e.to_string());
            return line;
        }
    };
    match &baseline.outcome {
        Some(o) if o.reason == EndReason::Completed => {}
        other => {
            line.problems.push(format!(
                "the run without abort ends with {:?}, not completed",
                other.as_ref().map(|o| o.reason)
            ));
            return line;
        }
    }
    let n = baseline.events.len();
    line.indexes = n;
    let runs = (0..n).map(|k| {
        let fixture = tools_fixture.clone();
        let scripts = scripts();
        async move { (k, agent_once(entry, &fixture, scripts, Some(k)).await) }
    });
    let results: Vec<_> =
        futures_util::stream::iter(runs).buffer_unordered(PARALLEL).collect().await;
    for (k, result) in results {
        let at = format!("abort after {k} events");
        let run = match result {
            Ok(run) => run,
            Err(e) => {
                line.problems.push(format!("{at}: {e}"));
                continue;
            }
        };
        let mut problems = Vec::new();
        if run.hung {
            problems.push("hangs".to_owned());
        }
        let ends = run.events.iter().filter(|e| matches!(e, AgentEvent::AgentEnd { .. })).count();
        if ends != 1 || !matches!(run.events.last(), Some(AgentEvent::AgentEnd { .. })) {
            problems.push(format!("{ends} AgentEnd events (must be exactly one, last)"));
        }
        match &run.outcome {
            None => problems.push("no outcome".to_owned()),
            Some(outcome) => {
                *line.endings.entry(reason_name(outcome.reason)).or_default() += 1;
                for (which, messages) in [
                    ("the run's messages", outcome.messages()),
                    ("the final transcript", &outcome.context.messages),
                ] {
                    let violations = agent_core::check_tool_results(messages);
                    if !violations.is_empty() {
                        problems.push(format!("{which} break the invariant: {violations:?}"));
                    }
                }
                if let Some(AgentEvent::AgentEnd { messages, .. }) = run.events.last()
                    && *messages != outcome.messages()
                {
                    problems.push("AgentEnd's messages differ from the outcome's".to_owned());
                }
                // Events are queued as the run goes: an abort can only come too late
                // when the run had already finished when it was called.
                if !run.finished_before_abort && outcome.reason != EndReason::Aborted {
                    problems.push(format!("ended {:?}, not aborted", outcome.reason));
                }
            }
        }
        if run.live_tools > 0 {
            problems.push(format!("{} tool futures still alive after the run", run.live_tools));
        }
        if run.open > 0 {
            problems.push(format!("{} connections still open after the run", run.open));
        }
        for p in problems {
            line.problems.push(format!("{at}: {p}"));
        }
    }
    line.problems.sort();
    line
}

/// Runs the stream and agent sweeps for every provider.
pub fn run(options: &Options) -> Result<SweepReport> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Msg(format!("cannot start the tokio runtime: {e}")))?;
    let entries = options.selected()?;
    runtime.block_on(async {
        let mut jobs: Vec<futures_util::future::BoxFuture<'static, SweepLine>> = Vec::new();
        let mut lines = Vec::new();
        for entry in entries {
            let text = load(entry.name, "text-only", &options.fixtures_root)?
                .map(|f| body_of(&f))
                .transpose()?;
            for scenario in SCENARIOS {
                let Some(fixture) = load(entry.name, scenario, &options.fixtures_root)? else {
                    continue;
                };
                let fixture: Arc<Fixture> = Arc::from(fixture);
                jobs.push(Box::pin(sweep_stream(entry, fixture.clone())));
                match &text {
                    Some(text) => jobs.push(Box::pin(sweep_agent(entry, fixture, text.clone()))),
                    None => lines.push(SweepLine {
                        provider: entry.name.to_owned(),
                        what: format!("agent {scenario}"),
                        indexes: 0,
                        endings: BTreeMap::new(),
                        queued: BTreeMap::new(),
                        problems: vec!["no text-only fixture for the second turn".to_owned()],
                    }),
                }
            }
        }
        let handles: Vec<_> = jobs.into_iter().map(tokio::spawn).collect();
        for handle in handles {
            match handle.await {
                Ok(line) => lines.push(line),
                Err(e) => lines.push(SweepLine {
                    provider: "?".to_owned(),
                    what: "?".to_owned(),
                    indexes: 0,
                    endings: BTreeMap::new(),
                    queued: BTreeMap::new(),
                    problems: vec![format!("the sweep panicked: {e}")],
                }),
            }
        }
        lines.sort_by(|a, b| (&a.provider, &a.what).cmp(&(&b.provider, &b.what)));
        Ok(SweepReport { lines })
    })
}
