//! Lossless strict-mode normalization of tool parameter schemas (a schema is rewritten or sent non-strict,
//! never silently narrowed), shared by the OpenAI-style providers.
//!
//! OpenAI's strict mode (Structured Outputs for function tools) constrains decoding to a
//! subset of JSON Schema: every object lists *all* its properties in `required` and sets
//! `additionalProperties: false`; `allOf` / `oneOf` / `not` / conditionals, tuple `items`,
//! string lengths and most object size keywords are rejected. [`to_strict`] rewrites a
//! schema into that subset **without changing the set of arguments it describes**:
//!
//! * an optional property becomes required **and nullable** (`"type": "string"` becomes
//!   `["string", "null"]`, an `enum` gains `null`, an `anyOf` gains a `{"type": "null"}`
//!   branch, a `$ref` or `const` is wrapped in such an `anyOf`, its `title` and
//!   `description` kept outside);
//! * a missing `additionalProperties` becomes `false` on objects that declare `properties`
//!   (the universal tool-schema convention: the declared properties are the arguments; an
//!   explicit `true` or a schema is an open map and is *not* strict);
//! * annotations strict mode does not take (`default`, `examples`, `$comment`, `$schema`)
//!   are dropped: they constrain nothing;
//! * a root object without `properties` (a tool without arguments) gets `properties: {}`.
//!
//! The other half is [`StrictPlan`]: when the model answers `null` for a property that was
//! optional and whose original schema does not accept `null`, that `null` can only mean
//! "absent", and the property is removed again, so the arguments validate against the
//! *original* schema (and validation never coerces such a `null` into `""`, `0` or
//! `false`). [`NullFilter`] does this incrementally on streamed argument text, so
//! `toolcall_delta` fragments and the final arguments agree; [`StrictPlan::restore`] does
//! it on a parsed value.
//!
//! A schema that cannot be expressed strictly without loss gives [`NotStrict`] with the
//! path and the reason, never a silent narrowing: an unsupported keyword (`oneOf`,
//! `allOf`, `not`, `minLength`, `patternProperties`, ...), a free-form object, tuple
//! `items`, a schema without `type` / `enum` / `const` / `anyOf` / `$ref` (it accepts
//! anything), optional properties inside an `anyOf` branch (their `null`s could not be
//! told apart), a `$ref` with sibling constraints or to anything but `#`, `#/$defs/<name>`
//! or `#/definitions/<name>`, a root that is not a non-nullable object, or a schema over
//! OpenAI's documented limits (10 levels of nesting, 5000 properties, 1000 values per
//! `enum`).
//!
//! [`resolve_tool_list`] applies OpenClaw's whole-list rule on top: one tool that cannot be
//! made strict sends the whole list non-strict, every schema unchanged.
//!
//! ```
//! use llm_core::raw::strict::{NullFilter, to_strict};
//! use serde_json::json;
//!
//! let schema = json!({
//!     "type": "object",
//!     "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
//!     "required": ["city"]
//! });
//! let strict = to_strict(&schema).unwrap();
//! assert_eq!(strict.schema["properties"]["days"]["type"], json!(["integer", "null"]));
//! assert_eq!(strict.schema["required"], json!(["city", "days"]));
//!
//! // A strict model must answer `days`; `null` stands for "omitted" and is removed again.
//! let mut filter = NullFilter::new(std::sync::Arc::new(strict.plan));
//! let mut text = filter.push(r#"{"city":"Oslo","da"#);
//! text.push_str(&filter.push(r#"ys":null}"#));
//! assert_eq!(text, r#"{"city":"Oslo"}"#);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value};

/// Levels of object / array nesting a strict schema may have (OpenAI's limit).
const MAX_NESTING: usize = 10;
/// Object properties a strict schema may declare in total (OpenAI's limit).
const MAX_PROPERTIES: usize = 5000;
/// Values one strict `enum` may list (OpenAI's limit).
const MAX_ENUM_VALUES: usize = 1000;
/// Schema nodes on one path (`anyOf` branches included): a bound on recursion.
const MAX_NODE_DEPTH: usize = 128;
/// How many `$ref` hops one step may follow without descending into the value.
const MAX_REF_HOPS: usize = 32;
/// String formats strict mode supports.
const FORMATS: [&str; 9] =
    ["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];
/// JSON Schema type names.
const TYPES: [&str; 7] = ["string", "number", "integer", "boolean", "object", "array", "null"];

/// Why a schema cannot be sent in strict mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotStrict {
    /// JSON pointer of the offending node or keyword (`""` for the root), for example
    /// `/properties/a/minLength`.
    pub path: String,
    /// What is wrong there.
    pub reason: String,
}

