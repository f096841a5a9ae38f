//! The default bridge network through the real CNI plugins, driven by the
//! docker CLI: a web server (busybox httpd) reached through a published
//! port from the host, via 127.0.0.1 and the host's address, and directly
//! on its bridge address, from another container; `-P`; what `ps`, `port`
//! and `inspect` show; a host port already in use is a clear 409 and leaves
//! the container created, not half-started. Each test has a bridge and subnet of its own, removed
//! afterwards (see `BridgeDaemon`).

use holdfast_e2e::Daemon;
use holdfast_e2e::network::{
    BridgeDaemon, cni_nat_rules, free_port, http_get as get, httpd, wait_reaches,
};

fn wait_served(d: &Daemon, url: &str, body: &str) {
    d.wait_until(&format!("{url} serves {body}"), || {
        get(url).is_some_and(|b| b.trim() == body)
    });
}

#[test]
fn a_published_port_reaches_httpd_and_ps_port_and_inspect_show_it() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    let port = free_port();
    let mapping = format!("{port}:80");
    d.ok(&[
        "run",
        "-d",
        "--name",
        "web",
        "-p",
        &mapping,
        "busybox",
        "sh",
        "-c",
        &httpd("hello-web"),
    ]);
    // -p with the host port chosen, on loopback only
    d.ok(&[
        "run",
        "-d",
        "--name",
        "web2",
        "-p",
        "127.0.0.1::80",
        "busybox",
        "sh",
        "-c",
        &httpd("hello-two"),
    ]);

    wait_served(d, &format!("http://127.0.0.1:{port}/"), "hello-web");
    let v = d.inspect("web");
    let ns = &v["NetworkSettings"];
    let ip = ns["IPAddress"].as_str().unwrap_or_default().to_owned();
    let prefix = net.subnet.trim_end_matches("0/24");
    assert!(
        ip.starts_with(prefix),
        "address {ip} not in {}\n{v}",
        net.subnet
    );
    assert_eq!(ns["Gateway"], format!("{prefix}1"), "{v}");
    assert_eq!(ns["IPPrefixLen"], 24, "{v}");
    assert_eq!(ns["MacAddress"].as_str().map(str::len), Some(17), "{v}");
    assert_eq!(ns["Networks"]["bridge"]["IPAddress"], ip.as_str(), "{v}");
    assert_eq!(
        ns["Ports"]["80/tcp"][0]["HostPort"],
        port.to_string(),
        "{v}"
    );
    assert_eq!(
        v["HostConfig"]["PortBindings"]["80/tcp"][0]["HostPort"],
        port.to_string()
    );
    // the container's own address, straight over the bridge
    wait_served(d, &format!("http://{ip}:80/"), "hello-web");
    // its /etc/hosts names it and localhost, as dockerd's does
    let id = v["Id"].as_str().unwrap_or_default();
    let hosts = d.ok(&["exec", "web", "cat", "/etc/hosts"]);
    assert!(hosts.contains(&format!("{ip}\t{}", &id[..12])), "{hosts}");
    // inspect names the file bound there, and the host's resolver
    let hosts_path = v["HostsPath"].as_str().unwrap_or_default();
    assert_eq!(
        std::fs::read_to_string(hosts_path).ok().as_deref(),
        Some(hosts.as_str()),
        "HostsPath {hosts_path:?}"
    );
    assert_eq!(v["ResolvConfPath"], "/etc/resolv.conf", "{v}");
    let local = d.ok(&["exec", "web", "wget", "-qO-", "http://localhost:80/"]);
    assert_eq!(local.trim(), "hello-web");

    // ps filters by the ports published and exposed
    let named = |filter: &str| {
        let mut names: Vec<String> = d
            .ok(&["ps", "--filter", filter, "--format", "{{.Names}}"])
            .lines()
            .map(str::to_owned)
            .collect();
        names.sort();
        names
    };
    assert_eq!(named("publish=80"), ["web", "web2"]);
    assert_eq!(named("expose=70-90/tcp"), ["web", "web2"]);
    assert!(named("publish=80/udp").is_empty());
    assert!(named("is-task=true").is_empty());
    d.fails_saying(
        "a bad port filter",
        &["ps", "--filter", "publish=eighty"],
        "invalid filter 'publish=eighty'",
    );
    let shown = d.ok(&["port", "web"]);
    assert_eq!(
        shown.trim(),
        format!("80/tcp -> 0.0.0.0:{port}"),
        "{}",
        d.diagnostics()
    );
    let two = d.ok(&["port", "web2", "80"]);
    let chosen: u16 = two
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("docker port web2 80 printed {two:?}"));
    assert!(two.starts_with("127.0.0.1:"), "{two}");
    wait_served(d, &format!("http://127.0.0.1:{chosen}/"), "hello-two");
    let ps = d.ok(&["ps", "--format", "{{.Names}} {{.Ports}}"]);
    assert!(ps.contains(&format!("web 0.0.0.0:{port}->80/tcp")), "{ps}");
    assert!(
        ps.contains(&format!("web2 127.0.0.1:{chosen}->80/tcp")),
        "{ps}"
    );

    // A stop releases the attachment (once the task is deleted, just after
    // the stop is answered); a start makes it again, same port.
    d.ok(&["stop", "-t", "1", "web"]);
    d.wait_until("web's address is released; web2 keeps its own", || {
        net.allocations().len() == 1 && d.inspect("web")["NetworkSettings"]["IPAddress"] == ""
    });
    d.ok(&["start", "web"]);
    wait_served(d, &format!("http://127.0.0.1:{port}/"), "hello-web");

    d.ok(&["rm", "-f", "web", "web2"]);
    assert!(net.allocations().is_empty(), "{:?}", net.allocations());
    assert!(net.held_files().is_empty(), "{:?}", net.held_files());
    assert!(net.bridge_ports().is_empty(), "{:?}", net.bridge_ports());
    assert!(
        get(&format!("http://127.0.0.1:{port}/")).is_none(),
        "still served after rm"
    );
}

