//! Tool-argument coercion and validation (OpenClaw's) and typed tools.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use llm_core::Tool;
use llm_core::typed::{parse_arguments, tool_for};
use llm_core::validation::{ValidatorCache, Violation, coerce_with_schema};
use serde_json::{Value, json};

fn tool(parameters: Value) -> Tool {
    Tool { name: "calc".into(), description: "test tool".into(), parameters }
}

fn coerce(schema: Value, value: Value) -> Value {
    let mut value = value;
    coerce_with_schema(&schema, &mut value);
    value
}

fn validate(schema: Value, args: Value) -> Result<Value, llm_core::validation::ValidationError> {
    ValidatorCache::new().validate(&tool(schema), &args)
}

// ---------------------------------------------------------------------------
// Schema-guided coercions
// ---------------------------------------------------------------------------

#[test]
fn openclaw_numeric_strings() {
    let schema = json!({
        "type": "object",
        "properties": {"amount": {"type": "number"}, "count": {"type": "integer"}},
        "required": ["amount", "count"]
    });
    let out = validate(schema, json!({"amount": "1e3", "count": "+3"})).unwrap();
    assert_eq!(out, json!({"amount": 1000, "count": 3}));
    assert_eq!(serde_json::to_string(&out).unwrap(), r#"{"amount":1000,"count":3}"#);
}

#[test]
fn hex_and_binary_strings_are_rejected() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "number"}, "i": {"type": "integer"}}});
    for bad in
        ["0x10", "0b10", "Infinity", "NaN", "1e999", "", "  ", "1_000", "--1", ".", "e5", "1e"]
    {
        let err = validate(schema.clone(), json!({"n": bad})).unwrap_err();
        assert_eq!(err.violations.len(), 1, "{bad}: {err}");
        assert_eq!(err.violations[0].path, "n");
        let err = validate(schema.clone(), json!({"i": bad})).unwrap_err();
        assert_eq!(err.violations[0].path, "i", "{bad}");
    }
}

#[test]
fn decimal_number_forms() {
    let s = json!({"type": "number"});
    assert_eq!(coerce(s.clone(), json!(" 1.5 ")), json!(1.5));
    assert_eq!(coerce(s.clone(), json!("-.5")), json!(-0.5));
    assert_eq!(coerce(s.clone(), json!("2.")), json!(2));
    assert_eq!(coerce(s.clone(), json!("1E-2")), json!(0.01));
    assert_eq!(coerce(s.clone(), json!("-0")), json!(0));
    assert_eq!(coerce(s.clone(), json!(true)), json!(1));
    assert_eq!(coerce(s.clone(), json!(false)), json!(0));
    assert_eq!(coerce(s, json!(null)), json!(0));
}

#[test]
fn integer_strings_must_be_safe_integers() {
    let s = json!({"type": "integer"});
    assert_eq!(coerce(s.clone(), json!("42")), json!(42));
    assert_eq!(coerce(s.clone(), json!("4.2e1")), json!(42));
    assert_eq!(coerce(s.clone(), json!("1.5")), json!("1.5"));
    assert_eq!(coerce(s.clone(), json!("9007199254740993")), json!("9007199254740993"));
    assert_eq!(coerce(s.clone(), json!(null)), json!(0));
    assert_eq!(coerce(s, json!(true)), json!(1));
}

#[test]
fn booleans() {
    let s = json!({"type": "boolean"});
    assert_eq!(coerce(s.clone(), json!("true")), json!(true));
    assert_eq!(coerce(s.clone(), json!("false")), json!(false));
    assert_eq!(coerce(s.clone(), json!("TRUE")), json!("TRUE"));
    assert_eq!(coerce(s.clone(), json!(1)), json!(true));
    assert_eq!(coerce(s.clone(), json!(0)), json!(false));
    assert_eq!(coerce(s.clone(), json!(2)), json!(2));
    assert_eq!(coerce(s, json!(null)), json!(false));
}

