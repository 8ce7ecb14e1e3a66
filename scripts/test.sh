#!/usr/bin/env bash
# Every test deputy has, in the order that fails fastest:
#   1. release build + ctest (all GoogleTest suites)
#   2. install: a consumer built against the installed package (CMake + pkg-config)
#   3. Python: the deputy_tools package and the CLI end-to-end tests (pytest;
#      tests/launch: deputy mpirun with real mpiruns)
#   4. ASan+UBSan build + ctest
#   5. TSan build + the concurrency suites (rings, engines)
#   6. aarch64: the cross build (Debian's cross toolchain, an arm64 sysroot
#      cached outside the clone: scripts/cross-sysroot.sh) and the mover,
#      channel, coll and agent layers' tests under qemu-user (docs/arm.md)
#   7. 30 s of libFuzzer on the control-protocol decoders, on descriptors
#      with the segment memory they point into and on alltoallv's counts
#      blocks (scripts/fuzz.sh; skipped, not failed, when clang is not
#      installed)
# Exits non-zero if any step fails; prints a summary either way.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc)
# ctest runs twice as many tests as there are CPUs: most of a test's time is
# waiting (agents' bounds, sleeps, child processes), not computing: the
# release suite kept 2 CPUs 39 % busy at -j2 (174 s) and 67 % at -j4 (97 s);
# ASan's 78 % at -j4 (172 s against 280). The MPI tests run alone (RUN_SERIAL).
test_jobs=$((jobs * 2))
scripts/deps.sh test || exit 1

declare -a summary
failed=0
marker=$(mktemp /tmp/deputy-test-step-XXXXXX)
trap 'rm -f "$marker" "$marker.pytest"' EXIT
step() {
  local name=$1; shift
  echo
  echo "=== $name ==="
  local start=$SECONDS
  touch "$marker"
  if "$@"; then
    summary+=("PASS  $name ($((SECONDS - start)) s)")
  else
    summary+=("FAIL  $name ($((SECONDS - start)) s)")
    failed=$((failed + 1))
    # Name the failed tests in the summary too: it is what a CI report's
    # tail shows, and a flaky test must be findable from it.
    local log
    for log in $(find build*/Testing/Temporary -name LastTestsFailed.log -newer "$marker" 2>/dev/null); do
      while read -r line; do summary+=("      failed: ${line#*:} (${log%%/*})"); done < "$log"
    done
    if [[ -s $marker.pytest ]]; then
      while read -r line; do summary+=("      $line"); done < <(grep -E '^(FAILED|ERROR) ' "$marker.pytest")
    fi
  fi
}

configure_and_build() {  # dir, extra cmake args...
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" > "$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; return 1; }
  cmake --build "$dir" -j "$jobs"
}

release() {
  # The project's own flags (CMakeLists.txt), as scripts/main-job.sh
  # builds this folder: each command reuses what the other compiled.
  configure_and_build build &&
    ctest --test-dir build -j "$test_jobs" --output-on-failure --timeout 300
}

install_test() { tests/install/run.sh build; }

python_tests() {
  local venv=$root/.venv
  if [[ ! -x $venv/bin/python ]]; then
    /usr/bin/python3 -m venv --system-site-packages "$venv" || return 1
  fi
  "$venv/bin/pip" install --quiet --no-deps --no-build-isolation -e python >/dev/null || return 1
  # Two workers (pytest-xdist): the suites wait more than they compute (42 %
  # of 2 CPUs busy in one process, 455 s; 61 % and 280 s on two);
  # tests/conftest.py runs each suite that starts MPI jobs of agents on one
  # worker.
  DEPUTY_BIN=$root/build/tools/deputy DEPUTY_LIB=$root/build/libdeputy.so "$venv/bin/python" -m pytest -q -rfE \
    -n "$jobs" --dist loadgroup python/tests tests/python tests/bench tests/launch tests/multinode 2>&1 |
    tee "$marker.pytest"
}

