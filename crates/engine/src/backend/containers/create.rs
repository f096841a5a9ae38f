//! `docker create`: a decoded config completed by the engine (the host's
//! defaults, the namespaces and network it shares resolved, the image's
//! defaults merged in, its volumes made) and recorded by the core under the
//! name given or one drawn; its new volumes are then filled from its image.

use super::Containers;
use crate::port_keys::{exposed_port_keys, publish_exposed};
use crate::refusal::{conflict, internal, invalid};
use holdfast_adapter_containerd::ImageConfig;
use holdfast_core::{
    Answer, CgroupnsMode, Command, ConnectionState, ContainerConfig, ContainerId, ErrorKind,
    MountSpec, NamespaceMode, NetworkMode, RequestError, SharedNetwork, Status,
};
use std::sync::Arc;
use std::time::Duration;

/// What `docker create` asks for, as an API decoded it.
#[derive(Clone, Debug)]
pub struct NewContainer {
    pub config: ContainerConfig,
    /// For the client, from the decoding; the create adds its own.
    pub warnings: Vec<String>,
    /// No `CgroupnsMode` was given: the host decides the default.
    pub cgroupns_defaulted: bool,
    /// `-P`: the image's exposed ports are published too.
    pub publish_all: bool,
    /// No network was named: the daemon's default (bridge, unless disabled).
    pub network_defaulted: bool,
    /// `--platform`, which must be this host's.
    pub platform: Option<String>,
    /// `--name`; `None`: one is drawn.
    pub name: Option<String>,
}

/// A container made: its id, and the warnings for the client.
#[derive(Clone, Debug)]
pub struct Created {
    pub id: ContainerId,
    pub warnings: Vec<String>,
}

/// How long a create waits, at holdfastd's start, for the first connection
/// to containerd (which the supervisor may still be starting).
const FIRST_CONNECT_WAIT: Duration = Duration::from_secs(10);

/// How often that wait looks at the engine.
const FIRST_CONNECT_POLL: Duration = Duration::from_millis(20);

/// Whether the core is connected and relisted. Before its first relist
/// since holdfastd started, containerd is being reached, not known to be
/// away: that is waited for (bounded) instead of refusing the create (the
/// API serves before the first connection, and under load a `docker run`
/// right after start-up was refused with "containerd is unreachable").
async fn containerd_ready(containers: &Containers<'_>) -> Result<bool, RequestError> {
    let deadline = tokio::time::Instant::now() + FIRST_CONNECT_WAIT;
    loop {
        let (ready, never_relisted) = containers
            .engine
            .read(|v| {
                (
                    v.core.connection() == ConnectionState::Ready,
                    v.facts.relists == 0,
                )
            })
            .await?;
        if ready || !never_relisted || tokio::time::Instant::now() >= deadline {
            return Ok(ready);
        }
        tokio::time::sleep(FIRST_CONNECT_POLL).await;
    }
}

