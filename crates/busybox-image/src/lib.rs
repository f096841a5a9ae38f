//! A busybox image built offline from the host's static busybox (Debian
//! `busybox-static`), written as a docker-archive and as an OCI image-layout
//! tarball, reproducibly: the same busybox and arguments give the same bytes.
//!
//! Every step is fallible and says which path or tool failed; nothing panics
//! on anything external. The daemon seeds `busybox:latest` with
//! [`build_docker_archive`]; the test kit wraps [`BusyboxImage`].
//!
//! The image's root filesystem is `/bin/busybox` plus one symlink per applet,
//! the usual empty directories, `/etc/passwd` and `/etc/group`; its config
//! runs `sh` with the usual `PATH`, and its history names both steps. The
//! config's architecture is the one the busybox binary is built for.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// Where Debian's `busybox-static` installs busybox; searched after `PATH`.
pub const DEFAULT_BUSYBOX: &str = "/bin/busybox";

const INSTALL_HINT: &str = "apt-get install busybox-static";
const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// The platforms of the OCI layout's nested index, besides the native one.
const OCI_PLATFORMS: [&str; 2] = ["arm64", "amd64"];

/// Why an image could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("busybox is neither on PATH nor at {DEFAULT_BUSYBOX}: {INSTALL_HINT}")]
    NotFound,
    #[error("busybox at {} does not exist: {INSTALL_HINT}", path.display())]
    Missing { path: PathBuf },
    #[error("reading busybox at {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("busybox at {} is not an ELF executable: {INSTALL_HINT}", path.display())]
    NotElf { path: PathBuf },
    #[error("busybox at {} is not the static build: {INSTALL_HINT}", path.display())]
    NotStatic { path: PathBuf },
    #[error("busybox at {} is for an unsupported machine (ELF e_machine {machine:#x})", path.display())]
    UnsupportedMachine { path: PathBuf, machine: u16 },
    #[error("running {} --list: {source}", path.display())]
    Run {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} --list failed ({status}): {stderr}", path.display())]
    List {
        path: PathBuf,
        status: ExitStatus,
        stderr: String,
    },
    #[error("busybox at {} has no sh applet", path.display())]
    NoShell { path: PathBuf },
    #[error("invalid image reference {reference:?}: {reason}")]
    InvalidReference {
        reference: String,
        reason: &'static str,
    },
    #[error("adding {entry} to a tarball: {source}")]
    Tar {
        entry: String,
        source: std::io::Error,
    },
    #[error("gzipping the layer: {0}")]
    Gzip(#[source] std::io::Error),
    #[error("serializing JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("creating directory {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

type Result<T, E = BuildError> = std::result::Result<T, E>;

/// Which tarball format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    /// `docker save`: `manifest.json`, `<config>.json`, `<layer>/layer.tar`.
    DockerArchive,
    /// OCI image layout: `oci-layout`, `index.json`, `blobs/sha256/...`. Its
    /// top index points to a nested index with an arm64 and an amd64
    /// manifest (and the native one, if neither), so importers must pick the
    /// platform; the layer is gzipped.
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
    /// `sha256:...` of the native config (linux/amd64 on an amd64 host): the
    /// docker-archive's config, and the one an importer picks from the OCI
    /// layout on the busybox's platform.
    pub config_digest: String,
    pub docker_archive: PathBuf,
    pub oci_layout: PathBuf,
}

impl BusyboxImage {
    /// Builds both tarballs into `dir` (created if missing) from the busybox
    /// [`find_busybox`] finds. `reference` is `repo[:tag]` (a Docker Hub
    /// short name unless its first component is a registry); `stop_signal`
    /// goes into the config's `StopSignal`.
    pub fn build(dir: &Path, reference: &str, stop_signal: Option<&str>) -> Result<BusyboxImage> {
        BusyboxImage::build_with_ballast(dir, reference, stop_signal, 0)
    }

    /// As [`BusyboxImage::build`], with `/ballast.bin`: `ballast_bytes` of
    /// incompressible bytes, for testing layers too big to hold in memory.
    pub fn build_with_ballast(
        dir: &Path,
        reference: &str,
        stop_signal: Option<&str>,
        ballast_bytes: usize,
    ) -> Result<BusyboxImage> {
        let busybox = find_busybox()?;
        BusyboxImage::build_from(&busybox, dir, reference, stop_signal, ballast_bytes)
    }

