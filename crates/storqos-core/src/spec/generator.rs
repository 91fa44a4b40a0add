//! Generator specs: `{"kind": "poisson", "rate": 1000, "count": 1000000}` → a streaming
//! request iterator. Several generators are merged by arrival time ([`merge_streams`]).

use serde::Deserialize;

use crate::error::Result;
use crate::request::{Request, MAX_TENANTS};
use crate::sim::generate::{Diurnal, OnOff, Poisson, Shape, DEFAULT_HOURLY_PROFILE};
use crate::time::Nanos;

fn default_bytes() -> u32 {
    4096
}
fn default_read() -> f64 {
    1.0
}
fn default_count() -> u64 {
    u64::MAX
}
fn default_until() -> Nanos {
    Nanos::MAX
}
fn default_weekend() -> f64 {
    1.0
}

/// One synthetic arrival process and the shape of its requests.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum GeneratorSpec {
    /// Poisson arrivals at `rate` IOPS.
    Poisson {
        /// Arrival rate (IOPS).
        rate: f64,
        /// Number of requests (default: unbounded, stop by `until_ns`).
        #[serde(default = "default_count")]
        count: u64,
        /// Stop time (ns).
        #[serde(default = "default_until")]
        until_ns: Nanos,
        /// Request shape.
        #[serde(flatten)]
        shape: ShapeSpec,
        /// Seed of this generator.
        #[serde(default)]
        seed: u64,
    },
    /// Two-state MMPP: ON at `rate_on`, OFF at `rate_off`, exponential sojourns.
    Onoff {
        /// Rate while ON (IOPS).
        rate_on: f64,
        /// Rate while OFF (IOPS).
        rate_off: f64,
        /// Mean ON duration (ns).
        mean_on_ns: Nanos,
        /// Mean OFF duration (ns).
        mean_off_ns: Nanos,
        /// Number of requests.
        #[serde(default = "default_count")]
        count: u64,
        /// Stop time (ns).
        #[serde(default = "default_until")]
        until_ns: Nanos,
        /// Request shape.
        #[serde(flatten)]
        shape: ShapeSpec,
        /// Seed.
        #[serde(default)]
        seed: u64,
    },
    /// Diurnal + weekly non-homogeneous Poisson.
    Diurnal {
        /// Rate at the busiest hour of a weekday (IOPS).
        peak_rate: f64,
        /// Days to generate.
        days: u32,
        /// Relative rate per hour of day (24 values in [0, 1]); default: bi-modal day.
        #[serde(default)]
        hourly: Option<Vec<f64>>,
        /// Weekend (days 5, 6 of each week) rate factor.
        #[serde(default = "default_weekend")]
        weekend_factor: f64,
        /// Request shape.
        #[serde(flatten)]
        shape: ShapeSpec,
        /// Seed.
        #[serde(default)]
        seed: u64,
    },
}

/// Request shape fields shared by all generators.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ShapeSpec {
    /// Tenant of the generated requests.
    #[serde(default)]
    pub tenant: u32,
    /// Request size (bytes).
    #[serde(default = "default_bytes")]
    pub bytes: u32,
    /// Probability of a read.
    #[serde(default = "default_read")]
    pub read_fraction: f64,
    /// Offsets uniform over this many bytes.
    #[serde(default)]
    pub span_bytes: u64,
}

impl From<&ShapeSpec> for Shape {
    fn from(s: &ShapeSpec) -> Shape {
        Shape { tenant: s.tenant, bytes: s.bytes, read_fraction: s.read_fraction, span_bytes: s.span_bytes }
    }
}

/// A built generator: one of the synthetic processes, or any other request stream (a
/// trace merged with generators). An enum rather than a `Box<dyn Iterator>` so that
/// pulling a request is a `match` the compiler inlines, not a virtual call.
pub enum Generator {
    /// Homogeneous Poisson arrivals.
    Poisson(Poisson),
    /// Two-state MMPP.
    Onoff(OnOff),
    /// Diurnal + weekly non-homogeneous Poisson.
    Diurnal(Diurnal),
    /// Any other arrival-ordered stream.
    Boxed(Box<dyn Iterator<Item = Request> + Send>),
}

impl Iterator for Generator {
    type Item = Request;
    #[inline]
    fn next(&mut self) -> Option<Request> {
        match self {
            Generator::Poisson(g) => g.next(),
            Generator::Onoff(g) => g.next(),
            Generator::Diurnal(g) => g.next(),
            Generator::Boxed(g) => g.next(),
        }
    }
}

