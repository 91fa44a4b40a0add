//! The two-level scheduler of seed 001 (`001_f68b1e7da7bb5f73.txt`, Zhang, Riska,
//! Sivasubramaniam, Wang & Riedel, "Storage Performance Virtualization via Throughput and
//! Latency Control") and its baselines.
//!
//! ```text
//!  class FIFOs + credits        EDF queue + threshold L^O          storage utility
//!  ┌──────────── SARC ───────┐  ┌──────────── AVATAR ───────────┐  ┌────────────────┐
//!  │ q_1 [r_1] ─┐            │  │ deadline = release + D_i       │  │ array: k disks │
//!  │ q_2 [r_2] ─┼─ release ──┼─▶│ dispatch while outstanding<L^O ├─▶│ reorders its   │
//!  │ …          │            │  │ (late requests always)         │  │ queue (SPTF)   │
//!  └────────────┴────────────┘  └──────────┬─────────────────────┘  └────────────────┘
//!           ▲  replenish on period, spare arrival, spare transition │
//!           └──────────────────── spareness (§3.4.4) ◀──────────────┘
//! ```
//!
//! Each level is a [`Scheduler`] value: [`Sarc`] (§3.3) *wraps* a [`LowLevel`] scheduler
//! — [`Avatar`] (§3.4) or the [`Facade`] baseline — and releases requests into it; the
//! low level dispatches to the device. The low level tells the high level whether the
//! utility has spare bandwidth through [`LowLevel::spare`], read after every call into
//! it (no clock: windows and replenishments run on `next_timer` / `on_timer(now)`).
//!
//! One concept per file:
//! - [`slo`]: ⟨R_i, D_i⟩ with the percentile guarantee (§3.1) and the per-second verdict;
//! - [`monitor`]: AVATAR's Monitor (§3.4.1), shared with Facade;
//! - [`edf`]: the low level's EDF queue, one deadline-sorted FIFO per class;
//! - [`avatar`]: AVATAR's Controller (Fig. 4), Dispatcher (§3.4.3), spareness (§3.4.4);
//! - [`facade`]: the Facade baseline (E1), as the spec reads it;
//! - [`sarc`]: SARC's credits and three replenishment triggers (§3.3);
//! - [`fixed`](mod@fixed), [`adaptive`]: the FIXED and ADAPTIVE rate-controller baselines (E2);
//! - [`config`]: the JSON parameters of the four policy kinds.

pub mod adaptive;
pub mod avatar;
pub mod config;
pub mod edf;
pub mod facade;
pub mod fixed;
pub mod monitor;
pub mod sarc;
pub mod slo;

pub use adaptive::Adaptive;
pub use avatar::Avatar;
pub use config::{SloSpec, TwoLevelSpec, Upper};
pub use facade::Facade;
pub use fixed::fixed;
pub use monitor::Monitor;
pub use sarc::{Replenishment, Sarc, Trigger};
pub use slo::{judge, Slo, SloSet, Verdict};

use crate::scheduler::Scheduler;
use crate::time::Nanos;

/// Per-class gauge names `"{prefix}.{i}"` for classes `0..classes`, built once at
/// construction: gauges are sampled at every summary window, and a name built there
/// would allocate a `String` per gauge and window.
pub(crate) fn class_gauge_names<const K: usize>(prefixes: [&str; K], classes: usize) -> Vec<[String; K]> {
    (0..classes).map(|i| prefixes.map(|p| format!("{p}.{i}"))).collect()
}

/// A low-level scheduler SARC can sit on: it owns the device queue and can say whether
/// the utility has spare bandwidth.
pub trait LowLevel: Scheduler {
    /// §3.4.4: does the storage utility have spare bandwidth now?
    fn spare(&self) -> bool;
    /// The SLO percentile of class `class`'s low-level response time over the last closed
    /// window, if it completed anything (ADAPTIVE's feedback).
    fn class_latency(&self, class: usize) -> Option<Nanos>;
    /// The current queue threshold / device depth (∞ in AVATAR's overload state).
    fn threshold(&self) -> f64;
    /// The low level's Monitor (cumulative misses, open-window statistics).
    fn monitor(&self) -> &Monitor;
}

/// SARC over AVATAR (also FIXED / ADAPTIVE over AVATAR, by [`Replenishment`]).
pub type SarcAvatar = Sarc<Avatar>;
/// SARC over Facade.
pub type SarcFacade = Sarc<Facade>;
