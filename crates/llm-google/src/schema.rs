//! Tool-parameter schemas for Gemini (pure).
//!
//! Two targets:
//! - [`for_json_schema`] feeds `parametersJsonSchema` (the default). Gemini accepts
//!   JSON Schema there, with two rules it still enforces: a node that holds `$ref`
//!   may only carry `description` and `default` beside it, and `$ref`s must resolve
//!   inside the schema. So local `$ref`s are inlined (a recursive one stays a `$ref`
//!   into a rebuilt `$defs`, which Gemini supports), a `$ref` with other siblings is
//!   wrapped in `anyOf`, and meta keywords (`$schema`, `$id`, `$comment`, ...) go.
//! - [`for_openapi`] feeds the legacy `parameters` field (OpenAPI 3.0 subset): refs
//!   are inlined (a recursive one becomes a plain `object`), `[T, "null"]` and
//!   `anyOf: [X, {type: null}]` become `nullable`, `const` and enums become string
//!   enums, `allOf` is merged, and every keyword outside Gemini's `Schema` message is
//!   removed.
//!
//! Both walk only schema positions (`properties`, `items`, `anyOf`, ...), never
//! data (`enum`, `const`, `default`, `examples`), and both are bounded: at most
//! [`MAX_EXPANSIONS`] `$ref` expansions per schema, so a hostile schema cannot blow up.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// Upper bound on `$ref` expansions per schema; past it references are kept
/// (JSON Schema mode) or cut to `object` (OpenAPI mode).
const MAX_EXPANSIONS: usize = 2000;

/// Keywords whose value is a map from names to schemas.
const SCHEMA_MAPS: &[&str] = &["properties", "patternProperties", "dependentSchemas"];
/// Keywords whose value is one schema (or, for `items`, possibly an array of schemas).
const SCHEMA_SINGLE: &[&str] = &[
    "items",
    "additionalItems",
    "additionalProperties",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];
/// Keywords whose value is an array of schemas.
const SCHEMA_LISTS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
/// Meta keywords dropped in JSON Schema mode (references are resolved by pointer).
const META: &[&str] =
    &["$schema", "$id", "$anchor", "$dynamicAnchor", "$dynamicRef", "$vocabulary", "$comment"];

#[derive(Clone, Copy, PartialEq, Eq)]
enum OnCycle {
    /// Keep a `$ref` into the rebuilt `$defs`.
    KeepRef,
    /// Replace the reference with a plain object schema.
    Cut,
}

struct Inliner<'a> {
    root: &'a Value,
    mode: OnCycle,
    /// References being expanded (cycle detection).
    stack: Vec<String>,
    /// References kept as `$ref`: pointer -> `$defs` name.
    kept: BTreeMap<String, String>,
    expansions: usize,
}

impl<'a> Inliner<'a> {
    fn new(root: &'a Value, mode: OnCycle) -> Self {
        Inliner { root, mode, stack: Vec::new(), kept: BTreeMap::new(), expansions: 0 }
    }

