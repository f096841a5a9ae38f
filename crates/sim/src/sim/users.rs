//! The user workload: random `docker` commands (or a script's), by target
//! index, turned into the core's commands.

use super::{Sim, SimFailure};
use crate::check::UserKind;
use holdfast_core::{
    Api, Command, ContainerConfig, ContainerId, HealthConfig, Input, NetworkMode, RequestId,
    RestartPolicy, Signal, WaitCondition,
};
use std::time::Duration;

/// A user command, by target index (taken modulo the containers created so
/// far), as both the random users and the fuzz decoder produce them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserOp {
    Create {
        policy: u8,
        auto_remove: bool,
        stop_timeout_s: Option<u8>,
        stop_signal: u8,
    },
    Start(u8),
    Stop(u8, Option<u8>),
    Kill(u8, u8),
    Restart(u8),
    Remove(u8, bool),
    Wait(u8, u8),
    /// A record edit: a rename (even argument) or a restart policy update.
    Edit(u8, u8),
    /// `docker pause` (true) or `docker unpause` (false).
    Pause(u8, bool),
    /// `docker exec -d` (its create, then its start), or a resize (1 in
    /// 4) or a kill (the CRI's `ExecSync` past its timeout; 1 in 4) of the
    /// last exec made.
    Exec(u8, u8),
    /// `docker commit` (argument 0: frozen, as by default; 1: not), or a
    /// copy's hold on the snapshot (2: taken, 3: the oldest released).
    Snapshot(u8, u8),
    /// `docker volume create`, `rm` (`-f` or not) or `prune` of the
    /// volumes the users name.
    Volume(u8),
}

/// The named volumes users make and share (`-v shared1:/data`).
const SHARED_VOLUMES: [&str; 3] = ["shared0", "shared1", "shared2"];

impl Sim {
    pub(super) fn random_user_op(&mut self) -> UserOp {
        let r = &mut self.rng_user;
        let target = u8::try_from(r.below(256)).unwrap_or(0);
        let live = self.core.as_ref().map_or(0, |c| c.containers().count());
        let roll = r.below(100);
        if self.ids.is_empty() || (roll < 15 && live < self.profile.containers_max) {
            let stop_timeout_s = r
                .chance(500)
                .then(|| u8::try_from(r.below(15)).unwrap_or(0));
            return UserOp::Create {
                policy: u8::try_from(r.below(6)).unwrap_or(0),
                auto_remove: r.chance(100),
                stop_timeout_s,
                stop_signal: u8::try_from(r.below(64)).unwrap_or(0),
            };
        }
        let arg = u8::try_from(r.below(256)).unwrap_or(0);
        match roll {
            0..=39 => UserOp::Start(target),
            40..=54 => UserOp::Stop(target, r.chance(500).then_some(arg % 20)),
            55..=64 => UserOp::Kill(target, arg),
            65..=74 => UserOp::Restart(target),
            75..=84 => UserOp::Remove(target, r.chance(500)),
            85..=89 => UserOp::Pause(target, arg % 3 != 0),
            90..=91 => UserOp::Exec(target, arg),
            92..=93 => UserOp::Snapshot(target, arg),
            94 => UserOp::Volume(arg),
            95..=99 => UserOp::Edit(target, arg),
            _ => UserOp::Wait(target, arg),
        }
    }

    fn target(&self, index: u8) -> Option<ContainerId> {
        if self.ids.is_empty() {
            return None;
        }
        // Prefer recent containers: most old ones are gone.
        let recent = self.ids.len().min(8);
        let i = self.ids.len() - recent + usize::from(index) % recent;
        self.ids.get(i).cloned()
    }

    /// The target of a stop, kill, restart or remove: never a service
    /// left alone. One in three containers that always restart is one
    /// nobody stops: its policy alone keeps it up, whatever happens to
    /// holdfastd meanwhile, and the checker demands every restart it owes
    /// until the end (a policy container users stop counts no more).
    fn meddle_target(&self, index: u8) -> Option<ContainerId> {
        let id = self.target(index)?;
        (!self.left_alone(&id)).then_some(id)
    }

