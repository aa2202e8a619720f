//! Durable sessions against a real Restate server on loopback.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use agent_core::check_tool_results;
use llm_core::Message;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::harness::{
    Arrival, Balancer, LoopbackProvider, Proc, RestateServer, Scratch, TestResult, free_port,
    registered_worker, restate_binary, start_worker, wait_listening,
};

pub(crate) fn transcript(value: Value) -> TestResult<Vec<Message>> {
    Ok(serde_json::from_value(value)?)
}

pub(crate) fn marker_lines(dir: &Path, marker: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(format!("marker-{marker}")))
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

pub(crate) async fn next_arrival(
    arrivals: &mut mpsc::UnboundedReceiver<Arrival>,
    what: impl Fn(&Arrival) -> bool,
) -> TestResult<Arrival> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, arrivals.recv()).await {
            Ok(Some(a)) if what(&a) => return Ok(a),
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => {
                return Err("the expected model request did not arrive within 60 s".into());
            }
        }
    }
}

pub(crate) async fn setup_one_worker() -> TestResult<
    Option<(
        RestateServer,
        LoopbackProvider,
        mpsc::UnboundedReceiver<Arrival>,
        Scratch,
        SocketAddr,
    )>,
> {
    let Some(binary) = restate_binary() else { return Ok(None) };
    let server = RestateServer::start(&binary).await?;
    let (provider, arrivals) = LoopbackProvider::start().await?;
    let workspace = Scratch::new("workspace")?;
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    Ok(Some((server, provider, arrivals, workspace, addr)))
}

/// What [`one_worker`] sets up: the server, the loopback provider and its
/// arrivals, the workspace, the worker's address and process, a client.
pub(crate) type OneWorker = (
    RestateServer,
    LoopbackProvider,
    mpsc::UnboundedReceiver<Arrival>,
    Scratch,
    SocketAddr,
    Proc,
    reqwest::Client,
);