asan() {
  # detect_leaks: every test must free what it allocates.
  # -O1 -g1, as ASan's documentation suggests: the slowest step of this
  # script is compiling this build, and line tables are enough for reports.
  # No ctest case runs deputy-bench-coll: not built here. Nor deputy-agent-mpi
  # (the several-node tests skip here; they run in the release step, and
  # were run under ASan by hand: docs/nodes.md), to keep CI under 20 minutes.
  # Nor libdeputy-mpi: preloaded into MPI programs that are not sanitized,
  # it cannot carry ASan's runtime (its tests skip here).
  configure_and_build build-asan -DDEPUTY_SANITIZE=address,undefined \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DDEPUTY_BENCH_COLL=OFF \
    -DDEPUTY_AGENT_MPI=OFF -DDEPUTY_MPI_LIBRARY=OFF &&
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan -j "$test_jobs" --output-on-failure --timeout 600
}

tsan() {
  # Only the concurrency suites: a full TSan build would double CI time for
  # code that runs on one thread.
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEPUTY_SANITIZE=thread \
    > build-tsan.configure.log 2>&1 || { cat build-tsan.configure.log; return 1; }
  cmake --build build-tsan -j "$jobs" --target concurrency_tests &&
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir build-tsan -j "$jobs" -L concurrency --no-tests=error --output-on-failure \
      --timeout 900
}

aarch64() {
  # The binaries an Arm host (a DPU) runs, deputy and deputy-agent-mpi, and
  # the mover, channel, coll and agent layers' suites, run under qemu-user
  # by ctest (the toolchain file names it as the emulator). Not the
  # benchmarks' MPI programs nor examples/: they build too (docs/arm.md),
  # but are not worth CI's minutes.
  local sysroot
  sysroot=$(scripts/cross-sysroot.sh) || return 1
  cmake -S . -B build-aarch64 -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake -DDEPUTY_SYSROOT="$sysroot" \
    -DDEPUTY_BUILD_EXAMPLES=OFF > build-aarch64.configure.log 2>&1 \
    || { cat build-aarch64.configure.log; return 1; }
  # The agent layer: the suites qemu-user can carry. The others reach
  # registered memory with process_vm_readv, which qemu-user 7.2 does not
  # implement, or run many emulated processes against the library's 1 s
  # bounds; they run natively in the release step and on arm64 hosts
  # (docs/arm.md).
  local agent_suites='^(AgentAuth|HostileBytes|AgentLost|AgentConfigErrors|AgentPlacement'
  agent_suites+='|AgentOnDsaTest|StagedEngineTest|NodesConfig|P2pTest)\.'
  agent_suites+='|^AgentTest\.(Mapped|StagedMode|BlockWait)'
  # qemu-user keeps flags for every page of the guest's address space, so
  # mapping the shared heap (the machine's memory by default) costs about
  # a second per process under emulation: enough, under CI's load, to miss
  # the library's 1 s answer bound on HEAP_SHARE. 1 GiB holds every test.
  local -x DEPUTY_HEAP_BYTES=$((1 << 30))
  cmake --build build-aarch64 -j "$jobs" --target deputy_cli deputy_agent_mpi mover_tests \
    channel_tests coll_tests agent_tests &&
    ctest --test-dir build-aarch64 -j "$jobs" -L '^(mover|channel|coll)$' --no-tests=error \
      --output-on-failure --timeout 600 &&
    ctest --test-dir build-aarch64 -j "$jobs" -L '^agent$' -R "$agent_suites" \
      -E '^P2pTest\.(BytesExactInEveryMemoryMode|UnregisteredOrdinaryMemory)' --no-tests=error \
      --output-on-failure --timeout 600
}

step "release build + unit tests" release
step "install consumer" install_test
step "python + CLI end-to-end" python_tests
step "ASan+UBSan build + unit tests" asan
step "TSan build + concurrency tests" tsan
if [[ $(uname -m) == x86_64 ]]; then
  step "aarch64 cross build + mover, channel, coll, agent tests under qemu" aarch64
else
  echo
  echo "aarch64 cross build: skipped (this host is $(uname -m); the release step built natively)"
fi
if scripts/fuzz.sh --check; then
  step "fuzz: control protocol, descriptors and counts blocks (30 s)" scripts/fuzz.sh 30
else
  echo
  echo "fuzz: skipped (clang not installed; bash scripts/deps.sh --fuzz installs it)"
fi

echo
echo "=== summary ==="
printf '%s\n' "${summary[@]}"
passed=$(printf '%s\n' "${summary[@]}" | grep -c '^PASS')
echo "steps: $passed passed, $failed failed"
exit $(( failed > 0 ))
