//! `cargo xtask bench --structured [--sizes 1,4,16] [--reps N]`: a structured answer of
//! 1, 4 and 16 MiB (a nested object: an array of records whose strings hold quotes,
//! backslashes, tabs and newlines) streamed in 100-byte text fragments through
//! `llm_core::output::StructuredStream`, with the partial object read at the pointer of
//! what changed after every fragment, then validated against its schema.
//!
//! Measured in this process, on the client thread, after a warm-up; the minimum of the
//! runs. Three figures per size, in CPU ms per MiB: the `serde_json` floor (the whole
//! answer parsed once into a `Value`), `plain` (the provider's stream, every event read,
//! nothing parsed by the reader) and `structured` (the partial object read after every
//! fragment, and the validation at the end). Linear means the same ms per MiB at every
//! size; the ratios are those of the tool-argument table.

use std::fmt::Write as _;

use futures_util::StreamExt;
use llm_core::output::{OutputFormat, StructuredEvent, StructuredOutcome, StructuredStream};
use llm_core::{
    AssistantEvent, Context, Message, Model, Provider, StopReason, StreamOptions,
    raw::{Delta, ScriptedProvider, ScriptedTurn},
};
use serde_json::{Value, json};

use crate::bench::thread_cpu_ns;
use crate::{Error, Result};

const MIB: usize = 1024 * 1024;
/// Bytes per streamed fragment, as in the tool-argument bench.
const FRAGMENT: usize = 100;

/// Code-like text with what JSON must escape.
const LINES: &[&str] = &[
    "fn main() {\n",
    "    let path = \"C:\\\\temp\\\\out.txt\";\n",
    "\tprintln!(\"{}\", \"caf\u{e9} \u{2014} \u{1f600}\");\n",
    "}\n",
];

/// The answer's schema: what the generated answer is.
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "text": {"type": "string"}},
                    "required": ["id", "text"]
                }
            }
        },
        "required": ["title", "items"]
    })
}

/// A JSON answer of about `size` bytes matching [`schema`].
fn answer(size: usize) -> String {
    let mut out = String::with_capacity(size + 256);
    out.push_str("{\"title\":\"generated\",\"items\":[");
    let mut id = 0usize;
    while out.len() < size {
        if id > 0 {
            out.push(',');
        }
        let text: String =
            (0..4).filter_map(|k| LINES.get((id + k) % LINES.len()).copied()).collect();
        let _ = write!(out, "{{\"id\":{id},\"text\":{}}}", Value::from(text));
        id += 1;
    }
    out.push_str("]}");
    out
}

/// The answer as text deltas of [`FRAGMENT`] bytes (cut on char boundaries).
fn turn(answer: &str) -> ScriptedTurn {
    let mut deltas = Vec::with_capacity(answer.len() / FRAGMENT + 4);
    let mut rest = answer;
    while !rest.is_empty() {
        let mut cut = rest.floor_char_boundary(FRAGMENT.min(rest.len()));
        if cut == 0 {
            cut = rest.ceil_char_boundary(1);
        }
        let (piece, tail) = rest.split_at(cut);
        deltas.push(Delta::Text { key: 0, text: piece.to_owned() });
        rest = tail;
    }
    deltas.push(Delta::Stop(StopReason::Stop));
    deltas.push(Delta::Done);
    ScriptedTurn::deltas(deltas)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Plain,
    Structured,
}

