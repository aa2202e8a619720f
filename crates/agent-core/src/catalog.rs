//! Planned tools: descriptors planned by `tool-planner`, executed through a
//! registry of [`AgentTool`]s (OpenClaw's tool planning, in the loop).
//!
//! A [`ToolCatalog`] holds every tool the application knows: its
//! [`ToolDescriptor`] (name, description, schema, availability, sort key) and
//! the executor registered for the descriptor's [`ExecutorRef`]. Planning it
//! against an [`AvailabilityEnv`] gives the tools the model sees, in the
//! planner's stable order, so identical inputs give identical request bytes.
//! [`PlannedHooks`] re-plans before every request when the environment
//! changed (through `prepare_next_turn`) and serves deferred tools from the
//! same plan: a tool the plan hides is neither sent nor resolvable.
//!
//! ```
//! use std::sync::Arc;
//! use agent_core::{AgentContext, AgentTool, NoHooks, PlannedHooks, SharedEnv, ToolCatalog, ToolOutput, ToolInvocation};
//! use tool_planner::{Availability, AvailabilityEnv, Signal, ToolDescriptor};
//! use serde_json::json;
//!
//! let schema = json!({"type": "object"});
//! let run = AgentTool::new(
//!     llm_core::Tool { name: "web_search".into(), description: String::new(), parameters: schema.clone() },
//!     |_inv: ToolInvocation| async { Ok(ToolOutput::text("results")) },
//! );
//! let mut search = ToolDescriptor::new("web_search", "Searches the web", schema);
//! search.availability = Some(Availability::Signal(Signal::Env { name: "SEARCH_KEY".into() }));
//! let mut catalog = ToolCatalog::new();
//! catalog.add(search, run).unwrap();
//!
//! // Without the key the tool is hidden: not sent, not resolvable.
//! let env = SharedEnv::new(AvailabilityEnv::default());
//! let context = catalog.context(&env.get(), Some("You are helpful.".into())).unwrap();
//! assert!(context.tools.is_empty());
//!
//! // Hooks for `AgentConfig::hooks`: re-plan when `env.set(..)` changes it.
//! let hooks = PlannedHooks::new(Arc::new(catalog), env.clone(), Arc::new(NoHooks));
//! # let _ = (hooks, AgentContext::default());
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use futures_util::future::BoxFuture;
use tool_planner::{
    AvailabilityEnv, Diagnostic, ExecutorRef, PlanError, ToolDescriptor, build_tool_plan,
    to_protocol_descriptors,
};

use crate::context::AgentContext;
use crate::hooks::{AfterToolCall, AgentHooks, BeforeToolCall, CallInfo, TurnInfo, TurnUpdate};
use crate::tool::{AgentTool, ToolError, ToolOutput};

/// A catalog that cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// The planner's contract (duplicate names, a visible tool without executor).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A descriptor names an executor nobody registered.
    #[error("No executor registered for tool {name}")]
    UnregisteredExecutor {
        /// The descriptor's name.
        name: String,
    },
}

/// Every tool the application knows, with availability; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct ToolCatalog {
    descriptors: Vec<ToolDescriptor>,
    names: HashSet<String>,
    executors: HashMap<ExecutorRef, AgentTool>,
    deferred: HashSet<String>,
}

/// The outcome of planning a catalog: what the model sees, in plan order.
#[derive(Debug, Clone, Default)]
pub struct PlannedTools {
    /// Tools offered with every request, in plan order.
    pub tools: Vec<AgentTool>,
    /// Visible deferred tools: not offered, handed out when the model calls them.
    pub deferred: Vec<AgentTool>,
    /// Hidden tools with the planner's reasons, in plan order.
    pub hidden: Vec<(String, Vec<Diagnostic>)>,
}

impl PlannedTools {
    /// The visible deferred tool named `name`.
    pub fn deferred_tool(&self, name: &str) -> Option<&AgentTool> {
        self.deferred.iter().find(|t| t.tool.name == name)
    }
}

