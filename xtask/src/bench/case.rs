//! One measured case in its own process, and what it measures with.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use futures_util::StreamExt;
use llm_core::raw::framing::Framing as _;
use llm_core::{
    ApiKey, AssistantEvent, AssistantMessage, Context, Message, PartialContent, Provider,
    RetryPolicy, StopReason, StreamOptions, Tool,
};
use serde_json::{Value, json};

use super::content::{Source, event_payloads, sources, wire};
use super::server::{serve, sized_path};
use super::{MAX_EVENT_BYTES, Scenario};
use crate::providers::BENCHED as PROVIDERS;
use crate::{Error, Result};

/// CPU time of the calling thread in nanoseconds.
///
/// The kernel adds the running slice to the figure only at scheduler events (a tick, a
/// switch), so the thread yields first: `sched_yield` brings it up to date. Without that,
/// a reading could lag by a tick (up to 4 ms), which matters for the 1 MiB cases.
pub(crate) fn thread_cpu_ns() -> Result<u64> {
    std::thread::yield_now();
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").map_err(|e| {
        Error::Msg(format!("/proc/thread-self/schedstat: {e} (the bench needs Linux)"))
    })?;
    stat.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| Error::Msg(format!("unexpected schedstat `{stat}`")))
}

/// A `/proc/self/status` field in bytes.
fn status_bytes(field: &str) -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| Error::Msg(format!("/proc/self/status: {e}")))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .ok_or_else(|| Error::Msg(format!("no {field} in /proc/self/status")))
}

/// What one case measured.
#[derive(Debug, Clone, Copy)]
pub(super) struct Measure {
    pub(super) cpu_ns: u64,
    pub(super) peak_bytes: u64,
}

impl Measure {
    /// Of two runs of a case: the smaller CPU time and the larger peak.
    pub(super) fn best(self, other: Measure) -> Measure {
        Measure {
            cpu_ns: self.cpu_ns.min(other.cpu_ns),
            peak_bytes: self.peak_bytes.max(other.peak_bytes),
        }
    }
}

/// How a case consumes the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Only the transport: HTTP and the provider's framing, nothing parsed.
    Transport,
    /// The provider's stream, every event read and dropped.
    Plain,
    /// The provider's stream with a `partial()` read after every delta.
    Partial,
}

impl Mode {
    pub(super) fn arg(self) -> &'static str {
        match self {
            Mode::Transport => "transport",
            Mode::Plain => "0",
            Mode::Partial => "1",
        }
    }

    fn parse(arg: &str) -> Result<Self> {
        match arg {
            "transport" => Ok(Mode::Transport),
            "0" => Ok(Mode::Plain),
            "1" => Ok(Mode::Partial),
            other => Err(Error::Msg(format!("bench-case mode `{other}`: 0, 1 or transport"))),
        }
    }
}

fn context() -> Context {
    Context {
        system_prompt: None,
        messages: vec![Message::user("Write the generated files.")],
        tools: vec![Tool {
            name: "write_file".into(),
            description: "Writes a file".into(),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"]
            }),
        }],
    }
}

