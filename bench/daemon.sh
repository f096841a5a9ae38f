#!/usr/bin/env bash
# holdfastd end-to-end latencies and memory, driven with the ordinary docker CLI.
# Method and numbers: bench/daemon.md.
#
#   sudo bench/daemon.sh [N]          # N samples per row (default 30)
#   sudo bench/daemon.sh --cleanup DIR  # clean up after a run that was SIGKILLed
#
# Needs root, docker (the CLI only), containerd, runc, busybox-static, python3,
# and cargo (to build target/release/holdfastd; skipped when HOLDFASTD=path is
# given). Environment knobs:
#   MANY=200        containers running for ps, RSS and both restarts
#   CTRD_RUNS=N     containerd SIGKILLs (each waits until containerd has run, and
#                   holdfastd has been connected, CTRD_GAP=31 s: both backoffs,
#                   the supervisor's restart delay and the core's reconnect
#                   delay, are back at their minimum after 30 s)
#   HFD_RUNS=N      holdfastd restarts
#   BENCH_NS=bench  containerd namespace (also /run/containerd/runc/<ns> and the
#                   cgroups /sys/fs/cgroup/*/<ns>, which cleanup removes)
#   TMO=30          timeout in seconds of every docker command
#   HFD_LOG_LEVEL=info  holdfastd's -l (debug shows every reconnect attempt)
# Everything it starts lives in one mktemp -d directory and is removed at exit
# (holdfastd, its containerd, shims and their children, mounts, runc state,
# cgroups). holdfastd's and containerd's logs are copied to a second temporary
# directory whose path is printed at the end.
set -euo pipefail
export LC_ALL=C

NS=${BENCH_NS:-bench}
TMO=${TMO:-30}

die() {
    echo "daemon.sh: $*" >&2
    exit 1
}

# ---------------------------------------------------------------------------
# Cleanup: everything started under the temp root $1, then the root itself.
# ---------------------------------------------------------------------------
pids_matching() { # pids whose cmdline contains $1 and whose comm is $2 (containerd-shim-runc-v2 shows as containerd-shim)
    ps -e -ww -o pid=,comm=,args= | awk -v s="$1" -v c="$2" -v self="$$" '$1 != self && $2 == c && index(substr($0, index($0, $2) + length($2)), s) { print $1 }'
}

descendants() { # every descendant of the given pids, deepest last
    ps -e -o pid=,ppid= | awk -v roots="$*" '
        BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) want[r[i]] = 1 }
        { parent[$1] = $2; pids[NR] = $1 }
        END {
            changed = 1
            while (changed) {
                changed = 0
                for (i in pids) { p = pids[i]; if (!(p in want) && (parent[p] in want)) { want[p] = 1; out[p] = 1; changed = 1 } }
            }
            for (p in out) print p
        }'
}

alive() { # pid is alive and not a zombie
    local state
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n $state && $state != Z ]]
}

wait_gone() { # pids...; up to 10 s
    local i p any
    for ((i = 0; i < 200; i++)); do
        any=0
        for p in "$@"; do alive "$p" && any=1; done
        ((any)) || return 0
        sleep 0.05
    done
    return 1
}

