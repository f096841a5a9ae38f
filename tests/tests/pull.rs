//! Registry pulls with the real docker CLI from a real registry on loopback
//! (Debian's `docker-registry`), images put into it with `skopeo` from OCI
//! layouts built here: a multi-layer image (pulled by `docker pull` and by
//! `docker run`), every tag of a repository (`--all-tags`), an index with
//! two platforms, credentials from `docker
//! login`, a registry that dies mid-pull, a corrupted blob, and an endless
//! manifest; `docker search` against a registry without a search index and
//! against one with it.

use holdfast_e2e::Daemon;
use holdfast_e2e::registry::{
    CuttingProxy, PlatformImage, Registry, busybox_layer, host_arch, incompressible, layer_of,
    write_layout,
};
use holdfast_testkit::busybox_image;
use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

fn busybox(dir: &Path) -> Vec<u8> {
    let image = busybox_image(&dir.join("busybox"), "busybox:latest", None);
    busybox_layer(&image.docker_archive)
}

/// Every `repository:tag` the daemon lists.
fn listed(d: &Daemon) -> Vec<String> {
    holdfast_e2e::lines(&d.ok(&["images", "--format", "{{.Repository}}:{{.Tag}}"]))
}

#[test]
fn pulls_from_a_local_registry() {
    let d = Daemon::start();
    let dir = d.root().join("registry");
    let registry = Registry::start(&dir, None);
    let base = busybox(&dir);
    let two_layers = PlatformImage {
        arch: host_arch().to_owned(),
        layers: vec![base.clone(), layer_of(&[("etc/pulled.txt", b"pulled\n")])],
    };
    write_layout(&dir.join("app"), "app", std::slice::from_ref(&two_layers));
    registry.push(&dir.join("app"), "app", "app:1", None);
    let r = registry.address();

    // docker pull: progress, then the image is there and runs.
    let pulled = d.ok(&["pull", &format!("{r}/app:1")]);
    for needle in [
        "Pulling from app",
        "Pull complete",
        "Digest: sha256:",
        "Status: Downloaded newer image for",
    ] {
        assert!(
            pulled.contains(needle),
            "no {needle:?} in:\n{pulled}\n{}",
            d.diagnostics()
        );
    }
    assert!(
        listed(&d).contains(&format!("{r}/app:1")),
        "{}",
        d.diagnostics()
    );
    let id = d.ok(&["image", "inspect", "-f", "{{.Id}}", &format!("{r}/app:1")]);
    assert_eq!(id.trim(), two_layers.config_digest());
    let out = d.ok(&[
        "run",
        "--rm",
        &format!("{r}/app:1"),
        "cat",
        "/etc/pulled.txt",
    ]);
    assert_eq!(out, "pulled\n");
    let again = d.ok(&["pull", &format!("{r}/app:1")]);
    assert!(again.contains("Image is up to date for"), "{again}");

    // By digest: the one the pull printed names the same image.
    let digest = pulled
        .lines()
        .find_map(|l| l.strip_prefix("Digest: "))
        .map(str::trim)
        .expect("a digest line")
        .to_owned();
    let by_digest = format!("{r}/app@{digest}");
    let pulled_by_digest = d.ok(&["pull", &by_digest]);
    assert!(
        pulled_by_digest.contains(&digest),
        "{pulled_by_digest}\n{}",
        d.diagnostics()
    );
    let id = d.ok(&["image", "inspect", "-f", "{{.Id}}", &by_digest]);
    assert_eq!(id.trim(), two_layers.config_digest());
    let out = d.ok(&["run", "--rm", &by_digest, "cat", "/etc/pulled.txt"]);
    assert_eq!(out, "pulled\n");
    // The registry's digest names it (RepoDigests), apart from its tags.
    let names = d.ok(&[
        "image",
        "inspect",
        "-f",
        "{{json .RepoTags}} {{json .RepoDigests}}",
        &format!("{r}/app:1"),
    ]);
    assert_eq!(
        names.trim(),
        format!(r#"["{r}/app:1"] ["{by_digest}"]"#),
        "{}",
        d.diagnostics()
    );
    let with_digests = d.ok(&[
        "images",
        "--digests",
        "--format",
        "{{.Tag}} {{.Digest}}",
        &format!("{r}/app"),
    ]);
    assert!(
        with_digests.lines().any(|l| l == format!("1 {digest}")),
        "{with_digests}"
    );
    // What the registry says of it, without a pull: the descriptor the
    // pull printed, and the platform its config names.
    let said = d.http("GET", &format!("/distribution/{r}/app:1/json"), None);
    assert_eq!(said.status, 200, "{said:?}\n{}", d.diagnostics());
    let said: serde_json::Value = serde_json::from_str(&said.body).expect("JSON");
    assert_eq!(said["Descriptor"]["digest"], digest.as_str(), "{said}");
    assert_eq!(
        said["Platforms"],
        serde_json::json!([{ "architecture": host_arch(), "os": "linux" }]),
        "{said}"
    );
    let missing = d.http("GET", &format!("/distribution/{r}/app:nosuch/json"), None);
    assert_eq!(missing.status, 404, "{missing:?}");

    // rmi of a tag its repository has another of keeps the digest; of
    // the repository's last tag takes the digest with it, as dockerd's.
    let (one, keep) = (format!("{r}/app:1"), format!("{r}/app:keep"));
    d.ok(&["tag", &one, &keep]);
    assert_eq!(d.ok(&["rmi", &one]), format!("Untagged: {one}\n"));
    let gone = d.ok(&["rmi", &keep]);
    assert_eq!(
        holdfast_e2e::lines(&gone),
        [
            format!("Untagged: {keep}"),
            format!("Untagged: {by_digest}"),
            format!("Deleted: {}", two_layers.config_digest()),
        ],
        "{}",
        d.diagnostics()
    );

    // docker run of an image not present pulls it (the CLI does, on a 404).
    registry.push(&dir.join("app"), "app", "app:2", None);
    let run = d.docker(&[
        "run",
        "--rm",
        &format!("{r}/app:2"),
        "cat",
        "/etc/pulled.txt",
    ]);
    assert!(
        run.success() && run.stdout.ends_with("pulled\n"),
        "docker run of a missing image: exit {}\n{}\n{}\n{}",
        run.code(),
        run.stdout,
        run.stderr,
        d.diagnostics()
    );
    assert!(
        run.stderr.contains("Unable to find image"),
        "{}",
        run.stderr
    );

    // An index with two platforms: the host's is chosen.
    let other = if host_arch() == "arm64" {
        "amd64"
    } else {
        "arm64"
    };
    let native = PlatformImage {
        arch: host_arch().to_owned(),
        layers: vec![
            base.clone(),
            layer_of(&[("etc/arch.txt", host_arch().as_bytes())]),
        ],
    };
    let foreign = PlatformImage {
        arch: other.to_owned(),
        layers: vec![
            base.clone(),
            layer_of(&[("etc/arch.txt", other.as_bytes())]),
        ],
    };
    write_layout(
        &dir.join("multi"),
        "multi",
        &[foreign.clone(), native.clone()],
    );
    registry.push(&dir.join("multi"), "multi", "multi:1", None);
    // An index: every platform it lists.
    let said = d.http("GET", &format!("/distribution/{r}/multi:1/json"), None);
    let said: serde_json::Value = serde_json::from_str(&said.body).expect("JSON");
    let mut arches: Vec<&str> = said["Platforms"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p["architecture"].as_str())
                .collect()
        })
        .unwrap_or_default();
    arches.sort_unstable();
    let mut want = vec![host_arch(), other];
    want.sort_unstable();
    assert_eq!(arches, want, "{said}");
    d.ok(&["pull", &format!("{r}/multi:1")]);
    let id = d.ok(&["image", "inspect", "-f", "{{.Id}}", &format!("{r}/multi:1")]);
    assert_eq!(
        id.trim(),
        native.config_digest(),
        "not the {} config",
        host_arch()
    );
    let arch = d.ok(&[
        "run",
        "--rm",
        &format!("{r}/multi:1"),
        "cat",
        "/etc/arch.txt",
    ]);
    assert_eq!(arch, host_arch());

    // Two pulls of the same new image at once both succeed.
    let third = PlatformImage {
        arch: host_arch().to_owned(),
        layers: vec![
            base.clone(),
            layer_of(&[("three.bin", &incompressible(2 << 20, 3))]),
        ],
    };
    write_layout(&dir.join("three"), "three", &[third]);
    registry.push(&dir.join("three"), "three", "app:3", None);
    let both = [
        d.spawn_docker(&["pull", &format!("{r}/app:3")]),
        d.spawn_docker(&["pull", &format!("{r}/app:3")]),
    ];
    for pull in both {
        let out = d.wait_exit("a concurrent pull", pull);
        assert!(
            out.success(),
            "a concurrent pull failed: {}\n{}",
            out.stderr,
            d.diagnostics()
        );
    }

    // The API itself: dockerd's JSON progress messages, byte counts included.
    let fresh = PlatformImage {
        arch: host_arch().to_owned(),
        layers: vec![
            base.clone(),
            layer_of(&[("four.bin", &incompressible(3 << 20, 4))]),
        ],
    };
    write_layout(&dir.join("four"), "four", &[fresh]);
    registry.push(&dir.join("four"), "four", "app:4", None);
    let api = d.http(
        "POST",
        &format!("/images/create?fromImage={r}/app&tag=4"),
        None,
    );
    assert_eq!(api.status, 200, "{}", api.body);
    let messages: Vec<serde_json::Value> = api
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    assert!(
        messages.iter().any(|m| m["status"] == "Downloading"
            && m["progressDetail"]["total"]
                .as_u64()
                .is_some_and(|t| t > 3 << 20)
            && m["progressDetail"]["current"].as_u64().is_some()),
        "no Downloading with byte counts: {}",
        api.body
    );
    let last = messages.last().expect("messages");
    assert_eq!(
        last["status"],
        format!("Status: Downloaded newer image for {r}/app:4")
    );

    // A tag the registry lacks: dockerd's 404.
    let missing = d.fails(&["pull", &format!("{r}/app:nope")]);
    assert!(missing.stderr.contains("not found"), "{}", missing.stderr);

    // A corrupted blob: refused on its digest, nothing registered.
    let corrupt = PlatformImage {
        arch: host_arch().to_owned(),
        layers: vec![base, layer_of(&[("big.bin", &incompressible(4 << 20, 7))])],
    };
    write_layout(&dir.join("corrupt"), "corrupt", &[corrupt]);
    registry.push(&dir.join("corrupt"), "corrupt", "corrupt:1", None);
    let (largest, _) = registry
        .blob_files()
        .into_iter()
        .next()
        .expect("blobs stored");
    let mut bytes = std::fs::read(&largest).expect("read the blob");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&largest, bytes).expect("corrupt the blob");
    let refused = d.fails(&["pull", &format!("{r}/corrupt:1")]);
    assert!(
        refused.stderr.to_ascii_lowercase().contains("digest"),
        "a corrupted blob: {}\n{}",
        refused.stderr,
        d.diagnostics()
    );
    assert!(
        !listed(&d).contains(&format!("{r}/corrupt:1")),
        "{}",
        d.diagnostics()
    );
}

