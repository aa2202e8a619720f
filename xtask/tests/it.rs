//! xtask's checks as tests, so plain `cargo test --workspace` enforces them:
//! the whole conformance suite, the fault matrix, cancellation at every event
//! index, the secret scan (and that it finds a planted leak), tidy, the
//! runner's sensitivity to one-byte changes of a fixture, and the new-provider
//! scaffold (its files, and its crate's checks in a scratch workspace, and the bench's
//! stream of its format through its decoder).
#![allow(clippy::disallowed_methods, reason = "tests read their own process environment")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]

use std::path::{Path, PathBuf};

use serde_json::Value;
use xtask::conformance::{self, Options, Outcome};
use xtask::{cancel_sweep, faults, new_provider, secrets, tidy, workspace_root};

/// A fresh temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> TempDir {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let dir =
            std::env::temp_dir().join(format!("xtask-{label}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

#[test]
fn conformance_suite_passes() {
    let report =
        conformance::run(&conformance::options_from_env(workspace_root().join("fixtures")))
            .unwrap();
    let text = report.render();
    println!("{text}");
    assert_eq!(report.failed(), 0, "conformance failures:\n{text}");
    assert!(text.trim_end().ends_with(&report.summary()));
}

#[test]
fn fault_matrix_passes() {
    let report = faults::run(&faults::options(workspace_root().join("fixtures"))).unwrap();
    let text = report.render();
    println!("{text}");
    assert_eq!(report.failed(), 0, "fault matrix failures:\n{text}");
    assert_eq!(report.cells.len(), report.rows.len() * report.providers.len());
    assert_eq!(report.providers.len(), conformance::PROVIDERS.len());
}

#[test]
fn cancellation_at_every_event_index() {
    let report = cancel_sweep::run(&faults::options(workspace_root().join("fixtures"))).unwrap();
    let text = report.render();
    println!("{text}");
    assert_eq!(report.failed(), 0, "cancellation sweep failures:\n{text}");
    // The sweep cancels the parallel-tool fixtures: every provider that declares them.
    let parallel = conformance::PROVIDERS
        .iter()
        .filter(|e| e.info.capabilities.contains(llm_core::Capability::ParallelToolCalls));
    for entry in parallel {
        for what in ["stream", "agent"] {
            assert!(
                report
                    .lines
                    .iter()
                    .any(|l| l.provider == entry.name && l.what.starts_with(what) && l.indexes > 0),
                "{} has no {what} sweep:\n{text}",
                entry.name
            );
        }
    }
}

#[test]
fn secrets_never_leak() {
    let report = secrets::run(&faults::options(workspace_root().join("fixtures"))).unwrap();
    let text = report.render();
    println!("{text}");
    assert_eq!(report.failed(), 0, "{text}");
    assert!(report.with_key > 100, "{text}");
}

/// A provider that logs the key it is given: the scan must catch it.
struct Leaky(llm_anthropic::AnthropicProvider);

impl llm_core::Provider for Leaky {
    fn api(&self) -> &str {
        llm_core::Provider::api(&self.0)
    }

    fn stream(
        &self,
        model: &llm_core::Model,
        context: &llm_core::Context,
        options: &llm_core::StreamOptions,
    ) -> llm_core::AssistantStream {
        let key = options.api_key.as_ref().map(|k| k.expose().to_owned()).unwrap_or_default();
        tracing::trace!(key = %key, "about to send");
        self.0.stream(model, context, options)
    }
}

#[test]
fn secret_scan_finds_a_planted_leak() {
    let mut options = faults::options(workspace_root().join("fixtures"));
    options.providers = vec![conformance::ProviderEntry::new(&llm_anthropic::INFO, || {
        std::sync::Arc::new(Leaky(llm_anthropic::AnthropicProvider::new()))
    })];
    let report = secrets::run(&options).unwrap();
    let text = report.render();
    assert!(
        report
            .leaks
            .iter()
            .any(|l| l.fixture == "anthropic/text-only" && l.problem.contains("the TRACE output")),
        "{text}"
    );
    assert!(report.leaks.iter().any(|l| l.fixture == "anthropic/text-only (oauth key)"), "{text}");
    assert!(!text.contains(secrets::SECRET), "the report itself shows the key:\n{text}");
}

/// A provider whose `Debug` prints the environment it was made on.
#[derive(Debug)]
#[allow(dead_code, reason = "the environment is there to be printed by Debug")]
struct PrintsItsEnv(std::collections::BTreeMap<String, String>, llm_anthropic::AnthropicProvider);

impl llm_core::Provider for PrintsItsEnv {
    fn api(&self) -> &str {
        llm_core::Provider::api(&self.1)
    }

    fn stream(
        &self,
        model: &llm_core::Model,
        context: &llm_core::Context,
        options: &llm_core::StreamOptions,
    ) -> llm_core::AssistantStream {
        self.1.stream(model, context, options)
    }
}

#[test]
fn secret_scan_checks_the_debug_of_every_registered_provider() {
    // Every registered provider is made on a secret environment and printed: the table of
    // the scan is the registry's (a scaffolded crate is covered with no edit).
    assert!(conformance::PROVIDERS.iter().all(|e| e.make_with.is_some()));
    let mut options = faults::options(workspace_root().join("fixtures"));
    options.provider = Some("anthropic".to_owned());
    options.providers = vec![
        conformance::ProviderEntry::new(&llm_anthropic::INFO, || {
            std::sync::Arc::new(llm_anthropic::AnthropicProvider::new())
        })
        .with_env(|client, env| {
            let inner = llm_anthropic::AnthropicProvider::builder().http_client(client).build();
            std::sync::Arc::new(PrintsItsEnv(env, inner))
        }),
    ];
    let report = secrets::run(&options).unwrap();
    let text = report.render();
    assert!(
        report.leaks.iter().any(|l| l.fixture == "anthropic/text-only"
            && l.problem.starts_with("the key appears in Debug of the provider")),
        "{text}"
    );
    assert!(!text.contains(secrets::SECRET), "the report itself shows the key:\n{text}");
}

#[test]
fn tidy_is_clean() {
    let problems = tidy::check(&workspace_root()).unwrap();
    assert!(problems.is_empty(), "tidy:\n{}", problems.join("\n"));
}

/// Changes the ASCII letter or digit at `at` into another one.
fn flip(byte: u8) -> u8 {
    match byte {
        b'a' => b'b',
        b'A' => b'B',
        b'0' => b'1',
        b if b.is_ascii_lowercase() => b'a',
        b if b.is_ascii_uppercase() => b'A',
        _ => b'0',
    }
}

fn first_string_leaf(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if s.bytes().any(|b| b.is_ascii_alphanumeric()) => Some(s.clone()),
        Value::Array(items) => items.iter().find_map(first_string_leaf),
        Value::Object(map) => map.values().find_map(first_string_leaf),
        _ => None,
    }
}

fn run_one(fixtures: &Path, provider: &str) -> (Outcome, String) {
    let options = Options {
        fixtures_root: fixtures.to_owned(),
        provider: Some(provider.to_owned()),
        scenario: Some("text-only".to_owned()),
        update: false,
        write_missing: false,
        providers: conformance::PROVIDERS.to_vec(),
    };
    let report = conformance::run(&options).unwrap();
    (report.outcome(provider, "text-only").cloned().unwrap(), report.render())
}

#[test]
fn one_byte_changes_fail() {
    // A copy of the first registered provider's `text-only` fixture that passes as is.
    let tmp = TempDir::new("mutate");
    let fixtures = tmp.0.join("fixtures");
    std::fs::create_dir_all(&fixtures).unwrap();
    std::fs::copy(workspace_root().join("fixtures/SCENARIOS.md"), fixtures.join("SCENARIOS.md"))
        .unwrap();
    let mut picked = None;
    let mut tried = Vec::new();
    for entry in conformance::PROVIDERS {
        let source = workspace_root().join("fixtures").join(entry.name).join("text-only");
        if !source.join("input.json").exists() || !source.join("expected.txt").exists() {
            continue;
        }
        let scenario = fixtures.join(entry.name).join("text-only");
        copy_dir(&source, &scenario);
        let (outcome, text) = run_one(&fixtures, entry.name);
        if outcome == Outcome::Pass {
            picked = Some((entry.name.to_owned(), scenario));
            break;
        }
        tried.push(text);
        std::fs::remove_dir_all(fixtures.join(entry.name)).unwrap();
    }
    let Some((provider, scenario)) = picked else {
        panic!(
            "no registered provider has a passing text-only fixture to mutate:\n{}",
            tried.join("\n")
        );
    };

    // One byte of expected.txt.
    let expected_path = scenario.join("expected.txt");
    let original = std::fs::read(&expected_path).unwrap();
    let mut mutated = original.clone();
    let at = (mutated.len() / 2..mutated.len())
        .chain(0..mutated.len() / 2)
        .find(|&i| mutated[i].is_ascii_alphanumeric())
        .unwrap();
    mutated[at] = flip(mutated[at]);
    std::fs::write(&expected_path, &mutated).unwrap();
    let (outcome, text) = run_one(&fixtures, &provider);
    match &outcome {
        Outcome::Fail(why) => assert!(why.contains("expected.txt differs"), "{why}"),
        other => panic!("a changed expected.txt must FAIL, got {other:?}:\n{text}"),
    }
    assert!(text.contains("FAIL"), "{text}");
    assert!(text.trim_end().ends_with("0 passed, 1 failed, 0 skipped"), "{text}");
    std::fs::write(&expected_path, &original).unwrap();

    // One byte of request.json's body.
    let request_path = scenario.join("request.json");
    let request_text = std::fs::read_to_string(&request_path).unwrap();
    let request: Value = serde_json::from_str(&request_text).unwrap();
    let leaf = first_string_leaf(&request["body"]).expect("request.json's body has a string value");
    let encoded = serde_json::to_string(&leaf).unwrap();
    let body_at = request_text.find("\"body\"").unwrap();
    let leaf_at = body_at
        + request_text[body_at..].find(&encoded).expect("the string as written in the file");
    let mut bytes = request_text.clone().into_bytes();
    let at =
        (leaf_at + 1..leaf_at + encoded.len()).find(|&i| bytes[i].is_ascii_alphanumeric()).unwrap();
    bytes[at] = flip(bytes[at]);
    let changed: Value = serde_json::from_slice(&bytes).unwrap();
    assert_ne!(changed["body"], request["body"]);
    std::fs::write(&request_path, &bytes).unwrap();
    let (outcome, text) = run_one(&fixtures, &provider);
    match &outcome {
        Outcome::Fail(why) => assert!(why.contains("does not match request.json"), "{why}"),
        other => panic!("a changed request.json body must FAIL, got {other:?}:\n{text}"),
    }
}

/// Copies the files `new_provider::scaffold` edits, and `fixtures/SCENARIOS.md`, from the
/// workspace into `to`.
fn copy_registration_files(to: &Path) {
    let root = workspace_root();
    let mut files: Vec<&str> =
        new_provider::registrations("x", "0").iter().map(|(f, _, _)| *f).collect();
    files.dedup();
    files.push("fixtures/SCENARIOS.md");
    for file in files {
        let target = to.join(file);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(root.join(file), target).unwrap();
    }
}

/// The scaffold writes its templates and one line above every marker, refuses to overwrite,
/// and its crate has the layout tidy requires; the docs name the same files.
#[test]
fn new_provider_writes_its_files_and_registers_above_each_marker() {
    let tmp = TempDir::new("scaffold");
    copy_registration_files(&tmp.0);
    let written = new_provider::scaffold(&tmp.0, "acme-ai").unwrap();
    let mut files: Vec<String> = written
        .iter()
        .map(|p| p.strip_prefix(&tmp.0).unwrap().to_string_lossy().replace('\\', "/"))
        .collect();
    files.sort();
    let version = new_provider::workspace_version(&workspace_root()).unwrap();
    let registrations = new_provider::registrations("acme-ai", &version);
    // The offline session goes to claw's crate, and the fixture folder is a link to it.
    let mut want: Vec<String> = new_provider::files("acme-ai")
        .into_iter()
        .map(|(path, _)| match path.strip_prefix("fixtures/acme-ai/agent-session/") {
            Some(file) => format!("crates/claw-cli/sessions/acme-ai/{file}"),
            None => path,
        })
        .collect();
    want.push("fixtures/acme-ai/agent-session".to_owned());
    want.extend(registrations.iter().map(|(f, _, _)| (*f).to_owned()));
    want.sort();
    want.dedup();
    assert_eq!(files, want);
    assert_eq!(
        tidy::layout_problems("llm-acme-ai", &tmp.0.join("crates/llm-acme-ai")).unwrap(),
        Vec::<String>::new()
    );

    let docs = std::fs::read_to_string(workspace_root().join("docs/adding-a-provider.md")).unwrap();
    for (file, marker, line) in &registrations {
        let text = std::fs::read_to_string(tmp.0.join(file)).unwrap();
        let at = text.find(&format!("{line}\n")).unwrap_or_else(|| panic!("{file} lacks {line}"));
        let marker_at = text
            .split_inclusive('\n')
            .scan(0, |start, l| {
                let here = *start;
                *start += l.len();
                Some((here, l))
            })
            .find(|(_, l)| l.trim_end().ends_with(marker.as_str()))
            .map(|(here, _)| here)
            .unwrap_or_else(|| panic!("{file} lacks {marker}"));
        assert_eq!(at + line.len() + 1, marker_at, "{file}: not right above {marker}");
        assert!(docs.contains(&format!("`{file}`")), "the docs' registration table lacks {file}");
    }
    for path in new_provider::template_paths() {
        if let Some(file) = path.strip_prefix("crates/llm-{{name}}/") {
            assert!(docs.contains(file), "the docs' crate layout lacks {file}");
        }
    }
    // A published crate (clawcall) depends on it: the workspace dependency has a version.
    assert!(registrations[0].2.contains(&format!("version = \"{version}\"")));

    // Every shared scenario the template's capabilities make apply has a fixture.
    let fixtures = tmp.0.join("fixtures");
    let lib = std::fs::read_to_string(tmp.0.join("crates/llm-acme-ai/src/lib.rs")).unwrap();
    let needs = xtask::scenario_needs(&fixtures).unwrap();
    for scenario in xtask::shared_scenarios(&fixtures).unwrap() {
        let dir = fixtures.join("acme-ai").join(&scenario);
        let declared = needs[&scenario].iter().all(|need| {
            let variant: String =
                need.name().split('-').map(|w| w[..1].to_ascii_uppercase() + &w[1..]).collect();
            lib.contains(&format!("Capability::{variant},"))
        });
        let present = dir.join("input.json").exists() || dir.join("skip.txt").exists();
        assert_eq!(present, declared, "{scenario}: a fixture exactly when INFO declares its needs");
    }
    assert!(fixtures.join("acme-ai/agent-session/turn3.sse").exists());
    // One copy: the fixture links to claw's session, which ships in claw's package.
    let link = fixtures.join("acme-ai/agent-session").symlink_metadata().unwrap();
    assert!(link.file_type().is_symlink());
    assert!(tmp.0.join("crates/claw-cli/sessions/acme-ai/turn3.sse").is_file());

    // Never overwrites.
    assert!(new_provider::scaffold(&tmp.0, "acme-ai").is_err());
    assert!(new_provider::scaffold(&tmp.0, "Bad_Name").is_err());
}

/// `cargo xtask new-provider` then CI with nothing edited by hand, short of the whole gate
/// (docs/adding-a-provider.md records a full `cargo xtask ci` on a scaffolded tree): the
/// scaffold goes into a scratch workspace whose members are the new crate, its example and
/// `clawcall` with the new registration, the other crates being this workspace's by path on
/// the same target directory. There the new crate's tests (its conformance column from its
/// own fixtures, under `CI` so every `expected.txt` must exist and match) pass, and clippy
/// `-D warnings` (the new crates and `clawcall` with the registry lines), rustfmt and rustdoc
/// `-D warnings` are clean.
#[test]
fn a_scaffolded_provider_passes_its_checks_untouched() {
    let root = workspace_root();
    let tmp = TempDir::new("scaffold-e2e");
    let scratch = &tmp.0;
    copy_registration_files(scratch);
    copy_dir(&root.join("crates/clawcall"), &scratch.join("crates/clawcall"));
    for file in ["Cargo.lock", "rust-toolchain.toml", "rustfmt.toml", "clippy.toml"] {
        std::fs::copy(root.join(file), scratch.join(file)).unwrap();
    }
    new_provider::scaffold(scratch, "acme-ai").unwrap();

    // The scratch workspace: three members; every other internal crate is this workspace's.
    let manifest = std::fs::read_to_string(scratch.join("Cargo.toml")).unwrap();
    let mut rewritten = String::new();
    for line in manifest.lines() {
        let line = if line.starts_with("members = ") {
            r#"members = ["crates/clawcall", "crates/llm-acme-ai", "examples/acme-ai"]"#.to_owned()
        } else if line.contains("path = \"")
            && !line.contains("llm-acme-ai")
            && !line.starts_with("clawcall ")
        {
            let (before, after) = line.split_once("path = \"").unwrap();
            format!("{before}path = \"{}/{after}", root.display())
        } else {
            line.to_owned()
        };
        rewritten.push_str(&line);
        rewritten.push('\n');
    }
    std::fs::write(scratch.join("Cargo.toml"), rewritten).unwrap();

    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let output = std::process::Command::new(&cargo)
            .args(args)
            .current_dir(scratch)
            .env("CARGO_TARGET_DIR", &target)
            .env("CI", "1")
            .env_remove("UPDATE_EXPECT")
            .env_remove("RUSTFLAGS")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "cargo {args:?} failed:\n{stdout}\n{stderr}");
        stdout
    };
    run(&["fmt", "-p", "llm-acme-ai", "-p", "example-acme-ai", "-p", "clawcall", "--check"], &[]);
    run(
        &[
            "clippy",
            "--offline",
            "-p",
            "llm-acme-ai",
            "-p",
            "example-acme-ai",
            "-p",
            "clawcall",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    );
    let tests = run(&["test", "--offline", "-p", "llm-acme-ai"], &[]);
    assert!(tests.contains("test conformance ... ok"), "{tests}");
    assert!(tests.contains("test faults ... ok"), "{tests}");
    run(
        &["doc", "--offline", "--no-deps", "-p", "llm-acme-ai"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    );
}

/// The scaffold's decoder, compiled from the template as a scaffolded crate compiles it.
#[path = "../scaffold/template/crates/llm-{{name}}/src"]
#[allow(
    unreachable_pub,
    dead_code,
    reason = "the template's crate API, of which the test uses the decoder"
)]
mod scaffold_template {
    pub(crate) mod error;
    pub(crate) mod stream;
}
// At the root, as in the scaffolded crate: `stream.rs` reads `crate::error`.
use scaffold_template::{error, stream};

