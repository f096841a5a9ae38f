//! Stamps the build for `/version` (`GitCommit`, `BuildTime`), as dockerd's
//! build stamps its own: the commit the source was checked out at (blank
//! outside a git checkout: unknown, not made up) and when it was built
//! (`SOURCE_DATE_EPOCH` when set, for reproducible builds).

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let dir = Path::new(&dir);
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let commit = git(dir, &["rev-parse", "--short=7", "HEAD"]).unwrap_or_default();
    // Stamped again when HEAD moves (a missing file would restamp every
    // build, so only those that exist are watched).
    if let Some(git_dir) = git(dir, &["rev-parse", "--absolute-git-dir"]) {
        let git_dir = Path::new(&git_dir);
        let mut watched = vec![git_dir.join("HEAD"), git_dir.join("packed-refs")];
        if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
            watched.push(git_dir.join(branch));
        }
        for file in watched.iter().filter(|f| f.exists()) {
            println!("cargo:rerun-if-changed={}", file.display());
        }
    }
    let seconds = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0))
        });
    println!("cargo:rustc-env=HOLDFAST_GIT_COMMIT={commit}");
    println!(
        "cargo:rustc-env=HOLDFAST_BUILD_TIME={}",
        holdfast_rfc3339::format(seconds, 0)
    );
}
