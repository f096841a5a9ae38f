//! The CRI's streaming server: `Exec`, `Attach` and `PortForward` answer
//! with a URL on it, under a single-use token ([`tokens`]), and kubelet
//! (or whoever it hands the URL to) connects there for the stream itself.
//! Served over WebSocket with Kubernetes' channel protocols
//! ([`channels`], [`websocket`]) and over SPDY/3.1 ([`spdy`]), the
//! transport kubectl's requests arrive by: exec and attach in
//! [`remotecommand`], port forwarding in [`portforward`], whatever carries
//! them.

mod channels;
mod idle;
mod portforward;
mod remotecommand;
pub(crate) mod spdy;
mod tokens;
mod websocket;

use crate::Cri;
use crate::status::invalid;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{FromRequestParts as _, Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse as _, Response};
use hyper_util::rt::TokioIo;
use k8s_cri::v1 as cri;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;
use tokens::{Refused, Tokens};
use tonic::Status;

/// What a token stands for: the request, its container or pod resolved
/// to the full id when it was made.
#[derive(Debug)]
pub(crate) enum Wanted {
    Exec {
        container: String,
        request: cri::ExecRequest,
    },
    Attach {
        container: String,
        request: cri::AttachRequest,
    },
    PortForward {
        sandbox: String,
        ports: Vec<u16>,
    },
}

/// The streaming server's address and its requests in flight.
#[derive(Debug)]
pub struct Streaming {
    base_url: String,
    tokens: Tokens<Wanted>,
    /// How long a stream may carry nothing before it is closed.
    idle: Option<std::time::Duration>,
}

