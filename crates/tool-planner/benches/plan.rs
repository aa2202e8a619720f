//! Planning 10,000 descriptors with mixed availability expressions.
#![allow(missing_docs, clippy::unwrap_used, reason = "benchmark")]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tool_planner::*;

fn descriptors(n: usize) -> Vec<ToolDescriptor> {
    (0..n)
        .map(|i| {
            let mut t = ToolDescriptor::new(
                format!("tool_{:05}", (i * 7919) % n),
                "a tool",
                json!({"type": "object", "properties": {"x": {"type": "string"}}}),
            );
            t.availability = match i % 5 {
                0 => None,
                1 => Some(Availability::from_json(&json!({"kind": "env", "name": "E"}))),
                2 => Some(Availability::from_json(&json!({"allOf": [{"kind": "auth", "providerId": "p"}, {"kind": "plugin-enabled", "pluginId": "x"}]}))),
                3 => Some(Availability::from_json(&json!({"anyOf": [{"kind": "config", "path": ["a", "b"], "check": "non-empty"}, {"kind": "context", "key": "c", "equals": "d"}]}))),
                _ => Some(Availability::from_json(&json!({"kind": "env", "name": "MISSING"}))),
            };
            if i % 3 == 0 {
                t.sort_key = Some(format!("k{}", i % 100));
            }
            t
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let list = descriptors(10_000);
    let env = AvailabilityEnv {
        env: [("E".to_owned(), "1".to_owned())].into(),
        auth_provider_ids: ["p".to_owned()].into(),
        config: json!({"a": {"b": "set"}}),
        ..Default::default()
    };
    let mut group = c.benchmark_group("tool_planner");
    group.sample_size(20);
    group.bench_function("build_tool_plan_10k", |b| {
        b.iter(|| black_box(build_tool_plan(black_box(&list), &env).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
