//! Image import of both tarball formats (with a layer too big to hold in
//! memory), resolution, and a container run from each.

mod common;

use common::{ReportOnPanic, adapter_for, busybox, cid, init_tracing};
use holdfast_adapter_containerd::{AdapterError, chain_id};
use holdfast_core::{Call, ContainerdEvent, Done, Input};
use holdfast_testkit::{Containerd, ImageFormat, busybox_image_with_ballast, unique_namespace};
use tokio::sync::mpsc::unbounded_channel;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_docker_archive_and_oci_layout() {
    init_tracing();
    let ctrd = Containerd::start();
    let _report = ReportOnPanic(&ctrd);
    let dir = tempfile::tempdir().expect("tempdir");
    // A 12 MiB ballast makes the layer bigger than what the importer keeps in
    // memory, so both formats go through the spooled path.
    const BALLAST_BYTES: usize = 12 << 20;
    let image = busybox_image_with_ballast(
        &dir.path().join("img"),
        "busybox:1.0",
        Some("SIGQUIT"),
        BALLAST_BYTES,
    );

    for format in [ImageFormat::DockerArchive, ImageFormat::OciLayout] {
        let ns = unique_namespace("hf-img");
        let adapter = adapter_for(&ctrd, &ns, dir.path());
        assert!(matches!(
            adapter.resolve_image("busybox:1.0").await,
            Err(AdapterError::ImageNotFound(_))
        ));

        let imported = adapter
            .import_image(image.tarball(format))
            .await
            .expect("import");
        let names: Vec<&str> = imported.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, vec![image.containerd_name.as_str()], "{format:?}");

        let resolved = adapter.resolve_image("busybox:1.0").await.expect("resolve");
        assert_eq!(
            resolved.config_digest, image.config_digest,
            "{format:?}: linux/amd64 config"
        );
        assert_eq!(resolved.diff_ids, vec![image.diff_id.clone()]);
        assert_eq!(
            Some(resolved.chain_id.clone()),
            chain_id(std::slice::from_ref(&image.diff_id))
        );
        assert_eq!(resolved.config.stop_signal.as_deref(), Some("SIGQUIT"));
        assert_eq!(resolved.config.cmd, Some(vec!["sh".to_owned()]));
        let listed = adapter.list_images().await.expect("list");
        assert!(
            listed.iter().any(|i| i.name == image.containerd_name),
            "{listed:?}"
        );

        // Importing again is fine (content and snapshots exist already).
        adapter
            .import_image(image.tarball(format))
            .await
            .expect("re-import");

        // A container runs from it.
        let (sink, mut rx) = unbounded_channel::<Input>();
        tokio::spawn(adapter.execute(holdfast_core::OpId(1), Call::Subscribe, sink.clone()));
        let id = cid("fromimage");
        let script = format!(
            "test -x /bin/busybox && test $(wc -c < /ballast.bin) -eq {BALLAST_BYTES} && exit 4"
        );
        let mut config = busybox(&["sh", "-c", &script]);
        config.image = "busybox:1.0".into();
        let calls = [
            Call::CreateContainer {
                id: id.clone(),
                config: config.into(),
            },
            Call::CreateTask { id: id.clone() },
            Call::StartTask { id: id.clone() },
        ];
        loop {
            let input = tokio::time::timeout(common::WAIT, rx.recv())
                .await
                .expect("live in time")
                .expect("open");
            if matches!(
                input,
                Input::Connection(holdfast_core::ConnectionFact::StreamLive(_))
            ) {
                break;
            }
        }
        let mut exit = None;
        for (n, call) in calls.into_iter().enumerate() {
            let op = holdfast_core::OpId(10 + n as u64);
            tokio::spawn(adapter.execute(op, call, sink.clone()));
            loop {
                let input = tokio::time::timeout(common::WAIT, rx.recv())
                    .await
                    .expect("input in time")
                    .expect("open");
                if let Input::Event(ContainerdEvent::TaskExit {
                    container,
                    exit_status,
                    ..
                }) = &input
                    && *container == id
                {
                    exit = Some(*exit_status);
                }
                if let Input::ActionResult(o, r) = input
                    && o == op
                {
                    assert!(
                        matches!(r, Ok(Done::Ok | Done::TaskCreated { .. })),
                        "{format:?} call {n}: {r:?}"
                    );
                    break;
                }
            }
        }
        while exit.is_none() {
            let input = tokio::time::timeout(common::WAIT, rx.recv())
                .await
                .expect("exit in time")
                .expect("open");
            if let Input::Event(ContainerdEvent::TaskExit {
                container,
                exit_status,
                ..
            }) = input
                && container == id
            {
                exit = Some(exit_status);
            }
        }
        assert_eq!(exit, Some(4), "{format:?}: ran inside the imported rootfs");
    }
}
