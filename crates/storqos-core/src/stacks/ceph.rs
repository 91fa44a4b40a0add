//! Ceph's OSD mClock scheduler and its profiles, as Ceph Reef 18.2.7 runs them (Debian
//! trixie's `ceph` source): `src/osd/scheduler/mClockScheduler.cc` and `.h`,
//! `src/osd/scheduler/OpSchedulerItem.h` (the classes), `src/osd/OSD.cc` (`enqueue_op`: an
//! op's cost) and `src/common/options/osd.yaml.in` (the options). The profiles' values,
//! the shared client tags and the cost are the same in post-Squid `main` (where the
//! profile code moved to `common/mclock_common`), so Squid (v19) schedules as modelled.
//!
//! ## Classes and their tags
//!
//! The OSD puts every op in a class (`op_scheduler_class`): `client`, `background_recovery`
//! (recovery and backfill), `background_best_effort` (scrub, snap trim, PG deletion) and
//! `immediate` (served ahead of mClock). Each class's ops are **one** dmclock client:
//! `get_scheduler_id` pairs the op's class with an empty `client_profile_id_t`, so **all
//! client ops of the OSD share one set of tags**, whatever Ceph client sent them, with the
//! `osd_mclock_scheduler_client_*` values (`ClientRegistry::default_external_client_info`;
//! the per-client map `external_client_infos` is never filled). The header says so: both
//! ids are 0 "Reef and below" so that all external clients share the client allocation.
//! Within a class, ops are served in arrival order (one dmclock client's queue).
//!
//! ## Profiles (`set_config_defaults_from_profile`)
//!
//! Reservation and limit are fractions of the OSD's capacity (0: no reservation, no
//! limit), the weight a whole number:
//!
//! | `osd_mclock_profile` | client res / wgt / lim | recovery | best effort |
//! |---|---|---|---|
//! | `high_client_ops` | 0.6 / 2 / none | 0.4 / 1 / none | none / 1 / 0.7 |
//! | `balanced` (Reef's default) | 0.5 / 1 / none | 0.5 / 1 / none | none / 1 / 0.9 |
//! | `high_recovery_ops` | 0.3 / 1 / none | 0.7 / 2 / none | none / 1 / none |
//! | `custom` | `osd_mclock_scheduler_client_*` | `*_background_recovery_*` | `*_background_best_effort_*` |
//!
//! With a built-in profile, setting one of the nine options is undone (`handle_conf_change`
//! removes it and restores the profile's value): they count only with `custom`.
//!
//! ## Capacity and cost
//!
//! dmclock counts in bytes (`ClientRegistry::update_from_config`,
//! `set_osd_capacity_params_from_config`, `calc_scaled_cost`): a fraction `f` is
//! `f · osd_mclock_max_sequential_bandwidth / shards` bytes/s, and an op costs `max(its
//! cost, cost_per_io)` bytes with `cost_per_io = bandwidth / osd_mclock_max_capacity_iops`
//! (truncated to whole bytes). A client op's cost is its message's data length: a write's
//! payload, 0 for a read. In units of one IO (`cost_per_io` bytes) that is a reservation
//! or limit of `f · capacity` IOPS and a cost of `max(1, bytes / cost_per_io)`.
//!
//! ## The model
//!
//! [`CephMclock`] is storqos' [`Mclock`] between three flows, keyed by class
//! ([`FlowKey::Class`]): each request's `class` is set to its tenant's flow (numbered as
//! Ceph's classes: 0 recovery, 1 best effort, 3 client) on the way in and given back on the
//! way out, so the results still report the simulator's classes. Every tenant of class
//! [`OpClass::Client`] feeds the one client flow, every recovery tenant the recovery flow,
//! every best-effort tenant the best-effort flow. Limits are hard caps (Ceph's
//! `AtLimit::Wait`). By default every request costs one IO, which is Ceph's cost for
//! client reads and for writes up to `cost_per_io` (57 KiB with the SSD defaults, 488 KiB
//! with the HDD ones); [`CephMclock::with_sequential_bandwidth`] charges Ceph's cost.
//! A recovery or best-effort request is charged for its bytes in either direction.
//!
//! ## Not modelled
//!
//! - Shards: the OSD splits its capacity over `osd_op_num_shards` mClock queues (8 for
//!   SSDs, 1 for HDDs in Reef) and places each PG's ops in one; here one queue holds the
//!   whole capacity.
//! - The `immediate` class and ops above `osd_op_queue_cut_off` (served ahead of mClock),
//!   the recovery and backfill limits a profile sets (`osd_max_backfills`,
//!   `osd_recovery_max_active`: how much recovery is offered), the OSD benchmark that
//!   measures the capacity at boot, changing profiles at run time.
//! - dmclock's tagging details where [`Mclock`] differs: dmclock floors a proportion tag
//!   at the request's arrival time and shifts idle clients' tags (`prop_delta`), storqos'
//!   mClock compares with its virtual time; dmclock ages idle clients out
//!   (`idle_age`, `erase_age`); the anticipation timeout (`osd_mclock_scheduler_
//!   anticipation_timeout`, 0 by default) is not modelled.
//! - A custom reservation above its limit: Ceph takes it (the reservation phase ignores
//!   limits); storqos' mClock refuses it, and so does this model. A weight of 0: Ceph's
//!   option takes it (dmclock then never advances the class's weight tags); refused here.

