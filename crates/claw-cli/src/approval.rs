//! Approval of tools with side effects, as an agent hook: nothing with a side
//! effect runs unless the user approved it up front (`--yes`, the config's
//! `approve` list) or answers yes at the prompt. Without a terminal to ask on
//! (`--json`, piped stdin) an unapproved call is refused with the reason.

use std::collections::BTreeSet;
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
}

impl Approvals {
    pub(crate) fn new(all: bool, allowed: &[String], interactive: bool) -> Arc<Approvals> {
        Arc::new(Approvals {
            all,
            allowed: Mutex::new(allowed.iter().cloned().collect()),
            interactive,
        })
    }

    async fn decide(&self, tool: &str, args: &Value) -> BeforeToolCall {
        // Unknown names are not ours to judge: the loop reports them as unknown tools.
        let Some(spec) = tools::spec(tool) else { return BeforeToolCall::Allow };
        if !spec.side_effects || self.all {
            return BeforeToolCall::Allow;
        }
        // Held across the prompt so two calls never ask at once.
        let mut allowed = self.allowed.lock().await;
        if allowed.contains(tool) {
            return BeforeToolCall::Allow;
        }
        if !self.interactive {
            return BeforeToolCall::Block(Some(format!(
                "`{tool}` has side effects and was not approved (the user can rerun with --yes or add it to `approve` in the claw config)"
            )));
        }
        let question = format!(
            "claw: allow {tool} {}? [y]es / [n]o / [a]lways for {tool}: ",
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

impl AgentHooks for Approvals {
    fn before_tool_call<'a>(
        &'a self,
        info: CallInfo<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, BeforeToolCall> {
        Box::pin(self.decide(&info.call.name, args))
    }
}