impl Containers<'_> {
    /// Creates a container: see the module docs.
    pub async fn create(&self, new: NewContainer) -> Result<Created, RequestError> {
        let NewContainer {
            mut config,
            mut warnings,
            cgroupns_defaulted,
            publish_all,
            network_defaulted,
            platform,
            name: given_name,
        } = new;
        let engine = self.engine;
        if config.network == NetworkMode::Bridge && !engine.services.network.enabled() {
            if !network_defaulted || !config.ports.is_empty() || publish_all {
                return Err(invalid(
                    "the bridge network is disabled on this daemon (holdfastd --bridge none): use --network none or host",
                ));
            }
            warnings.push(
            "the bridge network is disabled (holdfastd --bridge none): the container gets only loopback".to_owned(),
        );
            config.network = NetworkMode::None;
        }
        // As dockerd: without swap accounting, memory is limited without swap.
        if config.resources.memory_swap_bytes.is_some_and(|s| s > 0) && !swap_accounting() {
            config.resources.memory_swap_bytes = Some(-1);
            warnings.push(
            "Your kernel does not support swap limit capabilities or the cgroup is not mounted. Memory limited without swap."
                .to_owned(),
        );
        }
        // dockerd's default: a cgroup namespace of its own on cgroup v2, the
        // host's on v1.
        if cgroupns_defaulted && std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
        {
            config.namespaces.cgroup = CgroupnsMode::Private;
        }
        if let Some(platform) = platform.filter(|s| !s.is_empty())
            && platform != "linux"
            && platform != "linux/amd64"
        {
            return Err(invalid(format!(
                "platform {platform:?} is not supported: holdfast runs linux/amd64"
            )));
        }
        // Fail fast while containerd is away: nothing is done, nothing is left.
        if !containerd_ready(self).await? {
            return Err(RequestError::new(
                ErrorKind::Unavailable,
                "containerd is unreachable: the container was not created; try again when it is back",
            ));
        }
        check_host_options(&config)?;
        self.resolve_shared_namespaces(&mut config).await?;
        self.resolve_network(&mut config).await?;
        // Patient, as the create's own calls (see the adapter's
        // `patiently`): a loaded containerd slows a `docker run` down,
        // never fails it at the ordinary call deadline.
        let image = engine
            .services
            .adapter
            .patiently(engine.images().resolve(&config.image))
            .await?;
        config.image_id = Some(image.config_digest.clone());
        merge_image_defaults(&mut config, &image.config);
        config.env = merged_env(
            std::mem::take(&mut config.env),
            image.config.env.as_deref().unwrap_or_default(),
        );
        // The image's EXPOSE joins the given ones, as dockerd merges them
        // (a malformed one in the image is left out, never fatal).
        let mut exposed: std::collections::BTreeSet<String> =
            std::mem::take(&mut config.exposed_ports)
                .into_iter()
                .collect();
        for key in image.config.exposed_ports.iter().flatten() {
            if let Ok(k) = exposed_port_keys(std::iter::once(key)) {
                exposed.extend(k);
            }
        }
        config.exposed_ports = exposed.into_iter().collect();
        if publish_all {
            publish_exposed(
                &mut config.ports,
                image.config.exposed_ports.iter().flatten(),
            )?;
        }
        config.image_stop_signal = image
            .config
            .stop_signal
            .as_deref()
            .filter(|s| !s.is_empty())
            .and_then(|s| s.parse().ok());
        config.healthcheck = crate::health_config::merge(
            config.healthcheck.take(),
            crate::health_config::from_image(image.config.healthcheck.as_ref()),
        );
        // The volumes it names are made and filled by the core, with it.
        engine
            .volumes()
            .resolve_mounts(&mut config, &image.config)?;
        let config = Arc::new(config);
        // A generated name that happens to be taken is drawn again.
        for attempt in 0..8 {
            let id = new_container_id()?;
            let name = match &given_name {
                Some(n) => n.strip_prefix('/').unwrap_or(n).to_owned(),
                None => generated_name(attempt)?,
            };
            let answer = engine
                .command(Command::Create {
                    id: id.clone(),
                    name,
                    config: Arc::clone(&config),
                })
                .await;
            match answer {
                Answer::Done => return Ok(Created { id, warnings }),
                // Only a name drawn that is taken is drawn again.
                Answer::Error(e)
                    if given_name.is_none()
                        && e.kind == ErrorKind::Conflict
                        && e.message.contains(holdfast_core::NAME_TAKEN) =>
                {
                    continue;
                }
                Answer::Error(e) => return Err(e),
                other => {
                    return Err(internal(format!("unexpected answer to create: {other:?}")));
                }
            }
        }
        Err(conflict(
            "could not find a free container name; pass --name",
        ))
    }
}

/// Whether the host's memory cgroup can limit swap (cgroup v1's
/// `memory.memsw.*`, v2's `memory.swap.max` in the cgroups below the root).
pub(crate) fn swap_accounting() -> bool {
    let cgroup = std::path::Path::new("/sys/fs/cgroup");
    if cgroup.join("memory/memory.memsw.limit_in_bytes").exists() {
        return true;
    }
    if !cgroup.join("cgroup.controllers").exists() {
        return false;
    }
    std::fs::read_dir(cgroup).is_ok_and(|dirs| {
        dirs.flatten()
            .any(|d| d.path().join("memory.swap.max").exists())
    })
}