/// What the template's `error.rs` names its errors by.
const PROVIDER: &str = "acme-ai";

/// `cargo xtask bench` streams a scaffolded crate's format as written: every registered crate
/// has a bench format (the scaffold adds its line), and the bench's generated `Scaffold` bodies
/// decode, through the template's own decoder, to exactly the text and calls they carry.
#[test]
fn the_bench_streams_the_scaffold_format_through_the_scaffold_decoder() {
    use llm_core::raw::Delta;
    use llm_core::raw::drive::WireDecoder;
    use llm_core::raw::sse::SseDecoder;
    use xtask::bench::{BenchFormat, Scenario, generated_body, generated_content};
    use xtask::providers::{BENCH_FORMATS, BENCHED};

    // Every primary registry entry is benched: the bench reads the registry and the table.
    assert_eq!(BENCHED.len(), conformance::PROVIDERS.len());
    for entry in BENCHED {
        assert!(BENCH_FORMATS.iter().any(|(name, _)| *name == entry.name), "{}", entry.name);
    }
    // The line the scaffold registers is an entry of that table.
    let line = new_provider::registrations("acme-ai", "0")
        .into_iter()
        .find(|(file, _, _)| *file == "xtask/src/providers.rs")
        .map(|(_, _, line)| line)
        .unwrap();
    assert_eq!(
        line.trim(),
        format!("({:?}, BenchFormat::{:?}),", "acme-ai", BenchFormat::Scaffold)
    );

    let size = 300_000;
    for scenario in Scenario::ALL {
        let (bytes, content_type) = generated_body(BenchFormat::Scaffold, scenario, size).unwrap();
        assert_eq!(content_type, "text/event-stream");
        let mut events = Vec::new();
        let mut sse = SseDecoder::with_max_event_size(1 << 20);
        sse.push(&bytes, &mut events).unwrap();
        sse.finish(&mut events).unwrap();
        let mut decoder = stream::Decoder::new();
        let mut deltas = Vec::new();
        for event in events {
            decoder.event(event, &mut deltas);
        }
        decoder.end(&mut deltas);
        let mut text = String::new();
        let mut calls: Vec<(u64, String, String)> = Vec::new();
        for delta in &deltas {
            match delta {
                Delta::Text { text: t, .. } => text.push_str(t),
                Delta::ToolCallStart { key, name, .. } => {
                    calls.push((*key, name.clone(), String::new()))
                }
                Delta::ToolCallArgs { key, fragment } => {
                    let call = calls.iter_mut().find(|c| c.0 == *key).unwrap();
                    call.2.push_str(fragment);
                }
                Delta::Error(e) => panic!("{scenario:?}: {e}"),
                _ => {}
            }
        }
        assert!(matches!(deltas.last(), Some(Delta::Done)), "{scenario:?}: {:?}", deltas.last());
        let mut want_text = String::new();
        let mut want_calls = Vec::new();
        for (call, content) in generated_content(scenario, size) {
            match call {
                None => want_text.push_str(&content),
                Some(_) => want_calls.push(("write_file".to_owned(), content)),
            }
        }
        assert_eq!(text, want_text, "{scenario:?}");
        let got: Vec<(String, String)> = calls.into_iter().map(|(_, n, a)| (n, a)).collect();
        assert_eq!(got, want_calls, "{scenario:?}");
        for (_, arguments) in &got {
            let value: Value = serde_json::from_str(arguments).unwrap();
            assert!(value["path"].as_str().unwrap().starts_with("src/gen_"), "{value}");
        }
    }
}