/// One streamed answer: the client thread's CPU time until the answer is in hand, and
/// the time to drop the answer's value after it (the user's, and the allocator's).
fn stream_once(runtime: &tokio::runtime::Runtime, text: &str, mode: Mode) -> Result<(u64, u64)> {
    let provider = ScriptedProvider::new("bench", [turn(text)]);
    let model = Model { id: "bench".into(), api: "bench".into(), ..Model::default() };
    let context = Context { messages: vec![Message::user("answer")], ..Context::default() };
    let format = OutputFormat::new("answer", schema());
    let options = StreamOptions { output: Some(format.clone()), ..StreamOptions::default() };
    let start = thread_cpu_ns()?;
    let checked = runtime.block_on(async {
        let stream = provider.stream(&model, &context, &options);
        match mode {
            Mode::Plain => {
                let mut stream = stream;
                let mut seen = 0usize;
                let mut done = false;
                while let Some(event) = stream.next().await {
                    match event {
                        AssistantEvent::TextDelta { delta, .. } => seen += delta.len(),
                        AssistantEvent::Done { .. } => done = true,
                        _ => {}
                    }
                }
                std::hint::black_box(seen);
                if done { Ok(None) } else { Err("the stream did not end done".to_owned()) }
            }
            Mode::Structured => {
                let mut answer = StructuredStream::new(stream, format);
                let mut seen = 0usize;
                let mut outcome = None;
                while let Some(event) = answer.next().await {
                    match event {
                        // What a UI shows: the part of the object that changed.
                        StructuredEvent::Partial { changed } => {
                            seen += match answer.partial().pointer(&changed) {
                                Some(Value::String(s)) => s.len(),
                                Some(Value::Array(a)) => a.len(),
                                Some(Value::Object(o)) => o.len(),
                                Some(_) => 1,
                                None => 0,
                            };
                        }
                        StructuredEvent::Done { outcome: o, .. } => outcome = Some(o),
                    }
                }
                std::hint::black_box(seen);
                match outcome {
                    Some(StructuredOutcome::Valid(value)) => Ok(Some(std::hint::black_box(value))),
                    other => Err(format!("the answer did not end valid: {:?}", other.map(|_| ()))),
                }
            }
        }
    });
    let cpu = thread_cpu_ns()?.saturating_sub(start);
    let value = checked.map_err(Error::Msg)?;
    Ok((cpu, drop_timed(value)?))
}

/// One size's figures, in CPU ms per MiB of answer.
struct Row {
    size_mib: usize,
    floor: f64,
    plain: f64,
    structured: f64,
    floor_drop: f64,
    structured_drop: f64,
}

/// The CPU time of dropping `value`.
fn drop_timed<T>(value: T) -> Result<u64> {
    let start = thread_cpu_ns()?;
    drop(value);
    Ok(thread_cpu_ns()?.saturating_sub(start))
}

/// The `serde_json` floor: the whole answer parsed once; then its drop, timed apart.
fn floor_once(text: &str) -> Result<(u64, u64)> {
    let start = thread_cpu_ns()?;
    let value: Value =
        serde_json::from_str(text).map_err(|e| Error::Msg(format!("floor parse: {e}")))?;
    let value = std::hint::black_box(value);
    let cpu = thread_cpu_ns()?.saturating_sub(start);
    Ok((cpu, drop_timed(value)?))
}

fn ms_per_mib(ns: u64, bytes: usize) -> f64 {
    ns as f64 / 1e6 / (bytes as f64 / MIB as f64)
}

