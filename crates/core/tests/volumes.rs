//! Volumes: handler tests, one input each, with the exact actions it
//! produces. A volume is recorded before its directory is made and marked
//! for removal before it is removed; none is removed while a container's
//! record names it; a create that cannot complete leaves none behind.

mod support;

use holdfast_core::*;
use std::collections::BTreeMap;
use support::*;

fn ready() -> Driver {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d
}

fn volume_calls(actions: &[Action]) -> Vec<(OpId, VolumeCall)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Volume { op, call } => Some((*op, call.clone())),
            _ => None,
        })
        .collect()
}

fn only_volume_call(actions: &[Action]) -> (OpId, VolumeCall) {
    let calls = volume_calls(actions);
    assert_eq!(calls.len(), 1, "want one volume call: {actions:#?}");
    calls[0].clone()
}

fn position(actions: &[Action], want: impl Fn(&Action) -> bool) -> usize {
    actions
        .iter()
        .position(want)
        .unwrap_or_else(|| panic!("not found in {actions:#?}"))
}

fn state(d: &Driver, name: &str) -> Option<ResourceState> {
    d.core.volume(name).map(|v| v.state)
}

/// `-v name:/data` (or an anonymous volume named `name`).
fn with_volume(name: &str, anonymous: bool) -> ContainerConfig {
    ContainerConfig {
        mounts: vec![BindMount {
            source: format!("/volumes/{name}/_data"),
            destination: "/data".into(),
            read_only: false,
            volume: Some(name.into()),
            anonymous,
        }],
        ..ContainerConfig::default()
    }
}

fn create_volume(d: &mut Driver, name: &str) {
    let (req, actions) = d.command(Command::CreateVolume {
        name: name.into(),
        labels: BTreeMap::new(),
    });
    let (op, _) = only_volume_call(&actions);
    assert_eq!(answers(&d.ok(op)), vec![(req, Answer::Done)]);
}

/// A created container `id` on volume `name`: the volume made (when new),
/// the container made, the volume filled.
fn create_on_volume(d: &mut Driver, id: &str, name: &str, anonymous: bool) {
    let known = d.core.volume(name).is_some();
    let (req, actions) = d.command(Command::Create {
        id: cid(id),
        name: format!("n-{id}"),
        config: with_volume(name, anonymous).into(),
    });
    let actions = if known {
        actions
    } else {
        let (op, _) = only_volume_call(&actions);
        d.ok(op)
    };
    let op = only_call(&actions, |c| matches!(c, Call::CreateContainer { .. }));
    let actions = d.ok(op);
    let (fill, _) = only_volume_call(&actions);
    let actions = d.ok(fill);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
}

/// A restarted holdfastd, from these records.
fn restarted_with(containers: Vec<Record>, volumes: Vec<VolumeRecord>) -> (Driver, Vec<Action>) {
    let mut d = Driver::new();
    let actions = d.feed(Input::Restore(Stored {
        containers,
        volumes,
        ..Stored::default()
    }));
    (d, actions)
}

fn remove(d: &mut Driver, id: &str, volumes: bool) -> Vec<Action> {
    let (_, actions) = d.command(Command::Remove {
        id: cid(id),
        force: false,
        volumes,
    });
    let op = only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
    d.ok(op)
}

#[test]
fn a_volume_is_recorded_before_its_directory_is_made_and_a_second_create_is_the_first() {
    let mut d = ready();
    let labels = BTreeMap::from([("team".to_owned(), "a".to_owned())]);
    let (req, actions) = d.command(Command::CreateVolume {
        name: "data".into(),
        labels: labels.clone(),
    });
    let owned = position(
        &actions,
        |a| matches!(a, Action::PersistVolume(v) if v.name == "data" && v.state == ResourceState::Creating),
    );
    let made = position(&actions, |a| matches!(a, Action::Volume { .. }));
    assert!(owned < made, "{actions:?}");
    let (op, call) = only_volume_call(&actions);
    assert_eq!(
        call,
        VolumeCall::Create {
            name: "data".into(),
            labels: labels.clone(),
        }
    );
    assert!(answers(&actions).is_empty(), "answered before it was made");
    let actions = d.ok(op);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert_eq!(state(&d, "data"), Some(ResourceState::Ready));
    // Created again: it is the one that exists, with its first labels.
    let (req, actions) = d.command(Command::CreateVolume {
        name: "data".into(),
        labels: BTreeMap::new(),
    });
    assert_eq!(actions, vec![Action::Answer(req, Answer::Done)]);
    assert_eq!(
        d.core.volume("data").map(|v| v.labels.clone()),
        Some(labels)
    );
}

