//! The secret scan (`docs/reliability.md`): every fixture of every provider is
//! replayed with a distinctive API key, under a `tracing` subscriber at TRACE
//! level that writes everything into a buffer, and the key must appear nowhere
//! the library writes: no event (`Debug` or the fixture printer), no error
//! (`Display` or `Debug`), no final message or saved transcript JSON, no `Debug`
//! of the options or the stream, nor of the provider its registry entry makes on an
//! environment whose key variables hold the secret (`make_with`, so every registered
//! provider is printed with no table to edit), no tracing output (the `chat` span's
//! attributes included, with content captured: what an OTLP exporter would send), and not in the
//! request URL (where an HTTP client's own logging would print it). The key must
//! have reached the server in a header, or the scan would prove nothing.
//!
//! Fixtures with an Anthropic OAuth key (`sk-ant-oat…`) get an OAuth-shaped
//! secret, and Anthropic's `text-only` and `tool-call-single` are also replayed
//! with one; Google gets a Google-shaped key, which must travel in `x-goog-api-key`
//! (Vertex fixtures: as a bearer token). Bedrock's fixtures are also replayed signing
//! with SigV4 from AWS keys in the environment: the secret access key and the session
//! token both carry the marker, the token must reach the server in
//! `x-amz-security-token`, and neither may appear anywhere else.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use llm_core::{ApiKey, AssistantEvent, Message, RecordingSleeper};

use crate::conformance::{ProviderEntry, fixture_provider, stream_options};
use crate::faults::Options;
use crate::fixture::{self, Fixture, Scenario};
use crate::server::{Chunking, Server};
use crate::{Error, Result, subdirs};

/// The key every fixture is replayed with.
pub const SECRET: &str = "sk-test-SECRETKEY-1234567890abcdef";
/// The key for Anthropic OAuth fixtures.
pub const OAUTH_SECRET: &str = "sk-ant-oat01-SECRETKEY-1234567890abcdef";
/// The key for Google (`x-goog-api-key`), shaped like Google's.
pub const GOOGLE_SECRET: &str = "AIzaSy-SECRETKEY-1234567890abcdef";
/// The AWS secret access key of the SigV4 replays (40 characters, like AWS's).
pub const AWS_SECRET_KEY: &str = "wJalrXUtnFEMI/SECRETKEY-1234567890abcdef";
/// The AWS session token of the SigV4 replays.
pub const AWS_SESSION_TOKEN: &str = "IQoJb3JpZ2lu-SECRETKEY-1234567890-session-token";
/// The distinctive part searched for (a key cut short still shows it).
const MARKER: &str = "SECRETKEY-1234567890";

/// Anthropic fixtures also replayed with an OAuth key.
const OAUTH_EXTRA: &[&str] = &["text-only", "tool-call-single"];

/// Threads replaying fixtures (each with its own runtime and subscriber).
const THREADS: usize = 4;

/// One replay that leaked, or could not prove anything.
#[derive(Debug, Clone)]
pub struct Leak {
    /// `provider/scenario` (plus `(oauth)` for the extra OAuth replays).
    pub fixture: String,
    /// Where the key showed up, or why the replay proves nothing.
    pub problem: String,
}

/// The scan.
#[derive(Debug, Clone, Default)]
pub struct SecretReport {
    /// Replays run.
    pub replays: usize,
    /// Replays whose request carried the key (the others sent no request or no key).
    pub with_key: usize,
    /// Bytes of tracing output searched.
    pub trace_bytes: usize,
    /// Leaks and vacuous replays.
    pub leaks: Vec<Leak>,
}

impl SecretReport {
    /// Replays that leaked.
    pub fn failed(&self) -> usize {
        self.leaks.len()
    }

    /// A summary line, then every leak.
    pub fn render(&self) -> String {
        let mut out = format!(
            "secret scan: {} replays ({} sent the key), {} KiB of TRACE output searched, {} leaks\n",
            self.replays,
            self.with_key,
            self.trace_bytes / 1024,
            self.leaks.len()
        );
        for leak in &self.leaks {
            let _ = writeln!(out, "FAIL {}: {}", leak.fixture, leak.problem);
        }
        out
    }
}

