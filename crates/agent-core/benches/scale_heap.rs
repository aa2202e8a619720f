//! Where the heap of many runs in flight goes, by allocation site.
//!
//! `cargo bench -p agent-core --bench scale_heap` (`SCALE_RUNS=N`, default
//! 10,000): the `scale` bench's concurrent workload under dhat's heap profiler
//! (a counting global allocator that records each allocation's stack). It
//! prints the heap at its peak per run in flight, split by allocation site
//! (the innermost frames outside the allocator and the standard library), and
//! the sizes of the types a run keeps. The profiler serializes every
//! allocation, so time and CPU figures come from the `scale` bench instead.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "benchmark")]
#![allow(clippy::disallowed_methods, reason = "a benchmark reads its own process environment")]

#[path = "common/workload.rs"]
mod workload;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn print_sizes() {
    use std::mem::size_of;
    println!(
        "sizes (bytes, inline): AgentRun {}, AgentEvent {}, Message {}, AssistantMessage {}, ToolResultMessage {}, Model {}, StreamOptions {}, AgentTool {}, Tool {}, ToolInvocation {}, ToolOutput {}",
        size_of::<agent_core::AgentRun>(),
        size_of::<agent_core::AgentEvent>(),
        size_of::<llm_core::Message>(),
        size_of::<llm_core::AssistantMessage>(),
        size_of::<llm_core::ToolResultMessage>(),
        size_of::<llm_core::Model>(),
        size_of::<llm_core::StreamOptions>(),
        size_of::<agent_core::AgentTool>(),
        size_of::<llm_core::Tool>(),
        size_of::<agent_core::ToolInvocation>(),
        size_of::<agent_core::ToolOutput>(),
    );
}

/// Frames that say where an allocation comes from, not how it is made.
fn is_plumbing(frame: &str) -> bool {
    const SKIP: [&str; 12] = [
        "[root]",
        "dhat::",
        "alloc::",
        "core::",
        "std::",
        "__rust",
        "hashbrown::",
        "<alloc::",
        "<core::",
        "<std::",
        "<dhat::",
        "_start",
    ];
    let name = frame.split_once(": ").map_or(frame, |(_, name)| name);
    SKIP.iter().any(|s| name.starts_with(s))
}

/// The site of an allocation: its two innermost frames that are not plumbing.
fn site(frames: &[&str]) -> String {
    let names: Vec<&str> = frames
        .iter()
        .filter(|f| !is_plumbing(f))
        .take(2)
        .map(|f| {
            let name = f.split_once(": ").map_or(*f, |(_, name)| name);
            name.split(" (").next().unwrap_or(name)
        })
        .collect();
    names.join(" <- ")
}

/// Heap at the global peak by site: (bytes, blocks) per site, from dhat's JSON.
fn peak_by_site(json: &serde_json::Value) -> BTreeMap<String, (u64, u64)> {
    let table: Vec<&str> =
        json["ftbl"].as_array().unwrap().iter().map(|f| f.as_str().unwrap_or("")).collect();
    let mut sites: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for pp in json["pps"].as_array().unwrap() {
        let bytes = pp["gb"].as_u64().unwrap_or(0);
        if bytes == 0 {
            continue;
        }
        let frames: Vec<&str> = pp["fs"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|i| table.get(i.as_u64()? as usize).copied())
            .collect();
        let entry = sites.entry(site(&frames)).or_default();
        entry.0 += bytes;
        entry.1 += pp["gbk"].as_u64().unwrap_or(0);
    }
    sites
}

fn main() {
    let runs: usize =
        std::env::var("SCALE_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    print_sizes();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let agent = workload::agent();
    let tools = vec![workload::work_tool(Duration::from_millis(50))];
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("scale-heap.json");
    let profiler = dhat::Profiler::builder().file_name(&file).build();
    let base = dhat::HeapStats::get();
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
    let stats = dhat::HeapStats::get();
    drop(profiler);
    assert_eq!(ok.load(Ordering::Relaxed), runs, "every run's invariant");
    let peak = stats.max_bytes.saturating_sub(base.curr_bytes);
    println!(
        "scale_heap: {runs} runs: heap peak {:.1} MiB above the start, {:.0} bytes per run in flight; \
         {:.0} allocations and {:.0} bytes allocated per run over its life",
        peak as f64 / 1048576.0,
        peak as f64 / runs as f64,
        (stats.total_blocks - base.total_blocks) as f64 / runs as f64,
        (stats.total_bytes - base.total_bytes) as f64 / runs as f64,
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("dhat output")).expect("json");
    let mut sites: Vec<(String, (u64, u64))> = peak_by_site(&json).into_iter().collect();
    sites.sort_by_key(|s| std::cmp::Reverse(s.1.0));
    println!("heap at the peak per run, by site (bytes, blocks):");
    for (site, (bytes, blocks)) in sites.iter().take(40) {
        if *bytes as f64 / runs as f64 >= 8.0 {
            println!(
                "{:>8.0} {:>6.2}  {site}",
                *bytes as f64 / runs as f64,
                *blocks as f64 / runs as f64
            );
        }
    }
}
