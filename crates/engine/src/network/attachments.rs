//! An attachment: a container's network namespace and an interface in it on
//! a network, and its record (`attachments/<id>.json`, or
//! `<id>.eth<slot>.json` for an endpoint), written before the plugins run
//! with the host ports chosen, then with their result (the facade, in
//! `mod.rs`, makes and releases them). What exists of attachments is the
//! network side's relist.

use super::definitions::{DEFAULT_NAME, NetworkDef};
use super::{IFNAME, Network, dir_names, other};
use holdfast_core::{ContainerConfig, ContainerId, Endpoint, Failure, PortBinding};
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
    pub(super) bridge: String,
    /// The file's name: the address.
    pub(super) addr: String,
    /// The container id it was given to.
    pub(super) owner: String,
    /// The interface it was given for.
    pub(super) ifname: String,
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
pub(super) fn create_netns(path: &Path) -> std::io::Result<()> {
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
pub(super) fn remove_netns(path: &Path) -> std::io::Result<()> {
    if is_nsfs(path) {
        nix::mount::umount2(path, nix::mount::MntFlags::MNT_DETACH)?;
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

pub(super) fn is_nsfs(path: &Path) -> bool {
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
