//! `cargo xtask bench`: every provider end to end on generated streams.
//!
//! Each case streams a generated response through the provider's real HTTP client from a
//! minimal loopback server in this file (one `std` thread that writes the body as it is
//! generated, so the server holds no copy of it), and consumes the `AssistantStream` as a
//! UI would: every event is dropped once read, and in the `partial` mode the open block is
//! read from `AssistantStream::partial()` after every delta.
//!
//! Every case runs in a fresh child process (`xtask bench-case ...`), so its peak resident
//! set is its own. CPU time is the client thread's (`/proc/thread-self/schedstat`, in ns;
//! `getrusage` would need `unsafe` FFI, which the workspace forbids): the
//! HTTP client, SSE decoding, the provider's decoder, the assembler and the consumer, not
//! the server thread. The floor is the CPU time of `serde_json` parsing every event's
//! `data` of the same wire bytes into a `Value`, once. The transport is the CPU time of
//! receiving the same response with the same HTTP client and cutting it into events with
//! the provider's framing, parsing nothing: no client that uses HTTP and serde_json can
//! cost less than transport + floor.
//!
//! Streams (100-byte deltas): `text` (one text block), `one-call` (one `write_file` call),
//! `three-calls` (three calls in a row, a third of the bytes each). Sizes count argument
//! (or text) bytes as sent: the arguments' JSON text.
//!
//! With `--peer PATH`, the Chat Completions and Mistral rows are also streamed by an outside
//! program (`PATH async-openai chat-large ADDR BYTES EXPECT`, printing `cpu_ns peak_bytes`
//! measured as `bench-case` does), events only, and by `bench-case ... 1 ADDR` (partial
//! reads), the two alternating, both from one `server::BodyServer` in the bench process
//! serving the same bytes, so only the client differs; a second table gives their ratio.

mod case;
pub mod charts;
pub mod concurrent;
mod content;
mod server;

use std::fmt::Write as _;
use std::process::Command;

pub use case::run_case;
pub(crate) use case::thread_cpu_ns;
use case::{Measure, Mode, floor_ns};
pub use server::serve_until_stdin_ends;

use crate::providers::BENCHED as PROVIDERS;
use crate::{Error, Result};

const MIB: usize = 1024 * 1024;
/// Bytes per streamed delta.
const DELTA: usize = 100;
/// The server writes HTTP chunks of at least this size.
const CHUNK: usize = 16 * 1024;
/// Pieces of a value sent whole in one event (Responses `.done`, Gemini `functionCall`).
const PIECE: usize = 64 * 1024;
/// The SSE event limit for the run: a 16 MiB value sent whole needs more than the
/// default 16 MiB.
const MAX_EVENT_BYTES: usize = 64 * MIB;
/// How long the server waits for the client to connect, send or read.
const IO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
/// Text bytes before the call in a `Scenario::Turn`.
const TURN_TEXT: usize = 600;

/// What a case streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// One text block.
    Text,
    /// One `write_file` call.
    OneCall,
    /// Three `write_file` calls, a third of the bytes each.
    ThreeCalls,
    /// A model turn as agents see it: text of `TURN_TEXT` bytes, then one `write_file`
    /// call (the concurrent bench's stream; not in `ALL`).
    Turn,
}

impl Scenario {
    /// The three streams of the table.
    pub const ALL: [Scenario; 3] = [Scenario::Text, Scenario::OneCall, Scenario::ThreeCalls];

    fn name(self) -> &'static str {
        match self {
            Scenario::Text => "text",
            Scenario::OneCall => "one-call",
            Scenario::ThreeCalls => "three-calls",
            Scenario::Turn => "turn",
        }
    }

    fn parse(name: &str) -> Result<Self> {
        Scenario::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| Error::Msg(format!("unknown scenario `{name}`")))
    }
}

