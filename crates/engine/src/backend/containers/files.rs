//! A container's files through the archive helper, chrooted into its root
//! ([`crate::rootfs`]): `docker cp` (a path's stat, a tar of it, a tar
//! extracted into a directory) and `docker export` (the whole filesystem).

use super::Containers;
use crate::archive::{self, ArchiveError, Op, PathStat, PutOptions};
use crate::refusal::{internal, invalid};
use crate::rootfs::Root;
use bytes::Bytes;
use futures_util::stream::{BoxStream, Stream, StreamExt as _};
use holdfast_core::{ContainerId, ErrorKind, RequestError};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A path of a container as a tar, with the path's stat.
pub struct Archive {
    pub stat: PathStat,
    /// The tar; the container's root stays mounted, and the helper is
    /// reaped, once it ends.
    pub tar: BoxStream<'static, std::io::Result<Bytes>>,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive")
            .field("stat", &self.stat)
            .finish_non_exhaustive()
    }
}

impl Containers<'_> {
    /// `HEAD /containers/{id}/archive?path=..`: the path's stat.
    pub async fn stat_path(&self, reference: &str, path: &str) -> Result<PathStat, RequestError> {
        let (id, root) = self.root(reference).await?;
        stat(&id, &root, path).await
    }

    /// `GET /containers/{id}/archive?path=..`: a tar of the path.
    pub async fn archive(&self, reference: &str, path: &str) -> Result<Archive, RequestError> {
        let (id, root) = self.root(reference).await?;
        let stat = stat(&id, &root, path).await?;
        let tar = tar_of(root, Op::Get, path, true)?;
        Ok(Archive { stat, tar })
    }

    /// `docker export`: the whole filesystem as a tar.
    pub async fn export(
        &self,
        reference: &str,
    ) -> Result<BoxStream<'static, std::io::Result<Bytes>>, RequestError> {
        let (_, root) = self.root(reference).await?;
        // The container's own filesystem: its volumes and binds are not
        // in it (dockerd's export leaves them out too).
        tar_of(root, Op::GetContents, "/", false)
    }

    /// `PUT /containers/{id}/archive?path=DIR`: extracts `tar` into the
    /// directory `path` (with `keep_owners`, as the tar says, else as the
    /// container's root).
    pub async fn extract<E: std::fmt::Display>(
        &self,
        reference: &str,
        path: &str,
        options: PutOptions,
        mut tar: impl Stream<Item = Result<Bytes, E>> + Unpin,
    ) -> Result<(), RequestError> {
        let (id, root) = self.root(reference).await?;
        let s = stat(&id, &root, path).await?;
        if !s.is_dir() {
            return Err(invalid(format!(
                "extraction point is not a directory: {path}"
            )));
        }
        let mut child = archive::spawn(Op::Put(options), root.path(), root.binds(), path)
            .map_err(|e| internal(format!("archive helper: {e}")))?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| internal("archive helper without stdin"))?;
        while let Some(chunk) = tar.next().await {
            let chunk = chunk.map_err(|e| invalid(format!("reading the archive: {e}")))?;
            if stdin.write_all(&chunk).await.is_err() {
                // The helper stopped reading: its report says why.
                break;
            }
        }
        drop(stdin);
        archive::finish(child).await?;
        drop(root);
        Ok(())
    }

    /// The container's root for the length of one request: a running
    /// container's through its init, else its snapshot, mounted and held
    /// by the core.
    async fn root(&self, reference: &str) -> Result<(ContainerId, Root), RequestError> {
        crate::rootfs::root(self.engine, reference).await
    }
}

async fn stat(id: &ContainerId, root: &Root, path: &str) -> Result<PathStat, RequestError> {
    let child = archive::spawn(Op::Stat, root.path(), root.binds(), path)
        .map_err(|e| internal(format!("archive helper: {e}")))?;
    archive::finish(child).await.map_err(|e| match e {
        ArchiveError::NotFound(_) => RequestError::new(
            ErrorKind::NotFound,
            format!("Could not find the file {path} in container {id}"),
        ),
        other => other.into(),
    })
}

/// The archive helper's tar of `path` in `root` (`with_binds`: its
/// volumes and binds mounted in it), as a stream: the root
/// stays mounted, and the helper is reaped, once the stream ends (with the
/// helper's failure, if it failed).
fn tar_of(
    root: Root,
    op: Op,
    path: &str,
    with_binds: bool,
) -> Result<BoxStream<'static, std::io::Result<Bytes>>, RequestError> {
    let binds = if with_binds { root.binds() } else { &[] };
    let mut child = archive::spawn(op, root.path(), binds, path)
        .map_err(|e| internal(format!("archive helper: {e}")))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| internal("archive helper without stdout"))?;
    let tail = futures_util::stream::once(async move {
        let result = archive::finish(child).await;
        drop(root);
        result
            .map(|_| Bytes::new())
            .map_err(|e| std::io::Error::other(e.to_string()))
    });
    Ok(chunks(stdout).chain(tail).boxed())
}

/// A child's stdout as a stream of chunks.
fn chunks(from: tokio::process::ChildStdout) -> impl Stream<Item = std::io::Result<Bytes>> + Send {
    futures_util::stream::unfold(Some(from), |from| async move {
        let mut from = from?;
        let mut buf = vec![0u8; 64 * 1024];
        match from.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), Some(from)))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
}
