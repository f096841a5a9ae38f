//! Image manifests, indexes and configs read through the typed, validated
//! structures of `oci-spec` (the crate youki and containerd's Rust
//! extensions use), within our bounds on size.
//!
//! The types are for reading only. A document that is stored, pushed or
//! built upon keeps its own bytes (a pushed manifest goes byte for byte as
//! stored, a committed config is its base's JSON with keys set over it), so
//! no digest changes because a document went through a struct.
//!
//! Docker's schema 2 documents read through the same types: their media
//! types are `MediaType::Other`, a manifest list is an index, and a Docker
//! config is an OCI config plus the extensions read by [`DockerExtensions`].

use crate::error::AdapterError;
use crate::image::{HistoryEntry, ImageConfig, bad};
use oci_spec::image::{
    Arch, Descriptor as OciDescriptor, ImageConfiguration, ImageIndex, ImageManifest, Os,
};
use serde::Deserialize;
use serde_json::Value;

/// Largest manifest, index or config the adapter reads into memory.
pub(crate) const MAX_JSON_BYTES: usize = 8 << 20;

/// A manifest or an index, as a content descriptor points at either.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Document {
    Index(Box<ImageIndex>),
    Manifest(Box<ImageManifest>),
}

/// Whether a media type names an index (OCI's, or Docker's manifest list).
pub(crate) fn is_index_media_type(media_type: &str) -> bool {
    media_type.contains("image.index") || media_type.contains("manifest.list")
}

/// The JSON of a document of at most [`MAX_JSON_BYTES`] (serde_json bounds
/// its nesting).
fn bounded_json(what: &str, bytes: &[u8]) -> Result<Value, AdapterError> {
    if bytes.len() > MAX_JSON_BYTES {
        return Err(bad(format!(
            "{what} is {} bytes, more than the {MAX_JSON_BYTES} a document may have",
            bytes.len()
        )));
    }
    serde_json::from_slice(bytes).map_err(|e| bad(format!("{what} is not JSON: {e}")))
}

fn typed<T: serde::de::DeserializeOwned>(
    what: &str,
    kind: &str,
    doc: Value,
) -> Result<T, AdapterError> {
    serde_json::from_value(doc).map_err(|e| bad(format!("{what} is not a valid {kind}: {e}")))
}

fn check_schema(what: &str, version: u32) -> Result<(), AdapterError> {
    if version == 2 {
        Ok(())
    } else {
        Err(bad(format!(
            "{what} has schema version {version}; only version 2 is supported"
        )))
    }
}

fn index_of(what: &str, doc: Value) -> Result<ImageIndex, AdapterError> {
    let index: ImageIndex = typed(what, "image index", doc)?;
    check_schema(what, index.schema_version())?;
    Ok(index)
}

fn manifest_of(what: &str, doc: Value) -> Result<ImageManifest, AdapterError> {
    let manifest: ImageManifest = typed(what, "image manifest", doc)?;
    check_schema(what, manifest.schema_version())?;
    Ok(manifest)
}

/// Reads a manifest or an index. `media_type` is what the pointer to it
/// says (a descriptor, an image record, a registry's Content-Type), empty
/// when unknown; the document's own `mediaType` and a `manifests` list
/// count too, as containerd decides.
pub(crate) fn read_document(
    what: &str,
    media_type: &str,
    bytes: &[u8],
) -> Result<Document, AdapterError> {
    let doc = bounded_json(what, bytes)?;
    let own = doc.get("mediaType").and_then(Value::as_str).unwrap_or("");
    if is_index_media_type(media_type) || is_index_media_type(own) || doc.get("manifests").is_some()
    {
        Ok(Document::Index(Box::new(index_of(what, doc)?)))
    } else {
        Ok(Document::Manifest(Box::new(manifest_of(what, doc)?)))
    }
}

/// Reads a document that must be a manifest.
pub(crate) fn read_manifest(what: &str, bytes: &[u8]) -> Result<ImageManifest, AdapterError> {
    match read_document(what, "", bytes)? {
        Document::Manifest(m) => Ok(*m),
        Document::Index(_) => Err(bad(format!("{what} is an index, not a manifest"))),
    }
}

/// Reads an index (an OCI layout's `index.json`).
pub(crate) fn read_index(what: &str, bytes: &[u8]) -> Result<ImageIndex, AdapterError> {
    index_of(what, bounded_json(what, bytes)?)
}

