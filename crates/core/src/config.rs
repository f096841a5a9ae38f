//! What a container is made from ([`ContainerConfig`], persisted in its
//! record) and how the core itself is tuned ([`CoreConfig`]).
//!
//! The core reads only the lifecycle fields (stop signal and timeout, restart
//! policy, auto-remove); the rest is carried for the adapter, which builds the
//! OCI runtime spec from it, and for the API, which shows it in `inspect`.

use crate::signal::Signal;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// A container as the user asked for it, with the image facts the daemon
/// resolved at create time (so a later image change cannot alter it).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct ContainerConfig {
    /// The image reference as given (`busybox`, `busybox:latest`).
    pub image: String,
    /// The image's id (its config digest) when the container was created,
    /// for `inspect` and `ps`; the core does not read it.
    #[serde(default)]
    pub image_id: Option<String>,
    /// Overrides the image's entrypoint when set.
    pub entrypoint: Option<Vec<String>>,
    /// Overrides the image's cmd when set.
    pub cmd: Option<Vec<String>>,
    /// `KEY=VALUE`, added to (and overriding) the image's env.
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    /// `uid[:gid]` or a name from the image's `/etc/passwd`.
    pub user: Option<String>,
    pub hostname: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub mounts: Vec<BindMount>,
    pub read_only_rootfs: bool,
    pub memory_limit_bytes: Option<u64>,
    pub network: NetworkMode,
    /// With `NetworkMode::Bridge`: the user-defined network (`--network
    /// NAME`) the network step attaches to; `None` is the default `bridge`.
    #[serde(default)]
    pub network_name: Option<String>,
    /// `--network-alias`: more names peers on a user network find it by.
    #[serde(default)]
    pub network_aliases: Vec<String>,
    /// `--ip`: the address asked for on a user network.
    #[serde(default)]
    pub ip_address: Option<String>,
    /// `--mac-address`: the interface's MAC asked for (bridge networks).
    #[serde(default)]
    pub mac_address: Option<String>,
    /// With `NetworkMode::Container`: whose network namespace it joins.
    #[serde(default)]
    pub network_container: Option<SharedNetwork>,
    /// `-p`/`-P`: host ports published to the container's ports (bridge
    /// networks only). A host port of 0 is chosen when the network is set up.
    #[serde(default)]
    pub ports: Vec<PortBinding>,
    /// `-P` (`HostConfig.PublishAllPorts`), shown back by inspect.
    #[serde(default)]
    pub publish_all: bool,
    /// `--add-host name:ip`, `--dns`, `--dns-search`, `--dns-option`: the
    /// bridge network's `/etc/hosts` and `/etc/resolv.conf`, as given.
    #[serde(default)]
    pub extra_hosts: Vec<String>,
    #[serde(default)]
    pub dns: Vec<String>,
    #[serde(default)]
    pub dns_search: Vec<String>,
    #[serde(default)]
    pub dns_options: Vec<String>,
    pub tty: bool,
    /// `-i`: the container's stdin stays open for attaches to write to.
    #[serde(default)]
    pub open_stdin: bool,
    /// With `open_stdin`: the first attach that ends its input closes the
    /// container's stdin (the CLI sets it for `docker run -i`).
    #[serde(default)]
    pub stdin_once: bool,
    /// The container's own stop signal (`--stop-signal`).
    pub stop_signal: Option<Signal>,
    /// The container's own grace period (`--stop-timeout`).
    pub stop_timeout: Option<Duration>,
    /// The image's `StopSignal`, resolved at create time.
    pub image_stop_signal: Option<Signal>,
    pub restart_policy: RestartPolicy,
    /// `--rm`: remove the container once its exit is recorded.
    pub auto_remove: bool,
    /// `--log-opt max-size` and `max-file`: the logger rotates its json-file
    /// log at this size, keeping this many files (defaults: 20 MiB, 5).
    #[serde(default)]
    pub log_max_size_bytes: Option<u64>,
    #[serde(default)]
    pub log_max_files: Option<u32>,
    /// `--log-driver`: where the container's output goes.
    #[serde(default)]
    pub log_driver: LogDriver,
    /// `EXPOSE`d ports (`80/tcp`): the ones given (`--expose`, and `-p`'s
    /// container ports as the CLI sends them) and the image's, as dockerd
    /// keeps them in `Config.ExposedPorts`. Shown only; `-P` publishes them.
    #[serde(default)]
    pub exposed_ports: Vec<String>,
    /// `--privileged`, `--cap-add`, `--cap-drop`, `--device`, `--group-add`.
    #[serde(default)]
    pub privileges: Privileges,
    /// Cgroup limits and rlimits (`--pids-limit`, `--cpus`, `--ulimit`, ...).
    #[serde(default)]
    pub resources: Resources,
    /// `--sysctl`: namespaced kernel parameters, set in the container.
    #[serde(default)]
    pub sysctls: BTreeMap<String, String>,
    /// `--tmpfs /path[:options]`: path to its mount options (may be empty).
    #[serde(default)]
    pub tmpfs: BTreeMap<String, String>,
    /// `--mount`: binds with their options and tmpfs mounts, as given.
    #[serde(default)]
    pub mount_specs: Vec<MountSpec>,
    /// `--pid`, `--uts`, `--ipc`, `--cgroupns`.
    #[serde(default)]
    pub namespaces: Namespaces,
    /// `--cgroup-parent`: the cgroup the container's own is created under.
    #[serde(default)]
    pub cgroup_parent: Option<String>,
    /// `--init`: a small init is pid 1 and runs the command as its child.
    #[serde(default)]
    pub init: bool,
    /// The health check (`--health-*` merged over the image's `HEALTHCHECK`).
    #[serde(default)]
    pub healthcheck: Option<crate::health::HealthConfig>,
    /// What its process may do beyond its capabilities (seccomp, masked
    /// paths, no_new_privs); the defaults are dockerd's.
    #[serde(default)]
    pub security: Security,
    /// Made through the CRI: a pod's sandbox or a container of a pod, with
    /// what kubelet names it by. `None` for what the Docker API made.
    #[serde(default)]
    pub pod: Option<PodMember>,
    /// What goes into the runtime spec as the client gave it, read by no
    /// decision.
    #[serde(default)]
    pub spec_extras: SpecExtras,
    /// What the client chose where holdfast has nothing else to choose
    /// from, kept only to be shown back as it was given.
    #[serde(default)]
    pub as_given: AsGiven,
}

