//! Scale: many agent runs in flight in one process, and one very long run.
//!
//! `cargo bench -p agent-core --bench scale` (set `SCALE_RUNS` to change the
//! number of concurrent runs, default 100,000; `SCALE_TOOL_TURNS` for the tool
//! turns, default 2). Each run: tool turns with two parallel 50 ms tools each,
//! then a text answer, from a generating provider,
//! all runs in flight at once on 2 worker threads. Every run's event stream is
//! checked (exactly one `AgentEnd`, last) and its transcript invariant. Peak RSS
//! is the kernel's high-water mark (`VmHWM` in /proc/self/status).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "benchmark")]
#![allow(clippy::disallowed_methods, reason = "a benchmark reads its own process environment")]

#[path = "common/workload.rs"]
mod workload;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agent_core::{Agent, AgentConfig, AgentContext, AgentEvent, EndReason, check_tool_results};
use futures_util::StreamExt;
use llm_core::Message;
use workload::{Generating, model, work_tool};

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or(0)
}

/// User + system CPU seconds of this process.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 =
        fields.get(11..13).map_or(0.0, |f| f.iter().filter_map(|x| x.parse::<f64>().ok()).sum());
    ticks / 100.0
}

fn concurrent_runs(rt: &tokio::runtime::Runtime, runs: usize) {
    let agent = workload::agent();
    let tools = vec![work_tool(Duration::from_millis(50))];
    let base_kib = status_kib("VmRSS:");
    let cpu0 = cpu_seconds();
    let start = Instant::now();
    let ok = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let mut handles = Vec::with_capacity(runs);
        for i in 0..runs {
            let run = workload::start_run(&agent, &tools, i);
            handles.push(tokio::spawn(workload::check_run(run, ok.clone())));
        }
        for h in handles {
            h.await.expect("run task");
        }
    });
    let wall = start.elapsed();
    let cpu = cpu_seconds() - cpu0;
    let peak_kib = status_kib("VmHWM:");
    let ok = ok.load(Ordering::Relaxed);
    assert_eq!(ok, runs, "every run's invariant");
    println!(
        "scale: {runs} concurrent runs ({} tool turns x 2 parallel 50 ms tools): all {ok} checked; peak RSS {:.0} MiB \
         ({:.1} KiB per run above the {:.0} MiB baseline); wall {:.2} s; CPU {:.1} µs per run",
        workload::tool_turns(),
        peak_kib as f64 / 1024.0,
        (peak_kib.saturating_sub(base_kib)) as f64 / runs as f64,
        base_kib as f64 / 1024.0,
        wall.as_secs_f64(),
        cpu * 1e6 / runs as f64,
    );
}

fn long_run(rt: &tokio::runtime::Runtime, turns: usize) {
    let agent = Agent::new(AgentConfig::new(model(), Arc::new(Generating::new(turns - 1, 1))));
    let context = AgentContext {
        system_prompt: None,
        messages: Vec::new(),
        tools: vec![work_tool(Duration::ZERO)],
    };
    let mut run = agent.run(context, vec![Message::user("long job")]);
    let mut turn_ends = Vec::with_capacity(turns);
    let start = Instant::now();
    rt.block_on(async {
        while let Some(event) = run.next().await {
            if matches!(event, AgentEvent::TurnEnd { .. }) {
                turn_ends.push(start.elapsed());
            }
        }
    });
    let outcome = run.outcome().expect("outcome");
    assert_eq!(outcome.reason, EndReason::Completed);
    assert!(check_tool_results(outcome.messages()).is_empty());
    assert_eq!(turn_ends.len(), turns);
    let per_turn = |from: usize, to: usize| {
        let a = if from == 0 { Duration::ZERO } else { turn_ends[from - 1] };
        (turn_ends[to - 1] - a) / (to - from) as u32
    };
    println!(
        "scale: one {turns}-turn run: {:?} per turn over turns 1-100, {:?} over {}-{}, {:?} overall",
        per_turn(0, 100),
        per_turn(turns - 100, turns),
        turns - 99,
        turns,
        per_turn(0, turns),
    );
}

fn main() {
    let runs = std::env::var("SCALE_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    long_run(&rt, 1000);
    concurrent_runs(&rt, runs);
}
