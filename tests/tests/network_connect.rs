//! `docker network connect` and `disconnect` through the real CNI plugins,
//! driven by the docker CLI: a created container connected to a second
//! network reaches a peer there by name once started; a running one is
//! hot-connected (an `eth1` in its namespace) and disconnected; inspect
//! and `network inspect` show every network; holdfastd SIGKILLed after a
//! connect, or in the middle of a hot connect's setup (the firewall plugin
//! behind a gate, after the bridge plugin allocated the address), leaves
//! nothing behind once the container is removed; a container disconnected
//! from the network it was created on (a user network, the default bridge)
//! keeps running with loopback alone, through a holdfastd SIGKILL and a
//! restart, and is connected again; endpoint ids; and the refusals, with
//! dockerd's status codes. Each test has a holdfastd with a
//! bridge of its own (`BridgeDaemon`); its user networks go with it.

use holdfast_e2e::network::{
    BridgeDaemon, CNI_PLUGIN_DIR, cni_nat_rules, httpd, wait_reaches, wget_from,
};
use std::path::{Path, PathBuf};

/// Two user networks of the test's own subnets.
fn two_networks(net: &BridgeDaemon) -> (String, String) {
    let front = net.user_subnet();
    let back = net.user_subnet();
    net.d
        .ok(&["network", "create", "--subnet", &front, "front"]);
    net.d.ok(&["network", "create", "--subnet", &back, "back"]);
    (front, back)
}

fn run_httpd(net: &BridgeDaemon, name: &str, network: &str, body: &str) {
    net.d.ok(&[
        "run",
        "-d",
        "--name",
        name,
        "--network",
        network,
        "busybox",
        "sh",
        "-c",
        &httpd(body),
    ]);
}

