//! A hostile server: what it sends is bounded, what it gets is little, and
//! what it leaves behind is cleaned up. Each test runs the fault server
//! (rmcp-based, or its hand-written JSON-RPC mode `FAULT_SERVER_RAW=1`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use agent_core::AgentEvent;
use agent_mcp::{
    Clock, McpLimits, McpServerConfig, McpServers, McpToolSet, McpTransport, SAFE_ENV_VARS,
    ServerStatus,
};
use futures_util::StreamExt;
use llm_core::{Message, UserContent};
use serde_json::{Value, json};

use crate::*;

fn tool<'a>(set: &'a McpToolSet, name: &str) -> &'a agent_core::AgentTool {
    set.tool(name).unwrap_or_else(|| panic!("no tool {name} in {:?}", set.names))
}

fn set_env(config: &mut McpServerConfig, key: &str, value: &str) {
    if let McpTransport::Stdio { env, .. } = &mut config.transport {
        env.insert(key.into(), value.into());
    }
}

/// The fault server in its hand-written JSON-RPC mode.
fn raw_server(id: &str) -> McpServerConfig {
    let (mut config, _) = fault_server(id);
    set_env(&mut config, "FAULT_SERVER_RAW", "1");
    config.with_connect_timeout(Duration::from_secs(5)).with_max_restarts(0)
}

const ENV_PROBE: &str = "AGENT_MCP_ENV_PROBE";
const SECRET: &str = "sk-ant-parent-secret-0123456789";

/// Runs [`env_probe`] in a child of this test binary whose environment has
/// `ANTHROPIC_API_KEY` set (setting it here would race the other tests).
#[test]
fn a_stdio_server_gets_only_a_safe_environment() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["hostile::env_probe", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(ENV_PROBE, "1")
        .env("ANTHROPIC_API_KEY", SECRET)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("env probe passed"), "the probe did not run: {stdout}\n{stderr}");
}

/// The child side of [`a_stdio_server_gets_only_a_safe_environment`].
#[tokio::test]
#[ignore = "run by a_stdio_server_gets_only_a_safe_environment, in a child process"]
async fn env_probe() {
    assert!(std::env::var_os(ENV_PROBE).is_some(), "run by the parent test only");
    assert_eq!(std::env::var("ANTHROPIC_API_KEY").unwrap(), SECRET);
    let env_of = |servers: McpServers| async move {
        let set = servers.tools();
        let out = invoke(tool(&set, "fault__env"), json!({})).await.unwrap();
        servers.shutdown().await;
        let env = out.details.unwrap()["structuredContent"]["env"].clone();
        env.as_object().unwrap().clone()
    };

    let (mut config, _) = fault_server("fault");
    set_env(&mut config, "SERVER_SETTING", "given");
    let env = env_of(McpServers::connect([config.clone()]).await.unwrap()).await;
    assert!(!env.contains_key("ANTHROPIC_API_KEY"), "{env:?}");
    assert!(!env.values().any(|v| v.as_str().is_some_and(|v| v.contains(SECRET))), "{env:?}");
    assert_eq!(env["SERVER_SETTING"], json!("given"));
    // Nothing else of ours: the safe list and what the config names.
    for key in env.keys() {
        let allowed = SAFE_ENV_VARS.contains(&key.as_str())
            || ["SERVER_SETTING", "FAULT_SERVER_LOG"].contains(&key.as_str());
        assert!(allowed, "the server saw {key}");
    }
    assert_eq!(env.get("PATH"), std::env::var("PATH").ok().map(Value::String).as_ref());

    // Inheriting everything is an explicit choice.
    let env = env_of(McpServers::connect([config.with_inherited_env(true)]).await.unwrap()).await;
    assert_eq!(env["ANTHROPIC_API_KEY"], json!(SECRET));
    println!("env probe passed");
}

#[tokio::test]
async fn result_text_is_cut_at_the_budget_with_a_marker() {
    let (config, _) = fault_server("fault");
    let limits = McpLimits { max_result_text_bytes: 1000, ..McpLimits::default() };
    let servers = McpServers::connect([config.with_limits(limits)]).await.unwrap();
    let set = servers.tools();
    let out = invoke(tool(&set, "fault__big_text"), json!({"bytes": 5000})).await.unwrap();
    let text = text_of(&out.content);
    assert_eq!(
        text,
        format!(
            "{}\n[4000 more bytes of text cut: a tool result is limited to 1000 bytes]",
            "y".repeat(1000)
        )
    );
    // Under the budget nothing changes.
    let out = invoke(tool(&set, "fault__big_text"), json!({"bytes": 1000})).await.unwrap();
    assert_eq!(text_of(&out.content), "y".repeat(1000));
    servers.shutdown().await;
}

