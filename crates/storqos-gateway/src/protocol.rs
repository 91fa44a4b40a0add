//! The NBD wire format: the subset of the NBD protocol (`doc/proto.md` of the
//! NetworkBlockDevice project) this gateway speaks, as pure parse / encode functions
//! with typed errors. No I/O here: the server ([`crate::server`]) reads the bytes and calls these.
//!
//! Implemented sections of the spec:
//! - **"Newstyle negotiation"** in its *fixed newstyle* form: the server greeting
//!   (`NBDMAGIC`, `IHAVEOPT`, handshake flags `NBD_FLAG_FIXED_NEWSTYLE |
//!   NBD_FLAG_NO_ZEROES`), the client flags, option requests (`IHAVEOPT`, option,
//!   length, data) and option replies (magic `0x3e889045565a9`, option, reply type,
//!   length, data).
//! - **"Option types"**: `NBD_OPT_EXPORT_NAME`, `NBD_OPT_ABORT`, `NBD_OPT_LIST`,
//!   `NBD_OPT_INFO`, `NBD_OPT_GO`, `NBD_OPT_STARTTLS` (the TLS handshake itself is
//!   `crate::tls`'s), `NBD_OPT_STRUCTURED_REPLY`, `NBD_OPT_LIST_META_CONTEXT` and
//!   `NBD_OPT_SET_META_CONTEXT` (`base:allocation`); every other option (extended
//!   headers...) is answered with `NBD_REP_ERR_UNSUP`.
//! - **"Option reply types"**: `NBD_REP_ACK`, `NBD_REP_SERVER`, `NBD_REP_INFO` with
//!   `NBD_INFO_EXPORT` and `NBD_INFO_BLOCK_SIZE`, `NBD_REP_META_CONTEXT`, and the error
//!   replies.
//! - **"Transmission"**: the 28-byte request header (magic `0x25609513`), the 16-byte
//!   simple reply (magic `0x67446698`) and, once negotiated, **structured reply**
//!   chunks (magic `0x668e33ef`: `OFFSET_DATA`, `OFFSET_HOLE`, `BLOCK_STATUS`,
//!   `ERROR`); commands `NBD_CMD_READ`, `NBD_CMD_WRITE`, `NBD_CMD_DISC`,
//!   `NBD_CMD_FLUSH`, `NBD_CMD_TRIM`, `NBD_CMD_WRITE_ZEROES`, `NBD_CMD_BLOCK_STATUS`
//!   and the flags `NBD_CMD_FLAG_FUA`, `NBD_CMD_FLAG_NO_HOLE`, `NBD_CMD_FLAG_REQ_ONE`.
//!   No extended headers.
//! - **"Error values"**: `EINVAL`, `ENOSPC`, `EIO`...
//!
//! All integers are big-endian ("network byte order") on the wire.

use std::fmt;

/// `NBDMAGIC`: first 8 bytes the server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: second 8 bytes of the greeting and the magic of every option request.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of every option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of a transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

/// Handshake flag: the server speaks fixed newstyle.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag: the server omits the 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag: the client speaks fixed newstyle.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag: the client does not want the 124 zero bytes.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Option: choose an export and enter transmission (old, no error reply possible).
pub const OPT_EXPORT_NAME: u32 = 1;
/// Option: the client gives up negotiating.
pub const OPT_ABORT: u32 = 2;
/// Option: list the exports.
pub const OPT_LIST: u32 = 3;
/// Option: start TLS (served when TLS is configured, else `NBD_REP_ERR_UNSUP`).
pub const OPT_STARTTLS: u32 = 5;
/// Option: describe an export without entering transmission.
pub const OPT_INFO: u32 = 6;
/// Option: describe an export and enter transmission.
pub const OPT_GO: u32 = 7;
/// Option: structured replies (reads answered in chunks: data and holes).
pub const OPT_STRUCTURED_REPLY: u32 = 8;
/// Option: list the metadata contexts (`base:allocation`).
pub const OPT_LIST_META_CONTEXT: u32 = 9;
/// Option: select metadata contexts for `NBD_CMD_BLOCK_STATUS`.
pub const OPT_SET_META_CONTEXT: u32 = 10;

/// Reply: the option succeeded (last reply to it).
pub const REP_ACK: u32 = 1;
/// Reply: one export of an `NBD_OPT_LIST`.
pub const REP_SERVER: u32 = 2;
/// Reply: one piece of information of an `NBD_OPT_INFO` / `NBD_OPT_GO`.
pub const REP_INFO: u32 = 3;
/// Reply: one metadata context (its id, its name).
pub const REP_META_CONTEXT: u32 = 4;

/// The one metadata context served: allocation (holes) of the export.
pub const BASE_ALLOCATION: &str = "base:allocation";
/// Its id in `NBD_CMD_BLOCK_STATUS` replies.
pub const BASE_ALLOCATION_ID: u32 = 1;
/// `base:allocation` flag: the extent is not allocated.
pub const STATE_HOLE: u32 = 1 << 0;
/// `base:allocation` flag: the extent reads as zeroes.
pub const STATE_ZERO: u32 = 1 << 1;