/// The Docker API's `HostConfig.Runtime` and `HostConfig.Isolation`, each
/// accepted only where it names what holdfast runs anyway (runc; Linux's
/// one isolation): `inspect` shows what the client sent, as dockerd does.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AsGiven {
    /// `runc`, or the name of containerd's shim for it.
    pub runtime: Option<String>,
    /// `default`.
    pub isolation: Option<String>,
}

/// Parts of the runtime spec given as they are (the Docker API's
/// `Domainname`, `HostConfig.Annotations` and `HostConfig.ConsoleSize`).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SpecExtras {
    /// The UTS namespace's NIS domain name.
    pub domainname: Option<String>,
    /// The spec's annotations, for the runtime and its hooks.
    pub annotations: BTreeMap<String, String>,
    /// The terminal's size (rows, columns) from its first moment, before
    /// any resize: a TTY's programs read it at start.
    pub console_size: Option<(u16, u16)>,
}

/// The confinement of a container's process, where it differs from the
/// default (dockerd's for a container that is not privileged: its seccomp
/// profile, its masked and read-only paths of `/proc` and `/sys`).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Security {
    /// No seccomp filter (`seccomp=unconfined`, the CRI's `Unconfined`).
    pub seccomp_unconfined: bool,
    /// The process cannot gain privileges (setuid, file capabilities).
    pub no_new_privileges: bool,
    /// Instead of the default masked paths, these (may be empty).
    pub masked_paths: Option<Vec<String>>,
    /// Instead of the default read-only paths, these (may be empty).
    pub readonly_paths: Option<Vec<String>>,
}

/// What the CRI made a container for, kept in its record so that every
/// CRI answer (status, lists, their filters) is read from the core.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct PodMember {
    pub role: PodRole,
    /// The pod's `metadata` (name, uid, namespace) as kubelet gave it.
    pub pod_name: String,
    pub pod_uid: String,
    pub pod_namespace: String,
    /// The sandbox's or the container's `metadata.attempt`.
    pub attempt: u32,
    /// The CRI's annotations (the labels are the container's own).
    pub annotations: BTreeMap<String, String>,
    /// The sandbox's `log_directory`, or the container's log file in it.
    pub log_path: Option<String>,
    /// The image as kubelet asked for it (a container's `image.image`).
    pub image_ref: Option<String>,
}