    /// As [`BusyboxImage::build_with_ballast`], from the busybox at `busybox`.
    pub fn build_from(
        busybox: &Path,
        dir: &Path,
        reference: &str,
        stop_signal: Option<&str>,
        ballast_bytes: usize,
    ) -> Result<BusyboxImage> {
        let image = Contents::new(busybox, reference, stop_signal, ballast_bytes)?;
        create_dir(dir)?;
        let (archive, config_digest) = image.docker_archive()?;
        let docker_archive = dir.join(image.file_name(ImageFormat::DockerArchive));
        write_file(&docker_archive, &archive)?;
        drop(archive);
        let oci_layout = dir.join(image.file_name(ImageFormat::OciLayout));
        write_file(&oci_layout, &image.oci_layout()?)?;
        Ok(BusyboxImage {
            reference: reference.to_owned(),
            containerd_name: image.containerd_name,
            diff_id: image.diff_id,
            config_digest,
            docker_archive,
            oci_layout,
        })
    }

    pub fn tarball(&self, format: ImageFormat) -> &Path {
        match format {
            ImageFormat::DockerArchive => &self.docker_archive,
            ImageFormat::OciLayout => &self.oci_layout,
        }
    }
}

/// Writes only the docker-archive of `reference` (e.g. `busybox:latest`),
/// built from the busybox [`find_busybox`] finds, into `dir` (created if
/// missing) and returns its path. The file appears whole or not at all.
/// Blocking: it reads busybox and runs `busybox --list`.
pub fn build_docker_archive(dir: &Path, reference: &str) -> Result<PathBuf> {
    build_docker_archive_from(&find_busybox()?, dir, reference)
}

/// As [`build_docker_archive`], from the busybox at `busybox`.
pub fn build_docker_archive_from(busybox: &Path, dir: &Path, reference: &str) -> Result<PathBuf> {
    build_docker_archive_with_cmd(busybox, dir, reference, &["sh"])
}

/// As [`build_docker_archive_from`], with `cmd` as the config's `Cmd`: an
/// image of its own (another config, another id) on the same layer.
pub fn build_docker_archive_with_cmd(
    busybox: &Path,
    dir: &Path,
    reference: &str,
    cmd: &[&str],
) -> Result<PathBuf> {
    let mut image = Contents::new(busybox, reference, None, 0)?;
    image.cmd = cmd.iter().map(|a| (*a).to_owned()).collect();
    create_dir(dir)?;
    let (archive, _) = image.docker_archive()?;
    let path = dir.join(image.file_name(ImageFormat::DockerArchive));
    write_file(&path, &archive)?;
    Ok(path)
}

/// The first `busybox` on `PATH`, else [`DEFAULT_BUSYBOX`] if it exists.
/// Whether it is the static build is checked when building.
pub fn find_busybox() -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("busybox"))
        .chain([PathBuf::from(DEFAULT_BUSYBOX)])
        .find(|candidate| candidate.is_file())
        .ok_or(BuildError::NotFound)
}

/// Everything both formats are made of, in memory.
struct Contents {
    repo: String,
    tag: String,
    /// `reference` with `:` and `/` replaced, for file names.
    stem: String,
    containerd_name: String,
    /// The busybox's architecture, as OCI names it.
    arch: &'static str,
    layer: Vec<u8>,
    diff_id: String,
    stop_signal: Option<String>,
    /// The config's `Cmd`: `sh`, unless built with another.
    cmd: Vec<String>,
}

impl Contents {
    fn new(
        busybox: &Path,
        reference: &str,
        stop_signal: Option<&str>,
        ballast_bytes: usize,
    ) -> Result<Contents> {
        let (repo, tag, containerd_name) = parse_reference(reference)?;
        let (busybox_bytes, arch) = read_static_busybox(busybox)?;
        let applets = applets(busybox)?;
        let layer = layer_tar(busybox_bytes, &applets, ballast_bytes)?;
        Ok(Contents {
            repo,
            tag,
            stem: reference.replace([':', '/'], "_"),
            containerd_name,
            arch,
            diff_id: digest(&layer),
            layer,
            stop_signal: stop_signal.map(str::to_owned),
            cmd: vec!["sh".to_owned()],
        })
    }

