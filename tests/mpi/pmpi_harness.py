"""What the tests of deputy's PMPI library share: the two MPIs, private agents,
running a program with and without the library, and reading its reports.

A run "with the library" is the unmodified program under
LD_PRELOAD=libdeputy-mpi-<mpi>.so, attached to a private agent, with every
threshold at 0 (every size offloaded), DEPUTY_MPI_REQUIRE=1 (no silent
pass-through when the agent cannot be reached) and DEPUTY_MPI_REPORT=json:DIR.

Used by run_offload_check.py, run_mpi4py_check.py and run_hpcc_check.py; ctest
runs those (label `mpi`, tests/mpi/tests.cmake). Exit code 77 means skipped,
with the reason on the last line.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

SKIP = 77  # ctest SKIP_RETURN_CODE

# DEPUTY_MPI_THRESHOLDS: every operation from 0 bytes.
ALL_OFFLOADED = "all=0"


def offloaded_ops(deputy: Path) -> tuple[str, ...]:
    """The operations the library offloads, by the names its report uses:
    its own table, as `deputy mpirun --operations` prints it."""
    r = subprocess.run([str(deputy), "mpirun", "--operations"], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        raise Failure(f"`{deputy} mpirun --operations` failed: {r.stderr.strip()}")
    ops = tuple(line.split()[0] for line in r.stdout.splitlines()
                if line.strip() and not line.startswith("#"))
    if not ops:
        raise Failure(f"`{deputy} mpirun --operations` listed no operation")
    return ops


# Operations docs/mpi.md says the library does not intercept yet ("Limits"):
# they must not appear offloaded, and the tests say to move them back when
# they do. (MPI_Alltoallv and MPI_Ialltoallv were here until the library
# intercepted them.)
NOT_YET_OFFLOADED: tuple[str, ...] = ()
# Reasons that mean something is broken, not that an operation is
# ineligible: with an agent up and at most max_clients (256) ranks per node, none may appear.
# ("below threshold" may: the library passes every 0-byte call so, whatever
# the threshold.)
SETUP_REASONS = ("no agent", "disabled", "team creation failed")


class Skip(Exception):
    """The test cannot run here; the message says why."""


class Failure(Exception):
    """The test ran and found a defect; the message says which."""


def log(*args: object) -> None:
    print(*args, flush=True)


@dataclass(frozen=True)
class Mpi:
    name: str  # openmpi | mpich: the library is libdeputy-mpi-<name>.so
    launcher: str
    rank_var: str  # the rank in MPI_COMM_WORLD, as the launcher gives it to each process

    def arguments(self, ranks: int, argv: Sequence[str]) -> list[str]:
        """The launcher's arguments, without the launcher."""
        if self.name == "openmpi":
            # --oversubscribe: 4 ranks on a 2-core machine
            return ["--oversubscribe", "-np", str(ranks), *argv]
        return ["-n", str(ranks), *argv]

    def command(self, ranks: int, argv: Sequence[str]) -> list[str]:
        return [self.launcher, *self.arguments(ranks, argv)]

    def check(self) -> None:
        if not shutil.which(self.launcher):
            package = "openmpi-bin" if self.name == "openmpi" else "mpich"
            raise Skip(f"{self.launcher} not found (Debian package {package})")


MPIS = {
    "openmpi": Mpi("openmpi", "mpirun.openmpi", "OMPI_COMM_WORLD_RANK"),
    "mpich": Mpi("mpich", "mpiexec.mpich", "PMI_RANK"),
}