    /// The schema at a local reference (`#`, `#/$defs/X`, any JSON pointer).
    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let pointer = reference.strip_prefix('#')?;
        if pointer.is_empty() {
            return Some(self.root);
        }
        self.root.pointer(pointer)
    }

    /// The `$defs` name for a kept reference (stable, unique).
    fn def_name(&mut self, reference: &str) -> String {
        if let Some(name) = self.kept.get(reference) {
            return name.clone();
        }
        let base = if reference == "#" {
            self.root
                .get("title")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .unwrap_or("Root")
                .to_owned()
        } else {
            let last = reference.rsplit('/').next().unwrap_or("Def");
            let cleaned: String = last
                .replace("~1", "/")
                .replace("~0", "~")
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            if cleaned.is_empty() { "Def".to_owned() } else { cleaned }
        };
        let mut name = base.clone();
        let mut n = 2;
        while self.kept.values().any(|v| *v == name) {
            name = format!("{base}{n}");
            n += 1;
        }
        self.kept.insert(reference.to_owned(), name.clone());
        name
    }

    fn node(&mut self, node: &Value) -> Value {
        let Value::Object(map) = node else { return node.clone() };
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            return self.reference(reference, map);
        }
        let mut out = Map::new();
        for (key, value) in map {
            if key == "$defs" || key == "definitions" || key == "$ref" {
                continue;
            }
            out.insert(key.clone(), self.child(key, value));
        }
        Value::Object(out)
    }

    /// Recurses into `value` if `key` holds schemas; copies data keywords verbatim.
    fn child(&mut self, key: &str, value: &Value) -> Value {
        if SCHEMA_MAPS.contains(&key) {
            if let Value::Object(m) = value {
                return Value::Object(m.iter().map(|(k, v)| (k.clone(), self.node(v))).collect());
            }
        } else if SCHEMA_LISTS.contains(&key) || (key == "items" && value.is_array()) {
            if let Value::Array(items) = value {
                return Value::Array(items.iter().map(|v| self.node(v)).collect());
            }
        } else if SCHEMA_SINGLE.contains(&key) {
            return self.node(value);
        }
        value.clone()
    }

    fn reference(&mut self, reference: &str, map: &Map<String, Value>) -> Value {
        let siblings: Vec<(&String, &Value)> = map
            .iter()
            .filter(|(k, _)| {
                k.as_str() != "$ref" && k.as_str() != "$defs" && k.as_str() != "definitions"
            })
            .collect();
        let target = self.resolve(reference);
        let cyclic = self.stack.iter().any(|r| r == reference);
        let exhausted = self.expansions >= MAX_EXPANSIONS;
        let Some(target) = target else {
            // Unresolvable (remote or dangling): drop the reference, keep the rest.
            let mut out = Map::new();
            for (k, v) in siblings {
                out.insert(k.clone(), self.child(k, v));
            }
            return Value::Object(out);
        };
        if cyclic || exhausted {
            return match self.mode {
                OnCycle::KeepRef => {
                    let name = self.def_name(reference);
                    let r = Value::String(format!("#/$defs/{name}"));
                    let mut extra = Map::new();
                    let mut kept = Map::new();
                    kept.insert("$ref".to_owned(), r);
                    for (k, v) in siblings {
                        if k == "description" || k == "default" {
                            kept.insert(k.clone(), v.clone());
                        } else {
                            extra.insert(k.clone(), self.child(k, v));
                        }
                    }
                    if extra.is_empty() {
                        Value::Object(kept)
                    } else {
                        // Gemini allows only description/default beside `$ref`.
                        let mut wrapped = Map::new();
                        wrapped.insert("anyOf".to_owned(), Value::Array(vec![Value::Object(kept)]));
                        for (k, v) in extra {
                            wrapped.insert(k, v);
                        }
                        Value::Object(wrapped)
                    }
                }
                OnCycle::Cut => {
                    let mut out = Map::new();
                    out.insert("type".to_owned(), Value::String("object".to_owned()));
                    for (k, v) in siblings {
                        if k == "description" || k == "title" {
                            out.insert(k.clone(), v.clone());
                        }
                    }
                    Value::Object(out)
                }
            };
        }
        self.expansions += 1;
        self.stack.push(reference.to_owned());
        let expanded = self.node(target);
        self.stack.pop();
        let mut out = match expanded {
            Value::Object(m) => m,
            // A boolean schema: `true` is "anything", `false` cannot be expressed; both become {}.
            _ => Map::new(),
        };
        for (k, v) in siblings {
            let v = self.child(k, v);
            out.insert(k.clone(), v);
        }
        Value::Object(out)
    }
}

/// Drops meta keywords at every schema position.
fn strip_meta(node: &mut Value) {
    let Value::Object(map) = node else { return };
    map.retain(|k, _| !META.contains(&k.as_str()));
    for (key, value) in map.iter_mut() {
        if SCHEMA_MAPS.contains(&key.as_str()) || key == "$defs" {
            if let Value::Object(m) = value {
                m.values_mut().for_each(strip_meta);
            }
        } else if SCHEMA_LISTS.contains(&key.as_str()) || SCHEMA_SINGLE.contains(&key.as_str()) {
            match value {
                Value::Array(items) => items.iter_mut().for_each(strip_meta),
                other => strip_meta(other),
            }
        }
    }
}

fn empty_object_schema() -> Value {
    let mut m = Map::new();
    m.insert("type".to_owned(), Value::String("object".to_owned()));
    m.insert("properties".to_owned(), Value::Object(Map::new()));
    Value::Object(m)
}

