//! Against the real reference servers from the npm registry
//! (`@modelcontextprotocol/server-everything` and `server-filesystem`,
//! versions pinned by `.ci/setup-mcp`, which installs them).
//!
//! Skips only when `node` is absent; with node present and the servers not
//! installed it fails and says to run the setup script.

use std::path::PathBuf;
use std::time::Duration;

use agent_core::{AgentEvent, EndReason};
use agent_mcp::{McpServerConfig, McpServers, ServerStatus};
use futures_util::StreamExt;
use llm_core::{Message, UserContent};
use serde_json::json;

use crate::*;

/// The folder `.ci/setup-mcp` installs into.
fn servers_dir() -> PathBuf {
    match std::env::var_os("AGENT_MCP_SERVERS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.mcp-servers"),
    }
}

/// `node <entry point>` of an installed reference server, or `None` (with a
/// message) when node is not installed.
fn reference_server(package: &str) -> Option<(String, PathBuf)> {
    let node_ok = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !node_ok {
        eprintln!("SKIPPED: `node` is not installed, so the MCP reference-server tests cannot run");
        return None;
    }
    let entry = servers_dir()
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        entry.is_file(),
        "{} is not installed: run `.ci/setup-mcp` (it installs the pinned MCP reference servers \
         into {})",
        package,
        servers_dir().display()
    );
    Some(("node".to_owned(), entry))
}

fn config(id: &str, node: String, entry: PathBuf, args: &[&str]) -> McpServerConfig {
    let mut all = vec![entry.display().to_string()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    McpServerConfig::stdio(id, node, all).with_connect_timeout(Duration::from_secs(30))
}

#[tokio::test]
async fn server_everything_tools_results_and_progress() {
    let Some((node, entry)) = reference_server("server-everything") else { return };
    let servers =
        McpServers::connect([config("everything", node, entry, &["stdio"])]).await.unwrap();
    assert_eq!(servers.statuses()[0].1, ServerStatus::Up, "{:?}", servers.statuses());
    let set = servers.tools();
    let tool = |name: &str| {
        set.tool(name).unwrap_or_else(|| panic!("no {name} in {:?}", set.names)).clone()
    };

    let out = invoke(&tool("everything__echo"), json!({"message": "hi there"})).await.unwrap();
    assert!(text_of(&out.content).contains("hi there"), "{out:?}");

    let out = invoke(&tool("everything__get-sum"), json!({"a": 2, "b": 40})).await.unwrap();
    assert!(text_of(&out.content).contains("42"), "{out:?}");

    let out = invoke(&tool("everything__get-tiny-image"), json!({})).await.unwrap();
    let image = out.content.iter().find_map(|c| match c {
        UserContent::Image(i) => Some(i),
        UserContent::Text(_) => None,
    });
    let image = image.expect("an image block");
    assert_eq!(image.mime_type, "image/png");
    assert!(image.data.starts_with("iVBOR"), "base64 PNG");

    let out = invoke(
        &tool("everything__get-resource-reference"),
        json!({"resourceType": "Text", "resourceId": 3}),
    )
    .await
    .unwrap();
    let text = text_of(&out.content);
    assert!(text.contains("Resource demo://resource/dynamic/text/3"), "{text}");

    let out = invoke(&tool("everything__get-structured-content"), json!({"location": "Chicago"}))
        .await
        .unwrap();
    let details = out.details.unwrap();
    assert_eq!(details["structuredContent"]["temperature"], json!(36));
    assert_eq!(details["mcpTool"], json!("get-structured-content"));

    // Progress notifications through the agent loop.
    let agent = scripted_agent(vec![
        tool_turn(
            "c1",
            "everything__trigger-long-running-operation",
            json!({"duration": 1, "steps": 4}),
        ),
        text_turn("done"),
    ]);
    let events: Vec<AgentEvent> =
        agent.run(context(set.tools.clone()), vec![Message::user("go")]).collect().await;
    let updates: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionUpdate { partial, .. } => Some(text_of(&partial.content)),
            _ => None,
        })
        .collect();
    // The server sends its last progress notification right before the result, and
    // agent-core delivers nothing for a call after its end: that one may race the
    // result and be dropped, never delivered late or out of order.
    assert!((3..=4).contains(&updates.len()), "{updates:?}");
    for (i, update) in updates.iter().enumerate() {
        assert!(update.starts_with(&format!("{}/4", i + 1)), "{updates:?}");
    }
    let (messages, reason) = end(&events);
    assert_eq!(reason, EndReason::Completed);
    let r = results(&messages);
    assert!(!r[0].is_error);
    assert!(text_of(&r[0].content).contains("Long running operation completed"), "{r:?}");
    servers.shutdown().await;
}

#[tokio::test]
async fn server_filesystem_reads_and_refuses() {
    let Some((node, entry)) = reference_server("server-filesystem") else { return };
    let root = temp_dir("fs");
    std::fs::write(root.join("hello.txt"), "hello from a file\n").unwrap();
    let root = root.canonicalize().unwrap();
    let root_arg = root.display().to_string();
    let fs = config("fs", node, entry, &[root_arg.as_str()]);
    // Its annotations count only when the user trusts it.
    let trusted = McpServers::connect([fs.clone().with_trusted(true)]).await.unwrap();
    let set = trusted.tools();
    let descriptor = set.descriptors.iter().find(|d| d.name == "fs__read_text_file").unwrap();
    assert_eq!(descriptor.annotations.as_ref().unwrap()["readOnlyHint"], json!(true));
    trusted.shutdown().await;

    let servers = McpServers::connect([fs]).await.unwrap();
    assert_eq!(servers.statuses()[0].1, ServerStatus::Up, "{:?}", servers.statuses());
    let set = servers.tools();
    let read = set.tool("fs__read_text_file").expect("read_text_file");
    let descriptor = set.descriptors.iter().find(|d| d.name == "fs__read_text_file").unwrap();
    assert!(
        descriptor.annotations.as_ref().is_none_or(|a| a.get("readOnlyHint").is_none()),
        "{:?}",
        descriptor.annotations
    );

    let out = invoke(read, json!({"path": root.join("hello.txt")})).await.unwrap();
    assert_eq!(text_of(&out.content).trim(), "hello from a file");

    // Outside the allowed folder: the server's `isError` result is an error result.
    let err = invoke(read, json!({"path": "/etc/hostname"})).await.unwrap_err();
    assert!(err.0.contains("Access denied"), "{err}");
    servers.shutdown().await;
}
