//! holdfastd's stand-in: the core as the daemon runs it (started from the
//! records it persisted, crashed now and then, even halfway through what
//! one input asked for), every input checked, every action carried out.

use super::{Ev, PendingCall, Sim, SimFailure, WorldCall, ms_of, wall};
use crate::faults::FaultKind;
use crate::trace::TraceItem;
use holdfast_core::{Action, Core, Input, Now, Probe, ProbeOutcome, ProbeResult, Record};
use std::fmt;

impl Sim {
    pub(super) fn start_daemon(&mut self) {
        self.daemon += 1;
        let seed = self.seed ^ self.daemon.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let now = Now::new(self.now, wall(self.now));
        self.core = Some(Core::new(self.opts.core_config.clone(), seed, now));
        self.stream = None;
        self.reachable = None;
        self.activity.clear();
        self.in_flight_for.clear();
        self.last_op = 0;
        self.checker.daemon_started();
        let records: Vec<Record> = self.records.values().cloned().collect();
        self.note(format!(
            "holdfastd #{} starts with {} records",
            self.daemon,
            records.len()
        ));
        let stored = holdfast_core::Stored {
            containers: records,
            volumes: self.volume_records.values().cloned().collect(),
            networks: self.network_records.values().cloned().collect(),
        };
        let volumes = self
            .vols
            .dirs
            .keys()
            .map(|name| holdfast_core::FoundVolume {
                name: name.clone(),
                labels: std::collections::BTreeMap::new(),
                created_at: wall(self.now),
            })
            .collect();
        let networks = self.net.found(wall(self.now));
        // A failure here is reported by the next step's checks.
        if self.feed(Input::Restore(stored)).is_ok()
            && self.feed(Input::VolumesFound(volumes)).is_ok()
        {
            let _ = self.feed(Input::NetworksFound(networks));
        }
    }

    pub(super) fn crash_daemon(&mut self) {
        if self.core.is_none() {
            return;
        }
        let services = self.services_left_alone();
        self.stats.faults.add(FaultKind::DaemonCrash);
        self.core = None;
        self.stream = None;
        // The volume executor works inside holdfastd: what it was doing
        // was done or not when the process died, never later (a network
        // call's plugin, a process of its own, may still finish).
        let volume_calls: Vec<(u64, holdfast_core::OpId)> = self
            .calls
            .iter()
            .filter(|(key, c)| key.0 == self.daemon && matches!(c.call, WorldCall::Volume(_)))
            .map(|(key, _)| *key)
            .collect();
        for key in volume_calls {
            if let Some(PendingCall {
                call: WorldCall::Volume(call),
                ..
            }) = self.calls.remove(&key)
                && self.rng_fault.chance(500)
            {
                let _ = self.carry_out_volume(&call);
            }
        }
        for (key, call) in self.calls.iter_mut() {
            if key.0 == self.daemon {
                call.orphan = true;
            }
        }
        // The users' copies lose their connection: their holds end.
        self.holds.clear();
        self.mounts_asked.clear();
        self.unpauses_asked.clear();
        self.resizes_asked.clear();
        self.answered_now.clear();
        self.prunes_asked.clear();
        self.rm_v_asked.clear();
        self.exec_starts.clear();
        self.checker.daemon_crashed();
        // Mostly a quick restart; one crash in five stays down a minute or
        // so, long enough for containers to exit meanwhile (a policy must
        // then restart them: pouch #2519 did not). Derived, not drawn, so
        // the fault stream of every seed stays as it was.
        let down = self.rng_fault.ms(50, 5000);
        let long = down.as_millis().is_multiple_of(5);
        let down = if long { down * 12 } else { down };
        // In a long outage, a service's process fails meanwhile (its
        // restart is owed once holdfastd is back).
        let failing = long
            .then(|| {
                services
                    .iter()
                    .filter_map(|id| self.cd.tasks.get(id))
                    .find(|t| t.status == holdfast_core::TaskStatus::Running)
                    .map(|t| t.pid)
            })
            .flatten();
        if let Some(pid) = failing {
            let exit = Ev::ProcessExit {
                pid,
                status: 1,
                oom: false,
            };
            self.schedule(self.now + down / 2, exit);
        }
        self.note(format!("FAULT holdfastd crashes; back in {down:?}"));
        self.schedule(self.now + down, Ev::DaemonRestart);
    }

