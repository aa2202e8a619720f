//! SSE stream generators for benchmarks: bodies of a chosen size in a provider's
//! shape, built from a repeated event so their cost is predictable.

/// An SSE body of `count` events, each `data: ` + `event(i)` + a blank line, then
/// `terminator` verbatim (for example `"data: [DONE]\n\n"`).
pub fn sse_body(count: usize, event: impl Fn(usize) -> String, terminator: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..count {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(event(i).as_bytes());
        out.extend_from_slice(b"\n\n");
    }
    out.extend_from_slice(terminator.as_bytes());
    out
}

/// `total` bytes of JSON-string-safe text split into `fragments` pieces (for tool
/// argument or text deltas); the pieces concatenate to a JSON object
/// `{"payload":"xxx…"}` of about `total` bytes.
pub fn json_argument_fragments(total: usize, fragments: usize) -> Vec<String> {
    let inner = total.saturating_sub(14).max(1);
    let whole = format!("{{\"payload\":\"{}\"}}", "x".repeat(inner));
    let step = whole.len().div_ceil(fragments.max(1)).max(1);
    whole.as_bytes().chunks(step).map(|c| String::from_utf8_lossy(c).into_owned()).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn fragments_join_to_valid_json_of_the_asked_size() {
        for (total, n) in [(100, 7), (10_000, 64), (15, 1)] {
            let parts = json_argument_fragments(total, n);
            assert!(parts.len() <= n.max(1));
            let joined = parts.concat();
            let value: serde_json::Value = serde_json::from_str(&joined).unwrap();
            assert!(value["payload"].is_string());
            assert!(joined.len().abs_diff(total) <= 14, "{} vs {total}", joined.len());
        }
    }

    #[test]
    fn sse_body_decodes_to_the_events() {
        let body = sse_body(3, |i| format!("{{\"i\":{i}}}"), "data: [DONE]\n\n");
        let mut decoder = llm_core::sse::SseDecoder::new();
        let mut events = Vec::new();
        decoder.push(&body, &mut events).unwrap();
        decoder.finish(&mut events).unwrap();
        let data: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, ["{\"i\":0}", "{\"i\":1}", "{\"i\":2}", "[DONE]"]);
    }
}
