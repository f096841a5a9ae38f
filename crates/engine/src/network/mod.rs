//! The default `bridge` network, made by the standard CNI plugins
//! (Debian's containernetworking-plugins): `loopback`, `bridge` with
//! `host-local` IPAM and outbound NAT (`ipMasq`), and `portmap` for
//! published ports. This module only carries out the core's
//! `NetworkCall`s; when to make or release an
//! attachment is the core's decision (see `holdfast_core::NetworkState`).
//!
//! Everything an attachment makes lives under `<exec-root>/net`, which has
//! the lifetime of the rules the plugins write (the kernel's, gone at a
//! reboot): the network namespace, bind-mounted at `netns/<id>` (it outlives
//! the task, so the bridge plugin's release finds the address whose NAT
//! rule it must delete, whatever happened to the task); the IPAM store
//! (`ipam/<network>/`); and `attachments/<id>.json`, written before the
//! plugins run with the host ports chosen, then with the plugins' result.
//!
//! This file is the one facade: [`Network`] carries out the core's four
//! `NetworkCall`s and answers what the rest of holdfastd asks of networks;
//! the work is in a file per concept:
//!
//! - `subnet.rs`: IPv4 subnets and the choice of a free one;
//! - `definitions.rs`: the networks themselves, created and removed;
//! - `attachments.rs`: a container's namespace and interfaces as recorded
//!   (and what exists of them: the network side's relist); they are made
//!   and released here, by the plugins of `cni.rs`;
//! - `cni.rs`: running the plugins (a thin invoker of our own over the CNI
//!   spec) and the chain holdfast runs;
//! - `ports.rs`: the host ports of published ports;
//! - `hosts.rs`: a container's `/etc/hosts` and `/etc/resolv.conf`;
//! - `host_cleanup.rs`: what a removed network leaves on the host.

mod attachments;
mod cni;
mod definitions;
mod host_cleanup;
mod hosts;
mod ports;
mod subnet;

pub use attachments::Attachment;
pub use definitions::{DEFAULT_NAME, DefError, NetworkDef, NetworkRequest, PREDEFINED};
pub use subnet::{Subnet, choose_subnet};

use crate::path_io::PathIoError;
use attachments::{Iface, create_netns, is_nsfs, remove_netns};
use cni::with_prev;
use holdfast_core::{
    Allocation, ContainerConfig, ContainerId, Done, Endpoint, Failure, FailureKind,
};
use hosts::hosts_base;
use ports::unrecorded_ports;
use serde_json::json;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use subnet::{default_subnet, route_table};

/// What the networks are made of; from the daemon's settings.
#[derive(Clone, Debug)]
pub struct NetworkSettings {
    /// The default network's Linux bridge, also its CNI network name (rule
    /// comments, IPAM dir).
    pub bridge: String,
    /// `a.b.c.d/len`; `None`: the first private /16 no host route touches.
    pub subnet: Option<String>,
    /// Where the CNI plugins are.
    pub plugin_dir: PathBuf,
    /// `<exec-root>/net`.
    pub state_dir: PathBuf,
    /// `<data-root>/networks`: the user-defined networks, a file each. They
    /// are the user's, like volumes: they outlive reboots.
    pub definitions_dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("{0}")]
    Settings(String),
    #[error(transparent)]
    Io(#[from] PathIoError),
}

/// Every network: the default bridge network and the user-defined ones.
/// Cheap to clone; one setup, release, create or removal at a time (port
/// choices, hosts files and the plugins' iptables work are serialised).
#[derive(Clone, Debug)]
pub struct Network {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    settings: NetworkSettings,
    default: NetworkDef,
    lock: Mutex<()>,
}

const IFNAME: &str = "eth0";

