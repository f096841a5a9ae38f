//! User commands. Each is answered exactly once: at once when there is
//! nothing to wait for, else when done, else with an error at its bound
//! (the intent itself stays recorded and is carried out later).

use crate::container::{Container, Pending, Step, TaskState};
use crate::ids::{ContainerId, RequestId};
use crate::input::{Api, Command, WaitCondition};
use crate::record::{Endpoint, NetworkState, Presence, Record, StopIntent};
use crate::signal::Signal;
use crate::{
    Answer, ContainerConfig, Core, ErrorKind, NetworkMode, PodMember, PodRole, RestartPolicy,
    TimerKind, UserEventKind, error,
};
use std::sync::Arc;
use std::time::Duration;

impl Core {
    pub(crate) fn command(&mut self, req: RequestId, api: Api, command: Command) {
        if self.out.request_owner.contains_key(&req) {
            // A caller bug: the same request id twice. Answer the newcomer so
            // nothing hangs, and leave the first one alone.
            self.out.answer_now(
                req,
                error(
                    ErrorKind::Invalid,
                    format!("request id {req} is already in use"),
                ),
            );
            return;
        }
        let command = match command {
            Command::Create { id, name, config } => {
                if let Some(refusal) =
                    api_refuses_create(api, &config).or_else(|| self.sandbox_refuses(&config))
                {
                    return self.out.answer_now(req, refusal);
                }
                return self.create(req, id, name, config);
            }
            Command::StartExec { exec_id, detach } => {
                return self.start_exec(req, &exec_id, detach);
            }
            Command::KillExec { exec_id, signal } => {
                return self.kill_exec(req, &exec_id, signal);
            }
            Command::CreateVolume { name, labels } => return self.create_volume(req, name, labels),
            Command::RemoveVolume { name, force } => return self.remove_volume(req, &name, force),
            Command::PruneVolumes { names } => return self.prune_volumes(req, names),
            Command::CreateNetwork {
                name,
                id,
                subnet,
                gateway,
                labels,
                attachable,
            } => {
                let rec = crate::NetworkRecord {
                    name,
                    id,
                    labels,
                    created_at: self.out.now.wall,
                    state: crate::ResourceState::Creating,
                    asked_subnet: subnet,
                    asked_gateway: gateway,
                    attachable,
                    defined: None,
                };
                return self.create_network(req, rec);
            }
            Command::RemoveNetwork { name } => return self.remove_network(req, &name),
            Command::PruneNetworks { names } => return self.prune_networks(req, names),
            command => command,
        };
        let Some(id) = command.container_id().cloned() else {
            return;
        };
        let Some(c) = self.containers.get(&id).filter(|c| c.visible()) else {
            self.out.answer_now(
                req,
                error(ErrorKind::NotFound, format!("No such container: {id}")),
            );
            return;
        };
        let pods_kept = !bug!(self.config, DockerApiChangesPods);
        if let Some(refusal) = api_refuses(api, &c.rec, &command).filter(|_| pods_kept) {
            self.out.answer_now(req, refusal);
            return;
        }
        if c.rec.presence == Presence::Creating && !matches!(command, Command::Wait { .. }) {
            let message = format!("container {id} is still being created");
            self.out
                .answer_now(req, error(ErrorKind::Conflict, message));
            return;
        }
        // A pod's stop or removal is its containers' too, recorded in the
        // same step as the sandbox's: one decision, carried out whatever
        // happens after it.
        if api == Api::Cri
            && c.rec
                .config
                .pod
                .as_ref()
                .is_some_and(|p| p.role == PodRole::Sandbox)
        {
            let cascade = match &command {
                Command::Stop { .. } => Some((Some(Duration::ZERO), false)),
                Command::Remove { force: true, .. } => Some((None, true)),
                _ => None,
            };
            if let Some((timeout, remove)) = cascade {
                let members = self.pod_members(&id);
                let creating = members.iter().any(|m| {
                    self.containers
                        .get(m)
                        .is_some_and(|c| c.rec.presence == Presence::Creating)
                });
                if creating {
                    // Its create is not done: it could not be stopped or
                    // removed with the others. kubelet asks again.
                    let message = format!(
                        "a container of pod sandbox {id} is still being created: stop or remove the pod once it is made"
                    );
                    self.out
                        .answer_now(req, error(ErrorKind::Conflict, message));
                    return;
                }
                for member in members {
                    let internal = self.out.internal_request();
                    let command = if remove {
                        Command::Remove {
                            id: member,
                            force: true,
                            volumes: true,
                        }
                    } else {
                        Command::Stop {
                            id: member,
                            timeout,
                            signal: None,
                        }
                    };
                    self.command(internal, Api::Cri, command);
                }
            }
        }
        match command {
            Command::Create { .. }
            | Command::StartExec { .. }
            | Command::KillExec { .. }
            | Command::CreateVolume { .. }
            | Command::RemoveVolume { .. }
            | Command::PruneVolumes { .. }
            | Command::CreateNetwork { .. }
            | Command::RemoveNetwork { .. }
            | Command::PruneNetworks { .. } => {}
            Command::Start { .. } => self.start(req, &id),
            Command::Stop {
                timeout, signal, ..
            } => self.stop(req, &id, timeout, signal),
            Command::Kill { signal, .. } => self.kill(req, &id, signal),
            Command::Restart {
                timeout, signal, ..
            } => self.restart(req, &id, timeout, signal),
            Command::Remove { force, volumes, .. } => self.remove(req, &id, force, volumes),
            Command::Wait { condition, .. } => self.wait(req, &id, condition),
            Command::Rename { name, .. } => self.rename(req, &id, name),
            Command::UpdateRestartPolicy { policy, .. } => self.update_policy(req, &id, policy),
            Command::Pause { .. } => self.pause(req, &id, true),
            Command::Unpause { .. } => self.pause(req, &id, false),
            Command::UpdateResources { update, .. } => self.update_resources(req, &id, update),
            Command::Connect {
                network,
                aliases,
                ip,
                ..
            } => self.connect(req, &id, network, aliases, ip),
            Command::Disconnect { network, .. } => self.disconnect(req, &id, &network),
            Command::CreateExec { exec_id, spec, .. } => self.create_exec(req, &id, exec_id, spec),
            Command::ReadChanges { pause, layer, .. } => self.read_changes(req, &id, pause, layer),
            Command::MountRootfs { .. } => self.mount_rootfs(req, &id),
            Command::UnmountRootfs { .. } => self.unmount_rootfs(req, &id),
            Command::Resize {
                exec_id,
                width,
                height,
                ..
            } => self.resize(req, &id, exec_id.as_deref(), width, height),
        }
    }