/// Whether a key the rewrite acts on (`$ref`, `$defs`, `definitions`, a meta keyword)
/// appears at any depth, data positions included: without one the rewrite is a copy.
fn has_rewritten_keys(node: &Value) -> bool {
    match node {
        Value::Object(map) => map.iter().any(|(key, value)| {
            key.starts_with('$')
                && (key == "$ref" || key == "$defs" || META.contains(&key.as_str()))
                || key == "definitions"
                || has_rewritten_keys(value)
        }),
        Value::Array(items) => items.iter().any(has_rewritten_keys),
        _ => false,
    }
}

/// The schema for `parametersJsonSchema`: see the module docs.
pub(crate) fn for_json_schema(schema: &Value) -> Value {
    if !schema.is_object() || schema.as_object().is_some_and(Map::is_empty) {
        return empty_object_schema();
    }
    // Most tools' schemas hold no reference and no meta keyword: one scan and a copy,
    // instead of a map rebuilt (and every key hashed) per node on every request.
    if !has_rewritten_keys(schema) {
        let mut out = schema.clone();
        add_object_type(&mut out);
        return out;
    }
    rewrite_for_json_schema(schema)
}

/// A root with `properties` and no `type` is an object.
fn add_object_type(out: &mut Value) {
    if let Value::Object(map) = out
        && !map.contains_key("type")
        && map.contains_key("properties")
    {
        map.insert("type".to_owned(), Value::String("object".to_owned()));
    }
}

/// [`for_json_schema`] by the full rewrite, whatever the schema holds.
pub(crate) fn rewrite_for_json_schema(schema: &Value) -> Value {
    if !schema.is_object() || schema.as_object().is_some_and(Map::is_empty) {
        return empty_object_schema();
    }
    let mut inliner = Inliner::new(schema, OnCycle::KeepRef);
    // A reference to the root is recursion from the start.
    inliner.stack.push("#".to_owned());
    let mut out = inliner.node(schema);
    inliner.stack.clear();
    // Definitions kept for recursion, each normalized with itself on the stack so
    // self-references stay references. New kept references may appear while doing so.
    let mut defs = Map::new();
    let mut done: Vec<String> = Vec::new();
    loop {
        let pending: Vec<(String, String)> = inliner
            .kept
            .iter()
            .filter(|(r, _)| !done.contains(r))
            .map(|(r, n)| (r.clone(), n.clone()))
            .collect();
        if pending.is_empty() {
            break;
        }
        for (reference, name) in pending {
            done.push(reference.clone());
            let Some(target) = inliner.resolve(&reference) else { continue };
            inliner.stack.push(reference.clone());
            let body = inliner.node(target);
            inliner.stack.pop();
            defs.insert(name, body);
        }
    }
    if let Value::Object(map) = &mut out
        && !defs.is_empty()
    {
        map.insert("$defs".to_owned(), Value::Object(defs));
    }
    add_object_type(&mut out);
    strip_meta(&mut out);
    out
}

/// The schema for the legacy `parameters` field, or `None` when the tool takes no
/// parameters (Gemini rejects an `OBJECT` with empty `properties`).
pub(crate) fn for_openapi(schema: &Value) -> Option<Value> {
    if !schema.is_object() {
        return None;
    }
    let mut inliner = Inliner::new(schema, OnCycle::Cut);
    let inlined = inliner.node(schema);
    let Value::Object(mut root) = sanitize(&inlined) else { return None };
    let has_properties =
        root.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty());
    if !has_properties {
        return None;
    }
    if !root.contains_key("type") {
        root.insert("type".to_owned(), Value::String("object".to_owned()));
    }
    Some(Value::Object(root))
}

/// Formats Gemini's `Schema` accepts, by type.
fn format_allowed(ty: Option<&str>, format: &str) -> bool {
    match ty {
        Some("string") => matches!(format, "enum" | "date-time"),
        Some("integer") => matches!(format, "int32" | "int64"),
        Some("number") => matches!(format, "float" | "double"),
        _ => false,
    }
}

fn enum_value_as_string(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn is_null_only(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => {
            m.get("type").and_then(Value::as_str) == Some("null")
                && m.keys().all(|k| matches!(k.as_str(), "type" | "description" | "title"))
        }
        _ => false,
    }
}

