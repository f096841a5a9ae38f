//! Chaos for pods: the faults of `chaos.rs` under pods that a client drives
//! over the CRI, as kubelet drives them, counted against the truth read
//! from `/proc`:
//!
//! - `wrong_kills`: a process of a pod (a container's, a sandbox's pause)
//!   gone that no request asked to end;
//! - `lost_exits`: a container (or a sandbox) not shown exited (or not
//!   ready) once containerd is back plus [`SEE_EXIT_GRACE`], or once its
//!   shim was killed plus [`SHIM_DEATH_BOUND`], although its process is gone;
//! - `wrong_exit_codes`: an exit shown with another code than the process
//!   exited with;
//! - `stale_states`: a container shown exited, or a sandbox shown not
//!   ready, whose process runs; a removed pod still listed or running;
//! - `lost_pods`: a pod or container neither removed nor asked to be that
//!   is no longer listed;
//! - `half_created`: something containerd holds that the CRI does not
//!   list, or a pod or container listed after its request failed;
//! - `failed_requests`: a request that should have succeeded (a stop or a
//!   removal across an outage, kubelet's retry after holdfastd's crash,
//!   anything once the fault is healed) and did not within
//!   [`REQUEST_BOUND`];
//! - `wrong_oom`: reason `OOMKilled` for anything but an OOM kill, or
//!   missing for one.
//!
//! Every count must be zero for holdfast. Counts are written as JSON to
//! `$CHAOS_REPORT/<runtime>-<scenario>.json` when that is set. The pods
//! run on the host's network (no bridge needed; a pod network's
//! allocations through crashes are `cri.rs`'s and the network suites').
//!
//! `CHAOS_RUNTIME=containerd-cri` drives containerd's own CRI plugin
//! instead (counts only, never asserted; see bench/vs-containerd-cri.sh).
//! There the runtime is containerd: "holdfastd SIGKILLed" is containerd
//! SIGKILLed, and a request sent while containerd is down is refused at
//! once (its socket is gone): it counts as failed, and is retried once
//! containerd is back, as kubelet's next sync does, so that what follows
//! is still checked.

use holdfast_e2e::cri::runtimes::{ContainerdCri, CriRuntime};
use holdfast_e2e::cri::{Cri, busybox, host_namespaces, host_pod};
use holdfast_e2e::engine::{Holdfast, shim_of};
use holdfast_e2e::procs::{self, ProcessIdentity};
use holdfast_e2e::{TICKER, gated_exit, open_gate, poll_until};
use k8s_cri::v1 as cri;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// How long holdfastd, once containerd is back, may take to show an exit
/// that happened while it was away.
const SEE_EXIT_GRACE: Duration = Duration::from_secs(20);
/// The bound of one request: past it, the request counts as unanswered.
const REQUEST_BOUND: Duration = Duration::from_secs(90);
/// The bound within which a container whose shim was SIGKILLed must be
/// shown exited (a sandbox: not ready).
const SHIM_DEATH_BOUND: Duration = Duration::from_secs(10);
/// An outage longer than containerd's shim retries an exit event (~21 s).
const LONG_OUTAGE: Duration = Duration::from_secs(25);
/// Exits 0 on SIGTERM, leaving `/mark/termed` (a host directory mounted
/// in) as evidence that SIGTERM reached it; without that evidence its
/// truthful exit code after a stop is SIGKILL's 137.
const POLITE: &str = "trap 'touch /mark/termed; exit 0' TERM; while true; do sleep 0.1; done";

const RUNNING: i32 = cri::ContainerState::ContainerRunning as i32;
const READY: i32 = cri::PodSandboxState::SandboxReady as i32;
const NOT_READY: i32 = cri::PodSandboxState::SandboxNotready as i32;

/// What went wrong in one scenario, counted.
#[derive(Debug, Default)]
struct Counts {
    wrong_kills: usize,
    lost_exits: usize,
    wrong_exit_codes: usize,
    stale_states: usize,
    lost_pods: usize,
    half_created: usize,
    failed_requests: usize,
    wrong_oom: usize,
    /// How many facts were checked (a scenario that checked nothing
    /// proves nothing).
    checks: usize,
    notes: Vec<String>,
}

impl Counts {
    fn json(&self) -> serde_json::Value {
        json!({
            "wrong_kills": self.wrong_kills,
            "lost_exits": self.lost_exits,
            "wrong_exit_codes": self.wrong_exit_codes,
            "stale_states": self.stale_states,
            "lost_pods": self.lost_pods,
            "half_created": self.half_created,
            "failed_requests": self.failed_requests,
            "wrong_oom": self.wrong_oom,
            "checks": self.checks,
            "notes": self.notes,
        })
    }

    fn total(&self) -> usize {
        self.wrong_kills
            + self.lost_exits
            + self.wrong_exit_codes
            + self.stale_states
            + self.lost_pods
            + self.half_created
            + self.failed_requests
            + self.wrong_oom
    }
}

