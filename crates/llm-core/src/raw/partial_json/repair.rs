//! Whole-buffer repair and parsing: `repair_json`, `parse_streaming_json`,
//! `split_concatenated_objects`.

use super::*;

/// OpenClaw's `repairJson`.
///
/// Rewrites only the inside of string literals:
/// * raw control characters (U+0000–U+001F) are escaped (`\b \f \n \r \t`, else `\u00XX`);
/// * a backslash before a character that cannot start an escape is doubled (`\d` → `\\d`);
/// * `\u` not followed by four hex digits is such an invalid escape;
/// * a valid control escape (`\b \f \n \r \t`) after a drive path written with single
///   backslashes gets its backslash doubled, so `"C:\new\file"` keeps its backslashes (the
///   exact rule is in the [module docs](super#the-drive-path-rule); unlike OpenClaw, a path
///   written with `\\` or `/` separators is never repaired);
/// * a lone backslash at the very end becomes `\\`.
///
/// Returns the input unchanged (borrowed) when nothing needed repair.
pub fn repair_json(input: &str) -> Cow<'_, str> {
    let bytes = input.as_bytes();
    let mut out: Option<String> = None;
    // Bytes of `input` before this index are already in `out` (when `out` is Some).
    let mut copied = 0usize;
    let mut in_string = false;
    let mut path = WinPath::default();
    let mut i = 0usize;

    // Replace the `len` input bytes at `at` with `with`.
    let replace =
        |out: &mut Option<String>, copied: &mut usize, at: usize, len: usize, with: &str| {
            let buf = out.get_or_insert_with(|| String::with_capacity(input.len() + 16));
            buf.push_str(input.get(*copied..at).unwrap_or_default());
            buf.push_str(with);
            *copied = at + len;
        };

    while let Some(&b) = bytes.get(i) {
        if !in_string {
            let rest = bytes.get(i..).unwrap_or_default();
            match rest.iter().position(|&c| c == b'"') {
                Some(k) => {
                    in_string = true;
                    path = WinPath::default();
                    i += k + 1;
                }
                None => break,
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = false;
                i += 1;
            }
            b'\\' => match bytes.get(i + 1) {
                None => {
                    replace(&mut out, &mut copied, i, 1, "\\\\");
                    i += 1;
                }
                Some(b'u') => match bytes.get(i + 2..i + 6) {
                    Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => {
                        path.feed_valid_escape();
                        i += 6;
                    }
                    _ => {
                        replace(&mut out, &mut copied, i, 1, "\\\\");
                        path.feed(b"\\");
                        i += 1;
                    }
                },
                Some(&n) if is_control_escape(n) && path.looks_like_path() => {
                    replace(&mut out, &mut copied, i, 1, "\\\\");
                    path.feed(b"\\");
                    i += 1;
                }
                Some(&n) if is_control_escape(n) || matches!(n, b'"' | b'/' | b'\\') => {
                    path.feed_valid_escape();
                    i += 2;
                }
                Some(_) => {
                    replace(&mut out, &mut copied, i, 1, "\\\\");
                    path.feed(b"\\");
                    i += 1;
                }
            },
            c if c < 0x20 => {
                let esc;
                let with = match c {
                    0x08 => "\\b",
                    0x0c => "\\f",
                    b'\n' => "\\n",
                    b'\r' => "\\r",
                    b'\t' => "\\t",
                    _ => {
                        esc = format!("\\u{c:04x}");
                        esc.as_str()
                    }
                };
                replace(&mut out, &mut copied, i, 1, with);
                path.feed(&[c]);
                i += 1;
            }
            _ => {
                let rest = bytes.get(i..).unwrap_or_default();
                let k = rest
                    .iter()
                    .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                    .unwrap_or(rest.len());
                path.feed(rest.get(..k).unwrap_or_default());
                i += k;
            }
        }
    }

    match out {
        Some(mut buf) => {
            buf.push_str(input.get(copied..).unwrap_or_default());
            Cow::Owned(buf)
        }
        None => Cow::Borrowed(input),
    }
}

pub(super) fn empty_object() -> Value {
    Value::Object(Map::new())
}

pub(super) fn object_or_empty(value: Value) -> Value {
    if value.is_object() { value } else { empty_object() }
}

/// Strict parse of the repaired text, as OpenClaw's `parseJsonWithRepair`.
pub(super) fn parse_with_repair(input: &str) -> Option<Value> {
    serde_json::from_str::<Value>(&repair_json(input)).ok()
}

/// OpenClaw's `parseStreamingJson`. Never fails.
///
/// Returns `{}` for empty or whitespace-only input; otherwise the strict parse of
/// [`repair_json`]`(input)` if that succeeds, else the best-effort partial value of the
/// prefix (see [`PartialJson::value`] for exactly what a partial value shows). A result that is
/// not an object (`null`, an array, a string, a number, a boolean) becomes `{}`.
pub fn parse_streaming_json(input: &str) -> Value {
    if input.trim().is_empty() {
        return empty_object();
    }
    match parse_with_repair(input) {
        Some(value) => object_or_empty(value),
        None => {
            let mut parser = PartialJson::new();
            parser.push(input);
            parser.root
        }
    }
}

/// Detects concatenated top-level objects `{…}{…}` (seen from OpenAI-compatible servers that
/// put several parallel calls' arguments into one call) and returns each object's text span.
///
/// Returns `None` unless the input is two or more objects separated only by optional JSON
/// whitespace, each of them a complete object after [`repair_json`]. A single object, an
/// unfinished object or anything else between the objects gives `None`.
pub fn split_concatenated_objects(input: &str) -> Option<Vec<&str>> {
    let bytes = input.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0usize;
    loop {
        while bytes.get(i).is_some_and(|&b| is_ws(b)) {
            i += 1;
        }
        if i >= bytes.len() {
            break;
        }
        if bytes.get(i) != Some(&b'{') {
            return None;
        }
        let start = i;
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        let mut end = None;
        while let Some(&b) = bytes.get(i) {
            i += 1;
            if in_string {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_string = false;
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let span = input.get(start..end?)?;
        match parse_with_repair(span) {
            Some(Value::Object(_)) => spans.push(span),
            _ => return None,
        }
    }
    (spans.len() >= 2).then_some(spans)
}
