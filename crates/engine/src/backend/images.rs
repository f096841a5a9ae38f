//! Images: containerd's image store and the registries, as `docker images`,
//! `inspect`, `history`, `tag`, `rmi`, `save`, `load`, `import`, `pull`,
//! `push`, `login`, `search`, `commit` and `image prune` use them. Each change is
//! published to `docker events`. No lifecycle decision is involved: the
//! core is asked only which containers use an image (and, for a commit,
//! to pause and unpause its container).

mod layers;
mod search;
pub use layers::{ImageLayers, LayerUsage};
pub use search::SearchFilter;

use crate::engine::{EngineHandle, wall_now};
use crate::events::EventMessage;
use crate::refusal::{conflict, internal, invalid};
use bytes::Bytes;
use futures_util::stream::{BoxStream, Stream, StreamExt as _};
use holdfast_adapter_containerd::{
    AdapterError, NewImage, RegistryFailure, SavedImage, is_dangling,
};
use holdfast_core::{Answer, Command, ErrorKind, RequestError, Status};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use tokio::io::AsyncWriteExt as _;

/// What containerd and the registries say of images, as the adapter
/// decodes them, and the registry client's own rules for image names: an
/// API renders them as they are (wrapping each would copy every field for
/// nothing), and checks the names it is given with the same rules the
/// registry client applies, so that what it accepts, a pull can take.
/// Pure data and pure functions: nothing here reaches containerd.
pub use holdfast_adapter_containerd::{
    DistributionInspect, DistributionPlatform, HistoryEntry, ImageConfig, LayerStatus, PullAuth,
    PullProgress, PushProgress, PushStatus, PushedImage, ResolvedImage, SearchResult,
    host_architecture, normalize_reference, pull_target, repository_of,
};

/// The images backend: see the module docs.
#[derive(Debug)]
pub struct Images<'a> {
    engine: &'a EngineHandle,
}

/// One image id with every name it has.
#[derive(Clone, Debug)]
pub struct LocalImage {
    /// Its names; none: it is untagged (`<none>:<none>`).
    pub names: Vec<String>,
    /// The reserved name containerd keeps an untagged image under, never
    /// shown (see [`holdfast_adapter_containerd::DANGLING_REPOSITORY`]).
    untagged_as: Option<String>,
    pub resolved: ResolvedImage,
}

impl LocalImage {
    /// Untagged: no name of its own (`docker images -f dangling=true`).
    pub fn dangling(&self) -> bool {
        self.names.is_empty()
    }

    /// Its tags (`busybox:latest`): its names but those by digest.
    pub fn tags(&self) -> impl Iterator<Item = &String> {
        self.names.iter().filter(|n| !n.contains('@'))
    }

    /// Its names by digest (`busybox@sha256:…`): `RepoDigests`.
    pub fn digests(&self) -> impl Iterator<Item = &String> {
        self.names.iter().filter(|n| n.contains('@'))
    }

    /// A name containerd has it under: the first of its names, or its
    /// reserved one when it has none.
    fn store_name(&self) -> Option<&str> {
        self.names
            .first()
            .or(self.untagged_as.as_ref())
            .map(String::as_str)
    }

    /// Every name containerd has it under: removed, the image goes.
    fn store_names(&self) -> impl Iterator<Item = &String> {
        self.names.iter().chain(self.untagged_as.iter())
    }
}

/// What an image removal did, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Removed {
    /// A name went (as Docker shows it: `busybox:latest`).
    Untagged(String),
    /// The image went (its id).
    Deleted(String),
}

/// One image a `docker load` loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// By its name, as Docker shows it.
    Name(String),
    /// An image the archive names not (loaded untagged), by its id.
    Id(String),
}

/// What a pull tells as it goes; the last is `Done` or `Failed`.
#[derive(Clone, Debug)]
pub enum PullEvent {
    Progress(PullProgress),
    /// `name` as Docker shows it; nothing new was downloaded when
    /// `up_to_date`.
    Done {
        name: String,
        up_to_date: bool,
    },
    /// The pull failed after it got going (before that, the call fails).
    Failed(String),
}

/// A pull that got going, or one that was done before it told anything.
pub enum Pulling {
    Done(PullEvent),
    Going(BoxStream<'static, PullEvent>),
}

impl std::fmt::Debug for Pulling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pulling::Done(event) => write!(f, "Done({event:?})"),
            Pulling::Going(_) => f.write_str("Going"),
        }
    }
}

/// What a push tells as it goes; a failure ends it.
#[derive(Clone, Debug)]
pub enum PushEvent {
    Progress(PushProgress),
    /// One tag is in the registry; `shown` is `repository:tag` as Docker
    /// shows it.
    Pushed {
        shown: String,
        image: PushedImage,
    },
    Failed(String),
}

/// What a registry said of credentials (`docker login`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoginOutcome {
    Accepted,
    Refused(String),
}

