//! Restart policies: dockerd's backoff, `RestartCount` (the policy's
//! restarts only), and the `restart` event (a user's restart only).

use crate::harness::Harness;
use holdfast_core::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

impl Harness {
    /// A policy restart newly owed is armed after the backoff dockerd's
    /// rule gives: `restart_initial` after a run of `restart_reset_after`
    /// or more, else the last backoff doubled (to `restart_max`); a start
    /// the policy gave up on waits the next one (however long the run
    /// before it was: no run ended now).
    pub(crate) fn check_restart_backoff(
        &mut self,
        owed_before: &BTreeMap<ContainerId, (bool, bool)>,
    ) -> Result<(), TestCaseError> {
        let initial = self.config.restart_initial;
        for c in self.core.containers() {
            let id = &c.record.id;
            let Some(&(false, exited_before)) = owed_before.get(id) else {
                continue;
            };
            if !c.record.intents.policy_restart {
                continue;
            }
            let ended_now = !exited_before && c.current_exit().is_some();
            let timer = self.core.timers().find_map(|(at, kind)| {
                (*kind == TimerKind::RestartBackoff(id.clone())).then_some(at)
            });
            let long_run = ended_now
                && c.current_exit().is_some_and(|e| {
                    let began = c.record.started_at.unwrap_or(e.finished_at);
                    e.finished_at.saturating_since(began) >= self.config.restart_reset_after
                });
            let next = self.restart_backoff.entry(id.clone()).or_insert(initial);
            let delay = if long_run { initial } else { *next };
            *next = delay.saturating_mul(2).min(self.config.restart_max);
            prop_assert_eq!(
                timer,
                Some(self.now.at + delay),
                "{}'s policy restart is not armed after its backoff",
                id
            );
        }
        Ok(())
    }

    /// An exit no user brought about, of a run that was started, is
    /// followed by the restart its policy calls for: a backoff is armed
    /// (or the start is under way). However the exit was learned: from
    /// its event, or from a relist after holdfastd was down (pouch #2519
    /// took such an exit for a user's stop).
    pub(crate) fn check_policy_followed(
        &self,
        input: &Input,
        owed_before: &BTreeMap<ContainerId, (bool, bool)>,
    ) -> Result<(), TestCaseError> {
        for c in self.core.containers() {
            let r = c.record;
            let Some(&(_, false)) = owed_before.get(&r.id) else {
                continue;
            };
            let Some(exit) = c.current_exit() else {
                continue;
            };
            let owed = !self.meddled.contains(&r.id)
                && !r.config.auto_remove
                && !r.intents.remove
                && r.started_at.is_some()
                && r.config
                    .restart_policy
                    .wants_restart(exit.exit_code, r.restart_count, false);
            if !owed || r.intents.start {
                continue;
            }
            let armed = self
                .core
                .timers()
                .any(|(_, kind)| *kind == TimerKind::RestartBackoff(r.id.clone()));
            prop_assert!(
                armed,
                "{}'s run ended (exit {}) with no user's doing, and its policy {:?} calls for a restart, but none is armed after {:?}",
                r.id,
                exit.exit_code,
                r.config.restart_policy,
                input
            );
        }
        Ok(())
    }

    /// `RestartCount` counts the policy's restarts only: none comes while a
    /// user's start or restart is still being carried out.
    pub(crate) fn check_restart_count(
        &self,
        input: &Input,
        counts_before: &BTreeMap<ContainerId, (u32, bool)>,
    ) -> Result<(), TestCaseError> {
        for c in self.core.containers() {
            if let Some(&(count, user_start)) = counts_before.get(&c.record.id) {
                prop_assert!(
                    !(user_start && c.record.restart_count > count),
                    "{:?}: {}'s restart count rose while a user's start was under way",
                    input,
                    c.record.id
                );
            }
        }
        Ok(())
    }

    /// A `restart` event is a user's restart taking effect, never a plain
    /// start.
    pub(crate) fn check_restart_announced(
        &self,
        input: &Input,
        event: &UserEvent,
    ) -> Result<(), TestCaseError> {
        let restarting = self.restarts.iter().any(|r| {
            self.starts.get(r) == Some(&event.container) && !self.answered.contains_key(r)
        });
        prop_assert!(
            restarting,
            "{:?} published a restart of {} with no restart asked",
            input,
            event.container
        );
        Ok(())
    }
}
