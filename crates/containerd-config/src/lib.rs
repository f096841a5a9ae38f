//! # holdfast-containerd-config
//!
//! The config file (version 2, containerd 1.6) of a private containerd: its
//! own root, state, sockets and `opt` directory, and what holdfast has no
//! use for disabled (the CRI plugin, the snapshotters other than overlayfs'
//! siblings it needs, the tracing processor). The embedded containerd's
//! supervisor writes it at every start of holdfastd; the test harness writes
//! it for each private containerd a test starts.

use std::path::{Path, PathBuf};

/// Where a private containerd keeps everything.
#[derive(Clone, Copy, Debug)]
pub struct Dirs<'a> {
    pub root: &'a Path,
    pub state: &'a Path,
    /// The gRPC socket.
    pub socket: &'a Path,
    /// The ttrpc socket.
    pub ttrpc: &'a Path,
    /// The `opt` plugin's directory.
    pub opt: &'a Path,
}

/// A path the config cannot name: TOML strings are UTF-8.
#[derive(Debug, thiserror::Error)]
#[error("{} is not UTF-8: containerd's config cannot name it", path.display())]
pub struct NonUtf8Path {
    pub path: PathBuf,
}

/// The config for these directories.
pub fn config_toml(dirs: &Dirs<'_>) -> Result<String, NonUtf8Path> {
    let q = |p: &Path| -> Result<String, NonUtf8Path> {
        p.to_str().map(toml_string).ok_or_else(|| NonUtf8Path {
            path: p.to_path_buf(),
        })
    };
    Ok(format!(
        r#"version = 2
root = {root}
state = {state}
disabled_plugins = [
  "io.containerd.grpc.v1.cri",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
]

[grpc]
  address = {socket}

[ttrpc]
  address = {ttrpc}

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = {opt}
"#,
        root = q(dirs.root)?,
        state = q(dirs.state)?,
        socket = q(dirs.socket)?,
        ttrpc = q(dirs.ttrpc)?,
        opt = q(dirs.opt)?,
    ))
}

/// A TOML basic string holding `s`.
pub fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_in(data: &str, run: &str) -> Result<String, NonUtf8Path> {
        let (data, run) = (Path::new(data), Path::new(run));
        config_toml(&Dirs {
            root: &data.join("root"),
            state: &run.join("state"),
            socket: &run.join("containerd.sock"),
            ttrpc: &run.join("containerd.sock.ttrpc"),
            opt: &data.join("opt"),
        })
    }

    #[test]
    fn config_names_the_paths_and_disables_cri() {
        let text =
            config_in("/var/lib/holdfast/containerd", "/run/holdfast/containerd").expect("config");
        for needle in [
            "root = \"/var/lib/holdfast/containerd/root\"",
            "state = \"/run/holdfast/containerd/state\"",
            "address = \"/run/holdfast/containerd/containerd.sock\"",
            "address = \"/run/holdfast/containerd/containerd.sock.ttrpc\"",
            "path = \"/var/lib/holdfast/containerd/opt\"",
            "\"io.containerd.grpc.v1.cri\"",
        ] {
            assert!(text.contains(needle), "{needle} missing from:\n{text}");
        }

        // And it is TOML with the structure containerd reads.
        let v: toml::Value = toml::from_str(&text).expect("config parses as TOML");
        assert_eq!(v["version"].as_integer(), Some(2));
        assert_eq!(
            v["root"].as_str(),
            Some("/var/lib/holdfast/containerd/root")
        );
        assert_eq!(v["state"].as_str(), Some("/run/holdfast/containerd/state"));
        assert_eq!(
            v["grpc"]["address"].as_str(),
            Some("/run/holdfast/containerd/containerd.sock")
        );
        assert_eq!(
            v["ttrpc"]["address"].as_str(),
            Some("/run/holdfast/containerd/containerd.sock.ttrpc")
        );
        assert_eq!(v["debug"]["address"].as_str(), Some(""));
        assert_eq!(v["metrics"]["address"].as_str(), Some(""));
        assert_eq!(
            v["plugins"]["io.containerd.internal.v1.opt"]["path"].as_str(),
            Some("/var/lib/holdfast/containerd/opt")
        );
        let disabled: Vec<&str> = v["disabled_plugins"]
            .as_array()
            .expect("disabled_plugins is an array")
            .iter()
            .filter_map(|p| p.as_str())
            .collect();
        for plugin in [
            "io.containerd.grpc.v1.cri",
            "io.containerd.snapshotter.v1.aufs",
            "io.containerd.snapshotter.v1.btrfs",
            "io.containerd.snapshotter.v1.devmapper",
            "io.containerd.snapshotter.v1.zfs",
            "io.containerd.tracing.processor.v1.otlp",
        ] {
            assert!(disabled.contains(&plugin), "{plugin} not disabled");
        }
        assert!(!disabled.contains(&"io.containerd.snapshotter.v1.overlayfs"));
    }

    #[test]
    fn config_quotes_awkward_paths() {
        let text = config_in("/tmp/a \"quoted\" dir\\x", "/tmp/run\tdir").expect("config");
        let v: toml::Value = toml::from_str(&text).expect("config parses as TOML");
        assert_eq!(v["root"].as_str(), Some("/tmp/a \"quoted\" dir\\x/root"));
        assert_eq!(v["state"].as_str(), Some("/tmp/run\tdir/state"));
        assert_eq!(toml_string("a\u{1}b"), "\"a\\u0001b\"");
    }

    #[test]
    fn config_refuses_non_utf8_paths() {
        use std::os::unix::ffi::OsStrExt as _;
        let data = std::ffi::OsStr::from_bytes(b"/tmp/\xff");
        let root = Path::new(data).join("root");
        let other = Path::new("/run/x");
        let refused = config_toml(&Dirs {
            root: &root,
            state: other,
            socket: other,
            ttrpc: other,
            opt: other,
        });
        assert!(matches!(refused, Err(NonUtf8Path { path }) if path == root));
    }
}
