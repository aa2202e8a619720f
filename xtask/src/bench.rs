//! `cargo xtask bench`: every provider end to end on generated streams.
//!
//! Each case streams a generated response through the provider's real HTTP client from a
//! minimal loopback server in this file (one `std` thread that writes the body as it is
//! generated, so the server holds no copy of it), and consumes the `AssistantStream` as a
//! UI would: every event is dropped once read, and in the `partial` mode the open block is
//! read from `AssistantStream::partial()` after every delta.
//!
//! Every case runs in a fresh child process (`xtask bench-case ...`), so its peak resident
//! set is its own. CPU time is the client thread's (`/proc/thread-self/schedstat`, in ns;
//! `getrusage` would need `unsafe` FFI, which the workspace forbids): the
//! HTTP client, SSE decoding, the provider's decoder, the assembler and the consumer, not
//! the server thread. The floor is the CPU time of `serde_json` parsing every event's
//! `data` of the same wire bytes into a `Value`, once. The transport is the CPU time of
//! receiving the same response with the same HTTP client and cutting it into events with
//! the provider's framing, parsing nothing: no client that uses HTTP and serde_json can
//! cost less than transport + floor.
//!
//! Streams (100-byte deltas): `text` (one text block), `one-call` (one `write_file` call),
//! `three-calls` (three calls in a row, a third of the bytes each). Sizes count argument
//! (or text) bytes as sent: the arguments' JSON text.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;

use futures_util::StreamExt;
use llm_core::framing::Framing as _;
use llm_core::{
    ApiKey, AssistantEvent, AssistantMessage, Context, Message, Model, PartialContent, Provider,
    RetryPolicy, StopReason, StreamOptions, Tool,
};
use serde_json::{Value, json};

use crate::conformance::PROVIDERS;
use crate::{Error, Result};

const MIB: usize = 1024 * 1024;
/// Bytes per streamed delta.
const DELTA: usize = 100;
/// The server writes HTTP chunks of at least this size.
const CHUNK: usize = 16 * 1024;
/// Pieces of a value sent whole in one event (Responses `.done`, Gemini `functionCall`).
const PIECE: usize = 64 * 1024;
/// The SSE event limit for the run: a 16 MiB value sent whole needs more than the
/// default 16 MiB.
const MAX_EVENT_BYTES: usize = 64 * MIB;
/// How long the server waits for the client to connect, send or read.
const IO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// What a case streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// One text block.
    Text,
    /// One `write_file` call.
    OneCall,
    /// Three `write_file` calls, a third of the bytes each.
    ThreeCalls,
}

impl Scenario {
    const ALL: [Scenario; 3] = [Scenario::Text, Scenario::OneCall, Scenario::ThreeCalls];

    fn name(self) -> &'static str {
        match self {
            Scenario::Text => "text",
            Scenario::OneCall => "one-call",
            Scenario::ThreeCalls => "three-calls",
        }
    }

    fn parse(name: &str) -> Result<Self> {
        Scenario::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| Error::Msg(format!("unknown scenario `{name}`")))
    }
}

/// `cargo xtask bench` options.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only this provider (fixture folder name).
    pub provider: Option<String>,
    /// Only this scenario.
    pub scenario: Option<Scenario>,
    /// Stream sizes in MiB.
    pub sizes: Vec<usize>,
    /// Runs per case (the minimum CPU time and the largest peak are kept).
    pub reps: usize,
}

impl Options {
    /// Parses `[--provider NAME] [--scenario S] [--sizes 1,4,16] [--reps N]`.
    pub fn parse(args: &[String]) -> Result<Self> {
        let mut options =
            Options { provider: None, scenario: None, sizes: vec![1, 4, 16], reps: 3 };
        let mut iter = args.iter();
        while let Some(flag) = iter.next() {
            let value =
                iter.next().ok_or_else(|| Error::Msg(format!("{flag} needs a value")))?.as_str();
            match flag.as_str() {
                "--provider" => options.provider = Some(value.to_owned()),
                "--scenario" => options.scenario = Some(Scenario::parse(value)?),
                "--sizes" => {
                    options.sizes = value
                        .split(',')
                        .map(|s| s.trim().parse::<usize>())
                        .collect::<std::result::Result<_, _>>()
                        .map_err(|e| Error::Msg(format!("--sizes: {e}")))?;
                }
                "--reps" => {
                    options.reps = value.parse().map_err(|e| Error::Msg(format!("--reps: {e}")))?;
                }
                other => return Err(Error::Msg(format!("unknown bench argument `{other}`"))),
            }
        }
        if options.sizes.is_empty() || options.reps == 0 {
            return Err(Error::Msg("bench needs at least one size and one rep".into()));
        }
        Ok(options)
    }
}

// -------------------------------------------------------------------------------------------
// Generated content
// -------------------------------------------------------------------------------------------

/// Code-like lines with quotes, backslashes, tabs, newlines and non-ASCII text.
const LINES: &[&str] = &[
    "fn main() {\n",
    "\tlet greeting = \"héllo, wörld\";\n",
    "\tprintln!(\"{greeting} — {}\", 42);\n",
    "\t// saved under C:\\Users\\ola\\notes.txt\n",
    "\tlet total: u64 = (1..=10).map(|n| n * n).sum();\n",
    "}\n",
];

