//! The shared vocabulary of the tag-based fair queuers ([`super::Wf2q`], [`super::Sfq`],
//! [`super::yfq::Yfq`]): which field of a request names its *flow*, what a request
//! *costs*, per-flow *weights* (together their [`Sharing`], set by the [`FairQueue`]
//! builder steps), and a totally ordered virtual-time value for heap keys.
//!
//! Virtual time is an `f64` in "cost units per unit of weight": a request of cost `c`
//! in a flow of weight `w` advances that flow's tags by `c / w`. `f64` keeps 53 bits of
//! precision, so over a run of 10^9 unit-cost requests the increments (≥ 10^-6 of the
//! clock for weights ≤ 10^3) stay exact enough for tie-free ordering; the values are
//! always finite and ≥ 0, which the heap-key wrapper asserts in debug builds.

use std::cmp::Ordering;

use serde::Deserialize;

use crate::error::{config, Result};
use crate::request::Request;

/// Weight of a flow the configuration does not list (all flows equal by default).
pub const DEFAULT_WEIGHT: f64 = 1.0;

/// Cost of one request under [`CostModel::Iops`]: every request counts as one operation.
pub const UNIT_COST: f64 = 1.0;

/// Which request field names the flow that fairness is enforced between.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowKey {
    /// `Request::tenant`: share the device between tenants (default).
    #[default]
    Tenant,
    /// `Request::class`: share it between the classes a policy assigned (e.g. seed 000's
    /// Fair Queuing recombiner between RTT's primary and secondary class).
    Class,
}

impl FlowKey {
    /// The flow index of `req`.
    #[inline]
    pub fn of(self, req: &Request) -> u32 {
        match self {
            FlowKey::Tenant => req.tenant,
            FlowKey::Class => req.class,
        }
    }
}

/// What one request costs in the fair-share accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostModel {
    /// Every request costs [`UNIT_COST`]: IOPS fairness (default).
    #[default]
    Iops,
    /// A request costs its size in bytes: bandwidth fairness.
    Bytes,
}

impl CostModel {
    /// The cost of `req` (> 0 for any request with `bytes > 0`).
    #[inline]
    pub fn of(self, req: &Request) -> f64 {
        match self {
            CostModel::Iops => UNIT_COST,
            CostModel::Bytes => req.bytes as f64,
        }
    }
}

/// Check that a weight is usable: finite and > 0. `what` names the parameter in the error
/// (e.g. `"wf2q: weights[1]"`).
pub fn check_weight(what: &str, w: f64) -> Result<()> {
    if w > 0.0 && w.is_finite() {
        Ok(())
    } else {
        config(format!("{what} must be a finite number > 0, got {w}"))
    }
}

/// Per-flow weights: an explicit list indexed by flow, [`DEFAULT_WEIGHT`] beyond it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Weights {
    list: Vec<f64>,
}

impl Weights {
    /// Weights from a list indexed by flow; every entry must be finite and > 0. `policy`
    /// prefixes error messages (`"wf2q"` → `"wf2q: weights[1] must be …"`).
    pub fn new(policy: &str, list: Vec<f64>) -> Result<Self> {
        for (i, &w) in list.iter().enumerate() {
            check_weight(&format!("{policy}: weights[{i}]"), w)?;
        }
        Ok(Weights { list })
    }

    /// The weight of `flow`.
    #[inline]
    pub fn get(&self, flow: u32) -> f64 {
        self.list.get(flow as usize).copied().unwrap_or(DEFAULT_WEIGHT)
    }

    /// Change the weight of `flow` (finite, > 0), growing the list with defaults.
    pub fn set(&mut self, policy: &str, flow: u32, w: f64) -> Result<()> {
        check_weight(&format!("{policy}: weight of flow {flow}"), w)?;
        let i = flow as usize;
        if i >= self.list.len() {
            self.list.resize(i + 1, DEFAULT_WEIGHT);
        }
        self.list[i] = w;
        Ok(())
    }
}

/// How a tag-based fair queue shares the device, fixed when it is built: which request
/// field names a flow, what a request costs, and the configured per-flow weights.
#[derive(Clone, Debug, PartialEq)]
pub struct Sharing {
    /// Which field of a request names its flow.
    pub by: FlowKey,
    /// What one request costs.
    pub cost: CostModel,
    /// Configured weights (flows not listed weigh [`DEFAULT_WEIGHT`]).
    pub weights: Weights,
}

impl Sharing {
    /// Flows by tenant, unit cost, `weights` (checked; `policy` prefixes errors).
    pub fn new(policy: &str, weights: Vec<f64>) -> Result<Self> {
        Ok(Sharing { by: FlowKey::Tenant, cost: CostModel::Iops, weights: Weights::new(policy, weights)? })
    }

