//! A record that cannot be written (the disk is full) fails the request with
//! 500, nothing after the failed write is carried out, and the engine
//! recovers from the store by itself once there is room again.
//!
//! The store lives on a small tmpfs this test mounts (root, as the whole
//! suite); containerd is not needed: the failure happens before any call.

use holdfast_adapter_containerd::{Adapter, AdapterConfig};
use holdfast_core::{
    Answer, Command, ContainerConfig, CoreConfig, ErrorKind, Intents, Presence, Record, WallTime,
};
use holdfast_engine::engine::{Engine, EngineParts};
use holdfast_engine::events::EventLog;
use holdfast_engine::store::Store;
use std::path::Path;
use std::process::Command as Process;
use std::sync::Arc;
use std::time::Duration;

/// A tmpfs of `size` mounted on a fresh directory, unmounted on drop.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().expect("tempdir");
        let status = Process::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(status.success(), "mount tmpfs (the suite runs as root)");
        SmallDisk { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the disk until a write fails.
    fn fill(&self) {
        use std::io::Write as _;
        let mut f = std::fs::File::create(self.path().join("filler")).expect("filler");
        let block = vec![0u8; 64 * 1024];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
    }

    fn free(&self) {
        std::fs::remove_file(self.path().join("filler")).expect("remove filler");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Process::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

fn record(id: &str) -> Record {
    Record {
        id: id.parse().expect("valid id"),
        name: "victim".to_owned(),
        config: Arc::new(ContainerConfig {
            image: "busybox".to_owned(),
            ..ContainerConfig::default()
        }),
        created_at: WallTime::from_unix_nanos(1),
        presence: Presence::Created,
        run: 1,
        pid: Some(4242),
        started_at: Some(WallTime::from_unix_nanos(2)),
        began_at: None,
        start_sent: false,
        exit: None,
        restart_count: 0,
        intents: Intents::default(),
        network: holdfast_core::NetworkState::Detached,
        endpoints: Vec::new(),
        own_disconnected: false,
        allocation: None,
        health: None,
        create_sent_at: None,
        execs: Vec::new(),
        rootfs_mounted: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_the_request_and_the_engine_recovers_from_the_store() {
    let disk = SmallDisk::mount("2m");
    let store_path = disk.path().join("holdfast.redb");
    {
        let store = Store::open(&store_path).expect("open store");
        store.put(&record("c1")).expect("seed a record");
    }
    let work = tempfile::tempdir().expect("tempdir");
    // No containerd behind it: the core never gets past reconnecting, and a
    // stop is recorded (persisted) to be carried out later.
    let adapter = Adapter::new(AdapterConfig::new(
        work.path().join("no-containerd.sock"),
        "store-failure",
        "/bin/true",
        work.path().join("logs"),
    ))
    .expect("adapter");
    let (engine, handle) = Engine::new(EngineParts {
        core_config: CoreConfig::default(),
        seed: 1,
        store: Store::open(&store_path).expect("reopen store"),
        adapter,
        // No container here is on a bridge network: nothing is set up.
        network: holdfast_engine::network::Network::new(
            holdfast_engine::network::NetworkSettings {
                bridge: "hf-unused".into(),
                subnet: Some("10.255.255.0/24".into()),
                plugin_dir: work.path().join("no-plugins"),
                state_dir: work.path().join("net"),
                definitions_dir: work.path().join("networks"),
            },
        )
        .expect("network"),
        events: Arc::new(EventLog::default()),
        volumes: holdfast_engine::volumes::Volumes::new(work.path().join("volumes")),
        data_root: work.path().to_owned(),
    })
    .expect("engine");
    let engine = tokio::spawn(engine.run());
    let id: holdfast_core::ContainerId = "c1".parse().expect("id");

    disk.fill();
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        handle.command(Command::Stop {
            id: id.clone(),
            timeout: None,
            signal: None,
        }),
    )
    .await
    .expect("the stop is answered at once");
    match &answer {
        Answer::Error(e) => {
            assert_eq!(e.kind, ErrorKind::Internal, "{answer:?}");
            assert!(e.message.contains("store"), "{answer:?}");
        }
        other => panic!("a stop whose record cannot be written must fail, got {other:?}"),
    }

    disk.free();
    // The engine rebuilds itself from the store: the container is there,
    // without the stop that was never written.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let seen = handle
            .read({
                let id = id.clone();
                move |v| v.core.container(&id).map(|c| c.record.intents.stop)
            })
            .await
            .expect("engine answers reads");
        if v_failures(&handle).await >= 1 && seen == Some(None) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the engine did not recover from the store: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // And it writes again: the same stop is now recorded (containerd is
    // away, so it stays pending; its record is what matters here).
    let pending_stop = tokio::spawn({
        let handle = handle.clone();
        let id = id.clone();
        async move {
            handle
                .command(Command::Stop {
                    id,
                    timeout: None,
                    signal: None,
                })
                .await
        }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let recorded = handle
            .read({
                let id = id.clone();
                move |v| v.core.container(&id).and_then(|c| c.record.intents.stop)
            })
            .await
            .expect("engine answers reads");
        if recorded.is_some() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stop after recovery was not recorded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    pending_stop.abort();
    handle.shutdown();
    let _ = engine.await;
    let records = Store::open(&store_path)
        .expect("open")
        .load()
        .expect("load")
        .containers;
    assert_eq!(records.len(), 1);
    assert!(
        records[0].intents.stop.is_some(),
        "the stop asked for after recovery is on disk: {:?}",
        records[0].intents
    );
}

async fn v_failures(handle: &holdfast_engine::engine::EngineHandle) -> u64 {
    handle
        .read(|v| v.facts.store_failures)
        .await
        .expect("engine answers reads")
}