#[test]
fn a_bad_volume_name_is_refused_before_anything_is_made() {
    let mut d = ready();
    let (req, actions) = d.command(Command::CreateVolume {
        name: "-bad".into(),
        labels: BTreeMap::new(),
    });
    assert!(
        matches!(actions.as_slice(), [Action::Answer(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Invalid),
        "{actions:?}"
    );
}

#[test]
fn a_create_on_a_new_volume_makes_it_first_then_fills_it_from_the_image_before_it_is_done() {
    let mut d = ready();
    let (req, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "web".into(),
        config: with_volume("data", false).into(),
    });
    // The container's record first, then the volume's, made for it.
    let container = position(
        &actions,
        |a| matches!(a, Action::Persist(r) if r.id == cid("c1")),
    );
    let volume = position(
        &actions,
        |a| matches!(a, Action::PersistVolume(v) if v.made_for == Some(cid("c1"))),
    );
    assert!(container < volume, "{actions:?}");
    assert!(calls(&actions).is_empty(), "no container before its volume");
    let (op, _) = only_volume_call(&actions);
    let actions = d.ok(op);
    let op = only_call(&actions, |c| matches!(c, Call::CreateContainer { .. }));
    let actions = d.ok(op);
    assert!(answers(&actions).is_empty(), "done only once filled");
    let (fill, call) = only_volume_call(&actions);
    assert_eq!(
        call,
        VolumeCall::Fill {
            name: "data".into(),
            container: cid("c1"),
            path: "/data".into(),
        }
    );
    let actions = d.ok(fill);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert_eq!(events(&actions), vec![UserEventKind::Create]);
    // It is the user's volume from now on.
    assert_eq!(d.core.volume("data").and_then(|v| v.made_for.clone()), None);
    assert_eq!(d.core.volume_users("data"), vec![cid("c1")]);
}

#[test]
fn a_create_whose_fill_fails_leaves_neither_container_nor_the_volume_made_for_it() {
    let mut d = ready();
    let (req, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "web".into(),
        config: with_volume("data", false).into(),
    });
    let (op, _) = only_volume_call(&actions);
    let actions = d.ok(op);
    let op = only_call(&actions, |c| matches!(c, Call::CreateContainer { .. }));
    let (fill, _) = only_volume_call(&d.ok(op));
    let actions = d.fail(fill, FailureKind::Other);
    assert!(
        matches!(answers(&actions).as_slice(), [(r, Answer::Error(e))]
            if *r == req && e.message.contains("filling volume data")),
        "{actions:?}"
    );
    let op = only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
    let actions = d.ok(op);
    // The volume goes, marked before the container's record is deleted,
    // removed only after.
    let marked = position(
        &actions,
        |a| matches!(a, Action::PersistVolume(v) if v.state == ResourceState::Removing),
    );
    let forgotten = position(&actions, |a| matches!(a, Action::Unpersist(_)));
    let removed = position(&actions, |a| matches!(a, Action::Volume { .. }));
    assert!(marked < forgotten && forgotten < removed, "{actions:?}");
    let (op, call) = only_volume_call(&actions);
    assert_eq!(
        call,
        VolumeCall::Remove {
            name: "data".into()
        }
    );
    let actions = d.ok(op);
    assert!(actions.contains(&Action::UnpersistVolume("data".into())));
    assert_eq!(state(&d, "data"), None);
}