    fn left_alone(&self, id: &ContainerId) -> bool {
        let n: Option<u64> = id.as_str().trim_start_matches('c').parse().ok();
        let policy = self
            .core
            .as_ref()
            .and_then(|core| core.container(id))
            .map(|view| view.record.config.restart_policy);
        let service = matches!(
            policy,
            Some(RestartPolicy::Always | RestartPolicy::UnlessStopped)
        );
        service && n.is_some_and(|n| n.is_multiple_of(3))
    }

    /// The services nobody stops (see [`Sim::meddle_target`]).
    pub(super) fn services_left_alone(&self) -> Vec<ContainerId> {
        self.ids
            .iter()
            .filter(|id| self.left_alone(id))
            .cloned()
            .collect()
    }

    pub(super) fn user(&mut self, op: UserOp) -> Result<(), SimFailure> {
        if self.core.is_none() {
            // holdfastd is down: the API socket refuses the user.
            return Ok(());
        }
        let command = match op {
            UserOp::Create {
                policy,
                auto_remove,
                stop_timeout_s,
                stop_signal,
            } => {
                self.next_container += 1;
                let n = self.next_container;
                let id: ContainerId = match format!("c{n}").parse() {
                    Ok(id) => id,
                    Err(_) => return Ok(()),
                };
                self.ids.push(id.clone());
                let restart_policy = policy_of(policy);
                // The container's own stop signal (low three bits) and the
                // image's (next three): none, or one of those real images
                // and users pick (SIGINT, SIGQUIT for nginx, SIGKILL, ...).
                const SIGNALS: [Option<u32>; 8] = [
                    None,
                    None,
                    Some(2),
                    Some(3),
                    Some(15),
                    Some(9),
                    Some(10),
                    Some(1),
                ];
                let signal = |n: Option<u32>| n.and_then(|n| Signal::try_from(n).ok());
                // Every other container is on a bridge network (the
                // default or a user-defined one: the same network step);
                // of the others, half share another's namespace (no step
                // of their own, as `none`). Chosen by index, not by the
                // seed's stream: the seeds' runs stay as they were.
                let (network, network_name, network_container) = match n % 4 {
                    0 => (NetworkMode::Bridge, None, None),
                    2 => (NetworkMode::Bridge, Some("app".to_owned()), None),
                    1 => (NetworkMode::None, None, None),
                    _ => (
                        NetworkMode::Container,
                        None,
                        Some(holdfast_core::SharedNetwork {
                            id: "donor".into(),
                            pid: 1,
                        }),
                    ),
                };
                // Of every seven, one is a pod's sandbox and the next a
                // container of the last sandbox made (refused unless it
                // runs): both made and changed through the CRI.
                let role = match (n % 7, &self.last_sandbox) {
                    (3, _) => Some(holdfast_core::PodRole::Sandbox),
                    (4, Some(sandbox)) => Some(holdfast_core::PodRole::Container {
                        sandbox: sandbox.to_string(),
                        name: format!("app{n}"),
                    }),
                    _ => None,
                };
                if role == Some(holdfast_core::PodRole::Sandbox) {
                    self.last_sandbox = Some(id.clone());
                }
                let pod = role.map(|role| holdfast_core::PodMember {
                    role,
                    pod_name: "pod".to_owned(),
                    pod_uid: "uid".to_owned(),
                    pod_namespace: "sim".to_owned(),
                    attempt: 0,
                    annotations: Default::default(),
                    log_path: None,
                    image_ref: None,
                });
                if pod.is_some() {
                    self.pod_containers.insert(id.clone());
                }
                let config = ContainerConfig {
                    image: "busybox".into(),
                    pod,
                    network,
                    network_name,
                    network_container,
                    stop_timeout: stop_timeout_s.map(|s| Duration::from_secs(u64::from(s % 16))),
                    stop_signal: signal(SIGNALS[usize::from(stop_signal % 8)]),
                    image_stop_signal: signal(SIGNALS[usize::from((stop_signal >> 3) % 8)]),
                    restart_policy,
                    auto_remove,
                    healthcheck: health_of(n),
                    mounts: mounts_of(n),
                    ..ContainerConfig::default()
                };
                Command::Create {
                    id,
                    name: format!("name{n}"),
                    config: config.into(),
                }
            }
            UserOp::Start(t) => {
                let Some(id) = self.target(t) else {
                    return Ok(());
                };
                Command::Start { id }
            }
            UserOp::Stop(t, secs) => {
                let Some(id) = self.meddle_target(t) else {
                    return Ok(());
                };
                Command::Stop {
                    id,
                    timeout: secs.map(|s| Duration::from_secs(u64::from(s % 20))),
                    signal: None,
                }
            }
            UserOp::Kill(t, s) => {
                let Some(id) = self.meddle_target(t) else {
                    return Ok(());
                };
                let number = [9, 9, 15, 10, 1][usize::from(s) % 5];
                let Ok(signal) = Signal::try_from(number) else {
                    return Ok(());
                };
                Command::Kill { id, signal }
            }
            UserOp::Restart(t) => {
                let Some(id) = self.meddle_target(t) else {
                    return Ok(());
                };
                Command::Restart {
                    id,
                    timeout: Some(Duration::from_secs(2)),
                    signal: None,
                }
            }
            UserOp::Remove(t, force) => {
                let Some(id) = self.meddle_target(t) else {
                    return Ok(());
                };
                // `rm -v` now and then: its anonymous volumes go with it.
                Command::Remove {
                    id,
                    force,
                    volumes: t % 3 == 0,
                }
            }
            UserOp::Edit(t, arg) => {
                let Some(id) = self.target(t) else {
                    return Ok(());
                };
                if arg % 4 == 3 {
                    Command::UpdateResources {
                        id,
                        update: holdfast_core::ResourceUpdate {
                            memory_limit_bytes: Some(u64::from(arg) << 20),
                            ..Default::default()
                        },
                    }
                } else if arg % 8 == 5 {
                    // One of two more networks, or the one it was created
                    // on, made and released.
                    let own = self
                        .core
                        .as_ref()
                        .and_then(|core| core.container(&id))
                        .and_then(|c| c.record.config.network_name.clone())
                        .unwrap_or_else(|| "bridge".to_owned());
                    let network = match arg / 8 % 3 {
                        2 => own,
                        n => format!("side{n}"),
                    };
                    if arg / 16 % 2 == 0 {
                        Command::Connect {
                            id,
                            network,
                            aliases: Vec::new(),
                            ip: None,
                        }
                    } else {
                        Command::Disconnect { id, network }
                    }
                } else if arg % 2 == 0 {
                    // Often another container's name: a conflict.
                    Command::Rename {
                        id,
                        name: format!("name{}", arg / 2 % 32),
                    }
                } else {
                    Command::UpdateRestartPolicy {
                        id,
                        policy: policy_of(arg / 2),
                    }
                }
            }
            UserOp::Pause(t, freeze) => {
                let Some(id) = self.target(t) else {
                    return Ok(());
                };
                if freeze {
                    Command::Pause { id }
                } else {
                    Command::Unpause { id }
                }
            }
            UserOp::Exec(t, arg) => {
                let Some(id) = self.target(t) else {
                    return Ok(());
                };
                return self.exec(id, arg);
            }
            UserOp::Snapshot(t, arg) => {
                let Some(id) = self.target(t) else {
                    return Ok(());
                };
                match arg % 4 {
                    0 | 1 => Command::ReadChanges {
                        id,
                        pause: arg % 4 == 0,
                        layer: format!("layer{}", self.next_req + 1),
                    },
                    2 => Command::MountRootfs { id },
                    _ => {
                        if self.holds.is_empty() {
                            return Ok(());
                        }
                        let id = self.holds.remove(0);
                        Command::UnmountRootfs { id }
                    }
                }
            }
            UserOp::Volume(arg) => {
                let name = SHARED_VOLUMES[usize::from(arg / 4) % 3].to_owned();
                match arg % 4 {
                    0 => Command::CreateVolume {
                        name,
                        labels: std::collections::BTreeMap::new(),
                    },
                    1 | 2 => Command::RemoveVolume {
                        name,
                        force: arg % 4 == 2,
                    },
                    // As the API does: the names of the volumes listed.
                    _ => Command::PruneVolumes {
                        names: self
                            .core
                            .as_ref()
                            .map(|core| core.volumes().map(|v| v.name.clone()).collect())
                            .unwrap_or_default(),
                    },
                }
            }
            UserOp::Wait(t, c) => {
                let Some(id) = self.target(t) else {
                    return Ok(());
                };
                let condition = [
                    WaitCondition::NotRunning,
                    WaitCondition::NextExit,
                    WaitCondition::Removed,
                ][usize::from(c) % 3];
                Command::Wait { id, condition }
            }
        };
        self.send(command)
    }

