//! Lossless strict-mode normalization of tool parameter schemas (spec README decision 6).
//!
//! OpenAI's strict mode (Structured Outputs for function tools) accepts a subset of JSON
//! Schema: every object must list *every* property in `required` and set
//! `additionalProperties: false`; `allOf` / `oneOf` / `not` / conditionals, tuple `items`,
//! string lengths and most object / array size keywords are rejected.
//!
//! [`to_strict`] rewrites a schema into that subset **without changing the set of argument
//! objects it describes**:
//! - an optional property becomes required *and* nullable (`null` then stands for
//!   "absent"; [`restore_optional_nulls`] maps it back for the tool);
//! - `additionalProperties: false` is added to objects that declare `properties`
//!   (the universal tool-schema convention: the declared properties are the arguments);
//! - anything that cannot be expressed exactly (an open object, `additionalProperties: true`
//!   or a schema, a keyword outside the subset, a typeless schema, a root `anyOf`, ...)
//!   is an error, never a silent narrowing.
//!
//! [`resolve_tool_list`] applies OpenClaw's whole-list rule: one tool that cannot be made
//! strict sends the whole list non-strict.
//!
//! This module depends only on `serde_json` and is shared in spirit with the Chat
//! Completions provider; it is meant to move to `llm-core` unchanged.

use serde_json::{Map, Value};

/// Nesting limit of strict schemas (object / array levels).
const MAX_DEPTH: usize = 10;
/// Total object properties a strict schema may declare.
const MAX_PROPERTIES: usize = 5000;
/// Values one strict `enum` may list.
const MAX_ENUM_VALUES: usize = 1000;
/// String formats strict mode accepts.
const FORMATS: &[&str] =
    &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];
/// JSON Schema type names.
const TYPES: &[&str] = &["string", "number", "integer", "boolean", "object", "array", "null"];

/// Why a schema cannot be expressed in strict mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StrictError {
    /// JSON-pointer-like location of the offending node (`""` for the root).
    pub(crate) path: String,
    /// What is wrong there.
    pub(crate) reason: String,
}

impl std::fmt::Display for StrictError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() { "#" } else { self.path.as_str() };
        write!(f, "{path}: {}", self.reason)
    }
}

fn fail<T>(path: &str, reason: impl Into<String>) -> Result<T, StrictError> {
    Err(StrictError { path: path.to_owned(), reason: reason.into() })
}

/// The outcome of [`resolve_tool_list`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolListStrictness {
    /// The `strict` flag to send on every tool (`None`: omit the field).
    pub(crate) strict: Option<bool>,
    /// The parameters to send, in input order.
    pub(crate) parameters: Vec<Value>,
    /// When strict was requested but refused: the first tool index and the reason.
    pub(crate) downgraded: Option<(usize, StrictError)>,
}

/// OpenClaw's whole-list rule: with `setting == Some(true)` every tool is converted with
/// [`to_strict`]; if any conversion fails, every tool is sent with `strict: false` and its
/// original parameters. `Some(false)` sends `strict: false`, `None` omits the flag; both
/// keep the parameters unchanged.
pub(crate) fn resolve_tool_list(
    parameters: &[&Value],
    setting: Option<bool>,
) -> ToolListStrictness {
    let originals = || parameters.iter().map(|p| (*p).clone()).collect::<Vec<_>>();
    if setting != Some(true) {
        return ToolListStrictness { strict: setting, parameters: originals(), downgraded: None };
    }
    let mut converted = Vec::with_capacity(parameters.len());
    for (index, schema) in parameters.iter().enumerate() {
        match to_strict(schema) {
            Ok(strict) => converted.push(strict),
            Err(error) => {
                return ToolListStrictness {
                    strict: Some(false),
                    parameters: originals(),
                    downgraded: Some((index, error)),
                };
            }
        }
    }
    ToolListStrictness { strict: Some(true), parameters: converted, downgraded: None }
}

