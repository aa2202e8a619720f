//! Generated content and every wire format: bodies made as they are written.

use std::collections::VecDeque;
use std::net::SocketAddr;

use llm_core::Model;
use serde_json::json;

use super::{BenchFormat, DELTA, PIECE, Scenario, TURN_TEXT};
use crate::{Error, Result};

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
pub(super) struct Source {
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
    /// Which of many concurrent streams this is: named in the path, or the text's first
    /// words, so a stream that got another's bytes is told apart.
    salt: Option<u32>,
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
    pub(super) fn new(call: Option<usize>, target: usize) -> Self {
        Source {
            call,
            target,
            produced: 0,
            stage: 0,
            line: 0,
            pending: String::new(),
            content_len: 0,
            salt: None,
        }
    }

    /// The same source for stream `salt` of many.
    pub(super) fn salted(mut self, salt: Option<u32>) -> Self {
        self.salt = salt;
        self
    }

    fn suffix(&self) -> &'static str {
        if self.call.is_some() { "\"}" } else { "" }
    }

    /// Appends the next piece to `pending`; false once everything was produced.
    fn generate(&mut self) -> bool {
        let piece = match (self.stage, self.call) {
            (0, Some(k)) => {
                self.stage = 1;
                match self.salt {
                    Some(salt) => {
                        format!("{{\"path\":\"src/s{salt:08}/gen_{k}.rs\",\"content\":\"")
                    }
                    None => format!("{{\"path\":\"src/gen_{k}.rs\",\"content\":\""),
                }
            }
            (0, None) => {
                self.stage = 1;
                let Some(salt) = self.salt else { return true };
                let head = format!("stream {salt:08}: ");
                self.content_len += head.len();
                head
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
    pub(super) fn next_piece(&mut self, max: usize) -> Option<String> {
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
    pub(super) fn expected_content_len(call: Option<usize>, target: usize) -> usize {
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
pub(super) struct Body {
    parts: VecDeque<Part>,
    /// `text/event-stream`, or the AWS event-stream type for Bedrock.
    pub(super) content_type: &'static str,
}

impl Body {
    /// Appends at least `min` bytes (fewer only at the end); false once the body is done.
    pub(super) fn fill(&mut self, out: &mut Vec<u8>, min: usize) -> bool {
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
pub(super) fn sources(scenario: Scenario, size: usize) -> Vec<(Option<usize>, usize)> {
    match scenario {
        Scenario::Text => vec![(None, size)],
        Scenario::OneCall => vec![(Some(0), size)],
        Scenario::ThreeCalls => (0..3).map(|k| (Some(k), size / 3)).collect(),
        Scenario::Turn => vec![(None, TURN_TEXT), (Some(0), size)],
    }
}

fn anthropic(scenario: Scenario, size: usize, salt: Option<u32>) -> Vec<Part> {
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
        parts.push(Part::Deltas(Source::new(call, target).salted(salt), event));
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

fn completions(scenario: Scenario, size: usize, salt: Option<u32>) -> Vec<Part> {
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
        parts.push(Part::Deltas(Source::new(call, target).salted(salt), event));
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

fn mistral(scenario: Scenario, size: usize, salt: Option<u32>) -> Vec<Part> {
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
        parts.push(Part::Deltas(Source::new(call, target).salted(salt), event));
    }
    let reason = if scenario == Scenario::Text { "stop" } else { "tool_calls" };
    parts.push(Part::Lit(mistral_chunk(
        &format!(r#"{{"index":0,"delta":{{"content":""}},"finish_reason":"{reason}"}}"#),
        r#","usage":{"prompt_tokens":10,"total_tokens":1010,"completion_tokens":1000}"#,
    )));
    parts.push(Part::Lit(data("[DONE]")));
    parts
}

fn responses(scenario: Scenario, size: usize, salt: Option<u32>) -> Vec<Part> {
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
            parts.push(Part::Whole(Source::new(call, target).salted(salt), true));
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
                    Source::new(call, target).salted(salt),
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
                    Source::new(call, target).salted(salt),
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
        parts.push(Part::Whole(Source::new(call, target).salted(salt), true));
        parts.push(Part::Lit(tail.to_owned()));
    }
    parts.push(Part::Lit(
        r#"],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":1000,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":1010}}}

"#
        .to_owned(),
    ));
    parts
}

fn google(scenario: Scenario, size: usize, salt: Option<u32>) -> Vec<Part> {
    const TAIL: &str =
        r#"],"role":"model"},"index":0}],"modelVersion":"gemini-bench","responseId":"bench"}"#;
    let mut parts = Vec::new();
    for (call, target) in sources(scenario, size) {
        match call {
            None => parts.push(Part::Deltas(
                Source::new(call, target).salted(salt),
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
                parts.push(Part::Whole(Source::new(call, target).salted(salt), false));
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

fn bedrock(scenario: Scenario, size: usize, salt: Option<u32>) -> Vec<Part> {
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
        parts.push(Part::Frames(Source::new(call, target).salted(salt), frame));
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

/// The format `cargo xtask new-provider` scaffolds: one JSON object per event (`start`,
/// `text`, `tool_call`, `tool_call_delta`, `usage`, `stop`), then `[DONE]`.
fn scaffold(scenario: Scenario, size: usize, salt: Option<u32>) -> Vec<Part> {
    let mut parts =
        vec![Part::Lit(data(r#"{"type":"start","id":"resp_bench","model":"scaffold-bench"}"#))];
    for (call, target) in sources(scenario, size) {
        let event: EventFn = match call {
            None => Box::new(|d| data(&format!(r#"{{"type":"text","text":{}}}"#, json_str(d)))),
            Some(k) => {
                parts.push(Part::Lit(data(&format!(
                    r#"{{"type":"tool_call","index":{k},"id":"call_bench_{k}","name":"write_file"}}"#
                ))));
                Box::new(move |d| {
                    data(&format!(
                        r#"{{"type":"tool_call_delta","index":{k},"arguments":{}}}"#,
                        json_str(d)
                    ))
                })
            }
        };
        parts.push(Part::Deltas(Source::new(call, target).salted(salt), event));
    }
    parts.push(Part::Lit(data(r#"{"type":"usage","input":10,"output":1000}"#)));
    let reason = if scenario == Scenario::Text { "stop" } else { "tool_use" };
    parts.push(Part::Lit(data(&format!(r#"{{"type":"stop","reason":"{reason}"}}"#))));
    parts.push(Part::Lit(data("[DONE]")));
    parts
}

/// The body of `scenario` in `provider`'s wire format, and the model to ask.
pub(super) fn wire(
    provider: &str,
    scenario: Scenario,
    size: usize,
    addr: SocketAddr,
) -> Result<(Body, Model)> {
    wire_salted(provider, scenario, size, addr, None)
}

/// The body of `scenario` for stream `salt` of many (see [`Source::salted`]), and the model.
pub(super) fn wire_salted(
    provider: &str,
    scenario: Scenario,
    size: usize,
    addr: SocketAddr,
    salt: Option<u32>,
) -> Result<(Body, Model)> {
    let format = crate::providers::bench_format(provider)
        .ok_or_else(|| Error::Msg(format!("no bench wire format for provider `{provider}`")))?;
    let (body, mut model) = wire_format(format, provider, scenario, size, salt)?;
    model.base_url = format!("http://{addr}");
    Ok((body, model))
}

/// The body of `scenario` in `format`, and the model to ask of `provider` (no base URL yet).
pub(super) fn wire_format(
    format: BenchFormat,
    provider: &str,
    scenario: Scenario,
    size: usize,
    salt: Option<u32>,
) -> Result<(Body, Model)> {
    let (parts, api, id): (_, &str, String) = match format {
        BenchFormat::Anthropic => {
            (anthropic(scenario, size, salt), llm_anthropic::API, "claude-bench".into())
        }
        BenchFormat::OpenAiCompletions => {
            (completions(scenario, size, salt), llm_openai_completions::API, "gpt-bench".into())
        }
        BenchFormat::OpenAiResponses => {
            (responses(scenario, size, salt), llm_openai_responses::API, "gpt-bench".into())
        }
        BenchFormat::Google => {
            (google(scenario, size, salt), llm_google::API, "gemini-bench".into())
        }
        BenchFormat::Mistral => {
            (mistral(scenario, size, salt), llm_mistral::API, "devstral-bench".into())
        }
        BenchFormat::Bedrock => (
            bedrock(scenario, size, salt),
            llm_bedrock::API,
            "us.anthropic.claude-bench-v1:0".into(),
        ),
        // The API id is the registered crate's own.
        BenchFormat::Scaffold => {
            let api = clawcall::PROVIDERS
                .iter()
                .find(|e| e.info.name == provider)
                .map_or(provider, |e| e.info.api);
            (scaffold(scenario, size, salt), api, format!("{provider}-bench"))
        }
    };
    let content_type = if format == BenchFormat::Bedrock {
        llm_testkit::eventstream::CONTENT_TYPE
    } else {
        "text/event-stream"
    };
    let model = Model {
        id,
        api: api.into(),
        provider: provider.into(),
        max_tokens: 64_000,
        context_window: 1_000_000,
        ..Model::default()
    };
    Ok((Body { parts: parts.into(), content_type }, model))
}

/// The JSON text of every event of the case's wire bytes: each SSE event's `data` (but
/// `[DONE]`), or each event-stream message's payload.
pub(super) fn event_payloads(name: &str, scenario: Scenario, size: usize) -> Result<Vec<String>> {
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;
    use serde_json::Value;

    use crate::providers::BENCHED as PROVIDERS;

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
}
