//! Terminal and JSON-lines output of agent events.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_core::{AgentEvent, EndReason};
use llm_core::{AssistantEvent, Message, Model, Usage, UserContent};
use serde_json::{Value, json};

use crate::markdown::Markdown;
use crate::sanitize;

/// The version of the `--json` event schema (`docs/claw.md`).
pub(crate) const JSON_SCHEMA_VERSION: u32 = 1;

/// Whether a question is on the screen: output is held back and the status
/// line hidden until it is answered, so nothing interleaves with it.
static ASKING: AtomicBool = AtomicBool::new(false);

/// The status line on screen, if any (a question hides it).
static STATUS: Mutex<Option<indicatif::ProgressBar>> = Mutex::new(None);

/// While a question is on the screen (dropped when it is answered).
pub(crate) struct Question(());

/// Takes the screen for a question: hides the status line and holds output back.
pub(crate) fn question() -> Question {
    ASKING.store(true, Ordering::SeqCst);
    let status = match STATUS.lock() {
        Ok(mut s) => s.take(),
        Err(poisoned) => poisoned.into_inner().take(),
    };
    if let Some(bar) = status {
        bar.finish_and_clear();
    }
    let _ = std::io::stderr().write_all(b"\n");
    Question(())
}

impl Drop for Question {
    fn drop(&mut self) {
        ASKING.store(false, Ordering::SeqCst);
    }
}

fn asking() -> bool {
    ASKING.load(Ordering::SeqCst)
}

/// Dims `text` when colors are on.
pub(crate) fn dim(text: &str, color: bool) -> String {
    if color { format!("\x1b[2m{text}\x1b[0m") } else { text.to_owned() }
}

fn paint(code: &str, text: &str, color: bool) -> String {
    if color { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_owned() }
}

/// Renders a run's events as they arrive.
pub(crate) struct Renderer {
    color: bool,
    json: bool,
    model: Model,
    turns: u32,
    usage: Usage,
    at_line_start: bool,
    running: Vec<String>,
    /// Shown on stderr while waiting for the model or a tool (a terminal only).
    spinner: Option<indicatif::ProgressBar>,
    /// Renders answer text as Markdown, a line at a time (a terminal only).
    markdown: Option<Markdown>,
    /// Answer text not yet rendered (the current incomplete line).
    pending_line: String,
    /// How much of `pending_line` is on the screen already, unstyled (it is
    /// redrawn styled once the line is complete).
    partial_shown: usize,
    reason: Option<EndReason>,
    /// Print tool results whole, not only their first line.
    expand: bool,
    /// Waiting for the first event of a response (the spinner says so).
    waiting: bool,
    /// Show the user's prompt (not in chat mode, where it was just typed).
    echo_user: bool,
    /// What the status line says while waiting for the model.
    waiting_for: String,
    /// Output written while a question was on the screen, shown after it.
    held: String,
    /// Each running call's label (`name(args)`), by call id.
    labels: HashMap<String, String>,
}

impl Renderer {
    pub(crate) fn new(
        color: bool,
        json: bool,
        expand: bool,
        echo_user: bool,
        model: Model,
    ) -> Self {
        Renderer {
            echo_user,
            expand,
            waiting: false,
            color,
            json,
            model,
            turns: 0,
            usage: Usage::default(),
            at_line_start: true,
            running: Vec::new(),
            spinner: None,
            markdown: (color && !json).then(Markdown::default),
            pending_line: String::new(),
            partial_shown: 0,
            reason: None,
            waiting_for: String::new(),
            held: String::new(),
            labels: HashMap::new(),
        }
        .with_patience(None)
    }

    /// Names, in the status line, how long a silent provider is waited for.
    pub(crate) fn with_patience(mut self, patience: Option<std::time::Duration>) -> Self {
        let host = crate::host_of(&self.model.base_url).to_owned();
        let limit = match patience {
            Some(d) => format!("; gives up after {} s of silence", d.as_secs_f64()),
            None => String::new(),
        };
        self.waiting_for = sanitize::terminal(&format!(
            "waiting for {} at {host}{limit}; Ctrl-C stops",
            self.model.id
        ))
        .into_owned();
        self
    }