impl Network {
    /// Prepares the state directories and settles the subnet: the one given,
    /// else the one chosen before (kept in `<state>/subnet`), else a new one.
    pub fn new(settings: NetworkSettings) -> Result<Network, NetworkError> {
        let io = PathIoError::at;
        for dir in [
            settings.state_dir.clone(),
            settings.state_dir.join("netns"),
            settings.state_dir.join("attachments"),
            settings.state_dir.join("ipam"),
            settings.state_dir.join("hosts"),
            settings.definitions_dir.clone(),
        ] {
            std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        }
        let kept = settings.state_dir.join("subnet");
        if !valid_bridge_name(&settings.bridge) {
            return Err(NetworkError::Settings(format!(
                "invalid bridge name {:?}: 1 to 15 letters, digits, - or _",
                settings.bridge
            )));
        }
        let subnet = match &settings.subnet {
            _ if settings.bridge == "none" => Subnet {
                addr: Ipv4Addr::UNSPECIFIED,
                prefix_len: 8,
            },
            Some(s) => Subnet::parse(s).map_err(NetworkError::Settings)?,
            None => match std::fs::read_to_string(&kept) {
                Ok(s) => Subnet::parse(s.trim()).map_err(NetworkError::Settings)?,
                Err(_) => default_subnet(&route_table()?, &settings.bridge).ok_or_else(|| {
                    NetworkError::Settings(
                        "no private subnet is free of the host's routes: give --bridge-subnet"
                            .into(),
                    )
                })?,
            },
        };
        std::fs::write(&kept, subnet.to_string()).map_err(io("write", &kept))?;
        let default = NetworkDef {
            id: stable_id(&settings.bridge),
            name: DEFAULT_NAME.to_owned(),
            bridge: settings.bridge.clone(),
            subnet: subnet.to_string(),
            gateway: subnet.gateway(),
            created: String::new(),
            labels: Default::default(),
            attachable: false,
        };
        Ok(Network {
            inner: Arc::new(Inner {
                settings,
                default,
                lock: Mutex::new(()),
            }),
        })
    }

    /// Off with `--bridge none`: containers default to no network.
    pub fn enabled(&self) -> bool {
        self.inner.settings.bridge != "none"
    }

    /// Why a container cannot be put on the default network now: the
    /// network is off, or a CNI plugin it needs is not installed. `None`
    /// when it can (the CRI's `NetworkReady`).
    pub fn not_ready(&self) -> Option<String> {
        if !self.enabled() {
            return Some("the bridge network is disabled (holdfastd --bridge none)".to_owned());
        }
        let dir = &self.inner.settings.plugin_dir;
        let missing: Vec<&str> = ["bridge", "host-local", "loopback", "firewall", "portmap"]
            .into_iter()
            .filter(|p| !dir.join(p).is_file())
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "CNI plugins missing in {}: {} (apt-get install containernetworking-plugins)",
                dir.display(),
                missing.join(", ")
            )
        })
    }

    pub fn netns_dir(&self) -> PathBuf {
        self.inner.settings.state_dir.join("netns")
    }

    /// The default network's bridge.
    pub fn name(&self) -> &str {
        &self.inner.settings.bridge
    }

    pub fn subnet(&self) -> Subnet {
        Subnet::parse(&self.inner.default.subnet).unwrap_or(Subnet {
            addr: Ipv4Addr::UNSPECIFIED,
            prefix_len: 8,
        })
    }

    /// The default network, unless it is disabled.
    pub fn default_network(&self) -> Option<NetworkDef> {
        self.enabled().then(|| self.inner.default.clone())
    }

    /// Carries out `NetworkCall::Setup` for the container named `name`:
    /// its namespace and loopback, its hosts file and, with
    /// `own_interface`, its `eth0` on its own network. Blocking: run it
    /// off the loop.
    pub fn setup(
        &self,
        id: &ContainerId,
        name: &str,
        config: &ContainerConfig,
        own_interface: bool,
    ) -> Result<Done, Failure> {
        let own = Iface::own(config);
        self.setup_iface(id, name, config, own_interface.then_some(&own), true)
    }

    /// Carries out `NetworkCall::EndpointSetup`: one more interface, in the
    /// namespace the container's own attachment made. Blocking.
    pub fn setup_endpoint(
        &self,
        id: &ContainerId,
        name: &str,
        config: &ContainerConfig,
        endpoint: &Endpoint,
    ) -> Result<Done, Failure> {
        self.setup_iface(id, name, config, Some(&Iface::endpoint(endpoint)), false)
    }

    /// Carries out `NetworkCall::Teardown`: idempotent, whatever part of a
    /// setup exists. Blocking: run it off the loop.
    pub fn teardown(&self, id: &ContainerId, config: &ContainerConfig) -> Result<Done, Failure> {
        self.teardown_iface(id, config, &Iface::own(config), true)
    }

    /// Carries out `NetworkCall::EndpointTeardown`: idempotent, like `teardown`.
    /// Slot 0 is the `eth0` of its own attachment (or one connected
    /// after it was released): the namespace stays.
    pub fn teardown_endpoint(
        &self,
        id: &ContainerId,
        config: &ContainerConfig,
        endpoint: &Endpoint,
    ) -> Result<Done, Failure> {
        self.teardown_iface(id, config, &Iface::endpoint(endpoint), false)
    }

    /// `whole`: the container's own attachment (the namespace, loopback
    /// and hosts file, then `iface` if any); else `iface` alone, in the
    /// namespace that one made.
    fn setup_iface(
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
        // What it gave, for the core's record (inspect, ps and port read
        // that, never these files).
        let allocation = iface.map(|_| Allocation {
            ip: attachment.ip,
            prefix_len: attachment.prefix_len,
            gateway: attachment.gateway,
            mac: attachment.mac.clone(),
            endpoint_id: attachment.endpoint_id.clone(),
            ports: attachment.ports.clone(),
        });
        Ok(Done::Attached(allocation))
    }

    /// What an interface's setup will make, before the plugins run: the
    /// network (it must exist), the address asked for (free), the host
    /// ports (resolved), the names peers know it by and its endpoint id.
    fn plan(&self, id: &ContainerId, name: &str, iface: &Iface<'_>) -> Result<Attachment, Failure> {
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

    fn teardown_iface(
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
}

fn valid_bridge_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The default network's id: the same for the same bridge, across restarts.
fn stable_id(bridge: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(format!("holdfast network {bridge}")))
}

