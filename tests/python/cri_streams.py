"""Kubernetes' own Python client (kubernetes-client/python) on holdfastd's
CRI streaming server: the URL a CRI Exec, Attach or PortForward answered
with, driven as the client drives a kubelet's stream. Prints one JSON
object: what came back.

usage: cri_streams.py exec-stdin|exec-tty|attach|port-forward URL [PORT]
"""

import json
import select
import sys

from kubernetes.client import Configuration
from kubernetes.stream.ws_client import (
    RESIZE_CHANNEL,
    PortForward,
    WSClient,
    create_websocket,
    get_websocket_url,
)

BOUND = 60


def session(url):
    return WSClient(Configuration(), get_websocket_url(url), None, True)


def exec_stdin(url):
    # `sh -c 'read x; echo out:$x; echo err:$x >&2; exit 3'`, no terminal
    c = session(url)
    c.write_stdin("hello\n")
    c.run_forever(timeout=BOUND)
    return {"stdout": c.read_stdout(), "stderr": c.read_stderr(), "returncode": c.returncode}


def exec_tty(url):
    # `sh` on a terminal: sized, then asked its size
    c = session(url)
    c.write_channel(RESIZE_CHANNEL, json.dumps({"Width": 100, "Height": 40}))
    c.write_stdin("stty size; exit 0\n")
    c.run_forever(timeout=BOUND)
    return {"stdout": c.read_stdout(), "returncode": c.returncode}


def attach(url):
    # a container reading a line from its stdin, then exiting
    c = session(url)
    c.write_stdin("through-attach\n")
    c.run_forever(timeout=BOUND)
    return {"stdout": c.read_stdout(), "returncode": c.returncode}


def port_forward(url, port):
    ws = create_websocket(Configuration(), get_websocket_url(url))
    pf = PortForward(ws, [port])
    s = pf.socket(port)
    s.setblocking(True)
    try:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    except OSError:
        pass  # closed already: the forward failed, its error says why
    got = b""
    while True:
        ready, _, _ = select.select([s], [], [], BOUND)
        if not ready:
            break
        try:
            chunk = s.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    s.close()
    return {"response": got.decode(errors="replace"), "error": pf.error(port)}


def main():
    what, url = sys.argv[1], sys.argv[2]
    if what == "exec-stdin":
        out = exec_stdin(url)
    elif what == "exec-tty":
        out = exec_tty(url)
    elif what == "attach":
        out = attach(url)
    elif what == "port-forward":
        out = port_forward(url, int(sys.argv[3]))
    else:
        raise SystemExit(f"unknown: {what}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