use std::collections::VecDeque;

use serde::Deserialize;

use crate::device::DeviceState;
use crate::error::{config, Result};
use crate::request::{Completion, Op, Request, MAX_TENANTS};
use crate::scheduler::Scheduler;
use crate::schedulers::mclock::{Mclock, MclockCost};
use crate::schedulers::tags::FlowKey;
use crate::time::Nanos;

/// Policy name in reports.
pub const NAME: &str = "ceph-mclock";

/// `osd_mclock_profile`'s default in Reef (and Squid).
pub const DEFAULT_PROFILE: &str = "balanced";

/// `osd_mclock_profile`'s values (`enum_values`, in the option's order).
pub const PROFILES: [&str; 4] = ["balanced", "high_recovery_ops", "high_client_ops", "custom"];

/// `osd_mclock_scheduler_*_wgt`'s default.
pub const DEFAULT_WGT: u64 = 1;

/// `osd_mclock_max_capacity_iops_hdd`'s default, IOPS.
pub const OSD_MCLOCK_MAX_CAPACITY_IOPS_HDD: f64 = 315.0;

/// `osd_mclock_max_capacity_iops_ssd`'s default, IOPS.
pub const OSD_MCLOCK_MAX_CAPACITY_IOPS_SSD: f64 = 21500.0;

/// `osd_mclock_max_sequential_bandwidth_hdd`'s default, bytes/s (150 MiB/s).
pub const OSD_MCLOCK_MAX_SEQUENTIAL_BANDWIDTH_HDD: u64 = 150 << 20;

/// `osd_mclock_max_sequential_bandwidth_ssd`'s default, bytes/s (1200 MiB/s).
pub const OSD_MCLOCK_MAX_SEQUENTIAL_BANDWIDTH_SSD: u64 = 1200 << 20;

/// The smallest capacity Ceph uses, IOPS: a smaller `osd_mclock_max_capacity_iops` is
/// taken as this (`set_osd_capacity_params_from_config`).
pub const MIN_CAPACITY_IOPS: f64 = 1.0;

/// The number of flow indices the classes span (Ceph's `op_scheduler_class` values up to
/// `client`).
const FLOWS: usize = 4;

/// The mClock class of a tenant's requests (Ceph's `op_scheduler_class`, whose value is the
/// flow index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum OpClass {
    /// `background_recovery`: recovery and backfill.
    BackgroundRecovery = 0,
    /// `background_best_effort`: scrub, snap trim, PG deletion.
    BackgroundBestEffort = 1,
    /// `client`: I/O of Ceph clients (default).
    #[default]
    Client = 3,
}

impl OpClass {
    /// Every class, in Ceph's order.
    pub const ALL: [OpClass; 3] = [OpClass::BackgroundRecovery, OpClass::BackgroundBestEffort, OpClass::Client];

    /// The flow index of the class (its `op_scheduler_class` value).
    #[inline]
    pub fn flow(self) -> u32 {
        self as u32
    }

    /// The spec's name of the class: `"client"`, `"recovery"`, `"best_effort"`.
    pub fn name(self) -> &'static str {
        match self {
            OpClass::BackgroundRecovery => "recovery",
            OpClass::BackgroundBestEffort => "best_effort",
            OpClass::Client => "client",
        }
    }

    /// The class of a spec name, if it is one.
    pub fn parse(name: &str) -> Option<OpClass> {
        OpClass::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The middle of the class's option names (`osd_mclock_scheduler_<this>_res`).
    pub fn option(self) -> &'static str {
        match self {
            OpClass::BackgroundRecovery => "background_recovery",
            OpClass::BackgroundBestEffort => "background_best_effort",
            OpClass::Client => "client",
        }
    }
}

/// A class's mClock parameters as Ceph's options give them: reservation and limit as
/// fractions of the capacity (0: none), the weight a whole number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Allocation {
    /// `osd_mclock_scheduler_*_res`, a fraction in [0, 1] (0: no reservation).
    pub res: f64,
    /// `osd_mclock_scheduler_*_wgt` (≥ 1).
    pub wgt: u64,
    /// `osd_mclock_scheduler_*_lim`, a fraction in [0, 1] (0: no limit).
    pub lim: f64,
}

