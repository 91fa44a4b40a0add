//! FCLB live: admission control at connect time (seed 003 §2 "Simple Admission
//! Control", Fig. 1, and §4.3).
//!
//! The policy itself is the core's [`storqos_core::fclb::Fclb`] over YFQ, built from the
//! same `SchedulerSpec::Fclb` the simulator runs; nothing of the controller is here. What
//! the gateway adds is *when* the seed's admission test runs: a workload is a tenant,
//! and a tenant asks to be admitted when its first connection chooses one of its exports
//! (`NBD_OPT_GO`, `NBD_OPT_EXPORT_NAME`).
//!
//! 1. **The test** is the core's [`admit`]: drive the mix of the tenants admitted now plus
//!    the newcomer at `T = Σ IOPS_i` through the policy's back end (YFQ, its weights) in
//!    front of the gateway's storage model (the emulated capacity's constant-rate server,
//!    or a device profile's measured device), take each workload's p95 `RT′_i` and admit
//!    iff `RT_i ≥ 1.2·RT′_i` for every one of them (the 20 % margin,
//!    [`storqos_core::fclb::ADMISSION_MARGIN`]). A newcomer that would break an admitted
//!    tenant's demand is refused too: admission protects the admitted.
//! 2. **A refusal** is an NBD error reply to `NBD_OPT_GO` (`NBD_REP_ERR_POLICY` with the
//!    reason as its message, which `nbdinfo` and `qemu-io` print) or, for
//!    `NBD_OPT_EXPORT_NAME` (which has no error reply), the connection closed. The reason
//!    is logged once per tenant (again only if it changes).
//! 3. **The references.** An admitted set's RT″ rows give every admitted workload its
//!    controller reference ([`storqos_core::fclb::AdmissionRow::reference_ns`]), written
//!    to the policy's [`References`] board and used from its next control period on.
//! 4. **Leaving.** A tenant stays admitted while one of its connections is open; when the
//!    last one closes it leaves the set and the others' references are recomputed.
//!
//! Reports are cached by admitted set (tenant ids, sorted): a profile is a short
//! simulation (10 s of simulated time by default, a few ms of CPU at 1,000 IOPS), run on
//! the connection's task only when the set changes to one not seen before.
//! Tenants beyond the policy's workloads are not FCLB workloads: they are never refused.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use storqos_core::fclb::{admit, AdmissionReport, Candidate, ProfileConfig, References};
use storqos_core::spec::{AnyScheduler, DeviceSpec, SchedulerSpec};
use storqos_core::time::NS_PER_MS;

use crate::error::{Error, Result};
use crate::notices::Logger;

/// Request size the profiles assume when none is given: 4 KiB, seed 003's Table 2.
pub const DEFAULT_REQUEST_BYTES: u32 = 4096;
/// Simulated length of one admission profile by default (s): 10 s gives thousands of
/// requests per workload at hundreds of IOPS, a p95 to within a few percent.
pub const DEFAULT_PROFILE_S: f64 = 10.0;
/// Offsets of the profile's random requests span this many bytes by default (1 GiB; a
/// constant-rate server ignores them, a disk model seeks over them).
pub const DEFAULT_SPAN_BYTES: u64 = 1 << 30;

fn four_k() -> u32 {
    DEFAULT_REQUEST_BYTES
}
fn ten_s() -> f64 {
    DEFAULT_PROFILE_S
}
fn one() -> u64 {
    1
}

/// The `admission` object of the gateway's JSON configuration (with an `fclb` policy).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AdmissionConfig {
    /// The storage model the admission test drives (a simulator device spec): the
    /// emulated capacity's `{"kind": "constant", "iops": C}`, or a device profile's.
    pub device: DeviceSpec,
    /// Request size of every workload (bytes, > 0).
    #[serde(default = "four_k")]
    pub bytes: u32,
    /// Simulated length of each profile (s, > 0).
    #[serde(default = "ten_s")]
    pub duration_s: f64,
    /// Seed of the profiles.
    #[serde(default = "one")]
    pub seed: u64,
    /// Offsets span (bytes, > 0).
    #[serde(default)]
    pub span_bytes: Option<u64>,
}

