//! The run's spans, following the OpenTelemetry GenAI semantic conventions
//! (`llm_core::telemetry`): `invoke_agent` per run, a `turn` span per turn
//! beneath it, an `execute_tool {name}` span per call beneath its turn (a
//! model request's `chat {model}` span is the provider's, opened in the turn's
//! scope). Public so a driver other than [`AgentRun`](crate::AgentRun), such
//! as a durable one, emits the same tree.

use llm_core::telemetry;
use serde_json::Value;
use tracing::field::Empty;

use crate::event::EndReason;
use crate::machine::Answer;
use crate::tool::{ToolError, ToolOutput};

/// The `invoke_agent` span of a run (`llm_core::telemetry`): its turns, model requests and
/// tool calls nest beneath it. A durable driver records `clawcall.invocation_id`: each
/// attempt of one durable invocation (a retry, a resume) has a span of its own with that id.
pub fn invoke_agent_span(model: &llm_core::Model) -> tracing::Span {
    let span = tracing::info_span!(
        "invoke_agent",
        otel.name = "invoke_agent",
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.system = Empty,
        gen_ai.provider.name = Empty,
        gen_ai.request.model = %model.id,
        "error.type" = Empty,
        clawcall.end_reason = Empty,
        clawcall.turns = Empty,
        clawcall.invocation_id = Empty,
    );
    if !span.is_disabled() {
        let provider = telemetry::provider_name(model);
        match telemetry::semconv() {
            telemetry::Semconv::Default => span.record("gen_ai.system", provider),
            telemetry::Semconv::Latest => span.record("gen_ai.provider.name", provider),
        };
    }
    span
}

/// The span of a turn that begins, beneath the run's (the previous turn's ends when its
/// last call does). A durable driver records how many of the turn's journaled steps ran
/// to an answer in this attempt (`clawcall.steps_run`) and how many were read back from
/// the journal (`clawcall.steps_replayed`, which emit no span again).
pub fn turn_span(run: &tracing::Span, turn: u32) -> tracing::Span {
    tracing::info_span!(
        parent: run,
        "turn",
        clawcall.turn = i64::from(turn),
        clawcall.steps_run = Empty,
        clawcall.steps_replayed = Empty,
    )
}

/// The `execute_tool {name}` span of one call, beneath its turn; its arguments only when
/// content is captured.
pub fn execute_tool_span(
    turn: &tracing::Span,
    call: &llm_core::ToolCall,
    args: &Value,
) -> tracing::Span {
    let span = tracing::info_span!(
        parent: turn,
        "execute_tool",
        otel.name = Empty,
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.type = "function",
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        "error.type" = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("execute_tool {}", call.name));
        if telemetry::capture_content() {
            span.record("gen_ai.tool.call.arguments", args.to_string());
        }
    }
    span
}

/// How a call ended, on its span: `error.type` is `tool_error`, `panic` or `aborted`.
pub fn record_tool_answer(span: &tracing::Span, answer: &Answer<Result<ToolOutput, ToolError>>) {
    if span.is_disabled() {
        return;
    }
    let error = match answer {
        Answer::Done(Ok(output)) => {
            if telemetry::capture_content() {
                let text = telemetry::user_content_text(&output.content);
                span.record("gen_ai.tool.call.result", text);
            }
            return;
        }
        Answer::Done(Err(_)) => "tool_error",
        Answer::Panicked(_) => "panic",
        Answer::Abandoned => "aborted",
    };
    span.record("error.type", error);
    span.record("otel.status_code", "ERROR");
}

/// How a run ended, on its `invoke_agent` span: `clawcall.end_reason`,
/// `clawcall.turns`, and `error.type` for a failed run.
pub fn record_run_end(span: &tracing::Span, reason: EndReason, turns: u32) {
    if span.is_disabled() {
        return;
    }
    let reason = serde_json::to_value(reason).ok();
    let reason = reason.as_ref().and_then(Value::as_str).unwrap_or("failed");
    span.record("clawcall.end_reason", reason);
    span.record("clawcall.turns", i64::from(turns));
    if matches!(reason, "error" | "failed") {
        span.record("error.type", reason);
        span.record("otel.status_code", "ERROR");
    }
}
