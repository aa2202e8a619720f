//! tool-planner: OpenClaw's planning rules and determinism.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};
use tool_planner::*;

fn d(name: &str) -> ToolDescriptor {
    ToolDescriptor::new(name, format!("{name} tool"), json!({"type": "object", "properties": {}}))
}

fn names<'a>(plan: &ToolPlan<'a>) -> Vec<&'a str> {
    plan.visible.iter().map(|v| v.descriptor.name.as_str()).collect()
}

fn avail(v: Value) -> Option<Availability> {
    Some(Availability::from_json(&v))
}

#[test]
fn sort_key_then_name() {
    let mut a = d("a");
    a.sort_key = Some("z".into());
    let list = [d("b"), a, d("c")];
    let plan = build_tool_plan(&list, &AvailabilityEnv::default()).unwrap();
    assert_eq!(names(&plan), ["b", "c", "a"]);
}

#[test]
fn duplicates_are_rejected_even_when_hidden() {
    let mut hidden = d("x");
    hidden.availability = avail(json!({"kind": "env", "name": "NOPE"}));
    let err = build_tool_plan(&[d("x"), hidden], &AvailabilityEnv::default()).unwrap_err();
    assert_eq!(err.code(), "duplicate-tool-name");
    assert_eq!(err.to_string(), "Duplicate tool descriptor name: x");
}

#[test]
fn visible_tool_needs_an_executor_hidden_one_does_not() {
    let mut no_exec = d("v");
    no_exec.executor = None;
    let err = build_tool_plan(&[no_exec.clone()], &AvailabilityEnv::default()).unwrap_err();
    assert_eq!(err.code(), "missing-executor");
    assert_eq!(err.to_string(), "Visible tool descriptor has no executor ref: v");
    no_exec.availability = avail(json!({"kind": "auth", "providerId": "p"}));
    let list = [no_exec];
    let plan = build_tool_plan(&list, &AvailabilityEnv::default()).unwrap();
    assert_eq!(plan.hidden.len(), 1);
}

#[test]
fn any_of_with_a_malformed_sibling_stays_hidden() {
    let mut t = d("t");
    t.availability = avail(json!({"anyOf": [{"kind": "env", "name": "X"}, {"kind": "bogus"}]}));
    let env =
        AvailabilityEnv { env: [("X".to_owned(), "1".to_owned())].into(), ..Default::default() };
    let list = [t];
    let plan = build_tool_plan(&list, &env).unwrap();
    let diags = &plan.hidden[0].diagnostics;
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0].reason.code(), "unsupported-signal");
}

#[test]
fn all_of_reports_in_expression_order() {
    let mut t = d("t");
    t.availability = avail(
        json!({"allOf": [{"kind": "auth", "providerId": "p1"}, {"kind": "env", "name": "E"}]}),
    );
    let list = [t];
    let plan = build_tool_plan(&list, &AvailabilityEnv::default()).unwrap();
    let codes: Vec<&str> = plan.hidden[0].diagnostics.iter().map(|d| d.reason.code()).collect();
    assert_eq!(codes, ["auth-missing", "env-missing"]);
    assert_eq!(plan.hidden[0].diagnostics[0].message, "Missing auth provider: p1");
    assert_eq!(plan.hidden[0].diagnostics[1].message, "Missing environment value: E");
}

#[test]
fn config_checks() {
    let sig = |check: &str| avail(json!({"kind": "config", "path": ["a", "b"], "check": check}));
    let env_with =
        |v: Value| AvailabilityEnv { config: json!({"a": {"b": v}}), ..Default::default() };
    let visible = |t: &ToolDescriptor, env: &AvailabilityEnv| {
        build_tool_plan(std::slice::from_ref(t), env).unwrap().visible.len() == 1
    };
    let mut t = d("t");
    t.availability = sig("non-empty");
    assert!(!visible(&t, &env_with(json!("  "))));
    assert!(visible(&t, &env_with(json!(0))));
    assert!(!visible(&t, &env_with(json!([]))));
    t.availability = sig("available");
    assert!(!visible(&t, &env_with(json!("x"))), "available without callback is hidden");
    let mut env = env_with(json!("x"));
    env.is_config_value_available =
        Some(Arc::new(|v: &Value, path: &[String]| v == "x" && path.len() == 2));
    assert!(visible(&t, &env));
    t.availability = sig("exists");
    let list = [t];
    let plan = build_tool_plan(&list, &AvailabilityEnv::default()).unwrap();
    assert_eq!(plan.hidden[0].diagnostics[0].message, "Missing config path: a.b");
}

