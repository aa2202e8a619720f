//! The events as read: borrowed from the data, large fields kept raw, and string literals
//! decoded in place.

use super::*;

/// One SSE event's data. Every field is optional and loosely typed; unknown fields
/// (`obfuscation`, `logprobs`, `sequence_number`, ...) are ignored.
///
/// Borrowed from the data: the type name without an allocation, and the fields that may be
/// large (`delta`, `arguments`, `item`, `response`) as raw JSON, decoded only where used (a
/// `.done` event repeats a whole value that usually streamed already).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct WireEvent<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: Option<Cow<'a, str>>,
    /// Text, reasoning or an argument fragment (see [`text_of`]).
    #[serde(borrow)]
    pub(super) delta: Option<&'a RawValue>,
    pub(super) item_id: Option<Value>,
    pub(super) output_index: Option<Value>,
    pub(super) summary_index: Option<Value>,
    /// A `.done` value, decoded in place in the event's data only after the event was read
    /// ([`Deferred`]).
    #[serde(borrow)]
    pub(super) arguments: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) item: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) response: Option<&'a RawValue>,
    pub(super) error: Option<Value>,
    pub(super) code: Option<Value>,
    pub(super) message: Option<Value>,
}

/// The fields of a finished message or function call item that clawcall reads, without
/// decoding the rest (a message's text that already streamed is skipped, not parsed, and a
/// call's arguments are decoded in place in the event's data, see [`Deferred`]).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ItemHead<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) id: Option<Cow<'a, str>>,
    pub(super) phase: Option<Value>,
    #[serde(borrow)]
    pub(super) call_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) arguments: Option<&'a RawValue>,
}

/// A call's complete arguments in a `.done` event, handled once the event's borrowed parse
/// is over: the JSON string literal is then decoded in place in the event's data (which
/// becomes the arguments' `String`), so a whole value repeated at the end of a stream costs
/// no second buffer.
#[derive(Debug)]
pub(super) enum Deferred {
    /// `response.function_call_arguments.done`.
    ArgumentsDone { key: BlockKey, literal: Literal },
    /// `response.output_item.done` of a function call: the item without its arguments.
    CallDone { key: BlockKey, item: Value, literal: Literal },
}

/// Where a JSON string literal (quotes included) sits in an event's data.
#[derive(Debug, Clone, Copy)]
pub(super) struct Literal {
    pub(super) start: usize,
    pub(super) end: usize,
}

impl Literal {
    /// `raw`'s place in `data`, when it is a string literal borrowed from `data`.
    pub(super) fn of(raw: &RawValue, data: &str) -> Option<Literal> {
        let text = raw.get();
        if !text.starts_with('"') {
            return None;
        }
        // Pointer arithmetic on addresses only (no access): where serde borrowed `raw` from.
        let start = (text.as_ptr() as usize).checked_sub(data.as_ptr() as usize)?;
        let end = start.checked_add(text.len())?;
        let slice = data.get(start..end)?;
        std::ptr::eq(slice.as_ptr(), text.as_ptr()).then_some(Literal { start, end })
    }

    /// Whether the literal is `""`.
    pub(super) fn is_empty(self) -> bool {
        self.end - self.start <= 2
    }
}