impl std::fmt::Display for NotStrict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() { "#" } else { self.path.as_str() };
        write!(f, "{path}: {}", self.reason)
    }
}

impl std::error::Error for NotStrict {}

fn fail<T>(path: &str, reason: impl Into<String>) -> Result<T, NotStrict> {
    Err(NotStrict { path: path.to_owned(), reason: reason.into() })
}

/// A schema rewritten for strict mode, and the plan that undoes its nullable rewrite on
/// the model's arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct StrictSchema {
    /// The strict schema to send.
    pub schema: Value,
    /// How to turn the model's arguments back into arguments for the original schema.
    pub plan: StrictPlan,
}

/// How to turn strict-mode arguments back into arguments for the original schema: which
/// properties' `null` stands for "omitted". Built by [`to_strict`]; applied by
/// [`StrictPlan::restore`] on a value and by [`NullFilter`] on streamed text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StrictPlan {
    root: NullPlan,
    /// Plans of `$ref` targets, by the reference string (`#`, `#/$defs/<name>`, ...).
    defs: BTreeMap<String, NullPlan>,
}

/// Where a `null` in the returned arguments stands for an omitted optional property.
#[derive(Debug, Clone, Default, PartialEq)]
enum NullPlan {
    /// Nothing to undo below this node.
    #[default]
    Keep,
    /// An object: per property, whether `null` means absent, and the plan below it.
    Object(Vec<PropPlan>),
    /// An array: the plan for every element.
    Array(Box<NullPlan>),
    /// A `$ref` (the reference string).
    Ref(String),
}

/// The plan for one property of an object.
#[derive(Debug, Clone, PartialEq)]
struct PropPlan {
    name: String,
    drop_null: bool,
    plan: NullPlan,
}

impl StrictPlan {
    /// Whether restoring can never change anything (no property's `null` means "omitted"
    /// anywhere in the schema); a caller may then skip the [`NullFilter`].
    pub fn is_trivial(&self) -> bool {
        self.root == NullPlan::Keep
    }

    /// Removes, in place, the properties whose `null` stands for an omitted optional
    /// property; returns whether anything changed. Values of an unexpected shape are
    /// left alone. [`NullFilter`] gives the same result on streamed text.
    pub fn restore(&self, arguments: &mut Value) -> bool {
        self.apply(&self.root, arguments, MAX_REF_HOPS)
    }

    fn apply(&self, plan: &NullPlan, value: &mut Value, hops: usize) -> bool {
        match plan {
            NullPlan::Keep => false,
            NullPlan::Object(props) => {
                let Value::Object(map) = value else { return false };
                let mut changed = false;
                for prop in props {
                    let is_null = map.get(&prop.name).is_some_and(Value::is_null);
                    if is_null && prop.drop_null {
                        map.shift_remove(&prop.name);
                        changed = true;
                    } else if let Some(child) = map.get_mut(&prop.name) {
                        changed |= self.apply(&prop.plan, child, MAX_REF_HOPS);
                    }
                }
                changed
            }
            NullPlan::Array(item) => {
                let Value::Array(items) = value else { return false };
                let mut changed = false;
                for element in items {
                    changed |= self.apply(item, element, MAX_REF_HOPS);
                }
                changed
            }
            NullPlan::Ref(name) => match (hops.checked_sub(1), self.defs.get(name)) {
                (Some(left), Some(target)) => self.apply(target, value, left),
                _ => false,
            },
        }
    }

    /// Follows `$ref` plans (bounded).
    fn resolve(&self, plan: NullPlan) -> NullPlan {
        let mut plan = plan;
        for _ in 0..MAX_REF_HOPS {
            match plan {
                NullPlan::Ref(name) => plan = self.defs.get(&name).cloned().unwrap_or_default(),
                other => return other,
            }
        }
        NullPlan::Keep
    }
}

