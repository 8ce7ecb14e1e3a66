"""Teams and their collectives (include/deputy/coll.h) on NumPy arrays and
anything NumPy can view without a copy (the buffer protocol, torch CPU
tensors through __array__), and any object that offers DLPack
(deputy/dlpack.py)."""

from __future__ import annotations

import ctypes
import secrets
import threading
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from deputy._lib import MsgStatus, c_size_p, lib
from deputy.constants import (_FROM_NUMPY as _DTYPES, _OPS, ANY_SOURCE, ANY_TAG, DType, Op,
                               Status, dtype_of, op_of)
from deputy.context import Context
from deputy.dlpack import View, offers_dlpack
from deputy.errors import DeputyError, check

ArrayLike = Any  # an ndarray, a buffer, a torch CPU tensor, a DLPack producer


_address_of_writable = ctypes.c_char.from_buffer
_addressof = ctypes.addressof
_byref = ctypes.byref
_dp_iallreduce = lib.dp_iallreduce


class _Buffer:
    """An array as the C API sees it: address, element count, type. (On the
    posting path: each attribute read here is a measured share of a post's
    cost; python/deputy/README.md.)"""

    __slots__ = ("array", "address", "count", "dtype", "nbytes")

    def __init__(self, obj: ArrayLike, what: str, writable: bool):
        override = None
        if type(obj) is np.ndarray:
            a = obj
        elif _is_torch_tensor(obj):
            a, override = _tensor_array(obj, what)
        elif offers_dlpack(obj) and not isinstance(obj, np.ndarray):
            # (no NumPy array over it: NumPy's are read-only, deputy.dlpack)
            v = View(obj, what)
            self.array, self.address, self.count = v, v.address, v.count
            self.nbytes, self.dtype = v.nbytes, v.dtype
            return
        else:
            a = np.asarray(obj)
        flags = a.flags
        if not flags.c_contiguous:
            raise ValueError(f"deputy: {what} is not contiguous (strides {a.strides}); "
                             "give a contiguous array (np.ascontiguousarray copies one)")
        if writable and not flags.writeable:
            raise ValueError(f"deputy: {what} is read-only; the operation writes it")
        self.array = a
        self.nbytes = n = a.nbytes
        # A writable buffer's address through ctypes costs a fifth of
        # __array_interface__'s.
        self.address = (_addressof(_address_of_writable(a)) if n and flags.writeable
                        else a.__array_interface__["data"][0])
        self.count = a.size
        self.dtype = override or _DTYPES.get(a.dtype) or dtype_of(a.dtype)


def _is_torch_tensor(obj: Any) -> bool:
    # (torch is not imported unless a tensor is given)
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def _tensor_array(t: Any, what: str):
    """A torch CPU tensor as a NumPy array over the same memory (no copy),
    and the deputy type when NumPy has none (bfloat16). A tensor that
    requires grad is read through detach(), which shares its storage."""
    import torch
    if t.device.type != "cpu":
        raise ValueError(f"deputy: {what} is on {t.device}; deputy moves CPU memory "
                         "(tensor.cpu() copies it)")
    if not t.is_contiguous():
        raise ValueError(f"deputy: {what} is not contiguous (strides {tuple(t.stride())}); "
                         "tensor.contiguous() copies it")
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy(), DType.BFLOAT16
    if t.dtype == torch.bool:
        return t.view(torch.uint8).numpy(), None
    return t.numpy(), None


class Message(NamedTuple):
    """What a receive took or a probe found: the sender's rank, the tag and
    the message's length in bytes."""

    source: int
    tag: int
    nbytes: int


