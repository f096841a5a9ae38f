//! `docker import`: a filesystem tarball (plain or gzip) uploaded with the
//! request becomes an image of that one layer, with an empty config (and
//! what `--change` sets). Checked here before the upload is read; made by
//! the engine's images backend.

use super::shared::new_image_name;
use crate::params::Params;
use crate::{ApiError, ApiState};
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures_util::StreamExt as _;
use serde_json::json;

/// `POST /images/create?fromSrc=-&repo=..&tag=..&message=..`
pub async fn import(
    state: &ApiState,
    p: &Params,
    query: Option<&str>,
    body: Body,
) -> Result<Response, ApiError> {
    let checked = check(p).and_then(|named| {
        let mut config = serde_json::Map::new();
        holdfast_engine::dockerfile::apply(&crate::params::changes_of(query), &[], &mut config)?;
        Ok((named, config))
    });
    let mut data = body.into_data_stream();
    let ((name, message), config) = match checked {
        Ok(ok) => ok,
        Err(e) => {
            // Read the upload to the end so the client reads the refusal
            // rather than a broken pipe.
            while let Some(Ok(_)) = data.next().await {}
            return Err(e);
        }
    };
    let id = state
        .engine
        .images()
        .import(&name, message, config, data)
        .await?;
    let mut line = json!({ "status": id }).to_string();
    line.push_str("\r\n");
    let mut r = Response::new(Body::from(Bytes::from(line)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

/// The name to give and the history comment, or why not.
fn check(p: &Params) -> Result<(String, String), ApiError> {
    if p.str("fromSrc") != Some("-") {
        return Err(ApiError::bad_request(
            "docker import from a URL is not supported by holdfast yet: give a file or -",
        ));
    }
    if let Some(platform) = p.str("platform").filter(|s| !s.is_empty())
        && platform != "linux"
        && platform != "linux/amd64"
    {
        return Err(ApiError::bad_request(format!(
            "platform {platform:?} is not supported: holdfast runs linux/amd64"
        )));
    }
    let name = new_image_name(p, "an import")?;
    let message = p
        .str("message")
        .filter(|m| !m.is_empty())
        .map_or_else(|| "Imported from -".to_owned(), str::to_owned);
    Ok((name, message))
}
