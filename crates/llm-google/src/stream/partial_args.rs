//! Streamed function-call arguments (`partialArgs`, Gemini 3 on Vertex with
//! `streamFunctionCallArguments`): each part sets one value at a JSON Path, and a string
//! may arrive in pieces (`willContinue`). They are turned into JSON text fragments, as
//! every other provider streams arguments, while the paths come in document order (the
//! order a model writes them); a path that goes back into a closed object or skips an
//! array element cannot be written as a continuation, so the call then ends with its
//! whole arguments instead.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{Map, Number, Value};

/// Deepest path accepted: a bound on the stack of open containers.
const MAX_DEPTH: usize = 64;

/// One `partialArgs` entry.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct PartialArg {
    json_path: Option<String>,
    string_value: Option<String>,
    number_value: Option<Number>,
    bool_value: Option<bool>,
    null_value: Option<Value>,
    #[serde(deserialize_with = "super::lenient_bool")]
    will_continue: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// An open container of the text written so far.
#[derive(Debug)]
struct Frame {
    /// The segment that leads to it (`None` for the root).
    seg: Option<Seg>,
    /// Members (object) or elements (array) written.
    count: usize,
    /// Keys written (objects only): a repeated key is not a continuation.
    keys: HashSet<String>,
    array: bool,
}

impl Frame {
    fn new(seg: Option<Seg>, array: bool) -> Self {
        Frame { seg, count: 0, keys: HashSet::new(), array }
    }
}

/// The arguments of one streamed call.
#[derive(Debug)]
pub(super) struct StreamedArgs {
    value: Value,
    stack: Vec<Frame>,
    /// The path of a string still open in the text.
    open_string: Option<Vec<Seg>>,
    /// The text still continues the fragments sent.
    in_order: bool,
}

impl Default for StreamedArgs {
    fn default() -> Self {
        StreamedArgs {
            value: Value::Object(Map::new()),
            stack: Vec::new(),
            open_string: None,
            in_order: true,
        }
    }
}

/// Parses `$.a.b[0]['c']` (the RFC 9535 subset of single names and indexes).
fn parse_path(path: &str) -> Option<Vec<Seg>> {
    let mut rest = path.strip_prefix('$')?;
    let mut segs = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let (name, tail) = after.split_at(end);
            if name.is_empty() {
                return None;
            }
            segs.push(Seg::Key(name.to_owned()));
            rest = tail;
        } else if let Some(after) = rest.strip_prefix('[') {
            let close = after.find(']')?;
            let (inner, tail) = after.split_at(close);
            rest = tail.get(1..)?;
            let quoted = inner
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
            match quoted {
                Some(name) => segs.push(Seg::Key(name.to_owned())),
                None => segs.push(Seg::Index(inner.parse().ok()?)),
            }
        } else {
            return None;
        }
        if segs.len() > MAX_DEPTH {
            return None;
        }
    }
    Some(segs)
}

/// `s` as the inside of a JSON string.
fn escaped(s: &str) -> String {
    let quoted = Value::String(s.to_owned()).to_string();
    quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or_default().to_owned()
}

impl StreamedArgs {
    /// Applies one entry; returns the text to stream (possibly empty), or why the entry
    /// is invalid.
    pub(super) fn apply(&mut self, arg: PartialArg) -> Result<String, String> {
        let raw_path = arg.json_path.as_deref().unwrap_or_default();
        let Some(segs) = parse_path(raw_path).filter(|s| !s.is_empty()) else {
            return Err(format!("unsupported partialArgs jsonPath {raw_path:?}"));
        };
        let (leaf, append) = if let Some(s) = arg.string_value {
            (Value::String(s), true)
        } else if let Some(n) = arg.number_value {
            (Value::Number(n), false)
        } else if let Some(b) = arg.bool_value {
            (Value::Bool(b), false)
        } else if arg.null_value.is_some() {
            (Value::Null, false)
        } else {
            return Ok(String::new());
        };
        let continues = self.open_string.as_ref() == Some(&segs);
        set_at(&mut self.value, &segs, leaf.clone(), append && continues)?;
        if !self.in_order {
            return Ok(String::new());
        }
        let mut out = String::new();
        if continues {
            if let Value::String(s) = &leaf {
                out.push_str(&escaped(s));
            }
            if !arg.will_continue {
                out.push('"');
                self.open_string = None;
            }
            return Ok(out);
        }
        if self.open_string.take().is_some() {
            out.push('"');
        }
        if !self.write(&segs, &leaf, arg.will_continue, &mut out) {
            self.in_order = false;
            return Ok(String::new());
        }
        Ok(out)
    }