/// Counts one wrong fact, with what was seen.
macro_rules! count {
    ($c:expr, $field:ident, $($arg:tt)*) => {{
        let note = format!($($arg)*);
        eprintln!("chaos[cri/{}] {}: {note}", $c.scenario, stringify!($field));
        $c.counts.$field += 1;
        $c.counts.notes.push(format!("{}: {note}", stringify!($field)));
    }};
}

/// A request sent on its own, answered (or not) within [`REQUEST_BOUND`].
type InFlight<T> =
    JoinHandle<Result<Result<tonic::Response<T>, tonic::Status>, tokio::time::error::Elapsed>>;

/// A container of a pod as the scenario made it: its id and its process.
struct Member {
    id: String,
    process: ProcessIdentity,
}

/// A pod as the scenario made it: its sandbox's id, pause process and
/// config (kubelet sends it with each of its containers' creates).
struct Pod {
    id: String,
    pause: ProcessIdentity,
    config: cri::PodSandboxConfig,
}

/// The runtime `CHAOS_RUNTIME` names (holdfast unless it says
/// `containerd-cri`), started.
fn runtime_under_test() -> Box<dyn CriRuntime> {
    match std::env::var("CHAOS_RUNTIME").as_deref() {
        Err(_) | Ok("holdfast") => Box::new(Holdfast::start()),
        Ok("containerd-cri") => Box::new(ContainerdCri::start()),
        Ok(other) => panic!("CHAOS_RUNTIME={other}: want holdfast or containerd-cri"),
    }
}

/// One scenario: a runtime, a CRI client on it, the counts.
struct PodChaos {
    scenario: &'static str,
    // Declared before the runtime: the client's tasks end before the
    // runtime's drop removes every trace.
    rt: tokio::runtime::Runtime,
    cri: Cri,
    runtime: Box<dyn CriRuntime>,
    /// When the scenario began (its runtime started).
    began: Instant,
    counts: Counts,
    /// Host directories mounted in as `/mark` (see [`POLITE`]).
    marks: tempfile::TempDir,
    /// Pods and containers made and not asked to be removed: each must
    /// stay listed.
    kept: BTreeSet<String>,
}

impl PodChaos {
    fn new(scenario: &'static str) -> PodChaos {
        let runtime = runtime_under_test();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let cri = {
            let _in_rt = rt.enter();
            Cri::on(runtime.cri_socket())
        };
        PodChaos {
            scenario,
            rt,
            cri,
            runtime,
            began: Instant::now(),
            counts: Counts::default(),
            marks: tempfile::tempdir().expect("a temporary directory"),
            kept: BTreeSet::new(),
        }
    }

    // ---- making pods

    fn pod_config(&self, name: &str) -> cri::PodSandboxConfig {
        host_pod(name, "chaos", &self.runtime.scratch().join("pods"))
    }

    /// A pod on the host's network; kept.
    fn pod(&mut self, name: &str) -> Pod {
        let config = self.pod_config(name);
        let id = self
            .rt
            .block_on(self.cri.run_pod(&*self.runtime, config.clone()));
        let pause = self.runtime.process_of(&id);
        self.kept.insert(id.clone());
        Pod { id, pause, config }
    }

    /// A container of `pod` running `script`, started; kept.
    fn member(&mut self, pod: &Pod, name: &str, script: &str) -> Member {
        self.member_with(pod, container_config(name, script))
    }

    fn member_with(&mut self, pod: &Pod, config: cri::ContainerConfig) -> Member {
        let id = self.rt.block_on(self.cri.create_with(
            &*self.runtime,
            &pod.id,
            Some(pod.config.clone()),
            config,
        ));
        self.rt.block_on(self.cri.start(&*self.runtime, &id));
        let process = self.runtime.process_of(&id);
        self.kept.insert(id.clone());
        Member { id, process }
    }

    /// [`POLITE`] with a mark directory of its own mounted at `/mark`.
    fn polite(&mut self, pod: &Pod, name: &str) -> (Member, std::path::PathBuf) {
        let marks = self.marks.path().join(name);
        std::fs::create_dir_all(&marks).expect("create a mark directory");
        let mut config = container_config(name, POLITE);
        config.mounts = vec![cri::Mount {
            container_path: "/mark".to_owned(),
            host_path: marks.display().to_string(),
            ..cri::Mount::default()
        }];
        (self.member_with(pod, config), marks)
    }

    // ---- faults and requests

    /// Sends `request` on its own task (a client of its own), bounded.
    fn send<T, F>(&self, request: impl FnOnce(Cri) -> F) -> InFlight<T>
    where
        T: Send + 'static,
        F: Future<Output = Result<tonic::Response<T>, tonic::Status>> + Send + 'static,
    {
        let future = request(self.cri.clone());
        self.rt
            .spawn(async move { tokio::time::timeout(REQUEST_BOUND, future).await })
    }

    /// How many requests of `method` (`StopContainer`, ...) the runtime
    /// has logged so far.
    fn requests_logged(&self, method: &str) -> usize {
        self.runtime.requests_logged(method)
    }

