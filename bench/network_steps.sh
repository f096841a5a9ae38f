#!/usr/bin/env bash
# Where the default bridge's time goes in `docker run -d`: holdfastd alone
# (as bench/network.sh with NO_DOCKERD=1), its log at debug level for the
# network side, then per CNI plugin exec (ADD/DEL, by interface) and per
# network call (setup, teardown) the median and p90 of what the log says.
# Method and numbers: bench/network.md.
#
#   sudo bench/network_steps.sh [N]    # N runs per row (default 20)
#
# Needs what bench/network.sh needs (no dockerd). Everything lives in one
# mktemp -d root, on a bridge and subnet of its own, removed at exit.
set -euo pipefail
export LC_ALL=C
N=${1:-20}
cd "$(dirname "$0")/.."
BIN=${HOLDFASTD:-}
if [[ -z $BIN ]]; then
    for b in target/release/holdfastd target/debug/holdfastd; do
        [[ -x $b ]] && BIN=$b && break
    done
fi
[[ -x ${BIN:-} ]] || { echo "network_steps.sh: no holdfastd; cargo build -p holdfastd" >&2; exit 1; }
ROOT=$(mktemp -d /tmp/hf-bench-steps-XXXXXX)
BRIDGE=hfbs$(( $$ % 100000 ))
SUBNET=10.249.$(( $$ % 250 )).0/24
NS=bench-steps-$$
SOCK=unix://$ROOT/run/holdfast.sock
export DOCKER_CONFIG=$ROOT/docker-config
mkdir -p "$ROOT/data" "$ROOT/run" "$DOCKER_CONFIG"
dk() { timeout 120 docker -H "$SOCK" "$@"; }

cleanup() {
    set +e
    ids=$(dk ps -aq 2>/dev/null)
    [[ -n $ids ]] && dk rm -f $ids >/dev/null 2>&1
    [[ -n ${HFD:-} ]] && kill -TERM "$HFD" 2>/dev/null && wait "$HFD" 2>/dev/null
    ctrd=$(cat "$ROOT/run/containerd/containerd.pid" 2>/dev/null)
    [[ -n $ctrd ]] && kill -KILL "$ctrd" 2>/dev/null
    pids=$(ps -e -ww -o pid=,args= | awk -v t="$ROOT/" 'index($0, t) { print $1 }')
    [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
    sleep 0.5
    grep " $ROOT" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l
    rm -rf "/run/containerd/runc/$NS"
    ip link del "$BRIDGE" 2>/dev/null
    iptables-save -t filter | grep -- '^-A CNI-ISOLATION-STAGE-' | grep -w -- "$BRIDGE" \
        | sed 's/^-A /-D /' | while read -r rule; do eval "iptables -w -t filter $rule"; done
    rm -rf "$ROOT"
}
trap cleanup EXIT

RUST_LOG=warn,holdfast_engine::network=debug,holdfast_engine::engine=debug \
    "$BIN" --data-root "$ROOT/data" --exec-root "$ROOT/run" -H "$SOCK" \
    --containerd-namespace "$NS" --bridge "$BRIDGE" --bridge-subnet "$SUBNET" \
    >>"$ROOT/holdfastd.log" 2>&1 &
HFD=$!
for _ in $(seq 600); do dk image inspect busybox >/dev/null 2>&1 && break; sleep 0.2; done

now_ms() { date +%s%N | awk '{printf "%.3f", $1 / 1e6}'; }
stats() { # label: samples (ms) on stdin
    sort -n | awk -v l="$1" '
        { v[NR] = $1 } END { n = NR; if (n == 0) exit;
          printf "| %s | %d | %.1f | %.1f | %.1f | %.1f |\n", l, n, v[int((n + 1) / 2)], v[int(n * 0.9 + 0.5)], v[1], v[n] }'
}
# the log's `elapsed_us` of the lines matching a pattern, as ms
elapsed() { { grep -a -E -- "$1" "$ROOT/holdfastd.log" || true; } | sed -n 's/.*elapsed_us=\([0-9]*\).*/\1/p' | awk '{printf "%.2f\n", $1 / 1000}'; }

row() { # label, docker run args...
    local label=$1; shift
    : >"$ROOT/holdfastd.log"
    : >"$ROOT/samples"
    for _ in $(seq "$N"); do
        t0=$(now_ms)
        dk run -d "$@" busybox sleep 600 >/dev/null
        t1=$(now_ms)
        awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f\n", b - a}' >>"$ROOT/samples"
    done
    dk rm -f $(dk ps -aq) >/dev/null
    # the releases run after rm answers: wait for them to be logged
    for _ in $(seq 300); do
        (( $(grep -a -c 'call="network_teardown"' "$ROOT/holdfastd.log" || true) >= N )) && break
        sleep 0.2
    done
    echo
    echo "### $label"
    echo
    echo "| step (ms) | n | median | p90 | min | max |"
    echo "|---|---|---|---|---|---|"
    stats "docker run -d" <"$ROOT/samples"
    elapsed 'call="network_setup"' | stats "network setup (the call, whole)"
    # per setup (they run one at a time here): its time less the ADDs of
    # the chain on eth0 (bridge, firewall, portmap), i.e. the namespace,
    # loopback (unless beside the chain), files and hosts
    { grep -a -E -- 'command="?ADD"?.*CNI plugin ran|call="network_setup"' "$ROOT/holdfastd.log" || true; } |
        awk '{ us = $0; sub(/.*elapsed_us=/, "", us); sub(/[^0-9].*/, "", us) }
             /call="network_setup"/ { printf "%.2f\n", (us - chain) / 1000; chain = 0; next }
             !/plugin="?loopback/ { chain += us }' |
        stats "setup less its chain (namespace, loopback, files)"
    for cmd in ADD DEL; do
        for p in loopback bridge firewall portmap; do
            elapsed "cni\{plugin=\"?$p\"? command=\"?$cmd\"?.*CNI plugin ran" | stats "$p $cmd"
        done
    done
    elapsed 'call="network_teardown"' | stats "network teardown (the call, whole)"
}

echo "holdfastd: $BIN; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
row "default bridge"
row "bridge, -p 80 (host port chosen)" -p 80
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