cleanup_root() {
    local root=$1 p pids=() shims=() kids=() m
    [[ -n $root && -d $root && $root == /tmp/* ]] || return 0
    echo "daemon.sh: cleaning up $root" >&2
    # holdfastd first: it would restart containerd.
    for p in $(cat "$root/run/holdfastd.pid" 2>/dev/null) $(pids_matching "$root" holdfastd | sort -u); do
        # the loggers (holdfastd holdfast-log ...) are killed below with their shims
        grep -qa -- '--data-root' "/proc/$p/cmdline" 2>/dev/null && grep -qa -- "$root" "/proc/$p/cmdline" && pids+=("$p")
    done
    if ((${#pids[@]})); then
        kill -TERM "${pids[@]}" 2>/dev/null || true
        wait_gone "${pids[@]}" || kill -KILL "${pids[@]}" 2>/dev/null || true
    fi
    # its containerd (pid file, and any other containerd on this root)
    pids=()
    for p in $(cat "$root/run/containerd/containerd.pid" 2>/dev/null) $(pids_matching "$root" containerd | sort -u); do
        grep -qa -- "$root" "/proc/$p/cmdline" 2>/dev/null && pids+=("$p")
    done
    if ((${#pids[@]})); then
        kill -KILL "${pids[@]}" 2>/dev/null || true
        wait_gone "${pids[@]}" || true
    fi
    # shims of this root, and their children (container processes, loggers)
    mapfile -t shims < <(pids_matching "$root" containerd-shim)
    if ((${#shims[@]})); then
        mapfile -t kids < <(descendants "${shims[@]}")
        ((${#kids[@]})) && kill -KILL "${kids[@]}" 2>/dev/null || true
        kill -KILL "${shims[@]}" 2>/dev/null || true
        wait_gone "${kids[@]}" "${shims[@]}" || echo "daemon.sh: some processes of $root would not die" >&2
    fi
    # mounts under the root, deepest first
    for m in $(awk -v r="$root" 'index($5, r "/") == 1 || $5 == r { print $5 }' /proc/self/mountinfo | sort -r); do
        umount -l "$m" 2>/dev/null || true
    done
    rm -rf "/run/containerd/runc/$NS"
    # cgroups of the namespace, leaves first (rmdir fails while a task is inside: retry)
    local try d
    for try in 1 2 3 4 5; do
        for d in /sys/fs/cgroup/*/"$NS" /sys/fs/cgroup/"$NS"; do
            [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
        done
        compgen -G "/sys/fs/cgroup/*/$NS" >/dev/null || [[ -d /sys/fs/cgroup/$NS ]] || break
        sleep 0.2
    done
    compgen -G "/sys/fs/cgroup/*/$NS" >/dev/null && echo "daemon.sh: cgroups /sys/fs/cgroup/*/$NS remain" >&2
    rm -rf "$root"
}

[[ $(id -u) == 0 ]] || die "needs root (sudo $0)"

if [[ ${1:-} == --cleanup ]]; then
    [[ -n ${2:-} ]] || die "--cleanup DIR"
    cleanup_root "$2"
    exit 0
fi

N=${1:-30}
[[ $N =~ ^[1-9][0-9]*$ ]] || die "N must be a positive integer, got '$N'"
MANY=${MANY:-200}
CTRD_RUNS=${CTRD_RUNS:-$N}
HFD_RUNS=${HFD_RUNS:-$N}
CTRD_GAP=${CTRD_GAP:-31}
HFD_LOG_LEVEL=${HFD_LOG_LEVEL:-info}

for tool in docker containerd runc python3 busybox timeout; do
    command -v "$tool" >/dev/null || die "$tool not found on PATH"
done
if [[ -d /run/containerd/runc/$NS ]] && [[ -n $(ls -A "/run/containerd/runc/$NS") ]]; then
    die "/run/containerd/runc/$NS is in use (another run? then BENCH_NS=other), or left over: remove it"
fi

REPO=$(cd "$(dirname "$0")/.." && pwd)
if [[ -n ${HOLDFASTD:-} ]]; then
    BIN=$(realpath "$HOLDFASTD")
else
    echo "daemon.sh: building release holdfastd" >&2
    if command -v cargo >/dev/null; then
        (cd "$REPO" && cargo build --release -p holdfastd)
    elif [[ -n ${SUDO_USER:-} ]]; then
        sudo -u "$SUDO_USER" -H bash -lc "cd '$REPO' && cargo build --release -p holdfastd"
    else
        die "cargo not found (or pass HOLDFASTD=/path/to/holdfastd)"
    fi
    BIN=$REPO/target/release/holdfastd
fi
[[ -x $BIN ]] || die "$BIN is not an executable"

T=$(mktemp -d /tmp/holdfast-bench.XXXXXX)
S=$T/samples
mkdir -p "$S"
LOG=$T/holdfastd.log
SOCK=$T/run/h.sock
export DOCKER_HOST=unix://$SOCK
FAILED=0

on_exit() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    KEEP=$(mktemp -d /tmp/holdfast-bench-logs.XXXXXX)
    cp -r "$LOG" "$T/data/containerd/containerd.log" "$T/docker.err" "$T/report.md" "$S" "$KEEP/" 2>/dev/null
    if ((rc != 0 || FAILED)); then
        echo "---- last lines of $LOG" >&2
        tail -n 30 "$LOG" >&2
    fi
    cleanup_root "$T"
    echo "daemon.sh: logs kept in $KEEP" >&2
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
cat >"$T/h.py" <<'PY'
import calendar, os, re, signal, socket, subprocess, sys, threading, time

now = time.time_ns

def rfc3339_ns(s):
    m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", s.strip())
    if not m:
        raise SystemExit(f"not RFC 3339: {s!r}")
    y, mo, d, h, mi, se, frac, tz = m.groups()
    secs = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(se), 0, 0, 0))
    if tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        secs -= sign * (int(tz[1:3]) * 3600 + int(tz[4:6]) * 60)
    return secs * 10**9 + int((frac or "0").ljust(9, "0")[:9])

def epoch_us_ns(s):  # bash $EPOCHREALTIME
    return int(s.replace(",", "").replace(".", "")) * 1000

def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

def wait_gone(pid, timeout):
    end = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > end:
            raise SystemExit(f"pid {pid} still alive after {timeout} s")
        time.sleep(0.001)

def api_answers(path):
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(1)
            s.connect(path)
            s.sendall(b"GET /_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False

def accepts(path):
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(1)
            s.connect(path)
            return True
    except OSError:
        return False

TMO = int(os.environ.get("TMO", "30"))

def docker(*args):
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=TMO)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", f"timed out after {TMO} s")

def info():
    """(containerd line, Relists count) from docker info, or (None, None)."""
    r = docker("info")
    state = re.search(r"^\s*containerd: (.*)$", r.stdout, re.M)
    relists = re.search(r"^\s*Relists: (\d+)$", r.stdout, re.M)
    return (state.group(1) if state else None, int(relists.group(1)) if relists else None)

def poll(what, fn, timeout, interval):
    end = time.monotonic() + timeout
    tries = 0
    while True:
        tries += 1
        v = fn()
        if v:
            return now(), tries, v
        if time.monotonic() > end:
            raise SystemExit(f"{what}: not within {timeout} s ({tries} tries)")
        time.sleep(interval)

def restart_holdfastd(pidfile, sock, log, *argv):
    """SIGTERM holdfastd, start it again; prints (us): shutdown, API /_ping
    answered, docker version succeeded, docker info relisted (the last three
    from the start of the new process)."""
    pid = int(open(pidfile).read())
    t0 = now()
    os.kill(pid, signal.SIGTERM)
    wait_gone(pid, 30)
    t_exit = now()
    with open(log, "ab") as f:
        t1 = now()
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=f, start_new_session=True)
    t_api, _, _ = poll("API /_ping", lambda: api_answers(sock), 30, 0.002)
    t_ver, _, _ = poll("docker version", lambda: docker("version").returncode == 0, 30, 0.005)
    t_rel, _, _ = poll("docker info relisted", lambda: info()[0] == "connected, relisted", 60, 0.005)
    us = lambda a, b: (a - b) // 1000
    print(us(t_exit, t0), us(t_api, t1), us(t_ver, t1), us(t_rel, t1))

