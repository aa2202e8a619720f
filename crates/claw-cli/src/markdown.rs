//! Markdown in the terminal, a line at a time (answers stream, so a line is
//! rendered as soon as it is complete). Lines are parsed with pulldown-cmark;
//! only code fences and tables need state across lines: a table's rows are held
//! until it ends, then laid out in aligned columns. The input is already
//! sanitised: every escape sequence in the output is ours.

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};
use unicode_width::UnicodeWidthStr;

const BOLD: &str = "\x1b[1m";
const ITALIC: &str = "\x1b[3m";
const UNDERLINE: &str = "\x1b[4m";
const DIM: &str = "\x1b[2m";
const CODE: &str = "\x1b[36m";
const RESET: &str = "\x1b[0m";

/// State carried between lines.
#[derive(Debug, Default)]
pub(crate) struct Markdown {
    in_fence: bool,
    /// Rows of a table being read (lines starting with `|`), held until it ends.
    table: Vec<String>,
}

/// How a table column is aligned (its delimiter row: `:--`, `--:`, `:-:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Align {
    Left,
    Right,
    Center,
}

impl Markdown {
    /// One complete line (without its newline): the styled lines to print now, none while a
    /// table is being read, and the whole table once a line that is not a row ends it.
    pub(crate) fn push_line(&mut self, line: &str) -> Vec<String> {
        if !self.in_fence && line.trim_start().starts_with('|') {
            self.table.push(line.to_owned());
            return Vec::new();
        }
        let mut out = self.finish();
        out.push(self.line(line));
        out
    }

    /// The end of the text: a table still held is printed.
    pub(crate) fn finish(&mut self) -> Vec<String> {
        let rows = std::mem::take(&mut self.table);
        let cells: Vec<Vec<String>> = rows.iter().map(|row| split_row(row)).collect();
        let aligns = cells.get(1).and_then(|delimiter| delimiter_row(delimiter));
        let Some(aligns) = aligns else {
            // Not a table after all (no delimiter row under the first): lines as they are.
            return rows.iter().map(|row| self.line(row)).collect();
        };
        // Each cell styled, with the width its plain text takes in a terminal.
        let styled: Vec<Vec<(String, usize)>> = cells
            .iter()
            .enumerate()
            .filter(|(n, _)| *n != 1)
            .map(|(_, row)| {
                row.iter()
                    .map(|cell| {
                        let styled = self.line(cell);
                        let width = UnicodeWidthStr::width(plain(&styled).as_str());
                        (styled, width)
                    })
                    .collect()
            })
            .collect();
        let columns = styled.iter().map(Vec::len).max().unwrap_or(0).max(aligns.len());
        let widths: Vec<usize> = (0..columns)
            .map(|c| styled.iter().filter_map(|row| row.get(c)).map(|(_, w)| *w).max().unwrap_or(0))
            .collect();
        let bar = format!("{DIM}│{RESET}");
        let mut out = Vec::with_capacity(styled.len() + 1);
        for (n, row) in styled.iter().enumerate() {
            let mut line = String::new();
            for (c, width) in widths.iter().enumerate() {
                let (text, used) = row.get(c).map_or(("", 0), |(s, w)| (s.as_str(), *w));
                let pad = width.saturating_sub(used);
                let (before, after) = match aligns.get(c).copied().unwrap_or(Align::Left) {
                    Align::Left => (0, pad),
                    Align::Right => (pad, 0),
                    Align::Center => (pad / 2, pad - pad / 2),
                };
                line.push_str(if c == 0 { "" } else { " " });
                line.push_str(&bar);
                line.push(' ');
                line.push_str(&" ".repeat(before));
                if n == 0 {
                    line.push_str(BOLD);
                }
                line.push_str(text);
                line.push_str(RESET);
                line.push_str(&" ".repeat(after));
            }
            line.push(' ');
            line.push_str(&bar);
            out.push(line);
            if n == 0 {
                let rule: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
                out.push(format!("{DIM}├{}┤{RESET}", rule.join("┼")));
            }
        }
        out
    }

