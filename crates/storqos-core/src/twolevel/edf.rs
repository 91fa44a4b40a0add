//! The low level's EDF queue (seed 001 §3.4: "requests are sorted by deadline in the EDF
//! queue"), specialised to what AVATAR and Facade put into it.
//!
//! **One FIFO per class.** Both low levels give a request the deadline `now + D_i` when
//! it enters the queue, with `now` never decreasing and `D_i` fixed per class. So within
//! a class deadlines arrive already sorted, and an EDF queue is `m` FIFOs: the most
//! urgent request is the most urgent of the `m` class heads. Push is `O(1)` (amortised,
//! at the back) and "how many are due by `t`" is a binary search per class instead of a
//! scan. The class heads sit in a binary heap: a pop is `O(log m)` (`m` = classes; 8 in
//! the paper's experiments, tens of thousands for a cloud's volumes), where a scan of
//! the heads was `O(m)`.
//!
//! **Same order as [`crate::schedulers::EdfQueue`]**: smallest deadline, then earliest
//! arrival, then smallest id, then insertion order. A push whose key is below the back of
//! its class FIFO (equal deadlines with out-of-order ids, or a caller that breaks the
//! monotone-deadline premise) is inserted in place by a backward scan, so the order is the
//! heap's for any input; in the two-level schedulers that scan stops at once.
//!
//! **Heads.** The heap holds each non-empty class's front key; a push at the back of a
//! non-empty class touches it not at all, and the earliest deadline (asked after every
//! event, through `next_timer`) is a cached field. A front replaced by an out-of-order
//! insert leaves its old entry behind, dropped when it reaches the top (it no longer
//! matches its class's front).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::request::Request;
use crate::time::Nanos;

/// One queued request and its ordering key.
#[derive(Clone, Copy, Debug)]
struct Entry {
    deadline: Nanos,
    seq: u64,
    req: Request,
}

impl Entry {
    #[inline]
    fn key(&self) -> (Nanos, Nanos, u64, u64) {
        (self.deadline, self.req.arrival, self.req.id, self.seq)
    }
}

/// Full ordering key of an entry: (deadline, arrival, id, insertion order).
type Key = (Nanos, Nanos, u64, u64);

/// An EDF queue made of one deadline-sorted FIFO per class.
#[derive(Clone, Debug, Default)]
pub struct ClassEdf {
    classes: Vec<VecDeque<Entry>>,
    /// Front key of every non-empty class (and stale ones, see the module).
    heads: BinaryHeap<Reverse<(Key, usize)>>,
    len: usize,
    seq: u64,
    /// Class holding the most urgent request (valid while `len > 0`).
    head: usize,
    /// Its deadline (valid while `len > 0`).
    head_deadline: Nanos,
}

impl ClassEdf {
    /// An empty queue for `classes` classes (class indices `0..classes`).
    pub fn new(classes: usize) -> Self {
        let m = classes.max(1);
        ClassEdf {
            classes: vec![VecDeque::new(); m],
            heads: BinaryHeap::new(),
            len: 0,
            seq: 0,
            head: 0,
            head_deadline: 0,
        }
    }

    /// Insert `req` of class index `class` with absolute deadline `deadline`.
    #[inline(always)]
    pub fn push(&mut self, class: usize, req: Request, deadline: Nanos) {
        let e = Entry { deadline, seq: self.seq, req };
        self.seq += 1;
        self.len += 1;
        let q = &mut self.classes[class];
        match q.back() {
            // In deadline order behind a non-empty class: its front, and so the head,
            // stay as they are (the two-level schedulers' only case).
            Some(b) if b.key() <= e.key() => {
                q.push_back(e);
                return;
            }
            Some(_) => {
                // Out of order for this class: insert in place (never in AVATAR/Facade's
                // monotone use; kept for exactness).
                let at = q.partition_point(|x| x.key() < e.key());
                q.insert(at, e);
                if at > 0 {
                    return;
                }
            }
            None => q.push_back(e),
        }
        // `e` is the new front of its class: it may be the new head.
        self.heads.push(Reverse((e.key(), class)));
        self.settle();
    }

    /// Drop stale heap entries from the top and cache the head (`len > 0`).
    #[inline]
    fn settle(&mut self) {
        while let Some(&Reverse((k, c))) = self.heads.peek() {
            if self.classes[c].front().is_some_and(|f| f.key() == k) {
                self.head = c;
                self.head_deadline = k.0;
                return;
            }
            self.heads.pop();
        }
    }

    /// Remove and return the most urgent request with its deadline.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<(Request, Nanos)> {
        if self.len == 0 {
            return None;
        }
        let q = &mut self.classes[self.head];
        let e = q.pop_front().expect("head class is non-empty");
        let next = q.front().map(|f| f.key());
        self.heads.pop(); // the head's entry: settled at the top
        if let Some(k) = next {
            self.heads.push(Reverse((k, self.head)));
        }
        self.len -= 1;
        if self.len > 0 {
            self.settle();
        }
        Some((e.req, e.deadline))
    }

    /// The earliest deadline in the queue.
    #[inline]
    pub fn earliest_deadline(&self) -> Option<Nanos> {
        (self.len > 0).then_some(self.head_deadline)
    }

    /// Requests queued.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// No request queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many queued requests have a deadline ≤ `t` (AVATAR's `L^E_exist-deadline`):
    /// a binary search per class.
    pub fn count_due_by(&self, t: Nanos) -> usize {
        self.classes.iter().map(|q| q.partition_point(|e| e.deadline <= t)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;
    use crate::schedulers::EdfQueue;

    #[test]
    fn same_order_as_the_heap() {
        // Random pushes and pops, monotone `now` with per-class D plus some out-of-order
        // ids and deadlines: the per-class queue pops exactly what the heap pops.
        let mut rng = SimRng::new(3);
        let d = [50u64, 20, 20, 90];
        let mut a = ClassEdf::new(d.len());
        let mut b = EdfQueue::new();
        let mut now = 0;
        for id in 0..20_000u64 {
            now += rng.below(5);
            let c = rng.below(d.len() as u64) as usize;
            let wild = rng.bernoulli(0.05);
            let deadline = if wild { now + rng.below(100) } else { now + d[c] };
            let rid = if wild { id ^ 7 } else { id };
            let r = Request::new(rid, c as u32, now.saturating_sub(rng.below(3)), 4096);
            a.push(c, r, deadline);
            b.push(r, deadline);
            assert_eq!(a.earliest_deadline(), b.earliest_deadline());
            assert_eq!(a.count_due_by(now + 30), b.count_due_by(now + 30));
            while rng.bernoulli(0.45) {
                let (x, y) = (a.pop(), b.pop());
                assert_eq!(x.map(|(r, d)| (r.id, d)), y.map(|(r, d)| (r.id, d)));
            }
            assert_eq!(a.len(), b.len());
        }
        while let Some((r, d)) = b.pop() {
            assert_eq!(a.pop().map(|(r, d)| (r.id, d)), Some((r.id, d)));
        }
        assert!(a.is_empty() && a.pop().is_none() && a.earliest_deadline().is_none());
    }
}
