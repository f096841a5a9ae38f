//! What the CRI made is kubelet's: handler tests of the core's rule on the
//! two APIs. The Docker API sees a pod's containers, waits on them and
//! execs into them, and every change it asks is refused (409, naming the
//! CRI and the pod) with nothing done; the CRI finds no container it did
//! not make; each API creates only its own.

mod support;

use holdfast_core::*;
use support::*;

fn pod_member(role: PodRole) -> PodMember {
    PodMember {
        role,
        pod_name: "web".to_owned(),
        pod_uid: "u1".to_owned(),
        pod_namespace: "default".to_owned(),
        attempt: 0,
        annotations: Default::default(),
        log_path: None,
        image_ref: None,
    }
}

/// A running sandbox `s1` (pid 10) and a running container `c1` of it
/// (pid 11), made through the CRI, and a Docker container `d1` (pid 12).
fn pod_and_docker_container() -> Driver {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d.api = Api::Cri;
    let sandbox = ContainerConfig {
        pod: Some(pod_member(PodRole::Sandbox)),
        ..Default::default()
    };
    d.run("s1", sandbox, 10);
    d.run("c1", member_config("s1", "app"), 11);
    d.api = Api::Docker;
    d.run("d1", ContainerConfig::default(), 12);
    d
}

fn answered(actions: &[Action], req: RequestId) -> &Answer {
    match actions {
        [Action::Answer(r, answer)] if *r == req => answer,
        other => panic!("want only the answer to {req}: {other:?}"),
    }
}

#[test]
fn the_docker_api_changes_nothing_the_cri_made_and_is_told_why() {
    let mut d = pod_and_docker_container();
    let before = d.core.container(&cid("c1")).map(|c| c.record.clone());
    let changes = |id: &str| {
        let id = cid(id);
        vec![
            Command::Start { id: id.clone() },
            Command::Stop {
                id: id.clone(),
                timeout: None,
                signal: None,
            },
            Command::Kill {
                id: id.clone(),
                signal: Signal::SIGKILL,
            },
            Command::Restart {
                id: id.clone(),
                timeout: None,
                signal: None,
            },
            Command::Remove {
                id: id.clone(),
                force: true,
                volumes: true,
            },
            Command::Rename {
                id: id.clone(),
                name: "other".to_owned(),
            },
            Command::UpdateRestartPolicy {
                id: id.clone(),
                policy: RestartPolicy::Always,
            },
            Command::Pause { id: id.clone() },
            Command::Unpause { id: id.clone() },
            Command::UpdateResources {
                id: id.clone(),
                update: ResourceUpdate::default(),
            },
            Command::Connect {
                id: id.clone(),
                network: "app".to_owned(),
                aliases: Vec::new(),
                ip: None,
            },
            Command::Disconnect {
                id,
                network: "app".to_owned(),
            },
        ]
    };
    for id in ["s1", "c1"] {
        for command in changes(id) {
            let what = format!("{command:?}");
            assert!(command.changes_container(), "{what}");
            let (req, actions) = d.command(command);
            match answered(&actions, req) {
                Answer::Error(e) => {
                    assert_eq!(e.kind, ErrorKind::Conflict, "{what}: {e:?}");
                    assert!(
                        e.message.contains("CRI") && e.message.contains("default/web"),
                        "{what}: {e:?}"
                    );
                }
                other => panic!("{what} was not refused: {other:?}"),
            }
        }
    }
    let after = d.core.container(&cid("c1")).map(|c| c.record.clone());
    assert_eq!(before, after, "a refused command changed the record");

    // Waits and execs are not changes: they go on as for any container.
    let (req, actions) = d.command(Command::Wait {
        id: cid("c1"),
        condition: WaitCondition::NotRunning,
    });
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::Answer(r, _) if *r == req)),
        "a wait on a running pod container waits: {actions:?}"
    );
    let (req, actions) = d.command(Command::CreateExec {
        id: cid("c1"),
        exec_id: "e1".to_owned(),
        spec: ExecSpec::default().into(),
    });
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Answer(r, Answer::Done) if *r == req)),
        "docker exec into a pod's container: {actions:?}"
    );
}