#[tokio::test]
async fn images_every_provider_rejects_are_described_instead() {
    let (config, _) = fault_server("fault");
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let image = |kind: &'static str| {
        let t = tool(&set, "fault__image").clone();
        async move { invoke(&t, json!({ "kind": kind })).await.unwrap().content }
    };
    let only_image = |content: &[UserContent]| -> (String, String) {
        let images: Vec<_> = content
            .iter()
            .filter_map(|c| match c {
                UserContent::Image(i) => Some((i.mime_type.clone(), i.data.clone())),
                UserContent::Text(_) => None,
            })
            .collect();
        assert_eq!(images.len(), 1, "{content:?}");
        images[0].clone()
    };

    let png = image("png").await;
    assert_eq!(only_image(&png).0, "image/png");
    // Jpeg bytes called png: sent as what they are.
    assert_eq!(only_image(&image("mislabeled").await).0, "image/jpeg");

    for (kind, why) in [
        ("tiff", "image/tiff image, 12 bytes of base64, not shown: only png, jpeg, gif and webp"),
        (
            "bad_base64",
            "image/png image, 18 bytes of base64, not shown: its data is not valid base64",
        ),
        ("huge", "image/png image, 5333336 bytes of base64, not shown: larger than 3750000 bytes"),
    ] {
        let content = image(kind).await;
        assert!(content.iter().all(|c| matches!(c, UserContent::Text(_))), "{kind}: {content:?}");
        let text = text_of(&content);
        assert!(text.contains(why), "{kind}: {text}");
    }
    servers.shutdown().await;
}

/// Collects what `tracing` writes.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn hostile_tool_lists_are_bounded() {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    // The listing runs on this thread (a current-thread runtime).
    let _guard = tracing::subscriber::set_default(subscriber);
    let servers = McpServers::connect([raw_server("raw")]).await.unwrap();
    assert_eq!(servers.statuses()[0].1, ServerStatus::Up, "{:?}", servers.statuses());
    let set = servers.tools();
    // The schema roots `true` and `{"type": "string"}` and the 64 KiB+ schema
    // are dropped; the repeated cursor ends the listing after its page.
    let names: Vec<&str> = set.descriptors.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["raw__ok_a", "raw__long_description", "raw__ok_b", "raw__reply_then_stray"]);
    let long = &set.descriptors[1].description;
    assert_eq!(long.chars().count(), 2048 + " [description cut]".len(), "{long}");
    assert!(long.ends_with("d [description cut]"));
    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    for warning in [
        "tool=\"root_true\"",
        "its input schema's root is not an object: a boolean",
        "tool=\"root_string\"",
        "its input schema's root has type \"string\", not \"object\"",
        "tool=\"huge_schema\"",
        "repeated the `tools/list` cursor \"page-2\"",
    ] {
        assert!(logs.contains(warning), "no warning {warning:?} in:\n{logs}");
    }
    // The rest of the server works.
    let out = invoke(tool(&set, "raw__ok_b"), json!({})).await.unwrap();
    assert_eq!(text_of(&out.content), "ok_b answered");
    servers.shutdown().await;

    let limits = McpLimits { max_tools: 2, ..McpLimits::default() };
    let servers =
        McpServers::connect([raw_server("raw").with_limits(limits.clone())]).await.unwrap();
    let names: Vec<String> = servers.tools().descriptors.into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["raw__ok_a", "raw__long_description"]);
    servers.shutdown().await;

    // Empty pages with ever new cursors end after `max_tools + 1` pages, well
    // before the connect timeout.
    let mut endless = raw_server("endless").with_limits(limits);
    set_env(&mut endless, "FAULT_SERVER_RAW", "endless");
    let started = Instant::now();
    let servers = McpServers::connect([endless]).await.unwrap();
    assert_eq!(servers.statuses()[0].1, ServerStatus::Up, "{:?}", servers.statuses());
    assert!(servers.tools().descriptors.is_empty());
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    servers.shutdown().await;
}

