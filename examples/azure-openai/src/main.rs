//! A one-tool agent on Azure OpenAI (the Responses API).
//!
//! ```text
//! AZURE_OPENAI_RESOURCE_NAME=myres AZURE_OPENAI_API_KEY=... \
//!     cargo run -p example-azure-openai -- "What time is it in UTC?"
//! ```
//!
//! The base URL comes from `AZURE_OPENAI_BASE_URL` or `AZURE_OPENAI_RESOURCE_NAME`, the
//! deployment from `AZURE_OPENAI_DEPLOYMENT` (default `gpt-5-mini`). Without
//! `AZURE_OPENAI_API_KEY`, `AZURE_OPENAI_ENTRA=1` authenticates with a Microsoft Entra ID
//! token that the agent's per-turn key hook fetches before every request
//! (`az account get-access-token`), sent as `Authorization: Bearer`.
//!
//! Without a base URL or credentials it says so and exits successfully, sending nothing.
#![allow(clippy::disallowed_methods, reason = "a program reads its own process environment")]

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use clawcall::agent_core::AgentHooks;
use clawcall::llm_core::{ApiKey, Tool};
use clawcall::llm_openai_responses::{AZURE_INFO, OpenAiResponses, OpenAiResponsesProvider};
use clawcall::{
    Agent, AgentConfig, AgentContext, AgentTool, Message, ToolError, ToolInvocation, ToolOutput,
};

/// Fetches a fresh token (blocking; run on the blocking pool).
type TokenSource = Arc<dyn Fn() -> Result<String, String> + Send + Sync>;

/// Hands the agent a token fetched for every request, so an expiring Entra token is
/// refreshed between turns.
struct EntraToken {
    source: TokenSource,
}

impl AgentHooks for EntraToken {
    fn api_key<'a>(
        &'a self,
        _provider: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<Option<ApiKey>, ToolError>> + Send + 'a>> {
        let source = self.source.clone();
        Box::pin(async move {
            let token = tokio::task::spawn_blocking(move || source())
                .await
                .map_err(|e| ToolError(format!("token source failed: {e}")))?
                .map_err(ToolError)?;
            Ok(Some(ApiKey::new(token)))
        })
    }
}

/// An Entra ID token for Azure AI services from the Azure CLI.
fn az_cli_token() -> Result<String, String> {
    let output = std::process::Command::new("az")
        .args(["account", "get-access-token", "--resource", "https://cognitiveservices.azure.com"])
        .args(["--query", "accessToken", "-o", "tsv"])
        .output()
        .map_err(|e| format!("cannot run az: {e}"))?;
    if !output.status.success() {
        return Err(format!("az account get-access-token failed ({})", output.status));
    }
    let token = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if token.is_empty() { Err("az returned no token".to_owned()) } else { Ok(token) }
}

/// The agent configuration: `key` as a resource key, or `entra` tokens fetched per turn.
fn config(
    provider: OpenAiResponsesProvider,
    deployment: &str,
    base_url: &str,
    key: Option<String>,
    entra: Option<TokenSource>,
) -> AgentConfig {
    // The base URL may also stay empty: the provider reads AZURE_OPENAI_BASE_URL or
    // AZURE_OPENAI_RESOURCE_NAME.
    // A deployment has its own name: it serves a catalog model (gpt-5-mini unless the
    // name is another catalog id), whose prices and limits it keeps.
    let catalog = AZURE_INFO.model(deployment).or_else(|| AZURE_INFO.default_model());
    let mut model = catalog.unwrap_or_default();
    model.id = deployment.to_owned();
    model.api = AZURE_INFO.api.to_owned();
    model.provider = AZURE_INFO.provider.to_owned();
    model.base_url = base_url.to_owned();
    model.max_tokens = 1024;
    let mut config = AgentConfig::new(model, Arc::new(provider));
    config.options.api_key = key.map(ApiKey::new);
    if let Some(source) = entra {
        config.options.provider_options.insert("azureAuth".into(), "entra".into());
        config.hooks = Arc::new(EntraToken { source });
    }
    config.max_turns = Some(4);
    config
}

fn clock_tool() -> AgentTool {
    AgentTool::new(
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
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let set = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let key = set("AZURE_OPENAI_API_KEY");
    let entra = key.is_none() && set("AZURE_OPENAI_ENTRA").as_deref() == Some("1");
    let located =
        set("AZURE_OPENAI_BASE_URL").is_some() || set("AZURE_OPENAI_RESOURCE_NAME").is_some();
    if !located || (key.is_none() && !entra) {
        println!(
            "skipped: set AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME, and \
             AZURE_OPENAI_API_KEY (or AZURE_OPENAI_ENTRA=1 with the Azure CLI) to run this example"
        );
        return ExitCode::SUCCESS;
    }
    let deployment = set("AZURE_OPENAI_DEPLOYMENT").unwrap_or_else(|| "gpt-5-mini".to_owned());
    let prompt = std::env::args().nth(1).unwrap_or_else(|| "What time is it in UTC?".to_owned());
    let source: Option<TokenSource> = entra.then(|| Arc::new(az_cli_token) as TokenSource);
    let config = config(
        OpenAiResponsesProvider::builder().wire(OpenAiResponses::Azure).build(),
        &deployment,
        "",
        key,
        source,
    );
    let context = AgentContext {
        system_prompt: Some("Answer briefly. Use the tool for the time.".to_owned()),
        messages: Vec::new(),
        tools: vec![clock_tool()],
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

#[cfg(test)]
mod tests;