/// Rewrites a tool's parameter schema for strict mode, losslessly, or says why it cannot
/// be expressed strictly (see the module docs). The root must be a non-nullable object
/// schema.
pub fn to_strict(schema: &Value) -> Result<StrictSchema, NotStrict> {
    let Some(map) = schema.as_object() else {
        return fail("", "the root schema must be a JSON object");
    };
    if map.contains_key("anyOf") {
        return fail("", "a root `anyOf` cannot be strict");
    }
    let types = type_names(map);
    if !types.contains(&"object") {
        return fail("", "the root schema must have type \"object\"");
    }
    if types.contains(&"null") {
        return fail("", "the root schema cannot be nullable");
    }
    let mut walker =
        Walker { root: schema, defs: BTreeMap::new(), properties: 0, branches: Vec::new() };
    let (schema, root) = walker.node(schema, "", 0, 0)?;
    let Walker { mut defs, branches, .. } = walker;
    // A recursive `"$ref": "#"` restores like the root.
    defs.insert("#".to_owned(), root.clone());
    let live = live_defs(&defs);
    for (path, plan) in &branches {
        if simplify(plan, &live) != NullPlan::Keep {
            return fail(path, "optional properties inside an `anyOf` branch cannot be restored");
        }
    }
    let root = simplify(&root, &live);
    let defs = defs
        .iter()
        .filter(|(name, _)| live.contains(name.as_str()))
        .map(|(name, plan)| (name.clone(), simplify(plan, &live)))
        .collect();
    Ok(StrictSchema { schema, plan: StrictPlan { root, defs } })
}

/// The `$ref` targets below which some `null` may have to be dropped (the least fixpoint:
/// a definition is live if its plan drops a `null` itself or reaches a live definition).
fn live_defs(defs: &BTreeMap<String, NullPlan>) -> BTreeSet<&str> {
    let mut live = BTreeSet::new();
    loop {
        let before = live.len();
        for (name, plan) in defs {
            if !live.contains(name.as_str()) && drops_null(plan, &live) {
                live.insert(name.as_str());
            }
        }
        if live.len() == before {
            return live;
        }
    }
}

fn drops_null(plan: &NullPlan, live: &BTreeSet<&str>) -> bool {
    match plan {
        NullPlan::Keep => false,
        NullPlan::Object(props) => props.iter().any(|p| p.drop_null || drops_null(&p.plan, live)),
        NullPlan::Array(item) => drops_null(item, live),
        NullPlan::Ref(name) => live.contains(name.as_str()),
    }
}

/// `plan` without the parts that can never change anything.
fn simplify(plan: &NullPlan, live: &BTreeSet<&str>) -> NullPlan {
    match plan {
        NullPlan::Keep => NullPlan::Keep,
        NullPlan::Object(props) => {
            let props: Vec<PropPlan> = props
                .iter()
                .map(|p| PropPlan {
                    name: p.name.clone(),
                    drop_null: p.drop_null,
                    plan: simplify(&p.plan, live),
                })
                .filter(|p| p.drop_null || p.plan != NullPlan::Keep)
                .collect();
            if props.is_empty() { NullPlan::Keep } else { NullPlan::Object(props) }
        }
        NullPlan::Array(item) => match simplify(item, live) {
            NullPlan::Keep => NullPlan::Keep,
            item => NullPlan::Array(Box::new(item)),
        },
        NullPlan::Ref(name) if live.contains(name.as_str()) => NullPlan::Ref(name.clone()),
        NullPlan::Ref(_) => NullPlan::Keep,
    }
}

/// The outcome of [`resolve_tool_list`].
#[derive(Debug, Clone, PartialEq)]
pub struct ToolListStrictness {
    /// The `strict` flag to send on every tool (`None`: leave the field out).
    pub strict: Option<bool>,
    /// The parameters to send, in input order: the strict schemas when `strict` is
    /// `Some(true)`, else the input schemas unchanged.
    pub parameters: Vec<Value>,
    /// Per tool name, how to restore the arguments of a strict tool (only tools whose
    /// plan is not [trivial](StrictPlan::is_trivial); empty unless `strict` is
    /// `Some(true)`). Decoders give each call of such a tool a [`NullFilter`].
    pub plans: BTreeMap<String, Arc<StrictPlan>>,
    /// When strict was asked for but refused: the index of the first tool that cannot be
    /// strict, and why.
    pub downgraded: Option<(usize, NotStrict)>,
}