impl ToolCatalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the code behind an executor reference; descriptors that name
    /// it run it. The tool's own definition is replaced by each descriptor's.
    pub fn register_executor(&mut self, executor: ExecutorRef, tool: AgentTool) -> &mut Self {
        self.executors.insert(executor, tool);
        self
    }

    /// Adds a descriptor offered with every request (when available). A
    /// descriptor without an executor reference gets `core:<name>`; `tool`
    /// is registered for that reference.
    pub fn add(&mut self, descriptor: ToolDescriptor, tool: AgentTool) -> Result<(), CatalogError> {
        self.insert(descriptor, Some(tool), false)
    }

    /// Adds a descriptor that is not offered up front but handed out when the
    /// model calls it (deferred loading), if the plan shows it.
    pub fn add_deferred(
        &mut self,
        descriptor: ToolDescriptor,
        tool: AgentTool,
    ) -> Result<(), CatalogError> {
        self.insert(descriptor, Some(tool), true)
    }

    /// Adds a descriptor whose executor is registered separately
    /// ([`ToolCatalog::register_executor`]).
    pub fn add_descriptor(&mut self, descriptor: ToolDescriptor) -> Result<(), CatalogError> {
        self.insert(descriptor, None, false)
    }

    fn insert(
        &mut self,
        mut descriptor: ToolDescriptor,
        tool: Option<AgentTool>,
        deferred: bool,
    ) -> Result<(), CatalogError> {
        if self.names.contains(&descriptor.name) {
            return Err(PlanError::DuplicateToolName { name: descriptor.name }.into());
        }
        let executor = descriptor
            .executor
            .get_or_insert_with(|| ExecutorRef::Core { executor_id: descriptor.name.clone() })
            .clone();
        if let Some(tool) = tool {
            self.executors.insert(executor, tool);
        }
        self.names.insert(descriptor.name.clone());
        if deferred {
            self.deferred.insert(descriptor.name.clone());
        }
        self.descriptors.push(descriptor);
        Ok(())
    }

    /// Whether the catalog has a descriptor named `name` (visible or not).
    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// Plans the catalog against `env` (the planner's order and rules).
    pub fn plan(&self, env: &AvailabilityEnv) -> Result<PlannedTools, CatalogError> {
        let plan = build_tool_plan(&self.descriptors, env)?;
        let definitions = to_protocol_descriptors(&plan);
        let mut planned = PlannedTools::default();
        for (visible, definition) in plan.visible.iter().zip(definitions) {
            let Some(registered) = self.executors.get(visible.executor) else {
                return Err(CatalogError::UnregisteredExecutor {
                    name: visible.descriptor.name.clone(),
                });
            };
            let tool = AgentTool { tool: Arc::new(definition), ..registered.clone() };
            if self.deferred.contains(&visible.descriptor.name) {
                planned.deferred.push(tool);
            } else {
                planned.tools.push(tool);
            }
        }
        planned.hidden =
            plan.hidden.into_iter().map(|h| (h.descriptor.name.clone(), h.diagnostics)).collect();
        Ok(planned)
    }

    /// A fresh context whose tools are the plan's, in plan order.
    pub fn context(
        &self,
        env: &AvailabilityEnv,
        system_prompt: Option<String>,
    ) -> Result<AgentContext, CatalogError> {
        let planned = self.plan(env)?;
        Ok(AgentContext { system_prompt, messages: Vec::new(), tools: planned.tools })
    }
}

/// An availability environment that can change while runs are in flight;
/// clones share it. Every change bumps a version, so planning happens again
/// only when something changed.
#[derive(Debug, Clone, Default)]
pub struct SharedEnv {
    inner: Arc<RwLock<(u64, Arc<AvailabilityEnv>)>>,
}

impl SharedEnv {
    /// A shared environment starting at `env`.
    pub fn new(env: AvailabilityEnv) -> Self {
        SharedEnv { inner: Arc::new(RwLock::new((0, Arc::new(env)))) }
    }

    /// Replaces the environment.
    pub fn set(&self, env: AvailabilityEnv) {
        let mut guard = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        guard.0 += 1;
        guard.1 = Arc::new(env);
    }

    /// The current environment.
    pub fn get(&self) -> Arc<AvailabilityEnv> {
        self.versioned().1
    }

    fn versioned(&self) -> (u64, Arc<AvailabilityEnv>) {
        let guard = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        (guard.0, guard.1.clone())
    }
}

/// Hooks that keep a run's tools equal to the catalog's plan: before every
/// request the plan for the current [`SharedEnv`] is applied (the plan is
/// recomputed only when the environment changed), and deferred tools are
/// resolved from the same plan. Every other hook goes to `inner`.
pub struct PlannedHooks {
    catalog: Arc<ToolCatalog>,
    env: SharedEnv,
    inner: Arc<dyn AgentHooks>,
    cache: Mutex<Option<(u64, Arc<PlannedTools>)>>,
}