class Request:
    """An operation in flight. test() and wait() may be called from any
    thread (one at a time: a lock orders them); wait() releases the GIL
    while it waits. The arrays are held until the operation is done; a
    request dropped while in flight is waited for first (the agent may still
    write its buffers)."""

    __slots__ = ("_ptr", "_keep", "_ctx", "_keys", "_status", "_lock", "_call", "_receive",
                 "_message", "__weakref__")

    def __init__(self, call: str, ptr: ctypes.c_void_p, ctx: Context, keep: tuple,
                 keys: list, receive: bool = False):
        self._call = call
        self._ptr = ptr
        self._ctx = ctx
        self._keep = keep
        self._keys = keys
        self._status: Optional[int] = None
        self._lock = threading.Lock()
        self._receive = receive
        self._message: Optional[Message] = None

    def _finish(self, status: int) -> None:
        self._status = status
        if self._receive and status in (0, int(Status.ERR_TRUNCATED)):
            m = MsgStatus()
            if lib.dp_request_status(self._ptr, ctypes.byref(m)) == 0:
                self._message = Message(m.source, m.tag, m.bytes)
        lib.dp_request_free(self._ptr)
        self._ptr = None
        for k in self._keys:
            self._ctx.release(k)
        self._keep = ()

    def test(self) -> bool:
        """True once the operation is done (raising its error if it failed)."""
        with self._lock:
            if self._status is None:
                done = ctypes.c_int(0)
                status = lib.dp_test(self._ptr, ctypes.byref(done))
                if not done.value and status == 0:
                    return False
                self._finish(status)
        check(self._call, self._status)
        return True

    def wait(self) -> None:
        """Waits until the operation is done; DeputyError if it failed."""
        with self._lock:
            if self._status is None:
                self._finish(lib.dp_wait(self._ptr))
        check(self._call, self._status)

    @property
    def done(self) -> bool:
        return self._status is not None

    @property
    def message(self) -> "Optional[Message]":
        """A completed receive's message (its source, tag and length; also
        after ERR_TRUNCATED, which wait() raises); None otherwise."""
        return self._message

    def __del__(self) -> None:
        try:
            if self._ptr is not None:
                self.wait()
        except Exception:
            pass


