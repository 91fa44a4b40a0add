//! A set kept as one sorted vector: `O(log n)` lookups, `O(n)` inserts and removals that
//! move `n` small keys in memory, which for the tens of members of a scheduler's tree
//! (BFQ's service tree over cgroups: Linux `block/bfq-wf2q.c` keeps its active and idle
//! entities in red-black trees ordered by finish time) is several times faster than a
//! `BTreeSet`'s node walks and rebalancing. Not a policy of its own.

/// An ordered set of `Copy` keys in one sorted `Vec`.
#[derive(Clone, Debug)]
pub(crate) struct SortedSet<T> {
    items: Vec<T>,
}

impl<T> SortedSet<T> {
    /// An empty set (no allocation).
    pub(crate) const fn new() -> Self {
        SortedSet { items: Vec::new() }
    }
}

impl<T: Ord + Copy> SortedSet<T> {
    /// Add `x`; false if it was there already.
    #[inline]
    pub(crate) fn insert(&mut self, x: T) -> bool {
        match self.items.binary_search(&x) {
            Ok(_) => false,
            Err(at) => {
                self.items.insert(at, x);
                true
            }
        }
    }

    /// Take `x` out; false if it was not there.
    #[inline]
    pub(crate) fn remove(&mut self, x: &T) -> bool {
        match self.items.binary_search(x) {
            Ok(at) => {
                self.items.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// The least key.
    #[inline]
    pub(crate) fn first(&self) -> Option<&T> {
        self.items.first()
    }

    /// The greatest key.
    #[inline]
    pub(crate) fn last(&self) -> Option<&T> {
        self.items.last()
    }

    /// The keys in order.
    #[inline]
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    /// No key.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::SortedSet;

    /// The same operations on a `BTreeSet` and on the sorted vector give the same set,
    /// in the same order, after every step (a seeded random mix of inserts and removes).
    #[test]
    fn behaves_as_a_btreeset() {
        let (mut a, mut b) = (SortedSet::new(), BTreeSet::new());
        let mut x: u64 = 12345;
        for _ in 0..5000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let k = ((x >> 33) % 64, (x >> 20) % 3);
            if (x >> 60) & 1 == 0 {
                assert_eq!(a.insert(k), b.insert(k));
            } else {
                assert_eq!(a.remove(&k), b.remove(&k));
            }
            assert!(a.iter().eq(b.iter()));
            assert_eq!(a.first(), b.first());
            assert_eq!(a.last(), b.last());
            assert_eq!(a.is_empty(), b.is_empty());
        }
    }
}