/// What create options need of this host, checked before anything is made:
/// the init binary, device nodes, bind sources.
fn check_host_options(config: &ContainerConfig) -> Result<(), RequestError> {
    if config.init && holdfast_adapter_containerd::find_init_binary().is_none() {
        return Err(invalid(
            "HostConfig.Init (--init): no init binary is installed on this host: install Debian's tini package (it provides tini-static), or docker-init",
        ));
    }
    let r = &config.resources;
    let cgroup_v2 = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    if r.memory_swappiness.is_some() && cgroup_v2 {
        // dockerd's words (it drops the setting with them as a warning;
        // holdfast refuses what it cannot apply).
        return Err(invalid(
            "HostConfig.MemorySwappiness: Your kernel does not support memory swappiness capabilities or the cgroup is not mounted (cgroup v2 has no memory.swappiness)",
        ));
    }
    if (r.cpu_realtime_runtime_us.is_some() || r.cpu_realtime_period_us.is_some()) && cgroup_v2 {
        return Err(invalid(
            "HostConfig.CpuRealtimeRuntime/CpuRealtimePeriod: cgroup v2 has no real-time CPU controller; not supported on this host",
        ));
    }
    for d in &config.privileges.devices {
        use std::os::unix::fs::FileTypeExt as _;
        let is_device = std::fs::metadata(&d.path_on_host)
            .map(|m| m.file_type().is_char_device() || m.file_type().is_block_device());
        match is_device {
            Ok(true) => {}
            Ok(false) => {
                return Err(invalid(format!(
                    "HostConfig.Devices: error gathering device information while adding custom device {:?}: not a device node",
                    d.path_on_host
                )));
            }
            Err(e) => {
                return Err(invalid(format!(
                    "HostConfig.Devices: error gathering device information while adding custom device {:?}: {e}",
                    d.path_on_host
                )));
            }
        }
    }
    for m in &config.mount_specs {
        if let MountSpec::Bind { source, .. } = m
            && std::fs::symlink_metadata(source).is_err()
        {
            return Err(invalid(format!(
                "HostConfig.Mounts: invalid mount config for type \"bind\": bind source path does not exist: {source}"
            )));
        }
    }
    Ok(())
}

/// `--pid`, `--uts`, `--ipc container:<ref>`: the other container, by name
/// or id, must be running; the spec joins its init's namespaces by pid.
///
/// Glue, not a core decision: the core never acts on it (no lifecycle
/// changes, nothing to recover after a crash); it is a read of the core's
/// view, as resize's "is it running" check. The other container may stop
/// between this read and the create; runc then fails to join and the
/// create fails whole, leaving nothing behind.
impl Containers<'_> {
    async fn resolve_shared_namespaces(
        &self,
        config: &mut ContainerConfig,
    ) -> Result<(), RequestError> {
        let ns = &mut config.namespaces;
        for (kind, option, mode) in [
            ("PID", "HostConfig.PidMode", &mut ns.pid),
            ("UTS", "HostConfig.UTSMode", &mut ns.uts),
            ("IPC", "HostConfig.IpcMode", &mut ns.ipc),
        ] {
            let NamespaceMode::Container { id: reference, .. } = mode else {
                continue;
            };
            let reference = reference.clone();
            // Not a 404: the CLI takes a 404 from create for a missing image.
            let s = self.snapshot(&reference).await.map_err(|e| {
                if e.kind == ErrorKind::NotFound {
                    invalid(format!("invalid {option}: no such container: {reference}"))
                } else {
                    e
                }
            })?;
            let id = s.record.id.clone();
            let pid = s.running_pid();
            if s.status != Status::Running || pid == 0 {
                return Err(conflict(format!(
                    "cannot join {kind} of a non running container: {reference}"
                )));
            }
            let target = &s.record.config.namespaces;
            if kind == "IPC" {
                match target.ipc {
                    NamespaceMode::Shareable => {}
                    NamespaceMode::Host => {
                        *mode = NamespaceMode::Host;
                        continue;
                    }
                    _ => {
                        return Err(conflict(format!(
                            "cannot join IPC of container {reference}: non-shareable IPC (hint: use IpcMode:shareable for the donor container)"
                        )));
                    }
                }
            }
            *mode = NamespaceMode::Container {
                id: id.to_string(),
                pid,
            };
        }
        Ok(())
    }

    /// `--network NAME` names a user network (by name, id or id prefix; stored
    /// by name); `--network container:<ref>` a running container, whose
    /// namespace it joins (its attachment's, or its init's). Glue like
    /// `resolve_shared_namespaces`: a read of the view, nothing decided.
    async fn resolve_network(&self, config: &mut ContainerConfig) -> Result<(), RequestError> {
        if let Some(name) = config.network_name.clone() {
            // Not a 404: the CLI takes a 404 from create for a missing image.
            let def = self
                .engine
                .services
                .network
                .find(&name)
                .ok_or_else(|| invalid(format!("network {name} not found")))?;
            if let Some(ip) = &config.ip_address
                && !ip.parse().is_ok_and(|ip| def.may_give(ip))
            {
                return Err(invalid(format!(
                    "Invalid address {ip}: It does not belong to any of this network's subnets ({} on {}, gateway {})",
                    def.subnet, def.name, def.gateway
                )));
            }
            config.network_name = def.user_defined().then_some(def.name);
        }
        if config.network != NetworkMode::Container {
            return Ok(());
        }
        let Some(reference) = config.network_container.as_ref().map(|n| n.id.clone()) else {
            return Err(invalid("network mode container: names no container"));
        };
        let s = self.snapshot(&reference).await.map_err(|e| {
            if e.kind == ErrorKind::NotFound {
                invalid(format!(
                    "invalid HostConfig.NetworkMode: no such container: {reference}"
                ))
            } else {
                e
            }
        })?;
        let id = s.record.id.clone();
        let pid = s.running_pid();
        if s.status != Status::Running || pid == 0 {
            return Err(conflict(format!(
                "cannot join network of a non running container: {reference}"
            )));
        }
        let donor = &s.record.config;
        match donor.network {
            NetworkMode::Host => {
                config.network = NetworkMode::Host;
                config.network_container = None;
            }
            // Its donor's, as it shares that one.
            NetworkMode::Container => config.network_container = donor.network_container.clone(),
            NetworkMode::Bridge | NetworkMode::None => {
                config.network_container = Some(SharedNetwork {
                    id: id.to_string(),
                    pid,
                });
            }
        }
        Ok(())
    }
}

