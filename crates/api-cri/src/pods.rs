//! Pod sandboxes: `RunPodSandbox`, `StopPodSandbox`, `RemovePodSandbox`,
//! `PodSandboxStatus`, `ListPodSandbox`. A sandbox is a container running
//! [`PAUSE_IMAGE`] (a `sleep`), holding the pod's network (the default bridge
//! network through the CNI plugins, or the host's), IPC and UTS namespaces;
//! the pod's containers join them (`containers.rs`).

use crate::names::{checked, sandbox_name};
use crate::status::{invalid, status, unsupported};
use crate::{Cri, PAUSE_IMAGE};
use holdfast_core::{
    Answer, Command, ContainerConfig, NamespaceMode, NetworkMode, PodMember, PodRole, PortBinding,
    RequestError, Status as Run, WaitCondition,
};
use holdfast_engine::backend::containers::Snapshot;
use k8s_cri::v1 as cri;
use std::collections::HashMap;
use std::time::Duration;
use tonic::Status;

/// `NamespaceMode` of the CRI (`POD`, `CONTAINER`, `NODE`, `TARGET`).
pub(crate) mod ns {
    pub const POD: i32 = 0;
    pub const CONTAINER: i32 = 1;
    pub const NODE: i32 = 2;
    pub const TARGET: i32 = 3;
}

impl Cri {
    pub(crate) async fn run_pod_sandbox(
        &self,
        r: cri::RunPodSandboxRequest,
    ) -> Result<cri::RunPodSandboxResponse, Status> {
        if !r.runtime_handler.is_empty() && r.runtime_handler != "runc" {
            return Err(unsupported(
                "runtime_handler",
                format!("{:?}: the one handler is runc (\"\")", r.runtime_handler),
            ));
        }
        let config = r
            .config
            .ok_or_else(|| invalid("config", "a sandbox config is required"))?;
        let (name, container) = sandbox_config(config)?;
        let engine = &self.engine;
        engine
            .images()
            .ensure_seeded(PAUSE_IMAGE)
            .await
            .map_err(status)?;
        // The core starts a sandbox with its create (one intent, so that
        // a crash between the two never leaves it made and not started):
        // this start only waits for that run, and tells how it went.
        let id = self.create_named(name, container).await?;
        match engine.command(Command::Start { id: id.clone() }).await {
            Answer::Error(e) => {
                // A sandbox is ready or is not made: kubelet asks again.
                let _ = engine.containers().remove(id.as_str(), true, true).await;
                Err(status(e))
            }
            _ => Ok(cri::RunPodSandboxResponse {
                pod_sandbox_id: id.to_string(),
            }),
        }
    }

    /// Stops the pod: one command for the core, which stops the sandbox
    /// (releasing the pod's network) and every container of the pod in the
    /// same step (kubelet stopped them with their grace periods before), so
    /// that all of it is recorded at once and carried out whatever happens
    /// next (containerd away, holdfastd killed). Answered once every one of
    /// them has stopped. Stopping what is stopped or gone succeeds.
    pub(crate) async fn stop_pod_sandbox(&self, id: &str) -> Result<(), Status> {
        let Some(sandbox) = self.sandbox(id).await? else {
            return Ok(());
        };
        let sandbox_id = sandbox.record.id.to_string();
        self.stop(&sandbox_id, Duration::ZERO).await?;
        let members = self.members(&sandbox_id).await?;
        let waits = members
            .iter()
            .map(|m| self.wait(m.record.id.as_str(), WaitCondition::NotRunning));
        first_error(futures_util::future::join_all(waits).await)
    }

    /// Removes the pod: one command for the core, which removes the
    /// sandbox and every container of the pod in the same step, answered
    /// once all are gone. Removing what is gone succeeds.
    pub(crate) async fn remove_pod_sandbox(&self, id: &str) -> Result<(), Status> {
        let Some(sandbox) = self.sandbox(id).await? else {
            return Ok(());
        };
        let sandbox_id = sandbox.record.id.to_string();
        self.remove(&sandbox_id).await?;
        // Listed after the core's cascade was decided: every member it
        // took (none can be made since, in a sandbox being removed).
        let members = self.members(&sandbox_id).await?;
        let waits = members
            .iter()
            .map(|m| self.wait(m.record.id.as_str(), WaitCondition::Removed));
        first_error(futures_util::future::join_all(waits).await)
    }

