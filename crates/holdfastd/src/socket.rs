//! The Docker API's unix socket: mode 0660, group `docker` when that group
//! exists, as dockerd makes it; a stale socket file (no server behind it)
//! is replaced, one a running server holds is refused.

use holdfast_engine::path_io::PathIoError;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// Why the API socket could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("the API socket {path} is in use by a running server")]
    SocketInUse { path: PathBuf },
}

/// Binds the API socket: mode 0660, group `docker` when that group exists.
/// A stale socket file (no server behind it) is replaced.
pub fn bind(path: &Path) -> Result<tokio::net::UnixListener, BindError> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(BindError::SocketInUse {
                path: path.to_owned(),
            });
        }
        std::fs::remove_file(path).map_err(PathIoError::at("remove stale socket", path))?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(PathIoError::at("create", dir))?;
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(PathIoError::at("bind", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .map_err(PathIoError::at("chmod", path))?;
    if let Some(gid) = docker_group() {
        let _ = std::os::unix::fs::chown(path, None, Some(gid));
    }
    Ok(listener)
}

fn docker_group() -> Option<u32> {
    let text = std::fs::read_to_string("/etc/group").ok()?;
    holdfast_adapter_containerd::group_id(&text, "docker")
}
