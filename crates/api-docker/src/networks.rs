//! `docker network`: the predefined `bridge`, `host` and `none`, and
//! user-defined bridge networks (holdfast_engine::network). A network that any
//! container's record names (running or not) is in use: it cannot be
//! removed or pruned. `connect` and `disconnect` are commands into the
//! core (it decides when an endpoint is made and released); this file only
//! resolves the network and the container and checks the request.

use super::params::{Filters, Params};
use super::{ApiError, ApiState};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdfast_core::{ContainerId, NetworkMode};
use holdfast_engine::network::{DefError, NetworkDef, NetworkRequest};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

impl From<DefError> for ApiError {
    fn from(e: DefError) -> ApiError {
        match e {
            DefError::Invalid(m) => ApiError::bad_request(m),
            DefError::Conflict(m) => ApiError::conflict(m),
            DefError::Other(m) => ApiError::internal(m),
        }
    }
}

/// A network as the API shows it: a bridge network, or `host` / `none`.
#[derive(Clone, Debug)]
enum Shown {
    Bridge(NetworkDef),
    /// `host` or `none`.
    Builtin(&'static str),
}

impl Shown {
    fn name(&self) -> &str {
        match self {
            Shown::Bridge(d) => &d.name,
            Shown::Builtin(n) => n,
        }
    }

    fn id(&self) -> String {
        match self {
            Shown::Bridge(d) => d.id.clone(),
            Shown::Builtin(n) => builtin_id(n),
        }
    }
}

/// A fixed id for `host` and `none`.
fn builtin_id(name: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(format!("holdfast network {name}")))
}

fn all_networks(state: &ApiState) -> Vec<Shown> {
    let mut out: Vec<Shown> = state
        .network
        .networks()
        .into_iter()
        .map(Shown::Bridge)
        .collect();
    out.push(Shown::Builtin("host"));
    out.push(Shown::Builtin("none"));
    out
}

/// By name, full id or unique id prefix.
fn find(state: &ApiState, reference: &str) -> Result<Shown, ApiError> {
    let all = all_networks(state);
    if let Some(n) = all
        .iter()
        .find(|n| n.name() == reference || n.id() == reference)
    {
        return Ok(n.clone());
    }
    let mut by_prefix = all
        .iter()
        .filter(|n| !reference.is_empty() && n.id().starts_with(reference));
    match (by_prefix.next(), by_prefix.next()) {
        (Some(n), None) => Ok(n.clone()),
        (Some(_), Some(_)) => Err(ApiError::bad_request(format!(
            "network {reference} is ambiguous: more than one network's id starts with it"
        ))),
        _ => Err(ApiError::not_found(format!(
            "network {reference} not found"
        ))),
    }
}

/// A container on a network: the network's name, its id and name, whether
/// it runs, and the slot of its interface there (0: its own network's).
type User = (String, ContainerId, String, bool, u8);

/// The networks each container is on (by name: its own network's, then
/// those it was connected to), with its name: every container, running or
/// not. An endpoint still being released counts: the network is in use.
async fn users(state: &ApiState) -> Result<Vec<User>, ApiError> {
    let default = state.network.default_network().map(|d| d.name);
    state
        .engine
        .read(move |v| {
            v.core
                .containers()
                .flat_map(|c| {
                    let cfg = &c.record.config;
                    let own = match cfg.network {
                        // Disconnected from it: on it no more.
                        NetworkMode::Bridge if c.record.own_disconnected => None,
                        NetworkMode::Bridge => cfg.network_name.clone().or(default.clone()),
                        NetworkMode::Host => Some("host".to_owned()),
                        NetworkMode::None => Some("none".to_owned()),
                        NetworkMode::Container => None,
                    };
                    let running = c.status == holdfast_core::Status::Running;
                    let (id, name) = (&c.record.id, &c.record.name);
                    let endpoints = c
                        .record
                        .endpoints
                        .iter()
                        .map(|e| (e.network.clone(), e.slot));
                    own.map(|n| (n, 0))
                        .into_iter()
                        .chain(endpoints)
                        .map(|(net, slot)| (net, id.clone(), name.clone(), running, slot))
                        .collect::<Vec<User>>()
                })
                .collect()
        })
        .await
        .map_err(ApiError::from)
}