/// A pod's sandbox (the container holding its namespaces) or one of the
/// pod's containers.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum PodRole {
    Sandbox,
    Container {
        /// The sandbox's full id.
        sandbox: String,
        /// The container's `metadata.name`.
        name: String,
    },
}

/// Where a container's stdout and stderr go.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub enum LogDriver {
    /// A json-file log that `docker logs` reads (rotated per `log_max_*`).
    #[default]
    JsonFile,
    /// dockerd's `local` driver: kept as a json-file log with its defaults.
    Local,
    /// Discarded; `docker logs` has nothing to read.
    None,
}

impl LogDriver {
    pub fn as_str(self) -> &'static str {
        match self {
            LogDriver::JsonFile => "json-file",
            LogDriver::Local => "local",
            LogDriver::None => "none",
        }
    }
}

/// What the container's processes may do beyond docker's defaults.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Privileges {
    /// All capabilities, all host devices, no seccomp filter, no masked paths.
    pub privileged: bool,
    /// Capability names as given (`NET_ADMIN`, `CAP_NET_ADMIN`, `ALL`).
    pub cap_add: Vec<String>,
    pub cap_drop: Vec<String>,
    pub devices: Vec<DeviceMapping>,
    /// Supplementary groups of the container's process: numbers or names
    /// from the image's `/etc/group`.
    pub group_add: Vec<String>,
    /// `--device-cgroup-rule`s: devices it may make or open beyond those
    /// it has.
    pub device_cgroup_rules: Vec<DeviceCgroupRule>,
}

/// `--device-cgroup-rule 'c 1:3 rwm'`: a kind of device (`a` all, `b`
/// block, `c` character), its major and minor numbers (`None`: any), and
/// what may be done with it (some of `r`, `w`, `m`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct DeviceCgroupRule {
    pub kind: char,
    pub major: Option<i64>,
    pub minor: Option<i64>,
    pub access: String,
}

/// `--device host[:container[:permissions]]`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct DeviceMapping {
    pub path_on_host: String,
    pub path_in_container: String,
    /// Some of `r`, `w`, `m`.
    pub cgroup_permissions: String,
}

/// Limits, as docker's HostConfig names them; `None` leaves the default.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Resources {
    /// `--pids-limit`; -1 or 0 is unlimited.
    pub pids_limit: Option<i64>,
    pub cpu_shares: Option<u64>,
    /// Microseconds per `cpu_period_us`; -1 is unlimited.
    pub cpu_quota_us: Option<i64>,
    pub cpu_period_us: Option<u64>,
    /// `--cpus` in billionths of a CPU: becomes a quota over a 100 ms period.
    pub nano_cpus: Option<u64>,
    pub cpuset_cpus: Option<String>,
    pub cpuset_mems: Option<String>,
    pub cpu_realtime_period_us: Option<u64>,
    pub cpu_realtime_runtime_us: Option<i64>,
    /// Memory plus swap; -1 is unlimited swap.
    pub memory_swap_bytes: Option<i64>,
    pub memory_reservation_bytes: Option<u64>,
    /// How readily the kernel swaps the container's anonymous pages out
    /// (0-100; cgroup v1 only).
    #[serde(default)]
    pub memory_swappiness: Option<u64>,
    pub ulimits: Vec<Ulimit>,
    /// Size of `/dev/shm` (default 64 MiB).
    pub shm_size_bytes: Option<u64>,
    /// The process's OOM score adjustment (kubelet's QoS: -997 to 1000).
    #[serde(default)]
    pub oom_score_adj: Option<i32>,
    /// cgroup v2 files written as given (kubelet's `memory.oom.group`).
    #[serde(default)]
    pub unified: BTreeMap<String, String>,
}

/// `docker update` of the resources a running task can change: each field
/// given replaces the container's setting (as dockerd does).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct ResourceUpdate {
    pub memory_limit_bytes: Option<u64>,
    /// Memory plus swap; -1 is unlimited swap.
    pub memory_swap_bytes: Option<i64>,
    pub nano_cpus: Option<u64>,
    pub cpu_shares: Option<u64>,
}

