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
    let member = ContainerConfig {
        pod: Some(pod_member(PodRole::Container {
            sandbox: "s1".to_owned(),
            name: "app".to_owned(),
        })),
        ..Default::default()
    };
    d.run("c1", member, 11);
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
