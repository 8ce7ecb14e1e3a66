"""The `deputy` Python package against a real agent: its constants match the
C headers, every collective gives NumPy's reference result on teams of 1, 2
and 3 processes (in place, shared-heap arrays, ordinary arrays), bad input
is refused with a clear error before anything is posted, a request can be
waited from another thread, and a dead agent is an exception within the
bound, never a hang. The agent is `deputy agent` from $DEPUTY_BIN."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import deputy
from deputy._lib import Config, MsgStatus, lib

ROOT = Path(__file__).resolve().parents[2]
SECRET = "python-package-test"


@pytest.fixture(scope="module")
def agent():
    """A private agent; its socket path."""
    binary = os.environ.get("DEPUTY_BIN")
    if not binary:
        pytest.skip("DEPUTY_BIN (build/tools/deputy) not set")
    d = Path(tempfile.mkdtemp(prefix="deputy-py-"))
    sock = d / "a.sock"
    subprocess.run([binary, "agent", "--daemon", "--socket", str(sock), "--log-file",
                    str(d / "agent.log")], check=True, capture_output=True, timeout=30)
    pid = int((d / "agent.pid").read_text().split()[0])
    yield str(sock)
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):  # gone within 5 s, then its directory too
            os.kill(pid, 0)
            time.sleep(0.05)
    except ProcessLookupError:
        pass
    shutil.rmtree(d, ignore_errors=True)


# --- the ABI: the Python side's constants are the headers' ---

def header_enum(header: str, typedef: str) -> dict[str, int]:
    """NAME -> value of `typedef enum ... { ... } typedef;` in a header
    (values implicit after the first count up, as C's do)."""
    text = re.sub(r"/\*.*?\*/", "", (ROOT / "include" / "deputy" / header).read_text(), flags=re.S)
    body = re.search(r"typedef enum \w+ \{([^}]*)\}\s*" + typedef + ";", text).group(1)
    values, nxt = {}, 0
    for item in (x.strip() for x in body.split(",")):
        if not item:
            continue
        name, _, value = item.partition("=")
        nxt = int(value.strip(), 0) if value.strip() else nxt
        values[name.strip()] = nxt
        nxt += 1
    return values


@pytest.mark.parametrize("header,typedef,enum,prefix,skip", [
    ("status.h", "dp_status_t", deputy.Status, "DP_", ()),
    ("mover.h", "dp_dtype_t", deputy.DType, "DP_", ("DP_DTYPE_COUNT",)),
    ("mover.h", "dp_op_t", deputy.Op, "DP_", ("DP_OP_COUNT",)),
])
def test_constants_match_the_headers(header, typedef, enum, prefix, skip):
    c = {k: v for k, v in header_enum(header, typedef).items() if k not in skip}
    py = {prefix + m.name: int(m) for m in enum}
    assert py == c


def test_numpy_types_have_the_c_sizes_and_config_the_c_fields():
    for d, np_type in deputy.NUMPY.items():
        assert np_type.itemsize == lib.dp_dtype_size(int(d)), d
    text = (ROOT / "include" / "deputy" / "context.h").read_text()
    body = re.search(r"typedef struct dp_config \{(.*?)\} dp_config_t;", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    fields = re.findall(r"(\w+);", body)
    assert [f[0] for f in Config._fields_] == fields


def test_p2p_wildcards_and_message_status_are_the_headers():
    text = (ROOT / "include" / "deputy" / "p2p.h").read_text()
    for name in ("ANY_SOURCE", "ANY_TAG"):
        value = re.search(r"#define DP_" + name + r" \((-?\d+)\)", text).group(1)
        assert getattr(deputy, name) == int(value), name
    body = re.search(r"typedef struct dp_msg_status \{(.*?)\} dp_msg_status_t;", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    assert [f[0] for f in MsgStatus._fields_] == re.findall(r"(\w+);", body)


# --- one process ---

def test_every_collective_on_a_team_of_one(agent):
    with deputy.Context(agent=agent, job_secret=SECRET) as ctx, \
            deputy.Team(ctx, "solo", 0, 1) as team:
        rng = np.random.default_rng(1)
        a = rng.standard_normal(1000).astype(np.float64)
        out = np.zeros_like(a)
        team.allreduce(a, out)
        assert np.array_equal(out, a)
        h = deputy.empty(1000, np.float64)  # in the shared heap: no registration
        assert lib.dp_heap_contains(h.ctypes.data, h.nbytes)
        h[:] = a
        team.allreduce(h, op="max")  # in place
        assert np.array_equal(h, a)
        for name in ("allgather", "alltoall", "scan"):
            got = np.zeros_like(a)
            getattr(team, name)(a, got)
            assert np.array_equal(got, a), name
        got = np.zeros_like(a)
        team.reduce(a, got, op=deputy.Op.SUM, root=0)
        team.gather(a, got, root=0)
        team.scatter(a, got, root=0)
        team.reduce_scatter(a, got)
        assert np.array_equal(got, a)
        b = a.copy()
        team.bcast(b, root=0)
        team.barrier()
        assert np.array_equal(b, a)
        got = np.zeros_like(a)
        team.alltoallv(a, [1000], [0], got, [1000], [0])
        team.allgatherv(a, got, [1000], [0])
        assert np.array_equal(got, a)


class _DLPackOnly:
    """An object that offers its memory through DLPack only (as JAX or CuPy
    arrays do), over a NumPy array or a torch tensor."""

    def __init__(self, inner, device=(1, 0)):
        self.inner, self.device, self.deleted = inner, device, 0

    def __dlpack__(self, stream=None):
        return self.inner.__dlpack__()

    def __dlpack_device__(self):
        return self.device


def test_dlpack_objects_go_through_without_a_copy(agent):
    """Sources and destinations that offer only __dlpack__ (writable, unlike
    NumPy's from_dlpack views): float64, int32, bfloat16 through torch;
    collectives and a message on a team of two processes' worth of posts
    (one process, a team of one); another device or a strided view refused
    naming it."""
    torch = pytest.importorskip("torch")
    with deputy.Context(agent=agent, job_secret=SECRET) as ctx, \
            deputy.Team(ctx, "dlpack", 0, 1) as team:
        a = np.arange(1000, dtype=np.float64) * 0.5
        out = np.zeros_like(a)
        team.allreduce(_DLPackOnly(a), _DLPackOnly(out))
        assert np.array_equal(out, a)
        i = np.arange(77, dtype=np.int32)
        got = np.zeros(77, dtype=np.int32)
        team.allgather(_DLPackOnly(i), _DLPackOnly(got))
        assert np.array_equal(got, i)
        bf = torch.arange(64, dtype=torch.bfloat16)
        bf_out = torch.zeros(64, dtype=torch.bfloat16)
        team.allreduce(_DLPackOnly(bf), _DLPackOnly(bf_out), op="max")
        assert torch.equal(bf_out, bf)
        m = np.zeros(1000, dtype=np.float64)
        r = team.irecv(_DLPackOnly(m), 0, 3)
        team.send(_DLPackOnly(a), 0, 3)
        r.wait()
        assert np.array_equal(m, a) and r.message.nbytes == a.nbytes
        with pytest.raises(ValueError, match="DLPack device"):
            team.allreduce(_DLPackOnly(a, device=(2, 0)), out)
        with pytest.raises(ValueError, match="not contiguous"):
            team.allreduce(_DLPackOnly(torch.arange(20.).reshape(4, 5).t()), torch.zeros(20))
        with pytest.raises(ValueError, match="no deputy element type"):
            team.allreduce(_DLPackOnly(torch.zeros(4, dtype=torch.complex64)), torch.zeros(8))


def test_point_to_point_on_a_team_of_one(agent):
    """Messages to itself: bytes, the receive's message (source, tag,
    length), wildcards, a probe, truncation as DP_ERR_TRUNCATED with the
    message's length, a zero-byte message."""
    with deputy.Context(agent=agent, job_secret=SECRET) as ctx, \
            deputy.Team(ctx, "p2p-solo", 0, 1) as team:
        out = np.arange(5000, dtype=np.float32)
        got = np.zeros(6000, np.float32)
        assert team.iprobe() is None
        s = team.isend(out, 0, tag=9)
        assert team.iprobe(tag=9) == deputy.Message(0, 9, out.nbytes)
        r = team.irecv(got)
        r.wait()
        s.wait()
        assert r.message == deputy.Message(0, 9, out.nbytes)
        assert np.array_equal(got[:5000], out) and not got[5000:].any()
        h = deputy.zeros(10, np.int64)  # the shared heap
        team.send(np.full(10, 7, np.int64), 0, tag=1)
        assert team.recv(h, source=0, tag=1) == deputy.Message(0, 1, 80)
        assert (h == 7).all()
        short = np.zeros(3, np.float32)
        team.send(out[:10], 0, tag=2)
        r = team.irecv(short, tag=2)
        with pytest.raises(deputy.DeputyError) as e:
            r.wait()
        assert e.value.name == "DP_ERR_TRUNCATED"
        assert r.message == deputy.Message(0, 2, 40) and not short.any()
        team.send(None, 0, tag=3)
        assert team.recv(None, tag=3) == deputy.Message(0, 3, 0)
        with pytest.raises(deputy.DeputyError):
            team.isend(out, 1)  # no rank 1


def test_bad_input_is_refused_before_posting(agent):
    with deputy.Context(agent=agent, job_secret=SECRET) as ctx, \
            deputy.Team(ctx, "bad", 0, 1) as team:
        a = np.arange(10, dtype=np.float32)
        with pytest.raises(ValueError, match="not contiguous"):
            team.allreduce(a[::2], np.zeros(5, np.float32))
        ro = np.zeros(10, np.float32)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            team.allreduce(a, ro)
        with pytest.raises(ValueError, match="holds 9 elements"):
            team.allreduce(a, np.zeros(9, np.float32))
        with pytest.raises(ValueError, match="src is float32, dst float64"):
            team.allreduce(a, np.zeros(10, np.float64))
        with pytest.raises(ValueError, match="no reduction 'avg'"):
            team.allreduce(a, np.zeros(10, np.float32), op="avg")
        with pytest.raises(ValueError, match="no deputy element type"):
            team.allreduce(np.zeros(4, np.complex64), np.zeros(4, np.complex64))
        with pytest.raises(deputy.DeputyError) as e:
            team.allreduce(a, np.zeros(10, np.float32), op="band")  # integers only
        assert e.value.status == deputy.Status.ERR_INVALID and e.value.name == "DP_ERR_INVALID"
        assert e.value.call == "dp_iallreduce"
        # Nothing is left registered or outstanding after the refusals.
        assert all(users == 0 for users in ctx._registered.values())
        team.allreduce(a, np.zeros(10, np.float32))


def test_no_agent_is_an_exception_naming_it():
    with pytest.raises(deputy.DeputyError) as e:
        deputy.Context(agent="/nonexistent/agent.sock", connect_timeout_ms=100)
    assert e.value.status == deputy.Status.ERR_NO_AGENT


# --- several processes ---

def _member(sock: str, key: str, rank: int, size: int, case: str, conn) -> None:
    try:
        with deputy.Context(agent=sock, job_secret=SECRET) as ctx, \
                deputy.Team(ctx, key, rank, size) as team:
            conn.send(("ok", _run_case(team, rank, size, case)))
    except BaseException as e:  # (reported to the parent)
        conn.send(("error", f"{type(e).__name__}: {e}"))


def _data(rank: int, n: int, dtype) -> np.ndarray:
    rng = np.random.default_rng(100 + rank)
    if np.dtype(dtype).kind == "f":
        return rng.integers(-50, 50, n).astype(dtype)  # exact sums in any order
    return rng.integers(0, 100, n).astype(dtype)


def _run_case(team: deputy.Team, rank: int, size: int, case: str):
    n = 4099
    if case == "reductions":
        for dtype in (np.float32, np.float64, np.int32, np.int64, np.uint8):
            mine = _data(rank, n, dtype)
            alls = [_data(r, n, dtype) for r in range(size)]
            for op, ref in (("sum", np.sum), ("max", np.max), ("min", np.min)):
                want = ref(np.stack(alls), axis=0).astype(dtype)
                got = deputy.zeros(n, dtype) if rank % 2 else np.zeros(n, dtype)
                team.allreduce(mine, got, op=op)
                assert np.array_equal(got, want), (dtype, op)
                red = np.zeros(n, dtype)
                team.reduce(mine, red if rank == size - 1 else None, op=op, root=size - 1)
                if rank == size - 1:
                    assert np.array_equal(red, want), ("reduce", dtype, op)
                scan = np.zeros(n, dtype)
                team.scan(mine, scan, op=op)
                assert np.array_equal(scan, ref(np.stack(alls[:rank + 1]), axis=0).astype(dtype)), \
                    (dtype, op)
            inplace = mine.copy()
            team.allreduce(inplace)
            assert np.array_equal(inplace, np.sum(np.stack(alls), axis=0).astype(dtype))
        return "reductions"
    if case == "moves":
        mine = _data(rank, n, np.float32)
        alls = [_data(r, n, np.float32) for r in range(size)]
        got = np.zeros(n * size, np.float32)
        team.allgather(mine, got)
        assert np.array_equal(got, np.concatenate(alls))
        blocks = np.arange(size * 7, dtype=np.int64) + 1000 * rank
        out = np.zeros_like(blocks)
        team.alltoall(blocks, out)
        assert np.array_equal(out, np.concatenate(
            [np.arange(size * 7, dtype=np.int64)[rank * 7:(rank + 1) * 7] + 1000 * r
             for r in range(size)]))
        b = mine.copy() if rank == 0 else np.zeros(n, np.float32)
        team.bcast(b, root=0)
        assert np.array_equal(b, alls[0])
        g = np.zeros(n * size, np.float32) if rank == 0 else None
        team.gather(mine, g, root=0)
        if rank == 0:
            assert np.array_equal(g, np.concatenate(alls))
        s = np.zeros(n, np.float32)
        team.scatter(np.concatenate(alls) if rank == 0 else None, s, root=0)
        assert np.array_equal(s, alls[rank])
        counts = [r + 1 for r in range(size)]
        displs = list(np.cumsum([0] + counts[:-1]))
        mine_v = np.full(rank + 1, rank, np.int32)
        gv = np.zeros(sum(counts), np.int32)
        team.allgatherv(mine_v, gv, counts, displs)
        assert np.array_equal(gv, np.concatenate([np.full(r + 1, r, np.int32) for r in range(size)]))
        team.barrier()
        return "moves"
    if case == "p2p":
        # Around the ring: each sends its right neighbour a block and a
        # synchronous one, receives from any source.
        right, left = (rank + 1) % size, (rank - 1) % size
        mine = _data(rank, n, np.float64)
        got = np.zeros(n, np.float64)
        r = team.irecv(got, tag=5)
        team.send(mine, right, tag=5)
        r.wait()
        assert r.message == deputy.Message(left, 5, mine.nbytes), r.message
        assert np.array_equal(got, _data(left, n, np.float64))
        big = np.full(1 << 18, rank, np.int32)  # 1 MiB: waits for its receive
        s = team.issend(big, right, tag=6)
        into = np.zeros_like(big)
        m = team.recv(into)
        s.wait()
        assert m == deputy.Message(left, 6, big.nbytes) and (into == left).all()
        return "p2p"
    if case == "mismatch":
        # The members disagree on the count: every member fails, nothing hangs.
        a = np.ones(10 + rank, np.float32)
        try:
            team.allreduce(a, np.zeros_like(a))
        except deputy.DeputyError as e:
            return e.name
        return "no error"
    raise AssertionError(case)


def spawn_members(target, args: list, what: str, timeout: float = 60) -> list:
    """One process per entry of `args` (spawned: no state of the test
    process), each running target(*entry, conn) and sending one answer on
    conn; their answers in rank order, every process gone and exited with
    status 0 (a torch member that aborts as it exits fails the test)."""
    ctx = mp.get_context("spawn")
    pipes, procs = [], []
    for a in args:
        parent, child = ctx.Pipe()
        p = ctx.Process(target=target, args=(*a, child))
        p.start()
        pipes.append(parent)
        procs.append(p)
    results = []
    for p, pipe in zip(procs, pipes):
        assert pipe.poll(timeout), f"a member of {what} gave no answer in {timeout} s"
        results.append(pipe.recv())
        p.join(20)
        assert p.exitcode == 0, f"a member of {what} exited with {p.exitcode}"
    return results


def run_team(sock: str, size: int, case: str, timeout: float = 60) -> list:
    return spawn_members(_member, [(sock, f"{case}-{size}", r, size, case) for r in range(size)],
                         case, timeout)


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("case", ["reductions", "moves", "p2p"])
def test_collectives_match_numpy_across_processes(agent, size, case):
    results = run_team(agent, size, case)
    assert all(status == "ok" for status, _ in results), results


@pytest.fixture(scope="module")
def remote_agent():
    """A private agent that also listens on 127.0.0.1 with a fresh key (an
    agent on "another host", docs/agent.md): its tcp:// address and key."""
    binary = os.environ.get("DEPUTY_BIN")
    if not binary:
        pytest.skip("DEPUTY_BIN (build/tools/deputy) not set")
    d = Path(tempfile.mkdtemp(prefix="deputy-py-remote-"))
    key = d / "k"
    subprocess.run([binary, "bench", "channel", "--keygen", str(key)], check=True,
                   capture_output=True, timeout=30)
    with socket.socket() as probe:  # a port nobody listens on now
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    subprocess.run([binary, "agent", "--daemon", "--socket", str(d / "a.sock"), "--log-file",
                    str(d / "agent.log"), "--listen", address, "--key", str(key)],
                   check=True, capture_output=True, timeout=30)
    pid = int((d / "agent.pid").read_text().split()[0])
    yield address, str(key)
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            os.kill(pid, 0)
            time.sleep(0.05)
    except ProcessLookupError:
        pass
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("memory", ["staged", "rdma"])
@pytest.mark.parametrize("case", ["reductions", "moves", "p2p"])
def test_collectives_through_a_remote_agent_match_numpy(remote_agent, case, memory,
                                                        monkeypatch):
    """Members that reach their agent over TCP (the secure session): numpy
    arrays travel staged, or (rdma) the team proxies read and write them in
    place over libfabric's tcp provider; the teams (and their messages) are
    served by team proxies."""
    address, key = remote_agent
    monkeypatch.setenv("DEPUTY_KEY", key)  # (the spawned members inherit it)
    monkeypatch.setenv("DEPUTY_MEMORY", memory)
    results = run_team(address, 2, case)
    assert all(status == "ok" for status, _ in results), results


def test_a_remote_agents_key_from_the_config(remote_agent, monkeypatch):
    """dp_config_t.key_file (Context(key_file=...)) instead of $DEPUTY_KEY;
    without either, the error names both."""
    address, key = remote_agent
    monkeypatch.delenv("DEPUTY_KEY", raising=False)
    with deputy.Context(agent=address, key_file=key, job_secret=SECRET) as ctx, \
            deputy.Team(ctx, "remote-key", 0, 1) as team:
        a = np.arange(1000, dtype=np.int64)
        out = np.zeros_like(a)
        team.allreduce(a, out)
        assert (out == a).all()
    with pytest.raises(deputy.DeputyError) as e:
        deputy.Context(agent=address, job_secret=SECRET)
    assert e.value.name == "DP_ERR_INVALID"
    with deputy.Context(agent=address, key_file=key, job_secret=SECRET) as ctx:
        assert ctx.memory_mode == "staged"


def test_rdma_memory_mode_and_its_provider_from_the_config(remote_agent, monkeypatch):
    """Context(memory_mode="rdma", fabric_provider=...): a numpy array
    reduced in place in the caller's memory; a provider this host lacks is
    named when the team is made."""
    address, key = remote_agent
    monkeypatch.delenv("DEPUTY_MEMORY", raising=False)
    with deputy.Context(agent=address, key_file=key, job_secret=SECRET, memory_mode="rdma",
                        fabric_provider="tcp") as ctx:
        assert ctx.memory_mode == "rdma"
        with deputy.Team(ctx, "remote-rdma", 0, 1) as team:
            a = np.arange(3 << 18, dtype=np.float64)
            out = np.zeros_like(a)
            team.allreduce(a, out)
            assert (out == a).all()
    with deputy.Context(agent=address, key_file=key, job_secret=SECRET, memory_mode="rdma",
                        fabric_provider="nosuchprovider") as ctx:
        with pytest.raises(deputy.DeputyError) as e:
            deputy.Team(ctx, "remote-rdma-none", 0, 1)
        assert e.value.name == "DP_ERR_UNSUPPORTED"


def test_disagreeing_counts_fail_every_member(agent):
    results = run_team(agent, 2, "mismatch")
    assert [v for _, v in results] == ["DP_ERR_MISMATCH", "DP_ERR_MISMATCH"], results


def test_a_request_waited_from_another_thread(agent):
    with deputy.Context(agent=agent, job_secret=SECRET) as ctx, \
            deputy.Team(ctx, "thread", 0, 1) as team:
        a = deputy.empty(1 << 20, np.float32)
        a[:] = 3
        req = team.iallreduce(a)
        errors = []
        t = threading.Thread(target=lambda: errors.append(req.wait()))
        t.start()
        t.join(10)
        assert not t.is_alive() and errors == [None] and req.done and req.test()
        assert a[0] == 3


def test_a_dead_agent_is_an_exception_within_the_bound():
    binary = os.environ.get("DEPUTY_BIN")
    if not binary:
        pytest.skip("DEPUTY_BIN not set")
    with tempfile.TemporaryDirectory(prefix="deputy-py-dead-") as d:
        sock = Path(d) / "a.sock"
        subprocess.run([binary, "agent", "--daemon", "--socket", str(sock), "--log-file",
                        str(Path(d) / "agent.log")], check=True, capture_output=True, timeout=30)
        pid = int((Path(d) / "agent.pid").read_text().split()[0])
        ctx = deputy.Context(agent=str(sock), job_secret=SECRET, lost_timeout_ms=500)
        # A team of 2 whose second member never comes: its operation stays
        # outstanding until the agent dies.
        team_holder = {}
        err = []

        def join():
            try:
                team_holder["t"] = deputy.Team(ctx, "dead", 0, 2, timeout_ms=20000)
            except deputy.DeputyError as e:
                err.append(e)
        t = threading.Thread(target=join)
        t.start()
        time.sleep(0.5)
        os.kill(pid, signal.SIGKILL)
        start = time.monotonic()
        t.join(15)
        assert not t.is_alive(), "dp_team_create did not return after the agent died"
        assert err and err[0].status == deputy.Status.ERR_AGENT_LOST, err
        assert time.monotonic() - start < 5
        with pytest.raises(deputy.DeputyError):
            deputy.Team(ctx, "after", 0, 1)
        try:
            ctx.close()
        except deputy.DeputyError:
            pass


def test_ordinary_arrays_are_registered_once_and_evicted_beyond_the_cap(agent):
    with deputy.Context(agent=agent, job_secret=SECRET) as ctx, \
            deputy.Team(ctx, "registered", 0, 1) as team:
        a, out = np.arange(64, dtype=np.float64), np.zeros(64)
        team.allreduce(a, out)
        first = dict(ctx._registered)
        team.allreduce(a, out)
        assert ctx._registered == first  # kept for the next operation, not registered twice
        arrays = [np.full(8, i, np.int64) for i in range(3 * deputy.Context.KEEP_REGISTERED)]
        for x in arrays:
            got = np.zeros(8, np.int64)
            team.allreduce(x, got)
            assert got[0] == x[0]
        assert len(ctx._registered) <= deputy.Context.KEEP_REGISTERED
        assert all(users == 0 for users in ctx._registered.values())


MPI4PY_SCRIPT = r'''
import sys
import numpy as np
from mpi4py import MPI
import deputy

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
team = deputy.Team.from_mpi4py(comm, agent=sys.argv[1])
assert (team.rank, team.size) == (rank, size)
x = np.arange(1000, dtype=np.float64) * (rank + 1)
got = np.zeros_like(x)
team.allreduce(x, got)
want = np.zeros_like(x)
comm.Allreduce(x, want)  # MPI's own answer: integers, exact in any order
assert np.array_equal(got, want)
team.close()  # (and its context: from_mpi4py made it)
assert not team.ctx._ptr
# (a file per rank: mpirun may interleave the ranks' output within a line)
open(f"{sys.argv[2]}/ok-{rank}", "w").write("ok")
'''


def test_team_from_mpi4py_under_mpirun(agent, tmp_path):
    """Team.from_mpi4py agrees a key and the job secret over an mpi4py
    communicator (Debian's python3-mpi4py, Open MPI) and gives MPI's answer."""
    import shutil
    mpirun = shutil.which("mpirun.openmpi")
    probe = subprocess.run(["/usr/bin/python3", "-c", "import mpi4py, numpy"],
                           capture_output=True)
    if not mpirun or probe.returncode != 0:
        pytest.skip("needs mpirun.openmpi and /usr/bin/python3 with mpi4py (python3-mpi4py)")
    script = tmp_path / "from_mpi4py.py"
    script.write_text(MPI4PY_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEPUTY_") or k == "DEPUTY_LIB"}
    env["PYTHONPATH"] = str(ROOT / "python")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run([mpirun, "--oversubscribe", "-np", "2", "/usr/bin/python3", str(script),
                        agent, str(tmp_path)], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in tmp_path.glob("ok-*")) == ["ok-0", "ok-1"], r.stdout + r.stderr


def _torch_member(sock: str, rank: int, size: int, conn) -> None:
    try:
        import torch
        with deputy.Context(agent=sock, job_secret=SECRET) as ctx, \
                deputy.Team(ctx, f"torch-{size}", rank, size) as team:
            for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.int64):
                x = (torch.arange(1000) % 7 + rank).to(dtype)
                got = torch.zeros(1000, dtype=dtype)
                team.allreduce(x, got)
                want = sum((torch.arange(1000) % 7 + r) for r in range(size)).to(dtype)
                assert torch.equal(got, want), dtype
            w = torch.full((64,), float(rank), requires_grad=True)  # read through detach()
            g = torch.zeros(64 * size)
            team.allgather(w, g)
            assert torch.equal(g, torch.cat([torch.full((64,), float(r)) for r in range(size)]))
            b = torch.arange(32, dtype=torch.int32) if rank == 0 else torch.zeros(32, dtype=torch.int32)
            team.bcast(b, root=0)
            assert torch.equal(b, torch.arange(32, dtype=torch.int32))
        conn.send(("ok", rank))
    except BaseException as e:
        conn.send(("error", f"{type(e).__name__}: {e}"))


def test_torch_cpu_tensors_across_processes(agent):
    """torch CPU tensors (Debian's python3-torch) go through with no copy:
    float, bfloat16 (no NumPy type: deputy's DP_BFLOAT16), integers, a
    tensor that requires grad; GPU or non-contiguous ones are refused."""
    torch = pytest.importorskip("torch")
    results = spawn_members(_torch_member, [(agent, r, 2) for r in range(2)], "torch", 120)
    assert all(status == "ok" for status, _ in results), results
    with deputy.Context(agent=agent, job_secret=SECRET) as c, deputy.Team(c, "torch-bad", 0, 1) as team:
        with pytest.raises(ValueError, match="not contiguous"):
            team.allreduce(torch.arange(10.).reshape(2, 5).t(), torch.zeros(10))


def _ddp_member(sock: str, rdv: str, rank: int, use_hook: bool, conn) -> None:
    try:
        import torch
        import torch.distributed as dist
        import deputy.torch as dtorch
        torch.manual_seed(0)
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=2)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                    torch.nn.Linear(8 * 30 * 30, 10))
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01)
        state = None
        if use_hook:
            state = dtorch.HookState(agent=sock)
            ddp.register_comm_hook(state, dtorch.allreduce_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        gen = torch.Generator().manual_seed(10 + rank)
        for _ in range(3):
            x = torch.randn(4, 3, 32, 32, generator=gen)
            y = torch.randint(0, 10, (4,), generator=gen)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
        params = b"".join(p.detach().numpy().tobytes() for p in model.parameters())
        if state:
            state.close()
        dist.destroy_process_group()
        conn.send(("ok", params))
    except BaseException as e:
        conn.send(("error", f"{type(e).__name__}: {e}"))


def run_ddp(agent: str, tmp: Path, use_hook: bool) -> list:
    rdv = tmp / f"rdv-{use_hook}"
    out = spawn_members(_ddp_member, [(agent, str(rdv), r, use_hook) for r in range(2)], "DDP",
                        180)
    assert all(s == "ok" for s, _ in out), out
    return [v for _, v in out]


def test_ddp_hook_gives_gloos_parameters(agent, tmp_path):
    """DDP over gloo with deputy's allreduce hook (many buckets: 10 KiB
    each) against DDP over gloo alone, same seeds, 3 steps, 2 ranks: the
    parameters are the same bytes (a sum of two halves is exact in either
    order)."""
    pytest.importorskip("torch")
    with_hook = run_ddp(agent, tmp_path, True)
    plain = run_ddp(agent, tmp_path, False)
    assert with_hook[0] == with_hook[1] == plain[0] == plain[1]


def _backend_member(sock: str, rdv: str, rank: int, size: int, conn) -> None:
    try:
        os.environ["DEPUTY_AGENT"] = sock
        import torch
        import torch.distributed as dist
        import deputy.torch  # noqa: F401  (registers "deputy")
        dist.init_process_group("deputy", init_method=f"file://{rdv}", rank=rank, world_size=size)
        gloo = dist.new_group(backend="gloo")
        checked = []

        def same(name, run, ref=None):
            # ref: the same result through operations gloo has (it lacks some)
            a, b = run(None), (ref or run)(gloo)
            for x, y in zip(a, b):
                assert torch.equal(x, y), (name, x, y)
            checked.append(name)

        def data(n=37, dtype=torch.float64):
            return (torch.arange(n) % 11 + 3 * rank).to(dtype)

        R = dist.ReduceOp
        for op in (R.SUM, R.MAX, R.MIN, R.PRODUCT):
            same(f"all_reduce {op}", lambda g: [_ar(dist, data(), op, g)])
        for op in (R.BAND, R.BOR, R.BXOR):
            same(f"all_reduce {op}", lambda g: [_ar(dist, data(dtype=torch.int64), op, g)])

        def bcast(g):
            t = data()
            dist.broadcast(t, src=size - 1, group=g)
            return [t]
        same("broadcast", bcast)

        def reduce(g):
            t = data()
            dist.reduce(t, dst=0, group=g)
            return [t] if rank == 0 else []
        same("reduce", reduce)

        def all_gather(g):
            outs = [torch.zeros(37, dtype=torch.float64) for _ in range(size)]
            dist.all_gather(outs, data(), group=g)
            return outs
        same("all_gather", all_gather)

        def all_gather_base(g):
            out = torch.zeros(37 * size, dtype=torch.float64)
            dist._all_gather_base(out, data(), group=g)
            return [out]
        same("_all_gather_base", all_gather_base, lambda g: [torch.cat(all_gather(g))])

        def reduce_scatter(g):
            out = torch.zeros(5, dtype=torch.float64)
            dist.reduce_scatter(out, [data(5) + i for i in range(size)], group=g)
            return [out]
        def reduce_scatter_ref(g):
            whole = torch.cat([data(5) + i for i in range(size)])
            dist.all_reduce(whole, group=g)
            return [whole[5 * rank:5 * (rank + 1)]]
        same("reduce_scatter", reduce_scatter, reduce_scatter_ref)

        def all_to_all_single(g, splits=False):
            inp = data(6 * size)
            out = torch.zeros(6 * size, dtype=torch.float64)
            if splits:
                sizes_in = [1 + (r + rank) % 3 for r in range(size)]
                # what member r sends me is 1 + (rank + r) % 3
                sizes_out = [1 + (rank + r) % 3 for r in range(size)]
                inp = data(sum(sizes_in))
                out = torch.zeros(sum(sizes_out), dtype=torch.float64)
                dist.all_to_all_single(out, inp, sizes_out, sizes_in, group=g)
            else:
                dist.all_to_all_single(out, inp, group=g)
            return [out]
        same("all_to_all_single", all_to_all_single)
        same("all_to_all_single with splits", lambda g: all_to_all_single(g, True))

        def gather(g):
            outs = [torch.zeros(37, dtype=torch.float64) for _ in range(size)] if rank == 0 else None
            dist.gather(data(), outs, dst=0, group=g)
            return outs or []
        same("gather", gather)

        def scatter(g):
            out = torch.zeros(37, dtype=torch.float64)
            src = [torch.full((37,), float(i)) .to(torch.float64) for i in range(size)]
            dist.scatter(out, src if rank == size - 1 else None, src=size - 1, group=g)
            return [out]
        same("scatter", scatter)

        if size > 1:  # (gloo sends to no rank of its own)
            nxt, prv = (rank + 1) % size, (rank - 1) % size

            def ring(g):
                out = torch.zeros(37, dtype=torch.float64)
                if rank % 2 == 0:
                    dist.send(data(), nxt, group=g, tag=5)
                    dist.recv(out, prv, group=g, tag=5)
                else:
                    dist.recv(out, prv, group=g, tag=5)
                    dist.send(data(), nxt, group=g, tag=5)
                return [out]
            same("send/recv", ring)

            def ring_async(g):
                out = torch.zeros(3000, dtype=torch.float32)
                w = [dist.irecv(out, prv, group=g, tag=6),
                     dist.isend(data(3000, torch.float32), nxt, group=g, tag=6)]
                for x in w:
                    x.wait()
                return [out]
            same("isend/irecv", ring_async)

            def any_source(g):
                # Rank 0 takes one message from every other rank, in any
                # order, and learns each sender from recv's answer.
                if rank != 0:
                    dist.send(data(9), 0, group=g, tag=7)
                    return []
                got = {}
                for _ in range(size - 1):
                    out = torch.zeros(9, dtype=torch.float64)
                    src = dist.recv(out, None, group=g, tag=7)
                    got[src] = out
                return [torch.tensor(sorted(got))] + [got[r] for r in sorted(got)]
            same("recv from any source", any_source)

        dist.barrier()
        t = data()
        work = dist.all_reduce(t, async_op=True)
        fut = work.get_future()
        fut.wait()
        assert work.is_completed()
        sub = dist.new_group(ranks=list(range(max(1, size - 1))))  # a deputy sub-group
        if rank < max(1, size - 1):
            s = data()
            dist.all_reduce(s, group=sub)
            assert torch.equal(s, sum((torch.arange(37) % 11 + 3 * r).to(torch.float64)
                                      for r in range(max(1, size - 1))))
        dist.barrier()
        dist.destroy_process_group()
        conn.send(("ok", checked))
    except BaseException as e:
        import traceback
        conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"))


def _ar(dist, t, op, g):
    dist.all_reduce(t, op=op, group=g)
    return t


@pytest.mark.parametrize("size", [1, 2, 3])
def test_torch_backend_matches_gloo(agent, tmp_path, size):
    """init_process_group("deputy") after `import deputy.torch`: every op of
    the backend against gloo's result on the same ranks (a gloo sub-group of
    the same processes), 1, 2 and 3 ranks, point-to-point (send/recv,
    isend/irecv, recv from any source) included; async work, futures; a
    deputy sub-group."""
    pytest.importorskip("torch")
    results = spawn_members(_backend_member,
                            [(agent, str(tmp_path / "rdv"), r, size) for r in range(size)],
                            "the backend", 180)
    assert all(s == "ok" for s, _ in results), results
    assert len(results[0][1]) == (16 if size == 1 else 19), results[0][1]


def _started_member(sock: str, rdv: str, rank: int, size: int, conn) -> None:
    try:
        os.environ["DEPUTY_AGENT"] = sock  # where nothing listens yet
        import torch
        import torch.distributed as dist
        import deputy.torch  # noqa: F401
        dist.init_process_group("deputy", init_method=f"file://{rdv}", rank=rank, world_size=size)
        t = torch.full((1000,), float(rank + 1))
        dist.all_reduce(t)
        assert torch.equal(t, torch.full((1000,), float(size * (size + 1) // 2)))
        dist.destroy_process_group()
        conn.send(("ok", rank))
    except BaseException as e:
        conn.send(("error", f"{type(e).__name__}: {e}"))


def test_torch_backend_starts_the_nodes_agent_where_none_answers(tmp_path):
    """No agent at $DEPUTY_AGENT: the ranks of init_process_group("deputy")
    start one between them (one wins, the others attach to it), it serves
    the job, and it stops by itself once unused (exit_when_unused_ms),
    leaving neither process nor socket."""
    pytest.importorskip("torch")
    if not os.environ.get("DEPUTY_BIN"):
        pytest.skip("DEPUTY_BIN (build/tools/deputy) not set")
    from deputy import agent_start
    d = Path(tempfile.mkdtemp(prefix="deputy-start-"))
    try:
        sock = d / "agent.sock"
        results = spawn_members(_started_member,
                                [(str(sock), str(tmp_path / "rdv"), r, 3) for r in range(3)],
                                "the started agent's job", 120)
        assert all(s == "ok" for s, _ in results), results
        pid = int((d / "agent.pid").read_text().split()[0])
        os.kill(pid, 0)  # one agent, still there right after its clients left
        deadline = time.monotonic() + agent_start.EXIT_WHEN_UNUSED_MS / 1000 + 5
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError("the agent started on demand did not stop once unused")
        assert not sock.exists()
        # Without permission to start one, no agent is an error as before.
        env = dict(os.environ, DEPUTY_START_AGENT="0")
        r = subprocess.run([sys.executable, "-c",
                            "import deputy.torch as t\n"
                            "class Store:\n"
                            "    def get(self, key): return b'0' * 32\n"
                            "t._shared_context(Store(), 1)"],
                           env=dict(env, DEPUTY_AGENT=str(sock)), capture_output=True, text=True,
                           timeout=60)
        assert r.returncode != 0 and "DP_ERR_NO_AGENT" in r.stderr, r.stderr[-2000:]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_examples_ddp_under_torchrun_with_no_agent_running(tmp_path):
    """torchrun (torch.distributed.run, env:// rendezvous) starts 2 ranks of
    examples/ddp/train.py on the deputy backend with no agent at
    $DEPUTY_AGENT: they start one, train, and leave the same parameter bytes
    as gloo under torchrun."""
    pytest.importorskip("torch")
    if not os.environ.get("DEPUTY_BIN"):
        pytest.skip("DEPUTY_BIN (build/tools/deputy) not set")
    d = Path(tempfile.mkdtemp(prefix="deputy-run-"))
    try:
        env = dict(os.environ, DEPUTY_AGENT=str(d / "agent.sock"),
                   PYTHONPATH=str(ROOT / "python"), OMP_NUM_THREADS="1")
        sums = {}
        for mode in ("gloo", "deputy"):
            # --redirects 1 --tee 1: torch 1.13's default (0) fails under
            # Python 3.11 (examples/ddp/README.md); its lines then carry a
            # "[defaultN]:" prefix.
            r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                "--nproc_per_node", "2", "--redirects", "1", "--tee", "1",
                                str(ROOT / "examples" / "ddp" / "train.py"),
                                "--mode", mode, "--steps", "3", "--warmup", "1", "--batch", "8",
                                "--bucket-mb", "0.5"], capture_output=True, text=True,
                               timeout=240, env=env)
            assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
            sums[mode] = sorted(re.sub(r"^\[default\d+\]:", "", x) for x in r.stdout.splitlines()
                                if "]:result:" in x)
            assert sums[mode], r.stdout
        assert sums["gloo"] == sums["deputy"], sums
        pid = int((d / "agent.pid").read_text().split()[0])
        os.kill(pid, signal.SIGTERM)  # (it would stop by itself 5 s later)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_bench_reports_both_backends_as_nccl_tests_does(agent, tmp_path):
    """python -m deputy.bench: a row per size with gloo's and deputy's time,
    algbw, busbw (the factor from libdeputy's table) and #wrong (0), in the
    table and the JSON document."""
    pytest.importorskip("torch")
    assert lib.dp_coll_bus_factor(b"allreduce", 4) == 1.5
    assert lib.dp_coll_bus_factor(b"allgather", 4) == 0.75
    assert lib.dp_coll_bus_factor(b"no-such", 4) == 0 and lib.dp_coll_bus_factor(b"allreduce", 0) == 0
    out = tmp_path / "b.json"
    env = dict(os.environ, DEPUTY_AGENT=agent, PYTHONPATH=str(ROOT / "python"))
    r = subprocess.run([sys.executable, "-m", "deputy.bench", "-n", "3", "-m", "4k:16k",
                        "--iters", "2", "--warmup", "1", "--runs", "2", "--json", str(out)],
                       capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if not line.startswith("#")]
    assert [int(x[0]) for x in rows] == [4096, 8192, 16384], r.stdout
    doc = json.loads(out.read_text())
    assert doc["ranks"] == 3 and abs(doc["bus_factor"] - 4 / 3) < 1e-12
    from deputy._lib import heap_preload
    assert doc["memory"] == ("shared heap" if heap_preload() else "ordinary")
    for row in doc["rows"]:
        for b in ("gloo", "deputy"):
            x = row[b]
            assert x["wrong"] == 0 and x["time_us"] > 0 and len(x["time_us_rounds"]) == 2
            assert abs(x["algbw"] - row["bytes"] / x["time_us"] / 1e3) < 1e-9
            assert abs(x["busbw"] - x["algbw"] * 4 / 3) < 1e-9
        assert abs(row["busbw_x"] - row["deputy"]["busbw"] / row["gloo"]["busbw"]) < 1e-9
    bad = subprocess.run([sys.executable, "-m", "deputy.bench", "-m", "8:4"], capture_output=True,
                         text=True, timeout=60, env=env)
    assert bad.returncode == 2 and "need 4 <= MIN <= MAX" in bad.stderr


def test_examples_ddp_three_modes_give_the_same_parameters(agent):
    """examples/ddp/train.py with 2 ranks, 4 steps: gloo, the deputy
    backend (the ranks' tensors in the shared heap, its default, and with
    --no-heap in ordinary memory) and gloo with deputy's hook end with the
    same parameter bytes."""
    pytest.importorskip("torch")
    env = dict(os.environ, DEPUTY_AGENT=agent, PYTHONPATH=str(ROOT / "python"))
    sums = {}
    runs = [("gloo", []), ("deputy", []), ("gloo+hook", []), ("deputy", ["--no-heap"])]
    for mode, more in runs:
        r = subprocess.run([sys.executable, str(ROOT / "examples" / "ddp" / "train.py"), "--mode",
                            mode, "--steps", "4", "--warmup", "1", "--batch", "8",
                            "--bucket-mb", "0.5", *more], capture_output=True, text=True,
                           timeout=180, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        sums[" ".join([mode, *more])] = [x for x in r.stdout.splitlines()
                                         if x.startswith("result:")]
        assert len(sums[" ".join([mode, *more])]) == 1, r.stdout
    assert len({tuple(v) for v in sums.values()}) == 1, sums
