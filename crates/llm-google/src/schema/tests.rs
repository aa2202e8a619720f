#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::indexing_slicing,
    dead_code,
    reason = "tests"
)]

//! Snapshot tests over schemas that `schemars` derives for real Rust types, for both
//! Gemini fields. Snapshots live in `tests/snapshots/schema/`; a missing one is
//! written, `UPDATE_EXPECT=1` rewrites them all.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::*;

/// Letter case handling.
#[derive(Deserialize, JsonSchema)]
enum Case {
    /// Exact.
    Sensitive,
    /// Folded.
    Insensitive,
}

/// How to match.
#[derive(Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Mode {
    /// A literal string.
    Literal,
    /// A regular expression.
    Regex {
        /// Regex flags.
        flags: String,
    },
}

/// Size and extension filter.
#[derive(Deserialize, JsonSchema)]
struct Filter {
    /// Smallest size in bytes.
    min_size: Option<u64>,
    /// Largest size in bytes.
    max_size: Option<u64>,
    /// File extensions.
    extensions: Vec<String>,
}

/// Search files.
#[derive(Deserialize, JsonSchema)]
struct SearchArgs {
    /// Glob pattern.
    pattern: String,
    /// Maximum number of results.
    limit: Option<u32>,
    /// Case handling.
    case: Case,
    /// Optional filter.
    filter: Option<Filter>,
    /// Tags to match.
    tags: Vec<String>,
    /// Match mode.
    mode: Mode,
    /// Weight.
    weight: f64,
}

/// A node of a tree.
#[derive(Deserialize, JsonSchema)]
struct TreeNode {
    /// Name.
    name: String,
    /// Children.
    children: Vec<TreeNode>,
}

/// A section of a document.
#[derive(Deserialize, JsonSchema)]
struct Section {
    /// Heading.
    heading: String,
    /// Nested sections.
    subsections: Vec<Section>,
    /// A parent back-link, optional.
    parent: Option<Box<Section>>,
}

/// Write a document.
#[derive(Deserialize, JsonSchema)]
struct WriteDoc {
    /// Title.
    title: String,
    /// The root section.
    root: Section,
}

/// A shape.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum Shape {
    /// A circle.
    Circle {
        /// Radius.
        radius: f64,
    },
    /// A rectangle.
    Rect {
        /// Width.
        w: f64,
        /// Height.
        h: f64,
    },
}

/// Draw shapes.
#[derive(Deserialize, JsonSchema)]
struct Draw {
    /// Shapes to draw.
    shapes: Vec<Shape>,
    /// Color, nullable.
    color: Option<String>,
    /// Layer index.
    layer: i8,
    /// A pair.
    pair: (String, u16),
}

/// A tool without arguments.
#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

fn snapshot(name: &str, input: Value) {
    let actual = json!({
        "input": input,
        "parametersJsonSchema": for_json_schema(&input),
        "parameters": for_openapi(&input),
    });
    check_json_schema_rules(&actual["parametersJsonSchema"]);
    if let Some(p) = actual["parameters"].as_object() {
        check_openapi_rules(&Value::Object(p.clone()));
    }
    let text = serde_json::to_string_pretty(&actual).unwrap() + "\n";
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/schema");
    let path = dir.join(format!("{name}.json"));
    let update = std::env::var("UPDATE_EXPECT").is_ok_and(|v| v == "1");
    match std::fs::read_to_string(&path) {
        Ok(expected) if !update => {
            if let Some((i, (a, e))) =
                text.lines().zip(expected.lines()).enumerate().find(|(_, (a, e))| a != e)
            {
                panic!(
                    "snapshot {name} differs at line {}:\n  actual:   {a}\n  expected: {e}\nrerun with UPDATE_EXPECT=1 and review",
                    i + 1
                );
            }
            assert_eq!(
                text.lines().count(),
                expected.lines().count(),
                "snapshot {name} length differs"
            );
        }
        _ => {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, text).unwrap();
        }
    }
}

/// Walks every schema position of `schema`.
fn walk(schema: &Value, f: &mut dyn FnMut(&serde_json::Map<String, Value>)) {
    let Value::Object(map) = schema else { return };
    f(map);
    for (key, value) in map {
        if SCHEMA_MAPS.contains(&key.as_str()) || key == "$defs" {
            if let Value::Object(m) = value {
                m.values().for_each(|v| walk(v, f));
            }
        } else if SCHEMA_LISTS.contains(&key.as_str()) || SCHEMA_SINGLE.contains(&key.as_str()) {
            match value {
                Value::Array(items) => items.iter().for_each(|v| walk(v, f)),
                other => walk(other, f),
            }
        }
    }
}

