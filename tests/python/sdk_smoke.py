"""Smoke test of holdfastd through the Python Docker SDK (`pip install docker`).

Usage: sdk_smoke.py unix:///path/to/holdfast.sock /path/to/image.docker.tar IMAGE_REF REGISTRY_REF

REGISTRY_REF names an image in a registry on loopback (`127.0.0.1:PORT/app:1`).

Exits non-zero with a traceback at the first thing that does not hold.
"""

import io
import socket
import struct
import sys
import tarfile
import time

import docker

DEADLINE_S = 60


def step(name):
    print(f"-- {name}", flush=True)


def wait_for(what, condition):
    deadline = time.time() + DEADLINE_S
    while not condition():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


def raw_socket(hijacked):
    """The connection beneath what the SDK hands back for `socket=True`."""
    return getattr(hijacked, "_sock", hijacked)


def read_to_end(conn):
    """Everything the engine sends until it ends the stream (a clean end:
    a reset would raise)."""
    conn.settimeout(DEADLINE_S)
    got = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return got
        got += chunk


def wait_for_output(conn, wanted):
    """Reads until `wanted` has come."""
    conn.settimeout(DEADLINE_S)
    got = b""
    while wanted not in got:
        chunk = conn.recv(65536)
        assert chunk, f"the stream ended before {wanted!r}: {got!r}"
        got += chunk


def demultiplexed(data):
    """The multiplexed stream's payloads, joined per stream (1 stdout, 2 stderr)."""
    out = {}
    while data:
        assert len(data) >= 8, data
        kind, size = data[0], struct.unpack(">I", data[4:8])[0]
        out[kind] = out.get(kind, b"") + data[8 : 8 + size]
        data = data[8 + size :]
    return out