/// The entry of an index for linux on this host's architecture (an entry
/// without a platform counts when it is the only one).
pub(crate) fn pick_platform<'a>(
    index: &'a ImageIndex,
    arch: &str,
) -> Result<&'a OciDescriptor, AdapterError> {
    let want = Arch::from(arch);
    let manifests = index.manifests();
    let found = manifests.iter().find(|m| {
        m.platform()
            .as_ref()
            .is_some_and(|p| *p.os() == Os::Linux && *p.architecture() == want)
    });
    match (found, manifests.as_slice()) {
        (Some(m), _) => Ok(m),
        (None, [only]) if only.platform().is_none() => Ok(only),
        _ => Err(bad(format!("no linux/{arch} manifest in the image index"))),
    }
}

/// Docker's fields of an image config that the OCI image spec lacks, read
/// from the same bytes as the [`ImageConfiguration`]. Only what holdfast
/// uses is read (`Shell`, `OnBuild`, `ArgsEscaped` and the like are left in
/// the bytes, which commit keeps).
#[derive(Debug, Default, Deserialize)]
struct DockerExtensions {
    #[serde(default)]
    config: Option<DockerConfigSection>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DockerConfigSection {
    /// `HEALTHCHECK`, kept as JSON: the daemon decodes it with the decoder
    /// of the API's `Healthcheck`, so an image's and a user's are read
    /// alike, and a malformed one is ignored with a warning (as dockerd
    /// runs such an image) instead of making the image unusable.
    #[serde(default)]
    healthcheck: Option<Value>,
}

/// What an image config tells holdfast: the container defaults, the layer
/// diff ids, the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConfigDocument {
    pub config: ImageConfig,
    pub diff_ids: Vec<String>,
    pub history: Vec<HistoryEntry>,
    /// Docker's legacy `container_config` (the config of the container a
    /// build step ran in), as written, when the config has one.
    pub container_config: Option<Value>,
    /// The config's `created` (RFC 3339, as written), `architecture` and
    /// `os`.
    pub created: Option<String>,
    pub architecture: String,
    pub os: String,
}

