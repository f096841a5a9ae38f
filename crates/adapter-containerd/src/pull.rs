//! Registry pulls (`docker pull`): the OCI distribution protocol through
//! `oci-client` (references, token and basic auth, blob streams), the
//! content written through the same store as an import (`store.rs`).
//!
//! Order, all under one lease: resolve the reference to a manifest (an index
//! is narrowed to this host's platform), fetch the config, fetch the layers
//! concurrently, each hashed and counted on its way into the content store
//! and committed only when its digest matches, label the tree, unpack the
//! layers into the snapshotter, and only then create the image record. A
//! failure anywhere leaves no image record, and the lease's end lets
//! containerd collect what was written; a retry starts over cleanly.
//!
//! Manifests, indexes and configs are read with a size limit
//! ([`MAX_DOCUMENT_BYTES`]): `oci-client` reads a manifest body whole, so
//! manifests are fetched here, with the token `oci-client` negotiated.

use crate::client::Adapter;
use crate::document::{Document, pick_platform, read_config, read_document};
use crate::error::{AdapterError, RegistryFailure};
use crate::image::{Descriptor, distinct_layers, host_architecture, normalize_reference};
use crate::store::{Unpacking, Written};
use futures_util::{StreamExt as _, TryStreamExt as _};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use oci_spec::image::ImageManifest;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::time::Duration;

/// Largest manifest, index or config a pull reads: a bigger (or endless)
/// one is refused, never held in memory.
pub const MAX_DOCUMENT_BYTES: usize = 4 << 20;
/// Layers downloaded at once (dockerd's default `max-concurrent-downloads`).
const CONCURRENT_DOWNLOADS: usize = 3;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// A registry silent for this long mid-transfer has failed the pull.
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// The whole fetch of one manifest or config.
const DOCUMENT_TIMEOUT: Duration = Duration::from_secs(120);
/// Progress is reported at most every this many bytes of a layer.
const PROGRESS_STEP_BYTES: u64 = 512 << 10;
const ACCEPTED_MANIFESTS: [&str; 4] = [
    OCI_IMAGE_INDEX_MEDIA_TYPE,
    IMAGE_MANIFEST_LIST_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE,
    IMAGE_MANIFEST_MEDIA_TYPE,
];

/// Credentials for a registry, as `docker login` stored them and the CLI
/// sent them in `X-Registry-Auth`.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum PullAuth {
    #[default]
    Anonymous,
    Basic {
        username: String,
        password: String,
    },
    /// A bearer token sent as it is.
    Bearer(String),
}

impl std::fmt::Debug for PullAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PullAuth::Anonymous => f.write_str("Anonymous"),
            PullAuth::Basic { username, .. } => write!(f, "Basic({username}, <secret>)"),
            PullAuth::Bearer(_) => f.write_str("Bearer(<secret>)"),
        }
    }
}

impl PullAuth {
    pub(crate) fn to_oci(&self) -> RegistryAuth {
        match self {
            PullAuth::Anonymous => RegistryAuth::Anonymous,
            PullAuth::Basic { username, password } => {
                RegistryAuth::Basic(username.clone(), password.clone())
            }
            PullAuth::Bearer(token) => RegistryAuth::Bearer(token.clone()),
        }
    }
}

/// What a pull reports as it goes (dockerd's progress messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PullProgress {
    /// The reference resolved: "Pulling from {repository}", id the tag.
    PullingFrom { repository: String, tag: String },
    /// One layer's news; `id` is its digest's first 12 hex digits.
    Layer { id: String, status: LayerStatus },
    /// The digest of what the reference named.
    Digest(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayerStatus {
    PullingFsLayer,
    Waiting,
    Downloading { current: u64, total: u64 },
    VerifyingChecksum,
    DownloadComplete,
    Extracting,
    PullComplete,
    AlreadyExists,
}

/// Where a pull's progress goes.
pub type PullSink = tokio::sync::mpsc::UnboundedSender<PullProgress>;

/// The image a pull registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PulledImage {
    /// The name in containerd's image store (`docker.io/library/busybox:latest`).
    pub name: String,
    /// What the reference named (an index or a manifest).
    pub target_digest: String,
    /// The image record already had this target.
    pub up_to_date: bool,
}

