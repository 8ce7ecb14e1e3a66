#!/usr/bin/env python3
"""ctest: offload_check (tests/mpi/offload_check.c, an MPI program that knows
nothing of deputy) gives the same output with deputy's PMPI library as without.

For one MPI (--mpi openmpi|mpich), on 1, 2, 3 and 4 ranks:
  1. without the library: every case right (the program checks its own
     results), except the cases a known bug of that MPI gets wrong (below);
  2. with LD_PRELOAD=libdeputy-mpi-<mpi>.so and a private agent, every
     threshold 0: the output identical line for line (where MPI itself is
     known wrong, the library's line must instead be right), and the
     reports show that every eligible operation was offloaded on every rank
     and that the fallback cases were passed to MPI with their reasons;
  3. several simulated nodes: 3 agents as one MPI job, 4 ranks each attached
     to agent (rank mod 3): the same output as 4 ranks without the library.
Exit 77 (skip) when the MPI or the library is not there, saying which.

Reproduce one case: the failure message prints the command, with --only CASE.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pmpi_harness as h  # noqa: E402

# Cases that MPI itself gets wrong, by the MPI's version line ("mpi ..." in
# the output) and the case name. Without the library these cases print WRONG;
# with it they must be right or identical to MPI's.
# The library's own open bugs: their cases are skipped (and say so) unless
# --with-known-library-bugs; each entry goes when its fix lands.
KNOWN_LIBRARY_BUGS: list[tuple[str, str]] = [
    # (case substring, why); none open. The last, "thread" (two threads'
    # teams waiting on each other for the creation timeout), went with the
    # shared control channel (src/client/control_channel.h).
]

KNOWN_MPI_BUGS = [
    (r"^MPICH Version: 4\.0\.", r"\.uint(8|16|32|64)\.(min|max)\.",
     "MPICH 4.0 reduces MPI_MIN and MPI_MAX of unsigned integers as signed "
     "(pmodels/mpich#6083, fixed in 4.1)"),
    (r"^MPICH Version: 4\.0\.", r"(^|\.)i?allgatherv\.[^.]+\.n[0-9]+$",
     "MPICH 4.0.2: MPI_Allgatherv on a communicator of one rank writes the block at the start "
     "of the receive buffer, not at its displacement (a plain MPI program shows it; wrong on 1 "
     "rank only)"),
    (r"^Open MPI v4\.1\.", r"(^|\.)ialltoallv\.[^.]+\.n4097\.inplace$",
     "Open MPI 4.1.4: MPI_Ialltoallv with MPI_IN_PLACE, some counts 0 and blocks of about "
     "4 KiB and more, on 4 ranks: ranks 0 and 2 get one wrong block (a plain MPI program "
     "shows it: docs/pmpi-tests.md)"),
]


# Cases that crash the MPI library itself, without deputy (so no run could
# be compared): skipped on that MPI, saying so. offload_check's --skip takes
# substrings; only MPI_Reduce's cases name a root and in place at once.
KNOWN_MPI_CRASHES: list[tuple[str, str, str]] = [
    (flavor_case[0], flavor_case[1],
     "MPICH 4.0 (Debian 12): MPI_Reduce with MPI_IN_PLACE at a root other than 0 and 4097 "
     "doubles or uint16 on 3 ranks segfaults in MPICH's reduce (a plain MPI program shows it)")
    for flavor_case in (("mpich", ".n4097.root1.inplace"), ("mpich", ".n4097.root2.inplace"),
                        ("mpich", ".n4097.root3.inplace"))
]


def known_bug(mpi_version: str, case: str) -> str | None:
    for version, pattern, what in KNOWN_MPI_BUGS:
        if re.search(version, mpi_version) and re.search(pattern, case):
            return what
    return None


# What the program passes to MPI on purpose, per rank: (operation, reasons,
# calls). The reduction with a user-defined op on a derived datatype may be
# passed for either reason. The intercommunicator cases need 2 ranks.
def expected_fallbacks(size: int) -> list[tuple[str, tuple[str, ...], int]]:
    derived, userop, inter = "derived datatype", "user-defined op", "intercommunicator"
    # a derived send type against a predefined receive type (the allgather
    # case) may also be reported as such
    mixed = "send and receive datatypes differ"
    expect = [("MPI_Iallreduce", (userop, derived), 4), ("MPI_Allreduce", (userop,), 3)]
    for op in ("MPI_Iallgather", "MPI_Allgather"):
        expect.append((op, (derived, mixed), 1))
    for op in ("MPI_Ibcast", "MPI_Bcast", "MPI_Ialltoall", "MPI_Alltoall"):
        expect.append((op, (derived,), 1))
    if size >= 2:
        # comm.idup-nonblocking-first: before its communicator's team formed
        expect.append(("MPI_Iallreduce", ("team not formed yet",), 1))
        for op in ("MPI_Iallreduce", "MPI_Allreduce", "MPI_Ibcast", "MPI_Bcast",
                   "MPI_Iallgather", "MPI_Allgather", "MPI_Ialltoall", "MPI_Alltoall",
                   "MPI_Ibarrier", "MPI_Barrier"):
            expect.append((op, (inter,), 1))
    return expect


def parse_output(r: h.Result, what: str) -> tuple[list[str], str]:
    """The output's lines and the MPI version line; fails on a malformed run."""
    lines = r.stdout.splitlines()
    if not lines or not lines[0].startswith("offload_check size") or not lines[-1].startswith("done "):
        raise h.Failure(f"{what}: the program did not run to its end:\n{r.describe()}\n"
                        f"stdout (tail):\n" + "\n".join(lines[-10:]))
    version = lines[1][4:] if len(lines) > 1 and lines[1].startswith("mpi ") else ""
    return lines, version