/// Magic of a structured reply chunk.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;
/// Chunk flag: the last chunk of the reply.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
/// Chunk type: data at an offset.
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
/// Chunk type: a range that reads as zeroes (no data sent).
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
/// Chunk type: extents of a metadata context.
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
/// Chunk type: an error (NBD error value, message).
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) | 1;
/// Size of a structured reply chunk header.
pub const CHUNK_HEADER_LEN: usize = 20;
/// Bit set in every error reply type.
pub const REP_FLAG_ERROR: u32 = 1 << 31;
/// Error reply: option not supported.
pub const REP_ERR_UNSUP: u32 = REP_FLAG_ERROR | 1;
/// Error reply: syntactically or semantically invalid option data.
pub const REP_ERR_INVALID: u32 = REP_FLAG_ERROR | 3;
/// Error reply: the server refuses by its policy (an address not allowed, a limit).
pub const REP_ERR_POLICY: u32 = REP_FLAG_ERROR | 2;
/// Error reply: no such export.
pub const REP_ERR_UNKNOWN: u32 = REP_FLAG_ERROR | 6;
/// Reply error: the server requires TLS first (`NBD_REP_ERR_TLS_REQD`).
pub const REP_ERR_TLS_REQD: u32 = REP_FLAG_ERROR | 5;

/// Information type: export size and transmission flags.
pub const INFO_EXPORT: u16 = 0;
/// Information type: block size constraints.
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Transmission flag: the flags field is valid (always set).
pub const TFLAG_HAS_FLAGS: u16 = 1 << 0;
/// Transmission flag: the export is read-only.
pub const TFLAG_READ_ONLY: u16 = 1 << 1;
/// Transmission flag: the server supports `NBD_CMD_FLUSH`.
pub const TFLAG_SEND_FLUSH: u16 = 1 << 2;
/// Transmission flag: the server supports `NBD_CMD_FLAG_FUA`.
pub const TFLAG_SEND_FUA: u16 = 1 << 3;
/// Transmission flag: the server supports `NBD_CMD_TRIM`.
pub const TFLAG_SEND_TRIM: u16 = 1 << 5;
/// Transmission flag: the server supports `NBD_CMD_WRITE_ZEROES`.
pub const TFLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;

/// The transmission flags this gateway advertises: flush, FUA, trim and write-zeroes;
/// no cache, no multi-conn (a flush covers every connection's writes, but a second
/// connection gave nbdcopy no measurable gain: 1.6-2.0 GB/s either way, one runtime
/// thread), no `DF` (reads may come in several chunks). Block status is negotiated as a
/// metadata context, not a flag.
pub const TRANSMISSION_FLAGS: u16 =
    TFLAG_HAS_FLAGS | TFLAG_SEND_FLUSH | TFLAG_SEND_FUA | TFLAG_SEND_TRIM | TFLAG_SEND_WRITE_ZEROES;

/// Command flag: force unit access (the data is durable when the reply is sent).
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// Command flag of `NBD_CMD_WRITE_ZEROES`: write the zeroes, do not punch a hole.
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
/// Command flag of `NBD_CMD_BLOCK_STATUS`: one extent is enough.
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;

/// Largest READ / WRITE length accepted (and advertised as the maximum block size):
/// 32 MiB, the limit the NBD spec recommends clients respect.
pub const MAX_IO_BYTES: u32 = 32 << 20;
/// Largest option data accepted during negotiation (an export name is at most 4096
/// bytes; the GO/INFO data adds 6 bytes plus 2 per information request).
pub const MAX_OPTION_BYTES: u32 = 64 << 10;
/// Longest export name the spec allows (bytes).
pub const MAX_NAME_BYTES: usize = 4096;

/// Preferred block size advertised in `NBD_INFO_BLOCK_SIZE`.
pub const PREFERRED_BLOCK: u32 = 4096;

/// Error value: invalid argument (out-of-range read, unsupported command or flag).
pub const EINVAL: u32 = 22;
/// Error value: operation not permitted (a write to a read-only export).
pub const EPERM: u32 = 1;
/// Error value: input/output error of the backend.
pub const EIO: u32 = 5;
/// Error value: write beyond the end of the export.
pub const ENOSPC: u32 = 28;
/// NBD error `ENOMEM`: out of resources for now (the gateway's answer to a request
/// rejected at its tenant's limit; the protocol has no `EAGAIN`).
pub const ENOMEM: u32 = 12;
/// Error value: the server is shutting down.
pub const ESHUTDOWN: u32 = 108;

/// Size of the server greeting: NBDMAGIC, IHAVEOPT, handshake flags.
pub const GREETING_LEN: usize = 18;
/// Size of an option request header: IHAVEOPT, option, length.
pub const OPTION_HEADER_LEN: usize = 16;
/// Size of a transmission request header.
pub const REQUEST_LEN: usize = 28;
/// Size of a simple reply header.
pub const SIMPLE_REPLY_LEN: usize = 16;