/// `docker pull --all-tags`: every tag the registry lists, each with its
/// own progress, one status line for the repository; a second time
/// everything is up to date; a repository the registry does not know is
/// refused.
#[test]
fn pulls_every_tag_of_a_repository() {
    let d = Daemon::start();
    let dir = d.root().join("registry");
    let registry = Registry::start(&dir, None);
    let base = busybox(&dir);
    let r = registry.address();
    let mut ids = Vec::new();
    for tag in ["1", "2"] {
        let image = PlatformImage {
            arch: host_arch().to_owned(),
            layers: vec![base.clone(), layer_of(&[("etc/tag.txt", tag.as_bytes())])],
        };
        let layout = dir.join(format!("tag{tag}"));
        write_layout(&layout, "app", std::slice::from_ref(&image));
        registry.push(&layout, "app", &format!("app:{tag}"), None);
        ids.push(image.config_digest());
    }
    // A third tag of the first image: its layers are there by then.
    registry.push(&dir.join("tag1"), "app", "app:one", None);

    let out = d.ok(&["pull", "--all-tags", &format!("{r}/app")]);
    for needle in [
        "1: Pulling from app",
        "2: Pulling from app",
        "one: Pulling from app",
        "Pull complete",
        &format!("Status: Downloaded newer image for {r}/app"),
    ] {
        assert!(
            out.contains(needle),
            "no {needle:?} in:\n{out}\n{}",
            d.diagnostics()
        );
    }
    assert_eq!(out.matches("Digest: sha256:").count(), 3, "{out}");
    let images = listed(&d);
    for tag in ["1", "2", "one"] {
        assert!(
            images.contains(&format!("{r}/app:{tag}")),
            "{tag} not listed: {images:?}\n{}",
            d.diagnostics()
        );
    }
    for (tag, id) in [("1", &ids[0]), ("2", &ids[1]), ("one", &ids[0])] {
        let got = d.ok(&[
            "image",
            "inspect",
            "-f",
            "{{.Id}}",
            &format!("{r}/app:{tag}"),
        ]);
        assert_eq!(got.trim(), id.as_str(), "{tag}");
        assert_eq!(
            d.ok(&[
                "run",
                "--rm",
                &format!("{r}/app:{tag}"),
                "cat",
                "/etc/tag.txt"
            ]),
            if tag == "2" { "2" } else { "1" }
        );
    }
    let again = d.ok(&["pull", "-a", &format!("{r}/app")]);
    assert!(
        again.contains(&format!("Status: Image is up to date for {r}/app")),
        "{again}"
    );

    // The API: no tag anywhere is every tag, as with dockerd.
    let api = d.http("POST", &format!("/images/create?fromImage={r}/app"), None);
    assert_eq!(api.status, 200, "{}", api.body);
    assert!(
        api.body
            .contains(&format!("Status: Image is up to date for {r}/app")),
        "{}",
        api.body
    );

    let missing = d.fails(&["pull", "-a", &format!("{r}/nothing")]);
    assert!(
        missing.stderr.contains("repository does not exist"),
        "a repository the registry does not know:\n{}\n{}\n{}",
        missing.stdout,
        missing.stderr,
        d.diagnostics()
    );
    assert!(!listed(&d).iter().any(|n| n.contains("nothing")));
}
#[test]
fn pulls_with_docker_login_credentials() {
    let d = Daemon::start();
    let dir = d.root().join("registry");
    let registry = Registry::start(&dir, Some(("holdfast", "s3cret")));
    let image = PlatformImage {
        arch: host_arch().to_owned(),
        layers: vec![
            busybox(&dir),
            layer_of(&[("etc/private.txt", b"private\n")]),
        ],
    };
    write_layout(&dir.join("private"), "private", &[image]);
    registry.push(
        &dir.join("private"),
        "private",
        "private:1",
        Some(("holdfast", "s3cret")),
    );
    let r = registry.address();
    let reference = format!("{r}/private:1");

    let anonymous = d.fails(&["pull", &reference]);
    assert!(
        anonymous.stderr.contains("docker login"),
        "an anonymous pull from a registry that asks for credentials: {}\n{}",
        anonymous.stderr,
        d.diagnostics()
    );
    let every = d.fails(&["pull", "--all-tags", &format!("{r}/private")]);
    assert!(
        every.stderr.contains("docker login"),
        "an anonymous pull of every tag: {}\n{}",
        every.stderr,
        d.diagnostics()
    );
    let wrong = d.fails(&["login", &r, "-u", "holdfast", "-p", "wrong"]);
    assert!(wrong.stderr.contains("refused"), "{}", wrong.stderr);
    let login = d.docker(&["login", &r, "-u", "holdfast", "-p", "s3cret"]);
    assert!(
        login.success() && login.stdout.contains("Login Succeeded"),
        "docker login: {}\n{}\n{}",
        login.stdout,
        login.stderr,
        d.diagnostics()
    );
    d.ok(&["pull", &reference]);
    let every = d.ok(&["pull", "--all-tags", &format!("{r}/private")]);
    assert!(every.contains("Image is up to date"), "{every}");
    assert_eq!(
        d.ok(&["run", "--rm", &reference, "cat", "/etc/private.txt"]),
        "private\n"
    );
}

