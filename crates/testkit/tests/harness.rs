//! The harness itself: containerd starts, survives a SIGKILL + restart on the
//! same directories, and leaves nothing behind.

use holdfast_testkit::Containerd;

#[test]
fn containerd_starts_restarts_and_cleans_up() {
    let mut ctrd = Containerd::start();
    let first = ctrd.pid().expect("running");
    assert!(ctrd.socket().exists(), "socket exists once booted");
    ctrd.kill();
    assert_eq!(ctrd.pid(), None);
    ctrd.restart();
    let second = ctrd.pid().expect("running again");
    assert_ne!(first, second);
    let dir = ctrd.dir().to_path_buf();
    drop(ctrd);
    assert!(!dir.exists(), "temporary directory removed on drop");
    assert!(
        !std::path::Path::new(&format!("/proc/{second}")).exists()
            || std::fs::read_to_string(format!("/proc/{second}/stat"))
                .is_ok_and(|s| s.contains(" Z ")),
        "containerd killed on drop"
    );
}
