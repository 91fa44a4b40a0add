//! The [`Backend`]: where the engine ([`crate::engine`]) starts the I/O of a request it
//! dispatched, as the core's `Device` is where the simulator submits one. A backend has
//! slots (a request starts only while one is free); an I/O may complete at once (a read
//! the page cache holds), or later, reported by a [`crate::message::Msg::Done`] on the
//! engine's channel (an I/O thread) or by [`Backend::reap`] (an io_uring completion).
//!
//! Backends compose: the gateway's own I/O is [`crate::local_backend::LocalBackend`]
//! (the engine's tests give it one that completes when the test says); in front of it,
//! [`crate::emulated_backend::EmulatedBackend`] holds each completion until the emulated
//! device's finish on the engine's clock, and in front of that
//! [`crate::tiered_backend::TieredBackend`] routes a tiered export's request to the fast
//! or the slow file. The engine talks to the outermost one only. The first four methods
//! are the I/O's; the last three, with defaults for a backend that holds nothing, are
//! the layers', and take the engine's `now` explicitly, as the core's `Device` does.

use std::sync::Arc;

use storqos_core::time::Nanos;

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
    /// A tiered export's route for it ([`crate::tier::TierStore::route`]), set by the
    /// [`crate::tiered_backend::TieredBackend`].
    pub plan: Option<Arc<Plan>>,
    /// When the request arrived (engine clock, ns): an emulated device serves it from
    /// then at the earliest.
    pub arrival: Nanos,
    /// When the engine dispatched it (engine clock, ns): the `now` of its start.
    pub dispatch: Nanos,
}

/// Read data (empty for a write) or an NBD error value.
pub type IoResult = Result<Vec<u8>, u32>;

/// A request the backend is done with, to be answered now.
#[derive(Debug, PartialEq)]
pub struct Done {
    /// The engine's request id.
    pub id: u64,
    /// The tier that served it (a tiered export's `Request::target`), `None` if
    /// untiered.
    pub target: Option<u8>,
    /// Its result.
    pub result: IoResult,
}

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

    /// Request `id`'s I/O ended at `now` with `result` (however it was reported): the
    /// answer to give now, or `None` if the backend holds it ([`Backend::due`]).
    fn complete(&mut self, id: u64, result: IoResult, now: Nanos) -> Option<Done> {
        let _ = now;
        Some(Done { id, target: None, result })
    }

    /// The held answers due by `until` (the engine's `now`; stopping, every one), in
    /// the order they fall due.
    fn due(&mut self, until: Nanos) -> Vec<Done> {
        let _ = until;
        Vec::new()
    }

    /// When the next held answer falls due.
    fn next_due(&self) -> Option<Nanos> {
        None
    }
}
