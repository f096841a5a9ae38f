//! User-defined bridge networks (`docker network create`): the core records
//! each, decides its name is free and that it is in use while any
//! container's record names it, and asks the network executor to define
//! it (a bridge on a subnet the executor chooses) or to remove it. As with
//! volumes: recorded before it is defined, marked before it is removed, so
//! a crash leaks no bridge and loses no removal; and a container is created
//! on, or connected to, a network only while it is defined, in the same
//! decision (no lock held across round trips).
//!
//! The default `bridge` network is the executor's own and always exists.

use crate::ids::{ContainerId, OpId, RequestId};
use crate::input::{Done, Failure, FailureKind};
use crate::time::WallTime;
use crate::volume::ResourceState;
use crate::{
    Answer, Core, ErrorKind, Map, NetworkMode, OpOwner, ResourceEventKind, TimerKind, error,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Names no user network may take (dockerd's predefined networks).
pub const PREDEFINED_NETWORKS: [&str; 3] = ["bridge", "host", "none"];

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct NetworkRecord {
    pub name: String,
    /// 64 hex digits, made by the caller.
    pub id: String,
    pub labels: BTreeMap<String, String>,
    pub created_at: WallTime,
    pub state: ResourceState,
    /// `--subnet` and `--gateway`, as asked.
    pub asked_subnet: Option<String>,
    pub asked_gateway: Option<String>,
    /// `--attachable`, as asked (a network found on the host without its
    /// record: not known, false).
    #[serde(default)]
    pub attachable: bool,
    /// What its definition gave it, once defined.
    pub defined: Option<Definition>,
}

/// What the executor gave a network when it defined it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Definition {
    /// `a.b.c.d/len`.
    pub subnet: String,
    pub gateway: std::net::Ipv4Addr,
    /// The Linux bridge.
    pub bridge: String,
}

/// A definition the executor found on disk at start-up: the network
/// side's relist of its definitions.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct FoundNetwork {
    pub name: String,
    pub id: String,
    pub labels: BTreeMap<String, String>,
    pub created_at: WallTime,
    pub definition: Definition,
}

#[derive(Debug)]
pub(crate) struct Network {
    pub(crate) rec: NetworkRecord,
    /// The call in flight, and whether it is a removal.
    pub(crate) in_flight: Option<(OpId, bool)>,
    pub(crate) retry_waiting: bool,
    pub(crate) attempts: u32,
    /// Its `create` event went out (or it was made before this start-up):
    /// only then is its removal a `destroy` (one whose making failed was
    /// never there for the user).
    pub(crate) announced: bool,
    pub(crate) requests: Vec<RequestId>,
}

impl Network {
    fn new(rec: NetworkRecord) -> Network {
        Network {
            announced: rec.state != ResourceState::Creating,
            rec,
            in_flight: None,
            retry_waiting: false,
            attempts: 0,
            requests: Vec::new(),
        }
    }
}

/// The user network a container's config or endpoints name, besides the
/// default one: where its own attachment and its endpoints are.
fn networks_named(c: &crate::container::Container) -> impl Iterator<Item = &str> {
    let own = (c.rec.config.network == NetworkMode::Bridge)
        .then(|| c.rec.config.network_name.as_deref())
        .flatten();
    own.into_iter()
        .chain(c.rec.endpoints.iter().map(|e| e.network.as_str()))
}

impl Core {
    /// One user network by name (being removed included, until it is gone).
    pub fn network(&self, name: &str) -> Option<&NetworkRecord> {
        self.networks.get(name).map(|n| &n.rec)
    }

    /// Every user network, by name.
    pub fn networks(&self) -> impl Iterator<Item = &NetworkRecord> {
        let mut all: Vec<&NetworkRecord> = self.networks.values().map(|n| &n.rec).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all.into_iter()
    }

    /// Every container record on the network `name` (its own network, or
    /// an endpoint, released or not): none may lose the network under it.
    pub fn network_users(&self, name: &str) -> Vec<ContainerId> {
        let mut users: Vec<ContainerId> = self
            .containers
            .values()
            .filter(|c| networks_named(c).any(|n| n == name))
            .map(|c| c.rec.id.clone())
            .collect();
        users.sort();
        users
    }

    /// Whether a container may be put on network `name` now: the default
    /// one, or a user network that is defined.
    pub(crate) fn network_usable(&self, name: &str) -> Result<(), (ErrorKind, String)> {
        if name == PREDEFINED_NETWORKS[0] {
            return Ok(());
        }
        match self.networks.get(name).map(|n| n.rec.state) {
            Some(ResourceState::Ready) => Ok(()),
            Some(ResourceState::Creating) => Err((
                ErrorKind::Conflict,
                format!("network {name} is being created; try again"),
            )),
            Some(ResourceState::Removing) => Err((
                ErrorKind::Conflict,
                format!("network {name} is being removed"),
            )),
            None => Err((ErrorKind::NotFound, format!("network {name} not found"))),
        }
    }

