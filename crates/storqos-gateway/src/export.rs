//! Exports and their backend: an existing regular file per NBD export, read and
//! written with positional I/O (`FileExt::read_exact_at` / `write_all_at`). These calls
//! block; the engine runs them on its dedicated I/O threads ([`crate::pool`]).
//! [`Export::read_nowait`] is the exception: it never blocks (it serves a read only
//! from the page cache), so the engine calls it itself.
//!
//! The export size is the file's length when the gateway starts; requests beyond it
//! are refused before they reach the scheduler. `NBD_CMD_FLUSH` and the FUA flag map
//! to `fdatasync` (`File::sync_data`). `NBD_CMD_TRIM` punches a hole in the file
//! (`fallocate(PUNCH_HOLE | KEEP_SIZE)`; trimming is advisory, so a file system that
//! cannot punch holes simply keeps the data); `NBD_CMD_WRITE_ZEROES` punches a hole too
//! unless the client sent `NO_HOLE`, else asks for `ZERO_RANGE`, and writes zeroes where
//! the file system supports neither. The file never changes size.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, RwLock};

use crate::config::ExportConfig;
use crate::error::{Error, Result};
use crate::fault::{Faults, Kind};
use crate::io::Io;
use crate::positional::errno;
#[cfg(target_os = "linux")]
use crate::positional::pread;
use crate::protocol::EIO;

/// An open export: its name, owner and backing file.
#[derive(Debug)]
pub struct Export {
    /// NBD export name.
    pub name: String,
    /// Backing file path (as configured).
    pub path: PathBuf,
    /// Tenant its requests are accounted to.
    pub tenant: u32,
    /// Scheduling class of its requests.
    pub class: u32,
    /// Size in bytes (the file's length at start).
    pub size: u64,
    /// Served read-only.
    pub read_only: bool,
    /// Client networks allowed (empty: all).
    pub allow: Vec<ipnet::IpNet>,
    /// Connections to it now (counted from the handshake that chose it).
    pub connections: AtomicUsize,
    /// Requests to fail on purpose.
    faults: Faults,
    /// The fast tier and block map of a tiered export (the file is the slow tier).
    /// (Shared with the exports that name this one in `shares`.)
    pub tier: Option<Arc<crate::tier::TierStore>>,
    file: File,
    /// The same file opened with `O_DIRECT`, for an export with `direct = true`: every
    /// read and each aligned write go through it ([`crate::direct`]).
    direct: Option<crate::direct::Direct>,
}

impl Export {
    /// Open the backing file of `cfg` (read-write). `field` names the config entry in
    /// errors (`"exports[0]"`): a missing path, a directory, an unreadable or empty file
    /// are configuration errors.
    pub fn open(cfg: &ExportConfig, field: &str) -> Result<Export> {
        Export::open_sharing(cfg, field, None)
    }

