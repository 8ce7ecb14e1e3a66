#!/usr/bin/env python3
"""ctest: bad cases under deputy's PMPI library end with a clear error on every
surviving rank, never a hang (tests/mpi/failure_check.c):
  - mismatch: an erroneous program (each rank its own count in one
    MPI_Iallreduce): every rank's MPI_Wait returns an error, stderr names
    deputy's DP_ERR_MISMATCH, and a correct allreduce on the same
    communicator afterwards succeeds;
  - death: rank 1 of 3 is killed instead of posting its part of a 64 MiB
    MPI_Iallreduce: ranks 0 and 2 get an error from MPI_Wait within the
    bound, never success (the MPI launcher is asked to keep the job running:
    Open MPI --enable-recovery, Hydra -disable-auto-cleanup; Hydra may end it
    anyway), and under Open MPI stderr says the offloaded operation failed;
  - late-death: rank 1 is killed right after posting its part: ranks 0 and 2
    either get the exact sum (the agent holds what rank 1 posted: its heap
    stays mapped until the agent is done with it) or an error; never a hang,
    never wrong data.
Afterwards the agent is up and holds no client and no team. Exit 77 (skip)
when the MPI, the program or the library is missing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pmpi_harness as h  # noqa: E402


def launcher_args(mpi: h.Mpi, ranks: int, keep_going: bool) -> list[str]:
    if mpi.name == "openmpi":
        return ["--oversubscribe", *(["--enable-recovery"] if keep_going else []), "-np",
                str(ranks)]
    return [*(["-disable-auto-cleanup"] if keep_going else []), "-n", str(ranks)]


def check_lines(stdout: str, ranks: list[int], what: str, want_error: bool) -> list[str]:
    problems = []
    for r in ranks:
        m = re.search(rf"^rank {r}: {what}: (.*)$", stdout, re.M)
        if not m:
            problems.append(f"rank {r} printed no '{what}' line")
        elif want_error and m.group(1) == "ok":
            problems.append(f"rank {r}: {what} succeeded; an error was expected")
        elif not want_error and m.group(1) != "ok":
            problems.append(f"rank {r}: {what}: {m.group(1)}")
    return problems


def body() -> None:
    ap = h.program_parser(__doc__, "failure_check built for this MPI", budget=170)
    ap.add_argument("--timeout", type=float, default=60,
                    help="seconds each case may take: beyond, it hung")
    args = ap.parse_args()
    mpi, launch = h.program_launch(args)
    failures: list[str] = []
    with h.Agent(args.deputy.absolute()) as agent:
        report_dir = agent.dir / "report"
        report_dir.mkdir()
        env = launch.library_env(report_dir, agent.socket)
        prog = ["env", f"LD_PRELOAD={launch.lib}", str(args.prog.absolute())]

        r = h.run([mpi.launcher, *launcher_args(mpi, 2, False), *prog, "mismatch"], env,
                  h.remaining(args.timeout))
        problems = check_lines(r.stdout, [0, 1], "mismatch", True)
        problems += check_lines(r.stdout, [0, 1], "team goes on", False)
        if "DP_ERR_MISMATCH" not in r.stderr:
            problems.append("stderr does not name DP_ERR_MISMATCH")
        if r.returncode != 0:
            problems.append(f"exit {r.returncode}")
        if problems:
            failures.append("mismatch: " + "; ".join(problems) + f"\n{r.describe()}\n{r.stdout}")
        h.log(f"  mismatch: {r.seconds:.1f} s, {'ok' if not problems else 'FAILED'}")

        # When a rank dies, an MPI launcher may end the job however it is
        # asked (Hydra does), so a survivor's line may never be printed;
        # what must hold is that none succeeded, somebody said why, and
        # nothing hung.
        r = h.run([mpi.launcher, *launcher_args(mpi, 3, True), *prog, "death"], env,
                  h.remaining(args.timeout))
        problems = [f"rank {rank}: the operation succeeded without rank 1's part"
                    for rank in (0, 2) if re.search(rf"^rank {rank}: death: ok$", r.stdout, re.M)]
        said = re.findall(r"^rank [02]: death: (.+)$", r.stdout, re.M)
        # Open MPI's --enable-recovery keeps the survivors running; Hydra
        # sometimes kills them before they can say anything.
        if mpi.name == "openmpi" and "offloaded to deputy failed" not in r.stderr and not said:
            problems.append("no survivor reported an error")
        if "(run_harness: killed" in r.stderr:
            problems.append("it hung")
        if problems:
            failures.append("death: " + "; ".join(problems) + f"\n{r.describe()}\n{r.stdout}")
        h.log(f"  death: {r.seconds:.1f} s, {len(said)} survivor line(s), "
              f"{'ok' if not problems else 'FAILED'}")

        r = h.run([mpi.launcher, *launcher_args(mpi, 3, True), *prog, "late-death"], env,
                  h.remaining(args.timeout))
        problems = []
        if "WRONG" in r.stdout:
            problems.append("a survivor got wrong data")
        if "(run_harness: killed" in r.stderr:
            problems.append("it hung")
        if problems:
            failures.append("late-death: " + "; ".join(problems) + f"\n{r.describe()}\n{r.stdout}")
        outcome = ("the exact sum" if "late-death: ok" in r.stdout else
                   "an error" if re.search(r"late-death: ", r.stdout) else "ended by the launcher")
        h.log(f"  late-death: {r.seconds:.1f} s, {outcome}, {'ok' if not problems else 'FAILED'}")

        if left := agent.left_behind():
            failures.append(left)
    if failures:
        raise h.Failure("\n\n".join(failures))
    h.log("PASSED")


if __name__ == "__main__":
    h.main(body)
