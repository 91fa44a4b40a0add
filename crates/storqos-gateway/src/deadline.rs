//! Deadlines on a connection's reads and writes while it is transmitting.
//!
//! **What it guards.** A connection's reader and writer wait on the client: for the rest
//! of a request once its first byte came (the 28-byte header, then a write's payload),
//! and for the client to take its replies. Without a deadline those waits last for
//! ever: two bytes of a header held a connection, and its slot, as long as the client
//! liked, and 8 connections that each sent a 32 MiB write's header and 1,000 bytes of
//! it stalled every client for as long as they stayed. [`Deadline`] wraps one half of
//! the stream and fails a read or a write with `TimedOut` when it has made no
//! progress, not one byte, for its limit: a slow client that keeps sending or taking
//! bytes is never cut off however long a request or a reply takes, a stalled one is
//! within the limit.
//!
//! **Defaults.** `request_timeout` ([`DEFAULT_REQUEST_TIMEOUT_S`], 10 s): a client in
//! the middle of a request is in the middle of sending it; TCP retransmits a lost
//! segment within about a second (the minimum RTO, 200 ms, doubling), so a live
//! connection, even a lossy one across a WAN, delivers its next byte in far less; 10 s
//! is the handshake's own default timeout. `reply_timeout`
//! ([`DEFAULT_REPLY_TIMEOUT_S`], 30 s): a client that has asked for data and takes none
//! of it for that long is stopped or gone; 30 s leaves room for a client that pauses
//! (a process descheduled, a VM host under pressure) and still closes a client that
//! reads nothing within half a minute, which gives back what its replies held.
//!
//! The wait for the *first* byte of a request is not under this deadline: it is the
//! client being idle, which NBD clients are for hours (`idle_timeout`, off by default).
//! The reader turns the deadline on once that byte has come ([`Deadline::arm`]) and off
//! before waiting for the next request.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Default `request_timeout`: the rest of a request, once its first byte came, must
/// keep coming (see the module documentation).
pub const DEFAULT_REQUEST_TIMEOUT_S: f64 = 10.0;
/// Default `reply_timeout`: a client with replies waiting must take some of them.
pub const DEFAULT_REPLY_TIMEOUT_S: f64 = 30.0;

/// One half of a stream whose reads or writes fail with [`io::ErrorKind::TimedOut`]
/// after `limit` without progress, while armed.
pub struct Deadline<T> {
    inner: T,
    limit: Duration,
    armed: bool,
    /// Set while a read or write waits: when it gives up.
    sleep: Pin<Box<Sleep>>,
    waiting: bool,
}

impl<T> Deadline<T> {
    /// `inner` with a deadline of `limit`, armed or not.
    pub fn new(inner: T, limit: Duration, armed: bool) -> Deadline<T> {
        Deadline { inner, limit, armed, sleep: Box::pin(tokio::time::sleep(Duration::ZERO)), waiting: false }
    }

    /// Turn the deadline on (the time counts from the next wait).
    pub fn arm(&mut self) {
        self.armed = true;
        self.waiting = false;
    }

    /// Turn it off.
    pub fn disarm(&mut self) {
        self.armed = false;
        self.waiting = false;
    }

    /// The limit.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// `Ready(Err)` if a wait that just returned `Pending` has lasted `limit`.
    fn expired(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        if !self.armed {
            return Poll::Pending;
        }
        if !self.waiting {
            self.waiting = true;
            let at = Instant::now() + self.limit;
            self.sleep.as_mut().reset(at);
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.waiting = false;
                Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, "no progress within the deadline"))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Deadline<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                this.waiting = false;
                Poll::Ready(r)
            }
            Poll::Pending => this.expired(cx).map(Err),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Deadline<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Ready(r) => {
                this.waiting = false;
                Poll::Ready(r)
            }
            Poll::Pending => this.expired(cx).map(Err),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => {
                this.waiting = false;
                Poll::Ready(r)
            }
            Poll::Pending => this.expired(cx).map(Err),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Ready(r) => {
                this.waiting = false;
                Poll::Ready(r)
            }
            Poll::Pending => this.expired(cx).map(Err),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_shutdown(cx) {
            Poll::Ready(r) => {
                this.waiting = false;
                Poll::Ready(r)
            }
            Poll::Pending => this.expired(cx).map(Err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    // The clock is paused: tokio advances it to the next timer when every task waits,
    // so these take no wall time and measure nothing.

    #[tokio::test(start_paused = true)]
    async fn a_read_that_gets_no_byte_for_the_limit_times_out_and_one_that_does_not_never() {
        let (client, server) = tokio::io::duplex(64);
        let mut rd = Deadline::new(server, Duration::from_secs(10), true);
        let (client_rd, mut client_wr) = tokio::io::split(client);
        let started = Instant::now();
        // One byte every 9 s: 5 bytes take 36 s, and every wait is under the limit.
        let dribble = tokio::spawn(async move {
            for b in 0..5u8 {
                if b > 0 {
                    tokio::time::sleep(Duration::from_secs(9)).await;
                }
                client_wr.write_all(&[b]).await.unwrap();
            }
            client_wr
        });
        let mut got = [0u8; 5];
        rd.read_exact(&mut got).await.unwrap();
        assert_eq!(got, [0, 1, 2, 3, 4]);
        assert_eq!(started.elapsed(), Duration::from_secs(36));
        // Then nothing: the sixth byte's wait ends at 10 s.
        let _wr = dribble.await.unwrap();
        let at = Instant::now();
        let e = rd.read_exact(&mut got[..1]).await.unwrap_err();
        assert_eq!((e.kind(), at.elapsed()), (io::ErrorKind::TimedOut, Duration::from_secs(10)));
        // Disarmed, the same wait never ends.
        rd.disarm();
        let waited = tokio::time::timeout(Duration::from_secs(3600), rd.read_exact(&mut got[..1])).await;
        assert!(waited.is_err(), "a disarmed deadline timed out");
        drop(client_rd);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_the_client_takes_nothing_of_times_out() {
        let (client, server) = tokio::io::duplex(4096);
        let mut wr = Deadline::new(server, Duration::from_secs(30), true);
        let at = Instant::now();
        // 4 KiB fit in the pipe; the rest waits for a reader that never reads.
        let e = wr.write_all(&vec![7u8; 1 << 20]).await.unwrap_err();
        assert_eq!((e.kind(), at.elapsed()), (io::ErrorKind::TimedOut, Duration::from_secs(30)));
        drop(client);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_of_a_large_reply_is_never_cut_off() {
        let (client, server) = tokio::io::duplex(4096);
        let mut wr = Deadline::new(server, Duration::from_secs(30), true);
        // The client takes 4 KiB every 20 s: 1 MiB takes 256 of them, 85 minutes.
        let reader = tokio::spawn(async move {
            let mut client = client;
            let mut total = 0;
            let mut buf = vec![0u8; 4096];
            while total < 1 << 20 {
                tokio::time::sleep(Duration::from_secs(20)).await;
                total += client.read(&mut buf).await.unwrap();
            }
            total
        });
        wr.write_all(&vec![7u8; 1 << 20]).await.unwrap();
        assert_eq!(reader.await.unwrap(), 1 << 20);
    }
}
