#!/usr/bin/env bash
# Where one `docker stop` goes, step by step: a release holdfastd at trace
# level on a root of its own, a container that exits at once on SIGTERM
# (`trap 'exit 0' TERM; sleep 1000 & wait`), N stops; each step's time from
# the holdfastd log and the shell's clock around the CLI. Numbers:
# bench/vs-dockerd.md ("Where a stop's time goes").
#
#   sudo bench/stop-steps.sh [N]     # default 5
set -euo pipefail
export LC_ALL=C
N=${1:-5}
cd "$(dirname "$0")/.."
STEPS=stop-steps
# shellcheck source=bench/traced-holdfastd.sh
source bench/traced-holdfastd.sh
for i in $(seq "$N"); do
    id=$(docker run -d --network none busybox sh -c "trap 'exit 0' TERM; sleep 1000 & wait")
    pid=$(docker inspect -f '{{.State.Pid}}' "$id")
    # signalled before the shell's trap is set, PID 1 would ignore SIGTERM
    until (( 0x$(awk '/^SigCgt:/ { print $2 }' "/proc/$pid/status") & (1 << 14) )); do sleep 0.01; done
    t0=$(date +%s.%N)
    docker stop "$id" >/dev/null
    t1=$(date +%s.%N)
    echo "$id $t0 $t1" >>"$ROOT/marks.txt"
done
PYTHONPATH=bench python3 - "$ROOT/holdfastd.log" "$ROOT/marks.txt" <<'PY'
import re, sys
from holdfastd_log import stamped
stamped = stamped(sys.argv[1])
print("| sample | CLI start -> request | request -> Kill sent | Kill sent -> result | Kill sent -> TaskExit in | TaskExit -> CLI exited | total |")
print("|---|---:|---:|---:|---:|---:|---:|")
for n, line in enumerate(open(sys.argv[2]), 1):
    cid, t0, t1 = line.split()
    t0, t1 = float(t0), float(t1)
    ev = [(t, l) for t, l in stamped if t0 - 0.01 <= t <= t1 + 0.01]
    def first(pred):
        return next((t for t, l in ev if pred(l)), None)
    req = first(lambda l: ' request ' in l and '/stop' in l)
    kill_line = next((l for t, l in ev if ' call ' in l and 'Kill' in l and cid in l), '')
    op = re.search(r'op=(op\d+)', kill_line)
    kill = first(lambda l: l == kill_line) if kill_line else None
    result = first(lambda l: op and f'ActionResult({op.group(1)},' in l)
    exit_in = first(lambda l: 'input=Event(TaskExit' in l and cid in l)
    d = lambda a, b: f"{(b - a) * 1000:.1f}" if a and b else "-"
    print(f"| {n} | {d(t0, req)} | {d(req, kill)} | {d(kill, result)} | {d(kill, exit_in)} | {d(exit_in, t1)} | {d(t0, t1)} |")
PY
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
