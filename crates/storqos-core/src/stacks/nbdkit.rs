//! nbdkit's rate filter (`nbdkit --filter=rate ... rate=BITSPERSEC`), as nbdkit 1.42.3 runs it
//! (Debian trixie's nbdkit): `filters/rate/rate.c` and `filters/rate/bucket.c`. Both files are
//! the same from 1.33.11 to 1.42.3 (only the man page gained a link), so nbdkit 1.36
//! (the 1.36 of bookworm-backports) limits exactly as modelled here.
//!
//! ## The buckets (`bucket.c`)
//!
//! A token bucket counted in **bits** (`bucket_init`): a rate `R` (bits per second, a whole
//! number), a capacity of `R · burstiness` bits (the product truncated to whole bits;
//! `burstiness=SECS`, default [`DEFAULT_BURSTINESS`] seconds), a level, and the wall-clock
//! time of the last refill at `gettimeofday`'s microsecond resolution. **Buckets start
//! full**, at the server's start (the export's buckets in `.get_ready`).
//!
//! Running the bucket for a request that still wants `n` bits at time `t` (`bucket_run`):
//!
//! 1. Refill: `floor(R · µs / 10^6)` bits for the whole microseconds since the last refill,
//!    at most what fills the bucket; the last refill becomes `t` (the fraction of a bit
//!    the truncation dropped is lost).
//! 2. If the level holds `n` bits they are taken and the request goes on.
//! 3. Otherwise the request takes **every bit there is** (the level drops to 0), still
//!    wants the rest, and its thread sleeps `floor(10^9 · rest / R)` ns, then runs the
//!    bucket again for the rest (`maybe_sleep`'s loop), until nothing is left.
//!
//! So a request waits for its whole size (a 64 KiB request costs 16 times a 4 KiB one),
//! taking what it can each time it wakes, and a request larger than the bucket still
//! passes (at a lower rate: what overflows the bucket while it sleeps is lost).
//!
//! ## Reads and writes (`rate.c`)
//!
//! `.pread` charges `8 · count` bits to the **read** bucket, `.pwrite` to the **write**
//! bucket; each bucket has the full rate, so a tenant reading and writing at once moves up
//! to twice `rate`. Zero, trim, flush and cache are not limited (the simulator's requests
//! are reads and writes). `rate=` has one read and one write bucket for the whole server,
//! `connection-rate=` one pair per connection; a request first waits in the server's
//! bucket, then in its connection's.
//!
//! ## The model
//!
//! One tenant is one nbdkit server (one export) with `rate = 8 ·` [`NbdkitRateSpec::bps`].
//! With one connection per tenant, `connection-rate=R` alone limits exactly as `rate=R`
//! (the connection's pair of buckets is then the only one), so both are this model. A
//! tenant without a rate is not limited (nbdkit with neither option: the filter is off).
//!
//! [`NbdkitRate`] is a [`Throttle`]: the lanes are (tenant, direction) — reads and writes
//! wait in different buckets and nbdkit's worker threads serve them independently; with
//! one thread per connection (`--threads 1`, [`NbdkitRateSpec::threads`]) one lane per
//! tenant, since a request sleeping in a bucket then holds up the next whatever it is — and
//! the head of a lane runs the bucket each time it is asked ([`Throttled`] asks again at
//! the time the head said it sleeps until), carrying what it still wants from one wake to
//! the next, exactly `maybe_sleep`'s loop.
//!
//! ## Not modelled
//!
//! - Several requests of one lane sleeping at once: nbdkit runs up to `--threads`
//!   (default 16) requests of a connection in parallel, and requests that sleep in the
//!   same bucket take its tokens in the order they wake, so they may pass out of order.
//!   Here a lane is FIFO and only its head takes tokens; over a backlog the rate is the
//!   same, the order is arrival order. Measured against nbdkit 1.32 with a backlog of a
//!   few hundred requests per tenant (docs/stacks.md): with 16 threads on one
//!   connection the IOPS agree within 0.1 % and p99 within 6 %, but the live p50 is 20
//!   to 25 times the model's (requests that would pass at once wait among the sleepers);
//!   with `--threads 1` a tenant's requests go in arrival order and IOPS and p99 agree
//!   within 0.1 %.
//! - Sleeps that overrun (`nanosleep` wakes a little late on a loaded host), the time a
//!   request takes between waking and running the bucket, dynamic rates (`rate-file=`,
//!   `connection-rate-file=`), `rate=` and `connection-rate=` together, and several
//!   connections per export.
//! - 64-bit overflow: nbdkit multiplies `R · µs` and `10^9 · bits` in 64 bits (the first
//!   wraps after an idle time above `2^64 / R` µs, e.g. half an hour at 10 Gbit/s); the
//!   model computes both in 128 bits.
//! - A zero-length sleep (a rate above `10^9` bits per missing bit): nbdkit spins until
//!   the next microsecond, when the refill has the bits; the model wakes the head then.

