//! Images in containerd's image store: references, resolution to the
//! linux/amd64 manifest and config, chain ids.

use crate::client::Adapter;
use crate::document::{Document, MAX_JSON_BYTES, pick_platform, read_config, read_document};
use crate::error::AdapterError;
use containerd_client::services::v1::{
    DeleteImageRequest, GetImageRequest, Image, ListImagesRequest, ReadContentRequest,
};
use containerd_client::tonic::Code;
use oci_spec::image::ImageManifest;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};

const MAX_INDEX_DEPTH: usize = 4;

/// The parts of an image config that shape a container (Docker's names),
/// as [`crate::document::read_config`] reads them: oci-spec's typed config
/// plus Docker's `Healthcheck`, with labels, volumes and ports ordered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageConfig {
    pub env: Option<Vec<String>>,
    pub cmd: Option<Vec<String>>,
    pub entrypoint: Option<Vec<String>>,
    pub working_dir: Option<String>,
    pub user: Option<String>,
    pub stop_signal: Option<String>,
    pub labels: Option<BTreeMap<String, String>>,
    /// `VOLUME` paths.
    pub volumes: Option<BTreeSet<String>>,
    /// `EXPOSE`d ports as `port/proto`.
    pub exposed_ports: Option<BTreeSet<String>>,
    /// `HEALTHCHECK`, as Docker writes it (checked by the daemon).
    pub healthcheck: Option<serde_json::Value>,
}

/// One step of an image config's `history` (`docker history`), oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistoryEntry {
    /// RFC 3339, as written; empty when the step has no time.
    pub created: String,
    pub created_by: String,
    pub comment: String,
    /// The step made no layer (`ENV`, `CMD`, ...).
    pub empty_layer: bool,
}

/// An image as a container is made from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedImage {
    /// The name in containerd's image store.
    pub name: String,
    /// The image's target (an index or a manifest).
    pub target_digest: String,
    /// The linux/amd64 manifest.
    pub manifest_digest: String,
    pub config_digest: String,
    pub config: ImageConfig,
    pub diff_ids: Vec<String>,
    /// The chain id of the top layer: the snapshot a container's rootfs is
    /// prepared from.
    pub chain_id: String,
    /// The config's `history`, oldest first.
    pub history: Vec<HistoryEntry>,
    /// Docker's legacy `container_config`, when the config has one.
    pub container_config: Option<serde_json::Value>,
    /// The config's `created` (RFC 3339, as written), when it has one.
    pub created: Option<String>,
    /// The config's `architecture` and `os`.
    pub architecture: String,
    pub os: String,
}

/// One image of [`Adapter::list_images`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageSummary {
    pub name: String,
    pub target_digest: String,
    pub target_media_type: String,
    pub target_size: i64,
}

/// What targets resolved to (see [`Adapter::resolve_listed`]), by target
/// digest. A lock held for a map operation only, never across a call.
#[derive(Debug, Default)]
pub(crate) struct ResolvedTargets(std::sync::Mutex<HashMap<String, ResolvedImage>>);

impl ResolvedTargets {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, ResolvedImage>> {
        // a panic elsewhere while it was held leaves a map still whole
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn get(&self, target_digest: &str) -> Option<ResolvedImage> {
        self.map().get(target_digest).cloned()
    }

    fn keep(&self, resolved: &ResolvedImage) {
        self.map()
            .insert(resolved.target_digest.clone(), resolved.clone());
    }

    fn retain(&self, listed: &[ImageSummary]) {
        let targets: BTreeSet<&str> = listed.iter().map(|i| i.target_digest.as_str()).collect();
        self.map()
            .retain(|digest, _| targets.contains(digest.as_str()));
    }
}

/// A layer of a manifest: what the importer and unpacker need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: i64,
}

/// Each blob of `layers` once, in their order: an image may list the same
/// layer twice, and it is fetched or uploaded once.
pub(crate) fn distinct_layers(layers: &[Descriptor]) -> Vec<&Descriptor> {
    let mut seen = std::collections::BTreeSet::new();
    layers.iter().filter(|l| seen.insert(&l.digest)).collect()
}

