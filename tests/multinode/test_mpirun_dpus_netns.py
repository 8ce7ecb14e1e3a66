"""`deputy mpirun --dpu-hostfile`: ranks on two "hosts", their agents on two "DPUs".

Four nodes of the harness: nodes 1 and 2 play the hosts, nodes 3 and 4 the DPUs (line
i of the DPU hostfile serves the i-th host of the mpirun arguments' hostfile). deputy
mpirun runs on node 1, as a user would on a login host; both mpiruns it starts (the
agents' on the DPUs, the ranks' on the hosts) reach the other nodes through the
harness's rsh agent (OMPI_MCA_plm_rsh_agent), as they would through ssh. Each rank's
shim finds its host by its address and attaches to that host's DPU over TCP in the
secure session. Checked: tests/mpi/offload_check on 4 ranks (2 per host) prints the
same line per case as without deputy, in memory modes staged and rdma, with the
collectives offloaded (thresholds 0) and each rank on its own host's DPU; and nothing
is left behind. Needs root, `ip`, Open MPI and DEPUTY_BIN; skips and says why otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_netns_harness import (NETNS, STATE_DIR, Nodes, allowed,  # noqa: F401
                                assert_nothing_left, nodes_up, ok)

DEPUTY = os.environ.get("DEPUTY_BIN")
K = 4
PORT = 7791
CASES = ["--only", "allreduce.", "--only", "bcast.", "--only", "alltoall.", "--only",
         "allgather."]

pytestmark = pytest.mark.skipif(not DEPUTY, reason="DEPUTY_BIN is not set (e.g. build/tools/deputy)")


@pytest.fixture(scope="module")
def program() -> Path:
    build = Path(DEPUTY).resolve().parent.parent
    prog = build / "tests" / "mpi" / "offload_check_openmpi"
    lib = build / "src" / "mpi" / "libdeputy-mpi-openmpi.so"
    for path in (prog, lib, Path(DEPUTY).resolve().parent / "deputy-agent-mpi"):
        if not path.exists():
            pytest.skip(f"{path} not built (CMake did not find Open MPI)")
    if not shutil.which("mpirun"):
        pytest.skip("mpirun not found (Debian: openmpi-bin)")
    return prog


@pytest.fixture
def four_nodes(allowed: None) -> Iterator[Nodes]:
    with nodes_up(K) as n:
        yield n


def on_node1(nodes: Nodes, work: Path, argv: list[str], extra: dict) -> subprocess.CompletedProcess:
    """argv on node 1, its mpiruns launching on the other nodes through the harness."""
    rsh = work / "rsh"
    rsh.write_text(f'#!/bin/sh\nexec "{NETNS}" --tag "{nodes.tag}" rsh-agent "$@"\n')
    rsh.chmod(0o755)
    net = nodes.addrs[0].rsplit(".", 1)[0] + ".0/24"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEPUTY_")}
    env.update({"DPN_TAG": nodes.tag, "OMPI_ALLOW_RUN_AS_ROOT": "1",
                "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_plm": "rsh",
                "OMPI_MCA_plm_rsh_agent": str(rsh), "OMPI_MCA_btl": "tcp,self",
                "OMPI_MCA_btl_tcp_if_include": net, "OMPI_MCA_oob_tcp_if_include": net,
                "PMIX_MCA_ptl_tcp_remote_connections": "1", "PMIX_MCA_ptl_tcp_if_include": net,
                **extra})
    return subprocess.run([str(NETNS), "exec", "1", "--", "timeout", "-k", "5", "200", *argv],
                          capture_output=True, text=True, timeout=230, env=env,
                          stdin=subprocess.DEVNULL)


def cases(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("case ")]


def test_ranks_on_hosts_use_the_agents_on_their_dpus(four_nodes: Nodes, program: Path,
                                                       tmp_path: Path) -> None:
    nodes = four_nodes
    hosts, dpus, key = tmp_path / "hosts", tmp_path / "dpus", tmp_path / "dpu.key"
    hosts.write_text(f"{nodes.addrs[0]} slots=2\n{nodes.addrs[1]} slots=2\n")
    dpus.write_text(f"{nodes.addrs[2]}\n{nodes.addrs[3]}\n")
    ok(subprocess.run([DEPUTY, "bench", "channel", "--keygen", str(key)], capture_output=True,
                      text=True, timeout=30))
    native = on_node1(nodes, tmp_path, ["mpirun", "--hostfile", str(hosts), "-np", "4",
                                        str(program), *CASES], {})
    assert native.returncode == 0, native.stderr[-3000:]
    expected = cases(native.stdout)
    assert len(expected) > 100 and not any("WRONG" in c for c in expected), native.stdout[-2000:]
    for i, memory in enumerate(("staged", "rdma")):
        port = PORT + i  # (a job's agents are gone when it ends; a fresh port all the same)
        reports = tmp_path / f"reports-{memory}"
        reports.mkdir()
        r = on_node1(nodes, tmp_path,
                     [str(Path(DEPUTY).resolve()), "mpirun", "--dpu-hostfile", str(dpus),
                      "--key", str(key), "--dpu-port", str(port), "--memory", memory, "--",
                      "--hostfile", str(hosts), "-np", "4", str(program), *CASES],
                     {"DEPUTY_MPI_THRESHOLDS": "all=0", "DEPUTY_MPI_REPORT": f"json:{reports}"})
        assert r.returncode == 0, (memory, r.stdout[-2000:], r.stderr[:6000])
        assert cases(r.stdout) == expected, memory
        for rank in range(4):
            doc = json.loads((reports / f"deputy-mpi-rank{rank}.json").read_text())
            # Ranks 0 and 1 fill host 1's slots, ranks 2 and 3 host 2's.
            dpu = nodes.addrs[2] if rank < 2 else nodes.addrs[3]
            assert doc["agent"] == f"tcp://{dpu}:{port}", (memory, rank, doc["agent"])
            for op in ("MPI_Allreduce", "MPI_Iallreduce", "MPI_Bcast", "MPI_Alltoall"):
                assert doc["operations"][op]["offloaded"] > 0, (memory, rank, op, doc)
        # The private directory, which the agents shared here: gone.
        assert not list((STATE_DIR / nodes.tag / "node1" / "tmp").glob("deputy-mpirun-*"))
    r = ok(nodes.down())
    assert "removed 5 namespaces" in r.stderr, r.stderr
    # (Agents of this test only: the launch suite may run its own beside it.)
    assert_nothing_left(nodes, f"deputy-agent-mpi .*{tmp_path}", "offload_check_openmpi")
