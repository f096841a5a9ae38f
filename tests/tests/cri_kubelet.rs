//! A kubelet-shaped driver against a real holdfastd's CRI: a loop that
//! does what kubelet's generic PLEG and its housekeeping do
//! (`ListPodSandbox` and `ListContainers` over and over, `ContainerStatus`
//! of whatever changed, `Status`, `ImageFsInfo`, `ListContainerStats`)
//! while pods run, containerd is SIGKILLed and held down while containers
//! exit, holdfastd is SIGKILLed while another exits, and a pod is stopped
//! and removed. The driver must never see a wrong state (a container going
//! back from exited, an exit code that changes, a container that runs shown
//! otherwise), must see every exit with its code, and its lists must be
//! answered from memory while containerd is away.

use holdfast_e2e::cri::{busybox, channel};
use holdfast_e2e::{Daemon, TICKER, gated_exit, open_gate};
use k8s_cri::v1 as cri;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::Channel;

/// What the driver saw of each container, and what it saw wrong.
#[derive(Debug, Default)]
struct Seen {
    /// Last state and, once exited, the exit code.
    containers: HashMap<String, (i32, Option<i32>)>,
    wrong: Vec<String>,
    /// Lists answered while containerd was held down.
    lists_during_outage: usize,
    /// List calls refused for another reason than holdfastd being away.
    list_failures: Vec<String>,
}

const CREATED: i32 = cri::ContainerState::ContainerCreated as i32;
const RUNNING: i32 = cri::ContainerState::ContainerRunning as i32;
const EXITED: i32 = cri::ContainerState::ContainerExited as i32;

impl Seen {
    fn saw(&mut self, id: &str, state: i32, exit_code: Option<i32>) {
        let before = self.containers.get(id).copied();
        let allowed = match (before.map(|b| b.0), state) {
            (None, _) => true,
            (Some(a), b) if a == b => true,
            (Some(CREATED), RUNNING | EXITED) => true,
            (Some(RUNNING), EXITED) => true,
            _ => false,
        };
        if !allowed {
            self.wrong.push(format!(
                "{id}: {before:?} then state {state} ({exit_code:?})"
            ));
        }
        if let (Some((EXITED, Some(old))), Some(new)) = (before, exit_code)
            && old != new
        {
            self.wrong.push(format!("{id}: exit code {old} then {new}"));
        }
        self.containers.insert(id.to_owned(), (state, exit_code));
    }
}

/// kubelet's loop, until `stop`.
async fn drive(
    channel: Channel,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    holdfastd_up: Arc<AtomicBool>,
    containerd_down: Arc<AtomicBool>,
    rounds: Arc<AtomicUsize>,
) {
    let mut runtime = RuntimeServiceClient::new(channel.clone());
    let mut images = ImageServiceClient::new(channel);
    let mut last: HashMap<String, i32> = HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        let outage = containerd_down.load(Ordering::Relaxed);
        let pods = runtime
            .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None })
            .await;
        let containers = runtime
            .list_containers(cri::ListContainersRequest { filter: None })
            .await;
        match (pods, containers) {
            (Ok(_), Ok(containers)) => {
                if outage && containerd_down.load(Ordering::Relaxed) {
                    seen.lock().expect("seen").lists_during_outage += 1;
                }
                for c in containers.into_inner().containers {
                    if last.get(&c.id) == Some(&c.state) {
                        continue;
                    }
                    // What changed: its status, as kubelet asks.
                    let Ok(status) = runtime
                        .container_status(cri::ContainerStatusRequest {
                            container_id: c.id.clone(),
                            verbose: false,
                        })
                        .await
                    else {
                        continue; // removed meanwhile
                    };
                    let s = status.into_inner().status.unwrap_or_default();
                    let code = (s.state == EXITED).then_some(s.exit_code);
                    seen.lock().expect("seen").saw(&s.id, s.state, code);
                    last.insert(c.id.clone(), s.state);
                }
            }
            (pods, containers) => {
                // Only holdfastd being away (its socket gone, the channel
                // reconnecting) excuses a list that is not answered.
                if holdfastd_up.load(Ordering::Relaxed) {
                    let why = format!(
                        "{:?} / {:?}",
                        pods.err().map(|e| e.to_string()),
                        containers.err().map(|e| e.to_string())
                    );
                    seen.lock().expect("seen").list_failures.push(why);
                }
            }
        }
        // Housekeeping: answers or not, nothing of it may disturb the rest.
        let _ = runtime.status(cri::StatusRequest::default()).await;
        let _ = images.image_fs_info(cri::ImageFsInfoRequest {}).await;
        let _ = runtime
            .list_container_stats(cri::ListContainerStatsRequest { filter: None })
            .await;
        rounds.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A pod on the host's network with a gated container (exits `code` when
