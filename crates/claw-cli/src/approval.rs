//! Approval of tools with side effects: nothing with a side effect runs unless
//! the user approved it up front (`--yes`, the config's `approve` list) or
//! answers yes at the question. The agent hook only decides whether to ask: a
//! call to ask about is parked by the loop (`BeforeToolCall::Ask`) while the
//! rest of its batch goes on, and the event loop asks the person, one question
//! at a time, when the loop announces it (`AgentEvent::ApprovalRequested`).
//! Without a terminal to ask on (`--json`, piped stdin) an unapproved call is
//! refused with the reason. An MCP tool counts as having side effects unless
//! its server is trusted and annotates it `readOnlyHint: true`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use agent_core::{AgentHooks, BeforeToolCall, CallInfo};
use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::{sanitize, tools};

/// The user's approval policy for one run.
pub(crate) struct Approvals {
    /// `--yes`: every tool is approved.
    pub(crate) all: bool,
    /// Tools approved by name (config `approve`, or "always" at the prompt).
    allowed: std::sync::Mutex<BTreeSet<String>>,
    /// Whether the user can be asked (stdin and stderr are terminals, not `--json`).
    pub(crate) interactive: bool,
    /// The offered MCP tools and whether each needs approval (set at every plan).
    mcp: std::sync::Mutex<BTreeMap<String, bool>>,
    /// What a built-in tool acts on, shown in its question (`append_note`: the file).
    targets: BTreeMap<String, String>,
    /// Raised by Ctrl-C at a question (the terminal is raw then: no SIGINT).
    interrupt: Arc<tokio::sync::Notify>,
}

impl Approvals {
    /// `targets`: tool name -> what it acts on, named in the question.
    pub(crate) fn new(
        all: bool,
        allowed: &[String],
        interactive: bool,
        targets: BTreeMap<String, String>,
        interrupt: Arc<tokio::sync::Notify>,
    ) -> Arc<Approvals> {
        Arc::new(Approvals {
            all,
            allowed: std::sync::Mutex::new(allowed.iter().cloned().collect()),
            interactive,
            mcp: std::sync::Mutex::new(BTreeMap::new()),
            targets,
            interrupt,
        })
    }

    /// The MCP tools now offered: name -> whether it needs approval.
    pub(crate) fn set_mcp_tools(&self, tools: BTreeMap<String, bool>) {
        match self.mcp.lock() {
            Ok(mut m) => *m = tools,
            Err(poisoned) => *poisoned.into_inner() = tools,
        }
    }

    /// Whether a call of `tool` would be asked about (or refused) rather than run.
    pub(crate) fn asks(&self, tool: &str) -> bool {
        !self.all && self.needs_approval(tool) == Some(true)
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

    fn approved(&self, tool: &str) -> bool {
        let allowed = match self.allowed.lock() {
            Ok(a) => a,
            Err(poisoned) => poisoned.into_inner(),
        };
        allowed.contains(tool)
    }

    /// What the loop does with a call of `tool`: run it, refuse it, or park it
    /// until the person answers ([`Approvals::ask_person`]).
    pub(crate) fn policy(&self, tool: &str) -> BeforeToolCall {
        // Unknown names are not ours to judge: the loop reports them as unknown tools.
        let Some(needs_approval) = self.needs_approval(tool) else {
            return BeforeToolCall::Allow;
        };
        if !needs_approval || self.all || self.approved(tool) {
            return BeforeToolCall::Allow;
        }
        if !self.interactive {
            return BeforeToolCall::Block(Some(format!(
                "`{tool}` may have side effects and was not approved (the user can rerun with --yes or add it to `approve` in the claw config)"
            )));
        }
        BeforeToolCall::Ask { reason: format!("`{tool}` may have side effects") }
    }

    /// Asks the person about a parked call of `tool` with `args`. The event
    /// loop asks one question at a time, so two questions never mix.
    pub(crate) async fn ask_person(&self, tool: &str, args: &Value) -> Verdict {
        // "always" for an earlier call of the same batch answers this one too.
        if self.approved(tool) {
            return Verdict::Allow;
        }
        let shown = sanitize::terminal(tool);
        let target = match self.targets.get(tool) {
            Some(t) => format!(" → {}", sanitize::terminal(t)),
            None => String::new(),
        };
        let question = format!(
            "claw: allow {shown} {}{target}? [y]es / [n]o (a reason may follow) / [a]lways: ",
            sanitize::terminal(&args.to_string())
        );
        // The output of other calls waits, and the status line hides, while the question is up.
        let screen = crate::render::question();
        let answer = ask(question).await;
        drop(screen);
        match answer {
            Answer::Line(line) => {
                let line = line.trim();
                let (word, reason) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
                match word {
                    "y" | "Y" | "yes" => Verdict::Allow,
                    "a" | "A" | "always" => {
                        match self.allowed.lock() {
                            Ok(mut a) => a.insert(tool.to_owned()),
                            Err(poisoned) => poisoned.into_inner().insert(tool.to_owned()),
                        };
                        Verdict::Allow
                    }
                    _ if reason.trim().is_empty() => {
                        Verdict::Deny(format!("the user declined `{tool}`"))
                    }
                    _ => Verdict::Deny(format!(
                        "the user declined `{tool}`: {}",
                        sanitize::one_line(reason.trim())
                    )),
                }
            }
            Answer::Interrupted => {
                // Ctrl-C at the question stops the whole run, as anywhere else.
                self.interrupt.notify_one();
                Verdict::Deny(format!("the user interrupted the run instead of approving `{tool}`"))
            }
            Answer::Closed => Verdict::Deny(format!("the user declined `{tool}` (no answer)")),
        }
    }
}

/// What the approval policy says about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It runs.
    Allow,
    /// It does not; the reason goes to the model as the call's result.
    Deny(String),
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
        _args: &'a Value,
    ) -> BoxFuture<'a, BeforeToolCall> {
        let policy = self.policy(&info.call.name);
        Box::pin(async move { policy })
    }
}