fn address_on(net: &BridgeDaemon, container: &str, network: &str) -> String {
    net.d.inspect(container)["NetworkSettings"]["Networks"][network]["IPAddress"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The names `network inspect` lists on `network`.
fn listed_on(net: &BridgeDaemon, network: &str) -> Vec<String> {
    let out = net.d.ok(&[
        "network",
        "inspect",
        "-f",
        "{{range .Containers}}{{.Name}} {{end}}",
        network,
    ]);
    let mut names: Vec<String> = out.split_whitespace().map(str::to_owned).collect();
    names.sort();
    names
}

#[test]
fn a_created_container_connected_to_a_second_network_reaches_a_peer_there_once_started() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    let (front, back) = two_networks(&net);
    run_httpd(&net, "web", "back", "hello-back");
    d.ok(&[
        "create",
        "--name",
        "app",
        "--network",
        "front",
        "busybox",
        "sleep",
        "600",
    ]);
    d.ok(&["network", "connect", "--alias", "api2", "back", "app"]);
    // recorded, not made: nothing of it until the start
    let v = d.inspect("app");
    assert!(
        v["NetworkSettings"]["Networks"]["back"].is_object(),
        "{}",
        v["NetworkSettings"]
    );
    assert_eq!(address_on(&net, "app", "back"), "");
    // connecting again while it is not running changes nothing (dockerd)
    d.ok(&["network", "connect", "back", "app"]);

    d.ok(&["start", "app"]);
    wait_reaches(&net, "app", "http://web/", "hello-back");
    let on_front = address_on(&net, "app", "front");
    let on_back = address_on(&net, "app", "back");
    assert!(
        on_front.starts_with(front.trim_end_matches("0/24")),
        "{on_front}"
    );
    assert!(
        on_back.starts_with(back.trim_end_matches("0/24")),
        "{on_back}"
    );
    let ep = &d.inspect("app")["NetworkSettings"]["Networks"]["back"];
    assert_eq!(ep["Aliases"][0], "api2", "{ep}");
    assert_eq!(listed_on(&net, "back"), ["app", "web"]);
    assert_eq!(listed_on(&net, "front"), ["app"]);
    let listed = d.ok(&["ps", "--filter", "network=back", "--format", "{{.Names}}"]);
    let mut on_back_names: Vec<&str> = listed.lines().collect();
    on_back_names.sort_unstable();
    assert_eq!(on_back_names, ["app", "web"]);
    let networks = d.ok(&["ps", "--filter", "name=app", "--format", "{{.Networks}}"]);
    let mut networks: Vec<&str> = networks.trim().split(',').collect();
    networks.sort_unstable();
    assert_eq!(networks, ["back", "front"]);
    // the peer finds it by name and alias on the network they share
    let hosts = d.ok(&["exec", "web", "cat", "/etc/hosts"]);
    assert!(
        hosts
            .lines()
            .any(|l| l.starts_with(&format!("{on_back}\tapp api2 "))),
        "{hosts}"
    );
    // the network is in use by the endpoint
    let r = d.http("DELETE", "/networks/back", None);
    assert_eq!(r.status, 409, "{r:?}");

    // a stop releases the endpoint; the next start makes it again
    d.ok(&["stop", "-t", "1", "app"]);
    d.wait_until("the stopped container's endpoint is released", || {
        !net.d
            .exec_root()
            .join("net/attachments")
            .read_dir()
            .map(|mut e| {
                e.any(|e| {
                    e.map(|e| e.file_name().to_string_lossy().contains(".eth1."))
                        .unwrap_or(false)
                })
            })
            .unwrap_or(false)
    });
    d.ok(&["start", "app"]);
    wait_reaches(&net, "app", "http://web/", "hello-back");

    // a stopped container is disconnected at once; the next start has no eth1
    d.ok(&["stop", "-t", "1", "app"]);
    d.ok(&["network", "disconnect", "back", "app"]);
    assert!(
        d.inspect("app")["NetworkSettings"]["Networks"]["back"].is_null(),
        "still shown on back"
    );
    d.ok(&["start", "app"]);
    let links = d.ok(&["exec", "app", "ls", "/sys/class/net"]);
    assert!(!links.contains("eth1"), "{links}");
    d.ok(&["rm", "-f", "app", "web"]);
    d.ok(&["network", "rm", "front", "back"]);
}

#[test]
fn a_running_container_is_hot_connected_and_disconnected() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    let (_, back) = two_networks(&net);
    run_httpd(&net, "web", "back", "hello-hot");
    d.ok(&[
        "run",
        "-d",
        "--name",
        "app",
        "--network",
        "front",
        "busybox",
        "sleep",
        "600",
    ]);
    let pid = d.pid_of("app");
    let web_ip = address_on(&net, "web", "back");
    assert!(wget_from(&net, "app", "http://web/").is_none());

    d.ok(&["network", "connect", "back", "app"]);
    // made when answered: no waiting needed for the interface
    let links = d.ok(&["exec", "app", "ls", "/sys/class/net"]);
    assert!(links.contains("eth1"), "{links}");
    wait_reaches(&net, "app", "http://web/", "hello-hot");
    let on_back = address_on(&net, "app", "back");
    assert!(
        on_back.starts_with(back.trim_end_matches("0/24")),
        "{on_back}"
    );
    assert_eq!(listed_on(&net, "back"), ["app", "web"]);
    assert_eq!(d.pid_of("app"), pid, "a connect restarted the container");

    d.ok(&["network", "disconnect", "back", "app"]);
    let links = d.ok(&["exec", "app", "ls", "/sys/class/net"]);
    assert!(!links.contains("eth1"), "{links}");
    assert!(wget_from(&net, "app", "http://web/").is_none());
    assert!(wget_from(&net, "app", &format!("http://{web_ip}/")).is_none());
    assert_eq!(listed_on(&net, "back"), ["web"]);
    assert!(d.inspect("app")["NetworkSettings"]["Networks"]["back"].is_null());
    let hosts = d.ok(&["exec", "web", "cat", "/etc/hosts"]);
    assert!(!hosts.contains(&on_back), "{hosts}");
    assert_eq!(net.allocations().len(), 0, "the default network holds none");
    assert_eq!(d.pid_of("app"), pid);

    // again: the same slot is free for it
    d.ok(&["network", "connect", "back", "app"]);
    wait_reaches(&net, "app", "http://web/", "hello-hot");
    d.ok(&["rm", "-f", "app", "web"]);
    d.ok(&["network", "rm", "front", "back"]);
}

