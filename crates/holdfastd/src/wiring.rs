//! holdfastd's life, wired: its directories and pid file, the engine
//! started with what the flags settled, the Docker API and the CRI served
//! over the engine's handle on their sockets, until SIGTERM or SIGINT.

use crate::settings::Settings;
use crate::socket::{self, BindError};
use holdfast_api_cri as cri;
use holdfast_api_docker as api;
use holdfast_engine::path_io::PathIoError;
use holdfast_engine::start::{self as engine, EngineConfig, StartError};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error(transparent)]
    Engine(#[from] StartError),
    #[error(
        "another holdfastd (pid {pid}) uses {path}; stop it or pass other --exec-root/--pidfile"
    )]
    AlreadyRunning { pid: i32, path: PathBuf },
    #[error(transparent)]
    Socket(#[from] BindError),
    #[error("bind the CRI streaming address {addr}: {source}")]
    Streaming {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
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

/// What the engine is started with, from the settings.
fn engine_config(settings: &Settings) -> EngineConfig {
    EngineConfig {
        data_root: settings.data_root.clone(),
        exec_root: settings.exec_root.clone(),
        containerd: settings.containerd.clone(),
        containerd_binary: settings.containerd_binary.clone(),
        namespace: settings.namespace.clone(),
        default_stop_timeout: settings.default_stop_timeout,
        seed_image: settings.seed_image,
        insecure_registries: settings.insecure_registries.clone(),
        bridge_name: settings.bridge_name.clone(),
        bridge_subnet: settings.bridge_subnet.clone(),
        cni_plugin_dir: settings.cni_plugin_dir.clone(),
    }
}

/// holdfastd's whole life: see the module docs. Returns after
/// SIGTERM/SIGINT, leaving containerd and every container running.
pub async fn run(settings: Settings) -> Result<(), DaemonError> {
    for dir in [&settings.data_root, &settings.exec_root] {
        std::fs::create_dir_all(dir).map_err(PathIoError::at("create", dir))?;
    }
    let _pidfile = PidFile::claim(&settings.pidfile)?;
    let engine = engine::start(engine_config(&settings)).await?;

    let listener = socket::bind(&settings.socket)?;
    eprintln!(
        "holdfastd: serving the Docker API; use it with:\n  export DOCKER_HOST=unix://{}",
        settings.socket.display()
    );
    tracing::info!(
        socket = %settings.socket.display(),
        containerd = %engine.containerd_socket().display(),
        "serving"
    );
    // Both APIs end together: on SIGTERM/SIGINT, or when either stops.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let cri_server = match &settings.cri_socket {
        Some(path) => {
            let listener = socket::bind(path)?;
            let streams = tokio::net::TcpListener::bind(settings.cri_streaming_addr)
                .await
                .map_err(|source| DaemonError::Streaming {
                    addr: settings.cri_streaming_addr,
                    source,
                })?;
            eprintln!(
                "holdfastd: serving the Kubernetes CRI; point kubelet at it with:\n  --container-runtime-endpoint unix://{}",
                path.display()
            );
            let streams = cri::Streams {
                listener: streams,
                idle_timeout: settings.cri_stream_idle_timeout,
            };
            let engine = engine.handle().clone();
            let shutdown = stopped(stop_rx.clone());
            let stop = stop_tx.clone();
            Some(tokio::spawn(async move {
                if let Err(e) = cri::serve(listener, Some(streams), engine, shutdown).await {
                    tracing::error!(error = %e, "the CRI server failed");
                }
                let _ = stop.send(true);
            }))
        }
        None => None,
    };
    let cri_stopped = stopped(stop_rx);
    let shutdown = async move {
        tokio::select! {
            _ = shutdown_signal() => {}
            _ = cri_stopped => {}
        }
    };
    api::serve(listener, engine.handle().clone(), shutdown).await;
    let _ = stop_tx.send(true);
    if let Some(server) = cri_server {
        let _ = server.await;
    }
    tracing::info!("APIs closed; stopping the engine (containers keep running)");
    engine.stop().await;
    let _ = std::fs::remove_file(&settings.socket);
    if let Some(path) = &settings.cri_socket {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
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
            std::fs::create_dir_all(dir).map_err(PathIoError::at("create", dir))?;
        }
        std::fs::write(path, format!("{}\n", std::process::id()))
            .map_err(PathIoError::at("write", path))?;
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
