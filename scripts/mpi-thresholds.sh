#!/usr/bin/env bash
# Measures where libdeputy-mpi should offload in one placement, and prints
# the thresholds (src/mpi/operations.cc's column for it): an unmodified MPI
# program (deputy-bench-mpi-openmpi, malloc'ed buffers) on 2 ranks (RANKS=N:
# N; more ranks than cores is what an oversubscribed node sees) under
# `deputy mpirun`, every size from 8 B to 16 MiB, each operation through
# the library (everything offloaded) and through Open MPI itself in the same
# processes; nonblocking forms with the ranks computing on every core
# (--compute cpu) and sleeping (--compute idle), blocking forms alone.
# A threshold is the smallest size from which deputy's median time over the
# runs is at most MPI's at every larger size, in both compute modes.
# Usage: scripts/mpi-thresholds.sh [build-dir] [out-dir] [runs] [shared|own-core]
#   OPS="igather gather ..." measures those operations only (default: every
#   one deputy-bench-mpi knows; `deputy-bench-mpi --help` lists them).
set -euo pipefail
build=${1:-build}
out=${2:-results/mpi-thresholds}
runs=${3:-3}
placement=${4:-shared}
ranks=${RANKS:-2}
[[ $ranks =~ ^[1-9][0-9]*$ ]] || { echo "mpi-thresholds: RANKS=$ranks: a number of ranks" >&2; exit 1; }
# Open MPI refuses more ranks than cores unless told.
mpi_flags=()
(( ranks > $(nproc) )) && mpi_flags+=(--oversubscribe)
# shellcheck source=scripts/mpi-bench-setup.sh
. "$(dirname "$0")/mpi-bench-setup.sh"
mpi_bench_setup mpi-thresholds "$build" "$placement"
mkdir -p "$out"
# The operations the benchmark knows, nonblocking first (their names start
# with i; the blocking ones' never do).
mapfile -t known < <("$bench" --list-ops)
((${#known[@]})) || { echo "mpi-thresholds: $bench --list-ops listed nothing" >&2; exit 1; }
nonblocking=() blocking=()
for op in "${known[@]}"; do
  # The point-to-point exchange has no threshold (--p2p carries all of a
  # communicator's messages or none): only when OPS names it.
  [[ $op == *exchange && " ${OPS:-} " != *" $op "* ]] && continue
  if [[ $op == i* ]]; then nonblocking+=("$op"); else blocking+=("$op"); fi
done
if [[ -n ${OPS:-} ]]; then
  read -r -a wanted <<< "$OPS"
  keep() { local op; for op in "$@"; do [[ " ${wanted[*]} " == *" $op "* ]] && echo "$op"; done; }
  mapfile -t nonblocking < <(keep "${nonblocking[@]}")
  mapfile -t blocking < <(keep "${blocking[@]}")
fi
# Everything offloaded, whatever the compiled-in thresholds say.
all=all=0
for run in $(seq 1 "$runs"); do
  for op in "${nonblocking[@]}"; do
    for compute in cpu idle; do
      echo "== run $run: $op --compute $compute"
      DEPUTY_MPI_THRESHOLDS=$all "$deputy" mpirun "${layout[@]}" "${mpi_flags[@]}" -np "$ranks" "$bench" --op "$op" \
        -m 8:16m --compute "$compute" -i 20 -x 5 --json "$out/$op-$compute-run$run.json" \
        > /dev/null 2>> "$out/stderr.log"
    done
  done
  for op in "${blocking[@]}"; do
    echo "== run $run: $op"
    DEPUTY_MPI_THRESHOLDS=$all "$deputy" mpirun "${layout[@]}" "${mpi_flags[@]}" -np "$ranks" "$bench" --op "$op" \
      -m 8:16m -i 50 -x 5 --json "$out/$op-run$run.json" > /dev/null 2>> "$out/stderr.log"
  done
done
python3 "$(dirname "$0")/mpi-thresholds.py" "$out"