#[test]
fn context_equality() {
    let mut t = d("t");
    t.availability = avail(json!({"kind": "context", "key": "channel", "equals": "discord"}));
    let env = AvailabilityEnv {
        values: [("channel".to_owned(), json!("slack"))].into(),
        ..Default::default()
    };
    let list = [t.clone()];
    let plan = build_tool_plan(&list, &env).unwrap();
    assert_eq!(plan.hidden[0].diagnostics[0].message, "Context value did not match: channel");
    let env = AvailabilityEnv {
        values: [("channel".to_owned(), json!("discord"))].into(),
        ..Default::default()
    };
    assert_eq!(build_tool_plan(&[t.clone()], &env).unwrap().visible.len(), 1);
    t.availability = avail(json!({"kind": "context", "key": "k", "equals": null}));
    let env =
        AvailabilityEnv { values: [("k".to_owned(), Value::Null)].into(), ..Default::default() };
    assert_eq!(
        build_tool_plan(&[t.clone()], &env).unwrap().visible.len(),
        1,
        "explicit null matches"
    );
    let list = [t];
    let plan = build_tool_plan(&list, &AvailabilityEnv::default()).unwrap();
    assert_eq!(plan.hidden.len(), 1, "equals:null needs an explicit null");
}

#[test]
fn context_numbers_compare_as_numbers() {
    // JavaScript's `===`: one number, however it is written; a string is not a number.
    let cases = [
        (json!(1), json!(1.0), true),
        (json!(1.0), json!(1), true),
        (json!(0), json!(-0.0), true),
        (json!(-0.0), json!(0), true),
        (json!(1e3), json!(1000), true),
        (json!(1), json!(2), false),
        (json!(1), json!("1"), false),
        (json!(0.1), json!(0.10000000000000002), false),
    ];
    for (value, want, visible) in cases {
        let mut t = d("t");
        t.availability = avail(json!({"kind": "context", "key": "k", "equals": want}));
        let env = AvailabilityEnv {
            values: [("k".to_owned(), value.clone())].into(),
            ..Default::default()
        };
        let list = [t];
        let plan = build_tool_plan(&list, &env).unwrap();
        assert_eq!(plan.visible.len() == 1, visible, "{value} === {want}");
    }
}

