//! Chaos: a 3-node Restate cluster (replicated log and metadata, replication 2),
//! 3 workers behind a load balancer and a ledger that applies each idempotency
//! key once, while a driver SIGKILLs a worker or a Restate node and restarts it;
//! every fourth session has a call that waits for approval across the kills.
//!
//! The short form (one kill of each kind) runs with the other tests; the long
//! form is `CHAOS_MINUTES=5 CHAOS_SESSIONS=200 cargo test -p agent-restate --test it
//! chaos_long -- --ignored --nocapture`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agent_core::check_tool_results;
use axum::Router;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::durable::transcript;
use crate::harness::{
    Balancer, LoopbackProvider, Proc, Scratch, TestResult, free_port, restate_binary,
    start_worker_with, wait_listening,
};

/// Each key's raw attempts, and the keys applied (once each).
#[derive(Default)]
struct Ledger {
    attempts: BTreeMap<String, u64>,
    applied: Vec<String>,
}

async fn apply(State(ledger): State<Arc<Mutex<Ledger>>>, body: String) -> &'static str {
    let effect: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let key = effect["key"].as_str().unwrap_or_default().to_owned();
    let mut ledger = ledger.lock().unwrap_or_else(PoisonError::into_inner);
    let attempts = ledger.attempts.entry(key.clone()).or_insert(0);
    *attempts += 1;
    if *attempts == 1 {
        ledger.applied.push(key);
    }
    "ok"
}

async fn start_ledger() -> TestResult<(SocketAddr, Arc<Mutex<Ledger>>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let app = Router::new().route("/apply", post(apply)).with_state(ledger.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((addr, ledger))
}

/// One node of the cluster: its ports, its data directory, its process.
struct Node {
    name: String,
    fabric: u16,
    admin: u16,
    ingress: u16,
    config: PathBuf,
    proc: Option<Proc>,
}

struct Cluster {
    binary: PathBuf,
    nodes: Vec<Node>,
    dir: Scratch,
}

impl Cluster {
    fn start(binary: &Path) -> TestResult<Self> {
        let dir = Scratch::new("cluster")?;
        let mut nodes = Vec::new();
        for i in 1..=3 {
            nodes.push(Node {
                name: format!("n{i}"),
                fabric: free_port()?,
                admin: free_port()?,
                ingress: free_port()?,
                config: dir.0.join(format!("n{i}.toml")),
                proc: None,
            });
        }
        let peers: Vec<String> =
            nodes.iter().map(|n| format!("\"http://127.0.0.1:{}\"", n.fabric)).collect();
        for (i, node) in nodes.iter().enumerate() {
            let config = format!(
                r#"node-name = "{name}"
cluster-name = "chaos"
base-dir = "{base}"
auto-provision = {provision}
default-num-partitions = 4
default-replication = 2
listen-mode = "tcp"
bind-address = "127.0.0.1:{fabric}"
advertised-address = "http://127.0.0.1:{fabric}"
disable-telemetry = true
rocksdb-total-memory-size = "128 MiB"

[metadata-client]
type = "replicated"
addresses = [{peers}]

[admin]
bind-address = "127.0.0.1:{admin}"

[admin.query-engine]
memory-size = "64 MiB"

[ingress]
bind-address = "127.0.0.1:{ingress}"

[bifrost]
default-provider = "replicated"

# Retry a dead worker quickly (the default backs off to a minute).
[default-retry-policy]
initial-interval = "100ms"
exponentiation-factor = 2.0
max-attempts = 1000
max-interval = "1s"
"#,
                name = node.name,
                base = dir.0.join(&node.name).display(),
                provision = i == 0,
                fabric = node.fabric,
                admin = node.admin,
                ingress = node.ingress,
                peers = peers.join(", "),
            );
            std::fs::write(&node.config, config)?;
        }
        let mut cluster = Cluster { binary: binary.to_owned(), nodes, dir };
        for i in 0..3 {
            cluster.start_node(i)?;
        }
        Ok(cluster)
    }

    fn start_node(&mut self, i: usize) -> TestResult {
        let binary = self.binary.clone();
        let Some(node) = self.nodes.get_mut(i) else { return Err("no such node".into()) };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.0.join(format!("{}.log", node.name)))?;
        let child = Command::new(binary)
            .arg("--no-logo")
            .arg("--config-file")
            .arg(&node.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        node.proc = Some(Proc(child));
        Ok(())
    }

    fn kill_node(&mut self, i: usize) {
        if let Some(mut proc) = self.nodes.get_mut(i).and_then(|n| n.proc.take()) {
            proc.kill();
        }
    }

    fn ingress(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.nodes[i % 3].ingress)
    }

    fn admin(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.nodes[i % 3].admin)
    }
}