    fn file_name(&self, format: ImageFormat) -> String {
        match format {
            ImageFormat::DockerArchive => format!("{}.docker.tar", self.stem),
            ImageFormat::OciLayout => format!("{}.oci.tar", self.stem),
        }
    }

    fn config(&self, arch: &str) -> Result<Vec<u8>> {
        let mut config = json!({ "Env": [PATH_ENV], "Cmd": self.cmd });
        if let Some(signal) = &self.stop_signal {
            config["StopSignal"] = json!(signal);
        }
        // What made the image, as `docker history` shows it: the one layer,
        // then the command (no layer). No `created`: the build is
        // reproducible, so it has no time of its own.
        let cmd = format!("CMD {}", config["Cmd"]);
        to_bytes(&json!({
            "architecture": arch,
            "os": "linux",
            "config": config,
            "rootfs": { "type": "layers", "diff_ids": [self.diff_id] },
            "history": [
                { "created_by": "COPY busybox (the host's static build), its applet links, /etc/passwd and /etc/group to /" },
                { "created_by": cmd, "empty_layer": true },
            ],
        }))
    }

    /// The docker-archive tarball and the digest of its (native) config.
    fn docker_archive(&self) -> Result<(Vec<u8>, String)> {
        let config = self.config(self.arch)?;
        let config_digest = digest(&config);
        let (repo, tag) = (&self.repo, &self.tag);
        let manifest = json!([{
            "Config": format!("{}.json", hex_of(&config_digest)),
            "RepoTags": [format!("{repo}:{tag}")],
            "Layers": [format!("{}/layer.tar", hex_of(&self.diff_id))],
        }]);
        let repositories = json!({ repo: { tag: hex_of(&self.diff_id) } });
        let files = vec![
            (format!("{}.json", hex_of(&config_digest)), config),
            (
                format!("{}/layer.tar", hex_of(&self.diff_id)),
                self.layer.clone(),
            ),
            ("manifest.json".to_owned(), to_bytes(&manifest)?),
            ("repositories".to_owned(), to_bytes(&repositories)?),
        ];
        Ok((outer_tar(files)?, config_digest))
    }

    fn oci_layout(&self) -> Result<Vec<u8>> {
        let layer_gz = gzip(&self.layer)?;
        let layer_desc = descriptor(OCI_LAYER_GZIP, &layer_gz);
        let mut blobs = vec![layer_gz];
        let mut platform_manifests = Vec::new();
        let mut platforms = OCI_PLATFORMS.to_vec();
        if !platforms.contains(&self.arch) {
            platforms.push(self.arch);
        }
        for arch in platforms {
            let config = self.config(arch)?;
            let manifest = to_bytes(&json!({
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": descriptor(OCI_CONFIG, &config),
                "layers": [layer_desc.clone()],
            }))?;
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
        }))?;
        let mut nested_desc = descriptor(OCI_INDEX, &nested);
        nested_desc["annotations"] = json!({
            "io.containerd.image.name": self.containerd_name,
            "org.opencontainers.image.ref.name": self.tag,
        });
        blobs.push(nested);
        let index =
            json!({ "schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [nested_desc] });
        let mut files = vec![
            (
                "oci-layout".to_owned(),
                to_bytes(&json!({ "imageLayoutVersion": "1.0.0" }))?,
            ),
            ("index.json".to_owned(), to_bytes(&index)?),
        ];
        for blob in blobs {
            files.push((format!("blobs/sha256/{}", hex_of(&digest(&blob))), blob));
        }
        outer_tar(files)
    }
}