impl GeneratorSpec {
    /// Build the streaming iterator.
    pub fn build(&self) -> Result<Generator> {
        let shape = match self {
            GeneratorSpec::Poisson { shape, .. }
            | GeneratorSpec::Onoff { shape, .. }
            | GeneratorSpec::Diurnal { shape, .. } => shape,
        };
        if shape.tenant >= MAX_TENANTS {
            return crate::error::config(format!(
                "generator: tenant must be below {MAX_TENANTS}, got {}",
                shape.tenant
            ));
        }
        Ok(match self {
            GeneratorSpec::Poisson { rate, count, until_ns, shape, seed } => {
                Generator::Poisson(Poisson::new(*rate, *count, *until_ns, shape.into(), *seed)?)
            }
            GeneratorSpec::Onoff { rate_on, rate_off, mean_on_ns, mean_off_ns, count, until_ns, shape, seed } => {
                Generator::Onoff(OnOff::new(
                    *rate_on,
                    *rate_off,
                    *mean_on_ns,
                    *mean_off_ns,
                    *count,
                    *until_ns,
                    shape.into(),
                    *seed,
                )?)
            }
            GeneratorSpec::Diurnal { peak_rate, days, hourly, weekend_factor, shape, seed } => {
                let profile = match hourly {
                    None => DEFAULT_HOURLY_PROFILE,
                    Some(v) => <[f64; 24]>::try_from(v.as_slice()).map_err(|_| {
                        crate::error::Error::InvalidConfig(format!(
                            "diurnal: hourly profile needs 24 values, got {}",
                            v.len()
                        ))
                    })?,
                };
                Generator::Diurnal(Diurnal::new(*peak_rate, profile, *weekend_factor, *days, shape.into(), *seed)?)
            }
        })
    }
}

/// Merge arrival-ordered streams into one, by arrival time (ties: lower stream index
/// first), renumbering request ids 0, 1, 2, … in merged order.
///
/// The heads' arrival times sit in one flat array scanned for the earliest: for the
/// handful of generators a run merges, a short branch-free scan of integers is cheaper
/// than keeping a heap or a tournament tree (measured), and the streams are a concrete
/// type ([`Generator`] for specs), not boxed iterators behind virtual calls.
pub fn merge_streams<I: Iterator<Item = Request>>(streams: Vec<I>) -> Merged<I> {
    let k = streams.len();
    let mut m =
        Merged { heads: Vec::with_capacity(k), alive: vec![false; k], key: vec![NEVER; k], streams, next_id: 0 };
    for i in 0..k {
        let h = m.streams[i].next();
        m.key[i] = h.map_or(NEVER, |r| r.arrival);
        m.alive[i] = h.is_some();
        m.heads.push(h.unwrap_or_default());
    }
    m
}

/// "No head": the key of an exhausted stream (a live head at this time is told apart by
/// [`Merged::alive`]).
const NEVER: Nanos = Nanos::MAX;

/// The iterator returned by [`merge_streams`].
pub struct Merged<I> {
    streams: Vec<I>,
    /// Current head of each stream (meaningless once the stream is exhausted).
    heads: Vec<Request>,
    /// Whether each stream still has a head.
    alive: Vec<bool>,
    /// Arrival of each head, [`NEVER`] once exhausted.
    key: Vec<Nanos>,
    next_id: u64,
}