def base_env() -> dict[str, str]:
    """The caller's environment without anything of deputy's or a preload: the
    runs without the library must not attach, and the runs with it get exactly
    the variables set here."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DEPUTY_") and k != "LD_PRELOAD"}
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


@dataclass
class Result:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def describe(self) -> str:
        tail = "\n".join(self.stderr.splitlines()[-25:])
        return f"$ {shlex.join(self.argv)}\nexit {self.returncode}\nstderr (tail):\n{tail}"


# The whole test's deadline (monotonic seconds), below ctest's TIMEOUT: ctest
# kills with SIGKILL, which would leave the daemonized agent and the
# temporary directories behind; running out of it here fails cleanly.
_deadline: Optional[float] = None
CLEANUP_SECONDS = 20.0  # kept back for stopping agents and ranks


def set_budget(seconds: float) -> None:
    global _deadline
    _deadline = time.monotonic() + seconds


def remaining(limit: float) -> float:
    """limit, or less when the budget ends sooner (never below 1 s)."""
    if _deadline is None:
        return limit
    return max(1.0, min(limit, _deadline - time.monotonic() - CLEANUP_SECONDS))


def run(argv: Sequence[str], env: dict[str, str], timeout: float,
        cwd: Optional[Path] = None) -> Result:
    """Runs a launcher in its own session; on timeout the whole session gets
    SIGTERM, then SIGKILL, so no rank outlives the test."""
    if _deadline is not None:
        left = _deadline - time.monotonic() - CLEANUP_SECONDS
        if left <= 0:
            raise Failure(f"out of the test's time budget (--budget) before: {shlex.join(argv)}")
        timeout = min(timeout, left)
    start = time.monotonic()
    proc = subprocess.Popen(list(argv), env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(proc)
        out, err = proc.communicate()
        err += f"\n(run_harness: killed after {timeout:.0f} s)"
        return Result(list(argv), -1, out, err, time.monotonic() - start)
    return Result(list(argv), proc.returncode, out, err, time.monotonic() - start)


def kill_session(proc: subprocess.Popen, grace: float = 5.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            # the launcher is gone; its ranks may linger a moment
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        except subprocess.TimeoutExpired:
            continue


def private_dir(prefix: str) -> Path:
    """A fresh 0700 directory short enough for socket paths (108 bytes)."""
    base = tempfile.gettempdir()
    if len(base) > 40:
        base = "/tmp"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))  # mkdtemp makes it 0700


def process_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")  # exited; init has not reaped it yet


def agent_leftovers(deputy: Path, socket: Path, wait: float = 10.0) -> Optional[str]:
    """None once the agent at `socket` has no client and no team left (the
    job has ended: the library must have detached and destroyed its teams);
    otherwise, after `wait` seconds, what is left. The agent retires an exited
    client when it sees the exit, so this waits for that, bounded."""
    deadline = time.monotonic() + wait
    while True:
        r = subprocess.run([str(deputy), "info", "--socket", str(socket), "--format", "json"],
                           capture_output=True, text=True, env=base_env(), timeout=30)
        if r.returncode != 0:
            return f"`deputy info --socket {socket}` failed: {r.stderr.strip()}"
        info = json.loads(r.stdout)
        left = {k: info.get(k) for k in ("clients", "teams") if info.get(k)}
        if not left:
            return None
        if time.monotonic() > deadline:
            return f"agent {socket} still has, {wait:.0f} s after the job ended: {left}"
        time.sleep(0.1)


def run_by_members(deputy: Path, socket: Path) -> int:
    """How many collectives the members ran themselves at the agent at
    `socket` (`deputy info`: collectives.run_by_members)."""
    r = subprocess.run([str(deputy), "info", "--socket", str(socket), "--format", "json"],
                       capture_output=True, text=True, env=base_env(), timeout=30)
    if r.returncode != 0:
        raise Failure(f"`deputy info --socket {socket}` failed: {r.stderr.strip()}")
    return int(json.loads(r.stdout)["collectives"]["run_by_members"])


class Agent:
    """A private agent: `deputy agent --daemon --socket DIR/a.sock`, DIR a
    fresh 0700 directory, with `config` (the agent's JSON) if given; stopped
    (SIGTERM, then SIGKILL) and DIR removed on exit, failure or not."""

    def __init__(self, deputy: Path, config: Optional[dict] = None):
        self.deputy = deputy
        self.config = config
        self.dir: Optional[Path] = None
        self.pid: Optional[int] = None

    @property
    def socket(self) -> Path:
        assert self.dir
        return self.dir / "a.sock"

    def __enter__(self) -> "Agent":
        self.dir = private_dir("deputy-pmpi-")
        try:
            argv = [str(self.deputy), "agent", "--daemon", "--socket", str(self.socket),
                    "--log-file", str(self.dir / "agent.log")]
            if self.config is not None:
                (self.dir / "agent.json").write_text(json.dumps(self.config))
                argv += ["--config", str(self.dir / "agent.json")]
            r = run(argv, base_env(), timeout=30)
            if r.returncode != 0:
                raise Failure(f"the agent did not start:\n{r.describe()}\n{r.stdout}")
            self.pid = int((self.dir / "agent.pid").read_text().split()[0])
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def alive(self) -> bool:
        return self.pid is not None and not process_gone(self.pid)

    def left_behind(self) -> Optional[str]:
        """After a job: None when the agent is alive with no client and no
        team left; otherwise what is wrong."""
        if not self.alive():
            return f"the agent died:\n{self.log_tail()}"
        return agent_leftovers(self.deputy.absolute(), self.socket)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = (self.dir / "agent.log").read_text(errors="replace") if self.dir else ""
        except FileNotFoundError:
            return "(no agent log)"
        return "\n".join(text.splitlines()[-lines:])

    def __exit__(self, *exc: object) -> None:
        if self.pid is not None:
            for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
                try:
                    os.kill(self.pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + wait
                while not process_gone(self.pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
                if process_gone(self.pid):
                    break
            self.pid = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


class RemoteAgent:
    """An agent as if on another host (a DPU): a private Agent that also
    listens on a free port of 127.0.0.1 with a fresh key (docs/agent.md,
    remote clients). `address` (tcp://...) and `key` for DEPUTY_AGENT and
    DEPUTY_KEY; stopped and its files removed on exit."""

    def __init__(self, deputy: Path):
        self.deputy = deputy
        self.keys: Optional[Path] = None
        self.agent: Optional[Agent] = None
        self.address = ""

    @property
    def key(self) -> Path:
        assert self.keys
        return self.keys / "k"

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """`env` with the ranks pointed at this agent."""
        return {**env, "DEPUTY_AGENT": self.address, "DEPUTY_KEY": str(self.key)}

    def __enter__(self) -> "RemoteAgent":
        import socket
        self.keys = private_dir("deputy-pmpi-key-")
        try:
            r = run([str(self.deputy), "bench", "channel", "--keygen", str(self.key)], base_env(),
                    30)
            if r.returncode != 0:
                raise Failure(f"deputy bench channel --keygen failed:\n{r.describe()}")
            with socket.socket() as probe:  # a port nobody listens on now
                probe.bind(("127.0.0.1", 0))
                self.address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
            self.agent = Agent(self.deputy, config={"agent": {"listen": self.address,
                                                              "key_file": str(self.key)}})
            self.agent.__enter__()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.agent is not None:
            self.agent.__exit__(None, None, None)
            self.agent = None
        if self.keys:
            shutil.rmtree(self.keys, ignore_errors=True)
            self.keys = None


class NodeAgents:
    """Several simulated nodes: `mpirun -np K deputy agent --socket
    DIR/agent.sock`, one MPI job whose agents listen on DIR/agent-node<i>.sock
    (docs/nodes.md). Stopped and DIR removed on exit."""

    def __init__(self, deputy: Path, nodes: int = 3):
        self.deputy = deputy
        self.nodes = nodes
        self.dir: Optional[Path] = None
        self.proc: Optional[subprocess.Popen] = None

    def socket(self, node: int) -> Path:
        assert self.dir
        return self.dir / f"agent-node{node}.sock"

    def __enter__(self) -> "NodeAgents":
        # The agents run deputy-agent-mpi, built against the MPI CMake found
        # (the `mpirun` alternative's).
        mpirun = shutil.which("mpirun")
        if not mpirun:
            raise Skip("mpirun not found: the agents of several nodes are an MPI job")
        if not (self.deputy.parent / "deputy-agent-mpi").exists():
            raise Skip(f"{self.deputy.parent / 'deputy-agent-mpi'} not built (CMake found no MPI)")
        version = subprocess.run([mpirun, "--version"], capture_output=True, text=True).stdout
        extra = ["--oversubscribe"] if "Open MPI" in version or "OpenRTE" in version else []
        self.dir = private_dir("deputy-pmpi-nodes-")
        self.log_path = self.dir / "agents.log"
        try:
            with open(self.log_path, "w") as out:
                self.proc = subprocess.Popen(
                    [mpirun, *extra, "-np", str(self.nodes), str(self.deputy), "agent",
                     "--socket", str(self.dir / "agent.sock")],
                    env=base_env(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True)
            wait = remaining(60)
            deadline = time.monotonic() + wait
            while not all(self.socket(i).exists() for i in range(self.nodes)):
                if self.proc.poll() is not None:
                    raise Failure(f"the agents' job exited ({self.proc.returncode}):\n"
                                  f"{self.log_tail()}")
                if time.monotonic() > deadline:
                    raise Failure(f"the {self.nodes} agents did not listen within {wait:.0f} s:\n"
                                  f"{self.log_tail()}")
                time.sleep(0.1)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except (AttributeError, FileNotFoundError):
            return "(no log)"

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()  # mpirun passes it to every agent
                try:
                    self.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    pass
            kill_session(self.proc)
            self.proc = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


@dataclass
class Launch:
    """How ranks are started with the library: the MPI's own launcher with
    `env LD_PRELOAD=<lib>` before the program, to an agent started here; for
    several simulated nodes either a `sh -c` wrapper that points each rank at
    agent (rank mod K), or `deputy mpirun --nodes K` (docs/launch.md), which
    starts the agents, preloads the library and picks each rank's agent
    itself. These methods are the only place that builds such commands."""

    mpi: Mpi
    lib: Path
    deputy: Optional[Path] = None

    def library_env(self, report_dir: Path, agent: Optional[Path]) -> dict[str, str]:
        env = base_env()
        env.update({"DEPUTY_MPI_THRESHOLDS": ALL_OFFLOADED, "DEPUTY_MPI_REQUIRE": "1",
                    "DEPUTY_MPI_REPORT": f"json:{report_dir}"})
        if agent is not None:
            env["DEPUTY_AGENT"] = str(agent)
        return env

    def with_library(self, ranks: int, argv: Sequence[str]) -> list[str]:
        return self.mpi.command(ranks, ["env", f"LD_PRELOAD={self.lib}", *argv])

    def deputy_mpirun_launcher(self) -> str:
        """What to give `deputy mpirun --mpirun`. It tells the MPIs apart by
        `--version`, and Open MPI says "(Open MPI)" only when called as
        `mpirun` ("mpirun.openmpi (OpenRTE) 4.1.4" otherwise), so for Open
        MPI the plain `mpirun`, when it is Open MPI's."""
        if self.mpi.name != "openmpi":
            return self.mpi.launcher
        mpirun = shutil.which("mpirun")
        version = subprocess.run([mpirun, "--version"], capture_output=True,
                                 text=True).stdout if mpirun else ""
        if "(Open MPI)" not in version:
            raise Skip(f"`mpirun` is not Open MPI's ({version.strip()[:60]!r}), and deputy mpirun "
                       f"does not recognize {self.mpi.launcher}")
        return mpirun

    def by_deputy_mpirun(self, ranks: int, argv: Sequence[str], nodes: int,
                         agent_log: Path, p2p: bool = False) -> list[str]:
        """p2p: `--p2p`, point-to-point through deputy too."""
        assert self.deputy
        return [str(self.deputy), "mpirun", "--mpirun", self.deputy_mpirun_launcher(), "--mpi-lib",
                str(self.lib), "--nodes", str(nodes), "--agent-log", str(agent_log),
                *(["--p2p"] if p2p else []), "--", *self.mpi.arguments(ranks, argv)]

    def on_nodes(self, ranks: int, agents: NodeAgents, argv: Sequence[str]) -> list[str]:
        """Rank r attaches to agent r mod K (DEPUTY_AGENT set per rank)."""
        assert agents.dir
        script = (f'DEPUTY_AGENT="$0/agent-node$(( ${{{self.mpi.rank_var}}} % {agents.nodes} )).sock" '
                  'exec "$@"')
        return self.mpi.command(ranks, ["sh", "-c", script, str(agents.dir), "env",
                                        f"LD_PRELOAD={self.lib}", *argv])


@dataclass
class MpirunRun:
    """A private directory for one `deputy mpirun` run: its TMPDIR (where
    deputy mpirun makes its own directory, so a test sees it is gone after)
    and the reports' directory, with the library's environment."""
    work: Path
    report_dir: Path
    env: dict[str, str]


def mpirun_run(launch: "Launch", prefix: str) -> MpirunRun:
    """The caller removes .work (shutil.rmtree) when done."""
    work = private_dir(prefix)
    report_dir = work / "report"
    report_dir.mkdir()
    env = launch.library_env(report_dir, None)
    env["TMPDIR"] = str(work)
    return MpirunRun(work, report_dir, env)


def read_reports(report_dir: Path, ranks: int) -> list[dict]:
    """DIR/deputy-mpi-rank<R>.json of every rank, checked for rank and size."""
    reports = []
    for r in range(ranks):
        path = report_dir / f"deputy-mpi-rank{r}.json"
        if not path.exists():
            present = sorted(p.name for p in report_dir.iterdir()) if report_dir.exists() else []
            raise Failure(f"no report {path} (DEPUTY_MPI_REPORT=json:{report_dir}; "
                          f"the directory holds {present})")
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise Failure(f"{path}: not JSON: {e}") from e
        if doc.get("rank") != r or doc.get("size") != ranks:
            raise Failure(f"{path}: rank {doc.get('rank')} size {doc.get('size')}, "
                          f"want rank {r} size {ranks}")
        if not isinstance(doc.get("operations"), dict):
            raise Failure(f"{path}: no \"operations\" object: {doc}")
        reports.append(doc)
    return reports


def offloaded(report: dict, op: str) -> int:
    """Calls of `op` the report says were offloaded: a collective's, or a
    point-to-point call's (DEPUTY_MPI_P2P=1)."""
    if op in report.get("p2p", {}):
        return int(report["p2p"][op])
    return int(report["operations"].get(op, {}).get("offloaded", 0))


def passed(report: dict, op: str, reason: Optional[str] = None) -> int:
    reasons = report["operations"].get(op, {}).get("passed", {})
    if reason is None:
        return sum(int(v) for v in reasons.values())
    return int(reasons.get(reason, 0))


def reasons_seen(reports: list[dict]) -> dict[str, dict[str, int]]:
    """reason -> op -> count over every rank."""
    seen: dict[str, dict[str, int]] = {}
    for doc in reports:
        for op, entry in doc["operations"].items():
            for reason, n in entry.get("passed", {}).items():
                seen.setdefault(reason, {}).setdefault(op, 0)
                seen[reason][op] += int(n)
    return seen


def check_setup_reasons(reports: list[dict]) -> list[str]:
    """Problems: operations passed for a reason that only a broken set-up
    gives, and operations listed as not offloaded yet that were."""
    problems = []
    for doc in reports:
        early = [op for op in NOT_YET_OFFLOADED if offloaded(doc, op) > 0]
        if early:
            problems.append(f"rank {doc['rank']} offloaded {', '.join(early)}: remove them from "
                            f"NOT_YET_OFFLOADED in tests/mpi/pmpi_harness.py")
    for reason, ops in reasons_seen(reports).items():
        if reason in SETUP_REASONS and any(ops.values()):
            problems.append(f"operations passed to MPI as \"{reason}\" (the agent is up, "
                            f"teams have at most 256 ranks): {ops}")
    return problems


def summary(reports: list[dict]) -> str:
    """One line per operation: offloaded and passed (by reason), summed over ranks."""
    ops: dict[str, dict] = {}
    for doc in reports:
        for op, entry in doc["operations"].items():
            o = ops.setdefault(op, {"offloaded": 0, "passed": {}})
            o["offloaded"] += int(entry.get("offloaded", 0))
            for reason, n in entry.get("passed", {}).items():
                o["passed"][reason] = o["passed"].get(reason, 0) + int(n)
    lines = []
    for op in sorted(ops):
        passed_text = ", ".join(f"{r}: {n}" for r, n in sorted(ops[op]["passed"].items()))
        lines.append(f"  {op:28} offloaded {ops[op]['offloaded']:6}"
                     + (f"  passed {passed_text}" if passed_text else ""))
    return "\n".join(lines)


def line_diff(reference: list[str], got: list[str], accept: Callable[[str, str], bool],
              limit: int = 20) -> list[str]:
    """Lines that differ (the runs must agree line for line), unless accept(ref,
    got) allows the pair; the first `limit`, as a readable list."""
    problems: list[str] = []
    if len(reference) != len(got):
        diff = list(difflib.unified_diff(reference, got, "without the library", "with the library",
                                         n=0, lineterm=""))
        return [f"{len(reference)} lines without the library, {len(got)} with it:"] + diff[:limit]
    for a, b in zip(reference, got):
        if a != b and not accept(a, b):
            problems.append(f"  without: {a}\n  with:    {b}")
    if len(problems) > limit:
        problems = problems[:limit] + [f"  ... and {len(problems) - limit} more"]
    return problems


def program_parser(doc: str, prog_help: str, budget: float) -> argparse.ArgumentParser:
    """The flags of every runner of a test program under the library (its
    tests.cmake entry passes them): --mpi, --prog, --deputy, --lib, --budget."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--mpi", choices=sorted(MPIS), required=True)
    ap.add_argument("--prog", type=Path, required=True, help=prog_help)
    ap.add_argument("--deputy", type=Path, required=True, help="build/tools/deputy")
    ap.add_argument("--lib", type=Path, required=True, help="libdeputy-mpi-<mpi>.so")
    ap.add_argument("--budget", type=float, default=budget,
                    help="seconds for the whole test (below ctest's TIMEOUT)")
    return ap


def program_launch(args: argparse.Namespace) -> tuple[Mpi, "Launch"]:
    """For a runner's parsed flags: starts its time budget, checks the MPI
    and that the program and the library are built (Skip when not), and
    makes every path absolute."""
    set_budget(args.budget)
    mpi = MPIS[args.mpi]
    mpi.check()
    args.prog, args.lib, args.deputy = (p.absolute() for p in (args.prog, args.lib, args.deputy))
    for path, what in ((args.prog, "the program"), (args.lib, "the library")):
        if not path.exists():
            raise Skip(f"{what} {path} is not built")
    return mpi, Launch(mpi, args.lib)


def main(body: Callable[[], None]) -> None:
    """Runs a test body: exit 0, 1 (Failure, with the message) or 77 (Skip).
    SIGTERM/SIGINT/SIGHUP raise, so agents and directories are cleaned up."""
    def raise_exit(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, raise_exit)
    try:
        body()
    except Skip as e:
        log(f"SKIPPED: {e}")
        sys.exit(SKIP)
    except Failure as e:
        log(f"FAILED: {e}")
        sys.exit(1)
    sys.exit(0)


def name_matches(pattern: str, text: str) -> bool:
    return re.search(pattern, text) is not None


def iter_cases(lines: list[str]) -> Iterator[tuple[str, str]]:
    for line in lines:
        if line.startswith("case "):
            yield line.split()[1], line
