//! `docker network`: the predefined `bridge`, `host` and `none`, and
//! user-defined bridge networks. This file parses and checks the requests
//! and renders the networks; the engine's networks backend finds them,
//! refuses to remove one in use, and sends `connect` and `disconnect` to
//! the core (which decides when an endpoint is made and released).

use super::params::{Filters, Params};
use super::state::{Done, respond};
use super::{ApiError, ApiState};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdfast_core::Answer;
use holdfast_engine::backend::networks::{Listed, NetworkDetails};
use holdfast_engine::network::NetworkRequest;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

fn render(details: &NetworkDetails) -> Value {
    let n = &details.network;
    let (driver, ipam, labels, created) = match n {
        Listed::Bridge(d) => (
            "bridge",
            json!([{"Subnet": d.subnet, "Gateway": d.gateway.to_string()}]),
            json!(d.labels),
            d.created.clone(),
        ),
        Listed::Builtin("host") => ("host", json!([]), json!({}), String::new()),
        Listed::Builtin(_) => ("null", json!([]), json!({}), String::new()),
    };
    let containers: serde_json::Map<String, Value> = details
        .attached
        .iter()
        .map(|m| {
            let shown = json!({
                "Name": m.name,
                "EndpointID": m.endpoint_id,
                "MacAddress": m.mac.clone().unwrap_or_default(),
                "IPv4Address": m.ipv4,
                "IPv6Address": "",
            });
            (m.id.to_string(), shown)
        })
        .collect();
    // The options given at its create, as dockerd shows them: none for a
    // user network (holdfast refuses `--opt`; clients such as
    // docker-compose compare these with what they asked for), the
    // bridge's name for the default one, which its configuration names.
    let options = match n {
        Listed::Bridge(d) if !d.user_defined() => {
            json!({"com.docker.network.bridge.name": d.bridge})
        }
        Listed::Bridge(_) | Listed::Builtin(_) => json!({}),
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
        "Attachable": matches!(n, Listed::Bridge(d) if d.attachable),
        "Ingress": false,
        "ConfigFrom": { "Network": "" },
        "ConfigOnly": false,
        "Containers": containers,
        "Options": options,
        "Labels": labels,
    })
}

fn labels_of(n: &Listed) -> BTreeMap<String, String> {
    match n {
        Listed::Bridge(d) => d.labels.clone(),
        Listed::Builtin(_) => BTreeMap::new(),
    }
}

fn label_matches(labels: &BTreeMap<String, String>, l: &str) -> bool {
    match l.split_once('=') {
        Some((k, v)) => labels.get(k).is_some_and(|have| have == v),
        None => labels.contains_key(l),
    }
}

fn keep(n: &Listed, f: &Filters, used: bool) -> bool {
    let custom = matches!(n, Listed::Bridge(d) if d.user_defined());
    let driver = match n {
        Listed::Bridge(_) => "bridge",
        Listed::Builtin("host") => "host",
        Listed::Builtin(_) => "null",
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
    let out: Vec<Value> = state
        .engine
        .networks()
        .list()
        .await?
        .iter()
        .filter(|n| keep(&n.network, &filters, n.used))
        .map(render)
        .collect();
    Ok(Json(out).into_response())
}

/// `GET /networks/{id}?verbose=..&scope=..`. Every network of holdfast's
/// is a local one: asked for another scope, it is not found (dockerd's
/// answer), and `verbose` (the services of a swarm network) adds nothing,
/// as it adds nothing to dockerd's local networks; a value that is not a
/// boolean is refused as dockerd refuses it.
pub async fn inspect(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    if let Some(v) = p.str("verbose").filter(|v| !v.is_empty())
        && go_bool(v).is_none()
    {
        return Err(ApiError::bad_request(format!(
            "invalid value for verbose: {v}"
        )));
    }
    let n = state.engine.networks().inspect(&reference).await?;
    if p.str("scope")
        .is_some_and(|s| !s.is_empty() && s != "local")
    {
        return Err(ApiError::not_found(format!(
            "network {reference} not found"
        )));
    }
    Ok(Json(render(&n)).into_response())
}

/// Go's `strconv.ParseBool`, which dockerd reads some flags with.
fn go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
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
fn parse_create(body: &[u8]) -> Result<NetworkRequest, ApiError> {
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
        // Any container may attach to a local bridge network: dockerd
        // accepts the flag there and shows it, as holdfast does.
        attachable: b.attachable.unwrap_or(false),
        ..NetworkRequest::default()
    })
}

/// `POST /networks/create`
pub async fn create(State(state): State<ApiState>, body: Bytes) -> Result<Response, ApiError> {
    let req = parse_create(&body)?;
    let def = state.engine.networks().create(req).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "Id": def.id, "Warning": "" })),
    )
        .into_response())
}

/// `DELETE /networks/{id}`
pub async fn remove(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
) -> Result<Response, ApiError> {
    state.engine.networks().remove(&reference).await?;
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
    let deleted = state
        .engine
        .networks()
        .prune(|def| {
            filters
                .get("label")
                .iter()
                .all(|l| label_matches(&def.labels, l))
                && !filters
                    .get("label!")
                    .iter()
                    .any(|l| label_matches(&def.labels, l))
        })
        .await?;
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

/// `POST /networks/{id}/connect`: `docker network connect [--alias A]
/// [--ip IP] NET CTR`. Made at the next start, or at once while it runs
/// (answered once made).
pub async fn connect(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: ConnectBody = parse_body(&body)?;
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
    let answer = state
        .engine
        .networks()
        .connect(&reference, &b.container, aliases, ip)
        .await;
    done(answer)
}

/// `POST /networks/{id}/disconnect`: `docker network disconnect [-f] NET
/// CTR`. With `-f`, a network that no longer exists is taken by name.
pub async fn disconnect(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: DisconnectBody = parse_body(&body)?;
    let answer = state
        .engine
        .networks()
        .disconnect(&reference, &b.container, b.force)
        .await;
    done(answer)
}

/// The core's answer as dockerd's: 200 with no body when done.
fn done(answer: Answer) -> Result<Response, ApiError> {
    respond(answer, Done::Always(StatusCode::OK))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_bodies_are_checked() {
        let ok = parse_create(
            br#"{"Name":"app","IPAM":{"Config":[{"Subnet":"10.5.0.0/24","Gateway":"10.5.0.1"}]},"Labels":{"a":"b"}}"#,
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
            let e = parse_create(body).expect_err("refused");
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.message.contains(says), "{says}: {}", e.message);
        }
    }
}
