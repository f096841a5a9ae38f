//! A holdfastd with a bridge network of its own: a bridge name and a subnet
//! no other test uses, removed with everything on it when the test ends
//! (also when it fails): the containers (so the CNI plugins release their
//! addresses and NAT rules), then the bridge.

use crate::Daemon;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);
static NEXT_SUBNET: AtomicU32 = AtomicU32::new(0);

/// Debian's containernetworking-plugins.
pub const CNI_PLUGIN_DIR: &str = "/usr/lib/cni";

#[derive(Debug)]
pub struct BridgeDaemon {
    pub d: Daemon,
    pub bridge: String,
    /// `a.b.c.0/24`.
    pub subnet: String,
}

impl BridgeDaemon {
    /// A holdfastd whose default network is a bridge of its own.
    pub fn start() -> BridgeDaemon {
        BridgeDaemon::start_with(&[])
    }

    /// With more holdfastd flags.
    pub fn start_with(args: &[&str]) -> BridgeDaemon {
        BridgeDaemon::start_with_env(args, &[])
    }

    /// With more holdfastd flags and these environment variables.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> BridgeDaemon {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        // Unique among this process's tests (n) and, mostly, among
        // concurrent runs (the pid); at most 15 characters.
        let bridge = format!("hft{:05x}{n}", pid & 0xfffff);
        let subnet = format!(
            "10.{}.{}.0/24",
            200 + pid % 50,
            (pid / 50 % 25) * 10 + n % 10
        );
        let mut all = vec!["--bridge", &bridge, "--bridge-subnet", &subnet];
        all.extend_from_slice(args);
        let d = Daemon::start_with_env(&all, env);
        BridgeDaemon { d, bridge, subnet }
    }

    /// [`Daemon::reboot`], and what a reboot does to the host's network:
    /// the bridges go (the default one and those of `before.networks`),
    /// and with them every rule the plugins made since `before` (from
    /// [`host_rules`]) for this daemon's containers.
    pub fn reboot(&mut self, before: &HostRules) {
        self.d.reboot();
        for bridge in std::iter::once(&self.bridge).chain(before.networks.iter().map(|(b, _)| b)) {
            let _ = Command::new("ip").args(["link", "del", bridge]).output();
        }
        let now = host_rules(self, &before.networks);
        for (table, was, is) in [
            ("nat", &before.nat, &now.nat),
            ("filter", &before.filter, &now.filter),
        ] {
            let added: Vec<&String> = is.iter().filter(|l| !was.contains(l)).collect();
            let mut script = format!("*{table}\n");
            for rule in added.iter().filter_map(|l| l.strip_prefix("-A ")) {
                script.push_str(&format!("-D {rule}\n"));
            }
            for chain in added.iter().filter_map(|l| l.strip_prefix(':')) {
                let name = chain.split_whitespace().next().unwrap_or_default();
                script.push_str(&format!("-X {name}\n"));
            }
            script.push_str("COMMIT\n");
            let out = crate::run_with_input(
                Command::new("iptables-restore").arg("--noflush"),
                Some(script.as_bytes()),
                std::time::Duration::from_secs(30),
            );
            assert!(
                out.success(),
                "delete the {table} rules a reboot takes:\n{script}\n{}",
                out.stderr
            );
        }
    }

    /// A /24 for a user network, unique as the bridge's subnet is.
    pub fn user_subnet(&self) -> String {
        let n = NEXT_SUBNET.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        format!(
            "10.{}.{}.0/24",
            150 + pid % 50,
            (pid / 50 % 25) * 10 + n % 10
        )
    }

    /// The IPAM store of the network (host-local: a file per address).
    pub fn ipam_dir(&self) -> PathBuf {
        self.d.exec_root().join("net/ipam").join(&self.bridge)
    }

    /// The addresses allocated now.
    pub fn allocations(&self) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(self.ipam_dir())
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n != "lock" && !n.starts_with("last_reserved_ip"))
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// Interfaces on the bridge (one veth per attached container).
    pub fn bridge_ports(&self) -> Vec<String> {
        let dir = PathBuf::from("/sys/class/net")
            .join(&self.bridge)
            .join("brif");
        let mut out: Vec<String> = std::fs::read_dir(dir)
            .map(|e| {
                e.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// Network namespaces and attachment records still held.
    pub fn held_files(&self) -> Vec<String> {
        let mut out = Vec::new();
        for sub in ["net/netns", "net/attachments", "net/hosts"] {
            if let Ok(entries) = std::fs::read_dir(self.d.exec_root().join(sub)) {
                out.extend(
                    entries
                        .flatten()
                        .map(|e| format!("{sub}/{}", e.file_name().to_string_lossy())),
                );
            }
        }
        out.sort();
        out
    }
}

/// A busybox shell line: httpd serving `body` on port 80, in the foreground.
pub fn httpd(body: &str) -> String {
    format!("mkdir -p /www && echo {body} > /www/index.html && exec httpd -f -p 80 -h /www")
}

/// GET `url` from the host with curl (3 s); the body when it answered 200.
pub fn http_get(url: &str) -> Option<String> {
    let out = crate::run_with_timeout(
        Command::new("curl").args(["-sf", "--max-time", "3", url]),
        std::time::Duration::from_secs(10),
    );
    out.success().then_some(out.stdout)
}

/// A port nothing listens on now (the kernel's choice).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The body `container` gets from `url` (busybox wget, 5 s), if it gets one.
pub fn wget_from(net: &BridgeDaemon, container: &str, url: &str) -> Option<String> {
    let out = net
        .d
        .docker(&["exec", container, "timeout", "5", "wget", "-qO-", url]);
    out.success().then(|| out.stdout.trim().to_owned())
}

/// Waits until `container` gets `body` from `url`.
pub fn wait_reaches(net: &BridgeDaemon, container: &str, url: &str, body: &str) {
    net.d
        .wait_until(&format!("{container} gets {body} from {url}"), || {
            wget_from(net, container, url).as_deref() == Some(body)
        });
}

/// The nat table's CNI chains and rules, counters dropped, sorted: what
/// the plugins made.
pub fn cni_nat_rules() -> Vec<String> {
    let out = Command::new("iptables-save")
        .args(["-t", "nat"])
        .output()
        .expect("run iptables-save");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut rules: Vec<String> = text
        .lines()
        .filter(|l| l.contains("CNI"))
        .map(|l| match l.strip_suffix(" [0:0]") {
            Some(chain) => chain.to_owned(),
            None => match l.find(" [") {
                Some(i) if l.starts_with(':') => l[..i].to_owned(),
                _ => l.to_owned(),
            },
        })
        .collect();
    rules.sort();
    rules
}

/// What the network holds on the host, in one comparable value.
#[derive(Debug, PartialEq, Eq)]
pub struct Held {
    pub nat: Vec<String>,
    /// The firewall plugin's per-container rules (CNI-FORWARD) for
    /// addresses of the test's networks.
    pub filter: Vec<String>,
    pub addresses: Vec<String>,
    pub bridge_ports: Vec<String>,
    pub files: Vec<String>,
}

/// What `net`'s containers hold on the host now.
pub fn held(net: &BridgeDaemon) -> Held {
    Held {
        nat: cni_nat_rules(),
        filter: filter_rules_for(&[&net.subnet]),
        addresses: net.allocations(),
        bridge_ports: net.bridge_ports(),
        files: net.held_files(),
    }
}

/// The filter table's rules naming an address of one of `subnets` (/24s).
pub fn filter_rules_for(subnets: &[&str]) -> Vec<String> {
    let out = std::process::Command::new("iptables-save")
        .args(["-t", "filter"])
        .output()
        .expect("run iptables-save");
    let prefixes: Vec<&str> = subnets.iter().map(|s| s.trim_end_matches("0/24")).collect();
    let mut rules: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| prefixes.iter().any(|p| l.contains(p)))
        .map(str::to_owned)
        .collect();
    rules.sort();
    rules
}

/// The rules a reboot takes from the host for a [`BridgeDaemon`]: the nat
/// table's CNI chains and rules, and the filter rules naming its bridge or
/// subnet or those of `networks`; as `iptables-save` writes them, counters
/// dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRules {
    pub nat: Vec<String>,
    pub filter: Vec<String>,
    /// The user networks' (bridge, `a.b.c.0/24` subnet).
    pub networks: Vec<(String, String)>,
}

