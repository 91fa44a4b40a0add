//! Reference kernels of the event-loop benchmark (`benches/event_loop.py`), kept out of
//! the product library: FCFS in front of one constant-rate server computed by the Lindley
//! recursion ([`lindley`]) and by the leanest hand-written two-event loop
//! ([`minimal_des`]), keeping the same summaries as the simulator. The `kernels` binary
//! times them on an arrival file for the Python benchmark; `loop_rate` times the general
//! loop's variants beside them from Rust alone.

pub mod lindley;
pub mod minimal_des;
