//! Direct I/O (`O_DIRECT`) to an export's file, for exports with `direct = true`: reads
//! and writes go to the storage under the file system, past the gateway host's page
//! cache, as with `qemu-nbd --cache=none`. The gateway then measures and schedules the
//! device itself: a read that the page cache would answer in a few µs takes the disk's
//! time, and the tenants do not share (or evict each other from) the host's memory.
//!
//! `O_DIRECT` wants the buffer, the offset and the length aligned to the device's
//! logical block; [`ALIGN`] (4 KiB) suits 512-byte and 4 KiB devices alike. A read of
//! any offset and length reads the aligned range around it into an aligned buffer and
//! copies out the part asked for. A write that is not aligned is not done here
//! ([`Direct::write`] says so) and goes through the page cache instead: Linux keeps the
//! two coherent, writing back and dropping the cached pages of a range before a direct
//! read or write of it.

use std::fs::File;
use std::io;
use std::path::Path;

/// Alignment of buffers, offsets and lengths of direct I/O (bytes).
pub const ALIGN: usize = 4096;

/// A file opened with `O_DIRECT`.
#[derive(Debug)]
pub struct Direct {
    file: File,
}

impl Direct {
    /// Open `path` with `O_DIRECT` (read-write unless `read_only`). A file system that
    /// cannot do direct I/O (tmpfs, some FUSE ones) refuses it with `EINVAL`, reported
    /// as such; off Linux, always `Unsupported`.
    pub fn open(path: &Path, read_only: bool) -> io::Result<Direct> {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::OpenOptionsExt;
            let file =
                std::fs::OpenOptions::new().read(true).write(!read_only).custom_flags(libc::O_DIRECT).open(path)?;
            Ok(Direct { file })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (path, read_only);
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
    }

    /// The file descriptor, for reads submitted through io_uring ([`crate::uring`]).
    #[cfg(target_os = "linux")]
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.file.as_raw_fd()
    }

    /// `len` bytes at `offset`, read directly: the aligned blocks around them, then the
    /// part asked for. `Ok(None)` if the file ends before `offset + len`.
    pub fn read(&self, offset: u64, len: u32) -> io::Result<Option<Vec<u8>>> {
        let mut read = AlignedRead::new(offset, len)?;
        while !read.is_done() {
            let (at, rest) = read.rest();
            match read_at(&self.file, rest, at) {
                Ok(n) => {
                    if !read.advance(n) {
                        return Ok(None);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Some(read.into_data()))
    }

    /// Write `data` at `offset` directly if both are aligned ([`ALIGN`]): `Ok(true)`
    /// once written, `Ok(false)` (nothing done) if not aligned.
    pub fn write(&self, offset: u64, data: &[u8]) -> io::Result<bool> {
        if !offset.is_multiple_of(ALIGN as u64) || !data.len().is_multiple_of(ALIGN) {
            return Ok(false);
        }
        if data.is_empty() {
            return Ok(true);
        }
        let mut buf = AlignedBuf::new(data.len())?;
        buf.as_mut().copy_from_slice(data);
        use std::os::unix::fs::FileExt;
        self.file.write_all_at(buf.as_mut(), offset)?;
        Ok(true)
    }
}

/// A read of any range done as direct reads of the aligned blocks around it, one or
/// more (a read may come back short): where the next one goes, what each brought, and
/// the part asked for at the end. [`Direct::read`] and the io_uring reads
/// ([`crate::uring`]) both go through it.
pub(crate) struct AlignedRead {
    buf: AlignedBuf,
    /// The aligned start of `buf` in the file.
    lo: u64,
    /// Bytes of `buf` read so far.
    got: usize,
    /// Where the bytes asked for start in `buf`, and how many.
    start: usize,
    len: usize,
}

impl AlignedRead {
    /// A read of `len` bytes at `offset`, nothing read yet.
    pub(crate) fn new(offset: u64, len: u32) -> io::Result<AlignedRead> {
        let (lo, span) = aligned_span(offset, u64::from(len));
        Ok(AlignedRead { buf: AlignedBuf::new(span)?, lo, got: 0, start: (offset - lo) as usize, len: len as usize })
    }

    /// Whether every byte asked for has been read.
    pub(crate) fn is_done(&self) -> bool {
        self.got >= self.start + self.len
    }

    /// Where the next read goes: its file offset and the rest of the buffer.
    pub(crate) fn rest(&mut self) -> (u64, &mut [u8]) {
        let at = self.lo + self.got as u64;
        (at, &mut self.buf.as_mut()[self.got..])
    }

    /// Count `n` bytes read into [`AlignedRead::rest`]; `false` if the file ended
    /// before the bytes asked for (nothing read, or a short read that ends off a block
    /// boundary, which only the file's end gives).
    pub(crate) fn advance(&mut self, n: usize) -> bool {
        self.got += n;
        n > 0 && (self.is_done() || self.got.is_multiple_of(ALIGN))
    }

    /// The bytes asked for (once [`AlignedRead::is_done`]).
    pub(crate) fn into_data(mut self) -> Vec<u8> {
        self.buf.as_mut()[self.start..self.start + self.len].to_vec()
    }
}

/// The aligned range around `offset .. offset + len`: its start and length.
fn aligned_span(offset: u64, len: u64) -> (u64, usize) {
    let a = ALIGN as u64;
    let lo = offset / a * a;
    let hi = (offset + len).div_ceil(a) * a;
    (lo, (hi - lo) as usize)
}

fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    file.read_at(buf, offset)
}

/// A zeroed heap buffer aligned to [`ALIGN`], freed on drop.
struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    fn new(len: usize) -> io::Result<AlignedBuf> {
        let layout = std::alloc::Layout::from_size_align(len.max(ALIGN), ALIGN)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: the layout's size is at least ALIGN, never zero.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(ptr).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        Ok(AlignedBuf { ptr, layout })
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: `layout.size()` bytes allocated (and zeroed) by `new`, owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

// SAFETY: the buffer is plain memory owned by one value.
unsafe impl Send for AlignedBuf {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_cover_the_request_on_block_boundaries() {
        assert_eq!(aligned_span(0, 4096), (0, 4096));
        assert_eq!(aligned_span(100, 10), (0, 4096));
        assert_eq!(aligned_span(4000, 200), (0, 8192));
        assert_eq!(aligned_span(8192, 1), (8192, 4096));
    }

    #[test]
    fn unaligned_reads_and_aligned_writes_round_trip() {
        let scratch = crate::scratch::direct_file("direct-test");
        let p: &Path = &scratch;
        let bytes: Vec<u8> = (0..3 * ALIGN + 100).map(|i| (i % 251) as u8).collect();
        std::fs::write(p, &bytes).unwrap();
        let d = Direct::open(p, false).unwrap();
        assert_eq!(d.read(10, 5000).unwrap().unwrap(), bytes[10..5010]);
        // The tail past the last whole block, and a read past the end.
        assert_eq!(d.read(3 * ALIGN as u64, 100).unwrap().unwrap(), bytes[3 * ALIGN..]);
        assert_eq!(d.read(3 * ALIGN as u64 + 50, 51).unwrap(), None);
        assert!(!d.write(1, &[7u8; ALIGN]).unwrap());
        assert!(!d.write(0, &[7u8; 100]).unwrap());
        assert!(d.write(ALIGN as u64, &[7u8; ALIGN]).unwrap());
        let back = std::fs::read(p).unwrap();
        assert_eq!(back[ALIGN..2 * ALIGN], [7u8; ALIGN]);
        assert_eq!(back[..ALIGN], bytes[..ALIGN]);
    }
}
