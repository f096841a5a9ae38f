//! The create options runc can honour, with the real docker CLI: each one
//! is shown to take effect inside a busybox container (capabilities in
//! /proc/self/status, limits in the cgroup files, mounts in /proc/mounts,
//! namespaces by their inodes) and to come back in `docker inspect` where
//! dockerd shows it. Bad values are refused with a 400 naming the option,
//! and leave no container behind.

use holdfast_e2e::Daemon;
use serde_json::{Value, json};
use std::path::Path;

/// `docker run --rm OPTIONS... busybox sh -c SCRIPT`: its stdout, trimmed.
fn run(d: &Daemon, options: &[&str], script: &str) -> String {
    let mut args = vec!["run", "--rm"];
    args.extend_from_slice(options);
    args.extend_from_slice(&["busybox", "sh", "-c", script]);
    d.ok(&args).trim().to_owned()
}

/// The value of `Field:` in `/proc/self/status` of a container run with `options`.
fn status_field(d: &Daemon, options: &[&str], field: &str) -> String {
    let line = run(d, options, &format!("grep '^{field}:' /proc/self/status"));
    line.split_once(':')
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default()
}

fn cgroup_v2() -> bool {
    Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

/// A cgroup file as a container sees it: v1 has a directory per
/// controller, v2 one directory.
fn cgroup_file(v1_controller: &str, v1_file: &str, v2_file: &str) -> String {
    if cgroup_v2() {
        format!("/sys/fs/cgroup/{v2_file}")
    } else {
        format!("/sys/fs/cgroup/{v1_controller}/{v1_file}")
    }
}

fn has_cap(cap_eff: &str, bit: u32) -> bool {
    u64::from_str_radix(cap_eff, 16).is_ok_and(|mask| mask & (1 << bit) != 0)
}

const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;
/// docker's default set: chown, dac_override, fowner, fsetid, kill, setgid,
/// setuid, setpcap, net_bind_service, net_raw, sys_chroot, mknod,
/// audit_write, setfcap.
const DEFAULT_CAP_EFF: &str = "00000000a80425fb";

#[test]
fn capabilities_privileged_devices_and_groups() {
    let d = Daemon::start();
    assert_eq!(status_field(&d, &[], "CapEff"), DEFAULT_CAP_EFF);
    assert_eq!(
        status_field(
            &d,
            &["--cap-drop", "ALL", "--cap-add", "NET_ADMIN"],
            "CapEff"
        ),
        format!("{:016x}", 1u64 << CAP_NET_ADMIN)
    );
    let added = status_field(&d, &["--cap-add", "CAP_SYS_ADMIN"], "CapEff");
    assert!(has_cap(&added, CAP_SYS_ADMIN), "CapEff {added}");
    let dropped = status_field(&d, &["--cap-drop", "chown"], "CapEff");
    assert!(
        !has_cap(&dropped, 0) && has_cap(&dropped, 1),
        "CapEff {dropped}"
    );

    // Privileged: every capability, no seccomp filter, the host's devices.
    let privileged = status_field(&d, &["--privileged"], "CapEff");
    assert!(
        has_cap(&privileged, CAP_SYS_ADMIN) && has_cap(&privileged, CAP_NET_ADMIN),
        "CapEff {privileged}"
    );
    assert_eq!(status_field(&d, &["--privileged"], "Seccomp"), "0");
    assert_eq!(status_field(&d, &[], "Seccomp"), "2");
    assert_eq!(
        run(&d, &["--privileged"], "test -c /dev/kmsg && echo yes"),
        "yes"
    );
    assert_eq!(run(&d, &[], "test -e /dev/kmsg || echo no"), "no");

    // --device: the node is there, and its cgroup permissions hold (loop-control
    // is not among the devices every container may open).
    let open_tun =
        "test -c /dev/t && (sh -c 'exec 3<>/dev/t' 2>/dev/null && echo opened || echo refused)";
    assert_eq!(
        run(&d, &["--device", "/dev/loop-control:/dev/t:r"], open_tun),
        "refused"
    );
    assert_eq!(
        run(&d, &["--device", "/dev/loop-control:/dev/t"], open_tun),
        "opened"
    );
    assert_eq!(
        run(&d, &[], "test -e /dev/loop-control || echo absent"),
        "absent"
    );

    // -u and --group-add.
    assert_eq!(
        run(
            &d,
            &[
                "-u",
                "1000:1000",
                "--group-add",
                "50",
                "--group-add",
                "2000"
            ],
            "id -u; id -g; grep '^Groups:' /proc/self/status | cut -f2"
        ),
        "1000\n1000\n50 2000"
    );

    d.ok(&[
        "create",
        "--name",
        "opts",
        "--cap-add",
        "NET_ADMIN",
        "--cap-drop",
        "MKNOD",
        "--privileged",
        "--device",
        "/dev/loop-control:/dev/t:r",
        "--group-add",
        "50",
        "busybox",
    ]);
    let hc = d.inspect("opts")["HostConfig"].clone();
    // The CLI sends the names it normalised; dockerd shows what it got.
    assert_eq!(hc["CapAdd"], json!(["CAP_NET_ADMIN"]), "{hc:#}");
    assert_eq!(hc["CapDrop"], json!(["CAP_MKNOD"]), "{hc:#}");
    assert_eq!(hc["Privileged"], json!(true), "{hc:#}");
    assert_eq!(hc["GroupAdd"], json!(["50"]), "{hc:#}");
    assert_eq!(
        hc["Devices"],
        json!([{"PathOnHost": "/dev/loop-control", "PathInContainer": "/dev/t", "CgroupPermissions": "r"}]),
        "{hc:#}"
    );
    // --device-cgroup-rule: a device it may open (a loop device), which it
    // may not without the rule; shown back as given.
    let open_loop = "mknod /tmp/loop b 7 0; head -c 1 /tmp/loop > /dev/null && echo opened";
    let refused = d.docker(&["run", "--rm", "busybox", "sh", "-c", open_loop]);
    assert!(
        refused.stdout.is_empty() && refused.stderr.contains("Operation not permitted"),
        "{refused:?}"
    );
    let ruled = d.docker(&[
        "run",
        "--name",
        "ruled",
        "--device-cgroup-rule",
        "b 7:* rwm",
        "busybox",
        "sh",
        "-c",
        open_loop,
    ]);
    assert_eq!(
        ruled.stdout.trim(),
        "opened",
        "{ruled:?}\n{}",
        d.diagnostics()
    );
    assert_eq!(
        d.inspect("ruled")["HostConfig"]["DeviceCgroupRules"],
        json!(["b 7:* rwm"])
    );
    let plain = d.ok(&["create", "busybox"]);
    let hc = d.inspect(plain.trim())["HostConfig"].clone();
    assert_eq!(hc["CapAdd"], Value::Null, "{hc:#}");
    assert_eq!(hc["Privileged"], json!(false), "{hc:#}");
    assert_eq!(hc["IpcMode"], json!("private"), "{hc:#}");
    assert_eq!(
        (&hc["Runtime"], &hc["Isolation"]),
        (&json!("runc"), &json!("")),
        "{hc:#}"
    );
    assert_eq!(hc["ShmSize"], json!(64 << 20), "{hc:#}");
    // dockerd's default cgroup namespace depends on the cgroup version.
    let cgroupns = if cgroup_v2() { "private" } else { "host" };
    assert_eq!(hc["CgroupnsMode"], json!(cgroupns), "{hc:#}");
}

#[test]
fn limits_reach_the_cgroup_and_rlimits() {
    let d = Daemon::start();
    let pids_max = cgroup_file("pids", "pids.max", "pids.max");
    assert_eq!(
        run(&d, &["--pids-limit", "64"], &format!("cat {pids_max}")),
        "64"
    );
    let memory = if cgroup_v2() {
        "cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory.low /sys/fs/cgroup/memory.swap.max"
            .to_owned()
    } else {
        "cd /sys/fs/cgroup/memory && cat memory.limit_in_bytes memory.soft_limit_in_bytes memory.memsw.limit_in_bytes".to_owned()
    };
    let swap_line = if cgroup_v2() { 64 << 20 } else { 128 << 20 };
    assert_eq!(
        run(
            &d,
            &[
                "--memory",
                "64m",
                "--memory-swap",
                "128m",
                "--memory-reservation",
                "32m"
            ],
            &memory
        ),
        format!("{}\n{}\n{swap_line}", 64 << 20, 32 << 20)
    );
    // --memory-swappiness: in the memory cgroup on v1; refused on v2,
    // which has no such setting; shown back by inspect.
    let swappiness = ["--memory-swappiness", "17"];
    if cgroup_v2() {
        d.fails_saying(
            "swappiness on cgroup v2",
            &[
                "run",
                "--rm",
                swappiness[0],
                swappiness[1],
                "busybox",
                "true",
            ],
            "memory swappiness",
        );
    } else {
        assert_eq!(
            run(
                &d,
                &swappiness,
                "cat /sys/fs/cgroup/memory/memory.swappiness"
            ),
            "17"
        );
        d.ok(&[
            "create",
            "--name",
            "swappy",
            swappiness[0],
            swappiness[1],
            "busybox",
        ]);
        assert_eq!(
            d.inspect("swappy")["HostConfig"]["MemorySwappiness"],
            json!(17)
        );
    }
    // (The CLI checks the range itself; the API is asked directly.)
    let r = d.http(
        "POST",
        "/containers/create",
        Some(br#"{"Image":"busybox","HostConfig":{"MemorySwappiness":101}}"#),
    );
    assert_eq!(
        (r.status, r.message().as_deref()),
        (
            400,
            Some("invalid value: 101, valid memory swappiness range is 0-100")
        ),
        "{r:?}"
    );
    let cpu = if cgroup_v2() {
        "cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpuset.cpus".to_owned()
    } else {
        "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us /sys/fs/cgroup/cpu/cpu.shares /sys/fs/cgroup/cpuset/cpuset.cpus".to_owned()
    };
    let want = if cgroup_v2() {
        "50000 100000\n0"
    } else {
        "50000\n100000\n512\n0"
    };
    assert_eq!(
        run(
            &d,
            &["--cpus", "0.5", "--cpu-shares", "512", "--cpuset-cpus", "0"],
            &cpu
        ),
        want
    );
    let quota = cgroup_file("cpu", "cpu.cfs_quota_us", "cpu.max");
    let got = run(
        &d,
        &["--cpu-period", "50000", "--cpu-quota", "25000"],
        &format!("cat {quota}"),
    );
    assert!(got.starts_with("25000"), "{quota}: {got}");

    assert_eq!(
        run(
            &d,
            &["--ulimit", "nofile=512:1024"],
            "ulimit -n; ulimit -Hn"
        ),
        "512\n1024"
    );
    assert_eq!(
        run(
            &d,
            &[
                "--sysctl",
                "net.ipv4.ip_forward=1",
                "--sysctl",
                "kernel.shmmni=1000"
            ],
            "cat /proc/sys/net/ipv4/ip_forward /proc/sys/kernel/shmmni"
        ),
        "1\n1000"
    );
    assert_eq!(
        run(
            &d,
            &["--shm-size", "16m"],
            "df -k /dev/shm | tail -n 1 | awk '{print $2}'"
        ),
        "16384"
    );

    d.ok(&[
        "create",
        "--name",
        "opts",
        "--pids-limit",
        "64",
        "--memory",
        "64m",
        "--memory-swap",
        "128m",
        "--memory-reservation",
        "32m",
        "--cpus",
        "0.5",
        "--cpu-shares",
        "512",
        "--cpuset-cpus",
        "0",
        "--cpuset-mems",
        "0",
        "--ulimit",
        "nofile=512:1024",
        "--sysctl",
        "net.ipv4.ip_forward=1",
        "--shm-size",
        "16m",
        "busybox",
    ]);
    let hc = d.inspect("opts")["HostConfig"].clone();
    for (field, want) in [
        ("PidsLimit", json!(64)),
        ("Memory", json!(64 << 20)),
        ("MemorySwap", json!(128 << 20)),
        ("MemoryReservation", json!(32 << 20)),
        ("NanoCpus", json!(500_000_000)),
        ("CpuShares", json!(512)),
        ("CpusetCpus", json!("0")),
        ("CpusetMems", json!("0")),
        (
            "Ulimits",
            json!([{"Name": "nofile", "Soft": 512, "Hard": 1024}]),
        ),
        ("Sysctls", json!({"net.ipv4.ip_forward": "1"})),
        ("ShmSize", json!(16 << 20)),
    ] {
        assert_eq!(hc[field], want, "{field}: {hc:#}");
    }
    d.ok(&[
        "create",
        "--name",
        "quota",
        "--cpu-period",
        "50000",
        "--cpu-quota",
        "25000",
        "busybox",
    ]);
    let hc = d.inspect("quota")["HostConfig"].clone();
    assert_eq!(hc["CpuPeriod"], json!(50000), "{hc:#}");
    assert_eq!(hc["CpuQuota"], json!(25000), "{hc:#}");
}

#[test]
fn realtime_cpu_on_cgroup_v1() {
    if cgroup_v2() || !Path::new("/sys/fs/cgroup/cpu/cpu.rt_runtime_us").exists() {
        eprintln!("skipped: the kernel has no cgroup v1 CPU real-time scheduler");
        return;
    }
    let d = Daemon::start();
    let got = run(
        &d,
        &["--cpu-rt-period", "1000000", "--cpu-rt-runtime", "10000"],
        "cat /sys/fs/cgroup/cpu/cpu.rt_period_us /sys/fs/cgroup/cpu/cpu.rt_runtime_us",
    );
    assert_eq!(got, "1000000\n10000");
    d.ok(&[
        "create",
        "--name",
        "rt",
        "--cpu-rt-period",
        "1000000",
        "--cpu-rt-runtime",
        "10000",
        "busybox",
    ]);
    let hc = d.inspect("rt")["HostConfig"].clone();
    assert_eq!(hc["CpuRealtimePeriod"], json!(1_000_000), "{hc:#}");
    assert_eq!(hc["CpuRealtimeRuntime"], json!(10000), "{hc:#}");
}

#[test]
fn tmpfs_bind_mounts_and_read_only_rootfs() {
    let d = Daemon::start();
    let src = d.root().join("bind-src");
    std::fs::create_dir_all(&src).expect("bind source");
    std::fs::write(src.join("f"), "from the host\n").expect("bind file");
    let src = src.to_str().expect("utf-8 path").to_owned();

    let mounts = run(
        &d,
        &[
            "--tmpfs",
            "/scratch:size=1m,mode=1770",
            "--mount",
            "type=tmpfs,destination=/t2,tmpfs-size=2097152",
            "--mount",
            &format!("type=bind,source={src},target=/b,readonly,bind-propagation=rslave"),
        ],
        "grep -E ' /(scratch|t2|b) ' /proc/mounts; cat /b/f; touch /b/x 2>/dev/null && echo wrote || echo refused; touch /scratch/ok && echo tmpfs-writable",
    );
    let line = |target: &str| {
        mounts
            .lines()
            .find(|l| l.split(' ').nth(1) == Some(target))
            .unwrap_or_else(|| panic!("no {target} in /proc/mounts:\n{mounts}"))
            .to_owned()
    };
    let scratch = line("/scratch");
    assert!(
        scratch.starts_with("tmpfs ")
            && scratch.contains("size=1024k")
            && scratch.contains("mode=1770"),
        "{scratch}"
    );
    assert!(line("/t2").contains("size=2048k"), "{mounts}");
    assert!(line("/b").contains(" ro,"), "{mounts}");
    assert!(mounts.contains("from the host"), "{mounts}");
    assert!(
        mounts.contains("refused") && mounts.contains("tmpfs-writable"),
        "{mounts}"
    );

    let ro = run(
        &d,
        &["--read-only"],
        "touch /x 2>&1 || true; touch /tmp/y 2>&1 || true",
    );
    assert!(ro.contains("Read-only file system"), "{ro}");

    d.ok(&[
        "create",
        "--name",
        "opts",
        "--read-only",
        "--tmpfs",
        "/scratch:size=1m",
        "--mount",
        &format!("type=bind,source={src},target=/b,readonly,bind-propagation=rslave"),
        "--mount",
        "type=tmpfs,destination=/t2,tmpfs-size=2097152",
        "busybox",
    ]);
    let v = d.inspect("opts");
    let hc = &v["HostConfig"];
    assert_eq!(hc["ReadonlyRootfs"], json!(true), "{hc:#}");
    assert_eq!(hc["Tmpfs"], json!({"/scratch": "size=1m"}), "{hc:#}");
    assert_eq!(
        hc["Mounts"],
        json!([
            {"Type": "bind", "Source": src, "Target": "/b", "ReadOnly": true, "BindOptions": {"Propagation": "rslave"}},
            {"Type": "tmpfs", "Target": "/t2", "TmpfsOptions": {"SizeBytes": 2097152}},
        ]),
        "{hc:#}"
    );
    let points = v["Mounts"].as_array().cloned().unwrap_or_default();
    assert!(
        points
            .iter()
            .any(|m| m["Destination"] == "/b" && m["RW"] == false && m["Propagation"] == "rslave"),
        "{points:?}"
    );
}

fn ns_inode(pid: u32, kind: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/{kind}"))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|e| panic!("ns of {pid}: {e}"))
}

#[test]
fn pid_uts_ipc_and_cgroup_namespaces() {
    let d = Daemon::start();
    // --pid host: the host's pid 1 is visible (and is not the container's sh).
    let host_init = std::fs::read_to_string("/proc/1/comm").expect("host pid 1");
    assert_eq!(
        run(&d, &["--pid", "host"], "cat /proc/1/comm"),
        host_init.trim()
    );
    assert_eq!(run(&d, &[], "cat /proc/1/comm; true"), "sh");
    let host_name = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    assert_eq!(run(&d, &["--uts", "host"], "hostname"), host_name.trim());
    // /etc/hostname names what the container is called, as dockerd binds it
    // (read-only with a read-only root), and inspect shows the file.
    assert_eq!(
        run(&d, &["--uts", "host"], "cat /etc/hostname"),
        host_name.trim()
    );
    assert_eq!(run(&d, &["--hostname", "hh"], "cat /etc/hostname"), "hh");
    assert_eq!(
        run(
            &d,
            &["--hostname", "ro", "--read-only"],
            "cat /etc/hostname; echo x > /etc/hostname 2>/dev/null || echo refused"
        ),
        "ro\nrefused"
    );
    d.ok(&["create", "--name", "named", "--hostname", "nh", "busybox"]);
    let file = d.inspect("named")["HostnamePath"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        std::fs::read_to_string(&file)
            .map(|h| h.trim().to_owned())
            .ok(),
        Some("nh".to_owned()),
        "HostnamePath {file:?}"
    );
    d.ok(&["rm", "named"]);
    assert!(!std::path::Path::new(&file).exists(), "rm removes {file}");
    // --domainname and --annotation: given to the runtime as they are, and
    // shown back.
    d.ok(&[
        "run",
        "-d",
        "--name",
        "given",
        "--domainname",
        "example.org",
        "--annotation",
        "team=blue",
        "busybox",
        "sleep",
        "1000",
    ]);
    let given = d.inspect("given");
    let id = given["Id"].as_str().unwrap_or_default();
    let spec = d.containerd_spec(id);
    assert_eq!(
        (
            &spec["linux"]["sysctl"]["kernel.domainname"],
            &spec["annotations"]["team"]
        ),
        (&json!("example.org"), &json!("blue")),
        "{spec}"
    );
    assert_eq!(
        d.ok(&["exec", "given", "cat", "/proc/sys/kernel/domainname"])
            .trim(),
        "example.org"
    );
    assert_eq!(
        (
            &given["Config"]["Domainname"],
            &given["HostConfig"]["Annotations"]
        ),
        (&json!("example.org"), &json!({"team": "blue"})),
        "{given}"
    );
    let own_ns = ns_inode(std::process::id(), "cgroup");
    assert_ne!(
        run(
            &d,
            &["--cgroupns", "private"],
            "readlink /proc/self/ns/cgroup"
        ),
        own_ns
    );
    assert_eq!(
        run(&d, &["--cgroupns", "host"], "readlink /proc/self/ns/cgroup"),
        own_ns
    );

    // --ipc shareable, then joined by another container (with its /dev/shm).
    d.run_script(
        "donor",
        &["--ipc", "shareable"],
        "echo shared > /dev/shm/token; sleep 1000",
    );
    let donor = d.pid_of("donor");
    assert_eq!(
        run(
            &d,
            &["--ipc", "container:donor", "--pid", "container:donor"],
            "readlink /proc/self/ns/ipc; cat /dev/shm/token; cat /proc/1/comm"
        ),
        format!("{}\nshared\nsleep", ns_inode(donor, "ipc"))
    );
    d.ok(&[
        "create",
        "--name",
        "joiner",
        "--ipc",
        "container:donor",
        "--pid",
        "container:donor",
        "--uts",
        "host",
        "--cgroupns",
        "private",
        "busybox",
    ]);
    let donor_id = d.inspect("donor")["Id"].as_str().unwrap_or("").to_owned();
    let hc = d.inspect("joiner")["HostConfig"].clone();
    assert_eq!(
        hc["IpcMode"],
        json!(format!("container:{donor_id}")),
        "{hc:#}"
    );
    assert_eq!(
        hc["PidMode"],
        json!(format!("container:{donor_id}")),
        "{hc:#}"
    );
    assert_eq!(hc["UTSMode"], json!("host"), "{hc:#}");
    assert_eq!(hc["CgroupnsMode"], json!("private"), "{hc:#}");
    assert_eq!(
        d.inspect("donor")["HostConfig"]["IpcMode"],
        json!("shareable")
    );

    // Joining a container that is not running, or not shareable: refused.
    d.run_script("private", &[], "sleep 1000");
    d.fails_saying(
        "ipc of a non-shareable container",
        &[
            "run",
            "--rm",
            "--ipc",
            "container:private",
            "busybox",
            "true",
        ],
        "non-shareable IPC",
    );
    d.ok(&["stop", "-t", "0", "donor"]);
    d.fails_saying(
        "pid of a stopped container",
        &["run", "--rm", "--pid", "container:donor", "busybox", "true"],
        "cannot join PID of a non running container",
    );
    let r = d.http(
        "POST",
        "/v1.43/containers/create",
        Some(br#"{"Image":"busybox","HostConfig":{"IpcMode":"container:donor"}}"#),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    // A container created to join one checks at each start that it still
    // runs the same init: never a namespace of whatever has that pid now.
    d.fails_saying(
        "start of a joiner whose target stopped",
        &["start", "joiner"],
        "non running container",
    );
    d.ok(&["start", "donor"]);
    d.fails_saying(
        "start of a joiner whose target restarted",
        &["start", "joiner"],
        "was restarted",
    );

    // --cgroup-parent: the container's cgroup is made below it.
    let parent = format!("hf-e2e-parent-{}", std::process::id());
    let id = d.run_script(
        "child",
        &["--cgroup-parent", &format!("/{parent}")],
        "sleep 1000",
    );
    let dir = if cgroup_v2() {
        format!("/sys/fs/cgroup/{parent}/{}", id.trim())
    } else {
        format!("/sys/fs/cgroup/pids/{parent}/{}", id.trim())
    };
    assert!(Path::new(&dir).is_dir(), "no cgroup {dir}");
    assert_eq!(
        d.inspect("child")["HostConfig"]["CgroupParent"],
        json!(format!("/{parent}"))
    );
    let shm = d.exec_root().join("shm").join(&donor_id);
    let mounted = |path: &Path| {
        std::fs::read_to_string("/proc/mounts")
            .is_ok_and(|m| m.lines().any(|l| l.split(' ').nth(1) == path.to_str()))
    };
    assert!(
        mounted(&shm),
        "the shareable /dev/shm {} is not mounted",
        shm.display()
    );
    d.ok(&["rm", "-f", "child", "private", "donor", "joiner"]);
    assert!(
        !mounted(&shm),
        "the shareable /dev/shm outlived its container"
    );
    // runc leaves the parent behind, empty, in every hierarchy.
    if let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") {
        for h in hierarchies.flatten() {
            let _ = std::fs::remove_dir(h.path().join(&parent));
        }
    }
    let _ = std::fs::remove_dir(Path::new("/sys/fs/cgroup").join(&parent));
}

#[test]
fn init_and_log_drivers() {
    let d = Daemon::start();
    // The init is pid 1; the command is its child.
    assert_eq!(
        run(
            &d,
            &["--init"],
            "cat /proc/1/comm; test $$ != 1 && echo child"
        ),
        "docker-init\nchild"
    );
    d.ok(&["create", "--name", "withinit", "--init", "busybox"]);
    assert_eq!(d.inspect("withinit")["HostConfig"]["Init"], json!(true));
    assert_eq!(
        d.inspect(d.ok(&["create", "busybox"]).trim())["HostConfig"]["Init"],
        Value::Null
    );

    let quiet = d.docker(&[
        "run",
        "-d",
        "--name",
        "quiet",
        "--log-driver",
        "none",
        "busybox",
        "sh",
        "-c",
        "echo hidden; sleep 1000",
    ]);
    assert!(
        quiet.success() && quiet.stderr.contains("--log-driver none"),
        "run --log-driver none, with a warning that nothing is kept: {quiet:?}"
    );
    d.fails_saying(
        "logs of a none-driver container",
        &["logs", "quiet"],
        "configured logging driver does not support reading",
    );
    let hc = d.inspect("quiet")["HostConfig"].clone();
    assert_eq!(
        hc["LogConfig"],
        json!({"Type": "none", "Config": {}}),
        "{hc:#}"
    );

    d.run_detached(
        "local",
        &[
            "--log-driver",
            "local",
            "busybox",
            "sh",
            "-c",
            "echo kept; sleep 1000",
        ],
    );
    d.wait_until("the local log has the line", || {
        d.docker(&["logs", "local"]).stdout.contains("kept")
    });
    assert_eq!(
        d.inspect("local")["HostConfig"]["LogConfig"]["Type"],
        json!("local")
    );
    d.ok(&["rm", "-f", "quiet", "local"]);
}

#[test]
fn bad_values_are_refused_naming_the_option() {
    let d = Daemon::start();
    for (what, args, needle) in [
        ("unknown capability", vec!["--cap-add", "FLY"], "CapAdd"),
        (
            "missing device",
            vec!["--device", "/dev/no-such-device"],
            "no-such-device",
        ),
        (
            "cpu period too small",
            vec!["--cpu-period", "10"],
            "CpuPeriod",
        ),
        (
            "both --cpus and a quota",
            vec!["--cpus", "1", "--cpu-quota", "5000"],
            "NanoCpus",
        ),
        (
            "swap below memory",
            vec!["--memory", "64m", "--memory-swap", "32m"],
            "MemorySwap",
        ),
        (
            "reservation above memory",
            vec!["--memory", "64m", "--memory-reservation", "128m"],
            "MemoryReservation",
        ),
        (
            "an unknown log driver",
            vec!["--log-driver", "syslog"],
            "syslog",
        ),
        (
            "a volume option not honoured",
            vec!["--mount", "type=volume,source=vol1,target=/v,volume-nocopy"],
            "NoCopy",
        ),
        (
            "a bind of nothing",
            vec!["--mount", "type=bind,source=/no/such/dir,target=/x"],
            "does not exist",
        ),
        (
            "a bad propagation",
            vec![
                "--mount",
                "type=bind,source=/tmp,target=/x,bind-propagation=sideways",
            ],
            "propagation",
        ),
        (
            "pid of no container",
            vec!["--pid", "container:nobody"],
            "nobody",
        ),
        ("a bad cgroupns", vec!["--cgroupns", "sideways"], "cgroupns"),
        (
            "none logs with -t",
            vec!["-t", "--log-driver", "none"],
            "LogConfig",
        ),
        (
            "uts host with a hostname",
            vec!["--uts", "host", "-h", "x"],
            "UTS",
        ),
    ] {
        let mut all = vec!["create"];
        all.extend(args.iter().copied());
        all.push("busybox");
        d.fails_saying(what, &all, needle);
    }
    // Values the CLI would refuse itself, through the API.
    for (what, host_config, needle) in [
        (
            "a non-namespaced sysctl",
            json!({"Sysctls": {"vm.swappiness": "1"}}),
            "Sysctls",
        ),
        (
            "net sysctl with host network",
            json!({"NetworkMode": "host", "Sysctls": {"net.ipv4.ip_forward": "1"}}),
            "Sysctls",
        ),
        (
            "ulimit soft above hard",
            json!({"Ulimits": [{"Name": "nofile", "Soft": 10, "Hard": 5}]}),
            "Ulimits",
        ),
        (
            "an unknown ulimit",
            json!({"Ulimits": [{"Name": "wings", "Soft": 1, "Hard": 1}]}),
            "Ulimits",
        ),
        ("negative shm size", json!({"ShmSize": -1}), "ShmSize"),
        ("a relative tmpfs", json!({"Tmpfs": {"rel": ""}}), "Tmpfs"),
        (
            "a bad tmpfs option",
            json!({"Tmpfs": {"/t": "size=1m,wings"}}),
            "Tmpfs",
        ),
        ("a bad cpuset", json!({"CpusetCpus": "0-x"}), "CpusetCpus"),
        (
            "device permissions",
            json!({"Devices": [{"PathOnHost": "/dev/null", "PathInContainer": "/dev/null", "CgroupPermissions": "rwx"}]}),
            "Devices",
        ),
        (
            "a device cgroup rule",
            json!({"DeviceCgroupRules": ["c 10:200 rwx"]}),
            "invalid device cgroup rule format: 'c 10:200 rwx'",
        ),
        (
            "an unknown ipc mode",
            json!({"IpcMode": "sideways"}),
            "IpcMode",
        ),
        (
            "cgroup parent upwards",
            json!({"CgroupParent": "../escape"}),
            "CgroupParent",
        ),
        ("oom score", json!({"OomScoreAdj": 100}), "OomScoreAdj"),
        (
            "log opts with none",
            json!({"LogConfig": {"Type": "none", "Config": {"max-size": "1m"}}}),
            "none",
        ),
    ] {
        let body = json!({"Image": "busybox", "HostConfig": host_config}).to_string();
        let r = d.http("POST", "/v1.43/containers/create", Some(body.as_bytes()));
        let message = r.message().unwrap_or_default();
        assert!(
            r.status == 400 && message.contains(needle),
            "{what}: want 400 naming {needle:?}, got {} {:?}\n{}",
            r.status,
            r.body,
            d.diagnostics()
        );
    }
    d.assert_no_containers("every create was refused");
}

/// Every create option holdfast accepts, through `docker create`, shows back
/// in `docker inspect` as dockerd shows it (API 1.43): one row per option,
/// the JSON pointer dockerd puts it at and the value it shows there. All
/// rows are tried; the failure lists every mismatch.
#[test]
fn each_create_option_round_trips_through_inspect() {
    let d = Daemon::start();
    let image = d.ok(&["image", "inspect", "busybox"]);
    let image: Value = serde_json::from_str(&image).expect("image inspect is JSON");
    let image_env: Vec<Value> = image[0]["Config"]["Env"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut env = vec![json!("A=1")];
    env.extend(
        image_env
            .iter()
            .filter(|e| !e.as_str().is_some_and(|e| e.starts_with("A=")))
            .cloned(),
    );
    let image_id = image[0]["Id"].clone();
    let rows: Vec<(&[&str], &str, Value)> = vec![
        // Nothing given: the image's command, the image by name and by id.
        (&[], "/Config/Cmd", json!(["sh"])),
        (&[], "/Config/Entrypoint", Value::Null),
        (&[], "/Config/Image", json!("busybox")),
        (&[], "/Image", image_id),
        (&[], "/Config/Labels", json!({})),
        (&[], "/Config/Volumes", Value::Null),
        (&["-v", "/anon"], "/Config/Volumes", json!({"/anon": {}})),
        (&["--env", "A=1"], "/Config/Env", Value::Array(env)),
        (&["--label", "k=v"], "/Config/Labels/k", json!("v")),
        (&["--workdir", "/srv"], "/Config/WorkingDir", json!("/srv")),
        (&["--user", "1000:1000"], "/Config/User", json!("1000:1000")),
        (&["--hostname", "box"], "/Config/Hostname", json!("box")),
        // What names what runs anyway is shown back as the client sent it.
        (&[], "/HostConfig/Runtime", json!("runc")),
        (&[], "/HostConfig/Isolation", json!("")),
        (
            &["--runtime", "io.containerd.runc.v2"],
            "/HostConfig/Runtime",
            json!("io.containerd.runc.v2"),
        ),
        (
            &["--isolation", "default"],
            "/HostConfig/Isolation",
            json!("default"),
        ),
        (
            &["--entrypoint", "/bin/echo"],
            "/Config/Entrypoint",
            json!(["/bin/echo"]),
        ),
        // An entrypoint given drops the image's command.
        (&["--entrypoint", "/bin/echo"], "/Config/Cmd", Value::Null),
        (
            &["--stop-signal", "SIGUSR1"],
            "/Config/StopSignal",
            json!("SIGUSR1"),
        ),
        (&["--stop-timeout", "7"], "/Config/StopTimeout", json!(7)),
        (&["--tty"], "/Config/Tty", json!(true)),
        (&["--interactive"], "/Config/OpenStdin", json!(true)),
        (
            &["--expose", "80"],
            "/Config/ExposedPorts",
            json!({"80/tcp": {}}),
        ),
        (
            &["--expose", "53/udp", "--expose", "80"],
            "/Config/ExposedPorts",
            json!({"53/udp": {}, "80/tcp": {}}),
        ),
        (
            &[
                "--health-cmd",
                "true",
                "--health-interval",
                "5s",
                "--health-retries",
                "2",
            ],
            "/Config/Healthcheck",
            json!({"Test": ["CMD-SHELL", "true"], "Interval": 5_000_000_000u64, "Retries": 2}),
        ),
        (
            &["--restart", "on-failure:3"],
            "/HostConfig/RestartPolicy",
            json!({"Name": "on-failure", "MaximumRetryCount": 3}),
        ),
        (&["--rm"], "/HostConfig/AutoRemove", json!(true)),
        (
            &["--memory", "64m"],
            "/HostConfig/Memory",
            json!(67_108_864),
        ),
        (
            &["--memory", "64m", "--memory-swap", "128m"],
            "/HostConfig/MemorySwap",
            json!(134_217_728),
        ),
        (
            &["--memory-reservation", "32m"],
            "/HostConfig/MemoryReservation",
            json!(33_554_432),
        ),
        (
            &["--cpu-shares", "512"],
            "/HostConfig/CpuShares",
            json!(512),
        ),
        (
            &["--cpus", "1.5"],
            "/HostConfig/NanoCpus",
            json!(1_500_000_000u64),
        ),
        (
            &["--cpu-period", "50000", "--cpu-quota", "25000"],
            "/HostConfig/CpuQuota",
            json!(25000),
        ),
        (
            &["--cpu-period", "50000", "--cpu-quota", "25000"],
            "/HostConfig/CpuPeriod",
            json!(50000),
        ),
        (
            &["--cpuset-cpus", "0"],
            "/HostConfig/CpusetCpus",
            json!("0"),
        ),
        (
            &["--cpuset-mems", "0"],
            "/HostConfig/CpusetMems",
            json!("0"),
        ),
        (&["--pids-limit", "50"], "/HostConfig/PidsLimit", json!(50)),
        (
            &["--ulimit", "nofile=100:200"],
            "/HostConfig/Ulimits",
            json!([{"Name": "nofile", "Hard": 200, "Soft": 100}]),
        ),
        (
            &["--shm-size", "32m"],
            "/HostConfig/ShmSize",
            json!(33_554_432),
        ),
        (
            &["--tmpfs", "/run:size=1m"],
            "/HostConfig/Tmpfs",
            json!({"/run": "size=1m"}),
        ),
        (&["--read-only"], "/HostConfig/ReadonlyRootfs", json!(true)),
        // The CLI (20.10 and later) sends capabilities by their CAP_ names.
        (
            &["--cap-add", "NET_ADMIN"],
            "/HostConfig/CapAdd",
            json!(["CAP_NET_ADMIN"]),
        ),
        (
            &["--cap-drop", "CHOWN"],
            "/HostConfig/CapDrop",
            json!(["CAP_CHOWN"]),
        ),
        (&["--privileged"], "/HostConfig/Privileged", json!(true)),
        (
            &["--group-add", "10"],
            "/HostConfig/GroupAdd",
            json!(["10"]),
        ),
        (
            &["--sysctl", "kernel.msgmax=65536"],
            "/HostConfig/Sysctls",
            json!({"kernel.msgmax": "65536"}),
        ),
        (&["--init"], "/HostConfig/Init", json!(true)),
        (
            &["--log-driver", "local"],
            "/HostConfig/LogConfig",
            json!({"Type": "local", "Config": {}}),
        ),
        (
            &["--log-opt", "max-size=1m", "--log-opt", "max-file=2"],
            "/HostConfig/LogConfig",
            json!({"Type": "json-file", "Config": {"max-file": "2", "max-size": "1m"}}),
        ),
        (&["--pid", "host"], "/HostConfig/PidMode", json!("host")),
        (&["--ipc", "host"], "/HostConfig/IpcMode", json!("host")),
        (&["--uts", "host"], "/HostConfig/UTSMode", json!("host")),
        (
            &["--cgroupns", "host"],
            "/HostConfig/CgroupnsMode",
            json!("host"),
        ),
        (
            &["--cgroup-parent", "holdfast-roundtrip"],
            "/HostConfig/CgroupParent",
            json!("holdfast-roundtrip"),
        ),
        (
            &["--device", "/dev/null:/dev/xnull"],
            "/HostConfig/Devices",
            json!([{"PathOnHost": "/dev/null", "PathInContainer": "/dev/xnull", "CgroupPermissions": "rwm"}]),
        ),
        (
            &["--mount", "type=tmpfs,dst=/x"],
            "/HostConfig/Mounts",
            json!([{"Type": "tmpfs", "Target": "/x"}]),
        ),
        (
            &["--mount", "type=bind,src=/tmp,dst=/h,readonly"],
            "/HostConfig/Mounts",
            json!([{"Type": "bind", "Source": "/tmp", "Target": "/h", "ReadOnly": true}]),
        ),
        (
            &["-v", "roundtrip:/data"],
            "/HostConfig/Binds",
            json!(["roundtrip:/data"]),
        ),
        (
            &["--network", "none"],
            "/HostConfig/NetworkMode",
            json!("none"),
        ),
    ];
    let mut wrong = Vec::new();
    for (options, pointer, want) in &rows {
        let mut args = vec!["create"];
        args.extend_from_slice(options);
        args.push("busybox");
        let out = d.docker(&args);
        if !out.success() {
            wrong.push(format!("{options:?}: create failed: {}", out.stderr.trim()));
            continue;
        }
        let id = out.stdout.trim().to_owned();
        let got = d
            .inspect(&id)
            .pointer(pointer)
            .cloned()
            .unwrap_or(Value::Null);
        if got != *want {
            wrong.push(format!(
                "{options:?}: {pointer} is {got}, dockerd shows {want}"
            ));
        }
        d.ok(&["rm", &id]);
    }
    d.ok(&["volume", "rm", "roundtrip"]);
    assert!(
        wrong.is_empty(),
        "{} of {} options do not come back as dockerd shows them:\n{}\n{}",
        wrong.len(),
        rows.len(),
        wrong.join("\n"),
        d.diagnostics()
    );
}

/// An image with defaults of its own (made with `commit --change`): `docker
/// inspect`'s `Config` shows them merged under what was given, as dockerd
/// merges them at create; the containers run as the merged config says,
/// and a commit of one keeps the image's settings.
#[test]
fn image_defaults_merge_into_inspect_as_dockerd_shows_them() {
    let d = Daemon::start();
    d.ok(&["create", "--name", "base", "busybox"]);
    d.ok(&[
        "commit",
        "--change",
        r#"ENTRYPOINT ["/bin/sh", "-c"]"#,
        "--change",
        r#"CMD ["echo hi"]"#,
        "--change",
        "WORKDIR /srv",
        "--change",
        "USER nobody",
        "--change",
        "LABEL from=image",
        "--change",
        "EXPOSE 8080",
        "--change",
        "STOPSIGNAL SIGUSR2",
        "base",
        "defaults:1",
    ]);
    let image_id = d
        .ok(&["image", "inspect", "-f", "{{.Id}}", "defaults:1"])
        .trim()
        .to_owned();
    // (options, command, pointer, what dockerd shows)
    let rows: Vec<(&[&str], &[&str], &str, Value)> = vec![
        (&[], &[], "/Config/Cmd", json!(["echo hi"])),
        (&[], &[], "/Config/Entrypoint", json!(["/bin/sh", "-c"])),
        (&[], &[], "/Config/WorkingDir", json!("/srv")),
        (&[], &[], "/Config/User", json!("nobody")),
        (&[], &[], "/Config/Labels", json!({"from": "image"})),
        (&[], &[], "/Config/ExposedPorts", json!({"8080/tcp": {}})),
        (&[], &[], "/Config/StopSignal", json!("SIGUSR2")),
        (&[], &[], "/Config/Image", json!("defaults:1")),
        (&[], &[], "/Image", json!(image_id)),
        (&[], &[], "/Path", json!("/bin/sh")),
        (&[], &[], "/Args", json!(["-c", "echo hi"])),
        (&[], &["echo bye"], "/Config/Cmd", json!(["echo bye"])),
        (
            &[],
            &["echo bye"],
            "/Config/Entrypoint",
            json!(["/bin/sh", "-c"]),
        ),
        (
            &["--entrypoint", "/bin/echo"],
            &[],
            "/Config/Entrypoint",
            json!(["/bin/echo"]),
        ),
        (
            &["--entrypoint", "/bin/echo"],
            &[],
            "/Config/Cmd",
            Value::Null,
        ),
        (
            &["--workdir", "/tmp"],
            &[],
            "/Config/WorkingDir",
            json!("/tmp"),
        ),
        (&["--user", "0"], &[], "/Config/User", json!("0")),
        (
            &["--label", "k=v"],
            &[],
            "/Config/Labels",
            json!({"from": "image", "k": "v"}),
        ),
        (
            &["--label", "from=me"],
            &[],
            "/Config/Labels",
            json!({"from": "me"}),
        ),
        (
            &["--expose", "80"],
            &[],
            "/Config/ExposedPorts",
            json!({"80/tcp": {}, "8080/tcp": {}}),
        ),
        (
            &["--stop-signal", "SIGTERM"],
            &[],
            "/Config/StopSignal",
            json!("SIGTERM"),
        ),
        (
            &["-v", "/anon"],
            &[],
            "/Config/Volumes",
            json!({"/anon": {}}),
        ),
    ];
    let mut wrong = Vec::new();
    for (options, command, pointer, want) in &rows {
        let mut args = vec!["create"];
        args.extend_from_slice(options);
        args.push("defaults:1");
        args.extend_from_slice(command);
        let out = d.docker(&args);
        if !out.success() {
            wrong.push(format!(
                "{options:?} {command:?}: create failed: {}",
                out.stderr.trim()
            ));
            continue;
        }
        let id = out.stdout.trim().to_owned();
        let got = d
            .inspect(&id)
            .pointer(pointer)
            .cloned()
            .unwrap_or(Value::Null);
        if got != *want {
            wrong.push(format!(
                "{options:?} {command:?}: {pointer} is {got}, dockerd shows {want}"
            ));
        }
        d.ok(&["rm", "-v", &id]);
    }
    assert!(
        wrong.is_empty(),
        "{} of {} rows differ from dockerd:\n{}\n{}",
        wrong.len(),
        rows.len(),
        wrong.join("\n"),
        d.diagnostics()
    );

    // They run as the merged config says, through a restart too.
    assert_eq!(d.ok(&["run", "--rm", "defaults:1"]), "hi\n");
    assert_eq!(
        d.ok(&["run", "--rm", "defaults:1", "pwd; id -un"]),
        "/srv\nnobody\n"
    );
    assert_eq!(
        d.ok(&[
            "run",
            "--rm",
            "--entrypoint",
            "/bin/echo",
            "defaults:1",
            "x"
        ]),
        "x\n"
    );
    d.ok(&["run", "--name", "twice", "defaults:1", "pwd; id -un"]);
    d.ok(&["start", "-a", "twice"]);
    let (out, _) = d.logs("twice");
    assert_eq!(out, "/srv\nnobody\n/srv\nnobody\n", "{}", d.diagnostics());

    // A commit of such a container keeps the image's settings.
    d.ok(&["commit", "twice", "defaults:2"]);
    let config = d.ok(&[
        "image",
        "inspect",
        "-f",
        "{{json .Config.Entrypoint}} {{json .Config.Cmd}} {{.Config.WorkingDir}} {{.Config.User}} {{json .Config.Labels}}",
        "defaults:2",
    ]);
    assert_eq!(
        config.trim(),
        r#"["/bin/sh","-c"] ["pwd; id -un"] /srv nobody {"from":"image"}"#,
        "{}",
        d.diagnostics()
    );
    assert_eq!(d.ok(&["run", "--rm", "defaults:2"]), "/srv\nnobody\n");
}
