#!/usr/bin/env bash
# Fortran programs and libdeputy-mpi: offload_check.f90 (`use mpi`) built
# with an MPI's mpifort, run on 2 and 3 ranks (MPI_INIT and MPI_INIT_THREAD)
# without the library and with it preloaded (a private agent, every
# threshold 0). Passes when
#   - every run exits 0 and checks every case bit for bit (offload_check
#     compares each result with the one it computes itself);
#   - the lines with and without the library are identical (each rank's
#     hash of each result);
#   - every rank's report (DEPUTY_MPI_REPORT=json:DIR) names the private
#     agent and counts offloaded calls of every collective the library
#     intercepts: a Fortran call that bypasses the library (Open MPI's
#     mpif.h bindings call PMPI_* directly) leaves its count at 0, and
#     without the Fortran MPI_INIT reaching the library there is no report;
#   - on 2 ranks with the nonblocking cases only and every buffer in the
#     shared heap, the members run an operation themselves at least once in
#     5 runs (`deputy info`: run_by_members): they do so only when all of
#     them wait for it in MPI_WAIT/MPI_WAITALL/MPI_WAITANY/MPI_WAITSOME,
#     which Open MPI's binding would send to PMPI_Wait*, past the
#     library's wait.
#
# Usage: tests/mpi/run_fortran_check.sh [--mpi openmpi|mpich] [--build DIR]
#                                       [--library PATH]
#   --mpi      which MPI (default openmpi): its mpifort.<mpi> and mpirun.<mpi>
#   --build    the build tree with tools/deputy and src/mpi/ (default: build)
#   --library  the PMPI library to check (default:
#              BUILD/src/mpi/libdeputy-mpi-<mpi>.so)
# Exits 0 on success, 1 on failure, 77 (with the reason) when gfortran, the
# MPI or the library is missing.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mpi=openmpi
build=$root/build
library=
while (($#)); do
  case $1 in
    --mpi) mpi=${2:?--mpi needs openmpi or mpich}; shift 2 ;;
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --library) library=${2:?--library needs a path}; shift 2 ;;
    *) echo "run_fortran_check: unknown argument '$1' (--mpi, --build, --library)" >&2; exit 2 ;;
  esac
done
case $mpi in
  openmpi | mpich) ;;
  *) echo "run_fortran_check: --mpi must be openmpi or mpich, not '$mpi'" >&2; exit 2 ;;
esac
library=${library:-$build/src/mpi/libdeputy-mpi-$mpi.so}
deputy=$build/tools/deputy

skip() { echo "run_fortran_check: SKIPPED ($mpi): $*"; exit 77; }
fail() { echo "run_fortran_check: FAILED ($mpi): $*" >&2; exit 1; }

command -v gfortran > /dev/null || skip "gfortran is not installed (Debian: gfortran)"
for tool in mpifort mpirun; do
  command -v "$tool.$mpi" > /dev/null ||
    skip "$tool.$mpi is not installed (Debian: $( [[ $mpi == openmpi ]] &&
      echo 'openmpi-bin libopenmpi-dev' || echo 'mpich libmpich-dev'))"
done
[[ -f $library ]] || skip "$library is not built (CMake found no $mpi)"
[[ -x $deputy ]] || fail "$deputy is not built"
command -v python3 > /dev/null || fail "python3 is needed to read the reports"
command -v nm > /dev/null || fail "nm (binutils) is needed to list the library's entry points"