/// OpenClaw's whole-list rule over `(name, parameters)` pairs. With `setting ==
/// Some(true)` every schema is converted with [`to_strict`]; if any conversion fails,
/// every tool is sent `strict: false` with its original parameters. `Some(false)` sends
/// `strict: false` and `None` leaves the flag out; both keep the parameters unchanged.
///
/// The schemas are taken by value: those sent unchanged are moved into the result, not
/// copied (a request would otherwise copy every tool schema once more).
pub fn resolve_tool_list(tools: Vec<(&str, Value)>, setting: Option<bool>) -> ToolListStrictness {
    let unchanged = |tools: Vec<(&str, Value)>, strict, downgraded| ToolListStrictness {
        strict,
        parameters: tools.into_iter().map(|(_, schema)| schema).collect(),
        plans: BTreeMap::new(),
        downgraded,
    };
    if setting != Some(true) {
        return unchanged(tools, setting, None);
    }
    let mut parameters = Vec::with_capacity(tools.len());
    let mut plans = BTreeMap::new();
    let mut refused = None;
    for (index, (name, schema)) in tools.iter().enumerate() {
        match to_strict(schema) {
            Ok(StrictSchema { schema, plan }) => {
                parameters.push(schema);
                if !plan.is_trivial() {
                    plans.insert((*name).to_owned(), Arc::new(plan));
                }
            }
            Err(error) => {
                refused = Some((index, error));
                break;
            }
        }
    }
    match refused {
        Some(refused) => unchanged(tools, Some(false), Some(refused)),
        None => ToolListStrictness { strict: Some(true), parameters, plans, downgraded: None },
    }
}

struct Walker<'a> {
    /// The original schema, for resolving `$ref`s.
    root: &'a Value,
    defs: BTreeMap<String, NullPlan>,
    /// Properties declared so far.
    properties: usize,
    /// Plans of `anyOf` branches that are not trivially empty, checked once every
    /// definition is known.
    branches: Vec<(String, NullPlan)>,
}

/// The `type` keyword's names (empty when absent or malformed).
fn type_names(map: &Map<String, Value>) -> Vec<&str> {
    match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn check_type(value: &Value, path: &str) -> Result<(), NotStrict> {
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
            if seen.contains(&"object") && seen.iter().any(|t| *t != "object" && *t != "null") {
                return fail(path, "an object type mixed with other types cannot be strict");
            }
            Ok(())
        }
        _ => fail(path, format!("invalid type {value}")),
    }
}

