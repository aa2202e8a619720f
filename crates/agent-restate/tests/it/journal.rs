//! The journal of a turn holds its new messages, not the whole session: a
//! session's journals grow linearly with its length, measured through
//! Restate's admin SQL API (`sys_journal`).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use agent_core::check_tool_results;
use serde_json::{Value, json};

use crate::durable::{next_arrival, one_worker, setup_one_worker, transcript};
use crate::harness::{
    RestateServer, TestResult, attach, free_port, send, start_worker_with, wait_listening,
};

const TURNS: usize = 16;

/// `(entries, bytes)` of an invocation's journal.
async fn journal_size(
    server: &RestateServer,
    http: &reqwest::Client,
    id: &str,
) -> TestResult<(u64, u64)> {
    let sql = format!(
        "SELECT count(*) AS entries, sum(raw_length) AS bytes FROM sys_journal WHERE id = '{id}'"
    );
    let rows = server.query(http, &sql).await?;
    let row = rows.first().ok_or("no row")?;
    match (row["entries"].as_u64(), row["bytes"].as_u64()) {
        (Some(entries), Some(bytes)) if entries > 0 => Ok((entries, bytes)),
        _ => Err(format!("no journal kept for {id}: {rows:?}").into()),
    }
}

/// Prints an invocation's journal entries: what a turn costs, entry by entry.
async fn print_journal(server: &RestateServer, http: &reqwest::Client, id: &str) -> TestResult {
    let sql = format!(
        "SELECT index, entry_type, name, invoked_target, raw_length FROM sys_journal WHERE id = '{id}' ORDER BY index"
    );
    for row in server.query(http, &sql).await? {
        println!(
            "  {} {} {} {} {}",
            row["index"], row["entry_type"], row["name"], row["invoked_target"], row["raw_length"]
        );
    }
    Ok(())
}

