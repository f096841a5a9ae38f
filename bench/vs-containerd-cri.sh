#!/usr/bin/env bash
# holdfast against containerd's own CRI plugin, side by side over the CRI,
# in one command: the pod chaos counts (tests/tests/cri_chaos.rs, run
# REPEAT times per runtime) and the speed and memory samples
# (tests/examples/vs_containerd_cri.rs, runtimes alternated round by
# round). Writes the tables of bench/vs-containerd-cri.md as .md.part files
# in a kept directory it names, and the plots bench/vs-containerd-cri-*.png.
# Method and reading: bench/vs-containerd-cri.md.
#
#   sudo bench/vs-containerd-cri.sh
#
# Both runtimes run on Debian's containerd 1.6 (the one the suites use;
# its CRI plugin is built in), each in a temporary directory of its own:
# holdfastd on its embedded containerd (CRI plugin off), and a private
# containerd with the plugin on (its own root, state, socket, runc root,
# CNI directory, streaming port). Pods run on the host's network, so no
# CNI plugin is measured. Everything started is stopped at the end; every
# temporary directory lives under one mktemp -d directory, removed at exit.
#
# Knobs:
#   REPEAT=3                  runs of the whole pod chaos suite per runtime
#   ROUNDS=20                 single-pod latency samples per runtime
#   MANY=200 RESTARTS=2       pods for lists/RSS/containerd restarts, rounds of it
#   SKIP_CHAOS=1 / SKIP_SPEED=1
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."

die() { echo "vs-containerd-cri.sh: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || die "needs root (sudo $0)"

REPEAT=${REPEAT:-3}
ROUNDS=${ROUNDS:-20}
MANY=${MANY:-200}
RESTARTS=${RESTARTS:-2}

scripts/deps
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "vs-containerd-cri.sh: installing gnuplot-nox"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null
fi

ROOT_PREFIX=vs-containerd-cri
# shellcheck source=bench/one-tmp-root.sh
source bench/one-tmp-root.sh

cargo build --release --locked -p holdfastd
cargo build --release --locked -p holdfast-e2e --example vs_containerd_cri
cargo test --release --locked -p holdfast-e2e --test cri_chaos --no-run

{
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(awk '/MemTotal/ {printf "%.1f GB", $2/1048576}' /proc/meminfo), kernel $(uname -r), cgroup $([[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]] && echo v2 || echo v1)"
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared with other work)"
    echo "holdfastd: $(git rev-parse --short HEAD) (release build)"
    echo "containerd: $(containerd --version) (both runtimes; the CRI plugin's own)"
    echo "runc: $(runc --version | head -1)"
} >"$T/env.txt"
echo "chaos: REPEAT=$REPEAT; speed: ROUNDS=$ROUNDS MANY=$MANY RESTARTS=$RESTARTS" >"$T/params.txt"
cat "$T/env.txt" "$T/params.txt"

mkdir -p "$T/chaos" "$T/speed"
if [[ -z ${SKIP_CHAOS:-} ]]; then
    for ((i = 0; i < REPEAT; i++)); do
        for runtime in holdfast containerd-cri; do
            echo "vs-containerd-cri.sh: pod chaos against $runtime, run $((i + 1)) of $REPEAT"
            mkdir -p "$T/chaos/$i"
            # holdfast's run fails when it counts anything; the counts are written first
            CHAOS_RUNTIME=$runtime CHAOS_REPORT=$T/chaos/$i \
                cargo test --release --locked -p holdfast-e2e --test cri_chaos -- --test-threads=1 \
                >"$T/chaos-$runtime-$i.log" 2>&1 ||
                echo "vs-containerd-cri.sh: pod chaos against $runtime counted problems (see the report)"
        done
    done
fi
if [[ -z ${SKIP_SPEED:-} ]]; then
    echo "vs-containerd-cri.sh: speed, runtimes alternated"
    target/release/examples/vs_containerd_cri "$T/speed" "$ROUNDS" "$MANY" "$RESTARTS" 2>"$T/speed.log" ||
        die "the speed run failed: $(tail -20 "$T/speed.log")"
fi

keep=$(mktemp -d /tmp/vs-containerd-cri-logs-XXXXXX)
cp -r "$T/chaos" "$T/speed" "$T"/*.log "$T/env.txt" "$T/params.txt" "$keep/" 2>/dev/null || true
python3 bench/vs_containerd_cri_report.py "$keep" "$keep"
cp "$keep"/*.png bench/ 2>/dev/null || true
echo "vs-containerd-cri.sh: tables in $keep/*.md.part (for bench/vs-containerd-cri.md), plots in bench/*.png; raw samples and logs in $keep"