#[test]
fn a_registry_dying_mid_pull_leaves_nothing_behind() {
    let d = Daemon::start();
    let dir = d.root().join("registry");
    let mut registry = Registry::start(&dir, None);
    let big = layer_of(&[("big.bin", &incompressible(24 << 20, 11))]);
    let image = PlatformImage {
        arch: host_arch().to_owned(),
        layers: vec![busybox(&dir), big],
    };
    write_layout(&dir.join("big"), "big", &[image]);
    registry.push(&dir.join("big"), "big", "big:1", None);
    // The registry's copy of the big layer (skopeo compressed it on push).
    let (largest, _) = registry
        .blob_files()
        .into_iter()
        .next()
        .expect("blobs stored");
    let hex = largest
        .parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .expect("blobs/sha256/xx/<hex>/data");
    let proxy = CuttingProxy::start(registry.address());
    proxy.cut(&hex, 1 << 20);
    let reference = format!("{}/big:1", proxy.address());

    let pull = d.spawn_docker(&["pull", &reference]);
    d.wait_until("the big layer is cut off after 1 MiB", || proxy.held());
    registry.kill();
    let failed = d.wait_exit("the pull cut off mid-transfer", pull);
    assert!(!failed.success(), "the pull succeeded: {}", failed.stdout);
    let text = format!("{}{}", failed.stdout, failed.stderr);
    assert!(
        text.contains(&proxy.address()) || text.contains("downloading"),
        "no clear error: {text}\n{}",
        d.diagnostics()
    );
    assert!(
        !listed(&d).iter().any(|n| n.contains("big")),
        "{}",
        d.diagnostics()
    );
    let inspect = d.fails(&["image", "inspect", &reference]);
    assert!(
        inspect.stderr.contains("No such image"),
        "{}",
        inspect.stderr
    );

    registry.restart();
    proxy.heal();
    let retried = d.ok(&["pull", &reference]);
    assert!(retried.contains("Pull complete"), "{retried}");
    let size = d.ok(&["run", "--rm", &reference, "wc", "-c", "/big.bin"]);
    assert!(
        size.trim().starts_with(&(24u64 << 20).to_string()),
        "{size}"
    );
}

