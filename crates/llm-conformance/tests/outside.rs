//! A provider crate outside this workspace runs the suite and the fault rows on its own
//! fixtures with one dev-dependency and one test: the test writes such a crate (a small
//! SSE provider, its `text-only` fixture and the one test) in a temporary directory,
//! with path dependencies on this workspace's crates, and runs `cargo test --offline`
//! in it on the same target directory (about a minute once this workspace is built).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests")]
#![allow(clippy::disallowed_methods, reason = "tests read their own process environment")]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write(root: &Path, file: &str, text: &str) {
    let path = root.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const LIB_RS: &str = r#"//! A small provider: `POST /v1/generate` with `{"model", "prompt"}`, answered by SSE
//! events `{"text": ..}` and `[DONE]`.

use llm_core::raw::drive::WireDecoder;
use llm_core::raw::sse::SseEvent;
use llm_core::{Error, ErrorKind, Message, ProviderInfo, StopReason, UserMessageContent, raw::Delta};
use llm_http::{Converted, ErrorResponse, HttpRequest, HttpWire, Request};

pub const INFO: ProviderInfo = ProviderInfo {
    name: "tiny",
    api: "tiny",
    provider: "tiny",
    default_base_url: "https://api.tiny.invalid",
    key_env: &["TINY_API_KEY"],
    capabilities: llm_core::Capabilities::NONE,
    models: &[],
    output: &[],
};

/// The tiny provider.
pub type TinyProvider = llm_http::HttpProvider<Tiny>;

/// Its wire format.
#[derive(Debug, Default)]
pub struct Tiny;

#[derive(Default)]
pub struct Decoder;

impl WireDecoder for Decoder {
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) {
        if event.data == "[DONE]" {
            out.extend([Delta::Stop(StopReason::Stop), Delta::Done]);
            return;
        }
        match serde_json::from_str::<serde_json::Value>(&event.data) {
            Ok(v) => out.push(Delta::Text {
                key: 0,
                text: v["text"].as_str().unwrap_or_default().to_owned(),
            }),
            Err(e) => out.push(Delta::Error(Error::new(ErrorKind::Decode, "tiny", e.to_string()))),
        }
    }

    fn end(&mut self, _out: &mut Vec<Delta>) {}
}

impl HttpWire for Tiny {
    type Decoder = Decoder;
    type State = ();

    fn info(&self) -> &'static ProviderInfo {
        &INFO
    }

    fn convert(&self, request: Request<'_>) -> Result<Converted<()>, Error> {
        let prompt = request.context.messages.iter().rev().find_map(|m| match m {
            Message::User(u) => match &u.content {
                UserMessageContent::Text(t) => Some(t.clone()),
                _ => None,
            },
            _ => None,
        });
        let body = serde_json::json!({"model": request.model.id, "prompt": prompt});
        let mut headers = llm_http::header_map(
            "tiny",
            [("content-type", "application/json"), ("accept", "text/event-stream")],
        )?;
        if let Some(key) = &request.options.api_key {
            let bearer = format!("Bearer {}", key.expose());
            llm_http::insert_header(&mut headers, "tiny", "authorization", &bearer)?;
        }
        let url = format!("{}/v1/generate", request.model.base_url.trim_end_matches('/'));
        Ok(Converted::new(HttpRequest::json("tiny", url, headers, &body)?, ()))
    }

    fn decoder(&self, (): &()) -> Decoder {
        Decoder
    }

    fn error((): &(), r: ErrorResponse) -> Error {
        // The server's `retry-after` is the wait before the next attempt (the fault rows check it).
        Error::new(ErrorKind::from_status(r.status), "tiny", r.body)
            .with_status(r.status)
            .with_retry_after(r.retry_after)
    }
}
"#;

/// The one test a third-party crate adds.
const CONFORMANCE_RS: &str = r#"use std::sync::Arc;

#[test]
fn conformance() {
    let entry = llm_conformance::ProviderEntry::new(&llm_tiny::INFO, || {
        Arc::new(llm_tiny::TinyProvider::new())
    });
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let report = llm_conformance::check(&fixtures, entry).unwrap();
    assert_eq!((report.passed(), report.failed()), (1, 0));
    // The fault rows run on the same recording (no tool-call fixture: text rows only).
    let faults = llm_conformance::check_faults(&fixtures, entry).unwrap();
    assert_eq!(faults.failed(), 0);
    assert_eq!(faults.cells.len(), faults.rows.len());
    println!("fault rows passed: {}", faults.rows.len());
}
"#;

