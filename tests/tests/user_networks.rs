//! User-defined networks through the real CNI plugins, driven by the docker
//! CLI: `network create|ls|inspect|rm|prune`, containers on one network
//! finding each other by name and alias (hosts entries kept current as
//! peers come and go), `--network container:<name>`, `--ip`, and what is
//! refused. Each test has a holdfastd with a bridge of its own
//! (`BridgeDaemon`); its user networks are removed with it.

use holdfast_e2e::network::{BridgeDaemon, httpd, wait_reaches, wget_from};
use std::path::Path;

fn hosts_of(net: &BridgeDaemon, container: &str) -> String {
    net.d.ok(&["exec", container, "cat", "/etc/hosts"])
}

#[test]
fn containers_on_a_user_network_reach_each_other_by_name_and_alias() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    let subnet = net.user_subnet();
    let gateway = subnet.replace("0/24", "1");
    let id = d.ok(&[
        "network",
        "create",
        "--subnet",
        &subnet,
        "--gateway",
        &gateway,
        "--label",
        "k=v",
        "app",
    ]);
    let id = id.trim();
    assert_eq!(id.len(), 64, "{id}");
    let ls = d.ok(&["network", "ls", "--format", "{{.Name}} {{.Driver}}"]);
    for line in ["app bridge", "bridge bridge", "host host", "none null"] {
        assert!(ls.lines().any(|l| l == line), "{line}: {ls}");
    }
    let listed = d.ok(&["network", "ls", "-q", "--filter", "label=k=v"]);
    assert_eq!(listed.trim(), &id[..12]);
    d.fails_saying(
        "a second network of the same name",
        &["network", "create", "app"],
        "already exists",
    );
    d.fails_saying(
        "an overlapping subnet",
        &["network", "create", "--subnet", &subnet, "app2"],
        "overlaps",
    );

    d.ok(&[
        "run",
        "-d",
        "--name",
        "alpha",
        "--network",
        "app",
        "--network-alias",
        "web",
        "busybox",
        "sh",
        "-c",
        &httpd("hello-a"),
    ]);
    d.ok(&[
        "run",
        "-d",
        "--name",
        "beta",
        "--network",
        "app",
        "busybox",
        "sleep",
        "600",
    ]);
    // by container name and by alias, from a container started later
    wait_reaches(&net, "beta", "http://alpha/", "hello-a");
    wait_reaches(&net, "beta", "http://web/", "hello-a");
    // the one started first learned of the later one
    let b_ip = d.inspect("beta")["NetworkSettings"]["Networks"]["app"]["IPAddress"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(b_ip.starts_with(subnet.trim_end_matches("0/24")), "{b_ip}");
    let hosts = hosts_of(&net, "alpha");
    assert!(
        hosts
            .lines()
            .any(|l| l.starts_with(&format!("{b_ip}\tbeta "))),
        "{hosts}"
    );

    let v = d.inspect("alpha");
    assert_eq!(v["HostConfig"]["NetworkMode"], "app", "{v}");
    let ep = &v["NetworkSettings"]["Networks"]["app"];
    assert_eq!(ep["NetworkID"], id, "{v}");
    assert_eq!(ep["Gateway"], gateway.as_str(), "{v}");
    assert_eq!(ep["Aliases"][0], "web", "{v}");
    let inspected = d.ok(&[
        "network",
        "inspect",
        "-f",
        "{{range .IPAM.Config}}{{.Subnet}} {{.Gateway}}{{end}} {{len .Containers}}",
        "app",
    ]);
    assert_eq!(inspected.trim(), format!("{subnet} {gateway} 2"));

    let on_app = d.ok(&["ps", "--filter", "network=app", "--format", "{{.Names}}"]);
    let mut on_app: Vec<&str> = on_app.lines().collect();
    on_app.sort_unstable();
    assert_eq!(on_app, ["alpha", "beta"]);

    // in use: refused, nothing removed
    let out = d.fails_saying(
        "rm of a network in use",
        &["network", "rm", "app"],
        "has active endpoints",
    );
    assert!(!out.stderr.is_empty());
    let refused = d.http("DELETE", "/networks/app", None);
    assert_eq!(refused.status, 409, "{refused:?}");
    for name in ["bridge", "host", "none"] {
        let r = d.http("DELETE", &format!("/networks/{name}"), None);
        assert_eq!(r.status, 403, "{name}: {r:?}");
    }

    // a peer that goes is forgotten by the others
    d.ok(&["rm", "-f", "beta"]);
    d.wait_until("beta's line leaves alpha's hosts file", || {
        !hosts_of(&net, "alpha").contains(&b_ip)
    });

    // a network survives a holdfastd restart, and is used after it
    let mut net = net;
    net.d.sigkill();
    net.d.restart();
    let d = &net.d;
    d.ok(&[
        "run",
        "-d",
        "--name",
        "gamma",
        "--network",
        "app",
        "busybox",
        "sleep",
        "600",
    ]);
    wait_reaches(&net, "gamma", "http://web/", "hello-a");
    // a rename is what peers know it by from then on
    d.ok(&["rename", "gamma", "delta"]);
    let hosts = hosts_of(&net, "alpha");
    assert!(
        hosts.lines().any(|l| l.contains("\tdelta ")) && !hosts.contains("gamma"),
        "{hosts}"
    );

    let bridge = holdfast_e2e::network::bridge_of(d, "app");
    let bridge = bridge.trim();
    assert!(Path::new("/sys/class/net").join(bridge).exists());
    d.ok(&["rm", "-f", "alpha", "delta"]);
    d.ok(&["network", "rm", "app"]);
    assert!(
        !Path::new("/sys/class/net").join(bridge).exists(),
        "the bridge {bridge} is left"
    );
    assert!(
        !d.exec_root().join("net/ipam").join(bridge).exists(),
        "its IPAM store is left"
    );
    d.fails_saying(
        "inspect after rm",
        &["network", "inspect", "app"],
        "not found",
    );
}

