#!/usr/bin/env bash
# The main job: build deputy if needed, then run the data-mover benchmark
# against the calling core (same run, same buffers) and print the tables.
# Extra arguments go to every `deputy bench mover` run (e.g. --out results.json).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > build.configure.log 2>&1 \
    || { cat build.configure.log; exit 1; }
fi
cmake --build build -j "$(nproc)" --target deputy_cli
deputy=build/tools/deputy
echo
echo "== memmove: mover engine vs the calling core (median of 5 repeats, every byte verified) =="
"$deputy" bench mover -o memmove -s 4k,64k,1m --compare cpu "$@"
echo
echo "== crc32c: mover engine vs ISA-L on the calling core =="
"$deputy" bench mover -o crc32c -s 64k,1m --compare cpu "$@"
