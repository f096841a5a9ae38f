//! `docker push` with the real docker CLI to a real registry on loopback
//! (Debian's `docker-registry`), checked against the registry's own account
//! (`skopeo inspect`): a tagged local image and a committed one, pushed,
//! removed and pulled back, and run; every tag of a repository
//! (`--all-tags`, then pulled back with `pull --all-tags`); credentials from
//! `docker login` (and a refusal without them); an image that is not there; a registry that is
//! gone (a clear error, then a retry that succeeds).

use holdfast_e2e::Daemon;
use holdfast_e2e::registry::Registry;

/// The digest and size of dockerd's last push line, `<tag>: digest: <d> size: <n>`.
fn pushed_digest(d: &Daemon, tag: &str, out: &str) -> (String, u64) {
    let prefix = format!("{tag}: digest: ");
    let line = out
        .lines()
        .find_map(|l| l.trim().strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{out}\n{}", d.diagnostics()));
    let (digest, size) = line
        .split_once(" size: ")
        .unwrap_or_else(|| panic!("no size in {line:?}"));
    (
        digest.to_owned(),
        size.parse()
            .unwrap_or_else(|e| panic!("size {size:?}: {e}")),
    )
}

fn assert_contains(d: &Daemon, what: &str, text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(
            text.contains(needle),
            "{what}: no {needle:?} in:\n{text}\n{}",
            d.diagnostics()
        );
    }
}

#[test]
fn pushes_a_local_image_and_pulls_it_back() {
    let d = Daemon::start();
    let registry = Registry::start(&d.root().join("registry"), None);
    let r = registry.address();
    let mine = format!("{r}/mine:1");
    d.ok(&["tag", "busybox", &mine]);

    let out = d.ok(&["push", &mine]);
    assert_contains(
        &d,
        "the first push",
        &out,
        &[
            &format!("The push refers to repository [{r}/mine]"),
            "Pushed",
        ],
    );
    let (digest, size) = pushed_digest(&d, "1", &out);
    let seen = registry.inspect("mine:1", None);
    assert_eq!(
        seen["Digest"].as_str(),
        Some(digest.as_str()),
        "the registry serves another manifest than holdfast reported: {seen}\n{}",
        d.diagnostics()
    );
    assert!(size > 0, "{out}");
    // The image is known by that digest now, as dockerd records it.
    let digests = d.ok(&["image", "inspect", "-f", "{{json .RepoDigests}}", &mine]);
    assert_eq!(
        digests.trim(),
        format!("[\"{r}/mine@{digest}\"]"),
        "{}",
        d.diagnostics()
    );
    let by_digest = d.ok(&[
        "run",
        "--rm",
        &format!("{r}/mine@{digest}"),
        "echo",
        "by-digest",
    ]);
    assert_eq!(by_digest.trim(), "by-digest");

    // Again: nothing to upload, the same digest.
    let again = d.ok(&["push", &mine]);
    assert_contains(&d, "a second push", &again, &["Layer already exists"]);
    assert_eq!(pushed_digest(&d, "1", &again).0, digest);

    // A committed image: a layer only this daemon had, pushed, removed
    // locally and pulled back.
    let made = format!("{r}/mine:2");
    d.commit_of_script("echo pushed > /pushed.txt", &[], &made);
    let out = d.ok(&["push", &made]);
    assert_contains(
        &d,
        "the push of a commit",
        &out,
        &["Pushed", "2: digest: sha256:"],
    );
    let (made_digest, _) = pushed_digest(&d, "2", &out);
    assert_eq!(
        registry.inspect("mine:2", None)["Digest"].as_str(),
        Some(made_digest.as_str())
    );
    d.ok(&["rmi", &made, &mine]);
    let images = d.ok(&["images", "--format", "{{.Repository}}:{{.Tag}}"]);
    assert!(
        !images.contains(&r),
        "removed images still listed:\n{images}"
    );
    let pulled = d.ok(&["pull", &made]);
    assert_contains(
        &d,
        "the pull back",
        &pulled,
        &[&format!("Digest: {made_digest}")],
    );
    assert_eq!(
        d.ok(&["run", "--rm", &made, "cat", "/pushed.txt"]),
        "pushed\n"
    );
    d.ok(&["pull", &mine]);
    assert_eq!(d.ok(&["run", "--rm", &mine, "echo", "back"]), "back\n");
}