    /// Writes untrusted text (model or tool output), neutralised.
    fn text(&mut self, text: &str) {
        let safe = sanitize::terminal(text);
        self.out(&safe);
    }

    /// Writes our own text (already safe) to stdout.
    fn out(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.clear_spinner();
        self.at_line_start = text.ends_with('\n');
        if asking() {
            self.held.push_str(text);
            return;
        }
        let mut stdout = std::io::stdout().lock();
        if !self.held.is_empty() {
            let _ = stdout.write_all(std::mem::take(&mut self.held).as_bytes());
        }
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    }

    /// Writes output held back while a question was up, once it is answered.
    fn release_held(&mut self) {
        if asking() || self.held.is_empty() {
            return;
        }
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(std::mem::take(&mut self.held).as_bytes());
        let _ = stdout.flush();
    }

    fn newline(&mut self) {
        if !self.at_line_start {
            self.out("\n");
        }
    }

    fn clear_spinner(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
        if let Ok(mut status) = STATUS.lock() {
            *status = None;
        }
    }

    /// Shows, updates or hides the spinner for the current state.
    fn draw_spinner(&mut self) {
        if !self.color || self.json || asking() || (self.running.is_empty() && !self.waiting) {
            self.clear_spinner();
            return;
        }
        // A question may have cleared it meanwhile.
        if self.spinner.as_ref().is_some_and(indicatif::ProgressBar::is_finished) {
            self.spinner = None;
        }
        let what = if self.running.is_empty() {
            self.waiting_for.clone()
        } else {
            format!("running {}", self.running.join(", "))
        };
        match &self.spinner {
            Some(spinner) => spinner.set_message(what),
            None => {
                let spinner = indicatif::ProgressBar::new_spinner();
                if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner:.cyan} {msg}")
                {
                    spinner.set_style(style);
                }
                spinner.set_message(what);
                spinner.enable_steady_tick(Duration::from_millis(80));
                if let Ok(mut status) = STATUS.lock() {
                    *status = Some(spinner.clone());
                }
                self.spinner = Some(spinner);
            }
        }
    }

    /// Answer text: straight through, or a line at a time as Markdown.
    fn answer_text(&mut self, delta: &str) {
        if self.markdown.is_none() {
            self.text(delta);
            return;
        }
        self.pending_line.push_str(&sanitize::terminal(delta));
        while let Some(end) = self.pending_line.find('\n') {
            self.erase_partial();
            let line: String = self.pending_line.drain(..=end).collect();
            let styled = match self.markdown.as_mut() {
                Some(md) => md.push_line(line.trim_end_matches('\n')),
                None => vec![line.trim_end_matches('\n').to_owned()],
            };
            for styled in styled {
                self.out(&format!("{styled}\n"));
            }
        }
        // The incomplete line shows as it streams; it is redrawn styled when complete.
        if let Some(new) = self.pending_line.get(self.partial_shown..).map(str::to_owned)
            && !new.is_empty()
        {
            self.out(&new);
            self.partial_shown = self.pending_line.len();
        }
    }

    /// Removes the unstyled partial line from the screen (before its styled form).
    fn erase_partial(&mut self) {
        if self.partial_shown == 0 {
            return;
        }
        let shown = self.pending_line.get(..self.partial_shown).unwrap_or("");
        let width = unicode_width::UnicodeWidthStr::width(shown);
        self.partial_shown = 0;
        let columns =
            console::Term::stdout().size_checked().map_or(80, |(_, cols)| usize::from(cols)).max(1);
        // A line wider than the terminal wrapped onto more rows.
        let rows = width.saturating_sub(1) / columns;
        let up = if rows > 0 { format!("\x1b[{rows}A") } else { String::new() };
        self.out(&format!("\r{up}\x1b[J"));
        self.at_line_start = true;
    }

    /// Renders the incomplete last line of answer text, and a table still held, if any.
    fn flush_answer(&mut self) {
        self.erase_partial();
        let line = std::mem::take(&mut self.pending_line);
        let Some(md) = self.markdown.as_mut() else {
            self.out(&line);
            return;
        };
        let mut styled = if line.is_empty() { Vec::new() } else { md.push_line(&line) };
        styled.extend(md.finish());
        let last = styled.len().saturating_sub(1);
        for (n, text) in styled.into_iter().enumerate() {
            // The text's own last line keeps having no line break, as it had none.
            let unterminated = n == last && !line.is_empty() && !line.trim_start().starts_with('|');
            self.out(&if unterminated { text } else { format!("{text}\n") });
        }
    }

    pub(crate) fn event(&mut self, event: &AgentEvent) {
        self.release_held();
        if !matches!(event, AgentEvent::MessageUpdate { event: AssistantEvent::TextDelta { .. } }) {
            self.flush_answer();
        }
        self.render(event);
        self.draw_spinner();
    }

    fn render(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::TurnStart => self.waiting = true,
            // Waiting lasts until something shows: a text or thinking delta, a tool call.
            AgentEvent::MessageUpdate {
                event:
                    AssistantEvent::TextDelta { .. }
                    | AssistantEvent::ThinkingDelta { .. }
                    | AssistantEvent::ToolCallStart { .. },
            }
            | AgentEvent::MessageEnd { .. } => {
                self.waiting = false;
            }
            _ => {}
        }
        if let AgentEvent::TurnEnd { message, .. } = event {
            self.turns += 1;
            let u = &message.usage;
            self.usage.input = self.usage.input.saturating_add(u.input);
            self.usage.output = self.usage.output.saturating_add(u.output);
            self.usage.cache_read = self.usage.cache_read.saturating_add(u.cache_read);
            self.usage.cache_write = self.usage.cache_write.saturating_add(u.cache_write);
            self.usage.recompute(&self.model.cost);
        }
        if let AgentEvent::AgentEnd { reason, .. } = event {
            self.reason = Some(*reason);
        }
        if self.json {
            if let Some(value) = event_json(event, self.turns, &self.model) {
                self.json_line(&value);
            }
            return;
        }
        let c = self.color;
        match event {
            AgentEvent::MessageStart { message: Message::User(u) } if self.echo_user => {
                let text: Vec<String> = u
                    .content
                    .blocks()
                    .iter()
                    .filter_map(|b| match b {
                        UserContent::Text(t) => Some(t.text.clone()),
                        UserContent::Image(_) => None,
                    })
                    .collect();
                self.newline();
                self.out(&format!("{} ", paint("1;34", "you ›", c)));
                self.text(&text.join(" "));
                self.out("\n");
            }
            AgentEvent::MessageUpdate { event } => match event {
                AssistantEvent::TextDelta { delta, .. } => self.answer_text(delta),
                AssistantEvent::ThinkingStart { .. } => {
                    self.newline();
                    self.out(&dim("thinking: ", c));
                }
                AssistantEvent::ThinkingDelta { delta, .. } => {
                    let safe = sanitize::terminal(delta);
                    self.out(&dim(&safe, c));
                }
                AssistantEvent::ThinkingEnd { .. } => self.out("\n"),
                AssistantEvent::ToolCallStart { name, .. } => {
                    self.newline();
                    self.out(&format!("{} ", paint("33", "⚙", c)));
                    self.text(name);
                    self.out(" ");
                }
                AssistantEvent::ToolCallDelta { delta, .. } => {
                    let safe = sanitize::terminal(delta);
                    self.out(&dim(&safe, c));
                }
                AssistantEvent::ToolCallEnd { .. } => self.out("\n"),
                _ => {}
            },
            // A tool that may ask for approval is not covered by the spinner (it would draw over the question).
            AgentEvent::ToolExecutionStart { tool_call_id, tool_name, args } => {
                let label = call_label(tool_name, args);
                // A tool that may ask is not in the status line (the question hides it anyway).
                if !crate::tools::spec(tool_name).is_some_and(|t| t.side_effects) {
                    self.running.push(label.clone());
                }
                self.labels.insert(tool_call_id.clone(), label);
            }
            AgentEvent::ToolExecutionUpdate { tool_call_id, tool_name, partial } => {
                let label =
                    self.labels.get(tool_call_id).cloned().unwrap_or_else(|| tool_name.clone());
                self.newline();
                self.out(&format!("  {} ", dim("…", c)));
                self.text(&format!("{label}: {}", first_line(&partial.content)));
                self.out("\n");
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, tool_name, result, is_error, .. } => {
                let label = self.labels.remove(tool_call_id).unwrap_or_else(|| tool_name.clone());
                if let Some(pos) = self.running.iter().position(|n| *n == label) {
                    self.running.remove(pos);
                }
                self.newline();
                let mark = if *is_error { paint("31", "✗", c) } else { paint("32", "✓", c) };
                self.out(&format!("  {mark} "));
                if self.expand {
                    let whole = all_text(&result.content);
                    self.text(&format!("{label} →\n"));
                    for line in whole.lines() {
                        self.text(&format!("    {line}\n"));
                    }
                } else {
                    self.text(&format!("{label} → {}", first_line(&result.content)));
                    self.out("\n");
                }
            }
            // A failed response is reported once, on stderr, with what to check.
            AgentEvent::MessageEnd { message: Message::Assistant(_) } => self.newline(),
            _ => {}
        }
    }

    fn json_line(&mut self, value: &Value) {
        let line = sanitize::json_line(value.to_string());
        self.out(&format!("{line}\n"));
    }

    /// The closing summary line (stderr, so `--json` stdout stays clean).
    pub(crate) fn finish(&mut self, elapsed: Duration) {
        self.flush_answer();
        self.clear_spinner();
        if self.json {
            let u = &self.usage;
            let end = json!({
                "type": "run_end",
                "reason": self.reason.map(reason_name),
                "turns": self.turns,
                "usage": {"input": u.input, "output": u.output, "cache_read": u.cache_read,
                          "cache_write": u.cache_write, "total_tokens": u.total_tokens},
                "cost_usd": {"input": u.cost.input, "output": u.cost.output,
                             "cache_read": u.cost.cache_read, "cache_write": u.cost.cache_write,
                             "total": u.cost.total},
                "duration_ms": elapsed.as_millis() as u64,
            });
            self.json_line(&end);
            return;
        }
        self.newline();
        let u = &self.usage;
        let line = format!(
            "— {} turn{} · {} tokens (in {}, out {}, cache read {}, cache write {}) · ${:.4} · {:.1}s · {}",
            self.turns,
            if self.turns == 1 { "" } else { "s" },
            u.total_tokens,
            u.input,
            u.output,
            u.cache_read,
            u.cache_write,
            u.cost.total,
            elapsed.as_secs_f64(),
            self.reason.map(reason_name).unwrap_or("unknown"),
        );
        crate::note(&dim(&line, self.color));
    }
}

