//! Exec: an extra process in a running container. Its exit arrives as a
//! `TaskExit` whose exec id is not the container id, which the core ignores
//! for the container's state.

use crate::client::Adapter;
use crate::container::ensure_fifo;
use crate::error::AdapterError;
use crate::logger::LoggerArgs;
use crate::spec::{PROCESS_TYPE_URL, resolve_user};
use containerd_client::services::v1::{
    CloseIoRequest, DeleteProcessRequest, ExecProcessRequest, GetRequest, ListPidsRequest,
    ResizePtyRequest,
};
use containerd_client::types::v1::Status as ProcessStatus;
use holdfast_core::ContainerId;
use serde_json::{Value, json};
use std::path::PathBuf;

/// What to run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecRequest {
    /// Unique within the container (containerd identifier rules).
    pub exec_id: String,
    pub args: Vec<String>,
    /// `KEY=VALUE`, added to the container's env.
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    /// Numeric `uid[:gid]`; `None` keeps the container's user.
    pub user: Option<String>,
    /// Where its output goes; `None`: `<log dir>/<id>.exec-<exec id>.log`.
    pub log_file: Option<PathBuf>,
    /// Run it in a terminal (`docker exec -t`).
    pub tty: bool,
    /// Give it a stdin FIFO ([`Adapter::exec_stdin_path`]) to write to; the
    /// process's stdin ends at [`Adapter::close_stdin`].
    pub stdin: bool,
}

impl Adapter {
    /// Where an exec logs when [`ExecRequest::log_file`] is `None`.
    pub fn exec_log_path(&self, id: &ContainerId, exec_id: &str) -> PathBuf {
        self.config()
            .log_dir
            .join(format!("{id}.exec-{exec_id}.log"))
    }

    /// The stdin FIFO of an exec started with [`ExecRequest::stdin`].
    pub fn exec_stdin_path(&self, id: &ContainerId, exec_id: &str) -> PathBuf {
        self.config()
            .fifo_dir
            .join(format!("{id}.exec-{exec_id}.stdin"))
    }

    /// Starts an extra process in the running container `id`; returns its pid.
    pub async fn exec(&self, id: &ContainerId, request: &ExecRequest) -> Result<u32, AdapterError> {
        if request.args.is_empty() {
            return Err(AdapterError::Invalid("exec needs a command".into()));
        }
        // The exec id names a log file and, in TaskExit events, the process:
        // it must be a plain identifier, and never the init's (the container id).
        if request.exec_id.parse::<ContainerId>().is_err() || request.exec_id == id.as_str() {
            return Err(AdapterError::Invalid(format!(
                "invalid exec id {:?}",
                request.exec_id
            )));
        }
        let container = self.get_container(id).await?;
        let spec: Value = container
            .spec
            .as_ref()
            .and_then(|any| serde_json::from_slice(&any.value).ok())
            .ok_or_else(|| AdapterError::Invalid(format!("container {id} has no readable spec")))?;
        let mut process = spec["process"].clone();
        if !process.is_object() {
            return Err(AdapterError::Invalid(format!(
                "container {id} has no process in its spec"
            )));
        }
        process["args"] = json!(request.args);
        process["terminal"] = json!(request.tty);
        if let Some(cwd) = &request.working_dir {
            process["cwd"] = json!(cwd);
        }
        if let Some(user) = &request.user {
            let numeric = user.split(':').all(|p| p.parse::<u32>().is_ok());
            let u = if numeric {
                resolve_user(user, None, None)?
            } else {
                // Names are the container's: read its files through the
                // running init's root.
                let root = PathBuf::from(format!("/proc/{}/root", self.init_pid(id).await?));
                let read = |f: &str| std::fs::read_to_string(root.join(f)).ok();
                resolve_user(
                    user,
                    read("etc/passwd").as_deref(),
                    read("etc/group").as_deref(),
                )?
            };
            process["user"] = json!({ "uid": u.uid, "gid": u.gid });
        }
        if let Some(env) = process["env"].as_array_mut() {
            env.extend(request.env.iter().map(|e| json!(e)));
        }
        let value = serde_json::to_vec(&process)
            .map_err(|e| AdapterError::Invalid(format!("process spec: {e}")))?;
        let log = request
            .log_file
            .clone()
            .unwrap_or_else(|| self.exec_log_path(id, &request.exec_id));
        let stdin = if request.stdin {
            let path = self.exec_stdin_path(id, &request.exec_id);
            ensure_fifo(&path)?;
            Some(path)
        } else {
            None
        };
        let io = self.task_io(
            id,
            &format!("{id}.exec-{}", request.exec_id),
            LoggerArgs {
                tty: request.tty,
                ..LoggerArgs::new(&log)
            },
            stdin,
        )?;
        let mut tasks = self.tasks();
        let req = self.req(ExecProcessRequest {
            container_id: id.to_string(),
            stdin: io.stdin.clone(),
            stdout: io.stdout.clone(),
            stderr: io.stderr.clone(),
            terminal: request.tty,
            spec: Some(prost_types::Any {
                type_url: PROCESS_TYPE_URL.to_owned(),
                value,
            }),
            exec_id: request.exec_id.clone(),
        });
        if let Err(e) = self.rpc("Tasks.Exec", tasks.exec(req)).await {
            io.settle();
            // A timed-out Exec may have taken effect: release the exec id.
            if e.kind() == holdfast_core::FailureKind::Deadline {
                let _ = self.delete_exec(id, &request.exec_id).await;
            }
            return Err(e);
        }
        // An exec's output is connected at start, not at create.
        let started = self.start_process(id, &request.exec_id).await;
        io.settle();
        match started {
            Ok(pid) => Ok(pid),
            Err(e) => {
                let _ = self.delete_exec(id, &request.exec_id).await;
                Err(e)
            }
        }
    }

