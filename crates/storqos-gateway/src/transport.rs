//! What a connection runs over: TCP or a Unix socket, either of them plain or
//! wrapped in TLS after `NBD_OPT_STARTTLS` ([`crate::tls`]). One enum per role
//! (listener, stream, read half, write half) so that the connection code is written
//! once and a plain TCP connection keeps tokio's lock-free owned halves.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{tcp, unix, TcpListener, TcpStream, UnixListener, UnixStream};
use tokio_rustls::server::TlsStream;

/// Where the gateway listens, parsed from the `listen` setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAt {
    /// `HOST:PORT`.
    Tcp(SocketAddr),
    /// `unix:/PATH`: a Unix socket (what qemu-nbd `-k` and nbdkit `-U` offer).
    Unix(PathBuf),
}

/// Who is at the other end of a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    /// A TCP client.
    Ip(SocketAddr),
    /// A client of the Unix socket (who may connect is decided by the socket file's
    /// permissions, so export allow lists of addresses do not apply).
    Local,
}

impl Peer {
    /// The client's IP address, if it came over TCP.
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Peer::Ip(a) => Some(a.ip()),
            Peer::Local => None,
        }
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Ip(a) => write!(f, "{a}"),
            Peer::Local => f.write_str("on the Unix socket"),
        }
    }
}

/// A bound listener.
pub enum Listener {
    /// TCP.
    Tcp(TcpListener),
    /// A Unix socket, removed again when the listener is dropped.
    Unix(UnixListener, UnixSocketFile),
}

/// The path of a Unix socket the gateway created; the file is removed on drop.
pub struct UnixSocketFile(pub PathBuf);

impl Drop for UnixSocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Listener {
    /// Bind `at` (inside a tokio runtime). A Unix socket path that exists is taken
    /// over only if it is a socket nobody listens on (left by a gateway that was
    /// killed); anything else there is an error, never removed.
    pub async fn bind(at: &ListenAt) -> io::Result<Listener> {
        match at {
            ListenAt::Tcp(a) => Ok(Listener::Tcp(TcpListener::bind(a).await?)),
            ListenAt::Unix(p) => {
                take_over_stale_socket(p).await?;
                let l = UnixListener::bind(p)?;
                Ok(Listener::Unix(l, UnixSocketFile(p.clone())))
            }
        }
    }

    /// What the listener is bound to, as the `listen` setting spells it
    /// (`HOST:PORT` with the real port, or `unix:/PATH`).
    pub fn describe(&self) -> io::Result<String> {
        match self {
            Listener::Tcp(l) => Ok(l.local_addr()?.to_string()),
            Listener::Unix(_, f) => Ok(format!("unix:{}", f.0.display())),
        }
    }

    /// The TCP address, if it listens on TCP.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr().ok(),
            Listener::Unix(..) => None,
        }
    }

    /// Accept the next connection.
    pub async fn accept(&self) -> io::Result<(Plain, Peer)> {
        match self {
            Listener::Tcp(l) => {
                let (s, a) = l.accept().await?;
                let _ = s.set_nodelay(true);
                Ok((Plain::Tcp(s), Peer::Ip(a)))
            }
            Listener::Unix(l, _) => {
                let (s, _) = l.accept().await?;
                Ok((Plain::Unix(s), Peer::Local))
            }
        }
    }
}

async fn take_over_stale_socket(p: &Path) -> io::Result<()> {
    match socket_path(p)? {
        SocketPath::Free => Ok(()),
        SocketPath::Stale => std::fs::remove_file(p),
        SocketPath::Live => Err(io::Error::new(io::ErrorKind::AddrInUse, "another server listens on this socket")),
    }
}

/// Longest path of a Unix socket: Linux's `sockaddr_un` holds 108 bytes, the last a NUL.
pub const MAX_SOCKET_PATH_BYTES: usize = 107;

/// What is at the path of a Unix socket the gateway is to create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketPath {
    /// Nothing: the socket can be created there.
    Free,
    /// A socket nobody listens on (left by a gateway that was killed): it is replaced.
    Stale,
    /// A socket a running server answers on.
    Live,
}

