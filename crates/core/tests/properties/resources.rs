//! Property 8, the decisions beside containers' runs: volumes (made
//! before use, never removed while a record names them, none leaked),
//! execs (whose end changes nothing of their container), commits (whose
//! freeze is always thawed) and copies (whose mount is always undone).
//!
//! The oracles are the simulator's (`holdfast_sim::check::resources`):
//! one judgement of these books for both proofs. What the harness adds is
//! its own way to reach the situations: a step chooses each answer, each
//! lost event and each crash, where the simulator draws them.

use crate::calls::Call;
use crate::harness::Harness;
use crate::steps::id;
use holdfast_core::*;
use holdfast_sim::check::resources as oracle;
use holdfast_sim::model::Effect;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// The harness's books of the resource steps' requests and of what the
/// store holds of volumes.
#[derive(Default)]
pub(crate) struct Resources {
    /// Cases whose containers mount volumes and whose users exec, commit,
    /// copy and manage volumes: the other cases never see a volume action.
    pub(crate) on: bool,
    /// The last event of each volume, network, mount and interface in
    /// this daemon's life (whether it said began).
    pub(crate) told: BTreeMap<String, bool>,
    /// Volume records as holdfastd persisted them.
    pub(crate) records: BTreeMap<String, VolumeRecord>,
    /// Volumes whose removal was recorded, and not made anew since.
    pub(crate) doomed: BTreeSet<String>,
    /// Volumes a user asked to remove (`volume rm`, `prune`).
    pub(crate) removals_asked: BTreeSet<String>,
    /// Execs made so far (their ids are numbered).
    pub(crate) execs_made: u64,
    /// The newest exec of each container.
    pub(crate) newest_exec: BTreeMap<ContainerId, String>,
    /// Exec starts the core took and had not answered when asked: each
    /// must be carried out once healed, if its run goes on (unless it was
    /// answered as not begun).
    pub(crate) exec_starts: BTreeMap<RequestId, (ContainerId, String)>,
    /// Resizes of an exec, not answered yet.
    pub(crate) resizes: BTreeMap<RequestId, (ContainerId, String)>,
    /// Containers a commit asked to freeze, in this daemon's life.
    pub(crate) commits_freezing: BTreeSet<ContainerId>,
    /// What users asked for, in any daemon's life: exec starts (by exec),
    /// resizes, commits and copies (by container).
    pub(crate) starts_asked: BTreeSet<String>,
    pub(crate) resizes_asked: BTreeSet<ContainerId>,
    pub(crate) commits_asked: BTreeSet<ContainerId>,
    pub(crate) copies_asked: BTreeSet<ContainerId>,
    /// Unpauses not answered yet.
    pub(crate) unpauses: BTreeMap<RequestId, ContainerId>,
    /// Commits not answered yet; and the containers whose commit the
    /// input being fed answered as failed (its freeze may be the call
    /// that failed, not a user's pause).
    pub(crate) commits: BTreeMap<RequestId, ContainerId>,
    pub(crate) commit_failed_now: BTreeSet<ContainerId>,
    /// Mounts asked for, not answered yet; and holds taken (a mount
    /// answered), each released by its own unmount.
    pub(crate) mounts: BTreeMap<RequestId, ContainerId>,
    pub(crate) holds: Vec<ContainerId>,
    /// `rm -v` not answered yet, with the container's mounts when asked.
    pub(crate) rm_v: BTreeMap<RequestId, (ContainerId, Vec<BindMount>)>,
    /// Prunes not answered yet, with the volumes each must remove.
    pub(crate) prunes: BTreeMap<RequestId, Vec<String>>,
    /// Containers a user (or someone outside) froze and did not thaw
    /// since: the only tasks that may stay frozen.
    pub(crate) paused_by_user: BTreeMap<ContainerId, RequestId>,
    /// The containers whose entry there is a freeze from outside (its
    /// request id only orders it among the users' unpauses), so that the
    /// outside's thaw takes back its own freeze and never a user's pause
    /// asked since.
    pub(crate) frozen_outside: BTreeSet<ContainerId>,
}

impl Harness {
    /// The store as a restarted holdfastd would find it.
    fn stored(
        &self,
    ) -> (
        BTreeMap<ContainerId, Record>,
        &BTreeMap<String, VolumeRecord>,
    ) {
        (self.records.clone(), &self.res.records)
    }