    /// Waits until the runtime has logged more requests of `method` than
    /// `before` (the request is in, not only sent), or `request` has been
    /// answered (a runtime that is down refuses it unread).
    fn wait_received<T>(&self, method: &str, before: usize, request: &InFlight<T>) {
        self.wait_until(&format!("the runtime has received {method}"), || {
            self.requests_logged(method) > before || request.is_finished()
        });
    }

    /// Polls `condition` within the suites' bound; panics (with the logs)
    /// past it: the harness could not do its part.
    fn wait_until(&self, what: &str, condition: impl FnMut() -> bool) {
        if !poll_until(holdfast_e2e::WAIT_BOUND, condition) {
            panic!(
                "{what}: not within {:?}{}",
                holdfast_e2e::WAIT_BOUND,
                self.runtime.diagnostics()
            );
        }
    }

    /// As [`PodChaos::must_succeed`], for a request sent while containerd
    /// was down: one refused because the runtime itself was unreachable
    /// (containerd's plugin, whose socket goes with containerd) counts as
    /// failed, and `retry` is sent as kubelet's next sync would, so that
    /// its result is still checked.
    fn must_succeed_or_retry<T, F>(
        &mut self,
        what: &str,
        request: InFlight<T>,
        retry: impl FnOnce(Cri) -> F,
    ) -> Option<T>
    where
        T: Send + 'static,
        F: Future<Output = Result<tonic::Response<T>, tonic::Status>> + Send + 'static,
    {
        self.counts.checks += 1;
        match self.rt.block_on(request) {
            Ok(Ok(Ok(answer))) => return Some(answer.into_inner()),
            Ok(Ok(Err(status))) => {
                count!(self, failed_requests, "{what}: {status}");
            }
            Ok(Err(_)) => {
                count!(
                    self,
                    failed_requests,
                    "{what}: unanswered after {REQUEST_BOUND:?}"
                );
            }
            Err(e) => panic!("{what}: its task failed: {e}"),
        }
        let retried = self.send(retry);
        self.must_succeed(&format!("{what}, retried"), retried)
    }

    /// The answer of `request`, counted as a failed request when it is
    /// refused or unanswered.
    fn must_succeed<T>(&mut self, what: &str, request: InFlight<T>) -> Option<T> {
        self.counts.checks += 1;
        match self.rt.block_on(request) {
            Ok(Ok(Ok(answer))) => Some(answer.into_inner()),
            Ok(Ok(Err(status))) => {
                count!(self, failed_requests, "{what}: {status}");
                None
            }
            Ok(Err(_)) => {
                count!(
                    self,
                    failed_requests,
                    "{what}: unanswered after {REQUEST_BOUND:?}"
                );
                None
            }
            Err(e) => panic!("{what}: its task failed: {e}"),
        }
    }

