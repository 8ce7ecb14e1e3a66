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
#   - the point-to-point cases (`offload_check init p2p`: MPI_ISEND ...
#     MPI_STARTALL, with MPI's own requests in the same waits) on 2 and 3
#     ranks give the same lines with the library and DEPUTY_MPI_P2P=1 as
#     without; every rank's report counts each point-to-point call the
#     cases make as carried (a Fortran call that bypassed the library would
#     leave its count at 0: Open MPI's bindings call PMPI_* directly), and
#     the private agent's count of messages and bytes it carried grew by
#     exactly the messages and bytes the program says its ranks sent;
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

# same_cases PLAIN WITH WHAT: the two runs' case lines are identical, or the
# check fails naming WHAT.
same_cases() {
  grep '^case ' "$work/$1.out" > "$work/$1.cases"
  grep '^case ' "$work/$2.out" > "$work/$2.cases"
  if ! diff -u "$work/$1.cases" "$work/$2.cases" > "$work/$2.diff"; then
    head -n 40 "$work/$2.diff" >&2
    fail "$3: the results with the library differ from MPI's"
  fi
}

# check_reports DIR NP KIND NAMES...: every rank's JSON report in DIR is
# there, names the private agent and counts each of NAMES: collectives
# offloaded (KIND collectives), or point-to-point calls carried (KIND p2p;
# MPI_Probe on even ranks and MPI_Iprobe on odd ones besides). Prints rank
# 0's counts.
check_reports() {
  python3 - "$1" "$2" "$work/a.sock" "${@:3}" <<'EOF'
import json, os, sys
reports, np, agent, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
names = sys.argv[5:]
verb = "offloaded" if kind == "collectives" else "carried"
problems = []
counted = []
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
    if kind == "collectives":
        count = {op: c["offloaded"] for op, c in report["operations"].items()}
        wanted = names
    else:
        count = report.get("p2p", {})
        wanted = names + ["MPI_Iprobe" if rank % 2 else "MPI_Probe"]
    for name in wanted:
        if count.get(name, 0) <= 0:
            passed = report["operations"].get(name, {}).get("passed")
            problems.append(f"rank {rank}: {name} {verb} {count.get(name)} times"
                            + (f" (passed: {passed})" if kind == "collectives" else ""))
    counted.append(count)
if problems:
    sys.exit("\n".join(problems))
print(f"  rank 0 {verb}: " + ", ".join(f"{name} {counted[0][name]}" for name in names))
EOF
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
    same_cases "$plain" "$with" "np=$np $mode"
    check_reports "$reports" "$np" collectives "${ops[@]}" || fail "np=$np $mode: report"
    echo "run_fortran_check: $mpi np=$np $mode: $(grep -c '^case ' "$work/$with.out") case lines" \
      "identical with and without the library, every rank offloaded every collective"
    checked=$((checked + 1))
  done
done

# The point-to-point cases, carried by deputy (DEPUTY_MPI_P2P=1).
# p2p_carried: the messages and bytes the private agent carried so far, or
# saw their receivers copy themselves (client/p2p.h).
p2p_carried() {
  "$deputy" info --socket "$work/a.sock" --format json |
    python3 -c 'import json, sys; p = json.load(sys.stdin)["p2p"]; print(p["messages"] + p["copied_by_receivers"], p["bytes"] + p["copied_bytes_by_receivers"])'
}
# The messages and bytes a run's ranks sent (its last `p2p` line).
p2p_sent() {
  sed -n 's/^offload_check: p2p \([0-9]*\) messages \([0-9]*\) bytes$/\1 \2/p' "$work/$1.out"
}
for np in 2 3; do
  plain=np$np-p2p-mpi
  with=np$np-p2p-deputy
  reports=$work/report-np$np-p2p
  mkdir -m 700 "$reports"
  run "$plain" "$np" "init p2p"
  read -r messages_before bytes_before < <(p2p_carried)
  run "$with" "$np" "init p2p" LD_PRELOAD="$library" DEPUTY_AGENT="$work/a.sock" \
    DEPUTY_MPI_REQUIRE=1 DEPUTY_MPI_THRESHOLDS="$thresholds" DEPUTY_MPI_P2P=1 \
    DEPUTY_MPI_REPORT="json:$reports"
  read -r messages_after bytes_after < <(p2p_carried)
  same_cases "$plain" "$with" "np=$np p2p"
  sent=$(p2p_sent "$with")
  [[ -n $sent ]] || fail "np=$np p2p: no line with the messages sent"
  [[ $sent == "$(p2p_sent "$plain")" ]] ||
    fail "np=$np p2p: the messages sent differ from MPI's run"
  carried="$((messages_after - messages_before)) $((bytes_after - bytes_before))"
  [[ $carried == "$sent" ]] ||
    fail "np=$np p2p: the ranks sent $sent (messages, bytes); the agent carried $carried"
  # MPI_RSEND and MPI_IRSEND count as MPI_Send and MPI_Isend, MPI_RSEND_INIT's
  # starts as MPI_Send_init's.
  check_reports "$reports" "$np" p2p MPI_Isend MPI_Irecv MPI_Send MPI_Recv MPI_Sendrecv \
    MPI_Sendrecv_replace MPI_Issend MPI_Ssend MPI_Send_init MPI_Ssend_init MPI_Recv_init ||
    fail "np=$np p2p: report"
  echo "run_fortran_check: $mpi np=$np p2p: $(grep -c '^case ' "$work/$with.out") case lines" \
    "identical with and without the library, every point-to-point call carried, and the" \
    "agent carried the $sent (messages, bytes) the ranks sent"
  checked=$((checked + 1))
done

# run_by_members: the operations the private agent's teams' members ran.
run_by_members() {
  "$deputy" info --socket "$work/a.sock" --format json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["collectives"]["run_by_members"])'
}
plain=np2-nonblocking-mpi
run "$plain" 2 "init nonblocking"
members=0
for try in 1 2 3 4 5; do
  before=$(run_by_members)
  with=np2-nonblocking-heap-$try
  # Buffers from 1 KiB in the shared heap: the members' views cover them.
  run "$with" 2 "init nonblocking" LD_PRELOAD="$library" DEPUTY_AGENT="$work/a.sock" \
    DEPUTY_MPI_REQUIRE=1 DEPUTY_MPI_THRESHOLDS="$thresholds" DEPUTY_HEAP_MIN_BYTES=1024
  same_cases "$plain" "$with" "np=2 nonblocking, heap buffers"
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
