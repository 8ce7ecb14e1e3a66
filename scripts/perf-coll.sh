#!/usr/bin/env bash
# The collective figures of docs/PERFORMANCE.md (issue 4 §5), in one run:
# a private agent, 2 MPI ranks, MPI measured in the same processes.
# Usage: scripts/perf-coll.sh [build-dir] [out-dir]
set -euo pipefail
build=${1:-build}
out=${2:-results/perf-coll}
deputy="$build/tools/deputy"
[ -x "$deputy" ] || { echo "perf-coll: $deputy not built (bash scripts/demo.sh builds it)" >&2; exit 1; }
mkdir -p "$out"
dir=$(mktemp -d /tmp/deputy-perf-coll-XXXXXX)
trap '[ -f "$dir/agent.pid" ] && kill "$(cat "$dir/agent.pid")" 2>/dev/null; sleep 0.3; rm -rf "$dir"' EXIT
"$deputy" agent --daemon --socket "$dir/agent.sock" --pool-size 512m \
  --config <(echo '{"agent": {"max_pool_bytes": 2147483648}}') > /dev/null
export DEPUTY_AGENT="$dir/agent.sock"
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
run() {  # name, bench coll flags...
  local name=$1; shift
  echo "== $name: mpirun -np 2 $deputy bench coll $*"
  mpirun -np 2 "$deputy" bench coll "$@" --out "$out/$name.json"
}
run iallreduce-idle --op iallreduce -m 8:64M --factor 8 --compare mpi --compute idle -i 20 -x 3
run iallreduce-cpu  --op iallreduce -m 8:64M --factor 8 --compare mpi --compute cpu -i 20 -x 3
run allreduce       --op allreduce -m 8:16M --factor 4 --compare mpi -d float32 -i 50 -x 5
run memory-mapped   --op allreduce -m 1M:64M --factor 4 --memory mapped -i 10 -x 2
run memory-direct   --op allreduce -m 1M:64M --factor 4 --memory direct -i 10 -x 2