    /// Waits until holdfastd says containerd is reachable again (its
    /// `RuntimeReady`).
    fn wait_usable(&mut self) {
        let started = Instant::now();
        let mut ready = false;
        while !ready && started.elapsed() < holdfast_e2e::WAIT_BOUND {
            let status = self
                .rt
                .block_on(self.cri.runtime.status(cri::StatusRequest::default()));
            ready = status.is_ok_and(|s| {
                s.into_inner().status.is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.r#type == "RuntimeReady" && c.status)
                })
            });
            if !ready {
                std::thread::sleep(holdfast_e2e::POLL_INTERVAL);
            }
        }
        if !ready {
            count!(self, failed_requests, "RuntimeReady never came back");
        }
    }

    // ---- checks against the truth

    /// `m`'s process runs untouched, and it is shown running.
    fn check_running(&mut self, what: &str, m: &Member) {
        self.counts.checks += 1;
        let status = self.rt.block_on(self.cri.status(&m.id));
        if !m.process.is_alive() {
            count!(
                self,
                wrong_kills,
                "{what}: its process is gone, nobody asked"
            );
        } else if !status.as_ref().is_ok_and(|s| s.state == RUNNING) {
            count!(self, stale_states, "{what}: runs, shown {status:?}");
        }
    }

    /// `m` is shown exited with `code`, within `bound`.
    fn check_exited(&mut self, what: &str, m: &Member, code: i32, bound: Duration) {
        self.counts.checks += 1;
        let started = Instant::now();
        let mut last = None;
        let exited = self
            .rt
            .block_on(self.cri.exited_within(&m.id, bound, &mut last));
        let shown = format!("{last:?}");
        if !exited {
            if m.process.is_alive() {
                count!(self, failed_requests, "{what}: still runs, {shown}");
            } else {
                count!(
                    self,
                    lost_exits,
                    "{what}: gone, still {shown} after {bound:?}"
                );
            }
            return;
        }
        eprintln!(
            "chaos[cri/{}] {what} shown exited after {:?}",
            self.scenario,
            started.elapsed()
        );
        if m.process.is_alive() {
            count!(self, stale_states, "{what}: shown exited, its process runs");
        }
        if let Some(Ok(s)) = last
            && s.exit_code != code
        {
            count!(self, wrong_exit_codes, "{what} (want {code}): {s:?}");
        }
    }

    /// `m`, whose shim was SIGKILLed, is shown exited within
    /// [`SHIM_DEATH_BOUND`], and its process is gone.
    fn check_ended_with_its_shim(&mut self, what: &str, m: &Member) {
        self.counts.checks += 1;
        let mut last = None;
        let exited = self
            .rt
            .block_on(self.cri.exited_within(&m.id, SHIM_DEATH_BOUND, &mut last));
        if !exited {
            count!(
                self,
                lost_exits,
                "{what}: its shim killed, still {last:?} after {SHIM_DEATH_BOUND:?}"
            );
        } else if m.process.is_alive() {
            let outlived = self.outlived(&m.process);
            count!(
                self,
                stale_states,
                "{what}: shown exited, its process runs ({outlived})"
            );
        }
    }

    /// How long `p`, shown ended while it ran, went on running: the
    /// notes tell a moment's race from a lasting lie.
    fn outlived(&self, p: &ProcessIdentity) -> String {
        let shown = Instant::now();
        if poll_until(SHIM_DEATH_BOUND, || !p.is_alive()) {
            format!("gone {:?} later", shown.elapsed())
        } else {
            format!("still running {SHIM_DEATH_BOUND:?} later")
        }
    }

    /// `pod`, whose sandbox's shim was SIGKILLed, is shown not ready within
    /// [`SHIM_DEATH_BOUND`], and its pause is gone.
    fn check_not_ready_with_its_shim(&mut self, what: &str, pod: &Pod) {
        self.counts.checks += 1;
        let mut shown = None;
        let not_ready = poll_until(SHIM_DEATH_BOUND, || {
            shown = Some(self.rt.block_on(self.cri.pod_status(&pod.id)));
            shown
                .as_ref()
                .is_some_and(|s| s.as_ref().is_ok_and(|s| s.state == NOT_READY))
        });
        if !not_ready {
            count!(
                self,
                lost_exits,
                "{what}: its shim killed, still {shown:?} after {SHIM_DEATH_BOUND:?}"
            );
        } else if pod.pause.is_alive() {
            count!(
                self,
                stale_states,
                "{what}: shown not ready, its pause runs ({})",
                self.outlived(&pod.pause)
            );
        }
    }

    /// `pod`'s pause runs untouched, and the pod is shown ready.
    fn check_ready(&mut self, what: &str, pod: &Pod) {
        self.counts.checks += 1;
        let status = self.rt.block_on(self.cri.pod_status(&pod.id));
        if !pod.pause.is_alive() {
            count!(self, wrong_kills, "{what}: its pause is gone, nobody asked");
        } else if !status.as_ref().is_ok_and(|s| s.state == READY) {
            count!(
                self,
                stale_states,
                "{what}: its pause runs, shown {status:?}"
            );
        }
    }

    /// Every pod and container kept is still listed; containerd holds
    /// nothing the CRI does not list.
    fn audit(&mut self) {
        let pods = self.rt.block_on(self.cri.pods());
        let containers = self.rt.block_on(self.cri.containers(None));
        let listed: BTreeSet<String> = pods
            .iter()
            .map(|p| p.id.clone())
            .chain(containers.iter().map(|c| c.id.clone()))
            .collect();
        for id in self.kept.clone() {
            self.counts.checks += 1;
            if !listed.contains(&id) {
                count!(
                    self,
                    lost_pods,
                    "{id}: neither removed nor asked to be, not listed"
                );
            }
        }
        let Some(held) = self.runtime.containerd_container_ids() else {
            panic!(
                "containerd does not list its containers{}",
                self.runtime.diagnostics()
            );
        };
        for id in held {
            self.counts.checks += 1;
            if !listed.contains(&id) {
                count!(
                    self,
                    half_created,
                    "containerd holds {id}, the CRI lists nothing of it"
                );
            }
        }
    }

    /// Prints and writes the counts; for holdfast every count must be
    /// zero.
    fn finish(self) {
        let runtime = self.runtime.name();
        let mut report = self.counts.json();
        report["scenario"] = json!(self.scenario);
        report["runtime"] = json!(runtime);
        report["seconds"] = json!(self.began.elapsed().as_secs());
        eprintln!("chaos[cri/{}] {runtime} {report}", self.scenario);
        if let Some(dir) = std::env::var_os("CHAOS_REPORT") {
            let path =
                std::path::Path::new(&dir).join(format!("cri-{runtime}-{}.json", self.scenario));
            std::fs::write(&path, report.to_string())
                .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        }
        assert!(
            self.counts.checks > 0,
            "{}: nothing was checked",
            self.scenario
        );
        if runtime == "holdfast" {
            assert_eq!(
                self.counts.total(),
                0,
                "{}: {:#?}{}",
                self.scenario,
                self.counts,
                self.runtime.diagnostics()
            );
        }
    }
}

