//! An attachment: a container's network namespace and an interface in it on
//! a network, made and released by the plugins, and its record
//! (`attachments/<id>.json`, or `<id>.eth<slot>.json` for an endpoint),
//! written before the plugins run with the host ports chosen, then with
//! their result. What exists of attachments is the network side's relist.

use super::cni::with_prev;
use super::definitions::{DEFAULT_NAME, NetworkDef};
use super::hosts::hosts_base;
use super::ports::unrecorded_ports;
use super::{IFNAME, Network, dir_names, other, random_id};
use holdfast_core::{
    ContainerConfig, ContainerId, Done, Endpoint, Failure, FailureKind, PortBinding,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// What an attachment is, as `inspect` shows it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Attachment {
    /// Host ports resolved (none is 0), written before the plugins run.
    pub ports: Vec<PortBinding>,
    pub ip: Option<Ipv4Addr>,
    pub prefix_len: u8,
    pub gateway: Option<Ipv4Addr>,
    pub mac: Option<String>,
    /// The plugins' chained result: the `prevResult` of their release.
    pub result: Option<Value>,
    /// The network it is made on, as it was then: its release needs
    /// nothing else (whatever happened to the network since).
    #[serde(default)]
    pub network: Option<NetworkDef>,
    /// The names peers on a user network find it by: its container name,
    /// aliases and short id.
    #[serde(default)]
    pub names: Vec<String>,
    /// Its own part of its hosts file (loopback, itself, `--add-host`);
    /// on a user network its peers' lines follow, rewritten as they come
    /// and go.
    #[serde(default)]
    pub hosts_base: String,
    /// dockerd's `EndpointID`: 64 hex digits, new for each setup of an
    /// interface and kept (on disk, with the rest) until its release.
    /// Empty for a namespace with no interface.
    #[serde(default)]
    pub endpoint_id: String,
}

impl Network {
    /// `attachments/<id>.json` for the container's own network (slot 0),
    /// `attachments/<id>.eth<slot>.json` for an endpoint.
    pub(super) fn attachment_path(&self, id: &ContainerId, slot: u8) -> PathBuf {
        let file = if slot == 0 {
            format!("{id}.json")
        } else {
            format!("{id}.eth{slot}.json")
        };
        self.inner.settings.state_dir.join("attachments").join(file)
    }

    /// The attachment of `id` to its own network, if one is (being) made.
    pub fn attachment(&self, id: &ContainerId) -> Option<Attachment> {
        self.attachment_of(id, 0)
    }

    /// The attachment of `id` through interface `eth<slot>`.
    pub fn attachment_of(&self, id: &ContainerId, slot: u8) -> Option<Attachment> {
        let bytes = std::fs::read(self.attachment_path(id, slot)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Every attachment made or being made, endpoints too: `(container,
    /// slot, attachment)`.
    pub fn attachments(&self) -> Vec<(ContainerId, u8, Attachment)> {
        let dir = self.inner.settings.state_dir.join("attachments");
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut out: Vec<(ContainerId, u8, Attachment)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let (id, slot) = attachment_file(&name)?;
                let bytes = std::fs::read(e.path()).ok()?;
                Some((id, slot, serde_json::from_slice(&bytes).ok()?))
            })
            .collect();
        out.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        out
    }

    /// The slots of the endpoints something exists of for `id` (their
    /// attachment files, their addresses in any IPAM store): a container
    /// no record owns is adopted with these, to release them.
    pub fn found_endpoints(&self, id: &ContainerId) -> Vec<u8> {
        let dir = self.inner.settings.state_dir.join("attachments");
        let mut slots: Vec<u8> = dir_names(&dir)
            .iter()
            .filter_map(|n| attachment_file(n))
            .filter(|(owner, slot)| owner == id && *slot > 0)
            .map(|(_, slot)| slot)
            .collect();
        slots.extend(
            self.ipam_entries()
                .into_iter()
                .filter(|e| e.owner == id.as_str())
                .filter_map(|e| slot_of(&e.ifname))
                .filter(|slot| *slot > 0),
        );
        slots.sort_unstable();
        slots.dedup();
        slots
    }