/// Something on the wire that breaks the protocol. Each closes the connection it came
/// from (never the server); the message says what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// A magic number was not the expected one.
    BadMagic {
        /// Which magic (`"option request"`, `"request"`...).
        what: &'static str,
        /// The value the spec requires.
        expected: u64,
        /// The value received.
        got: u64,
    },
    /// A length field exceeds what the gateway accepts.
    TooLong {
        /// Which length.
        what: &'static str,
        /// The length received (bytes).
        len: u64,
        /// The largest accepted (bytes).
        max: u64,
    },
    /// The peer stopped sending in the middle of a message.
    Truncated {
        /// The message being read.
        what: &'static str,
        /// Bytes it needs.
        needed: usize,
        /// Bytes received.
        got: usize,
    },
    /// The client set client flags the server does not know.
    UnknownClientFlags(u32),
    /// The client did not set `NBD_FLAG_C_FIXED_NEWSTYLE`: old newstyle clients cannot
    /// be told an option is unsupported without being cut off, so they are refused.
    NotFixedNewstyle,
    /// `NBD_OPT_EXPORT_NAME` named an export that does not exist (the spec gives no
    /// way to answer it but closing).
    UnknownExport(String),
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::BadMagic { what, expected, got } => {
                write!(f, "bad {what} magic {got:#x} (expected {expected:#x})")
            }
            ProtocolError::TooLong { what, len, max } => {
                write!(f, "{what} length {len} bytes exceeds the maximum of {max} bytes")
            }
            ProtocolError::Truncated { what, needed, got } => {
                write!(f, "truncated {what}: connection ended after {got} of {needed} bytes")
            }
            ProtocolError::UnknownClientFlags(flags) => {
                write!(f, "unknown client flags {flags:#x} (known: FIXED_NEWSTYLE 0x1, NO_ZEROES 0x2)")
            }
            ProtocolError::NotFixedNewstyle => {
                write!(f, "client without the FIXED_NEWSTYLE flag (old newstyle negotiation is not served)")
            }
            ProtocolError::UnknownExport(name) => {
                write!(f, "NBD_OPT_EXPORT_NAME of unknown export {}", shown_name(name))
            }
        }
    }
}

impl std::error::Error for ProtocolError {}

/// Longest part of a client-sent name put in a log line or an error reply.
pub const SHOWN_NAME_CHARS: usize = 64;

/// A name a client sent, quoted for a log line: at most [`SHOWN_NAME_CHARS`]
/// characters, then how long it was (a 60 KB name never makes a 60 KB line).
pub fn shown_name(name: &str) -> String {
    if name.chars().count() <= SHOWN_NAME_CHARS {
        return format!("{name:?}");
    }
    let head: String = name.chars().take(SHOWN_NAME_CHARS).collect();
    format!("{head:?}… ({} bytes)", name.len())
}

fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

fn need(what: &'static str, b: &[u8], needed: usize) -> Result<(), ProtocolError> {
    if b.len() < needed {
        Err(ProtocolError::Truncated { what, needed, got: b.len() })
    } else {
        Ok(())
    }
}

/// The server greeting of fixed newstyle negotiation (spec: "Newstyle negotiation").
pub fn encode_greeting() -> [u8; GREETING_LEN] {
    let mut b = [0u8; GREETING_LEN];
    b[0..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    b[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    b[16..18].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    b
}

/// The client flags that follow the greeting, checked against the known ones.
pub fn decode_client_flags(b: &[u8]) -> Result<u32, ProtocolError> {
    need("client flags", b, 4)?;
    let flags = be_u32(b, 0);
    if flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return Err(ProtocolError::UnknownClientFlags(flags));
    }
    if flags & FLAG_C_FIXED_NEWSTYLE == 0 {
        return Err(ProtocolError::NotFixedNewstyle);
    }
    Ok(flags)
}

/// An option request header (its data follows on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionHeader {
    /// The option (`NBD_OPT_*`).
    pub option: u32,
    /// Length of the data that follows (bytes).
    pub len: u32,
}

impl OptionHeader {
    /// Parse the 16-byte header; the data length must not exceed [`MAX_OPTION_BYTES`].
    pub fn decode(b: &[u8]) -> Result<Self, ProtocolError> {
        need("option request", b, OPTION_HEADER_LEN)?;
        let magic = be_u64(b, 0);
        if magic != IHAVEOPT {
            return Err(ProtocolError::BadMagic { what: "option request", expected: IHAVEOPT, got: magic });
        }
        let h = OptionHeader { option: be_u32(b, 8), len: be_u32(b, 12) };
        if h.len > MAX_OPTION_BYTES {
            return Err(ProtocolError::TooLong {
                what: "option data",
                len: h.len.into(),
                max: MAX_OPTION_BYTES.into(),
            });
        }
        Ok(h)
    }

    /// The 16 bytes a client sends (used by tests and clients).
    pub fn encode(&self) -> [u8; OPTION_HEADER_LEN] {
        let mut b = [0u8; OPTION_HEADER_LEN];
        b[0..8].copy_from_slice(&IHAVEOPT.to_be_bytes());
        b[8..12].copy_from_slice(&self.option.to_be_bytes());
        b[12..16].copy_from_slice(&self.len.to_be_bytes());
        b
    }
}

/// One option reply: header (magic, option, type, length) followed by `data`.
pub fn encode_option_reply(option: u32, reply_type: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + data.len());
    b.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&reply_type.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    b
}

