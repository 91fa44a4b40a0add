//! Scheduling policies. Each file is one policy and opens with the paper and section it
//! implements.

pub mod fcfs;

pub use fcfs::Fcfs;