/// 64 hex digits from 32 random bytes, as dockerd makes ids.
fn new_container_id() -> Result<ContainerId, RequestError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| internal(format!("no randomness for a container id: {e}")))?;
    hex::encode(bytes)
        .parse()
        .map_err(|e| internal(format!("{e}")))
}

/// dockerd-style `adjective_name` names.
fn generated_name(attempt: usize) -> Result<String, RequestError> {
    const LEFT: &[&str] = &[
        "brave", "calm", "eager", "fervent", "gallant", "happy", "keen", "lucid", "merry",
        "nimble", "patient", "quiet", "steady", "tender", "upbeat", "vigilant", "wise", "zen",
    ];
    const RIGHT: &[&str] = &[
        "archimedes",
        "babbage",
        "curie",
        "darwin",
        "euler",
        "faraday",
        "gauss",
        "hopper",
        "kepler",
        "lovelace",
        "noether",
        "pascal",
        "ritchie",
        "shannon",
        "turing",
        "wozniak",
    ];
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).map_err(|e| internal(format!("no randomness for a name: {e}")))?;
    let n = u32::from_le_bytes(bytes) as usize;
    let base = format!(
        "{}_{}",
        LEFT[n % LEFT.len()],
        RIGHT[(n / LEFT.len()) % RIGHT.len()]
    );
    Ok(if attempt == 0 {
        base
    } else {
        format!("{base}{}", n % 100)
    })
}

/// The container's environment as dockerd stores it at create (and shows
/// it in inspect's `Config.Env`): the given variables, then each of the
/// image's that none of them names. The process gets the same set (the
/// spec overlays the given ones on the image's).
fn merged_env(given: Vec<String>, image: &[String]) -> Vec<String> {
    let key = |kv: &str| kv.split_once('=').map_or(kv, |(k, _)| k).to_owned();
    let named: std::collections::BTreeSet<String> = given.iter().map(|kv| key(kv)).collect();
    let mut env = given;
    env.extend(image.iter().filter(|kv| !named.contains(&key(kv))).cloned());
    env
}

