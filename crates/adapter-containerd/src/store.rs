//! Writing an image into containerd, shared by import (`docker load`) and
//! pull: blobs streamed into the content store with their digest checked
//! before the commit, gc labels over the tree, layers unpacked into the
//! snapshotter, and the image record last. Everything is done under a lease
//! the caller holds, so a failure halfway leaves nothing that outlives it.

use crate::client::Adapter;
use crate::container::is_code;
use crate::document::{Document, read_config, read_document};
use crate::error::AdapterError;
use crate::image::{Descriptor, bad, chain_id};
use containerd_client::services::v1::images_client::ImagesClient;
use containerd_client::services::v1::snapshots::{
    CommitSnapshotRequest, PrepareSnapshotRequest, StatSnapshotRequest,
};
use containerd_client::services::v1::{
    AbortRequest, AddResourceRequest, ApplyRequest, CreateImageRequest, Image, Info, InfoRequest,
    Resource, UpdateImageRequest, UpdateRequest, WriteAction, WriteContentRequest,
};
use containerd_client::tonic::Code;
use containerd_client::tonic::transport::Channel;
use futures_util::{Stream, StreamExt as _};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};

/// What [`Adapter::write_blob`] found or did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Written {
    /// The content store had it already (it is now held by the lease too).
    Existed,
    /// Written and committed.
    Committed,
}

/// What [`Adapter::unpack`] reports about each layer, by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unpacking {
    /// Its snapshot exists already.
    Exists(usize),
    /// Being applied.
    Applying(usize),
    /// Applied and committed.
    Applied(usize),
}

/// One ingest per lease and blob: two pulls of the same layer at once each
/// write their own (containerd keeps the first commit, the second finds it
/// there) instead of one failing on the other's lock.
fn ingest_ref(lease: &str, digest: &str) -> String {
    format!("{lease}-{digest}")
}

impl Adapter {
    /// Whether the content store holds `digest`; if it does, `lease` holds it
    /// too from now on (content left by a failed attempt whose lease is gone
    /// may otherwise be collected before the image record refers to it).
    pub(crate) async fn hold_content(
        &self,
        digest: &str,
        lease: &str,
    ) -> Result<bool, AdapterError> {
        if !self.has_content(digest).await? {
            return Ok(false);
        }
        self.add_to_lease(lease, digest, "content").await?;
        Ok(true)
    }

    async fn add_to_lease(&self, lease: &str, id: &str, kind: &str) -> Result<(), AdapterError> {
        let mut leases = self.leases();
        let req = self.req(AddResourceRequest {
            id: lease.to_owned(),
            resource: Some(Resource {
                id: id.to_owned(),
                r#type: kind.to_owned(),
            }),
        });
        self.rpc("Leases.AddResource", leases.add_resource(req))
            .await
            .map(|_| ())
    }

    /// Streams one blob into the content store under `lease` (nothing is
    /// written if it is there). `chunks` is hashed and counted on the way;
    /// the commit is sent only when every chunk arrived, the size is
    /// `total` and the digest is `digest`, so a short, long or corrupted
    /// source never becomes content. `progress` gets the bytes written so far.
    pub(crate) async fn write_blob<S, P>(
        &self,
        digest: &str,
        total: i64,
        lease: &str,
        chunks: S,
        mut progress: P,
    ) -> Result<Written, AdapterError>
    where
        S: Stream<Item = Result<Vec<u8>, AdapterError>> + Send,
        P: FnMut(u64) + Send,
    {
        if self.hold_content(digest, lease).await? {
            return Ok(Written::Existed);
        }
        let timeout = self.config().import_call_timeout;
        let r#ref = ingest_ref(lease, digest);
        let message = |action: WriteAction, offset: i64, data: Vec<u8>| WriteContentRequest {
            action: action as i32,
            r#ref: r#ref.clone(),
            total,
            expected: digest.to_owned(),
            offset,
            data,
            labels: HashMap::new(),
        };
        let (tx, rx) = tokio::sync::mpsc::channel::<WriteContentRequest>(2);
        let request = self.leased(
            tokio_stream::wrappers::ReceiverStream::new(rx),
            lease,
            timeout,
        )?;
        let mut content = self.content();
        let feed = async move {
            let mut hasher = Sha256::new();
            let mut offset = 0i64;
            let mut chunks = std::pin::pin!(chunks);
            while let Some(chunk) = chunks.next().await {
                let chunk = chunk?;
                let len = i64::try_from(chunk.len()).unwrap_or(i64::MAX);
                if offset.saturating_add(len) > total {
                    return Err(bad(format!("{digest} is larger than its {total} bytes")));
                }
                hasher.update(&chunk);
                if tx
                    .send(message(WriteAction::Write, offset, chunk))
                    .await
                    .is_err()
                {
                    // The write ended early; its own error says why.
                    return Ok(());
                }
                offset += len;
                progress(u64::try_from(offset).unwrap_or_default());
            }
            let got = format!("sha256:{}", hex::encode(hasher.finalize()));
            if offset != total || got != digest {
                return Err(bad(format!(
                    "digest mismatch: {digest} ({total} bytes) arrived as {got} ({offset} bytes)"
                )));
            }
            let _ = tx
                .send(message(WriteAction::Commit, offset, Vec::new()))
                .await;
            Ok(())
        };
        let (fed, written) = tokio::join!(feed, self.await_write(&mut content, request, timeout));
        // The source's failure says more than the write it cut short.
        if let Err(e) = fed.and(written) {
            self.abort_ingest(lease, digest).await;
            return Err(e);
        }
        Ok(Written::Committed)
    }

