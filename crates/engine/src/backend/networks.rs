//! `docker network`: the predefined `bridge`, `host` and `none`, and
//! user-defined bridge networks. The user networks are the core's records
//! (it decides that a name is free, that one is in use while any
//! container's record is on it, and when one is defined or removed); what
//! is on a network, with the addresses it got, is read from the core's
//! records of the containers. `connect` and `disconnect` are commands into
//! the core too; this backend resolves the network and checks what only
//! the network's definition can tell (an address in its subnet).

use crate::engine::EngineHandle;
use crate::network::{NetworkDef, NetworkRequest};
use crate::refusal::{internal, invalid};
use holdfast_core::{
    Allocation, Answer, Command, ContainerId, ErrorKind, NetworkMode, NetworkState, RequestError,
    ResourceState, Status,
};

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
/// it runs, and what its attachment there got, while attached.
type User = (String, ContainerId, String, bool, Option<Allocation>);

impl<'a> Networks<'a> {
    pub(crate) fn new(engine: &'a EngineHandle) -> Networks<'a> {
        Networks { engine }
    }

    /// The default bridge network's subnet, `a.b.c.d/len`.
    pub fn default_subnet(&self) -> String {
        self.engine.services.network.subnet().to_string()
    }

    /// Why a pod or container cannot be put on the default network now,
    /// `None` when it can.
    pub fn not_ready(&self) -> Option<String> {
        self.engine.services.network.not_ready()
    }

    /// Every network with what is on it: the bridge networks, then `host`
    /// and `none`.
    pub async fn list(&self) -> Result<Vec<NetworkDetails>, RequestError> {
        let (all, users) = self.all_and_users().await?;
        Ok(all.into_iter().map(|n| details(n, &users)).collect())
    }

    /// `docker network inspect`: by name, full id or unique id prefix.
    pub async fn inspect(&self, reference: &str) -> Result<NetworkDetails, RequestError> {
        let (all, users) = self.all_and_users().await?;
        Ok(details(find(&all, reference)?, &users))
    }

    /// `docker network create`: defined by the core's executor on the
    /// subnet given, or the first private /16 that neither a route of the
    /// host nor another network has.
    pub async fn create(&self, req: NetworkRequest) -> Result<NetworkDef, RequestError> {
        let command = Command::CreateNetwork {
            name: req.name.clone(),
            id: random_id()?,
            subnet: req.subnet,
            gateway: req.gateway,
            labels: req.labels,
            attachable: req.attachable,
        };
        super::volumes::done(self.engine.command(command).await)?;
        match self.inspect(&req.name).await?.network {
            Listed::Bridge(def) => Ok(def),
            Listed::Builtin(_) => Err(internal("a network made is no bridge network")),
        }
    }

    /// `docker network rm` of a user network no container is on (403 for a
    /// predefined one): one command of the core.
    pub async fn remove(&self, reference: &str) -> Result<(), RequestError> {
        let (all, _) = self.all_and_users().await?;
        let name = find(&all, reference)?.name().to_owned();
        let command = Command::RemoveNetwork { name };
        super::volumes::done(self.engine.command(command).await)
    }

    /// `docker network prune`: of the user networks `wanted` picks, those
    /// no container is on, removed as one decision of the core; the names
    /// of those removed.
    pub async fn prune(
        &self,
        wanted: impl Fn(&NetworkDef) -> bool,
    ) -> Result<Vec<String>, RequestError> {
        let (all, _) = self.all_and_users().await?;
        let names = all
            .into_iter()
            .filter_map(|n| match n {
                Listed::Bridge(d) if d.user_defined() && wanted(&d) => Some(d.name),
                _ => None,
            })
            .collect();
        match self.engine.command(Command::PruneNetworks { names }).await {
            Answer::Pruned(removed) => Ok(removed),
            Answer::Error(e) => Err(e),
            other => Err(internal(format!("unexpected answer to a prune: {other:?}"))),
        }
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
        let all = match self.all_and_users().await {
            Ok((all, _)) => all,
            Err(e) => return Answer::Error(e),
        };
        let def = match find(&all, reference) {
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
        let found = match self.all_and_users().await {
            Ok((all, _)) => find(&all, reference).map(|n| n.name().to_owned()),
            Err(e) => Err(e),
        };
        let network = match found {
            Ok(n) => n,
            Err(_) if force => reference.to_owned(),
            Err(e) => return Answer::Error(e),
        };
        let disconnect = move |id| Command::Disconnect { id, network };
        self.engine.container_command(container, disconnect).await
    }

    /// Every network (the default bridge, the user networks the core has
    /// defined, `host` and `none`), and the containers on each, from one
    /// read of the core.
    async fn all_and_users(&self) -> Result<(Vec<Listed>, Vec<User>), RequestError> {
        let default = self.engine.services.network.default_network();
        let default_name = default.as_ref().map(|d| d.name.clone());
        let (user_networks, users) = self
            .engine
            .read(move |v| {
                let networks: Vec<NetworkDef> = v
                    .core
                    .networks()
                    .filter(|n| n.state == ResourceState::Ready)
                    .filter_map(|n| {
                        let d = n.defined.as_ref()?;
                        Some(NetworkDef {
                            id: n.id.clone(),
                            name: n.name.clone(),
                            bridge: d.bridge.clone(),
                            subnet: d.subnet.clone(),
                            gateway: d.gateway,
                            created: holdfast_rfc3339::format_nanos_go(
                                n.created_at.as_unix_nanos(),
                            ),
                            labels: n.labels.clone(),
                            attachable: n.attachable,
                        })
                    })
                    .collect();
                let users: Vec<User> = v
                    .core
                    .containers()
                    .flat_map(|c| users_of(&c, default_name.as_deref()))
                    .collect();
                (networks, users)
            })
            .await?;
        let mut all: Vec<Listed> = default.into_iter().map(Listed::Bridge).collect();
        all.extend(user_networks.into_iter().map(Listed::Bridge));
        all.push(Listed::Builtin("host"));
        all.push(Listed::Builtin("none"));
        Ok((all, users))
    }
}

/// The networks a container is on (by name: its own network's, then those
/// it was connected to), with what each attachment got while attached.
/// Every container, running or not; an endpoint still being released
/// counts: the network is in use.
fn users_of(c: &holdfast_core::ContainerView<'_>, default: Option<&str>) -> Vec<User> {
    let r = c.record;
    let cfg = &r.config;
    let attached = |state: NetworkState, a: &Option<Allocation>| {
        (state == NetworkState::Attached)
            .then(|| a.clone())
            .flatten()
    };
    let own = match cfg.network {
        // Disconnected from it: on it no more.
        NetworkMode::Bridge if r.own_disconnected => None,
        NetworkMode::Bridge => cfg
            .network_name
            .clone()
            .or(default.map(str::to_owned))
            .map(|n| (n, attached(r.network, &r.allocation))),
        NetworkMode::Host => Some(("host".to_owned(), None)),
        NetworkMode::None => Some(("none".to_owned(), None)),
        NetworkMode::Container => None,
    };
    let running = c.status == Status::Running;
    own.into_iter()
        .chain(
            r.endpoints
                .iter()
                .map(|e| (e.network.clone(), attached(e.state, &e.allocation))),
        )
        .map(|(net, a)| (net, r.id.clone(), r.name.clone(), running, a))
        .collect()
}

/// By name, full id or unique id prefix.
fn find(all: &[Listed], reference: &str) -> Result<Listed, RequestError> {
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

/// What is on network `n`: on a bridge network, the containers attached
/// there now (dockerd's endpoints); on `host` and `none`, those running.
fn details(n: Listed, users: &[User]) -> NetworkDetails {
    let attached = users
        .iter()
        .filter(|(net, ..)| net == n.name())
        .filter(|(_, _, _, running, a)| match n {
            Listed::Bridge(_) => a.is_some(),
            Listed::Builtin(_) => *running,
        })
        .map(|(_, id, name, _, a)| Member {
            id: id.clone(),
            name: name.clone(),
            endpoint_id: a
                .as_ref()
                .map(|a| a.endpoint_id.clone())
                .unwrap_or_default(),
            mac: a.as_ref().and_then(|a| a.mac.clone()),
            ipv4: a
                .as_ref()
                .and_then(|a| a.ip.map(|ip| format!("{ip}/{}", a.prefix_len)))
                .unwrap_or_default(),
        })
        .collect();
    NetworkDetails {
        used: users.iter().any(|u| u.0 == n.name()),
        network: n,
        attached,
    }
}

/// A new network's id: 64 hex digits from 32 random bytes.
fn random_id() -> Result<String, RequestError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| internal(format!("no randomness for a network id: {e}")))?;
    Ok(hex::encode(bytes))
}

/// A fixed id for `host` and `none`.
fn builtin_id(name: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(format!("holdfast network {name}")))
}
