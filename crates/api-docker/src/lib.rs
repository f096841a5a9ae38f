//! The Docker Engine API on a unix socket. The whole surface is assembled in
//! [`router`]; each endpoint family has a file (or a folder) that only
//! parses, makes one call on the engine's handle (a command for the core,
//! or its family's backend) and renders; `state.rs` maps every answer onto
//! HTTP in one place.
//!
//! Versions: every path works unprefixed and with a `/v1.N` prefix for N from
//! [`MIN_API_VERSION`] to [`API_VERSION`]; newer or older prefixes are
//! refused with dockerd's message.

#![recursion_limit = "256"]

mod absent;
mod archive;
mod changes;
mod commit;
mod containers;
mod df;
mod edit;
mod error;
mod exec;
pub mod fuzz;
mod health;
mod images;
mod networks;
mod params;
mod prune;
mod render;
mod resources;
mod state;
mod streams;
mod system;
mod volumes;
mod websocket;

pub use containers::decode_create;
pub use error::ApiError;
pub use exec::decode_exec_create;
pub use images::{PullRequest, PushRequest, decode_pull, decode_push, decode_registry_auth};
pub use params::{Filters, decode_query};
pub use render::parse_client_time;
pub use state::ApiState;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use holdfast_engine::engine::EngineHandle;
use std::future::Future;
use std::time::Duration;

/// The newest API version whose semantics holdfast implements for what it serves.
pub const API_VERSION: &str = "1.43";
/// The oldest version a client may ask for (as dockerd 24).
pub const MIN_API_VERSION: &str = "1.24";
/// Largest JSON request body (a create body is a few KiB).
const JSON_BODY_MAX_BYTES: usize = 1 << 20;

/// The whole API surface at a glance.
pub fn router(state: ApiState) -> Router {
    let json_routes = Router::new()
        .route("/_ping", get(system::ping).head(system::ping))
        .route("/version", get(system::version))
        .route("/info", get(system::info))
        .route("/events", get(system::events))
        .route("/containers/create", post(containers::create))
        .route("/containers/json", get(containers::list))
        .route("/containers/prune", post(prune::containers))
        .route(
            "/containers/{id}",
            axum::routing::delete(containers::remove),
        )
        .route("/containers/{id}/json", get(containers::inspect))
        .route("/containers/{id}/start", post(containers::start))
        .route("/containers/{id}/stop", post(containers::stop))
        .route("/containers/{id}/restart", post(containers::restart))
        .route("/containers/{id}/kill", post(containers::kill))
        .route("/containers/{id}/wait", post(containers::wait))
        .route("/containers/{id}/logs", get(streams::logs))
        .route("/containers/{id}/attach", post(streams::attach))
        .route("/containers/{id}/resize", post(containers::resize))
        .route("/containers/{id}/changes", get(changes::diff))
        .route("/containers/{id}/top", get(resources::top))
        .route("/containers/{id}/stats", get(resources::stats))
        .route("/containers/{id}/exec", post(exec::create))
        .route("/exec/{id}/start", post(exec::start))
        .route("/exec/{id}/json", get(exec::inspect))
        .route("/exec/{id}/resize", post(exec::resize))
        .route("/containers/{id}/pause", post(containers::pause))
        .route("/containers/{id}/unpause", post(containers::unpause))
        .route("/containers/{id}/rename", post(edit::rename))
        .route("/containers/{id}/update", post(edit::update))
        .route("/volumes", get(volumes::list))
        .route("/volumes/create", post(volumes::create))
        .route("/volumes/prune", post(volumes::prune))
        .route(
            "/volumes/{name}",
            get(volumes::inspect)
                .delete(volumes::remove)
                .put(absent::no_cluster_volumes),
        )
        // What is not built yet says so, naming it (501), never pretends.
        .route("/commit", post(commit::commit))
        .route("/build", post(containers::unsupported))
        .route("/build/prune", post(absent::build_prune))
        .route("/session", post(absent::no_session))
        .route("/images/search", get(images::search))
        .route("/distribution/{*name}", get(images::distribution))
        .route("/containers/{id}/attach/ws", get(streams::attach_websocket))
        .route("/images/prune", post(prune::images))
        .route("/system/df", get(df::system_df))
        .route("/networks", get(networks::list))
        .route("/networks/create", post(networks::create))
        .route("/networks/prune", post(networks::prune))
        .route(
            "/networks/{id}",
            get(networks::inspect).delete(networks::remove),
        )
        .route("/networks/{id}/connect", post(networks::connect))
        .route("/networks/{id}/disconnect", post(networks::disconnect))
        .route("/images/json", get(images::list))
        .route("/images/create", post(images::create))
        .route("/auth", post(images::login))
        .route(
            "/images/{*rest}",
            get(images::by_name_get)
                .post(images::by_name_post)
                .delete(images::remove),
        )
        .layer(DefaultBodyLimit::max(JSON_BODY_MAX_BYTES));
    // A tarball of any size, streamed to disk.
    let load = Router::new()
        .route("/images/load", post(images::load))
        .route(
            "/containers/{id}/archive",
            get(archive::get).head(archive::head).put(archive::put),
        )
        .route("/containers/{id}/export", get(archive::export))
        .layer(DefaultBodyLimit::disable());
    json_routes
        .merge(absent_families())
        .merge(load)
        .fallback(not_found)
        .with_state(state)
}