/// An option reply header as a client reads it: (option, reply type, data length).
pub fn decode_option_reply_header(b: &[u8]) -> Result<(u32, u32, u32), ProtocolError> {
    need("option reply", b, 20)?;
    let magic = be_u64(b, 0);
    if magic != OPTION_REPLY_MAGIC {
        return Err(ProtocolError::BadMagic { what: "option reply", expected: OPTION_REPLY_MAGIC, got: magic });
    }
    Ok((be_u32(b, 8), be_u32(b, 12), be_u32(b, 16)))
}

/// Data of an `NBD_REP_SERVER` reply to `NBD_OPT_LIST`: name length, name.
pub fn encode_server_entry(name: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(4 + name.len());
    b.extend_from_slice(&(name.len() as u32).to_be_bytes());
    b.extend_from_slice(name.as_bytes());
    b
}

/// Data of an `NBD_REP_INFO` reply carrying `NBD_INFO_EXPORT`: type, size, flags.
pub fn encode_info_export(size: u64, flags: u16) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[0..2].copy_from_slice(&INFO_EXPORT.to_be_bytes());
    b[2..10].copy_from_slice(&size.to_be_bytes());
    b[10..12].copy_from_slice(&flags.to_be_bytes());
    b
}

/// Data of an `NBD_REP_INFO` reply carrying `NBD_INFO_BLOCK_SIZE`: type, minimum,
/// preferred and maximum block size (1, [`PREFERRED_BLOCK`], [`MAX_IO_BYTES`]).
pub fn encode_info_block_size() -> [u8; 14] {
    let mut b = [0u8; 14];
    b[0..2].copy_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    b[2..6].copy_from_slice(&1u32.to_be_bytes());
    b[6..10].copy_from_slice(&PREFERRED_BLOCK.to_be_bytes());
    b[10..14].copy_from_slice(&MAX_IO_BYTES.to_be_bytes());
    b
}

/// Reply to a successful `NBD_OPT_EXPORT_NAME`: size, transmission flags, and 124
/// zero bytes unless the client negotiated `NO_ZEROES`.
pub fn encode_export_name_reply(size: u64, flags: u16, no_zeroes: bool) -> Vec<u8> {
    let mut b = Vec::with_capacity(134);
    b.extend_from_slice(&size.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    if !no_zeroes {
        b.extend_from_slice(&[0u8; 124]);
    }
    b
}

/// The data of an `NBD_OPT_INFO` / `NBD_OPT_GO` request: export name and the
/// information types the client asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoRequest {
    /// Export name (empty = the default export).
    pub name: String,
    /// Requested `NBD_INFO_*` types.
    pub info: Vec<u16>,
}

impl GoRequest {
    /// Parse the option data. `Err(message)` means the data is inconsistent: the
    /// caller answers `NBD_REP_ERR_INVALID` with the message and keeps negotiating.
    pub fn decode(data: &[u8]) -> Result<Self, String> {
        if data.len() < 6 {
            return Err(format!("option data of {} bytes is shorter than the 6-byte minimum", data.len()));
        }
        let name_len = be_u32(data, 0) as usize;
        if name_len > MAX_NAME_BYTES || 4 + name_len + 2 > data.len() {
            return Err(format!("export name length {name_len} does not fit the {} bytes of option data", data.len()));
        }
        let name = std::str::from_utf8(&data[4..4 + name_len])
            .map_err(|_| "export name is not UTF-8".to_string())?
            .to_string();
        let at = 4 + name_len;
        let n = be_u16(data, at) as usize;
        if data.len() != at + 2 + 2 * n {
            return Err(format!(
                "{n} information requests need {} bytes of option data, got {}",
                at + 2 + 2 * n,
                data.len()
            ));
        }
        let info = (0..n).map(|i| be_u16(data, at + 2 + 2 * i)).collect();
        Ok(GoRequest { name, info })
    }

    /// The option data a client sends.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(6 + self.name.len() + 2 * self.info.len());
        b.extend_from_slice(&(self.name.len() as u32).to_be_bytes());
        b.extend_from_slice(self.name.as_bytes());
        b.extend_from_slice(&(self.info.len() as u16).to_be_bytes());
        for i in &self.info {
            b.extend_from_slice(&i.to_be_bytes());
        }
        b
    }
}

/// Transmission command types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// `NBD_CMD_READ` (0).
    Read,
    /// `NBD_CMD_WRITE` (1): `length` bytes of data follow the header.
    Write,
    /// `NBD_CMD_DISC` (2): the client disconnects.
    Disc,
    /// `NBD_CMD_FLUSH` (3).
    Flush,
    /// `NBD_CMD_TRIM` (4): the client no longer needs `length` bytes at `offset`.
    Trim,
    /// `NBD_CMD_WRITE_ZEROES` (6): `length` bytes at `offset` read as zeroes after it
    /// (no data follows the header).
    WriteZeroes,
    /// `NBD_CMD_BLOCK_STATUS` (7): which extents of `length` bytes at `offset` are
    /// holes (with `base:allocation` selected).
    BlockStatus,
    /// Any other type (`NBD_CMD_CACHE`...): answered `EINVAL`.
    Other(u16),
}

