//! Allocations never leak: holdfastd SIGKILLed between a container's
//! address allocation and its start, containerd SIGKILLed at the same
//! point, an allocation whose record is lost (holdfastd SIGKILLed at that
//! point and its store replaced by an older copy), and 200 containers with
//! published ports created, started and removed; after each, the nat
//! table's CNI rules, the IPAM store, the bridge's ports and the daemon's
//! namespaces and attachment files are exactly where they started.
//!
//! One test, so nothing else of this suite changes the nat table meanwhile.
//! The plugins are the real ones; portmap runs behind a gate (a shell
//! wrapper) so that the crash lands after the bridge plugin allocated the
//! address and before the container starts.

use holdfast_e2e::network::{BridgeDaemon, CNI_PLUGIN_DIR, filter_rules_for, held, httpd};
use std::path::{Path, PathBuf};

/// A plugin directory with the real plugins, portmap's ADD behind a gate:
/// with `<dir>/gate` present it touches `mark`, waits for `go`, runs the
/// real portmap and touches `done`.
fn gated_plugins(dir: &Path) -> PathBuf {
    let plugins = dir.join("cni");
    std::fs::create_dir_all(&plugins).expect("plugin dir");
    for p in ["loopback", "bridge", "host-local", "firewall"] {
        std::os::unix::fs::symlink(Path::new(CNI_PLUGIN_DIR).join(p), plugins.join(p))
            .expect("link a plugin");
    }
    let g = dir.display();
    let script = format!(
        "#!/bin/sh\n\
         if [ \"$CNI_COMMAND\" = ADD ] && [ -e {g}/gate ]; then\n\
           touch {g}/mark\n\
           while [ ! -e {g}/go ]; do sleep 0.02; done\n\
           {real}/portmap; rc=$?\n\
           touch {g}/done\n\
           exit $rc\n\
         fi\n\
         exec {real}/portmap\n",
        real = CNI_PLUGIN_DIR
    );
    let wrapper = plugins.join("portmap");
    std::fs::write(&wrapper, script).expect("write the wrapper");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
        .expect("chmod the wrapper");
    plugins
}