#[test]
fn a_container_shares_another_containers_network_namespace() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    let subnet = net.user_subnet();
    d.ok(&["network", "create", "--subnet", &subnet, "pod"]);
    d.ok(&[
        "run",
        "-d",
        "--name",
        "web",
        "--network",
        "pod",
        "busybox",
        "sh",
        "-c",
        &httpd("hello-pod"),
    ]);
    d.ok(&[
        "run",
        "-d",
        "--name",
        "side",
        "--network",
        "container:web",
        "busybox",
        "sleep",
        "600",
    ]);
    // the same namespace: httpd on localhost
    wait_reaches(&net, "side", "http://127.0.0.1:80/", "hello-pod");
    let web_id = d.inspect("web")["Id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let v = d.inspect("side");
    assert_eq!(
        v["HostConfig"]["NetworkMode"],
        format!("container:{web_id}"),
        "{v}"
    );
    let networks = d.ok(&["ps", "--filter", "name=side", "--format", "{{.Networks}}"]);
    assert_eq!(networks.trim(), "", "no network of its own");
    // its files are web's
    assert_eq!(hosts_of(&net, "side"), hosts_of(&net, "web"));
    d.fails_saying(
        "a stopped donor",
        &[
            "run",
            "--rm",
            "--network",
            "container:nope",
            "busybox",
            "true",
        ],
        "no such container",
    );
    d.ok(&["run", "-d", "--name", "idle", "busybox", "sleep", "600"]);
    d.ok(&["stop", "-t", "0", "idle"]);
    d.fails_saying(
        "a stopped donor",
        &[
            "run",
            "--rm",
            "--network",
            "container:idle",
            "busybox",
            "true",
        ],
        "non running container",
    );
    d.fails_saying(
        "published ports in a shared namespace",
        &[
            "create",
            "--network",
            "container:web",
            "-p",
            "80",
            "busybox",
        ],
        "bridge network",
    );
}

