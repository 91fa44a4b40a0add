//! The gateway's log lines that something outside it could repeat without end, and
//! their bounds.
//!
//! - [`Notices`]: a condition that lasts (a limit reached, `accept` failing) is said
//!   once per [`NOTICE_EVERY`] while it lasts.
//! - [`PeerLog`]: lines about what one client did (a malformed packet, an I/O error on
//!   its connection). A client that opened connection after connection and sent
//!   garbage on each once wrote 1 MB/s of log. So each client address may have at most
//!   [`PEER_LINES`] lines per [`PEER_INTERVAL`], and all the addresses together
//!   [`ALL_PEER_LINES`]; at the end of an interval in which lines were held back, one
//!   line says how many, about how many addresses, and which address had the most. An
//!   address is counted as [`Origin`] counts it (an IPv4 address, an IPv6 /64); at most
//!   [`MAX_TRACKED_ADDRESSES`] are tracked in one interval, and beyond them the others
//!   share one budget: an attacker with many addresses gets no more lines, nor memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::peer_limits::Origin;

/// Where one-line log messages go.
pub type Logger = Arc<dyn Fn(&str) + Send + Sync>;

/// How often a repeated condition (a limit reached, `accept` failing) is logged.
pub const NOTICE_EVERY: Duration = Duration::from_secs(60);

/// Log lines that would repeat while a condition lasts, said once per [`NOTICE_EVERY`].
#[derive(Default)]
pub struct Notices {
    last: Mutex<HashMap<&'static str, Instant>>,
}

impl Notices {
    /// Log `msg` (built only when it is logged) unless `key` was logged within
    /// [`NOTICE_EVERY`].
    pub fn say(&self, log: &Logger, key: &'static str, msg: impl FnOnce() -> String) {
        let now = Instant::now();
        let due = match self.last.lock() {
            Ok(mut last) => match last.get(key) {
                Some(t) if now.duration_since(*t) < NOTICE_EVERY => false,
                _ => {
                    last.insert(key, now);
                    true
                }
            },
            Err(_) => true,
        };
        if due {
            log(&msg());
        }
    }
}

/// Lines about one client address per [`PEER_INTERVAL`]: the Linux kernel's default
/// for its own rate-limited messages (`printk_ratelimit`: a burst of 10 per 5 s).
pub const PEER_LINES: u32 = 10;
/// The interval of [`PEER_LINES`] and [`ALL_PEER_LINES`] (the kernel's 5 s).
pub const PEER_INTERVAL: Duration = Duration::from_secs(5);
/// Lines about all client addresses together per [`PEER_INTERVAL`]: ten addresses'
/// worth, about 3 KB/s of log at most.
pub const ALL_PEER_LINES: u32 = 10 * PEER_LINES;
/// Client addresses tracked in one interval (a few dozen bytes each); the addresses
/// beyond them share one budget of [`PEER_LINES`].
pub const MAX_TRACKED_ADDRESSES: usize = 4096;

/// What one address (or the addresses past [`MAX_TRACKED_ADDRESSES`]) logged this interval.
#[derive(Clone, Copy, Default)]
struct Count {
    said: u32,
    held: u64,
}

/// One interval's counts.
struct Interval {
    start: Instant,
    peers: HashMap<Origin, Count>,
    /// The addresses past [`MAX_TRACKED_ADDRESSES`], together.
    others: Count,
    said: u32,
}

impl Interval {
    fn new(start: Instant) -> Interval {
        Interval { start, peers: HashMap::new(), others: Count::default(), said: 0 }
    }

    /// The line that says what this interval held back, if it held back anything.
    fn summary(&self, now: Instant) -> Option<String> {
        let held: u64 = self.peers.values().map(|c| c.held).sum::<u64>() + self.others.held;
        if held == 0 {
            return None;
        }
        let addresses = self.peers.values().filter(|c| c.held > 0).count();
        let (most, most_held) = self
            .peers
            .iter()
            .max_by_key(|(o, c)| (c.held, std::cmp::Reverse(**o)))
            .map_or((None, 0), |(o, c)| (Some(*o), c.held));
        let others = if self.others.held > 0 {
            format!(" and {} about addresses past the {MAX_TRACKED_ADDRESSES} tracked", self.others.held)
        } else {
            String::new()
        };
        let top = match most {
            Some(o) if most_held > 0 => format!(" (the most, {most_held}, about {o})"),
            _ => String::new(),
        };
        Some(format!(
            "{held} line(s) about clients held back over the last {:.1} s: {} about {addresses} address(es){top}{others} \
             (at most {PEER_LINES} lines per address and {ALL_PEER_LINES} in all per {} s)",
            now.duration_since(self.start).as_secs_f64(),
            held - self.others.held,
            PEER_INTERVAL.as_secs()
        ))
    }
}

/// Lines about clients, rate-limited per client address (see the module's doc).
pub struct PeerLog {
    now: Mutex<Interval>,
}

impl Default for PeerLog {
    fn default() -> Self {
        PeerLog { now: Mutex::new(Interval::new(Instant::now())) }
    }
}

impl PeerLog {
    /// Log `msg` (built only when it is logged) about the client at `origin`, unless
    /// its address, or all of them, have had their lines this interval.
    pub fn say(&self, log: &Logger, origin: Origin, msg: impl FnOnce() -> String) {
        for line in self.say_at(Instant::now(), origin, msg) {
            log(&line);
        }
    }

    /// Say what the interval that ended held back (call it every [`PEER_INTERVAL`];
    /// `all`: whatever it held so far, as the gateway stops).
    pub fn flush(&self, log: &Logger, all: bool) {
        if let Some(line) = self.flush_at(Instant::now(), all) {
            log(&line);
        }
    }

