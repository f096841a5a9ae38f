//! The two gRPC services, method by method: each parses its request,
//! makes one call (in `pods.rs`, `containers.rs`, `images.rs`) and answers.
//! `Version` and `Status` are here; what holdfast does not serve yet
//! answers `Unimplemented`, never a made-up success.

use crate::Cri;
use crate::status::status;
use holdfast_core::ConnectionState;
use k8s_cri::v1 as cri;
use k8s_cri::v1::image_service_server::ImageService;
use k8s_cri::v1::runtime_service_server::RuntimeService;
use std::collections::HashMap;
use std::pin::Pin;
use tonic::{Request, Response, Status};

type Answer<T> = Result<Response<T>, Status>;

/// The CRI version this server speaks.
const RUNTIME_API_VERSION: &str = "v1";

fn not_served<T>(method: &str) -> Answer<T> {
    Err(Status::unimplemented(format!(
        "{method} is not served by holdfast yet"
    )))
}

#[tonic::async_trait]
impl RuntimeService for Cri {
    async fn version(&self, _: Request<cri::VersionRequest>) -> Answer<cri::VersionResponse> {
        Ok(Response::new(cri::VersionResponse {
            version: "0.1.0".to_owned(),
            runtime_name: "holdfast".to_owned(),
            runtime_version: env!("CARGO_PKG_VERSION").to_owned(),
            runtime_api_version: RUNTIME_API_VERSION.to_owned(),
        }))
    }

    async fn status(&self, _: Request<cri::StatusRequest>) -> Answer<cri::StatusResponse> {
        let info = self.engine.system().info().await.map_err(status)?;
        let runtime_ready = info.connection == ConnectionState::Ready;
        let network = self.engine.networks().not_ready();
        let condition =
            |kind: &str, ready: bool, reason: &str, message: String| cri::RuntimeCondition {
                r#type: kind.to_owned(),
                status: ready,
                reason: if ready {
                    String::new()
                } else {
                    reason.to_owned()
                },
                message,
            };
        Ok(Response::new(cri::StatusResponse {
            status: Some(cri::RuntimeStatus {
                conditions: vec![
                    condition(
                        "RuntimeReady",
                        runtime_ready,
                        "ContainerdUnreachable",
                        if runtime_ready {
                            String::new()
                        } else {
                            "containerd does not answer; what was asked is kept and carried out when it is back".to_owned()
                        },
                    ),
                    condition(
                        "NetworkReady",
                        network.is_none(),
                        "NetworkPluginNotReady",
                        network.unwrap_or_default(),
                    ),
                ],
            }),
            info: HashMap::new(),
            runtime_handlers: vec![cri::RuntimeHandler {
                name: String::new(),
                features: Some(cri::RuntimeHandlerFeatures {
                    recursive_read_only_mounts: false,
                    user_namespaces: false,
                }),
            }],
            features: Some(cri::RuntimeFeatures {
                supplemental_groups_policy: false,
            }),
        }))
    }

    async fn run_pod_sandbox(
        &self,
        r: Request<cri::RunPodSandboxRequest>,
    ) -> Answer<cri::RunPodSandboxResponse> {
        Ok(Response::new(self.run_pod_sandbox(r.into_inner()).await?))
    }

    async fn stop_pod_sandbox(
        &self,
        r: Request<cri::StopPodSandboxRequest>,
    ) -> Answer<cri::StopPodSandboxResponse> {
        self.stop_pod_sandbox(&r.into_inner().pod_sandbox_id)
            .await?;
        Ok(Response::new(cri::StopPodSandboxResponse {}))
    }

    async fn remove_pod_sandbox(
        &self,
        r: Request<cri::RemovePodSandboxRequest>,
    ) -> Answer<cri::RemovePodSandboxResponse> {
        self.remove_pod_sandbox(&r.into_inner().pod_sandbox_id)
            .await?;
        Ok(Response::new(cri::RemovePodSandboxResponse {}))
    }

    async fn pod_sandbox_status(
        &self,
        r: Request<cri::PodSandboxStatusRequest>,
    ) -> Answer<cri::PodSandboxStatusResponse> {
        let r = r.into_inner();
        Ok(Response::new(
            self.pod_sandbox_status(&r.pod_sandbox_id).await?,
        ))
    }

    async fn list_pod_sandbox(
        &self,
        r: Request<cri::ListPodSandboxRequest>,
    ) -> Answer<cri::ListPodSandboxResponse> {
        let items = self.list_pod_sandbox(r.into_inner().filter).await?;
        Ok(Response::new(cri::ListPodSandboxResponse { items }))
    }

