//! The `claw` binary, run as a user would: offline replay, JSON output, saved
//! transcripts, errors and exit codes, Ctrl-C.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]

use std::io::Read;
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const KEYS: [&str; 4] =
    ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "MISTRAL_API_KEY"];

fn claw() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_claw"));
    for k in KEYS {
        cmd.env_remove(k);
    }
    cmd.env_remove("RUST_LOG").env("NO_COLOR", "1");
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

fn run(cmd: &mut Command) -> (Output, String, String) {
    let out = cmd.output().expect("claw runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

fn temp_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("claw-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&dir);
    dir
}

#[test]
fn offline_default_replays_the_recorded_session_with_real_tools() {
    let (out, stdout, stderr) = run(&mut claw());
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.contains("replay: no live API call"), "{stderr}");
    // The calculator really ran: 37 * 1.2 + 2^10.
    assert!(stdout.contains("calculator → 1068.4"), "{stdout}");
    // list_dir ran in the current directory (the crate folder).
    assert!(stdout.contains("list_dir → "), "{stdout}");
    assert!(stdout.contains("Here's what I found"), "{stdout}");
    assert!(stderr.contains("3 turns"), "{stderr}");
    assert!(!stdout.contains("\u{1b}["), "NO_COLOR: no escape codes");
}

#[test]
fn json_mode_prints_one_event_per_line() {
    let (out, stdout, _) = run(claw().arg("--json"));
    assert_eq!(out.status.code(), Some(0));
    let events: Vec<Value> =
        stdout.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    assert_eq!(events.first().unwrap()["type"], "agent_start");
    assert_eq!(events.last().unwrap()["type"], "agent_end");
    assert_eq!(events.last().unwrap()["reason"], "Completed");
    let ends = events.iter().filter(|e| e["type"] == "tool_execution_end").count();
    assert_eq!(ends, 4, "list_dir, calculator, current_time, read_file");
}

#[test]
fn saved_transcript_has_a_result_for_every_call_and_resumes() {
    let path = temp_path("save.json");
    let (out, _, stderr) = run(claw().arg("--save").arg(&path));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let messages: Vec<llm_core::Message> =
        serde_json::from_value(saved["messages"].clone()).unwrap();
    assert!(agent_core::check_tool_results(&messages).is_empty());
    assert_eq!(messages.len(), 1 + 3 + 4, "user, 3 turns, 4 results");
    assert!(
        !std::fs::read_to_string(&path).unwrap().contains("replay-no-key"),
        "no key in transcripts"
    );

    // Resuming replays the session again after the saved messages.
    let (out, _, stderr) = run(claw().arg("--resume").arg(&path).arg("--save").arg(&path));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(saved["messages"].as_array().unwrap().len(), 2 * 8);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn configuration_errors_exit_3_with_an_actionable_message() {
    let (out, _, stderr) =
        run(claw().env("ANTHROPIC_API_KEY", "sk-test").args(["--model", "claude-nope", "hi"]));
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr.contains("unknown model `claude-nope`") && stderr.contains("claude-sonnet-4-5"),
        "{stderr}"
    );

    let (out, _, stderr) = run(claw().args(["--tools", "read_file,teleport"]));
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr.contains("unknown tool `teleport`"), "{stderr}");

    let (out, _, stderr) = run(claw().args(["--replay", "/nonexistent/session"]));
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr.contains("--replay"), "{stderr}");

    let (out, _, _) = run(claw().arg("--bogus-flag"));
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn help_explains_flags_and_exit_codes() {
    let (out, stdout, _) = run(claw().arg("--help"));
    assert_eq!(out.status.code(), Some(0));
    for needle in [
        "--provider",
        "--model",
        "--base-url",
        "--tools",
        "--replay",
        "--json",
        "--save",
        "--resume",
        "Exit codes",
        "130",
    ] {
        assert!(stdout.contains(needle), "--help lacks {needle}");
    }
}

#[test]
fn http_errors_show_the_provider_message() {
    // A server that answers 401 with Anthropic's error body.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        let mut buf = [0u8; 65536];
        let _ = sock.read(&mut buf);
        let body = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
        let resp = format!(
            "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        std::io::Write::write_all(&mut sock, resp.as_bytes()).unwrap();
    });
    let (out, _, stderr) = run(claw().env("ANTHROPIC_API_KEY", "sk-ant-secret-test-key").args([
        "--base-url",
        &format!("http://{addr}"),
        "hello",
    ]));
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("invalid x-api-key"), "{stderr}");
    assert!(!stderr.contains("sk-ant-secret-test-key"), "the key never appears");
}

#[cfg(unix)]
#[test]
fn ctrl_c_aborts_cleanly_and_saves_the_transcript() {
    // A server that accepts and never answers: claw waits on it until interrupted.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let path = temp_path("interrupted.json");
    let child = claw()
        .env("ANTHROPIC_API_KEY", "sk-test")
        .args(["--json", "--base-url", &format!("http://{addr}"), "--save"])
        .arg(&path)
        .arg("hello")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let _sock = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("claw never connected: {e}"),
        }
    };
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "agent_end");
    assert_eq!(last["reason"], "Aborted");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let messages: Vec<llm_core::Message> =
        serde_json::from_value(saved["messages"].clone()).unwrap();
    assert!(agent_core::check_tool_results(&messages).is_empty());
    let _ = std::fs::remove_file(&path);
}
