//! The Kubernetes CRI (runtime.v1) of a real holdfastd on a real
//! containerd, driven over its unix socket by the CRI's own generated
//! client, as kubelet drives a runtime: the runtime's version and status,
//! images, a pod whose containers share its network (localhost between
//! them, its IP from the host and from another pod, a port mapping), exits with their codes and
//! reasons, kubelet's idempotent stops and removals, the Docker API kept
//! from changing a pod, a container's exit while containerd is away found
//! once it is back, a pod's stop asked then kept and carried out, and bad
//! input answered with the status kubelet expects, leaving nothing behind.

use holdfast_e2e::cri::{Cri, busybox, on_host_network};
use holdfast_e2e::network::{BridgeDaemon, free_port, http_get, httpd};
use holdfast_e2e::{Daemon, gated_exit, open_gate};
use k8s_cri::v1 as cri;
use std::collections::HashMap;
use std::path::PathBuf;

/// What kubelet sends for a pod named `name`, its logs under the daemon's
/// temporary root.
fn pod_config(d: &Daemon, name: &str, ports: Vec<cri::PortMapping>) -> cri::PodSandboxConfig {
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.to_owned(),
            uid: format!("uid-{name}"),
            namespace: "default".to_owned(),
            attempt: 0,
        }),
        hostname: name.to_owned(),
        log_directory: d
            .root()
            .join(format!("pods/default_{name}"))
            .display()
            .to_string(),
        port_mappings: ports,
        labels: HashMap::from([("app".to_owned(), name.to_owned())]),
        annotations: HashMap::from([("note".to_owned(), "from the test".to_owned())]),
        ..cri::PodSandboxConfig::default()
    }
}

/// [`pod_config`] on the host's network (`NamespaceMode` NODE): what a
/// daemon without a bridge network can run.
fn host_pod_config(d: &Daemon, name: &str) -> cri::PodSandboxConfig {
    on_host_network(pod_config(d, name, Vec::new()))
}