    async fn create_container(
        &self,
        r: Request<cri::CreateContainerRequest>,
    ) -> Answer<cri::CreateContainerResponse> {
        Ok(Response::new(self.create_container(r.into_inner()).await?))
    }

    async fn start_container(
        &self,
        r: Request<cri::StartContainerRequest>,
    ) -> Answer<cri::StartContainerResponse> {
        self.start_container(&r.into_inner().container_id).await?;
        Ok(Response::new(cri::StartContainerResponse {}))
    }

    async fn stop_container(
        &self,
        r: Request<cri::StopContainerRequest>,
    ) -> Answer<cri::StopContainerResponse> {
        let r = r.into_inner();
        self.stop_container(&r.container_id, r.timeout).await?;
        Ok(Response::new(cri::StopContainerResponse {}))
    }

    async fn remove_container(
        &self,
        r: Request<cri::RemoveContainerRequest>,
    ) -> Answer<cri::RemoveContainerResponse> {
        self.remove_container(&r.into_inner().container_id).await?;
        Ok(Response::new(cri::RemoveContainerResponse {}))
    }

    async fn list_containers(
        &self,
        r: Request<cri::ListContainersRequest>,
    ) -> Answer<cri::ListContainersResponse> {
        let containers = self.list_containers(r.into_inner().filter).await?;
        Ok(Response::new(cri::ListContainersResponse { containers }))
    }

    async fn container_status(
        &self,
        r: Request<cri::ContainerStatusRequest>,
    ) -> Answer<cri::ContainerStatusResponse> {
        let status = self.container_status(&r.into_inner().container_id).await?;
        Ok(Response::new(cri::ContainerStatusResponse {
            status: Some(status),
            info: HashMap::new(),
        }))
    }

    async fn update_container_resources(
        &self,
        r: Request<cri::UpdateContainerResourcesRequest>,
    ) -> Answer<cri::UpdateContainerResourcesResponse> {
        let r = r.into_inner();
        if !r.annotations.is_empty() {
            return Err(crate::status::unsupported(
                "annotations",
                "annotations in an update",
            ));
        }
        self.update_container_resources(&r.container_id, r.linux, r.windows.is_some())
            .await?;
        Ok(Response::new(cri::UpdateContainerResourcesResponse {}))
    }

    async fn reopen_container_log(
        &self,
        r: Request<cri::ReopenContainerLogRequest>,
    ) -> Answer<cri::ReopenContainerLogResponse> {
        self.reopen_container_log(&r.into_inner().container_id)
            .await?;
        Ok(Response::new(cri::ReopenContainerLogResponse {}))
    }

    async fn exec_sync(&self, r: Request<cri::ExecSyncRequest>) -> Answer<cri::ExecSyncResponse> {
        Ok(Response::new(self.exec_sync(r.into_inner()).await?))
    }

    async fn exec(&self, r: Request<cri::ExecRequest>) -> Answer<cri::ExecResponse> {
        let url = self.exec_url(r.into_inner()).await?;
        Ok(Response::new(cri::ExecResponse { url }))
    }

    async fn attach(&self, r: Request<cri::AttachRequest>) -> Answer<cri::AttachResponse> {
        let url = self.attach_url(r.into_inner()).await?;
        Ok(Response::new(cri::AttachResponse { url }))
    }

    async fn port_forward(
        &self,
        r: Request<cri::PortForwardRequest>,
    ) -> Answer<cri::PortForwardResponse> {
        let url = self.port_forward_url(r.into_inner()).await?;
        Ok(Response::new(cri::PortForwardResponse { url }))
    }

    async fn container_stats(
        &self,
        r: Request<cri::ContainerStatsRequest>,
    ) -> Answer<cri::ContainerStatsResponse> {
        let stats = self.container_stats(&r.into_inner().container_id).await?;
        Ok(Response::new(cri::ContainerStatsResponse {
            stats: Some(stats),
        }))
    }

    async fn list_container_stats(
        &self,
        r: Request<cri::ListContainerStatsRequest>,
    ) -> Answer<cri::ListContainerStatsResponse> {
        let stats = self.list_container_stats(r.into_inner().filter).await?;
        Ok(Response::new(cri::ListContainerStatsResponse { stats }))
    }

    async fn pod_sandbox_stats(
        &self,
        r: Request<cri::PodSandboxStatsRequest>,
    ) -> Answer<cri::PodSandboxStatsResponse> {
        let stats = self
            .pod_sandbox_stats(&r.into_inner().pod_sandbox_id)
            .await?;
        Ok(Response::new(cri::PodSandboxStatsResponse {
            stats: Some(stats),
        }))
    }