    /// `docker network connect`: recorded as one more endpoint; made at
    /// the next start, or at once (and answered when made) if a task is up.
    /// Refused as dockerd refuses: other network modes (400), a network it
    /// is on while it runs (403), a container on its way out (409). Back
    /// on the network it was created on, before a start and as it was
    /// created (no other alias or address): its own attachment makes its
    /// `eth0` again, published ports included (also when an attachment
    /// made without it is still being released).
    fn connect(
        &mut self,
        req: RequestId,
        id: &ContainerId,
        network: String,
        aliases: Vec<String>,
        ip: Option<String>,
    ) {
        let usable = self.network_usable(&network);
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        let up = matches!(
            c.task,
            TaskState::Created { .. } | TaskState::Running { .. }
        );
        let own = own_network(&c.rec.config);
        let on_own = own == network && !c.rec.own_disconnected;
        let existing = c.rec.endpoints.iter().find(|e| e.network == network);
        let refusal = match c.rec.config.network {
            _ if c.rec.intents.remove => Some((ErrorKind::Conflict, removal_refusal(id))),
            NetworkMode::Host => Some((ErrorKind::Invalid, HOST_REFUSAL.to_owned())),
            NetworkMode::None => Some((
                ErrorKind::Invalid,
                "container cannot be connected to multiple networks with one of the networks in private (none) mode".to_owned(),
            )),
            NetworkMode::Container => Some((
                ErrorKind::Invalid,
                "container sharing network namespace with another container or host cannot be connected to any other network".to_owned(),
            )),
            NetworkMode::Bridge if existing.is_some_and(|e| !e.wanted) => Some((
                ErrorKind::Conflict,
                format!("container {id} is being disconnected from network {network}; try again"),
            )),
            NetworkMode::Bridge if up && (on_own || existing.is_some()) => Some((
                ErrorKind::Forbidden,
                format!("endpoint with name {} already exists in network {network}", c.rec.name),
            )),
            NetworkMode::Bridge if c.rec.endpoints.len() >= ENDPOINTS_MAX => Some((
                ErrorKind::Invalid,
                format!("container {id} is connected to {ENDPOINTS_MAX} more networks already"),
            )),
            NetworkMode::Bridge => None,
        };
        if let Some((kind, message)) = refusal {
            self.out.answer_now(req, error(kind, message));
            return;
        }
        // Already on it and not running: nothing to do (dockerd's "avoid
        // duplicate config"). Else only onto a network that is defined.
        if !(on_own || existing.is_some())
            && let Err((kind, message)) = usable
        {
            self.out.answer_now(req, error(kind, message));
            return;
        }
        if on_own || existing.is_some() {
            self.out.answer_now(req, Answer::Done);
            return;
        }
        let eth0_free = c.rec.endpoints.iter().all(|e| e.slot != 0);
        // Nothing of an earlier attachment will be used: none exists, or
        // one in doubt (its release in flight, or owed) is released whole
        // before the next setup, which then makes its `eth0`. One made
        // (kept for a restart's next run, or its release not issued yet)
        // or being made has none: `eth0` is then an endpoint in it.
        let setting_up = matches!(c.in_flight, Some((_, Step::NetworkSetup)));
        let set_up_anew = match c.rec.network {
            NetworkState::Detached => true,
            NetworkState::Attaching => !setting_up,
            NetworkState::Attached => false,
        };
        // Back onto its own network before it runs: its own attachment
        // again (published ports and all, as dockerd's sandbox keeps
        // them), with the connect's aliases and address, as dockerd
        // replaces the endpoint's settings. (docker-compose disconnects
        // and reconnects every container it creates, with aliases.)
        if own == network && !up && set_up_anew && eth0_free {
            c.rec.own_disconnected = false;
            if c.rec.config.network_aliases != aliases || c.rec.config.ip_address != ip {
                let mut config = (*c.rec.config).clone();
                config.network_aliases = aliases;
                config.ip_address = ip;
                c.rec.config = std::sync::Arc::new(config);
            }
            self.out.persist(&c.rec);
            self.out.answer_now(req, Answer::Done);
            return;
        }
        // `eth0` is an endpoint's only once its own attachment has none.
        let first = u8::from(!c.rec.own_disconnected);
        let Some(slot) = (first..=u8::MAX).find(|s| c.rec.endpoints.iter().all(|e| e.slot != *s))
        else {
            return;
        };
        c.rec.endpoints.push(Endpoint {
            network,
            aliases,
            ip,
            slot,
            wanted: true,
            state: NetworkState::Detached,
            allocation: None,
        });
        self.out.persist(&c.rec);
        if !up {
            self.out.answer_now(req, Answer::Done);
            return;
        }
        let bound = Some(self.config.request_answer_bound);
        self.add_pending(id, req, Pending::Connect(slot), bound);
        self.reconcile(id);
    }