#[test]
fn crashes_between_allocation_and_start_and_many_containers_leak_nothing() {
    let gate_dir = tempfile::Builder::new()
        .prefix("hf-gate-")
        .tempdir()
        .expect("gate dir");
    let g = gate_dir.path();
    let plugins = gated_plugins(g);
    let plugins = plugins.to_string_lossy().into_owned();
    let mut net = BridgeDaemon::start_with(&["--cni-plugin-dir", &plugins]);

    // portmap's shared chains are made once and kept, as with every user of
    // the plugin: one container first, then the baseline.
    net.d.ok(&[
        "run", "-d", "--name", "warm", "-p", "80", "busybox", "sleep", "100",
    ]);
    net.d.ok(&["rm", "-f", "warm"]);
    let baseline = held(&net);
    assert!(
        baseline.addresses.is_empty() && baseline.files.is_empty(),
        "{baseline:?}"
    );
    // A copy of the store from before anything below, taken at rest.
    net.d.sigterm_and_wait();
    let store = net.d.data_root().join("holdfast.redb");
    let old_store = g.join("old.redb");
    std::fs::copy(&store, &old_store).expect("copy the store");
    net.d.restart();

    for crash in ["holdfastd", "containerd", "the store"] {
        for f in ["mark", "go", "done"] {
            let _ = std::fs::remove_file(g.join(f));
        }
        std::fs::write(g.join("gate"), "").expect("close the gate");
        let name = format!("after-{}", crash.replace(' ', "-"));
        let run = net.d.spawn_docker(&[
            "run",
            "-d",
            "--name",
            &name,
            "-p",
            "80",
            "busybox",
            "sh",
            "-c",
            &httpd("alive"),
        ]);
        net.d
            .wait_until("portmap is reached: an address is allocated", || {
                g.join("mark").exists()
            });
        assert_eq!(net.allocations().len(), 1, "{:?}", net.allocations());
        match crash {
            "containerd" => {
                net.d.kill_containerd();
            }
            _ => net.d.sigkill(),
        }
        if crash == "the store" {
            // The record that owns the allocation is lost: an older store.
            std::fs::copy(&old_store, &store).expect("restore the old store");
        }
        // The plugin the dead daemon started finishes its work.
        std::fs::write(g.join("go"), "").expect("open the gate");
        net.d
            .wait_until("the gated portmap finished", || g.join("done").exists());
        std::fs::remove_file(g.join("gate")).expect("remove the gate");
        if crash == "containerd" {
            let _ = net
                .d
                .wait_exit("docker run during the containerd crash", run);
        } else {
            drop(run);
            net.d.restart();
        }
        if crash == "the store" {
            // No record owns what the setup made: found at start-up, released.
            net.d.wait_until("the orphan attachment is released", || {
                held(&net) == baseline
            });
            assert_eq!(
                net.d.ok(&["ps", "-aq"]).trim(),
                "",
                "{}",
                net.d.diagnostics()
            );
            continue;
        }
        // The start the user asked for is carried out: the attachment in
        // doubt is released and made again.
        net.d.wait_until(&format!("{name} runs"), || {
            net.d
                .docker(&["inspect", "-f", "{{.State.Status}}", &name])
                .stdout
                .trim()
                == "running"
        });
        let port = net.d.ok(&["port", &name, "80"]);
        let port = port
            .trim()
            .rsplit(':')
            .next()
            .unwrap_or_default()
            .to_owned();
        net.d.wait_until(&format!("{name} serves on {port}"), || {
            holdfast_e2e::run_with_timeout(
                std::process::Command::new("curl").args([
                    "-sf",
                    "--max-time",
                    "3",
                    &format!("http://127.0.0.1:{port}/"),
                ]),
                std::time::Duration::from_secs(10),
            )
            .stdout
            .trim()
                == "alive"
        });
        assert_eq!(
            net.allocations().len(),
            1,
            "one address, not two: {:?}",
            net.allocations()
        );
        net.d.ok(&["rm", "-f", &name]);
        let now = held(&net);
        assert_eq!(
            now,
            baseline,
            "after {crash} was killed\n{}",
            net.d.diagnostics()
        );
    }

    // Many containers, published ports chosen, created, started, removed:
    // the 200, run a few at a time (a /24 holds them).
    const N: usize = 200;
    const AT_ONCE: usize = 4;
    let names: Vec<String> = (0..N).map(|i| format!("many{i}")).collect();
    std::thread::scope(|s| {
        for batch in names.chunks(N.div_ceil(AT_ONCE)) {
            let d = &net.d;
            s.spawn(move || {
                for n in batch {
                    d.ok(&[
                        "run", "-d", "--name", n, "-p", "80", "-p", "53/udp", "busybox", "sleep",
                        "600",
                    ]);
                }
            });
        }
    });
    assert_eq!(net.allocations().len(), N, "{:?}", net.allocations());
    assert_eq!(net.bridge_ports().len(), N);
    let published = net.d.ok(&["ps", "--format", "{{.Ports}}"]);
    assert_eq!(
        published.lines().filter(|l| l.contains("->80/tcp")).count(),
        N,
        "every container shows its published port:\n{published}"
    );
    let mut args = vec!["rm", "-f"];
    args.extend(names.iter().map(String::as_str));
    net.d.ok(&args);
    assert_eq!(
        held(&net),
        baseline,
        "after {N} containers\n{}",
        net.d.diagnostics()
    );

    // A user network: the same, through a holdfastd SIGKILL, then its rm.
    let subnet = net.user_subnet();
    net.d
        .ok(&["network", "create", "--subnet", &subnet, "leaky"]);
    let bridge = holdfast_e2e::network::bridge_of(&net.d, "leaky");
    let ipam = net.d.exec_root().join("net/ipam").join(&bridge);
    let user_held = |net: &BridgeDaemon| {
        (
            held(net),
            filter_rules_for(&[&subnet]),
            std::fs::read_dir(&ipam)
                .map(|e| {
                    e.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| n != "lock" && !n.starts_with("last_reserved_ip"))
                        .count()
                })
                .unwrap_or(0),
        )
    };
    let user_baseline = user_held(&net);
    const M: usize = 5;
    let names: Vec<String> = (0..M).map(|i| format!("user{i}")).collect();
    for n in &names {
        net.d.ok(&[
            "run",
            "-d",
            "--name",
            n,
            "--network",
            "leaky",
            "-p",
            "80",
            "busybox",
            "sleep",
            "300",
        ]);
    }
    assert_eq!(user_held(&net).2, M, "{}", net.d.diagnostics());
    assert!(
        !filter_rules_for(&[&subnet]).is_empty(),
        "no firewall rules for {subnet}"
    );
    net.d.sigkill();
    net.d.restart();
    let mut args = vec!["rm", "-f"];
    args.extend(names.iter().map(String::as_str));
    net.d.ok(&args);
    assert_eq!(
        user_held(&net),
        user_baseline,
        "after {M} containers on a user network\n{}",
        net.d.diagnostics()
    );
    net.d.ok(&["network", "rm", "leaky"]);
    assert!(!ipam.exists(), "the IPAM store of leaky is left");
    assert!(
        !Path::new("/sys/class/net").join(&bridge).exists(),
        "the bridge {bridge} is left"
    );
    let rules = std::process::Command::new("iptables-save")
        .args(["-t", "filter"])
        .output()
        .expect("run iptables-save");
    let left: Vec<String> = String::from_utf8_lossy(&rules.stdout)
        .lines()
        .filter(|l| l.split_whitespace().any(|w| w == bridge))
        .map(str::to_owned)
        .collect();
    assert_eq!(left, Vec::<String>::new(), "rules of {bridge} left");
    assert_eq!(held(&net), baseline);
}
