//! `cargo xtask fuzz`: the cargo-fuzz targets in `fuzz/` (their own workspace, excluded from
//! this one).
//!
//! - `cargo xtask fuzz [--target T] [--seconds N]` builds the targets with `cargo fuzz` and runs
//!   each (or `T`) for `N` seconds (default 60), starting from the committed seed corpus
//!   `fuzz/corpus/<T>/` (read only: new inputs go to `fuzz/target/corpus/<T>/`).
//! - `--smoke` builds every target and runs each for a few seconds (default 5).
//! - `--update-corpus` rewrites the `fixture-*` seeds of `fuzz/corpus/` from `fixtures/`.
//!
//! `cargo fuzz` needs the `cargo-fuzz` binary (`cargo install cargo-fuzz --locked`) and nightly
//! compiler flags; on the pinned stable toolchain they are unlocked with `RUSTC_BOOTSTRAP=1`
//! for the fuzz build only. CI does not install cargo-fuzz: the replay test below runs every
//! seed (and a bounded number of mutations of them) through the same target bodies
//! (`fuzz/src/harness.rs`) under plain `cargo test --workspace`.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{Error, Result};

// The target bodies, shared with the libFuzzer binaries.
#[allow(unreachable_pub, dead_code, reason = "the fuzz crate's public API, included here")]
#[path = "../../fuzz/src/harness.rs"]
mod harness;

pub use harness::TARGETS;

/// What `cargo xtask fuzz` should do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Build every target and run each briefly.
    pub smoke: bool,
    /// Only this target.
    pub target: Option<String>,
    /// Seconds per target.
    pub seconds: Option<u64>,
    /// Regenerate the fixture seeds instead of fuzzing.
    pub update_corpus: bool,
}

impl Options {
    /// Parses the arguments after `fuzz`.
    pub fn parse(args: &[String]) -> Result<Options> {
        let mut options = Options::default();
        let mut iter = args.iter();
        while let Some(flag) = iter.next() {
            match flag.as_str() {
                "--smoke" => options.smoke = true,
                "--update-corpus" => options.update_corpus = true,
                "--target" => {
                    let name = iter.next().ok_or_else(|| msg("--target needs a value"))?;
                    if !TARGETS.contains(&name.as_str()) {
                        return Err(msg(format!(
                            "unknown fuzz target `{name}` (targets: {})",
                            TARGETS.join(", ")
                        )));
                    }
                    options.target = Some(name.clone());
                }
                "--seconds" => {
                    let value = iter.next().ok_or_else(|| msg("--seconds needs a value"))?;
                    let seconds =
                        value.parse::<u64>().ok().filter(|s| *s > 0).ok_or_else(|| {
                            msg(format!("--seconds: not a positive number: {value}"))
                        })?;
                    options.seconds = Some(seconds);
                }
                other => return Err(msg(format!("unknown argument `{other}`"))),
            }
        }
        Ok(options)
    }
}

fn msg(text: impl Into<String>) -> Error {
    Error::Msg(text.into())
}

/// One target's run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// Target name.
    pub target: String,
    /// Executions reported by libFuzzer (`Done N runs`), if it finished.
    pub runs: Option<u64>,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// `None` if no crash, else the crash lines (panic message and artifact path).
    pub crash: Option<String>,
}

