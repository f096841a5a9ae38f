#!/usr/bin/env bash
# Where "containerd restart -> states right" goes, step by step: a release
# holdfastd at trace level on a root of its own with M containers running;
# each sample SIGKILLs its containerd and one container's process in the
# same instant (the exit happens while containerd is down), then polls one
# `docker inspect` of all M until that one shows exited and every other
# running, as bench/vs-dockerd.sh's speed row does. Each step's time comes
# from the holdfastd log, /proc (the new containerd's process start) and the
# shell's clock. Samples are 31 s apart, so that each crash follows a
# healthy run (the supervisor restarts at once, as after a real crash).
# Numbers: bench/vs-dockerd.md ("Where the time goes, at 8e8bd7b").
#
#   sudo bench/ctrd-restart-steps.sh [N] [M]     # default 3 samples, 200 containers
set -euo pipefail
export LC_ALL=C
N=${1:-3}
M=${2:-200}
cd "$(dirname "$0")/.."
STEPS=ctrd-restart-steps
# shellcheck source=bench/traced-holdfastd.sh
source bench/traced-holdfastd.sh
# M containers, 20 CLIs at a time
for ((i = 0; i < M; i += 20)); do
    batch=()
    for ((j = i; j < i + 20 && j < M; j++)); do
        docker run -d --network none --name "m$j" busybox sleep 100000 >/dev/null &
        batch+=($!)
    done
    wait "${batch[@]}" # not a bare wait: holdfastd is a child too
done
names=()
for ((j = 0; j < M; j++)); do names+=("m$j"); done
# every `m*` shows running but $1, which does not
states_right() {
    local out
    out=$(docker inspect -f '{{.Name}} {{.State.Running}}' "${names[@]}" 2>/dev/null) || return 1
    awk -v dead="/$1" '($1 == dead) == ($2 == "true") { bad = 1 } END { exit bad || NR != '"$M"' }' <<<"$out"
}
states_right none || { echo "ctrd-restart-steps.sh: not all $M running" >&2; exit 1; }
sleep 31 # a healthy run: the supervisor restarts a crash at once
for ((s = 0; s < N; s++)); do
    victim=m$s
    vpid=$(docker inspect -f '{{.State.Pid}}' "$victim")
    ctrd=$(cat "$ROOT/run/containerd/containerd.pid")
    t0=$(date +%s.%N)
    kill -KILL "$ctrd" "$vpid"
    polls=0
    until states_right "$victim"; do polls=$((polls + 1)); done
    t1=$(date +%s.%N)
    new=$(cat "$ROOT/run/containerd/containerd.pid")
    # the new containerd's process start, in the shell's clock (10 ms resolution)
    started=$(awk -v now="$(date +%s.%N)" -v up="$(cut -d' ' -f1 /proc/uptime)" \
        '{ printf "%.3f\n", now - (up - $22 / 100) }' "/proc/$new/stat")
    echo "$victim $t0 $t1 $started $polls" >>"$ROOT/marks.txt"
    docker rm -f "$victim" >/dev/null
    docker run -d --network none --name "$victim" busybox sleep 100000 >/dev/null
    if ((s + 1 < N)); then sleep 31; fi
done
PYTHONPATH=bench python3 - "$ROOT/holdfastd.log" "$ROOT/marks.txt" <<'PY'
import sys
from holdfastd_log import stamped
stamped = stamped(sys.argv[1])
cols = ["containerd exited seen", "new containerd spawned", "its process start (/proc)",
        "socket accepts, core probed", "Subscribe sent (the one that succeeded)", "stream live", "Relist sent",
        "relist complete", "states right (inspect)", "inspect polls"]
print("| sample (ms after the SIGKILL) | " + " | ".join(cols) + " |")
print("|---|" + "---:|" * len(cols))
for n, line in enumerate(open(sys.argv[2]), 1):
    victim, t0, t1, started, polls = line.split()
    t0, t1, started = float(t0), float(t1), float(started)
    ev = [(t, l) for t, l in stamped if t0 - 0.01 <= t <= t1 + 0.01]
    def first(pred):
        return next((t for t, l in ev if pred(l)), None)
    exited = first(lambda l: 'containerd exited; restarting it' in l)
    spawned = first(lambda l: 'restarted containerd' in l and 'accepts' not in l)
    probed = first(lambda l: 'restarted containerd accepts; probing it' in l)
    live = first(lambda l: 'event stream live' in l)
    # the attempt that succeeded: the last Subscribe before the stream is live
    sub = max((t for t, l in ev if ' call ' in l and 'Subscribe' in l and live and t <= live), default=None)
    rel = first(lambda l: ' call ' in l and 'Relist' in l)
    done = first(lambda l: 'relist complete' in l)
    d = lambda t: f"{(t - t0) * 1000:.0f}" if t else "-"
    print(f"| {n} | {d(exited)} | {d(spawned)} | {d(started)} | {d(probed)} | {d(sub)} | {d(live)} | {d(rel)} | {d(done)} | {d(t1)} | {polls} |")
PY
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