def main():
    base_url, tarball, image_ref, registry_ref = sys.argv[1:5]
    client = docker.DockerClient(base_url=base_url, version="auto", timeout=60)
    since = int(time.time()) - 1

    step("ping, version, info")
    assert client.ping() is True
    version = client.version()
    major, minor = (int(x) for x in version["ApiVersion"].split("."))
    assert (major, minor) >= (1, 43), version
    info = client.info()
    assert info["Containers"] == 0, info
    assert info["Images"] >= 1, info

    step("containers.run attached, removed")
    out = client.containers.run("busybox", ["echo", "hello-sdk"], remove=True)
    assert out == b"hello-sdk\n", out
    assert client.containers.list(all=True) == [], client.containers.list(all=True)

    step("containers.run attached, failing")
    try:
        client.containers.run(
            "busybox", ["sh", "-c", "echo oops >&2; exit 3"], name="failing"
        )
        raise AssertionError("a failing run must raise ContainerError")
    except docker.errors.ContainerError as e:
        assert e.exit_status == 3, e.exit_status
        assert b"oops" in (e.stderr or b""), e.stderr
    failing = client.containers.get("failing")
    assert failing.status == "exited", failing.status
    assert failing.attrs["State"]["ExitCode"] == 3, failing.attrs["State"]

    step("containers.run detached, list, get")
    web = client.containers.run(
        "busybox",
        ["sh", "-c", "trap 'exit 0' TERM; while true; do echo tick; sleep 0.2; done"],
        detach=True,
        name="sdk-web",
        labels={"suite": "e2e"},
    )
    web.reload()
    assert web.status == "running", web.status
    assert web.attrs["State"]["Pid"] > 0, web.attrs["State"]
    assert web.name == "sdk-web", web.name
    assert web.labels == {"suite": "e2e"}, web.labels
    running = [c.id for c in client.containers.list()]
    assert running == [web.id], running
    everything = sorted(c.id for c in client.containers.list(all=True))
    assert everything == sorted([web.id, failing.id]), everything
    labelled = [c.id for c in client.containers.list(filters={"label": "suite=e2e"})]
    assert labelled == [web.id], labelled
    exited = [c.id for c in client.containers.list(all=True, filters={"status": "exited"})]
    assert exited == [failing.id], exited
    assert client.containers.get("sdk-web").id == web.id
    assert client.containers.get(web.id[:12]).id == web.id

    step("logs, streamed logs")
    wait_for("sdk-web logs a tick", lambda: b"tick" in web.logs())
    assert web.logs(tail=1) == b"tick\n", web.logs(tail=1)
    stream = web.logs(stream=True, follow=True, tail=0)
    assert next(stream).startswith(b"tick"), "a followed log yields new lines"
    stream.close()

    step("stop, wait, remove")
    web.stop(timeout=5)
    result = web.wait()
    assert result["StatusCode"] == 0, result
    web.reload()
    assert web.status == "exited", web.status
    web.remove()
    try:
        client.containers.get("sdk-web")
        raise AssertionError("a removed container must be gone")
    except docker.errors.NotFound:
        pass

    step("wait for an exit code")
    w = client.containers.run("busybox", ["sh", "-c", "sleep 1; exit 7"], detach=True)
    assert w.wait(timeout=30)["StatusCode"] == 7
    w.reload()
    assert w.attrs["State"]["ExitCode"] == 7, w.attrs["State"]
    w.remove()
    failing.remove()
    assert client.containers.list(all=True) == []

    step("exec_run, top, stats, rename, pause, unpause, update, kill with a signal name")
    box = client.containers.run(
        "busybox",
        ["sh", "-c", "trap 'exit 9' USR1; while true; do sleep 0.1; done"],
        detach=True,
        name="sdk-box",
    )
    code, out = box.exec_run(["sh", "-c", "echo in-exec; exit 4"])
    assert (code, out) == (4, b"in-exec\n"), (code, out)
    code, (so, se) = box.exec_run(["sh", "-c", "echo o; echo e >&2"], demux=True)
    assert (code, so, se) == (0, b"o\n", b"e\n"), (code, so, se)
    # Repeated: the SDK reads the upgraded socket beneath the buffer it read
    # the 101 through, so output sent with the headers would be lost.
    for _ in range(10):
        streamed = box.exec_run(["sh", "-c", "echo a; echo b"], stream=True)
        streamed = b"".join(streamed.output)
        assert streamed == b"a\nb\n", streamed
    code, out = box.exec_run("id -u", user="nobody", workdir="/tmp", environment={"X": "1"})
    assert (code, out) == (0, b"65534\n"), (code, out)
    top = box.top()
    assert "PID" in top["Titles"] and top["Processes"], top
    stats = box.stats(stream=False)
    assert stats["cpu_stats"]["cpu_usage"]["total_usage"] > 0, stats
    assert stats["name"] == "/sdk-box", stats["name"]
    box.rename("sdk-box2")
    box.reload()
    assert box.name == "sdk-box2", box.name
    box.pause()
    box.reload()
    assert box.status == "paused" and box.attrs["State"]["Paused"], box.attrs["State"]
    try:
        box.exec_run("true")
        raise AssertionError("exec into a paused container was accepted")
    except docker.errors.APIError as e:
        assert e.status_code == 409 and "paused" in str(e), e
    box.unpause()
    box.reload()
    assert box.status == "running" and not box.attrs["State"]["Paused"], box.attrs["State"]
    box.update(mem_limit="96m", cpu_shares=256)
    box.reload()
    hc = box.attrs["HostConfig"]
    assert (hc["Memory"], hc["CpuShares"]) == (96 << 20, 256), hc
    box.update(restart_policy={"Name": "on-failure", "MaximumRetryCount": 1})
    box.reload()
    assert box.attrs["HostConfig"]["RestartPolicy"]["Name"] == "on-failure", box.attrs
    step("put_archive, get_archive")
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w") as t:
        info = tarfile.TarInfo("sdk.txt")
        info.size = len(b"from the sdk\n")
        t.addfile(info, io.BytesIO(b"from the sdk\n"))
    assert box.put_archive("/tmp", payload.getvalue()) is True
    code, out = box.exec_run(["cat", "/tmp/sdk.txt"])
    assert (code, out) == (0, b"from the sdk\n"), (code, out)
    chunks, stat = box.get_archive("/tmp/sdk.txt")
    assert stat["name"] == "sdk.txt" and stat["size"] == 13, stat
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as t:
        member = t.extractfile("sdk.txt")
        assert member is not None and member.read() == b"from the sdk\n"
    step("exec with a TTY, exec on the hijacked socket, detach keys")
    # A TTY exec's output is the process's bytes, raw and in order, whole,
    # streamed or demultiplexed, and nothing of the exec before it.
    script = ["sh", "-c", "for i in 1 2 3; do echo line$i; done"]
    lines = b"line1\r\nline2\r\nline3\r\n"
    for _ in range(5):
        code, out = box.exec_run(script, tty=True)
        assert (code, out) == (0, lines), (code, out)
        streamed = b"".join(box.exec_run(script, tty=True, stream=True).output)
        assert streamed == lines, streamed
        code, out = box.exec_run(script, tty=True, demux=True)
        assert (code, out) == (0, (lines, None)), (code, out)
    api = client.api
    # Without a TTY: stdin in, the multiplexed streams out, the exit code after.
    exec_id = api.exec_create(
        box.id, ["sh", "-c", "cat; echo done >&2; exit 5"], stdin=True
    )["Id"]
    conn = raw_socket(api.exec_start(exec_id, socket=True))
    conn.sendall(b"piped\n")
    conn.shutdown(socket.SHUT_WR)
    streams = demultiplexed(read_to_end(conn))
    assert streams == {1: b"piped\n", 2: b"done\n"}, streams
    conn.close()
    wait_for("the exec is over", lambda: not api.exec_inspect(exec_id)["Running"])
    assert api.exec_inspect(exec_id)["ExitCode"] == 5, api.exec_inspect(exec_id)
    # With a TTY: the raw stream, the terminal's echo included.
    exec_id = api.exec_create(
        box.id, ["sh", "-c", "read x; echo got:$x; exit 6"], stdin=True, tty=True
    )["Id"]
    conn = raw_socket(api.exec_start(exec_id, socket=True, tty=True))
    conn.sendall(b"abc\n")
    out = read_to_end(conn)
    assert out == b"abc\r\ngot:abc\r\n", out
    conn.close()
    wait_for("the TTY exec is over", lambda: not api.exec_inspect(exec_id)["Running"])
    assert api.exec_inspect(exec_id)["ExitCode"] == 6, api.exec_inspect(exec_id)
    # An exec's own detach keys end its session, not its process.
    exec_id = api._result(
        api._post_json(
            api._url("/containers/{0}/exec", box.id),
            data={
                "Cmd": ["sh", "-c", "echo ready; sleep 1000"],
                "AttachStdin": True,
                "AttachStdout": True,
                "Tty": True,
                "DetachKeys": "ctrl-x,x",
            },
        ),
        True,
    )["Id"]
    conn = raw_socket(api.exec_start(exec_id, socket=True, tty=True))
    wait_for_output(conn, b"ready")
    conn.sendall(b"\x18x")
    read_to_end(conn)
    conn.close()
    assert api.exec_inspect(exec_id)["Running"], api.exec_inspect(exec_id)
    # A terminal container: attach's detachKeys end the attach cleanly, and
    # the container runs on.
    term = client.containers.run(
        "busybox", "sh", tty=True, stdin_open=True, detach=True, name="sdk-term"
    )
    conn = raw_socket(
        api.attach_socket(
            term.id,
            params={"stdin": 1, "stdout": 1, "stream": 1, "detachKeys": "ctrl-x,x"},
        )
    )
    conn.sendall(b"echo attached-$((40+2))\n")
    wait_for_output(conn, b"attached-42")
    conn.sendall(b"\x18x")
    read_to_end(conn)
    conn.close()
    term.reload()
    assert term.status == "running", term.status
    term.remove(force=True)

    step("an untagged image: commit without a repository, used by its ID")
    untagged = box.commit()
    assert untagged.tags == [] and untagged.id.startswith("sha256:"), untagged.attrs
    dangling = [i.id for i in client.images.list(filters={"dangling": True})]
    assert untagged.id in dangling, dangling
    assert client.images.get(untagged.id).attrs["RepoTags"] == [], untagged.attrs
    out = client.containers.run(untagged.id, ["cat", "/tmp/sdk.txt"], remove=True)
    assert out == b"from the sdk\n", out
    client.images.remove(untagged.id)
    try:
        client.images.get(untagged.id)
        raise AssertionError("a removed untagged image is still there")
    except docker.errors.ImageNotFound:
        pass

    box.kill(signal="SIGUSR1")
    assert box.wait(timeout=30)["StatusCode"] == 9
    # With no stop signal configured, any kill means "stay down" (dockerd's rule).
    box.reload()
    assert box.status == "exited", box.status
    box.remove(force=True)
    assert client.containers.list(all=True) == []

    step("a restart policy given at run")
    policed = client.containers.run(
        "busybox",
        ["sh", "-c", "exit 1"],
        detach=True,
        restart_policy={"Name": "on-failure", "MaximumRetryCount": 2},
    )
    wait_for(
        "the on-failure policy gives up after 2 restarts",
        lambda: (policed.reload() or True)
        and policed.attrs["RestartCount"] == 2
        and policed.status == "exited",
    )
    assert policed.attrs["HostConfig"]["RestartPolicy"] == {
        "Name": "on-failure",
        "MaximumRetryCount": 2,
    }, policed.attrs["HostConfig"]["RestartPolicy"]
    policed.remove()

    step("images.load, images.list, images.get")
    with open(tarball, "rb") as f:
        loaded = client.images.load(f.read())
    assert any(image_ref in i.tags for i in loaded), [i.tags for i in loaded]
    tags = [t for i in client.images.list() for t in i.tags]
    assert "busybox:latest" in tags and image_ref in tags, tags
    busybox = client.images.get("busybox")
    assert busybox.id.startswith("sha256:"), busybox.id
    out = client.containers.run(image_ref, ["echo", "loaded"], remove=True)
    assert out == b"loaded\n", out

    step("images.pull, image.tag, images.remove")
    repository, tag = registry_ref.rsplit(":", 1)
    pulled = client.images.pull(repository, tag=tag)
    assert registry_ref in pulled.tags, pulled.tags
    out = client.containers.run(registry_ref, ["cat", "/etc/pulled.txt"], remove=True)
    assert out == b"pulled\n", out
    assert pulled.tag("sdk-tagged", "2") is True
    assert client.images.get("sdk-tagged:2").id == pulled.id
    client.images.remove("sdk-tagged:2")
    try:
        client.images.get("sdk-tagged:2")
        raise AssertionError("a removed tag is still there")
    except docker.errors.ImageNotFound:
        pass
    client.images.remove(registry_ref)
    tags = [t for i in client.images.list() for t in i.tags]
    assert registry_ref not in tags, tags

    step("df, images.prune")
    df = client.df()
    assert df["Images"] and all(i["Size"] > 0 for i in df["Images"]), df["Images"]
    assert df["LayersSize"] > 0, df
    pruned = client.images.prune(filters={"dangling": True})
    assert pruned["ImagesDeleted"] in (None, []), pruned
    pruned = client.images.prune(filters={"dangling": False})
    assert any(image_ref in d.get("Untagged", "") for d in pruned["ImagesDeleted"]), pruned
    # No container is left, so -a takes every image.
    assert client.containers.list(all=True) == [] and client.images.list() == [], pruned

    step("events with until")
    until = int(time.time()) + 1
    events = list(
        client.events(
            since=since, until=until, decode=True, filters={"container": web.id}
        )
    )
    actions = [e["Action"] for e in events]
    for a in ("create", "start", "die", "destroy"):
        assert a in actions, actions
    assert actions.index("create") < actions.index("start") < actions.index("die") < actions.index("destroy"), actions
    die = next(e for e in events if e["Action"] == "die")
    assert die["Actor"]["Attributes"]["exitCode"] == "0", die

    client.close()
    print("sdk smoke: all ok", flush=True)


if __name__ == "__main__":
    main()
