//! Tool calls in the stream: the argument scanner, split and legacy calls, generated ids.

use std::collections::HashMap;
use std::sync::Arc;

use llm_core::raw::sse::find_any;
use llm_core::raw::strict::NullFilter;
use llm_core::raw::{BlockKey, Channel, Delta, WireValue};
use serde_json::Value;

use super::wire::{WireFunction, WireToolCall};
use super::{Current, Decoder};

/// Calls by wire index: a map, with the last entry looked up or inserted kept aside, since
/// consecutive chunks nearly always continue the same call (its lookup hashed the index once
/// per chunk).
#[derive(Debug, Default)]
pub(super) struct ByIndex {
    last: Option<(u64, usize)>,
    map: HashMap<u64, usize>,
}

impl ByIndex {
    pub(super) fn get(&mut self, index: &u64) -> Option<&usize> {
        if self.last.is_none_or(|(i, _)| i != *index) {
            self.last = Some((*index, *self.map.get(index)?));
        }
        self.last.as_ref().map(|(_, pos)| pos)
    }

    pub(super) fn insert(&mut self, index: u64, pos: usize) {
        self.map.insert(index, pos);
        self.last = Some((index, pos));
    }
}

/// Where a call's arguments stand, scanned byte by byte (JSON structure is ASCII).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scan {
    /// Only whitespace so far.
    Start,
    /// Inside the top-level object.
    Object { depth: u32, in_string: bool, escape: bool },
    /// The top-level value is not an object (it becomes `{}`); not scanned further.
    NonObject,
    /// The top-level object is complete; only whitespace since.
    Closed,
    /// Something other than whitespace or a new object followed a complete object.
    Trailing,
}

impl Scan {
    /// Feeds `text`; returns the byte offset of a second top-level object's `{`.
    pub(super) fn feed(&mut self, text: &str) -> Option<usize> {
        let bytes = text.as_bytes();
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            match self {
                Scan::Start => {
                    if b == b'{' {
                        *self = Scan::Object { depth: 1, in_string: false, escape: false };
                    } else if !b.is_ascii_whitespace() {
                        *self = Scan::NonObject;
                        return None;
                    }
                }
                Scan::Object { depth, in_string, escape } => {
                    if *in_string {
                        // The string up to its closing quote in one go: plain runs skipped
                        // eight bytes at a time, each escape's two bytes stepped over here.
                        if *escape {
                            *escape = false;
                            i += 1;
                        }
                        loop {
                            let rest = bytes.get(i..).unwrap_or_default();
                            let p = find_any(rest, [b'"', b'\\'])?;
                            i += p;
                            if bytes.get(i) == Some(&b'"') {
                                *in_string = false;
                                break;
                            }
                            if i + 1 >= bytes.len() {
                                // The escaped byte comes with the next fragment.
                                *escape = true;
                                return None;
                            }
                            i += 2;
                        }
                    } else {
                        match b {
                            b'"' => *in_string = true,
                            b'{' | b'[' => *depth += 1,
                            b'}' | b']' => {
                                *depth = depth.saturating_sub(1);
                                if *depth == 0 {
                                    *self = Scan::Closed;
                                }
                            }
                            _ => {}
                        }
                    }
                }
                Scan::Closed => {
                    if b == b'{' {
                        return Some(i);
                    }
                    if !b.is_ascii_whitespace() {
                        *self = Scan::Trailing;
                        return None;
                    }
                }
                Scan::NonObject | Scan::Trailing => return None,
            }
            i += 1;
        }
        None
    }

    /// Whether the arguments can be used as they are (empty counts: `{}`).
    pub(super) fn usable(&self) -> bool {
        matches!(self, Scan::Start | Scan::Closed | Scan::NonObject)
    }
}

#[derive(Debug)]
pub(super) struct Call {
    pub(super) key: BlockKey,
    pub(super) id: String,
    pub(super) name: String,
    pub(super) scan: Scan,
    /// Removes the `null`s of omitted optionals for strict tools.
    pub(super) filter: Option<NullFilter>,
    /// How many calls were split off this one's concatenated arguments.
    pub(super) splits: u32,
    /// The wire index, for generated ids.
    pub(super) index: u64,
    /// The call whose arguments this one was split off (itself if none).
    pub(super) origin: usize,
}