impl Command {
    /// The command of a type number.
    pub fn from_u16(t: u16) -> Self {
        match t {
            0 => Command::Read,
            1 => Command::Write,
            2 => Command::Disc,
            3 => Command::Flush,
            4 => Command::Trim,
            6 => Command::WriteZeroes,
            7 => Command::BlockStatus,
            t => Command::Other(t),
        }
    }
    /// The type number on the wire.
    pub fn to_u16(self) -> u16 {
        match self {
            Command::Read => 0,
            Command::Write => 1,
            Command::Disc => 2,
            Command::Flush => 3,
            Command::Trim => 4,
            Command::WriteZeroes => 6,
            Command::BlockStatus => 7,
            Command::Other(t) => t,
        }
    }
}

/// A transmission request header (spec: "Request message").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestHeader {
    /// Command flags (`NBD_CMD_FLAG_*`).
    pub flags: u16,
    /// The command.
    pub command: Command,
    /// The client's cookie (handle), echoed in the reply.
    pub cookie: u64,
    /// Byte offset on the export.
    pub offset: u64,
    /// Length in bytes (of the data to read or write).
    pub length: u32,
}

impl RequestHeader {
    /// Parse the 28-byte header. Bad magic is an error; so is a READ or WRITE longer
    /// than [`MAX_IO_BYTES`] (a WRITE's payload could not be skipped safely).
    pub fn decode(b: &[u8]) -> Result<Self, ProtocolError> {
        need("request", b, REQUEST_LEN)?;
        let magic = be_u32(b, 0);
        if magic != REQUEST_MAGIC {
            return Err(ProtocolError::BadMagic { what: "request", expected: REQUEST_MAGIC.into(), got: magic.into() });
        }
        let h = RequestHeader {
            flags: be_u16(b, 4),
            command: Command::from_u16(be_u16(b, 6)),
            cookie: be_u64(b, 8),
            offset: be_u64(b, 16),
            length: be_u32(b, 24),
        };
        if matches!(h.command, Command::Read | Command::Write) && h.length > MAX_IO_BYTES {
            return Err(ProtocolError::TooLong { what: "request", len: h.length.into(), max: MAX_IO_BYTES.into() });
        }
        Ok(h)
    }

    /// The 28 bytes a client sends.
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&self.command.to_u16().to_be_bytes());
        b[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        b[24..28].copy_from_slice(&self.length.to_be_bytes());
        b
    }
}

/// A simple reply header (spec: "Simple reply message"); a successful READ's data
/// follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimpleReply {
    /// 0 or an error value (`EINVAL`...).
    pub error: u32,
    /// The request's cookie.
    pub cookie: u64,
}

impl SimpleReply {
    /// The 16 bytes the server sends.
    pub fn encode(&self) -> [u8; SIMPLE_REPLY_LEN] {
        let mut b = [0u8; SIMPLE_REPLY_LEN];
        b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&self.error.to_be_bytes());
        b[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        b
    }

    /// Parse a reply header (as a client).
    pub fn decode(b: &[u8]) -> Result<Self, ProtocolError> {
        need("simple reply", b, SIMPLE_REPLY_LEN)?;
        let magic = be_u32(b, 0);
        if magic != SIMPLE_REPLY_MAGIC {
            return Err(ProtocolError::BadMagic {
                what: "simple reply",
                expected: SIMPLE_REPLY_MAGIC.into(),
                got: magic.into(),
            });
        }
        Ok(SimpleReply { error: be_u32(b, 4), cookie: be_u64(b, 8) })
    }
}

/// The header of a structured reply chunk: magic, flags, type, cookie, payload length.
pub fn encode_chunk_header(flags: u16, kind: u16, cookie: u64, length: u32) -> [u8; CHUNK_HEADER_LEN] {
    let mut b = [0u8; CHUNK_HEADER_LEN];
    b[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&flags.to_be_bytes());
    b[6..8].copy_from_slice(&kind.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b[16..20].copy_from_slice(&length.to_be_bytes());
    b
}

/// A whole `NBD_REPLY_TYPE_ERROR` chunk, last of its reply: error value, message.
pub fn encode_error_chunk(cookie: u64, error: u32, message: &str) -> Vec<u8> {
    let msg = &message.as_bytes()[..message.len().min(MAX_NAME_BYTES)];
    let mut out = encode_chunk_header(REPLY_FLAG_DONE, REPLY_TYPE_ERROR, cookie, 6 + msg.len() as u32).to_vec();
    out.extend(error.to_be_bytes());
    out.extend((msg.len() as u16).to_be_bytes());
    out.extend(msg);
    out
}

/// A whole `NBD_REPLY_TYPE_BLOCK_STATUS` chunk, last of its reply: the context id and
/// its extents (length, flags).
pub fn encode_block_status_chunk(cookie: u64, context: u32, extents: &[(u32, u32)]) -> Vec<u8> {
    let len = 4 + 8 * extents.len() as u32;
    let mut out = encode_chunk_header(REPLY_FLAG_DONE, REPLY_TYPE_BLOCK_STATUS, cookie, len).to_vec();
    out.extend(context.to_be_bytes());
    for (length, flags) in extents {
        out.extend(length.to_be_bytes());
        out.extend(flags.to_be_bytes());
    }
    out
}

/// Data of an `NBD_REP_META_CONTEXT` reply: context id, name.
pub fn encode_meta_context(id: u32, name: &str) -> Vec<u8> {
    let mut out = id.to_be_bytes().to_vec();
    out.extend(name.as_bytes());
    out
}

/// The data of an `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT` request:
/// the export name and the queries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaContextRequest {
    /// The export the contexts are for.
    pub name: String,
    /// The queries (`base:allocation`, `base:`...).
    pub queries: Vec<String>,
}

