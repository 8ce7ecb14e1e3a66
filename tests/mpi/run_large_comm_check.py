#!/usr/bin/env python3
"""ctest: tests/mpi/large_comm_check.c on 100 ranks with deputy's PMPI library
(LD_PRELOAD, a private agent): MPI_COMM_WORLD above the 64 ranks a team once
held, its rows of 10 and its first 80 ranks all get teams, every collective
the program calls on them is offloaded on every rank (the reports say so,
none passed to MPI) and every result is right. Exit 77 (skip) when the MPI,
the program or the library is missing.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pmpi_harness as h  # noqa: E402

# What each rank calls on its three communicators (and one more allreduce on
# MPI_COMM_WORLD for the verdict).
EXPECTED = {"MPI_Allreduce": 4, "MPI_Allgather": 3, "MPI_Alltoall": 3, "MPI_Bcast": 3,
            "MPI_Barrier": 3, "MPI_Iallreduce": 3}


def body() -> None:
    ap = h.program_parser(__doc__, "large_comm_check_<mpi>", budget=250)
    ap.add_argument("--ranks", type=int, default=100)
    args = ap.parse_args()
    _, launch = h.program_launch(args)
    n = args.ranks
    failures: list[str] = []
    # The agent serves every rank: one client per rank.
    with h.Agent(args.deputy.absolute(), {"agent": {"max_clients": max(256, n + 8)}}) as agent:
        report_dir = agent.dir / "report"
        report_dir.mkdir()
        r = h.run(launch.with_library(n, [str(args.prog.absolute())]),
                  launch.library_env(report_dir, agent.socket), h.remaining(200))
        if r.returncode != 0 or "large_comm_check: ok" not in r.stdout:
            raise h.Failure(f"{n} ranks with the library:\n{r.describe()}\nstdout:\n{r.stdout}\n"
                            f"agent log:\n{agent.log_tail()}")
        reports = h.read_reports(report_dir, n)
        for doc in reports:
            for op, want in EXPECTED.items():
                got, passed = h.offloaded(doc, op), h.passed(doc, op)
                if got != want or passed:
                    failures.append(f"rank {doc['rank']}: {op} offloaded {got} of {want}, "
                                    f"passed to MPI {doc['operations'].get(op, {}).get('passed')}")
        failures += h.check_setup_reasons(reports)
        h.log(f"  {n} ranks with the library: ok, {r.seconds:.1f} s; reports summed:\n"
              f"{h.summary(reports)}")
        if left := agent.left_behind():
            failures.append(left)
    if failures:
        raise h.Failure("\n".join(failures[:20]) + (f"\n... {len(failures) - 20} more"
                                                   if len(failures) > 20 else ""))
    h.log("PASSED")


if __name__ == "__main__":
    h.main(body)
