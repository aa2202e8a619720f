//! Which tools a run offers: the built-in tools of [`crate::tools::TOOLS`]
//! and the tools of the MCP servers, planned together by `tool-planner`
//! (availability from claw's configuration, one stable order).
//!
//! A hidden tool is neither sent to the provider nor in the run's tool list,
//! so a call to it gets the loop's unknown-tool error result.

use std::collections::BTreeMap;
use std::sync::Arc;

use agent_core::{AgentTool, ToolError, ToolInvocation};
use agent_mcp::{McpServerConfig, McpServers, McpTransport};
use llm_core::UserContent;
use serde_json::{Value, json};
use tool_planner::{
    Availability, AvailabilityEnv, ConfigCheck, ExecutorRef, Owner, Signal, ToolDescriptor,
    build_tool_plan,
};

use crate::config::McpServerEntry;
use crate::sanitize;
use crate::tools::{Needs, TOOLS, ToolEnv, ToolSpec};

/// The context key that says whether the built-in tool `name` was selected
/// (`--tools`); its descriptor requires it to be `true`.
fn selected_key(name: &str) -> String {
    format!("claw.tools.{name}")
}

/// The planner's descriptor of a built-in tool: owner and executor core,
/// available when selected and when what it needs is configured.
fn builtin_descriptor(spec: &ToolSpec, tool: &AgentTool) -> ToolDescriptor {
    let mut d =
        ToolDescriptor::new(spec.name, tool.tool.description.clone(), tool.tool.parameters.clone());
    d.owner = Owner::Core;
    d.executor = Some(ExecutorRef::Core { executor_id: spec.name.to_owned() });
    let selected = Availability::Signal(Signal::Context {
        key: selected_key(spec.name),
        equals: Some(Value::Bool(true)),
    });
    let config = |key: &str| {
        Availability::Signal(Signal::Config {
            path: vec![key.to_owned()],
            check: ConfigCheck::NonEmpty,
        })
    };
    d.availability = Some(match spec.needs {
        Needs::Nothing => selected,
        Needs::Workspace => Availability::AllOf(vec![selected, config("workspace")]),
        Needs::NotesFile => Availability::AllOf(vec![selected, config("notes")]),
    });
    d.annotations = Some(json!({ "readOnlyHint": !spec.side_effects }));
    d
}

/// Every tool a run can offer, and what decides which ones it does.
pub(crate) struct Toolbox {
    builtin: Vec<(ToolDescriptor, AgentTool)>,
    env: AvailabilityEnv,
    /// Values that must never appear in tool output (API keys).
    secrets: Arc<Vec<String>>,
    /// The connected MCP servers, if any were configured.
    pub(crate) mcp: Option<McpServers>,
    /// The notes file's full path (what `append_note` writes to).
    notes_target: std::path::PathBuf,
    /// Whether the provider declares tool support: a provider that does not is sent none.
    provider_tools: bool,
}

/// One plan's outcome.
pub(crate) struct Planned {
    /// The visible tools, in plan order.
    pub(crate) tools: Vec<AgentTool>,
    /// Each visible MCP tool's name and whether it needs approval (every
    /// tool not annotated `readOnlyHint: true`).
    pub(crate) mcp_approval: BTreeMap<String, bool>,
}

