//! Where a fed piece changed the shown value (a JSON Pointer), and applying one step to it.

use super::*;

/// Where a child sits in its parent container.
#[derive(Debug, Clone)]
pub(super) enum Slot {
    /// The top-level value.
    Root,
    /// A member of an object.
    Key(String),
    /// An element of an array.
    Index(usize),
}

/// A pending change to a container of the shown value.
#[derive(Debug, Clone)]
pub(super) enum Op {
    /// Insert or replace a member / element.
    Put(Slot, Value),
    /// Append text to a string member / element that is already shown.
    Append(Slot, String),
    /// Remove a member / the last element (a partial number that became too long to show).
    Remove(Slot),
}

impl Op {
    pub(super) fn slot(&self) -> &Slot {
        match self {
            Op::Put(slot, _) | Op::Append(slot, _) | Op::Remove(slot) => slot,
        }
    }
}

/// Whether applying `op` to `node` changes it (a `Put` of the value already there does not).
pub(super) fn op_changes(node: &Value, op: &Op) -> bool {
    match op {
        Op::Put(slot, value) => child(node, slot) != Some(value),
        // An `Append` always carries text (`end_string` queues none for an empty rest).
        Op::Append(slot, _) => matches!(child(node, slot), Some(Value::String(_))),
        Op::Remove(slot) => child(node, slot).is_some(),
    }
}

/// The member or element at `slot` (an op's slot, never `Slot::Root`).
pub(super) fn child<'a>(node: &'a Value, slot: &Slot) -> Option<&'a Value> {
    match (node, slot) {
        (Value::Object(map), Slot::Key(key)) => map.get(key),
        (Value::Array(items), Slot::Index(index)) => items.get(*index),
        _ => None,
    }
}

/// Notes that `op` changes the container at `frames` (see [`note_change`]). A `Put` that
/// replaces a value (a repeated key) is followed down to where the two values differ.
pub(super) fn note_op(change: &mut Option<Vec<Slot>>, node: &Value, frames: &[Frame], op: &Op) {
    let slot = op.slot();
    match (op, child(node, slot)) {
        (Op::Put(_, new), Some(old)) => {
            let mut below = vec![slot.clone()];
            differing_path(old, new, &mut below);
            note_change(change, frames, &below.iter().collect::<Vec<_>>());
        }
        _ => note_change(change, frames, &[slot]),
    }
}

/// Extends `path` down from `old`/`new` while everything that differs between them sits in
/// one member or element.
pub(super) fn differing_path(mut old: &Value, mut new: &Value, path: &mut Vec<Slot>) {
    loop {
        let step = match (old, new) {
            (Value::Object(a), Value::Object(b)) => {
                let mut keys = a
                    .keys()
                    .chain(b.keys().filter(|k| !a.contains_key(*k)))
                    .filter(|k| a.get(*k) != b.get(*k));
                match (keys.next(), keys.next()) {
                    (Some(key), None) => Some((Slot::Key(key.clone()), a.get(key), b.get(key))),
                    _ => None,
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                let mut indices = (0..a.len().max(b.len())).filter(|&i| a.get(i) != b.get(i));
                match (indices.next(), indices.next()) {
                    (Some(i), None) => Some((Slot::Index(i), a.get(i), b.get(i))),
                    _ => None,
                }
            }
            _ => None,
        };
        let Some((slot, a, b)) = step else { return };
        path.push(slot);
        match (a, b) {
            (Some(a), Some(b)) => (old, new) = (a, b),
            _ => return,
        }
    }
}

/// Narrows `change` (the common path of the changes made so far by this push, `None`
/// before the first) to its common prefix with `frames`' slots followed by `last`.
pub(super) fn note_change(change: &mut Option<Vec<Slot>>, frames: &[Frame], last: &[&Slot]) {
    let steps = frames.iter().map(|f| &f.slot).chain(last.iter().copied());
    match change {
        None => *change = Some(steps.cloned().collect()),
        Some(common) => {
            let same = common.iter().zip(steps).take_while(|(a, b)| same_slot(a, b)).count();
            common.truncate(same);
        }
    }
}

/// Whether two steps of a change's path are the same (paths hold no `Slot::Root`).
pub(super) fn same_slot(a: &Slot, b: &Slot) -> bool {
    match (a, b) {
        (Slot::Key(a), Slot::Key(b)) => a == b,
        (Slot::Index(a), Slot::Index(b)) => a == b,
        _ => false,
    }
}

/// `path` as a JSON Pointer (RFC 6901): `""` for the whole value, `/a/0/b~1c` below it.
pub(super) fn json_pointer(path: &[Slot]) -> String {
    let mut out = String::new();
    for slot in path {
        match slot {
            Slot::Key(key) => {
                out.push('/');
                for c in key.chars() {
                    match c {
                        '~' => out.push_str("~0"),
                        '/' => out.push_str("~1"),
                        c => out.push(c),
                    }
                }
            }
            Slot::Index(index) => {
                let _ = std::fmt::Write::write_fmt(&mut out, format_args!("/{index}"));
            }
            Slot::Root => {}
        }
    }
    out
}

pub(super) fn apply_op(node: &mut Value, op: Op) {
    match (node, op) {
        (Value::Object(map), Op::Put(Slot::Key(key), value)) => {
            map.insert(key, value);
        }
        (Value::Array(items), Op::Put(Slot::Index(index), value)) => {
            if let Some(item) = items.get_mut(index) {
                *item = value;
            } else {
                items.push(value);
            }
        }
        (Value::Object(map), Op::Append(Slot::Key(key), text)) => {
            if let Some(Value::String(s)) = map.get_mut(&key) {
                s.push_str(&text);
            }
        }
        (Value::Array(items), Op::Append(Slot::Index(index), text)) => {
            if let Some(Value::String(s)) = items.get_mut(index) {
                s.push_str(&text);
            }
        }
        (Value::Object(map), Op::Remove(Slot::Key(key))) => {
            map.remove(&key);
        }
        (Value::Array(items), Op::Remove(Slot::Index(index))) if index + 1 == items.len() => {
            items.pop();
        }
        _ => {}
    }
}

pub(super) fn child_mut<'a>(node: &'a mut Value, slot: &Slot) -> Option<&'a mut Value> {
    match (node, slot) {
        (Value::Object(map), Slot::Key(key)) => map.get_mut(key),
        (Value::Array(items), Slot::Index(index)) => items.get_mut(*index),
        (node, Slot::Root) => Some(node),
        _ => None,
    }
}

/// Walks from the root down the slots of `frames` (each frame's slot in its parent).
pub(super) fn navigate<'a>(root: &'a mut Value, frames: &[Frame]) -> Option<&'a mut Value> {
    let mut node = root;
    for frame in frames {
        node = child_mut(node, &frame.slot)?;
    }
    Some(node)
}