/// Streams one response, from a server thread of this process or, with `remote`, from a
/// `bench-serve` server there; returns the final message and the client thread's CPU time.
fn stream_once(
    runtime: &tokio::runtime::Runtime,
    provider: &Arc<dyn Provider>,
    name: &str,
    scenario: Scenario,
    size: usize,
    partial: bool,
    remote: Option<SocketAddr>,
) -> Result<(AssistantMessage, u64)> {
    let (server, model) = match remote {
        Some(addr) => {
            let (_, mut model) = wire(name, scenario, size, addr)?;
            // The provider appends its own path; the server reads the size from this prefix.
            model.base_url = format!("http://{addr}/{}", sized_path(size));
            (None, model)
        }
        None => {
            let listener = TcpListener::bind("127.0.0.1:0")
                .map_err(|e| Error::Msg(format!("cannot bind the loopback server: {e}")))?;
            let addr = listener.local_addr().map_err(|e| Error::Msg(e.to_string()))?;
            let (body, model) = wire(name, scenario, size, addr)?;
            (Some(std::thread::spawn(move || serve(listener, body))), model)
        }
    };
    let context = context();
    let options = StreamOptions {
        api_key: Some(ApiKey::new("bench-key")),
        max_event_bytes: Some(MAX_EVENT_BYTES),
        retry: RetryPolicy { max_retries: 0, ..RetryPolicy::default() },
        ..StreamOptions::default()
    };
    let start = thread_cpu_ns()?;
    let message = runtime.block_on(async {
        let mut stream = provider.stream(&model, &context, &options);
        let mut last = None;
        let mut seen = 0usize;
        while let Some(event) = stream.next().await {
            match event {
                AssistantEvent::ToolCallDelta { content_index, .. } if partial => {
                    // What a UI shows: the arguments so far.
                    if let Some(call) = stream.partial().tool_call(content_index) {
                        let content = call.arguments.get("content").and_then(Value::as_str);
                        seen += content.map_or(0, str::len)
                            + call.arguments.as_object().map_or(0, |o| o.len());
                    }
                }
                AssistantEvent::TextDelta { content_index, .. } if partial => {
                    if let Some(PartialContent::Text { text, .. }) =
                        stream.partial().content_at(content_index)
                    {
                        seen += text.len();
                    }
                }
                AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. } => {
                    last = Some(message)
                }
                _ => {}
            }
        }
        std::hint::black_box(seen);
        last
    });
    let cpu = thread_cpu_ns()?.saturating_sub(start);
    if let Some(server) = server {
        let served = server.join().map_err(|_| Error::Msg("the bench server panicked".into()))?;
        served.map_err(|e| Error::Msg(format!("bench server: {e}")))?;
    }
    let message =
        message.ok_or_else(|| Error::Msg("the stream ended without a terminal event".into()))?;
    Ok((*message, cpu))
}

/// Receives the response of `scenario` with a plain reqwest client and cuts it into events with the provider's framing, parsing nothing; returns how many
/// events it saw and the client thread's CPU time.
fn transport_once(
    runtime: &tokio::runtime::Runtime,
    name: &str,
    scenario: Scenario,
    size: usize,
) -> Result<(usize, u64)> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| Error::Msg(format!("cannot bind the loopback server: {e}")))?;
    let addr = listener.local_addr().map_err(|e| Error::Msg(e.to_string()))?;
    let (body, model) = wire(name, scenario, size, addr)?;
    let binary = body.content_type == llm_testkit::eventstream::CONTENT_TYPE;
    let server = std::thread::spawn(move || serve(listener, body));
    let client = reqwest::Client::new();
    let start = thread_cpu_ns()?;
    let events = runtime.block_on(async {
        let response = client
            .post(format!("{}/bench", model.base_url))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .map_err(|e| Error::Msg(format!("transport request: {e}")))?;
        let mut chunks = response.bytes_stream();
        let mut sse = llm_core::raw::sse::SseDecoder::with_max_event_size(MAX_EVENT_BYTES);
        let mut aws = llm_bedrock::AwsEventStreamFraming::with_max_frame_bytes(MAX_EVENT_BYTES);
        let (mut sse_out, mut aws_out) = (Vec::new(), Vec::new());
        let mut events = 0usize;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| Error::Msg(format!("transport body: {e}")))?;
            if binary {
                aws.push(&chunk, &mut aws_out).map_err(|e| Error::Msg(e.to_string()))?;
                events += aws_out.len();
                aws_out.clear();
            } else {
                sse.push(&chunk, &mut sse_out).map_err(|e| Error::Msg(e.to_string()))?;
                events += sse_out.len();
                sse_out.clear();
            }
        }
        if binary {
            aws.finish(&mut aws_out).map_err(|e| Error::Msg(e.to_string()))?;
            events += aws_out.len();
        } else {
            sse.finish(&mut sse_out).map_err(|e| Error::Msg(e.to_string()))?;
            events += sse_out.len();
        }
        Ok::<_, Error>(events)
    })?;
    let cpu = thread_cpu_ns()?.saturating_sub(start);
    let served = server.join().map_err(|_| Error::Msg("the bench server panicked".into()))?;
    served.map_err(|e| Error::Msg(format!("bench server: {e}")))?;
    Ok((events, cpu))
}