impl<I: Iterator<Item = Request>> Iterator for Merged<I> {
    type Item = Request;
    #[inline(always)]
    fn next(&mut self) -> Option<Request> {
        // The first stream holding the smallest key.
        let (mut w, mut best) = (0, NEVER);
        for (i, &k) in self.key.iter().enumerate() {
            if k < best {
                (w, best) = (i, k);
            }
        }
        if best == NEVER {
            // All heads exhausted, or heads arriving at the last representable
            // nanosecond: the lowest live stream wins.
            w = self.alive.iter().position(|&a| a)?;
        }
        let next = self.streams[w].next();
        match next {
            Some(h) => self.key[w] = h.arrival,
            None => {
                self.key[w] = NEVER;
                self.alive[w] = false;
            }
        }
        let mut r = std::mem::replace(&mut self.heads[w], next.unwrap_or_default());
        r.id = self.next_id;
        self.next_id += 1;
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::from_json;

    #[test]
    fn merged_generators_are_ordered_and_tagged() {
        let a: GeneratorSpec =
            from_json("generator", r#"{"kind":"poisson","rate":100,"count":1000,"tenant":0,"seed":1}"#).unwrap();
        let b: GeneratorSpec =
            from_json("generator", r#"{"kind":"poisson","rate":300,"count":3000,"tenant":1,"seed":2}"#).unwrap();
        let v: Vec<Request> = merge_streams(vec![a.build().unwrap(), b.build().unwrap()]).collect();
        assert_eq!(v.len(), 4000);
        assert!(v.windows(2).all(|w| w[0].arrival <= w[1].arrival));
        assert_eq!(v.iter().filter(|r| r.tenant == 1).count(), 3000);
        assert!(v.iter().enumerate().all(|(i, r)| r.id == i as u64));
    }

    #[test]
    fn merge_breaks_ties_by_stream_index_and_survives_uneven_streams() {
        let mk = |tenant: u32, times: &[Nanos]| -> Vec<Request> {
            times.iter().map(|&t| Request::new(0, tenant, t, 4096)).collect()
        };
        let streams =
            vec![mk(0, &[5, 5, 9]), mk(1, &[]), mk(2, &[1, 5, Nanos::MAX]), mk(3, &[5, Nanos::MAX]), mk(4, &[0])];
        let v: Vec<(Nanos, u32)> = merge_streams(streams.into_iter().map(|s| s.into_iter()).collect())
            .map(|r| (r.arrival, r.tenant))
            .collect();
        let m = Nanos::MAX;
        assert_eq!(v, vec![(0, 4), (1, 2), (5, 0), (5, 0), (5, 2), (5, 3), (9, 0), (m, 2), (m, 3)]);
        assert_eq!(merge_streams(Vec::<std::vec::IntoIter<Request>>::new()).count(), 0);
        assert_eq!(merge_streams(vec![mk(0, &[1, 2]).into_iter()]).count(), 2);
    }

    #[test]
    fn merge_is_a_stable_sort_by_arrival_and_stream() {
        // Any number of streams (powers of two or not), many ties, uneven lengths: the
        // merge is the stable sort of (arrival, stream index).
        let mut rng = crate::rng::SimRng::new(4);
        for k in 1..=17usize {
            let streams: Vec<Vec<Request>> = (0..k)
                .map(|s| {
                    let mut t = 0;
                    (0..rng.below(40))
                        .map(|_| {
                            t += rng.below(4);
                            Request::new(0, s as u32, if rng.bernoulli(0.02) { Nanos::MAX } else { t }, 4096)
                        })
                        .scan(0, |last, r| {
                            *last = r.arrival.max(*last);
                            Some(Request { arrival: *last, ..r })
                        })
                        .collect()
                })
                .collect();
            let mut want: Vec<(Nanos, u32)> = streams.iter().flatten().map(|r| (r.arrival, r.tenant)).collect();
            want.sort();
            let got: Vec<(Nanos, u32)> = merge_streams(streams.into_iter().map(|s| s.into_iter()).collect())
                .map(|r| (r.arrival, r.tenant))
                .collect();
            assert_eq!(got, want, "k = {k}");
        }
    }

    #[test]
    fn bad_generator_specs_name_the_problem() {
        let e = from_json::<GeneratorSpec>("generator", r#"{"kind":"poison","rate":1}"#).unwrap_err();
        assert!(e.to_string().contains("unknown variant `poison`"), "{e}");
        let g: GeneratorSpec = from_json("generator", r#"{"kind":"poisson","rate":-1}"#).unwrap();
        assert!(g.build().is_err());
        let g: GeneratorSpec =
            from_json("generator", r#"{"kind":"diurnal","peak_rate":1,"days":1,"hourly":[1,2]}"#).unwrap();
        assert!(g.build().err().unwrap().to_string().contains("24 values"));
        // A tenant id is an index into per-tenant state: a huge one is an error, not an
        // allocation that aborts the process when the first request arrives.
        let g: GeneratorSpec =
            from_json("generator", r#"{"kind":"poisson","rate":1,"count":1,"tenant":4294967295}"#).unwrap();
        let e = g.build().err().unwrap().to_string();
        assert!(e.contains("generator: tenant must be below 65536, got 4294967295"), "{e}");
        // Faster than one request per ns the clock stops: an error, not a run that never ends.
        let g: GeneratorSpec = from_json("generator", r#"{"kind":"poisson","rate":9.2e18,"until_ns":1000}"#).unwrap();
        let e = g.build().err().unwrap().to_string();
        assert!(e.contains("poisson: rate must be at most 1e9 IOPS"), "{e}");
    }
}
