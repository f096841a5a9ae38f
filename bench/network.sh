#!/usr/bin/env bash
# What the default bridge network, one published port and a user-defined
# network add to `docker run -d`.
# Method and numbers: bench/network.md.
#
#   sudo bench/network.sh [N]     # N samples per row (default 20)
#
# Needs root, the docker CLI, containerd, runc, busybox-static, the CNI
# plugins (scripts/deps), and a holdfastd: $HOLDFASTD, else target/release,
# else target/debug. Everything it starts lives in one mktemp -d root, on a
# bridge and subnet of its own, and is removed at exit (containers first, so
# that the plugins release their addresses and rules, then holdfastd, its
# containerd, mounts, the bridge and the root).
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
[[ -x ${BIN:-} ]] || { echo "network.sh: no holdfastd; cargo build -p holdfast-daemon" >&2; exit 1; }

ROOT=$(mktemp -d /tmp/hf-bench-net-XXXXXX)
BRIDGE=hfbn$(( $$ % 100000 ))
SUBNET=10.253.$(( $$ % 250 )).0/24
USER_SUBNET=10.252.$(( $$ % 250 )).0/24
NS=bench-net-$$
export DOCKER_HOST=unix://$ROOT/run/holdfast.sock DOCKER_CONFIG=$ROOT/docker-config
mkdir -p "$ROOT/data" "$ROOT/run" "$DOCKER_CONFIG"

cleanup() {
    set +e
    ids=$(timeout 30 docker ps -aq 2>/dev/null)
    [[ -n $ids ]] && timeout 120 docker rm -f $ids >/dev/null 2>&1
    # the user network: holdfastd removes its bridge and isolation rules
    timeout 60 docker network rm bench >/dev/null 2>&1
    [[ -n ${HFD:-} ]] && kill -TERM "$HFD" 2>/dev/null && wait "$HFD" 2>/dev/null
    ctrd=$(cat "$ROOT/run/containerd/containerd.pid" 2>/dev/null)
    [[ -n $ctrd ]] && kill -KILL "$ctrd" 2>/dev/null
    sleep 0.5 # containerd's exit, before its mounts go
    grep " $ROOT" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l
    rm -rf "/run/containerd/runc/$NS"
    ip link del "$BRIDGE" 2>/dev/null
    # the firewall plugin's isolation rules of the default bridge go with it
    iptables-save -t filter | grep -- '^-A CNI-ISOLATION-STAGE-' | grep -w -- "$BRIDGE" \
        | sed 's/^-A /-D /' | while read -r rule; do eval "iptables -w -t filter $rule"; done
    rm -rf "$ROOT"
}
trap cleanup EXIT

"$BIN" --data-root "$ROOT/data" --exec-root "$ROOT/run" -H "$DOCKER_HOST" \
    --containerd-namespace "$NS" --bridge "$BRIDGE" --bridge-subnet "$SUBNET" -l warn \
    >"$ROOT/holdfastd.log" 2>&1 &
HFD=$!
for _ in $(seq 600); do
    timeout 5 docker image inspect busybox >/dev/null 2>&1 && break
    sleep 0.2
done
timeout 5 docker image inspect busybox >/dev/null

now_ms() { date +%s%N | awk '{printf "%.3f", $1 / 1e6}'; }
row() { # label, docker run args...
    local label=$1; shift
    local samples=()
    for i in $(seq "$N"); do
        local t0 t1
        t0=$(now_ms)
        timeout 60 docker run -d "$@" busybox sleep 600 >/dev/null
        t1=$(now_ms)
        samples+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')")
    done
    timeout 120 docker rm -f $(docker ps -aq) >/dev/null
    printf '%s\n' "${samples[@]}" | sort -n | awk -v l="$label" -v n="$N" '
        { v[NR] = $1 } END { printf "| %s | %d | %.1f | %.1f | %.1f | %.1f |\n", l, n, v[int((n + 1) / 2)], v[int(n * 0.9 + 0.5)], v[1], v[n] }'
}

echo "holdfastd: $BIN; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| docker run -d (ms) | n | median | p90 | min | max |"
echo "|---|---|---|---|---|---|"
row "--network none" --network none
row "default bridge" 
row "bridge, -p 80 (host port chosen)" -p 80
docker network create --subnet "$USER_SUBNET" bench >/dev/null
row "user network (--network bench)" --network bench
row "--network none (again)" --network none
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
