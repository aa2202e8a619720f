//! OAuth (Claude subscription) requests: the key shape and Claude Code's tool-name casing.

use super::Projection;

/// Claude Code's canonical tool names; OAuth requests use this casing on the wire.
pub(super) const CLAUDE_CODE_TOOLS: [&str; 17] = [
    "Read",
    "Write",
    "Edit",
    "Bash",
    "Grep",
    "Glob",
    "AskUserQuestion",
    "EnterPlanMode",
    "ExitPlanMode",
    "KillShell",
    "NotebookEdit",
    "Skill",
    "Task",
    "TaskOutput",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
];

/// Maps Claude Code wire names back to the caller's tool names (OAuth only). Built per request
/// from the request's own tool list: no process-wide cache.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolNames {
    wire_to_original: Vec<(String, String)>,
}

impl ToolNames {
    /// The wire -> original map of a projection.
    pub(crate) fn from_projection(projection: &Projection) -> Self {
        ToolNames {
            wire_to_original: projection
                .tools
                .iter()
                .map(|t| (t.wire_name.clone(), t.original_name.clone()))
                .collect(),
        }
    }

    /// The caller's name for a wire name; unknown names pass through.
    pub(crate) fn original(&self, wire: &str) -> String {
        self.wire_to_original
            .iter()
            .find(|(w, _)| w == wire)
            .map(|(_, o)| o.clone())
            .unwrap_or_else(|| wire.to_owned())
    }
}

/// Whether a key is an Anthropic OAuth token (Claude subscription): Bearer auth + Claude Code identity.
pub(crate) fn is_oauth_key(key: &str) -> bool {
    key.contains("sk-ant-oat")
}

/// The Claude Code casing of a tool name (case-insensitive match), else the name unchanged.
pub(crate) fn to_claude_code_name(name: &str) -> String {
    CLAUDE_CODE_TOOLS
        .iter()
        .find(|cc| cc.eq_ignore_ascii_case(name))
        .map(|cc| (*cc).to_owned())
        .unwrap_or_else(|| name.to_owned())
}