/// One schema node into Gemini's OpenAPI-3.0 `Schema` subset.
fn sanitize(node: &Value) -> Value {
    let Value::Object(map) = node else { return Value::Object(Map::new()) };

    // Start from a merge of `allOf` members, then the node's own keywords win.
    let mut merged = Map::new();
    if let Some(Value::Array(all)) = map.get("allOf") {
        for member in all {
            if let Value::Object(m) = member {
                merge_into(&mut merged, m);
            }
        }
    }
    for (k, v) in map {
        if k != "allOf" {
            merged.insert(k.clone(), v.clone());
        }
    }
    let map = &merged;

    let mut nullable = map.get("nullable").and_then(Value::as_bool).unwrap_or(false);
    let mut ty: Option<String> = None;
    let mut type_variants: Vec<String> = Vec::new();
    match map.get("type") {
        Some(Value::String(t)) if t == "null" => nullable = true,
        Some(Value::String(t)) => ty = Some(t.clone()),
        Some(Value::Array(types)) => {
            for t in types.iter().filter_map(Value::as_str) {
                if t == "null" {
                    nullable = true;
                } else if !type_variants.iter().any(|v| v == t) {
                    type_variants.push(t.to_owned());
                }
            }
            if type_variants.len() == 1 {
                ty = type_variants.pop();
            }
        }
        _ => {}
    }

    // `anyOf` / `oneOf`: null variants become `nullable`; one remaining variant is merged.
    let mut any_of: Vec<Value> = Vec::new();
    let mut single_variant: Option<Map<String, Value>> = None;
    let union = map.get("anyOf").or_else(|| map.get("oneOf"));
    if let Some(Value::Array(variants)) = union {
        let mut kept = Vec::new();
        for v in variants {
            if is_null_only(v) {
                nullable = true;
                continue;
            }
            let s = sanitize(v);
            if s.get("nullable").and_then(Value::as_bool) == Some(true)
                && s.as_object().is_some_and(|m| m.len() == 1)
            {
                nullable = true;
                continue;
            }
            kept.push(s);
        }
        if let Some(merged) = merge_string_enums(&kept) {
            kept = vec![merged];
        }
        if kept.len() == 1 {
            if let Some(Value::Object(m)) = kept.pop() {
                single_variant = Some(m);
            }
        } else {
            any_of = kept;
        }
    }
    if !type_variants.is_empty() && ty.is_none() {
        any_of = type_variants
            .iter()
            .map(|t| {
                let mut m = Map::new();
                m.insert("type".to_owned(), Value::String(t.clone()));
                Value::Object(m)
            })
            .collect();
    }

    // Enums (and `const`) become string enums.
    let mut enum_values: Option<Vec<Value>> = None;
    let raw_enum = match (map.get("enum"), map.get("const")) {
        (Some(Value::Array(values)), _) => Some(values.clone()),
        (None, Some(c)) => Some(vec![c.clone()]),
        _ => None,
    };
    if let Some(values) = raw_enum {
        let mut strings = Vec::new();
        for v in &values {
            match enum_value_as_string(v) {
                Some(s) => {
                    if !strings.contains(&Value::String(s.clone())) {
                        strings.push(Value::String(s));
                    }
                }
                None => nullable = true,
            }
        }
        if !strings.is_empty() {
            enum_values = Some(strings);
            ty = Some("string".to_owned());
        }
    }

    let mut out = Map::new();
    // A single non-null union variant is the schema itself; this node's keywords refine it.
    if let Some(variant) = single_variant {
        out = variant;
    }
    if let Some(t) = &ty {
        out.insert("type".to_owned(), Value::String(t.clone()));
    }
    let out_type = out.get("type").and_then(Value::as_str).map(str::to_owned);
    if let Some(Value::String(f)) = map.get("format")
        && enum_values.is_none()
        && format_allowed(out_type.as_deref(), f)
    {
        out.insert("format".to_owned(), Value::String(f.clone()));
    }
    for key in ["title", "description"] {
        if let Some(Value::String(s)) = map.get(key) {
            out.insert(key.to_owned(), Value::String(s.clone()));
        }
    }
    if nullable {
        out.insert("nullable".to_owned(), Value::Bool(true));
    }
    if let Some(values) = enum_values {
        out.insert("enum".to_owned(), Value::Array(values));
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        let props: Map<String, Value> =
            props.iter().map(|(k, v)| (k.clone(), sanitize(v))).collect();
        if !props.is_empty() {
            let required: Vec<Value> = map
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter(|n| n.as_str().is_some_and(|n| props.contains_key(n)))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            if !out.contains_key("type") && enum_values_absent(&out) {
                out.insert("type".to_owned(), Value::String("object".to_owned()));
            }
            out.insert("properties".to_owned(), Value::Object(props));
            if !required.is_empty() {
                out.insert("required".to_owned(), Value::Array(required));
            }
        }
    }
    let items = match (map.get("items"), map.get("prefixItems")) {
        (Some(Value::Object(_)), _) => map.get("items").map(sanitize),
        (Some(Value::Array(list)), _) | (None, Some(Value::Array(list))) => tuple_items(list),
        _ => None,
    };
    if let Some(items) = items {
        out.insert("items".to_owned(), items);
    }
    if !any_of.is_empty() {
        out.insert("anyOf".to_owned(), Value::Array(any_of));
    }
    for key in [
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
        "minimum",
        "maximum",
    ] {
        if let Some(v) = map.get(key).filter(|v| v.is_number()) {
            out.insert(key.to_owned(), v.clone());
        }
    }
    if let Some(Value::String(p)) = map.get("pattern") {
        out.insert("pattern".to_owned(), Value::String(p.clone()));
    }
    if let Some(v) = map.get("default").filter(|v| !v.is_null()) {
        out.insert("default".to_owned(), v.clone());
    }
    if let Some(v) = map.get("example").filter(|v| !v.is_null()) {
        out.insert("example".to_owned(), v.clone());
    }
    if let Some(Value::Array(order)) = map.get("propertyOrdering") {
        out.insert("propertyOrdering".to_owned(), Value::Array(order.clone()));
    }
    Value::Object(out)
}