#[test]
fn strings_and_nulls() {
    let s = json!({"type": "string"});
    assert_eq!(coerce(s.clone(), json!(null)), json!(""));
    assert_eq!(coerce(s.clone(), json!(1000)), json!("1000"));
    assert_eq!(coerce(s.clone(), json!(1.5)), json!("1.5"));
    assert_eq!(coerce(s.clone(), json!(1000.0)), json!("1000"));
    assert_eq!(coerce(s.clone(), json!(1e21)), json!("1e+21"));
    assert_eq!(coerce(s.clone(), json!(true)), json!("true"));
    assert_eq!(coerce(s, json!([1])), json!([1]));
    let n = json!({"type": "null"});
    assert_eq!(coerce(n.clone(), json!("")), json!(null));
    assert_eq!(coerce(n.clone(), json!(0)), json!(null));
    assert_eq!(coerce(n.clone(), json!(false)), json!(null));
    assert_eq!(coerce(n, json!("x")), json!("x"));
}

#[test]
fn json_strings_for_arrays_and_objects() {
    assert_eq!(coerce(json!({"type": "array"}), json!(" [1,2] ")), json!([1, 2]));
    assert_eq!(coerce(json!({"type": "array"}), json!("[1,")), json!("[1,"));
    assert_eq!(coerce(json!({"type": "object"}), json!("{\"a\":1}")), json!({"a": 1}));
    assert_eq!(coerce(json!({"type": "object"}), json!("[1]")), json!("[1]"));
}

#[test]
fn type_lists() {
    let s = json!({"type": ["integer", "null"]});
    assert_eq!(coerce(s.clone(), json!("5")), json!(5));
    assert_eq!(coerce(s.clone(), json!(null)), json!(null), "already a member: no coercion");
    // Already a string: no coercion to number.
    assert_eq!(coerce(json!({"type": ["number", "string"]}), json!("5")), json!("5"));
    // First coercion that changes the value wins.
    assert_eq!(coerce(json!({"type": ["boolean", "number"]}), json!("7")), json!(7));
    assert_eq!(coerce(json!({"type": ["boolean", "number"]}), json!("true")), json!(true));
}

#[test]
fn any_of_and_one_of_select_the_first_valid_branch() {
    let any = json!({"anyOf": [{"type": "integer"}, {"type": "boolean"}]});
    assert_eq!(coerce(any.clone(), json!("true")), json!(true));
    assert_eq!(coerce(any.clone(), json!("12")), json!(12));
    assert_eq!(coerce(any, json!("nope")), json!("nope"));
    let one = json!({"oneOf": [
        {"type": "object", "properties": {"kind": {"const": "a"}, "n": {"type": "integer"}}, "required": ["kind"]},
        {"type": "object", "properties": {"kind": {"const": "b"}, "flag": {"type": "boolean"}}, "required": ["kind"]}
    ]});
    assert_eq!(
        coerce(one.clone(), json!({"kind": "b", "flag": "false"})),
        json!({"kind": "b", "flag": false})
    );
    assert_eq!(coerce(one, json!({"kind": "a", "n": "3"})), json!({"kind": "a", "n": 3}));
}

#[test]
fn all_of_applies_each() {
    let s = json!({"allOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}}},
        {"type": "object", "properties": {"b": {"type": "boolean"}}}
    ]});
    assert_eq!(coerce(s, json!({"a": "1", "b": "true"})), json!({"a": 1, "b": true}));
}