    pub(crate) async fn pod_sandbox_status(
        &self,
        id: &str,
    ) -> Result<cri::PodSandboxStatusResponse, Status> {
        let sandbox = self
            .sandbox(id)
            .await?
            .ok_or_else(|| Status::not_found(format!("pod sandbox {id:?} not found")))?;
        let details = self
            .engine
            .containers()
            .inspect(sandbox.record.id.as_str())
            .await
            .map_err(status)?;
        // A pod on the host's network has the node's addresses, which
        // kubelet knows (containerd's plugin answers none either).
        let ip = match sandbox.record.config.network {
            NetworkMode::Host => None,
            _ => details
                .attachment
                .and_then(|a| a.ip)
                .map(|ip| ip.to_string()),
        };
        let Some(pod) = sandbox.record.config.pod.as_ref() else {
            return Err(Status::not_found(format!("pod sandbox {id:?} not found")));
        };
        // The pod's containers as they are now (what kubelet's evented
        // PLEG reads instead of relisting).
        let mut containers_statuses = Vec::new();
        for m in self.members(sandbox.record.id.as_str()).await? {
            if let Ok(s) = self.container_status(m.record.id.as_str()).await {
                containers_statuses.push(s);
            }
        }
        Ok(cri::PodSandboxStatusResponse {
            status: Some(cri::PodSandboxStatus {
                id: sandbox.record.id.to_string(),
                metadata: Some(metadata(pod)),
                state: sandbox_state(&sandbox),
                created_at: sandbox.record.created_at.as_unix_nanos(),
                network: Some(cri::PodSandboxNetworkStatus {
                    ip: ip.unwrap_or_default(),
                    additional_ips: Vec::new(),
                }),
                linux: Some(cri::LinuxPodSandboxStatus {
                    namespaces: Some(cri::Namespace {
                        options: Some(namespace_options(&sandbox.record.config)),
                    }),
                }),
                labels: to_map(&sandbox.record.config.labels),
                annotations: to_map(&pod.annotations),
                runtime_handler: String::new(),
            }),
            info: HashMap::new(),
            containers_statuses,
            timestamp: crate::stats::now_nanos(),
        })
    }

    pub(crate) async fn list_pod_sandbox(
        &self,
        filter: Option<cri::PodSandboxFilter>,
    ) -> Result<Vec<cri::PodSandbox>, Status> {
        let filter = filter.unwrap_or_default();
        let all = self.engine.containers().snapshots().await.map_err(status)?;
        Ok(all
            .iter()
            .filter_map(|s| {
                let (pod, role) = s.record.config.pod.as_ref().map(|p| (p, &p.role))?;
                (*role == PodRole::Sandbox).then_some((s, pod))
            })
            .filter(|(s, _)| filter.id.is_empty() || s.record.id.as_str().starts_with(&filter.id))
            .filter(|(s, _)| filter.state.is_none_or(|f| f.state == sandbox_state(s)))
            .filter(|(s, _)| labels_match(&filter.label_selector, &s.record.config.labels))
            .map(|(s, pod)| cri::PodSandbox {
                id: s.record.id.to_string(),
                metadata: Some(metadata(pod)),
                state: sandbox_state(s),
                created_at: s.record.created_at.as_unix_nanos(),
                labels: to_map(&s.record.config.labels),
                annotations: to_map(&pod.annotations),
                runtime_handler: String::new(),
            })
            .collect())
    }

    /// The sandbox `id` names (a full id or a unique prefix), `None` when
    /// there is none; a container that is not a sandbox is none either.
    pub(crate) async fn sandbox(&self, id: &str) -> Result<Option<Snapshot>, Status> {
        if id.is_empty() {
            return Err(invalid("pod_sandbox_id", "must not be empty"));
        }
        match self.engine.containers().snapshot(id).await {
            Ok(s)
                if s.record
                    .config
                    .pod
                    .as_ref()
                    .is_some_and(|p| p.role == PodRole::Sandbox) =>
            {
                Ok(Some(s))
            }
            Ok(_) => Ok(None),
            // A prefix that names more than one is no answer of "gone".
            Err(e) if e.message.starts_with("multiple IDs") => {
                Err(Status::invalid_argument(e.message))
            }
            Err(e) if e.kind == holdfast_core::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(status(e)),
        }
    }

