//! MCP tool results to agent tool results.

use agent_core::{ToolError, ToolOutput};
use base64::Engine as _;
use llm_core::{ImageContent, UserContent};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::{Value, json};

use crate::config::McpLimits;

/// Text of a result with no content at all (providers reject empty results).
pub const EMPTY_RESULT_TEXT: &str = "(the tool returned no content)";

/// Maps one `tools/call` result: text and images pass through; an embedded
/// resource becomes text headed by its URI (an image blob stays an image);
/// audio and binary blobs are described, not sent; `structuredContent` goes to
/// `details` (and becomes the text when there is no other content); `isError`
/// makes the call an error result whose text is the content's text. An error
/// result is text only, so nothing else is dropped from it silently: an image
/// is described in it, and `structuredContent` follows the text.
///
/// The default [`McpLimits`] apply; see [`map_call_result_with_limits`].
pub fn map_call_result(
    server_id: &str,
    tool_name: &str,
    result: CallToolResult,
) -> Result<ToolOutput, ToolError> {
    map_call_result_with_limits(server_id, tool_name, result, &McpLimits::default())
}

/// [`map_call_result`] within `limits`: the text over
/// [`McpLimits::max_result_text_bytes`] is cut and a marker says how much; an
/// image is kept only when it is png, jpeg, gif or webp (by its bytes; a
/// wrong MIME type is corrected), valid base64 and at most
/// [`McpLimits::max_image_bytes`], else it is described in text.
pub fn map_call_result_with_limits(
    server_id: &str,
    tool_name: &str,
    result: CallToolResult,
    limits: &McpLimits,
) -> Result<ToolOutput, ToolError> {
    let mut content = Vec::with_capacity(result.content.len());
    for block in result.content {
        map_block(block, &mut content, limits);
    }
    let structured_is_text = content.is_empty();
    if structured_is_text && let Some(structured) = &result.structured_content {
        content.push(UserContent::text(structured.to_string()));
    }
    if result.is_error == Some(true) {
        let mut parts: Vec<String> = content
            .iter()
            .map(|c| match c {
                UserContent::Text(t) => t.text.clone(),
                UserContent::Image(i) => {
                    format!(
                        "[{} image, {} bytes of base64, not shown in an error]",
                        i.mime_type,
                        i.data.len()
                    )
                }
            })
            .collect();
        if !structured_is_text && let Some(structured) = &result.structured_content {
            parts.push(format!("structuredContent: {structured}"));
        }
        let mut text = parts.join("\n");
        if text.is_empty() {
            text =
                format!("MCP tool `{tool_name}` on server `{server_id}` failed without a message");
        }
        let over = cut_to(&mut text, limits.max_result_text_bytes);
        if over > 0 {
            text.push_str(&cut_marker(over, limits.max_result_text_bytes));
        }
        return Err(ToolError(text));
    }
    bound_text(&mut content, limits.max_result_text_bytes);
    if content.is_empty() {
        content.push(UserContent::text(EMPTY_RESULT_TEXT));
    }
    let mut details = json!({ "mcpServer": server_id, "mcpTool": tool_name });
    if let (Some(structured), Some(obj)) = (result.structured_content, details.as_object_mut()) {
        // `details` is kept with the transcript: bounded like the text.
        let bytes = structured.to_string().len();
        if bytes <= limits.max_result_text_bytes {
            obj.insert("structuredContent".into(), structured);
        } else {
            obj.insert("structuredContentBytes".into(), json!(bytes));
        }
    }
    Ok(ToolOutput { content, details: Some(details), terminate: false })
}

/// Cuts `text` to at most `max` bytes (on a character boundary); returns how
/// many bytes were cut.
fn cut_to(text: &mut String, max: usize) -> usize {
    if text.len() <= max {
        return 0;
    }
    let mut keep = max;
    while !text.is_char_boundary(keep) {
        keep -= 1;
    }
    let cut = text.len() - keep;
    text.truncate(keep);
    cut
}

fn cut_marker(cut: usize, max: usize) -> String {
    format!("\n[{cut} more bytes of text cut: a tool result is limited to {max} bytes]")
}

/// Keeps the text blocks within `max` bytes in all: the block that crosses
/// the bound is cut and ends with a marker, later text blocks are dropped
/// (counted in the marker); images stay.
fn bound_text(content: &mut Vec<UserContent>, max: usize) {
    let mut used = 0usize;
    let mut cut = 0usize;
    let mut marked: Option<usize> = None;
    let mut out = Vec::with_capacity(content.len());
    for block in content.drain(..) {
        match block {
            UserContent::Text(mut t) => {
                if marked.is_some() {
                    cut += t.text.len();
                    continue;
                }
                let over = cut_to(&mut t.text, max - used);
                used += t.text.len();
                if over > 0 {
                    cut += over;
                    marked = Some(out.len());
                }
                out.push(UserContent::Text(t));
            }
            image => out.push(image),
        }
    }
    if let Some(UserContent::Text(t)) = marked.and_then(|i| out.get_mut(i)) {
        t.text.push_str(&cut_marker(cut, max));
    }
    *content = out;
}