def check_native(r: h.Result, ranks: int) -> list[str]:
    what = f"{ranks} rank(s) without the library"
    lines, version = parse_output(r, what)
    unknown = [line for case, line in h.iter_cases(lines)
               if " WRONG " in line and not known_bug(version, case)]
    if unknown or r.returncode not in (0, 1) or (r.returncode == 1 and not any(
            " WRONG " in line for line in lines)):
        raise h.Failure(
            f"{what}: MPI's own results are wrong in {len(unknown)} case(s) no known MPI bug "
            f"explains (or the program failed): the program's expectation or MPI is wrong\n"
            + "\n".join(unknown[:10]) + f"\n{r.describe()}")
    known = sum(1 for _, line in h.iter_cases(lines) if " WRONG " in line)
    h.log(f"  {what}: {len(lines) - 3} cases, {known} wrong by known MPI bugs, {r.seconds:.1f} s")
    return lines


def compare(reference: list[str], r: h.Result, what: str, reproduce: str) -> list[str]:
    try:
        lines, version = parse_output(r, what)
    except h.Failure as e:
        return [str(e)]
    right_where_mpi_is_wrong = 0

    def accept(a: str, b: str) -> bool:
        nonlocal right_where_mpi_is_wrong
        if a.startswith("done ") and b.startswith("done "):
            # "done N cases, W wrong": fewer wrong by the cases accepted above
            na, wa = (int(x) for x in re.findall(r"\d+", a)[:2])
            nb, wb = (int(x) for x in re.findall(r"\d+", b)[:2])
            return na == nb and wb == wa - right_where_mpi_is_wrong
        case = a.split()[1] if a.startswith("case ") else ""
        if (case and " WRONG " in a and known_bug(version, case)
                and b.split()[1] == case and " WRONG" not in b):
            right_where_mpi_is_wrong += 1
            return True
        return False

    problems = h.line_diff(reference, lines, accept)
    if problems:
        return [f"{what}: the output differs from the run without the library:\n"
                + "\n".join(problems)
                + f"\n  reproduce one case: {reproduce} --only <case name>"
                + f"\n{r.describe()}"]
    if r.returncode not in (0, 1):
        return [f"{what}: same output but exit {r.returncode}\n{r.describe()}"]
    note = (f", {right_where_mpi_is_wrong} right where MPI is known wrong"
            if right_where_mpi_is_wrong else "")
    h.log(f"  {what}: identical{note}, {r.seconds:.1f} s")
    return []


