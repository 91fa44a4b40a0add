//! Reads of direct-I/O exports through io_uring, from the engine's own thread
//! (with `direct_reads = io_uring`, [`crate::config::DirectReads`]; the I/O threads by
//! default).
//!
//! An I/O thread ([`crate::pool`]) costs a read two hand-offs between threads: the loop
//! wakes the thread, and the thread wakes the loop when the disk has answered. On an
//! idle machine each wakes a sleeping CPU. A page-cached read needs neither (the loop
//! reads it itself, [`crate::export::Export::read_nowait`]); a read of a direct-I/O
//! export waits for the disk, and with io_uring the loop submits it without blocking and
//! the kernel signals its completion on an eventfd the loop waits on beside its
//! messages, as `qemu-nbd --aio=native` does with Linux AIO. Measured
//! (`benches/gateway_latency.py`, BENCHMARKS.md): a lone 4 KiB read 2 ms after the last
//! came back sooner than through the I/O threads, and 16 in flight came 18 % faster.
//! Not the default: whether `storqos validate`'s model follows a gateway that reads
//! this way as well as one that reads through the I/O threads is not settled (two
//! paired validations of MSR hm_0 said opposite things; docs/gateway.md, "Direct
//! exports").
//!
//! Only reads of direct exports without injected faults come here (the faults' delays
//! sleep on an I/O thread); writes, flushes and everything else stay on the I/O threads.
//! A read still takes one of the `depth` slots (its I/O thread stays idle meanwhile), so
//! the backend's depth is unchanged. Where the kernel refuses io_uring or its read
//! (before Linux 5.6, or `kernel.io_uring_disabled`, or a seccomp filter), [`Ring::new`]
//! fails, the gateway says so in its log, and the I/O threads serve every read as before.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use io_uring::{opcode, types, IoUring};

use crate::direct::AlignedRead;
use crate::export::Export;
use crate::positional::errno;
use crate::protocol::EIO;

/// A read in the kernel's hands.
struct Pending {
    /// The backend slot it holds.
    worker: usize,
    /// Keeps the export, and so its file descriptor, open until the read ends.
    export: Arc<Export>,
    read: AlignedRead,
}

/// An io_uring instance for direct reads, with the eventfd its completions signal.
pub struct Ring {
    ring: IoUring,
    event: OwnedFd,
    pending: HashMap<u64, Pending>,
}

/// A finished read: request id, backend slot, data or NBD error value.
pub type Finished = (u64, usize, Result<Vec<u8>, u32>);

impl Ring {
    /// A ring for `depth` reads in flight, its completions signalled on a new
    /// non-blocking eventfd ([`Ring::event_fd`]). Fails where the kernel refuses io_uring.
    pub fn new(depth: usize) -> io::Result<Ring> {
        let entries = depth.clamp(1, 4096).next_power_of_two() as u32;
        let ring = IoUring::new(entries)?;
        // The read opcode came in Linux 5.6, with the probe: older kernels, no ring.
        let mut probe = io_uring::Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        if !probe.is_supported(opcode::Read::CODE) {
            return Err(io::Error::from(io::ErrorKind::Unsupported));
        }
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor
        // owned from here on.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let event = unsafe { OwnedFd::from_raw_fd(fd) };
        ring.submitter().register_eventfd(event.as_raw_fd())?;
        Ok(Ring { ring, event, pending: HashMap::new() })
    }

    /// The eventfd that becomes readable when a read completes.
    pub fn event_fd(&self) -> RawFd {
        self.event.as_raw_fd()
    }

    /// Reads in flight.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Start reading `len` bytes at `offset` of `export` (which must be a direct export:
    /// [`Export::direct_fd`]) for request `id` on backend slot `worker`. `Err` if it could
    /// not be submitted (the caller then gives it to an I/O thread).
    pub fn read(&mut self, id: u64, worker: usize, export: &Arc<Export>, offset: u64, len: u32) -> io::Result<()> {
        if export.direct_fd().is_none() {
            return Err(io::Error::from(io::ErrorKind::Unsupported));
        }
        let p = Pending { worker, export: export.clone(), read: AlignedRead::new(offset, len)? };
        self.pending.insert(id, p);
        if let Err(e) = self.push(id) {
            self.pending.remove(&id);
            return Err(e);
        }
        Ok(())
    }

    /// Submit the rest of pending read `id`.
    fn push(&mut self, id: u64) -> io::Result<()> {
        let p = self.pending.get_mut(&id).ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let fd = p.export.direct_fd().ok_or_else(|| io::Error::from(io::ErrorKind::Unsupported))?;
        let (at, rest) = p.read.rest();
        let sqe =
            opcode::Read::new(types::Fd(fd), rest.as_mut_ptr(), rest.len() as u32).offset(at).build().user_data(id);
        // SAFETY: the buffer and the descriptor stay valid until the read completes: the
        // buffer is owned by `pending` (kept until its completion is reaped, and a dropped
        // ring waits for every completion), the descriptor by the export it holds.
        unsafe { self.ring.submission().push(&sqe) }.map_err(|_| io::Error::from(io::ErrorKind::WouldBlock))?;
        // Queued from here on: its buffer is kept even if the kernel does not take it now.
        self.flush();
        Ok(())
    }