/// The image types every provider takes, by their first bytes.
fn sniff_image(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP".as_slice()) {
        Some("image/webp")
    } else {
        None
    }
}

/// The image, or a line saying why it is not sent: a provider rejects the
/// whole request (and every later one that carries it) for a bad image.
fn checked_image(data: String, mime_type: String, limits: &McpLimits) -> UserContent {
    match image_type(&data, &mime_type, limits) {
        Ok(actual) => UserContent::Image(ImageContent { data, mime_type: actual.to_owned() }),
        Err(why) => UserContent::text(format!(
            "[{mime_type} image, {} bytes of base64, not shown: {why}]",
            data.len()
        )),
    }
}

fn image_type(data: &str, mime_type: &str, limits: &McpLimits) -> Result<&'static str, String> {
    if !matches!(mime_type, "image/png" | "image/jpeg" | "image/gif" | "image/webp") {
        return Err("only png, jpeg, gif and webp images are sent".into());
    }
    let too_large = || format!("larger than {} bytes", limits.max_image_bytes);
    // Checked before decoding, so a huge string is not decoded for nothing.
    if data.len() / 4 * 3 > limits.max_image_bytes.saturating_add(3) {
        return Err(too_large());
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|_| "its data is not valid base64".to_owned())?;
    if bytes.len() > limits.max_image_bytes {
        return Err(too_large());
    }
    sniff_image(&bytes).ok_or_else(|| "its bytes are not a png, jpeg, gif or webp image".into())
}