#[test]
fn a_create_whose_volume_cannot_be_made_is_rolled_back_at_once_then_the_volume_goes() {
    let mut d = ready();
    let (req, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "web".into(),
        config: with_volume("data", false).into(),
    });
    let (op, _) = only_volume_call(&actions);
    let actions = d.fail(op, FailureKind::Other);
    assert!(
        matches!(answers(&actions).as_slice(), [(r, Answer::Error(_))] if *r == req),
        "{actions:?}"
    );
    // The rolled-back record goes first (found by the simulator: it
    // stayed until something else woke it, and the volume with it).
    let op = only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
    assert!(volume_calls(&actions).is_empty(), "{actions:?}");
    let actions = d.fail(op, FailureKind::NotFound);
    assert!(
        actions.contains(&Action::Unpersist(cid("c1"))),
        "{actions:?}"
    );
    // The volume's removal waits out its backoff, then is carried out.
    let (_, actions) = d.fire_timer();
    let (op, call) = only_volume_call(&actions);
    assert_eq!(
        call,
        VolumeCall::Remove {
            name: "data".into()
        }
    );
    d.ok(op);
    assert_eq!(state(&d, "data"), None);
}

#[test]
fn a_volume_named_by_any_container_is_not_removed_and_is_once_none_names_it() {
    let mut d = ready();
    create_on_volume(&mut d, "c1", "data", false);
    let (req, actions) = d.command(Command::RemoveVolume {
        name: "data".into(),
        force: false,
    });
    assert!(
        matches!(actions.as_slice(), [Action::Answer(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Conflict && e.message.contains("volume is in use") && e.message.contains("c1")),
        "{actions:?}"
    );
    // A named volume stays after `rm -v`.
    remove(&mut d, "c1", true);
    assert_eq!(state(&d, "data"), Some(ResourceState::Ready));
    let (req, actions) = d.command(Command::RemoveVolume {
        name: "data".into(),
        force: false,
    });
    let marked = position(
        &actions,
        |a| matches!(a, Action::PersistVolume(v) if v.state == ResourceState::Removing),
    );
    let removed = position(&actions, |a| matches!(a, Action::Volume { .. }));
    assert!(marked < removed, "{actions:?}");
    assert!(answers(&actions).is_empty(), "answered before it is gone");
    let (op, _) = only_volume_call(&actions);
    let actions = d.ok(op);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    let (req, actions) = d.command(Command::RemoveVolume {
        name: "data".into(),
        force: true,
    });
    assert_eq!(
        actions,
        vec![Action::Answer(req, Answer::Done)],
        "-f: gone is done"
    );
}

#[test]
fn rm_v_removes_the_anonymous_volumes_no_other_container_names() {
    let mut d = ready();
    create_on_volume(&mut d, "c1", "anon1", true);
    create_on_volume(&mut d, "c2", "anon1", true);
    create_on_volume(&mut d, "c3", "anon3", true);
    // Still named by c2: kept.
    let actions = remove(&mut d, "c1", true);
    assert!(volume_calls(&actions).is_empty(), "{actions:?}");
    // Removed without -v: kept.
    let actions = remove(&mut d, "c2", false);
    assert!(volume_calls(&actions).is_empty(), "{actions:?}");
    assert_eq!(state(&d, "anon1"), Some(ResourceState::Ready));
    let actions = remove(&mut d, "c3", true);
    let (op, call) = only_volume_call(&actions);
    assert_eq!(
        call,
        VolumeCall::Remove {
            name: "anon3".into()
        }
    );
    d.ok(op);
    assert_eq!(state(&d, "anon3"), None);
}

#[test]
fn a_removal_cut_by_a_crash_is_carried_out_by_the_restarted_daemon() {
    let mut d = ready();
    create_volume(&mut d, "data");
    let (_, actions) = d.command(Command::RemoveVolume {
        name: "data".into(),
        force: false,
    });
    let marked = actions
        .iter()
        .find_map(|a| match a {
            Action::PersistVolume(v) => Some(v.clone()),
            _ => None,
        })
        .expect("marked for removal");
    // holdfastd dies before the removal is answered.
    let mut d = Driver::new();
    let actions = d.feed(Input::Restore(Stored {
        volumes: vec![marked],
        ..Stored::default()
    }));
    let (op, call) = only_volume_call(&actions);
    assert_eq!(
        call,
        VolumeCall::Remove {
            name: "data".into()
        }
    );
    assert!(d.ok(op).contains(&Action::UnpersistVolume("data".into())));
}

#[test]
fn a_volume_made_for_a_create_that_completed_before_a_crash_is_kept() {
    let mut d = ready();
    let (_, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "n-c1".into(),
        config: with_volume("data", false).into(),
    });
    let (op, _) = only_volume_call(&actions);
    let actions = d.ok(op);
    let made = d.core.volume("data").cloned().expect("recorded");
    assert_eq!(made.made_for, Some(cid("c1")));
    let op = only_call(&actions, |c| matches!(c, Call::CreateContainer { .. }));
    let actions = d.ok(op);
    let (fill, _) = only_volume_call(&actions);
    let actions = d.ok(fill);
    let created = actions
        .iter()
        .find_map(|a| match a {
            Action::Persist(r) if r.presence == Presence::Created => Some(r.clone()),
            _ => None,
        })
        .expect("the create completes");
    // holdfastd dies after the container's record said created, before
    // the volume's said kept.
    let (mut d, actions) = restarted_with(vec![created], vec![made]);
    assert!(
        actions.iter().any(
            |a| matches!(a, Action::PersistVolume(v) if v.name == "data" && v.made_for.is_none())
        ),
        "{actions:#?}"
    );
    d.connect(vec![]);
    // The container goes (not `-v`); its named volume stays.
    let actions = remove(&mut d, "c1", false);
    assert!(volume_calls(&actions).is_empty(), "{actions:#?}");
    assert_eq!(state(&d, "data"), Some(ResourceState::Ready));
}

#[test]
fn rm_v_cut_by_a_crash_removes_the_volume_only_once_the_container_is_gone() {
    let mut d = ready();
    create_on_volume(&mut d, "c1", "anon1", true);
    let (_, actions) = d.command(Command::Remove {
        id: cid("c1"),
        force: false,
        volumes: true,
    });
    let removing = created_record(&d, "c1");
    assert!(removing.intents.remove && removing.intents.remove_volumes);
    let op = only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
    let actions = d.ok(op);
    let marked = actions
        .iter()
        .find_map(|a| match a {
            Action::PersistVolume(v) if v.state == ResourceState::Removing => Some(v.clone()),
            _ => None,
        })
        .expect("marked for removal before the record goes");
    // holdfastd dies after marking the volume, before the container's
    // record is deleted: the next one finds both.
    let (mut d, actions) = restarted_with(vec![removing], vec![marked]);
    assert!(volume_calls(&actions).is_empty(), "{actions:#?}");
    let actions = d.connect(vec![]);
    assert!(volume_calls(&actions).is_empty(), "{actions:#?}");
    let op = only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
    let actions = d.ok(op);
    let gone = position(&actions, |a| matches!(a, Action::Unpersist(_)));
    let removal = position(&actions, |a| matches!(a, Action::Volume { .. }));
    assert!(gone < removal, "{actions:#?}");
}

#[test]
fn a_failed_removal_is_tried_again_until_it_is_done() {
    let mut d = ready();
    create_volume(&mut d, "data");
    let (req, actions) = d.command(Command::RemoveVolume {
        name: "data".into(),
        force: false,
    });
    let (op, _) = only_volume_call(&actions);
    let actions = d.fail(op, FailureKind::Other);
    assert!(
        matches!(answers(&actions).as_slice(), [(r, Answer::Error(e))]
            if *r == req && e.message.contains("tried again")),
        "{actions:?}"
    );
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::VolumeRetry("data".into()));
    let (op, _) = only_volume_call(&actions);
    d.ok(op);
    assert_eq!(state(&d, "data"), None);
}

