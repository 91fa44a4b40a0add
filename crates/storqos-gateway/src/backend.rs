//! The [`Backend`]: where the engine ([`crate::engine`]) starts the I/O of a request it
//! dispatched, as the core's `Device` is where the simulator submits one. A backend has
//! slots (a request starts only while one is free); an I/O may complete at once (a read
//! the page cache holds), or later, reported by a [`crate::message::Msg::Done`] on the
//! engine's channel (an I/O thread) or by [`Backend::reap`] (an io_uring completion).
//! The gateway's own is [`crate::local_backend::LocalBackend`]; the engine's tests give
//! it one that completes when the test says. Emulated capacities are not a backend:
//! they decide when a request's slot is released ([`crate::emulate`]), whatever the
//! backend did.

use std::sync::Arc;

use crate::export::Export;
use crate::io::Io;
use crate::tier::Plan;

/// One backend I/O.
pub struct Task {
    /// The engine's request id.
    pub id: u64,
    /// The export it targets.
    pub export: Arc<Export>,
    /// Byte offset.
    pub offset: u64,
    /// What to do.
    pub io: Io,
    /// A tiered export's route for it ([`crate::tier::TierStore::route`]).
    pub plan: Option<Arc<Plan>>,
}

/// Read data (empty for a write) or an NBD error value.
pub type IoResult = Result<Vec<u8>, u32>;

/// Where the engine starts I/O.
pub trait Backend {
    /// Whether a slot is free: the engine starts a request only then.
    fn has_free_slot(&self) -> bool;

    /// Start `task` (called only while a slot is free). `Some(result)` if it completed
    /// already; otherwise its completion comes later, on the engine's channel or from
    /// [`Backend::reap`], naming the slot it took.
    fn start(&mut self, task: Task) -> Option<IoResult>;

    /// The I/O on slot `slot` ended: the slot is free again.
    fn release(&mut self, slot: usize);

    /// The completions ready now that no message reports: `(id, slot, result)`.
    fn reap(&mut self) -> Vec<(u64, usize, IoResult)>;
}
