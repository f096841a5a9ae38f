//! What a request was answered, and what it was taken for: what waited on a
//! run is answered when it ends, a kill or a connect taken stands, a remove
//! taken is done, and once healed every request but a wait is answered.

use crate::harness::{Ask, Harness};
use crate::steps::id;
use holdfast_core::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

impl Harness {
    /// A create is answered within its bound, or, while containerd is
    /// still carrying out its call then, within as long again as a
    /// create's calls may take: never left waiting for ever.
    pub(crate) fn check_creates_answered_in_time(&self) -> Result<(), TestCaseError> {
        let bound = self.config.request_answer_bound + self.config.create_run_on;
        for (req, asked) in &self.creates_asked {
            let waited = self.now.at.saturating_since(*asked);
            prop_assert!(
                self.answered.contains_key(req) || waited <= bound,
                "create {} unanswered after {:?}",
                req,
                waited
            );
        }
        Ok(())
    }

    /// When a run ends, what waited on it is answered at once, with the
    /// answer the end calls for: a kill whose delivery was under way is
    /// done (as dockerd answers it), any other kill, pause or unpause finds
    /// the container not running, and a wait for the exit has it. None is
    /// left to be answered by its bound.
    pub(crate) fn check_run_end_answers(
        &self,
        new_exits: &[(ContainerId, Option<u32>, ExitRecord)],
        asks_before: &BTreeMap<RequestId, (ContainerId, Ask)>,
        asked_then: &[(RequestId, (ContainerId, Ask), Answer)],
    ) -> Result<(), TestCaseError> {
        for (id, _, exit) in new_exits {
            for (req, (of, _)) in asks_before {
                prop_assert!(
                    of != id || !self.asks.contains_key(req),
                    "{} (of {}) still waits after the run {} ended",
                    req,
                    id,
                    exit.run
                );
            }
            for (req, (of, condition, _)) in &self.waits {
                prop_assert!(
                    of != id || *condition == WaitCondition::Removed,
                    "{} (a wait {:?} of {}) still waits after the run {} ended",
                    req,
                    condition,
                    id,
                    exit.run
                );
            }
            for (req, (of, ask), answer) in asked_then {
                if of != id {
                    continue;
                }
                let delivering = match ask {
                    Ask::Kill(signal) => self
                        .user_kill_ops
                        .values()
                        .any(|k| *k == (id.clone(), *signal)),
                    Ask::Pause | Ask::Unpause => false,
                };
                let not_running =
                    matches!(answer, Answer::Error(e) if e.kind == ErrorKind::Conflict);
                prop_assert!(
                    if delivering {
                        *answer == Answer::Done
                    } else {
                        not_running
                    },
                    "{} ({:?} of {}) answered {:?} when the run {} ended (its signal under way: {})",
                    req,
                    ask,
                    id,
                    answer,
                    exit.run,
                    delivering
                );
            }
        }
        Ok(())
    }

    /// What a request was taken for stands until the user changes it:
    /// - a kill still waiting is still meant: its signal is queued, one
    ///   delivery per signal (another signal's refusal does not drop it);
    /// - a network connect said done leaves the container on that network
    ///   until a disconnect of it is asked (another endpoint's refusal does
    ///   not release it).
    pub(crate) fn check_taken_requests_stand(&mut self) -> Result<(), TestCaseError> {
        for (req, (id, ask)) in &self.asks {
            if let (Ask::Kill(signal), Some(c)) = (ask, self.core.container(id)) {
                prop_assert!(
                    c.record.intents.kills.contains(signal),
                    "{} (a kill of {} with {:?}) waits, and its signal is no longer queued: {:?}",
                    req,
                    id,
                    signal,
                    c.record.intents.kills
                );
            }
        }
        let core = &self.core;
        self.connected
            .retain(|_, (id, _)| core.container(id).is_some());
        for (req, (id, network)) in &self.connected {
            let disconnected = self
                .disconnects
                .iter()
                .any(|(r, i, n)| r > req && i == id && n == network);
            let Some(c) = self.core.container(id) else {
                continue;
            };
            if disconnected || c.record.intents.remove {
                continue;
            }
            let own = c
                .record
                .config
                .network_name
                .clone()
                .unwrap_or_else(|| "bridge".to_owned());
            let on = c
                .record
                .endpoints
                .iter()
                .any(|e| &e.network == network && e.wanted)
                || *network == own && !c.record.own_disconnected;
            prop_assert!(
                on,
                "{} (a connect of {} to {}, done) no longer holds: {:?}",
                req,
                id,
                network,
                c.record.endpoints
            );
        }
        Ok(())
    }

