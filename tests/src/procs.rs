//! Process facts from `/proc`, signals through `kill(1)`, and the clean-up of
//! what a daemon left on the host (mounts, runc state, cgroups).

/// The clean-up of mounts and cgroups is the test kit's.
pub use holdfast_testkit::{remove_cgroups, unmount_under};

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

/// One process as `/proc` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    /// `R`, `S`, `D`, `T` (stopped), `Z` (zombie), ...
    pub state: char,
    /// Start time in clock ticks since boot: with the pid, it names one
    /// process for good (pids are reused).
    pub starttime: u64,
    pub cmdline: Vec<String>,
}

impl Proc {
    /// Reads `/proc/<pid>`; `None` when there is no such process.
    pub fn read(pid: u32) -> Option<Proc> {
        let dir = Path::new("/proc").join(pid.to_string());
        let stat = fs::read_to_string(dir.join("stat")).ok()?;
        // The command name may hold spaces and parentheses: fields resume
        // after the last ')'. Then: state ppid ... starttime (field 22).
        let (_, rest) = stat.rsplit_once(')')?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let state = fields.first()?.chars().next()?;
        let ppid = fields.get(1)?.parse().ok()?;
        let starttime = fields.get(19)?.parse().ok()?;
        let cmdline = fs::read(dir.join("cmdline"))
            .unwrap_or_default()
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        Some(Proc {
            pid,
            ppid,
            state,
            starttime,
            cmdline,
        })
    }

    /// Alive: neither gone nor a zombie.
    pub fn is_alive(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Every process on the host.
pub fn processes() -> Vec<Proc> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(Proc::read)
        .collect()
}

/// One process for good: a pid and its start time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessIdentity {
    pub pid: u32,
    pub starttime: u64,
}

impl ProcessIdentity {
    /// The process now running as `pid`, if any.
    pub fn of(pid: u32) -> Option<ProcessIdentity> {
        let p = Proc::read(pid)?;
        p.is_alive().then_some(ProcessIdentity {
            pid,
            starttime: p.starttime,
        })
    }

    /// Whether this very process still runs (not a zombie, not a new
    /// process that reused the pid).
    pub fn is_alive(&self) -> bool {
        Proc::read(self.pid).is_some_and(|p| p.is_alive() && p.starttime == self.starttime)
    }
}

/// Whether `pid` is a live process (not a zombie).
pub fn pid_alive(pid: u32) -> bool {
    Proc::read(pid).is_some_and(|p| p.is_alive())
}

/// Sends `signal` (a name such as `KILL`, `STOP`, `CONT`, `TERM`) to `pid`.
/// A process that is already gone is fine.
pub fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// The processes whose command line mentions `needle`, plus all their
/// descendants; never this test process.
pub fn processes_mentioning(needle: &str) -> BTreeSet<u32> {
    let procs = processes();
    let me = std::process::id();
    let mut found: BTreeSet<u32> = procs
        .iter()
        .filter(|p| p.pid != me && p.cmdline.iter().any(|a| a.contains(needle)))
        .map(|p| p.pid)
        .collect();
    let mut frontier: Vec<u32> = found.iter().copied().collect();
    while let Some(parent) = frontier.pop() {
        for p in &procs {
            if p.ppid == parent && p.pid != me && found.insert(p.pid) {
                frontier.push(p.pid);
            }
        }
    }
    found
}

/// The kB of `field` (such as `VmRSS:`, `Pss:`) in `/proc/<pid>/<file>`
/// (`status`, `smaps_rollup`); `None` once the process is gone.
pub fn memory_kb(pid: u32, field: &str, file: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Whether process `pid` has a handler for SIGTERM (`SigCgt`, bit 14):
/// a shell's trap is set (before it, a pid 1 ignores SIGTERM).
pub fn catches_sigterm(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let hex = s
                .lines()
                .find_map(|l| l.strip_prefix("SigCgt:"))?
                .trim()
                .to_owned();
            u64::from_str_radix(&hex, 16).ok()
        })
        .is_some_and(|mask| mask & (1 << 14) != 0)
}
