//! Cross-provider transform (OpenClaw's `transformMessages`), tool-call id normalization and the
//! transcript invariant check.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use std::collections::HashSet;

use llm_core::transform::{
    IdRules, NO_RESULT_TEXT, TOOL_IMAGE_PLACEHOLDER, TranscriptViolation, USER_IMAGE_PLACEHOLDER,
    check_tool_results, normalize_tool_call_id, transform_messages,
};
use llm_core::*;
use proptest::prelude::*;
use serde_json::json;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn model(provider: &str, api_id: &str, id: &str, images: bool) -> Model {
    let mut input = vec![InputModality::Text];
    if images {
        input.push(InputModality::Image);
    }
    Model {
        id: id.into(),
        api: api_id.into(),
        provider: provider.into(),
        input,
        ..Model::default()
    }
}

fn claude() -> Model {
    model("anthropic", "anthropic-messages", "claude-sonnet-4-5", true)
}

fn gpt() -> Model {
    model("openai", "openai-responses", "gpt-5", true)
}

fn assistant(from: &Model, content: Vec<AssistantContent>, stop: StopReason) -> Message {
    Message::Assistant(Box::new(AssistantMessage {
        content,
        api: from.api.clone(),
        provider: from.provider.clone(),
        model: from.id.clone(),
        stop_reason: stop,
        timestamp: 42,
        ..AssistantMessage::default()
    }))
}

fn call(id: &str, name: &str) -> AssistantContent {
    AssistantContent::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: json!({}),
        thought_signature: None,
        arguments_incomplete: false,
    })
}

fn signed_call(id: &str, signature: &str) -> AssistantContent {
    AssistantContent::ToolCall(ToolCall {
        id: id.into(),
        name: "read".into(),
        arguments: json!({"path": "a"}),
        thought_signature: Some(signature.into()),
        arguments_incomplete: false,
    })
}

fn text(t: &str, signature: Option<&str>) -> AssistantContent {
    AssistantContent::Text(TextContent {
        text: t.into(),
        text_signature: signature.map(Into::into),
    })
}

fn thinking(t: &str, signature: Option<&str>, redacted: bool) -> AssistantContent {
    AssistantContent::Thinking(ThinkingContent {
        thinking: t.into(),
        thinking_signature: signature.map(Into::into),
        redacted,
    })
}

fn result(id: &str, name: &str) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: name.into(),
        content: vec![UserContent::text(format!("result of {id}"))],
        details: None,
        is_error: false,
        timestamp: 7,
    })
}

fn image() -> UserContent {
    UserContent::Image(ImageContent { data: "aGk=".into(), mime_type: "image/png".into() })
}

fn as_assistant(m: &Message) -> &AssistantMessage {
    match m {
        Message::Assistant(a) => a,
        other => panic!("expected assistant, got {other:?}"),
    }
}

fn as_result(m: &Message) -> &ToolResultMessage {
    match m {
        Message::ToolResult(r) => r,
        other => panic!("expected tool result, got {other:?}"),
    }
}

/// A compact shape of a transcript: `A`, `U`, `R:<id>` / `S:<id>` (synthetic).
fn shape(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m {
            Message::User(_) => "U".to_owned(),
            Message::Assistant(_) => "A".to_owned(),
            Message::ToolResult(r) if r.is_error && r.text() == NO_RESULT_TEXT => {
                format!("S:{}", r.tool_call_id)
            }
            Message::ToolResult(r) => format!("R:{}", r.tool_call_id),
        })
        .collect()
}

// ---------------------------------------------------------------------------
// normalize_tool_call_id: examples
// ---------------------------------------------------------------------------

#[test]
fn accepted_ids_are_unchanged() {
    for id in ["call_abc123", "toolu_01AbCdEf", "a", "x-y_z", &"a".repeat(64)] {
        assert_eq!(normalize_tool_call_id(id, &IdRules::ALNUM_DASH_64), id);
    }
    for id in ["abcDEF123", "000000000"] {
        assert_eq!(normalize_tool_call_id(id, &IdRules::MISTRAL_9), id);
    }
}