/// A JSON-pointer token for `name`.
fn escape_pointer(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// Whether `reference` names the root or a top-level definition of `root`.
fn is_supported_ref(root: &Value, reference: &str) -> bool {
    if reference == "#" {
        return true;
    }
    let name = reference
        .strip_prefix("#/$defs/")
        .or_else(|| reference.strip_prefix("#/definitions/"))
        .filter(|name| !name.is_empty() && !name.contains('/'));
    name.is_some() && reference.strip_prefix('#').and_then(|p| root.pointer(p)).is_some()
}

impl Walker<'_> {
    /// Converts one schema node. `nesting` counts object / array levels (OpenAI's limit),
    /// `depth` every node on the path.
    fn node(
        &mut self,
        schema: &Value,
        path: &str,
        nesting: usize,
        depth: usize,
    ) -> Result<(Value, NullPlan), NotStrict> {
        if nesting > MAX_NESTING {
            return fail(path, format!("nesting deeper than {MAX_NESTING} levels"));
        }
        if depth > MAX_NODE_DEPTH {
            return fail(path, "the schema is nested too deeply");
        }
        let Some(map) = schema.as_object() else {
            return fail(path, "boolean schemas cannot be strict");
        };
        let is_object = type_names(map).contains(&"object");
        let mut out = Map::new();
        let mut plan = NullPlan::Keep;
        for (key, value) in map {
            let here = format!("{path}/{}", escape_pointer(key));
            let converted = match key.as_str() {
                "$schema" | "$comment" | "default" | "examples" => continue,
                "title" | "description" | "const" => value.clone(),
                "type" => {
                    check_type(value, &here)?;
                    value.clone()
                }
                "enum" => match value.as_array() {
                    Some(values) if values.len() > MAX_ENUM_VALUES => {
                        return fail(&here, format!("more than {MAX_ENUM_VALUES} enum values"));
                    }
                    Some(values) if !values.is_empty() => value.clone(),
                    _ => return fail(&here, "`enum` must be a non-empty array"),
                },
                "pattern" => {
                    if !value.is_string() {
                        return fail(&here, "`pattern` must be a string");
                    }
                    value.clone()
                }
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => {
                    if !value.is_number() {
                        return fail(&here, format!("`{key}` must be a number"));
                    }
                    value.clone()
                }
                "minItems" | "maxItems" => {
                    if value.as_u64().is_none() {
                        return fail(&here, format!("`{key}` must be a non-negative integer"));
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
                "properties" | "required" | "additionalProperties" => {
                    if !is_object {
                        return fail(&here, format!("`{key}` on a schema that is not an object"));
                    }
                    // Filled in by `object`, at this position.
                    Value::Null
                }
                "items" => {
                    if !value.is_object() {
                        return fail(&here, "tuple or boolean `items` cannot be strict");
                    }
                    let (items, item_plan) = self.node(value, &here, nesting + 1, depth + 1)?;
                    if item_plan != NullPlan::Keep {
                        plan = NullPlan::Array(Box::new(item_plan));
                    }
                    items
                }
                "anyOf" => {
                    let Some(branches) = value.as_array().filter(|b| !b.is_empty()) else {
                        return fail(&here, "`anyOf` must be a non-empty array");
                    };
                    let mut converted = Vec::with_capacity(branches.len());
                    for (i, branch) in branches.iter().enumerate() {
                        let branch_path = format!("{here}/{i}");
                        let (s, p) = self.node(branch, &branch_path, nesting, depth + 1)?;
                        if p != NullPlan::Keep {
                            // Which branch a value took is unknown: its nulls could not
                            // be restored (unless the plan turns out to be empty).
                            self.branches.push((branch_path, p));
                        }
                        converted.push(s);
                    }
                    Value::Array(converted)
                }
                "$ref" => match value.as_str() {
                    Some(target) if is_supported_ref(self.root, target) => {
                        plan = NullPlan::Ref(target.to_owned());
                        value.clone()
                    }
                    _ => {
                        return fail(
                            &here,
                            "only `$ref`s to `#` or to an existing `#/$defs/<name>` / `#/definitions/<name>` can be strict",
                        );
                    }
                },
                "$defs" | "definitions" => {
                    if !path.is_empty() {
                        return fail(&here, format!("`{key}` below the root cannot be strict"));
                    }
                    let Some(defs) = value.as_object() else {
                        return fail(&here, format!("`{key}` must be an object"));
                    };
                    let mut converted = Map::new();
                    for (name, def) in defs {
                        let def_path = format!("{here}/{}", escape_pointer(name));
                        let (s, p) = self.node(def, &def_path, 0, depth + 1)?;
                        self.defs.insert(format!("#{def_path}"), p);
                        converted.insert(name.clone(), s);
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
            && out.keys().any(|k| !matches!(k.as_str(), "$ref" | "title" | "description"))
        {
            return fail(path, "`$ref` with sibling constraints cannot be strict");
        }
        if !["type", "enum", "const", "anyOf", "$ref"].iter().any(|k| out.contains_key(*k)) {
            return fail(path, "a schema without `type` accepts any value and cannot be strict");
        }
        if is_object {
            plan = self.object(map, &mut out, path, nesting, depth)?;
        }
        Ok((Value::Object(out), plan))
    }

    /// Rewrites `properties`, `required` and `additionalProperties` of an object node:
    /// every property required (optional ones made nullable), the object closed.
    fn object(
        &mut self,
        map: &Map<String, Value>,
        out: &mut Map<String, Value>,
        path: &str,
        nesting: usize,
        depth: usize,
    ) -> Result<NullPlan, NotStrict> {
        let closed = match map.get("additionalProperties") {
            None => false,
            Some(Value::Bool(false)) => true,
            Some(_) => {
                return fail(
                    &format!("{path}/additionalProperties"),
                    "only `additionalProperties: false` can be strict (an open object would be narrowed)",
                );
            }
        };
        let empty = Map::new();
        let props = match map.get("properties") {
            Some(Value::Object(p)) => p,
            Some(_) => {
                return fail(&format!("{path}/properties"), "`properties` must be an object");
            }
            // A root object without `properties` is a tool without arguments; elsewhere
            // it is an open map, unless it is closed already.
            None if path.is_empty() || closed => &empty,
            None => {
                return fail(
                    path,
                    "an object without `properties` accepts any keys and cannot be strict",
                );
            }
        };
        let required: Vec<&str> = match map.get("required") {
            None => Vec::new(),
            Some(Value::Array(names)) => names
                .iter()
                .map(|n| {
                    n.as_str().ok_or_else(|| NotStrict {
                        path: format!("{path}/required"),
                        reason: "`required` must be an array of strings".to_owned(),
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return fail(&format!("{path}/required"), "`required` must be an array"),
        };
        if let Some(missing) = required.iter().find(|n| !props.contains_key(**n)) {
            return fail(
                path,
                format!("required property `{missing}` is not declared in `properties`"),
            );
        }
        let mut new_props = Map::new();
        let mut plans = Vec::new();
        for (name, sub) in props {
            self.properties += 1;
            if self.properties > MAX_PROPERTIES {
                return fail(path, format!("more than {MAX_PROPERTIES} properties"));
            }
            let sub_path = format!("{path}/properties/{}", escape_pointer(name));
            let (schema, plan) = self.node(sub, &sub_path, nesting + 1, depth + 1)?;
            if required.contains(&name.as_str()) {
                if plan != NullPlan::Keep {
                    plans.push(PropPlan { name: name.clone(), drop_null: false, plan });
                }
                new_props.insert(name.clone(), schema);
            } else {
                let drop_null = !self.accepts_null(sub, MAX_REF_HOPS);
                new_props.insert(name.clone(), nullable(schema));
                if drop_null || plan != NullPlan::Keep {
                    plans.push(PropPlan { name: name.clone(), drop_null, plan });
                }
            }
        }
        let all: Vec<Value> = new_props.keys().map(|k| Value::from(k.as_str())).collect();
        out.insert("properties".into(), Value::Object(new_props));
        out.insert("required".into(), Value::Array(all));
        out.insert("additionalProperties".into(), Value::Bool(false));
        Ok(if plans.is_empty() { NullPlan::Keep } else { NullPlan::Object(plans) })
    }

    /// Whether the original `schema` accepts `null` (then a `null` answer is meaningful and
    /// kept). Every keyword present must accept it; `$ref`s are followed (bounded).
    fn accepts_null(&self, schema: &Value, hops: usize) -> bool {
        let Some(map) = schema.as_object() else { return schema == &Value::Bool(true) };
        if map.contains_key("type") && !type_names(map).contains(&"null") {
            return false;
        }
        if let Some(values) = map.get("enum")
            && !values.as_array().is_some_and(|v| v.iter().any(Value::is_null))
        {
            return false;
        }
        if map.get("const").is_some_and(|c| !c.is_null()) {
            return false;
        }
        if let Some(branches) = map.get("anyOf")
            && !branches.as_array().is_some_and(|b| b.iter().any(|b| self.accepts_null(b, hops)))
        {
            return false;
        }
        if let Some(target) = map.get("$ref") {
            let resolved = target
                .as_str()
                .and_then(|t| t.strip_prefix('#'))
                .and_then(|pointer| self.root.pointer(pointer));
            return match (hops.checked_sub(1), resolved) {
                (Some(left), Some(def)) => self.accepts_null(def, left),
                _ => false,
            };
        }
        true
    }
}

/// Whether a converted schema accepts `null` without following `$ref`s.
fn accepts_null_shallow(map: &Map<String, Value>) -> bool {
    !map.contains_key("$ref")
        && map.get("const").is_none_or(Value::is_null)
        && (!map.contains_key("type") || type_names(map).contains(&"null"))
        && map.get("enum").and_then(Value::as_array).is_none_or(|v| v.iter().any(Value::is_null))
        && map
            .get("anyOf")
            .and_then(Value::as_array)
            .is_none_or(|b| b.iter().filter_map(Value::as_object).any(accepts_null_shallow))
}

/// Widens a converted schema so it also accepts `null`.
fn nullable(schema: Value) -> Value {
    let Value::Object(mut map) = schema else { return schema };
    if accepts_null_shallow(&map) {
        return Value::Object(map);
    }
    let null_branch = || Value::Object(Map::from_iter([("type".to_owned(), Value::from("null"))]));
    if map.contains_key("$ref") || map.contains_key("const") {
        // Wrap, keeping the annotations outside (a `$ref` stays without siblings).
        let mut outer = Map::new();
        for key in ["title", "description"] {
            if let Some(v) = map.shift_remove(key) {
                outer.insert(key.into(), v);
            }
        }
        outer.insert("anyOf".into(), Value::Array(vec![Value::Object(map), null_branch()]));
        return Value::Object(outer);
    }
    match map.get_mut("type") {
        Some(Value::String(t)) if t != "null" => {
            let single = std::mem::take(t);
            map.insert("type".into(), Value::Array(vec![Value::from(single), Value::from("null")]));
        }
        Some(Value::Array(types)) if !types.iter().any(|t| t == "null") => {
            types.push(Value::from("null"));
        }
        _ => {}
    }
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && !values.iter().any(Value::is_null)
    {
        values.push(Value::Null);
    }
    if let Some(Value::Array(branches)) = map.get_mut("anyOf")
        && !branches.iter().filter_map(Value::as_object).any(accepts_null_shallow)
    {
        branches.push(null_branch());
    }
    Value::Object(map)
}

/// Streams one strict tool call's arguments and removes, as they arrive, the members whose
/// `null` stands for an omitted optional property: [`StrictPlan::restore`] done
/// incrementally, so `toolcall_delta` fragments and the final arguments agree.
///
/// Text passes through at once, except from the key of a member that may be dropped until
/// its value's first character (or, for `null`, its last) is seen. Commas between members
/// are re-emitted only before a member that is kept, so dropping any member leaves valid
/// JSON. The output does not depend on how the input is split into fragments, the output
/// for a prefix of the input is a prefix of the output for the whole, and the work is
/// linear in the input. Input that is not JSON passes through (a member held back at the
/// end of an incomplete input is not emitted).
#[derive(Debug)]
pub struct NullFilter {
    plan: Arc<StrictPlan>,
    stack: Vec<Frame>,
    lex: Lex,
    /// The text of a member that may still be dropped.
    hold: Option<String>,
    /// The current literal, while deciding whether it is `null`.
    literal: Option<String>,
    /// The raw text of the key being read.
    key: Option<String>,
    /// The top-level value is complete.
    done: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    Normal,
    Str { escape: bool },
    Lit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ObjState {
    Key,
    Colon,
    Value,
    AfterValue,
}

#[derive(Debug)]
enum Frame {
    /// An object whose members have plans.
    Object { props: Vec<PropPlan>, state: ObjState, emitted: bool, child: Option<(bool, NullPlan)> },
    /// An array whose elements have a plan.
    Array { item: NullPlan },
    /// A container with nothing to change below it.
    Opaque { depth: u32 },
}

impl NullFilter {
    /// A filter for one call's arguments.
    pub fn new(plan: Arc<StrictPlan>) -> Self {
        NullFilter {
            plan,
            stack: Vec::new(),
            lex: Lex::Normal,
            hold: None,
            literal: None,
            key: None,
            done: false,
        }
    }

    /// Feeds a fragment of the arguments text; returns the text to pass on (possibly
    /// empty).
    pub fn push(&mut self, fragment: &str) -> String {
        let mut out = String::with_capacity(fragment.len());
        for c in fragment.chars() {
            self.step(c, &mut out);
        }
        out
    }

    fn emit(&mut self, c: char, out: &mut String) {
        match self.hold.as_mut() {
            Some(h) => h.push(c),
            None => out.push(c),
        }
    }

    /// Writes the held member (and the comma before it) out.
    fn flush_member(&mut self, out: &mut String) {
        let Some(Frame::Object { emitted, .. }) = self.stack.last_mut() else { return };
        if let Some(held) = self.hold.take() {
            if *emitted {
                out.push(',');
            }
            out.push_str(&held);
            *emitted = true;
        }
    }

    fn value_complete(&mut self) {
        match self.stack.last_mut() {
            Some(Frame::Object { state, .. }) => *state = ObjState::AfterValue,
            Some(_) => {}
            None => self.done = true,
        }
    }

    fn start_value(&mut self, c: char, plan: NullPlan, out: &mut String) {
        let plan = self.plan.resolve(plan);
        self.emit(c, out);
        match c {
            '{' => self.stack.push(match plan {
                NullPlan::Object(props) => {
                    Frame::Object { props, state: ObjState::Key, emitted: false, child: None }
                }
                _ => Frame::Opaque { depth: 1 },
            }),
            '[' => self.stack.push(match plan {
                NullPlan::Array(item) => Frame::Array { item: *item },
                _ => Frame::Opaque { depth: 1 },
            }),
            '"' => self.lex = Lex::Str { escape: false },
            _ => self.lex = Lex::Lit,
        }
    }

    fn close(&mut self, c: char, out: &mut String) {
        self.emit(c, out);
        self.stack.pop();
        self.value_complete();
    }

    fn literal_end(&mut self, out: &mut String) {
        self.lex = Lex::Normal;
        if let Some(literal) = self.literal.take() {
            if literal == "null" {
                // An omitted optional: drop the member, comma included.
                self.hold = None;
            } else {
                self.flush_member(out);
            }
        }
        self.value_complete();
    }

    fn key_end(&mut self, out: &mut String) {
        let raw = self.key.take().unwrap_or_default();
        let name: String =
            serde_json::from_str(&raw).unwrap_or_else(|_| raw.trim_matches('"').to_owned());
        let mut drop = false;
        if let Some(Frame::Object { props, state, child, .. }) = self.stack.last_mut() {
            let found = props.iter().find(|p| p.name == name);
            drop = found.is_some_and(|p| p.drop_null);
            *child = Some(found.map_or((false, NullPlan::Keep), |p| (p.drop_null, p.plan.clone())));
            *state = ObjState::Colon;
        }
        if !drop {
            self.flush_member(out);
        }
    }

    fn step(&mut self, c: char, out: &mut String) {
        match self.lex {
            Lex::Str { escape } => {
                self.emit(c, out);
                if let Some(key) = self.key.as_mut() {
                    key.push(c);
                }
                if escape {
                    self.lex = Lex::Str { escape: false };
                } else if c == '\\' {
                    self.lex = Lex::Str { escape: true };
                } else if c == '"' {
                    self.lex = Lex::Normal;
                    if self.key.is_some() {
                        self.key_end(out);
                    } else if !matches!(self.stack.last(), Some(Frame::Opaque { .. })) {
                        self.value_complete();
                    }
                }
                return;
            }
            Lex::Lit => {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.') {
                    self.emit(c, out);
                    if let Some(l) = self.literal.as_mut() {
                        l.push(c);
                    }
                    return;
                }
                if matches!(self.stack.last(), Some(Frame::Opaque { .. })) {
                    self.lex = Lex::Normal;
                } else {
                    self.literal_end(out);
                }
            }
            Lex::Normal => {}
        }
        if c.is_whitespace() {
            self.emit(c, out);
            return;
        }
        match self.stack.last_mut() {
            None => {
                if self.done {
                    self.emit(c, out);
                } else {
                    let root = self.plan.root.clone();
                    self.start_value(c, root, out);
                }
            }
            Some(Frame::Opaque { depth }) => {
                match c {
                    '{' | '[' => *depth += 1,
                    '}' | ']' => *depth = depth.saturating_sub(1),
                    _ => {}
                }
                let closed = *depth == 0;
                self.emit(c, out);
                if c == '"' {
                    self.lex = Lex::Str { escape: false };
                } else if closed {
                    self.stack.pop();
                    self.value_complete();
                } else if !matches!(c, '{' | '[' | '}' | ']' | ',' | ':') {
                    self.lex = Lex::Lit;
                }
            }
            Some(Frame::Array { item }) => match c {
                ']' => self.close(c, out),
                ',' => self.emit(c, out),
                _ => {
                    let item = item.clone();
                    self.start_value(c, item, out);
                }
            },
            Some(Frame::Object { state, child, .. }) => match *state {
                ObjState::Key => match c {
                    '"' => {
                        self.hold = Some(String::new());
                        self.key = Some(String::from('"'));
                        self.emit(c, out);
                        self.lex = Lex::Str { escape: false };
                    }
                    '}' => self.close(c, out),
                    _ => self.emit(c, out),
                },
                ObjState::Colon => {
                    if c == ':' {
                        *state = ObjState::Value;
                    }
                    self.emit(c, out);
                }
                ObjState::Value => {
                    let (drop, plan) = child.take().unwrap_or((false, NullPlan::Keep));
                    if drop && c == 'n' {
                        self.literal = Some(String::from('n'));
                        self.emit(c, out);
                        self.lex = Lex::Lit;
                    } else {
                        self.flush_member(out);
                        self.start_value(c, plan, out);
                    }
                }
                ObjState::AfterValue => match c {
                    ',' => *state = ObjState::Key,
                    '}' => self.close(c, out),
                    _ => self.emit(c, out),
                },
            },
        }
    }
}
