#!/usr/bin/env bash
# Instructions per input of the core under callgrind: stable where times are
# not (a shared machine's speed varies twofold). Numbers: bench/core.md.
#
#   bench/core-callgrind.sh [STEPS]      # default 200000 mixed inputs
#
# Runs the throughput bench binary (crates/core/benches/throughput.rs) in
# its single-pass modes: the 10,000-container set-up alone and with STEPS
# mixed inputs (the difference over STEPS is the cost of one input), and
# the set-up alone and with one complete relist (the difference is the
# relist). Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-200000}
command -v valgrind >/dev/null || { echo "core-callgrind.sh: valgrind not found" >&2; exit 1; }
cargo bench -p holdfast-core --bench throughput --no-run 2>/dev/null
bin=$(cargo bench -p holdfast-core --bench throughput --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "throughput" and m.get("executable"):
        print(m["executable"])')
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
instr() { # env assignment; prints the instructions callgrind collected
    env "$1" valgrind --tool=callgrind --callgrind-out-file="$T/out" "$bin" 2>"$T/err" >/dev/null
    awk '/^summary:/ { print $2 }' "$T/out"
}
base=$(instr CORE_STEPS=0)
mixed=$(instr "CORE_STEPS=$STEPS")
setup=$(instr CORE_RELIST=0)
relist=$(instr CORE_RELIST=1)
echo "set-up of 10,000 containers: $base instructions"
awk -v a="$base" -v b="$mixed" -v n="$STEPS" 'BEGIN { printf "mixed input: %.0f instructions per input (%d inputs)\n", (b - a) / n, n }'
awk -v a="$setup" -v b="$relist" 'BEGIN { printf "complete relist of 10,000 tasks: %.0f instructions (%.0f per task)\n", b - a, (b - a) / 10000 }'
