//! A small blocking NBD client: fixed newstyle negotiation (`NBD_OPT_GO`), simple
//! replies, and storqos' dmClock extension when the server takes it
//! ([`crate::dmclock_wire`]). It is the client of [`crate::spread_replay`], which needs
//! what libnbd cannot give: bytes of its own after each request header, and the
//! server's word after each reply header.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::dmclock_wire::OPT_STORQOS_DMCLOCK;
use crate::protocol::*;

/// An NBD connection in its transmission phase.
#[derive(Debug)]
pub struct NbdConnection {
    /// The socket (clone it for a reader thread).
    pub stream: TcpStream,
    /// The export's size (bytes).
    pub size: u64,
    /// The export's transmission flags.
    pub flags: u16,
    /// The server took the dmClock extension: requests carry δ and ρ, replies a phase.
    pub dmclock: bool,
}

/// What went wrong while connecting, in words for the user.
#[derive(Debug)]
pub struct ConnectError(pub String);

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConnectError {}

fn io_err(addr: &str, what: &str, e: io::Error) -> ConnectError {
    let why = if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) {
        "no answer in time".to_string()
    } else if e.kind() == io::ErrorKind::UnexpectedEof {
        "the server closed the connection".to_string()
    } else {
        e.to_string()
    };
    ConnectError(format!("{addr}: {what}: {why}"))
}

/// Read one option reply: (reply type, data).
fn option_reply(s: &mut TcpStream, addr: &str, option: u32) -> Result<(u32, Vec<u8>), ConnectError> {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).map_err(|e| io_err(addr, "option reply", e))?;
    let (opt, kind, len) =
        decode_option_reply_header(&h).map_err(|e| ConnectError(format!("{addr}: not an NBD server ({e})")))?;
    if opt != option {
        return Err(ConnectError(format!("{addr}: reply to option {opt} where {option} was asked")));
    }
    if len > MAX_OPTION_BYTES {
        return Err(ConnectError(format!("{addr}: option reply of {len} bytes")));
    }
    let mut data = vec![0u8; len as usize];
    s.read_exact(&mut data).map_err(|e| io_err(addr, "option reply data", e))?;
    Ok((kind, data))
}

/// Connect to `addr` (`HOST:PORT`) and enter transmission on `export`, asking for the
/// dmClock extension if `dmclock`; `timeout` bounds each step (and stays the
/// socket's read timeout).
pub fn connect(addr: &str, export: &str, dmclock: bool, timeout: Duration) -> Result<NbdConnection, ConnectError> {
    let sa = addr
        .to_socket_addrs()
        .map_err(|e| ConnectError(format!("{addr}: {e}")))?
        .next()
        .ok_or_else(|| ConnectError(format!("{addr}: no address")))?;
    let mut s = TcpStream::connect_timeout(&sa, timeout).map_err(|e| io_err(addr, "connect", e))?;
    s.set_read_timeout(Some(timeout)).and_then(|()| s.set_nodelay(true)).map_err(|e| io_err(addr, "socket", e))?;
    let mut g = [0u8; GREETING_LEN];
    s.read_exact(&mut g).map_err(|e| io_err(addr, "greeting", e))?;
    let magic = u64::from_be_bytes(g[0..8].try_into().expect("8 bytes"));
    let opt = u64::from_be_bytes(g[8..16].try_into().expect("8 bytes"));
    if magic != NBDMAGIC || opt != IHAVEOPT {
        return Err(ConnectError(format!("{addr}: not a newstyle NBD server")));
    }
    let server_flags = u16::from_be_bytes([g[16], g[17]]);
    if server_flags & FLAG_FIXED_NEWSTYLE == 0 {
        return Err(ConnectError(format!("{addr}: the server does not speak fixed newstyle NBD")));
    }
    let no_zeroes = if server_flags & FLAG_NO_ZEROES != 0 { FLAG_C_NO_ZEROES } else { 0 };
    s.write_all(&(FLAG_C_FIXED_NEWSTYLE | no_zeroes).to_be_bytes()).map_err(|e| io_err(addr, "client flags", e))?;
    let mut on = false;
    if dmclock {
        s.write_all(&OptionHeader { option: OPT_STORQOS_DMCLOCK, len: 0 }.encode())
            .map_err(|e| io_err(addr, "dmClock option", e))?;
        // A server that does not know the option answers an error (NBD_REP_ERR_UNSUP):
        // the connection goes on without it.
        let (kind, _) = option_reply(&mut s, addr, OPT_STORQOS_DMCLOCK)?;
        on = kind == REP_ACK;
    }
    let go = GoRequest { name: export.to_string(), info: vec![] }.encode();
    let mut req = OptionHeader { option: OPT_GO, len: go.len() as u32 }.encode().to_vec();
    req.extend(go);
    s.write_all(&req).map_err(|e| io_err(addr, "NBD_OPT_GO", e))?;
    let (mut size, mut flags) = (None, 0u16);
    loop {
        let (kind, data) = option_reply(&mut s, addr, OPT_GO)?;
        match kind {
            REP_ACK => break,
            REP_INFO if data.len() >= 12 && u16::from_be_bytes([data[0], data[1]]) == INFO_EXPORT => {
                size = Some(u64::from_be_bytes(data[2..10].try_into().expect("8 bytes")));
                flags = u16::from_be_bytes([data[10], data[11]]);
            }
            REP_INFO => {}
            k if k & REP_FLAG_ERROR != 0 => {
                let msg = String::from_utf8_lossy(&data).into_owned();
                let msg = if msg.is_empty() { format!("error {:#x}", k) } else { msg };
                return Err(ConnectError(format!("{addr}: export {}: {msg}", shown_name(export))));
            }
            k => return Err(ConnectError(format!("{addr}: unexpected reply {k} to NBD_OPT_GO"))),
        }
    }
    let size = size.ok_or_else(|| ConnectError(format!("{addr}: the server did not say the export's size")))?;
    Ok(NbdConnection { stream: s, size, flags, dmclock: on })
}