/// Swarm mode and plugins, which holdfast does not run: answered as
/// dockerd answers on a node in no swarm and with no plugin installed.
fn absent_families() -> Router<ApiState> {
    use axum::routing::{any, delete};
    let mut r = Router::new()
        .route("/swarm", get(absent::not_a_swarm_manager))
        .route("/swarm/init", post(absent::no_swarm_mode))
        .route("/swarm/join", post(absent::no_swarm_mode))
        .route("/swarm/leave", post(absent::not_in_a_swarm))
        .route("/swarm/update", post(absent::not_a_swarm_manager))
        .route("/swarm/unlock", post(absent::not_a_swarm_manager))
        .route("/swarm/unlockkey", get(absent::not_a_swarm_manager));
    for family in ["nodes", "services", "tasks", "secrets", "configs"] {
        r = r
            .route(&format!("/{family}"), get(absent::not_a_swarm_manager))
            .route(
                &format!("/{family}/{{id}}"),
                any(absent::not_a_swarm_manager),
            )
            .route(
                &format!("/{family}/{{id}}/{{action}}"),
                any(absent::not_a_swarm_manager),
            );
    }
    r.route("/services/create", post(absent::not_a_swarm_manager))
        .route("/secrets/create", post(absent::not_a_swarm_manager))
        .route("/configs/create", post(absent::not_a_swarm_manager))
        .route("/plugins", get(absent::plugins))
        .route("/plugins/privileges", get(absent::no_plugins))
        .route("/plugins/pull", post(absent::no_plugins))
        .route("/plugins/create", post(absent::no_plugins))
        .route("/plugins/{name}", delete(absent::no_such_plugin))
        .route("/plugins/{name}/json", get(absent::no_such_plugin))
        .route("/plugins/{name}/{action}", post(absent::no_such_plugin))
}

async fn not_found(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "page not found: {} {} is not an endpoint holdfast serves",
            req.method(),
            req.uri().path()
        ),
    )
}

