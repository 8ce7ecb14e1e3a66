#!/usr/bin/env bash
# Builds the fuzz targets (tests/fuzz: the control protocol, descriptors
# with the segment memory they point into, and alltoallv's counts block)
# with clang in build-fuzz/ and runs each under libFuzzer for a third of N
# seconds. See docs/fuzzing.md.
#
# Usage: scripts/fuzz.sh [SECONDS] [libFuzzer flags...]   (default 60 s)
#        scripts/fuzz.sh --check   exit 0 if clang and libFuzzer are installed
#
# For each target, first replays its inputs under tests/fuzz/crashes/ (each a
# bug found earlier: it must no longer crash), then fuzzes from the seed corpus in
# tests/fuzz/corpus/<target> plus what earlier runs found
# (build-fuzz/corpus/<target>; the committed corpus is never written to).
# Prints the number of executions; exits non-zero on a crash, with the input
# saved under build-fuzz/artifacts/.
set -uo pipefail
cd "$(dirname "$0")/.."

# libFuzzer ships in libclang-rt-<version>-dev on Debian, separately from clang.
have_libfuzzer() {
  command -v clang++ >/dev/null 2>&1 || return 1
  local rt
  rt=$(clang++ -print-file-name="libclang_rt.fuzzer-$(uname -m).a" 2>/dev/null)
  [[ $rt == /* && -f $rt ]]
}

if [[ ${1:-} == --check ]]; then
  have_libfuzzer
  exit
fi

seconds=${1:-60}
shift || true
if ! [[ $seconds =~ ^[0-9]+$ ]] || (( seconds < 1 )); then
  echo "fuzz: SECONDS must be a positive integer, got '$seconds'" >&2
  exit 2
fi
if ! have_libfuzzer; then
  echo "fuzz: clang++ with libFuzzer not found; bash scripts/deps.sh --fuzz installs it" >&2
  exit 2
fi

# A UBSan report with its stack, like ASan's.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

dir=build-fuzz
if ! CC=clang CXX=clang++ cmake -S tests/fuzz -B "$dir" -G Ninja > "$dir.configure.log" 2>&1; then
  cat "$dir.configure.log"
  exit 1
fi
cmake --build "$dir" || exit 1

# Each target gets a third of the time: the control protocol (what a client
# sends on its socket), descriptors with the segment memory they point into
# (what the engines read from a client's ring and pool), and alltoallv's
# counts block (what the agent copies from a member's pool).
share=$(( (seconds + 2) / 3 ))
status=0
for target in control descriptor vector_counts; do
  bin=$dir/${target}_fuzz
  # 1. Known crashes must stay fixed.
  shopt -s nullglob
  if [[ $target == control ]]; then crashes=(tests/fuzz/crashes/crash-*)
  else crashes=(tests/fuzz/crashes/$target/crash-*); fi
  if (( ${#crashes[@]} > 0 )); then
    : > "$dir/$target-replay.log"
    still=0
    for f in "${crashes[@]}"; do
      if ! "$bin" "$f" >> "$dir/$target-replay.log" 2>&1; then
        echo "fuzz: still crashes: $f"
        still=$((still + 1))
      fi
    done
    if (( still > 0 )); then
      grep -E 'runtime error|property broken|ERROR: AddressSanitizer' "$dir/$target-replay.log"
      echo "fuzz: FAIL: $still of ${#crashes[@]} $target inputs under tests/fuzz/crashes/ still" \
           "crash (stacks: $dir/$target-replay.log)"
      exit 1
    fi
    echo "fuzz: ${#crashes[@]} known $target crash inputs replayed, none crashes"
  fi

  # 2. Fuzz. -use_value_profile helps libFuzzer through the magic bytes and
  # field comparisons the decoders and the descriptor checks make.
  mkdir -p "$dir/corpus/$target" "$dir/artifacts"
  log=$dir/$target-fuzz.log
  echo "fuzz: running $bin for $share s (log: $log)"
  "$bin" "$dir/corpus/$target" "tests/fuzz/corpus/$target" \
    -max_total_time="$share" -max_len=8192 -use_value_profile=1 \
    -artifact_prefix="$dir/artifacts/$target-" -print_final_stats=1 "$@" > "$log" 2>&1
  rc=$?

  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  corpus=$(find "$dir/corpus/$target" -type f | wc -l)
  if (( rc != 0 )); then
    grep -E 'runtime error|property broken|ERROR: (AddressSanitizer|libFuzzer)|^ +#[0-9]+ .*/(src|tests)/' "$log" | head -n 25
    artifact=$(sed -n 's/.*Test unit written to //p' "$log" | tail -n 1)
    echo "fuzz: $target: FAIL after ${execs:-?} executions (${rate:-?}/s): exit $rc"
    if [[ -n $artifact ]]; then
      echo "fuzz: crashing input: $artifact"
      echo "fuzz: reproduce with: $bin $artifact"
    fi
    status=1
    continue
  fi
  echo "fuzz: $target: ${execs:-?} executions in $share s (${rate:-?}/s), corpus $corpus inputs, no crash"
done
exit $status
