//! Admission control of seed 003 (§2 "Simple Admission Control", Fig. 1; §4.3, Fig. 5,
//! Table 3).
//!
//! Given workloads `W_i` demanding `(size_i, IOPS_i, RT_i)` on storage `S`:
//!
//! 1. generate the mixed requests — size_i with probability `IOPS_i / T` — at the target
//!    rate `T = Σ IOPS_i` ([`crate::fclb::tuning::profile_point`]);
//! 2. take each workload's 95th percentile response time `RT′_i` at that rate;
//! 3. add the [`ADMISSION_MARGIN`]: `RT″_i = (1 + 0.2)·RT′_i`;
//! 4. admit the set iff `RT_i ≥ RT″_i` for every `i`.
//!
//! `RT″_i` is then the controller's reference (§4.3: "RT″ is internally used for the
//! feedback control as a reference value"), or the demand less the same 20 % margin when
//! that is higher ([`AdmissionRow::reference_ns`]). The report also carries the storage's
//! IOPS → p95 curve and the end of its stable area (§4.2, Fig. 4), and says whether `T`
//! lies inside it.

use crate::error::{config, Result};
use crate::fclb::gate::WorkloadSpec;
use crate::fclb::tuning::{profile_curve, profile_point, stable_limit, MixEntry, ProfileConfig, ProfilePoint};
use crate::time::Nanos;

/// Margin on the measured response time: "compute a target response time with a 20 %
/// margin" (seed 003 §2).
pub const ADMISSION_MARGIN: f64 = 0.2;

/// One workload to admit.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// Name for reports.
    pub name: String,
    /// Demanded IOPS_i.
    pub iops: f64,
    /// Demanded response time RT_i (ns).
    pub rt_ns: Nanos,
    /// Request size (bytes).
    pub bytes: u32,
}

/// One row of the Table 3-style report.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmissionRow {
    /// Workload name.
    pub name: String,
    /// Demanded IOPS_i (T_i in Table 3).
    pub iops: f64,
    /// Demanded RT_i (ns).
    pub rt_ns: Nanos,
    /// Measured p95 at T: RT′_i (ns).
    pub rt_measured_ns: Nanos,
    /// Deliverable target with the margin: RT″_i = 1.2·RT′_i (ns).
    pub rt_target_ns: Nanos,
    /// RT_i ≥ RT″_i.
    pub ok: bool,
}

/// The admission decision and its evidence.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmissionReport {
    /// T = Σ IOPS_i.
    pub target_iops: f64,
    /// Throughput the storage achieved at T.
    pub achieved_iops: f64,
    /// Per workload.
    pub rows: Vec<AdmissionRow>,
    /// Every row ok.
    pub admitted: bool,
    /// The IOPS → p95 curve (empty unless asked for).
    pub curve: Vec<ProfilePoint>,
    /// End of the stable area of the curve (IOPS), when a curve was profiled.
    pub stable_limit_iops: Option<f64>,
}

impl AdmissionRow {
    /// The controller reference for this workload: `max(RT″_i, RT_i / 1.2)`.
    ///
    /// The seed uses RT″ (34 and 37 ms against demands of 35 and 38 ms in Table 3): the
    /// storage it profiled was already busy at T. When the storage has slack at T, RT″
    /// lies far below the demand (our disk: ≈ 22 ms against 35 ms) and would keep the
    /// loop from handing out the surplus of an idle workload, the scheme's second aim;
    /// the reference then keeps the same 20 % margin below the demand instead. On the
    /// seed's own numbers the rule returns RT″ (34 > 35/1.2 = 29.2).
    pub fn reference_ns(&self) -> Nanos {
        let margin_below_demand = (self.rt_ns as f64 / (1.0 + ADMISSION_MARGIN)).round() as Nanos;
        self.rt_target_ns.max(margin_below_demand).min(self.rt_ns)
    }
}

impl AdmissionReport {
    /// The admitted workloads as FCLB workload specs: demanded IOPS and RT, reference
    /// [`AdmissionRow::reference_ns`], and the given bucket sizes.
    pub fn workload_specs(&self, buckets: &[Option<f64>]) -> Vec<WorkloadSpec> {
        self.rows
            .iter()
            .enumerate()
            .map(|(i, r)| WorkloadSpec {
                iops: r.iops,
                rt_ns: r.rt_ns,
                ref_ns: Some(r.reference_ns()),
                bucket: buckets.get(i).copied().flatten(),
                ceiling_iops: None,
            })
            .collect()
    }
}

/// Run the admission test of seed 003 §2 for `candidates` on `cfg`'s storage; also
/// profile the curve at `curve_rates` (IOPS, ascending; may be empty).
pub fn admit(cfg: &ProfileConfig, candidates: &[Candidate], curve_rates: &[f64]) -> Result<AdmissionReport> {
    if candidates.is_empty() {
        return config("admission: no workloads given");
    }
    for c in candidates {
        if !(c.iops > 0.0 && c.iops.is_finite()) {
            return config(format!("admission: workload {}: IOPS must be > 0, got {}", c.name, c.iops));
        }
        if c.rt_ns == 0 {
            return config(format!("admission: workload {}: response time must be > 0", c.name));
        }
        if c.bytes == 0 {
            return config(format!("admission: workload {}: request size must be > 0 bytes", c.name));
        }
    }
    let mix: Vec<MixEntry> = candidates.iter().map(|c| MixEntry { iops: c.iops, bytes: c.bytes }).collect();
    let target: f64 = candidates.iter().map(|c| c.iops).sum();
    let at_t = profile_point(cfg, &mix, target)?;
    let rows: Vec<AdmissionRow> = candidates
        .iter()
        .zip(&at_t.p95_ns)
        .map(|(c, &p95)| {
            let target_ns = (p95 as f64 * (1.0 + ADMISSION_MARGIN)).round() as Nanos;
            AdmissionRow {
                name: c.name.clone(),
                iops: c.iops,
                rt_ns: c.rt_ns,
                rt_measured_ns: p95,
                rt_target_ns: target_ns,
                ok: c.rt_ns >= target_ns,
            }
        })
        .collect();
    let curve = if curve_rates.is_empty() { Vec::new() } else { profile_curve(cfg, &mix, curve_rates)? };
    let stable_limit_iops = stable_limit(&curve);
    Ok(AdmissionReport {
        target_iops: target,
        achieved_iops: at_t.achieved_iops,
        admitted: rows.iter().all(|r| r.ok),
        rows,
        curve,
        stable_limit_iops,
    })
}
