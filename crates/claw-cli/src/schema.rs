//! `--schema FILE`: the run's final answer must match a JSON Schema. The schema file
//! and the model are checked before any request; the validated object is printed at
//! the end (one `structured_output` line with `--json`).

use std::io::Read;
use std::path::Path;

use agent_core::{AgentOutput, AgentTool};
use llm_core::Model;
use llm_core::output::{OutputFormat, OutputMode, StructuredOutcome};
use serde_json::Value;

use crate::models::ProviderKind;
use crate::sanitize;

/// The largest schema file read.
const MAX_SCHEMA: u64 = 1024 * 1024;

/// The name a format gets when neither the schema's `title` nor the file name gives one.
const DEFAULT_NAME: &str = "answer";

/// The output of `--schema FILE`: the schema read and checked, named after its `title`
/// (or the file's name), strict where the schema can be strict (else sent as written,
/// and still validated). The error says what is wrong with the file.
pub(crate) fn load(path: &Path) -> Result<AgentOutput, String> {
    let shown = path.display();
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // A FIFO would block a plain open until a writer came: opened without waiting, it
    // is then refused as not a regular file.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path).map_err(|e| format!("--schema {shown}: {e}"))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(format!("--schema {shown}: not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_SCHEMA + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("--schema {shown}: {e}"))?;
    if bytes.len() as u64 > MAX_SCHEMA {
        return Err(format!("--schema {shown}: larger than {} KiB", MAX_SCHEMA / 1024));
    }
    let schema: Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("--schema {shown}: not JSON ({e})"))?;
    let title = schema.get("title").and_then(Value::as_str).map(name_from);
    let stem = path.file_stem().map(|s| name_from(&s.to_string_lossy()));
    let name = title.or(stem).filter(|n| !n.is_empty()).unwrap_or_else(|| DEFAULT_NAME.into());
    let strict = llm_core::raw::strict::to_strict(&schema).is_ok();
    let format = OutputFormat::new(name, schema).with_strict(strict);
    format.check().map_err(|e| format!("--schema {shown}: {e}"))?;
    Ok(AgentOutput::new(format))
}

/// `text` as a format name: `[A-Za-z0-9_-]`, others as `_`, at most 64 characters.
fn name_from(text: &str) -> String {
    text.trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .take(64)
        .collect()
}

/// Checks, before any request, that `model` can carry a format (its provider's
/// output table), and renames a format whose name is also a tool's (a forced-tool
/// model would send two tools of one name).
pub(crate) fn prepare(
    output: &mut AgentOutput,
    kind: ProviderKind,
    model: &Model,
    tools: &[AgentTool],
) -> Result<(), String> {
    if kind.output_mode(&model.id) == OutputMode::Unsupported {
        return Err(format!(
            "model `{}` on {} cannot return structured output (--schema); `docs/structured-output.md` lists the models that can",
            model.id,
            kind.name()
        ));
    }
    while tools.iter().any(|t| t.tool.name == output.format.name) {
        let mut renamed: String = output.format.name.chars().take(57).collect();
        renamed.push_str("_answer");
        output.format.name = renamed;
    }
    Ok(())
}

/// The `--json` line of the answer: `{"type": "structured_output", "status", ...}`
/// (printed before `run_end`, whatever the outcome; `status` `failed` when the run gave
/// none).
pub(crate) fn print_json(outcome: Option<&StructuredOutcome>) {
    let mut line = match outcome {
        Some(outcome) => serde_json::to_value(outcome).unwrap_or(Value::Null),
        None => serde_json::json!({"status": "failed", "error": "the run gave no answer"}),
    };
    if let Value::Object(map) = &mut line {
        map.insert("type".into(), Value::from("structured_output"));
    }
    crate::print_out(&format!("{}\n", sanitize::json_line(line.to_string())));
}

/// Prints the validated object (pretty JSON on stdout; not with `--json`, whose
/// stream carries it). `Err` with the message for stderr when there is no valid answer.
pub(crate) fn print(outcome: Option<&StructuredOutcome>, json: bool) -> Result<(), String> {
    let Some(outcome) = outcome else {
        return Err("the run gave no structured answer".to_owned());
    };
    match outcome {
        StructuredOutcome::Valid(value) => {
            if !json {
                let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
                crate::print_out(&format!("{}\n", sanitize::json_line(pretty)));
            }
            Ok(())
        }
        StructuredOutcome::Invalid { violations, .. } => {
            let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
            Err(format!("the answer does not match --schema: {}", list.join("; ")))
        }
        StructuredOutcome::Refused(error) => Err(format!("the model refused: {}", error.message)),
        StructuredOutcome::CutOff(_) => {
            Err("the answer was cut off by the output token limit (--max-tokens raises it)"
                .to_owned())
        }
        StructuredOutcome::Failed(error) => Err(format!("the answer failed: {}", error.message)),
    }
}
