//! `docker import`: a filesystem tarball (plain or gzip) uploaded with the
//! request becomes an image of that one layer, with an empty config.

use super::{new_image_name, store_upload};
use crate::params::Params;
use crate::{ApiError, ApiState};
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures_util::StreamExt as _;
use holdfast_adapter_containerd::NewImage;
use serde_json::json;
use std::path::Path;

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
    let dir = tempfile::Builder::new()
        .prefix("import-")
        .tempdir_in(&state.data_root)
        .map_err(|e| ApiError::internal(format!("cannot make room for the upload: {e}")))?;
    let upload = dir.path().join("upload");
    let total = store_upload(&mut data, &upload).await?;
    if total == 0 {
        return Err(ApiError::bad_request("no tarball in the request body"));
    }
    let layer = dir.path().join("layer.tar");
    let (from, to) = (upload.clone(), layer.clone());
    tokio::task::spawn_blocking(move || plain_tar(&from, &to))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))??;
    let new = NewImage {
        name: name.clone(),
        base: None,
        layer: &layer,
        config,
        author: String::new(),
        comment: message,
        created_by: "holdfast import".to_owned(),
        created: crate::render::time(holdfast_engine::engine::wall_now()),
    };
    let id = state
        .adapter
        .create_image(new)
        .await
        .map_err(|e| super::image_error(&name, e))?;
    super::publish(state, "import", &id, &super::familiar(&name));
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

/// The upload as a plain tar: gunzipped if it is gzip; other compressions
/// are refused by name.
fn plain_tar(from: &Path, to: &Path) -> Result<(), ApiError> {
    use std::io::Read as _;
    let internal = |e: std::io::Error| ApiError::internal(format!("reading the upload: {e}"));
    let mut magic = [0u8; 6];
    let n = std::fs::File::open(from)
        .and_then(|mut f| f.read(&mut magic))
        .map_err(internal)?;
    let magic = &magic[..n];
    if magic.starts_with(&[0x1f, 0x8b]) {
        let input = std::fs::File::open(from).map_err(internal)?;
        let mut decoder = flate2::read::GzDecoder::new(std::io::BufReader::new(input));
        let mut out = std::fs::File::create(to).map_err(internal)?;
        std::io::copy(&mut decoder, &mut out)
            .map_err(|e| ApiError::bad_request(format!("the gzip upload is corrupt: {e}")))?;
        return Ok(());
    }
    if magic.starts_with(b"BZh")
        || magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z'])
        || magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
    {
        return Err(ApiError::bad_request(
            "only plain and gzip-compressed tarballs can be imported by holdfast yet",
        ));
    }
    std::fs::rename(from, to).map_err(internal)
}