    pub(super) fn feed(&mut self, input: Input) -> Result<(), SimFailure> {
        let Some(core) = self.core.as_mut() else {
            return Ok(());
        };
        self.stats.steps += 1;
        let now = Now::new(self.now, wall(self.now));
        self.trace.push(self.now, TraceItem::In(input.clone()));
        // (A user command cut short by a crash is a request the client saw
        // fail; the checker would have to unlearn it, so commands are spared.)
        let is_command = matches!(input, Input::Command(..));
        self.checker.input(&input);
        if let Input::ActionResult(op, _) = &input
            && let Some(id) = self.in_flight_for.remove(op)
        {
            self.activity.insert(id, self.last_op);
        }
        // The container whose exec's end this input tells, as it was.
        let exec_end = crate::check::resources::exec_end_of(&input, self.exec_news.take());
        let before = exec_end.as_ref().map(|(id, shown)| shown(Some(&*core), id));
        core.handle_input(now, input);
        if let (Some((id, shown)), Some(before)) = (&exec_end, before) {
            crate::check::resources::exec_end_harmless(id, before, shown(Some(&*core), id))
                .map_err(|m| self.failure(m))?;
        }
        let Some(core) = self.core.as_mut() else {
            return Ok(());
        };
        let actions = core.drain_actions();
        // Now and then holdfastd dies halfway through carrying out what one
        // input asked for: some actions done, the rest never. Persisting
        // before calling is what makes that safe; this is how it is tested.
        let crash_after = (self.profile.daemon_crash_every.is_some()
            && !is_command
            && actions.len() > 1
            && self.rng_fault.chance(2))
        .then(|| usize::try_from(self.rng_fault.below(actions.len() as u64)).unwrap_or(0));
        for (n, action) in actions.into_iter().enumerate() {
            if crash_after == Some(n) {
                self.note(format!(
                    "FAULT holdfastd crashes after {n} of this input's actions"
                ));
                self.crash_daemon();
                return self.check();
            }
            self.action(action)?;
        }
        self.check()
    }

    pub(super) fn check(&mut self) -> Result<(), SimFailure> {
        if let Some(message) = self.violation.take() {
            return Err(self.failure(message));
        }
        crate::check::resources::volumes(&self.vols, &self.stored())
            .and_then(|()| crate::check::resources::addresses(&self.net, &self.records))
            .and_then(|()| crate::check::resources::exec_exits(self.core.as_ref(), &self.cd))
            .map_err(|m| self.failure(m))?;
        let pending = self.pending_calls();
        let result = self
            .checker
            .after_step(self.core.as_ref(), &self.cd, pending, self.now)
            .and_then(|()| {
                self.checker
                    .network(self.core.as_ref(), &self.cd, &self.net, &self.records)
            });
        result.map_err(|message| self.failure(message))
    }

    fn action(&mut self, action: Action) -> Result<(), SimFailure> {
        if self.opts.hash_trace {
            self.hash_action(&action);
        }
        self.trace
            .push(self.now, TraceItem::Out(Box::new(action.clone())));
        if let Action::Answer(req, answer) = &action
            && let Some((id, before)) = self.refusals_owed.remove(req)
        {
            // A change of a pod's container the core must refuse: refused,
            // naming why (or not found, once it is gone).
            let refused = matches!(answer, holdfast_core::Answer::Error(e)
                if e.kind == holdfast_core::ErrorKind::Conflict
                    || e.kind == holdfast_core::ErrorKind::NotFound && before.is_none());
            if !refused {
                return Err(self.failure(format!(
                    "{req}: a change of pod container {id} the core must refuse was answered {answer:?}"
                )));
            }
            return Ok(());
        }
        let core = self.core.as_ref();
        self.checker
            .action(&action, core, &self.cd, self.now)
            .map_err(|m| self.failure(m))?;
        match action {
            Action::Call { op, call } => {
                self.last_op = self.last_op.max(op.0);
                if let Some(id) = call.container_id() {
                    self.activity.insert(id.clone(), op.0);
                    self.in_flight_for.insert(op, id.clone());
                }
                self.issue(op, WorldCall::Containerd(call))
            }
            Action::Network { op, call } => {
                self.last_op = self.last_op.max(op.0);
                if let Some(id) = call.container_id() {
                    self.activity.insert(id.clone(), op.0);
                    self.in_flight_for.insert(op, id.clone());
                }
                self.issue(op, WorldCall::Network(call))
            }
            Action::Volume { op, call } => {
                self.last_op = self.last_op.max(op.0);
                self.issue(op, WorldCall::Volume(call))
            }
            Action::Persist(rec) => {
                self.records.insert(rec.id.clone(), rec);
            }
            Action::Unpersist(id) => {
                self.records.remove(&id);
            }
            Action::PersistVolume(rec) => {
                match rec.state {
                    holdfast_core::ResourceState::Removing => {
                        self.doomed_volumes.insert(rec.name.clone());
                    }
                    holdfast_core::ResourceState::Creating => {
                        self.doomed_volumes.remove(&rec.name);
                    }
                    holdfast_core::ResourceState::Ready => {}
                }
                self.volume_records.insert(rec.name.clone(), rec);
            }
            Action::UnpersistVolume(name) => {
                self.volume_records.remove(&name);
            }
            Action::PersistNetwork(rec) => {
                self.network_records.insert(rec.name.clone(), rec);
            }
            Action::UnpersistNetwork(name) => {
                self.network_records.remove(&name);
            }
            Action::Answer(req, answer) => self.answered(req, &answer),
            Action::Publish(_) | Action::PublishResource(_) => {}
            Action::RunProbe(probe) => self.run_probe(probe),
        }
        Ok(())
    }