#[test]
fn the_cri_finds_only_what_it_made_and_changes_it() {
    let mut d = pod_and_docker_container();
    d.api = Api::Cri;
    let (req, actions) = d.command(Command::Stop {
        id: cid("d1"),
        timeout: None,
        signal: None,
    });
    assert!(
        matches!(answered(&actions, req), Answer::Error(e) if e.kind == ErrorKind::NotFound),
        "{actions:?}"
    );
    // Its own: the stop goes out as for any container.
    let (_, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    only_call(&actions, |c| matches!(c, Call::Kill { .. }));
}

#[test]
fn each_api_creates_only_its_own() {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    let pod = ContainerConfig {
        pod: Some(pod_member(PodRole::Sandbox)),
        ..Default::default()
    };
    let (req, actions) = d.command(Command::Create {
        id: cid("x1"),
        name: "x1".to_owned(),
        config: pod.into(),
    });
    assert!(
        matches!(answered(&actions, req), Answer::Error(e) if e.kind == ErrorKind::Invalid),
        "{actions:?}"
    );
    d.api = Api::Cri;
    let (req, actions) = d.command(Command::Create {
        id: cid("x2"),
        name: "x2".to_owned(),
        config: ContainerConfig::default().into(),
    });
    assert!(
        matches!(answered(&actions, req), Answer::Error(e) if e.kind == ErrorKind::Invalid),
        "{actions:?}"
    );
    assert!(d.core.container(&cid("x1")).is_none() && d.core.container(&cid("x2")).is_none());
}

fn member_config(sandbox: &str, name: &str) -> ContainerConfig {
    ContainerConfig {
        pod: Some(pod_member(PodRole::Container {
            sandbox: sandbox.to_owned(),
            name: name.to_owned(),
        })),
        ..Default::default()
    }
}

/// The calls in `actions` that kill `id`.
fn kills_of(actions: &[Action], id: &str) -> usize {
    actions
        .iter()
        .filter(|a| matches!(a, Action::Call { call: Call::Kill { id: k, .. }, .. } if k.as_str() == id))
        .count()
}

#[test]
fn a_pods_stop_stops_its_containers_in_the_same_step_and_answers_only_its_caller() {
    let mut d = pod_and_docker_container();
    d.api = Api::Cri;
    let (req, actions) = d.command(Command::Stop {
        id: cid("s1"),
        timeout: Some(std::time::Duration::ZERO),
        signal: None,
    });
    // Both recorded (persisted with their stop intent) and both signalled.
    for id in ["s1", "c1"] {
        assert!(
            actions.iter().any(|a| matches!(a, Action::Persist(r)
                if r.id.as_str() == id && r.intents.stop.is_some())),
            "{id}'s stop is not recorded: {actions:#?}"
        );
        assert_eq!(kills_of(&actions, id), 1, "{id}: {actions:#?}");
    }
    // The Docker container is not the pod's.
    assert_eq!(kills_of(&actions, "d1"), 0);
    // The member's stop is the core's own request: nobody is answered
    // but the caller, and the caller only once the sandbox stopped.
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Answer(..))),
        "{actions:#?}"
    );
    d.exit("c1", 11, 137);
    let actions = d.exit("s1", 10, 137);
    let answers: Vec<&Action> = actions
        .iter()
        .filter(|a| matches!(a, Action::Answer(..)))
        .collect();
    assert!(
        matches!(answers[..], [Action::Answer(r, Answer::Done)] if *r == req),
        "{actions:#?}"
    );
}

#[test]
fn a_pods_removal_removes_its_containers_and_a_refused_one_removes_nothing() {
    let mut d = pod_and_docker_container();
    d.api = Api::Cri;
    // Not forced: a running sandbox is refused, and its containers stay.
    let (req, actions) = d.command(Command::Remove {
        id: cid("s1"),
        force: false,
        volumes: false,
    });
    assert!(
        matches!(answered(&actions, req), Answer::Error(e) if e.kind == ErrorKind::Conflict),
        "{actions:?}"
    );
    let member = d
        .core
        .container(&cid("c1"))
        .map(|c| c.record.intents.remove);
    assert_eq!(member, Some(false));
    // Forced (as the CRI sends it): both marked for removal at once.
    let (_, actions) = d.command(Command::Remove {
        id: cid("s1"),
        force: true,
        volumes: true,
    });
    for id in ["s1", "c1"] {
        assert!(
            actions.iter().any(|a| matches!(a, Action::Persist(r)
                if r.id.as_str() == id && r.intents.remove)),
            "{id}'s removal is not recorded: {actions:#?}"
        );
    }
    assert!(
        d.core
            .container(&cid("d1"))
            .is_some_and(|c| !c.record.intents.remove),
        "the Docker container is not the pod's"
    );
}

