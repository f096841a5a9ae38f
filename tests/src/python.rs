//! A private Python venv with the packages a suite drives holdfastd with
//! (the Docker SDK, Kubernetes' client): made by the test itself, never
//! skipped; a failed install fails the test with pip's words.

use crate::run_with_timeout;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long making the venv and installing into it may take.
pub const PIP_BOUND: Duration = Duration::from_secs(600);

/// A venv under `dir` with `packages` installed; its python.
pub fn venv_with(dir: &Path, packages: &[&str]) -> PathBuf {
    let venv = dir.join("venv");
    let out = run_with_timeout(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        PIP_BOUND,
    );
    assert!(
        out.success(),
        "python3 -m venv failed ({}):\n{}\n{}",
        out.code(),
        out.stdout,
        out.stderr
    );
    let python = venv.join("bin/python");
    let out = run_with_timeout(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
            ])
            .args(packages),
        PIP_BOUND,
    );
    assert!(
        out.success(),
        "pip install {packages:?} failed ({}, after {:?}):\n--- stdout\n{}\n--- stderr\n{}",
        out.code(),
        out.elapsed,
        out.stdout,
        out.stderr
    );
    python
}