    /// [`Export::open`], serving `shared`'s file and block map when `cfg.shares` names
    /// it (`shared`: that export, opened first). Its file must be the same file.
    pub fn open_sharing(cfg: &ExportConfig, field: &str, shared: Option<&Export>) -> Result<Export> {
        let p = cfg.path.display();
        let meta =
            std::fs::metadata(&cfg.path).map_err(|e| Error::Config(format!("{field}.path: {p}: {}", describe(&e))))?;
        if !meta.is_file() {
            return Err(Error::Config(format!("{field}.path: {p}: not a regular file")));
        }
        if meta.len() == 0 {
            return Err(Error::Config(format!(
                "{field}.path: {p}: the file is empty (0 bytes); give it a size first, e.g. truncate -s 1G {p}"
            )));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(!cfg.read_only)
            .open(&cfg.path)
            .map_err(|e| Error::Config(format!("{field}.path: {p}: {}", describe(&e))))?;
        let tier = match (&cfg.tier, &cfg.shares) {
            (Some(t), _) => Some(Arc::new(crate::tier::TierStore::open(
                t,
                &file,
                meta.len(),
                cfg.read_only,
                &format!("{field}.tier"),
            )?)),
            (None, Some(name)) => {
                let Some(o) = shared.filter(|o| &o.name == name && o.tier.is_some()) else {
                    return Err(Error::Config(format!(
                        "{field}.shares: no tiered export named {name:?} opened before it"
                    )));
                };
                let same = |a: &std::path::Path| std::fs::metadata(a).map(|m| (m.dev(), m.ino())).ok();
                if same(&cfg.path).is_none() || same(&cfg.path) != same(&o.path) {
                    return Err(Error::Config(format!(
                        "{field}.shares: {p} is not the file of export {name:?} ({})",
                        o.path.display()
                    )));
                }
                o.tier.clone()
            }
            (None, None) => None,
        };
        let direct = if cfg.direct {
            Some(crate::direct::Direct::open(&cfg.path, cfg.read_only).map_err(|e| {
                let why = if e.raw_os_error() == Some(libc::EINVAL) || e.kind() == io::ErrorKind::Unsupported {
                    "its file system cannot do direct I/O (O_DIRECT; tmpfs cannot, for one): put the file on \
                     another, or serve it without direct"
                        .to_string()
                } else {
                    describe(&e)
                };
                Error::Config(format!("{field}.direct: {p}: {why}"))
            })?)
        } else {
            None
        };
        Ok(Export {
            direct,
            tier,
            name: cfg.name.clone(),
            path: cfg.path.clone(),
            tenant: cfg.tenant,
            class: cfg.class.unwrap_or(cfg.tenant),
            size: meta.len(),
            read_only: cfg.read_only,
            allow: cfg.allowed().map_err(|m| Error::Config(format!("{field}.{m}")))?,
            connections: AtomicUsize::new(0),
            faults: Faults::new(cfg.faults.clone()),
            file,
        })
    }

    /// Whether a client at `ip` may use the export (`None`: a client of the Unix
    /// socket, whose file permissions decide who connects: always allowed).
    pub fn allows(&self, ip: Option<std::net::IpAddr>) -> bool {
        let Some(ip) = ip else { return true };
        // An IPv4 client on a dual-stack socket arrives as ::ffff:a.b.c.d.
        let ip = match ip {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
            v4 => v4,
        };
        self.allow.is_empty() || self.allow.iter().any(|n| n.contains(&ip))
    }

    /// The transmission flags of the handshake: the gateway's, and read-only if it is.
    pub fn transmission_flags(&self) -> u16 {
        if self.read_only {
            crate::protocol::TRANSMISSION_FLAGS | crate::protocol::TFLAG_READ_ONLY
        } else {
            crate::protocol::TRANSMISSION_FLAGS
        }
    }

    /// Whether the file is read and written with `O_DIRECT` (`direct = true`).
    pub fn is_direct(&self) -> bool {
        self.direct.is_some()
    }

    /// The `O_DIRECT` descriptor a read may be submitted to without an I/O thread
    /// ([`crate::uring`]): a direct export's, unless faults are injected into it (their
    /// delays sleep on an I/O thread).
    #[cfg(target_os = "linux")]
    pub fn direct_fd(&self) -> Option<std::os::fd::RawFd> {
        self.direct.as_ref().filter(|_| self.faults.is_empty()).map(|d| d.raw_fd())
    }

    /// Whether `offset .. offset + len` lies inside the export.
    pub fn contains(&self, offset: u64, len: u32) -> bool {
        offset.checked_add(u64::from(len)).is_some_and(|end| end <= self.size)
    }

    /// Do `io` at `offset` (blocking; on an I/O thread): on the file, or for a tiered
    /// export as the tier's `plan` says ([`crate::tier::TierStore::route`]). Returns the
    /// data of a read (empty otherwise) or an NBD error value.
    pub fn run(&self, offset: u64, io: Io, plan: Option<&crate::tier::Plan>) -> std::result::Result<Vec<u8>, u32> {
        if let (Some(t), Some(plan)) = (&self.tier, plan) {
            let read_slow = |o: u64, n: u32| self.read(o, n);
            return match io {
                Io::Read(n) => t.read(plan, offset, n, &read_slow),
                Io::Write { data, fua } => {
                    let len = data.len() as u32;
                    t.write(plan, offset, len, Some(&data), &mut || self.write(offset, &data, fua), &read_slow)
                        .map(|()| Vec::new())
                }
                Io::Trim { len, fua } => t
                    .write(plan, offset, len, None, &mut || self.trim(offset, len, fua), &read_slow)
                    .map(|()| Vec::new()),
                Io::Zeroes { len, no_hole, fua } => t
                    .write(plan, offset, len, None, &mut || self.write_zeroes(offset, len, no_hole, fua), &read_slow)
                    .map(|()| Vec::new()),
            };
        }
        match io {
            Io::Read(n) => self.read(offset, n),
            Io::Write { data, fua } => self.write(offset, &data, fua).map(|()| Vec::new()),
            Io::Trim { len, fua } => self.trim(offset, len, fua).map(|()| Vec::new()),
            Io::Zeroes { len, no_hole, fua } => self.write_zeroes(offset, len, no_hole, fua).map(|()| Vec::new()),
        }
    }

    /// Read `len` bytes at `offset` (blocking). Errors map to NBD error values.
    pub fn read(&self, offset: u64, len: u32) -> std::result::Result<Vec<u8>, u32> {
        self.inject(Kind::Read, offset, u64::from(len))?;
        if let Some(d) = &self.direct {
            return match d.read(offset, len) {
                Ok(Some(buf)) => Ok(buf),
                Ok(None) => Err(EIO),
                Err(e) => Err(errno(&e)),
            };
        }
        #[cfg(target_os = "linux")]
        {
            match self.pread(offset, len, 0) {
                Ok(Some(buf)) => Ok(buf),
                // Past the end of the file (truncated under the gateway): an I/O error.
                Ok(None) => Err(EIO),
                Err(e) => Err(errno(&e)),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let mut buf = vec![0u8; len as usize];
            self.file.read_exact_at(&mut buf, offset).map_err(|e| errno(&e))?;
            Ok(buf)
        }
    }

    #[cfg(target_os = "linux")]
    fn pread(&self, offset: u64, len: u32, flags: libc::c_int) -> io::Result<Option<Vec<u8>>> {
        pread(&self.file, offset, len, flags)
    }

    /// Read `len` bytes at `offset` only if that cannot block, i.e. the page cache
    /// holds them all (Linux `preadv2(…, RWF_NOWAIT)`). `None` if it would block, came
    /// up short or failed (the caller then does a blocking [`Export::read`]); always
    /// `None` off Linux, and always for a direct export (its reads are the device's).
    pub fn read_nowait(&self, offset: u64, len: u32) -> Option<Vec<u8>> {
        if self.direct.is_some() {
            return None;
        }
        if !self.faults.is_empty() && self.faults.may_hit(Kind::Read, offset, u64::from(len)) {
            return None;
        }
        #[cfg(target_os = "linux")]
        {
            self.pread(offset, len, libc::RWF_NOWAIT).ok().flatten()
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (offset, len);
            None
        }
    }

    /// Write `data` at `offset` (blocking); with `fua`, also `fdatasync` before
    /// returning.
    /// A write that would end past the file's end now is refused (`EIO`): the file was
    /// truncated under the gateway, and the write would grow it again, although an
    /// export keeps the size it had when the gateway opened it.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> std::result::Result<(), u32> {
        if let Some((error, short)) = self.fault(Kind::Write, offset, data.len() as u64) {
            if short {
                // The first half lands, as when a device fails in the middle of a write.
                let _ = self.file.write_all_at(&data[..data.len() / 2], offset);
            }
            return Err(error);
        }
        self.within_file(offset, data.len() as u64)?;
        let done = match &self.direct {
            Some(d) => d.write(offset, data).map_err(|e| errno(&e))?,
            None => false,
        };
        if !done {
            // Not direct, or not aligned for it: through the page cache.
            self.file.write_all_at(data, offset).map_err(|e| errno(&e))?;
        }
        self.sync_if(fua)
    }

    /// Discard `len` bytes at `offset` (blocking): punch a hole where the file system
    /// can, otherwise keep the data (a trim is only a hint). With `fua`, `fdatasync`.
    pub fn trim(&self, offset: u64, len: u32, fua: bool) -> std::result::Result<(), u32> {
        self.inject(Kind::Write, offset, u64::from(len))?;
        let _ = self.fallocate(FallocMode::PunchHole, offset, len);
        self.sync_if(fua)
    }

    /// Make `len` bytes at `offset` read as zeroes (blocking): a punched hole unless
    /// `no_hole`, else a zeroed range, else zeroes written. With `fua`, `fdatasync`.
    pub fn write_zeroes(&self, offset: u64, len: u32, no_hole: bool, fua: bool) -> std::result::Result<(), u32> {
        self.inject(Kind::Write, offset, u64::from(len))?;
        let done = (!no_hole && self.fallocate(FallocMode::PunchHole, offset, len).is_ok())
            || self.fallocate(FallocMode::ZeroRange, offset, len).is_ok();
        if !done {
            self.within_file(offset, u64::from(len))?;
            const CHUNK: usize = 1 << 20;
            let zeroes = vec![0u8; CHUNK.min(len as usize)];
            let mut at = 0usize;
            while at < len as usize {
                let n = CHUNK.min(len as usize - at);
                self.file.write_all_at(&zeroes[..n], offset + at as u64).map_err(|e| errno(&e))?;
                at += n;
            }
        }
        self.sync_if(fua)
    }

    /// `Err(EIO)` unless `offset .. offset + len` lies inside the file as it is now
    /// (one `fstat`).
    fn within_file(&self, offset: u64, len: u64) -> std::result::Result<(), u32> {
        let now = self.file.metadata().map_err(|e| errno(&e))?.len();
        if offset.saturating_add(len) > now {
            return Err(EIO);
        }
        Ok(())
    }

    /// `fallocate` with `KEEP_SIZE` (Linux); `Err` where unsupported.
    fn fallocate(&self, mode: FallocMode, offset: u64, len: u32) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let flags = libc::FALLOC_FL_KEEP_SIZE
                | match mode {
                    FallocMode::PunchHole => libc::FALLOC_FL_PUNCH_HOLE,
                    FallocMode::ZeroRange => libc::FALLOC_FL_ZERO_RANGE,
                };
            let off = libc::off_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            // SAFETY: a plain syscall on an open fd; no memory is passed.
            let r = unsafe { libc::fallocate(self.file.as_raw_fd(), flags, off, libc::off_t::from(len)) };
            if r == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (mode, offset, len);
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
    }

