//! Tool-argument coercion and validation (OpenClaw `validateToolArguments`).
//!
//! Models often send `"3"` for a number or `"true"` for a boolean.
//! [`ValidatorCache::validate`] first applies OpenClaw's schema-guided
//! coercions ([`coerce_with_schema`]) to a copy of the arguments, then checks
//! the copy against the tool's JSON Schema. Validators are compiled once per
//! tool (name + schema) and cached.
//!
//! On failure the error message is exactly OpenClaw's:
//!
//! ```text
//! Validation failed for tool "<name>":
//!   - <path>: <message>
//!
//! Received arguments:
//! <the arguments as sent, pretty-printed with 2 spaces>
//! ```

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use jsonschema::{Validator, ValidatorMap};
use serde_json::{Map, Number, Value};

use crate::types::Tool;

/// One schema violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where: the JSON pointer of the offending value with `.` separators
    /// (`items.0.name`), `root` for the whole arguments object; for a missing
    /// required property, the path of the property itself (`name`, `user.id`).
    pub path: String,
    /// What is wrong, as reported by the validator.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Tool arguments that do not match the tool's schema (or a schema that does
/// not compile).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ValidationError {
    /// The tool's name.
    pub tool: String,
    /// Every violation found, in validator order.
    pub violations: Vec<Violation>,
    /// The full OpenClaw-format message (what the model gets as the error result).
    pub message: String,
}

/// How many schemas with the same tool name stay cached; the oldest goes first.
const MAX_SCHEMAS_PER_NAME: usize = 8;

/// A compiled tool schema.
struct Entry {
    schema: Value,
    /// The root validator, or the compile error.
    root: Result<Validator, String>,
    /// Validators of every subschema, compiled on the first `anyOf`/`oneOf`
    /// branch check (`None` if the map does not compile).
    branches: OnceLock<Option<ValidatorMap>>,
}

#[derive(Default)]
struct CacheInner {
    entries: RwLock<HashMap<String, Vec<Arc<Entry>>>>,
    compiled: AtomicUsize,
}

/// Validators compiled once per tool (keyed by tool name + schema) and cached.
///
/// Thread-safe (`&self` methods, interior `RwLock`) and cheap to clone: clones
/// share the cache.
#[derive(Clone, Default)]
pub struct ValidatorCache {
    inner: Arc<CacheInner>,
}

impl fmt::Debug for ValidatorCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.inner.entries.read().unwrap_or_else(PoisonError::into_inner);
        let schemas: usize = entries.values().map(Vec::len).sum();
        f.debug_struct("ValidatorCache")
            .field("tools", &entries.len())
            .field("schemas", &schemas)
            .field("compiled", &self.compiled_count())
            .finish()
    }
}

