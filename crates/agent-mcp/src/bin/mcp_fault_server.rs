//! A small MCP server (stdio) for agent-mcp's fault tests, on rmcp's server side.
//!
//! Tools: `echo {text}`, `crash` (the process exits mid-call), `hang` (never
//! answers), `malformed` (writes a line that is not JSON-RPC, then hangs),
//! `slow_progress {steps, delay_ms}` (progress notifications, then a result),
//! `add_tool` (adds `extra_tool` and sends `notifications/tools/list_changed`),
//! `fail` (an `isError` result), `describe` (its arguments back, as text and
//! `structuredContent`), `env` (its environment variables, names as text and
//! the map as `structuredContent`), `big_text {bytes}`, `image {kind}` (a png,
//! or a hostile one: `tiff`, `bad_base64`, `huge`, `mislabeled` jpeg bytes
//! called png), `stderr_flood` (bytes that are not UTF-8 and a 2 MiB line on
//! stderr, then `last words`, then it exits), `stray` (a line that is not
//! JSON-RPC on stdout, then an answer), `endless_stdout` (a stdout line that
//! never ends). `echo` is annotated read-only.
//! `tools/list` is paged, three tools a page.
//! When `FAULT_SERVER_LOG` names a file, every `notifications/cancelled` the
//! server honours is appended to it as `cancelled <tool>`.
//!
//! With `FAULT_SERVER_RAW=1` it speaks JSON-RPC by hand instead, to send what
//! rmcp's server side cannot: a `tools/list` whose tools have a schema root
//! that is not an object (`true`, `{"type": "string"}`), a schema over 64 KiB,
//! a 5000-character description, and a second page whose `nextCursor` repeats
//! itself; its `reply_then_stray` tool writes its answer and a stray line in
//! one write. With `FAULT_SERVER_RAW=endless` every `tools/list` page is empty
//! and names a new cursor.
#![allow(clippy::disallowed_methods, reason = "a program reads its own process environment")]

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
            tool("env", "Reports its environment", no_args()),
            tool(
                "big_text",
                "Answers with that many bytes of text",
                json!({"type": "object", "properties": {"bytes": {"type": "integer"}}}),
            ),
            tool(
                "image",
                "Answers with an image of that kind",
                json!({"type": "object", "properties": {"kind": {"type": "string"}}}),
            ),
            tool("stderr_flood", "Floods stderr with hostile bytes, then exits", no_args()),
            tool("stray", "Writes a line that is not JSON-RPC, then answers", no_args()),
            tool("endless_stdout", "Writes one stdout line that never ends", no_args()),
        ];
        if let Some(echo) = tools.first_mut()
            && let Ok(annotations) = serde_json::from_value(json!({
                "readOnlyHint": true, "idempotentHint": true, "destructiveHint": false,
                "openWorldHint": false, "title": "Echo"
            }))
        {
            echo.annotations = Some(annotations);
        }
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
            "echo" => {
                let echoed = args.get("text").and_then(Value::as_str).unwrap_or_default();
                // The idempotency key, when the client sent one, so tests see it arrive.
                // rmcp hands a request's `_meta` to the handler in the context.
                const KEY: &str = "io.clawcall/idempotencyKey";
                let key = request.meta.as_ref().and_then(|m| m.get(KEY)).or(context.meta.get(KEY));
                match key {
                    Some(Value::String(key)) => text(format!("{echoed} [key {key}]")),
                    _ => text(echoed),
                }
            }
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
            "env" => {
                let vars: serde_json::Map<String, Value> =
                    std::env::vars().map(|(k, v)| (k, Value::String(v))).collect();
                let mut names: Vec<&String> = vars.keys().collect();
                names.sort();
                let names = names.iter().map(|n| n.as_str()).collect::<Vec<_>>().join("\n");
                let mut result = CallToolResult::success(vec![ContentBlock::text(names)]);
                result.structured_content = Some(json!({ "env": vars }));
                Ok(CallToolResponse::Complete(result))
            }
            "big_text" => {
                let bytes = args.get("bytes").and_then(Value::as_u64).unwrap_or(0);
                text("y".repeat(usize::try_from(bytes).unwrap_or(0)))
            }
            "image" => {
                let kind = args.get("kind").and_then(Value::as_str).unwrap_or("png");
                let (data, mime) = match kind {
                    "png" => (B64.encode(PNG), "image/png"),
                    "tiff" => (B64.encode(b"II*\0tiff"), "image/tiff"),
                    "bad_base64" => ("not base64 at all!".to_owned(), "image/png"),
                    "huge" => {
                        let mut bytes = PNG.to_vec();
                        bytes.resize(4_000_000, 0);
                        (B64.encode(bytes), "image/png")
                    }
                    "mislabeled" => (B64.encode(JPEG), "image/png"),
                    other => return Err(ErrorData::invalid_params(format!("kind {other}"), None)),
                };
                Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                    ContentBlock::text(format!("an image: {kind}")),
                    ContentBlock::image(data, mime),
                ])))
            }
            "stderr_flood" => {
                let mut err = std::io::stderr().lock();
                let _ = err.write_all(b"bad \xff\xfe bytes\n");
                let _ = err.write_all(&vec![b'x'; 2 * 1024 * 1024]);
                let _ = err.write_all(b"\nlast words \xc3\n");
                let _ = err.flush();
                std::process::exit(3);
            }
            "stray" => {
                {
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(b"Server log: this is not JSON-RPC\n");
                    let _ = out.flush();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                text("answered after a stray line")
            }
            "endless_stdout" => {
                let chunk = vec![b'z'; 64 * 1024];
                let mut out = std::io::stdout().lock();
                // Until the client stops reading (the pipe breaks).
                while out.write_all(&chunk).is_ok() {}
                std::process::exit(4);
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

/// A 1x1 png.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];
/// The start of a jpeg (its signature is what counts here).
const JPEG: &[u8] = &[0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, b'J', b'F', b'I', b'F', 0x00];

use base64::Engine as _;
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// One JSON-RPC answer line.
fn answer(id: &Value, result: Value) -> String {
    format!("{}\n", json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// The hand-written server of `FAULT_SERVER_RAW=1`.
fn raw_main() {
    use std::io::BufRead;
    let tool = |name: &str, schema: Value| json!({"name": name, "inputSchema": schema});
    let object = json!({"type": "object", "properties": {}});
    let mut huge = serde_json::Map::new();
    for i in 0..3000 {
        huge.insert(format!("property_{i}"), json!({"type": "string", "description": "padding"}));
    }
    let long = json!({
        "name": "long_description", "description": "d".repeat(5000), "inputSchema": object
    });
    let first_page = json!({
        "tools": [
            tool("ok_a", object.clone()),
            tool("root_true", json!(true)),
            tool("root_string", json!({"type": "string"})),
            tool("huge_schema", json!({"type": "object", "properties": huge})),
            long,
        ],
        "nextCursor": "page-2",
    });
    let second_page = json!({
        "tools": [tool("ok_b", object.clone()), tool("reply_then_stray", object)],
        // The same cursor again: a client that follows it never stops.
        "nextCursor": "page-2",
    });
    let endless = std::env::var("FAULT_SERVER_RAW").is_ok_and(|v| v == "endless");
    let mut pages = 0u64;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let reply = match message.get("method").and_then(Value::as_str).unwrap_or("") {
            "initialize" => {
                let version =
                    message.pointer("/params/protocolVersion").cloned().unwrap_or(Value::Null);
                answer(
                    &id,
                    json!({
                        "protocolVersion": version,
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "raw-fault-server", "version": "1"}
                    }),
                )
            }
            "tools/list" if endless => {
                // An empty page with a fresh cursor, every time.
                pages += 1;
                answer(&id, json!({"tools": [], "nextCursor": format!("page-{pages}")}))
            }
            "tools/list" => match message.pointer("/params/cursor").and_then(Value::as_str) {
                None => answer(&id, first_page.clone()),
                Some(_) => answer(&id, second_page.clone()),
            },
            "tools/call" => {
                let name = message
                    .pointer("/params/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let result =
                    json!({"content": [{"type": "text", "text": format!("{name} answered")}]});
                if name == "reply_then_stray" {
                    format!("{}this stray line came right after the answer\n", answer(&id, result))
                } else {
                    answer(&id, result)
                }
            }
            "ping" => answer(&id, json!({})),
            _ => continue,
        };
        if message.get("id").is_none() {
            continue;
        }
        let _ = out.write_all(reply.as_bytes());
        let _ = out.flush();
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if std::env::var_os("FAULT_SERVER_RAW").is_some() {
        raw_main();
        return;
    }
    let server = match rmcp::serve_server(FaultServer::default(), rmcp::transport::stdio()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fault-server: handshake failed: {e}");
            std::process::exit(1);
        }
    };
    let _ = server.waiting().await;
}
