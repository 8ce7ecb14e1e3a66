#!/usr/bin/env bash
# Measures the mover's performance targets (issue 2) on this machine and
# prints each figure next to its same-run baseline. Results JSON goes to
# results/perf-mover/. Run on an otherwise idle machine; see docs/PERFORMANCE.md.
# Usage: scripts/perf-mover.sh [path/to/deputy]
set -euo pipefail
cd "$(dirname "$0")/.."
deputy=${1:-build/tools/deputy}
out=results/perf-mover
mkdir -p "$out"
run() {  # name, args...
  local name=$1; shift
  echo "\$ deputy bench mover $*"
  "$deputy" bench mover "$@" --out "$out/$name.json" | grep -v '^GB per sec'
}

# 1. memmove 1 MiB, 1 engine vs the calling core, same run.
run memmove_1m -o memmove -s 1m -n 32 -e 1 --compare cpu
# 2. 2 engines vs 1, caller blocking: alternate the two configurations three
#    times so drift hits both alike; medians of the three.
for i in 1 2 3; do
  run stream_1e_$i -o memmove -s 1m -n 64 -q 64 -e 1 -x block --reps 3
  run stream_2e_$i -o memmove -s 1m -n 64 -q 64 -e 2 -x block --reps 3
done
# 3. 64 B latency mode, spin.
run latency_64 -o memmove -s 64 -q1 -x spin --compare cpu
# 4. 256 B, batches of 16, 128 outstanding.
run batch_256 -o memmove -s 256 -n 2048 -b16 -q128 -x spin
# 5. CRC32C 1 MiB vs ISA-L called directly on the calling core.
run crc_1m -o crc32c -s 1m -n 32 --compare cpu

/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys, pathlib
d = pathlib.Path(sys.argv[1])
def rows(name):
    return {r["mode"]: r for r in json.loads((d / f"{name}.json").read_text())["results"]}
m = rows("memmove_1m"); print(f"memmove 1 MiB, 1 engine / cpu: {m['mover']['gbps']/m['cpu']['gbps']:.2f}x  (target >= 0.90x)")
one = statistics.median(rows(f"stream_1e_{i}")["mover"]["gbps"] for i in (1, 2, 3))
two = statistics.median(rows(f"stream_2e_{i}")["mover"]["gbps"] for i in (1, 2, 3))
print(f"2 engines / 1 engine, 1 MiB, -x block: {two:.2f} / {one:.2f} GB/s = {two/one:.2f}x  (target >= 1.60x)")
l = rows("latency_64"); print(f"64 B -q1 spin median latency: {l['mover']['latency_ns_median']:.0f} ns (cpu {l['cpu']['latency_ns_median']:.0f} ns)  (target <= 1000 ns)")
b = rows("batch_256"); print(f"256 B -b16 -q128: {b['mover']['kops']/1000:.2f} M ops/s  (target >= 5)")
c = rows("crc_1m"); print(f"CRC32C 1 MiB mover / ISA-L direct: {c['mover']['gbps']/c['cpu']['gbps']:.2f}x  (target >= 0.90x)")
PY