impl Descriptor {
    /// The parts of a typed descriptor the importer and unpacker use.
    pub(crate) fn from_oci(d: &oci_spec::image::Descriptor) -> Result<Descriptor, AdapterError> {
        Ok(Descriptor {
            media_type: d.media_type().to_string(),
            digest: d.digest().to_string(),
            size: i64::try_from(d.size())
                .map_err(|_| bad(format!("{} is too large", d.digest())))?,
        })
    }

    pub(crate) fn to_proto(&self) -> containerd_client::types::Descriptor {
        containerd_client::types::Descriptor {
            media_type: self.media_type.clone(),
            digest: self.digest.clone(),
            size: self.size,
            annotations: Default::default(),
        }
    }
}

pub(crate) fn bad(message: impl Into<String>) -> AdapterError {
    AdapterError::Image(message.into())
}

/// The repository containerd keeps an image under once no user's name is
/// left to it (a commit without a name, an archive that names none, a
/// tag, pull or load that moved its last name away): an untagged image,
/// `<none>:<none>` to Docker's clients. moby's own containerd image store
/// keeps such images under the same reserved name and hides it; so does
/// holdfast (no client ever sees or names it).
pub const DANGLING_REPOSITORY: &str = "moby-dangling";

/// The reserved name of the untagged image whose target is `digest`.
pub fn dangling_name(digest: &str) -> String {
    format!("{DANGLING_REPOSITORY}@{digest}")
}

/// The repository of a normalized name: without its tag or digest.
pub fn repository_of(name: &str) -> String {
    let name = name.split_once('@').map_or(name, |(n, _)| n);
    match name.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo.to_owned(),
        _ => name.to_owned(),
    }
}

/// The name a registry knows the content `digest` of `name`'s repository
/// by (`docker.io/library/busybox@sha256:…`): an image's `RepoDigests`.
pub fn digest_reference(name: &str, digest: &str) -> String {
    format!("{}@{digest}", repository_of(name))
}

/// Whether `name` is an untagged image's reserved name.
pub fn is_dangling(name: &str) -> bool {
    name.strip_prefix(DANGLING_REPOSITORY)
        .is_some_and(|rest| rest.starts_with('@'))
}

/// Docker's reference normalization: `busybox` is
/// `docker.io/library/busybox:latest`, `me/app:1` is `docker.io/me/app:1`, a
/// first component with a `.` or `:` (or `localhost`) is a registry.
pub fn normalize_reference(reference: &str) -> String {
    if is_dangling(reference) {
        return reference.to_owned();
    }
    let (name, digest) = match reference.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (reference, None),
    };
    let (first, rest) = name.split_once('/').unwrap_or(("", name));
    let has_domain =
        !first.is_empty() && (first.contains('.') || first.contains(':') || first == "localhost");
    let mut full = if has_domain {
        name.to_owned()
    } else if first.is_empty() {
        format!("docker.io/library/{rest}")
    } else {
        format!("docker.io/{name}")
    };
    if let Some(d) = digest {
        full.push('@');
        full.push_str(d);
        return full;
    }
    let last = full.rsplit('/').next().unwrap_or_default();
    if !last.contains(':') {
        full.push_str(":latest");
    }
    full
}

/// The OCI chain id of a layer stack: `chain(0) = diff(0)`,
/// `chain(n) = sha256(chain(n-1) + " " + diff(n))`. `None` for no layers.
pub fn chain_id(diff_ids: &[String]) -> Option<String> {
    let mut layers = diff_ids.iter();
    let mut chain = layers.next()?.clone();
    for diff in layers {
        let sum = Sha256::digest(format!("{chain} {diff}").as_bytes());
        chain = format!("sha256:{}", hex::encode(sum));
    }
    Some(chain)
}

/// This host's architecture as OCI names it (`amd64`, `arm64`, ...).
pub fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "loongarch64" => "loong64",
        other => other,
    }
}

