#!/usr/bin/env bash
# OSU Micro-Benchmarks' own collective binaries, unmodified and with their
# defaults, as users measure: each under plain `mpirun.openmpi -np 2` and
# under `deputy mpirun -np 2` (libdeputy-mpi preloaded, a private agent),
# alternated run by run, in one placement. Nothing of OSU is in this
# repository: the script takes OSU's release tarball (or an unpacked source
# tree), builds it once with mpicc.openmpi under OUT/osu, and runs its
# binaries from there.
#
# Usage: scripts/perf-osu.sh OSU_TARBALL_OR_DIR [build-dir] [out-dir] [runs]
#                            [shared|own-core] [benchmark...]
#   benchmark: an OSU binary without its osu_ prefix (default: the
#   nonblocking collectives libdeputy-mpi offloads, then their blocking
#   forms); OSU_FLAGS adds flags to every run (e.g. OSU_FLAGS="-m 65536:").
# Prints per benchmark and size the medians over the runs: Open MPI's and
# deputy's latency (blocking) or Overall (nonblocking) in us, deputy / Open
# MPI, and both overlaps; with each benchmark the calls libdeputy-mpi
# offloaded and passed on rank 0 (its report). Raw outputs and
# summary.json in OUT.
set -euo pipefail
src=${1:?usage: scripts/perf-osu.sh OSU_TARBALL_OR_DIR [build-dir] [out-dir] [runs] [shared|own-core] [benchmark...]}
build=${2:-build}
out=${3:-results/perf-osu}
runs=${4:-3}
placement=${5:-shared}
shift $(($# < 5 ? $# : 5))
benchmarks=("$@")
if ((${#benchmarks[@]} == 0)); then
  benchmarks=(iallreduce ireduce iallgather iallgatherv ialltoall ialltoallv ibcast igather
              igatherv iscatter iscatterv ireduce_scatter ibarrier allreduce reduce allgather
              allgatherv alltoall alltoallv bcast gather gatherv scatter scatterv reduce_scatter
              barrier)
fi
# shellcheck source=scripts/mpi-bench-setup.sh
. "$(dirname "$0")/mpi-bench-setup.sh"
mpi_bench_setup perf-osu "$build" "$placement"
mkdir -p "$out"
out=$(cd "$out" && pwd)

# OSU, built once (configure in a build directory of its own).
osu=$out/osu
bindir=$osu/install/libexec/osu-micro-benchmarks/mpi/collective
if [[ ! -x $bindir/osu_iallreduce ]]; then
  command -v mpicc.openmpi > /dev/null || { echo "perf-osu: mpicc.openmpi not found (Debian: libopenmpi-dev)" >&2; exit 1; }
  if [[ -f $src ]]; then
    mkdir -p "$osu/src"
    tar -xzf "$src" -C "$osu/src" --strip-components=1
    src=$osu/src
  fi
  [[ -x $src/configure ]] || { echo "perf-osu: $src: no OSU configure script there" >&2; exit 1; }
  src=$(cd "$src" && pwd)
  echo "== building OSU from $src into $osu (logs: $out/osu-build.log)"
  mkdir -p "$osu/build"
  (cd "$osu/build" && "$src/configure" CC=mpicc.openmpi CXX=mpicxx.openmpi --prefix="$osu/install" &&
     make -j"$(nproc)" && make install) > "$out/osu-build.log" 2>&1 ||
    { echo "perf-osu: building OSU failed: $out/osu-build.log" >&2; exit 1; }
fi

read -r -a extra <<< "${OSU_FLAGS:-}"
for run in $(seq 1 "$runs"); do
  for b in "${benchmarks[@]}"; do
    bin=$bindir/osu_$b
    [[ -x $bin ]] || { echo "perf-osu: $bin: no such OSU benchmark" >&2; exit 1; }
    echo "== run $run: osu_$b ${extra[*]}"
    mpirun.openmpi --oversubscribe -np 2 "$bin" "${extra[@]}" > "$out/mpi-$b-run$run.txt" \
      2>> "$out/stderr.log"
    rm -rf "$out/report-$b-run$run"
    mkdir -p "$out/report-$b-run$run"
    DEPUTY_MPI_REPORT="json:$out/report-$b-run$run" "$deputy" mpirun "${layout[@]}" -np 2 \
      "$bin" "${extra[@]}" > "$out/deputy-$b-run$run.txt" 2>> "$out/stderr.log"
  done
done

python3 - "$out" "${benchmarks[@]}" << 'EOF'
import glob, json, re, statistics, sys
from pathlib import Path

out, benchmarks = Path(sys.argv[1]), sys.argv[2:]

def parse(path):
    """size -> (time_us, overlap_pct or None): OSU's latency column, or for a
    nonblocking benchmark its Overall and Overlap(%) columns."""
    rows, header = {}, None
    for line in open(path):
        if line.startswith("#"):
            if "Size" in line:
                header = re.split(r"\s{2,}", line.lstrip("# ").strip())
            continue
        cells = line.split()
        if not cells or not cells[0].isdigit() or not header:
            continue
        if "Overall(us)" in header:
            rows[int(cells[0])] = (float(cells[header.index("Overall(us)")]),
                                   float(cells[header.index("Overlap(%)")]))
        elif len(cells) >= 2:
            rows[int(cells[0])] = (float(cells[1]), None)
    return rows

def medians(files):
    by = {}
    for f in files:
        for size, (t, o) in parse(f).items():
            by.setdefault(size, []).append((t, o))
    return {s: (statistics.median(t for t, _ in v),
                None if v[0][1] is None else statistics.median(o for _, o in v))
            for s, v in by.items()}

summary = {}
for b in benchmarks:
    mpi = medians(sorted(glob.glob(str(out / f"mpi-{b}-run*.txt"))))
    dep = medians(sorted(glob.glob(str(out / f"deputy-{b}-run*.txt"))))
    counts = {}
    for f in glob.glob(str(out / f"report-{b}-run*" / "deputy-mpi-rank0.json")):
        for name, op in json.load(open(f))["operations"].items():
            if op["offloaded"] or op["passed"]:
                c = counts.setdefault(name, [0, 0])
                c[0] += op["offloaded"]
                c[1] += sum(op["passed"].values())
    print(f"osu_{b}: " + (", ".join(f"{k} offloaded {v[0]} passed {v[1]}" for k, v in
                                      sorted(counts.items())) or "no report"))
    rows = []
    for size in sorted(set(mpi) & set(dep)):
        (tm, om), (td, od) = mpi[size], dep[size]
        ratio = td / tm if tm > 0 else float("inf")
        rows.append({"size": size, "mpi_us": tm, "deputy_us": td, "ratio": ratio,
                     "mpi_overlap": om, "deputy_overlap": od})
        ovl = f"  overlap {om:5.1f} -> {od:5.1f} %" if om is not None else ""
        print(f"  {size:>9}  mpi {tm:10.2f}  deputy {td:10.2f}  x{ratio:5.2f}{ovl}")
    summary[b] = {"rows": rows, "report_rank0": counts}
json.dump(summary, open(out / "summary.json", "w"), indent=1)
EOF
