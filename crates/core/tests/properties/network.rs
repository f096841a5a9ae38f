//! Property 7: network attachments and endpoints.

use crate::calls::Call;
use crate::harness::Harness;
use crate::steps::id;
use holdfast_core::*;
use proptest::prelude::*;

/// Endpoints a container may have beyond its own network (the core's rule).
pub(crate) const ENDPOINTS_MAX: usize = 16;

/// What a `network connect` or `disconnect` must come to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NetExpect {
    Refused(ErrorKind),
    DoneNow,
    Pending,
}

impl Harness {
    /// Property 7, after every input: the attachments and their owners.
    pub(crate) fn check_network(&self) -> Result<(), TestCaseError> {
        for id in &self.world.network.attached {
            prop_assert!(
                self.records
                    .get(id)
                    .is_some_and(|r| r.network != NetworkState::Detached),
                "{} attached with no record owning it: {:?}",
                id,
                self.records.get(id).map(|r| r.network)
            );
        }
        for id in self.world.containerd.tasks.keys() {
            let bridged = self
                .records
                .get(id)
                .is_some_and(|r| r.config.network.needs_attachment());
            prop_assert!(
                !bridged || self.world.network.attached.contains(id),
                "{} has a task on the bridge network without its attachment",
                id
            );
        }
        for (id, slot) in &self.world.network.endpoints {
            // An `eth0` is its own attachment's too: one in doubt is
            // released whole; one made is the container's until it is
            // disconnected from its own network, then the endpoint of
            // slot 0 owns it until released.
            let owned = self.records.get(id).is_some_and(|r| {
                r.endpoints
                    .iter()
                    .any(|e| e.slot == *slot && e.state != NetworkState::Detached)
                    || *slot == 0
                        && (r.network == NetworkState::Attaching
                            || r.network == NetworkState::Attached && !r.own_disconnected)
            });
            prop_assert!(
                owned,
                "{} endpoint eth{} exists with no record owning it: {:?}",
                id,
                slot,
                self.records.get(id).map(|r| &r.endpoints)
            );
        }
        for (id, r) in &self.records {
            for e in &r.endpoints {
                prop_assert!(
                    e.state != NetworkState::Attached
                        || self.world.network.endpoints.contains(&(id.clone(), e.slot)),
                    "{} endpoint eth{} recorded attached and not made",
                    id,
                    e.slot
                );
            }
        }
        Ok(())
    }

    /// What dockerd's rules make of a `network connect` or `disconnect`
    /// of `id`, by the core's view before it.
    pub(crate) fn network_expected(
        &self,
        id: &ContainerId,
        network: &str,
        connect: bool,
    ) -> NetExpect {
        let Some(c) = self.core.container(id) else {
            return NetExpect::Refused(ErrorKind::NotFound);
        };
        let r = c.record;
        if r.presence == Presence::Creating || r.intents.remove {
            return NetExpect::Refused(ErrorKind::Conflict);
        }
        let up = matches!(
            c.task,
            TaskState::Created { .. } | TaskState::Running { .. }
        );
        let own = r.config.network_name.as_deref().unwrap_or("bridge");
        let bridge = r.config.network == NetworkMode::Bridge;
        // Its own network, unless disconnected from it.
        let on_own = own == network && !r.own_disconnected;
        if connect {
            let existing = r.endpoints.iter().find(|e| e.network == network);
            if !bridge {
                NetExpect::Refused(ErrorKind::Invalid)
            } else if existing.is_some_and(|e| !e.wanted) {
                NetExpect::Refused(ErrorKind::Conflict)
            } else if up && (on_own || existing.is_some()) {
                NetExpect::Refused(ErrorKind::Forbidden)
            } else if r.endpoints.len() >= ENDPOINTS_MAX {
                NetExpect::Refused(ErrorKind::Invalid)
            } else if on_own || existing.is_some() || !up {
                NetExpect::DoneNow
            } else {
                NetExpect::Pending
            }
        } else {
            let wanted = r
                .endpoints
                .iter()
                .find(|e| e.network == network && e.wanted);
            match wanted {
                _ if r.config.network == NetworkMode::Host && network == "host" => {
                    NetExpect::Refused(ErrorKind::Invalid)
                }
                // Its own `eth0` is released (an endpoint of slot 0 then);
                // with none made or being made, it is done at once.
                None if bridge && on_own => {
                    let setting_up = self.outstanding.iter().any(
                        |(_, call)| matches!(call, Call::NetworkSetup { id: x, .. } if x == id),
                    );
                    match r.network {
                        NetworkState::Attached => NetExpect::Pending,
                        NetworkState::Attaching if setting_up => NetExpect::Pending,
                        _ => NetExpect::DoneNow,
                    }
                }
                None => NetExpect::Refused(ErrorKind::Conflict),
                Some(e) if e.state == NetworkState::Detached => NetExpect::DoneNow,
                Some(_) => NetExpect::Pending,
            }
        }
    }

