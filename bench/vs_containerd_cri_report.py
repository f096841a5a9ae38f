#!/usr/bin/env python3
"""Turns a bench/vs-containerd-cri.sh run into the tables of
bench/vs-containerd-cri.md (OUT_DIR/*.md.part) and the plots
OUT_DIR/vs-containerd-cri-latency.png and OUT_DIR/vs-containerd-cri-chaos.png.

    python3 bench/vs_containerd_cri_report.py RUN_DIR OUT_DIR

RUN_DIR holds chaos/<run>/cri-<runtime>-<scenario>.json (the pod chaos
suite's counts, one directory per run of it), speed/samples.jsonl and
speed/rss.jsonl (the vs_containerd_cri example), env.txt and params.txt.
"""

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vs_dockerd_report import fmt_ms, pct, plots, read_jsonl  # noqa: E402

COUNTS = [
    "wrong_kills",
    "lost_exits",
    "wrong_exit_codes",
    "stale_states",
    "lost_pods",
    "half_created",
    "failed_requests",
    "wrong_oom",
]
RUNTIMES = ["holdfast", "containerd-cri"]


def chaos_section(run):
    """Counts summed over the runs, per scenario and runtime."""
    rows = {}
    cdir = os.path.join(run, "chaos")
    for sub in sorted(os.listdir(cdir)) if os.path.isdir(cdir) else []:
        for name in sorted(os.listdir(os.path.join(cdir, sub))):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(cdir, sub, name)) as f:
                d = json.load(f)
            key = (d["scenario"], d["runtime"])
            row = rows.setdefault(key, {c: 0 for c in COUNTS} | {"checks": 0, "seconds": 0, "runs": 0, "notes": []})
            for c in COUNTS + ["checks", "seconds"]:
                row[c] += d[c]
            row["runs"] += 1
            row["notes"] += [f"run {sub}: {n}" for n in d["notes"]]
    scenarios = sorted({s for s, _ in rows})
    out = ["| scenario | runtime | runs | " + " | ".join(c.replace("_", " ") for c in COUNTS) + " | checks |"]
    out.append("|---|---|---:|" + "---:|" * (len(COUNTS) + 1))
    for s in scenarios:
        for r in RUNTIMES:
            d = rows.get((s, r))
            if d is None:
                out.append(f"| {s} | {r} | 0 | " + " | ".join("not run" for _ in COUNTS) + " | |")
                continue
            cells = [(f"**{d[c]}**" if d[c] else "0") for c in COUNTS]
            out.append(f"| {s} | {r} | {d['runs']} | " + " | ".join(cells) + f" | {d['checks']} |")
    totals = {r: {c: sum(rows.get((s, r), {}).get(c, 0) for s in scenarios) for c in COUNTS} for r in RUNTIMES}
    for r in RUNTIMES:
        cells = [(f"**{totals[r][c]}**" if totals[r][c] else "0") for c in COUNTS]
        out.append(f"| **all** | {r} | | " + " | ".join(cells) + " | |")
    notes = []
    for s in scenarios:
        for r in RUNTIMES:
            d = rows.get((s, r))
            if d and d["notes"]:
                notes.append(f"- {r}, {s}:")
                shown = d["notes"][:8]
                for n in shown:
                    notes.append(f"  - {n[:400]}")
                if len(d["notes"]) > len(shown):
                    notes.append(f"  - ... and {len(d['notes']) - len(shown)} more")
    return rows, scenarios, "\n".join(out), "\n".join(notes)


def speed_section(run):
    samples = read_jsonl(os.path.join(run, "speed", "samples.jsonl"))
    whats = []
    for s in samples:
        if s["what"] not in whats:
            whats.append(s["what"])
    out = [
        "| what | n (hf/ct) | holdfast median | p90 | containerd CRI median | p90 | ratio of medians hf/ct | failed (hf/ct) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    failures = []
    for w in whats:
        per = {}
        for r in RUNTIMES:
            ms = [s["ms"] for s in samples if s["runtime"] == r and s["what"] == w and "ms" in s]
            failed = [s["failed"] for s in samples if s["runtime"] == r and s["what"] == w and "failed" in s]
            per[r] = (ms, failed)
            for why in sorted(set(failed)):
                failures.append(f"- {r}, {w}: {failed.count(why)} x {why}")
        hm = statistics.median(per["holdfast"][0]) if per["holdfast"][0] else None
        cm = statistics.median(per["containerd-cri"][0]) if per["containerd-cri"][0] else None
        ratio = f"{hm / cm:.2f}" if hm is not None and cm else "-"
        out.append(
            f"| {w} | {len(per['holdfast'][0])}/{len(per['containerd-cri'][0])} | {fmt_ms(hm)} | "
            f"{fmt_ms(pct(per['holdfast'][0], 0.9))} | {fmt_ms(cm)} | {fmt_ms(pct(per['containerd-cri'][0], 0.9))} | "
            f"{ratio} | {len(per['holdfast'][1])}/{len(per['containerd-cri'][1])} |"
        )
    rss = read_jsonl(os.path.join(run, "speed", "rss.jsonl"))
    rout = [
        "| runtime | when | runtime RSS | shims | shims' PSS |",
        "|---|---|---:|---:|---:|",
    ]
    for r in rss:
        rout.append(
            f"| {r['runtime']} | {r['when']} | {r['runtime_rss_kb'] / 1024:.1f} MB | {r['shims']} | "
            f"{r['shims_pss_kb'] / 1024:.1f} MB |"
        )
    return samples, whats, "\n".join(out) + "\n\n" + "\n".join(failures), "\n".join(rout)


def main():
    run, bench = sys.argv[1], sys.argv[2]

    def text(name):
        path = os.path.join(run, name)
        return open(path).read().strip() if os.path.exists(path) else ""

    rows, scenarios, chaos_table, chaos_notes = chaos_section(run)
    samples, whats, speed_table, rss_table = speed_section(run)
    pngs = plots(
        run,
        bench,
        samples,
        whats,
        rows,
        scenarios,
        key="runtime",
        subjects=(("holdfast", "holdfast"), ("containerd-cri", "containerd CRI")),
        counts=COUNTS,
        prefix="vs-containerd-cri",
        latency_title="every sample over the CRI, holdfast (left of each tick) and containerd's CRI plugin (right); log scale",
        chaos_title="pod chaos: problems counted per scenario, all runs (all counts summed; no bar: zero)",
    )
    parts = {
        "vs-containerd-cri-chaos.md.part": chaos_table + "\n\n" + chaos_notes,
        "vs-containerd-cri-speed.md.part": speed_table + "\n\n" + rss_table,
        "vs-containerd-cri-env.md.part": "```\n" + text("env.txt") + "\n\n" + text("params.txt") + "\n```",
    }
    for name, body in parts.items():
        with open(os.path.join(bench, name), "w") as f:
            f.write(body + "\n")
    print("\n".join(pngs))


if __name__ == "__main__":
    main()
