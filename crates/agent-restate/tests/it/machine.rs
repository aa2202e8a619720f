//! The durable driver of the stepping machine against a real Restate server on
//! loopback: parallel waves, journaled hooks, cancels, approvals, retries,
//! idempotency keys, private handlers and the setup fingerprint.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use agent_core::check_tool_results;
use llm_core::Message;
use serde_json::{Value, json};

use crate::durable::{
    hook_log, marker_lines, next_arrival, one_worker, setup_one_worker, transcript,
};
use crate::harness::{
    LoopbackProvider, RestateServer, Scratch, TestResult, attach, free_port, registered_worker,
    restate_binary, send, start_worker_with, wait_listening,
};

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

async fn wait_for(what: &str, mut ready: impl FnMut() -> bool) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        if Instant::now() > deadline {
            return Err(format!("{what} did not happen within 60 s").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

fn tool_results(messages: &[Message]) -> Vec<(bool, String)> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some((
                r.is_error,
                serde_json::to_value(&r.content).map(|v| v.to_string()).unwrap_or_default(),
            )),
            _ => None,
        })
        .collect()
}

const PARALLEL_DELAY_MS: u64 = 2000;

/// Sends a decision (`approve` or `deny`) until a call waits for it: the call
/// registers itself with a one-way call after its hook's step, and the server
/// may still be taking its partitions back after a restart.
pub(crate) async fn decide_when_waiting(
    server: &RestateServer,
    http: &reqwest::Client,
    key: &str,
    handler: &str,
    body: &Value,
) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match server.call(http, key, handler, body).await {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}

