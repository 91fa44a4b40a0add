//! The backend's I/O threads: `depth` dedicated threads, one per backend slot, that run
//! the blocking positional reads and writes ([`crate::export`]) the engine
//! dispatches ([`crate::local_backend`]).
//!
//! The engine hands a dispatched request to an idle thread ([`Pool::submit`])
//! and gets the thread back with the request's [`Msg::Done`]; at most `depth` I/Os are
//! outstanding, so a dispatched request never waits for a thread. Each thread has its
//! own channel, so a hand-off wakes exactly the thread that runs it. (Against tokio's
//! blocking pool, used before, this gave 13–21 % more 4 KiB IOPS: see BENCHMARKS.md.)
//!
//! The threads end when the [`Pool`] is dropped (their channels close): the engine
//! drops it when its loop returns, after every outstanding I/O has reported back. If the
//! runtime cancels the loop instead (a [`crate::Handle`] dropped without waiting), a
//! thread still finishes the I/O it is running before it ends.

use std::sync::mpsc::{channel, Sender};

use tokio::sync::mpsc::UnboundedSender;

pub use crate::backend::Task;
use crate::message::Msg;

/// `depth` I/O threads, each with its own task channel.
pub struct Pool {
    workers: Vec<Sender<Task>>,
}

impl Pool {
    /// Start `n` (at least 1) threads; thread `i` reports each finished task as
    /// `Msg::Done { worker: i, .. }` to `done`.
    pub fn new(n: usize, done: UnboundedSender<Msg>) -> std::io::Result<Pool> {
        let mut workers = Vec::with_capacity(n.max(1));
        for worker in 0..n.max(1) {
            let (tx, rx) = channel::<Task>();
            let done = done.clone();
            std::thread::Builder::new().name(format!("storqos-io-{worker}")).spawn(move || {
                lower_priority();
                while let Ok(Task { id, export, offset, io, plan, .. }) = rx.recv() {
                    let result = export.run(offset, io, plan.as_deref());
                    drop(plan);
                    if done.send(Msg::Done { id, worker, result }).is_err() {
                        return;
                    }
                }
            })?;
            workers.push(tx);
        }
        Ok(Pool { workers })
    }

    /// Number of threads.
    pub fn len(&self) -> usize {
        self.workers.len()
    }

    /// Whether the pool has no threads (never: [`Pool::new`] starts at least one).
    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    /// Give `task` to thread `worker`, which must be idle. `Err(task)` if there is no
    /// such thread or it has ended (it cannot panic on I/O, so this does not happen).
    pub fn submit(&self, worker: usize, task: Task) -> Result<(), Box<Task>> {
        match self.workers.get(worker) {
            Some(tx) => tx.send(task).map_err(|e| Box::new(e.0)),
            None => Err(Box::new(task)),
        }
    }
}

/// Nice value of the I/O threads: they copy data in bulk, while the runtime thread
/// schedules and answers every tenant, so on a busy machine the runtime thread runs
/// first (a victim's 4 KiB reads beside 1 MiB reads of another tenant waited for the
/// I/O threads' copies otherwise).
pub const IO_THREAD_NICE: i32 = 5;

/// Give the calling thread [`IO_THREAD_NICE`] (Linux: a thread is a task of its own).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority on the calling thread; no memory is passed.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, IO_THREAD_NICE);
    }
}
