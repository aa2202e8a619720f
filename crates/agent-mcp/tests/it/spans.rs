//! An MCP call's span nests under the agent's: `invoke_agent` > `turn` >
//! `execute_tool {name}` > `tools/call {tool}`, read by a subscriber layer that
//! records each span's name and resolved parent as the span is created.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_core::{AgentEvent, EndReason};
use agent_mcp::McpServers;
use futures_util::StreamExt;
use llm_core::Message;
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::*;

/// A created span: its `otel.name` (else its name), its parent, and its string fields.
#[derive(Debug, Clone, Default)]
struct Seen {
    name: String,
    parent: Option<u64>,
    fields: HashMap<String, String>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<HashMap<u64, Seen>>>);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let parent = ctx.span(id).and_then(|s| s.parent()).map(|p| p.id().into_u64());
        let mut seen = Seen { name: attrs.metadata().name().to_owned(), parent, ..Seen::default() };
        attrs.record(&mut Fields(&mut seen.fields));
        self.0.lock().unwrap().insert(id.into_u64(), seen);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some(seen) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(&mut seen.fields));
        }
    }
}

#[tokio::test]
async fn an_mcp_call_nests_under_its_execute_tool_span() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let (config, _) = fault_server("fault");
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let agent = scripted_agent(vec![
        tool_turn("c1", "fault__echo", json!({"text": "hello"})),
        text_turn("done"),
    ]);
    let events: Vec<AgentEvent> =
        agent.run(context(set.tools.clone()), vec![Message::user("go")]).collect().await;
    let (_, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    servers.shutdown().await;

    let spans = capture.0.lock().unwrap().clone();
    let name = |seen: &Seen| seen.fields.get("otel.name").cloned().unwrap_or(seen.name.clone());
    let parent_of = |seen: &Seen| seen.parent.and_then(|p| spans.get(&p));
    let calls: Vec<&Seen> = spans
        .values()
        .filter(|s| name(s) == "tools/call fault__echo" || name(s) == "tools/call echo")
        .collect();
    assert_eq!(calls.len(), 1, "one tools/call span: {spans:#?}");
    let call = calls[0];
    assert_eq!(call.fields.get("mcp.method.name").map(String::as_str), Some("tools/call"));
    assert_eq!(call.fields.get("network.transport").map(String::as_str), Some("pipe"));
    let tool = parent_of(call).expect("the MCP call has a parent span");
    assert_eq!(name(tool), "execute_tool fault__echo", "{spans:#?}");
    assert_eq!(tool.fields.get("gen_ai.tool.call.id").map(String::as_str), Some("c1"));
    let turn = parent_of(tool).expect("the tool call has a parent span");
    assert_eq!(name(turn), "turn");
    let run = parent_of(turn).expect("the turn has a parent span");
    assert_eq!(name(run), "invoke_agent");
    assert_eq!(run.parent, None, "the run is the root");
}