    /// What the users learn from an answer: a copy's hold on a mounted
    /// snapshot, an unpause that undid the pauses asked before it.
    fn answered(&mut self, req: holdfast_core::RequestId, answer: &holdfast_core::Answer) {
        use holdfast_core::Answer;
        self.answered_now.insert(req);
        if crate::check::resources::exec_start_dropped(answer) {
            self.exec_starts.remove(&req);
        }
        if let Some(id) = self.mounts_asked.remove(&req)
            && matches!(answer, Answer::Rootfs { pid: None })
        {
            self.holds.push(id);
            if self.phase != super::Phase::Safety {
                self.schedule(self.now, Ev::ReleaseHolds);
            }
        }
        if let Some((id, exec_id)) = self.resizes_asked.remove(&req)
            && let Err(message) =
                crate::check::resources::resize_refusal(&self.cd, &id, &exec_id, answer)
        {
            self.violation.get_or_insert(message);
        }
        if let Some(expected) = self.prunes_asked.remove(&req)
            && let Answer::Pruned(removed) = answer
            && *removed != expected
        {
            self.violation.get_or_insert(format!(
                "{req}: volume prune removed {removed:?}, while {expected:?} were made and named by no container"
            ));
        }
        if let Some((id, mounts)) = self.rm_v_asked.remove(&req)
            && *answer == Answer::Done
            && let Err(message) = crate::check::resources::rm_v_volumes(
                &id,
                &mounts,
                &self.stored(),
                &self.doomed_volumes,
                &self.volume_removals_asked,
            )
        {
            self.violation.get_or_insert(message);
        }
        if let Some(id) = self.unpauses_asked.remove(&req)
            && !matches!(answer, Answer::Error(_))
            && self.pause_asked.get(&id).is_some_and(|p| *p < req)
        {
            self.pause_asked.remove(&id);
        }
    }

    /// Runs a health probe in the world: it passes or fails, times out,
    /// cannot run (its container is gone), or its result is lost or comes
    /// twice.
    fn run_probe(&mut self, probe: Probe) {
        let r = &mut self.rng_probe;
        // (An exec cannot run while containerd is down either.)
        let live = self.cd.up && self.cd.live_pid(&probe.container).is_some();
        let timeout_ms = ms_of(probe.timeout);
        let (took, outcome) = if !live {
            (
                r.ms(0, 50),
                ProbeOutcome::Failed {
                    message: "container is not running".into(),
                },
            )
        } else if r.chance(100) {
            (
                probe.timeout,
                ProbeOutcome::TimedOut {
                    output: String::new(),
                },
            )
        } else {
            let exit_code = r.pick(&[0, 0, 0, 1, 2]);
            (
                r.ms(0, timeout_ms),
                ProbeOutcome::Exited {
                    exit_code,
                    output: format!("probe {}", probe.probe),
                },
            )
        };
        if r.chance(30) {
            self.note(format!("FAULT the result of {probe:?} is lost"));
            return;
        }
        let twice = r.chance(30);
        let result = ProbeResult {
            container: probe.container,
            run: probe.run,
            probe: probe.probe,
            outcome,
        };
        let at = self.now + took;
        let daemon = self.daemon;
        if twice {
            let later = at + self.rng_probe.ms(0, 2000);
            self.schedule(
                later,
                Ev::ProbeDone {
                    daemon,
                    result: result.clone(),
                },
            );
        }
        self.schedule(at, Ev::ProbeDone { daemon, result });
    }

    fn hash_action(&mut self, action: &Action) {
        use fmt::Write;
        struct Fnv<'a>(&'a mut u64);
        impl fmt::Write for Fnv<'_> {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                for b in s.bytes() {
                    *self.0 ^= u64::from(b);
                    *self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
                }
                Ok(())
            }
        }
        let _ = write!(Fnv(&mut self.hash), "{}|{action:?};", self.now.as_nanos());
    }
}