/// The rows of Restate's state table for `object`/`key` (admin SQL), as text.
async fn object_state(
    server: &RestateServer,
    http: &reqwest::Client,
    object: &str,
    key: &str,
) -> TestResult<String> {
    let sql = format!(
        "SELECT key, value_utf8 FROM state WHERE service_name = '{object}' AND service_key = '{key}'"
    );
    Ok(Value::Array(server.query(http, &sql).await?).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_run_leaves_no_waiting_approval_and_a_stale_decision_is_refused() -> TestResult {
    let Some((server, _provider, _arrivals, workspace, _addr, _worker, http)) =
        one_worker(0, |_, workspace| {
            vec![
                ("CLAW_APPROVE", "1".to_owned()),
                ("CLAW_HOOK_LOG", hook_log(workspace).display().to_string()),
            ]
        })
        .await?
    else {
        return Ok(());
    };
    let log = hook_log(&workspace.0);
    let id = send(&http, &server.ingress, "stale", "markers ask1").await?;
    wait_for("the approval request", || !lines(&log).is_empty()).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !object_state(&server, &http, "SessionApprovals", "stale").await?.contains("call_2") {
        assert!(Instant::now() < deadline, "the call never registered its approval");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let cancel = http.patch(format!("{}/invocations/{id}/cancel", server.admin)).send().await?;
    assert!(cancel.status().is_success(), "cancel: {}", cancel.text().await?);
    let (status, _) = attach(&http, &server.ingress, &id).await?;
    assert!(!status.is_success(), "the cancelled run failed");

    // The withdrawal is a one-way call at the run's end: give it a moment.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let state = object_state(&server, &http, "SessionApprovals", "stale").await?;
        if !state.contains("call_2") {
            break;
        }
        assert!(Instant::now() < deadline, "a stale approval entry stayed behind: {state}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (handler, body) in [
        ("approve", json!("call_2")),
        ("deny", json!({"callId": "call_2"})),
        ("approve", json!("call_never_made")),
    ] {
        let refused = server.call(&http, "stale", handler, &body).await;
        let error = refused.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            error.contains("HTTP 404") && error.contains("no call"),
            "{handler} {body}: {error}"
        );
    }
    let messages = transcript(server.call(&http, "stale", "transcript", &Value::Null).await?)?;
    assert!(check_tool_results(&messages).is_empty(), "{:?}", check_tool_results(&messages));
    assert!(marker_lines(&workspace.0, "ask1").is_empty(), "the call never ran");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parallel_batch_takes_its_slowest_tools_time_and_runs_each_tool_once() -> TestResult {
    let Some((server, provider, _arrivals, workspace, addr)) = setup_one_worker().await? else {
        return Ok(());
    };
    let http = reqwest::Client::new();
    let mut elapsed = Vec::new();
    for (parallel, session) in [("1", "par"), ("0", "seq")] {
        let worker = registered_worker(
            &server,
            addr,
            &provider.base_url,
            &workspace.0,
            PARALLEL_DELAY_MS,
            &[("CLAW_PARALLEL", parallel.into())],
        )
        .await?;
        let begun = Instant::now();
        let markers = format!("parallel {session}1,{session}2,{session}3");
        let reply = server.call(&http, session, "message", &json!(markers)).await?;
        elapsed.push(begun.elapsed());
        assert_eq!(reply["text"], "done", "{reply}");
        for i in 1..=3 {
            let written = marker_lines(&workspace.0, &format!("{session}{i}"));
            assert_eq!(written.len(), 1, "{session}{i}: {written:?}");
        }
        let messages = transcript(server.call(&http, session, "transcript", &Value::Null).await?)?;
        assert!(check_tool_results(&messages).is_empty(), "{:?}", check_tool_results(&messages));
        assert_eq!(tool_results(&messages).iter().filter(|(e, _)| !e).count(), 3);
        drop(worker);
    }
    println!(
        "parallel batch of 3 tools of {PARALLEL_DELAY_MS} ms: parallel {} ms, sequential {} ms (one turn each, with two model requests)",
        elapsed[0].as_millis(),
        elapsed[1].as_millis()
    );
    // Three tools of 2 s: one after another they take 6 s, together 2 s. Both
    // runs share the machine's load, so the parallel one must have saved at
    // least one tool's time against the sequential one (not an absolute figure).
    assert!(
        elapsed[0] + Duration::from_millis(PARALLEL_DELAY_MS) < elapsed[1],
        "the parallel batch took {elapsed:?}"
    );
    assert!(elapsed[1] >= Duration::from_millis(3 * PARALLEL_DELAY_MS));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_never_asks_a_hook_again_nor_reruns_a_recorded_tool() -> TestResult {
    let Some((server, provider, mut arrivals, workspace, addr)) = setup_one_worker().await? else {
        return Ok(());
    };
    let log = workspace.0.join("hook-log");
    let env = [("CLAW_PARALLEL", "1".to_owned()), ("CLAW_HOOK_LOG", log.display().to_string())];
    provider.delay_ms.store(1500, Ordering::SeqCst);
    let mut worker =
        registered_worker(&server, addr, &provider.base_url, &workspace.0, 0, &env).await?;
    let http = reqwest::Client::new();
    let id = send(&http, &server.ingress, "replay", "parallel r1,r2").await?;
    // A follower polls the events while the run goes on (and is killed),
    // passing the last number it saw.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let follower = {
        let (http, ingress, stop) = (http.clone(), server.ingress.clone(), stop.clone());
        tokio::spawn(async move {
            let mut seen: Vec<(u64, Value)> = Vec::new();
            let mut polls = 0u32;
            loop {
                let last_pass = stop.load(Ordering::SeqCst);
                let after = seen.last().map_or(0, |(seq, _)| *seq);
                let page = http
                    .post(format!("{ingress}/SessionEvents/replay/read"))
                    .json(&json!(after))
                    .send()
                    .await;
                if let Ok(page) = page
                    && let Ok(page) = page.json::<Value>().await
                {
                    polls += 1;
                    for event in page["events"].as_array().into_iter().flatten() {
                        seen.push((event[0].as_u64().unwrap_or(0), event[1].clone()));
                    }
                }
                if last_pass {
                    return (seen, polls);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    // The request after the batch is in flight: every hook answer and tool of
    // the batch is journaled. Kill the worker there, twice.
    next_arrival(&mut arrivals, |a| a.last_role == "tool").await?;
    worker.kill();
    let mut worker = start_worker_with(addr, &provider.base_url, &workspace.0, 0, &env)?;
    next_arrival(&mut arrivals, |a| a.last_role == "tool").await?;
    worker.kill();
    let _worker = start_worker_with(addr, &provider.base_url, &workspace.0, 0, &env)?;

    let (status, body) = attach(&http, &server.ingress, &id).await?;
    assert!(status.is_success(), "HTTP {status}: {body}");
    assert_eq!(serde_json::from_str::<Value>(&body)?["text"], "done");
    assert_eq!(lines(&log).len(), 2, "before_tool_call asked once per call: {:?}", lines(&log));
    assert_eq!(marker_lines(&workspace.0, "r1"), ["r1 replay/1/call_2_0"]);
    assert_eq!(marker_lines(&workspace.0, "r2"), ["r2 replay/1/call_2_1"]);
    let messages = transcript(server.call(&http, "replay", "transcript", &Value::Null).await?)?;
    assert!(check_tool_results(&messages).is_empty(), "{:?}", check_tool_results(&messages));

    // A follower sees every event of the run once, numbered without gaps,
    // though the run was replayed twice.
    let page = http
        .post(format!("{}/SessionEvents/replay/read", server.ingress))
        .json(&json!(0))
        .send()
        .await?
        .json::<Value>()
        .await?;
    let events = page["events"].as_array().cloned().unwrap_or_default();
    let seqs: Vec<u64> = events.iter().filter_map(|e| e[0].as_u64()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "{page}");
    let count = |kind: &str| events.iter().filter(|e| e[1]["type"] == kind).count();
    assert_eq!(count("agent_start"), 1, "{page}");
    assert_eq!(count("agent_end"), 1, "{page}");
    assert_eq!(count("tool_execution_start"), 2, "{page}");
    assert_eq!(count("tool_execution_end"), 2, "{page}");
    assert_eq!(count("turn_end"), 2, "{page}");

    // What the follower took page by page is that list: each event once, in order.
    stop.store(true, Ordering::SeqCst);
    let (followed, polls) = follower.await?;
    let followed_seqs: Vec<u64> = followed.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(followed_seqs, seqs, "the follower saw an event twice or missed one");
    let kinds = |list: &[Value]| list.iter().map(|e| e["type"].clone()).collect::<Vec<_>>();
    let page_events: Vec<Value> = events.iter().map(|e| e[1].clone()).collect();
    let followed_events: Vec<Value> = followed.into_iter().map(|(_, e)| e).collect();
    assert_eq!(kinds(&followed_events), kinds(&page_events));
    assert!(polls > 10, "the follower polled while the run went on ({polls} polls)");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_while_a_tool_runs_keeps_the_tools_result() -> TestResult {
    let Some((server, _provider, _arrivals, workspace, _addr, _worker, http)) =
        one_worker(3000, |_, _| Vec::new()).await?
    else {
        return Ok(());
    };
    let id = send(&http, &server.ingress, "keep", "markers k1,k2").await?;
    // The tool wrote its line and now holds for 3 s: cancel inside the step.
    wait_for("the first tool's write", || !marker_lines(&workspace.0, "k1").is_empty()).await?;
    let cancel = http.patch(format!("{}/invocations/{id}/cancel", server.admin)).send().await?;
    assert!(cancel.status().is_success(), "cancel: {}", cancel.text().await?);
    let (status, body) = attach(&http, &server.ingress, &id).await?;
    assert!(!status.is_success(), "a cancelled invocation fails: HTTP {status}: {body}");

    let messages = transcript(server.call(&http, "keep", "transcript", &Value::Null).await?)?;
    assert!(check_tool_results(&messages).is_empty(), "{:?}", check_tool_results(&messages));
    let results = tool_results(&messages);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].0 && results[0].1.contains("appended to marker-k1"), "{results:?}");
    assert_eq!(marker_lines(&workspace.0, "k1").len(), 1);
    assert!(marker_lines(&workspace.0, "k2").is_empty());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_waits_on_an_awakeable_and_resolves_after_every_process_restarted() -> TestResult
{
    let Some((mut server, provider, _arrivals, workspace, addr)) = setup_one_worker().await? else {
        return Ok(());
    };
    let log = workspace.0.join("hook-log");
    let env = [("CLAW_APPROVE", "1".to_owned()), ("CLAW_HOOK_LOG", log.display().to_string())];
    let mut worker =
        registered_worker(&server, addr, &provider.base_url, &workspace.0, 0, &env).await?;
    let http = reqwest::Client::new();
    let id = send(&http, &server.ingress, "ask", "markers ask1,b").await?;
    wait_for("the approval request", || !lines(&log).is_empty()).await?;
    // Give the registration (a one-way call after the hook's step) time to land.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // Every process restarts: the worker, and the Restate server.
    worker.kill();
    server.restart().await?;
    let _worker = start_worker_with(addr, &provider.base_url, &workspace.0, 0, &env)?;
    wait_listening(addr).await?;
    assert!(marker_lines(&workspace.0, "ask1").is_empty(), "the call waits for approval");

    decide_when_waiting(&server, &http, "ask", "approve", &json!("call_2")).await?;
    let (status, body) = attach(&http, &server.ingress, &id).await?;
    assert!(status.is_success(), "HTTP {status}: {body}");
    assert_eq!(serde_json::from_str::<Value>(&body)?["text"], "done");
    assert_eq!(marker_lines(&workspace.0, "ask1"), ["ask1 ask/1/call_2"]);
    assert_eq!(lines(&log).len(), 2, "each call asked once: {:?}", lines(&log));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_tells_the_model_and_the_run_goes_on() -> TestResult {
    let Some((server, _provider, _arrivals, workspace, _addr, _worker, http)) =
        one_worker(0, |_, workspace| {
            vec![
                ("CLAW_APPROVE", "1".to_owned()),
                ("CLAW_HOOK_LOG", hook_log(workspace).display().to_string()),
            ]
        })
        .await?
    else {
        return Ok(());
    };
    // Decided before the call asks: refused, not kept for a call that may never ask.
    let early = server
        .call(&http, "deny", "deny", &json!({"callId": "call_2", "reason": "not today"}))
        .await;
    let error = early.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(error.contains("HTTP 404") && error.contains("no call"), "{error}");
    let id = send(&http, &server.ingress, "deny", "markers ask1").await?;
    let decision = json!({"callId": "call_2", "reason": "not today"});
    decide_when_waiting(&server, &http, "deny", "deny", &decision).await?;
    let (status, body) = attach(&http, &server.ingress, &id).await?;
    assert!(status.is_success(), "HTTP {status}: {body}");
    assert_eq!(serde_json::from_str::<Value>(&body)?["text"], "done", "{body}");
    assert!(marker_lines(&workspace.0, "ask1").is_empty());
    let messages = transcript(server.call(&http, "deny", "transcript", &Value::Null).await?)?;
    let results = tool_results(&messages);
    assert!(
        results.len() == 1 && results[0].0 && results[0].1.contains("not today"),
        "{results:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_model_failure_is_retried_durably_not_recorded_as_the_answer() -> TestResult {
    let Some((server, provider, _arrivals, workspace, addr)) = setup_one_worker().await? else {
        return Ok(());
    };
    let env = [("CLAW_MODEL_RETRY_MS", "100".to_owned())];
    let _worker =
        registered_worker(&server, addr, &provider.base_url, &workspace.0, 0, &env).await?;
    let http = reqwest::Client::new();
    // More failures in a row than the HTTP layer retries.
    let reply = server.call(&http, "flaky", "message", &json!("flaky 8")).await?;
    assert_eq!(reply["reason"], "Completed", "{reply}");
    assert_eq!(reply["text"], "echo: flaky 8", "{reply}");
    let requests = provider.requests.load(Ordering::SeqCst);
    assert!(requests >= 9, "{requests} requests");
    let messages = transcript(server.call(&http, "flaky", "transcript", &Value::Null).await?)?;
    assert_eq!(messages.len(), 2, "only the answer is recorded: {messages:?}");

    // A bounded policy: past its attempts the failure is the recorded answer.
    let env = [("CLAW_MODEL_RETRY_MS", "50".to_owned()), ("CLAW_MODEL_RETRY_ATTEMPTS", "2".into())];
    let addr2: SocketAddr = format!("127.0.0.1:{}", crate::harness::free_port()?).parse()?;
    let _worker2 =
        registered_worker(&server, addr2, &provider.base_url, &workspace.0, 0, &env).await?;
    let reply = server.call(&http, "flaky2", "message", &json!("flaky 1000")).await?;
    assert_eq!(reply["reason"], "Error", "{reply}");
    let messages = transcript(server.call(&http, "flaky2", "transcript", &Value::Null).await?)?;
    let last = serde_json::to_value(messages.last())?;
    assert_eq!(last["stopReason"], "error", "{last}");
    assert!(last["errorMessage"].as_str().unwrap_or("").contains("after 2 attempts"), "{last}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_keeps_the_sessions_stored_turns() -> TestResult {
    let Some((server, _provider, _arrivals, _workspace, _addr, _worker, http)) =
        one_worker(0, |_, _| vec![("CLAW_PANIC_WORD", "explode".to_owned())]).await?
    else {
        return Ok(());
    };
    server.call(&http, "fail", "message", &json!("hello")).await?;
    let reply = server.call(&http, "fail", "message", &json!("explode")).await?;
    assert_eq!(reply["reason"], "Failed", "{reply}");
    let messages = transcript(server.call(&http, "fail", "transcript", &Value::Null).await?)?;
    let roles: Vec<Value> = messages
        .iter()
        .map(|m| serde_json::to_value(m).map(|v| v["role"].clone()))
        .collect::<Result<_, _>>()?;
    // The stored turn is kept, and the failed run's own messages follow it.
    assert_eq!(roles, [json!("user"), json!("assistant"), json!("user"), json!("assistant")]);
    let failed = serde_json::to_value(&messages[3])?;
    assert_eq!(failed["stopReason"], "error", "{failed}");
    assert!(failed["errorMessage"].as_str().unwrap_or("").contains("told to panic"), "{failed}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_keys_stay_unique_when_a_provider_reuses_call_ids() -> TestResult {
    let Some((server, _provider, _arrivals, workspace, _addr, _worker, http)) =
        one_worker(0, |_, _| Vec::new()).await?
    else {
        return Ok(());
    };
    let reply = server.call(&http, "reuse", "message", &json!("reuse u1,u2")).await?;
    assert_eq!(reply["text"], "done", "{reply}");
    assert_eq!(marker_lines(&workspace.0, "u1"), ["u1 reuse/1/call_same"]);
    assert_eq!(marker_lines(&workspace.0, "u2"), ["u2 reuse/3/call_same"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_client_message_runs_once_and_the_inbox_is_private() -> TestResult {
    let Some((server, provider, _arrivals, _workspace, _addr, _worker, http)) =
        one_worker(0, |_, _| Vec::new()).await?
    else {
        return Ok(());
    };
    let mut replies = Vec::new();
    for _ in 0..2 {
        let response = http
            .post(format!("{}/AgentSession/idem/message", server.ingress))
            .header("idempotency-key", "client-retry-1")
            .json(&json!("once"))
            .send()
            .await?;
        assert!(response.status().is_success());
        replies.push(response.json::<Value>().await?);
    }
    assert_eq!(replies[0], replies[1]);
    assert_eq!(provider.requests.load(Ordering::SeqCst), 1, "the retry ran no second turn");
    let messages = transcript(server.call(&http, "idem", "transcript", &Value::Null).await?)?;
    assert_eq!(messages.len(), 2);

    // The inbox is bounded: a steer past its limit fails instead of growing it.
    for i in 0..agent_restate::INBOX_LIMIT {
        server.call(&http, "full", "steer", &json!(format!("steer {i}"))).await?;
    }
    let over = server.call(&http, "full", "steer", &json!("one too many")).await;
    let error = over.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(error.contains("HTTP 429") && error.contains("inbox holds"), "{error}");

    for (object, handler, body) in [
        ("SessionInbox", "since", json!(0)),
        ("SessionInbox", "ack", json!(100)),
        ("SessionInbox", "push", json!("x")),
        ("SessionApprovals", "decide", json!({"call_id": "c"})),
    ] {
        let response = http
            .post(format!("{}/{object}/idem/{handler}", server.ingress))
            .json(&body)
            .send()
            .await?;
        assert!(
            response.status().is_client_error(),
            "{object}/{handler} from the ingress: HTTP {}",
            response.status()
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_on_a_build_with_another_setup_fails_with_a_clear_error() -> TestResult {
    let Some((server, provider, mut arrivals, workspace, addr)) = setup_one_worker().await? else {
        return Ok(());
    };
    provider.delay_ms.store(1500, Ordering::SeqCst);
    // The retry bound is the deployment's (registered from the first build).
    let bounded = [
        ("CLAW_MESSAGE_MAX_ATTEMPTS", "6".to_owned()),
        ("CLAW_ON_MAX_ATTEMPTS", "kill".to_owned()),
    ];
    let mut worker =
        registered_worker(&server, addr, &provider.base_url, &workspace.0, 0, &bounded).await?;
    let http = reqwest::Client::new();
    let id = send(&http, &server.ingress, "upgrade", "markers v1").await?;
    next_arrival(&mut arrivals, |_| true).await?;
    worker.kill();
    let mut env = bounded.to_vec();
    env.push(("CLAW_SYSTEM_PROMPT", "Another build's prompt.".to_owned()));
    let _worker = start_worker_with(addr, &provider.base_url, &workspace.0, 0, &env)?;
    // Every attempt on the other build fails with the clear error, never a
    // journal mismatch; after the bound the invocation fails for good.
    let (status, body) = attach(&http, &server.ingress, &id).await?;
    assert!(!status.is_success(), "HTTP {status}: {body}");
    let query = json!({"query": format!(
        "SELECT status, last_failure, completion_result, completion_failure FROM sys_invocation WHERE id = '{id}'"
    )});
    let state = http
        .post(format!("{}/query", server.admin))
        .header("accept", "application/json")
        .json(&query)
        .send()
        .await?
        .text()
        .await?;
    eprintln!("upgrade: the attach answered HTTP {status}: {body}; the invocation: {state}");
    assert!(state.contains("another setup"), "{state} / {body}");
    assert!(!state.contains("mismatch"), "{state}");
    assert!(marker_lines(&workspace.0, "v1").is_empty(), "the other build ran nothing: {state}");
    // The session is not locked: the next message runs on the new build.
    provider.delay_ms.store(0, Ordering::SeqCst);
    let reply = server.call(&http, "upgrade", "message", &json!("after")).await?;
    assert_eq!(reply["text"], "echo: after");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_past_the_step_ceiling_gets_an_error_result_and_the_run_goes_on() -> TestResult {
    let Some((server, _provider, _arrivals, _workspace, _addr, _worker, http)) =
        one_worker(60_000, |_, _| vec![("CLAW_STEP_TIMEOUT_MS", "1000".to_owned())]).await?
    else {
        return Ok(());
    };
    let begun = Instant::now();
    let reply = server.call(&http, "slow", "message", &json!("markers s1")).await?;
    assert_eq!(reply["text"], "done", "{reply}");
    assert!(begun.elapsed() < Duration::from_secs(30), "{:?}", begun.elapsed());
    let messages = transcript(server.call(&http, "slow", "transcript", &Value::Null).await?)?;
    let results = tool_results(&messages);
    assert!(
        results.len() == 1 && results[0].0 && results[0].1.contains("did not finish"),
        "{results:?}"
    );
    Ok(())
}

/// A transcript as the previous version stored it: the whole transcript as
/// one state value under `transcript` (written by hand from that format).
const LEGACY_TRANSCRIPT: &str = include_str!("../fixtures/transcript-v1.json");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcript_stored_whole_by_the_previous_version_still_loads() -> TestResult {
    let legacy = agent_restate::decode_legacy_transcript(LEGACY_TRANSCRIPT.as_bytes())?;
    assert_eq!(legacy.len(), 4);
    assert!(check_tool_results(&legacy).is_empty());

    let Some((server, _provider, _arrivals, _workspace, _addr, _worker, http)) =
        one_worker(0, |_, _| Vec::new()).await?
    else {
        return Ok(());
    };
    // Restate's admin API writes the old layout's state, as the old build left it.
    let state = json!({
        "object_key": "legacy",
        "new_state": { "transcript": LEGACY_TRANSCRIPT.as_bytes() },
    });
    let written = http
        .post(format!("{}/services/AgentSession/state", server.admin))
        .json(&state)
        .send()
        .await?;
    assert!(written.status().is_success(), "state: {}", written.text().await?);
    let before = transcript(server.call(&http, "legacy", "transcript", &Value::Null).await?)?;
    assert_eq!(before, legacy);

    let reply = server.call(&http, "legacy", "message", &json!("next")).await?;
    assert_eq!(reply["text"], "echo: next", "{reply}");
    let after = transcript(server.call(&http, "legacy", "transcript", &Value::Null).await?)?;
    assert_eq!(after.len(), 6, "{after:?}");
    assert_eq!(after[..4], legacy[..]);
    // Moved to the incremental layout: a second turn appends to it.
    server.call(&http, "legacy", "message", &json!("again")).await?;
    let again = transcript(server.call(&http, "legacy", "transcript", &Value::Null).await?)?;
    assert_eq!(again.len(), 8);
    assert_eq!(again[..6], after[..]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_tool_stalls_no_other_session() -> TestResult {
    let Some((server, _provider, mut arrivals, _workspace, _addr, _worker, http)) =
        one_worker(0, |_, _| vec![("CLAW_WORKER_THREADS", "1".to_owned())]).await?
    else {
        return Ok(());
    };
    // One runtime thread: a tool run on it would stall every other session.
    let held = send(&http, &server.ingress, "holder", "hold 6000").await?;
    next_arrival(&mut arrivals, |_| true).await?;
    // Let the model step end and the tool start holding its thread.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let begun = Instant::now();
    let reply = server.call(&http, "other", "message", &json!("meanwhile")).await?;
    let other = begun.elapsed();
    assert_eq!(reply["text"], "echo: meanwhile");
    let (status, body) = attach(&http, &server.ingress, &held).await?;
    let holding = begun.elapsed();
    assert!(status.is_success(), "HTTP {status}: {body}");
    assert_eq!(serde_json::from_str::<Value>(&body)?["text"], "done");
    println!(
        "blocking tool: another session's turn took {} ms while it held its thread",
        other.as_millis()
    );
    // The other session did not wait for the held thread: the tool holds it
    // for about 5 s more after `begun` (a stalled turn took 5.2 s when the
    // driver ran the tool on the handler's thread; 0.08 s on the blocking pool).
    assert!(
        other < Duration::from_millis(2500) && other < holding,
        "the other turn took {other:?}, the held one ended after {holding:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_sent_to_a_cancelled_run_reaches_the_next_message() -> TestResult {
    let Some((server, _provider, _arrivals, workspace, _addr, _worker, http)) =
        one_worker(3000, |_, _| Vec::new()).await?
    else {
        return Ok(());
    };
    let id = send(&http, &server.ingress, "steered", "markers s1,s2").await?;
    wait_for("the first tool's write", || !marker_lines(&workspace.0, "s1").is_empty()).await?;
    // Steering queued while the tool holds, then the run is cancelled before
    // the steering reached the transcript.
    server.call(&http, "steered", "steer", &json!("remember me")).await?;
    let cancel = http.patch(format!("{}/invocations/{id}/cancel", server.admin)).send().await?;
    assert!(cancel.status().is_success(), "cancel: {}", cancel.text().await?);
    let (status, _) = attach(&http, &server.ingress, &id).await?;
    assert!(!status.is_success());
    let messages = transcript(server.call(&http, "steered", "transcript", &Value::Null).await?)?;
    let texts = |messages: &[Message]| -> Vec<String> {
        messages
            .iter()
            .filter_map(|m| match m {
                Message::User(u) => match &u.content {
                    llm_core::UserMessageContent::Text(t) => Some(t.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    };
    assert!(!texts(&messages).contains(&"remember me".to_owned()), "{messages:?}");

    // The next message delivers it: after its own turn, as steering.
    let reply = server.call(&http, "steered", "message", &json!("hello")).await?;
    assert_eq!(reply["text"], "echo: remember me", "{reply}");
    let messages = transcript(server.call(&http, "steered", "transcript", &Value::Null).await?)?;
    let users = texts(&messages);
    assert_eq!(users.iter().filter(|t| *t == "remember me").count(), 1, "{users:?}");
    assert_eq!(users.last().map(String::as_str), Some("remember me"), "{users:?}");
    // Acknowledged with that transcript: a third message does not see it again.
    let reply = server.call(&http, "steered", "message", &json!("again")).await?;
    assert_eq!(reply["text"], "echo: again", "{reply}");
    Ok(())
}

/// Bitcoin's base58, which Restate's `publickeyv1_` keys use.
fn base58(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    let mut digits: Vec<u8> = Vec::new();
    for &byte in bytes {
        let mut carry = u32::from(byte);
        for digit in &mut digits {
            carry += u32::from(*digit) << 8;
            *digit = (carry % 58) as u8;
            carry /= 58;
        }
        while carry > 0 {
            digits.push((carry % 58) as u8);
            carry /= 58;
        }
    }
    let zeros = bytes.iter().take_while(|&&b| b == 0).count();
    let mut out: String = std::iter::repeat_n('1', zeros).collect();
    out.extend(digits.iter().rev().map(|&d| char::from(ALPHABET[usize::from(d)])));
    out
}

/// A new Ed25519 key pair made by openssl: the private key's PEM file and the
/// public key as Restate writes it (`publickeyv1_` and the raw key in base58).
fn identity_key(dir: &Path, name: &str) -> TestResult<Option<(std::path::PathBuf, String)>> {
    let pem = dir.join(format!("{name}.pem"));
    let made = std::process::Command::new("openssl")
        .args(["genpkey", "-algorithm", "ed25519", "-out"])
        .arg(&pem)
        .output();
    let Ok(made) = made else {
        eprintln!("SKIPPED: openssl is not installed; it makes the identity keys");
        return Ok(None);
    };
    assert!(made.status.success(), "openssl genpkey: {}", String::from_utf8_lossy(&made.stderr));
    let public = std::process::Command::new("openssl")
        .args(["pkey", "-pubout", "-outform", "DER", "-in"])
        .arg(&pem)
        .output()?;
    assert!(public.status.success(), "openssl pkey: {}", String::from_utf8_lossy(&public.stderr));
    // The DER SubjectPublicKeyInfo of an Ed25519 key ends with the 32-byte key.
    let raw = &public.stdout[public.stdout.len() - 32..];
    Ok(Some((pem, format!("publickeyv1_{}", base58(raw)))))
}

#[test]
fn base58_matches_the_reference_vectors() {
    // Vectors from the base58 reference (Bitcoin's alphabet).
    assert_eq!(base58(b"Hello World!"), "2NEpo7TZRRrLZSi2U");
    assert_eq!(base58(&[0, 0, 0x28, 0x7f, 0xb4, 0xcd]), "11233QC4");
    assert_eq!(base58(b""), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_or_with_a_wrong_identity_is_refused() -> TestResult {
    let Some(binary) = restate_binary() else { return Ok(()) };
    let keys = Scratch::new("identity")?;
    let Some((server_key, server_public)) = identity_key(&keys.0, "server")? else {
        return Ok(());
    };
    let Some((_, other_public)) = identity_key(&keys.0, "other")? else { return Ok(()) };
    let env = [("RESTATE_REQUEST_IDENTITY_PRIVATE_KEY_PEM_FILE", server_key.display().to_string())];
    let server = RestateServer::start_with(&binary, &env).await?;
    let (provider, _arrivals) = LoopbackProvider::start().await?;
    let workspace = Scratch::new("workspace")?;

    // The worker that trusts this server's key serves it.
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let trusted = [("CLAW_IDENTITY_KEYS", server_public)];
    let _worker =
        registered_worker(&server, addr, &provider.base_url, &workspace.0, 0, &trusted).await?;
    let http = reqwest::Client::new();
    let reply = server.call(&http, "signed", "message", &json!("hello")).await?;
    assert_eq!(reply["text"], "echo: hello");

    // Someone who reaches the worker's port directly, without a signature.
    let direct = reqwest::Client::builder().http2_prior_knowledge().build()?;
    for (method, path) in [
        (reqwest::Method::GET, "discover"),
        (reqwest::Method::POST, "invoke/AgentSession/x/message"),
    ] {
        let response = direct
            .request(method, format!("http://{addr}/{path}"))
            .header("content-type", "application/vnd.restate.invocation.v5")
            .header("accept", "application/vnd.restate.endpointmanifest.v3+json")
            .send()
            .await?;
        assert_eq!(response.status().as_u16(), 401, "unsigned {path}: {}", response.text().await?);
    }

    // A worker that trusts another key refuses this server: registering it fails.
    let other: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let wrong = [("CLAW_IDENTITY_KEYS", other_public)];
    let _other = start_worker_with(other, &provider.base_url, &workspace.0, 0, &wrong)?;
    wait_listening(other).await?;
    let response = http
        .post(format!("{}/deployments", server.admin))
        .json(&json!({ "uri": format!("http://{other}"), "force": true }))
        .send()
        .await?;
    let status = response.status();
    let body = response.text().await?;
    assert!(!status.is_success(), "a worker with another key was registered: {body}");
    assert!(body.contains("401"), "HTTP {status}: {body}");
    assert_eq!(provider.requests.load(Ordering::SeqCst), 1, "no request ran past the check");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_a_final_schema_answers_in_it_across_a_worker_kill() -> TestResult {
    let Some((server, provider, mut arrivals, workspace, addr)) = setup_one_worker().await? else {
        return Ok(());
    };
    provider.delay_ms.store(1500, Ordering::SeqCst);
    let env = [("CLAW_OUTPUT", "weather".to_owned())];
    let mut worker =
        registered_worker(&server, addr, &provider.base_url, &workspace.0, 0, &env).await?;
    let http = reqwest::Client::new();
    let id = send(&http, &server.ingress, "typed", "weather in Paris?").await?;
    // The model answers in prose first; the final turn asks for the format
    // (system, user, the prose answer, the final-answer prompt). Killed there.
    next_arrival(&mut arrivals, |a| a.messages == 4).await?;
    worker.kill();
    let _worker = start_worker_with(addr, &provider.base_url, &workspace.0, 0, &env)?;
    let (status, body) = attach(&http, &server.ingress, &id).await?;
    assert!(status.is_success(), "HTTP {status}: {body}");
    let reply: Value = serde_json::from_str(&body)?;
    assert_eq!(
        reply["output"],
        json!({"status": "valid", "value": {"city": "Paris", "celsius": 21.5}}),
        "{reply}"
    );
    let messages = transcript(server.call(&http, "typed", "transcript", &Value::Null).await?)?;
    let prompt = serde_json::to_value(&messages[2])?;
    assert_eq!(prompt["content"], agent_core::FINAL_ANSWER_PROMPT, "{messages:?}");
    assert_eq!(messages.len(), 4, "{messages:?}");
    // The first request once, the final one twice (cut off by the kill, then again).
    assert_eq!(provider.requests.load(Ordering::SeqCst), 3);
    Ok(())
}