#[test]
fn protocol_projection_keeps_only_the_definition_in_plan_order() {
    let mut b = d("b");
    b.annotations = Some(json!({"readOnly": true}));
    b.owner = Owner::Mcp { server_id: "s".into() };
    let list = [b, d("a")];
    let plan = build_tool_plan(&list, &AvailabilityEnv::default()).unwrap();
    let tools = to_protocol_descriptors(&plan);
    assert_eq!(tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(
        serde_json::to_value(&tools[1]).unwrap(),
        json!({"name": "b", "description": "b tool", "parameters": {"type": "object", "properties": {}}})
    );
}

#[test]
fn malformed_and_empty_groups_are_unsupported() {
    for (v, msg) in [
        (json!({"kind": "auth"}), "Malformed auth signal: missing providerId"),
        (json!({"allOf": []}), "Empty availability allOf group"),
        (json!({"anyOf": "x"}), "Empty availability anyOf group"),
        (json!(42), "Unsupported availability expression"),
        (json!({"kind": "wat"}), "Unsupported availability signal"),
    ] {
        let diags =
            evaluate_availability(Some(&Availability::from_json(&v)), &AvailabilityEnv::default());
        assert_eq!(diags.len(), 1, "{v}");
        assert_eq!(diags[0].message, msg);
        assert_eq!(diags[0].reason, Reason::UnsupportedSignal);
    }
}

#[test]
fn env_debug_hides_values() {
    let env = AvailabilityEnv {
        env: [("TOKEN".to_owned(), "s3cret-value".to_owned())].into(),
        ..Default::default()
    };
    let dbg = format!("{env:?}");
    assert!(dbg.contains("TOKEN") && !dbg.contains("s3cret-value"));
}

fn arb_descriptor() -> impl Strategy<Value = ToolDescriptor> {
    (
        "[a-zA-Z_]{1,6}",
        proptest::option::of("[a-z]{1,3}"),
        prop_oneof![
            Just(None),
            Just(Some(json!({"kind": "env", "name": "E"}))),
            Just(Some(json!({"kind": "auth", "providerId": "p"}))),
            Just(Some(json!({"anyOf": [{"kind": "env", "name": "E"}, {"kind": "always"}]}))),
        ],
    )
        .prop_map(|(name, sort_key, av)| {
            let mut t = d(&name);
            t.sort_key = sort_key;
            t.availability = av.map(|v| Availability::from_json(&v));
            t
        })
}

proptest! {
    #[test]
    fn plan_is_independent_of_input_order(
        list in proptest::collection::vec(arb_descriptor(), 0..20),
        seed in any::<u64>(),
    ) {
        let mut dedup = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for t in list {
            if seen.insert(t.name.clone()) {
                dedup.push(t);
            }
        }
        let mut shuffled = dedup.clone();
        let mut s = seed | 1;
        for i in (1..shuffled.len()).rev() {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            shuffled.swap(i, (s % (i as u64 + 1)) as usize);
        }
        let env = AvailabilityEnv { env: [("E".to_owned(), "v".to_owned())].into(), ..Default::default() };
        let a = build_tool_plan(&dedup, &env).unwrap();
        let b = build_tool_plan(&shuffled, &env).unwrap();
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(
            serde_json::to_string(&to_protocol_descriptors(&a)).unwrap(),
            serde_json::to_string(&to_protocol_descriptors(&b)).unwrap()
        );
    }
}

#[test]
fn order_is_icu_root_collation_like_local_compare() {
    // Expected orders are JavaScript `["...", ...].sort((a, b) => a.localeCompare(b))`
    // under ICU root collation: punctuation < digits < letters, `_` before `-`,
    // lowercase before uppercase at the tertiary level.
    let expected = [
        "_x",
        "-x",
        "1x",
        "a",
        "A",
        "a_b",
        "a-b",
        "a1b",
        "ab",
        "read",
        "Read",
        "web_search",
        "web-fetch",
        "webfetch",
    ];
    let mut input: Vec<ToolDescriptor> = expected.iter().rev().map(|n| d(n)).collect();
    input.swap(0, 5);
    let plan = build_tool_plan(&input, &AvailabilityEnv::default()).unwrap();
    assert_eq!(names(&plan), expected);
    // Code-point order would have put each of these pairs the other way round.
    for (first, second) in [("web_search", "web-fetch"), ("read", "Read"), ("a_b", "a1b")] {
        assert!(first > second, "{first} {second}");
        assert_eq!(compare_descriptors(&d(first), &d(second)), std::cmp::Ordering::Less);
    }
}

/// The ICU root order with the code-point tie-break: the planner's documented rule.
fn icu_order(a: &str, b: &str) -> std::cmp::Ordering {
    collation_key(a).cmp(&collation_key(b)).then_with(|| a.cmp(b))
}

#[test]
fn every_ascii_string_of_up_to_two_characters_sorts_as_icu_does() {
    // The planner takes a table-driven path when every name is printable ASCII;
    // this compares it with ICU's own sort keys over all 1- and 2-character names.
    let printable: Vec<char> = (0x20u8..=0x7e).map(char::from).collect();
    let mut all: Vec<String> = printable.iter().map(|c| c.to_string()).collect();
    for a in &printable {
        for b in &printable {
            all.push(format!("{a}{b}"));
        }
    }
    let list: Vec<ToolDescriptor> = all.iter().map(|n| d(n)).collect();
    let plan = build_tool_plan(&list, &AvailabilityEnv::default()).unwrap();
    let mut expected: Vec<&str> = all.iter().map(String::as_str).collect();
    expected.sort_by(|a, b| icu_order(a, b));
    assert_eq!(names(&plan), expected);
}

#[test]
fn one_non_ascii_name_puts_the_whole_plan_on_icu_keys() {
    let all = ["Zeta", "état", "etat", "Etat", "e-tat", "e_tat", "eta", "ÉTAT", "zeta", "a1"];
    let list: Vec<ToolDescriptor> = all.iter().map(|n| d(n)).collect();
    let plan = build_tool_plan(&list, &AvailabilityEnv::default()).unwrap();
    let mut expected = all.to_vec();
    expected.sort_by(|a, b| icu_order(a, b));
    assert_eq!(names(&plan), expected);
}

proptest! {
    #[test]
    fn ascii_and_unicode_names_sort_as_icu_does(
        ascii in proptest::collection::vec("[ -~]{0,6}", 0..30),
        other in proptest::collection::vec("[a-zA-Z_é\u{0301}ß-]{0,4}", 0..3),
        keyed in any::<u8>(),
    ) {
        for names_in in [ascii.clone(), [ascii, other].concat()] {
            let mut unique = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for n in names_in {
                if seen.insert(n.clone()) {
                    unique.push(n);
                }
            }
            let list: Vec<ToolDescriptor> = unique
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let mut t = d(n);
                    if (i as u8) % 4 == keyed % 4 {
                        t.sort_key = Some(format!("k{}", i % 3));
                    }
                    t
                })
                .collect();
            let plan = build_tool_plan(&list, &AvailabilityEnv::default()).unwrap();
            let mut expected: Vec<&ToolDescriptor> = list.iter().collect();
            expected.sort_by(|a, b| {
                let ka = a.sort_key.as_deref().unwrap_or(&a.name);
                let kb = b.sort_key.as_deref().unwrap_or(&b.name);
                icu_order(ka, kb).then_with(|| icu_order(&a.name, &b.name))
            });
            let expected: Vec<&str> = expected.iter().map(|t| t.name.as_str()).collect();
            prop_assert_eq!(names(&plan), expected);
            for pair in list.windows(2) {
                prop_assert_eq!(
                    compare_descriptors(&pair[0], &pair[1]),
                    icu_order(
                        pair[0].sort_key.as_deref().unwrap_or(&pair[0].name),
                        pair[1].sort_key.as_deref().unwrap_or(&pair[1].name)
                    )
                    .then_with(|| icu_order(&pair[0].name, &pair[1].name))
                );
            }
        }
    }
}
