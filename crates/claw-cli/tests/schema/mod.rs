//! `claw --schema FILE`: the schema file and the model are checked before any request;
//! tools run first, then one request asks for the answer in the format; the validated
//! object is printed (a `structured_output` line with `--json`); an answer that never
//! matches is exit 4; escapes inside the answer never reach a terminal raw.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::server::{Server, text_sse, tool_sse};
use super::{HOSTILE, assert_no_raw_controls, json_events, live, run, temp_dir};

fn weather_schema() -> Value {
    json!({
        "title": "Weather report",
        "type": "object",
        "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
        "required": ["city", "celsius"],
        "additionalProperties": false
    })
}

/// `schema` written to a file in a fresh directory.
fn schema_file(name: &str, schema: &str) -> std::path::PathBuf {
    let dir = temp_dir(name);
    let path = dir.join("weather.json");
    std::fs::write(&path, schema).unwrap();
    path
}

#[test]
fn the_validated_object_is_printed_after_the_tools_ran() {
    let schema = schema_file("schema-ok", &weather_schema().to_string());
    let server = Server::start(vec![
        tool_sse(&[("calculator", json!({"expression": "2 + 10"}))]),
        text_sse("It is 12 degrees in Oslo."),
        text_sse(r#"{"city": "Oslo", "celsius": 12}"#),
    ]);
    let (out, stdout, stderr) =
        run(live(&server).arg("--schema").arg(&schema).arg("weather in Oslo?"));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // The object, pretty-printed, ends the output: the text before it is the run.
    let start = stdout.rfind("{\n").expect("a pretty object");
    let printed: Value = serde_json::from_str(&stdout[start..]).unwrap();
    assert_eq!(printed, json!({"city": "Oslo", "celsius": 12}));

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[0].body.get("response_format").is_none(), "tools first, free answer");
    let last = &requests[2].body;
    assert_eq!(last["response_format"]["type"], "json_schema");
    assert_eq!(last["response_format"]["json_schema"]["name"], "Weather_report");
    assert_eq!(last["response_format"]["json_schema"]["strict"], true);
    assert_eq!(last["tool_choice"], "none");
    let _ = std::fs::remove_dir_all(schema.parent().unwrap());
}

#[test]
fn the_json_stream_carries_the_answer_and_an_answer_that_never_matches_is_exit_4() {
    let schema = schema_file("schema-json", &weather_schema().to_string());
    let server = Server::start(vec![text_sse("ok"), text_sse(r#"{"city": "Oslo", "celsius": 3}"#)]);
    let (out, stdout, stderr) =
        run(live(&server).arg("--schema").arg(&schema).args(["--json", "--tools", "", "w?"]));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let events = json_events(&stdout);
    let answer: Vec<&Value> = events.iter().filter(|e| e["type"] == "structured_output").collect();
    assert_eq!(
        answer,
        vec![&json!({"type": "structured_output", "status": "valid",
                     "value": {"city": "Oslo", "celsius": 3}})]
    );

    // Wrong twice (the first try and the one retry, which names the violation): exit 4.
    let server = Server::start(vec![
        text_sse("ok"),
        text_sse(r#"{"city": "Oslo"}"#),
        text_sse(r#"{"city": "Oslo", "celsius": "warm"}"#),
    ]);
    let (out, stdout, stderr) =
        run(live(&server).arg("--schema").arg(&schema).args(["--json", "--tools", "", "w?"]));
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("does not match --schema") && stderr.contains("celsius"), "{stderr}");
    let events = json_events(&stdout);
    let answer = events.iter().find(|e| e["type"] == "structured_output").unwrap();
    assert_eq!(answer["status"], "invalid");
    assert_eq!(answer["value"], json!({"city": "Oslo", "celsius": "warm"}));
    let retry = &server.requests()[2].body["messages"];
    let retry_text = retry.as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(retry_text.contains("celsius"), "{retry_text}");
    let _ = std::fs::remove_dir_all(schema.parent().unwrap());
}

#[test]
fn a_bad_schema_file_or_a_model_without_structured_output_is_exit_2_before_any_request() {
    let dir = temp_dir("schema-bad");
    let cases = [
        ("not-json.json", "{\"type\": ", "not JSON"),
        ("string.json", r#"{"type": "string"}"#, "root"),
        ("bad-keyword.json", r#"{"type": "object", "minProperties": "two"}"#, "does not compile"),
        ("remote.json", r#"{"type": "object", "$ref": "https://example.com/x.json"}"#, "compile"),
    ];
    for (name, text, _) in cases {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let server = Server::start(Vec::new());
    for (name, _, expected) in cases {
        let (out, _, stderr) = run(live(&server).arg("--schema").arg(dir.join(name)).arg("w?"));
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
    }
    let (out, _, stderr) =
        run(live(&server).arg("--schema").arg(dir.join("missing.json")).arg("w?"));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("missing.json"), "{stderr}");
    // A directory, or a FIFO that would block a plain read.
    let (out, _, stderr) = run(live(&server).arg("--schema").arg(&dir).arg("w?"));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    #[cfg(unix)]
    {
        let fifo = dir.join("fifo.json");
        assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        // Bounded: a claw that waits on the FIFO is killed and fails the test.
        let mut child = live(&server)
            .arg("--schema")
            .arg(&fifo)
            .arg("w?")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        assert_eq!(status.and_then(|s| s.code()), Some(2), "a FIFO is refused without waiting");
    }

    std::fs::write(dir.join("ok.json"), weather_schema().to_string()).unwrap();
    let mut cmd = super::claw();
    cmd.args([
        "--provider",
        "openai",
        "--base-url",
        &server.base_url(),
        "--model",
        "gpt-3.5-turbo",
    ]);
    let (out, _, stderr) = run(cmd.arg("--schema").arg(dir.join("ok.json")).arg("w?"));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot return structured output"), "{stderr}");
    // Chat and replay have no single answer to check.
    let (out, _, _) = run(live(&server).arg("--schema").arg(dir.join("ok.json")).arg("--chat"));
    assert_eq!(out.status.code(), Some(2));
    let (out, _, stderr) = run(super::claw().arg("--schema").arg(dir.join("ok.json")));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(server.requests().is_empty(), "nothing was sent");
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(unix)]
#[test]
fn on_a_terminal_the_object_is_printed_with_escapes_neutralised() {
    let schema = schema_file("schema-pty", &weather_schema().to_string());
    let answer = json!({"city": HOSTILE, "celsius": 1}).to_string();
    let server = Server::start(vec![text_sse("ok"), text_sse(&answer)]);
    let args: Vec<String> = [
        "--provider",
        "openai",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
        "--tools",
        "",
        "--schema",
        schema.to_str().unwrap(),
        "w?",
    ]
    .map(str::to_owned)
    .to_vec();
    let (out, shown, _) = run(super::claw_in_pty(&args).stdin(Stdio::null()));
    assert_eq!(out.status.code(), Some(0), "{shown}");
    // The terminal's own line ends are \r\n; the rest must be inert.
    assert_no_raw_controls(&shown.replace("\r\n", "\n"));
    assert!(shown.contains("\"celsius\": 1"), "{shown}");
    let _ = std::fs::remove_dir_all(schema.parent().unwrap());
}