/// The host port `docker port` shows for `spec` (`80/tcp`) of `name`.
fn published(d: &Daemon, name: &str, spec: &str) -> u16 {
    let shown = d.ok(&["port", name, spec]);
    shown
        .lines()
        .next()
        .and_then(|l| l.rsplit(':').next())
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("docker port {name} {spec} printed {shown:?}"))
}

/// `-P` publishes every port the image `EXPOSE`s and every `--expose`d one
/// on a host port of the kernel's choice; another container on the bridge
/// reaches the server through the published port (at the bridge's gateway,
/// an address of the host) as well as at the server's own address.
#[test]
fn dash_p_publishes_the_exposed_ports_and_other_containers_reach_them() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    d.ok(&["create", "--name", "base", "busybox"]);
    d.ok(&["commit", "--change", "EXPOSE 80", "base", "exposes:1"]);
    d.ok(&[
        "run",
        "-d",
        "--name",
        "web",
        "-P",
        "--expose",
        "8081",
        "exposes:1",
        "sh",
        "-c",
        &httpd("hello-dash-p"),
    ]);
    let v = d.inspect("web");
    assert_eq!(v["HostConfig"]["PublishAllPorts"], true, "{v}");
    let port = published(d, "web", "80/tcp");
    let other = published(d, "web", "8081/tcp");
    assert_ne!(port, other, "two ports, two host ports");
    for p in [port, other] {
        assert!(p >= 1024, "a chosen host port is unprivileged: {p}");
    }
    let ports = &v["NetworkSettings"]["Ports"];
    assert_eq!(ports["80/tcp"][0]["HostPort"], port.to_string(), "{v}");
    assert_eq!(ports["8081/tcp"][0]["HostPort"], other.to_string(), "{v}");
    wait_served(d, &format!("http://127.0.0.1:{port}/"), "hello-dash-p");

    let ns = &v["NetworkSettings"];
    let gateway = ns["Gateway"].as_str().unwrap_or_default().to_owned();
    let ip = ns["IPAddress"].as_str().unwrap_or_default().to_owned();
    d.ok(&["run", "-d", "--name", "client", "busybox", "sleep", "300"]);
    wait_reaches(
        &net,
        "client",
        &format!("http://{gateway}:{port}/"),
        "hello-dash-p",
    );
    wait_reaches(&net, "client", &format!("http://{ip}:80/"), "hello-dash-p");

    d.ok(&["rm", "-f", "web", "client", "base"]);
    assert!(net.allocations().is_empty(), "{:?}", net.allocations());
    assert!(
        get(&format!("http://127.0.0.1:{port}/")).is_none(),
        "still served after rm"
    );
}