#[test]
fn pushes_with_docker_login_credentials() {
    let d = Daemon::start();
    let registry = Registry::start(&d.root().join("registry"), Some(("holdfast", "s3cret")));
    let r = registry.address();
    let private = format!("{r}/private:1");
    d.ok(&["tag", "busybox", &private]);

    let anonymous = d.fails(&["push", &private]);
    assert!(
        anonymous.stderr.contains("denied") || anonymous.stdout.contains("denied"),
        "an anonymous push to a registry that asks for credentials:\n{}\n{}\n{}",
        anonymous.stdout,
        anonymous.stderr,
        d.diagnostics()
    );
    let login = d.docker(&["login", &r, "-u", "holdfast", "-p", "s3cret"]);
    assert!(
        login.success(),
        "docker login: {}\n{}\n{}",
        login.stdout,
        login.stderr,
        d.diagnostics()
    );
    let out = d.ok(&["push", &private]);
    let (digest, _) = pushed_digest(&d, "1", &out);
    assert_eq!(
        registry.inspect("private:1", Some(("holdfast", "s3cret")))["Digest"].as_str(),
        Some(digest.as_str()),
        "{}",
        d.diagnostics()
    );
}

#[test]
fn a_push_of_what_is_not_there_is_refused() {
    let d = Daemon::start();
    let registry = Registry::start(&d.root().join("registry"), None);
    let r = registry.address();
    d.fails_saying(
        "a push of a missing image",
        &["push", &format!("{r}/nothing:1")],
        &format!("An image does not exist locally with the tag: {r}/nothing:1"),
    );
    d.fails_saying(
        "a push of every tag of a repository with none here",
        &["push", "--all-tags", &format!("{r}/nothing")],
        &format!("An image does not exist locally with the tag: {r}/nothing"),
    );
}

/// `docker push --all-tags`: every local tag of the repository (and none of
/// another), one repository line, a digest line per tag, each served by
/// the registry as reported; then all removed here and `pull --all-tags`
/// brings them back.
#[test]
fn pushes_every_tag_and_pulls_every_tag_back() {
    let d = Daemon::start();
    let registry = Registry::start(&d.root().join("registry"), None);
    let r = registry.address();
    d.ok(&["tag", "busybox", &format!("{r}/mine:1")]);
    d.ok(&["tag", "busybox", &format!("{r}/mine:2")]);
    d.ok(&["tag", "busybox", &format!("{r}/other:1")]);
    d.commit_of_script("echo three > /three.txt", &[], &format!("{r}/mine:3"));

    let out = d.ok(&["push", "--all-tags", &format!("{r}/mine")]);
    assert_eq!(
        out.matches("The push refers to repository").count(),
        1,
        "{out}"
    );
    let mut digests = Vec::new();
    for tag in ["1", "2", "3"] {
        let (digest, _) = pushed_digest(&d, tag, &out);
        assert_eq!(
            registry.inspect(&format!("mine:{tag}"), None)["Digest"].as_str(),
            Some(digest.as_str()),
            "mine:{tag}: {out}\n{}",
            d.diagnostics()
        );
        digests.push(digest);
    }
    assert_eq!(digests[0], digests[1], "one image under two tags");
    let order: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once(": digest: ").map(|(tag, _)| tag.trim()))
        .collect();
    assert_eq!(order, ["1", "2", "3"], "{out}");
    assert!(
        !out.contains("other"),
        "another repository's tag was pushed:\n{out}"
    );

    for tag in ["1", "2", "3"] {
        d.ok(&["rmi", &format!("{r}/mine:{tag}")]);
    }
    let pulled = d.ok(&["pull", "--all-tags", &format!("{r}/mine")]);
    assert!(
        pulled.contains(&format!("Status: Downloaded newer image for {r}/mine")),
        "{pulled}\n{}",
        d.diagnostics()
    );
    assert_eq!(
        d.ok(&["run", "--rm", &format!("{r}/mine:3"), "cat", "/three.txt"]),
        "three\n"
    );
    assert_eq!(
        d.ok(&["run", "--rm", &format!("{r}/mine:2"), "echo", "back"]),
        "back\n"
    );
}

#[test]
fn a_push_to_a_registry_that_is_gone_fails_clearly_and_a_retry_succeeds() {
    let d = Daemon::start();
    let mut registry = Registry::start(&d.root().join("registry"), None);
    let r = registry.address();
    let mine = format!("{r}/mine:1");
    d.ok(&["tag", "busybox", &mine]);
    registry.kill();
    let gone = d.fails(&["push", &mine]);
    let said = format!("{}{}", gone.stdout, gone.stderr);
    assert!(
        said.contains(&r),
        "a push to a registry that is gone names it:\n{said}\n{}",
        d.diagnostics()
    );
    // Nothing local changed; once it is back, the push goes through.
    d.ok(&["image", "inspect", &mine]);
    registry.restart();
    let out = d.ok(&["push", &mine]);
    let (digest, _) = pushed_digest(&d, "1", &out);
    assert_eq!(
        registry.inspect("mine:1", None)["Digest"].as_str(),
        Some(digest.as_str())
    );
}
