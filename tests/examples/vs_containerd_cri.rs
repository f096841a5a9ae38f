//! Speed and cost side by side over the CRI: holdfastd and containerd's own
//! CRI plugin, each on the same Debian containerd build in a temporary
//! directory of its own, the same busybox and pause images, pods on the
//! host's network (the runtimes, not a CNI plugin, are measured), driven
//! by the CRI's generated client as kubelet drives them, sampled
//! alternately (the order flipped every round) so that the noise of a
//! shared machine hits both alike. Run by bench/vs-containerd-cri.sh,
//! which turns the samples into bench/vs-containerd-cri.md; by hand (as
//! root):
//!
//! ```sh
//! cargo build --release -p holdfastd
//! cargo run --release -p holdfast-e2e --example vs_containerd_cri -- OUT_DIR [ROUNDS] [MANY] [RESTARTS]
//! ```
//!
//! Writes `OUT_DIR/samples.jsonl` (one `{"runtime","what","ms"}` per line;
//! a sample that failed has `"failed"` with why instead of a time) and
//! `OUT_DIR/rss.jsonl`.

use futures_util::StreamExt as _;
use holdfast_e2e::cri::runtimes::{ContainerdCri, CriRuntime};
use holdfast_e2e::cri::{Cri, host_namespaces, host_pod};
use holdfast_e2e::engine::Holdfast;
use holdfast_e2e::poll_until;
use holdfast_e2e::procs::{self, Proc, ProcessIdentity};
use k8s_cri::v1 as cri;
use serde_json::json;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The bound of one step; past it the sample is recorded as failed.
const BOUND: Duration = Duration::from_secs(60);
/// How often a state is polled while timing how soon it shows.
const TIGHT_POLL: Duration = Duration::from_millis(2);
/// Exits 0 the moment SIGTERM comes: the shell waits in `wait`, which a
/// trapped signal interrupts.
const AT_ONCE: &str = "trap 'exit 0' TERM; sleep 1000 & wait";
/// How many times each list of the many pods is sampled per round.
const LIST_SAMPLES: usize = 20;
/// Pods made at once while setting up the many.
const PARALLEL: usize = 10;

/// A runtime under test with its client.
struct Subject {
    runtime: Box<dyn CriRuntime>,
    cri: Cri,
}

impl Subject {
    fn name(&self) -> &'static str {
        self.runtime.name()
    }
}

struct Out {
    samples: fs::File,
    rss: fs::File,
}

impl Out {
    fn sample(&mut self, runtime: &str, what: &str, took: Result<Duration, String>) {
        let line = match took {
            Ok(d) => json!({"runtime": runtime, "what": what, "ms": d.as_secs_f64() * 1e3}),
            Err(why) => json!({"runtime": runtime, "what": what, "failed": why}),
        };
        eprintln!("{line}");
        writeln!(self.samples, "{line}").expect("write a sample");
    }

    fn rss(&mut self, s: &Subject, when: &str) {
        let runtime: u64 = s
            .runtime
            .runtime_pids()
            .into_iter()
            .filter_map(|pid| procs::memory_kb(pid, "VmRSS:", "status"))
            .sum();
        let shims = shims_of(&s.runtime.scratch().display().to_string());
        // Shims share their binary's pages: their RSS summed counts those
        // once per shim; their PSS shares them out.
        let shims_pss: u64 = shims
            .iter()
            .filter_map(|pid| procs::memory_kb(*pid, "Pss:", "smaps_rollup"))
            .sum();
        let line = json!({
            "runtime": s.name(),
            "when": when,
            "runtime_rss_kb": runtime,
            "shims": shims.len(),
            "shims_pss_kb": shims_pss,
        });
        eprintln!("{line}");
        writeln!(self.rss, "{line}").expect("write rss");
    }
}

