//! What containers take on disk, as `inspect --size`, `ps --size` and
//! `system df` show it: what each wrote (its snapshot's upper layer) and
//! that with its image's layers unpacked. Each image is measured once.

use super::{Containers, Snapshot};
use crate::backend::images::LocalImage;
use crate::engine::EngineHandle;
use holdfast_core::{FailureKind, RequestError};
use std::collections::BTreeMap;

/// A container's sizes, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// What it wrote (`SizeRw`).
    pub rw: i64,
    /// What its root filesystem holds, its image's layers and what it
    /// wrote (`SizeRootFs`); unknown when its image is gone.
    pub root_fs: Option<i64>,
}

/// Measures containers; see the module docs.
#[derive(Debug)]
pub struct SizeMeter<'a> {
    engine: &'a EngineHandle,
    /// The images there are, by id.
    images: BTreeMap<String, LocalImage>,
    /// The unpacked size of each image measured so far, by id.
    measured: BTreeMap<String, i64>,
}

impl<'a> Containers<'a> {
    /// A meter over the images there are now.
    pub async fn size_meter(&self) -> Result<SizeMeter<'a>, RequestError> {
        let images = self
            .engine
            .images()
            .list()
            .await?
            .into_iter()
            .map(|i| (i.resolved.config_digest.clone(), i))
            .collect();
        Ok(SizeMeter {
            engine: self.engine,
            images,
            measured: BTreeMap::new(),
        })
    }
}

impl SizeMeter<'_> {
    /// The images the meter knows, by id.
    pub fn images(&self) -> impl Iterator<Item = &LocalImage> {
        self.images.values()
    }

    /// The unpacked size of an image (its layers' snapshots).
    pub async fn image_size(&mut self, image_id: &str) -> Result<Option<i64>, RequestError> {
        if let Some(size) = self.measured.get(image_id) {
            return Ok(Some(*size));
        }
        let Some(image) = self.images.get(image_id) else {
            return Ok(None);
        };
        let size = self.engine.images().unpacked_size(image).await?;
        self.measured.insert(image_id.to_owned(), size);
        Ok(Some(size))
    }

    /// Takes an image's size measured elsewhere (`docker system df`
    /// measures every image's layers at once).
    pub fn remember(&mut self, image_id: &str, size: i64) {
        self.measured.insert(image_id.to_owned(), size);
    }

    /// A container's sizes.
    pub async fn measure(&mut self, s: &Snapshot) -> Result<Sizes, RequestError> {
        let adapter = &self.engine.services.adapter;
        let rw = match adapter.container_rw_size(&s.record.id).await {
            Ok(size) => size,
            // A container being created or removed has no snapshot (yet):
            // it wrote nothing.
            Err(e) if e.kind() == FailureKind::NotFound => 0,
            Err(e) => return Err(crate::refusal::adapter_failure(e)),
        };
        let image = match &s.record.config.image_id {
            Some(id) => self.image_size(id).await?,
            None => None,
        };
        Ok(Sizes {
            rw,
            root_fs: image.map(|i| i.saturating_add(rw)),
        })
    }
}
