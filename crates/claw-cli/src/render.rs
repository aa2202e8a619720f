//! Terminal and JSON-lines output of agent events.

use std::io::Write;
use std::time::{Duration, Instant};

use agent_core::AgentEvent;
use llm_core::{AssistantEvent, Message, Model, Usage, UserContent};
use serde_json::{Value, json};

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

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
    spinner_at: Option<Instant>,
    spinner_frame: usize,
    reason: Option<String>,
}

impl Renderer {
    pub(crate) fn new(color: bool, json: bool, model: Model) -> Self {
        Renderer {
            color,
            json,
            model,
            turns: 0,
            usage: Usage::default(),
            at_line_start: true,
            running: Vec::new(),
            spinner_at: None,
            spinner_frame: 0,
            reason: None,
        }
    }

    fn out(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
        self.at_line_start = text.ends_with('\n');
    }

    fn newline(&mut self) {
        if !self.at_line_start {
            self.out("\n");
        }
    }

    fn clear_spinner(&mut self) {
        if self.spinner_at.take().is_some() {
            let mut stderr = std::io::stderr().lock();
            let _ = stderr.write_all(b"\r\x1b[2K");
            let _ = stderr.flush();
        }
    }

    fn draw_spinner(&mut self) {
        if !self.color || self.running.is_empty() {
            return;
        }
        let now = Instant::now();
        if self.spinner_at.is_some_and(|t| now.duration_since(t) < Duration::from_millis(80)) {
            return;
        }
        self.spinner_at = Some(now);
        self.spinner_frame = (self.spinner_frame + 1) % SPINNER.len();
        let frame = SPINNER.get(self.spinner_frame).copied().unwrap_or("*");
        let line =
            format!("\r\x1b[2K{} running {}", paint("36", frame, true), self.running.join(", "));
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(line.as_bytes());
        let _ = stderr.flush();
    }

    /// Called periodically while waiting, so the spinner moves.
    pub(crate) fn tick(&mut self) {
        self.draw_spinner();
    }

    pub(crate) fn event(&mut self, event: &AgentEvent) {
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
            self.reason = Some(format!("{reason:?}"));
        }
        if self.json {
            let line = event_json(event).to_string();
            self.out(&format!("{line}\n"));
            return;
        }
        let c = self.color;
        match event {
            AgentEvent::MessageStart { message: Message::User(u) } => {
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
                let line = format!("{} {}\n", paint("1;34", "you ›", c), text.join(" "));
                self.out(&line);
            }
            AgentEvent::MessageUpdate { event } => match event {
                AssistantEvent::TextDelta { delta, .. } => self.out(delta),
                AssistantEvent::ThinkingStart { .. } => {
                    self.newline();
                    self.out(&dim("thinking: ", c));
                }
                AssistantEvent::ThinkingDelta { delta, .. } => self.out(&dim(delta, c)),
                AssistantEvent::ThinkingEnd { .. } => self.out("\n"),
                AssistantEvent::ToolCallStart { name, .. } => {
                    self.newline();
                    let head = format!("{} {name}", paint("33", "⚙", c));
                    self.out(&head);
                    self.out(" ");
                }
                AssistantEvent::ToolCallDelta { delta, .. } => self.out(&dim(delta, c)),
                AssistantEvent::ToolCallEnd { .. } => self.out("\n"),
                _ => {}
            },
            AgentEvent::ToolExecutionStart { tool_name, .. } => {
                self.running.push(tool_name.clone());
                self.draw_spinner();
            }
            AgentEvent::ToolExecutionUpdate { tool_name, partial, .. } => {
                self.clear_spinner();
                self.newline();
                let line =
                    format!("  {} {tool_name}: {}\n", dim("…", c), first_line(&partial.content));
                self.out(&line);
                self.draw_spinner();
            }
            AgentEvent::ToolExecutionEnd { tool_name, result, is_error, .. } => {
                if let Some(pos) = self.running.iter().position(|n| n == tool_name) {
                    self.running.remove(pos);
                }
                self.clear_spinner();
                self.newline();
                let mark = if *is_error { paint("31", "✗", c) } else { paint("32", "✓", c) };
                let line = format!("  {mark} {tool_name} → {}\n", first_line(&result.content));
                self.out(&line);
                self.draw_spinner();
            }
            AgentEvent::MessageEnd { message: Message::Assistant(a) } => {
                self.newline();
                if let Some(err) = &a.error_message {
                    let line = format!("{} {err}\n", paint("31", "error:", c));
                    self.out(&line);
                }
            }
            _ => {}
        }
    }

    /// The closing summary line (stderr, so `--json` stdout stays clean).
    pub(crate) fn finish(&mut self, elapsed: Duration) {
        self.clear_spinner();
        if self.json {
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
            self.reason.as_deref().unwrap_or("unknown").to_lowercase(),
        );
        eprintln!("{}", dim(&line, self.color));
    }
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

fn output_json(o: &agent_core::ToolOutput) -> Value {
    json!({"content": o.content, "details": o.details, "terminate": o.terminate})
}

/// One agent event as a JSON object (`type` names follow OpenClaw's).
pub(crate) fn event_json(event: &AgentEvent) -> Value {
    match event {
        AgentEvent::AgentStart => json!({"type": "agent_start"}),
        AgentEvent::AgentEnd { messages, reason } => {
            json!({"type": "agent_end", "reason": format!("{reason:?}"), "messages": messages})
        }
        AgentEvent::TurnStart => json!({"type": "turn_start"}),
        AgentEvent::TurnEnd { message, tool_results } => {
            json!({"type": "turn_end", "message": message, "toolResults": tool_results})
        }
        AgentEvent::MessageStart { message } => {
            json!({"type": "message_start", "message": message})
        }
        AgentEvent::MessageEnd { message } => json!({"type": "message_end", "message": message}),
        AgentEvent::MessageUpdate { event } => {
            json!({"type": "message_update", "event": llm_core::printer::print_event(event)})
        }
        AgentEvent::ToolExecutionStart { tool_call_id, tool_name, args } => json!({
            "type": "tool_execution_start", "toolCallId": tool_call_id, "toolName": tool_name, "args": args
        }),
        AgentEvent::ToolExecutionUpdate { tool_call_id, tool_name, partial } => json!({
            "type": "tool_execution_update", "toolCallId": tool_call_id, "toolName": tool_name,
            "partialResult": output_json(partial)
        }),
        AgentEvent::ToolExecutionEnd {
            tool_call_id,
            tool_name,
            result,
            is_error,
            execution_started,
        } => json!({
            "type": "tool_execution_end", "toolCallId": tool_call_id, "toolName": tool_name,
            "result": output_json(result), "isError": is_error, "executionStarted": execution_started
        }),
        _ => json!({"type": "unknown"}),
    }
}