    /// With `fua` (force unit access), [`Export::flush`] before the reply.
    fn sync_if(&self, fua: bool) -> std::result::Result<(), u32> {
        if fua {
            self.flush()
        } else {
            Ok(())
        }
    }

    /// Make every completed write durable (blocking `fdatasync`).
    pub fn flush(&self) -> std::result::Result<(), u32> {
        self.inject(Kind::Flush, 0, 0)?;
        self.file.sync_data().map_err(|e| errno(&e))
    }

    /// The allocation of `offset .. offset + len` as extents `(length, flags)`: data
    /// (flags 0) or holes (`NBD_STATE_HOLE | NBD_STATE_ZERO`), from the file's
    /// `SEEK_DATA` / `SEEK_HOLE`; with `one`, the first extent only. Where the file
    /// system cannot tell, it is all data (which is never wrong).
    pub fn block_status(&self, offset: u64, len: u32, one: bool) -> Vec<(u32, u32)> {
        use crate::protocol::{STATE_HOLE, STATE_ZERO};
        let end = offset + u64::from(len);
        let mut out: Vec<(u32, u32)> = Vec::new();
        let mut at = offset;
        while at < end {
            let (next, flags) = match self.seek(at, Seek::Data) {
                // Data only further on (or none: ENXIO past the last data): a hole first.
                Ok(data) if data > at => (data.min(end), STATE_HOLE | STATE_ZERO),
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => (end, STATE_HOLE | STATE_ZERO),
                Ok(_) => (self.seek(at, Seek::Hole).map_or(end, |h| h.min(end)).max(at + 1), 0),
                Err(_) => (end, 0),
            };
            match out.last_mut() {
                Some(last) if last.1 == flags => last.0 += (next - at) as u32,
                _ => out.push(((next - at) as u32, flags)),
            }
            at = next;
            if one {
                break;
            }
        }
        out
    }

