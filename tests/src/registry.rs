//! A real registry on loopback (Debian's `docker-registry`), images put into
//! it with `skopeo copy` from OCI layouts built here (no Docker daemon), and
//! a proxy that can cut a blob off mid-transfer.

use crate::command::run_with_timeout;
use crate::poll_until;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::fs;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const REGISTRY_BINARY: &str = "docker-registry";
const START_BOUND: Duration = Duration::from_secs(30);
const SKOPEO_BOUND: Duration = Duration::from_secs(120);

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// This host's architecture as OCI names it.
pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// A free port on `host` (free when asked; the registry binds it next).
fn free_port(host: &str) -> u16 {
    let listener = TcpListener::bind(format!("{host}:0")).expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

/// A `docker-registry` serving `127.0.0.1:<port>` (or another address of
/// this host) from a directory of its own.
#[derive(Debug)]
pub struct Registry {
    dir: PathBuf,
    host: String,
    port: u16,
    child: Option<Child>,
}

impl Registry {
    /// Starts a registry in `dir` (created); with `credentials`, it asks for
    /// them (htpasswd, bcrypt made by `htpasswd -B`).
    pub fn start(dir: &Path, credentials: Option<(&str, &str)>) -> Registry {
        Registry::start_at(dir, "127.0.0.1", credentials)
    }

    /// [`Registry::start`] listening on `host`, an IPv4 address of this
    /// host.
    pub fn start_at(dir: &Path, host: &str, credentials: Option<(&str, &str)>) -> Registry {
        fs::create_dir_all(dir.join("storage")).expect("create the registry's storage");
        let port = free_port(host);
        let mut config = format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {host}:{port}\n",
            dir.join("storage").display()
        );
        if let Some((user, password)) = credentials {
            let out = run_with_timeout(
                Command::new("htpasswd").args(["-Bbn", user, password]),
                Duration::from_secs(30),
            );
            assert!(out.success(), "htpasswd: {}", out.stderr);
            let file = dir.join("htpasswd");
            fs::write(&file, out.stdout.trim()).expect("write htpasswd");
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: holdfast-test\n    path: {}\n",
                file.display()
            ));
        }
        fs::write(dir.join("config.yml"), config).expect("write the registry config");
        let mut registry = Registry {
            dir: dir.to_owned(),
            host: host.to_owned(),
            port,
            child: None,
        };
        registry.spawn();
        registry
    }

    fn spawn(&mut self) {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open the registry log");
        let child = Command::new(REGISTRY_BINARY)
            .args(["serve"])
            .arg(self.dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("spawn {REGISTRY_BINARY} (apt-get install docker-registry): {e}")
            });
        self.child = Some(child);
        let addr = self.address();
        assert!(
            poll_until(START_BOUND, || http_status(&addr, "/v2/").is_some()),
            "the registry did not answer on {addr} within {START_BOUND:?}\n{}",
            self.log()
        );
    }

    /// `127.0.0.1:<port>` (`<host>:<port>`).
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("registry.log")
    }

    /// The tail of the registry's log, for failure messages.
    pub fn log(&self) -> String {
        let text = fs::read_to_string(self.log_path()).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!("--- registry log (tail)\n{}", tail.join("\n"))
    }

    /// SIGKILLs the registry and waits until it is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and storage.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the registry still runs");
        self.spawn();
    }

    /// Every blob file the registry stores, largest first.
    pub fn blob_files(&self) -> Vec<(PathBuf, u64)> {
        let mut found = Vec::new();
        let mut pending = vec![self.dir.join("storage/docker/registry/v2/blobs")];
        while let Some(dir) = pending.pop() {
            for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.file_name().is_some_and(|n| n == "data") {
                    let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
                    found.push((path, len));
                }
            }
        }
        found.sort_by_key(|(_, len)| std::cmp::Reverse(*len));
        found
    }

    /// `skopeo copy` of `layout`'s image `name` to `<this registry>/<dest>`
    /// (all platforms of an index), with `credentials` if given.
    pub fn push(&self, layout: &Path, name: &str, dest: &str, credentials: Option<(&str, &str)>) {
        let creds = credentials.map(|(u, p)| format!("{u}:{p}"));
        let mut cmd = Command::new("skopeo");
        cmd.args([
            "copy",
            "--insecure-policy",
            "--all",
            "--dest-tls-verify=false",
        ]);
        if let Some(c) = &creds {
            cmd.args(["--dest-creds", c]);
        }
        cmd.arg(format!("oci:{}:{name}", layout.display()))
            .arg(format!("docker://{}/{dest}", self.address()));
        let out = run_with_timeout(&mut cmd, SKOPEO_BOUND);
        assert!(
            out.success(),
            "skopeo copy to {dest} failed ({}):\n{}\n{}\n{}",
            out.code(),
            out.stdout,
            out.stderr,
            self.log()
        );
    }

    /// `skopeo inspect` of `<this registry>/<reference>` (with `credentials`
    /// if given): the registry's own account of the image, `Digest` the
    /// digest of the manifest it serves.
    pub fn inspect(&self, reference: &str, credentials: Option<(&str, &str)>) -> Value {
        let creds = credentials.map(|(u, p)| format!("{u}:{p}"));
        let mut cmd = Command::new("skopeo");
        cmd.args(["inspect", "--tls-verify=false"]);
        if let Some(c) = &creds {
            cmd.args(["--creds", c]);
        }
        cmd.arg(format!("docker://{}/{reference}", self.address()));
        let out = run_with_timeout(&mut cmd, SKOPEO_BOUND);
        assert!(
            out.success(),
            "skopeo inspect {reference} failed ({}):\n{}\n{}\n{}",
            out.code(),
            out.stdout,
            out.stderr,
            self.log()
        );
        serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("skopeo inspect printed no JSON ({e}): {}", out.stdout))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The status code of `GET path` on `addr`, if anything answered.