# The library's operations (h.offloaded_ops), read once in main().
OFFLOADED_OPS: tuple[str, ...] = ()


def check_reports(report_dir: Path, ranks: int, what: str,
                  agent_of: Callable[[int], str]) -> list[str]:
    """agent_of(rank): a regular expression the rank's agent socket must match."""
    try:
        reports = h.read_reports(report_dir, ranks)
    except h.Failure as e:
        return [f"{what}: {e}"]
    problems = []
    for doc in reports:
        r = doc["rank"]
        if not re.fullmatch(agent_of(r), str(doc.get("agent"))):
            problems.append(f"rank {r}: attached to agent {doc.get('agent')!r}, "
                            f"want {agent_of(r)}")
        not_offloaded = [op for op in OFFLOADED_OPS
                         if op not in h.NOT_YET_OFFLOADED and h.offloaded(doc, op) <= 0]
        if not_offloaded:
            problems.append(f"rank {r}: nothing offloaded for {', '.join(not_offloaded)}")
        for op, reasons, calls in expected_fallbacks(ranks):
            got = sum(h.passed(doc, op, reason) for reason in reasons)
            if got != calls:
                problems.append(f"rank {r}: {op} passed to MPI as {' or '.join(reasons)} "
                                f"{got} time(s), want {calls} (the program's fallback cases)")
    problems += h.check_setup_reasons(reports)
    h.log(f"  {what}: reports of {ranks} rank(s), summed:\n{h.summary(reports)}")
    return [f"{what}: {p}" for p in problems]


def nodes_by_deputy_mpirun(args: argparse.Namespace, launch: h.Launch, prog: list[str],
                           nodes: int, reference: list[str], what: str) -> list[str]:
    """`deputy mpirun --nodes K`: it starts the K agents (in its own private
    directory, made under our TMPDIR so we can see it is gone afterwards) and
    attaches rank r of S to node r*K/S."""
    run = h.mpirun_run(launch, "deputy-pmpi-mpirun-")
    work, report_dir, env = run.work, run.report_dir, run.env
    try:
        argv = launch.by_deputy_mpirun(4, prog, nodes, work / "agents.log")
        r = h.run(argv, env, args.timeout)
        failures = compare(reference, r, what, shlex.join(argv))
        failures += check_reports(report_dir, 4, what, lambda rank: re.escape(str(work)) +
                                  rf"/deputy-mpirun-[^/]+/agent-node{rank * nodes // 4}\.sock")
        left = sorted(p.name for p in work.iterdir() if p.name.startswith("deputy-mpirun-"))
        if left:
            failures.append(f"{what}: deputy mpirun left its directory {left} in {work}")
        return failures
    finally:
        h.shutil.rmtree(work, ignore_errors=True)


def nodes_by_wrapper(args: argparse.Namespace, launch: h.Launch, prog: list[str], nodes: int,
                     reference: list[str], what: str) -> list[str]:
    """The agents started here as one MPI job; rank r attached to node r mod K
    by a `sh -c` wrapper."""
    failures: list[str] = []
    with h.NodeAgents(args.deputy, nodes) as agents:
        report_dir = agents.dir / "report"
        report_dir.mkdir()
        argv = launch.on_nodes(4, agents, prog)
        r = h.run(argv, launch.library_env(report_dir, None), args.timeout)
        failures += compare(reference, r, what, shlex.join(argv))
        failures += check_reports(report_dir, 4, what,
                                  lambda rank: re.escape(str(agents.socket(rank % nodes))))
        for i in range(nodes):
            if agents.alive() and (left := h.agent_leftovers(args.deputy, agents.socket(i))):
                failures.append(f"{what}: {left}")
        if not agents.alive():
            failures.append(f"{what}: the agents' job ended:\n{agents.log_tail()}")
    return failures


