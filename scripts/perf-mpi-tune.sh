#!/usr/bin/env bash
# The blocking forms through libdeputy-mpi with the compiled-in thresholds
# against DEPUTY_MPI_TUNE=1 (docs/mpi.md, "Tuning the blocking forms"):
# deputy-bench-mpi-openmpi under `deputy mpirun` on 2 ranks, 8 B..16 MiB,
# MPI_ calls (through the library) timed against PMPI_ (Open MPI itself) in
# the same processes; the two settings alternate run by run. The warm-up
# (40 calls per size) holds each size class's 32 trial calls, so the timed
# calls are the decided ones. Prints, per operation and size, the median
# over the runs of MPI_'s time over PMPI_'s, and every run's.
# Usage: scripts/perf-mpi-tune.sh [build-dir] [out-dir] [runs] [shared|own-core]
set -euo pipefail
build=${1:-build}
out=${2:-results/perf-mpi-tune}
runs=${3:-3}
placement=${4:-shared}
# shellcheck source=scripts/mpi-bench-setup.sh
. "$(dirname "$0")/mpi-bench-setup.sh"
mpi_bench_setup perf-mpi-tune "$build" "$placement"
mkdir -p "$out"
ops=(allreduce bcast allgather alltoall)
for run in $(seq 1 "$runs"); do
  for op in "${ops[@]}"; do
    for setting in default tune; do
      tune=0; [ "$setting" = tune ] && tune=1
      echo "== $op $setting run $run: DEPUTY_MPI_TUNE=$tune deputy mpirun ${layout[*]} -np 2" \
        "deputy-bench-mpi-openmpi --op $op -m 8:16m -i 100 -x 40" >&2
      DEPUTY_MPI_TUNE=$tune "$deputy" mpirun "${layout[@]}" -np 2 "$bench" --op "$op" \
        -m 8:16m -i 100 -x 40 --json "$out/$op-$setting-run$run.json" > /dev/null
    done
  done
done
python3 - "$out" "${ops[@]}" <<'EOF'
import glob, json, statistics, sys
out, ops = sys.argv[1], sys.argv[2:]
def ratios(op, setting):
    by_size = {}
    for path in sorted(glob.glob(f"{out}/{op}-{setting}-run*.json")):
        for row in json.load(open(path))["rows"]:
            by_size.setdefault(row["bytes"], []).append(row["time_x"])
    return by_size
def cell(values):
    return f"{statistics.median(values):.2f} ({' '.join(f'{v:.2f}' for v in sorted(values))})"
print("| op | bytes | thresholds: MPI_/PMPI_ (runs) | DEPUTY_MPI_TUNE=1: MPI_/PMPI_ (runs) |")
print("|---|---|---|---|")
for op in ops:
    default, tune = ratios(op, "default"), ratios(op, "tune")
    for size in sorted(default):
        print(f"| {op} | {size} | {cell(default[size])} | {cell(tune.get(size, [float('nan')]))} |")
EOF