    /// `docker network create`: defined by the executor (on a subnet it
    /// chooses, unless one was asked), answered once defined.
    pub(crate) fn create_network(&mut self, req: RequestId, rec: NetworkRecord) {
        let name = rec.name.clone();
        if PREDEFINED_NETWORKS.contains(&name.as_str()) || self.networks.contains_key(&name) {
            let message = format!("network with name {name} already exists");
            return self
                .out
                .answer_now(req, error(ErrorKind::Conflict, message));
        }
        let rec = NetworkRecord {
            state: ResourceState::Creating,
            defined: None,
            created_at: self.out.now.wall,
            ..rec
        };
        // Owned before it is made.
        self.out.persist_network(&rec);
        let mut n = Network::new(rec);
        n.requests.push(req);
        self.networks.insert(name.clone(), n);
        self.out.request_network.insert(req, name.clone());
        self.reconcile_network(&name);
    }

    /// `docker network rm`: refused while any container is on it.
    pub(crate) fn remove_network(&mut self, req: RequestId, name: &str) {
        if PREDEFINED_NETWORKS.contains(&name) {
            let message = format!("{name} is a pre-defined network and cannot be removed");
            return self
                .out
                .answer_now(req, error(ErrorKind::Forbidden, message));
        }
        let Some(n) = self.networks.get(name) else {
            let message = format!("network {name} not found");
            return self
                .out
                .answer_now(req, error(ErrorKind::NotFound, message));
        };
        let id = n.rec.id.clone();
        if n.rec.state != ResourceState::Removing
            && let Some(user) = self.network_users(name).first()
        {
            let message = format!(
                "error while removing network: network {name} id {id} has active endpoints (container {user} is on it)"
            );
            return self
                .out
                .answer_now(req, error(ErrorKind::Conflict, message));
        }
        self.mark_network_removing(name);
        if let Some(n) = self.networks.get_mut(name) {
            n.requests.push(req);
            self.out.request_network.insert(req, name.to_owned());
        }
        self.reconcile_network(name);
    }

    /// `docker network prune`: of the networks named (chosen by the API by
    /// their labels), those no container is on, at once.
    pub(crate) fn prune_networks(&mut self, req: RequestId, names: Vec<String>) {
        let mut removed: Vec<String> = names
            .into_iter()
            .filter(|n| {
                self.networks
                    .get(n)
                    .is_some_and(|x| x.rec.state == ResourceState::Ready)
                    && self.network_users(n).is_empty()
            })
            .collect();
        removed.sort();
        removed.dedup();
        for name in &removed {
            self.mark_network_removing(name);
            self.reconcile_network(name);
        }
        let waiting = removed
            .iter()
            .filter(|n| self.networks.contains_key(*n))
            .cloned()
            .collect();
        self.await_prune(req, true, removed, waiting);
    }

    fn mark_network_removing(&mut self, name: &str) {
        let Some(n) = self.networks.get_mut(name) else {
            return;
        };
        if n.rec.state != ResourceState::Removing {
            n.rec.state = ResourceState::Removing;
            self.out.persist_network(&n.rec);
        }
    }

    pub(crate) fn reconcile_network(&mut self, name: &str) {
        let Some(n) = self.networks.get_mut(name) else {
            return;
        };
        if n.in_flight.is_some() || n.retry_waiting {
            return;
        }
        let call = match n.rec.state {
            ResourceState::Creating => crate::NetworkCall::Define {
                name: name.to_owned(),
                id: n.rec.id.clone(),
                subnet: n.rec.asked_subnet.clone(),
                gateway: n.rec.asked_gateway.clone(),
                labels: n.rec.labels.clone(),
                created_at: n.rec.created_at,
            },
            ResourceState::Removing => crate::NetworkCall::Undefine {
                name: name.to_owned(),
                id: n.rec.id.clone(),
                bridge: n.rec.defined.as_ref().map(|d| d.bridge.clone()),
            },
            ResourceState::Ready => return,
        };
        let removal = matches!(call, crate::NetworkCall::Undefine { .. });
        let op = self
            .out
            .network_call(OpOwner::Network(name.to_owned()), call);
        n.in_flight = Some((op, removal));
    }