    /// A remove taken is done when the container is gone.
    pub(crate) fn check_remove_answer(
        &mut self,
        req: &RequestId,
        answer: &Answer,
    ) -> Result<(), TestCaseError> {
        if self.removes.remove(req) {
            prop_assert!(
                !matches!(answer, Answer::Error(e) if e.kind == ErrorKind::NotFound),
                "{} (a remove taken) answered {:?}",
                req,
                answer
            );
        }
        Ok(())
    }

    /// `docker rm` (`-v`: its anonymous volumes too): refused without
    /// force for a running or restarting container, never refused with
    /// force (but while it is created).
    pub(crate) fn remove(
        &mut self,
        i: &usize,
        force: &bool,
        volumes: bool,
    ) -> Result<(), TestCaseError> {
        let running = self
            .core
            .container(&id(i))
            .is_some_and(|c| c.status == Status::Running && !c.record.intents.remove);
        let creating = self
            .core
            .container(&id(i))
            .is_some_and(|c| c.record.presence == Presence::Creating);
        // Waiting out a restart backoff: refused without force, as
        // dockerd refuses to remove a restarting container.
        let restarting = self
            .core
            .container(&id(i))
            .is_some_and(|c| c.record.intents.policy_restart);
        // A removal under way takes any `rm` (answered when done).
        let removing = self
            .core
            .container(&id(i))
            .is_some_and(|c| c.record.intents.remove);
        // Nothing runs, nothing is about to: `rm` goes ahead.
        let idle = self.core.container(&id(i)).is_some_and(|c| {
            matches!(c.status, Status::Exited | Status::Created)
                && matches!(c.task, TaskState::Absent | TaskState::Stopped)
                && !c.record.intents.policy_restart
                && c.record.presence != Presence::Creating
        });
        let paused = self.core.container(&id(i)).is_some_and(|c| c.paused);
        let shown = self.core.container(&id(i)).is_some();
        let req = self.command(Command::Remove {
            id: id(i),
            force: *force,
            volumes,
        })?;
        if shown && self.answer_of(req).is_none() {
            self.removes.insert(req);
        }
        // dockerd's refusal of a plain `rm` of a paused container
        // says so (unpause it first).
        if paused
            && !*force
            && let Some(Answer::Error(e)) = self.answer_of(req)
        {
            prop_assert!(e.message.contains("paused"), "{}: {}", req, e.message);
        }
        // `rm` of a running container is refused; `rm -f` never is
        // (but while the create is still on its way).
        let conflict = self.trace.iter().rev().any(|a| {
            matches!(a, Action::Answer(r, Answer::Error(e)) if *r == req && e.kind == ErrorKind::Conflict)
        });
        prop_assert!(
            if *force {
                !conflict || creating
            } else {
                (conflict || !running && !restarting) && !(conflict && (idle || removing))
            },
            "remove (force {}) of {} (running {}, restarting {}, idle {}): conflict {}",
            force,
            id(i),
            running,
            restarting,
            idle,
            conflict
        );
        Ok(())
    }

    /// No request is lost: once healed, everything but a wait is answered.
    pub(crate) fn check_requests_answered(&self) -> Result<(), TestCaseError> {
        for req in &self.must_answer {
            prop_assert!(
                self.answered.contains_key(req),
                "{} was never answered",
                req
            );
        }
        Ok(())
    }
}
