"""The multi-node harness (netns.sh) with plain MPI programs.

Nodes are network namespaces on a bridge (see README.md). An MPI job with one rank
per namespace must compute right and really go through the bridge; a job whose node
loses its link must end within a bound; `down` must leave nothing behind: no
namespace, no link, no process, no state directory. Needs root, `ip` and Open MPI
(mpirun, mpicc); skips and says why otherwise. Every command is bounded by a timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
NETNS = HERE / "netns.sh"
SKIP = 77  # netns.sh: namespaces cannot be made here
STATE_DIR = Path(os.environ.get("DPN_STATE_DIR", "/run/deputy-netns"))
K = 3


def harness(*args: str, tag: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"DPN_TAG": tag} if tag else {})}
    if not tag:
        env.pop("DPN_TAG", None)
    return subprocess.run([str(NETNS), *args], capture_output=True, text=True, timeout=timeout,
                          env=env, stdin=subprocess.DEVNULL)


def ok(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert r.returncode == 0, f"{r.args} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def allowed() -> None:
    r = harness("check")
    if r.returncode == SKIP:
        pytest.skip(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "netns.sh check: 77")
    ok(r)


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in ("mpicc", "mpirun"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not found (Debian: openmpi-bin, libopenmpi-dev)")
    out = tmp_path_factory.mktemp("probe") / "mpi_probe"
    ok(subprocess.run(["mpicc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                       str(HERE / "mpi_probe.c")], capture_output=True, text=True, timeout=120))
    return out


@dataclass
class Nodes:
    tag: str
    addrs: list[str]  # node i+1's address
    inodes: list[int]  # node i+1's network namespace (its inode)
    spaces: list[str] = field(default_factory=list)  # every namespace made, the bridge's too

    def down(self) -> subprocess.CompletedProcess:
        return harness("down", tag=self.tag)


def port_bytes(tag: str) -> dict[int, tuple[int, int]]:
    """Bytes (rx, tx) through the bridge port of each node."""
    out = ok(subprocess.run(["ip", "-j", "-s", "-n", f"{tag}-br", "link"], capture_output=True,
                            text=True, timeout=10)).stdout
    ports = {}
    for link in json.loads(out):
        m = re.fullmatch(r"dpn(\d+)", link["ifname"])
        if m:
            ports[int(m.group(1))] = (link["stats64"]["rx"]["bytes"], link["stats64"]["tx"]["bytes"])
    assert sorted(ports) == list(range(1, K + 1)), out
    return ports


@contextlib.contextmanager
def nodes_up(k: int) -> Iterator[Nodes]:
    """k fresh nodes, checked (names, distinct addresses, their namespaces), down after."""
    r = ok(harness("up", str(k), timeout=60))
    m = re.fullmatch(r"export DPN_TAG=(dpn-[\w.-]+)\n", r.stdout)
    assert m, r.stdout
    tag = m.group(1)
    try:
        listing = ok(harness("nodes", tag=tag)).stdout.split("\n")[:-1]
        assert [line.split()[:2] for line in listing] == [[str(i), f"{tag}-{i}"] for i in range(1, k + 1)]
        addrs = [line.split()[2] for line in listing]
        assert len(set(addrs)) == k, addrs
        inodes = [os.stat(f"/run/netns/{tag}-{i}").st_ino for i in range(1, k + 1)]
        spaces = [n for n in namespaces() if n.startswith(f"{tag}-")]
        assert sorted(spaces) == sorted([f"{tag}-{i}" for i in range(1, k + 1)] + [f"{tag}-br"])
        yield Nodes(tag, addrs, inodes, spaces)
    finally:
        harness("down", tag=tag)


@pytest.fixture
def nodes(allowed: None) -> Iterator[Nodes]:
    with nodes_up(K) as n:
        yield n


def namespaces() -> list[str]:
    out = ok(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10)).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def live_processes(pattern: str) -> list[str]:
    """Processes whose command line matches, zombies left out (they hold nothing, and the
    init of this machine reaps orphans late)."""
    out = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True, timeout=10).stdout
    live = []
    for line in out.splitlines():
        pid = line.split()[0]
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and int(pid) != os.getpid():
            live.append(line)
    return live


def of_tag(tag: str) -> str:
    """A pgrep pattern for the command lines that name the tag's nodes or files (and not
    those of a parallel run whose tag has this one as a prefix)."""
    return f"{tag}(/|-([0-9]+|br)( |$))"


def in_namespaces(inodes: list[int]) -> list[str]:
    """Live processes inside any of these network namespaces."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.stat(proc / "ns" / "net").st_ino in inodes:
                found.append(f"{proc.name} {(proc / 'comm').read_text().strip()}")
        except OSError:
            continue
    return found


def assert_nothing_left(n: Nodes, *patterns: str) -> None:
    left = [s for s in namespaces() if s.startswith(f"{n.tag}-")]
    assert left == [], f"namespaces left: {left}"
    # Links in the root namespace: the harness makes none there, and must leave none.
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=10).stdout
    assert not re.search(r"^\d+: dpn", links, re.M), links
    assert not (STATE_DIR / n.tag).exists(), f"{STATE_DIR / n.tag} left"
    # A veth or a bridge lives as long as its namespace, and a namespace without its
    # name in /run/netns as long as a process is inside: none may be.
    deadline = time.monotonic() + 5
    while True:
        inside = in_namespaces(n.inodes)
        procs = [p for pat in (of_tag(n.tag), *patterns) for p in live_processes(pat)]
        if (not inside and not procs) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert inside == [], f"processes left in the nodes' namespaces: {inside}"
    assert procs == [], f"processes left: {procs}"