fn render(state: &ApiState, n: &Shown, users: &[User]) -> Value {
    let (driver, ipam, labels, created) = match n {
        Shown::Bridge(d) => (
            "bridge",
            json!([{"Subnet": d.subnet, "Gateway": d.gateway.to_string()}]),
            json!(d.labels),
            d.created.clone(),
        ),
        Shown::Builtin("host") => ("host", json!([]), json!({}), String::new()),
        Shown::Builtin(_) => ("null", json!([]), json!({}), String::new()),
    };
    // The containers attached now (dockerd's endpoints); on host and none,
    // those running there.
    let mut containers = serde_json::Map::new();
    for (_, id, name, running, slot) in users.iter().filter(|(net, ..)| net == n.name()) {
        let att = state.network.attachment_of(id, *slot).filter(
            |a| matches!(n, Shown::Bridge(d) if a.network.as_ref().is_some_and(|x| x.id == d.id)),
        );
        let shown = match n {
            Shown::Bridge(_) => att.is_some(),
            Shown::Builtin(_) => *running,
        };
        if !shown {
            continue;
        }
        let ip = att
            .as_ref()
            .and_then(|a| a.ip.map(|ip| format!("{ip}/{}", a.prefix_len)))
            .unwrap_or_default();
        containers.insert(
            id.to_string(),
            json!({
                "Name": name,
                "EndpointID": att.as_ref().map(|a| a.endpoint_id.clone()).unwrap_or_default(),
                "MacAddress": att.as_ref().and_then(|a| a.mac.clone()).unwrap_or_default(),
                "IPv4Address": ip,
                "IPv6Address": "",
            }),
        );
    }
    let options = match n {
        Shown::Bridge(d) => json!({"com.docker.network.bridge.name": d.bridge}),
        Shown::Builtin(_) => json!({}),
    };
    json!({
        "Name": n.name(),
        "Id": n.id(),
        "Created": if created.is_empty() { super::render::ZERO_TIME.to_owned() } else { created },
        "Scope": "local",
        "Driver": driver,
        "EnableIPv6": false,
        "IPAM": { "Driver": "default", "Options": null, "Config": ipam },
        "Internal": false,
        "Attachable": false,
        "Ingress": false,
        "ConfigFrom": { "Network": "" },
        "ConfigOnly": false,
        "Containers": containers,
        "Options": options,
        "Labels": labels,
    })
}

fn labels_of(n: &Shown) -> BTreeMap<String, String> {
    match n {
        Shown::Bridge(d) => d.labels.clone(),
        Shown::Builtin(_) => BTreeMap::new(),
    }
}

fn label_matches(labels: &BTreeMap<String, String>, l: &str) -> bool {
    match l.split_once('=') {
        Some((k, v)) => labels.get(k).is_some_and(|have| have == v),
        None => labels.contains_key(l),
    }
}

fn keep(n: &Shown, f: &Filters, used: bool) -> bool {
    let custom = matches!(n, Shown::Bridge(d) if d.user_defined());
    let driver = match n {
        Shown::Bridge(_) => "bridge",
        Shown::Builtin("host") => "host",
        Shown::Builtin(_) => "null",
    };
    let labels = labels_of(n);
    f.any("name", |v| n.name().contains(v))
        && f.any("id", |v| n.id().starts_with(v))
        && f.any("driver", |v| v == driver)
        && f.any("scope", |v| v == "local")
        && f.any("type", |v| (v == "custom") == custom)
        && f.any("dangling", |v| {
            matches!(v, "true" | "1") == (custom && !used)
        })
        && f.get("label").iter().all(|l| label_matches(&labels, l))
}

/// `GET /networks?filters=..`
pub async fn list(State(state): State<ApiState>, query: RawQuery) -> Result<Response, ApiError> {
    let filters = Params::parse(&query).filters()?;
    filters.only(&["name", "id", "driver", "scope", "type", "label", "dangling"])?;
    let users = users(&state).await?;
    let out: Vec<Value> = all_networks(&state)
        .iter()
        .filter(|n| keep(n, &filters, users.iter().any(|u| u.0 == n.name())))
        .map(|n| render(&state, n, &users))
        .collect();
    Ok(Json(out).into_response())
}

