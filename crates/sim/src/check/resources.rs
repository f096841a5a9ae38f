//! The books of what the core decides beside containers' runs: volumes
//! (made before use, never removed while a record names them, none left
//! over), the addresses a network setup handed out (recorded as given,
//! never one given twice), execs (whose end changes nothing of their
//! container), a commit's freeze and a copy's mount (neither left behind).

use crate::model::{Containerd, HostNetwork, HostVolumes};
use holdfast_core::{
    ContainerId, Core, NetworkState, Record, ResourceState, TaskState, TaskStatus, VolumeRecord,
};
use std::collections::BTreeMap;

/// What the store holds, as a restarted holdfastd would find it.
#[derive(Debug)]
pub struct Stored<'a> {
    pub containers: &'a BTreeMap<ContainerId, Record>,
    pub volumes: &'a BTreeMap<String, VolumeRecord>,
}

fn names_volume(r: &Record, name: &str) -> bool {
    r.config
        .mounts
        .iter()
        .any(|m| m.volume.as_deref() == Some(name))
}

/// After every step: a volume recorded as made exists on the host (so
/// none was removed under a container that names it); a directory on the
/// host is recorded (made only once owned: no leak); a container whose
/// create completed has each of its volumes made and filled.
pub fn volumes(vols: &HostVolumes, stored: &Stored<'_>) -> Result<(), String> {
    for (name, v) in stored.volumes {
        if v.state == ResourceState::Ready && !vols.dirs.contains_key(name) {
            return Err(format!(
                "volume {name}: recorded as made, its directory is gone"
            ));
        }
    }
    for name in vols.dirs.keys() {
        if !stored.volumes.contains_key(name) {
            return Err(format!(
                "volume {name}: a directory on the host that no record owns (leaked)"
            ));
        }
    }
    for (id, r) in stored.containers {
        if r.presence != holdfast_core::Presence::Created {
            continue;
        }
        for m in &r.config.mounts {
            let Some(name) = m.volume.as_deref() else {
                continue;
            };
            if vols.dirs.get(name) != Some(&true) {
                return Err(format!(
                    "{id}: created on volume {name}, which is {}",
                    if vols.dirs.contains_key(name) {
                        "not filled from the image"
                    } else {
                        "not on the host"
                    }
                ));
            }
        }
    }
    Ok(())
}

/// When a volume's removal is carried out: no container's record names it
/// (not even one being removed or rolled back).
pub fn volume_removal(name: &str, stored: &Stored<'_>) -> Result<(), String> {
    match stored.containers.values().find(|r| names_volume(r, name)) {
        Some(r) => Err(format!(
            "volume {name} removed while container {} names it (presence {:?}, remove {})",
            r.id, r.presence, r.intents.remove
        )),
        None => Ok(()),
    }
}

/// After every step: each address a record holds is the one the host
/// gave that interface and still holds for it. The host never gives one
/// address to two interfaces at once, so no address is recorded for two.
pub fn addresses(net: &HostNetwork, records: &BTreeMap<ContainerId, Record>) -> Result<(), String> {
    for (id, r) in records {
        let own = (r.network == NetworkState::Attached && !r.own_disconnected)
            .then_some((0u8, r.allocation.as_ref()));
        let endpoints = r
            .endpoints
            .iter()
            .filter(|e| e.state == NetworkState::Attached)
            .map(|e| (e.slot, e.allocation.as_ref()));
        for (slot, allocation) in own.into_iter().chain(endpoints) {
            let Some(ip) = allocation.and_then(|a| a.ip) else {
                continue;
            };
            let held = net.addresses.get(&(id.clone(), slot));
            if held != Some(&ip) {
                let owner = net
                    .addresses
                    .iter()
                    .find(|(_, a)| **a == ip)
                    .map(|((c, s), _)| format!("{c} eth{s}"));
                return Err(format!(
                    "{id}: eth{slot} recorded with {ip}, which the host {}",
                    match (held, owner) {
                        (_, Some(owner)) => format!("gave to {owner}"),
                        (Some(other), None) => format!("does not hold (it holds {other})"),
                        (None, None) => "released".to_owned(),
                    }
                ));
            }
        }
    }
    Ok(())
}

