//! Exits: handler tests, one input each, with the exact actions it
//! produces. An exit is recorded once, from evidence of the init process
//! of the current run: never from an exec, a stale pid or an earlier run.

mod support;

use holdfast_core::*;
use std::time::Duration;
use support::*;

#[test]
fn exit_of_the_init_process_is_recorded_once_and_the_task_deleted() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let actions = d.exit("c1", 42, 3);
    let at = d.now.wall;
    let rec = created_record(&d, "c1");
    assert_eq!(
        rec.exit,
        Some(ExitRecord {
            run: 1,
            exit_code: 3,
            finished_at: at,
            oom_killed: false,
            error: None
        })
    );
    // Persisted first: a crash before the event may lose the event, never
    // record the exit twice.
    assert_eq!(
        actions,
        vec![
            Action::Persist(rec.clone()),
            Action::Publish(UserEvent {
                container: cid("c1"),
                kind: UserEventKind::Die { exit_code: 3 },
                at
            }),
            Action::Call {
                op: OpId(6),
                call: Call::DeleteTask { id: cid("c1") }
            },
        ]
    );
    // A duplicate, later and different: changes nothing.
    d.advance(Duration::from_secs(5));
    assert_eq!(d.exit("c1", 42, 137), vec![]);
    assert_eq!(created_record(&d, "c1").exit, rec.exit);
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Exited)
    );
}

#[test]
fn exec_exits_and_stale_pids_never_change_the_container() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let actions = d.feed(Input::Event(ContainerdEvent::TaskExit {
        container: cid("c1"),
        exec_id: "exec-1".into(),
        pid: 77,
        exit_status: 1,
        exited_at: d.now.wall,
        oom_kills: None,
    }));
    assert_eq!(
        events(&actions),
        vec![UserEventKind::ExecDie {
            exec_id: "exec-1".into(),
            exit_code: 1
        }]
    );
    assert_eq!(actions.len(), 1);
    assert_eq!(d.exit("c1", 41, 0), vec![], "a stale pid");
    assert_eq!(d.exit("other", 42, 0), vec![], "an unknown container");
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Running)
    );
}

#[test]
fn an_exit_from_before_the_run_began_is_an_earlier_runs_whose_pid_was_reused() {
    let config = ContainerConfig {
        restart_policy: RestartPolicy::Always,
        ..Default::default()
    };
    let mut d = ready_with_running("c1", config, 42);
    let first_exit_at = d.now.wall;
    let delete = only_call(&d.exit("c1", 42, 1), |c| {
        matches!(c, Call::DeleteTask { .. })
    });
    d.ok(delete);
    let (_, actions) = d.fire_timer();
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    // The kernel hands the new run the same pid.
    let start = only_call(
        &d.feed(Input::ActionResult(
            create,
            Ok(Done::TaskCreated { pid: 42 }),
        )),
        |c| matches!(c, Call::StartTask { .. }),
    );
    d.ok(start);
    // The first run's exit, reported again late (another status): stale.
    let stale = Input::Event(ContainerdEvent::TaskExit {
        container: cid("c1"),
        exec_id: "c1".into(),
        pid: 42,
        exit_status: 137,
        exited_at: first_exit_at,
        oom_kills: None,
    });
    assert_eq!(d.feed(stale), vec![]);
    let view = d.core.container(&cid("c1")).expect("exists");
    assert_eq!((view.status, view.current_exit()), (Status::Running, None));
}
