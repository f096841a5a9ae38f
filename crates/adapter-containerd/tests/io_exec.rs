//! Output through the binary:// logger, kept apart by stream, and exec of an
//! extra process reported without touching the container.

mod common;

use common::{Env, busybox, cid};
use holdfast_adapter_containerd::ExecRequest;
use holdfast_adapter_containerd::logger::{LogRecord, LogStream, read_log};
use holdfast_core::{
    Call, ContainerdEvent, Done, FailureKind, Input, RelistPart, Signal, TaskStatus,
};
use std::path::Path;
use std::time::Duration;

/// The logger finishes writing shortly after the process exits.
async fn wait_for_records(path: &Path, count: usize) -> Vec<LogRecord> {
    let deadline = tokio::time::Instant::now() + common::WAIT;
    loop {
        let records = read_log(path).unwrap_or_default();
        if records.len() >= count || tokio::time::Instant::now() > deadline {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn lines(records: &[LogRecord], stream: LogStream) -> Vec<&str> {
    records
        .iter()
        .filter(|r| r.stream == stream)
        .map(|r| r.log.as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_and_stderr_are_logged_apart() {
    let mut env = Env::start().await;
    env.subscribe().await;
    let id = cid("talker");
    env.run(
        &id,
        &[
            "sh",
            "-c",
            "echo to-out; echo to-err >&2; echo more-out; printf partial",
        ],
    )
    .await;
    assert_eq!(env.exit_of(&id).await, 0);
    let records = wait_for_records(&env.adapter.log_path(&id), 3).await;
    assert_eq!(
        lines(&records, LogStream::Stdout),
        vec!["to-out\n", "more-out\n"],
        "{records:?}"
    );
    assert_eq!(
        lines(&records, LogStream::Stderr),
        vec!["to-err\n"],
        "{records:?}"
    );
    assert!(
        records
            .iter()
            .all(|r| r.time.ends_with('Z') && r.time.len() == 30),
        "{records:?}"
    );
    // The shim holds the pipes open until the task is deleted: only then does
    // the logger see EOF and write the unterminated last line.
    env.remove(&id).await;
    let records = wait_for_records(&env.adapter.log_path(&id), 4).await;
    assert_eq!(
        lines(&records, LogStream::Stdout),
        vec!["to-out\n", "more-out\n", "partial"],
        "{records:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_exit_is_reported_apart_from_the_container() {
    let mut env = Env::start().await;
    env.subscribe().await;
    let id = cid("host");
    let init_pid = env.run(&id, &["sleep", "1000"]).await;

    let request = ExecRequest {
        exec_id: "e1".into(),
        args: vec![
            "sh".into(),
            "-c".into(),
            "echo $FOO; echo oops >&2; exit 5".into(),
        ],
        env: vec!["FOO=from-exec".into()],
        ..Default::default()
    };
    // An exec may not pose as the init process, nor name a path.
    for bad in [id.as_str(), "../e1", ""] {
        let bad_request = ExecRequest {
            exec_id: bad.into(),
            ..request.clone()
        };
        let refused = env.adapter.exec(&id, &bad_request).await;
        assert!(refused.is_err(), "exec id {bad:?} accepted: {refused:?}");
    }
    let exec_pid = env.adapter.exec(&id, &request).await.expect("exec");
    assert_ne!(exec_pid, init_pid);
    let exit = env
        .wait_for(|i| matches!(i, Input::Event(ContainerdEvent::TaskExit { exec_id, .. }) if exec_id == "e1"))
        .await;
    let Input::Event(ContainerdEvent::TaskExit {
        container,
        exit_status,
        pid,
        ..
    }) = exit
    else {
        unreachable!()
    };
    assert_eq!((container, exit_status, pid), (id.clone(), 5, exec_pid));
    assert_eq!(
        env.adapter
            .delete_exec(&id, "e1")
            .await
            .expect("delete exec"),
        5
    );

    let records = wait_for_records(&env.adapter.exec_log_path(&id, "e1"), 2).await;
    assert_eq!(lines(&records, LogStream::Stdout), vec!["from-exec\n"]);
    assert_eq!(lines(&records, LogStream::Stderr), vec!["oops\n"]);

    // The container itself still runs, with its own pid.
    let relist = env.op();
    tokio::spawn(env.adapter.execute(relist, Call::Relist, env.sink.clone()));
    let task = env
        .wait_for(|i| matches!(i, Input::Relist(op, RelistPart::Task(_)) if *op == relist))
        .await;
    let Input::Relist(_, RelistPart::Task(task)) = task else {
        unreachable!()
    };
    assert_eq!((task.status, task.pid), (TaskStatus::Running, init_pid));
    assert!(
        !env.seen.iter().any(|i| matches!(i, Input::Event(ContainerdEvent::TaskExit { exec_id, .. }) if exec_id == id.as_str())),
        "no init exit"
    );

    let kill = Call::Kill {
        id: id.clone(),
        signal: Signal::SIGKILL,
        all: false,
    };
    assert_eq!(env.call(kill).await, Ok(Done::Ok));
    assert_eq!(env.exit_of(&id).await, 137);
    env.remove(&id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_network_sees_the_hosts_interfaces_through_a_read_only_sys() {
    let mut env = Env::start().await;
    env.subscribe().await;
    let mut host: Vec<String> = std::fs::read_dir("/sys/class/net")
        .expect("the host's interfaces")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    host.sort();
    let script = format!(
        "test \"$(ls /sys/class/net | sort | tr '\\n' ' ')\" = '{} ' && ! touch /sys/probe 2>/dev/null",
        host.join(" ")
    );
    let id = cid("hostnet");
    let mut config = busybox(&["sh", "-c", &script]);
    config.network = holdfast_core::NetworkMode::Host;
    env.run_with(&id, config).await;
    assert_eq!(env.exit_of(&id).await, 0, "{script}");
    env.remove(&id).await;

    // Without host networking only loopback is there.
    let id = cid("nonet");
    env.run(&id, &["sh", "-c", "test \"$(ls /sys/class/net)\" = lo"])
        .await;
    assert_eq!(env.exit_of(&id).await, 0);
    env.remove(&id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_that_cannot_be_written_fails_the_start_with_the_reason() {
    let mut env = Env::start().await;
    let id = cid("nolog");
    let config = busybox(&["echo", "lost"]);
    assert_eq!(
        env.call(Call::CreateContainer {
            id: id.clone(),
            config: config.into()
        })
        .await,
        Ok(Done::Ok)
    );
    // A directory where the log file should be: the logger could not open it.
    std::fs::create_dir_all(env.adapter.log_path(&id)).expect("mkdir");
    let created = env.call(Call::CreateTask { id: id.clone() }).await;
    assert!(
        matches!(&created, Err(f) if f.kind == FailureKind::Other && f.message.contains("nolog.log")),
        "{created:?}"
    );
    assert_eq!(
        env.call(Call::DeleteContainer { id: id.clone() }).await,
        Ok(Done::Ok)
    );
    let (containers, tasks, snapshots) = env.leftovers().await;
    assert!(
        containers.is_empty() && tasks.is_empty() && snapshots.is_empty(),
        "{containers:?} {tasks:?} {snapshots:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seccomp_filter_refuses_user_namespaces() {
    let mut env = Env::start().await;
    env.subscribe().await;
    // Root in the container, no extra capabilities: without the filter both
    // would succeed (on the host `busybox unshare -U true` does).
    let id = cid("seccomp");
    env.run(
        &id,
        &["sh", "-c", "unshare -U true && exit 10; echo ok; exit 3"],
    )
    .await;
    assert_eq!(env.exit_of(&id).await, 3, "unshare -U must be refused");
    env.remove(&id).await;
    // Everyday system calls still work.
    let id = cid("everyday");
    env.run(
        &id,
        &[
            "sh",
            "-c",
            "ls / >/dev/null && date >/dev/null && sleep 0 && exit 5",
        ],
    )
    .await;
    assert_eq!(env.exit_of(&id).await, 5);
    env.remove(&id).await;
}