class Team:
    """A team of `size` processes (one Context each, the same job secret)
    that agreed on `key`; this process is `rank`. Collectives follow MPI's
    rules (include/deputy/coll.h): every member posts the same operations
    in the same order with matching counts, types and roots."""

    def __init__(self, ctx: Context, key: str, rank: int, size: int, timeout_ms: int = 0):
        self.ctx = ctx
        self._ptr = ctypes.c_void_p()
        check("dp_team_create", lib.dp_team_create_timeout(ctx.handle, key.encode(), rank, size,
                                                            timeout_ms, ctypes.byref(self._ptr)),
              f"team {key!r}, rank {rank} of {size}")
        self.key = key
        self._owns_ctx = False  # from_mpi4py's own context: closed with the team
        self._rank, self._size = lib.dp_team_rank(self._ptr), lib.dp_team_size(self._ptr)

    @classmethod
    def from_mpi4py(cls, comm: Any, ctx: Optional[Context] = None, **options: Any) -> "Team":
        """A team of an mpi4py communicator's ranks: rank 0 draws a key and
        (when no context is given) the job secret, and broadcasts both; each
        rank then attaches (options: Context's) and joins. A context made
        here is the team's: close() closes it."""
        key, secret = comm.bcast((f"mpi4py-{secrets.token_hex(8)}", secrets.token_hex(16))
                                 if comm.Get_rank() == 0 else None, root=0)
        own = ctx is None
        if own:
            options.setdefault("job_secret", secret)
            ctx = Context(**options)
        try:
            team = cls(ctx, key, comm.Get_rank(), comm.Get_size())
        except BaseException:
            if own:
                ctx.close()
            raise
        team._owns_ctx = own
        return team

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def size(self) -> int:
        return self._size

    def _handle(self) -> int:
        if not self._ptr:
            raise DeputyError("deputy.Team", -1, "the team is closed")
        return self._ptr.value  # type: ignore[return-value]

    def close(self) -> None:
        """Leaves the team (dp_team_destroy); its requests must be done. A
        team made by from_mpi4py without a context closes its own too."""
        if self._ptr:
            ptr, self._ptr = self._ptr, ctypes.c_void_p()
            check("dp_team_destroy", lib.dp_team_destroy(ptr))
            if self._owns_ctx:
                self.ctx.close()

    def __enter__(self) -> "Team":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- posting ---

    def _post(self, call: str, fn: Any, args: Sequence[Any], buffers: Sequence[_Buffer],
              keep: tuple = (), receive: bool = False) -> Request:
        reach = self.ctx.reach
        keys = []
        try:
            for b in buffers:
                k = reach(b.address, b.nbytes)
                if k is not None:
                    keys.append(k)
            req = ctypes.c_void_p()
            status = fn(*args, self._ptr, _byref(req))
            if status:
                raise DeputyError(call, status)
        except BaseException:
            for k in keys:
                self.ctx.release(k)
            raise
        return Request(call, req, self.ctx, (*buffers, *keep), keys, receive)

    @staticmethod
    def _same_type(call: str, a: _Buffer, b: _Buffer) -> None:
        if a.dtype != b.dtype:
            raise ValueError(f"{call}: src is {a.dtype.name.lower()}, dst "
                             f"{b.dtype.name.lower()}: give both the same type")

    def _sized(self, call: str, what: str, b: _Buffer, count: int) -> None:
        if b.count != count:
            raise ValueError(f"{call}: {what} holds {b.count} elements, the operation "
                             f"{count}")

    def iallreduce(self, src: ArrayLike, dst: Optional[ArrayLike] = None,
                   op: "Op | str" = "sum") -> Request:
        """dst = src reduced over the members (dst None: in place in src)."""
        # The hot path (a gradient bucket each step): NumPy arrays of the
        # mapped or already registered memory take no _Buffer, no method
        # call and no dict of __array_interface__ (1.6 us a post here, 2.5
        # through the general path; python/deputy/README.md).
        if type(src) is np.ndarray and (dst is None or type(dst) is np.ndarray):
            d = src if dst is None else dst
            fs, fd = src.flags, d.flags
            dtype = _DTYPES.get(src.dtype)
            code = _OPS.get(op)
            n = src.nbytes
            if (fs.c_contiguous and fd.c_contiguous and fd.writeable and dtype is not None and
                    code is not None and n and d.nbytes == n and
                    (d.dtype is src.dtype or d.dtype == src.dtype)):
                sa = _addressof(_address_of_writable(src)) if fs.writeable else \
                    src.__array_interface__["data"][0]
                da = _addressof(_address_of_writable(d)) if d is not src else sa
                ctx = self.ctx
                mapped = ctx._mapped
                keys = ()
                if (sa, n) not in mapped or (da, n) not in mapped:
                    keys = [k for k in (ctx.reach(sa, n), ctx.reach(da, n) if da != sa else None)
                            if k is not None]
                req = ctypes.c_void_p()
                status = _dp_iallreduce(sa, da, src.size, dtype, code, self._ptr, _byref(req))
                if status:
                    for k in keys:
                        ctx.release(k)
                    raise DeputyError("dp_iallreduce", status)
                return Request("dp_iallreduce", req, ctx, (src, d), keys)
        s = _Buffer(src, "src", dst is None)
        d = s if dst is None else _Buffer(dst, "dst", True)
        self._same_type("dp_iallreduce", s, d)
        self._sized("dp_iallreduce", "dst", d, s.count)
        return self._post("dp_iallreduce", lib.dp_iallreduce,
                          (s.address, d.address, s.count, s.dtype, op_of(op)), (s, d))

    def ireduce_scatter(self, src: ArrayLike, dst: ArrayLike, op: "Op | str" = "sum") -> Request:
        """src holds size blocks of dst's length; member r's dst gets block r reduced."""
        s, d = _Buffer(src, "src", False), _Buffer(dst, "dst", True)
        self._same_type("dp_ireduce_scatter", s, d)
        self._sized("dp_ireduce_scatter", "src", s, d.count * self.size)
        return self._post("dp_ireduce_scatter", lib.dp_ireduce_scatter,
                          (s.address, d.address, d.count, d.dtype, op_of(op)), (s, d))

    def iallgather(self, src: ArrayLike, dst: ArrayLike) -> Request:
        """dst holds size blocks of src's length: block m is member m's src."""
        s, d = _Buffer(src, "src", False), _Buffer(dst, "dst", True)
        self._same_type("dp_iallgather", s, d)
        self._sized("dp_iallgather", "dst", d, s.count * self.size)
        return self._post("dp_iallgather", lib.dp_iallgather,
                          (s.address, d.address, s.count, s.dtype), (s, d))

    def ialltoall(self, src: ArrayLike, dst: ArrayLike) -> Request:
        """Block m of src (size equal blocks) goes to member m's dst block rank."""
        s, d = _Buffer(src, "src", False), _Buffer(dst, "dst", True)
        self._same_type("dp_ialltoall", s, d)
        self._sized("dp_ialltoall", "dst", d, s.count)
        if s.count % self.size:
            raise ValueError(f"dp_ialltoall: src holds {s.count} elements, not {self.size} "
                             "equal blocks")
        return self._post("dp_ialltoall", lib.dp_ialltoall,
                          (s.address, d.address, s.count // self.size, s.dtype), (s, d))

    def ibcast(self, buf: ArrayLike, root: int = 0) -> Request:
        """The root's buf into every member's."""
        b = _Buffer(buf, "buf", True)
        return self._post("dp_ibcast", lib.dp_ibcast, (b.address, b.count, b.dtype, root), (b,))

    def ibarrier(self) -> Request:
        return self._post("dp_ibarrier", lib.dp_ibarrier, (), ())

    def ireduce(self, src: ArrayLike, dst: Optional[ArrayLike] = None, op: "Op | str" = "sum",
                root: int = 0) -> Request:
        """The root's dst = every member's src reduced (dst only at the root)."""
        s = _Buffer(src, "src", False)
        d = _Buffer(dst, "dst", True) if dst is not None else None
        if d is not None:
            self._same_type("dp_ireduce", s, d)
            self._sized("dp_ireduce", "dst", d, s.count)
        return self._post("dp_ireduce", lib.dp_ireduce,
                          (s.address, d.address if d else None, s.count, s.dtype, op_of(op),
                           root), (s,) + ((d,) if d else ()))

    def igather(self, src: ArrayLike, dst: Optional[ArrayLike] = None, root: int = 0) -> Request:
        """The root's dst (size blocks of src's length) gets every member's src."""
        s = _Buffer(src, "src", False)
        d = _Buffer(dst, "dst", True) if dst is not None else None
        if d is not None:
            self._same_type("dp_igather", s, d)
            self._sized("dp_igather", "dst", d, s.count * self.size)
        return self._post("dp_igather", lib.dp_igather,
                          (s.address, d.address if d else None, s.count, s.dtype, root),
                          (s,) + ((d,) if d else ()))

    def iscatter(self, src: Optional[ArrayLike], dst: ArrayLike, root: int = 0) -> Request:
        """Member m's dst gets block m of the root's src (src only at the root)."""
        d = _Buffer(dst, "dst", True)
        s = _Buffer(src, "src", False) if src is not None else None
        if s is not None:
            self._same_type("dp_iscatter", s, d)
            self._sized("dp_iscatter", "src", s, d.count * self.size)
        return self._post("dp_iscatter", lib.dp_iscatter,
                          (s.address if s else None, d.address, d.count, d.dtype, root),
                          ((s,) if s else ()) + (d,))

    def _prefix(self, call: str, fn: Any, src: ArrayLike, dst: ArrayLike, op: Any) -> Request:
        s, d = _Buffer(src, "src", False), _Buffer(dst, "dst", True)
        self._same_type(call, s, d)
        self._sized(call, "dst", d, s.count)
        return self._post(call, fn, (s.address, d.address, s.count, s.dtype, op_of(op)), (s, d))

    def iscan(self, src: ArrayLike, dst: ArrayLike, op: "Op | str" = "sum") -> Request:
        """Member r's dst = src of members 0..r reduced."""
        return self._prefix("dp_iscan", lib.dp_iscan, src, dst, op)

    def iexscan(self, src: ArrayLike, dst: ArrayLike, op: "Op | str" = "sum") -> Request:
        """Member r's dst = src of members 0..r-1 reduced (rank 0's untouched)."""
        return self._prefix("dp_iexscan", lib.dp_iexscan, src, dst, op)

    # --- vector forms: counts and displacements in elements, size entries ---

    def _sizes(self, call: str, name: str, values: Optional[Sequence[int]]):
        if values is None:
            return None
        v = list(values)
        if len(v) != self.size or any(x < 0 for x in v):
            raise ValueError(f"{call}: {name} needs {self.size} non-negative entries, got {v}")
        return (ctypes.c_size_t * len(v))(*v)

    def ialltoallv(self, src: ArrayLike, scounts: Sequence[int], sdispls: Sequence[int],
                   dst: ArrayLike, rcounts: Sequence[int], rdispls: Sequence[int]) -> Request:
        call = "dp_ialltoallv"
        s, d = _Buffer(src, "src", False), _Buffer(dst, "dst", True)
        self._same_type(call, s, d)
        arrays = [self._sizes(call, n, v) for n, v in
                  (("scounts", scounts), ("sdispls", sdispls), ("rcounts", rcounts),
                   ("rdispls", rdispls))]
        return self._post(call, lib.dp_ialltoallv,
                          (s.address, arrays[0], arrays[1], d.address, arrays[2], arrays[3],
                           s.dtype), (s, d), tuple(arrays))

    def iallgatherv(self, src: ArrayLike, dst: ArrayLike, rcounts: Sequence[int],
                    rdispls: Sequence[int]) -> Request:
        call = "dp_iallgatherv"
        s, d = _Buffer(src, "src", False), _Buffer(dst, "dst", True)
        self._same_type(call, s, d)
        rc, rd = self._sizes(call, "rcounts", rcounts), self._sizes(call, "rdispls", rdispls)
        return self._post(call, lib.dp_iallgatherv,
                          (s.address, s.count, d.address, rc, rd, s.dtype), (s, d), (rc, rd))

    def igatherv(self, src: ArrayLike, dst: Optional[ArrayLike] = None,
                 rcounts: Optional[Sequence[int]] = None, rdispls: Optional[Sequence[int]] = None,
                 root: int = 0) -> Request:
        call = "dp_igatherv"
        s = _Buffer(src, "src", False)
        d = _Buffer(dst, "dst", True) if dst is not None else None
        rc, rd = self._sizes(call, "rcounts", rcounts), self._sizes(call, "rdispls", rdispls)
        return self._post(call, lib.dp_igatherv,
                          (s.address, s.count, d.address if d else None, rc, rd, s.dtype, root),
                          (s,) + ((d,) if d else ()), (rc, rd))

    def iscatterv(self, src: Optional[ArrayLike], scounts: Optional[Sequence[int]],
                  sdispls: Optional[Sequence[int]], dst: ArrayLike, root: int = 0) -> Request:
        call = "dp_iscatterv"
        d = _Buffer(dst, "dst", True)
        s = _Buffer(src, "src", False) if src is not None else None
        sc, sd = self._sizes(call, "scounts", scounts), self._sizes(call, "sdispls", sdispls)
        return self._post(call, lib.dp_iscatterv,
                          (s.address if s else None, sc, sd, d.address, d.count, d.dtype, root),
                          ((s,) if s else ()) + (d,), (sc, sd))

    def ireduce_scatterv(self, src: ArrayLike, dst: ArrayLike, counts: Sequence[int],
                         op: "Op | str" = "sum") -> Request:
        call = "dp_ireduce_scatterv"
        s, d = _Buffer(src, "src", False), _Buffer(dst, "dst", True)
        self._same_type(call, s, d)
        c = self._sizes(call, "counts", counts)
        return self._post(call, lib.dp_ireduce_scatterv,
                          (s.address, d.address, c, s.dtype, op_of(op)), (s, d), (c,))


    # --- point-to-point (include/deputy/p2p.h) ---

    def _p2p(self, call: str, fn: Any, buf: Optional[ArrayLike], peer: int, tag: int,
             writable: bool) -> Request:
        b = _Buffer(buf if buf is not None else np.empty(0, np.uint8), "buf", writable)
        # A receive (the writable side) reports its message.
        return self._post(call, fn, (b.address, b.nbytes, peer, tag), (b,), receive=writable)

    def isend(self, buf: ArrayLike, dest: int, tag: int = 0) -> Request:
        """Sends the array's bytes to member `dest` with `tag` (0..2^31-1)."""
        return self._p2p("isend", lib.dp_isend, buf, dest, tag, False)

    def issend(self, buf: ArrayLike, dest: int, tag: int = 0) -> Request:
        """A synchronous send: done only once a receive took the message."""
        return self._p2p("issend", lib.dp_issend, buf, dest, tag, False)

    def irecv(self, buf: ArrayLike, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Receives into the array (at most its bytes) from `source` with
        `tag` (ANY_SOURCE, ANY_TAG: any); the request's .message says which
        once it is done."""
        return self._p2p("irecv", lib.dp_irecv, buf, source, tag, True)

    def send(self, buf: ArrayLike, dest: int, tag: int = 0) -> None:
        self.isend(buf, dest, tag).wait()

    def ssend(self, buf: ArrayLike, dest: int, tag: int = 0) -> None:
        self.issend(buf, dest, tag).wait()

    def recv(self, buf: ArrayLike, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> "Message":
        """The blocking receive: the message's source, tag and length."""
        r = self.irecv(buf, source, tag)
        r.wait()
        assert r.message is not None
        return r.message

    def iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> "Optional[Message]":
        """The message a receive of (source, tag) would take, if one arrived."""
        flag, m = ctypes.c_int(0), MsgStatus()
        check("iprobe", lib.dp_iprobe(source, tag, self._ptr, ctypes.byref(flag), ctypes.byref(m)))
        return Message(m.source, m.tag, m.bytes) if flag.value else None


def _blocking(name: str):
    nonblocking = getattr(Team, "i" + name)

    def call(self: Team, *args: Any, **kwargs: Any) -> None:
        nonblocking(self, *args, **kwargs).wait()

    call.__name__ = name
    call.__doc__ = f"The blocking form of i{name}: posts it and waits.\n\n{nonblocking.__doc__ or ''}"
    return call


for _name in ("allreduce", "reduce_scatter", "allgather", "alltoall", "bcast", "barrier",
              "reduce", "gather", "scatter", "scan", "exscan", "alltoallv", "allgatherv",
              "gatherv", "scatterv", "reduce_scatterv"):
    setattr(Team, _name, _blocking(_name))