impl Toolbox {
    /// The built-in tools with the `--tools` selection (`None`: all) checked,
    /// and the availability environment built from claw's configuration.
    pub(crate) fn new(selection: Option<&[String]>, env: &ToolEnv) -> Result<Toolbox, String> {
        let mut values = BTreeMap::new();
        for t in TOOLS {
            values.insert(selected_key(t.name), Value::Bool(selection.is_none()));
        }
        for name in selection.unwrap_or(&[]).iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
            if crate::tools::spec(name).is_none() {
                let all: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
                return Err(format!("unknown tool `{name}` (available: {})", all.join(", ")));
            }
            values.insert(selected_key(name), Value::Bool(true));
        }
        let availability = AvailabilityEnv {
            config: json!({
                "workspace": env.workspace.root().display().to_string(),
                "notes": env.notes.display().to_string(),
            }),
            values,
            ..AvailabilityEnv::default()
        };
        let builtin = TOOLS
            .iter()
            .map(|spec| {
                let tool = (spec.build)(env);
                (builtin_descriptor(spec, &tool), tool)
            })
            .collect();
        Ok(Toolbox {
            builtin,
            env: availability,
            secrets: env.secrets.clone(),
            mcp: None,
            notes_target: env.workspace.root().join(&env.notes),
            provider_tools: true,
        })
    }

    /// The notes file's full path.
    pub(crate) fn notes_target(&self) -> &std::path::Path {
        &self.notes_target
    }

    /// Whether the provider declares tool support ([`llm_core::Capability::Tools`]): every
    /// plan of a provider that does not is empty, as a request with tools would fail.
    pub(crate) fn set_provider_tools(&mut self, declared: bool) {
        self.provider_tools = declared;
    }

    /// Plans the built-in and MCP tools together (a down server's tools are hidden).
    pub(crate) fn plan(&self) -> Result<Planned, String> {
        if !self.provider_tools {
            return Ok(Planned { tools: Vec::new(), mcp_approval: BTreeMap::new() });
        }
        let mut env = self.env.clone();
        let mcp = self.mcp.as_ref().map(|servers| {
            servers.apply_availability(&mut env);
            servers.tools()
        });
        let mut descriptors: Vec<ToolDescriptor> =
            self.builtin.iter().map(|(d, _)| d.clone()).collect();
        if let Some(set) = &mcp {
            descriptors.extend(set.descriptors.iter().cloned());
        }
        let plan = build_tool_plan(&descriptors, &env).map_err(|e| format!("tool plan: {e}"))?;
        for hidden in &plan.hidden {
            let why: Vec<&str> = hidden.diagnostics.iter().map(|d| d.message.as_str()).collect();
            tracing::debug!(tool = %hidden.descriptor.name, "hidden: {}", why.join("; "));
        }
        let mut planned = Planned { tools: Vec::new(), mcp_approval: BTreeMap::new() };
        for v in &plan.visible {
            let name = v.descriptor.name.as_str();
            let tool = match &v.descriptor.owner {
                Owner::Mcp { .. } => {
                    let read_only = v
                        .descriptor
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get("readOnlyHint"))
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    planned.mcp_approval.insert(name.to_owned(), !read_only);
                    let tool = mcp.as_ref().and_then(|set| set.tool(name));
                    if let Some(tool) = tool {
                        planned.tools.push(redacting(tool, self.secrets.clone()));
                    }
                    continue;
                }
                _ => self.builtin.iter().find(|(d, _)| d.name == name).map(|(_, t)| t),
            };
            if let Some(tool) = tool {
                planned.tools.push(tool.clone());
            }
        }
        Ok(planned)
    }

    /// Connects the MCP servers (none configured: nothing happens). A server
    /// that does not start is an error naming it, and no server is left running.
    pub(crate) async fn connect_mcp(
        &mut self,
        configs: Vec<McpServerConfig>,
    ) -> Result<(), String> {
        if configs.is_empty() {
            return Ok(());
        }
        let servers = McpServers::connect(configs)
            .await
            .map_err(|e| e.to_string())?
            .with_reserved_names(TOOLS.iter().map(|t| t.name));
        for (id, status) in servers.statuses() {
            if let agent_mcp::ServerStatus::Down { reason, .. } = status {
                servers.shutdown().await;
                return Err(format!("MCP server `{id}` did not start: {reason}"));
            }
        }
        self.mcp = Some(servers);
        Ok(())
    }

    /// Between chat turns: lets the servers re-list changed tools and restart;
    /// whether anything changed (then plan again).
    pub(crate) async fn refresh(&self) -> bool {
        match &self.mcp {
            Some(servers) => servers.refresh().await,
            None => false,
        }
    }

    /// Ends the MCP servers' processes.
    pub(crate) async fn shutdown(&self) {
        if let Some(servers) = &self.mcp {
            servers.shutdown().await;
        }
    }
}

