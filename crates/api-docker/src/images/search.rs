//! `GET /images/search`: a registry's search (Docker Hub's, or the one the
//! term names: `localhost:5000/app`), with the client's credentials
//! (`X-Registry-Auth`), filtered as dockerd filters it.

use super::shared::decode_registry_auth;
use crate::params::Params;
use crate::{ApiError, ApiState};
use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue};
use holdfast_engine::backend::images::SearchFilter;
use serde_json::{Value, json};

pub async fn search(
    State(state): State<ApiState>,
    query: RawQuery,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(&query);
    let term = p.str("term").unwrap_or_default();
    let limit = p.int::<u32>("limit")?.unwrap_or(0);
    let filters = p.filters()?;
    filters.only(&["is-automated", "is-official", "stars"])?;
    let invalid =
        |key: &str, value: &str| ApiError::bad_request(format!("invalid filter '{key}={value}'"));
    // Go's filters.GetBoolOrDefault: true/1 or false/0, any case.
    let flag = |key: &str| -> Result<Option<bool>, ApiError> {
        match filters.get(key).first() {
            None => Ok(None),
            Some(v) if v.eq_ignore_ascii_case("true") || v == "1" => Ok(Some(true)),
            Some(v) if v.eq_ignore_ascii_case("false") || v == "0" => Ok(Some(false)),
            Some(v) => Err(invalid(key, v)),
        }
    };
    // Several `stars` values: the largest wins, as dockerd takes them.
    let mut min_stars = None;
    for v in filters.get("stars") {
        let stars: u64 = v.parse().map_err(|_| invalid("stars", v))?;
        min_stars = Some(min_stars.map_or(stars, |m: u64| m.max(stars)));
    }
    let filter = SearchFilter {
        official: flag("is-official")?,
        automated: flag("is-automated")?,
        min_stars,
    };
    let auth = decode_registry_auth(headers.get("X-Registry-Auth").map(HeaderValue::as_bytes))?;
    let found = state
        .engine
        .images()
        .search(term, limit, &filter, &auth)
        .await?;
    let body: Vec<Value> = found
        .iter()
        .map(|r| {
            json!({
                "star_count": r.star_count,
                "is_official": r.is_official,
                "name": r.name,
                "is_automated": r.is_automated,
                "description": r.description,
            })
        })
        .collect();
    Ok(Json(Value::Array(body)))
}