impl ValidatorCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many schemas this cache (and its clones) has compiled so far. A
    /// second `validate` call for the same tool name and schema compiles
    /// nothing.
    pub fn compiled_count(&self) -> usize {
        self.inner.compiled.load(Ordering::Relaxed)
    }

    fn entry(&self, tool: &Tool) -> Arc<Entry> {
        {
            let entries = self.inner.entries.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(found) = entries
                .get(&tool.name)
                .and_then(|list| list.iter().find(|e| e.schema == tool.parameters))
            {
                return Arc::clone(found);
            }
        }
        // Compile outside the lock; a racing thread may compile the same schema
        // once more, and the first insert wins.
        let root = compile(&tool.parameters).map_err(|e| e.to_string());
        self.inner.compiled.fetch_add(1, Ordering::Relaxed);
        let fresh =
            Arc::new(Entry { schema: tool.parameters.clone(), root, branches: OnceLock::new() });
        let mut entries = self.inner.entries.write().unwrap_or_else(PoisonError::into_inner);
        let list = entries.entry(tool.name.clone()).or_default();
        if let Some(found) = list.iter().find(|e| e.schema == tool.parameters) {
            return Arc::clone(found);
        }
        if list.len() >= MAX_SCHEMAS_PER_NAME {
            list.remove(0);
        }
        list.push(Arc::clone(&fresh));
        fresh
    }

    /// Coerces a copy of `arguments` with [`coerce_with_schema`], then
    /// validates it against `tool.parameters`.
    ///
    /// Returns the coerced arguments, or a [`ValidationError`] whose message is
    /// OpenClaw's exact text (see the module docs); the `Received arguments`
    /// part shows `arguments` as received, before coercion (as OpenClaw does).
    /// A schema that does not compile gives a `ValidationError` too, with the
    /// message `Invalid parameter schema for tool "<name>": <reason>`. Never
    /// panics.
    pub fn validate(&self, tool: &Tool, arguments: &Value) -> Result<Value, ValidationError> {
        let entry = self.entry(tool);
        let validator = match &entry.root {
            Ok(validator) => validator,
            Err(reason) => {
                return Err(ValidationError {
                    tool: tool.name.clone(),
                    violations: vec![Violation {
                        path: "root".to_owned(),
                        message: format!("invalid parameter schema: {reason}"),
                    }],
                    message: format!(
                        "Invalid parameter schema for tool \"{}\": {reason}",
                        tool.name
                    ),
                });
            }
        };

        let mut coerced = arguments.clone();
        let branches = Branches::Shared { root: &tool.parameters, cell: &entry.branches };
        Coercer::new(&tool.parameters, &branches).coerce(&mut coerced, &tool.parameters, "#", 0);

        let violations: Vec<Violation> = validator
            .iter_errors(&coerced)
            .map(|error| Violation { path: error_path(&error), message: error.to_string() })
            .collect();
        if violations.is_empty() {
            return Ok(coerced);
        }
        let message = format_message(&tool.name, &violations, arguments);
        Err(ValidationError { tool: tool.name.clone(), violations, message })
    }
}