/// Converts a tool's parameter schema to an equivalent strict-mode schema, or says why it
/// cannot be expressed strictly. The root must be an object schema.
pub(crate) fn to_strict(schema: &Value) -> Result<Value, StrictError> {
    let Some(map) = schema.as_object() else {
        return fail("", "the root schema must be a JSON object");
    };
    if map.contains_key("anyOf") {
        return fail("", "a root `anyOf` cannot be strict");
    }
    if !is_object_schema(map) {
        return fail("", "the root schema must have type \"object\"");
    }
    if type_names(map).contains(&"null") {
        return fail("", "the root schema cannot be nullable");
    }
    let mut walker = Walker { properties: 0 };
    walker.node(schema, "", 0, true)
}

struct Walker {
    properties: usize,
}

impl Walker {
    fn node(
        &mut self,
        schema: &Value,
        path: &str,
        depth: usize,
        root: bool,
    ) -> Result<Value, StrictError> {
        if depth > MAX_DEPTH {
            return fail(path, format!("nesting deeper than {MAX_DEPTH} levels"));
        }
        let Some(map) = schema.as_object() else {
            return fail(path, "boolean schemas cannot be strict");
        };
        let mut out = Map::new();
        for (key, value) in map {
            let here = format!("{path}/{key}");
            let converted = match key.as_str() {
                "description" | "title" | "default" => value.clone(),
                "$schema" if root => continue,
                "type" => {
                    check_type(value, &here)?;
                    value.clone()
                }
                "enum" => match value.as_array() {
                    Some(values) if !values.is_empty() && values.len() <= MAX_ENUM_VALUES => {
                        value.clone()
                    }
                    Some(values) if values.len() > MAX_ENUM_VALUES => {
                        return fail(&here, format!("more than {MAX_ENUM_VALUES} enum values"));
                    }
                    _ => return fail(&here, "`enum` must be a non-empty array"),
                },
                "const" => value.clone(),
                "properties" => {
                    let Some(props) = value.as_object() else {
                        return fail(&here, "`properties` must be an object");
                    };
                    let mut converted = Map::new();
                    for (name, prop) in props {
                        self.properties += 1;
                        if self.properties > MAX_PROPERTIES {
                            return fail(&here, format!("more than {MAX_PROPERTIES} properties"));
                        }
                        let prop_path = format!("{here}/{}", escape_pointer(name));
                        converted
                            .insert(name.clone(), self.node(prop, &prop_path, depth + 1, false)?);
                    }
                    Value::Object(converted)
                }
                "required" => match value.as_array() {
                    Some(names) if names.iter().all(Value::is_string) => value.clone(),
                    _ => return fail(&here, "`required` must be an array of strings"),
                },
                "additionalProperties" => match value {
                    Value::Bool(false) => value.clone(),
                    _ => {
                        return fail(
                            &here,
                            "only `additionalProperties: false` can be strict (an open object would be narrowed)",
                        );
                    }
                },
                "items" => {
                    if !value.is_object() {
                        return fail(&here, "tuple or boolean `items` cannot be strict");
                    }
                    self.node(value, &here, depth + 1, false)?
                }
                "minItems" | "maxItems" => {
                    if value.as_u64().is_none() {
                        return fail(&here, format!("`{key}` must be a non-negative integer"));
                    }
                    value.clone()
                }
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => {
                    if !value.is_number() {
                        return fail(&here, format!("`{key}` must be a number"));
                    }
                    value.clone()
                }
                "pattern" => {
                    if !value.is_string() {
                        return fail(&here, "`pattern` must be a string");
                    }
                    value.clone()
                }
                "format" => match value.as_str() {
                    Some(f) if FORMATS.contains(&f) => value.clone(),
                    _ => {
                        return fail(
                            &here,
                            format!("format {value} is not supported in strict mode"),
                        );
                    }
                },
                "anyOf" => {
                    let Some(branches) = value.as_array().filter(|b| !b.is_empty()) else {
                        return fail(&here, "`anyOf` must be a non-empty array");
                    };
                    let mut converted = Vec::with_capacity(branches.len());
                    for (i, branch) in branches.iter().enumerate() {
                        converted.push(self.node(branch, &format!("{here}/{i}"), depth, false)?);
                    }
                    Value::Array(converted)
                }
                "$ref" => match value.as_str() {
                    Some(r) if r.starts_with('#') => value.clone(),
                    _ => return fail(&here, "only local `$ref`s (`#...`) can be strict"),
                },
                "$defs" | "definitions" => {
                    let Some(defs) = value.as_object() else {
                        return fail(&here, format!("`{key}` must be an object"));
                    };
                    let mut converted = Map::new();
                    for (name, def) in defs {
                        let def_path = format!("{here}/{}", escape_pointer(name));
                        converted.insert(name.clone(), self.node(def, &def_path, 0, false)?);
                    }
                    Value::Object(converted)
                }
                other => {
                    return fail(
                        &here,
                        format!("keyword `{other}` is not supported in strict mode"),
                    );
                }
            };
            out.insert(key.clone(), converted);
        }

        if out.contains_key("$ref")
            && out
                .keys()
                .any(|k| !matches!(k.as_str(), "$ref" | "description" | "title" | "default"))
        {
            return fail(path, "`$ref` with sibling constraints cannot be strict");
        }
        let typed = ["type", "enum", "const", "anyOf", "$ref"].iter().any(|k| out.contains_key(*k));
        if !typed {
            return fail(path, "a schema without `type` accepts any value and cannot be strict");
        }
        if is_object_schema(&out) {
            self.close_object(&mut out, path, root)?;
        }
        Ok(Value::Object(out))
    }

