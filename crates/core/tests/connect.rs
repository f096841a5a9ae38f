//! `docker network connect` and `disconnect`: handler tests, one input
//! each, with the exact actions it produces. An endpoint is owned by the
//! record (`Attaching`) before it is made or released, made after the
//! container's own attachment and released before it.

mod support;

use holdfast_core::*;
use std::sync::Arc;
use support::*;

fn bridge_config() -> Arc<ContainerConfig> {
    ContainerConfig {
        network: NetworkMode::Bridge,
        network_name: Some("front".into()),
        ..Default::default()
    }
    .into()
}

fn connect(id: &str, network: &str) -> Command {
    Command::Connect {
        id: cid(id),
        network: network.into(),
        aliases: vec!["api2".into()],
        ip: None,
    }
}

/// A connect back to the network a container was created on, as it was
/// created (no alias, no address).
fn connect_back(id: &str, network: &str) -> Command {
    Command::Connect {
        id: cid(id),
        network: network.into(),
        aliases: Vec::new(),
        ip: None,
    }
}

/// The connect back was recorded and answered at once, and the container
/// is on its own network as created, not one more endpoint on it.
fn connected_back_as_created(d: &Driver, id: &str, req: RequestId, actions: &[Action]) {
    let rec = record(d, id);
    assert!(!rec.own_disconnected && rec.endpoints.is_empty(), "{rec:?}");
    assert_eq!(
        actions,
        vec![Action::Persist(rec), Action::Answer(req, Answer::Done)]
    );
}

fn endpoint(slot: u8, wanted: bool, state: NetworkState) -> Endpoint {
    Endpoint {
        network: "back".into(),
        aliases: vec!["api2".into()],
        ip: None,
        slot,
        wanted,
        state,
        allocation: None,
    }
}

fn record(d: &Driver, id: &str) -> Record {
    d.core
        .container(&cid(id))
        .expect("the container exists")
        .record
        .clone()
}

/// A created bridge container on `front`, connected.
fn created(d: &mut Driver) {
    created_with(d, bridge_config());
}

/// [`created`], with `config`.
fn created_with(d: &mut Driver, config: Arc<ContainerConfig>) {
    assert_eq!(d.connect(vec![]), vec![]);
    let (_, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "app".into(),
        config,
    });
    d.ok(only_call(&actions, |c| {
        matches!(c, Call::CreateContainer { .. })
    }));
}

/// A created bridge container started: its own attachment made, its task
/// created (pid 42), its StartTask sent. Returns the start request and the
/// StartTask's op.
fn start_sent(d: &mut Driver) -> (RequestId, OpId) {
    start_sent_with(d, bridge_config())
}

/// [`start_sent`], with `config`.
fn start_sent_with(d: &mut Driver, config: Arc<ContainerConfig>) -> (RequestId, OpId) {
    created_with(d, config);
    let (start, actions) = d.command(Command::Start { id: cid("c1") });
    let actions = d.ok(only_network_call(&actions, |c| {
        matches!(c, NetworkCall::Setup { .. })
    }));
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 42 }),
    ));
    let start_task = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    (start, start_task)
}

/// A running bridge container (pid 42): its own attachment made.
fn running(d: &mut Driver) {
    let (_, start_task) = start_sent(d);
    d.ok(start_task);
}

fn setup_call(state: NetworkState) -> NetworkCall {
    NetworkCall::EndpointSetup {
        id: cid("c1"),
        config: bridge_config(),
        endpoint: endpoint(1, true, state),
    }
}