/// A `MakeWriter` appending to a shared buffer.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Buffer {
    fn text(&self) -> String {
        let bytes = match self.0.lock() {
            Ok(b) => b.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl std::io::Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.lock() {
            Ok(mut b) => b.extend_from_slice(buf),
            Err(poisoned) => poisoned.into_inner().extend_from_slice(buf),
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Buffer {
    type Writer = Buffer;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// The `Debug` output of the provider `entry` makes on its environment (`None` without
/// [`ProviderEntry::make_with`]): every key variable the provider declares, and the AWS
/// secret key and session token, hold a marked secret, which the printed form must not show.
fn provider_debug(entry: &ProviderEntry) -> Result<Option<String>> {
    let Some(make_with) = entry.make_with else { return Ok(None) };
    let mut env: std::collections::BTreeMap<String, String> =
        entry.info.key_env.iter().map(|name| ((*name).to_owned(), SECRET.to_owned())).collect();
    env.insert("AWS_SECRET_ACCESS_KEY".to_owned(), AWS_SECRET_KEY.to_owned());
    env.insert("AWS_SESSION_TOKEN".to_owned(), AWS_SESSION_TOKEN.to_owned());
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| Error::Msg(format!("cannot build an HTTP client: {e}")))?;
    Ok(Some(format!("{:?}", make_with(client, env))))
}

struct Job {
    entry: ProviderEntry,
    /// The `Debug` of the provider made on a secret environment ([`provider_debug`]).
    provider_debug: Option<Arc<str>>,
    label: String,
    fixture: Box<Fixture>,
    key: Option<&'static str>,
    /// Signs with SigV4 from AWS keys in the fixture's environment (no API key).
    sigv4: bool,
}

struct Outcome {
    label: String,
    problems: Vec<String>,
    sent_key: bool,
    trace_bytes: usize,
}

/// Replays one fixture with `job.key` and searches everything it wrote.
async fn replay(job: &Job, trace: &Buffer) -> Result<Outcome> {
    let fixture = &job.fixture;
    let server = Server::start(fixture.responses.clone(), Chunking::Whole)
        .await
        .map_err(|e| Error::Msg(format!("cannot start the server: {e}")))?;
    let mut options = stream_options(&fixture.options, Arc::new(RecordingSleeper::new()));
    options.api_key = job.key.map(ApiKey::new);
    let (model, provider) = fixture_provider(job.entry, fixture, server.addr, &mut options)?;
    let mut stream = provider.stream(&model, &fixture.context, &options);
    llm_core::telemetry::record_input(stream.span(), &fixture.context);
    let mut surfaces: Vec<(&str, String)> = vec![
        ("Debug of the options", format!("{options:?}")),
        ("Debug of the stream", format!("{stream:?}")),
    ];
    if let Some(debug) = &job.provider_debug {
        surfaces.push(("Debug of the provider", debug.to_string()));
    }
    let mut events = Vec::new();
    let mut cancelled = false;
    while let Some(event) = stream.next().await {
        events.push(event);
        if fixture.abort_after_events == Some(events.len()) && !cancelled {
            cancelled = true;
            options.cancel.cancel();
        }
    }
    surfaces.push(("Debug of the finished stream", format!("{stream:?}")));
    if let Some(AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. }) =
        events.last()
    {
        llm_core::telemetry::record_output(stream.span(), message);
    }
    drop(stream);
    drop(provider);
    for event in &events {
        surfaces.push(("an event (Debug)", format!("{event:?}")));
        if let AssistantEvent::Error { error, message, .. } = event {
            surfaces.push(("an error (Display)", error.to_string()));
            surfaces.push(("an error (Debug)", format!("{error:?}")));
            surfaces.push(("the error message", message.error_message.clone().unwrap_or_default()));
        }
        if let AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. } = event
        {
            let mut transcript = fixture.context.messages.clone();
            transcript.push(Message::Assistant(message.clone()));
            surfaces.push((
                "the saved transcript JSON",
                serde_json::to_string_pretty(&transcript).unwrap_or_default(),
            ));
        }
    }
    surfaces.push(("the printed transcript", llm_core::raw::printer::print_transcript(&events)));

    let requests = server.recorded();
    let mut problems = Vec::new();
    for request in &requests {
        let url = format!("{}?{}", request.path, request.query.as_deref().unwrap_or(""));
        if url.contains(MARKER) {
            problems.push("the key is in the request URL".to_owned());
        }
    }
    // Gemini takes the key in `x-goog-api-key`; Vertex takes an access token as a bearer.
    let google_header = match fixture.model.api.as_str() {
        "google-vertex" => "authorization",
        _ => "x-goog-api-key",
    };
    let sent_key = requests.iter().any(|r| {
        r.headers.iter().any(|(name, v)| {
            v.contains(MARKER)
                && (job.entry.name != "google" || name.eq_ignore_ascii_case(google_header))
        })
    });
    // A fixture whose configured headers carry their own `Authorization` may replace the
    // key by design (Azure Foundry's header merge): the key must still not leak.
    let configured_auth = fixture
        .model
        .headers
        .keys()
        .chain(fixture.options.headers.keys())
        .any(|name| name.eq_ignore_ascii_case("authorization"));
    if (job.key.is_some() || job.sigv4) && !requests.is_empty() && !sent_key && !configured_auth {
        problems.push("the key was not sent in any header: the scan proves nothing".to_owned());
    }
    let traced = trace.text();
    // The span output must be there, content included, or the scan proves nothing of it.
    for field in ["gen_ai.operation.name", "gen_ai.input.messages", "gen_ai.output.messages"] {
        if !requests.is_empty() && !traced.contains(field) {
            problems.push(format!(
                "no `{field}` in the tracing output: the `chat` span was not captured"
            ));
        }
    }
    surfaces.push(("the TRACE output", traced.clone()));
    for (surface, text) in &surfaces {
        if let Some(at) = text.find(MARKER) {
            let start = text.get(..at).map_or(0, |t| t.len().saturating_sub(80));
            let mut start = start;
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            let shown = text.get(start..at).unwrap_or_default().replace('\n', " ");
            problems.push(format!("the key appears in {surface}: ...{shown}[KEY]"));
        }
    }
    problems.dedup();
    Ok(Outcome { label: job.label.clone(), problems, sent_key, trace_bytes: traced.len() })
}

fn run_job(job: &Job) -> Outcome {
    let trace = Buffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(trace.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::FULL)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // One thread, so every task (the client's connection tasks included) logs here.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            return Outcome {
                label: job.label.clone(),
                problems: vec![format!("cannot start a runtime: {e}")],
                sent_key: false,
                trace_bytes: 0,
            };
        }
    };
    tracing::trace!(target: "xtask::secrets", fixture = %job.label, "replay starts");
    let result = runtime.block_on(replay(job, &trace));
    drop(runtime);
    match result {
        Ok(outcome) => outcome,
        Err(e) => Outcome {
            label: job.label.clone(),
            problems: vec![e.to_string()],
            sent_key: false,
            trace_bytes: trace.text().len(),
        },
    }
}

