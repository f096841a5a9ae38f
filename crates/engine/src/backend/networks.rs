//! `docker network`: the predefined `bridge`, `host` and `none`, and
//! user-defined bridge networks ([`crate::network`]). A network that any
//! container's record names (running or not) is in use: it cannot be
//! removed or pruned. `connect` and `disconnect` are commands into the
//! core (it decides when an endpoint is made and released); this backend
//! resolves the network and the container and checks what only the
//! network can tell.

use crate::engine::EngineHandle;
use crate::network::{NetworkDef, NetworkRequest};
use crate::refusal::{conflict, internal, invalid};
use holdfast_core::{Answer, Command, ContainerId, ErrorKind, NetworkMode, RequestError, Status};

/// The networks backend: see the module docs.
#[derive(Debug)]
pub struct Networks<'a> {
    engine: &'a EngineHandle,
}

/// A network as the API lists it: a bridge network, or `host` / `none`.
#[derive(Clone, Debug)]
pub enum Listed {
    Bridge(NetworkDef),
    /// `host` or `none`.
    Builtin(&'static str),
}

impl Listed {
    pub fn name(&self) -> &str {
        match self {
            Listed::Bridge(d) => &d.name,
            Listed::Builtin(n) => n,
        }
    }

    pub fn id(&self) -> String {
        match self {
            Listed::Bridge(d) => d.id.clone(),
            Listed::Builtin(n) => builtin_id(n),
        }
    }
}

/// A network with what is on it.
#[derive(Clone, Debug)]
pub struct NetworkDetails {
    pub network: Listed,
    /// Whether any container's record names it (running or not).
    pub used: bool,
    /// The containers attached now (dockerd's endpoints); on `host` and
    /// `none`, those running there.
    pub attached: Vec<Member>,
}

/// A container attached to a network, as `network inspect` shows it.
#[derive(Clone, Debug)]
pub struct Member {
    pub id: ContainerId,
    pub name: String,
    pub endpoint_id: String,
    pub mac: Option<String>,
    /// `a.b.c.d/len`, empty when it has no address there.
    pub ipv4: String,
}

/// A container on a network: the network's name, its id and name, whether
/// it runs, and the slot of its interface there (0: its own network's).
type User = (String, ContainerId, String, bool, u8);

impl<'a> Networks<'a> {
    pub(crate) fn new(engine: &'a EngineHandle) -> Networks<'a> {
        Networks { engine }
    }

    /// Every network with what is on it: the bridge networks, then `host`
    /// and `none`.
    pub async fn list(&self) -> Result<Vec<NetworkDetails>, RequestError> {
        let users = self.users().await?;
        Ok(self
            .all()
            .into_iter()
            .map(|n| self.details(n, &users))
            .collect())
    }

    /// `docker network inspect`: by name, full id or unique id prefix.
    pub async fn inspect(&self, reference: &str) -> Result<NetworkDetails, RequestError> {
        let n = self.find(reference)?;
        let users = self.users().await?;
        Ok(self.details(n, &users))
    }

    /// `docker network create`: the subnet given, or the first private /16
    /// that neither a route of the host nor another network has.
    pub async fn create(&self, mut req: NetworkRequest) -> Result<NetworkDef, RequestError> {
        req.created = holdfast_rfc3339::format_nanos_go(crate::engine::wall_now().as_unix_nanos());
        let network = self.engine.services.network.clone();
        let def = tokio::task::spawn_blocking(move || network.create(req))
            .await
            .map_err(|e| internal(format!("network create: {e}")))??;
        Ok(def)
    }

    /// `docker network rm` of a user network no container names (403 for a
    /// predefined one).
    pub async fn remove(&self, reference: &str) -> Result<(), RequestError> {
        let def = match self.find(reference)? {
            Listed::Bridge(d) if d.user_defined() => d,
            n => {
                return Err(RequestError::new(
                    ErrorKind::Forbidden,
                    format!(
                        "{} is a pre-defined network and cannot be removed",
                        n.name()
                    ),
                ));
            }
        };
        let _alone = self.engine.services.network.registry().write().await;
        let users = self.users().await?;
        self.remove_def(def, &users).await
    }

    /// `docker network prune`: every user network `wanted` picks that no
    /// container names; the names of those removed.
    pub async fn prune(
        &self,
        wanted: impl Fn(&NetworkDef) -> bool,
    ) -> Result<Vec<String>, RequestError> {
        let network = &self.engine.services.network;
        let _alone = network.registry().write().await;
        let users = self.users().await?;
        let mut deleted = Vec::new();
        for def in network.user_networks() {
            if !wanted(&def) || users.iter().any(|(net, ..)| *net == def.name) {
                continue;
            }
            let name = def.name.clone();
            match self.remove_def(def, &users).await {
                Ok(()) => deleted.push(name),
                // An attachment still on it (a release not done yet): kept.
                Err(e) if e.kind == ErrorKind::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    /// `docker network connect [--alias A] [--ip IP] NET CTR`: made at the
    /// next start, or at once while it runs (answered once made).
    pub async fn connect(
        &self,
        reference: &str,
        container: &str,
        aliases: Vec<String>,
        ip: Option<String>,
    ) -> Answer {
        let invalid = |message: &str| Answer::Error(invalid(message));
        let def = match self.find(reference) {
            Ok(Listed::Bridge(d)) => d,
            Ok(Listed::Builtin("host")) => {
                return invalid(
                    "container cannot be disconnected from host network or connected to host network",
                );
            }
            Ok(Listed::Builtin(_)) => {
                return invalid(
                    "container cannot be connected to multiple networks with one of the networks in private (none) mode",
                );
            }
            Err(e) => return Answer::Error(e),
        };
        if !def.user_defined() && (ip.is_some() || !aliases.is_empty()) {
            return invalid(
                "user specified IP address and network-scoped aliases are supported on user defined networks only",
            );
        }
        if let Some(ip) = &ip
            && !ip.parse().is_ok_and(|ip| def.may_give(ip))
        {
            return invalid(&format!(
                "Invalid address {ip}: It does not belong to any of this network's subnets ({} on {}, gateway {})",
                def.subnet, def.name, def.gateway
            ));
        }
        // Held until the core has recorded it: a removal of the network
        // checks its users after, or before.
        let _shared = self.engine.services.network.registry().read().await;
        let connect = move |id| Command::Connect {
            id,
            network: def.name,
            aliases,
            ip,
        };
        self.engine.container_command(container, connect).await
    }

    /// `docker network disconnect [-f] NET CTR`. With `force`, a network
    /// that no longer exists is taken by name.
    pub async fn disconnect(&self, reference: &str, container: &str, force: bool) -> Answer {
        let network = match self.find(reference) {
            Ok(n) => n.name().to_owned(),
            Err(_) if force => reference.to_owned(),
            Err(e) => return Answer::Error(e),
        };
        let disconnect = move |id| Command::Disconnect { id, network };
        self.engine.container_command(container, disconnect).await
    }

    fn all(&self) -> Vec<Listed> {
        let mut out: Vec<Listed> = self
            .engine
            .services
            .network
            .networks()
            .into_iter()
            .map(Listed::Bridge)
            .collect();
        out.push(Listed::Builtin("host"));
        out.push(Listed::Builtin("none"));
        out
    }

    /// By name, full id or unique id prefix.
    fn find(&self, reference: &str) -> Result<Listed, RequestError> {
        let all = self.all();
        if let Some(n) = all
            .iter()
            .find(|n| n.name() == reference || n.id() == reference)
        {
            return Ok(n.clone());
        }
        let mut by_prefix = all
            .iter()
            .filter(|n| !reference.is_empty() && n.id().starts_with(reference));
        match (by_prefix.next(), by_prefix.next()) {
            (Some(n), None) => Ok(n.clone()),
            (Some(_), Some(_)) => Err(invalid(format!(
                "network {reference} is ambiguous: more than one network's id starts with it"
            ))),
            _ => Err(RequestError::new(
                ErrorKind::NotFound,
                format!("network {reference} not found"),
            )),
        }
    }

    /// The networks each container is on (by name: its own network's, then
    /// those it was connected to), with its name: every container, running
    /// or not. An endpoint still being released counts: the network is in
    /// use.
    async fn users(&self) -> Result<Vec<User>, RequestError> {
        let default = self
            .engine
            .services
            .network
            .default_network()
            .map(|d| d.name);
        let users = self
            .engine
            .read(move |v| {
                v.core
                    .containers()
                    .flat_map(|c| {
                        let cfg = &c.record.config;
                        let own = match cfg.network {
                            // Disconnected from it: on it no more.
                            NetworkMode::Bridge if c.record.own_disconnected => None,
                            NetworkMode::Bridge => cfg.network_name.clone().or(default.clone()),
                            NetworkMode::Host => Some("host".to_owned()),
                            NetworkMode::None => Some("none".to_owned()),
                            NetworkMode::Container => None,
                        };
                        let running = c.status == Status::Running;
                        let (id, name) = (&c.record.id, &c.record.name);
                        let endpoints = c
                            .record
                            .endpoints
                            .iter()
                            .map(|e| (e.network.clone(), e.slot));
                        own.map(|n| (n, 0))
                            .into_iter()
                            .chain(endpoints)
                            .map(|(net, slot)| (net, id.clone(), name.clone(), running, slot))
                            .collect::<Vec<User>>()
                    })
                    .collect()
            })
            .await?;
        Ok(users)
    }

    fn details(&self, n: Listed, users: &[User]) -> NetworkDetails {
        let mut attached = Vec::new();
        for (_, id, name, running, slot) in users.iter().filter(|(net, ..)| net == n.name()) {
            let att = self.engine.services.network.attachment_of(id, *slot).filter(
                |a| matches!(&n, Listed::Bridge(d) if a.network.as_ref().is_some_and(|x| x.id == d.id)),
            );
            let shown = match n {
                Listed::Bridge(_) => att.is_some(),
                Listed::Builtin(_) => *running,
            };
            if !shown {
                continue;
            }
            attached.push(Member {
                id: id.clone(),
                name: name.clone(),
                endpoint_id: att
                    .as_ref()
                    .map(|a| a.endpoint_id.clone())
                    .unwrap_or_default(),
                mac: att.as_ref().and_then(|a| a.mac.clone()),
                ipv4: att
                    .as_ref()
                    .and_then(|a| a.ip.map(|ip| format!("{ip}/{}", a.prefix_len)))
                    .unwrap_or_default(),
            });
        }
        NetworkDetails {
            used: users.iter().any(|u| u.0 == n.name()),
            network: n,
            attached,
        }
    }

    /// Removes a user network no container names.
    async fn remove_def(&self, def: NetworkDef, users: &[User]) -> Result<(), RequestError> {
        if let Some((_, id, ..)) = users.iter().find(|(net, ..)| *net == def.name) {
            return Err(conflict(format!(
                "error while removing network: network {} id {} has active endpoints (container {id} is on it)",
                def.name, def.id
            )));
        }
        let network = self.engine.services.network.clone();
        tokio::task::spawn_blocking(move || network.remove(&def))
            .await
            .map_err(|e| internal(format!("network remove: {e}")))??;
        Ok(())
    }
}

/// A fixed id for `host` and `none`.
fn builtin_id(name: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(format!("holdfast network {name}")))
}
