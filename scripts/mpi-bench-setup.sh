# Sourced by the scripts that time deputy-bench-mpi under `deputy mpirun`
# (perf-mpi.sh, mpi-thresholds.sh): checks the build, sets $deputy, $bench
# and $layout (the `deputy mpirun` flags of a placement) and lets Open MPI
# run as root.
# Usage: mpi_bench_setup SCRIPT-NAME BUILD-DIR shared|own-core
mpi_bench_setup() {
  local name=$1 build=$2 placement=$3 f
  deputy="$build/tools/deputy"
  bench="$build/tools/deputy-bench-mpi-openmpi"
  for f in "$deputy" "$bench"; do
    [ -x "$f" ] || { echo "$name: $f not built (cmake --build $build)" >&2; exit 1; }
  done
  case $placement in
    shared) layout=() ;;
    own-core) layout=(--agent-cores last) ;;
    *) echo "$name: placement $placement: shared or own-core" >&2; exit 1 ;;
  esac
  if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
}