impl Adapter {
    /// The image record named by `reference` (normalized); a missing one is
    /// [`AdapterError::ImageNotFound`] with the reference as the user gave it.
    pub(crate) async fn get_image(&self, reference: &str) -> Result<Image, AdapterError> {
        let name = normalize_reference(reference);
        let mut images = self.images();
        let got = self
            .rpc("Images.Get", images.get(self.req(GetImageRequest { name })))
            .await;
        match got {
            Err(AdapterError::Rpc { status, .. }) if status.code() == Code::NotFound => {
                Err(AdapterError::ImageNotFound(reference.to_owned()))
            }
            other => other?
                .image
                .ok_or_else(|| AdapterError::ImageNotFound(reference.to_owned())),
        }
    }

    /// The target digest of the image record `name` (normalized).
    pub(crate) async fn image_target(&self, name: &str) -> Result<String, AdapterError> {
        let image = self.get_image(name).await?;
        Ok(image.target.map(|t| t.digest).unwrap_or_default())
    }

    /// Looks an image up in containerd's image store and reads what a
    /// container needs of it. A missing image is [`AdapterError::ImageNotFound`]
    /// (the API's "No such image").
    pub async fn resolve_image(&self, reference: &str) -> Result<ResolvedImage, AdapterError> {
        let name = normalize_reference(reference);
        let image = self.get_image(reference).await?;
        let target = image
            .target
            .ok_or_else(|| bad(format!("image {name} has no target")))?;
        self.resolve_target(name, &target.media_type, &target.digest)
            .await
    }

    /// The image whose id (config digest) is `image_id`, as a container
    /// made from it was resolved: under `reference` while that still names
    /// it, else under any name it has (an untagged image's reserved one
    /// included), so that a tag moved meanwhile never changes what the
    /// container runs.
    pub async fn resolve_image_id(
        &self,
        reference: &str,
        image_id: &str,
    ) -> Result<ResolvedImage, AdapterError> {
        match self.resolve_image(reference).await {
            Ok(image) if image.config_digest == image_id => return Ok(image),
            Ok(_) | Err(AdapterError::ImageNotFound(_)) => {}
            Err(e) => return Err(e),
        }
        for listed in self.list_images().await? {
            if let Ok(image) = self.resolve_listed(&listed).await
                && image.config_digest == image_id
            {
                return Ok(image);
            }
        }
        Err(AdapterError::ImageNotFound(reference.to_owned()))
    }

    /// [`Adapter::resolve_image`] of an image [`Adapter::list_images`]
    /// gave, by its target: what a target digest resolves to is read from
    /// containerd once and kept (a digest names its content for ever), so
    /// that listing the images (which every create by name, every CRI
    /// `ImageStatus` does) costs one call, not a few per image.
    pub async fn resolve_listed(
        &self,
        listed: &ImageSummary,
    ) -> Result<ResolvedImage, AdapterError> {
        if let Some(mut known) = self.inner.resolved.get(&listed.target_digest) {
            known.name.clone_from(&listed.name);
            return Ok(known);
        }
        let resolved = self
            .resolve_target(
                listed.name.clone(),
                &listed.target_media_type,
                &listed.target_digest,
            )
            .await?;
        self.inner.resolved.keep(&resolved);
        Ok(resolved)
    }

    /// Forgets what [`Adapter::resolve_listed`] kept of targets no image
    /// in `listed` has any more.
    pub fn forget_unlisted(&self, listed: &[ImageSummary]) {
        self.inner.resolved.retain(listed);
    }

    async fn resolve_target(
        &self,
        name: String,
        media_type: &str,
        digest: &str,
    ) -> Result<ResolvedImage, AdapterError> {
        let target_digest = digest.to_owned();
        let (manifest_digest, manifest) = self.find_manifest(media_type, digest).await?;
        let config_desc = Descriptor::from_oci(manifest.config())?;
        let config_bytes = self.read_blob(&config_desc.digest).await?;
        let file = read_config(&format!("config {}", config_desc.digest), &config_bytes)?;
        let chain_id =
            chain_id(&file.diff_ids).ok_or_else(|| bad(format!("image {name} has no layers")))?;
        Ok(ResolvedImage {
            name,
            target_digest,
            manifest_digest,
            config_digest: config_desc.digest,
            config: file.config,
            diff_ids: file.diff_ids,
            chain_id,
            history: file.history,
            container_config: file.container_config,
            created: file.created,
            architecture: file.architecture,
            os: file.os,
        })
    }