use serde::Deserialize;

use crate::error::{config, Result};
use crate::request::{Op, Request, MAX_TENANTS};
use crate::stacks::throttled::{Throttle, Throttled};
use crate::time::{Nanos, NS_PER_SEC, NS_PER_US};

/// Policy name in reports.
pub const NAME: &str = "nbdkit-rate";

/// Bucket capacity in seconds of the rate when `burstiness=` is not given (`rate.c`).
pub const DEFAULT_BURSTINESS: f64 = 2.0;

/// Worker threads per connection when `--threads` is not given (nbdkit's default).
pub const DEFAULT_THREADS: u32 = 16;

/// The filter counts 8 bits per byte of a request (no framing overhead).
pub const BITS_PER_BYTE: u64 = 8;

/// The largest rate nbdkit parses, bits per second (`nbdkit_parse_size` returns an
/// `int64_t`).
pub const RATE_MAX: u64 = i64::MAX as u64;

/// Microseconds per second (`bucket_run` refills per whole microsecond).
const US_PER_SEC: u128 = 1_000_000;

/// One of nbdkit's token buckets (`struct bucket`), in bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    rate: u64,
    capacity: u64,
    level: u64,
    /// Time of the last refill, whole microseconds (`gettimeofday`).
    last_us: u64,
}

impl Bucket {
    /// A bucket of `rate` bits/s (> 0) holding `burstiness` seconds of it, full, created
    /// at `now` (`bucket_init`).
    pub fn new(rate: u64, burstiness: f64, now: Nanos) -> Self {
        // The product is a double, converted to whole bits by truncation.
        let capacity = (rate as f64 * burstiness) as u64;
        Bucket { rate, capacity, level: capacity, last_us: now / NS_PER_US }
    }

    /// The rate, bits per second.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// The capacity, bits.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The level at the last refill, bits.
    pub fn level(&self) -> u64 {
        self.level
    }

    /// Run the bucket for a request that still wants `bits` (> 0) at `now`
    /// (`bucket_run`): `(0, 0)` when it got them all, else the bits it still wants and how
    /// long (ns) it sleeps before asking again.
    pub fn run(&mut self, bits: u64, now: Nanos) -> (u64, Nanos) {
        let now_us = now / NS_PER_US;
        let elapsed = now_us.saturating_sub(self.last_us);
        let add = (self.rate as u128 * elapsed as u128 / US_PER_SEC).min((self.capacity - self.level) as u128);
        self.level += add as u64;
        self.last_us = now_us;
        if self.level >= bits {
            self.level -= bits;
            return (0, 0);
        }
        let rest = bits - self.level;
        self.level = 0;
        let sleep = (NS_PER_SEC as u128 * rest as u128 / self.rate as u128).min(Nanos::MAX as u128) as Nanos;
        (rest, sleep)
    }
}

/// The rate filter of every tenant's server, as a [`Throttle`]: lane `2 · tenant` holds the
/// tenant's reads, lane `2 · tenant + 1` its writes.
#[derive(Clone, Debug)]
pub struct NbdkitRate {
    /// Per tenant: the read and the write bucket (`None`: no rate, not limited).
    buckets: Vec<Option<[Bucket; 2]>>,
    /// Per lane: the bits its head still wants after its last run of the bucket (0: the
    /// head has not run it yet).
    wanted: Vec<u64>,
    burstiness: f64,
    /// One worker thread per connection (`--threads 1`): a tenant's reads and writes
    /// wait in one queue, in arrival order.
    serial: bool,
}