impl Decoder {
    /// Opens a new call and returns its position in `calls`.
    pub(super) fn open_call(
        &mut self,
        index: u64,
        id: String,
        name: String,
        out: &mut Vec<Delta>,
    ) -> usize {
        self.close_thinking(out);
        self.current = Current::Tool;
        if self.calls.is_empty() {
            self.text_before_calls = self.visible_text;
            self.holding = self.text_before_calls;
        }
        let key = self.key();
        let filter = self.cfg.strict_plans.get(&name).map(|p| NullFilter::new(Arc::clone(p)));
        let pos = self.calls.len();
        self.calls.push(Call {
            key,
            id: id.clone(),
            name: name.clone(),
            scan: Scan::Start,
            filter,
            splits: 0,
            index,
            origin: pos,
        });
        self.by_index.insert(index, pos);
        if !id.is_empty() {
            self.by_id.insert(id.clone(), pos);
        }
        let signature = self.pending_signatures.remove(&id);
        self.emit(Delta::ToolCallStart { key, id: id.clone(), name, arguments: None }, true, out);
        if let Some(signature) = signature {
            self.emit(
                Delta::ToolCallMeta {
                    key,
                    id: None,
                    name: None,
                    thought_signature: Some(signature),
                },
                true,
                out,
            );
        }
        pos
    }

    /// Appends an argument fragment to call `pos`, splitting concatenated objects.
    pub(super) fn push_args(&mut self, mut pos: usize, fragment: String, out: &mut Vec<Delta>) {
        // The common case: no filter and no second object, the fragment moves on as is.
        if let Some(call) = self.calls.get_mut(pos)
            && call.filter.is_none()
        {
            let mut probe = call.scan;
            if probe.feed(&fragment).is_none() {
                call.scan = probe;
                let key = call.key;
                if !fragment.is_empty() {
                    self.emit(Delta::ToolCallArgs { key, fragment }, true, out);
                }
                return;
            }
        }
        let mut rest = fragment.as_str();
        loop {
            let Some(call) = self.calls.get_mut(pos) else { return };
            let split = call.scan.feed(rest);
            let (head, tail) = match split.and_then(|at| Some((rest.get(..at)?, rest.get(at..)?))) {
                Some((head, tail)) => (head, Some(tail)),
                None => (rest, None),
            };
            let key = call.key;
            let fragment = match call.filter.as_mut() {
                Some(filter) => filter.push(head),
                None => head.to_owned(),
            };
            if !fragment.is_empty() {
                self.emit(Delta::ToolCallArgs { key, fragment }, true, out);
            }
            let Some(tail) = tail else { return };
            // A second object: it is the next call's arguments. Ids count up from
            // the call the server named: `<id>_1`, `<id>_2`, ...
            let origin = self.calls.get(pos).map_or(pos, |c| c.origin);
            let (index, name) =
                self.calls.get(pos).map(|c| (c.index, c.name.clone())).unwrap_or_default();
            let (id, original_id) = {
                let Some(root) = self.calls.get_mut(origin) else { return };
                root.splits += 1;
                let id = if root.id.is_empty() {
                    String::new()
                } else {
                    format!("{}_{}", root.id, root.splits)
                };
                (id, root.id.clone())
            };
            tracing::debug!(tool = %name, "splitting concatenated tool-call arguments into a new call");
            let new_pos = self.open_call(index, id, name, out);
            if let Some(call) = self.calls.get_mut(new_pos) {
                call.origin = origin;
            }
            // Later fragments for this index or id continue the newest call.
            if !original_id.is_empty() {
                self.by_id.insert(original_id, new_pos);
            }
            pos = new_pos;
            rest = tail;
        }
    }

    pub(super) fn tool_call_delta(&mut self, entry: WireToolCall, out: &mut Vec<Delta>) {
        let index = entry.index;
        let id = entry.id.filter(|id| !id.is_empty() && id != "null");
        let (name, arguments) = entry.function.map(WireFunction::split).unwrap_or_default();
        let arguments = self.join_arguments(index, arguments);
        self.apply_call(index, id, name, arguments, out);
    }