#[test]
fn an_address_asked_for_is_given_and_refusals_are_clear() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    let subnet = net.user_subnet();
    d.ok(&["network", "create", "--subnet", &subnet, "fixed"]);
    let ip = subnet.replace("0/24", "77");
    d.ok(&[
        "run",
        "-d",
        "--name",
        "fixed1",
        "--network",
        "fixed",
        "--ip",
        &ip,
        "busybox",
        "sleep",
        "600",
    ]);
    let v = d.inspect("fixed1");
    assert_eq!(
        v["NetworkSettings"]["Networks"]["fixed"]["IPAddress"],
        ip.as_str(),
        "{v}"
    );
    let inside = d.ok(&["exec", "fixed1", "ip", "-4", "addr", "show", "eth0"]);
    assert!(inside.contains(&format!("{ip}/24")), "{inside}");
    // a MAC asked for (through the API: the CLI sends --mac-address only
    // to API 1.44 servers)
    let r = d.http(
        "POST",
        "/containers/create?name=withmac",
        Some(br#"{"Image":"busybox","Cmd":["sleep","600"],"MacAddress":"02:42:0a:00:00:99","HostConfig":{"NetworkMode":"fixed"}}"#),
    );
    assert_eq!(r.status, 201, "{r:?}");
    d.ok(&["start", "withmac"]);
    let link = d.ok(&["exec", "withmac", "ip", "link", "show", "eth0"]);
    assert!(link.contains("02:42:0a:00:00:99"), "{link}");
    // taken: the start is a 409, the container stays created
    d.ok(&[
        "create",
        "--name",
        "fixed2",
        "--network",
        "fixed",
        "--ip",
        &ip,
        "busybox",
        "sleep",
        "600",
    ]);
    d.fails_saying(
        "an address taken",
        &["start", "fixed2"],
        "Address already in use",
    );
    assert_eq!(d.state("fixed2")["Status"], "created");
    let r = d.http("POST", "/containers/fixed2/start", None);
    assert_eq!(r.status, 409, "{r:?}");
    d.fails_saying(
        "an address outside the subnet",
        &[
            "create",
            "--network",
            "fixed",
            "--ip",
            "192.0.2.9",
            "busybox",
        ],
        "does not belong to any of this network's subnets",
    );

    d.fails_saying(
        "--ip on the default bridge",
        &["run", "--rm", "--ip", "10.1.2.3", "busybox", "true"],
        "user defined networks only",
    );
    // the CLI refuses this itself; the API does too
    let r = d.http(
        "POST",
        "/containers/create",
        Some(br#"{"Image":"busybox","NetworkingConfig":{"EndpointsConfig":{"bridge":{"Aliases":["x"]}}}}"#),
    );
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.body.contains("user defined networks"), "{r:?}");
    d.fails_saying(
        "a network that does not exist",
        &["run", "--rm", "--network", "nope", "busybox", "true"],
        "network nope not found",
    );
    d.fails_saying(
        "a disconnect from a network that does not exist",
        &["network", "disconnect", "nope", "fixed1"],
        "network nope not found",
    );
    d.fails_saying(
        "an unsupported driver",
        &["network", "create", "-d", "overlay", "o"],
        "not supported",
    );
    // subnets chosen: /16s that no route of the host and no other network has
    d.ok(&["network", "create", "unused"]);
    d.ok(&["network", "create", "unused2"]);
    let routes = std::process::Command::new("ip")
        .args(["-4", "route", "show"])
        .output()
        .expect("ip route");
    let routes = String::from_utf8_lossy(&routes.stdout).into_owned();
    let mut chosen = Vec::new();
    for name in ["unused", "unused2"] {
        let subnet = d.ok(&[
            "network",
            "inspect",
            "-f",
            "{{range .IPAM.Config}}{{.Subnet}}{{end}}",
            name,
        ]);
        let subnet = subnet.trim().to_owned();
        assert!(subnet.ends_with(".0.0/16"), "{name}: {subnet}");
        let two_octets = subnet.trim_end_matches("0.0/16").to_owned();
        assert!(
            !routes.lines().any(|r| r.starts_with(&two_octets)),
            "{subnet} collides with a route of the host:\n{routes}"
        );
        chosen.push(subnet);
    }
    assert_ne!(chosen[0], chosen[1]);
    // prune keeps what is used and removes the rest
    let pruned = d.ok(&["network", "prune", "-f"]);
    assert!(
        pruned.contains("unused\n") && pruned.contains("unused2"),
        "{pruned}"
    );
    assert!(!pruned.contains("fixed"), "{pruned}");
    d.ok(&["network", "inspect", "fixed"]);
}

/// The filter table's rules that name `bridge` (the firewall plugin's).
fn filter_rules_naming(bridge: &str) -> Vec<String> {
    let out = std::process::Command::new("iptables-save")
        .args(["-t", "filter"])
        .output()
        .expect("run iptables-save");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.split_whitespace().any(|w| w == bridge))
        .map(str::to_owned)
        .collect()
}

fn bridge_of(net: &BridgeDaemon, network: &str) -> String {
    holdfast_e2e::network::bridge_of(&net.d, network)
}

