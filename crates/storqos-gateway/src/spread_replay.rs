//! Replay of a trace over several NBD servers at once, each tenant's requests spread over
//! them by the caller's placement (`storqos replay TRACE URI --spread URI2 ...`), with
//! dmClock's client side (Gulati, Merchant & Varman, OSDI 2010, §4): each tenant has one
//! [`ServiceTracker`], which counts its completions per server and phase, and each
//! request carries the (δ, ρ) it yields through storqos' NBD extension
//! ([`crate::dmclock_wire`]) to the servers that took it. A server that did not (another
//! NBD server, or `dmclock: false`) gets plain NBD.
//!
//! **Timing.** Open loop, as [`crate::local_replay`]: request `i` is due `at_ns[i]` after
//! a start shared by all tenants ([`START_MARGIN`] after the last connection is up). One
//! connection per (tenant, server) the trace uses, each with a thread that sends its
//! requests and one that reads its replies. The sender sleeps until [`SPIN_NS`] before a
//! request's time, then spins, and sends it whatever is in flight, up to `depth` on the
//! connection (a request due while `depth` are in flight waits for a reply; one sent more
//! than [`LATE_NS`] late counts in [`SpreadLog::late`]). A connection's requests go out in
//! trace order; a request waiting for room at one server does not hold back the tenant's
//! requests to the others, as a client of several servers sends to each on its own (one
//! sender per tenant would leave a gateway idle while another's window is full, and
//! dmClock's reports, charged at a gateway that had drained, would cost the tenant up to
//! a fifth of its limit). The reader times each request (issue to reply read) and tells
//! the tenant's tracker in which phase the server served it.
//!
//! Offsets wrap into each export as the NBD replay does (an offset past the end moves to
//! its remainder, and back so that the request ends inside); writes write the byte 0xA5.

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Condvar, Mutex};
use std::time::{Duration, Instant};

use storqos_core::schedulers::dmclock::{ServedBy, ServiceTracker};

use crate::dmclock_wire::*;
use crate::local_replay::{LATE_NS, SPIN_NS, START_MARGIN};
use crate::nbd_client::connect;
use crate::protocol::*;

/// The requests, in trace order (column by column).
#[derive(Clone, Debug, Default)]
pub struct SpreadRequests {
    /// Due time after the start (ns), non-decreasing per tenant.
    pub at_ns: Vec<u64>,
    /// Tenant (an index into the targets).
    pub tenant: Vec<u32>,
    /// Server (an index into the tenant's targets).
    pub server: Vec<u32>,
    /// Byte offset.
    pub offset: Vec<u64>,
    /// Bytes (1 ..= 32 MiB).
    pub size: Vec<u32>,
    /// A read (else a write).
    pub is_read: Vec<bool>,
}

/// One server as a tenant sees it: its address and the tenant's export there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `HOST:PORT`.
    pub addr: String,
    /// The export's name.
    pub export: String,
}

/// How to replay.
#[derive(Clone, Debug)]
pub struct SpreadOptions {
    /// Ask each server for the dmClock extension.
    pub dmclock: bool,
    /// Most requests in flight per connection.
    pub depth: usize,
    /// Give up when a connection's server has not answered for this long.
    pub timeout: Duration,
}

impl Default for SpreadOptions {
    fn default() -> Self {
        SpreadOptions { dmclock: true, depth: 64, timeout: Duration::from_secs(60) }
    }
}

/// What happened, per request and per connection.
#[derive(Clone, Debug, Default)]
pub struct SpreadLog {
    /// When each request was sent (ns after the start).
    pub issue_ns: Vec<u64>,
    /// When its reply was read (ns after the start).
    pub finish_ns: Vec<u64>,
    /// Its NBD error (0: none).
    pub error: Vec<u32>,
    /// The server said it served it in the reservation phase.
    pub reservation: Vec<bool>,
    /// Per tenant, per server: the server took the dmClock extension (`None`: the
    /// trace sends that tenant nothing there).
    pub dmclock: Vec<Vec<Option<bool>>>,
    /// Requests sent more than [`LATE_NS`] after their time.
    pub late: u64,
    /// Requests whose offset was wrapped into their export.
    pub wrapped: u64,
}

/// In-flight requests of one connection, and its bound.
struct Window {
    inflight: Mutex<usize>,
    freed: Condvar,
}

/// What a reply said.
struct Done {
    index: usize,
    finish: u64,
    error: u32,
    reservation: bool,
}

/// The first failure, which stops every thread.
#[derive(Default)]
struct Failure {
    failed: AtomicBool,
    why: Mutex<Option<String>>,
}

impl Failure {
    fn fail(&self, why: String) {
        if let Ok(mut w) = self.why.lock() {
            w.get_or_insert(why);
        }
        self.failed.store(true, Ordering::SeqCst);
    }
    fn is(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }
}

fn ns_since(start: Instant) -> u64 {
    Instant::now().saturating_duration_since(start).as_nanos() as u64
}