impl ResourceUpdate {
    /// `config` with this update applied.
    pub fn apply(&self, config: &ContainerConfig) -> ContainerConfig {
        let mut c = config.clone();
        if let Some(m) = self.memory_limit_bytes {
            c.memory_limit_bytes = Some(m);
        }
        if let Some(s) = self.memory_swap_bytes {
            c.resources.memory_swap_bytes = Some(s);
        }
        if let Some(n) = self.nano_cpus {
            c.resources.nano_cpus = Some(n);
        }
        if let Some(s) = self.cpu_shares {
            c.resources.cpu_shares = Some(s);
        }
        c
    }
}

/// `--ulimit name=soft[:hard]`, names as docker spells them (`nofile`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Ulimit {
    pub name: String,
    pub soft: i64,
    pub hard: i64,
}

/// A `--mount` the user gave.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum MountSpec {
    Bind {
        source: String,
        target: String,
        read_only: bool,
        /// `rprivate` (the default), `private`, `rshared`, `shared`,
        /// `rslave` or `slave`; `None` when not given.
        propagation: Option<String>,
    },
    Tmpfs {
        target: String,
        size_bytes: Option<u64>,
        /// File mode bits of the mount's root (default 1777).
        mode: Option<u32>,
    },
}

/// Which namespaces a container gets of its own and which it shares.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Namespaces {
    pub pid: NamespaceMode,
    pub uts: NamespaceMode,
    pub ipc: NamespaceMode,
    pub cgroup: CgroupnsMode,
}

#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub enum NamespaceMode {
    /// A new namespace of its own (`ipc`: dockerd's `private`).
    #[default]
    Private,
    /// `--ipc shareable`: its own, which other containers may join.
    Shareable,
    /// The host's.
    Host,
    /// Another container's: `id` is its full id, `pid` its init pid when
    /// this container was created, whose `/proc/<pid>/ns/<kind>` it joins.
    Container { id: String, pid: u32 },
}

impl NamespaceMode {
    /// The mode as docker shows it (`""` for a pid or uts namespace of its own).
    pub fn docker_name(&self, private: &str) -> String {
        match self {
            NamespaceMode::Private => private.to_owned(),
            NamespaceMode::Shareable => "shareable".to_owned(),
            NamespaceMode::Host => "host".to_owned(),
            NamespaceMode::Container { id, .. } => format!("container:{id}"),
        }
    }
}

/// `--cgroupns`. When none is given the daemon picks dockerd's default:
/// `Host` on cgroup v1, `Private` on v2.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub enum CgroupnsMode {
    #[default]
    Host,
    Private,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct BindMount {
    /// The host path; empty for a volume until the daemon resolves it.
    pub source: String,
    pub destination: String,
    pub read_only: bool,
    /// The volume whose data directory `source` is: a name, or empty for an
    /// anonymous volume the daemon names at create.
    #[serde(default)]
    pub volume: Option<String>,
    /// The daemon named the volume for this container (`-v /path`, an
    /// image's `VOLUME`): made as an anonymous volume, and removed with the
    /// container on `rm -v` and `run --rm`.
    #[serde(default)]
    pub anonymous: bool,
}

/// Networking beyond these is a non-goal for now (see DESIGN.md).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub enum NetworkMode {
    /// A private network namespace with only loopback.
    #[default]
    None,
    /// The host's network namespace.
    Host,
    /// A network namespace of its own, attached to a bridge network (a
    /// Linux bridge with outbound NAT) by the network step: the default
    /// `bridge`, or the user-defined one `ContainerConfig::network_name`
    /// names.
    Bridge,
    /// `--network container:<ref>`: another container's network namespace
    /// (`ContainerConfig::network_container`), joined when its task is
    /// created; nothing of its own to attach or release.
    Container,
}

/// The container whose network namespace a `container:` one joins.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct SharedNetwork {
    /// Its full id.
    pub id: String,
    /// Its init pid when this container was created: `/proc/<pid>/ns/net`
    /// is joined when it has no namespace of an attachment.
    pub pid: u32,
}

impl NetworkMode {
    /// Whether the container is attached by a network step of its own
    /// (`NetworkCall::Setup`) before its task is created.
    pub fn needs_attachment(self) -> bool {
        self == NetworkMode::Bridge
    }
}