    /// Hand the queued reads to the kernel. One it does not take now (interrupted, out
    /// of memory for the moment) stays queued, its buffer kept, for the next call.
    fn flush(&mut self) {
        for _ in 0..3 {
            match self.ring.submit() {
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)) => {}
                _ => return,
            }
        }
    }

    /// Clear the eventfd, then take every completion there is: the reads that ended
    /// (a short read that ended on a block boundary short of the file's end is
    /// submitted again for the rest).
    pub fn reap(&mut self) -> Vec<Finished> {
        let mut count = [0u8; 8];
        // SAFETY: reads 8 bytes into `count`; the eventfd is non-blocking.
        while unsafe { libc::read(self.event.as_raw_fd(), count.as_mut_ptr().cast(), 8) } == 8 {}
        if !self.ring.submission().is_empty() {
            self.flush();
        }
        let done: Vec<(u64, i32)> = self.ring.completion().map(|c| (c.user_data(), c.result())).collect();
        let mut out = Vec::with_capacity(done.len());
        for (id, res) in done {
            let Some(p) = self.pending.get_mut(&id) else { continue };
            if res == -libc::EINTR || res == -libc::EAGAIN {
                if self.push(id).is_ok() {
                    continue;
                }
            } else if res >= 0 && p.read.advance(res as usize) && !p.read.is_done() && self.push(id).is_ok() {
                // Short, on a block boundary: the rest goes in another read.
                continue;
            }
            let Some(p) = self.pending.remove(&id) else { continue };
            let result = if res < 0 {
                Err(errno(&io::Error::from_raw_os_error(-res)))
            } else if !p.read.is_done() {
                // Past the end of the file (truncated under the gateway).
                Err(EIO)
            } else {
                Ok(p.read.into_data())
            };
            out.push((id, p.worker, result));
        }
        out
    }

    /// Block until every read in flight has completed (their results are dropped).
    pub fn wait_all(&mut self) {
        while !self.pending.is_empty() {
            let waited = self.ring.submit_and_wait(1);
            if waited.is_err_and(|e| e.raw_os_error() != Some(libc::EINTR)) {
                // The kernel will not wait for them: do not free buffers it may still
                // write into.
                std::mem::forget(std::mem::take(&mut self.pending));
                return;
            }
            self.reap();
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        self.wait_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ExportConfig;
    use crate::direct::ALIGN;
    use crate::scratch::direct_file;

    fn export(path: &std::path::Path) -> Arc<Export> {
        let cfg = ExportConfig { direct: true, ..ExportConfig::plain("d", path.into(), 0) };
        Arc::new(Export::open(&cfg, "exports[0]").unwrap())
    }

    /// Whether this kernel lets processes use io_uring (`kernel.io_uring_disabled`).
    fn io_uring_allowed() -> bool {
        std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").map_or(true, |s| s.trim() == "0")
    }

    fn finish(ring: &mut Ring) -> Vec<Finished> {
        let mut out = Vec::new();
        while ring.in_flight() > 0 {
            ring.ring.submit_and_wait(1).unwrap();
            out.extend(ring.reap());
        }
        out
    }

    #[test]
    fn reads_come_back_as_from_the_file_and_past_the_end_is_an_error() {
        let scratch = direct_file("uring-test");
        let bytes: Vec<u8> = (0..3 * ALIGN + 100).map(|i| (i % 251) as u8).collect();
        std::fs::write(&scratch, &bytes).unwrap();
        let ex = export(&scratch);
        let mut ring = match Ring::new(4) {
            Ok(r) => r,
            Err(e) => {
                assert!(!io_uring_allowed(), "io_uring is allowed here but a ring failed: {e}");
                return;
            }
        };
        ring.read(1, 0, &ex, 10, 5000).unwrap();
        ring.read(2, 1, &ex, 3 * ALIGN as u64, 100).unwrap();
        ring.read(3, 2, &ex, 3 * ALIGN as u64 + 50, 51).unwrap();
        ring.read(4, 3, &ex, 0, ALIGN as u32).unwrap();
        let mut done = finish(&mut ring);
        done.sort_by_key(|d| d.0);
        assert_eq!(done.len(), 4);
        assert_eq!(done[0], (1, 0, Ok(bytes[10..5010].to_vec())));
        assert_eq!(done[1], (2, 1, Ok(bytes[3 * ALIGN..].to_vec())));
        assert_eq!(done[2], (3, 2, Err(EIO)));
        assert_eq!(done[3], (4, 3, Ok(bytes[..ALIGN].to_vec())));
    }

    #[test]
    fn a_dropped_ring_waits_for_its_reads() {
        let scratch = direct_file("uring-drop-test");
        std::fs::write(&scratch, vec![7u8; 64 * ALIGN]).unwrap();
        let ex = export(&scratch);
        let Ok(mut ring) = Ring::new(8) else {
            assert!(!io_uring_allowed());
            return;
        };
        for i in 0..8u64 {
            ring.read(i, i as usize, &ex, i * 8 * ALIGN as u64, 8 * ALIGN as u32).unwrap();
        }
        assert_eq!(ring.in_flight(), 8);
        drop(ring); // waits: the kernel may not write into freed buffers
        assert_eq!(Arc::strong_count(&ex), 1, "the reads' hold on the export was released");
    }
}
