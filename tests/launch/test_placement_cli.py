"""`--agent-cores` end to end: `deputy launch` binding its ranks and
pinning the agent it starts, the warning when ranks and engines share CPUs,
`deputy agent`'s own flag and errors, and `deputy info`'s placement section.

The layouts are computed on a machine shaped like this 2-CPU VM whatever
the real one is (DEPUTY_TOPOLOGY="package:1 core:2 pu:1", which the agents
the launcher starts inherit), so every CPU set and message is exact; the
binding itself is real, which needs CPUs 0 and 1. The `deputy mpirun`
layouts are in test_mpirun_cli.py. Every command has a timeout.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

DEPUTY = os.environ.get("DEPUTY_BIN")
TIMEOUT_S = 60
VM = "package:1 core:2 pu:1"
VM_SUMMARY = "1 package, 2 cores, 2 CPUs, no SMT"

pytestmark = [
    pytest.mark.skipif(not DEPUTY, reason="DEPUTY_BIN is not set: point it at a built deputy "
                                          "binary (e.g. DEPUTY_BIN=build/tools/deputy)"),
    pytest.mark.skipif(not {0, 1} <= os.sched_getaffinity(0),
                       reason="binds to CPUs 0 and 1, which this process may not use"),
]

SHOW_CPUS = "grep Cpus_allowed_list /proc/self/status"


def cpu_list(cpus) -> str:
    """{0, 1, 2, 5} -> "0-2,5", as deputy writes CPU lists."""
    out, cpus = [], sorted(cpus)
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


class Env:
    def __init__(self, root: Path):
        self.root = root
        self.vars = {"DEPUTY_AGENT": str(root / "nobody.sock"), "TMPDIR": str(root),
                     "DEPUTY_TOPOLOGY": VM}

    def environ(self, extra: dict | None = None) -> dict:
        env = {k: v for k, v in os.environ.items() if k != "DEPUTY_TOKEN"}
        return {**env, **self.vars, **(extra or {})}

    def run(self, *args: str, extra: dict | None = None):
        return subprocess.run([DEPUTY, *args], capture_output=True, text=True, timeout=TIMEOUT_S,
                              env=self.environ(extra))

    def private_dirs(self) -> list[Path]:
        return sorted(self.root.glob("deputy-launch-*"))


@pytest.fixture
def env():
    root = Path(tempfile.mkdtemp(prefix="deputy-placement-test-"))
    yield Env(root)
    subprocess.run(["rm", "-rf", str(root)], check=False)


def test_last_binds_the_ranks_and_pins_the_agent_launch_starts(env):
    info = env.root / "info.json"
    r = env.run("launch", "--agent-cores", "last", "-n", "2", "--", "sh", "-c",
                f'{SHOW_CPUS}; [ $DEPUTY_RANK = 0 ] && {DEPUTY} info --format json > {info}; true')
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(r.stdout.splitlines()) == ["[0] Cpus_allowed_list:\t0",
                                             "[1] Cpus_allowed_list:\t0"]
    assert r.stderr == (f"deputy launch: placement last ({VM_SUMMARY}): the agent on CPU 1, the "
                        "ranks on CPU 0 (2 ranks on 1 core: they share it)\n")
    p = json.loads(info.read_text())["placement"]
    assert p["layout"] == "last"
    assert p["agent_cpus"] == "1" and p["rank_cpus"] == "0" and p["engine_cpus"] == "1"
    assert [t["name"] for t in p["threads"]] == ["service", "engine 0"]
    assert {t["allowed_cpus"] for t in p["threads"]} == {"1"}
    assert env.private_dirs() == []


def test_no_layout_warns_once_and_says_which_would_help(env):
    r = env.run("launch", "-n", "1", "--", "true")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ("deputy launch: warning: the ranks and the agent's engines share CPUs 0-1 "
                        "(placement shared): a busy rank delays the engines; --agent-cores last "
                        "gives the engines CPU 1 and the ranks CPU 0\n")
    r = env.run("launch", "-n", "2", "--", "true")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ("deputy launch: warning: the ranks and the agent's engines share CPUs 0-1 "
                        "(placement shared): a busy rank delays the engines; this machine has no "
                        f"core to spare for them (2 ranks; {VM_SUMMARY}); with at most 1 rank, "
                        "--agent-cores last gives the engines a core of their own\n")


def test_shared_chosen_is_not_warned_about(env):
    r = env.run("launch", "--agent-cores", "shared", "-n", "2", "--", "sh", "-c", SHOW_CPUS)
    assert r.returncode == 0, r.stderr
    assert r.stderr == f"deputy launch: placement shared ({VM_SUMMARY}): nothing pinned\n"
    # Unbound: whatever the launcher may use.
    mine = cpu_list(os.sched_getaffinity(0))
    assert sorted(r.stdout.splitlines()) == [f"[0] Cpus_allowed_list:\t{mine}",
                                             f"[1] Cpus_allowed_list:\t{mine}"]


@pytest.mark.parametrize("layout,message", [
    ("smt", f"--agent-cores smt: this machine has no SMT ({VM_SUMMARY}); --agent-cores last "
            "reserves a whole core instead"),
    ("cpus:7", "--agent-cores cpus:7: CPU 7 does not exist here (this machine's CPUs: 0-1)"),
    ("cpus:0-1", "--agent-cores cpus:0-1: that is every CPU of this machine (0-1); leave at least "
                 "one for the ranks"),
    ("2", "--agent-cores 2: reserving 2 cores leaves none for the ranks: this machine has 2 "
          f"({VM_SUMMARY}); at most 1"),
    ("1,2", "--agent-cores 1,2: a CPU list is written cpus:1,2 (a bare number is a count of "
            "cores)"),
    ("first", "--agent-cores first: expected shared, last, smt, a number of cores or cpus:LIST"),
])
def test_a_layout_that_does_not_fit_is_refused_before_anything_starts(env, layout, message):
    r = env.run("launch", "--agent-cores", layout, "-n", "1", "--", "true")
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert env.private_dirs() == []
    r = env.run("agent", "--agent-cores", layout, "--socket", str(env.root / "a.sock"))
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert not (env.root / "a.sock").exists()


def test_agent_refuses_both_cpus_and_a_layout(env):
    r = env.run("agent", "--agent-cores", "last", "--cpus", "1", "--socket",
                str(env.root / "a.sock"))
    assert r.returncode != 0
    assert "--agent-cores and --cpus both say where the engines run; give one" in r.stderr


@pytest.fixture
def daemon(env):
    """A `deputy agent --daemon`; stopped afterwards. Call with its extra flags."""
    pids = []

    def start(*flags: str) -> tuple[Path, Path]:
        sock, log = env.root / "agent.sock", env.root / "agent.log"
        r = env.run("agent", "--daemon", "--socket", str(sock), "--log-file", str(log), *flags)
        assert r.returncode == 0, r.stderr
        pids.append(int((env.root / "agent.pid").read_text()))
        return sock, log

    yield start
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def test_agent_logs_where_its_engines_run(daemon):
    _, log = daemon("--agent-cores", "last")
    end = time.monotonic() + 5
    while "placement" not in log.read_text() and time.monotonic() < end:
        time.sleep(0.02)
    assert (f"agent: placement last ({VM_SUMMARY}): engine 0 on CPU 1; the service thread on "
            "CPU 1; the ranks' CPUs: 0") in log.read_text()


def test_a_running_agent_placed_otherwise_is_warned_about(env, daemon):
    sock, _ = daemon()  # nothing pinned: its engine may run on any CPU here
    r = env.run("launch", "--agent-cores", "last", "-n", "1", "--", "sh", "-c", SHOW_CPUS,
                extra={"DEPUTY_AGENT": str(sock)})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Cpus_allowed_list:\t0\n"
    engines = cpu_list(os.sched_getaffinity(0))
    assert (f"deputy launch: warning: the agent at {sock} already runs, its engines on CPUs "
            f"{engines}: they share CPU 0 with the ranks; --agent-cores last placed the ranks only "
            "(start that agent with --agent-cores last, or stop it and let the launcher start "
            "one)") in r.stderr


def test_info_shows_each_thread_and_the_clients_cpus(env):
    r = env.run("launch", "--agent-cores", "last", "-n", "1", "--", DEPUTY, "info")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert f"  placement last ({VM_SUMMARY}): agent CPUs 1, ranks' CPUs 0\n" in out
    assert re.search(r"^    thread +tid allowed +last +busy\(ms\) +waiting\(ms\) +timeslices$",
                     out, re.M), out
    assert re.search(r"^    service +\d+ 1 +1 +\d+\.\d\d +\d+\.\d\d +\d+$", out, re.M), out
    assert re.search(r"^    engine 0 +\d+ 1 +1 +\d+\.\d\d +\d+\.\d\d +\d+$", out, re.M), out
    # What the engine did: nothing yet (the launched `deputy info` posts no work).
    assert re.search(r"^    engine 0: \d+ % of the engines' work \(\d+\.\d\d s\), \d+ descriptors, "
                     r"\S+ moved, 0 queued$", out, re.M), out
    assert "  engines' CPUs 1; clients' CPUs (no client)\n" in out
    assert "warning" not in out
