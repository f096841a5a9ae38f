//! A busybox image built offline from the host's static busybox.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// Which tarball format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    /// `docker save`: `manifest.json`, `<config>.json`, `<layer>/layer.tar`.
    DockerArchive,
    /// OCI image layout: `oci-layout`, `index.json`, `blobs/sha256/...`. Its
    /// top index points to a nested index with an arm64 and an amd64
    /// manifest, so importers must pick the platform; the layer is gzipped.
    OciLayout,
}

/// The busybox image as two tarballs with the same layer and config.
#[derive(Debug, Clone)]
pub struct BusyboxImage {
    /// As given to [`BusyboxImage::build`], e.g. `busybox:latest`.
    pub reference: String,
    /// The fully qualified name containerd stores it under.
    pub containerd_name: String,
    /// `sha256:...` of the uncompressed layer.
    pub diff_id: String,
    /// `sha256:...` of the linux/amd64 config.
    pub config_digest: String,
    pub docker_archive: PathBuf,
    pub oci_layout: PathBuf,
}

impl BusyboxImage {
    /// Builds both tarballs into `dir`. `reference` is `repo:tag` (a Docker
    /// Hub short name); `stop_signal` goes into the config's `StopSignal`.
    pub fn build(dir: &Path, reference: &str, stop_signal: Option<&str>) -> BusyboxImage {
        BusyboxImage::build_with_ballast(dir, reference, stop_signal, 0)
    }

    /// As [`BusyboxImage::build`], with `/ballast.bin`: `ballast_bytes` of
    /// incompressible bytes, for testing layers too big to hold in memory.
    pub fn build_with_ballast(
        dir: &Path,
        reference: &str,
        stop_signal: Option<&str>,
        ballast_bytes: usize,
    ) -> BusyboxImage {
        let (repo, tag) = reference.rsplit_once(':').unwrap_or((reference, "latest"));
        let containerd_name = if repo.contains('/') {
            format!("docker.io/{repo}:{tag}")
        } else {
            format!("docker.io/library/{repo}:{tag}")
        };
        let layer = layer_tar(ballast_bytes);
        let diff_id = digest(&layer);
        let config_amd64 = config_json("amd64", &diff_id, stop_signal);
        let config_digest = digest(&config_amd64);

        fs::create_dir_all(dir).expect("create image directory");
        let stem = reference.replace([':', '/'], "_");
        let docker_archive = dir.join(format!("{stem}.docker.tar"));
        let oci_layout = dir.join(format!("{stem}.oci.tar"));

        // docker-archive
        let manifest = json!([{
            "Config": format!("{}.json", hex_of(&config_digest)),
            "RepoTags": [format!("{repo}:{tag}")],
            "Layers": [format!("{}/layer.tar", hex_of(&diff_id))],
        }]);
        let repositories = json!({ repo: { tag: hex_of(&diff_id) } });
        let files = vec![
            (
                format!("{}.json", hex_of(&config_digest)),
                config_amd64.clone(),
            ),
            (format!("{}/layer.tar", hex_of(&diff_id)), layer.clone()),
            ("manifest.json".to_owned(), to_bytes(&manifest)),
            ("repositories".to_owned(), to_bytes(&repositories)),
        ];
        fs::write(&docker_archive, outer_tar(files)).expect("write docker-archive");

        // OCI layout
        let layer_gz = gzip(&layer);
        let layer_desc = descriptor(OCI_LAYER_GZIP, &layer_gz);
        let mut blobs = vec![layer_gz.clone()];
        let mut platform_manifests = Vec::new();
        for arch in ["arm64", "amd64"] {
            let config = config_json(arch, &diff_id, stop_signal);
            let manifest = to_bytes(&json!({
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": descriptor(OCI_CONFIG, &config),
                "layers": [layer_desc.clone()],
            }));
            let mut desc = descriptor(OCI_MANIFEST, &manifest);
            desc["platform"] = json!({ "architecture": arch, "os": "linux" });
            platform_manifests.push(desc);
            blobs.push(config);
            blobs.push(manifest);
        }
        let nested = to_bytes(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": platform_manifests,
        }));
        let mut nested_desc = descriptor(OCI_INDEX, &nested);
        nested_desc["annotations"] = json!({
            "io.containerd.image.name": containerd_name,
            "org.opencontainers.image.ref.name": tag,
        });
        blobs.push(nested);
        let index =
            json!({ "schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [nested_desc] });
        let mut files = vec![
            (
                "oci-layout".to_owned(),
                to_bytes(&json!({ "imageLayoutVersion": "1.0.0" })),
            ),
            ("index.json".to_owned(), to_bytes(&index)),
        ];
        for blob in blobs {
            files.push((format!("blobs/sha256/{}", hex_of(&digest(&blob))), blob));
        }
        fs::write(&oci_layout, outer_tar(files)).expect("write OCI layout");

        BusyboxImage {
            reference: reference.to_owned(),
            containerd_name,
            diff_id,
            config_digest,
            docker_archive,
            oci_layout,
        }
    }

    pub fn tarball(&self, format: ImageFormat) -> &Path {
        match format {
            ImageFormat::DockerArchive => &self.docker_archive,
            ImageFormat::OciLayout => &self.oci_layout,
        }
    }
}

