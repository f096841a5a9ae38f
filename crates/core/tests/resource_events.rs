//! The events of volumes and networks: handler tests, one input each. An
//! event says a fact the core has just recorded, once: a volume or a
//! network made or gone, a run's volumes mounted (before its `start`) and
//! unmounted (after its `die`), an interface on a network made or
//! released. What was never made for the user is never announced.

mod support;

use holdfast_core::*;
use std::collections::BTreeMap;
use support::*;

fn only_volume_op(actions: &[Action]) -> OpId {
    let ops: Vec<OpId> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Volume { op, .. } => Some(*op),
            _ => None,
        })
        .collect();
    assert_eq!(ops.len(), 1, "want one volume call: {actions:#?}");
    ops[0]
}

fn ready() -> Driver {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d
}

fn create_volume(d: &mut Driver, name: &str) -> Vec<Action> {
    let (_, actions) = d.command(Command::CreateVolume {
        name: name.into(),
        labels: BTreeMap::new(),
    });
    // Asked is not made: nothing is told yet.
    assert_eq!(resource_events(&actions), vec![]);
    let op = only_volume_op(&actions);
    d.ok(op)
}

#[test]
fn a_volume_is_told_created_once_made_and_destroyed_once_gone() {
    let mut d = ready();
    let made = create_volume(&mut d, "data");
    assert_eq!(
        resource_events(&made),
        vec![ResourceEventKind::VolumeCreated {
            name: "data".into()
        }]
    );
    // A second create is the first: told once.
    let (_, again) = d.command(Command::CreateVolume {
        name: "data".into(),
        labels: BTreeMap::new(),
    });
    assert_eq!(resource_events(&again), vec![]);
    let (_, actions) = d.command(Command::RemoveVolume {
        name: "data".into(),
        force: false,
    });
    assert_eq!(resource_events(&actions), vec![]);
    let gone = d.ok(only_volume_op(&actions));
    assert_eq!(
        resource_events(&gone),
        vec![ResourceEventKind::VolumeDestroyed {
            name: "data".into()
        }]
    );
}

#[test]
fn a_volume_whose_making_failed_is_never_told_created_nor_destroyed() {
    let mut d = ready();
    let (_, actions) = d.command(Command::CreateVolume {
        name: "data".into(),
        labels: BTreeMap::new(),
    });
    let failed = d.fail(only_volume_op(&actions), FailureKind::Invalid);
    assert_eq!(resource_events(&failed), vec![]);
    // Whatever part of it was made goes after a backoff, untold.
    let (_, actions) = d.fire_timer();
    let gone = d.ok(only_volume_op(&actions));
    assert_eq!(d.core.volume("data"), None);
    assert_eq!(resource_events(&gone), vec![]);
}

#[test]
fn a_run_mounts_its_volumes_before_its_start_and_unmounts_them_after_its_die() {
    let mut d = ready();
    create_volume(&mut d, "data");
    let config = ContainerConfig {
        mounts: vec![BindMount {
            source: "/volumes/data/_data".into(),
            destination: "/data".into(),
            read_only: true,
            volume: Some("data".into()),
            anonymous: false,
        }],
        ..ContainerConfig::default()
    };
    let actions = d.create("c1", config);
    let fill = only_volume_op(&actions);
    d.ok(fill);
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 42 }),
    ));
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    let started = d.ok(start);
    let mounted = ResourceEventKind::VolumeMounted {
        name: "data".into(),
        container: cid("c1"),
        destination: "/data".into(),
        read_only: true,
    };
    assert_eq!(resource_events(&started), vec![mounted.clone()]);
    let mount_at = started
        .iter()
        .position(|a| matches!(a, Action::PublishResource(e) if e.kind == mounted));
    let start_at = started
        .iter()
        .position(|a| matches!(a, Action::Publish(e) if e.kind == UserEventKind::Start));
    assert!(mount_at < start_at && start_at.is_some(), "{started:#?}");
    let exited = d.exit("c1", 42, 0);
    let unmounted = ResourceEventKind::VolumeUnmounted {
        name: "data".into(),
        container: cid("c1"),
        destination: "/data".into(),
    };
    assert_eq!(resource_events(&exited), vec![unmounted.clone()]);
    let unmount_at = exited
        .iter()
        .position(|a| matches!(a, Action::PublishResource(e) if e.kind == unmounted));
    let die_at = exited.iter().position(
        |a| matches!(a, Action::Publish(e) if matches!(e.kind, UserEventKind::Die { .. })),
    );
    assert!(die_at < unmount_at && die_at.is_some(), "{exited:#?}");
}