/// The lane of a tenant's requests of direction `op`: one per direction, or one for both
/// when the server has one thread per connection (`serial`).
#[inline]
fn lane_of(tenant: u32, op: Op, serial: bool) -> usize {
    if serial {
        2 * tenant as usize
    } else {
        2 * tenant as usize + op as usize
    }
}

impl NbdkitRate {
    /// Tenant `i` served with `rate=rates[i]` bits per second (`None`: no rate; tenants
    /// beyond the list are not limited either), every bucket holding `burstiness`
    /// seconds, all created at time 0. Refuses what nbdkit refuses (a rate of 0, above
    /// [`RATE_MAX`]) and a burstiness that leaves a bucket unable to hold one bit, in
    /// which no request would ever get its tokens.
    pub fn new(rates: &[Option<u64>], burstiness: f64) -> Result<Self> {
        if rates.len() > MAX_TENANTS as usize {
            return config(format!("{NAME}: {} tenants listed, at most {MAX_TENANTS}", rates.len()));
        }
        if !(burstiness.is_finite() && burstiness > 0.0) {
            return config(format!(
                "{NAME}: burstiness = {burstiness} must be a finite number of seconds > 0 (nbdkit parses any \
                 number, but a bucket of no capacity never holds a token: every request would sleep forever)"
            ));
        }
        let mut buckets = Vec::with_capacity(rates.len());
        for (i, rate) in rates.iter().enumerate() {
            buckets.push(match *rate {
                None => None,
                Some(0) => {
                    return config(format!("{NAME}: tenant {i}: rate is 0 (nbdkit: \"rate cannot be set to 0\")"))
                }
                Some(r) if r > RATE_MAX => {
                    return config(format!(
                        "{NAME}: tenant {i}: rate = {r} bits/s is above {RATE_MAX} (nbdkit: \"size exceeds \
                         maximum value\")"
                    ))
                }
                Some(r) => {
                    let b = Bucket::new(r, burstiness, 0);
                    if b.capacity == 0 {
                        return config(format!(
                            "{NAME}: tenant {i}: rate = {r} bits/s times burstiness = {burstiness} s holds no \
                             whole bit (the bucket could never pass a request)"
                        ));
                    }
                    Some([b, b])
                }
            });
        }
        Ok(NbdkitRate { buckets, wanted: vec![0; 2 * rates.len()], burstiness, serial: false })
    }

    /// With `threads` worker threads per connection (nbdkit's `--threads`): with one, a
    /// tenant's requests are served one at a time, so its reads and writes pass the
    /// buckets in arrival order (one lane); with more, reads and writes wait apart.
    pub fn with_threads(mut self, threads: u32) -> Self {
        self.serial = threads == 1;
        self
    }

    /// The burstiness every bucket was made with, seconds.
    pub fn burstiness(&self) -> f64 {
        self.burstiness
    }

    /// Tenant `tenant`'s bucket for direction `op`, if it has a rate.
    pub fn bucket(&self, tenant: u32, op: Op) -> Option<&Bucket> {
        self.buckets.get(tenant as usize).and_then(|b| b.as_ref()).map(|b| &b[op as usize])
    }
}

impl Throttle for NbdkitRate {
    fn name(&self) -> String {
        NAME.into()
    }

    fn lane(&self, req: &Request) -> usize {
        lane_of(req.tenant, req.op, self.serial)
    }

    fn ready_at(&mut self, req: &Request, now: Nanos) -> Nanos {
        let Some(Some(pair)) = self.buckets.get_mut(req.tenant as usize) else { return now };
        let lane = lane_of(req.tenant, req.op, self.serial);
        let want = match self.wanted[lane] {
            0 => u64::from(req.bytes) * BITS_PER_BYTE,
            w => w,
        };
        let (rest, sleep) = pair[req.op as usize].run(want, now);
        self.wanted[lane] = rest;
        if rest == 0 {
            now
        } else if sleep == 0 {
            // nbdkit spins until the clock reaches the next microsecond.
            (now / NS_PER_US + 1) * NS_PER_US
        } else {
            now.saturating_add(sleep)
        }
    }

