//! Local volumes with the real docker CLI: named ones made on first use and
//! kept through holdfastd and containerd restarts, anonymous ones for
//! `-v /path` and for the image's `VOLUME`s, a new volume filled from the
//! image, removal refused while in use, `rm -v`, and
//! `volume create|ls|inspect|rm|prune`.

use holdfast_e2e::Daemon;

#[test]
fn a_named_volume_keeps_its_data_through_containers_and_restarts() {
    let mut d = Daemon::start();
    d.ok(&[
        "run",
        "--rm",
        "-v",
        "data:/data",
        "busybox",
        "sh",
        "-c",
        "echo kept > /data/f",
    ]);
    assert_eq!(
        d.ok(&[
            "run",
            "--rm",
            "-v",
            "data:/data:ro",
            "busybox",
            "cat",
            "/data/f"
        ]),
        "kept\n"
    );
    // ps finds a container by its volume, and lists its mounts.
    d.ok(&["create", "--name", "user", "-v", "data:/data", "busybox"]);
    for filter in ["volume=data", "volume=/data"] {
        let found = d.ok(&[
            "ps",
            "-a",
            "--filter",
            filter,
            "--format",
            "{{.Names}}|{{.Mounts}}",
        ]);
        assert_eq!(found.trim(), "user|data", "{filter}");
    }
    let none = d.ok(&[
        "ps",
        "-a",
        "--filter",
        "volume=other",
        "--format",
        "{{.Names}}",
    ]);
    assert!(none.trim().is_empty(), "{none}");
    d.ok(&["rm", "user"]);
    let out = d.docker(&[
        "run",
        "--rm",
        "-v",
        "data:/data:ro",
        "busybox",
        "touch",
        "/data/g",
    ]);
    assert!(!out.success(), "a read-only volume is read-only: {out:?}");

    d.sigkill();
    d.restart();
    let old = d.kill_containerd();
    d.wait_containerd_restarted(old);
    d.wait_until("containerd is usable again", || {
        d.docker(&["run", "--rm", "busybox", "true"]).success()
    });
    assert_eq!(
        d.ok(&[
            "run",
            "--rm",
            "-v",
            "data:/data",
            "busybox",
            "cat",
            "/data/f"
        ]),
        "kept\n",
        "{}",
        d.diagnostics()
    );
    assert_eq!(d.ok(&["volume", "ls", "-q"]).trim(), "data");
    let mountpoint = d.ok(&["volume", "inspect", "-f", "{{.Mountpoint}}", "data"]);
    assert!(
        mountpoint
            .trim()
            .starts_with(&*d.data_root().to_string_lossy()),
        "volumes live under the data root: {mountpoint}"
    );
}

#[test]
fn a_new_volume_is_filled_from_the_image_and_an_old_one_is_not() {
    let d = Daemon::start();
    let listing = d.ok(&["run", "--rm", "-v", "etc:/etc", "busybox", "ls", "/etc"]);
    assert!(
        listing.lines().any(|l| l == "passwd"),
        "the image's /etc came along: {listing:?}"
    );
    d.ok(&[
        "run",
        "--rm",
        "-v",
        "etc:/etc",
        "busybox",
        "sh",
        "-c",
        "echo mine > /etc/passwd",
    ]);
    assert_eq!(
        d.ok(&[
            "run",
            "--rm",
            "-v",
            "etc:/etc",
            "busybox",
            "cat",
            "/etc/passwd"
        ]),
        "mine\n",
        "a volume with data is never filled again"
    );
    // A path the image does not have: an empty volume, no error.
    assert_eq!(
        d.ok(&[
            "run",
            "--rm",
            "-v",
            "fresh:/nowhere",
            "busybox",
            "ls",
            "-A",
            "/nowhere"
        ]),
        ""
    );
}

