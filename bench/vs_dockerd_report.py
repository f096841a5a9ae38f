#!/usr/bin/env python3
"""Turns a bench/vs-dockerd.sh run into the tables of bench/chaos.md and
bench/vs-dockerd.md (OUT_DIR/*.md.part) and the plots
OUT_DIR/vs-dockerd-latency.png and OUT_DIR/vs-dockerd-chaos.png.

    python3 bench/vs_dockerd_report.py RUN_DIR OUT_DIR

RUN_DIR holds chaos/<engine>-<scenario>.json (the chaos suite's counts),
speed/samples.jsonl and speed/rss.jsonl (the vs_dockerd example), env.txt
(machine and versions) and params.txt (the counts the run used).
"""

import json
import os
import statistics
import subprocess
import sys

COUNTS = [
    "wrong_kills",
    "lost_exits",
    "wrong_exit_codes",
    "stale_states",
    "lost_containers",
    "half_created",
    "failed_requests",
    "wrong_oom",
]
ENGINES = ["holdfast", "dockerd"]


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def pct(values, q):
    values = sorted(values)
    if not values:
        return None
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def fmt_ms(v):
    if v is None:
        return "-"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def chaos_section(run):
    rows = {}
    cdir = os.path.join(run, "chaos")
    for name in sorted(os.listdir(cdir)) if os.path.isdir(cdir) else []:
        if name.endswith(".json") and not name.endswith("-security.json"):
            with open(os.path.join(cdir, name)) as f:
                d = json.load(f)
            rows[(d["scenario"], d["engine"])] = d
    scenarios = sorted({s for s, _ in rows})
    out = []
    out.append("| scenario | engine | " + " | ".join(c.replace("_", " ") for c in COUNTS) + " | checks | s |")
    out.append("|---|---|" + "---:|" * (len(COUNTS) + 2))
    for s in scenarios:
        for e in ENGINES:
            d = rows.get((s, e))
            if d is None:
                out.append(f"| {s} | {e} | " + " | ".join("not run" for _ in COUNTS) + " | | |")
                continue
            cells = [(f"**{d[c]}**" if d[c] else "0") for c in COUNTS]
            out.append(f"| {s} | {e} | " + " | ".join(cells) + f" | {d['checks']} | {d['seconds']} |")
    notes = []
    for s in scenarios:
        for e in ENGINES:
            d = rows.get((s, e))
            if d and d["notes"]:
                notes.append(f"- {e}, {s}:")
                shown = d["notes"][:8]
                for n in shown:
                    notes.append(f"  - {n}")
                if len(d["notes"]) > len(shown):
                    notes.append(f"  - ... and {len(d['notes']) - len(shown)} more")
    return rows, scenarios, "\n".join(out), "\n".join(notes)


