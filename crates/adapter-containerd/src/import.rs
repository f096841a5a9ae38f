//! Image import (`docker load`): a docker-archive or OCI-layout tarball into
//! the content store, an image record per name, and the layers unpacked into
//! the snapshotter, through the writer shared with pull (`store.rs`).
//! Everything is done under a lease so that nothing is garbage-collected
//! halfway; the image record and gc labels hold it after.

use crate::client::Adapter;
use crate::document::{MAX_JSON_BYTES, read_index};
use crate::error::AdapterError;
use crate::image::{Descriptor, bad, normalize_reference};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Files up to this size are also kept in memory (manifests, configs, indexes).
const KEEP_BYTES: usize = 8 << 20;
const WRITE_CHUNK: usize = 1 << 20;
pub(crate) const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub(crate) const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
pub(crate) const DOCKER_LAYER: &str = "application/vnd.docker.image.rootfs.diff.tar";
const DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";

/// One image registered by an import.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportedImage {
    pub name: String,
    pub target_digest: String,
}

/// A file of the tarball as stored in the content store.
#[derive(Clone, Debug)]
struct Stored {
    digest: String,
    size: i64,
    gzip: bool,
    bytes: Option<Vec<u8>>,
}

/// Everything read from a tarball.
#[derive(Debug, Default)]
struct Tarball {
    files: HashMap<String, Stored>,
    links: HashMap<String, String>,
}

impl Tarball {
    fn get(&self, path: &str) -> Option<&Stored> {
        let mut path = clean(path);
        for _ in 0..8 {
            if let Some(s) = self.files.get(&path) {
                return Some(s);
            }
            path = self.links.get(&path)?.clone();
        }
        None
    }

    /// The bytes of a small file (a document) of the tarball.
    fn document(&self, path: &str) -> Result<&[u8], AdapterError> {
        let stored = self
            .get(path)
            .ok_or_else(|| bad(format!("{path} missing from the tarball")))?;
        stored
            .bytes
            .as_deref()
            .ok_or_else(|| bad(format!("{path} is too large")))
    }
}

/// One entry of a docker-archive's `manifest.json` (Docker's own format,
/// which no OCI spec describes).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ArchiveEntry {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    #[serde(default)]
    layers: Vec<String>,
}