#[test]
fn nested_objects_arrays_and_additional_properties() {
    let schema = json!({
        "type": "object",
        "properties": {
            "user": {"type": "object", "properties": {"age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "boolean"}}}},
            "pair": {"type": "array", "items": [{"type": "integer"}, {"type": "string"}]},
            "pair2020": {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "boolean"}},
            "scores": {"type": "object", "additionalProperties": {"type": "number"}}
        },
        "additionalProperties": {"type": "integer"}
    });
    let out = coerce(
        schema,
        json!({
            "user": {"age": "30", "tags": ["true", 0, "x"]},
            "pair": ["1", 2, "extra"],
            "pair2020": ["1", "true", 1],
            "scores": {"math": "9.5", "art": null},
            "extra": "7"
        }),
    );
    assert_eq!(
        out,
        json!({
            "user": {"age": 30, "tags": [true, false, "x"]},
            "pair": [1, "2", "extra"],
            "pair2020": [1, true, true],
            "scores": {"math": 9.5, "art": 0},
            "extra": 7
        })
    );
}

#[test]
fn additional_properties_skip_declared_keys() {
    let schema = json!({"type": "object", "properties": {"s": {"type": "string"}}, "additionalProperties": {"type": "integer"}});
    assert_eq!(coerce(schema, json!({"s": "5", "n": "5"})), json!({"s": "5", "n": 5}));
}

#[test]
fn local_refs_are_followed() {
    let schema = json!({
        "type": "object",
        "properties": {
            "inner": {"$ref": "#/$defs/Inner"},
            "maybe": {"anyOf": [{"$ref": "#/$defs/Inner"}, {"type": "null"}]}
        },
        "$defs": {"Inner": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}
    });
    let out = validate(schema, json!({"inner": {"n": "1"}, "maybe": {"n": "2"}})).unwrap();
    assert_eq!(out, json!({"inner": {"n": 1}, "maybe": {"n": 2}}));
}

#[test]
fn recursive_schemas_terminate() {
    // A self-referential `$ref` at the same level.
    let self_ref = json!({"$ref": "#"});
    assert_eq!(coerce(self_ref, json!({"a": "1"})), json!({"a": "1"}));

    // A recursive tree, coerced all the way down.
    let tree = json!({
        "type": "object",
        "properties": {"n": {"type": "integer"}, "child": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
        "required": ["n"]
    });
    let mut deep = json!({"n": "0", "child": null});
    for _ in 0..50 {
        deep = json!({"n": "1", "child": deep});
    }
    let out = validate(tree, deep).unwrap();
    let mut node = &out;
    let mut levels = 0;
    while let Some(child) = node.get("child").filter(|c| !c.is_null()) {
        assert!(node["n"].is_i64(), "{node}");
        node = child;
        levels += 1;
    }
    assert_eq!((levels, &node["n"]), (50, &json!(0)));

    // Two recursive branches and an instance no branch accepts (`x` is not an
    // integer): every branch is tried at every level, bounded by the visit budget.
    let twice = json!({
        "type": "object",
        "properties": {"n": {"type": "integer"}, "child": {"anyOf": [{"$ref": "#"}, {"$ref": "#"}, {"type": "null"}]}}
    });
    let mut bad = json!({"n": "x"});
    for _ in 0..10 {
        bad = json!({"n": "1", "child": bad});
    }
    let out = coerce(twice.clone(), bad.clone());
    assert_eq!(out["n"], json!(1));
    assert!(validate(twice, bad).is_err());
}

#[test]
fn coercion_leaves_unknown_shapes_alone() {
    for schema in [
        json!(true),
        json!(false),
        json!(null),
        json!([1]),
        json!({"type": 5}),
        json!({"type": "weird"}),
    ] {
        assert_eq!(coerce(schema, json!({"a": "1"})), json!({"a": "1"}));
    }
}

#[test]
fn the_original_arguments_are_untouched() {
    let args = json!({"amount": "5"});
    let cache = ValidatorCache::new();
    let t = tool(json!({"type": "object", "properties": {"amount": {"type": "number"}}}));
    assert_eq!(cache.validate(&t, &args).unwrap(), json!({"amount": 5}));
    assert_eq!(args, json!({"amount": "5"}));
}

// ---------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------

#[test]
fn exact_message_format() {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "limit": {"type": "integer"},
            "user": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
        },
        "required": ["path"],
        "additionalProperties": false
    });
    let args = json!({"limit": "0x10", "user": {}});
    let err = validate(schema, args).unwrap_err();
    assert_eq!(err.tool, "calc");
    let paths: Vec<&str> = err.violations.iter().map(|v| v.path.as_str()).collect();
    let mut sorted = paths.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["limit", "path", "user.id"]);
    let lines: Vec<String> =
        err.violations.iter().map(|v| format!("  - {}: {}", v.path, v.message)).collect();
    let expected = format!(
        "Validation failed for tool \"calc\":\n{}\n\nReceived arguments:\n{{\n  \"limit\": \"0x10\",\n  \"user\": {{}}\n}}",
        lines.join("\n")
    );
    assert_eq!(err.message, expected);
    assert_eq!(err.to_string(), expected);
    let limit = err.violations.iter().find(|v| v.path == "limit").unwrap();
    assert!(limit.message.contains("\"0x10\""), "{}", limit.message);
    let missing = err.violations.iter().find(|v| v.path == "path").unwrap();
    assert!(missing.message.contains("\"path\""), "{}", missing.message);
}

