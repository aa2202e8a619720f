//! An agent whose tools come from an MCP server.
//!
//! ```text
//! cargo run -p example-mcp -- 'npx -y @modelcontextprotocol/server-filesystem .' "What is in this folder?"
//! ```
//!
//! It starts the server, lists its tools under the names the model will see,
//! and, with `ANTHROPIC_API_KEY` set, runs the agent with them; without the key
//! it stops after the listing, sending nothing.

use std::process::ExitCode;
use std::sync::Arc;

use agent_core::{Agent, AgentConfig, AgentContext};
use agent_mcp::{McpServerConfig, McpServers, ServerStatus};
use llm_core::{ApiKey, AssistantContent, Message, Model};
use tool_planner::AvailabilityEnv;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let command = args
        .next()
        .unwrap_or_else(|| "npx -y @modelcontextprotocol/server-filesystem .".to_owned());
    let prompt = args.next().unwrap_or_else(|| "What is in this folder?".to_owned());

    let config = match McpServerConfig::from_command_line(&command) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let servers = match McpServers::connect([config]).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    for (id, status) in servers.statuses() {
        match status {
            ServerStatus::Up => println!("server {id}: up"),
            ServerStatus::Down { reason, .. } => println!("server {id}: down ({reason})"),
        }
    }
    let tools = servers.tools();
    for (exposed, target) in tools.names.iter() {
        println!("  {exposed}  ->  {} on {}", target.tool_name, target.server_id);
    }

    let Ok(key) = std::env::var("ANTHROPIC_API_KEY") else {
        println!("set ANTHROPIC_API_KEY to run the agent with these tools");
        servers.shutdown().await;
        return ExitCode::SUCCESS;
    };
    let model = Model {
        id: "claude-sonnet-4-5".to_owned(),
        api: llm_anthropic::API.to_owned(),
        provider: "anthropic".to_owned(),
        max_tokens: 1024,
        ..Model::default()
    };
    let mut config = AgentConfig::new(model, Arc::new(llm_anthropic::AnthropicProvider::new()));
    config.options.api_key = Some(ApiKey::new(key));
    config.max_turns = Some(6);

    // The planner shows only the tools of servers that are up.
    let mut env = AvailabilityEnv::default();
    servers.apply_availability(&mut env);
    let visible = match tools.planned(&env) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let context = AgentContext { system_prompt: None, messages: vec![], tools: visible };
    let outcome = Agent::new(config).run(context, vec![Message::user(prompt)]).finish().await;
    for message in outcome.messages() {
        if let Message::Assistant(a) = message {
            for block in &a.content {
                if let AssistantContent::Text(t) = block {
                    println!("{}", t.text);
                }
            }
        }
    }
    servers.shutdown().await;
    ExitCode::SUCCESS
}
