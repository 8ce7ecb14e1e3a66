"""deputy for PyTorch: the torch.distributed backend "deputy" (registered
on import: init_process_group("deputy")), and a DDP communication hook that
posts each gradient bucket to deputy and completes a torch Future when the
agent is done, for users who keep gloo (or NCCL) as their process group.

    import deputy.torch
    state = deputy.torch.HookState(agent=os.environ.get("DEPUTY_AGENT"))
    ddp_model.register_comm_hook(state, deputy.torch.allreduce_hook)
    ...
    state.close()

Supported: Debian's python3-torch 1.13 (`GradBucket.buffer()`), CPU tensors."""

import atexit
import os
import queue
import secrets
import threading
import weakref
from typing import Any, Optional

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

from deputy.context import Context
from deputy.constants import ANY_SOURCE
from deputy.team import Team


_running: "weakref.WeakSet[_Completer]" = weakref.WeakSet()


@atexit.register
def _stop_completers() -> None:
    for completer in list(_running):
        completer.stop()


class _Completer:
    """One thread that waits for deputy requests in the order they were
    posted and completes a torch Future for each (collectives complete in
    that order). It is stopped before the interpreter finalizes (atexit):
    a daemon thread still inside torch's Future.set_result, which releases
    the GIL, when the main thread finishes would be ended by Python as it
    takes the GIL back, unwinding through torch's noexcept C++ frames —
    std::terminate, "terminate called without an active exception"."""

    def __init__(self, name: str):
        self._posted: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        _running.add(self)

    def _run(self) -> None:
        while True:
            item = self._posted.get()
            if item is None:
                return
            request, then, result, future = item
            try:
                if request is not None:
                    request.wait()  # (releases the GIL)
                if then is not None:
                    then()
                future.set_result(result)
            except BaseException as e:  # the waiter raises it
                future.set_exception(e)

    def post(self, request: Any, result: Any, then: Optional[Any] = None) -> torch.futures.Future:
        """A Future completed with `result` once `request` is done and
        then() has run."""
        future: torch.futures.Future = torch.futures.Future()
        self._posted.put((request, then, result, future))
        return future

    def stop(self) -> None:
        """Completes what is posted, then ends the thread (idempotent)."""
        if self._thread.is_alive():
            self._posted.put(None)
            self._thread.join()


class HookState:
    """The team a DDP model's gradients are reduced on: the ranks of
    `process_group` (default: the world) agree a key and a job secret over
    it (rank 0 draws them; `broadcast_object_list`), then each attaches to
    its node's agent (`options`: deputy.Context's keywords, e.g. `agent`)
    and joins; where no agent answers, one is started (as the backend
    does). One thread completes the Futures in the order the buckets were
    posted. close() when training is done."""

    def __init__(self, process_group: Optional[Any] = None, **options: Any):
        group = process_group or dist.group.WORLD
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        drawn = [(f"ddp-{secrets.token_hex(8)}", secrets.token_hex(16)) if rank == 0 else None]
        # (src is a global rank: the group's rank 0)
        dist.broadcast_object_list(drawn, src=dist.get_global_rank(group, 0)
                                   if group is not dist.group.WORLD else 0, group=group)
        key, secret = drawn[0]
        options.setdefault("job_secret", secret)
        options.setdefault("start_agent", _start_agent())
        self.size = size
        self.ctx = Context(**options)
        try:
            self.team = Team(self.ctx, key, rank, size)
        except BaseException:
            self.ctx.close()
            raise
        self._completer = _Completer("deputy-ddp-hook")

    def close(self) -> None:
        """Completes what is posted, then leaves the team and detaches."""
        self._completer.stop()
        self.team.close()
        self.ctx.close()