/// dockerd's merge of the image's config under the given one at create
/// (moby's `merge`, daemon/commit.go), for what it keeps whole: the user,
/// the working dir, labels (the given win), and the command: with no
/// entrypoint given, an empty command takes the image's, and an absent
/// entrypoint the image's (an entrypoint given drops the image's command).
/// Env, exposed ports, the health check and the stop signal are merged
/// beside it. The record keeps the result, as dockerd's container config
/// does: inspect, `ps` and commit read it without the image (which may be
/// gone), and the runtime spec, whose own fallbacks to the image give the
/// same process for merged values, is built from it as before.
fn merge_image_defaults(config: &mut ContainerConfig, image: &ImageConfig) {
    if config.user.is_none() {
        config.user = image.user.clone().filter(|u| !u.is_empty());
    }
    if config.working_dir.is_none() {
        config.working_dir = image.working_dir.clone().filter(|w| !w.is_empty());
    }
    for (k, v) in image.labels.iter().flatten() {
        config.labels.entry(k.clone()).or_insert_with(|| v.clone());
    }
    if config.entrypoint.as_ref().is_none_or(Vec::is_empty) {
        if config.cmd.as_ref().is_none_or(Vec::is_empty) {
            config.cmd = image.cmd.clone();
        }
        if config.entrypoint.is_none() {
            config.entrypoint = image.entrypoint.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The image's defaults merged into the record as dockerd merges them,
    /// and the process the spec gives is the same from the merged record as
    /// from what was given (merging twice changes nothing).
    #[test]
    fn image_defaults_merge_without_changing_the_process() {
        use holdfast_adapter_containerd::{HostFacts, User, build_spec};
        let image = ImageConfig {
            entrypoint: Some(vec!["/bin/sh".into(), "-c".into()]),
            cmd: Some(vec!["echo hi".into()]),
            working_dir: Some("/srv".into()),
            user: Some("nobody".into()),
            labels: Some([("from".to_owned(), "image".to_owned())].into()),
            ..Default::default()
        };
        let list = |v: &[&str]| Some(v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        let cases: Vec<ContainerConfig> = vec![
            ContainerConfig::default(),
            ContainerConfig {
                cmd: list(&["echo bye"]),
                ..Default::default()
            },
            ContainerConfig {
                entrypoint: list(&["/bin/echo"]),
                ..Default::default()
            },
            ContainerConfig {
                entrypoint: list(&["/bin/echo"]),
                cmd: list(&["x"]),
                user: Some("0".into()),
                working_dir: Some("/tmp".into()),
                labels: [("from".to_owned(), "me".to_owned())].into(),
                ..Default::default()
            },
        ];
        let id: ContainerId = "abcdef0123456789".parse().expect("id");
        let process = |c: &ContainerConfig| {
            let spec = build_spec(
                &id,
                "ns",
                c,
                &image,
                &User { uid: 0, gid: 0 },
                &HostFacts::default(),
            )
            .expect("spec");
            let p = spec.process().clone().expect("process");
            (p.args().clone(), p.cwd().clone())
        };
        for given in cases {
            let mut merged = given.clone();
            merge_image_defaults(&mut merged, &image);
            assert_eq!(process(&merged), process(&given), "{given:?}");
            let mut twice = merged.clone();
            merge_image_defaults(&mut twice, &image);
            assert_eq!(twice, merged);
        }
        // Two bodies no CLI sends now run as dockerd runs them: an empty
        // command under the image's entrypoint takes the image's command,
        // and an empty entrypoint with no command runs the image's command
        // (refused as "no command" before).
        let empty_cmd = ContainerConfig {
            cmd: Some(Vec::new()),
            ..Default::default()
        };
        let mut merged = empty_cmd.clone();
        merge_image_defaults(&mut merged, &image);
        assert_eq!(process(&merged).0, list(&["/bin/sh", "-c", "echo hi"]));
        assert_eq!(process(&empty_cmd).0, list(&["/bin/sh", "-c"]));
        let empty_entrypoint = ContainerConfig {
            entrypoint: Some(Vec::new()),
            ..Default::default()
        };
        let mut merged = empty_entrypoint.clone();
        merge_image_defaults(&mut merged, &image);
        assert_eq!(process(&merged).0, list(&["echo hi"]));
        let user = User { uid: 0, gid: 0 };
        let host = HostFacts::default();
        assert!(build_spec(&id, "ns", &empty_entrypoint, &image, &user, &host).is_err());

        let mut shown = ContainerConfig::default();
        merge_image_defaults(&mut shown, &image);
        assert_eq!(shown.entrypoint, list(&["/bin/sh", "-c"]));
        assert_eq!(shown.cmd, list(&["echo hi"]));
        assert_eq!(shown.working_dir.as_deref(), Some("/srv"));
        assert_eq!(shown.user.as_deref(), Some("nobody"));
        assert_eq!(shown.labels.get("from").map(String::as_str), Some("image"));
        // An entrypoint given drops the image's command, as dockerd.
        let mut own = ContainerConfig {
            entrypoint: list(&["/bin/echo"]),
            labels: [("from".to_owned(), "me".to_owned())].into(),
            ..Default::default()
        };
        merge_image_defaults(&mut own, &image);
        assert_eq!(own.cmd, None);
        assert_eq!(own.labels.get("from").map(String::as_str), Some("me"));
    }

    #[test]
    fn env_is_merged_as_dockerd_stores_it() {
        let image = ["PATH=/bin".to_owned(), "A=image".to_owned()];
        assert_eq!(
            merged_env(vec!["A=1".into(), "B".into()], &image),
            vec!["A=1".to_owned(), "B".into(), "PATH=/bin".into()]
        );
        assert_eq!(merged_env(vec![], &image), image.to_vec());
    }
}
