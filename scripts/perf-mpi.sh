#!/usr/bin/env bash
# The libdeputy-mpi figures of docs/PERFORMANCE.md: an unmodified MPI
# program (deputy-bench-mpi-openmpi, only mpi.h, malloc'ed buffers) under
# `deputy mpirun` on 2 ranks, timing MPI_ (through the library) against
# PMPI_ (Open MPI itself) in the same processes. Placement: shared (the
# agent's engine and the ranks on the same cores, nothing pinned) or
# own-core (`--agent-cores last`: the agent alone on the last core).
# Usage: scripts/perf-mpi.sh [build-dir] [out-dir] [runs] [step-glob] [shared|own-core]
#   steps: <op>-<compute> for op in iallreduce ialltoall iallgather ibcast
#   ireduce_scatter and compute in idle cpu, offloaded at every size (what
#   deputy does with the operation, whatever the thresholds say);
#   allreduce-blocking (8 B..64 MiB, offloaded at every size) and
#   allreduce-default (the placement's compiled-in threshold: passed to MPI
#   below it, which costs the interposition only); allreduce-passthrough
#   (8..64 B, passed to MPI, 200000 iterations on ONE rank, where an
#   allreduce is a copy of a few tens of ns and no partner adds noise: the
#   interposition's cost per call, MPI_ minus PMPI_).
# Tables: scripts/perf-mpi-table.py OUT.
set -euo pipefail
build=${1:-build}
out=${2:-results/perf-mpi}
runs=${3:-3}
only=${4:-*}
placement=${5:-shared}
# shellcheck source=scripts/mpi-bench-setup.sh
. "$(dirname "$0")/mpi-bench-setup.sh"
mpi_bench_setup perf-mpi "$build" "$placement"
mkdir -p "$out"
step() {  # name, env (may be empty), bench flags...
  local name=$1 env=$2; shift 2
  # shellcheck disable=SC2053  # $only is a glob on purpose
  [[ $name == $only ]] || return 0
  for run in $(seq 1 "$runs"); do
    echo "== $name run $run: ${env:+$env }deputy mpirun ${layout[*]} -np ${ranks:-2} $bench $*"
    env $env "$deputy" mpirun "${layout[@]}" -np "${ranks:-2}" "$bench" "$@" \
      --json "$out/$name-run$run.json"
  done
}
for op in iallreduce ialltoall iallgather ibcast ireduce_scatter; do
  for compute in idle cpu; do
    key=$op; [ "$op" = ireduce_scatter ] && key=ireduce_scatter_block
    step "$op-$compute" "DEPUTY_MPI_THRESHOLDS=$key=0" --op "$op" -m 64k:16m --compute "$compute" -i 20 -x 5
  done
done
step allreduce-blocking "DEPUTY_MPI_THRESHOLDS=allreduce=0" --op allreduce -m 8:64m -i 50 -x 10
step allreduce-default "" --op allreduce -m 8:64m -i 50 -x 10
ranks=1 step allreduce-passthrough "DEPUTY_MPI_THRESHOLDS=allreduce=never" --op allreduce -m 8:64 \
  -i 200000 -x 20000
