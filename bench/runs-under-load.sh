#!/usr/bin/env bash
# 200 `docker run -d` at once on a machine under CPU load (28 busy loops
# beside the engines: a load of about 30 on 2 cores), holdfastd and
# dockerd side by side, rounds alternated: what each CLI was told, how
# long it waited, and whether what it was told held afterwards (a run told
# failed whose container then runs; one told started whose container does
# not). Method and results: bench/vs-dockerd.md, "Runs under load".
#
#   sudo bench/runs-under-load.sh
#
# Knobs: MANY=200 HOGS=28 ROUNDS=2 ENGINES=holdfast,dockerd (one alone:
# ENGINES=holdfast). Installs Debian's docker.io (for
# dockerd; its service is never started) when missing; dockerd runs on its
# own containerd in a temporary directory, as bench/vs-dockerd.sh starts it.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."

die() { echo "runs-under-load.sh: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || die "needs root (sudo $0)"

MANY=${MANY:-200}
HOGS=${HOGS:-28}
ROUNDS=${ROUNDS:-2}
ENGINES=${ENGINES:-holdfast,dockerd}

scripts/deps
if ! command -v dockerd >/dev/null 2>&1; then
    # shellcheck source=bench/install-without-services.sh
    source bench/install-without-services.sh
    install_without_services runs-under-load.sh docker.io
fi

ROOT_PREFIX=runs-under-load
# shellcheck source=bench/one-tmp-root.sh
source bench/one-tmp-root.sh

cargo build --release --locked -p holdfastd
cargo build --release --locked -p holdfast-e2e --example runs_under_load

{
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "machine: $(nproc) cores, kernel $(uname -r)"
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg) (before the hogs)"
    echo "holdfastd: $(git rev-parse --short HEAD) (release build)"
    echo "dockerd: $(dockerd --version)"
    echo "containerd: $(containerd --version)"
    echo "params: MANY=$MANY HOGS=$HOGS ROUNDS=$ROUNDS ENGINES=$ENGINES"
} | tee "$T/env.txt"

target/release/examples/runs_under_load "$T/out" "$MANY" "$HOGS" "$ROUNDS" "$ENGINES" 2>"$T/run.log" ||
    die "the run failed: $(tail -20 "$T/run.log")"

keep=$(mktemp -d /tmp/runs-under-load-XXXXXX)
cp "$T/env.txt" "$T/run.log" "$T/out/rounds.jsonl" "$keep/"
# An answer that did not hold: its container's inspect and the logs.
cp "$T/out/"breaches-*.txt "$keep/" 2>/dev/null || true
# Where runs failed or did not hold: the engine's whole log.
cp "$T/out/"log-*.txt "$keep/" 2>/dev/null || true
echo "runs-under-load.sh: one line per engine and round in $keep/rounds.jsonl:"
cat "$keep/rounds.jsonl"