    /// The IPAM store of every network.
    pub(super) fn ipam_entries(&self) -> Vec<IpamEntry> {
        let root = self.inner.settings.state_dir.join("ipam");
        let mut out = Vec::new();
        for net in dir_names(&root) {
            for n in dir_names(&root.join(&net)) {
                if n == "lock" || n.starts_with("last_reserved_ip") {
                    continue;
                }
                // host-local: the owner's container id, then the interface.
                if let Ok(text) = std::fs::read_to_string(root.join(&net).join(&n)) {
                    let mut lines = text.lines().map(str::trim);
                    let Some(owner) = lines.next() else {
                        continue;
                    };
                    out.push(IpamEntry {
                        bridge: net.clone(),
                        addr: n,
                        owner: owner.to_owned(),
                        ifname: lines.next().unwrap_or(IFNAME).to_owned(),
                    });
                }
            }
        }
        out
    }

    /// Every container that something of an attachment exists for: its
    /// attachment file, its network namespace, its files, an address the
    /// IPAM store of any network holds for it. The network side's relist,
    /// read at start-up.
    pub fn found(&self) -> std::collections::BTreeSet<ContainerId> {
        let dir = &self.inner.settings.state_dir;
        let mut ids: Vec<String> = dir_names(&dir.join("attachments"))
            .iter()
            .filter_map(|n| attachment_file(n))
            .map(|(id, _)| id.to_string())
            .collect();
        ids.extend(dir_names(&dir.join("netns")));
        ids.extend(
            dir_names(&dir.join("hosts"))
                .into_iter()
                .map(|n| n.trim_end_matches(".resolv.conf").to_owned()),
        );
        ids.extend(self.ipam_entries().into_iter().map(|e| e.owner));
        ids.iter().filter_map(|i| i.parse().ok()).collect()
    }

