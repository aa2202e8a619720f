//! The planner in the loop: a context built from a plan, re-planned per turn
//! when the environment changes, deferred tools resolved from the same plan.

use std::sync::Arc;

use agent_core::*;
use llm_core::{Message, Tool, raw::ScriptedProvider};
use serde_json::json;
use tool_planner::{Availability, AvailabilityEnv, Signal, ToolDescriptor};

use crate::{assert_invariant, model, open_schema, results, text_turn, tool_turn};

fn answering(name: &str, text: &'static str) -> AgentTool {
    AgentTool::new(
        Tool { name: name.into(), description: String::new(), parameters: open_schema() },
        move |_inv: ToolInvocation| async move { Ok(ToolOutput::text(text)) },
    )
}

fn descriptor(name: &str, availability: Option<Signal>) -> ToolDescriptor {
    let mut d = ToolDescriptor::new(name, format!("The {name} tool"), open_schema());
    d.availability = availability.map(Availability::Signal);
    d
}

fn catalog(reverse: bool) -> ToolCatalog {
    let mut entries = vec![
        (descriptor("read", None), answering("read", "file text"), false),
        (descriptor("Read", None), answering("Read", "other read"), false),
        (
            descriptor("admin", Some(Signal::Auth { provider_id: "corp".into() })),
            answering("admin", "admin ran"),
            false,
        ),
        (
            descriptor("web_search", Some(Signal::Env { name: "SEARCH_KEY".into() })),
            answering("web_search", "search results"),
            true,
        ),
        (descriptor("unlock", None), answering("unlock", "unlocked"), false),
    ];
    if reverse {
        entries.reverse();
    }
    let mut c = ToolCatalog::new();
    for (d, t, deferred) in entries {
        if deferred { c.add_deferred(d, t) } else { c.add(d, t) }.unwrap();
    }
    c
}

fn names(tools: &[Tool]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

#[tokio::test]
async fn a_hidden_tool_is_neither_sent_nor_resolvable_until_the_plan_shows_it() {
    let env = SharedEnv::new(AvailabilityEnv::default());
    let catalog = Arc::new(catalog(false));
    let provider = ScriptedProvider::new(
        "scripted",
        [
            // Both hidden: `admin` (not sent) and `web_search` (deferred, hidden).
            tool_turn(&[("1", "admin", json!({})), ("2", "web_search", json!({}))]),
            tool_turn(&[("3", "unlock", json!({}))]),
            tool_turn(&[("4", "admin", json!({})), ("5", "web_search", json!({}))]),
            text_turn("done"),
        ],
    );
    let shared = env.clone();
    let unlock = AgentTool::new(
        Tool { name: "unlock".into(), description: String::new(), parameters: open_schema() },
        move |_inv: ToolInvocation| {
            let mut unlocked = AvailabilityEnv::default();
            unlocked.auth_provider_ids.insert("corp".into());
            unlocked.env.insert("SEARCH_KEY".into(), "set".into());
            shared.set(unlocked);
            async { Ok(ToolOutput::text("unlocked")) }
        },
    );
    let mut with_unlock = (*catalog).clone();
    with_unlock.register_executor(
        tool_planner::ExecutorRef::Core { executor_id: "unlock".into() },
        unlock,
    );
    let catalog = Arc::new(with_unlock);
    let mut config = AgentConfig::new(model(), Arc::new(provider.clone()));
    config.hooks = Arc::new(PlannedHooks::new(catalog.clone(), env.clone(), Arc::new(NoHooks)));
    let agent = Agent::new(config);
    let context = catalog.context(&env.get(), Some("sys".into())).unwrap();
    let outcome = agent.run(context, vec![Message::user("go")]).finish().await;
    assert_eq!(outcome.reason, EndReason::Completed);
    let r = results(outcome.messages());
    assert_eq!(r[0].text(), "Tool admin not found");
    assert_eq!(r[1].text(), "Tool web_search not found");
    assert_eq!(r[2].text(), "unlocked");
    assert_eq!(r[3].text(), "admin ran");
    assert_eq!(r[4].text(), "search results");
    let requests = provider.requests();
    // ICU root order: lowercase before uppercase.
    assert_eq!(names(&requests[0].tools), ["read", "Read", "unlock"]);
    assert_eq!(names(&requests[1].tools), ["read", "Read", "unlock"]);
    // Re-planned after `unlock` changed the environment; the deferred tool is
    // offered once resolved.
    assert_eq!(names(&requests[2].tools), ["admin", "read", "Read", "unlock"]);
    assert_eq!(names(&requests[3].tools), ["admin", "read", "Read", "unlock", "web_search"]);
    assert_invariant(outcome.messages());
}

#[tokio::test]
async fn the_same_inputs_give_the_same_request_bytes() {
    let mut bytes = Vec::new();
    for reverse in [false, true, false] {
        let env = SharedEnv::new(AvailabilityEnv::default());
        let catalog = Arc::new(catalog(reverse));
        let provider = ScriptedProvider::new(
            "scripted",
            [tool_turn(&[("1", "read", json!({}))]), text_turn("done")],
        );
        let mut config = AgentConfig::new(model(), Arc::new(provider.clone()));
        config.hooks = Arc::new(PlannedHooks::new(catalog.clone(), env.clone(), Arc::new(NoHooks)));
        let context = catalog.context(&env.get(), Some("sys".into())).unwrap();
        let outcome = Agent::new(config).run(context, vec![Message::user("go")]).finish().await;
        assert_eq!(outcome.reason, EndReason::Completed);
        let mut run_bytes = Vec::new();
        for mut request in provider.requests() {
            // Timestamps are the only field that differs between runs.
            for m in &mut request.messages {
                match m {
                    Message::User(u) => u.timestamp = 0,
                    Message::Assistant(a) => a.timestamp = 0,
                    Message::ToolResult(t) => t.timestamp = 0,
                }
            }
            run_bytes.push(serde_json::to_vec(&request).unwrap());
        }
        bytes.push(run_bytes);
    }
    assert_eq!(bytes[0], bytes[1]);
    assert_eq!(bytes[0], bytes[2]);
}

#[test]
fn catalog_rejects_duplicates_and_unregistered_executors() {
    let mut c = ToolCatalog::new();
    c.add(descriptor("a", None), answering("a", "x")).unwrap();
    let err = c.add(descriptor("a", None), answering("a", "y")).unwrap_err();
    assert_eq!(err.to_string(), "Duplicate tool descriptor name: a");
    c.add_descriptor(descriptor("b", None)).unwrap();
    let err = c.plan(&AvailabilityEnv::default()).unwrap_err();
    assert_eq!(err, CatalogError::UnregisteredExecutor { name: "b".into() });
}
