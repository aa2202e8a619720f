//! Lossless strict-mode normalization of tool schemas (spec README decision 6,
//! `peer-lessons.md` #12).
//!
//! This module is self-contained (it depends on `serde_json` only) because the
//! OpenAI Responses and Mistral crates need the same thing; it should move to
//! `llm-core`.
//!
//! OpenAI's strict mode constrains decoding to a subset of JSON Schema: every
//! object lists *all* its properties in `required` and has
//! `additionalProperties: false`. [`to_strict`] rewrites a schema into that
//! subset without changing what it accepts:
//!
//! * an optional property becomes required **and nullable** (`"type": "string"`
//!   becomes `["string", "null"]`, an `enum` gains `null`, an `anyOf` gains a
//!   `{"type": "null"}` branch, a `$ref` or `const` is wrapped in such an
//!   `anyOf`);
//! * a missing `additionalProperties` becomes `false` (tool schemas that omit it
//!   do not expect extra keys; an explicit `true` or a schema is *not* strict);
//! * annotations strict mode does not take (`default`, `examples`, `$comment`,
//!   `$schema`) are dropped; they constrain nothing.
//!
//! The other half is [`StrictPlan::restore`]: when the model answers `null` for a
//! property that was optional and did not accept `null`, the property is removed,
//! so the arguments validate against the *original* schema again.
//!
//! A schema that cannot be expressed strictly without loss (an unsupported
//! keyword such as `oneOf`, `allOf`, `not`, `minLength`, `patternProperties`; a
//! free-form object; tuple `items`; optional properties inside an `anyOf`
//! branch; a root that is not an object) gives [`NotStrict`] with the path and
//! the reason, and the caller sends the tool list non-strict.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// Why a schema cannot be sent in strict mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotStrict {
    /// JSON-pointer-like path of the offending node (`""` for the root).
    pub(crate) path: String,
    /// What is wrong there.
    pub(crate) reason: String,
}

impl std::fmt::Display for NotStrict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() { "/" } else { self.path.as_str() };
        write!(f, "{path}: {}", self.reason)
    }
}

/// Where a `null` in the returned arguments stands for an omitted optional property.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum NullPlan {
    /// Nothing to undo below this node.
    #[default]
    Keep,
    /// An object: per property, whether `null` means absent, and the plan below it.
    Object(Vec<PropPlan>),
    /// An array: the plan for every element.
    Array(Box<NullPlan>),
    /// A `$ref` to a definition (the full reference string).
    Ref(String),
}

/// The plan for one property of an object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PropPlan {
    name: String,
    drop_null: bool,
    plan: NullPlan,
}

/// How to turn strict-mode arguments back into arguments for the original schema.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct StrictPlan {
    root: NullPlan,
    defs: BTreeMap<String, NullPlan>,
}

/// A schema rewritten for strict mode and the plan that undoes its nullable rewrite.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StrictSchema {
    /// The strict schema to send.
    pub(crate) schema: Value,
    /// The plan for the model's arguments.
    pub(crate) plan: StrictPlan,
}

/// Deepest schema nesting accepted.
const MAX_DEPTH: usize = 64;
/// How many `$ref` hops one restore may follow without descending into the value.
const MAX_REF_HOPS: usize = 32;
/// String formats strict mode supports.
const FORMATS: [&str; 9] =
    ["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

impl StrictPlan {
    /// Whether restoring can never change anything.
    pub(crate) fn is_trivial(&self) -> bool {
        self.root == NullPlan::Keep
    }

    /// Removes the properties whose `null` stands for "omitted". Returns whether
    /// anything changed. (The decoder uses the streaming [`NullFilter`]; this is its
    /// reference semantics, and what a non-streaming caller would use.)
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "reference semantics of NullFilter, used by its tests")
    )]
    pub(crate) fn restore(&self, args: &mut Value) -> bool {
        self.apply(&self.root, args, MAX_REF_HOPS)
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
}

/// Rewrites a tool's parameter schema for strict mode; see the module docs.
pub(crate) fn to_strict(schema: &Value) -> Result<StrictSchema, NotStrict> {
    let mut walker = Walker { root: schema, defs: BTreeMap::new() };
    let Some(obj) = schema.as_object() else {
        return Err(not("", "the parameters schema is not an object"));
    };
    if obj.contains_key("anyOf") {
        return Err(not("", "a root anyOf is not allowed in strict mode"));
    }
    let (schema, root) = walker.node(schema, "", 0)?;
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(not("", "the root must be a non-nullable object"));
    }
    Ok(StrictSchema { schema, plan: StrictPlan { root, defs: walker.defs } })
}