    /// `docker network disconnect`: the endpoint is no longer wanted; one
    /// that nothing exists of is forgotten at once, else once released.
    /// From the network it was created on: its own attachment is the
    /// namespace alone from then on, and an `eth0` it has now (or that a
    /// setup under way makes) is released as the endpoint of slot 0.
    fn disconnect(&mut self, req: RequestId, id: &ContainerId, network: &str) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        let on_own = c.rec.config.network == NetworkMode::Bridge
            && own_network(&c.rec.config) == network
            && !c.rec.own_disconnected;
        let pos = c
            .rec
            .endpoints
            .iter()
            .position(|e| e.network == network && e.wanted);
        let refusal = match (c.rec.config.network, pos) {
            _ if c.rec.intents.remove => Some((ErrorKind::Conflict, removal_refusal(id))),
            (NetworkMode::Host, _) if network == "host" => {
                Some((ErrorKind::Invalid, HOST_REFUSAL.to_owned()))
            }
            (_, None) if !on_own => Some((
                ErrorKind::Conflict,
                format!("container {id} is not connected to the network {network}"),
            )),
            _ => None,
        };
        if let Some((kind, message)) = refusal {
            self.out.answer_now(req, error(kind, message));
            return;
        }
        let Some(pos) = pos else {
            c.rec.own_disconnected = true;
            // A release under way takes the `eth0` with the namespace; an
            // attachment in doubt is released whole before any use.
            let setting_up = matches!(c.in_flight, Some((_, Step::NetworkSetup)));
            let eth0 = match c.rec.network {
                NetworkState::Attached => Some(NetworkState::Attached),
                NetworkState::Attaching if setting_up => Some(NetworkState::Attaching),
                _ => None,
            };
            let Some(state) = eth0 else {
                self.out.persist(&c.rec);
                self.out.answer_now(req, Answer::Done);
                return;
            };
            c.rec.endpoints.push(Endpoint {
                network: network.to_owned(),
                aliases: c.rec.config.network_aliases.clone(),
                ip: c.rec.config.ip_address.clone(),
                slot: 0,
                wanted: false,
                state,
                allocation: c.rec.allocation.take(),
            });
            self.out.persist(&c.rec);
            let bound = Some(self.config.request_answer_bound);
            self.add_pending(id, req, Pending::Disconnect(0), bound);
            self.reconcile(id);
            return;
        };
        let e = &mut c.rec.endpoints[pos];
        let slot = e.slot;
        if e.state == NetworkState::Detached {
            c.rec.endpoints.remove(pos);
            self.out.persist(&c.rec);
            self.out.answer_now(req, Answer::Done);
            // A hot connect of it still waiting is refused.
            self.reconcile(id);
            return;
        }
        e.wanted = false;
        self.out.persist(&c.rec);
        let bound = Some(self.config.request_answer_bound);
        self.add_pending(id, req, Pending::Disconnect(slot), bound);
        self.reconcile(id);
    }

    /// `docker update` of resources: carried to containerd first (the
    /// running task's cgroup, the spec of later runs), recorded when done.
    fn update_resources(
        &mut self,
        req: RequestId,
        id: &ContainerId,
        update: crate::config::ResourceUpdate,
    ) {
        let ready = self.conn.is_ready();
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        let refusal = if c.rec.intents.remove {
            Some(format!("container {id} is marked for removal"))
        } else if c.update_wanted.is_some() {
            Some(format!(
                "an update of container {id} is already in progress"
            ))
        } else {
            None
        };
        if let Some(message) = refusal {
            self.out
                .answer_now(req, error(ErrorKind::Conflict, message));
            return;
        }
        if !ready {
            let message = "containerd is unreachable: the container was not updated; try again";
            self.out
                .answer_now(req, error(ErrorKind::Unavailable, message));
            return;
        }
        c.update_wanted = Some(Arc::new(update.apply(&c.rec.config)));
        self.add_pending(
            id,
            req,
            Pending::Update,
            Some(self.config.request_answer_bound),
        );
        self.reconcile(id);
    }

    /// `docker pause` (`freeze`) and `docker unpause`: answered once
    /// containerd did it. Refused, as dockerd refuses, for a container that
    /// is not running, already in that state, or on its way down; and while
    /// containerd is unreachable (not kept across an outage, like a start).
    fn pause(&mut self, req: RequestId, id: &ContainerId, freeze: bool) {
        let ready = self.conn.is_ready();
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        let running = matches!(c.task, TaskState::Running { .. })
            && c.is_running()
            && c.status() == crate::Status::Running;
        let intents = &c.rec.intents;
        let refusal = if c.status() == crate::Status::Restarting {
            Some(format!(
                "Container {id} is restarting, wait until the container is running"
            ))
        } else if !running || intents.remove || intents.start {
            Some(format!("Container {id} is not running"))
        } else if c.pause_wanted.is_some() {
            Some(format!(
                "a pause or unpause of container {id} is already in progress"
            ))
        } else if c.rec.intents.commit_thaw || !c.commits.is_empty() {
            Some(format!("a commit of container {id} is in progress"))
        } else if freeze && c.paused {
            Some(format!("Container {id} is already paused"))
        } else if !freeze && !c.paused {
            Some(format!("Container {id} is not paused"))
        } else if freeze && intents.stop.is_some() {
            Some(format!("Container {id} is being stopped"))
        } else {
            None
        };
        if let Some(message) = refusal {
            self.out
                .answer_now(req, error(ErrorKind::Conflict, message));
            return;
        }
        if !ready {
            let what = if freeze { "paused" } else { "unpaused" };
            let message =
                format!("containerd is unreachable: the container was not {what}; try again");
            self.out
                .answer_now(req, error(ErrorKind::Unavailable, message));
            return;
        }
        c.pause_wanted = Some(freeze);
        let pending = if freeze {
            Pending::Pause
        } else {
            Pending::Unpause
        };
        self.add_pending(id, req, pending, Some(self.config.request_answer_bound));
        self.reconcile(id);
    }

    /// The user's pause or unpause is over (done, refused or moot): it is
    /// forgotten and its requests get `answer`.
    pub(crate) fn pause_over(&mut self, id: &ContainerId, answer: Answer) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        c.pause_wanted = None;
        self.answer_pending_where(
            id,
            |p| matches!(p, Pending::Pause | Pending::Unpause),
            || answer.clone(),
        );
    }

    /// A record edit: nothing in containerd carries the name.
    fn rename(&mut self, req: RequestId, id: &ContainerId, name: String) {
        if let Err(message) = validate_name(&name) {
            self.out.answer_now(req, error(ErrorKind::Invalid, message));
            return;
        }
        if let Some(owner) = self.names.get(&name) {
            let answer = if owner == id {
                error(
                    ErrorKind::Invalid,
                    "Renaming a container with the same name as its current name",
                )
            } else {
                error(
                    ErrorKind::Conflict,
                    format!(
                        "Error when allocating new name: Conflict. The container name \"/{name}\" is already in use by container \"{owner}\". You have to remove (or rename) that container to be able to reuse that name."
                    ),
                )
            };
            self.out.answer_now(req, answer);
            return;
        }
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        let old_name = std::mem::replace(&mut c.rec.name, name.clone());
        self.names.remove(&old_name);
        self.names.insert(name, id.clone());
        // Its peers on user networks find it by its name: theirs hosts
        // files are rewritten (owed until done, across a crash too).
        let attached = c.rec.network == crate::NetworkState::Attached
            || c.rec
                .endpoints
                .iter()
                .any(|e| e.state == crate::NetworkState::Attached);
        c.rec.intents.refresh_names |= attached;
        self.out.persist(&c.rec);
        self.out.publish(id, UserEventKind::Rename { old_name });
        self.out.answer_now(req, Answer::Done);
        self.reconcile(id);
    }

    /// A record edit that counts from the next exit on. A policy restart
    /// already waiting out its backoff is dropped if the new policy would
    /// not have asked for it.
    fn update_policy(&mut self, req: RequestId, id: &ContainerId, policy: RestartPolicy) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        if c.rec.config.auto_remove && policy != RestartPolicy::No {
            let message =
                "Restart policy cannot be updated because AutoRemove is enabled for the container";
            self.out
                .answer_now(req, error(ErrorKind::Conflict, message));
            return;
        }
        let mut config = ContainerConfig::clone(&c.rec.config);
        config.restart_policy = policy;
        c.rec.config = Arc::new(config);
        let last_exit = c.rec.exit.as_ref().map_or(0, |e| e.exit_code);
        let mut ended = false;
        if c.rec.intents.policy_restart
            && !policy.wants_restart(last_exit, c.rec.restart_count, c.rec.intents.user_stopped)
        {
            c.rec.intents.policy_restart = false;
            self.out
                .timers
                .cancel(&TimerKind::RestartBackoff(id.clone()));
            ended = c.is_down();
        }
        self.out.persist(&c.rec);
        self.out.publish(id, UserEventKind::Update);
        // The restart it ended leaves the container down (once recorded).
        if ended {
            self.not_running_waits_met(id);
        }
        self.out.answer_now(req, Answer::Done);
    }

    pub(crate) fn create(
        &mut self,
        req: RequestId,
        id: ContainerId,
        name: String,
        config: Arc<ContainerConfig>,
    ) {
        if let Err(message) = validate_name(&name) {
            self.out.answer_now(req, error(ErrorKind::Invalid, message));
            return;
        }
        if self.containers.contains_key(&id) {
            self.out.answer_now(
                req,
                error(
                    ErrorKind::Conflict,
                    format!("container id {id} is already in use"),
                ),
            );
            return;
        }
        if let Some(owner) = self.names.get(&name) {
            let message = format!(
                "Conflict. The container name \"/{name}\" is already in use by container \"{owner}\". You have to remove (or rename) that container to be able to reuse that name."
            );
            self.out
                .answer_now(req, error(ErrorKind::Conflict, message));
            return;
        }
        if !self.conn.is_ready() && !self.ever_ready {
            // containerd is being reached for the first time since this
            // daemon began, not known to be away: the create waits for it
            // (within its answer bound) instead of being refused.
            self.held_creates.push((req, id, name, config));
            self.out.timers.set(
                TimerKind::AnswerBound(req),
                self.out.now.at + self.config.request_answer_bound,
            );
            return;
        }
        if !self.conn.is_ready() {
            // Nothing was done, so nothing is left behind.
            let message = "containerd is unreachable: the container was not created; try again";
            self.out
                .answer_now(req, error(ErrorKind::Unavailable, message));
            return;
        }
        if let Err(message) = self.check_volumes_for_create(&config) {
            self.out
                .answer_now(req, error(ErrorKind::Conflict, message));
            return;
        }
        // On a user network only while it is defined: decided here, with
        // its removal, so neither can slip past the other. (Not a 404: the
        // CLI takes a 404 from create for a missing image.)
        if config.network == NetworkMode::Bridge
            && let Some(network) = &config.network_name
            && let Err((kind, message)) = self.network_usable(network)
        {
            let kind = if kind == ErrorKind::NotFound {
                ErrorKind::Invalid
            } else {
                kind
            };
            self.out.answer_now(req, error(kind, message));
            return;
        }
        let mut rec = Record {
            name: name.clone(),
            config: config.clone(),
            ..Record::new(id.clone(), self.out.now.wall)
        };
        // A pod's sandbox exists to hold the pod's namespaces: its create
        // is its start too (kubelet's RunPodSandbox is both), one intent
        // persisted with the record, so that a crash between the two
        // never leaves a sandbox made and not started (carried out once
        // the create is done; a crash before that rolls the create back).
        rec.intents.start = config
            .pod
            .as_ref()
            .is_some_and(|p| p.role == PodRole::Sandbox)
            && !bug!(self.config, SandboxStartedApart);
        self.out.persist(&rec);
        let mut c = Container::new(rec, TaskState::Absent, self.config.restart_initial);
        c.confirmed = true;
        // A listing asked for before it existed says nothing of it (found
        // by the properties, whose ids are reused: a stale listing of a
        // removed container of the same id recorded an exit for this one).
        c.last_activity = crate::OpId(self.out.last_op);
        self.containers.insert(id.clone(), c);
        self.names.insert(name, id.clone());
        // The volumes it names that do not exist are made for it first.
        self.make_volumes_for_create(&id, &config);
        self.add_pending(
            &id,
            req,
            Pending::Create,
            Some(self.config.request_answer_bound),
        );
        self.reconcile(&id);
    }

    fn start(&mut self, req: RequestId, id: &ContainerId) {
        let ready = self.conn.is_ready();
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        if c.rec.intents.remove {
            let message = format!("container {id} is marked for removal and cannot be started");
            self.out
                .answer_now(req, error(ErrorKind::Conflict, message));
            return;
        }
        if c.is_paused() {
            let message = "cannot start a paused container, try unpause instead";
            self.out
                .answer_now(req, error(ErrorKind::Conflict, message));
            return;
        }
        // (A start under way, such as a sandbox's that its create began,
        // is waited for: its task may be created and not yet started.)
        if c.is_running() && c.rec.intents.stop.is_none() && !c.rec.intents.start {
            self.out.answer_now(req, Answer::NotModified);
            return;
        }
        if !ready && !c.rec.intents.start {
            // A start is not begun during an outage: the user sees at once
            // that it did not happen and can try again. (One already wanted
            // will be carried out: this one waits for it, as it would
            // connected.)
            let message = "containerd is unreachable: the container was not started; try again";
            self.out
                .answer_now(req, error(ErrorKind::Unavailable, message));
            return;
        }
        c.rec.intents.start = true;
        c.rec.intents.policy_start = false;
        c.rec.intents.user_stopped = false;
        c.rec.intents.exit_on_next = false;
        c.cancel_policy_restart(&mut self.out.timers);
        self.out.persist(&c.rec);
        self.add_pending(
            id,
            req,
            Pending::Start,
            Some(self.config.request_answer_bound),
        );
        self.reconcile(id);
    }

    /// The stop intent a stop or restart records, by precedence: request >
    /// container > image > SIGTERM, and request > container > default.
    fn stop_intent(
        &self,
        c: &Container,
        timeout: Option<Duration>,
        signal: Option<Signal>,
    ) -> StopIntent {
        let config = &c.rec.config;
        StopIntent {
            signal: signal
                .or(config.stop_signal)
                .or(config.image_stop_signal)
                .unwrap_or(Signal::SIGTERM),
            grace: timeout
                .or(config.stop_timeout)
                .unwrap_or(self.config.default_stop_timeout),
        }
    }

    /// Records a stop of a running container. Returns the answer bound.
    fn record_stop(
        &mut self,
        id: &ContainerId,
        timeout: Option<Duration>,
        signal: Option<Signal>,
    ) -> Duration {
        let Some(c) = self.containers.get(id) else {
            return Duration::ZERO;
        };
        let intent = self.stop_intent(c, timeout, signal);
        let Some(c) = self.containers.get_mut(id) else {
            return Duration::ZERO;
        };
        // An earlier stop keeps its signal and deadline; a shorter grace wins.
        let intent = match c.rec.intents.stop {
            Some(earlier) => StopIntent {
                signal: earlier.signal,
                grace: earlier.grace.min(intent.grace),
            },
            None => intent,
        };
        if let (Some(deadline), Some(earlier)) = (c.stop_deadline, c.rec.intents.stop)
            && intent.grace < earlier.grace
        {
            let sooner = deadline.saturating_since(self.out.now.at).min(intent.grace);
            let at = self.out.now.at + sooner;
            c.stop_deadline = Some(at);
            self.out.timers.set(TimerKind::StopDeadline(id.clone()), at);
        }
        c.rec.intents.stop = Some(intent);
        c.rec.intents.start = false;
        // A user's stop overrides the policy, also when a restart is owed
        // while a task still counts as running (a refused policy start
        // whose created task is being deleted).
        c.cancel_policy_restart(&mut self.out.timers);
        intent.grace.saturating_add(self.config.stop_answer_slack)
    }

    fn stop(
        &mut self,
        req: RequestId,
        id: &ContainerId,
        timeout: Option<Duration>,
        signal: Option<Signal>,
    ) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        c.rec.intents.user_stopped = true;
        if !c.is_running() {
            // Nothing runs; cancel what would start it (a policy restart or a
            // pending start). Only that is a change.
            let cancelled = c.rec.intents.start || c.rec.intents.policy_restart;
            c.rec.intents.start = false;
            c.cancel_policy_restart(&mut self.out.timers);
            self.out.persist(&c.rec);
            let why = error(ErrorKind::Conflict, STOPPED_BEFORE_START);
            self.start_abandoned(id, why);
            let answer = if cancelled {
                Answer::Done
            } else {
                Answer::NotModified
            };
            self.out.answer_now(req, answer);
            return;
        }
        // A start wanted after this run (a restart's, or a start queued
        // behind a stop) will not happen now: its requests are told so at
        // once, as when nothing runs. A start already sent to this task is
        // left to its answer (it may have taken effect).
        // A restart asked while a start was on its way has its own start
        // still to come (not the one sent): it is cancelled all the same.
        let cancels_start = c.rec.intents.start && !c.rec.start_sent;
        let sent = c.starts_sent;
        let cancels_restart = c.requests.iter().any(|(_, p)| p.restart_unsent(sent));
        let bound = self.record_stop(id, timeout, signal);
        if let Some(c) = self.containers.get(id) {
            self.out.persist(&c.rec);
        }
        if cancels_start || cancels_restart {
            self.answer_pending_where(
                id,
                |p| match p {
                    Pending::Restart { .. } => cancels_start || p.restart_unsent(sent),
                    Pending::Start => cancels_start,
                    _ => false,
                },
                || error(ErrorKind::Conflict, STOPPED_BEFORE_START),
            );
        }
        self.recheck_starts_past_bound(id);
        self.add_pending(id, req, Pending::Stop, Some(bound));
        self.reconcile(id);
    }

    fn kill(&mut self, req: RequestId, id: &ContainerId, signal: Signal) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        // Between runs (a restart owed, or the policy's start not yet
        // running a task) the container shows as restarting, as in dockerd.
        let restarting =
            c.rec.intents.policy_restart || (c.rec.intents.policy_start && !c.is_running());
        if !c.is_running() && !restarting {
            let message = format!("Container {id} is not running");
            self.out
                .answer_now(req, error(ErrorKind::Conflict, message));
            return;
        }
        c.rec.intents.user_stopped = true;
        // dockerd's rule: SIGKILL, the stop signal, or any signal when none
        // is configured, means the user wants it to stay down.
        let config = &c.rec.config;
        let stop_signal = config.stop_signal.or(config.image_stop_signal);
        let stay_down = signal == Signal::SIGKILL || stop_signal.is_none_or(|s| s == signal);
        if stay_down && (restarting || c.rec.intents.policy_start) {
            // As with dockerd, a kill that means "stay down" ends the
            // policy's restart: the one owed, and a policy start under way
            // (else its failure, or its retry after a lost answer, would
            // bring the restart back after the user's kill). A start already
            // sent may have taken effect: it stays, and the kill follows it.
            if c.rec.intents.policy_start && !c.rec.start_sent {
                c.rec.intents.start = false;
            }
            c.cancel_policy_restart(&mut self.out.timers);
        }
        if restarting {
            // Between runs there is no process to signal. A restart this
            // kill ended leaves the container down: waits for "not
            // running" are met.
            let down = !c.rec.intents.start && !c.rec.intents.policy_restart;
            self.out.persist(&c.rec);
            self.out.answer_now(req, Answer::Done);
            if down {
                self.start_abandoned(id, error(ErrorKind::Conflict, STOPPED_BEFORE_START));
            }
            return;
        }
        if stay_down {
            c.rec.intents.exit_on_next = true;
        }
        // One pending delivery per signal: kills repeated during an outage
        // are one signal when containerd returns, not a burst.
        if !c.rec.intents.kills.contains(&signal) {
            c.rec.intents.kills.push(signal);
        }
        self.out.persist(&c.rec);
        self.add_pending(
            id,
            req,
            Pending::Kill(signal),
            Some(self.config.request_answer_bound),
        );
        self.reconcile(id);
    }

    fn restart(
        &mut self,
        req: RequestId,
        id: &ContainerId,
        timeout: Option<Duration>,
        signal: Option<Signal>,
    ) {
        let Some(c) = self.containers.get(id) else {
            return;
        };
        if c.rec.intents.remove {
            let message = format!("container {id} is marked for removal and cannot be restarted");
            self.out
                .answer_now(req, error(ErrorKind::Conflict, message));
            return;
        }
        let mut bound = self.config.request_answer_bound;
        // A start on its way now is not this restart's.
        let after_start = c.rec.start_sent.then_some(c.starts_sent);
        if c.is_running() {
            bound = bound.saturating_add(self.record_stop(id, timeout, signal));
        }
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        c.rec.intents.start = true;
        c.rec.intents.policy_start = false;
        c.rec.intents.user_stopped = false;
        c.rec.intents.exit_on_next = false;
        c.cancel_policy_restart(&mut self.out.timers);
        self.out.persist(&c.rec);
        self.add_pending(id, req, Pending::Restart { after_start }, Some(bound));
        self.reconcile(id);
    }

    fn remove(&mut self, req: RequestId, id: &ContainerId, force: bool, volumes: bool) {
        let Some(c) = self.containers.get(id) else {
            return;
        };
        if c.rec.intents.policy_restart && !force {
            let message = format!(
                "You cannot remove a restarting container {id}. Stop the container before attempting removal or force remove"
            );
            self.out
                .answer_now(req, error(ErrorKind::Conflict, message));
            return;
        }
        if c.is_paused() && !force && !c.rec.intents.remove {
            let message = format!(
                "You cannot remove a paused container {id}. Unpause and then stop the container before attempting removal or force remove"
            );
            self.out
                .answer_now(req, error(ErrorKind::Conflict, message));
            return;
        }
        if c.is_running() && !c.rec.intents.remove {
            if !force {
                let message = format!(
                    "You cannot remove a running container {id}. Stop the container before attempting removal or force remove"
                );
                self.out
                    .answer_now(req, error(ErrorKind::Conflict, message));
                return;
            }
            self.record_stop(id, Some(Duration::ZERO), Some(Signal::SIGKILL));
            // `rm -f` is SIGKILL, as with dockerd, even over an earlier
            // stop's signal that has not gone out yet.
            if let Some(c) = self.containers.get_mut(id)
                && c.stop_deadline.is_none()
                && let Some(stop) = c.rec.intents.stop.as_mut()
            {
                stop.signal = Signal::SIGKILL;
            }
        }
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        c.rec.intents.remove = true;
        c.rec.intents.remove_volumes |= volumes;
        c.rec.intents.start = false;
        c.cancel_policy_restart(&mut self.out.timers);
        self.out.persist(&c.rec);
        self.answer_pending_where(
            id,
            |p| matches!(p, Pending::Start | Pending::Restart { .. }),
            || error(ErrorKind::Conflict, "the container is being removed"),
        );
        self.add_pending(
            id,
            req,
            Pending::Remove,
            Some(self.config.request_answer_bound),
        );
        self.reconcile(id);
    }

    fn wait(&mut self, req: RequestId, id: &ContainerId, condition: WaitCondition) {
        let Some(c) = self.containers.get(id) else {
            return;
        };
        // (A container waiting out its restart policy's backoff is
        // restarting, not down: as with dockerd, the wait is for the next
        // exit, or for whatever ends the restart.)
        if condition == WaitCondition::NotRunning && c.is_down() {
            let exit_code = c.last_exit_code();
            self.out.answer_now(
                req,
                Answer::Waited {
                    exit_code,
                    error: None,
                },
            );
            return;
        }
        // A wait has no bound: it may rightly last as long as the container.
        self.add_pending(id, req, Pending::Wait(condition), None);
    }

    pub(crate) fn cancel(&mut self, req: RequestId) {
        let Some(id) = self.out.request_owner.get(&req).cloned() else {
            return;
        };
        let Some(c) = self.containers.get_mut(&id) else {
            return;
        };
        let Some(pos) = c
            .requests
            .iter()
            .position(|(r, p)| *r == req && matches!(p, Pending::Wait(_)))
        else {
            return;
        };
        c.requests.remove(pos);
        let answer = error(ErrorKind::Cancelled, "the requester went away");
        self.out.answer_pending(req, answer);
    }

    /// The start a user's "stay down" kill came after did not take effect
    /// (a relist shows its task still created): it is dropped, as dockerd
    /// drops a restart the user killed. The created task is then deleted.
    pub(crate) fn start_ruled_out(&mut self, id: &ContainerId) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        c.rec.intents.start = false;
        c.rec.start_sent = false;
        c.rec.intents.policy_start = false;
        self.out.persist(&c.rec);
        self.start_abandoned(id, error(ErrorKind::Conflict, KILLED_BEFORE_START));
    }

    /// A start will not happen (a stop cancelled it, or it failed): its
    /// requests get `why`, and waits for "not running" are met.
    pub(crate) fn start_abandoned(&mut self, id: &ContainerId, why: Answer) {
        self.answer_pending_where(
            id,
            |p| matches!(p, Pending::Start | Pending::Restart { .. }),
            || why.clone(),
        );
        self.not_running_waits_met(id);
    }

    /// The container is down: every wait for "not running" is answered.
    pub(crate) fn not_running_waits_met(&mut self, id: &ContainerId) {
        let exit_code = self.containers.get(id).map_or(0, Container::last_exit_code);
        let waited = Answer::Waited {
            exit_code,
            error: None,
        };
        self.answer_pending_where(
            id,
            |p| p == Pending::Wait(WaitCondition::NotRunning),
            || waited.clone(),
        );
    }

    pub(crate) fn add_pending(
        &mut self,
        id: &ContainerId,
        req: RequestId,
        pending: Pending,
        bound: Option<Duration>,
    ) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        c.requests.push((req, pending));
        self.out.request_owner.insert(req, id.clone());
        if let Some(bound) = bound {
            self.out
                .timers
                .set(TimerKind::AnswerBound(req), self.out.now.at + bound);
        }
    }

    /// Answers, and forgets, the pending requests of `id` that match.
    pub(crate) fn answer_pending_where(
        &mut self,
        id: &ContainerId,
        matches: impl Fn(Pending) -> bool,
        answer: impl Fn() -> Answer,
    ) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        let mut answered = Vec::new();
        c.requests.retain(|(req, pending)| {
            let hit = matches(*pending);
            if hit {
                answered.push(*req);
            }
            !hit
        });
        for req in answered {
            self.out.answer_pending(req, answer());
        }
    }
}