/// 64 hex digits from 32 random bytes, as dockerd makes ids.
fn random_id() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for a network id: {e}"))?;
    Ok(hex::encode(bytes))
}

fn dir_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|e| {
            e.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn other(message: impl Into<String>) -> Failure {
    Failure::new(FailureKind::Other, message)
}

/// A network over state directories under `dir`, for the tests of every
/// part of the network.
#[cfg(test)]
fn network_in(dir: &Path) -> Network {
    let made = Network::new(NetworkSettings {
        bridge: "hf-test".into(),
        subnet: Some("10.9.9.0/24".into()),
        plugin_dir: dir.join("none"),
        state_dir: dir.join("net"),
        definitions_dir: dir.join("networks"),
    });
    match made {
        Ok(network) => network,
        Err(e) => panic!("network: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: &Path, bridge: &str, subnet: Option<&str>) -> NetworkSettings {
        NetworkSettings {
            bridge: bridge.into(),
            subnet: subnet.map(str::to_owned),
            plugin_dir: dir.join("none"),
            state_dir: dir.join("net"),
            definitions_dir: dir.join("networks"),
        }
    }

    #[test]
    fn the_default_network_keeps_the_subnet_it_settled_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let net = network_in(dir.path());
        assert!(net.enabled());
        assert_eq!(net.subnet().to_string(), "10.9.9.0/24");
        let default = net.default_network().expect("enabled");
        assert_eq!(
            (default.name.as_str(), default.bridge.as_str()),
            ("bridge", "hf-test")
        );
        assert_eq!(default.gateway, Ipv4Addr::new(10, 9, 9, 1));
        // A restart without --bridge-subnet keeps it, and the same id.
        let again = Network::new(settings(dir.path(), "hf-test", None)).expect("network");
        assert_eq!(again.subnet().to_string(), "10.9.9.0/24");
        assert_eq!(again.default_network().map(|d| d.id), Some(default.id));
    }

    #[test]
    fn a_disabled_bridge_has_no_default_network_and_a_bad_name_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let none = Network::new(settings(dir.path(), "none", None)).expect("network");
        assert!(!none.enabled());
        assert!(none.default_network().is_none());
        assert!(none.networks().is_empty());
        for bad in ["", "a-name-longer-than-15", "br 0"] {
            assert!(
                matches!(
                    Network::new(settings(dir.path(), bad, Some("10.1.0.0/24"))),
                    Err(NetworkError::Settings(_))
                ),
                "{bad:?}"
            );
        }
    }
}