/// Strips a `/v1.N` prefix after checking the version, and adds the headers
/// dockerd puts on every answer.
async fn strip_version(mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    tracing::debug!(method = %req.method(), uri = %req.uri(), "request");
    if let Some(rest) = path.strip_prefix("/v")
        && let Some((version, tail)) = rest.split_once('/')
        && version.starts_with(|c: char| c.is_ascii_digit())
    {
        match check_version(version) {
            Ok(asked) => {
                req.extensions_mut().insert(asked);
            }
            Err(e) => return with_headers(e.into_response()),
        }
        let tail = format!("/{tail}");
        let new_uri = match req.uri().query() {
            Some(q) => format!("{tail}?{q}"),
            None => tail,
        };
        match new_uri.parse() {
            Ok(uri) => *req.uri_mut() = uri,
            Err(_) => {
                return with_headers(
                    ApiError::new(StatusCode::BAD_REQUEST, "malformed request path")
                        .into_response(),
                );
            }
        }
    }
    with_headers(json_errors(next.run(req).await).await)
}

/// Rejections made by the framework itself (a body over the limit, a
/// malformed path) come as plain text; clients expect `{"message": ...}`.
async fn json_errors(response: Response) -> Response {
    let status = response.status();
    let is_text = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_none_or(|v| v.as_bytes().starts_with(b"text/plain"));
    if !(status.is_client_error() || status.is_server_error()) || !is_text {
        return response;
    }
    let body = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body).trim().to_owned();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    ApiError::new(status, message).into_response()
}

fn with_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        "Api-Version",
        axum::http::HeaderValue::from_static(API_VERSION),
    );
    headers.insert(
        "Docker-Experimental",
        axum::http::HeaderValue::from_static("false"),
    );
    headers.insert("Ostype", axum::http::HeaderValue::from_static("linux"));
    headers.insert(
        "Server",
        axum::http::HeaderValue::from_static(concat!(
            "holdfast/",
            env!("CARGO_PKG_VERSION"),
            " (linux)"
        )),
    );
    response
}

/// The API version a request's path asked for (`/v1.41/...`); a request
/// without one asks for [`API_VERSION`]. For the few answers whose shape
/// changed between versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct AskedVersion(pub u32, pub u32);

/// `1.N` within [MIN_API_VERSION, API_VERSION].
fn check_version(version: &str) -> Result<AskedVersion, ApiError> {
    let parse = |v: &str| -> Option<(u32, u32)> {
        let (major, minor) = v.split_once('.')?;
        Some((major.parse().ok()?, minor.parse().ok()?))
    };
    let bad = || {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("invalid API version {version:?}"),
        )
    };
    let asked = parse(version).ok_or_else(bad)?;
    let max = parse(API_VERSION).ok_or_else(bad)?;
    let min = parse(MIN_API_VERSION).ok_or_else(bad)?;
    if asked > max {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "client version {version} is too new. Maximum supported API version is {API_VERSION}"
            ),
        ));
    }
    if asked < min {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "client version {version} is too old. Minimum supported API version is {MIN_API_VERSION}, please upgrade your client to a newer version"
            ),
        ));
    }
    Ok(AskedVersion(asked.0, asked.1))
}

/// Serves until `shutdown` resolves, then gives open requests a few seconds
/// (streams such as `docker events` never end by themselves).
pub async fn serve(
    listener: tokio::net::UnixListener,
    engine: EngineHandle,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let state = ApiState { engine };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // Outside the router, so that the rewritten path is what gets routed.
    let app = tower::Layer::layer(&middleware::from_fn(strip_version), router(state));
    let app = axum::ServiceExt::<Request>::into_make_service(app);
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        shutdown.await;
        let _ = stop_tx.send(());
    });
    let server = server.into_future();
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => {
            if let Err(e) = result {
                tracing::error!(error = %e, "API server failed");
            }
            return;
        }
        _ = stop_rx => {}
    }
    if tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .is_err()
    {
        tracing::info!("closing streams still open after 5 s");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_in_range_pass() {
        assert!(check_version("1.43").is_ok());
        assert!(check_version("1.24").is_ok());
        assert!(check_version("1.41").is_ok());
        let new = check_version("1.50").expect_err("too new");
        assert!(new.message.contains("too new"), "{}", new.message);
        assert!(check_version("1.12").is_err());
        assert!(check_version("1.x").is_err());
    }
}