/// A union of plain string enums (schemars' unit-variant enums with doc comments,
/// `oneOf` of `const`s) is one string enum: Gemini handles that far better than `anyOf`.
fn merge_string_enums(variants: &[Value]) -> Option<Value> {
    if variants.len() < 2 {
        return None;
    }
    let mut values: Vec<Value> = Vec::new();
    for v in variants {
        let m = v.as_object()?;
        if m.get("type").and_then(Value::as_str) != Some("string")
            || !m.keys().all(|k| matches!(k.as_str(), "type" | "enum" | "description" | "title"))
        {
            return None;
        }
        for e in m.get("enum")?.as_array()? {
            if !values.contains(e) {
                values.push(e.clone());
            }
        }
    }
    let mut out = Map::new();
    out.insert("type".to_owned(), Value::String("string".to_owned()));
    out.insert("enum".to_owned(), Value::Array(values));
    Some(Value::Object(out))
}

fn enum_values_absent(out: &Map<String, Value>) -> bool {
    !out.contains_key("enum")
}

/// A tuple (`items: [...]` / `prefixItems`) has no OpenAPI-3.0 form: its members
/// become one `anyOf` item schema.
fn tuple_items(list: &[Value]) -> Option<Value> {
    let mut members: Vec<Value> = Vec::new();
    for v in list {
        let s = sanitize(v);
        if !members.contains(&s) {
            members.push(s);
        }
    }
    match members.len() {
        0 => None,
        1 => members.pop(),
        _ => {
            let mut m = Map::new();
            m.insert("anyOf".to_owned(), Value::Array(members));
            Some(Value::Object(m))
        }
    }
}

/// Merges an `allOf` member: properties and required lists are unioned, other
/// keywords keep the first value seen.
fn merge_into(target: &mut Map<String, Value>, member: &Map<String, Value>) {
    for (k, v) in member {
        match (k.as_str(), target.get_mut(k), v) {
            ("properties", Some(Value::Object(existing)), Value::Object(add)) => {
                for (name, schema) in add {
                    existing.entry(name.clone()).or_insert_with(|| schema.clone());
                }
            }
            ("required", Some(Value::Array(existing)), Value::Array(add)) => {
                for name in add {
                    if !existing.contains(name) {
                        existing.push(name.clone());
                    }
                }
            }
            (_, Some(_), _) => {}
            (_, None, _) => {
                target.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests;