/// What is at `p`, or why no socket can be created there: a file that is not a socket
/// (never replaced: `--control gw.toml` once removed the file), a directory that does
/// not exist, a path longer than a socket address holds. The listen socket, the control
/// socket and `storqos serve --check` all ask this one function.
pub fn socket_path(p: &Path) -> io::Result<SocketPath> {
    use std::os::unix::fs::FileTypeExt;
    let len = p.as_os_str().len();
    if len > MAX_SOCKET_PATH_BYTES {
        let why =
            format!("the path is {len} bytes, longer than the {MAX_SOCKET_PATH_BYTES} a Unix socket's address holds");
        return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
    }
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(io::Error::new(io::ErrorKind::NotADirectory, format!("{} is not a directory", dir.display())))
        }
        Err(e) => return Err(io::Error::new(e.kind(), format!("no directory {} ({e})", dir.display()))),
    }
    let Ok(meta) = std::fs::symlink_metadata(p) else { return Ok(SocketPath::Free) };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "a file that is not a socket is there: not replacing it (name a new path)",
        ));
    }
    match std::os::unix::net::UnixStream::connect(p) {
        Ok(_) => Ok(SocketPath::Live),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(SocketPath::Stale),
        Err(e) => Err(e),
    }
}

/// A connection before (or without) TLS.
pub enum Plain {
    /// TCP.
    Tcp(TcpStream),
    /// Unix socket.
    Unix(UnixStream),
}

/// A connection: plain, or TLS once `NBD_OPT_STARTTLS` succeeded.
pub enum Stream {
    /// No TLS.
    Plain(Plain),
    /// TLS over a plain connection.
    Tls(Box<TlsStream<Plain>>),
}

/// The reading half of a [`Stream`].
pub enum ReadHalf {
    /// TCP.
    Tcp(tcp::OwnedReadHalf),
    /// Unix socket.
    Unix(unix::OwnedReadHalf),
    /// TLS (the halves share the TLS state behind a lock).
    Tls(tokio::io::ReadHalf<Box<TlsStream<Plain>>>),
}

/// The writing half of a [`Stream`].
pub enum WriteHalf {
    /// TCP.
    Tcp(tcp::OwnedWriteHalf),
    /// Unix socket.
    Unix(unix::OwnedWriteHalf),
    /// TLS.
    Tls(tokio::io::WriteHalf<Box<TlsStream<Plain>>>),
}

impl Stream {
    /// Split for the transmission phase's reader and writer tasks.
    pub fn split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Plain(Plain::Tcp(s)) => {
                let (r, w) = s.into_split();
                (ReadHalf::Tcp(r), WriteHalf::Tcp(w))
            }
            Stream::Plain(Plain::Unix(s)) => {
                let (r, w) = s.into_split();
                (ReadHalf::Unix(r), WriteHalf::Unix(w))
            }
            Stream::Tls(s) => {
                let (r, w) = tokio::io::split(s);
                (ReadHalf::Tls(r), WriteHalf::Tls(w))
            }
        }
    }

    /// Whether TLS is on.
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }
}

/// Forward `AsyncRead` to whichever variant an enum holds.
macro_rules! read_via {
    ($ty:ty, $($variant:ident),+) => {
        impl AsyncRead for $ty {
            fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_read(cx, buf),)+
                }
            }
        }
    };
}

/// Forward `AsyncWrite` to whichever variant an enum holds.
macro_rules! write_via {
    ($ty:ty, $($variant:ident),+) => {
        impl AsyncWrite for $ty {
            fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_write(cx, buf),)+
                }
            }
            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_write_vectored(cx, bufs),)+
                }
            }
            fn is_write_vectored(&self) -> bool {
                match self {
                    $(Self::$variant(s) => s.is_write_vectored(),)+
                }
            }
            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_flush(cx),)+
                }
            }
            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_shutdown(cx),)+
                }
            }
        }
    };
}

read_via!(Plain, Tcp, Unix);
write_via!(Plain, Tcp, Unix);
read_via!(Stream, Plain, Tls);
write_via!(Stream, Plain, Tls);
read_via!(ReadHalf, Tcp, Unix, Tls);
write_via!(WriteHalf, Tcp, Unix, Tls);
