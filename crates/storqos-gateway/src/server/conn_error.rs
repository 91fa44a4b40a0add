//! Why a connection ends early (`ConnError`), and the reads and writes of whole
//! messages that say it.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::protocol::ProtocolError;

/// Why a connection ended early.
pub(crate) enum ConnError {
    Protocol(ProtocolError),
    Io(std::io::Error),
    /// Refused by the gateway's policy (an address not allowed, a limit), said to the log.
    Refused(String),
    /// Nothing in flight and no request for the idle timeout.
    Idle,
    /// Refused, and the reason already logged (admission control).
    Said,
}

impl From<ProtocolError> for ConnError {
    fn from(e: ProtocolError) -> Self {
        ConnError::Protocol(e)
    }
}
impl From<std::io::Error> for ConnError {
    fn from(e: std::io::Error) -> Self {
        ConnError::Io(e)
    }
}

/// Read exactly `buf.len()` bytes. `Ok(false)` if the peer closed before the first
/// byte and `eof_ok`; a close after it is [`ProtocolError::Truncated`].
pub(crate) async fn read_msg<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut [u8],
    what: &'static str,
    eof_ok: bool,
) -> std::result::Result<bool, ConnError> {
    let mut got = 0;
    while got < buf.len() {
        let n = r.read(&mut buf[got..]).await?;
        if n == 0 {
            if got == 0 && eof_ok {
                return Ok(false);
            }
            return Err(ProtocolError::Truncated { what, needed: buf.len(), got }.into());
        }
        got += n;
    }
    Ok(true)
}

pub(crate) async fn send<W: AsyncWrite + Unpin>(w: &mut W, bytes: &[u8]) -> std::result::Result<(), ConnError> {
    w.write_all(bytes).await?;
    Ok(())
}