#[test]
fn rules_accept() {
    let r = IdRules::ALNUM_DASH_64;
    assert!(r.accepts("call_1"));
    assert!(!r.accepts(""));
    assert!(!r.accepts("call|1"));
    assert!(!r.accepts(&"a".repeat(65)));
    assert!(!r.accepts("é"));
    let m = IdRules::MISTRAL_9;
    assert!(m.accepts("abc123XYZ"));
    assert!(!m.accepts("abc123XY"));
    assert!(!m.accepts("abc_23XYZ"));
    assert!(!m.accepts("abc123XYZ0"));
}

#[test]
fn responses_composite_id_keeps_a_readable_prefix() {
    let id = "call_abc|fc_0123456789";
    let out = normalize_tool_call_id(id, &IdRules::ALNUM_DASH_64);
    assert!(IdRules::ALNUM_DASH_64.accepts(&out), "{out}");
    assert!(out.starts_with("call_abc_fc_0123456789_"), "{out}");
    // Differs from the id where `|` was already `_`.
    assert_ne!(out, normalize_tool_call_id("call_abc_fc_0123456789", &IdRules::ALNUM_DASH_64));
}

#[test]
fn long_ids_are_truncated_with_a_hash_suffix() {
    let base = "x".repeat(200);
    let a = normalize_tool_call_id(&format!("{base}a"), &IdRules::ALNUM_DASH_64);
    let b = normalize_tool_call_id(&format!("{base}b"), &IdRules::ALNUM_DASH_64);
    assert_eq!(a.len(), 64);
    assert!(a.starts_with("xxxx"));
    assert_ne!(a, b);
    // 65 chars: just over the limit.
    let c = normalize_tool_call_id(&"y".repeat(65), &IdRules::ALNUM_DASH_64);
    assert!(IdRules::ALNUM_DASH_64.accepts(&c));
    assert_ne!(c, "y".repeat(64));
}

#[test]
fn empty_and_odd_ids_are_total() {
    for id in ["", "null", "ns.bash:0", "函数调用", "a b", "|", "\u{0}"] {
        for rules in [IdRules::ALNUM_DASH_64, IdRules::MISTRAL_9] {
            let out = normalize_tool_call_id(id, &rules);
            assert!(rules.accepts(&out), "{id:?} -> {out:?}");
        }
    }
    assert_eq!(normalize_tool_call_id("", &IdRules::MISTRAL_9).len(), 9);
}

#[test]
fn normalization_is_stable_across_runs() {
    // Pinned values: changing the hash would change ids in stored transcripts
    // and break prompt-cache prefixes.
    let a = normalize_tool_call_id("call_abc|fc_xyz", &IdRules::ALNUM_DASH_64);
    let m = normalize_tool_call_id("call_abc|fc_xyz", &IdRules::MISTRAL_9);
    assert_eq!(a, PINNED_ALNUM);
    assert_eq!(m, PINNED_MISTRAL);
}

const PINNED_ALNUM: &str = "call_abc_fc_xyz_3FP4EaF4vll";
const PINNED_MISTRAL: &str = "P4EaF4vll";

#[test]
fn mistral_ids_are_the_whole_hash() {
    let a = normalize_tool_call_id("call_abcdefghijklmnop", &IdRules::MISTRAL_9);
    let b = normalize_tool_call_id("call_abcdefghijklmnoq", &IdRules::MISTRAL_9);
    assert_eq!(a.len(), 9);
    assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
    assert_ne!(a, b);
}

#[test]
fn custom_rules_without_underscore() {
    let rules = IdRules { max_len: 40, min_len: 1, allowed: |c| c.is_ascii_alphanumeric() };
    let out = normalize_tool_call_id("call_a|b", &rules);
    assert!(rules.accepts(&out), "{out}");
    assert!(out.starts_with("callab"), "{out}");
}