    /// The mounts a case's containers name: `c0` an anonymous volume of
    /// its own, `c1` the named `v0` (made if missing), `c2` both kinds,
    /// on `v1`.
    pub(crate) fn mounts_of(&mut self, i: usize) -> Vec<BindMount> {
        if !self.res.on {
            return Vec::new();
        }
        let volume = |name: String, destination: &str, anonymous: bool| BindMount {
            source: String::new(),
            destination: destination.to_owned(),
            read_only: false,
            volume: Some(name),
            anonymous,
        };
        let anonymous = volume(format!("anon{}", self.next_req + 1), "/data", true);
        match i {
            0 => vec![anonymous],
            1 => vec![volume("v0".into(), "/shared", false)],
            _ => vec![anonymous, volume("v1".into(), "/shared", false)],
        }
    }

    /// Notes what a command asks of the resources, before it is fed.
    pub(crate) fn note_resource_command(&mut self, req: RequestId, command: &Command) {
        match command {
            Command::Pause { id } => {
                self.res.paused_by_user.insert(id.clone(), req);
                self.res.frozen_outside.remove(id);
            }
            Command::Unpause { id } => {
                self.res.unpauses.insert(req, id.clone());
            }
            Command::ReadChanges { id, pause, .. } => {
                self.res.commits_asked.insert(id.clone());
                self.res.commits.insert(req, id.clone());
                if *pause {
                    self.res.commits_freezing.insert(id.clone());
                }
            }
            Command::MountRootfs { id } => {
                self.res.copies_asked.insert(id.clone());
                self.res.mounts.insert(req, id.clone());
            }
            Command::StartExec { exec_id, .. } => {
                self.res.starts_asked.insert(exec_id.clone());
            }
            Command::Resize { id, exec_id, .. } => {
                self.res.resizes_asked.insert(id.clone());
                if let Some(exec_id) = exec_id {
                    self.res.resizes.insert(req, (id.clone(), exec_id.clone()));
                }
            }
            Command::RemoveVolume { name, .. } => {
                self.res.removals_asked.insert(name.clone());
            }
            Command::PruneVolumes { names } => {
                self.res.removals_asked.extend(names.iter().cloned());
                let mut expected: Vec<String> = names
                    .iter()
                    .filter(|n| {
                        self.core
                            .volume(n)
                            .is_some_and(|v| v.state == ResourceState::Ready)
                            && self.core.volume_users(n).is_empty()
                    })
                    .cloned()
                    .collect();
                expected.sort();
                expected.dedup();
                self.res.prunes.insert(req, expected);
            }
            Command::Remove {
                id, volumes: true, ..
            } => {
                if let Some(c) = self.core.container(id) {
                    let mounts = c.record.config.mounts.clone();
                    self.res.rm_v.insert(req, (id.clone(), mounts));
                }
            }
            _ => {}
        }
    }

    /// Checks what an answer says of the resources.
    pub(crate) fn check_resource_answer(
        &mut self,
        req: &RequestId,
        answer: &Answer,
    ) -> Result<(), TestCaseError> {
        if let Some(id) = self.res.mounts.remove(req)
            && matches!(answer, Answer::Rootfs { .. })
        {
            self.res.holds.push(id);
        }
        // An unpause done undoes the pauses asked before it.
        if let Some(id) = self.res.unpauses.remove(req)
            && !matches!(answer, Answer::Error(_))
            && self.res.paused_by_user.get(&id).is_some_and(|p| p < req)
        {
            self.res.paused_by_user.remove(&id);
            self.res.frozen_outside.remove(&id);
        }
        if let Some(id) = self.res.commits.remove(req)
            && matches!(answer, Answer::Error(_))
        {
            self.res.commit_failed_now.insert(id);
        }
        if oracle::exec_start_dropped(answer) {
            self.res.exec_starts.remove(req);
        }
        if let Some((id, exec_id)) = self.res.resizes.remove(req) {
            oracle::resize_refusal(&self.world.containerd, &id, &exec_id, answer)
                .map_err(TestCaseError::fail)?;
        }
        if let Some(expected) = self.res.prunes.remove(req)
            && let Answer::Pruned(removed) = answer
        {
            prop_assert_eq!(
                removed,
                &expected,
                "{}: a prune removed other volumes than those made and named by no one",
                req
            );
        }
        if let Some((id, mounts)) = self.res.rm_v.remove(req)
            && *answer == Answer::Done
        {
            let (containers, volumes) = self.stored();
            let stored = oracle::Stored {
                containers: &containers,
                volumes,
            };
            oracle::rm_v_volumes(
                &id,
                &mounts,
                &stored,
                &self.res.doomed,
                &self.res.removals_asked,
            )
            .map_err(TestCaseError::fail)?;
        }
        Ok(())
    }

