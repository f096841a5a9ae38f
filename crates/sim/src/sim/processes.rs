//! The processes in the fake containerd's tasks: what a change of
//! containerd's state sets going (events to publish, exits to schedule),
//! and how each process behaves, drawn when it starts.

use super::{Ev, Sim, wall};
use crate::faults::FaultKind;
use crate::model::{Behavior, Effect, OnTerm};
use holdfast_core::{ContainerId, ContainerdEvent};
use std::time::Duration;

impl Sim {
    pub(super) fn effects(&mut self, fx: Vec<Effect>) {
        for effect in fx {
            match effect {
                Effect::Publish(event) => self.publish(event),
                Effect::Exit {
                    pid,
                    after,
                    status,
                    oom,
                } => {
                    self.schedule(self.now + after, Ev::ProcessExit { pid, status, oom });
                }
                Effect::Started { container, pid } => self.started(container, pid),
                Effect::ExecStarted {
                    container,
                    exec_id,
                    pid,
                } => {
                    let after = self.rng_world.ms(5, 8000);
                    // One in four runs for minutes (an exec probe that
                    // hangs): its users' kill must end it. Drawn from
                    // its pid, so the seed's streams are as before.
                    let after = if pid.is_multiple_of(4) {
                        after * 60
                    } else {
                        after
                    };
                    let status = self.rng_world.pick(&[0, 0, 1, 126, 137]);
                    if let Some(init) = self.cd.live_pid(&container) {
                        self.exec_may_run_out_of_memory(init, pid, after);
                    }
                    self.user_exec_exit_after(after, container, exec_id, pid, status);
                }
                Effect::ExecSignalled {
                    container,
                    exec_id,
                    pid,
                    status,
                } => {
                    let after = self.rng_world.ms(1, 20);
                    self.user_exec_exit_after(after, container, exec_id, pid, status);
                }
            }
        }
    }

    /// A task started: draw how its process behaves.
    fn started(&mut self, container: ContainerId, pid: u32) {
        let p = &self.profile;
        let (ignore, immortal, oom, exec) = (
            p.ignore_term_permille,
            p.immortal_permille,
            p.oom_permille,
            p.exec_permille,
        );
        let r = &mut self.rng_world;
        let lifetime = (!r.chance(immortal)).then(|| {
            let after = match r.below(3) {
                0 => r.ms(50, 2000),
                1 => r.ms(2000, 30_000),
                _ => r.ms(30_000, 600_000),
            };
            (after, r.pick(&[0, 0, 1, 2, 3, 127]))
        });
        let oom_after = r.chance(oom).then(|| r.ms(100, 60_000));
        let on_term = if r.chance(ignore) {
            OnTerm::Ignore
        } else {
            let after = if r.chance(700) {
                r.ms(1, 500)
            } else {
                r.ms(500, 30_000)
            };
            OnTerm::Exit {
                after,
                status: r.pick(&[143, 0, 2]),
            }
        };
        let execs = if r.chance(exec) {
            u32::try_from(1 + r.below(3)).unwrap_or(1)
        } else {
            0
        };
        let behavior = Behavior {
            lifetime,
            oom_after,
            on_term,
            execs,
        };
        if let Some(task) = self.cd.tasks.get_mut(&container) {
            task.behavior = behavior;
        }
        if let Some((after, status)) = lifetime {
            self.schedule(
                self.now + after,
                Ev::ProcessExit {
                    pid,
                    status,
                    oom: false,
                },
            );
        }
        if let Some(after) = oom_after {
            self.schedule(
                self.now + after,
                Ev::ProcessExit {
                    pid,
                    status: 137,
                    oom: true,
                },
            );
        }
        for _ in 0..execs {
            let at = self.now + self.rng_world.ms(0, 20_000);
            self.schedule(
                at,
                Ev::ExecStart {
                    container: container.clone(),
                    init_pid: pid,
                },
            );
        }
    }