def restart_containerd(pidfile, sock, mode, gap, readyfile):
    """Waits until containerd has run `gap` s and the core has been connected
    and relisted for `gap` s (`readyfile` holds when it last became so), so
    that both backoffs are back at their minimum (the supervisor's restart
    delay, reset after 30 s of containerd running, and the core's reconnect
    backoff, reset after 30 s connected); then SIGKILLs it, then polls `docker run -d` (mode run) or
    `docker info` (mode info) until it succeeds / shows a new relist. Prints
    (us from the kill): supervisor spawned the new containerd (pid file
    written), its socket accepts, the docker command succeeded; then the
    number of docker tries, whether a not-relisted state was seen, and the
    new container's id (mode run)."""
    wake = os.stat(pidfile).st_mtime_ns
    try:
        wake = max(wake, int(open(readyfile).read()))
    except (OSError, ValueError):
        pass
    wait = (wake + int(float(gap) * 1e9) - now()) / 1e9
    if wait > 0:
        time.sleep(wait)
    pid = int(open(pidfile).read())
    before = info()[1] if mode == "info" else None
    if mode == "info" and before is None:
        raise SystemExit("docker info shows no 'Relists:' line")
    seen = {}

    def read_pid():
        try:
            return int(open(pidfile).read())
        except (OSError, ValueError):
            return None

    def probe():
        # A SIGKILLed multi-threaded process shows as a zombie before its
        # last thread has closed the listening socket, which still accepts
        # meanwhile: wait for the supervisor to name a new containerd (it
        # writes the pid file when it spawns it, after removing the old
        # socket file) before probing.
        end = time.monotonic() + 60
        while read_pid() in (pid, None):
            if time.monotonic() > end:
                return
            time.sleep(0.001)
        while not accepts(sock):
            if time.monotonic() > end:
                return
            time.sleep(0.001)
        seen["serving"] = now()
        try:
            seen["spawned"] = os.stat(pidfile).st_mtime_ns
        except OSError:
            pass

    t0 = now()
    os.kill(pid, signal.SIGKILL)
    th = threading.Thread(target=probe, daemon=True)
    th.start()
    down_seen = False
    cid = "-"
    timeline = []  # the core's connection state as docker info shows it, on change
    if mode == "run":
        def try_run():
            r = docker("run", "-d", "busybox", "sleep", "1000")
            return r.stdout.strip() if r.returncode == 0 else None
        t_done, tries, cid = poll("docker run -d", try_run, 60, 0.01)
    else:
        def try_info():
            nonlocal down_seen
            state, relists = info()
            word = (state or "?").split(" ")[0].rstrip(",")
            if not timeline or timeline[-1][0] != word:
                timeline.append((word, (now() - t0) // 1_000_000))
            if state != "connected, relisted":
                down_seen = True
                return False
            return relists is not None and relists > before
        t_done, tries, _ = poll("docker info relisted", try_info, 60, 0.01)
    th.join(60)
    if "serving" not in seen:
        raise SystemExit("containerd socket never accepted")
    if mode == "run":
        t_ready, _, _ = poll("docker info relisted", lambda: info()[0] == "connected, relisted", 60, 0.01)
    else:
        t_ready = t_done
    with open(readyfile, "w") as f:
        f.write(str(t_ready))
    us = lambda a: (a - t0) // 1000
    states = ",".join(f"{w}@{ms}" for w, ms in timeline) or "-"
    print(us(seen.get("spawned", t0)), us(seen["serving"]), us(t_done), tries, int(down_seen), cid, states)

def derive(samples):
    """Turns raw timestamps into sample files (us)."""
    d = samples
    def write(name, values):
        with open(os.path.join(d, name + ".us"), "w") as f:
            f.writelines(f"{v}\n" for v in values)
    raw = os.path.join(d, "stop.raw")
    if os.path.exists(raw):
        for var in ("loop", "wait"):
            rows = [l.split() for l in open(raw) if l.startswith(var + " ")]
            write(f"stop_{var}_term", [(rfc3339_ns(r[3]) - epoch_us_ns(r[1])) // 1000 for r in rows])
            write(f"stop_{var}_after", [(epoch_us_ns(r[2]) - rfc3339_ns(r[3])) // 1000 for r in rows])
    raw = os.path.join(d, "wait.raw")
    if os.path.exists(raw):
        rows = [l.split() for l in open(raw)]
        write("exit_wait", [(epoch_us_ns(r[1]) - rfc3339_ns(r[0])) // 1000 for r in rows])

def table(samples, *rows):
    print("| measurement (ms) | n | median | p90 | min | max |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        key, label = row.split("=", 1)
        path = os.path.join(samples, key + ".us")
        try:
            ms = sorted(int(l) / 1000 for l in open(path) if l.strip())
        except OSError:
            ms = []
        if not ms:
            print(f"| {label} | 0 | failed: see the log | | | |")
            continue
        pick = lambda q: ms[int((len(ms) - 1) * q + 0.5)]
        print(f"| {label} | {len(ms)} | {pick(0.5):.2f} | {pick(0.9):.2f} | {ms[0]:.2f} | {ms[-1]:.2f} |")

def rss(*pids):
    """VmRSS in kB, summed over pids."""
    total = 0
    for p in pids:
        try:
            for l in open(f"/proc/{p}/status"):
                if l.startswith("VmRSS:"):
                    total += int(l.split()[1])
        except OSError:
            pass
    print(total)

if __name__ == "__main__":
    globals()[sys.argv[1].replace("-", "_")](*sys.argv[2:])
PY
py() { python3 "$T/h.py" "$@"; }

dk() { timeout "$TMO" docker "$@" 2>>"$T/docker.err"; }

rec() { # key start end ($EPOCHREALTIME values)
    echo $((${3//[.,]/} - ${2//[.,]/})) >>"$S/$1.us"
}

note() { echo "$*" >>"$T/notes"; echo "daemon.sh: $*" >&2; }

hfd_pid() { cat "$T/run/holdfastd.pid"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

section() { # name function: runs the function in a subshell under set -e; a failure is noted, the rest goes on
    local name=$1 rc
    shift
    echo "daemon.sh: -- $name" >&2
    set +e
    (
        set -e
        "$@"
    )
    rc=$?
    set -e
    if ((rc != 0)); then
        FAILED=1
        note "FAILED: section '$name' (exit $rc); last docker error: $(tail -n 1 "$T/docker.err" 2>/dev/null)"
        echo "---- last lines of $LOG" >&2
        tail -n 15 "$LOG" >&2
    fi
}

rm_all() { # removes every container (not timed)
    local ids
    ids=$(dk ps -aq)
    [[ -z $ids ]] || dk rm -f $ids >/dev/null
}

start_holdfastd() {
    setsid nohup "$BIN" --data-root "$T/data" --exec-root "$T/run" -H "unix://$SOCK" \
        --containerd-namespace "$NS" -l "$HFD_LOG_LEVEL" </dev/null >>"$LOG" 2>&1 &
    local i
    for ((i = 0; i < 600; i++)); do
        dk version >/dev/null 2>&1 && dk image inspect busybox >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "holdfastd did not serve with busybox:latest within 60 s (see $LOG)"
}

# ---------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------
m_floor() {
    local i s e
    for ((i = 0; i < N; i++)); do
        s=$EPOCHREALTIME; timeout "$TMO" true; e=$EPOCHREALTIME; rec timeout "$s" "$e"
        s=$EPOCHREALTIME; dk --version >/dev/null; e=$EPOCHREALTIME; rec cli_local "$s" "$e"
        s=$EPOCHREALTIME; dk version >/dev/null; e=$EPOCHREALTIME; rec cli_version "$s" "$e"
    done
}

m_run() {
    local i s e
    for ((i = 0; i < N; i++)); do
        s=$EPOCHREALTIME; dk create busybox sleep 1000 >"$T/cid"; e=$EPOCHREALTIME
        rec create "$s" "$e"
        s=$EPOCHREALTIME; dk start "$(<"$T/cid")" >/dev/null; e=$EPOCHREALTIME
        rec start "$s" "$e"
    done
    rm_all
    for ((i = 0; i < N; i++)); do
        s=$EPOCHREALTIME; dk run -d busybox sleep 1000 >"$T/cid"; e=$EPOCHREALTIME
        rec run_d "$s" "$e"
        [[ $(dk inspect -f '{{.State.Running}}' "$(<"$T/cid")") == true ]] || die "run -d: container not running"
    done
    rm_all
}

m_stop() { # two containers that exit on SIGTERM: the issue's loop, and one whose shell is in `wait`
    local i s e c fin code var script
    for ((i = 0; i < N; i++)); do
        for var in loop wait; do
            if [[ $var == loop ]]; then
                script='trap "exit 0" TERM; while true; do sleep 0.1; done'
            else
                script='trap "exit 0" TERM; sleep 1000 & wait'
            fi
            dk run -d busybox sh -c "$script" >"$T/cid"
            c=$(<"$T/cid")
            # the trap is set by then; the random part spreads the moment of
            # the stop over the loop's 0.1 s period
            sleep "0.$((300 + RANDOM % 100))"
            s=$EPOCHREALTIME; dk stop -t 10 "$c" >/dev/null; e=$EPOCHREALTIME
            rec "stop_$var" "$s" "$e"
            fin=$(dk inspect -f '{{.State.FinishedAt}} {{.State.ExitCode}}' "$c")
            code=${fin#* }
            fin=${fin% *}
            # exit code 0: it exited on SIGTERM (the kill after the grace period gives 137)
            [[ $code == 0 ]] || die "stop ($var): exit code $code, not 0: it did not exit on SIGTERM"
            echo "$var $s $e $fin" >>"$S/stop.raw"
            dk rm "$c" >/dev/null
        done
    done
}

m_wait() {
    local i c code
    for ((i = 0; i < N; i++)); do
        dk run -d busybox sh -c 'sleep 2; exit 3' >"$T/cid"
        c=$(<"$T/cid")
        (
            dk wait "$c" >"$T/wait.out"
            echo "$EPOCHREALTIME" >"$T/wait.t"
        ) &
        wait $! || die "docker wait $c failed"
        code=$(<"$T/wait.out")
        [[ $code == 3 ]] || die "docker wait printed '$code', expected 3"
        echo "$(dk inspect -f '{{.State.FinishedAt}}' "$c") $(<"$T/wait.t")" >>"$S/wait.raw"
        dk rm "$c" >/dev/null
    done
}

m_many() { # MANY running containers: ps, ps -a, RSS
    local i s e n
    s=$EPOCHREALTIME
    for ((i = 0; i < MANY; i++)); do
        dk run -d busybox sleep 100000 >/dev/null
    done
    e=$EPOCHREALTIME
    note "started $MANY containers one after another in $(((${e//[.,]/} - ${s//[.,]/}) / 1000)) ms"
    n=$(dk ps -q | wc -l)
    [[ $n == "$MANY" ]] || die "docker ps shows $n running, expected $MANY"
    for ((i = 0; i < N; i++)); do
        s=$EPOCHREALTIME; dk ps >/dev/null; e=$EPOCHREALTIME; rec ps "$s" "$e"
        s=$EPOCHREALTIME; dk ps -a >/dev/null; e=$EPOCHREALTIME; rec ps_a "$s" "$e"
    done
    echo "rss_many $(rss_kb "$(hfd_pid)")" >>"$S/rss"
    local shims loggers
    mapfile -t shims < <(pids_matching "$T" containerd-shim)
    mapfile -t loggers < <(pids_matching "$T/data/containers" holdfastd)
    echo "shims ${#shims[@]} $(py rss "${shims[@]}")" >>"$S/rss"
    echo "loggers ${#loggers[@]} $(py rss "${loggers[@]}")" >>"$S/rss"
    echo "containerd $(rss_kb "$(cat "$T/run/containerd/containerd.pid")")" >>"$S/rss"
}

m_containerd() { # SIGKILL the embedded containerd with MANY running
    local i out mode n
    for ((i = 0; i < CTRD_RUNS; i++)); do
        if ((i % 2 == 0)); then mode=run; else mode=info; fi
        out=$(py restart-containerd "$T/run/containerd/containerd.pid" "$T/run/containerd/containerd.sock" "$mode" "$CTRD_GAP" "$T/ctrd.ready")
        read -r spawned serving t_done tries down cid states <<<"$out"
        echo "$spawned" >>"$S/ctrd_spawned.us"
        echo "$serving" >>"$S/ctrd_serving.us"
        echo "$t_done" >>"$S/ctrd_${mode}.us"
        echo $((t_done - serving)) >>"$S/ctrd_${mode}_from_serving.us"
        echo "$mode: serving at $((serving / 1000)) ms, done at $((t_done / 1000)) ms, $tries docker tries, not-relisted seen=$down, states (ms from the kill) $states" >>"$S/ctrd.raw"
        if [[ $mode == run ]]; then
            dk rm -f "$cid" >/dev/null
        fi
    done
    n=$(dk ps -q | wc -l)
    [[ $n == "$MANY" ]] || die "after the containerd restarts docker ps shows $n running, expected $MANY"
    note "after $CTRD_RUNS containerd restarts: $n containers running"
    echo "rss_after_ctrd $(rss_kb "$(hfd_pid)")" >>"$S/rss"
}

m_holdfastd() { # SIGTERM holdfastd and start it again, with MANY running
    local i out n
    for ((i = 0; i < HFD_RUNS; i++)); do
        out=$(py restart-holdfastd "$T/run/holdfastd.pid" "$SOCK" "$LOG" \
            "$BIN" --data-root "$T/data" --exec-root "$T/run" -H "unix://$SOCK" --containerd-namespace "$NS" -l "$HFD_LOG_LEVEL")
        read -r down api ver rel <<<"$out"
        echo "$down" >>"$S/hfd_shutdown.us"
        echo "$api" >>"$S/hfd_api.us"
        echo "$ver" >>"$S/hfd_version.us"
        echo "$rel" >>"$S/hfd_relisted.us"
    done
    n=$(dk ps -q | wc -l)
    [[ $n == "$MANY" ]] || die "after the holdfastd restarts docker ps shows $n running, expected $MANY"
    sleep 1
    echo "rss_restarted $(rss_kb "$(hfd_pid)")" >>"$S/rss"
}

# ---------------------------------------------------------------------------
echo "daemon.sh: N=$N MANY=$MANY CTRD_RUNS=$CTRD_RUNS HFD_RUNS=$HFD_RUNS root=$T" >&2
LOAD_BEFORE=$(uptime)
start_holdfastd
sleep 2
echo "rss_idle $(rss_kb "$(hfd_pid)")" >>"$S/rss"

section "CLI floor" m_floor
section "run -d" m_run
section "stop" m_stop
section "exit -> wait" m_wait
rm_all || true
echo "rss_idle_after $(rss_kb "$(hfd_pid)")" >>"$S/rss"
section "$MANY containers: ps" m_many
section "containerd restarts" m_containerd
section "holdfastd restarts" m_holdfastd
LOAD_AFTER=$(uptime)
py derive "$S"

# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
kb() { awk -v k="$1" 'BEGIN { printf "%.1f MB", k / 1024 }'; }
rssv() { awk -v k="$1" '$1 == k { print $NF }' "$S/rss"; }
{
    echo "### holdfastd, $(date -u +%Y-%m-%dT%H:%MZ), N=$N, $MANY containers"
    echo
    echo "- $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), kernel $(uname -r)"
    echo "- $(containerd --version); $(runc --version | head -n 1); docker CLI $(docker version --format '{{.Client.Version}}' 2>/dev/null || true)"
    echo "- holdfastd $("$BIN" --version 2>/dev/null | awk '{print $2}'), commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$REPO" diff --quiet HEAD 2>/dev/null || echo ' + uncommitted changes')"
    echo "- load before: ${LOAD_BEFORE#*load average: }; after: ${LOAD_AFTER#*load average: }"
    echo
    py table "$S" \
        "timeout=timeout(1) wrapper alone (in every row below)" \
        "cli_local=docker --version (CLI, no API call)" \
        "cli_version=docker version (CLI floor)" \
        "run_d=docker run -d busybox sleep 1000" \
        "create=docker create busybox sleep 1000" \
        "start=docker start (of that container)" \
        "stop_loop=docker stop -t 10, sh trap + while sleep 0.1 loop" \
        "stop_loop_term=  of which: stop issued -> container exited (FinishedAt)" \
        "stop_loop_after=  of which: exited -> docker stop returned" \
        "stop_wait=docker stop -t 10, sh trap + wait" \
        "stop_wait_term=  of which: stop issued -> container exited (FinishedAt)" \
        "stop_wait_after=  of which: exited -> docker stop returned" \
        "exit_wait=exit (FinishedAt) -> docker wait returned" \
        "ps=docker ps, $MANY running" \
        "ps_a=docker ps -a, $MANY running" \
        "hfd_shutdown=holdfastd SIGTERM -> process gone ($MANY running)" \
        "hfd_api=holdfastd start -> API answers /_ping" \
        "hfd_version=holdfastd start -> docker version succeeds" \
        "hfd_relisted=holdfastd start -> docker info: connected, relisted" \
        "ctrd_spawned=containerd SIGKILL -> supervisor spawned a new one" \
        "ctrd_serving=containerd SIGKILL -> its socket accepts" \
        "ctrd_run=containerd SIGKILL -> docker run -d succeeds" \
        "ctrd_run_from_serving=containerd serving -> docker run -d succeeds" \
        "ctrd_info=containerd SIGKILL -> docker info: connected, relisted" \
        "ctrd_info_from_serving=containerd serving -> docker info: connected, relisted"
    echo
    echo "| holdfastd VmRSS | |"
    echo "|---|---|"
    echo "| idle, just started, no containers | $(kb "$(rssv rss_idle)") |"
    echo "| idle again, after the run/stop/wait rows (containers removed) | $(kb "$(rssv rss_idle_after)") |"
    echo "| $MANY running (the process that started them) | $(kb "$(rssv rss_many)") |"
    echo "| $MANY running, after the containerd restarts | $(kb "$(rssv rss_after_ctrd)") |"
    echo "| $MANY running, a restarted holdfastd | $(kb "$(rssv rss_restarted)") |"
    echo
    read -r _ ns ks < <(grep '^shims ' "$S/rss" || echo "x 0 0")
    read -r _ nl kl < <(grep '^loggers ' "$S/rss" || echo "x 0 0")
    echo "- with $MANY running: $ns shims $(kb "$ks") in all, $nl loggers $(kb "$kl") in all, containerd $(kb "$(rssv containerd)")"
    if [[ -f $S/ctrd.raw ]]; then echo "- containerd restarts:"; sed 's/^/  - /' "$S/ctrd.raw"; fi
    if [[ -f $T/notes ]]; then sed 's/^/- /' "$T/notes"; fi
} | tee "$T/report.md"
exit 0