def test_check_without_capabilities_says_why(allowed: None) -> None:
    """Where namespaces cannot be made, the harness exits 77 and gives the reason."""
    if not shutil.which("setpriv"):
        pytest.skip("setpriv not found (util-linux)")
    r = subprocess.run(["setpriv", "--bounding-set=-sys_admin,-net_admin", "--inh-caps=-all", "--",
                        str(NETNS), "check"], capture_output=True, text=True, timeout=30)
    assert r.returncode == SKIP, r.stderr
    assert "cannot make network namespaces here: 'ip netns add" in r.stderr
    assert "Operation not permitted" in r.stderr


def test_mpi_job_with_one_rank_per_namespace(nodes: Nodes, probe: Path) -> None:
    count = 1 << 16  # 512 KiB of doubles per rank
    before = port_bytes(nodes.tag)
    r = ok(harness("run-mpi", "--timeout", "40", "--", str(probe), "check", str(count),
                   tag=nodes.tag, timeout=60))
    after = port_bytes(nodes.tag)
    ranks = {}
    for line in r.stdout.splitlines():
        m = re.fullmatch(r"probe rank (\d+) size (\d+) ip (\S+) netns net:\[(\d+)\] ok", line)
        if m:
            ranks[int(m.group(1))] = (int(m.group(2)), m.group(3), int(m.group(4)))
    assert sorted(ranks) == list(range(K)), r.stdout + r.stderr
    for rank, (size, ip, inode) in ranks.items():
        assert size == K
        # Rank i runs on node i+1: in its namespace, with its address.
        assert ip == nodes.addrs[rank], (rank, ip, nodes.addrs)
        assert inode == nodes.inodes[rank], (rank, inode, nodes.inodes)
    # And the data went over the bridge: each node sent and received at least its
    # share of the Alltoall and the two Allreduces (far more than control traffic).
    floor = count * 8 * (K - 1) // K
    for node in range(1, K + 1):
        rx = after[node][0] - before[node][0]
        tx = after[node][1] - before[node][1]
        assert rx >= floor and tx >= floor, (node, rx, tx, floor)
    assert live_processes(str(probe)) == [], "a rank outlived its job"


def test_link_down_ends_the_job_and_down_cleans_up(nodes: Nodes, probe: Path) -> None:
    job_timeout = 12
    job = subprocess.Popen([str(NETNS), "run-mpi", "--timeout", str(job_timeout), "--", str(probe), "stream"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           text=True, env={**os.environ, "DPN_TAG": nodes.tag})
    lines: queue.Queue[str] = queue.Queue()
    err: list[str] = []
    threading.Thread(target=lambda: [lines.put(line) for line in job.stdout], daemon=True).start()
    threading.Thread(target=lambda: err.extend(job.stderr), daemon=True).start()
    try:
        # The stream runs on every rank...
        progress = {}
        deadline = time.monotonic() + 30
        while not (len(progress) == K and min(progress.values()) >= 40):
            try:
                m = re.fullmatch(r"stream rank (\d+) iter (\d+)\n", lines.get(timeout=1))
            except queue.Empty:
                m = None
            if m:
                progress[int(m.group(1))] = int(m.group(2))
            assert time.monotonic() < deadline and job.poll() is None, (progress, "".join(err))
        # ...until node 3's cable is pulled: the job must end, at the latest when
        # run-mpi's timeout aborts it (counted from the job's start).
        ok(harness("link-down", "3", tag=nodes.tag))
        pulled = time.monotonic()
        rc = job.wait(timeout=job_timeout + 25)
        took = time.monotonic() - pulled
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    stderr = "".join(err)
    assert rc != 0, stderr
    assert took < job_timeout + 10, (took, stderr)
    # run-mpi ended what mpirun could not reach (node 3's orted and rank) itself.
    assert live_processes(str(probe)) == [], stderr
    assert live_processes(of_tag(nodes.tag)) == [], stderr

    r = ok(nodes.down())
    assert f"removed {len(nodes.spaces)} namespaces of {nodes.tag}" in r.stderr
    assert_nothing_left(nodes, str(probe))


def test_with_takes_the_nodes_down_on_a_signal(allowed: None) -> None:
    """`with K -- CMD` removes its nodes however it ends; here, SIGTERM while a command
    started with `exec` sleeps on node 2."""
    job = subprocess.Popen([str(NETNS), "with", "2", "--", "sh", "-c", '"$DPN_NETNS" exec 2 -- sleep 60'],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        # The run's tag: the one whose owner is our `with` (up records it).
        tag, inode = None, None
        deadline = time.monotonic() + 30
        while not (inode and any(p.endswith(" sleep") for p in in_namespaces([inode]))):
            assert time.monotonic() < deadline and job.poll() is None, "the nodes did not come up"
            time.sleep(0.1)
            for info in STATE_DIR.glob("dpn-*/info"):
                try:
                    if f"owner={job.pid}\n" in info.read_text():
                        tag = info.parent.name
                        inode = os.stat(f"/run/netns/{tag}-2").st_ino
                except OSError:
                    continue
        job.send_signal(signal.SIGTERM)
        out, err = job.communicate(timeout=20)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 143, err
    assert f"removed 3 namespaces of {tag}" in err, err
    assert_nothing_left(Nodes(tag, [], [inode]))