pub fn http_status(addr: &str, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// One platform's image of an OCI layout: its layers (uncompressed tars)
/// and the config made from them.
#[derive(Debug, Clone)]
pub struct PlatformImage {
    pub arch: String,
    pub layers: Vec<Vec<u8>>,
}

impl PlatformImage {
    fn config(&self) -> Vec<u8> {
        let diff_ids: Vec<String> = self.layers.iter().map(|l| sha256(l)).collect();
        serde_json::to_vec(&json!({
            "architecture": self.arch,
            "os": "linux",
            "config": { "Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": ["sh"] },
            "rootfs": { "type": "layers", "diff_ids": diff_ids },
        }))
        .expect("a config")
    }

    /// The image id a daemon shows for it: its config's digest.
    pub fn config_digest(&self) -> String {
        sha256(&self.config())
    }
}

/// Writes an OCI image layout at `dir` whose `index.json` names `name`: one
/// manifest, or an index of one manifest per platform.
pub fn write_layout(dir: &Path, name: &str, platforms: &[PlatformImage]) {
    let blobs = dir.join("blobs/sha256");
    fs::create_dir_all(&blobs).expect("create the layout");
    let put = |bytes: &[u8]| -> String {
        let digest = sha256(bytes);
        let hex = digest.trim_start_matches("sha256:");
        fs::write(blobs.join(hex), bytes).expect("write a blob");
        digest
    };
    let descriptor = |media_type: &str, bytes: &[u8], digest: String| json!({ "mediaType": media_type, "digest": digest, "size": bytes.len() });
    let mut manifests = Vec::new();
    for p in platforms {
        let config = p.config();
        let layers: Vec<Value> = p
            .layers
            .iter()
            .map(|l| descriptor("application/vnd.oci.image.layer.v1.tar", l, put(l)))
            .collect();
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": descriptor("application/vnd.oci.image.config.v1+json", &config, put(&config)),
            "layers": layers,
        }))
        .expect("a manifest");
        let mut desc = descriptor(
            "application/vnd.oci.image.manifest.v1+json",
            &manifest,
            put(&manifest),
        );
        desc["platform"] = json!({ "architecture": p.arch, "os": "linux" });
        manifests.push(desc);
    }
    let mut top = if let [only] = manifests.as_slice() {
        only.clone()
    } else {
        let index = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": manifests,
        }))
        .expect("an index");
        descriptor(
            "application/vnd.oci.image.index.v1+json",
            &index,
            put(&index),
        )
    };
    if let Some(obj) = top.as_object_mut() {
        obj.remove("platform");
    }
    top["annotations"] = json!({ "org.opencontainers.image.ref.name": name });
    let index = json!({ "schemaVersion": 2, "manifests": [top] });
    fs::write(dir.join("index.json"), index.to_string()).expect("write index.json");
    fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#)
        .expect("write oci-layout");
}

