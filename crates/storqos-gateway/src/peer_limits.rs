//! Connection limits per client address, and who makes room when the gateway is full.
//!
//! **What it guards.** Every connection holds a file descriptor, a task and buffers,
//! so the gateway takes at most `max_connections` at once. With that one global limit,
//! one host could take them all: 1,024 connections that finish the handshake and send
//! nothing refused every new client for as long as they were held (forever, with no
//! idle timeout), and 1,100 slow handshakes, reopened as the handshake timeout closed
//! them, let 2 of 15 good connections in. So the connections are also counted per
//! client address:
//!
//! - at most `max_connections_per_address` at once from one address (default
//!   [`DEFAULT_MAX_CONNECTIONS_PER_ADDRESS`], an eighth of the default 1,024: eight
//!   addresses are needed to fill the gateway; a host with more disks attached to one
//!   gateway, one connection each, raises it);
//! - at most `max_handshakes_per_address` of them still in their handshake (default
//!   [`DEFAULT_MAX_HANDSHAKES_PER_ADDRESS`]: an honest client opens its connections one
//!   after another, a few round trips each, and a host reconnecting all of its disks
//!   after a restart opens a few dozen at once; a slow-handshake flood gets no more);
//! - when the gateway is full, a newcomer takes the place of the newest **idle**
//!   connection (a handshake in progress, or a connection with nothing in flight: no
//!   request queued, on the backend, or half received, no reply unwritten) of the
//!   address that holds the most connections, as long as that address would still hold
//!   as many as the newcomer's: an address that sits on idle connections gives them up
//!   before another address is refused, and two busy addresses do not take turns
//!   closing each other's connections. The newest goes first: long-lived connections
//!   (a VM's disk) are the oldest. Only when no address can give one up is the
//!   newcomer refused.
//!
//! A refusal or an eviction closes that connection only, with a line logged once a
//! minute. An "address" is an IPv4 address or an IPv6 /64 (one host's usual
//! allocation: a host has many addresses in its /64 for the asking); the clients of the
//! Unix socket are counted together and are not limited per address (who may connect
//! is the socket file's permissions).

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Default `max_connections_per_address`: an eighth of the default `max_connections`.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 128;
/// Default `max_handshakes_per_address`.
pub const DEFAULT_MAX_HANDSHAKES_PER_ADDRESS: usize = 32;

/// Where a connection comes from, as the limits count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    /// An IPv4 address (an IPv4-mapped IPv6 address counts as its IPv4 address).
    V4(Ipv4Addr),
    /// An IPv6 /64: its first 64 bits.
    V6(u64),
    /// A client of the Unix socket.
    Local,
}

impl Origin {
    /// The origin of a client at `ip` (`None`: the Unix socket).
    pub fn of(ip: Option<IpAddr>) -> Origin {
        match ip {
            None => Origin::Local,
            Some(IpAddr::V4(a)) => Origin::V4(a),
            Some(IpAddr::V6(a)) => match a.to_ipv4_mapped() {
                Some(v4) => Origin::V4(v4),
                None => Origin::V6((u128::from(a) >> 64) as u64),
            },
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::V4(a) => write!(f, "{a}"),
            Origin::V6(net) => write!(f, "{}/64", Ipv6Addr::from(u128::from(*net) << 64)),
            Origin::Local => f.write_str("the Unix socket"),
        }
    }
}

/// Whether a connection has nothing in flight (see the module documentation).
pub trait Activity: Send + Sync {
    /// Nothing in flight: the connection may be closed to make room.
    fn is_idle(&self) -> bool;
}

/// The limits: `max_connections`, and per address connections and handshakes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerLimitsConfig {
    /// Connections at once, handshakes included.
    pub max_connections: usize,
    /// Connections at once from one address.
    pub per_address: usize,
    /// Handshakes in progress at once from one address.
    pub handshakes_per_address: usize,
}

/// Why a newcomer was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Its address holds `limit` connections.
    Address {
        /// The address.
        origin: Origin,
        /// `max_connections_per_address`.
        limit: usize,
    },
    /// Its address has `limit` handshakes in progress.
    Handshakes {
        /// The address.
        origin: Origin,
        /// `max_handshakes_per_address`.
        limit: usize,
    },
    /// The gateway holds `limit` connections and none could make room.
    Full {
        /// `max_connections`.
        limit: usize,
    },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Address { origin, limit } => {
                write!(f, "address {origin} has its limit of {limit} connections (max_connections_per_address)")
            }
            Refused::Handshakes { origin, limit } => {
                write!(f, "address {origin} has {limit} handshakes in progress, its limit (max_handshakes_per_address)")
            }
            Refused::Full { limit } => write!(
                f,
                "connection limit of {limit} reached and no address holds an idle connection to give up \
                 (max_connections)"
            ),
        }
    }
}

/// A connection closed to make room for a newcomer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evicted {
    /// The address it came from.
    pub origin: Origin,
    /// How many connections that address held (the closed one included).
    pub held: usize,
}