#[tokio::test]
async fn a_stray_stdout_line_fails_no_call_in_flight() {
    let (config, _) = fault_server("fault");
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let slow = invoke(tool(&set, "fault__slow_progress"), json!({"steps": 3, "delay_ms": 150}));
    let stray = invoke(tool(&set, "fault__stray"), json!({}));
    let (slow, stray) = tokio::join!(slow, stray);
    assert_eq!(text_of(&stray.unwrap().content), "answered after a stray line");
    assert_eq!(text_of(&slow.unwrap().content), "done after 3 steps");
    servers.shutdown().await;
}

#[tokio::test]
async fn a_stray_line_right_after_an_answer_does_not_beat_it() {
    let servers = McpServers::connect([raw_server("raw")]).await.unwrap();
    let set = servers.tools();
    for _ in 0..5 {
        let out = invoke(tool(&set, "raw__reply_then_stray"), json!({})).await.unwrap();
        assert_eq!(text_of(&out.content), "reply_then_stray answered");
    }
    servers.shutdown().await;
}

#[tokio::test]
async fn stderr_that_is_not_utf8_or_endless_is_drained_to_the_end() {
    let (config, _) = fault_server("fault");
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let err = invoke(tool(&set, "fault__stderr_flood"), json!({})).await.unwrap_err();
    assert!(err.0.contains("exit status: 3"), "{err}");
    // Read past the bad bytes and the 2 MiB line, lossily.
    assert!(err.0.contains("its last stderr line: last words \u{FFFD}"), "{err}");
    assert!(err.0.len() < 1024, "{} bytes: {err}", err.0.len());
    servers.shutdown().await;
}