/// The server configurations of a run: the config's `[mcp.servers]` (by
/// name), then one per `--mcp` command line (trusted with `--trust-mcp`).
pub(crate) fn server_configs(
    table: &BTreeMap<String, McpServerEntry>,
    command_lines: &[String],
    trust_command_lines: bool,
) -> Result<Vec<McpServerConfig>, String> {
    let mut out = Vec::new();
    for (id, entry) in table {
        let transport = match (&entry.command, &entry.url) {
            (Some(program), None) => McpTransport::Stdio {
                program: program.clone(),
                args: entry.args.clone(),
                env: entry.env.clone(),
                cwd: entry.cwd.clone(),
            },
            (None, Some(url))
                if entry.args.is_empty() && entry.env.is_empty() && entry.cwd.is_none() =>
            {
                McpTransport::Http {
                    url: url.clone(),
                    bearer_token: None,
                    headers: BTreeMap::new(),
                }
            }
            (None, Some(_)) => {
                return Err(format!(
                    "MCP server `{id}`: `args`, `env` and `cwd` are for `command` servers, not `url` ones"
                ));
            }
            _ => {
                return Err(format!("MCP server `{id}`: give exactly one of `command` and `url`"));
            }
        };
        out.push(
            McpServerConfig::new(id.clone(), transport)
                .with_trusted(entry.trusted)
                .with_inherited_env(entry.inherit_env),
        );
    }
    for line in command_lines {
        let config = McpServerConfig::from_command_line(line).map_err(|e| format!("--mcp: {e}"))?;
        out.push(config.with_trusted(trust_command_lines));
    }
    // A server that inherits claw's whole environment still gets no API key:
    // the key variables are set empty for it (unless its `env` gives them).
    let keys: Vec<&str> = crate::models::ProviderKind::all()
        .flat_map(crate::models::ProviderKind::secret_vars)
        .collect();
    for config in out.iter_mut().filter(|c| c.inherit_env) {
        if let McpTransport::Stdio { env, .. } = &mut config.transport {
            for key in &keys {
                if std::env::var_os(key).is_some() {
                    env.entry((*key).to_owned()).or_default();
                }
            }
        }
    }
    Ok(out)
}

/// At most this much of an MCP tool's text output reaches the model and the
/// session (as much as `read_file` reads). It stays well under agent-mcp's own
/// cut, so a secret split by that cut lies past this one and is never shown.
const MAX_MCP_TEXT: usize = crate::workspace::MAX_READ as usize;

/// `tool` with the API key values (and the secrets given to MCP servers)
/// replaced by `[redacted]` in its output and errors, as the built-in tools
/// do, and its text bounded: a server may read a file that holds a secret,
/// or answer with megabytes.
fn redacting(tool: &AgentTool, secrets: Arc<Vec<String>>) -> AgentTool {
    let inner = tool.executor.clone();
    let mut wrapped = tool.clone();
    wrapped.executor = Arc::new(move |invocation: ToolInvocation| {
        let running = inner.execute(invocation);
        let secrets = secrets.clone();
        async move {
            match running.await {
                Ok(mut output) => {
                    // Images past every provider's limit are already described by agent-mcp.
                    let mut room = MAX_MCP_TEXT;
                    let mut total = 0usize;
                    for content in &mut output.content {
                        if let UserContent::Text(t) = content {
                            total = total.saturating_add(t.text.len());
                            // Redacted whole first, so a cut cannot split a secret.
                            let text = sanitize::redact(std::mem::take(&mut t.text), &secrets);
                            t.text = cut(text, room);
                            room = room.saturating_sub(t.text.len());
                        }
                    }
                    if total > MAX_MCP_TEXT {
                        output.content.push(UserContent::text(format!(
                            "\n[truncated: the tool returned {} KiB of text; the first {} KiB are shown]",
                            total / 1024,
                            MAX_MCP_TEXT / 1024
                        )));
                    }
                    output.details = output.details.take().and_then(|details| {
                        let text = sanitize::redact(details.to_string(), &secrets);
                        if text.len() > MAX_MCP_TEXT {
                            return Some(json!({"truncated": true, "bytes": text.len()}));
                        }
                        serde_json::from_str(&text).ok()
                    });
                    Ok(output)
                }
                Err(ToolError(message)) => {
                    Err(ToolError(cut(sanitize::redact(message, &secrets), MAX_MCP_TEXT)))
                }
            }
        }
    });
    wrapped
}