#[test]
fn root_and_nested_paths() {
    let err = validate(json!({"type": "object"}), json!([1])).unwrap_err();
    assert_eq!(
        err.violations,
        vec![Violation { path: "root".into(), message: err.violations[0].message.clone() }]
    );
    assert!(
        err.message.starts_with("Validation failed for tool \"calc\":\n  - root: "),
        "{}",
        err.message
    );
    assert!(err.message.ends_with("Received arguments:\n[\n  1\n]"), "{}", err.message);

    let schema = json!({"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "object", "properties": {"a/b": {"type": "integer"}}}}
    }});
    let err = validate(schema, json!({"items": [{"a/b": 1}, {"a/b": "x"}]})).unwrap_err();
    assert_eq!(err.violations.len(), 1);
    assert_eq!(err.violations[0].path, "items.1.a/b");
}

#[test]
fn invalid_schema_is_an_error_not_a_panic() {
    let cache = ValidatorCache::new();
    for schema in [
        json!({"type": 5}),
        json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "(("}}}),
        json!({"$ref": "#/nope"}),
        json!({"$ref": "https://example.com/schema.json"}),
    ] {
        let err = cache.validate(&tool(schema.clone()), &json!({})).unwrap_err();
        assert!(
            err.message.starts_with("Invalid parameter schema for tool \"calc\": "),
            "{}",
            err.message
        );
        assert_eq!(err.violations.len(), 1);
        let mut value = json!({"a": "1"});
        coerce_with_schema(&schema, &mut value);
    }
}

// ---------------------------------------------------------------------------
// Cache
// ---------------------------------------------------------------------------

#[test]
fn validators_are_compiled_once_per_tool_and_schema() {
    let cache = ValidatorCache::new();
    let a = tool(
        json!({"type": "object", "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}),
    );
    for _ in 0..5 {
        assert_eq!(cache.validate(&a, &json!({"n": "1"})).unwrap(), json!({"n": 1}));
        assert!(cache.validate(&a, &json!({"n": "x"})).is_err());
    }
    assert_eq!(cache.compiled_count(), 1);

    // A clone shares the cache.
    let clone = cache.clone();
    clone.validate(&a, &json!({})).unwrap();
    assert_eq!(cache.compiled_count(), 1);

    // Same name, new schema: compiled once more; old one still cached.
    let mut b = a.clone();
    b.parameters = json!({"type": "object", "properties": {"n": {"type": "string"}}});
    assert_eq!(cache.validate(&b, &json!({"n": 1})).unwrap(), json!({"n": "1"}));
    assert_eq!(cache.compiled_count(), 2);
    cache.validate(&a, &json!({})).unwrap();
    cache.validate(&b, &json!({})).unwrap();
    assert_eq!(cache.compiled_count(), 2);

    // Same schema, other name: its own entry.
    let mut c = a.clone();
    c.name = "other".into();
    cache.validate(&c, &json!({})).unwrap();
    assert_eq!(cache.compiled_count(), 3);

    // Invalid schemas are cached too.
    let bad = tool(json!({"type": 5}));
    assert!(cache.validate(&bad, &json!({})).is_err());
    assert!(cache.validate(&bad, &json!({})).is_err());
    assert_eq!(cache.compiled_count(), 4);
    assert!(format!("{cache:?}").contains("compiled: 4"));
}

#[test]
fn cache_is_shared_across_threads() {
    let cache = ValidatorCache::new();
    let t = tool(
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
    );
    std::thread::scope(|scope| {
        for i in 0..8 {
            let cache = &cache;
            let t = &t;
            scope.spawn(move || {
                for _ in 0..50 {
                    assert_eq!(
                        cache.validate(t, &json!({"n": i.to_string()})).unwrap(),
                        json!({"n": i})
                    );
                }
            });
        }
    });
    assert!(cache.compiled_count() <= 8);
    fn assert_send_sync<T: Send + Sync + Clone + Default>() {}
    assert_send_sync::<ValidatorCache>();
}

// ---------------------------------------------------------------------------
// Typed tools
// ---------------------------------------------------------------------------

#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Unit {
    Celsius,
    Fahrenheit,
}

#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct Location {
    city: String,
    country: Option<String>,
}