/// Parses `--structured [--sizes 1,4,16] [--reps N]` and runs; the table as Markdown.
pub fn run(args: &[String]) -> Result<String> {
    let mut sizes = vec![1, 4, 16];
    let mut reps = 3usize;
    let mut iter = args.iter().filter(|a| *a != "--structured");
    while let Some(flag) = iter.next() {
        let value =
            iter.next().ok_or_else(|| Error::Msg(format!("{flag} needs a value")))?.as_str();
        match flag.as_str() {
            "--sizes" => {
                sizes = value
                    .split(',')
                    .map(|s| s.trim().parse::<usize>())
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|e| Error::Msg(format!("--sizes: {e}")))?;
            }
            "--reps" => reps = value.parse().map_err(|e| Error::Msg(format!("--reps: {e}")))?,
            other => return Err(Error::Msg(format!("bench --structured: unknown `{other}`"))),
        }
    }
    if sizes.is_empty() || reps == 0 {
        return Err(Error::Msg("bench needs at least one size and one rep".into()));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Msg(format!("tokio runtime: {e}")))?;
    // Warm-up: lazy statics and the validator's first build are not what is measured.
    let warm = answer(64 * 1024);
    stream_once(&runtime, &warm, Mode::Structured)?;
    stream_once(&runtime, &warm, Mode::Plain)?;
    let mut rows = Vec::new();
    for size_mib in &sizes {
        let text = answer(size_mib * MIB);
        // The minimum of the runs, of the work and of the drop apart.
        let best = |f: &dyn Fn() -> Result<(u64, u64)>| -> Result<(u64, u64)> {
            let mut min = (u64::MAX, u64::MAX);
            for _ in 0..reps {
                let (work, drop) = f()?;
                min = (min.0.min(work), min.1.min(drop));
            }
            Ok(min)
        };
        let (floor, floor_drop) = best(&|| floor_once(&text))?;
        let (plain, _) = best(&|| stream_once(&runtime, &text, Mode::Plain))?;
        let (structured, structured_drop) =
            best(&|| stream_once(&runtime, &text, Mode::Structured))?;
        let per = |ns| ms_per_mib(ns, text.len());
        eprintln!(
            "structured {size_mib} MiB: floor {:.1}, plain {:.1}, structured {:.1} ms/MiB; drop {:.1} and {:.1}",
            per(floor),
            per(plain),
            per(structured),
            per(floor_drop),
            per(structured_drop)
        );
        rows.push(Row {
            size_mib: *size_mib,
            floor: per(floor),
            plain: per(plain),
            structured: per(structured),
            floor_drop: per(floor_drop),
            structured_drop: per(structured_drop),
        });
    }
    let mut out = String::from(
        "CPU ms per MiB of answer (client thread, minimum of the runs): floor = serde_json parse of the whole answer once; plain = the stream's events read; structured = StructuredStream with the partial object read at the changed pointer after every 100-byte fragment, and the schema validation at the end, until the valid value is in hand. The drops are timed apart: dropping the value handed over (serde_json's and the allocator's work, the caller's to pay).\n\n| size | floor | plain | structured | structured / plain | structured / floor | drop, floor's value | drop, structured value |\n|---|---|---|---|---|---|---|---|\n",
    );
    for row in &rows {
        let _ = writeln!(
            out,
            "| {} MiB | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.1} | {:.1} |",
            row.size_mib,
            row.floor,
            row.plain,
            row.structured,
            row.structured / row.plain,
            row.structured / row.floor,
            row.floor_drop,
            row.structured_drop
        );
    }
    // The tool-argument targets: each size's time over the previous size's, at most 4.5 for 4x.
    let ratios = |per: fn(&Row) -> f64| -> Vec<String> {
        rows.windows(2)
            .filter_map(|pair| match pair {
                [small, large] => {
                    let time = |row: &Row| per(row) * row.size_mib as f64;
                    Some(format!(
                        "{} MiB / {} MiB = {:.2}",
                        large.size_mib,
                        small.size_mib,
                        time(large) / time(small)
                    ))
                }
                _ => None,
            })
            .collect()
    };
    let in_hand = ratios(|row| row.structured);
    if !in_hand.is_empty() {
        let _ = writeln!(
            out,
            "\nLinearity, structured time ratios (target at most 4.5 for 4x the answer): {}. With the drop of the value: {}.",
            in_hand.join(", "),
            ratios(|row| row.structured + row.structured_drop).join(", ")
        );
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::expect_used, reason = "a test fails on what it expects")]
mod tests {
    use super::*;

    #[test]
    fn the_generated_answer_is_valid_json_of_its_schema_and_streams_valid() {
        let text = answer(32 * 1024);
        let value: Value = serde_json::from_str(&text).expect("JSON");
        let validator = jsonschema_free_check(&value);
        assert!(validator, "{value}");
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        stream_once(&runtime, &text, Mode::Structured).expect("valid end");
        stream_once(&runtime, &text, Mode::Plain).expect("done");
    }

    /// The schema's shape checked by hand (the validator under test is not the oracle).
    fn jsonschema_free_check(value: &Value) -> bool {
        value["title"].is_string()
            && value["items"].as_array().is_some_and(|items| {
                !items.is_empty() && items.iter().all(|i| i["id"].is_u64() && i["text"].is_string())
            })
    }
}
