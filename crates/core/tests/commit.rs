//! `docker commit` and `docker cp`: handler tests, one input each, with the
//! exact actions it produces. The container's snapshot is held by the core
//! for the length of the request, and what was held (a commit's freeze, a
//! mount for a copy) is persisted before it is made, so a crash never
//! leaves a container frozen or a snapshot mounted.

mod support;

use holdfast_core::*;
use support::*;

fn running(id: &str, pid: u32) -> Driver {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d.run(id, ContainerConfig::default(), pid);
    d
}

fn commit(d: &mut Driver, pause: bool) -> (RequestId, Vec<Action>) {
    d.command(Command::ReadChanges {
        id: cid("c1"),
        pause,
        layer: "/tmp/layer.tar".into(),
    })
}

fn view<'a>(d: &'a Driver) -> ContainerView<'a> {
    d.core.container(&cid("c1")).expect("exists")
}

fn task(status: TaskStatus) -> TaskInfo {
    TaskInfo {
        container: cid("c1"),
        pid: 10,
        status,
        exit_status: 0,
        exited_at: None,
        oom_kills: None,
    }
}

#[test]
fn a_commit_of_a_running_container_freezes_it_reads_its_changes_then_thaws_it() {
    let mut d = running("c1", 10);
    let (req, actions) = commit(&mut d, true);
    // The thaw it owes is recorded before the freeze is made.
    let owed = actions
        .iter()
        .position(|a| matches!(a, Action::Persist(r) if r.intents.commit_thaw));
    let freeze = actions.iter().position(|a| {
        matches!(
            a,
            Action::Call {
                call: Call::Pause { .. },
                ..
            }
        )
    });
    assert!(owed.is_some() && owed < freeze, "{actions:?}");
    let op = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    let actions = d.ok(op);
    assert_eq!(events(&actions), vec![UserEventKind::Pause]);
    assert_eq!(
        calls(&actions),
        vec![Call::ReadChanges {
            id: cid("c1"),
            layer: "/tmp/layer.tar".into(),
        }]
    );
    let op = only_call(&actions, |c| matches!(c, Call::ReadChanges { .. }));
    let actions = d.ok(op);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    let op = only_call(&actions, |c| matches!(c, Call::Resume { .. }));
    let actions = d.ok(op);
    assert_eq!(events(&actions), vec![UserEventKind::Unpause]);
    assert!(!persisted(&actions).intents.commit_thaw);
    assert!(!view(&d).paused);
}

#[test]
fn a_commit_without_pause_or_of_a_paused_container_neither_freezes_nor_thaws_it() {
    let mut d = running("c1", 10);
    let (req, actions) = commit(&mut d, false);
    let op = only_call(&actions, |c| matches!(c, Call::ReadChanges { .. }));
    let actions = d.ok(op);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert!(calls(&actions).is_empty(), "{actions:?}");

    let (_, actions) = d.command(Command::Pause { id: cid("c1") });
    let op = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    d.ok(op);
    let (req, actions) = commit(&mut d, true);
    let op = only_call(&actions, |c| matches!(c, Call::ReadChanges { .. }));
    let actions = d.ok(op);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert!(
        calls(&actions).is_empty(),
        "the user's pause stands: {actions:?}"
    );
    assert!(view(&d).paused);
}

