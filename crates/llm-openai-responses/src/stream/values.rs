//! Reading finished items and responses: errors, usage, ids and text.

use super::*;

/// `response.failed` (or a failed status) as an error: `<code>: <message>`,
/// `incomplete: <reason>`, or a generic message.
pub(super) fn failure(response: &Value, raw: &str) -> Error {
    if let Some(error) = response.get("error").filter(|e| e.is_object()) {
        return stream_error(error, raw);
    }
    if let Some(reason) = str_of(response.get("incomplete_details").and_then(|d| d.get("reason"))) {
        return Error::new(ErrorKind::Provider, PROVIDER, format!("incomplete: {reason}"))
            .with_code(reason)
            .with_retryable(false)
            .with_body(raw);
    }
    let status = str_of(response.get("status")).unwrap_or("failed");
    let kind = if status == "cancelled" { ErrorKind::Aborted } else { ErrorKind::Provider };
    Error::new(
        kind,
        PROVIDER,
        format!("Response {status}: unknown error (no error details in response)"),
    )
    .with_retryable(false)
    .with_body(raw)
}

/// `{"v":1,"id":<item id>,"phase"?}`: the message item's replay signature (none
/// without an id).
pub(super) fn text_signature(key: BlockKey, item: &Value, out: &mut Vec<Delta>) {
    let Some(id) = str_of(item.get("id")) else { return };
    let mut signature = serde_json::Map::new();
    signature.insert("v".to_owned(), Value::from(1));
    signature.insert("id".to_owned(), Value::from(id));
    if let Some(phase) = str_of(item.get("phase")) {
        signature.insert("phase".to_owned(), Value::from(phase));
    }
    out.push(Delta::TextSignature { key, signature: Value::Object(signature).to_string() });
}

pub(super) fn metadata(response: &Value) -> Delta {
    Delta::Metadata {
        response_id: str_of(response.get("id")).map(str::to_owned),
        response_model: str_of(response.get("model")).map(str::to_owned),
    }
}

/// Usage: `input` excludes cached tokens; reasoning tokens are part of `output_tokens`.
pub(super) fn usage(usage: &Value) -> Option<Usage> {
    if !usage.is_object() {
        return None;
    }
    let input = num(usage.get("input_tokens")).unwrap_or(0);
    let cached =
        num(usage.get("input_tokens_details").and_then(|d| d.get("cached_tokens"))).unwrap_or(0);
    let output = num(usage.get("output_tokens")).unwrap_or(0);
    Some(Usage {
        input: input.saturating_sub(cached),
        output,
        cache_read: cached,
        cache_write: 0,
        total_tokens: num(usage.get("total_tokens")).unwrap_or(input + output),
        cost: Default::default(),
    })
}

pub(super) fn call_id(item: &Value) -> String {
    let call = str_of(item.get("call_id")).filter(|s| !s.is_empty());
    let id = str_of(item.get("id")).filter(|s| !s.is_empty());
    match (call, id) {
        (Some(call), Some(id)) => format!("{call}|{id}"),
        (Some(one), None) | (None, Some(one)) => one.to_owned(),
        (None, None) => String::new(),
    }
}

pub(super) fn message_text(item: &Value) -> String {
    let mut text = String::new();
    for part in item.get("content").and_then(Value::as_array).into_iter().flatten() {
        match str_of(part.get("type")) {
            // `text` is Azure's spelling of `output_text`.
            Some("output_text" | "text") => {
                text.push_str(str_of(part.get("text")).unwrap_or_default())
            }
            Some("refusal") => text.push_str(str_of(part.get("refusal")).unwrap_or_default()),
            _ => {}
        }
    }
    text
}

pub(super) fn reasoning_text(item: &Value) -> String {
    let collect = |field: &str| -> Vec<&str> {
        item.get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| str_of(p.get("text")))
            .filter(|t| !t.is_empty())
            .collect()
    };
    let summary = collect("summary");
    if summary.is_empty() { collect("content").join("\n\n") } else { summary.join("\n\n") }
}

/// A field that may hold a large value, decoded where it is used.
pub(super) fn value_of(raw: Option<&RawValue>) -> Option<Value> {
    serde_json::from_str(raw?.get()).ok()
}

/// A string field as [`WireText`] (a lone surrogate half at either end kept for the next
/// delta); any other JSON value is absent.
pub(super) fn text_of(raw: &RawValue) -> Option<WireText> {
    let raw = raw.get();
    if !raw.starts_with('"') {
        return None;
    }
    serde_json::from_str(raw).ok()
}

pub(super) fn str_of(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str)
}

/// A non-negative integer of any JSON width or spelling (`3`, `3.0`, `"3"`).
pub(super) fn num(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64().filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0).map(|f| f as u64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}
