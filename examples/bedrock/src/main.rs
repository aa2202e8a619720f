//! A one-tool agent on Amazon Bedrock (`ConverseStream`).
//!
//! ```text
//! AWS_BEARER_TOKEN_BEDROCK=... cargo run -p example-bedrock -- "What time is it in UTC?"
//! AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... AWS_REGION=us-west-2 cargo run -p example-bedrock
//! ```
//!
//! With a Bedrock API key it sends it as a bearer token; with AWS keys (or `AWS_PROFILE`)
//! it signs with SigV4. With neither it says so and exits successfully, sending nothing.
//! `BEDROCK_MODEL` picks another model id (default: the first of `llm_bedrock::INFO`).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use agent_core::{
    Agent, AgentConfig, AgentContext, AgentTool, ToolError, ToolInvocation, ToolOutput,
};
use llm_core::{Message, Tool};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let aws_keys = set("AWS_ACCESS_KEY_ID") && set("AWS_SECRET_ACCESS_KEY");
    if !set(llm_bedrock::BEARER_TOKEN_ENV) && !aws_keys && !set("AWS_PROFILE") {
        println!(
            "skipped: set AWS_BEARER_TOKEN_BEDROCK, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE to run this example"
        );
        return ExitCode::SUCCESS;
    }
    let prompt = std::env::args().nth(1).unwrap_or_else(|| "What time is it in UTC?".to_owned());

    // The model list and endpoint come from the crate's metadata; the crate resolves the
    // region (`AWS_REGION`) and the credentials itself, so no key is set here.
    let Some(mut model) = llm_bedrock::INFO.default_model() else {
        println!("llm_bedrock::INFO lists no model");
        return ExitCode::FAILURE;
    };
    if let Ok(id) = std::env::var("BEDROCK_MODEL") {
        model.id = id;
    }
    model.max_tokens = 1024;
    let mut config = AgentConfig::new(model, Arc::new(llm_bedrock::BedrockProvider::new()));
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