    /// Drops what a failed write left in the ingest area (best effort).
    pub(crate) async fn abort_ingest(&self, lease: &str, digest: &str) {
        let mut content = self.content();
        let req = self.req(AbortRequest {
            r#ref: ingest_ref(lease, digest),
        });
        if let Err(e) = self.rpc("Content.Abort", content.abort(req)).await
            && !is_code(&e, Code::NotFound)
        {
            tracing::debug!(error = %e, %digest, "ingest not aborted");
        }
    }

    async fn await_write(
        &self,
        content: &mut containerd_client::services::v1::content_client::ContentClient<Channel>,
        request: containerd_client::tonic::Request<
            tokio_stream::wrappers::ReceiverStream<WriteContentRequest>,
        >,
        timeout: std::time::Duration,
    ) -> Result<(), AdapterError> {
        let mut responses = match self
            .rpc_within("Content.Write", timeout, content.write(request))
            .await
        {
            Ok(r) => r,
            Err(e) if is_code(&e, Code::AlreadyExists) => return Ok(()),
            Err(e) => return Err(e),
        };
        loop {
            match tokio::time::timeout(timeout, responses.message()).await {
                Err(_) => {
                    return Err(AdapterError::Deadline {
                        what: "Content.Write",
                        timeout,
                    });
                }
                Ok(Ok(Some(_))) => {}
                Ok(Ok(None)) => return Ok(()),
                Ok(Err(status)) if status.code() == Code::AlreadyExists => return Ok(()),
                Ok(Err(status)) => return Err(AdapterError::rpc("Content.Write")(status)),
            }
        }
    }

    /// Writes a small document (a manifest, an index, a config) held in memory.
    pub(crate) async fn write_document(
        &self,
        bytes: Vec<u8>,
        digest: &str,
        lease: &str,
    ) -> Result<Written, AdapterError> {
        let total = i64::try_from(bytes.len()).map_err(|_| bad("document too large"))?;
        let chunks = futures_util::stream::iter([Ok(bytes)]);
        self.write_blob(digest, total, lease, chunks, |_| {}).await
    }

    /// Labels indexes and manifests with `containerd.io/gc.ref.content.*` so
    /// the image record keeps all of its content alive. Children an index
    /// names but the content store lacks (the other platforms of a pull) are
    /// labelled but not descended into.
    pub(crate) async fn label_tree(
        &self,
        target: &Descriptor,
        lease: &str,
    ) -> Result<(), AdapterError> {
        let mut pending = vec![target.clone()];
        let mut seen = 0;
        while let Some(desc) = pending.pop() {
            seen += 1;
            if seen > 64 {
                return Err(bad("image index too large or cyclic"));
            }
            if desc != *target && !self.has_content(&desc.digest).await? {
                continue;
            }
            let bytes = self.read_blob(&desc.digest).await?;
            let mut labels = BTreeMap::new();
            match read_document(&desc.digest, &desc.media_type, &bytes)? {
                Document::Index(index) => {
                    for (i, m) in index.manifests().iter().enumerate() {
                        let child = Descriptor::from_oci(m)?;
                        labels.insert(
                            format!("containerd.io/gc.ref.content.m.{i}"),
                            child.digest.clone(),
                        );
                        pending.push(child);
                    }
                }
                Document::Manifest(manifest) => {
                    labels.insert(
                        "containerd.io/gc.ref.content.config".to_owned(),
                        manifest.config().digest().to_string(),
                    );
                    for (i, l) in manifest.layers().iter().enumerate() {
                        labels.insert(
                            format!("containerd.io/gc.ref.content.l.{i}"),
                            l.digest().to_string(),
                        );
                    }
                }
            }
            self.set_labels(&desc.digest, labels, lease).await?;
        }
        Ok(())
    }