impl MetaContextRequest {
    /// Parse option data; `Err` is a message for `NBD_REP_ERR_INVALID`.
    pub fn decode(data: &[u8]) -> Result<Self, String> {
        fn take<'a>(data: &'a [u8], at: &mut usize, n: usize, what: &str) -> Result<&'a [u8], String> {
            let end = at.checked_add(n).filter(|&e| e <= data.len()).ok_or_else(|| format!("{what} is cut short"))?;
            let out = &data[*at..end];
            *at = end;
            Ok(out)
        }
        fn u32_at(data: &[u8], at: &mut usize, what: &str) -> Result<u32, String> {
            let b = take(data, at, 4, what)?;
            Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        }
        let mut at = 0;
        let name_len = u32_at(data, &mut at, "the export name length")? as usize;
        if name_len > MAX_NAME_BYTES {
            return Err("the export name is longer than 4096 bytes".into());
        }
        let name = String::from_utf8_lossy(take(data, &mut at, name_len, "the export name")?).into_owned();
        let count = u32_at(data, &mut at, "the number of queries")?;
        let mut queries = Vec::new();
        for _ in 0..count {
            let len = u32_at(data, &mut at, "a query length")? as usize;
            if len > MAX_NAME_BYTES {
                return Err("a query is longer than 4096 bytes".into());
            }
            queries.push(String::from_utf8_lossy(take(data, &mut at, len, "a query")?).into_owned());
        }
        if at != data.len() {
            return Err(format!("{} bytes after the last query", data.len() - at));
        }
        Ok(MetaContextRequest { name, queries })
    }

    /// Encode (what a client sends).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = (self.name.len() as u32).to_be_bytes().to_vec();
        out.extend(self.name.as_bytes());
        out.extend((self.queries.len() as u32).to_be_bytes());
        for q in &self.queries {
            out.extend((q.len() as u32).to_be_bytes());
            out.extend(q.as_bytes());
        }
        out
    }

    /// Whether the queries select `base:allocation`: by name, or (to list) the whole
    /// `base:` namespace or no query at all.
    pub fn selects_base_allocation(&self, listing: bool) -> bool {
        self.queries.iter().any(|q| q == BASE_ALLOCATION || (listing && q == "base:"))
            || (listing && self.queries.is_empty())
    }
}

/// Whether every byte of `b` is zero (64 bytes at a time, which the compiler
/// vectorises: a byte-by-byte test cost 64 KiB hole reads a fifth of their rate).
pub fn is_zero(b: &[u8]) -> bool {
    let mut blocks = b.chunks_exact(64);
    for c in &mut blocks {
        if c.iter().fold(0u8, |acc, &x| acc | x) != 0 {
            return false;
        }
    }
    blocks.remainder().iter().all(|&x| x == 0)
}

/// The runs of a read's data as structured reply chunks: `(offset within the data,
/// length, is a hole)`, at `block`-byte granularity (an all-zero block is a hole);
/// adjacent runs of one kind are merged.
pub fn data_runs(data: &[u8], block: usize) -> Vec<(usize, usize, bool)> {
    let mut runs: Vec<(usize, usize, bool)> = Vec::new();
    for (i, b) in data.chunks(block.max(1)).enumerate() {
        let hole = is_zero(b);
        match runs.last_mut() {
            Some(last) if last.2 == hole => last.1 += b.len(),
            _ => runs.push((i * block.max(1), b.len(), hole)),
        }
    }
    runs
}

#[cfg(test)]
mod tests {

    #[test]
    fn structured_chunks_and_meta_contexts() {
        let h = encode_chunk_header(REPLY_FLAG_DONE, REPLY_TYPE_OFFSET_HOLE, 7, 12);
        assert_eq!(&h[0..4], &0x668e_33efu32.to_be_bytes());
        assert_eq!((u16::from_be_bytes([h[4], h[5]]), u16::from_be_bytes([h[6], h[7]])), (1, 2));
        assert_eq!(u64::from_be_bytes(h[8..16].try_into().unwrap()), 7);
        assert_eq!(u32::from_be_bytes(h[16..20].try_into().unwrap()), 12);
        let e = encode_error_chunk(9, EINVAL, "bad");
        assert_eq!(e.len(), CHUNK_HEADER_LEN + 4 + 2 + 3);
        assert_eq!(u16::from_be_bytes([e[6], e[7]]), 0x8001);
        assert_eq!(&e[20..24], &22u32.to_be_bytes());
        let b = encode_block_status_chunk(3, 1, &[(4096, 0), (8192, 3)]);
        assert_eq!(u32::from_be_bytes(b[16..20].try_into().unwrap()), 4 + 16);
        assert_eq!(&b[20..24], &1u32.to_be_bytes());
        assert_eq!(&b[28..32], &0u32.to_be_bytes());
        assert_eq!(&b[36..40], &3u32.to_be_bytes());
        let q = MetaContextRequest { name: "a".into(), queries: vec!["base:allocation".into(), "x:y".into()] };
        assert_eq!(MetaContextRequest::decode(&q.encode()), Ok(q.clone()));
        assert!(q.selects_base_allocation(false));
        let all = MetaContextRequest { name: "a".into(), queries: vec![] };
        assert!(all.selects_base_allocation(true) && !all.selects_base_allocation(false));
        let mut bad = q.encode();
        bad.push(0);
        assert!(MetaContextRequest::decode(&bad).unwrap_err().contains("after the last query"));
        assert!(MetaContextRequest::decode(&bad[..10]).unwrap_err().contains("cut short"));
        assert!(MetaContextRequest::decode(&u32::MAX.to_be_bytes()).unwrap_err().contains("longer than 4096"));
    }

