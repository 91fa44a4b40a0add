//! One connection from its handshake to its end: negotiation under the handshake
//! deadline, then transmission (a reader and a writer task), and the one line logged
//! when it ends early.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::unbounded_channel;

use super::conn_error::ConnError;
use super::negotiation::negotiate;
use super::replies::write_replies;
use super::shared::{OpenGuard, Shared};
use super::transmission::transmission;
use crate::deadline::Deadline;
use crate::peer_limits::{Origin, Ticket};
use crate::transport::{Peer, Plain, Stream};

pub(crate) async fn connection(stream: Plain, peer: Peer, ticket: Ticket, shared: Arc<Shared>) {
    let _open = OpenGuard(shared.clone());
    tokio::select! {
        // Closed to make room for a newcomer (said by the accept loop): it was idle.
        () = ticket.evicted() => {}
        () = connected(stream, &peer, &ticket, &shared) => {}
    }
}

/// Aborts its task when dropped (a connection's writer ends with its connection).
pub(crate) struct Aborting<T>(pub(crate) tokio::task::JoinHandle<T>);

impl<T> Drop for Aborting<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A connection from its handshake to its end.
pub(crate) async fn connected(stream: Plain, peer: &Peer, ticket: &Ticket, shared: &Arc<Shared>) {
    let handshake = Duration::from_secs_f64(shared.limits.handshake_timeout_s);
    let (stream, export, _counted, session) =
        match tokio::time::timeout(handshake, negotiate(Stream::Plain(stream), peer, shared)).await {
            Ok(Ok(Some(chosen))) => chosen,
            Ok(Ok(None)) => return,
            Ok(Err(e)) => {
                report(shared, peer, "negotiation", e);
                return;
            }
            Err(_) => {
                shared.notices.say(&shared.log, "handshake_timeout", || {
                    format!(
                    "client {peer}: no handshake within {} s; connection closed (said once a minute while it lasts)",
                    shared.limits.handshake_timeout_s
                )
                });
                return;
            }
        };
    // The connection's share of its tenant's in-flight budget, the tenants' shares
    // divided among those served now.
    let (budget, said) = shared.budgets.connection(export.tenant, shared.exports.all().iter().map(|e| e.tenant));
    if let Some(why) = said {
        (shared.log)(&why);
    }
    let budget = Arc::new(budget);
    ticket.negotiated(budget.clone());
    let (rd, wr) = stream.split();
    let (reply_tx, reply_rx) = unbounded_channel();
    let reply_timeout = Duration::from_secs_f64(shared.limits.reply_timeout_s);
    let wr = Deadline::new(wr, reply_timeout, true);
    let mut writer =
        Aborting(tokio::spawn(write_replies(wr, reply_rx, shared.stats.clone(), shared.clock, session.dmclock)));
    let outcome = tokio::select! {
        r = transmission(rd, reply_tx, export, shared, session, &budget) => r,
        w = &mut writer.0 => {
            // The writer ended first: the client left, or took no byte of its replies
            // for the reply timeout. The reader stops with it.
            if let Ok(Err(e)) = w {
                if e.kind() == std::io::ErrorKind::TimedOut {
                    shared.notices.say(&shared.log, "reply_timeout", || format!(
                        "client {peer}: took no reply for {} s; connection closed (said once a minute while it lasts)",
                        shared.limits.reply_timeout_s
                    ));
                }
            }
            return;
        }
    };
    match outcome {
        Ok(()) => {
            // NBD_CMD_DISC or end of input: finish the outstanding replies, then close.
            let _ = (&mut writer.0).await;
        }
        Err(ConnError::Idle) => {
            shared.notices.say(&shared.log, "idle_timeout", || {
                format!(
                    "client {peer}: idle for {} s; connection closed (said once a minute while it lasts)",
                    shared.limits.idle_timeout_s.unwrap_or(0.0)
                )
            });
        }
        Err(ConnError::Io(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
            // Only the reader's deadline times a read out.
            shared.notices.say(&shared.log, "request_timeout", || {
                format!(
                    "client {peer}: sent part of a request and nothing more for {} s; connection closed (said \
                     once a minute while it lasts)",
                    shared.limits.request_timeout_s
                )
            });
        }
        Err(e) => report(shared, peer, "transmission", e),
    }
}

pub(crate) fn report(shared: &Shared, peer: &Peer, phase: &str, e: ConnError) {
    match e {
        ConnError::Protocol(p) => {
            shared.protocol_errors.fetch_add(1, Ordering::Relaxed);
            shared.peer_log.say(&shared.log, Origin::of(peer.ip()), || {
                format!("client {peer}: {p} during {phase}; connection closed")
            });
        }
        ConnError::Io(io) if io.kind() == std::io::ErrorKind::ConnectionReset => {}
        ConnError::Io(io) => shared.peer_log.say(&shared.log, Origin::of(peer.ip()), || {
            format!("client {peer}: I/O error during {phase}: {io}; connection closed")
        }),
        ConnError::Refused(why) => shared
            .notices
            .say(&shared.log, "refused", || format!("client {peer}: {why}; connection closed (said once a minute)")),
        ConnError::Idle | ConnError::Said => {}
    }
}