    pub(crate) async fn has_content(&self, digest: &str) -> Result<bool, AdapterError> {
        let mut content = self.content();
        let info = content.info(self.req(InfoRequest {
            digest: digest.to_owned(),
        }));
        match self.rpc("Content.Info", info).await {
            Ok(_) => Ok(true),
            Err(e) if is_code(&e, Code::NotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub(crate) async fn set_labels(
        &self,
        digest: &str,
        labels: BTreeMap<String, String>,
        lease: &str,
    ) -> Result<(), AdapterError> {
        let paths = labels.keys().map(|k| format!("labels.{k}")).collect();
        let info = Info {
            digest: digest.to_owned(),
            labels: labels.into_iter().collect(),
            ..Default::default()
        };
        let req = UpdateRequest {
            info: Some(info),
            update_mask: Some(prost_types::FieldMask { paths }),
        };
        let mut content = self.content();
        let timeout = self.config().call_timeout;
        self.rpc(
            "Content.Update",
            content.update(self.leased(req, lease, timeout)?),
        )
        .await
        .map(|_| ())
    }

    /// Applies the chosen platform's layers into committed snapshots named
    /// by their chain ids, skipping (and leasing) those that exist.
    /// `report` hears about each layer as it goes.
    pub(crate) async fn unpack(
        &self,
        target: &Descriptor,
        lease: &str,
        mut report: impl FnMut(Unpacking) + Send,
    ) -> Result<(), AdapterError> {
        let (_, manifest) = self
            .find_manifest(&target.media_type, &target.digest)
            .await?;
        let config_desc = Descriptor::from_oci(manifest.config())?;
        let config_bytes = self.read_blob(&config_desc.digest).await?;
        let diff_ids =
            read_config(&format!("config {}", config_desc.digest), &config_bytes)?.diff_ids;
        let layers: Vec<Descriptor> = manifest
            .layers()
            .iter()
            .map(Descriptor::from_oci)
            .collect::<Result<_, _>>()?;
        if layers.len() != diff_ids.len() || layers.is_empty() {
            return Err(bad(format!(
                "{} layers but {} diff ids",
                layers.len(),
                diff_ids.len()
            )));
        }
        let timeout = self.config().import_call_timeout;
        let snapshotter = self.snapshotter().to_owned();
        let mut parent = String::new();
        for (i, layer) in layers.iter().enumerate() {
            let chain = chain_id(&diff_ids[..=i]).ok_or_else(|| bad("no layers"))?;
            let mut snapshots = self.snapshots();
            let stat = StatSnapshotRequest {
                snapshotter: snapshotter.clone(),
                key: chain.clone(),
            };
            match self
                .rpc("Snapshots.Stat", snapshots.stat(self.req(stat)))
                .await
            {
                Ok(_) => {
                    self.add_to_lease(lease, &chain, &format!("snapshots/{snapshotter}"))
                        .await?;
                    report(Unpacking::Exists(i));
                    parent = chain;
                    continue;
                }
                Err(e) if is_code(&e, Code::NotFound) => {}
                Err(e) => return Err(e),
            }
            report(Unpacking::Applying(i));
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos();
            let key = format!("holdfast-unpack-{nanos}-{i}");
            let prepare = PrepareSnapshotRequest {
                snapshotter: snapshotter.clone(),
                key: key.clone(),
                parent: parent.clone(),
                labels: HashMap::new(),
            };
            let mounts = self
                .rpc(
                    "Snapshots.Prepare",
                    snapshots.prepare(self.leased(prepare, lease, timeout)?),
                )
                .await?
                .mounts;
            let apply = ApplyRequest {
                diff: Some(layer.to_proto()),
                mounts,
                payloads: HashMap::new(),
                sync_fs: false,
            };
            let mut diff = self.diff();
            let applied = self
                .rpc_within(
                    "Diff.Apply",
                    timeout,
                    diff.apply(self.leased(apply, lease, timeout)?),
                )
                .await;
            let applied = match applied {
                Ok(a) => a.applied.map(|d| d.digest).unwrap_or_default(),
                Err(e) => {
                    let _ = self.remove_snapshot(&key).await;
                    return Err(e);
                }
            };
            if applied != diff_ids[i] {
                let _ = self.remove_snapshot(&key).await;
                return Err(bad(format!(
                    "layer {} unpacks to {applied}, config says {}",
                    layer.digest, diff_ids[i]
                )));
            }
            let commit = CommitSnapshotRequest {
                snapshotter: snapshotter.clone(),
                name: chain.clone(),
                key: key.clone(),
                labels: HashMap::new(),
            };
            match self
                .rpc(
                    "Snapshots.Commit",
                    snapshots.commit(self.leased(commit, lease, timeout)?),
                )
                .await
            {
                Ok(_) => {}
                Err(e) if is_code(&e, Code::AlreadyExists) => {
                    let _ = self.remove_snapshot(&key).await;
                }
                Err(e) => return Err(e),
            }
            report(Unpacking::Applied(i));
            parent = chain;
        }
        // The config keeps the unpacked snapshots alive (as containerd's unpacker does).
        let label = BTreeMap::from([(
            format!("containerd.io/gc.ref.snapshot.{snapshotter}"),
            parent,
        )]);
        self.set_labels(&config_desc.digest, label, lease).await
    }

    /// Creates the image record, or points an existing one at the new target.
    /// Callers do this last, once everything it refers to is in place.
    pub(crate) async fn put_image(
        &self,
        name: &str,
        target: &Descriptor,
    ) -> Result<(), AdapterError> {
        self.put_record(Image {
            name: name.to_owned(),
            target: Some(target.to_proto()),
            ..Default::default()
        })
        .await
    }

    /// Creates the image record, or moves the existing name to the new
    /// target, as `docker tag`, `pull` and `load` move a tag. An image
    /// whose last name moves away is kept untagged, never lost (its
    /// content would go at containerd's next garbage collection); an
    /// untagged image that gets a name is untagged no more.
    pub(crate) async fn put_record(&self, image: Image) -> Result<(), AdapterError> {
        let mut images: ImagesClient<Channel> = self.images();
        let target = image
            .target
            .as_ref()
            .map(|t| t.digest.clone())
            .unwrap_or_default();
        let req = self.req(CreateImageRequest {
            image: Some(image.clone()),
            source_date_epoch: None,
        });
        match self.rpc("Images.Create", images.create(req)).await {
            Ok(_) => {}
            Err(e) if is_code(&e, Code::AlreadyExists) => {
                self.keep_displaced(&image.name, &target).await?;
                let req = self.req(UpdateImageRequest {
                    image: Some(image.clone()),
                    update_mask: None,
                    source_date_epoch: None,
                });
                self.rpc("Images.Update", images.update(req)).await?;
            }
            Err(e) => return Err(e),
        }
        if !crate::image::is_dangling(&image.name) {
            match self
                .delete_image(&crate::image::dangling_name(&target))
                .await
            {
                Ok(()) | Err(AdapterError::ImageNotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Before `name` moves to `new_target`: the image it names now, when
    /// no other name holds it, is kept under its untagged name.
    async fn keep_displaced(&self, name: &str, new_target: &str) -> Result<(), AdapterError> {
        let old = match self.get_image(name).await {
            Ok(old) => old,
            Err(AdapterError::ImageNotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let Some(old_target) = old.target.clone().filter(|t| t.digest != new_target) else {
            return Ok(());
        };
        let held_elsewhere = self
            .list_images()
            .await?
            .iter()
            .any(|i| i.name != name && i.target_digest == old_target.digest);
        if held_elsewhere || crate::image::is_dangling(name) {
            return Ok(());
        }
        let kept = Image {
            name: crate::image::dangling_name(&old_target.digest),
            labels: old.labels,
            target: Some(old_target),
            created_at: None,
            updated_at: None,
        };
        let req = self.req(CreateImageRequest {
            image: Some(kept),
            source_date_epoch: None,
        });
        match self.rpc("Images.Create", self.images().create(req)).await {
            Ok(_) => Ok(()),
            Err(e) if is_code(&e, Code::AlreadyExists) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Runs `work` under a fresh lease named after `what`, deleting the
    /// lease afterwards whatever happened: what `work` wrote is then held
    /// only by the image records it created.
    pub(crate) async fn with_lease<T, F>(
        &self,
        what: &str,
        work: impl FnOnce(String) -> F,
    ) -> Result<T, AdapterError>
    where
        F: std::future::Future<Output = Result<T, AdapterError>>,
    {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let lease = format!("holdfast-{what}-{nanos}");
        self.create_lease(&lease).await?;
        let result = work(lease.clone()).await;
        if let Err(e) = self.delete_lease(&lease).await {
            tracing::warn!(error = %e, %lease, "lease not deleted; it expires by itself");
        }
        result
    }
}