impl Allocation {
    const fn new(res: f64, wgt: u64, lim: f64) -> Self {
        Allocation { res, wgt, lim }
    }
}

/// The allocations of the three classes (`profile_t`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Profile {
    /// The client class.
    pub client: Allocation,
    /// The recovery class.
    pub background_recovery: Allocation,
    /// The best-effort class.
    pub background_best_effort: Allocation,
}

impl Profile {
    /// `high_client_ops`.
    pub const HIGH_CLIENT_OPS: Profile = Profile {
        client: Allocation::new(0.6, 2, 0.0),
        background_recovery: Allocation::new(0.4, 1, 0.0),
        background_best_effort: Allocation::new(0.0, 1, 0.7),
    };

    /// `balanced`.
    pub const BALANCED: Profile = Profile {
        client: Allocation::new(0.5, 1, 0.0),
        background_recovery: Allocation::new(0.5, 1, 0.0),
        background_best_effort: Allocation::new(0.0, 1, 0.9),
    };

    /// `high_recovery_ops`.
    pub const HIGH_RECOVERY_OPS: Profile = Profile {
        client: Allocation::new(0.3, 1, 0.0),
        background_recovery: Allocation::new(0.7, 2, 0.0),
        background_best_effort: Allocation::new(0.0, 1, 0.0),
    };

    /// `custom` with every option at its default (no reservation, weight 1, no limit).
    pub const CUSTOM_DEFAULTS: Profile = Profile {
        client: Allocation::new(0.0, DEFAULT_WGT, 0.0),
        background_recovery: Allocation::new(0.0, DEFAULT_WGT, 0.0),
        background_best_effort: Allocation::new(0.0, DEFAULT_WGT, 0.0),
    };

    /// The built-in profile named `name` (not `custom`).
    pub fn builtin(name: &str) -> Option<Profile> {
        match name {
            "high_client_ops" => Some(Profile::HIGH_CLIENT_OPS),
            "balanced" => Some(Profile::BALANCED),
            "high_recovery_ops" => Some(Profile::HIGH_RECOVERY_OPS),
            _ => None,
        }
    }

    /// The allocation of `class`.
    pub fn of(&self, class: OpClass) -> Allocation {
        match class {
            OpClass::Client => self.client,
            OpClass::BackgroundRecovery => self.background_recovery,
            OpClass::BackgroundBestEffort => self.background_best_effort,
        }
    }

    /// Refuse what Ceph's options refuse (fractions outside [0, 1]) and what this model
    /// does not take (a weight of 0, a reservation above its limit), naming the option.
    pub fn check(&self) -> Result<()> {
        for class in OpClass::ALL {
            let a = self.of(class);
            let o = format!("osd_mclock_scheduler_{}", class.option());
            for (v, what) in [(a.res, "res"), (a.lim, "lim")] {
                if !(0.0..=1.0).contains(&v) {
                    return config(format!("{NAME}: {o}_{what} = {v} is outside [0, 1] (the option's min and max)"));
                }
            }
            if a.wgt == 0 {
                return config(format!(
                    "{NAME}: {o}_wgt is 0 (Ceph's uint option takes it, but dmclock then never advances the \
                     class's weight tags; this model needs a weight >= 1)"
                ));
            }
            if a.lim > 0.0 && a.res > a.lim {
                return config(format!(
                    "{NAME}: {o}_res ({}) is above {o}_lim ({}) (Ceph takes it: its reservation phase ignores \
                     limits; this model's mClock refuses a reservation above the limit)",
                    a.res, a.lim
                ));
            }
        }
        Ok(())
    }
}

/// A request's own class and size, kept while the mClock holds it with its flow's.
#[derive(Clone, Copy, Debug)]
struct Original {
    id: u64,
    class: u32,
    bytes: u32,
}

/// Ceph's OSD mClock with a profile: [`Mclock`] between the client, recovery and
/// best-effort flows.
#[derive(Clone, Debug)]
pub struct CephMclock {
    inner: Mclock,
    profile_name: String,
    profile: Profile,
    capacity_iops: f64,
    classes: Vec<OpClass>,
    /// `Some(cost_per_io)` bytes: requests cost Ceph's scaled cost, else 1.
    cost_per_io: Option<u32>,
    /// Per flow, the own class and size of the queued requests whose class is not their
    /// tenant or whose size the cost changed, oldest first (the mClock serves a flow in
    /// arrival order); any other request gets its tenant back as its class.
    originals: [VecDeque<Original>; FLOWS],
}