/// Builds OpenClaw's validation failure text.
fn format_message(tool: &str, violations: &[Violation], arguments: &Value) -> String {
    let lines = if violations.is_empty() {
        "Unknown validation error".to_owned()
    } else {
        violations
            .iter()
            .map(|v| format!("  - {}: {}", v.path, v.message))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let received =
        serde_json::to_string_pretty(arguments).unwrap_or_else(|_| arguments.to_string());
    format!("Validation failed for tool \"{tool}\":\n{lines}\n\nReceived arguments:\n{received}")
}

/// `/a/b~1c/0` -> `a.b/c.0`.
fn dotted(pointer: &str) -> String {
    let trimmed = pointer.strip_prefix('/').unwrap_or(pointer);
    if trimmed.is_empty() {
        return String::new();
    }
    trimmed
        .split('/')
        .map(|token| token.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

pub(crate) fn error_path(error: &jsonschema::ValidationError<'_>) -> String {
    let base = dotted(error.instance_path().as_str());
    if let jsonschema::error::ValidationErrorKind::Required { property } = error.kind() {
        let property = match property {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if !property.is_empty() {
            return if base.is_empty() { property } else { format!("{base}.{property}") };
        }
    }
    if base.is_empty() { "root".to_owned() } else { base }
}

// ---------------------------------------------------------------------------
// Coercion
// ---------------------------------------------------------------------------

/// Coercion stops descending past this recursion depth (stack safety). Every
/// value level costs a few steps (property, union branch, `$ref`), so this
/// covers values nested about 60 levels deep.
const MAX_DEPTH: usize = 256;
/// Coercion stops after this many schema visits (bounds recursive `$ref` unions).
const MAX_VISITS: usize = 10_000;

/// Where `anyOf`/`oneOf` branch validators come from.
enum Branches<'a> {
    /// A cache entry's lazily compiled map.
    Shared { root: &'a Value, cell: &'a OnceLock<Option<ValidatorMap>> },
    /// A map compiled on first use for one [`coerce_with_schema`] call.
    Local { root: &'a Value, cell: std::cell::OnceCell<Option<ValidatorMap>> },
}

impl Branches<'_> {
    fn map(&self) -> Option<&ValidatorMap> {
        match self {
            Branches::Shared { root, cell } => cell.get_or_init(|| compile_map(root)).as_ref(),
            Branches::Local { root, cell } => cell.get_or_init(|| compile_map(root)).as_ref(),
        }
    }

    /// Whether `value` is valid against the subschema `schema` found at
    /// `pointer` (`#/properties/x/anyOf/0`). `$ref`s resolve against the root
    /// when the pointer is known; otherwise the subschema is compiled alone. A
    /// subschema that does not compile accepts nothing.
    fn check(&self, pointer: &str, schema: &Value, value: &Value) -> bool {
        if let Some(validator) = self.map().and_then(|map| map.get(pointer)) {
            return validator.is_valid(value);
        }
        match compile(schema) {
            Ok(validator) => validator.is_valid(value),
            Err(_) => false,
        }
    }
}

/// Compiles a schema. External `$ref`s are never fetched (no IO, and no
/// blocking inside an async runtime whatever jsonschema features are enabled):
/// they make the schema fail to compile.
fn compile(schema: &Value) -> Result<Validator, jsonschema::ValidationError<'static>> {
    jsonschema::options().offline().build(schema)
}

fn compile_map(root: &Value) -> Option<ValidatorMap> {
    match jsonschema::options().offline().build_map(root) {
        Ok(map) => Some(map),
        Err(error) => {
            tracing::debug!(%error, "tool schema subschemas do not compile; union coercion disabled");
            None
        }
    }
}

struct Coercer<'a> {
    root: &'a Value,
    branches: &'a Branches<'a>,
    visits: Cell<usize>,
}

/// `key` escaped as a JSON-pointer token.
fn escape_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn schema_types(schema: &Map<String, Value>) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn is_integral(n: &Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

fn matches_type(value: &Value, ty: &str) -> bool {
    match ty {
        "number" => value.is_number(),
        "integer" => value.as_number().is_some_and(is_integral),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "null" => value.is_null(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

/// `^[+-]?(?:(?:\d+\.?\d*)|(?:\.\d+))(?:e[+-]?\d+)?$` (case-insensitive): a
/// decimal JSON-ish number token; no hex, binary, `Infinity` or `NaN`.
fn is_decimal_token(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0usize;
    let at = |i: usize| b.get(i).copied();
    if matches!(at(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let int_start = i;
    while at(i).is_some_and(|c| c.is_ascii_digit()) {
        i += 1;
    }
    let int_digits = i - int_start;
    if at(i) == Some(b'.') {
        i += 1;
        let frac_start = i;
        while at(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        if int_digits == 0 && i == frac_start {
            return false;
        }
    } else if int_digits == 0 {
        return false;
    }
    if matches!(at(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(at(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_start = i;
        while at(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        if i == exp_start {
            return false;
        }
    }
    i == b.len()
}

fn parse_number_string(s: &str) -> Option<f64> {
    let trimmed = s.trim();
    if trimmed.is_empty() || !is_decimal_token(trimmed) {
        return None;
    }
    trimmed.parse::<f64>().ok().filter(|f| f.is_finite())
}

const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

fn parse_integer_string(s: &str) -> Option<f64> {
    parse_number_string(s).filter(|f| f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER)
}

/// A JSON number as JavaScript would hold it: integral values within the safe
/// range become integers (`1e3` -> `1000`), others stay floats.
fn js_number(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER {
        return Value::from(f as i64);
    }
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// JavaScript's `String(number)`.
fn js_number_string(n: &Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let Some(f) = n.as_f64() else { return n.to_string() };
    if f == 0.0 {
        return "0".to_owned();
    }
    let abs = f.abs();
    if (1e-6..1e21).contains(&abs) {
        if f.fract() == 0.0 {
            return format!("{}", f as i128);
        }
        return format!("{f}");
    }
    let exp = format!("{f:e}");
    match exp.split_once('e') {
        Some((mantissa, e)) if !e.starts_with('-') => format!("{mantissa}e+{e}"),
        _ => exp,
    }
}

fn parse_json_string(s: &str, open: char) -> Option<Value> {
    let trimmed = s.trim();
    if !trimmed.starts_with(open) {
        return None;
    }
    serde_json::from_str::<Value>(trimmed).ok()
}

/// The coercion of `value` to `ty`, or `None` if none applies.
fn coerce_primitive(value: &Value, ty: &str) -> Option<Value> {
    let out = match (ty, value) {
        ("number", Value::Null) => Value::from(0),
        ("number", Value::String(s)) => js_number(parse_number_string(s)?),
        ("number" | "integer", Value::Bool(b)) => Value::from(i64::from(*b)),
        ("integer", Value::Null) => Value::from(0),
        ("integer", Value::String(s)) => js_number(parse_integer_string(s)?),
        ("boolean", Value::Null) => Value::Bool(false),
        ("boolean", Value::String(s)) if s == "true" => Value::Bool(true),
        ("boolean", Value::String(s)) if s == "false" => Value::Bool(false),
        ("boolean", Value::Number(n)) if n.as_f64() == Some(1.0) => Value::Bool(true),
        ("boolean", Value::Number(n)) if n.as_f64() == Some(0.0) => Value::Bool(false),
        ("string", Value::Null) => Value::String(String::new()),
        ("string", Value::Number(n)) => Value::String(js_number_string(n)),
        ("string", Value::Bool(b)) => Value::String(b.to_string()),
        ("null", Value::String(s)) if s.is_empty() => Value::Null,
        ("null", Value::Number(n)) if n.as_f64() == Some(0.0) => Value::Null,
        ("null", Value::Bool(false)) => Value::Null,
        ("array", Value::String(s)) => parse_json_string(s, '[').filter(Value::is_array)?,
        ("object", Value::String(s)) => parse_json_string(s, '{').filter(Value::is_object)?,
        _ => return None,
    };
    (out != *value).then_some(out)
}

impl<'a> Coercer<'a> {
    fn new(root: &'a Value, branches: &'a Branches<'a>) -> Self {
        Coercer { root, branches, visits: Cell::new(0) }
    }

    /// Coerces `value` in place with `schema`, found at `pointer` in the root.
    fn coerce(&self, value: &mut Value, schema: &Value, pointer: &str, depth: usize) {
        let Some(schema) = schema.as_object() else { return };
        let visits = self.visits.get();
        if depth > MAX_DEPTH || visits >= MAX_VISITS {
            return;
        }
        self.visits.set(visits + 1);

        // Local `$ref` (an extension over OpenClaw, which does not follow refs;
        // schemars puts nested types behind `$ref`).
        if let Some(Value::String(reference)) = schema.get("$ref")
            && let Some(fragment) = reference.strip_prefix('#')
        {
            let target =
                if fragment.is_empty() { Some(self.root) } else { self.root.pointer(fragment) };
            if let Some(target) = target {
                self.coerce(value, target, &format!("#{fragment}"), depth + 1);
            }
        }

        if let Some(Value::Array(list)) = schema.get("allOf") {
            for (i, nested) in list.iter().enumerate() {
                self.coerce(value, nested, &format!("{pointer}/allOf/{i}"), depth + 1);
            }
        }
        for keyword in ["anyOf", "oneOf"] {
            if let Some(Value::Array(list)) = schema.get(keyword) {
                self.coerce_union(value, list, &format!("{pointer}/{keyword}"), depth);
            }
        }

        let types = schema_types(schema);
        let matches_member = types.len() > 1 && types.iter().any(|t| matches_type(value, t));
        if !matches_member {
            for ty in &types {
                if let Some(coerced) = coerce_primitive(value, ty) {
                    *value = coerced;
                    break;
                }
            }
        }

        let untyped = types.is_empty();
        let object_like = types.contains(&"object")
            || (untyped
                && (schema.contains_key("properties")
                    || schema.contains_key("additionalProperties")));
        let array_like = types.contains(&"array")
            || (untyped && (schema.contains_key("items") || schema.contains_key("prefixItems")));
        match value {
            Value::Object(object) if object_like => {
                self.coerce_object(object, schema, pointer, depth)
            }
            Value::Array(items) if array_like => self.coerce_array(items, schema, pointer, depth),
            _ => {}
        }
    }

    /// `anyOf`/`oneOf`: the first branch whose coercion of a copy validates
    /// against that branch wins; otherwise the value stays as it is.
    fn coerce_union(&self, value: &mut Value, branches: &[Value], pointer: &str, depth: usize) {
        for (i, branch) in branches.iter().enumerate() {
            let branch_pointer = format!("{pointer}/{i}");
            let mut candidate = value.clone();
            self.coerce(&mut candidate, branch, &branch_pointer, depth + 1);
            if self.branches.check(&branch_pointer, branch, &candidate) {
                *value = candidate;
                return;
            }
        }
    }

    fn coerce_object(
        &self,
        object: &mut Map<String, Value>,
        schema: &Map<String, Value>,
        pointer: &str,
        depth: usize,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(properties) = properties {
            for (key, property_schema) in properties {
                if let Some(item) = object.get_mut(key) {
                    let property_pointer = format!("{pointer}/properties/{}", escape_token(key));
                    self.coerce(item, property_schema, &property_pointer, depth + 1);
                }
            }
        }
        if let Some(additional) = schema.get("additionalProperties").filter(|s| s.is_object()) {
            let additional_pointer = format!("{pointer}/additionalProperties");
            for (key, item) in object.iter_mut() {
                if properties.is_some_and(|p| p.contains_key(key)) {
                    continue;
                }
                self.coerce(item, additional, &additional_pointer, depth + 1);
            }
        }
    }

    fn coerce_array(
        &self,
        items: &mut [Value],
        schema: &Map<String, Value>,
        pointer: &str,
        depth: usize,
    ) {
        let mut rest_from = 0usize;
        if let Some(Value::Array(prefix)) = schema.get("prefixItems") {
            for (i, (item, item_schema)) in items.iter_mut().zip(prefix).enumerate() {
                self.coerce(item, item_schema, &format!("{pointer}/prefixItems/{i}"), depth + 1);
            }
            rest_from = prefix.len();
        }
        match schema.get("items") {
            Some(Value::Array(tuple)) => {
                for (i, (item, item_schema)) in items.iter_mut().zip(tuple).enumerate() {
                    self.coerce(item, item_schema, &format!("{pointer}/items/{i}"), depth + 1);
                }
            }
            Some(item_schema @ Value::Object(_)) => {
                let item_pointer = format!("{pointer}/items");
                for item in items.iter_mut().skip(rest_from) {
                    self.coerce(item, item_schema, &item_pointer, depth + 1);
                }
            }
            _ => {}
        }
    }
}

/// OpenClaw's schema-guided coercions, applied in place:
///
/// - `allOf`: each subschema in order; `anyOf` / `oneOf`: each branch is tried
///   on a copy and the first copy that then validates against its branch is
///   kept, else the value is left unchanged.
/// - A `type` list the value already matches: no coercion; otherwise each
///   listed type is tried in order and the first coercion that changes the
///   value is taken.
/// - `number`: `null` -> `0`, a decimal numeric string (optional sign,
///   fraction, exponent; no hex, binary or `Infinity`) -> number (integral
///   results are stored as integers, `"1e3"` -> `1000`), `true`/`false` ->
///   `1`/`0`. `integer`: the same, but the string must hold a safe integer
///   (|n| <= 2^53 - 1). `boolean`: `null` -> `false`, `"true"`/`"false"`,
///   `1`/`0`. `string`: `null` -> `""`, numbers and booleans -> their
///   JavaScript string. `null`: `""`, `0`, `false` -> `null`. `array` /
///   `object`: a string holding a JSON array / object is parsed (newer
///   OpenClaw, for providers that send structured arguments as strings).
/// - Objects: declared `properties` present in the value are coerced with
///   their schema, undeclared keys with `additionalProperties` when it is a
///   schema. Arrays: `prefixItems` / tuple `items` by position, a single
///   `items` schema for every (remaining) element.
/// - Extensions over OpenClaw: local `$ref`s (`#/$defs/...`) are followed, and
///   a schema without `type` but with `properties` / `items` is descended into.
///
/// Never fails: anything it does not understand is left as it is. Branch
/// validators are compiled once per call; [`ValidatorCache::validate`] caches
/// them instead.
pub fn coerce_with_schema(schema: &Value, value: &mut Value) {
    let branches = Branches::Local { root: schema, cell: std::cell::OnceCell::new() };
    Coercer::new(schema, &branches).coerce(value, schema, "#", 0);
}
