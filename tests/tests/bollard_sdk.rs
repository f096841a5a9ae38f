//! A second SDK, so that holdfast is not tuned to one client's habits: the
//! Rust `bollard` crate drives create, start, wait, logs, inspect, list,
//! exec, a health check and remove against a real holdfastd.

use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, LogsOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use bollard::{ClientVersion, Docker};
use futures_util::StreamExt as _;
use holdfast_e2e::Daemon;

/// The API version holdfast speaks (bollard's default is newer).
const API: &ClientVersion = &ClientVersion {
    major_version: 1,
    minor_version: 43,
};

fn body(image: &str, cmd: &[&str]) -> bollard::models::ContainerCreateBody {
    bollard::models::ContainerCreateBody {
        image: Some(image.to_owned()),
        cmd: Some(cmd.iter().map(|s| (*s).to_owned()).collect()),
        host_config: Some(bollard::models::HostConfig {
            network_mode: Some("none".to_owned()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn bollard_drives_the_lifecycle_logs_exec_and_health() {
    let d = Daemon::start();
    let socket = d.socket();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let docker = Docker::connect_with_socket(&socket.to_string_lossy(), 60, API)
            .expect("connect to holdfastd");
        let version = docker.version().await.expect("version");
        assert_eq!(version.api_version.as_deref(), Some("1.43"));

        // A container that writes to both streams and exits 3.
        let mut config = body("busybox", &["sh", "-c", "echo out; echo err >&2; exit 3"]);
        config.env = Some(vec!["WHO=bollard".to_owned()]);
        config.labels = Some([("sdk".to_owned(), "bollard".to_owned())].into());
        let created = docker
            .create_container(
                Some(
                    CreateContainerOptionsBuilder::default()
                        .name("rusty")
                        .build(),
                ),
                config,
            )
            .await
            .expect("create");
        assert!(created.warnings.is_empty(), "{:?}", created.warnings);
        let id = created.id;
        docker.start_container(&id, None).await.expect("start");
        let waited: Vec<_> = docker.wait_container(&id, None).collect().await;
        // bollard turns a non-zero exit into an error carrying the code.
        match waited.as_slice() {
            [Err(bollard::errors::Error::DockerContainerWaitError { code, .. })] => {
                assert_eq!(*code, 3);
            }
            other => panic!("wait: {other:?}\n{}", d.diagnostics()),
        }
        let logs: Vec<String> = docker
            .logs(
                &id,
                Some(
                    LogsOptionsBuilder::default()
                        .stdout(true)
                        .stderr(true)
                        .build(),
                ),
            )
            .map(|l| match l.expect("a log line") {
                bollard::container::LogOutput::StdOut { message } => {
                    format!("out:{}", String::from_utf8_lossy(&message))
                }
                bollard::container::LogOutput::StdErr { message } => {
                    format!("err:{}", String::from_utf8_lossy(&message))
                }
                other => format!("other:{other}"),
            })
            .collect()
            .await;
        // The two streams are two pipes: their order in the log is the
        // order the logger read them in, as with dockerd.
        let mut logs = logs;
        logs.sort();
        assert_eq!(logs, ["err:err\n", "out:out\n"], "{}", d.diagnostics());
        let inspected = docker.inspect_container(&id, None).await.expect("inspect");
        let state = inspected.state.expect("a state");
        assert_eq!(state.exit_code, Some(3));
        assert_eq!(
            state.status,
            Some(bollard::models::ContainerStateStatusEnum::EXITED)
        );
        assert_eq!(inspected.name.as_deref(), Some("/rusty"));
        let config = inspected.config.expect("a config");
        assert!(
            config
                .env
                .unwrap_or_default()
                .iter()
                .any(|e| e == "WHO=bollard"),
            "env"
        );
        let listed = docker
            .list_containers(Some(
                ListContainersOptionsBuilder::default().all(true).build(),
            ))
            .await
            .expect("list");
        assert!(listed.iter().any(|c| c.id.as_deref() == Some(id.as_str())));

        // A running one with a health check, and an exec into it.
        let mut config = body("busybox", &["sleep", "1000"]);
        config.healthcheck = Some(bollard::models::HealthConfig {
            test: Some(vec!["CMD-SHELL".to_owned(), "test -f /tmp/ok".to_owned()]),
            interval: Some(1_000_000_000),
            retries: Some(1),
            ..Default::default()
        });
        let live = docker
            .create_container(
                Some(
                    CreateContainerOptionsBuilder::default()
                        .name("lively")
                        .build(),
                ),
                config,
            )
            .await
            .expect("create")
            .id;
        docker.start_container(&live, None).await.expect("start");
        let exec = docker
            .create_exec(
                &live,
                bollard::models::ExecConfig {
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    cmd: Some(vec![
                        "sh".into(),
                        "-c".into(),
                        "touch /tmp/ok && echo done".into(),
                    ]),
                    ..Default::default()
                },
            )
            .await
            .expect("create exec")
            .id;
        let mut said = String::new();
        match docker.start_exec(&exec, None).await.expect("start exec") {
            bollard::exec::StartExecResults::Attached { mut output, .. } => {
                while let Some(Ok(chunk)) = output.next().await {
                    said.push_str(&chunk.to_string());
                }
            }
            bollard::exec::StartExecResults::Detached => panic!("detached"),
        }
        assert_eq!(said, "done\n");
        let exec_state = docker.inspect_exec(&exec).await.expect("inspect exec");
        assert_eq!(exec_state.exit_code, Some(0));
        let mut healthy = false;
        for _ in 0..600 {
            let state = docker
                .inspect_container(&live, None)
                .await
                .expect("inspect")
                .state
                .expect("a state");
            if state.health.and_then(|h| h.status)
                == Some(bollard::models::HealthStatusEnum::HEALTHY)
            {
                healthy = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(
            healthy,
            "never healthy through bollard\n{}",
            d.diagnostics()
        );

        for name in [&id, &live] {
            docker
                .remove_container(
                    name,
                    Some(RemoveContainerOptionsBuilder::default().force(true).build()),
                )
                .await
                .expect("remove");
        }
        let left = docker
            .list_containers(Some(
                ListContainersOptionsBuilder::default().all(true).build(),
            ))
            .await
            .expect("list");
        assert!(left.is_empty(), "{left:?}");
    });
}
