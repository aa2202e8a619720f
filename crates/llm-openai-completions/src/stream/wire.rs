//! The stream chunk as read from the wire, leniently, and its usage.

use std::borrow::Cow;

use llm_core::{Usage, raw::WireValue};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::compat::DEFAULT_REASONING_FIELDS;

/// A stream chunk, as far as the decoder reads it. Leaves accept any JSON type (a field
/// read as a number or a string is `None` when it is something else); unknown fields are
/// skipped.
///
/// `id` and `model` repeat in every chunk but are read once: borrowed from the event's
/// data, they cost no allocation per chunk (one that is not a string fails the typed
/// read, and the lenient read ignores it, as the decoder does).
///
/// The structs are kept small (rare fields boxed, numbers and strings read as what the
/// decoder uses rather than as `Value`s of 72 bytes): a chunk's parse moves each of them
/// several times, and large ones were copied whole at every move.
#[derive(Debug, Default, Deserialize)]
pub(super) struct WireChunk<'a> {
    #[serde(borrow)]
    pub(super) id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) model: Option<Cow<'a, str>>,
    /// The first choice of `index` 0 (only that one is read); every choice is still
    /// read, so one of an unexpected shape sends the chunk to the lenient read as before.
    #[serde(default, deserialize_with = "first_choice")]
    pub(super) choices: Option<WireChoice>,
    pub(super) usage: Option<Box<Value>>,
    pub(super) error: Option<Box<Value>>,
}