/// Replay `reqs` over `targets[tenant][server]`; `Err` says in words what failed (a
/// connection refused, a server that stopped answering, a request that does not fit).
pub fn replay_spread(
    targets: &[Vec<Target>],
    reqs: &SpreadRequests,
    opts: &SpreadOptions,
) -> Result<SpreadLog, String> {
    let n = reqs.at_ns.len();
    let cols = [reqs.tenant.len(), reqs.server.len(), reqs.offset.len(), reqs.size.len(), reqs.is_read.len()];
    if cols.iter().any(|&l| l != n) {
        return Err(format!("request columns of different lengths: {n} times, others {cols:?}"));
    }
    if opts.depth == 0 {
        return Err("the depth must be at least 1".into());
    }
    // The connections the trace needs, in (tenant, server) order.
    let mut pairs = BTreeSet::new();
    for i in 0..n {
        let (t, s) = (reqs.tenant[i], reqs.server[i]);
        if targets.get(t as usize).and_then(|v| v.get(s as usize)).is_none() {
            return Err(format!("request {i}: tenant {t} has no server {s}"));
        }
        if reqs.size[i] == 0 || reqs.size[i] > MAX_IO_BYTES {
            return Err(format!("request {i}: {} bytes (1 to {} MiB)", reqs.size[i], MAX_IO_BYTES >> 20));
        }
        pairs.insert((t, s));
    }
    let keys: Vec<(u32, u32)> = pairs.into_iter().collect();
    let index: HashMap<(u32, u32), usize> = keys.iter().enumerate().map(|(j, &k)| (k, j)).collect();
    // Each request's connection, each connection's requests.
    let conn_of: Vec<usize> = (0..n).map(|i| index[&(reqs.tenant[i], reqs.server[i])]).collect();
    let mut per_conn: Vec<Vec<usize>> = vec![Vec::new(); keys.len()];
    for (i, &j) in conn_of.iter().enumerate() {
        per_conn[j].push(i);
    }
    let mut conns = Vec::with_capacity(keys.len());
    let mut dmclock_seen: Vec<Vec<Option<bool>>> = targets.iter().map(|v| vec![None; v.len()]).collect();
    for &(t, s) in &keys {
        let target = &targets[t as usize][s as usize];
        let conn = connect(&target.addr, &target.export, opts.dmclock, opts.timeout).map_err(|e| e.to_string())?;
        dmclock_seen[t as usize][s as usize] = Some(conn.dmclock);
        conns.push(conn);
    }
    // Offsets into each connection's export.
    let mut offset = reqs.offset.clone();
    let mut wrapped = 0u64;
    for i in 0..n {
        let size = conns[conn_of[i]].size;
        let len = u64::from(reqs.size[i]);
        if len > size {
            return Err(format!("request {i}: {len} bytes, more than the {size}-byte export"));
        }
        if offset[i] + len > size {
            offset[i] %= size;
            if offset[i] + len > size {
                offset[i] = size - len;
            }
            wrapped += 1;
        }
    }
    let trackers: Vec<Mutex<ServiceTracker>> = targets.iter().map(|_| Mutex::new(ServiceTracker::new())).collect();
    let windows: Vec<Window> =
        conns.iter().map(|_| Window { inflight: Mutex::new(0), freed: Condvar::new() }).collect();
    let failure = Failure::default();
    let (tx, rx) = mpsc::channel::<Done>();
    let start = Instant::now() + START_MARGIN;
    let mut issue = vec![0u64; n];
    let mut late = 0u64;
    std::thread::scope(|scope| -> Result<(), String> {
        // A reader per connection.
        for (j, idx) in per_conn.iter().enumerate() {
            let mut rd = conns[j].stream.try_clone().map_err(|e| format!("socket: {e}"))?;
            let (dm, server) = (conns[j].dmclock, keys[j].1);
            let (tx, window, failure) = (tx.clone(), &windows[j], &failure);
            let tenant = keys[j].0 as usize;
            let tracker = &trackers[tenant];
            let (sizes, reads) = (&reqs.size, &reqs.is_read);
            let addr = targets[tenant][server as usize].addr.clone();
            let count = idx.len();
            scope.spawn(move || {
                let mut sink = vec![0u8; 1 << 16];
                for _ in 0..count {
                    let mut h = [0u8; SIMPLE_REPLY_LEN + REPLY_TRAILER_LEN];
                    let hl = if dm { h.len() } else { SIMPLE_REPLY_LEN };
                    if let Err(e) = rd.read_exact(&mut h[..hl]) {
                        if !failure.is() {
                            failure.fail(format!("{addr}: no reply ({e})"));
                        }
                        return;
                    }
                    let reply = match SimpleReply::decode(&h[..SIMPLE_REPLY_LEN]) {
                        Ok(r) => r,
                        Err(e) => return failure.fail(format!("{addr}: {e}")),
                    };
                    let i = reply.cookie as usize;
                    if i >= sizes.len() {
                        return failure.fail(format!("{addr}: a reply to request {i}, which was not sent"));
                    }
                    if reply.error == 0 && reads[i] {
                        let mut left = sizes[i] as usize;
                        while left > 0 {
                            let k = left.min(sink.len());
                            if let Err(e) = rd.read_exact(&mut sink[..k]) {
                                return failure.fail(format!("{addr}: read data cut short ({e})"));
                            }
                            left -= k;
                        }
                    }
                    let finish = ns_since(start);
                    let reservation = dm && decode_reply_trailer(&h[SIMPLE_REPLY_LEN..].try_into().expect("4 bytes"));
                    if dm {
                        let by = if reservation { ServedBy::Reservation } else { ServedBy::Weight };
                        if let Ok(mut t) = tracker.lock() {
                            t.completed(server, by);
                        }
                    }
                    if let Ok(mut k) = window.inflight.lock() {
                        *k -= 1;
                    }
                    window.freed.notify_one();
                    let _ = tx.send(Done { index: i, finish, error: reply.error, reservation });
                }
            });
        }
        drop(tx);
        // A sender per connection.
        let mut issuers = Vec::new();
        for (j, mine) in per_conn.iter().enumerate() {
            let mut w = conns[j].stream.try_clone().map_err(|e| format!("socket: {e}"))?;
            let (window, failure, offset) = (&windows[j], &failure, &offset);
            let (server, dm) = (keys[j].1, conns[j].dmclock);
            let tracker = &trackers[keys[j].0 as usize];
            let peer = &targets[keys[j].0 as usize][server as usize].addr;
            let depth = opts.depth;
            issuers.push(scope.spawn(move || -> (Vec<(usize, u64)>, u64) {
                let mut out = Vec::with_capacity(mine.len());
                let mut late = 0u64;
                let payload_byte = 0xA5u8;
                let mut payload: Vec<u8> = Vec::new();
                for &i in mine {
                    let due = reqs.at_ns[i];
                    loop {
                        if failure.is() {
                            return (out, late);
                        }
                        let now = ns_since(start);
                        if now + SPIN_NS < due {
                            std::thread::sleep(Duration::from_nanos(due - now - SPIN_NS));
                        } else if now < due {
                            std::thread::yield_now();
                        } else {
                            break;
                        }
                    }
                    {
                        let Ok(mut k) = window.inflight.lock() else { return (out, late) };
                        while *k >= depth && !failure.is() {
                            k = match window.freed.wait_timeout(k, Duration::from_millis(50)) {
                                Ok((k, _)) => k,
                                Err(_) => return (out, late),
                            };
                        }
                        *k += 1;
                    }
                    let command = if reqs.is_read[i] { Command::Read } else { Command::Write };
                    let h =
                        RequestHeader { flags: 0, command, cookie: i as u64, offset: offset[i], length: reqs.size[i] };
                    let mut msg = h.encode().to_vec();
                    if dm {
                        let d = tracker.lock().map(|mut t| t.params_for(server)).unwrap_or_default();
                        msg.extend(encode_request_trailer(d));
                    }
                    let at = ns_since(start);
                    let mut sent = w.write_all(&msg);
                    if sent.is_ok() && command == Command::Write {
                        payload.resize(reqs.size[i] as usize, payload_byte);
                        sent = w.write_all(&payload);
                    }
                    if let Err(e) = sent {
                        failure.fail(format!("{peer}: sending: {e}"));
                        return (out, late);
                    }
                    late += u64::from(at > due + LATE_NS);
                    out.push((i, at));
                }
                (out, late)
            }));
        }
        for h in issuers {
            let (sent, l) = h.join().map_err(|_| "an issuing thread panicked".to_string())?;
            late += l;
            for (i, at) in sent {
                issue[i] = at;
            }
        }
        if failure.is() {
            // Unblock the readers of requests never sent.
            for c in &conns {
                let _ = c.stream.shutdown(Shutdown::Both);
            }
        }
        Ok(())
    })?;
    if let Some(why) = failure.why.lock().ok().and_then(|w| w.clone()) {
        return Err(why);
    }
    let mut log = SpreadLog {
        issue_ns: issue,
        finish_ns: vec![0; n],
        error: vec![0; n],
        reservation: vec![false; n],
        dmclock: dmclock_seen,
        late,
        wrapped,
    };
    for d in rx.iter() {
        log.finish_ns[d.index] = d.finish;
        log.error[d.index] = d.error;
        log.reservation[d.index] = d.reservation;
    }
    for c in &mut conns {
        let disc = RequestHeader { flags: 0, command: Command::Disc, cookie: u64::MAX, offset: 0, length: 0 };
        let mut msg = disc.encode().to_vec();
        if c.dmclock {
            msg.extend([0u8; REQUEST_TRAILER_LEN]);
        }
        let _ = c.stream.write_all(&msg);
        let _ = c.stream.shutdown(Shutdown::Both);
    }
    Ok(log)
}