const INPUT_JSON: &str = r#"{
  "description": "plain text in two events",
  "model": {"id": "tiny-1", "api": "tiny", "provider": "tiny", "baseUrl": "https://api.tiny.invalid",
            "reasoning": false, "input": ["text"], "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
            "contextWindow": 1000, "maxTokens": 100},
  "context": {"messages": [{"role": "user", "content": "Capital of the Rhône?", "timestamp": 1760000000000}]},
  "options": {}
}
"#;

const REQUEST_JSON: &str = r#"{
  "method": "POST",
  "path": "/v1/generate",
  "headers": {"authorization": "<present>", "content-type": "application/json", "accept": "text/event-stream"},
  "body": {"model": "tiny-1", "prompt": "Capital of the Rhône?"}
}
"#;

const RESPONSE_SSE: &str =
    "data: {\"text\":\"Lyon is\"}\n\ndata: {\"text\":\" the capital.\"}\n\ndata: [DONE]\n\n";

/// The transcript as `llm_core::raw::printer` prints it, written by hand from the events above.
const EXPECTED_TXT: &str = r#"start
text_start 0
text_delta 0 "Lyon is"
text_delta 0 " the capital."
text_end 0 "Lyon is the capital."
done stop
message {"content":[{"type":"text","text":"Lyon is the capital."}],"api":"tiny","provider":"tiny","model":"tiny-1","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0.0,"output":0.0,"cacheRead":0.0,"cacheWrite":0.0,"total":0.0}},"stopReason":"stop","timestamp":0}
requests 1
sleeps []
"#;

#[test]
fn a_provider_crate_outside_the_workspace_runs_the_suite_and_the_fault_rows_on_its_fixtures() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().parent().unwrap();
    let tmp = TempDir(std::env::temp_dir().join(format!("llm-tiny-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&tmp.0);
    let root = &tmp.0;
    assert!(!root.starts_with(workspace), "the crate must be outside the workspace");
    let path = |name: &str| workspace.join("crates").join(name).display().to_string();
    write(
        root,
        "Cargo.toml",
        &format!(
            r#"[package]
name = "llm-tiny"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
llm-core = {{ path = {:?}, features = ["tokio"] }}
llm-http = {{ path = {:?} }}
serde_json = {{ version = "1", features = ["preserve_order"] }}

[dev-dependencies]
llm-conformance = {{ path = {:?} }}

# The workspace's dev profile, so the shared target directory's builds are reused.
[profile.dev]
debug = "line-tables-only"

[profile.dev.package."*"]
debug = false

[workspace]
"#,
            path("llm-core"),
            path("llm-http"),
            path("llm-conformance"),
        ),
    );
    // The workspace's versions, so `--offline` resolves and the builds are shared.
    std::fs::copy(workspace.join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
    write(root, "src/lib.rs", LIB_RS);
    write(root, "tests/conformance.rs", CONFORMANCE_RS);
    let scenario = "fixtures/tiny/text-only";
    write(root, &format!("{scenario}/input.json"), INPUT_JSON);
    write(root, &format!("{scenario}/request.json"), REQUEST_JSON);
    write(root, &format!("{scenario}/response.sse"), RESPONSE_SSE);
    write(root, &format!("{scenario}/expected.txt"), EXPECTED_TXT);

    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["test", "--offline", "--test", "conformance", "--", "--nocapture"])
        .current_dir(root)
        .env("CARGO_TARGET_DIR", &target)
        // A missing or changed expected.txt fails instead of being written.
        .env("CI", "1")
        .env_remove("UPDATE_EXPECT")
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // The one test ran and printed the grid and the fault matrix (every row passed).
    assert!(stdout.contains("test conformance ... ok"), "{stdout}");
    assert!(stdout.contains("http 500 endless error body, every time"), "{stdout}");
    let fault_rows = stdout
        .lines()
        .find_map(|l| l.strip_prefix("fault rows passed: "))
        .and_then(|n| n.parse::<usize>().ok());
    assert!(fault_rows.is_some_and(|n| n >= 40), "{stdout}");
    // The fixture was read, not rewritten.
    let expected = std::fs::read_to_string(root.join(scenario).join("expected.txt")).unwrap();
    assert_eq!(expected, EXPECTED_TXT);
}
