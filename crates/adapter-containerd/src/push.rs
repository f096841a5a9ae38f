//! Registry pushes (`docker push`): a local image's manifest, config and
//! layers sent to an OCI distribution registry through `oci-client`, each
//! blob streamed from containerd's content store (never held whole).
//!
//! Order: the local image is resolved to this host's manifest (an index is
//! narrowed, as a pull narrows it), credentials are negotiated for push,
//! every layer the registry lacks is uploaded (the registry checks each
//! against its digest), then the config, and last the manifest under the
//! tag, byte for byte as stored, so the digest the registry serves is the
//! one holdfast reports. Nothing local changes.

use crate::client::Adapter;
use crate::document::is_index_media_type;
use crate::error::{AdapterError, RegistryFailure};
use crate::image::{Descriptor, distinct_layers};
use crate::pull::{PullAuth, causes, failed, familiar_name, parse_reference, sha256, short_id};
use containerd_client::services::v1::ReadContentRequest;
use futures_util::{StreamExt as _, TryStreamExt as _};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE};
use oci_client::{Client, Reference, RegistryOperation};
use oci_spec::image::ImageManifest;

/// Layers uploaded at once (dockerd's default `max-concurrent-uploads`).
const CONCURRENT_UPLOADS: usize = 5;
/// Progress is reported at most every this many bytes of a layer.
const PROGRESS_STEP_BYTES: u64 = 512 << 10;
/// The config media type Docker's (schema 2) manifests name.
const DOCKER_CONFIG_MEDIA_TYPE: &str = "application/vnd.docker.container.image.v1+json";

/// What a push reports as it goes (dockerd's progress messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushProgress {
    /// "The push refers to repository [{0}]".
    Repository(String),
    /// One layer's news; `id` is its digest's first 12 hex digits.
    Layer { id: String, status: PushStatus },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushStatus {
    Preparing,
    Waiting,
    Pushing { current: u64, total: u64 },
    Pushed,
    AlreadyExists,
}

/// Where a push's progress goes.
pub type PushSink = tokio::sync::mpsc::UnboundedSender<PushProgress>;

/// What the registry now holds under the tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushedImage {
    pub tag: String,
    /// The manifest's digest, as the registry serves it.
    pub digest: String,
    /// The manifest's size in bytes.
    pub size: usize,
}

fn send(sink: &PushSink, digest: &str, status: PushStatus) {
    // The client went away; the push still finishes (or fails) cleanly.
    let _ = sink.send(PushProgress::Layer {
        id: short_id(digest),
        status,
    });
}

/// The registry's side of one push.
struct Target {
    client: Client,
    image: Reference,
    /// `127.0.0.1:5000/mine`, for messages.
    repository: String,
}

impl Target {
    /// A refusal of the credentials reads as dockerd's; anything else names
    /// the registry and what failed.
    fn error(&self, what: &str, e: &OciDistributionError) -> AdapterError {
        let denied = match e {
            OciDistributionError::AuthenticationFailure(_)
            | OciDistributionError::UnauthorizedError { .. } => true,
            OciDistributionError::ServerError { code, .. } => matches!(code, 401 | 403),
            OciDistributionError::RequestError(e) => {
                e.status().is_some_and(|s| matches!(s.as_u16(), 401 | 403))
            }
            OciDistributionError::RegistryError { envelope, .. } => envelope
                .errors
                .iter()
                .any(|e| matches!(e.code, OciErrorCode::Unauthorized | OciErrorCode::Denied)),
            _ => false,
        };
        if denied {
            return AdapterError::Registry {
                kind: RegistryFailure::NotFound,
                message: format!(
                    "push access denied for {}: unauthorized: authentication required (docker login {} first)",
                    self.repository,
                    self.image.resolve_registry()
                ),
            };
        }
        failed(format!(
            "{what} to {}: {}",
            self.image.resolve_registry(),
            causes(e)
        ))
    }
}

