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
BIN=${HOLDFASTD:-target/release/holdfastd}
[[ -x $BIN ]] || { echo "stop-steps.sh: no $BIN; cargo build --release -p holdfast-daemon" >&2; exit 1; }
ROOT=$(mktemp -d /tmp/hf-stop-steps-XXXXXX)
NS=stop-steps-$$
export DOCKER_HOST=unix://$ROOT/run/holdfast.sock DOCKER_CONFIG=$ROOT/docker-config
mkdir -p "$ROOT/data" "$ROOT/run" "$DOCKER_CONFIG"
cleanup() {
    set +e
    ids=$(timeout 30 docker ps -aq)
    [[ -n $ids ]] && timeout 60 docker rm -f $ids >/dev/null 2>&1
    [[ -n ${HFD:-} ]] && kill -TERM "$HFD" && wait "$HFD"
    ctrd=$(cat "$ROOT/run/containerd/containerd.pid" 2>/dev/null)
    [[ -n $ctrd ]] && kill -KILL "$ctrd"
    sleep 0.5 # containerd's exit, before its mounts go
    grep " $ROOT" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l
    rm -rf "/run/containerd/runc/$NS" "$ROOT"
}
trap cleanup EXIT
RUST_LOG=holdfast_daemon=trace,holdfast_adapter_containerd=trace "$BIN" --data-root "$ROOT/data" \
    --exec-root "$ROOT/run" -H "$DOCKER_HOST" --containerd-namespace "$NS" --bridge none \
    >"$ROOT/holdfastd.log" 2>&1 &
HFD=$!
for _ in $(seq 600); do
    timeout 5 docker image inspect busybox >/dev/null 2>&1 && break
    sleep 0.2
done
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
python3 - "$ROOT/holdfastd.log" "$ROOT/marks.txt" <<'PY'
import datetime, re, sys
log = [l for l in open(sys.argv[1])]
def ts(line):
    m = re.match(r'(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d+)Z', line)
    if not m:
        return None
    t = datetime.datetime.strptime(m.group(1), '%Y-%m-%dT%H:%M:%S').replace(tzinfo=datetime.timezone.utc)
    return t.timestamp() + float('0.' + m.group(2))
stamped = [(ts(l), l) for l in log if ts(l)]
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