    /// `whole`: the container's own attachment (the namespace, loopback
    /// and hosts file, then `iface` if any); else `iface` alone, in the
    /// namespace that one made.
    pub(super) fn setup_iface(
        &self,
        id: &ContainerId,
        name: &str,
        config: &ContainerConfig,
        iface: Option<&Iface<'_>>,
        whole: bool,
    ) -> Result<Done, Failure> {
        let _guard = self
            .inner
            .lock
            .lock()
            .map_err(|_| other("the network lock is poisoned"))?;
        let slot = iface.map_or(0, |i| i.slot);
        let path = self.attachment_path(id, slot);
        let mut attachment = match iface {
            Some(iface) => self.plan(id, name, iface)?,
            // Disconnected from its own network: the namespace alone.
            None => Attachment::default(),
        };
        self.write_attachment(&path, &attachment)?;
        let netns = self.netns_dir().join(id.as_str());
        if whole {
            create_netns(&netns)
                .map_err(|e| other(format!("network namespace {}: {e}", netns.display())))?;
        } else if !is_nsfs(&netns) {
            return Err(other(format!(
                "network namespace {} is missing: the container's own attachment is not made",
                netns.display()
            )));
        }
        let netns = netns.to_string_lossy().into_owned();
        // Loopback and the chain on the interface are independent (another
        // interface of the same namespace): loopback runs beside the chain,
        // and a setup costs the chain's time alone.
        let lo_bridge = attachment
            .network
            .as_ref()
            .map_or(&self.inner.default.bridge, |d| &d.bridge)
            .clone();
        let lo_conf =
            json!({"cniVersion": "1.0.0", "name": format!("{lo_bridge}-lo"), "type": "loopback"});
        let (lo, chain) = std::thread::scope(|scope| {
            let lo = whole
                .then(|| scope.spawn(|| self.exec("loopback", "ADD", id, "lo", &netns, lo_conf)));
            let chain = match (iface, attachment.network.clone()) {
                (Some(iface), Some(def)) => {
                    self.run_chain(id, &netns, iface, &def, &path, &mut attachment)
                }
                _ => Ok(()),
            };
            let lo = lo.map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(other("the loopback plugin's thread panicked")))
            });
            (lo, chain)
        });
        chain?;
        if let Some(lo) = lo {
            lo?;
        }
        if slot == 0 {
            attachment.hosts_base = hosts_base(id, config, &attachment);
        }
        self.write_attachment(&path, &attachment)?;
        if whole {
            self.write_hosts(id, config, &attachment)?;
        } else if slot == 0 {
            // An `eth0` connected to a running container: its own line
            // names the new address.
            self.rewrite_hosts(id, &attachment.hosts_base)?;
        }
        if let Some(def) = &attachment.network {
            self.refresh_peers(def)?;
        }
        Ok(Done::Ok)
    }

    /// What an interface's setup will make, before the plugins run: the
    /// network (it must exist), the address asked for (free), the host
    /// ports (resolved), the names peers know it by and its endpoint id.
    pub(super) fn plan(
        &self,
        id: &ContainerId,
        name: &str,
        iface: &Iface<'_>,
    ) -> Result<Attachment, Failure> {
        let def = match iface.network {
            None if !self.enabled() => {
                return Err(Failure::new(
                    FailureKind::Invalid,
                    "the bridge network is disabled (holdfastd --bridge none)",
                ));
            }
            None => self.inner.default.clone(),
            Some(n) => self
                .user_networks()
                .into_iter()
                .find(|d| d.name == n)
                .ok_or_else(|| {
                    Failure::new(FailureKind::NotFound, format!("network {n} not found"))
                })?,
        };
        if let Some(ip) = iface.ip {
            let held = self.ipam_entries().into_iter().find(|e| {
                e.bridge == def.bridge
                    && e.addr == ip
                    && (e.owner != id.as_str() || e.ifname != iface.ifname)
            });
            if let Some(e) = held {
                return Err(Failure::new(
                    FailureKind::AlreadyExists,
                    format!(
                        "Address already in use: {ip} on network {} is container {}'s",
                        def.name, e.owner
                    ),
                ));
            }
        }
        let ports = self.resolve_ports(id, iface.ports)?;
        let mut names = Vec::new();
        if def.user_defined() {
            names.push(name.to_owned());
            names.extend(iface.aliases.iter().cloned());
            names.push(id.as_str().chars().take(12).collect());
            names.dedup();
        }
        Ok(Attachment {
            ports,
            network: Some(def),
            names,
            endpoint_id: random_id().map_err(other)?,
            ..Attachment::default()
        })
    }

    pub(super) fn teardown_iface(
        &self,
        id: &ContainerId,
        config: &ContainerConfig,
        iface: &Iface<'_>,
        whole: bool,
    ) -> Result<Done, Failure> {
        let _guard = self
            .inner
            .lock
            .lock()
            .map_err(|_| other("the network lock is poisoned"))?;
        let path = self.attachment_path(id, iface.slot);
        let attachment = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Attachment>(&b).ok());
        // The ports as the setup chose them (the plugins find their rules
        // by container id; portmap wants to be told there were mappings).
        let ports = attachment
            .as_ref()
            .map_or_else(|| unrecorded_ports(iface.ports), |a| a.ports.clone());
        let prev = attachment.as_ref().and_then(|a| a.result.clone());
        let netns_path = self.netns_dir().join(id.as_str());
        let netns = if netns_path.exists() {
            netns_path.to_string_lossy().into_owned()
        } else {
            String::new()
        };
        // The network it was made on (none: a namespace alone); with no
        // record of it, the one it names; and any other whose IPAM store
        // holds an address for this interface (a setup cut short before
        // its record said which, or a network named by a config that no
        // longer exists).
        let mut defs: Vec<NetworkDef> = match &attachment {
            Some(a) => a.network.clone().into_iter().collect(),
            None => match iface.network {
                None => self.default_network().into_iter().collect(),
                Some(n) => self
                    .user_networks()
                    .into_iter()
                    .filter(|d| d.name == n)
                    .collect(),
            },
        };
        let known = self.networks();
        for e in self.ipam_entries() {
            if e.owner == id.as_str()
                && e.ifname == iface.ifname
                && !defs.iter().any(|d| d.bridge == e.bridge)
                && let Some(d) = known.iter().find(|d| d.bridge == e.bridge)
            {
                defs.push(d.clone());
            }
        }
        // Every plugin is asked, whatever an earlier one said (one that
        // fails keeps the others' work from leaking); the first failure is
        // the answer, and the release is retried.
        let mut failed = None;
        for def in &defs {
            let mut plugins = self.plugins(def, &ports, None)?;
            plugins.reverse();
            for plugin in plugins {
                let conf = with_prev(plugin, &def.bridge, prev.as_ref(), &ports);
                let ty = conf["type"].as_str().unwrap_or_default().to_owned();
                if let Err(f) = self.exec(&ty, "DEL", id, &iface.ifname, &netns, conf) {
                    failed.get_or_insert(f);
                }
            }
        }
        if let Some(f) = failed {
            return Err(f);
        }
        if whole {
            for path in [self.hosts_path(id), self.resolv_path(id)] {
                match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(other(format!("remove {}: {e}", path.display()))),
                }
            }
            remove_netns(&netns_path)
                .map_err(|e| other(format!("network namespace {}: {e}", netns_path.display())))?;
        }
        if !whole && iface.slot == 0 && is_nsfs(&netns_path) {
            // The namespace stays, and what its record keeps of it: its
            // hosts file, without the address released.
            let rest = Attachment {
                hosts_base: hosts_base(id, config, &Attachment::default()),
                ..Attachment::default()
            };
            self.write_attachment(&path, &rest)?;
            self.rewrite_hosts(id, &rest.hosts_base)?;
        } else {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(other(format!("remove the attachment record: {e}"))),
            }
        }
        for def in &defs {
            self.refresh_peers(def)?;
        }
        Ok(Done::Ok)
    }

    /// Whole or not at all (a rename), and not synced: the file describes
    /// what the kernel holds (addresses, interfaces, rules), which a crash
    /// of the machine loses too, while a crash of holdfastd leaves what
    /// was written in the page cache for the next one to read. A sync per
    /// write was a quarter of a setup's time on a loaded disk
    /// (bench/network.md). The record that owns the attachment is the
    /// durable part, written before it is made.
    pub(super) fn write_attachment(&self, path: &Path, a: &Attachment) -> Result<(), Failure> {
        let bytes = serde_json::to_vec(a).map_err(|e| other(format!("attachment: {e}")))?;
        let tmp = path.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            std::fs::rename(&tmp, path)
        };
        write().map_err(|e| other(format!("write {}: {e}", path.display())))
    }
}

