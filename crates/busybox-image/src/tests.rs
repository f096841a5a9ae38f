use super::*;
use std::collections::BTreeMap;

/// The regular files of a tarball, by path.
fn files_of(tarball: &[u8]) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut archive = tar::Archive::new(tarball);
    for entry in archive.entries().expect("tar entries") {
        let mut entry = entry.expect("tar entry");
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let path = entry.path().expect("path").to_string_lossy().into_owned();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data).expect("read entry");
        files.insert(path, data);
    }
    files
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("JSON")
}

#[test]
fn builds_both_tarballs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = BusyboxImage::build(&dir.path().join("img"), "busybox:latest", Some("SIGQUIT"))
        .expect("build");
    assert_eq!(image.reference, "busybox:latest");
    assert_eq!(image.containerd_name, "docker.io/library/busybox:latest");
    assert_eq!(
        image.docker_archive,
        dir.path().join("img/busybox_latest.docker.tar")
    );
    assert_eq!(
        image.oci_layout,
        dir.path().join("img/busybox_latest.oci.tar")
    );
    for format in [ImageFormat::DockerArchive, ImageFormat::OciLayout] {
        let meta = fs::metadata(image.tarball(format)).expect("tarball exists");
        assert!(meta.len() > 100 << 10, "{format:?}: {} bytes", meta.len());
    }
}

#[test]
fn docker_archive_describes_its_layer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = BusyboxImage::build(dir.path(), "busybox:1.0", Some("SIGQUIT")).expect("build");
    let files = files_of(&fs::read(&image.docker_archive).expect("read"));

    let manifest = json_of(&files["manifest.json"]);
    assert_eq!(manifest[0]["RepoTags"], json!(["busybox:1.0"]));
    let layer_path = manifest[0]["Layers"][0].as_str().expect("layer path");
    let layer = &files[layer_path];
    assert_eq!(digest(layer), image.diff_id);
    assert_eq!(layer_path, format!("{}/layer.tar", hex_of(&image.diff_id)));

    let config_path = manifest[0]["Config"].as_str().expect("config path");
    let config_bytes = &files[config_path];
    assert_eq!(digest(config_bytes), image.config_digest);
    let config = json_of(config_bytes);
    assert_eq!(config["rootfs"]["diff_ids"], json!([image.diff_id]));
    assert_eq!(config["config"]["StopSignal"], "SIGQUIT");
    assert_eq!(config["config"]["Cmd"], json!(["sh"]));
    assert_eq!(config["os"], "linux");
    let repositories = json_of(&files["repositories"]);
    assert_eq!(
        repositories["busybox"]["1.0"],
        json!(hex_of(&image.diff_id))
    );

    // The layer: busybox, an sh symlink to it, /etc/passwd, /tmp.
    let mut archive = tar::Archive::new(layer.as_slice());
    let mut seen = BTreeMap::new();
    for entry in archive.entries().expect("layer entries") {
        let entry = entry.expect("layer entry");
        let path = entry.path().expect("path").to_string_lossy().into_owned();
        let link = entry
            .link_name()
            .expect("link name")
            .map(|l| l.to_string_lossy().into_owned());
        seen.insert(path, (entry.header().entry_type(), link));
    }
    assert_eq!(seen["bin/busybox"].0, tar::EntryType::Regular);
    assert_eq!(
        seen["bin/sh"],
        (tar::EntryType::Symlink, Some("busybox".to_owned()))
    );
    assert_eq!(seen["etc/passwd"].0, tar::EntryType::Regular);
    assert_eq!(seen["tmp/"].0, tar::EntryType::Directory);
    assert!(!seen.contains_key("ballast.bin"));
}

#[test]
fn oci_layout_shares_the_layer_and_names_the_image() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = BusyboxImage::build(dir.path(), "busybox:latest", None).expect("build");
    let files = files_of(&fs::read(&image.oci_layout).expect("read"));
    let blob = |digest: &str| &files[&format!("blobs/sha256/{}", hex_of(digest))];
    for (path, data) in &files {
        if let Some(hex) = path.strip_prefix("blobs/sha256/") {
            assert_eq!(digest(data), format!("sha256:{hex}"), "{path}");
        }
    }
    let index = json_of(&files["index.json"]);
    let nested_desc = &index["manifests"][0];
    assert_eq!(
        nested_desc["annotations"]["io.containerd.image.name"],
        image.containerd_name
    );
    let nested = json_of(blob(nested_desc["digest"].as_str().expect("digest")));
    let mut native_config = None;
    for desc in nested["manifests"].as_array().expect("manifests") {
        let manifest = json_of(blob(desc["digest"].as_str().expect("digest")));
        let layer_desc = &manifest["layers"][0];
        let mut layer = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(
                blob(layer_desc["digest"].as_str().expect("digest")).as_slice(),
            ),
            &mut layer,
        )
        .expect("gunzip");
        assert_eq!(digest(&layer), image.diff_id);
        let config_digest = manifest["config"]["digest"].as_str().expect("digest");
        let config = json_of(blob(config_digest));
        assert_eq!(config["architecture"], desc["platform"]["architecture"]);
        if config_digest == image.config_digest {
            native_config = Some(config);
        }
    }
    let native_config = native_config.expect("the native config is in the OCI layout");
    if cfg!(target_arch = "x86_64") {
        assert_eq!(native_config["architecture"], "amd64");
    }
}