#[test]
fn connect_and_disconnect_are_refused_as_dockerd_refuses() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    two_networks(&net);
    d.ok(&[
        "run",
        "-d",
        "--name",
        "app",
        "--network",
        "front",
        "busybox",
        "sleep",
        "600",
    ]);
    d.ok(&["network", "connect", "back", "app"]);
    // twice while it runs: dockerd's 403
    let r = d.http(
        "POST",
        "/networks/back/connect",
        Some(br#"{"Container":"app"}"#),
    );
    assert_eq!(r.status, 403, "{r:?}");
    assert!(r.body.contains("already exists in network back"), "{r:?}");
    let r = d.http(
        "POST",
        "/networks/front/connect",
        Some(br#"{"Container":"app"}"#),
    );
    assert_eq!(r.status, 403, "{r:?}");
    d.fails_saying(
        "a disconnect from a network it is not on",
        &["network", "disconnect", "bridge", "app"],
        "is not connected to the network bridge",
    );
    let r = d.http(
        "POST",
        "/networks/bridge/disconnect",
        Some(br#"{"Container":"app"}"#),
    );
    assert_eq!(r.status, 409, "{r:?}");
    d.fails_saying(
        "a network that does not exist",
        &["network", "connect", "nope", "app"],
        "not found",
    );
    d.fails_saying(
        "a container that does not exist",
        &["network", "connect", "back", "nope"],
        "No such container",
    );
    d.fails_saying(
        "an address outside the subnet",
        &["network", "connect", "--ip", "192.0.2.9", "back", "app"],
        "does not belong",
    );
    // other network modes
    d.ok(&[
        "create",
        "--name",
        "on-host",
        "--network",
        "host",
        "busybox",
        "true",
    ]);
    d.ok(&[
        "create",
        "--name",
        "on-none",
        "--network",
        "none",
        "busybox",
        "true",
    ]);
    d.ok(&[
        "create",
        "--name",
        "shared",
        "--network",
        "container:app",
        "busybox",
        "true",
    ]);
    for (name, says) in [
        ("on-host", "connected to host network"),
        ("on-none", "private (none) mode"),
        ("shared", "sharing network namespace"),
    ] {
        let body = format!(r#"{{"Container":"{name}"}}"#);
        let r = d.http("POST", "/networks/back/connect", Some(body.as_bytes()));
        assert_eq!(r.status, 400, "{name}: {r:?}");
        assert!(r.body.contains(says), "{name}: {r:?}");
    }
    let r = d.http(
        "POST",
        "/networks/host/connect",
        Some(br#"{"Container":"app"}"#),
    );
    assert_eq!(r.status, 400, "{r:?}");
    // disconnects of other network modes: host is dockerd's 400; none and
    // a shared namespace are on no network of their own to leave
    let r = d.http(
        "POST",
        "/networks/host/disconnect",
        Some(br#"{"Container":"on-host"}"#),
    );
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.body.contains("host network"), "{r:?}");
    for (network, name) in [("none", "on-none"), ("front", "shared")] {
        let body = format!(r#"{{"Container":"{name}"}}"#);
        let r = d.http(
            "POST",
            &format!("/networks/{network}/disconnect"),
            Some(body.as_bytes()),
        );
        assert_eq!(r.status, 409, "{name}: {r:?}");
        assert!(r.body.contains("is not connected"), "{name}: {r:?}");
    }
    let r = d.http("POST", "/networks/back/connect", Some(b"{not json"));
    assert_eq!(r.status, 400, "{r:?}");
    d.ok(&["rm", "-f", "app", "on-host", "on-none", "shared"]);
    d.ok(&["network", "rm", "front", "back"]);
}

/// What the test's networks hold on the host: their IPAM stores, the nat
/// and filter rules naming their addresses, the daemon's files.
#[derive(Debug, PartialEq, Eq)]
struct Held {
    addresses: Vec<String>,
    rules: Vec<String>,
    files: Vec<String>,
}

fn held(net: &BridgeDaemon, subnets: &[&str]) -> Held {
    let ipam = net.d.exec_root().join("net/ipam");
    let mut addresses = Vec::new();
    for dir in ipam.read_dir().into_iter().flatten().flatten() {
        for f in dir.path().read_dir().into_iter().flatten().flatten() {
            let n = f.file_name().to_string_lossy().into_owned();
            if n != "lock" && !n.starts_with("last_reserved_ip") {
                addresses.push(format!("{}/{n}", dir.file_name().to_string_lossy()));
            }
        }
    }
    addresses.sort();
    let prefixes: Vec<&str> = subnets.iter().map(|s| s.trim_end_matches("0/24")).collect();
    let filter = std::process::Command::new("iptables-save")
        .args(["-t", "filter"])
        .output()
        .expect("run iptables-save");
    let mut rules: Vec<String> = String::from_utf8_lossy(&filter.stdout)
        .lines()
        .map(str::to_owned)
        .chain(cni_nat_rules())
        .filter(|l| prefixes.iter().any(|p| l.contains(p)))
        .collect();
    rules.sort();
    Held {
        addresses,
        rules,
        files: net.held_files(),
    }
}

#[test]
fn holdfastd_killed_after_a_connect_leaks_nothing_once_removed() {
    let mut net = BridgeDaemon::start();
    let (front, back) = two_networks(&net);
    let subnets = [front.as_str(), back.as_str()];
    let baseline = held(&net, &subnets);
    run_httpd(&net, "web", "back", "hello-kept");
    let with_web = held(&net, &subnets);
    let d = &net.d;
    d.ok(&[
        "run",
        "-d",
        "--name",
        "app",
        "--network",
        "front",
        "busybox",
        "sleep",
        "600",
    ]);
    d.ok(&[
        "create",
        "--name",
        "later",
        "--network",
        "front",
        "busybox",
        "sleep",
        "600",
    ]);
    d.ok(&["network", "connect", "back", "app"]);
    d.ok(&["network", "connect", "back", "later"]);
    let pid = d.pid_of("app");
    net.d.sigkill();
    net.d.restart();
    let d = &net.d;
    // the attachment was kept, and the container with it
    assert_eq!(d.pid_of("app"), pid);
    wait_reaches(&net, "app", "http://web/", "hello-kept");
    d.ok(&["start", "later"]);
    wait_reaches(&net, "later", "http://web/", "hello-kept");
    assert_eq!(listed_on(&net, "back"), ["app", "later", "web"]);
    d.ok(&["rm", "-f", "app", "later"]);
    d.wait_until("app's and later's allocations are released", || {
        held(&net, &subnets) == with_web
    });
    d.ok(&["rm", "-f", "web"]);
    d.wait_until("everything is released", || {
        held(&net, &subnets) == baseline
    });
    assert_eq!(held(&net, &subnets), baseline);
    d.ok(&["network", "rm", "front", "back"]);
}

/// A plugin directory with the real plugins, the firewall's ADD of an
/// endpoint (`eth1`) behind a gate: with `<dir>/gate` present it touches
/// `mark`, waits for `go`, runs the real firewall and touches `done`.
fn gated_plugins(dir: &Path) -> PathBuf {
    let plugins = dir.join("cni");
    std::fs::create_dir_all(&plugins).expect("plugin dir");
    for p in ["loopback", "bridge", "host-local", "portmap"] {
        std::os::unix::fs::symlink(Path::new(CNI_PLUGIN_DIR).join(p), plugins.join(p))
            .expect("link a plugin");
    }
    let g = dir.display();
    let script = format!(
        "#!/bin/sh\n\
         if [ \"$CNI_COMMAND\" = ADD ] && [ \"$CNI_IFNAME\" = eth1 ] && [ -e {g}/gate ]; then\n\
           touch {g}/mark\n\
           while [ ! -e {g}/go ]; do sleep 0.02; done\n\
           {real}/firewall; rc=$?\n\
           touch {g}/done\n\
           exit $rc\n\
         fi\n\
         exec {real}/firewall\n",
        real = CNI_PLUGIN_DIR
    );
    let wrapper = plugins.join("firewall");
    std::fs::write(&wrapper, script).expect("write the wrapper");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
        .expect("chmod the wrapper");
    plugins
}

#[test]
fn holdfastd_killed_in_the_middle_of_a_hot_connect_leaks_nothing() {
    let gate_dir = tempfile::Builder::new()
        .prefix("hf-gate-")
        .tempdir()
        .expect("gate dir");
    let g = gate_dir.path();
    let plugins = gated_plugins(g).to_string_lossy().into_owned();
    let mut net = BridgeDaemon::start_with(&["--cni-plugin-dir", &plugins]);
    let (front, back) = two_networks(&net);
    let subnets = [front.as_str(), back.as_str()];
    let baseline = held(&net, &subnets);
    run_httpd(&net, "web", "back", "hello-doubt");
    net.d.ok(&[
        "run",
        "-d",
        "--name",
        "app",
        "--network",
        "front",
        "busybox",
        "sleep",
        "600",
    ]);
    let pid = net.d.pid_of("app");
    std::fs::write(g.join("gate"), "").expect("close the gate");
    let connect = net.d.spawn_docker(&["network", "connect", "back", "app"]);
    net.d.wait_until("the endpoint's address is allocated", || {
        g.join("mark").exists()
    });
    net.d.sigkill();
    // The plugin the dead daemon started finishes its work.
    std::fs::write(g.join("go"), "").expect("open the gate");
    net.d
        .wait_until("the gated firewall finished", || g.join("done").exists());
    std::fs::remove_file(g.join("gate")).expect("remove the gate");
    drop(connect);
    net.d.restart();
    let d = &net.d;
    // The connect was recorded: the endpoint in doubt is released and made
    // again, in the same running container.
    wait_reaches(&net, "app", "http://web/", "hello-doubt");
    assert_eq!(d.pid_of("app"), pid);
    let on_back: Vec<String> = held(&net, &subnets)
        .addresses
        .into_iter()
        .filter(|a| !a.starts_with(&net.bridge))
        .collect();
    assert_eq!(on_back.len(), 3, "web, app's front and back: {on_back:?}");
    d.ok(&["rm", "-f", "app", "web"]);
    d.wait_until("everything is released", || {
        held(&net, &subnets) == baseline
    });
    d.ok(&["network", "rm", "front", "back"]);
}

/// The interfaces in `container`'s namespace.
fn links_of(net: &BridgeDaemon, container: &str) -> Vec<String> {
    let out = net.d.ok(&["exec", container, "ls", "/sys/class/net"]);
    let mut links: Vec<String> = out.split_whitespace().map(str::to_owned).collect();
    links.sort();
    links
}

fn networks_of(net: &BridgeDaemon, container: &str) -> Vec<String> {
    let v = net.d.inspect(container);
    let mut names: Vec<String> = v["NetworkSettings"]["Networks"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    names.sort();
    names
}

fn is_endpoint_id(v: &serde_json::Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit()))
}

#[test]
fn a_container_disconnected_from_its_own_user_network_runs_on_loopback_and_connects_again() {
    let mut net = BridgeDaemon::start();
    let (front, back) = two_networks(&net);
    let subnets = [front.as_str(), back.as_str()];
    let baseline = held(&net, &subnets);
    run_httpd(&net, "web", "front", "hello-own");
    let d = &net.d;
    d.ok(&[
        "run",
        "-d",
        "--name",
        "app",
        "--network",
        "front",
        "busybox",
        "sleep",
        "600",
    ]);
    let pid = d.pid_of("app");
    wait_reaches(&net, "app", "http://web/", "hello-own");
    let on_front = address_on(&net, "app", "front");
    // an endpoint id, the same in both views, kept while attached
    let ep = d.inspect("app")["NetworkSettings"]["Networks"]["front"]["EndpointID"].clone();
    assert!(is_endpoint_id(&ep), "{ep}");
    let listed = d.ok(&[
        "network",
        "inspect",
        "-f",
        "{{range .Containers}}{{.Name}}={{.EndpointID}} {{end}}",
        "front",
    ]);
    assert!(
        listed.contains(&format!("app={}", ep.as_str().unwrap_or_default())),
        "{listed}"
    );
    let web_ep = d.inspect("web")["NetworkSettings"]["Networks"]["front"]["EndpointID"].clone();
    assert!(is_endpoint_id(&web_ep) && web_ep != ep, "{web_ep} {ep}");

    d.ok(&["network", "disconnect", "front", "app"]);
    assert_eq!(links_of(&net, "app"), ["lo"]);
    assert_eq!(d.pid_of("app"), pid, "a disconnect restarted the container");
    assert!(
        networks_of(&net, "app").is_empty(),
        "{:?}",
        networks_of(&net, "app")
    );
    assert_eq!(listed_on(&net, "front"), ["web"]);
    let hosts = d.ok(&["exec", "web", "cat", "/etc/hosts"]);
    assert!(!hosts.contains(&on_front), "{hosts}");
    let own_hosts = d.ok(&["exec", "app", "cat", "/etc/hosts"]);
    assert!(!own_hosts.contains(&on_front), "{own_hosts}");
    assert!(wget_from(&net, "app", "http://web/").is_none());
    let ps = d.ok(&["ps", "--filter", "network=front", "--format", "{{.Names}}"]);
    assert_eq!(ps.trim(), "web");
    d.fails_saying(
        "a second disconnect",
        &["network", "disconnect", "front", "app"],
        "is not connected to the network front",
    );

    // connected again while it runs: an eth0 again, peers by name
    d.ok(&["network", "connect", "front", "app"]);
    assert_eq!(links_of(&net, "app"), ["eth0", "lo"]);
    wait_reaches(&net, "app", "http://web/", "hello-own");
    let again = d.inspect("app")["NetworkSettings"]["Networks"]["front"]["EndpointID"].clone();
    assert!(
        is_endpoint_id(&again) && again != ep,
        "a new endpoint: {again}"
    );
    assert_eq!(listed_on(&net, "front"), ["app", "web"]);

    // disconnected, kept through a holdfastd SIGKILL, started on loopback alone
    d.ok(&["network", "disconnect", "front", "app"]);
    net.d.sigkill();
    net.d.restart();
    let d = &net.d;
    assert_eq!(d.pid_of("app"), pid);
    // an endpoint's id is kept on disk with its attachment: the same after the crash
    assert_eq!(
        d.inspect("web")["NetworkSettings"]["Networks"]["front"]["EndpointID"],
        web_ep
    );
    assert!(networks_of(&net, "app").is_empty());
    assert_eq!(links_of(&net, "app"), ["lo"]);
    d.ok(&["stop", "-t", "1", "app"]);
    d.ok(&["start", "app"]);
    assert_eq!(links_of(&net, "app"), ["lo"]);
    assert!(networks_of(&net, "app").is_empty());
    // a network connected now is its eth0
    run_httpd(&net, "db", "back", "hello-back");
    d.ok(&["network", "connect", "back", "app"]);
    assert_eq!(links_of(&net, "app"), ["eth0", "lo"]);
    wait_reaches(&net, "app", "http://db/", "hello-back");
    assert_eq!(networks_of(&net, "app"), ["back"]);
    // stopped and disconnected from it, connected back to its own before a start
    d.ok(&["stop", "-t", "1", "app"]);
    d.ok(&["network", "disconnect", "back", "app"]);
    d.ok(&["network", "connect", "front", "app"]);
    d.ok(&["start", "app"]);
    assert_eq!(links_of(&net, "app"), ["eth0", "lo"]);
    wait_reaches(&net, "app", "http://web/", "hello-own");
    assert_eq!(networks_of(&net, "app"), ["front"]);

    d.ok(&["rm", "-f", "app", "web", "db"]);
    d.wait_until("everything is released", || {
        held(&net, &subnets) == baseline
    });
    d.ok(&["network", "rm", "front", "back"]);
}

#[test]
fn a_container_disconnected_from_the_default_bridge_loses_its_published_port() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    let subnets = [net.subnet.as_str()];
    let baseline = held(&net, &subnets);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let published = format!("127.0.0.1:{port}:80");
    d.ok(&[
        "run",
        "-d",
        "--name",
        "web",
        "-p",
        &published,
        "busybox",
        "sh",
        "-c",
        &httpd("hello-bridge"),
    ]);
    let url = format!("http://127.0.0.1:{port}/");
    let get = |url: &str| {
        let out = std::process::Command::new("curl")
            .args(["-sf", "--max-time", "3", url])
            .output()
            .expect("run curl");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    d.wait_until("the published port serves", || {
        get(&url).as_deref() == Some("hello-bridge")
    });
    let ip = address_on(&net, "web", "bridge");
    assert!(!ip.is_empty());
    let pid = d.pid_of("web");

    d.ok(&["network", "disconnect", "bridge", "web"]);
    assert_eq!(links_of(&net, "web"), ["lo"]);
    assert_eq!(d.pid_of("web"), pid);
    assert!(get(&url).is_none(), "the port is still published");
    assert!(get(&format!("http://{ip}/")).is_none());
    assert_eq!(net.allocations().len(), 0, "{:?}", net.allocations());
    let v = d.inspect("web");
    assert_eq!(
        v["NetworkSettings"]["IPAddress"], "",
        "{}",
        v["NetworkSettings"]
    );
    assert!(v["NetworkSettings"]["Networks"]["bridge"].is_null());
    assert_eq!(d.ok(&["port", "web"]).trim(), "");
    let on_port = cni_nat_rules()
        .into_iter()
        .filter(|r| r.contains(&format!("--dport {port}")))
        .collect::<Vec<_>>();
    assert!(on_port.is_empty(), "{on_port:?}");

    // connected again: an address on the bridge, reached from the host
    d.ok(&["network", "connect", "bridge", "web"]);
    assert_eq!(links_of(&net, "web"), ["eth0", "lo"]);
    let ip = address_on(&net, "web", "bridge");
    d.wait_until("the reconnected container serves on its address", || {
        get(&format!("http://{ip}/")).as_deref() == Some("hello-bridge")
    });
    d.ok(&["rm", "-f", "web"]);
    d.wait_until("everything is released", || {
        held(&net, &subnets) == baseline
    });
}