/// Gemini's rules for `parametersJsonSchema`: `$ref` only beside description/default,
/// every `$ref` resolves into the root `$defs`, no meta keywords.
fn check_json_schema_rules(schema: &Value) {
    let defs = schema.get("$defs").and_then(Value::as_object).cloned().unwrap_or_default();
    walk(schema, &mut |map| {
        if let Some(r) = map.get("$ref").and_then(Value::as_str) {
            assert!(
                map.keys().all(|k| matches!(k.as_str(), "$ref" | "description" | "default")),
                "$ref with siblings: {map:?}"
            );
            let name = r.strip_prefix("#/$defs/").expect("local $defs ref");
            assert!(defs.contains_key(name), "dangling {r}");
        }
        for meta in META {
            assert!(!map.contains_key(*meta), "meta keyword {meta} left");
        }
        assert!(!map.contains_key("definitions"));
    });
}

/// Gemini's OpenAPI `Schema` subset: only known keywords, string enums, scalar types.
fn check_openapi_rules(schema: &Value) {
    const ALLOWED: &[&str] = &[
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "properties",
        "required",
        "items",
        "anyOf",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
        "minimum",
        "maximum",
        "pattern",
        "default",
        "example",
        "propertyOrdering",
    ];
    walk(schema, &mut |map| {
        for key in map.keys() {
            assert!(
                ALLOWED.contains(&key.as_str()),
                "keyword {key} not in Gemini's Schema: {map:?}"
            );
        }
        if let Some(t) = map.get("type") {
            assert!(t.is_string() && t != "null", "type must be one non-null name: {t}");
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            assert!(values.iter().all(Value::is_string), "enum values must be strings");
        }
        if let Some(Value::Object(props)) = map.get("properties") {
            assert!(!props.is_empty());
        }
    });
}

fn schema_of<T: JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap()
}

#[test]
fn snapshot_search_args_options_enums_nested() {
    snapshot("search_args", schema_of::<SearchArgs>());
}

#[test]
fn snapshot_root_recursive_tree() {
    snapshot("tree_node", schema_of::<TreeNode>());
}

#[test]
fn snapshot_recursive_through_defs() {
    snapshot("write_doc", schema_of::<WriteDoc>());
}

#[test]
fn snapshot_untagged_union_tuple_nullable() {
    snapshot("draw", schema_of::<Draw>());
}

#[test]
fn snapshot_no_args() {
    snapshot("no_args", schema_of::<NoArgs>());
}

#[test]
fn ref_with_siblings_inlined_and_siblings_win() {
    let input = json!({
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A", "description": "outer"}},
        "$defs": {"A": {"type": "string", "description": "inner", "minLength": 1}}
    });
    let out = for_json_schema(&input);
    assert_eq!(
        out,
        json!({"type": "object", "properties": {"a": {"type": "string", "description": "outer", "minLength": 1}}})
    );
}

#[test]
fn recursive_ref_with_siblings_is_wrapped() {
    let input = json!({
        "type": "object",
        "properties": {"n": {"$ref": "#/definitions/N"}},
        "definitions": {"N": {"type": "object", "properties": {"next": {"$ref": "#/definitions/N", "title": "Next", "description": "d"}}}}
    });
    let out = for_json_schema(&input);
    check_json_schema_rules(&out);
    assert_eq!(
        out["properties"]["n"]["properties"]["next"],
        json!({"anyOf": [{"$ref": "#/$defs/N", "description": "d"}], "title": "Next"})
    );
    assert!(out["$defs"]["N"].is_object());
}