/// Runs `cargo xtask fuzz` at `root`: see the module docs.
pub fn run(root: &Path, options: &Options) -> Result<Vec<RunSummary>> {
    if options.update_corpus {
        let written = update_corpus(root)?;
        println!("fuzz: wrote {written} seed files under fuzz/corpus/");
        return Ok(Vec::new());
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let has_cargo_fuzz = Command::new(&cargo)
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_cargo_fuzz {
        return Err(msg("cargo-fuzz is not installed: run `cargo install cargo-fuzz --locked` \
             (the seed corpus replay runs without it: `cargo test -p xtask fuzz`)"));
    }
    let targets: Vec<&str> = match &options.target {
        Some(t) => vec![t.as_str()],
        None => TARGETS.to_vec(),
    };
    let seconds = options.seconds.unwrap_or(if options.smoke { 5 } else { 60 });
    let started = Instant::now();
    println!("==> cargo fuzz build ({})", if options.smoke { "all targets" } else { "targets" });
    let mut build = fuzz_command(&cargo, root, "build");
    if let [one] = targets.as_slice()
        && !options.smoke
    {
        build.arg(one);
    }
    let status = build.status().map_err(|e| msg(format!("cannot run cargo fuzz: {e}")))?;
    if !status.success() {
        return Err(msg(format!("cargo fuzz build exited with {status}")));
    }
    println!("==> built in {:.1}s", started.elapsed().as_secs_f64());
    let mut summaries = Vec::new();
    for target in targets {
        let summary = run_target(&cargo, root, target, seconds)?;
        let runs = summary.runs.map_or_else(|| "?".to_owned(), |r| r.to_string());
        match &summary.crash {
            None => println!("==> {target}: {runs} runs in {:.1}s, no crash", summary.seconds),
            Some(crash) => println!("==> {target}: CRASH after {:.1}s\n{crash}", summary.seconds),
        }
        summaries.push(summary);
    }
    println!("fuzz: done in {:.1}s", started.elapsed().as_secs_f64());
    let crashed: Vec<&str> =
        summaries.iter().filter(|s| s.crash.is_some()).map(|s| s.target.as_str()).collect();
    if crashed.is_empty() {
        Ok(summaries)
    } else {
        Err(msg(format!("fuzz: crashes in {} (inputs in fuzz/artifacts/)", crashed.join(", "))))
    }
}

/// `cargo fuzz <sub>` with the stable toolchain's nightly flags unlocked. cargo-fuzz's
/// default build is optimized with debug assertions and overflow checks on, and AddressSanitizer;
/// `build` and `run` must get the same flags, or `run` rebuilds.
fn fuzz_command(cargo: &str, root: &Path, sub: &str) -> Command {
    let mut command = Command::new(cargo);
    command.args(["fuzz", sub]).current_dir(root).env("RUSTC_BOOTSTRAP", "1");
    command
}

fn run_target(cargo: &str, root: &Path, target: &str, seconds: u64) -> Result<RunSummary> {
    let scratch = root.join("fuzz/target/corpus").join(target);
    std::fs::create_dir_all(&scratch).map_err(|e| Error::io(&scratch, e))?;
    let logs = root.join("fuzz/target/logs");
    std::fs::create_dir_all(&logs).map_err(|e| Error::io(&logs, e))?;
    let log_path = logs.join(format!("{target}.log"));
    let seeds = root.join("fuzz/corpus").join(target);
    println!("==> cargo fuzz run {target} ({seconds}s, log {})", log_path.display());
    let started = Instant::now();
    let mut child = fuzz_command(cargo, root, "run")
        .arg(target)
        .arg(&scratch)
        .arg(&seeds)
        .args([
            "--",
            &format!("-max_total_time={seconds}"),
            "-timeout=10",
            "-rss_limit_mb=2048",
            "-print_final_stats=1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| msg(format!("cannot run cargo fuzz: {e}")))?;
    let stdout = child.stdout.take();
    // libFuzzer reports on stderr; stdout is drained on a thread so neither pipe blocks.
    let drain = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(out) = stdout {
            for line in BufReader::new(out).lines().map_while(std::result::Result::ok) {
                text.push_str(&line);
                text.push('\n');
            }
        }
        text
    });
    let mut log = String::new();
    if let Some(err) = child.stderr.take() {
        for line in BufReader::new(err).lines().map_while(std::result::Result::ok) {
            log.push_str(&line);
            log.push('\n');
        }
    }
    let status = child.wait().map_err(|e| msg(format!("cargo fuzz run {target}: {e}")))?;
    log.push_str(&drain.join().unwrap_or_default());
    crate::write(&log_path, &log)?;
    let runs = log.lines().rev().find_map(|line| {
        let rest = line.strip_prefix("Done ")?;
        rest.split_whitespace().next()?.parse::<u64>().ok()
    });
    let crash = (!status.success()).then(|| {
        let interesting: Vec<&str> = log
            .lines()
            .filter(|l| {
                l.contains("panicked at")
                    || l.contains("assertion")
                    || l.contains("ERROR: libFuzzer")
                    || l.contains("ERROR: AddressSanitizer")
                    || l.contains("Test unit written to")
                    || l.contains("artifact_prefix")
            })
            .take(12)
            .collect();
        if interesting.is_empty() {
            format!("cargo fuzz exited with {status}; see {}", log_path.display())
        } else {
            interesting.join("\n")
        }
    });
    Ok(RunSummary {
        target: target.to_owned(),
        runs,
        seconds: started.elapsed().as_secs_f64(),
        crash,
    })
}

// -------------------------------------------------------------------------------------------
// Seed corpus
// -------------------------------------------------------------------------------------------

/// Every `.sse` body under `fixtures/<provider>/`, as `(scenario-file label, bytes)`, sorted.
fn provider_bodies(root: &Path, provider: harness::Provider) -> Result<Vec<(String, Vec<u8>)>> {
    bodies_with(root, provider.fixtures_name(), "sse")
}

/// Every body with extension `ext` under `fixtures/<name>/`, as `(label, bytes)`, sorted.
fn bodies_with(root: &Path, name: &str, ext: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let dir = root.join("fixtures").join(name);
    let mut out = Vec::new();
    for (scenario, path) in crate::subdirs(&dir)? {
        let entries = std::fs::read_dir(&path).map_err(|e| Error::io(&path, e))?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(std::result::Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == ext))
            .collect();
        files.sort();
        for file in files {
            let bytes = std::fs::read(&file).map_err(|e| Error::io(&file, e))?;
            let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("body");
            let label =
                if stem == "response" { scenario.clone() } else { format!("{scenario}-{stem}") };
            out.push((label, bytes));
        }
    }
    Ok(out)
}

