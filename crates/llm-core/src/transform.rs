//! Cross-provider transcript transform (OpenClaw `transformMessages`) and the
//! transcript invariant check.
//!
//! Provider crates call [`transform_messages`] on the transcript before
//! serializing it for their API. The transform
//!
//! 0. replaces images with text placeholders when the target model has no image
//!    input (consecutive images collapse into one placeholder);
//! 1. rewrites assistant messages produced by *another* model (different
//!    provider, API or model id): thinking becomes plain text, redacted thinking,
//!    every signature and every opaque provider block are dropped, and
//!    tool-call ids are normalized with the target's [`IdRules`] (the same
//!    mapping is applied to the matching tool results). Messages from the
//!    *same* model are replayed verbatim, signatures and provider blocks
//!    unchanged;
//! 2. drops assistant turns that ended in `error` or `aborted` (and the tool
//!    results that answer their calls), and gives every unanswered tool call a
//!    synthetic `No result provided` error result, placed with the other
//!    results of its turn in call order.
//!
//! [`check_tool_results`] checks the transcript invariant (every tool call has
//! exactly one result, in call order, before the next assistant or user
//! message) without changing anything.

use std::collections::{HashMap, HashSet};

use crate::types::{
    AssistantContent, AssistantMessage, Message, Model, StopReason, TextContent, ToolResultMessage,
    UserContent, UserMessageContent,
};

/// Placeholder that replaces images in user messages for non-vision models.
pub const USER_IMAGE_PLACEHOLDER: &str = "(image omitted: model does not support images)";
/// Placeholder that replaces images in tool results for non-vision models.
pub const TOOL_IMAGE_PLACEHOLDER: &str = "(tool image omitted: model does not support images)";
/// Text of the synthetic error result given to a tool call that has none.
pub const NO_RESULT_TEXT: &str = "No result provided";

// ---------------------------------------------------------------------------
// Tool-call id normalization
// ---------------------------------------------------------------------------

/// What tool-call ids a target API accepts.
#[derive(Debug, Clone, Copy)]
pub struct IdRules {
    /// Maximum length in characters.
    pub max_len: usize,
    /// Minimum length in characters.
    pub min_len: usize,
    /// Whether a character may appear in an id.
    pub allowed: fn(char) -> bool,
}

