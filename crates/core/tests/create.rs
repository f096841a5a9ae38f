//! `docker create`, names (resolve, rename): handler tests, one input
//! each, with the exact actions it produces. A create is persisted before
//! it is called, and one that cannot complete leaves nothing behind.

mod support;

use holdfast_core::*;
use support::*;

#[test]
fn create_persists_before_calling_and_answers_when_created() {
    let mut d = Driver::new();
    d.connect(vec![]);
    let config = ContainerConfig {
        image: "busybox".into(),
        ..Default::default()
    };
    let (req, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "web".into(),
        config: config.clone().into(),
    });
    let rec = created_record(&d, "c1");
    assert_eq!(rec.presence, Presence::Creating);
    assert_eq!(
        actions,
        vec![
            Action::Persist(rec.clone()),
            Action::Call {
                op: OpId(3),
                call: Call::CreateContainer {
                    id: cid("c1"),
                    config: config.into()
                }
            },
        ]
    );
    let actions = d.ok(OpId(3));
    let rec = created_record(&d, "c1");
    assert_eq!(rec.presence, Presence::Created);
    assert_eq!(
        actions,
        vec![
            Action::Persist(rec),
            Action::Publish(UserEvent {
                container: cid("c1"),
                kind: UserEventKind::Create,
                at: d.now.wall
            }),
            Action::Answer(req, Answer::Done),
        ]
    );
    assert_eq!(d.core.resolve("web"), Ok(cid("c1")));
    assert_eq!(d.core.resolve("/web"), Ok(cid("c1")));
}

#[test]
fn create_while_unreachable_leaves_nothing() {
    let mut d = Driver::new();
    d.connect(vec![]);
    d.feed(Input::Connection(ConnectionFact::Unreachable(
        "gone".into(),
    )));
    let (req, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "web".into(),
        config: Default::default(),
    });
    assert!(
        matches!(&actions[..], [Action::Answer(r, Answer::Error(e))] if *r == req && e.kind == ErrorKind::Unavailable)
    );
    assert!(d.core.container(&cid("c1")).is_none());
}

#[test]
fn failed_create_is_rolled_back_and_frees_the_name() {
    let mut d = Driver::new();
    d.connect(vec![]);
    let (req, _) = d.command(Command::Create {
        id: cid("c1"),
        name: "web".into(),
        config: Default::default(),
    });
    let actions = d.feed(Input::ActionResult(
        OpId(3),
        Err(Failure::new(
            FailureKind::NotFound,
            "No such image: nope:latest",
        )),
    ));
    assert!(matches!(&actions[0], Action::Persist(r) if r.presence == Presence::Discarding));
    assert_eq!(
        actions[1..],
        [
            Action::Answer(
                req,
                Answer::Error(RequestError::new(
                    ErrorKind::NotFound,
                    "No such image: nope:latest"
                ))
            ),
            Action::Call {
                op: OpId(4),
                call: Call::DeleteContainer { id: cid("c1") }
            },
        ]
    );
    assert!(
        d.core.container(&cid("c1")).is_none(),
        "a discarded create is invisible"
    );
    assert!(d.core.resolve("web").is_err(), "and its name is free again");
    assert_eq!(
        d.fail(OpId(4), FailureKind::NotFound),
        vec![Action::Unpersist(cid("c1"))]
    );
}

#[test]
fn resolve_by_id_name_and_unique_prefix() {
    let mut d = Driver::new();
    d.connect(vec![]);
    for (id, name) in [("abc123", "one"), ("abd456", "two")] {
        let (_, actions) = d.command(Command::Create {
            id: cid(id),
            name: name.into(),
            config: Default::default(),
        });
        d.ok(only_call(&actions, |c| {
            matches!(c, Call::CreateContainer { .. })
        }));
    }
    assert_eq!(d.core.resolve("abc123"), Ok(cid("abc123")));
    assert_eq!(d.core.resolve("two"), Ok(cid("abd456")));
    assert_eq!(d.core.resolve("abc"), Ok(cid("abc123")));
    assert_eq!(
        d.core.resolve("ab").map_err(|e| e.kind),
        Err(ErrorKind::NotFound)
    );
    assert_eq!(
        d.core.resolve("zzz").map_err(|e| e.kind),
        Err(ErrorKind::NotFound)
    );
}

fn create_in_flight(d: &mut Driver) -> (RequestId, OpId) {
    d.connect(vec![]);
    let (req, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "web".into(),
        config: Default::default(),
    });
    (
        req,
        only_call(&actions, |c| matches!(c, Call::CreateContainer { .. })),
    )
}