impl Core {
    /// A pod's container is made in a sandbox that runs (its namespaces
    /// exist): refused otherwise, as kubelet's "not ready".
    fn sandbox_refuses(&self, config: &ContainerConfig) -> Option<Answer> {
        let Some(PodMember {
            role: PodRole::Container { sandbox, .. },
            ..
        }) = &config.pod
        else {
            return None;
        };
        let ready = sandbox
            .parse::<ContainerId>()
            .ok()
            .and_then(|id| self.containers.get(&id))
            .filter(|c| c.visible() && !c.rec.intents.remove)
            .is_some_and(|c| {
                c.rec
                    .config
                    .pod
                    .as_ref()
                    .is_some_and(|p| p.role == PodRole::Sandbox)
                    && c.is_running()
                    && c.rec.intents.stop.is_none()
            });
        (!ready).then(|| {
            error(
                ErrorKind::Conflict,
                format!(
                    "pod sandbox {sandbox} is not ready: its containers are made while it runs"
                ),
            )
        })
    }

    /// The containers of the pod whose sandbox is `sandbox`, in id order.
    pub fn pod_members(&self, sandbox: &ContainerId) -> Vec<ContainerId> {
        let mut members: Vec<ContainerId> = self
            .containers
            .values()
            .filter(|c| c.visible())
            .filter(|c| {
                matches!(&c.rec.config.pod, Some(PodMember { role: PodRole::Container { sandbox: of, .. }, .. })
                    if of == sandbox.as_str())
            })
            .map(|c| c.rec.id.clone())
            .collect();
        members.sort();
        members
    }
}