    /// Follows indexes down to this host's linux manifest; returns its
    /// digest and the manifest.
    pub(crate) async fn find_manifest(
        &self,
        media_type: &str,
        digest: &str,
    ) -> Result<(String, ImageManifest), AdapterError> {
        let mut media_type = media_type.to_owned();
        let mut digest = digest.to_owned();
        for _ in 0..MAX_INDEX_DEPTH {
            let bytes = self.read_blob(&digest).await?;
            match read_document(&digest, &media_type, &bytes)? {
                Document::Manifest(manifest) => return Ok((digest, *manifest)),
                Document::Index(index) => {
                    let next = Descriptor::from_oci(pick_platform(&index, host_architecture())?)?;
                    media_type = next.media_type;
                    digest = next.digest;
                }
            }
        }
        Err(bad("image indexes nested too deeply"))
    }

    /// Reads a whole (small) blob from the content store and checks its digest.
    pub(crate) async fn read_blob(&self, digest: &str) -> Result<Vec<u8>, AdapterError> {
        let mut content = self.content();
        let req = self.req(ReadContentRequest {
            digest: digest.to_owned(),
            offset: 0,
            size: 0,
        });
        let mut stream = self.rpc("Content.Read", content.read(req)).await?;
        let mut out = Vec::new();
        loop {
            let next = tokio::time::timeout(self.call_timeout(), stream.message()).await;
            match next {
                Err(_) => {
                    return Err(AdapterError::Deadline {
                        what: "Content.Read",
                        timeout: self.call_timeout(),
                    });
                }
                Ok(Err(status)) => return Err(AdapterError::rpc("Content.Read")(status)),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(chunk))) => {
                    out.extend_from_slice(&chunk.data);
                    if out.len() > MAX_JSON_BYTES {
                        return Err(bad(format!(
                            "{digest} is larger than {MAX_JSON_BYTES} bytes"
                        )));
                    }
                }
            }
        }
        let got = format!("sha256:{}", hex::encode(Sha256::digest(&out)));
        if got != digest {
            return Err(bad(format!("content {digest} reads as {got}")));
        }
        Ok(out)
    }

    /// Gives the image named by `reference` a second name (`docker tag`):
    /// a new image record with the same target. An existing `new_reference`
    /// is moved to this image, as `docker tag` does.
    pub async fn tag_image(
        &self,
        reference: &str,
        new_reference: &str,
    ) -> Result<String, AdapterError> {
        let new_name = normalize_reference(new_reference);
        let image = self.get_image(reference).await?;
        self.put_record(Image {
            name: new_name.clone(),
            labels: image.labels,
            target: image.target,
            created_at: None,
            updated_at: None,
        })
        .await?;
        Ok(new_name)
    }

    /// Keeps the image `name` names under its untagged name too: its last
    /// name is about to go while a container runs on it.
    pub async fn keep_untagged(&self, name: &str) -> Result<(), AdapterError> {
        let image = self.get_image(name).await?;
        let digest = image
            .target
            .as_ref()
            .map(|t| t.digest.clone())
            .unwrap_or_default();
        self.put_record(Image {
            name: dangling_name(&digest),
            ..image
        })
        .await
    }

    /// Removes one name of an image (its content goes when no name or
    /// container holds it any more). A missing name is `ImageNotFound`.
    pub async fn delete_image(&self, name: &str) -> Result<(), AdapterError> {
        let mut images = self.images();
        let deleted = self
            .rpc(
                "Images.Delete",
                images.delete(self.req(DeleteImageRequest {
                    name: name.to_owned(),
                    sync: false,
                    target: None,
                })),
            )
            .await;
        match deleted {
            Err(AdapterError::Rpc { status, .. }) if status.code() == Code::NotFound => {
                Err(AdapterError::ImageNotFound(name.to_owned()))
            }
            other => other.map(|_| ()),
        }
    }

    /// Every image in the namespace.
    pub async fn list_images(&self) -> Result<Vec<ImageSummary>, AdapterError> {
        let mut images = self.images();
        let listed = self
            .rpc(
                "Images.List",
                images.list(self.req(ListImagesRequest {
                    filters: Vec::new(),
                })),
            )
            .await?;
        Ok(listed
            .images
            .into_iter()
            .map(|i| {
                let target = i.target.unwrap_or_default();
                ImageSummary {
                    name: i.name,
                    target_digest: target.digest,
                    target_media_type: target.media_type,
                    target_size: target.size,
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolved_targets_are_kept_until_no_image_has_them() {
        let resolved = |target: &str| ResolvedImage {
            name: "docker.io/library/a:1".into(),
            target_digest: target.into(),
            manifest_digest: target.into(),
            config_digest: "sha256:c".into(),
            config: ImageConfig::default(),
            diff_ids: Vec::new(),
            chain_id: "sha256:l".into(),
            history: Vec::new(),
            container_config: None,
            created: None,
            architecture: "amd64".into(),
            os: "linux".into(),
        };
        let listed = |target: &str| ImageSummary {
            name: "docker.io/library/b:2".into(),
            target_digest: target.into(),
            target_media_type: String::new(),
            target_size: 0,
        };
        let kept = ResolvedTargets::default();
        kept.keep(&resolved("sha256:t1"));
        kept.keep(&resolved("sha256:t2"));
        assert_eq!(kept.get("sha256:t1"), Some(resolved("sha256:t1")));
        kept.retain(&[listed("sha256:t2")]);
        assert_eq!(kept.get("sha256:t1"), None);
        assert!(kept.get("sha256:t2").is_some());
    }

    #[test]
    fn references_normalize_like_docker() {
        assert_eq!(
            normalize_reference("busybox"),
            "docker.io/library/busybox:latest"
        );
        assert_eq!(
            normalize_reference("busybox:1.36"),
            "docker.io/library/busybox:1.36"
        );
        assert_eq!(normalize_reference("me/app"), "docker.io/me/app:latest");
        assert_eq!(
            normalize_reference("localhost:5000/app"),
            "localhost:5000/app:latest"
        );
        assert_eq!(normalize_reference("localhost/app:2"), "localhost/app:2");
        assert_eq!(normalize_reference("quay.io/a/b:c"), "quay.io/a/b:c");
        assert_eq!(
            normalize_reference("busybox@sha256:ab"),
            "docker.io/library/busybox@sha256:ab"
        );
        assert_eq!(
            normalize_reference("docker.io/library/busybox:latest"),
            "docker.io/library/busybox:latest"
        );
    }

    #[test]
    fn an_untagged_images_reserved_name_is_kept_as_is_and_told_apart() {
        let name = dangling_name("sha256:ab");
        assert_eq!(name, "moby-dangling@sha256:ab");
        assert!(is_dangling(&name));
        // Never normalized into docker.io's library: it is no user's name.
        assert_eq!(normalize_reference(&name), name);
        for other in [
            "moby-danglingx@sha256:ab",
            "docker.io/library/busybox:latest",
            "moby-dangling",
        ] {
            assert!(!is_dangling(other), "{other}");
        }
    }

    #[test]
    fn chain_ids_follow_the_oci_definition() {
        assert_eq!(chain_id(&[]), None);
        let one = vec!["sha256:aaa".to_owned()];
        assert_eq!(chain_id(&one).as_deref(), Some("sha256:aaa"));
        let two = vec!["sha256:aaa".to_owned(), "sha256:bbb".to_owned()];
        let want = format!(
            "sha256:{}",
            hex::encode(Sha256::digest(b"sha256:aaa sha256:bbb"))
        );
        assert_eq!(chain_id(&two), Some(want));
    }
}
