//! User networks and what a network setup gives a container: handler
//! tests, one input each, with the exact actions it produces. A network is
//! recorded before it is defined and marked before it is removed; none is
//! removed while a container's record is on it; a container is put on a
//! network only while it is defined; what a setup allocated is the core's
//! record.

mod support;

use holdfast_core::*;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use support::*;

fn ready() -> Driver {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d
}

fn network_calls_of(actions: &[Action]) -> Vec<(OpId, NetworkCall)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Network { op, call } => Some((*op, call.clone())),
            _ => None,
        })
        .collect()
}

fn only(actions: &[Action]) -> (OpId, NetworkCall) {
    let calls = network_calls_of(actions);
    assert_eq!(calls.len(), 1, "want one network call: {actions:#?}");
    calls[0].clone()
}

fn definition() -> Definition {
    Definition {
        subnet: "172.30.0.0/16".into(),
        gateway: Ipv4Addr::new(172, 30, 0, 1),
        bridge: "hf-new".into(),
    }
}

fn create_network(d: &mut Driver, name: &str) -> (RequestId, Vec<Action>) {
    d.command(Command::CreateNetwork {
        name: name.into(),
        id: "ab".repeat(32),
        subnet: None,
        gateway: None,
        labels: BTreeMap::new(),
        attachable: true,
    })
}

fn defined(d: &mut Driver, name: &str) {
    let (req, actions) = create_network(d, name);
    let (op, _) = only(&actions);
    let actions = d.feed(Input::ActionResult(op, Ok(Done::Defined(definition()))));
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    let made = d
        .core
        .networks()
        .find(|n| n.name == name)
        .expect("recorded");
    assert!(made.attachable, "--attachable is recorded as asked");
}

fn on(network: &str) -> ContainerConfig {
    ContainerConfig {
        network: NetworkMode::Bridge,
        network_name: Some(network.into()),
        ..ContainerConfig::default()
    }
}

fn state(d: &Driver, name: &str) -> Option<ResourceState> {
    d.core.network(name).map(|n| n.state)
}

#[test]
fn a_network_is_recorded_before_it_is_defined_and_keeps_what_its_definition_gave() {
    let mut d = ready();
    let (req, actions) = create_network(&mut d, "new");
    let owned = actions.iter().position(
        |a| matches!(a, Action::PersistNetwork(n) if n.name == "new" && n.state == ResourceState::Creating),
    );
    let made = actions
        .iter()
        .position(|a| matches!(a, Action::Network { .. }));
    assert!(owned.is_some() && owned < made, "{actions:?}");
    let (op, call) = only(&actions);
    assert!(
        matches!(&call, NetworkCall::Define { name, subnet: None, .. } if name == "new"),
        "{call:?}"
    );
    assert!(
        answers(&actions).is_empty(),
        "answered before it was defined"
    );
    let actions = d.feed(Input::ActionResult(op, Ok(Done::Defined(definition()))));
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    let n = d.core.network("new").expect("recorded");
    assert_eq!(
        (n.state, n.defined.clone()),
        (ResourceState::Ready, Some(definition()))
    );
}

#[test]
fn a_taken_or_predefined_name_is_refused_and_defines_nothing() {
    let mut d = ready();
    for name in ["app", "bridge", "host"] {
        let (req, actions) = create_network(&mut d, name);
        assert!(
            matches!(actions.as_slice(), [Action::Answer(r, Answer::Error(e))]
                if *r == req && e.kind == ErrorKind::Conflict && e.message.contains("already exists")),
            "{name}: {actions:?}"
        );
    }
}