fn map_block(block: ContentBlock, out: &mut Vec<UserContent>, limits: &McpLimits) {
    match block {
        ContentBlock::Text(t) => out.push(UserContent::text(t.text)),
        ContentBlock::Image(i) => out.push(checked_image(i.data, i.mime_type, limits)),
        ContentBlock::Audio(a) => out.push(UserContent::text(format!(
            "[audio ({}, {} bytes of base64) not shown]",
            a.mime_type,
            a.data.len()
        ))),
        ContentBlock::Resource(r) => match r.resource {
            ResourceContents::TextResourceContents { uri, mime_type, text, .. } => {
                let mime = mime_type.map(|m| format!(" ({m})")).unwrap_or_default();
                out.push(UserContent::text(format!("Resource {uri}{mime}:\n{text}")));
            }
            ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => {
                match mime_type {
                    Some(mime) if mime.starts_with("image/") => {
                        out.push(UserContent::text(format!("Resource {uri} ({mime}):")));
                        out.push(checked_image(blob, mime, limits));
                    }
                    mime => out.push(UserContent::text(format!(
                        "Resource {uri} ({}, {} bytes of base64) not shown",
                        mime.as_deref().unwrap_or("binary"),
                        blob.len()
                    ))),
                }
            }
            // Non-exhaustive: a future kind is described by its JSON.
            #[allow(unreachable_patterns)]
            other => out.push(UserContent::text(
                serde_json::to_value(&other).unwrap_or(Value::Null).to_string(),
            )),
        },
        ContentBlock::ResourceLink(link) => {
            let mut text = format!("Resource link: {}", link.uri);
            if !link.name.is_empty() {
                text.push_str(&format!(" ({})", link.name));
            }
            if let Some(d) = &link.description {
                text.push_str(&format!(": {d}"));
            }
            out.push(UserContent::text(text));
        }
        // `ContentBlock` is non-exhaustive: a future kind is described by its JSON.
        #[allow(unreachable_patterns)]
        other => out.push(UserContent::text(
            serde_json::to_value(&other).unwrap_or(Value::Null).to_string(),
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic, reason = "tests")]
mod tests {
    use super::*;

    fn result(v: Value) -> CallToolResult {
        serde_json::from_value(v).unwrap()
    }

    fn text(c: &UserContent) -> &str {
        match c {
            UserContent::Text(t) => &t.text,
            UserContent::Image(_) => panic!("image"),
        }
    }

    #[test]
    fn every_content_kind_maps() {
        let r = result(json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "iVBORw0K", "mimeType": "image/png"},
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "A"}},
                {"type": "resource", "resource": {"uri": "demo://b", "mimeType": "application/zip", "blob": "UEsD"}},
                {"type": "resource", "resource": {"uri": "demo://c.png", "mimeType": "image/png", "blob": "iVBORw0K"}},
                {"type": "resource_link", "uri": "demo://d", "name": "d", "description": "a doc"}
            ],
            "structuredContent": {"n": 1}
        }));
        let out = map_call_result("s", "t", r).unwrap();
        assert_eq!(text(&out.content[0]), "hello");
        assert_eq!(
            out.content[1],
            UserContent::Image(ImageContent {
                data: "iVBORw0K".into(),
                mime_type: "image/png".into()
            })
        );
        assert_eq!(text(&out.content[2]), "[audio (audio/wav, 4 bytes of base64) not shown]");
        assert_eq!(text(&out.content[3]), "Resource file:///a.txt (text/plain):\nA");
        assert_eq!(
            text(&out.content[4]),
            "Resource demo://b (application/zip, 4 bytes of base64) not shown"
        );
        assert_eq!(text(&out.content[5]), "Resource demo://c.png (image/png):");
        assert!(matches!(out.content[6], UserContent::Image(_)));
        assert_eq!(text(&out.content[7]), "Resource link: demo://d (d): a doc");
        assert_eq!(
            out.details,
            Some(json!({"mcpServer": "s", "mcpTool": "t", "structuredContent": {"n": 1}}))
        );
    }

    #[test]
    fn is_error_is_an_error_result() {
        let r =
            result(json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}));
        assert_eq!(map_call_result("s", "t", r), Err(ToolError("no such file".into())));
        let r = result(json!({"content": [], "isError": true}));
        assert!(map_call_result("s", "t", r).unwrap_err().0.contains("failed without a message"));
    }

    #[test]
    fn an_error_result_keeps_what_it_cannot_carry_as_text() {
        let r = result(json!({
            "content": [
                {"type": "text", "text": "render failed"},
                {"type": "image", "data": "iVBORw0K", "mimeType": "image/png"}
            ],
            "structuredContent": {"line": 3},
            "isError": true
        }));
        let ToolError(text) = map_call_result("s", "t", r).unwrap_err();
        assert_eq!(
            text,
            "render failed\n[image/png image, 8 bytes of base64, not shown in an error]\nstructuredContent: {\"line\":3}"
        );
        // Structured content alone is the text, once.
        let r = result(json!({"content": [], "structuredContent": {"line": 3}, "isError": true}));
        assert_eq!(map_call_result("s", "t", r), Err(ToolError("{\"line\":3}".into())));
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        /// Against the joined text cut at the last character boundary within
        /// the budget: whole blocks before the cut, the marker after it,
        /// images kept in order.
        #[test]
        fn text_is_cut_at_the_budget(
            blocks in proptest::collection::vec(
                proptest::prop_oneof![
                    "[a-zé€😀 ]{0,12}".prop_map(Some),
                    proptest::prelude::Just(None),
                ],
                0..8,
            ),
            max in 0usize..60,
        ) {
            let content: Vec<Value> = blocks
                .iter()
                .map(|b| match b {
                    Some(t) => json!({"type": "text", "text": t}),
                    None => json!({"type": "image", "data": "iVBORw0K", "mimeType": "image/png"}),
                })
                .collect();
            let limits = McpLimits { max_result_text_bytes: max, ..McpLimits::default() };
            let out =
                map_call_result_with_limits("s", "t", result(json!({"content": content})), &limits)
                    .unwrap();
            let joined: String = blocks.iter().flatten().map(String::as_str).collect();
            let expected = if joined.len() <= max {
                joined.clone()
            } else {
                let keep = (0..=max).rev().find(|&i| joined.is_char_boundary(i)).unwrap();
                format!("{}{}", &joined[..keep], cut_marker(joined.len() - keep, max))
            };
            let texts: String = out
                .content
                .iter()
                .filter_map(|c| match c {
                    UserContent::Text(t) if t.text != EMPTY_RESULT_TEXT => Some(t.text.as_str()),
                    _ => None,
                })
                .collect();
            proptest::prop_assert_eq!(texts, expected);
            let images = out.content.iter().filter(|c| matches!(c, UserContent::Image(_))).count();
            proptest::prop_assert_eq!(images, blocks.iter().filter(|b| b.is_none()).count());
        }
    }

    #[test]
    fn large_structured_content_is_left_out_of_details() {
        let limits = McpLimits { max_result_text_bytes: 20, ..McpLimits::default() };
        let r = result(json!({
            "content": [{"type": "text", "text": "ok"}],
            "structuredContent": {"rows": "0123456789012345678901234567890"}
        }));
        let out = map_call_result_with_limits("s", "t", r, &limits).unwrap();
        assert_eq!(
            out.details,
            Some(json!({"mcpServer": "s", "mcpTool": "t", "structuredContentBytes": 42}))
        );
    }

    #[test]
    fn structured_only_and_empty_results_have_text() {
        let r = result(json!({"content": [], "structuredContent": {"sum": 3}}));
        let out = map_call_result("s", "t", r).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(text(&out.content[0])).unwrap(),
            json!({"sum": 3})
        );
        let out = map_call_result("s", "t", result(json!({"content": []}))).unwrap();
        assert_eq!(text(&out.content[0]), EMPTY_RESULT_TEXT);
    }
}
