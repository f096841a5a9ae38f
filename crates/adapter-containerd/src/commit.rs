//! New images from one more layer (`docker commit`, `docker import`): the
//! layer (an uncompressed tar) and a new config written through the content
//! store, a schema 2 manifest over the base image's layers plus the new
//! one, unpacked to the snapshotter and named, all under a lease as an
//! import is, so a failure leaves nothing named behind.

use crate::client::Adapter;
use crate::document::read_manifest;
use crate::error::AdapterError;
use crate::image::{Descriptor, ResolvedImage, bad};
use crate::import::{BlobSource, DOCKER_CONFIG, DOCKER_LAYER, DOCKER_MANIFEST, sha256};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// What the new image is made of.
#[derive(Debug)]
pub struct NewImage<'a> {
    /// The full name to register (normalized); empty: untagged.
    pub name: String,
    /// The image it builds on; `None` for an image of this layer alone.
    pub base: Option<&'a ResolvedImage>,
    /// The new layer: an uncompressed tar in the OCI layer format.
    pub layer: &'a Path,
    /// Keys of the image config's `config` section (Cmd, Env, ...) set
    /// over the base image's.
    pub config: serde_json::Map<String, Value>,
    pub author: String,
    pub comment: String,
    /// What made the layer, for the history (`docker history`).
    pub created_by: String,
    /// RFC 3339.
    pub created: String,
}

impl Adapter {
    /// Writes the image and names it; returns its id (the config digest).
    pub async fn create_image(&self, new: NewImage<'_>) -> Result<String, AdapterError> {
        self.with_lease("commit", |lease| async move {
            self.create_image_leased(&new, &lease).await
        })
        .await
    }

    async fn create_image_leased(
        &self,
        new: &NewImage<'_>,
        lease: &str,
    ) -> Result<String, AdapterError> {
        let (base_config, base_layers) = match new.base {
            Some(base) => {
                // Rewritten as JSON, not through oci-spec's type: keys
                // holdfast does not read (Docker's `Shell`, `OnBuild`, ...)
                // must survive a commit. Resolving the base has already read
                // these same bytes (same digest) through the typed config.
                let config: Value =
                    serde_json::from_slice(&self.read_blob(&base.config_digest).await?)
                        .map_err(|e| bad(format!("the base image's config: {e}")))?;
                let manifest = read_manifest(
                    "the base image's manifest",
                    &self.read_blob(&base.manifest_digest).await?,
                )?;
                for layer in manifest.layers() {
                    let digest = layer.digest().to_string();
                    if !self.hold_content(&digest, lease).await? {
                        return Err(bad(format!("the base image lacks its layer {digest}")));
                    }
                }
                // The base's layer descriptors as they are (urls and
                // annotations too); a serde_json map orders their keys, so
                // the new manifest's bytes do not depend on a HashMap's.
                let layers = manifest
                    .layers()
                    .iter()
                    .map(serde_json::to_value)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| bad(e.to_string()))?;
                (config, layers)
            }
            None => (
                json!({
                    "architecture": crate::image::host_architecture(),
                    "os": "linux",
                    "rootfs": { "type": "layers", "diff_ids": [] },
                }),
                Vec::new(),
            ),
        };
        let path = new.layer.to_owned();
        let (digest, size) = tokio::task::spawn_blocking(move || digest_file(&path))
            .await
            .map_err(|e| bad(format!("hashing the layer: {e}")))??;
        let file = std::fs::File::open(new.layer)?;
        self.write_blob(
            &digest,
            size,
            lease,
            BlobSource::File(file).chunks(),
            |_| {},
        )
        .await?;

        let mut config = base_config;
        let mut section = match config.get("config") {
            Some(Value::Object(section)) => section.clone(),
            _ => serde_json::Map::new(),
        };
        section.extend(new.config.clone());
        config["config"] = Value::Object(section);
        config["created"] = json!(new.created);
        if !new.author.is_empty() {
            config["author"] = json!(new.author);
        }
        let diff_ids = config["rootfs"]["diff_ids"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut diff_ids = diff_ids;
        diff_ids.push(json!(digest));
        config["rootfs"] = json!({ "type": "layers", "diff_ids": diff_ids });
        let mut history = config["history"].as_array().cloned().unwrap_or_default();
        let mut entry = json!({ "created": new.created, "created_by": new.created_by });
        if !new.comment.is_empty() {
            entry["comment"] = json!(new.comment);
        }
        if !new.author.is_empty() {
            entry["author"] = json!(new.author);
        }
        history.push(entry);
        config["history"] = json!(history);
        let config = serde_json::to_vec(&config).map_err(|e| bad(e.to_string()))?;
        let config_digest = sha256(&config);
        let config_size = config.len();
        self.write_document(config, &config_digest, lease).await?;

        let mut layers = base_layers;
        layers.push(json!({ "mediaType": DOCKER_LAYER, "digest": digest, "size": size }));
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST,
            "config": { "mediaType": DOCKER_CONFIG, "digest": config_digest, "size": config_size },
            "layers": layers,
        }))
        .map_err(|e| bad(e.to_string()))?;
        let target = Descriptor {
            media_type: DOCKER_MANIFEST.to_owned(),
            digest: sha256(&manifest),
            size: i64::try_from(manifest.len()).map_err(|_| bad("manifest too large"))?,
        };
        self.write_document(manifest, &target.digest, lease).await?;
        self.label_tree(&target, lease).await?;
        self.unpack(&target, lease, |_| {}).await?;
        // No name: committed untagged, as `docker commit CONTAINER`.
        let name = if new.name.is_empty() {
            crate::image::dangling_name(&target.digest)
        } else {
            new.name.clone()
        };
        self.put_image(&name, &target).await?;
        Ok(config_digest)
    }
}

/// The sha256 digest and size of a file, read in chunks.
fn digest_file(path: &Path) -> Result<(String, i64), AdapterError> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total: u64 = 0;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    let size = i64::try_from(total).map_err(|_| bad("layer too large"))?;
    Ok((format!("sha256:{}", hex::encode(hasher.finalize())), size))
}