    #[test]
    fn data_runs_split_zero_blocks_into_holes() {
        let mut d = vec![0u8; 4 * 4096 + 100];
        d[4096] = 1; // block 1 has data
        d[4 * 4096 + 5] = 2; // the short last block too
        assert_eq!(
            data_runs(&d, 4096),
            vec![(0, 4096, true), (4096, 4096, false), (8192, 8192, true), (16384, 100, false)]
        );
        assert_eq!(data_runs(&[], 4096), vec![]);
        for at in [0, 63, 64, 4095] {
            let mut z = vec![0u8; 4096];
            assert!(is_zero(&z));
            z[at] = 1;
            assert!(!is_zero(&z), "{at}");
        }
        assert_eq!(data_runs(&[0; 10], 4096), vec![(0, 10, true)]);
    }

    use super::*;

    #[test]
    fn greeting_bytes() {
        let g = encode_greeting();
        assert_eq!(&g[0..8], b"NBDMAGIC");
        assert_eq!(&g[8..16], b"IHAVEOPT");
        assert_eq!(&g[16..18], &[0, 3]);
    }

    #[test]
    fn client_flags() {
        assert_eq!(decode_client_flags(&[0, 0, 0, 3]), Ok(3));
        assert_eq!(decode_client_flags(&[0, 0, 0, 1]), Ok(1));
        assert_eq!(decode_client_flags(&[0, 0, 0, 4]), Err(ProtocolError::UnknownClientFlags(4)));
        // Old newstyle (no FIXED_NEWSTYLE bit), with or without NO_ZEROES: refused.
        assert_eq!(decode_client_flags(&[0, 0, 0, 0]), Err(ProtocolError::NotFixedNewstyle));
        assert_eq!(decode_client_flags(&[0, 0, 0, 2]), Err(ProtocolError::NotFixedNewstyle));
        assert!(matches!(decode_client_flags(&[0, 0]), Err(ProtocolError::Truncated { needed: 4, got: 2, .. })));
    }

    #[test]
    fn option_header_round_trip_and_errors() {
        let h = OptionHeader { option: OPT_GO, len: 42 };
        let b = h.encode();
        assert_eq!(&b[0..8], b"IHAVEOPT");
        assert_eq!(OptionHeader::decode(&b), Ok(h));
        let mut bad = b;
        bad[0] = b'X';
        let e = OptionHeader::decode(&bad).unwrap_err();
        assert!(matches!(e, ProtocolError::BadMagic { what: "option request", .. }));
        assert!(e.to_string().contains("bad option request magic"), "{e}");
        let big = OptionHeader { option: OPT_GO, len: MAX_OPTION_BYTES + 1 }.encode();
        assert!(matches!(OptionHeader::decode(&big), Err(ProtocolError::TooLong { .. })));
        assert!(matches!(OptionHeader::decode(&b[..10]), Err(ProtocolError::Truncated { needed: 16, got: 10, .. })));
    }

    #[test]
    fn go_request_round_trip_and_invalid_data() {
        let r = GoRequest { name: "disk0".into(), info: vec![INFO_BLOCK_SIZE, 1] };
        assert_eq!(GoRequest::decode(&r.encode()), Ok(r));
        let empty = GoRequest { name: String::new(), info: vec![] };
        assert_eq!(empty.encode(), vec![0, 0, 0, 0, 0, 0]);
        assert_eq!(GoRequest::decode(&empty.encode()), Ok(empty));
        // Name length pointing past the data.
        assert!(GoRequest::decode(&[0, 0, 0, 9, b'a', 0, 0]).unwrap_err().contains("export name length 9"));
        // Info count not matching the data.
        assert!(GoRequest::decode(&[0, 0, 0, 1, b'a', 0, 2, 0, 1]).unwrap_err().contains("2 information requests"));
        assert!(GoRequest::decode(&[0, 0]).unwrap_err().contains("shorter"));
        assert!(GoRequest::decode(&[0, 0, 0, 1, 0xff, 0, 0]).unwrap_err().contains("UTF-8"));
    }

    #[test]
    fn option_reply_round_trip() {
        let b = encode_option_reply(OPT_LIST, REP_SERVER, &encode_server_entry("a"));
        assert_eq!(decode_option_reply_header(&b), Ok((OPT_LIST, REP_SERVER, 5)));
        assert_eq!(&b[20..], &[0, 0, 0, 1, b'a']);
        let mut bad = b.clone();
        bad[3] ^= 1;
        assert!(matches!(decode_option_reply_header(&bad), Err(ProtocolError::BadMagic { .. })));
        assert_eq!(REP_ERR_UNSUP, 0x8000_0001);
        assert_eq!(REP_ERR_UNKNOWN, 0x8000_0006);
    }

