//! A container's own network attachment (the bridge network and a
//! user-defined one): handler tests, one input each, with the exact actions
//! it produces. The attachment is owned by the record before it is made,
//! made between the create and the task create, released after the exit,
//! and one in doubt is released before it is made again.

mod support;

use holdfast_core::*;
use support::*;

#[test]
fn a_bridge_container_is_attached_between_create_and_task_create_and_released_after_its_exit() {
    let mut d = Driver::new();
    let (req, setup) = bridge_start_until_setup(&mut d);
    let actions = d.ok(setup);
    assert!(matches!(&actions[0], Action::Persist(r) if r.network == NetworkState::Attached));
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 42 }),
    ));
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    assert_eq!(answers(&d.ok(start)), vec![(req, Answer::Done)]);
    // The process exits: the task is deleted, then the attachment released
    // (the network namespace outlives the task until then).
    let actions = d.exit("c1", 42, 0);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    let actions = d.ok(delete);
    assert_eq!(
        issued(&actions),
        vec![Issued::Network(NetworkCall::Teardown {
            id: cid("c1"),
            config: bridge_config()
        })]
    );
    let teardown = only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
    let actions = d.ok(teardown);
    assert_eq!(
        actions,
        vec![Action::Persist(Record {
            network: NetworkState::Detached,
            health: None,
            ..created_record(&d, "c1")
        })]
    );
}

#[test]
fn a_host_port_in_use_is_a_conflict_and_the_partial_setup_is_torn_down() {
    let mut d = Driver::new();
    let (req, setup) = bridge_start_until_setup(&mut d);
    let actions = d.feed(Input::ActionResult(
        setup,
        Err(Failure::new(
            FailureKind::AlreadyExists,
            "port 8080/tcp is already allocated",
        )),
    ));
    let got = answers(&actions);
    assert!(
        matches!(&got[..], [(r, Answer::Error(e))] if *r == req && e.kind == ErrorKind::Conflict && e.message.contains("already allocated")),
        "{got:?}"
    );
    // No task was created; what the setup may have made is released.
    assert_eq!(
        issued(&actions),
        vec![Issued::Network(NetworkCall::Teardown {
            id: cid("c1"),
            config: bridge_config()
        })]
    );
    let teardown = only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
    d.ok(teardown);
    let view = d.core.container(&cid("c1")).expect("kept");
    assert_eq!(view.record.network, NetworkState::Detached);
    assert_eq!(view.status, Status::Created);
}

#[test]
fn a_setup_in_doubt_after_a_restart_is_released_before_it_is_made_again() {
    let mut d = Driver::new();
    let (_, _setup) = bridge_start_until_setup(&mut d);
    let mut rec = created_record(&d, "c1");
    assert_eq!(rec.network, NetworkState::Attaching);
    // holdfastd dies with the setup in flight; the new one restores the record.
    rec.intents.start = true;
    let mut d = Driver::new();
    d.feed(Input::Restore(vec![rec].into()));
    let actions = d.connect(vec![]);
    let teardown = only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
    let actions = d.ok(teardown);
    only_network_call(&actions, |c| matches!(c, NetworkCall::Setup { .. }));
}

#[test]
fn removing_an_attached_container_releases_the_attachment_before_deleting_it() {
    let mut d = Driver::new();
    let (_, setup) = bridge_start_until_setup(&mut d);
    let actions = d.ok(setup);
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    // The task create fails for good: the start is given up.
    let actions = d.fail(create, FailureKind::Invalid);
    let teardown = only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
    // A remove while the release is in flight waits for it.
    let (removed, actions) = d.command(Command::Remove {
        id: cid("c1"),
        force: false,
        volumes: false,
    });
    assert_eq!(calls(&actions), vec![]);
    // A failed release is retried, never given up.
    let actions = d.fail(teardown, FailureKind::Other);
    assert_eq!(calls(&actions), vec![]);
    let (_, actions) = d.fire_timer();
    let teardown = only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
    let actions = d.ok(teardown);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
    assert!(answers(&d.ok(delete)).contains(&(removed, Answer::Done)));
}