    /// Flow `k`'s state in `flows` (indexed by flow), created with its configured weight
    /// — for it and for every lower flow not seen yet — on first use.
    #[inline]
    pub(crate) fn flow<'a, F: FlowState>(&self, flows: &'a mut Vec<F>, k: u32) -> &'a mut F {
        let i = k as usize;
        if i >= flows.len() {
            let base = flows.len();
            flows.extend((base..=i).map(|j| F::with_weight(self.weights.get(j as u32))));
        }
        &mut flows[i]
    }

    /// The current weight of flow `k`: its state's once it has one, else the configured.
    pub(crate) fn weight<F: FlowState>(&self, flows: &[F], k: u32) -> f64 {
        flows.get(k as usize).map_or_else(|| self.weights.get(k), F::weight)
    }
}

/// Per-flow state of a tag-based fair queue, as [`Sharing`] creates and reads it.
/// The start and finish tags of a request of `cost` in a flow of `weight` whose previous
/// request finishes at `last_finish`, arriving at virtual time `v`: `start = max(v,
/// last_finish)` (a flow that was idle restarts at `v`, with no hoarded credit) and
/// `finish = start + cost / weight`. WF2Q+ (Bennett & Zhang 1997), SFQ (Goyal et al. 1996)
/// and YFQ (Bruno et al. 1999) all tag this way; they differ in how `v` advances and
/// which tag orders the flows.
#[inline(always)]
pub(crate) fn tags(v: f64, last_finish: f64, cost: f64, weight: f64) -> (f64, f64) {
    let start = v.max(last_finish);
    (start, start + cost / weight)
}

pub(crate) trait FlowState {
    /// A fresh flow of weight `w`.
    fn with_weight(w: f64) -> Self;
    /// The flow's current weight.
    fn weight(&self) -> f64;
}

/// The builder steps every tag-based fair queue (WF2Q+, SFQ(D), YFQ) shares.
pub trait FairQueue: Sized {
    /// The queue's sharing rules.
    fn sharing_mut(&mut self) -> &mut Sharing;

    /// Requests waiting in the queue (the rules may change only while it is empty).
    fn waiting(&self) -> usize;

    /// Share between the flows named by `by` (tenant or class). Set before use.
    fn with_key(mut self, by: FlowKey) -> Self {
        debug_assert_eq!(self.waiting(), 0, "change the flow key before enqueueing");
        self.sharing_mut().by = by;
        self
    }

    /// Charge requests by `cost` (IOPS or bytes). Set before use.
    fn with_cost(mut self, cost: CostModel) -> Self {
        debug_assert_eq!(self.waiting(), 0, "change the cost model before enqueueing");
        self.sharing_mut().cost = cost;
        self
    }
}

/// A virtual-time value with a total order, for heap keys. Always finite and ≥ 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct VTime(pub(crate) f64);

impl VTime {
    #[inline]
    pub(crate) fn new(v: f64) -> Self {
        debug_assert!(v.is_finite() && v >= 0.0, "virtual time must be finite and >= 0, got {v}");
        VTime(v)
    }
}

impl Eq for VTime {}

impl PartialOrd for VTime {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for VTime {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_default_and_validate() {
        let w = Weights::new("wf2q", vec![2.0, 0.5]).unwrap();
        assert_eq!((w.get(0), w.get(1), w.get(7)), (2.0, 0.5, DEFAULT_WEIGHT));
        let e = Weights::new("wf2q", vec![1.0, -1.0]).unwrap_err().to_string();
        assert!(e.contains("wf2q: weights[1]") && e.contains("-1"), "{e}");
        let e = Weights::new("sfq", vec![f64::INFINITY]).unwrap_err().to_string();
        assert!(e.contains("sfq: weights[0]"), "{e}");
        let mut w = Weights::default();
        w.set("wf2q", 3, 4.0).unwrap();
        assert_eq!((w.get(2), w.get(3)), (DEFAULT_WEIGHT, 4.0));
        assert!(w.set("wf2q", 0, 0.0).is_err());
    }

    #[test]
    fn keys_and_costs() {
        let mut r = Request::new(0, 3, 0, 8192);
        r.class = 1;
        assert_eq!((FlowKey::Tenant.of(&r), FlowKey::Class.of(&r)), (3, 1));
        assert_eq!((CostModel::Iops.of(&r), CostModel::Bytes.of(&r)), (UNIT_COST, 8192.0));
        assert!(VTime::new(1.0) < VTime::new(1.5));
    }
}