/// What `docker commit` asks for.
#[derive(Clone, Debug)]
pub struct CommitRequest {
    /// The container, by name, id or id prefix.
    pub container: String,
    /// The new image's name, normalized; empty: the image is untagged.
    pub name: String,
    /// `--change` instructions.
    pub changes: Vec<String>,
    pub author: String,
    pub comment: String,
    /// Freeze the container while its changes are read (dockerd's default).
    pub pause: bool,
}

impl<'a> Images<'a> {
    pub(crate) fn new(engine: &'a EngineHandle) -> Images<'a> {
        Images { engine }
    }

    /// Every image, by id, with its names.
    pub async fn list(&self) -> Result<Vec<LocalImage>, RequestError> {
        let adapter = &self.engine.services.adapter;
        let summaries = adapter
            .list_images()
            .await
            .map_err(|e| image_failure("", e))?;
        adapter.forget_unlisted(&summaries);
        let mut by_id: BTreeMap<String, LocalImage> = BTreeMap::new();
        for s in summaries {
            // An image whose content is incomplete is skipped, not fatal.
            let Ok(resolved) = adapter.resolve_listed(&s).await else {
                tracing::debug!(image = %s.name, "image cannot be resolved; not listed");
                continue;
            };
            let entry = by_id
                .entry(resolved.config_digest.clone())
                .or_insert_with(|| LocalImage {
                    names: Vec::new(),
                    untagged_as: None,
                    resolved,
                });
            if is_dangling(&s.name) {
                entry.untagged_as = Some(s.name);
            } else {
                entry.names.push(s.name);
            }
        }
        Ok(by_id.into_values().collect())
    }

    /// An image by name, full id (`sha256:...`) or unique id prefix.
    pub async fn find(&self, reference: &str) -> Result<LocalImage, RequestError> {
        let not_found =
            || RequestError::new(ErrorKind::NotFound, format!("No such image: {reference}"));
        if reference.is_empty() {
            return Err(not_found());
        }
        let images = self.list().await?;
        let name = normalize_reference(reference);
        let hex = reference.strip_prefix("sha256:").unwrap_or(reference);
        let by_id = looks_like_id(reference);
        let mut found = None;
        for image in images {
            if image.names.contains(&name) {
                return Ok(image);
            }
            if by_id
                && image
                    .resolved
                    .config_digest
                    .strip_prefix("sha256:")
                    .is_some_and(|h| h.starts_with(hex))
            {
                if found.is_some() {
                    return Err(not_found());
                }
                found = Some(image);
            }
        }
        found.ok_or_else(not_found)
    }

    /// Makes sure the image `reference` names, one holdfast builds itself
    /// from the host's busybox (the CRI's pause image), is in the store:
    /// seeded now when it is not.
    pub async fn ensure_seeded(&self, reference: &'static str) -> Result<(), RequestError> {
        // One seeding at a time: two first pods must not import it twice.
        static SEEDING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let _one = SEEDING.lock().await;
        match self.find(reference).await {
            Ok(_) => return Ok(()),
            Err(e) if e.kind != ErrorKind::NotFound => return Err(e),
            Err(_) => {}
        }
        let services = &self.engine.services;
        crate::seed_image::seed(&services.adapter, &services.data_root, reference)
            .await
            .map_err(|e| internal(format!("{e} (apt-get install busybox-static)")))?;
        tracing::info!(reference, "seeded from the host's busybox");
        Ok(())
    }

    /// The image as a container is made from it: by name, else by its
    /// id or a unique prefix of it (an untagged image has only that).
    pub async fn resolve(&self, reference: &str) -> Result<ResolvedImage, RequestError> {
        let adapter = &self.engine.services.adapter;
        match adapter.resolve_image(reference).await {
            Err(AdapterError::ImageNotFound(_)) if looks_like_id(reference) => {
                let image = self.find(reference).await?;
                let name = image.store_name().unwrap_or_default();
                adapter
                    .resolve_image(name)
                    .await
                    .map_err(|e| image_failure(reference, e))
            }
            resolved => resolved.map_err(|e| image_failure(reference, e)),
        }
    }

    /// What `reference`'s registry says of it, without pulling it.
    pub async fn distribution(
        &self,
        reference: &str,
        auth: &PullAuth,
    ) -> Result<DistributionInspect, RequestError> {
        self.engine
            .services
            .adapter
            .inspect_distribution(reference, auth)
            .await
            .map_err(|e| image_failure(reference, e))
    }

    /// `docker history`: the image and the unpacked size of each layer.
    pub async fn history(&self, reference: &str) -> Result<(LocalImage, Vec<i64>), RequestError> {
        let image = self.find(reference).await?;
        let sizes = self
            .engine
            .services
            .adapter
            .layer_sizes(&image.resolved.diff_ids)
            .await
            .map_err(|e| image_failure(reference, e))?;
        Ok((image, sizes))
    }

    /// What an image's layers take unpacked.
    pub async fn unpacked_size(&self, image: &LocalImage) -> Result<i64, RequestError> {
        self.engine
            .services
            .adapter
            .image_unpacked_size(&image.resolved.diff_ids)
            .await
            .map_err(|e| image_failure("", e))
    }

    /// `docker save`: the images as a docker-archive, each under the name it
    /// was asked by (every name it has when asked by id).
    pub async fn save(
        &self,
        references: &[String],
    ) -> Result<BoxStream<'static, std::io::Result<Bytes>>, RequestError> {
        if references.is_empty() {
            return Err(invalid("no image to save: give names"));
        }
        let mut found = Vec::new();
        for reference in references {
            let image = self.find(reference).await?;
            let name = normalize_reference(reference);
            let tags: Vec<String> = if image.names.contains(&name) && !name.contains('@') {
                vec![familiar(&name)]
            } else {
                image.tags().map(|n| familiar(n)).collect()
            };
            found.push((image, tags));
        }
        let dir = tempfile::Builder::new()
            .prefix("save-")
            .tempdir_in(&self.engine.services.data_root)
            .map_err(|e| internal(format!("cannot make room for the archive: {e}")))?;
        let work = dir.path().join("work");
        std::fs::create_dir(&work)
            .map_err(|e| internal(format!("cannot make room for the archive: {e}")))?;
        let out = dir.path().join("images.tar");
        let saved: Vec<SavedImage<'_>> = found
            .iter()
            .map(|(image, tags)| SavedImage {
                image: &image.resolved,
                tags: tags.clone(),
            })
            .collect();
        self.engine
            .services
            .adapter
            .save_images(&saved, &work, &out)
            .await
            .map_err(|e| image_failure(&references.join(" "), e))?;
        let file = tokio::fs::File::open(&out)
            .await
            .map_err(|e| internal(format!("reading the archive: {e}")))?;
        // The temporary directory goes once the archive was sent.
        let chunks = futures_util::stream::unfold(Some((file, dir)), |state| async move {
            use tokio::io::AsyncReadExt as _;
            let (mut file, dir) = state?;
            let mut buf = vec![0u8; 256 * 1024];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(Bytes::from(buf)), Some((file, dir))))
                }
                Err(e) => Some((Err(e), None)),
            }
        });
        Ok(chunks.boxed())
    }

    /// `docker tag`: `new_reference` names the image too.
    pub async fn tag(&self, reference: &str, new_reference: &str) -> Result<(), RequestError> {
        let image = self.find(reference).await?;
        let source = image.store_name().map(str::to_owned).ok_or_else(|| {
            RequestError::new(ErrorKind::NotFound, format!("No such image: {reference}"))
        })?;
        let tagged = self
            .engine
            .services
            .adapter
            .tag_image(&source, new_reference)
            .await
            .map_err(|e| image_failure(reference, e))?;
        self.publish("tag", &image.resolved.config_digest, &familiar(&tagged));
        Ok(())
    }

    /// `docker rmi`: untags; deletes the image when its last name goes.
    /// As dockerd: refused (409) while a container uses it, unless forced;
    /// by id, never while a container runs on it; by its last name,
    /// forced, while a container runs on it, untagged and kept.
    pub async fn remove(&self, reference: &str, force: bool) -> Result<Vec<Removed>, RequestError> {
        let image = self.find(reference).await?;
        let id = image.resolved.config_digest.clone();
        let short = short_id(&id);
        let name = normalize_reference(reference);
        let by_name = image.names.contains(&name);
        // By id, unforced: only an image of one tag at most, all of its
        // names in one repository (dockerd's single reference).
        let repositories: std::collections::BTreeSet<String> =
            image.names.iter().map(|n| repository_of(n)).collect();
        if !by_name && (image.tags().count() > 1 || repositories.len() > 1) && !force {
            return Err(conflict(format!(
                "conflict: unable to delete {short} (must be forced) - image is referenced in multiple repositories"
            )));
        }
        // The names that go: the one asked for, or (by id) all of them. A
        // tag that was its repository's last takes the repository's names
        // by digest with it, as dockerd's.
        let doomed: Vec<String> = if by_name {
            let repository = repository_of(&name);
            let last_of_repository = !name.contains('@')
                && !image
                    .tags()
                    .any(|t| *t != name && repository_of(t) == repository);
            let digests = image
                .digests()
                .filter(|d| last_of_repository && repository_of(d) == repository)
                .cloned();
            std::iter::once(name).chain(digests).collect()
        } else {
            image.names.clone()
        };
        let last_name_goes = doomed.len() == image.names.len();
        let users = if last_name_goes {
            self.users_of(&id).await?
        } else {
            Vec::new()
        };
        let running = users.iter().find(|(_, running)| *running);
        match (users.first(), running) {
            (Some((c, _)), _) if by_name && !force => {
                return Err(conflict(format!(
                    "conflict: unable to remove repository reference \"{reference}\" (must force) - container {c} is using its referenced image {short}"
                )));
            }
            (_, Some((c, _))) if !by_name => {
                return Err(conflict(format!(
                    "conflict: unable to delete {short} (cannot be forced) - image is being used by running container {c}"
                )));
            }
            (Some((c, _)), _) if !by_name && !force => {
                return Err(conflict(format!(
                    "conflict: unable to delete {short} (must be forced) - image is being used by stopped container {c}"
                )));
            }
            _ => {}
        }
        let adapter = &self.engine.services.adapter;
        // Its last name going from under a running container: kept untagged.
        let kept = last_name_goes && running.is_some();
        if kept && let Some(n) = doomed.first() {
            adapter
                .keep_untagged(n)
                .await
                .map_err(|e| image_failure(reference, e))?;
        }
        let mut out = Vec::new();
        for n in &doomed {
            adapter
                .delete_image(n)
                .await
                .map_err(|e| image_failure(n, e))?;
            self.publish("untag", &id, &familiar(n));
            out.push(Removed::Untagged(familiar(n)));
        }
        if last_name_goes && !kept {
            if let Some(hidden) = &image.untagged_as {
                adapter
                    .delete_image(hidden)
                    .await
                    .map_err(|e| image_failure(reference, e))?;
            }
            let shown = if doomed.is_empty() {
                short.clone()
            } else {
                familiar(&doomed.join(","))
            };
            self.publish("delete", &id, &shown);
            out.push(Removed::Deleted(id));
        }
        Ok(out)
    }

    /// The containers made from image `id` (short ids), and whether each
    /// runs.
    async fn users_of(&self, id: &str) -> Result<Vec<(String, bool)>, RequestError> {
        let wanted = id.to_owned();
        self.engine
            .read(move |v| {
                v.core
                    .containers()
                    .filter(|c| c.record.config.image_id.as_deref() == Some(wanted.as_str()))
                    .map(|c| {
                        let id = c.record.id.to_string();
                        let running = matches!(c.status, Status::Running | Status::Restarting);
                        (id[..id.len().min(12)].to_owned(), running)
                    })
                    .collect()
            })
            .await
            .map_err(RequestError::from)
    }

    /// How many containers each image (by id) was made into, as `docker
    /// images` counts them.
    pub async fn containers_by_image(&self) -> Result<BTreeMap<String, i64>, RequestError> {
        self.engine
            .read(|v| {
                let mut counts = BTreeMap::new();
                for c in v.core.containers() {
                    if let Some(id) = &c.record.config.image_id {
                        *counts.entry(id.clone()).or_insert(0) += 1;
                    }
                }
                counts
            })
            .await
            .map_err(RequestError::from)
    }

    /// `docker image prune`: with `dangling_only`, the untagged images no
    /// container uses; else every image no container uses. What was
    /// removed, and the bytes its layers took.
    pub async fn prune(
        &self,
        dangling_only: bool,
        wanted: impl Fn(&LocalImage) -> bool,
    ) -> Result<(Vec<Removed>, i64), RequestError> {
        let mut deleted = Vec::new();
        let mut reclaimed = 0i64;
        let used = self.containers_by_image().await?;
        let adapter = &self.engine.services.adapter;
        // The CRI's pause image is pinned: sandboxes are made from it
        // offline, so no prune takes it (as kubelet's image GC spares it).
        let pause = normalize_reference(crate::seed_image::PAUSE_IMAGE);
        for image in self.list().await? {
            let id = image.resolved.config_digest.clone();
            if used.contains_key(&id)
                || dangling_only && !image.dangling()
                || !wanted(&image)
                || image.names.contains(&pause)
            {
                continue;
            }
            let size = adapter
                .image_unpacked_size(&image.resolved.diff_ids)
                .await
                .unwrap_or(0);
            for name in image.store_names() {
                adapter
                    .delete_image(name)
                    .await
                    .map_err(|e| image_failure(name, e))?;
                if !is_dangling(name) {
                    let familiar = familiar(name);
                    self.publish("untag", &id, &familiar);
                    deleted.push(Removed::Untagged(familiar));
                }
            }
            self.publish("delete", &id, &short_id(&id));
            deleted.push(Removed::Deleted(id));
            reclaimed = reclaimed.saturating_add(size);
        }
        Ok((deleted, reclaimed))
    }

    /// `docker load`: a tarball (docker-archive or OCI layout) streamed to a
    /// temporary file, then imported. What it loaded, as Docker tells it.
    pub async fn load<E: std::fmt::Display>(
        &self,
        upload: impl Stream<Item = Result<Bytes, E>> + Unpin,
    ) -> Result<Vec<Loaded>, RequestError> {
        let dir = tempfile::Builder::new()
            .prefix("load-")
            .tempdir_in(&self.engine.services.data_root)
            .map_err(|e| internal(format!("cannot make room for the upload: {e}")))?;
        let path = dir.path().join("image.tar");
        let total = store_upload(upload, &path).await?;
        if total == 0 {
            return Err(invalid("no image tarball in the request body"));
        }
        let adapter = &self.engine.services.adapter;
        let imported = adapter
            .import_image(&path)
            .await
            .map_err(|e| image_failure("", e))?;
        let mut loaded = Vec::new();
        for i in &imported {
            let id = match adapter.resolve_image(&i.name).await {
                Ok(r) => r.config_digest,
                Err(_) => i.target_digest.clone(),
            };
            if is_dangling(&i.name) {
                self.publish("load", &id, &short_id(&id));
                loaded.push(Loaded::Id(id));
            } else {
                self.publish("load", &id, &familiar(&i.name));
                loaded.push(Loaded::Name(familiar(&i.name)));
            }
        }
        Ok(loaded)
    }

    /// `docker import`: a filesystem tarball (plain or gzip) becomes an
    /// image of that one layer named `name`, with `config` as its config.
    /// Its id.
    pub async fn import<E: std::fmt::Display>(
        &self,
        name: &str,
        message: String,
        config: Map<String, Value>,
        upload: impl Stream<Item = Result<Bytes, E>> + Unpin,
    ) -> Result<String, RequestError> {
        let dir = tempfile::Builder::new()
            .prefix("import-")
            .tempdir_in(&self.engine.services.data_root)
            .map_err(|e| internal(format!("cannot make room for the upload: {e}")))?;
        let upload_path = dir.path().join("upload");
        let total = store_upload(upload, &upload_path).await?;
        if total == 0 {
            return Err(invalid("no tarball in the request body"));
        }
        let layer = dir.path().join("layer.tar");
        let (from, to) = (upload_path.clone(), layer.clone());
        tokio::task::spawn_blocking(move || plain_tar(&from, &to))
            .await
            .map_err(|e| internal(e.to_string()))??;
        let new = NewImage {
            name: name.to_owned(),
            base: None,
            layer: &layer,
            config,
            author: String::new(),
            comment: message,
            created_by: "holdfast import".to_owned(),
            created: holdfast_rfc3339::format_nanos_go(wall_now().as_unix_nanos()),
        };
        let id = self
            .engine
            .services
            .adapter
            .create_image(new)
            .await
            .map_err(|e| image_failure(name, e))?;
        let shown = if name.is_empty() {
            short_id(&id)
        } else {
            familiar(name)
        };
        self.publish("import", &id, &shown);
        Ok(id)
    }

    /// `docker pull` of one tag or digest: its progress as it goes. A
    /// repository or tag that does not exist, or refused credentials, fail
    /// the call before anything is told; a failure after that ends the
    /// stream. The pull runs on its own: a caller that goes away stops
    /// hearing, the pull goes on.
    pub async fn pull(&self, reference: String, auth: PullAuth) -> Result<Pulling, RequestError> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<PullProgress>();
        let adapter = self.engine.services.adapter.clone();
        let pulling = reference.clone();
        tracing::info!(reference = %pulling, "pull");
        let task = tokio::spawn(async move { adapter.pull_image(&pulling, &auth, &tx).await });
        let first = rx.recv().await;
        let events = self.engine.clone();
        if first.is_none() {
            // The pull ended before it got going.
            let pulled = task
                .await
                .map_err(|e| internal(format!("the pull failed: {e}")))?
                .map_err(|e| image_failure(&reference, e))?;
            let name = familiar(&pulled.name);
            events.images().publish("pull", &name, &name);
            return Ok(Pulling::Done(PullEvent::Done {
                name,
                up_to_date: pulled.up_to_date,
            }));
        }
        let (out, told) = tokio::sync::mpsc::channel::<PullEvent>(64);
        tokio::spawn(async move {
            let mut next = first;
            while let Some(p) = next {
                // A caller that went away stops hearing, not the pull.
                let _ = out.send(PullEvent::Progress(p)).await;
                next = rx.recv().await;
            }
            let last = match task.await {
                Ok(Ok(pulled)) => {
                    let name = familiar(&pulled.name);
                    events.images().publish("pull", &name, &name);
                    PullEvent::Done {
                        name,
                        up_to_date: pulled.up_to_date,
                    }
                }
                Ok(Err(e)) => {
                    tracing::info!(%reference, error = %e, "pull failed");
                    PullEvent::Failed(e.to_string())
                }
                Err(e) => PullEvent::Failed(format!("the pull failed: {e}")),
            };
            let _ = out.send(last).await;
        });
        Ok(Pulling::Going(
            tokio_stream::wrappers::ReceiverStream::new(told).boxed(),
        ))
    }

    /// `docker pull --all-tags`: the repository's tags as its registry
    /// lists them, each pulled in turn with its own progress, then one
    /// `Done` for the repository. The list is asked for before answering,
    /// so a repository the registry does not know fails the call; a tag
    /// that fails ends the stream (what was pulled before it stays).
    pub async fn pull_all_tags(
        &self,
        reference: String,
        auth: PullAuth,
    ) -> Result<BoxStream<'static, PullEvent>, RequestError> {
        let adapter = self.engine.services.adapter.clone();
        let tags = adapter
            .list_tags(&reference, &auth)
            .await
            .map_err(|e| image_failure(&reference, e))?;
        let repository = familiar(&normalize_reference(&reference));
        let repository = repository
            .rsplit_once(':')
            .map_or(repository.clone(), |(r, _)| r.to_owned());
        tracing::info!(%reference, tags = tags.len(), "pull of every tag");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<PullProgress>();
        let name = reference.clone();
        // Its own task, as a single pull: a caller that goes away does not cut it.
        let task = tokio::spawn(async move {
            let mut downloaded = false;
            for tag in tags {
                let pulled = adapter
                    .pull_image(&format!("{name}:{tag}"), &auth, &tx)
                    .await?;
                downloaded |= !pulled.up_to_date;
            }
            Ok::<bool, AdapterError>(downloaded)
        });
        let events = self.engine.clone();
        let (out, told) = tokio::sync::mpsc::channel::<PullEvent>(64);
        tokio::spawn(async move {
            while let Some(p) = rx.recv().await {
                let _ = out.send(PullEvent::Progress(p)).await;
            }
            let last = match task.await {
                Ok(Ok(downloaded)) => {
                    events.images().publish("pull", &repository, &repository);
                    PullEvent::Done {
                        name: repository,
                        up_to_date: !downloaded,
                    }
                }
                Ok(Err(e)) => {
                    tracing::info!(%reference, error = %e, "pull of every tag failed");
                    PullEvent::Failed(e.to_string())
                }
                Err(e) => PullEvent::Failed(format!("the pull failed: {e}")),
            };
            let _ = out.send(last).await;
        });
        Ok(tokio_stream::wrappers::ReceiverStream::new(told).boxed())
    }

    /// `docker push`: a local image sent to its registry; with `all_tags`
    /// (no tag given), every local tag of the repository, one after
    /// another in the order of their names. What can be told before
    /// anything is sent (an image not present) fails the call; a failure
    /// after that ends the stream, and the tags after it are not pushed.
    pub async fn push(
        &self,
        reference: String,
        auth: PullAuth,
        all_tags: bool,
    ) -> Result<BoxStream<'static, PushEvent>, RequestError> {
        let adapter = self.engine.services.adapter.clone();
        let references = if all_tags {
            let tagged = self.local_tags(&reference).await?;
            if tagged.is_empty() {
                return Err(RequestError::new(
                    ErrorKind::NotFound,
                    format!(
                        "An image does not exist locally with the tag: {}",
                        familiar(&repository_of(&normalize_reference(&reference)))
                    ),
                ));
            }
            tagged
        } else {
            match adapter.resolve_image(&reference).await {
                Ok(_) => {}
                Err(AdapterError::ImageNotFound(_)) => {
                    return Err(RequestError::new(
                        ErrorKind::NotFound,
                        format!("An image does not exist locally with the tag: {reference}"),
                    ));
                }
                Err(e) => return Err(image_failure(&reference, e)),
            }
            vec![normalize_reference(&reference)]
        };
        tracing::info!(%reference, tags = references.len(), "push");
        let (pushing_tx, mut pushing_rx) = tokio::sync::mpsc::unbounded_channel::<Pushing>();
        // Its own task: a caller that goes away does not cut a push in half.
        let task = tokio::spawn(async move {
            for pushing in &references {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<PushProgress>();
                let forward_tx = pushing_tx.clone();
                let forward = tokio::spawn(async move {
                    while let Some(p) = rx.recv().await {
                        let _ = forward_tx.send(Pushing::Progress(p));
                    }
                });
                let pushed = adapter.push_image(pushing, &auth, &tx).await;
                drop(tx);
                // This tag's progress is all out before its digest line.
                let _ = forward.await;
                let _ = pushing_tx.send(Pushing::Pushed(pushed?));
            }
            Ok::<(), AdapterError>(())
        });
        let shown_repository = familiar(&repository_of(&normalize_reference(&reference)));
        let events = self.engine.clone();
        let (out, told) = tokio::sync::mpsc::channel::<PushEvent>(64);
        tokio::spawn(async move {
            while let Some(pushing) = pushing_rx.recv().await {
                let event = match pushing {
                    Pushing::Progress(p) => PushEvent::Progress(p),
                    Pushing::Pushed(image) => {
                        let shown = format!("{shown_repository}:{}", image.tag);
                        events.images().publish("push", &shown, &shown);
                        PushEvent::Pushed { shown, image }
                    }
                };
                // A caller that went away stops hearing, not the push.
                let _ = out.send(event).await;
            }
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::info!(%reference, error = %e, "push failed");
                    let _ = out.send(PushEvent::Failed(e.to_string())).await;
                }
                Err(e) => {
                    let _ = out
                        .send(PushEvent::Failed(format!("the push failed: {e}")))
                        .await;
                }
            }
        });
        Ok(tokio_stream::wrappers::ReceiverStream::new(told).boxed())
    }

    /// `docker login`: the credentials checked against the registry at
    /// `server`, as the CLI asks a daemon to (the CLI then stores them).
    pub async fn login(&self, server: &str, auth: &PullAuth) -> Result<LoginOutcome, RequestError> {
        let adapter = &self.engine.services.adapter;
        match holdfast_adapter_containerd::check_login(
            server,
            auth,
            &adapter.config().insecure_registries,
        )
        .await
        {
            Ok(()) => Ok(LoginOutcome::Accepted),
            Err(AdapterError::Registry {
                kind: RegistryFailure::NotFound,
                message,
            }) => Ok(LoginOutcome::Refused(message)),
            Err(e) => Err(image_failure("", e)),
        }
    }

    /// `docker commit`: what the container changed (the upper directory of
    /// its overlay snapshot, as `docker diff` reads it) as one more layer
    /// over its image, with the container's settings as the new image's
    /// config. Its id.
    pub async fn commit(&self, request: CommitRequest) -> Result<String, RequestError> {
        let CommitRequest {
            container,
            name,
            changes,
            author,
            comment,
            pause,
        } = request;
        let engine = self.engine;
        let s = engine.containers().snapshot(&container).await?;
        let id = s.record.id.clone();
        let config = &s.record.config;
        let adapter = &engine.services.adapter;
        let base = adapter
            .resolve_image(&config.image)
            .await
            .map_err(|e| image_failure(&config.image, e))?;
        let mut image_config = image_config(config, &base);
        let base_env = base.config.env.clone().unwrap_or_default();
        crate::dockerfile::apply(&changes, &base_env, &mut image_config)?;
        let dir = tempfile::Builder::new()
            .prefix("commit-")
            .tempdir_in(&engine.services.data_root)
            .map_err(|e| internal(format!("cannot make room for the layer: {e}")))?;
        let layer = dir.path().join("layer.tar");
        // As dockerd (pause=true unless asked otherwise): the container is
        // frozen while its changes are read, so the layer is one moment's.
        // The core freezes and thaws it (a crash in between is thawed by
        // the restarted daemon).
        let read = Command::ReadChanges {
            id: id.clone(),
            pause,
            layer: layer.to_string_lossy().into_owned(),
        };
        if let Answer::Error(e) = engine.command(read).await {
            return Err(e);
        }
        let new = NewImage {
            name: name.clone(),
            base: Some(&base),
            layer: &layer,
            config: image_config,
            author,
            comment,
            // As dockerd: the container's command is what made the layer.
            created_by: config.cmd.clone().unwrap_or_default().join(" "),
            created: holdfast_rfc3339::format_nanos_go(wall_now().as_unix_nanos()),
        };
        let image_id = adapter
            .create_image(new)
            .await
            .map_err(|e| image_failure(&name, e))?;
        if !name.is_empty() {
            self.publish("tag", &image_id, &familiar(&name));
        }
        Ok(image_id)
    }

    /// The local images tagged in the repository `repository` names, as
    /// normalized names, sorted (dockerd pushes them in that order).
    async fn local_tags(&self, repository: &str) -> Result<Vec<String>, RequestError> {
        let wanted = repository_of(&normalize_reference(repository));
        let mut names: Vec<String> = self
            .engine
            .services
            .adapter
            .list_images()
            .await
            .map_err(|e| image_failure(repository, e))?
            .into_iter()
            .map(|i| i.name)
            .filter(|n| !n.contains('@') && repository_of(n) == wanted && n.len() > wanted.len())
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn publish(&self, action: &str, id: &str, name: &str) {
        self.engine.services.events.publish(EventMessage {
            kind: "image",
            action: action.to_owned(),
            actor_id: id.to_owned(),
            from: None,
            attributes: [("name".to_owned(), name.to_owned())].into(),
            time_nanos: wall_now().as_unix_nanos(),
        });
    }
}

