#!/usr/bin/env python3
"""ctest: tests/mpi/mpi4py_check.py (Debian's python3-mpi4py, Open MPI) gives
the same output with deputy's PMPI library (LD_PRELOAD into the Python
processes) as without, on 2 and 3 ranks, and the library's reports show that
MPI_Iallreduce, MPI_Ialltoall, MPI_Iallgather and MPI_Ibcast were offloaded on
every rank. Exit 77 (skip) when mpi4py, Open MPI or the library is missing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pmpi_harness as h  # noqa: E402

HERE = Path(__file__).resolve().parent
OFFLOADED = ("MPI_Iallreduce", "MPI_Ialltoall", "MPI_Iallgather", "MPI_Ibcast")


def mpi4py_python(candidates: list[str]) -> str:
    """The first interpreter that imports mpi4py built on Open MPI (Debian's
    python3-mpi4py lives in /usr/bin/python3's dist-packages, which a pyenv or
    venv python3 earlier on PATH may not see)."""
    tried = []
    for python in candidates:
        r = subprocess.run([python, "-c", "from mpi4py import MPI; print(MPI.Get_library_version())"],
                           capture_output=True, text=True, env=h.base_env())
        if r.returncode == 0 and "Open MPI" in r.stdout:
            return python
        tried.append(f"{python}: " + (r.stdout.splitlines()[0] if r.returncode == 0 else
                                       (r.stderr.strip().splitlines() or ["failed"])[-1]))
    raise h.Skip("no python with mpi4py on Open MPI (Debian package python3-mpi4py): "
                 + "; ".join(tried))


def parse(r: h.Result, what: str) -> list[str]:
    lines = r.stdout.splitlines()
    if r.returncode != 0 or not lines or not lines[-1].startswith("done "):
        raise h.Failure(f"{what}: mpi4py_check failed:\n{r.describe()}\nstdout:\n{r.stdout}")
    return lines


def body() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deputy", type=Path, required=True, help="build/tools/deputy")
    ap.add_argument("--lib", type=Path, required=True, help="libdeputy-mpi-openmpi.so")
    ap.add_argument("--python", action="append", default=[],
                    help="interpreter to try first (default: /usr/bin/python3, then this one)")
    ap.add_argument("--ranks", default="2,3")
    ap.add_argument("--budget", type=float, default=170,
                    help="seconds for the whole test (below ctest's TIMEOUT)")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    h.set_budget(args.budget)
    args.deputy = args.deputy.absolute()
    args.lib = args.lib.absolute()
    mpi = h.MPIS["openmpi"]
    mpi.check()
    python = mpi4py_python(args.python + ["/usr/bin/python3", sys.executable])
    prog = [python, str(HERE / "mpi4py_check.py")]
    ranks = [int(x) for x in args.ranks.split(",")]

    native = {}
    for n in ranks:
        r = h.run(mpi.command(n, prog), h.base_env(), args.timeout)
        native[n] = parse(r, f"{n} ranks without the library")
        h.log(f"  {n} ranks without the library: {len(native[n]) - 2} cases, {r.seconds:.1f} s")
    if not args.lib.exists():
        raise h.Skip(f"{args.lib} not built (src/mpi); the runs without it passed")

    launch = h.Launch(mpi, args.lib)
    failures: list[str] = []
    with h.Agent(args.deputy) as agent:
        for n in ranks:
            what = f"{n} ranks with the library"
            report_dir = agent.dir / f"report-{n}"
            report_dir.mkdir()
            argv = launch.with_library(n, prog)
            r = h.run(argv, launch.library_env(report_dir, agent.socket), args.timeout)
            try:
                lines = parse(r, what)
            except h.Failure as e:
                failures.append(str(e))
                continue
            problems = h.line_diff(native[n], lines, lambda a, b: False)
            if problems:
                failures.append(f"{what}: the output differs from the run without the library:\n"
                                + "\n".join(problems) + f"\n{r.describe()}")
            try:
                reports = h.read_reports(report_dir, n)
            except h.Failure as e:
                failures.append(f"{what}: {e}")
                continue
            for doc in reports:
                missing = [op for op in OFFLOADED if h.offloaded(doc, op) <= 0]
                if missing:
                    failures.append(f"{what}: rank {doc['rank']} offloaded no {', '.join(missing)}")
            failures += [f"{what}: {p}" for p in h.check_setup_reasons(reports)]
            h.log(f"  {what}: {'identical' if not problems else 'DIFFERENT'}, {r.seconds:.1f} s; "
                  f"reports summed:\n{h.summary(reports)}")
        if left := agent.left_behind():
            failures.append(left)
    if failures:
        raise h.Failure("\n\n".join(failures))
    h.log("PASSED")


if __name__ == "__main__":
    h.main(body)