/// Tool-call argument texts streamed by the fixtures (the fragments of each call joined).
fn argument_texts(bodies: &[(harness::Provider, Vec<u8>)]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (provider, body) in bodies {
        let events = harness::stream_events(*provider, body, 0, false);
        let mut calls: std::collections::BTreeMap<usize, String> = Default::default();
        for event in &events {
            match event {
                llm_core::AssistantEvent::ToolCallDelta { content_index, delta, .. } => {
                    calls.entry(*content_index).or_default().push_str(delta);
                }
                llm_core::AssistantEvent::ToolCallEnd { tool_call, .. } => {
                    out.insert(tool_call.arguments.to_string());
                }
                _ => {}
            }
        }
        out.extend(calls.into_values().filter(|s| !s.trim().is_empty()));
    }
    out
}

/// Hand-written argument texts for the partial-JSON parser's special cases.
const EXTRA_ARGUMENTS: &[&str] = &[
    r#"{"path":"C:\new\table.txt","content":"a\tb"}"#,
    r#"{"s":"\ud83d\ude00 \u00e9\u2019 \ud800 lone","t":"\"q\" \\ \/ \b\f\n\r\t"}"#,
    r#"{"n":[0,-0,1.5e10,-12.5e-3,1E+2,123456789012345678901234567890,1e999],"b":[true,false,null]}"#,
    r#"{"deep":[[[[[[[[{"a":[{"b":{"c":[1,2,{"d":"e"}]}}]}]]]]]]]],"empty":{},"arr":[]}"#,
    "{\"raw\":\"line\nbreak\ttab\u{1}ctl\",\"x\":1}",
    r#"{"a":1}{"b":2}"#,
    r#"  {"trailing":1} , "#,
    r#"{"unterminated":"abc\u12"#,
    r#"[1,2,{"not":"an object at the top"}]"#,
    r#"{"a":tru"#,
];

