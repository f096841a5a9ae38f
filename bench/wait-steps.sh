#!/usr/bin/env bash
# Where "exit -> docker wait returns" goes, step by step: a release
# holdfastd at trace level on a root of its own, `docker wait` in flight
# (its request in the holdfastd log), the container's process SIGKILLed from
# the host, N times; each step's time from the holdfastd log and the shell's
# clock. Numbers: bench/vs-dockerd.md ("Where the time goes, at 8e8bd7b").
#
#   sudo bench/wait-steps.sh [N]     # default 5
set -euo pipefail
export LC_ALL=C
N=${1:-5}
cd "$(dirname "$0")/.."
STEPS=wait-steps
# shellcheck source=bench/traced-holdfastd.sh
source bench/traced-holdfastd.sh
for i in $(seq "$N"); do
    # by name: `docker run` itself asks for a wait by the container's id
    id=$(docker run -d --network none --name "w$i" busybox sleep 1000)
    pid=$(docker inspect -f '{{.State.Pid}}' "$id")
    docker wait "w$i" >/dev/null &
    w=$!
    until grep -q "request method=POST uri=.*/containers/w$i/wait" "$ROOT/holdfastd.log"; do sleep 0.01; done
    t0=$(date +%s.%N)
    kill -KILL "$pid"
    wait "$w"
    t1=$(date +%s.%N)
    echo "$id $t0 $t1" >>"$ROOT/marks.txt"
    docker rm "$id" >/dev/null
done
PYTHONPATH=bench python3 - "$ROOT/holdfastd.log" "$ROOT/marks.txt" <<'PY'
import sys
from holdfastd_log import stamped
stamped = stamped(sys.argv[1])
print("| sample | SIGKILL -> TaskExit in | TaskExit in -> next line logged | TaskExit in -> CLI exited | total |")
print("|---|---:|---:|---:|---:|")
for n, line in enumerate(open(sys.argv[2]), 1):
    cid, t0, t1 = line.split()
    t0, t1 = float(t0), float(t1)
    ev = [(t, l) for t, l in stamped if t0 - 0.01 <= t <= t1 + 0.01]
    exit_in = next((t for t, l in ev if 'input=Event(TaskExit' in l and cid in l), None)
    after = next((t for t, l in ev if exit_in and t > exit_in), None)
    d = lambda a, b: f"{(b - a) * 1000:.1f}" if a and b else "-"
    print(f"| {n} | {d(t0, exit_in)} | {d(exit_in, after)} | {d(exit_in, t1)} | {d(t0, t1)} |")
PY
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
