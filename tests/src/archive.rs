//! Docker-archive tarballs with their image config edited, for images a
//! Dockerfile would make (a `HEALTHCHECK`, a `VOLUME`) without a builder.

use serde_json::Value;
use sha2::Digest as _;
use std::path::Path;

/// A copy of the docker-archive at `archive` whose image config has
/// `config.<key>` set to `value` (as a Dockerfile instruction writes it);
/// the config is renamed by its new digest, as `docker save` names it.
pub fn with_config_key(archive: &Path, key: &str, value: &Value, out: &Path) {
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut reader = tar::Archive::new(std::fs::File::open(archive).expect("open the archive"));
    for entry in reader.entries().expect("read the archive") {
        let mut entry = entry.expect("an entry");
        let name = entry.path().expect("a path").to_string_lossy().into_owned();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut bytes).expect("read an entry");
        files.push((name, bytes));
    }
    let manifest_at = files
        .iter()
        .position(|(n, _)| n == "manifest.json")
        .expect("a manifest");
    let mut manifest: Value = serde_json::from_slice(&files[manifest_at].1).expect("JSON");
    let config_name = manifest[0]["Config"].as_str().expect("Config").to_owned();
    let config_at = files
        .iter()
        .position(|(n, _)| *n == config_name)
        .expect("the config");
    let mut config: Value = serde_json::from_slice(&files[config_at].1).expect("JSON");
    config["config"][key] = value.clone();
    let config = serde_json::to_vec(&config).expect("JSON");
    let name = format!("{}.json", hex::encode(sha2::Sha256::digest(&config)));
    files[config_at] = (name.clone(), config);
    manifest[0]["Config"] = Value::String(name);
    files[manifest_at].1 = serde_json::to_vec(&manifest).expect("JSON");
    let mut builder = tar::Builder::new(std::fs::File::create(out).expect("create"));
    for (name, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, &name, &bytes[..])
            .expect("append");
    }
    builder.finish().expect("finish the archive");
}