impl CephMclock {
    /// The OSD scheduler of `profile` (named `profile_name` in reports), of
    /// `osd_mclock_max_capacity_iops = capacity_iops` (> 0; below [`MIN_CAPACITY_IOPS`] it
    /// is taken as that, as Ceph does), tenant `i` of class `classes[i]` (tenants beyond the
    /// list are clients); every request costs one IO.
    pub fn new(profile_name: &str, profile: Profile, capacity_iops: f64, classes: Vec<OpClass>) -> Result<Self> {
        if !(capacity_iops.is_finite() && capacity_iops > 0.0) {
            return config(format!(
                "{NAME}: capacity_iops (osd_mclock_max_capacity_iops) must be a finite number > 0, got \
                 {capacity_iops}"
            ));
        }
        if classes.len() > MAX_TENANTS as usize {
            return config(format!("{NAME}: {} tenants listed, at most {MAX_TENANTS}", classes.len()));
        }
        profile.check()?;
        let capacity_iops = capacity_iops.max(MIN_CAPACITY_IOPS);
        Ok(CephMclock {
            inner: Self::mclock_for(&profile, capacity_iops, None)?,
            profile_name: profile_name.to_string(),
            profile,
            capacity_iops,
            classes,
            cost_per_io: None,
            originals: Default::default(),
        })
    }

    /// Charge requests Ceph's cost (`calc_scaled_cost`) for an OSD of
    /// `osd_mclock_max_sequential_bandwidth = bytes_per_sec` (taken as at least 1, as Ceph
    /// does): `cost_per_io = bytes_per_sec / capacity` bytes, truncated, and a request of
    /// `b` bytes (0 for a client read) costs `max(b, cost_per_io)` of them. Set before use.
    pub fn with_sequential_bandwidth(mut self, bytes_per_sec: u64) -> Result<Self> {
        debug_assert_eq!(self.inner.queued(), 0, "change the cost model before enqueueing");
        let bw = bytes_per_sec.max(1) as f64;
        let per_io = bw / self.capacity_iops;
        if per_io < 1.0 || per_io > u32::MAX as f64 {
            return config(format!(
                "{NAME}: osd_mclock_max_sequential_bandwidth = {bytes_per_sec} B/s over {} IOPS is {per_io} bytes \
                 per IO; this model needs 1 ..= {} (Ceph keeps it in 32 bits)",
                self.capacity_iops,
                u32::MAX
            ));
        }
        let cost_per_io = per_io as u32;
        self.inner = Self::mclock_for(&self.profile, bw / f64::from(cost_per_io), Some(cost_per_io))?;
        self.cost_per_io = Some(cost_per_io);
        Ok(self)
    }

    /// The mClock of `profile` where a fraction 1 is `unit_iops` IOs a second, costs by
    /// `cost_per_io` when given.
    fn mclock_for(profile: &Profile, unit_iops: f64, cost_per_io: Option<u32>) -> Result<Mclock> {
        let mut reservations = vec![0.0; FLOWS];
        let mut weights = vec![1.0; FLOWS];
        let mut limits = vec![None; FLOWS];
        for class in OpClass::ALL {
            let a = profile.of(class);
            let k = class.flow() as usize;
            reservations[k] = a.res * unit_iops;
            weights[k] = a.wgt as f64;
            limits[k] = (a.lim > 0.0).then_some(a.lim * unit_iops);
        }
        let m = Mclock::new(reservations, weights, limits)?.with_key(FlowKey::Class);
        match cost_per_io {
            None => Ok(m),
            Some(c) => m.with_cost(MclockCost::Size(c)),
        }
    }

    /// The profile's allocations.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// `osd_mclock_max_capacity_iops` as used (at least [`MIN_CAPACITY_IOPS`]).
    pub fn capacity_iops(&self) -> f64 {
        self.capacity_iops
    }

    /// Bytes per IO when requests are charged Ceph's cost.
    pub fn cost_per_io(&self) -> Option<u32> {
        self.cost_per_io
    }

    /// The class of `tenant`'s requests.
    pub fn class_of(&self, tenant: u32) -> OpClass {
        self.classes.get(tenant as usize).copied().unwrap_or_default()
    }

    /// The mClock underneath (its phases' counts).
    pub fn mclock(&self) -> &Mclock {
        &self.inner
    }

    /// The bytes Ceph charges for `req` of `class`: a client read carries no data.
    #[inline]
    fn payload(req: &Request, class: OpClass) -> u32 {
        if class == OpClass::Client && req.op == Op::Read {
            0
        } else {
            req.bytes
        }
    }
}

impl Scheduler for CephMclock {
    fn name(&self) -> String {
        format!("{NAME}({})", self.profile_name)
    }