/// After every step, as `docker exec inspect` shows each exec: an exit
/// code is shown only for one that ended, and it is the code it ended with
/// in the world (126 only for one never started); `Running` is shown
/// while its process may exist, and what was recorded is what is shown.
pub fn exec_exits(core: Option<&Core>, cd: &Containerd) -> Result<(), String> {
    use holdfast_core::ExecState;
    let Some(core) = core else {
        return Ok(());
    };
    for c in core.containers() {
        for e in &c.record.execs {
            let key = (c.record.id.clone(), e.id.clone());
            let shown = e.exit_code();
            let recorded = match e.state {
                ExecState::Exited { code } => code,
                _ => None,
            };
            if shown != recorded || e.running() != e.state.may_run() {
                return Err(format!(
                    "{}: exec {} shown as running {} with exit code {shown:?}, recorded {:?}",
                    c.record.id,
                    e.id,
                    e.running(),
                    e.state
                ));
            }
            let Some(code) = shown else {
                continue;
            };
            let truth = cd.exec_truth.get(&key);
            // dockerd's code for an exec whose start was refused.
            let never_started = code == 126 && truth.is_none() && !cd.execs.contains_key(&key);
            if truth != Some(&code) && !never_started {
                return Err(format!(
                    "{}: exec {} shown as exited {code}, but in the world it {}",
                    c.record.id,
                    e.id,
                    truth.map_or("has not ended".to_owned(), |t| format!("exited {t}"))
                ));
            }
        }
    }
    Ok(())
}

/// A resize refused as "not running" of an exec that runs in the world.
pub fn resize_refusal(
    cd: &Containerd,
    id: &ContainerId,
    exec_id: &str,
    answer: &holdfast_core::Answer,
) -> Result<(), String> {
    let runs = cd
        .execs
        .get(&(id.clone(), exec_id.to_owned()))
        .is_some_and(|(_, exit)| exit.is_none());
    match answer {
        holdfast_core::Answer::Error(e) if runs && e.message.contains("is not running") => {
            Err(format!(
                "{id}: resize of exec {exec_id} refused ({}) while it runs",
                e.message
            ))
        }
        _ => Ok(()),
    }
}

/// `rm -v` answered done: each anonymous volume of the container that no
/// other record names is being removed (or gone), and no named one is,
/// unless a user asked for it with `volume rm` or `prune`.
pub fn rm_v_volumes(
    id: &ContainerId,
    mounts: &[holdfast_core::BindMount],
    stored: &Stored<'_>,
    doomed: &std::collections::BTreeSet<String>,
    asked: &std::collections::BTreeSet<String>,
) -> Result<(), String> {
    for m in mounts {
        let Some(name) = m.volume.as_deref() else {
            continue;
        };
        let named_elsewhere = stored
            .containers
            .values()
            .any(|r| r.id != *id && names_volume(r, name));
        let going = doomed.contains(name) || !stored.volumes.contains_key(name);
        if m.anonymous && !named_elsewhere && !going {
            return Err(format!(
                "{id}: rm -v done, and its anonymous volume {name} is kept"
            ));
        }
        if !m.anonymous && doomed.contains(name) && !asked.contains(name) {
            return Err(format!(
                "{id}: rm -v removes named volume {name}, which no user asked to remove"
            ));
        }
    }
    Ok(())
}

/// Once healed: every volume whose removal was recorded is gone (not
/// adopted again, nor left), unless made anew since.
pub fn removals_done(
    vols: &HostVolumes,
    doomed: &std::collections::BTreeSet<String>,
) -> Option<String> {
    doomed
        .iter()
        .find(|name| vols.dirs.contains_key(*name))
        .map(|name| format!("volume {name}: its removal was recorded, and it is still there"))
}

/// An exec start answered with an error that says it was not carried out
/// (and will not be: it did not begin by its bound, or it failed): the
/// start is no longer owed. One answered "carried out when possible" is.
pub fn exec_start_dropped(answer: &holdfast_core::Answer) -> bool {
    matches!(answer, holdfast_core::Answer::Error(e) if !e.message.contains("carried out when possible"))
}

/// Once healed: an exec whose start the core accepted was started (or
/// found unstartable) if its container's run goes on; never left owed.
pub fn exec_starts_done(
    core: Option<&Core>,
    accepted: &BTreeMap<holdfast_core::RequestId, (ContainerId, String)>,
) -> Option<String> {
    let core = core?;
    accepted.values().find_map(|(id, exec_id)| {
        let c = core
            .container(id)
            .filter(|c| c.status == holdfast_core::Status::Running)?;
        let e = c
            .record
            .execs
            .iter()
            .find(|e| e.id == *exec_id && e.run == c.record.run)?;
        matches!(
            e.state,
            holdfast_core::ExecState::Created | holdfast_core::ExecState::Starting
        )
        .then(|| {
            format!(
                "{id}: exec {exec_id}'s start was accepted and is still owed ({:?})",
                e.state
            )
        })
    })
}

/// An exec's end (its event, or its state read from containerd) changes
/// nothing of its container: not its run, state, exit, nor any evidence.
pub fn exec_end_harmless(
    id: &ContainerId,
    before: Option<String>,
    after: Option<String>,
) -> Result<(), String> {
    if before != after {
        return Err(format!(
            "{id}: an exec's end changed its container\n  before: {}\n  after:  {}",
            before.unwrap_or_default(),
            after.unwrap_or_default()
        ));
    }
    Ok(())
}