// ---------------------------------------------------------------------------
// normalize_tool_call_id: properties
// ---------------------------------------------------------------------------

fn id_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        // OpenAI chat completions.
        "call_[A-Za-z0-9]{24}",
        // Anthropic.
        "toolu_01[A-Za-z0-9]{22}",
        // OpenAI Responses composite ids.
        "call_[A-Za-z0-9]{24}\\|fc_[0-9a-f]{40,120}",
        "\\|fc_[0-9a-f]{8}",
        // Google-generated / other runtimes.
        "[a-z_]{1,20}_[0-9]{1,3}",
        "ns\\.[a-z]{1,8}:[0-9]{1,2}",
        // Mistral-shaped.
        "[A-Za-z0-9]{9}",
        // Empty, unicode, anything.
        Just(String::new()),
        "\\PC{0,40}",
        ".{0,80}",
        // Very long.
        "[a-zA-Z0-9_|-]{60,400}",
    ]
}

/// Ids that differ only in a character the rules strip, or only beyond the
/// truncation length.
fn near_duplicates() -> impl Strategy<Value = Vec<String>> {
    ("[a-zA-Z0-9_]{0,80}", "[a-zA-Z0-9_]{0,10}").prop_map(|(head, tail)| {
        let mut ids = Vec::new();
        for sep in ["|", ":", ".", " ", "é", "_", "-", "||", ""] {
            ids.push(format!("{head}{sep}{tail}"));
        }
        let long = "z".repeat(70);
        for suffix in ["", "a", "b", "|", "_"] {
            ids.push(format!("{long}{head}{suffix}"));
        }
        ids
    })
}

fn check_injective(ids: &[String], rules: &IdRules) -> Result<(), TestCaseError> {
    let unique: HashSet<&String> = ids.iter().collect();
    let outputs: HashSet<String> =
        unique.iter().map(|id| normalize_tool_call_id(id, rules)).collect();
    prop_assert_eq!(outputs.len(), unique.len(), "collision in {:?}", unique);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn normalize_is_total_idempotent_and_accepted(id in id_strategy()) {
        for rules in [IdRules::ALNUM_DASH_64, IdRules::MISTRAL_9] {
            let once = normalize_tool_call_id(&id, &rules);
            prop_assert!(rules.accepts(&once), "{:?} -> {:?}", id, once);
            prop_assert_eq!(normalize_tool_call_id(&once, &rules), once.clone());
            if rules.accepts(&id) {
                prop_assert_eq!(&once, &id);
            }
        }
    }

    #[test]
    fn normalize_is_injective_over_corpora(ids in prop::collection::vec(id_strategy(), 1..64)) {
        check_injective(&ids, &IdRules::ALNUM_DASH_64)?;
        check_injective(&ids, &IdRules::MISTRAL_9)?;
    }

    #[test]
    fn normalize_is_injective_on_near_duplicates(ids in near_duplicates()) {
        check_injective(&ids, &IdRules::ALNUM_DASH_64)?;
        check_injective(&ids, &IdRules::MISTRAL_9)?;
    }
}

// ---------------------------------------------------------------------------
// transform_messages: pass 0 (images)
// ---------------------------------------------------------------------------

#[test]
fn non_vision_target_replaces_and_collapses_images() {
    let target = model("openai", "openai-completions", "text-only", false);
    let user = Message::User(UserMessage {
        content: UserMessageContent::Blocks(vec![
            UserContent::text("look"),
            image(),
            image(),
            UserContent::text("and"),
            image(),
        ]),
        timestamp: 1,
    });
    let tool_result = Message::ToolResult(ToolResultMessage {
        tool_call_id: "t1".into(),
        tool_name: "shot".into(),
        content: vec![image(), image(), UserContent::text("done")],
        details: None,
        is_error: false,
        timestamp: 2,
    });
    let from = target.clone();
    let messages =
        vec![user, assistant(&from, vec![call("t1", "shot")], StopReason::ToolUse), tool_result];
    let out = transform_messages(&messages, &target, None);
    let Message::User(u) = &out[0] else { panic!() };
    assert_eq!(
        u.content,
        UserMessageContent::Blocks(vec![
            UserContent::text("look"),
            UserContent::text(USER_IMAGE_PLACEHOLDER),
            UserContent::text("and"),
            UserContent::text(USER_IMAGE_PLACEHOLDER),
        ])
    );
    assert_eq!(
        as_result(&out[2]).content,
        vec![UserContent::text(TOOL_IMAGE_PLACEHOLDER), UserContent::text("done")]
    );
}