impl Streaming {
    /// For a server listening on `addr`, its streams closed once idle
    /// for `idle` (`None`: never). An unspecified address (all of the
    /// host's) is named by loopback in URLs: kubelet, on this host, is who
    /// connects.
    pub fn new(addr: SocketAddr, idle: Option<std::time::Duration>) -> Streaming {
        let ip = match addr.ip() {
            ip if ip.is_unspecified() && ip.is_ipv4() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            ip if ip.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        Streaming {
            base_url: format!("http://{}", SocketAddr::new(ip, addr.port())),
            tokens: Tokens::default(),
            idle,
        }
    }

    /// The URL where `wanted` is served, once.
    pub(crate) fn url(&self, wanted: Wanted) -> Result<String, Status> {
        let path = match wanted {
            Wanted::Exec { .. } => "exec",
            Wanted::Attach { .. } => "attach",
            Wanted::PortForward { .. } => "portforward",
        };
        match self.tokens.insert(wanted, Instant::now()) {
            Ok(token) => Ok(format!("{}/{path}/{token}", self.base_url)),
            Err(Refused::Full) => Err(Status::resource_exhausted(format!(
                "maximum number of in-flight streaming requests ({}) exceeded",
                tokens::MAX_IN_FLIGHT
            ))),
            Err(Refused::NoRandomness(e)) => {
                Err(Status::internal(format!("no randomness for a token: {e}")))
            }
        }
    }
}

/// Serves the streaming endpoints on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    cri: Cri,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let router = axum::Router::new()
        // POST too: SPDY clients ask with it, and are told what is served.
        .route("/exec/{token}", axum::routing::get(exec).post(exec))
        .route("/attach/{token}", axum::routing::get(attach).post(attach))
        .route(
            "/portforward/{token}",
            axum::routing::get(port_forward).post(port_forward),
        )
        .with_state(cri);
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn exec(State(cri): State<Cri>, Path(token): Path<String>, req: Request) -> Response {
    let Some(Wanted::Exec { container, request }) = cri.wanted(&token) else {
        return not_found();
    };
    let asked = request.asked();
    remote_command(cri, req, asked, move |cri, client| {
        remotecommand::exec(cri, client, container, request)
    })
    .await
}

async fn attach(State(cri): State<Cri>, Path(token): Path<String>, req: Request) -> Response {
    let Some(Wanted::Attach { container, request }) = cri.wanted(&token) else {
        return not_found();
    };
    let asked = request.asked();
    remote_command(cri, req, asked, move |cri, client| {
        remotecommand::attach(cri, client, container, request)
    })
    .await
}

/// Upgrades `req` to the transport it asks for and runs `session` over
/// it, a client of the streams `asked`.
async fn remote_command<F, S>(cri: Cri, req: Request, asked: Asked, session: F) -> Response
where
    F: FnOnce(Cri, remotecommand::Client) -> S + Send + 'static,
    S: Future<Output = ()> + Send + 'static,
{
    match upgrade(req, &channels::PROTOCOLS, &spdy::REMOTECOMMAND).await {
        Upgrade::WebSocket(ws, codec) => ws.on_upgrade(move |socket| {
            session(
                cri,
                websocket::client(socket, codec, asked.stdout, asked.stderr),
            )
        }),
        Upgrade::Spdy(upgrading, version) => {
            tokio::spawn(async move {
                if let Ok(io) = upgrading.await
                    && let Some(client) = spdy::client(TokioIo::new(io), version, asked).await
                {
                    session(cri, client).await;
                }
            });
            spdy::switching(version)
        }
        Upgrade::Refused(r) => r,
    }
}

async fn port_forward(State(cri): State<Cri>, Path(token): Path<String>, req: Request) -> Response {
    let Some(Wanted::PortForward { sandbox, ports }) = cri.wanted(&token) else {
        return not_found();
    };
    match upgrade(req, &portforward::PROTOCOLS, &spdy::PORTFORWARD).await {
        Upgrade::WebSocket(ws, codec) => {
            ws.on_upgrade(move |socket| portforward::serve(cri, socket, codec, sandbox, ports))
        }
        Upgrade::Spdy(upgrading, version) => {
            // Over SPDY the ports are the streams' own, not the request's.
            tokio::spawn(async move {
                if let Ok(io) = upgrading.await {
                    spdy::port_forward(cri, TokioIo::new(io), sandbox).await;
                }
            });
            spdy::switching(version)
        }
        Upgrade::Refused(r) => r,
    }
}

/// The transport a request asks for, its protocol negotiated.
enum Upgrade {
    WebSocket(WebSocketUpgrade, channels::Codec),
    Spdy(hyper::upgrade::OnUpgrade, &'static str),
    Refused(Response),
}

/// A WebSocket upgrade (`Upgrade: websocket`), or SPDY's otherwise, as
/// kubelet's server tells them apart.
async fn upgrade(
    req: Request,
    websocket: &'static [&'static str],
    spdy_versions: &'static [&'static str],
) -> Upgrade {
    let is_websocket = req
        .headers()
        .get(axum::http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if is_websocket {
        let (mut parts, _) = req.into_parts();
        let ws = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
            Ok(ws) => ws,
            Err(rejection) => return Upgrade::Refused(rejection.into_response()),
        };
        match negotiate(ws, websocket, &parts.headers) {
            Ok((ws, codec)) => Upgrade::WebSocket(ws, codec),
            Err(refusal) => Upgrade::Refused(refusal.into_response()),
        }
    } else {
        let mut req = req;
        match spdy::negotiate(req.headers(), spdy_versions) {
            Ok(version) => Upgrade::Spdy(hyper::upgrade::on(&mut req), version),
            Err(refusal) => Upgrade::Refused(*refusal),
        }
    }
}

/// A token that is unknown, used, expired or of another kind of stream:
/// 404, as kubelet's server answers.
fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "404 page not found\n").into_response()
}

/// The subprotocol: the first of `served` the client offers, none when it
/// offers none (binary framing); a client that offers only others is
/// refused (403), as kubelet's server refuses it.
fn negotiate(
    ws: WebSocketUpgrade,
    served: &'static [&'static str],
    headers: &HeaderMap,
) -> Result<(WebSocketUpgrade, channels::Codec), (StatusCode, String)> {
    let offered = headers.contains_key(axum::http::header::SEC_WEBSOCKET_PROTOCOL);
    let ws = ws.protocols(served.iter().copied());
    let selected = ws.selected_protocol().and_then(|p| p.to_str().ok());
    if offered && selected.is_none() {
        let why = format!(
            "no subprotocol offered is served; served: {}",
            served.join(", ")
        );
        return Err((StatusCode::FORBIDDEN, why));
    }
    let codec = channels::Codec::of(selected);
    Ok((ws, codec))
}

impl Cri {
    fn wanted(&self, token: &str) -> Option<Wanted> {
        self.streaming.as_ref()?.tokens.take(token, Instant::now())
    }

    /// A new session's idle clock (see [`idle`]).
    fn idle_clock(&self) -> idle::Idle {
        idle::Idle::new(self.streaming.as_ref().and_then(|s| s.idle))
    }

