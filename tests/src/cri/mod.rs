//! The CRI suites' client: the CRI's own generated client over a daemon's
//! `cri.sock`, as kubelet holds it (one channel, reconnecting by itself
//! when holdfastd restarts), and the steps the suites share on pods and
//! their containers. Every failure message carries the daemon's
//! diagnostics.

pub mod runtimes;

use crate::{Daemon, POLL_INTERVAL, WAIT_BOUND};
use k8s_cri::v1 as cri;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use runtimes::Diagnose;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tonic::transport::{Channel, Endpoint, Uri};

/// One channel to a CRI socket: it connects at its first request and
/// again after holdfastd restarts (the socket is made again at the same
/// path), as kubelet's does.
pub fn channel(socket: PathBuf) -> Channel {
    Endpoint::from_static("http://holdfast.invalid")
        .connect_timeout(Duration::from_secs(2))
        .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
}

/// What kubelet sends for a busybox container named `name` running
/// `script` (`sh -c`), its log at `<name>/0.log` under the pod's log
/// directory.
pub fn busybox(name: &str, script: &str) -> cri::ContainerConfig {
    cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: name.to_owned(),
            attempt: 0,
        }),
        image: Some(cri::ImageSpec {
            image: "busybox:latest".to_owned(),
            ..cri::ImageSpec::default()
        }),
        command: vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()],
        log_path: format!("{name}/0.log"),
        ..cri::ContainerConfig::default()
    }
}

/// `config` with its pod on the host's network (namespace mode NODE):
/// what a daemon without a bridge network can run. The rest of its
/// security context is the default.
pub fn on_host_network(mut config: cri::PodSandboxConfig) -> cri::PodSandboxConfig {
    config.linux = Some(cri::LinuxPodSandboxConfig {
        security_context: Some(cri::LinuxSandboxSecurityContext {
            namespace_options: Some(cri::NamespaceOption {
                network: cri::NamespaceMode::Node as i32,
                ..cri::NamespaceOption::default()
            }),
            ..cri::LinuxSandboxSecurityContext::default()
        }),
        ..cri::LinuxPodSandboxConfig::default()
    });
    config
}

/// The namespaces of the pods the chaos suite and the benchmark run: the
/// host's network (no bridge, no CNI plugin measured), each container's
/// processes its own (its script is pid 1).
pub fn host_namespaces() -> cri::NamespaceOption {
    cri::NamespaceOption {
        network: cri::NamespaceMode::Node as i32,
        pid: cri::NamespaceMode::Container as i32,
        ..cri::NamespaceOption::default()
    }
}

/// A pod `name` in the Kubernetes namespace `namespace` with
/// [`host_namespaces`], its log directory under `logs`.
pub fn host_pod(name: &str, namespace: &str, logs: &std::path::Path) -> cri::PodSandboxConfig {
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.to_owned(),
            uid: format!("uid-{name}"),
            namespace: namespace.to_owned(),
            attempt: 0,
        }),
        log_directory: logs.join(name).display().to_string(),
        linux: Some(cri::LinuxPodSandboxConfig {
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(host_namespaces()),
                ..cri::LinuxSandboxSecurityContext::default()
            }),
            ..cri::LinuxPodSandboxConfig::default()
        }),
        ..cri::PodSandboxConfig::default()
    }
}

/// Both CRI clients on one channel to the daemon's `cri.sock`.
#[derive(Clone, Debug)]
pub struct Cri {
    pub runtime: RuntimeServiceClient<Channel>,
    pub images: ImageServiceClient<Channel>,
}

impl Cri {
    /// Clients of `d`'s CRI socket.
    pub fn of(d: &Daemon) -> Cri {
        Cri::on(d.exec_root().join("cri.sock"))
    }

    /// Clients of the CRI socket at `socket`.
    pub fn on(socket: PathBuf) -> Cri {
        let channel = channel(socket);
        Cri {
            runtime: RuntimeServiceClient::new(channel.clone()),
            images: ImageServiceClient::new(channel),
        }
    }

    /// `RunPodSandbox`; the pod's id. Panics (with the logs) on a refusal.
    pub async fn run_pod(
        &mut self,
        d: &(impl Diagnose + ?Sized),
        config: cri::PodSandboxConfig,
    ) -> String {
        let r = self
            .runtime
            .run_pod_sandbox(cri::RunPodSandboxRequest {
                config: Some(config),
                runtime_handler: String::new(),
            })
            .await
            .unwrap_or_else(|e| panic!("RunPodSandbox: {e}{}", d.diagnostics()));
        r.into_inner().pod_sandbox_id
    }

