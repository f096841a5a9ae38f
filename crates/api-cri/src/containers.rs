//! A pod's containers: `CreateContainer` (in the sandbox's network, IPC
//! and UTS namespaces, and its PID namespace when the pod shares one),
//! `StartContainer`, `StopContainer`, `RemoveContainer`, `ListContainers`,
//! `ContainerStatus`. Each is one command or one read of the core.

use crate::Cri;
use crate::names::{checked, container_name};
use crate::pods::{apparmor_supported, labels_match, ns, run_as, seccomp_unconfined, to_map};
use crate::status::{create_status, invalid, status, unsupported};
use holdfast_core::{
    Answer, BindMount, Command, ContainerConfig, DeviceMapping, NamespaceMode, NetworkMode,
    PodMember, PodRole, ResourceUpdate, Security, SharedNetwork, Status as Run,
};
use holdfast_engine::backend::containers::{NewContainer, Snapshot};
use k8s_cri::v1 as cri;
use std::time::Duration;
use tonic::Status;

impl Cri {
    pub(crate) async fn create_container(
        &self,
        r: cri::CreateContainerRequest,
    ) -> Result<cri::CreateContainerResponse, Status> {
        let sandbox = self.sandbox(&r.pod_sandbox_id).await?.ok_or_else(|| {
            Status::not_found(format!("pod sandbox {:?} not found", r.pod_sandbox_id))
        })?;
        let config = r
            .config
            .ok_or_else(|| invalid("config", "a container config is required"))?;
        let asked = config
            .image
            .as_ref()
            .map(|i| i.image.clone())
            .filter(|i| !i.is_empty())
            .ok_or_else(|| invalid("config.image.image", "must not be empty"))?;
        // kubelet names the image by what PullImage answered (its id) or
        // as the pod spec says: either way, one of the store's names.
        let image = self.engine.images().find(&asked).await.map_err(status)?;
        let image_name = image
            .names
            .first()
            .cloned()
            .ok_or_else(|| Status::not_found(format!("image {asked:?} has no name")))?;
        let (name, container) = container_config(config, &sandbox, image_name, asked)?;
        Ok(cri::CreateContainerResponse {
            container_id: self.create_named(name, container).await?.to_string(),
        })
    }

    pub(crate) async fn start_container(&self, id: &str) -> Result<(), Status> {
        let c = self.member(id).await?.ok_or_else(|| not_found(id))?;
        match self
            .engine
            .command(Command::Start {
                id: c.record.id.clone(),
            })
            .await
        {
            Answer::Error(e) => Err(status(e)),
            Answer::NotModified => Err(Status::failed_precondition(format!(
                "container {} is already running",
                c.record.id
            ))),
            _ => Ok(()),
        }
    }

    /// The stop signal (the image's, or SIGTERM), then SIGKILL after
    /// `timeout` seconds. Stopping what is stopped or gone succeeds.
    pub(crate) async fn stop_container(&self, id: &str, timeout: i64) -> Result<(), Status> {
        let Some(c) = self.member(id).await? else {
            return Ok(());
        };
        let grace = Duration::from_secs(u64::try_from(timeout).unwrap_or(0));
        self.stop(c.record.id.as_str(), grace).await
    }

    pub(crate) async fn remove_container(&self, id: &str) -> Result<(), Status> {
        let Some(c) = self.member(id).await? else {
            return Ok(());
        };
        self.remove(c.record.id.as_str()).await
    }