fn seed_file(dir: &Path, name: &str, header: &[u8], body: &[u8]) -> Result<()> {
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(body);
    let path = dir.join(name);
    std::fs::write(&path, bytes).map_err(|e| Error::io(&path, e))
}

/// FNV-1a: a stable hash for seed names and headers.
fn fnv(text: &str) -> u64 {
    text.bytes()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Rewrites the `fixture-*` and `extra-*` seeds of every target (other files, such as
/// crash regressions, are kept). Returns the number of files written.
pub fn update_corpus(root: &Path) -> Result<usize> {
    let corpus = root.join("fuzz/corpus");
    let mut written = 0usize;
    let mut all = Vec::new();
    for target in TARGETS {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        for entry in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
            let path = entry.map_err(|e| Error::io(&dir, e))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.starts_with("fixture-") || name.starts_with("extra-") {
                std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
            }
        }
    }
    for provider in harness::Provider::ALL {
        let dir = corpus.join(provider.target());
        for (label, body) in provider_bodies(root, provider)? {
            // Vary the chunking: byte 0 is the split seed (see harness::chunk_lengths), taken
            // from the name so that adding a fixture does not change the other seeds.
            let seed = [2 + (fnv(&label) % 12) as u8];
            seed_file(&dir, &format!("fixture-{label}"), &seed, &body)?;
            written += 1;
            all.push((provider, label, body));
        }
    }
    let sse = corpus.join("sse_decoder");
    for (provider, label, body) in &all {
        let name = format!("fixture-{}-{label}", provider.fixtures_name());
        // Default 16 MiB limit, except about one seed in five: a small limit (1 + 16 * 8 bytes).
        let hash = fnv(&name);
        let limit = if hash % 5 == 4 { 8 } else { 255 };
        let header = [2 + ((hash >> 8) % 12) as u8, limit];
        seed_file(&sse, &name, &header, body)?;
        written += 1;
    }
    let bodies: Vec<(harness::Provider, Vec<u8>)> =
        all.into_iter().map(|(p, _, body)| (p, body)).collect();
    let pj = corpus.join("partial_json");
    for text in argument_texts(&bodies) {
        let hash = fnv(&text);
        let name = format!("fixture-args-{:016x}", hash);
        seed_file(&pj, &name, &[2 + (hash % 12) as u8], text.as_bytes())?;
        written += 1;
    }
    for (i, text) in EXTRA_ARGUMENTS.iter().enumerate() {
        seed_file(&pj, &format!("extra-{i:02}"), &[1 + (i % 12) as u8], text.as_bytes())?;
        written += 1;
    }
    written += http_seeds(root, &corpus)?;
    Ok(written)
}

/// Error bodies in every provider's shape (each target gets all of them: a gateway in front
/// of one provider may answer in another's).
const HTTP_ERROR_BODIES: &[&str] = &[
    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}"#,
    r#"{"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}}"#,
    r#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
    r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
    r#"{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
    r#"[{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"34s"}]}}]"#,
    r#"{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT","details":[{"reason":"API_KEY_INVALID"}]}}"#,
    r#"{"object":"error","message":{"detail":[{"loc":["body"],"msg":"bad"}]},"type":"invalid_request_error","code":null}"#,
    r#"{"detail":"Unauthorized"}"#,
    r#"{"message":"Too many requests, please wait before trying again."}"#,
    r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"Input is too long for requested model."}"#,
    "<html><body><h1>502 Bad Gateway</h1></body></html>",
    "",
];