/// A deterministic text (or the JSON text of a `write_file` call's arguments) of about
/// `target` bytes, produced in pieces as it is read.
#[derive(Debug, Clone)]
struct Source {
    /// `Some(k)`: the arguments of call `k`; `None`: plain text.
    call: Option<usize>,
    target: usize,
    produced: usize,
    /// 0 = prefix, 1 = lines, 2 = suffix, 3 = done.
    stage: u8,
    line: usize,
    pending: String,
    /// Bytes of decoded content produced (the `content` string, or the text).
    content_len: usize,
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `s` escaped as the inside of a JSON string.
fn escaped(s: &str) -> String {
    let quoted = json_str(s);
    quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or_default().to_owned()
}

impl Source {
    fn new(call: Option<usize>, target: usize) -> Self {
        Source {
            call,
            target,
            produced: 0,
            stage: 0,
            line: 0,
            pending: String::new(),
            content_len: 0,
        }
    }

    fn suffix(&self) -> &'static str {
        if self.call.is_some() { "\"}" } else { "" }
    }

    /// Appends the next piece to `pending`; false once everything was produced.
    fn generate(&mut self) -> bool {
        let piece = match (self.stage, self.call) {
            (0, Some(k)) => {
                self.stage = 1;
                format!("{{\"path\":\"src/gen_{k}.rs\",\"content\":\"")
            }
            (0, None) => {
                self.stage = 1;
                return true;
            }
            (1, _) => {
                if self.produced + self.suffix().len() >= self.target {
                    self.stage = 2;
                    return true;
                }
                let raw = LINES.get(self.line % LINES.len()).copied().unwrap_or("\n");
                self.line += 1;
                self.content_len += raw.len();
                if self.call.is_some() { escaped(raw) } else { raw.to_owned() }
            }
            (2, _) => {
                self.stage = 3;
                self.suffix().to_owned()
            }
            _ => return false,
        };
        self.produced += piece.len();
        self.pending.push_str(&piece);
        true
    }

    /// The next at most `max` bytes (cut on a char boundary), or `None` at the end.
    fn next_piece(&mut self, max: usize) -> Option<String> {
        while self.pending.len() < max && self.generate() {}
        if self.pending.is_empty() {
            return None;
        }
        let mut cut = self.pending.floor_char_boundary(max.min(self.pending.len()));
        if cut == 0 {
            cut = self.pending.ceil_char_boundary(1);
        }
        let rest = self.pending.split_off(cut);
        Some(std::mem::replace(&mut self.pending, rest))
    }

    /// The decoded content length once the whole source is read.
    fn expected_content_len(call: Option<usize>, target: usize) -> usize {
        let mut source = Source::new(call, target);
        while source.next_piece(PIECE).is_some() {}
        source.content_len
    }
}

// -------------------------------------------------------------------------------------------
// Wire formats
// -------------------------------------------------------------------------------------------

type EventFn = Box<dyn Fn(&str) -> String + Send>;
type FrameFn = Box<dyn Fn(&str) -> Vec<u8> + Send>;

/// One part of a response body.
enum Part {
    /// Literal text.
    Lit(String),
    /// Literal bytes (binary frames).
    Bin(Vec<u8>),
    /// One event per `DELTA`-byte piece of the source, made by the function from the piece.
    Deltas(Source, EventFn),
    /// One binary frame per `DELTA`-byte piece of the source.
    Frames(Source, FrameFn),
    /// The whole source inside one event, as JSON string content (`escape`) or raw JSON.
    Whole(Source, bool),
}

/// A response body, generated as it is written.
struct Body {
    parts: VecDeque<Part>,
    /// `text/event-stream`, or the AWS event-stream type for Bedrock.
    content_type: &'static str,
}

impl Body {
    /// Appends at least `min` bytes (fewer only at the end); false once the body is done.
    fn fill(&mut self, out: &mut Vec<u8>, min: usize) -> bool {
        while out.len() < min {
            let Some(part) = self.parts.front_mut() else { return false };
            let done = match part {
                Part::Lit(s) => {
                    out.extend_from_slice(s.as_bytes());
                    true
                }
                Part::Bin(bytes) => {
                    out.extend_from_slice(bytes);
                    true
                }
                Part::Frames(source, frame) => match source.next_piece(DELTA) {
                    Some(piece) => {
                        out.extend(frame(&piece));
                        false
                    }
                    None => true,
                },
                Part::Deltas(source, event) => match source.next_piece(DELTA) {
                    Some(piece) => {
                        out.extend_from_slice(event(&piece).as_bytes());
                        false
                    }
                    None => true,
                },
                Part::Whole(source, escape) => match source.next_piece(PIECE) {
                    Some(piece) if *escape => {
                        out.extend_from_slice(escaped(&piece).as_bytes());
                        false
                    }
                    Some(piece) => {
                        out.extend_from_slice(piece.as_bytes());
                        false
                    }
                    None => true,
                },
            };
            if done {
                self.parts.pop_front();
            }
        }
        !self.parts.is_empty()
    }
}

fn sse(event: &str, data: &str) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

fn data(data: &str) -> String {
    format!("data: {data}\n\n")
}