/// One interface of a container: its own network's (`eth0`, slot 0, with
/// its published ports and MAC) or an endpoint's.
pub(super) struct Iface<'a> {
    pub(super) slot: u8,
    pub(super) ifname: String,
    /// A user network by name; `None`: the default one.
    pub(super) network: Option<&'a str>,
    pub(super) aliases: &'a [String],
    pub(super) ip: Option<&'a str>,
    pub(super) mac: Option<&'a str>,
    pub(super) ports: &'a [PortBinding],
}

impl<'a> Iface<'a> {
    pub(super) fn own(config: &'a ContainerConfig) -> Iface<'a> {
        Iface {
            slot: 0,
            ifname: IFNAME.to_owned(),
            network: config.network_name.as_deref(),
            aliases: &config.network_aliases,
            ip: config.ip_address.as_deref(),
            mac: config.mac_address.as_deref(),
            ports: &config.ports,
        }
    }

    pub(super) fn endpoint(e: &'a Endpoint) -> Iface<'a> {
        Iface {
            slot: e.slot,
            ifname: e.ifname(),
            network: Some(e.network.as_str()).filter(|n| *n != DEFAULT_NAME),
            aliases: &e.aliases,
            ip: e.ip.as_deref(),
            mac: None,
            ports: &[],
        }
    }
}

/// An address in a host-local IPAM store.
pub(super) struct IpamEntry {
    bridge: String,
    /// The file's name: the address.
    addr: String,
    /// The container id it was given to.
    owner: String,
    /// The interface it was given for.
    ifname: String,
}

/// `<id>.json` (slot 0) or `<id>.eth<slot>.json`.
pub(super) fn attachment_file(name: &str) -> Option<(ContainerId, u8)> {
    let stem = name.strip_suffix(".json")?;
    match stem.split_once('.') {
        None => Some((stem.parse().ok()?, 0)),
        Some((id, ifname)) => Some((id.parse().ok()?, slot_of(ifname)?)),
    }
}

/// `eth<slot>`'s slot.
fn slot_of(ifname: &str) -> Option<u8> {
    ifname.strip_prefix("eth")?.parse().ok()
}

/// A network namespace of its own, bind-mounted at `path` so that it lives
/// until released, whatever happens to the task. A namespace already there
/// (a setup cut short before its release) is kept.
fn create_netns(path: &Path) -> std::io::Result<()> {
    if is_nsfs(path) {
        return Ok(());
    }
    std::fs::File::create(path)?;
    let target = path.to_owned();
    // unshare moves only this thread; it ends right after.
    std::thread::spawn(move || -> std::io::Result<()> {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)?;
        nix::mount::mount(
            Some("/proc/thread-self/ns/net"),
            &target,
            None::<&str>,
            nix::mount::MsFlags::MS_BIND,
            None::<&str>,
        )?;
        Ok(())
    })
    .join()
    .map_err(|_| std::io::Error::other("the namespace thread panicked"))?
}

/// Unmounts and removes the namespace's file; nothing there is done.
fn remove_netns(path: &Path) -> std::io::Result<()> {
    if is_nsfs(path) {
        nix::mount::umount2(path, nix::mount::MntFlags::MNT_DETACH)?;
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn is_nsfs(path: &Path) -> bool {
    nix::sys::statfs::statfs(path)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::NSFS_MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_lists_every_trace_of_an_attachment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let net = super::super::network_in(dir.path());
        let state = dir.path().join("net");
        std::fs::write(state.join("attachments/aaa.json"), "{}").expect("write");
        std::fs::write(state.join("attachments/zzz.tmp"), "{}").expect("write");
        std::fs::write(state.join("netns/bbb"), "").expect("write");
        std::fs::create_dir_all(state.join("ipam/hf-test")).expect("mkdir");
        std::fs::write(state.join("ipam/hf-test/10.9.9.2"), "ccc\r\neth0").expect("write");
        std::fs::write(state.join("ipam/hf-test/lock"), "").expect("write");
        std::fs::write(state.join("ipam/hf-test/last_reserved_ip.0"), "10.9.9.2").expect("write");
        // Another network's store too.
        std::fs::create_dir_all(state.join("ipam/hf-0123456789ab")).expect("mkdir");
        std::fs::write(state.join("ipam/hf-0123456789ab/10.7.0.2"), "ddd\r\neth0").expect("write");
        let found: Vec<String> = net.found().iter().map(ToString::to_string).collect();
        assert_eq!(found, ["aaa", "bbb", "ccc", "ddd"]);
    }

    #[test]
    fn an_attachment_file_from_before_endpoint_ids_still_loads() {
        let old = r#"{"ports":[],"ip":"10.1.0.2","prefix_len":24,"gateway":"10.1.0.1",
            "mac":null,"result":null,"network":null,"names":[],"hosts_base":""}"#;
        let a: Attachment = serde_json::from_str(old).expect("an old file loads");
        assert_eq!(a.endpoint_id, "");
        assert_eq!(a.ip, Some(Ipv4Addr::new(10, 1, 0, 2)));
    }
}
