"""deputy agents on three "hosts": one agent per network namespace as one MPI job.

The agents start with the harness's run-mpi (`mpirun ... deputy agent`, one rank
per namespace, traffic over the veth bridge); clients run inside the namespaces
and reach their own node's agent at its default socket ($XDG_RUNTIME_DIR differs
per node). Checked: `deputy bench coll` across the namespaces validates every
result (#wrong 0) for every operation against MPI run over the same nodes; a
stream of allreduces whose node loses its link fails on every node within the
bound with a clear error, the two surviving agents serve a new team, and
nothing is left behind. Needs root, `ip`, Open MPI and DEPUTY_BIN; skips and
says why otherwise.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from test_netns_harness import (NETNS, STATE_DIR, Nodes, allowed, assert_nothing_left,  # noqa: F401
                                harness, nodes, ok)

HERE = Path(__file__).resolve().parent
DEPUTY = os.environ.get("DEPUTY_BIN")
ROOT = HERE.parent.parent
NODE_TIMEOUT_MS = 3000

pytestmark = pytest.mark.skipif(not DEPUTY, reason="DEPUTY_BIN is not set (e.g. build/tools/deputy)")


def node_socket(tag: str, node: int) -> Path:
    """Node i's agent socket: the default, under that node's XDG_RUNTIME_DIR."""
    return STATE_DIR / tag / f"node{node}" / "run" / "deputy" / "agent.sock"


# The job secret every coll_client of these tests shares (teams need one).
JOB_SECRET = "netns-test-job-secret"


def env_without_agent(tag: str) -> dict:
    env = {**os.environ, "DPN_TAG": tag, "DEPUTY_JOB_SECRET": JOB_SECRET}
    env.pop("DEPUTY_AGENT", None)  # every rank would get the same socket
    return env


@pytest.fixture(scope="module")
def mpi_agent() -> Path:
    bin_dir = Path(DEPUTY).resolve().parent
    agent = bin_dir / "deputy-agent-mpi"
    if not agent.exists():
        pytest.skip(f"{agent} not built (CMake did not find MPI)")
    if not shutil.which("mpirun"):
        pytest.skip("mpirun not found (Debian: openmpi-bin)")
    return agent


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build = Path(DEPUTY).resolve().parent.parent
    out = tmp_path_factory.mktemp("client") / "coll_client"
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    ok(subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "include"),
                       "-I", str(build / "generated"), "-o", str(out), str(HERE / "coll_client.c"),
                       "-L", str(build), "-ldeputy", f"-Wl,-rpath,{build}"],
                      capture_output=True, text=True, timeout=120))
    return out


@pytest.fixture
def agents(nodes: Nodes, mpi_agent: Path, tmp_path: Path):
    """3 agents, one per namespace, as one MPI job; yields (nodes, job, its log lines)."""
    config = tmp_path / "agents.json"
    config.write_text(json.dumps({"agent": {"node_timeout_ms": NODE_TIMEOUT_MS}}))
    job = subprocess.Popen([str(NETNS), "run-mpi", "--timeout", "170", "--enable-recovery", "--",
                            DEPUTY, "agent", "--config", str(config), "-l", "info"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           stdin=subprocess.DEVNULL, env=env_without_agent(nodes.tag))
    log: list[str] = []
    threading.Thread(target=lambda: log.extend(job.stdout), daemon=True).start()
    try:
        deadline = time.monotonic() + 30
        while not all(node_socket(nodes.tag, i).exists() for i in range(1, 4)):
            assert job.poll() is None and time.monotonic() < deadline, "".join(log)
            time.sleep(0.1)
        yield nodes, job, log
    finally:
        if job.poll() is None:
            job.terminate()  # run-mpi passes it to mpirun, which stops every agent
            try:
                job.wait(timeout=20)
            except subprocess.TimeoutExpired:
                job.kill()
                job.wait()


def start_client(tag: str, node: int, client: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([str(NETNS), "exec", str(node), "--", str(client), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            stdin=subprocess.DEVNULL, env=env_without_agent(tag))


def test_bench_coll_across_namespaces_validates_every_op(agents, tmp_path: Path) -> None:
    nodes, _, log = agents
    for op in ("allreduce", "iallreduce", "reduce_scatter", "allgather", "alltoall", "bcast",
               "barrier"):
        out = tmp_path / f"{op}.json"
        r = harness("run-mpi", "--timeout", "60", "--", DEPUTY, "bench", "coll", "--op", op,
                    "-m", "8:256k", "--factor", "32", "-i", "3", "-x", "1", "--compare", "mpi",
                    "--out", str(out), tag=nodes.tag, timeout=90)
        assert r.returncode == 0, f"{op}: {r.stdout}\n{r.stderr}"
        doc = json.loads(out.read_text())
        impls = {row["impl"] for row in doc["results"]}
        assert {"deputy", "mpi"} <= impls, (op, impls)
        for row in doc["results"]:
            assert row.get("wrong", 0) == 0, (op, row)
            if row["impl"] == "deputy":  # the bench names what the agents ran between nodes
                assert row.get("inter_node"), (op, row)
        if op == "allreduce":
            ran = {row["size"]: row["inter_node"] for row in doc["results"] if row["impl"] == "deputy"}
            assert ran[8] == "inline-allgather" and ran[8192] == "mpi-native", ran
            assert ran[262144] in ("ring", "rabenseifner", "recursive_doubling"), ran
    # Each agent saw a team of 3 with 1 member here: the bytes crossed namespaces.
    formed = [line for line in log if "formed across the agents: 3 member(s), 1 here" in line]
    assert len(formed) >= 3 * 7, "".join(log)


def test_link_down_fails_every_node_within_the_bound_and_survivors_serve(agents, client: Path) -> None:
    nodes, job, log = agents
    key = "stream"
    clients = [start_client(nodes.tag, i + 1, client, key, str(i), "3", str(1 << 18), "0")
               for i in range(3)]
    lines: queue.Queue[tuple[int, str]] = queue.Queue()
    for i, c in enumerate(clients):
        threading.Thread(target=lambda i=i, c=c: [lines.put((i, line)) for line in c.stdout],
                         daemon=True).start()
    outcome: dict[int, str] = {}
    try:
        progress: dict[int, int] = {}
        deadline = time.monotonic() + 40
        while not (len(progress) == 3 and min(progress.values()) >= 20):
            try:
                i, line = lines.get(timeout=1)
            except queue.Empty:
                continue
            m = re.fullmatch(r"progress (\d+)\n", line)
            if m:
                progress[i] = int(m.group(1))
            assert not line.startswith("error"), (i, line, "".join(log))
            assert time.monotonic() < deadline, (progress, "".join(log))
        ok(harness("link-down", "3", tag=nodes.tag))
        pulled = time.monotonic()
        bound = NODE_TIMEOUT_MS / 1000 + 7  # the agents' bound, and slack for this 2-core machine
        while len(outcome) < 3 and time.monotonic() - pulled < bound + 5:
            try:
                i, line = lines.get(timeout=1)
            except queue.Empty:
                continue
            if line.startswith("error"):
                outcome[i] = line
                took = time.monotonic() - pulled
                assert took < bound, (i, line, took)
    finally:
        # A client that reported its error still leaves its team and context and
        # its `netns.sh exec` wrapper has to end: give it the time to exit by
        # itself (its exit status is asserted). Any other is killed at once.
        for i, c in enumerate(clients):
            try:
                c.wait(timeout=10 if i in outcome else 0.1)
            except subprocess.TimeoutExpired:
                c.kill()
                c.wait(timeout=10)
    assert sorted(outcome) == [0, 1, 2], (outcome, "".join(log))
    for i, line in outcome.items():
        assert line.startswith("error DP_ERR_AGENT_LOST"), (i, line)
    assert [c.returncode for c in clients] == [1, 1, 1]
    # The agents of nodes 1 and 2 (node 1 holds the sequencer) serve a new team.
    assert job.poll() is None, "".join(log)
    fresh = [start_client(nodes.tag, i + 1, client, "fresh", str(i), "2", "100000", "10")
             for i in range(2)]
    for i, c in enumerate(fresh):
        out, _ = c.communicate(timeout=60)
        assert c.returncode == 0 and re.search(r"^ok 10 ", out, re.M), (i, out, "".join(log))


def test_agents_leave_nothing_behind(agents, tmp_path: Path) -> None:
    nodes, job, log = agents
    job.terminate()
    job.wait(timeout=20)
    for i in range(1, 4):
        assert not node_socket(nodes.tag, i).exists(), f"node {i}'s socket left"
    r = ok(nodes.down())
    assert "removed" in r.stderr
    # (Agents of this test only: the launch suite may run its own beside it.)
    assert_nothing_left(nodes, f"deputy-agent-mpi .*{tmp_path}", "coll_client")