pub(crate) fn failed(message: impl Into<String>) -> AdapterError {
    AdapterError::Registry {
        kind: RegistryFailure::Failed,
        message: message.into(),
    }
}

/// A malformed document met in a pull is the pull's failure, as dockerd
/// reports it (the message without the adapter's `image:` prefix).
pub(crate) fn pull_failure(e: AdapterError) -> AdapterError {
    match e {
        AdapterError::Image(message) => failed(message),
        other => other,
    }
}

pub(crate) fn short_id(digest: &str) -> String {
    digest
        .split_once(':')
        .map_or(digest, |(_, hex)| hex)
        .chars()
        .take(12)
        .collect()
}

/// The name a pull of `reference` registers (Docker's normalization) and
/// the registry it is pulled from: `busybox` is
/// (`docker.io/library/busybox:latest`, `index.docker.io`).
pub fn pull_target(reference: &str) -> Result<(String, String), AdapterError> {
    let (name, image) = parse_reference(reference)?;
    Ok((name, image.resolve_registry().to_owned()))
}

pub(crate) fn parse_reference(reference: &str) -> Result<(String, Reference), AdapterError> {
    let name = normalize_reference(reference);
    let image: Reference = name.parse().map_err(|e| AdapterError::Registry {
        kind: RegistryFailure::Invalid,
        message: format!("invalid reference format: {reference:?}: {e}"),
    })?;
    Ok((name, image))
}

