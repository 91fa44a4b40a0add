//! The NBD server, by job:
//!
//! - [`start`](mod@start): check the configuration, open the exports, build the policy, bind, and
//!   run the engine and the accept loop on a runtime of the gateway's own;
//! - [`options`] and [`ready`]: what a start is given beside its configuration, and what
//!   it reports once it listens;
//! - [`handle`]: the running gateway's [`Handle`]: reload, statistics, stop;
//! - [`signals`]: the signals and the stop condition;
//! - [`accept`]: the accept loop and each newcomer's place among the connections;
//! - [`connection`]: one connection from its handshake to its end;
//! - [`negotiation`]: fixed newstyle negotiation and who may use which export;
//! - [`transmission`]: the reader, which parses, checks ([`crate::request_check`]) and
//!   submits requests;
//! - [`replies`]: the writer, which frames and writes the replies;
//! - [`shared`]: what every connection shares, and [`conn_error`]: why one ends early.
//!
//! Reads, writes, trims and write-zeroes go to the engine ([`crate::engine`]) (the
//! policy sees the last two as writes of 0 and of `length` bytes), flushes go straight
//! to the backend (`fdatasync` covers every write completed before it, whichever
//! connection issued it). Replies may leave out of order (NBD matches them by cookie).
//!
//! A malformed packet (bad magic, a length over 32 MiB, a connection ending in the
//! middle of a message, unknown client flags) closes only that connection, with one
//! line logged naming the client address and what was wrong; the server keeps
//! serving the others. Nothing here panics on network input.

pub mod accept;
pub mod conn_error;
pub mod connection;
pub mod handle;
pub mod negotiation;
pub mod options;
pub mod ready;
pub mod replies;
pub mod shared;
pub mod signals;
pub mod start;
pub mod transmission;

pub use crate::notices::{Logger, NOTICE_EVERY};
pub use handle::Handle;
pub use options::Options;
pub use ready::{ExportInfo, ReadyInfo};
pub use replies::WRITE_PIECE;
pub use shared::MAX_CONCURRENT_FLUSHES;
pub use start::{check, run, start, start_with, OTHER_OPEN_FILES};
