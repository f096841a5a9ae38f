//! Relist: every task in the namespace, as begin / items / end.

use crate::client::{Adapter, InputSink};
use crate::decode::wall_time;
use containerd_client::services::v1::ListTasksRequest;
use containerd_client::types::v1::Status;
use holdfast_core::{ContainerId, Input, OpId, RelistPart, TaskInfo, TaskStatus};

impl Adapter {
    pub(crate) async fn relist<S: InputSink>(&self, op: OpId, sink: S) {
        // Patient: containerd asks every task's shim for its state, each
        // within its own 2 s, so that with many tasks on a loaded machine
        // the listing takes longer than an ordinary call's deadline. Cut
        // at it, it would be asked again and cut again, for ever.
        let listed = self
            .patiently(async {
                let req = self.req(ListTasksRequest {
                    filter: String::new(),
                });
                self.rpc("Tasks.List", self.tasks().list(req)).await
            })
            .await;
        let tasks = match self.settle(listed, &sink) {
            Ok(listed) => listed.tasks,
            Err(failure) => {
                tracing::debug!(kind = ?failure.kind, message = %failure.message, "relist failed");
                sink.send(Input::ActionResult(op, Err(failure)));
                return;
            }
        };
        // A task whose shim did not answer in time containerd lists as
        // UNKNOWN with pid 0: passed on as such, a placeholder the core
        // takes as no fact about that container (and looks again soon),
        // while everything else the listing shows still counts. Failing
        // the whole listing for it instead let one wedged shim keep the
        // engine from ever completing a relist: containerd looked away
        // for every container, for as long as that shim stayed stuck.
        sink.send(Input::Relist(op, RelistPart::Begin));
        let mut count = 0usize;
        let mut unknown = 0usize;
        for p in tasks {
            // Tasks.List fills `id` (the task's, i.e. the container's id) and
            // leaves `container_id` empty.
            let id = if p.container_id.is_empty() {
                &p.id
            } else {
                &p.container_id
            };
            let Ok(container) = id.parse::<ContainerId>() else {
                tracing::warn!(task = %id, "task with an id holdfast cannot hold; not ours");
                continue;
            };
            count += 1;
            let status = task_status(p.status);
            if status == TaskStatus::Unknown || p.pid == 0 {
                unknown += 1;
            }
            // A task created whose answer was lost has run nothing yet: its
            // count now is its baseline.
            if status == TaskStatus::Created && !self.inner.oom.knows(&container, p.pid) {
                self.inner.oom.task_created(&container, p.pid);
            }
            let oom_kills = (status == TaskStatus::Stopped)
                .then(|| self.inner.oom.kills_since_create(&container, p.pid))
                .flatten();
            sink.send(Input::Relist(
                op,
                RelistPart::Task(TaskInfo {
                    container,
                    pid: p.pid,
                    status,
                    exit_status: p.exit_status,
                    exited_at: wall_time(p.exited_at.as_ref()),
                    oom_kills,
                }),
            ));
        }
        tracing::debug!(tasks = count, unknown, "relist complete");
        sink.send(Input::Relist(op, RelistPart::End));
    }
}

pub(crate) fn task_status(status: i32) -> TaskStatus {
    match Status::try_from(status) {
        Ok(Status::Created) => TaskStatus::Created,
        Ok(Status::Running) => TaskStatus::Running,
        Ok(Status::Stopped) => TaskStatus::Stopped,
        Ok(Status::Paused | Status::Pausing) => TaskStatus::Paused,
        Ok(Status::Unknown) | Err(_) => TaskStatus::Unknown,
    }
}