impl Adapter {
    /// Pushes the local image `reference` (Docker's normalization) to its
    /// registry under its tag: see the module docs. A reference with a
    /// digest is refused; a missing image is [`AdapterError::ImageNotFound`].
    pub async fn push_image(
        &self,
        reference: &str,
        auth: &PullAuth,
        progress: &PushSink,
    ) -> Result<PushedImage, AdapterError> {
        let (name, image) = parse_reference(reference)?;
        if image.digest().is_some() {
            return Err(AdapterError::Registry {
                kind: RegistryFailure::Invalid,
                message: format!("cannot push a digest reference: {reference}"),
            });
        }
        let tag = image.tag().unwrap_or("latest").to_owned();
        let local = self.get_image(reference).await?;
        let top = local
            .target
            .ok_or_else(|| failed(format!("image {name} has no target")))?;
        let (manifest_digest, manifest) = self.find_manifest(&top.media_type, &top.digest).await?;
        let manifest_bytes = self.read_blob(&manifest_digest).await?;
        let media_type =
            manifest_media_type(&top.media_type, &top.digest, &manifest_digest, &manifest);
        let config = Descriptor::from_oci(manifest.config())?;
        let layers: Vec<Descriptor> = manifest
            .layers()
            .iter()
            .map(Descriptor::from_oci)
            .collect::<Result<_, _>>()?;
        let (client, _) = self.registry_client(&image)?;
        let repository = familiar_name(&name)
            .rsplit_once(':')
            .map_or_else(|| familiar_name(&name), |(r, _)| r.to_owned());
        let target = Target {
            client,
            image,
            repository,
        };
        let _ = progress.send(PushProgress::Repository(format!(
            "{}/{}",
            target.image.resolve_registry(),
            target.image.repository()
        )));
        let oci_auth = auth.to_oci();
        for op in [RegistryOperation::Pull, RegistryOperation::Push] {
            target
                .client
                .auth(&target.image, &oci_auth, op)
                .await
                .map_err(|e| target.error("authenticating", &e))?;
        }

        let uploads = distinct_layers(&layers);
        for l in &uploads {
            send(progress, &l.digest, PushStatus::Preparing);
        }
        if uploads.len() > CONCURRENT_UPLOADS {
            for l in &uploads[CONCURRENT_UPLOADS..] {
                send(progress, &l.digest, PushStatus::Waiting);
            }
        }
        // Futures made up front, as the pull's (the proof that it is Send).
        let pushes: Vec<_> = uploads
            .iter()
            .map(|l| self.push_layer(&target, l, progress))
            .collect();
        futures_util::stream::iter(pushes)
            .buffer_unordered(CONCURRENT_UPLOADS)
            .try_collect::<Vec<()>>()
            .await?;

        let exists = target
            .client
            .blob_exists(&target.image, &config.digest)
            .await
            .map_err(|e| target.error("checking the config", &e))?;
        if !exists {
            let bytes = self.read_blob(&config.digest).await?;
            target
                .client
                .push_blob(&target.image, bytes, &config.digest)
                .await
                .map_err(|e| target.error("pushing the config", &e))?;
        }
        let content_type = reqwest::header::HeaderValue::from_str(&media_type).map_err(|_| {
            failed(format!(
                "the manifest's media type {media_type:?} is not a header value"
            ))
        })?;
        let size = manifest_bytes.len();
        let digest = sha256(&manifest_bytes);
        target
            .client
            .push_manifest_raw(&target.image, manifest_bytes, content_type)
            .await
            .map_err(|e| target.error("pushing the manifest", &e))?;
        // The registry now knows the image by this digest too: a name of
        // it (`RepoDigests`), as dockerd records it after a push.
        self.put_record(containerd_client::services::v1::Image {
            name: crate::image::digest_reference(&name, &digest),
            target: Some(top.clone()),
            ..Default::default()
        })
        .await?;
        Ok(PushedImage { tag, digest, size })
    }