/// One published port: `host_ip:host_port -> container_port/protocol`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct PortBinding {
    pub container_port: u16,
    /// `tcp` or `udp`.
    pub protocol: String,
    /// Empty: every host address.
    pub host_ip: String,
    /// 0: chosen at setup.
    pub host_port: u16,
    /// Added by `-P` for an exposed port, not given by the user: inspect's
    /// `HostConfig.PortBindings` shows only the given ones, as dockerd's.
    #[serde(default)]
    pub by_publish_all: bool,
}

/// Docker's restart policies. A policy restart happens only after an exit was
/// observed, never after a disconnect, and never after a user stop.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub enum RestartPolicy {
    #[default]
    No,
    Always,
    UnlessStopped,
    /// Restart after a non-zero exit, at most `max_retries` times (0: no limit).
    OnFailure {
        max_retries: u32,
    },
}

impl RestartPolicy {
    /// Whether an exit with `exit_code`, after `restart_count` policy restarts,
    /// calls for another one. A user's stop is decided before this (it always
    /// prevents a restart); `manually_stopped` says the user stopped or killed
    /// the container, which only `unless-stopped` heeds (as dockerd does).
    pub fn wants_restart(self, exit_code: i32, restart_count: u32, manually_stopped: bool) -> bool {
        match self {
            RestartPolicy::No => false,
            RestartPolicy::Always => true,
            RestartPolicy::UnlessStopped => !manually_stopped,
            RestartPolicy::OnFailure { max_retries } => {
                exit_code != 0 && (max_retries == 0 || restart_count < max_retries)
            }
        }
    }
}

/// Tuning of the core. Defaults follow dockerd where it has a number.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CoreConfig {
    /// Grace period of a stop when neither the request nor the container names one.
    pub default_stop_timeout: Duration,
    /// How long after SIGKILL (or after a grace period could not start because
    /// containerd was away) a stop request is answered with an error if no exit
    /// was observed. The stop itself stays pending.
    pub stop_answer_slack: Duration,
    /// Bound on answering any other request (kill, remove, create; a start
    /// still wanted is answered only by its outcome, and a create whose
    /// call containerd is still carrying out is given `create_run_on` more).
    pub request_answer_bound: Duration,
    /// Reconnect backoff: first retry after `reconnect_initial`, doubling up to
    /// `reconnect_max`, with ±`reconnect_jitter_percent` from the seeded RNG.
    pub reconnect_initial: Duration,
    pub reconnect_max: Duration,
    pub reconnect_jitter_percent: u32,
    /// A connection that stayed healthy this long resets the reconnect backoff.
    pub reconnect_reset_after: Duration,
    /// While connected, relist this often anyway: a safety net that converges
    /// to containerd's truth even if an event went missing on a live stream.
    /// `None` relists only after (re)connecting and when a call surprises.
    pub relist_interval: Option<Duration>,
    /// Backoff of a retried action on one container.
    pub retry_initial: Duration,
    pub retry_max: Duration,
    /// Attempts of an action that failed for a reason other than unavailability
    /// before the intent is dropped with an error answer.
    pub retry_attempts_max: u32,
    /// How long a create's calls may take (the adapter's deadline of
    /// them, which run on past the ordinary call deadline). A task create
    /// whose answer was lost may still be carried out by containerd
    /// within it: a refusal of another create as "already exists" is that
    /// create under way, past it a leftover. A container's create still
    /// with containerd at its answer bound is given this long again.
    pub create_run_on: Duration,
    /// Restart-policy backoff: `restart_initial` doubling up to `restart_max`,
    /// reset when a run lasted at least `restart_reset_after` (dockerd: 100 ms,
    /// 1 min, 10 s).
    pub restart_initial: Duration,
    pub restart_max: Duration,
    pub restart_reset_after: Duration,
    /// A known-wrong behaviour switched on, to prove the simulator and the
    /// property tests catch it. Exists only with the `deliberate-bugs` feature.
    #[cfg(feature = "deliberate-bugs")]
    pub deliberate_bug: Option<DeliberateBug>,
}

