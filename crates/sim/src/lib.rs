//! # holdfast-sim
//!
//! A deterministic simulation of the world around [`holdfast_core::Core`],
//! in the style of TigerBeetle's VOPR: a fake containerd that is a reference
//! model of the real one ([`model`]), a virtual clock, faults drawn from the
//! seed ([`faults`]), and invariants checked after every step ([`check`]).
//!
//! Each seed runs a safety phase (faults on), then a liveness phase (faults
//! healed) that must converge within a bound. A failure names the seed that
//! reproduces it and shows the last steps.
//!
//! ```
//! let opts = holdfast_sim::SimOptions::default();
//! let stats = holdfast_sim::run_seed(1, &opts).expect("seed 1 passes");
//! assert!(stats.steps > 0);
//! ```

pub mod check;
pub mod faults;
pub mod fuzz;
pub mod model;
pub mod rng;
pub mod sim;
pub mod summary;
pub mod trace;

pub use faults::{FaultCounts, FaultKind};
pub use fuzz::{decode, fuzz_one};
pub use sim::{RunStats, SimFailure, SimOptions, Transition, UserOp, run_script, run_seed};
pub use summary::{Summary, check_determinism};
