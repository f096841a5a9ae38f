//! `docker update` of resources: carried to containerd, recorded only once
//! containerd took it.

mod support;

use holdfast_core::*;
use support::*;

fn memory(mib: u64) -> ResourceUpdate {
    ResourceUpdate {
        memory_limit_bytes: Some(mib << 20),
        ..ResourceUpdate::default()
    }
}

fn memory_of(d: &Driver, id: &str) -> Option<u64> {
    d.core
        .container(&cid(id))
        .and_then(|c| c.record.config.memory_limit_bytes)
}

#[test]
fn an_update_of_a_running_container_changes_its_task_then_the_record() {
    let mut d = Driver::new();
    d.connect(vec![]);
    d.run("c1", ContainerConfig::default(), 10);
    let (req, actions) = d.command(Command::UpdateResources {
        id: cid("c1"),
        update: memory(64),
    });
    let expected = ContainerConfig {
        memory_limit_bytes: Some(64 << 20),
        ..ContainerConfig::default()
    };
    assert!(
        matches!(&actions[..], [Action::Call { call: Call::UpdateResources { id, config, running: true }, .. }]
            if *id == cid("c1") && **config == expected),
        "only the call, nothing recorded yet: {actions:?}"
    );
    assert_eq!(memory_of(&d, "c1"), None);
    let op = only_call(&actions, |c| matches!(c, Call::UpdateResources { .. }));
    let actions = d.ok(op);
    assert!(
        matches!(&actions[0], Action::Persist(r) if r.config.memory_limit_bytes == Some(64 << 20))
    );
    assert_eq!(events(&actions), vec![UserEventKind::Update]);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert_eq!(memory_of(&d, "c1"), Some(64 << 20));
}

#[test]
fn an_update_of_an_exited_container_changes_the_spec_before_its_next_start() {
    let mut d = Driver::new();
    d.connect(vec![]);
    d.run("c1", ContainerConfig::default(), 10);
    let actions = d.exit("c1", 10, 0);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    d.ok(delete);
    let (_, actions) = d.command(Command::UpdateResources {
        id: cid("c1"),
        update: memory(32),
    });
    assert!(
        matches!(
            calls(&actions)[..],
            [Call::UpdateResources { running: false, .. }]
        ),
        "{actions:?}"
    );
    let update = only_call(&actions, |c| matches!(c, Call::UpdateResources { .. }));
    // A start asked meanwhile waits for it: its run gets the new spec.
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    assert!(calls(&actions).is_empty(), "{actions:?}");
    let actions = d.ok(update);
    only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    assert_eq!(memory_of(&d, "c1"), Some(32 << 20));
}

#[test]
fn a_refused_update_records_nothing_and_says_why() {
    let mut d = Driver::new();
    d.connect(vec![]);
    d.run("c1", ContainerConfig::default(), 10);
    let (req, actions) = d.command(Command::UpdateResources {
        id: cid("c1"),
        update: memory(1),
    });
    let op = only_call(&actions, |c| matches!(c, Call::UpdateResources { .. }));
    let actions = d.fail(op, FailureKind::Invalid);
    assert!(
        matches!(&actions[..], [Action::Answer(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Invalid && e.message.contains("Cannot update")),
        "{actions:?}"
    );
    assert_eq!(memory_of(&d, "c1"), None);

    d.feed(Input::Connection(ConnectionFact::Unreachable(
        "down".into(),
    )));
    let (req, actions) = d.command(Command::UpdateResources {
        id: cid("c1"),
        update: memory(64),
    });
    assert!(matches!(&actions[..], [Action::Answer(r, Answer::Error(e))]
        if *r == req && e.kind == ErrorKind::Unavailable));
    assert_eq!(d.core.requests_pending(), 0);
}

#[test]
fn a_task_gone_from_a_relist_during_an_update_is_looked_at_again_after_it() {
    // c1's shim dies while its update is in flight; a relist (asked for by
    // another container's doubt) does not list the task, but cannot settle
    // c1 with the call open. Once the update is answered, the core looks
    // again and learns the task is gone (found by the properties: "c1
    // should not run").
    let mut d = Driver::new();
    d.connect(vec![]);
    d.run("c1", ContainerConfig::default(), 10);
    d.run("c2", ContainerConfig::default(), 20);
    let (_, actions) = d.command(Command::UpdateResources {
        id: cid("c1"),
        update: memory(64),
    });
    let update = only_call(&actions, |c| matches!(c, Call::UpdateResources { .. }));
    let (_, actions) = d.command(Command::Kill {
        id: cid("c2"),
        signal: Signal::try_from(1).expect("SIGHUP"),
    });
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    let actions = d.fail(kill, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let c2 = TaskInfo {
        container: cid("c2"),
        pid: 20,
        status: TaskStatus::Running,
        exit_status: 0,
        exited_at: None,
        oom_kills: None,
    };
    d.relist(relist, vec![c2.clone()]);
    let actions = d.fail(update, FailureKind::NotFound);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    d.relist(relist, vec![c2]);
    let status = d.core.container(&cid("c1")).map(|c| c.status);
    assert_eq!(status, Some(Status::Exited));
}

#[test]
fn an_update_that_finds_no_task_asks_for_a_relist() {
    // c1's exit event was lost: the view still runs it. Its update finds
    // no task; the core looks at once instead of showing it running until
    // the periodic relist (found by the properties: a refused call not
    // followed by a relist).
    let mut d = Driver::new();
    d.connect(vec![]);
    d.run("c1", ContainerConfig::default(), 10);
    let (req, actions) = d.command(Command::UpdateResources {
        id: cid("c1"),
        update: memory(64),
    });
    let update = only_call(&actions, |c| matches!(c, Call::UpdateResources { .. }));
    let actions = d.fail(update, FailureKind::NotFound);
    assert!(
        matches!(&answers(&actions)[..], [(r, Answer::Error(_))] if *r == req),
        "{actions:?}"
    );
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    d.relist(relist, vec![]);
    let status = d.core.container(&cid("c1")).map(|c| c.status);
    assert_eq!(status, Some(Status::Exited));
}
