#!/usr/bin/env bash
# The collective engine's figures of docs/PERFORMANCE.md, each against a
# baseline measured in the same session, runs alternated, medians printed:
#   memory   ordinary memory vs mapped (dp_malloc) time, allreduce /
#            allgather / alltoall / bcast, 1-64 MiB, 2 ranks: in the shared
#            heap (what malloc gives under libdeputy-mpi / libdeputy-heap)
#            and direct (registered malloc memory, process_vm copies)
#   engines  a 16 MiB direct allreduce with 2 engines vs 1, ranks waiting
#            in block mode
#   latency  8 B allreduce p50/p99 of one job, alone and while another job
#            on the same agent streams 64 MiB direct allreduces
# Shared placement: ranks and the agent's engines on this machine's cores.
# Usage: scripts/perf-engine.sh [--runs N] [build-dir] [memory|engines|latency ...]
set -euo pipefail
runs=3
if [[ ${1:-} == --runs ]]; then runs=$2; shift 2; fi
build=${1:-build}
shift || true
parts=("$@")
[[ ${#parts[@]} -gt 0 ]] || parts=(memory engines latency)
deputy=$build/tools/deputy
[[ -x $deputy ]] || { echo "perf-engine: $deputy not built" >&2; exit 1; }
command -v mpirun > /dev/null || { echo "perf-engine: mpirun not found (bash scripts/deps.sh test)" >&2; exit 1; }
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
work=$(mktemp -d /tmp/deputy-perf-engine-XXXXXX)
stop_agent() { [[ -f $work/agent.pid ]] && kill "$(cat "$work/agent.pid")" 2>/dev/null; rm -f "$work/agent.pid"; sleep 0.3; }
trap 'stop_agent; rm -rf "$work"' EXIT
start_agent() {  # deputy agent flags...
  stop_agent
  echo '{"agent": {"max_pool_bytes": 2147483648}}' > "$work/config.json"
  "$deputy" agent --daemon --socket "$work/a.sock" --pool-size 512m --config "$work/config.json" \
    "$@" > /dev/null
}
export DEPUTY_AGENT=$work/a.sock
bench() {  # out-json, bench coll flags...
  local out=$1; shift
  mpirun -np 2 "$deputy" bench coll "$@" --out "$out" > "$out.log" 2>&1 ||
    { echo "perf-engine: bench coll $* failed:" >&2; tail -5 "$out.log" >&2; return 1; }
}
# Medians of field F by size over files A-* and B-*, and B/A.
compare() {  # label-a, glob-a, label-b, glob-b, field
  python3 - "$@" <<'EOF'
import glob, json, statistics, sys
la, ga, lb, gb, field = sys.argv[1:6]
def load(g):
    out = {}
    for f in sorted(glob.glob(g)):
        for r in json.load(open(f))["results"]:
            if r["impl"] == "deputy" and r.get(field) is not None:
                out.setdefault(r["size"], []).append(r[field])
    return out
a, b = load(ga), load(gb)
for size in sorted(set(a) & set(b)):
    ma, mb = statistics.median(a[size]), statistics.median(b[size])
    runs = lambda v: " ".join(f"{x:.1f}" for x in v)
    print(f"  {size:>10} B  {la}: {ma:10.1f} us ({runs(a[size])})  {lb}: {mb:10.1f} us "
          f"({runs(b[size])})  {lb}/{la} {mb / ma:.2f}")
EOF
}

for part in "${parts[@]}"; do
  case $part in
    memory)
      start_agent --engines 2
      for op in allreduce allgather alltoall bcast; do
        for (( i = 1; i <= runs; ++i )); do
          for m in mapped heap direct; do
            bench "$work/mem-$op-$m-$i.json" --op "$op" -m 1M:64M --factor 4 --memory "$m" -i 10 -x 2
          done
        done
        echo "== $op, 2 ranks, 2 engines: time per call, mapped vs heap ($runs runs)"
        compare mapped "$work/mem-$op-mapped-*.json" heap "$work/mem-$op-heap-*.json" time_us
        echo "== $op, 2 ranks, 2 engines: time per call, mapped vs direct ($runs runs)"
        compare mapped "$work/mem-$op-mapped-*.json" direct "$work/mem-$op-direct-*.json" time_us
      done ;;
    engines)
      for (( i = 1; i <= runs; ++i )); do
        for e in 1 2; do
          start_agent --engines "$e"
          bench "$work/eng-$e-$i.json" --op allreduce -m 16M:16M --memory direct --wait block -i 20 -x 3
        done
      done
      echo "== allreduce 16 MiB, direct memory, --wait block: 1 engine vs 2 ($runs runs)"
      compare "1-engine" "$work/eng-1-*.json" "2-engines" "$work/eng-2-*.json" time_us ;;
    latency)
      start_agent --engines 2
      for (( i = 1; i <= runs; ++i )); do
        bench "$work/lat-idle-$i.json" --op allreduce -m 8:8 -i 3000 -x 300
        # The load: another job's 64 MiB direct allreduces, back to back,
        # for longer than the measured job runs (killed after it).
        mpirun -np 2 "$deputy" bench coll --op allreduce -m 64M:64M --memory direct -i 100000 -x 1 \
          > "$work/load-$i.log" 2>&1 &
        load=$!
        sleep 2
        bench "$work/lat-load-$i.json" --op allreduce -m 8:8 -i 3000 -x 300
        kill "$load" 2>/dev/null; wait "$load" 2>/dev/null || true
        sleep 1
      done
      echo "== 8 B allreduce while another team streams 64 MiB direct allreduces ($runs runs)"
      for f in time_p50_us time_p99_us time_us; do
        echo " $f"
        compare idle "$work/lat-idle-*.json" loaded "$work/lat-load-*.json" "$f"
      done ;;
    *) echo "perf-engine: unknown part '$part' (memory, engines, latency)" >&2; exit 2 ;;
  esac
done