    /// The containers of the sandbox with this full id.
    pub(crate) async fn members(&self, sandbox: &str) -> Result<Vec<Snapshot>, Status> {
        let all = self.engine.containers().snapshots().await.map_err(status)?;
        Ok(all
            .into_iter()
            .filter(|s| {
                s.record.config.pod.as_ref().is_some_and(
                    |p| matches!(&p.role, PodRole::Container { sandbox: of, .. } if of == sandbox),
                )
            })
            .collect())
    }

    /// A stop through the core; one of what is stopped or gone succeeds.
    pub(crate) async fn stop(&self, id: &str, grace: Duration) -> Result<(), Status> {
        let stop = move |id| Command::Stop {
            id,
            timeout: Some(grace),
            signal: None,
        };
        tolerate_gone(self.engine.container_command(id, stop).await)
    }

    /// Waits (a read of the core, no change) for the container to reach
    /// `condition`; one that is gone has.
    async fn wait(&self, id: &str, condition: WaitCondition) -> Result<(), Status> {
        let wait = move |id| Command::Wait { id, condition };
        tolerate_gone(self.engine.container_command(id, wait).await)
    }

    /// A removal through the core (forced, with the anonymous volumes an
    /// image's `VOLUME` made); one of what is gone succeeds.
    pub(crate) async fn remove(&self, id: &str) -> Result<(), Status> {
        tolerate_gone(self.engine.containers().remove(id, true, true).await)
    }
}

fn first_error(results: Vec<Result<(), Status>>) -> Result<(), Status> {
    results.into_iter().collect()
}

/// Done, nothing to do, or gone: what kubelet's idempotent calls accept.
fn tolerate_gone(answer: Answer) -> Result<(), Status> {
    match answer {
        Answer::Error(RequestError {
            kind: holdfast_core::ErrorKind::NotFound,
            ..
        }) => Ok(()),
        Answer::Error(e) => Err(status(e)),
        _ => Ok(()),
    }
}