    /// Argument text joined with a surrogate half the previous fragment of the same wire
    /// index ended with.
    pub(super) fn join_arguments(
        &mut self,
        index: Option<u64>,
        arguments: Option<WireValue>,
    ) -> Option<Value> {
        match arguments? {
            WireValue::Text(text) => Some(Value::String(self.surrogates.join(
                index.unwrap_or(u64::MAX),
                Channel::ToolArgs,
                text,
            ))),
            WireValue::Other(other) => Some(*other),
        }
    }

    pub(super) fn apply_call(
        &mut self,
        index: Option<u64>,
        id: Option<String>,
        name: Option<String>,
        arguments: Option<Value>,
        out: &mut Vec<Delta>,
    ) {
        let mut found = None;
        if let Some(index) = index
            && let Some(&pos) = self.by_index.get(&index)
        {
            let other_id = self.calls.get(pos).is_some_and(|c| {
                !c.id.is_empty()
                    && id.as_deref().is_some_and(|id| {
                        id != c.id && !is_split_of(id, &c.id) && !is_split_of(&c.id, id)
                    })
            });
            if !other_id {
                found = Some(pos);
            }
        }
        if found.is_none()
            && let Some(id) = &id
        {
            found = self.by_id.get(id).copied();
        }
        if found.is_none() && index.is_none() && id.is_none() {
            // No key at all: a continuation of the latest call, unless it names a new tool.
            let last = self.calls.len().checked_sub(1);
            let names_new = name.is_some()
                && last.and_then(|p| self.calls.get(p)).is_some_and(|c| !c.name.is_empty());
            if !names_new {
                found = last;
            }
        }
        let pos = match found {
            Some(pos) => {
                if let Some(index) = index
                    && self.by_index.get(&index) != Some(&pos)
                {
                    self.by_index.insert(index, pos);
                }
                let Some(call) = self.calls.get_mut(pos) else { return };
                let new_id = id.filter(|_| call.id.is_empty());
                let new_name = name.filter(|_| call.name.is_empty());
                if new_id.is_some() || new_name.is_some() {
                    if let Some(id) = &new_id {
                        call.id = id.clone();
                    }
                    if let Some(name) = &new_name {
                        call.name = name.clone();
                        if call.scan == Scan::Start {
                            call.filter = self
                                .cfg
                                .strict_plans
                                .get(name)
                                .map(|p| NullFilter::new(Arc::clone(p)));
                        }
                    }
                    let key = call.key;
                    if let Some(id) = &new_id {
                        self.by_id.insert(id.clone(), pos);
                    }
                    let signature =
                        new_id.as_ref().and_then(|id| self.pending_signatures.remove(id));
                    self.emit(
                        Delta::ToolCallMeta {
                            key,
                            id: new_id,
                            name: new_name,
                            thought_signature: signature,
                        },
                        true,
                        out,
                    );
                }
                pos
            }
            None => {
                let index = index.unwrap_or(self.calls.len() as u64);
                self.open_call(index, id.unwrap_or_default(), name.unwrap_or_default(), out)
            }
        };
        match arguments {
            Some(Value::String(s)) => self.push_args(pos, s, out),
            Some(Value::Null) | None => {}
            // Some servers send the arguments as an object.
            Some(other) => self.push_args(pos, other.to_string(), out),
        }
    }
    /// Gives calls the server sent without an id a deterministic one.
    pub(super) fn finish_calls(&mut self, out: &mut Vec<Delta>) {
        let late: Vec<Delta> = self
            .calls
            .iter()
            .filter(|c| c.id.is_empty())
            .map(|c| Delta::ToolCallMeta {
                key: c.key,
                id: Some(generated_id(&self.response_id, c.index, c.key)),
                name: None,
                thought_signature: None,
            })
            .collect();
        for delta in late {
            self.emit(delta, true, out);
        }
    }
}

/// Whether `id` is one of the ids given to calls split off `base`.
pub(super) fn is_split_of(id: &str, base: &str) -> bool {
    id.strip_prefix(base)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
}

/// A deterministic id for a call the server sent without one.
pub(super) fn generated_id(response_id: &str, index: u64, key: BlockKey) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in response_id.bytes().chain(index.to_le_bytes()).chain(key.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("call_{h:016x}")
}
