//! Prompt-cache markers: the `cache_control` value, system blocks split at OpenClaw's
//! cache boundary, and the message-level markers.

use llm_core::CacheRetention;
use serde_json::{Map, Value, json};

use super::{CACHE_BOUNDARY, CLAUDE_CODE_IDENTITY, Settings, WireContent, WireMessage, text_block};

/// The `cache_control` marker for this request, or `None` when caching is off.
pub(super) fn cache_control(retention: CacheRetention, settings: Settings) -> Option<Value> {
    match retention {
        CacheRetention::None => None,
        CacheRetention::Short => Some(json!({ "type": "ephemeral" })),
        CacheRetention::Long if settings.long_cache_retention => {
            Some(json!({ "type": "ephemeral", "ttl": "1h" }))
        }
        CacheRetention::Long => Some(json!({ "type": "ephemeral" })),
    }
}

pub(super) fn count_markers(blocks: &[Map<String, Value>]) -> usize {
    blocks.iter().filter(|b| b.contains_key("cache_control")).count()
}

pub(super) fn with_cache(
    mut block: Map<String, Value>,
    cache: Option<&Value>,
) -> Map<String, Value> {
    if let Some(c) = cache {
        block.insert("cache_control".into(), c.clone());
    }
    block
}

/// System blocks: the Claude Code identity (OAuth), then the prompt, split at OpenClaw's cache
/// boundary when caching (the stable prefix carries the marker, the dynamic suffix does not).
pub(super) fn system_blocks(
    prompt: Option<&str>,
    oauth: bool,
    cache: Option<&Value>,
) -> Vec<Map<String, Value>> {
    let mut blocks = Vec::new();
    if oauth {
        blocks.push(with_cache(text_block(CLAUDE_CODE_IDENTITY), cache));
    }
    let Some(prompt) = prompt.filter(|p| !p.is_empty()) else { return blocks };
    if cache.is_none() {
        blocks.push(text_block(&prompt.replace(CACHE_BOUNDARY, "\n")));
        return blocks;
    }
    match prompt.find(CACHE_BOUNDARY) {
        None => blocks.push(with_cache(text_block(prompt), cache)),
        Some(at) => {
            let prefix = prompt.get(..at).unwrap_or("").trim_end();
            let suffix = prompt.get(at + CACHE_BOUNDARY.len()..).unwrap_or("").trim_start();
            let before = blocks.len();
            if !prefix.is_empty() {
                blocks.push(with_cache(text_block(prefix), cache));
            }
            if !suffix.is_empty() {
                blocks.push(text_block(suffix));
            }
            if blocks.len() == before {
                blocks.push(text_block(""));
            }
        }
    }
    blocks
}

/// OpenClaw's message-level markers: the last user text/image block, plus the most recent
/// `tool_result` after it when the budget allows (only that one when the budget is 1).
pub(super) fn place_message_markers(messages: &mut [WireMessage], cache: &Value, budget: usize) {
    if budget == 0 {
        return;
    }
    let mut fallback: Option<(usize, usize)> = None;
    let mut target: Option<(usize, usize)> = None;
    'outer: for mi in (0..messages.len()).rev() {
        let Some(message) = messages.get_mut(mi) else { continue };
        if message.role != "user" {
            continue;
        }
        match &mut message.content {
            WireContent::Blocks(blocks) => {
                for bi in (0..blocks.len()).rev() {
                    let kind = blocks.get(bi).and_then(|b| b.get("type")).and_then(Value::as_str);
                    match kind {
                        Some("text" | "image") => {
                            target = Some((mi, bi));
                            break 'outer;
                        }
                        Some("tool_result") if fallback.is_none() => fallback = Some((mi, bi)),
                        _ => {}
                    }
                }
            }
            WireContent::Text(text) => {
                if !(fallback.is_some() && budget == 1) {
                    let text = std::mem::take(text);
                    message.content = WireContent::Blocks(vec![text_block(&text)]);
                }
                target = Some((mi, 0));
                break 'outer;
            }
        }
    }
    let mut mark = |(mi, bi): (usize, usize)| {
        if let Some(WireContent::Blocks(blocks)) = messages.get_mut(mi).map(|m| &mut m.content)
            && let Some(block) = blocks.get_mut(bi)
        {
            block.insert("cache_control".into(), cache.clone());
        }
    };
    match (target, fallback) {
        (Some(_), Some(f)) if budget == 1 => mark(f),
        (Some(t), Some(f)) => {
            mark(t);
            mark(f);
        }
        (Some(t), None) => mark(t),
        (None, Some(f)) => mark(f),
        (None, None) => {}
    }
}