#[test]
fn an_attachment_outlives_a_task_create_in_doubt_until_a_relist_has_looked() {
    let mut d = Driver::new();
    let (_, setup) = bridge_start_until_setup(&mut d);
    let actions = d.ok(setup);
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    // The create's answer is lost: a task may exist, using the attachment.
    let actions = d.fail(create, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let (_, actions) = d.command(Command::Remove {
        id: cid("c1"),
        force: false,
        volumes: false,
    });
    assert_eq!(calls(&actions), vec![], "nothing released or deleted yet");
    // The relist shows no task: at the retry, the release, then the delete.
    assert_eq!(calls(&d.relist(relist, vec![])), vec![]);
    let (_, actions) = d.fire_timer();
    let teardown = only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
    let actions = d.ok(teardown);
    only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
}

#[test]
fn an_adopted_orphan_attachment_is_released_then_forgotten() {
    // What the daemon restores for an attachment found with no record.
    let mut d = Driver::new();
    let rec = Record {
        presence: Presence::Discarding,
        network: NetworkState::Attaching,
        health: None,
        config: bridge_config(),
        ..created_record_template("orphan")
    };
    d.feed(Input::Restore(vec![rec].into()));
    let actions = d.connect(vec![]);
    let teardown = only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
    let actions = d.ok(teardown);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
    let actions = d.fail(delete, FailureKind::NotFound);
    // A create the daemon before had under way may still land until its
    // calls' deadline has passed: deleted again then, and forgotten.
    assert!(!actions.contains(&Action::Unpersist(cid("orphan"))));
    let actions = d.fire_until(TimerKind::RollbackDue(cid("orphan")));
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
    let actions = d.fail(delete, FailureKind::NotFound);
    assert!(
        actions.contains(&Action::Unpersist(cid("orphan"))),
        "{actions:?}"
    );
    assert!(d.core.container(&cid("orphan")).is_none());
}

fn created_record_template(id: &str) -> Record {
    Record {
        id: cid(id),
        name: format!("n-{id}"),
        config: Default::default(),
        created_at: WallTime::from_unix_nanos(1),
        presence: Presence::Created,
        run: 0,
        pid: None,
        started_at: None,
        began_at: None,
        start_sent: false,
        exit: None,
        restart_count: 0,
        intents: Intents::default(),
        network: NetworkState::Detached,
        endpoints: Vec::new(),
        own_disconnected: false,
        allocation: None,
        health: None,
        create_sent_at: None,
        execs: Vec::new(),
        rootfs_mounted: false,
    }
}

/// `--network container:<ref>` joins another container's namespace: no
/// attachment of its own, so its start goes straight to the task and
/// nothing is released after its exit.
#[test]
fn a_container_sharing_another_network_namespace_gets_no_network_step() {
    let mut d = Driver::new();
    d.connect(vec![]);
    let config: std::sync::Arc<ContainerConfig> = ContainerConfig {
        network: NetworkMode::Container,
        network_container: Some(holdfast_core::SharedNetwork {
            id: "c0".into(),
            pid: 7,
        }),
        ..Default::default()
    }
    .into();
    let (_, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "side".into(),
        config,
    });
    d.ok(only_call(&actions, |c| {
        matches!(c, Call::CreateContainer { .. })
    }));
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    assert_eq!(calls(&actions), vec![Call::CreateTask { id: cid("c1") }]);
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
    assert!(calls(&actions).is_empty(), "{actions:?}");
}

/// A user-defined network is the same network step: the network it names
/// travels in the config, the core decides when, as for the default one.
#[test]
fn a_user_network_container_is_attached_by_the_same_network_step() {
    let mut d = Driver::new();
    d.connect(vec![]);
    let config: std::sync::Arc<ContainerConfig> = ContainerConfig {
        network: NetworkMode::Bridge,
        network_name: Some("app".into()),
        network_aliases: vec!["web".into()],
        ip_address: Some("10.5.0.9".into()),
        ..Default::default()
    }
    .into();
    let (_, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "alpha".into(),
        config: config.clone(),
    });
    d.ok(only_call(&actions, |c| {
        matches!(c, Call::CreateContainer { .. })
    }));
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    assert_eq!(
        issued(&actions),
        vec![Issued::Network(NetworkCall::Setup {
            id: cid("c1"),
            config,
            own_interface: true,
        })]
    );
}
