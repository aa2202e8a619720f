//! A one-tool agent on the {{name}} API, through the front door (`clawcall`).
//!
//! ```text
//! {{UPPER}}_API_KEY=... cargo run -p example-{{name}} -- "What time is it in UTC?"
//! ```
//!
//! Without `{{UPPER}}_API_KEY`, or while `llm_{{snake}}::INFO` lists no model, it says so
//! and exits successfully, sending nothing.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clawcall::{Agent, AgentContext, AgentTool, Message, ToolError, ToolInvocation, ToolOutput};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // The catalog's first model (`{{name}}/<model id>` once INFO lists one).
    let Some(model) = clawcall::llm_{{snake}}::INFO.models.first() else {
        println!("skipped: llm_{{snake}}::INFO lists no model yet");
        return ExitCode::SUCCESS;
    };
    let mut config = match clawcall::agent_config(&format!("{{name}}/{}", model.id)) {
        Ok(config) => config,
        Err(e) => {
            println!("skipped: {e}");
            return ExitCode::SUCCESS;
        }
    };
    let prompt = std::env::args().nth(1).unwrap_or_else(|| "What time is it in UTC?".to_owned());
    config.max_turns = Some(4);

    let clock = AgentTool::new(
        clawcall::llm_core::Tool {
            name: "unix_time".to_owned(),
            description: "The current time as seconds since 1970-01-01T00:00:00Z.".to_owned(),
            parameters: serde_json::json!({"type": "object", "properties": {}}),
        },
        |_call: ToolInvocation| async {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_err(|e| ToolError(e.to_string()))?;
            Ok(ToolOutput::text(now.as_secs().to_string()))
        },
    );
    let context = AgentContext {
        system_prompt: Some("Answer briefly. Use the tool for the time.".to_owned()),
        messages: Vec::new(),
        tools: vec![clock],
    };

    let outcome = Agent::new(config).run(context, vec![Message::user(prompt)]).finish().await;
    for message in outcome.messages() {
        match message {
            Message::Assistant(reply) => {
                for call in reply.tool_calls() {
                    println!("-> {}({})", call.name, call.arguments);
                }
            }
            Message::ToolResult(result) => println!("<- {}", result.text()),
            Message::User(_) => {}
        }
    }
    if let Some(error) = &outcome.error {
        println!("error: {error}");
    }
    println!("{}", outcome.text());
    println!(
        "({:?}, {} tokens, ${:.4})",
        outcome.reason,
        outcome.usage().total_tokens,
        outcome.cost()
    );
    ExitCode::SUCCESS
}
