//! What a running container's processes are and use: `docker top` (the
//! host's `ps`, filtered to the container's pids, as dockerd does) and
//! `docker stats` (its cgroup, see [`crate::stats`]).

use super::Containers;
use crate::refusal::{conflict, internal};
use crate::stats::{self, Sample};
use holdfast_core::{RequestError, Status, TaskState};

/// A container's resource use, sampled on demand from its cgroup.
#[derive(Clone, Debug)]
pub struct StatsSource {
    pub id: String,
    pub name: String,
    /// Its init, while it runs; a container that does not shows zeroes.
    pid: Option<u32>,
}

impl StatsSource {
    /// A sample now, with its time as Docker shows it; `None` when the
    /// container does not run (or its cgroup is gone).
    pub fn sample(&self) -> Option<(Sample, String)> {
        let pid = self.pid?;
        let cgroup = stats::cgroup_of(pid, std::path::Path::new("/sys/fs/cgroup")).ok()?;
        let proc_stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        Some((
            stats::sample(&cgroup, &proc_stat),
            holdfast_rfc3339::format_nanos_go(crate::engine::wall_now().as_unix_nanos()),
        ))
    }
}

impl Containers<'_> {
    /// `docker top`: the host's `ps` with `ps_args`, its rows those of the
    /// container's processes (409 unless it runs, as dockerd).
    pub async fn top(
        &self,
        reference: &str,
        ps_args: &[String],
    ) -> Result<(Vec<String>, Vec<Vec<String>>), RequestError> {
        let s = self.snapshot(reference).await?;
        let id = s.record.id;
        if !matches!(
            (s.status, s.task),
            (Status::Running, TaskState::Running { .. })
        ) {
            return Err(conflict(format!("Container {id} is not running")));
        }
        let pids = self
            .engine
            .services
            .adapter
            .list_pids(&id)
            .await
            .map_err(crate::refusal::adapter_failure)?;
        let out = tokio::process::Command::new("ps")
            .args(ps_args)
            .output()
            .await
            .map_err(|e| internal(format!("running ps: {e}")))?;
        if !out.status.success() {
            return Err(internal(format!(
                "ps {}: {}",
                ps_args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        filter_ps(&String::from_utf8_lossy(&out.stdout), &pids)
    }

    /// `docker stats`: where the container's samples come from.
    pub async fn stats(&self, reference: &str) -> Result<StatsSource, RequestError> {
        let s = self.snapshot(reference).await?;
        let pid = match (s.status, s.task) {
            (Status::Running, TaskState::Running { pid }) => Some(pid),
            _ => None,
        };
        Ok(StatsSource {
            id: s.record.id.to_string(),
            name: s.record.name,
            pid,
        })
    }
}

/// `ps` output: the header's titles, and the rows whose PID is one of
/// `pids` (each split into as many fields as titles, the last taking the rest).
fn filter_ps(output: &str, pids: &[u32]) -> Result<(Vec<String>, Vec<Vec<String>>), RequestError> {
    let mut lines = output.lines();
    let titles: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let Some(pid_column) = titles.iter().position(|t| t == "PID") else {
        return Err(internal(
            "Couldn't find PID field in ps output (give ps_args that show a PID column)",
        ));
    };
    let mut rows = Vec::new();
    for line in lines {
        let mut fields: Vec<String> = Vec::with_capacity(titles.len());
        let mut rest = line.trim_start();
        while fields.len() + 1 < titles.len() {
            let Some((field, tail)) = rest.split_once(char::is_whitespace) else {
                break;
            };
            fields.push(field.to_owned());
            rest = tail.trim_start();
        }
        if !rest.is_empty() {
            fields.push(rest.to_owned());
        }
        let Some(pid) = fields.get(pid_column).and_then(|f| f.parse::<u32>().ok()) else {
            continue;
        };
        if pids.contains(&pid) {
            rows.push(fields);
        }
    }
    Ok((titles, rows))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn ps_rows_are_the_containers_and_keep_their_command_whole() {
        let out = "UID   PID  PPID  C STIME TTY  TIME     CMD\n\
                   root    1     0  0 10:00 ?    00:00:01 /sbin/init splash\n\
                   root  4242    10  0 10:01 ?    00:00:00 sleep 1000 --long arg\n";
        let (titles, rows) = filter_ps(out, &[4242]).unwrap();
        assert_eq!(titles.len(), 8);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][1], "4242");
        assert_eq!(rows[0][7], "sleep 1000 --long arg");
        assert!(filter_ps("USER COMMAND\nroot x\n", &[1]).is_err());
    }
}
