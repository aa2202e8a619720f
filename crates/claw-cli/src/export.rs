//! `claw export SESSION --html`: one self-contained HTML page of a saved
//! session, for reviewing a long agent run by looking rather than reading
//! JSON. Messages in order; each tool call is a collapsible block with its
//! arguments and its result; each response shows its usage and cost.
//!
//! Everything from the session (model text, tool arguments and results,
//! file contents) is HTML-escaped; the page has no scripts and loads nothing
//! (styles inline, images as `data:` URLs of validated base64).

use std::collections::HashMap;
use std::fmt::Write as _;

use llm_core::{AssistantContent, Message, ToolResultMessage, Usage, UserContent};

use crate::sessions::Transcript;

/// `text` safe inside HTML text and double- or single-quoted attributes.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters other than newline and tab are not HTML text:
            // C0 as its control picture, the rest as U+FFFD.
            c if c.is_control() && c != '\n' && c != '\t' => {
                let picture = if u32::from(c) < 0x20 { 0x2400 + u32::from(c) } else { 0xfffd };
                out.push(char::from_u32(picture).unwrap_or('\u{fffd}'));
            }
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1d1d1f;background:#fafafa}
header{border-bottom:1px solid #ddd;margin-bottom:1.5rem}
h1{font-size:1.3rem;margin:.2rem 0}
.meta{color:#555;font-size:.9rem}
section.msg{background:#fff;border:1px solid #e3e3e3;border-radius:8px;padding:.6rem 1rem;margin:.8rem 0}
section.user{border-left:4px solid #3b6fd8}
section.assistant{border-left:4px solid #2f9e55}
section.tool-result{border-left:4px solid #999}
h2{font-size:.85rem;text-transform:uppercase;letter-spacing:.05em;color:#666;margin:.1rem 0 .4rem}
.text{white-space:pre-wrap;overflow-wrap:anywhere}
details{border:1px solid #e6e6e6;border-radius:6px;margin:.5rem 0;padding:.3rem .6rem;background:#f6f7f9}
details.error{background:#fff3f3;border-color:#f0c8c8}
summary{cursor:pointer;font-family:ui-monospace,monospace;font-size:.9rem}
pre{white-space:pre-wrap;overflow-wrap:anywhere;font:13px/1.4 ui-monospace,monospace;background:#fff;border:1px solid #eee;padding:.4rem;margin:.3rem 0}
.label{font-size:.8rem;color:#666}
footer.usage{color:#666;font-size:.8rem;border-top:1px dashed #e3e3e3;margin-top:.5rem;padding-top:.3rem}
.err{color:#b42318}
img{max-width:100%}
";

/// The whole page for `transcript` (named `title`).
pub(crate) fn html(title: &str, transcript: &Transcript) -> String {
    let results: HashMap<&str, &ToolResultMessage> = transcript
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some((r.tool_call_id.as_str(), r)),
            _ => None,
        })
        .collect();
    let called: std::collections::HashSet<&str> = transcript
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => {
                Some(a.tool_calls().map(|c| c.id.as_str()).collect::<Vec<_>>())
            }
            _ => None,
        })
        .flatten()
        .collect();
    let mut total = Usage::default();
    let mut body = String::new();
    let mut turn = 0u32;
    for message in &transcript.messages {
        match message {
            Message::User(u) => {
                body.push_str("<section class=\"msg user\"><h2>User</h2>");
                for block in u.content.blocks() {
                    user_block(&mut body, &block);
                }
                body.push_str("</section>\n");
            }
            Message::Assistant(a) => {
                turn += 1;
                add(&mut total, &a.usage);
                let _ = write!(
                    body,
                    "<section class=\"msg assistant\" id=\"turn-{turn}\"><h2>Assistant · turn {turn}</h2>"
                );
                for block in &a.content {
                    match block {
                        AssistantContent::Text(t) => {
                            let _ = write!(body, "<div class=\"text\">{}</div>", escape(&t.text));
                        }
                        AssistantContent::Thinking(t) if !t.thinking.is_empty() => {
                            let _ = write!(
                                body,
                                "<details class=\"thinking\"><summary>thinking</summary><div class=\"text\">{}</div></details>",
                                escape(&t.thinking)
                            );
                        }
                        AssistantContent::ToolCall(call) => {
                            tool_call(&mut body, call, results.get(call.id.as_str()).copied());
                        }
                        _ => {}
                    }
                }
                if let Some(e) = &a.error_message {
                    let _ = write!(body, "<p class=\"err\">error: {}</p>", escape(e));
                }
                let _ = write!(body, "<footer class=\"usage\">{}</footer>", usage_line(&a.usage));
                body.push_str("</section>\n");
            }
            // Results are shown inside their call; one without a call stands alone.
            Message::ToolResult(r) if !called.contains(r.tool_call_id.as_str()) => {
                body.push_str("<section class=\"msg tool-result\"><h2>Tool result</h2>");
                tool_result(&mut body, r);
                body.push_str("</section>\n");
            }
            Message::ToolResult(_) => {}
        }
    }
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\
         <title>claw session {}</title><style>{STYLE}</style></head><body>\n",
        escape(title)
    );
    let _ = write!(
        page,
        "<header><h1>claw session {}</h1><p class=\"meta\">{} · {}{} · {} messages · {} turns · {}</p>",
        escape(title),
        escape(&transcript.provider),
        escape(&transcript.model),
        transcript.base_url.as_deref().map(|u| format!(" at {}", escape(u))).unwrap_or_default(),
        transcript.messages.len(),
        turn,
        usage_line(&total)
    );
    if let Some(system) = &transcript.system_prompt {
        let _ = write!(
            page,
            "<details class=\"system\"><summary>system prompt</summary><div class=\"text\">{}</div></details>",
            escape(system)
        );
    }
    page.push_str("</header>\n<main>\n");
    page.push_str(&body);
    page.push_str("</main></body></html>\n");
    page
}

fn add(total: &mut Usage, u: &Usage) {
    total.input = total.input.saturating_add(u.input);
    total.output = total.output.saturating_add(u.output);
    total.cache_read = total.cache_read.saturating_add(u.cache_read);
    total.cache_write = total.cache_write.saturating_add(u.cache_write);
    total.total_tokens = total.total_tokens.saturating_add(u.total_tokens);
    total.cost.total += u.cost.total;
}

fn usage_line(u: &Usage) -> String {
    format!(
        "{} tokens (in {}, out {}, cache read {}, cache write {}) · ${:.4}",
        u.total_tokens, u.input, u.output, u.cache_read, u.cache_write, u.cost.total
    )
}

fn user_block(out: &mut String, block: &UserContent) {
    match block {
        UserContent::Text(t) => {
            let _ = write!(out, "<div class=\"text\">{}</div>", escape(&t.text));
        }
        UserContent::Image(image) => image_tag(out, &image.mime_type, &image.data),
    }
}

/// An image as a `data:` URL, when its type is an image type and its data
/// is plain base64 (anything else could break out of the attribute).
fn image_tag(out: &mut String, mime: &str, data: &str) {
    let mime_ok = mime.strip_prefix("image/").is_some_and(|sub| {
        !sub.is_empty() && sub.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    });
    let data_ok = data.chars().all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c));
    if mime_ok && data_ok {
        let _ = write!(out, "<img alt=\"image\" src=\"data:{mime};base64,{data}\">");
    } else {
        let _ =
            write!(out, "<p class=\"label\">[an image of type {}, not shown]</p>", escape(mime));
    }
}

fn tool_call(out: &mut String, call: &llm_core::ToolCall, result: Option<&ToolResultMessage>) {
    let failed = result.is_some_and(|r| r.is_error);
    let args = serde_json::to_string_pretty(&call.arguments).unwrap_or_default();
    let short: String =
        serde_json::to_string(&call.arguments).unwrap_or_default().chars().take(80).collect();
    let mark = match result {
        Some(r) if r.is_error => "✗",
        Some(_) => "✓",
        None => "…",
    };
    let _ = write!(
        out,
        "<details class=\"tool-call{}\" id=\"call-{}\"><summary>{mark} {} {}</summary>\
         <div class=\"label\">arguments</div><pre class=\"args\">{}</pre>",
        if failed { " error" } else { "" },
        escape(&call.id),
        escape(&call.name),
        escape(&short),
        escape(&args)
    );
    match result {
        Some(r) => tool_result(out, r),
        None => out.push_str("<p class=\"label\">no result recorded</p>"),
    }
    out.push_str("</details>");
}

fn tool_result(out: &mut String, r: &ToolResultMessage) {
    let _ = write!(
        out,
        "<div class=\"label\">{} of {}</div>",
        if r.is_error { "error result" } else { "result" },
        escape(&r.tool_name)
    );
    for block in &r.content {
        match block {
            UserContent::Text(t) => {
                let _ = write!(out, "<pre class=\"result\">{}</pre>", escape(&t.text));
            }
            UserContent::Image(image) => image_tag(out, &image.mime_type, &image.data),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_markup_and_controls() {
        assert_eq!(
            escape("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
        assert_eq!(escape("line\nnext\ttab"), "line\nnext\ttab");
        assert!(!escape("\u{1b}[2J\u{0}").contains('\u{1b}'));
    }
}