    #[test]
    fn info_and_export_name_replies() {
        let i = encode_info_export(1 << 20, TRANSMISSION_FLAGS);
        assert_eq!(&i[0..2], &[0, 0]);
        assert_eq!(be_u64(&i, 2), 1 << 20);
        assert_eq!(be_u16(&i, 10), TRANSMISSION_FLAGS);
        assert_ne!(TRANSMISSION_FLAGS & TFLAG_SEND_TRIM, 0);
        assert_ne!(TRANSMISSION_FLAGS & TFLAG_SEND_WRITE_ZEROES, 0);
        assert_eq!(TRANSMISSION_FLAGS & TFLAG_READ_ONLY, 0);
        let bs = encode_info_block_size();
        assert_eq!((be_u16(&bs, 0), be_u32(&bs, 2), be_u32(&bs, 6), be_u32(&bs, 10)), (3, 1, 4096, 32 << 20));
        assert_eq!(encode_export_name_reply(7, 1, true).len(), 10);
        assert_eq!(encode_export_name_reply(7, 1, false).len(), 134);
    }

    #[test]
    fn request_round_trip() {
        let all = [Command::Read, Command::Write, Command::Disc, Command::Flush, Command::Trim, Command::WriteZeroes];
        for command in all.into_iter().chain([Command::Other(5)]) {
            let h =
                RequestHeader { flags: CMD_FLAG_FUA, command, cookie: 0xdead_beef_0102, offset: 1 << 40, length: 4096 };
            assert_eq!(RequestHeader::decode(&h.encode()), Ok(h));
        }
        assert_eq!((Command::from_u16(4), Command::from_u16(6)), (Command::Trim, Command::WriteZeroes));
        assert_eq!(Command::from_u16(5), Command::Other(5));
    }

    #[test]
    fn malformed_requests() {
        let h = RequestHeader { flags: 0, command: Command::Read, cookie: 1, offset: 0, length: 512 };
        let mut b = h.encode();
        b[0] = 0;
        let e = RequestHeader::decode(&b).unwrap_err();
        assert_eq!(e, ProtocolError::BadMagic { what: "request", expected: 0x2560_9513, got: 0x0060_9513 });
        assert_eq!(e.to_string(), "bad request magic 0x609513 (expected 0x25609513)");
        let long = RequestHeader { length: MAX_IO_BYTES + 1, command: Command::Write, ..h };
        let e = RequestHeader::decode(&long.encode()).unwrap_err();
        assert!(e.to_string().contains("exceeds the maximum of 33554432 bytes"), "{e}");
        // A flush's, trim's or write-zeroes' length is not a transfer size: not limited.
        for command in [Command::Flush, Command::Trim, Command::WriteZeroes] {
            let h = RequestHeader { length: u32::MAX, command, ..h };
            assert!(RequestHeader::decode(&h.encode()).is_ok());
        }
        assert!(matches!(
            RequestHeader::decode(&h.encode()[..27]),
            Err(ProtocolError::Truncated { needed: 28, got: 27, .. })
        ));
    }

    #[test]
    fn simple_reply_round_trip() {
        let r = SimpleReply { error: EINVAL, cookie: 99 };
        let b = r.encode();
        assert_eq!(&b[0..4], &[0x67, 0x44, 0x66, 0x98]);
        assert_eq!(SimpleReply::decode(&b), Ok(r));
        assert!(matches!(SimpleReply::decode(&b[..5]), Err(ProtocolError::Truncated { .. })));
        let mut bad = b;
        bad[1] = 0;
        assert!(matches!(SimpleReply::decode(&bad), Err(ProtocolError::BadMagic { .. })));
    }

    #[test]
    fn decoders_never_panic_on_random_bytes() {
        // xorshift64*: deterministic garbage of every length from 0 to 64 bytes.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        for round in 0..20_000 {
            let len = round % 65;
            let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if round % 3 == 0 && len >= 4 {
                // Plausible headers too, so the checks after the magic are reached.
                b[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
            }
            if round % 5 == 0 && len >= 8 {
                b[..8].copy_from_slice(&IHAVEOPT.to_be_bytes());
            }
            let _ = RequestHeader::decode(&b);
            let _ = OptionHeader::decode(&b);
            let _ = SimpleReply::decode(&b);
            let _ = decode_client_flags(&b);
            let _ = decode_option_reply_header(&b);
            let _ = GoRequest::decode(&b);
            if len >= 4 {
                // GO data whose name length is small enough to be taken seriously.
                b[..4].copy_from_slice(&((next() % 70) as u32).to_be_bytes());
                let _ = GoRequest::decode(&b);
            }
        }
    }

    #[test]
    fn client_names_in_log_lines_are_cut() {
        assert_eq!(shown_name("web"), "\"web\"");
        let long = "x".repeat(60_000);
        let shown = shown_name(&long);
        assert!(shown.len() < 100 && shown.ends_with("… (60000 bytes)"), "{shown}");
        // Cut on characters, not bytes (a multi-byte name never panics).
        assert!(shown_name(&"é".repeat(100)).contains("(200 bytes)"));
    }
}
