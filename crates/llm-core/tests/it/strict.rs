//! Lossless strict-mode normalization: the schema rewrite, the whole-list
//! rule, and the restore plan on values and on streamed text.
//!
//! These tests come from the two provider-private modules this one replaced
//! (`llm-openai-completions` and `llm-openai-responses`), plus the cases where the two
//! used to disagree.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use std::sync::Arc;

use llm_core::raw::strict::{NotStrict, NullFilter, StrictPlan, resolve_tool_list, to_strict};
use serde_json::{Value, json};

fn strict(schema: Value) -> Value {
    to_strict(&schema).unwrap().schema
}

fn refused(schema: Value) -> NotStrict {
    to_strict(&schema).unwrap_err()
}

/// The original schema's restore plan applied to `args`.
fn restored(original: &Value, mut args: Value) -> Value {
    to_strict(original).unwrap().plan.restore(&mut args);
    args
}

fn filtered(plan: &StrictPlan, raw: &str, step: usize) -> String {
    let mut f = NullFilter::new(Arc::new(plan.clone()));
    let chars: Vec<char> = raw.chars().collect();
    let mut out = String::new();
    for piece in chars.chunks(step.max(1)) {
        out.push_str(&f.push(&piece.iter().collect::<String>()));
    }
    out
}

// ---- the schema rewrite ----

#[test]
fn optional_becomes_required_and_nullable_and_restores() {
    let schema = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City"},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "days": {"type": ["integer", "null"]}
        },
        "required": ["city"]
    });
    let strict = to_strict(&schema).unwrap();
    assert_eq!(
        strict.schema,
        json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City"},
                "unit": {"type": ["string", "null"], "enum": ["c", "f", null]},
                "days": {"type": ["integer", "null"]}
            },
            "required": ["city", "unit", "days"],
            "additionalProperties": false
        })
    );
    let mut args = json!({"city": "Oslo", "unit": null, "days": null});
    assert!(strict.plan.restore(&mut args));
    // `days` accepted null originally, so its null is meaningful and kept.
    assert_eq!(args, json!({"city": "Oslo", "days": null}));
}

#[test]
fn optional_properties_become_required_and_nullable() {
    let out = strict(json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City"},
            "days": {"type": "integer"},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "note": {"type": ["string", "null"]}
        },
        "required": ["city"]
    }));
    assert_eq!(
        out,
        json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City"},
                "days": {"type": ["integer", "null"]},
                "unit": {"type": ["string", "null"], "enum": ["c", "f", null]},
                "note": {"type": ["string", "null"]}
            },
            "required": ["city", "days", "unit", "note"],
            "additionalProperties": false
        })
    );
}

#[test]
fn nested_objects_arrays_and_refs() {
    let schema = json!({
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
            "owner": {"$ref": "#/$defs/person"}
        },
        "required": ["items"],
        "$defs": {
            "item": {"type": "object", "properties": {"id": {"type": "integer"}, "note": {"type": "string"}}, "required": ["id"]},
            "person": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        }
    });
    let strict = to_strict(&schema).unwrap();
    assert_eq!(
        strict.schema["properties"]["owner"],
        json!({"anyOf": [{"$ref": "#/$defs/person"}, {"type": "null"}]})
    );
    assert_eq!(strict.schema["$defs"]["item"]["required"], json!(["id", "note"]));
    assert_eq!(strict.schema["$defs"]["item"]["additionalProperties"], json!(false));
    let mut args =
        json!({"items": [{"id": 1, "note": null}, {"id": 2, "note": "x"}], "owner": null});
    assert!(strict.plan.restore(&mut args));
    assert_eq!(args, json!({"items": [{"id": 1}, {"id": 2, "note": "x"}]}));
}