/// Checks the final message against what was generated.
fn verify(message: &AssistantMessage, scenario: Scenario, size: usize) -> Result<()> {
    if let Some(error) = &message.error_message {
        return Err(Error::Msg(format!("stream failed: {error}")));
    }
    let expected_reason =
        if scenario == Scenario::Text { StopReason::Stop } else { StopReason::ToolUse };
    if message.stop_reason != expected_reason {
        return Err(Error::Msg(format!("stop reason {:?}", message.stop_reason)));
    }
    let sources = sources(scenario, size);
    if scenario == Scenario::Text {
        let expected = sources.first().map_or(0, |(c, t)| Source::expected_content_len(*c, *t));
        if message.text().len() != expected {
            return Err(Error::Msg(format!(
                "text of {} bytes, expected {expected}",
                message.text().len()
            )));
        }
        return Ok(());
    }
    let calls: Vec<_> = message.tool_calls().collect();
    if calls.len() != sources.len() {
        return Err(Error::Msg(format!("{} calls, expected {}", calls.len(), sources.len())));
    }
    for (call, (k, target)) in calls.iter().zip(sources) {
        let k = k.unwrap_or_default();
        let expected = Source::expected_content_len(Some(k), target);
        let content = call.arguments.get("content").and_then(Value::as_str).map_or(0, str::len);
        let path = call.arguments.get("path").and_then(Value::as_str);
        if call.name != "write_file"
            || content != expected
            || path != Some(&format!("src/gen_{k}.rs"))
        {
            return Err(Error::Msg(format!(
                "call {k}: name {:?}, path {path:?}, content {content} bytes (expected {expected})",
                call.name
            )));
        }
    }
    Ok(())
}

/// `xtask bench-case PROVIDER SCENARIO BYTES MODE [ADDR]` (MODE `0` plain, `1` partial
/// reads, `transport`): one measured case in this process; prints `cpu_ns peak_bytes`. With
/// ADDR (`0` and `1` only) the streams come from the `bench-serve` server there, as the peer
/// program's do, instead of a server thread of this process.
pub fn run_case(args: &[String]) -> Result<()> {
    let (name, scenario, size, mode, remote) = match args {
        [name, scenario, size, mode] => (name, scenario, size, mode, None),
        [name, scenario, size, mode, addr] => {
            let addr: SocketAddr =
                addr.parse().map_err(|e| Error::Msg(format!("ADDR `{addr}`: {e}")))?;
            (name, scenario, size, mode, Some(addr))
        }
        _ => {
            return Err(Error::Msg(
                "bench-case PROVIDER SCENARIO BYTES 0|1|transport [ADDR]".into(),
            ));
        }
    };
    let scenario = Scenario::parse(scenario)?;
    let size: usize = size.parse().map_err(|e| Error::Msg(format!("size: {e}")))?;
    let mode = Mode::parse(mode)?;
    let entry = PROVIDERS
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| Error::Msg(format!("unknown provider `{name}`")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Msg(format!("tokio runtime: {e}")))?;
    if mode == Mode::Transport && remote.is_some() {
        return Err(Error::Msg("bench-case: the transport mode has its own server".into()));
    }
    if mode == Mode::Transport {
        // Warm-up as below; the event count shows the whole body was framed.
        transport_once(&runtime, name, scenario, 16 * 1024)?;
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let base = status_bytes("VmRSS:")?;
        let (events, cpu_ns) = transport_once(&runtime, name, scenario, size)?;
        let peak = status_bytes("VmHWM:")?.saturating_sub(base);
        let expected = event_payloads(name, scenario, size)?.len();
        if events < expected {
            return Err(Error::Msg(format!("transport saw {events} events, expected {expected}")));
        }
        println!("{cpu_ns} {peak}");
        return Ok(());
    }
    let partial = mode == Mode::Partial;
    let provider = (entry.make)();
    // Warm-up: connection setup and lazy statics are not what is measured.
    let (warm, _) = stream_once(&runtime, &provider, name, scenario, 16 * 1024, partial, remote)?;
    verify(&warm, scenario, 16 * 1024)?;
    drop(warm);
    // Peak resident set from here on, relative to the resident set here.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let base = status_bytes("VmRSS:")?;
    let (message, cpu_ns) =
        stream_once(&runtime, &provider, name, scenario, size, partial, remote)?;
    let peak = status_bytes("VmHWM:")?.saturating_sub(base);
    verify(&message, scenario, size)?;
    println!("{cpu_ns} {peak}");
    Ok(())
}