/// Runs one turn and returns its invocation's journal size.
async fn turn(
    server: &RestateServer,
    http: &reqwest::Client,
    key: &str,
    text: &str,
) -> TestResult<(u64, u64)> {
    let id = send(http, &server.ingress, key, text).await?;
    let (status, body) = attach(http, &server.ingress, &id).await?;
    let body: Value = serde_json::from_str(&body)?;
    if !status.is_success() || body["text"] != format!("echo: {text}") {
        return Err(format!("turn {text}: HTTP {status}: {body}").into());
    }
    if std::env::var_os("PRINT_JOURNAL").is_some() {
        println!("journal of {key} {text}:");
        print_journal(server, http, &id).await?;
    }
    journal_size(server, http, &id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turns_journal_holds_its_new_messages_not_the_whole_session() -> TestResult {
    let Some((server, provider, mut arrivals, workspace, addr)) = setup_one_worker().await? else {
        return Ok(());
    };
    let env = [
        ("CLAW_INGRESS_URL", server.ingress.clone()),
        ("CLAW_JOURNAL_RETENTION_S", "3600".to_owned()),
    ];
    let mut worker = start_worker_with(addr, &provider.base_url, &workspace.0, 0, &env)?;
    wait_listening(addr).await?;
    // A second deployment reads every turn's transcript through the journal:
    // the growth this layout removes, measured the same way.
    let journaled: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let env_journaled = [("CLAW_JOURNAL_RETENTION_S", "3600".to_owned())];
    let _journaled =
        start_worker_with(journaled, &provider.base_url, &workspace.0, 0, &env_journaled)?;
    wait_listening(journaled).await?;
    let http = reqwest::Client::new();

    server.register(&format!("http://{journaled}")).await?;
    let mut through_journal = Vec::new();
    for t in 0..TURNS {
        through_journal.push(turn(&server, &http, "journaled", &format!("turn {t}")).await?);
    }
    server.register(&format!("http://{addr}")).await?;
    while arrivals.try_recv().is_ok() {}
    let mut incremental = Vec::new();
    for t in 0..TURNS {
        if t == TURNS / 2 {
            // A new process: its copy is gone, the ingress gives the messages.
            worker.kill();
            worker = start_worker_with(addr, &provider.base_url, &workspace.0, 0, &env)?;
            wait_listening(addr).await?;
        }
        incremental.push(turn(&server, &http, "incremental", &format!("turn {t}")).await?);
        // The model saw the whole transcript: system, 2 messages a turn before, the new one.
        let arrival = next_arrival(&mut arrivals, |_| true).await?;
        assert_eq!(arrival.messages, 2 * t + 2, "turn {t}");
    }
    println!("journal per turn, reading through the journal (entries, bytes): {through_journal:?}");
    println!("journal per turn, incremental (entries, bytes): {incremental:?}");

    // Incremental: every echo turn's journal has the same entries and about the
    // same bytes, whatever the session's length (the restart's turn included).
    let (first_entries, first_bytes) = incremental[1];
    for (t, &(entries, bytes)) in incremental.iter().enumerate().skip(1) {
        assert_eq!(entries, first_entries, "turn {t}: {incremental:?}");
        assert!(bytes <= first_bytes + 64, "turn {t}: {incremental:?}");
    }
    // A session's first turn reads the envelope once and finds none, then
    // looks for a transcript of the previous layout: one read (2 entries) more.
    assert_eq!(incremental[0].0, first_entries + 2, "{incremental:?}");
    // Through the journal: two entries more per turn (the messages read).
    let (last_entries, _) = through_journal[TURNS - 1];
    assert_eq!(last_entries, through_journal[1].0 + 2 * (TURNS as u64 - 2), "{through_journal:?}");

    for key in ["incremental", "journaled"] {
        let messages = transcript(server.call(&http, key, "transcript", &Value::Null).await?)?;
        assert_eq!(messages.len(), 2 * TURNS, "{key}");
        assert!(check_tool_results(&messages).is_empty());
    }
    assert_eq!(provider.requests.load(Ordering::SeqCst), 2 * TURNS as u64);
    drop(worker);
    Ok(())
}

/// Pushes `batches` batches of 64 live events to a session's events object
/// (past what it keeps) and returns each `push_live` invocation's journal size:
/// what one call costs the server as the kept list grows.
async fn push_live_journals(
    server: &RestateServer,
    http: &reqwest::Client,
    batches: u64,
) -> TestResult<Vec<(u64, u64)>> {
    let mut sizes = Vec::new();
    for b in 0..batches {
        let events: Vec<Value> = (0..64)
            .map(|i| json!({"type": "text_delta", "step": "model-request 0", "attempt": "a1", "seq": b * 64 + i, "delta": "0123456789abcdef"}))
            .collect();
        let sent: Value = http
            .post(format!("{}/SessionEvents/grow/push_live/send", server.ingress))
            .json(&events)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let id = sent["invocationId"].as_str().ok_or("no invocation id")?.to_owned();
        let (status, body) = attach(http, &server.ingress, &id).await?;
        assert!(status.is_success(), "push_live: HTTP {status}: {body}");
        sizes.push(journal_size(server, http, &id).await?);
    }
    Ok(sizes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_push_costs_the_same_whatever_the_events_kept() -> TestResult {
    let Some((server, _provider, _arrivals, _workspace, _addr, _worker, http)) =
        one_worker(0, |server, _| {
            vec![
                ("CLAW_INGRESS_URL", server.ingress.clone()),
                ("CLAW_JOURNAL_RETENTION_S", "3600".to_owned()),
            ]
        })
        .await?
    else {
        return Ok(());
    };
    // 48 batches of 64: 3072 events, past the 2048 kept.
    let sizes = push_live_journals(&server, &http, 48).await?;
    println!("push_live journal per batch of 64 events (entries, bytes): {sizes:?}");
    let (_, first) = sizes[0];
    for (b, &(_, bytes)) in sizes.iter().enumerate() {
        assert!(bytes <= 2 * first, "batch {b} costs {bytes} bytes, the first {first}: {sizes:?}");
    }
    // Every event is read back once, numbered without gaps, the oldest dropped.
    let page: Value =
        server.call_object(&http, "SessionEvents", "grow", "read_live", &json!(0)).await?;
    let seqs: Vec<u64> = page["events"]
        .as_array()
        .ok_or("no events")?
        .iter()
        .filter_map(|e| e[0].as_u64())
        .collect();
    assert_eq!(page["last"], 48 * 64);
    let first_kept = seqs.first().copied().ok_or("nothing kept")?;
    assert_eq!(seqs, (first_kept..=48 * 64).collect::<Vec<u64>>());
    assert!(seqs.len() >= 2048 - 64 && seqs.len() <= 2048, "{} kept", seqs.len());
    Ok(())
}

/// Bytes of `value` as JSON, as the admin API's state edit takes them.
fn state_bytes(value: &Value) -> Value {
    json!(value.to_string().into_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stored_as_one_list_are_read_and_moved_into_the_ring() -> TestResult {
    let Some((server, _provider, _arrivals, _workspace, _addr, _worker, http)) =
        one_worker(0, |server, _| vec![("CLAW_INGRESS_URL", server.ingress.clone())]).await?
    else {
        return Ok(());
    };
    // The previous layout: every kept event in one list, the live events' last number apart.
    let old_events = json!([[1, {"type": "agent_start"}], [2, {"type": "turn_start"}]]);
    let old_live = json!([[1, {"type": "attempt_start", "step": "s", "attempt": "a0", "seq": 0}]]);
    let edit = json!({
        "object_key": "old",
        "new_state": {
            "events": state_bytes(&old_events),
            "live": state_bytes(&old_live),
            "live.seq": state_bytes(&json!(1)),
        }
    });
    let edited = http
        .post(format!("{}/services/SessionEvents/state", server.admin))
        .json(&edit)
        .send()
        .await?;
    assert!(edited.status().is_success(), "state edit: {}", edited.text().await?);
    let read = async |handler: &str, after: u64| {
        server.call_object(&http, "SessionEvents", "old", handler, &json!(after)).await
    };
    let page = read("read", 0).await?;
    assert_eq!(page["events"], old_events);
    assert_eq!(page["last"], 2);
    assert_eq!(read("read", 1).await?["events"], json!([[2, {"type": "turn_start"}]]));
    // A live push moves the list into the ring and numbers on from it.
    let next = json!({"type": "attempt_end", "step": "s", "attempt": "a0", "seq": 1});
    server.call_object(&http, "SessionEvents", "old", "push_live", &json!([next])).await?;
    let page = read("read_live", 0).await?;
    assert_eq!(page["events"], json!([old_live[0], [2, next]]));
    assert_eq!(page["last"], 2);
    Ok(())
}