    async fn push_layer(
        &self,
        target: &Target,
        desc: &Descriptor,
        progress: &PushSink,
    ) -> Result<(), AdapterError> {
        let exists = target
            .client
            .blob_exists(&target.image, &desc.digest)
            .await
            .map_err(|e| target.error(&format!("checking {}", desc.digest), &e))?;
        if exists {
            send(progress, &desc.digest, PushStatus::AlreadyExists);
            return Ok(());
        }
        let total = u64::try_from(desc.size)
            .map_err(|_| failed(format!("{} has a negative size", desc.digest)))?;
        let mut content = self.content();
        let req = self.req(ReadContentRequest {
            digest: desc.digest.clone(),
            offset: 0,
            size: 0,
        });
        let timeout = self.config().import_call_timeout;
        let reading = self
            .rpc_within("Content.Read", timeout, content.read(req))
            .await?;
        let sink = progress.clone();
        let digest = desc.digest.clone();
        send(progress, &digest, PushStatus::Pushing { current: 0, total });
        // (stream, bytes sent, bytes last reported)
        let chunks = futures_util::stream::unfold(Some((reading, 0u64, 0u64)), move |state| {
            let sink = sink.clone();
            let digest = digest.clone();
            async move {
                let (mut reading, mut sent, mut reported) = state?;
                let next = tokio::time::timeout(timeout, reading.message()).await;
                let chunk = match next {
                    Err(_) => Err(format!(
                        "reading {digest} from containerd took more than {timeout:?}"
                    )),
                    Ok(Err(status)) => Err(format!(
                        "reading {digest} from containerd: {}",
                        status.message()
                    )),
                    Ok(Ok(None)) => return None,
                    Ok(Ok(Some(chunk))) => Ok(chunk.data),
                };
                match chunk {
                    Ok(data) => {
                        sent += data.len() as u64;
                        if sent >= reported + PROGRESS_STEP_BYTES || sent == total {
                            reported = sent;
                            send(
                                &sink,
                                &digest,
                                PushStatus::Pushing {
                                    current: sent,
                                    total,
                                },
                            );
                        }
                        Some((
                            Ok(bytes::Bytes::from(data)),
                            Some((reading, sent, reported)),
                        ))
                    }
                    Err(why) => Some((Err(OciDistributionError::GenericError(Some(why))), None)),
                }
            }
        });
        target
            .client
            .push_blob_stream(&target.image, chunks, &desc.digest, Some(total))
            .await
            .map_err(|e| target.error(&format!("pushing {}", desc.digest), &e))?;
        send(progress, &desc.digest, PushStatus::Pushed);
        Ok(())
    }
}

/// The media type the manifest is pushed under: its own `mediaType`, or the
/// image record's when the record names the manifest itself, or what its
/// config's type implies (Docker's schema 2 or OCI).
fn manifest_media_type(
    top_media_type: &str,
    top_digest: &str,
    manifest_digest: &str,
    manifest: &ImageManifest,
) -> String {
    if let Some(m) = manifest.media_type().as_ref().map(ToString::to_string) {
        return m;
    }
    if top_digest == manifest_digest
        && !top_media_type.is_empty()
        && !is_index_media_type(top_media_type)
    {
        return top_media_type.to_owned();
    }
    if manifest.config().media_type().as_ref() == DOCKER_CONFIG_MEDIA_TYPE {
        IMAGE_MANIFEST_MEDIA_TYPE.to_owned()
    } else {
        OCI_IMAGE_MEDIA_TYPE.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(media_type: Option<&str>, config_media_type: &str) -> ImageManifest {
        let mut doc = json!({
            "schemaVersion": 2,
            "config": {
                "mediaType": config_media_type,
                "digest": "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                "size": 2,
            },
            "layers": [],
        });
        if let Some(m) = media_type {
            doc["mediaType"] = json!(m);
        }
        serde_json::from_value(doc).expect("a manifest")
    }

    #[test]
    fn manifest_media_types_follow_the_manifest() {
        let oci = manifest(Some(OCI_IMAGE_MEDIA_TYPE), "x");
        assert_eq!(
            manifest_media_type("", "a", "b", &oci),
            OCI_IMAGE_MEDIA_TYPE
        );
        let docker = manifest(Some(IMAGE_MANIFEST_MEDIA_TYPE), DOCKER_CONFIG_MEDIA_TYPE);
        assert_eq!(
            manifest_media_type("", "a", "b", &docker),
            IMAGE_MANIFEST_MEDIA_TYPE
        );
        let bare = manifest(None, DOCKER_CONFIG_MEDIA_TYPE);
        assert_eq!(
            manifest_media_type("", "a", "b", &bare),
            IMAGE_MANIFEST_MEDIA_TYPE
        );
        let record = manifest(None, "x");
        assert_eq!(
            manifest_media_type(IMAGE_MANIFEST_MEDIA_TYPE, "a", "a", &record),
            IMAGE_MANIFEST_MEDIA_TYPE
        );
        assert_eq!(
            manifest_media_type("", "a", "b", &record),
            OCI_IMAGE_MEDIA_TYPE
        );
    }
}
