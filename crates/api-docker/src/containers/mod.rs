//! `/containers/...`: create, list, inspect, the lifecycle commands, wait and
//! remove, a file each. Translation only: every decision is the core's.

mod create;
mod create_body;
mod create_options;
mod inspect;
mod lifecycle;
mod list;

pub use create::create;
pub(crate) use create::swap_accounting;
pub use create_body::decode_create;
pub(crate) use create_body::{RestartPolicyBody, restart_policy};
pub(crate) use inspect::attachment;
pub use inspect::inspect;
pub use lifecycle::{
    kill, pause, remove, resize, restart, start, stop, unpause, unsupported, wait,
};
pub use list::list;
pub(crate) use list::list_json;

use crate::{ApiError, ApiState};
use holdfast_core::{ContainerConfig, ContainerId, NetworkMode, Record, Status, TaskState};

/// A container as a read of the core showed it.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    pub record: Record,
    pub status: Status,
    pub task: TaskState,
    pub confirmed: bool,
    /// Running with its processes frozen (`docker pause`).
    pub paused: bool,
    /// The health of its current or last run, with a health check.
    pub health: Option<holdfast_core::Health>,
}

impl Snapshot {
    /// dockerd's state name: "paused" for a paused running container.
    pub(crate) fn state_name(&self) -> &'static str {
        if self.paused {
            "paused"
        } else {
            self.status.as_str()
        }
    }
}

pub(crate) async fn snapshot(state: &ApiState, id: ContainerId) -> Result<Snapshot, ApiError> {
    let wanted = id.clone();
    state
        .engine
        .read(move |v| {
            v.core.container(&wanted).map(|c| Snapshot {
                record: c.record.clone(),
                status: c.status,
                task: c.task,
                confirmed: c.confirmed,
                paused: c.paused,
                health: v.core.health(&wanted).cloned(),
            })
        })
        .await?
        .ok_or_else(|| ApiError::not_found(format!("No such container: {id}")))
}

pub(crate) async fn resolve(state: &ApiState, reference: &str) -> Result<ContainerId, ApiError> {
    Ok(state.engine.resolve(reference).await?)
}

fn running_pid(s: &Snapshot) -> u32 {
    match (s.status, s.task) {
        (Status::Running, TaskState::Running { pid } | TaskState::Created { pid }) => pid,
        (Status::Running, TaskState::Unknown) => s.record.pid.unwrap_or(0),
        _ => 0,
    }
}

fn network_mode_name(m: NetworkMode) -> &'static str {
    match m {
        NetworkMode::None => "none",
        NetworkMode::Host => "host",
        NetworkMode::Bridge => "bridge",
        NetworkMode::Container => "container",
    }
}

/// The network mode as docker shows it: `bridge`, a user network's name,
/// `host`, `none` or `container:<id>`.
fn network_mode_shown(c: &ContainerConfig) -> String {
    match (c.network, &c.network_name, &c.network_container) {
        (NetworkMode::Bridge, Some(name), _) => name.clone(),
        (NetworkMode::Container, _, Some(donor)) => format!("container:{}", donor.id),
        (m, ..) => network_mode_name(m).to_owned(),
    }
}

/// The command line `ps` shows and inspect's Path/Args (what was given;
/// the image's defaults fill in what was not).
fn command_line(c: &ContainerConfig) -> Vec<String> {
    let mut v = c.entrypoint.clone().unwrap_or_default();
    v.extend(c.cmd.clone().unwrap_or_default());
    v
}