def members_ran_in_wait(args: argparse.Namespace, launch: h.Launch, prog: list[str],
                        cases: tuple[str, ...], repeat: int, call: str) -> list[str]:
    """Runs `cases` (each `repeat` times) on 2 ranks with the library until
    the agent counts an operation the members ran themselves (5 runs at
    most); a failure when none did. Who claims an operation first is a race
    the agent's service thread wins whenever it polls while the posts come
    in, so this agent sleeps as soon as it is idle (`idle_spin_us` 0) and a
    post has to wake it: the members, already waiting, then claim some."""
    only = [arg for case in cases for arg in ("--only", case)]
    only += ["--skip", "inplace", "--repeat", str(repeat)]
    with h.Agent(args.deputy, config={"agent": {"idle_spin_us": 0}}) as agent:
        env = launch.library_env(agent.dir, agent.socket)
        env.pop("DEPUTY_MPI_REPORT")
        env["DEPUTY_HEAP_MIN_BYTES"] = "1024"  # every case's buffers from 1 KiB
        for _ in range(5):
            before = h.run_by_members(args.deputy, agent.socket)
            r = h.run(launch.with_library(2, prog + only), env, args.timeout)
            if r.returncode != 0:
                return [f"the {call} run failed:\n{r.describe()}"]
            members = h.run_by_members(args.deputy, agent.socket) - before
            h.log(f"  {', '.join(cases)} on 2 ranks, buffers from 1 KiB in the heap: the "
                  f"members ran {members} operation(s) themselves in {call}")
            if members:
                return []
    return [f"with the library: ranks in {call} never ran an operation themselves in 5 runs "
            f"(the library must test deputy's requests there as a wait: docs/mpi.md)"]


# The blocking forms tune can apply to, and the selection that runs their
# cases (offload_check's names start with the operation; "i" forms skipped).
TUNED_OPS = ("MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Allgather", "MPI_Alltoall",
             "MPI_Bcast", "MPI_Barrier")
TUNED_SELECTION = ("--only", "allreduce.", "--only", "reduce_scatter_block.", "--only",
                   "allgather.", "--only", "alltoall.", "--only", "bcast.", "--only", "barrier",
                   "--skip", "iall", "--skip", "ibcast", "--skip", "ireduce", "--skip", "ibarrier")


def tuned_blocking(args: argparse.Namespace, mpi: h.Mpi, launch: h.Launch,
                   prog: list[str]) -> list[str]:
    """DEPUTY_MPI_TUNE=1 on 2 ranks, every blocking case 36 times (a size
    class decides after 32 trial calls): the output must be the MPI
    library's, bit for bit, whichever path ran each call; every rank must
    report the same decisions; each must pick the path its times favour; and
    the counts must show the decisions applied (every call of a class
    decided for MPI after the decision passed as "measured slower")."""
    argv = prog + list(TUNED_SELECTION) + ["--repeat", "36"]
    reference = check_native(h.run(mpi.command(2, argv), h.base_env(), args.timeout), 2)
    what = "DEPUTY_MPI_TUNE=1, 2 ranks"
    with h.Agent(args.deputy) as agent:
        env = launch.library_env(agent.dir, agent.socket)
        env["DEPUTY_MPI_THRESHOLDS"] = "barrier=never"  # an explicit value wins over tuning
        env["DEPUTY_MPI_TUNE"] = "1"
        run_argv = launch.with_library(2, argv)
        failures = compare(reference, h.run(run_argv, env, args.timeout), what,
                           f"DEPUTY_MPI_TUNE=1 DEPUTY_MPI_THRESHOLDS=barrier=never "
                           f"{shlex.join(run_argv)}")
        try:
            reports = h.read_reports(agent.dir, 2)
        except h.Failure as e:
            return failures + [f"{what}: {e}"]
    # (Communicators of one rank, which some cases split off, decide alone.)
    keys = [sorted((d["operation"], d["ranks"], d["min_bytes"], d["deputy_us"], d["mpi_us"],
                    d["choice"], d["calls_after"]) for d in doc.get("tuned", []) if d["ranks"] > 1)
            for doc in reports]
    if not keys[0]:
        failures.append(f"{what}: rank 0 reports no tuning decision")
    if keys[0] != keys[1]:
        failures.append(f"{what}: the ranks decided differently:\n  rank 0 {keys[0]}\n"
                        f"  rank 1 {keys[1]}")
    for doc in reports:
        decisions = doc.get("tuned", [])
        if (any(d["operation"] == "MPI_Barrier" for d in decisions)
                or h.passed(doc, "MPI_Barrier", "tuning trial")
                or not h.passed(doc, "MPI_Barrier", "below threshold")):
            failures.append(f"{what}: rank {doc['rank']}: MPI_Barrier was tuned although "
                            f"DEPUTY_MPI_THRESHOLDS=barrier=never")
        for d in decisions:
            if (d["choice"] == "deputy") != (d["deputy_us"] < d["mpi_us"]):
                failures.append(f"{what}: rank {doc['rank']}: {d} chose the slower path")
        for op in TUNED_OPS:
            mine = [d for d in decisions if d["operation"] == op]
            want_slower = sum(d["calls_after"] for d in mine if d["choice"] == "mpi")
            want_offloaded = sum(d["trial_calls"] // 2 + (d["calls_after"] if d["choice"] ==
                                 "deputy" else 0) for d in mine)
            slower, off = h.passed(doc, op, "measured slower"), h.offloaded(doc, op)
            if slower != want_slower or off < want_offloaded:
                failures.append(f"{what}: rank {doc['rank']}: {op}: passed as measured slower "
                                f"{slower} (want {want_slower}), offloaded {off} (want at least "
                                f"{want_offloaded}): the decisions were not applied")
    h.log(f"  {what}: {len(keys[0])} decisions, "
          f"{sum(1 for k in keys[0] if k[5] == 'deputy')} for deputy")
    return failures