#[test]
fn nested_objects_arrays_and_refs_are_closed_and_widened() {
    let out = strict(json!({
        "type": "object",
        "properties": {
            "filter": {
                "type": "object",
                "properties": {"tag": {"type": "string"}},
                "additionalProperties": false
            },
            "items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
            "main": {"$ref": "#/$defs/item", "description": "Main item"},
            "kind": {"const": "a"},
            "either": {"anyOf": [{"type": "string"}, {"type": "number"}]}
        },
        "required": ["items"],
        "$defs": {"item": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}
    }));
    assert_eq!(out["properties"]["filter"]["type"], json!(["object", "null"]));
    assert_eq!(out["properties"]["filter"]["required"], json!(["tag"]));
    assert_eq!(out["properties"]["filter"]["properties"]["tag"]["type"], json!(["string", "null"]));
    assert_eq!(out["properties"]["items"]["type"], json!("array"));
    // The annotations of a wrapped `$ref` stay outside: the `$ref` keeps no siblings.
    assert_eq!(
        out["properties"]["main"],
        json!({"description": "Main item", "anyOf": [{"$ref": "#/$defs/item"}, {"type": "null"}]})
    );
    assert_eq!(out["properties"]["kind"], json!({"anyOf": [{"const": "a"}, {"type": "null"}]}));
    assert_eq!(out["properties"]["either"]["anyOf"].as_array().unwrap().len(), 3);
    assert_eq!(out["$defs"]["item"]["additionalProperties"], json!(false));
    assert_eq!(out["required"], json!(["filter", "items", "main", "kind", "either"]));
}

#[test]
fn tool_without_arguments_is_strict() {
    let expected =
        json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false});
    assert_eq!(strict(json!({"type": "object"})), expected);
    assert_eq!(strict(json!({"type": "object", "properties": {}})), expected);
    assert_eq!(
        strict(
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"})
        ),
        expected
    );
}

#[test]
fn empty_object_and_annotations() {
    let empty = to_strict(&json!({"$schema": "x", "type": "object", "properties": {}})).unwrap();
    assert_eq!(
        empty.schema,
        json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
    );
    assert!(empty.plan.is_trivial());
    // Annotations that constrain nothing are dropped anywhere, not refused.
    let out = strict(json!({"type": "object", "properties": {
        "a": {"type": "string", "default": "x", "examples": ["y"], "$comment": "c"}
    }, "required": ["a"]}));
    assert_eq!(out["properties"]["a"], json!({"type": "string"}));
}

#[test]
fn inexpressible_schemas_are_rejected_not_narrowed() {
    for (schema, what) in [
        (json!({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}}), "oneOf"),
        (json!({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}]}}}), "allOf"),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}}),
            "minLength",
        ),
        (
            json!({"type": "object", "properties": {}, "additionalProperties": true}),
            "additionalProperties true",
        ),
        (
            json!({"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}),
            "additionalProperties schema",
        ),
        (json!({"type": "object", "properties": {"m": {"type": "object"}}}), "free-form"),
        (
            json!({"type": "object", "properties": {"t": {"type": "array", "items": [{"type": "string"}]}}}),
            "tuple",
        ),
        (json!({"anyOf": [{"type": "object", "properties": {}}]}), "root anyOf"),
        (json!({"type": "string"}), "root"),
        (json!({"type": ["object", "null"], "properties": {}}), "nullable root"),
        (json!(true), "boolean root"),
        (
            json!({"type": "object", "properties": {"u": {"anyOf": [{"type": "object", "properties": {"x": {"type": "string"}}}]}}}),
            "anyOf optional",
        ),
        (json!({"type": "object", "properties": {"x": {}}}), "untyped"),
        (
            json!({"type": "object", "properties": {"x": {"properties": {"y": {"type": "string"}}}}}),
            "typeless object (it also accepts non-objects)",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}}),
            "format",
        ),
        (json!({"type": "object", "properties": {"a": {"$ref": "http://x/y"}}}), "remote $ref"),
        (
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/ghost"}}}),
            "dangling $ref",
        ),
        (
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/s", "minLength": 1}}, "$defs": {"s": {"type": "string"}}}),
            "$ref siblings",
        ),
        (json!({"type": "object", "properties": {"a": {"type": "strin"}}}), "bad type"),
        (
            json!({"type": "object", "properties": {"a": {"type": ["object", "string"], "properties": {}}}}),
            "object mixed with string",
        ),
        (json!({"type": "object", "properties": {}, "required": ["ghost"]}), "undeclared required"),
        (json!({"type": "object", "properties": {"e": {"enum": []}}}), "empty enum"),
        (
            json!({"type": "object", "properties": {"o": {"type": "object", "properties": {}, "$defs": {}}}}),
            "nested $defs",
        ),
    ] {
        assert!(to_strict(&schema).is_err(), "{what} should not be strict");
    }
    let error =
        refused(json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}}));
    assert_eq!(error.path, "/properties/a/minLength");
    assert_eq!(
        error.to_string(),
        "/properties/a/minLength: keyword `minLength` is not supported in strict mode"
    );
    assert_eq!(
        refused(json!({"type": "string"})).to_string(),
        "#: the root schema must have type \"object\""
    );
}

