#!/usr/bin/env python3
"""ctest: an application of examples/ (a plain MPI program) gives the same
`result:` lines under `deputy mpirun` (every operation offloaded:
DEPUTY_MPI_THRESHOLDS=all=0, DEPUTY_MPI_REQUIRE=1) as under the MPI's own
launcher, and passes its own check (exit 0) in both; the library's reports
show the named operations offloaded on every rank; deputy mpirun leaves
nothing behind. Exit 77 (skip) when the MPI, the program or the library is
missing.

Each --case is RANKS|ARGS|OPS[|NODES]: the rank count, the program's
arguments (space-separated), the MPI operations (comma-separated, may be
empty) every rank must have offloaded at least once, and the simulated
nodes `deputy mpirun --nodes` runs it on (1 when absent). --p2p runs `deputy mpirun
--p2p` (point-to-point through deputy too; OPS may name MPI_Isend ...).
Each --remote-case RANKS|ARGS|OPS runs under the MPI's own launcher with the
library preloaded and the ranks attached to an agent reached over TCP with a
key (DEPUTY_AGENT=tcp://..., DEPUTY_KEY: an agent on another host), with
DEPUTY_MPI_P2P=1 when --p2p.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "mpi"))
import pmpi_harness as h  # noqa: E402


def results(r: h.Result, what: str) -> list[str]:
    """The run's `result:` lines; a failed run or one without them is a defect."""
    lines = [line for line in r.stdout.splitlines() if line.startswith("result:")]
    if r.returncode != 0 or not lines:
        raise h.Failure(f"{what}: exit {r.returncode}, {len(lines)} result lines\n"
                        f"{r.describe()}\nstdout:\n{r.stdout}")
    return lines


def check_run(native: list[str], r: h.Result, report_dir: Path, ranks: int, expect: list[str],
              what: str, launcher: str) -> list[str]:
    """A run with the library against the plain one: the same result lines,
    and the named operations offloaded on every rank."""
    failures = []
    got = results(r, what)
    problems = h.line_diff(native, got, lambda a, b: False)
    if problems:
        failures.append(f"{what}: the result lines differ from {launcher}'s:\n" +
                        "\n".join(problems))
    reports = h.read_reports(report_dir, ranks)
    for doc in reports:
        missing = [op for op in expect if h.offloaded(doc, op) <= 0]
        if missing:
            failures.append(f"{what}: rank {doc['rank']} offloaded no "
                            f"{', '.join(missing)}:\n{h.summary(reports)}")
    failures += [f"{what}: {p}" for p in h.check_setup_reasons(reports)]
    h.log(f"  {what}: {'same results' if not problems else 'DIFFERENT'} "
          f"({r.seconds:.1f} s); {native[0]}")
    return failures


def body() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mpi", choices=sorted(h.MPIS), required=True)
    ap.add_argument("--prog", type=Path, required=True)
    ap.add_argument("--deputy", type=Path, required=True, help="build/tools/deputy")
    ap.add_argument("--lib", type=Path, required=True, help="libdeputy-mpi-<mpi>.so")
    ap.add_argument("--case", action="append", required=True, help="RANKS|ARGS|OPS[|NODES]")
    ap.add_argument("--remote-case", action="append", default=[], help="RANKS|ARGS|OPS")
    ap.add_argument("--p2p", action="store_true", help="deputy mpirun --p2p")
    ap.add_argument("--budget", type=float, default=250,
                    help="seconds for the whole test (below ctest's TIMEOUT)")
    ap.add_argument("--timeout", type=float, default=90, help="seconds per run")
    args = ap.parse_args()
    h.set_budget(args.budget)
    mpi = h.MPIS[args.mpi]
    mpi.check()
    for what, path in (("program", args.prog), ("library", args.lib), ("deputy", args.deputy)):
        if not path.exists():
            raise h.Skip(f"{what} {path} not built")
    prog = str(args.prog.absolute())
    launch = h.Launch(mpi, args.lib.absolute(), args.deputy.absolute())

    failures: list[str] = []
    for case in args.case:
        ranks_text, argv_text, ops_text, *nodes_text = case.split("|")
        ranks = int(ranks_text)
        nodes = int(nodes_text[0]) if nodes_text else 1
        argv = [prog, *shlex.split(argv_text)]
        expect = [op for op in ops_text.split(",") if op]
        what = f"{ranks} ranks{f' on {nodes} nodes' if nodes > 1 else ''}, {argv_text or 'defaults'}"
        try:
            native = results(h.run(mpi.command(ranks, argv), h.base_env(), args.timeout),
                             f"{what}, {mpi.launcher}")
            run = h.mpirun_run(launch, "deputy-apps-")
            work, report_dir, env = run.work, run.report_dir, run.env
            try:
                command = launch.by_deputy_mpirun(ranks, argv, nodes, work / "agent.log",
                                                  p2p=args.p2p)
                r = h.run(command, env, args.timeout)
                failures += check_run(native, r, report_dir, ranks, expect,
                                      f"{what}, deputy mpirun", mpi.launcher)
                left = sorted(p.name for p in work.iterdir() if p.name.startswith("deputy-mpirun-"))
                if left:
                    failures.append(f"{what}: deputy mpirun left {left} in {work}")
            finally:
                h.shutil.rmtree(work, ignore_errors=True)
        except h.Failure as e:
            failures.append(str(e))
    for case in args.remote_case:
        ranks_text, argv_text, ops_text = case.split("|")
        ranks = int(ranks_text)
        argv = [prog, *shlex.split(argv_text)]
        expect = [op for op in ops_text.split(",") if op]
        what = f"{ranks} ranks, {argv_text or 'defaults'}, the agent reached over TCP"
        try:
            native = results(h.run(mpi.command(ranks, argv), h.base_env(), args.timeout),
                             f"{what}, {mpi.launcher}")
            with h.RemoteAgent(args.deputy.absolute()) as remote:
                report_dir = remote.agent.dir / "report-remote"
                report_dir.mkdir()
                env = remote.env(launch.library_env(report_dir, None))
                if args.p2p:
                    env["DEPUTY_MPI_P2P"] = "1"
                r = h.run(launch.with_library(ranks, argv), env, args.timeout)
                failures += check_run(native, r, report_dir, ranks, expect, what, mpi.launcher)
        except h.Failure as e:
            failures.append(str(e))
    if failures:
        raise h.Failure("\n\n".join(failures))
    h.log("PASSED")


if __name__ == "__main__":
    h.main(body)