    /// Makes every property required (widening optional ones to nullable) and closes the object.
    fn close_object(
        &mut self,
        out: &mut Map<String, Value>,
        path: &str,
        root: bool,
    ) -> Result<(), StrictError> {
        if !out.contains_key("properties") {
            // A root object without `properties` is a tool without arguments (OpenClaw's
            // normalizer gives it `properties: {}`); elsewhere it is an open map, unless it
            // is closed already.
            if root || out.get("additionalProperties") == Some(&Value::Bool(false)) {
                out.insert("properties".to_owned(), Value::Object(Map::new()));
            } else {
                return fail(
                    path,
                    "an object without `properties` accepts any keys and cannot be strict",
                );
            }
        }
        let required: Vec<String> = match out.get("required").and_then(Value::as_array) {
            Some(names) => names.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            None => Vec::new(),
        };
        let Some(Value::Object(props)) = out.get_mut("properties") else {
            return fail(path, "`properties` must be an object");
        };
        if let Some(missing) = required.iter().find(|name| !props.contains_key(name.as_str())) {
            return fail(
                path,
                format!("required property `{missing}` is not declared in `properties`"),
            );
        }
        let mut all = Vec::with_capacity(props.len());
        for (name, prop) in props.iter_mut() {
            if !required.contains(name) {
                let taken = std::mem::take(prop);
                *prop = make_nullable(taken);
            }
            all.push(Value::String(name.clone()));
        }
        out.insert("required".to_owned(), Value::Array(all));
        out.insert("additionalProperties".to_owned(), Value::Bool(false));
        Ok(())
    }
}

