//! Tool-name assignment for 10,000 MCP tools, and one `tools/call` round
//! trip over stdio to the fault server.
#![allow(missing_docs, clippy::unwrap_used, reason = "benchmark")]

use std::collections::HashSet;
use std::hint::black_box;

use agent_core::{ProgressSink, ToolInvocation};
use agent_mcp::{McpServerConfig, McpServers, names};
use criterion::{Criterion, criterion_group, criterion_main};
use llm_core::CancellationToken;
use serde_json::json;

fn bench(c: &mut Criterion) {
    // One name in five needs normalizing (a `.`), one in fifty is too long.
    let tools: Vec<(String, String)> = (0..10_000)
        .map(|i| {
            let server = format!("server{}", i % 10);
            let tool = match i % 50 {
                0 => format!("tool_{i}_{}", "x".repeat(80)),
                n if n % 5 == 0 => format!("tool.{i}"),
                _ => format!("tool_{i}"),
            };
            (server, tool)
        })
        .collect();
    let reserved = HashSet::new();
    c.bench_function("assign_names 10k tools", |b| {
        b.iter(|| {
            names::assign_names(tools.iter().map(|(s, t)| (s.as_str(), t.as_str())), &reserved)
        })
    });

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let servers = runtime
        .block_on(McpServers::connect([McpServerConfig::stdio(
            "fault",
            env!("CARGO_BIN_EXE_mcp-fault-server"),
            Vec::<String>::new(),
        )]))
        .unwrap();
    let set = servers.tools();
    let echo = set.tool("fault__echo").unwrap().clone();
    c.bench_function("tools/call round trip over stdio", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let out = echo
                    .executor
                    .execute(ToolInvocation {
                        call_id: "c".into(),
                        arguments: json!({"text": "ping"}),
                        cancel: CancellationToken::new(),
                        progress: ProgressSink::disconnected(),
                        idempotency_key: None,
                    })
                    .await
                    .unwrap();
                black_box(out)
            })
        })
    });
    runtime.block_on(servers.shutdown());
}

criterion_group!(benches, bench);
criterion_main!(benches);