/// Admission control of one gateway: the candidates (workload i = tenant i), the
/// admitted tenants and their open connections, the policy's reference board.
pub struct Admission {
    candidates: Vec<Candidate>,
    weights: Option<Vec<f64>>,
    backend: SchedulerSpec,
    cfg: AdmissionConfig,
    board: References,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Open connections per admitted tenant.
    open: BTreeMap<u32, usize>,
    /// Decisions by set of tenants (sorted ids).
    cache: HashMap<Vec<u32>, std::result::Result<AdmissionReport, String>>,
    /// The last reason logged per refused tenant.
    told: HashMap<u32, String>,
}

/// Holds a tenant's admission while its connection is open.
pub struct TenantGuard {
    admission: Arc<Admission>,
    tenant: u32,
}

impl Drop for TenantGuard {
    fn drop(&mut self) {
        self.admission.leave(self.tenant);
    }
}

impl std::fmt::Debug for TenantGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TenantGuard({})", self.tenant)
    }
}

impl Admission {
    /// Admission control for `policy` (an `fclb` spec: its workloads are the candidates,
    /// named by `names` where given) on `cfg`'s storage model.
    pub fn new(
        cfg: &AdmissionConfig,
        policy: &SchedulerSpec,
        names: &BTreeMap<u32, String>,
    ) -> Result<(Arc<Admission>, References)> {
        let SchedulerSpec::Fclb { workloads, then, .. } = policy else {
            return Err(Error::Config("admission: seed 003's admission control needs an fclb policy".into()));
        };
        if cfg.bytes == 0 {
            return Err(Error::Config("admission.bytes: must be > 0".into()));
        }
        if !(cfg.duration_s.is_finite() && cfg.duration_s > 0.0 && cfg.duration_s <= 3600.0) {
            return Err(Error::Config(format!(
                "admission.duration_s: must be a number of seconds in (0, 3600], got {}",
                cfg.duration_s
            )));
        }
        if cfg.span_bytes == Some(0) {
            return Err(Error::Config("admission.span_bytes: must be > 0".into()));
        }
        let candidates = workloads
            .iter()
            .enumerate()
            .map(|(i, w)| Candidate {
                name: names.get(&(i as u32)).cloned().unwrap_or_else(|| format!("tenant {i}")),
                iops: w.iops,
                rt_ns: w.rt_ns,
                bytes: cfg.bytes,
            })
            .collect::<Vec<_>>();
        let weights = match then.as_ref() {
            SchedulerSpec::Yfq { weights, .. } if !weights.is_empty() => Some(weights.clone()),
            _ => None,
        };
        let board = References::new(candidates.len());
        let adm = Admission {
            candidates,
            weights,
            backend: (**then).clone(),
            cfg: cfg.clone(),
            board: board.clone(),
            state: Mutex::new(State::default()),
        };
        Ok((Arc::new(adm), board))
    }