    /// A connect or disconnect is answered as dockerd's rules say, and a
    /// connect taken (or done at once) leaves the container on the network,
    /// a disconnect taken leaves it wanted there no more.
    pub(crate) fn check_network_answer(
        &self,
        req: RequestId,
        id: &ContainerId,
        network: &str,
        connect: bool,
        expected: NetExpect,
    ) -> Result<(), TestCaseError> {
        let answer = self.answer_of(req);
        let what = if connect { "connect" } else { "disconnect" };
        match expected {
            // (A conflict says which container it is about.)
            NetExpect::Refused(kind) => prop_assert!(
                matches!(&answer, Some(Answer::Error(e)) if e.kind == kind
                    && (kind != ErrorKind::Conflict || e.message.contains(id.as_str()))),
                "{} {} of {} to {}: {:?}, expected {:?}",
                req,
                what,
                id,
                network,
                answer,
                kind
            ),
            NetExpect::DoneNow => prop_assert!(
                answer == Some(Answer::Done),
                "{} {} of {} to {}: {:?}, expected done at once",
                req,
                what,
                id,
                network,
                answer
            ),
            NetExpect::Pending => prop_assert!(
                answer.is_none(),
                "{} {} of {} to {}: {:?}, expected to wait",
                req,
                what,
                id,
                network,
                answer
            ),
        }
        if matches!(expected, NetExpect::Refused(_)) {
            return Ok(());
        }
        let Some(c) = self.core.container(id) else {
            return Ok(());
        };
        let own = c.record.config.network_name.as_deref().unwrap_or("bridge");
        let mut ours = c.record.endpoints.iter().filter(|e| e.network == network);
        let wanted = ours.clone().filter(|e| e.wanted).count();
        if connect {
            prop_assert!(
                own == network || wanted == 1,
                "{} connect of {} to {} taken, endpoints {:?}",
                req,
                id,
                network,
                c.record.endpoints
            );
        } else {
            prop_assert!(
                wanted == 0 && ours.all(|e| e.state != NetworkState::Detached),
                "{} disconnect of {} from {} taken, endpoints {:?}",
                req,
                id,
                network,
                c.record.endpoints
            );
        }
        Ok(())
    }

    /// Whether a `network connect` of `id` to `network` is one connecting
    /// a stopped container back to the network it was created on, with
    /// nothing in the way: no other network took its `eth0` meanwhile, and
    /// no attachment without it is kept (for a restart's next run, or its
    /// release not issued yet) or being made. One still being released, or
    /// owed a release, is no obstacle: its next run is made anew. (The
    /// connect carries no alias and no address: the generator's never do.)
    pub(crate) fn connects_back(&self, id: &ContainerId, network: &str) -> bool {
        let Some(c) = self.core.container(id) else {
            return false;
        };
        let r = c.record;
        let own = r.config.network_name.as_deref().unwrap_or("bridge");
        r.config.network == NetworkMode::Bridge
            && own == network
            && r.own_disconnected
            && r.presence != Presence::Creating
            && !r.intents.remove
            && matches!(c.task, TaskState::Absent | TaskState::Stopped)
            && match r.network {
                NetworkState::Detached => true,
                NetworkState::Attaching => !self
                    .outstanding
                    .iter()
                    .any(|(_, call)| matches!(call, Call::NetworkSetup { id: x, .. } if x == id)),
                NetworkState::Attached => false,
            }
            && r.endpoints
                .iter()
                .all(|e| e.slot != 0 && e.network != network)
            && r.endpoints.len() < ENDPOINTS_MAX
    }

    /// dockerd's baseline, as the README puts it: connecting a stopped
    /// container back to the network it was created on gives it its own
    /// `eth0` again, published ports included (inspect shows them), at its
    /// next start: it is as it was created on that network, not one more
    /// endpoint on it (whose ports are not published).
    pub(crate) fn check_connected_back(
        &self,
        req: RequestId,
        id: &ContainerId,
        network: &str,
    ) -> Result<(), TestCaseError> {
        let Some(c) = self.core.container(id) else {
            return Ok(());
        };
        let r = c.record;
        prop_assert!(
            self.answer_of(req) == Some(Answer::Done)
                && !r.own_disconnected
                && r.endpoints.iter().all(|e| e.network != network),
            "{} connected {} back to its own network {} while stopped: {:?}, own disconnected {}, endpoints {:?}",
            req,
            id,
            network,
            self.answer_of(req),
            r.own_disconnected,
            r.endpoints
        );
        Ok(())
    }