    /// [`PeerLog::say`] at `now`: the lines to log.
    fn say_at(&self, now: Instant, origin: Origin, msg: impl FnOnce() -> String) -> Vec<String> {
        let Ok(mut cur) = self.now.lock() else { return vec![msg()] };
        let mut out: Vec<String> = Self::roll(&mut cur, now, false).into_iter().collect();
        let tracked = cur.peers.len() < MAX_TRACKED_ADDRESSES || cur.peers.contains_key(&origin);
        let all_said = cur.said;
        let count = if tracked { cur.peers.entry(origin).or_default() } else { &mut cur.others };
        if count.said < PEER_LINES && all_said < ALL_PEER_LINES {
            count.said += 1;
            let last = count.said == PEER_LINES;
            cur.said += 1;
            let mut line = msg();
            if last {
                line.push_str(&format!(
                    " (the {PEER_LINES}th line about this address in {} s: more are held back and counted)",
                    PEER_INTERVAL.as_secs()
                ));
            }
            out.push(line);
        } else {
            count.held += 1;
        }
        out
    }

    /// [`PeerLog::flush`] at `now`.
    fn flush_at(&self, now: Instant, all: bool) -> Option<String> {
        let mut cur = self.now.lock().ok()?;
        Self::roll(&mut cur, now, all)
    }

    /// Start a new interval if the current one is over (or `all`), with its summary.
    fn roll(cur: &mut Interval, now: Instant, all: bool) -> Option<String> {
        if !all && now.duration_since(cur.start) < PEER_INTERVAL {
            return None;
        }
        let said = cur.summary(now);
        *cur = Interval::new(now);
        said
    }

    /// Addresses tracked in the current interval.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.now.lock().map(|c| c.peers.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn v4(n: u32) -> Origin {
        Origin::of(Some(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n))))
    }

    /// Lines of `n` messages from `origin` at `at`, then the lines of a flush at `flush`.
    fn flood(log: &PeerLog, at: Instant, origin: Origin, n: usize) -> Vec<String> {
        (0..n).flat_map(|i| log.say_at(at, origin, || format!("client {origin}: bad magic {i}"))).collect()
    }

    #[test]
    fn one_address_gets_its_lines_then_a_count_of_the_rest() {
        let t0 = Instant::now();
        let log = PeerLog { now: Mutex::new(Interval::new(t0)) };
        let lines = flood(&log, t0, v4(1), 1000);
        assert_eq!(lines.len(), PEER_LINES as usize, "{lines:?}");
        assert!(lines[9].contains("more are held back and counted"), "{}", lines[9]);
        assert!(!lines[8].contains("held back"));
        // Before the interval ends, nothing more is said.
        assert_eq!(log.flush_at(t0 + Duration::from_secs(4), false), None);
        let summary = log.flush_at(t0 + PEER_INTERVAL, false).expect("a summary");
        assert!(summary.starts_with("990 line(s) about clients held back over the last 5.0 s"), "{summary}");
        assert!(summary.contains("about 1 address(es) (the most, 990, about 10.0.0.1)"), "{summary}");
        // A new interval: the address has its lines again, and nothing is left to say.
        let next = flood(&log, t0 + PEER_INTERVAL, v4(1), 3);
        assert_eq!(next.len(), 3);
        assert_eq!(log.flush_at(t0 + 2 * PEER_INTERVAL, false), None);
    }

    #[test]
    fn a_line_after_the_interval_says_the_count_first() {
        let t0 = Instant::now();
        let log = PeerLog { now: Mutex::new(Interval::new(t0)) };
        flood(&log, t0, v4(1), 15);
        let later = flood(&log, t0 + Duration::from_secs(7), v4(2), 1);
        assert_eq!(later.len(), 2, "{later:?}");
        assert!(later[0].starts_with("5 line(s) about clients held back over the last 7.0 s"), "{}", later[0]);
        assert!(later[1].contains("10.0.0.2"));
    }

    #[test]
    fn many_addresses_get_no_more_lines_nor_memory() {
        let t0 = Instant::now();
        let log = PeerLog { now: Mutex::new(Interval::new(t0)) };
        let n = 3 * MAX_TRACKED_ADDRESSES as u32;
        let mut said = 0;
        for a in 0..n {
            said += flood(&log, t0, v4(a), 2).len();
        }
        assert_eq!(said, ALL_PEER_LINES as usize);
        assert_eq!(log.tracked(), MAX_TRACKED_ADDRESSES);
        let summary = log.flush_at(t0 + PEER_INTERVAL, false).expect("a summary");
        let held = 2 * u64::from(n) - u64::from(ALL_PEER_LINES);
        assert!(summary.starts_with(&format!("{held} line(s) about clients held back")), "{summary}");
        let past = 2 * (n as usize - MAX_TRACKED_ADDRESSES);
        assert!(summary.contains(&format!("and {past} about addresses past the 4096 tracked")), "{summary}");
        assert_eq!(log.tracked(), 0, "the interval's table is dropped with it");
    }

    #[test]
    fn the_flush_at_stop_says_what_was_held_so_far() {
        let t0 = Instant::now();
        let log = PeerLog { now: Mutex::new(Interval::new(t0)) };
        flood(&log, t0, Origin::Local, 12);
        let s = log.flush_at(t0 + Duration::from_millis(500), true).expect("a summary");
        assert!(s.starts_with("2 line(s) about clients held back over the last 0.5 s"), "{s}");
        assert!(s.contains("about the Unix socket"), "{s}");
    }
}