    fn pass(&mut self, req: &Request, _now: Nanos) {
        // The bits were taken when the bucket was run (`ready_at` said "now").
        debug_assert_eq!(self.wanted.get(lane_of(req.tenant, req.op, self.serial)).copied().unwrap_or(0), 0);
    }
}

/// The simulator's spec of nbdkit's rate filter: one server (export) per tenant.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NbdkitRateSpec {
    /// Tenant `i`'s rate in bytes/s (nbdkit's `rate=` is bits/s: 8 times this, a whole
    /// number); `None` or missing: no rate.
    #[serde(default)]
    pub bps: Vec<Option<f64>>,
    /// `burstiness=`: seconds of the rate a bucket holds (default [`DEFAULT_BURSTINESS`]).
    #[serde(default)]
    pub burstiness: Option<f64>,
    /// `--threads`: worker threads per connection (default [`DEFAULT_THREADS`]).
    #[serde(default)]
    pub threads: Option<u32>,
}

impl NbdkitRateSpec {
    /// The scheduler, or the first setting nbdkit would refuse (naming the tenant).
    pub fn build(&self) -> Result<Throttled<NbdkitRate>> {
        let mut rates = Vec::with_capacity(self.bps.len());
        for (i, bps) in self.bps.iter().enumerate() {
            rates.push(match *bps {
                None => None,
                Some(v) => {
                    let bits = v * BITS_PER_BYTE as f64;
                    if v.is_nan() || v < 0.0 {
                        return config(format!(
                            "{NAME}: tenant {i}: bps = {v} is negative (nbdkit: \"size cannot be negative\")"
                        ));
                    }
                    if v == 0.0 {
                        return config(format!(
                            "{NAME}: tenant {i}: bps = 0 gives rate=0 (nbdkit: \"rate cannot be set to 0\")"
                        ));
                    }
                    if !(bits.is_finite() && bits <= RATE_MAX as f64) {
                        return config(format!(
                            "{NAME}: tenant {i}: bps = {v} gives a rate above {RATE_MAX} bits/s (nbdkit: \"size \
                             exceeds maximum value\")"
                        ));
                    }
                    if bits.fract() != 0.0 {
                        return config(format!(
                            "{NAME}: tenant {i}: bps = {v} gives rate={bits} bits/s, not a whole number (nbdkit \
                             parses the rate as an integer number of bits per second)"
                        ));
                    }
                    Some(bits as u64)
                }
            });
        }
        let threads = self.threads.unwrap_or(DEFAULT_THREADS);
        if threads == 0 {
            return config(format!("{NAME}: threads = 0 (nbdkit: --threads takes at least 1)"));
        }
        let rate = NbdkitRate::new(&rates, self.burstiness.unwrap_or(DEFAULT_BURSTINESS))?.with_threads(threads);
        Ok(Throttled::new(rate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceState;
    use crate::scheduler::Scheduler;
    use crate::time::NS_PER_MS as MS;

    const SEC: Nanos = NS_PER_SEC;
    /// 100 requests of 4 KiB per second, in bytes/s.
    const BPS_100X4K: f64 = 100.0 * 4096.0;

    /// Run every timer up to `until`, collecting (time, request) as they pass.
    fn drive(s: &mut Throttled<NbdkitRate>, until: Nanos) -> Vec<(Nanos, Request)> {
        let dev = DeviceState { outstanding: 0, free_slots: 1 };
        let mut out = Vec::new();
        let mut now = 0;
        loop {
            while let Some(r) = s.dispatch(now, &dev) {
                out.push((now, r));
            }
            match s.next_timer() {
                Some(t) if t <= until => {
                    assert!(t >= now, "timer in the past");
                    now = t;
                    s.on_timer(now);
                }
                _ => return out,
            }
        }
    }

    fn send(s: &mut Throttled<NbdkitRate>, tenant: u32, op: Op, n: u64, bytes: u32, at: Nanos, first_id: u64) {
        for i in 0..n {
            let mut r = Request::new(first_id + i, tenant, at, bytes);
            r.op = op;
            s.enqueue(r, at);
        }
    }

    fn spec(bps: &[Option<f64>]) -> NbdkitRateSpec {
        NbdkitRateSpec { bps: bps.to_vec(), burstiness: None, threads: None }
    }

    fn in_window(out: &[(Nanos, Request)], from: Nanos, to: Nanos, keep: impl Fn(&Request) -> bool) -> usize {
        out.iter().filter(|(t, r)| *t >= from && *t < to && keep(r)).count()
    }

    #[test]
    fn a_full_bucket_of_two_seconds_then_100_iops() {
        // rate = 8 · 409600 = 3 276 800 bits/s; 4 KiB = 32 768 bits: 100 requests a second.
        // The bucket starts full with 2 s of the rate: 200 requests at t = 0, then the
        // 201st sleeps for exactly its 32 768 bits (10 ms), and so on.
        let mut s = spec(&[Some(BPS_100X4K)]).build().unwrap();
        send(&mut s, 0, Op::Read, 1000, 4096, 0, 0);
        let out = drive(&mut s, 3 * SEC);
        assert_eq!(in_window(&out, 0, 1, |_| true), 200);
        for (k, (t, r)) in out.iter().enumerate().skip(200).take(100) {
            assert_eq!((*t, r.id), ((k as u64 - 199) * 10 * MS, k as u64), "request {k}");
        }
        assert_eq!(in_window(&out, SEC, 2 * SEC, |_| true), 100);
        assert_eq!(s.throttle().bucket(0, Op::Read).unwrap().capacity(), 6_553_600);
    }

    #[test]
    fn a_64k_request_waits_sixteen_times_as_long_as_a_4k_one() {
        // Empty the bucket with 200 × 4 KiB, then a 64 KiB read (524 288 bits = 16 × 32 768)
        // sleeps 160 ms for its whole size, and the 4 KiB behind it 10 ms more.
        let mut s = spec(&[Some(BPS_100X4K)]).build().unwrap();
        send(&mut s, 0, Op::Read, 200, 4096, 0, 0);
        send(&mut s, 0, Op::Read, 1, 65536, 0, 200);
        send(&mut s, 0, Op::Read, 1, 4096, 0, 201);
        let out = drive(&mut s, SEC);
        let tail: Vec<(Nanos, u64)> = out[200..].iter().map(|(t, r)| (*t, r.id)).collect();
        assert_eq!(tail, vec![(160 * MS, 200), (170 * MS, 201)]);
    }

    #[test]
    fn reads_and_writes_have_a_bucket_each_at_the_full_rate() {
        let mut s = spec(&[Some(BPS_100X4K)]).build().unwrap();
        send(&mut s, 0, Op::Read, 1000, 4096, 0, 0);
        send(&mut s, 0, Op::Write, 1000, 4096, 0, 10_000);
        let out = drive(&mut s, 3 * SEC);
        let read = |r: &Request| r.op == Op::Read;
        let write = |r: &Request| r.op == Op::Write;
        // Both directions get their full bucket at once and 100 IOPS afterwards: writes are
        // not held behind the reads queued before them.
        assert_eq!((in_window(&out, 0, 1, read), in_window(&out, 0, 1, write)), (200, 200));
        assert_eq!((in_window(&out, SEC, 2 * SEC, read), in_window(&out, SEC, 2 * SEC, write)), (100, 100));
    }

    #[test]
    fn an_idle_second_refills_one_second_of_the_rate() {
        // The burst is spent at t = 0; one idle second refills 3 276 800 bits = 100 requests,
        // which pass at once at t = 1 s; the next sleeps 10 ms.
        let mut s = spec(&[Some(BPS_100X4K)]).build().unwrap();
        send(&mut s, 0, Op::Read, 200, 4096, 0, 0);
        assert_eq!(drive(&mut s, SEC).len(), 200);
        send(&mut s, 0, Op::Read, 150, 4096, SEC, 1000);
        let mut out = Vec::new();
        let dev = DeviceState { outstanding: 0, free_slots: 1 };
        let mut now = SEC;
        while now <= 2 * SEC {
            while s.dispatch(now, &dev).is_some() {
                out.push(now);
            }
            let Some(t) = s.next_timer() else { break };
            now = t;
            s.on_timer(now);
        }
        assert_eq!(out.iter().filter(|&&t| t == SEC).count(), 100);
        assert_eq!(out[100], SEC + 10 * MS);
    }

    #[test]
    fn the_bucket_takes_what_it_has_and_sleeps_for_the_rest() {
        // 1000 bits/s, burstiness 2: 2000 bits, full. 2500 bits: takes 2000, sleeps 0.5 s.
        let mut b = Bucket::new(1000, 2.0, 0);
        assert_eq!(b.run(2500, 0), (500, 500 * MS));
        assert_eq!(b.level(), 0);
        assert_eq!(b.run(500, 500 * MS), (0, 0));
        // Refills count whole microseconds of the clock since the last run: at 10^6 bits/s,
        // 1.9 µs after 0 is 1 µs = 1 bit; 1.999 µs is still the same microsecond, no bit,
        // and the missing bit is a 1 µs sleep.
        let mut b = Bucket::new(1_000_000, 1.0, 0);
        assert_eq!(b.run(1_000_000, 0), (0, 0));
        assert_eq!(b.run(1, 1_900), (0, 0));
        assert_eq!(b.run(1, 1_999), (1, 1_000));
        // A refill never goes above the capacity.
        let mut b = Bucket::new(1000, 1.0, 0);
        assert_eq!(b.run(1000, 0), (0, 0));
        assert_eq!(b.run(1500, 10 * SEC), (500, 500 * MS));
    }

    #[test]
    fn a_tenant_without_a_rate_is_not_limited() {
        let mut s = spec(&[None, Some(BPS_100X4K)]).build().unwrap();
        send(&mut s, 0, Op::Write, 500, 4096, 0, 0);
        send(&mut s, 2, Op::Read, 500, 4096, 0, 1000);
        assert_eq!(drive(&mut s, 0).len(), 1000);
    }

    fn err(spec: NbdkitRateSpec) -> String {
        spec.build().unwrap_err().to_string()
    }

    #[test]
    fn refuses_what_nbdkit_refuses() {
        assert!(err(spec(&[None, Some(0.0)])).contains("tenant 1: bps = 0 gives rate=0 (nbdkit: \"rate cannot be"));
        assert!(err(spec(&[Some(-1.0)])).contains("size cannot be negative"));
        assert!(err(spec(&[Some(0.1)])).contains("not a whole number"));
        assert!(err(spec(&[Some(f64::INFINITY)])).contains("above"));
        // 0.125 bytes/s is 1 bit/s: nbdkit takes it.
        assert!(spec(&[Some(0.125)]).build().is_ok());
        for b in [0.0, -1.0, f64::NAN] {
            let e = err(NbdkitRateSpec { bps: vec![Some(1000.0)], burstiness: Some(b), threads: None });
            assert!(e.contains("burstiness"), "{e}");
        }
        // 1 bit/s for 0.5 s holds no whole bit.
        let e = err(NbdkitRateSpec { bps: vec![Some(0.125)], burstiness: Some(0.5), threads: None });
        assert!(e.contains("holds no whole bit"), "{e}");
    }

    #[test]
    fn spec_deserializes_and_refuses_unknown_fields() {
        let s: NbdkitRateSpec = serde_json::from_str(r#"{"bps":[409600,null],"burstiness":4}"#).unwrap();
        assert_eq!(s, NbdkitRateSpec { bps: vec![Some(409600.0), None], burstiness: Some(4.0), threads: None });
        let t = s.build().unwrap();
        assert_eq!(t.throttle().bucket(0, Op::Write).unwrap().capacity(), 4 * 3_276_800);
        assert!(t.throttle().bucket(1, Op::Read).is_none());
        assert_eq!(t.name(), NAME);
        assert!(serde_json::from_str::<NbdkitRateSpec>(r#"{"rate":[1]}"#).is_err());
    }
}