#[test]
fn builds_are_reproducible() {
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    let x =
        BusyboxImage::build_with_ballast(a.path(), "busybox:latest", None, 4096).expect("build");
    let y =
        BusyboxImage::build_with_ballast(b.path(), "busybox:latest", None, 4096).expect("build");
    assert_eq!(x.diff_id, y.diff_id);
    assert_eq!(x.config_digest, y.config_digest);
    for f in [ImageFormat::DockerArchive, ImageFormat::OciLayout] {
        let ta = fs::read(x.tarball(f)).expect("read");
        let tb = fs::read(y.tarball(f)).expect("read");
        assert!(ta == tb, "{f:?} differs between builds");
    }
    // Building again over the same files gives the same bytes too.
    let before = fs::read(&x.docker_archive).expect("read");
    let again =
        BusyboxImage::build_with_ballast(a.path(), "busybox:latest", None, 4096).expect("build");
    assert!(fs::read(&again.docker_archive).expect("read") == before);
}

#[test]
fn ballast_is_in_the_layer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = BusyboxImage::build_with_ballast(dir.path(), "busybox:latest", None, 10_000)
        .expect("build");
    let files = files_of(&fs::read(&image.docker_archive).expect("read"));
    let layer = files_of(&files[&format!("{}/layer.tar", hex_of(&image.diff_id))]);
    assert_eq!(layer["ballast.bin"].len(), 10_000);
}

#[test]
fn docker_archive_alone_matches_the_full_build() {
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    let path = build_docker_archive(&a.path().join("seed"), "busybox:latest").expect("build");
    assert_eq!(path, a.path().join("seed/busybox_latest.docker.tar"));
    let names: Vec<_> = fs::read_dir(a.path().join("seed"))
        .expect("read_dir")
        .map(|e| e.expect("dir entry").file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("busybox_latest.docker.tar")]
    );
    let full = BusyboxImage::build(b.path(), "busybox:latest", None).expect("build");
    assert!(fs::read(&path).expect("read") == fs::read(&full.docker_archive).expect("read"));
}

#[test]
fn a_missing_busybox_says_what_to_install() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no-such-busybox");
    let err =
        BusyboxImage::build_from(&missing, &dir.path().join("img"), "busybox:latest", None, 0)
            .expect_err("no busybox");
    assert!(matches!(err, BuildError::Missing { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "busybox at {} does not exist: apt-get install busybox-static",
            missing.display()
        )
    );
    let err =
        build_docker_archive_from(&missing, dir.path(), "busybox:latest").expect_err("no busybox");
    assert!(matches!(err, BuildError::Missing { .. }), "{err:?}");
    assert!(!dir.path().join("img").exists());
}

#[test]
fn a_dynamic_busybox_is_refused() {
    // The test binary itself is dynamically linked (it has PT_INTERP).
    let exe = std::env::current_exe().expect("current_exe");
    let dir = tempfile::tempdir().expect("tempdir");
    let err = BusyboxImage::build_from(&exe, dir.path(), "busybox:latest", None, 0)
        .expect_err("dynamic busybox");
    assert!(matches!(err, BuildError::NotStatic { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "busybox at {} is not the static build: apt-get install busybox-static",
            exe.display()
        )
    );
}

#[test]
fn a_non_elf_busybox_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("busybox");
    fs::write(&script, "#!/bin/sh\necho sh\n").expect("write");
    let err = BusyboxImage::build_from(&script, dir.path(), "busybox:latest", None, 0)
        .expect_err("script");
    assert!(matches!(err, BuildError::NotElf { .. }), "{err:?}");
    assert!(err.to_string().contains("apt-get install busybox-static"));
}

#[test]
fn inspect_elf_never_panics_on_truncated_input() {
    let busybox = find_busybox().expect("busybox");
    let bytes = fs::read(&busybox).expect("read busybox");
    let info = inspect_elf(&bytes).expect("busybox is ELF");
    assert!(!info.interpreted, "{} is dynamic", busybox.display());
    for len in (0..4096).chain([bytes.len() / 2]) {
        let _ = inspect_elf(&bytes[..len.min(bytes.len())]);
    }
    // A header whose program headers point past the end.
    let mut bogus = bytes[..64].to_vec();
    bogus[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(inspect_elf(&bogus), None);
}

#[test]
fn references() {
    let parse = |r: &str| parse_reference(r).map(|(_, _, name)| name);
    assert_eq!(
        parse("busybox").expect("ok"),
        "docker.io/library/busybox:latest"
    );
    assert_eq!(
        parse("busybox:1.36").expect("ok"),
        "docker.io/library/busybox:1.36"
    );
    assert_eq!(parse("me/busybox:x").expect("ok"), "docker.io/me/busybox:x");
    assert_eq!(
        parse("localhost:5000/busybox").expect("ok"),
        "localhost:5000/busybox:latest"
    );
    assert_eq!(
        parse("ghcr.io/me/busybox:1").expect("ok"),
        "ghcr.io/me/busybox:1"
    );
    for bad in [
        "",
        ":x",
        "busybox:",
        "busybox@sha256:00",
        "a b",
        "../x",
        "a//b",
    ] {
        assert!(
            matches!(parse(bad), Err(BuildError::InvalidReference { .. })),
            "{bad:?}"
        );
    }
}