/// A call as one short line, `name(key="value", ...)`, so the results of
/// parallel calls of one tool can be told apart (neutralised by the caller).
fn call_label(name: &str, args: &Value) -> String {
    const MAX: usize = 60;
    let inner = match args {
        Value::Object(map) => {
            map.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
        }
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let inner: String = sanitize::one_line(&inner);
    let short: String = inner.chars().take(MAX).collect();
    let ellipsis = if short.len() < inner.len() { "…" } else { "" };
    format!("{name}({short}{ellipsis})")
}

fn first_line(content: &[UserContent]) -> String {
    let text = content
        .iter()
        .find_map(|c| match c {
            UserContent::Text(t) => Some(t.text.as_str()),
            UserContent::Image(_) => None,
        })
        .unwrap_or("");
    let lines = text.lines().count();
    let first: String = text.lines().next().unwrap_or("").chars().take(100).collect();
    if lines > 1 { format!("{first} (+{} lines)", lines - 1) } else { first }
}

fn all_text(content: &[UserContent]) -> String {
    let texts: Vec<&str> = content
        .iter()
        .filter_map(|c| match c {
            UserContent::Text(t) => Some(t.text.as_str()),
            UserContent::Image(_) => None,
        })
        .collect();
    texts.join("\n")
}

/// Tool results shown whole (chat's `/expand`), neutralised.
pub(crate) fn tool_results_in_full(results: &[llm_core::ToolResultMessage]) -> String {
    if results.is_empty() {
        return "no tool results in the last exchange\n".to_owned();
    }
    let mut out = String::new();
    for r in results {
        let mark = if r.is_error { "✗" } else { "✓" };
        out.push_str(&format!("{mark} {} →\n", sanitize::terminal(&r.tool_name)));
        for line in all_text(&r.content).lines() {
            out.push_str(&format!("    {}\n", sanitize::terminal(line)));
        }
    }
    out
}

/// The snake_case name of an end reason (`--json` and the summary line).
pub(crate) fn reason_name(reason: EndReason) -> &'static str {
    match reason {
        EndReason::Completed => "completed",
        EndReason::Terminated => "terminated",
        EndReason::StopAfterBatch => "stop_after_batch",
        EndReason::StopHook => "stop_hook",
        EndReason::Length => "length",
        EndReason::MaxTurns => "max_turns",
        EndReason::Error => "error",
        EndReason::Aborted => "aborted",
        EndReason::Failed => "failed",
    }
}