/// A busybox container running `script` in the pod's namespaces.
fn container_config(name: &str, script: &str) -> cri::ContainerConfig {
    cri::ContainerConfig {
        linux: Some(cri::LinuxContainerConfig {
            security_context: Some(cri::LinuxContainerSecurityContext {
                namespace_options: Some(host_namespaces()),
                ..cri::LinuxContainerSecurityContext::default()
            }),
            ..cri::LinuxContainerConfig::default()
        }),
        ..busybox(name, script)
    }
}

/// containerd SIGKILLed and held down while a pod's container exits, three
/// times, the last outage longer than the shim retries its exit event: each
/// exit is shown with its code once containerd is back; every other
/// process of every pod runs untouched.
#[test]
fn exits_of_pods_through_containerd_outages_and_a_long_one() {
    let mut c = PodChaos::new("containerd_outages");
    let mut pods = Vec::new();
    for i in 0..3 {
        let pod = c.pod(&format!("pod{i}"));
        let gated = c.member(&pod, "gated", &gated_exit(10 + i));
        let keep = c.member(&pod, "keep", TICKER);
        pods.push((pod, gated, keep));
    }
    for (i, (_, gated, _)) in pods.iter().enumerate() {
        c.runtime.containerd_down();
        open_gate(gated.process.pid);
        c.wait_until("the gated process is gone", || !gated.process.is_alive());
        if i == 2 {
            // The point is the time passing: past the shim's retries.
            std::thread::sleep(LONG_OUTAGE);
        }
        c.runtime.containerd_up();
        c.wait_usable();
        c.check_exited(
            &format!("pod{i}/gated"),
            gated,
            10 + i as i32,
            SEE_EXIT_GRACE,
        );
    }
    for (i, (pod, _, keep)) in pods.iter().enumerate() {
        c.check_running(&format!("pod{i}/keep"), keep);
        c.check_ready(&format!("pod{i}"), pod);
    }
    c.audit();
    c.finish();
}

/// A container's shim SIGKILLed: it is shown exited within a bound. A
/// sandbox's shim SIGKILLed: the pod is shown not ready within the bound.
/// Nothing else is touched. (containerd's plugin runs a pod's containers
/// under its sandbox's one shim: there the victim's shim is its pod's, and
/// everything under it must be shown ended instead.)
#[test]
fn a_killed_shim_is_an_exit_of_its_container_or_sandbox() {
    let mut c = PodChaos::new("shim_kill");
    let pod = c.pod("victims");
    let victim = c.member(&pod, "victim", "sleep 1000");
    let keep = c.member(&pod, "keep", TICKER);
    let lost = c.pod("lost");
    let other = c.pod("other");
    let other_keep = c.member(&other, "keep", TICKER);

    let shim_above = |c: &PodChaos, pid: u32| {
        shim_of(pid).unwrap_or_else(|| panic!("no shim above {pid}{}", c.runtime.diagnostics()))
    };
    let shim = shim_above(&c, victim.process.pid);
    let keep_shares = shim_above(&c, keep.process.pid) == shim;
    let pod_shares = shim_above(&c, pod.pause.pid) == shim;
    if keep_shares || pod_shares {
        eprintln!(
            "chaos[cri/shim_kill] {}: the victim's shim is its pod's (keep: {keep_shares}, sandbox: {pod_shares})",
            c.runtime.name()
        );
    }
    procs::signal(shim, "KILL");
    // Its process may outlive its shim a moment; what it exited with is
    // the shim's business (containerd reaps it): only the exit is checked.
    c.check_ended_with_its_shim("victims/victim", &victim);
    if keep_shares {
        c.check_ended_with_its_shim("victims/keep", &keep);
    } else {
        c.check_running("victims/keep", &keep);
    }
    if pod_shares {
        c.check_not_ready_with_its_shim("victims", &pod);
    } else {
        c.check_ready("victims", &pod);
    }

    let shim = shim_above(&c, lost.pause.pid);
    procs::signal(shim, "KILL");
    c.check_not_ready_with_its_shim("lost", &lost);

    c.check_running("other/keep", &other_keep);
    c.check_ready("other", &other);
    c.audit();
    c.finish();
}

