//! Markdown in the terminal, a line at a time (answers stream, so a line is
//! rendered as soon as it is complete). Lines are parsed with pulldown-cmark;
//! only code fences need state across lines. The input is already sanitised:
//! every escape sequence in the output is ours.

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};

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
}

impl Markdown {
    /// One complete line (without its newline), styled.
    pub(crate) fn line(&mut self, line: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(styled: &str) -> String {
        let mut out = String::new();
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
}
