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
//! A thin invoker of our own over the CNI spec (exec the plugin with the
//! `CNI_*` environment and the config on stdin), as no well-kept Rust crate
//! invokes plugins (the published ones implement plugins, or are
//! undocumented experiments).

use holdfast_core::{
    ContainerConfig, ContainerId, Done, Endpoint, Failure, FailureKind, PortBinding,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

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

/// An IPv4 subnet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subnet {
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
}

impl Subnet {
    pub fn parse(s: &str) -> Result<Subnet, String> {
        let (addr, len) = s
            .split_once('/')
            .ok_or_else(|| format!("invalid subnet {s:?}: expected a.b.c.d/len"))?;
        let addr: Ipv4Addr = addr
            .parse()
            .map_err(|e| format!("invalid subnet {s:?}: {e}"))?;
        let prefix_len: u8 = len
            .parse()
            .ok()
            .filter(|l| (8..=30).contains(l))
            .ok_or_else(|| format!("invalid subnet {s:?}: the prefix length must be 8 to 30"))?;
        let subnet = Subnet { addr, prefix_len };
        Ok(Subnet {
            addr: Ipv4Addr::from(u32::from(addr) & subnet.mask()),
            prefix_len,
        })
    }

    fn mask(self) -> u32 {
        u32::MAX << (32 - u32::from(self.prefix_len))
    }

    pub fn gateway(self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) + 1)
    }

    fn overlaps(self, addr: u32, mask: u32) -> bool {
        let common = self.mask() & mask;
        u32::from(self.addr) & common == addr & common
    }

    fn overlaps_subnet(self, other: Subnet) -> bool {
        self.overlaps(u32::from(other.addr), other.mask())
    }

    /// Whether `ip` is an address a host of the subnet may have (not the
    /// subnet's own address nor its broadcast).
    pub fn holds_host(self, ip: Ipv4Addr) -> bool {
        let ip = u32::from(ip);
        let base = u32::from(self.addr);
        ip & self.mask() == base && ip != base && ip != base | !self.mask()
    }
}

impl std::fmt::Display for Subnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// The routes of `/proc/net/route` as (interface, destination, mask),
/// host order; the default route left out.
fn parse_iface_routes(table: &str) -> Vec<(&str, u32, u32)> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let iface = *fields.first()?;
            let dest = u32::from_str_radix(fields.get(1)?, 16).ok()?;
            let mask = u32::from_str_radix(fields.get(7)?, 16).ok()?;
            // The file prints the network-order words as native integers.
            Some((iface, u32::from_be(dest), u32::from_be(mask)))
        })
        .filter(|&(_, _, mask)| mask != 0)
        .collect()
}

/// The routes of `/proc/net/route` as (destination, mask), host order.
fn parse_routes(table: &str) -> Vec<(u32, u32)> {
    parse_iface_routes(table)
        .into_iter()
        .map(|(_, dest, mask)| (dest, mask))
        .collect()
}

fn route_table() -> Result<String, NetworkError> {
    std::fs::read_to_string("/proc/net/route").map_err(|source| NetworkError::Io {
        what: "read",
        path: PathBuf::from("/proc/net/route"),
        source,
    })
}

fn host_routes() -> Result<Vec<(u32, u32)>, NetworkError> {
    Ok(parse_routes(&route_table()?))
}

/// The default bridge's subnet when none is given or kept: the one its
/// bridge already routes (left by an earlier holdfastd, which does not
/// remove it: containers may still use it), else the first free one. A
/// new choice beside that bridge would collide with its own route and
/// be refused by the bridge plugin.
fn default_subnet(table: &str, bridge: &str) -> Option<Subnet> {
    let routes = parse_iface_routes(table);
    let own = routes
        .iter()
        .find(|&&(iface, _, _)| iface == bridge)
        .and_then(|&(_, dest, mask)| {
            Some(Subnet {
                addr: Ipv4Addr::from(dest),
                prefix_len: u8::try_from(mask.count_ones()).ok()?,
            })
        });
    own.or_else(|| {
        let others: Vec<(u32, u32)> = routes.iter().map(|&(_, d, m)| (d, m)).collect();
        choose_subnet(&others)
    })
}

/// The first of 172.17/16 .. 172.31/16, then 10.200/16 .. 10.254/16, that
/// no route of the host overlaps (the default route aside).
pub fn choose_subnet(routes: &[(u32, u32)]) -> Option<Subnet> {
    let candidates = (17..=31u8)
        .map(|b| Ipv4Addr::new(172, b, 0, 0))
        .chain((200..=254u8).map(|b| Ipv4Addr::new(10, b, 0, 0)));
    candidates
        .map(|addr| Subnet {
            addr,
            prefix_len: 16,
        })
        .find(|s| !routes.iter().any(|&(a, m)| s.overlaps(a, m)))
}

/// A network: the default `bridge` or a user-defined one, as `docker
/// network inspect` shows it and as its attachments are made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkDef {
    /// 64 hex digits.
    pub id: String,
    pub name: String,
    /// The Linux bridge; also the CNI network's name (rule comments, the
    /// IPAM store's directory).
    pub bridge: String,
    /// `a.b.c.d/len`.
    pub subnet: String,
    pub gateway: Ipv4Addr,
    /// RFC 3339; empty for the default network.
    pub created: String,
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
}

impl NetworkDef {
    /// The default network is `bridge`; every other is user-defined.
    pub fn user_defined(&self) -> bool {
        self.name != DEFAULT_NAME
    }

    fn subnet(&self) -> Result<Subnet, Failure> {
        Subnet::parse(&self.subnet).map_err(other)
    }

    /// Whether a container may be given `ip` on it (`--ip`): a host
    /// address of its subnet, not its gateway.
    pub fn may_give(&self, ip: Ipv4Addr) -> bool {
        Subnet::parse(&self.subnet).is_ok_and(|s| s.holds_host(ip)) && ip != self.gateway
    }
}

/// The default network's name, as dockerd's.
pub const DEFAULT_NAME: &str = "bridge";
/// Names no user network may take (dockerd's predefined networks).
pub const PREDEFINED: [&str; 3] = ["bridge", "host", "none"];

/// What `docker network create` asks for, checked by the API.
#[derive(Clone, Debug, Default)]
pub struct NetworkRequest {
    pub name: String,
    pub subnet: Option<String>,
    pub gateway: Option<String>,
    pub labels: std::collections::BTreeMap<String, String>,
    /// RFC 3339.
    pub created: String,
}