#[test]
fn a_definition_refused_is_answered_and_whatever_it_made_is_removed() {
    let mut d = ready();
    let (req, actions) = create_network(&mut d, "new");
    let (op, _) = only(&actions);
    let actions = d.fail(op, FailureKind::AlreadyExists);
    assert!(
        matches!(answers(&actions).as_slice(), [(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Conflict),
        "{actions:?}"
    );
    let (op, call) = only(&actions);
    assert!(matches!(call, NetworkCall::Undefine { .. }), "{call:?}");
    assert!(d.ok(op).contains(&Action::UnpersistNetwork("new".into())));
    assert_eq!(state(&d, "new"), None);
}

#[test]
fn a_network_a_container_is_on_is_not_removed_and_is_once_none_is() {
    let mut d = ready();
    defined(&mut d, "new");
    d.create("c1", on("new"));
    let (req, actions) = d.command(Command::RemoveNetwork { name: "new".into() });
    assert!(
        matches!(actions.as_slice(), [Action::Answer(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Conflict && e.message.contains("has active endpoints")),
        "{actions:?}"
    );
    let (_, actions) = d.command(Command::Remove {
        id: cid("c1"),
        force: false,
        volumes: false,
    });
    let op = only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
    d.ok(op);
    let (req, actions) = d.command(Command::RemoveNetwork { name: "new".into() });
    let marked = actions
        .iter()
        .position(|a| matches!(a, Action::PersistNetwork(n) if n.state == ResourceState::Removing));
    let undefined = actions
        .iter()
        .position(|a| matches!(a, Action::Network { .. }));
    assert!(marked.is_some() && marked < undefined, "{actions:?}");
    let (op, call) = only(&actions);
    assert_eq!(
        call,
        NetworkCall::Undefine {
            name: "new".into(),
            id: "ab".repeat(32),
            bridge: Some("hf-new".into()),
        }
    );
    let actions = d.ok(op);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert!(actions.contains(&Action::UnpersistNetwork("new".into())));
}

#[test]
fn a_predefined_network_is_never_removed() {
    let mut d = ready();
    let (req, actions) = d.command(Command::RemoveNetwork {
        name: "bridge".into(),
    });
    assert!(
        matches!(actions.as_slice(), [Action::Answer(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Forbidden),
        "{actions:?}"
    );
}

#[test]
fn no_container_is_put_on_a_network_being_removed_or_unknown() {
    let mut d = ready();
    defined(&mut d, "new");
    d.command(Command::RemoveNetwork { name: "new".into() });
    let (req, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "web".into(),
        config: on("new").into(),
    });
    assert!(
        matches!(actions.as_slice(), [Action::Answer(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Conflict && e.message.contains("being removed")),
        "{actions:?}"
    );
    // Unknown: refused with 400 at create (a 404 means "no such image").
    let (req, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "web".into(),
        config: on("nope").into(),
    });
    assert!(
        matches!(actions.as_slice(), [Action::Answer(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Invalid && e.message.contains("not found")),
        "{actions:?}"
    );
    d.create("c2", on("app"));
    let (req, actions) = d.command(Command::Connect {
        id: cid("c2"),
        network: "nope".into(),
        aliases: Vec::new(),
        ip: None,
    });
    assert!(
        matches!(actions.as_slice(), [Action::Answer(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::NotFound),
        "{actions:?}"
    );
}

#[test]
fn prune_removes_only_the_networks_no_container_is_on() {
    let mut d = ready();
    d.create("c1", on("app"));
    let (req, actions) = d.command(Command::PruneNetworks {
        names: vec!["app".into(), "front".into()],
    });
    let (op, call) = only(&actions);
    assert!(
        matches!(&call, NetworkCall::Undefine { name, .. } if name == "front"),
        "{call:?}"
    );
    let actions = d.ok(op);
    assert_eq!(
        answers(&actions),
        vec![(req, Answer::Pruned(vec!["front".into()]))]
    );
    assert_eq!(state(&d, "app"), Some(ResourceState::Ready));
}

#[test]
fn a_removal_cut_by_a_crash_is_carried_out_by_the_restarted_daemon() {
    let mut d = ready();
    defined(&mut d, "new");
    let (_, actions) = d.command(Command::RemoveNetwork { name: "new".into() });
    let marked = actions
        .iter()
        .find_map(|a| match a {
            Action::PersistNetwork(n) => Some(n.clone()),
            _ => None,
        })
        .expect("marked");
    let mut d = Driver::new();
    let actions = d.feed(Input::Restore(Stored {
        networks: vec![marked],
        ..Stored::default()
    }));
    let (_, call) = only(&actions);
    assert!(matches!(call, NetworkCall::Undefine { .. }), "{call:?}");
}

#[test]
fn what_a_setup_gave_is_recorded_and_forgotten_with_its_release() {
    let mut d = ready();
    d.create("c1", on("app"));
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    let setup = only_network_call(&actions, |c| matches!(c, NetworkCall::Setup { .. }));
    let allocation = Allocation {
        ip: Some(Ipv4Addr::new(10, 1, 0, 2)),
        prefix_len: 16,
        gateway: Some(Ipv4Addr::new(10, 1, 0, 1)),
        mac: Some("02:42:0a:01:00:02".into()),
        endpoint_id: "cd".repeat(32),
        ports: Vec::new(),
    };
    let actions = d.feed(Input::ActionResult(
        setup,
        Ok(Done::Attached(Some(allocation.clone()))),
    ));
    assert!(
        matches!(&actions[0], Action::Persist(r) if r.allocation.as_ref() == Some(&allocation)),
        "{actions:?}"
    );
    let view = d.core.container(&cid("c1")).expect("exists");
    assert_eq!(view.record.allocation, Some(allocation));
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 42 }),
    ));
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    d.ok(start);
    let actions = d.exit("c1", 42, 0);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    let actions = d.ok(delete);
    let teardown = only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
    d.ok(teardown);
    let view = d.core.container(&cid("c1")).expect("exists");
    assert_eq!(view.record.allocation, None);
}

#[test]
fn a_rename_while_attached_rewrites_the_peers_names_owed_until_done() {
    let mut d = ready();
    d.create("c1", on("app"));
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    let setup = only_network_call(&actions, |c| matches!(c, NetworkCall::Setup { .. }));
    let actions = d.feed(Input::ActionResult(setup, Ok(Done::Attached(None))));
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 42 }),
    ));
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    d.ok(start);
    let (req, actions) = d.command(Command::Rename {
        id: cid("c1"),
        name: "api".into(),
    });
    assert!(
        matches!(&actions[0], Action::Persist(r) if r.name == "api" && r.intents.refresh_names),
        "owed before it is done: {actions:?}"
    );
    assert!(answers(&actions).contains(&(req, Answer::Done)));
    let (op, call) = only(&actions);
    assert_eq!(
        call,
        NetworkCall::RefreshNames {
            id: cid("c1"),
            name: "api".into(),
        }
    );
    // Refused: tried again after a backoff, never given up.
    d.fail(op, FailureKind::Other);
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::Retry(cid("c1")));
    let (op, _) = only(&actions);
    let actions = d.ok(op);
    assert!(
        matches!(&actions[0], Action::Persist(r) if !r.intents.refresh_names),
        "{actions:?}"
    );
}

#[test]
fn an_attachment_no_record_owns_is_adopted_released_and_forgotten() {
    let mut d = ready();
    let actions = d.feed(Input::AttachmentsFound(vec![(cid("c9"), vec![1])]));
    let owned = actions.iter().position(|a| {
        matches!(a, Action::Persist(r) if r.id == cid("c9") && r.presence == Presence::Discarding && r.network == NetworkState::Attaching)
    });
    let released = actions
        .iter()
        .position(|a| matches!(a, Action::Network { .. }));
    assert!(owned.is_some() && owned < released, "{actions:?}");
    assert!(d.core.container(&cid("c9")).is_none(), "never shown");
    let endpoint = only_network_call(
        &actions,
        |c| matches!(c, NetworkCall::EndpointTeardown { endpoint, .. } if endpoint.slot == 1),
    );
    let actions = d.ok(endpoint);
    let teardown = only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
    let actions = d.ok(teardown);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
    let actions = d.ok(delete);
    assert!(
        actions.contains(&Action::Unpersist(cid("c9"))),
        "{actions:?}"
    );
}

/// Found by the simulator (seed 18872, with the rename's refresh in
/// flight): a task's delete event, its exit lost with its shim, came while
/// another call was out; no relist followed, so the container showed
/// running until the periodic relist.
#[test]
fn a_task_delete_seen_while_a_call_is_out_is_looked_at_once_the_call_is_answered() {
    let mut d = ready();
    d.run("c1", ContainerConfig::default(), 42);
    // A call of another kind is out: a pause.
    let (_, actions) = d.command(Command::Pause { id: cid("c1") });
    let pause = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    // The shim dies; its exit is lost; containerd says the task is gone.
    let actions = d.feed(Input::Event(ContainerdEvent::TaskDelete {
        container: cid("c1"),
        pid: 42,
    }));
    assert!(calls(&actions).is_empty(), "{actions:?}");
    let actions = d.ok(pause);
    only_call(&actions, |c| matches!(c, Call::Relist));
}