# (Real annotations, not strings: DDP checks the hook's signature.)
def allreduce_hook(state: HookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP's allreduce through deputy: the bucket divided by the group size
    (as DDP's default hook does), summed over the members in place, the
    Future completed with it."""
    tensor = bucket.buffer()
    tensor.div_(state.size)
    return state._completer.post(state.team.iallreduce(tensor), tensor)


# --- the torch.distributed backend "deputy" ---
#
# A Python ProcessGroup (torch 1.13 dispatches dist.* calls to a Python
# subclass's methods): each group is a deputy team whose key rank 0 puts
# in the group's store; the job secret, drawn once by the world's rank 0,
# is the process's one context's. Works are deputy requests; outputs that
# are lists of tensors are reduced or gathered in one flat buffer and copied
# out when the work completes (a list of separate tensors is not one
# buffer).

_context: Optional[Context] = None
_context_lock = threading.Lock()
_REDUCE_OPS = {
    dist.ReduceOp.RedOpType.SUM: "sum", dist.ReduceOp.RedOpType.PRODUCT: "prod",
    dist.ReduceOp.RedOpType.MIN: "min", dist.ReduceOp.RedOpType.MAX: "max",
    dist.ReduceOp.RedOpType.BAND: "band", dist.ReduceOp.RedOpType.BOR: "bor",
    dist.ReduceOp.RedOpType.BXOR: "bxor",
}


def _shared_context(store: Any, rank: int) -> Context:
    """The process's context: the first group's rank 0 draws the job secret
    and puts it in that group's store (the world's, under init_process_group)."""
    global _context
    with _context_lock:
        if _context is None:
            if rank == 0:
                store.set("deputy/secret", secrets.token_hex(16))
            secret = store.get("deputy/secret").decode()
            _context = Context(agent=os.environ.get("DEPUTY_AGENT"), job_secret=secret,
                               start_agent=_start_agent())
        return _context


def _start_agent() -> bool:
    """Where no agent answers, the first rank of the node starts one
    (deputy/agent_start.py), unless $DEPUTY_START_AGENT is 0."""
    return os.environ.get("DEPUTY_START_AGENT", "1") != "0"


def _reduce_op(opts: Any) -> str:
    kind = getattr(opts.reduceOp, "op", opts.reduceOp)
    name = _REDUCE_OPS.get(kind)
    if name is None:
        raise RuntimeError(f"deputy backend: reduction {kind} is not one deputy has "
                           "(SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR)")
    return name


# Works: torch's C++ side (DDP's reducer, parameter checks) waits on the
# C++ Work it gets back and never calls a Python subclass's wait() in torch
# 1.13, so each operation is a torch Future wrapped by torch's own
# _create_work_from_future, completed by the process's one _Completer.
_completer: Optional[_Completer] = None


def _work(request: Any, result: list, then: Optional[Any] = None) -> Any:
    global _completer
    with _context_lock:
        if _completer is None:
            _completer = _Completer("deputy-works")
    return _create_work_from_future(_completer.post(request, result, then))


def _flat(tensors: list) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors]) if tensors else torch.empty(0)


class ProcessGroupDeputy(dist.ProcessGroup):
    """torch.distributed's process group on a deputy team."""

    def __init__(self, store: Any, rank: int, size: int, timeout: Any):
        super().__init__(rank, size)
        ctx = _shared_context(store, rank)
        if rank == 0:
            store.set("deputy/key", f"torch-{secrets.token_hex(8)}")
        key = store.get("deputy/key").decode()
        self.team = Team(ctx, key, rank, size)

    def getBackendName(self) -> str:
        return "deputy"

    @staticmethod
    def _one(tensors: list, what: str) -> torch.Tensor:
        if len(tensors) != 1:
            raise RuntimeError(f"deputy backend: {what} takes one tensor per process "
                               f"(got {len(tensors)})")
        return tensors[0]

    def allreduce(self, tensors: list, opts: Any) -> Any:
        t = self._one(tensors, "allreduce")
        return _work(self.team.iallreduce(t, None, _reduce_op(opts)), tensors)

    def broadcast(self, tensors: list, opts: Any) -> Any:
        t = self._one(tensors, "broadcast")
        return _work(self.team.ibcast(t, opts.rootRank), tensors)

    def reduce(self, tensors: list, opts: Any) -> Any:
        t = self._one(tensors, "reduce")
        root = opts.rootRank
        # In place at the root (src == dst); elsewhere the result is not kept.
        return _work(self.team.ireduce(t, t if self.rank() == root else None, _reduce_op(opts),
                                       root), tensors)

    def barrier(self, opts: Any = None) -> Any:
        return _work(self.team.ibarrier(), [])

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> Any:
        return _work(self.team.iallgather(input, output), [output])

    def allgather(self, output_tensors: list, input_tensors: list, opts: Any = None) -> Any:
        t = self._one(input_tensors, "allgather")
        outs = self._one(output_tensors, "allgather")
        flat = torch.empty(t.numel() * self.size(), dtype=t.dtype)

        def copy_out() -> None:
            for i, o in enumerate(outs):
                o.copy_(flat[i * t.numel():(i + 1) * t.numel()].view_as(o))
        return _work(self.team.iallgather(t, flat), output_tensors, copy_out)

    def _reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor,
                             opts: Any) -> Any:
        return _work(self.team.ireduce_scatter(input, output, _reduce_op(opts)), [output])

    def reduce_scatter(self, output_tensors: list, input_tensors: list, opts: Any) -> Any:
        out = self._one(output_tensors, "reduce_scatter")
        flat = _flat(self._one(input_tensors, "reduce_scatter"))
        return _work(self.team.ireduce_scatter(flat, out, _reduce_op(opts)), output_tensors,
                     lambda: flat)  # (holds the flat input)

    def alltoall_base(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: list,
                      input_split_sizes: list, opts: Any = None) -> Any:
        n = self.size()
        if not output_split_sizes and not input_split_sizes:
            return _work(self.team.ialltoall(input, output), [output])
        # Split sizes count rows of the first dimension.
        row_in = input[0].numel() if input.dim() > 1 else 1
        row_out = output[0].numel() if output.dim() > 1 else 1
        sc = [s * row_in for s in (input_split_sizes or [input.size(0) // n] * n)]
        rc = [s * row_out for s in (output_split_sizes or [output.size(0) // n] * n)]
        sd = [sum(sc[:i]) for i in range(n)]
        rd = [sum(rc[:i]) for i in range(n)]
        return _work(self.team.ialltoallv(input, sc, sd, output, rc, rd), [output])

    def alltoall(self, output_tensors: list, input_tensors: list, opts: Any = None) -> Any:
        flat_in = _flat(input_tensors)
        sizes_in = [t.numel() for t in input_tensors]
        sizes_out = [t.numel() for t in output_tensors]
        flat_out = torch.empty(sum(sizes_out), dtype=flat_in.dtype)
        n = self.size()
        req = self.team.ialltoallv(flat_in, sizes_in, [sum(sizes_in[:i]) for i in range(n)],
                                   flat_out, sizes_out, [sum(sizes_out[:i]) for i in range(n)])

        def copy_out() -> None:
            at = 0
            for o in output_tensors:
                o.copy_(flat_out[at:at + o.numel()].view_as(o))
                at += o.numel()
        return _work(req, output_tensors, copy_out)

    def gather(self, output_tensors: list, input_tensors: list, opts: Any) -> Any:
        t = self._one(input_tensors, "gather")
        root = opts.rootRank
        if self.rank() != root:
            return _work(self.team.igather(t, None, root), [])
        outs = self._one(output_tensors, "gather")
        flat = torch.empty(t.numel() * self.size(), dtype=t.dtype)

        def copy_out() -> None:
            for i, o in enumerate(outs):
                o.copy_(flat[i * t.numel():(i + 1) * t.numel()].view_as(o))
        return _work(self.team.igather(t, flat, root), output_tensors, copy_out)

    def scatter(self, output_tensors: list, input_tensors: list, opts: Any) -> Any:
        out = self._one(output_tensors, "scatter")
        root = opts.rootRank
        src = _flat(self._one(input_tensors, "scatter")) if self.rank() == root else None
        return _work(self.team.iscatter(src, out, root), output_tensors,
                     (lambda: src) if src is not None else None)


    # Point-to-point (dist.send / recv / isend / irecv): deputy's messages on
    # the group's team, tags as torch gives them. A tensor is sent as its
    # bytes (contiguous, as gloo requires too).
    @staticmethod
    def _contiguous(tensors: list, what: str) -> torch.Tensor:
        t = ProcessGroupDeputy._one(tensors, what)
        if not t.is_contiguous():
            raise RuntimeError(f"deputy backend: {what} takes a contiguous tensor")
        return t

    def send(self, tensors: list, dstRank: int, tag: int) -> Any:
        t = self._contiguous(tensors, "send")
        return _work(self.team.isend(t, dstRank, tag), tensors)

    def recv(self, tensors: list, srcRank: int, tag: int) -> Any:
        t = self._contiguous(tensors, "recv")
        return _work(self.team.irecv(t, srcRank, tag), tensors)

    def recv_anysource(self, tensors: list, tag: int) -> Any:
        t = self._contiguous(tensors, "recv")
        return _SourceWork(self.team.irecv(t, ANY_SOURCE, tag), tensors)


class _SourceWork(dist.Work):
    """A receive from any source: torch asks its Work which rank sent
    (dist.recv(src=None) returns it), which a Work made from a Future
    cannot say."""

    def __init__(self, request: Any, tensors: list):
        super().__init__()
        self._request = request
        self._tensors = tensors

    def wait(self, timeout: Any = None) -> bool:
        self._request.wait()  # (releases the GIL)
        return True

    def is_completed(self) -> bool:
        return self._request.test()

    def is_success(self) -> bool:
        return self._request.test()

    def result(self) -> list:
        return self._tensors

    def _source_rank(self) -> int:
        self._request.wait()
        message = self._request.message
        assert message is not None
        return message.source


def _create(store: Any, rank: int, size: int, timeout: Any) -> ProcessGroupDeputy:
    return ProcessGroupDeputy(store, rank, size, timeout)


# `import deputy.torch` registers the backend: init_process_group("deputy").
if "deputy" not in dist.Backend.__dict__ and not hasattr(dist.Backend, "DEPUTY"):
    dist.Backend.register_backend("deputy", _create)