/// Why a network could not be created or removed.
#[derive(Debug, thiserror::Error)]
pub enum DefError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Other(String),
}

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

#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("{0}")]
    Settings(String),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
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
    registry: tokio::sync::RwLock<()>,
}

const IFNAME: &str = "eth0";

impl Network {
    /// Prepares the state directories and settles the subnet: the one given,
    /// else the one chosen before (kept in `<state>/subnet`), else a new one.
    pub fn new(settings: NetworkSettings) -> Result<Network, NetworkError> {
        let io = |what, path: &Path| {
            let path = path.to_owned();
            move |source| NetworkError::Io { what, path, source }
        };
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
        };
        Ok(Network {
            inner: Arc::new(Inner {
                settings,
                default,
                lock: Mutex::new(()),
                registry: tokio::sync::RwLock::new(()),
            }),
        })
    }

    /// Creates that name a network hold it shared until the container is
    /// recorded; a removal holds it alone from its in-use check to the end.
    pub fn registry(&self) -> &tokio::sync::RwLock<()> {
        &self.inner.registry
    }

    /// Off with `--bridge none`: containers default to no network.
    pub fn enabled(&self) -> bool {
        self.inner.settings.bridge != "none"
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

    /// The user-defined networks, by name.
    pub fn user_networks(&self) -> Vec<NetworkDef> {
        let Ok(entries) = std::fs::read_dir(&self.inner.settings.definitions_dir) else {
            return Vec::new();
        };
        let mut defs: Vec<NetworkDef> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .filter_map(|e| std::fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice::<NetworkDef>(&b).ok())
            .collect();
        defs.sort_by(|a, b| a.name.cmp(&b.name));
        defs
    }

    /// Every bridge network: the default (when enabled) and the user's.
    pub fn networks(&self) -> Vec<NetworkDef> {
        let mut all: Vec<NetworkDef> = self.default_network().into_iter().collect();
        all.extend(self.user_networks());
        all
    }

    /// A bridge network by name, full id or unique id prefix (dockerd's order).
    pub fn find(&self, reference: &str) -> Option<NetworkDef> {
        if reference.is_empty() {
            return None;
        }
        let all = self.networks();
        if let Some(d) = all
            .iter()
            .find(|d| d.name == reference || d.id == reference)
        {
            return Some(d.clone());
        }
        let mut by_prefix = all.iter().filter(|d| d.id.starts_with(reference));
        match (by_prefix.next(), by_prefix.next()) {
            (Some(d), None) => Some(d.clone()),
            _ => None,
        }
    }

    /// `docker network create`: the subnet given, or the first private /16
    /// that neither a route of the host nor another network has.
    pub fn create(&self, req: NetworkRequest) -> Result<NetworkDef, DefError> {
        let _guard = self
            .inner
            .lock
            .lock()
            .map_err(|_| DefError::Other("the network lock is poisoned".into()))?;
        if PREDEFINED.contains(&req.name.as_str())
            || self.find(&req.name).is_some_and(|d| d.name == req.name)
        {
            return Err(DefError::Conflict(format!(
                "network with name {} already exists",
                req.name
            )));
        }
        let others: Vec<Subnet> = self
            .networks()
            .iter()
            .filter_map(|d| Subnet::parse(&d.subnet).ok())
            .collect();
        let subnet = match &req.subnet {
            Some(s) => {
                let subnet = Subnet::parse(s).map_err(DefError::Invalid)?;
                if others.iter().any(|o| o.overlaps_subnet(subnet)) {
                    return Err(DefError::Conflict(format!(
                        "invalid pool request: Pool overlaps with other one on this address space ({subnet})"
                    )));
                }
                subnet
            }
            None => {
                let mut taken = host_routes().map_err(|e| DefError::Other(e.to_string()))?;
                taken.extend(others.iter().map(|o| (u32::from(o.addr), o.mask())));
                choose_subnet(&taken).ok_or_else(|| {
                    DefError::Conflict(
                        "could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network: give --subnet".into(),
                    )
                })?
            }
        };
        let gateway = match &req.gateway {
            None => subnet.gateway(),
            Some(g) => {
                let gw: Ipv4Addr = g
                    .parse()
                    .map_err(|e| DefError::Invalid(format!("invalid gateway {g:?}: {e}")))?;
                if !subnet.holds_host(gw) {
                    return Err(DefError::Invalid(format!(
                        "invalid gateway {gw}: not a host address of the subnet {subnet}"
                    )));
                }
                gw
            }
        };
        let id = random_id().map_err(DefError::Other)?;
        let def = NetworkDef {
            bridge: format!("hf-{}", &id[..12]),
            id,
            name: req.name,
            subnet: subnet.to_string(),
            gateway,
            created: req.created,
            labels: req.labels,
        };
        let path = self.definition_path(&def.id);
        let bytes = serde_json::to_vec_pretty(&def).map_err(|e| DefError::Other(e.to_string()))?;
        write_durably(&path, &bytes)
            .map_err(|e| DefError::Other(format!("write {}: {e}", path.display())))?;
        Ok(def)
    }

    /// `docker network rm` of a user network no container names (the API
    /// checked the containers): refused while any attachment is on it;
    /// then its bridge, its isolation rules and its IPAM store go, and its
    /// definition last (a crash before that leaves it listed, to remove
    /// again).
    pub fn remove(&self, def: &NetworkDef) -> Result<(), DefError> {
        let _guard = self
            .inner
            .lock
            .lock()
            .map_err(|_| DefError::Other("the network lock is poisoned".into()))?;
        if !def.user_defined() {
            return Err(DefError::Invalid(format!(
                "{} is a pre-defined network and cannot be removed",
                def.name
            )));
        }
        if let Some(id) = self
            .attachments()
            .into_iter()
            .find(|(_, _, a)| a.network.as_ref().is_some_and(|n| n.id == def.id))
            .map(|(id, _, _)| id)
        {
            return Err(DefError::Conflict(format!(
                "error while removing network: network {} id {} has active endpoints (container {id})",
                def.name, def.id
            )));
        }
        remove_bridge(&def.bridge).map_err(DefError::Other)?;
        remove_isolation_rules(&def.bridge).map_err(DefError::Other)?;
        let ipam = self.inner.settings.state_dir.join("ipam").join(&def.bridge);
        match std::fs::remove_dir_all(&ipam) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(DefError::Other(format!("remove {}: {e}", ipam.display())));
            }
            _ => {}
        }
        let path = self.definition_path(&def.id);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(DefError::Other(format!("remove {}: {e}", path.display())))
            }
            _ => Ok(()),
        }
    }

    fn definition_path(&self, id: &str) -> PathBuf {
        self.inner
            .settings
            .definitions_dir
            .join(format!("{id}.json"))
    }

    /// `attachments/<id>.json` for the container's own network (slot 0),
    /// `attachments/<id>.eth<slot>.json` for an endpoint.
    fn attachment_path(&self, id: &ContainerId, slot: u8) -> PathBuf {
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
    fn ipam_entries(&self) -> Vec<IpamEntry> {
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
        Ok(Done::Ok)
    }

    /// The chain on `def` through `iface` (ADD, in order, each given the
    /// previous one's result), its result kept in `attachment` (and its
    /// file, after each plugin).
    fn run_chain(
        &self,
        id: &ContainerId,
        netns: &str,
        iface: &Iface<'_>,
        def: &NetworkDef,
        path: &Path,
        attachment: &mut Attachment,
    ) -> Result<(), Failure> {
        let mut prev: Option<Value> = None;
        for plugin in self.plugins(def, &attachment.ports, Some(iface))? {
            let conf = with_prev(
                plugin.clone(),
                &def.bridge,
                prev.as_ref(),
                &attachment.ports,
            );
            let ty = conf["type"].as_str().unwrap_or_default().to_owned();
            prev = Some(self.exec(&ty, "ADD", id, &iface.ifname, netns, conf)?);
            // Recorded before the next plugin runs: a release after a crash
            // gives the later plugins (the firewall finds its rules by the
            // addresses) the result the bridge plugin gave.
            attachment.result = prev.clone();
            self.write_attachment(path, attachment)?;
        }
        if let Some(result) = &prev {
            read_result(result, attachment);
        }
        attachment.result = prev;
        Ok(())
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

    /// The chain on `def`: the bridge (with its IPAM), the firewall's
    /// isolation of bridges, then portmap if ports are published. `iface`:
    /// at setup, the address and MAC asked for, and whether the default
    /// route goes through it (only the container's own interface's does).
    fn plugins(
        &self,
        def: &NetworkDef,
        ports: &[PortBinding],
        iface: Option<&Iface<'_>>,
    ) -> Result<Vec<Value>, Failure> {
        let s = &self.inner.settings;
        let subnet = def.subnet()?;
        let mut bridge = json!({
            "type": "bridge",
            "bridge": def.bridge,
            "isGateway": true,
            "ipMasq": true,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": subnet.to_string(), "gateway": def.gateway.to_string()}]],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dataDir": s.state_dir.join("ipam"),
            },
        });
        if let Some(ip) = iface.and_then(|i| i.ip) {
            bridge["runtimeConfig"]["ips"] = json!([format!("{ip}/{}", subnet.prefix_len)]);
        }
        if let Some(mac) = iface.and_then(|i| i.mac) {
            bridge["runtimeConfig"]["mac"] = json!(mac);
        }
        if iface.is_some_and(|i| i.slot > 0) {
            // A second default route would be refused: an endpoint's
            // interface reaches its own subnet only.
            bridge["ipam"]["routes"] = json!([]);
        }
        // dockerd's isolation of bridge networks (DOCKER-ISOLATION): the
        // firewall plugin's per-bridge rules drop what comes from one of
        // them and leaves by another that has them too. It also accepts
        // the container's own traffic in FORWARD (CNI-FORWARD), whatever
        // the host's policy there.
        let mut plugins = vec![
            bridge,
            json!({"type": "firewall", "backend": "iptables", "ingressPolicy": "same-bridge"}),
        ];
        if !ports.is_empty() {
            plugins.push(json!({
                "type": "portmap",
                "capabilities": {"portMappings": true},
                "snat": true,
            }));
        }
        Ok(plugins)
    }

    /// The container was renamed: on a user network, its peers' hosts
    /// files name it anew.
    pub fn renamed(&self, id: &ContainerId, name: &str) -> Result<(), String> {
        let _guard = self
            .inner
            .lock
            .lock()
            .map_err(|_| "the network lock is poisoned".to_owned())?;
        for (owner, slot, mut a) in self.attachments() {
            if &owner != id {
                continue;
            }
            let Some(def) = a.network.clone().filter(NetworkDef::user_defined) else {
                continue;
            };
            let Some(first) = a.names.first_mut() else {
                continue;
            };
            name.clone_into(first);
            let path = self.attachment_path(id, slot);
            self.write_attachment(&path, &a).map_err(|f| f.message)?;
            self.refresh_peers(&def).map_err(|f| f.message)?;
        }
        Ok(())
    }

    /// Rewrites the hosts file of every container attached to `def` (a
    /// user network): its own part, then a line per peer on each user
    /// network it is on (through its own interface or an endpoint).
    fn refresh_peers(&self, def: &NetworkDef) -> Result<(), Failure> {
        if !def.user_defined() {
            return Ok(());
        }
        let all = self.attachments();
        let on = |a: &Attachment, net: &str| a.network.as_ref().is_some_and(|n| n.id == net);
        let mut ids: Vec<&ContainerId> = all
            .iter()
            .filter(|(_, _, a)| on(a, &def.id) && a.ip.is_some())
            .map(|(id, _, _)| id)
            .collect();
        ids.dedup();
        for id in ids {
            let Some((_, _, own)) = all.iter().find(|(c, s, _)| c == id && *s == 0) else {
                continue;
            };
            if own.hosts_base.is_empty() {
                continue;
            }
            let mut text = own.hosts_base.clone();
            let nets = all
                .iter()
                .filter(|(c, _, a)| c == id && a.ip.is_some())
                .filter_map(|(_, _, a)| a.network.as_ref())
                .filter(|n| n.user_defined());
            for net in nets {
                for (peer, _, p) in &all {
                    if peer == id || !on(p, &net.id) {
                        continue;
                    }
                    if let Some(ip) = p.ip {
                        let line = format!("{ip}\t{}\n", p.names.join(" "));
                        if !text.contains(&line) {
                            text.push_str(&line);
                        }
                    }
                }
            }
            let path = self.hosts_path(id);
            if path.exists() {
                rewrite_in_place(&path, &text)
                    .map_err(|e| other(format!("write {}: {e}", path.display())))?;
            }
        }
        Ok(())
    }
    /// Host ports for every binding: the one asked for if nothing holds it
    /// (another attachment's mapping or a socket of the host), else a free
    /// one chosen by the kernel.
    fn resolve_ports(
        &self,
        id: &ContainerId,
        wanted: &[PortBinding],
    ) -> Result<Vec<PortBinding>, Failure> {
        let mut held: Vec<PortBinding> = self.held_ports(id);
        let mut out = Vec::new();
        for p in wanted {
            let mut p = p.clone();
            if p.host_port == 0 {
                p.host_port = free_port(&p, &held)?;
            } else if let Some(h) = held.iter().find(|h| clashes(h, &p)) {
                return Err(in_use(
                    &p,
                    &format!("holdfast maps it to {}", h.container_port),
                ));
            } else if let Err(e) = probe_port(&p) {
                return Err(in_use(&p, &e.to_string()));
            }
            held.push(p.clone());
            out.push(p);
        }
        Ok(out)
    }

    /// Ports of every other attachment (made or being made).
    fn held_ports(&self, except: &ContainerId) -> Vec<PortBinding> {
        let dir = self.inner.settings.state_dir.join("attachments");
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let own = format!("{except}.json");
        entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy() != own)
            .filter_map(|e| std::fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice::<Attachment>(&b).ok())
            .flat_map(|a| a.ports)
            .collect()
    }

    /// `<state>/hosts/<id>`: the container's `/etc/hosts`.
    fn hosts_path(&self, id: &ContainerId) -> PathBuf {
        self.inner
            .settings
            .state_dir
            .join("hosts")
            .join(id.as_str())
    }

    /// The hosts file of a container whose namespace is made (it may be
    /// bind-mounted in a running one: rewritten in place), if it has one.
    fn rewrite_hosts(&self, id: &ContainerId, text: &str) -> Result<(), Failure> {
        let path = self.hosts_path(id);
        if !path.exists() {
            return Ok(());
        }
        rewrite_in_place(&path, text).map_err(|e| other(format!("write {}: {e}", path.display())))
    }

    /// The container's `/etc/hosts` (its own part; peers are added by
    /// `refresh_peers`) and, when asked for, its `/etc/resolv.conf`.
    fn write_hosts(
        &self,
        id: &ContainerId,
        config: &ContainerConfig,
        a: &Attachment,
    ) -> Result<(), Failure> {
        let text = a.hosts_base.clone();
        let path = self.hosts_path(id);
        std::fs::write(&path, text).map_err(|e| other(format!("write {}: {e}", path.display())))?;
        if config.dns.is_empty() && config.dns_search.is_empty() && config.dns_options.is_empty() {
            return Ok(());
        }
        // Without --dns, the host's name servers, as dockerd does.
        let mut servers = config.dns.clone();
        if servers.is_empty() {
            let host = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
            servers = host
                .lines()
                .filter_map(|l| l.strip_prefix("nameserver"))
                .map(|s| s.trim().to_owned())
                .collect();
        }
        let mut resolv = String::new();
        for s in &servers {
            resolv.push_str(&format!("nameserver {s}\n"));
        }
        if !config.dns_search.is_empty() {
            resolv.push_str(&format!("search {}\n", config.dns_search.join(" ")));
        }
        if !config.dns_options.is_empty() {
            resolv.push_str(&format!("options {}\n", config.dns_options.join(" ")));
        }
        let path = self.resolv_path(id);
        std::fs::write(&path, resolv).map_err(|e| other(format!("write {}: {e}", path.display())))
    }

    fn resolv_path(&self, id: &ContainerId) -> PathBuf {
        self.inner
            .settings
            .state_dir
            .join("hosts")
            .join(format!("{id}.resolv.conf"))
    }

    /// Whole or not at all (a rename), and not synced: the file describes
    /// what the kernel holds (addresses, interfaces, rules), which a crash
    /// of the machine loses too, while a crash of holdfastd leaves what
    /// was written in the page cache for the next one to read. A sync per
    /// write was a quarter of a setup's time on a loaded disk
    /// (bench/network.md). The record that owns the attachment is the
    /// durable part, written before it is made.
    fn write_attachment(&self, path: &Path, a: &Attachment) -> Result<(), Failure> {
        let bytes = serde_json::to_vec(a).map_err(|e| other(format!("attachment: {e}")))?;
        let tmp = path.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            std::fs::rename(&tmp, path)
        };
        write().map_err(|e| other(format!("write {}: {e}", path.display())))
    }

    /// Runs one plugin; its result, or its error as a failure.
    fn exec(
        &self,
        plugin: &str,
        command: &str,
        id: &ContainerId,
        ifname: &str,
        netns: &str,
        conf: Value,
    ) -> Result<Value, Failure> {
        let s = &self.inner.settings;
        if plugin.is_empty() || plugin.contains('/') {
            return Err(other(format!("bad plugin name {plugin:?}")));
        }
        let binary = s.plugin_dir.join(plugin);
        let stdin = serde_json::to_vec(&conf).map_err(|e| other(e.to_string()))?;
        let span = tracing::debug_span!("cni", plugin, command, container_id = %id, ifname);
        let _enter = span.enter();
        let began = std::time::Instant::now();
        let mut child = Command::new(&binary)
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", id.as_str())
            .env("CNI_NETNS", netns)
            .env("CNI_IFNAME", ifname)
            .env("CNI_PATH", &s.plugin_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                other(format!(
                    "run the CNI plugin {} (is containernetworking-plugins installed?): {e}",
                    binary.display()
                ))
            })?;
        if let Some(mut input) = child.stdin.take() {
            input
                .write_all(&stdin)
                .map_err(|e| other(format!("CNI plugin {plugin}: {e}")))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| other(format!("CNI plugin {plugin}: {e}")))?;
        // Where a setup's time goes (bench/network.md reads these).
        tracing::debug!(
            elapsed_us = began.elapsed().as_micros() as u64,
            ok = out.status.success(),
            "CNI plugin ran"
        );
        if !out.status.success() {
            let msg = serde_json::from_slice::<Value>(&out.stdout)
                .ok()
                .map(|v| {
                    let msg = v["msg"].as_str().unwrap_or_default();
                    let details = v["details"].as_str().unwrap_or_default();
                    format!("{msg} {details}").trim().to_owned()
                })
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| String::from_utf8_lossy(&out.stderr).trim().to_owned());
            tracing::warn!(plugin, command, %msg, "CNI plugin failed");
            return Err(other(format!("CNI plugin {plugin} {command}: {msg}")));
        }
        if out.stdout.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&out.stdout)
            .map_err(|e| other(format!("CNI plugin {plugin} answered no JSON: {e}")))
    }
}

