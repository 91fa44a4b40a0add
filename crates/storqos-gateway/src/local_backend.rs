//! The gateway's backend ([`Backend`]): the exports' files on this host. A read of at
//! most [`INLINE_READ_MAX`] that the page cache holds is done at once, in the engine's
//! own thread ([`crate::export::Export::read_nowait`], which never blocks); with `ring_reads`, a read
//! of a direct export is submitted to io_uring ([`crate::uring`]), its completion
//! reaped when the ring's eventfd wakes the engine; every other I/O goes to one of the
//! `depth` dedicated I/O threads ([`crate::pool`]), which runs the blocking positional
//! read / write (and the `fdatasync` of a FUA write) and sends
//! [`crate::message::Msg::Done`] back. A slot is an I/O thread: a ring read
//! takes one too and leaves its thread idle.

use tokio::sync::mpsc::UnboundedSender;

use crate::backend::{Backend, IoResult, Task};
use crate::io::Io;
use crate::message::Msg;
use crate::pool::Pool;
use crate::protocol::EIO;

/// Reads up to this size (64 KiB) that the page cache holds are done in the loop itself
/// (`preadv2(RWF_NOWAIT)`); larger ones, and ones the cache cannot serve, go to an I/O
/// thread.
pub const INLINE_READ_MAX: u32 = 64 << 10;

/// The ring's eventfd registered with the runtime (`watch_ring`).
#[cfg(target_os = "linux")]
pub type RingReady = Option<tokio::io::unix::AsyncFd<std::os::fd::RawFd>>;
/// No ring off Linux.
#[cfg(not(target_os = "linux"))]
pub type RingReady = Option<()>;

/// The I/O threads, their idle list and, where asked and allowed, an io_uring ring.
pub struct LocalBackend {
    pool: Pool,
    /// Indices of the idle I/O threads.
    idle: Vec<usize>,
    /// The ring's eventfd in the runtime's reactor, until the engine's loop takes it
    /// (declared before `ring`: dropped before the ring closes the eventfd).
    ring_ready: RingReady,
    /// Reads of direct exports, submitted from the engine's thread ([`crate::uring`])
    /// when `ring_reads` asks for it and the kernel allows; `None`: the I/O threads do
    /// them.
    #[cfg(target_os = "linux")]
    ring: Option<crate::uring::Ring>,
    /// Why there is no ring though `ring_reads` asked for one.
    ring_refused: Option<String>,
}

impl LocalBackend {
    /// `depth` (at least 1) I/O threads reporting on `done` (the engine's channel) and,
    /// with `ring_reads`, a ring of `depth` entries. Called inside the runtime that runs
    /// the engine (its reactor watches the ring's eventfd).
    pub fn new(depth: usize, ring_reads: bool, done: UnboundedSender<Msg>) -> std::io::Result<Self> {
        let depth = depth.max(1);
        let pool = Pool::new(depth, done)?;
        #[cfg(target_os = "linux")]
        let (ring, ring_ready, ring_refused) = match ring_reads.then(|| crate::uring::Ring::new(depth)) {
            None => (None, None, None),
            Some(Err(e)) => (None, None, Some(e.to_string())),
            Some(Ok(r)) => match watch_ring(&r) {
                Ok(ready) => (Some(r), Some(ready), None),
                Err(e) => (None, None, Some(format!("cannot watch its eventfd: {e}"))),
            },
        };
        #[cfg(not(target_os = "linux"))]
        let (ring_ready, ring_refused) = (None, ring_reads.then(|| "io_uring is Linux's".to_string()));
        Ok(LocalBackend {
            idle: (0..pool.len()).rev().collect(),
            pool,
            ring_ready,
            #[cfg(target_os = "linux")]
            ring,
            ring_refused,
        })
    }

    /// Why there is no io_uring instance though `ring_reads` asked for one (the kernel
    /// refused it; the I/O threads then read); `None` if it was not asked for or is there.
    pub fn ring_refused(&self) -> Option<&str> {
        self.ring_refused.as_deref()
    }

    /// The ring's readiness, for the engine's loop to wait on ([`ring_completed`]).
    pub fn take_ring_ready(&mut self) -> RingReady {
        self.ring_ready.take()
    }
}

impl Backend for LocalBackend {
    fn has_free_slot(&self) -> bool {
        !self.idle.is_empty()
    }

    fn start(&mut self, task: Task) -> Option<IoResult> {
        let Task { id, export, offset, io, plan, arrival, dispatch } = task;
        // A small read the page cache holds completes right here: no thread hand-off.
        // (A tiered export's too: a hit from the fast file, a miss that copies nothing in.)
        if let Io::Read(n) = io {
            if n <= INLINE_READ_MAX {
                let data = match (&plan, &export.tier) {
                    (Some(p), Some(t)) => t.read_nowait(p, offset, n, &|o, k| export.read_nowait(o, k)),
                    _ => export.read_nowait(offset, n),
                };
                if let Some(data) = data {
                    return Some(Ok(data));
                }
            }
        }
        // The engine starts a request only while a thread is idle.
        let worker = self.idle.pop().unwrap_or(0);
        // A read of a direct export (the ring refuses others): submitted from here, its
        // slot's thread left idle.
        #[cfg(target_os = "linux")]
        if let (Io::Read(n), None, Some(ring)) = (&io, &plan, self.ring.as_mut()) {
            if ring.read(id, worker, &export, offset, *n).is_ok() {
                return None;
            }
        }
        match self.pool.submit(worker, Task { id, export, offset, io, plan, arrival, dispatch }) {
            Ok(()) => None,
            // The thread is gone (cannot happen: I/O does not panic): fail the request.
            Err(_) => Some(Err(EIO)),
        }
    }

    fn release(&mut self, slot: usize) {
        if slot < self.pool.len() {
            self.idle.push(slot);
        }
    }

    fn reap(&mut self) -> Vec<(u64, usize, IoResult)> {
        #[cfg(target_os = "linux")]
        if let Some(ring) = self.ring.as_mut() {
            return ring.reap();
        }
        Vec::new()
    }
}

/// The ring's eventfd registered with the current runtime's reactor, for
/// [`ring_completed`].
#[cfg(target_os = "linux")]
fn watch_ring(ring: &crate::uring::Ring) -> std::io::Result<tokio::io::unix::AsyncFd<std::os::fd::RawFd>> {
    use tokio::io::{unix::AsyncFd, Interest};
    // SAFETY: the eventfd is the ring's, open until the ring is dropped, and the
    // `AsyncFd` is dropped first: a field of the backend declared before the ring, or a
    // local of the engine's loop, whose engine owns the backend and so the ring.
    unsafe { AsyncFd::register_with_interest(ring.event_fd(), Interest::READABLE) }.map_err(|e| e.into_parts().1)
}

/// Resolves when the ring has completions to reap (its readiness cleared); never
/// without a ring.
pub async fn ring_completed(ready: &RingReady) {
    #[cfg(target_os = "linux")]
    if let Some(fd) = ready {
        if let Ok(mut guard) = fd.readable().await {
            guard.clear_ready();
            return;
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = ready;
    std::future::pending::<()>().await
}
