//! A one-tool agent on Amazon Bedrock (`ConverseStream`).
//!
//! ```text
//! AWS_BEARER_TOKEN_BEDROCK=... cargo run -p example-bedrock -- "What time is it in UTC?"
//! AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... AWS_REGION=us-west-2 cargo run -p example-bedrock
//! ```
//!
//! With a Bedrock API key it sends it as a bearer token; with AWS keys (or `AWS_PROFILE`)
//! it signs with SigV4. With neither it says so and exits successfully, sending nothing.
//! `BEDROCK_MODEL` picks another catalog model (default: the first of `llm_bedrock::INFO`).
#![allow(clippy::disallowed_methods, reason = "a program reads its own process environment")]

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clawcall::llm_bedrock;
use clawcall::llm_core::Tool;
use clawcall::{Agent, AgentContext, AgentTool, Message, ToolError, ToolInvocation, ToolOutput};

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

    // The model comes from the crate's catalog; the crate resolves the region
    // (`AWS_REGION`) and the credentials itself, so no key is needed here.
    let default = llm_bedrock::INFO.models.first().map_or("", |m| m.id);
    let id = std::env::var("BEDROCK_MODEL").unwrap_or_else(|_| default.to_owned());
    let mut config = match clawcall::agent_config(&format!("bedrock/{id}")) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    config.model.max_tokens = 1024;
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