/// Bug classes other engines shipped, kept to show that our tests find them.
#[cfg(feature = "deliberate-bugs")]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DeliberateBug {
    /// Take a broken event stream as the exit of every running container
    /// (pouch PR #1407).
    StreamErrorIsExit,
    /// Let a late or duplicate exit overwrite the recorded one.
    LateExitOverwrites,
    /// After reconnecting, trust the stream and skip the relist.
    SkipRelistAfterReconnect,
    /// Send SIGKILL at half the grace period.
    KillBeforeStopDeadline,
    /// `volume prune` removes volumes whatever names them.
    PruneIgnoresUsers,
    /// A commit's freeze undone only by the process that made it (as a
    /// deferred unpause in an API handler does): a crash in between leaves
    /// the container frozen.
    CommitThawNotRecorded,
    /// An exec's exit taken as its container's.
    ExecExitIsContainerExit,
    /// The address a container first got kept across its re-attachments,
    /// not the one each setup answered.
    StaleAllocation,
    /// A run found exited at start-up (it ended while holdfastd was down)
    /// taken as stopped by its user: its restart policy is not followed
    /// (pouch #2519).
    ExitFoundAtStartupIsUserStop,
    /// An exec's exit taken, like an exit of another pid of the container,
    /// as the end of the run an OOM event was about: on the path with no
    /// cgroup OOM count, the container's exit is then recorded without
    /// `OOMKilled`.
    ExecExitErasesOom,
    /// Losing containerd is taken as a reason to kill: every running
    /// container is sent SIGKILL once it is back.
    KillOnDisconnect,
    /// A stop's grace period ends and no SIGKILL follows: the stop hangs
    /// for as long as the process ignores its signal.
    StopNeverEscalates,
    /// An exit stamped before the current run began (an earlier process
    /// whose pid the kernel gave again) taken as the current run's.
    ReusedPidExitAccepted,
    /// An OOM event published before the current run began (an earlier
    /// run's, delivered late) counted for the current run.
    EarlierRunOomCounted,
    /// A task a complete relist no longer lists stays running in the
    /// record: its exit, lost with its shim, is never recorded.
    VanishedTaskStaysRunning,
    /// An exit recorded at the time it was learned, not the time the
    /// process ended (`FinishedAt` wrong after an outage).
    FinishedAtIsNow,
    /// Exit status 137 taken as an OOM kill without an OOM event, where
    /// no cgroup count says.
    Exit137IsOom,
    /// A user's kill still undelivered when the run ended is delivered to
    /// the next run.
    KillsOutliveRun,
    /// A kill that means "stay down" sent to a frozen task, and no thaw
    /// after it: under a v1 freezer it never takes effect.
    PausedKillNeverThawed,
    /// A create cut by a crash kept (shown as created) instead of rolled
    /// back.
    HalfCreatedKeptAfterCrash,
    /// A network attachment cut by a crash (its setup's outcome unknown)
    /// taken as never made: what it allocated is never released.
    AttachingForgottenAfterCrash,
    /// A relist listing the current run's task stopped is not taken as
    /// its exit: the run stays running in the record.
    StoppedListingIgnored,
    /// A start event of the current run, delivered after its exit was
    /// recorded, takes the container back to running.
    StartEventResurrects,
    /// At start-up, a container whose policy would restart it after its
    /// last exit is restarted, although its user stopped it.
    StoppedRestartedAtStartup,
    /// A network release that fails is given up: what the attachment
    /// holds (its address, its veth) is never released.
    TeardownGivenUp,
    /// `rm -v` (and auto-remove) leaves the container's anonymous volumes.
    AnonymousVolumesLeft,
    /// The Docker API changes (stops, removes, renames ...) a pod's
    /// container, which kubelet owns through the CRI.
    DockerApiChangesPods,
    /// A pod's sandbox created without its start (kubelet's
    /// RunPodSandbox carried out as a create, then a start of its own):
    /// a crash between the two leaves a sandbox made and never started.
    SandboxStartedApart,
    /// A task create refused as existing is retried for ever, also once
    /// relists keep finding no task and no create of ours can be under
    /// way: a leftover of containerd's keeps the container from ever
    /// starting, its start never answered.
    LeftoverRetriedForEver,
}