    /// Once healed: a running container on the network it was created on
    /// has its own `eth0` there (with its published ports); one a "stay
    /// down" kill ended the restart of does not run.
    pub(crate) fn check_healed_own_eth0_and_kept_down(&self) -> Result<(), TestCaseError> {
        for c in self.core.containers() {
            let id = &c.record.id;
            let running = matches!(c.task, TaskState::Running { .. });
            if running
                && c.record.config.network == NetworkMode::Bridge
                && !c.record.own_disconnected
            {
                prop_assert!(
                    self.world.network.endpoints.contains(&(id.clone(), 0)),
                    "{} runs on its own network without its eth0",
                    id
                );
            }
            if self.kept_down.contains(id) {
                prop_assert!(
                    !matches!(c.status, Status::Running | Status::Restarting),
                    "{} is {:?} once healed after a kill that means stay down ended its restart",
                    id,
                    c.status
                );
            }
        }
        Ok(())
    }

    /// A connect said done is followed (it must stand); a connect taken is
    /// refused later (a conflict) only for a disconnect of that network
    /// asked after it.
    pub(crate) fn follow_connect_answer(
        &mut self,
        input: &Input,
        answered_call: &Option<Call>,
        req: &RequestId,
        answer: &Answer,
    ) -> Result<(), TestCaseError> {
        if *answer == Answer::Done
            && let Some(connect) = self.connects.get(req)
        {
            self.connected.insert(*req, connect.clone());
        }
        // A connect taken is refused later (a conflict) only
        // for a disconnect of that network asked after it.
        if let Some((cid, net)) = self.connects.get(req)
            && let Answer::Error(e) = answer
            && e.kind == ErrorKind::Conflict
            && !matches!(&input, Input::Command(r, _, _) if r == req)
            && !matches!(answered_call, Some(Call::EndpointSetup { .. }))
        {
            prop_assert!(
                self.disconnects
                    .iter()
                    .any(|(r, i, n)| r > req && i == cid && n == net),
                "{} (a connect of {} to {}) refused with no disconnect: {}",
                req,
                cid,
                net,
                e.message
            );
        }
        Ok(())
    }

    /// `docker network connect` or `disconnect`, answered as dockerd's rules
    /// say.
    pub(crate) fn connect_or_disconnect(
        &mut self,
        i: &usize,
        arg: &u8,
    ) -> Result<(), TestCaseError> {
        let connect = arg.is_multiple_of(2);
        // (The daemon refuses a connect to `host` before the core.)
        let network = match arg / 2 % 4 {
            2 => self
                .configs
                .get(&id(i))
                .and_then(|c| c.network_name.clone())
                .unwrap_or_else(|| "bridge".to_owned()),
            3 if !connect => "host".to_owned(),
            // (Chosen cases reach more networks with higher bits.)
            n => format!("side{}", u16::from(n % 2) + 2 * u16::from(arg / 8)),
        };
        let expected = self.network_expected(&id(i), &network, connect);
        let back = connect && self.connects_back(&id(i), &network);
        let command = if connect {
            Command::Connect {
                id: id(i),
                network: network.clone(),
                aliases: Vec::new(),
                ip: None,
            }
        } else {
            Command::Disconnect {
                id: id(i),
                network: network.clone(),
            }
        };
        if !connect {
            // (Known before it is fed: it may settle a connect.)
            let req = RequestId(self.next_req + 1);
            self.disconnects.push((req, id(i), network.clone()));
            self.connected_back.remove(&id(i));
        }
        let req = self.command(command)?;
        if connect {
            self.connects.insert(req, (id(i), network.clone()));
        }
        self.check_network_answer(req, &id(i), &network, connect, expected)?;
        if back {
            self.check_connected_back(req, &id(i), &network)?;
            self.connected_back.insert(id(i));
        }
        Ok(())
    }

    /// Once healed, no attachment or endpoint is left without a task: no
    /// allocation left behind.
    pub(crate) fn check_no_allocation_left(&self) -> Result<(), TestCaseError> {
        for id in &self.world.network.attached {
            prop_assert!(
                self.world.containerd.tasks.contains_key(id),
                "{} is still attached with no task: an allocation left behind",
                id
            );
        }
        for (id, slot) in &self.world.network.endpoints {
            prop_assert!(
                self.world.containerd.tasks.contains_key(id),
                "{} endpoint eth{} is left with no task: an allocation left behind",
                id,
                slot
            );
        }
        Ok(())
    }

    /// Once healed, a connect asked for is carried out: every wanted
    /// endpoint of a running container is made, every unwanted one
    /// released.
    pub(crate) fn check_wanted_endpoints_made(&self) -> Result<(), TestCaseError> {
        for c in self.core.containers() {
            let running = matches!(c.task, TaskState::Running { .. });
            for e in &c.record.endpoints {
                let made = self
                    .world
                    .network
                    .endpoints
                    .contains(&(c.record.id.clone(), e.slot));
                prop_assert!(
                    e.wanted && (made || !running),
                    "{} endpoint {:?} in a healed world (running: {})",
                    c.record.id,
                    e,
                    running
                );
            }
        }
        Ok(())
    }
}