/// [`setup_one_worker`] and a worker with `tool_delay_ms` and the variables
/// `env` gives from the server and the workspace, registered; `None` without npm.
pub(crate) async fn one_worker(
    tool_delay_ms: u64,
    env: impl FnOnce(&RestateServer, &Path) -> Vec<(&'static str, String)>,
) -> TestResult<Option<OneWorker>> {
    let Some((server, provider, arrivals, workspace, addr)) = setup_one_worker().await? else {
        return Ok(None);
    };
    let env = env(&server, &workspace.0);
    let worker =
        registered_worker(&server, addr, &provider.base_url, &workspace.0, tool_delay_ms, &env)
            .await?;
    Ok(Some((server, provider, arrivals, workspace, addr, worker, reqwest::Client::new())))
}

/// The file the example worker's hook logs each `before_tool_call` answer to.
pub(crate) fn hook_log(workspace: &Path) -> std::path::PathBuf {
    workspace.join("hook-log")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_runs_tools_keeps_its_transcript_and_takes_steering() -> TestResult {
    let Some((server, _provider, mut arrivals, workspace, _addr, _worker, http)) =
        one_worker(1500, |_, _| Vec::new()).await?
    else {
        return Ok(());
    };

    let reply = server.call(&http, "s1", "message", &json!("hello")).await?;
    let t = server.call(&http, "s1", "transcript", &Value::Null).await?;
    assert_eq!(reply["text"], "echo: hello", "{reply} {t}");
    assert_eq!(reply["reason"], "Completed");

    // A steering message sent while the first tool runs arrives at the next turn.
    let call = {
        let (server_ingress, http) = (server.ingress.clone(), http.clone());
        tokio::spawn(async move {
            http.post(format!("{server_ingress}/AgentSession/s1/message"))
                .json(&json!("markers a,b"))
                .send()
                .await
        })
    };
    next_arrival(&mut arrivals, |a| a.last_role == "user" && a.messages > 2).await?;
    server.call(&http, "s1", "steer", &json!("please stop after this one")).await?;
    let response = call.await??;
    assert!(response.status().is_success(), "message failed: {}", response.text().await?);

    let messages = transcript(server.call(&http, "s1", "transcript", &Value::Null).await?)?;
    assert!(check_tool_results(&messages).is_empty(), "{:?}", check_tool_results(&messages));
    let roles: Vec<String> = messages
        .iter()
        .map(|m| {
            serde_json::to_value(m)
                .ok()
                .and_then(|v| v["role"].as_str().map(str::to_owned))
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "user", "assistant", "toolResult", "user", "assistant"]
    );
    let steering = serde_json::to_value(messages.get(5))?;
    assert_eq!(steering["content"], "please stop after this one");
    assert_eq!(marker_lines(&workspace.0, "a").len(), 1);
    assert!(
        marker_lines(&workspace.0, "b").is_empty(),
        "the steering message redirected the model"
    );
    assert_eq!(marker_lines(&workspace.0, "a").first().map(String::as_str), Some("a s1/3/call_4"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_resumes_and_completed_tools_ran_exactly_once() -> TestResult {
    let Some((server, provider, mut arrivals, workspace, addr, mut worker, http)) =
        one_worker(800, |_, _| Vec::new()).await?
    else {
        return Ok(());
    };
    // Hold every model request, so that a kill lands inside one.
    provider.delay_ms.store(1500, Ordering::SeqCst);
    let call = {
        let (ingress, http) = (server.ingress.clone(), http.clone());
        tokio::spawn(async move {
            let r = http
                .post(format!("{ingress}/AgentSession/crash/message"))
                .json(&json!("markers a,b"))
                .send()
                .await?;
            let status = r.status();
            Ok::<_, reqwest::Error>((status, r.text().await?))
        })
    };

    // Kill 1: the model request after tool `a` arrived, so its step is journaled.
    let second = next_arrival(&mut arrivals, |a| a.last_role == "tool").await?;
    assert_eq!(marker_lines(&workspace.0, "a").len(), 1);
    worker.kill();
    let mut worker = start_worker(addr, &provider.base_url, &workspace.0, 800)?;

    // Kill 2: during a later model request (after tool `b`).
    next_arrival(&mut arrivals, |a| a.last_role == "tool" && a.messages > second.messages).await?;
    assert_eq!(marker_lines(&workspace.0, "b").len(), 1);
    worker.kill();
    let _worker = start_worker(addr, &provider.base_url, &workspace.0, 800)?;

    let (status, body) = tokio::time::timeout(Duration::from_secs(120), call).await???;
    assert!(status.is_success(), "HTTP {status}: {body}");
    let reply: Value = serde_json::from_str(&body)?;
    assert_eq!(reply["text"], "done");
    assert_eq!(marker_lines(&workspace.0, "a"), ["a crash/1/call_2"]);
    assert_eq!(marker_lines(&workspace.0, "b"), ["b crash/3/call_4"]);
    let messages = transcript(server.call(&http, "crash", "transcript", &Value::Null).await?)?;
    assert!(check_tool_results(&messages).is_empty(), "{:?}", check_tool_results(&messages));
    assert_eq!(
        messages.iter().filter(|m| matches!(m, Message::ToolResult(r) if !r.is_error)).count(),
        2
    );
    // Three model requests completed; the two cut off by a kill were sent again.
    let requests = provider.requests.load(Ordering::SeqCst);
    eprintln!("crash test: {requests} model requests for 3 completed steps");
    assert!(requests >= 5, "{requests} model requests");
    Ok(())
}

/// Sessions, turns per session and worker processes of the scale test.
const SESSIONS: usize = 500;
const TURNS: usize = 3;
const WORKERS: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_serve_500_concurrent_sessions_of_three_turns() -> TestResult {
    let Some(binary) = restate_binary() else { return Ok(()) };
    let server = RestateServer::start(&binary).await?;
    let (provider, _arrivals) = LoopbackProvider::start().await?;
    let workspace = Scratch::new("scale")?;
    let mut workers = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..WORKERS {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
        workers.push(start_worker(addr, &provider.base_url, &workspace.0, 0)?);
        wait_listening(addr).await?;
        addrs.push(addr);
    }
    let balancer = Balancer::start(addrs).await?;
    server.register(&format!("http://{}", balancer.addr)).await?;

    let http = reqwest::Client::builder().pool_max_idle_per_host(SESSIONS).build()?;
    let started = Instant::now();
    let mut sessions = tokio::task::JoinSet::new();
    for s in 0..SESSIONS {
        let (ingress, http) = (server.ingress.clone(), http.clone());
        sessions.spawn(async move {
            let mut latencies = Vec::with_capacity(TURNS);
            for t in 0..TURNS {
                let text = format!("session {s} turn {t}");
                let begun = Instant::now();
                let response = http
                    .post(format!("{ingress}/AgentSession/scale-{s}/message"))
                    .json(&json!(text))
                    .send()
                    .await
                    .map_err(|e| format!("session {s} turn {t}: {e}"))?;
                let status = response.status();
                let body = response.text().await.map_err(|e| e.to_string())?;
                latencies.push(begun.elapsed());
                let reply: Value =
                    serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
                if !status.is_success() || reply["text"] != format!("echo: {text}") {
                    return Err(format!("session {s} turn {t}: HTTP {status}: {body}"));
                }
            }
            Ok::<_, String>(latencies)
        });
    }
    let mut latencies = Vec::with_capacity(SESSIONS * TURNS);
    while let Some(joined) = sessions.join_next().await {
        latencies.extend(joined??);
    }
    let elapsed = started.elapsed();
    assert_eq!(latencies.len(), SESSIONS * TURNS, "every turn of every session completed");

    // None lost: every transcript holds its three exchanges and passes the invariant.
    for s in 0..SESSIONS {
        let messages = transcript(
            server.call(&http, &format!("scale-{s}"), "transcript", &Value::Null).await?,
        )?;
        assert_eq!(messages.len(), 2 * TURNS, "session {s}");
        assert!(check_tool_results(&messages).is_empty());
    }

    latencies.sort();
    let pick = |q: f64| {
        latencies[((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1]
    };
    let connections: Vec<usize> =
        balancer.connections.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    println!(
        "scale: {SESSIONS} sessions x {TURNS} turns on {WORKERS} workers in {:.2} s: {:.0} turns/s, per-turn latency p50 {} ms, p99 {} ms, max {} ms; model requests {}; connections per worker {connections:?}",
        elapsed.as_secs_f64(),
        (SESSIONS * TURNS) as f64 / elapsed.as_secs_f64(),
        pick(0.50).as_millis(),
        pick(0.99).as_millis(),
        pick(1.0).as_millis(),
        provider.requests.load(Ordering::SeqCst),
    );
    assert!(connections.iter().all(|&c| c > 0), "both workers served: {connections:?}");
    drop(workers);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restate_cancel_aborts_the_run_at_the_next_step_and_keeps_a_valid_transcript() -> TestResult
{
    let Some((server, provider, mut arrivals, workspace, _addr, _worker, http)) =
        one_worker(200, |_, _| Vec::new()).await?
    else {
        return Ok(());
    };
    provider.delay_ms.store(1000, Ordering::SeqCst);
    let sent: Value = http
        .post(format!("{}/AgentSession/cancel-me/message/send", server.ingress))
        .json(&json!("markers a,b,c"))
        .send()
        .await?
        .json()
        .await?;
    let id = sent["invocationId"].as_str().ok_or("no invocation id")?.to_owned();

    // Cancel while the model request after tool `a` is in flight.
    next_arrival(&mut arrivals, |a| a.last_role == "tool").await?;
    let cancel = http.patch(format!("{}/invocations/{id}/cancel", server.admin)).send().await?;
    assert!(cancel.status().is_success(), "cancel: {}", cancel.text().await?);

    let attach = http.get(format!("{}/restate/invocation/{id}/attach", server.ingress)).send();
    let finished = tokio::time::timeout(Duration::from_secs(60), attach).await??;
    let status = finished.status();
    let body = finished.text().await?;
    assert!(!status.is_success(), "a cancelled invocation fails: HTTP {status}: {body}");

    let messages = transcript(server.call(&http, "cancel-me", "transcript", &Value::Null).await?)?;
    assert!(check_tool_results(&messages).is_empty(), "{:?}", check_tool_results(&messages));
    assert_eq!(marker_lines(&workspace.0, "a").len(), 1);
    assert!(
        marker_lines(&workspace.0, "b").is_empty() && marker_lines(&workspace.0, "c").is_empty()
    );
    let last = serde_json::to_value(messages.last())?;
    assert_eq!(last["stopReason"], "aborted", "{last}");
    Ok(())
}
