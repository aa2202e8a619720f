//! Reasoning tags written into `content` (`<think>` and kin), split off into thinking.

/// Reasoning tags some models write into `content` (OpenClaw's reasoning-tag
/// partitioner): `<think>`, `<thinking>`, `<thought>`, `<reasoning>` and their
/// `antml:` / `mm:` forms.
pub(super) const REASONING_TAGS: [(&str, &str); 12] = [
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<thought>", "</thought>"),
    ("<reasoning>", "</reasoning>"),
    ("<antml:think>", "</antml:think>"),
    ("<antml:thinking>", "</antml:thinking>"),
    ("<antml:thought>", "</antml:thought>"),
    ("<antml:reasoning>", "</antml:reasoning>"),
    ("<mm:think>", "</mm:think>"),
    ("<mm:thinking>", "</mm:thinking>"),
    ("<mm:thought>", "</mm:thought>"),
    ("<mm:reasoning>", "</mm:reasoning>"),
];

/// Splits streamed text into visible and reasoning pieces at reasoning tags,
/// which may be cut anywhere by fragment boundaries (a possible tag start at the
/// end of a fragment is held back until the next one).
#[derive(Debug, Default)]
pub(super) struct TagSplitter {
    /// The closing tag while inside a reasoning span.
    pub(super) inside: Option<&'static str>,
    /// Text held back because it may start a tag.
    pub(super) pending: String,
}

impl TagSplitter {
    /// Appends `(is_reasoning, text)` pieces for `text` to `out`.
    pub(super) fn push(&mut self, text: &str, out: &mut Vec<(bool, String)>) {
        if self.pending.is_empty() && self.inside.is_none() && !text.contains('<') {
            out.push((false, text.to_owned()));
            return;
        }
        let mut buf = std::mem::take(&mut self.pending);
        buf.push_str(text);
        let mut rest = buf.as_str();
        loop {
            match self.inside {
                Some(close) => match rest.find(close) {
                    Some(at) => {
                        push_piece(out, true, rest.get(..at).unwrap_or_default());
                        rest = rest.get(at + close.len()..).unwrap_or_default();
                        self.inside = None;
                    }
                    None => {
                        let keep = partial_tag_suffix(rest, &[close]);
                        let cut = rest.len() - keep;
                        push_piece(out, true, rest.get(..cut).unwrap_or_default());
                        self.pending = rest.get(cut..).unwrap_or_default().to_owned();
                        return;
                    }
                },
                None => {
                    let found = REASONING_TAGS
                        .iter()
                        .filter_map(|(open, close)| rest.find(open).map(|at| (at, *open, *close)))
                        .min_by_key(|(at, open, _)| (*at, std::cmp::Reverse(open.len())));
                    match found {
                        Some((at, open, close)) => {
                            push_piece(out, false, rest.get(..at).unwrap_or_default());
                            rest = rest.get(at + open.len()..).unwrap_or_default();
                            self.inside = Some(close);
                        }
                        None => {
                            let opens: Vec<&str> = REASONING_TAGS.iter().map(|(o, _)| *o).collect();
                            let keep = partial_tag_suffix(rest, &opens);
                            let cut = rest.len() - keep;
                            push_piece(out, false, rest.get(..cut).unwrap_or_default());
                            self.pending = rest.get(cut..).unwrap_or_default().to_owned();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// The end of the text: whatever was held back goes to its lane.
    pub(super) fn finish(&mut self, out: &mut Vec<(bool, String)>) {
        let pending = std::mem::take(&mut self.pending);
        push_piece(out, self.inside.is_some(), &pending);
    }
}

pub(super) fn push_piece(out: &mut Vec<(bool, String)>, reasoning: bool, text: &str) {
    if !text.is_empty() {
        out.push((reasoning, text.to_owned()));
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of one of `tags`.
pub(super) fn partial_tag_suffix(text: &str, tags: &[&str]) -> usize {
    let Some(lt) = text.rfind('<') else { return 0 };
    let tail = text.get(lt..).unwrap_or_default();
    if tags.iter().any(|t| t.len() > tail.len() && t.starts_with(tail)) { tail.len() } else { 0 }
}
