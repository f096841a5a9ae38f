//! The CRI's streams on a real holdfastd: `Exec`, `Attach` and
//! `PortForward` answer with a URL on holdfastd's streaming server, and
//! clients connect there as kubelet's proxy does. Kubernetes' own Python
//! client (kubernetes-client/python, its WebSocket channel protocol)
//! execs with stdin, on a terminal it resizes, attaches and forwards a
//! port; a WebSocket client of our own carries 100 MiB each way through a
//! port-forward without loss, breaks an exec's stream (nothing is left
//! running), and keeps an exec across a SIGKILL and restart of holdfastd
//! (the process keeps its container; its exit is recorded). SPDY/3.1, the
//! transport kubectl's requests arrive by, is driven by an independent
//! implementation of it (node-spdy's spdy-transport, from npm), opening
//! streams as client-go does and keeping SPDY/3.1's flow control.

use futures_util::{SinkExt as _, StreamExt as _};
use holdfast_e2e::cri::{Cri, busybox, on_host_network};
use holdfast_e2e::network::BridgeDaemon;
use holdfast_e2e::python::venv_with;
use holdfast_e2e::{Daemon, WAIT_BOUND, run_with_timeout};
use k8s_cri::v1 as cri;
use sha2::{Digest as _, Sha256};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

const SCRIPT_BOUND: Duration = Duration::from_secs(120);

fn pod_config(d: &Daemon, name: &str) -> cri::PodSandboxConfig {
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.to_owned(),
            uid: format!("uid-{name}"),
            namespace: "default".to_owned(),
            attempt: 0,
        }),
        hostname: name.to_owned(),
        log_directory: d
            .root()
            .join(format!("pods/default_{name}"))
            .display()
            .to_string(),
        ..cri::PodSandboxConfig::default()
    }
}

/// A pod on the daemon's bridge with one running container `name`
/// running `script`; the pod's and the container's ids.
async fn pod_with(cri: &mut Cri, d: &Daemon, name: &str, script: &str) -> (String, String) {
    let pod = cri.run_pod(d, pod_config(d, name)).await;
    let id = cri.create(d, &pod, busybox(name, script)).await;
    cri.start(d, &id).await;
    (pod, id)
}

/// `ExecSync`: the exit code and stdout.
async fn exec_sync(cri: &mut Cri, id: &str, cmd: &[&str]) -> (i32, String) {
    let r = cri
        .runtime
        .exec_sync(cri::ExecSyncRequest {
            container_id: id.to_owned(),
            cmd: cmd.iter().map(|s| (*s).to_owned()).collect(),
            timeout: 30,
        })
        .await
        .unwrap_or_else(|e| panic!("ExecSync {cmd:?}: {e}"));
    let r = r.into_inner();
    let mut out = String::from_utf8_lossy(&r.stdout).into_owned();
    if r.exit_code != 0 {
        // what went wrong, for the failure message (never matched on)
        out.push_str(&format!(
            "\n(exit {}: {})",
            r.exit_code,
            String::from_utf8_lossy(&r.stderr)
        ));
    }
    (r.exit_code, out)
}

