//! A busybox image built offline from the host's static busybox: the
//! [`holdfast_busybox_image`] builder's [`BusyboxImage`], built here
//! panicking with the builder's message on error (a test must never skip
//! silently).

use holdfast_busybox_image::BusyboxImage;
use std::path::{Path, PathBuf};

/// Builds both tarballs into `dir`. `reference` is `repo:tag` (a Docker
/// Hub short name); `stop_signal` goes into the config's `StopSignal`.
/// Panics with the builder's message (e.g. busybox-static missing).
pub fn busybox_image(dir: &Path, reference: &str, stop_signal: Option<&str>) -> BusyboxImage {
    busybox_image_with_ballast(dir, reference, stop_signal, 0)
}

/// As [`busybox_image`], with `/ballast.bin`: `ballast_bytes` of
/// incompressible bytes, for testing layers too big to hold in memory.
pub fn busybox_image_with_ballast(
    dir: &Path,
    reference: &str,
    stop_signal: Option<&str>,
    ballast_bytes: usize,
) -> BusyboxImage {
    match BusyboxImage::build_with_ballast(dir, reference, stop_signal, ballast_bytes) {
        Ok(image) => image,
        Err(err) => panic!("building the {reference} image in {}: {err}", dir.display()),
    }
}

/// A docker-archive tarball of `reference` built from the host's busybox
/// with `sleep infinity` as its command: a pause image that holds a pod's
/// namespaces, as holdfastd seeds its own, for a runtime that would pull
/// one otherwise (containerd's CRI plugin). Its path; panics as
/// [`busybox_image`] does.
pub fn pause_image(dir: &Path, reference: &str) -> PathBuf {
    let built = holdfast_busybox_image::find_busybox().and_then(|busybox| {
        holdfast_busybox_image::build_docker_archive_with_cmd(
            &busybox,
            dir,
            reference,
            &["sleep", "infinity"],
        )
    });
    built.unwrap_or_else(|err| panic!("building the {reference} image in {}: {err}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdfast_busybox_image::ImageFormat;

    #[test]
    fn builds_or_says_why() {
        let dir = tempfile::tempdir().expect("tempdir");
        let image = busybox_image(dir.path(), "busybox:latest", None);
        assert_eq!(image.containerd_name, "docker.io/library/busybox:latest");
        for f in [ImageFormat::DockerArchive, ImageFormat::OciLayout] {
            assert!(image.tarball(f).is_file(), "{f:?}");
        }
    }
}
