//! A small MCP server (stdio) for agent-mcp's fault tests, on rmcp's server side.
//!
//! Tools: `echo {text}`, `crash` (the process exits mid-call), `hang` (never
//! answers), `malformed` (writes a line that is not JSON-RPC, then hangs),
//! `slow_progress {steps, delay_ms}` (progress notifications, then a result),
//! `add_tool` (adds `extra_tool` and sends `notifications/tools/list_changed`),
//! `fail` (an `isError` result), `describe` (its arguments back, as text and
//! `structuredContent`). `tools/list` is paged, three tools a page.
//! When `FAULT_SERVER_LOG` names a file, every `notifications/cancelled` the
//! server honours is appended to it as `cancelled <tool>`.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Cursor, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};

const PAGE: usize = 3;

#[derive(Clone, Default)]
struct FaultServer {
    extra: Arc<AtomicBool>,
}

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let schema = match schema {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    Tool::new(name, description, Arc::new(schema))
}

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

impl FaultServer {
    fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![
            tool(
                "echo",
                "Echoes the text",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            ),
            tool("crash", "Exits the server process mid-call", no_args()),
            tool("hang", "Never answers", no_args()),
            tool("malformed", "Writes a line that is not JSON-RPC, then hangs", no_args()),
            tool(
                "slow_progress",
                "Reports progress, then answers",
                json!({"type": "object", "properties": {
                    "steps": {"type": "integer"}, "delay_ms": {"type": "integer"}}}),
            ),
            tool("add_tool", "Adds extra_tool and announces the change", no_args()),
            tool("fail", "Returns an isError result", no_args()),
            tool(
                "describe",
                "Answers with its arguments, as text and structured content",
                json!({"type": "object"}),
            ),
        ];
        if self.extra.load(Ordering::SeqCst) {
            tools.push(tool("extra_tool", "Appears after add_tool", no_args()));
        }
        tools
    }
}

fn log_cancel(tool: &str) {
    if let Ok(path) = std::env::var("FAULT_SERVER_LOG")
        && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path)
    {
        let _ = writeln!(f, "cancelled {tool}");
    }
}

fn text(t: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(t)])))
}

impl ServerHandler for FaultServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build(),
        )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.tools();
        let start: usize = request.and_then(|r| r.cursor).and_then(|c| c.parse().ok()).unwrap_or(0);
        let end = (start + PAGE).min(tools.len());
        let mut page =
            ListToolsResult::with_all_items(tools.get(start..end).unwrap_or(&[]).to_vec());
        if end < tools.len() {
            page.next_cursor = Some(Cursor::from(end.to_string()));
        }
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.clone().unwrap_or_default();
        match request.name.as_ref() {
            "echo" => text(args.get("text").and_then(Value::as_str).unwrap_or_default()),
            "crash" => {
                eprintln!("fault-server: crashing on purpose");
                std::process::exit(3);
            }
            "hang" => {
                context.ct.cancelled().await;
                log_cancel("hang");
                text("cancelled")
            }
            "malformed" => {
                {
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(b"this is not JSON-RPC\n");
                    let _ = out.flush();
                }
                context.ct.cancelled().await;
                log_cancel("malformed");
                text("cancelled")
            }
            "slow_progress" => {
                let steps = args.get("steps").and_then(Value::as_u64).unwrap_or(3);
                let delay = args.get("delay_ms").and_then(Value::as_u64).unwrap_or(100);
                let token = context
                    .meta
                    .get_progress_token()
                    .or_else(|| request.meta.as_ref().and_then(|m| m.get_progress_token()));
                for step in 1..=steps {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    if let Some(token) = &token {
                        let mut p = ProgressNotificationParam::new(token.clone(), step as f64);
                        p.total = Some(steps as f64);
                        p.message = Some(format!("step {step}"));
                        let _ = context.peer.notify_progress(p).await;
                    }
                }
                text(format!("done after {steps} steps"))
            }
            "add_tool" => {
                self.extra.store(true, Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                text("added extra_tool")
            }
            "extra_tool" if self.extra.load(Ordering::SeqCst) => text("extra"),
            "describe" => {
                let args = Value::Object(args);
                let mut result =
                    CallToolResult::success(vec![ContentBlock::text(format!("arguments: {args}"))]);
                result.structured_content = Some(json!({ "arguments": args }));
                Ok(CallToolResponse::Complete(result))
            }
            "fail" => {
                Ok(CallToolResponse::Complete(CallToolResult::error(vec![ContentBlock::text(
                    "the tool failed on purpose",
                )])))
            }
            other => Err(ErrorData::invalid_params(format!("unknown tool: {other}"), None)),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let server = match rmcp::serve_server(FaultServer::default(), rmcp::transport::stdio()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fault-server: handshake failed: {e}");
            std::process::exit(1);
        }
    };
    let _ = server.waiting().await;
}