    pub(crate) fn network_result(&mut self, op: OpId, name: &str, result: Result<Done, Failure>) {
        let Some(n) = self.networks.get_mut(name) else {
            return;
        };
        let Some((in_flight, removal)) = n.in_flight else {
            return;
        };
        if in_flight != op {
            return;
        }
        n.in_flight = None;
        if !removal && n.rec.state == ResourceState::Removing {
            return self.reconcile_network(name);
        }
        match (n.rec.state, result) {
            (ResourceState::Creating, Ok(done)) => {
                n.attempts = 0;
                n.rec.state = ResourceState::Ready;
                if let Done::Defined(definition) = done {
                    n.rec.defined = Some(definition);
                }
                self.out.persist_network(&n.rec);
                if !std::mem::replace(&mut n.announced, true) {
                    self.out
                        .publish_resource(ResourceEventKind::NetworkCreated {
                            name: name.to_owned(),
                            id: n.rec.id.clone(),
                        });
                }
                for req in std::mem::take(&mut n.requests) {
                    self.out.request_network.remove(&req);
                    self.out.answer_now(req, Answer::Done);
                }
            }
            (ResourceState::Removing, Ok(_))
            | (
                ResourceState::Removing,
                Err(Failure {
                    kind: FailureKind::NotFound,
                    ..
                }),
            ) => {
                let Some(n) = self.networks.remove(name) else {
                    return;
                };
                self.out.unpersist_network(name);
                self.out
                    .timers
                    .cancel(&TimerKind::NetworkRetry(name.to_owned()));
                if n.announced {
                    self.out
                        .publish_resource(ResourceEventKind::NetworkDestroyed {
                            name: name.to_owned(),
                            id: n.rec.id.clone(),
                        });
                }
                for req in n.requests {
                    self.out.request_network.remove(&req);
                    self.out.answer_now(req, Answer::Done);
                }
                self.prune_progress(true, name);
            }
            // Refused (a subnet that overlaps another, none free, a bad
            // gateway): the create fails, and whatever part of it was made
            // goes.
            (ResourceState::Creating, Err(f))
                if !matches!(f.kind, FailureKind::Unavailable | FailureKind::Deadline) =>
            {
                let kind = match f.kind {
                    FailureKind::Invalid => ErrorKind::Invalid,
                    FailureKind::AlreadyExists => ErrorKind::Conflict,
                    _ => ErrorKind::Internal,
                };
                for req in std::mem::take(&mut n.requests) {
                    self.out.request_network.remove(&req);
                    self.out.answer_now(req, error(kind, f.message.clone()));
                }
                self.mark_network_removing(name);
                self.reconcile_network(name);
            }
            (_, Err(f)) => {
                let what = if removal { "remove" } else { "create" };
                let message = format!(
                    "{what} network {name}: {}: it is tried again until it is done",
                    f.message
                );
                for req in std::mem::take(&mut n.requests) {
                    self.out.request_network.remove(&req);
                    self.out
                        .answer_now(req, error(ErrorKind::Internal, message.clone()));
                }
                let attempts = n.attempts;
                n.attempts = n.attempts.saturating_add(1);
                n.retry_waiting = true;
                let delay = self.backoff(attempts);
                self.out.timers.set(
                    TimerKind::NetworkRetry(name.to_owned()),
                    self.out.now.at + delay,
                );
            }
            (ResourceState::Ready, Ok(_)) => {}
        }
    }

    pub(crate) fn network_retry_due(&mut self, name: &str) {
        if let Some(n) = self.networks.get_mut(name) {
            n.retry_waiting = false;
        }
        self.reconcile_network(name);
    }

    pub(crate) fn restore_networks(&mut self, records: Vec<NetworkRecord>) {
        for rec in records {
            if !self.networks.contains_key(&rec.name) {
                self.networks.insert(rec.name.clone(), Network::new(rec));
            }
        }
    }

    /// Definitions the executor found on disk: one no record owns is
    /// adopted (a network from a holdfastd that did not record them); one
    /// recorded as defined whose definition is gone is defined again.
    pub(crate) fn networks_found(&mut self, found: Vec<FoundNetwork>) {
        let on_disk: Map<String, FoundNetwork> =
            found.into_iter().map(|f| (f.name.clone(), f)).collect();
        for (name, f) in &on_disk {
            if self.networks.contains_key(name) || PREDEFINED_NETWORKS.contains(&name.as_str()) {
                continue;
            }
            let rec = NetworkRecord {
                name: name.clone(),
                id: f.id.clone(),
                labels: f.labels.clone(),
                created_at: f.created_at,
                state: ResourceState::Ready,
                asked_subnet: None,
                asked_gateway: None,
                attachable: false,
                defined: Some(f.definition.clone()),
            };
            self.out.persist_network(&rec);
            self.networks.insert(name.clone(), Network::new(rec));
        }
        for n in self.networks.values_mut() {
            if n.rec.state == ResourceState::Ready && !on_disk.contains_key(&n.rec.name) {
                n.rec.state = ResourceState::Creating;
                self.out.persist_network(&n.rec);
            }
        }
        self.reconcile_networks();
    }

    pub(crate) fn reconcile_networks(&mut self) {
        let names: Vec<String> = self.networks.keys().cloned().collect();
        for name in names {
            self.reconcile_network(&name);
        }
    }
}
