//! Test harness for tests against a real containerd.
//!
//! - [`Containerd`]: a private containerd with its own root, state, socket and
//!   config in a temporary directory. It can be SIGKILLed and restarted on the
//!   same directories, and on drop it kills its shims and their processes,
//!   unmounts what it left mounted and removes the directory. Nothing here
//!   touches a system containerd.
//! - [`busybox_image`]: a [`BusyboxImage`] built offline from the static
//!   busybox on the host (Debian `busybox-static`), written as a
//!   docker-archive and as an OCI image-layout tarball, reproducibly.
//! - [`Containerd::start_with_cri`]: the same with containerd's own CRI
//!   plugin on, and [`pause_image`] for its sandboxes: the yardstick the
//!   CRI side-by-side benchmark measures holdfast against.
//! - [`unmount_under`], [`remove_cgroups`]: the clean-up of the mounts and
//!   the runc cgroups that containers left on the host.
//!
//! Everything fails loudly (panics with a message) when a tool is missing:
//! tests must never skip silently.

mod containerd;
mod image;

pub use containerd::{Containerd, remove_cgroups, sigkill, unmount_under};
pub use holdfast_busybox_image::{BusyboxImage, ImageFormat};
pub use image::{busybox_image, busybox_image_with_ballast, pause_image};

use std::path::PathBuf;

/// Finds `program` on PATH; panics with a useful message when it is missing.
pub fn which(program: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(program);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!("{program} is not on PATH: install it (Debian: containerd, runc, busybox-static)");
}

/// A namespace no other test (or test process) uses, so that tests sharing
/// host-wide state (the runc root, shim sockets) cannot collide.
pub fn unique_namespace(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{n}", std::process::id())
}