/// Headers of the error seeds: the server-asked waits in every form, and retry hints.
const HTTP_ERROR_HEADERS: &[&str] = &[
    "",
    "retry-after: 2",
    "retry-after-ms: 1500",
    "retry-after: 1e30",
    "retry-after: -5",
    "retry-after: 99999999999999999999",
    "date: Sun, 06 Nov 1994 08:49:37 GMT\nretry-after: Sun, 06 Nov 1994 08:49:39 GMT",
    "date: Sun, 06 Nov 1994 08:49:37 GMT\nretry-after: Sunday, 06-Nov-94 09:49:37 GMT",
    "retry-after: Sun Nov  6 08:49:37 1994",
    "x-should-retry: false",
    "x-should-retry: true\nretry-after: 0",
    "x-amzn-ErrorType: ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
    "x-note: caf\u{e9} \u{ff}",
];

/// Whole responses written verbatim (raw mode).
const HTTP_RAW_RESPONSES: &[&str] = &[
    "HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\nHTTP/1.1 429 Too Many\r\nretry-after: 1\r\ncontent-length: 2\r\n\r\n{}",
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\nfffffffffffffffff\r\nx\r\n0\r\n\r\n",
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 5\r\ncontent-length: 7\r\n\r\ndata:",
    "HTTP/1.1 500 Oops\r\nx-folded: a\r\n b\r\ncontent-length: 2\r\n\r\n{}",
    "HTTP/1.1 999 Whatever\r\ncontent-length: 0\r\n\r\n",
    "HTTP/1.0 503 Service Unavailable\r\nretry-after: 3\r\n\r\nbusy",
    "HTTP/1.1 200\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{\"ok\":true}",
    "HTTP/1.1 301 Moved\r\nlocation: http://127.0.0.1:9/elsewhere\r\ncontent-length: 0\r\n\r\n",
    "HTTP/2 200\r\n\r\n",
    "garbage\r\n\r\n",
];

/// The `http_<provider>` seeds: each fixture body as a 200 of the provider's content type
/// (chunked), the error bodies under each status and header set, and the raw responses.
fn http_seeds(root: &Path, corpus: &Path) -> Result<usize> {
    use harness::{BodyFraming, HTTP_CONTENT_TYPES, HTTP_STATUSES, HttpProvider};
    let index_of =
        |status: u16| HTTP_STATUSES.iter().position(|s| *s == status).map_or(0, |i| i as u8);
    let type_of =
        |ct: &str| HTTP_CONTENT_TYPES.iter().position(|c| *c == ct).map_or(0, |i| i as u8);
    let mut written = 0;
    for provider in HttpProvider::ALL {
        let dir = corpus.join(provider.target());
        let ext = if provider == HttpProvider::Bedrock { "eventstream" } else { "sse" };
        let stream_type = type_of(provider.stream_content_type());
        for (label, body) in bodies_with(root, provider.fixtures_name(), ext)? {
            let seed = 2 + (fnv(&label) % 12) as u8;
            let data = harness::http_structured(
                seed,
                index_of(200),
                BodyFraming::Chunked,
                stream_type,
                b"",
                &body,
            );
            std::fs::write(dir.join(format!("fixture-{label}")), data)
                .map_err(|e| Error::io(&dir, e))?;
            written += 1;
        }
        let statuses = [400u16, 401, 403, 404, 408, 409, 413, 429, 500, 503, 529, 599, 302, 999];
        // Each body twice and each header set at least twice, in different pairs, each pair
        // under one status of the list (the fuzzer combines them further).
        let pairs = 2 * HTTP_ERROR_BODIES.len().max(HTTP_ERROR_HEADERS.len());
        for n in 0..pairs {
            let i = n % HTTP_ERROR_BODIES.len();
            let j = (n + 5 * (n / HTTP_ERROR_HEADERS.len())) % HTTP_ERROR_HEADERS.len();
            let (Some(body), Some(headers)) = (HTTP_ERROR_BODIES.get(i), HTTP_ERROR_HEADERS.get(j))
            else {
                continue;
            };
            let status = statuses.get((i * 7 + j) % statuses.len()).copied().unwrap_or(429);
            let framing = match (i + j) % 4 {
                0 => BodyFraming::Length,
                1 => BodyFraming::Chunked,
                2 => BodyFraming::Close,
                _ => BodyFraming::ShortBody,
            };
            let data = harness::http_structured(
                (i * 13 + j) as u8,
                index_of(status),
                framing,
                type_of("application/json"),
                headers.as_bytes(),
                body.as_bytes(),
            );
            let path = dir.join(format!("extra-error-{i:02}-{j:02}"));
            std::fs::write(&path, data).map_err(|e| Error::io(&path, e))?;
            written += 1;
        }
        for (i, response) in HTTP_RAW_RESPONSES.iter().enumerate() {
            let path = dir.join(format!("extra-raw-{i:02}"));
            std::fs::write(&path, harness::http_raw(i as u8, response.as_bytes()))
                .map_err(|e| Error::io(&path, e))?;
            written += 1;
        }
    }
    Ok(written)
}