    /// Signals an exec process.
    pub async fn kill_exec(
        &self,
        id: &ContainerId,
        exec_id: &str,
        signal: u32,
    ) -> Result<(), AdapterError> {
        self.kill(id, exec_id, signal, false).await
    }

    /// The exit status of an exec process once it has exited, `None` while
    /// it runs: containerd's own view, for when its exit event was lost.
    pub async fn exec_exit_status(
        &self,
        id: &ContainerId,
        exec_id: &str,
    ) -> Result<Option<u32>, AdapterError> {
        let mut tasks = self.tasks();
        let req = self.req(GetRequest {
            container_id: id.to_string(),
            exec_id: exec_id.to_owned(),
        });
        let process = self.rpc("Tasks.Get", tasks.get(req)).await?.process;
        Ok(process
            .filter(|p| p.status == ProcessStatus::Stopped as i32)
            .map(|p| p.exit_status))
    }

    /// An exec's process as containerd knows it: its pid, and its exit
    /// code once it has exited (the core's look when its `exec_die` may
    /// have been lost).
    pub async fn exec_process(
        &self,
        id: &ContainerId,
        exec_id: &str,
    ) -> Result<(u32, Option<i32>), AdapterError> {
        let mut tasks = self.tasks();
        let req = self.req(GetRequest {
            container_id: id.to_string(),
            exec_id: exec_id.to_owned(),
        });
        let process = self
            .rpc("Tasks.Get", tasks.get(req))
            .await?
            .process
            .ok_or_else(|| AdapterError::Invalid(format!("no process {exec_id} in {id}")))?;
        let exit = (process.status == ProcessStatus::Stopped as i32)
            .then(|| i32::try_from(process.exit_status).unwrap_or(i32::MAX));
        Ok((process.pid, exit))
    }

    /// Ends the stdin of the init (`exec_id` empty) or of an exec: the shim
    /// holds its FIFO open until told, so writers may come and go. Drop
    /// every writer of ours first.
    pub async fn close_stdin(&self, id: &ContainerId, exec_id: &str) -> Result<(), AdapterError> {
        let mut tasks = self.tasks();
        let req = self.req(CloseIoRequest {
            container_id: id.to_string(),
            exec_id: exec_id.to_owned(),
            stdin: true,
        });
        self.rpc("Tasks.CloseIO", tasks.close_io(req))
            .await
            .map(|_| ())
    }

    /// The host pids of every process of the container (`docker top`).
    pub async fn list_pids(&self, id: &ContainerId) -> Result<Vec<u32>, AdapterError> {
        let mut tasks = self.tasks();
        let req = self.req(ListPidsRequest {
            container_id: id.to_string(),
        });
        let listed = self.rpc("Tasks.ListPids", tasks.list_pids(req)).await?;
        Ok(listed.processes.iter().map(|p| p.pid).collect())
    }

    /// The pid of the container's init process, as containerd knows it.
    pub(crate) async fn init_pid(&self, id: &ContainerId) -> Result<u32, AdapterError> {
        let mut tasks = self.tasks();
        let req = self.req(GetRequest {
            container_id: id.to_string(),
            exec_id: String::new(),
        });
        let process = self.rpc("Tasks.Get", tasks.get(req)).await?.process;
        process
            .filter(|p| p.status == ProcessStatus::Running as i32 && p.pid != 0)
            .map(|p| p.pid)
            .ok_or_else(|| AdapterError::Invalid(format!("container {id} is not running")))
    }

    /// Resizes the terminal of the init process (`exec_id` empty) or of an exec.
    pub async fn resize_terminal(
        &self,
        id: &ContainerId,
        exec_id: &str,
        width: u32,
        height: u32,
    ) -> Result<(), AdapterError> {
        let mut tasks = self.tasks();
        let req = self.req(ResizePtyRequest {
            container_id: id.to_string(),
            exec_id: exec_id.to_owned(),
            width,
            height,
        });
        self.rpc("Tasks.ResizePty", tasks.resize_pty(req))
            .await
            .map(|_| ())
    }

    /// Removes an exited exec process from containerd; returns its exit status.
    pub async fn delete_exec(&self, id: &ContainerId, exec_id: &str) -> Result<u32, AdapterError> {
        let mut tasks = self.tasks();
        let req = self.req(DeleteProcessRequest {
            container_id: id.to_string(),
            exec_id: exec_id.to_owned(),
        });
        Ok(self
            .rpc("Tasks.DeleteProcess", tasks.delete_process(req))
            .await?
            .exit_status)
    }
}