/// A busybox container running `script`, labelled with its role.
fn container_config(name: &str, script: &str) -> cri::ContainerConfig {
    cri::ContainerConfig {
        labels: HashMap::from([("role".to_owned(), name.to_owned())]),
        ..busybox(name, script)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn version_status_and_images() {
    let d = Daemon::start();
    let mut cri = Cri::of(&d);

    let v = cri
        .runtime
        .version(cri::VersionRequest::default())
        .await
        .expect("Version")
        .into_inner();
    assert_eq!(v.runtime_name, "holdfast");
    assert_eq!(v.runtime_api_version, "v1");

    // The test daemon has no bridge network: the runtime is ready, the
    // pod network is not, and says why.
    let status = cri
        .runtime
        .status(cri::StatusRequest::default())
        .await
        .expect("Status")
        .into_inner();
    let conditions = status.status.expect("a status").conditions;
    let condition = |kind: &str| {
        conditions
            .iter()
            .find(|c| c.r#type == kind)
            .unwrap_or_else(|| panic!("no {kind} in {conditions:?}"))
    };
    assert!(condition("RuntimeReady").status, "{conditions:?}");
    let network = condition("NetworkReady");
    assert!(!network.status, "{conditions:?}");
    assert!(network.message.contains("--bridge none"), "{conditions:?}");

    // The pause image is seeded by the first pod (a Docker user who runs
    // none never sees it): then busybox and it (pinned, so kubelet's GC
    // leaves it).
    let before = d.ok(&["images", "--format", "{{.Repository}}"]);
    assert!(!before.contains("pause"), "{before}");
    cri.run_pod(&d, host_pod_config(&d, "first")).await;
    let images = cri
        .images
        .list_images(cri::ListImagesRequest::default())
        .await
        .expect("ListImages")
        .into_inner()
        .images;
    let busybox = images
        .iter()
        .find(|i| {
            i.repo_tags
                .iter()
                .any(|t| t == "docker.io/library/busybox:latest")
        })
        .unwrap_or_else(|| panic!("no busybox in {images:?}"));
    assert!(busybox.id.starts_with("sha256:"), "{busybox:?}");
    assert!(busybox.size > 0, "{busybox:?}");
    assert!(!busybox.pinned, "{busybox:?}");
    let pause = images
        .iter()
        .find(|i| i.repo_tags.iter().any(|t| t == "holdfast.local/pause:1"))
        .unwrap_or_else(|| panic!("no pause image in {images:?}"));
    assert!(pause.pinned, "{pause:?}");
    assert_ne!(
        pause.id, busybox.id,
        "the pause image is an image of its own"
    );

    // ImageStatus by name and by id; a missing image is no image, not an error
    for reference in ["busybox", busybox.id.as_str()] {
        let found = cri
            .images
            .image_status(cri::ImageStatusRequest {
                image: Some(cri::ImageSpec {
                    image: reference.to_owned(),
                    ..cri::ImageSpec::default()
                }),
                verbose: false,
            })
            .await
            .expect("ImageStatus")
            .into_inner()
            .image;
        assert_eq!(found.map(|i| i.id), Some(busybox.id.clone()), "{reference}");
    }
    let missing = cri
        .images
        .image_status(cri::ImageStatusRequest {
            image: Some(cri::ImageSpec {
                image: "no-such-image:1".to_owned(),
                ..cri::ImageSpec::default()
            }),
            verbose: false,
        })
        .await
        .expect("ImageStatus of a missing image")
        .into_inner();
    assert!(missing.image.is_none(), "{missing:?}");

    // A pull from a registry that is not there fails, and says so.
    let pull = cri
        .images
        .pull_image(cri::PullImageRequest {
            image: Some(cri::ImageSpec {
                image: "127.0.0.1:1/nothing:1".to_owned(),
                ..cri::ImageSpec::default()
            }),
            auth: None,
            sandbox_config: None,
        })
        .await
        .expect_err("a pull from nowhere");
    assert!(pull.message().contains("127.0.0.1:1"), "{pull:?}");

    // RemoveImage: an image of the test's own (committed, so not busybox's
    // id) goes with all its names, as containerd's CRI plugin removes it;
    // removing it again (gone) succeeds.
    d.ok(&["create", "--name", "source", "busybox", "true"]);
    d.ok(&["commit", "source", "doomed:1"]);
    d.ok(&["rm", "source"]);
    d.ok(&["tag", "doomed:1", "doomed:2"]);
    for _ in 0..2 {
        cri.images
            .remove_image(cri::RemoveImageRequest {
                image: Some(cri::ImageSpec {
                    image: "doomed:1".to_owned(),
                    ..cri::ImageSpec::default()
                }),
            })
            .await
            .unwrap_or_else(|e| panic!("RemoveImage: {e}{}", d.diagnostics()));
    }
    let left = d.ok(&["images", "--format", "{{.Repository}}:{{.Tag}}"]);
    assert!(!left.contains("doomed"), "{left}");
    assert!(left.contains("busybox:latest"), "busybox went too: {left}");

    let fs = cri
        .images
        .image_fs_info(cri::ImageFsInfoRequest {})
        .await
        .expect("ImageFsInfo")
        .into_inner();
    let usage = fs.image_filesystems.first().expect("an image filesystem");
    assert!(
        usage.used_bytes.as_ref().is_some_and(|u| u.value > 0),
        "{fs:?}"
    );
    assert_eq!(
        usage.fs_id.as_ref().map(|f| PathBuf::from(&f.mountpoint)),
        Some(d.data_root())
    );

    // The cgroup driver kubelet must use; a pod CIDR that is not the
    // bridge network's is refused by name (this daemon has none).
    let config = cri
        .runtime
        .runtime_config(cri::RuntimeConfigRequest {})
        .await
        .expect("RuntimeConfig")
        .into_inner();
    assert_eq!(
        config.linux.map(|l| l.cgroup_driver),
        Some(cri::CgroupDriver::Cgroupfs as i32)
    );
    let cidr = cri
        .runtime
        .update_runtime_config(cri::UpdateRuntimeConfigRequest {
            runtime_config: Some(cri::RuntimeConfig {
                network_config: Some(cri::NetworkConfig {
                    pod_cidr: "10.244.0.0/24".to_owned(),
                }),
            }),
        })
        .await
        .expect_err("another pod CIDR");
    assert!(cidr.message().contains("pod_cidr"), "{cidr:?}");

    // What holdfast does not serve says so.
    let checkpoint = cri
        .runtime
        .checkpoint_container(cri::CheckpointContainerRequest {
            container_id: "x".to_owned(),
            ..cri::CheckpointContainerRequest::default()
        })
        .await
        .expect_err("CheckpointContainer is not served");
    assert_eq!(
        checkpoint.code(),
        tonic::Code::Unimplemented,
        "{checkpoint:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_sync_stats_and_resource_updates() {
    let d = Daemon::start();
    let mut cri = Cri::of(&d);
    // What every kubelet sends: the pod's resources and overhead, and for
    // each container its QoS class's OOM score, a zero limit for each
    // hugepage size and, on cgroup v2, `memory.oom.group`.
    let mut sandbox = host_pod_config(&d, "probe");
    // and the pod's seccomp profile: Unconfined unless `--seccomp-default`
    if let Some(linux) = sandbox.linux.as_mut() {
        linux.resources = Some(cri::LinuxContainerResources::default());
        linux.overhead = Some(cri::LinuxContainerResources::default());
        if let Some(security) = linux.security_context.as_mut() {
            security.seccomp = Some(cri::SecurityProfile {
                profile_type: cri::security_profile::ProfileType::Unconfined as i32,
                ..cri::SecurityProfile::default()
            });
        }
    }
    let pod = cri.run_pod(&d, sandbox).await;
    // The pause runs as the pod's profile says; a container that names
    // none has the runtime's default filter (2: filtering).
    let seccomp = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("Seccomp:").map(|v| v.trim().to_owned()))
    };
    assert_eq!(
        seccomp(d.pid_of(&pod)).as_deref(),
        Some("0"),
        "the pause of an Unconfined pod{}",
        d.diagnostics()
    );
    let cgroup_v2 = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let mut app = container_config("app", holdfast_e2e::TICKER);
    app.linux = Some(cri::LinuxContainerConfig {
        resources: Some(cri::LinuxContainerResources {
            oom_score_adj: 900,
            hugepage_limits: vec![cri::HugepageLimit {
                page_size: "2MB".to_owned(),
                limit: 0,
            }],
            unified: if cgroup_v2 {
                HashMap::from([("memory.oom.group".to_owned(), "1".to_owned())])
            } else {
                HashMap::new()
            },
            ..cri::LinuxContainerResources::default()
        }),
        security_context: None,
    });
    let id = cri.create(&d, &pod, app).await;
    cri.start(&d, &id).await;
    let pid = d.pid_of(&id);
    assert_eq!(seccomp(pid).as_deref(), Some("2"), "{}", d.diagnostics());
    let score = std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj")).unwrap_or_default();
    assert_eq!(score.trim(), "900", "{}", d.diagnostics());
    if cgroup_v2 {
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        let path = cgroup
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap_or_default();
        let group = std::fs::read_to_string(format!("/sys/fs/cgroup{path}/memory.oom.group"))
            .unwrap_or_default();
        assert_eq!(group.trim(), "1", "cgroup {path}");
    }

    // kubelet's log rotation: the file renamed away, then reopened; the
    // output goes on in a new file at the path.
    let log = d.root().join("pods/default_probe/app/0.log");
    let has_ticks = |p: &std::path::Path| {
        std::fs::read_to_string(p).is_ok_and(|t| t.lines().any(|l| l.ends_with(" stdout F tick")))
    };
    d.wait_until("the CRI log has ticks", || has_ticks(&log));
    let rotated = log.with_extension("log.1");
    std::fs::rename(&log, &rotated).expect("rotate the log");
    cri.runtime
        .reopen_container_log(cri::ReopenContainerLogRequest {
            container_id: id.clone(),
        })
        .await
        .unwrap_or_else(|e| panic!("ReopenContainerLog: {e}{}", d.diagnostics()));
    d.wait_until("the reopened log has ticks", || has_ticks(&log));
    assert!(has_ticks(&rotated));

    // ExecSync: both streams and the exit code, as kubelet's exec probes read them.
    let exec = |cmd: &str, timeout: i64| cri::ExecSyncRequest {
        container_id: id.clone(),
        cmd: vec!["sh".to_owned(), "-c".to_owned(), cmd.to_owned()],
        timeout,
    };
    let r = cri
        .runtime
        .exec_sync(exec("echo out; echo err >&2; exit 4", 10))
        .await
        .unwrap_or_else(|e| panic!("ExecSync: {e}{}", d.diagnostics()))
        .into_inner();
    assert_eq!(
        (r.stdout.as_slice(), r.stderr.as_slice(), r.exit_code),
        (&b"out\n"[..], &b"err\n"[..], 4)
    );
    let slow = cri
        .runtime
        .exec_sync(exec("exec sleep 31", 1))
        .await
        .expect_err("past its timeout");
    assert_eq!(slow.code(), tonic::Code::DeadlineExceeded, "{slow:?}");
    // ... and killed, as containerd's plugin kills it: nothing is left
    // running once the answer has come.
    let left = cri
        .runtime
        .exec_sync(exec("ps | grep '[s]leep 31' || true", 10))
        .await
        .unwrap_or_else(|e| panic!("ExecSync ps: {e}{}", d.diagnostics()))
        .into_inner();
    assert_eq!(
        String::from_utf8_lossy(&left.stdout),
        "",
        "the timed-out command still runs{}",
        d.diagnostics()
    );
    let empty = cri
        .runtime
        .exec_sync(cri::ExecSyncRequest {
            container_id: id.clone(),
            cmd: Vec::new(),
            timeout: 0,
        })
        .await
        .expect_err("no command");
    assert_eq!(empty.code(), tonic::Code::InvalidArgument, "{empty:?}");

    // Stats from the container's cgroup.
    let stats = cri
        .runtime
        .container_stats(cri::ContainerStatsRequest {
            container_id: id.clone(),
        })
        .await
        .expect("ContainerStats")
        .into_inner()
        .stats
        .expect("stats");
    let memory = stats
        .memory
        .as_ref()
        .expect("memory of a running container");
    assert!(
        memory.usage_bytes.as_ref().is_some_and(|u| u.value > 0),
        "{stats:?}"
    );
    assert!(
        stats
            .cpu
            .as_ref()
            .and_then(|c| c.usage_core_nano_seconds.as_ref())
            .is_some_and(|u| u.value > 0),
        "{stats:?}"
    );
    let listed = cri
        .runtime
        .list_container_stats(cri::ListContainerStatsRequest {
            filter: Some(cri::ContainerStatsFilter {
                pod_sandbox_id: pod.clone(),
                ..cri::ContainerStatsFilter::default()
            }),
        })
        .await
        .expect("ListContainerStats")
        .into_inner()
        .stats;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let pod_stats = cri
        .runtime
        .pod_sandbox_stats(cri::PodSandboxStatsRequest {
            pod_sandbox_id: pod.clone(),
        })
        .await
        .expect("PodSandboxStats")
        .into_inner()
        .stats
        .and_then(|s| s.linux)
        .expect("Linux pod stats");
    assert_eq!(pod_stats.containers.len(), 1, "{pod_stats:?}");
    // Against the container's sample in the same answer: one taken earlier
    // may be larger than the pod's now (memory is given back).
    let usage =
        |m: Option<&cri::MemoryUsage>| m.and_then(|m| m.usage_bytes.as_ref()).map(|u| u.value);
    let pod_usage = usage(pod_stats.memory.as_ref());
    let container_usage = usage(pod_stats.containers[0].memory.as_ref());
    assert!(
        container_usage.is_some_and(|c| c > 0) && pod_usage >= container_usage,
        "the pod uses at least what its container does: {pod_usage:?} {container_usage:?}"
    );

    // UpdateContainerResources reaches the running cgroup.
    cri.runtime
        .update_container_resources(cri::UpdateContainerResourcesRequest {
            container_id: id.clone(),
            linux: Some(cri::LinuxContainerResources {
                memory_limit_in_bytes: 64 << 20,
                cpu_period: 100_000,
                cpu_quota: 50_000,
                ..cri::LinuxContainerResources::default()
            }),
            ..cri::UpdateContainerResourcesRequest::default()
        })
        .await
        .unwrap_or_else(|e| panic!("UpdateContainerResources: {e}{}", d.diagnostics()));
    let host = d.inspect(&id)["HostConfig"].clone();
    assert_eq!(host["Memory"], 64 << 20, "{host}");
    assert_eq!(host["NanoCpus"], 500_000_000, "{host}");
    let odd = cri
        .runtime
        .update_container_resources(cri::UpdateContainerResourcesRequest {
            container_id: id.clone(),
            linux: Some(cri::LinuxContainerResources {
                cpu_period: 50_000,
                cpu_quota: 50_000,
                ..cri::LinuxContainerResources::default()
            }),
            ..cri::UpdateContainerResourcesRequest::default()
        })
        .await
        .expect_err("another CFS period");
    assert!(odd.message().contains("cpu_period"), "{odd:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_shares_its_network_and_its_containers_exit_with_their_codes() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    let mut cri = Cri::of(d);
    let host_port = free_port();
    let pod = cri
        .run_pod(
            d,
            pod_config(
                d,
                "web",
                vec![cri::PortMapping {
                    protocol: cri::Protocol::Tcp as i32,
                    container_port: 80,
                    host_port: i32::from(host_port),
                    host_ip: String::new(),
                }],
            ),
        )
        .await;

    let status = cri.pod_status(&pod).await.expect("PodSandboxStatus");
    assert_eq!(
        status.state,
        cri::PodSandboxState::SandboxReady as i32,
        "{status:?}"
    );
    let ip = status
        .network
        .as_ref()
        .map(|n| n.ip.clone())
        .unwrap_or_default();
    let prefix = net.subnet.trim_end_matches("0/24");
    assert!(
        ip.starts_with(prefix),
        "pod IP {ip:?} not in {}: {status:?}",
        net.subnet
    );
    assert_eq!(
        status.metadata.as_ref().map(|m| m.name.as_str()),
        Some("web")
    );
    assert_eq!(status.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(
        status.annotations.get("note").map(String::as_str),
        Some("from the test")
    );

    // A web server in the pod, reached from the host on the pod's IP and
    // through the port mapping.
    let server = cri
        .create(d, &pod, container_config("server", &httpd("hello-pod")))
        .await;
    cri.start(d, &server).await;
    d.wait_until("the pod serves on its IP", || {
        http_get(&format!("http://{ip}:80/")).is_some_and(|b| b.trim() == "hello-pod")
    });
    d.wait_until("the pod serves on its host port", || {
        http_get(&format!("http://127.0.0.1:{host_port}/")).is_some_and(|b| b.trim() == "hello-pod")
    });

    // A second container reaches it on localhost and has the pod's hostname.
    let client = cri
        .create(
            d,
            &pod,
            container_config(
                "client",
                "until wget -qO- http://127.0.0.1:80/ | grep -q hello-pod; do sleep 0.1; done; \
                 [ \"$(hostname)\" = web ] || exit 9; \
                 [ \"$(cat /etc/hostname)\" = web ] || exit 8; exit 0",
            ),
        )
        .await;
    cri.start(d, &client).await;
    let done = cri.wait_exited(d, &client).await;
    assert_eq!(done.exit_code, 0, "{done:?}{}", d.diagnostics());
    assert_eq!(done.reason, "Completed", "{done:?}");
    assert!(
        done.started_at > 0 && done.finished_at >= done.started_at,
        "{done:?}"
    );
    let client_log = d.root().join("pods/default_web/client/0.log");
    assert_eq!(PathBuf::from(&done.log_path), client_log);
    assert_eq!(
        done.metadata.as_ref().map(|m| m.name.as_str()),
        Some("client")
    );

    // Another pod reaches this one on its IP, over the pod network.
    let other = cri.run_pod(d, pod_config(d, "other", Vec::new())).await;
    let probe = format!("until wget -qO- http://{ip}:80/ | grep -q hello-pod; do sleep 0.1; done");
    let caller = cri
        .create(d, &other, container_config("caller", &probe))
        .await;
    cri.start(d, &caller).await;
    let reached = cri.wait_exited(d, &caller).await;
    assert_eq!(reached.exit_code, 0, "{reached:?}{}", d.diagnostics());
    cri.runtime
        .remove_pod_sandbox(cri::RemovePodSandboxRequest {
            pod_sandbox_id: other,
        })
        .await
        .unwrap_or_else(|e| panic!("RemovePodSandbox: {e}{}", d.diagnostics()));

    // A failure is an Error with its code.
    let failing = cri
        .create(d, &pod, container_config("failing", "exit 3"))
        .await;
    cri.start(d, &failing).await;
    let failed = cri.wait_exited(d, &failing).await;
    assert_eq!(
        (failed.exit_code, failed.reason.as_str()),
        (3, "Error"),
        "{failed:?}"
    );

    // The lists, with their filters.
    let mine = cri
        .containers(Some(cri::ContainerFilter {
            pod_sandbox_id: pod.clone(),
            ..cri::ContainerFilter::default()
        }))
        .await;
    assert_eq!(mine.len(), 3, "{mine:?}");
    let running = cri
        .containers(Some(cri::ContainerFilter {
            state: Some(cri::ContainerStateValue {
                state: cri::ContainerState::ContainerRunning as i32,
            }),
            ..cri::ContainerFilter::default()
        }))
        .await;
    assert_eq!(
        running.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        [server.as_str()]
    );
    let by_label = cri
        .containers(Some(cri::ContainerFilter {
            label_selector: HashMap::from([("role".to_owned(), "failing".to_owned())]),
            ..cri::ContainerFilter::default()
        }))
        .await;
    assert_eq!(
        by_label.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        [failing.as_str()]
    );

    // docker sees them, by names that read as kubelet's.
    let names = d.ok(&["ps", "-a", "--format", "{{.Names}}"]);
    for name in [
        "k8s_POD_web_default_uid-web_0",
        "k8s_server_web_default_uid-web_0",
    ] {
        assert!(names.lines().any(|n| n == name), "{name} not in {names}");
    }

    // The Docker API sees the pod and may exec into it, but changes
    // nothing of it: kubelet owns it. No prune takes it either.
    let refused = d.fails(&["stop", "k8s_server_web_default_uid-web_0"]);
    assert!(
        refused.stderr.contains("managed through the CRI"),
        "{refused:?}"
    );
    let refused = d.fails(&["rm", "-f", "k8s_POD_web_default_uid-web_0"]);
    assert!(refused.stderr.contains("default/web"), "{refused:?}");
    assert_eq!(
        d.ok(&["exec", "k8s_server_web_default_uid-web_0", "hostname"])
            .trim(),
        "web"
    );
    d.ok(&["container", "prune", "-f"]);
    assert_eq!(
        cri.containers(None).await.len(),
        3,
        "a prune took a pod's container"
    );

    // StopContainer with its grace period; stopping again is fine.
    for _ in 0..2 {
        cri.runtime
            .stop_container(cri::StopContainerRequest {
                container_id: server.clone(),
                timeout: 2,
            })
            .await
            .unwrap_or_else(|e| panic!("StopContainer: {e}{}", d.diagnostics()));
    }
    let stopped = cri.status(&server).await.expect("ContainerStatus");
    assert_eq!(
        stopped.state,
        cri::ContainerState::ContainerExited as i32,
        "{stopped:?}"
    );

    // StopPodSandbox (twice, as kubelet may), then RemovePodSandbox (twice).
    for _ in 0..2 {
        cri.runtime
            .stop_pod_sandbox(cri::StopPodSandboxRequest {
                pod_sandbox_id: pod.clone(),
            })
            .await
            .unwrap_or_else(|e| panic!("StopPodSandbox: {e}{}", d.diagnostics()));
    }
    let status = cri.pod_status(&pod).await.expect("PodSandboxStatus");
    assert_eq!(
        status.state,
        cri::PodSandboxState::SandboxNotready as i32,
        "{status:?}"
    );
    for _ in 0..2 {
        cri.runtime
            .remove_pod_sandbox(cri::RemovePodSandboxRequest {
                pod_sandbox_id: pod.clone(),
            })
            .await
            .unwrap_or_else(|e| panic!("RemovePodSandbox: {e}{}", d.diagnostics()));
    }
    assert!(cri.pods().await.is_empty());
    assert!(cri.containers(None).await.is_empty());
    d.assert_no_containers("RemovePodSandbox removes the pod's containers and its sandbox");
    let gone = cri.pod_status(&pod).await.expect_err("a removed pod");
    assert_eq!(gone.code(), tonic::Code::NotFound, "{gone:?}");

    // With no pod left, a prune of every unused image spares the pause
    // image: pods are made from it offline.
    d.ok(&["image", "prune", "-a", "-f"]);
    let images = d.ok(&["images", "--format", "{{.Repository}}"]);
    assert!(images.contains("holdfast.local/pause"), "{images}");
    assert!(!images.contains("busybox"), "the prune did prune: {images}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exit_during_a_containerd_outage_is_in_container_status() {
    let d = Daemon::start();
    let mut cri = Cri::of(&d);
    let pod = cri.run_pod(&d, host_pod_config(&d, "gated")).await;
    let id = cri
        .create(&d, &pod, container_config("gate", &gated_exit(7)))
        .await;
    cri.start(&d, &id).await;
    let pid = d.pid_of(&id);
    // kubelet's evented PLEG listens from here on.
    let mut events = cri
        .runtime
        .get_container_events(cri::GetEventsRequest {})
        .await
        .expect("GetContainerEvents")
        .into_inner();

    let outage = d.hold_containerd_down();
    open_gate(pid);
    d.wait_until("the gated process exits", || {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    });
    drop(outage);

    let exited = cri.wait_exited(&d, &id).await;
    assert_eq!(exited.exit_code, 7, "{exited:?}{}", d.diagnostics());
    assert_eq!(exited.reason, "Error", "{exited:?}");
    // The exit learned after the outage is streamed like any other, with
    // the pod's status and the container's exit in it.
    let stopped = tokio::time::timeout(holdfast_e2e::WAIT_BOUND, async {
        while let Some(event) = events.message().await.expect("the event stream") {
            if event.container_id == id
                && event.container_event_type
                    == cri::ContainerEventType::ContainerStoppedEvent as i32
            {
                return Some(event);
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .unwrap_or_else(|| panic!("no STOPPED event for {id}{}", d.diagnostics()));
    assert_eq!(
        stopped.pod_sandbox_status.as_ref().map(|p| p.id.as_str()),
        Some(pod.as_str())
    );
    let seen = stopped
        .containers_statuses
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("{stopped:?}"));
    assert_eq!(seen.exit_code, 7, "{stopped:?}");
    // The pod itself never stopped.
    let status = cri.pod_status(&pod).await.expect("PodSandboxStatus");
    assert_eq!(
        status.state,
        cri::PodSandboxState::SandboxReady as i32,
        "{status:?}"
    );

    // A StopPodSandbox while containerd is away, whose caller gives up
    // (kubelet's deadline), is kept and carried out once it is back.
    let ticker = cri
        .create(&d, &pod, container_config("ticker", holdfast_e2e::TICKER))
        .await;
    cri.start(&d, &ticker).await;
    let outage = d.hold_containerd_down();
    let request = cri::StopPodSandboxRequest {
        pod_sandbox_id: pod.clone(),
    };
    let asked = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        cri.runtime.stop_pod_sandbox(request),
    )
    .await;
    assert!(
        !matches!(asked, Ok(Ok(_))),
        "stopped with containerd away? {asked:?}"
    );
    drop(outage);
    let stopped = cri.wait_exited(&d, &ticker).await;
    // Ended by the stop's signal: TERM (the pod shares one PID namespace,
    // so sh is no pid 1 immune to it) or KILL.
    assert!([143, 137].contains(&stopped.exit_code), "{stopped:?}");
    let deadline = std::time::Instant::now() + holdfast_e2e::WAIT_BOUND;
    loop {
        let status = cri.pod_status(&pod).await.expect("PodSandboxStatus");
        if status.state == cri::PodSandboxState::SandboxNotready as i32 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the sandbox was not stopped: {status:?}{}",
            d.diagnostics()
        );
        tokio::time::sleep(holdfast_e2e::POLL_INTERVAL).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_gets_the_status_kubelet_expects_and_leaves_nothing() {
    let d = Daemon::start();
    let mut cri = Cri::of(&d);

    let none = cri
        .runtime
        .run_pod_sandbox(cri::RunPodSandboxRequest::default())
        .await
        .expect_err("no config");
    assert_eq!(none.code(), tonic::Code::InvalidArgument);
    assert!(none.message().starts_with("config"), "{none:?}");

    let mut nameless = pod_config(&d, "x", Vec::new());
    if let Some(m) = nameless.metadata.as_mut() {
        m.name.clear();
    }
    let e = cri
        .runtime
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(nameless),
            runtime_handler: String::new(),
        })
        .await
        .expect_err("no name");
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("config.metadata.name"), "{e:?}");

    let e = cri
        .runtime
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(pod_config(&d, "x", Vec::new())),
            runtime_handler: "kata".to_owned(),
        })
        .await
        .expect_err("an unknown handler");
    assert!(e.message().contains("runtime_handler"), "{e:?}");

    // No network on this daemon: a pod asking for the pod network is
    // refused and nothing is left.
    let e = cri
        .runtime
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(pod_config(&d, "x", Vec::new())),
            runtime_handler: String::new(),
        })
        .await
        .expect_err("the bridge network is disabled");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    d.assert_no_containers("a refused RunPodSandbox leaves nothing");

    // A pod on the host's network runs; the same pod twice is AlreadyExists.
    let host = host_pod_config(&d, "hostnet");
    let pod = cri.run_pod(&d, host.clone()).await;
    let twice = cri
        .runtime
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(host),
            runtime_handler: String::new(),
        })
        .await
        .expect_err("the same pod twice");
    assert_eq!(twice.code(), tonic::Code::AlreadyExists, "{twice:?}");

    // Unknown ids: NotFound for what must exist, success for what is
    // removed or stopped already.
    let e = cri
        .runtime
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: "0123456789ab".to_owned(),
            config: Some(container_config("c", "true")),
            sandbox_config: None,
        })
        .await
        .expect_err("no such sandbox");
    assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
    let e = cri
        .status("0123456789ab")
        .await
        .expect_err("no such container");
    assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
    cri.runtime
        .stop_container(cri::StopContainerRequest {
            container_id: "0123456789ab".to_owned(),
            timeout: 0,
        })
        .await
        .expect("StopContainer of nothing succeeds");
    cri.runtime
        .remove_pod_sandbox(cri::RemovePodSandboxRequest {
            pod_sandbox_id: "0123456789ab".to_owned(),
        })
        .await
        .expect("RemovePodSandbox of nothing succeeds");
    let e = cri
        .runtime
        .stop_container(cri::StopContainerRequest::default())
        .await
        .expect_err("an empty id");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    // A sandbox is not a container of the CRI, nor a container a sandbox.
    let e = cri.status(&pod).await.expect_err("a sandbox's id");
    assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");

    // Containers: a missing image, a missing name, a mount that is not
    // absolute, a mount propagation holdfast cannot give; none is left.
    let mut no_image = container_config("c", "true");
    no_image.image = Some(cri::ImageSpec {
        image: "no-such-image:1".to_owned(),
        ..cri::ImageSpec::default()
    });
    let mut no_name = container_config("c", "true");
    no_name.metadata = None;
    let mut relative = container_config("c", "true");
    relative.mounts = vec![cri::Mount {
        container_path: "data".to_owned(),
        host_path: "/tmp".to_owned(),
        ..cri::Mount::default()
    }];
    let mut shared = container_config("c", "true");
    shared.mounts = vec![cri::Mount {
        container_path: "/data".to_owned(),
        host_path: "/tmp".to_owned(),
        propagation: 2, // bidirectional
        ..cri::Mount::default()
    }];
    for (config, code, field) in [
        (no_image, tonic::Code::NotFound, "no-such-image"),
        (no_name, tonic::Code::InvalidArgument, "config.metadata"),
        (
            relative,
            tonic::Code::InvalidArgument,
            "config.mounts[0].container_path",
        ),
        (
            shared,
            tonic::Code::InvalidArgument,
            "config.mounts[0].propagation",
        ),
    ] {
        let e = cri
            .runtime
            .create_container(cri::CreateContainerRequest {
                pod_sandbox_id: pod.clone(),
                config: Some(config),
                sandbox_config: None,
            })
            .await
            .expect_err(field);
        assert_eq!(e.code(), code, "{field}: {e:?}");
        assert!(e.message().contains(field), "{field}: {e:?}");
    }
    assert!(
        cri.containers(None).await.is_empty(),
        "a refused create left a container"
    );
    let ids = d.container_ids(true);
    assert_eq!(ids.len(), 1, "only the sandbox: {ids:?}");
}