    pub(crate) async fn list_containers(
        &self,
        filter: Option<cri::ContainerFilter>,
    ) -> Result<Vec<cri::Container>, Status> {
        let filter = filter.unwrap_or_default();
        let all = self.engine.containers().snapshots().await.map_err(status)?;
        Ok(all
            .iter()
            .filter_map(|s| Some((s, member_of(s)?)))
            .filter(|(s, _)| filter.id.is_empty() || s.record.id.as_str().starts_with(&filter.id))
            .filter(|(_, (_, sandbox, _))| {
                filter.pod_sandbox_id.is_empty() || sandbox.starts_with(&filter.pod_sandbox_id)
            })
            .filter(|(s, _)| filter.state.is_none_or(|f| f.state == container_state(s)))
            .filter(|(s, _)| labels_match(&filter.label_selector, &s.record.config.labels))
            .map(|(s, (pod, sandbox, name))| cri::Container {
                id: s.record.id.to_string(),
                pod_sandbox_id: sandbox.to_owned(),
                metadata: Some(cri::ContainerMetadata {
                    name: name.to_owned(),
                    attempt: pod.attempt,
                }),
                image: Some(image_spec(pod, s)),
                image_ref: image_id(s),
                state: container_state(s),
                created_at: s.record.created_at.as_unix_nanos(),
                labels: to_map(&s.record.config.labels),
                annotations: to_map(&pod.annotations),
                image_id: image_id(s),
            })
            .collect())
    }

    pub(crate) async fn container_status(&self, id: &str) -> Result<cri::ContainerStatus, Status> {
        let s = self.member(id).await?.ok_or_else(|| not_found(id))?;
        let (pod, _, name) = member_of(&s).ok_or_else(|| not_found(id))?;
        let exit = s.record.exit.as_ref().filter(|_| s.status == Run::Exited);
        let (reason, message) = match exit {
            Some(e) if e.oom_killed => ("OOMKilled", e.error.clone().unwrap_or_default()),
            Some(e) if e.exit_code == 0 && e.error.is_none() => ("Completed", String::new()),
            Some(e) => ("Error", e.error.clone().unwrap_or_default()),
            None => ("", String::new()),
        };
        let config = &s.record.config;
        Ok(cri::ContainerStatus {
            id: s.record.id.to_string(),
            metadata: Some(cri::ContainerMetadata {
                name: name.to_owned(),
                attempt: pod.attempt,
            }),
            state: container_state(&s),
            created_at: s.record.created_at.as_unix_nanos(),
            started_at: s.record.started_at.map_or(0, |t| t.as_unix_nanos()),
            finished_at: exit.map_or(0, |e| e.finished_at.as_unix_nanos()),
            exit_code: exit.map_or(0, |e| e.exit_code),
            image: Some(image_spec(pod, &s)),
            image_ref: image_id(&s),
            reason: reason.to_owned(),
            message,
            labels: to_map(&config.labels),
            annotations: to_map(&pod.annotations),
            mounts: config
                .mounts
                .iter()
                .filter(|m| m.volume.is_none())
                .map(|m| cri::Mount {
                    container_path: m.destination.clone(),
                    host_path: m.source.clone(),
                    readonly: m.read_only,
                    ..cri::Mount::default()
                })
                .collect(),
            log_path: pod.log_path.clone().unwrap_or_default(),
            resources: None,
            image_id: image_id(&s),
            user: None,
        })
    }

    /// New limits for the container's cgroup (and its later runs), through
    /// the core as `docker update` goes. What the update cannot carry is
    /// refused by name.
    pub(crate) async fn update_container_resources(
        &self,
        id: &str,
        linux: Option<cri::LinuxContainerResources>,
        windows: bool,
    ) -> Result<(), Status> {
        if windows {
            return Err(unsupported("windows", "holdfast runs Linux containers"));
        }
        let c = self.member(id).await?.ok_or_else(|| not_found(id))?;
        let Some(r) = linux else {
            return Ok(()); // nothing asked
        };
        let update = resource_update(r, &c.record.config.resources)?;
        let id = c.record.id.clone();
        match self
            .engine
            .command(Command::UpdateResources { id, update })
            .await
        {
            Answer::Error(e) => Err(status(e)),
            _ => Ok(()),
        }
    }