/// The sources of a scenario: (call index or `None` for text, target bytes).
fn sources(scenario: Scenario, size: usize) -> Vec<(Option<usize>, usize)> {
    match scenario {
        Scenario::Text => vec![(None, size)],
        Scenario::OneCall => vec![(Some(0), size)],
        Scenario::ThreeCalls => (0..3).map(|k| (Some(k), size / 3)).collect(),
    }
}

fn anthropic(scenario: Scenario, size: usize) -> Vec<Part> {
    let mut parts = vec![Part::Lit(sse(
        "message_start",
        r#"{"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","model":"claude-bench","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}"#,
    ))];
    for (index, (call, target)) in sources(scenario, size).into_iter().enumerate() {
        let start = match call {
            None => {
                json!({"type":"content_block_start","index":index,"content_block":{"type":"text","text":""}})
            }
            Some(k) => {
                json!({"type":"content_block_start","index":index,"content_block":{"type":"tool_use","id":format!("toolu_bench_{k}"),"name":"write_file","input":{}}})
            }
        };
        parts.push(Part::Lit(sse("content_block_start", &start.to_string())));
        let event: EventFn = match call {
            None => Box::new(move |d| {
                sse(
                    "content_block_delta",
                    &format!(
                        r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"text_delta","text":{}}}}}"#,
                        json_str(d)
                    ),
                )
            }),
            Some(_) => Box::new(move |d| {
                sse(
                    "content_block_delta",
                    &format!(
                        r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"input_json_delta","partial_json":{}}}}}"#,
                        json_str(d)
                    ),
                )
            }),
        };
        parts.push(Part::Deltas(Source::new(call, target), event));
        parts.push(Part::Lit(sse(
            "content_block_stop",
            &format!(r#"{{"type":"content_block_stop","index":{index}}}"#),
        )));
    }
    let reason = if scenario == Scenario::Text { "end_turn" } else { "tool_use" };
    parts.push(Part::Lit(sse(
        "message_delta",
        &format!(r#"{{"type":"message_delta","delta":{{"stop_reason":"{reason}","stop_sequence":null}},"usage":{{"output_tokens":1000}}}}"#),
    )));
    parts.push(Part::Lit(sse("message_stop", r#"{"type":"message_stop"}"#)));
    parts
}

fn completions_chunk(choice: &str) -> String {
    data(&format!(
        r#"{{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1760000000,"model":"gpt-bench","system_fingerprint":"fp_bench","choices":[{choice}],"usage":null}}"#
    ))
}

fn completions(scenario: Scenario, size: usize) -> Vec<Part> {
    let mut parts = vec![Part::Lit(completions_chunk(
        r#"{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}"#,
    ))];
    for (call, target) in sources(scenario, size) {
        let event: EventFn = match call {
            None => Box::new(|d| {
                completions_chunk(&format!(
                    r#"{{"index":0,"delta":{{"content":{}}},"logprobs":null,"finish_reason":null}}"#,
                    json_str(d)
                ))
            }),
            Some(k) => {
                parts.push(Part::Lit(completions_chunk(&format!(
                    r#"{{"index":0,"delta":{{"tool_calls":[{{"index":{k},"id":"call_bench_{k}","type":"function","function":{{"name":"write_file","arguments":""}}}}]}},"logprobs":null,"finish_reason":null}}"#
                ))));
                Box::new(move |d| {
                    completions_chunk(&format!(
                        r#"{{"index":0,"delta":{{"tool_calls":[{{"index":{k},"function":{{"arguments":{}}}}}]}},"logprobs":null,"finish_reason":null}}"#,
                        json_str(d)
                    ))
                })
            }
        };
        parts.push(Part::Deltas(Source::new(call, target), event));
    }
    let reason = if scenario == Scenario::Text { "stop" } else { "tool_calls" };
    parts.push(Part::Lit(completions_chunk(&format!(
        r#"{{"index":0,"delta":{{}},"logprobs":null,"finish_reason":"{reason}"}}"#
    ))));
    parts.push(Part::Lit(data(
        r#"{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1760000000,"model":"gpt-bench","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":1000,"total_tokens":1010}}"#,
    )));
    parts.push(Part::Lit(data("[DONE]")));
    parts
}

fn mistral_chunk(choice: &str, tail: &str) -> String {
    data(&format!(
        r#"{{"id":"bench","object":"chat.completion.chunk","created":1760000100,"model":"devstral-bench","choices":[{choice}]{tail}}}"#
    ))
}

fn mistral(scenario: Scenario, size: usize) -> Vec<Part> {
    let mut parts = vec![Part::Lit(mistral_chunk(
        r#"{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}"#,
        "",
    ))];
    for (call, target) in sources(scenario, size) {
        let event: EventFn = match call {
            None => Box::new(|d| {
                mistral_chunk(
                    &format!(
                        r#"{{"index":0,"delta":{{"content":{}}},"finish_reason":null}}"#,
                        json_str(d)
                    ),
                    "",
                )
            }),
            Some(k) => {
                parts.push(Part::Lit(mistral_chunk(&format!(
                    r#"{{"index":0,"delta":{{"tool_calls":[{{"id":"Bench0000{k}","function":{{"name":"write_file","arguments":""}},"index":{k}}}]}},"finish_reason":null}}"#
                ), "")));
                Box::new(move |d| {
                    mistral_chunk(
                        &format!(
                            r#"{{"index":0,"delta":{{"tool_calls":[{{"function":{{"name":"","arguments":{}}},"index":{k}}}]}},"finish_reason":null}}"#,
                            json_str(d)
                        ),
                        "",
                    )
                })
            }
        };
        parts.push(Part::Deltas(Source::new(call, target), event));
    }
    let reason = if scenario == Scenario::Text { "stop" } else { "tool_calls" };
    parts.push(Part::Lit(mistral_chunk(
        &format!(r#"{{"index":0,"delta":{{"content":""}},"finish_reason":"{reason}"}}"#),
        r#","usage":{"prompt_tokens":10,"total_tokens":1010,"completion_tokens":1000}"#,
    )));
    parts.push(Part::Lit(data("[DONE]")));
    parts
}

fn responses(scenario: Scenario, size: usize) -> Vec<Part> {
    let mut parts = vec![Part::Lit(sse(
        "response.created",
        r#"{"type":"response.created","response":{"id":"resp_bench","object":"response","created_at":1760000002,"status":"in_progress","model":"gpt-bench","output":[],"usage":null},"sequence_number":0}"#,
    ))];
    for (index, (call, target)) in sources(scenario, size).into_iter().enumerate() {
        let lit = |parts: &mut Vec<Part>, name: &str, data: String| {
            parts.push(Part::Lit(sse(name, &data)));
        };
        // An event whose one string field holds the whole value: prefix, value, suffix.
        let whole = |parts: &mut Vec<Part>, name: &str, prefix: String, suffix: &str| {
            parts.push(Part::Lit(format!("event: {name}\ndata: {prefix}")));
            parts.push(Part::Whole(Source::new(call, target), true));
            parts.push(Part::Lit(format!("{suffix}\n\n")));
        };
        match call {
            None => {
                lit(
                    &mut parts,
                    "response.output_item.added",
                    format!(
                        r#"{{"type":"response.output_item.added","item":{{"id":"msg_bench","type":"message","status":"in_progress","content":[],"role":"assistant"}},"output_index":{index}}}"#
                    ),
                );
                lit(
                    &mut parts,
                    "response.content_part.added",
                    format!(
                        r#"{{"type":"response.content_part.added","item_id":"msg_bench","output_index":{index},"content_index":0,"part":{{"type":"output_text","annotations":[],"text":""}}}}"#
                    ),
                );
                parts.push(Part::Deltas(
                    Source::new(call, target),
                    Box::new(move |d| {
                        sse("response.output_text.delta", &format!(r#"{{"type":"response.output_text.delta","item_id":"msg_bench","output_index":{index},"content_index":0,"delta":{}}}"#, json_str(d)))
                    }),
                ));
                whole(
                    &mut parts,
                    "response.output_text.done",
                    format!(
                        r#"{{"type":"response.output_text.done","item_id":"msg_bench","output_index":{index},"content_index":0,"text":""#
                    ),
                    "\"}",
                );
                whole(
                    &mut parts,
                    "response.content_part.done",
                    format!(
                        r#"{{"type":"response.content_part.done","item_id":"msg_bench","output_index":{index},"content_index":0,"part":{{"type":"output_text","annotations":[],"text":""#
                    ),
                    "\"}}",
                );
                whole(
                    &mut parts,
                    "response.output_item.done",
                    format!(
                        r#"{{"type":"response.output_item.done","output_index":{index},"item":{{"id":"msg_bench","type":"message","status":"completed","role":"assistant","content":[{{"type":"output_text","annotations":[],"text":""#
                    ),
                    "\"}]}}",
                );
            }
            Some(k) => {
                lit(
                    &mut parts,
                    "response.output_item.added",
                    format!(
                        r#"{{"type":"response.output_item.added","item":{{"id":"fc_bench_{k}","type":"function_call","status":"in_progress","arguments":"","call_id":"call_bench_{k}","name":"write_file"}},"output_index":{index}}}"#
                    ),
                );
                parts.push(Part::Deltas(
                    Source::new(call, target),
                    Box::new(move |d| {
                        sse("response.function_call_arguments.delta", &format!(r#"{{"type":"response.function_call_arguments.delta","delta":{},"item_id":"fc_bench_{k}","output_index":{index}}}"#, json_str(d)))
                    }),
                ));
                whole(
                    &mut parts,
                    "response.function_call_arguments.done",
                    r#"{"type":"response.function_call_arguments.done","arguments":""#.to_owned(),
                    &format!(r#"","item_id":"fc_bench_{k}","output_index":{index}}}"#),
                );
                whole(
                    &mut parts,
                    "response.output_item.done",
                    format!(
                        r#"{{"type":"response.output_item.done","output_index":{index},"item":{{"id":"fc_bench_{k}","type":"function_call","status":"completed","call_id":"call_bench_{k}","name":"write_file","arguments":""#
                    ),
                    "\"}}",
                );
            }
        }
    }
    // As the real API does, the completed response repeats every output item whole.
    parts.push(Part::Lit(
        r#"event: response.completed
data: {"type":"response.completed","response":{"id":"resp_bench","object":"response","created_at":1760000002,"status":"completed","model":"gpt-bench","output":["#
            .to_owned(),
    ));
    for (index, (call, target)) in sources(scenario, size).into_iter().enumerate() {
        let comma = if index > 0 { "," } else { "" };
        let (head, tail) = match call {
            None => (
                format!(
                    r#"{comma}{{"id":"msg_bench","type":"message","status":"completed","role":"assistant","content":[{{"type":"output_text","annotations":[],"text":""#
                ),
                "\"}]}",
            ),
            Some(k) => (
                format!(
                    r#"{comma}{{"id":"fc_bench_{k}","type":"function_call","status":"completed","call_id":"call_bench_{k}","name":"write_file","arguments":""#
                ),
                "\"}",
            ),
        };
        parts.push(Part::Lit(head));
        parts.push(Part::Whole(Source::new(call, target), true));
        parts.push(Part::Lit(tail.to_owned()));
    }
    parts.push(Part::Lit(
        r#"],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":1000,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":1010}}}

"#
        .to_owned(),
    ));
    parts
}

fn google(scenario: Scenario, size: usize) -> Vec<Part> {
    const TAIL: &str =
        r#"],"role":"model"},"index":0}],"modelVersion":"gemini-bench","responseId":"bench"}"#;
    let mut parts = Vec::new();
    for (call, target) in sources(scenario, size) {
        match call {
            None => parts.push(Part::Deltas(
                Source::new(call, target),
                Box::new(|d| {
                    data(&format!(
                        r#"{{"candidates":[{{"content":{{"parts":[{{"text":{}}}{TAIL}"#,
                        json_str(d)
                    ))
                }),
            )),
            // Gemini sends a call whole, `args` an object.
            Some(_) => {
                parts.push(Part::Lit(
                    r#"data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"write_file","args":"#.to_owned(),
                ));
                parts.push(Part::Whole(Source::new(call, target), false));
                parts.push(Part::Lit(format!("}}}}{TAIL}\n\n")));
            }
        }
    }
    parts.push(Part::Lit(data(
        r#"{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":1000,"totalTokenCount":1010},"modelVersion":"gemini-bench","responseId":"bench"}"#,
    )));
    parts
}

/// One Bedrock event-stream `event` message (`:event-type`, `:content-type`,
/// `:message-type`, as Bedrock orders them).
fn bedrock_frame(event: &str, payload: &str) -> Vec<u8> {
    let headers = [
        (":event-type".to_owned(), event.to_owned()),
        (":content-type".to_owned(), "application/json".to_owned()),
        (":message-type".to_owned(), "event".to_owned()),
    ];
    llm_testkit::eventstream::encode_message(&headers, payload.as_bytes()).unwrap_or_default()
}

fn bedrock(scenario: Scenario, size: usize) -> Vec<Part> {
    let mut parts = vec![Part::Bin(bedrock_frame("messageStart", r#"{"role":"assistant"}"#))];
    for (index, (call, target)) in sources(scenario, size).into_iter().enumerate() {
        if let Some(k) = call {
            parts.push(Part::Bin(bedrock_frame(
                "contentBlockStart",
                &format!(
                    r#"{{"contentBlockIndex":{index},"start":{{"toolUse":{{"toolUseId":"tooluse_bench_{k}","name":"write_file"}}}}}}"#
                ),
            )));
        }
        let frame: FrameFn = match call {
            None => Box::new(move |d| {
                bedrock_frame(
                    "contentBlockDelta",
                    &format!(
                        r#"{{"contentBlockIndex":{index},"delta":{{"text":{}}},"p":"abcdefgh"}}"#,
                        json_str(d)
                    ),
                )
            }),
            Some(_) => Box::new(move |d| {
                bedrock_frame(
                    "contentBlockDelta",
                    &format!(
                        r#"{{"contentBlockIndex":{index},"delta":{{"toolUse":{{"input":{}}}}},"p":"abcdefgh"}}"#,
                        json_str(d)
                    ),
                )
            }),
        };
        parts.push(Part::Frames(Source::new(call, target), frame));
        parts.push(Part::Bin(bedrock_frame(
            "contentBlockStop",
            &format!(r#"{{"contentBlockIndex":{index}}}"#),
        )));
    }
    let reason = if scenario == Scenario::Text { "end_turn" } else { "tool_use" };
    parts.push(Part::Bin(bedrock_frame("messageStop", &format!(r#"{{"stopReason":"{reason}"}}"#))));
    parts.push(Part::Bin(bedrock_frame(
        "metadata",
        r#"{"usage":{"inputTokens":10,"outputTokens":1000,"totalTokens":1010},"metrics":{"latencyMs":100}}"#,
    )));
    parts
}

/// The body of `scenario` in `provider`'s wire format, and the model to ask.
fn wire(
    provider: &str,
    scenario: Scenario,
    size: usize,
    addr: SocketAddr,
) -> Result<(Body, Model)> {
    let (parts, api, id) = match provider {
        "anthropic" => (anthropic(scenario, size), llm_anthropic::API, "claude-bench"),
        "openai-completions" => {
            (completions(scenario, size), llm_openai_completions::API, "gpt-bench")
        }
        "openai-responses" => (responses(scenario, size), llm_openai_responses::API, "gpt-bench"),
        "google" => (google(scenario, size), llm_google::API, "gemini-bench"),
        "mistral" => (mistral(scenario, size), llm_mistral::API, "devstral-bench"),
        "bedrock" => (bedrock(scenario, size), llm_bedrock::API, "us.anthropic.claude-bench-v1:0"),
        other => return Err(Error::Msg(format!("no bench wire format for provider `{other}`"))),
    };
    let content_type = if provider == "bedrock" {
        llm_testkit::eventstream::CONTENT_TYPE
    } else {
        "text/event-stream"
    };
    let model = Model {
        id: id.into(),
        api: api.into(),
        provider: provider.into(),
        base_url: format!("http://{addr}"),
        max_tokens: 64_000,
        context_window: 1_000_000,
        ..Model::default()
    };
    Ok((Body { parts: parts.into(), content_type }, model))
}

// -------------------------------------------------------------------------------------------
// The loopback server
// -------------------------------------------------------------------------------------------

/// Reads one request (head and `content-length` body) and answers with `body`, generated
/// while it is written, chunked, with the body's content type.
fn serve(listener: TcpListener, mut body: Body) -> std::io::Result<()> {
    // Bounded waits: a client that fails before connecting or stops reading must not hang
    // the bench.
    listener.set_nonblocking(true)?;
    let deadline = std::time::Instant::now() + IO_TIMEOUT;
    let mut socket = loop {
        match listener.accept() {
            Ok((socket, _)) => break socket,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() > deadline {
                    return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no client"));
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(e) => return Err(e),
        }
    };
    socket.set_nonblocking(false)?;
    socket.set_read_timeout(Some(IO_TIMEOUT))?;
    socket.set_write_timeout(Some(IO_TIMEOUT))?;
    read_request(&mut socket)?;
    socket.write_all(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
            body.content_type
        )
        .as_bytes(),
    )?;
    let mut buf = Vec::with_capacity(2 * CHUNK);
    loop {
        let more = body.fill(&mut buf, CHUNK);
        if !buf.is_empty() {
            socket.write_all(format!("{:X}\r\n", buf.len()).as_bytes())?;
            socket.write_all(&buf)?;
            socket.write_all(b"\r\n")?;
            buf.clear();
        }
        if !more {
            break;
        }
    }
    socket.write_all(b"0\r\n\r\n")?;
    socket.flush()
}

fn read_request(socket: &mut TcpStream) -> std::io::Result<()> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(data.get(..end).unwrap_or_default()).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return Ok(());
            }
        }
        let n = socket.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "request cut short",
            ));
        }
        data.extend_from_slice(buf.get(..n).unwrap_or_default());
    }
}

// -------------------------------------------------------------------------------------------
// Measuring
// -------------------------------------------------------------------------------------------

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
struct Measure {
    cpu_ns: u64,
    peak_bytes: u64,
}

/// How a case consumes the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Only the transport: HTTP and the provider's framing, nothing parsed.
    Transport,
    /// The provider's stream, every event read and dropped.
    Plain,
    /// The provider's stream with a `partial()` read after every delta.
    Partial,
}

impl Mode {
    fn arg(self) -> &'static str {
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

/// Streams one response; returns the final message and the client thread's CPU time.
fn stream_once(
    runtime: &tokio::runtime::Runtime,
    provider: &Arc<dyn Provider>,
    name: &str,
    scenario: Scenario,
    size: usize,
    partial: bool,
) -> Result<(AssistantMessage, u64)> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| Error::Msg(format!("cannot bind the loopback server: {e}")))?;
    let addr = listener.local_addr().map_err(|e| Error::Msg(e.to_string()))?;
    let (body, model) = wire(name, scenario, size, addr)?;
    let server = std::thread::spawn(move || serve(listener, body));
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
    let served = server.join().map_err(|_| Error::Msg("the bench server panicked".into()))?;
    let message =
        message.ok_or_else(|| Error::Msg("the stream ended without a terminal event".into()))?;
    served.map_err(|e| Error::Msg(format!("bench server: {e}")))?;
    Ok((message, cpu))
}

/// Receives the response of `scenario` with the HTTP client the providers use (reqwest) and
/// cuts it into events with the provider's framing, parsing nothing; returns how many
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
        let mut sse = llm_core::sse::SseDecoder::with_max_event_size(MAX_EVENT_BYTES);
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

/// `xtask bench-case PROVIDER SCENARIO BYTES MODE` (MODE `0` plain, `1` partial reads,
/// `transport`): one measured case in this process; prints `cpu_ns peak_bytes`.
pub fn run_case(args: &[String]) -> Result<()> {
    let [name, scenario, size, mode] = args else {
        return Err(Error::Msg("bench-case PROVIDER SCENARIO BYTES 0|1|transport".into()));
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
    let (warm, _) = stream_once(&runtime, &provider, name, scenario, 16 * 1024, partial)?;
    verify(&warm, scenario, 16 * 1024)?;
    drop(warm);
    // Peak resident set from here on, relative to the resident set here.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let base = status_bytes("VmRSS:")?;
    let (message, cpu_ns) = stream_once(&runtime, &provider, name, scenario, size, partial)?;
    let peak = status_bytes("VmHWM:")?.saturating_sub(base);
    verify(&message, scenario, size)?;
    println!("{cpu_ns} {peak}");
    Ok(())
}

/// The JSON text of every event of the case's wire bytes: each SSE event's `data` (but
/// `[DONE]`), or each event-stream message's payload.
fn event_payloads(name: &str, scenario: Scenario, size: usize) -> Result<Vec<String>> {
    let addr = SocketAddr::from(([127, 0, 0, 1], 9));
    let (mut body, _) = wire(name, scenario, size, addr)?;
    let mut bytes = Vec::new();
    while body.fill(&mut bytes, usize::MAX) {}
    if body.content_type == llm_testkit::eventstream::CONTENT_TYPE {
        return llm_testkit::eventstream::split_messages(&bytes.into())
            .iter()
            .map(|message| {
                let (_, payload) =
                    llm_testkit::eventstream::parse_message(message).ok_or_else(|| {
                        Error::Msg(format!("{name}: a generated message does not parse"))
                    })?;
                String::from_utf8(payload).map_err(|e| Error::Msg(format!("{name} payload: {e}")))
            })
            .collect();
    }
    let text = String::from_utf8(bytes).map_err(|e| Error::Msg(format!("wire bytes: {e}")))?;
    Ok(text
        .split("\n\n")
        .flat_map(|event| event.lines())
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(str::to_owned)
        .collect())
}

/// CPU time of `serde_json` parsing every event's data of the case's wire bytes into a
/// `Value`, once (the floor).
fn floor_ns(name: &str, scenario: Scenario, size: usize) -> Result<u64> {
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

/// Runs one case `reps` times, each in a fresh process: the minimum CPU time and the
/// largest peak.
fn measure(
    name: &str,
    scenario: Scenario,
    size: usize,
    mode: Mode,
    reps: usize,
) -> Result<Measure> {
    let exe = std::env::current_exe().map_err(|e| Error::Msg(format!("current_exe: {e}")))?;
    let mut best: Option<Measure> = None;
    for _ in 0..reps {
        let output = Command::new(&exe)
            .args(["bench-case", name, scenario.name(), &size.to_string(), mode.arg()])
            .output()
            .map_err(|e| Error::Msg(format!("cannot run {}: {e}", exe.display())))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            return Err(Error::Msg(format!(
                "{name} {} {} MiB: {}",
                scenario.name(),
                size / MIB,
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let mut fields = stdout.split_whitespace().map(str::parse::<u64>);
        let (Some(Ok(cpu_ns)), Some(Ok(peak_bytes))) = (fields.next(), fields.next()) else {
            return Err(Error::Msg(format!("unexpected bench-case output `{stdout}`")));
        };
        best = Some(match best {
            None => Measure { cpu_ns, peak_bytes },
            Some(b) => {
                Measure { cpu_ns: b.cpu_ns.min(cpu_ns), peak_bytes: b.peak_bytes.max(peak_bytes) }
            }
        });
    }
    best.ok_or_else(|| Error::Msg("no run".into()))
}

/// What one size of one row measured.
#[derive(Debug, Clone, Copy)]
struct Cell {
    /// serde_json parsing every event once, ns.
    floor: u64,
    /// HTTP and framing only.
    transport: Measure,
    /// Events read, no partial reads.
    plain: Measure,
    /// A partial read after every delta.
    partial: Measure,
}

/// One row of the table: a provider and a scenario at every size.
#[derive(Debug)]
struct Row {
    provider: &'static str,
    scenario: Scenario,
    /// One cell per size.
    cells: Vec<Result<Cell>>,
}

fn ms_per_mib(ns: u64, size_mib: usize) -> f64 {
    ns as f64 / 1e6 / size_mib.max(1) as f64
}

fn ratio(a: &Result<Cell>, b: &Result<Cell>) -> String {
    match (a, b) {
        (Ok(big), Ok(small)) if small.partial.cpu_ns > 0 => {
            format!("{:.2}", big.partial.cpu_ns as f64 / small.partial.cpu_ns as f64)
        }
        _ => "-".into(),
    }
}

fn render(rows: &[Row], sizes: &[usize]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "CPU ms per MiB of argument/text bytes (client thread): floor = serde_json parse of the wire events into Value, once; transport = the same HTTP client and framing, nothing parsed; plain = reading events only; partial = AssistantStream::partial() read after every delta."
    );
    let mut head = "| provider | stream |".to_owned();
    let mut rule = "|---|---|".to_owned();
    for size in sizes {
        let _ = write!(head, " {size} MiB floor / transport / plain / partial |");
        rule.push_str("---|");
    }
    for pair in sizes.windows(2) {
        if let [a, b] = pair {
            let _ = write!(head, " partial {b}/{a} |");
            rule.push_str("---|");
        }
    }
    if let Some(last) = sizes.last() {
        let _ = write!(
            head,
            " partial overhead at {last} MiB | plain / floor at {last} MiB | (floor + transport) / floor at {last} MiB | peak RSS at {last} MiB (limit 2x+16) |"
        );
        rule.push_str("---|---|---|---|");
    }
    let _ = writeln!(out, "{head}\n{rule}");
    for row in rows {
        let mut line = format!("| {} | {} |", row.provider, row.scenario.name());
        for (cell, size) in row.cells.iter().zip(sizes) {
            match cell {
                Ok(cell) => {
                    let _ = write!(
                        line,
                        " {:.1} / {:.1} / {:.1} / {:.1} |",
                        ms_per_mib(cell.floor, *size),
                        ms_per_mib(cell.transport.cpu_ns, *size),
                        ms_per_mib(cell.plain.cpu_ns, *size),
                        ms_per_mib(cell.partial.cpu_ns, *size)
                    );
                }
                Err(e) => {
                    let _ = write!(line, " failed: {e} |");
                }
            }
        }
        for pair in row.cells.windows(2) {
            if let [small, big] = pair {
                let _ = write!(line, " {} |", ratio(big, small));
            }
        }
        if let (Some(Ok(cell)), Some(size)) = (row.cells.last(), sizes.last()) {
            let limit = 2 * (*size as u64) * MIB as u64 + 16 * MIB as u64;
            let peak = cell.plain.peak_bytes.max(cell.partial.peak_bytes);
            let floor = cell.floor.max(1) as f64;
            let _ = write!(
                line,
                " {:+.0}% | {:.2} | {:.2} | {:.1} MiB{} |",
                (cell.partial.cpu_ns as f64 / cell.plain.cpu_ns.max(1) as f64 - 1.0) * 100.0,
                cell.plain.cpu_ns as f64 / floor,
                (cell.floor + cell.transport.cpu_ns) as f64 / floor,
                peak as f64 / MIB as f64,
                if peak > limit { " (over)" } else { "" }
            );
        } else {
            line.push_str(" - | - | - | - |");
        }
        let _ = writeln!(out, "{line}");
    }
    out
}

/// `cargo xtask bench`: prints the table (see the module docs).
pub fn run(options: &Options) -> Result<String> {
    let mut rows = Vec::new();
    for entry in PROVIDERS {
        if options.provider.as_deref().is_some_and(|p| p != entry.name) {
            continue;
        }
        for scenario in Scenario::ALL {
            if options.scenario.is_some_and(|s| s != scenario) {
                continue;
            }
            let mut cells = Vec::new();
            for &size_mib in &options.sizes {
                let size = size_mib * MIB;
                let cell = (|| {
                    let floor = (0..options.reps)
                        .map(|_| floor_ns(entry.name, scenario, size))
                        .collect::<Result<Vec<_>>>()?
                        .into_iter()
                        .min()
                        .unwrap_or_default();
                    let measure = |mode| measure(entry.name, scenario, size, mode, options.reps);
                    Ok(Cell {
                        floor,
                        transport: measure(Mode::Transport)?,
                        plain: measure(Mode::Plain)?,
                        partial: measure(Mode::Partial)?,
                    })
                })();
                match &cell {
                    Ok(cell) => eprintln!(
                        "{} {} {size_mib} MiB: floor {:.1} ms, transport {:.1} ms, plain {:.1} ms, partial {:.1} ms, peak {:.1} MiB",
                        entry.name,
                        scenario.name(),
                        cell.floor as f64 / 1e6,
                        cell.transport.cpu_ns as f64 / 1e6,
                        cell.plain.cpu_ns as f64 / 1e6,
                        cell.partial.cpu_ns as f64 / 1e6,
                        cell.plain.peak_bytes.max(cell.partial.peak_bytes) as f64 / MIB as f64
                    ),
                    Err(e) => eprintln!("{} {} {size_mib} MiB: {e}", entry.name, scenario.name()),
                }
                cells.push(cell);
            }
            rows.push(Row { provider: entry.name, scenario, cells });
        }
    }
    Ok(render(&rows, &options.sizes))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn generated_arguments_are_the_expected_json_in_small_deltas() {
        let mut source = Source::new(Some(2), 10_000);
        let mut text = String::new();
        while let Some(piece) = source.next_piece(DELTA) {
            assert!(piece.len() <= DELTA && !piece.is_empty());
            text.push_str(&piece);
        }
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["path"], "src/gen_2.rs");
        assert_eq!(value["content"].as_str().unwrap().len(), source.content_len);
        assert_eq!(Source::expected_content_len(Some(2), 10_000), source.content_len);
        assert!((10_000..10_200).contains(&text.len()), "{}", text.len());
    }

    #[test]
    fn every_wire_format_is_valid_json_per_event() {
        for entry in PROVIDERS {
            for scenario in Scenario::ALL {
                let payloads = event_payloads(entry.name, scenario, 300_000).unwrap();
                for line in &payloads {
                    serde_json::from_str::<Value>(line).unwrap_or_else(|e| {
                        panic!("{} {}: {e}: {line:.200}", entry.name, scenario.name())
                    });
                }
                assert!(payloads.len() >= 2, "{} {}", entry.name, scenario.name());
            }
        }
    }

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
    fn every_provider_streams_every_scenario_end_to_end() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for entry in PROVIDERS {
            let provider = (entry.make)();
            for scenario in Scenario::ALL {
                for partial in [false, true] {
                    let (message, cpu) =
                        stream_once(&runtime, &provider, entry.name, scenario, 64 * 1024, partial)
                            .unwrap();
                    verify(&message, scenario, 64 * 1024)
                        .unwrap_or_else(|e| panic!("{} {}: {e}", entry.name, scenario.name()));
                    assert!(cpu > 0);
                }
            }
        }
    }
}