/// Registers the workers' address on some node, then waits until every
/// partition has a leader: calls that land on each partition succeed (health
/// answers long before).
async fn register_and_wait_for_leaders(
    cluster: &Cluster,
    http: &reqwest::Client,
    uri: &str,
) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut n = 0;
    loop {
        let registered = http
            .post(format!("{}/deployments", cluster.admin(n)))
            .json(&json!({ "uri": uri, "force": true }))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if registered {
            break;
        }
        if Instant::now() > deadline {
            return Err("no node registered the workers within 120 s".into());
        }
        n += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // 32 keys land on every one of the 4 partitions with near certainty.
    for key in 0..32 {
        loop {
            let read = http
                .post(format!("{}/SessionEvents/probe-{key}/read", cluster.ingress(key)))
                .json(&json!(0))
                .timeout(Duration::from_secs(5))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if read {
                break;
            }
            if Instant::now() > deadline {
                return Err("the cluster's partitions had no leaders within 120 s".into());
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    Ok(())
}

/// What one chaos run saw.
struct ChaosReport {
    sessions: usize,
    turns: usize,
    approvals: usize,
    elapsed: Duration,
    worker_kills: usize,
    node_kills: usize,
    latencies: Vec<Duration>,
    applied: usize,
    raw_attempts: u64,
}

/// Approves the third turn's call (`call_11`: the transcript holds 9 messages,
/// and the request the system prompt and the new prompt) after a while, through
/// whichever node answers, until a node took the decision (a decision before
/// the call asked is refused, so it is sent again until the call waits).
async fn approve_later(
    http: reqwest::Client,
    ingresses: Vec<String>,
    session: String,
    deadline: Instant,
) {
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut attempt = 0usize;
    while Instant::now() < deadline {
        let ingress = &ingresses[attempt % ingresses.len()];
        attempt += 1;
        let answered = http
            .post(format!("{ingress}/AgentSession/{session}/approve"))
            .json(&json!("call_11"))
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if answered {
            return;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A turn sent to whichever node answers, retried with the same
/// `idempotency-key` until it completes (a retry attaches to the same invocation).
async fn turn(
    http: &reqwest::Client,
    ingresses: &[String],
    session: &str,
    text: &str,
    deadline: Instant,
) -> Result<Value, String> {
    let key = format!("{session}/{text}");
    let mut attempt = 0usize;
    loop {
        let ingress = &ingresses[attempt % ingresses.len()];
        attempt += 1;
        let response = http
            .post(format!("{ingress}/AgentSession/{session}/message"))
            .header("idempotency-key", &key)
            .json(&json!(text))
            .timeout(Duration::from_secs(60))
            .send()
            .await;
        if let Ok(response) = response {
            let status = response.status();
            let body = response.text().await.unwrap_or_default();
            if status.is_success() {
                return serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"));
            }
            if status.is_client_error() && status.as_u16() != 404 && status.as_u16() != 409 {
                return Err(format!("{session} {text}: HTTP {status}: {body}"));
            }
        }
        if Instant::now() > deadline {
            return Err(format!("{session} {text}: no answer before the deadline"));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn chaos(
    sessions: usize,
    chaos_for: Duration,
    one_of_each: bool,
) -> TestResult<Option<ChaosReport>> {
    let Some(binary) = restate_binary() else { return Ok(None) };
    let mut cluster = Cluster::start(&binary)?;
    let (provider, _arrivals) = LoopbackProvider::start().await?;
    let (ledger_addr, ledger) = start_ledger().await?;
    let workspace = Scratch::new("chaos")?;
    // The workers read the stored messages they lack from any node's ingress.
    let ingress_urls = (0..3).map(|i| cluster.ingress(i)).collect::<Vec<_>>().join(",");
    let env = [
        ("CLAW_PARALLEL", "1".to_owned()),
        ("CLAW_LEDGER", ledger_addr.to_string()),
        ("CLAW_APPROVE", "1".to_owned()),
        ("CLAW_INGRESS_URL", ingress_urls),
    ];
    let mut addrs = Vec::new();
    let mut workers = Vec::new();
    for _ in 0..3 {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
        workers.push(Some(start_worker_with(addr, &provider.base_url, &workspace.0, 300, &env)?));
        wait_listening(addr).await?;
        addrs.push(addr);
    }
    let balancer = Balancer::start(addrs.clone()).await?;
    let http = reqwest::Client::new();
    register_and_wait_for_leaders(&cluster, &http, &format!("http://{}", balancer.addr)).await?;

    let ingresses: Vec<String> = (0..3).map(|i| cluster.ingress(i)).collect();
    let begun = Instant::now();
    let deadline = begun + chaos_for + Duration::from_secs(300);
    let mut clients = tokio::task::JoinSet::new();
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let chaos_end = begun + chaos_for;
    for s in 0..sessions {
        let (http, ingresses, done) = (http.clone(), ingresses.clone(), done.clone());
        clients.spawn(async move {
            let mut latencies = Vec::new();
            let mut runs = Vec::new();
            // The long form keeps every client busy until the chaos ends: a
            // client that finished its session starts the next one.
            for round in 0.. {
                let session = format!("chaos-{s}-{round}");
                // Two turns: a parallel batch of two calls, then one call; every
                // fourth client a third turn whose call waits for approval.
                let mut texts = vec![format!("parallel {s}a,{s}b"), format!("markers {s}c")];
                if s % 4 == 0 {
                    texts.push(format!("markers ask{s}"));
                    let (http, ingresses, session) =
                        (http.clone(), ingresses.clone(), session.clone());
                    tokio::spawn(approve_later(http, ingresses, session, deadline));
                }
                for text in texts {
                    let sent = Instant::now();
                    let reply = turn(&http, &ingresses, &session, &text, deadline).await?;
                    if reply["text"] != "done" {
                        return Err(format!("{session} {text}: {reply}"));
                    }
                    latencies.push(sent.elapsed());
                }
                runs.push((session, s % 4 == 0));
                if one_of_each || Instant::now() >= chaos_end {
                    break;
                }
            }
            done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, String>((latencies, runs))
        });
    }

    // The chaos driver: a worker or a node at a time, SIGKILL and restart.
    let (mut worker_kills, mut node_kills) = (0, 0);
    let mut round = 0usize;
    let running = || done.load(std::sync::atomic::Ordering::SeqCst) < sessions;
    while (Instant::now() < chaos_end && running())
        || (one_of_each && (worker_kills == 0 || node_kills == 0))
    {
        tokio::time::sleep(Duration::from_millis(if one_of_each { 1500 } else { 4000 })).await;
        if round.is_multiple_of(2) {
            let w = (round / 2) % 3;
            if let Some(mut worker) = workers[w].take() {
                worker.kill();
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            workers[w] =
                Some(start_worker_with(addrs[w], &provider.base_url, &workspace.0, 300, &env)?);
            worker_kills += 1;
        } else {
            let n = (round / 2) % 3;
            cluster.kill_node(n);
            tokio::time::sleep(Duration::from_secs(2)).await;
            cluster.start_node(n)?;
            node_kills += 1;
        }
        round += 1;
        if one_of_each && worker_kills > 0 && node_kills > 0 {
            break;
        }
    }

    let mut latencies = Vec::new();
    let mut runs = Vec::new();
    while let Some(joined) = clients.join_next().await {
        let (l, r) = joined??;
        latencies.extend(l);
        runs.extend(r);
    }
    let elapsed = begun.elapsed();

    // Checker: every transcript passes the invariant; every effect applied once.
    let mut expected = BTreeSet::new();
    for (i, (session, approvals)) in runs.iter().enumerate() {
        let approvals = *approvals;
        let messages = loop {
            let got = http
                .post(format!("{}/AgentSession/{session}/transcript", ingresses[i % 3]))
                .send()
                .await;
            if let Ok(r) = got
                && r.status().is_success()
            {
                break transcript(r.json().await?)?;
            }
            if Instant::now() > deadline {
                return Err(format!("{session}: no transcript").into());
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        };
        assert!(
            check_tool_results(&messages).is_empty(),
            "{session}: {:?}",
            check_tool_results(&messages)
        );
        assert_eq!(messages.len(), if approvals { 13 } else { 9 }, "{session}: {messages:?}");
        expected.insert(format!("{session}/1/call_2_0"));
        expected.insert(format!("{session}/1/call_2_1"));
        expected.insert(format!("{session}/6/call_7"));
        if approvals {
            expected.insert(format!("{session}/10/call_11"));
        }
    }
    let ledger = ledger.lock().unwrap_or_else(PoisonError::into_inner);
    let applied: BTreeSet<String> = ledger.applied.iter().cloned().collect();
    assert_eq!(applied.len(), ledger.applied.len(), "a key applied twice");
    assert_eq!(applied, expected, "every effect applied exactly once, none lost");
    let raw_attempts: u64 = ledger.attempts.values().sum();
    Ok(Some(ChaosReport {
        sessions: runs.len(),
        turns: runs.iter().map(|(_, a)| if *a { 3 } else { 2 }).sum(),
        approvals: runs.iter().filter(|(_, a)| *a).count(),
        elapsed,
        worker_kills,
        node_kills,
        latencies,
        applied: applied.len(),
        raw_attempts,
    }))
}

fn print(report: &mut ChaosReport) {
    report.latencies.sort();
    let pick = |q: f64| {
        let l = &report.latencies;
        l[((l.len() as f64 * q).ceil() as usize).clamp(1, l.len()) - 1].as_millis()
    };
    println!(
        "chaos: {} sessions, {} turns ({} with an approval) in {:.1} s ({:.1} turns/s); kills: {} workers, {} Restate nodes; per turn p50 {} ms, p99 {} ms; effects applied {}, raw attempts {} ({} duplicates), lost 0",
        report.sessions,
        report.turns,
        report.approvals,
        report.elapsed.as_secs_f64(),
        report.turns as f64 / report.elapsed.as_secs_f64(),
        report.worker_kills,
        report.node_kills,
        pick(0.5),
        pick(0.99),
        report.applied,
        report.raw_attempts,
        report.raw_attempts - report.applied as u64,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_short_one_kill_of_each_kind_loses_no_effect() -> TestResult {
    if let Some(mut report) = chaos(12, Duration::from_secs(0), true).await? {
        assert!(report.worker_kills >= 1 && report.node_kills >= 1);
        print(&mut report);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "minutes long: run by hand (CHAOS_MINUTES, CHAOS_SESSIONS)"]
async fn chaos_long() -> TestResult {
    let minutes: u64 =
        std::env::var("CHAOS_MINUTES").ok().and_then(|m| m.parse().ok()).unwrap_or(5);
    let sessions: usize =
        std::env::var("CHAOS_SESSIONS").ok().and_then(|m| m.parse().ok()).unwrap_or(200);
    if let Some(mut report) = chaos(sessions, Duration::from_secs(minutes * 60), false).await? {
        print(&mut report);
    }
    Ok(())
}