/// Whether `registry` (`host[:port]`) is on this machine: dockerd talks
/// plain HTTP to those without being told.
pub fn is_loopback_registry(registry: &str) -> bool {
    let host = if let Some(rest) = registry.strip_prefix('[') {
        rest.split_once(']').map_or(rest, |(h, _)| h)
    } else {
        registry.rsplit_once(':').map_or(registry, |(h, _)| h)
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// The registry's side of one pull.
pub(crate) struct Remote {
    client: Client,
    http: reqwest::Client,
    image: Reference,
    auth: PullAuth,
    scheme: &'static str,
    /// A bearer token `oci-client` negotiated for the manifest requests.
    token: Option<String>,
    /// The name the image record gets (`docker.io/library/busybox:latest`).
    name: String,
    /// `localhost:5000/app:1` or `busybox:latest`, for messages.
    familiar: String,
}

impl Remote {
    /// What the reference asks its registry for: its digest, else its tag
    /// (`latest` when it names none).
    pub(crate) fn wanted(&self) -> String {
        self.image
            .digest()
            .or(self.image.tag())
            .unwrap_or("latest")
            .to_owned()
    }

    fn registry(&self) -> &str {
        self.image.resolve_registry()
    }

    /// The registry's token once it gave one, else the credentials the
    /// client sent.
    fn authorize(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match (&self.token, &self.auth) {
            (Some(token), _) => request.bearer_auth(token),
            (None, PullAuth::Basic { username, password }) => {
                request.basic_auth(username, Some(password))
            }
            (None, PullAuth::Bearer(token)) => request.bearer_auth(token),
            (None, PullAuth::Anonymous) => request,
        }
    }

    fn unreachable(&self, e: &dyn std::error::Error) -> AdapterError {
        let e = causes(e);
        // TLS spoken to a plain HTTP server fails on its first record.
        let tls_mismatch = ["InvalidContentType", "tls", "wrong version"]
            .iter()
            .any(|m| e.contains(m));
        let hint = if self.scheme == "https" && tls_mismatch {
            " (a registry that speaks plain HTTP must be given to holdfastd with --insecure-registry)"
        } else {
            ""
        };
        failed(format!(
            "cannot reach the registry {}: {e}{hint}",
            self.registry()
        ))
    }

    fn denied(&self, why: &str) -> AdapterError {
        AdapterError::Registry {
            kind: RegistryFailure::NotFound,
            message: format!(
                "pull access denied for {}, repository does not exist or may require 'docker login': {why}",
                self.familiar_repository()
            ),
        }
    }

    fn familiar_repository(&self) -> String {
        self.familiar
            .split_once('@')
            .map(|(n, _)| n)
            .unwrap_or(&self.familiar)
            .rsplit_once(':')
            .filter(|(_, tag)| !tag.contains('/'))
            .map_or(self.familiar.as_str(), |(n, _)| n)
            .to_owned()
    }

    async fn authenticate(&mut self) -> Result<(), AdapterError> {
        let auth = self.auth.to_oci();
        match self
            .client
            .auth(&self.image, &auth, RegistryOperation::Pull)
            .await
        {
            Ok(token) => {
                self.token = token;
                Ok(())
            }
            Err(oci_client::errors::OciDistributionError::AuthenticationFailure(why)) => {
                Err(self.denied(&format!("authentication failed: {}", why.trim())))
            }
            Err(e) => Err(self.unreachable(&e)),
        }
    }

    /// Fetches the manifest or index `reference` (a tag or a digest) names,
    /// at most [`MAX_DOCUMENT_BYTES`]; returns its bytes, media type and digest.
    pub(crate) async fn manifest(
        &self,
        reference: &str,
    ) -> Result<(Vec<u8>, String, String), AdapterError> {
        let url = format!(
            "{}://{}/v2/{}/manifests/{reference}",
            self.scheme,
            self.registry(),
            self.image.repository()
        );
        let request = self.authorize(
            self.http
                .get(&url)
                .timeout(DOCUMENT_TIMEOUT)
                .header(reqwest::header::ACCEPT, ACCEPTED_MANIFESTS.join(", ")),
        );
        let mut response = request.send().await.map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        if !status.is_success() {
            let body = read_bounded(&mut response, 64 << 10)
                .await
                .unwrap_or_default();
            let why = registry_errors(&body).unwrap_or_else(|| status.to_string());
            return Err(match status.as_u16() {
                401 | 403 => self.denied(&why),
                404 if why.contains("NAME_UNKNOWN") || why.starts_with("name unknown") => {
                    self.denied(&why)
                }
                404 => AdapterError::Registry {
                    kind: RegistryFailure::NotFound,
                    message: format!("manifest for {} not found: {why}", self.familiar),
                },
                _ => failed(format!("{url}: {why}")),
            });
        }
        if let Some(length) = response.content_length()
            && length > MAX_DOCUMENT_BYTES as u64
        {
            return Err(failed(format!(
                "the manifest of {} is {length} bytes, more than the {MAX_DOCUMENT_BYTES} a manifest may have",
                self.familiar
            )));
        }
        let media_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or(v).trim().to_owned())
            .unwrap_or_default();
        let bytes = read_bounded(&mut response, MAX_DOCUMENT_BYTES)
            .await
            .map_err(|e| match e {
                ReadError::TooLarge => failed(format!(
                    "the manifest of {} is larger than the {MAX_DOCUMENT_BYTES} bytes a manifest may have",
                    self.familiar
                )),
                ReadError::Http(e) => self.unreachable(&e),
            })?;
        let digest = sha256(&bytes);
        let what = format!("the manifest of {}", self.familiar);
        let doc = read_document(&what, &media_type, &bytes).map_err(pull_failure)?;
        let (own, index) = match &doc {
            Document::Index(i) => (i.media_type().as_ref(), true),
            Document::Manifest(m) => (m.media_type().as_ref(), false),
        };
        let media_type = match own.map(ToString::to_string) {
            Some(m) if !m.is_empty() => m,
            _ if ACCEPTED_MANIFESTS.contains(&media_type.as_str()) => media_type,
            _ if index => OCI_IMAGE_INDEX_MEDIA_TYPE.to_owned(),
            _ => OCI_IMAGE_MEDIA_TYPE.to_owned(),
        };
        Ok((bytes, media_type, digest))
    }

    /// Fetches a small blob (a config) of at most [`MAX_DOCUMENT_BYTES`] and
    /// checks its digest.
    pub(crate) async fn document_blob(&self, desc: &Descriptor) -> Result<Vec<u8>, AdapterError> {
        if desc.size < 0 || desc.size as u64 > MAX_DOCUMENT_BYTES as u64 {
            return Err(failed(format!(
                "{} is {} bytes, more than the {MAX_DOCUMENT_BYTES} a config may have",
                desc.digest, desc.size
            )));
        }
        let fetch = async {
            let stream = self
                .client
                .pull_blob_stream(&self.image, desc.digest.as_str())
                .await
                .map_err(|e| self.unreachable(&e))?;
            let mut stream = std::pin::pin!(stream);
            let mut out = Vec::new();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| self.unreachable(&e))?;
                out.extend_from_slice(&chunk);
                if out.len() > MAX_DOCUMENT_BYTES {
                    return Err(failed(format!("{} is larger than it says", desc.digest)));
                }
            }
            Ok(out)
        };
        let bytes = tokio::time::timeout(DOCUMENT_TIMEOUT, fetch)
            .await
            .map_err(|_| {
                failed(format!(
                    "{} did not arrive within {DOCUMENT_TIMEOUT:?}",
                    desc.digest
                ))
            })??;
        let got = sha256(&bytes);
        if got != desc.digest {
            return Err(failed(format!(
                "digest mismatch: {} arrived as {got}",
                desc.digest
            )));
        }
        Ok(bytes)
    }
}

