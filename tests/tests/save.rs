//! `docker save` with the real docker CLI: a docker-archive that `docker
//! load` takes back, the layers of a committed image included.

use holdfast_e2e::Daemon;
use serde_json::Value;

fn manifest_of(archive: &std::path::Path) -> Value {
    let mut reader = tar::Archive::new(std::fs::File::open(archive).expect("open the archive"));
    for entry in reader.entries().expect("read the archive") {
        let mut entry = entry.expect("an entry");
        if entry.path().expect("a path").to_string_lossy() == "manifest.json" {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut bytes).expect("read");
            return serde_json::from_slice(&bytes).expect("JSON");
        }
    }
    panic!("no manifest.json in {}", archive.display());
}

#[test]
fn save_writes_what_load_takes_back() {
    let d = Daemon::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let one = dir.path().join("busybox.tar");
    d.ok(&["save", "-o", &one.to_string_lossy(), "busybox"]);
    let manifest = manifest_of(&one);
    assert_eq!(
        manifest[0]["RepoTags"],
        serde_json::json!(["busybox:latest"])
    );
    assert_eq!(manifest[0]["Layers"].as_array().map(Vec::len), Some(1));

    d.commit_of_script("echo saved > /saved", &[], "made:1");
    let both = dir.path().join("both.tar");
    d.ok(&["save", "-o", &both.to_string_lossy(), "made:1", "busybox"]);
    let manifest = manifest_of(&both);
    assert_eq!(manifest.as_array().map(Vec::len), Some(2), "{manifest}");
    assert_eq!(manifest[0]["Layers"].as_array().map(Vec::len), Some(2));

    d.ok(&["rmi", "made:1"]);
    d.fails_saying(
        "inspect of the removed image",
        &["image", "inspect", "made:1"],
        "No such image",
    );
    let out = d.ok(&["load", "-i", &both.to_string_lossy()]);
    assert!(
        out.contains("Loaded image: made:1"),
        "{out}\n{}",
        d.diagnostics()
    );
    assert_eq!(
        d.ok(&["run", "--rm", "made:1", "cat", "/saved"]).trim(),
        "saved"
    );

    // A tarball that is none, or cut short: refused in dockerd's words,
    // and nothing of it is loaded.
    let before = d.ok(&["images", "-a", "-q"]);
    let saved = std::fs::read(&both).expect("read the archive");
    let cases: [(&str, Vec<u8>, &str); 2] = [
        (
            "junk",
            (0..4096u32)
                .map(|n| (n.wrapping_mul(2_654_435_761) >> 24) as u8)
                .collect(),
            "archive/tar: invalid tar header",
        ),
        (
            "a truncated archive",
            saved[..saved.len() / 2].to_vec(),
            "unexpected EOF",
        ),
    ];
    for (what, body, words) in cases {
        let r = d.http("POST", "/images/load", Some(&body));
        assert_eq!(r.status, 400, "{what}: {r:?}\n{}", d.diagnostics());
        assert!(r.body.contains(words), "{what}: {r:?}");
    }
    assert_eq!(d.ok(&["images", "-a", "-q"]), before, "nothing half-loaded");

    d.fails_saying(
        "save of a missing image",
        &[
            "save",
            "-o",
            &dir.path().join("x.tar").to_string_lossy(),
            "nosuch:1",
        ],
        "No such image",
    );
}
