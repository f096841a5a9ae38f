//! Relist: every task in the namespace, as begin / items / end.

use crate::client::{Adapter, InputSink};
use crate::decode::wall_time;
use containerd_client::services::v1::ListTasksRequest;
use containerd_client::types::v1::Status;
use holdfast_core::{ContainerId, Input, OpId, RelistPart, TaskInfo, TaskStatus};

impl Adapter {
    pub(crate) async fn relist<S: InputSink>(&self, op: OpId, sink: S) {
        let mut client = self.tasks();
        let req = self.req(ListTasksRequest {
            filter: String::new(),
        });
        let listed = self.rpc("Tasks.List", client.list(req)).await;
        let tasks = match self.settle(listed, &sink) {
            Ok(listed) => listed.tasks,
            Err(failure) => {
                sink.send(Input::ActionResult(op, Err(failure)));
                return;
            }
        };
        // containerd lists a task whose shim did not answer in time as
        // UNKNOWN with pid 0: that is no fact about it, and a relist that
        // cannot vouch for every task proves nothing. Fail it (as a timeout:
        // the core looks again later) rather than pass a placeholder on.
        if let Some(p) = tasks
            .iter()
            .find(|p| p.pid == 0 || task_status(p.status) == TaskStatus::Unknown)
        {
            let message = format!(
                "Tasks.List: task {} is in an unknown state (its shim did not answer)",
                p.id
            );
            let failure =
                holdfast_core::Failure::new(holdfast_core::FailureKind::Deadline, message);
            sink.send(Input::ActionResult(op, Err(failure)));
            return;
        }
        sink.send(Input::Relist(op, RelistPart::Begin));
        let mut count = 0usize;
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
        tracing::debug!(tasks = count, "relist complete");
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