fn allocation() -> Allocation {
    Allocation {
        ip: Some(std::net::Ipv4Addr::new(172, 17, 0, 2)),
        prefix_len: 16,
        endpoint_id: "e1".into(),
        ..Allocation::default()
    }
}

#[test]
fn an_interface_made_is_a_connect_and_its_release_a_disconnect() {
    let mut d = Driver::new();
    let (_, setup) = bridge_start_until_setup(&mut d);
    let attached = d.feed(Input::ActionResult(
        setup,
        Ok(Done::Attached(Some(allocation()))),
    ));
    // The default `bridge` is the executor's: its id too.
    assert_eq!(
        resource_events(&attached),
        vec![ResourceEventKind::NetworkConnected {
            name: "bridge".into(),
            id: None,
            container: cid("c1"),
        }]
    );
    let create = only_call(&attached, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 42 }),
    ));
    d.ok(only_call(&actions, |c| matches!(c, Call::StartTask { .. })));
    let exited = d.exit("c1", 42, 0);
    assert_eq!(resource_events(&exited), vec![]);
    let delete = only_call(&exited, |c| matches!(c, Call::DeleteTask { .. }));
    let deleted = d.ok(delete);
    let teardown = only_network_call(&deleted, |c| matches!(c, NetworkCall::Teardown { .. }));
    let released = d.ok(teardown);
    assert_eq!(
        resource_events(&released),
        vec![ResourceEventKind::NetworkDisconnected {
            name: "bridge".into(),
            id: None,
            container: cid("c1"),
        }]
    );
}

#[test]
fn a_setup_in_doubt_released_is_no_disconnect() {
    let mut d = Driver::new();
    let (_, setup) = bridge_start_until_setup(&mut d);
    // Its answer lost: in doubt, released before anything else.
    let actions = d.fail(setup, FailureKind::Deadline);
    assert_eq!(resource_events(&actions), vec![]);
    let (_, actions) = d.fire_timer();
    let teardown = only_network_call(&actions, |c| matches!(c, NetworkCall::Teardown { .. }));
    assert_eq!(resource_events(&d.ok(teardown)), vec![]);
}

#[test]
fn a_user_network_is_told_created_with_its_id_and_destroyed_once_removed() {
    let mut d = ready();
    let (_, actions) = d.command(Command::CreateNetwork {
        name: "blue".into(),
        id: "b".repeat(64),
        subnet: None,
        gateway: None,
        labels: BTreeMap::new(),
        attachable: false,
    });
    assert_eq!(resource_events(&actions), vec![]);
    let define = only_network_call(&actions, |c| matches!(c, NetworkCall::Define { .. }));
    let definition = Definition {
        subnet: "10.200.0.0/16".into(),
        gateway: std::net::Ipv4Addr::new(10, 200, 0, 1),
        bridge: "hf-blue".into(),
    };
    let defined = d.feed(Input::ActionResult(define, Ok(Done::Defined(definition))));
    assert_eq!(
        resource_events(&defined),
        vec![ResourceEventKind::NetworkCreated {
            name: "blue".into(),
            id: "b".repeat(64),
        }]
    );
    let (_, actions) = d.command(Command::RemoveNetwork {
        name: "blue".into(),
    });
    let undefine = only_network_call(&actions, |c| matches!(c, NetworkCall::Undefine { .. }));
    assert_eq!(
        resource_events(&d.ok(undefine)),
        vec![ResourceEventKind::NetworkDestroyed {
            name: "blue".into(),
            id: "b".repeat(64),
        }]
    );
}
