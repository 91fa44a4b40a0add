//! The registry of the policies: for each, the name users give it, the other
//! names it is taken by, what it is, the core kind it builds ([`SchedulerSpec`]'s
//! `kind`), and the parameters it takes, each with its type, default, range and one line
//! of help; beside them the command-line options that give those parameters.
//!
//! This table is the one declaration of a policy outside its scheduler module: the
//! Python layer reads it (as JSON, [`registry_json`]) for `--policy`'s names and
//! aliases, the policy options of `storqos simulate` and `storqos serve`, the keys an
//! experiment file's `[[policy]]` and a gateway config's `[policy]` take, the option an
//! error names for a key, and the generated reference (docs/reference.md). Adding a
//! policy is its scheduler, its [`SchedulerSpec`] variant and one [`Policy`] entry:
//! in `builtin.rs` for a policy of the literature, in `stacks.rs` for a model of a
//! system operators run ([`crate::stacks`]). `decl.rs` says what an entry is made of.
//!
//! User parameters are the ones people write (`deadlines = ["10ms"]`, `cmin = "1.5k"`);
//! the Python layer's builder named by [`Policy::form`] turns them into the core spec,
//! whose own fields ([`SchedulerSpec`]) carry units in their names (`deadline_ns`).

mod builtin;
mod decl;
mod stacks;

use serde::Serialize;

pub use builtin::{OPTIONS, POLICIES};
pub use decl::{Bound, CliOption, Command, Form, Param, Policy, Value};
pub use stacks::{STACK_OPTIONS, STACK_POLICIES};

use crate::spec::SchedulerSpec;

/// The policy a run without one gets (`--policy`'s default).
pub const DEFAULT_POLICY: &str = "fcfs";

/// The keys any policy may be handed without using them: the device's capacity (rtt-fq's
/// total), the SLOs and the percentile a run is judged on.
pub const RUN_PARAMS: [&str; 3] = ["total_capacity", "slo", "percentile"];

/// The keys whose option is not `--` and the key with `-` for `_` (an error about the
/// key names this option).
pub const IRREGULAR_FLAGS: [(&str, &str); 2] = [("deadlines", "--deadline"), ("workloads", "--workload")];

/// Every policy: the built-in ones, then the models of the systems operators run.
pub fn policies() -> impl Iterator<Item = &'static Policy> {
    POLICIES.iter().chain(STACK_POLICIES)
}

/// Every option that gives a policy parameter, in the order `--help` lists them.
pub fn options() -> impl Iterator<Item = &'static CliOption> {
    OPTIONS.iter().chain(STACK_OPTIONS)
}

/// The policy named `name` or one of its aliases (case-insensitive).
pub fn lookup(name: &str) -> Option<&'static Policy> {
    let key = name.trim().to_lowercase();
    policies().find(|p| p.name == key || p.aliases.contains(&key.as_str()))
}

impl SchedulerSpec {
    /// The core kind of this spec (its JSON `kind`): every variant is named here, so a
    /// new variant does not compile until it has one (and its registry entry, checked
    /// by the tests below).
    pub fn kind(&self) -> &'static str {
        match self {
            SchedulerSpec::Fcfs => "fcfs",
            SchedulerSpec::Edf { .. } => "edf",
            SchedulerSpec::Wf2q { .. } => "wf2q",
            SchedulerSpec::Mclock { .. } => "mclock",
            SchedulerSpec::Sfq { .. } => "sfq",
            SchedulerSpec::Rtt { .. } => "rtt",
            SchedulerSpec::Miser { .. } => "miser",
            SchedulerSpec::SarcAvatar(_) => "sarc_avatar",
            SchedulerSpec::SarcFacade(_) => "sarc_facade",
            SchedulerSpec::FixedAvatar(_) => "fixed_avatar",
            SchedulerSpec::AdaptiveAvatar(_) => "adaptive_avatar",
            SchedulerSpec::Yfq { .. } => "yfq",
            SchedulerSpec::Baa { .. } => "baa",
            SchedulerSpec::Fclb { .. } => "fclb",
            SchedulerSpec::QemuThrottle(_) => "qemu_throttle",
            SchedulerSpec::BlkThrottle(_) => "blk_throttle",
            SchedulerSpec::SpdkQos(_) => "spdk_qos",
            SchedulerSpec::Bfq(_) => "bfq",
            SchedulerSpec::NbdkitRate(_) => "nbdkit_rate",
            SchedulerSpec::CephMclock(_) => "ceph_mclock",
            SchedulerSpec::RbdQos(_) => "rbd_qos",
        }
    }
}

