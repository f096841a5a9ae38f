# Sourced by the bench/*-steps.sh scripts: a release holdfastd at trace
# level on a root of its own (`$ROOT`, containerd namespace `$NS`), with
# DOCKER_HOST pointed at it and busybox loaded, and everything it started
# removed at exit. Before sourcing, set STEPS to the script's name (for
# messages, the root and the namespace); KEEP_LOG=FILE keeps the log.
BIN=${HOLDFASTD:-target/release/holdfastd}
[[ -x $BIN ]] || { echo "$STEPS.sh: no $BIN; cargo build --release -p holdfastd" >&2; exit 1; }
ROOT=$(mktemp -d "/tmp/hf-$STEPS-XXXXXX")
NS=$STEPS-$$
export DOCKER_HOST=unix://$ROOT/run/holdfast.sock DOCKER_CONFIG=$ROOT/docker-config
mkdir -p "$ROOT/data" "$ROOT/run" "$DOCKER_CONFIG"
cleanup() {
    set +e
    ids=$(timeout 30 docker ps -aq)
    [[ -n $ids ]] && timeout 120 docker rm -f $ids >/dev/null 2>&1
    [[ -n ${HFD:-} ]] && kill -TERM "$HFD" && wait "$HFD"
    ctrd=$(cat "$ROOT/run/containerd/containerd.pid" 2>/dev/null)
    [[ -n $ctrd ]] && kill -KILL "$ctrd"
    sleep 0.5 # containerd's exit, before its mounts go
    grep " $ROOT" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l
    [[ -n ${KEEP_LOG:-} ]] && cp "$ROOT/holdfastd.log" "$KEEP_LOG"
    rm -rf "/run/containerd/runc/$NS" "$ROOT"
}
trap cleanup EXIT
RUST_LOG=holdfastd=trace,holdfast_engine=trace,holdfast_api_docker=trace,holdfast_adapter_containerd=trace "$BIN" --data-root "$ROOT/data" \
    --exec-root "$ROOT/run" -H "$DOCKER_HOST" --containerd-namespace "$NS" --bridge none \
    >"$ROOT/holdfastd.log" 2>&1 &
HFD=$!
for _ in $(seq 600); do
    timeout 5 docker image inspect busybox >/dev/null 2>&1 && break
    sleep 0.2
done
