#!/usr/bin/env bash
# Installs deputy from a build tree into a temporary prefix, then builds a
# consumer against it twice: with CMake (find_package) and with pkg-config.
# Usage: tests/install/run.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$here/consumer" -B "$work/cmake-build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/cmake-build" > "$work/build.log"
libdir=$(dirname "$(find "$work/prefix" -name libdeputy.so | head -n 1)")
LD_LIBRARY_PATH="$libdir" "$work/cmake-build/consumer"

export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -Wall -Wextra -Werror "$here/consumer/consumer.c" -o "$work/consumer-pc" \
  $(pkg-config --cflags --libs deputy)
LD_LIBRARY_PATH="$libdir" "$work/consumer-pc"
echo "install test: cmake package and pkg-config consumers built and ran"
