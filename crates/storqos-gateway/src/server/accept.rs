//! The accept loop: one task per connection until a stop condition fires (or a drain
//! empties the gateway), each newcomer given a place among the connections first.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::connection::connection;
use super::shared::Shared;
use super::signals::{hangups, stop_signal, Signals};
use crate::peer_limits::{Origin, Ticket};
use crate::transport::{Listener, Peer};

/// The accept loop: one task per connection until a stop condition fires, then every
/// connection is closed.
pub(crate) async fn serve(
    listener: Listener,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    duration: Option<Duration>,
    mut signals: Signals,
) {
    #[cfg(unix)]
    let mut hangup = signals.hangup.take();
    let stopped = stop_signal(stop, duration, signals);
    tokio::pin!(stopped);
    let mut conns = JoinSet::new();
    // How often a drain is noticed when nothing else happens.
    let mut drain_tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) if shared.draining.load(Ordering::Relaxed) => drop(stream),
                Ok((stream, peer)) => {
                    let Some(ticket) = take_place(&shared, &peer) else {
                        drop(stream);
                        continue;
                    };
                    shared.connections.fetch_add(1, Ordering::Relaxed);
                    shared.open.fetch_add(1, Ordering::Relaxed);
                    conns.spawn(connection(stream, peer, ticket, shared.clone()));
                }
                Err(e) => {
                    // Out of file descriptors, most often: wait a little, say it once a minute.
                    shared.notices.say(&shared.log, "accept", || format!(
                        "accept failed: {e} (said once a minute while it lasts)"
                    ));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = drain_tick.tick() => {}
            _ = hangups(&mut hangup) => {
                // The embedder (storqos serve) reloads its configuration file and says how it went.
                shared.hangup.store(true, Ordering::Relaxed);
            }
        }
        if conns.is_empty() && shared.draining.load(Ordering::Relaxed) {
            (shared.log)("drained: no connection is open; stopping");
            break;
        }
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}

/// A newcomer's place among the connections (its address's limits, the gateway's; a
/// full gateway closes an idle connection of the address holding the most to make
/// room), or `None`, said once a minute, when it is refused.
pub(crate) fn take_place(shared: &Shared, peer: &Peer) -> Option<Ticket> {
    use crate::peer_limits::Refused;
    match shared.peers.admit(Origin::of(peer.ip())) {
        Ok((ticket, evicted)) => {
            if let Some(e) = evicted {
                shared.notices.say(&shared.log, "evicted", || {
                    format!(
                        "connection limit of {} reached: closed the newest idle connection of {} (which held {}) \
                         to make room for {peer} (said once a minute while it lasts)",
                        shared.limits.max_connections, e.origin, e.held
                    )
                });
            }
            Some(ticket)
        }
        Err(why) => {
            let key = match why {
                Refused::Address { .. } => "max_connections_per_address",
                Refused::Handshakes { .. } => "max_handshakes_per_address",
                Refused::Full { .. } => "max_connections",
            };
            shared.notices.say(&shared.log, key, || {
                format!("client {peer}: {why}: connection refused (said once a minute while it lasts)")
            });
            None
        }
    }
}