/// Reads an image config: the OCI part through oci-spec, Docker's
/// extensions through [`DockerExtensions`]. `history` is read leniently
/// (fields of the wrong type read as absent): a history is for people, and
/// a malformed one must not make the image unusable, so it is taken out
/// before the strict read.
pub(crate) fn read_config(what: &str, bytes: &[u8]) -> Result<ConfigDocument, AdapterError> {
    let mut doc = bounded_json(what, bytes)?;
    let history = match doc.as_object_mut() {
        Some(fields) => fields.remove("history").unwrap_or(Value::Null),
        None => return Err(bad(format!("{what} is not a JSON object"))),
    };
    let container_config = doc
        .get("container_config")
        .filter(|c| c.is_object())
        .cloned();
    let docker: DockerExtensions = typed(what, "image config", doc.clone())?;
    let oci: ImageConfiguration = typed(what, "image config", doc)?;
    if oci.rootfs().typ() != "layers" {
        return Err(bad(format!(
            "{what} has a rootfs of type {:?}; only \"layers\" is supported",
            oci.rootfs().typ()
        )));
    }
    let section = oci.config().clone().unwrap_or_default();
    let sorted = |v: &Option<Vec<String>>| v.as_ref().map(|v| v.iter().cloned().collect());
    let config = ImageConfig {
        env: section.env().clone(),
        cmd: section.cmd().clone(),
        entrypoint: section.entrypoint().clone(),
        working_dir: section.working_dir().clone(),
        user: section.user().clone(),
        stop_signal: section.stop_signal().clone(),
        labels: section
            .labels()
            .as_ref()
            .map(|l| l.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        volumes: sorted(section.volumes()),
        exposed_ports: sorted(section.exposed_ports()),
        healthcheck: docker.config.and_then(|c| c.healthcheck),
    };
    Ok(ConfigDocument {
        config,
        diff_ids: oci.rootfs().diff_ids().clone(),
        history: history_of(&history),
        container_config,
        created: oci.created().clone(),
        architecture: oci.architecture().to_string(),
        os: oci.os().to_string(),
    })
}

/// The `history` entries of a config; fields of the wrong type read as
/// absent, an entry that is not an object is skipped.
fn history_of(history: &Value) -> Vec<HistoryEntry> {
    let text = |v: &Value, key: &str| v[key].as_str().unwrap_or_default().to_owned();
    history
        .as_array()
        .into_iter()
        .flatten()
        .filter(|h| h.is_object())
        .map(|h| HistoryEntry {
            created: text(h, "created"),
            created_by: text(h, "created_by"),
            comment: text(h, "comment"),
            empty_layer: h["empty_layer"].as_bool().unwrap_or(false),
        })
        .collect()
}

/// The `image_documents` fuzz target's body, here so that the committed
/// corpus is replayed by an ordinary test on stable Rust. The first byte
/// picks the reader (`m` a manifest, `i` an index, `c` a config, anything
/// else a manifest or an index by the rest's own say); the rest is the
/// document. Nothing may panic, and what is accepted must hold what the
/// callers rely on. Returns whether the document was accepted.
#[doc(hidden)]
pub fn image_document_fuzz_input(data: &[u8]) -> bool {
    let Some((&selector, bytes)) = data.split_first() else {
        return false;
    };
    let descriptors = |all: &[OciDescriptor]| {
        for d in all {
            // What the importer and unpacker take of each: never a panic,
            // and a digest that reads back as it was written.
            if let Ok(ours) = crate::image::Descriptor::from_oci(d) {
                assert!(ours.digest.contains(':'), "{}", ours.digest);
                assert!(ours.size >= 0);
            }
        }
    };
    match selector {
        b'm' => read_manifest("fuzz", bytes).is_ok_and(|m| {
            assert_eq!(m.schema_version(), 2);
            descriptors(std::slice::from_ref(m.config()));
            descriptors(m.layers());
            true
        }),
        b'i' => read_index("fuzz", bytes).is_ok_and(|i| {
            assert_eq!(i.schema_version(), 2);
            descriptors(i.manifests());
            let _ = pick_platform(&i, "amd64");
            true
        }),
        b'c' => read_config("fuzz", bytes).is_ok_and(|c| {
            let _ = crate::image::chain_id(&c.diff_ids);
            true
        }),
        _ => read_document("fuzz", "", bytes).is_ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DIGEST_A: &str =
        "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const DIGEST_B: &str =
        "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn bytes(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).expect("json")
    }

    fn entry(digest: &str, platform: Option<(&str, &str)>) -> Value {
        let mut e = json!({ "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest, "size": 7 });
        if let Some((os, arch)) = platform {
            e["platform"] = json!({ "os": os, "architecture": arch });
        }
        e
    }

    fn index(entries: Vec<Value>) -> ImageIndex {
        read_index(
            "index",
            &bytes(json!({ "schemaVersion": 2, "manifests": entries })),
        )
        .expect("an index")
    }

    #[test]
    fn docker_schema_2_manifests_read_with_their_media_types() {
        let manifest = bytes(json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": { "mediaType": "application/vnd.docker.container.image.v1+json", "digest": DIGEST_A, "size": 9 },
            "layers": [{ "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "digest": DIGEST_B, "size": 11 }],
        }));
        let m = read_manifest("m", &manifest).expect("a schema 2 manifest");
        assert_eq!(
            m.config().media_type().to_string(),
            "application/vnd.docker.container.image.v1+json"
        );
        assert_eq!(m.layers()[0].digest().to_string(), DIGEST_B);
        assert_eq!(m.layers()[0].size(), 11);
        assert_eq!(
            m.layers()[0].media_type().to_string(),
            "application/vnd.docker.image.rootfs.diff.tar.gzip"
        );
        let list = bytes(json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
            "manifests": [entry(DIGEST_A, Some(("linux", "amd64")))],
        }));
        assert!(matches!(
            read_document("l", "", &list),
            Ok(Document::Index(_))
        ));
        assert!(read_manifest("l", &list).is_err());
    }

    #[test]
    fn bad_documents_are_clear_errors() {
        let cases = [
            (json!([1, 2]), "not a valid image manifest"),
            (
                json!({ "schemaVersion": 2, "layers": [] }),
                "missing field `config`",
            ),
            (
                json!({ "schemaVersion": 2, "config": { "mediaType": "x", "digest": "nodigest", "size": 1 }, "layers": [] }),
                "digest",
            ),
            (
                json!({ "schemaVersion": 2, "config": { "mediaType": "x", "digest": DIGEST_A, "size": -1 }, "layers": [] }),
                "invalid value",
            ),
            (
                json!({ "schemaVersion": 1, "config": { "mediaType": "x", "digest": DIGEST_A, "size": 1 }, "layers": [] }),
                "schema version 1",
            ),
            (
                json!({ "schemaVersion": 2, "manifests": "none" }),
                "not a valid image index",
            ),
        ];
        for (doc, want) in cases {
            let got = read_document("doc", "", &bytes(doc.clone()));
            let message = got.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(message.contains(want), "{doc}: {message:?}");
        }
        let huge = vec![b' '; MAX_JSON_BYTES + 1];
        let message = read_document("huge", "", &huge)
            .err()
            .map(|e| e.to_string());
        assert!(
            message.as_deref().is_some_and(|m| m.contains("more than")),
            "{message:?}"
        );
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(read_document("deep", "", deep.as_bytes()).is_err());
        assert!(read_config("config", b"[]").is_err());
        assert!(read_config("config", &bytes(json!({ "os": "linux" }))).is_err());
    }

    #[test]
    fn platform_is_picked_from_an_index() {
        let both = index(vec![
            entry(DIGEST_A, Some(("linux", "arm64"))),
            entry(DIGEST_B, Some(("linux", "amd64"))),
        ]);
        let picked = pick_platform(&both, "amd64").map(|d| d.digest().to_string());
        assert_eq!(picked.ok().as_deref(), Some(DIGEST_B));
        let arm_only = index(vec![entry(DIGEST_A, Some(("linux", "arm64")))]);
        assert!(pick_platform(&arm_only, "amd64").is_err());
        let windows = index(vec![entry(DIGEST_A, Some(("windows", "amd64")))]);
        assert!(pick_platform(&windows, "amd64").is_err());
        let bare = index(vec![entry(DIGEST_A, None)]);
        let picked = pick_platform(&bare, "amd64").map(|d| d.digest().to_string());
        assert_eq!(picked.ok().as_deref(), Some(DIGEST_A));
    }

    #[test]
    fn a_docker_config_reads_with_its_extensions() {
        let config = bytes(json!({
            "architecture": "arm64",
            "os": "linux",
            "created": "2024-01-02T03:04:05.123456789Z",
            "container_config": { "Cmd": ["/bin/sh", "-c", "#(nop) CMD [\"sh\"]"] },
            "config": {
                "Env": ["PATH=/bin"], "Cmd": ["sh"], "StopSignal": "SIGQUIT", "WorkingDir": "/w", "User": "1:2",
                "Labels": { "z": "1", "a": "2" },
                "Volumes": { "/data": {}, "/cache": {} },
                "ExposedPorts": { "80/tcp": {} },
                "Healthcheck": { "Test": ["CMD", "true"], "Interval": 1000000000 },
                "Shell": ["/bin/sh", "-c"],
            },
            "rootfs": { "type": "layers", "diff_ids": [DIGEST_A, DIGEST_B] },
            "history": [{ "created_by": "ADD x /" }],
        }));
        let read = read_config("config", &config).expect("a config");
        assert_eq!(
            (read.architecture.as_str(), read.os.as_str()),
            ("arm64", "linux"),
            "as the config says"
        );
        assert_eq!(
            read.created.as_deref(),
            Some("2024-01-02T03:04:05.123456789Z")
        );
        assert_eq!(
            read.container_config.as_ref().map(|c| c["Cmd"][0].clone()),
            Some(json!("/bin/sh"))
        );
        let c = &read.config;
        assert_eq!(c.stop_signal.as_deref(), Some("SIGQUIT"));
        assert_eq!(c.cmd, Some(vec!["sh".to_owned()]));
        assert_eq!(c.user.as_deref(), Some("1:2"));
        assert_eq!(c.working_dir.as_deref(), Some("/w"));
        let labels: Vec<_> = c.labels.iter().flatten().map(|(k, _)| k.as_str()).collect();
        assert_eq!(labels, ["a", "z"], "labels ordered");
        let volumes: Vec<_> = c.volumes.iter().flatten().map(String::as_str).collect();
        assert_eq!(volumes, ["/cache", "/data"]);
        assert_eq!(c.exposed_ports.as_ref().map(|p| p.len()), Some(1), "{c:?}");
        assert_eq!(
            c.healthcheck,
            Some(json!({ "Test": ["CMD", "true"], "Interval": 1000000000 }))
        );
        assert_eq!(read.diff_ids, [DIGEST_A, DIGEST_B]);
        assert_eq!(read.history.len(), 1);
    }

    #[test]
    fn history_is_read_leniently() {
        let config = bytes(json!({
            "architecture": "amd64",
            "os": "linux",
            "rootfs": { "type": "layers", "diff_ids": [DIGEST_A] },
            "history": [
                { "created": "2024-01-02T03:04:05Z", "created_by": "ADD x /", "comment": "c" },
                { "created_by": "CMD [\"sh\"]", "empty_layer": true },
                { "created_by": 5, "comment": null, "empty_layer": "yes" },
                "not an entry",
            ],
        }));
        let h = read_config("config", &config).expect("a config").history;
        assert_eq!(h.len(), 3);
        assert_eq!(h[0].created, "2024-01-02T03:04:05Z");
        assert_eq!(h[0].comment, "c");
        assert!(!h[0].empty_layer && h[1].empty_layer);
        assert_eq!(h[2], HistoryEntry::default());
        assert!(history_of(&Value::Null).is_empty());
        assert!(history_of(&json!({ "no": "list" })).is_empty());
    }
}
