//! Scheduler specs: `{"kind": "...", ...}` → a boxed [`Scheduler`].
//!
//! Examples:
//! ```json
//! {"kind": "fcfs"}
//! {"kind": "edf", "deadlines_ns": [10000000, 50000000], "default_deadline_ns": 100000000}
//! {"kind": "wf2q", "weights": [2, 1]}
//! {"kind": "wf2q", "weights": [3, 1], "by": "class", "cost": "bytes"}
//! {"kind": "sfq", "weights": [2, 1], "depth": 4}
//! ```
//! `by` is `"tenant"` (default) or `"class"`; `cost` is `"iops"` (default) or `"bytes"`;
//! flows beyond the `weights` list weigh 1.

use serde::Deserialize;

use crate::error::Result;
use crate::spec::dispatch::AnyScheduler;
use crate::schedulers::{CostModel, Edf, Fcfs, FlowKey, Sfq, Wf2q};
use crate::time::Nanos;

/// A scheduling policy and its parameters.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SchedulerSpec {
    /// First-come first-served.
    Fcfs,
    /// Earliest deadline first: deadline = arrival + the relative deadline of the
    /// request's class.
    Edf {
        /// Relative deadline of class i (ns, > 0).
        #[serde(default)]
        deadlines_ns: Vec<Nanos>,
        /// Relative deadline of classes beyond the list (ns, > 0).
        default_deadline_ns: Nanos,
    },
    /// WF2Q+ weighted fair queuing.
    Wf2q {
        /// Weight of flow i (finite, > 0); unlisted flows weigh 1.
        #[serde(default)]
        weights: Vec<f64>,
        /// Flows are tenants (default) or classes.
        #[serde(default)]
        by: FlowKey,
        /// Cost of a request: one operation (default) or its bytes.
        #[serde(default)]
        cost: CostModel,
    },
    /// SFQ(D): start-time fair queuing with at most `depth` requests outstanding.
    Sfq {
        /// Weight of flow i (finite, > 0); unlisted flows weigh 1.
        #[serde(default)]
        weights: Vec<f64>,
        /// Dispatch depth D (≥ 1).
        depth: usize,
        /// Flows are tenants (default) or classes.
        #[serde(default)]
        by: FlowKey,
        /// Cost of a request: one operation (default) or its bytes.
        #[serde(default)]
        cost: CostModel,
    },
}

impl SchedulerSpec {
    /// Check the parameters without building (the error names the bad parameter).
    pub fn validate(&self) -> Result<()> {
        self.build().map(|_| ())
    }

    /// Build the policy value.
    pub fn build(&self) -> Result<AnyScheduler> {
        Ok(match self {
            SchedulerSpec::Fcfs => AnyScheduler::Fcfs(Fcfs::new()),
            SchedulerSpec::Edf { deadlines_ns, default_deadline_ns } => {
                AnyScheduler::Edf(Edf::new(deadlines_ns.clone(), *default_deadline_ns)?)
            }
            SchedulerSpec::Wf2q { weights, by, cost } => {
                AnyScheduler::Wf2q(Wf2q::new(weights.clone())?.with_key(*by).with_cost(*cost))
            }
            SchedulerSpec::Sfq { weights, depth, by, cost } => {
                AnyScheduler::Sfq(Sfq::new(weights.clone(), *depth)?.with_key(*by).with_cost(*cost))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::Scheduler;
    use crate::spec::from_json;

    fn parse(json: &str) -> Result<SchedulerSpec> {
        from_json("policy", json)
    }

    /// Parse and build; the error message on failure.
    fn err(json: &str) -> String {
        match parse(json).and_then(|s| s.build()) {
            Ok(s) => panic!("{json} should be rejected, built {}", s.name()),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn good_specs_build() {
        let cases = [
            (r#"{"kind":"fcfs"}"#, "fcfs"),
            (r#"{"kind":"edf","deadlines_ns":[10000000,50000000],"default_deadline_ns":100000000}"#, "edf"),
            (r#"{"kind":"edf","default_deadline_ns":5}"#, "edf"),
            (r#"{"kind":"wf2q"}"#, "wf2q+"),
            (r#"{"kind":"wf2q","weights":[2,1],"by":"class","cost":"bytes"}"#, "wf2q+"),
            (r#"{"kind":"sfq","weights":[2.5,1],"depth":4,"by":"tenant","cost":"iops"}"#, "sfq(d=4)"),
        ];
        for (json, name) in cases {
            let spec = parse(json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert!(spec.validate().is_ok());
            assert_eq!(spec.build().unwrap().name(), name, "{json}");
        }
        assert_eq!(
            parse(r#"{"kind":"sfq","depth":1}"#).unwrap(),
            SchedulerSpec::Sfq { weights: vec![], depth: 1, by: FlowKey::Tenant, cost: CostModel::Iops }
        );
    }

    #[test]
    fn bad_specs_name_the_problem() {
        let cases = [
            (r#"{"kind":"wfq"}"#, "unknown variant `wfq`"),
            (r#"{"weights":[1]}"#, "missing field `kind`"),
            (r#"{"kind":"wf2q","weights":[2,-1]}"#, "wf2q: weights[1] must be a finite number > 0, got -1"),
            (r#"{"kind":"wf2q","weights":[0]}"#, "wf2q: weights[0]"),
            (r#"{"kind":"wf2q","weight":[2,1]}"#, "unknown field `weight`"),
            (r#"{"kind":"wf2q","by":"host"}"#, "unknown variant `host`"),
            (r#"{"kind":"wf2q","cost":"time"}"#, "unknown variant `time`"),
            (r#"{"kind":"sfq","depth":0}"#, "sfq: depth must be >= 1"),
            (r#"{"kind":"sfq","depth":-2}"#, "invalid value: integer `-2`"),
            (r#"{"kind":"sfq"}"#, "missing field `depth`"),
            (r#"{"kind":"sfq","depth":2,"weights":[1,-0.5]}"#, "sfq: weights[1]"),
            (r#"{"kind":"edf","deadlines_ns":[5,0],"default_deadline_ns":9}"#, "edf: deadlines_ns[1] must be > 0"),
            (r#"{"kind":"edf","default_deadline_ns":0}"#, "edf: default_deadline_ns must be > 0"),
            (r#"{"kind":"edf","deadlines_ns":[5]}"#, "missing field `default_deadline_ns`"),
            (r#"{"kind":"edf","deadlines_ns":[-5],"default_deadline_ns":9}"#, "invalid value: integer `-5`"),
        ];
        for (json, want) in cases {
            let e = err(json);
            assert!(e.contains(want), "{json}: got {e:?}, want it to mention {want:?}");
            assert!(!e.contains('\n'), "one line: {e:?}");
        }
    }
}