#[test]
fn limits_are_enforced() {
    let mut schema = json!({"type": "string"});
    for _ in 0..=10 {
        schema = json!({"type": "object", "properties": {"x": schema}, "required": ["x"]});
    }
    assert!(refused(schema).reason.contains("nesting"));
    let mut ten = json!({"type": "string"});
    for _ in 0..10 {
        ten = json!({"type": "object", "properties": {"x": ten}, "required": ["x"]});
    }
    assert!(to_strict(&ten).is_ok(), "10 levels are allowed");
    let values: Vec<Value> = (0..=1000).map(Value::from).collect();
    assert!(
        refused(json!({"type": "object", "properties": {"e": {"enum": values}}}))
            .reason
            .contains("enum")
    );
    let props: serde_json::Map<String, Value> =
        (0..=5000).map(|i| (format!("p{i}"), json!({"type": "string"}))).collect();
    assert!(refused(json!({"type": "object", "properties": props})).reason.contains("properties"));
}

#[test]
fn conversion_is_idempotent() {
    let original = json!({
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/x"}]}},
        "$defs": {"x": {"type": "object", "properties": {"y": {"enum": [1, 2]}}, "required": ["y"]}}
    });
    let once = strict(original);
    assert_eq!(strict(once.clone()), once);
}

#[test]
fn refs_in_any_of_branches_are_fine_when_nothing_below_them_is_optional() {
    // `x` has no optional property: a branch that refers to it needs no restoring.
    let ok = json!({
        "type": "object",
        "properties": {"b": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/x"}]}},
        "required": ["b"],
        "$defs": {"x": {"type": "object", "properties": {"y": {"type": "integer"}}, "required": ["y"]}}
    });
    let converted = to_strict(&ok).unwrap();
    assert!(converted.plan.is_trivial(), "nothing can be dropped: {:?}", converted.plan);
    // With an optional property below the branch, a `null` could not be placed.
    let mut optional = ok.clone();
    optional["$defs"]["x"]["required"] = json!([]);
    assert_eq!(refused(optional).path, "/properties/b/anyOf/1");
}

#[test]
fn recursive_refs_restore_at_every_level() {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#"}},
            "tree": {"$ref": "#/$defs/node"}
        },
        "required": ["children"],
        "$defs": {"node": {"type": "object", "properties": {
            "label": {"type": "string"},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}
        }, "required": ["kids"]}}
    });
    let strict = to_strict(&schema).unwrap();
    let raw = json!({
        "name": null,
        "children": [{"name": "a", "children": [{"name": null, "children": [], "tree": null}], "tree": null}],
        "tree": {"label": null, "kids": [{"label": "k", "kids": [{"label": null, "kids": []}]}]}
    });
    let expected = json!({
        "children": [{"name": "a", "children": [{"children": []}]}],
        "tree": {"kids": [{"label": "k", "kids": [{"kids": []}]}]}
    });
    let mut args = raw.clone();
    assert!(strict.plan.restore(&mut args));
    assert_eq!(args, expected);
    let text = raw.to_string();
    let out: Value = serde_json::from_str(&filtered(&strict.plan, &text, 3)).unwrap();
    assert_eq!(out, expected);
}

#[test]
fn required_refs_to_plain_definitions_are_trivial() {
    let strict = to_strict(&json!({
        "type": "object",
        "properties": {"p": {"$ref": "#/definitions/p"}, "q": {"type": "array", "items": {"$ref": "#/definitions/p"}}},
        "required": ["p", "q"],
        "definitions": {"p": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}
    }))
    .unwrap();
    assert!(strict.plan.is_trivial());
}