#[test]
fn a_user_pause_or_unpause_waits_for_no_commit_it_is_refused_while_one_holds_the_freeze() {
    let mut d = running("c1", 10);
    let (_, actions) = commit(&mut d, true);
    let op = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    d.ok(op);
    let (req, actions) = d.command(Command::Unpause { id: cid("c1") });
    assert!(
        matches!(actions.as_slice(), [Action::Answer(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Conflict && e.message.contains("commit")),
        "{actions:?}"
    );
}

#[test]
fn a_daemon_that_crashed_during_a_commit_thaws_the_container_it_froze() {
    let mut d = running("c1", 10);
    let (_, actions) = commit(&mut d, true);
    let rec = persisted(&actions);
    assert!(rec.intents.commit_thaw);
    // holdfastd dies with the container frozen; it comes back.
    let mut d = Driver::new();
    d.feed(Input::Restore(vec![rec].into()));
    let actions = d.connect(vec![task(TaskStatus::Paused)]);
    let op = only_call(&actions, |c| matches!(c, Call::Resume { .. }));
    let actions = d.ok(op);
    assert!(!persisted(&actions).intents.commit_thaw);
    let v = view(&d);
    assert_eq!((v.status, v.paused), (Status::Running, false));
}

#[test]
fn a_freeze_that_never_took_effect_leaves_nothing_to_thaw_after_a_crash() {
    let mut d = running("c1", 10);
    let (_, actions) = commit(&mut d, true);
    let rec = persisted(&actions);
    let mut d = Driver::new();
    d.feed(Input::Restore(vec![rec].into()));
    let actions = d.connect(vec![task(TaskStatus::Running)]);
    assert!(calls(&actions).is_empty(), "{actions:?}");
    assert!(!persisted(&actions).intents.commit_thaw);
}

#[test]
fn a_freeze_whose_answer_was_lost_is_thawed_once_a_relist_shows_it_took_effect() {
    let mut d = running("c1", 10);
    let (req, actions) = commit(&mut d, true);
    let freeze = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    // Its echo comes, then the call times out: it may have taken effect.
    d.feed(Input::Event(ContainerdEvent::TaskPaused {
        container: cid("c1"),
    }));
    let actions = d.fail(freeze, FailureKind::Deadline);
    assert!(
        matches!(answers(&actions).as_slice(), [(r, Answer::Error(_))] if *r == req),
        "{actions:?}"
    );
    // The thaw owed is kept until a relist says (found by the simulator:
    // it was dropped as moot and the container stayed frozen).
    assert!(
        actions
            .iter()
            .all(|a| !matches!(a, Action::Persist(r) if !r.intents.commit_thaw)),
        "{actions:?}"
    );
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let actions = d.relist(relist, vec![task(TaskStatus::Paused)]);
    let op = only_call(&actions, |c| matches!(c, Call::Resume { .. }));
    let actions = d.ok(op);
    assert!(!persisted(&actions).intents.commit_thaw);
    assert!(!view(&d).paused);
}

/// The same lost answer, where the freeze never took effect: the relist
/// shows the task running, and the thaw owed is dropped then, with no
/// thaw sent (found by the properties: nothing looked at it again, and the
/// record kept a thaw owed for ever).
#[test]
fn a_freeze_whose_answer_was_lost_is_forgotten_once_a_relist_shows_it_never_took_effect() {
    let mut d = running("c1", 10);
    let (_, actions) = commit(&mut d, true);
    let freeze = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    let actions = d.fail(freeze, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let actions = d.relist(relist, vec![task(TaskStatus::Running)]);
    assert_eq!(calls(&actions), vec![], "{actions:?}");
    assert!(!persisted(&actions).intents.commit_thaw);
    assert!(!view(&d).paused);
}

/// A commit's freeze refused (the task was frozen by someone else just
/// after a SIGKILL went out, which a v1 freezer holds): the freeze the
/// relist shows is not ours, and the task is thawed so that the kill lands
/// (found by the properties: the refused freeze was taken for ours, and
/// the SIGKILL waited for ever).
#[test]
fn a_refused_commit_freeze_is_not_taken_for_ours_and_a_held_kill_is_thawed() {
    let mut d = running("c1", 10);
    let (_, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGKILL,
    });
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    d.ok(kill);
    let (_, actions) = commit(&mut d, true);
    let freeze = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    let actions = d.fail(freeze, FailureKind::FailedPrecondition);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let actions = d.relist(relist, vec![task(TaskStatus::Paused)]);
    only_call(&actions, |c| matches!(c, Call::Resume { .. }));
}

/// The same, where the relist comes while another call of the container
/// is on its way (it cannot settle the container): another relist is
/// asked for once that call is answered, rather than the doubt waiting for
/// the periodic one (found by the properties).
#[test]
fn a_freeze_in_doubt_is_looked_at_again_when_the_relist_came_too_early() {
    let mut d = running("c1", 10);
    let (_, actions) = commit(&mut d, true);
    let freeze = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    let (_, actions) = d.command(Command::UpdateResources {
        id: cid("c1"),
        update: ResourceUpdate {
            memory_limit_bytes: Some(64 << 20),
            ..ResourceUpdate::default()
        },
    });
    assert_eq!(calls(&actions), vec![]);
    let actions = d.fail(freeze, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let update = only_call(&actions, |c| matches!(c, Call::UpdateResources { .. }));
    assert_eq!(
        calls(&d.relist(relist, vec![task(TaskStatus::Running)])),
        vec![]
    );
    let actions = d.ok(update);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let actions = d.relist(relist, vec![task(TaskStatus::Running)]);
    assert!(!persisted(&actions).intents.commit_thaw);
}

/// A freeze in doubt whose run then ends: a task that no longer runs
/// holds no freeze, and the thaw owed is dropped at once, not kept until
/// a relist (found by the properties: a run that ended before any relist
/// could settle the doubt kept its thaw owed).
#[test]
fn a_freeze_in_doubt_is_over_when_the_run_ends() {
    let mut d = running("c1", 10);
    let (_, actions) = commit(&mut d, true);
    let freeze = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    let actions = d.fail(freeze, FailureKind::Deadline);
    only_call(&actions, |c| matches!(c, Call::Relist));
    let actions = d.exit("c1", 10, 0);
    let last = persisted(&actions);
    assert!(last.exit.is_some());
    assert!(!last.intents.commit_thaw, "{actions:#?}");
}

#[test]
fn a_copy_out_of_a_running_container_uses_its_process_root_and_mounts_nothing() {
    let mut d = running("c1", 10);
    let (req, actions) = d.command(Command::MountRootfs { id: cid("c1") });
    assert_eq!(
        actions,
        vec![Action::Answer(req, Answer::Rootfs { pid: Some(10) })]
    );
    let (req, actions) = d.command(Command::UnmountRootfs { id: cid("c1") });
    assert_eq!(actions, vec![Action::Answer(req, Answer::Done)]);
}

#[test]
fn a_copy_into_a_stopped_container_mounts_its_snapshot_until_the_last_copy_is_done() {
    let mut d = Driver::new();
    d.connect(vec![]);
    d.create("c1", ContainerConfig::default());
    let (first, actions) = d.command(Command::MountRootfs { id: cid("c1") });
    let owned = actions
        .iter()
        .position(|a| matches!(a, Action::Persist(r) if r.rootfs_mounted));
    let mount = actions.iter().position(|a| {
        matches!(
            a,
            Action::Call {
                call: Call::MountRootfs { .. },
                ..
            }
        )
    });
    assert!(owned.is_some() && owned < mount, "{actions:?}");
    let op = only_call(&actions, |c| matches!(c, Call::MountRootfs { .. }));
    let actions = d.ok(op);
    assert_eq!(
        answers(&actions),
        vec![(first, Answer::Rootfs { pid: None })]
    );
    // A second copy shares the mount.
    let (second, actions) = d.command(Command::MountRootfs { id: cid("c1") });
    assert_eq!(
        actions,
        vec![Action::Answer(second, Answer::Rootfs { pid: None })]
    );
    // A start waits for the copies: no task is made on a mounted snapshot.
    let (start, actions) = d.command(Command::Start { id: cid("c1") });
    assert!(calls(&actions).is_empty(), "{actions:?}");
    d.command(Command::UnmountRootfs { id: cid("c1") });
    let (_, actions) = d.command(Command::UnmountRootfs { id: cid("c1") });
    let op = only_call(&actions, |c| matches!(c, Call::UnmountRootfs { .. }));
    let actions = d.ok(op);
    assert!(matches!(&actions[0], Action::Persist(r) if !r.rootfs_mounted));
    only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    assert!(answers(&actions).iter().all(|(r, _)| *r != start));
}

#[test]
fn a_daemon_that_crashed_during_a_copy_unmounts_the_snapshot() {
    let mut d = Driver::new();
    d.connect(vec![]);
    d.create("c1", ContainerConfig::default());
    let (_, actions) = d.command(Command::MountRootfs { id: cid("c1") });
    let rec = persisted(&actions);
    let mut d = Driver::new();
    d.feed(Input::Restore(vec![rec].into()));
    let actions = d.connect(vec![]);
    let op = only_call(&actions, |c| matches!(c, Call::UnmountRootfs { .. }));
    let actions = d.ok(op);
    assert!(!persisted(&actions).rootfs_mounted);
}

/// A user's pause and a commit, both waiting behind a call in flight: the
/// commit's freeze serves both, the user is told the pause is done, and
/// the commit owes no thaw that would undo it (simulator seed 121212).
#[test]
fn a_commits_freeze_that_a_waiting_pause_takes_over_is_not_thawed() {
    let mut d = running("c1", 10);
    let update = update_in_flight(&mut d, "c1");
    let (pause, _) = d.command(Command::Pause { id: cid("c1") });
    let (commit_req, _) = commit(&mut d, true);
    let actions = d.ok(update);
    let freeze = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    let mut actions = d.ok(freeze);
    assert!(
        answers(&actions).contains(&(pause, Answer::Done)),
        "{actions:?}"
    );
    let read = only_call(&actions, |c| matches!(c, Call::ReadChanges { .. }));
    actions = d.ok(read);
    assert!(
        answers(&actions).contains(&(commit_req, Answer::Done)),
        "{actions:?}"
    );
    assert!(
        !calls(&actions)
            .iter()
            .any(|c| matches!(c, Call::Resume { .. })),
        "the user's pause undone: {actions:?}"
    );
    let v = view(&d);
    assert!(v.paused && !v.record.intents.commit_thaw);
}
