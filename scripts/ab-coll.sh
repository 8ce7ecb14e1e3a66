#!/usr/bin/env bash
# Two builds of deputy on the same `deputy bench coll` run, alternated, each
# with a private agent of its own build: how a change moved a figure, in
# one session (this machine is too noisy for figures from different days).
# Prints each run's deputy time per size, then the medians and new/old; with
# `--compare mpi` in the bench flags also the medians of Overall/MPI (MPI
# measured in the same run) and of the overlap, for the non-blocking ops.
#
# Usage: scripts/ab-coll.sh [--runs N] [--ranks N] [--own-core] [--agent-config JSON]
#            [--old-agent-config JSON] [--new-agent-config JSON] OLD-BUILD NEW-BUILD \
#            -- BENCH-COLL-FLAGS...
#   (one build twice with two agent configs compares the configs)
#   --own-core: the agent with --agent-cores last (on the last core, polling),
#               the ranks bound to the other CPUs by NEW's `deputy mpirun
#               --baseline --agent-cores last` (docs/launch.md: the placement
#               written once), for both builds
#   --ranks N:  N MPI ranks (default 2; more than the CPUs they get are
#               oversubscribed, and the figures say so)
# Example (a build of the previous commit in /tmp/old):
#   git worktree add /tmp/old HEAD~1 && cmake -S /tmp/old -B /tmp/old/build -G Ninja &&
#   cmake --build /tmp/old/build --target deputy_cli deputy-bench-coll
#   scripts/ab-coll.sh --runs 6 /tmp/old/build build -- --op allreduce -m 256K:4M --factor 4 -i 300 -x 30
set -euo pipefail
runs=4
ranks=2
own_core=0
agent_config=
old_config= new_config=
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --own-core) own_core=1; shift ;;
    --agent-config) agent_config=$2; shift 2 ;;
    --old-agent-config) old_config=$2; shift 2 ;;
    --new-agent-config) new_config=$2; shift 2 ;;
    *) echo "ab-coll: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $# -ge 3 && $3 == -- ]] || { sed -n '2,20p' "$0" >&2; exit 2; }
old=$1 new=$2
shift 3
for b in "$old" "$new"; do
  [[ -x $b/tools/deputy ]] || { echo "ab-coll: $b/tools/deputy not built" >&2; exit 1; }
done
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
work=$(mktemp -d /tmp/deputy-ab-XXXXXX)
trap 'rm -rf "$work"' EXIT
last_cpu=$(( $(nproc) - 1 ))

one() {  # build, agent config (or empty), out-json
  local b=$1 config=${2:-$agent_config} out=$3 dir flags=() launch=(mpirun) mpi_flags=()
  shift 3
  dir=$(mktemp -d "$work/agent-XXXXXX")
  if (( own_core )); then
    flags=(--agent-cores last)
    # The agent is OLD's or NEW's; the ranks' placement is one definition.
    launch=("$new/tools/deputy" mpirun --baseline --agent-cores last --)
  fi
  local cpus=$(( own_core ? last_cpu : last_cpu + 1 ))
  (( ranks > cpus )) && mpi_flags+=(--oversubscribe)
  if [[ -n $config ]]; then echo "$config" > "$dir/config.json"; flags+=(--config "$dir/config.json"); fi
  "$b/tools/deputy" agent --daemon --socket "$dir/a.sock" "${flags[@]}" > /dev/null
  DEPUTY_AGENT=$dir/a.sock "${launch[@]}" "${mpi_flags[@]}" -np "$ranks" "$b/tools/deputy" bench coll \
    "$@" --out "$out" > "$dir/bench.log" 2>&1 || { echo "ab-coll: $b failed:"; tail -5 "$dir/bench.log"; }
  kill "$(cat "$dir/agent.pid")" 2>/dev/null || true
  sleep 0.3
}

for (( i = 1; i <= runs; ++i )); do
  one "$old" "$old_config" "$work/old-$i.json" "$@"
  one "$new" "$new_config" "$work/new-$i.json" "$@"
done
python3 - "$work" "$runs" <<'EOF'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
times, versus = {}, {}
for side in ("old", "new"):
    for i in range(1, runs + 1):
        try:
            rows = json.load(open(f"{work}/{side}-{i}.json"))["results"]
        except OSError:
            continue
        mpi = {r["size"]: r for r in rows if r["impl"] == "mpi"}
        for r in rows:
            if r["impl"] == "deputy":
                times.setdefault((side, r["size"]), []).append(r["time_us"])
                m = mpi.get(r["size"])
                if m and r.get("overall_us") and m.get("overall_us"):
                    versus.setdefault((side, r["size"]), []).append(
                        (r["overall_us"] / m["overall_us"], r.get("overlap_pct", 0.0)))
for size in sorted({s for _, s in times}):
    o, n = times.get(("old", size), []), times.get(("new", size), [])
    if not o or not n:
        continue
    mo, mn = statistics.median(o), statistics.median(n)
    print(f"{size:>11} B  old {' '.join(f'{x:.1f}' for x in o)} (median {mo:.1f} us)")
    print(f"{'':>13}  new {' '.join(f'{x:.1f}' for x in n)} (median {mn:.1f} us)  new/old {mn / mo:.2f}")
    vo, vn = versus.get(("old", size)), versus.get(("new", size))
    if vo and vn:
        med = lambda v, k: statistics.median(x[k] for x in v)
        print(f"{'':>13}  Overall/MPI old {med(vo, 0):.2f} new {med(vn, 0):.2f};"
              f" overlap old {med(vo, 1):.1f} % new {med(vn, 1):.1f} %")
EOF