/// What the CRI made is kubelet's: the Docker API may read it, wait on it
/// and exec into it, and is refused every other change (409, naming the
/// CRI and the pod); the CRI finds nothing it did not make.
fn api_refuses(api: Api, rec: &Record, command: &Command) -> Option<Answer> {
    let pod = rec.config.pod.as_ref();
    match (api, pod) {
        (Api::Cri, None) => Some(error(
            ErrorKind::NotFound,
            format!("No such container: {}", rec.id),
        )),
        (Api::Docker, Some(pod)) if command.changes_container() => Some(error(
            ErrorKind::Conflict,
            format!(
                "container {} belongs to the Kubernetes pod {}/{} and is managed through the CRI: change it with kubelet (or crictl), not the Docker API",
                rec.name, pod.pod_namespace, pod.pod_name
            ),
        )),
        _ => None,
    }
}

/// A pod's containers are made through the CRI, every other through the
/// Docker API.
fn api_refuses_create(api: Api, config: &ContainerConfig) -> Option<Answer> {
    match (api, config.pod.is_some()) {
        (Api::Docker, true) => Some(error(
            ErrorKind::Invalid,
            "a pod's containers are created through the CRI",
        )),
        (Api::Cri, false) => Some(error(
            ErrorKind::Invalid,
            "the CRI creates only pod sandboxes and their containers",
        )),
        _ => None,
    }
}

