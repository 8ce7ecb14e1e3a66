#!/usr/bin/env bash
# The collective figures of docs/PERFORMANCE.md (issue 4 §5), in one run:
# private agents, 2 MPI ranks, Open MPI measured in the same processes and
# buffers (--compare mpi). Every JSON result lands in OUT-DIR.
# Usage: scripts/perf-coll.sh [build-dir] [out-dir] [step-glob]
#   step-glob: run only the steps whose name matches (e.g. 'iallreduce-*-own-core-*').
set -euo pipefail
build=${1:-build}
out=${2:-results/perf-coll}
only=${3:-*}
deputy="$build/tools/deputy"
[ -x "$deputy" ] || { echo "perf-coll: $deputy not built (bash scripts/demo.sh builds it)" >&2; exit 1; }
command -v mpirun > /dev/null || { echo "perf-coll: mpirun not found (bash scripts/deps.sh test installs Open MPI)" >&2; exit 1; }
mkdir -p "$out"
dir=$(mktemp -d /tmp/deputy-perf-coll-XXXXXX)
stop_agent() { [ -f "$dir/agent.pid" ] && kill "$(cat "$dir/agent.pid")" 2>/dev/null; sleep 0.3; }
trap 'stop_agent; rm -rf "$dir"' EXIT
start_agent() {  # extra "agent" config keys (JSON, may be empty), deputy agent flags...
  local extra=$1; shift
  local config="{\"agent\": {\"max_pool_bytes\": 2147483648${extra:+, $extra}}}"
  stop_agent
  "$deputy" agent --daemon --socket "$dir/agent.sock" --pool-size 512m \
    --config <(echo "$config") "$@" > /dev/null
  echo "== agent: deputy agent --pool-size 512m --config '$config' $*"
}
export DEPUTY_AGENT="$dir/agent.sock"
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
run() {  # name, bench coll flags...
  local name=$1; shift
  # shellcheck disable=SC2053  # $only is a glob on purpose
  [[ $name == $only ]] || return 0
  echo "== $name: ${launch[*]} -np 2 $deputy bench coll $*"
  "${launch[@]}" -np 2 "$deputy" bench coll "$@" --out "$out/$name.json"
}
launch=(mpirun)

# The agent's defaults: one engine (one spare core), idle polls that yield.
start_agent ""
run iallreduce-idle --op iallreduce -m 16:64M --factor 4 --compare mpi --compute idle -i 20 -x 3
run iallreduce-cpu  --op iallreduce -m 16:64M --factor 4 --compare mpi --compute cpu -i 20 -x 3
run allreduce       --op allreduce -m 8:16M --factor 4 --compare mpi -d float32 -i 50 -x 5
run allreduce-16m   --op allreduce -m 16M:16M --compare mpi -d float32 -i 50 -x 5
# Latency mode: ranks poll with sched_yield instead of sleeping (dp_config_t
# wait_mode DP_WAIT_YIELD); the agent's yielding idle polls do the rest.
run allreduce-yield --op allreduce -m 8:4K --factor 8 --compare mpi -d float32 -i 5000 -x 500 --wait yield
for m in mapped direct staged; do
  run "memory-$m" --op allreduce -m 1M:64M --factor 4 --memory "$m" -i 10 -x 2
done

# Two engines: while the ranks wait in a blocking allreduce, both cores reduce.
start_agent "" --engines 2
run allreduce-2engines --op allreduce -m 1M:16M --factor 4 --compare mpi -d float32 -i 50 -x 5
run iallreduce-idle-2engines --op iallreduce -m 16:64M --factor 4 --compare mpi --compute idle -i 20 -x 3

# An agent that never goes to sleep, as on a core of its own (a DPU's Arm
# core): posts find it awake and ring no doorbell.
start_agent '"idle_spin_us": 1000000'
for r in 1 2; do
  run "iallreduce-idle-polling-$r" --op iallreduce -m 16:64M --factor 4 --compare mpi --compute idle -i 20 -x 3
done

# The agent on a core of its own, the ranks on the others: the agent with
# --agent-cores last (pinned to the last CPU, polling), the ranks bound to
# the remaining one(s) as deputy mpirun binds them there (docs/launch.md,
# "The baseline of a placement"; on 2 CPUs the ranks share CPU 0). The
# agent's stream then no longer runs on a rank's CPU between its calls, and
# so no longer empties that rank's caches and TLB (docs/PERFORMANCE.md:
# Host CPU flat to 64 MiB). MPI runs in the same placement.
if (( $(nproc) >= 2 )); then
  start_agent "" --agent-cores last
  launch=("$deputy" mpirun --baseline --agent-cores last --)
  for r in 1 2; do
    run "iallreduce-idle-own-core-$r" --op iallreduce -m 16:64M --factor 4 --compare mpi --compute idle -i 20 -x 3
  done
  launch=(mpirun)
fi
