//! A container's durable state: what is persisted, and what a restarted
//! daemon rebuilds from (plus a relist).

use crate::config::ContainerConfig;
use crate::health::HealthRecord;
use crate::ids::ContainerId;
use crate::signal::Signal;
use crate::time::WallTime;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Record {
    pub id: ContainerId,
    /// Without the leading `/` that the Docker API shows.
    pub name: String,
    /// Shared: it never changes after create, and every persist copies the record.
    pub config: Arc<ContainerConfig>,
    pub created_at: WallTime,
    pub presence: Presence,
    /// How many tasks were created for this container; names the current run.
    pub run: u64,
    /// The init pid of the current run, once known.
    pub pid: Option<u32>,
    pub started_at: Option<WallTime>,
    /// A time before which the current run's process cannot have exited:
    /// when our CreateTask for it was answered (or sent, for a task a relist
    /// found after the answer was lost). An exit report older than this is
    /// an earlier run's whose pid the kernel reused. Persisted so that a
    /// restarted daemon still knows; `None` when not known.
    #[serde(default)]
    pub began_at: Option<WallTime>,
    /// A StartTask was sent for the current run, and neither confirmed nor
    /// refused: it may have started even if no answer said so (the answer
    /// can be lost).
    #[serde(default)]
    pub start_sent: bool,
    /// The recorded exit of run `exit.run`. Written once per run, from evidence.
    pub exit: Option<ExitRecord>,
    /// Restarts made by the restart policy.
    pub restart_count: u32,
    pub intents: Intents,
    /// What may exist of the container's network attachment (its network
    /// namespace, address, veth, port mappings and NAT rules). Written
    /// before the attachment is made, so a crash at any point leaves a
    /// record that owns whatever was made.
    #[serde(default)]
    pub network: NetworkState,
    /// The networks it was connected to after its create (`docker network
    /// connect`), beyond its config's own, in the order connected. Each is
    /// an attachment of its own, owned the same way as `network`.
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
    /// The user disconnected it from the network its config names
    /// (`docker network disconnect`): its own attachment is then its
    /// network namespace alone (loopback and its hosts file), with no
    /// `eth0` and no published ports, and networks are reached through
    /// `endpoints` only (slot 0, `eth0`, included). Never set for a
    /// container on `host`, `none` or `container:`.
    #[serde(default)]
    pub own_disconnected: bool,
    /// What the setup of its own attachment gave it (while attached; `None`
    /// for a namespace with no interface).
    #[serde(default)]
    pub allocation: Option<Allocation>,
    /// The health check's last decision about a run (persisted with each
    /// probe result), so a restarted daemon goes on from it rather than
    /// from `starting`. `None` before the first result.
    #[serde(default)]
    pub health: Option<HealthRecord>,
    /// When the latest CreateTask was sent: a task a relist finds after its
    /// answer was lost (or after a crash) cannot have begun earlier (see
    /// `began_at`), even where it reuses the last run's pid.
    #[serde(default)]
    pub create_sent_at: Option<WallTime>,
    /// Its execs (`docker exec`): every one that may run, so that a
    /// restarted daemon learns how it ended, and the latest ended ones.
    #[serde(default)]
    pub execs: Vec<crate::exec::ExecRecord>,
    /// A mount of its snapshot for a copy (`docker cp` of a stopped
    /// container) may exist: written before the mount is made, cleared once
    /// it is unmounted, so a crash never leaves one behind.
    #[serde(default)]
    pub rootfs_mounted: bool,
}

impl Record {
    /// A record of container `id` with nothing done yet: no name, the
    /// default config, being created.
    pub fn new(id: ContainerId, created_at: WallTime) -> Record {
        Record {
            id,
            name: String::new(),
            config: Arc::new(ContainerConfig::default()),
            created_at,
            presence: Presence::Creating,
            run: 0,
            pid: None,
            started_at: None,
            began_at: None,
            start_sent: false,
            exit: None,
            restart_count: 0,
            intents: Intents::default(),
            network: NetworkState::Detached,
            endpoints: Vec::new(),
            own_disconnected: false,
            allocation: None,
            health: None,
            create_sent_at: None,
            execs: Vec::new(),
            rootfs_mounted: false,
        }
    }
}

/// A connection to one more bridge network, through an interface
/// `eth{slot}` in the container's network namespace. Slot 0 (`eth0`, with
/// the default route) is an endpoint only once the container was
/// disconnected from its own network (`Record::own_disconnected`): the
/// release of the `eth0` its own attachment made, or a network connected
/// after that.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Endpoint {
    /// The network's name, as the daemon resolved it.
    pub network: String,
    /// `--alias`: more names peers on that network find it by.
    pub aliases: Vec<String>,
    /// `--ip`: the address asked for on that network.
    pub ip: Option<String>,
    /// Names its interface (`eth1`, ...) and its IPAM entry: unique among
    /// the container's endpoints, and kept until the endpoint is forgotten,
    /// so a release after a crash finds what a setup made.
    pub slot: u8,
    /// The user wants it; `false`: disconnected, forgotten once released.
    pub wanted: bool,
    /// What may exist of it, as with `Record::network`.
    pub state: NetworkState,
    /// What its setup gave it (while attached).
    #[serde(default)]
    pub allocation: Option<Allocation>,
}

