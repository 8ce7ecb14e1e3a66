"""Hosts and their DPUs: clients on "hosts", agents on "DPUs", over the network.

Three nodes of the harness play three DPUs; `netns.sh add-hosts` gives each a host
namespace joined to it alone by a veth pair, as a host's PCIe link to its DPU. The
agents run in the DPUs' namespaces as one MPI job (their steps between nodes over the
bridge) and listen for remote clients with a key; the members of a team of 4 run in
the hosts' namespaces (two on host 1, one each on hosts 2 and 3) and reach their own
DPU's agent over TCP in the secure session. Each member runs every collective of the
table at counts 0, 1, 4097 and 1 Mi + 1 and checks its part bit-exact against the
reference (tests/multinode/table_member.cc), in memory mode staged and in memory mode
rdma (the team proxies read and write the hosts' buffers with libfabric's tcp
provider across the host link). A host reaches nothing but its own DPU. Needs root,
`ip`, Open MPI and DEPUTY_BIN; skips and says why otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from test_netns_harness import (NETNS, Nodes, allowed, assert_nothing_left, harness,  # noqa: F401
                                in_namespaces, nodes, ok)

DEPUTY = os.environ.get("DEPUTY_BIN")
PORT = 7790
JOB_SECRET = "dpu-netns-test-job-secret"
# Member r's node: two members share host 1, so its agent serves two proxies.
MEMBER_NODES = [1, 1, 2, 3]

pytestmark = pytest.mark.skipif(not DEPUTY, reason="DEPUTY_BIN is not set (e.g. build/tools/deputy)")


def clean_env(tag: str) -> dict:
    env = {**os.environ, "DPN_TAG": tag, "DEPUTY_JOB_SECRET": JOB_SECRET}
    for name in ("DEPUTY_AGENT", "DEPUTY_KEY", "DEPUTY_MEMORY"):
        env.pop(name, None)
    return env


@pytest.fixture(scope="module")
def member() -> Path:
    path = Path(DEPUTY).resolve().parent.parent / "tests" / "multinode_table_member"
    if not path.exists():
        pytest.skip(f"{path} not built")
    if not (Path(DEPUTY).resolve().parent / "deputy-agent-mpi").exists():
        pytest.skip("deputy-agent-mpi not built (CMake did not find MPI)")
    if not shutil.which("mpirun"):
        pytest.skip("mpirun not found (Debian: openmpi-bin)")
    return path


@pytest.fixture
def dpus(nodes: Nodes, member: Path, tmp_path: Path):
    """Hosts behind the 3 nodes, and an agent on each node listening on its host link;
    yields (nodes, key file, every node's DPU address as its host sees it, agents' log)."""
    ok(harness("add-hosts", tag=nodes.tag, timeout=60))
    dpu_addrs = [ok(harness("host-link", str(i), tag=nodes.tag)).stdout.split()[0]
                 for i in range(1, 4)]
    key = tmp_path / "dpu.key"
    ok(subprocess.run([DEPUTY, "bench", "channel", "--keygen", str(key)], capture_output=True,
                      text=True, timeout=30))
    job = subprocess.Popen([str(NETNS), "run-mpi", "--timeout", "290", "--", DEPUTY, "agent",
                            "--listen", f"tcp://0.0.0.0:{PORT}", "--key", str(key), "-l", "info"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           stdin=subprocess.DEVNULL, env=clean_env(nodes.tag))
    log: list[str] = []
    threading.Thread(target=lambda: log.extend(job.stdout), daemon=True).start()
    try:
        # Each agent answers on its host link once it listens.
        deadline = time.monotonic() + 30
        for i, addr in enumerate(dpu_addrs, start=1):
            while harness("host-exec", str(i), "--", "bash", "-c", f"exec 3<>/dev/tcp/{addr}/{PORT}",
                          tag=nodes.tag).returncode != 0:
                assert job.poll() is None and time.monotonic() < deadline, "".join(log)
                time.sleep(0.2)
        yield nodes, key, dpu_addrs, log
    finally:
        if job.poll() is None:
            job.terminate()
            try:
                job.wait(timeout=20)
            except subprocess.TimeoutExpired:
                job.kill()
                job.wait()


def run_members(nodes: Nodes, member: Path, key: Path, dpu_addrs: list[str], memory: str,
                team: str, counts: str | None = None) -> list[tuple[int, str]]:
    procs = []
    for rank, node in enumerate(MEMBER_NODES):
        env = {**clean_env(nodes.tag), "DEPUTY_AGENT": f"tcp://{dpu_addrs[node - 1]}:{PORT}",
               "DEPUTY_KEY": str(key), "DEPUTY_MEMORY": memory, "TABLE_RANK": str(rank),
               "TABLE_SIZE": str(len(MEMBER_NODES)), "TABLE_KEY": team,
               **({"TABLE_COUNTS": counts} if counts else {})}
        procs.append(subprocess.Popen([str(NETNS), "host-exec", str(node), "--", str(member)],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      stdin=subprocess.DEVNULL, env=env))
    out = []
    for p in procs:
        try:
            text, _ = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            text, _ = p.communicate()
        out.append((p.returncode, text))
    return out


@pytest.mark.parametrize("memory", ["staged", "rdma"])
def test_every_collective_from_hosts_through_their_dpus(dpus, member: Path, memory: str) -> None:
    nodes, key, dpu_addrs, log = dpus
    # A host reaches its own DPU and nothing else: not another node, not another host.
    assert harness("host-exec", "1", "--", "bash", "-c", f"exec 3<>/dev/tcp/{nodes.addrs[1]}/9",
                   tag=nodes.tag).returncode != 0
    results = run_members(nodes, member, key, dpu_addrs, memory, f"dpu-table-{memory}")
    for rank, (rc, text) in enumerate(results):
        assert rc == 0 and "[  PASSED  ] 1 test" in text, (rank, memory, text[-4000:],
                                                             "".join(log[-50:]))
    # The team spanned the three agents through their team proxies.
    formed = [line for line in log if "formed across the agents: 4 member(s)" in line]
    assert formed, "".join(log)


def test_hosts_and_dpus_leave_nothing_behind(dpus, member: Path, tmp_path: Path) -> None:
    nodes, key, dpu_addrs, log = dpus
    results = run_members(nodes, member, key, dpu_addrs, "rdma", "dpu-short", counts="0,13")
    assert all(rc == 0 for rc, _ in results), results
    host_inodes = [os.stat(f"/run/netns/{nodes.tag}-h{i}").st_ino for i in range(1, 4)]
    r = ok(nodes.down())
    assert "removed 7 namespaces" in r.stderr, r.stderr
    assert in_namespaces(host_inodes) == []
    # (Agents of this test only: the launch suite may run its own beside it.)
    assert_nothing_left(nodes, f"deputy-agent-mpi .*{tmp_path}", "multinode_table_member")
