//! A busybox image built offline from the host's static busybox: the
//! [`holdfast_busybox_image`] builder, panicking with its message on error.

use holdfast_busybox_image as builder;
use std::path::{Path, PathBuf};

pub use builder::ImageFormat;

/// The busybox image as two tarballs with the same layer and config.
#[derive(Debug, Clone)]
pub struct BusyboxImage {
    /// As given to [`BusyboxImage::build`], e.g. `busybox:latest`.
    pub reference: String,
    /// The fully qualified name containerd stores it under.
    pub containerd_name: String,
    /// `sha256:...` of the uncompressed layer.
    pub diff_id: String,
    /// `sha256:...` of the linux/amd64 config (the native one: see
    /// [`holdfast_busybox_image::BusyboxImage::config_digest`]).
    pub config_digest: String,
    pub docker_archive: PathBuf,
    pub oci_layout: PathBuf,
}

impl BusyboxImage {
    /// Builds both tarballs into `dir`. `reference` is `repo:tag` (a Docker
    /// Hub short name); `stop_signal` goes into the config's `StopSignal`.
    /// Panics with the builder's message (e.g. busybox-static missing).
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
        match builder::BusyboxImage::build_with_ballast(dir, reference, stop_signal, ballast_bytes)
        {
            Ok(image) => image.into(),
            Err(err) => panic!("building the {reference} image in {}: {err}", dir.display()),
        }
    }

    pub fn tarball(&self, format: ImageFormat) -> &Path {
        match format {
            ImageFormat::DockerArchive => &self.docker_archive,
            ImageFormat::OciLayout => &self.oci_layout,
        }
    }
}

impl From<builder::BusyboxImage> for BusyboxImage {
    fn from(image: builder::BusyboxImage) -> BusyboxImage {
        let builder::BusyboxImage {
            reference,
            containerd_name,
            diff_id,
            config_digest,
            docker_archive,
            oci_layout,
        } = image;
        BusyboxImage {
            reference,
            containerd_name,
            diff_id,
            config_digest,
            docker_archive,
            oci_layout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_the_builder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let image = BusyboxImage::build(dir.path(), "busybox:latest", None);
        assert_eq!(image.containerd_name, "docker.io/library/busybox:latest");
        for f in [ImageFormat::DockerArchive, ImageFormat::OciLayout] {
            assert!(image.tarball(f).is_file(), "{f:?}");
        }
    }
}