/// A hostile registry sends endless JSON: a manifest, or a tag list, is
/// refused at its bound.
#[test]
fn an_endless_manifest_is_refused() {
    let d = Daemon::start();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    // A hostile registry: any manifest is an endless JSON document.
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut request = [0u8; 4096];
                let n = stream.read(&mut request).unwrap_or(0);
                let request = String::from_utf8_lossy(&request[..n]);
                if request.contains("/tags/list") {
                    // ... and its tag list too.
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"name\":\"endless\",\"tags\":[",
                    );
                    let chunk = "\"t\",".repeat(1000);
                    let started = Instant::now();
                    while started.elapsed() < Duration::from_secs(60)
                        && stream.write_all(chunk.as_bytes()).is_ok()
                    {}
                } else if request.contains("/manifests/") {
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nConnection: close\r\n\r\n{\"layers\":[",
                    );
                    let chunk = "{\"digest\":\"sha256:0\"},".repeat(1000);
                    let started = Instant::now();
                    while started.elapsed() < Duration::from_secs(60)
                        && stream.write_all(chunk.as_bytes()).is_ok()
                    {}
                } else {
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                    );
                }
            });
        }
    });
    let out = d.fails(&["pull", &format!("{addr}/endless:1")]);
    assert!(
        out.stderr.contains("larger than"),
        "an endless manifest: {}\n{}",
        out.stderr,
        d.diagnostics()
    );
    assert!(
        out.elapsed < Duration::from_secs(30),
        "took {:?}",
        out.elapsed
    );
    let every = d.fails(&["pull", "--all-tags", &format!("{addr}/endless")]);
    assert!(
        every.stderr.contains("tag list") && every.stderr.contains("larger than"),
        "an endless tag list: {}\n{}",
        every.stderr,
        d.diagnostics()
    );
    assert!(!listed(&d).iter().any(|n| n.contains("endless")));
}

