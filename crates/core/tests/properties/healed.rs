//! Property 6: once the world heals, nothing is left behind (the same
//! containers on both sides, no intent, no stopped task, no SIGKILL held
//! frozen) and the engine works.

use crate::harness::Harness;
use crate::support::cid;
use holdfast_core::*;
use proptest::prelude::*;
use std::time::Duration;

impl Harness {
    /// Liveness once healed: `docker run` of a new container succeeds, and
    /// its pauses, update, stop and a kill while frozen are carried out.
    pub(crate) fn probe_healed(&mut self) -> Result<(), TestCaseError> {
        let id = cid("probe");
        let config = ContainerConfig::default();
        self.configs.insert(id.clone(), config.clone());
        let create = self.command(Command::Create {
            id: id.clone(),
            name: "probe".into(),
            config: config.into(),
        })?;
        self.settle()?;
        let start = self.command(Command::Start { id: id.clone() })?;
        self.settle()?;
        let running = self.core.container(&id).map(|c| c.status);
        prop_assert_eq!(running, Some(Status::Running), "the probe does not run");
        // A signal it ignores is delivered, and the kill answered done.
        let kill = self.command(Command::Kill {
            id: id.clone(),
            signal: Signal::try_from(1).map_err(|e| TestCaseError::fail(e.to_string()))?,
        })?;
        self.settle()?;
        // A pause, an unpause and an update are carried out, and containerd
        // agrees; then paused again for the stop.
        self.pauses_asked.insert((id.clone(), true));
        self.pauses_asked.insert((id.clone(), false));
        self.updates_asked.insert(id.clone());
        let pause = self.command(Command::Pause { id: id.clone() })?;
        self.settle()?;
        prop_assert!(
            self.world.frozen_pid(&id).is_some(),
            "the probe is not frozen"
        );
        let unpause = self.command(Command::Unpause { id: id.clone() })?;
        self.settle()?;
        prop_assert!(
            self.world.frozen_pid(&id).is_none(),
            "the probe is still frozen"
        );
        let update = self.update_memory_settled(&id, 64 << 20)?;
        // Carried to the running task's cgroup now, not left for its next run.
        prop_assert_eq!(
            self.answer_of(update),
            Some(Answer::Done),
            "the running probe's update"
        );
        let pause_again = self.command(Command::Pause { id: id.clone() })?;
        self.settle()?;
        let stop = self.command(Command::Stop {
            id: id.clone(),
            timeout: Some(Duration::from_secs(1)),
            signal: Some(Signal::SIGKILL),
        })?;
        self.settle()?;
        let stopped = self.core.container(&id).map(|c| c.status);
        prop_assert_eq!(stopped, Some(Status::Exited), "the probe did not stop");
        // Started again, frozen, and killed: the SIGKILL takes effect
        // (under a v1 freezer only because the core thaws the task). The
        // clock moves, so that the new run begins after the last one ended.
        self.set_time(self.now.at + Duration::from_millis(1));
        let start_again = self.command(Command::Start { id: id.clone() })?;
        self.settle()?;
        let pause_to_kill = self.command(Command::Pause { id: id.clone() })?;
        self.settle()?;
        let kill_frozen = self.command(Command::Kill {
            id: id.clone(),
            signal: Signal::SIGKILL,
        })?;
        self.settle()?;
        for req in [
            create,
            start,
            kill,
            pause,
            unpause,
            update,
            pause_again,
            stop,
            start_again,
            pause_to_kill,
            kill_frozen,
        ] {
            prop_assert_eq!(
                self.trace.iter().rev().find_map(|a| match a {
                    Action::Answer(r, answer) if *r == req => Some(answer.clone()),
                    _ => None,
                }),
                Some(Answer::Done),
                "probe request {} of a healed world",
                req
            );
        }
        let killed = self.core.container(&id).map(|c| c.status);
        prop_assert_eq!(
            killed,
            Some(Status::Exited),
            "the frozen probe was not killed"
        );
        // Updated while stopped: carried to the spec of its next run now.
        let update_stopped = self.update_memory_settled(&id, 32 << 20)?;
        prop_assert_eq!(
            self.answer_of(update_stopped),
            Some(Answer::Done),
            "the stopped probe's update"
        );
        Ok(())
    }