#[test]
fn image_after_existing_placeholder_collapses() {
    let target = model("x", "y", "z", false);
    let user = Message::User(UserMessage {
        content: UserMessageContent::Blocks(vec![
            UserContent::text(USER_IMAGE_PLACEHOLDER),
            image(),
        ]),
        timestamp: 1,
    });
    let out = transform_messages(&[user], &target, None);
    let Message::User(u) = &out[0] else { panic!() };
    assert_eq!(
        u.content,
        UserMessageContent::Blocks(vec![UserContent::text(USER_IMAGE_PLACEHOLDER)])
    );
}

#[test]
fn vision_target_keeps_images() {
    let user = Message::User(UserMessage {
        content: UserMessageContent::Blocks(vec![image(), image()]),
        timestamp: 1,
    });
    let out = transform_messages(std::slice::from_ref(&user), &claude(), None);
    assert_eq!(out, vec![user]);
}

// ---------------------------------------------------------------------------
// transform_messages: pass 1 (per message)
// ---------------------------------------------------------------------------

#[test]
fn same_model_replays_verbatim() {
    let target = claude();
    let content = vec![
        thinking("plan", Some("sig-A"), false),
        thinking("", Some("sig-empty"), false),
        thinking("", Some("opaque"), true),
        text("hello", Some("txt-sig")),
        signed_call("call|odd:id", "ts"),
    ];
    let messages = vec![
        Message::user("hi"),
        assistant(&target, content, StopReason::ToolUse),
        result("call|odd:id", "read"),
    ];
    let out = transform_messages(&messages, &target, Some(&IdRules::ALNUM_DASH_64));
    assert_eq!(out, messages, "same model: byte-for-byte, ids not normalized");
}

#[test]
fn same_model_drops_only_empty_unsigned_thinking() {
    let target = claude();
    let messages = vec![assistant(
        &target,
        vec![thinking("  ", None, false), thinking("keep", None, false), text("t", None)],
        StopReason::Stop,
    )];
    let out = transform_messages(&messages, &target, None);
    assert_eq!(as_assistant(&out[0]).content, vec![thinking("keep", None, false), text("t", None)]);
}

#[test]
fn other_model_converts_thinking_and_drops_signatures() {
    let source = gpt();
    let target = claude();
    let messages = vec![
        Message::user("hi"),
        assistant(
            &source,
            vec![
                thinking("reasoning here", Some("rs_item_json"), false),
                thinking("   ", Some("sig"), false),
                thinking("", Some("encrypted"), true),
                thinking("secret", Some("encrypted"), true),
                text("answer", Some("{\"v\":1,\"id\":\"msg_1\"}")),
                signed_call("call_1|fc_1", "thought-sig"),
            ],
            StopReason::ToolUse,
        ),
        result("call_1|fc_1", "read"),
    ];
    let out = transform_messages(&messages, &target, Some(&IdRules::ALNUM_DASH_64));
    let a = as_assistant(&out[1]);
    let new_id = normalize_tool_call_id("call_1|fc_1", &IdRules::ALNUM_DASH_64);
    assert_eq!(
        a.content,
        vec![
            text("reasoning here", None),
            text("answer", None),
            AssistantContent::ToolCall(ToolCall {
                id: new_id.clone(),
                name: "read".into(),
                arguments: json!({"path": "a"}),
                thought_signature: None,
                arguments_incomplete: false,
            }),
        ]
    );
    assert_eq!(as_result(&out[2]).tool_call_id, new_id);
    assert!(check_tool_results(&out).is_empty());
}