/// A wire format the bench generates (`crate::providers::BENCH_FORMATS` names each
/// provider's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchFormat {
    /// Anthropic Messages SSE.
    Anthropic,
    /// OpenAI Chat Completions SSE.
    OpenAiCompletions,
    /// OpenAI Responses SSE.
    OpenAiResponses,
    /// Gemini `streamGenerateContent` SSE.
    Google,
    /// Mistral chat completions SSE.
    Mistral,
    /// Bedrock ConverseStream (AWS event stream).
    Bedrock,
    /// The format `cargo xtask new-provider` scaffolds (its crate's `stream.rs`).
    Scaffold,
}

/// The whole generated body of `scenario` at `size` bytes in `format`, and its content type.
pub fn generated_body(
    format: BenchFormat,
    scenario: Scenario,
    size: usize,
) -> Result<(Vec<u8>, &'static str)> {
    let (mut body, _) = content::wire_format(format, "bench", scenario, size, None)?;
    let mut bytes = Vec::new();
    while body.fill(&mut bytes, usize::MAX) {}
    Ok((bytes, body.content_type))
}

/// The text, or each call's arguments, that [`generated_body`] streams: `(call index or
/// `None` for text, the text or the arguments' JSON text)`.
pub fn generated_content(scenario: Scenario, size: usize) -> Vec<(Option<usize>, String)> {
    content::sources(scenario, size)
        .into_iter()
        .map(|(call, target)| {
            let mut source = content::Source::new(call, target);
            let mut text = String::new();
            while let Some(piece) = source.next_piece(PIECE) {
                text.push_str(&piece);
            }
            (call, text)
        })
        .collect()
}

/// `cargo xtask bench` options.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only these providers (fixture folder names).
    pub provider: Option<Vec<String>>,
    /// Only these scenarios.
    pub scenario: Option<Vec<Scenario>>,
    /// Stream sizes in MiB.
    pub sizes: Vec<usize>,
    /// Runs per case (the minimum CPU time and the largest peak are kept).
    pub reps: usize,
    /// Where to draw the table as charts (`--svg DIR`).
    pub svg: Option<std::path::PathBuf>,
    /// The peer program streaming the Chat Completions and Mistral rows (`--peer PATH`).
    pub peer: Option<std::path::PathBuf>,
}

impl Options {
    /// Parses `[--provider NAME,..] [--scenario S,..] [--sizes 1,4,16] [--reps N] [--svg DIR]
    /// [--peer PATH]`.
    pub fn parse(args: &[String]) -> Result<Self> {
        let mut options = Options {
            provider: None,
            scenario: None,
            sizes: vec![1, 4, 16],
            reps: 3,
            svg: None,
            peer: None,
        };
        let mut iter = args.iter();
        while let Some(flag) = iter.next() {
            let value =
                iter.next().ok_or_else(|| Error::Msg(format!("{flag} needs a value")))?.as_str();
            match flag.as_str() {
                "--provider" => {
                    options.provider =
                        Some(value.split(',').map(|p| p.trim().to_owned()).collect());
                }
                "--scenario" => {
                    options.scenario = Some(
                        value
                            .split(',')
                            .map(|s| Scenario::parse(s.trim()))
                            .collect::<Result<_>>()?,
                    );
                }
                "--sizes" => {
                    options.sizes = value
                        .split(',')
                        .map(|s| s.trim().parse::<usize>())
                        .collect::<std::result::Result<_, _>>()
                        .map_err(|e| Error::Msg(format!("--sizes: {e}")))?;
                }
                "--reps" => {
                    options.reps = value.parse().map_err(|e| Error::Msg(format!("--reps: {e}")))?;
                }
                "--svg" => options.svg = Some(std::path::PathBuf::from(value)),
                "--peer" => options.peer = Some(std::path::PathBuf::from(value)),
                other => return Err(Error::Msg(format!("unknown bench argument `{other}`"))),
            }
        }
        if options.sizes.is_empty() || options.reps == 0 {
            return Err(Error::Msg("bench needs at least one size and one rep".into()));
        }
        Ok(options)
    }
}

/// Runs one case `reps` times, each in a fresh process: the minimum CPU time and the
/// largest peak.
fn measure(
    name: &str,
    scenario: Scenario,
    size: usize,
    mode: Mode,
    reps: usize,
) -> Result<Measure> {
    let exe = std::env::current_exe().map_err(|e| Error::Msg(format!("current_exe: {e}")))?;
    let args = ["bench-case", name, scenario.name(), &size.to_string(), mode.arg()];
    measure_child(&exe, &args, &format!("{name} {} {} MiB", scenario.name(), size / MIB), reps)
}