/// The shims whose command line names `dir` (their containerd's socket
/// lies under it).
fn shims_of(dir: &str) -> Vec<u32> {
    procs::processes()
        .into_iter()
        .filter(|p: &Proc| {
            p.cmdline
                .first()
                .is_some_and(|a| a.contains("containerd-shim"))
                && p.cmdline.iter().any(|a| a.contains(dir))
        })
        .map(|p| p.pid)
        .collect()
}

/// A pod on the host's network, its log directory under the runtime's
/// scratch directory, its seccomp profile kubelet's default.
fn pod_config(s: &Subject, name: &str) -> cri::PodSandboxConfig {
    let mut config = host_pod(name, "bench", &s.runtime.scratch().join("pods"));
    if let Some(security) = config
        .linux
        .as_mut()
        .and_then(|l| l.security_context.as_mut())
    {
        security.seccomp = Some(seccomp(UNCONFINED));
    }
    config
}

/// The seccomp profile kubelet sends unless told `--seccomp-default`:
/// `Unconfined`, named (the two runtimes read an unset one differently:
/// containerd's plugin as unconfined, holdfast as its default profile).
const UNCONFINED: cri::security_profile::ProfileType =
    cri::security_profile::ProfileType::Unconfined;

fn seccomp(profile: cri::security_profile::ProfileType) -> cri::SecurityProfile {
    cri::SecurityProfile {
        profile_type: profile as i32,
        ..cri::SecurityProfile::default()
    }
}

/// A busybox container running `script`, as kubelet sends it by default.
fn container_config(name: &str, script: &str) -> cri::ContainerConfig {
    container_config_with(name, script, UNCONFINED)
}

fn container_config_with(
    name: &str,
    script: &str,
    profile: cri::security_profile::ProfileType,
) -> cri::ContainerConfig {
    cri::ContainerConfig {
        linux: Some(cri::LinuxContainerConfig {
            security_context: Some(cri::LinuxContainerSecurityContext {
                namespace_options: Some(host_namespaces()),
                seccomp: Some(seccomp(profile)),
                ..cri::LinuxContainerSecurityContext::default()
            }),
            ..cri::LinuxContainerConfig::default()
        }),
        ..holdfast_e2e::cri::busybox(name, script)
    }
}