#[test]
fn other_model_without_rules_keeps_ids() {
    let messages = vec![
        assistant(&gpt(), vec![signed_call("call_1|fc_1", "sig")], StopReason::ToolUse),
        result("call_1|fc_1", "read"),
    ];
    let out = transform_messages(&messages, &claude(), None);
    let a = as_assistant(&out[0]);
    assert_eq!(a.tool_calls().next().unwrap().id, "call_1|fc_1");
    assert_eq!(a.tool_calls().next().unwrap().thought_signature, None);
    assert_eq!(as_result(&out[1]).tool_call_id, "call_1|fc_1");
}

#[test]
fn same_model_needs_provider_api_and_id() {
    let target = claude();
    for source in [
        model("anthropic", "anthropic-messages", "claude-opus-4-1", true),
        model("openrouter", "anthropic-messages", "claude-sonnet-4-5", true),
        model("anthropic", "openai-completions", "claude-sonnet-4-5", true),
    ] {
        let messages =
            vec![assistant(&source, vec![thinking("x", Some("sig"), false)], StopReason::Stop)];
        let out = transform_messages(&messages, &target, None);
        assert_eq!(as_assistant(&out[0]).content, vec![text("x", None)], "{source:?}");
    }
}

#[test]
fn mistral_rules_map_calls_and_results_consistently() {
    let target = model("mistral", "mistral-conversations", "mistral-large", false);
    let messages = vec![
        Message::user("go"),
        assistant(&gpt(), vec![call("call_a", "f"), call("call_b", "g")], StopReason::ToolUse),
        result("call_a", "f"),
        result("call_b", "g"),
        assistant(&claude(), vec![call("toolu_x", "f")], StopReason::ToolUse),
        result("toolu_x", "f"),
    ];
    let out = transform_messages(&messages, &target, Some(&IdRules::MISTRAL_9));
    assert!(check_tool_results(&out).is_empty(), "{:?}", check_tool_results(&out));
    let ids: Vec<String> = out
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some(r.tool_call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 3);
    for id in &ids {
        assert!(IdRules::MISTRAL_9.accepts(id), "{id}");
    }
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 3);
}

// ---------------------------------------------------------------------------
// transform_messages: pass 2 (dropped turns, orphans)
// ---------------------------------------------------------------------------

#[test]
fn scenario_71_synthetic_result_before_user() {
    let m = claude();
    let messages = vec![
        assistant(&m, vec![call("t1", "a"), call("t2", "b")], StopReason::ToolUse),
        result("t1", "a"),
        Message::user("next"),
    ];
    let out = transform_messages(&messages, &m, None);
    assert_eq!(shape(&out), ["A", "R:t1", "S:t2", "U"]);
    let synthetic = as_result(&out[2]);
    assert_eq!(synthetic.tool_name, "b");
    assert!(synthetic.is_error);
    assert_eq!(synthetic.content, vec![UserContent::text("No result provided")]);
    assert_eq!(synthetic.timestamp, 42, "timestamp of the assistant message, deterministic");
}

#[test]
fn synthetic_results_before_next_assistant_and_at_end() {
    let m = claude();
    let messages = vec![
        assistant(&m, vec![call("t1", "a")], StopReason::ToolUse),
        assistant(&m, vec![text("hm", None), call("t2", "a")], StopReason::ToolUse),
    ];
    let out = transform_messages(&messages, &m, None);
    assert_eq!(shape(&out), ["A", "S:t1", "A", "S:t2"]);
}

#[test]
fn scenario_72_errored_and_aborted_turns_are_dropped_with_their_results() {
    let m = claude();
    let messages = vec![
        Message::user("a"),
        assistant(&m, vec![text("partial", None), call("t9", "x")], StopReason::Error),
        result("t9", "x"),
        Message::user("b"),
        assistant(&m, vec![call("t8", "x")], StopReason::Aborted),
        result("t8", "x"),
        Message::user("c"),
        assistant(&m, vec![text("ok", None)], StopReason::Stop),
    ];
    let out = transform_messages(&messages, &m, None);
    assert_eq!(shape(&out), ["U", "U", "U", "A"]);
    assert!(check_tool_results(&out).is_empty());
}