/// Forecast request.
#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct Forecast {
    location: Location,
    days: u8,
    unit: Option<Unit>,
    hourly: Option<bool>,
    tags: Vec<String>,
}

#[test]
fn typed_tool_round_trip() {
    let t = tool_for::<Forecast>("forecast", "Weather forecast");
    assert_eq!(t.name, "forecast");
    assert_eq!(t.description, "Weather forecast");
    let root = t.parameters.as_object().unwrap();
    assert_eq!(root["type"], "object");
    assert!(!root.contains_key("$schema"));
    assert!(root.contains_key("$defs"), "{}", t.parameters);
    let required: Vec<&str> =
        root["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(
        required.contains(&"location") && required.contains(&"days") && !required.contains(&"unit")
    );

    let cache = ValidatorCache::new();
    let good = json!({
        "location": {"city": "Paris", "country": null},
        "days": "3",
        "unit": "celsius",
        "hourly": "true",
        "tags": ["a"]
    });
    let args = cache.validate(&t, &good).unwrap();
    let forecast: Forecast = parse_arguments("forecast", &args).unwrap();
    assert_eq!(
        forecast,
        Forecast {
            location: Location { city: "Paris".into(), country: None },
            days: 3,
            unit: Some(Unit::Celsius),
            hourly: Some(true),
            tags: vec!["a".into()],
        }
    );

    let bad = json!({"location": {}, "days": 3, "unit": "kelvin", "tags": []});
    let err = cache.validate(&t, &bad).unwrap_err();
    let paths: Vec<&str> = err.violations.iter().map(|v| v.path.as_str()).collect();
    assert!(paths.contains(&"location.city"), "{err}");
    assert!(paths.contains(&"unit"), "{err}");
    assert!(err.message.starts_with("Validation failed for tool \"forecast\":\n"));
    assert_eq!(cache.compiled_count(), 1);
}

#[test]
fn parse_arguments_names_the_tool() {
    let err = parse_arguments::<Forecast>("forecast", &json!({"days": 1})).unwrap_err();
    assert_eq!(err.tool, "forecast");
    assert!(err.to_string().starts_with("Invalid arguments for tool \"forecast\": "), "{err}");
    assert!(std::error::Error::source(&err).is_some());
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Op {
    Add {
        a: i64,
        b: i64,
    },
    Neg {
        #[allow(dead_code, reason = "only deserialized")]
        a: i64,
    },
}

#[test]
fn typed_tool_for_a_tagged_enum() {
    let t = tool_for::<Op>("op", "Arithmetic");
    assert_eq!(t.parameters["type"], "object");
    let cache = ValidatorCache::new();
    let args = cache.validate(&t, &json!({"op": "add", "a": "1", "b": 2})).unwrap();
    match parse_arguments::<Op>("op", &args).unwrap() {
        Op::Add { a, b } => assert_eq!((a, b), (1, 2)),
        Op::Neg { .. } => panic!("wrong variant"),
    }
    assert!(cache.validate(&t, &json!({"op": "mul", "a": 1})).is_err());
}