    /// `docker update --memory` of `id`, carried as far as it goes.
    pub(crate) fn update_memory_settled(
        &mut self,
        id: &ContainerId,
        bytes: u64,
    ) -> Result<RequestId, TestCaseError> {
        let req = self.command(Command::UpdateResources {
            id: id.clone(),
            update: ResourceUpdate {
                memory_limit_bytes: Some(bytes),
                ..Default::default()
            },
        })?;
        self.settle()?;
        Ok(req)
    }

    /// Property 6, once the world healed: nothing unseen, nothing in
    /// flight, nothing left behind, every request answered, and the engine
    /// works.
    pub(crate) fn check_healed(&mut self) -> Result<(), TestCaseError> {
        prop_assert_eq!(self.core.calls_in_flight(), 0);
        prop_assert!(self.unseen.is_empty(), "never relisted: {:?}", self.unseen);
        self.check_quiescent()?;
        self.check_same_containers_on_both_sides()?;
        self.check_no_intent_left()?;
        self.check_no_sigkill_left_frozen()?;
        self.check_no_allocation_left()?;
        self.check_healed_own_eth0_and_kept_down()?;
        self.check_wanted_endpoints_made()?;
        self.check_no_stopped_task_left()?;
        self.check_requests_answered()?;
        self.check_met_waits_answered()?;
        // Healed, the engine works: a new container is created and started.
        self.probe_healed()
    }

    /// Nothing is left behind: the same containers on both sides.
    fn check_same_containers_on_both_sides(&self) -> Result<(), TestCaseError> {
        let shown: Vec<&ContainerId> = self.core.containers().map(|c| &c.record.id).collect();
        let mut shown = shown.into_iter().cloned().collect::<Vec<_>>();
        shown.sort();
        let kept: Vec<ContainerId> = self.world.containerd.containers.iter().cloned().collect();
        prop_assert_eq!(&shown, &kept, "holdfast shows, containerd has");
        Ok(())
    }

    /// A removal asked for is carried out once the world heals, in any
    /// state the container was in: none is left being removed. So is a
    /// start (a user's, a restart's, a policy's): none is left wanted.
    fn check_no_intent_left(&self) -> Result<(), TestCaseError> {
        for c in self.core.containers() {
            prop_assert!(
                !c.record.intents.remove,
                "{} is still being removed in a healed world ({:?})",
                c.record.id,
                c.task
            );
            prop_assert!(
                !c.record.intents.start && !c.record.intents.policy_restart,
                "{} still waits to be started in a healed world ({:?}, {:?})",
                c.record.id,
                c.task,
                c.record.intents
            );
        }
        Ok(())
    }

    /// Every SIGKILL that went out has taken effect: none waits on a
    /// frozen task that the core left frozen (a v1 freezer holds it).
    fn check_no_sigkill_left_frozen(&self) -> Result<(), TestCaseError> {
        prop_assert!(
            self.world.held_kills().is_empty(),
            "SIGKILLed tasks left frozen, never thawed: {:?}",
            self.world.held_kills()
        );
        Ok(())
    }

    /// No stopped task is kept in containerd.
    fn check_no_stopped_task_left(&self) -> Result<(), TestCaseError> {
        for (id, task) in &self.world.containerd.tasks {
            prop_assert!(
                task.status != TaskStatus::Stopped,
                "a stopped task of {} is left: pid {}, exited {:?} at {:?}",
                id,
                task.pid,
                task.exit_status,
                task.exited_at
            );
        }
        Ok(())
    }
}