    /// `StopPodSandbox` then `RemovePodSandbox`: what a suite on a bridge
    /// does last, so that the pod's network (its NAT rules, host-wide)
    /// goes with it. Panics (with the logs) on a refusal.
    pub async fn remove_pod(&mut self, d: &(impl Diagnose + ?Sized), pod: &str) {
        self.runtime
            .stop_pod_sandbox(cri::StopPodSandboxRequest {
                pod_sandbox_id: pod.to_owned(),
            })
            .await
            .unwrap_or_else(|e| panic!("StopPodSandbox {pod}: {e}{}", d.diagnostics()));
        self.runtime
            .remove_pod_sandbox(cri::RemovePodSandboxRequest {
                pod_sandbox_id: pod.to_owned(),
            })
            .await
            .unwrap_or_else(|e| panic!("RemovePodSandbox {pod}: {e}{}", d.diagnostics()));
    }

    /// `CreateContainer` in `pod`; the container's id.
    pub async fn create(
        &mut self,
        d: &(impl Diagnose + ?Sized),
        pod: &str,
        config: cri::ContainerConfig,
    ) -> String {
        self.create_with(d, pod, None, config).await
    }

    /// `CreateContainer` in `pod` with the pod's config beside it, as
    /// kubelet sends it (containerd 1.6's plugin dereferences it unchecked:
    /// without it, containerd crashes).
    pub async fn create_with(
        &mut self,
        d: &(impl Diagnose + ?Sized),
        pod: &str,
        sandbox_config: Option<cri::PodSandboxConfig>,
        config: cri::ContainerConfig,
    ) -> String {
        let r = self
            .runtime
            .create_container(cri::CreateContainerRequest {
                pod_sandbox_id: pod.to_owned(),
                config: Some(config),
                sandbox_config,
            })
            .await
            .unwrap_or_else(|e| panic!("CreateContainer: {e}{}", d.diagnostics()));
        r.into_inner().container_id
    }

    /// `StartContainer`.
    pub async fn start(&mut self, d: &(impl Diagnose + ?Sized), id: &str) {
        self.runtime
            .start_container(cri::StartContainerRequest {
                container_id: id.to_owned(),
            })
            .await
            .unwrap_or_else(|e| panic!("StartContainer {id}: {e}{}", d.diagnostics()));
    }

    /// `ContainerStatus`, refusals returned.
    pub async fn status(&mut self, id: &str) -> Result<cri::ContainerStatus, tonic::Status> {
        let r = self
            .runtime
            .container_status(cri::ContainerStatusRequest {
                container_id: id.to_owned(),
                verbose: false,
            })
            .await?;
        Ok(r.into_inner().status.unwrap_or_default())
    }

    /// `PodSandboxStatus`, refusals returned.
    pub async fn pod_status(&mut self, id: &str) -> Result<cri::PodSandboxStatus, tonic::Status> {
        let r = self
            .runtime
            .pod_sandbox_status(cri::PodSandboxStatusRequest {
                pod_sandbox_id: id.to_owned(),
                verbose: false,
            })
            .await?;
        Ok(r.into_inner().status.unwrap_or_default())
    }

    /// Polls `ContainerStatus` until the container has exited; panics
    /// with the logs past [`WAIT_BOUND`].
    pub async fn wait_exited(
        &mut self,
        d: &(impl Diagnose + ?Sized),
        id: &str,
    ) -> cri::ContainerStatus {
        let mut last = None;
        if self.exited_within(id, WAIT_BOUND, &mut last).await
            && let Some(Ok(s)) = last
        {
            return s;
        }
        panic!("container {id} did not exit: {last:?}{}", d.diagnostics())
    }

    /// Polls `ContainerStatus` for at most `bound` until the container has
    /// exited; whether it did, the last answer in `last`.
    pub async fn exited_within(
        &mut self,
        id: &str,
        bound: Duration,
        last: &mut Option<Result<cri::ContainerStatus, tonic::Status>>,
    ) -> bool {
        let deadline = Instant::now() + bound;
        loop {
            let s = self.status(id).await;
            let exited = s
                .as_ref()
                .is_ok_and(|s| s.state == cri::ContainerState::ContainerExited as i32);
            *last = Some(s);
            if exited {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Every pod sandbox listed.
    pub async fn pods(&mut self) -> Vec<cri::PodSandbox> {
        let r = self
            .runtime
            .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None })
            .await
            .expect("ListPodSandbox");
        r.into_inner().items
    }

    /// The containers listed through `filter`.
    pub async fn containers(
        &mut self,
        filter: Option<cri::ContainerFilter>,
    ) -> Vec<cri::Container> {
        let r = self
            .runtime
            .list_containers(cri::ListContainersRequest { filter })
            .await
            .expect("ListContainers");
        r.into_inner().containers
    }
}