/// An image's `VOLUME` is an anonymous volume for each container, filled
/// from the image, shown in inspect's `Mounts`, and gone with `rm -v`.
#[test]
fn an_images_volume_is_an_anonymous_volume_filled_from_the_image() {
    let d = Daemon::start();
    let dir = d.root().join("images");
    let image = holdfast_testkit::busybox_image(&dir, "withvol:1", None);
    let archive = dir.join("withvol.docker.tar");
    holdfast_e2e::archive::with_config_key(
        &image.docker_archive,
        "Volumes",
        &serde_json::json!({ "/etc": {} }),
        &archive,
    );
    d.ok(&["load", "-i", &archive.to_string_lossy()]);
    d.ok(&["run", "-d", "--name", "vol", "withvol:1", "sleep", "1000"]);
    let mounts = d.inspect("vol")["Mounts"].clone();
    let volume = mounts
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["Destination"] == "/etc")
        .unwrap_or_else(|| panic!("no mount at /etc: {mounts}\n{}", d.diagnostics()))
        .clone();
    assert_eq!(volume["Type"], "volume", "{volume}");
    let name = volume["Name"].as_str().unwrap_or_default().to_owned();
    assert!(
        name.len() == 64 && name.chars().all(|c| c.is_ascii_hexdigit()),
        "an anonymous volume's name: {volume}"
    );
    assert!(
        d.ok(&["volume", "ls", "-q"]).lines().any(|l| l == name),
        "{}",
        d.diagnostics()
    );
    assert!(
        d.ok(&["exec", "vol", "cat", "/etc/passwd"])
            .contains("root"),
        "filled from the image's /etc"
    );
    d.ok(&["rm", "-f", "-v", "vol"]);
    assert!(
        !d.ok(&["volume", "ls", "-q"]).lines().any(|l| l == name),
        "rm -v took the image's volume\n{}",
        d.diagnostics()
    );
}

#[test]
fn in_use_volumes_stay_anonymous_ones_go_with_rm_v_and_prune() {
    let d = Daemon::start();
    d.ok(&["volume", "create", "--label", "team=a", "named"]);
    assert_eq!(
        d.ok(&["volume", "inspect", "-f", "{{.Labels.team}}", "named"])
            .trim(),
        "a"
    );
    d.ok(&[
        "run", "-d", "--name", "user", "-v", "named:/n", "-v", "/scratch", "busybox", "sleep",
        "1000",
    ]);
    let all = d.ok(&["volume", "ls", "-q"]);
    assert_eq!(all.lines().count(), 2, "named and one anonymous: {all}");
    d.fails_saying(
        "removing a volume in use",
        &["volume", "rm", "named"],
        "volume is in use",
    );
    assert_eq!(
        d.ok(&["volume", "ls", "-q", "--filter", "label=team=a"])
            .trim(),
        "named"
    );
    assert_eq!(
        d.ok(&["volume", "ls", "-q", "--filter", "dangling=true"])
            .trim(),
        ""
    );

    // A stopped container still uses its volumes.
    d.ok(&["kill", "user"]);
    d.fails_saying(
        "removing a volume of a stopped container",
        &["volume", "rm", "named"],
        "in use",
    );
    d.ok(&["rm", "-v", "user"]);
    assert_eq!(
        d.ok(&["volume", "ls", "-q"]).trim(),
        "named",
        "rm -v took the anonymous one only"
    );

    // Without -v an anonymous volume stays, for prune.
    d.ok(&["run", "--name", "once", "-v", "/tmp/x", "busybox", "true"]);
    d.ok(&["rm", "once"]);
    assert_eq!(d.ok(&["volume", "ls", "-q"]).lines().count(), 2);
    d.ok(&["volume", "prune", "--force"]);
    assert_eq!(
        d.ok(&["volume", "ls", "-q"]).trim(),
        "named",
        "prune takes unused anonymous ones"
    );
    d.ok(&["volume", "prune", "--force", "--all"]);
    assert_eq!(
        d.ok(&["volume", "ls", "-q"]).trim(),
        "",
        "--all takes named ones too"
    );

    d.fails_saying("a bad name", &["volume", "create", "--", ".bad"], "invalid");
    d.fails_saying(
        "a missing volume",
        &["volume", "inspect", "nope"],
        "no such volume",
    );
}