/// One interface of a container: its own network's (`eth0`, slot 0, with
/// its published ports and MAC) or an endpoint's.
struct Iface<'a> {
    slot: u8,
    ifname: String,
    /// A user network by name; `None`: the default one.
    network: Option<&'a str>,
    aliases: &'a [String],
    ip: Option<&'a str>,
    mac: Option<&'a str>,
    ports: &'a [PortBinding],
}

impl<'a> Iface<'a> {
    fn own(config: &'a ContainerConfig) -> Iface<'a> {
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

    fn endpoint(e: &'a Endpoint) -> Iface<'a> {
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
struct IpamEntry {
    bridge: String,
    /// The file's name: the address.
    addr: String,
    /// The container id it was given to.
    owner: String,
    /// The interface it was given for.
    ifname: String,
}

/// `<id>.json` (slot 0) or `<id>.eth<slot>.json`.
fn attachment_file(name: &str) -> Option<(ContainerId, u8)> {
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

/// A plugin's config as run in a chain: the network's name and version,
/// the previous plugin's result, and the runtime's port mappings.
fn with_prev(mut plugin: Value, name: &str, prev: Option<&Value>, ports: &[PortBinding]) -> Value {
    plugin["cniVersion"] = json!("1.0.0");
    // One network: every plugin of the chain names it the same (rule
    // comments and chain names derive from it).
    plugin["name"] = json!(name);
    if let Some(prev) = prev.filter(|p| !p.is_null()) {
        plugin["prevResult"] = prev.clone();
    }
    if plugin["type"] == "portmap" {
        let mappings: Vec<Value> = ports
            .iter()
            .map(|p| {
                json!({
                    "hostPort": p.host_port,
                    "containerPort": p.container_port,
                    "protocol": p.protocol,
                    "hostIP": p.host_ip,
                })
            })
            .collect();
        plugin["runtimeConfig"] = json!({ "portMappings": mappings });
    }
    plugin
}

/// The container's address, gateway and MAC from a CNI 1.0 result.
fn read_result(result: &Value, a: &mut Attachment) {
    let Some(ip) = result["ips"].as_array().and_then(|ips| ips.first()) else {
        return;
    };
    if let Some((addr, len)) = ip["address"].as_str().and_then(|s| s.split_once('/')) {
        a.ip = addr.parse().ok();
        a.prefix_len = len.parse().unwrap_or(0);
    }
    a.gateway = ip["gateway"].as_str().and_then(|g| g.parse().ok());
    let iface = ip["interface"]
        .as_u64()
        .and_then(|i| usize::try_from(i).ok());
    a.mac = iface
        .and_then(|i| result["interfaces"].get(i))
        .and_then(|i| i["mac"].as_str())
        .map(str::to_owned);
}

/// The container's own lines of its `/etc/hosts`, as dockerd writes them:
/// loopback, its address under its hostname, and `--add-host` entries.
fn hosts_base(id: &ContainerId, config: &ContainerConfig, a: &Attachment) -> String {
    let hostname = config
        .hostname
        .clone()
        .unwrap_or_else(|| id.as_str().chars().take(12).collect());
    let mut text =
        String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
    if let Some(ip) = a.ip {
        text.push_str(&format!("{ip}\t{hostname}\n"));
    }
    for h in &config.extra_hosts {
        if let Some((name, ip)) = h.split_once(':') {
            text.push_str(&format!("{ip}\t{name}\n"));
        }
    }
    text
}

/// Rewrites a hosts file that a running container has bind-mounted (so in
/// place: a new file would not be seen) without a moment where a resolver
/// reads it empty: one write at offset 0, padded with blank lines (which
/// resolvers skip) to at least the old length, so nothing is truncated.
fn rewrite_in_place(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt as _;
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    let old_len = usize::try_from(file.metadata()?.len()).unwrap_or(usize::MAX);
    let mut bytes = text.as_bytes().to_vec();
    if bytes.len() < old_len {
        bytes.resize(old_len, b'\n');
    }
    file.write_all_at(&bytes, 0)
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

/// Written whole or not at all, and on disk before it is answered.
fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
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

/// Deletes a user network's bridge (the bridge plugin makes it at the first
/// attachment and never removes it); none there is done.
fn remove_bridge(bridge: &str) -> Result<(), String> {
    if !valid_bridge_name(bridge) || !Path::new("/sys/class/net").join(bridge).exists() {
        return Ok(());
    }
    let out = Command::new("ip")
        .args(["link", "delete", bridge, "type", "bridge"])
        .output()
        .map_err(|e| format!("run ip link delete {bridge} (is iproute2 installed?): {e}"))?;
    if out.status.success() || !Path::new("/sys/class/net").join(bridge).exists() {
        Ok(())
    } else {
        Err(format!(
            "ip link delete {bridge}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The firewall plugin's isolation rules name the bridge and are left when
/// its last container goes (they are the bridge's, not a container's): they
/// go with the bridge.
fn remove_isolation_rules(bridge: &str) -> Result<(), String> {
    for chain in ISOLATION_CHAINS {
        let listed = Command::new("iptables")
            .args(["-w", "-t", "filter", "-S", chain])
            .output()
            .map_err(|e| format!("run iptables -S {chain}: {e}"))?;
        if !listed.status.success() {
            // No such chain: no network ever had a container.
            continue;
        }
        let text = String::from_utf8_lossy(&listed.stdout);
        for rule in isolation_rules_of(&text, bridge) {
            let out = Command::new("iptables")
                .args(["-w", "-t", "filter"])
                .args(&rule)
                .output()
                .map_err(|e| format!("run iptables {}: {e}", rule.join(" ")))?;
            if !out.status.success() {
                return Err(format!(
                    "iptables {}: {}",
                    rule.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    Ok(())
}

/// The firewall plugin's chains for `ingressPolicy: same-bridge`.
const ISOLATION_CHAINS: [&str; 2] = ["CNI-ISOLATION-STAGE-1", "CNI-ISOLATION-STAGE-2"];

/// The deletions (`-D chain ...` as arguments) of the rules in an
/// `iptables -S` listing whose input or output interface is `bridge`.
fn isolation_rules_of(listing: &str, bridge: &str) -> Vec<Vec<String>> {
    listing
        .lines()
        .filter_map(shlex::split)
        .filter(|args| args.first().is_some_and(|a| a == "-A"))
        .filter(|args| {
            args.windows(2)
                .any(|w| (w[0] == "-i" || w[0] == "-o") && w[1] == bridge)
        })
        .map(|mut args| {
            args[0] = "-D".to_owned();
            args
        })
        .collect()
}

/// The ports to name in a release with no record of the setup (a reboot
/// emptied the exec root, or the setup was cut short before writing it):
/// a host port the setup was to choose is unknown, and portmap refuses a
/// mapping of port 0 outright, so the release could never complete. Any
/// valid number serves: portmap deletes its chains by container id, and
/// only checks that each mapping is well-formed.
fn unrecorded_ports(ports: &[PortBinding]) -> Vec<PortBinding> {
    ports
        .iter()
        .map(|p| PortBinding {
            host_port: if p.host_port == 0 {
                p.container_port
            } else {
                p.host_port
            },
            ..p.clone()
        })
        .collect()
}

fn other(message: impl Into<String>) -> Failure {
    Failure::new(FailureKind::Other, message)
}

fn in_use(p: &PortBinding, why: &str) -> Failure {
    let ip = if p.host_ip.is_empty() {
        "0.0.0.0"
    } else {
        &p.host_ip
    };
    Failure::new(
        FailureKind::AlreadyExists,
        format!(
            "Bind for {ip}:{} failed: port is already allocated ({why})",
            p.host_port
        ),
    )
}

fn any_ip(ip: &str) -> bool {
    ip.is_empty() || ip == "0.0.0.0"
}

fn clashes(a: &PortBinding, b: &PortBinding) -> bool {
    a.host_port == b.host_port
        && a.protocol == b.protocol
        && (any_ip(&a.host_ip) || any_ip(&b.host_ip) || a.host_ip == b.host_ip)
}

fn bind_addr(p: &PortBinding, port: u16) -> String {
    let ip = if any_ip(&p.host_ip) {
        "0.0.0.0"
    } else {
        &p.host_ip
    };
    format!("{ip}:{port}")
}

/// Whether a socket of the host holds the port (a listener, a bound UDP socket).
fn probe_port(p: &PortBinding) -> std::io::Result<u16> {
    let addr = bind_addr(p, p.host_port);
    if p.protocol == "udp" {
        Ok(std::net::UdpSocket::bind(addr)?.local_addr()?.port())
    } else {
        Ok(std::net::TcpListener::bind(addr)?.local_addr()?.port())
    }
}

/// A port the kernel calls free that no attachment holds.
fn free_port(p: &PortBinding, held: &[PortBinding]) -> Result<u16, Failure> {
    for _ in 0..32 {
        let mut probe = p.clone();
        probe.host_port = 0;
        let port = probe_port(&probe).map_err(|e| other(format!("choose a host port: {e}")))?;
        probe.host_port = port;
        if !held.iter().any(|h| clashes(h, &probe)) {
            return Ok(port);
        }
    }
    Err(other("no free host port found"))
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
        let net = Network::new(NetworkSettings {
            bridge: "hf-test".into(),
            subnet: Some("10.9.9.0/24".into()),
            plugin_dir: dir.path().join("none"),
            state_dir: dir.path().join("net"),
            definitions_dir: dir.path().join("networks"),
        })
        .expect("network");
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
    fn isolation_rules_of_one_bridge_are_found_with_their_quoted_comments() {
        let listing = "-N CNI-ISOLATION-STAGE-1\n\
-A CNI-ISOLATION-STAGE-1 -i hf-aaa ! -o hf-aaa -m comment --comment \"CNI firewall plugin rules (ingressPolicy: same-bridge)\" -j CNI-ISOLATION-STAGE-2\n\
-A CNI-ISOLATION-STAGE-1 -i hf-bbb ! -o hf-bbb -m comment --comment \"CNI firewall plugin rules (ingressPolicy: same-bridge)\" -j CNI-ISOLATION-STAGE-2\n\
-A CNI-ISOLATION-STAGE-1 -m comment --comment \"CNI firewall plugin rules (ingressPolicy: same-bridge)\" -j RETURN\n";
        let rules = isolation_rules_of(listing, "hf-aaa");
        assert_eq!(rules.len(), 1, "{rules:?}");
        assert_eq!(rules[0][0], "-D");
        assert_eq!(rules[0][1], "CNI-ISOLATION-STAGE-1");
        assert!(
            rules[0].contains(&"CNI firewall plugin rules (ingressPolicy: same-bridge)".to_owned())
        );
        assert!(isolation_rules_of(listing, "hf-a").is_empty());
    }

    #[test]
    fn peers_on_one_user_network_get_each_others_lines_and_no_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let net = Network::new(NetworkSettings {
            bridge: "hf-test".into(),
            subnet: Some("10.9.9.0/24".into()),
            plugin_dir: dir.path().join("none"),
            state_dir: dir.path().join("net"),
            definitions_dir: dir.path().join("networks"),
        })
        .expect("network");
        let def = |name: &str, id: &str| NetworkDef {
            id: id.into(),
            name: name.into(),
            bridge: format!("hf-{id}"),
            subnet: "10.8.0.0/24".into(),
            gateway: Ipv4Addr::new(10, 8, 0, 1),
            created: String::new(),
            labels: Default::default(),
        };
        let (app, other) = (def("app", "aaa"), def("other", "bbb"));
        let attach = |id: &str, on: &NetworkDef, ip: u8, names: &[&str]| {
            let id: ContainerId = id.parse().expect("id");
            let a = Attachment {
                ip: Some(Ipv4Addr::new(10, 8, 0, ip)),
                prefix_len: 24,
                network: Some(on.clone()),
                names: names.iter().map(|n| (*n).to_owned()).collect(),
                hosts_base: format!("127.0.0.1\tlocalhost\n10.8.0.{ip}\t{id}\n"),
                ..Attachment::default()
            };
            net.write_attachment(&net.attachment_path(&id, 0), &a)
                .expect("attachment");
            std::fs::write(net.hosts_path(&id), &a.hosts_base).expect("hosts");
            id
        };
        let web = attach("web1", &app, 2, &["web", "front", "web1"]);
        let api = attach("api1", &app, 3, &["api", "api1"]);
        let far = attach("far1", &other, 4, &["far", "far1"]);
        net.refresh_peers(&app).expect("refresh");
        let hosts = |id: &ContainerId| std::fs::read_to_string(net.hosts_path(id)).expect("read");
        assert_eq!(
            hosts(&web),
            "127.0.0.1\tlocalhost\n10.8.0.2\tweb1\n10.8.0.3\tapi api1\n"
        );
        assert_eq!(
            hosts(&api),
            "127.0.0.1\tlocalhost\n10.8.0.3\tapi1\n10.8.0.2\tweb front web1\n"
        );
        assert_eq!(hosts(&far), "127.0.0.1\tlocalhost\n10.8.0.4\tfar1\n");
        // the default network: no peers' lines
        net.refresh_peers(&net.inner.default.clone())
            .expect("refresh");
        // a rename reaches the peers
        net.renamed(&api, "backend").expect("rename");
        assert!(
            hosts(&web).contains("10.8.0.3\tbackend api1\n"),
            "{}",
            hosts(&web)
        );
    }

    #[test]
    fn an_endpoint_makes_peers_of_a_second_network_and_its_files_are_named_by_slot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let net = Network::new(NetworkSettings {
            bridge: "hf-test".into(),
            subnet: Some("10.9.9.0/24".into()),
            plugin_dir: dir.path().join("none"),
            state_dir: dir.path().join("net"),
            definitions_dir: dir.path().join("networks"),
        })
        .expect("network");
        let def = |name: &str, id: &str, net: u8| NetworkDef {
            id: id.into(),
            name: name.into(),
            bridge: format!("hf-{id}"),
            subnet: format!("10.{net}.0.0/24"),
            gateway: Ipv4Addr::new(10, net, 0, 1),
            created: String::new(),
            labels: Default::default(),
        };
        let (front, back) = (def("front", "aaa", 7), def("back", "bbb", 8));
        let attach = |id: &str, slot: u8, on: &NetworkDef, ip: Ipv4Addr, names: &[&str]| {
            let id: ContainerId = id.parse().expect("id");
            let a = Attachment {
                ip: Some(ip),
                prefix_len: 24,
                network: Some(on.clone()),
                names: names.iter().map(|n| (*n).to_owned()).collect(),
                hosts_base: if slot == 0 {
                    format!("127.0.0.1\tlocalhost\n{ip}\t{id}\n")
                } else {
                    String::new()
                },
                ..Attachment::default()
            };
            net.write_attachment(&net.attachment_path(&id, slot), &a)
                .expect("attachment");
            if slot == 0 {
                std::fs::write(net.hosts_path(&id), &a.hosts_base).expect("hosts");
            }
            id
        };
        let app = attach(
            "app1",
            0,
            &front,
            Ipv4Addr::new(10, 7, 0, 2),
            &["app", "app1"],
        );
        attach(
            "app1",
            1,
            &back,
            Ipv4Addr::new(10, 8, 0, 3),
            &["app", "api2", "app1"],
        );
        let db = attach("db1", 0, &back, Ipv4Addr::new(10, 8, 0, 2), &["db", "db1"]);
        let fe = attach("fe1", 0, &front, Ipv4Addr::new(10, 7, 0, 4), &["fe", "fe1"]);
        net.refresh_peers(&back).expect("refresh");
        let hosts = |id: &ContainerId| std::fs::read_to_string(net.hosts_path(id)).expect("read");
        // app is on both: it sees its peers on each
        assert_eq!(
            hosts(&app),
            "127.0.0.1\tlocalhost\n10.7.0.2\tapp1\n10.7.0.4\tfe fe1\n10.8.0.2\tdb db1\n"
        );
        // db sees app by its address on back, with the endpoint's alias
        assert_eq!(
            hosts(&db),
            "127.0.0.1\tlocalhost\n10.8.0.2\tdb1\n10.8.0.3\tapp api2 app1\n"
        );
        net.refresh_peers(&front).expect("refresh");
        assert_eq!(
            hosts(&fe),
            "127.0.0.1\tlocalhost\n10.7.0.4\tfe1\n10.7.0.2\tapp app1\n"
        );
        assert_eq!(
            net.attachments()
                .iter()
                .map(|(id, slot, _)| format!("{id}:{slot}"))
                .collect::<Vec<_>>(),
            ["app1:0", "app1:1", "db1:0", "fe1:0"]
        );
        assert_eq!(net.found_endpoints(&app), [1]);
        assert!(net.found_endpoints(&db).is_empty());
        assert_eq!(attachment_file("app1.eth12.json"), Some((app.clone(), 12)));
        assert_eq!(attachment_file("app1.json"), Some((app, 0)));
        assert_eq!(attachment_file("app1.tmp"), None);
        assert_eq!(attachment_file("app1.lo.json"), None);
    }

    #[test]
    fn a_network_is_created_once_on_a_subnet_of_its_own() {
        let dir = tempfile::tempdir().expect("tempdir");
        let net = Network::new(NetworkSettings {
            bridge: "hf-test".into(),
            subnet: Some("10.9.9.0/24".into()),
            plugin_dir: dir.path().join("none"),
            state_dir: dir.path().join("net"),
            definitions_dir: dir.path().join("networks"),
        })
        .expect("network");
        let req = |name: &str, subnet: &str, gateway: Option<&str>| NetworkRequest {
            name: name.into(),
            subnet: Some(subnet.into()),
            gateway: gateway.map(str::to_owned),
            ..NetworkRequest::default()
        };
        let app = net
            .create(req("app", "10.5.0.0/24", Some("10.5.0.254")))
            .expect("created");
        assert_eq!(app.gateway, Ipv4Addr::new(10, 5, 0, 254));
        assert_eq!(app.bridge, format!("hf-{}", &app.id[..12]));
        assert_eq!(net.find("app"), Some(app.clone()));
        assert_eq!(net.find(&app.id[..6]), Some(app.clone()));
        assert_eq!(
            net.find("bridge").map(|d| d.name),
            Some("bridge".to_owned())
        );
        for (r, says) in [
            (req("app", "10.6.0.0/24", None), "already exists"),
            (req("bridge", "10.6.0.0/24", None), "already exists"),
            (req("wide", "10.5.0.0/16", None), "overlaps"),
            (req("dflt", "10.9.9.128/25", None), "overlaps"),
        ] {
            match net.create(r) {
                Err(DefError::Conflict(m)) => assert!(m.contains(says), "{m}"),
                other => panic!("{says}: {other:?}"),
            }
        }
        for (r, says) in [
            (
                req("gw", "10.6.0.0/24", Some("10.7.0.1")),
                "not a host address",
            ),
            (
                req("gw", "10.6.0.0/24", Some("10.6.0.255")),
                "not a host address",
            ),
            (req("sub", "10.6.0.0/33", None), "prefix length"),
        ] {
            match net.create(r) {
                Err(DefError::Invalid(m)) => assert!(m.contains(says), "{m}"),
                other => panic!("{says}: {other:?}"),
            }
        }
        assert_eq!(net.user_networks(), vec![app.clone()]);
        // in use by an attachment: not removed
        let id: ContainerId = "c1".parse().expect("id");
        let a = Attachment {
            network: Some(app.clone()),
            ..Attachment::default()
        };
        net.write_attachment(&net.attachment_path(&id, 0), &a)
            .expect("attachment");
        assert!(matches!(net.remove(&app), Err(DefError::Conflict(_))));
        assert!(matches!(
            net.remove(&net.inner.default.clone()),
            Err(DefError::Invalid(_))
        ));
        assert_eq!(net.user_networks().len(), 1);
    }

    #[test]
    fn a_hosts_file_is_rewritten_in_place_and_never_shorter() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hosts");
        std::fs::write(&path, "127.0.0.1\tlocalhost\n10.0.0.3\tpeer\n").expect("write");
        let inode =
            || std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).expect("stat"));
        let before = inode();
        rewrite_in_place(&path, "127.0.0.1\tlocalhost\n").expect("rewrite");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.trim_end(), "127.0.0.1\tlocalhost");
        assert!(!text.contains("peer"), "{text:?}");
        assert_eq!(inode(), before, "the bind-mounted file itself");
        rewrite_in_place(&path, "127.0.0.1\tlocalhost\n10.0.0.4\tlonger-peer-name\n")
            .expect("rewrite");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text, "127.0.0.1\tlocalhost\n10.0.0.4\tlonger-peer-name\n");
    }

    #[test]
    fn subnets_parse_and_normalise() {
        let s = Subnet::parse("10.1.2.3/24").expect("valid");
        assert_eq!(s.to_string(), "10.1.2.0/24");
        assert_eq!(s.gateway(), Ipv4Addr::new(10, 1, 2, 1));
        assert!(Subnet::parse("10.1.2.0").is_err());
        assert!(Subnet::parse("10.1.2.0/33").is_err());
        assert!(Subnet::parse("nope/24").is_err());
    }

    #[test]
    fn the_chosen_subnet_avoids_the_host_routes() {
        let table = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
br1\t000012AC\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let routes = parse_routes(table);
        assert_eq!(routes.len(), 2, "the default route is no obstacle");
        let s = choose_subnet(&routes).expect("one is free");
        assert_eq!(s.to_string(), "172.19.0.0/16");
    }

    #[test]
    fn the_default_bridge_keeps_the_subnet_its_bridge_already_routes() {
        let table = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
holdfast0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n";
        let s = default_subnet(table, "holdfast0").expect("its own");
        assert_eq!(s.to_string(), "172.17.0.0/16");
        // Another bridge's route is an obstacle, not a choice.
        let s = default_subnet(table, "hf1").expect("one is free");
        assert_eq!(s.to_string(), "172.18.0.0/16");
    }

    #[test]
    fn ports_clash_on_the_same_protocol_and_overlapping_addresses() {
        let p = |ip: &str, port, proto: &str| PortBinding {
            container_port: 80,
            protocol: proto.into(),
            host_ip: ip.into(),
            host_port: port,
            by_publish_all: false,
        };
        assert!(clashes(&p("", 8080, "tcp"), &p("127.0.0.1", 8080, "tcp")));
        assert!(!clashes(&p("", 8080, "tcp"), &p("", 8080, "udp")));
        assert!(!clashes(
            &p("127.0.0.1", 8080, "tcp"),
            &p("127.0.0.2", 8080, "tcp")
        ));
        assert!(!clashes(&p("", 8080, "tcp"), &p("", 8081, "tcp")));
    }

    #[test]
    fn a_release_without_a_record_names_only_valid_host_ports() {
        let p = |container_port, host_port| PortBinding {
            container_port,
            protocol: "udp".into(),
            host_ip: String::new(),
            host_port,
            by_publish_all: false,
        };
        let ports = unrecorded_ports(&[p(53, 0), p(80, 8080)]);
        assert_eq!(ports, vec![p(53, 53), p(80, 8080)]);
    }

    #[test]
    fn an_attachment_file_from_before_endpoint_ids_still_loads() {
        let old = r#"{"ports":[],"ip":"10.1.0.2","prefix_len":24,"gateway":"10.1.0.1",
            "mac":null,"result":null,"network":null,"names":[],"hosts_base":""}"#;
        let a: Attachment = serde_json::from_str(old).expect("an old file loads");
        assert_eq!(a.endpoint_id, "");
        assert_eq!(a.ip, Some(Ipv4Addr::new(10, 1, 0, 2)));
    }

    #[test]
    fn a_result_gives_address_gateway_and_mac() {
        let result = json!({
            "cniVersion": "1.0.0",
            "interfaces": [{"name": "br0", "mac": "aa"}, {"name": "eth0", "mac": "02:42:ac:11:00:02", "sandbox": "/x"}],
            "ips": [{"address": "172.17.0.2/16", "gateway": "172.17.0.1", "interface": 1}],
        });
        let mut a = Attachment::default();
        read_result(&result, &mut a);
        assert_eq!(a.ip, Some(Ipv4Addr::new(172, 17, 0, 2)));
        assert_eq!(a.prefix_len, 16);
        assert_eq!(a.gateway, Some(Ipv4Addr::new(172, 17, 0, 1)));
        assert_eq!(a.mac.as_deref(), Some("02:42:ac:11:00:02"));
    }
}