/// Runs `program args` `reps` times; each prints `cpu_ns peak_bytes`: the minimum CPU time
/// and the largest peak.
fn measure_child(
    program: &std::path::Path,
    args: &[&str],
    what: &str,
    reps: usize,
) -> Result<Measure> {
    let mut best: Option<Measure> = None;
    for _ in 0..reps {
        let output = Command::new(program)
            .args(args)
            .output()
            .map_err(|e| Error::Msg(format!("cannot run {}: {e}", program.display())))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            return Err(Error::Msg(format!(
                "{what}: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let mut fields = stdout.split_whitespace().map(str::parse::<u64>);
        let (Some(Ok(cpu_ns)), Some(Ok(peak_bytes)), None) =
            (fields.next(), fields.next(), fields.next())
        else {
            return Err(Error::Msg(format!("{what}: unexpected output `{stdout}`")));
        };
        let measure = Measure { cpu_ns, peak_bytes };
        best = Some(best.map_or(measure, |b| b.best(measure)));
    }
    best.ok_or_else(|| Error::Msg("no run".into()))
}

/// What one size of one row measured.
#[derive(Debug, Clone, Copy)]
struct Cell {
    /// serde_json parsing every event once, ns.
    floor: u64,
    /// HTTP and framing only.
    transport: Measure,
    /// Events read, no partial reads.
    plain: Measure,
    /// A partial read after every delta.
    partial: Measure,
}

/// One row of the table: a provider and a scenario at every size.
#[derive(Debug)]
struct Row {
    provider: &'static str,
    scenario: Scenario,
    /// One cell per size.
    cells: Vec<Result<Cell>>,
    /// Against the peer program at each size (`--peer`, [`PEER_PROVIDERS`]).
    peer: Option<Vec<Result<PeerCell>>>,
}

/// One size against the peer program, both clients streaming from the same out-of-process
/// [`server::BodyServer`].
#[derive(Debug, Clone, Copy)]
struct PeerCell {
    /// clawcall with a partial read after every delta.
    partial: Measure,
    /// The peer's events-only stream.
    peer: Measure,
}

/// The providers whose streams the peer program reads: Chat Completions-shaped chunks.
const PEER_PROVIDERS: [&str; 2] = ["openai-completions", "mistral"];

/// What the peer checks a stream against: `text=N` (the text's length) or `calls=N0,..`
/// (call `k`'s `content` length; its path is `src/gen_k.rs`).
fn peer_expect(scenario: Scenario, size: usize) -> String {
    let lens: Vec<String> = content::sources(scenario, size)
        .into_iter()
        .map(|(call, target)| content::Source::expected_content_len(call, target).to_string())
        .collect();
    if scenario == Scenario::Text {
        format!("text={}", lens.join(","))
    } else {
        format!("calls={}", lens.join(","))
    }
}

/// clawcall's partial case and the peer program's stream of `size` bytes from `server`,
/// `reps` times each in fresh processes, alternating so both see the same load.
fn measure_peer(
    peer: &std::path::Path,
    server: &server::BodyServer,
    name: &str,
    scenario: Scenario,
    size: usize,
    reps: usize,
) -> Result<PeerCell> {
    let exe = std::env::current_exe().map_err(|e| Error::Msg(format!("current_exe: {e}")))?;
    let addr = server.addr.to_string();
    let size_arg = size.to_string();
    let ours = ["bench-case", name, scenario.name(), &size_arg, Mode::Partial.arg(), &addr];
    let theirs = ["async-openai", "chat-large", &addr, &size_arg, &peer_expect(scenario, size)];
    let what = format!("{name} {} {} MiB", scenario.name(), size / MIB);
    let mut best: Option<PeerCell> = None;
    for _ in 0..reps {
        let partial = measure_child(&exe, &ours, &format!("clawcall {what}"), 1)?;
        let peer = measure_child(peer, &theirs, &format!("async-openai {what}"), 1)?;
        best = Some(match best {
            None => PeerCell { partial, peer },
            Some(b) => PeerCell { partial: b.partial.best(partial), peer: b.peer.best(peer) },
        });
    }
    best.ok_or_else(|| Error::Msg("no run".into()))
}

fn ms_per_mib(ns: u64, size_mib: usize) -> f64 {
    ns as f64 / 1e6 / size_mib.max(1) as f64
}

fn ratio(a: &Result<Cell>, b: &Result<Cell>) -> String {
    match (a, b) {
        (Ok(big), Ok(small)) if small.partial.cpu_ns > 0 => {
            format!("{:.2}", big.partial.cpu_ns as f64 / small.partial.cpu_ns as f64)
        }
        _ => "-".into(),
    }
}

fn render(rows: &[Row], sizes: &[usize]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "CPU ms per MiB of argument/text bytes (client thread): floor = serde_json parse of the wire events into Value, once; transport = the same HTTP client and framing, nothing parsed; plain = reading events only; partial = AssistantStream::partial() read after every delta."
    );
    let mut head = "| provider | stream |".to_owned();
    let mut rule = "|---|---|".to_owned();
    for size in sizes {
        let _ = write!(head, " {size} MiB floor / transport / plain / partial |");
        rule.push_str("---|");
    }
    for pair in sizes.windows(2) {
        if let [a, b] = pair {
            let _ = write!(head, " partial {b}/{a} |");
            rule.push_str("---|");
        }
    }
    if let Some(last) = sizes.last() {
        let _ = write!(
            head,
            " partial overhead at {last} MiB | plain / floor at {last} MiB | (floor + transport) / floor at {last} MiB | peak RSS at {last} MiB (limit 2x+16) |"
        );
        rule.push_str("---|---|---|---|");
    }
    let _ = writeln!(out, "{head}\n{rule}");
    for row in rows {
        let mut line = format!("| {} | {} |", row.provider, row.scenario.name());
        for (cell, size) in row.cells.iter().zip(sizes) {
            match cell {
                Ok(cell) => {
                    let _ = write!(
                        line,
                        " {:.1} / {:.1} / {:.1} / {:.1} |",
                        ms_per_mib(cell.floor, *size),
                        ms_per_mib(cell.transport.cpu_ns, *size),
                        ms_per_mib(cell.plain.cpu_ns, *size),
                        ms_per_mib(cell.partial.cpu_ns, *size)
                    );
                }
                Err(e) => {
                    let _ = write!(line, " failed: {e} |");
                }
            }
        }
        for pair in row.cells.windows(2) {
            if let [small, big] = pair {
                let _ = write!(line, " {} |", ratio(big, small));
            }
        }
        if let (Some(Ok(cell)), Some(size)) = (row.cells.last(), sizes.last()) {
            let limit = 2 * (*size as u64) * MIB as u64 + 16 * MIB as u64;
            let peak = cell.plain.peak_bytes.max(cell.partial.peak_bytes);
            let floor = cell.floor.max(1) as f64;
            let _ = write!(
                line,
                " {:+.0}% | {:.2} | {:.2} | {:.1} MiB{} |",
                (cell.partial.cpu_ns as f64 / cell.plain.cpu_ns.max(1) as f64 - 1.0) * 100.0,
                cell.plain.cpu_ns as f64 / floor,
                (cell.floor + cell.transport.cpu_ns) as f64 / floor,
                peak as f64 / MIB as f64,
                if peak > limit { " (over)" } else { "" }
            );
        } else {
            line.push_str(" - | - | - | - |");
        }
        let _ = writeln!(out, "{line}");
    }
    if rows.iter().any(|r| r.peer.is_some()) {
        out.push_str(&render_peer(rows, sizes));
    }
    out
}

/// The table against the peer program: clawcall partial and the peer's events-only stream,
/// both from the same out-of-process server, and their ratio at each size.
fn render_peer(rows: &[Row], sizes: &[usize]) -> String {
    let mut out = String::from(
        "\nAgainst async-openai (the peer program: events only, argument fragments concatenated per call and parsed once at the end), both streaming from one bench-serve server in the bench process; CPU ms per MiB (client thread):\n",
    );
    let mut head = "| provider | stream |".to_owned();
    let mut rule = "|---|---|".to_owned();
    for size in sizes {
        let _ = write!(head, " {size} MiB clawcall partial / async-openai | ratio at {size} MiB |");
        rule.push_str("---|---|");
    }
    if let Some(last) = sizes.last() {
        let _ = write!(head, " peak RSS at {last} MiB clawcall / async-openai |");
        rule.push_str("---|");
    }
    let _ = writeln!(out, "{head}\n{rule}");
    for row in rows {
        let Some(peer) = &row.peer else { continue };
        let mut line = format!("| {} | {} |", row.provider, row.scenario.name());
        for (cell, size) in peer.iter().zip(sizes) {
            match cell {
                Ok(cell) => {
                    let _ = write!(
                        line,
                        " {:.1} / {:.1} | {:.2} |",
                        ms_per_mib(cell.partial.cpu_ns, *size),
                        ms_per_mib(cell.peer.cpu_ns, *size),
                        cell.partial.cpu_ns as f64 / cell.peer.cpu_ns.max(1) as f64
                    );
                }
                Err(e) => {
                    let _ = write!(line, " failed: {e} | - |");
                }
            }
        }
        match peer.last() {
            Some(Ok(cell)) => {
                let _ = write!(
                    line,
                    " {:.1} / {:.1} MiB |",
                    cell.partial.peak_bytes as f64 / MIB as f64,
                    cell.peer.peak_bytes as f64 / MIB as f64
                );
            }
            _ => line.push_str(" - |"),
        }
        let _ = writeln!(out, "{line}");
    }
    out
}

/// `cargo xtask bench`: prints the table (see the module docs).
pub fn run(options: &Options) -> Result<String> {
    let mut rows = Vec::new();
    for entry in PROVIDERS {
        if options.provider.as_ref().is_some_and(|p| !p.iter().any(|p| p == entry.name)) {
            continue;
        }
        for scenario in Scenario::ALL {
            if options.scenario.as_ref().is_some_and(|s| !s.contains(&scenario)) {
                continue;
            }
            let mut cells = Vec::new();
            for &size_mib in &options.sizes {
                let size = size_mib * MIB;
                let cell = (|| {
                    let floor = (0..options.reps)
                        .map(|_| floor_ns(entry.name, scenario, size))
                        .collect::<Result<Vec<_>>>()?
                        .into_iter()
                        .min()
                        .unwrap_or_default();
                    let measure = |mode| measure(entry.name, scenario, size, mode, options.reps);
                    Ok(Cell {
                        floor,
                        transport: measure(Mode::Transport)?,
                        plain: measure(Mode::Plain)?,
                        partial: measure(Mode::Partial)?,
                    })
                })();
                match &cell {
                    Ok(cell) => eprintln!(
                        "{} {} {size_mib} MiB: floor {:.1} ms, transport {:.1} ms, plain {:.1} ms, partial {:.1} ms, peak {:.1} MiB",
                        entry.name,
                        scenario.name(),
                        cell.floor as f64 / 1e6,
                        cell.transport.cpu_ns as f64 / 1e6,
                        cell.plain.cpu_ns as f64 / 1e6,
                        cell.partial.cpu_ns as f64 / 1e6,
                        cell.plain.peak_bytes.max(cell.partial.peak_bytes) as f64 / MIB as f64
                    ),
                    Err(e) => eprintln!("{} {} {size_mib} MiB: {e}", entry.name, scenario.name()),
                }
                cells.push(cell);
            }
            let peer = match &options.peer {
                Some(peer) if PEER_PROVIDERS.contains(&entry.name) => {
                    Some(peer_row(peer, entry.name, scenario, options))
                }
                _ => None,
            };
            rows.push(Row { provider: entry.name, scenario, cells, peer });
        }
    }
    if let Some(dir) = &options.svg {
        for path in charts::write_all(dir, &cpu_charts(&rows, &options.sizes))? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(render(&rows, &options.sizes))
}

/// The peer program's stream at every size, from one [`server::BodyServer`].
fn peer_row(
    peer: &std::path::Path,
    name: &str,
    scenario: Scenario,
    options: &Options,
) -> Vec<Result<PeerCell>> {
    let server = match server::BodyServer::start(name, scenario) {
        Ok(server) => server,
        Err(e) => {
            let e = e.to_string();
            return options.sizes.iter().map(|_| Err(Error::Msg(e.clone()))).collect();
        }
    };
    options
        .sizes
        .iter()
        .map(|&size_mib| {
            let measure = measure_peer(peer, &server, name, scenario, size_mib * MIB, options.reps);
            match &measure {
                Ok(m) => eprintln!(
                    "{name} {} {size_mib} MiB from bench-serve: partial {:.1} ms, async-openai {:.1} ms, peak {:.1} / {:.1} MiB",
                    scenario.name(),
                    m.partial.cpu_ns as f64 / 1e6,
                    m.peer.cpu_ns as f64 / 1e6,
                    m.partial.peak_bytes as f64 / MIB as f64,
                    m.peer.peak_bytes as f64 / MIB as f64
                ),
                Err(e) => eprintln!("{name} {} {size_mib} MiB: {e}", scenario.name()),
            }
            measure
        })
        .collect()
}

/// The table as charts: CPU per MiB against the stream's size, plain and with partial
/// reads, one series per provider and stream.
fn cpu_charts(rows: &[Row], sizes: &[usize]) -> Vec<(&'static str, charts::Chart)> {
    let series = |pick: fn(&Cell) -> u64| {
        rows.iter()
            .map(|row| {
                let points = row
                    .cells
                    .iter()
                    .zip(sizes)
                    .filter_map(|(cell, &size)| {
                        let cell = cell.as_ref().ok()?;
                        Some((size as f64, ms_per_mib(pick(cell), size)))
                    })
                    .collect();
                (format!("{} {}", row.provider, row.scenario.name()), points)
            })
            .collect()
    };
    let chart = |title: &str, series| charts::Chart {
        title: title.to_owned(),
        x_label: "stream size, MiB".to_owned(),
        y_label: "client CPU, ms per MiB".to_owned(),
        x_log: true,
        series,
    };
    vec![
        ("cpu-per-mib-plain.svg", chart("CPU per MiB, events only", series(|c| c.plain.cpu_ns))),
        (
            "cpu-per-mib-partial.svg",
            chart("CPU per MiB, a partial read after every delta", series(|c| c.partial.cpu_ns)),
        ),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn the_peer_is_told_the_lengths_the_stream_decodes_to() {
        let size = 300_000;
        for scenario in Scenario::ALL {
            // The oracle: the generated text, or each call's arguments parsed by serde_json.
            let lens: Vec<String> = generated_content(scenario, size)
                .into_iter()
                .map(|(call, text)| match call {
                    None => text.len().to_string(),
                    Some(k) => {
                        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
                        assert_eq!(value["path"], format!("src/gen_{k}.rs"));
                        value["content"].as_str().unwrap().len().to_string()
                    }
                })
                .collect();
            let kind = if scenario == Scenario::Text { "text" } else { "calls" };
            assert_eq!(peer_expect(scenario, size), format!("{kind}={}", lens.join(",")));
        }
    }

    #[test]
    fn bench_options_take_a_peer_program() {
        let args: Vec<String> = [
            "--peer",
            "/p/clawcall-peers",
            "--sizes",
            "1,4",
            "--provider",
            "openai-completions,mistral",
            "--scenario",
            "text,one-call",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let options = Options::parse(&args).unwrap();
        assert_eq!(options.peer.as_deref(), Some(std::path::Path::new("/p/clawcall-peers")));
        assert_eq!(options.sizes, [1, 4]);
        assert_eq!(options.provider.unwrap(), ["openai-completions", "mistral"]);
        assert_eq!(options.scenario.unwrap(), [Scenario::Text, Scenario::OneCall]);
        assert!(Options::parse(&["--scenario".to_owned(), "text,nope".to_owned()]).is_err());
        assert!(Options::parse(&["--peer".to_owned()]).is_err());
    }
}