/// `GET /networks/{id}`
pub async fn inspect(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
) -> Result<Response, ApiError> {
    let n = find(&state, &reference)?;
    let users = users(&state).await?;
    Ok(Json(render(&state, &n, &users)).into_response())
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct CreateBody {
    name: Option<String>,
    driver: Option<String>,
    internal: Option<bool>,
    attachable: Option<bool>,
    ingress: Option<bool>,
    config_only: Option<bool>,
    config_from: Option<Value>,
    #[serde(rename = "EnableIPv6")]
    enable_ipv6: Option<bool>,
    #[serde(rename = "IPAM")]
    ipam: Option<IpamBody>,
    options: Option<BTreeMap<String, String>>,
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct IpamBody {
    driver: Option<String>,
    config: Option<Vec<IpamConfigBody>>,
    options: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct IpamConfigBody {
    subnet: Option<String>,
    #[serde(rename = "IPRange")]
    ip_range: Option<String>,
    gateway: Option<String>,
    auxiliary_addresses: Option<BTreeMap<String, String>>,
}

/// dockerd's rule for network names (as for containers, without the slash).
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        && name.len() <= 128
}

/// Checks a create body: what holdfast cannot honour is refused by name.
fn parse_create(body: &[u8], created: String) -> Result<NetworkRequest, ApiError> {
    let b: CreateBody = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON in the request body: {e}")))?;
    let name = b.name.unwrap_or_default();
    if name.is_empty() {
        return Err(ApiError::bad_request("a network needs a name (Name)"));
    }
    if !valid_name(&name) {
        return Err(ApiError::bad_request(format!(
            "invalid network name {name:?}: only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed"
        )));
    }
    if let Some(d) = b
        .driver
        .as_deref()
        .filter(|d| !d.is_empty() && *d != "bridge")
    {
        return Err(ApiError::bad_request(format!(
            "network driver {d:?} is not supported by holdfast: only bridge"
        )));
    }
    let refused = [
        ("--internal", b.internal.unwrap_or(false)),
        ("--attachable", b.attachable.unwrap_or(false)),
        ("--ingress", b.ingress.unwrap_or(false)),
        ("--config-only", b.config_only.unwrap_or(false)),
        ("--config-from", b.config_from.is_some_and(|c| !c.is_null())),
        ("--ipv6", b.enable_ipv6.unwrap_or(false)),
        ("--opt", b.options.is_some_and(|o| !o.is_empty())),
    ];
    if let Some((what, _)) = refused.iter().find(|(_, on)| *on) {
        return Err(ApiError::bad_request(format!(
            "network create {what} is not supported by holdfast yet"
        )));
    }
    let ipam = b.ipam.unwrap_or_default();
    if let Some(d) = ipam
        .driver
        .as_deref()
        .filter(|d| !d.is_empty() && *d != "default")
    {
        return Err(ApiError::bad_request(format!(
            "IPAM driver {d:?} is not supported by holdfast: only default"
        )));
    }
    if ipam.options.is_some_and(|o| !o.is_empty()) {
        return Err(ApiError::bad_request(
            "network create --ipam-opt is not supported by holdfast yet",
        ));
    }
    let mut configs = ipam.config.unwrap_or_default();
    if configs.len() > 1 {
        return Err(ApiError::bad_request(
            "more than one subnet per network is not supported by holdfast yet",
        ));
    }
    let config = configs.pop().unwrap_or_default();
    if config.ip_range.as_deref().is_some_and(|r| !r.is_empty()) {
        return Err(ApiError::bad_request(
            "network create --ip-range is not supported by holdfast yet",
        ));
    }
    if config.auxiliary_addresses.is_some_and(|a| !a.is_empty()) {
        return Err(ApiError::bad_request(
            "network create --aux-address is not supported by holdfast yet",
        ));
    }
    let subnet = config.subnet.filter(|s| !s.is_empty());
    let gateway = config.gateway.filter(|g| !g.is_empty());
    if subnet.as_deref().is_some_and(|s| s.contains(':')) {
        return Err(ApiError::bad_request(
            "IPv6 subnets are not supported by holdfast yet",
        ));
    }
    if gateway.is_some() && subnet.is_none() {
        return Err(ApiError::bad_request(
            "a gateway needs its subnet (--subnet)",
        ));
    }
    Ok(NetworkRequest {
        name,
        subnet,
        gateway,
        labels: b.labels.unwrap_or_default(),
        created,
    })
}

/// `POST /networks/create`
pub async fn create(State(state): State<ApiState>, body: Bytes) -> Result<Response, ApiError> {
    let req = parse_create(
        &body,
        super::render::time(holdfast_engine::engine::wall_now()),
    )?;
    let network = state.network.clone();
    let def = tokio::task::spawn_blocking(move || network.create(req))
        .await
        .map_err(|e| ApiError::internal(format!("network create: {e}")))??;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "Id": def.id, "Warning": "" })),
    )
        .into_response())
}