/// An IPv4 address of this host that is not loopback (`hostname -I`).
fn off_loopback_address() -> String {
    let out = holdfast_e2e::run_with_timeout(
        std::process::Command::new("hostname").arg("-I"),
        Duration::from_secs(10),
    );
    out.stdout
        .split_whitespace()
        .filter_map(|a| a.parse::<std::net::Ipv4Addr>().ok())
        .find(|a| !a.is_loopback())
        .map(|a| a.to_string())
        .unwrap_or_else(|| panic!("no IPv4 address off loopback: {:?}", out.stdout))
}

/// A registry off loopback is spoken to over HTTPS, as dockerd does, so a
/// plain HTTP one is refused with a hint, until holdfastd is started with
/// `--insecure-registry` naming it.
#[test]
fn a_plain_http_registry_off_loopback_needs_insecure_registry() {
    let dir = tempfile::Builder::new()
        .prefix("hf-e2e-insecure-")
        .tempdir()
        .expect("a temporary directory");
    let registry = Registry::start_at(dir.path(), &off_loopback_address(), None);
    let app = PlatformImage {
        arch: host_arch().to_owned(),
        layers: vec![
            busybox(dir.path()),
            layer_of(&[("etc/pulled.txt", b"pulled\n")]),
        ],
    };
    write_layout(&dir.path().join("app"), "app", std::slice::from_ref(&app));
    registry.push(&dir.path().join("app"), "app", "app:1", None);
    let image = format!("{}/app:1", registry.address());

    let d = Daemon::start();
    d.fails_saying(
        "a plain HTTP registry off loopback",
        &["pull", &image],
        "--insecure-registry",
    );
    assert!(!listed(&d).contains(&image), "{}", d.diagnostics());
    drop(d);

    let d = Daemon::start_with(&["--insecure-registry", &registry.address()]);
    let pulled = d.ok(&["pull", &image]);
    assert!(pulled.contains("Pull complete"), "{pulled}");
    assert_eq!(
        d.ok(&["run", "--rm", &image, "cat", "/etc/pulled.txt"]),
        "pulled\n"
    );
}