/// What the pushing task tells as it goes.
enum Pushing {
    Progress(PushProgress),
    Pushed(PushedImage),
}

/// Whether `reference` may be an image id or a prefix of one (4 hex
/// digits or more, `sha256:` or not).
fn looks_like_id(reference: &str) -> bool {
    let hex = reference.strip_prefix("sha256:").unwrap_or(reference);
    hex.len() >= 4 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `docker.io/library/busybox:latest` as Docker shows it: `busybox:latest`.
pub fn familiar(name: &str) -> String {
    name.strip_prefix("docker.io/library/")
        .or_else(|| name.strip_prefix("docker.io/"))
        .unwrap_or(name)
        .to_owned()
}

/// An image id as Docker shortens it: 12 hex digits.
fn short_id(id: &str) -> String {
    id.strip_prefix("sha256:")
        .unwrap_or(id)
        .chars()
        .take(12)
        .collect()
}

/// An adapter error about an image, as the API answers it.
pub(crate) fn image_failure(reference: &str, e: AdapterError) -> RequestError {
    match e {
        AdapterError::ImageNotFound(_) => RequestError::new(
            ErrorKind::NotFound,
            format!(
                "No such image: {}",
                familiar(&normalize_reference(reference))
            ),
        ),
        AdapterError::Image(m) | AdapterError::Invalid(m) => invalid(m),
        AdapterError::Registry { kind, message } => match kind {
            RegistryFailure::NotFound => RequestError::new(ErrorKind::NotFound, message),
            RegistryFailure::Invalid => invalid(message),
            RegistryFailure::Failed => internal(message),
        },
        e if e.is_unreachable() || e.kind() == holdfast_core::FailureKind::Deadline => {
            RequestError::new(
                ErrorKind::Unavailable,
                format!("containerd is unreachable or not answering: {e}"),
            )
        }
        e => internal(e.to_string()),
    }
}

/// Streams an upload to `path`; returns how many bytes it held.
async fn store_upload<E: std::fmt::Display>(
    mut upload: impl Stream<Item = Result<Bytes, E>> + Unpin,
    path: &Path,
) -> Result<u64, RequestError> {
    let stored = |e: std::io::Error| internal(format!("cannot store the upload: {e}"));
    let mut file = tokio::fs::File::create(path).await.map_err(stored)?;
    let mut total: u64 = 0;
    while let Some(chunk) = upload.next().await {
        let chunk = chunk.map_err(|e| invalid(format!("reading the upload: {e}")))?;
        total += chunk.len() as u64;
        file.write_all(&chunk).await.map_err(stored)?;
    }
    file.flush().await.map_err(stored)?;
    Ok(total)
}

/// An import's upload as a plain tar: gunzipped if it is gzip; other
/// compressions are refused by name.
fn plain_tar(from: &Path, to: &Path) -> Result<(), RequestError> {
    use std::io::Read as _;
    let failed = |e: std::io::Error| internal(format!("reading the upload: {e}"));
    let mut magic = [0u8; 6];
    let n = std::fs::File::open(from)
        .and_then(|mut f| f.read(&mut magic))
        .map_err(failed)?;
    let magic = &magic[..n];
    if magic.starts_with(&[0x1f, 0x8b]) {
        let input = std::fs::File::open(from).map_err(failed)?;
        let mut decoder = flate2::read::GzDecoder::new(std::io::BufReader::new(input));
        let mut out = std::fs::File::create(to).map_err(failed)?;
        std::io::copy(&mut decoder, &mut out)
            .map_err(|e| invalid(format!("the gzip upload is corrupt: {e}")))?;
        return Ok(());
    }
    if magic.starts_with(b"BZh")
        || magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z'])
        || magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
    {
        return Err(invalid(
            "only plain and gzip-compressed tarballs can be imported by holdfast yet",
        ));
    }
    std::fs::rename(from, to).map_err(failed)
}

/// The container's settings as an image config, over its image's: what a
/// container made from the new image runs as this one does.
fn image_config(c: &holdfast_core::ContainerConfig, base: &ResolvedImage) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(entrypoint) = &c.entrypoint {
        // As at create: a new entrypoint drops the image's command.
        out.insert("Entrypoint".into(), json!(entrypoint));
        out.insert("Cmd".into(), json!(c.cmd));
    } else if let Some(cmd) = &c.cmd {
        out.insert("Cmd".into(), json!(cmd));
    }
    if !c.env.is_empty() {
        let mut env: Vec<String> = base.config.env.clone().unwrap_or_default();
        for e in &c.env {
            let key = e.split_once('=').map_or(e.as_str(), |(k, _)| k);
            env.retain(|have| have.split_once('=').map_or(have.as_str(), |(k, _)| k) != key);
            env.push(e.clone());
        }
        out.insert("Env".into(), json!(env));
    }
    if let Some(w) = &c.working_dir {
        out.insert("WorkingDir".into(), json!(w));
    }
    if let Some(u) = &c.user {
        out.insert("User".into(), json!(u));
    }
    if !c.labels.is_empty() {
        let mut labels = base.config.labels.clone().unwrap_or_default();
        labels.extend(c.labels.clone());
        out.insert("Labels".into(), json!(labels));
    }
    if let Some(signal) = c.stop_signal {
        out.insert("StopSignal".into(), json!(signal.to_string()));
    }
    if c.healthcheck.is_some() {
        out.insert(
            "Healthcheck".into(),
            crate::health_config::config_json(c.healthcheck.as_ref()),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn familiar_names() {
        assert_eq!(
            familiar("docker.io/library/busybox:latest"),
            "busybox:latest"
        );
        assert_eq!(familiar("docker.io/me/app:1"), "me/app:1");
        assert_eq!(familiar("localhost:5000/app:1"), "localhost:5000/app:1");
    }

    #[test]
    fn a_repository_is_a_name_without_its_tag_or_digest() {
        assert_eq!(
            repository_of("localhost:5000/mine:1"),
            "localhost:5000/mine"
        );
        assert_eq!(
            repository_of("docker.io/library/busybox:latest"),
            "docker.io/library/busybox"
        );
    }
}