/// The registry as one JSON document: `{"policies": [...], "options": [...],
/// "default_policy": "...", "run_params": [...], "irregular_flags": {...}, "value_types": {...}}`.
pub fn registry_json() -> String {
    #[derive(Serialize)]
    struct Doc {
        policies: Vec<&'static Policy>,
        options: Vec<&'static CliOption>,
        default_policy: &'static str,
        run_params: [&'static str; 3],
        irregular_flags: std::collections::BTreeMap<&'static str, &'static str>,
        value_types: Vec<(Value, &'static str)>,
    }
    let doc = Doc {
        policies: policies().collect(),
        options: options().collect(),
        default_policy: DEFAULT_POLICY,
        run_params: RUN_PARAMS,
        irregular_flags: IRREGULAR_FLAGS.into_iter().collect(),
        value_types: Value::ALL.iter().map(|v| (*v, v.describe())).collect(),
    };
    serde_json::to_string(&doc).expect("the registry serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::from_json;

    /// A spec of each core kind, built by the core: every [`SchedulerSpec`] variant.
    const ONE_OF_EACH: [&str; 21] = [
        r#"{"kind":"fcfs"}"#,
        r#"{"kind":"edf","default_deadline_ns":5}"#,
        r#"{"kind":"wf2q"}"#,
        r#"{"kind":"mclock"}"#,
        r#"{"kind":"sfq","depth":1}"#,
        r#"{"kind":"rtt","capacity_iops":10,"deadline_ns":5,"then":{"kind":"wf2q"}}"#,
        r#"{"kind":"miser","capacity_iops":10,"deadline_ns":5}"#,
        r#"{"kind":"sarc_avatar","slo":[{"rate_iops":10,"latency_ns":50000000}]}"#,
        r#"{"kind":"sarc_facade","slo":[{"rate_iops":10,"latency_ns":50000000}]}"#,
        r#"{"kind":"fixed_avatar","slo":[{"rate_iops":10,"latency_ns":50000000}]}"#,
        r#"{"kind":"adaptive_avatar","slo":[{"rate_iops":10,"latency_ns":50000000}]}"#,
        r#"{"kind":"yfq"}"#,
        r#"{"kind":"baa","hdd_iops":200,"ssd_iops":1000,"window_ns":60,"period_ns":1}"#,
        r#"{"kind":"fclb","workloads":[{"iops":40,"rt_ns":35000000}],"then":{"kind":"yfq"}}"#,
        r#"{"kind":"qemu_throttle","iops":[100]}"#,
        r#"{"kind":"blk_throttle","read_iops":[100]}"#,
        r#"{"kind":"bfq","weights":[200,100]}"#,
        r#"{"kind":"nbdkit_rate","bps":[1048576]}"#,
        r#"{"kind":"spdk_qos","iops":[1000]}"#,
        r#"{"kind":"ceph_mclock","capacity_iops":1000}"#,
        r#"{"kind":"rbd_qos","iops":[100]}"#,
    ];

    #[test]
    fn every_core_kind_has_one_registry_entry_and_back() {
        let mut kinds = Vec::new();
        for json in ONE_OF_EACH {
            let spec: SchedulerSpec = from_json("policy", json).unwrap_or_else(|e| panic!("{json}: {e}"));
            spec.validate().unwrap_or_else(|e| panic!("{json}: {e}"));
            let entries: Vec<&str> = policies().filter(|p| p.kind == spec.kind()).map(|p| p.name).collect();
            // rtt's registry entry is rtt-fq (RTT over WF2Q+); each other kind is one policy.
            assert_eq!(entries.len(), 1, "{}: {entries:?}", spec.kind());
            kinds.push(spec.kind());
        }
        for p in policies() {
            assert!(kinds.contains(&p.kind), "{} builds kind {}, which the core does not have", p.name, p.kind);
        }
    }

    #[test]
    fn names_and_aliases_are_each_taken_once() {
        let mut seen: Vec<&str> = Vec::new();
        for p in policies() {
            for n in std::iter::once(&p.name).chain(p.aliases) {
                assert_eq!(*n, n.to_lowercase(), "{n}: names are lower case (they are looked up so)");
                assert!(!seen.contains(n), "{n} names two policies");
                seen.push(n);
            }
        }
        assert_eq!(lookup(" WF2Q+ ").map(|p| p.name), Some("wf2q"));
        assert!(lookup(DEFAULT_POLICY).is_some_and(|p| p.form.is_some() && p.serve));
        assert_eq!(lookup("fifo").map(|p| p.name), Some("fcfs"));
        assert!(lookup("wfq").is_none(), "WFQ (Demers-Keshav-Shenker) is another algorithm than WF2Q+");
    }

    #[test]
    fn params_options_and_back_ends_agree() {
        for p in policies() {
            // A policy without a builder takes nothing there; one with none anywhere is no policy.
            assert!(p.form.is_some() || p.params.is_empty(), "{}", p.name);
            assert!(p.form.is_some() || p.serve_form.is_some(), "{}: built nowhere", p.name);
            assert!(p.serve || p.form.is_some(), "{}: run nowhere", p.name);
            assert_eq!(p.serve_form.is_some(), !p.serve_params.is_empty(), "{}", p.name);
            for params in [p.params, p.serve_params] {
                let mut keys: Vec<&str> = params.iter().map(|q| q.key).collect();
                keys.sort_unstable();
                keys.dedup();
                assert_eq!(keys.len(), params.len(), "{}: a key given twice", p.name);
                for q in params {
                    let words = matches!(q.value, Value::Choice | Value::Choices);
                    assert_eq!(words, !q.choices.is_empty(), "{}.{}", p.name, q.key);
                    if let Some(d) = q.default {
                        assert!(!words || q.choices.contains(&d), "{}.{}: {d}", p.name, q.key);
                    }
                }
            }
            for (key, _) in p.from_tenants {
                assert!(p.params.iter().any(|q| q.key == *key), "{}: {key} from the tenants, not taken", p.name);
            }
            if let Some(b) = p.back_end {
                assert!(lookup(b).is_some_and(|e| e.name == b), "{}: back end {b} is no policy", p.name);
            }
        }
        // Every option gives a key some policy takes, or one any policy is handed.
        for o in options() {
            let taken = policies().any(|p| p.params.iter().any(|q| q.key == o.key)) || RUN_PARAMS.contains(&o.key);
            assert!(taken, "{} gives {}, which no policy takes", o.flag, o.key);
            let irregular = IRREGULAR_FLAGS.iter().find(|(k, _)| *k == o.key).map(|(_, f)| *f);
            assert_eq!(o.flag, irregular.unwrap_or(&format!("--{}", o.key.replace('_', "-"))), "{}", o.key);
        }
    }

    /// The defaults the registry shows are the ones the policies use.
    #[test]
    fn defaults_are_the_policies_own() {
        let default = |policy: &str, key: &str| {
            let p = lookup(policy).unwrap();
            p.params.iter().chain(p.serve_params).find(|q| q.key == key).and_then(|q| q.default).unwrap().to_string()
        };
        assert_eq!(default("yfq", "batch"), crate::schedulers::yfq::DEFAULT_BATCH.to_string());
        assert_eq!(default("fclb", "pole"), crate::fclb::tuning::DEFAULT_POLE.to_string());
        assert_eq!(default("fclb", "plant_gain"), crate::fclb::tuning::PAPER_PLANT_GAIN_MS_PER_IOPS.to_string());
        assert_eq!(default("adaptive+avatar", "p_rt"), crate::twolevel::adaptive::DEFAULT_P_RT.to_string());
        assert_eq!(default("adaptive+avatar", "p_inc"), crate::twolevel::adaptive::DEFAULT_P_INC.to_string());
        assert_eq!(default("adaptive+avatar", "p_dec"), crate::twolevel::adaptive::DEFAULT_P_DEC.to_string());
        let ms = crate::twolevel::sarc::DEFAULT_PERIOD / 1_000_000;
        assert_eq!(default("sarc+avatar", "period"), format!("{ms}ms"));
        let s = crate::twolevel::avatar::DEFAULT_WINDOW / 1_000_000_000;
        assert_eq!(default("sarc+avatar", "control_window"), format!("{s}s"));
        let pct = crate::twolevel::slo::DEFAULT_PERCENTILE * 100.0;
        assert_eq!(default("sarc+avatar", "percentile"), format!("{pct}"));
    }

    #[test]
    fn the_json_document_lists_every_policy_with_its_parameters() {
        let doc: serde_json::Value = serde_json::from_str(&registry_json()).unwrap();
        let policies = doc["policies"].as_array().unwrap();
        assert_eq!(policies.len(), super::policies().count());
        let mclock = policies.iter().find(|p| p["name"] == "mclock").unwrap();
        assert_eq!(mclock["form"], "tags");
        let limits = mclock["params"].as_array().unwrap().iter().find(|q| q["key"] == "limits").unwrap();
        assert_eq!(limits["value"], "rates");
        assert_eq!(limits["min"], serde_json::json!({"value": 0.0, "inclusive": false}));
        assert_eq!(doc["irregular_flags"]["deadlines"], "--deadline");
        assert_eq!(doc["value_types"].as_array().unwrap().len(), Value::ALL.len());
    }
}
