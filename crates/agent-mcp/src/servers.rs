//! The entry point: a set of servers, their tools as planner descriptors and
//! agent tools, and their availability.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use agent_core::{AgentTool, ToolInvocation};
use futures_util::future::join_all;
use serde_json::{Value, json};
use tool_planner::{
    Availability, AvailabilityEnv, ExecutorRef, Owner, PlanError, Signal, ToolDescriptor,
    build_tool_plan,
};

use crate::config::McpServerConfig;
use crate::error::McpError;
use crate::names::{ToolNameMap, assign_names};
use crate::server::{Server, ServerStatus};

/// The availability value of an up server (see [`availability_key`]).
pub const SERVER_UP: &str = "up";
/// The availability value of a down server.
pub const SERVER_DOWN: &str = "down";

/// The [`AvailabilityEnv::values`] key that says whether server `id` is up:
/// every MCP descriptor requires it to equal [`SERVER_UP`], so the planner
/// hides a down server's tools (`context-mismatch`).
pub fn availability_key(server_id: &str) -> String {
    format!("mcp.{server_id}")
}

/// Connected MCP servers.
///
/// ```no_run
/// # async fn demo() -> Result<(), agent_mcp::McpError> {
/// use agent_mcp::{McpServerConfig, McpServers};
/// let servers = McpServers::connect([
///     McpServerConfig::from_command_line("npx -y @modelcontextprotocol/server-filesystem .")?,
/// ])
/// .await?;
/// let mut env = tool_planner::AvailabilityEnv::default();
/// servers.apply_availability(&mut env);
/// let tools = servers.tools().planned(&env).expect("unique names");
/// # Ok(()) }
/// ```
pub struct McpServers {
    servers: Vec<Arc<Server>>,
    reserved: HashSet<String>,
    changed: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers").field("servers", &self.statuses()).finish_non_exhaustive()
    }
}

impl McpServers {
    /// Starts every server concurrently and lists its tools. A server that
    /// fails to start does not fail the others: it is down (see
    /// [`McpServers::statuses`]) and [`McpServers::refresh`] tries it again.
    /// Fails only on configuration mistakes (bad or duplicate ids).
    pub async fn connect(
        configs: impl IntoIterator<Item = McpServerConfig>,
    ) -> Result<McpServers, McpError> {
        let configs: Vec<McpServerConfig> = configs.into_iter().collect();
        let mut ids = HashSet::new();
        for c in &configs {
            c.validate()?;
            if !ids.insert(c.id.clone()) {
                return Err(McpError::Config(format!("two MCP servers share the id `{}`", c.id)));
            }
        }
        let changed = Arc::new(tokio::sync::Notify::new());
        let servers: Vec<Arc<Server>> =
            configs.into_iter().map(|c| Arc::new(Server::new(c, changed.clone()))).collect();
        let started = join_all(servers.iter().map(|s| s.start())).await;
        for (server, result) in servers.iter().zip(started) {
            if let Err(e) = result {
                tracing::warn!(server = %server.config.id, "{e}");
            }
        }
        Ok(McpServers { servers, reserved: HashSet::new(), changed })
    }

    /// Names the MCP tools must not take (the application's own tools).
    #[must_use]
    pub fn with_reserved_names(
        mut self,
        names: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.reserved = names.into_iter().map(Into::into).collect();
        self
    }

    /// Each server's id and status, in configuration order.
    pub fn statuses(&self) -> Vec<(String, ServerStatus)> {
        self.servers.iter().map(|s| (s.config.id.clone(), s.status())).collect()
    }

    /// Sets every server's availability value ([`availability_key`]).
    pub fn apply_availability(&self, env: &mut AvailabilityEnv) {
        for s in &self.servers {
            let value = match s.status() {
                ServerStatus::Up => SERVER_UP,
                ServerStatus::Down { .. } => SERVER_DOWN,
            };
            env.values.insert(availability_key(&s.config.id), Value::String(value.into()));
        }
    }

    /// Between turns: re-lists the tools of servers that sent
    /// `notifications/tools/list_changed`, and starts down servers again while
    /// their restarts last. Returns whether any tool list or status changed.
    pub async fn refresh(&self) -> bool {
        join_all(self.servers.iter().map(|s| s.refresh())).await.into_iter().any(|c| c)
    }

    /// Resolves when a server reports a tool-list change or changes status
    /// (then call [`McpServers::refresh`] and [`McpServers::tools`] again).
    /// A change that happened while nobody waited is remembered for the next call.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// The current tools of every server (up or down; the descriptors carry
    /// the availability that hides a down server's tools).
    pub fn tools(&self) -> McpToolSet {
        let listed: Vec<(Arc<Server>, rmcp::model::Tool)> = self
            .servers
            .iter()
            .flat_map(|s| s.tools().into_iter().map(move |t| (s.clone(), t)))
            .collect();
        let (names, map) = assign_names(
            listed.iter().map(|(s, t)| (s.config.id.as_str(), t.name.as_ref())),
            &self.reserved,
        );
        let mut descriptors = Vec::with_capacity(listed.len());
        let mut tools = Vec::with_capacity(listed.len());
        for ((server, tool), name) in listed.into_iter().zip(names) {
            let descriptor = descriptor(&server.config, &tool, name);
            tools.push(agent_tool(server, &tool, &descriptor));
            descriptors.push(descriptor);
        }
        McpToolSet { descriptors, tools, names: map }
    }

