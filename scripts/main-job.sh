#!/usr/bin/env bash
# The main job in one command: deputy's offloaded iallreduce against
# MPI_Iallreduce on 2 MPI ranks of this node, OSU's overlap method, in both
# placements of the agent (sharing the ranks' cores; on a core of its own).
#   1. builds deputy and deputy-bench-coll if needed (as scripts/demo.sh does)
#   2-3. per placement, deputy mpirun --no-preload --agent-cores shared|last -- -np 2
#        build/tools/deputy bench coll --op iallreduce -m 8:16M --compare mpi
#        --compute idle --out results/main-job/iallreduce-PLACEMENT.json
#        (a private agent; own-core: the agent on the last core, the ranks bound
#        to the others; the agent's log in results/main-job/agent-PLACEMENT.log)
#   4. prints the table of both
#   5. draws the figures into results/main-job/ (PNG and SVG) with deputy_tools
# Fresh Debian 12: as root this script installs what it misses itself (like
# scripts/demo.sh); as another user it prints the apt-get line to run. Extra arguments go to `bench coll`
# (e.g. --wait block, --memory direct). DEPUTY_BUILD_DIR overrides build/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${DEPUTY_BUILD_DIR:-build}
out=results/main-job
deputy=$build/tools/deputy

say() { printf '\n== %s\n' "$*"; }

# The test list brings the Python packages (matplotlib, rich, venv) the
# table and figures need, so one command works on a fresh machine.
scripts/deps.sh test
/usr/bin/python3 -c 'import ensurepip, matplotlib, rich' 2>/dev/null \
  || { echo "main-job: Python packages missing for the table and figures: run bash scripts/deps.sh test" >&2; exit 1; }

# 1. Build: configure once (again when the build has no deputy_bench_coll target:
#    MPI was installed after the first configure), then an incremental build.
if [[ ! -f $build/build.ninja ]] || ! grep -q 'deputy_bench_coll' "$build/build.ninja"; then
  say "configuring $build"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$build.configure.log" 2>&1 \
    || { cat "$build.configure.log"; exit 1; }
fi
say "building deputy and deputy-bench-coll in $build"
cmake --build "$build" -j "$(nproc)" --target deputy_cli deputy_bench_coll
[[ -x $build/tools/deputy-bench-coll ]] \
  || { echo "main-job: $build/tools/deputy-bench-coll was not built: CMake did not find MPI (see $build.configure.log)" >&2; exit 1; }

# deputy_tools for the table and the figures, in .venv as scripts/test.sh makes it.
venv=$root/.venv
if [[ ! -x $venv/bin/python ]]; then
  say "creating $venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
if ! "$venv/bin/python" -c 'import deputy_tools.kinds.coll' 2>/dev/null; then
  "$venv/bin/pip" install --quiet --no-deps --no-build-isolation -e python
fi

# 2-3. Both placements of docs/PERFORMANCE.md, one private agent each (deputy
#    mpirun stops it on any exit): "shared" (nothing pinned: the agent shares the
#    ranks' cores) and "own-core" (--agent-cores last: the agent alone on the last
#    core, the ranks on the CPUs it leaves, yielding when idle). Open MPI refuses
#    root without these two; one slot per core, so fewer than 2 cores needs
#    --oversubscribe.
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
cores=$( (lscpu -p=core,socket 2>/dev/null || true) | grep -v '^#' | sort -u | wc -l)
(( cores > 0 )) || cores=$(nproc)
mkdir -p "$out"
rm -f "$out"/iallreduce-*.json "$out"/agent-*.log
placements=(shared own-core)
(( $(nproc) >= 2 )) || { placements=(shared); echo "main-job: one CPU: no core to give the agent, the own-core placement is skipped" >&2; }
results=()
for placement in "${placements[@]}"; do
  layout=shared; [[ $placement == own-core ]] && layout=last
  say "placement $placement: a private agent (--agent-cores $layout)"
  # deputy mpirun starts the agent, binds the ranks to the CPUs the layout
  # leaves them (docs/launch.md, "Placement under mpirun") and stops it all
  # on any exit; --no-preload: bench coll calls deputy's API itself.
  oversubscribe=()
  (( cores >= 2 )) || oversubscribe=(--oversubscribe)
  result=$out/iallreduce-$placement.json
  cmd=("$deputy" mpirun --no-preload --agent-cores "$layout" --agent-log "$out/agent-$placement.log"
       -- "${oversubscribe[@]}" -np 2 "$deputy" bench coll --op iallreduce -m 8:16M --compare mpi
       --compute idle --out "$result" "$@")
  say "${cmd[*]}"
  "${cmd[@]}"
  results+=("$result")
done

# 4. The table (Markdown, also saved): both placements, deputy beside MPI in each.
say "table ($out/iallreduce.md)"
"$venv/bin/python" -m deputy_tools table "${results[@]}" -o "$out/iallreduce.md" > /dev/null
cat "$out/iallreduce.md"

# 5. The figures.
say "figures ($out/)"
"$venv/bin/python" -m deputy_tools plot "${results[@]}" -o "$out/" \
  --figure overlap_vs_size --figure overall_vs_size --figure time_vs_size \
  --figure busbw_vs_size --figure host_cpu_vs_size
