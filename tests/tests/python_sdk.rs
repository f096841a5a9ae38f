//! The Python Docker SDK against holdfastd: `pip install docker` into a
//! private venv, then tests/python/sdk_smoke.py. A failed install fails the
//! test (never a skip).

use holdfast_e2e::{Daemon, run_with_timeout};
use holdfast_testkit::BusyboxImage;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const PIP_BOUND: Duration = Duration::from_secs(600);
const SCRIPT_BOUND: Duration = Duration::from_secs(300);

/// A venv with the docker SDK; its python.
fn venv_with_docker_sdk(dir: &Path) -> std::path::PathBuf {
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
        Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "docker",
        ]),
        PIP_BOUND,
    );
    assert!(
        out.success(),
        "pip install docker failed ({}, after {:?}):\n--- stdout\n{}\n--- stderr\n{}",
        out.code(),
        out.elapsed,
        out.stdout,
        out.stderr
    );
    python
}

#[test]
fn the_python_docker_sdk_drives_the_lifecycle() {
    let tools = tempfile::Builder::new()
        .prefix("hf-e2e-py-")
        .tempdir()
        .expect("a temporary directory");
    let python = venv_with_docker_sdk(tools.path());
    let image = BusyboxImage::build(&tools.path().join("images"), "sdkimg:1", None);

    let d = Daemon::start();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/sdk_smoke.py");
    let out = run_with_timeout(
        Command::new(&python)
            .arg(&script)
            .arg(d.host())
            .arg(&image.docker_archive)
            .arg("sdkimg:1")
            .env("PYTHONUNBUFFERED", "1"),
        SCRIPT_BOUND,
    );
    assert!(
        out.success(),
        "sdk_smoke.py failed (exit {}, after {:?}):\n--- stdout\n{}\n--- stderr\n{}\n{}",
        out.code(),
        out.elapsed,
        out.stdout,
        out.stderr,
        d.diagnostics()
    );
    assert!(out.stdout.contains("sdk smoke: all ok"), "{}", out.stdout);
}
