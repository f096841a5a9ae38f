//! `docker stats`: a container's resource use, read from its cgroup (v1 or
//! v2, whichever the host has) and rendered in dockerd's JSON, which the CLI
//! and the SDKs compute percentages from.
//!
//! The cgroup is found through the container's init process
//! (`/proc/<pid>/cgroup`), so it is the one the process really is in,
//! whatever parent it was created under.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the container's controllers are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cgroup {
    /// The unified hierarchy: one directory.
    V2(PathBuf),
    /// One directory per controller (`memory`, `cpuacct`, `pids`, `blkio`, `cpu`).
    V1(BTreeMap<String, PathBuf>),
}

/// Reads `/proc/<pid>/cgroup` under `root` (the host's `/sys/fs/cgroup`).
pub fn cgroup_of(pid: u32, root: &Path) -> std::io::Result<Cgroup> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
    Ok(parse_proc_cgroup(&text, root))
}

/// Parses `/proc/<pid>/cgroup`: v1 lines `N:ctrl,ctrl:/path`, the v2 line
/// `0::/path`. With any v1 controller line it is v1.
pub fn parse_proc_cgroup(text: &str, root: &Path) -> Cgroup {
    let mut v1 = BTreeMap::new();
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let relative = path.trim_start_matches('/');
        if controllers.is_empty() {
            v2 = Some(root.join(relative));
            continue;
        }
        for controller in controllers.split(',') {
            // `cpu,cpuacct` is mounted under that joint name, with aliases.
            let dir = root.join(controllers).join(relative);
            v1.insert(controller.to_owned(), dir);
        }
    }
    match v2 {
        Some(dir) if v1.is_empty() || !v1.keys().any(|k| k == "memory") => Cgroup::V2(dir),
        _ => Cgroup::V1(v1),
    }
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn read_u64(path: &Path) -> Option<u64> {
    read(path)?.trim().parse().ok()
}

/// `key value` lines (memory.stat, cpu.stat).
fn key_values(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_owned(), v.trim().parse().ok()?))
        })
        .collect()
}

/// The host's CPU time in nanoseconds and its online CPUs, from `/proc/stat`
/// (as dockerd computes `system_cpu_usage`: the first seven fields, in
/// clock ticks of 1/100 s).
pub fn system_cpu(proc_stat: &str) -> (u64, u64) {
    let mut total = 0;
    let mut cpus = 0;
    for line in proc_stat.lines() {
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("cpu") => {
                let ticks: u64 = fields.take(7).filter_map(|f| f.parse::<u64>().ok()).sum();
                total = ticks.saturating_mul(10_000_000);
            }
            Some(name) if name.starts_with("cpu") => cpus += 1,
            _ => {}
        }
    }
    (total, cpus)
}

/// One sample, in dockerd's shape for `cpu_stats`, `memory_stats`,
/// `pids_stats` and `blkio_stats`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    pub cpu: Value,
    pub memory: Value,
    pub pids: Value,
    pub blkio: Value,
}

pub fn sample(cgroup: &Cgroup, proc_stat: &str) -> Sample {
    let (system, online) = system_cpu(proc_stat);
    match cgroup {
        Cgroup::V2(dir) => sample_v2(dir, system, online),
        Cgroup::V1(dirs) => sample_v1(dirs, system, online),
    }
}

fn sample_v2(dir: &Path, system: u64, online: u64) -> Sample {
    let cpu = key_values(&read(&dir.join("cpu.stat")).unwrap_or_default());
    let us = |k: &str| cpu.get(k).copied().unwrap_or(0).saturating_mul(1000);
    let memory_stat = key_values(&read(&dir.join("memory.stat")).unwrap_or_default());
    let limit = read(&dir.join("memory.max"))
        .and_then(|m| m.trim().parse::<u64>().ok())
        .unwrap_or_else(host_memory);
    let mut io_entries = Vec::new();
    for line in read(&dir.join("io.stat")).unwrap_or_default().lines() {
        let mut fields = line.split_whitespace();
        let Some((major, minor)) = fields.next().and_then(|d| d.split_once(':')) else {
            continue;
        };
        for kv in fields {
            let (op, key) = match kv.split_once('=') {
                Some(("rbytes", v)) => ("read", v),
                Some(("wbytes", v)) => ("write", v),
                _ => continue,
            };
            io_entries.push(json!({
                "major": major.parse::<u64>().unwrap_or(0), "minor": minor.parse::<u64>().unwrap_or(0),
                "op": op, "value": key.parse::<u64>().unwrap_or(0),
            }));
        }
    }
    Sample {
        cpu: json!({
            "cpu_usage": {
                "total_usage": us("usage_usec"),
                "usage_in_kernelmode": us("system_usec"),
                "usage_in_usermode": us("user_usec"),
            },
            "system_cpu_usage": system,
            "online_cpus": online,
            "throttling_data": {
                "periods": cpu.get("nr_periods").copied().unwrap_or(0),
                "throttled_periods": cpu.get("nr_throttled").copied().unwrap_or(0),
                "throttled_time": us("throttled_usec"),
            },
        }),
        memory: json!({
            "usage": read_u64(&dir.join("memory.current")).unwrap_or(0),
            "stats": memory_stat,
            "limit": limit,
        }),
        pids: pids(&dir.join("pids.current"), &dir.join("pids.max")),
        blkio: json!({ "io_service_bytes_recursive": io_entries }),
    }
}

