//! What a batch of runs did, for people and for `bench/sim.md`.

use crate::faults::{FaultCounts, FaultKind};
use crate::sim::{RunStats, SimOptions, run_seed};
use std::fmt;
use std::time::Duration;

#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub seeds: u64,
    pub steps: u64,
    pub sim_time: Duration,
    pub faults: FaultCounts,
    pub checks: u64,
    pub requests: u64,
    pub containers: u64,
    /// The longest time from healing to a true view, and its seed: a slow
    /// reconcile shows here, not hidden behind a restart policy's backoff.
    pub truth_after_max: Duration,
    pub truth_after_max_seed: Option<u64>,
    /// The longest time from healing to full convergence (policy restarts
    /// carried out, so backoff included), and its seed.
    pub converged_after_max: Duration,
    pub converged_after_max_seed: Option<u64>,
    /// Measured by the caller (the simulator itself never reads a clock).
    pub elapsed: Option<Duration>,
}

impl Summary {
    pub fn add(&mut self, run: &RunStats) {
        self.seeds += 1;
        self.steps += run.steps;
        self.sim_time += run.sim_time;
        self.faults.merge(&run.faults);
        self.checks += run.checks;
        self.requests += run.requests;
        self.containers += run.containers;
        let truth_after = run.truth_after.unwrap_or(run.converged_after);
        if self.truth_after_max_seed.is_none() || truth_after > self.truth_after_max {
            self.truth_after_max = truth_after;
            self.truth_after_max_seed = Some(run.seed);
        }
        if self.converged_after_max_seed.is_none() || run.converged_after > self.converged_after_max
        {
            self.converged_after_max = run.converged_after;
            self.converged_after_max_seed = Some(run.seed);
        }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hours = self.sim_time.as_secs_f64() / 3600.0;
        writeln!(f, "seeds:              {}", self.seeds)?;
        writeln!(f, "steps:              {}", self.steps)?;
        writeln!(f, "simulated time:     {hours:.2} h")?;
        writeln!(f, "invariant checks:   {}", self.checks)?;
        writeln!(f, "user requests:      {}", self.requests)?;
        writeln!(f, "containers created: {}", self.containers)?;
        let seed = |s: Option<u64>| s.map_or_else(|| "-".to_owned(), |s| s.to_string());
        writeln!(
            f,
            "slowest time to truth after healing:        {:.1} s (seed {})",
            self.truth_after_max.as_secs_f64(),
            seed(self.truth_after_max_seed)
        )?;
        writeln!(
            f,
            "slowest time to policy restarts after healing: {:.1} s (seed {})",
            self.converged_after_max.as_secs_f64(),
            seed(self.converged_after_max_seed)
        )?;
        writeln!(f, "faults injected:    {}", self.faults.total())?;
        for kind in FaultKind::ALL {
            writeln!(f, "  {:<18} {}", kind.name(), self.faults.get(kind))?;
        }
        if let Some(elapsed) = self.elapsed {
            let secs = elapsed.as_secs_f64().max(1e-9);
            writeln!(f, "wall time:          {secs:.2} s")?;
            writeln!(f, "steps per second:   {:.0}", self.steps as f64 / secs)?;
            writeln!(
                f,
                "simulated/wall:     {:.0}x",
                self.sim_time.as_secs_f64() / secs
            )?;
        }
        Ok(())
    }
}

/// Runs `seed` twice and compares the hashes of the action traces.
/// Returns the hash when both runs agree.
pub fn check_determinism(seed: u64, opts: &SimOptions) -> Result<u64, String> {
    let opts = SimOptions {
        hash_trace: true,
        ..opts.clone()
    };
    let first = run_seed(seed, &opts).map_err(|f| f.to_string())?;
    let second = run_seed(seed, &opts).map_err(|f| f.to_string())?;
    if first.trace_hash != second.trace_hash || first.steps != second.steps {
        return Err(format!(
            "seed {seed} is not deterministic: trace hash {:#018x} ({} steps) then {:#018x} ({} steps)\nreproduce with SIM_SEED={seed}",
            first.trace_hash, first.steps, second.trace_hash, second.steps
        ));
    }
    Ok(first.trace_hash)
}