fn config_json(arch: &str, diff_id: &str, stop_signal: Option<&str>) -> Vec<u8> {
    let mut config = json!({ "Env": [PATH_ENV], "Cmd": ["sh"] });
    if let Some(signal) = stop_signal {
        config["StopSignal"] = json!(signal);
    }
    to_bytes(&json!({
        "architecture": arch,
        "os": "linux",
        "config": config,
        "rootfs": { "type": "layers", "diff_ids": [diff_id] },
    }))
}

fn descriptor(media_type: &str, blob: &[u8]) -> Value {
    json!({ "mediaType": media_type, "digest": digest(blob), "size": blob.len() })
}

fn to_bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("serialize JSON")
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn hex_of(digest: &str) -> &str {
    digest.strip_prefix("sha256:").unwrap_or(digest)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut enc = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).expect("gzip in memory");
    enc.finish().expect("gzip in memory")
}

enum Entry {
    Dir(u32),
    File(u32, Vec<u8>),
    Symlink(String),
}

/// The root filesystem: `/bin/busybox` plus one symlink per applet, the usual
/// empty directories, and `/etc/passwd` and `/etc/group`.
fn layer_tar(ballast_bytes: usize) -> Vec<u8> {
    let busybox_path = crate::which("busybox");
    let busybox = fs::read(&busybox_path).expect("read the static busybox");
    let list = Command::new(&busybox_path)
        .arg("--list")
        .output()
        .expect("run busybox --list");
    assert!(list.status.success(), "busybox --list failed");
    let mut entries: Vec<(String, Entry)> = vec![
        ("bin/".into(), Entry::Dir(0o755)),
        ("bin/busybox".into(), Entry::File(0o755, busybox)),
        ("dev/".into(), Entry::Dir(0o755)),
        ("etc/".into(), Entry::Dir(0o755)),
        (
            "etc/passwd".into(),
            Entry::File(
                0o644,
                b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n".to_vec(),
            ),
        ),
        ("etc/group".into(), Entry::File(0o644, b"root:x:0:\nnogroup:x:65534:\n".to_vec())),
        ("proc/".into(), Entry::Dir(0o755)),
        ("root/".into(), Entry::Dir(0o700)),
        ("sys/".into(), Entry::Dir(0o755)),
        ("tmp/".into(), Entry::Dir(0o1777)),
    ];
    if ballast_bytes > 0 {
        // A xorshift stream: reproducible, and gzip cannot shrink it.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let ballast = (0..ballast_bytes)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        entries.push(("ballast.bin".into(), Entry::File(0o644, ballast)));
    }
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        let applet = applet.trim();
        if applet.is_empty() || applet == "busybox" || applet.contains('/') {
            continue;
        }
        entries.push((format!("bin/{applet}"), Entry::Symlink("busybox".into())));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.dedup_by(|a, b| a.0 == b.0);

    let mut tar = tar::Builder::new(Vec::new());
    for (path, entry) in entries {
        let mut h = tar::Header::new_ustar();
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        match entry {
            Entry::Dir(mode) => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(mode);
                h.set_size(0);
                tar.append_data(&mut h, &path, std::io::empty())
                    .expect("tar a directory");
            }
            Entry::File(mode, data) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(mode);
                h.set_size(data.len() as u64);
                tar.append_data(&mut h, &path, data.as_slice())
                    .expect("tar a file");
            }
            Entry::Symlink(target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                tar.append_link(&mut h, &path, &target)
                    .expect("tar a symlink");
            }
        }
    }
    tar.into_inner().expect("finish layer tar")
}

/// The tarball around an image: regular files only (and their directories),
/// sorted, with fixed owners and times.
fn outer_tar(mut files: Vec<(String, Vec<u8>)>) -> Vec<u8> {
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut tar = tar::Builder::new(Vec::new());
    let mut dirs = std::collections::BTreeSet::new();
    for (path, data) in files {
        let parts: Vec<&str> = path.split('/').collect();
        for i in 1..parts.len() {
            let dir = format!("{}/", parts[..i].join("/"));
            if dirs.insert(dir.clone()) {
                let mut h = tar::Header::new_ustar();
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_mtime(0);
                h.set_size(0);
                tar.append_data(&mut h, &dir, std::io::empty())
                    .expect("tar a directory");
            }
        }
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_size(data.len() as u64);
        tar.append_data(&mut h, &path, data.as_slice())
            .expect("tar a file");
    }
    tar.into_inner().expect("finish image tar")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_tarballs_are_reproducible() {
        let a = tempfile::tempdir().expect("tempdir");
        let b = tempfile::tempdir().expect("tempdir");
        let x = BusyboxImage::build(a.path(), "busybox:latest", None);
        let y = BusyboxImage::build(b.path(), "busybox:latest", None);
        assert_eq!(x.diff_id, y.diff_id);
        assert_eq!(x.containerd_name, "docker.io/library/busybox:latest");
        for f in [ImageFormat::DockerArchive, ImageFormat::OciLayout] {
            let ta = fs::read(x.tarball(f)).expect("read");
            let tb = fs::read(y.tarball(f)).expect("read");
            assert_eq!(digest(&ta), digest(&tb), "{f:?} differs between builds");
        }
    }
}