#[test]
fn prune_removes_at_once_only_the_volumes_no_container_names_and_lists_them_when_gone() {
    let mut d = ready();
    create_volume(&mut d, "free");
    create_on_volume(&mut d, "c1", "used", false);
    let (req, actions) = d.command(Command::PruneVolumes {
        names: vec!["free".into(), "used".into(), "unknown".into()],
    });
    let (op, call) = only_volume_call(&actions);
    assert_eq!(
        call,
        VolumeCall::Remove {
            name: "free".into()
        }
    );
    assert!(answers(&actions).is_empty(), "{actions:?}");
    let actions = d.ok(op);
    assert_eq!(
        answers(&actions),
        vec![(req, Answer::Pruned(vec!["free".into()]))]
    );
    assert_eq!(state(&d, "used"), Some(ResourceState::Ready));
}

#[test]
fn a_create_naming_a_volume_being_removed_is_refused_and_makes_nothing() {
    let mut d = ready();
    create_volume(&mut d, "data");
    d.command(Command::RemoveVolume {
        name: "data".into(),
        force: false,
    });
    let (req, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "web".into(),
        config: with_volume("data", false).into(),
    });
    assert!(
        matches!(actions.as_slice(), [Action::Answer(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Conflict && e.message.contains("being removed")),
        "{actions:?}"
    );
}

#[test]
fn volumes_found_on_disk_without_a_record_are_adopted_never_removed() {
    let mut d = Driver::new();
    d.feed(Input::Restore(Stored::default()));
    let found = FoundVolume {
        name: "old".into(),
        labels: BTreeMap::new(),
        created_at: d.now.wall,
    };
    let actions = d.feed(Input::VolumesFound(vec![found]));
    assert!(
        matches!(actions.as_slice(), [Action::PersistVolume(v)] if v.name == "old" && v.state == ResourceState::Ready),
        "{actions:?}"
    );
}

/// A create told at its answer bound that it was rolled back, while the
/// volume it waits for is still being made: the rollback goes on at once
/// (its container deleted), and the volume made for it goes once made
/// (found by the properties: nothing drove the rollback, and the volume
/// was kept for ever as made for a create that never completed).
#[test]
fn a_create_rolled_back_at_its_bound_while_its_volume_is_made_leaves_nothing() {
    let mut d = ready();
    let (req, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "n-c1".into(),
        config: with_volume("anon1", true).into(),
    });
    let (make, _) = only_volume_call(&actions);
    d.advance(CoreConfig::default().request_answer_bound);
    let (_, actions) = d.fire_timer();
    assert!(
        matches!(&answers(&actions)[..], [(r, Answer::Error(e))] if *r == req && e.message.contains("rolled back")),
        "{actions:#?}"
    );
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
    let actions = d.ok(delete);
    assert!(
        actions.contains(&Action::Unpersist(cid("c1"))),
        "{actions:#?}"
    );
    assert_eq!(state(&d, "anon1"), Some(ResourceState::Removing));
    // The make overtaken by the removal: what it made goes now.
    let actions = d.ok(make);
    assert_eq!(
        only_volume_call(&actions).1,
        VolumeCall::Remove {
            name: "anon1".into()
        }
    );
}

/// A listing asked for before a container was made says nothing of it:
/// here one naming a task of its id (as a removed container of the same id
/// would have had) comes while its create waits for its volume, and no
/// exit is recorded for a container that never ran (found by the
/// properties, whose ids are reused).
#[test]
fn a_listing_older_than_a_container_says_nothing_of_it() {
    let mut d = ready();
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::PeriodicRelist);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let (_, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "n-c1".into(),
        config: with_volume("anon1", true).into(),
    });
    only_volume_call(&actions);
    let actions = d.relist(relist, vec![stopped("c1", 5, 137, d.now.wall)]);
    assert_eq!(events(&actions), vec![], "{actions:#?}");
    assert!(
        d.core
            .container(&cid("c1"))
            .is_some_and(|c| c.record.exit.is_none())
    );
}