    async fn list_pod_sandbox_stats(
        &self,
        r: Request<cri::ListPodSandboxStatsRequest>,
    ) -> Answer<cri::ListPodSandboxStatsResponse> {
        let stats = self.list_pod_sandbox_stats(r.into_inner().filter).await?;
        Ok(Response::new(cri::ListPodSandboxStatsResponse { stats }))
    }

    /// kubelet tells the pod CIDR it was given: holdfast's pods get their
    /// addresses from the default bridge network's subnet, so a CIDR is
    /// taken when it is that subnet and refused by name otherwise.
    async fn update_runtime_config(
        &self,
        r: Request<cri::UpdateRuntimeConfigRequest>,
    ) -> Answer<cri::UpdateRuntimeConfigResponse> {
        let cidr = r
            .into_inner()
            .runtime_config
            .and_then(|c| c.network_config)
            .map(|n| n.pod_cidr)
            .unwrap_or_default();
        let subnet = self.engine.networks().default_subnet();
        if !cidr.is_empty() && cidr != subnet {
            return Err(crate::status::unsupported(
                "runtime_config.network_config.pod_cidr",
                format!(
                    "{cidr}: pods get addresses from the bridge network's subnet {subnet} (holdfastd --bridge-subnet {cidr})"
                ),
            ));
        }
        Ok(Response::new(cri::UpdateRuntimeConfigResponse {}))
    }

    async fn checkpoint_container(
        &self,
        _: Request<cri::CheckpointContainerRequest>,
    ) -> Answer<cri::CheckpointContainerResponse> {
        not_served("CheckpointContainer")
    }

    type GetContainerEventsStream = Pin<
        Box<dyn futures_util::Stream<Item = Result<cri::ContainerEventResponse, Status>> + Send>,
    >;

    async fn get_container_events(
        &self,
        _: Request<cri::GetEventsRequest>,
    ) -> Answer<Self::GetContainerEventsStream> {
        let events = self.container_events().await?;
        Ok(Response::new(Box::pin(events)))
    }

    async fn list_metric_descriptors(
        &self,
        _: Request<cri::ListMetricDescriptorsRequest>,
    ) -> Answer<cri::ListMetricDescriptorsResponse> {
        not_served("ListMetricDescriptors")
    }

    async fn list_pod_sandbox_metrics(
        &self,
        _: Request<cri::ListPodSandboxMetricsRequest>,
    ) -> Answer<cri::ListPodSandboxMetricsResponse> {
        not_served("ListPodSandboxMetrics")
    }

    /// The cgroup driver kubelet must match: holdfast makes cgroups as
    /// cgroupfs paths, never through systemd.
    async fn runtime_config(
        &self,
        _: Request<cri::RuntimeConfigRequest>,
    ) -> Answer<cri::RuntimeConfigResponse> {
        Ok(Response::new(cri::RuntimeConfigResponse {
            linux: Some(cri::LinuxRuntimeConfiguration {
                cgroup_driver: cri::CgroupDriver::Cgroupfs as i32,
            }),
        }))
    }
}

#[tonic::async_trait]
impl ImageService for Cri {
    async fn list_images(
        &self,
        r: Request<cri::ListImagesRequest>,
    ) -> Answer<cri::ListImagesResponse> {
        let images = self.list_images(r.into_inner().filter).await?;
        Ok(Response::new(cri::ListImagesResponse { images }))
    }

    async fn image_status(
        &self,
        r: Request<cri::ImageStatusRequest>,
    ) -> Answer<cri::ImageStatusResponse> {
        let image = self.image_status(r.into_inner().image).await?;
        Ok(Response::new(cri::ImageStatusResponse {
            image,
            info: HashMap::new(),
        }))
    }

    async fn pull_image(
        &self,
        r: Request<cri::PullImageRequest>,
    ) -> Answer<cri::PullImageResponse> {
        let r = r.into_inner();
        let image_ref = self.pull_image(r.image, r.auth).await?;
        Ok(Response::new(cri::PullImageResponse { image_ref }))
    }

    async fn remove_image(
        &self,
        r: Request<cri::RemoveImageRequest>,
    ) -> Answer<cri::RemoveImageResponse> {
        self.remove_image(r.into_inner().image).await?;
        Ok(Response::new(cri::RemoveImageResponse {}))
    }

    async fn image_fs_info(
        &self,
        _: Request<cri::ImageFsInfoRequest>,
    ) -> Answer<cri::ImageFsInfoResponse> {
        Ok(Response::new(self.image_fs_info().await?))
    }
}