def remote_agent(args: argparse.Namespace, launch: h.Launch, prog: list[str],
                 reference: list[str]) -> list[str]:
    """The agent on "another host": it listens on 127.0.0.1 with a key, and
    the 2 ranks reach it through the secure session (DEPUTY_AGENT=tcp://,
    DEPUTY_KEY), every team served by a team proxy (docs/agent.md): every
    buffer staged, then (DEPUTY_MEMORY=rdma) read and written in place by
    the proxies over libfabric. The same output as without the library, and
    every eligible operation offloaded, in both modes."""
    failures: list[str] = []
    with h.RemoteAgent(args.deputy) as remote:
        for memory in ("staged", "rdma"):
            what = f"2 ranks with the library, the agent reached over TCP, memory {memory}"
            report_dir = remote.agent.dir / f"report-remote-{memory}"
            report_dir.mkdir()
            env = {**remote.env(launch.library_env(report_dir, None)), "DEPUTY_MEMORY": memory}
            argv = launch.with_library(2, prog)
            r = h.run(argv, env, args.timeout)
            failures += compare(reference, r, what,
                                f"deputy agent --listen {remote.address} --key K; "
                                f"DEPUTY_AGENT={remote.address} DEPUTY_KEY=K "
                                f"DEPUTY_MEMORY={memory} {shlex.join(argv)}")
            failures += check_reports(report_dir, 2, what,
                                      lambda rank: re.escape(remote.address))
            if not remote.agent.alive():
                failures.append(f"{what}: the agent died:\n{remote.agent.log_tail()}")
                break
    return failures