    /// kubelet renamed the container's log away (its rotation): the
    /// logger, which checks the path before each record, starts a new file
    /// there with the next line. Refused unless the container runs, as
    /// there is then no logger to reopen anything.
    pub(crate) async fn reopen_container_log(&self, id: &str) -> Result<(), Status> {
        let c = self.member(id).await?.ok_or_else(|| not_found(id))?;
        if c.status != Run::Running {
            return Err(Status::failed_precondition(format!(
                "container {} is not running",
                c.record.id
            )));
        }
        // The new file is there when this answers, also for a container
        // that writes nothing for a while (kubelet reads it at once); the
        // logger moves to it before its next line.
        if let Some(path) = member_of(&c).and_then(|(pod, _, _)| pod.log_path.clone()) {
            use std::os::unix::fs::OpenOptionsExt as _;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o640)
                .open(&path)
                .map_err(|e| Status::internal(format!("reopen {path}: {e}")))?;
        }
        Ok(())
    }

    /// The full id of the pod's container `id` names, `None` when there
    /// is none.
    pub(crate) async fn member_id(&self, id: &str) -> Result<Option<String>, Status> {
        Ok(self.member(id).await?.map(|s| s.record.id.to_string()))
    }

    /// Makes the container `config` describes under `name` (the engine
    /// completes it from its image and the host, the core records it).
    pub(crate) async fn create_named(
        &self,
        name: String,
        config: ContainerConfig,
    ) -> Result<holdfast_core::ContainerId, Status> {
        let new = NewContainer {
            config,
            warnings: Vec::new(),
            cgroupns_defaulted: true,
            publish_all: false,
            network_defaulted: false,
            platform: None,
            name: Some(name),
        };
        let created = self.engine.containers().create(new).await;
        Ok(created.map_err(create_status)?.id)
    }

    /// The pod's container `id` names, `None` when there is none.
    pub(crate) async fn member(&self, id: &str) -> Result<Option<Snapshot>, Status> {
        if id.is_empty() {
            return Err(invalid("container_id", "must not be empty"));
        }
        match self.engine.containers().snapshot(id).await {
            Ok(s) if member_of(&s).is_some() => Ok(Some(s)),
            Ok(_) => Ok(None),
            // A prefix that names more than one is no answer of "gone".
            Err(e) if e.message.starts_with("multiple IDs") => {
                Err(Status::invalid_argument(e.message))
            }
            Err(e) if e.kind == holdfast_core::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(status(e)),
        }
    }
}

fn not_found(id: &str) -> Status {
    Status::not_found(format!("container {id:?} not found"))
}

/// The pod, the sandbox's id and the container's name, for a container
/// of a pod.
pub(crate) fn member_of(s: &Snapshot) -> Option<(&PodMember, &str, &str)> {
    let pod = s.record.config.pod.as_ref()?;
    match &pod.role {
        PodRole::Container { sandbox, name } => Some((pod, sandbox.as_str(), name.as_str())),
        PodRole::Sandbox => None,
    }
}

fn container_state(s: &Snapshot) -> i32 {
    use cri::ContainerState as S;
    (match s.status {
        Run::Created => S::ContainerCreated,
        Run::Running | Run::Restarting => S::ContainerRunning,
        Run::Exited => S::ContainerExited,
        Run::Removing => S::ContainerUnknown,
    }) as i32
}

fn image_spec(pod: &PodMember, s: &Snapshot) -> cri::ImageSpec {
    cri::ImageSpec {
        image: pod
            .image_ref
            .clone()
            .unwrap_or_else(|| s.record.config.image.clone()),
        ..cri::ImageSpec::default()
    }
}

fn image_id(s: &Snapshot) -> String {
    s.record.config.image_id.clone().unwrap_or_default()
}

