//! `ContainerStats`, `ListContainerStats`, `PodSandboxStats`,
//! `ListPodSandboxStats`: what a pod's containers use, sampled from their
//! cgroups as `docker stats` samples them. What no sample gives (CPU use
//! per second, which needs two samples; the writable layer; the pod's
//! network) is left out, not made up.

use crate::Cri;
use crate::containers::member_of;
use crate::pods::{labels_match, to_map};
use crate::status::status;
use holdfast_core::PodRole;
use holdfast_engine::backend::containers::Snapshot;
use k8s_cri::v1 as cri;
use tonic::Status;

impl Cri {
    pub(crate) async fn container_stats(&self, id: &str) -> Result<cri::ContainerStats, Status> {
        let s = self
            .member(id)
            .await?
            .ok_or_else(|| Status::not_found(format!("container {id:?} not found")))?;
        self.stats_of(&s).await
    }

    pub(crate) async fn list_container_stats(
        &self,
        filter: Option<cri::ContainerStatsFilter>,
    ) -> Result<Vec<cri::ContainerStats>, Status> {
        let filter = filter.unwrap_or_default();
        let all = self.engine.containers().snapshots().await.map_err(status)?;
        let mut out = Vec::new();
        for s in &all {
            let Some((_, sandbox, _)) = member_of(s) else {
                continue;
            };
            if (filter.id.is_empty() || s.record.id.as_str().starts_with(&filter.id))
                && (filter.pod_sandbox_id.is_empty() || sandbox.starts_with(&filter.pod_sandbox_id))
                && labels_match(&filter.label_selector, &s.record.config.labels)
            {
                match self.stats_of(s).await {
                    Ok(stats) => out.push(stats),
                    // Removed since the listing: not listed.
                    Err(e) if e.code() == tonic::Code::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(out)
    }

    pub(crate) async fn pod_sandbox_stats(&self, id: &str) -> Result<cri::PodSandboxStats, Status> {
        let sandbox = self
            .sandbox(id)
            .await?
            .ok_or_else(|| Status::not_found(format!("pod sandbox {id:?} not found")))?;
        self.pod_stats_of(&sandbox).await
    }

    pub(crate) async fn list_pod_sandbox_stats(
        &self,
        filter: Option<cri::PodSandboxStatsFilter>,
    ) -> Result<Vec<cri::PodSandboxStats>, Status> {
        let filter = filter.unwrap_or_default();
        let all = self.engine.containers().snapshots().await.map_err(status)?;
        let mut out = Vec::new();
        for s in &all {
            let sandbox = s
                .record
                .config
                .pod
                .as_ref()
                .is_some_and(|p| p.role == PodRole::Sandbox);
            if sandbox
                && (filter.id.is_empty() || s.record.id.as_str().starts_with(&filter.id))
                && labels_match(&filter.label_selector, &s.record.config.labels)
            {
                match self.pod_stats_of(s).await {
                    Ok(stats) => out.push(stats),
                    Err(e) if e.code() == tonic::Code::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(out)
    }

    async fn stats_of(&self, s: &Snapshot) -> Result<cri::ContainerStats, Status> {
        let (pod, _, name) =
            member_of(s).ok_or_else(|| Status::not_found("not a pod's container"))?;
        let (cpu, memory) = self.usage(s).await?;
        Ok(cri::ContainerStats {
            attributes: Some(cri::ContainerAttributes {
                id: s.record.id.to_string(),
                metadata: Some(cri::ContainerMetadata {
                    name: name.to_owned(),
                    attempt: pod.attempt,
                }),
                labels: to_map(&s.record.config.labels),
                annotations: to_map(&pod.annotations),
            }),
            cpu,
            memory,
            writable_layer: None,
            swap: None,
        })
    }

    /// The pod's use: its containers', and the sandbox's own, summed.
    async fn pod_stats_of(&self, sandbox: &Snapshot) -> Result<cri::PodSandboxStats, Status> {
        let Some(pod) = sandbox.record.config.pod.as_ref() else {
            return Err(Status::not_found("not a pod sandbox"));
        };
        let mut containers = Vec::new();
        for m in self.members(sandbox.record.id.as_str()).await? {
            match self.stats_of(&m).await {
                Ok(stats) => containers.push(stats),
                Err(e) if e.code() == tonic::Code::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        let (own_cpu, own_memory) = self.usage(sandbox).await?;
        let cpu = sum_cpu(
            own_cpu
                .iter()
                .chain(containers.iter().filter_map(|c| c.cpu.as_ref())),
        );
        let memory = sum_memory(
            own_memory
                .iter()
                .chain(containers.iter().filter_map(|c| c.memory.as_ref())),
        );
        Ok(cri::PodSandboxStats {
            attributes: Some(cri::PodSandboxAttributes {
                id: sandbox.record.id.to_string(),
                metadata: Some(cri::PodSandboxMetadata {
                    name: pod.pod_name.clone(),
                    uid: pod.pod_uid.clone(),
                    namespace: pod.pod_namespace.clone(),
                    attempt: pod.attempt,
                }),
                labels: to_map(&sandbox.record.config.labels),
                annotations: to_map(&pod.annotations),
            }),
            linux: Some(cri::LinuxPodSandboxStats {
                cpu,
                memory,
                network: None,
                process: None,
                containers,
            }),
            windows: None,
        })
    }

    /// A sample of the container's cgroup; none while it does not run.
    async fn usage(
        &self,
        s: &Snapshot,
    ) -> Result<(Option<cri::CpuUsage>, Option<cri::MemoryUsage>), Status> {
        let source = self
            .engine
            .containers()
            .stats(s.record.id.as_str())
            .await
            .map_err(status)?;
        let Some((sample, _)) = source.sample() else {
            return Ok((None, None));
        };
        let timestamp = now_nanos();
        let value = |v: Option<u64>| v.map(|value| cri::UInt64Value { value });
        let cpu = cri::CpuUsage {
            timestamp,
            usage_core_nano_seconds: value(sample.cpu["cpu_usage"]["total_usage"].as_u64()),
            usage_nano_cores: None,
        };
        let memory = &sample.memory;
        let usage = memory["usage"].as_u64();
        let stat = |keys: &[&str]| keys.iter().find_map(|k| memory["stats"][*k].as_u64());
        // The working set, as kubelet counts it: usage less inactive file pages.
        let inactive = stat(&["inactive_file", "total_inactive_file"]).unwrap_or(0);
        let working_set = usage.map(|u| u.saturating_sub(inactive));
        let limit = memory["limit"].as_u64();
        let memory = cri::MemoryUsage {
            timestamp,
            working_set_bytes: value(working_set),
            available_bytes: value(limit.zip(working_set).map(|(l, w)| l.saturating_sub(w))),
            usage_bytes: value(usage),
            rss_bytes: value(stat(&["anon", "total_rss", "rss"])),
            page_faults: value(stat(&["pgfault", "total_pgfault"])),
            major_page_faults: value(stat(&["pgmajfault", "total_pgmajfault"])),
        };
        Ok((Some(cpu), Some(memory)))
    }
}

fn sum_cpu<'a>(all: impl Iterator<Item = &'a cri::CpuUsage>) -> Option<cri::CpuUsage> {
    let mut total: Option<cri::CpuUsage> = None;
    for c in all {
        let t = total.get_or_insert(cri::CpuUsage {
            timestamp: c.timestamp,
            usage_core_nano_seconds: Some(cri::UInt64Value { value: 0 }),
            usage_nano_cores: None,
        });
        add(&mut t.usage_core_nano_seconds, &c.usage_core_nano_seconds);
    }
    total
}

fn sum_memory<'a>(all: impl Iterator<Item = &'a cri::MemoryUsage>) -> Option<cri::MemoryUsage> {
    let mut total: Option<cri::MemoryUsage> = None;
    for m in all {
        let zero = || Some(cri::UInt64Value { value: 0 });
        let t = total.get_or_insert_with(|| cri::MemoryUsage {
            timestamp: m.timestamp,
            working_set_bytes: zero(),
            available_bytes: None,
            usage_bytes: zero(),
            rss_bytes: zero(),
            page_faults: zero(),
            major_page_faults: zero(),
        });
        add(&mut t.working_set_bytes, &m.working_set_bytes);
        add(&mut t.usage_bytes, &m.usage_bytes);
        add(&mut t.rss_bytes, &m.rss_bytes);
        add(&mut t.page_faults, &m.page_faults);
        add(&mut t.major_page_faults, &m.major_page_faults);
    }
    total
}

fn add(total: &mut Option<cri::UInt64Value>, part: &Option<cri::UInt64Value>) {
    if let (Some(t), Some(p)) = (total.as_mut(), part) {
        t.value = t.value.saturating_add(p.value);
    }
}

pub(crate) fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}