/// What a create's refusal of a name another container has says (dockerd's
/// words): a caller that drew the name may draw another.
pub const NAME_TAKEN: &str = "is already in use by container";

/// The default bridge network's name, as dockerd's: a container whose
/// config names no network is on it.
const DEFAULT_NETWORK: &str = "bridge";

/// What a start or restart a stop cancelled is told.
const STOPPED_BEFORE_START: &str = "the container was stopped before it started";
const KILLED_BEFORE_START: &str = "the container was killed before it started";

/// The network a bridge container was created on, by name.
pub(crate) fn own_network(config: &ContainerConfig) -> &str {
    config.network_name.as_deref().unwrap_or(DEFAULT_NETWORK)
}

/// Endpoints a container may have beyond its own network.
const ENDPOINTS_MAX: usize = 16;

const HOST_REFUSAL: &str =
    "container cannot be disconnected from host network or connected to host network";

fn removal_refusal(id: &ContainerId) -> String {
    format!(
        "Container {id} is marked for removal and cannot be connected or disconnected to the network"
    )
}

/// Docker's rule for names: `[a-zA-Z0-9][a-zA-Z0-9_.-]+`.
fn validate_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok =
        name.len() >= 2 && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if first_ok && rest_ok && name.len() <= 255 {
        Ok(())
    } else {
        Err(format!(
            "Invalid container name ({name}), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed"
        ))
    }
}
