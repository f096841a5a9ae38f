//! busybox:latest built offline from the host's static busybox (Debian
//! `busybox-static`), with the builder the test kit uses too.

use holdfast_busybox_image::BuildError;

/// The image a CRI pod's sandbox runs (see `holdfast-api-cri`): the host's
/// busybox with `sleep infinity` as its command, an image of its own (not
/// `busybox:latest` under another name), seeded when the first pod needs
/// it and never pulled (`holdfast.local` is no registry), so that pods run
/// offline whatever a user does to `busybox`, and a Docker user who runs
/// no pod never sees it.
pub const PAUSE_IMAGE: &str = "holdfast.local/pause:1";

/// The pause image's process: it only holds the pod's namespaces.
const PAUSE_CMD: [&str; 2] = ["sleep", "infinity"];
use std::path::{Path, PathBuf};

/// Writes a docker-archive tarball of `reference` (e.g. `busybox:latest`,
/// or [`PAUSE_IMAGE`] with its own command) into `dir` and returns its path. Blocking (it reads busybox and runs
/// `busybox --list`): call it from `spawn_blocking`. The error's message says
/// which path or tool failed and, when busybox is missing or not the static
/// build, to `apt-get install busybox-static`; its kind is `NotFound` when
/// there is no busybox at all.
pub fn build_busybox_archive(dir: &Path, reference: &str) -> std::io::Result<PathBuf> {
    let cmd: &[&str] = if reference == PAUSE_IMAGE {
        &PAUSE_CMD
    } else {
        &["sh"]
    };
    let built = holdfast_busybox_image::find_busybox().and_then(|busybox| {
        holdfast_busybox_image::build_docker_archive_with_cmd(&busybox, dir, reference, cmd)
    });
    built.map_err(|err| {
        let kind = match err {
            BuildError::NotFound | BuildError::Missing { .. } => std::io::ErrorKind::NotFound,
            _ => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, err)
    })
}

/// Builds `reference` from the host's busybox (see
/// [`build_busybox_archive`]) in a scratch directory under `data_root` and
/// imports it. The error says what failed.
pub async fn seed(
    adapter: &holdfast_adapter_containerd::Adapter,
    data_root: &Path,
    reference: &'static str,
) -> Result<(), String> {
    let data_root = data_root.to_owned();
    let built = tokio::task::spawn_blocking(move || {
        let dir = tempfile::Builder::new()
            .prefix("seed-")
            .tempdir_in(&data_root)?;
        let tarball = build_busybox_archive(dir.path(), reference)?;
        Ok::<_, std::io::Error>((dir, tarball))
    })
    .await;
    let (dir, tarball) = match built {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => return Err(format!("cannot build {reference}: {e}")),
        Err(e) => return Err(format!("cannot build {reference}: {e}")),
    };
    let imported = adapter.import_image(&tarball).await;
    drop(dir);
    imported
        .map(|_| ())
        .map_err(|e| format!("cannot import {reference}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    #[test]
    fn builds_a_docker_archive_of_busybox_latest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tarball = build_busybox_archive(dir.path(), "busybox:latest").expect("build");
        assert!(tarball.is_file(), "{}", tarball.display());
        assert!(tarball.starts_with(dir.path()));

        let file = std::fs::File::open(&tarball).expect("open");
        let mut archive = tar::Archive::new(file);
        let mut manifest = None;
        for entry in archive.entries().expect("entries") {
            let mut entry = entry.expect("entry");
            if entry.path().expect("path").as_os_str() == "manifest.json" {
                let mut text = String::new();
                entry.read_to_string(&mut text).expect("read manifest.json");
                manifest = Some(text);
            }
        }
        let manifest: serde_json::Value =
            serde_json::from_str(&manifest.expect("manifest.json in the archive"))
                .expect("manifest.json is JSON");
        assert_eq!(
            manifest[0]["RepoTags"],
            serde_json::json!(["busybox:latest"])
        );
    }
}
