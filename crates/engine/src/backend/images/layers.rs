//! What images take on disk, layer by layer, as dockerd counts it: an
//! image's size is its layers unpacked; its `SharedSize` the part of them
//! another image has too (the same layer on the same layers below it: one
//! snapshot); `docker system df`'s `LayersSize` every layer once.

use super::{Images, LocalImage, image_failure};
use holdfast_core::RequestError;
use std::collections::BTreeMap;

/// The images' layer accounting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LayerUsage {
    /// By image id: its unpacked size, and the part of it it shares.
    pub images: BTreeMap<String, ImageLayers>,
    /// Every layer of the images, each counted once.
    pub layers_size: i64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImageLayers {
    pub size: i64,
    pub shared_size: i64,
}

impl Images<'_> {
    /// Measures `images`' layers (each against the others).
    pub async fn layer_usage(&self, images: &[LocalImage]) -> Result<LayerUsage, RequestError> {
        let adapter = &self.engine.services.adapter;
        let mut measured = Vec::with_capacity(images.len());
        for image in images {
            let diff_ids = &image.resolved.diff_ids;
            let sizes = adapter
                .layer_sizes(diff_ids)
                .await
                .map_err(|e| image_failure("", e))?;
            measured.push((
                image.resolved.config_digest.clone(),
                diff_ids.clone(),
                sizes,
            ));
        }
        Ok(account(&measured))
    }
}

/// The accounting of images given as (id, diff ids bottom first, each
/// layer's size): a layer is its diff id with every one below it.
fn account(images: &[(String, Vec<String>, Vec<i64>)]) -> LayerUsage {
    let chains = |diff_ids: &[String], sizes: &[i64]| -> Vec<(String, i64)> {
        (1..=diff_ids.len().min(sizes.len()))
            .map(|n| (diff_ids[..n].join(","), sizes[n - 1]))
            .collect()
    };
    // Each layer: its size, and how many of the images have it.
    let mut layers: BTreeMap<String, (i64, usize)> = BTreeMap::new();
    for (_, diff_ids, sizes) in images {
        for (chain, size) in chains(diff_ids, sizes) {
            layers.entry(chain).or_insert((size, 0)).1 += 1;
        }
    }
    let mut usage = LayerUsage {
        layers_size: layers
            .values()
            .map(|(size, _)| *size)
            .fold(0, i64::saturating_add),
        ..LayerUsage::default()
    };
    for (id, diff_ids, sizes) in images {
        let mut own = ImageLayers::default();
        for (chain, size) in chains(diff_ids, sizes) {
            own.size = own.size.saturating_add(size);
            if layers.get(&chain).is_some_and(|(_, users)| *users > 1) {
                own.shared_size = own.shared_size.saturating_add(size);
            }
        }
        usage.images.insert(id.clone(), own);
    }
    usage
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(id: &str, layers: &[(&str, i64)]) -> (String, Vec<String>, Vec<i64>) {
        (
            id.to_owned(),
            layers.iter().map(|(d, _)| (*d).to_owned()).collect(),
            layers.iter().map(|(_, s)| *s).collect(),
        )
    }

    #[test]
    fn a_layer_is_shared_only_on_the_same_layers_below_it() {
        let usage = account(&[
            image("base", &[("a", 100)]),
            image("app", &[("a", 100), ("b", 10)]),
            image("other", &[("c", 50), ("b", 7)]),
        ]);
        let of = |id: &str| usage.images[id];
        assert_eq!(
            of("base"),
            ImageLayers {
                size: 100,
                shared_size: 100
            }
        );
        assert_eq!(
            of("app"),
            ImageLayers {
                size: 110,
                shared_size: 100
            }
        );
        // `b` over `c` is another layer than `b` over `a`.
        assert_eq!(
            of("other"),
            ImageLayers {
                size: 57,
                shared_size: 0
            }
        );
        // a, a+b, c, c+b: each once.
        assert_eq!(usage.layers_size, 100 + 10 + 50 + 7);
    }

    #[test]
    fn one_image_shares_nothing() {
        let usage = account(&[image("only", &[("a", 5), ("b", 6)])]);
        assert_eq!(
            usage.images["only"],
            ImageLayers {
                size: 11,
                shared_size: 0
            }
        );
        assert_eq!(usage.layers_size, 11);
    }
}