/// Removes a user network no container names.
async fn remove_def(state: &ApiState, def: NetworkDef, users: &[User]) -> Result<(), ApiError> {
    if let Some((_, id, ..)) = users.iter().find(|(net, ..)| *net == def.name) {
        return Err(ApiError::conflict(format!(
            "error while removing network: network {} id {} has active endpoints (container {id} is on it)",
            def.name, def.id
        )));
    }
    let network = state.network.clone();
    tokio::task::spawn_blocking(move || network.remove(&def))
        .await
        .map_err(|e| ApiError::internal(format!("network remove: {e}")))??;
    Ok(())
}

/// `DELETE /networks/{id}`
pub async fn remove(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
) -> Result<Response, ApiError> {
    let def = match find(&state, &reference)? {
        Shown::Bridge(d) if d.user_defined() => d,
        n => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "{} is a pre-defined network and cannot be removed",
                    n.name()
                ),
            ));
        }
    };
    let _alone = state.network.registry().write().await;
    let users = users(&state).await?;
    remove_def(&state, def, &users).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /networks/prune`: every user network no container names.
pub async fn prune(State(state): State<ApiState>, query: RawQuery) -> Result<Response, ApiError> {
    let filters = Params::parse(&query).filters()?;
    filters.only(&["label", "label!", "until"])?;
    if !filters.get("until").is_empty() {
        return Err(ApiError::bad_request(
            "network prune --filter until is not supported by holdfast yet",
        ));
    }
    let _alone = state.network.registry().write().await;
    let users = users(&state).await?;
    let mut deleted = Vec::new();
    for def in state.network.user_networks() {
        let wanted = filters
            .get("label")
            .iter()
            .all(|l| label_matches(&def.labels, l))
            && !filters
                .get("label!")
                .iter()
                .any(|l| label_matches(&def.labels, l));
        if !wanted || users.iter().any(|(net, ..)| *net == def.name) {
            continue;
        }
        let name = def.name.clone();
        match remove_def(&state, def, &users).await {
            Ok(()) => deleted.push(name),
            // An attachment still on it (a release not done yet): kept.
            Err(e) if e.status == StatusCode::CONFLICT => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Json(json!({ "NetworksDeleted": deleted })).into_response())
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct ConnectBody {
    container: String,
    endpoint_config: Option<EndpointConfigBody>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct EndpointConfigBody {
    #[serde(rename = "IPAMConfig")]
    ipam_config: Option<EndpointIpamBody>,
    aliases: Option<Vec<String>>,
    links: Option<Vec<String>>,
    driver_opts: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct EndpointIpamBody {
    #[serde(rename = "IPv4Address")]
    ipv4_address: Option<String>,
    #[serde(rename = "IPv6Address")]
    ipv6_address: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct DisconnectBody {
    container: String,
    force: bool,
}

fn parse_body<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid body: {e}")))
}

/// The core's answer as dockerd's: 200 with no body when done.
async fn command(state: &ApiState, command: holdfast_core::Command) -> Result<Response, ApiError> {
    match state.engine.command(command).await {
        holdfast_core::Answer::Error(e) => Err(e.into()),
        _ => Ok(StatusCode::OK.into_response()),
    }
}

/// `POST /networks/{id}/connect`: `docker network connect [--alias A]
/// [--ip IP] NET CTR`. Made at the next start, or at once while it runs
/// (answered once made).
pub async fn connect(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: ConnectBody = parse_body(&body)?;
    let def = match find(&state, &reference)? {
        Shown::Bridge(d) => d,
        Shown::Builtin("host") => {
            return Err(ApiError::bad_request(
                "container cannot be disconnected from host network or connected to host network",
            ));
        }
        Shown::Builtin(_) => {
            return Err(ApiError::bad_request(
                "container cannot be connected to multiple networks with one of the networks in private (none) mode",
            ));
        }
    };
    let endpoint = b.endpoint_config.unwrap_or_default();
    let ipam = endpoint.ipam_config.unwrap_or_default();
    if ipam.ipv6_address.as_ref().is_some_and(|a| !a.is_empty())
        || endpoint.links.as_ref().is_some_and(|l| !l.is_empty())
        || endpoint.driver_opts.as_ref().is_some_and(|o| !o.is_empty())
    {
        return Err(ApiError::bad_request(
            "--ip6, --link and --driver-opt of network connect are not supported by holdfast yet",
        ));
    }
    let aliases: Vec<String> = endpoint
        .aliases
        .unwrap_or_default()
        .into_iter()
        .filter(|a| !a.is_empty())
        .collect();
    let ip = ipam.ipv4_address.filter(|a| !a.is_empty());
    if !def.user_defined() && (ip.is_some() || !aliases.is_empty()) {
        return Err(ApiError::bad_request(
            "user specified IP address and network-scoped aliases are supported on user defined networks only",
        ));
    }
    if let Some(ip) = &ip
        && !ip.parse().is_ok_and(|ip| def.may_give(ip))
    {
        return Err(ApiError::bad_request(format!(
            "Invalid address {ip}: It does not belong to any of this network's subnets ({} on {}, gateway {})",
            def.subnet, def.name, def.gateway
        )));
    }
    let id = super::containers::resolve(&state, &b.container).await?;
    // Held until the core has recorded it: a removal of the network
    // checks its users after, or before.
    let _shared = state.network.registry().read().await;
    let connect = holdfast_core::Command::Connect {
        id,
        network: def.name,
        aliases,
        ip,
    };
    command(&state, connect).await
}

