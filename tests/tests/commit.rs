//! `docker commit` with the real docker CLI: what the container changed
//! (files added, changed and deleted) and its settings become a new image
//! that runs, with its step in `docker history`; what is not supported yet
//! is refused by name.

use holdfast_e2e::Daemon;

#[test]
fn commit_makes_an_image_of_the_changes_and_settings() {
    let d = Daemon::start();
    // A base with a directory of content (/etc cannot be deleted: the
    // engine binds files into it, as dockerd does).
    d.ok(&[
        "run",
        "--name",
        "based",
        "busybox",
        "sh",
        "-c",
        "mkdir -p /opt/old && echo old > /opt/old/f && echo old > /opt/g",
    ]);
    d.ok(&["commit", "based", "based:1"]);
    d.ok(&[
        "run",
        "-d",
        "--name",
        "src",
        "-e",
        "GREETING=hello",
        "-w",
        "/data",
        "based:1",
        "sh",
        "-c",
        "mkdir -p /data && echo made > /data/file && rm /bin/ls && rm -rf /opt && mkdir /opt && echo only > /opt/only && ln -s /data/file /link && touch /tmp/ready && exec sleep 1000",
    ]);
    d.wait_until("the container made its changes", || {
        d.code(&["exec", "src", "test", "-e", "/tmp/ready"]) == 0
    });
    let since = holdfast_e2e::now_unix_nanos();
    let out = d.ok(&[
        "commit",
        "-a",
        "someone",
        "-m",
        "a message",
        "src",
        "snap:1",
    ]);
    assert!(out.trim().starts_with("sha256:"), "{out}");
    // Frozen while its changes are read, as dockerd does by default.
    let actions: Vec<String> = d
        .events_since(since, &["--filter", "container=src"])
        .iter()
        .filter_map(|e| e["Action"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(actions, ["pause", "unpause"], "{}", d.diagnostics());
    assert_eq!(d.state("src")["Status"], "running");
    let id = out.trim().to_owned();
    let listed = d.ok(&["images", "--format", "{{.Repository}}:{{.Tag}} {{.ID}}"]);
    assert!(
        listed.lines().any(|l| l.starts_with("snap:1 ")),
        "{listed}\n{}",
        d.diagnostics()
    );
    let inspected = d.ok(&[
        "image",
        "inspect",
        "snap:1",
        "--format",
        "{{.Id}} {{.Config.WorkingDir}} {{.Config.Env}}",
    ]);
    assert!(inspected.starts_with(&id), "{inspected}");
    assert!(inspected.contains(" /data "), "{inspected}");
    assert!(inspected.contains("GREETING=hello"), "{inspected}");
    assert!(
        inspected.contains("PATH="),
        "the image's env is kept: {inspected}"
    );

    let run = |cmd: &str| d.ok(&["run", "--rm", "snap:1", "sh", "-c", cmd]);
    assert_eq!(
        run("cat file").trim(),
        "made",
        "the working dir and an added file"
    );
    assert_eq!(run("echo $GREETING").trim(), "hello");
    assert_eq!(
        run("test -e /bin/ls && echo kept || echo gone").trim(),
        "gone",
        "a deleted file stays deleted"
    );
    assert_eq!(
        run("ls /opt").trim(),
        "only",
        "a directory deleted and made again has only its new content"
    );
    // What the engine bound into the container (its hostname, hosts and
    // resolver files) is no part of the image: a container made of it and
    // never started (nothing bound yet) has only the image's /etc.
    d.ok(&["create", "--name", "probe", "snap:1"]);
    let copied = d.root().join("copied");
    d.ok(&["cp", "probe:/etc", copied.to_str().expect("utf-8")]);
    let mut etc: Vec<String> = std::fs::read_dir(&copied)
        .expect("copied /etc")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    etc.sort();
    assert_eq!(etc, ["group", "passwd"], "{}", d.diagnostics());
    d.ok(&["rm", "probe"]);
    assert_eq!(
        run("readlink /link").trim(),
        "/data/file",
        "a symlink is kept as one"
    );
    assert_eq!(
        run("test -e /bin/cat && echo kept").trim(),
        "kept",
        "the base image is under it"
    );

    // A stopped container commits too, with --change applied over it.
    d.ok(&["stop", "-t", "0", "src"]);
    d.ok(&[
        "commit",
        "--change",
        "ENV GREETING=changed",
        "--change",
        r#"CMD ["cat", "/data/file"]"#,
        "src",
        "snap:2",
    ]);
    assert_eq!(d.ok(&["run", "--rm", "snap:2"]).trim(), "made");
    assert_eq!(
        d.ok(&["run", "--rm", "snap:2", "sh", "-c", "echo $GREETING"])
            .trim(),
        "changed"
    );
    assert_eq!(
        d.ok(&["run", "--rm", "snap:2", "cat", "/data/file"]).trim(),
        "made"
    );
}

/// `docker history` of the seeded busybox and of a commit over it, as
/// dockerd 20.10+ shows them: newest step first, the image's id and tags on
/// the top one, `<missing>` below, a size for each step that made a layer.
#[test]
fn history_shows_each_step_newest_first() {
    let d = Daemon::start();
    let busybox_id = d
        .ok(&["image", "inspect", "-f", "{{.Id}}", "busybox"])
        .trim()
        .to_owned();

    // The API's shape.
    let r = d.http("GET", "/images/busybox/history", None);
    assert_eq!(r.status, 200, "{r:?}\n{}", d.diagnostics());
    let items = r
        .json()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default();
    assert_eq!(items.len(), 2, "{}", r.body);
    for item in &items {
        for key in ["Id", "Created", "CreatedBy", "Tags", "Size", "Comment"] {
            assert!(item.get(key).is_some(), "no {key} in {item}");
        }
        assert!(item["Created"].is_i64() && item["Size"].is_i64(), "{item}");
    }
    assert_eq!(items[0]["Id"], busybox_id.as_str());
    assert_eq!(items[0]["Tags"], serde_json::json!(["busybox:latest"]));
    assert_eq!(items[0]["CreatedBy"], r#"CMD ["sh"]"#);
    assert_eq!(items[0]["Size"], 0, "a step without a layer");
    assert_eq!(items[1]["Id"], "<missing>");
    assert!(items[1]["Tags"].is_null(), "{}", items[1]);
    // The layer's size is its unpacked snapshot's, as `system df` counts it.
    let df = d.http("GET", "/system/df", None).json().unwrap_or_default();
    let image_size = df["Images"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["Id"] == busybox_id.as_str()))
        .map(|i| i["Size"].clone());
    assert!(items[1]["Size"].as_i64().is_some_and(|s| s > 0));
    assert_eq!(Some(items[1]["Size"].clone()), image_size, "{df}");

    // The CLI's table, truncated and not.
    let table = d.ok(&["history", "busybox"]);
    let rows = holdfast_e2e::lines(&table);
    assert_eq!(rows.len(), 3, "a header and two steps:\n{table}");
    for column in ["IMAGE", "CREATED", "CREATED BY", "SIZE", "COMMENT"] {
        assert!(rows[0].contains(column), "{table}");
    }
    let short = &busybox_id["sha256:".len().."sha256:".len() + 12];
    assert!(rows[1].starts_with(short), "{table}");
    assert!(rows[1].contains("0B"), "{table}");
    assert!(rows[2].starts_with("<missing>"), "{table}");
    let full = d.ok(&["history", "--no-trunc", "busybox"]);
    assert!(full.contains(&busybox_id), "{full}");
    assert!(
        full.contains("COPY busybox (the host's static build)"),
        "{full}"
    );

    // A commit's step on top, with the container's command and the message.
    d.commit_of_script("echo made > /made.txt", &["-m", "one file more"], "made:1");
    let made_id = d
        .ok(&["image", "inspect", "-f", "{{.Id}}", "made:1"])
        .trim()
        .to_owned();
    // Created, architecture and os as the configs say: the commit's time;
    // none for the offline busybox (its config has no `created`), whose
    // architecture is this host's, as the commit's is.
    let shown = |image: &str| {
        d.ok(&[
            "image",
            "inspect",
            "-f",
            "{{.Created}}|{{.Architecture}}|{{.Os}}",
            image,
        ])
        .trim()
        .to_owned()
    };
    let (made, base) = (shown("made:1"), shown("busybox"));
    let made: Vec<&str> = made.split('|').collect();
    let base: Vec<&str> = base.split('|').collect();
    let created = holdfast_e2e::parse_rfc3339_nanos(made[0]).expect("an RFC 3339 time");
    let age = holdfast_e2e::now_unix_nanos() - created;
    assert!(
        (0..600_000_000_000).contains(&age),
        "the commit's time, not another: {made:?}"
    );
    assert_eq!(base[0], "0001-01-01T00:00:00Z", "{base:?}");
    assert_eq!((made[1], made[2]), (base[1], "linux"));
    assert_eq!(base[2], "linux");
    // The list's query is honoured: a reference, the times, dangling.
    let listed = |args: &[&str]| {
        let mut all = vec!["images", "--format", "{{.Repository}}:{{.Tag}}"];
        all.extend_from_slice(args);
        let mut names: Vec<String> = d.ok(&all).lines().map(str::to_owned).collect();
        names.sort();
        names
    };
    assert_eq!(listed(&["made"]), ["made:1"]);
    assert_eq!(listed(&["--filter", "reference=ma*"]), ["made:1"]);
    assert!(listed(&["nothing-of-the-kind"]).is_empty());
    assert_eq!(listed(&["--filter", "since=busybox"]), ["made:1"]);
    assert_eq!(listed(&["--filter", "before=made:1"]), ["busybox:latest"]);
    assert!(listed(&["--filter", "dangling=true"]).is_empty());
    d.fails_saying(
        "an unknown filter",
        &["images", "--filter", "colour=blue"],
        "invalid filter 'colour'",
    );
    // A committed image has no digest a registry knows it by (as dockerd's
    // classic store shows it); shared sizes are not known yet.
    let digests = d.http("GET", "/images/json?digests=1", None);
    assert_eq!(digests.status, 200, "{}", digests.body);
    let digests: serde_json::Value = serde_json::from_str(&digests.body).expect("JSON");
    let made = digests
        .as_array()
        .and_then(|a| a.iter().find(|i| i["RepoTags"][0] == "made:1"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(made["RepoDigests"], serde_json::json!([]), "{made}");
    // (SharedSize, asked for: tests/tests/disk.rs.)
    let formatted = d.ok(&[
        "history",
        "--no-trunc",
        "--format",
        "{{.ID}}|{{.CreatedBy}}|{{.Comment}}",
        "made:1",
    ]);
    assert_eq!(
        holdfast_e2e::lines(&formatted),
        [
            format!("{made_id}|sh -c echo made > /made.txt|one file more"),
            r#"<missing>|CMD ["sh"]|"#.to_owned(),
            "<missing>|COPY busybox (the host's static build), its applet links, /etc/passwd and /etc/group to /|".to_owned(),
        ],
        "{}",
        d.diagnostics()
    );
    let made = d
        .http("GET", "/images/made:1/history", None)
        .json()
        .unwrap_or_default();
    assert!(
        made[0]["Size"].as_i64().is_some_and(|s| s > 0),
        "the new layer has a size: {made}"
    );
    assert!(made[0]["Created"].as_i64().is_some_and(|t| t > 0), "{made}");
    assert_eq!(made[0]["Tags"], serde_json::json!(["made:1"]));

    let missing = d.http("GET", "/images/nothing:1/history", None);
    assert_eq!(missing.status, 404, "{missing:?}");
    d.fails_saying(
        "the history of a missing image",
        &["history", "nothing:1"],
        "No such image",
    );
}

#[test]
fn commit_refuses_what_it_cannot_do_yet_by_name() {
    let d = Daemon::start();
    d.ok(&["create", "--name", "orig", "busybox", "true"]);
    d.fails_saying(
        "a --change it cannot apply",
        &["commit", "--change", "RUN make", "orig", "x:1"],
        "--change RUN is not supported",
    );
    d.fails_saying(
        "a tag without a repository",
        &["commit", "orig", ":v1"],
        "invalid reference format",
    );
    d.fails_saying(
        "no such container",
        &["commit", "nosuch", "x:1"],
        "No such container",
    );
    let listed = d.ok(&["images", "--format", "{{.Repository}}"]);
    assert!(
        !listed.lines().any(|l| l == "x"),
        "nothing half-made: {listed}"
    );
}

#[test]
fn import_makes_an_image_of_a_filesystem_tarball() {
    let d = Daemon::start();
    d.ok(&[
        "run",
        "-d",
        "--name",
        "shape",
        "busybox",
        "sh",
        "-c",
        "echo inside > /marker && touch /tmp/ready && exec sleep 1000",
    ]);
    d.wait_until("the container wrote its marker", || {
        d.code(&["exec", "shape", "test", "-e", "/tmp/ready"]) == 0
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let tarball = dir.path().join("fs.tar");
    d.ok(&["export", "-o", &tarball.to_string_lossy(), "shape"]);
    let out = d.ok(&[
        "import",
        "-m",
        "from a test",
        &tarball.to_string_lossy(),
        "imp:1",
    ]);
    assert!(
        out.trim().starts_with("sha256:"),
        "{out}\n{}",
        d.diagnostics()
    );
    assert_eq!(
        d.ok(&["run", "--rm", "imp:1", "/bin/cat", "/marker"])
            .trim(),
        "inside"
    );
    // An image without a command needs one given, as dockerd says.
    let inspected = d.ok(&[
        "image",
        "inspect",
        "imp:1",
        "--format",
        "{{json .Config.Cmd}}",
    ]);
    assert_eq!(inspected.trim(), "null", "{inspected}");

    // From stdin, gzipped.
    let gz = dir.path().join("fs.tar.gz");
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "gzip -c {} > {}",
            tarball.to_string_lossy(),
            gz.to_string_lossy()
        ))
        .status()
        .expect("gzip");
    assert!(status.success());
    let bytes = std::fs::read(&gz).expect("read the gzip");
    let out = d.docker_with_input(&["import", "-", "imp:gz"], &bytes);
    assert_eq!(out.status.and_then(|s| s.code()), Some(0), "{out:?}");
    assert_eq!(
        d.ok(&["run", "--rm", "imp:gz", "/bin/cat", "/marker"])
            .trim(),
        "inside"
    );

    // --change gives it a command.
    d.ok(&[
        "import",
        "--change",
        r#"CMD ["/bin/cat", "/marker"]"#,
        "--change",
        "WORKDIR /tmp",
        &tarball.to_string_lossy(),
        "imp:cmd",
    ]);
    assert_eq!(d.ok(&["run", "--rm", "imp:cmd"]).trim(), "inside");
    assert_eq!(d.ok(&["run", "--rm", "imp:cmd", "/bin/pwd"]).trim(), "/tmp");
    d.fails_saying(
        "an import with a --change it cannot apply",
        &[
            "import",
            "--change",
            "ONBUILD RUN x",
            &tarball.to_string_lossy(),
            "imp:2",
        ],
        "--change ONBUILD is not supported",
    );
    let not_tar = dir.path().join("not.tar");
    std::fs::write(&not_tar, b"this is not a tarball at all").expect("write");
    d.fails(&["import", &not_tar.to_string_lossy(), "imp:3"]);
    let listed = d.ok(&["images", "--format", "{{.Repository}}:{{.Tag}}"]);
    assert!(
        !listed.lines().any(|l| l == "imp:2" || l == "imp:3"),
        "nothing half-made: {listed}"
    );
}

/// What `docker images -f dangling=true -q` lists (short ids).
fn dangling(d: &Daemon) -> Vec<String> {
    d.ok(&["images", "-q", "--filter", "dangling=true"])
        .lines()
        .map(str::to_owned)
        .collect()
}

fn short(id: &str) -> String {
    id.trim().trim_start_matches("sha256:")[..12].to_owned()
}

#[test]
fn untagged_images_are_kept_listed_and_used_by_id_as_dockerd_keeps_them() {
    let d = Daemon::start();
    d.ok(&[
        "run",
        "--name",
        "src",
        "busybox",
        "sh",
        "-c",
        "echo one > /marker",
    ]);

    // A commit without a repository makes an untagged image.
    let a = d.ok(&["commit", "src"]).trim().to_owned();
    assert!(a.starts_with("sha256:"), "{a}");
    assert_eq!(dangling(&d), [short(&a)], "{}", d.diagnostics());
    let listed = d.ok(&[
        "images",
        "-a",
        "--format",
        "{{.Repository}}:{{.Tag}} {{.ID}}",
    ]);
    assert!(
        listed
            .lines()
            .any(|l| l == format!("<none>:<none> {}", short(&a))),
        "{listed}"
    );
    assert!(
        !d.ok(&["images", "busybox", "-q"]).contains(&short(&a)),
        "a reference filter takes no untagged image"
    );
    assert_eq!(
        d.ok(&["image", "inspect", "-f", "{{json .RepoTags}}", &short(&a)])
            .trim(),
        "[]"
    );
    // Used by its id: run, history, tag.
    assert_eq!(
        d.ok(&["run", "--rm", &short(&a), "cat", "/marker"]),
        "one\n"
    );
    assert!(d.ok(&["history", "-q", &short(&a)]).lines().count() >= 2);
    d.ok(&["tag", &short(&a), "kept:1"]);
    assert_eq!(dangling(&d), Vec::<String>::new(), "tagged, it has a name");

    // A commit that moves a tag away from the only image it named leaves
    // that image untagged, never lost.
    d.ok(&["commit", "src", "kept:1"]);
    let b = d
        .ok(&["image", "inspect", "-f", "{{.Id}}", "kept:1"])
        .trim()
        .to_owned();
    assert_ne!(a, b);
    assert_eq!(dangling(&d), [short(&a)], "{}", d.diagnostics());
    assert_eq!(
        d.ok(&["run", "--rm", &short(&a), "cat", "/marker"]),
        "one\n"
    );

    // Saved by id, removed by id, loaded back: untagged again, by id.
    let dir = tempfile::tempdir().expect("tempdir");
    let tar = dir.path().join("a.tar");
    let tar = tar.to_str().expect("utf-8 path");
    d.ok(&["save", "-o", tar, &short(&a)]);
    let removed = d.ok(&["rmi", &short(&a)]);
    assert_eq!(removed.trim(), format!("Deleted: {a}"), "{removed}");
    assert_eq!(dangling(&d), Vec::<String>::new());
    let loaded = d.ok(&["load", "-i", tar]);
    assert_eq!(loaded.trim(), format!("Loaded image ID: {a}"), "{loaded}");
    assert_eq!(dangling(&d), [short(&a)]);

    // `image prune` removes the untagged images no container uses.
    let pruned = d.ok(&["image", "prune", "-f"]);
    assert!(pruned.contains(&format!("deleted: {a}")), "{pruned}");
    assert_eq!(dangling(&d), Vec::<String>::new());
    assert!(d.code(&["image", "inspect", &short(&a)]) != 0, "pruned");

    // The last name of an image a container runs on: refused unless
    // forced; forced, untagged and kept while the container runs; by id
    // never while it runs.
    d.ok(&["run", "-d", "--name", "user", "kept:1", "sleep", "300"]);
    d.fails_saying("its last name", &["rmi", "kept:1"], "must force");
    let untagged = d.ok(&["rmi", "-f", "kept:1"]);
    assert_eq!(untagged.trim(), "Untagged: kept:1", "{untagged}");
    assert_eq!(dangling(&d), [short(&b)], "{}", d.diagnostics());
    d.fails_saying(
        "an image a container runs on, by id",
        &["rmi", "-f", &short(&b)],
        "image is being used by running container",
    );
    d.ok(&["rm", "-f", "user", "src"]);
    let pruned = d.ok(&["image", "prune", "-f"]);
    assert!(pruned.contains(&format!("deleted: {b}")), "{pruned}");
    let left = d.ok(&["images", "-a", "-q"]);
    assert!(!left.contains(&short(&b)), "{left}");
}
