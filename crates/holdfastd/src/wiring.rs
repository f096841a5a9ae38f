//! What holdfastd is made of, wired together: the store, the embedded
//! containerd (unless an external one is named), the adapter, the network,
//! the engine that owns the core, and the Docker API served over its handle.

use crate::settings::Settings;
use holdfast_adapter_containerd::{Adapter, AdapterConfig};
use holdfast_api_docker as api;
use holdfast_core::CoreConfig;
use holdfast_engine::{engine, events, network, seed_image, store, supervisor, volumes};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error(transparent)]
    Supervisor(#[from] supervisor::SupervisorError),
    #[error("network: {0}")]
    Network(#[from] network::NetworkError),
    #[error("containerd adapter: {0}")]
    Adapter(#[from] holdfast_adapter_containerd::AdapterError),
    #[error(
        "another holdfastd (pid {pid}) uses {path}; stop it or pass other --exec-root/--pidfile"
    )]
    AlreadyRunning { pid: i32, path: PathBuf },
    #[error(transparent)]
    Api(#[from] api::BindError),
}

fn io_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> DaemonError + 'a {
    move |source| DaemonError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// Structured logs on stderr; `RUST_LOG` wins over `--log-level`.
pub fn init_tracing(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    use std::io::IsTerminal as _;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// holdfastd's whole life: see the crate docs. Returns after SIGTERM/SIGINT,
/// leaving containerd and every container running.
pub async fn run(settings: Settings) -> Result<(), DaemonError> {
    for dir in [
        &settings.data_root,
        &settings.exec_root,
        &settings.log_dir(),
    ] {
        std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    }
    let _pidfile = PidFile::claim(&settings.pidfile)?;
    let store = store::Store::open(&settings.store_path())?;

    let (socket, supervisor) = match &settings.containerd {
        Some(socket) => (socket.clone(), None),
        None => {
            let sup = supervisor::Supervisor::start(supervisor::SupervisorConfig {
                binary: settings.containerd_binary.clone(),
                data_dir: settings.data_root.join("containerd"),
                run_dir: settings.exec_root.join("containerd"),
            })
            .await?;
            (sup.socket().to_owned(), Some(sup))
        }
    };
    let logger = std::env::current_exe().map_err(io_err("find", Path::new("/proc/self/exe")))?;
    let mut adapter_config =
        AdapterConfig::new(&socket, &settings.namespace, logger, settings.log_dir());
    adapter_config.insecure_registries = settings.insecure_registries.clone();
    // Stdin FIFOs mean nothing after a reboot: keep them on the exec root.
    adapter_config.fifo_dir = settings.exec_root.join("fifo");
    // Network state has the kernel's lifetime (rules, namespaces): the exec root.
    let network = network::Network::new(network::NetworkSettings {
        bridge: settings.bridge_name.clone(),
        subnet: settings.bridge_subnet.clone(),
        plugin_dir: settings.cni_plugin_dir.clone(),
        state_dir: settings.exec_root.join("net"),
        definitions_dir: settings.data_root.join("networks"),
    })?;
    adapter_config.netns_dir = network.netns_dir();
    let adapter = Adapter::new(adapter_config)?;

    let events = Arc::new(events::EventLog::default());
    let core_config = CoreConfig {
        default_stop_timeout: settings.default_stop_timeout,
        // A failed dial of a local unix socket costs nothing, and a restarted
        // containerd should be used within a fraction of a second: keep
        // retrying every quarter second at most (bench/daemon.md measured
        // 1.4 s from containerd serving to usable with the core's 2 s cap).
        reconnect_max: Duration::from_millis(250),
        ..CoreConfig::default()
    };
    let seed = u64::from(std::process::id()) ^ engine::wall_now().as_unix_nanos() as u64;
    let supervisor = supervisor.map(Arc::new);
    let (engine, handle) = engine::Engine::new(engine::EngineParts {
        core_config,
        seed,
        store,
        adapter: adapter.clone(),
        network: network.clone(),
        events: Arc::clone(&events),
        volumes: volumes::Volumes::new(settings.data_root.join("volumes")),
        data_root: settings.data_root.clone(),
        mount_dir: settings.exec_root.join("cp"),
    })?;
    let engine_task = tokio::spawn(engine.run());
    if let Some(sup) = &supervisor {
        tokio::spawn(report_containerd_restarts(
            Arc::downgrade(sup),
            sup.watch_restarts(),
            handle.clone(),
        ));
    }

    if settings.seed_image {
        tokio::spawn(seed_busybox(adapter.clone(), settings.data_root.clone()));
    }

    let listener = api::bind(&settings.socket)?;
    eprintln!(
        "holdfastd: serving the Docker API; use it with:\n  export DOCKER_HOST=unix://{}",
        settings.socket.display()
    );
    tracing::info!(socket = %settings.socket.display(), containerd = %socket.display(), "serving");
    let state = api::ApiState {
        engine: handle.clone(),
    };
    api::serve(listener, state, shutdown_signal()).await;
    tracing::info!("API closed; stopping the engine (containers keep running)");
    handle.shutdown();
    let _ = engine_task.await;
    let _ = std::fs::remove_file(&settings.socket);
    Ok(())
}

/// When the supervisor's containerd first serves, and each time it starts
/// containerd again, the core is told the moment it serves, so that it
/// reconnects at once rather than at its next backoff attempt (up to 250 ms
/// later; bench/vs-dockerd.md).
async fn report_containerd_restarts(
    supervisor: std::sync::Weak<supervisor::Supervisor>,
    mut restarts: tokio::sync::watch::Receiver<u64>,
    engine: engine::EngineHandle,
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

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot handle SIGTERM/SIGINT; stop holdfastd with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = int.recv() => tracing::info!("SIGINT"),
    }
}

/// Makes `busybox:latest` usable offline: built from the host's static
/// busybox and imported when the image store lacks it.
async fn seed_busybox(adapter: Adapter, data_root: PathBuf) {
    const NAME: &str = "docker.io/library/busybox:latest";
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
    if images.iter().any(|i| i.name == NAME) {
        return;
    }
    let built = tokio::task::spawn_blocking(move || {
        let dir = tempfile::Builder::new()
            .prefix("seed-")
            .tempdir_in(&data_root)?;
        let tarball = seed_image::build_busybox_archive(dir.path(), "busybox:latest")?;
        Ok::<_, std::io::Error>((dir, tarball))
    })
    .await;
    let (dir, tarball) = match built {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "busybox:latest not seeded: cannot build it (apt-get install busybox-static)");
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, "busybox:latest not seeded");
            return;
        }
    };
    match adapter.import_image(&tarball).await {
        Ok(imported) => tracing::info!(?imported, "seeded busybox:latest from the host's busybox"),
        Err(e) => tracing::warn!(error = %e, "busybox:latest not seeded: import failed"),
    }
    drop(dir);
}

/// holdfastd's pid file, removed when dropped.
#[derive(Debug)]
struct PidFile {
    path: PathBuf,
}

impl PidFile {
    fn claim(path: &Path) -> Result<PidFile, DaemonError> {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse::<i32>()
            && pid != std::process::id() as i32
            && is_holdfastd(pid)
        {
            return Err(DaemonError::AlreadyRunning {
                pid,
                path: path.to_owned(),
            });
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
        }
        std::fs::write(path, format!("{}\n", std::process::id())).map_err(io_err("write", path))?;
        Ok(PidFile {
            path: path.to_owned(),
        })
    }
}

fn is_holdfastd(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("holdfastd"))
        .unwrap_or(false)
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
