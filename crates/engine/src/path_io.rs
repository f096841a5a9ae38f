//! An I/O failure on a path, said the same way wherever holdfastd meets one
//! at start-up: `{what} {path}: {source}` (`create /var/lib/holdfast: ...`).

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("{what} {}: {source}", path.display())]
pub struct PathIoError {
    /// What was being done: `create`, `read`, `bind`, ...
    pub what: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl PathIoError {
    /// What `map_err` takes for `what` on `path`.
    pub fn at<'a>(
        what: &'static str,
        path: &'a Path,
    ) -> impl FnOnce(std::io::Error) -> PathIoError + 'a {
        move |source| PathIoError {
            what,
            path: path.to_owned(),
            source,
        }
    }
}
