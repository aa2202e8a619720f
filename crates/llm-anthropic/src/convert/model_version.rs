//! Claude family and version read from a model id, and what each version accepts.

/// Family and version read from a Claude model id (`claude-opus-4-6`, `claude-sonnet-4.5-…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ClaudeVersion {
    pub(super) family: Family,
    pub(super) major: u32,
    pub(super) minor: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    Opus,
    Sonnet,
    Haiku,
    /// Fable / Mythos: always adaptive.
    Frontier,
}

impl ClaudeVersion {
    pub(super) fn at_least(self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }

    pub(super) fn adaptive(self) -> bool {
        match self.family {
            Family::Frontier => true,
            Family::Opus | Family::Sonnet => self.at_least(4, 6),
            Family::Haiku => self.at_least(5, 0),
        }
    }

    /// Models that reject a custom `temperature` (Opus 4.7 and later).
    pub(super) fn rejects_temperature(self) -> bool {
        match self.family {
            Family::Frontier => true,
            Family::Opus => self.at_least(4, 7),
            Family::Sonnet | Family::Haiku => self.at_least(5, 0),
        }
    }

    pub(super) fn native_xhigh(self) -> bool {
        matches!(self.family, Family::Frontier)
            || (self.family == Family::Opus && self.at_least(4, 7))
    }

    pub(super) fn native_max(self) -> bool {
        matches!(self.family, Family::Frontier)
            || (self.family == Family::Opus && self.at_least(4, 6))
    }
}

pub(super) fn claude_version(id: &str) -> Option<ClaudeVersion> {
    let id = id.to_ascii_lowercase().replace(['.', '_', ' '], "-");
    for (word, family) in [
        ("fable", Family::Frontier),
        ("mythos", Family::Frontier),
        ("opus", Family::Opus),
        ("sonnet", Family::Sonnet),
        ("haiku", Family::Haiku),
    ] {
        let Some(pos) = id.find(word) else { continue };
        if family == Family::Frontier {
            return Some(ClaudeVersion { family, major: 5, minor: 0 });
        }
        // `opus-4-6`, `opus-4`, or the old `3-5-sonnet` order.
        let after: Vec<&str> = id.get(pos + word.len()..).unwrap_or("").split('-').collect();
        let nums = |parts: &[&str]| -> Option<(u32, u32)> {
            let mut it = parts.iter().filter(|p| !p.is_empty());
            let major: u32 = it.next()?.parse().ok()?;
            // A date suffix (`20250514`) is not a minor version.
            let minor =
                it.next().and_then(|m| m.parse::<u32>().ok()).filter(|m| *m < 100).unwrap_or(0);
            (major < 100).then_some((major, minor))
        };
        if let Some((major, minor)) = nums(&after) {
            return Some(ClaudeVersion { family, major, minor });
        }
        let before: Vec<&str> =
            id.get(..pos).unwrap_or("").split('-').filter(|p| !p.is_empty()).collect();
        let tail: Vec<&str> = before.iter().rev().take(2).rev().copied().collect();
        let parsed: Vec<u32> = tail.iter().filter_map(|p| p.parse().ok()).collect();
        return match parsed.as_slice() {
            [major, minor] => Some(ClaudeVersion { family, major: *major, minor: *minor }),
            [major] => Some(ClaudeVersion { family, major: *major, minor: 0 }),
            _ => None,
        };
    }
    None
}