/// A request's outcome as a sample: its time, or why it failed.
async fn timed<T>(
    request: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<(Duration, T), String> {
    let t0 = Instant::now();
    match tokio::time::timeout(BOUND, request).await {
        Ok(Ok(answer)) => Ok((t0.elapsed(), answer.into_inner())),
        Ok(Err(status)) => Err(format!("{:?}: {}", status.code(), status.message())),
        Err(_) => Err(format!("unanswered within {BOUND:?}")),
    }
}

async fn run_pod(
    cri: &mut Cri,
    config: cri::PodSandboxConfig,
) -> Result<(Duration, String), String> {
    let (took, answer) = timed(cri.runtime.run_pod_sandbox(cri::RunPodSandboxRequest {
        config: Some(config),
        runtime_handler: String::new(),
    }))
    .await?;
    Ok((took, answer.pod_sandbox_id))
}

/// CreateContainer then StartContainer (kubelet's pair); the id.
async fn create_start(
    cri: &mut Cri,
    pod: &str,
    pod_config: &cri::PodSandboxConfig,
    config: cri::ContainerConfig,
) -> Result<(Duration, String), String> {
    let (create, answer) = timed(cri.runtime.create_container(cri::CreateContainerRequest {
        pod_sandbox_id: pod.to_owned(),
        config: Some(config),
        sandbox_config: Some(pod_config.clone()),
    }))
    .await?;
    let id = answer.container_id;
    let (start, _) = timed(cri.runtime.start_container(cri::StartContainerRequest {
        container_id: id.clone(),
    }))
    .await?;
    Ok((create + start, id))
}

async fn remove_pod(cri: &mut Cri, pod: &str) -> Result<Duration, String> {
    let (stop, _) = timed(cri.runtime.stop_pod_sandbox(cri::StopPodSandboxRequest {
        pod_sandbox_id: pod.to_owned(),
    }))
    .await?;
    let (remove, _) = timed(
        cri.runtime
            .remove_pod_sandbox(cri::RemovePodSandboxRequest {
                pod_sandbox_id: pod.to_owned(),
            }),
    )
    .await?;
    Ok(stop + remove)
}

fn exited(s: &cri::ContainerStatus) -> bool {
    s.state == cri::ContainerState::ContainerExited as i32
}

/// One sample of each single-pod latency.
async fn latencies(s: &mut Subject, round: usize, out: &mut Out) {
    let name = s.name();
    let config = pod_config(s, &format!("p{round}"));
    let pod = match run_pod(&mut s.cri, config.clone()).await {
        Ok((took, pod)) => {
            out.sample(name, "RunPodSandbox", Ok(took));
            pod
        }
        Err(why) => {
            out.sample(name, "RunPodSandbox", Err(why));
            return;
        }
    };
    let sleeper = create_start(
        &mut s.cri,
        &pod,
        &config,
        container_config("sleeper", "sleep 1000"),
    )
    .await;
    out.sample(
        name,
        "CreateContainer + StartContainer",
        sleeper.as_ref().map(|(t, _)| *t).map_err(Clone::clone),
    );
    // the same under the runtime's default seccomp profile (kubelet's
    // `--seccomp-default`, the pod security standards' `restricted`)
    let confined = create_start(
        &mut s.cri,
        &pod,
        &config,
        container_config_with(
            "confined",
            "sleep 1000",
            cri::security_profile::ProfileType::RuntimeDefault,
        ),
    )
    .await;
    out.sample(
        name,
        "CreateContainer + StartContainer (RuntimeDefault seccomp)",
        confined.map(|(t, _)| t),
    );

    // StopContainer of a container that exits at once on SIGTERM,
    // signalled only once its trap is set (before it, pid 1 ignores it)
    let stop = async {
        let (_, id) = create_start(
            &mut s.cri,
            &pod,
            &config,
            container_config("polite", AT_ONCE),
        )
        .await?;
        let p = s.runtime.process_of(&id);
        if !poll_until(BOUND, || procs::catches_sigterm(p.pid)) {
            return Err("its trap was never set".to_owned());
        }
        let (took, _) = timed(s.cri.runtime.stop_container(cri::StopContainerRequest {
            container_id: id,
            timeout: 10,
        }))
        .await?;
        Ok(took)
    }
    .await;
    out.sample(name, "StopContainer (exits on SIGTERM)", stop);

    // exit -> the CONTAINER_STOPPED event, and -> ContainerStatus exited:
    // the process is SIGKILLed from the host
    if let Ok((_, id)) = &sleeper {
        let p = s.runtime.process_of(id);
        let events = s
            .cri
            .runtime
            .get_container_events(cri::GetEventsRequest {})
            .await;
        let (event, status) =
            exit_seen(&mut s.cri, id, p, events.map(tonic::Response::into_inner)).await;
        out.sample(name, "exit -> CONTAINER_STOPPED event", event);
        out.sample(name, "exit -> ContainerStatus exited", status);
    }
    out.sample(
        name,
        "StopPodSandbox + RemovePodSandbox",
        remove_pod(&mut s.cri, &pod).await,
    );
}

/// Kills `p` and times how soon the runtime's event stream says the
/// container stopped and how soon its status shows it exited.
async fn exit_seen(
    cri: &mut Cri,
    id: &str,
    p: ProcessIdentity,
    events: Result<tonic::Streaming<cri::ContainerEventResponse>, tonic::Status>,
) -> (Result<Duration, String>, Result<Duration, String>) {
    let t0 = Instant::now();
    procs::signal(p.pid, "KILL");
    let event = async {
        let mut events =
            events.map_err(|status| format!("{:?}: {}", status.code(), status.message()))?;
        loop {
            match tokio::time::timeout_at((t0 + BOUND).into(), events.next()).await {
                Err(_) => return Err(format!("no event within {BOUND:?}")),
                Ok(None) => return Err("the stream ended".to_owned()),
                Ok(Some(Err(status))) => {
                    return Err(format!("{:?}: {}", status.code(), status.message()));
                }
                Ok(Some(Ok(e)))
                    if e.container_id == id
                        && e.container_event_type
                            == cri::ContainerEventType::ContainerStoppedEvent as i32 =>
                {
                    return Ok(t0.elapsed());
                }
                Ok(Some(Ok(_))) => {}
            }
        }
    };
    let mut status_cri = cri.clone();
    let status = async {
        loop {
            if status_cri.status(id).await.is_ok_and(|s| exited(&s)) {
                return Ok(t0.elapsed());
            }
            if t0.elapsed() > BOUND {
                return Err(format!("not shown exited within {BOUND:?}"));
            }
            tokio::time::sleep(TIGHT_POLL).await;
        }
    };
    tokio::join!(event, status)
}

/// The many pods of a round: each with one container.
struct Many {
    /// (pod id, container id)
    pods: Vec<(String, String)>,
}

/// Runs `many` pods with a container each, [`PARALLEL`] at a time.
async fn make_many(s: &mut Subject, round: usize, many: usize, out: &mut Out) -> Option<Many> {
    let t0 = Instant::now();
    let mut pods = Vec::new();
    let configs: Vec<_> = (0..many)
        .map(|i| pod_config(s, &format!("m{round}-{i}")))
        .collect();
    for chunk in configs.chunks(PARALLEL) {
        let made = futures_util::future::join_all(chunk.iter().map(|config| {
            let mut cri = s.cri.clone();
            let config = config.clone();
            async move {
                let (_, pod) = run_pod(&mut cri, config.clone()).await?;
                let (_, id) = create_start(
                    &mut cri,
                    &pod,
                    &config,
                    container_config("sleeper", "sleep 100000"),
                )
                .await?;
                Ok::<_, String>((pod, id))
            }
        }))
        .await;
        for m in made {
            match m {
                Ok(p) => pods.push(p),
                Err(why) => {
                    out.sample(
                        s.name(),
                        &format!("{many} pods run, {PARALLEL} at a time"),
                        Err(why),
                    );
                    return None;
                }
            }
        }
    }
    out.sample(
        s.name(),
        &format!("{many} pods run, {PARALLEL} at a time"),
        Ok(t0.elapsed()),
    );
    Some(Many { pods })
}

/// Whether every container of `many` shows running but `dead`, which
/// shows exited, and every pod ready.
async fn states_right(cri: &mut Cri, many: &Many, dead: &str) -> bool {
    let Ok(listed) = cri
        .runtime
        .list_containers(cri::ListContainersRequest { filter: None })
        .await
    else {
        return false;
    };
    let Ok(pods) = cri
        .runtime
        .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None })
        .await
    else {
        return false;
    };
    let listed = listed.into_inner().containers;
    let pods = pods.into_inner().items;
    let running = cri::ContainerState::ContainerRunning as i32;
    let exited = cri::ContainerState::ContainerExited as i32;
    many.pods.iter().all(|(pod, id)| {
        let want = if id == dead { exited } else { running };
        listed.iter().any(|c| &c.id == id && c.state == want)
            && pods
                .iter()
                .any(|p| &p.id == pod && p.state == cri::PodSandboxState::SandboxReady as i32)
    })
}