fn usage_json(u: &Usage) -> Value {
    json!({"input": u.input, "output": u.output, "cache_read": u.cache_read,
           "cache_write": u.cache_write, "total_tokens": u.total_tokens, "cost_usd": u.cost.total})
}

/// One agent event as a line of the `--json` schema (`docs/claw.md`), or
/// `None` for events the schema leaves out (block open/close, argument fragments).
pub(crate) fn event_json(event: &AgentEvent, turns: u32, model: &Model) -> Option<Value> {
    Some(match event {
        AgentEvent::AgentStart => json!({
            "type": "agent_start", "schema": JSON_SCHEMA_VERSION,
            "provider": model.provider, "model": model.id,
        }),
        AgentEvent::AgentEnd { reason, messages } => json!({
            "type": "agent_end", "reason": reason_name(*reason), "new_messages": messages.len(),
        }),
        AgentEvent::TurnStart => json!({"type": "turn_start", "turn": turns + 1}),
        AgentEvent::TurnEnd { message, tool_results } => json!({
            "type": "turn_end", "turn": turns, "tool_results": tool_results.len(),
            "usage": usage_json(&message.usage),
        }),
        AgentEvent::MessageStart { message: Message::User(u) } => json!({
            "type": "user_message", "text": all_text(&u.content.blocks()),
        }),
        AgentEvent::MessageUpdate { event } => match event {
            AssistantEvent::TextDelta { delta, .. } => json!({"type": "text_delta", "text": delta}),
            AssistantEvent::ThinkingDelta { delta, .. } => {
                json!({"type": "thinking_delta", "text": delta})
            }
            AssistantEvent::ToolCallEnd { tool_call, .. } => json!({
                "type": "tool_call", "id": tool_call.id, "name": tool_call.name,
                "arguments": tool_call.arguments,
            }),
            _ => return None,
        },
        AgentEvent::MessageEnd { message: Message::Assistant(a) } => {
            json!({
                "type": "assistant_message", "text": a.text(),
                "stop_reason": a.stop_reason, "error": a.error_message,
                "usage": usage_json(&a.usage),
            })
        }
        AgentEvent::ToolExecutionStart { tool_call_id, tool_name, args } => json!({
            "type": "tool_start", "id": tool_call_id, "name": tool_name, "arguments": args,
        }),
        AgentEvent::ToolExecutionUpdate { tool_call_id, tool_name, partial } => json!({
            "type": "tool_update", "id": tool_call_id, "name": tool_name,
            "text": all_text(&partial.content),
        }),
        AgentEvent::ToolExecutionEnd {
            tool_call_id,
            tool_name,
            result,
            is_error,
            execution_started,
        } => {
            json!({
                "type": "tool_end", "id": tool_call_id, "name": tool_name, "is_error": is_error,
                "executed": execution_started, "text": all_text(&result.content),
                "details": result.details,
            })
        }
        _ => return None,
    })
}