/// its gate opens) and a ticker (runs until stopped).
async fn pod(
    runtime: &mut RuntimeServiceClient<Channel>,
    d: &Daemon,
    name: &str,
    code: i32,
) -> (String, String, String) {
    let config = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.to_owned(),
            uid: format!("uid-{name}"),
            namespace: "chaos".to_owned(),
            attempt: 0,
        }),
        log_directory: d.root().join("pods").join(name).display().to_string(),
        linux: Some(cri::LinuxPodSandboxConfig {
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(cri::NamespaceOption {
                    network: 2, // NODE: no bridge needed
                    pid: 1,     // CONTAINER: the ticker's sh is its own pid 1
                    ..cri::NamespaceOption::default()
                }),
                ..cri::LinuxSandboxSecurityContext::default()
            }),
            ..cri::LinuxPodSandboxConfig::default()
        }),
        ..cri::PodSandboxConfig::default()
    };
    let sandbox = runtime
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: String::new(),
        })
        .await
        .unwrap_or_else(|e| panic!("RunPodSandbox {name}: {e}{}", d.diagnostics()))
        .into_inner()
        .pod_sandbox_id;
    let mut ids = Vec::new();
    for (what, script) in [("gated", gated_exit(code)), ("ticker", TICKER.to_owned())] {
        let id = runtime
            .create_container(cri::CreateContainerRequest {
                pod_sandbox_id: sandbox.clone(),
                config: Some(cri::ContainerConfig {
                    linux: Some(cri::LinuxContainerConfig {
                        security_context: Some(cri::LinuxContainerSecurityContext {
                            namespace_options: Some(cri::NamespaceOption {
                                network: 2,
                                pid: 1,
                                ..cri::NamespaceOption::default()
                            }),
                            ..cri::LinuxContainerSecurityContext::default()
                        }),
                        ..cri::LinuxContainerConfig::default()
                    }),
                    ..busybox(what, &script)
                }),
                sandbox_config: Some(config.clone()),
            })
            .await
            .unwrap_or_else(|e| panic!("CreateContainer {what}: {e}{}", d.diagnostics()))
            .into_inner()
            .container_id;
        runtime
            .start_container(cri::StartContainerRequest {
                container_id: id.clone(),
            })
            .await
            .unwrap_or_else(|e| panic!("StartContainer {what}: {e}{}", d.diagnostics()));
        ids.push(id);
    }
    let ticker = ids.pop().unwrap_or_default();
    let gated = ids.pop().unwrap_or_default();
    (sandbox, gated, ticker)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kubelet_sees_every_exit_and_no_wrong_state_through_crashes() {
    let mut d = Daemon::start();
    let channel = channel(d.exec_root().join("cri.sock"));
    let mut runtime = RuntimeServiceClient::new(channel.clone());
    let (_, gated_a, ticker_a) = pod(&mut runtime, &d, "alpha", 3).await;
    let (_, gated_b, ticker_b) = pod(&mut runtime, &d, "beta", 4).await;
    let (pod_c, gated_c, ticker_c) = pod(&mut runtime, &d, "gamma", 5).await;
    let tickers = [&ticker_a, &ticker_b, &ticker_c].map(|t| d.process_of(t));

    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let holdfastd_up = Arc::new(AtomicBool::new(true));
    let containerd_down = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicUsize::new(0));
    let driver = tokio::spawn(drive(
        channel,
        seen.clone(),
        stop.clone(),
        holdfastd_up.clone(),
        containerd_down.clone(),
        rounds.clone(),
    ));
    let wait_rounds = |n: usize, d: &Daemon| {
        let target = rounds.load(Ordering::Relaxed) + n;
        d.wait_until(&format!("{n} more rounds of the driver"), || {
            rounds.load(Ordering::Relaxed) >= target
        });
    };
    let saw_exit = |d: &Daemon, id: &str, code: i32| {
        d.wait_until(&format!("the driver sees {id} exit {code}"), || {
            seen.lock().expect("seen").containers.get(id).copied() == Some((EXITED, Some(code)))
        });
    };
    tokio::task::block_in_place(|| wait_rounds(3, &d));

    // containerd SIGKILLed and held down; alpha's gated container exits
    // meanwhile.
    tokio::task::block_in_place(|| {
        let outage = d.hold_containerd_down();
        containerd_down.store(true, Ordering::Relaxed);
        open_gate(d.pid_of(&gated_a));
        wait_rounds(5, &d);
        containerd_down.store(false, Ordering::Relaxed);
        drop(outage);
        saw_exit(&d, &gated_a, 3);
    });

    // holdfastd SIGKILLed; beta's gated container exits while it is away.
    tokio::task::block_in_place(|| {
        let pid = d.pid_of(&gated_b);
        holdfastd_up.store(false, Ordering::Relaxed);
        d.sigkill();
        open_gate(pid);
        d.wait_until("beta's gated process is gone", || {
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
        });
        d.restart();
        holdfastd_up.store(true, Ordering::Relaxed);
        saw_exit(&d, &gated_b, 4);
    });

    // gamma's gated container exits as usual; then the pod is stopped and
    // removed, as kubelet does.
    tokio::task::block_in_place(|| {
        open_gate(d.pid_of(&gated_c));
        saw_exit(&d, &gated_c, 5);
    });
    let mut runtime =
        RuntimeServiceClient::new(holdfast_e2e::cri::channel(d.exec_root().join("cri.sock")));
    runtime
        .stop_pod_sandbox(cri::StopPodSandboxRequest {
            pod_sandbox_id: pod_c.clone(),
        })
        .await
        .unwrap_or_else(|e| panic!("StopPodSandbox: {e}{}", d.diagnostics()));
    tokio::task::block_in_place(|| {
        d.wait_until("the driver sees gamma's ticker stopped", || {
            seen.lock()
                .expect("seen")
                .containers
                .get(&ticker_c)
                .is_some_and(|s| s.0 == EXITED)
        });
    });
    runtime
        .remove_pod_sandbox(cri::RemovePodSandboxRequest {
            pod_sandbox_id: pod_c,
        })
        .await
        .unwrap_or_else(|e| panic!("RemovePodSandbox: {e}{}", d.diagnostics()));
    tokio::task::block_in_place(|| wait_rounds(3, &d));
    stop.store(true, Ordering::Relaxed);
    let _ = driver.await;

    let seen = seen.lock().expect("seen");
    assert!(
        seen.wrong.is_empty(),
        "the driver saw wrong states: {:?}{}",
        seen.wrong,
        d.diagnostics()
    );
    assert!(
        seen.list_failures.is_empty(),
        "lists failed while holdfastd served: {:?}{}",
        seen.list_failures,
        d.diagnostics()
    );
    assert!(
        seen.lists_during_outage > 0,
        "no list was answered while containerd was away"
    );
    // The tickers of the pods still running were never touched: the same
    // processes, seen running throughout.
    for (ticker, before) in [&ticker_a, &ticker_b].into_iter().zip(&tickers) {
        d.assert_still_running_with_pid(ticker, *before, "containerd and holdfastd crashes");
        assert_eq!(
            seen.containers.get(ticker.as_str()).map(|s| s.0),
            Some(RUNNING),
            "{ticker}"
        );
    }
}
