//! Workload shaping (seed 000: Lu, "Workload Shaping for QoS and Power Efficiency of
//! Storage Systems"): decompose a client's request stream with RTT so that a primary
//! class meets a response-time bound δ at a small capacity Cmin, then recombine the
//! primary and the overflow on one server of Cmin + ΔC.
//!
//! | file | what | seed 000 |
//! |---|---|---|
//! | [`rtt`] | the RTT admission rule, exact integer kernel | §3.3.1, Algorithm 1, Lemmas 1–3 |
//! | [`cmin`](mod@cmin) | Cmin(f, δ) and the capacity table: the planner's search | §3.2.2, §4.2, Table 4.1 |
//! | [`cmin_all`](mod@cmin_all) | Cmin(100 %, δ) in closed form (max pair ratio, Dinkelbach) | §4.2, Lemma 1 |
//! | [`fcfs_capacity`] | the capacity plain FCFS needs for the same (f, δ), beside Cmin (Lindley's recursion) | §4.2, Fig. 4.2 |
//! | [`lanes`] | many RTT runs in one vectorised pass (the planner's kernel) | §3.3.1 |
//! | [`rtt_stage`] | RTT as a scheduler stage in front of any scheduler | §3.3.2 |
//! | [`recombine`] | the four recombiners | §3.3.2, §4.4.2 |
//! | [`miser`] | Miser slack scheduling | §3.3.2, Algorithm 2 |
//! | [`split`] | Split: primary and overflow on two dedicated servers | §3.3.2 |
//! | [`rtd`] | n-tier response-time distributions by recursive decomposition | §3.2.2 (Fig. 3.5) |
//! | [`power`] | storage pools, ON pools and energy | §3.2.3, §4.3, Fig. 4.1, Table 4.2 |
//!
//! Consolidation (§4.5) needs nothing beyond [`cmin()`]: Cmin of the merged arrivals
//! against the sum of the individual Cmin (the Python planner merges the traces).

pub mod cmin;
pub mod cmin_all;
pub mod fcfs_capacity;
pub mod lanes;
pub mod miser;
pub mod power;
pub mod recombine;
pub mod rtd;
pub mod rtt;
pub mod rtt_stage;
pub mod split;

pub use cmin::{
    capacity_table, capacity_table_bisect, capacity_table_with, cmin, cmin_all, cmin_count, CapacityTable,
    SearchOptions,
};
pub use fcfs_capacity::{fcfs_capacity_table, fcfs_on_time, FcfsTable};
pub use miser::Miser;
pub use recombine::{Recombiner, PRIMARY, SECONDARY};
pub use rtt::{Capacity, Rtt};
pub use rtt_stage::RttStage;
