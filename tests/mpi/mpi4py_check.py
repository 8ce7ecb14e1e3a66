"""An ordinary mpi4py program (Debian's python3-mpi4py, built on Open MPI) that
knows nothing of deputy: non-blocking collectives on numpy arrays, and a few
on Python objects. Rank 0 prints one line per case,

    case <name> <sha256 of every rank's output bytes, 16 hex digits>

and every rank checks its results against numpy's: a wrong one gets
" WRONG" after the hash (details on stderr) and rank 0 exits 1.
tests/mpi/run_mpi4py_check.py runs it with and without deputy's PMPI library
(LD_PRELOAD) and compares the outputs line for line.

Inputs are exact in any order of reduction: small integers (also as floats)
for sums, powers of two for products.
"""

from __future__ import annotations

import hashlib
import sys
import zlib

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
results: list[tuple[str, str, bool]] = []


def inputs(case: str, r: int, n: int, dtype: str, op: str) -> np.ndarray:
    """Rank r's input of a case: a function of (case, rank) only."""
    rng = np.random.default_rng([zlib.crc32(case.encode()), r])
    kind = np.dtype(dtype).kind
    if op == "prod":
        return rng.choice([1, 2] if kind == "u" else [-2, -1, 1, 2], n).astype(dtype)
    if kind in "iu":
        info = np.iinfo(dtype)
        if op in ("min", "max"):
            return rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype)
        bound = info.max // size  # sums of `size` values stay in range
        return rng.integers(0 if kind == "u" else -bound, bound, n, endpoint=True, dtype=dtype)
    if op == "sum":
        return (rng.integers(-2000, 2000, n, endpoint=True) / 4).astype(dtype)
    return (rng.integers(-2**31, 2**31, n) / 256).astype(dtype)  # min, max, moving floats


def record(case: str, out: bytes, want: bytes) -> None:
    ok = out == want
    if not ok:
        print(f"mpi4py_check: rank {rank}: case {case}: result differs from numpy's",
              file=sys.stderr, flush=True)
    results.append((case, hashlib.sha256(out).hexdigest(), ok))


REDUCE = {"sum": (MPI.SUM, np.add), "prod": (MPI.PROD, np.multiply),
          "min": (MPI.MIN, np.minimum), "max": (MPI.MAX, np.maximum)}


def iallreduce(dtype: str, op: str, n: int, in_place: bool) -> None:
    case = f"iallreduce.{dtype}.{op}.n{n}{'.inplace' if in_place else ''}"
    mine = inputs(case, rank, n, dtype, op)
    want = inputs(case, 0, n, dtype, op)
    for r in range(1, size):
        want = REDUCE[op][1](want, inputs(case, r, n, dtype, op)).astype(dtype)
    if in_place:
        out = mine.copy()
        comm.Iallreduce(MPI.IN_PLACE, out, op=REDUCE[op][0]).Wait()
    else:
        out = np.full(n, 7, dtype=dtype)
        comm.Iallreduce(mine, out, op=REDUCE[op][0]).Wait()
    record(case, out.tobytes(), want.tobytes())


def ialltoall(dtype: str, n: int) -> None:
    case = f"ialltoall.{dtype}.n{n}"
    send = inputs(case, rank, n * size, dtype, "move")
    out = np.zeros(n * size, dtype=dtype)
    comm.Ialltoall(send, out).Wait()
    want = np.concatenate([inputs(case, r, n * size, dtype, "move")[rank * n:(rank + 1) * n]
                           for r in range(size)])
    record(case, out.tobytes(), want.tobytes())


def iallgather(dtype: str, n: int) -> None:
    case = f"iallgather.{dtype}.n{n}"
    out = np.zeros(n * size, dtype=dtype)
    comm.Iallgather(inputs(case, rank, n, dtype, "move"), out).Wait()
    want = np.concatenate([inputs(case, r, n, dtype, "move") for r in range(size)])
    record(case, out.tobytes(), want.tobytes())


def ibcast(dtype: str, n: int, root: int) -> None:
    case = f"ibcast.{dtype}.n{n}.root{root}"
    want = inputs(case, root, n, dtype, "move")
    buf = want.copy() if rank == root else np.zeros(n, dtype=dtype)
    comm.Ibcast(buf, root=root).Wait()
    record(case, buf.tobytes(), want.tobytes())


def several_outstanding() -> None:
    """Four requests of different kinds at once, completed by MPI.Request.Waitall."""
    case = "outstanding.waitall"
    n = 4097
    a = inputs(case + "a", rank, n, "int64", "sum")
    b = inputs(case + "b", rank, n * size, "float64", "move")
    c = inputs(case + "c", rank, n, "int32", "move")
    d = inputs(case + "d", 0, n, "float32", "move") if rank == 0 else np.zeros(n, "float32")
    outs = [np.zeros(n, "int64"), np.zeros(n * size, "float64"), np.zeros(n * size, "int32")]
    reqs = [comm.Iallreduce(a, outs[0]), comm.Ialltoall(b, outs[1]), comm.Iallgather(c, outs[2]),
            comm.Ibcast(d, root=0)]
    MPI.Request.Waitall(reqs)
    want = [sum(inputs(case + "a", r, n, "int64", "sum") for r in range(size)),
            np.concatenate([inputs(case + "b", r, n * size, "float64", "move")[rank * n:(rank + 1) * n]
                            for r in range(size)]),
            np.concatenate([inputs(case + "c", r, n, "int32", "move") for r in range(size)]),
            inputs(case + "d", 0, n, "float32", "move")]
    got = b"".join(x.tobytes() for x in outs + [d])
    record(case, got, b"".join(np.asarray(x).tobytes() for x in want))


def python_objects() -> None:
    """The lower-case, pickling methods."""
    case = "objects.allreduce-bcast"
    total = comm.allreduce(rank * 1000 + 1)
    obj = comm.bcast({"from": "root", "values": list(range(13))} if rank == 0 else None, root=0)
    got = repr((total, obj)).encode()
    want = repr((sum(r * 1000 + 1 for r in range(size)),
                 {"from": "root", "values": list(range(13))})).encode()
    record(case, got, want)


for dtype in ("int32", "int64", "uint8", "float32", "float64"):
    for k, op in enumerate(("sum", "prod", "min", "max")):
        iallreduce(dtype, op, (1, 13, 4097, 65537)[k], in_place=k % 2 == 1)
for dtype, n in (("int8", 1), ("int32", 13), ("float64", 4097), ("uint16", 65537)):
    ialltoall(dtype, n)
    iallgather(dtype, n)
for root in range(size):
    ibcast(("float64", "int16", "uint8", "int64")[root % 4], (13, 4097, 1, 65537)[root % 4], root)
iallreduce("float64", "sum", (1 << 20) + 1, in_place=False)
several_outstanding()
python_objects()

# Rank 0 gathers the digests (MPI_Gather: not an operation deputy offloads).
everyone = comm.gather([(h, ok) for _, h, ok in results], root=0)
status = 0
if rank == 0:
    print(f"mpi4py_check size {size}")
    for i, (case, _, _) in enumerate(results):
        digest = hashlib.sha256("".join(everyone[r][i][0] for r in range(size)).encode())
        wrong = sum(1 for r in range(size) if not everyone[r][i][1])
        print(f"case {case} {digest.hexdigest()[:16]}" + (f" WRONG {wrong}" if wrong else ""))
        status |= bool(wrong)
    print(f"done {len(results)} cases")
sys.stdout.flush()
sys.exit(status)