#[test]
fn hostile_ref_fanout_is_bounded() {
    // Each level references the next twice: 2^40 nodes if fully inlined.
    let mut defs = serde_json::Map::new();
    for i in 0..40 {
        defs.insert(
            format!("D{i}"),
            json!({"type": "object", "properties": {"l": {"$ref": format!("#/$defs/D{}", i + 1)}, "r": {"$ref": format!("#/$defs/D{}", i + 1)}}}),
        );
    }
    defs.insert("D40".into(), json!({"type": "string"}));
    let input =
        json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs});
    let started = std::time::Instant::now();
    let out = for_json_schema(&input);
    check_json_schema_rules(&out);
    let open = for_openapi(&input).unwrap();
    check_openapi_rules(&open);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn openapi_sanitizing() {
    let input = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "a": {"type": ["string", "null"], "format": "uri"},
            "b": {"anyOf": [{"type": "integer", "format": "uint32", "minimum": 0}, {"type": "null"}]},
            "c": {"enum": [1, 2, null]},
            "d": {"const": "fixed"},
            "e": {"type": ["string", "integer"]},
            "f": {"allOf": [{"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
                             {"properties": {"y": {"type": "number", "exclusiveMinimum": 0}}, "required": ["y"]}]},
            "g": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "minItems": 1},
            "h": {"type": "object", "properties": {}},
        },
        "required": ["a", "zzz"]
    });
    let out = for_openapi(&input).unwrap();
    check_openapi_rules(&out);
    assert_eq!(out["properties"]["a"], json!({"type": "string", "nullable": true}));
    assert_eq!(out["properties"]["b"], json!({"type": "integer", "nullable": true, "minimum": 0}));
    assert_eq!(
        out["properties"]["c"],
        json!({"type": "string", "nullable": true, "enum": ["1", "2"]})
    );
    assert_eq!(out["properties"]["d"], json!({"type": "string", "enum": ["fixed"]}));
    assert_eq!(out["properties"]["e"], json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}));
    assert_eq!(
        out["properties"]["f"],
        json!({"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "number"}}, "required": ["x", "y"]})
    );
    assert_eq!(
        out["properties"]["g"],
        json!({"type": "array", "items": {"type": "string"}, "minItems": 1})
    );
    assert_eq!(out["properties"]["h"], json!({"type": "object"}));
    assert_eq!(out["required"], json!(["a"]));
    assert_eq!(for_openapi(&json!({"type": "object", "properties": {}})), None);
    assert_eq!(for_openapi(&json!({})), None);
}

#[test]
fn enum_values_are_data_not_schemas() {
    let input = json!({"type": "object", "properties": {"k": {"enum": [{"$ref": "x"}], "default": {"$ref": "y"}}}});
    let out = for_json_schema(&input);
    assert_eq!(out["properties"]["k"]["enum"], json!([{"$ref": "x"}]));
    assert_eq!(out["properties"]["k"]["default"], json!({"$ref": "y"}));
}

#[test]
fn empty_and_non_object_parameters() {
    assert_eq!(for_json_schema(&json!({})), json!({"type": "object", "properties": {}}));
    assert_eq!(for_json_schema(&Value::Null), json!({"type": "object", "properties": {}}));
    assert_eq!(
        for_json_schema(&json!({"properties": {"a": {"type": "string"}}}))["type"],
        "object"
    );
}

mod copy_when_nothing_to_rewrite {
    use proptest::prelude::*;
    use serde_json::{Map, Value};

    use super::super::{for_json_schema, rewrite_for_json_schema};

    /// Keys of schema positions and data positions.
    const PLAIN: &[&str] = &[
        "type",
        "properties",
        "items",
        "anyOf",
        "additionalProperties",
        "description",
        "default",
        "enum",
        "required",
        "title",
        "$other",
    ];
    /// The same with the keys the rewrite acts on.
    const ANY: &[&str] = &[
        "type",
        "properties",
        "items",
        "anyOf",
        "description",
        "default",
        "$ref",
        "$defs",
        "definitions",
        "$comment",
        "$schema",
        "$id",
    ];

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0i64..5).prop_map(Value::from),
            prop_oneof![
                Just("string"),
                Just("object"),
                Just("#"),
                Just("#/$defs/a"),
                Just("#/properties/x")
            ]
            .prop_map(Value::from),
        ]
    }

    fn schema(keys: &'static [&'static str]) -> impl Strategy<Value = Value> {
        leaf().prop_recursive(5, 48, 5, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((proptest::sample::select(keys), inner), 0..5).prop_map(
                    |entries| {
                        Value::Object(
                            entries
                                .into_iter()
                                .map(|(k, v)| (k.to_owned(), v))
                                .collect::<Map<_, _>>(),
                        )
                    }
                ),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The copy taken for a schema with no reference and no meta keyword is what the
        /// full rewrite makes of it.
        #[test]
        fn the_copy_equals_the_full_rewrite(schema in schema(PLAIN)) {
            prop_assert_eq!(for_json_schema(&schema), rewrite_for_json_schema(&schema));
        }

        /// A schema holding any key the rewrite acts on, at any depth, is rewritten.
        #[test]
        fn a_schema_with_references_or_meta_keywords_is_rewritten(schema in schema(ANY)) {
            prop_assert_eq!(for_json_schema(&schema), rewrite_for_json_schema(&schema));
        }
    }
}
