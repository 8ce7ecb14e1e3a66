#!/usr/bin/env python3
"""Markdown tables for docs/PERFORMANCE.md from scripts/perf-mpi.sh's JSON:
per step, medians over the runs (OUT/<step>-run<N>.json) of what
deputy-bench-mpi measured through the library (`mpi`: MPI_ calls, offloaded
or passed) and of Open MPI itself in the same processes (`pmpi`).

Nonblocking steps: pure time, overlap (median, and the lowest run: a dip in
one run is a finding), Overall ratio. Blocking steps: time per call and the
ratio. allreduce-passthrough: the interposition's cost per call in ns.

Usage: scripts/perf-mpi-table.py OUT [step-glob]"""

import fnmatch
import glob
import json
import re
import statistics
import sys
from pathlib import Path


def human(n):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def load(out, step):
    """bytes -> list of rows over the runs."""
    by_size = {}
    for f in sorted(glob.glob(str(out / f"{step}-run*.json"))):
        for row in json.load(open(f))["rows"]:
            by_size.setdefault(row["bytes"], []).append(row)
    return by_size


def sleep_line(out, step):
    """What the step's idle runs measured a 5 us sleep to cost (their `sleep`), or ""."""
    found = [json.load(open(f)).get("sleep") for f in sorted(glob.glob(str(out / f"{step}-run*.json")))]
    found = [s for s in found if s]
    if not found:
        return ""
    def span(key):
        low, high = min(s[key] for s in found), max(s[key] for s in found)
        return f"{low:.0f}" if round(low) == round(high) else f"{low:.0f}–{high:.0f}"

    return (f"A {found[0]['asked_us']:g} µs sleep lasted {span('wall_us')} µs and cost "
            f"{span('cpu_us')} µs of CPU in these runs (compute phases shorter than that are not "
            "idle time).\n")


def med(rows, side, field):
    return statistics.median(r[side][field] for r in rows)


def nonblocking(by_size):
    print("| bytes | deputy pure (µs) | deputy overlap (median, lowest run) | MPI pure (µs) "
          "| MPI overlap | Overall deputy / MPI (median, highest run) |")
    print("|---|---|---|---|---|---|")
    for b, rows in sorted(by_size.items()):
        ratios = [r["mpi"]["overall_us"] / r["pmpi"]["overall_us"] for r in rows]
        print(f"| {human(b)} | {med(rows, 'mpi', 'pure_us'):.0f} "
              f"| {med(rows, 'mpi', 'overlap_pct'):.1f} % ({min(r['mpi']['overlap_pct'] for r in rows):.1f} %) "
              f"| {med(rows, 'pmpi', 'pure_us'):.0f} | {med(rows, 'pmpi', 'overlap_pct'):.1f} % "
              f"| {statistics.median(ratios):.2f} ({max(ratios):.2f}) |")


def blocking(by_size):
    print("| bytes | through the library (µs) | Open MPI (µs) | ratio (median, highest run) |")
    print("|---|---|---|---|")
    for b, rows in sorted(by_size.items()):
        # time_x: the median of a run's alternating rounds (older runs: one
        # loop after the other, the ratio of their times).
        ratios = [r.get("time_x", r["mpi"]["pure_us"] / r["pmpi"]["pure_us"]) for r in rows]
        print(f"| {human(b)} | {med(rows, 'mpi', 'pure_us'):.2f} | {med(rows, 'pmpi', 'pure_us'):.2f} "
              f"| {statistics.median(ratios):.2f} ({max(ratios):.2f}) |")


def passthrough(by_size):
    print("| bytes | MPI_Allreduce, passed (ns) | PMPI_Allreduce (ns) | cost per call (ns, median; runs) |")
    print("|---|---|---|---|")
    for b, rows in sorted(by_size.items()):
        diffs = [1000 * (r["mpi"]["pure_us"] - r["pmpi"]["pure_us"]) for r in rows]
        runs = ", ".join(f"{d:.0f}" for d in diffs)
        print(f"| {human(b)} | {1000 * med(rows, 'mpi', 'pure_us'):.0f} "
              f"| {1000 * med(rows, 'pmpi', 'pure_us'):.0f} | {statistics.median(diffs):.0f} ({runs}) |")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    only = sys.argv[2] if len(sys.argv) > 2 else "*"
    steps = sorted({re.sub(r"-run\d+\.json$", "", Path(f).name)
                    for f in glob.glob(str(out / "*-run*.json"))})
    if not steps:
        sys.exit(f"perf-mpi-table: no <step>-run<N>.json in {out}")
    for step in steps:
        if not fnmatch.fnmatch(step, only):
            continue
        by_size = load(out, step)
        runs = max(len(v) for v in by_size.values())
        print(f"\n**{step}** ({runs} runs)\n")
        if step == "allreduce-passthrough":
            passthrough(by_size)
        elif step.startswith("allreduce-"):
            blocking(by_size)
        else:
            nonblocking(by_size)
            note = sleep_line(out, step)
            if note:
                print("\n" + note, end="")


if __name__ == "__main__":
    main()