/// `repo[:tag]` to (repo, tag, the fully qualified name containerd stores it
/// under). Short names live on Docker Hub, as Docker resolves them.
fn parse_reference(reference: &str) -> Result<(String, String, String)> {
    let invalid = |reason| BuildError::InvalidReference {
        reference: reference.to_owned(),
        reason,
    };
    if reference.contains('@') {
        return Err(invalid("digests are not supported"));
    }
    if reference
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(invalid("it contains whitespace"));
    }
    let (repo, tag) = match reference.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => (repo, tag),
        _ => (reference, "latest"),
    };
    if repo.is_empty() || tag.is_empty() {
        return Err(invalid("empty repository or tag"));
    }
    if repo.split('/').any(|part| part.is_empty() || part == "..") {
        return Err(invalid("empty or `..` path component"));
    }
    let first = repo.split('/').next().unwrap_or(repo);
    let has_domain = repo.contains('/') && (first.contains(['.', ':']) || first == "localhost");
    let containerd_name = if has_domain {
        format!("{repo}:{tag}")
    } else if repo.contains('/') {
        format!("docker.io/{repo}:{tag}")
    } else {
        format!("docker.io/library/{repo}:{tag}")
    };
    Ok((repo.to_owned(), tag.to_owned(), containerd_name))
}

/// Reads busybox and checks it is a statically linked ELF executable (no
/// program interpreter); returns its bytes and its OCI architecture.
fn read_static_busybox(path: &Path) -> Result<(Vec<u8>, &'static str)> {
    let bytes = fs::read(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            BuildError::Missing {
                path: path.to_owned(),
            }
        } else {
            BuildError::Read {
                path: path.to_owned(),
                source,
            }
        }
    })?;
    let elf = match inspect_elf(&bytes) {
        Some(elf) => elf,
        None => {
            return Err(BuildError::NotElf {
                path: path.to_owned(),
            });
        }
    };
    if elf.interpreted {
        return Err(BuildError::NotStatic {
            path: path.to_owned(),
        });
    }
    let arch = oci_arch(elf.machine, elf.is_64, elf.little_endian).ok_or_else(|| {
        BuildError::UnsupportedMachine {
            path: path.to_owned(),
            machine: elf.machine,
        }
    })?;
    Ok((bytes, arch))
}

#[derive(Debug, PartialEq, Eq)]
struct ElfInfo {
    is_64: bool,
    little_endian: bool,
    machine: u16,
    /// Has a `PT_INTERP` program header: it needs the dynamic loader.
    interpreted: bool,
}

/// The little an ELF header says about linking and architecture; `None` if
/// `bytes` is not a well-formed ELF executable (or is truncated).
fn inspect_elf(bytes: &[u8]) -> Option<ElfInfo> {
    const ET_EXEC: u16 = 2;
    const ET_DYN: u16 = 3;
    const PT_INTERP: u32 = 3;
    if bytes.get(..4)? != b"\x7fELF" {
        return None;
    }
    let is_64 = match bytes.get(4)? {
        1 => false,
        2 => true,
        _ => return None,
    };
    let little_endian = match bytes.get(5)? {
        1 => true,
        2 => false,
        _ => return None,
    };
    let field = |offset: usize, len: usize| -> Option<u64> {
        let raw = bytes.get(offset..offset.checked_add(len)?)?;
        let mut buf = [0u8; 8];
        if little_endian {
            buf.get_mut(..len)?.copy_from_slice(raw);
            Some(u64::from_le_bytes(buf))
        } else {
            buf.get_mut(8 - len..)?.copy_from_slice(raw);
            Some(u64::from_be_bytes(buf))
        }
    };
    let e_type = u16::try_from(field(16, 2)?).ok()?;
    if e_type != ET_EXEC && e_type != ET_DYN {
        return None;
    }
    let machine = u16::try_from(field(18, 2)?).ok()?;
    let (phoff, phentsize, phnum) = if is_64 {
        (field(32, 8)?, field(54, 2)?, field(56, 2)?)
    } else {
        (field(28, 4)?, field(42, 2)?, field(44, 2)?)
    };
    let phoff = usize::try_from(phoff).ok()?;
    let phentsize = usize::try_from(phentsize).ok()?;
    if phentsize < 4 {
        return None;
    }
    let mut interpreted = false;
    for i in 0..usize::try_from(phnum).ok()? {
        let entry = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32::try_from(field(entry, 4)?).ok()? == PT_INTERP {
            interpreted = true;
        }
    }
    Some(ElfInfo {
        is_64,
        little_endian,
        machine,
        interpreted,
    })
}

/// The OCI (GOARCH) name of an ELF machine.
fn oci_arch(machine: u16, is_64: bool, little_endian: bool) -> Option<&'static str> {
    Some(match (machine, is_64, little_endian) {
        (0x3e, true, true) => "amd64",
        (0xb7, true, true) => "arm64",
        (0x03, false, true) => "386",
        (0xf3, true, true) => "riscv64",
        (0x15, true, true) => "ppc64le",
        (0x16, true, false) => "s390x",
        _ => return None,
    })
}

