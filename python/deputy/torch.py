"""deputy for PyTorch: a DDP communication hook that posts each gradient
bucket to deputy and completes a torch Future when the agent is done, for
users who keep gloo (or NCCL) as their process group. (The torch.distributed
backend itself is the next step of this module.)

    import deputy.torch
    state = deputy.torch.HookState(agent=os.environ.get("DEPUTY_AGENT"))
    ddp_model.register_comm_hook(state, deputy.torch.allreduce_hook)
    ...
    state.close()

Supported: Debian's python3-torch 1.13 (`GradBucket.buffer()`), CPU tensors."""

import queue
import secrets
import threading
from typing import Any, Optional

import torch
import torch.distributed as dist

from deputy.context import Context
from deputy.team import Team


class HookState:
    """The team a DDP model's gradients are reduced on: the ranks of
    `process_group` (default: the world) agree a key and a job secret over
    it (rank 0 draws them; `broadcast_object_list`), then each attaches to
    its node's agent (`options`: deputy.Context's keywords, e.g. `agent`)
    and joins. One thread completes the Futures in the order the buckets
    were posted. close() when training is done."""

    def __init__(self, process_group: Optional[Any] = None, **options: Any):
        group = process_group or dist.group.WORLD
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        drawn = [(f"ddp-{secrets.token_hex(8)}", secrets.token_hex(16)) if rank == 0 else None]
        # (src is a global rank: the group's rank 0)
        dist.broadcast_object_list(drawn, src=dist.get_global_rank(group, 0)
                                   if group is not dist.group.WORLD else 0, group=group)
        key, secret = drawn[0]
        options.setdefault("job_secret", secret)
        self.size = size
        self.ctx = Context(**options)
        try:
            self.team = Team(self.ctx, key, rank, size)
        except BaseException:
            self.ctx.close()
            raise
        self._posted: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._complete, name="deputy-ddp-hook",
                                        daemon=True)
        self._thread.start()

    def _complete(self) -> None:
        while True:
            item = self._posted.get()
            if item is None:
                return
            request, tensor, future = item
            try:
                request.wait()  # (releases the GIL)
                future.set_result(tensor)
            except BaseException as e:  # the training loop's wait raises it
                future.set_exception(e)

    def close(self) -> None:
        """Completes what is posted, then leaves the team and detaches."""
        if self._thread.is_alive():
            self._posted.put(None)
            self._thread.join()
        self.team.close()
        self.ctx.close()


# (Real annotations, not strings: DDP checks the hook's signature.)
def allreduce_hook(state: HookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP's allreduce through deputy: the bucket divided by the group size
    (as DDP's default hook does), summed over the members in place, the
    Future completed with it."""
    tensor = bucket.buffer()
    tensor.div_(state.size)
    request = state.team.iallreduce(tensor)
    future: torch.futures.Future = torch.futures.Future()
    state._posted.put((request, tensor, future))
    return future