    fn enqueue(&mut self, mut req: Request, now: Nanos) {
        let class = self.class_of(req.tenant);
        let flow = class.flow();
        if req.class != req.tenant || self.cost_per_io.is_some() {
            self.originals[flow as usize].push_back(Original { id: req.id, class: req.class, bytes: req.bytes });
        }
        if let Some(per_io) = self.cost_per_io {
            // The mClock's size cost is 1 + b / per_io: b = payload − per_io (at least 0)
            // makes it max(payload, per_io) / per_io, Ceph's scaled cost in IOs.
            req.bytes = Self::payload(&req, class).saturating_sub(per_io);
        }
        req.class = flow;
        self.inner.enqueue(req, now);
    }

    fn dispatch(&mut self, now: Nanos, dev: &DeviceState) -> Option<Request> {
        let mut req = self.inner.dispatch(now, dev)?;
        let kept = &mut self.originals[req.class as usize];
        match kept.front() {
            Some(own) if own.id == req.id => {
                (req.class, req.bytes) = (own.class, own.bytes);
                kept.pop_front();
            }
            _ => {
                debug_assert!(self.cost_per_io.is_none(), "with a cost, every request is kept");
                req.class = req.tenant;
            }
        }
        Some(req)
    }

    fn complete(&mut self, done: &Completion, now: Nanos) {
        self.inner.complete(done, now);
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.inner.next_timer()
    }

    fn on_timer(&mut self, now: Nanos) {
        self.inner.on_timer(now);
    }

    fn queued(&self) -> usize {
        self.inner.queued()
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        self.inner.gauges(sink);
    }
}

/// The simulator's spec of an OSD's mClock: the profile, the capacity, each tenant's class
/// and, with `custom`, the nine `osd_mclock_scheduler_*` options.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CephMclockSpec {
    /// `osd_mclock_profile`: `"balanced"` (empty: Ceph's default, [`DEFAULT_PROFILE`]),
    /// `"high_client_ops"`, `"high_recovery_ops"` or `"custom"`.
    #[serde(default)]
    pub profile: String,
    /// `osd_mclock_max_capacity_iops_[hdd|ssd]`, IOPS (> 0).
    #[serde(default)]
    pub capacity_iops: f64,
    /// Tenant `i`'s class: `"client"` (default, also beyond the list), `"recovery"` or
    /// `"best_effort"`.
    #[serde(default)]
    pub classes: Vec<String>,
    /// Custom: `osd_mclock_scheduler_client_res`, a fraction of the capacity.
    #[serde(default)]
    pub client_res: Option<f64>,
    /// Custom: `osd_mclock_scheduler_client_wgt`, a whole number ≥ 1.
    #[serde(default)]
    pub client_wgt: Option<f64>,
    /// Custom: `osd_mclock_scheduler_client_lim`, a fraction of the capacity (0: none).
    #[serde(default)]
    pub client_lim: Option<f64>,
    /// Custom: `osd_mclock_scheduler_background_recovery_res`.
    #[serde(default)]
    pub recovery_res: Option<f64>,
    /// Custom: `osd_mclock_scheduler_background_recovery_wgt`.
    #[serde(default)]
    pub recovery_wgt: Option<f64>,
    /// Custom: `osd_mclock_scheduler_background_recovery_lim`.
    #[serde(default)]
    pub recovery_lim: Option<f64>,
    /// Custom: `osd_mclock_scheduler_background_best_effort_res`.
    #[serde(default)]
    pub best_effort_res: Option<f64>,
    /// Custom: `osd_mclock_scheduler_background_best_effort_wgt`.
    #[serde(default)]
    pub best_effort_wgt: Option<f64>,
    /// Custom: `osd_mclock_scheduler_background_best_effort_lim`.
    #[serde(default)]
    pub best_effort_lim: Option<f64>,
}

