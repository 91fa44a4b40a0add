//! Positional reads into fresh buffers (`preadv2`, never zeroed first) and the mapping
//! of a backend I/O error to an NBD error value: what the exports, the tier store and
//! the io_uring reads share.

use std::fs::File;
use std::io;

use crate::protocol::{EIO, ENOSPC};

#[cfg(target_os = "linux")]
/// `len` bytes of `file` at `offset` into a new buffer that is never zeroed first (`preadv2`
/// with `flags`, repeated after a short read unless `RWF_NOWAIT` is among them).
/// `Ok(None)` if the file ends before, or a non-blocking read came up short.
pub fn pread(file: &File, offset: u64, len: u32, flags: libc::c_int) -> io::Result<Option<Vec<u8>>> {
    use std::os::fd::AsRawFd;
    let len = len as usize;
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    let mut got = 0usize;
    while got < len {
        let spare = &mut buf.spare_capacity_mut()[..len - got];
        let iov = libc::iovec { iov_base: spare.as_mut_ptr().cast(), iov_len: spare.len() };
        let at =
            libc::off_t::try_from(offset + got as u64).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: one iovec over the buffer's spare capacity (`len - got` bytes past
        // the `got` initialised ones), which outlives the call; the fd is open.
        let n = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, at, flags) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Ok(None);
        }
        got += n as usize;
        // SAFETY: the kernel wrote `n` more bytes after the `got - n` already there.
        unsafe { buf.set_len(got) };
        if flags & libc::RWF_NOWAIT != 0 && got < len {
            return Ok(None);
        }
    }
    Ok(Some(buf))
}

/// Map a backend I/O error to an NBD error value (spec "Error values": EDQUOT and
/// EFBIG become ENOSPC; everything else here is EIO).
pub fn errno(e: &io::Error) -> u32 {
    match e.raw_os_error() {
        Some(28) | Some(122) | Some(27) => ENOSPC,
        _ => EIO,
    }
}