    /// The init process `pid` exits (if it still runs): its shim publishes
    /// the exit, and an OOM kill's TaskOOM before it (or, when the fault
    /// says so, just after).
    pub(super) fn process_exit(&mut self, pid: u32, status: u32, oom: bool) {
        let wall_now = wall(self.now);
        let Some(container) = self.cd.process_exit(pid, status, oom, wall_now) else {
            return;
        };
        self.world_changed_at = self.now;
        let oom_late = oom && self.take_fault(FaultKind::OomLate);
        // The cgroup's OOM notice races the reaper and loses, by
        // milliseconds, when the fault says so; the shim stamps the
        // event when it publishes it.
        let oom_at = if oom_late {
            self.now + self.rng_fault.ms(1, 20)
        } else {
            self.now
        };
        let oom_event = ContainerdEvent::TaskOom {
            container: container.clone(),
            published_at: Some(wall(oom_at)),
        };
        if oom && !oom_late {
            self.shim_publish(pid, oom_event.clone(), self.now, 0);
        }
        let exec_id = container.as_str().to_owned();
        let event = ContainerdEvent::TaskExit {
            container: container.clone(),
            exec_id,
            pid,
            exit_status: status,
            exited_at: wall_now,
            oom_kills: self.cd.oom_kills(pid),
        };
        // The execs still running die with it, killed by the kernel. An
        // OOM kill ends the whole cgroup at once (memory.oom.group), and
        // the shim reaps in no set order: for two pids in three, the
        // execs' exits come between the OOM event and the init's exit (the
        // order that once made an exec's exit erase the OOM evidence).
        let execs_first = oom && !pid.is_multiple_of(3);
        let mut ended = self.cd.end_execs(&container);
        if oom {
            let background: Vec<u32> = self
                .background_execs
                .iter()
                .filter(|(_, c)| **c == container)
                .map(|(pid, _)| *pid)
                .collect();
            for exec_pid in background {
                self.background_execs.remove(&exec_pid);
                ended.push((format!("exec-{exec_pid}"), exec_pid));
            }
        }
        let exec_exits: Vec<ContainerdEvent> = ended
            .into_iter()
            .map(|(exec_id, exec_pid)| ContainerdEvent::TaskExit {
                container: container.clone(),
                exec_id,
                pid: exec_pid,
                exit_status: 137,
                exited_at: wall_now,
                oom_kills: None,
            })
            .collect();
        let (before, after) = if execs_first {
            (exec_exits, Vec::new())
        } else {
            (Vec::new(), exec_exits)
        };
        for exec_exit in before {
            self.shim_publish(pid, exec_exit, self.now, 0);
        }
        self.shim_publish(pid, event, self.now, 0);
        for exec_exit in after {
            self.shim_publish(pid, exec_exit, self.now, 0);
        }
        if oom_late {
            // For one pid in three the shim's first publish of it fails
            // and its retry comes a second and a half later: stamped
            // before, delivered after a restart's new run may have begun.
            // Derived, not drawn, so every seed's streams stay as they were.
            let retried = if pid.is_multiple_of(3) {
                Duration::from_millis(1500)
            } else {
                Duration::ZERO
            };
            self.schedule(
                oom_at + retried,
                Ev::ShimPublish {
                    pid,
                    event: oom_event,
                    exited: oom_at,
                    attempt: 0,
                },
            );
        }
    }

    /// Where the world has OOMs, one exec in two (the user's or the
    /// process's own) is what runs its cgroup out of memory while it runs
    /// (for `lasts`): the whole group is killed. Derived, not drawn, so
    /// every seed's streams stay as they were.
    fn exec_may_run_out_of_memory(&mut self, init_pid: u32, exec_pid: u32, lasts: Duration) {
        if self.profile.oom_permille > 0 && exec_pid.is_multiple_of(2) {
            let exit = Ev::ProcessExit {
                pid: init_pid,
                status: 137,
                oom: true,
            };
            self.schedule(self.now + lasts / 2, exit);
        }
    }

    /// An exec starts in the container whose init process is `init_pid`, if
    /// that process still runs; it exits a while later.
    pub(super) fn exec_start(&mut self, container: ContainerId, init_pid: u32) {
        if self.cd.live_pid(&container) == Some(init_pid) {
            let pid = self.cd.new_pid();
            self.background_execs.insert(pid, container.clone());
            let lasts = self.rng_world.ms(10, 3000);
            let at = self.now + lasts;
            let status = self.rng_world.pick(&[0, 1, 137]);
            self.exec_may_run_out_of_memory(init_pid, pid, lasts);
            self.schedule(
                at,
                Ev::ExecExit {
                    container,
                    pid,
                    status,
                },
            );
        }
    }

    fn user_exec_exit_after(
        &mut self,
        after: std::time::Duration,
        container: ContainerId,
        exec_id: String,
        pid: u32,
        status: u32,
    ) {
        let event = Ev::UserExecExit {
            container,
            exec_id,
            pid,
            status,
        };
        self.schedule(self.now + after, event);
    }

    /// A user's exec ends, if it still runs (once its task is thawed, if
    /// frozen): its TaskExit names the exec.
    pub(super) fn user_exec_exit(
        &mut self,
        container: ContainerId,
        exec_id: String,
        pid: u32,
        status: u32,
    ) {
        let code = i32::try_from(status).unwrap_or(1);
        if !self.cd.exec_exits(&container, &exec_id, pid, code) {
            if self
                .cd
                .execs
                .contains_key(&(container.clone(), exec_id.clone()))
            {
                let after = self.rng_world.ms(500, 3000);
                self.user_exec_exit_after(after, container, exec_id, pid, status);
            }
            return;
        }
        self.world_changed_at = self.now;
        let Some(init) = self.cd.tasks.get(&container).map(|t| t.pid) else {
            return;
        };
        let event = ContainerdEvent::TaskExit {
            container,
            exec_id,
            pid,
            exit_status: status,
            exited_at: wall(self.now),
            oom_kills: None,
        };
        self.shim_publish(init, event, self.now, 0);
    }

    /// An exec exits: its TaskExit names the exec, not the init process.
    pub(super) fn exec_exit(&mut self, container: ContainerId, pid: u32, status: u32) {
        if self.background_execs.remove(&pid).is_none() {
            return; // ended with its cgroup already
        }
        let exec_id = format!("exec-{pid}");
        let exited_at = wall(self.now);
        self.publish(ContainerdEvent::TaskExit {
            container,
            exec_id,
            pid,
            exit_status: status,
            exited_at,
            oom_kills: None,
        });
    }
}