fn is_alnum_dash(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn is_alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

impl IdRules {
    /// Anthropic / OpenAI style: `[a-zA-Z0-9_-]`, 1..=64 chars.
    pub const ALNUM_DASH_64: IdRules = IdRules { max_len: 64, min_len: 1, allowed: is_alnum_dash };

    /// Mistral: exactly 9 `[a-zA-Z0-9]`.
    pub const MISTRAL_9: IdRules = IdRules { max_len: 9, min_len: 9, allowed: is_alnum };

    /// Whether `id` is valid as is: its length in characters is within
    /// `min_len..=max_len` and every character is allowed.
    pub fn accepts(&self, id: &str) -> bool {
        let mut len = 0usize;
        for c in id.chars() {
            if !(self.allowed)(c) {
                return false;
            }
            len += 1;
        }
        len >= self.min_len && len <= self.max_len
    }
}

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// 64-bit FNV-1a followed by the murmur3 finalizer, so that the low digits used
/// by short encodings are well mixed. Stable across processes and platforms.
fn stable_hash(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// Fixed-width encoding of `value` with `width` digits of `digits` (most
/// significant first; the value is reduced modulo `digits.len()^width`).
fn encode_fixed(mut value: u64, digits: &[char], width: usize) -> String {
    let base = digits.len() as u64;
    let mut out = vec!['0'; width];
    if base < 2 {
        return out.into_iter().collect();
    }
    for slot in out.iter_mut().rev() {
        // `value % base < base == digits.len()`, so the lookup always succeeds.
        if let Some(&d) = digits.get((value % base) as usize) {
            *slot = d;
        }
        value /= base;
    }
    out.into_iter().collect()
}

/// Number of digits in base `base` needed to represent every `u64`.
fn full_width(base: usize) -> usize {
    let base = base as u128;
    let mut width = 0usize;
    let mut reach: u128 = 1;
    while reach <= u128::from(u64::MAX) {
        reach = reach.saturating_mul(base);
        width += 1;
    }
    width
}

/// Maps a tool-call id to one the target accepts.
///
/// Properties (checked by property tests):
/// - **idempotent**: an id the rules accept is returned unchanged, so
///   `normalize(normalize(x)) == normalize(x)`;
/// - **total**: every input, including the empty string, gives an accepted id
///   (for rules whose `allowed` accepts at least two ASCII alphanumerics);
/// - **injective** up to collisions of a 64-bit hash (53 bits for
///   [`IdRules::MISTRAL_9`]): ids that are not accepted become a sanitized,
///   readable prefix of the original (disallowed characters replaced by `_` when
///   `_` is allowed, dropped otherwise, truncated to fit) followed by a
///   fixed-width base-62 hash of the *original* id, so ids that differ only in
///   stripped characters or beyond the truncation length stay distinct. When
///   the hash alone fills `max_len` (Mistral), the whole id is the hash;
/// - **deterministic**: no process-global state; the same input always gives
///   the same output.
pub fn normalize_tool_call_id(id: &str, rules: &IdRules) -> String {
    if rules.accepts(id) {
        return id.to_owned();
    }
    let digits: Vec<char> =
        BASE62.iter().map(|&b| char::from(b)).filter(|&c| (rules.allowed)(c)).collect();
    let hash = stable_hash(id);
    let full = full_width(digits.len().max(2));
    let hash_width = full.max(rules.min_len).min(rules.max_len);
    let suffix = encode_fixed(hash, &digits, hash_width);

    // Room for a readable prefix (plus a `_` separator when allowed).
    let underscore = (rules.allowed)('_');
    let sep_len = usize::from(underscore);
    let room = rules.max_len.saturating_sub(hash_width + sep_len);
    let mut prefix = String::new();
    if room > 0 {
        let mut len = 0usize;
        for c in id.chars() {
            if len == room {
                break;
            }
            if (rules.allowed)(c) {
                prefix.push(c);
                len += 1;
            } else if underscore {
                prefix.push('_');
                len += 1;
            }
        }
    }
    let mut out = String::with_capacity(prefix.len() + sep_len + suffix.len());
    out.push_str(&prefix);
    if !prefix.is_empty() && underscore {
        out.push('_');
    }
    out.push_str(&suffix);
    out
}

// ---------------------------------------------------------------------------
// transform_messages
// ---------------------------------------------------------------------------

fn is_same_model(message: &AssistantMessage, target: &Model) -> bool {
    message.provider == target.provider && message.api == target.api && message.model == target.id
}

/// Replaces images by `placeholder`; consecutive images (and an image right
/// after an existing placeholder text) collapse into one placeholder.
fn replace_images(content: &[UserContent], placeholder: &str) -> Vec<UserContent> {
    let mut out = Vec::with_capacity(content.len());
    let mut previous_placeholder = false;
    for block in content {
        match block {
            UserContent::Image(_) => {
                if !previous_placeholder {
                    out.push(UserContent::text(placeholder));
                }
                previous_placeholder = true;
            }
            UserContent::Text(t) => {
                previous_placeholder = t.text == placeholder;
                out.push(block.clone());
            }
        }
    }
    out
}

/// Pass 0: image placeholders for a non-vision target.
fn downgrade_images(message: &Message) -> Message {
    match message {
        Message::User(user) => match &user.content {
            UserMessageContent::Blocks(blocks) => {
                let mut user = user.clone();
                user.content =
                    UserMessageContent::Blocks(replace_images(blocks, USER_IMAGE_PLACEHOLDER));
                Message::User(user)
            }
            UserMessageContent::Text(_) => message.clone(),
        },
        Message::ToolResult(result) => {
            let mut result = result.clone();
            result.content = replace_images(&result.content, TOOL_IMAGE_PLACEHOLDER);
            Message::ToolResult(result)
        }
        Message::Assistant(_) => message.clone(),
    }
}

/// Pass 1 for one assistant message. Records the id mapping of every call.
fn transform_assistant(
    message: &AssistantMessage,
    target: &Model,
    id_rules: Option<&IdRules>,
    id_map: &mut HashMap<String, String>,
) -> AssistantMessage {
    let same = is_same_model(message, target);
    let mut content = Vec::with_capacity(message.content.len());
    for block in &message.content {
        match block {
            AssistantContent::Thinking(thinking) => {
                if thinking.redacted {
                    if same {
                        content.push(block.clone());
                    }
                    continue;
                }
                let signed = thinking.thinking_signature.as_deref().is_some_and(|s| !s.is_empty());
                if same && signed {
                    content.push(block.clone());
                    continue;
                }
                if thinking.thinking.trim().is_empty() {
                    continue;
                }
                if same {
                    content.push(block.clone());
                } else {
                    content.push(AssistantContent::Text(TextContent {
                        text: thinking.thinking.clone(),
                        text_signature: None,
                    }));
                }
            }
            AssistantContent::Text(text) => {
                if same {
                    content.push(block.clone());
                } else {
                    content.push(AssistantContent::Text(TextContent {
                        text: text.text.clone(),
                        text_signature: None,
                    }));
                }
            }
            AssistantContent::ProviderContent(_) => {
                // Opaque blocks only mean something to the model that produced them.
                if same {
                    content.push(block.clone());
                }
            }
            AssistantContent::ToolCall(call) => {
                let mut call = call.clone();
                if !same {
                    call.thought_signature = None;
                    if let Some(rules) = id_rules {
                        let normalized = normalize_tool_call_id(&call.id, rules);
                        id_map.insert(call.id.clone(), normalized.clone());
                        call.id = normalized;
                    } else {
                        id_map.remove(&call.id);
                    }
                } else {
                    // A later same-model call with this id answers to itself,
                    // whatever an earlier other-model call mapped it to.
                    id_map.remove(&call.id);
                }
                content.push(AssistantContent::ToolCall(call));
            }
        }
    }
    let mut out = message.clone();
    out.content = content;
    out
}

/// The tool calls of a kept assistant turn and the results seen so far.
struct PendingTurn {
    calls: Vec<(String, String)>,
    results: Vec<ToolResultMessage>,
    timestamp: u64,
}

impl PendingTurn {
    /// Emits the buffered results in call order, a synthetic error result for
    /// every unanswered call, then any other buffered result (duplicates and
    /// orphans, unchanged) except those answering a dropped turn.
    fn flush(self, dropped_ids: &HashSet<String>, out: &mut Vec<Message>) {
        let mut results: Vec<Option<ToolResultMessage>> =
            self.results.into_iter().map(Some).collect();
        for (id, name) in &self.calls {
            let found = results
                .iter_mut()
                .find(|slot| slot.as_ref().is_some_and(|r| &r.tool_call_id == id))
                .and_then(Option::take);
            match found {
                Some(result) => out.push(Message::ToolResult(result)),
                None => out.push(Message::ToolResult(ToolResultMessage {
                    tool_call_id: id.clone(),
                    tool_name: name.clone(),
                    content: vec![UserContent::text(NO_RESULT_TEXT)],
                    details: None,
                    is_error: true,
                    timestamp: self.timestamp,
                })),
            }
        }
        for result in results.into_iter().flatten() {
            if dropped_ids.contains(&result.tool_call_id) {
                tracing::debug!(tool_call_id = %result.tool_call_id, "dropping tool result of a dropped assistant turn");
                continue;
            }
            out.push(Message::ToolResult(result));
        }
    }
}

/// OpenClaw `transformMessages`: prepares a transcript for `target`.
///
/// - Pass 0: if `target` has no image input, images in user messages become
///   [`USER_IMAGE_PLACEHOLDER`] and in tool results [`TOOL_IMAGE_PLACEHOLDER`];
///   consecutive images collapse into one placeholder.
/// - Pass 1: assistant messages from the same model (same provider, API and
///   model id) keep thinking, redacted thinking and every signature verbatim;
///   only thinking with neither text nor signature is dropped. From another
///   model: thinking becomes a plain text block (empty thinking is dropped),
///   redacted thinking is dropped, `text_signature` and `thought_signature`
///   are dropped, and when `id_rules` is given tool-call ids are normalized
///   with [`normalize_tool_call_id`] and the mapping is applied to the tool
///   results that answer them. Same-model ids are never normalized here (a
///   provider that needs every id normalized calls
///   [`normalize_tool_call_id`] itself).
/// - Pass 2: assistant messages that stopped with `error` or `aborted` are
///   dropped, together with the tool results answering their calls (OpenClaw
///   keeps those; an answer without its call is rejected by every API). The
///   tool results after each kept assistant turn are put in call order, and
///   every call without a result gets a synthetic [`NO_RESULT_TEXT`] result
///   (`is_error`, timestamp of its assistant message) before the next
///   assistant or user message, or at the end. Other results without a
///   matching call pass through unchanged.
///
/// The output is a pure function of the input: no clock, no global state.
pub fn transform_messages(
    messages: &[Message],
    target: &Model,
    id_rules: Option<&IdRules>,
) -> Vec<Message> {
    let vision = target.supports_images();

    // Passes 0 and 1.
    let mut id_map: HashMap<String, String> = HashMap::new();
    let mut transformed = Vec::with_capacity(messages.len());
    for message in messages {
        // An assistant message is rebuilt from the original (one copy, not two).
        if let Message::Assistant(assistant) = message {
            transformed.push(transform_assistant(assistant, target, id_rules, &mut id_map).into());
            continue;
        }
        let message = if vision { message.clone() } else { downgrade_images(message) };
        let message = match message {
            Message::ToolResult(mut result) => {
                if let Some(mapped) = id_map.get(&result.tool_call_id) {
                    result.tool_call_id = mapped.clone();
                }
                Message::ToolResult(result)
            }
            other => other,
        };
        transformed.push(message);
    }

    // Pass 2.
    let mut out = Vec::with_capacity(transformed.len());
    let mut pending: Option<PendingTurn> = None;
    let mut dropped_ids: HashSet<String> = HashSet::new();
    for message in transformed {
        match message {
            Message::Assistant(assistant) => {
                if matches!(assistant.stop_reason, StopReason::Error | StopReason::Aborted) {
                    // An errored turn is invisible: results of the previous
                    // turn may still follow it.
                    dropped_ids.extend(assistant.tool_calls().map(|c| c.id.clone()));
                    continue;
                }
                if let Some(turn) = pending.take() {
                    turn.flush(&dropped_ids, &mut out);
                }
                dropped_ids.clear();
                let calls: Vec<(String, String)> =
                    assistant.tool_calls().map(|c| (c.id.clone(), c.name.clone())).collect();
                if !calls.is_empty() {
                    pending = Some(PendingTurn {
                        calls,
                        results: Vec::new(),
                        timestamp: assistant.timestamp,
                    });
                }
                out.push(Message::Assistant(assistant));
            }
            Message::ToolResult(result) => {
                if let Some(turn) = pending.as_mut() {
                    turn.results.push(result);
                } else if dropped_ids.contains(&result.tool_call_id) {
                    tracing::debug!(tool_call_id = %result.tool_call_id, "dropping tool result of a dropped assistant turn");
                } else {
                    out.push(Message::ToolResult(result));
                }
            }
            Message::User(user) => {
                if let Some(turn) = pending.take() {
                    turn.flush(&dropped_ids, &mut out);
                }
                dropped_ids.clear();
                out.push(Message::User(user));
            }
        }
    }
    if let Some(turn) = pending.take() {
        turn.flush(&dropped_ids, &mut out);
    }
    out
}

// ---------------------------------------------------------------------------
// check_tool_results
// ---------------------------------------------------------------------------

/// A breach of the transcript invariant found by [`check_tool_results`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranscriptViolation {
    /// A tool call has no result before the next assistant or user message (or the end).
    #[error("tool call \"{call_id}\" ({tool_name}) has no tool result")]
    MissingResult {
        /// The call's id.
        call_id: String,
        /// The called tool.
        tool_name: String,
    },
    /// A tool call has more than one result.
    #[error("tool call \"{call_id}\" has more than one tool result")]
    DuplicateResult {
        /// The call's id.
        call_id: String,
    },
    /// A tool result answers no call of the preceding assistant message.
    #[error("tool result \"{call_id}\" answers no tool call of the preceding assistant message")]
    OrphanResult {
        /// The id the result names.
        call_id: String,
    },
    /// A tool result comes after the result of a later call.
    #[error("tool result \"{call_id}\" is out of call order")]
    OutOfOrder {
        /// The call's id.
        call_id: String,
    },
}

struct OpenCall<'a> {
    id: &'a str,
    name: &'a str,
    answered: bool,
}