#[test]
fn a_connect_of_a_created_container_is_recorded_then_made_at_its_start_and_released_after_its_exit()
{
    let mut d = Driver::new();
    created(&mut d);
    let (req, actions) = d.command(connect("c1", "back"));
    let mut rec = record(&d, "c1");
    assert_eq!(
        rec.endpoints,
        vec![endpoint(1, true, NetworkState::Detached)]
    );
    assert_eq!(
        actions,
        vec![
            Action::Persist(rec.clone()),
            Action::Answer(req, Answer::Done)
        ]
    );
    // Connected again while not running: nothing to do (dockerd).
    let (again, actions) = d.command(connect("c1", "back"));
    assert_eq!(actions, vec![Action::Answer(again, Answer::Done)]);

    let (start, actions) = d.command(Command::Start { id: cid("c1") });
    let actions = d.ok(only_network_call(&actions, |c| {
        matches!(c, NetworkCall::Setup { .. })
    }));
    // Its own attachment first, then the endpoint, owned before it is made.
    rec = record(&d, "c1");
    assert_eq!(rec.network, NetworkState::Attached);
    assert_eq!(rec.endpoints[0].state, NetworkState::Attaching);
    let setup = only_network_call(&actions, |c| matches!(c, NetworkCall::EndpointSetup { .. }));
    assert_eq!(
        issued(&actions),
        vec![Issued::Network(setup_call(NetworkState::Detached))]
    );
    let owned_at = actions.iter().position(
        |a| matches!(a, Action::Persist(r) if r.endpoints[0].state == NetworkState::Attaching),
    );
    let call_at = actions
        .iter()
        .position(|a| matches!(a, Action::Network { op, .. } if *op == setup));
    assert!(owned_at.is_some() && owned_at < call_at, "{actions:?}");
    let actions = d.ok(setup);
    assert!(
        matches!(&actions[0], Action::Persist(r) if r.endpoints[0].state == NetworkState::Attached)
    );
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 42 }),
    ));
    let actions = d.ok(only_call(&actions, |c| matches!(c, Call::StartTask { .. })));
    assert_eq!(answers(&actions), vec![(start, Answer::Done)]);

    // The run ends: the endpoint is released before the attachment whose
    // namespace it is in; it stays connected for the next start.
    let actions = d.exit("c1", 42, 0);
    let actions = d.ok(only_call(&actions, |c| {
        matches!(c, Call::DeleteTask { .. })
    }));
    let teardown = only_network_call(&actions, |c| {
        matches!(c, NetworkCall::EndpointTeardown { .. })
    });
    let actions = d.ok(teardown);
    assert!(
        matches!(&actions[0], Action::Persist(r) if r.endpoints == vec![endpoint(1, true, NetworkState::Detached)])
    );
    only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
}

#[test]
fn a_hot_connect_is_answered_once_made_and_a_disconnect_once_released() {
    let mut d = Driver::new();
    running(&mut d);
    let (req, actions) = d.command(connect("c1", "back"));
    assert_eq!(
        issued(&actions),
        vec![Issued::Network(setup_call(NetworkState::Detached))]
    );
    assert!(answers(&actions).is_empty(), "answered before made");
    assert_eq!(
        record(&d, "c1").endpoints,
        vec![endpoint(1, true, NetworkState::Attaching)]
    );
    let setup = only_network_call(&actions, |c| matches!(c, NetworkCall::EndpointSetup { .. }));
    let actions = d.ok(setup);
    let rec = record(&d, "c1");
    assert_eq!(
        rec.endpoints,
        vec![endpoint(1, true, NetworkState::Attached)]
    );
    assert_eq!(
        actions,
        vec![Action::Persist(rec), Action::Answer(req, Answer::Done)]
    );
    // A running container is refused a network it is on (dockerd's 403).
    for network in ["back", "front"] {
        let (twice, actions) = d.command(connect("c1", network));
        match answers(&actions).as_slice() {
            [(r, Answer::Error(e))] if *r == twice => {
                assert_eq!(e.kind, ErrorKind::Forbidden, "{e:?}");
                assert!(e.message.contains("already exists in network"), "{e:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    let (req, actions) = d.command(Command::Disconnect {
        id: cid("c1"),
        network: "back".into(),
    });
    let teardown = only_network_call(&actions, |c| {
        matches!(c, NetworkCall::EndpointTeardown { .. })
    });
    assert!(answers(&actions).is_empty());
    assert_eq!(
        record(&d, "c1").endpoints,
        vec![endpoint(1, false, NetworkState::Attaching)]
    );
    let actions = d.ok(teardown);
    let rec = record(&d, "c1");
    assert!(rec.endpoints.is_empty(), "{rec:?}");
    assert_eq!(
        actions,
        vec![Action::Persist(rec), Action::Answer(req, Answer::Done)]
    );
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Running)
    );
}