fn clean(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// One tarball entry: a file's bytes, a symlink, or nothing of interest.
fn read_entry<R: std::io::Read>(e: &mut tar::Entry<R>) -> std::io::Result<Option<TarItem>> {
    let name = clean(&e.path()?.to_string_lossy());
    let kind = e.header().entry_type();
    if kind.is_symlink() {
        let target = e
            .link_name()?
            .map(|t| t.to_string_lossy().into_owned())
            .unwrap_or_default();
        let base = Path::new(&name)
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(Some(TarItem::Link(
            name,
            clean(&format!("{base}/{target}")),
        )));
    }
    if !kind.is_file() {
        return Ok(None);
    }
    Ok(Some(TarItem::File(name, Entry::read(e)?)))
}

/// A file of the tarball, read once and hashed on the way: kept in memory
/// when small, spooled to an anonymous temporary file when not, so a
/// multi-GB layer costs disk, not memory.
struct Entry {
    digest: String,
    size: u64,
    gzip: bool,
    bytes: Option<Vec<u8>>,
    spool: Option<std::fs::File>,
}

impl Entry {
    fn read(source: &mut impl Read) -> std::io::Result<Entry> {
        use std::io::Write as _;
        let mut hasher = Sha256::new();
        // Never allocate for what a header claims (an abort cannot be caught):
        // read up to the in-memory limit, then spool the rest.
        let mut head = Vec::new();
        source
            .by_ref()
            .take(KEEP_BYTES as u64 + 1)
            .read_to_end(&mut head)?;
        hasher.update(&head);
        let gzip = head.starts_with(&[0x1f, 0x8b]);
        if head.len() <= KEEP_BYTES {
            return Ok(Entry {
                digest: format!("sha256:{}", hex::encode(hasher.finalize())),
                size: head.len() as u64,
                gzip,
                bytes: Some(head),
                spool: None,
            });
        }
        let mut spool = tempfile::tempfile()?;
        spool.write_all(&head)?;
        let mut size = head.len() as u64;
        drop(head);
        let mut buf = vec![0u8; WRITE_CHUNK];
        loop {
            let n = source.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            spool.write_all(&buf[..n])?;
            size += n as u64;
        }
        Ok(Entry {
            digest: format!("sha256:{}", hex::encode(hasher.finalize())),
            size,
            gzip,
            bytes: None,
            spool: Some(spool),
        })
    }
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Where a blob's bytes are.
pub(crate) enum BlobSource {
    Memory(Vec<u8>),
    File(std::fs::File),
}

impl BlobSource {
    /// The bytes in chunks, read in a blocking thread through a small
    /// channel: a spooled layer never sits in memory whole.
    pub(crate) fn chunks(
        self,
    ) -> impl futures_util::Stream<Item = Result<Vec<u8>, AdapterError>> + Send {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, AdapterError>>(2);
        tokio::task::spawn_blocking(move || {
            let mut reader: Box<dyn Read> = match self {
                BlobSource::Memory(bytes) => Box::new(std::io::Cursor::new(bytes)),
                BlobSource::File(mut file) => {
                    use std::io::Seek as _;
                    if let Err(e) = file.seek(std::io::SeekFrom::Start(0)) {
                        let _ = tx.blocking_send(Err(e.into()));
                        return;
                    }
                    Box::new(file)
                }
            };
            loop {
                let mut chunk = Vec::with_capacity(WRITE_CHUNK);
                let read = reader
                    .by_ref()
                    .take(WRITE_CHUNK as u64)
                    .read_to_end(&mut chunk);
                let item = match read {
                    Ok(0) => return,
                    Ok(_) => Ok(chunk),
                    Err(e) => Err(e.into()),
                };
                let failed = item.is_err();
                if tx.blocking_send(item).is_err() || failed {
                    return;
                }
            }
        });
        tokio_stream::wrappers::ReceiverStream::new(rx)
    }
}

enum TarItem {
    File(String, Entry),
    Link(String, String),
}

impl Adapter {
    /// Imports every named image of a docker-archive or OCI-layout tarball
    /// (the format is detected), and unpacks the linux/amd64 variant.
    pub async fn import_image(&self, tarball: &Path) -> Result<Vec<ImportedImage>, AdapterError> {
        self.with_lease("import", |lease| async move {
            self.import_leased(tarball, &lease).await
        })
        .await
    }

    async fn import_leased(
        &self,
        tarball: &Path,
        lease: &str,
    ) -> Result<Vec<ImportedImage>, AdapterError> {
        let tar = self.store_tarball(tarball, lease).await?;
        let mut images = Vec::new();
        if tar.get("index.json").is_some() && tar.get("oci-layout").is_some() {
            let index = read_index("index.json", tar.document("index.json")?)?;
            for m in index.manifests() {
                let annotation = |key: &str| m.annotations().as_ref()?.get(key).cloned();
                let name = annotation("io.containerd.image.name")
                    .or_else(|| {
                        annotation("org.opencontainers.image.ref.name")
                            .filter(|r| r.contains(':') || r.contains('/'))
                    })
                    .map(|n| normalize_reference(&n));
                let target = Descriptor::from_oci(m)?;
                // An image the layout names not is loaded untagged.
                let name = name.unwrap_or_else(|| crate::image::dangling_name(&target.digest));
                images.push((name, target));
            }
        } else if tar.get("manifest.json").is_some() {
            let bytes = tar.document("manifest.json")?;
            if bytes.len() > MAX_JSON_BYTES {
                return Err(bad("manifest.json is too large"));
            }
            let manifest: Vec<ArchiveEntry> = serde_json::from_slice(bytes)
                .map_err(|e| bad(format!("manifest.json is not a docker archive's: {e}")))?;
            for entry in &manifest {
                let target = self.docker_manifest(&tar, entry, lease).await?;
                let tags = entry.repo_tags.as_deref().unwrap_or_default();
                if tags.is_empty() {
                    // `docker save` of an image by id: loaded untagged.
                    let name = crate::image::dangling_name(&target.digest);
                    images.push((name, target.clone()));
                }
                for tag in tags {
                    images.push((normalize_reference(tag), target.clone()));
                }
            }
        } else {
            return Err(bad(
                "neither an OCI layout (index.json, oci-layout) nor a docker archive (manifest.json)",
            ));
        }
        if images.is_empty() {
            return Err(bad("the tarball names no image"));
        }
        let mut out = Vec::new();
        for (name, target) in images {
            self.label_tree(&target, lease).await?;
            self.unpack(&target, lease, |_| {}).await?;
            self.put_image(&name, &target).await?;
            out.push(ImportedImage {
                name,
                target_digest: target.digest.clone(),
            });
        }
        Ok(out)
    }

    /// Reads the tarball entry by entry (in a blocking thread) and writes
    /// every file into the content store.
    async fn store_tarball(&self, tarball: &Path, lease: &str) -> Result<Tarball, AdapterError> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<TarItem>>(1);
        let path: PathBuf = tarball.to_owned();
        let reader = tokio::task::spawn_blocking(move || {
            let send = |item| tx.blocking_send(item).is_ok();
            let file = match std::fs::File::open(&path) {
                Ok(f) => f,
                Err(e) => return send(Err(e)),
            };
            let mut archive = tar::Archive::new(file);
            let entries = match archive.entries() {
                Ok(e) => e,
                Err(e) => return send(Err(e)),
            };
            for entry in entries {
                let item = entry.and_then(|mut e| read_entry(&mut e));
                match item {
                    Ok(None) => {}
                    Ok(Some(item)) => {
                        if !send(Ok(item)) {
                            return false;
                        }
                    }
                    Err(e) => return send(Err(e)),
                }
            }
            true
        });
        let mut tar = Tarball::default();
        while let Some(item) = rx.recv().await {
            match item.map_err(unreadable)? {
                TarItem::Link(from, to) => {
                    tar.links.insert(from, to);
                }
                TarItem::File(name, entry) => {
                    let digest = entry.digest.clone();
                    if let Some(hex) = name.strip_prefix("blobs/sha256/")
                        && digest != format!("sha256:{hex}")
                    {
                        return Err(bad(format!("{name} does not match its digest ({digest})")));
                    }
                    let size = i64::try_from(entry.size)
                        .map_err(|_| bad(format!("{name} is too large")))?;
                    let source = match entry.spool {
                        Some(file) => BlobSource::File(file),
                        None => BlobSource::Memory(entry.bytes.clone().unwrap_or_default()),
                    };
                    self.write_blob(&digest, size, lease, source.chunks(), |_| {})
                        .await?;
                    let stored = Stored {
                        digest,
                        size,
                        gzip: entry.gzip,
                        bytes: entry.bytes,
                    };
                    tar.files.insert(name, stored);
                }
            }
        }
        reader.await.map_err(|e| bad(format!("tar reader: {e}")))?;
        Ok(tar)
    }

    /// Writes the schema 2 manifest a docker-archive entry stands for.
    async fn docker_manifest(
        &self,
        tar: &Tarball,
        entry: &ArchiveEntry,
        lease: &str,
    ) -> Result<Descriptor, AdapterError> {
        let config_path = &entry.config;
        let config = tar
            .get(config_path)
            .ok_or_else(|| bad(format!("{config_path} missing")))?;
        let mut layers = Vec::new();
        for path in &entry.layers {
            let layer = tar
                .get(path)
                .ok_or_else(|| bad(format!("{path} missing")))?;
            let media_type = if layer.gzip {
                DOCKER_LAYER_GZIP
            } else {
                DOCKER_LAYER
            };
            layers.push(
                json!({ "mediaType": media_type, "digest": layer.digest, "size": layer.size }),
            );
        }
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST,
            "config": { "mediaType": DOCKER_CONFIG, "digest": config.digest, "size": config.size },
            "layers": layers,
        }))
        .map_err(|e| bad(e.to_string()))?;
        let digest = sha256(&manifest);
        self.write_document(manifest.clone(), &digest, lease)
            .await?;
        Ok(Descriptor {
            media_type: DOCKER_MANIFEST.to_owned(),
            digest,
            size: manifest.len() as i64,
        })
    }
}