/// The sandbox's container: its docker name and config, from kubelet's.
pub(crate) fn sandbox_config(
    c: cri::PodSandboxConfig,
) -> Result<(String, ContainerConfig), Status> {
    let meta = c
        .metadata
        .ok_or_else(|| invalid("config.metadata", "is required"))?;
    let pod_name = checked("config.metadata.name", &meta.name)?.to_owned();
    let pod_namespace = checked("config.metadata.namespace", &meta.namespace)?.to_owned();
    let pod_uid = checked("config.metadata.uid", &meta.uid)?.to_owned();
    if c.windows.is_some() {
        return Err(unsupported(
            "config.windows",
            "holdfast runs Linux containers",
        ));
    }
    let linux = c.linux.unwrap_or_default();
    // `linux.resources` and `overhead` describe the pod's cgroup, which is
    // kubelet's own (`cgroup_parent`): kubelet sets and enforces it, and a
    // runc runtime reads nothing of them (containerd's plugin neither).
    let security = linux.security_context.unwrap_or_default();
    sandbox_security_supported(&security)?;
    let seccomp_unconfined = sandbox_seccomp_unconfined(&security)?;
    let options = security.namespace_options.unwrap_or_default();
    let host_network = match options.network {
        ns::POD => false,
        ns::NODE => true,
        other => {
            return Err(invalid(
                "config.linux.security_context.namespace_options.network",
                format!("{other} is not POD or NODE"),
            ));
        }
    };
    let mut config = ContainerConfig {
        image: PAUSE_IMAGE.to_owned(),
        labels: c.labels.into_iter().collect(),
        hostname: (!c.hostname.is_empty() && !host_network).then_some(c.hostname),
        network: if host_network {
            NetworkMode::Host
        } else {
            NetworkMode::Bridge
        },
        read_only_rootfs: security.readonly_rootfs,
        cgroup_parent: (!linux.cgroup_parent.is_empty()).then_some(linux.cgroup_parent),
        sysctls: linux.sysctls.into_iter().collect(),
        ..ContainerConfig::default()
    };
    config.privileges.privileged = security.privileged;
    config.security.seccomp_unconfined = seccomp_unconfined;
    config.user = run_as(
        "config.linux.security_context",
        security.run_as_user,
        security.run_as_group,
    )?;
    config.privileges.group_add = security
        .supplemental_groups
        .iter()
        .map(i64::to_string)
        .collect();
    config.namespaces.ipc = match options.ipc {
        ns::POD => NamespaceMode::Shareable,
        ns::NODE => NamespaceMode::Host,
        other => {
            return Err(invalid(
                "config.linux.security_context.namespace_options.ipc",
                format!("{other} is not POD or NODE"),
            ));
        }
    };
    config.namespaces.pid = match options.pid {
        ns::POD | ns::CONTAINER => NamespaceMode::Private,
        ns::NODE => NamespaceMode::Host,
        ns::TARGET => {
            return Err(unsupported(
                "config.linux.security_context.namespace_options.pid",
                "TARGET (an ephemeral container's)",
            ));
        }
        other => {
            return Err(invalid(
                "config.linux.security_context.namespace_options.pid",
                format!("{other} is not a namespace mode"),
            ));
        }
    };
    if host_network {
        config.namespaces.uts = NamespaceMode::Host;
    }
    match c.dns_config {
        // A pod on the host's network has the host's resolver file: what
        // kubelet sends for one (the node's, under dnsPolicy Default and
        // ClusterFirst) is honoured by it; any other is refused by name.
        Some(dns) if host_network => {
            let host = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
            if !is_hosts_resolver(&dns, &host) {
                return Err(unsupported(
                    "config.dns_config",
                    "a pod on the host's network gets the host's /etc/resolv.conf; other servers, searches or options need the pod network",
                ));
            }
        }
        Some(dns) => {
            config.dns = dns.servers;
            config.dns_search = dns.searches;
            config.dns_options = dns.options;
        }
        None => {}
    }
    for (i, p) in c.port_mappings.iter().enumerate() {
        if host_network {
            break; // the pod's ports are the host's own
        }
        config.ports.push(port_binding(i, p)?);
    }
    let name = sandbox_name(&pod_name, &pod_namespace, &pod_uid, meta.attempt);
    config.pod = Some(PodMember {
        role: PodRole::Sandbox,
        pod_name,
        pod_uid,
        pod_namespace,
        attempt: meta.attempt,
        annotations: c.annotations.into_iter().collect(),
        log_path: (!c.log_directory.is_empty()).then_some(c.log_directory),
        image_ref: None,
    });
    Ok((name, config))
}

/// Whether `dns` is what the resolver file `host` says, as kubelet copies
/// a node's: its first three name servers, its search domains, its options.
fn is_hosts_resolver(dns: &cri::DnsConfig, host: &str) -> bool {
    let mut servers = Vec::new();
    let mut searches = Vec::new();
    let mut options = Vec::new();
    for line in host.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("nameserver") => servers.extend(words.next().map(str::to_owned)),
            Some("search" | "domain") => searches = words.map(str::to_owned).collect(),
            Some("options") => options.extend(words.map(str::to_owned)),
            _ => {}
        }
    }
    servers.truncate(3);
    let empty = dns.servers.is_empty() && dns.searches.is_empty() && dns.options.is_empty();
    empty || (dns.servers == servers && dns.searches == searches && dns.options == options)
}

fn port_binding(i: usize, p: &cri::PortMapping) -> Result<PortBinding, Status> {
    let field = format!("config.port_mappings[{i}]");
    let protocol = match p.protocol {
        0 => "tcp",
        1 => "udp",
        _ => {
            return Err(unsupported(
                &format!("{field}.protocol"),
                "only TCP and UDP",
            ));
        }
    };
    let container_port = u16::try_from(p.container_port)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| {
            invalid(
                &format!("{field}.container_port"),
                "not a port (1 to 65535)",
            )
        })?;
    let host_port = u16::try_from(p.host_port)
        .map_err(|_| invalid(&format!("{field}.host_port"), "not a port (0 to 65535)"))?;
    if !p.host_ip.is_empty() && p.host_ip.parse::<std::net::IpAddr>().is_err() {
        return Err(invalid(&format!("{field}.host_ip"), "not an IP address"));
    }
    Ok(PortBinding {
        container_port,
        protocol: protocol.to_owned(),
        host_ip: p.host_ip.clone(),
        host_port,
        by_publish_all: false,
    })
}