/// Decodes the JSON string literal at `literal` of `data` in place: the decoded text is
/// written from the start of the same buffer (it is never longer than the literal), which is
/// then cut to it, so no second buffer is allocated. The literal was checked by serde_json
/// (its escapes are valid and it holds no control characters); a lone surrogate escape,
/// which is valid JSON but no Rust string, is an error, as serde_json's decode of a `String`
/// gives.
pub(super) fn decode_in_place(data: String, literal: Literal) -> Result<String, &'static str> {
    let mut bytes = data.into_bytes();
    let mut read = literal.start + 1;
    let end = literal.end.saturating_sub(1);
    let mut write = 0;
    while read < end {
        let Some(&byte) = bytes.get(read) else { return Err("literal out of range") };
        if byte != b'\\' {
            // The decoded text never overtakes the literal: `write < read`.
            let run = bytes
                .get(read..end)
                .map_or(0, |rest| rest.iter().position(|&b| b == b'\\').unwrap_or(rest.len()));
            bytes.copy_within(read..read + run, write);
            read += run;
            write += run;
            continue;
        }
        let escape = bytes.get(read + 1).copied().ok_or("unfinished escape")?;
        read += 2;
        let simple = match escape {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0C,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            _ => 0,
        };
        if simple != 0 {
            // One byte for two (the common case in code): written directly.
            *bytes.get_mut(write).ok_or("literal out of range")? = simple;
            write += 1;
            continue;
        }
        let decoded = match escape {
            b'u' => {
                let first = hex4(&bytes, read).ok_or("invalid \\u escape")?;
                read += 4;
                match first {
                    0xD800..=0xDBFF => {
                        let low = match (bytes.get(read), bytes.get(read + 1)) {
                            (Some(b'\\'), Some(b'u')) => hex4(&bytes, read + 2),
                            _ => None,
                        }
                        .filter(|low| (0xDC00..=0xDFFF).contains(low))
                        .ok_or("lone leading surrogate in hex escape")?;
                        read += 6;
                        let code = 0x10000 + ((first - 0xD800) << 10) + (low - 0xDC00);
                        char::from_u32(code).ok_or("invalid surrogate pair")?
                    }
                    0xDC00..=0xDFFF => return Err("lone trailing surrogate in hex escape"),
                    _ => char::from_u32(first).ok_or("invalid \\u escape")?,
                }
            }
            _ => return Err("invalid escape"),
        };
        let mut utf8 = [0u8; 4];
        let encoded = decoded.encode_utf8(&mut utf8).as_bytes();
        // An escape is at least two bytes and its character at most as long (`\uXXXX` six
        // bytes for at most three, a pair twelve for four): still `write < read`.
        let target = bytes.get_mut(write..write + encoded.len()).ok_or("literal out of range")?;
        target.copy_from_slice(encoded);
        write += encoded.len();
    }
    bytes.truncate(write);
    String::from_utf8(bytes).map_err(|_| "invalid UTF-8")
}

/// The four hex digits at `at`.
pub(super) fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = std::str::from_utf8(bytes.get(at..at + 4)?).ok()?;
    u32::from_str_radix(digits, 16).ok().filter(|_| digits.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A `response` object whose `output` items are kept raw: [`Decoder::reconcile_output`]
/// decodes only the items that did not finish already (a finished item repeats text or
/// arguments that may be many megabytes).
#[derive(Debug)]
pub(super) struct ResponseParts<'a> {
    /// Every field but an `output` array; `Null` when the response is no object or does not
    /// decode.
    pub(super) fields: Value,
    /// The `output` items, as received.
    pub(super) output: Vec<&'a RawValue>,
    /// The whole response, as received.
    pub(super) raw: &'a str,
}

impl<'a> ResponseParts<'a> {
    pub(super) fn parse(raw: &'a str) -> Self {
        match serde_json::from_str::<SplitResponse<'a>>(raw) {
            Ok(SplitResponse { fields, output }) => {
                ResponseParts { fields: Value::Object(fields), output, raw }
            }
            Err(_) => ResponseParts { fields: Value::Null, output: Vec::new(), raw },
        }
    }
}

/// The map behind [`ResponseParts`]: `output` borrowed item by item, the rest decoded.
pub(super) struct SplitResponse<'a> {
    pub(super) fields: serde_json::Map<String, Value>,
    pub(super) output: Vec<&'a RawValue>,
}

impl<'de> Deserialize<'de> for SplitResponse<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = SplitResponse<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a response object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<SplitResponse<'de>, A::Error> {
                let mut fields = serde_json::Map::new();
                let mut output = Vec::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key != "output" {
                        fields.insert(key.into_owned(), map.next_value()?);
                        continue;
                    }
                    let raw: &'de RawValue = map.next_value()?;
                    match serde_json::from_str::<Vec<&'de RawValue>>(raw.get()) {
                        Ok(items) => output = items,
                        // Not an array: kept as a field, as any other.
                        Err(_) => {
                            let value = serde_json::from_str(raw.get())
                                .map_err(serde::de::Error::custom)?;
                            fields.insert(key.into_owned(), value);
                        }
                    }
                }
                Ok(SplitResponse { fields, output })
            }
        }
        d.deserialize_map(V)
    }
}