struct Slot {
    handshaking: bool,
    activity: Option<Arc<dyn Activity>>,
    evict: Arc<Notify>,
}

impl Slot {
    fn is_idle(&self) -> bool {
        match &self.activity {
            None => true,
            Some(a) => a.is_idle(),
        }
    }
}

#[derive(Default)]
struct Address {
    /// Its connections by age (a larger id is newer).
    slots: BTreeMap<u64, Slot>,
    handshaking: usize,
}

#[derive(Default)]
struct State {
    addresses: HashMap<Origin, Address>,
    total: usize,
    next: u64,
}

/// The connections open, by address.
pub struct PeerLimits {
    config: PeerLimitsConfig,
    state: Mutex<State>,
}

/// A connection's place in [`PeerLimits`], given back when dropped.
pub struct Ticket {
    limits: Arc<PeerLimits>,
    origin: Origin,
    id: u64,
    evict: Arc<Notify>,
}

impl PeerLimits {
    /// No connection yet.
    pub fn new(config: PeerLimitsConfig) -> Arc<PeerLimits> {
        Arc::new(PeerLimits { config, state: Mutex::new(State::default()) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.lock().total
    }

    /// Take a place for a newcomer from `origin`, in its handshake: refused at its
    /// address's limits, else admitted, making room when the gateway is full by closing
    /// the newest idle connection of the address that holds the most (returned, to be
    /// logged).
    pub fn admit(self: &Arc<Self>, origin: Origin) -> Result<(Ticket, Option<Evicted>), Refused> {
        let c = self.config;
        let mut st = self.lock();
        let (mine, shaking) = st.addresses.get(&origin).map_or((0, 0), |a| (a.slots.len(), a.handshaking));
        if origin != Origin::Local {
            if mine >= c.per_address {
                return Err(Refused::Address { origin, limit: c.per_address });
            }
            if shaking >= c.handshakes_per_address {
                return Err(Refused::Handshakes { origin, limit: c.handshakes_per_address });
            }
        }
        let mut evicted = None;
        if st.total >= c.max_connections {
            evicted = Some(Self::make_room(&mut st, origin, mine).ok_or(Refused::Full { limit: c.max_connections })?);
        }
        let id = st.next;
        st.next += 1;
        st.total += 1;
        let evict = Arc::new(Notify::new());
        let a = st.addresses.entry(origin).or_default();
        a.handshaking += 1;
        a.slots.insert(id, Slot { handshaking: true, activity: None, evict: evict.clone() });
        Ok((Ticket { limits: self.clone(), origin, id, evict }, evicted))
    }

    /// Close the newest idle connection of the address holding the most connections
    /// that would still hold at least `mine + 1` (the newcomer's after it); `None` when
    /// no address can.
    fn make_room(st: &mut State, newcomer: Origin, mine: usize) -> Option<Evicted> {
        let mut by_size: Vec<(usize, Origin)> =
            st.addresses.iter().filter(|(o, _)| **o != newcomer).map(|(o, a)| (a.slots.len(), *o)).collect();
        by_size.sort_unstable_by(|a, b| b.cmp(a));
        for (held, origin) in by_size {
            if held < mine + 2 {
                return None;
            }
            let a = st.addresses.get_mut(&origin)?;
            let Some(id) = a.slots.iter().rev().find(|(_, s)| s.is_idle()).map(|(id, _)| *id) else { continue };
            if let Some(slot) = a.slots.remove(&id) {
                if slot.handshaking {
                    a.handshaking -= 1;
                }
                slot.evict.notify_one();
            }
            if a.slots.is_empty() {
                st.addresses.remove(&origin);
            }
            st.total -= 1;
            return Some(Evicted { origin, held });
        }
        None
    }

    fn release(&self, origin: Origin, id: u64) {
        let mut st = self.lock();
        let Some(a) = st.addresses.get_mut(&origin) else { return };
        let Some(slot) = a.slots.remove(&id) else { return };
        if slot.handshaking {
            a.handshaking -= 1;
        }
        if a.slots.is_empty() {
            st.addresses.remove(&origin);
        }
        st.total -= 1;
    }
}

impl Ticket {
    /// The handshake is done: the connection no longer counts among its address's
    /// handshakes, and `activity` says from now on whether it is idle.
    pub fn negotiated(&self, activity: Arc<dyn Activity>) {
        let mut st = self.limits.lock();
        let Some(a) = st.addresses.get_mut(&self.origin) else { return };
        let Some(slot) = a.slots.get_mut(&self.id) else { return };
        if slot.handshaking {
            slot.handshaking = false;
            a.handshaking -= 1;
        }
        slot.activity = Some(activity);
    }

    /// Resolves when the gateway closes this connection to make room for another.
    pub async fn evicted(&self) {
        self.evict.notified().await
    }

    /// Where the connection comes from.
    pub fn origin(&self) -> Origin {
        self.origin
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.limits.release(self.origin, self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Busy(AtomicBool);
    impl Activity for Busy {
        fn is_idle(&self) -> bool {
            !self.0.load(Ordering::Relaxed)
        }
    }

    fn ip(last: u8) -> Origin {
        Origin::V4(Ipv4Addr::new(127, 0, 0, last))
    }

    fn limits(max: usize, per: usize, shaking: usize) -> Arc<PeerLimits> {
        PeerLimits::new(PeerLimitsConfig { max_connections: max, per_address: per, handshakes_per_address: shaking })
    }

    #[test]
    fn an_address_gets_its_limit_and_no_more() {
        let l = limits(100, 3, 10);
        let held: Vec<_> = (0..3).map(|_| l.admit(ip(2)).unwrap().0).collect();
        assert_eq!(l.admit(ip(2)).err(), Some(Refused::Address { origin: ip(2), limit: 3 }));
        // Another address is not counted with it.
        let other = l.admit(ip(3)).unwrap().0;
        assert_eq!(l.open(), 4);
        drop(held);
        assert_eq!(l.open(), 1);
        assert!(l.admit(ip(2)).is_ok());
        drop(other);
    }

    #[test]
    fn handshakes_in_progress_are_limited_apart() {
        let l = limits(100, 10, 2);
        let a = l.admit(ip(2)).unwrap().0;
        let _b = l.admit(ip(2)).unwrap().0;
        assert_eq!(l.admit(ip(2)).err(), Some(Refused::Handshakes { origin: ip(2), limit: 2 }));
        // One finishes its handshake: a third may start.
        a.negotiated(Arc::new(Busy(AtomicBool::new(false))));
        let _c = l.admit(ip(2)).unwrap().0;
        assert_eq!(l.open(), 3);
    }

    /// Whether `t` was told to close (without waiting).
    async fn woken(t: &Ticket) -> bool {
        tokio::time::timeout(std::time::Duration::ZERO, t.evicted()).await.is_ok()
    }

    #[tokio::test]
    async fn a_full_gateway_closes_the_newest_idle_connection_of_the_largest_address() {
        let l = limits(6, 4, 4);
        // 127.0.0.2 holds 4 (the newest busy), 127.0.0.3 holds 2: full.
        let mut two = Vec::new();
        for busy in [false, false, false, true] {
            let (t, _) = l.admit(ip(2)).unwrap();
            t.negotiated(Arc::new(Busy(AtomicBool::new(busy))));
            two.push(t);
        }
        let three: Vec<_> = (0..2).map(|_| l.admit(ip(3)).unwrap().0).collect();
        // A newcomer from 127.0.0.1: 127.0.0.2's newest idle connection (its third) goes.
        let (newcomer, evicted) = l.admit(ip(1)).unwrap();
        assert_eq!(evicted, Some(Evicted { origin: ip(2), held: 4 }));
        assert_eq!(l.open(), 6);
        let mut told = Vec::new();
        for t in &two {
            told.push(woken(t).await);
        }
        assert_eq!(told, [false, false, true, false]);
        // Dropping the evicted ticket later changes nothing.
        drop(two.remove(2));
        assert_eq!(l.open(), 6);
        // 127.0.0.2 (3) and 127.0.0.3 (2) against 127.0.0.1 (1): 127.0.0.2 gives one more.
        let (_n2, evicted) = l.admit(ip(1)).unwrap();
        assert_eq!(evicted, Some(Evicted { origin: ip(2), held: 3 }));
        // Now 2, 2, 2: nobody would still hold as many as the newcomer; refused.
        assert_eq!(l.admit(ip(1)).err(), Some(Refused::Full { limit: 6 }));
        // A fourth address: 127.0.0.3's handshakes are idle, the newest goes.
        let (_n4, evicted) = l.admit(ip(4)).unwrap();
        assert_eq!(evicted.map(|e| e.held), Some(2));
        assert!(woken(&three[1]).await && !woken(&three[0]).await);
        drop(newcomer);
    }

    #[test]
    fn busy_connections_are_never_closed_to_make_room() {
        let l = limits(2, 4, 4);
        let held: Vec<_> = (0..2)
            .map(|_| {
                let (t, _) = l.admit(ip(2)).unwrap();
                t.negotiated(Arc::new(Busy(AtomicBool::new(true))));
                t
            })
            .collect();
        assert_eq!(l.admit(ip(1)).err(), Some(Refused::Full { limit: 2 }));
        drop(held);
    }

    #[test]
    fn origins_group_ipv6_by_64_and_map_ipv4() {
        let a: IpAddr = "2001:db8:1:2::5".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::5".parse().unwrap();
        assert_eq!(Origin::of(Some(a)), Origin::of(Some(b)));
        assert_ne!(Origin::of(Some(a)), Origin::of(Some(c)));
        assert_eq!(Origin::of(Some(a)).to_string(), "2001:db8:1:2::/64");
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        assert_eq!(Origin::of(Some(mapped)), ip(2));
        assert_eq!(Origin::of(None).to_string(), "the Unix socket");
        // The Unix socket's clients are not limited per address.
        let l = limits(10, 1, 1);
        let _x = l.admit(Origin::Local).unwrap();
        let _y = l.admit(Origin::Local).unwrap();
    }
}