#[test]
fn nullable_widening_covers_every_shape() {
    let out = strict(json!({
        "type": "object",
        "properties": {
            "e": {"enum": ["a", "b"]},
            "te": {"type": ["string", "null"], "enum": ["a"]},
            "any": {"anyOf": [{"type": "string"}, {"type": ["number", "null"]}]},
            "c": {"const": 3, "title": "Three"}
        }
    }));
    assert_eq!(out["properties"]["e"], json!({"enum": ["a", "b", null]}));
    // `type` accepted null but `enum` did not: the null must be added to the enum.
    assert_eq!(out["properties"]["te"], json!({"type": ["string", "null"], "enum": ["a", null]}));
    // A branch already accepts null: nothing to add.
    assert_eq!(out["properties"]["any"]["anyOf"].as_array().unwrap().len(), 2);
    assert_eq!(
        out["properties"]["c"],
        json!({"title": "Three", "anyOf": [{"const": 3}, {"type": "null"}]})
    );
    // And the nulls mean "absent" exactly where the original did not accept null.
    let original = json!({"type": "object", "properties": {
        "te": {"type": ["string", "null"], "enum": ["a"]},
        "any": {"anyOf": [{"type": "string"}, {"type": ["number", "null"]}]}
    }});
    assert_eq!(restored(&original, json!({"te": null, "any": null})), json!({"any": null}));
}

// ---- the whole-list rule ----

#[test]
fn whole_list_rule() {
    let good = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let bad = json!({"type": "object", "properties": {"a": {"anyOf": [{"type": "object"}]}}});
    let all_good = resolve_tool_list(vec![("f", good.clone()), ("g", good.clone())], Some(true));
    assert_eq!(all_good.strict, Some(true));
    assert_eq!(all_good.parameters[0]["additionalProperties"], json!(false));
    assert_eq!(all_good.plans.keys().collect::<Vec<_>>(), ["f", "g"]);
    let mixed = resolve_tool_list(vec![("f", good.clone()), ("g", bad.clone())], Some(true));
    assert_eq!(mixed.strict, Some(false));
    assert_eq!(mixed.parameters, vec![good.clone(), bad.clone()]);
    assert!(mixed.plans.is_empty());
    assert_eq!(mixed.downgraded.as_ref().map(|d| d.0), Some(1));
    assert_eq!(resolve_tool_list(vec![("f", good.clone())], None).strict, None);
    let off = resolve_tool_list(vec![("f", good.clone())], Some(false));
    assert_eq!(off.strict, Some(false));
    assert_eq!(off.parameters, vec![good.clone()]);
    assert!(off.plans.is_empty());
    // A tool with nothing to restore gets no plan.
    let required =
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
    assert!(resolve_tool_list(vec![("r", required)], Some(true)).plans.is_empty());
}

// ---- restoring ----

#[test]
fn restore_removes_nulls_that_mean_absent() {
    let original = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "note": {"type": ["string", "null"]},
            "inner": {"type": "object", "properties": {"x": {"type": "string"}}},
            "list": {"type": "array", "items": {"$ref": "#/$defs/i"}}
        },
        "required": ["city"],
        "$defs": {"i": {"type": "object", "properties": {"y": {"type": "number"}}}}
    });
    let args = json!({
        "city": null, "days": null, "note": null,
        "inner": {"x": null}, "list": [{"y": null}, {"y": 2}]
    });
    // `city` is required (its null is the model's answer) and `note` accepted null: both stay.
    assert_eq!(
        restored(&original, args),
        json!({"city": null, "note": null, "inner": {}, "list": [{}, {"y": 2}]})
    );
}

#[test]
fn strict_then_restore_round_trips() {
    let original = json!({
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}},
        "required": ["a"]
    });
    let strict_schema = strict(original.clone());
    // What a strict model must send when it omits `b`.
    assert!(strict_schema["properties"]["b"]["type"].as_array().unwrap().contains(&json!("null")));
    assert_eq!(restored(&original, json!({"a": "x", "b": null})), json!({"a": "x"}));
}

