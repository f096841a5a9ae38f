//! What the engine is made of, started: the store, the embedded containerd
//! (unless an external one is named), the adapter, the network, the volumes,
//! and the loop that owns the core, with what runs beside it (the report of
//! containerd's restarts, the busybox seed). [`start`] takes plain
//! parameters ([`EngineConfig`]); whoever starts it (holdfastd) owns the
//! flags.

use crate::engine::{self, EngineHandle};
use crate::path_io::PathIoError;
use crate::{events, network, seed_image, store, supervisor, volumes};
use holdfast_adapter_containerd::{Adapter, AdapterConfig};
use holdfast_core::CoreConfig;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What the engine is started with.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Records, logs, volumes, networks and the embedded containerd's
    /// content: what outlives a reboot.
    pub data_root: PathBuf,
    /// Runtime state: network namespaces and rules, stdin FIFOs, mounts.
    pub exec_root: PathBuf,
    /// An external containerd's socket; `None`: the embedded one.
    pub containerd: Option<PathBuf>,
    /// The containerd binary the embedded supervisor runs.
    pub containerd_binary: PathBuf,
    /// The containerd namespace of holdfast's containers.
    pub namespace: String,
    /// Grace period of a stop when neither the request nor the container
    /// names one.
    pub default_stop_timeout: Duration,
    /// Build `busybox:latest` from the host's static busybox when the image
    /// store lacks it.
    pub seed_image: bool,
    /// Registries pulled from over plain HTTP besides those on loopback.
    pub insecure_registries: Vec<String>,
    /// The default bridge network's Linux bridge; `none`: no bridge network.
    pub bridge_name: String,
    /// The default bridge network's subnet; `None`: chosen.
    pub bridge_subnet: Option<String>,
    /// Where the CNI plugins are.
    pub cni_plugin_dir: PathBuf,
}

impl EngineConfig {
    /// The store's database file.
    pub fn store_path(&self) -> PathBuf {
        self.data_root.join("holdfast.redb")
    }

    /// Where the logger writes each container's json-file log.
    pub fn log_dir(&self) -> PathBuf {
        self.data_root.join("containers")
    }
}