    /// Follows a volume record holdfastd persisted or dropped.
    pub(crate) fn follow_volume_record(&mut self, action: &Action) -> Result<(), TestCaseError> {
        prop_assert!(
            self.res.on,
            "a volume action in a case whose containers name none: {:?}",
            action
        );
        match action {
            Action::PersistVolume(rec) => {
                match rec.state {
                    ResourceState::Removing => {
                        self.res.doomed.insert(rec.name.clone());
                    }
                    ResourceState::Creating => {
                        self.res.doomed.remove(&rec.name);
                    }
                    ResourceState::Ready => {}
                }
                self.res.records.insert(rec.name.clone(), rec.clone());
            }
            Action::UnpersistVolume(name) => {
                self.res.records.remove(name);
            }
            _ => {}
        }
        Ok(())
    }

    /// After every input: the volumes on the host are the records' (none
    /// leaked, none recorded made and gone, a created container's made
    /// and filled), and each exec shows what its process did.
    pub(crate) fn check_resources(&self) -> Result<(), TestCaseError> {
        if !self.res.on {
            return Ok(());
        }
        let (containers, volumes) = self.stored();
        let stored = oracle::Stored {
            containers: &containers,
            volumes,
        };
        oracle::volumes(&self.world.volumes, &stored).map_err(TestCaseError::fail)?;
        oracle::exec_exits(Some(&self.core), &self.world.containerd).map_err(TestCaseError::fail)
    }

