//! Tool names the model sees, and the mapping back to the server's names.
//!
//! Every provider accepts `[A-Za-z0-9_-]{1,64}` starting with a letter or `_`
//! (Google's rule is the narrowest start rule; OpenAI, Anthropic and Mistral
//! cap the length at 64). MCP tool names are free-form and only unique per
//! server, so the exposed name is `<server id>__<tool name>`, normalized with
//! llm-core's tool-call id normalizer: a name that already fits is kept as is;
//! one that does not keeps a readable prefix and gains a hash of the original,
//! so distinct tools never share a name.

use std::collections::{BTreeMap, HashSet};

use llm_core::transform::{IdRules, normalize_tool_call_id};

/// Separator between the server id and the tool name.
pub const SEPARATOR: &str = "__";

/// The tool-name rules every provider accepts (server ids start with a letter,
/// and the normalizer keeps that first character).
pub const TOOL_NAME_RULES: IdRules = IdRules::ALNUM_DASH_64;

/// Where an exposed tool name leads.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct McpToolRef {
    /// The server id.
    pub server_id: String,
    /// The tool's name on that server.
    pub tool_name: String,
}

/// Exposed name -> server tool, for every MCP tool offered to the model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolNameMap {
    entries: BTreeMap<String, McpToolRef>,
}

impl ToolNameMap {
    /// The server tool behind an exposed name.
    pub fn resolve(&self, exposed: &str) -> Option<&McpToolRef> {
        self.entries.get(exposed)
    }

    /// The exposed name of a server tool.
    pub fn exposed_name(&self, server_id: &str, tool_name: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(_, r)| r.server_id == server_id && r.tool_name == tool_name)
            .map(|(name, _)| name.as_str())
    }

    /// Every mapping, by exposed name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &McpToolRef)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Assigns exposed names to `tools` (in the given order, which decides who
/// keeps a contested name), avoiding `reserved` (built-in tool names).
pub fn assign_names<'a>(
    tools: impl IntoIterator<Item = (&'a str, &'a str)>,
    reserved: &HashSet<String>,
) -> (Vec<String>, ToolNameMap) {
    let mut taken: HashSet<String> = reserved.clone();
    let mut names = Vec::new();
    let mut map = ToolNameMap::default();
    for (server_id, tool_name) in tools {
        let candidate = format!("{server_id}{SEPARATOR}{tool_name}");
        let mut name = normalize_tool_call_id(&candidate, &TOOL_NAME_RULES);
        let mut n = 2u32;
        while taken.contains(&name) {
            // A hash collision or a reserved name: a numbered variant is hashed
            // again, so the result still fits the rules.
            name = normalize_tool_call_id(&format!("{candidate}#{n}"), &TOOL_NAME_RULES);
            n += 1;
        }
        taken.insert(name.clone());
        map.entries.insert(
            name.clone(),
            McpToolRef { server_id: server_id.to_owned(), tool_name: tool_name.to_owned() },
        );
        names.push(name);
    }
    (names, map)
}

/// Whether `name` satisfies every provider's tool-name rules.
pub fn is_valid_tool_name(name: &str) -> bool {
    TOOL_NAME_RULES.accepts(name) && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_prefixed_and_kept() {
        let (names, map) = assign_names([("fs", "read_file"), ("git", "log")], &HashSet::new());
        assert_eq!(names, ["fs__read_file", "git__log"]);
        assert_eq!(
            map.resolve("fs__read_file"),
            Some(&McpToolRef { server_id: "fs".into(), tool_name: "read_file".into() })
        );
        assert_eq!(map.exposed_name("git", "log"), Some("git__log"));
    }

    #[test]
    fn awkward_names_become_valid_unique_names() {
        let long = "x".repeat(200);
        let tools = [
            ("fs", "read.file"),
            ("fs", "read_file"),
            ("fs", "read file"),
            ("fs", "读取"),
            ("fs", ""),
            ("fs", long.as_str()),
            ("fs", &long[1..]),
        ];
        let (names, map) = assign_names(tools, &HashSet::new());
        let unique: HashSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), tools.len(), "{names:?}");
        for (name, (server, tool)) in names.iter().zip(tools) {
            assert!(is_valid_tool_name(name), "{name}");
            let back = map.resolve(name).unwrap();
            assert_eq!((back.server_id.as_str(), back.tool_name.as_str()), (server, tool));
        }
    }

    #[test]
    fn reserved_names_are_avoided() {
        let reserved: HashSet<String> = ["fs__read".to_owned()].into();
        let (names, _) = assign_names([("fs", "read")], &reserved);
        assert_ne!(names[0], "fs__read");
        assert!(is_valid_tool_name(&names[0]));
    }
}