    /// Ask to admit `tenant` (a connection chose one of its exports). `Ok(None)`: not an
    /// FCLB workload, always served; `Ok(Some(guard))`: admitted while the guard lives;
    /// `Err(reason)`: refused (the reason is logged through `log` once per tenant).
    pub fn admit(self: &Arc<Self>, tenant: u32, log: &Logger) -> std::result::Result<Option<TenantGuard>, String> {
        if tenant as usize >= self.candidates.len() {
            return Ok(None);
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = st.open.get_mut(&tenant) {
            *n += 1;
            return Ok(Some(TenantGuard { admission: self.clone(), tenant }));
        }
        let mut set: Vec<u32> = st.open.keys().copied().collect();
        set.push(tenant);
        set.sort_unstable();
        match self.decide(&mut st, &set) {
            Ok(report) => {
                self.publish(&set, &report);
                st.open.insert(tenant, 1);
                st.told.remove(&tenant);
                Ok(Some(TenantGuard { admission: self.clone(), tenant }))
            }
            Err(why) => {
                if st.told.get(&tenant) != Some(&why) {
                    log(&format!("admission: {why}"));
                    st.told.insert(tenant, why.clone());
                }
                Err(why)
            }
        }
    }

    /// Tenants admitted now (ids).
    pub fn admitted(&self) -> Vec<u32> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).open.keys().copied().collect()
    }

    fn leave(&self, tenant: u32) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(n) = st.open.get_mut(&tenant) else { return };
        *n -= 1;
        if *n > 0 {
            return;
        }
        st.open.remove(&tenant);
        self.board.set(tenant as usize, 0);
        let set: Vec<u32> = st.open.keys().copied().collect();
        if !set.is_empty() {
            // A subset of an admitted set is admitted (less load); refresh its references.
            if let Ok(report) = self.decide(&mut st, &set) {
                self.publish(&set, &report);
            }
        }
    }

    /// The admission report of `set` (cached), `Err` with the reason when refused.
    fn decide(&self, st: &mut State, set: &[u32]) -> std::result::Result<AdmissionReport, String> {
        if let Some(d) = st.cache.get(set) {
            return d.clone();
        }
        let d = self.run(set);
        st.cache.insert(set.to_vec(), d.clone());
        d
    }

    fn run(&self, set: &[u32]) -> std::result::Result<AdmissionReport, String> {
        let cands: Vec<Candidate> = set.iter().map(|&t| self.candidates[t as usize].clone()).collect();
        // Workload j of the profile is the j-th tenant of the set: the back end's
        // weights follow it.
        let backend = match (&self.backend, &self.weights) {
            (SchedulerSpec::Yfq { batch, by, cost, .. }, Some(w)) => SchedulerSpec::Yfq {
                weights: set.iter().map(|&t| w.get(t as usize).copied().unwrap_or(1.0)).collect(),
                batch: *batch,
                by: *by,
                cost: *cost,
            },
            (b, _) => b.clone(),
        };
        let mut cfg =
            ProfileConfig::new(self.cfg.device.clone(), backend, self.cfg.span_bytes.unwrap_or(DEFAULT_SPAN_BYTES));
        cfg.duration = (self.cfg.duration_s * 1e9) as u64;
        cfg.seed = self.cfg.seed;
        let report = admit(&cfg, &cands, &[]).map_err(|e| format!("admission test failed: {e}"))?;
        if report.admitted {
            return Ok(report);
        }
        let ms = |ns: u64| ns as f64 / NS_PER_MS as f64;
        let failing: Vec<String> = report
            .rows
            .iter()
            .filter(|r| !r.ok)
            .map(|r| {
                format!(
                    "{} demands p95 <= {:.3} ms but RT'' = 1.2 x RT' = 1.2 x {:.3} ms = {:.3} ms",
                    r.name,
                    ms(r.rt_ns),
                    ms(r.rt_measured_ns),
                    ms(r.rt_target_ns)
                )
            })
            .collect();
        let names: Vec<&str> = cands.iter().map(|c| c.name.as_str()).collect();
        Err(format!(
            "{} would make T = {:.1} IOPS on the storage model (achieved {:.1} IOPS): {}; refused",
            names.join(" + "),
            report.target_iops,
            report.achieved_iops,
            failing.join("; ")
        ))
    }

    fn publish(&self, set: &[u32], report: &AdmissionReport) {
        for (&t, row) in set.iter().zip(&report.rows) {
            self.board.set(t as usize, row.reference_ns());
        }
    }
}