/// The container's docker name and config, from kubelet's.
pub(crate) fn container_config(
    c: cri::ContainerConfig,
    sandbox: &Snapshot,
    image: String,
    asked: String,
) -> Result<(String, ContainerConfig), Status> {
    let meta = c
        .metadata
        .ok_or_else(|| invalid("config.metadata", "is required"))?;
    let name = checked("config.metadata.name", &meta.name)?.to_owned();
    let Some(pod) = sandbox.record.config.pod.as_ref() else {
        return Err(Status::not_found("the sandbox is not a pod's"));
    };
    if c.windows.is_some() {
        return Err(unsupported(
            "config.windows",
            "holdfast runs Linux containers",
        ));
    }
    if !c.cdi_devices.is_empty() {
        return Err(unsupported("config.cdi_devices", "CDI devices"));
    }
    let sandbox_id = sandbox.record.id.to_string();
    let sandbox_pid = sandbox.running_pid();
    let join = || NamespaceMode::Container {
        id: sandbox_id.clone(),
        pid: sandbox_pid,
    };
    let shared = &sandbox.record.config;
    let mut config = ContainerConfig {
        image,
        entrypoint: (!c.command.is_empty()).then_some(c.command),
        cmd: (!c.args.is_empty()).then_some(c.args),
        env: c
            .envs
            .into_iter()
            .map(|kv| format!("{}={}", kv.key, kv.value))
            .collect(),
        working_dir: (!c.working_dir.is_empty()).then_some(c.working_dir),
        labels: c.labels.into_iter().collect(),
        tty: c.tty,
        open_stdin: c.stdin,
        stdin_once: c.stdin_once,
        network: NetworkMode::Container,
        network_container: Some(SharedNetwork {
            id: sandbox_id.clone(),
            pid: sandbox_pid,
        }),
        cgroup_parent: shared.cgroup_parent.clone(),
        ..ContainerConfig::default()
    };
    config.namespaces.ipc = match shared.namespaces.ipc {
        NamespaceMode::Host => NamespaceMode::Host,
        _ => join(),
    };
    config.namespaces.uts = match shared.namespaces.uts {
        NamespaceMode::Host => NamespaceMode::Host,
        _ => join(),
    };
    for (i, m) in c.mounts.iter().enumerate() {
        config.mounts.push(mount(i, m)?);
    }
    for (i, d) in c.devices.iter().enumerate() {
        if d.host_path.is_empty() || d.container_path.is_empty() {
            return Err(invalid(
                &format!("config.devices[{i}]"),
                "host_path and container_path are required",
            ));
        }
        config.privileges.devices.push(DeviceMapping {
            path_on_host: d.host_path.clone(),
            path_in_container: d.container_path.clone(),
            cgroup_permissions: if d.permissions.is_empty() {
                "rwm".to_owned()
            } else {
                d.permissions.clone()
            },
        });
    }
    let linux = c.linux.unwrap_or_default();
    if let Some(r) = linux.resources {
        resources(&mut config, r)?;
    }
    let security = linux.security_context.unwrap_or_default();
    let options = security.namespace_options.clone().unwrap_or_default();
    config.namespaces.pid = match options.pid {
        ns::POD => match shared.namespaces.pid {
            NamespaceMode::Host => NamespaceMode::Host,
            _ => join(),
        },
        ns::CONTAINER => NamespaceMode::Private,
        ns::NODE => NamespaceMode::Host,
        _ => {
            return Err(unsupported(
                "config.linux.security_context.namespace_options.pid",
                "only POD, CONTAINER and NODE",
            ));
        }
    };
    container_security(&mut config, security)?;
    let log_path = match (pod.log_path.as_deref(), c.log_path.as_str()) {
        (_, "") => None,
        (Some(dir), file) => Some(format!("{}/{file}", dir.trim_end_matches('/'))),
        (None, file) => Some(file.to_owned()),
    };
    let docker_name = container_name(
        &name,
        &pod.pod_name,
        &pod.pod_namespace,
        &pod.pod_uid,
        meta.attempt,
    );
    config.pod = Some(PodMember {
        role: PodRole::Container {
            sandbox: sandbox_id,
            name,
        },
        pod_name: pod.pod_name.clone(),
        pod_uid: pod.pod_uid.clone(),
        pod_namespace: pod.pod_namespace.clone(),
        attempt: meta.attempt,
        annotations: c.annotations.into_iter().collect(),
        log_path,
        image_ref: Some(asked),
    });
    Ok((docker_name, config))
}