#[test]
fn errored_turn_between_a_call_and_its_result_is_invisible() {
    let m = claude();
    let messages = vec![
        assistant(&m, vec![call("t1", "a")], StopReason::ToolUse),
        assistant(&m, vec![call("t2", "b")], StopReason::Error),
        result("t2", "b"),
        result("t1", "a"),
    ];
    let out = transform_messages(&messages, &m, None);
    assert_eq!(shape(&out), ["A", "R:t1"]);
}

#[test]
fn results_are_put_in_call_order() {
    let m = claude();
    let messages = vec![
        assistant(&m, vec![call("t1", "a"), call("t2", "b"), call("t3", "c")], StopReason::ToolUse),
        result("t3", "c"),
        result("t1", "a"),
    ];
    let out = transform_messages(&messages, &m, None);
    assert_eq!(shape(&out), ["A", "R:t1", "S:t2", "R:t3"]);
    assert!(check_tool_results(&out).is_empty());
}

#[test]
fn unrelated_orphan_results_pass_through() {
    let m = claude();
    let messages = vec![
        result("ghost", "x"),
        assistant(&m, vec![call("t1", "a")], StopReason::ToolUse),
        result("t1", "a"),
        result("other", "y"),
    ];
    let out = transform_messages(&messages, &m, None);
    assert_eq!(shape(&out), ["R:ghost", "A", "R:t1", "R:other"]);
}

#[test]
fn transform_is_deterministic() {
    let messages = vec![
        Message::user("x"),
        assistant(
            &gpt(),
            vec![thinking("t", None, false), call("call_1|fc", "a"), call("call_2|fc", "b")],
            StopReason::ToolUse,
        ),
        result("call_2|fc", "b"),
    ];
    let a = transform_messages(&messages, &claude(), Some(&IdRules::ALNUM_DASH_64));
    let b = transform_messages(&messages, &claude(), Some(&IdRules::ALNUM_DASH_64));
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
}

#[test]
fn empty_transcript() {
    assert!(transform_messages(&[], &claude(), Some(&IdRules::ALNUM_DASH_64)).is_empty());
    assert!(check_tool_results(&[]).is_empty());
}