#[test]
fn a_refused_hot_connect_is_answered_and_what_it_may_have_made_released() {
    let mut d = Driver::new();
    running(&mut d);
    let (req, actions) = d.command(connect("c1", "back"));
    let setup = only_network_call(&actions, |c| matches!(c, NetworkCall::EndpointSetup { .. }));
    let actions = d.fail(setup, FailureKind::AlreadyExists);
    match answers(&actions).as_slice() {
        [(r, Answer::Error(e))] if *r == req => assert_eq!(e.kind, ErrorKind::Conflict),
        other => panic!("{other:?}"),
    }
    let teardown = only_network_call(&actions, |c| {
        matches!(c, NetworkCall::EndpointTeardown { .. })
    });
    assert_eq!(
        record(&d, "c1").endpoints,
        vec![endpoint(1, false, NetworkState::Attaching)]
    );
    d.ok(teardown);
    assert!(record(&d, "c1").endpoints.is_empty());
}

#[test]
fn a_setup_whose_answer_was_lost_is_released_then_made_again() {
    let mut d = Driver::new();
    running(&mut d);
    let (req, actions) = d.command(connect("c1", "back"));
    let setup = only_network_call(&actions, |c| matches!(c, NetworkCall::EndpointSetup { .. }));
    assert_eq!(d.fail(setup, FailureKind::Deadline), vec![]);
    let (timer, actions) = d.fire_timer();
    assert_eq!(timer, TimerKind::Retry(cid("c1")));
    // In doubt: released before it is made again, never used as it is.
    let teardown = only_network_call(&actions, |c| {
        matches!(c, NetworkCall::EndpointTeardown { .. })
    });
    let actions = d.ok(teardown);
    let setup = only_network_call(&actions, |c| matches!(c, NetworkCall::EndpointSetup { .. }));
    assert_eq!(answers(&d.ok(setup)), vec![(req, Answer::Done)]);
}