enum ReadError {
    TooLarge,
    Http(reqwest::Error),
}

async fn read_bounded(response: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, ReadError> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Http)? {
        if out.len() + chunk.len() > max {
            return Err(ReadError::TooLarge);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`
/// as dockerd shows it: `manifest unknown: manifest unknown`.
fn registry_errors(body: &[u8]) -> Option<String> {
    let doc: Value = serde_json::from_slice(body).ok()?;
    let first = doc["errors"].as_array()?.first()?;
    let code = first["code"].as_str().unwrap_or_default();
    let message = first["message"].as_str().unwrap_or_default();
    Some(format!(
        "{}: {message}",
        code.to_ascii_lowercase().replace('_', " ")
    ))
}

/// An error with its causes, `outer: inner: innermost` (reqwest's own
/// message hides why a request failed).
pub(crate) fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let more = inner.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = inner.source();
    }
    text
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn send(sink: &PullSink, progress: PullProgress) {
    // The client went away; the pull still finishes (or fails) cleanly.
    let _ = sink.send(progress);
}

fn layer(sink: &PullSink, digest: &str, status: LayerStatus) {
    send(
        sink,
        PullProgress::Layer {
            id: short_id(digest),
            status,
        },
    );
}

impl Adapter {
    /// An `oci-client` for `image`'s registry, and whether it speaks plain
    /// HTTP to it (loopback, or one of
    /// [`AdapterConfig::insecure_registries`](crate::AdapterConfig)).
    /// The registry `image` is in, reached with `auth` (its token
    /// negotiated): what a pull and a list of tags both start from.
    pub(crate) async fn remote(
        &self,
        name: String,
        image: Reference,
        auth: &PullAuth,
    ) -> Result<Remote, AdapterError> {
        let (client, plain_http) = self.registry_client(&image)?;
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .user_agent(concat!("holdfast/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| failed(format!("cannot build an HTTP client: {e}")))?;
        let familiar = familiar_name(&name);
        let mut remote = Remote {
            client,
            http,
            image,
            auth: auth.clone(),
            scheme: if plain_http { "http" } else { "https" },
            token: None,
            name,
            familiar,
        };
        remote.authenticate().await?;
        Ok(remote)
    }

    pub(crate) fn registry_client(
        &self,
        image: &Reference,
    ) -> Result<(Client, bool), AdapterError> {
        // reqwest needs a TLS provider installed before a client is built;
        // a second install is refused harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let registry = image.resolve_registry().to_owned();
        let plain_http = is_loopback_registry(&registry)
            || self
                .config()
                .insecure_registries
                .iter()
                .any(|r| r == image.registry() || *r == registry);
        let protocol = if plain_http {
            ClientProtocol::HttpsExcept(vec![registry])
        } else {
            ClientProtocol::Https
        };
        let client = Client::try_from(ClientConfig {
            protocol,
            read_timeout: Some(READ_TIMEOUT),
            connect_timeout: Some(CONNECT_TIMEOUT),
            user_agent: concat!("holdfast/", env!("CARGO_PKG_VERSION")),
            ..Default::default()
        })
        .map_err(|e| failed(format!("cannot build a registry client: {e}")))?;
        Ok((client, plain_http))
    }

    /// Pulls `reference` (Docker's normalization: `busybox` is
    /// `docker.io/library/busybox:latest`) from its registry: see the module
    /// docs. Registries on loopback, and those in
    /// [`AdapterConfig::insecure_registries`](crate::AdapterConfig), are
    /// spoken to over plain HTTP.
    pub async fn pull_image(
        &self,
        reference: &str,
        auth: &PullAuth,
        progress: &PullSink,
    ) -> Result<PulledImage, AdapterError> {
        let (name, image) = parse_reference(reference)?;
        let remote = self.remote(name.clone(), image, auth).await?;
        let tag = remote.wanted();
        let (top_bytes, top_media_type, top_digest) = remote.manifest(&tag).await?;
        if let Some(wanted) = remote.image.digest()
            && wanted != top_digest
        {
            return Err(failed(format!(
                "digest mismatch: {wanted} arrived as {top_digest}"
            )));
        }
        let repository = remote.image.repository().to_owned();
        send(
            progress,
            PullProgress::PullingFrom {
                repository,
                tag: remote.image.tag().unwrap_or(&tag).to_owned(),
            },
        );
        let target = Descriptor {
            media_type: top_media_type,
            digest: top_digest,
            size: top_bytes.len() as i64,
        };
        let previous = self
            .image_target(&name)
            .await
            .ok()
            .filter(|t| *t == target.digest);
        let target_digest = target.digest.clone();
        self.with_lease("pull", |lease| async move {
            let digest = target.digest.clone();
            self.pull_leased(&remote, target, top_bytes, &lease, progress)
                .await?;
            send(progress, PullProgress::Digest(digest));
            Ok(())
        })
        .await?;
        Ok(PulledImage {
            name,
            target_digest,
            up_to_date: previous.is_some(),
        })
    }

    async fn pull_leased(
        &self,
        remote: &Remote,
        target: Descriptor,
        top_bytes: Vec<u8>,
        lease: &str,
        progress: &PullSink,
    ) -> Result<(), AdapterError> {
        // Follow indexes down to this platform's manifest, keeping each.
        let mut desc = target.clone();
        let mut bytes = top_bytes;
        for _ in 0..4 {
            let doc =
                read_document(&desc.digest, &desc.media_type, &bytes).map_err(pull_failure)?;
            self.write_document(bytes, &desc.digest, lease).await?;
            let index = match doc {
                Document::Manifest(manifest) => {
                    return self
                        .pull_manifest_content(remote, &target, &manifest, lease, progress)
                        .await;
                }
                Document::Index(index) => index,
            };
            let next = pick_platform(&index, host_architecture())
                .and_then(Descriptor::from_oci)
                .map_err(pull_failure)?;
            let (child, media_type, digest) = remote.manifest(&next.digest).await?;
            if digest != next.digest {
                return Err(failed(format!(
                    "digest mismatch: {} arrived as {digest}",
                    next.digest
                )));
            }
            desc = Descriptor {
                media_type: if next.media_type.is_empty() {
                    media_type
                } else {
                    next.media_type
                },
                digest,
                size: child.len() as i64,
            };
            bytes = child;
        }
        Err(failed("image indexes nested too deeply"))
    }

    /// The config and layers of one manifest, then the tree's labels, the
    /// unpack, and the image record.
    async fn pull_manifest_content(
        &self,
        remote: &Remote,
        target: &Descriptor,
        manifest: &ImageManifest,
        lease: &str,
        progress: &PullSink,
    ) -> Result<(), AdapterError> {
        let config = Descriptor::from_oci(manifest.config()).map_err(pull_failure)?;
        let config_bytes = remote.document_blob(&config).await?;
        // Checked before anything is fetched: a manifest whose config is
        // not one (or disagrees with its layers) is refused up front.
        let diff_ids = read_config(&format!("the config {}", config.digest), &config_bytes)
            .map_err(pull_failure)?
            .diff_ids;
        self.write_document(config_bytes, &config.digest, lease)
            .await?;
        let layers: Vec<Descriptor> = manifest
            .layers()
            .iter()
            .map(Descriptor::from_oci)
            .collect::<Result<_, _>>()
            .map_err(pull_failure)?;
        if layers.len() != diff_ids.len() {
            return Err(failed(format!(
                "the manifest has {} layers but its config {} diff ids",
                layers.len(),
                diff_ids.len()
            )));
        }
        if layers.is_empty() {
            return Err(failed("the manifest has no layers"));
        }
        let downloads = distinct_layers(&layers);
        for l in &downloads {
            layer(progress, &l.digest, LayerStatus::PullingFsLayer);
        }
        // Futures made up front: a closure in the stream trips the compiler's
        // proof that the pull is Send.
        let pulls: Vec<_> = downloads
            .iter()
            .map(|l| self.pull_layer(remote, l, lease, progress))
            .collect();
        let fetched = futures_util::stream::iter(pulls)
            .buffer_unordered(CONCURRENT_DOWNLOADS)
            .try_collect::<Vec<()>>()
            .await;
        if let Err(e) = fetched {
            // Downloads cut short by the failure leave ingests behind.
            for l in &downloads {
                self.abort_ingest(lease, &l.digest).await;
            }
            return Err(e);
        }
        self.label_tree(target, lease).await?;
        self.unpack(target, lease, |u| {
            let (i, status) = match u {
                Unpacking::Exists(i) => (i, LayerStatus::AlreadyExists),
                Unpacking::Applying(i) => (i, LayerStatus::Extracting),
                Unpacking::Applied(i) => (i, LayerStatus::PullComplete),
            };
            if let Some(l) = layers.get(i) {
                layer(progress, &l.digest, status);
            }
        })
        .await?;
        self.put_image(&remote.name, target).await?;
        // Pulled by tag: the registry's digest of it names it too, as
        // dockerd records it (`RepoDigests`).
        if !remote.name.contains('@') {
            let by_digest = crate::image::digest_reference(&remote.name, &target.digest);
            self.put_image(&by_digest, target).await?;
        }
        Ok(())
    }

    async fn pull_layer(
        &self,
        remote: &Remote,
        desc: &Descriptor,
        lease: &str,
        progress: &PullSink,
    ) -> Result<(), AdapterError> {
        if self.hold_content(&desc.digest, lease).await? {
            layer(progress, &desc.digest, LayerStatus::DownloadComplete);
            return Ok(());
        }
        let total = u64::try_from(desc.size)
            .map_err(|_| failed(format!("{} has a negative size", desc.digest)))?;
        let stream = remote
            .client
            .pull_blob_stream(&remote.image, desc.digest.as_str())
            .await
            .map_err(|e| {
                failed(format!(
                    "downloading {} from {}: {}",
                    desc.digest,
                    remote.registry(),
                    causes(&e)
                ))
            })?;
        let what = desc.digest.clone();
        let registry = remote.registry().to_owned();
        let chunks = stream.map(move |chunk| {
            chunk
                .map(|b| b.to_vec())
                .map_err(|e| failed(format!("downloading {what} from {registry} failed: {e}")))
        });
        let mut reported = 0u64;
        let written = self
            .write_blob(&desc.digest, desc.size, lease, chunks, |current| {
                if current >= reported + PROGRESS_STEP_BYTES || current == total {
                    reported = current;
                    layer(
                        progress,
                        &desc.digest,
                        LayerStatus::Downloading { current, total },
                    );
                }
            })
            .await?;
        if written == Written::Committed {
            layer(progress, &desc.digest, LayerStatus::VerifyingChecksum);
        }
        layer(progress, &desc.digest, LayerStatus::DownloadComplete);
        Ok(())
    }
}

/// Tags asked for per page of a tag list.
const TAGS_PAGE: usize = 1000;
/// Most tags a `docker pull --all-tags` takes: a repository with more (or a
/// registry that pages without end) is refused rather than pulled forever.
pub const MAX_TAGS: usize = 10_000;

#[derive(serde::Deserialize)]
struct TagsPage {
    #[serde(default)]
    tags: Option<Vec<String>>,
}

impl Remote {
    /// One page of the repository's tag list (`/v2/<name>/tags/list`), at
    /// most [`MAX_DOCUMENT_BYTES`] within [`DOCUMENT_TIMEOUT`], with the
    /// credentials the manifests are fetched with. Read here rather than
    /// with `oci-client`'s `list_tags`, which reads a body whole without a
    /// bound: an endless list must be refused, as an endless manifest is.
    async fn tags_page(&self, last: Option<&str>) -> Result<Vec<String>, AdapterError> {
        let url = format!(
            "{}://{}/v2/{}/tags/list",
            self.scheme,
            self.registry(),
            self.image.repository()
        );
        let mut query = vec![("n", TAGS_PAGE.to_string())];
        if let Some(last) = last {
            query.push(("last", last.to_owned()));
        }
        let request = self.authorize(self.http.get(&url).query(&query).timeout(DOCUMENT_TIMEOUT));
        let mut response = request.send().await.map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        if !status.is_success() {
            let body = read_bounded(&mut response, 64 << 10)
                .await
                .unwrap_or_default();
            let why = registry_errors(&body).unwrap_or_else(|| status.to_string());
            return Err(match status.as_u16() {
                401 | 403 | 404 => self.denied(&why),
                _ => failed(format!("{url}: {why}")),
            });
        }
        let too_large = || {
            failed(format!(
                "the tag list of {} is larger than the {MAX_DOCUMENT_BYTES} bytes a page may have",
                self.familiar_repository()
            ))
        };
        if response
            .content_length()
            .is_some_and(|l| l > MAX_DOCUMENT_BYTES as u64)
        {
            return Err(too_large());
        }
        let bytes = read_bounded(&mut response, MAX_DOCUMENT_BYTES)
            .await
            .map_err(|e| match e {
                ReadError::TooLarge => too_large(),
                ReadError::Http(e) => self.unreachable(&e),
            })?;
        let page: TagsPage = serde_json::from_slice(&bytes).map_err(|e| {
            failed(format!(
                "the tag list of {} is not JSON: {e}",
                self.familiar_repository()
            ))
        })?;
        Ok(page.tags.unwrap_or_default())
    }
}

impl Adapter {
    /// Every tag of the repository `repository` (a name without tag or
    /// digest) names, in its registry, sorted: the registry's tag list a
    /// page at a time (`n` and `last`, as the distribution spec pages it),
    /// at most [`MAX_TAGS`]. A repository the registry does not know, or
    /// refused credentials, is [`RegistryFailure::NotFound`].
    pub async fn list_tags(
        &self,
        repository: &str,
        auth: &PullAuth,
    ) -> Result<Vec<String>, AdapterError> {
        let (name, image) = parse_reference(repository)?;
        let remote = self.remote(name, image, auth).await?;
        let mut tags: Vec<String> = Vec::new();
        let mut last: Option<String> = None;
        loop {
            let page = remote.tags_page(last.as_deref()).await?;
            let count = page.len();
            let next = page.last().cloned();
            tags.extend(page);
            if tags.len() > MAX_TAGS {
                return Err(failed(format!(
                    "{} has more than {MAX_TAGS} tags: pull them by name",
                    remote.familiar_repository()
                )));
            }
            // A short page is the last; so is one that does not move on
            // (a registry that ignores `last`).
            if count < TAGS_PAGE || next.is_none() || next == last {
                break;
            }
            last = next;
        }
        tags.sort();
        tags.dedup();
        Ok(tags)
    }
}

/// An HTTP client for one registry's own API (a login's check, a search),
/// each answer bounded, and the scheme to speak to `host` with: plain HTTP
/// on loopback and to the registries holdfastd was told are insecure.
pub(crate) fn registry_http(
    host: &str,
    insecure_registries: &[String],
) -> Result<(reqwest::Client, &'static str), AdapterError> {
    // reqwest needs a TLS provider installed before a client is built; a
    // second install is refused harmlessly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let plain_http = is_loopback_registry(host) || insecure_registries.iter().any(|r| r == host);
    let http = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(DOCUMENT_TIMEOUT)
        .user_agent(concat!("holdfast/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| failed(format!("cannot build an HTTP client: {e}")))?;
    Ok((http, if plain_http { "http" } else { "https" }))
}

/// Checks credentials against a registry as `docker login` asks a daemon
/// to: `GET /v2/` answered, with basic auth when the registry asks for it,
/// or a token granted by the registry's token service. `server` is the CLI's
/// `serveraddress` (`localhost:5000`, `https://index.docker.io/v1/`).
/// Refused credentials are [`RegistryFailure::NotFound`].
pub async fn check_login(
    server: &str,
    auth: &PullAuth,
    insecure_registries: &[String],
) -> Result<(), AdapterError> {
    let host = server
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default();
    let host = match host {
        "" | "docker.io" | "index.docker.io" => "registry-1.docker.io",
        h => h,
    };
    let (http, scheme) = registry_http(host, insecure_registries)?;
    let unreachable = |e: reqwest::Error| failed(format!("cannot reach the registry {host}: {e}"));
    let refused = |why: String| AdapterError::Registry {
        kind: RegistryFailure::NotFound,
        message: format!("login to {host} refused: {why}"),
    };
    let url = format!("{scheme}://{host}/v2/");
    let answer = http.get(&url).send().await.map_err(unreachable)?;
    if answer.status().is_success() {
        return Ok(());
    }
    let challenge = answer
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if answer.status() != reqwest::StatusCode::UNAUTHORIZED {
        return Err(failed(format!("{url}: {}", answer.status())));
    }
    let (username, password) = match auth {
        PullAuth::Basic { username, password } => (username.as_str(), password.as_str()),
        PullAuth::Bearer(_) | PullAuth::Anonymous => {
            return Err(refused("a username and password are needed".to_owned()));
        }
    };
    let check = if challenge.to_ascii_lowercase().starts_with("bearer") {
        let param = |key: &str| {
            challenge
                .split([',', ' '])
                .filter_map(|kv| kv.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case(key))
                .map(|(_, v)| v.trim().trim_matches('"').to_owned())
        };
        let realm = param("realm")
            .ok_or_else(|| failed(format!("{url}: a bearer challenge without a realm")))?;
        let mut query = vec![("account", username.to_owned())];
        if let Some(service) = param("service") {
            query.push(("service", service));
        }
        http.get(&realm)
            .query(&query)
            .basic_auth(username, Some(password))
    } else {
        http.get(&url).basic_auth(username, Some(password))
    };
    let answer = check.send().await.map_err(unreachable)?;
    let status = answer.status();
    if status.is_success() {
        return Ok(());
    }
    let body = answer.bytes().await.unwrap_or_default();
    let why =
        registry_errors(&body[..body.len().min(64 << 10)]).unwrap_or_else(|| status.to_string());
    Err(refused(why))
}

/// `docker.io/library/busybox:latest` as Docker shows it.
pub(crate) fn familiar_name(name: &str) -> String {
    name.strip_prefix("docker.io/library/")
        .or_else(|| name.strip_prefix("docker.io/"))
        .unwrap_or(name)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_registries_are_recognised() {
        for r in [
            "localhost:5000",
            "localhost",
            "127.0.0.1:5000",
            "127.3.2.1",
            "[::1]:5000",
        ] {
            assert!(is_loopback_registry(r), "{r}");
        }
        for r in [
            "index.docker.io",
            "10.0.0.1:5000",
            "quay.io",
            "localhost.example:5000",
        ] {
            assert!(!is_loopback_registry(r), "{r}");
        }
    }

    #[test]
    fn registry_errors_read_like_dockerd() {
        let body =
            br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{}}]}"#;
        assert_eq!(
            registry_errors(body).as_deref(),
            Some("manifest unknown: manifest unknown")
        );
        assert_eq!(registry_errors(b"<html>"), None);
    }

    #[test]
    fn credentials_are_not_printed() {
        let auth = PullAuth::Basic {
            username: "me".into(),
            password: "hunter2".into(),
        };
        assert!(!format!("{auth:?}").contains("hunter2"));
        assert!(!format!("{:?}", PullAuth::Bearer("tok".into())).contains("tok"));
    }

    #[test]
    fn short_ids_are_twelve_hex_digits() {
        assert_eq!(short_id("sha256:0123456789abcdef"), "0123456789ab");
    }
}
