#!/usr/bin/env python3
"""The table of scripts/perf-mpi-waitany.sh: per operation, compute mode and
size, the median over the runs of Overall (through the library) over Open
MPI's Overall in the same run, and of the library's pure time, for each
variant (old library with MPI_Waitany, this one with MPI_Waitany, this one
with MPI_Wait)."""
import collections
import json
import pathlib
import statistics
import sys

VARIANTS = ["old-waitany", "new-waitany", "new-wait"]


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: perf-mpi-waitany.py OUT-DIR", file=sys.stderr)
        return 2
    cells = collections.defaultdict(list)  # (op, compute, bytes, variant) -> [(x, pure)]
    for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
        op, rest = path.stem.split("-", 1)
        compute, rest = rest.split("-", 1)
        variant = rest.rsplit("-run", 1)[0]
        for row in json.loads(path.read_text())["rows"]:
            x = row["mpi"]["overall_us"] / row["pmpi"]["overall_us"]
            cells[(op, compute, row["bytes"], variant)].append((x, row["mpi"]["pure_us"]))
    print("| op | compute | bytes | " + " | ".join(
        f"{v}: Overall/MPI, pure us" for v in VARIANTS) + " | runs |")
    print("|---|---|---|" + "---|" * (len(VARIANTS) + 1))
    for key in sorted({k[:3] for k in cells}):
        row = []
        for v in VARIANTS:
            got = cells.get(key + (v,), [])
            row.append(f"{statistics.median(x for x, _ in got):.2f}, "
                       f"{statistics.median(p for _, p in got):.1f}" if got else "-")
        n = len(cells.get(key + (VARIANTS[0],), []))
        print(f"| {key[0]} | {key[1]} | {key[2] >> 10} KiB | " + " | ".join(row) + f" | {n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
