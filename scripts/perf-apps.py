#!/usr/bin/env python3
"""Times the applications of examples/ with plain MPI and with deputy, in
both placements, runs alternated, and prints medians and ratios
(docs/PERFORMANCE.md, "fft3d and lu").

Usage: scripts/perf-apps.py [--build build] [--runs 5] [--ranks 2]
           [--app fft3d|lu|stencil3d ...] [--args "ARGS"] [--mpi openmpi|mpich]
           [--p2p]

Per run and application, four launches on the same ranks count:
  plain         mpirun -np R APP          (nothing pinned: every CPU)
  deputy        deputy mpirun -np R APP   (shared: the agent on the ranks' CPUs)
  plain-cpu0    deputy mpirun --baseline --agent-cores last -np R APP
                (plain MPI, the ranks bound to the CPUs deputy's own-core
                placement leaves them, as deputy mpirun binds them there:
                docs/launch.md, "The baseline of a placement")
  deputy-own    deputy mpirun --agent-cores last -np R APP
                (the agent on a core of its own, the ranks on the others)
--p2p: the deputy launches with `deputy mpirun --p2p` (point-to-point
through deputy too: stencil3d's halos). Ratios: deputy/plain (shared), deputy-own/plain-cpu0 (own core, the same
ranks' CPUs) and deputy-own/plain (own core charged honestly: plain MPI on
every CPU). Each application prints its time per iteration and the time
it waited for communication; OPENBLAS_NUM_THREADS=1 for every run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

DEFAULT_ARGS = {"fft3d": "-n 128 -i 10 -x 2 --no-check", "lu": "-n 3000 --iterations 3 --warmup 1",
                "stencil3d": "-n 128 -i 20 -x 3 --no-check"}
# "time per ... S s" and "waiting for ... S s" (fft3d: transposes; lu:
# panels; stencil3d: halos)
TIME = re.compile(r"time per [^0-9]*([0-9.]+) s")
WAIT = re.compile(r"waiting for [a-z]+ ([0-9.]+) s|of which waiting for panels ([0-9.]+) s")


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    t = TIME.search(r.stdout)
    w = WAIT.search(r.stdout)
    if r.returncode != 0 or not t:
        sys.exit(f"perf-apps: {' '.join(argv)} failed (exit {r.returncode}):\n{r.stdout}\n"
                 f"{r.stderr[-2000:]}")
    return float(t.group(1)), float(next(g for g in w.groups() if g)) if w else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=Path, default=Path("build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--app", action="append", choices=sorted(DEFAULT_ARGS))
    ap.add_argument("--args", help="the application's arguments (default per app)")
    ap.add_argument("--mpi", choices=("openmpi", "mpich"), default="openmpi")
    ap.add_argument("--p2p", action="store_true", help="deputy mpirun --p2p")
    args = ap.parse_args()
    deputy = args.build / "tools" / "deputy"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    mpirun = "mpirun.openmpi" if args.mpi == "openmpi" else "mpiexec.mpich"
    if not shutil.which(mpirun) or not deputy.exists():
        sys.exit(f"perf-apps: needs {mpirun} and {deputy}")
    if (os.cpu_count() or 1) < 2:
        sys.exit("perf-apps: the own-core placement needs 2 CPUs or more")
    oversub = ["--oversubscribe"] if args.mpi == "openmpi" else []
    which_mpirun = [] if args.mpi == "openmpi" else ["--mpirun", mpirun]
    deputy_launcher = [*which_mpirun, *(["--p2p"] if args.p2p else [])]
    for app in args.app or ["fft3d", "lu"]:
        prog = str(args.build / "examples" / f"{app}-{args.mpi}")
        app_args = (args.args or DEFAULT_ARGS[app]).split()
        n = str(args.ranks)
        launches = {
            "plain": [mpirun, *oversub, "-np", n, prog, *app_args],
            "deputy": [str(deputy), "mpirun", *deputy_launcher, "--", *oversub, "-np", n, prog,
                       *app_args],
            "plain-cpu0": [str(deputy), "mpirun", *which_mpirun, "--baseline", "--agent-cores",
                           "last", "--", *oversub, "-np", n, prog, *app_args],
            "deputy-own": [str(deputy), "mpirun", *deputy_launcher, "--agent-cores", "last", "--",
                           *oversub, "-np", n, prog, *app_args],
        }
        times: dict[str, list[float]] = {k: [] for k in launches}
        waits: dict[str, list[float]] = {k: [] for k in launches}
        print(f"== {app} {' '.join(app_args)}, {n} ranks, {args.mpi}, {args.runs} runs "
              f"(own core: --agent-cores last)", flush=True)
        for r in range(args.runs):
            # Alternated, the order rotated each run, so drift hits all alike.
            keys = list(launches)
            keys = keys[r % len(keys):] + keys[:r % len(keys)]
            for k in keys:
                t, w = run(launches[k], env)
                times[k].append(t)
                waits[k].append(w)
            print(f"  run {r + 1}: " + ", ".join(f"{k} {times[k][-1]:.6f} s" for k in launches),
                  flush=True)
        med = {k: statistics.median(v) for k, v in times.items()}
        for k in launches:
            print(f"  {k:11s} median {med[k]:.6f} s (min {min(times[k]):.6f}, max "
                  f"{max(times[k]):.6f}); waiting {statistics.median(waits[k]):.6f} s "
                  f"({100 * statistics.median(waits[k]) / med[k]:.0f} %)")
        print(f"  shared: deputy / plain {med['deputy'] / med['plain']:.3f}x")
        print(f"  own core, same CPUs: deputy-own / plain-cpu0 "
              f"{med['deputy-own'] / med['plain-cpu0']:.3f}x")
        print(f"  own core, charged honestly: deputy-own / plain {med['deputy-own'] / med['plain']:.3f}x")


if __name__ == "__main__":
    main()
