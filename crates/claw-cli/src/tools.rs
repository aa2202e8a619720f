//! The built-in tools `claw` offers the model, described in one table
//! ([`TOOLS`]): name, whether the tool has side effects (and so needs
//! approval), what it needs to be available, and how to build it.

use std::path::PathBuf;
use std::sync::Arc;

use agent_core::{AgentTool, ExecutionMode, ToolError, ToolInvocation, ToolOutput};
use serde::Deserialize;
use serde_json::json;

use crate::calc;
use crate::sanitize;
use crate::workspace::{MAX_ENTRIES, MAX_READ, Workspace};

/// What a tool needs from the environment to be offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Needs {
    /// Nothing.
    Nothing,
    /// Read access to the workspace.
    Workspace,
    /// Write access to the notes file.
    NotesFile,
}

/// One built-in tool.
pub(crate) struct ToolSpec {
    /// The name the model calls it by.
    pub(crate) name: &'static str,
    /// Whether it changes anything outside the process (then it asks first).
    pub(crate) side_effects: bool,
    /// What it needs to be available.
    pub(crate) needs: Needs,
    /// One line for `--help` and `docs/claw.md`.
    pub(crate) summary: &'static str,
    pub(crate) build: fn(&ToolEnv) -> AgentTool,
}

/// Every built-in tool, in the order `--tools` lists them.
pub(crate) const TOOLS: &[ToolSpec] = &[
    ToolSpec {
        name: "read_file",
        side_effects: false,
        needs: Needs::Workspace,
        summary: "read a text file in the workspace (first 64 KiB)",
        build: read_file,
    },
    ToolSpec {
        name: "list_dir",
        side_effects: false,
        needs: Needs::Workspace,
        summary: "list a directory in the workspace",
        build: list_dir,
    },
    ToolSpec {
        name: "calculator",
        side_effects: false,
        needs: Needs::Nothing,
        summary: "evaluate arithmetic",
        build: |_| calculator(),
    },
    ToolSpec {
        name: "current_time",
        side_effects: false,
        needs: Needs::Nothing,
        summary: "the current UTC time",
        build: |_| current_time(),
    },
    ToolSpec {
        name: "append_note",
        side_effects: true,
        needs: Needs::NotesFile,
        summary: "append a line to the notes file (asks for approval)",
        build: append_note,
    },
];

/// The spec of the built-in tool `name`.
pub(crate) fn spec(name: &str) -> Option<&'static ToolSpec> {
    TOOLS.iter().find(|t| t.name == name)
}

/// The tool table as text (`claw tools`).
pub(crate) fn table() -> String {
    let mut out = format!("{:<13} {:<13} {:<10} {}\n", "TOOL", "SIDE EFFECTS", "NEEDS", "WHAT");
    for t in TOOLS {
        let needs = match t.needs {
            Needs::Nothing => "-",
            Needs::Workspace => "workspace",
            Needs::NotesFile => "notes file",
        };
        let effects = if t.side_effects { "yes (asks)" } else { "no" };
        out.push_str(&format!("{:<13} {:<13} {:<10} {}\n", t.name, effects, needs, t.summary));
    }
    out
}