/// Whether the pause runs without a seccomp filter: the pod's own profile,
/// as containerd's plugin applies it to the pause (it was checked and then
/// not applied: an Unconfined pod ran its pause confined).
// The deprecated path is still read, as below.
#[allow(deprecated)]
fn sandbox_seccomp_unconfined(s: &cri::LinuxSandboxSecurityContext) -> Result<bool, Status> {
    seccomp_unconfined(
        "config.linux.security_context.seccomp",
        s.seccomp.as_ref(),
        &s.seccomp_profile_path,
    )
}

/// What of a pod's security context holdfast cannot apply is refused by
/// name: SELinux labels, AppArmor, seccomp profiles other than the
/// runtime's default and none, user namespaces.
// The deprecated fields are still read, so that an older client's are
// honoured or refused, never ignored.
#[allow(deprecated)]
fn sandbox_security_supported(s: &cri::LinuxSandboxSecurityContext) -> Result<(), Status> {
    const FIELD: &str = "config.linux.security_context";
    if s.selinux_options
        .as_ref()
        .is_some_and(|o| *o != cri::SeLinuxOption::default())
    {
        return Err(unsupported(
            &format!("{FIELD}.selinux_options"),
            "no SELinux on this runtime",
        ));
    }
    if s.namespace_options
        .as_ref()
        .is_some_and(|o| o.userns_options.as_ref().is_some_and(|u| u.mode != 0))
    {
        return Err(unsupported(
            &format!("{FIELD}.namespace_options.userns_options"),
            "user namespaces",
        ));
    }
    apparmor_supported(&format!("{FIELD}.apparmor"), s.apparmor.as_ref(), "")
}

/// Whether a sandbox's or container's seccomp profile is `Unconfined`
/// (or the deprecated path `unconfined`). `RuntimeDefault` (the runtime's
/// default profile, which holdfast applies to every container that is not
/// privileged) and `Unconfined` are what holdfast can honour; a
/// `Localhost` profile is refused by name. Neither given is holdfast's
/// default profile (containerd's plugin reads it as unconfined; kubelet
/// always names one).
pub(crate) fn seccomp_unconfined(
    field: &str,
    profile: Option<&cri::SecurityProfile>,
    path: &str,
) -> Result<bool, Status> {
    if !path.is_empty()
        && path != "runtime/default"
        && path != "docker/default"
        && path != "unconfined"
    {
        return Err(unsupported(
            field,
            format!("the profile {path:?} (only runtime/default and unconfined)"),
        ));
    }
    match profile.map(|p| p.profile_type) {
        None | Some(0) => Ok(path == "unconfined"),
        Some(1) => Ok(true),
        Some(_) => Err(unsupported(
            field,
            "Localhost profiles (only RuntimeDefault and Unconfined)",
        )),
    }
}

pub(crate) fn apparmor_supported(
    field: &str,
    profile: Option<&cri::SecurityProfile>,
    name: &str,
) -> Result<(), Status> {
    // holdfast loads no AppArmor profile: what it honours is none
    // (`Unconfined`), and the runtime's default only where the host has
    // no AppArmor, so that the two are the same.
    let no_apparmor = !std::path::Path::new("/sys/kernel/security/apparmor").exists();
    let honoured = match profile.map(|p| p.profile_type) {
        None => true,
        Some(0) => no_apparmor,
        Some(1) => true,
        Some(_) => false,
    };
    if !honoured || (!name.is_empty() && name != "unconfined") {
        return Err(unsupported(field, "AppArmor profiles (only Unconfined)"));
    }
    Ok(())
}

/// `run_as_user`/`run_as_group` as the container's `uid[:gid]`.
pub(crate) fn run_as(
    field: &str,
    user: Option<cri::Int64Value>,
    group: Option<cri::Int64Value>,
) -> Result<Option<String>, Status> {
    let id = |what: &str, v: i64| {
        u32::try_from(v)
            .map_err(|_| invalid(&format!("{field}.{what}"), format!("{v} is not a uid/gid")))
    };
    match (user, group) {
        (None, None) => Ok(None),
        (Some(u), None) => Ok(Some(id("run_as_user", u.value)?.to_string())),
        (Some(u), Some(g)) => Ok(Some(format!(
            "{}:{}",
            id("run_as_user", u.value)?,
            id("run_as_group", g.value)?
        ))),
        (None, Some(_)) => Err(invalid(
            &format!("{field}.run_as_group"),
            "needs run_as_user",
        )),
    }
}