#[cfg(feature = "deliberate-bugs")]
impl DeliberateBug {
    /// Every deliberate bug, in the order they were added.
    pub const ALL: [DeliberateBug; 29] = [
        DeliberateBug::StreamErrorIsExit,
        DeliberateBug::LateExitOverwrites,
        DeliberateBug::SkipRelistAfterReconnect,
        DeliberateBug::KillBeforeStopDeadline,
        DeliberateBug::PruneIgnoresUsers,
        DeliberateBug::CommitThawNotRecorded,
        DeliberateBug::ExecExitIsContainerExit,
        DeliberateBug::StaleAllocation,
        DeliberateBug::ExitFoundAtStartupIsUserStop,
        DeliberateBug::ExecExitErasesOom,
        DeliberateBug::KillOnDisconnect,
        DeliberateBug::StopNeverEscalates,
        DeliberateBug::ReusedPidExitAccepted,
        DeliberateBug::EarlierRunOomCounted,
        DeliberateBug::VanishedTaskStaysRunning,
        DeliberateBug::FinishedAtIsNow,
        DeliberateBug::Exit137IsOom,
        DeliberateBug::KillsOutliveRun,
        DeliberateBug::PausedKillNeverThawed,
        DeliberateBug::HalfCreatedKeptAfterCrash,
        DeliberateBug::AttachingForgottenAfterCrash,
        DeliberateBug::StoppedListingIgnored,
        DeliberateBug::StartEventResurrects,
        DeliberateBug::StoppedRestartedAtStartup,
        DeliberateBug::TeardownGivenUp,
        DeliberateBug::AnonymousVolumesLeft,
        DeliberateBug::DockerApiChangesPods,
        DeliberateBug::SandboxStartedApart,
        DeliberateBug::LeftoverRetriedForEver,
    ];

    /// The bug its name (as `{:?}` spells it) names.
    pub fn from_name(name: &str) -> Option<DeliberateBug> {
        Self::ALL.into_iter().find(|b| format!("{b:?}") == name)
    }
}

impl CoreConfig {
    /// Whether `bug` is switched on; always false without the feature.
    #[cfg(feature = "deliberate-bugs")]
    pub(crate) fn has_bug(&self, bug: DeliberateBug) -> bool {
        self.deliberate_bug == Some(bug)
    }
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            default_stop_timeout: Duration::from_secs(10),
            stop_answer_slack: Duration::from_secs(10),
            request_answer_bound: Duration::from_secs(30),
            reconnect_initial: Duration::from_millis(50),
            reconnect_max: Duration::from_secs(2),
            reconnect_jitter_percent: 20,
            reconnect_reset_after: Duration::from_secs(30),
            relist_interval: Some(Duration::from_secs(300)),
            retry_initial: Duration::from_millis(100),
            retry_max: Duration::from_secs(5),
            retry_attempts_max: 5,
            create_run_on: Duration::from_secs(300),
            restart_initial: Duration::from_millis(100),
            restart_max: Duration::from_secs(60),
            restart_reset_after: Duration::from_secs(10),
            #[cfg(feature = "deliberate-bugs")]
            deliberate_bug: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_from_before_the_create_options_still_loads() {
        let old = r#"{"image":"busybox","entrypoint":null,"cmd":null,"env":[],
            "working_dir":null,"user":null,"hostname":null,"labels":{},"mounts":[],
            "read_only_rootfs":false,"memory_limit_bytes":null,"network":"None","tty":false,
            "stop_signal":null,"stop_timeout":null,"image_stop_signal":null,
            "restart_policy":"No","auto_remove":false}"#;
        let c: ContainerConfig = serde_json::from_str(old).expect("old record loads");
        assert_eq!(c.log_driver, LogDriver::JsonFile);
        assert_eq!(c.privileges, Privileges::default());
        assert_eq!(c.namespaces, Namespaces::default());
        assert!(!c.init);
    }

    #[test]
    fn restart_policy_decisions() {
        assert!(!RestartPolicy::No.wants_restart(1, 0, false));
        assert!(RestartPolicy::Always.wants_restart(0, 50, false));
        assert!(RestartPolicy::Always.wants_restart(1, 0, true));
        assert!(!RestartPolicy::UnlessStopped.wants_restart(1, 0, true));
        let on_failure = RestartPolicy::OnFailure { max_retries: 2 };
        assert!(!on_failure.wants_restart(0, 0, false));
        assert!(on_failure.wants_restart(3, 1, false));
        assert!(!on_failure.wants_restart(3, 2, false));
        assert!(RestartPolicy::OnFailure { max_retries: 0 }.wants_restart(3, 99, false));
    }
}
