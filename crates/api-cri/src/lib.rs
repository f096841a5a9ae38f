//! The Kubernetes Container Runtime Interface (CRI, `runtime.v1`) of
//! holdfastd: kubelet's RuntimeService and ImageService over gRPC on a unix
//! socket, a second thin translator over the same engine as the Docker API.
//!
//! A pod's sandbox is a container holding the pod's namespaces (network,
//! IPC, UTS; PID when the pod shares one), and each of the pod's containers
//! joins them; both are containers of the core, recorded with what kubelet
//! names them by ([`holdfast_core::PodMember`]), so that every answer is read
//! from the core and every change goes through it with the same guarantee
//! as a `docker` command. A file per family: `runtime.rs` (version, status,
//! the methods not served), `pods.rs`, `containers.rs`, `images.rs`;
//! `status.rs` maps every refusal onto a gRPC status in one place.

mod containers;
mod events;
mod exec;
pub mod fuzz;
mod images;
mod names;
mod pods;
mod runtime;
mod stats;
mod status;
pub mod streaming;

use holdfast_engine::engine::EngineHandle;
use k8s_cri::v1::image_service_server::ImageServiceServer;
use k8s_cri::v1::runtime_service_server::RuntimeServiceServer;
use std::future::Future;

/// The image every sandbox runs: built offline from the host's busybox at
/// holdfastd's start (never pulled), its process a `sleep` that only holds
/// the pod's namespaces.
pub use holdfast_engine::seed_image::PAUSE_IMAGE;

/// Both CRI services, over the engine's handle.
#[derive(Clone, Debug)]
pub struct Cri {
    engine: EngineHandle,
    /// Where `Exec`, `Attach` and `PortForward` send their streams; `None`
    /// when holdfastd serves none.
    streaming: Option<std::sync::Arc<streaming::Streaming>>,
}

impl Cri {
    /// Over the engine's handle, its commands sent as the CRI's (the core
    /// refuses them what the CRI did not make, and refuses the Docker API
    /// changes to what it made).
    pub fn new(engine: EngineHandle) -> Cri {
        Cri {
            engine: engine.for_api(holdfast_core::Api::Cri),
            streaming: None,
        }
    }
}

/// Where the CRI's streams are served, and how long one may be idle
/// (`None`: for ever).
#[derive(Debug)]
pub struct Streams {
    pub listener: tokio::net::TcpListener,
    pub idle_timeout: Option<std::time::Duration>,
}

/// Serves the CRI on `listener`, and its streams (exec, attach, port
/// forwarding) on `streams` when given, until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::UnixListener,
    streams: Option<Streams>,
    engine: EngineHandle,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    // Both servers end with it.
    let shutdown = futures_util::FutureExt::shared(Box::pin(shutdown));
    let mut cri = Cri::new(engine);
    let streaming_server = match streams {
        Some(Streams {
            listener,
            idle_timeout,
        }) => {
            let addr = listener.local_addr();
            match addr {
                Ok(addr) => {
                    cri.streaming = Some(std::sync::Arc::new(streaming::Streaming::new(
                        addr,
                        idle_timeout,
                    )));
                    let (cri, shutdown) = (cri.clone(), shutdown.clone());
                    Some(tokio::spawn(async move {
                        if let Err(e) = streaming::serve(listener, cri, shutdown).await {
                            tracing::error!(error = %e, "the CRI streaming server failed");
                        }
                    }))
                }
                Err(e) => {
                    tracing::error!(error = %e, "the CRI streaming listener has no address");
                    None
                }
            }
        }
        None => None,
    };
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
    let served = tonic::transport::Server::builder()
        .layer(tower::util::MapRequestLayer::new(log_request))
        .add_service(RuntimeServiceServer::new(cri.clone()))
        .add_service(ImageServiceServer::new(cri))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    if let Some(server) = streaming_server {
        server.abort();
    }
    served
}

/// Logs the method of every request (`cri request method=/runtime.v1...`):
/// the diagnostics of a failure say what kubelet asked and when.
fn log_request(
    request: tonic::codegen::http::Request<tonic::body::Body>,
) -> tonic::codegen::http::Request<tonic::body::Body> {
    tracing::debug!(method = %request.uri().path(), "cri request");
    request
}