#[test]
fn containers_on_different_networks_cannot_reach_each_other() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    let (sx, sy) = (net.user_subnet(), net.user_subnet());
    d.ok(&["network", "create", "--subnet", &sx, "netx"]);
    d.ok(&["network", "create", "--subnet", &sy, "nety"]);
    d.ok(&[
        "run",
        "-d",
        "--name",
        "server",
        "--network",
        "netx",
        "busybox",
        "sh",
        "-c",
        &httpd("hello-x"),
    ]);
    d.ok(&[
        "run",
        "-d",
        "--name",
        "samenet",
        "--network",
        "netx",
        "busybox",
        "sleep",
        "600",
    ]);
    d.ok(&[
        "run",
        "-d",
        "--name",
        "othernet",
        "--network",
        "nety",
        "busybox",
        "sleep",
        "600",
    ]);
    d.ok(&["run", "-d", "--name", "onbridge", "busybox", "sleep", "600"]);
    let ip = d.inspect("server")["NetworkSettings"]["Networks"]["netx"]["IPAddress"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let url = format!("http://{ip}/");
    // served on its own network (so the refusals below are the isolation's)
    wait_reaches(&net, "samenet", &url, "hello-x");
    for other in ["othernet", "onbridge"] {
        assert_eq!(
            wget_from(&net, other, &url),
            None,
            "{other} reached {url} across networks\n{}",
            d.diagnostics()
        );
    }
    // and the way back
    let back = d.inspect("othernet")["NetworkSettings"]["Networks"]["nety"]["IPAddress"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let ping = d.docker(&["exec", "server", "ping", "-c", "1", "-W", "2", &back]);
    assert!(!ping.success(), "netx reached nety: {ping:?}");
    // names of another network are not known either
    assert!(!hosts_of(&net, "othernet").contains("server"));

    // the isolation rules go with their network
    let (bx, by) = (bridge_of(&net, "netx"), bridge_of(&net, "nety"));
    assert!(
        !filter_rules_naming(&bx).is_empty(),
        "no isolation rules for {bx}"
    );
    d.ok(&["rm", "-f", "server", "samenet", "othernet"]);
    d.ok(&["network", "rm", "netx", "nety"]);
    for b in [bx, by] {
        assert_eq!(
            filter_rules_naming(&b),
            Vec::<String>::new(),
            "rules of {b} left"
        );
    }
}

/// `(Action, Actor.ID, one attribute)` of each event, in order.
fn told(events: &[serde_json::Value], attribute: &str) -> Vec<(String, String, String)> {
    events
        .iter()
        .map(|e| {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
            (
                text(&e["Action"]),
                text(&e["Actor"]["ID"]),
                text(&e["Actor"]["Attributes"][attribute]),
            )
        })
        .collect()
}

#[test]
fn networks_and_volumes_tell_their_events_and_the_filters_choose_them() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    let since = holdfast_e2e::now_unix_nanos();
    let network = d.ok(&["network", "create", "evnet"]).trim().to_owned();
    d.ok(&["volume", "create", "evvol"]);
    let id = d
        .ok(&[
            "run",
            "-d",
            "--name",
            "ev",
            "--network",
            "evnet",
            "-v",
            "evvol:/data:ro",
            "busybox",
            "sleep",
            "300",
        ])
        .trim()
        .to_owned();
    d.ok(&["rm", "-f", "ev"]);
    d.ok(&["network", "rm", "evnet"]);
    d.ok(&["volume", "rm", "evvol"]);

    let of_network = d.events_since(since, &["--filter", "network=evnet"]);
    assert_eq!(
        told(&of_network, "container"),
        [
            ("create", &network, ""),
            ("connect", &network, &id),
            ("disconnect", &network, &id),
            ("destroy", &network, ""),
        ]
        .map(|(a, b, c)| (a.to_owned(), b.to_string(), c.to_string())),
        "{of_network:#?}\n{}",
        d.diagnostics()
    );
    assert!(
        of_network.iter().all(|e| e["Type"] == "network"
            && e["Actor"]["Attributes"]["name"] == "evnet"
            && e["Actor"]["Attributes"]["type"] == "bridge"),
        "{of_network:#?}"
    );
    // By the network's id too (a prefix, as dockerd).
    let by_id = d.events_since(since, &["--filter", &format!("network={}", &network[..12])]);
    assert_eq!(by_id.len(), 4, "{by_id:#?}");

    let of_volume = d.events_since(since, &["--filter", "volume=evvol"]);
    assert_eq!(
        told(&of_volume, "container"),
        [
            ("create", ""),
            ("mount", id.as_str()),
            ("unmount", id.as_str()),
            ("destroy", ""),
        ]
        .map(|(a, c)| (a.to_owned(), "evvol".to_owned(), c.to_owned())),
        "{of_volume:#?}\n{}",
        d.diagnostics()
    );
    let mount = &of_volume[1]["Actor"]["Attributes"];
    assert_eq!(mount["destination"], "/data", "{mount}");
    assert_eq!(mount["read/write"], "false", "{mount}");
    assert_eq!(mount["driver"], "local", "{mount}");

    // The types and the scope choose too; a container's filter is about
    // the container as actor, as dockerd's.
    let typed = d.events_since(
        since,
        &["--filter", "type=volume", "--filter", "scope=local"],
    );
    assert_eq!(typed.len(), 4, "{typed:#?}");
    assert!(
        d.events_since(since, &["--filter", "scope=swarm"])
            .is_empty(),
        "swarm-scoped events from a daemon without swarm"
    );
    // (By prefix, so `ev` would take `evvol` and `evnet` too, as dockerd's.)
    let of_container = d.events_since(since, &["--filter", &format!("container={id}")]);
    assert!(
        !of_container.is_empty() && of_container.iter().all(|e| e["Type"] == "container"),
        "{of_container:#?}"
    );
    let printed = d.events_printed_since(since, &["--filter", "daemon=nothing-is-named-so"]);
    assert_eq!(printed.trim(), "", "a daemon filter chose events of others");
}
