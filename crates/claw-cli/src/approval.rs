//! Approval of tools with side effects, as an agent hook: nothing with a side
//! effect runs unless the user approved it up front (`--yes`, the config's
//! `approve` list) or answers yes at the prompt. Without a terminal to ask on
//! (`--json`, piped stdin) an unapproved call is refused with the reason.
//! An MCP tool counts as having side effects unless its server annotates it
//! `readOnlyHint: true`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write};
use std::sync::Arc;

use agent_core::{AgentHooks, BeforeToolCall, CallInfo};
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::{sanitize, tools};

/// The user's approval policy for one run.
pub(crate) struct Approvals {
    /// `--yes`: every tool is approved.
    pub(crate) all: bool,
    /// Tools approved by name (config `approve`, or "always" at the prompt).
    allowed: Mutex<BTreeSet<String>>,
    /// Whether the user can be asked (stdin and stderr are terminals, not `--json`).
    pub(crate) interactive: bool,
    /// The offered MCP tools and whether each needs approval (set at every plan).
    mcp: std::sync::Mutex<BTreeMap<String, bool>>,
    /// What a built-in tool acts on, shown in its question (`append_note`: the file).
    targets: BTreeMap<String, String>,
}

impl Approvals {
    /// `targets`: tool name -> what it acts on, named in the question.
    pub(crate) fn new(
        all: bool,
        allowed: &[String],
        interactive: bool,
        targets: BTreeMap<String, String>,
    ) -> Arc<Approvals> {
        Arc::new(Approvals {
            all,
            allowed: Mutex::new(allowed.iter().cloned().collect()),
            interactive,
            mcp: std::sync::Mutex::new(BTreeMap::new()),
            targets,
        })
    }

    /// The MCP tools now offered: name -> whether it needs approval.
    pub(crate) fn set_mcp_tools(&self, tools: BTreeMap<String, bool>) {
        match self.mcp.lock() {
            Ok(mut m) => *m = tools,
            Err(poisoned) => *poisoned.into_inner() = tools,
        }
    }

    /// Whether `tool` needs approval; `None` for a name that is not offered.
    fn needs_approval(&self, tool: &str) -> Option<bool> {
        if let Some(spec) = tools::spec(tool) {
            return Some(spec.side_effects);
        }
        let mcp = match self.mcp.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        mcp.get(tool).copied()
    }

    async fn decide(&self, tool: &str, args: &Value) -> BeforeToolCall {
        // Unknown names are not ours to judge: the loop reports them as unknown tools.
        let Some(needs_approval) = self.needs_approval(tool) else {
            return BeforeToolCall::Allow;
        };
        if !needs_approval || self.all {
            return BeforeToolCall::Allow;
        }
        // Held across the prompt so two calls never ask at once.
        let mut allowed = self.allowed.lock().await;
        if allowed.contains(tool) {
            return BeforeToolCall::Allow;
        }
        if !self.interactive {
            return BeforeToolCall::Block(Some(format!(
                "`{tool}` may have side effects and was not approved (the user can rerun with --yes or add it to `approve` in the claw config)"
            )));
        }
        let shown = sanitize::terminal(tool);
        let target = match self.targets.get(tool) {
            Some(t) => format!(" → {}", sanitize::terminal(t)),
            None => String::new(),
        };
        let question = format!(
            "claw: allow {shown} {}{target}? [y]es / [n]o / [a]lways for {shown}: ",
            sanitize::terminal(&args.to_string())
        );
        let answer = tokio::task::spawn_blocking(move || {
            let mut stderr = std::io::stderr().lock();
            let _ = stderr.write_all(format!("\n{question}").as_bytes());
            let _ = stderr.flush();
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).map(|_| line)
        })
        .await;
        match answer.ok().and_then(Result::ok).as_deref().map(str::trim) {
            Some("y" | "Y" | "yes") => BeforeToolCall::Allow,
            Some("a" | "A" | "always") => {
                allowed.insert(tool.to_owned());
                BeforeToolCall::Allow
            }
            _ => BeforeToolCall::Block(Some(format!("the user declined `{tool}`"))),
        }
    }
}

/// A person's answer to a question on the terminal.
pub(crate) enum Answer {
    /// The line typed.
    Line(String),
    /// Ctrl-C.
    Interrupted,
    /// No terminal, or it closed (Ctrl-D).
    Closed,
}

/// Asks `question` on the controlling terminal (even when stdin or stdout is
/// redirected) with line editing; Ctrl-C answers at once instead of waiting
/// for Enter, as the terminal is in raw mode while asking.
pub(crate) async fn ask(question: String) -> Answer {
    let asked = tokio::task::spawn_blocking(move || {
        let config = rustyline::Config::builder()
            .behavior(rustyline::config::Behavior::PreferTerm)
            .auto_add_history(false)
            .build();
        let mut editor = rustyline::DefaultEditor::with_config(config)?;
        editor.readline(&question)
    })
    .await;
    match asked {
        Ok(Ok(line)) => Answer::Line(line),
        Ok(Err(rustyline::error::ReadlineError::Interrupted)) => Answer::Interrupted,
        _ => Answer::Closed,
    }
}

impl AgentHooks for Approvals {
    fn before_tool_call<'a>(
        &'a self,
        info: CallInfo<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, BeforeToolCall> {
        Box::pin(self.decide(&info.call.name, args))
    }
}