/// A layer: a tar of `files` (path, contents), each mode 0644.
pub fn layer_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, contents) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(contents.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        builder
            .append_data(&mut header, path, *contents)
            .expect("append to a layer");
    }
    builder.into_inner().expect("finish a layer")
}

/// `len` bytes nothing compresses (xorshift), the same for the same seed.
pub fn incompressible(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The busybox layer of the test kit's docker archive (uncompressed).
pub fn busybox_layer(docker_archive: &Path) -> Vec<u8> {
    let file = fs::File::open(docker_archive).expect("open the busybox archive");
    let mut archive = tar::Archive::new(file);
    for entry in archive.entries().expect("read the busybox archive") {
        let mut entry = entry.expect("an entry");
        let path = entry.path().expect("a path").to_string_lossy().into_owned();
        if path.ends_with("/layer.tar") {
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).expect("read the layer");
            return bytes;
        }
    }
    panic!("no layer.tar in {}", docker_archive.display());
}

/// A TCP proxy in front of a registry that can hold back a blob's bytes
/// after a number of them went through, to make a registry die mid-transfer.
#[derive(Debug)]
pub struct CuttingProxy {
    port: u16,
    shared: Arc<ProxyShared>,
}

#[derive(Debug, Default)]
struct ProxyShared {
    /// (a string the blob's request carries, bytes to let through).
    cut: Mutex<Option<(String, u64)>>,
    /// Set once a response was held back.
    held: AtomicBool,
    stop: AtomicBool,
}

impl CuttingProxy {
    /// Proxies `127.0.0.1:<new port>` to `upstream`.
    pub fn start(upstream: String) -> CuttingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy addr").port();
        let shared = Arc::new(ProxyShared::default());
        let s = shared.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.stop.load(Ordering::Acquire) {
                    return;
                }
                let Ok(client) = client else { continue };
                let s = s.clone();
                let upstream = upstream.clone();
                std::thread::spawn(move || proxy_connection(client, &upstream, &s));
            }
        });
        CuttingProxy { port, shared }
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// From now on, a response to a request carrying `marker` stops after
    /// `after_bytes` and waits for the upstream to die.
    pub fn cut(&self, marker: &str, after_bytes: u64) {
        *self.shared.cut.lock().expect("proxy lock") = Some((marker.to_owned(), after_bytes));
    }

    /// Lets everything through again.
    pub fn heal(&self) {
        *self.shared.cut.lock().expect("proxy lock") = None;
    }

    /// Whether a response is (or was) held back.
    pub fn held(&self) -> bool {
        self.shared.held.load(Ordering::Acquire)
    }
}

impl Drop for CuttingProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(self.address());
    }
}

fn proxy_connection(client: TcpStream, upstream: &str, shared: &Arc<ProxyShared>) {
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    let (Ok(mut client_read), Ok(mut server_write)) = (client.try_clone(), server.try_clone())
    else {
        return;
    };
    // Bytes to let through on this connection once the marked request passed.
    let budget = Arc::new(AtomicU64::new(u64::MAX));
    let up_budget = budget.clone();
    let up_shared = shared.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match client_read.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let text = String::from_utf8_lossy(&buf[..n]);
            if let Some((marker, after)) = up_shared.cut.lock().ok().and_then(|c| c.clone())
                && text.contains(&marker)
            {
                up_budget.store(after, Ordering::Release);
            }
            if server_write.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = server_write.shutdown(Shutdown::Write);
    });
    let (mut server_read, mut client_write) = (server, client);
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match server_read.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let left = budget.load(Ordering::Acquire);
        if left == 0 {
            // Held: swallow what the upstream still sends until it dies.
            shared.held.store(true, Ordering::Release);
            continue;
        }
        let pass = (n as u64).min(left) as usize;
        if left != u64::MAX {
            budget.store(left - pass as u64, Ordering::Release);
        }
        if client_write.write_all(&buf[..pass]).is_err() {
            break;
        }
    }
    let _ = client_write.shutdown(Shutdown::Both);
}