/// `choices`: the first of `index` 0, without collecting them.
fn first_choice<'de, D: Deserializer<'de>>(d: D) -> Result<Option<WireChoice>, D::Error> {
    llm_core::raw::first_element(d, |choice: &WireChoice| choice.index.unwrap_or(0) == 0)
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireChoice {
    #[serde(default, deserialize_with = "any_number")]
    pub(super) index: Option<u64>,
    pub(super) delta: Option<WireDelta>,
    pub(super) message: Option<Box<WireDelta>>,
    #[serde(default, deserialize_with = "any_string")]
    pub(super) finish_reason: Option<String>,
    pub(super) usage: Option<Box<Value>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireDelta {
    pub(super) content: Option<WireValue>,
    #[serde(default, deserialize_with = "any_string")]
    pub(super) refusal: Option<String>,
    pub(super) reasoning_content: Option<Box<WireValue>>,
    pub(super) reasoning: Option<Box<WireValue>>,
    pub(super) reasoning_text: Option<Box<WireValue>>,
    pub(super) tool_calls: Option<Vec<WireToolCall>>,
    pub(super) function_call: Option<Box<WireFunction>>,
    pub(super) reasoning_details: Option<Box<Value>>,
    /// Reasoning fields a compat names besides the three above.
    #[serde(skip)]
    pub(super) other_reasoning: Box<[(String, WireValue)]>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireToolCall {
    #[serde(default, deserialize_with = "any_number")]
    pub(super) index: Option<u64>,
    #[serde(default, deserialize_with = "any_string")]
    pub(super) id: Option<String>,
    pub(super) function: Option<WireFunction>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireFunction {
    #[serde(default, deserialize_with = "any_string")]
    pub(super) name: Option<String>,
    pub(super) arguments: Option<WireValue>,
}

/// Any JSON value, read as [`number`].
fn any_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(Option::<Value>::deserialize(d)?.as_ref().and_then(number))
}

/// Any JSON value, kept if it is a string.
fn any_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(string_of(Option::<Value>::deserialize(d)?))
}

/// The string of a value that is one.
fn string_of(value: Option<Value>) -> Option<String> {
    match value {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

impl WireFunction {
    /// The non-empty name and the arguments.
    pub(super) fn split(self) -> (Option<String>, Option<WireValue>) {
        (self.name.filter(|n| !n.is_empty()), self.arguments)
    }

    pub(super) fn lenient(value: Value) -> Option<Self> {
        let Value::Object(mut m) = value else { return None };
        Some(WireFunction {
            name: string_of(m.remove("name")),
            arguments: m.remove("arguments").map(WireValue::from),
        })
    }
}

impl WireChunk<'_> {
    /// Picks a chunk apart by hand: parts of an unexpected shape are skipped.
    pub(super) fn lenient(value: Value, reasoning_fields: &[String]) -> Self {
        let Value::Object(mut m) = value else { return WireChunk::default() };
        let choices = match m.remove("choices") {
            Some(Value::Array(items)) => items
                .into_iter()
                .filter_map(|c| WireChoice::lenient(c, reasoning_fields))
                .find(|c| c.index.unwrap_or(0) == 0),
            _ => None,
        };
        WireChunk {
            id: owned_str(m.remove("id")),
            model: owned_str(m.remove("model")),
            choices,
            usage: m.remove("usage").map(Box::new),
            error: m.remove("error").map(Box::new),
        }
    }
}

impl WireChoice {
    pub(super) fn lenient(value: Value, reasoning_fields: &[String]) -> Option<Self> {
        let Value::Object(mut m) = value else { return None };
        Some(WireChoice {
            index: m.remove("index").as_ref().and_then(number),
            delta: m.remove("delta").and_then(|d| WireDelta::lenient(d, reasoning_fields)),
            message: m
                .remove("message")
                .and_then(|d| WireDelta::lenient(d, reasoning_fields))
                .map(Box::new),
            finish_reason: string_of(m.remove("finish_reason")),
            usage: m.remove("usage").map(Box::new),
        })
    }
}

impl WireDelta {
    pub(super) fn lenient(value: Value, reasoning_fields: &[String]) -> Option<Self> {
        let Value::Object(mut m) = value else { return None };
        let tool_calls = match m.remove("tool_calls") {
            Some(Value::Array(items)) => Some(
                items
                    .into_iter()
                    .filter_map(|item| {
                        let Value::Object(mut t) = item else { return None };
                        Some(WireToolCall {
                            index: t.remove("index").as_ref().and_then(number),
                            id: string_of(t.remove("id")),
                            function: t.remove("function").and_then(WireFunction::lenient),
                        })
                    })
                    .collect(),
            ),
            _ => None,
        };
        let other_reasoning = reasoning_fields
            .iter()
            .filter(|f| !DEFAULT_REASONING_FIELDS.contains(&f.as_str()))
            .filter_map(|f| m.remove(f.as_str()).map(|v| (f.clone(), WireValue::from(v))))
            .collect();
        let boxed = |v: Value| Box::new(WireValue::from(v));
        Some(WireDelta {
            content: m.remove("content").map(WireValue::from),
            refusal: string_of(m.remove("refusal")),
            reasoning_content: m.remove("reasoning_content").map(boxed),
            reasoning: m.remove("reasoning").map(boxed),
            reasoning_text: m.remove("reasoning_text").map(boxed),
            tool_calls,
            function_call: m.remove("function_call").and_then(WireFunction::lenient).map(Box::new),
            reasoning_details: m.remove("reasoning_details").map(Box::new),
            other_reasoning,
        })
    }
}

/// A non-negative integer from a JSON number of any width (or a numeric string).
pub(super) fn number(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64().filter(|f| f.is_finite() && *f >= 0.0).map(|f| f.round() as u64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// OpenClaw's `parseChunkUsage`: `input` excludes cache reads and writes.
pub(crate) fn parse_usage(usage: &Value) -> Usage {
    let get = |v: &Value, k: &str| v.get(k).and_then(number);
    let prompt = get(usage, "prompt_tokens").unwrap_or(0);
    let output = get(usage, "completion_tokens").unwrap_or(0);
    let details = usage.get("prompt_tokens_details").filter(|d| d.is_object());
    let cache_read = details
        .and_then(|d| get(d, "cached_tokens"))
        .or_else(|| get(usage, "prompt_cache_hit_tokens"))
        .unwrap_or(0);
    let cache_write = details.and_then(|d| get(d, "cache_write_tokens")).unwrap_or(0);
    let input = prompt.saturating_sub(cache_read.saturating_add(cache_write));
    Usage {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens: input + output + cache_read + cache_write,
        ..Usage::default()
    }
}

/// A string value as a `Cow` (anything else is not read).
fn owned_str(value: Option<Value>) -> Option<Cow<'static, str>> {
    match value {
        Some(Value::String(s)) => Some(Cow::Owned(s)),
        _ => None,
    }
}
