//! The ImageService: `ListImages`, `ImageStatus`, `PullImage`,
//! `RemoveImage`, `ImageFsInfo`, through the same image backend (and pull
//! code) as the Docker API.

use crate::Cri;
use crate::status::{invalid, status};
use holdfast_core::ErrorKind;
use holdfast_engine::backend::images::{LocalImage, PullAuth, PullEvent, Pulling};
use holdfast_engine::backend::system::DiskUsageOf;
use k8s_cri::v1 as cri;
use tokio_stream::StreamExt as _;
use tonic::Status;

impl Cri {
    pub(crate) async fn list_images(
        &self,
        filter: Option<cri::ImageFilter>,
    ) -> Result<Vec<cri::Image>, Status> {
        let wanted = filter
            .and_then(|f| f.image)
            .map(|i| i.image)
            .filter(|i| !i.is_empty());
        let images = match wanted {
            Some(reference) => match self.find(&reference).await? {
                Some(image) => vec![image],
                None => Vec::new(),
            },
            None => self.engine.images().list().await.map_err(status)?,
        };
        let mut out = Vec::with_capacity(images.len());
        for image in &images {
            out.push(self.image(image).await?);
        }
        Ok(out)
    }

    /// The image, or none (not an error: kubelet then pulls it).
    pub(crate) async fn image_status(
        &self,
        spec: Option<cri::ImageSpec>,
    ) -> Result<Option<cri::Image>, Status> {
        let reference = spec_reference("image", spec)?;
        match self.find(&reference).await? {
            Some(image) => Ok(Some(self.image(&image).await?)),
            None => Ok(None),
        }
    }

    /// Pulls the image and answers its id, as kubelet names it afterwards.
    pub(crate) async fn pull_image(
        &self,
        spec: Option<cri::ImageSpec>,
        auth: Option<cri::AuthConfig>,
    ) -> Result<String, Status> {
        let reference = spec_reference("image", spec)?;
        let auth = pull_auth(auth)?;
        let images = self.engine.images();
        let last = match images.pull(reference.clone(), auth).await.map_err(status)? {
            Pulling::Done(event) => event,
            Pulling::Going(mut events) => {
                let mut last = PullEvent::Failed("the pull ended without an answer".to_owned());
                while let Some(event) = events.next().await {
                    last = event;
                }
                last
            }
        };
        match last {
            PullEvent::Done { .. } => {}
            PullEvent::Failed(why) => {
                return Err(Status::unknown(format!(
                    "pulling {reference:?} failed: {why}"
                )));
            }
            PullEvent::Progress(_) => {
                return Err(Status::internal("the pull ended without an answer"));
            }
        }
        let image = self.find(&reference).await?.ok_or_else(|| {
            Status::internal(format!(
                "{reference:?} was pulled but is not in the image store"
            ))
        })?;
        Ok(image.resolved.config_digest)
    }

    /// Removes the image with every name it has; one that is gone is
    /// removed already.
    pub(crate) async fn remove_image(&self, spec: Option<cri::ImageSpec>) -> Result<(), Status> {
        let reference = spec_reference("image", spec)?;
        let Some(image) = self.find(&reference).await? else {
            return Ok(());
        };
        let id = image.resolved.config_digest;
        match self.engine.images().remove(&id, true).await {
            Ok(_) => Ok(()),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(status(e)),
        }
    }

    /// What the images' layers take, unpacked, where containerd keeps them.
    pub(crate) async fn image_fs_info(&self) -> Result<cri::ImageFsInfoResponse, Status> {
        let images_only = DiskUsageOf {
            containers: false,
            images: true,
            volumes: false,
        };
        let usage = self
            .engine
            .system()
            .disk_usage(images_only)
            .await
            .map_err(status)?;
        let info = self.engine.system().info().await.map_err(status)?;
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        Ok(cri::ImageFsInfoResponse {
            image_filesystems: vec![cri::FilesystemUsage {
                timestamp,
                fs_id: Some(cri::FilesystemIdentifier {
                    mountpoint: info.data_root.display().to_string(),
                }),
                used_bytes: Some(cri::UInt64Value {
                    value: u64::try_from(usage.layers_size).unwrap_or(0),
                }),
                // Not counted: unknown rather than made up.
                inodes_used: None,
            }],
            container_filesystems: Vec::new(),
        })
    }

    async fn find(&self, reference: &str) -> Result<Option<LocalImage>, Status> {
        match self.engine.images().find(reference).await {
            Ok(image) => Ok(Some(image)),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(status(e)),
        }
    }

    async fn image(&self, image: &LocalImage) -> Result<cri::Image, Status> {
        let size = self
            .engine
            .images()
            .unpacked_size(image)
            .await
            .map_err(status)?;
        let user = image.resolved.config.user.clone().unwrap_or_default();
        let user = user.split(':').next().unwrap_or_default().to_owned();
        let (uid, username) = match user.parse::<i64>() {
            Ok(uid) => (Some(cri::Int64Value { value: uid }), String::new()),
            Err(_) => (None, user),
        };
        Ok(cri::Image {
            id: image.resolved.config_digest.clone(),
            repo_tags: image
                .names
                .iter()
                .filter(|n| !n.contains('@'))
                .cloned()
                .collect(),
            repo_digests: image
                .names
                .iter()
                .filter(|n| n.contains('@'))
                .cloned()
                .collect(),
            size: u64::try_from(size).unwrap_or(0),
            uid,
            username,
            spec: Some(cri::ImageSpec {
                image: image.resolved.config_digest.clone(),
                ..cri::ImageSpec::default()
            }),
            pinned: image.names.iter().any(|n| n == &pause_name()),
        })
    }
}

/// The pause image is pinned: kubelet's image GC leaves it.
fn pause_name() -> String {
    holdfast_engine::backend::images::normalize_reference(crate::PAUSE_IMAGE)
}

fn spec_reference(field: &str, spec: Option<cri::ImageSpec>) -> Result<String, Status> {
    spec.map(|s| s.image)
        .filter(|i| !i.is_empty())
        .ok_or_else(|| invalid(&format!("{field}.image"), "must not be empty"))
}

/// kubelet's credentials: a user and password (or `auth`, their base64
/// `user:password`), or a registry's token.
pub(crate) fn pull_auth(auth: Option<cri::AuthConfig>) -> Result<PullAuth, Status> {
    let Some(a) = auth else {
        return Ok(PullAuth::Anonymous);
    };
    if !a.registry_token.is_empty() {
        return Ok(PullAuth::Bearer(a.registry_token));
    }
    if !a.identity_token.is_empty() {
        return Err(crate::status::unsupported(
            "auth.identity_token",
            "OAuth refresh tokens (give username and password, or registry_token)",
        ));
    }
    if !a.auth.is_empty() {
        let decoded = decode_base64(&a.auth)
            .ok_or_else(|| invalid("auth.auth", "not base64 of user:password"))?;
        let (username, password) = decoded
            .split_once(':')
            .ok_or_else(|| invalid("auth.auth", "not base64 of user:password"))?;
        return Ok(PullAuth::Basic {
            username: username.to_owned(),
            password: password.to_owned(),
        });
    }
    if a.username.is_empty() && a.password.is_empty() {
        return Ok(PullAuth::Anonymous);
    }
    Ok(PullAuth::Basic {
        username: a.username,
        password: a.password,
    })
}

fn decode_base64(text: &str) -> Option<String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()?;
    String::from_utf8(bytes).ok()
}