#[test]
fn add_host_and_dns_write_the_containers_hosts_and_resolver() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    d.ok(&[
        "run",
        "-d",
        "--name",
        "named",
        "--hostname",
        "box1",
        "--add-host",
        "db.internal:10.1.2.3",
        "--dns",
        "10.0.0.53",
        "--dns-search",
        "example.test",
        "--dns-option",
        "ndots:2",
        "busybox",
        "sleep",
        "300",
    ]);
    let hosts = d.ok(&["exec", "named", "cat", "/etc/hosts"]);
    let ip = d.inspect("named")["NetworkSettings"]["IPAddress"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(hosts.contains("10.1.2.3\tdb.internal"), "{hosts}");
    assert!(hosts.contains(&format!("{ip}\tbox1")), "{hosts}");
    let hc = &d.inspect("named")["HostConfig"];
    assert_eq!(hc["ExtraHosts"][0], "db.internal:10.1.2.3", "{hc}");
    assert_eq!(hc["Dns"][0], "10.0.0.53", "{hc}");
    let resolv = d.ok(&["exec", "named", "cat", "/etc/resolv.conf"]);
    assert_eq!(
        resolv,
        "nameserver 10.0.0.53\nsearch example.test\noptions ndots:2\n",
        "{}",
        d.diagnostics()
    );
    d.fails_saying(
        "--add-host off the bridge network",
        &[
            "create",
            "--network",
            "none",
            "--add-host",
            "a:1.2.3.4",
            "busybox",
        ],
        "need the bridge network",
    );
    // (the CLI checks what it can; the API must too)
    let bad = d.http(
        "POST",
        "/containers/create",
        Some(br#"{"Image":"busybox","HostConfig":{"ExtraHosts":["a:not-an-ip"]}}"#),
    );
    assert_eq!(bad.status, 400, "{bad:?}");
    assert!(
        bad.message().is_some_and(|m| m.contains("name:ip")),
        "{bad:?}"
    );
    d.ok(&["rm", "-f", "named"]);
    assert!(net.held_files().is_empty(), "{:?}", net.held_files());
}

#[test]
fn a_host_port_in_use_is_a_409_and_the_container_stays_created() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    // Held by a socket of the host...
    let listener = std::net::TcpListener::bind("0.0.0.0:0").expect("bind");
    let taken = listener.local_addr().expect("addr").port();
    let mapping = format!("{taken}:80");
    let out = d.fails_saying(
        "a port held by the host",
        &[
            "run", "-d", "--name", "clash", "-p", &mapping, "busybox", "sleep", "100",
        ],
        "port is already allocated",
    );
    assert!(out.stderr.contains(&taken.to_string()), "{}", out.stderr);
    let state = d.state("clash");
    assert_eq!(state["Status"], "created", "{state}");
    assert!(net.allocations().is_empty(), "{:?}", net.allocations());
    assert!(net.held_files().is_empty(), "{:?}", net.held_files());
    let before = d.http("POST", "/containers/clash/start", None);
    assert_eq!(before.status, 409, "{before:?}");
    // ...and by another container.
    drop(listener);
    let port = free_port();
    let mapping = format!("{port}:80");
    d.ok(&[
        "run", "-d", "--name", "first", "-p", &mapping, "busybox", "sleep", "100",
    ]);
    d.fails_saying(
        "a port another container publishes",
        &[
            "run", "-d", "--name", "second", "-p", &mapping, "busybox", "sleep", "100",
        ],
        "port is already allocated",
    );
    assert_eq!(d.state("second")["Status"], "created");
    assert_eq!(net.allocations().len(), 1, "{:?}", net.allocations());
    // Freed, the port can be taken.
    d.ok(&["rm", "-f", "first"]);
    d.ok(&["start", "second"]);
    assert_eq!(d.state("second")["Status"], "running");
    d.ok(&["rm", "-f", "second", "clash"]);
    assert!(net.allocations().is_empty(), "{:?}", net.allocations());
    let mine: Vec<String> = cni_nat_rules()
        .into_iter()
        .filter(|r| r.contains(&net.bridge))
        .collect();
    assert!(mine.is_empty(), "rules of this network left: {mine:?}");
}
