//! The calls of the core's snapshot holds and execs, against a real
//! containerd: a commit's read of the changes, a copy's mount and unmount
//! (idempotent, and gone with the container), an exec started, looked at
//! and deleted by the core's calls.

mod common;

use common::*;
use holdfast_core::{Call, Done, ExecSpec, FailureKind, Input, Signal};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_containers_snapshot_is_mounted_once_unmounted_and_never_left_behind() {
    let mut env = Env::start().await;
    env.subscribe().await;
    let id = cid("copied");
    let config = busybox(&["sh", "-c", "echo changed > /made-here"]);
    assert_eq!(
        env.call(Call::CreateContainer {
            id: id.clone(),
            config: config.into(),
        })
        .await,
        Ok(Done::Ok)
    );
    let dir = env.adapter.rootfs_dir(&id);
    for _ in 0..2 {
        // Idempotent: a mount issued again after a crash finds it there.
        assert_eq!(
            env.call(Call::MountRootfs { id: id.clone() }).await,
            Ok(Done::Ok)
        );
        assert!(
            dir.join("bin/busybox").exists(),
            "the image's files at {}",
            dir.display()
        );
    }
    for _ in 0..2 {
        assert_eq!(
            env.call(Call::UnmountRootfs { id: id.clone() }).await,
            Ok(Done::Ok)
        );
    }
    assert!(!dir.exists(), "{} left behind", dir.display());
    // A mount a crash left is no obstacle to the container's delete.
    assert_eq!(
        env.call(Call::MountRootfs { id: id.clone() }).await,
        Ok(Done::Ok)
    );
    assert_eq!(
        env.call(Call::DeleteContainer { id: id.clone() }).await,
        Ok(Done::Ok),
        "{}",
        failure_report(&env.ctrd)
    );
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commits_read_writes_what_the_container_changed_as_a_layer() {
    let mut env = Env::start().await;
    env.subscribe().await;
    let id = cid("committed");
    env.run(
        &id,
        &["sh", "-c", "echo changed > /made-here; rm /etc/group"],
    )
    .await;
    assert_eq!(env.exit_of(&id).await, 0);
    let layer = env.dir.path().join("layer.tar");
    let read = Call::ReadChanges {
        id: id.clone(),
        layer: layer.to_string_lossy().into_owned(),
    };
    assert_eq!(env.call(read).await, Ok(Done::Ok));
    let mut archive = tar::Archive::new(std::fs::File::open(&layer).expect("the layer"));
    let mut names: Vec<String> = archive
        .entries()
        .expect("entries")
        .map(|e| {
            e.expect("entry")
                .path()
                .expect("path")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    assert!(names.contains(&"made-here".to_owned()), "{names:?}");
    assert!(names.contains(&"etc/.wh.group".to_owned()), "{names:?}");
    env.remove(&id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_is_started_looked_at_and_deleted_by_the_cores_calls() {
    let mut env = Env::start().await;
    env.subscribe().await;
    let id = cid("execd");
    env.run(&id, &["sleep", "1000"]).await;
    let spec = ExecSpec {
        cmd: vec!["sh".into(), "-c".into(), "exit 4".into()],
        ..ExecSpec::default()
    };
    let started = env
        .call(Call::StartExec {
            id: id.clone(),
            exec_id: "e1".into(),
            spec: spec.into(),
            stdin: false,
        })
        .await;
    let Ok(Done::ExecStarted { pid }) = started else {
        panic!("exec start: {started:?}");
    };
    // Its exit event may come before the start's answer (seen meanwhile).
    let exited = |i: &Input| matches!(i, Input::Event(holdfast_core::ContainerdEvent::TaskExit { exec_id, .. }) if exec_id == "e1");
    if !env.seen.iter().any(exited) {
        env.wait_for(exited).await;
    }
    // Its exit is containerd's to tell, too, until the exec is deleted.
    let state = Call::ExecState {
        id: id.clone(),
        exec_id: "e1".into(),
    };
    assert_eq!(
        env.call(state.clone()).await,
        Ok(Done::Process {
            pid,
            exit_code: Some(4)
        })
    );
    let delete = Call::DeleteExec {
        id: id.clone(),
        exec_id: "e1".into(),
    };
    assert_eq!(env.call(delete).await, Ok(Done::Ok));
    assert_eq!(
        env.call(state).await.map_err(|f| f.kind),
        Err(FailureKind::NotFound)
    );
    let kill = Call::Kill {
        id: id.clone(),
        signal: Signal::SIGKILL,
        all: false,
    };
    assert_eq!(env.call(kill).await, Ok(Done::Ok));
    env.exit_of(&id).await;
    env.remove(&id).await;
}