/// A sandbox is ready while its pause runs.
fn sandbox_state(s: &Snapshot) -> i32 {
    if s.status == Run::Running {
        cri::PodSandboxState::SandboxReady as i32
    } else {
        cri::PodSandboxState::SandboxNotready as i32
    }
}

fn metadata(pod: &PodMember) -> cri::PodSandboxMetadata {
    cri::PodSandboxMetadata {
        name: pod.pod_name.clone(),
        uid: pod.pod_uid.clone(),
        namespace: pod.pod_namespace.clone(),
        attempt: pod.attempt,
    }
}

fn namespace_options(config: &ContainerConfig) -> cri::NamespaceOption {
    let mode = |m: &NamespaceMode| match m {
        NamespaceMode::Host => ns::NODE,
        _ => ns::POD,
    };
    cri::NamespaceOption {
        network: if config.network == NetworkMode::Host {
            ns::NODE
        } else {
            ns::POD
        },
        pid: match config.namespaces.pid {
            NamespaceMode::Host => ns::NODE,
            _ => ns::CONTAINER,
        },
        ipc: mode(&config.namespaces.ipc),
        target_id: String::new(),
        userns_options: None,
    }
}

pub(crate) fn to_map(m: &std::collections::BTreeMap<String, String>) -> HashMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Every label of the selector is on the object, with the same value.
pub(crate) fn labels_match(
    selector: &HashMap<String, String>,
    labels: &std::collections::BTreeMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pods_seccomp_profile_is_its_pauses() {
        let pod = |seccomp: Option<i32>| cri::PodSandboxConfig {
            metadata: Some(cri::PodSandboxMetadata {
                name: "p".into(),
                uid: "u".into(),
                namespace: "n".into(),
                attempt: 0,
            }),
            linux: Some(cri::LinuxPodSandboxConfig {
                security_context: Some(cri::LinuxSandboxSecurityContext {
                    seccomp: seccomp.map(|profile_type| cri::SecurityProfile {
                        profile_type,
                        ..cri::SecurityProfile::default()
                    }),
                    ..cri::LinuxSandboxSecurityContext::default()
                }),
                ..cri::LinuxPodSandboxConfig::default()
            }),
            ..cri::PodSandboxConfig::default()
        };
        let unconfined =
            |seccomp| sandbox_config(pod(seccomp)).map(|(_, c)| c.security.seccomp_unconfined);
        assert_eq!(unconfined(Some(1)).ok(), Some(true));
        assert_eq!(unconfined(Some(0)).ok(), Some(false));
        assert_eq!(unconfined(None).ok(), Some(false));
        let localhost = unconfined(Some(2)).expect_err("a Localhost profile is refused");
        assert!(
            localhost
                .message()
                .contains("config.linux.security_context.seccomp")
        );
    }

    #[test]
    fn a_host_network_pod_takes_only_the_hosts_resolver() {
        let host = "# comment\nnameserver 10.0.0.2\nnameserver 10.0.0.3\nnameserver 10.0.0.4\nnameserver 10.0.0.5\nsearch lan corp\noptions ndots:2\n";
        let dns = |servers: &[&str], searches: &[&str], options: &[&str]| cri::DnsConfig {
            servers: servers.iter().map(|s| (*s).to_owned()).collect(),
            searches: searches.iter().map(|s| (*s).to_owned()).collect(),
            options: options.iter().map(|s| (*s).to_owned()).collect(),
        };
        let node = dns(
            &["10.0.0.2", "10.0.0.3", "10.0.0.4"],
            &["lan", "corp"],
            &["ndots:2"],
        );
        assert!(is_hosts_resolver(&node, host));
        assert!(is_hosts_resolver(&dns(&[], &[], &[]), host));
        let cluster = dns(
            &["10.96.0.10"],
            &["default.svc.cluster.local"],
            &["ndots:5"],
        );
        assert!(!is_hosts_resolver(&cluster, host));
    }
}
