#!/usr/bin/env bash
# Builds OSU Micro-Benchmarks, unmodified, once: from its release tarball or
# an unpacked source tree, with mpicc.openmpi, into DIR/install (configure in
# DIR/build, the log in DIR/osu-build.log). Prints the directory that holds
# its binaries (libexec/osu-micro-benchmarks/mpi, with collective/ and
# pt2pt/ under it). Nothing of OSU is in this repository: scripts/perf-osu.sh
# and the OSU test (tests/mpi/run_osu_p2p_check.py) take its path.
# Usage: scripts/osu-build.sh OSU_TARBALL_OR_DIR DIR
set -euo pipefail
src=${1:?usage: scripts/osu-build.sh OSU_TARBALL_OR_DIR DIR}
dir=${2:?usage: scripts/osu-build.sh OSU_TARBALL_OR_DIR DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
bindir=$dir/install/libexec/osu-micro-benchmarks/mpi
if [[ ! -x $bindir/collective/osu_iallreduce || ! -x $bindir/pt2pt/osu_latency ]]; then
  command -v mpicc.openmpi > /dev/null || { echo "osu-build: mpicc.openmpi not found (Debian: libopenmpi-dev)" >&2; exit 1; }
  [[ -e $src ]] || { echo "osu-build: $src: no such file or directory" >&2; exit 1; }
  if [[ -f $src ]]; then
    rm -rf "$dir/src"
    mkdir -p "$dir/src"
    tar -xzf "$src" -C "$dir/src" --strip-components=1
    src=$dir/src
  fi
  [[ -x $src/configure ]] || { echo "osu-build: $src: no OSU configure script there" >&2; exit 1; }
  src=$(cd "$src" && pwd)
  echo "osu-build: building OSU from $src into $dir (log: $dir/osu-build.log)" >&2
  mkdir -p "$dir/build"
  (cd "$dir/build" && "$src/configure" CC=mpicc.openmpi CXX=mpicxx.openmpi --prefix="$dir/install" &&
     make -j"$(nproc)" && make install) > "$dir/osu-build.log" 2>&1 ||
    { echo "osu-build: building OSU failed: $dir/osu-build.log" >&2; exit 1; }
fi
echo "$bindir"