    /// Writes a new member at `segs` after the text so far; `false` when that is not a
    /// continuation of it.
    fn write(&mut self, segs: &[Seg], leaf: &Value, will_continue: bool, out: &mut String) -> bool {
        let Some((last, parents)) = segs.split_last() else { return false };
        if self.stack.is_empty() {
            out.push('{');
            self.stack.push(Frame::new(None, false));
        }
        // Keep the open containers on the way to the new member; close the rest.
        let mut keep = 1;
        while keep < self.stack.len()
            && self.stack.get(keep).and_then(|f| f.seg.as_ref()) == parents.get(keep - 1)
        {
            keep += 1;
        }
        while self.stack.len() > keep {
            if let Some(frame) = self.stack.pop() {
                out.push(if frame.array { ']' } else { '}' });
            }
        }
        let mut new_segs: Vec<&Seg> = parents.iter().skip(keep - 1).collect();
        new_segs.push(last);
        let count = new_segs.len();
        for (i, seg) in new_segs.into_iter().enumerate() {
            let Some(top) = self.stack.last_mut() else { return false };
            match (seg, top.array) {
                (Seg::Key(key), false) => {
                    if !top.keys.insert(key.clone()) {
                        return false;
                    }
                    if top.count > 0 {
                        out.push(',');
                    }
                    out.push('"');
                    out.push_str(&escaped(key));
                    out.push_str("\":");
                }
                (Seg::Index(index), true) if *index == top.count => {
                    if top.count > 0 {
                        out.push(',');
                    }
                }
                _ => return false,
            }
            top.count += 1;
            if i + 1 < count {
                let array = matches!(segs.get(keep - 1 + i + 1), Some(Seg::Index(_)));
                out.push(if array { '[' } else { '{' });
                self.stack.push(Frame::new(Some(seg.clone()), array));
            }
        }
        match leaf {
            Value::String(s) => {
                out.push('"');
                out.push_str(&escaped(s));
                if will_continue {
                    self.open_string = Some(segs.to_vec());
                } else {
                    out.push('"');
                }
            }
            other => out.push_str(&other.to_string()),
        }
        true
    }

    /// Ends the call: the text that closes it, and the whole arguments when the text
    /// could not follow the paths (`None` when the text already is the arguments).
    pub(super) fn finish(mut self) -> (String, Option<Value>) {
        let mut out = String::new();
        if !self.in_order {
            return (out, Some(self.value));
        }
        if self.open_string.take().is_some() {
            out.push('"');
        }
        if self.stack.is_empty() {
            out.push_str("{}");
        }
        while let Some(frame) = self.stack.pop() {
            out.push(if frame.array { ']' } else { '}' });
        }
        (out, None)
    }
}

/// Sets (or, for a continued string, appends to) the value at `segs`, creating objects
/// and arrays on the way; an index may only replace an element or append one.
fn set_at(root: &mut Value, segs: &[Seg], leaf: Value, append: bool) -> Result<(), String> {
    let mut node = root;
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        let next_is_array = matches!(segs.get(i + 1), Some(Seg::Index(_)));
        let fresh =
            || if next_is_array { Value::Array(Vec::new()) } else { Value::Object(Map::new()) };
        node = match seg {
            Seg::Key(key) => {
                if !node.is_object() {
                    *node = Value::Object(Map::new());
                }
                let Value::Object(map) = node else { return Err("not an object".to_owned()) };
                map.entry(key.clone()).or_insert_with(|| if last { Value::Null } else { fresh() })
            }
            Seg::Index(index) => {
                if !node.is_array() {
                    *node = Value::Array(Vec::new());
                }
                let Value::Array(items) = node else { return Err("not an array".to_owned()) };
                if *index > items.len() {
                    return Err(format!("partialArgs index {index} skips elements"));
                }
                if *index == items.len() {
                    items.push(if last { Value::Null } else { fresh() });
                }
                items.get_mut(*index).ok_or_else(|| "index out of range".to_owned())?
            }
        };
    }
    match (node, leaf) {
        (Value::String(existing), Value::String(piece)) if append => existing.push_str(&piece),
        (slot, leaf) => *slot = leaf,
    }
    Ok(())
}
