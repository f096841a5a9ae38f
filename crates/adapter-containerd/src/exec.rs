//! Exec: an extra process in a running container. Its exit arrives as a
//! `TaskExit` whose exec id is not the container id, which the core ignores
//! for the container's state.

use crate::client::Adapter;
use crate::error::AdapterError;
use crate::logger::binary_uri;
use crate::spec::{PROCESS_TYPE_URL, resolve_user};
use containerd_client::services::v1::{DeleteProcessRequest, ExecProcessRequest};
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
}

impl Adapter {
    /// Where an exec logs when [`ExecRequest::log_file`] is `None`.
    pub fn exec_log_path(&self, id: &ContainerId, exec_id: &str) -> PathBuf {
        self.config()
            .log_dir
            .join(format!("{id}.exec-{exec_id}.log"))
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
        process["terminal"] = json!(false);
        if let Some(cwd) = &request.working_dir {
            process["cwd"] = json!(cwd);
        }
        if let Some(user) = &request.user {
            let u = resolve_user(user, None, None)?;
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
        let uri = binary_uri(self.logger_binary(), &log);
        let mut tasks = self.tasks();
        let req = self.req(ExecProcessRequest {
            container_id: id.to_string(),
            stdin: String::new(),
            stdout: uri.clone(),
            stderr: uri,
            terminal: false,
            spec: Some(prost_types::Any {
                type_url: PROCESS_TYPE_URL.to_owned(),
                value,
            }),
            exec_id: request.exec_id.clone(),
        });
        if let Err(e) = self.rpc("Tasks.Exec", tasks.exec(req)).await {
            // A timed-out Exec may have taken effect: release the exec id.
            if e.kind() == holdfast_core::FailureKind::Deadline {
                let _ = self.delete_exec(id, &request.exec_id).await;
            }
            return Err(e);
        }
        match self.start_process(id, &request.exec_id).await {
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