/// The applet names `busybox --list` prints, except busybox itself.
fn applets(busybox: &Path) -> Result<Vec<String>> {
    let list = Command::new(busybox)
        .arg("--list")
        .output()
        .map_err(|source| BuildError::Run {
            path: busybox.to_owned(),
            source,
        })?;
    if !list.status.success() {
        return Err(BuildError::List {
            path: busybox.to_owned(),
            status: list.status,
            stderr: String::from_utf8_lossy(&list.stderr).trim().to_owned(),
        });
    }
    let applets: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .map(str::trim)
        .filter(|a| !matches!(*a, "" | "." | ".." | "busybox") && !a.contains('/'))
        .map(str::to_owned)
        .collect();
    if !applets.iter().any(|a| a == "sh") {
        return Err(BuildError::NoShell {
            path: busybox.to_owned(),
        });
    }
    Ok(applets)
}

fn descriptor(media_type: &str, blob: &[u8]) -> Value {
    json!({ "mediaType": media_type, "digest": digest(blob), "size": blob.len() })
}

fn to_bytes(v: &Value) -> Result<Vec<u8>> {
    Ok(serde_json::to_vec(v)?)
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn hex_of(digest: &str) -> &str {
    digest.strip_prefix("sha256:").unwrap_or(digest)
}

fn gzip(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut enc = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).map_err(BuildError::Gzip)?;
    enc.finish().map_err(BuildError::Gzip)
}

fn create_dir(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|source| BuildError::CreateDir {
        path: dir.to_owned(),
        source,
    })
}

/// Writes `path` through a temporary file in the same directory and a rename,
/// so that it appears whole or not at all; mode 0644.
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let fail = |source| BuildError::Write {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    tmp.write_all(bytes).map_err(fail)?;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(0o644))
        .map_err(fail)?;
    tmp.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}

enum Entry {
    Dir(u32),
    File(u32, Vec<u8>),
    Symlink(String),
}

/// The root filesystem: `/bin/busybox` plus one symlink per applet, the usual
/// empty directories, and `/etc/passwd` and `/etc/group`.
fn layer_tar(busybox: Vec<u8>, applets: &[String], ballast_bytes: usize) -> Result<Vec<u8>> {
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
    for applet in applets {
        entries.push((format!("bin/{applet}"), Entry::Symlink("busybox".into())));
    }
    // Stable: on a duplicate name the first (a fixed entry) is kept.
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.dedup_by(|a, b| a.0 == b.0);

    let mut tar = tar::Builder::new(Vec::new());
    for (path, entry) in entries {
        let mut h = tar::Header::new_ustar();
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        let appended = match entry {
            Entry::Dir(mode) => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(mode);
                h.set_size(0);
                tar.append_data(&mut h, &path, std::io::empty())
            }
            Entry::File(mode, data) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(mode);
                h.set_size(data.len() as u64);
                tar.append_data(&mut h, &path, data.as_slice())
            }
            Entry::Symlink(target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                tar.append_link(&mut h, &path, &target)
            }
        };
        appended.map_err(|source| BuildError::Tar {
            entry: path,
            source,
        })?;
    }
    tar.into_inner().map_err(|source| BuildError::Tar {
        entry: "the layer's end".into(),
        source,
    })
}

/// The tarball around an image: regular files only (and their directories),
/// sorted, with fixed owners and times.
fn outer_tar(mut files: Vec<(String, Vec<u8>)>) -> Result<Vec<u8>> {
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut tar = tar::Builder::new(Vec::new());
    let mut dirs = BTreeSet::new();
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
                    .map_err(|source| BuildError::Tar { entry: dir, source })?;
            }
        }
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_size(data.len() as u64);
        tar.append_data(&mut h, &path, data.as_slice())
            .map_err(|source| BuildError::Tar {
                entry: path,
                source,
            })?;
    }
    tar.into_inner().map_err(|source| BuildError::Tar {
        entry: "the tarball's end".into(),
        source,
    })
}

#[cfg(test)]
mod tests;
