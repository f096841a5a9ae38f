//! The processes in the fake containerd's tasks: what a change of
//! containerd's state sets going (events to publish, exits to schedule),
//! and how each process behaves, drawn when it starts.

use super::{Ev, Sim};
use crate::model::{Behavior, Effect, OnTerm};
use holdfast_core::ContainerId;

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
}
