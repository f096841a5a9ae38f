#!/usr/bin/env bash
# What the default bridge network, one published port and a user-defined
# network add to `docker run -d`, for holdfastd and, beside it on the same
# machine, for dockerd 20.10 with its own bridge, iptables and masquerade
# enabled; samples alternate between the engines run by run.
# Method and numbers: bench/network.md.
#
#   sudo bench/network.sh [N]     # N samples per row and engine (default 20)
#   NO_DOCKERD=1 sudo bench/network.sh [N]   # holdfastd alone
#
# Needs root, the docker CLI, containerd, runc, busybox-static, the CNI
# plugins (scripts/deps), dockerd (Debian's docker.io) unless NO_DOCKERD,
# and a holdfastd: $HOLDFASTD, else target/release, else target/debug.
# Everything it starts lives in one mktemp -d root, on bridges and subnets
# of its own (never docker0), and is removed at exit: containers first (so
# that the plugins and dockerd release their addresses and rules), the
# user networks, the engines and their containerds, mounts, the bridges,
# and dockerd's iptables chains and the rules it added for its bridges.
# dockerd's chains (DOCKER, DOCKER-USER, DOCKER-ISOLATION-STAGE-*) must not
# exist before the run: another dockerd with iptables would own them.
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
[[ -x ${BIN:-} ]] || { echo "network.sh: no holdfastd; cargo build -p holdfastd" >&2; exit 1; }
ENGINES=(holdfast)
if [[ -z ${NO_DOCKERD:-} ]]; then
    command -v dockerd >/dev/null || { echo "network.sh: no dockerd (apt-get install docker.io, or NO_DOCKERD=1)" >&2; exit 1; }
    for t in filter nat; do
        if iptables -w -t "$t" -S 2>/dev/null | grep -q -- '^-N DOCKER'; then
            echo "network.sh: iptables table $t already has dockerd's chains (another dockerd with iptables?); not touching them" >&2
            exit 1
        fi
    done
    ENGINES+=(dockerd)
fi

ROOT=$(mktemp -d /tmp/hf-bench-net-XXXXXX)
BRIDGE=hfbn$(( $$ % 100000 ))
SUBNET=10.253.$(( $$ % 250 )).0/24
USER_SUBNET=10.252.$(( $$ % 250 )).0/24
NS=bench-net-$$
# dockerd: a bridge made here (dockerd takes its address as the network's),
# and its user network on a bridge named here too
DK=$ROOT/dockerd
DK_BRIDGE=hfdn$(( $$ % 100000 ))
DK_NET=10.251.$(( $$ % 250 ))
DK_USER_BRIDGE=hfdu$(( $$ % 100000 ))
DK_USER_SUBNET=10.250.$(( $$ % 250 )).0/24
DK_NS=bench-net-dk-$$
HF_SOCK=unix://$ROOT/run/holdfast.sock
DK_SOCK=unix://$DK/run/docker.sock
export DOCKER_CONFIG=$ROOT/docker-config
mkdir -p "$ROOT/data" "$ROOT/run" "$DOCKER_CONFIG"

host_of() { [[ $1 == holdfast ]] && echo "$HF_SOCK" || echo "$DK_SOCK"; }
dk() { timeout 120 docker -H "$(host_of "$1")" "${@:2}"; }

re() { printf '%s' "$1" | sed 's/\./\\./g'; }
remove_dockerd_iptables() {
    # the rules naming this run's bridges or subnets, then dockerd's chains
    # and every jump to them (no other dockerd had them: checked at start)
    local t rule
    for t in filter nat; do
        iptables-save -t "$t" | grep -- '^-A ' |
            grep -E -- "-j DOCKER|[ !]$DK_BRIDGE( |\$)|[ !]$DK_USER_BRIDGE( |\$)|$(re "$DK_NET.")|$(re "${DK_USER_SUBNET%0/24}")" |
            grep -v -- '^-A DOCKER' | sed 's/^-A /-D /' |
            while read -r rule; do eval "iptables -w -t $t $rule" 2>/dev/null; done
        for c in $(iptables-save -t "$t" | awk '/^:DOCKER/ { sub(":", "", $1); print $1 }'); do
            iptables -w -t "$t" -F "$c" 2>/dev/null
        done
        for c in $(iptables-save -t "$t" | awk '/^:DOCKER/ { sub(":", "", $1); print $1 }'); do
            iptables -w -t "$t" -X "$c" 2>/dev/null
        done
    done
}