fn jobs(entries: &[ProviderEntry], root: &Path) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for entry in entries {
        let dir = root.join(entry.name);
        if !dir.is_dir() {
            continue;
        }
        let provider_debug: Option<Arc<str>> = provider_debug(entry)?.map(Arc::from);
        for (scenario, path) in subdirs(&dir)? {
            let Scenario::Fixture(fixture) = fixture::load(&path)? else { continue };
            let key = match fixture.options.api_key.as_deref() {
                None => None,
                Some(k) if k.starts_with("sk-ant-oat") => Some(OAUTH_SECRET),
                Some(_) if entry.name == "google" => Some(GOOGLE_SECRET),
                Some(_) => Some(SECRET),
            };
            let label = format!("{}/{scenario}", entry.name);
            if entry.name == "anthropic"
                && OAUTH_EXTRA.contains(&scenario.as_str())
                && let Scenario::Fixture(again) = fixture::load(&path)?
            {
                jobs.push(Job {
                    entry: *entry,
                    provider_debug: provider_debug.clone(),
                    label: format!("{label} (oauth key)"),
                    fixture: again,
                    key: Some(OAUTH_SECRET),
                    sigv4: false,
                });
            }
            if entry.name == "bedrock"
                && let Scenario::Fixture(mut again) = fixture::load(&path)?
            {
                again.env.extend([
                    ("AWS_ACCESS_KEY_ID".to_owned(), "AKIAIOSFODNN7SIGVFOUR".to_owned()),
                    ("AWS_SECRET_ACCESS_KEY".to_owned(), AWS_SECRET_KEY.to_owned()),
                    ("AWS_SESSION_TOKEN".to_owned(), AWS_SESSION_TOKEN.to_owned()),
                ]);
                let label = format!("{label} (sigv4)");
                jobs.push(Job {
                    entry: *entry,
                    provider_debug: provider_debug.clone(),
                    label,
                    fixture: again,
                    key: None,
                    sigv4: true,
                });
            }
            let provider_debug = provider_debug.clone();
            jobs.push(Job { entry: *entry, provider_debug, label, fixture, key, sigv4: false });
        }
    }
    Ok(jobs)
}

/// Replays every fixture with the secret and searches every output.
pub fn run(options: &Options) -> Result<SecretReport> {
    // Spans as full as they get: the latest conventions, with the messages as content.
    llm_core::telemetry::set_semconv(llm_core::telemetry::Semconv::Latest);
    llm_core::telemetry::set_capture_content(true);
    let entries = options.selected()?;
    let all = jobs(&entries, &options.fixtures_root)?;
    let replays = all.len();
    let queue = Arc::new(Mutex::new(all));
    let results = Arc::new(Mutex::new(Vec::new()));
    std::thread::scope(|scope| {
        for _ in 0..THREADS {
            let queue = queue.clone();
            let results = results.clone();
            scope.spawn(move || {
                loop {
                    let job = match queue.lock() {
                        Ok(mut q) => q.pop(),
                        Err(_) => None,
                    };
                    let Some(job) = job else { break };
                    let outcome = run_job(&job);
                    if let Ok(mut r) = results.lock() {
                        r.push(outcome);
                    }
                }
            });
        }
    });
    let outcomes = match Arc::try_unwrap(results) {
        Ok(m) => m.into_inner().unwrap_or_else(|p| p.into_inner()),
        Err(shared) => shared.lock().map(|mut r| std::mem::take(&mut *r)).unwrap_or_default(),
    };
    let mut report = SecretReport { replays, ..SecretReport::default() };
    for outcome in outcomes {
        report.with_key += usize::from(outcome.sent_key);
        report.trace_bytes += outcome.trace_bytes;
        for problem in outcome.problems {
            report.leaks.push(Leak { fixture: outcome.label.clone(), problem });
        }
    }
    report.leaks.sort_by(|a, b| (&a.fixture, &a.problem).cmp(&(&b.fixture, &b.problem)));
    Ok(report)
}
