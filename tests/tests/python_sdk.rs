//! The Python Docker SDK against holdfastd: `pip install docker` into a
//! private venv, then tests/python/sdk_smoke.py. A failed install fails the
//! test (never a skip).

use holdfast_e2e::python::venv_with;
use holdfast_e2e::registry::{
    PlatformImage, Registry, busybox_layer, host_arch, layer_of, write_layout,
};
use holdfast_e2e::{Daemon, run_with_timeout};
use holdfast_testkit::busybox_image;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const SCRIPT_BOUND: Duration = Duration::from_secs(300);

#[test]
fn the_python_docker_sdk_drives_the_lifecycle() {
    let tools = tempfile::Builder::new()
        .prefix("hf-e2e-py-")
        .tempdir()
        .expect("a temporary directory");
    let python = venv_with(tools.path(), &["docker"]);
    let image = busybox_image(&tools.path().join("images"), "sdkimg:1", None);

    let d = Daemon::start();
    // An image in a registry on loopback, for images.pull.
    let dir = d.root().join("registry");
    let registry = Registry::start(&dir, None);
    let app = PlatformImage {
        arch: host_arch().to_owned(),
        layers: vec![
            busybox_layer(&image.docker_archive),
            layer_of(&[("etc/pulled.txt", b"pulled\n")]),
        ],
    };
    write_layout(&dir.join("app"), "app", std::slice::from_ref(&app));
    registry.push(&dir.join("app"), "app", "app:1", None);
    let registry_ref = format!("{}/app:1", registry.address());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/sdk_smoke.py");
    let out = run_with_timeout(
        Command::new(&python)
            .arg(&script)
            .arg(d.host())
            .arg(&image.docker_archive)
            .arg("sdkimg:1")
            .arg(&registry_ref)
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