/// Every file of `fuzz/corpus/<target>/`, sorted by name.
pub fn corpus_files(root: &Path, target: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let dir = root.join("fuzz/corpus").join(target);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
        let path = entry.map_err(|e| Error::io(&dir, e))?.path();
        if !path.is_file() {
            continue;
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        out.push((name, bytes));
    }
    out.sort();
    Ok(out)
}

/// Runs every seed of `target` through its target body (no memory checks: those need the
/// fuzz crate's counting allocator), then `mutations` pseudo-random mutations of them.
/// Returns the number of inputs run. A failing input panics with its name.
pub fn replay(root: &Path, target: &str, mutations: usize) -> Result<usize> {
    let seeds = corpus_files(root, target)?;
    if seeds.is_empty() {
        return Err(msg(format!("fuzz/corpus/{target}/ is empty")));
    }
    for (name, data) in &seeds {
        run_one(target, &format!("fuzz/corpus/{target}/{name}"), data);
    }
    let mut rng = 0x2545_F491_4F6C_DD1D_u64;
    let mut next = move |n: usize| -> usize {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        usize::try_from(rng % n.max(1) as u64).unwrap_or(0)
    };
    for round in 0..mutations {
        let Some((name, seed)) = seeds.get(next(seeds.len())) else { continue };
        let mut data = seed.clone();
        for _ in 0..1 + next(4) {
            mutate(&mut data, &mut next);
        }
        run_one(target, &format!("mutation {round} of fuzz/corpus/{target}/{name}"), &data);
    }
    Ok(seeds.len() + mutations)
}

fn run_one(target: &str, label: &str, data: &[u8]) {
    let outcome = std::panic::catch_unwind(|| harness::run(target, data, None));
    match outcome {
        Ok(true) => {}
        Ok(false) => panic!("unknown fuzz target {target}"),
        Err(_) => panic!(
            "fuzz target {target} failed on {label} ({} bytes); input (hex): {}",
            data.len(),
            data.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ),
    }
}