/// A random transcript over a small id alphabet, from either model, with any
/// stop reason: after the transform no call lacks a result and results are in
/// call order.
fn transcript_strategy() -> impl Strategy<Value = Vec<Message>> {
    let step = prop_oneof![
        Just(0u8), // user
        Just(1u8), // assistant, tool use
        Just(2u8), // assistant, error
        Just(3u8), // tool result
        Just(3u8),
    ];
    prop::collection::vec((step, 0usize..4, 1usize..4, any::<bool>()), 0..24).prop_map(|steps| {
        let ids = ["call_1|fc", "call_2|fc", "toolu_3", "t 4"];
        steps
            .into_iter()
            .map(|(kind, i, n, other)| {
                let from = if other { gpt() } else { claude() };
                let calls: Vec<AssistantContent> =
                    (0..n).map(|k| call(ids[(i + k) % ids.len()], "f")).collect();
                match kind {
                    0 => Message::user("u"),
                    1 => assistant(&from, calls, StopReason::ToolUse),
                    2 => assistant(&from, calls, StopReason::Error),
                    _ => result(ids[i], "f"),
                }
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn transform_output_has_no_missing_or_out_of_order_results(messages in transcript_strategy()) {
        let out = transform_messages(&messages, &claude(), Some(&IdRules::ALNUM_DASH_64));
        for violation in check_tool_results(&out) {
            let allowed = matches!(
                violation,
                TranscriptViolation::OrphanResult { .. } | TranscriptViolation::DuplicateResult { .. }
            );
            prop_assert!(allowed, "{} in {:?}", violation, shape(&out));
        }
        for m in &out {
            if let Message::Assistant(a) = m {
                prop_assert!(!matches!(a.stop_reason, StopReason::Error | StopReason::Aborted));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// check_tool_results
// ---------------------------------------------------------------------------

#[test]
fn check_accepts_a_well_formed_transcript() {
    let m = claude();
    let messages = vec![
        Message::user("q"),
        assistant(&m, vec![call("t1", "a"), call("t2", "b")], StopReason::ToolUse),
        result("t1", "a"),
        result("t2", "b"),
        assistant(&m, vec![text("done", None)], StopReason::Stop),
        Message::user("q2"),
    ];
    assert_eq!(check_tool_results(&messages), vec![]);
}

#[test]
fn check_reports_every_violation() {
    let m = claude();
    let messages = vec![
        result("early", "x"),
        assistant(&m, vec![call("t1", "a"), call("t2", "b"), call("t3", "c")], StopReason::ToolUse),
        result("t2", "b"),
        result("t1", "a"),
        result("t2", "b"),
        result("zz", "z"),
        Message::user("interrupt"),
        result("t3", "c"),
        assistant(&m, vec![call("t4", "d")], StopReason::Aborted),
    ];
    assert_eq!(
        check_tool_results(&messages),
        vec![
            TranscriptViolation::OrphanResult { call_id: "early".into() },
            TranscriptViolation::OutOfOrder { call_id: "t1".into() },
            TranscriptViolation::DuplicateResult { call_id: "t2".into() },
            TranscriptViolation::OrphanResult { call_id: "zz".into() },
            TranscriptViolation::MissingResult { call_id: "t3".into(), tool_name: "c".into() },
            TranscriptViolation::OrphanResult { call_id: "t3".into() },
            TranscriptViolation::MissingResult { call_id: "t4".into(), tool_name: "d".into() },
        ]
    );
}

#[test]
fn check_handles_repeated_ids_within_one_turn() {
    let m = claude();
    let messages = vec![
        assistant(&m, vec![call("dup", "a"), call("dup", "a")], StopReason::ToolUse),
        result("dup", "a"),
        result("dup", "a"),
    ];
    assert_eq!(check_tool_results(&messages), vec![]);
}

#[test]
fn violation_display() {
    let cases = [
        (
            TranscriptViolation::MissingResult { call_id: "t1".into(), tool_name: "read".into() },
            "tool call \"t1\" (read) has no tool result",
        ),
        (
            TranscriptViolation::DuplicateResult { call_id: "t1".into() },
            "tool call \"t1\" has more than one tool result",
        ),
        (
            TranscriptViolation::OrphanResult { call_id: "t1".into() },
            "tool result \"t1\" answers no tool call of the preceding assistant message",
        ),
        (
            TranscriptViolation::OutOfOrder { call_id: "t1".into() },
            "tool result \"t1\" is out of call order",
        ),
    ];
    for (violation, expected) in cases {
        assert_eq!(violation.to_string(), expected);
    }
}

#[test]
fn opaque_provider_blocks_go_only_to_the_model_that_made_them() {
    let block = AssistantContent::ProviderContent(ProviderContent {
        wire_type: "server_tool_use".into(),
        data: json!({"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"q"}}),
    });
    let messages = vec![
        Message::user("q"),
        assistant(&claude(), vec![block.clone(), text("answer", None)], StopReason::Stop),
    ];
    let same = transform_messages(&messages, &claude(), Some(&IdRules::ALNUM_DASH_64));
    assert_eq!(as_assistant(&same[1]).content, vec![block, text("answer", None)]);
    let other = transform_messages(&messages, &gpt(), Some(&IdRules::ALNUM_DASH_64));
    assert_eq!(as_assistant(&other[1]).content, vec![text("answer", None)]);
    // Never a tool call: nothing waits for a result.
    assert!(check_tool_results(&same).is_empty());
}