/// A container's stop, a pod's stop and a pod's removal asked while
/// containerd is down: each is answered once it is back, and carried out;
/// nothing else is touched.
#[test]
fn stops_and_a_removal_during_an_outage_are_carried_out() {
    let mut c = PodChaos::new("outage_stop_remove");
    let a = c.pod("a");
    let (polite, marks) = c.polite(&a, "polite");
    let b = c.pod("b");
    let b_ticker = c.member(&b, "ticker", TICKER);
    let gone = c.pod("gone");
    let gone_ticker = c.member(&gone, "ticker", TICKER);
    let keep_pod = c.pod("keep");
    let keep = c.member(&keep_pod, "keep", TICKER);
    // Asked to end: not for the audit to find listed (a and b stay
    // listed, exited; gone must not be).
    c.kept.remove(&gone.id);
    c.kept.remove(&gone_ticker.id);

    c.runtime.containerd_down();
    let before = [
        c.requests_logged("StopContainer"),
        c.requests_logged("StopPodSandbox"),
        c.requests_logged("RemovePodSandbox"),
    ];
    let id = polite.id.clone();
    let stop = c.send(|mut cri| async move {
        cri.runtime
            .stop_container(cri::StopContainerRequest {
                container_id: id,
                timeout: 5,
            })
            .await
    });
    let id = b.id.clone();
    let stop_pod = c.send(|mut cri| async move {
        cri.runtime
            .stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: id })
            .await
    });
    let id = gone.id.clone();
    let remove_pod = c.send(|mut cri| async move {
        cri.runtime
            .remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: id })
            .await
    });
    c.wait_received("StopContainer", before[0], &stop);
    c.wait_received("StopPodSandbox", before[1], &stop_pod);
    c.wait_received("RemovePodSandbox", before[2], &remove_pod);
    c.runtime.containerd_up();
    c.wait_usable();

    let id = polite.id.clone();
    let stop_again = |mut cri: Cri| async move {
        cri.runtime
            .stop_container(cri::StopContainerRequest {
                container_id: id,
                timeout: 5,
            })
            .await
    };
    if c.must_succeed_or_retry("StopContainer polite", stop, stop_again)
        .is_some()
    {
        let code = if marks.join("termed").exists() {
            0
        } else {
            137
        };
        c.check_exited("a/polite", &polite, code, SEE_EXIT_GRACE);
    }
    let id = b.id.clone();
    let stop_pod_again = |mut cri: Cri| async move {
        cri.runtime
            .stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: id })
            .await
    };
    if c.must_succeed_or_retry("StopPodSandbox b", stop_pod, stop_pod_again)
        .is_some()
    {
        // sh as pid 1 has no TERM handler: only SIGKILL ends the ticker.
        c.check_exited("b/ticker", &b_ticker, 137, SEE_EXIT_GRACE);
        c.counts.checks += 1;
        let status = c.rt.block_on(c.cri.pod_status(&b.id));
        if !status.as_ref().is_ok_and(|s| s.state == NOT_READY) {
            count!(c, stale_states, "b: stopped, shown {status:?}");
        } else if b.pause.is_alive() {
            count!(c, stale_states, "b: shown not ready, its pause runs");
        }
    }
    let id = gone.id.clone();
    let remove_pod_again = |mut cri: Cri| async move {
        cri.runtime
            .remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: id })
            .await
    };
    if c.must_succeed_or_retry("RemovePodSandbox gone", remove_pod, remove_pod_again)
        .is_some()
    {
        c.counts.checks += 1;
        let pods = c.rt.block_on(c.cri.pods());
        let containers = c.rt.block_on(c.cri.containers(None));
        if pods.iter().any(|p| p.id == gone.id)
            || containers.iter().any(|m| m.id == gone_ticker.id)
            || gone.pause.is_alive()
            || gone_ticker.process.is_alive()
        {
            count!(c, stale_states, "gone: removed, still listed or running");
        }
    }
    c.check_running("keep/keep", &keep);
    c.check_ready("keep", &keep_pod);
    c.audit();
    c.finish();
}

/// A pod run and a container created while containerd is down: either
/// they succeed for real once it is back, or they fail and leave nothing
/// behind.
#[test]
fn a_pod_or_container_made_during_an_outage_is_real_or_leaves_nothing() {
    let mut c = PodChaos::new("outage_create");
    let home = c.pod("home");
    let keep = c.member(&home, "keep", TICKER);

    c.runtime.containerd_down();
    let before = [
        c.requests_logged("RunPodSandbox"),
        c.requests_logged("CreateContainer"),
    ];
    let config = c.pod_config("during");
    let run = c.send(|mut cri| async move {
        cri.runtime
            .run_pod_sandbox(cri::RunPodSandboxRequest {
                config: Some(config),
                runtime_handler: String::new(),
            })
            .await
    });
    let pod_id = home.id.clone();
    let sandbox_config = home.config.clone();
    let create = c.send(|mut cri| async move {
        cri.runtime
            .create_container(cri::CreateContainerRequest {
                pod_sandbox_id: pod_id,
                config: Some(container_config("during", TICKER)),
                sandbox_config: Some(sandbox_config),
            })
            .await
    });
    c.wait_received("RunPodSandbox", before[0], &run);
    c.wait_received("CreateContainer", before[1], &create);
    c.runtime.containerd_up();
    let ran = c.rt.block_on(run).expect("the RunPodSandbox task");
    let created = c.rt.block_on(create).expect("the CreateContainer task");
    c.wait_usable();

    let pods = c.rt.block_on(c.cri.pods());
    let containers = c.rt.block_on(c.cri.containers(None));
    let named_pod = pods
        .iter()
        .find(|p| p.metadata.as_ref().is_some_and(|m| m.name == "during"));
    let named_container = containers
        .iter()
        .find(|m| m.metadata.as_ref().is_some_and(|m| m.name == "during"));
    c.counts.checks += 2;
    match (ran, named_pod) {
        (Ok(Ok(answer)), Some(p)) => {
            let id = answer.into_inner().pod_sandbox_id;
            eprintln!("chaos[cri/outage_create] RunPodSandbox during the outage: ran {id}");
            if p.id != id {
                count!(c, half_created, "during: answered {id}, listed {}", p.id);
            } else if p.state != READY {
                count!(c, stale_states, "during: run, shown {p:?}");
            }
            c.kept.insert(id);
        }
        (Ok(Ok(answer)), None) => {
            let id = answer.into_inner().pod_sandbox_id;
            count!(c, lost_pods, "during: run as {id}, then not listed");
        }
        (refused, Some(p)) => {
            count!(
                c,
                half_created,
                "RunPodSandbox failed ({refused:?}), left {p:?}"
            );
        }
        (refused, None) => {
            eprintln!("chaos[cri/outage_create] RunPodSandbox during the outage: {refused:?}");
        }
    }
    match (created, named_container) {
        (Ok(Ok(answer)), Some(m)) => {
            let id = answer.into_inner().container_id;
            if m.id != id {
                count!(c, half_created, "during: answered {id}, listed {}", m.id);
            } else {
                // Created for real: it starts.
                c.rt.block_on(c.cri.start(&*c.runtime, &id));
                let member = Member {
                    process: c.runtime.process_of(&id),
                    id,
                };
                c.check_running("home/during", &member);
                c.kept.insert(member.id);
            }
        }
        (Ok(Ok(answer)), None) => {
            let id = answer.into_inner().container_id;
            count!(c, lost_pods, "during: created as {id}, then not listed");
        }
        (refused, Some(m)) => {
            count!(
                c,
                half_created,
                "CreateContainer failed ({refused:?}), left {m:?}"
            );
        }
        (refused, None) => {
            eprintln!("chaos[cri/outage_create] CreateContainer during the outage: {refused:?}");
        }
    }
    c.check_running("home/keep", &keep);
    c.check_ready("home", &home);
    c.audit();
    c.finish();
}