    /// One complete line (without its newline), styled.
    fn line(&mut self, line: &str) -> String {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            self.in_fence = !self.in_fence;
            return format!("{DIM}{line}{RESET}");
        }
        if self.in_fence {
            return format!("{CODE}{line}{RESET}");
        }
        // Styles are re-applied after every reset, so nesting (**`x`**) works.
        let mut out = String::with_capacity(line.len() + 16);
        let mut active: Vec<&'static str> = Vec::new();
        let restyle = |out: &mut String, active: &[&str]| {
            out.push_str(RESET);
            for s in active {
                out.push_str(s);
            }
        };
        let mut link_url: Vec<String> = Vec::new();
        let mut list_number: Option<u64> = None;
        for event in Parser::new(line) {
            match event {
                Event::Start(Tag::Heading { level, .. }) => {
                    active.push(BOLD);
                    if level == HeadingLevel::H1 {
                        active.push(UNDERLINE);
                    }
                    restyle(&mut out, &active);
                }
                Event::End(TagEnd::Heading(level)) => {
                    active.pop();
                    if level == HeadingLevel::H1 {
                        active.pop();
                    }
                    restyle(&mut out, &active);
                }
                Event::Start(Tag::Strong) => {
                    active.push(BOLD);
                    restyle(&mut out, &active);
                }
                Event::Start(Tag::Emphasis) => {
                    active.push(ITALIC);
                    restyle(&mut out, &active);
                }
                Event::Start(Tag::BlockQuote(_)) => {
                    out.push_str("│ ");
                    active.push(DIM);
                    restyle(&mut out, &active);
                }
                Event::End(TagEnd::Strong | TagEnd::Emphasis | TagEnd::BlockQuote(_)) => {
                    active.pop();
                    restyle(&mut out, &active);
                }
                Event::Start(Tag::Link { dest_url, .. }) => {
                    link_url.push(dest_url.into_string());
                    active.push(UNDERLINE);
                    restyle(&mut out, &active);
                }
                Event::End(TagEnd::Link) => {
                    active.pop();
                    restyle(&mut out, &active);
                    if let Some(url) = link_url.pop() {
                        out.push_str(&format!("{DIM} ({url}){RESET}"));
                        restyle(&mut out, &active);
                    }
                }
                Event::Start(Tag::List(start)) => list_number = start,
                Event::Start(Tag::Item) => {
                    let indent = line.get(..line.len() - trimmed.len()).unwrap_or("");
                    match list_number.as_mut() {
                        Some(n) => {
                            out.push_str(&format!("{indent}{n}. "));
                            *n += 1;
                        }
                        None => out.push_str(&format!("{indent}• ")),
                    }
                }
                Event::Code(code) => {
                    out.push_str(CODE);
                    out.push_str(&code);
                    restyle(&mut out, &active);
                }
                Event::Text(text) | Event::Html(text) | Event::InlineHtml(text) => {
                    out.push_str(&text);
                }
                Event::SoftBreak | Event::HardBreak => out.push(' '),
                Event::Rule => out.push_str(&format!("{DIM}{}{RESET}", "─".repeat(40))),
                _ => {}
            }
        }
        if out.is_empty() && !line.trim().is_empty() {
            // Nothing the parser rendered as text (e.g. a lone link definition): show it as is.
            return line.to_owned();
        }
        out.push_str(RESET);
        out
    }
}

/// The cells of a table row: split on `|` not escaped as `\|`, without the outer pipes,
/// trimmed.
fn split_row(row: &str) -> Vec<String> {
    let row = row.trim();
    let row = row.strip_prefix('|').unwrap_or(row);
    let row = if row.ends_with('|') && !row.ends_with("\\|") {
        row.get(..row.len() - 1).unwrap_or(row)
    } else {
        row
    };
    let mut cells = vec![String::new()];
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                if let Some(cell) = cells.last_mut() {
                    cell.push('|');
                }
            }
            '|' => cells.push(String::new()),
            c => {
                if let Some(cell) = cells.last_mut() {
                    cell.push(c);
                }
            }
        }
    }
    cells.into_iter().map(|cell| cell.trim().to_owned()).collect()
}

