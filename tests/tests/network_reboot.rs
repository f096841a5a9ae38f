//! A reboot under running bridge containers: every process of the daemon
//! SIGKILLed (holdfastd, containerd, the shims, the containers), every
//! mount gone, the exec root emptied (a tmpfs under `/run` on a real
//! host), the bridges and the rules the plugins made for the containers
//! gone (a user network's too); the data root stays. holdfastd starts
//! again on what is left: the containers are shown exited with their
//! records whole, nothing of their old attachments is held, a `--restart
//! always` one runs again by itself, the others start again with their
//! published ports (and are found by name on the user network), and once
//! removed the host is exactly as before they were made.
//!
//! One test, alone on the nat table (see `network_leaks.rs`).

use holdfast_e2e::network::{
    BridgeDaemon, free_port, held, host_rules, http_get, httpd, wait_reaches,
};

#[test]
fn after_a_reboot_containers_start_again_and_leave_nothing_behind() {
    let mut net = BridgeDaemon::start();
    // The plugins' shared chains (made once, kept by every user of the
    // plugins) exist before the baseline, as on a host that ran one.
    net.d.ok(&[
        "run", "-d", "--name", "warm", "-p", "80", "busybox", "sleep", "300",
    ]);
    net.d.ok(&["rm", "-f", "warm"]);
    let subnet = net.user_subnet();
    net.d.ok(&["network", "create", "--subnet", &subnet, "app"]);
    let bridge = holdfast_e2e::network::bridge_of(&net.d, "app");
    let app_ipam = net.d.exec_root().join("net/ipam").join(&bridge);
    let baseline = held(&net);
    let rules_before = host_rules(&net, &[(bridge.clone(), subnet.clone())]);

    let port = free_port();
    let mapping = format!("{port}:80");
    net.d.ok(&[
        "run",
        "-d",
        "--name",
        "web",
        "-p",
        &mapping,
        "busybox",
        "sh",
        "-c",
        &httpd("served"),
    ]);
    net.d.ok(&[
        "run", "-d", "--name", "quiet", "-p", "53/udp", "busybox", "sleep", "600",
    ]);
    net.d.ok(&[
        "run",
        "-d",
        "--name",
        "always",
        "--restart",
        "always",
        "-p",
        "80",
        "busybox",
        "sleep",
        "600",
    ]);
    // On the user network: a server and a client that finds it by name.
    net.d.ok(&[
        "run",
        "-d",
        "--name",
        "onapp",
        "--network",
        "app",
        "busybox",
        "sh",
        "-c",
        &httpd("on-app"),
    ]);
    net.d.ok(&[
        "run",
        "-d",
        "--name",
        "client",
        "--network",
        "app",
        "busybox",
        "sleep",
        "600",
    ]);
    wait_reaches(&net, "client", "http://onapp/", "on-app");
    let url = format!("http://127.0.0.1:{port}/");
    net.d
        .wait_until("web serves through its published port", || {
            http_get(&url).is_some_and(|b| b.trim() == "served")
        });
    assert_eq!(net.allocations().len(), 3, "{:?}", net.allocations());

    net.reboot(&rules_before);
    assert!(
        !std::path::Path::new("/sys/class/net")
            .join(&net.bridge)
            .exists(),
        "the reboot took the bridge"
    );
    net.d.restart();

    for name in ["web", "quiet", "onapp", "client"] {
        net.d.wait_until(&format!("{name} is shown exited"), || {
            let state = net.d.state(name);
            state["Status"] == "exited" && state["Running"] == false
        });
    }
    // The exit the reboot brought is the evidence a policy acts on: the
    // `--restart always` one runs again, attached anew, by itself.
    net.d
        .wait_until("the --restart always container runs again", || {
            net.d.state("always")["Running"] == true
        });
    assert_eq!(net.d.inspect("always")["RestartCount"], 1);
    assert_eq!(net.allocations().len(), 1, "{:?}", net.allocations());

    // Started again: a new attachment, the same published port.
    net.d.ok(&["start", "web", "quiet", "onapp", "client"]);
    wait_reaches(&net, "client", "http://onapp/", "on-app");
    net.d.wait_until("web serves again after the reboot", || {
        http_get(&url).is_some_and(|b| b.trim() == "served")
    });
    assert_eq!(net.allocations().len(), 3, "{:?}", net.allocations());
    assert_eq!(
        net.d.ok(&["port", "web"]).trim(),
        format!("80/tcp -> 0.0.0.0:{port}")
    );

    net.d
        .ok(&["rm", "-f", "web", "quiet", "always", "onapp", "client"]);
    assert_eq!(
        held(&net),
        baseline,
        "after the reboot and the removal\n{}",
        net.d.diagnostics()
    );
    assert!(http_get(&url).is_none(), "still served after rm");
    let left: Vec<_> = std::fs::read_dir(&app_ipam)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "lock" && !n.starts_with("last_reserved_ip"))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "addresses left on app");
    net.d.ok(&["network", "rm", "app"]);
    assert!(
        !std::path::Path::new("/sys/class/net")
            .join(&bridge)
            .exists(),
        "the bridge {bridge} is left"
    );
    assert_eq!(
        host_rules(&net, &[(bridge.clone(), subnet.clone())]).filter,
        rules_before.filter,
        "filter rules of the bridges after rm and network rm"
    );
}