/// One byte-level mutation: flip, set, insert, remove, duplicate a range, or truncate.
fn mutate(data: &mut Vec<u8>, next: &mut impl FnMut(usize) -> usize) {
    const INTERESTING: &[u8] = b"\n\r:{}[]\",\\0 \xff\xc3\xef";
    let len = data.len();
    let at = next(len + 1);
    match next(6) {
        0 if at < len => {
            if let Some(b) = data.get_mut(at) {
                *b ^= 1 << next(8);
            }
        }
        1 if at < len => {
            if let (Some(b), Some(&v)) =
                (data.get_mut(at), INTERESTING.get(next(INTERESTING.len())))
            {
                *b = v;
            }
        }
        2 => {
            let v = INTERESTING.get(next(INTERESTING.len())).copied().unwrap_or(b'\n');
            data.insert(at.min(len), v);
        }
        3 if at < len => {
            let end = (at + 1 + next(16)).min(len);
            data.drain(at..end);
        }
        4 if at < len => {
            let end = (at + 1 + next(64)).min(len);
            let piece: Vec<u8> = data.get(at..end).map(<[u8]>::to_vec).unwrap_or_default();
            let to = next(data.len() + 1);
            data.splice(to..to, piece);
        }
        _ => data.truncate(at.max(1)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    /// The CI fuzz step: every seed of every target, plus 300 mutations each, through the
    /// target bodies (see the module docs for why this and not `cargo fuzz` in CI).
    #[test]
    fn seed_corpora_replay_through_every_target() {
        let root = crate::workspace_root();
        for target in TARGETS {
            let runs = replay(&root, target, 300).unwrap();
            assert!(runs > 300, "{target}: only {runs} inputs");
        }
    }

    /// Every target has a libFuzzer binary, a `[[bin]]` entry and a corpus folder.
    #[test]
    fn every_target_is_declared() {
        let root = crate::workspace_root();
        let manifest = std::fs::read_to_string(root.join("fuzz/Cargo.toml")).unwrap();
        for target in TARGETS {
            assert!(root.join(format!("fuzz/fuzz_targets/{target}.rs")).is_file(), "{target}");
            assert!(manifest.contains(&format!("name = \"{target}\"")), "{target}");
            assert!(root.join(format!("fuzz/corpus/{target}")).is_dir(), "{target}");
        }
    }

    /// The HTTP targets are not vacuous: a recorded stream served as a 200 streams to the end,
    /// and an error status with a short wait is retried once, after that wait.
    #[test]
    fn http_targets_reach_the_decoder_and_the_retry_path() {
        use harness::{BodyFraming, HttpProvider};
        let root = crate::workspace_root();
        for provider in HttpProvider::ALL {
            let seeds = corpus_files(&root, provider.target()).unwrap();
            let (_, text_only) =
                seeds.iter().find(|(name, _)| name == "fixture-text-only").unwrap();
            let (events, attempts) = harness::http_exchange(provider, text_only, None).unwrap();
            assert!(
                matches!(events.last(), Some(llm_core::AssistantEvent::Done { .. })),
                "{provider:?}: {:?}",
                events.last()
            );
            assert_eq!(attempts, 1);
            let status_429 = harness::HTTP_STATUSES.iter().position(|s| *s == 429).unwrap();
            let data = harness::http_structured(
                0,
                status_429 as u8,
                BodyFraming::Length,
                2,
                b"retry-after: 3",
                b"{}",
            );
            let (events, attempts) = harness::http_exchange(provider, &data, None).unwrap();
            let Some(llm_core::AssistantEvent::Error { error, .. }) = events.last() else {
                panic!("{provider:?}: {:?}", events.last())
            };
            assert_eq!(
                (error.kind, error.status, attempts),
                (llm_core::ErrorKind::RateLimited, Some(429), 2),
                "{provider:?}"
            );
        }
    }

    #[test]
    fn parses_options() {
        let args = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let o = Options::parse(&args("--smoke --target sse_decoder --seconds 3")).unwrap();
        assert!(o.smoke);
        assert_eq!(o.target.as_deref(), Some("sse_decoder"));
        assert_eq!(o.seconds, Some(3));
        assert!(Options::parse(&args("--target nope")).is_err());
        assert!(Options::parse(&args("--seconds 0")).is_err());
        assert!(Options::parse(&args("--bogus")).is_err());
    }

    #[test]
    fn chunkings_cover_the_input() {
        let text = "a\u{e9}\u{1F600}bc\u{4E2D}d";
        for seed in 0..=255u8 {
            assert_eq!(harness::chunks(text.as_bytes(), seed).concat(), text.as_bytes());
            assert_eq!(harness::str_chunks(text, seed).concat(), text);
        }
    }
}