    /// One command from a user, as the API sends it: a pod's container's
    /// through the CRI (after a try through the Docker API when it would
    /// change it), every other through the Docker API.
    fn send(&mut self, command: Command) -> Result<(), SimFailure> {
        let pod = match &command {
            Command::Create { config, .. } => config.pod.is_some(),
            command => command
                .container_id()
                .is_some_and(|id| self.pod_containers.contains(id)),
        };
        if pod && command.changes_container() {
            self.refused(Api::Docker, command.clone())?;
        }
        if pod && self.pod_still_being_made(&command) {
            // The core refuses the pod's stop or removal at once: it asks
            // for nothing, so the checker of requests never hears of it.
            return self.refused(Api::Cri, command);
        }
        let api = if pod { Api::Cri } else { Api::Docker };
        self.next_req += 1;
        let req = RequestId(self.next_req);
        let is_wait = matches!(command, Command::Wait { .. });
        match &command {
            Command::MountRootfs { id } => {
                self.mounts_asked.insert(req, id.clone());
            }
            Command::Pause { id } => {
                self.pause_asked.insert(id.clone(), req);
            }
            Command::Unpause { id } => {
                self.unpauses_asked.insert(req, id.clone());
            }
            Command::Resize {
                id,
                exec_id: Some(exec_id),
                ..
            } => {
                self.resizes_asked
                    .insert(req, (id.clone(), exec_id.clone()));
            }
            Command::PruneVolumes { names } => {
                self.volume_removals_asked.extend(names.iter().cloned());
                if let Some(core) = self.core.as_ref() {
                    let mut expected: Vec<String> = names
                        .iter()
                        .filter(|n| {
                            core.volume(n)
                                .is_some_and(|v| v.state == holdfast_core::ResourceState::Ready)
                                && core.volume_users(n).is_empty()
                        })
                        .cloned()
                        .collect();
                    expected.sort();
                    expected.dedup();
                    self.prunes_asked.insert(req, expected);
                }
            }
            Command::RemoveVolume { name, .. } => {
                self.volume_removals_asked.insert(name.clone());
            }
            Command::Remove {
                id, volumes: true, ..
            } => {
                if let Some(c) = self.core.as_ref().and_then(|core| core.container(id)) {
                    let mounts = c.record.config.mounts.clone();
                    self.rm_v_asked.insert(req, (id.clone(), mounts));
                }
            }
            _ => {}
        }
        self.checker.command(req, &command, self.now);
        if pod {
            self.implied_by_pod(&command);
        }
        let exec_start = match (&command, &self.last_exec) {
            (Command::StartExec { exec_id, .. }, Some((id, last))) if last == exec_id => {
                Some((id.clone(), exec_id.clone()))
            }
            _ => None,
        };
        self.feed(Input::Command(req, api, command))?;
        if let Some(start) = exec_start
            && self.core.is_some()
            && !self.answered_now.contains(&req)
        {
            self.exec_starts.insert(req, start);
        }
        // `docker run -d` drops its wait once the container started.
        if is_wait && self.rng_world.chance(300) {
            self.feed(Input::Cancel(req))?;
        }
        Ok(())
    }
}

