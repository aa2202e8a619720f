//! xtask's checks as tests, so plain `cargo test --workspace` enforces them:
//! the whole conformance suite, the fault matrix, cancellation at every event
//! index, the secret scan (and that it finds a planted leak), tidy, the
//! runner's sensitivity to one-byte changes of a fixture, and the new-provider
//! scaffold.

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
    let report = faults::run(&faults::Options::new(workspace_root().join("fixtures"))).unwrap();
    let text = report.render();
    println!("{text}");
    assert_eq!(report.failed(), 0, "fault matrix failures:\n{text}");
    assert_eq!(report.cells.len(), report.rows.len() * report.providers.len());
    assert_eq!(report.providers.len(), conformance::PROVIDERS.len());
}

#[test]
fn cancellation_at_every_event_index() {
    let report =
        cancel_sweep::run(&faults::Options::new(workspace_root().join("fixtures"))).unwrap();
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
    let report = secrets::run(&faults::Options::new(workspace_root().join("fixtures"))).unwrap();
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
    let mut options = faults::Options::new(workspace_root().join("fixtures"));
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

/// What a scaffolded `acme-ai` crate declares (the template's `INFO`: no capability yet).
const ACME_INFO: llm_core::ProviderInfo = llm_core::ProviderInfo {
    name: "acme-ai",
    api: "openai-completions",
    provider: "acme-ai",
    default_base_url: "https://api.acme-ai.invalid",
    key_env: &["ACME_AI_API_KEY"],
    capabilities: llm_core::Capabilities::NONE,
    models: &[],
    output: &[],
};

#[test]
fn new_provider_scaffolds_registers_and_shows_its_skips() {
    let tmp = TempDir::new("scaffold");
    let root = workspace_root();
    let fixtures = tmp.0.join("fixtures");
    std::fs::create_dir_all(&fixtures).unwrap();
    std::fs::copy(root.join("fixtures/SCENARIOS.md"), fixtures.join("SCENARIOS.md")).unwrap();
    let mut registration_files: Vec<&str> =
        new_provider::registrations("acme-ai").iter().map(|(f, _, _)| *f).collect();
    registration_files.dedup();
    for file in &registration_files {
        let to = tmp.0.join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(root.join(file), to).unwrap();
    }
    let scenarios = xtask::shared_scenarios(&fixtures).unwrap();
    assert!(scenarios.len() >= 20, "{scenarios:?}");

    let written = new_provider::scaffold(&tmp.0, "acme-ai").unwrap();
    let mut files: Vec<String> = written
        .iter()
        .map(|p| p.strip_prefix(&tmp.0).unwrap().to_string_lossy().replace('\\', "/"))
        .collect();
    files.sort();
    let mut want: Vec<String> =
        new_provider::CRATE_FILES.iter().map(|f| format!("crates/llm-acme-ai/{f}")).collect();
    want.extend(new_provider::EXAMPLE_FILES.iter().map(|f| format!("examples/acme-ai/{f}")));
    want.push("fixtures/acme-ai/README.md".to_owned());
    want.extend(registration_files.iter().map(|f| (*f).to_owned()));
    want.sort();
    assert_eq!(files, want);
    // The scaffold has the layout `cargo xtask tidy` requires of every provider crate.
    let layout = tidy::layout_problems("llm-acme-ai", &tmp.0.join("crates/llm-acme-ai"));
    assert_eq!(layout.unwrap(), Vec::<String>::new());

    // Registered above every marker, from the crate's INFO; the docs list the same files.
    let docs = std::fs::read_to_string(root.join("docs/adding-a-provider.md")).unwrap();
    for (file, marker, line) in new_provider::registrations("acme-ai") {
        let text = std::fs::read_to_string(tmp.0.join(file)).unwrap();
        let at = text.find(&format!("{line}\n")).unwrap_or_else(|| panic!("{file} lacks {line}"));
        let marker_line = text
            .split_inclusive('\n')
            .scan(0, |start, l| {
                let here = *start;
                *start += l.len();
                Some((here, l))
            })
            .find(|(_, l)| l.trim_end().ends_with(&marker))
            .map(|(here, _)| here)
            .unwrap_or_else(|| panic!("{file} lacks {marker}"));
        assert_eq!(at + line.len() + 1, marker_line, "{file}: not right above {marker}");
        assert!(docs.contains(&format!("`{file}`")), "the docs' registration table lacks {file}");
    }
    for file in new_provider::CRATE_FILES {
        assert!(docs.contains(file), "the docs' crate layout lacks {file}");
    }
    assert!(!docs.contains("src/client.rs"), "the HTTP exchange is llm-http's");

    let lib = std::fs::read_to_string(tmp.0.join("crates/llm-acme-ai/src/lib.rs")).unwrap();
    assert!(lib.starts_with("//!"));
    assert!(lib.contains("pub type AcmeAiProvider = llm_http::HttpProvider<AcmeAi>;"));
    assert!(lib.contains("capabilities: Capabilities::NONE"), "the docs promise NONE first");
    assert!(
        lib.contains("impl WireFormat for AcmeAi"),
        "the template is a wire format on llm-http"
    );
    let stream = std::fs::read_to_string(tmp.0.join("crates/llm-acme-ai/src/stream.rs")).unwrap();
    assert!(stream.contains("ErrorKind::Decode"), "malformed JSON is an error, not a drop");
    let example = std::fs::read_to_string(tmp.0.join("examples/acme-ai/Cargo.toml")).unwrap();
    assert!(example.contains("features = [\"acme-ai\"]"), "{example}");

    // No fixture yet: every shared scenario is a visible skip, and tidy fails.
    let entry = conformance::ProviderEntry::new(&ACME_INFO, || {
        std::sync::Arc::new(llm_openai_completions::OpenAiCompletionsProvider::new())
    });
    let options = Options {
        fixtures_root: fixtures.clone(),
        provider: Some("acme-ai".to_owned()),
        scenario: None,
        update: false,
        write_missing: false,
        providers: vec![entry],
    };
    let report = conformance::run(&options).unwrap();
    assert_eq!(
        (report.passed(), report.failed(), report.skipped()),
        (0, 0, scenarios.len()),
        "{}",
        report.render()
    );
    assert!(report.render().contains("needs `streaming`"), "{}", report.render());
    let problems = tidy::coverage_problems(&fixtures, &entry).unwrap();
    assert!(
        problems.iter().any(|p| p.contains("every shared scenario is skipped")),
        "{problems:?}"
    );

    // With text-only and tool-call-single the skips stay visible and tidy is content.
    for scenario in ["text-only", "tool-call-single"] {
        copy_dir(
            &root.join("fixtures/openai-completions").join(scenario),
            &fixtures.join("acme-ai").join(scenario),
        );
    }
    let report = conformance::run(&options).unwrap();
    assert_eq!(
        (report.passed(), report.failed(), report.skipped()),
        (2, 0, scenarios.len() - 2),
        "{}",
        report.render()
    );
    assert_eq!(tidy::coverage_problems(&fixtures, &entry).unwrap(), Vec::<String>::new());

    // Never overwrites.
    assert!(new_provider::scaffold(&tmp.0, "acme-ai").is_err());
    assert!(new_provider::scaffold(&tmp.0, "Bad_Name").is_err());
}