    /// Carries out (or fails) an exec's, a snapshot's or a volume's call.
    /// containerd's calls fail as containerd fails them (gone, out of
    /// time, refused); a volume's only as the executor fails (a full
    /// disk), whatever containerd does.
    pub(crate) fn resolve_resource(
        &mut self,
        op: OpId,
        call: &Call,
        failure: u8,
    ) -> Result<(), TestCaseError> {
        if let Call::Volume(volume_call) = call {
            if (1..=6).contains(&failure) {
                return self.feed(Input::ActionResult(
                    op,
                    Err(Failure::new(FailureKind::Other, "injected: disk full")),
                ));
            }
            self.carry_out_volume(volume_call)?;
            // 9: done, and then the executor fails (a fill whose last
            // file could not be written).
            let result = match failure {
                9 => Err(Failure::new(FailureKind::Other, "injected: after effect")),
                _ => Ok(Done::Ok),
            };
            return self.feed(Input::ActionResult(op, result));
        }
        // An exec's, a commit's or a copy's call is one of its container's
        // steps (its failures count as any other's); a resize is its
        // request's own.
        if !matches!(call, Call::ResizePty { .. }) {
            self.answering = call.container_id().cloned();
        }
        let kind = match failure {
            _ if !self.world.containerd.up => Some(FailureKind::Unavailable),
            0 | 7 | 8 | 9 => None,
            1 => Some(FailureKind::Unavailable),
            2 => Some(FailureKind::Deadline),
            4 => Some(FailureKind::FailedPrecondition),
            _ => Some(FailureKind::Other),
        };
        if let Some(kind) = kind {
            return self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))));
        }
        let containerd = &mut self.world.containerd;
        let mut fx = Vec::new();
        let done = match call {
            Call::StartExec { id, exec_id } => containerd.start_exec(id, exec_id, &mut fx),
            Call::ExecState { id, exec_id } => containerd.exec_state(id, exec_id),
            Call::DeleteExec { id, exec_id } => containerd.delete_exec(id, exec_id),
            Call::ResizePty { id, exec_id } => containerd.resize(id, exec_id.as_deref()),
            Call::Snapshot(call) => containerd.snapshot_use(call),
            other => {
                return Err(TestCaseError::fail(format!(
                    "{op}: not a resource call: {other:?}"
                )));
            }
        };
        // An exec's process runs until a step ends it (or its init dies).
        debug_assert!(fx.iter().all(|e| matches!(e, Effect::ExecStarted { .. })));
        self.answer_lost = failure == 9;
        match done {
            Ok(done) => self.reply(op, done),
            Err(refusal) => {
                self.answer_lost = false;
                self.feed(Input::ActionResult(op, Err(refusal)))
            }
        }
    }

    /// The volume executor carries a call out; a removal only when no
    /// record names the volume.
    fn carry_out_volume(&mut self, call: &VolumeCall) -> Result<(), TestCaseError> {
        if let VolumeCall::Remove { name } = call {
            let (containers, volumes) = self.stored();
            let stored = oracle::Stored {
                containers: &containers,
                volumes,
            };
            oracle::volume_removal(name, &stored).map_err(TestCaseError::fail)?;
        }
        let _ = self.world.volumes.carry_out(call);
        Ok(())
    }

    /// holdfastd dies: the volume executor's work in flight (inside the
    /// process) was done or not, never later: every other call's.
    pub(crate) fn volume_work_dies(&mut self) -> Result<(), TestCaseError> {
        let in_flight: Vec<(OpId, VolumeCall)> = self
            .outstanding
            .iter()
            .filter_map(|(op, c)| match c {
                Call::Volume(v) => Some((*op, v.clone())),
                _ => None,
            })
            .collect();
        for (op, call) in in_flight {
            if op.0 % 2 == 0 {
                self.carry_out_volume(&call)?;
            }
        }
        // The users' requests die with the daemon, and their holds with
        // their connections.
        let res = &mut self.res;
        res.exec_starts.clear();
        res.resizes.clear();
        res.mounts.clear();
        res.holds.clear();
        res.rm_v.clear();
        res.prunes.clear();
        res.unpauses.clear();
        res.commits.clear();
        res.commits_freezing.clear();
        Ok(())
    }

    /// What a restarted holdfastd finds of volumes: its records, and the
    /// directories on the host.
    pub(crate) fn restore_volumes(&mut self) -> Result<(), TestCaseError> {
        if !self.res.on {
            return Ok(());
        }
        let found = self
            .world
            .volumes
            .dirs
            .keys()
            .map(|name| FoundVolume {
                name: name.clone(),
                labels: BTreeMap::new(),
                created_at: self.now.wall,
            })
            .collect();
        self.feed(Input::VolumesFound(found))
    }

    /// The cases begin with every container created and running, each
    /// call answered at once: an exec, a commit or a copy is asked of a
    /// container that exists, not refused as of none.
    pub(crate) fn opening(&mut self) -> Result<(), TestCaseError> {
        self.settle()?;
        for i in 0..crate::steps::IDS.len() {
            self.create(&i, &0, &0)?;
            self.settle()?;
            self.command(Command::Start { id: id(&i) })?;
            self.settle()?;
        }
        Ok(())
    }

    /// `docker exec -d` of a new exec (its create, then its start), or a
    /// resize of the container's newest.
    pub(crate) fn exec(&mut self, i: &usize, arg: &u8) -> Result<(), TestCaseError> {
        let id = id(i);
        if arg & 2 != 0 {
            let exec_id = self.res.newest_exec.get(&id).cloned();
            self.command(Command::Resize {
                id,
                exec_id,
                width: 80,
                height: 24,
            })?;
            return Ok(());
        }
        self.res.execs_made += 1;
        let exec_id = format!("{:064x}", self.res.execs_made);
        self.res.newest_exec.insert(id.clone(), exec_id.clone());
        let spec = ExecSpec {
            cmd: vec!["sleep".into(), "1".into()],
            ..Default::default()
        };
        self.command(Command::CreateExec {
            id: id.clone(),
            exec_id: exec_id.clone(),
            spec: spec.into(),
        })?;
        let start = self.command(Command::StartExec {
            exec_id: exec_id.clone(),
            detach: arg & 1 != 0,
        })?;
        if self.answer_of(start).is_none() {
            self.res.exec_starts.insert(start, (id, exec_id));
        }
        Ok(())
    }

    /// The container's oldest running exec ends; its event may be lost.
    pub(crate) fn exec_ends(
        &mut self,
        i: &usize,
        status: &u8,
        lost: &bool,
    ) -> Result<(), TestCaseError> {
        let id = id(i);
        let running = self
            .world
            .containerd
            .execs
            .iter()
            .find(|((c, _), (_, exit))| *c == id && exit.is_none())
            .map(|((_, exec_id), (pid, _))| (exec_id.clone(), *pid));
        let Some((exec_id, pid)) = running else {
            return Ok(());
        };
        let status = [0, 1, 137][usize::from(*status % 3)];
        if !self.world.containerd.exec_exits(&id, &exec_id, pid, status) {
            return Ok(());
        }
        self.exec_exit_event(&id, exec_id, pid, status.unsigned_abs(), *lost)
    }

    /// An exec's exit reaches the core, or (`lost`) never does.
    pub(crate) fn exec_exit_event(
        &mut self,
        id: &ContainerId,
        exec_id: String,
        pid: u32,
        status: u32,
        lost: bool,
    ) -> Result<(), TestCaseError> {
        let event = ContainerdEvent::TaskExit {
            container: id.clone(),
            exec_id,
            pid,
            exit_status: status,
            exited_at: self.now.wall,
            oom_kills: None,
        };
        if lost {
            self.lost(&event);
            self.past_events.push(event);
            Ok(())
        } else {
            self.event(event)
        }
    }

    /// `docker commit`, frozen meanwhile or not.
    pub(crate) fn commit(&mut self, i: &usize, pause: &bool) -> Result<(), TestCaseError> {
        let layer = format!("layer{}", self.next_req + 1);
        self.command(Command::ReadChanges {
            id: id(i),
            pause: *pause,
            layer,
        })?;
        Ok(())
    }

    /// `docker cp` takes hold of the container's snapshot, or lets go of
    /// its oldest hold on it.
    pub(crate) fn copy(&mut self, i: &usize, hold: &bool) -> Result<(), TestCaseError> {
        let id = id(i);
        if *hold {
            self.command(Command::MountRootfs { id })?;
            return Ok(());
        }
        if let Some(n) = self.res.holds.iter().position(|h| *h == id) {
            self.res.holds.remove(n);
            self.command(Command::UnmountRootfs { id })?;
        }
        Ok(())
    }

    /// `docker volume create`, `rm`, `rm -f` or `prune`.
    pub(crate) fn volume(&mut self, arg: &u8) -> Result<(), TestCaseError> {
        let name = format!("v{}", (arg >> 2) & 1);
        let command = match arg % 4 {
            0 => Command::CreateVolume {
                name,
                labels: BTreeMap::new(),
            },
            1 | 2 => Command::RemoveVolume {
                name,
                force: arg % 4 == 2,
            },
            // As the API does: the names of the volumes listed.
            _ => Command::PruneVolumes {
                names: self.core.volumes().map(|v| v.name.clone()).collect(),
            },
        };
        self.command(command)?;
        Ok(())
    }

    /// Once healed: every copy lets go of its holds, and then nothing is
    /// left of any resource decision: no volume half made or removed, no
    /// removal recorded and not done, no snapshot mounted, no freeze a
    /// user did not ask for, no exec start owed.
    pub(crate) fn check_resources_healed(&mut self) -> Result<(), TestCaseError> {
        if !self.res.on {
            return Ok(());
        }
        for id in std::mem::take(&mut self.res.holds) {
            self.command(Command::UnmountRootfs { id })?;
        }
        self.settle()?;
        let (containers, volumes) = self.stored();
        let stored = oracle::Stored {
            containers: &containers,
            volumes,
        };
        let converged = oracle::resources_converged(
            &self.world.containerd,
            &self.world.volumes,
            &stored,
            &self.res.paused_by_user,
        )
        .or_else(|| oracle::exec_starts_done(Some(&self.core), &self.res.exec_starts))
        .or_else(|| oracle::removals_done(&self.world.volumes, &self.res.doomed));
        match converged {
            Some(message) => Err(TestCaseError::fail(message)),
            None => Ok(()),
        }
    }
}