fn escape_pointer(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

fn check_type(value: &Value, path: &str) -> Result<(), StrictError> {
    match value {
        Value::String(t) if TYPES.contains(&t.as_str()) => Ok(()),
        Value::Array(types) if !types.is_empty() => {
            let mut seen: Vec<&str> = Vec::new();
            for t in types {
                match t.as_str() {
                    Some(name) if TYPES.contains(&name) && !seen.contains(&name) => seen.push(name),
                    _ => return fail(path, format!("invalid type list {value}")),
                }
            }
            Ok(())
        }
        _ => fail(path, format!("invalid type {value}")),
    }
}

fn type_names(map: &Map<String, Value>) -> Vec<&str> {
    match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn is_object_schema(map: &Map<String, Value>) -> bool {
    let types = type_names(map);
    types.contains(&"object") || (types.is_empty() && map.contains_key("properties"))
}

/// Whether `schema` (without resolving `$ref`s) accepts `null`.
fn accepts_null(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else { return schema == &Value::Bool(true) };
    if type_names(map).contains(&"null") {
        return true;
    }
    if let Some(values) = map.get("enum").and_then(Value::as_array) {
        return values.iter().any(Value::is_null);
    }
    if let Some(c) = map.get("const") {
        return c.is_null();
    }
    if let Some(branches) = map.get("anyOf").and_then(Value::as_array) {
        return branches.iter().any(accepts_null);
    }
    false
}

/// Widens a (strict-converted) schema so it also accepts `null`.
fn make_nullable(schema: Value) -> Value {
    if accepts_null(&schema) {
        return schema;
    }
    let Value::Object(mut map) = schema else { return schema };
    let null_branch = || Value::Object(Map::from_iter([("type".to_owned(), Value::from("null"))]));
    if map.contains_key("$ref") || map.contains_key("const") {
        return Value::Object(Map::from_iter([(
            "anyOf".to_owned(),
            Value::Array(vec![Value::Object(map), null_branch()]),
        )]));
    }
    if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
        branches.push(null_branch());
        return Value::Object(map);
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.push(Value::Null);
    }
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let single = std::mem::take(t);
            map.insert(
                "type".to_owned(),
                Value::Array(vec![Value::String(single), Value::from("null")]),
            );
        }
        Some(Value::Array(types)) => types.push(Value::from("null")),
        _ => {}
    }
    Value::Object(map)
}

/// Undoes the optional-to-nullable widening on received arguments: removes a `null` value
/// of a property that is optional in the *original* schema and whose original schema does
/// not accept `null` (so `null` can only mean "absent"). Recurses into nested objects and
/// arrays; resolves local `#/$defs/...` and `#/definitions/...` references.
///
/// Providers that send strict schemas need this applied to tool-call arguments before
/// validation (see the crate docs): it belongs in llm-core's validation step.
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "to be applied by llm-core's validation; tested here")
)]
pub(crate) fn restore_optional_nulls(arguments: &mut Value, original: &Value) {
    restore(arguments, original, original, 0);
}

