//! A deterministic, one-line-per-event printer for fixtures and tests.

use std::fmt::Write;

use crate::event::AssistantEvent;
use crate::types::AssistantMessage;

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn message_json(message: &AssistantMessage) -> String {
    let mut m = message.clone();
    // Timestamps are wall-clock; fixtures must not depend on them.
    m.timestamp = 0;
    serde_json::to_string(&m).unwrap_or_default()
}

/// One event as one line (no newline).
pub fn print_event(event: &AssistantEvent) -> String {
    match event {
        AssistantEvent::Start => "start".to_owned(),
        AssistantEvent::TextStart { content_index } => format!("text_start {content_index}"),
        AssistantEvent::TextDelta { content_index, delta } => {
            format!("text_delta {content_index} {}", quote(delta))
        }
        AssistantEvent::TextEnd { content_index, content } => {
            format!("text_end {content_index} {}", quote(content))
        }
        AssistantEvent::ThinkingStart { content_index } => {
            format!("thinking_start {content_index}")
        }
        AssistantEvent::ThinkingDelta { content_index, delta } => {
            format!("thinking_delta {content_index} {}", quote(delta))
        }
        AssistantEvent::ThinkingEnd { content_index, content } => {
            format!("thinking_end {content_index} {}", quote(content))
        }
        AssistantEvent::ToolCallStart { content_index, id, name } => {
            format!("toolcall_start {content_index} id={} name={}", quote(id), quote(name))
        }
        AssistantEvent::ToolCallDelta { content_index, delta, changed } => match changed {
            Some(pointer) => {
                format!("toolcall_delta {content_index} {} at={}", quote(delta), quote(pointer))
            }
            None => format!("toolcall_delta {content_index} {}", quote(delta)),
        },
        AssistantEvent::ToolCallEnd { content_index, tool_call } => format!(
            "toolcall_end {content_index} {}",
            serde_json::to_string(&**tool_call).unwrap_or_default()
        ),
        AssistantEvent::ProviderContent { content_index, content } => format!(
            "provider_content {content_index} {} {}",
            quote(&content.wire_type),
            serde_json::to_string(&content.data).unwrap_or_default()
        ),
        AssistantEvent::Done { reason, .. } => format!("done {}", reason.as_str()),
        AssistantEvent::Error { reason, error, .. } => {
            let mut line = format!("error {} kind={}", reason.as_str(), error.kind);
            if let Some(status) = error.status {
                let _ = write!(line, " status={status}");
            }
            if let Some(code) = &error.code {
                let _ = write!(line, " code={}", quote(code));
            }
            let _ = write!(line, " retryable={} {}", error.retryable, quote(&error.message));
            line
        }
    }
}

/// Every event, one per line, then `message <json>` for the terminal event's
/// message (timestamp zeroed). Ends with a newline.
pub fn print_transcript(events: &[AssistantEvent]) -> String {
    let mut out = String::new();
    for event in events {
        out.push_str(&print_event(event));
        out.push('\n');
    }
    if let Some(AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. }) =
        events.last()
    {
        out.push_str("message ");
        out.push_str(&message_json(message));
        out.push('\n');
    }
    out
}
