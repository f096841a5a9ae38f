//! Properties over arbitrary interleavings of commands, events (lost,
//! duplicated, stale), disconnects, relists and failed calls, against
//! containerd as the simulator models it ("the world"), which the harness
//! keeps in step.
//!
//! The world reuses a container's pids, OOM-kills processes, honours
//! configured stop signals (request, container, image), and holdfastd itself
//! restarts from its persisted records; any earlier event, of any run, may be
//! delivered again at any time.
//!
//! 1. Every kill, delete or (re)start is backed by a user's or policy's intent:
//!    none is caused by a connection fact or a failed call; a signal is one a
//!    user asked for (a kill, the stop signal by precedence, SIGKILL).
//! 2. An exit is recorded at most once per run, never changed, and is the
//!    world's exit of that run's process (an OOM kill recorded as one when
//!    its evidence came in order, and never a false one).
//! 3. At every quiescent point (connected, no call open) every container
//!    whose changes the core could see (none lost since a relist) matches
//!    the world: no dead process shown running, no live one shown dead.
//! 4. Every stop request is answered within grace + slack. Every start is
//!    answered within the answer bound, or later only while the core is
//!    connected and the start still wanted (containerd still working on
//!    it), and never past the start's final bound.
//! 5. The same inputs give the same actions.
//! 6. No request is lost: all but waits are answered once the world heals,
//!    and nothing is left behind (containerd and holdfast show the same
//!    containers, no stopped task is kept).
//! 7. Network attachments (every other container is on the bridge network):
//!    no allocation without an owner (every attachment in the world has a
//!    persisted record that says it may exist), no owner without its
//!    allocation (every task of a bridge container has its attachment), no
//!    attachment made twice, and none left without a task once healed. The
//!    same for the endpoints of `network connect`: every endpoint in the
//!    world has a record whose endpoint of that slot may exist, every one
//!    recorded attached exists, none is made twice, none outlives its task
//!    once healed, and every wanted one of a running bridge container is
//!    made once healed.
//! 8. The decisions beside runs (in cases whose containers mount volumes
//!    and whose users exec, commit, copy and manage volumes): no volume
//!    directory without a record, none recorded made and gone, none
//!    removed while a record names it; `rm -v` and `prune` remove what
//!    they should and nothing else; an exec's end changes nothing of its
//!    container and each exec shows the world's exit; once healed no
//!    snapshot stays mounted, no task stays frozen that no user froze (a
//!    commit's freeze is always thawed), no exec start is left owed.
//!
//! Where things are: the steps a case is made of and their strategies
//! (`steps.rs`); the world (`world.rs`) and how it answers the core's calls
//! (`resolve.rs`); the harness, which feeds the core one input at a time
//! and checks every property after each (`harness.rs`); the chosen cases
//! (`chosen.rs`). A file per property family: 1 `intents.rs`, 2
//! `exits.rs`, 3 `quiescent.rs`, 4 `stops.rs` and `starts.rs`, 5 here (each
//! case run twice), 6 `healed.rs` and `answers.rs`, 7 `network.rs`, 8 `resources.rs`; and
//! `kills.rs`, `pause.rs`, `waits.rs`, `edits.rs`, `restarts.rs`,
//! `retries.rs`, `relists.rs`, `connection.rs`, `health.rs`,
//! `reconnect.rs`.

mod answers;
mod calls;
mod chosen;
mod connection;
mod edits;
mod exits;
mod harness;
mod healed;
mod health;
mod intents;
mod kills;
mod network;
mod pause;
mod quiescent;
mod reconnect;
mod regressions;
mod relists;
mod resolve;
mod resources;
mod restarts;
mod retries;
mod starts;
mod steps;
mod stops;
#[path = "../support/mod.rs"]
mod support;
mod waits;
mod world;

use harness::Harness;
use health::probe_results_change_nothing_else;
use holdfast_core::*;
use proptest::prelude::*;
use reconnect::reconnect_delay_after;
use regressions::regressions;
use std::time::Duration;
use steps::{relist_race_step, resource_step, step};

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES runs more; CI runs the default.
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(1024),
        failure_persistence: Some(regressions()),
        ..ProptestConfig::default()
    })]

    #[test]
    fn properties_hold_over_arbitrary_interleavings(swarm in any::<u8>(), steps in proptest::collection::vec(step(), 1..160)) {
        let mut first = Harness::new(swarm);
        first.run(&steps, swarm)?;
        first.check_stops_answered_in_time()?;
        // Property 5.
        let mut second = Harness::new(swarm);
        second.run(&steps, swarm)?;
        prop_assert_eq!(first.trace, second.trace);
    }

    /// The same properties, and property 8, with containers on volumes
    /// and users who exec, commit, copy and manage volumes.
    #[test]
    fn properties_hold_with_volumes_execs_commits_and_copies(swarm in any::<u8>(), steps in proptest::collection::vec(resource_step(), 1..160)) {
        let mut harness = Harness::with_resources(swarm);
        harness.run(&steps, swarm)?;
        harness.check_stops_answered_in_time()?;
    }

    /// The same properties, over short cases crowded around relists, with
    /// streams that break, shims that die and relists every 40 s, under
    /// either freezer.
    #[test]
    fn properties_hold_around_relists(v1_freezer in any::<bool>(), steps in (0..2usize).prop_flat_map(|c| proptest::collection::vec(relist_race_step(c), 1..60))) {
        let swarm = 1 << 1 | 1 << 3 | 1 << 6 | u8::from(v1_freezer) << 7;
        let mut harness = Harness::new(swarm);
        harness.run(&steps, swarm)?;
        harness.check_stops_answered_in_time()?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        // Two runs per case: a quarter of the cases (PROPTEST_CASES scales it).
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse::<u32>().ok()).map_or(256, |n| (n / 4).max(1)),
        failure_persistence: Some(regressions()),
        ..ProptestConfig::default()
    })]

    /// Health checks only observe: with every probe result lost, the core
    /// does exactly what it did with them, but for probes and health events.
    #[test]
    fn health_checks_never_change_what_the_core_does(swarm in any::<u8>(), steps in proptest::collection::vec(step(), 1..160)) {
        probe_results_change_nothing_else(&steps, swarm)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(1024) / 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Reconnecting backs off from `reconnect_initial` doubling per failure,
    /// starts over after a healthy period, and is spread by ±20% across
    /// daemons (their seeds), so a containerd restart is not stormed.
    #[test]
    fn reconnects_back_off_start_over_when_healthy_and_are_spread(seed in any::<u64>()) {
        let config = CoreConfig::default();
        let initial = config.reconnect_initial;
        let within = |d: Duration, base: Duration| d >= base * 8 / 10 && d <= base * 12 / 10;
        let mut fresh = Vec::new();
        for k in 0..32 {
            let seed = seed.wrapping_add(k);
            let healthy = reconnect_delay_after(seed, 3, config.reconnect_reset_after + Duration::from_secs(1));
            prop_assert!(within(healthy, initial), "after a healthy period: {:?}", healthy);
            let soon = reconnect_delay_after(seed, 3, Duration::from_secs(1));
            prop_assert!(within(soon, initial * 8), "after 3 failures and a short connection: {:?}", soon);
            fresh.push(healthy);
        }
        let (min, max) = (fresh.iter().min().copied(), fresh.iter().max().copied());
        let spread = max.zip(min).map(|(max, min)| max - min).unwrap_or_default();
        prop_assert!(spread >= initial / 5, "32 daemons reconnect within {:?} of each other", spread);
    }
}
