//! A cache hint for FIFO queues that grow deep: with a backlog of seconds a queue lives
//! in DRAM and each new head would be a cache miss when it is served. Policies that pop
//! a queue's head call [`prefetch_ahead`] so that the line of the request a few places
//! behind is on its way before it is needed. No effect on results.

use std::collections::VecDeque;

use crate::request::Request;

/// When a queue's head is taken, the request this many places behind the new head is
/// prefetched into the cache: the queue's owner is served again only after the others,
/// so the line is there when needed. (40-byte requests: 3 places ≈ 2 cache lines ahead.)
pub(crate) const PREFETCH_AHEAD: usize = 3;

/// Hint the CPU to fetch the cache line of `queue[PREFETCH_AHEAD]`.
#[inline(always)]
pub(crate) fn prefetch_ahead(queue: &VecDeque<Request>) {
    #[cfg(target_arch = "x86_64")]
    if let Some(r) = queue.get(PREFETCH_AHEAD) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is only a hint; it never faults and `r` is a valid reference.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((r as *const Request).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = queue;
}
