# Sourced by the side-by-side scripts (vs-dockerd.sh, vs-containerd-cri.sh):
# one `mktemp -d` directory `$T` (named after `$ROOT_PREFIX`) under which
# every root the harness makes goes (TMPDIR), removed at exit with
# whatever still runs from under it and its mounts (the harness stops what
# it started when it ends normally; this is for a run cut short).
T=$(mktemp -d "/tmp/$ROOT_PREFIX-XXXXXX")
cleanup() {
    local pids
    pids=$(ps -e -ww -o pid=,args= | awk -v t="$T/" 'index($0, t) { print $1 }')
    [[ -n $pids ]] && kill -KILL $pids 2>/dev/null || true
    awk -v t="$T/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
        while read -r m; do umount -l "$m" 2>/dev/null || true; done
    rm -rf "$T"
}
trap cleanup EXIT
export TMPDIR=$T