/// A tarball that cannot be read as one is the client's: refused in Go's
/// words, as dockerd refuses it (the reader's own words are logged); a
/// failure of the host (a full disk while spooling) stays the host's.
fn unreadable(e: std::io::Error) -> AdapterError {
    use std::io::ErrorKind as K;
    let said = e.to_string();
    tracing::debug!(error = %said, "the tarball cannot be read");
    match e.kind() {
        K::UnexpectedEof => bad("unexpected EOF"),
        K::Other | K::InvalidData | K::InvalidInput if said.contains("EOF") => {
            bad("unexpected EOF")
        }
        K::Other | K::InvalidData | K::InvalidInput => bad("archive/tar: invalid tar header"),
        _ => AdapterError::from(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_entries_are_spooled_to_disk_and_hashed_whole() {
        use std::io::Read as _;
        let data: Vec<u8> = (0..KEEP_BYTES + 3 * WRITE_CHUNK + 7)
            .map(|i| (i % 251) as u8)
            .collect();
        let entry = Entry::read(&mut data.as_slice()).expect("read");
        assert_eq!(entry.digest, sha256(&data));
        assert_eq!(entry.size, data.len() as u64);
        assert!(entry.bytes.is_none(), "not kept in memory");
        let mut spooled = Vec::new();
        let mut file = entry.spool.expect("spooled");
        use std::io::Seek as _;
        file.seek(std::io::SeekFrom::Start(0)).expect("seek");
        file.read_to_end(&mut spooled).expect("read back");
        assert!(spooled == data, "the spool holds the entry");

        let small = Entry::read(&mut &b"\x1f\x8bsmall"[..]).expect("read");
        assert_eq!(
            (small.size, small.gzip, small.bytes.as_deref()),
            (7, true, Some(&b"\x1f\x8bsmall"[..]))
        );
        assert!(small.spool.is_none());
    }

    #[test]
    fn a_tar_header_claiming_terabytes_does_not_abort() {
        let mut header = tar::Header::new_gnu();
        header.set_path("huge").expect("a short path");
        header.set_size(1 << 42);
        header.set_cksum();
        let mut bytes = header.as_bytes().to_vec();
        bytes.extend_from_slice(&[0u8; 1024]);
        let mut archive = tar::Archive::new(bytes.as_slice());
        let mut entries = archive.entries().expect("entries");
        let mut entry = entries.next().expect("one entry").expect("a header");
        // No abort: either an error, or only the bytes that are really there
        // (whose digest then fails to match the manifest).
        match read_entry(&mut entry) {
            Err(_) => {}
            Ok(Some(TarItem::File(_, entry))) => assert!(entry.size <= 1024, "{}", entry.size),
            Ok(_) => panic!("a regular file entry"),
        }
    }

    #[test]
    fn tar_paths_are_cleaned() {
        assert_eq!(clean("./blobs/sha256/ab"), "blobs/sha256/ab");
        assert_eq!(clean("a/../b/./c"), "b/c");
        assert_eq!(clean("../../x"), "x");
    }

    #[test]
    fn symlinked_layers_resolve() {
        let mut t = Tarball::default();
        t.files.insert(
            "a/layer.tar".into(),
            Stored {
                digest: "sha256:a".into(),
                size: 1,
                gzip: false,
                bytes: None,
            },
        );
        t.links.insert("b/layer.tar".into(), "a/layer.tar".into());
        assert_eq!(
            t.get("./b/layer.tar").map(|s| s.digest.as_str()),
            Some("sha256:a")
        );
        assert!(t.get("c").is_none());
    }
}