/// holdfastd SIGKILLed with a pod's run, a pod's stop and a container's
/// stop in flight, twice: whatever each request's fate, kubelet's retry
/// succeeds, the result is real, and nothing else is touched.
#[test]
fn holdfastd_sigkill_mid_request_then_a_retry_succeeds() {
    let mut c = PodChaos::new("holdfastd_sigkill");
    let keep_pod = c.pod("keep");
    let keep = c.member(&keep_pod, "keep", TICKER);
    for cycle in 0..2 {
        let stopped = c.pod(&format!("stopped{cycle}"));
        let stopped_ticker = c.member(&stopped, "ticker", TICKER);
        let home = c.pod(&format!("home{cycle}"));
        let (polite, marks) = c.polite(&home, &format!("polite{cycle}"));
        let before = [
            c.requests_logged("RunPodSandbox"),
            c.requests_logged("StopPodSandbox"),
            c.requests_logged("StopContainer"),
        ];
        let new_config = c.pod_config(&format!("new{cycle}"));
        let run_request = |config: cri::PodSandboxConfig| {
            move |mut cri: Cri| async move {
                cri.runtime
                    .run_pod_sandbox(cri::RunPodSandboxRequest {
                        config: Some(config),
                        runtime_handler: String::new(),
                    })
                    .await
            }
        };
        let run = c.send(run_request(new_config.clone()));
        let stop_pod = |id: String| {
            move |mut cri: Cri| async move {
                cri.runtime
                    .stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: id })
                    .await
            }
        };
        let stopping_pod = c.send(stop_pod(stopped.id.clone()));
        let stop = |id: String| {
            move |mut cri: Cri| async move {
                cri.runtime
                    .stop_container(cri::StopContainerRequest {
                        container_id: id,
                        timeout: 5,
                    })
                    .await
            }
        };
        let stopping = c.send(stop(polite.id.clone()));
        c.wait_received("RunPodSandbox", before[0], &run);
        c.wait_received("StopPodSandbox", before[1], &stopping_pod);
        c.wait_received("StopContainer", before[2], &stopping);
        c.runtime.kill_runtime();
        let fates = [
            format!("{:?}", c.rt.block_on(run).map(|r| r.map(|r| r.is_ok()))),
            format!(
                "{:?}",
                c.rt.block_on(stopping_pod).map(|r| r.map(|r| r.is_ok()))
            ),
            format!(
                "{:?}",
                c.rt.block_on(stopping).map(|r| r.map(|r| r.is_ok()))
            ),
        ];
        eprintln!("chaos[cri/holdfastd_sigkill] cycle {cycle}, answers before the kill: {fates:?}");
        c.runtime.restart_runtime();
        c.wait_usable();

        // kubelet's retries, each of which must succeed (a run whose first
        // attempt went through finds its name taken: then the pod is
        // listed, and that is kubelet's answer).
        let retry = c.send(run_request(new_config));
        let name = format!("new{cycle}");
        match c.rt.block_on(retry) {
            Ok(Ok(Ok(_))) => {}
            Ok(Ok(Err(status))) if status.code() == tonic::Code::AlreadyExists => {}
            other => count!(
                c,
                failed_requests,
                "RunPodSandbox {name} retried: {other:?}"
            ),
        }
        // Made before the kill or by the retry, it is the pod's one
        // sandbox, and it runs (the restarted holdfastd carries out a
        // start the kill cut, as it does any other).
        c.counts.checks += 1;
        let mut shown = None;
        let ready = poll_until(SEE_EXIT_GRACE, || {
            let pods = c.rt.block_on(c.cri.pods());
            let named: Vec<_> = pods
                .into_iter()
                .filter(|p| p.metadata.as_ref().is_some_and(|m| m.name == name))
                .collect();
            let ready = matches!(named.as_slice(), [p] if p.state == READY);
            shown = Some(named);
            ready
        });
        match shown.unwrap_or_default().as_slice() {
            [p] if ready => {
                c.kept.insert(p.id.clone());
            }
            [] => count!(c, lost_pods, "{name}: run, not listed"),
            [p] => count!(
                c,
                stale_states,
                "{name}: run, still shown {p:?} after {SEE_EXIT_GRACE:?}"
            ),
            many => count!(
                c,
                half_created,
                "{name}: run, {} sandboxes: {many:?}",
                many.len()
            ),
        }
        let retry = c.send(stop_pod(stopped.id.clone()));
        if c.must_succeed(&format!("StopPodSandbox stopped{cycle} retried"), retry)
            .is_some()
        {
            c.check_exited(
                &format!("stopped{cycle}/ticker"),
                &stopped_ticker,
                137,
                SEE_EXIT_GRACE,
            );
        }
        let retry = c.send(stop(polite.id.clone()));
        if c.must_succeed(&format!("StopContainer polite{cycle} retried"), retry)
            .is_some()
        {
            let code = if marks.join("termed").exists() {
                0
            } else {
                137
            };
            c.check_exited(
                &format!("home{cycle}/polite"),
                &polite,
                code,
                SEE_EXIT_GRACE,
            );
        }
        c.check_ready(&format!("home{cycle}"), &home);
    }
    c.check_running("keep/keep", &keep);
    c.check_ready("keep", &keep_pod);
    c.audit();
    c.finish();
}