    /// Closes every connection (stdio servers' processes end).
    pub async fn shutdown(&self) {
        join_all(self.servers.iter().map(|s| s.shutdown())).await;
    }
}

/// A snapshot of the MCP tools: planner descriptors and the matching agent
/// tools (same names, same order), and the name mapping.
#[derive(Debug, Clone)]
pub struct McpToolSet {
    /// One descriptor per tool: owner and executor `Mcp`, the server's schema.
    pub descriptors: Vec<ToolDescriptor>,
    /// One agent tool per descriptor; executing it is a `tools/call`.
    pub tools: Vec<AgentTool>,
    /// Exposed name -> server and server-side name.
    pub names: ToolNameMap,
}

impl McpToolSet {
    /// The agent tool for an exposed name.
    pub fn tool(&self, name: &str) -> Option<&AgentTool> {
        self.tools.iter().find(|t| t.tool.name == name)
    }

    /// The visible tools in plan order (down servers' tools left out).
    pub fn planned(&self, env: &AvailabilityEnv) -> Result<Vec<AgentTool>, PlanError> {
        let plan = build_tool_plan(&self.descriptors, env)?;
        let by_name: HashMap<&str, &AgentTool> =
            self.tools.iter().map(|t| (t.tool.name.as_str(), t)).collect();
        Ok(plan
            .visible
            .iter()
            .filter_map(|v| by_name.get(v.descriptor.name.as_str()).map(|t| (*t).clone()))
            .collect())
    }
}

fn descriptor(config: &McpServerConfig, tool: &rmcp::model::Tool, name: String) -> ToolDescriptor {
    let server_id = config.id.as_str();
    let mut schema = (*tool.input_schema).clone();
    // Providers require an object schema; MCP servers sometimes leave `type` out.
    schema.entry("type").or_insert_with(|| json!("object"));
    let title =
        tool.title.clone().or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()));
    let description = tool
        .description
        .as_deref()
        .map(str::to_owned)
        .or_else(|| title.clone())
        .unwrap_or_default();
    ToolDescriptor {
        name,
        title,
        description,
        input_schema: Value::Object(schema),
        output_schema: tool.output_schema.as_ref().map(|s| Value::Object((**s).clone())),
        owner: Owner::Mcp { server_id: server_id.to_owned() },
        executor: Some(ExecutorRef::Mcp {
            server_id: server_id.to_owned(),
            tool_name: tool.name.to_string(),
        }),
        availability: Some(Availability::Signal(Signal::Context {
            key: availability_key(server_id),
            equals: Some(json!(SERVER_UP)),
        })),
        // `readOnlyHint` / `destructiveHint` tell an approval prompt what to ask.
        annotations: tool
            .annotations
            .as_ref()
            .and_then(|a| serde_json::to_value(a).ok())
            .and_then(|a| if config.trusted { Some(a) } else { untrusted_annotations(a) }),
        sort_key: None,
    }
}

/// What an untrusted server may say about its tool: only what makes an
/// approval prompt more careful (`destructiveHint: true`, `openWorldHint:
/// true`) and the title; `readOnlyHint` and `idempotentHint` would let its
/// tools run without asking.
fn untrusted_annotations(annotations: Value) -> Option<Value> {
    let Value::Object(all) = annotations else { return None };
    let kept: serde_json::Map<String, Value> = all
        .into_iter()
        .filter(|(k, v)| match k.as_str() {
            "title" => true,
            "destructiveHint" | "openWorldHint" => *v == Value::Bool(true),
            _ => false,
        })
        .collect();
    (!kept.is_empty()).then_some(Value::Object(kept))
}

fn agent_tool(server: Arc<Server>, tool: &rmcp::model::Tool, d: &ToolDescriptor) -> AgentTool {
    let tool_name: Arc<str> = Arc::from(tool.name.as_ref());
    let label = format!("{}: {}", server.config.id, d.title.as_deref().unwrap_or(&tool_name));
    let definition = llm_core::Tool {
        name: d.name.clone(),
        description: d.description.clone(),
        parameters: d.input_schema.clone(),
    };
    AgentTool::new(definition, move |invocation: ToolInvocation| {
        let server = server.clone();
        let tool_name = tool_name.clone();
        async move { server.call(&tool_name, invocation).await }
    })
    .with_label(label)
}
