//! The I/O a request asks of the backend: what a connection parsed, what an I/O thread
//! or the ring runs on an export ([`crate::export::Export::run`]).

/// The I/O of a job.
#[derive(Debug)]
pub enum Io {
    /// Read this many bytes.
    Read(u32),
    /// Write these bytes (with FUA: durable before the reply).
    Write {
        /// The data.
        data: Vec<u8>,
        /// Force unit access.
        fua: bool,
    },
    /// Discard this many bytes (`NBD_CMD_TRIM`): the policy sees a write of 0 bytes.
    Trim {
        /// Length in bytes.
        len: u32,
        /// Force unit access.
        fua: bool,
    },
    /// Zero this many bytes (`NBD_CMD_WRITE_ZEROES`): the policy sees a write of `len`
    /// bytes.
    Zeroes {
        /// Length in bytes.
        len: u32,
        /// Write the zeroes rather than punch a hole (`NBD_CMD_FLAG_NO_HOLE`).
        no_hole: bool,
        /// Force unit access.
        fua: bool,
    },
}