# The collectives the library intercepts: its own table, through `deputy
# mpirun --operations`; each must have its C entry point in the library.
mapfile -t ops < <("$deputy" mpirun --operations | awk '!/^#/ && NF {print $1}')
((${#ops[@]})) || fail "\`$deputy mpirun --operations\` listed no operation"
defined=$(nm -D --defined-only "$library" | awk '{print $NF}')
for op in "${ops[@]}"; do
  grep -qx "$op" <<< "$defined" || fail "$op is in the library's table but $(basename "$library") does not define it"
done
# Every one of them from 0 bytes.
thresholds=all=0

# Everything this run makes lives in one 0700 directory, removed on exit
# with the agent stopped first.
work=$(mktemp -d /tmp/deputy-fortran-check-XXXXXX)
chmod 700 "$work"
agent_pid=
stop_agent() {
  [[ -n $agent_pid ]] || return 0
  if kill "$agent_pid" 2> /dev/null; then
    for _ in $(seq 100); do kill -0 "$agent_pid" 2> /dev/null || break; sleep 0.1; done
    if kill -0 "$agent_pid" 2> /dev/null; then
      local pid=$agent_pid
      kill -KILL "$pid" 2> /dev/null || true
      agent_pid=
      fail "the agent (pid $pid) did not stop within 10 s of SIGTERM"
    fi
  fi
  agent_pid=
}
trap 'stop_agent; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "run_fortran_check: $mpi: building offload_check.f90 with mpifort.$mpi"
(cd "$work" && "mpifort.$mpi" -O2 -Wall -o offload_check "$here/offload_check.f90") ||
  fail "mpifort.$mpi could not build offload_check.f90"

# The agent sleeps as soon as it is idle (idle_spin_us 0), so that a post
# has to wake it: ranks already waiting for an operation then claim some
# themselves (the last check below), which an agent polling while the posts
# come in mostly prevents.
echo '{"agent": {"idle_spin_us": 0}}' > "$work/agent.json"
"$deputy" agent --daemon --socket "$work/a.sock" --pidfile "$work/agent.pid" \
  --config "$work/agent.json" --log-file "$work/agent.log" > /dev/null ||
  { cat "$work/agent.log" >&2 2> /dev/null; fail "the private agent did not start"; }
agent_pid=$(cat "$work/agent.pid")

launcher=("mpirun.$mpi")
if [[ $mpi == openmpi ]]; then
  # More ranks than cores, and no binding: 2 cores shared with other work.
  launcher+=(--oversubscribe --bind-to none)
  if [[ $(id -u) -eq 0 ]]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
fi

# run NAME NP MODE [VAR=VALUE...]: the program on NP ranks, the variables set
# in the ranks only (through env, so mpirun itself runs without the
# library); MODE is the program's arguments. A hang fails after 5 minutes
# instead of holding ctest.
run() {
  local name=$1 np=$2 mode=$3
  shift 3
  local rc=0
  # shellcheck disable=SC2086  # MODE is one or two words
  timeout --kill-after=10 300 "${launcher[@]}" -np "$np" env "$@" "$work/offload_check" $mode \
    > "$work/$name.out" 2> "$work/$name.err" || rc=$?
  if ((rc != 0)); then
    cat "$work/$name.out" "$work/$name.err" >&2
    ((rc == 124)) && fail "$name: still running after 300 s"
    fail "$name: exit code $rc"
  fi
  grep -q "^offload_check: $np ranks, [1-9][0-9]* cases, 0 failed$" "$work/$name.out" ||
    { cat "$work/$name.out" "$work/$name.err" >&2; fail "$name: no clean summary line"; }
}

checked=0
for np in 2 3; do
  for mode in init init_thread; do
    plain=np$np-$mode-mpi
    with=np$np-$mode-deputy
    reports=$work/report-np$np-$mode
    mkdir -m 700 "$reports"
    run "$plain" "$np" "$mode"
    run "$with" "$np" "$mode" LD_PRELOAD="$library" DEPUTY_AGENT="$work/a.sock" \
      DEPUTY_MPI_REQUIRE=1 DEPUTY_MPI_THRESHOLDS="$thresholds" DEPUTY_MPI_REPORT="json:$reports"
    grep '^case ' "$work/$plain.out" > "$work/$plain.cases"
    grep '^case ' "$work/$with.out" > "$work/$with.cases"
    if ! diff -u "$work/$plain.cases" "$work/$with.cases" > "$work/$with.diff"; then
      head -n 40 "$work/$with.diff" >&2
      fail "np=$np $mode: the results with the library differ from MPI's"
    fi
    python3 - "$reports" "$np" "$work/a.sock" "${ops[@]}" <<'EOF' || fail "np=$np $mode: report"
import json, os, sys
reports, np, agent, ops = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
problems = []
for rank in range(np):
    path = os.path.join(reports, f"deputy-mpi-rank{rank}.json")
    if not os.path.exists(path):
        sys.exit(f"{path} is missing: the Fortran MPI_INIT/MPI_FINALIZE did not reach the library")
    with open(path) as f:
        report = json.load(f)
    if report.get("rank") != rank or report.get("size") != np:
        problems.append(f"rank {rank}: the report says rank {report.get('rank')} "
                        f"of {report.get('size')}")
    if report.get("agent") != agent:
        problems.append(f"rank {rank}: agent {report.get('agent')!r}, not {agent!r}")
    for op in ops:
        counts = report["operations"].get(op)
        if counts is None or counts["offloaded"] <= 0:
            problems.append(f"rank {rank}: {op} offloaded {counts and counts['offloaded']} "
                            f"times (passed: {counts and counts['passed']})")
if problems:
    sys.exit("\n".join(problems))
ops_seen = json.load(open(os.path.join(reports, "deputy-mpi-rank0.json")))["operations"]
print("  rank 0 offloaded: " + ", ".join(f"{op} {ops_seen[op]['offloaded']}" for op in ops))
EOF
    echo "run_fortran_check: $mpi np=$np $mode: $(grep -c '^case ' "$work/$with.out") case lines" \
      "identical with and without the library, every rank offloaded every collective"
    checked=$((checked + 1))
  done
done

# run_by_members: the operations the private agent's teams' members ran.
run_by_members() {
  "$deputy" info --socket "$work/a.sock" --format json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["collectives"]["run_by_members"])'
}
plain=np2-nonblocking-mpi
run "$plain" 2 "init nonblocking"
grep '^case ' "$work/$plain.out" > "$work/$plain.cases"
members=0
for try in 1 2 3 4 5; do
  before=$(run_by_members)
  with=np2-nonblocking-heap-$try
  # Buffers from 1 KiB in the shared heap: the members' views cover them.
  run "$with" 2 "init nonblocking" LD_PRELOAD="$library" DEPUTY_AGENT="$work/a.sock" \
    DEPUTY_MPI_REQUIRE=1 DEPUTY_MPI_THRESHOLDS="$thresholds" DEPUTY_HEAP_MIN_BYTES=1024
  grep '^case ' "$work/$with.out" > "$work/$with.cases"
  diff -u "$work/$plain.cases" "$work/$with.cases" > "$work/$with.diff" ||
    { head -n 40 "$work/$with.diff" >&2; fail "np=2 nonblocking, heap buffers: results differ"; }
  members=$(($(run_by_members) - before))
  echo "run_fortran_check: $mpi np=2 nonblocking, buffers in the heap (run $try): the members" \
    "ran $members operation(s) themselves in the library's MPI_WAIT*"
  ((members > 0)) && break
done
((members > 0)) || fail "ranks in MPI_WAIT* never ran an operation themselves in 5 runs" \
  "(the library's Fortran waits must reach its C MPI_Wait*: docs/mpi-fortran.md)"
checked=$((checked + 1))

stop_agent
echo "run_fortran_check: $mpi: $checked passed, 0 failed"
