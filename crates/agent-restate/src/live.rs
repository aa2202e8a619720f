//! Live events: what happens inside a step (the model's token deltas, a tool
//! call's progress updates and its end) sent to the session's events object
//! outside the journal, through the ingress.
//!
//! A step's effect cannot journal a send, and a replayed step does not run
//! its effect, so live events come only from an effect really running: a
//! replay sends none, and the journaled events stay the record. Each event
//! names its step and attempt (unique per run of an effect), and each attempt
//! opens with `attempt_start` and closes with `attempt_end`, so the events
//! object marks an attempt cut off by a crash when the step's next attempt
//! starts (see `SessionEvents::push_live`).
//!
//! The worker's memory is bounded whatever the ingress or the followers do:
//! events wait in one queue of [`LIVE_QUEUE`] per process; past that they
//! are dropped and counted, and the next batch of that session says how many.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

/// At most this many live events wait to be sent per worker process.
pub const LIVE_QUEUE: usize = 1024;
/// At most this many sessions' drop counts are kept for their next batch.
const DROPPED_SESSIONS: usize = 4096;
/// At most this many events go in one request to the ingress.
const BATCH: usize = 256;

/// The process's forwarder of live events to the ingress.
pub struct LiveSink {
    tx: mpsc::Sender<(String, Value)>,
    dropped: Mutex<HashMap<String, u64>>,
    dropped_total: AtomicU64,
}

impl std::fmt::Debug for LiveSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSink").field("queued", &self.queued()).finish_non_exhaustive()
    }
}

impl LiveSink {
    /// A sink posting to `SessionEvents/<session>/push_live` of the first of
    /// `ingress` that answers. Call inside a tokio runtime (it spawns its sender).
    pub fn start(ingress: Vec<String>) -> Arc<Self> {
        let (tx, rx) = mpsc::channel(LIVE_QUEUE);
        let sink = Arc::new(LiveSink {
            tx,
            dropped: Mutex::new(HashMap::new()),
            dropped_total: AtomicU64::new(0),
        });
        tokio::spawn(forward(rx, ingress, Arc::downgrade(&sink)));
        sink
    }

    /// Queues `event` for `session`, or drops it (counted) when the queue is full.
    pub fn send(&self, session: &str, event: Value) {
        if self.tx.try_send((session.to_owned(), event)).is_err() {
            self.dropped_total.fetch_add(1, Ordering::Relaxed);
            let mut dropped = self.dropped.lock().unwrap_or_else(PoisonError::into_inner);
            // A session counted here leaves with its next batch; past the bound
            // new sessions' drops are counted only in the total.
            if dropped.len() < DROPPED_SESSIONS || dropped.contains_key(session) {
                *dropped.entry(session.to_owned()).or_insert(0) += 1;
            }
        }
    }

    /// Events waiting to be sent.
    pub fn queued(&self) -> usize {
        LIVE_QUEUE - self.tx.capacity()
    }

    /// Events dropped since the start because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped_total.load(Ordering::Relaxed)
    }

    fn take_dropped(&self, session: &str) -> u64 {
        self.dropped.lock().unwrap_or_else(PoisonError::into_inner).remove(session).unwrap_or(0)
    }
}

/// Sends queued events in batches, per session in order (one request at a
/// time, so the events object receives them in the order they were made).
async fn forward(
    mut rx: mpsc::Receiver<(String, Value)>,
    ingress: Vec<String>,
    sink: std::sync::Weak<LiveSink>,
) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new());
    let mut batch = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        let mut by_session: Vec<(String, Vec<Value>)> = Vec::new();
        for (session, event) in batch.drain(..) {
            match by_session.iter_mut().find(|(s, _)| *s == session) {
                Some((_, events)) => events.push(event),
                None => by_session.push((session, vec![event])),
            }
        }
        for (session, mut events) in by_session {
            if let Some(sink) = sink.upgrade() {
                let count = sink.take_dropped(&session);
                if count > 0 {
                    events.insert(0, json!({"type": "live_dropped", "count": count}));
                }
            }
            post(&http, &ingress, &session, &events).await;
        }
    }
}

/// Posts one batch (a one-way call) to the first ingress that takes it; a
/// batch no ingress takes is lost, which followers see as a gap in an
/// attempt's `seq`: live events are a view, the journaled events the record.
async fn post(http: &reqwest::Client, ingress: &[String], session: &str, events: &[Value]) {
    let Ok(body) = serde_json::to_vec(events) else { return };
    for base in ingress {
        let url = format!("{}/SessionEvents/{session}/push_live/send", base.trim_end_matches('/'));
        let sent = http
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await;
        if sent.is_ok_and(|r| r.status().is_success()) {
            return;
        }
    }
}

/// A unique name for one run of a step's effect: the process and a counter.
pub(crate) fn attempt_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static PROCESS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let process =
        PROCESS.get_or_init(|| format!("{:x}{:x}", std::process::id(), llm_core::now_millis()));
    format!("{process}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The live events of one attempt of one step, numbered from 0.
pub(crate) struct AttemptEvents {
    sink: Arc<LiveSink>,
    session: String,
    step: String,
    attempt: String,
    seq: u64,
}

impl AttemptEvents {
    /// Opens an attempt of `step` (sends `attempt_start`).
    pub(crate) fn open(sink: Arc<LiveSink>, session: String, step: String) -> Self {
        let mut events = AttemptEvents { sink, session, step, attempt: attempt_id(), seq: 0 };
        events.send("attempt_start", json!({}));
        events
    }

    /// Sends an event of type `kind` with `fields` merged in.
    pub(crate) fn send(&mut self, kind: &str, fields: Value) {
        let mut event = json!({
            "type": kind,
            "step": self.step,
            "attempt": self.attempt,
            "seq": self.seq,
        });
        if let (Some(event), Value::Object(fields)) = (event.as_object_mut(), fields) {
            event.extend(fields);
        }
        self.seq += 1;
        self.sink.send(&self.session, event);
    }
}

impl Drop for AttemptEvents {
    /// An attempt that returns (an answer or a failure Restate retries) ends;
    /// one cut off by a crash never sends this.
    fn drop(&mut self) {
        self.send("attempt_end", json!({}));
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, reason = "tests")]
mod tests {
    use super::*;

    /// An ingress that accepts connections and never answers: the worker's
    /// queue stays within its bound and the rest is dropped and counted.
    #[tokio::test]
    async fn a_stalled_ingress_bounds_the_queue_and_counts_what_it_drops() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let held = Arc::new(Mutex::new(Vec::new()));
        let keep = held.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                keep.lock().unwrap_or_else(PoisonError::into_inner).push(socket);
            }
        });
        let sink = LiveSink::start(vec![format!("http://{addr}")]);
        let sent = 50_000u64;
        for i in 0..sent {
            sink.send("s1", json!({"type": "text_delta", "delta": "x".repeat(64), "i": i}));
            if i % 1000 == 0 {
                tokio::task::yield_now().await;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(sink.queued() <= LIVE_QUEUE, "queued {}", sink.queued());
        // At most the queue and one batch in flight were taken.
        let taken = sent - sink.dropped();
        assert!(taken <= (LIVE_QUEUE + BATCH) as u64, "taken {taken} of {sent}");
        assert!(sink.dropped() >= sent - (LIVE_QUEUE + BATCH) as u64);
        assert_eq!(sink.take_dropped("s1"), sink.dropped(), "counted per session");
    }

    #[test]
    fn attempt_ids_differ() {
        assert_ne!(attempt_id(), attempt_id());
    }
}