#[test]
fn connects_and_disconnects_are_refused_as_dockerd_refuses_them() {
    let mut d = Driver::new();
    running(&mut d);
    let refused = |d: &mut Driver, command: Command, kind: ErrorKind, needle: &str| {
        let before = record(d, "c1");
        let (req, actions) = d.command(command);
        match actions.as_slice() {
            [Action::Answer(r, Answer::Error(e))] if *r == req => {
                assert_eq!(e.kind, kind, "{e:?}");
                assert!(e.message.contains(needle), "{e:?}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(record(d, "c1"), before, "a refusal changed the record");
    };
    let disconnect = |network: &str| Command::Disconnect {
        id: cid("c1"),
        network: network.into(),
    };
    refused(
        &mut d,
        disconnect("back"),
        ErrorKind::Conflict,
        "is not connected to the network back",
    );
    for (mode, needle) in [
        (NetworkMode::Host, "connected to host network"),
        (NetworkMode::None, "private (none) mode"),
    ] {
        let config = ContainerConfig {
            network: mode,
            ..Default::default()
        };
        let (_, actions) = d.command(Command::Create {
            id: cid("c2"),
            name: "other".into(),
            config: config.into(),
        });
        d.ok(only_call(&actions, |c| {
            matches!(c, Call::CreateContainer { .. })
        }));
        let (req, actions) = d.command(connect("c2", "back"));
        match answers(&actions).as_slice() {
            [(r, Answer::Error(e))] if *r == req => {
                assert_eq!(e.kind, ErrorKind::Invalid, "{e:?}");
                assert!(e.message.contains(needle), "{e:?}");
            }
            other => panic!("{other:?}"),
        }
        let (_, actions) = d.command(Command::Remove {
            id: cid("c2"),
            force: true,
            volumes: false,
        });
        d.ok(only_call(&actions, |c| {
            matches!(c, Call::DeleteContainer { .. })
        }));
    }
    // A container being removed.
    let (_, _) = d.command(Command::Remove {
        id: cid("c1"),
        force: true,
        volumes: false,
    });
    refused(
        &mut d,
        connect("c1", "back"),
        ErrorKind::Conflict,
        "marked for removal",
    );
}

#[test]
fn a_restarted_daemon_releases_endpoints_in_doubt_before_the_attachment() {
    let mut d = Driver::new();
    created(&mut d);
    let mut rec = record(&d, "c1");
    rec.network = NetworkState::Attaching;
    rec.endpoints = vec![
        endpoint(1, true, NetworkState::Attached),
        endpoint(2, false, NetworkState::Attaching),
    ];
    let mut d = Driver::new();
    d.feed(Input::Restore(vec![rec].into()));
    let actions = d.connect(vec![]);
    let first = only_network_call(&actions, |c| {
        matches!(c, NetworkCall::EndpointTeardown { .. })
    });
    assert!(matches!(
        issued(&actions).as_slice(),
        [Issued::Network(NetworkCall::EndpointTeardown { endpoint, .. })] if endpoint.slot == 1
    ));
    let actions = d.ok(first);
    let second = only_network_call(&actions, |c| {
        matches!(c, NetworkCall::EndpointTeardown { .. })
    });
    let actions = d.ok(second);
    only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
    // The unwanted one is forgotten; the wanted one kept for a start.
    assert_eq!(
        record(&d, "c1").endpoints,
        vec![endpoint(1, true, NetworkState::Detached)]
    );
}

#[test]
fn a_hot_connect_whose_run_ends_first_is_done_and_made_at_the_next_start() {
    let mut d = Driver::new();
    running(&mut d);
    let (stop, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    // Connected while the stop is under way: nothing is made meanwhile.
    let (req, actions) = d.command(connect("c1", "back"));
    assert!(calls(&actions).is_empty(), "{actions:?}");
    assert!(answers(&actions).is_empty(), "{actions:?}");
    d.ok(kill);
    // The exit ends the run: the connect is done, to be made at the next start.
    let actions = d.exit("c1", 42, 0);
    let answered = answers(&actions);
    assert!(answered.contains(&(stop, Answer::Done)), "{actions:?}");
    assert!(answered.contains(&(req, Answer::Done)), "{actions:?}");
    let actions = d.ok(only_call(&actions, |c| {
        matches!(c, Call::DeleteTask { .. })
    }));
    assert_eq!(
        record(&d, "c1").endpoints,
        vec![endpoint(1, true, NetworkState::Detached)]
    );
    // Nothing of it was made: only the container's own attachment goes.
    only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
}

#[test]
fn a_hot_connect_disconnected_before_it_was_made_is_refused() {
    let mut d = Driver::new();
    running(&mut d);
    let (_, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    let (req, _) = d.command(connect("c1", "back"));
    let (disconnect, actions) = d.command(Command::Disconnect {
        id: cid("c1"),
        network: "back".into(),
    });
    match answers(&actions).as_slice() {
        [(r1, Answer::Done), (r2, Answer::Error(e))] if *r1 == disconnect && *r2 == req => {
            assert_eq!(e.kind, ErrorKind::Conflict, "{e:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(record(&d, "c1").endpoints.is_empty());
}

/// The `eth0` its own attachment made, as the endpoint of slot 0 that
/// releases it.
fn own_eth0(state: NetworkState) -> Endpoint {
    Endpoint {
        network: "front".into(),
        aliases: Vec::new(),
        ip: None,
        slot: 0,
        wanted: false,
        state,
        allocation: None,
    }
}

fn disconnect(id: &str, network: &str) -> Command {
    Command::Disconnect {
        id: cid(id),
        network: network.into(),
    }
}

#[test]
fn a_running_container_disconnected_from_its_own_network_keeps_its_namespace_alone() {
    let mut d = Driver::new();
    running(&mut d);
    let (req, actions) = d.command(disconnect("c1", "front"));
    let rec = record(&d, "c1");
    assert!(rec.own_disconnected);
    // Owned (as it was: made) before its release is issued; answered once released.
    assert_eq!(rec.endpoints, vec![own_eth0(NetworkState::Attaching)]);
    assert!(answers(&actions).is_empty(), "{actions:?}");
    let owned_at = actions.iter().position(|a| {
        matches!(a, Action::Persist(r) if r.own_disconnected && r.endpoints == vec![own_eth0(NetworkState::Attached)])
    });
    let release = only_network_call(&actions, |c| {
        matches!(c, NetworkCall::EndpointTeardown { .. })
    });
    let call_at = actions
        .iter()
        .position(|a| matches!(a, Action::Network { op, .. } if *op == release));
    assert!(owned_at.is_some() && owned_at < call_at, "{actions:?}");
    assert!(matches!(
        issued(&actions).as_slice(),
        [Issued::Network(NetworkCall::EndpointTeardown { endpoint, .. })] if endpoint.slot == 0 && endpoint.ifname() == "eth0"
    ));
    let actions = d.ok(release);
    let rec = record(&d, "c1");
    assert!(rec.endpoints.is_empty(), "{rec:?}");
    assert_eq!(rec.network, NetworkState::Attached, "the namespace stays");
    assert_eq!(
        actions,
        vec![Action::Persist(rec), Action::Answer(req, Answer::Done)]
    );
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Running)
    );
    // Not on it any more: a second disconnect is refused, as dockerd's.
    let (again, actions) = d.command(disconnect("c1", "front"));
    match actions.as_slice() {
        [Action::Answer(r, Answer::Error(e))] if *r == again => {
            assert_eq!(e.kind, ErrorKind::Conflict, "{e:?}");
            assert!(e.message.contains("is not connected"), "{e:?}");
        }
        other => panic!("{other:?}"),
    }

    // Connected again while it runs: an endpoint through eth0 (the
    // default route's), made at once.
    let (req, actions) = d.command(connect("c1", "front"));
    let setup = only_network_call(&actions, |c| matches!(c, NetworkCall::EndpointSetup { .. }));
    assert!(matches!(
        issued(&actions).as_slice(),
        [Issued::Network(NetworkCall::EndpointSetup { endpoint, .. })] if endpoint.slot == 0 && endpoint.wanted
    ));
    assert_eq!(answers(&d.ok(setup)), vec![(req, Answer::Done)]);

    // The run ends: eth0 goes before the namespace; at the next start the
    // namespace is made alone, then eth0 as the endpoint it now is.
    let actions = d.exit("c1", 42, 0);
    let actions = d.ok(only_call(&actions, |c| {
        matches!(c, Call::DeleteTask { .. })
    }));
    let release = only_network_call(&actions, |c| {
        matches!(c, NetworkCall::EndpointTeardown { .. })
    });
    let actions = d.ok(release);
    let teardown = only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
    d.ok(teardown);
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    assert!(matches!(
        issued(&actions).as_slice(),
        [Issued::Network(NetworkCall::Setup {
            own_interface: false,
            ..
        })]
    ));
    let setup = only_network_call(&actions, |c| matches!(c, NetworkCall::Setup { .. }));
    let actions = d.ok(setup);
    assert!(matches!(
        issued(&actions).as_slice(),
        [Issued::Network(NetworkCall::EndpointSetup { endpoint, .. })] if endpoint.slot == 0
    ));
}

#[test]
fn a_stopped_container_disconnected_from_its_own_network_starts_with_loopback_alone() {
    let mut d = Driver::new();
    created(&mut d);
    let (req, actions) = d.command(disconnect("c1", "front"));
    let rec = record(&d, "c1");
    assert!(rec.own_disconnected && rec.endpoints.is_empty(), "{rec:?}");
    assert_eq!(
        actions,
        vec![Action::Persist(rec), Action::Answer(req, Answer::Done)]
    );
    // A network connected now is made through eth0.
    let (req, actions) = d.command(connect("c1", "back"));
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert_eq!(record(&d, "c1").endpoints[0].slot, 0);
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    assert_eq!(
        issued(&actions),
        vec![Issued::Network(NetworkCall::Setup {
            id: cid("c1"),
            config: bridge_config(),
            own_interface: false,
        })]
    );
    let actions = d.ok(only_network_call(&actions, |c| {
        matches!(c, NetworkCall::Setup { .. })
    }));
    let setup = only_network_call(&actions, |c| matches!(c, NetworkCall::EndpointSetup { .. }));
    let actions = d.ok(setup);
    only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
}

#[test]
fn a_created_container_connected_back_to_its_own_network_gets_its_own_eth0_again() {
    let mut d = Driver::new();
    created(&mut d);
    d.command(disconnect("c1", "front"));
    assert!(record(&d, "c1").own_disconnected);
    let (req, actions) = d.command(connect_back("c1", "front"));
    connected_back_as_created(&d, "c1", req, &actions);
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    assert!(matches!(
        issued(&actions).as_slice(),
        [Issued::Network(NetworkCall::Setup {
            own_interface: true,
            ..
        })]
    ));
}

#[test]
fn a_created_container_connected_back_with_aliases_takes_them_on_its_own_eth0() {
    // docker-compose disconnects every container it creates from the
    // project network and connects it back with its service's aliases:
    // the container keeps its own attachment (its published ports with
    // it, as dockerd's sandbox does), with the connect's aliases and
    // address, not one more endpoint without them.
    let mut d = Driver::new();
    created(&mut d);
    d.command(disconnect("c1", "front"));
    let (req, actions) = d.command(Command::Connect {
        id: cid("c1"),
        network: "front".into(),
        aliases: vec!["web".into()],
        ip: Some("10.9.0.7".into()),
    });
    let rec = record(&d, "c1");
    assert!(!rec.own_disconnected && rec.endpoints.is_empty(), "{rec:?}");
    assert_eq!(rec.config.network_aliases, ["web"]);
    assert_eq!(rec.config.ip_address.as_deref(), Some("10.9.0.7"));
    assert_eq!(
        actions,
        vec![
            Action::Persist(rec.clone()),
            Action::Answer(req, Answer::Done)
        ]
    );
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    assert_eq!(
        issued(&actions),
        vec![Issued::Network(NetworkCall::Setup {
            id: cid("c1"),
            config: rec.config,
            own_interface: true,
        })]
    );
}

#[test]
fn a_disconnect_while_its_own_setup_is_under_way_releases_that_eth0_before_the_task() {
    let mut d = Driver::new();
    created(&mut d);
    let (start, actions) = d.command(Command::Start { id: cid("c1") });
    let setup = only_network_call(&actions, |c| matches!(c, NetworkCall::Setup { .. }));
    let (req, actions) = d.command(disconnect("c1", "front"));
    assert!(
        calls(&actions).is_empty(),
        "one call at a time: {actions:?}"
    );
    assert_eq!(
        record(&d, "c1").endpoints,
        vec![own_eth0(NetworkState::Attaching)]
    );
    let actions = d.ok(setup);
    let release = only_network_call(&actions, |c| {
        matches!(c, NetworkCall::EndpointTeardown { .. })
    });
    let actions = d.ok(release);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 42 }),
    ));
    let actions = d.ok(only_call(&actions, |c| matches!(c, Call::StartTask { .. })));
    assert_eq!(answers(&actions), vec![(start, Answer::Done)]);
    let rec = record(&d, "c1");
    assert!(rec.own_disconnected && rec.endpoints.is_empty(), "{rec:?}");
}

#[test]
fn a_restarted_daemon_releases_an_own_eth0_in_doubt_then_the_namespace() {
    let mut d = Driver::new();
    created(&mut d);
    let mut rec = record(&d, "c1");
    rec.network = NetworkState::Attached;
    rec.own_disconnected = true;
    rec.endpoints = vec![own_eth0(NetworkState::Attaching)];
    let mut d = Driver::new();
    d.feed(Input::Restore(vec![rec].into()));
    let actions = d.connect(vec![]);
    assert!(matches!(
        issued(&actions).as_slice(),
        [Issued::Network(NetworkCall::EndpointTeardown { endpoint, .. })] if endpoint.slot == 0
    ));
    let release = only_network_call(&actions, |c| {
        matches!(c, NetworkCall::EndpointTeardown { .. })
    });
    let actions = d.ok(release);
    only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
    let rec = record(&d, "c1");
    assert!(rec.own_disconnected && rec.endpoints.is_empty(), "{rec:?}");
}

#[test]
fn a_listing_that_shows_a_start_took_effect_is_looked_at_again_after_the_call_in_flight() {
    // The StartTask's answer is lost; the relist that asks for is answered
    // while a hot connect's setup is in flight, so it cannot be applied.
    // It lists the task running where the view has it only created: that
    // is looked at again once the setup is answered (else the container
    // shows created, its start unanswered, until the periodic relist).
    let mut d = Driver::new();
    let (start, start_task) = start_sent(&mut d);
    let (_, actions) = d.command(connect("c1", "back"));
    assert_eq!(calls(&actions), vec![], "waits for the start's answer");
    let actions = d.fail(start_task, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let (_, actions) = d.fire_timer();
    let setup = only_network_call(&actions, |c| matches!(c, NetworkCall::EndpointSetup { .. }));
    let mut listed = support::running("c1", 42);
    listed.status = TaskStatus::Running;
    let actions = d.relist(relist, vec![listed]);
    assert_eq!(calls(&actions), vec![], "the listing waits for the setup");
    assert!(matches!(
        d.core.container(&cid("c1")).map(|c| c.task),
        Some(TaskState::Created { pid: 42 })
    ));
    let actions = d.fail(setup, FailureKind::Deadline);
    let again = only_call(&actions, |c| matches!(c, Call::Relist));
    let actions = d.relist(again, vec![support::running("c1", 42)]);
    assert!(
        answers(&actions).contains(&(start, Answer::Done)),
        "{actions:?}"
    );
}

#[test]
fn a_stopped_container_connected_back_while_its_attachment_is_released_publishes_its_ports_again() {
    let config: Arc<ContainerConfig> = ContainerConfig {
        network: NetworkMode::Bridge,
        network_name: Some("front".into()),
        ports: vec![PortBinding {
            container_port: 80,
            protocol: "tcp".into(),
            host_ip: String::new(),
            host_port: 8080,
            by_publish_all: false,
        }],
        ..Default::default()
    }
    .into();
    let mut d = Driver::new();
    let (_, start_task) = start_sent_with(&mut d, config.clone());
    d.ok(start_task);
    // Its run ends: once its task is deleted, its attachment is released.
    let actions = d.exit("c1", 42, 0);
    let actions = d.ok(only_call(&actions, |c| {
        matches!(c, Call::DeleteTask { .. })
    }));
    let teardown = only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
    assert_eq!(record(&d, "c1").network, NetworkState::Attaching);

    // Disconnected and connected back before that release is answered.
    let (req, actions) = d.command(disconnect("c1", "front"));
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert!(record(&d, "c1").own_disconnected);
    let (req, actions) = d.command(connect_back("c1", "front"));
    // As with no release in flight: as it was created, not one more
    // endpoint on that network.
    connected_back_as_created(&d, "c1", req, &actions);

    assert_eq!(calls(&d.ok(teardown)), vec![]);
    // Its next run sets up its own attachment, published ports included.
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    assert_eq!(
        issued(&actions),
        vec![Issued::Network(NetworkCall::Setup {
            id: cid("c1"),
            config,
            own_interface: true,
        })]
    );
    let actions = d.ok(only_network_call(&actions, |c| {
        matches!(c, NetworkCall::Setup { .. })
    }));
    assert!(
        matches!(calls(&actions).as_slice(), [Call::CreateTask { .. }]),
        "no endpoint on its own network: {actions:?}"
    );
}