/// What a network setup gave a container on one network, as the setup's
/// answer said: recorded with the attachment, so `inspect`, `ps` and
/// `port` read the record, never the executor's files.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct Allocation {
    pub ip: Option<std::net::Ipv4Addr>,
    pub prefix_len: u8,
    pub gateway: Option<std::net::Ipv4Addr>,
    pub mac: Option<String>,
    /// dockerd's `EndpointID`: new for each setup of an interface.
    pub endpoint_id: String,
    /// Published ports, each with the host port it got.
    pub ports: Vec<crate::config::PortBinding>,
}

impl Endpoint {
    /// The interface inside the container's network namespace.
    pub fn ifname(&self) -> String {
        format!("eth{}", self.slot)
    }
}

/// The attachment's state, as far as the record can promise it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub enum NetworkState {
    /// Nothing of it exists.
    #[default]
    Detached,
    /// In doubt: a setup or a release was issued and not answered, so any
    /// part of it may exist. It is released (idempotent) before anything
    /// else is done, and never used by a task.
    Attaching,
    /// Set up completely; released once the task is gone and no start wants it.
    Attached,
}

/// Whether containerd has the container (not the task).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Presence {
    /// `CreateContainer` was issued and has not succeeded yet. A daemon that
    /// restarts and finds this rolls the create back.
    Creating,
    /// containerd has the container.
    Created,
    /// The create failed or was abandoned; whatever containerd may have must
    /// be deleted, then the record.
    Discarding,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ExitRecord {
    pub run: u64,
    pub exit_code: i32,
    pub finished_at: WallTime,
    pub oom_killed: bool,
    /// Set when the exit status is not known, e.g. a task that vanished.
    pub error: Option<String>,
}

/// What the user (or a restart policy) asked for and has not yet been carried
/// out. Persisted so that nothing asked for is lost across an outage or a
/// daemon restart.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct Intents {
    /// A task should be created and started (start, restart, policy restart).
    pub start: bool,
    /// Its anonymous volumes go with it once it is removed (`rm -v`).
    #[serde(default)]
    pub remove_volumes: bool,
    /// A freeze of ours for a commit may exist: thawed once the commit has
    /// read the changes, or by a restarted daemon (never left frozen).
    #[serde(default)]
    pub commit_thaw: bool,
    /// Renamed while attached: the hosts files of its peers on user
    /// networks still name it by its old name until refreshed.
    #[serde(default)]
    pub refresh_names: bool,
    /// Stop the running task; cleared when its exit is recorded.
    pub stop: Option<StopIntent>,
    /// Signals to deliver to the running task, in order.
    pub kills: Vec<Signal>,
    /// Remove the container (after killing it, for a forced remove).
    pub remove: bool,
    /// The next exit is the user's doing (a kill with SIGKILL or the stop
    /// signal, as dockerd decides): no policy restart after it.
    pub exit_on_next: bool,
    /// The restart policy wants a start once its backoff has passed.
    pub policy_restart: bool,
    /// The pending start is the restart policy's (shown as `restarting`
    /// until the run is up, as dockerd shows it; a refused one is tried
    /// again after a backoff). Persisted: a restarted daemon goes on with
    /// the policy's start as the policy's.
    #[serde(default)]
    pub policy_start: bool,
    /// The user stopped or killed this container (`unless-stopped` heeds it).
    pub user_stopped: bool,
    /// A freeze of ours (a user's pause, a commit's) went out after the
    /// last "stay down" kill was delivered: a freeze a relist shows may be
    /// that one (the user's latest wish), not someone else's that the kill
    /// must be thawed from. Persisted: a restarted daemon would otherwise
    /// thaw a user's pause (found by the properties).
    #[serde(default)]
    pub froze_since_kill: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct StopIntent {
    pub signal: Signal,
    pub grace: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_from_before_network_connect_still_loads() {
        let rec = Record {
            name: "web".into(),
            config: Arc::new(ContainerConfig::default()),
            presence: Presence::Created,
            run: 1,
            pid: Some(42),
            network: NetworkState::Attached,
            ..Record::new("c1".parse().expect("id"), WallTime::from_unix_nanos(1))
        };
        let mut old = serde_json::to_value(&rec).expect("serialise");
        let fields = old.as_object_mut().expect("an object");
        assert!(fields.remove("endpoints").is_some());
        assert!(fields.remove("own_disconnected").is_some());
        let loaded: Record = serde_json::from_value(old).expect("old record loads");
        assert_eq!(loaded, rec);
    }

    #[test]
    fn a_record_from_before_health_was_kept_still_loads() {
        let old = r#"{"id":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "name":"web","config":{"image":"busybox","entrypoint":null,"cmd":null,"env":[],
            "working_dir":null,"user":null,"hostname":null,"labels":{},"mounts":[],
            "read_only_rootfs":false,"memory_limit_bytes":null,"network":"None","tty":false,
            "stop_signal":null,"stop_timeout":null,"image_stop_signal":null,
            "restart_policy":"No","auto_remove":false},
            "created_at":5,"presence":"Created","run":1,"pid":42,"started_at":6,
            "exit":null,"restart_count":0,
            "intents":{"start":false,"stop":null,"kills":[],"remove":false,
            "exit_on_next":false,"policy_restart":false,"user_stopped":false}}"#;
        let rec: Record = serde_json::from_str(old).expect("old record loads");
        assert_eq!(rec.health, None);
        assert_eq!(rec.network, NetworkState::Detached);
    }
}