    /// `lseek(SEEK_DATA / SEEK_HOLE)` from `at`.
    fn seek(&self, at: u64, whence: Seek) -> io::Result<u64> {
        use std::os::fd::AsRawFd;
        let whence = match whence {
            Seek::Data => libc::SEEK_DATA,
            Seek::Hole => libc::SEEK_HOLE,
        };
        let off = libc::off_t::try_from(at).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: lseek on an open fd moves only its offset, which nothing else uses
        // (all I/O here is positional).
        let r = unsafe { libc::lseek(self.file.as_raw_fd(), off, whence) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as u64)
    }

    /// The injected fault of a request: waits the rules' delay (this is an I/O thread),
    /// then the error if a rule fails it.
    #[inline]
    fn fault(&self, kind: Kind, offset: u64, len: u64) -> Option<(u32, bool)> {
        if self.faults.is_empty() {
            return None;
        }
        let hit = self.faults.hit(kind, offset, len);
        if !hit.delay.is_zero() {
            std::thread::sleep(hit.delay);
        }
        hit.error
    }

    /// `Err` with the injected error if a rule fails the request.
    #[inline]
    fn inject(&self, kind: Kind, offset: u64, len: u64) -> std::result::Result<(), u32> {
        self.fault(kind, offset, len).map_or(Ok(()), |(e, _)| Err(e))
    }
}