fn restore(value: &mut Value, schema: &Value, root: &Value, depth: usize) {
    if depth > 64 {
        return;
    }
    let Some(map) = schema.as_object() else { return };
    if let Some(target) = map.get("$ref").and_then(Value::as_str).and_then(|r| resolve_ref(root, r))
    {
        restore(value, target, root, depth + 1);
        return;
    }
    match value {
        Value::Object(args) => {
            let Some(props) = map.get("properties").and_then(Value::as_object) else { return };
            let required: Vec<&str> = map
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            args.retain(|name, v| {
                !(v.is_null()
                    && !required.contains(&name.as_str())
                    && props.get(name).is_some_and(|p| !accepts_null_resolved(p, root)))
            });
            for (name, v) in args.iter_mut() {
                if let Some(prop) = props.get(name) {
                    restore(v, prop, root, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = map.get("items").filter(|s| s.is_object()) {
                for item in items {
                    restore(item, item_schema, root, depth + 1);
                }
            }
        }
        _ => {}
    }
}

fn accepts_null_resolved(schema: &Value, root: &Value) -> bool {
    match schema.get("$ref").and_then(Value::as_str).and_then(|r| resolve_ref(root, r)) {
        Some(target) => accepts_null(target),
        None => accepts_null(schema),
    }
}

fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;
    use serde_json::json;

    fn strict(schema: Value) -> Value {
        to_strict(&schema).unwrap()
    }

    fn refused(schema: Value) -> StrictError {
        to_strict(&schema).unwrap_err()
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
        assert_eq!(
            out["properties"]["filter"]["properties"]["tag"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(out["properties"]["items"]["type"], json!("array"));
        assert_eq!(
            out["properties"]["main"],
            json!({"anyOf": [{"$ref": "#/$defs/item", "description": "Main item"}, {"type": "null"}]})
        );
        assert_eq!(out["properties"]["kind"], json!({"anyOf": [{"const": "a"}, {"type": "null"}]}));
        assert_eq!(out["properties"]["either"]["anyOf"].as_array().unwrap().len(), 3);
        assert_eq!(out["$defs"]["item"]["additionalProperties"], json!(false));
        assert_eq!(out["required"], json!(["filter", "items", "main", "kind", "either"]));
    }

    #[test]
    fn tool_without_arguments_is_strict() {
        let expected = json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false});
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
    fn schemas_that_would_be_narrowed_are_refused() {
        let cases = [
            json!({"type": "object", "properties": {"m": {"type": "object"}}}),
            json!({"type": "object", "properties": {}, "additionalProperties": true}),
            json!({"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}),
            json!({"type": "object", "properties": {"a": {}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}}),
            json!({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}}),
            json!({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}]}}}),
            json!({"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}}),
            json!({"type": "object", "properties": {"a": {"$ref": "http://x/y"}}}),
            json!({"type": "object", "properties": {"a": {"type": "strin"}}}),
            json!({"type": "object", "properties": {}, "required": ["ghost"]}),
            json!({"anyOf": [{"type": "object", "properties": {}}]}),
            json!({"type": "string"}),
            json!(true),
        ];
        for case in cases {
            assert!(to_strict(&case).is_err(), "accepted {case}");
        }
        let error = refused(
            json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}}),
        );
        assert_eq!(error.path, "/properties/a/minLength");
        assert_eq!(
            error.to_string(),
            "/properties/a/minLength: keyword `minLength` is not supported in strict mode"
        );
    }

    #[test]
    fn limits_are_enforced() {
        let mut schema = json!({"type": "string"});
        for _ in 0..=MAX_DEPTH {
            schema = json!({"type": "object", "properties": {"x": schema}, "required": ["x"]});
        }
        assert!(refused(schema).reason.contains("nesting"));
        let values: Vec<Value> = (0..=MAX_ENUM_VALUES).map(Value::from).collect();
        assert!(
            refused(json!({"type": "object", "properties": {"e": {"enum": values}}}))
                .reason
                .contains("enum")
        );
    }

    #[test]
    fn conversion_is_idempotent() {
        let once = strict(json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/x"}]}},
            "$defs": {"x": {"type": "object", "properties": {"y": {"enum": [1, 2]}}}}
        }));
        assert_eq!(strict(once.clone()), once);
    }

    #[test]
    fn whole_list_rule() {
        let good = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let bad = json!({"type": "object", "properties": {"a": {"anyOf": [{"type": "object"}]}}});
        let all_good = resolve_tool_list(&[&good, &good], Some(true));
        assert_eq!(all_good.strict, Some(true));
        assert_eq!(all_good.parameters[0]["additionalProperties"], json!(false));
        let mixed = resolve_tool_list(&[&good, &bad], Some(true));
        assert_eq!(mixed.strict, Some(false));
        assert_eq!(mixed.parameters, vec![good.clone(), bad.clone()]);
        assert_eq!(mixed.downgraded.as_ref().map(|d| d.0), Some(1));
        assert_eq!(resolve_tool_list(&[&good], None).strict, None);
        assert_eq!(resolve_tool_list(&[&good], Some(false)).parameters, vec![good]);
    }

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
        let mut args = json!({
            "city": null, "days": null, "note": null,
            "inner": {"x": null}, "list": [{"y": null}, {"y": 2}]
        });
        restore_optional_nulls(&mut args, &original);
        assert_eq!(args, json!({"city": null, "note": null, "inner": {}, "list": [{}, {"y": 2}]}));
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
        let mut sent = json!({"a": "x", "b": null});
        assert!(
            strict_schema["properties"]["b"]["type"].as_array().unwrap().contains(&json!("null"))
        );
        restore_optional_nulls(&mut sent, &original);
        assert_eq!(sent, json!({"a": "x"}));
    }
}