fn mount(i: usize, m: &cri::Mount) -> Result<BindMount, Status> {
    let field = format!("config.mounts[{i}]");
    if m.container_path.is_empty() || !m.container_path.starts_with('/') {
        return Err(invalid(
            &format!("{field}.container_path"),
            "must be an absolute path",
        ));
    }
    if m.host_path.is_empty() || !m.host_path.starts_with('/') {
        return Err(invalid(
            &format!("{field}.host_path"),
            "must be an absolute path",
        ));
    }
    if m.propagation != 0 {
        return Err(unsupported(
            &format!("{field}.propagation"),
            "only PROPAGATION_PRIVATE",
        ));
    }
    if m.selinux_relabel
        || m.recursive_read_only
        || !m.uid_mappings.is_empty()
        || !m.gid_mappings.is_empty()
        || m.image.is_some()
    {
        return Err(unsupported(
            &field,
            "SELinux relabels, recursive read-only mounts, id-mapped mounts and image volumes",
        ));
    }
    Ok(BindMount {
        source: m.host_path.clone(),
        destination: m.container_path.clone(),
        read_only: m.readonly,
        volume: None,
        anonymous: false,
    })
}

fn resources(config: &mut ContainerConfig, r: cri::LinuxContainerResources) -> Result<(), Status> {
    const FIELD: &str = "config.linux.resources";
    check_hugepages(FIELD, &r)?;
    config.resources.unified = unified(FIELD, &r)?;
    config.resources.oom_score_adj = oom_score_adj(FIELD, r.oom_score_adj)?;
    config.memory_limit_bytes = positive(FIELD, "memory_limit_in_bytes", r.memory_limit_in_bytes)?;
    let res = &mut config.resources;
    res.cpu_shares = positive(FIELD, "cpu_shares", r.cpu_shares)?;
    res.cpu_period_us = positive(FIELD, "cpu_period", r.cpu_period)?;
    res.cpu_quota_us = positive(FIELD, "cpu_quota", r.cpu_quota)?.map(|q| q as i64);
    res.cpuset_cpus = (!r.cpuset_cpus.is_empty()).then_some(r.cpuset_cpus);
    res.cpuset_mems = (!r.cpuset_mems.is_empty()).then_some(r.cpuset_mems);
    res.memory_swap_bytes = match r.memory_swap_limit_in_bytes {
        0 => None,
        v => Some(v),
    };
    Ok(())
}

/// A limit kubelet gives as an `int64` where 0 is none: a count, never
/// negative.
fn positive(field: &str, what: &str, v: i64) -> Result<Option<u64>, Status> {
    match v {
        0 => Ok(None),
        v if v > 0 => Ok(Some(v as u64)),
        v => Err(invalid(
            &format!("{field}.{what}"),
            format!("{v} is negative"),
        )),
    }
}

/// What of kubelet's resources holdfast cannot apply, refused by name.
fn check_hugepages(field: &str, r: &cri::LinuxContainerResources) -> Result<(), Status> {
    // kubelet sends a limit of 0 for every size a pod did not ask for (no
    // hugepages: what a container gets here); a reservation is refused.
    if r.hugepage_limits.iter().any(|h| h.limit != 0) {
        return Err(unsupported(
            &format!("{field}.hugepage_limits"),
            "hugepage reservations (only 0)",
        ));
    }
    Ok(())
}

/// kubelet's `unified` (cgroup v2 files, `memory.oom.group`): applied on a
/// cgroup v2 host, refused by name on v1, which has no such files.
fn unified(
    field: &str,
    r: &cri::LinuxContainerResources,
) -> Result<std::collections::BTreeMap<String, String>, Status> {
    if !r.unified.is_empty() && !std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
    {
        return Err(unsupported(
            &format!("{field}.unified"),
            "cgroup v2 files on a cgroup v1 host",
        ));
    }
    Ok(r.unified
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect())
}

/// The OOM score adjustment kubelet gives by QoS class (0: none given).
fn oom_score_adj(field: &str, v: i64) -> Result<Option<i32>, Status> {
    match v {
        0 => Ok(None),
        -1000..=1000 => Ok(i32::try_from(v).ok()),
        v => Err(invalid(
            &format!("{field}.oom_score_adj"),
            format!("{v} is not within -1000..1000"),
        )),
    }
}

