//! Streamable HTTP: an in-process rmcp server on 127.0.0.1.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_mcp::{McpServerConfig, McpServers, McpTransport, ServerStatus};
use llm_core::ApiKey;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};

use crate::*;

#[derive(Clone)]
struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
        let Value::Object(schema) = schema else { unreachable!() };
        Ok(ListToolsResult::with_all_items(vec![Tool::new("echo", "Echoes", Arc::new(schema))]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        // `bytes`: that much text, to test the response bound.
        if let Some(bytes) = args.get("bytes").and_then(Value::as_u64) {
            let text = "z".repeat(usize::try_from(bytes).unwrap_or(0));
            return Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                ContentBlock::text(text),
            ])));
        }
        let text = args.get("text").and_then(Value::as_str).unwrap_or_default();
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(format!(
            "http says {text}"
        ))])))
    }
}

#[tokio::test]
async fn tools_over_streamable_http() {
    let seen_auth: Arc<Mutex<Vec<String>>> = Arc::default();
    let service = StreamableHttpService::new(
        || Ok(Echo),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let recorder = seen_auth.clone();
    let app = axum::Router::new().nest_service("/mcp", service).layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let recorder = recorder.clone();
            async move {
                if let Some(v) = req.headers().get("authorization").and_then(|v| v.to_str().ok()) {
                    recorder.lock().unwrap().push(v.to_owned());
                }
                next.run(req).await
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let mut config = McpServerConfig::http("web", format!("http://{addr}/mcp"))
        .with_connect_timeout(Duration::from_secs(10))
        .with_max_restarts(0);
    if let McpTransport::Http { bearer_token, .. } = &mut config.transport {
        *bearer_token = Some(ApiKey::new("test-token"));
    }
    let servers = McpServers::connect([config]).await.unwrap();
    assert_eq!(servers.statuses()[0].1, ServerStatus::Up, "{:?}", servers.statuses());
    let set = servers.tools();
    let echo = set.tool("web__echo").unwrap();
    let out = invoke(echo, json!({"text": "hi"})).await.unwrap();
    assert_eq!(text_of(&out.content), "http says hi");
    assert!(seen_auth.lock().unwrap().iter().all(|v| v == "Bearer test-token"));
    assert!(!seen_auth.lock().unwrap().is_empty());

    // The server goes away: the call is an error result, not a panic or a hang.
    server.abort();
    let _ = server.await;
    let result = tokio::time::timeout(Duration::from_secs(30), invoke(echo, json!({"text": "x"})))
        .await
        .expect("the call finished");
    let err = result.expect_err("the server is gone");
    assert!(err.0.contains("MCP server `web`"), "{err}");
    servers.shutdown().await;
}

#[tokio::test]
async fn http_responses_are_bounded_like_stdio_lines() {
    let service = StreamableHttpService::new(
        || Ok(Echo),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let limits = agent_mcp::McpLimits {
        max_message_bytes: 1024 * 1024,
        max_result_text_bytes: usize::MAX,
        ..agent_mcp::McpLimits::default()
    };
    let config = McpServerConfig::http("web", format!("http://{addr}/mcp"))
        .with_connect_timeout(Duration::from_secs(10))
        .with_limits(limits);
    let servers = McpServers::connect([config]).await.unwrap();
    let set = servers.tools();
    let echo = set.tool("web__echo").unwrap();
    // Under the bound it passes whole.
    let out = invoke(echo, json!({"bytes": 512 * 1024})).await.unwrap();
    assert_eq!(text_of(&out.content).len(), 512 * 1024);
    // Over it (2 MiB against 1 MiB) the call fails, within its timeout.
    let result =
        tokio::time::timeout(Duration::from_secs(30), invoke(echo, json!({"bytes": 2 << 20})))
            .await
            .expect("the call finished");
    let err = result.expect_err("the response is over the bound");
    // rmcp ends the transport on a message over its bound.
    assert!(err.0.contains("MCP server `web` stopped during `echo`"), "{err}");
    // The next call connects again.
    let out = invoke(echo, json!({"text": "again"})).await.unwrap();
    assert_eq!(text_of(&out.content), "http says again");
    servers.shutdown().await;
    server.abort();
}

#[tokio::test]
async fn connection_errors_do_not_show_credentials() {
    // Nothing listens on this port (bound, then closed).
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut config =
        McpServerConfig::http("web", format!("http://127.0.0.1:{port}/mcp?key=sk-query-secret"))
            .with_connect_timeout(Duration::from_secs(10))
            .with_max_restarts(0);
    if let McpTransport::Http { bearer_token, headers, .. } = &mut config.transport {
        *bearer_token = Some(ApiKey::new("sk-bearer-secret"));
        headers.insert("x-api-key".into(), "sk-header-secret".into());
    }
    let servers = McpServers::connect([config]).await.unwrap();
    let statuses = format!("{:?} {servers:?}", servers.statuses());
    assert!(statuses.contains("Down"), "{statuses}");
    for secret in ["sk-query-secret", "sk-bearer-secret", "sk-header-secret"] {
        assert!(!statuses.contains(secret), "{statuses}");
    }
}