/// `POST /networks/{id}/disconnect`: `docker network disconnect [-f] NET
/// CTR`. With `-f`, a network that no longer exists is taken by name.
pub async fn disconnect(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: DisconnectBody = parse_body(&body)?;
    let network = match find(&state, &reference) {
        Ok(n) => n.name().to_owned(),
        Err(_) if b.force => reference,
        Err(e) => return Err(e),
    };
    let id = super::containers::resolve(&state, &b.container).await?;
    command(&state, holdfast_core::Command::Disconnect { id, network }).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_bodies_are_checked() {
        let ok = parse_create(
            br#"{"Name":"app","IPAM":{"Config":[{"Subnet":"10.5.0.0/24","Gateway":"10.5.0.1"}]},"Labels":{"a":"b"}}"#,
            String::new(),
        )
        .expect("valid");
        assert_eq!(ok.name, "app");
        assert_eq!(ok.subnet.as_deref(), Some("10.5.0.0/24"));
        assert_eq!(ok.gateway.as_deref(), Some("10.5.0.1"));
        for (body, says) in [
            (&br#"{}"#[..], "needs a name"),
            (br#"{"Name":"-x"}"#, "invalid network name"),
            (br#"{"Name":"a","Driver":"overlay"}"#, "overlay"),
            (br#"{"Name":"a","Internal":true}"#, "--internal"),
            (br#"{"Name":"a","EnableIPv6":true}"#, "--ipv6"),
            (br#"{"Name":"a","IPAM":{"Config":[{"Subnet":"10.1.0.0/24","IPRange":"10.1.0.0/25"}]}}"#, "--ip-range"),
            (br#"{"Name":"a","IPAM":{"Config":[{"Gateway":"10.1.0.1"}]}}"#, "needs its subnet"),
            (br#"{"Name":"a","IPAM":{"Config":[{"Subnet":"10.1.0.0/24"},{"Subnet":"10.2.0.0/24"}]}}"#, "more than one"),
            (br#"not json"#, "invalid JSON"),
        ] {
            let e = parse_create(body, String::new()).expect_err("refused");
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.message.contains(says), "{says}: {}", e.message);
        }
    }
}
