//! `docker container ...`: what the container family of an API asks of the
//! engine beyond a command for the core.

use crate::engine::{EngineHandle, View};
use holdfast_core::{
    ContainerId, ContainerView, ErrorKind, Health, Record, RequestError, Status, TaskState,
};

/// The containers backend: see the module docs.
#[derive(Debug)]
pub struct Containers<'a> {
    engine: &'a EngineHandle,
}

/// A container as a read of the core showed it.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub record: Record,
    pub status: Status,
    pub task: TaskState,
    pub confirmed: bool,
    /// Running with its processes frozen (`docker pause`).
    pub paused: bool,
    /// The health of its current or last run, with a health check.
    pub health: Option<Health>,
}

impl Snapshot {
    fn of(view: &View<'_>, c: ContainerView<'_>) -> Snapshot {
        Snapshot {
            record: c.record.clone(),
            status: c.status,
            task: c.task,
            confirmed: c.confirmed,
            paused: c.paused,
            health: view.core.health(&c.record.id).cloned(),
        }
    }

    /// dockerd's state name: "paused" for a paused running container.
    pub fn state_name(&self) -> &'static str {
        if self.paused {
            "paused"
        } else {
            self.status.as_str()
        }
    }

    /// The pid of its init while it runs; 0 otherwise.
    pub fn running_pid(&self) -> u32 {
        match (self.status, self.task) {
            (Status::Running, TaskState::Running { pid } | TaskState::Created { pid }) => pid,
            (Status::Running, TaskState::Unknown) => self.record.pid.unwrap_or(0),
            _ => 0,
        }
    }
}

impl<'a> Containers<'a> {
    pub(crate) fn new(engine: &'a EngineHandle) -> Containers<'a> {
        Containers { engine }
    }

    /// The container a reference names (name, full id or unique id prefix),
    /// resolved and read in one step of the loop.
    pub async fn snapshot(&self, reference: &str) -> Result<Snapshot, RequestError> {
        let reference = reference.to_owned();
        self.engine
            .read(move |v| {
                let id = v.core.resolve(&reference)?;
                v.core
                    .container(&id)
                    .map(|c| Snapshot::of(v, c))
                    .ok_or_else(|| {
                        RequestError::new(ErrorKind::NotFound, format!("No such container: {id}"))
                    })
            })
            .await?
    }

    /// The container `id` is, as a read showed it.
    pub(crate) async fn snapshot_of(&self, id: &ContainerId) -> Result<Snapshot, RequestError> {
        let wanted = id.clone();
        self.engine
            .read(move |v| v.core.container(&wanted).map(|c| Snapshot::of(v, c)))
            .await?
            .ok_or_else(|| {
                RequestError::new(ErrorKind::NotFound, format!("No such container: {id}"))
            })
    }

    /// Every container, as one read showed them.
    pub async fn snapshots(&self) -> Result<Vec<Snapshot>, RequestError> {
        let all = self
            .engine
            .read(|v| {
                v.core
                    .containers()
                    .map(|c| Snapshot::of(v, c))
                    .collect::<Vec<_>>()
            })
            .await?;
        Ok(all)
    }
}