    /// The URL of a stream, or `Unavailable` when holdfastd serves none.
    pub(crate) fn stream_url(&self, wanted: Wanted) -> Result<String, Status> {
        match &self.streaming {
            Some(streaming) => streaming.url(wanted),
            None => Err(Status::unimplemented(
                "holdfastd serves no CRI streaming (started without a streaming address)",
            )),
        }
    }
}

/// `Exec`, `Attach`, `PortForward`: what kubelet's streaming server checks
/// before it gives a URL (as containerd's plugin: the container must be
/// running now; the stream itself starts the process when it connects).
impl Cri {
    pub(crate) async fn exec_url(&self, r: cri::ExecRequest) -> Result<String, Status> {
        if r.cmd.is_empty() {
            return Err(invalid("cmd", "must not be empty"));
        }
        r.asked().check()?;
        let container = self.running_member(&r.container_id).await?;
        self.stream_url(Wanted::Exec {
            container,
            request: r,
        })
    }

    pub(crate) async fn attach_url(&self, r: cri::AttachRequest) -> Result<String, Status> {
        r.asked().check()?;
        let container = self.running_member(&r.container_id).await?;
        self.stream_url(Wanted::Attach {
            container,
            request: r,
        })
    }

    pub(crate) async fn port_forward_url(
        &self,
        r: cri::PortForwardRequest,
    ) -> Result<String, Status> {
        let sandbox = self
            .sandbox(&r.pod_sandbox_id)
            .await?
            .ok_or_else(|| Status::not_found(format!("pod {:?} not found", r.pod_sandbox_id)))?;
        if sandbox.status != holdfast_core::Status::Running {
            return Err(Status::failed_precondition(format!(
                "pod {} is not ready (its sandbox is not running)",
                sandbox.record.id
            )));
        }
        let ports = r
            .port
            .iter()
            .map(|&p| u16::try_from(p).ok().filter(|&p| p > 0))
            .collect::<Option<Vec<u16>>>()
            .ok_or_else(|| invalid("port", format!("{:?} are not all ports", r.port)))?;
        if ports.len() > portforward::MAX_PORTS {
            return Err(invalid(
                "port",
                format!("at most {} ports in one stream", portforward::MAX_PORTS),
            ));
        }
        self.stream_url(Wanted::PortForward {
            sandbox: sandbox.record.id.to_string(),
            ports,
        })
    }

    /// The full id of the running container of a pod `id` names.
    async fn running_member(&self, id: &str) -> Result<String, Status> {
        let s = self
            .member(id)
            .await?
            .ok_or_else(|| Status::not_found(format!("container {id:?} not found")))?;
        if s.status != holdfast_core::Status::Running {
            return Err(Status::failed_precondition(format!(
                "container {} is not running",
                s.record.id
            )));
        }
        Ok(s.record.id.to_string())
    }
}

/// What an exec or attach asked for: the streams a client opens (SPDY)
/// or is sent (WebSocket).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Asked {
    pub(crate) stdin: bool,
    pub(crate) stdout: bool,
    pub(crate) stderr: bool,
    pub(crate) tty: bool,
}

/// The requests that ask for streams: an exec's and an attach's.
pub(crate) trait AsksStreams {
    fn asked(&self) -> Asked;
}

impl AsksStreams for cri::ExecRequest {
    fn asked(&self) -> Asked {
        Asked {
            stdin: self.stdin,
            stdout: self.stdout,
            stderr: self.stderr,
            tty: self.tty,
        }
    }
}

impl AsksStreams for cri::AttachRequest {
    fn asked(&self) -> Asked {
        Asked {
            stdin: self.stdin,
            stdout: self.stdout,
            stderr: self.stderr,
            tty: self.tty,
        }
    }
}

impl Asked {
    /// kubelet's own checks of an exec or attach: some stream is asked
    /// for, and a terminal has no separate stderr.
    fn check(self) -> Result<(), Status> {
        if self.tty && self.stderr {
            return Err(invalid(
                "stderr",
                "a terminal has no separate stderr (tty is set)",
            ));
        }
        if !self.stdin && !self.stdout && !self.stderr {
            return Err(invalid(
                "stdin",
                "one of stdin, stdout or stderr must be set",
            ));
        }
        Ok(())
    }
}