impl CephMclockSpec {
    /// The custom values by class: (res, wgt, lim) of each, with the spec's field prefix.
    fn custom(&self) -> [(OpClass, &'static str, [Option<f64>; 3]); 3] {
        [
            (OpClass::Client, "client", [self.client_res, self.client_wgt, self.client_lim]),
            (OpClass::BackgroundRecovery, "recovery", [self.recovery_res, self.recovery_wgt, self.recovery_lim]),
            (
                OpClass::BackgroundBestEffort,
                "best_effort",
                [self.best_effort_res, self.best_effort_wgt, self.best_effort_lim],
            ),
        ]
    }

    /// The scheduler, or the first setting Ceph would refuse or undo (naming the option).
    pub fn build(&self) -> Result<CephMclock> {
        let name = if self.profile.is_empty() { DEFAULT_PROFILE } else { self.profile.as_str() };
        if !PROFILES.contains(&name) {
            return config(format!(
                "{NAME}: profile (osd_mclock_profile) = \"{name}\" is not one of {} (the option's values)",
                PROFILES.join(", ")
            ));
        }
        let mut profile = match Profile::builtin(name) {
            Some(p) => p,
            None => Profile::CUSTOM_DEFAULTS,
        };
        let custom = name == "custom";
        for (class, field, [res, wgt, lim]) in self.custom() {
            let o = format!("osd_mclock_scheduler_{}", class.option());
            for (v, what) in [(res, "res"), (wgt, "wgt"), (lim, "lim")] {
                if v.is_some() && !custom {
                    return config(format!(
                        "{NAME}: {field}_{what} ({o}_{what}) is set with the built-in profile {name} (Ceph undoes \
                         it and keeps the profile's value; use profile \"custom\")"
                    ));
                }
            }
            let mut a = profile.of(class);
            if let Some(r) = res {
                a.res = r;
            }
            if let Some(l) = lim {
                a.lim = l;
            }
            if let Some(w) = wgt {
                if !(w.is_finite() && w >= 1.0 && w.fract() == 0.0 && w <= u64::MAX as f64) {
                    return config(format!(
                        "{NAME}: {field}_wgt ({o}_wgt) = {w} must be a whole number >= 1 (a uint option; 0 is \
                         not modelled)"
                    ));
                }
                a.wgt = w as u64;
            }
            match class {
                OpClass::Client => profile.client = a,
                OpClass::BackgroundRecovery => profile.background_recovery = a,
                OpClass::BackgroundBestEffort => profile.background_best_effort = a,
            }
        }
        let mut classes = Vec::with_capacity(self.classes.len());
        for (i, c) in self.classes.iter().enumerate() {
            match OpClass::parse(c) {
                Some(k) => classes.push(k),
                None => {
                    return config(format!(
                        "{NAME}: classes[{i}] = \"{c}\" is not client, recovery or best_effort (Ceph's client, \
                         background_recovery and background_best_effort classes)"
                    ))
                }
            }
        }
        CephMclock::new(name, profile, self.capacity_iops, classes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::constant::ConstantRate;
    use crate::sim::{simulate, ClosedClient, SimConfig};
    use crate::time::NS_PER_SEC;

    /// Seconds simulated in the steady-state runs.
    const SECS: u64 = 20;
    /// Accepted relative deviation of a long-run rate from its hand-computed share.
    const TOL: f64 = 0.02;

    fn spec(profile: &str, classes: &[&str]) -> CephMclockSpec {
        CephMclockSpec {
            profile: profile.into(),
            capacity_iops: 1000.0,
            classes: classes.iter().map(|c| c.to_string()).collect(),
            ..Default::default()
        }
    }

    /// Completed IOPS per tenant with every tenant backlogged (8 requests in flight of
    /// `bytes`, writes when `write`), on a constant device of `device_iops`.
    fn rates_of(s: &mut CephMclock, tenants: u32, device_iops: f64, bytes: u32, write: bool) -> Vec<f64> {
        let clients: Vec<ClosedClient> = (0..tenants)
            .map(|t| ClosedClient {
                tenant: t,
                outstanding: 8,
                bytes,
                read_fraction: if write { 0.0 } else { 1.0 },
                ..Default::default()
            })
            .collect();
        let cfg = SimConfig { until: Some(SECS * NS_PER_SEC), ..Default::default() };
        let mut dev = ConstantRate::new(device_iops).unwrap();
        let r = simulate(Vec::new(), &clients, s, &mut dev, &cfg).unwrap();
        r.tenants.iter().map(|t| t.completed as f64 / SECS as f64).collect()
    }

    fn rates(s: CephMclockSpec, tenants: u32, device_iops: f64) -> Vec<f64> {
        rates_of(&mut s.build().unwrap(), tenants, device_iops, 4096, false)
    }

    fn near(label: &str, got: f64, want: f64) {
        assert!((got / want - 1.0).abs() <= TOL, "{label}: got {got:.1}, want {want:.1}");
    }

    #[test]
    fn at_the_capacity_client_and_recovery_get_their_reservations() {
        // The device does exactly the capacity (1000 IOPS) and every profile reserves all of
        // it between client and recovery: the reservations are the shares.
        for (profile, client, recovery) in
            [("high_client_ops", 600.0, 400.0), ("balanced", 500.0, 500.0), ("high_recovery_ops", 300.0, 700.0)]
        {
            let x = rates(spec(profile, &["client", "recovery"]), 2, 1000.0);
            near(&format!("{profile}: client"), x[0], client);
            near(&format!("{profile}: recovery"), x[1], recovery);
        }
    }

    #[test]
    fn above_the_capacity_the_rest_goes_by_weight() {
        // A device of twice the capacity: shares max(res, λ · wgt) with the total 2000.
        // high_client_ops: 2λ + λ = 2000, λ = 666.7: client 1333.3 (> 600), recovery 666.7
        // (> 400); balanced: 1000 each; high_recovery_ops: client 666.7, recovery 1333.3.
        for (profile, client, recovery) in [
            ("high_client_ops", 4000.0 / 3.0, 2000.0 / 3.0),
            ("balanced", 1000.0, 1000.0),
            ("high_recovery_ops", 2000.0 / 3.0, 4000.0 / 3.0),
        ] {
            let x = rates(spec(profile, &["client", "recovery"]), 2, 2000.0);
            near(&format!("{profile}: client"), x[0], client);
            near(&format!("{profile}: recovery"), x[1], recovery);
        }
    }

    #[test]
    fn best_effort_alone_is_capped_at_its_limit() {
        // high_client_ops: 0.7 of 1000, balanced 0.9; high_recovery_ops has no limit: the
        // device's 2000.
        for (profile, want) in [("high_client_ops", 700.0), ("balanced", 900.0), ("high_recovery_ops", 2000.0)] {
            near(profile, rates(spec(profile, &["best_effort"]), 1, 2000.0)[0], want);
        }
    }

    #[test]
    fn client_and_best_effort_share_by_weight_above_the_client_reservation() {
        // high_client_ops on a device of the capacity: client max(600, 2λ), best effort
        // min(700, λ) with 3λ = 1000: 666.7 and 333.3.
        let x = rates(spec("high_client_ops", &["client", "best_effort"]), 2, 1000.0);
        near("client", x[0], 2000.0 / 3.0);
        near("best effort", x[1], 1000.0 / 3.0);
    }

    #[test]
    fn all_clients_share_the_client_allocation() {
        // Two client tenants are one dmclock client: together they get the client's 600 of
        // 1000 (300 each, in arrival order), not 600 each.
        let x = rates(spec("high_client_ops", &["client", "client", "recovery"]), 3, 1000.0);
        near("clients together", x[0] + x[1], 600.0);
        near("client 0", x[0], 300.0);
        near("recovery", x[2], 400.0);
    }

    #[test]
    fn custom_values_and_a_client_capped_at_its_limit() {
        // custom: client res 0.2, wgt 1, lim 0.4; recovery res 0, wgt 3. Device 2000: the
        // client alone is capped at 400; with recovery, λ + 3λ = 2000 would give the client
        // 500, above its limit: 400, and recovery the other 1600.
        let s = CephMclockSpec {
            client_res: Some(0.2),
            client_wgt: Some(1.0),
            client_lim: Some(0.4),
            recovery_wgt: Some(3.0),
            ..spec("custom", &["client", "recovery"])
        };
        near("client alone", rates(s.clone(), 1, 2000.0)[0], 400.0);
        let x = rates(s.clone(), 2, 2000.0);
        near("client", x[0], 400.0);
        near("recovery", x[1], 1600.0);
        let built = s.build().unwrap();
        assert_eq!(built.profile().client, Allocation { res: 0.2, wgt: 1, lim: 0.4 });
        assert_eq!(built.profile().background_recovery, Allocation { res: 0.0, wgt: 3, lim: 0.0 });
        assert_eq!(built.name(), "ceph-mclock(custom)");
    }

    #[test]
    fn cephs_cost_charges_large_writes_by_their_bytes() {
        // balanced, capacity 1000 IOPS, bandwidth 1000 × 64 KiB/s: cost_per_io 65536 B.
        // Client writes of 256 KiB cost 4 IOs, recovery's 4 KiB 1. Equal weights share the
        // cost: 4 x_c = x_r with x_c + x_r = 2500 requests/s: 500 and 2000.
        let s = spec("balanced", &["client", "recovery"]);
        let bw = 1000 * 65536;
        let mut m = s.build().unwrap().with_sequential_bandwidth(bw).unwrap();
        assert_eq!(m.cost_per_io(), Some(65536));
        let clients = [
            ClosedClient { tenant: 0, outstanding: 8, bytes: 262_144, read_fraction: 0.0, ..Default::default() },
            ClosedClient { tenant: 1, outstanding: 8, bytes: 4096, read_fraction: 0.0, ..Default::default() },
        ];
        let cfg = SimConfig { until: Some(SECS * NS_PER_SEC), keep_requests: true, ..Default::default() };
        let r = simulate(Vec::new(), &clients, &mut m, &mut ConstantRate::new(2500.0).unwrap(), &cfg).unwrap();
        near("client 256 KiB writes", r.tenants[0].completed as f64 / SECS as f64, 500.0);
        near("recovery 4 KiB", r.tenants[1].completed as f64 / SECS as f64, 2000.0);
        // The device saw the requests' own sizes and classes.
        let log = r.log.unwrap();
        let own_size = |t: u32| if t == 0 { 262_144 } else { 4096 };
        assert!((0..log.id.len()).all(|i| log.class[i] == log.tenant[i] && log.bytes[i] == own_size(log.tenant[i])));
        // Client reads carry no data: a client's 256 KiB reads cost 1 IO, recovery's 4 (its
        // requests are charged for their bytes either way): 2000 and 500.
        let mut m = s.build().unwrap().with_sequential_bandwidth(bw).unwrap();
        let x = rates_of(&mut m, 2, 2500.0, 262_144, false);
        near("client reads", x[0], 2000.0);
        near("recovery reads", x[1], 500.0);
        // Without a bandwidth every request costs 1.
        let x = rates_of(&mut s.build().unwrap(), 2, 2500.0, 262_144, true);
        near("unit cost", x[0], 1250.0);
    }

    #[test]
    fn requests_come_out_with_their_own_class_and_size() {
        let mut m = spec("high_client_ops", &["recovery", "client"]).build().unwrap();
        m = m.with_sequential_bandwidth(OSD_MCLOCK_MAX_SEQUENTIAL_BANDWIDTH_SSD).unwrap();
        let dev = DeviceState { outstanding: 0, free_slots: 1 };
        for (id, tenant) in [(0u64, 0u32), (1, 1), (2, 0), (3, 5)] {
            let mut r = Request::new(id, tenant, 0, 1 << 20);
            r.class = 7;
            r.op = Op::Write;
            m.enqueue(r, 0);
        }
        assert_eq!(m.mclock().queued_in(OpClass::BackgroundRecovery.flow()), 2);
        assert_eq!(m.mclock().queued_in(OpClass::Client.flow()), 2);
        let mut out: Vec<Request> = std::iter::from_fn(|| m.dispatch(0, &dev)).collect();
        out.sort_by_key(|r| r.id);
        assert_eq!(out.len(), 4);
        assert!(out.iter().all(|r| r.class == 7 && r.bytes == 1 << 20), "{out:?}");
        assert_eq!(m.class_of(5), OpClass::Client);
        // 1200 MiB/s over 1000 IOPS.
        assert_eq!(m.cost_per_io(), Some((1_258_291_200.0f64 / 1000.0) as u32));
    }

    fn err(s: CephMclockSpec) -> String {
        s.build().unwrap_err().to_string()
    }

    #[test]
    fn refuses_what_ceph_refuses_or_undoes() {
        let e = err(spec("fast", &[]));
        assert!(e.contains("osd_mclock_profile) = \"fast\" is not one of balanced"), "{e}");
        let e = err(CephMclockSpec { client_res: Some(0.5), ..spec("high_client_ops", &[]) });
        assert!(e.contains("client_res (osd_mclock_scheduler_client_res) is set with the built-in profile"), "{e}");
        let e = err(CephMclockSpec { best_effort_lim: Some(1.5), ..spec("custom", &[]) });
        assert!(e.contains("osd_mclock_scheduler_background_best_effort_lim = 1.5 is outside [0, 1]"), "{e}");
        for w in [0.0, 1.5, -2.0] {
            let e = err(CephMclockSpec { recovery_wgt: Some(w), ..spec("custom", &[]) });
            assert!(e.contains("osd_mclock_scheduler_background_recovery_wgt) ="), "{e}");
        }
        let e = err(CephMclockSpec { client_res: Some(0.5), client_lim: Some(0.3), ..spec("custom", &[]) });
        assert!(e.contains("osd_mclock_scheduler_client_res (0.5) is above osd_mclock_scheduler_client_lim"), "{e}");
        let e = err(spec("balanced", &["client", "scrub"]));
        assert!(e.contains("classes[1] = \"scrub\" is not client, recovery or best_effort"), "{e}");
        let e = err(CephMclockSpec { capacity_iops: 0.0, ..spec("balanced", &[]) });
        assert!(e.contains("capacity_iops (osd_mclock_max_capacity_iops) must be"), "{e}");
        // A capacity below 1 IOPS is Ceph's 1.
        let m = CephMclockSpec { capacity_iops: 0.5, ..spec("balanced", &[]) }.build().unwrap();
        assert_eq!(m.capacity_iops(), MIN_CAPACITY_IOPS);
        let e = spec("balanced", &[]).build().unwrap().with_sequential_bandwidth(10).unwrap_err().to_string();
        assert!(e.contains("bytes per IO"), "{e}");
    }

    #[test]
    fn spec_defaults_to_cephs_balanced_and_refuses_unknown_fields() {
        let s: CephMclockSpec = serde_json::from_str(r#"{"capacity_iops":315,"classes":["recovery"]}"#).unwrap();
        let m = s.build().unwrap();
        assert_eq!((m.name(), *m.profile()), ("ceph-mclock(balanced)".to_string(), Profile::BALANCED));
        assert_eq!((m.class_of(0), m.class_of(1)), (OpClass::BackgroundRecovery, OpClass::Client));
        assert!(serde_json::from_str::<CephMclockSpec>(r#"{"capacity":315}"#).is_err());
        assert_eq!(Profile::builtin("custom"), None);
    }
}