#[test]
fn a_pods_container_is_made_only_in_a_running_sandbox() {
    let mut d = pod_and_docker_container();
    d.api = Api::Cri;
    // A sandbox that is not one, one that does not exist.
    for (sandbox, what) in [("d1", "a Docker container"), ("nope", "no container")] {
        let (req, actions) = d.command(Command::Create {
            id: cid("c9"),
            name: "n-c9".to_owned(),
            config: member_config(sandbox, "x").into(),
        });
        assert!(
            matches!(answered(&actions, req), Answer::Error(e)
                if e.kind == ErrorKind::Conflict && e.message.contains("not ready")),
            "{what}: {actions:?}"
        );
    }
    // A stopping sandbox is not ready either.
    d.command(Command::Stop {
        id: cid("s1"),
        timeout: Some(std::time::Duration::from_secs(30)),
        signal: None,
    });
    let (req, actions) = d.command(Command::Create {
        id: cid("c9"),
        name: "n-c9".to_owned(),
        config: member_config("s1", "x").into(),
    });
    assert!(
        matches!(answered(&actions, req), Answer::Error(e) if e.kind == ErrorKind::Conflict),
        "{actions:?}"
    );
    assert!(d.core.container(&cid("c9")).is_none());
}

fn sandbox_config() -> ContainerConfig {
    ContainerConfig {
        pod: Some(pod_member(PodRole::Sandbox)),
        ..Default::default()
    }
}

/// A sandbox `s1` created through the CRI: the create's request and
/// actions, and the actions once containerd has the container.
fn sandbox_created() -> (Driver, RequestId, Vec<Action>, Vec<Action>) {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d.api = Api::Cri;
    let (created, asked) = d.command(Command::Create {
        id: cid("s1"),
        name: "s1".to_owned(),
        config: sandbox_config().into(),
    });
    let op = only_call(&asked, |c| matches!(c, Call::CreateContainer { .. }));
    let made = d.ok(op);
    (d, created, asked, made)
}

/// kubelet's RunPodSandbox is a create and a start: the sandbox's create
/// records both, and its start follows at once; the CRI's start then only
/// waits for it.
#[test]
fn a_sandboxs_create_is_its_start() {
    let (mut d, created, asked, actions) = sandbox_created();
    assert!(persisted(&asked).intents.start, "{asked:?}");
    assert!(
        answers(&actions).contains(&(created, Answer::Done)),
        "{actions:?}"
    );
    let task = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let (start, actions) = d.command(Command::Start { id: cid("s1") });
    assert!(calls(&actions).is_empty(), "one start only: {actions:?}");
    let actions = d.feed(Input::ActionResult(task, Ok(Done::TaskCreated { pid: 10 })));
    let op = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    let actions = d.ok(op);
    assert!(
        answers(&actions).contains(&(start, Answer::Done)),
        "{actions:?}"
    );
    assert_eq!(
        d.core.container(&cid("s1")).map(|c| c.status),
        Some(Status::Running)
    );
}

/// holdfastd killed once the sandbox's create is done and before its
/// start is sent (RunPodSandbox's answer never came): the next holdfastd
/// starts it; no sandbox is left made and not started.
#[test]
fn a_sandbox_made_before_a_crash_is_started_by_the_next_holdfastd() {
    let (_, _, _, actions) = sandbox_created();
    let rec = persisted(&actions);
    assert_eq!(rec.presence, Presence::Created);
    let mut d = Driver::new();
    d.feed(Input::Restore(vec![rec].into()));
    let actions = d.connect(vec![]);
    only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
}

/// A Docker container's create is not its start.
#[test]
fn a_docker_containers_create_starts_nothing() {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    let actions = d.create("c1", ContainerConfig::default());
    assert!(calls(&actions).is_empty(), "{actions:?}");
    assert!(!created_record(&d, "c1").intents.start);
}

/// The CRI's start after a sandbox's create, arriving once the task is
/// created and before it is started, waits for the start: RunPodSandbox is
/// not answered before the pause runs.
#[test]
fn a_start_between_a_sandboxs_task_create_and_start_waits_for_the_start() {
    let (mut d, _, _, actions) = sandbox_created();
    let task = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(task, Ok(Done::TaskCreated { pid: 10 })));
    let start_task = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    let (start, actions) = d.command(Command::Start { id: cid("s1") });
    assert!(
        answers(&actions).is_empty(),
        "answered before the start: {actions:?}"
    );
    let actions = d.ok(start_task);
    assert!(
        answers(&actions).contains(&(start, Answer::Done)),
        "{actions:?}"
    );
}