impl Sim {
    /// A pod's stop or (forced) removal is its containers' too, decided by
    /// the core in the same step: the checker learns it as the users'.
    fn implied_by_pod(&mut self, command: &Command) {
        let (sandbox, remove) = match command {
            Command::Stop { id, .. } => (id, false),
            Command::Remove {
                id, force: true, ..
            } => (id, true),
            _ => return,
        };
        let Some(core) = self.core.as_ref() else {
            return;
        };
        let is_sandbox = core.container(sandbox).is_some_and(|c| {
            c.record
                .config
                .pod
                .as_ref()
                .is_some_and(|p| p.role == holdfast_core::PodRole::Sandbox)
        });
        if !is_sandbox {
            return;
        }
        for member in core.pod_members(sandbox) {
            self.next_req += 1;
            let req = RequestId(self.next_req);
            let implied = if remove {
                Command::Remove {
                    id: member,
                    force: true,
                    volumes: true,
                }
            } else {
                Command::Stop {
                    id: member,
                    timeout: Some(Duration::ZERO),
                    signal: None,
                }
            };
            self.checker.implied(req, &implied, self.now);
        }
    }

    /// A pod's stop or forced removal while one of its containers is still
    /// being created: the core refuses it (kubelet asks again).
    fn pod_still_being_made(&self, command: &Command) -> bool {
        let sandbox = match command {
            Command::Stop { id, .. }
            | Command::Remove {
                id, force: true, ..
            } => id,
            _ => return false,
        };
        let Some(core) = self.core.as_ref() else {
            return false;
        };
        core.pod_members(sandbox).iter().any(|m| {
            core.container(m)
                .is_some_and(|c| c.record.presence == holdfast_core::Presence::Creating)
        })
    }