impl std::fmt::Debug for PlannedHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlannedHooks").field("catalog", &self.catalog).finish_non_exhaustive()
    }
}

impl PlannedHooks {
    /// Hooks planning `catalog` against `env`, delegating the rest to `inner`.
    pub fn new(catalog: Arc<ToolCatalog>, env: SharedEnv, inner: Arc<dyn AgentHooks>) -> Self {
        PlannedHooks { catalog, env, inner, cache: Mutex::new(None) }
    }

    /// The plan for the current environment (cached per environment version).
    /// A catalog that cannot be planned offers no tools.
    pub fn current(&self) -> Arc<PlannedTools> {
        let (version, env) = self.env.versioned();
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((v, planned)) = cache.as_ref()
            && *v == version
        {
            return planned.clone();
        }
        let planned = Arc::new(self.catalog.plan(&env).unwrap_or_else(|error| {
            tracing::warn!(%error, "tool catalog cannot be planned; no tools offered");
            PlannedTools::default()
        }));
        *cache = Some((version, planned.clone()));
        planned
    }

    /// The tools the next request should offer: the plan's, plus deferred tools
    /// this run already resolved that are still visible, in plan order.
    fn tools_for(&self, context: &AgentContext) -> Vec<AgentTool> {
        let planned = self.current();
        let mut tools = planned.tools.clone();
        tools.extend(
            planned.deferred.iter().filter(|d| context.tool(&d.tool.name).is_some()).cloned(),
        );
        // Tools the catalog does not know (added by the application) are kept.
        tools
            .extend(context.tools.iter().filter(|t| !self.catalog.contains(&t.tool.name)).cloned());
        tools
    }
}

fn same_definitions(a: &[AgentTool], b: &[AgentTool]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.tool == y.tool)
}

impl AgentHooks for PlannedHooks {
    fn resolve_deferred_tool<'a>(
        &'a self,
        info: CallInfo<'a>,
    ) -> BoxFuture<'a, Result<Option<AgentTool>, ToolError>> {
        if self.catalog.contains(&info.call.name) {
            // Known to the catalog: only the plan decides (hidden = not found).
            let found = self.current().deferred_tool(&info.call.name).cloned();
            return Box::pin(std::future::ready(Ok(found)));
        }
        self.inner.resolve_deferred_tool(info)
    }

    fn before_tool_call<'a>(
        &'a self,
        info: CallInfo<'a>,
        args: &'a serde_json::Value,
    ) -> BoxFuture<'a, BeforeToolCall> {
        self.inner.before_tool_call(info, args)
    }

    fn after_tool_call<'a>(
        &'a self,
        info: CallInfo<'a>,
        result: &'a ToolOutput,
        is_error: bool,
    ) -> BoxFuture<'a, Option<AfterToolCall>> {
        self.inner.after_tool_call(info, result, is_error)
    }

    fn should_stop_after_turn(
        &self,
        message: &llm_core::AssistantMessage,
        results: &[llm_core::ToolResultMessage],
    ) -> bool {
        self.inner.should_stop_after_turn(message, results)
    }

    fn prepare_next_turn<'a>(&'a self, info: TurnInfo<'a>) -> BoxFuture<'a, Option<TurnUpdate>> {
        let tools = self.tools_for(info.context);
        let replan = !same_definitions(&tools, &info.context.tools);
        let inner = self.inner.prepare_next_turn(info);
        Box::pin(async move {
            let mut update = inner.await;
            if replan {
                let u = update.get_or_insert_with(TurnUpdate::default);
                // The application's own tool list wins over the plan.
                if u.tools.is_none() {
                    u.tools = Some(tools);
                }
            }
            update
        })
    }

    fn transform_context<'a>(
        &'a self,
        messages: &'a [llm_core::Message],
    ) -> BoxFuture<'a, Option<Vec<llm_core::Message>>> {
        self.inner.transform_context(messages)
    }

    fn api_key<'a>(
        &'a self,
        provider: &'a str,
    ) -> BoxFuture<'a, Result<Option<llm_core::ApiKey>, ToolError>> {
        self.inner.api_key(provider)
    }
}
