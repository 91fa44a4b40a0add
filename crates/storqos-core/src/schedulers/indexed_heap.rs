//! A binary min-heap of members (tenants, flows) by key, at most one entry per member,
//! that knows where each member sits, so a member's key can change or the member can
//! leave in `O(log n)`: no stale entries, so the heap never holds more than one entry
//! per backlogged member. Not a policy of its own: the data structure behind mClock's
//! three tag heaps (Gulati, Merchant & Varman, OSDI 2010, §3, Algorithm 1: the least
//! reservation, limit and weight tag among the backlogged tenants) and YFQ's heads and
//! start tags (Bruno et al., "Disk scheduling with quality of service guarantees", IEEE
//! ICMCS 1999: the least finish tag among the queues' heads, and the least start tag for
//! the virtual time).

/// [`IndexedHeap`]'s position of a member that is not in the heap.
const ABSENT: u32 = u32::MAX;

/// A min-heap of `(key, member)` ordered by key, then member index (so its top is
/// unique whatever the heap's shape), with each member's position.
#[derive(Clone, Debug)]
pub(crate) struct IndexedHeap<K> {
    items: Vec<(K, u32)>,
    /// Per member: its index in `items`, or [`ABSENT`].
    pos: Vec<u32>,
}

impl<K> Default for IndexedHeap<K> {
    fn default() -> Self {
        IndexedHeap { items: Vec::new(), pos: Vec::new() }
    }
}

impl<K: PartialOrd + Copy> IndexedHeap<K> {
    /// `a` before `b`: by key, then by member. Keys must compare (no NaN in them).
    #[inline]
    fn less(a: &(K, u32), b: &(K, u32)) -> bool {
        a.0 < b.0 || (a.0 == b.0 && a.1 < b.1)
    }

    /// The entry with the least key.
    #[inline]
    pub(crate) fn top(&self) -> Option<(K, u32)> {
        self.items.first().copied()
    }

    /// Members in the heap.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Put member `m` in the heap with `key`, or give it that key if it is there.
    #[inline]
    pub(crate) fn set(&mut self, m: u32, key: K) {
        let mi = m as usize;
        if mi >= self.pos.len() {
            self.pos.resize(mi + 1, ABSENT);
        }
        let p = self.pos[mi];
        if p == ABSENT {
            self.items.push((key, m));
            self.sift_up(self.items.len() - 1);
        } else {
            let i = p as usize;
            self.items[i].0 = key;
            // (A heap of one, as a scheduler with one busy member keeps, is in order.)
            if self.items.len() > 1 {
                self.fix(i);
            }
        }
    }

    /// Take member `m` out of the heap (nothing if it is not there).
    #[inline]
    pub(crate) fn remove(&mut self, m: u32) {
        let Some(&p) = self.pos.get(m as usize) else { return };
        if p == ABSENT {
            return;
        }
        let i = p as usize;
        self.pos[m as usize] = ABSENT;
        let last = self.items.pop().expect("the member is in the heap");
        if i < self.items.len() {
            self.items[i] = last;
            self.fix(i);
        }
    }

    /// Restore the order around entry `i`, which changed.
    #[inline]
    fn fix(&mut self, i: usize) {
        if i > 0 && Self::less(&self.items[i], &self.items[(i - 1) / 2]) {
            self.sift_up(i);
        } else {
            self.sift_down(i);
        }
    }

    #[inline]
    fn sift_up(&mut self, mut i: usize) {
        let item = self.items[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            if !Self::less(&item, &self.items[parent]) {
                break;
            }
            self.items[i] = self.items[parent];
            self.pos[self.items[i].1 as usize] = i as u32;
            i = parent;
        }
        self.items[i] = item;
        self.pos[item.1 as usize] = i as u32;
    }

    #[inline]
    fn sift_down(&mut self, mut i: usize) {
        let item = self.items[i];
        let n = self.items.len();
        loop {
            let mut child = 2 * i + 1;
            if child >= n {
                break;
            }
            if child + 1 < n && Self::less(&self.items[child + 1], &self.items[child]) {
                child += 1;
            }
            if !Self::less(&self.items[child], &item) {
                break;
            }
            self.items[i] = self.items[child];
            self.pos[self.items[i].1 as usize] = i as u32;
            i = child;
        }
        self.items[i] = item;
        self.pos[item.1 as usize] = i as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;

    #[test]
    fn keeps_positions_and_orders_by_key_then_member() {
        let mut h = IndexedHeap::<(u8, f64)>::default();
        for (t, tag) in [(0u32, 5.0), (1, 3.0), (2, 8.0), (3, 1.0), (4, 4.0)] {
            h.set(t, (0, tag));
        }
        h.set(3, (0, 9.0));
        h.remove(1);
        h.remove(1); // not there: nothing
        h.set(2, (1, 0.0)); // class 1 sorts after class 0
        h.set(5, (0, 4.0)); // ties with member 4: the lower index first
        let mut out = vec![];
        while let Some((_, t)) = h.top() {
            out.push(t);
            h.remove(t);
        }
        assert_eq!(out, vec![4, 5, 0, 3, 2]);
        assert!(h.pos.iter().all(|&p| p == ABSENT));
    }

    #[test]
    fn matches_a_sorted_reference_under_random_changes() {
        let mut h = IndexedHeap::<u64>::default();
        let mut reference: Vec<Option<u64>> = vec![None; 64];
        let mut rng = SimRng::new(7);
        for _ in 0..20_000 {
            let m = rng.below(64) as u32;
            if rng.bernoulli(1.0 / 3.0) {
                h.remove(m);
                reference[m as usize] = None;
            } else {
                let key = rng.below(100); // many ties: the member breaks them
                h.set(m, key);
                reference[m as usize] = Some(key);
            }
            let want = reference.iter().enumerate().filter_map(|(i, k)| k.map(|k| (k, i as u32))).min();
            assert_eq!(h.top(), want);
            assert_eq!(h.len(), reference.iter().flatten().count());
        }
    }
}
