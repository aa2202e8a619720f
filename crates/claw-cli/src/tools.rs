//! The built-in tools `claw` offers the model.

use std::path::PathBuf;

use agent_core::{AgentTool, ExecutionMode, ToolError, ToolInvocation, ToolOutput};
use serde::Deserialize;
use serde_json::json;

use crate::calc;

/// Names of every built-in tool, in the order `--tools` lists them.
pub(crate) const ALL: [&str; 5] =
    ["read_file", "list_dir", "calculator", "current_time", "append_note"];

const MAX_READ: usize = 64 * 1024;

#[derive(Deserialize, schemars::JsonSchema)]
struct ReadFileArgs {
    /// Path of the file to read.
    path: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct ListDirArgs {
    /// Directory to list (default: the current directory).
    #[serde(default)]
    path: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct CalculatorArgs {
    /// Arithmetic expression, e.g. `(2 + 3) * 4 ^ 2`.
    expression: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct NoArgs {}

#[derive(Deserialize, schemars::JsonSchema)]
struct AppendNoteArgs {
    /// One line of text to append.
    text: String,
}

fn read_file() -> AgentTool {
    AgentTool::typed(
        "read_file",
        "Read a UTF-8 text file (at most 64 KiB).",
        |a: ReadFileArgs, _i: ToolInvocation| async move {
            let bytes = tokio::fs::read(&a.path)
                .await
                .map_err(|e| ToolError(format!("cannot read {}: {e}", a.path)))?;
            let truncated = bytes.len() > MAX_READ;
            let mut text =
                String::from_utf8_lossy(bytes.get(..MAX_READ).unwrap_or(&bytes)).into_owned();
            if truncated {
                text.push_str("\n[truncated at 64 KiB]");
            }
            Ok(ToolOutput::text(text).with_details(json!({"bytes": bytes.len()})))
        },
    )
    .with_label("Read file")
}

fn list_dir() -> AgentTool {
    AgentTool::typed(
        "list_dir",
        "List a directory's entries (directories end with /).",
        |a: ListDirArgs, _i: ToolInvocation| async move {
            let path = a.path.unwrap_or_else(|| ".".into());
            let mut dir = tokio::fs::read_dir(&path)
                .await
                .map_err(|e| ToolError(format!("cannot list {path}: {e}")))?;
            let mut names = Vec::new();
            while let Some(entry) =
                dir.next_entry().await.map_err(|e| ToolError(format!("cannot list {path}: {e}")))?
            {
                let mut name = entry.file_name().to_string_lossy().into_owned();
                if entry.file_type().await.is_ok_and(|t| t.is_dir()) {
                    name.push('/');
                }
                names.push(name);
            }
            names.sort();
            Ok(ToolOutput::text(names.join("\n")).with_details(json!({"entries": names.len()})))
        },
    )
    .with_label("List directory")
}

fn calculator() -> AgentTool {
    AgentTool::typed(
        "calculator",
        "Evaluate an arithmetic expression: + - * / % ^, parentheses, pi, e.",
        |a: CalculatorArgs, _i: ToolInvocation| async move {
            let v = calc::evaluate(&a.expression)
                .map_err(|e| ToolError(format!("cannot evaluate: {e}")))?;
            Ok(ToolOutput::text(calc::format_number(v)))
        },
    )
    .with_label("Calculator")
}

fn current_time() -> AgentTool {
    AgentTool::typed(
        "current_time",
        "The current date and time in UTC (RFC 3339).",
        |_a: NoArgs, _i: ToolInvocation| async move {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            Ok(ToolOutput::text(rfc3339(secs)))
        },
    )
    .with_label("Current time")
}

fn append_note(notes: PathBuf) -> AgentTool {
    AgentTool::typed(
        "append_note",
        "Append one line to the notes file. Runs sequentially.",
        move |a: AppendNoteArgs, _i: ToolInvocation| {
            let notes = notes.clone();
            async move {
                use tokio::io::AsyncWriteExt;
                let mut f = tokio::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&notes)
                    .await
                    .map_err(|e| ToolError(format!("cannot open {}: {e}", notes.display())))?;
                let line = format!("{}\n", a.text.replace('\n', " "));
                f.write_all(line.as_bytes())
                    .await
                    .map_err(|e| ToolError(format!("cannot write: {e}")))?;
                Ok(ToolOutput::text(format!("appended to {}", notes.display())))
            }
        },
    )
    .with_mode(ExecutionMode::Sequential)
    .with_label("Append note")
}

/// The tools named in `names` (all when empty); unknown names are an error.
pub(crate) fn builtin(names: &[String], notes: PathBuf) -> Result<Vec<AgentTool>, String> {
    let wanted: Vec<&str> =
        if names.is_empty() { ALL.to_vec() } else { names.iter().map(String::as_str).collect() };
    let mut out = Vec::new();
    for name in wanted {
        out.push(match name {
            "read_file" => read_file(),
            "list_dir" => list_dir(),
            "calculator" => calculator(),
            "current_time" => current_time(),
            "append_note" => append_note(notes.clone()),
            other => return Err(format!("unknown tool `{other}` (available: {})", ALL.join(", "))),
        });
    }
    Ok(out)
}

/// Unix seconds to `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_dates() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(super::rfc3339(1_796_083_200), "2026-12-01T00:00:00Z");
    }
}