/// Why the engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error(transparent)]
    Supervisor(#[from] supervisor::SupervisorError),
    #[error("network: {0}")]
    Network(#[from] network::NetworkError),
    #[error("containerd adapter: {0}")]
    Adapter(#[from] holdfast_adapter_containerd::AdapterError),
}

/// The engine, running.
#[derive(Debug)]
pub struct Running {
    handle: EngineHandle,
    /// The socket of the containerd it uses.
    containerd: PathBuf,
    loop_task: tokio::task::JoinHandle<()>,
    /// The embedded containerd's supervisor: it watches containerd (and
    /// starts it again) as long as the engine runs.
    _supervisor: Option<Arc<supervisor::Supervisor>>,
}

impl Running {
    /// How every API reaches the engine.
    pub fn handle(&self) -> &EngineHandle {
        &self.handle
    }

    /// The socket of the containerd the engine uses.
    pub fn containerd_socket(&self) -> &Path {
        &self.containerd
    }

    /// Stops the loop after the input it is handling; containerd and every
    /// container keep running.
    pub async fn stop(self) {
        self.handle.shutdown();
        let _ = self.loop_task.await;
    }
}

/// Starts the engine: see the module docs.
pub async fn start(config: EngineConfig) -> Result<Running, StartError> {
    let log_dir = config.log_dir();
    std::fs::create_dir_all(&log_dir).map_err(PathIoError::at("create", &log_dir))?;
    let store = store::Store::open(&config.store_path())?;

    let (socket, supervisor) = match &config.containerd {
        Some(socket) => (socket.clone(), None),
        None => {
            let sup = supervisor::Supervisor::start(supervisor::SupervisorConfig {
                binary: config.containerd_binary.clone(),
                data_dir: config.data_root.join("containerd"),
                run_dir: config.exec_root.join("containerd"),
            })
            .await?;
            (sup.socket().to_owned(), Some(sup))
        }
    };
    let logger =
        std::env::current_exe().map_err(PathIoError::at("find", Path::new("/proc/self/exe")))?;
    let mut adapter_config = AdapterConfig::new(&socket, &config.namespace, logger, log_dir);
    adapter_config.insecure_registries = config.insecure_registries.clone();
    // Stdin FIFOs mean nothing after a reboot: keep them on the exec root.
    adapter_config.fifo_dir = config.exec_root.join("fifo");
    // A mount has the kernel's lifetime: the exec root.
    adapter_config.rootfs_dir = config.exec_root.join("rootfs");
    // Network state has the kernel's lifetime (rules, namespaces): the exec root.
    let network = network::Network::new(network::NetworkSettings {
        bridge: config.bridge_name.clone(),
        subnet: config.bridge_subnet.clone(),
        plugin_dir: config.cni_plugin_dir.clone(),
        state_dir: config.exec_root.join("net"),
        definitions_dir: config.data_root.join("networks"),
    })?;
    adapter_config.netns_dir = network.netns_dir();
    // How long a task create may run on in containerd, for both sides.
    let create_run_on = adapter_config.create_run_on;
    let adapter = Adapter::new(adapter_config)?;

    let core_config = CoreConfig {
        default_stop_timeout: config.default_stop_timeout,
        // A failed dial of a local unix socket costs nothing, and a restarted
        // containerd should be used within a fraction of a second: keep
        // retrying every quarter second at most (bench/daemon.md measured
        // 1.4 s from containerd serving to usable with the core's 2 s cap).
        reconnect_max: Duration::from_millis(250),
        create_run_on,
        ..CoreConfig::default()
    };
    let seed = u64::from(std::process::id()) ^ engine::wall_now().as_unix_nanos() as u64;
    let supervisor = supervisor.map(Arc::new);
    let (engine, handle) = engine::Engine::new(engine::EngineParts {
        core_config,
        seed,
        store,
        adapter: adapter.clone(),
        network,
        events: Arc::new(events::EventLog::default()),
        volumes: volumes::Volumes::new(config.data_root.join("volumes")),
        data_root: config.data_root.clone(),
    })?;
    let loop_task = tokio::spawn(engine.run());
    if let Some(sup) = &supervisor {
        tokio::spawn(report_containerd_restarts(
            Arc::downgrade(sup),
            sup.watch_restarts(),
            handle.clone(),
        ));
    }
    if config.seed_image {
        tokio::spawn(seed_busybox(adapter, config.data_root.clone()));
    }
    Ok(Running {
        handle,
        containerd: socket,
        loop_task,
        _supervisor: supervisor,
    })
}

/// When the supervisor's containerd first serves, and each time it starts
/// containerd again, the core is told the moment it serves, so that it
/// reconnects at once rather than at its next backoff attempt (up to 250 ms
/// later; bench/vs-dockerd.md).
async fn report_containerd_restarts(
    supervisor: std::sync::Weak<supervisor::Supervisor>,
    mut restarts: tokio::sync::watch::Receiver<u64>,
    engine: EngineHandle,
) {
    // The first start too: the core's first attempts may have found no
    // socket yet, and its backoff would leave it away for up to 250 ms more.
    if let Some(sup) = supervisor.upgrade() {
        tokio::select! {
            ready = sup.wait_ready(Duration::from_secs(30)) => {
                if ready.is_ok() {
                    tracing::debug!("containerd accepts; probing it");
                    engine.probe_containerd();
                }
            }
            _ = restarts.changed() => {
                restarts.mark_changed();
            }
        }
    }
    while restarts.changed().await.is_ok() {
        let Some(sup) = supervisor.upgrade() else {
            return;
        };
        // containerd restoring many shims takes a while to accept; a later
        // restart replaces this wait.
        tokio::select! {
            ready = sup.wait_ready(Duration::from_secs(30)) => {
                if ready.is_ok() {
                    tracing::debug!("restarted containerd accepts; probing it");
                    engine.probe_containerd();
                }
            }
            _ = restarts.changed() => {
                restarts.mark_changed();
            }
        }
    }
}

/// Makes `busybox:latest` usable offline: built from the host's static
/// busybox and imported when the image store lacks it. (The CRI's pause
/// image is seeded the same way, at the first pod: `Images::ensure_seeded`.)
async fn seed_busybox(adapter: Adapter, data_root: PathBuf) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let images = loop {
        match adapter.list_images().await {
            Ok(images) => break images,
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::debug!(error = %e, "waiting for containerd to seed busybox");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "busybox:latest not seeded: containerd did not answer");
                return;
            }
        }
    };
    const NAME: &str = "docker.io/library/busybox:latest";
    if images.iter().any(|i| i.name == NAME) {
        return;
    }
    match seed_image::seed(&adapter, &data_root, "busybox:latest").await {
        Ok(()) => tracing::info!("seeded busybox:latest from the host's busybox"),
        Err(e) => tracing::warn!(error = %e, "busybox:latest not seeded"),
    }
}