#[test]
fn mount_type_volume_is_a_volume_named_or_anonymous_and_readonly_holds() {
    let d = Daemon::start();
    d.ok(&[
        "run",
        "--rm",
        "--mount",
        "type=volume,src=viamount,dst=/data",
        "busybox",
        "sh",
        "-c",
        "echo kept > /data/f",
    ]);
    assert_eq!(d.ok(&["volume", "ls", "-q"]).trim(), "viamount");
    let out = d.docker(&[
        "run",
        "--rm",
        "--mount",
        "type=volume,src=viamount,dst=/data,readonly",
        "busybox",
        "sh",
        "-c",
        "cat /data/f; echo more > /data/g",
    ]);
    assert!(
        !out.success() && out.stdout.contains("kept") && out.stderr.contains("Read-only"),
        "read, but not written: {out:?}\n{}",
        d.diagnostics()
    );

    d.ok(&[
        "run",
        "-d",
        "--name",
        "anon",
        "--mount",
        "type=volume,dst=/scratch",
        "busybox",
        "sleep",
        "1000",
    ]);
    let mounts = d.inspect("anon")["Mounts"].clone();
    let name = mounts[0]["Name"].as_str().unwrap_or_default().to_owned();
    assert!(
        mounts[0]["Type"] == "volume" && mounts[0]["Destination"] == "/scratch" && name.len() == 64,
        "an anonymous volume: {mounts}"
    );
    d.ok(&["rm", "-f", "-v", "anon"]);
    assert_eq!(
        d.ok(&["volume", "ls", "-q"]).trim(),
        "viamount",
        "rm -v took the anonymous one"
    );

    d.fails_saying(
        "a volume option the local driver would have to honour",
        &[
            "run",
            "--rm",
            "--mount",
            "type=volume,src=vx,dst=/d,volume-nocopy",
            "busybox",
            "true",
        ],
        "NoCopy",
    );
}

#[test]
fn docker_cp_reaches_into_volumes_and_binds_of_a_stopped_container_as_of_a_running_one() {
    // A copy goes where the container sees the path: into the volume or
    // the bind mounted there, not into the directory of its own root that
    // the mount hides (which the container would never see).
    let d = Daemon::start();
    let host = tempfile::tempdir().expect("temp dir");
    let bound = host.path().join("bound");
    std::fs::create_dir(&bound).expect("mkdir");
    let file = host.path().join("note.txt");
    std::fs::write(&file, "noted\n").expect("write");
    let (file_arg, bound_arg) = (
        file.to_string_lossy().into_owned(),
        format!("{}:/bound", bound.display()),
    );
    d.ok(&[
        "create",
        "--name",
        "cold",
        "-v",
        "data:/data",
        "-v",
        &bound_arg,
        "-v",
        "frozen:/frozen:ro",
        "busybox",
        "sh",
        "-c",
        "cat /data/note.txt /bound/note.txt; ls /frozen",
    ]);
    d.ok(&["cp", &file_arg, "cold:/data/"]);
    d.ok(&["cp", &file_arg, "cold:/bound/"]);
    assert_eq!(
        std::fs::read_to_string(bound.join("note.txt")).unwrap_or_default(),
        "noted\n",
        "the copy is in the bound directory: {}",
        d.diagnostics()
    );
    d.fails_saying(
        "a copy into a read-only volume",
        &["cp", &file_arg, "cold:/frozen/"],
        "mounted volume is marked read-only",
    );
    // Out of the volume too, before the container ever ran.
    let out = host.path().join("out.txt");
    d.ok(&["cp", "cold:/data/note.txt", &out.to_string_lossy()]);
    assert_eq!(std::fs::read_to_string(&out).unwrap_or_default(), "noted\n");
    // The container sees what was copied, and nothing in the read-only one.
    assert_eq!(
        d.ok(&["start", "-a", "cold"]),
        "noted\nnoted\n",
        "{}",
        d.diagnostics()
    );
    // Its own root was not written under the mounts, nor left mounted.
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    assert!(
        !mounts.contains(&bound.to_string_lossy().into_owned()),
        "no copy's bind left mounted:\n{mounts}"
    );
}
