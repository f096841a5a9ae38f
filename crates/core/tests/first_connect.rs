//! The first connection: a create asked while holdfastd is still reaching
//! containerd for the first time (the API serves before that) waits for it
//! instead of being refused, within its answer bound; a create during a
//! later outage is refused at once, as nothing is known then of when
//! containerd comes back.

mod support;

use holdfast_core::*;
use support::*;

fn create(d: &mut Driver, id: &str) -> (RequestId, Vec<Action>) {
    d.command(Command::Create {
        id: cid(id),
        name: format!("n-{id}"),
        config: ContainerConfig::default().into(),
    })
}

#[test]
fn a_create_before_the_first_connection_waits_for_it() {
    let mut d = Driver::new();
    let (req, actions) = create(&mut d, "c1");
    assert!(actions.is_empty(), "held, not refused: {actions:?}");
    let actions = d.connect(vec![]);
    let op = only_call(&actions, |c| matches!(c, Call::CreateContainer { .. }));
    assert_eq!(answers(&d.ok(op)), vec![(req, Answer::Done)]);
}

#[test]
fn a_create_held_past_its_bound_is_refused_and_leaves_nothing() {
    let mut d = Driver::new();
    let (req, _) = create(&mut d, "c1");
    // containerd never answers: the reconnect attempts and the bound run.
    let mut answered = Vec::new();
    while answered.is_empty() {
        let (_, actions) = d.fire_timer();
        for (op, call) in actions.iter().filter_map(|a| match a {
            Action::Call { op, call } => Some((*op, call.clone())),
            _ => None,
        }) {
            assert!(matches!(call, Call::Subscribe), "{call:?}");
            d.fail(op, FailureKind::Unavailable);
        }
        answered = answers(&actions);
    }
    assert!(
        matches!(answered.as_slice(), [(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Unavailable),
        "{answered:?}"
    );
    assert!(d.core.containers().next().is_none());
}

#[test]
fn a_create_during_a_later_outage_is_refused_at_once() {
    let mut d = Driver::new();
    d.connect(vec![]);
    d.feed(Input::Connection(ConnectionFact::Unreachable(
        "gone".into(),
    )));
    let (req, actions) = create(&mut d, "c1");
    assert!(
        matches!(actions.as_slice(), [Action::Answer(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Unavailable),
        "{actions:?}"
    );
}

#[test]
fn a_create_that_waited_for_the_first_connection_keeps_the_bound_it_was_asked_with() {
    let mut d = Driver::new();
    let bound = CoreConfig::default().request_answer_bound;
    let asked_at = d.now.at;
    let (req, _) = create(&mut d, "c1");
    // containerd is reached 20 s later; the create's call is never answered.
    d.advance(std::time::Duration::from_secs(20));
    let actions = d.connect(vec![]);
    only_call(&actions, |c| matches!(c, Call::CreateContainer { .. }));
    let answer_due = d
        .core
        .poll_timeout()
        .filter(|(_, kind)| *kind == TimerKind::AnswerBound(req))
        .map(|(at, _)| at);
    assert_eq!(answer_due, Some(asked_at + bound), "counted from the ask");
    // Its call still with containerd then, it is given as long again as a
    // create's calls may take, then told it failed.
    let (_, actions) = d.fire_timer();
    assert_eq!(answers(&actions), vec![], "{actions:?}");
    let run_on = CoreConfig::default().create_run_on;
    let answer_due = d
        .core
        .timers()
        .find(|(_, kind)| **kind == TimerKind::AnswerBound(req))
        .map(|(at, _)| at);
    assert_eq!(answer_due, Some(asked_at + bound + run_on));
    let actions = d.fire_until(TimerKind::AnswerBound(req));
    assert!(
        matches!(answers(&actions).as_slice(), [(r, Answer::Error(_))] if *r == req),
        "{actions:?}"
    );
}