/// What the tools work with.
pub(crate) struct ToolEnv {
    /// The directory the file tools are confined to.
    pub(crate) workspace: Arc<Workspace>,
    /// The file `append_note` writes to, relative to the workspace (chosen by
    /// the user, not the model; checked by [`crate::workspace::notes_path`]).
    pub(crate) notes: PathBuf,
    /// Values that must never appear in tool output (API keys).
    pub(crate) secrets: Arc<Vec<String>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct ReadFileArgs {
    /// Path of the file to read, relative to the workspace.
    path: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct ListDirArgs {
    /// Directory to list, relative to the workspace (default: its root).
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

/// How long a file-system call may take (a hung network mount, say) before
/// its call gets an error result.
const FS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs blocking file-system work off the async threads, contained: a panic
/// in it, or taking longer than `limit`, is an error result. (A thread stuck
/// in the kernel cannot be stopped; it is left behind, and the process exit
/// does not wait for it.)
async fn blocking<T: Send + 'static>(
    limit: std::time::Duration,
    f: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    match tokio::time::timeout(limit, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => Err(ToolError(format!("the tool failed: {e}"))),
        Err(_) => Err(ToolError(format!(
            "the file system did not answer within {} s",
            limit.as_secs_f64()
        ))),
    }
}

fn read_file(env: &ToolEnv) -> AgentTool {
    let workspace = env.workspace.clone();
    let secrets = env.secrets.clone();
    AgentTool::typed(
        "read_file",
        "Read a UTF-8 text file in the workspace (at most 64 KiB). Paths are relative to the workspace root.",
        move |a: ReadFileArgs, _i: ToolInvocation| {
            let workspace = workspace.clone();
            let secrets = secrets.clone();
            async move {
                let path = sanitize::one_line(&a.path);
                // Read past the limit by the longest secret, so a secret cut by
                // the limit is redacted whole instead of leaking its first bytes.
                let lookahead = secrets.iter().map(String::len).max().unwrap_or(0) as u64;
                let read = blocking(FS_TIMEOUT, move || {
                    workspace.read(&a.path, lookahead).map_err(|e| ToolError(e.to_string()))
                })
                .await?;
                let truncated = read.size > MAX_READ;
                let head = read.bytes.get(..MAX_READ as usize).unwrap_or(&read.bytes);
                // Text files hold no NUL bytes; decoding a binary one gives the model noise.
                if head.contains(&0) {
                    return Err(ToolError(format!(
                        "`{path}` is a binary file ({} bytes); read_file reads text files",
                        read.size
                    )));
                }
                let mut text = sanitize::redact_cut(&read.bytes, MAX_READ as usize, &secrets);
                if truncated {
                    text.push_str(&format!("\n[truncated at {} KiB]", MAX_READ / 1024));
                }
                Ok(ToolOutput::text(text).with_details(json!({"bytes": read.size})))
            }
        },
    )
    .with_label("Read file")
}

fn list_dir(env: &ToolEnv) -> AgentTool {
    let workspace = env.workspace.clone();
    AgentTool::typed(
        "list_dir",
        "List a directory in the workspace (directories end with /). Paths are relative to the workspace root.",
        move |a: ListDirArgs, _i: ToolInvocation| {
            let workspace = workspace.clone();
            async move {
                let path = a.path.unwrap_or_else(|| ".".into());
                let (names, total) =
                    blocking(FS_TIMEOUT, move || {
                        workspace.list(&path).map_err(|e| ToolError(e.to_string()))
                    })
                        .await?;
                let mut text = names.join("\n");
                if total > names.len() {
                    text.push_str(&format!("\n[{} more entries not shown]", total - MAX_ENTRIES));
                }
                Ok(ToolOutput::text(text).with_details(json!({"entries": total})))
            }
        },
    )
    .with_label("List directory")
}

fn calculator() -> AgentTool {
    AgentTool::typed(
        "calculator",
        "Evaluate an arithmetic expression: + - * / % ^, parentheses, pi, e. Exact where the answer is exact; an approximate result starts with ≈.",
        |a: CalculatorArgs, _i: ToolInvocation| async move {
            let v = calc::evaluate(&a.expression)
                .map_err(|e| ToolError(format!("cannot evaluate: {e}")))?;
            Ok(ToolOutput::text(calc::format(&v)))
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

fn append_note(env: &ToolEnv) -> AgentTool {
    let notes = env.notes.clone();
    let workspace = env.workspace.clone();
    let secrets = env.secrets.clone();
    AgentTool::typed(
        "append_note",
        "Append one line to the notes file. Runs sequentially; the user approves each call.",
        move |a: AppendNoteArgs, _i: ToolInvocation| {
            let notes = notes.clone();
            let workspace = workspace.clone();
            let secrets = secrets.clone();
            async move {
                // One line, no control characters: the file may later be `cat` to a terminal.
                let line = format!("{}\n", sanitize::redact(sanitize::one_line(&a.text), &secrets));
                let target = workspace.root().join(&notes);
                blocking(FS_TIMEOUT, move || {
                    workspace.append(&notes, &line).map_err(|e| ToolError(e.to_string()))
                })
                .await?;
                Ok(ToolOutput::text(format!("appended to {}", target.display())))
            }
        },
    )
    .with_mode(ExecutionMode::Sequential)
    .with_label("Append note")
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
    use std::time::Duration;

    use super::{ToolError, blocking};

    #[tokio::test]
    async fn blocking_work_that_panics_or_hangs_is_an_error_result() {
        let hung = blocking(Duration::from_millis(50), || {
            std::thread::sleep(Duration::from_millis(500));
            Ok(())
        })
        .await;
        assert!(matches!(hung, Err(ToolError(m)) if m.contains("did not answer")));
        let panicked: Result<(), ToolError> =
            blocking(Duration::from_secs(5), || panic!("injected")).await;
        assert!(matches!(panicked, Err(ToolError(m)) if m.contains("the tool failed")));
        let fine = blocking(Duration::from_secs(5), || Ok(7)).await;
        assert!(matches!(fine, Ok(7)));
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(super::rfc3339(1_796_083_200), "2026-12-01T00:00:00Z");
    }
}