/// Containers OOM-killed under a small memory limit show reason
/// `OOMKilled` and 137; one stopped with SIGKILL, or exiting 137 by
/// itself, never does.
#[test]
fn oom_kills_in_a_pod_are_reported_and_never_invented() {
    let mut c = PodChaos::new("oom");
    let pod = c.pod("oom");
    // tail holds the whole endless "line" in memory: the OOM killer ends it
    let hog = "head -c 200m /dev/zero | tail";
    let limited = |name: &str, script: &str| {
        let mut config = container_config(name, script);
        if let Some(linux) = config.linux.as_mut() {
            linux.resources = Some(cri::LinuxContainerResources {
                memory_limit_in_bytes: 16 << 20,
                ..cri::LinuxContainerResources::default()
            });
        }
        config
    };
    // (what, its id, its process, OOMKilled, exit code)
    let mut cases = Vec::new();
    for i in 0..2 {
        let name = format!("hog{i}");
        let id = c.rt.block_on(c.cri.create_with(
            &*c.runtime,
            &pod.id,
            Some(pod.config.clone()),
            limited(&name, hog),
        ));
        c.rt.block_on(c.cri.start(&*c.runtime, &id));
        c.kept.insert(id.clone());
        cases.push((name, id, true, 137));
    }
    let killed = c.member_with(&pod, limited("killed", "sleep 1000"));
    let stop = {
        let id = killed.id.clone();
        c.send(|mut cri| async move {
            cri.runtime
                .stop_container(cri::StopContainerRequest {
                    container_id: id,
                    timeout: 0,
                })
                .await
        })
    };
    c.must_succeed("StopContainer killed", stop);
    cases.push(("killed".to_owned(), killed.id.clone(), false, 137));
    let id = c.rt.block_on(c.cri.create_with(
        &*c.runtime,
        &pod.id,
        Some(pod.config.clone()),
        limited("self137", "exit 137"),
    ));
    c.rt.block_on(c.cri.start(&*c.runtime, &id));
    c.kept.insert(id.clone());
    cases.push(("self137".to_owned(), id, false, 137));

    for (name, id, oom, code) in cases {
        c.counts.checks += 1;
        let mut last = None;
        let exited = c.rt.block_on(
            c.cri
                .exited_within(&id, holdfast_e2e::WAIT_BOUND, &mut last),
        );
        let Some(Ok(s)) = last else {
            count!(c, lost_pods, "{name} is not known: {last:?}");
            continue;
        };
        if !exited {
            count!(c, lost_exits, "{name} never shown exited: {s:?}");
            continue;
        }
        if (s.reason == "OOMKilled") != oom {
            count!(c, wrong_oom, "{name}: reason {:?} (OOM: {oom})", s.reason);
        }
        if s.exit_code != code {
            count!(c, wrong_exit_codes, "{name} (want {code}): {s:?}");
        }
    }
    c.audit();
    c.finish();
}
