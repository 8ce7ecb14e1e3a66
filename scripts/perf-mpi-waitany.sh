#!/usr/bin/env bash
# Nonblocking collectives completed by MPI_Waitany (deputy-bench-mpi
# --wait waitany) through two builds of libdeputy-mpi, alternated run by
# run: OLD-LIB (before MPI_Waitany/MPI_Waitsome tested deputy's requests
# as a wait, which left their operations to the agent) and this build's
# library; and this build's library completing with MPI_Wait, the control.
# 2 ranks, 64-256 KiB, every operation offloaded at every size
# (DEPUTY_MPI_THRESHOLDS=<op>=0), Open MPI measured in the same runs.
# Usage: scripts/perf-mpi-waitany.sh BUILD OLD-LIB OUT [runs] [shared|own-core]
# Table: python3 scripts/perf-mpi-waitany.py OUT
set -euo pipefail
build=${1:?build directory}
old_lib=${2:?the older libdeputy-mpi-openmpi.so}
out=${3:?output directory}
runs=${4:-3}
placement=${5:-shared}
# shellcheck source=scripts/mpi-bench-setup.sh
. "$(dirname "$0")/mpi-bench-setup.sh"
mpi_bench_setup perf-mpi-waitany "$build" "$placement"
new_lib="$build/src/mpi/libdeputy-mpi-openmpi.so"
[ -f "$old_lib" ] || { echo "perf-mpi-waitany: $old_lib: no such library" >&2; exit 1; }
mkdir -p "$out"
for run in $(seq 1 "$runs"); do
  for op in iallreduce ialltoall iallgather ibcast ireduce_scatter; do
    for compute in cpu idle; do
      for variant in old-waitany new-waitany new-wait; do
        lib=$new_lib wait=${variant#*-}
        [[ $variant == old-* ]] && lib=$old_lib
        name="$op-$compute-$variant-run$run"
        echo "== $name"
        DEPUTY_MPI_THRESHOLDS="${op/reduce_scatter/reduce_scatter_block}=0" "$deputy" mpirun "${layout[@]}" --mpi-lib "$lib" -np 2 \
          "$bench" --op "$op" -m 64k:256k --compute "$compute" --wait "$wait" -i 200 -x 20 \
          --json "$out/$name.json"
      done
    done
  done
done