#[test]
fn restore_ignores_values_of_unexpected_shape() {
    let strict =
        to_strict(&json!({"type": "object", "properties": {"a": {"type": "string"}}})).unwrap();
    let mut args = json!(["not", "an", "object"]);
    assert!(!strict.plan.restore(&mut args));
    let mut args = json!({"a": null, "b": null});
    assert!(strict.plan.restore(&mut args));
    assert_eq!(args, json!({"b": null}));
}

#[test]
fn null_filter_matches_restore_at_every_fragmentation() {
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"type": "string"}, "b": {"type": "integer"}, "n": {"type": ["string", "null"]},
            "list": {"type": "array", "items": {"$ref": "#/$defs/item"}},
            "free": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["a"],
        "$defs": {"item": {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "object", "properties": {"z": {"type": "number"}}}}, "required": ["x"]}}
    });
    let strict = to_strict(&schema).unwrap();
    for raw in [
        r#"{"a":"s","b":null,"n":null,"list":[{"x":"1","y":null},{"x":"2","y":{"z":null}}],"free":["null",null]}"#,
        r#"{ "b" : null , "a" : "q\"},null" , "list" : null }"#,
        r#"{"b":null}"#,
        r#"{"b":12,"a":"x"}"#,
        r#"{"list":[{"y":{"z":1.5e3},"x":"k"}],"b":null,"a":"\u00e9"}"#,
    ] {
        let mut expected: Value = serde_json::from_str(raw).unwrap();
        strict.plan.restore(&mut expected);
        let whole = filtered(&strict.plan, raw, raw.len());
        for step in 1..=raw.chars().count() {
            let out = filtered(&strict.plan, raw, step);
            let got: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}: {e}"));
            assert_eq!(got, expected, "step {step}: {out}");
            // The text itself does not depend on the split either.
            assert_eq!(out, whole, "step {step}");
        }
    }
}

#[test]
fn null_filter_output_for_a_prefix_is_a_prefix() {
    let strict = to_strict(
        &json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}),
    )
    .unwrap();
    let raw = r#"{"a":"x","b":null}"#;
    let whole = filtered(&strict.plan, raw, raw.len());
    assert_eq!(whole, r#"{"a":"x"}"#);
    for cut in 0..=raw.len() {
        let head = filtered(&strict.plan, &raw[..cut], cut.max(1));
        assert!(whole.starts_with(&head), "{cut}: {head}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    #[test]
    fn null_filter_never_panics(input in ".{0,200}") {
        let strict = to_strict(&json!({"type": "object", "properties": {"a": {"type": "string"}, "o": {"type": "object", "properties": {"b": {"type": "integer"}}}}})).unwrap();
        let mut f = NullFilter::new(Arc::new(strict.plan));
        let _ = f.push(&input);
    }

    #[test]
    fn null_filter_agrees_with_restore(
        a in proptest::option::of("[a-z\"\\\\{} ,:]{0,8}"),
        b in proptest::option::of(proptest::option::of(-5i64..5)),
        zs in proptest::collection::vec(proptest::option::of(proptest::option::of(0u8..9)), 0..4),
        step in 1usize..9,
    ) {
        let strict = to_strict(&json!({"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "integer"},
            "items": {"type": "array", "items": {"type": "object", "properties": {"z": {"type": "integer"}}}}
        }, "required": ["items"]})).unwrap();
        let mut args = serde_json::Map::new();
        if let Some(b) = b { args.insert("b".into(), json!(b)); }
        args.insert("items".into(), Value::Array(zs.iter().map(|z| match z {
            None => json!({}),
            Some(z) => json!({"z": z}),
        }).collect()));
        if let Some(a) = a { args.insert("a".into(), json!(a)); }
        let raw = Value::Object(args).to_string();
        let mut expected: Value = serde_json::from_str(&raw).unwrap();
        strict.plan.restore(&mut expected);
        let out = filtered(&strict.plan, &raw, step);
        let got: Value = serde_json::from_str(&out).unwrap();
        proptest::prop_assert_eq!(got, expected);
    }
}
