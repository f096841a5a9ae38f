//! The networks: the default `bridge` and the user-defined ones, a file each
//! under `<data-root>/networks` (they are the user's, like volumes: they
//! outlive reboots); created on a subnet of their own, removed with what
//! the host keeps of them.

use super::host_cleanup::{remove_bridge, remove_isolation_rules};
use super::subnet::{Subnet, choose_subnet, host_routes};
use super::{Network, other, random_id};
use holdfast_core::Failure;
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

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
    /// `--attachable`, from the core's record (not written on the host).
    #[serde(skip)]
    pub attachable: bool,
}

impl NetworkDef {
    /// The default network is `bridge`; every other is user-defined.
    pub fn user_defined(&self) -> bool {
        self.name != DEFAULT_NAME
    }

    pub(super) fn subnet(&self) -> Result<Subnet, Failure> {
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
    /// 64 hex digits, made by the caller: a create issued again (after a
    /// crash) finds the definition it made. Empty: a new one is drawn.
    pub id: String,
    pub name: String,
    pub subnet: Option<String>,
    pub gateway: Option<String>,
    pub labels: std::collections::BTreeMap<String, String>,
    /// RFC 3339.
    pub created: String,
    /// `--attachable` (the core records it; nothing on the host differs).
    pub attachable: bool,
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

impl Network {
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
        if let Some(made) = self.user_networks().into_iter().find(|d| d.id == req.id) {
            return Ok(made);
        }
        let id = if req.id.is_empty() {
            random_id().map_err(DefError::Other)?
        } else if req.id.len() >= 12 && req.id.bytes().all(|b| b.is_ascii_hexdigit()) {
            req.id.clone()
        } else {
            return Err(DefError::Invalid(format!(
                "invalid network id {:?}",
                req.id
            )));
        };
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
        let def = NetworkDef {
            bridge: format!("hf-{}", &id[..12]),
            id,
            name: req.name,
            subnet: subnet.to_string(),
            gateway,
            created: req.created,
            labels: req.labels,
            attachable: req.attachable,
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

    pub(super) fn definition_path(&self, id: &str) -> PathBuf {
        self.inner
            .settings
            .definitions_dir
            .join(format!("{id}.json"))
    }
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

/// The core's network calls on definitions, carried out.
impl Network {
    /// `NetworkCall::Define`: the definition of `id`, made now or found
    /// made (idempotent by id). Blocking.
    pub fn define(
        &self,
        id: &str,
        name: &str,
        subnet: Option<String>,
        gateway: Option<String>,
        labels: std::collections::BTreeMap<String, String>,
        created_at: holdfast_core::WallTime,
    ) -> Result<holdfast_core::Done, Failure> {
        let req = NetworkRequest {
            id: id.to_owned(),
            name: name.to_owned(),
            subnet,
            gateway,
            labels,
            created: holdfast_rfc3339::format_nanos(created_at.as_unix_nanos()),
            // The core's record holds it; the host's definition does not.
            attachable: false,
        };
        match self.create(req) {
            Ok(def) => Ok(holdfast_core::Done::Defined(definition_of(&def))),
            Err(DefError::Invalid(m)) => Err(Failure::new(holdfast_core::FailureKind::Invalid, m)),
            Err(DefError::Conflict(m)) => {
                Err(Failure::new(holdfast_core::FailureKind::AlreadyExists, m))
            }
            Err(DefError::Other(m)) => Err(other(m)),
        }
    }

    /// `NetworkCall::Undefine`: whatever exists of the network `id` goes
    /// (its definition, or, with none left, the bridge a definition had).
    /// Idempotent. Blocking.
    pub fn undefine(&self, id: &str, bridge: Option<&str>) -> Result<holdfast_core::Done, Failure> {
        match self.user_networks().into_iter().find(|d| d.id == id) {
            Some(def) => self.remove(&def).map_err(|e| match e {
                DefError::Conflict(m) => {
                    Failure::new(holdfast_core::FailureKind::FailedPrecondition, m)
                }
                DefError::Invalid(m) => Failure::new(holdfast_core::FailureKind::Invalid, m),
                DefError::Other(m) => other(m),
            })?,
            None => {
                if let Some(bridge) = bridge {
                    remove_bridge(bridge).map_err(other)?;
                    remove_isolation_rules(bridge).map_err(other)?;
                }
            }
        }
        Ok(holdfast_core::Done::Ok)
    }

    /// Every user network defined on the host: the network side's relist
    /// of its definitions, for the core at start-up.
    pub fn found_definitions(&self) -> Vec<holdfast_core::FoundNetwork> {
        self.user_networks()
            .into_iter()
            .map(|def| holdfast_core::FoundNetwork {
                name: def.name.clone(),
                id: def.id.clone(),
                labels: def.labels.clone(),
                created_at: holdfast_rfc3339::parse_nanos(&def.created)
                    .and_then(|n| i64::try_from(n).ok())
                    .map_or(holdfast_core::WallTime::from_unix_nanos(0), |n| {
                        holdfast_core::WallTime::from_unix_nanos(n)
                    }),
                definition: definition_of(&def),
            })
            .collect()
    }
}

fn definition_of(def: &NetworkDef) -> holdfast_core::Definition {
    holdfast_core::Definition {
        subnet: def.subnet.clone(),
        gateway: def.gateway,
        bridge: def.bridge.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::Attachment;
    use holdfast_core::ContainerId;

    #[test]
    fn a_network_is_created_once_on_a_subnet_of_its_own() {
        let dir = tempfile::tempdir().expect("tempdir");
        let net = super::super::network_in(dir.path());
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
}