pub fn host_rules(net: &BridgeDaemon, networks: &[(String, String)]) -> HostRules {
    let names: Vec<(&str, &str)> = std::iter::once((net.bridge.as_str(), net.subnet.as_str()))
        .chain(networks.iter().map(|(b, s)| (b.as_str(), s.as_str())))
        .collect();
    let listing = |table: &str| {
        let out = Command::new("iptables-save")
            .args(["-t", table])
            .output()
            .expect("run iptables-save");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let filter = listing("filter")
        .lines()
        .filter(|l| {
            l.starts_with("-A ")
                && names.iter().any(|(bridge, subnet)| {
                    l.contains(subnet.trim_end_matches("0/24")) || l.contains(bridge)
                })
        })
        .map(str::to_owned)
        .collect();
    HostRules {
        nat: cni_nat_rules(),
        filter,
        networks: networks.to_vec(),
    }
}

impl Drop for BridgeDaemon {
    fn drop(&mut self) {
        // The daemon may be down (a crash test stopped midway): bring it
        // back so that it releases what its containers hold (not while
        // unwinding: a second panic would abort the whole run).
        if self.d.holdfastd_pid().is_none() {
            if std::thread::panicking() {
                eprintln!("holdfastd is down: its containers' NAT rules may be left (see the log)");
            } else {
                self.d.restart();
            }
        }
        let ids = self.d.docker(&["ps", "-aq"]).stdout;
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if !ids.is_empty() {
            let mut args = vec!["rm", "-f"];
            args.extend(ids);
            let _ = self.d.docker(&args);
        }
        // User networks: holdfastd removes their bridges and rules.
        let _ = self.d.docker(&["network", "prune", "-f"]);
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .output();
        // The firewall plugin's isolation rules of the bridge stay with it
        // (they are the bridge's, not a container's): they go with it.
        let rules = Command::new("iptables-save")
            .args(["-t", "filter"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for rule in rules
            .lines()
            .filter(|l| l.starts_with("-A CNI-ISOLATION-STAGE-"))
            .filter(|l| l.split_whitespace().any(|w| w == self.bridge))
        {
            let delete = format!("iptables -w -t filter -D {}", &rule[3..]);
            let _ = Command::new("sh").args(["-c", &delete]).output();
        }
    }
}

/// The Linux bridge of a user network: `hf-` and the first 12 digits of
/// its id (crates/engine/src/network/definitions.rs). dockerd shows no
/// bridge name in a user network's options unless one was given, and
/// neither does holdfast.
pub fn bridge_of(d: &Daemon, network: &str) -> String {
    let id = d.ok(&["network", "inspect", "-f", "{{.Id}}", network]);
    format!("hf-{}", id.trim().chars().take(12).collect::<String>())
}
