#!/usr/bin/env python3
"""Thresholds for libdeputy-mpi from scripts/mpi-thresholds.sh's JSON: per
operation, the ratio deputy/MPI of the median time at each size (nonblocking:
OSU Overall, --compute cpu and idle; blocking: the call's time, as the median
ratio of the benchmark's alternating rounds), and the
smallest size from which deputy is at most MPI's time at every larger size in
every compute mode. Prints a table and the values for src/mpi/operations.cc."""

import glob
import json
import statistics
import sys
from pathlib import Path

# The operations are those mpi-thresholds.sh measured (its JSON files:
# OP-cpu-runN.json for the nonblocking ones, OP-runN.json for the others).


def ratios(files, field):
    """size -> median of deputy/MPI over the runs, and the runs' ratios."""
    by_size = {}
    for f in files:
        for row in json.load(open(f))["rows"]:
            mine, base = row["mpi"][field], row["pmpi"][field]
            ratio = mine / base if base > 0 else float("inf")
            # Blocking forms: the median of the run's alternating rounds.
            by_size.setdefault(row["bytes"], []).append(row.get("time_x", ratio))
    return {b: (statistics.median(v), v) for b, v in by_size.items()}


def threshold(series):
    """The smallest size from which every series is <= 1 at every larger size."""
    sizes = sorted(set.intersection(*(set(s) for s in series)))
    best = None
    for size in reversed(sizes):
        if all(s[size][0] <= 1.0 for s in series):
            best = size
        else:
            break
    return best


def human(n):
    if n is None:
        return "never"
    for unit, shift in (("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "results/mpi-thresholds")
    table = {}
    nonblocking = sorted({Path(f).name.split("-cpu-run")[0] for f in glob.glob(str(out / "*-cpu-run*.json"))})
    blocking = sorted({Path(f).name.split("-run")[0] for f in glob.glob(str(out / "*-run*.json"))
                       if "-cpu-run" not in f and "-idle-run" not in f})
    for op in nonblocking + blocking:
        modes = ["cpu", "idle"] if op in nonblocking else [None]
        series = {}
        for m in modes:
            files = sorted(glob.glob(str(out / (f"{op}-{m}-run*.json" if m else f"{op}-run*.json"))))
            if files:
                series[m or "alone"] = ratios(files, "overall_us" if m else "pure_us")
        if not series:
            continue
        t = threshold(list(series.values()))
        table[op] = t
        print(f"{op}: offload from {human(t)}")
        for name, s in series.items():
            cells = " ".join(f"{human(b)}:{s[b][0]:.2f}" for b in sorted(s))
            print(f"  {name:>5} deputy/MPI {cells}")
    print("\nthresholds (bytes per rank; never = kNever):")
    print("  " + ", ".join(f"{op}={human(t)}" for op, t in table.items()))


if __name__ == "__main__":
    main()
