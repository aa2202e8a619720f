//! Live events: a follower sees the model's token deltas while the step runs,
//! marked by attempt, and a worker killed mid-stream leaves its attempt marked
//! cut off while the retried attempt's deltas arrive once.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::durable::{one_worker, setup_one_worker};
use crate::harness::{TestResult, attach, registered_worker, send, start_worker_with};

static FOLLOWED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// Reads the live events numbered above `after`: `(events, last)`.
async fn read_live(
    http: &reqwest::Client,
    ingress: &str,
    session: &str,
    after: u64,
) -> TestResult<(Vec<(u64, Value)>, u64)> {
    let page: Value = http
        .post(format!("{ingress}/SessionEvents/{session}/read_live"))
        .json(&json!(after))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let events = serde_json::from_value(page["events"].clone())?;
    let last = page["last"].as_u64().ok_or("a page without last")?;
    Ok((events, last))
}

/// Follows the session's live events with a cursor until `done` holds for all
/// seen so far (or 60 s pass); every event is taken once.
async fn follow_until(
    http: &reqwest::Client,
    ingress: &str,
    session: &str,
    seen: &mut Vec<(u64, Value)>,
    done: impl Fn(&[(u64, Value)]) -> bool,
) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut after = seen.last().map_or(0, |(seq, _)| *seq);
    while !done(seen) {
        if Instant::now() > deadline {
            return Err(format!("the live events never met the condition: {seen:?}").into());
        }
        let (events, last) = read_live(http, ingress, session, after).await?;
        for (seq, mut event) in events {
            assert!(seq > after, "event {seq} taken again after {after}");
            // When the follower got it (ms since the first event it followed).
            let start = *FOLLOWED.get_or_init(Instant::now);
            event["followedAtMs"] = json!(start.elapsed().as_millis() as u64);
            after = seq;
            seen.push((seq, event));
        }
        after = after.max(last);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

fn deltas(seen: &[(u64, Value)]) -> Vec<&Value> {
    seen.iter().map(|(_, e)| e).filter(|e| e["type"] == "text_delta").collect()
}

/// The text of `attempt`'s deltas, in their order, and their `seq` numbers.
fn text_of(seen: &[(u64, Value)], attempt: &str) -> (String, Vec<u64>) {
    let mine: Vec<&Value> = deltas(seen).into_iter().filter(|e| e["attempt"] == attempt).collect();
    (
        mine.iter().filter_map(|e| e["delta"].as_str()).collect(),
        mine.iter().filter_map(|e| e["seq"].as_u64()).collect(),
    )
}

/// Whether the session's (journaled) events hold one of type `kind` yet.
async fn has_event(
    http: &reqwest::Client,
    ingress: &str,
    session: &str,
    kind: &str,
) -> TestResult<bool> {
    let page: Value = http
        .post(format!("{ingress}/SessionEvents/{session}/read"))
        .json(&json!(0))
        .send()
        .await?
        .json()
        .await?;
    Ok(page["events"].as_array().is_some_and(|events| events.iter().any(|e| e[1]["type"] == kind)))
}

/// The invocation's reply, once it ended successfully.
async fn reply(http: &reqwest::Client, ingress: &str, id: &str) -> TestResult<Value> {
    let (status, body) = attach(http, ingress, id).await?;
    assert!(status.is_success(), "HTTP {status}: {body}");
    Ok(serde_json::from_str(&body)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_sees_the_models_deltas_before_the_turn_ends() -> TestResult {
    let Some((server, _provider, _arrivals, _workspace, _addr, _worker, http)) =
        one_worker(0, |server, _| vec![("CLAW_INGRESS_URL", server.ingress.clone())]).await?
    else {
        return Ok(());
    };
    let ingress = server.ingress.clone();
    // 40 words 100 ms apart: the turn takes 4 s.
    let id = send(&http, &ingress, "live", "slow 40 100").await?;
    let mut seen = Vec::new();
    follow_until(&http, &ingress, "live", &mut seen, |s| deltas(s).len() >= 3).await?;
    // The turn has not ended: its final event is not among the session's events.
    let ended = has_event(&http, &ingress, "live", "agent_end").await?;
    assert!(!ended, "the deltas arrived only after the turn ended");

    // Followed to the attempt's end while the turn runs, then the reply.
    follow_until(&http, &ingress, "live", &mut seen, |s| {
        s.iter().any(|(_, e)| e["type"] == "attempt_end")
    })
    .await?;
    let reply = reply(&http, &ingress, &id).await?;
    let expected: String =
        (0..40).map(|i| if i == 0 { "w0".to_owned() } else { format!(" w{i}") }).collect();
    assert_eq!(reply["text"], expected.as_str());
    let attempt = deltas(&seen)[0]["attempt"].as_str().ok_or("no attempt")?.to_owned();
    let (text, seqs) = text_of(&seen, &attempt);
    assert_eq!(text, expected, "the deltas are the answer, each once");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "numbered without gaps: {seqs:?}");
    // The provider sends a delta every 100 ms: how late each reached the
    // follower (polling every 50 ms) against that pace, from the first one.
    let at: Vec<u64> = deltas(&seen).iter().filter_map(|e| e["followedAtMs"].as_u64()).collect();
    let lags: Vec<i64> =
        at.iter().enumerate().map(|(i, t)| *t as i64 - at[0] as i64 - 100 * i as i64).collect();
    eprintln!(
        "live deltas: lag behind the provider's pace, max {} ms",
        lags.iter().max().unwrap_or(&0)
    );
    assert_eq!(seen.iter().filter(|(_, e)| e["type"] == "attempt_start").count(), 1);
    assert!(!seen.iter().any(|(_, e)| e["type"] == "attempt_cut"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_stream_leaves_its_attempt_cut_and_the_retry_streams_once() -> TestResult
{
    let Some((server, provider, _arrivals, workspace, addr)) = setup_one_worker().await? else {
        return Ok(());
    };
    let env = [("CLAW_INGRESS_URL", server.ingress.clone())];
    let mut worker =
        registered_worker(&server, addr, &provider.base_url, &workspace.0, 0, &env).await?;
    let http = reqwest::Client::new();
    let ingress = server.ingress.clone();
    let id = send(&http, &ingress, "cut", "slow 30 100").await?;
    let mut seen = Vec::new();
    follow_until(&http, &ingress, "cut", &mut seen, |s| deltas(s).len() >= 5).await?;
    let first = deltas(&seen)[0]["attempt"].as_str().ok_or("no attempt")?.to_owned();
    worker.kill();
    let restarted: SocketAddr = addr;
    let _worker = start_worker_with(restarted, &provider.base_url, &workspace.0, 0, &env)?;
    let reply = reply(&http, &ingress, &id).await?;
    let expected: String =
        (0..30).map(|i| if i == 0 { "w0".to_owned() } else { format!(" w{i}") }).collect();
    assert_eq!(reply["text"], expected.as_str());
    follow_until(&http, &ingress, "cut", &mut seen, |s| {
        s.iter().any(|(_, e)| e["type"] == "attempt_end" && e["attempt"] != first.as_str())
    })
    .await?;
    // The cut-off attempt is marked before the retry's first event.
    let cut = seen
        .iter()
        .position(|(_, e)| e["type"] == "attempt_cut" && e["attempt"] == first.as_str())
        .ok_or("the cut-off attempt is not marked")?;
    let retry_start = seen
        .iter()
        .position(|(_, e)| e["type"] == "attempt_start" && e["attempt"] != first.as_str())
        .ok_or("no second attempt")?;
    assert!(cut < retry_start, "marked at {cut}, retry started at {retry_start}");
    let second = seen[retry_start].1["attempt"].as_str().ok_or("no attempt")?.to_owned();
    let (partial, _) = text_of(&seen, &first);
    assert!(expected.starts_with(&partial) && partial.len() < expected.len(), "{partial:?}");
    let (text, seqs) = text_of(&seen, &second);
    assert_eq!(text, expected, "the retry's deltas, each once");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "numbered without gaps: {seqs:?}");
    // Nothing of the cut attempt after its mark; two attempts in all.
    assert!(
        !seen[cut..]
            .iter()
            .any(|(_, e)| e["attempt"] == first.as_str() && e["type"] != "attempt_cut")
    );
    assert_eq!(seen.iter().filter(|(_, e)| e["type"] == "attempt_start").count(), 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_sees_a_tools_progress_before_its_step_is_recorded() -> TestResult {
    let Some((server, _provider, _arrivals, _workspace, _addr, _worker, http)) =
        one_worker(0, |server, _| vec![("CLAW_INGRESS_URL", server.ingress.clone())]).await?
    else {
        return Ok(());
    };
    let ingress = server.ingress.clone();
    // The `hold` tool reports its progress every 500 ms of its 3 s.
    let id = send(&http, &ingress, "tools", "hold 3000").await?;
    let is_tool = |e: &Value| e["step"].as_str().is_some_and(|s| s.starts_with("tool hold "));
    let mut seen = Vec::new();
    follow_until(&http, &ingress, "tools", &mut seen, |s| {
        s.iter().any(|(_, e)| e["type"] == "tool_progress" && is_tool(e))
    })
    .await?;
    // The call runs: its end is not among the session's events yet.
    let ended = has_event(&http, &ingress, "tools", "tool_execution_end").await?;
    assert!(!ended, "the tool's progress arrived only after its end");
    let reply = reply(&http, &ingress, &id).await?;
    assert_eq!(reply["text"], "done");
    follow_until(&http, &ingress, "tools", &mut seen, |s| {
        s.iter().any(|(_, e)| e["type"] == "attempt_end" && is_tool(e))
    })
    .await?;
    let tool: Vec<&Value> = seen.iter().map(|(_, e)| e).filter(|e| is_tool(e)).collect();
    let kinds: Vec<&str> = tool.iter().filter_map(|e| e["type"].as_str()).collect();
    let mut expected = vec!["attempt_start"];
    expected.extend(["tool_progress"; 6]);
    expected.extend(["tool_result", "attempt_end"]);
    assert_eq!(kinds, expected, "{tool:?}");
    let progress: Vec<&str> =
        tool[1..7].iter().filter_map(|e| e["content"][0]["text"].as_str()).collect();
    let held: Vec<String> = (1..=6).map(|i| format!("held {} of 3000 ms", i * 500)).collect();
    assert_eq!(progress, held);
    // Tagged like the attempt's other events, numbered in order.
    let seqs: Vec<u64> = tool.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs, (0..9).collect::<Vec<u64>>());
    assert!(tool.iter().all(|e| e["attempt"] == tool[0]["attempt"]));
    assert_eq!(tool[7]["isError"], false);
    Ok(())
}