fn not(path: &str, reason: impl Into<String>) -> NotStrict {
    NotStrict { path: path.to_owned(), reason: reason.into() }
}

struct Walker<'a> {
    root: &'a Value,
    defs: BTreeMap<String, NullPlan>,
}

/// The `type` keyword as a list of names.
fn type_names<'v>(value: Option<&'v Value>, path: &str) -> Result<Option<Vec<&'v str>>, NotStrict> {
    match value {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(vec![s.as_str()])),
        Some(Value::Array(items)) => items
            .iter()
            .map(|t| {
                t.as_str().ok_or_else(|| not(path, "type must be a string or a list of strings"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(not(path, "type must be a string or a list of strings")),
    }
}

impl Walker<'_> {
    fn node(
        &mut self,
        schema: &Value,
        path: &str,
        depth: usize,
    ) -> Result<(Value, NullPlan), NotStrict> {
        if depth > MAX_DEPTH {
            return Err(not(path, "the schema is nested too deeply"));
        }
        let Some(obj) = schema.as_object() else {
            return Err(not(path, "a schema must be an object (boolean schemas are not strict)"));
        };
        let types = type_names(obj.get("type"), path)?;
        let has = |k: &str| obj.contains_key(k);
        let is_object = match &types {
            Some(t) => t.contains(&"object"),
            None => has("properties"),
        };
        let is_array = match &types {
            Some(t) => t.contains(&"array"),
            None => has("items"),
        };
        if let Some(t) = &types
            && is_object
            && t.iter().any(|n| *n != "object" && *n != "null")
        {
            return Err(not(path, "an object type mixed with other types"));
        }
        if types.is_none()
            && !is_object
            && !is_array
            && !has("enum")
            && !has("const")
            && !has("anyOf")
            && !has("$ref")
        {
            return Err(not(path, "a schema without type, enum, const, anyOf or $ref"));
        }

        let mut out = Map::new();
        let mut plan = NullPlan::Keep;
        if is_object && types.is_none() {
            out.insert("type".into(), Value::from("object"));
        }
        if is_array && types.is_none() {
            out.insert("type".into(), Value::from("array"));
        }
        for (key, value) in obj {
            match key.as_str() {
                "$schema" | "$comment" | "default" | "examples" => {}
                "type" | "title" | "description" | "enum" | "const" | "pattern" | "minimum"
                | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf"
                | "minItems" | "maxItems" => {
                    out.insert(key.clone(), value.clone());
                }
                "format" => match value.as_str() {
                    Some(f) if FORMATS.contains(&f) => {
                        out.insert(key.clone(), value.clone());
                    }
                    _ => {
                        return Err(not(
                            path,
                            format!("format {value} is not supported in strict mode"),
                        ));
                    }
                },
                "properties" | "required" | "additionalProperties" => {
                    if !is_object {
                        return Err(not(path, format!("{key} on a schema that is not an object")));
                    }
                    // Filled in below, at this position.
                    out.insert(key.clone(), Value::Null);
                }
                "items" => {
                    if !value.is_object() {
                        return Err(not(path, "tuple or boolean items are not strict"));
                    }
                    let (items, item_plan) =
                        self.node(value, &format!("{path}/items"), depth + 1)?;
                    out.insert(key.clone(), items);
                    if item_plan != NullPlan::Keep {
                        plan = NullPlan::Array(Box::new(item_plan));
                    }
                }
                "anyOf" => {
                    let Some(branches) = value.as_array().filter(|b| !b.is_empty()) else {
                        return Err(not(path, "anyOf must be a non-empty list"));
                    };
                    let mut converted = Vec::with_capacity(branches.len());
                    for (i, branch) in branches.iter().enumerate() {
                        let branch_path = format!("{path}/anyOf/{i}");
                        let (s, p) = self.node(branch, &branch_path, depth + 1)?;
                        if p != NullPlan::Keep {
                            return Err(not(
                                &branch_path,
                                "optional properties inside an anyOf branch cannot be restored",
                            ));
                        }
                        converted.push(s);
                    }
                    out.insert(key.clone(), Value::Array(converted));
                }
                "$ref" => {
                    let Some(target) = value.as_str() else {
                        return Err(not(path, "$ref must be a string"));
                    };
                    if !(target.starts_with("#/$defs/") || target.starts_with("#/definitions/")) {
                        return Err(not(path, format!("$ref {target} is not a local definition")));
                    }
                    out.insert(key.clone(), value.clone());
                    plan = NullPlan::Ref(target.to_owned());
                }
                "$defs" | "definitions" => {
                    if depth != 0 {
                        return Err(not(path, format!("{key} below the root")));
                    }
                    let Some(defs) = value.as_object() else {
                        return Err(not(path, format!("{key} must be an object")));
                    };
                    let mut converted = Map::new();
                    for (name, def) in defs {
                        let def_path = format!("/{key}/{name}");
                        let (s, p) = self.node(def, &def_path, depth + 1)?;
                        self.defs.insert(format!("#{def_path}"), p);
                        converted.insert(name.clone(), s);
                    }
                    out.insert(key.clone(), Value::Object(converted));
                }
                other => {
                    return Err(not(
                        path,
                        format!("keyword {other} is not supported in strict mode"),
                    ));
                }
            }
        }
        if is_object {
            plan = self.object(obj, &mut out, path, depth)?;
        }
        Ok((Value::Object(out), plan))
    }

    /// Rewrites `properties`, `required` and `additionalProperties` of an object node.
    fn object(
        &mut self,
        obj: &Map<String, Value>,
        out: &mut Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Result<NullPlan, NotStrict> {
        if !matches!(obj.get("additionalProperties"), None | Some(Value::Bool(false))) {
            return Err(not(path, "additionalProperties other than false cannot be strict"));
        }
        let empty = Map::new();
        let props = match obj.get("properties") {
            Some(Value::Object(p)) => p,
            Some(_) => return Err(not(path, "properties must be an object")),
            None if obj.get("additionalProperties") == Some(&Value::Bool(false)) => &empty,
            None => return Err(not(path, "an object without properties is a free-form map")),
        };
        let required: Vec<&str> = match obj.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r
                .iter()
                .map(|n| n.as_str().ok_or_else(|| not(path, "required must list strings")))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(not(path, "required must be a list")),
        };
        if let Some(missing) = required.iter().find(|n| !props.contains_key(**n)) {
            return Err(not(path, format!("required property {missing} is not declared")));
        }
        let mut new_props = Map::new();
        let mut plans = Vec::new();
        for (name, sub) in props {
            let sub_path = format!("{path}/properties/{name}");
            let (schema, plan) = self.node(sub, &sub_path, depth + 1)?;
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

    /// Whether the original schema already accepts `null` (then a `null` answer is kept).
    fn accepts_null(&self, schema: &Value, hops: usize) -> bool {
        let Some(obj) = schema.as_object() else { return true };
        match obj.get("type") {
            Some(Value::String(t)) => return t == "null",
            Some(Value::Array(ts)) => return ts.iter().any(|t| t == "null"),
            _ => {}
        }
        if let Some(Value::Array(values)) = obj.get("enum") {
            return values.iter().any(Value::is_null);
        }
        if let Some(c) = obj.get("const") {
            return c.is_null();
        }
        if let Some(Value::Array(branches)) = obj.get("anyOf") {
            return branches.iter().any(|b| self.accepts_null(b, hops));
        }
        if let Some(target) = obj.get("$ref").and_then(Value::as_str) {
            let resolved = target.strip_prefix('#').and_then(|p| self.root.pointer(p));
            return match (hops.checked_sub(1), resolved) {
                (Some(left), Some(def)) => self.accepts_null(def, left),
                _ => false,
            };
        }
        true
    }
}

/// Makes a converted schema also accept `null`.
fn nullable(schema: Value) -> Value {
    let Value::Object(mut obj) = schema else { return schema };
    let null_type = || {
        let mut m = Map::new();
        m.insert("type".into(), Value::from("null"));
        Value::Object(m)
    };
    if let Some(t) = obj.get_mut("type") {
        match t {
            Value::String(s) if s == "null" => {}
            Value::String(s) => {
                *t = Value::Array(vec![Value::from(std::mem::take(s)), Value::from("null")])
            }
            Value::Array(list) if !list.iter().any(|v| v == "null") => {
                list.push(Value::from("null"));
            }
            _ => {}
        }
        if let Some(Value::Array(values)) = obj.get_mut("enum")
            && !values.iter().any(Value::is_null)
        {
            values.push(Value::Null);
        }
        return Value::Object(obj);
    }
    if let Some(Value::Array(branches)) = obj.get_mut("anyOf") {
        if !branches.iter().any(|b| b.get("type").is_some_and(|t| t == "null")) {
            branches.push(null_type());
        }
        return Value::Object(obj);
    }
    if let Some(Value::Array(values)) = obj.get_mut("enum") {
        if !values.iter().any(Value::is_null) {
            values.push(Value::Null);
        }
        return Value::Object(obj);
    }
    // `$ref` or `const`: wrap, keeping the annotations outside.
    let mut outer = Map::new();
    for key in ["title", "description"] {
        if let Some(v) = obj.shift_remove(key) {
            outer.insert(key.into(), v);
        }
    }
    outer.insert("anyOf".into(), Value::Array(vec![Value::Object(obj), null_type()]));
    Value::Object(outer)
}

/// Streams a strict tool's arguments and removes, as they arrive, the members
/// whose `null` stands for an omitted optional property ([`StrictPlan::restore`]
/// done incrementally, so `toolcall_delta` fragments and the final arguments
/// agree).
///
/// Text passes through at once except from the key of a member that may be
/// dropped until its value's first character (or, for `null`, its last) is
/// seen. Commas between members are re-emitted only before a member that is
/// kept, so dropping any member leaves valid JSON. Work is linear in the input.
#[derive(Debug)]
pub(crate) struct NullFilter {
    plan: std::sync::Arc<StrictPlan>,
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
    pub(crate) fn new(plan: std::sync::Arc<StrictPlan>) -> Self {
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

    /// Feeds a fragment; returns the text to pass on (possibly empty).
    pub(crate) fn push(&mut self, fragment: &str) -> String {
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

    /// Resolves `$ref` plans (bounded).
    fn resolve(&self, plan: NullPlan) -> NullPlan {
        let mut plan = plan;
        for _ in 0..MAX_REF_HOPS {
            match plan {
                NullPlan::Ref(name) => {
                    plan = self.plan.defs.get(&name).cloned().unwrap_or_default()
                }
                other => return other,
            }
        }
        NullPlan::Keep
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
        let plan = self.resolve(plan);
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn inexpressible_schemas_are_rejected_not_narrowed() {
        for (schema, what) in [
            (
                json!({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}}),
                "oneOf",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}}),
                "minLength",
            ),
            (
                json!({"type": "object", "properties": {}, "additionalProperties": true}),
                "additionalProperties",
            ),
            (json!({"type": "object", "properties": {"m": {"type": "object"}}}), "free-form"),
            (
                json!({"type": "object", "properties": {"t": {"type": "array", "items": [{"type": "string"}]}}}),
                "tuple",
            ),
            (json!({"anyOf": [{"type": "object", "properties": {}}]}), "root anyOf"),
            (json!({"type": "string"}), "root"),
            (
                json!({"type": "object", "properties": {"u": {"anyOf": [{"type": "object", "properties": {"x": {"type": "string"}}}]}}}),
                "anyOf optional",
            ),
            (json!({"type": "object", "properties": {"x": {}}}), "untyped"),
        ] {
            assert!(to_strict(&schema).is_err(), "{what} should not be strict");
        }
    }

    #[test]
    fn empty_object_and_annotations() {
        let strict =
            to_strict(&json!({"$schema": "x", "type": "object", "properties": {}})).unwrap();
        assert_eq!(
            strict.schema,
            json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
        );
        assert!(strict.plan.is_trivial());
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

    fn filtered(plan: &StrictPlan, raw: &str, step: usize) -> String {
        let mut f = NullFilter::new(std::sync::Arc::new(plan.clone()));
        let chars: Vec<char> = raw.chars().collect();
        let mut out = String::new();
        for piece in chars.chunks(step.max(1)) {
            out.push_str(&f.push(&piece.iter().collect::<String>()));
        }
        out
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
            for step in 1..=raw.chars().count() {
                let out = filtered(&strict.plan, raw, step);
                let got: Value =
                    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}: {e}"));
                assert_eq!(got, expected, "step {step}: {out}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        #[test]
        fn null_filter_never_panics(input in ".{0,200}") {
            let strict = to_strict(&json!({"type": "object", "properties": {"a": {"type": "string"}, "o": {"type": "object", "properties": {"b": {"type": "integer"}}}}})).unwrap();
            let mut f = NullFilter::new(std::sync::Arc::new(strict.plan));
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
}