/// The column alignments of a delimiter row (`---`, `:--`, `--:`, `:-:` per cell), or
/// `None` if `cells` is not one.
fn delimiter_row(cells: &[String]) -> Option<Vec<Align>> {
    cells
        .iter()
        .map(|cell| {
            let dashes = cell.trim_start_matches(':').trim_end_matches(':');
            if dashes.is_empty() || !dashes.chars().all(|c| c == '-') {
                return None;
            }
            Some(match (cell.starts_with(':'), cell.ends_with(':')) {
                (true, true) => Align::Center,
                (false, true) => Align::Right,
                _ => Align::Left,
            })
        })
        .collect()
}

/// `styled` without its escape sequences (all ours: `ESC [ ... m`).
fn plain(styled: &str) -> String {
    let mut out = String::with_capacity(styled.len());
    let mut chars = styled.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing, reason = "tests")]

    use super::*;

    #[test]
    fn styles_headings_emphasis_code_lists_and_fences() {
        let mut md = Markdown::default();
        let h = md.line("# Title");
        assert!(h.contains(BOLD) && h.contains(UNDERLINE) && plain(&h) == "Title", "{h:?}");
        let s = md.line("**bold** and `code`");
        assert!(s.contains(BOLD) && s.contains(CODE), "{s:?}");
        assert_eq!(plain(&s), "bold and code");
        assert_eq!(plain(&md.line("- item")), "• item");
        assert_eq!(plain(&md.line("3. third")), "3. third");
        assert_eq!(plain(&md.line("see [docs](https://x.test)")), "see docs (https://x.test)");
        md.line("```rust");
        assert_eq!(plain(&md.line("let **x** = 1;")), "let **x** = 1;", "no markdown in fences");
        md.line("```");
        assert_eq!(plain(&md.line("*back*")), "back");
    }

    #[test]
    fn a_table_is_laid_out_in_aligned_columns_once_it_ends() {
        let mut md = Markdown::default();
        assert!(md.push_line("| tool | calls | note |").is_empty());
        assert!(md.push_line("|:-----|------:|:---:|").is_empty());
        assert!(md.push_line("| `read_file` | 12 | ok |").is_empty());
        assert!(md.push_line("| 計算 \\| calc | 3 |").is_empty());
        let lines: Vec<String> = md.push_line("After.").iter().map(|l| plain(l)).collect();
        assert_eq!(
            lines,
            [
                "│ tool        │ calls │ note │",
                "├─────────────┼───────┼──────┤",
                "│ read_file   │    12 │  ok  │",
                "│ 計算 | calc │     3 │      │",
                "After.",
            ]
        );
        // Every row of the table takes the same terminal width.
        let widths: Vec<usize> =
            lines[..4].iter().map(|l| UnicodeWidthStr::width(l.as_str())).collect();
        assert!(widths.iter().all(|w| *w == widths[0]), "{widths:?}");
    }

    #[test]
    fn pipes_without_a_delimiter_row_are_plain_lines_and_a_table_at_the_end_is_flushed() {
        let mut md = Markdown::default();
        assert!(md.push_line("| not a table").is_empty());
        let lines: Vec<String> = md.push_line("text").iter().map(|l| plain(l)).collect();
        assert_eq!(lines, ["| not a table", "text"]);
        md.push_line("| a |");
        md.push_line("|---|");
        md.push_line("| bb |");
        let lines: Vec<String> = md.finish().iter().map(|l| plain(l)).collect();
        assert_eq!(lines, ["│ a  │", "├────┤", "│ bb │"]);
        assert!(md.finish().is_empty());
        // Inside a code fence a pipe is code.
        md.push_line("```");
        assert_eq!(plain(&md.push_line("| x |")[0]), "| x |");
    }
}