/// The container whose exec's end an input tells, if it tells one, and
/// what of it must stay as it was: all but its execs for an exec's exit
/// event; its run for an exec's state read from containerd (`state_read`:
/// the container whose read this input answers).
pub fn exec_end_of(
    input: &holdfast_core::Input,
    state_read: Option<ContainerId>,
) -> Option<(ContainerId, ContainerShown)> {
    match input {
        holdfast_core::Input::Event(holdfast_core::ContainerdEvent::TaskExit {
            container,
            exec_id,
            ..
        }) if exec_id != container.as_str() => {
            Some((container.clone(), container_apart_from_execs))
        }
        holdfast_core::Input::ActionResult(..) => {
            state_read.map(|id| (id, container_run as ContainerShown))
        }
        _ => None,
    }
}

/// How a check shows a container (`container_apart_from_execs`,
/// `container_run`).
pub type ContainerShown = fn(Option<&Core>, &ContainerId) -> Option<String>;

/// The container's run as the core shows it: what an exec's state read
/// must leave as it was. (Its answer frees the container's one call in
/// flight, so the next call another intent owes (a commit's freeze) may go
/// out with it and be recorded first: that is no change of the run.)
pub fn container_run(core: Option<&Core>, id: &ContainerId) -> Option<String> {
    let c = core?.container(id)?;
    let r = &c.record;
    let i = &r.intents;
    Some(format!(
        "run {} pid {:?} started {:?} began {:?} exit {:?} restarts {} health {:?} \
         start {} stop {:?} kills {:?} remove {} exit_on_next {} policy {} {} stopped {} \
         {:?} {:?} paused {}",
        r.run,
        r.pid,
        r.started_at,
        r.began_at,
        r.exit,
        r.restart_count,
        r.health,
        i.start,
        i.stop,
        i.kills,
        i.remove,
        i.exit_on_next,
        i.policy_restart,
        i.policy_start,
        i.user_stopped,
        c.status,
        c.task,
        c.paused
    ))
}

/// The container as the core shows it, its execs left out.
pub fn container_apart_from_execs(core: Option<&Core>, id: &ContainerId) -> Option<String> {
    let c = core?.container(id)?;
    let mut record = c.record.clone();
    record.execs.clear();
    let task = match c.task {
        TaskState::Running { pid } => format!("running {pid}"),
        other => format!("{other:?}"),
    };
    Some(format!(
        "{record:?} {:?} {task} paused {}",
        c.status, c.paused
    ))
}

/// Once healed and quiet: every volume is made and kept (none half made,
/// half removed, or still owned by a create), no snapshot is mounted
/// (every copy released its hold), and no container is frozen that no
/// user paused (a commit's freeze is always thawed).
pub fn resources_converged(
    cd: &Containerd,
    vols: &HostVolumes,
    stored: &Stored<'_>,
    pause_asked: &BTreeMap<ContainerId, holdfast_core::RequestId>,
) -> Option<String> {
    if let Some(v) = stored
        .volumes
        .values()
        .find(|v| v.state != ResourceState::Ready || v.made_for.is_some())
    {
        return Some(format!(
            "volume {}: still {:?} (made for {:?})",
            v.name, v.state, v.made_for
        ));
    }
    if let Some(name) = stored.volumes.keys().find(|n| !vols.dirs.contains_key(*n)) {
        return Some(format!("volume {name}: recorded, not on the host"));
    }
    if let Some(id) = cd.mounted.iter().next() {
        return Some(format!("{id}: its snapshot is still mounted"));
    }
    if let Some(r) = stored.containers.values().find(|r| r.rootfs_mounted) {
        return Some(format!("{}: still recorded as mounted", r.id));
    }
    if let Some(r) = stored.containers.values().find(|r| r.intents.commit_thaw) {
        return Some(format!("{}: a commit's thaw still owed", r.id));
    }
    cd.tasks
        .iter()
        .find(|(id, t)| t.status == TaskStatus::Paused && !pause_asked.contains_key(*id))
        .map(|(id, _)| format!("{id}: frozen, and no user paused it (a commit's freeze left)"))
}

/// The events of volumes and networks tell each fact once: within one
/// life of holdfastd, the events of each subject (a volume, a network, a
/// run's mount, a container's interface on a network) alternate between
/// began and ended. A crash may fall between a fact and its event, so the
/// first event of each in a life may be either. `told`: the last event of
/// each subject in this life (whether it said began).
pub fn told_once(
    told: &mut BTreeMap<String, bool>,
    event: &holdfast_core::ResourceEvent,
) -> Result<(), String> {
    let (subject, began) = event.kind.subject();
    match told.insert(subject.clone(), began) {
        Some(was) if was == began => Err(format!(
            "{subject}: told {} twice without the other in between: {event:?}",
            if began { "began" } else { "ended" }
        )),
        _ => Ok(()),
    }
}
