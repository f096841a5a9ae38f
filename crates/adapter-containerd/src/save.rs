//! `docker save`: images as a docker-archive tarball (what `docker load`
//! reads): `<config hex>.json`, `<diff id hex>/layer.tar` (uncompressed,
//! checked against its diff id), `manifest.json` and `repositories`.

use crate::client::Adapter;
use crate::document::read_manifest;
use crate::error::AdapterError;
use crate::image::{Descriptor, ResolvedImage, bad};
use containerd_client::services::v1::ReadContentRequest;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use tokio::io::AsyncWriteExt as _;

/// One image to save, under the names given.
#[derive(Debug)]
pub struct SavedImage<'a> {
    pub image: &'a ResolvedImage,
    /// `repo:tag` as Docker shows them (`busybox:latest`).
    pub tags: Vec<String>,
}

impl Adapter {
    /// Writes the docker-archive of `images` to `out`, using `work` (an
    /// empty directory) for the layers on the way.
    pub async fn save_images(
        &self,
        images: &[SavedImage<'_>],
        work: &Path,
        out: &Path,
    ) -> Result<(), AdapterError> {
        let mut files: Vec<(String, PathBuf)> = Vec::new();
        let mut written: BTreeSet<String> = BTreeSet::new();
        let mut manifest = Vec::new();
        let mut repositories: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for saved in images {
            let image = saved.image;
            let config_hex = hex_of(&image.config_digest)?;
            let config_name = format!("{config_hex}.json");
            if written.insert(config_name.clone()) {
                let config = self.read_blob(&image.config_digest).await?;
                let path = work.join(&config_name);
                tokio::fs::write(&path, &config).await?;
                files.push((config_name.clone(), path));
            }
            let image_manifest = read_manifest(
                &format!("the manifest of {}", image.name),
                &self.read_blob(&image.manifest_digest).await?,
            )?;
            let layers: Vec<Descriptor> = image_manifest
                .layers()
                .iter()
                .map(Descriptor::from_oci)
                .collect::<Result<_, _>>()?;
            if layers.len() != image.diff_ids.len() {
                return Err(bad(format!(
                    "{}: {} layers but {} diff ids",
                    image.name,
                    layers.len(),
                    image.diff_ids.len()
                )));
            }
            let mut layer_names = Vec::new();
            for (layer, diff_id) in layers.iter().zip(&image.diff_ids) {
                let name = format!("{}/layer.tar", hex_of(diff_id)?);
                if written.insert(name.clone()) {
                    let dir = work.join(hex_of(diff_id)?);
                    tokio::fs::create_dir_all(&dir).await?;
                    let blob = dir.join("blob");
                    self.read_blob_to(&layer.digest, &blob).await?;
                    let tar = dir.join("layer.tar");
                    let (from, to, want) = (blob.clone(), tar.clone(), diff_id.clone());
                    tokio::task::spawn_blocking(move || uncompressed(&from, &to, &want))
                        .await
                        .map_err(|e| bad(format!("layer: {e}")))??;
                    tokio::fs::remove_file(&blob).await?;
                    files.push((name.clone(), tar));
                }
                layer_names.push(name);
            }
            for tag in &saved.tags {
                if let Some((repo, t)) = tag.rsplit_once(':').filter(|(r, _)| !r.is_empty()) {
                    let top = image.diff_ids.last().map(|d| hex_of(d)).transpose()?;
                    repositories
                        .entry(repo.to_owned())
                        .or_default()
                        .insert(t.to_owned(), top.unwrap_or_default());
                }
            }
            manifest.push(json!({
                "Config": config_name,
                "RepoTags": saved.tags,
                "Layers": layer_names,
            }));
        }
        let manifest_path = work.join("manifest.json");
        let bytes = serde_json::to_vec(&manifest).map_err(|e| bad(e.to_string()))?;
        tokio::fs::write(&manifest_path, bytes).await?;
        files.push(("manifest.json".to_owned(), manifest_path));
        let repositories_path = work.join("repositories");
        let bytes = serde_json::to_vec(&repositories).map_err(|e| bad(e.to_string()))?;
        tokio::fs::write(&repositories_path, bytes).await?;
        files.push(("repositories".to_owned(), repositories_path));
        let out = out.to_owned();
        tokio::task::spawn_blocking(move || write_tar(&files, &out))
            .await
            .map_err(|e| bad(format!("writing the archive: {e}")))?
    }

    /// Streams a blob of any size from the content store into a file.
    async fn read_blob_to(&self, digest: &str, path: &Path) -> Result<(), AdapterError> {
        let mut content = self.content();
        let req = self.req(ReadContentRequest {
            digest: digest.to_owned(),
            offset: 0,
            size: 0,
        });
        let timeout = self.config().import_call_timeout;
        let mut stream = self
            .rpc_within("Content.Read", timeout, content.read(req))
            .await?;
        let mut file = tokio::fs::File::create(path).await?;
        let mut hasher = Sha256::new();
        loop {
            match tokio::time::timeout(timeout, stream.message()).await {
                Err(_) => {
                    return Err(AdapterError::Deadline {
                        what: "Content.Read",
                        timeout,
                    });
                }
                Ok(Err(status)) => return Err(AdapterError::rpc("Content.Read")(status)),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(chunk))) => {
                    hasher.update(&chunk.data);
                    file.write_all(&chunk.data).await?;
                }
            }
        }
        file.flush().await?;
        let got = format!("sha256:{}", hex::encode(hasher.finalize()));
        if got != digest {
            return Err(bad(format!("content {digest} reads as {got}")));
        }
        Ok(())
    }
}

fn hex_of(digest: &str) -> Result<String, AdapterError> {
    digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_owned)
        .ok_or_else(|| bad(format!("not a sha256 digest: {digest}")))
}

/// The layer at `from` (gzip or plain) uncompressed into `to`; its digest
/// must be `diff_id`.
fn uncompressed(from: &Path, to: &Path, diff_id: &str) -> Result<(), AdapterError> {
    let mut magic = [0u8; 2];
    let n = std::fs::File::open(from)?.read(&mut magic)?;
    let input = std::io::BufReader::new(std::fs::File::open(from)?);
    let mut reader: Box<dyn Read> = if n == 2 && magic == [0x1f, 0x8b] {
        Box::new(flate2::read::GzDecoder::new(input))
    } else {
        Box::new(input)
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(to)?);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])?;
    }
    out.flush()?;
    let got = format!("sha256:{}", hex::encode(hasher.finalize()));
    if got != diff_id {
        return Err(bad(format!("a layer uncompresses to {got}, not {diff_id}")));
    }
    Ok(())
}

fn write_tar(files: &[(String, PathBuf)], out: &Path) -> Result<(), AdapterError> {
    let mut builder = tar::Builder::new(std::io::BufWriter::new(std::fs::File::create(out)?));
    for (name, path) in files {
        let mut file = std::fs::File::open(path)?;
        let mut header = tar::Header::new_gnu();
        header.set_size(file.metadata()?.len());
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, name, &mut file)?;
    }
    builder.into_inner()?.flush()?;
    Ok(())
}