fn close_turn(open: &mut Vec<OpenCall<'_>>, violations: &mut Vec<TranscriptViolation>) {
    for call in open.drain(..) {
        if !call.answered {
            violations.push(TranscriptViolation::MissingResult {
                call_id: call.id.to_owned(),
                tool_name: call.name.to_owned(),
            });
        }
    }
}

/// Checks the transcript invariant: every tool call in an
/// assistant message is followed by exactly one tool result (matching id)
/// before the next assistant or user message, in call order, and there is no
/// tool result without a call. Assistant messages of every stop reason count.
///
/// Returns every violation found, in transcript order (empty = ok).
pub fn check_tool_results(messages: &[Message]) -> Vec<TranscriptViolation> {
    let mut violations = Vec::new();
    let mut open: Vec<OpenCall<'_>> = Vec::new();
    // Index of the latest call answered in the current turn.
    let mut last_answered: Option<usize> = None;
    for message in messages {
        match message {
            Message::Assistant(assistant) => {
                close_turn(&mut open, &mut violations);
                last_answered = None;
                open.extend(assistant.tool_calls().map(|c| OpenCall {
                    id: c.id.as_str(),
                    name: c.name.as_str(),
                    answered: false,
                }));
            }
            Message::User(_) => {
                close_turn(&mut open, &mut violations);
                last_answered = None;
            }
            Message::ToolResult(result) => {
                let id = result.tool_call_id.as_str();
                let unanswered = open.iter().position(|c| c.id == id && !c.answered);
                match unanswered {
                    Some(index) => {
                        if let Some(call) = open.get_mut(index) {
                            call.answered = true;
                        }
                        if last_answered.is_some_and(|last| index < last) {
                            violations
                                .push(TranscriptViolation::OutOfOrder { call_id: id.to_owned() });
                        }
                        last_answered = Some(last_answered.map_or(index, |last| last.max(index)));
                    }
                    None if open.iter().any(|c| c.id == id) => {
                        violations
                            .push(TranscriptViolation::DuplicateResult { call_id: id.to_owned() });
                    }
                    None => violations
                        .push(TranscriptViolation::OrphanResult { call_id: id.to_owned() }),
                }
            }
        }
    }
    close_turn(&mut open, &mut violations);
    violations
}
