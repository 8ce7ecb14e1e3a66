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
#   forms; point-to-point ones too: latency, bw, bibw ...); OSU_FLAGS adds
#   flags to every run (e.g. OSU_FLAGS="-m 65536:"); P2P=1 runs deputy
#   mpirun --p2p (point-to-point through deputy).
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

# OSU, built once (scripts/osu-build.sh).
osudir=$("$(dirname "$0")/osu-build.sh" "$src" "$out/osu")

read -r -a extra <<< "${OSU_FLAGS:-}"
# P2P=1: point-to-point through deputy too (deputy mpirun --p2p).
p2p=()
[[ ${P2P:-0} == 1 ]] && p2p=(--p2p)
for run in $(seq 1 "$runs"); do
  for b in "${benchmarks[@]}"; do
    bin=$osudir/collective/osu_$b
    [[ -x $bin ]] || bin=$osudir/pt2pt/osu_$b
    [[ -x $bin ]] || { echo "perf-osu: osu_$b: no such OSU benchmark in $osudir" >&2; exit 1; }
    echo "== run $run: osu_$b ${extra[*]}"
    mpirun.openmpi --oversubscribe -np 2 "$bin" "${extra[@]}" > "$out/mpi-$b-run$run.txt" \
      2>> "$out/stderr.log"
    rm -rf "$out/report-$b-run$run"
    mkdir -p "$out/report-$b-run$run"
    DEPUTY_MPI_REPORT="json:$out/report-$b-run$run" "$deputy" mpirun "${layout[@]}" "${p2p[@]}" -np 2 \
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
        doc = json.load(open(f))
        for name, op in doc["operations"].items():
            if op["offloaded"] or op["passed"]:
                c = counts.setdefault(name, [0, 0])
                c[0] += op["offloaded"]
                c[1] += sum(op["passed"].values())
        for name, n in doc.get("p2p", {}).items():  # point-to-point calls (P2P=1)
            if n:
                counts.setdefault(name, [0, 0])[0] += n
    print(f"osu_{b}: " + (", ".join(f"{k} offloaded {v[0]} passed {v[1]}" for k, v in
                                      sorted(counts.items())) or "no report"))
    rows = []
    for size in sorted(set(mpi) & set(dep)):
        (tm, om), (td, od) = mpi[size], dep[size]
        ratio = td / tm if tm > 0 else float("inf")
        rows.append({"size": size, "mpi_us": tm, "deputy_us": td, "ratio": ratio,
                     "mpi_overlap": om, "deputy_overlap": od})
        ovl = f"  overlap {om:5.1f} -> {od:5.1f} %" if om is not None else ""
        # (osu_bw, osu_bibw, osu_mbw_mr: MB/s, where more is better)
        print(f"  {size:>9}  mpi {tm:10.2f}  deputy {td:10.2f}  x{ratio:5.2f}{ovl}")
    summary[b] = {"rows": rows, "report_rank0": counts}
json.dump(summary, open(out / "summary.json", "w"), indent=1)
EOF