/// A registry's v1 search index, as Docker Hub serves it (no registry
/// Debian packages serves one; `docker-registry` answers 404 to it): it
/// answers every request with `results` and keeps each request's head.
fn search_index(results: serde_json::Value) -> (String, std::sync::mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let (heads, told) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read_exact(&mut byte).is_ok() {
                head.push(byte[0]);
            }
            let body = serde_json::json!({
                "num_results": results.as_array().map_or(0, Vec::len),
                "query": "",
                "results": results,
            })
            .to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = heads.send(String::from_utf8_lossy(&head).into_owned());
        }
    });
    (address, told)
}

#[test]
fn search_asks_the_registry_and_answers_its_refusal_as_dockerd() {
    let d = Daemon::start();
    // A registry that has no search: dockerd's words for its 404.
    let registry = Registry::start(&d.root().join("registry"), None);
    let out = d.docker(&["search", &format!("{}/busybox", registry.address())]);
    assert!(
        !out.success() && out.stderr.contains("Unexpected status code 404"),
        "{out:?}{}",
        d.diagnostics()
    );

    let (index, heads) = search_index(serde_json::json!([
        { "name": "busybox", "description": "the official one", "is_official": true,
          "is_automated": false, "star_count": 3000 },
        { "name": "someone/busybox", "description": "a copy", "is_official": false,
          "is_automated": true, "star_count": 2 },
        { "name": "other/busybox-tools", "description": "", "is_official": false,
          "is_automated": false, "star_count": 40 },
    ]));
    let head = || {
        heads
            .recv_timeout(Duration::from_secs(60))
            .expect("the index was asked")
    };
    // The CLI's own search, its limit and filters as the query.
    let names = d.ok(&[
        "search",
        "--limit",
        "5",
        "--filter",
        "stars=10",
        "--format",
        "{{.Name}} {{.StarCount}} {{.IsOfficial}}",
        &format!("{index}/busy"),
    ]);
    assert_eq!(names, "busybox 3000 [OK]\nother/busybox-tools 40 \n");
    let asked = head();
    assert!(asked.starts_with("GET /v1/search?q=busy&n=5 "), "{asked}");
    // The client's credentials go to the registry.
    // {"username":"me","password":"pw"}, as X-Registry-Auth carries it.
    let auth = "eyJ1c2VybmFtZSI6Im1lIiwicGFzc3dvcmQiOiJwdyJ9";
    let r = d.http_with_headers(
        "GET",
        &format!(
            "/images/search?term={index}/busy&filters=%7B%22is-official%22%3A%5B%22false%22%5D%7D"
        ),
        None,
        &[("X-Registry-Auth", auth)],
    );
    assert_eq!(r.status, 200, "{r:?}");
    let listed: Vec<String> = r
        .json()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|v| v["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(listed, ["someone/busybox", "other/busybox-tools"]);
    let asked = head().to_ascii_lowercase();
    assert!(
        asked.contains("authorization: basic bwu6chc="),
        "no credentials: {asked}"
    );

    // What dockerd refuses, refused in its words; the index is not asked.
    for (query, words) in [
        (
            "term=x&limit=101",
            "limit 101 is outside the range of [1, 100]",
        ),
        ("term=x&limit=ten", "limit"),
        ("term=http://host/x", "should not have a scheme"),
        (
            "term=x&filters=%7B%22is-official%22%3A%5B%22maybe%22%5D%7D",
            "invalid filter 'is-official=maybe'",
        ),
        (
            "term=x&filters=%7B%22stars%22%3A%5B%22many%22%5D%7D",
            "invalid filter 'stars=many'",
        ),
        (
            "term=x&filters=%7B%22label%22%3A%5B%22a%22%5D%7D",
            "invalid filter 'label'",
        ),
    ] {
        let r = d.http("GET", &format!("/images/search?{query}"), None);
        assert!(r.status == 400 && r.body.contains(words), "{query}: {r:?}");
    }
    assert!(
        heads.try_recv().is_err(),
        "a refused search reached the index"
    );
}