#[tokio::test]
async fn an_endless_stdout_line_ends_the_connection_at_the_message_bound() {
    let (config, _) = fault_server("fault");
    let limits = McpLimits { max_message_bytes: 1 << 20, ..McpLimits::default() };
    let config = config.with_call_timeout(Duration::from_secs(60)).with_limits(limits);
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let started = Instant::now();
    let err = invoke(tool(&set, "fault__endless_stdout"), json!({})).await.unwrap_err();
    assert!(err.0.contains("stopped during `endless_stdout`"), "{err}");
    assert!(err.0.contains("it wrote a stdout line longer than 1048576 bytes"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    // The next call starts it again.
    let out = invoke(tool(&set, "fault__echo"), json!({"text": "back"})).await.unwrap();
    assert_eq!(text_of(&out.content), "back");
    servers.shutdown().await;
}

/// Whether a process exists and is not a zombie.
#[cfg(target_os = "linux")]
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim().starts_with('Z')))
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn shutdown_reaches_a_wrapper_s_grandchild_and_ends_the_readers() {
    let pid_file = temp_dir("grandchild").join("pid");
    // A wrapper that leaves a process behind, as `npx` or `uvx` may: the
    // grandchild holds the server's stdout and stderr.
    let script = format!(
        "sleep 600 & echo $! > '{}'; exec '{}'",
        pid_file.display(),
        env!("CARGO_BIN_EXE_mcp-fault-server")
    );
    let config = McpServerConfig::stdio("wrapped", "sh", ["-c", script.as_str()])
        .with_connect_timeout(Duration::from_secs(20));
    let tasks_before = tokio::runtime::Handle::current().metrics().num_alive_tasks();
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let out = invoke(tool(&set, "wrapped__echo"), json!({"text": "hi"})).await.unwrap();
    assert_eq!(text_of(&out.content), "hi");
    let pid: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    assert!(running(pid), "the grandchild should run while the server does");

    let started = Instant::now();
    servers.shutdown().await;
    assert!(!running(pid), "grandchild {pid} outlived its server");
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    // No reader task (nor rmcp's) outlives the server.
    let mut alive = usize::MAX;
    for _ in 0..50 {
        alive = tokio::runtime::Handle::current().metrics().num_alive_tasks();
        if alive <= tasks_before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(alive <= tasks_before, "{alive} tasks alive, {tasks_before} before");

    // Dropped without `shutdown`: the group is killed all the same.
    let config = McpServerConfig::stdio("wrapped", "sh", ["-c", script.as_str()])
        .with_connect_timeout(Duration::from_secs(20));
    let servers = McpServers::connect([config]).await.unwrap();
    let pid: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    assert!(running(pid));
    drop(servers);
    let mut gone = false;
    for _ in 0..100 {
        if !running(pid) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "grandchild {pid} outlived its dropped server");
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_server_that_ignores_stdin_closing_and_sigterm_is_killed() {
    let pid_file = temp_dir("stubborn").join("pid");
    // Ignores SIGTERM (kept across `exec`), and outlives its stdin: when the
    // real server ends, the shell becomes a `sleep`.
    let script = format!(
        "trap '' TERM; echo $$ > '{}'; '{}'; exec sleep 600",
        pid_file.display(),
        env!("CARGO_BIN_EXE_mcp-fault-server")
    );
    let grace = Duration::from_millis(300);
    let limits = McpLimits { shutdown_grace: grace, ..McpLimits::default() };
    let config = McpServerConfig::stdio("stubborn", "sh", ["-c", script.as_str()])
        .with_connect_timeout(Duration::from_secs(20))
        .with_limits(limits);
    let servers = McpServers::connect([config]).await.unwrap();
    let pid: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    let started = Instant::now();
    servers.shutdown().await;
    let took = started.elapsed();
    assert!(!running(pid), "{pid} survived shutdown");
    // Closing stdin, then SIGTERM, each waited out in turn before SIGKILL.
    assert!(took >= grace * 2, "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn no_reader_outlives_its_server_even_if_an_escaped_process_holds_the_pipes() {
    let pid_file = temp_dir("escaped").join("pid");
    // `setsid` leaves the server's process group (and session) with its
    // stdout and stderr: no signal to the group reaches it.
    let script = format!(
        "setsid sleep 600 & echo $! > '{}'; exec '{}'",
        pid_file.display(),
        env!("CARGO_BIN_EXE_mcp-fault-server")
    );
    let config = McpServerConfig::stdio("escaped", "sh", ["-c", script.as_str()])
        .with_connect_timeout(Duration::from_secs(20));
    let tasks_before = tokio::runtime::Handle::current().metrics().num_alive_tasks();
    let servers = McpServers::connect([config]).await.unwrap();
    let pid: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    servers.shutdown().await;
    let mut alive = usize::MAX;
    for _ in 0..50 {
        alive = tokio::runtime::Handle::current().metrics().num_alive_tasks();
        if alive <= tasks_before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let still_running = running(pid);
    // The test's own leftover: end it.
    let _ = std::process::Command::new("kill").arg(pid.to_string()).status();
    assert!(still_running, "the escaped process should be out of reach of the group signals");
    assert!(alive <= tasks_before, "{alive} tasks alive, {tasks_before} before");
}

/// The `ToolExecutionUpdate` texts and the single result of one agent run.
async fn run_one_call(set: &McpToolSet, name: &str, args: Value) -> (Vec<String>, String, bool) {
    let agent = scripted_agent(vec![tool_turn("c1", name, args), text_turn("done")]);
    let events: Vec<AgentEvent> =
        agent.run(context(set.tools.clone()), vec![Message::user("go")]).collect().await;
    let updates = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionUpdate { partial, .. } => Some(text_of(&partial.content)),
            _ => None,
        })
        .collect();
    let (messages, _) = end(&events);
    let r = results(&messages);
    (updates, text_of(&r[0].content), r[0].is_error)
}

#[tokio::test]
async fn progress_is_rate_limited() {
    let (config, _) = fault_server("fault");
    let limits = McpLimits { progress_interval: Duration::from_secs(3600), ..McpLimits::default() };
    let servers = McpServers::connect([config.with_limits(limits)]).await.unwrap();
    let set = servers.tools();
    let (updates, result, is_error) =
        run_one_call(&set, "fault__slow_progress", json!({"steps": 300, "delay_ms": 0})).await;
    assert!(!is_error, "{result}");
    assert_eq!(result, "done after 300 steps");
    // 300 notifications, one interval: one update.
    assert_eq!(updates, ["1/300: step 1"]);
    servers.shutdown().await;
}

#[tokio::test]
async fn progress_cannot_extend_a_call_past_its_deadline() {
    let (config, _) = fault_server("fault");
    let limits =
        McpLimits { max_call_duration: Duration::from_millis(800), ..McpLimits::default() };
    // Progress every 100 ms keeps the call timeout from firing for the 4 s
    // the call would take.
    let config = config.with_call_timeout(Duration::from_secs(2)).with_limits(limits);
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let started = Instant::now();
    let (updates, result, is_error) =
        run_one_call(&set, "fault__slow_progress", json!({"steps": 40, "delay_ms": 100})).await;
    assert!(is_error);
    assert!(
        result.contains("did not finish `slow_progress` within 800ms, the limit for one call"),
        "{result}"
    );
    assert!(started.elapsed() < Duration::from_millis(3900), "{:?}", started.elapsed());
    assert!(!updates.is_empty());
    // The connection stays.
    let out = invoke(tool(&set, "fault__echo"), json!({"text": "after"})).await.unwrap();
    assert_eq!(text_of(&out.content), "after");
    servers.shutdown().await;
}

/// A clock the test moves by hand.
#[derive(Debug)]
struct ManualClock {
    start: Instant,
    offset: Mutex<Duration>,
}

impl ManualClock {
    fn advance(&self, by: Duration) {
        *self.offset.lock().unwrap() += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.start + *self.offset.lock().unwrap()
    }
}

#[tokio::test]
async fn restarts_back_off_and_their_count_decays() {
    let clock = Arc::new(ManualClock { start: Instant::now(), offset: Mutex::default() });
    let (mut config, _) = fault_server("fault");
    config = config.with_max_restarts(2);
    config.restart_window = Duration::from_secs(3600);
    config.restart_backoff = Duration::from_secs(10);
    config.clock = clock.clone();
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let crash = tool(&set, "fault__crash").clone();
    let echo = tool(&set, "fault__echo").clone();

    // The first restart is immediate.
    let err = invoke(&crash, json!({})).await.unwrap_err();
    assert!(err.0.contains("started again on the next call"), "{err}");
    invoke(&echo, json!({"text": "1"})).await.unwrap();

    // The second waits the backoff, measured from the crash.
    let err = invoke(&crash, json!({})).await.unwrap_err();
    assert!(err.0.contains("it will be started again in 10s"), "{err}");
    clock.advance(Duration::from_secs(4));
    let err = invoke(&echo, json!({"text": "2"})).await.unwrap_err();
    assert!(err.0.contains("is down (last failure: the process exited"), "{err}");
    assert!(err.0.contains("it will be started again in 6s"), "{err}");
    assert!(!servers.refresh().await, "refresh must respect the backoff");
    assert!(matches!(servers.statuses()[0].1, ServerStatus::Down { restartable: true, .. }));
    clock.advance(Duration::from_secs(6));
    invoke(&echo, json!({"text": "3"})).await.unwrap();

    // Both restarts of the window are used.
    invoke(&crash, json!({})).await.unwrap_err();
    let err = invoke(&echo, json!({"text": "4"})).await.unwrap_err();
    assert!(err.0.contains("is down and its 2 restarts are used up"), "{err}");
    assert!(err.0.contains("one is allowed again in 3590s (2 per 3600s)"), "{err}");
    assert!(matches!(servers.statuses()[0].1, ServerStatus::Down { restartable: false, .. }));

    // Days later the old crashes no longer count.
    clock.advance(Duration::from_secs(3 * 24 * 3600));
    assert!(servers.refresh().await);
    assert_eq!(servers.statuses()[0].1, ServerStatus::Up);
    let out = invoke(&echo, json!({"text": "back"})).await.unwrap();
    assert_eq!(text_of(&out.content), "back");
    servers.shutdown().await;
}

#[tokio::test]
async fn only_a_trusted_server_s_annotations_reach_the_descriptors() {
    let annotations = |trusted: bool| async move {
        let (config, _) = fault_server("fault");
        let servers = McpServers::connect([config.with_trusted(trusted)]).await.unwrap();
        let set = servers.tools();
        servers.shutdown().await;
        set.descriptors.into_iter().find(|d| d.name == "fault__echo").unwrap().annotations
    };
    assert_eq!(
        annotations(true).await,
        Some(json!({
            "title": "Echo", "readOnlyHint": true, "idempotentHint": true,
            "destructiveHint": false, "openWorldHint": false
        }))
    );
    // Untrusted: nothing that would let its tools run without asking.
    assert_eq!(annotations(false).await, Some(json!({"title": "Echo"})));
}
