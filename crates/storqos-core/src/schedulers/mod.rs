//! Scheduling policies. Each file is one policy and opens with the paper and section it
//! implements.
//!
//! Baselines:
//! - [`fcfs`]: first-come first-served.
//! - [`edf`]: earliest deadline first, with a reusable deadline queue ([`EdfQueue`]).
//! - [`wf2q`]: WF2Q+ weighted fair queuing (Bennett & Zhang 1997).
//! - [`sfq`]: SFQ(D), start-time fair queuing with dispatch depth D (Jin et al. 2004).
//! - [`mclock`]: mClock reservations / weights / limits (Gulati et al. OSDI'10; Ceph's dmclock).
//! - [`dmclock`]: dmClock, mClock across servers (the client's tracker; the server side is
//!   [`Mclock::enqueue_dist`]).
//!
//! Composites:
//! - [`baa_sched`]: seed 004's two-level scheduler, BAA / DRF / FQ weights over WF2Q+.
//!
//! [`tags`] holds what the fair queuers share: flow keys, cost models, weights;
//! `indexed_heap` the heap of backlogged tenants that mClock and YFQ keep by tag.

pub mod baa_sched;
pub mod dmclock;
pub mod edf;
pub mod fcfs;
pub(crate) mod indexed_heap;
pub mod mclock;
pub(crate) mod prefetch;
pub mod sfq;
pub(crate) mod sorted_set;
pub mod tags;
pub mod wf2q;
pub mod yfq;

pub use edf::{Edf, EdfQueue};
pub use fcfs::Fcfs;
pub use mclock::{AtLimit, Mclock, MclockCost};
pub use sfq::Sfq;
pub use tags::{CostModel, FairQueue, FlowKey, Sharing};
pub use wf2q::Wf2q;