/// With `many` pods: the lists kubelet asks for every second, memory,
/// and containerd's crash.
async fn with_many(s: &mut Subject, round: usize, many: usize, out: &mut Out) {
    let name = s.name();
    let Some(m) = make_many(s, round, many, out).await else {
        return teardown(s).await;
    };
    for _ in 0..LIST_SAMPLES {
        // the floor under every answer: one gRPC round trip on the socket
        let version = timed(s.cri.runtime.version(cri::VersionRequest::default())).await;
        out.sample(
            name,
            &format!("Version, the round trip ({many} pods)"),
            version.map(|(t, _)| t),
        );
        let pods = timed(
            s.cri
                .runtime
                .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None }),
        )
        .await;
        out.sample(
            name,
            &format!("ListPodSandbox ({many} pods)"),
            pods.map(|(t, _)| t),
        );
        let containers = timed(
            s.cri
                .runtime
                .list_containers(cri::ListContainersRequest { filter: None }),
        )
        .await;
        out.sample(
            name,
            &format!("ListContainers ({many} pods)"),
            containers.map(|(t, _)| t),
        );
        let id = m.pods[round % m.pods.len()].1.clone();
        let status = timed(s.cri.runtime.container_status(cri::ContainerStatusRequest {
            container_id: id,
            verbose: false,
        }))
        .await;
        out.sample(
            name,
            &format!("ContainerStatus ({many} pods)"),
            status.map(|(t, _)| t),
        );
    }
    out.rss(s, &format!("{many} pods"));

    // containerd SIGKILLed; one container's process dies while it is down
    let (_, victim) = m.pods[round % m.pods.len()].clone();
    let p = s.runtime.process_of(&victim);
    s.runtime.containerd_down();
    procs::signal(p.pid, "KILL");
    poll_until(BOUND, || !p.is_alive());
    let t0 = Instant::now();
    s.runtime.containerd_up();
    let mut right = false;
    while !right && t0.elapsed() < BOUND {
        right = states_right(&mut s.cri, &m, &victim).await;
        if !right {
            tokio::time::sleep(TIGHT_POLL).await;
        }
    }
    out.sample(
        name,
        &format!("containerd restart -> {many} statuses right"),
        if right {
            Ok(t0.elapsed())
        } else {
            Err(format!("not within {BOUND:?}"))
        },
    );
    teardown(s).await;
}

