#!/usr/bin/env python3
"""ctest: OSU Micro-Benchmarks' own point-to-point binaries, unmodified,
with their validation on (-c), run correctly under `deputy mpirun --p2p`
(Open MPI, 2 ranks): osu_latency, osu_bw, osu_bibw, osu_mbw_mr and
osu_multi_lat, 1 B to 1 MiB. Every size says Pass, the run exits 0, and each
rank's report shows its messages offloaded.

OSU is not part of this repository: the test builds it once
(scripts/osu-build.sh) from the release tarball or source tree named by
DEPUTY_OSU_SOURCE (into --cache) and skips (exit 77) when that is unset,
saying so.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pmpi_harness as h  # noqa: E402

BENCHMARKS = ("osu_latency", "osu_bw", "osu_bibw", "osu_mbw_mr", "osu_multi_lat")
ROOT = Path(__file__).resolve().parent.parent.parent


def body() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deputy", type=Path, required=True, help="build/tools/deputy")
    ap.add_argument("--lib", type=Path, required=True, help="libdeputy-mpi-openmpi.so")
    ap.add_argument("--cache", type=Path, required=True, help="where OSU is built, once")
    ap.add_argument("--budget", type=float, default=270)
    args = ap.parse_args()
    h.set_budget(args.budget)
    source = os.environ.get("DEPUTY_OSU_SOURCE")
    if not source:
        raise h.Skip("DEPUTY_OSU_SOURCE is not set: give it OSU Micro-Benchmarks' release "
                     "tarball or source tree (7.x) to run OSU's point-to-point binaries here")
    mpi = h.MPIS["openmpi"]
    mpi.check()
    for what, path in (("library", args.lib), ("deputy", args.deputy)):
        if not path.exists():
            raise h.Skip(f"{what} {path} not built")
    built = subprocess.run([str(ROOT / "scripts" / "osu-build.sh"), source, str(args.cache)],
                           capture_output=True, text=True, timeout=h.remaining(240))
    if built.returncode != 0:
        raise h.Failure(f"building OSU failed:\n{built.stderr}")
    pt2pt = Path(built.stdout.strip().splitlines()[-1]) / "pt2pt"
    launch = h.Launch(mpi, args.lib.absolute(), args.deputy.absolute())
    failures = []
    for bench in BENCHMARKS:
        binary = pt2pt / bench
        if not binary.exists():
            failures.append(f"{binary}: not built by OSU")
            continue
        run = h.mpirun_run(launch, "deputy-osu-")
        work, report_dir, env = run.work, run.report_dir, run.env
        try:
            argv = [str(binary), "-c", "-m", "1:1048576", "-i", "50", "-x", "5"]
            r = h.run(launch.by_deputy_mpirun(2, argv, 1, work / "agent.log", p2p=True), env,
                      min(120.0, h.remaining(120)))
            rows = [line.split() for line in r.stdout.splitlines()
                    if line.strip() and line.split()[0].isdigit()]
            bad = [row for row in rows if row[-1] != "Pass"]
            if r.returncode != 0 or not rows or bad:
                failures.append(f"{bench}: exit {r.returncode}, {len(rows)} sizes, not passed: "
                                f"{bad}\n{r.describe()}\nstdout:\n{r.stdout}")
                continue
            reports = h.read_reports(report_dir, 2)
            for doc in reports:
                if sum(doc.get("p2p", {}).values()) <= 0:
                    failures.append(f"{bench}: rank {doc['rank']} offloaded no message: "
                                    f"{doc.get('p2p')}")
            h.log(f"  {bench}: {len(rows)} sizes, all Pass ({r.seconds:.1f} s)")
        finally:
            h.shutil.rmtree(work, ignore_errors=True)
    if failures:
        raise h.Failure("\n\n".join(failures))
    h.log("PASSED")


if __name__ == "__main__":
    h.main(body)