def security_section(run):
    got = {}
    probes = []
    for e in ENGINES:
        path = os.path.join(run, "chaos", f"{e}-security.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            d = json.load(f)
        for r in d["rows"]:
            if (r["probe"], r["must"]) not in probes:
                probes.append((r["probe"], r["must"]))
            got[(r["probe"], e)] = r["got"]
    out = ["| a default container tries to | must be | holdfast | dockerd |", "|---|---|---|---|"]
    for p, must in probes:
        out.append(f"| {p} | {must} | {got.get((p, 'holdfast'), '-')} | {got.get((p, 'dockerd'), '-')} |")
    return "\n".join(out)


def speed_section(run):
    samples = read_jsonl(os.path.join(run, "speed", "samples.jsonl"))
    whats = []
    for s in samples:
        if s["what"] not in whats:
            whats.append(s["what"])
    stats = {}
    out = [
        "| what | n (hf/dk) | holdfast median | p90 | dockerd median | p90 | ratio of medians hf/dk | failed (hf/dk) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w in whats:
        per = {}
        for e in ENGINES:
            ms = [s["ms"] for s in samples if s["engine"] == e and s["what"] == w and "ms" in s]
            failed = sum(1 for s in samples if s["engine"] == e and s["what"] == w and s.get("failed"))
            per[e] = (ms, failed)
        hm = statistics.median(per["holdfast"][0]) if per["holdfast"][0] else None
        dm = statistics.median(per["dockerd"][0]) if per["dockerd"][0] else None
        ratio = f"{hm / dm:.2f}" if hm is not None and dm else "-"
        stats[w] = (per, hm, dm)
        out.append(
            f"| {w} | {len(per['holdfast'][0])}/{len(per['dockerd'][0])} | {fmt_ms(hm)} | "
            f"{fmt_ms(pct(per['holdfast'][0], 0.9))} | {fmt_ms(dm)} | {fmt_ms(pct(per['dockerd'][0], 0.9))} | "
            f"{ratio} | {per['holdfast'][1]}/{per['dockerd'][1]} |"
        )
    rss = read_jsonl(os.path.join(run, "speed", "rss.jsonl"))
    rout = ["| engine | when | engine RSS | its containerd RSS |", "|---|---|---:|---:|"]
    for r in rss:
        mb = lambda k: f"{r[k] / 1024:.1f} MB" if r.get(k) else "-"
        rout.append(f"| {r['engine']} | {r['when']} | {mb('engine_kb')} | {mb('containerd_kb')} |")
    return samples, whats, stats, "\n".join(out), "\n".join(rout)


def plots(
    run,
    bench,
    samples,
    whats,
    rows,
    scenarios,
    key="engine",
    subjects=(("holdfast", "holdfast"), ("dockerd", "dockerd")),
    counts=COUNTS,
    prefix="vs-dockerd",
    latency_title="every sample, holdfast (left of each tick) and dockerd (right); log scale",
    chaos_title="chaos: problems counted per scenario (all counts summed; no bar: zero)",
):
    """Two PNGs with gnuplot, `prefix`-latency.png (every latency sample,
    log scale) and `prefix`-chaos.png (the chaos counts per scenario), of
    the two `subjects` (the value of `key` in a sample, its label).
    Returns the names of the files written. bench/vs_containerd_cri_report.py
    draws its own with it."""
    data = os.path.join(run, "plot")
    os.makedirs(data, exist_ok=True)
    (first, first_label), (second, second_label) = subjects
    for subject, off in ((first, -0.15), (second, 0.15)):
        with open(os.path.join(data, f"lat-{subject}.dat"), "w") as f:
            for i, w in enumerate(whats):
                for s in samples:
                    if s[key] == subject and s["what"] == w and "ms" in s:
                        f.write(f"{i + off} {s['ms']}\n")
    xtics = ", ".join(f'"{w}" {i}' for i, w in enumerate(whats))
    lat_png = os.path.join(bench, f"{prefix}-latency.png")
    script = f"""
set terminal pngcairo size 1400,760 font ",10" noenhanced
set output "{lat_png}"
set title "{latency_title}"
set logscale y
set ylabel "ms"
set xtics ({xtics}) rotate by -30
set xrange [-0.6:{len(whats) - 0.4}]
set bmargin 12
set key top left
set grid ytics
plot "{data}/lat-{first}.dat" using 1:2 with points pt 7 ps 0.6 title "{first_label}", \\
     "{data}/lat-{second}.dat" using 1:2 with points pt 9 ps 0.6 title "{second_label}"
"""
    with open(os.path.join(data, "chaos.dat"), "w") as f:
        for s in scenarios:
            a = sum(rows.get((s, first), {}).get(c, 0) for c in counts)
            b = sum(rows.get((s, second), {}).get(c, 0) for c in counts)
            f.write(f'"{s}" {a} {b}\n')
    chaos_png = os.path.join(bench, f"{prefix}-chaos.png")
    script += f"""
set output "{chaos_png}"
unset logscale y
set title "{chaos_title}"
set ylabel "count"
set style data histograms
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set xtics auto rotate by -30
set xrange [*:*]
set yrange [0:*]
plot "{data}/chaos.dat" using 2:xtic(1) title "{first_label}", "" using 3 title "{second_label}"
"""
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
        return [os.path.basename(lat_png), os.path.basename(chaos_png)]
    except (OSError, subprocess.CalledProcessError) as err:
        print(f"{prefix} report: gnuplot failed: {err}", file=sys.stderr)
        return []


def main():
    run, bench = sys.argv[1], sys.argv[2]
    env = open(os.path.join(run, "env.txt")).read().strip() if os.path.exists(os.path.join(run, "env.txt")) else ""
    params = open(os.path.join(run, "params.txt")).read().strip() if os.path.exists(os.path.join(run, "params.txt")) else ""
    rows, scenarios, chaos_table, chaos_notes = chaos_section(run)
    samples, whats, stats, speed_table, rss_table = speed_section(run)
    pngs = plots(run, bench, samples, whats, rows, scenarios)

    with open(os.path.join(bench, "chaos-table.md.part"), "w") as f:
        f.write(chaos_table + "\n")
    with open(os.path.join(bench, "chaos-notes.md.part"), "w") as f:
        f.write(chaos_notes + "\n")
    with open(os.path.join(bench, "vs-dockerd-speed.md.part"), "w") as f:
        f.write(speed_table + "\n\n" + rss_table + "\n")
    with open(os.path.join(bench, "vs-dockerd-security.md.part"), "w") as f:
        f.write(security_section(run) + "\n")
    with open(os.path.join(bench, "vs-dockerd-env.md.part"), "w") as f:
        f.write("```\n" + env + "\n\n" + params + "\n```\n")
    print("\n".join(pngs))


if __name__ == "__main__":
    main()