cleanup() {
    set +e
    local e ids
    for e in "${ENGINES[@]}"; do
        ids=$(dk "$e" ps -aq 2>/dev/null)
        [[ -n $ids ]] && dk "$e" rm -f $ids >/dev/null 2>&1
        # the user networks: each engine removes its bridge and rules
        dk "$e" network rm bench >/dev/null 2>&1
    done
    [[ -n ${HFD:-} ]] && kill -TERM "$HFD" 2>/dev/null && wait "$HFD" 2>/dev/null
    if [[ -n ${DKD:-} ]]; then
        kill -TERM "$DKD" 2>/dev/null
        timeout 30 tail --pid="$DKD" -f /dev/null
        kill -KILL "$DKD" 2>/dev/null
        wait "$DKD" 2>/dev/null
    fi
    ctrd=$(cat "$ROOT/run/containerd/containerd.pid" 2>/dev/null)
    [[ -n $ctrd ]] && kill -KILL "$ctrd" 2>/dev/null
    [[ -n ${DK_CTRD:-} ]] && kill -KILL "$DK_CTRD" 2>/dev/null && wait "$DK_CTRD" 2>/dev/null
    # whatever else still runs from the root (shims, docker-proxy)
    pids=$(ps -e -ww -o pid=,args= | awk -v t="$ROOT/" 'index($0, t) { print $1 }')
    [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
    sleep 0.5 # containerd's exit, before its mounts go
    grep " $ROOT" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l
    rm -rf "/run/containerd/runc/$NS" "/run/containerd/runc/$DK_NS"
    for c in "/sys/fs/cgroup/$DK_NS" /sys/fs/cgroup/*/"$DK_NS"; do
        [[ -d $c ]] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    ip link del "$BRIDGE" 2>/dev/null
    ip link del "$DK_BRIDGE" 2>/dev/null
    ip link del "$DK_USER_BRIDGE" 2>/dev/null
    # the firewall plugin's isolation rules of the default bridge go with it
    iptables-save -t filter | grep -- '^-A CNI-ISOLATION-STAGE-' | grep -w -- "$BRIDGE" \
        | sed 's/^-A /-D /' | while read -r rule; do eval "iptables -w -t filter $rule"; done
    [[ ${ENGINES[*]} == *dockerd* ]] && remove_dockerd_iptables
    rm -rf "$ROOT"
}
trap cleanup EXIT

wait_busybox() { # engine
    for _ in $(seq 600); do
        dk "$1" image inspect busybox >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    dk "$1" image inspect busybox >/dev/null
}

"$BIN" --data-root "$ROOT/data" --exec-root "$ROOT/run" -H "$HF_SOCK" \
    --containerd-namespace "$NS" --bridge "$BRIDGE" --bridge-subnet "$SUBNET" -l warn \
    >"$ROOT/holdfastd.log" 2>&1 &
HFD=$!
wait_busybox holdfast

if [[ ${ENGINES[*]} == *dockerd* ]]; then
    mkdir -p "$DK/ctrd/root" "$DK/ctrd/state" "$DK/ctrd/opt" "$DK/data" "$DK/run/exec"
    cat >"$DK/ctrd/config.toml" <<EOF
version = 2
root = "$DK/ctrd/root"
state = "$DK/ctrd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$DK/ctrd/containerd.sock"
[ttrpc]
  address = "$DK/ctrd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$DK/ctrd/opt"
EOF
    containerd --config "$DK/ctrd/config.toml" >"$DK/containerd.log" 2>&1 &
    DK_CTRD=$!
    ip link add "$DK_BRIDGE" type bridge
    ip addr add "$DK_NET.1/24" dev "$DK_BRIDGE"
    ip link set "$DK_BRIDGE" up
    echo '{}' >"$DK/daemon.json"
    for _ in $(seq 100); do [[ -S $DK/ctrd/containerd.sock ]] && break; sleep 0.1; done
    dockerd --config-file "$DK/daemon.json" --containerd "$DK/ctrd/containerd.sock" \
        --containerd-namespace "$DK_NS" --containerd-plugins-namespace "$DK_NS-plugins" \
        --data-root "$DK/data" --exec-root "$DK/run/exec" --pidfile "$DK/run/docker.pid" \
        -H "$DK_SOCK" --bridge "$DK_BRIDGE" --iptables=true --ip-masq=true --ip6tables=false \
        --cgroup-parent "/$DK_NS" >"$DK/dockerd.log" 2>&1 &
    DKD=$!
    for _ in $(seq 300); do dk dockerd version >/dev/null 2>&1 && break; sleep 0.2; done
    # the same image: holdfastd's busybox, saved and loaded
    dk holdfast save -o "$ROOT/busybox.tar" busybox
    dk dockerd load -q -i "$ROOT/busybox.tar" >/dev/null
    wait_busybox dockerd
fi

now_ms() { date +%s%N | awk '{printf "%.3f", $1 / 1e6}'; }
stats() { # label: samples on stdin, one a line
    sort -n | awk -v l="$1" '
        { v[NR] = $1 } END { n = NR; printf "| %s | %d | %.1f | %.1f | %.1f | %.1f |\n", l, n, v[int((n + 1) / 2)], v[int(n * 0.9 + 0.5)], v[1], v[n] }'
}
row() { # label, docker run args...: N samples per engine, engines alternated
    local label=$1; shift
    local e i t0 t1
    for e in "${ENGINES[@]}"; do : >"$ROOT/samples.$e"; done
    for i in $(seq "$N"); do
        for e in "${ENGINES[@]}"; do
            t0=$(now_ms)
            dk "$e" run -d "$@" busybox sleep 600 >/dev/null
            t1=$(now_ms)
            awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f\n", b - a}' >>"$ROOT/samples.$e"
        done
    done
    for e in "${ENGINES[@]}"; do
        # what the last run got, to show the network was really made
        dk "$e" inspect -f "# $e: {{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}{{.NetworkSettings.Ports}}" \
            "$(dk "$e" ps -lq)" >>"$ROOT/made.txt"
        dk "$e" rm -f $(dk "$e" ps -aq) >/dev/null
        if ((${#ENGINES[@]} > 1)); then
            stats "$label, $e" <"$ROOT/samples.$e"
        else
            stats "$label" <"$ROOT/samples.$e"
        fi
    done
}

echo "holdfastd: $BIN; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
[[ ${ENGINES[*]} == *dockerd* ]] && echo "dockerd: $(dockerd --version) with --bridge (its own), --iptables, --ip-masq, userland proxy (its default)"
echo "| docker run -d (ms) | n | median | p90 | min | max |"
echo "|---|---|---|---|---|---|"
row "--network none" --network none
row "default bridge"
row "bridge, -p 80 (host port chosen)" -p 80
dk holdfast network create --subnet "$USER_SUBNET" bench >/dev/null
[[ ${ENGINES[*]} == *dockerd* ]] && dk dockerd network create --subnet "$DK_USER_SUBNET" \
    -o "com.docker.network.bridge.name=$DK_USER_BRIDGE" bench >/dev/null
row "user network (--network bench)" --network bench
row "--network none (again)" --network none
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
cat "$ROOT/made.txt"
