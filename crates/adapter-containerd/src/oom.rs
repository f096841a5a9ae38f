//! Evidence of OOM kills from a task's cgroup: the memory controller's
//! `oom_kill` count (cgroup v2 `memory.events`, v1 `memory.oom_control`),
//! read when a task is created and again when its exit is learned. The
//! difference is what [`ContainerdEvent::TaskExit`]'s `oom_kills` carries,
//! so that the core needs no guess from the order of events.
//!
//! [`ContainerdEvent::TaskExit`]: holdfast_core::ContainerdEvent::TaskExit

use holdfast_core::ContainerId;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Where the cgroup hierarchy is mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The count of each task created by this adapter, by container.
#[derive(Debug, Default)]
pub(crate) struct OomCounts {
    runs: Mutex<HashMap<ContainerId, Run>>,
}

#[derive(Debug, Clone)]
struct Run {
    pid: u32,
    /// The file holding the cgroup's `oom_kill` line.
    counter: PathBuf,
    at_create: u64,
}

impl OomCounts {
    /// `id`'s task was created with `pid` and has run nothing yet: its
    /// count now is the run's baseline. Nothing is kept if the cgroup
    /// cannot be read (the exit then comes without a count).
    pub(crate) fn task_created(&self, id: &ContainerId, pid: u32) {
        let proc_cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup"));
        let Some(counter) = proc_cgroup
            .ok()
            .and_then(|text| counter_file(&text, Path::new(CGROUP_ROOT)))
        else {
            tracing::debug!(container_id = %id, pid, "no memory cgroup found: exits without an OOM count");
            return;
        };
        let Some(at_create) = read_oom_kills(&counter) else {
            return;
        };
        let run = Run {
            pid,
            counter,
            at_create,
        };
        if let Ok(mut runs) = self.runs.lock() {
            runs.insert(id.clone(), run);
        }
    }

    /// Whether `id`'s task with `pid` is one whose baseline was taken.
    pub(crate) fn knows(&self, id: &ContainerId, pid: u32) -> bool {
        self.runs
            .lock()
            .is_ok_and(|runs| runs.get(id).is_some_and(|r| r.pid == pid))
    }

    /// OOM kills in the cgroup of `id`'s task `pid` since it was created;
    /// `None` for a task created before this adapter began or whose cgroup
    /// is gone.
    pub(crate) fn kills_since_create(&self, id: &ContainerId, pid: u32) -> Option<u64> {
        let run = self
            .runs
            .lock()
            .ok()?
            .get(id)
            .filter(|r| r.pid == pid)?
            .clone();
        let now = read_oom_kills(&run.counter)?;
        Some(now.saturating_sub(run.at_create))
    }

    /// `id`'s task was deleted: its cgroup with it.
    pub(crate) fn task_deleted(&self, id: &ContainerId) {
        if let Ok(mut runs) = self.runs.lock() {
            runs.remove(id);
        }
    }
}

/// The file of the memory controller that counts OOM kills, from
/// `/proc/<pid>/cgroup`: v1 `N:memory:/path` (or a joint mount such as
/// `memory,other`) gives `<root>/memory/path/memory.oom_control`; else the
/// v2 line `0::/path` gives `<root>/path/memory.events`.
fn counter_file(proc_cgroup: &str, root: &Path) -> Option<PathBuf> {
    let mut v2 = None;
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let relative = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "memory") {
            return Some(
                root.join(controllers)
                    .join(relative)
                    .join("memory.oom_control"),
            );
        }
        if controllers.is_empty() {
            v2 = Some(root.join(relative).join("memory.events"));
        }
    }
    v2
}

fn read_oom_kills(counter: &Path) -> Option<u64> {
    parse_oom_kills(&std::fs::read_to_string(counter).ok()?)
}

/// The `oom_kill N` line of `memory.events` or `memory.oom_control`.
fn parse_oom_kills(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (key, value) = l.split_once(' ')?;
        (key == "oom_kill").then(|| value.trim().parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_is_found_for_v1_and_v2() {
        let root = Path::new("/cg");
        let v1 = "12:pids:/hf/abc\n9:memory:/hf/abc\n1:name=systemd:/hf/abc\n0::/x\n";
        assert_eq!(
            counter_file(v1, root),
            Some(PathBuf::from("/cg/memory/hf/abc/memory.oom_control"))
        );
        assert_eq!(
            counter_file("0::/hf/abc\n", root),
            Some(PathBuf::from("/cg/hf/abc/memory.events"))
        );
        assert_eq!(counter_file("3:cpu,cpuacct:/hf/abc\n", root), None);
    }

    #[test]
    fn the_count_is_read_from_either_file() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        let v2 = "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(parse_oom_kills(v1), Some(2));
        assert_eq!(parse_oom_kills(v2), Some(1));
        // kernels before 4.13 had no count
        assert_eq!(parse_oom_kills("oom_kill_disable 0\nunder_oom 0\n"), None);
    }

    #[test]
    fn a_run_counts_from_its_create_and_only_for_its_pid() {
        let dir = tempfile::tempdir().expect("tempdir");
        let counter = dir.path().join("memory.events");
        std::fs::write(&counter, "oom 3\noom_kill 3\n").expect("write");
        let counts = OomCounts::default();
        let id: ContainerId = "abcdef0123456789".parse().expect("id");
        if let Ok(mut runs) = counts.runs.lock() {
            runs.insert(
                id.clone(),
                Run {
                    pid: 7,
                    counter: counter.clone(),
                    at_create: 3,
                },
            );
        }
        assert_eq!(counts.kills_since_create(&id, 7), Some(0));
        std::fs::write(&counter, "oom 4\noom_kill 4\n").expect("write");
        assert_eq!(counts.kills_since_create(&id, 7), Some(1));
        assert_eq!(counts.kills_since_create(&id, 8), None);
        std::fs::remove_file(&counter).expect("rm");
        assert_eq!(counts.kills_since_create(&id, 7), None);
        counts.task_deleted(&id);
        assert!(!counts.knows(&id, 7));
    }
}