/// kubelet's resources as the core's update: CPU as a quota per 100 ms
/// period (the one period `docker update --cpus` sets, and kubelet's),
/// shares, memory and swap.
/// What the update cannot change (the OOM score, the cgroup v2 files) must
/// be what the container has: kubelet's in-place resize sends them as they
/// were; another value is refused by name.
pub(crate) fn resource_update(
    r: cri::LinuxContainerResources,
    current: &holdfast_core::Resources,
) -> Result<ResourceUpdate, Status> {
    const FIELD: &str = "linux";
    check_hugepages(FIELD, &r)?;
    if oom_score_adj(FIELD, r.oom_score_adj)?.is_some_and(|o| Some(o) != current.oom_score_adj) {
        return Err(unsupported(
            &format!("{FIELD}.oom_score_adj"),
            "a change of the OOM score adjustment",
        ));
    }
    if !r.unified.is_empty() && unified(FIELD, &r)? != current.unified {
        return Err(unsupported(
            &format!("{FIELD}.unified"),
            "a change of cgroup v2 files",
        ));
    }
    let period = positive(FIELD, "cpu_period", r.cpu_period)?;
    let quota = positive(FIELD, "cpu_quota", r.cpu_quota)?;
    if period.is_some_and(|p| p != 100_000) {
        return Err(unsupported(
            &format!("{FIELD}.cpu_period"),
            "a period other than 100000 µs in an update",
        ));
    }
    if !r.cpuset_cpus.is_empty() || !r.cpuset_mems.is_empty() {
        return Err(unsupported(
            &format!("{FIELD}.cpuset_cpus/cpuset_mems"),
            "cpusets in an update",
        ));
    }
    Ok(ResourceUpdate {
        memory_limit_bytes: positive(FIELD, "memory_limit_in_bytes", r.memory_limit_in_bytes)?,
        memory_swap_bytes: match r.memory_swap_limit_in_bytes {
            0 => None,
            v => Some(v),
        },
        // quota µs per 100,000 µs: quota × 10,000 nano-CPUs.
        nano_cpus: quota.map(|q| q.saturating_mul(10_000)),
        cpu_shares: positive(FIELD, "cpu_shares", r.cpu_shares)?,
    })
}

// The deprecated fields are still read, so that an older client's are
// honoured or refused, never ignored.
#[allow(deprecated)]
fn container_security(
    config: &mut ContainerConfig,
    s: cri::LinuxContainerSecurityContext,
) -> Result<(), Status> {
    const FIELD: &str = "config.linux.security_context";
    config.privileges.privileged = s.privileged;
    if let Some(caps) = s.capabilities {
        if !caps.add_ambient_capabilities.is_empty() {
            return Err(unsupported(
                &format!("{FIELD}.capabilities.add_ambient_capabilities"),
                "ambient capabilities",
            ));
        }
        config.privileges.cap_add = caps.add_capabilities;
        config.privileges.cap_drop = caps.drop_capabilities;
    }
    if s.selinux_options
        .as_ref()
        .is_some_and(|o| *o != cri::SeLinuxOption::default())
    {
        return Err(unsupported(
            &format!("{FIELD}.selinux_options"),
            "no SELinux on this runtime",
        ));
    }
    config.user = run_as(FIELD, s.run_as_user, s.run_as_group)?;
    if !s.run_as_username.is_empty() {
        if config.user.is_some() {
            return Err(invalid(
                &format!("{FIELD}.run_as_username"),
                "given with run_as_user",
            ));
        }
        config.user = Some(s.run_as_username);
    }
    config.read_only_rootfs = s.readonly_rootfs;
    config.privileges.group_add = s.supplemental_groups.iter().map(i64::to_string).collect();
    let seccomp_unconfined = seccomp_unconfined(
        &format!("{FIELD}.seccomp"),
        s.seccomp.as_ref(),
        &s.seccomp_profile_path,
    )?;
    apparmor_supported(
        &format!("{FIELD}.apparmor"),
        s.apparmor.as_ref(),
        &s.apparmor_profile,
    )?;
    config.security = Security {
        seccomp_unconfined,
        no_new_privileges: s.no_new_privs,
        // kubelet sends the paths it wants masked for a container that is
        // not privileged (its defaults), none for a privileged one.
        // (an empty list is the runtime's defaults, as containerd reads it).
        masked_paths: (!s.masked_paths.is_empty()).then_some(s.masked_paths),
        readonly_paths: (!s.readonly_paths.is_empty()).then_some(s.readonly_paths),
    };
    Ok(())
}