/// `text` cut to at most `limit` bytes, at a character boundary.
fn cut(mut text: String, limit: usize) -> String {
    if text.len() > limit {
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;

    fn descriptor_of(name: &str) -> ToolDescriptor {
        let spec = crate::tools::spec(name).expect("a built-in tool");
        let tool = agent_core::AgentTool::new(
            llm_core::Tool { name: name.into(), description: "d".into(), parameters: json!({}) },
            |_: ToolInvocation| async { Ok(agent_core::ToolOutput::text("x")) },
        );
        builtin_descriptor(spec, &tool)
    }

    fn env(selected: &[&str], config: Value) -> AvailabilityEnv {
        AvailabilityEnv {
            config,
            values: selected.iter().map(|n| (selected_key(n), Value::Bool(true))).collect(),
            ..AvailabilityEnv::default()
        }
    }

    #[test]
    fn built_in_tools_are_hidden_when_unselected_or_what_they_need_is_missing() {
        let descriptors: Vec<ToolDescriptor> =
            ["read_file", "append_note", "calculator"].iter().map(|n| descriptor_of(n)).collect();
        let visible = |env: &AvailabilityEnv| -> Vec<String> {
            let plan = build_tool_plan(&descriptors, env).unwrap();
            plan.visible.iter().map(|v| v.descriptor.name.clone()).collect()
        };
        let all = ["read_file", "append_note", "calculator"];
        let configured = json!({"workspace": "/w", "notes": "/w/n.md"});
        assert_eq!(
            visible(&env(&all, configured.clone())),
            ["append_note", "calculator", "read_file"]
        );
        assert_eq!(visible(&env(&["calculator"], configured)), ["calculator"]);
        // No workspace: the file tool is hidden; no notes file: append_note is.
        assert_eq!(visible(&env(&all, json!({"notes": "/w/n.md"}))), ["append_note", "calculator"]);
        assert_eq!(
            visible(&env(&all, json!({"workspace": "/w", "notes": ""}))),
            ["calculator", "read_file"]
        );
    }

    #[test]
    fn mcp_server_tables_need_exactly_one_transport() {
        let entry = |command: Option<&str>, url: Option<&str>| McpServerEntry {
            command: command.map(str::to_owned),
            url: url.map(str::to_owned),
            ..McpServerEntry::default()
        };
        let table = |e| BTreeMap::from([("fs".to_owned(), e)]);
        assert!(server_configs(&table(entry(Some("node"), None)), &[], false).is_ok());
        assert!(
            server_configs(&table(entry(None, Some("http://127.0.0.1:1/mcp"))), &[], false).is_ok()
        );
        assert!(server_configs(&table(entry(None, None)), &[], false).is_err());
        assert!(server_configs(&table(entry(Some("node"), Some("http://x"))), &[], false).is_err());
        let lines = ["node /x/server-everything/dist/index.js".to_owned()];
        let configs = server_configs(&BTreeMap::new(), &lines, false).unwrap();
        assert_eq!(configs[0].id, "everything");
        assert!(server_configs(&BTreeMap::new(), &["".to_owned()], false).is_err());
    }
}