/// The exports being served: looked up at each handshake, changed live by the control
/// socket (`add-export`, `remove-export`) and by a reload. A removed export takes no new
/// connection; the open ones keep it until they close.
#[derive(Default)]
pub struct Exports {
    list: RwLock<Vec<Arc<Export>>>,
}

impl Exports {
    /// The exports `list`, in order (the first is the default export).
    pub fn new(list: Vec<Arc<Export>>) -> Self {
        Exports { list: RwLock::new(list) }
    }

    /// A snapshot of the exports, in order.
    pub fn all(&self) -> Vec<Arc<Export>> {
        self.list.read().map(|l| l.clone()).unwrap_or_default()
    }

    /// The export a client names (the empty name: the first one).
    pub fn find(&self, name: &str) -> Option<Arc<Export>> {
        let list = self.list.read().ok()?;
        if name.is_empty() {
            return list.first().cloned();
        }
        list.iter().find(|e| e.name == name).cloned()
    }

    /// Check `cfg`, open its file and serve it from now on.
    pub fn add(&self, cfg: &ExportConfig) -> std::result::Result<Arc<Export>, String> {
        cfg.check("export").map_err(|e| e.to_string())?;
        if self.find(&cfg.name).is_some_and(|e| e.name == cfg.name) {
            return Err(format!("an export named {:?} is already served", cfg.name));
        }
        let shared = cfg.shares.as_ref().and_then(|s| self.find(s).filter(|e| &e.name == s));
        let e = Arc::new(Export::open_sharing(cfg, "export", shared.as_deref()).map_err(|e| e.to_string())?);
        let mut list = self.list.write().map_err(|_| "the export table is unavailable")?;
        if list.iter().any(|x| x.name == cfg.name) {
            return Err(format!("an export named {:?} is already served", cfg.name));
        }
        list.push(e.clone());
        Ok(e)
    }