/// CPU time of `serde_json` parsing every event's data of the case's wire bytes into a
/// `Value`, once (the floor).
pub(super) fn floor_ns(name: &str, scenario: Scenario, size: usize) -> Result<u64> {
    let payloads = event_payloads(name, scenario, size)?;
    let start = thread_cpu_ns()?;
    let mut parsed = 0usize;
    for payload in &payloads {
        let value: Value = serde_json::from_str(payload).map_err(|e| {
            Error::Msg(format!("{name} {}: bad generated JSON: {e}", scenario.name()))
        })?;
        parsed += usize::from(value.is_object());
    }
    let cpu = thread_cpu_ns()?.saturating_sub(start);
    std::hint::black_box(parsed);
    Ok(cpu)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;

    use super::super::content::event_payloads;
    use crate::providers::BENCHED as PROVIDERS;

    #[test]
    fn the_transport_frames_every_event_of_every_wire_format() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for entry in PROVIDERS {
            for scenario in Scenario::ALL {
                let (events, _) = transport_once(&runtime, entry.name, scenario, 64 * 1024)
                    .unwrap_or_else(|e| panic!("{} {}: {e}", entry.name, scenario.name()));
                let payloads = event_payloads(entry.name, scenario, 64 * 1024).unwrap();
                // SSE bodies may end with a `[DONE]` event, which carries no JSON.
                assert!(
                    events == payloads.len() || events == payloads.len() + 1,
                    "{} {}: {events} events, {} payloads",
                    entry.name,
                    scenario.name(),
                    payloads.len()
                );
            }
        }
    }

    #[test]
    fn every_provider_streams_every_scenario_from_a_bench_serve_server() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for entry in PROVIDERS {
            let provider = (entry.make)();
            for scenario in Scenario::ALL {
                let server = super::super::server::BodyServer::start(entry.name, scenario).unwrap();
                // Two sizes from one server, as a case's warm-up and measured stream.
                for size in [16 * 1024, 64 * 1024] {
                    let (message, _) = stream_once(
                        &runtime,
                        &provider,
                        entry.name,
                        scenario,
                        size,
                        true,
                        Some(server.addr),
                    )
                    .unwrap();
                    verify(&message, scenario, size)
                        .unwrap_or_else(|e| panic!("{} {}: {e}", entry.name, scenario.name()));
                }
            }
        }
    }

    #[test]
    fn every_provider_streams_every_scenario_end_to_end() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for entry in PROVIDERS {
            let provider = (entry.make)();
            for scenario in Scenario::ALL {
                for partial in [false, true] {
                    let (message, cpu) = stream_once(
                        &runtime,
                        &provider,
                        entry.name,
                        scenario,
                        64 * 1024,
                        partial,
                        None,
                    )
                    .unwrap();
                    verify(&message, scenario, 64 * 1024)
                        .unwrap_or_else(|e| panic!("{} {}: {e}", entry.name, scenario.name()));
                    assert!(cpu > 0);
                }
            }
        }
    }
}
