#!/usr/bin/env bash
# holdfast against dockerd 20.10, side by side, in one command: the chaos
# counts (tests/tests/chaos.rs, run once per engine) and the speed and memory
# samples (tests/examples/vs_dockerd.rs, engines alternated round by round).
# Writes the tables of bench/chaos.md and bench/vs-dockerd.md as .md.part
# files in a kept directory it names, and the plots
# bench/vs-dockerd-latency.png and bench/vs-dockerd-chaos.png. Method and
# reading: bench/vs-dockerd.md.
#
#   sudo bench/vs-dockerd.sh
#
# Installs Debian's docker.io (for dockerd; its service is never started)
# and gnuplot-nox when missing. dockerd runs on its own containerd, both in
# a temporary directory with their own roots, pid file and sockets, no
# bridge, no iptables, live restore on; holdfastd on its embedded containerd
# in another. Everything started is stopped at the end; every temporary
# directory lives under one mktemp -d directory, removed at exit.
#
# Knobs (the issue's full counts are CTRD_CYCLES=100 CONTAINERS=20
# ENGINE_CYCLES=30):
#   CTRD_CYCLES=30 CONTAINERS=20 ENGINE_CYCLES=10  chaos sizes

#   ROUNDS=20              single-container latency samples per engine
#   MANY=200 RESTARTS=2    containers for ps/RSS/restarts/parallel runs, rounds of it
#   SKIP_CHAOS=1 / SKIP_SPEED=1
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."

die() { echo "vs-dockerd.sh: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || die "needs root (sudo $0)"

CTRD_CYCLES=${CTRD_CYCLES:-30}
CONTAINERS=${CONTAINERS:-20}
ENGINE_CYCLES=${ENGINE_CYCLES:-10}

ROUNDS=${ROUNDS:-20}
MANY=${MANY:-200}
RESTARTS=${RESTARTS:-2}

scripts/deps
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v gnuplot >/dev/null 2>&1 || need+=(gnuplot-nox)
if ((${#need[@]})); then
    # shellcheck source=bench/install-without-services.sh
    source bench/install-without-services.sh
    install_without_services vs-dockerd.sh "${need[@]}"
fi

ROOT_PREFIX=vs-dockerd
# shellcheck source=bench/one-tmp-root.sh
source bench/one-tmp-root.sh

cargo build --release --locked -p holdfastd
cargo build --release --locked -p holdfast-e2e --example vs_dockerd
cargo test --release --locked -p holdfast-e2e --test chaos --test security_probe --no-run

{
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(awk '/MemTotal/ {printf "%.1f GB", $2/1048576}' /proc/meminfo), kernel $(uname -r), cgroup $([[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]] && echo v2 || echo v1)"
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared with other work)"
    echo "holdfastd: $(git rev-parse --short HEAD) (release build)"
    echo "dockerd: $(dockerd --version)"
    echo "containerd: $(containerd --version)"
    echo "runc: $(runc --version | head -1)"
    echo "docker CLI: $(docker --version)"
} >"$T/env.txt"
echo "chaos: CTRD_CYCLES=$CTRD_CYCLES CONTAINERS=$CONTAINERS ENGINE_CYCLES=$ENGINE_CYCLES; speed: ROUNDS=$ROUNDS MANY=$MANY RESTARTS=$RESTARTS" >"$T/params.txt"
cat "$T/env.txt" "$T/params.txt"

mkdir -p "$T/chaos" "$T/speed"
if [[ -z ${SKIP_CHAOS:-} ]]; then
    for engine in holdfast dockerd; do
        echo "vs-dockerd.sh: chaos against $engine"
        # holdfast's run fails when it counts anything; the counts are written first
        CHAOS_ENGINE=$engine CHAOS_REPORT=$T/chaos \
            CHAOS_CTRD_CYCLES=$CTRD_CYCLES CHAOS_CONTAINERS=$CONTAINERS CHAOS_ENGINE_CYCLES=$ENGINE_CYCLES \
            cargo test --release --locked -p holdfast-e2e --test chaos -- --test-threads=1 \
            >"$T/chaos-$engine.log" 2>&1 || echo "vs-dockerd.sh: chaos against $engine counted problems (see the report)"
        grep '^chaos result' "$T/chaos-$engine.log" || true
        CHAOS_ENGINE=$engine CHAOS_REPORT=$T/chaos \
            cargo test --release --locked -p holdfast-e2e --test security_probe \
            >"$T/security-$engine.log" 2>&1 || echo "vs-dockerd.sh: the security probe against $engine found a difference"
    done
fi
if [[ -z ${SKIP_SPEED:-} ]]; then
    echo "vs-dockerd.sh: speed, engines alternated"
    target/release/examples/vs_dockerd "$T/speed" "$ROUNDS" "$MANY" "$RESTARTS" 2>"$T/speed.log" ||
        die "the speed run failed: $(tail -20 "$T/speed.log")"
fi

keep=$(mktemp -d /tmp/vs-dockerd-logs-XXXXXX)
cp -r "$T/chaos" "$T/speed" "$T"/*.log "$T/env.txt" "$T/params.txt" "$keep/" 2>/dev/null || true
python3 bench/vs_dockerd_report.py "$keep" "$keep"
cp "$keep"/*.png bench/ 2>/dev/null || true
echo "vs-dockerd.sh: tables in $keep/*.md.part (for bench/chaos.md and bench/vs-dockerd.md), plots in bench/*.png; raw samples and logs in $keep"
