//! Record edits: renames, restart policy updates and `docker update
//! --memory`; a name leads to the container that has it, and to no other.

use crate::calls::Call;
use crate::harness::Harness;
use crate::steps::{id, restart_policy};
use holdfast_core::*;
use proptest::prelude::*;

impl Harness {
    /// A rename or a policy update, and what its answer must mean: a name
    /// goes to one container only, recorded on disk before it is said done.
    pub(crate) fn edit(&mut self, id: &ContainerId, arg: u8) -> Result<(), TestCaseError> {
        if arg % 2 == 1 {
            return self.update_policy(id, arg);
        }
        self.rename(id, arg)
    }

    /// `docker update --restart`: recorded before it is said done; a
    /// restart waiting out its backoff goes on only if the new policy
    /// would have asked for it too; never a policy for an auto-remove
    /// container.
    fn update_policy(&mut self, id: &ContainerId, arg: u8) -> Result<(), TestCaseError> {
        let policy = restart_policy(arg / 2);
        let before = self.core.container(id).map(|c| {
            let r = c.record;
            let last_exit = r.exit.as_ref().map_or(0, |e| e.exit_code);
            let wanted = policy.wants_restart(last_exit, r.restart_count, r.intents.user_stopped);
            (r.config.auto_remove, r.intents.policy_restart && wanted)
        });
        let req = self.command(Command::UpdateRestartPolicy {
            id: id.clone(),
            policy,
        })?;
        match self.answer_of(req) {
            Some(Answer::Done) => {
                let recorded = self.records.get(id).map(|r| r.config.restart_policy);
                prop_assert_eq!(recorded, Some(policy), "{} updated, not recorded", req);
                // A restart waiting out its backoff goes on only if the
                // new policy would have asked for it too.
                let waiting = self
                    .core
                    .container(id)
                    .map(|c| c.record.intents.policy_restart);
                prop_assert_eq!(
                    waiting,
                    before.map(|b| b.1),
                    "{} to {:?}: the waiting policy restart",
                    req,
                    policy
                );
                prop_assert!(
                    !before.is_some_and(|b| b.0) || policy == RestartPolicy::No,
                    "{} gave an auto-remove container a restart policy",
                    req
                );
            }
            Some(Answer::Error(e)) if e.kind == ErrorKind::Conflict => {
                let creating = self
                    .core
                    .container(id)
                    .is_some_and(|c| c.record.presence == Presence::Creating);
                prop_assert!(
                    creating || before.is_some_and(|b| b.0) && policy != RestartPolicy::No,
                    "{} refused: {}",
                    req,
                    e.message
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// `docker rename`: to a name Docker's rule allows, and no other
    /// container's; the old name no longer leads to it.
    fn rename(&mut self, id: &ContainerId, arg: u8) -> Result<(), TestCaseError> {
        let before = self.core.container(id).map(|c| c.record.name.clone());
        // Mostly names of the model (n0 to n3), some that Docker's rule
        // refuses: too short, a bad first or later character, too long.
        let name = match arg / 2 % 12 {
            8 => "n".to_owned(),
            9 => "-n1".to_owned(),
            10 => "n/1".to_owned(),
            11 => "n".repeat(256),
            k => format!("n{}", k % 4),
        };
        let valid = {
            let mut chars = name.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
                && (2..=255).contains(&name.len())
        };
        let owner = self.core.resolve(&name).ok();
        let req = self.command(Command::Rename {
            id: id.clone(),
            name: name.clone(),
        })?;
        let answer = self.answer_of(req);
        let refused_name = matches!(&answer, Some(Answer::Error(e)) if e.kind == ErrorKind::Invalid && !e.message.contains("same name"));
        let created = self
            .core
            .container(id)
            .is_some_and(|c| c.record.presence != Presence::Creating);
        prop_assert!(
            refused_name != valid || !created && !refused_name,
            "{} renamed to {:?}: {:?}",
            req,
            name,
            answer
        );
        match answer {
            Some(Answer::Done) => {
                prop_assert!(
                    owner.is_none(),
                    "{} renamed {} onto the name of {:?}",
                    req,
                    id,
                    owner
                );
                prop_assert_eq!(self.core.resolve(&name).ok(), Some(id.clone()));
                let recorded = self.records.get(id).map(|r| r.name.clone());
                prop_assert_eq!(
                    recorded,
                    Some(name.clone()),
                    "{} renamed, not recorded",
                    req
                );
                if let Some(old) = before.filter(|old| *old != name) {
                    prop_assert!(
                        self.core.resolve(&old).ok().as_ref() != Some(id),
                        "{} still answers to its old name {}",
                        id,
                        old
                    );
                }
            }
            Some(Answer::Error(e)) if e.kind == ErrorKind::Conflict => {
                let creating = self
                    .core
                    .container(id)
                    .is_some_and(|c| c.record.presence == Presence::Creating);
                prop_assert!(
                    creating || owner.as_ref().is_some_and(|o| o != id),
                    "{} refused a free name {}: {}",
                    req,
                    name,
                    e.message
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// An update whose call failed is answered then (the user's to retry):
    /// 503 if containerd went away, 400 for resources the runtime rejects,
    /// 500 for any other refusal.
    pub(crate) fn check_failed_update_answered(
        &self,
        input: &Input,
        answered_call: &Option<Call>,
        updated_then: &[(RequestId, ContainerId, Answer)],
    ) -> Result<(), TestCaseError> {
        if let (Input::ActionResult(_, Err(failure)), Some(Call::UpdateResources { id, .. })) =
            (&input, &answered_call)
        {
            prop_assert!(
                !self.updates.values().any(|of| of == id),
                "an update of {} failed ({:?}), and the user's update still waits",
                id,
                failure.kind
            );
            let status = match failure.kind {
                FailureKind::Unavailable => ErrorKind::Unavailable,
                FailureKind::Invalid => ErrorKind::Invalid,
                _ => ErrorKind::Internal,
            };
            for (req, answer) in updated_then
                .iter()
                .filter(|(_, of, _)| of == id)
                .map(|(r, _, a)| (r, a))
            {
                prop_assert!(
                    matches!(answer, Answer::Error(e) if e.kind == status),
                    "{} (an update of {}) failed with {:?}, told {:?}",
                    req,
                    id,
                    failure.kind,
                    answer
                );
            }
        }
        Ok(())
    }

    /// A name leads to a container shown, never to one being rolled back
    /// (its create failed: the name is free at once); every container
    /// shown answers to its own name, and to no other's.
    pub(crate) fn check_names(&self) -> Result<(), TestCaseError> {
        for r in self.records.values() {
            if let Ok(owner) = self.core.resolve(&r.name) {
                prop_assert!(
                    self.core.container(&owner).is_some(),
                    "the name {} leads to {}, which is not shown",
                    &r.name,
                    owner
                );
            }
        }
        // Every container shown answers to its own name, and to no other's.
        for c in self.core.containers() {
            prop_assert_eq!(
                self.core.resolve(&c.record.name).ok(),
                Some(c.record.id.clone()),
                "the name {} does not lead to its container",
                &c.record.name
            );
        }
        Ok(())
    }

    /// A record edit, half of them of a container waiting out a restart
    /// backoff, if there is one: a window too short to hit by chance, where
    /// an update must keep or drop that restart.
    pub(crate) fn edit_chosen(&mut self, i: &usize, arg: &u8) -> Result<(), TestCaseError> {
        // Half the edits go to a container waiting out a restart
        // backoff, if there is one: a window too short to hit by
        // chance, where an update must keep or drop that restart.
        let waiting = self
            .core
            .containers()
            .find(|c| c.record.intents.policy_restart)
            .map(|c| c.record.id.clone());
        let target = waiting.filter(|_| arg & 0x80 != 0).unwrap_or(id(i));
        self.edit(&target, arg & 0x7f)?;
        Ok(())
    }

    /// `docker update --memory`: refused at once, it records nothing.
    pub(crate) fn update_memory(&mut self, i: &usize, mib: &u8) -> Result<(), TestCaseError> {
        self.updates_asked.insert(id(i));
        let before = self.core.container(&id(i)).map(|c| c.record.config.clone());
        // (Known before it is fed: a refusal answers it at once.)
        let req = RequestId(self.next_req + 1);
        self.updates.insert(req, id(i));
        let req2 = self.command(Command::UpdateResources {
            id: id(i),
            update: ResourceUpdate {
                memory_limit_bytes: Some(u64::from(*mib) << 20),
                ..Default::default()
            },
        })?;
        prop_assert_eq!(req, req2);
        // Refused at once, it records nothing.
        let refused = self
            .trace
            .iter()
            .rev()
            .any(|a| matches!(a, Action::Answer(r, Answer::Error(_)) if *r == req));
        if refused {
            let after = self.core.container(&id(i)).map(|c| c.record.config.clone());
            prop_assert_eq!(before, after, "a refused update changed the record");
        }
        Ok(())
    }
}