#[test]
fn a_create_still_with_containerd_at_its_bound_waits_for_its_outcome() {
    // The loaded-containerd case of `docker run`: the create's calls run
    // on past the call deadline; failed at the bound, it would be rolled
    // back where it was about to succeed.
    let mut d = Driver::new();
    let (req, create) = create_in_flight(&mut d);
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::AnswerBound(req));
    assert_eq!(answers(&actions), vec![], "{actions:?}");
    let bound = d
        .core
        .timers()
        .find(|(_, k)| **k == TimerKind::AnswerBound(req))
        .map(|(at, _)| at);
    assert_eq!(
        bound,
        Some(d.now.at + CoreConfig::default().create_run_on),
        "given as long again as its calls may take"
    );
    let actions = d.ok(create);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert_eq!(d.core.resolve("web"), Ok(cid("c1")));
    assert!(
        d.core
            .timers()
            .all(|(_, k)| !matches!(k, TimerKind::AnswerBound(_))),
        "the answered create leaves no bound behind"
    );
}

#[test]
fn a_create_past_its_second_bound_is_rolled_back_even_if_it_succeeds_later() {
    let mut d = Driver::new();
    let (req, create) = create_in_flight(&mut d);
    let (_, actions) = d.fire_timer();
    assert_eq!(answers(&actions), vec![]);
    // Still no answer once its calls' own deadline has passed: wedged.
    let actions = d.fire_until(TimerKind::AnswerBound(req));
    assert!(
        matches!(&answers(&actions)[..], [(r, Answer::Error(e))] if *r == req && e.kind == ErrorKind::Internal),
        "{actions:?}"
    );
    assert!(
        d.core.resolve("web").is_err(),
        "the user was told it failed"
    );
    let actions = d.ok(create);
    assert_eq!(
        events(&actions),
        vec![],
        "no create event for a container the user never got"
    );
    assert_eq!(
        calls(&actions),
        vec![Call::DeleteContainer { id: cid("c1") }]
    );
}

#[test]
fn a_create_whose_containerd_is_away_at_its_bound_is_rolled_back_then() {
    let mut d = Driver::new();
    let (req, _create) = create_in_flight(&mut d);
    d.feed(Input::Connection(ConnectionFact::Unreachable(
        "gone".into(),
    )));
    // (Reconnect attempts fire first; none gets through.)
    let actions = d.fire_until(TimerKind::AnswerBound(req));
    assert!(
        matches!(&answers(&actions)[..], [(r, Answer::Error(e))] if *r == req && e.kind == ErrorKind::Unavailable),
        "{actions:?}"
    );
    assert!(d.core.resolve("web").is_err());
}

#[test]
fn rename_moves_the_name_and_is_recorded() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 10);
    d.run("c2", ContainerConfig::default(), 20);
    let (req, actions) = d.command(Command::Rename {
        id: cid("c1"),
        name: "web".into(),
    });
    assert!(matches!(&actions[0], Action::Persist(r) if r.name == "web" && r.id == cid("c1")));
    assert_eq!(
        actions[1..],
        [
            Action::Publish(UserEvent {
                container: cid("c1"),
                kind: UserEventKind::Rename {
                    old_name: "n-c1".into()
                },
                at: d.now.wall,
            }),
            Action::Answer(req, Answer::Done),
        ]
    );
    assert_eq!(d.core.resolve("web"), Ok(cid("c1")));
    assert!(d.core.resolve("n-c1").is_err(), "the old name is free");

    // Taken, the same, or invalid: refused, nothing recorded.
    for (name, kind) in [
        ("n-c2", ErrorKind::Conflict),
        ("web", ErrorKind::Invalid),
        ("bad name", ErrorKind::Invalid),
    ] {
        let (req, actions) = d.command(Command::Rename {
            id: cid("c1"),
            name: name.into(),
        });
        assert!(
            matches!(&actions[..], [Action::Answer(r, Answer::Error(e))] if *r == req && e.kind == kind),
            "{name}: {actions:?}"
        );
    }
    // The old name can be taken by a new container.
    d.run("c3", ContainerConfig::default(), 30);
    let (_, actions) = d.command(Command::Rename {
        id: cid("c3"),
        name: "n-c1".into(),
    });
    assert!(matches!(
        actions.last(),
        Some(Action::Answer(_, Answer::Done))
    ));
}