/// Polls `ExecSync` of `cmd` until its stdout satisfies `ok`; the last
/// stdout. Panics with the logs past [`WAIT_BOUND`].
async fn exec_until(
    cri: &mut Cri,
    d: &Daemon,
    id: &str,
    cmd: &[&str],
    what: &str,
    ok: impl Fn(&str) -> bool,
) -> String {
    let start = Instant::now();
    loop {
        let (code, out) = exec_sync(cri, id, cmd).await;
        if code == 0 && ok(&out) {
            return out;
        }
        assert!(
            start.elapsed() < WAIT_BOUND,
            "{what}: `{}` still shows {out:?}{}",
            cmd.join(" "),
            d.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn exec_request(id: &str, cmd: &[&str], tty: bool, stdin: bool) -> cri::ExecRequest {
    cri::ExecRequest {
        container_id: id.to_owned(),
        cmd: cmd.iter().map(|s| (*s).to_owned()).collect(),
        tty,
        stdin,
        stdout: true,
        stderr: !tty,
    }
}

async fn exec_url(cri: &mut Cri, d: &Daemon, r: cri::ExecRequest) -> String {
    let r = cri
        .runtime
        .exec(r)
        .await
        .unwrap_or_else(|e| panic!("Exec: {e}{}", d.diagnostics()));
    r.into_inner().url
}

async fn port_forward_url(cri: &mut Cri, d: &Daemon, pod: &str, port: i32) -> String {
    let r = cri
        .runtime
        .port_forward(cri::PortForwardRequest {
            pod_sandbox_id: pod.to_owned(),
            port: vec![port],
        })
        .await
        .unwrap_or_else(|e| panic!("PortForward: {e}{}", d.diagnostics()));
    r.into_inner().url
}

/// tests/python/cri_streams.py `what` on `url`: its JSON.
fn python_client(python: &Path, d: &Daemon, args: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/cri_streams.py");
    let out = run_with_timeout(Command::new(python).arg(&script).args(args), SCRIPT_BOUND);
    assert!(
        out.success(),
        "cri_streams.py {args:?} failed ({}):\n--- stdout\n{}\n--- stderr\n{}{}",
        out.code(),
        out.stdout,
        out.stderr,
        d.diagnostics()
    );
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "cri_streams.py {args:?} printed no JSON ({e}): {}",
            out.stdout
        )
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn kubernetes_python_client_execs_attaches_and_forwards_a_port() {
    let tools = tempfile::Builder::new()
        .prefix("hf-e2e-kpy-")
        .tempdir()
        .expect("a temporary directory");
    let python = venv_with(tools.path(), &["kubernetes==31.0.0"]);
    let b = BridgeDaemon::start();
    let d = &b.d;
    let mut cri = Cri::of(d);
    let script = "mkdir -p /www && echo hello-from-pod > /www/index.html \
                  && exec httpd -f -p 8080 -h /www";
    let (pod, web) = pod_with(&mut cri, d, "streams", script).await;

    // exec, no terminal: stdin in, stdout and stderr apart, the exit code
    let cmd = ["sh", "-c", "read x; echo out:$x; echo err:$x >&2; exit 3"];
    let url = exec_url(&mut cri, d, exec_request(&web, &cmd, false, true)).await;
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let out = python_client(&python, d, &["exec-stdin", &url]);
    assert_eq!(out["stdout"], "out:hello\n", "{out}");
    assert_eq!(out["stderr"], "err:hello\n", "{out}");
    assert_eq!(out["returncode"], 3, "{out}");
    // a token is good once
    let again = python_client_fails(&python, &["exec-stdin", &url]);
    assert!(
        again.contains("404"),
        "a used token was served again: {again}"
    );

    // exec on a terminal: resized by the client before it asks its size
    let url = exec_url(&mut cri, d, exec_request(&web, &["sh"], true, true)).await;
    let out = python_client(&python, d, &["exec-tty", &url]);
    assert!(
        out["stdout"].as_str().is_some_and(|s| s.contains("40 100")),
        "the terminal was not resized: {out}"
    );
    assert_eq!(out["returncode"], 0, "{out}");

    // port-forward to the pod's own loopback
    exec_until(
        &mut cri,
        d,
        &web,
        &["wget", "-q", "-O-", "http://127.0.0.1:8080/"],
        "httpd serves",
        |out| out.contains("hello-from-pod"),
    )
    .await;
    let url = port_forward_url(&mut cri, d, &pod, 8080).await;
    let out = python_client(&python, d, &["port-forward", &url, "8080"]);
    assert!(
        out["response"]
            .as_str()
            .is_some_and(|s| s.contains("200 OK") && s.contains("hello-from-pod")),
        "{out}"
    );
    assert!(out["error"].is_null(), "{out}");
    // a port nobody listens on: said on the error channel
    let url = port_forward_url(&mut cri, d, &pod, 8081).await;
    let out = python_client(&python, d, &["port-forward", &url, "8081"]);
    assert!(
        out["error"]
            .as_str()
            .is_some_and(|s| s.contains("error forwarding port 8081")),
        "{out}"
    );

    // attach to a container that reads one line from its stdin
    let mut config = busybox("reader", "read x; echo got:$x");
    config.stdin = true;
    config.stdin_once = true;
    let reader = cri.create(d, &pod, config).await;
    cri.start(d, &reader).await;
    let r = cri
        .runtime
        .attach(cri::AttachRequest {
            container_id: reader.clone(),
            stdin: true,
            tty: false,
            stdout: true,
            stderr: true,
        })
        .await
        .unwrap_or_else(|e| panic!("Attach: {e}{}", d.diagnostics()));
    let out = python_client(&python, d, &["attach", &r.into_inner().url]);
    assert!(
        out["stdout"]
            .as_str()
            .is_some_and(|s| s.contains("got:through-attach")),
        "{out}"
    );
    assert_eq!(out["returncode"], 0, "{out}");
    let status = cri.wait_exited(d, &reader).await;
    assert_eq!(status.exit_code, 0);
    cri.remove_pod(d, &pod).await;
}

/// node-spdy's spdy-transport under `dir`; the node to run it with.
fn spdy_client(dir: &Path) -> std::path::PathBuf {
    let out = run_with_timeout(
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
            .arg(dir)
            .arg("spdy-transport@3.0.0"),
        holdfast_e2e::python::PIP_BOUND,
    );
    assert!(
        out.success(),
        "npm install spdy-transport failed ({}):\n{}\n{}",
        out.code(),
        out.stdout,
        out.stderr
    );
    dir.join("node_modules")
}

/// tests/node/cri_spdy.js with `args`: its JSON.
fn node_client(modules: &Path, d: &Daemon, args: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("node/cri_spdy.js");
    let out = run_with_timeout(
        Command::new("node")
            .env("NODE_PATH", modules)
            .arg(&script)
            .args(args),
        SCRIPT_BOUND,
    );
    assert!(
        out.success(),
        "cri_spdy.js {args:?} failed ({}):\n--- stdout\n{}\n--- stderr\n{}{}",
        out.code(),
        out.stdout,
        out.stderr,
        d.diagnostics()
    );
    serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("cri_spdy.js {args:?} printed no JSON ({e}): {}", out.stdout))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_independent_spdy_client_execs_and_forwards_a_port() {
    let tools = tempfile::Builder::new()
        .prefix("hf-e2e-spdy-")
        .tempdir()
        .expect("a temporary directory");
    let modules = spdy_client(tools.path());
    let b = BridgeDaemon::start();
    let d = &b.d;
    let mut cri = Cri::of(d);
    let script = "mkdir -p /www && echo hello-over-spdy > /www/index.html \
                  && exec httpd -f -p 8080 -h /www";
    let (pod, web) = pod_with(&mut cri, d, "spdy", script).await;

    // stdin past SPDY's 64 KiB window, echoed back whole; the status
    let url = exec_url(
        &mut cri,
        d,
        exec_request(&web, &["sh", "-c", "cat; exit 5"], false, true),
    )
    .await;
    let out = node_client(&modules, d, &["exec", &url, "300000"]);
    assert_eq!(out["version"], "v4.channel.k8s.io", "{out}");
    assert_eq!(out["stdout_bytes"], 300_000, "{out}");
    assert_eq!(out["stdout_sha256"], out["sent_sha256"], "{out}");
    assert_eq!(out["status"]["reason"], "NonZeroExitCode", "{out}");
    assert_eq!(
        out["status"]["details"]["causes"][0]["message"], "5",
        "{out}"
    );

    // a terminal, resized
    let url = exec_url(&mut cri, d, exec_request(&web, &["sh"], true, true)).await;
    let out = node_client(&modules, d, &["exec-tty", &url]);
    assert!(
        out["stdout"].as_str().is_some_and(|s| s.contains("40 100")),
        "the terminal was not resized: {out}"
    );
    assert_eq!(out["status"]["status"], "Success", "{out}");

    // port forwarding: the port named by the streams
    exec_until(
        &mut cri,
        d,
        &web,
        &["wget", "-q", "-O-", "http://127.0.0.1:8080/"],
        "httpd serves",
        |out| out.contains("hello-over-spdy"),
    )
    .await;
    let url = port_forward_url(&mut cri, d, &pod, 8080).await;
    let out = node_client(&modules, d, &["port-forward", &url, "8080"]);
    assert_eq!(out["version"], "portforward.k8s.io", "{out}");
    assert!(
        out["response"]
            .as_str()
            .is_some_and(|s| s.contains("hello-over-spdy")),
        "{out}"
    );
    assert_eq!(out["error"], "", "{out}");
    let url = port_forward_url(&mut cri, d, &pod, 8081).await;
    let out = node_client(&modules, d, &["port-forward", &url, "8081"]);
    assert!(
        out["error"]
            .as_str()
            .is_some_and(|s| s.contains("error forwarding port 8081")),
        "{out}"
    );
    cri.remove_pod(d, &pod).await;
}

/// The Python client run on a URL that must be refused: its stderr.
fn python_client_fails(python: &Path, args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/cri_streams.py");
    let out = run_with_timeout(Command::new(python).arg(&script).args(args), SCRIPT_BOUND);
    assert!(!out.success(), "{args:?} was served: {}", out.stdout);
    out.stderr
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_are_checked_before_a_url_is_given() {
    let d = Daemon::start();
    let mut cri = Cri::of(&d);
    let mut config = pod_config(&d, "checks");
    config.linux = Some(cri::LinuxPodSandboxConfig {
        security_context: Some(cri::LinuxSandboxSecurityContext {
            namespace_options: Some(cri::NamespaceOption {
                network: 2, // NODE: no bridge here
                ..cri::NamespaceOption::default()
            }),
            ..cri::LinuxSandboxSecurityContext::default()
        }),
        ..cri::LinuxPodSandboxConfig::default()
    });
    let pod = cri.run_pod(&d, config).await;
    let done = cri.create(&d, &pod, busybox("done", "exit 0")).await;
    cri.start(&d, &done).await;
    cri.wait_exited(&d, &done).await;
    let refused = |r: Result<tonic::Response<cri::ExecResponse>, tonic::Status>| {
        r.expect_err("refused").code()
    };
    let mut r = exec_request(&done, &["true"], false, false);
    assert_eq!(
        refused(cri.runtime.exec(r.clone()).await),
        tonic::Code::FailedPrecondition,
        "an exec in a container that is not running"
    );
    r.container_id = "no-such".to_owned();
    assert_eq!(
        refused(cri.runtime.exec(r.clone()).await),
        tonic::Code::NotFound
    );
    let mut r = exec_request(&done, &["true"], true, false);
    r.stderr = true;
    assert_eq!(
        refused(cri.runtime.exec(r).await),
        tonic::Code::InvalidArgument,
        "a terminal with a separate stderr"
    );
    let r = cri::ExecRequest {
        container_id: done.clone(),
        cmd: vec!["true".to_owned()],
        ..cri::ExecRequest::default()
    };
    assert_eq!(
        refused(cri.runtime.exec(r).await),
        tonic::Code::InvalidArgument,
        "no stream at all"
    );
    let bad_port = cri
        .runtime
        .port_forward(cri::PortForwardRequest {
            pod_sandbox_id: pod.clone(),
            port: vec![70000],
        })
        .await;
    assert_eq!(
        bad_port.expect_err("refused").code(),
        tonic::Code::InvalidArgument
    );
    // an unknown token: 404, nothing served
    let url = port_forward_url(&mut cri, &d, &pod, 80).await;
    let base = url.rsplit_once('/').expect("a token").0;
    let unknown = format!("{}/not-a-token", base.replace("http://", "ws://"));
    match tokio_tungstenite::connect_async(unknown).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 404),
        other => panic!("an unknown token was served: {other:?}"),
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects to a stream URL with `protocol`, as kubelet's proxy does.
async fn connect(url: &str, protocol: &str, d: &Daemon) -> Ws {
    let mut request = url
        .replace("http://", "ws://")
        .into_client_request()
        .expect("a request");
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        protocol.parse().expect("a header value"),
    );
    let (ws, response) = tokio_tungstenite::connect_async(request)
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}{}", d.diagnostics()));
    assert_eq!(
        response
            .headers()
            .get("Sec-WebSocket-Protocol")
            .and_then(|v| v.to_str().ok()),
        Some(protocol)
    );
    ws
}

/// The next binary message: its channel and bytes; `None` at the end.
async fn next_frame(ws: &mut Ws) -> Option<(u8, Vec<u8>)> {
    loop {
        match tokio::time::timeout(WAIT_BOUND, ws.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) => {
                let (&channel, data) = b.split_first()?;
                return Some((channel, data.to_vec()));
            }
            Ok(Some(Ok(Message::Close(_)) | Err(_)) | None) => return None,
            Ok(Some(Ok(_))) => {}
            Err(_) => panic!("no message within {WAIT_BOUND:?}"),
        }
    }
}

/// 100 MiB of bytes that differ (a counter through SHA-256), in chunks.
fn payload() -> impl Iterator<Item = Vec<u8>> {
    const CHUNK: usize = 32 * 1024;
    (0..(100usize << 20) / CHUNK).map(|i| {
        let seed = Sha256::digest(i.to_le_bytes());
        seed.iter().copied().cycle().take(CHUNK).collect()
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_port_forward_carries_100_mib_each_way_without_loss() {
    let b = BridgeDaemon::start();
    let d = &b.d;
    let mut cri = Cri::of(d);
    // nc's stdin held open: at its end nc would end its side, and the
    // forward with it (as containerd's plugin ends one a second later).
    let script = "(sleep 100000 | nc -l -p 9000 | sha256sum > /tmp/up.sum) & \
                  mkdir -p /www && head -c 104857600 /dev/urandom > /www/big \
                  && exec httpd -f -p 8080 -h /www";
    let (pod, id) = pod_with(&mut cri, d, "bulk", script).await;
    exec_until(
        &mut cri,
        d,
        &id,
        &[
            "sh",
            "-c",
            "wget -q -O /dev/null http://127.0.0.1:8080/big && echo serving",
        ],
        "httpd serves the big file",
        |out| out.contains("serving"),
    )
    .await;

    // up: 100 MiB into `nc | sha256sum` in the pod
    let url = port_forward_url(&mut cri, d, &pod, 9000).await;
    let mut ws = connect(&url, "v4.channel.k8s.io", d).await;
    assert_eq!(
        next_frame(&mut ws).await,
        Some((0, 9000u16.to_le_bytes().to_vec()))
    );
    assert_eq!(
        next_frame(&mut ws).await,
        Some((1, 9000u16.to_le_bytes().to_vec()))
    );
    let mut sent = Sha256::new();
    for chunk in payload() {
        sent.update(&chunk);
        let mut message = vec![0u8];
        message.extend_from_slice(&chunk);
        ws.send(Message::Binary(message.into()))
            .await
            .unwrap_or_else(|e| panic!("send: {e}{}", d.diagnostics()));
    }
    ws.close(None).await.expect("close");
    while next_frame(&mut ws).await.is_some() {}
    let sent = hex::encode(sent.finalize());
    let got = exec_until(
        &mut cri,
        d,
        &id,
        &["cat", "/tmp/up.sum"],
        "the pod's sum of what was sent",
        |out| !out.is_empty(),
    )
    .await;
    assert!(got.starts_with(&sent), "sent {sent}, the pod got {got}");

    // down: the 100 MiB file over HTTP, through a forward to httpd
    let (_, want) = exec_sync(&mut cri, &id, &["sha256sum", "/www/big"]).await;
    let url = port_forward_url(&mut cri, d, &pod, 8080).await;
    let mut ws = connect(&url, "v4.channel.k8s.io", d).await;
    let mut request = vec![0u8];
    request.extend_from_slice(b"GET /big HTTP/1.0\r\n\r\n");
    ws.send(Message::Binary(request.into()))
        .await
        .expect("send");
    let mut response = Vec::new();
    let mut first_on_data = true;
    while let Some((channel, data)) = next_frame(&mut ws).await {
        match channel {
            0 if first_on_data => first_on_data = false,
            0 => response.extend_from_slice(&data),
            1 if data.len() > 2 => panic!("error: {}", String::from_utf8_lossy(&data)),
            _ => {}
        }
    }
    let body_at = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP response")
        + 4;
    let body = &response[body_at..];
    assert_eq!(body.len(), 100 << 20, "bytes lost or added");
    let got = hex::encode(Sha256::digest(body));
    assert!(
        want.starts_with(&got),
        "the pod has {want}, the client got {got}"
    );
    cri.remove_pod(d, &pod).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_exec_stream_leaves_nothing_running_and_a_restart_keeps_an_exec() {
    let mut d = Daemon::start();
    let mut cri = Cri::of(&d);
    let pod = cri
        .run_pod(&d, on_host_network(pod_config(&d, "breaks")))
        .await;
    let id = cri
        .create(&d, &pod, busybox("app", "exec sleep 100000"))
        .await;
    cri.start(&d, &id).await;

    // the client goes away mid-exec: the process is killed
    let url = exec_url(
        &mut cri,
        &d,
        exec_request(&id, &["sleep", "4242"], false, false),
    )
    .await;
    let mut ws = connect(&url, "v4.channel.k8s.io", &d).await;
    assert_eq!(
        next_frame(&mut ws).await,
        Some((1, Vec::new())),
        "the ready message"
    );
    let ps = ["ps", "-o", "args"];
    exec_until(&mut cri, &d, &id, &ps, "the exec runs", |o| {
        o.contains("sleep 4242")
    })
    .await;
    drop(ws);
    exec_until(&mut cri, &d, &id, &ps, "the abandoned exec is gone", |o| {
        !o.contains("sleep 4242")
    })
    .await;

    // holdfastd killed mid-exec: the process runs on, its end is recorded
    let cmd = [
        "sh",
        "-c",
        "while [ ! -e /tmp/go ]; do sleep 0.1; done; exit 7",
    ];
    let url = exec_url(&mut cri, &d, exec_request(&id, &cmd, false, false)).await;
    let mut ws = connect(&url, "v4.channel.k8s.io", &d).await;
    assert_eq!(
        next_frame(&mut ws).await,
        Some((1, Vec::new())),
        "the ready message"
    );
    let exec_id = {
        let start = Instant::now();
        loop {
            let out = d.docker(&["inspect", "--format", "{{json .ExecIDs}}", &id]);
            let ids: Vec<String> = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
            // this exec's, not the killed one's (its end may not be in yet)
            let ours = ids.into_iter().find(|exec_id| {
                let v = d.http("GET", &format!("/exec/{exec_id}/json"), None).json();
                v.is_some_and(|v| {
                    v["ProcessConfig"]["arguments"]
                        .to_string()
                        .contains("tmp/go")
                })
            });
            if let Some(exec_id) = ours {
                break exec_id;
            }
            assert!(
                start.elapsed() < WAIT_BOUND,
                "no exec listed{}",
                d.diagnostics()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    d.sigkill();
    drop(ws);
    d.restart();
    let mut cri = Cri::of(&d);
    let (_, ps) = exec_sync(&mut cri, &id, &["ps", "-o", "args"]).await;
    assert!(
        ps.contains("tmp/go"),
        "the exec did not outlive holdfastd: {ps}{}",
        d.diagnostics()
    );
    exec_sync(&mut cri, &id, &["touch", "/tmp/go"]).await;
    let start = Instant::now();
    loop {
        let r = d.http("GET", &format!("/exec/{exec_id}/json"), None);
        let v = r.json().unwrap_or_default();
        if v["Running"] == false && v["ExitCode"] == 7 {
            break;
        }
        assert!(
            start.elapsed() < WAIT_BOUND,
            "the exec's end was not recorded: {} {}{}",
            r.status,
            r.body,
            d.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Reads a remote-command stream to its end: stdout's bytes and the
/// status on the error channel.
async fn read_to_end(ws: &mut Ws) -> (String, serde_json::Value) {
    let (mut stdout, mut status) = (Vec::new(), serde_json::Value::Null);
    while let Some((channel, data)) = next_frame(ws).await {
        match channel {
            1 => stdout.extend_from_slice(&data),
            3 => status = serde_json::from_slice(&data).unwrap_or(serde_json::Value::Null),
            _ => {}
        }
    }
    (String::from_utf8_lossy(&stdout).into_owned(), status)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_stream_is_closed_and_a_busy_one_is_not() {
    // kubelet's --streaming-connection-idle-timeout, made short
    let d = Daemon::start_with(&["--cri-stream-idle-timeout", "3"]);
    let mut cri = Cri::of(&d);
    let pod = cri
        .run_pod(&d, on_host_network(pod_config(&d, "idle")))
        .await;
    let id = cri
        .create(&d, &pod, busybox("echo", "exec nc -ll -p 39077 -e cat"))
        .await;
    cri.start(&d, &id).await;

    // busy for longer than the limit, never idle as long: it runs to its end
    let busy = "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do echo $i; sleep 0.3; done; exit 3";
    let url = exec_url(
        &mut cri,
        &d,
        exec_request(&id, &["sh", "-c", busy], false, false),
    )
    .await;
    let mut ws = connect(&url, "v4.channel.k8s.io", &d).await;
    let (stdout, status) = read_to_end(&mut ws).await;
    let want: String = (1..=15).map(|i| format!("{i}\n")).collect();
    assert_eq!(stdout, want, "{status}{}", d.diagnostics());
    assert_eq!(status["reason"], "NonZeroExitCode", "{status}");

    // silent past the limit: closed, said on the error channel, killed
    let url = exec_url(
        &mut cri,
        &d,
        exec_request(&id, &["sleep", "4343"], false, false),
    )
    .await;
    let mut ws = connect(&url, "v4.channel.k8s.io", &d).await;
    let (_, status) = read_to_end(&mut ws).await;
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("idle for 3s")),
        "{status}{}",
        d.diagnostics()
    );
    let ps = ["ps", "-o", "args"];
    exec_until(&mut cri, &d, &id, &ps, "the idle exec is gone", |o| {
        !o.contains("sleep 4343")
    })
    .await;

    // a port-forward: bytes keep it, silence closes it
    let url = port_forward_url(&mut cri, &d, &pod, 39077).await;
    let mut ws = connect(&url, "v4.channel.k8s.io", &d).await;
    let port = 39077u16.to_le_bytes().to_vec();
    assert_eq!(next_frame(&mut ws).await, Some((0, port.clone())));
    assert_eq!(next_frame(&mut ws).await, Some((1, port)));
    for i in 0..8 {
        let line = format!("ping {i}\n");
        let mut message = vec![0u8];
        message.extend_from_slice(line.as_bytes());
        ws.send(Message::Binary(message.into()))
            .await
            .unwrap_or_else(|e| panic!("send: {e}{}", d.diagnostics()));
        assert_eq!(
            next_frame(&mut ws).await,
            Some((0, line.into_bytes())),
            "{}",
            d.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let started = Instant::now();
    while next_frame(&mut ws).await.is_some() {}
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "closed {:?} after the last byte, before the limit{}",
        started.elapsed(),
        d.diagnostics()
    );
    cri.remove_pod(&d, &pod).await;
}