fn sample_v1(dirs: &BTreeMap<String, PathBuf>, system: u64, online: u64) -> Sample {
    let dir = |c: &str| dirs.get(c).cloned().unwrap_or_default();
    let acct = dir("cpuacct");
    let percpu: Vec<u64> = read(&acct.join("cpuacct.usage_percpu"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // cpuacct.stat is in clock ticks (1/100 s).
    let ticks = key_values(&read(&acct.join("cpuacct.stat")).unwrap_or_default());
    let tick_ns = |k: &str| {
        ticks
            .get(k)
            .copied()
            .unwrap_or(0)
            .saturating_mul(10_000_000)
    };
    let throttle = key_values(&read(&dir("cpu").join("cpu.stat")).unwrap_or_default());
    let mem = dir("memory");
    let limit = read_u64(&mem.join("memory.limit_in_bytes"))
        .unwrap_or(u64::MAX)
        .min(host_memory());
    let mut io_entries = Vec::new();
    for line in read(&dir("blkio").join("blkio.throttle.io_service_bytes_recursive"))
        .unwrap_or_default()
        .lines()
    {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let [device, op, value] = fields[..]
            && let Some((major, minor)) = device.split_once(':')
        {
            io_entries.push(json!({
                "major": major.parse::<u64>().unwrap_or(0), "minor": minor.parse::<u64>().unwrap_or(0),
                "op": op, "value": value.parse::<u64>().unwrap_or(0),
            }));
        }
    }
    Sample {
        cpu: json!({
            "cpu_usage": {
                "total_usage": read_u64(&acct.join("cpuacct.usage")).unwrap_or(0),
                "percpu_usage": percpu,
                "usage_in_kernelmode": tick_ns("system"),
                "usage_in_usermode": tick_ns("user"),
            },
            "system_cpu_usage": system,
            "online_cpus": online,
            "throttling_data": {
                "periods": throttle.get("nr_periods").copied().unwrap_or(0),
                "throttled_periods": throttle.get("nr_throttled").copied().unwrap_or(0),
                "throttled_time": throttle.get("throttled_time").copied().unwrap_or(0),
            },
        }),
        memory: json!({
            "usage": read_u64(&mem.join("memory.usage_in_bytes")).unwrap_or(0),
            "max_usage": read_u64(&mem.join("memory.max_usage_in_bytes")).unwrap_or(0),
            "stats": key_values(&read(&mem.join("memory.stat")).unwrap_or_default()),
            "limit": limit,
        }),
        pids: pids(
            &dir("pids").join("pids.current"),
            &dir("pids").join("pids.max"),
        ),
        blkio: json!({ "io_service_bytes_recursive": io_entries }),
    }
}

fn pids(current: &Path, max: &Path) -> Value {
    let mut v = json!({ "current": read_u64(current).unwrap_or(0) });
    if let Some(limit) = read(max).and_then(|m| m.trim().parse::<u64>().ok()) {
        v["limit"] = json!(limit);
    }
    v
}

/// The host's memory, the limit of a container without one (as dockerd shows).
fn host_memory() -> u64 {
    read(Path::new("/proc/meminfo"))
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb.saturating_mul(1024))
}

/// dockerd's stats object: this sample and the one before (zeroes for the
/// first), with their read times.
pub fn render(
    id: &str,
    name: &str,
    now: &Sample,
    now_time: &str,
    before: Option<(&Sample, &str)>,
) -> Value {
    let zero_time = "0001-01-01T00:00:00Z";
    let (pre, pre_time) = match before {
        Some((s, t)) => (s.cpu.clone(), t.to_owned()),
        None => (
            json!({"cpu_usage": {"total_usage": 0, "usage_in_kernelmode": 0, "usage_in_usermode": 0},
                   "system_cpu_usage": 0, "online_cpus": 0,
                   "throttling_data": {"periods": 0, "throttled_periods": 0, "throttled_time": 0}}),
            zero_time.to_owned(),
        ),
    };
    json!({
        "read": now_time,
        "preread": pre_time,
        "pids_stats": now.pids,
        "blkio_stats": now.blkio,
        "num_procs": 0,
        "storage_stats": {},
        "cpu_stats": now.cpu,
        "precpu_stats": pre,
        "memory_stats": now.memory,
        "name": format!("/{name}"),
        "id": id,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn proc_cgroup_names_the_hierarchy() {
        let root = Path::new("/sys/fs/cgroup");
        let v1 = "12:pids:/hf/abc\n4:cpu,cpuacct:/hf/abc\n3:memory:/hf/abc\n1:name=systemd:/x\n0::/hf/abc\n";
        let Cgroup::V1(dirs) = parse_proc_cgroup(v1, root) else {
            panic!("v1 expected");
        };
        assert_eq!(dirs["memory"], Path::new("/sys/fs/cgroup/memory/hf/abc"));
        assert_eq!(
            dirs["cpuacct"],
            Path::new("/sys/fs/cgroup/cpu,cpuacct/hf/abc")
        );
        assert_eq!(
            parse_proc_cgroup("0::/hf/abc\n", root),
            Cgroup::V2(PathBuf::from("/sys/fs/cgroup/hf/abc"))
        );
    }

    #[test]
    fn system_cpu_counts_ticks_and_cpus() {
        let stat = "cpu  100 0 50 1000 0 0 0 7 0 0\ncpu0 50 0 25 500 0 0 0 0 0 0\ncpu1 50 0 25 500 0 0 0 0 0 0\nintr 1\n";
        assert_eq!(system_cpu(stat), (1150 * 10_000_000, 2));
    }

    #[test]
    fn a_v2_cgroup_reads_into_dockerd_fields() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(p.join("cpu.stat"), "usage_usec 2000\nuser_usec 1500\nsystem_usec 500\nnr_periods 3\nnr_throttled 1\nthrottled_usec 7\n").unwrap();
        std::fs::write(p.join("memory.current"), "4096\n").unwrap();
        std::fs::write(p.join("memory.max"), "8192\n").unwrap();
        std::fs::write(p.join("memory.stat"), "anon 1024\ninactive_file 512\n").unwrap();
        std::fs::write(p.join("pids.current"), "2\n").unwrap();
        std::fs::write(p.join("pids.max"), "max\n").unwrap();
        std::fs::write(p.join("io.stat"), "8:0 rbytes=10 wbytes=20 rios=1 wios=2\n").unwrap();
        let s = sample(
            &Cgroup::V2(p.to_owned()),
            "cpu 1 0 0 0 0 0 0\ncpu0 1 0 0 0 0 0 0\n",
        );
        assert_eq!(s.cpu["cpu_usage"]["total_usage"], 2_000_000);
        assert_eq!(s.cpu["throttling_data"]["throttled_time"], 7000);
        assert_eq!(s.cpu["online_cpus"], 1);
        assert_eq!(s.memory["usage"], 4096);
        assert_eq!(s.memory["limit"], 8192);
        assert_eq!(s.memory["stats"]["inactive_file"], 512);
        assert_eq!(s.pids, json!({"current": 2}));
        assert_eq!(s.blkio["io_service_bytes_recursive"][1]["op"], "write");
        let v = render("abc", "web", &s, "t1", Some((&s, "t0")));
        assert_eq!(v["name"], "/web");
        assert_eq!(v["precpu_stats"]["cpu_usage"]["total_usage"], 2_000_000);
        assert_eq!(
            render("abc", "web", &s, "t1", None)["preread"],
            "0001-01-01T00:00:00Z"
        );
    }

    #[test]
    fn a_v1_cgroup_reads_into_dockerd_fields() {
        let dir = tempfile::tempdir().unwrap();
        let mut dirs = BTreeMap::new();
        for c in ["cpuacct", "cpu", "memory", "pids", "blkio"] {
            let d = dir.path().join(c);
            std::fs::create_dir(&d).unwrap();
            dirs.insert(c.to_owned(), d);
        }
        std::fs::write(dirs["cpuacct"].join("cpuacct.usage"), "3000\n").unwrap();
        std::fs::write(dirs["cpuacct"].join("cpuacct.usage_percpu"), "1000 2000 \n").unwrap();
        std::fs::write(dirs["cpuacct"].join("cpuacct.stat"), "user 2\nsystem 1\n").unwrap();
        std::fs::write(dirs["memory"].join("memory.usage_in_bytes"), "4096\n").unwrap();
        std::fs::write(dirs["memory"].join("memory.limit_in_bytes"), "8192\n").unwrap();
        std::fs::write(
            dirs["memory"].join("memory.stat"),
            "total_inactive_file 100\n",
        )
        .unwrap();
        std::fs::write(dirs["pids"].join("pids.current"), "3\n").unwrap();
        std::fs::write(dirs["pids"].join("pids.max"), "100\n").unwrap();
        std::fs::write(
            dirs["blkio"].join("blkio.throttle.io_service_bytes_recursive"),
            "8:0 Read 5\n8:0 Write 6\nTotal 11\n",
        )
        .unwrap();
        let s = sample(&Cgroup::V1(dirs), "cpu 1 0 0 0 0 0 0\n");
        assert_eq!(s.cpu["cpu_usage"]["total_usage"], 3000);
        assert_eq!(s.cpu["cpu_usage"]["percpu_usage"], json!([1000, 2000]));
        assert_eq!(s.cpu["cpu_usage"]["usage_in_usermode"], 20_000_000);
        assert_eq!(s.memory["limit"], 8192);
        assert_eq!(s.memory["stats"]["total_inactive_file"], 100);
        assert_eq!(s.pids, json!({"current": 3, "limit": 100}));
        assert_eq!(
            s.blkio["io_service_bytes_recursive"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }
}