/// Stops and removes every pod listed.
async fn teardown(s: &mut Subject) {
    let pods = s.cri.pods().await;
    for chunk in pods.chunks(PARALLEL) {
        futures_util::future::join_all(chunk.iter().map(|p| {
            let mut cri = s.cri.clone();
            let id = p.id.clone();
            async move { remove_pod(&mut cri, &id).await }
        }))
        .await;
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: vs_containerd_cri OUT_DIR [ROUNDS] [MANY] [RESTARTS]");
        std::process::exit(2);
    };
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let many: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let restarts: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    run(&dir, rounds, many, restarts);
}

fn run(dir: &Path, rounds: usize, many: usize, restarts: usize) {
    fs::create_dir_all(dir).expect("create the output directory");
    let mut out = Out {
        samples: fs::File::create(dir.join("samples.jsonl")).expect("create samples.jsonl"),
        rss: fs::File::create(dir.join("rss.jsonl")).expect("create rss.jsonl"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let runtimes: Vec<Box<dyn CriRuntime>> = vec![
        Box::new(Holdfast::start()),
        Box::new(ContainerdCri::start()),
    ];
    let mut subjects: Vec<Subject> = runtimes
        .into_iter()
        .map(|runtime| {
            let _in_rt = rt.enter();
            let cri = Cri::on(runtime.cri_socket());
            Subject { runtime, cri }
        })
        .collect();
    for s in &mut subjects {
        // warm caches (images, binaries, the pause image's seeding); not recorded
        rt.block_on(latencies_unrecorded(s));
        out.rss(s, "idle");
    }
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            rt.block_on(latencies(&mut subjects[i], round, &mut out));
        }
    }
    for round in 0..restarts {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            rt.block_on(with_many(&mut subjects[i], round, many, &mut out));
        }
    }
    for s in &subjects {
        out.rss(s, "idle, after");
    }
    drop(subjects);
}

/// A pod run, a container started and the pod removed, nothing recorded.
async fn latencies_unrecorded(s: &mut Subject) {
    let config = pod_config(s, "warm");
    if let Ok((_, pod)) = run_pod(&mut s.cri, config.clone()).await {
        let _ = create_start(&mut s.cri, &pod, &config, container_config("warm", "true")).await;
        let _ = remove_pod(&mut s.cri, &pod).await;
    }
}
