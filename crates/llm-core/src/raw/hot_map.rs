//! [`HotMap`]: open blocks by their wire index, the one last used found without hashing.

use std::collections::HashMap;

/// A map from a wire index (`u64`) to a decoder's state for it, whose entry last used is kept
/// outside the hash table.
///
/// Consecutive deltas nearly always continue the same block, so they reach it by one compare
/// instead of a SipHash of the key per delta. The table keeps SipHash with a random key: the
/// indexes come from the server, and a hostile one must not be able to make lookups collide.
#[derive(Debug, Clone)]
pub struct HotMap<V> {
    hot: Option<(u64, V)>,
    rest: HashMap<u64, V>,
}

impl<V> Default for HotMap<V> {
    fn default() -> Self {
        HotMap { hot: None, rest: HashMap::new() }
    }
}

impl<V> HotMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.rest.len() + usize::from(self.hot.is_some())
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.hot.is_none() && self.rest.is_empty()
    }

    /// Whether `key` has an entry.
    pub fn contains_key(&self, key: u64) -> bool {
        self.hot.as_ref().is_some_and(|(k, _)| *k == key)
            || (!self.rest.is_empty() && self.rest.contains_key(&key))
    }

    /// Puts `value` under `key`, which becomes the entry last used; returns the value it
    /// replaced.
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        let replaced = match self.hot.take() {
            Some((k, old)) if k == key => Some(old),
            Some((k, other)) => {
                let replaced = self.take_cold(key);
                self.rest.insert(k, other);
                replaced
            }
            None => self.take_cold(key),
        };
        self.hot = Some((key, value));
        replaced
    }

    /// The value under `key`, which becomes the entry last used.
    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        if self.hot.as_ref().is_none_or(|(k, _)| *k != key) {
            let value = self.take_cold(key)?;
            if let Some((k, other)) = self.hot.take() {
                self.rest.insert(k, other);
            }
            self.hot = Some((key, value));
        }
        self.hot.as_mut().map(|(_, value)| value)
    }

    /// The value under `key`, `value` put there first if there is none; it becomes the
    /// entry last used.
    pub fn get_or_insert(&mut self, key: u64, value: V) -> &mut V {
        let entry = match self.hot.take() {
            Some((k, existing)) if k == key => existing,
            hot => {
                let entry = self.take_cold(key).unwrap_or(value);
                if let Some((k, other)) = hot {
                    self.rest.insert(k, other);
                }
                entry
            }
        };
        &mut self.hot.insert((key, entry)).1
    }

    /// Takes the entry under `key` out.
    pub fn remove(&mut self, key: u64) -> Option<V> {
        match self.hot.take() {
            Some((k, value)) if k == key => Some(value),
            hot => {
                self.hot = hot;
                self.take_cold(key)
            }
        }
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> {
        let hot = self.hot.iter().map(|(k, v)| (*k, v));
        hot.chain(self.rest.iter().map(|(k, v)| (*k, v)))
    }

    fn take_cold(&mut self, key: u64) -> Option<V> {
        // An empty table is the usual case (one block open at a time): no hash for it.
        if self.rest.is_empty() { None } else { self.rest.remove(&key) }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u32),
        GetMut(u64, u32),
        GetOrInsert(u64, u32, u32),
        Remove(u64),
        Contains(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few keys, so the same ones come back, as block indexes do.
        let key = 0u64..6;
        prop_oneof![
            (key.clone(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            (key.clone(), any::<u32>()).prop_map(|(k, v)| Op::GetMut(k, v)),
            (key.clone(), any::<u32>(), any::<u32>())
                .prop_map(|(k, v, w)| Op::GetOrInsert(k, v, w)),
            key.clone().prop_map(Op::Remove),
            key.prop_map(Op::Contains),
        ]
    }

    proptest! {
        /// Any sequence of operations does what it does on a `HashMap`.
        #[test]
        fn behaves_as_a_hash_map(ops in proptest::collection::vec(op(), 0..60)) {
            let mut map = HotMap::new();
            let mut oracle: HashMap<u64, u32> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => prop_assert_eq!(map.insert(k, v), oracle.insert(k, v)),
                    Op::GetMut(k, v) => {
                        let (got, want) = (map.get_mut(k), oracle.get_mut(&k));
                        prop_assert_eq!(got.as_deref(), want.as_deref());
                        if let (Some(got), Some(want)) = (got, want) {
                            *got = v;
                            *want = v;
                        }
                    }
                    Op::GetOrInsert(k, v, w) => {
                        let got = map.get_or_insert(k, v);
                        let want = oracle.entry(k).or_insert(v);
                        prop_assert_eq!(*got, *want);
                        *got = w;
                        *want = w;
                    }
                    Op::Remove(k) => prop_assert_eq!(map.remove(k), oracle.remove(&k)),
                    Op::Contains(k) => prop_assert_eq!(map.contains_key(k), oracle.contains_key(&k)),
                }
                prop_assert_eq!(map.len(), oracle.len());
                prop_assert_eq!(map.is_empty(), oracle.is_empty());
                let mut entries: Vec<(u64, u32)> = map.iter().map(|(k, v)| (k, *v)).collect();
                entries.sort_unstable();
                let mut expected: Vec<(u64, u32)> = oracle.iter().map(|(k, v)| (*k, *v)).collect();
                expected.sort_unstable();
                prop_assert_eq!(entries, expected);
            }
        }
    }
}