    /// Stop offering export `name`; returns it (its open connections keep it).
    pub fn remove(&self, name: &str) -> std::result::Result<Arc<Export>, String> {
        let mut list = self.list.write().map_err(|_| "the export table is unavailable")?;
        let i = list.iter().position(|e| e.name == name).ok_or_else(|| {
            let known: Vec<&str> = list.iter().map(|e| e.name.as_str()).collect();
            format!("no export named {name:?} (served: {})", known.join(", "))
        })?;
        if list.len() == 1 {
            return Err(format!("{name:?} is the only export: a gateway serves at least one"));
        }
        Ok(list.remove(i))
    }
}

/// What [`Export::seek`] looks for.
#[derive(Clone, Copy)]
enum Seek {
    Data,
    Hole,
}

/// What [`Export::fallocate`] asks for.
#[derive(Clone, Copy)]
enum FallocMode {
    PunchHole,
    ZeroRange,
}

fn describe(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "no such file".into(),
        io::ErrorKind::PermissionDenied => "permission denied (the gateway needs read and write access)".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(path: PathBuf) -> ExportConfig {
        ExportConfig::plain("e", path, 2)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_direct_export_reads_past_the_page_cache_and_mixes_aligned_and_unaligned_writes() {
        let scratch = crate::scratch::direct_file("direct-export");
        let p = scratch.to_path_buf();
        File::create(&p).unwrap().set_len(4 * 4096).unwrap();
        let e = Export::open(&ExportConfig { direct: true, ..cfg(p.clone()) }, "exports[0]").unwrap();
        assert!(e.is_direct());
        e.write(4096, &[0xcd; 4096], false).unwrap(); // aligned: O_DIRECT
        e.write(4096 + 10, &[0xef; 20], false).unwrap(); // not aligned: the page cache
        let mut want = vec![0xcd; 4096];
        want[10..30].fill(0xef);
        // The direct read sees the cached write (Linux writes it back first).
        assert_eq!(e.read(4096, 4096).unwrap(), want);
        assert_eq!(e.read(4096 + 5, 10).unwrap(), want[5..15]);
        // Never served from the page cache, even what was just written through it.
        assert_eq!(e.read_nowait(4096, 4096), None);
        assert_eq!(e.read(4 * 4096 - 2, 4), Err(EIO));
        e.flush().unwrap();
    }

    #[test]
    fn a_direct_export_cannot_be_tiered() {
        let c = ExportConfig { direct: true, shares: Some("a".into()), ..cfg(PathBuf::from("x")) };
        let msg = c.check("exports[1]").unwrap_err().to_string();
        assert!(msg.contains("exports[1].direct: a tiered export goes through the page cache"), "{msg}");
    }

    #[test]
    fn read_write_flush_and_bounds() {
        let p = crate::scratch::file("rw", 8192);
        let e = Export::open(&cfg(p.to_path_buf()), "exports[0]").unwrap();
        assert_eq!((e.size, e.tenant, e.class), (8192, 2, 2));
        e.write(4096, &[0xab; 100], true).unwrap();
        assert_eq!(e.read(4096, 100).unwrap(), vec![0xab; 100]);
        assert_eq!(e.read(0, 4).unwrap(), vec![0; 4]);
        e.flush().unwrap();
        assert!(e.contains(8000, 192));
        assert!(!e.contains(8000, 193));
        assert!(!e.contains(u64::MAX, 1));
        // Reading past the end of the file is an I/O error, not a panic.
        assert_eq!(e.read(8190, 10), Err(EIO));
        // Just written, so in the page cache: the non-blocking read serves it (on Linux);
        // a short read is never served.
        if cfg!(target_os = "linux") {
            assert_eq!(e.read_nowait(4096, 100), Some(vec![0xab; 100]));
        }
        assert_eq!(e.read_nowait(8190, 10), None);
    }

    #[test]
    fn a_file_truncated_under_the_gateway_is_not_grown_again() {
        let p = crate::scratch::file("shrunk", 8192);
        let e = Export::open(&cfg(p.to_path_buf()), "exports[0]").unwrap();
        File::options().write(true).open(&p).unwrap().set_len(4096).unwrap();
        assert!(e.contains(6000, 100), "inside the export's size at open");
        assert_eq!(e.write(6000, &[1; 100], false), Err(EIO));
        assert_eq!(e.write(4000, &[1; 100], false), Err(EIO), "a write across the new end");
        let _ = e.write_zeroes(6000, 100, true, false); // fallocate keeps the size, or EIO
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 4096, "the file grew again");
        e.write(0, &[2; 100], false).unwrap();
        assert_eq!(e.read(0, 100).unwrap(), vec![2; 100]);
    }

    #[test]
    fn trim_and_write_zeroes_keep_the_size_and_read_back_zeroes() {
        let p = crate::scratch::file("zeroes", 1 << 20);
        let e = Export::open(&cfg(p.to_path_buf()), "exports[0]").unwrap();
        e.write(0, &[0x77; 1 << 20], false).unwrap();
        e.write_zeroes(4096, 8192, false, true).unwrap(); // a hole
        e.write_zeroes(65536, 100, true, false).unwrap(); // zeroed without a hole, unaligned
        assert_eq!(e.read(0, 4096).unwrap(), vec![0x77; 4096]);
        assert_eq!(e.read(4096, 8192).unwrap(), vec![0; 8192]);
        assert_eq!(e.read(12288, 4).unwrap(), vec![0x77; 4]);
        assert_eq!(e.read(65536, 100).unwrap(), vec![0; 100]);
        assert_eq!(e.read(65636, 4).unwrap(), vec![0x77; 4]);
        e.trim(131072, 65536, true).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 1 << 20);
        // On Linux file systems that punch holes (tmpfs, ext4, xfs) the trimmed range
        // reads as zeroes; a trim is a hint, so the rest of the file is untouched.
        assert_eq!(e.read(196608, 4).unwrap(), vec![0x77; 4]);
    }

    #[test]
    fn bad_paths_are_config_errors() {
        let missing = std::env::temp_dir().join("storqos-gw-definitely-missing.img");
        let e = Export::open(&cfg(missing), "exports[1]").unwrap_err().to_string();
        assert!(e.contains("exports[1].path:") && e.contains("no such file"), "{e}");
        let e = Export::open(&cfg(std::env::temp_dir()), "exports[0]").unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let p = crate::scratch::file("empty", 0);
        let e = Export::open(&cfg(p.to_path_buf()), "exports[0]").unwrap_err().to_string();
        assert!(e.contains("the file is empty"), "{e}");
    }

    #[test]
    fn an_export_sharing_a_tier_serves_the_same_map_for_its_own_tenant() {
        let (slow, fast, other) = (
            crate::scratch::file("share-slow", 1 << 20),
            crate::scratch::file("share-fast", 64 << 10),
            crate::scratch::file("share-other", 1 << 20),
        );
        let mut owner = cfg(slow.to_path_buf());
        owner.name = "data".into();
        owner.tier = Some(crate::tier::TierConfig { fast: fast.to_path_buf(), block_bytes: 4096, pin: 0.0, lru: true });
        let data = Export::open(&owner, "exports[0]").unwrap();
        let mut scrub = cfg(slow.to_path_buf());
        scrub.name = "scrub".into();
        scrub.tenant = 1;
        scrub.shares = Some("data".into());
        let s = Export::open_sharing(&scrub, "exports[1]", Some(&data)).unwrap();
        assert!(Arc::ptr_eq(s.tier.as_ref().unwrap(), data.tier.as_ref().unwrap()), "one block map");
        assert_eq!((s.tenant, data.tenant), (1, 2));
        scrub.path = other.to_path_buf();
        let e = Export::open_sharing(&scrub, "exports[1]", Some(&data)).unwrap_err().to_string();
        assert!(e.contains("exports[1].shares") && e.contains("is not the file of export"), "{e}");
        let e = Export::open(&scrub, "exports[1]").unwrap_err().to_string();
        assert!(e.contains("no tiered export named"), "{e}");
    }
}
