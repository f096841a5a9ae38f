//! Relists: a task in doubt (a create, or a created task's delete, whose
//! answer was lost) is looked at by a relist as soon as one can settle it;
//! a relist owed (after a placeholder, a call refused or unanswered, a task
//! deleted unseen) comes by its bound; a run's task only moves forward.

use crate::calls::Call;
use crate::harness::Harness;
use holdfast_core::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::time::Duration;

impl Harness {
    /// A create, or a created task's delete, whose answer was lost leaves
    /// the task in doubt (the core waits for a relist before it deletes
    /// or starts it); an answer that says what happened ends the doubt.
    pub(crate) fn note_doubt(&mut self, call: &Call, result: &Result<Done, Failure>) {
        let Some(id) = call.container_id() else {
            return;
        };
        self.activity.insert(id.clone(), self.last_op);
        let created = self
            .core
            .container(id)
            .is_some_and(|c| matches!(c.task, TaskState::Created { .. }));
        use FailureKind as K;
        match (call, result) {
            (Call::CreateTask { .. }, Err(f))
                if matches!(f.kind, K::Unavailable | K::Deadline | K::AlreadyExists) =>
            {
                self.doubts.insert(id.clone());
            }
            (Call::DeleteTask { .. }, Err(f))
                if matches!(f.kind, K::Unavailable | K::Deadline) && created =>
            {
                self.doubts.insert(id.clone());
            }
            (Call::CreateTask { .. } | Call::DeleteTask { .. }, Ok(_)) => {
                self.doubts.remove(id);
            }
            (Call::DeleteTask { .. }, Err(f)) if f.kind == K::NotFound => {
                self.doubts.remove(id);
            }
            _ => {}
        }
    }

    /// A relist ends: a doubt it can settle (nothing of the container in
    /// flight, nothing answered since it was asked for, and its task not
    /// a placeholder) is settled.
    pub(crate) fn settle_doubts(&mut self, relist: OpId, placeholder: Option<&ContainerId>) {
        let outstanding = &self.outstanding;
        let activity = &self.activity;
        self.doubts.retain(|id| {
            let busy = outstanding
                .iter()
                .any(|(_, c)| c.container_id() == Some(id));
            busy || activity.get(id).is_some_and(|a| *a >= relist.0) || placeholder == Some(id)
        });
    }

    /// A doubt is looked at by a relist as soon as one can settle it:
    /// once its container's calls are answered, it is not left for the
    /// periodic relist (minutes away).
    pub(crate) fn note_doubts_owed(&mut self) {
        let core = &self.core;
        self.doubts.retain(|id| core.container(id).is_some());
        let ready = self.core.connection() == ConnectionState::Ready && self.world.containerd.up;
        let newest = self.newest_relist;
        let relisting = self
            .outstanding
            .iter()
            .any(|(o, c)| matches!(c, Call::Relist) && o.0 >= newest);
        let now = self.now.at;
        let mut owed = BTreeMap::new();
        for id in &self.doubts {
            let busy = self
                .outstanding
                .iter()
                .any(|(_, c)| c.container_id() == Some(id));
            if ready && !relisting && !busy {
                let by = self.doubt_owed_by.get(id).copied();
                owed.insert(id.clone(), by.unwrap_or(now + Duration::from_secs(2)));
            }
        }
        self.doubt_owed_by = owed;
    }

    /// No doubt waits past its bound for the relist that settles it.
    pub(crate) fn check_doubts_looked_at(&self) -> Result<(), TestCaseError> {
        for (id, by) in &self.doubt_owed_by {
            prop_assert!(
                self.now.at <= *by,
                "{} was left in doubt (a create or delete whose answer was lost) with no relist asked for by {:?}",
                id,
                by
            );
        }
        Ok(())
    }

    /// A kill, a freeze or thaw, or a delete that containerd refused or
    /// whose answer was lost, or an update that found no task, while
    /// connected: the core asks for a relist (what it took for the task
    /// may be wrong). A create or a created task's delete whose answer was
    /// lost leaves the task in doubt.
    pub(crate) fn note_answered_call(&mut self, input: &Input, answered_call: &Option<Call>) {
        if let Input::ActionResult(_, result) = &input
            && let Some(call) = &answered_call
        {
            self.note_doubt(call, result);
        }
        if let Input::ActionResult(_, Err(failure)) = &input
            && let Some(call) = answered_call.clone()
            && self.core.connection() == ConnectionState::Ready
            && failure.kind != FailureKind::Unavailable
        {
            let looks = match call {
                Call::Kill { .. } | Call::Pause { .. } | Call::Resume { .. } => true,
                Call::DeleteTask { .. } | Call::DeleteContainer { .. } => {
                    failure.kind != FailureKind::NotFound
                }
                // An update of a running task that finds none: the
                // task is gone, whatever the view says.
                Call::UpdateResources { running: true, .. } => {
                    failure.kind == FailureKind::NotFound
                }
                _ => false,
            };
            if looks && self.refresh_owed_by.is_none() {
                self.refresh_owed_by = Some(self.now.at + Duration::from_secs(2));
            }
        }
    }

    /// A run's task only moves forward (created, running, stopped): a
    /// listing older than what the core has learned since must not take
    /// it back.
    pub(crate) fn check_task_progress(&mut self, input: &Input) -> Result<(), TestCaseError> {
        for c in self.core.containers() {
            let rank = match c.task {
                TaskState::Created { .. } => 1,
                TaskState::Running { .. } => 2,
                TaskState::Stopped => 3,
                TaskState::Absent | TaskState::Unknown => continue,
            };
            let run = (c.record.id.clone(), c.record.run, c.record.pid);
            let seen = self.task_progress.entry(run).or_insert(rank);
            prop_assert!(
                rank >= *seen,
                "{} went back to {:?} in run {} after {:?}",
                c.record.id,
                c.task,
                c.record.run,
                input
            );
            *seen = rank;
        }
        Ok(())
    }

    /// A relist owed came by its bound: one that can settle a doubt, one
    /// after a placeholder, and one after a call refused or unanswered (or
    /// a task deleted unseen).
    pub(crate) fn check_relists_owed_came(&self) -> Result<(), TestCaseError> {
        self.check_doubts_looked_at()?;
        if let Some(by) = self.look_again_by
            && self.now.at > by
            && self.core.connection() == ConnectionState::Ready
        {
            prop_assert!(
                false,
                "a relist with a placeholder was not followed by another by {by:?}"
            );
        }
        let relist_in_flight = self
            .outstanding
            .iter()
            .any(|(_, c)| matches!(c, Call::Relist));
        if let Some(by) = self.refresh_owed_by
            && self.now.at > by
            && !relist_in_flight
            && self.core.connection() == ConnectionState::Ready
        {
            prop_assert!(
                false,
                "a relist owed (a call refused or unanswered, a task deleted unseen) did not come by {by:?}"
            );
        }
        Ok(())
    }
}
