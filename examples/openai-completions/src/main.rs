//! A one-tool agent on OpenAI Chat Completions.
//!
//! ```text
//! OPENAI_API_KEY=... cargo run -p example-openai-completions -- "What time is it in UTC?"
//! ```
//!
//! Without `OPENAI_API_KEY` it says so and exits successfully, sending nothing.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use agent_core::{
    Agent, AgentConfig, AgentContext, AgentTool, ToolError, ToolInvocation, ToolOutput,
};
use llm_core::{ApiKey, Message, Model, Tool};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Ok(key) = std::env::var("OPENAI_API_KEY") else {
        println!("skipped: set OPENAI_API_KEY to run this example");
        return ExitCode::SUCCESS;
    };
    let prompt = std::env::args().nth(1).unwrap_or_else(|| "What time is it in UTC?".to_owned());

    // An empty base URL means the provider's public endpoint.
    let model = Model {
        id: "gpt-4o-mini".to_owned(),
        api: llm_openai_completions::API.to_owned(),
        provider: "openai".to_owned(),
        max_tokens: 1024,
        ..Model::default()
    };
    let mut config =
        AgentConfig::new(model, Arc::new(llm_openai_completions::OpenAiCompletionsProvider::new()));
    config.options.api_key = Some(ApiKey::new(key));
    config.max_turns = Some(4);

    let clock = AgentTool::new(
        Tool {
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
                if let Some(error) = &reply.error_message {
                    println!("error: {error}");
                }
                let text = reply.text();
                if !text.is_empty() {
                    println!("{text}");
                }
            }
            Message::ToolResult(result) => println!("<- {}", result.text()),
            Message::User(_) => {}
        }
    }
    println!("({:?})", outcome.reason);
    ExitCode::SUCCESS
}
