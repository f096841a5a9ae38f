//! What a registry says of a reference without pulling it (`GET
//! /distribution/{name}/json`): the descriptor its tag or digest names,
//! and the platforms it is made for, read from the index, or from the
//! manifest's config when it is a single image. Through the same registry
//! client, credentials and limits as pulls.

use crate::client::Adapter;
use crate::document::{Document, read_config, read_document};
use crate::error::AdapterError;
use crate::image::Descriptor;
use crate::pull::{PullAuth, parse_reference, pull_failure};

/// A registry's answer for one reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistributionInspect {
    pub media_type: String,
    pub digest: String,
    pub size: i64,
    pub platforms: Vec<DistributionPlatform>,
}

/// One platform an image is made for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistributionPlatform {
    pub architecture: String,
    pub os: String,
    /// `v8` of `arm64/v8`, when the registry says it.
    pub variant: Option<String>,
}

impl Adapter {
    /// Asks `reference`'s registry what it names: see the module docs.
    pub async fn inspect_distribution(
        &self,
        reference: &str,
        auth: &PullAuth,
    ) -> Result<DistributionInspect, AdapterError> {
        let (name, image) = parse_reference(reference)?;
        let remote = self.remote(name, image, auth).await?;
        let (bytes, media_type, digest) = remote.manifest(&remote.wanted()).await?;
        let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        let doc = read_document(&digest, &media_type, &bytes).map_err(pull_failure)?;
        let platforms = match doc {
            Document::Index(index) => index
                .manifests()
                .iter()
                .filter_map(|m| m.platform().as_ref())
                .map(|p| DistributionPlatform {
                    architecture: p.architecture().to_string(),
                    os: p.os().to_string(),
                    variant: p.variant().clone(),
                })
                .collect(),
            Document::Manifest(manifest) => {
                let config = Descriptor::from_oci(manifest.config()).map_err(pull_failure)?;
                let bytes = remote.document_blob(&config).await?;
                let what = format!("the config {}", config.digest);
                let read = read_config(&what, &bytes).map_err(pull_failure)?;
                vec![DistributionPlatform {
                    architecture: read.architecture,
                    os: read.os,
                    variant: None,
                }]
            }
        };
        Ok(DistributionInspect {
            media_type,
            digest,
            size,
            platforms,
        })
    }
}