    /// A command the core must refuse at once, changing nothing: a Docker
    /// API change of a pod's container (kubelet owns the pod), a pod's
    /// stop while one of its containers is being made. It asks for
    /// nothing, so the checker of requests never hears of it.
    fn refused(&mut self, api: Api, command: Command) -> Result<(), SimFailure> {
        let Some(id) = command.container_id().cloned() else {
            return Ok(());
        };
        self.next_req += 1;
        let req = RequestId(self.next_req);
        let before = self
            .core
            .as_ref()
            .and_then(|core| core.container(&id))
            .map(|c| c.record.clone());
        self.refusals_owed.insert(req, (id.clone(), before.clone()));
        self.feed(Input::Command(req, api, command))?;
        let Some(core) = self.core.as_ref() else {
            return Ok(()); // holdfastd died: the client saw the request fail
        };
        let after = core.container(&id).map(|c| c.record.clone());
        if self.refusals_owed.remove(&req).is_some() {
            return Err(self.failure(format!(
                "{req}: a change of pod container {id} through {api:?} was not refused at once"
            )));
        }
        if after != before {
            return Err(self.failure(format!(
                "{req}: a refused command through {api:?} changed pod container {id}'s record"
            )));
        }
        Ok(())
    }

    /// `docker exec -d`: its create, then its start; or a resize or a
    /// kill of the last exec made.
    fn exec(&mut self, id: ContainerId, arg: u8) -> Result<(), SimFailure> {
        if arg % 2 == 1 {
            let Some((id, exec_id)) = self.last_exec.clone() else {
                return Ok(());
            };
            if arg % 4 == 3 {
                return self.send(Command::KillExec {
                    exec_id,
                    signal: holdfast_core::Signal::SIGKILL,
                });
            }
            return self.send(Command::Resize {
                id,
                exec_id: Some(exec_id),
                width: 80,
                height: u32::from(arg),
            });
        }
        let exec_id = format!("{:064x}", self.next_req + 1);
        self.last_exec = Some((id.clone(), exec_id.clone()));
        let spec = holdfast_core::ExecSpec {
            cmd: vec!["sleep".into(), "1".into()],
            ..Default::default()
        };
        self.send(Command::CreateExec {
            id,
            exec_id: exec_id.clone(),
            spec: spec.into(),
        })?;
        self.send(Command::StartExec {
            exec_id,
            detach: true,
        })
    }