def bad_thresholds(mpi: h.Mpi, launch: h.Launch, prog: list[str], timeout: float,
                   args_deputy: Path) -> list[str]:
    """A malformed DEPUTY_MPI_THRESHOLDS stops the program with the item and
    what is wrong with it; so do thresholds that differ between ranks."""
    failures = []
    for value, want in (("iallreduce=tune", "'iallreduce=tune': only the blocking forms"),
                        ("alltoallv=tune", "'alltoallv=tune': only the blocking forms"),
                        ("allreduce=12x", "'allreduce=12x': the bytes must be a number"),
                        ("allreduce=18446744073709551614", "too large"),
                        ("allreduce=17179869184g", "too large"),
                        ("allreduc=1k", "unknown operation 'allreduc'"),
                        ("all=tune", "'all=tune': DEPUTY_MPI_TUNE=1")):
        env = launch.library_env(Path("/nonexistent"), None)
        env.pop("DEPUTY_MPI_REPORT")
        env["DEPUTY_MPI_THRESHOLDS"] = value
        env["DEPUTY_MPI_DISABLE"] = "1"  # the check comes first: no agent needed
        r = h.run(launch.with_library(1, prog + ["--only", "barrier"]), env, timeout)
        if r.returncode == 0 or want not in r.stderr:
            failures.append(f"DEPUTY_MPI_THRESHOLDS={value}: want a failure saying {want!r}\n"
                            f"{r.describe()}")
    # Thresholds that differ between ranks would have one offload what
    # another passes, and a library disabled on one rank only would have the
    # others form teams (collectives over a communicator: the barrier cases
    # split one off) that it never joins: MPI_Init must say so, and every
    # rank pass everything to MPI instead of a later hang.
    for setting, want in (("DEPUTY_MPI_THRESHOLDS=allreduce=tune", "the ranks' thresholds differ"),
                          ("DEPUTY_MPI_DISABLE=1", "DEPUTY_MPI_DISABLE=1 is set on some ranks")):
        with h.Agent(args_deputy) as agent:
            env = launch.library_env(agent.dir, agent.socket)
            env.pop("DEPUTY_MPI_REPORT")
            script = f'[ "${{{mpi.rank_var}}}" = 1 ] && export {setting}; exec "$@"'
            argv = mpi.command(2, ["sh", "-c", script, "sh", "env", f"LD_PRELOAD={launch.lib}",
                                   *prog, "--only", "barrier"])
            r = h.run(argv, env, timeout)
            if (r.returncode != 0 or want not in r.stderr
                    or not re.search(r"^done \d+ cases, 0 wrong$", r.stdout, re.M)):
                failures.append(f"rank 1 alone with {setting}: want the program to run to its "
                                f"end through MPI, saying {want!r}\n{r.describe()}")
    if not failures:
        h.log("  malformed DEPUTY_MPI_THRESHOLDS values stopped the program, naming them; "
              "thresholds that differ between ranks, or the library disabled on one rank: a "
              "warning, and everything went to MPI")
    return failures


