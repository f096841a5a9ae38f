//! The execs of health probes: a probe is decided by the core
//! (`Action::RunProbe`), which learns only its result; this watches the
//! probe's exec until it has exited, from its `exec_die` event or
//! containerd's view of it when that event was lost. The user's execs
//! (`docker exec`) are the core's records, not this.

use holdfast_adapter_containerd::Adapter;
use holdfast_core::ContainerId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// Exited execs kept for `inspect` beyond this many are forgotten, oldest first.
const KEEP_EXITED: usize = 256;
/// How often a running exec is checked in containerd, in case its exit
/// event was lost (a broken event stream).
const STATUS_POLL: Duration = Duration::from_secs(1);

/// What a probe runs: the same as a user's exec.
pub use holdfast_core::ExecSpec;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecState {
    Created,
    Running {
        pid: u32,
    },
    /// `None` when the process is gone with no exit status left anywhere
    /// (its container's task was deleted before the status was read).
    Exited {
        code: Option<i32>,
    },
}

#[derive(Debug)]
pub struct Exec {
    pub id: String,
    pub container: ContainerId,
    pub spec: ExecSpec,
    state: watch::Sender<ExecState>,
    /// Order of creation, for forgetting the oldest.
    seq: u64,
}

impl Exec {
    pub fn state(&self) -> ExecState {
        *self.state.borrow()
    }

    /// Resolves once the exec has exited.
    pub fn exited(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.state.subscribe();
        async move {
            let _ = rx.wait_for(|s| matches!(s, ExecState::Exited { .. })).await;
        }
    }

    /// Moves `Created` to `Running`; false if it was started already.
    pub fn begin(&self) -> bool {
        self.state.send_if_modified(|s| {
            if *s == ExecState::Created {
                *s = ExecState::Running { pid: 0 };
                true
            } else {
                false
            }
        })
    }

    pub fn set(&self, state: ExecState) {
        self.state.send_replace(state);
    }
}

#[derive(Debug, Default)]
pub struct Execs {
    inner: Mutex<(HashMap<String, Arc<Exec>>, u64)>,
}

impl Execs {
    pub fn insert(&self, id: String, container: ContainerId, spec: ExecSpec) -> Arc<Exec> {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (map, next) = &mut *guard;
        *next += 1;
        let exec = Arc::new(Exec {
            id: id.clone(),
            container,
            spec,
            state: watch::channel(ExecState::Created).0,
            seq: *next,
        });
        map.insert(id, Arc::clone(&exec));
        let mut exited: Vec<(u64, String)> = map
            .values()
            .filter(|e| matches!(e.state(), ExecState::Exited { .. }))
            .map(|e| (e.seq, e.id.clone()))
            .collect();
        if exited.len() > KEEP_EXITED {
            exited.sort_unstable();
            for (_, id) in &exited[..exited.len() - KEEP_EXITED] {
                map.remove(id);
            }
        }
        exec
    }

    pub fn get(&self, id: &str) -> Option<Arc<Exec>> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.0.get(id).cloned()
    }

    /// The exec ids of a container, for `inspect`'s `ExecIDs`.
    pub fn of_container(&self, container: &ContainerId) -> Vec<String> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut ids: Vec<(u64, String)> = guard
            .0
            .values()
            .filter(|e| &e.container == container)
            .map(|e| (e.seq, e.id.clone()))
            .collect();
        ids.sort_unstable();
        ids.into_iter().map(|(_, id)| id).collect()
    }

    /// Forgets a removed container's execs.
    pub fn forget_container(&self, container: &ContainerId) {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.0.retain(|_, e| &e.container != container);
    }
}

/// Watches a started exec until it has exited, then records how and
/// releases the process in containerd. `live` must be subscribed before the
/// exec was started, so that its `exec_die` cannot be missed.
pub async fn watch_exit(
    adapter: Adapter,
    exec: Arc<Exec>,
    mut live: broadcast::Receiver<Arc<crate::events::EventMessage>>,
) {
    let container = exec.container.to_string();
    let mut from_event: Option<i32> = None;
    let mut poll = tokio::time::interval(STATUS_POLL);
    poll.tick().await;
    loop {
        tokio::select! {
            event = live.recv() => match event {
                Ok(e) if e.actor_id == container && e.action == "exec_die"
                    && e.attributes.get("execID") == Some(&exec.id) => {
                    from_event = e.attributes.get("exitCode").and_then(|c| c.parse().ok());
                    break;
                }
                // Its container's task is gone: so is every exec in it.
                Ok(e) if e.actor_id == container && (e.action == "die" || e.action == "destroy") => break,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = poll.tick() => match adapter.exec_exit_status(&exec.container, &exec.id).await {
                Ok(Some(_)) => break,
                Ok(None) => {}
                Err(e) if e.kind() == holdfast_core::FailureKind::NotFound => break,
                // containerd unreachable: the event or a later poll will tell.
                Err(_) => {}
            },
        }
    }
    // Deleting the process returns its status (and frees it in the shim).
    let code = match adapter.delete_exec(&exec.container, &exec.id).await {
        Ok(status) => i32::try_from(status).ok().or(from_event),
        Err(e) => {
            tracing::debug!(exec = %exec.id, error = %e, "exec status after exit");
            from_event
        }
    };
    exec.set(ExecState::Exited { code });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn cid(n: u8) -> ContainerId {
        format!("{n:064x}").parse().unwrap()
    }

    #[tokio::test]
    async fn states_move_forward_and_exited_ones_are_bounded() {
        let execs = Execs::default();
        let first = execs.insert("e0".into(), cid(1), ExecSpec::default());
        assert!(first.begin());
        assert!(!first.begin(), "an exec starts once");
        let exited = first.exited();
        first.set(ExecState::Exited { code: Some(3) });
        exited.await;
        for i in 1..=KEEP_EXITED + 10 {
            let e = execs.insert(format!("e{i}"), cid(2), ExecSpec::default());
            e.set(ExecState::Exited { code: Some(0) });
        }
        let running = execs.insert("live".into(), cid(1), ExecSpec::default());
        assert!(running.begin());
        assert!(
            execs.get("e0").is_none(),
            "the oldest exited exec is forgotten"
        );
        assert!(execs.get("live").is_some());
        assert_eq!(execs.of_container(&cid(1)), ["live"]);
        execs.forget_container(&cid(2));
        assert_eq!(execs.of_container(&cid(2)), Vec::<String>::new());
    }
}