    /// The users' copies are done: each hold is released.
    pub(super) fn release_holds(&mut self) -> Result<(), SimFailure> {
        for id in std::mem::take(&mut self.holds) {
            self.send(Command::UnmountRootfs { id })?;
        }
        Ok(())
    }
}

/// Every fifth container has an anonymous volume (`-v /data`), and every
/// fifth another one of the shared named volumes (made if missing); by
/// its number, drawing nothing from the seed.
fn mounts_of(n: u64) -> Vec<holdfast_core::BindMount> {
    let volume = |name: String, destination: &str, anonymous: bool| holdfast_core::BindMount {
        source: String::new(),
        destination: destination.to_owned(),
        read_only: false,
        volume: Some(name),
        anonymous,
    };
    match n % 5 {
        0 => vec![volume(format!("anon{n}"), "/data", true)],
        2 => vec![volume(
            SHARED_VOLUMES[usize::try_from(n / 5 % 3).unwrap_or(0)].to_owned(),
            "/shared",
            false,
        )],
        _ => Vec::new(),
    }
}

/// Every third container has a health check, with its settings spread by
/// its number (drawing nothing from the seed's streams).
fn health_of(n: u64) -> Option<HealthConfig> {
    n.is_multiple_of(3).then(|| HealthConfig {
        test: vec!["CMD".into(), "true".into()],
        interval: Some(Duration::from_secs(5 + n % 7)),
        timeout: Some(Duration::from_secs(1 + n % 3)),
        start_period: n.is_multiple_of(2).then(|| Duration::from_secs(8)),
        start_interval: Some(Duration::from_secs(2)),
        retries: Some(u32::try_from(n % 4).unwrap_or(0)),
    })
}

/// The restart policies users pick, `no` the most often.
fn policy_of(n: u8) -> RestartPolicy {
    match n % 6 {
        0 | 1 => RestartPolicy::No,
        2 => RestartPolicy::Always,
        3 => RestartPolicy::UnlessStopped,
        4 => RestartPolicy::OnFailure { max_retries: 3 },
        _ => RestartPolicy::OnFailure { max_retries: 0 },
    }
}

pub(crate) fn user_kind(command: &Command) -> UserKind {
    match command {
        Command::Create { .. } => UserKind::Create,
        Command::Start { .. } => UserKind::Start,
        Command::Stop { .. } => UserKind::Stop,
        Command::Kill { .. } => UserKind::Kill,
        Command::Restart { .. } => UserKind::Restart,
        Command::Remove { .. } => UserKind::Remove,
        Command::Wait { condition, .. } => UserKind::Wait(*condition),
        Command::Rename { .. }
        | Command::UpdateRestartPolicy { .. }
        | Command::UpdateResources { .. }
        | Command::Connect { .. }
        | Command::Disconnect { .. } => UserKind::Edit,
        Command::Pause { .. } => UserKind::Pause,
        Command::Unpause { .. } => UserKind::Unpause,
        Command::CreateExec { .. }
        | Command::StartExec { .. }
        | Command::KillExec { .. }
        | Command::Resize { .. } => UserKind::Exec,
        Command::ReadChanges { .. }
        | Command::MountRootfs { .. }
        | Command::UnmountRootfs { .. } => UserKind::Snapshot,
        Command::CreateNetwork { .. }
        | Command::RemoveNetwork { .. }
        | Command::PruneNetworks { .. } => UserKind::Edit,
        Command::CreateVolume { .. }
        | Command::RemoveVolume { .. }
        | Command::PruneVolumes { .. } => UserKind::Volume,
    }
}