/// Build `spec` (an `fclb` policy) reading its references from `board`: the same
/// [`storqos_core::fclb::FclbParams::build`] the simulator's spec uses, plus the board.
pub fn build_policy(spec: &SchedulerSpec, board: &References) -> Result<AnyScheduler> {
    let Some((params, then)) = spec.fclb_parts() else {
        return Err(Error::Config("admission: seed 003's admission control needs an fclb policy".into()));
    };
    let inner = then.build().map_err(|e| Error::Config(format!("policy: {e}")))?;
    let f = params.build(inner).map_err(|e| Error::Config(format!("policy: {e}")))?;
    Ok(AnyScheduler::Boxed(Box::new(f.with_references(board.clone()))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use storqos_core::fclb::{Mode, WorkloadSpec};

    fn policy() -> SchedulerSpec {
        let w = |iops: f64, ms: u64| WorkloadSpec::new(iops, ms * NS_PER_MS);
        SchedulerSpec::Fclb {
            workloads: vec![w(400.0, 20), w(200.0, 40), w(600.0, 20), w(50.0, 1)],
            gain_iops_per_ms: Some(storqos_core::fclb::Gain::IopsPerMs(2.0)),
            plant_gain_ms_per_iops: None,
            pole: None,
            mode: Mode::Feedback,
            period_ns: None,
            then: Box::new(serde_json::from_str(r#"{"kind": "yfq", "weights": [2, 1, 1, 1]}"#).expect("a yfq spec")),
        }
    }

    fn admission() -> Arc<Admission> {
        let cfg: AdmissionConfig =
            serde_json::from_str(r#"{"device": {"kind": "constant", "iops": 1000}, "duration_s": 5}"#).unwrap();
        let names = [(0, "w1"), (1, "w2"), (2, "hog"), (3, "tight")].map(|(i, n)| (i, n.to_string())).into();
        Admission::new(&cfg, &policy(), &names).unwrap().0
    }

    #[test]
    fn admits_what_fits_refuses_overload_and_a_tight_slo_and_logs_once() {
        let a = admission();
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = lines.clone();
        let log: Logger = Arc::new(move |m: &str| sink.lock().unwrap().push(m.to_string()));
        let g0 = a.admit(0, &log).unwrap().expect("w1 is a workload");
        let g1 = a.admit(1, &log).unwrap().expect("w2 is a workload");
        // 400 + 200 + 600 IOPS on a 1,000 IOPS server: RT' grows without bound.
        let why = a.admit(2, &log).unwrap_err();
        assert!(why.contains("hog demands p95 <= 20.000 ms") && why.contains("T = 1200.0 IOPS"), "{why}");
        assert!(a.admit(2, &log).is_err());
        // 1 ms against RT'' = 1.2 ms (one 1 ms service): refused even with room.
        let why = a.admit(3, &log).unwrap_err();
        assert!(why.contains("tight demands p95 <= 1.000 ms"), "{why}");
        assert_eq!(lines.lock().unwrap().len(), 2, "{:?}", lines.lock().unwrap());
        // Not a workload: always served.
        assert!(a.admit(9, &log).unwrap().is_none());
        // The admitted references: RT/1.2 where the server has slack (RT'' = 1.2 ms).
        assert_eq!(a.board.get(0), Some((20.0 * NS_PER_MS as f64 / 1.2).round() as u64));
        assert_eq!(a.admitted(), vec![0, 1]);
        drop(g1);
        assert_eq!(a.admitted(), vec![0]);
        assert_eq!(a.board.get(1), None);
        drop(g0);
        assert!(a.admitted().is_empty());
    }

    #[test]
    fn bad_settings_are_named() {
        let cfg: AdmissionConfig =
            serde_json::from_str(r#"{"device": {"kind": "constant", "iops": 1000}, "bytes": 0}"#).unwrap();
        let e = Admission::new(&cfg, &policy(), &BTreeMap::new()).err().unwrap().to_string();
        assert!(e.contains("admission.bytes: must be > 0"), "{e}");
        let e = Admission::new(&cfg, &SchedulerSpec::Fcfs, &BTreeMap::new()).err().unwrap().to_string();
        assert!(e.contains("needs an fclb policy"), "{e}");
    }
}