def body() -> None:
    # (Not program_launch: the runs without the library need no library.)
    ap = h.program_parser(__doc__, "offload_check built for this MPI", budget=250)
    ap.add_argument("--ranks", default="1,2,3,4", help="comma-separated rank counts")
    ap.add_argument("--no-nodes", action="store_true", help="skip the several-node run")
    ap.add_argument("--nodes-via", choices=("deputy-mpirun", "wrapper"), default="deputy-mpirun",
                    help="start the several-node run with `deputy mpirun --nodes 3`, or with "
                         "agents started here and a sh -c wrapper per rank")
    ap.add_argument("--full", action="store_true", help="offload_check --full (the whole matrix)")
    ap.add_argument("--with-known-library-bugs", action="store_true",
                    help="also run the cases of KNOWN_LIBRARY_BUGS (they fail until fixed)")
    ap.add_argument("--timeout", type=float, default=150, help="seconds per run")
    args = ap.parse_args()
    h.set_budget(args.budget)
    args.deputy = args.deputy.absolute()
    args.lib = args.lib.absolute()
    args.prog = args.prog.absolute()
    global OFFLOADED_OPS
    OFFLOADED_OPS = h.offloaded_ops(args.deputy)
    mpi = h.MPIS[args.mpi]
    mpi.check()
    if not args.prog.exists():
        raise h.Skip(f"{args.prog} not built (no {args.mpi} development files at configure time)")
    ranks = [int(x) for x in args.ranks.split(",")]
    prog = [str(args.prog)] + (["--full"] if args.full else [])
    if not args.with_known_library_bugs:
        for pattern, why in KNOWN_LIBRARY_BUGS:
            h.log(f"skipping cases '{pattern}': known library bug: {why}")
            prog += ["--skip", pattern]
    for flavor, pattern, why in KNOWN_MPI_CRASHES:
        if flavor == args.mpi:
            h.log(f"skipping cases '{pattern}': known {flavor} crash: {why}")
            prog += ["--skip", pattern]

    h.log(f"offload_check with {args.mpi}: without the library")
    native = {}
    for n in ranks:
        native[n] = check_native(h.run(mpi.command(n, prog), h.base_env(), args.timeout), n)

    if not args.lib.exists():
        raise h.Skip(f"{args.lib} not built (src/mpi: the PMPI library for {args.mpi}); "
                     f"the runs without it passed")
    launch = h.Launch(mpi, args.lib, args.deputy)
    failures: list[str] = []
    h.log(f"with {args.lib.name}, one agent")
    with h.Agent(args.deputy) as agent:
        for n in ranks:
            what = f"{n} rank(s) with the library"
            report_dir = agent.dir / f"report-{n}"
            report_dir.mkdir()
            env = launch.library_env(report_dir, agent.socket)
            argv = launch.with_library(n, prog)
            reproduce = (f"deputy agent --daemon --socket DIR/a.sock; DEPUTY_AGENT=DIR/a.sock "
                         f"DEPUTY_MPI_THRESHOLDS={h.ALL_OFFLOADED} DEPUTY_MPI_REQUIRE=1 "
                         f"{shlex.join(argv)}")
            try:
                r = h.run(argv, env, args.timeout)
            except h.Failure as e:  # out of time: report what was found so far
                failures.append(str(e))
                break
            failures += compare(native[n], r, what, reproduce)
            failures += check_reports(report_dir, n, what, lambda r: re.escape(str(agent.socket)))
            if agent.alive() and (left := h.agent_leftovers(args.deputy, agent.socket)):
                failures.append(f"{what}: {left}")
            if not agent.alive():
                failures.append(f"{what}: the agent died:\n{agent.log_tail()}")
                break
        # The agent shares the ranks' CPUs (nothing pinned): ranks that all
        # wait for an operation on heap buffers of at most 256 KiB run it
        # themselves, the nonblocking ones while in MPI_Wait or MPI_Waitall
        # (docs/mpi.md). Only those cases, on 2 ranks, with every buffer of
        # 1 KiB or more in the heap (the cases of 13 elements and fewer stay
        # out): some operations must be theirs. (--skip inplace: MPICH 4.0's
        # own in-place reduce_scatter of unsigned min/max is wrong, and
        # deputy passes in place to MPI.)
        if agent.alive() and 2 in ranks and not failures:
            ops = ("iallreduce.", "ireduce_scatter_block.", "iallgather.", "ialltoall.",
                   "ibcast.")
            failures += members_ran_in_wait(args, launch, prog, ops, 1, "MPI_Wait")
            # (its 4 operations 25 times)
            failures += members_ran_in_wait(args, launch, prog, ("requests.waitall",), 25,
                                            "MPI_Waitall")
    if 2 in ranks and not failures:
        failures += remote_agent(args, launch, prog, native[2])
    if 2 in ranks and not failures:
        failures += tuned_blocking(args, mpi, launch, prog)
        failures += bad_thresholds(mpi, launch, prog, args.timeout, args.deputy)
    if not args.no_nodes and 4 in native and not any("time budget" in f for f in failures):
        nodes = 3
        h.log(f"with the library, {nodes} simulated nodes (agents as one MPI job), 4 ranks, "
              f"by {args.nodes_via}")
        what = f"4 ranks on {nodes} simulated nodes ({args.nodes_via})"
        try:
            if args.nodes_via == "deputy-mpirun":
                failures += nodes_by_deputy_mpirun(args, launch, prog, nodes, native[4], what)
            else:
                failures += nodes_by_wrapper(args, launch, prog, nodes, native[4], what)
        except h.Failure as e:
            failures.append(str(e))
    if failures:
        raise h.Failure("\n\n".join(failures))
    h.log("PASSED")


if __name__ == "__main__":
    h.main(body)
